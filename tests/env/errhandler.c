/*
 * Error handlers on communicators.
 *  - the default handler of MPI_COMM_WORLD and MPI_COMM_SELF is MPI_ERRORS_ARE_FATAL;
 *  - with MPI_ERRORS_RETURN set (MPI_Comm_set/get_errhandler), invalid arguments return the
 *    right error class and the process continues: bad rank (MPI_Send to size, to -5, to
 *    MPI_ANY_SOURCE; MPI_Recv from size), bad tag (negative, MPI_ANY_TAG on a send, above
 *    MPI_TAG_UB), bad count (-1 on Send, Recv, Isend), bad datatype (MPI_DATATYPE_NULL, a
 *    derived type not committed), bad communicator (MPI_COMM_NULL; such errors go to the
 *    handler of MPI_COMM_SELF in MPI 4, of MPI_COMM_WORLD before, so both are set), and no
 *    request is created by a failing nonblocking call;
 *  - a user handler (MPI_Comm_create_errhandler) is called with the communicator and the
 *    error code, then the call returns that code; MPI_Comm_call_errhandler invokes it;
 *    MPI_Errhandler_free;
 *  - after all that, communication still works.
 * Any size >= 1.
 */
#include "util.h"

static int handler_calls, handler_code;
static MPI_Comm handler_comm;

static void my_handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_comm = *comm;
    handler_code = *code;
}

#define EXPECT(call, cls)                                                                  \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        CHECK_CLASS(rc_, cls);                                                             \
        if (rc_ != MPI_SUCCESS) {                                                          \
            char s_[MPI_MAX_ERROR_STRING];                                                 \
            int l_ = -1;                                                                   \
            CHECK_MPI(MPI_Error_string(rc_, s_, &l_));                                     \
            CHECK(l_ > 0 && l_ < MPI_MAX_ERROR_STRING);                                    \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Errhandler eh, mine, got;
    MPI_Request r;
    MPI_Datatype uncommitted;
    int v = 0, *tag_ub, flag, partner, w;
    MPI_Status st;

    tu_init(&argc, &argv);
    partner = tu_partner();

    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK_MPI(MPI_Errhandler_free(&eh));

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag);

    /* bad rank */
    EXPECT(MPI_Send(&v, 1, MPI_INT, tu_size, 1, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(&v, 1, MPI_INT, -5, 1, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(&v, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Recv(&v, 1, MPI_INT, tu_size, 1, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
    EXPECT(MPI_Send(&v, 1, MPI_INT, 1, 1, MPI_COMM_SELF), MPI_ERR_RANK);
    r = MPI_REQUEST_NULL;
    EXPECT(MPI_Isend(&v, 1, MPI_INT, tu_size + 3, 1, MPI_COMM_WORLD, &r), MPI_ERR_RANK);
    CHECK(r == MPI_REQUEST_NULL);
    EXPECT(MPI_Irecv(&v, 1, MPI_INT, -7, 1, MPI_COMM_WORLD, &r), MPI_ERR_RANK);
    CHECK(r == MPI_REQUEST_NULL);

    /* bad tag */
    EXPECT(MPI_Send(&v, 1, MPI_INT, tu_rank, -1, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Send(&v, 1, MPI_INT, tu_rank, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Recv(&v, 1, MPI_INT, tu_rank, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    if (*tag_ub < INT_MAX)
        EXPECT(MPI_Send(&v, 1, MPI_INT, tu_rank, *tag_ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Isend(&v, 1, MPI_INT, tu_rank, -3, MPI_COMM_WORLD, &r), MPI_ERR_TAG);
    CHECK(r == MPI_REQUEST_NULL);

    /* bad count */
    EXPECT(MPI_Send(&v, -1, MPI_INT, tu_rank, 1, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Recv(&v, -1, MPI_INT, tu_rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_COUNT);
    EXPECT(MPI_Isend(&v, -1, MPI_INT, tu_rank, 1, MPI_COMM_WORLD, &r), MPI_ERR_COUNT);
    CHECK(r == MPI_REQUEST_NULL);

    /* bad datatype */
    EXPECT(MPI_Send(&v, 1, MPI_DATATYPE_NULL, tu_rank, 1, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Recv(&v, 1, MPI_DATATYPE_NULL, tu_rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_TYPE);
    CHECK_MPI(MPI_Type_contiguous(1, MPI_INT, &uncommitted));
    EXPECT(MPI_Send(&v, 1, uncommitted, tu_rank, 1, MPI_COMM_WORLD), MPI_ERR_TYPE);
    CHECK_MPI(MPI_Type_free(&uncommitted));

    /* bad communicator */
    EXPECT(MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_NULL, &st), MPI_ERR_COMM);
    EXPECT(MPI_Irecv(&v, 1, MPI_INT, 0, 1, MPI_COMM_NULL, &r), MPI_ERR_COMM);
    CHECK(r == MPI_REQUEST_NULL);
    EXPECT(MPI_Comm_size(MPI_COMM_NULL, &w), MPI_ERR_COMM);

    /* None of the failed sends to self delivered anything. */
    CHECK_MPI(MPI_Iprobe(tu_rank, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK_MSG(!flag, "a failed send delivered a message with tag %d", st.MPI_TAG);

    /* A user handler. */
    CHECK_MPI(MPI_Comm_create_errhandler(my_handler, &mine));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got));
    CHECK(got == mine);
    CHECK_MPI(MPI_Errhandler_free(&got));
    {
        int rc = MPI_Send(&v, 1, MPI_INT, tu_size, 1, MPI_COMM_WORLD), cls;
        CHECK_EQ(handler_calls, 1);
        CHECK(handler_comm == MPI_COMM_WORLD);
        CHECK_EQ(rc, handler_code);
        MPI_Error_class(handler_code, &cls);
        CHECK_EQ(cls, MPI_ERR_RANK);
        CHECK_MPI(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER));
        CHECK_EQ(handler_calls, 2);
        CHECK_EQ(handler_code, MPI_ERR_OTHER);
    }
    /* Freeing the handler while it is set is allowed; it stays in use. */
    CHECK_MPI(MPI_Errhandler_free(&mine));
    CHECK(mine == MPI_ERRHANDLER_NULL);
    EXPECT(MPI_Send(&v, 1, MPI_INT, tu_rank, -1, MPI_COMM_WORLD), MPI_ERR_TAG);
    CHECK_EQ(handler_calls, 3);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* The process continues: a normal exchange. */
    v = 100 + tu_rank;
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, partner, 5, &w, 1, MPI_INT, partner, 5,
                           MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_INT, partner, 5, 1);
    CHECK_EQ(w, 100 + partner);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    return tu_finish();
}
