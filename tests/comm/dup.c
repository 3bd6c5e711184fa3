/*
 * MPI_Comm_dup and dup_with_info: the copy has the same size, ranks and group (CONGRUENT),
 * its traffic is separate from the parent's (the same tag on both, received in the opposite
 * order, each message lands on its own communicator; a wildcard receive on one never takes
 * the other's message), a dup of a dup works, MPI_COMM_SELF dups to a communicator of one;
 * Comm_compare (IDENT, CONGRUENT, SIMILAR for a reordered split, UNEQUAL); names (default
 * empty, set, truncation, MPI_COMM_WORLD's); the error handler is inherited; freeing sets the
 * handle to MPI_COMM_NULL; freeing a predefined communicator or MPI_COMM_NULL is an
 * MPI_ERR_COMM error. Any number of processes.
 */
#include "util.h"

/* Each process sends a token to its right neighbour on comm and receives from its left. */
static void ring(MPI_Comm comm, int seed)
{
    int size, rank, right, left, out, in = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    out = seed * 1000 + rank;
    CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 7, &in, 1, MPI_INT, left, 7, comm, &st));
    CHECK_EQ(in, seed * 1000 + left);
    CHECK_EQ(st.MPI_SOURCE, left);
}

int main(int argc, char **argv)
{
    MPI_Comm d, dd, s;
    int size, rank, cmp, len;
    char name[MPI_MAX_OBJECT_NAME];

    tu_init(&argc, &argv);

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    CHECK(d != MPI_COMM_NULL && d != MPI_COMM_WORLD);
    CHECK_MPI(MPI_Comm_size(d, &size));
    CHECK_MPI(MPI_Comm_rank(d, &rank));
    CHECK_EQ(size, tu_size);
    CHECK_EQ(rank, tu_rank);
    CHECK_MPI(MPI_Comm_compare(d, MPI_COMM_WORLD, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
    CHECK_MPI(MPI_Comm_compare(d, d, &cmp));
    CHECK_EQ(cmp, MPI_IDENT);
    ring(d, 1);
    ring(MPI_COMM_WORLD, 2);

    /* Isolation: the right neighbour sends on WORLD then on d, same tag; we receive d's first.
     * A wildcard receive on d must not take WORLD's message. */
    {
        int right = (tu_rank + 1) % tu_size, left = (tu_rank + tu_size - 1) % tu_size;
        int a = 100 + tu_rank, b = 200 + tu_rank, x = -1, y = -1;
        MPI_Request r[2];
        MPI_Status st;
        CHECK_MPI(MPI_Isend(&a, 1, MPI_INT, right, 5, MPI_COMM_WORLD, &r[0]));
        CHECK_MPI(MPI_Isend(&b, 1, MPI_INT, right, 5, d, &r[1]));
        CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, d, &st));
        CHECK_EQ(y, 200 + left);
        CHECK_EQ(st.MPI_SOURCE, left);
        CHECK_MPI(MPI_Recv(&x, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &st));
        CHECK_EQ(x, 100 + left);
        CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    }

    /* A dup of the dup, with info; it is independent of both. */
    {
        MPI_Info info;
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "false"));
        CHECK_MPI(MPI_Comm_dup_with_info(d, info, &dd));
        CHECK_MPI(MPI_Info_free(&info));
    }
    CHECK_MPI(MPI_Comm_compare(dd, d, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
    ring(dd, 3);
    CHECK_MPI(MPI_Comm_dup_with_info(dd, MPI_INFO_NULL, &s));
    ring(s, 4);
    CHECK_MPI(MPI_Comm_free(&s));
    CHECK(s == MPI_COMM_NULL);

    /* Names: a dup has none; set and read back; truncated to MPI_MAX_OBJECT_NAME - 1. */
    CHECK_MPI(MPI_Comm_get_name(dd, name, &len));
    CHECK_EQ(len, 0);
    CHECK_EQ(name[0], 0);
    CHECK_MPI(MPI_Comm_set_name(dd, "my communicator"));
    CHECK_MPI(MPI_Comm_get_name(dd, name, &len));
    CHECK(strcmp(name, "my communicator") == 0);
    CHECK_EQ(len, 15);
    {
        char longname[300];
        memset(longname, 'x', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        CHECK_MPI(MPI_Comm_set_name(dd, longname));
        CHECK_MPI(MPI_Comm_get_name(dd, name, &len));
        CHECK(len <= MPI_MAX_OBJECT_NAME - 1);
        CHECK_EQ((int)strlen(name), len);
    }
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0);
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
    CHECK(strcmp(name, "MPI_COMM_SELF") == 0);

    /* MPI_COMM_SELF's dup: one process. */
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &s));
    CHECK_MPI(MPI_Comm_size(s, &size));
    CHECK_EQ(size, 1);
    CHECK_MPI(MPI_Comm_compare(s, MPI_COMM_SELF, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
    CHECK_MPI(MPI_Comm_compare(s, MPI_COMM_WORLD, &cmp));
    CHECK_EQ(cmp, tu_size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL);
    ring(s, 5);
    CHECK_MPI(MPI_Comm_free(&s));

    /* SIMILAR: same members in reverse order. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, tu_size - tu_rank, &s));
    CHECK_MPI(MPI_Comm_compare(s, MPI_COMM_WORLD, &cmp));
    CHECK_EQ(cmp, tu_size == 1 ? MPI_CONGRUENT : MPI_SIMILAR);
    ring(s, 6);
    CHECK_MPI(MPI_Comm_free(&s));

    /* The error handler is inherited by dup; errors on the dup go to it. */
    {
        MPI_Errhandler eh;
        int rc, x = 0;
        CHECK_MPI(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Comm_dup(d, &s));
        CHECK_MPI(MPI_Comm_get_errhandler(s, &eh));
        CHECK(eh == MPI_ERRORS_RETURN);
        CHECK_MPI(MPI_Errhandler_free(&eh));
        rc = MPI_Send(&x, 1, MPI_INT, tu_size, 0, s);
        CHECK_CLASS(rc, MPI_ERR_RANK);
        CHECK_MPI(MPI_Comm_free(&s));
        /* Freeing the predefined communicators or MPI_COMM_NULL is an error. */
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        s = MPI_COMM_WORLD;
        rc = MPI_Comm_free(&s);
        CHECK_CLASS(rc, MPI_ERR_COMM);
        CHECK(s == MPI_COMM_WORLD);
        s = MPI_COMM_NULL;
        rc = MPI_Comm_free(&s);
        CHECK_CLASS(rc, MPI_ERR_COMM);
        rc = MPI_Comm_dup(MPI_COMM_NULL, &s);
        CHECK_CLASS(rc, MPI_ERR_COMM);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    CHECK_MPI(MPI_Comm_free(&dd));
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK(d == MPI_COMM_NULL);
    return tu_finish();
}
