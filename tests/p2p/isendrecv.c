/*
 * p2p/isendrecv: MPI_Isendrecv and MPI_Isendrecv_replace (MPI-4.0) around a ring, with a
 * contiguous and a strided datatype, completed by MPI_Wait, MPI_Test loops and MPI_Waitall;
 * the status is the receive's (source, tag, count); MPI_PROC_NULL neighbours; a request
 * freed while active still delivers; argument errors.
 */
#include "util.h"

#define N 1000
/* A check of the status an MPI_Isendrecv gave (MPICH 4.0.2 leaves it unfilled). */
#define CHECK_ST(x)                          \
    do {                                     \
        if (!tu_quirk("isendrecv_status"))   \
            x;                               \
    } while (0)

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *sb = tu_malloc(2 * N * sizeof(int)), *rb = tu_malloc(2 * N * sizeof(int));
    MPI_Request q[2];
    MPI_Status st;

    /* 1. Contiguous, Wait: receive from the left what it sent right. */
    for (int i = 0; i < N; i++) {
        sb[i] = rank * N + i;
        rb[i] = -1;
    }
    CHECK_MPI(MPI_Isendrecv(sb, N, MPI_INT, right, 7, rb, N, MPI_INT, left, 7, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Wait(&q[0], &st));
    CHECK(q[0] == MPI_REQUEST_NULL);
    CHECK_ST(CHECK_EQ(st.MPI_SOURCE, left));
    CHECK_ST(CHECK_EQ(st.MPI_TAG, 7));
    int n;
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK_ST(CHECK_EQ(n, N));
    for (int i = 0; i < N; i++)
        CHECK_EQ(rb[i], left * N + i);

    /* 2. Strided type, replace, Test loop, any source. */
    MPI_Datatype every2;
    MPI_Type_vector(N, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    for (int i = 0; i < 2 * N; i++)
        sb[i] = i % 2 ? -5 : rank * 10 + i;
    CHECK_MPI(MPI_Isendrecv_replace(sb, 1, every2, right, 3 + rank, MPI_ANY_SOURCE, 3 + left, MPI_COMM_WORLD, &q[0]));
    int done = 0;
    while (!done)
        CHECK_MPI(MPI_Test(&q[0], &done, &st));
    CHECK_ST(CHECK_EQ(st.MPI_SOURCE, left));
    CHECK_ST(CHECK_EQ(st.MPI_TAG, 3 + left));
    if (!tu_quirk("replace_noncontig"))
        for (int i = 0; i < 2 * N; i++)
            CHECK_EQ(sb[i], i % 2 ? -5 : left * 10 + i);

    /* 3. Two at once (both directions), Waitall; large counts through the _c forms. */
    for (int i = 0; i < N; i++)
        sb[i] = rank;
    CHECK_MPI(MPI_Isendrecv_c(sb, N, MPI_INT, right, 1, rb, N, MPI_INT, left, 1, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Isendrecv_replace_c(sb + N, 0, MPI_INT, left, 2, right, 2, MPI_COMM_WORLD, &q[1]));
    MPI_Status sts[2];
    CHECK_MPI(MPI_Waitall(2, q, sts));
    CHECK_ST(CHECK_EQ(sts[0].MPI_SOURCE, left));
    CHECK_ST(CHECK_EQ(sts[1].MPI_SOURCE, right));
    MPI_Get_count(&sts[1], MPI_INT, &n);
    CHECK_ST(CHECK_EQ(n, 0));
    for (int i = 0; i < N; i++)
        CHECK_EQ(rb[i], left);

    /* 4. MPI_PROC_NULL on both sides completes at once with the null status. */
    CHECK_MPI(MPI_Isendrecv(sb, 1, MPI_INT, MPI_PROC_NULL, 0, rb, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Wait(&q[0], &st));
    CHECK_ST(CHECK_EQ(st.MPI_SOURCE, MPI_PROC_NULL));
    CHECK_ST(CHECK_EQ(st.MPI_TAG, MPI_ANY_TAG));

    /* 5. Freed while active: the data still arrives. */
    rb[0] = -1;
    CHECK_MPI(MPI_Isendrecv(&rank, 1, MPI_INT, right, 9, rb, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Request_free(&q[0]));
    int token = 0;
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, right, 10, &token, 1, MPI_INT, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    /* The freed receive completes on its own (a rendezvous may still be moving its data). */
    time_t start = time(NULL);
    while (((volatile int *)rb)[0] != left) {
        int f_;
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &f_, MPI_STATUS_IGNORE);
        CHECK_MSG(time(NULL) - start < 20, "the freed MPI_Isendrecv never delivered");
    }

    /* 6. Errors go to the communicator. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_CLASS(MPI_Isendrecv(sb, 1, MPI_INT, size, 0, rb, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &q[0]), MPI_ERR_RANK);
    CHECK_CLASS(MPI_Isendrecv_replace(sb, -1, MPI_INT, right, 0, left, 0, MPI_COMM_WORLD, &q[0]), MPI_ERR_COUNT);

    MPI_Type_free(&every2);
    free(sb);
    free(rb);
    return tu_finish();
}
