/*
 * MPI_Comm_split: by parity with reversed keys (ranks ordered by key), equal keys (ties keep
 * the parent's order), MPI_UNDEFINED (MPI_COMM_NULL), one color per process, a split of a
 * split; the new groups are checked member by member (translate to MPI_COMM_WORLD's group)
 * and every new communicator carries traffic. A negative color other than MPI_UNDEFINED is
 * an MPI_ERR_ARG error (the erroneous process still takes part, so the others are not left
 * waiting). Any number of processes.
 */
#include "util.h"

static MPI_Group world_group;

/* World rank of rank r of comm. */
static int world_rank_of(MPI_Comm comm, int r)
{
    MPI_Group g;
    int w;
    CHECK_MPI(MPI_Comm_group(comm, &g));
    CHECK_MPI(MPI_Group_translate_ranks(g, 1, &r, world_group, &w));
    CHECK_MPI(MPI_Group_free(&g));
    return w;
}

/* Every process sends its world rank to every other one on comm (and to itself). */
static void all_to_all(MPI_Comm comm)
{
    int size, rank, i, me = tu_rank;
    MPI_Request *rq;
    int *in;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    rq = tu_malloc(sizeof(MPI_Request) * (size_t)size * 2);
    in = tu_malloc(sizeof(int) * (size_t)size);
    for (i = 0; i < size; i++)
        CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, i, 3, comm, &rq[i]));
    for (i = 0; i < size; i++)
        CHECK_MPI(MPI_Isend(&me, 1, MPI_INT, i, 3, comm, &rq[size + i]));
    CHECK_MPI(MPI_Waitall(2 * size, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < size; i++)
        CHECK_EQ(in[i], world_rank_of(comm, i));
    free(rq);
    free(in);
}

int main(int argc, char **argv)
{
    MPI_Comm c, c2;
    int size, rank, i, n;

    tu_init(&argc, &argv);
    n = tu_size;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));

    /* Parity, keys reversed: in color k, rank j is the (j-th from the top) process. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, n - tu_rank, &c));
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    {
        int members = 0, above = 0;
        for (i = 0; i < n; i++)
            if (i % 2 == tu_rank % 2) {
                members++;
                if (i > tu_rank)
                    above++;
            }
        CHECK_EQ(size, members);
        CHECK_EQ(rank, above);
        for (i = 0; i < size; i++) {
            int w = world_rank_of(c, i);
            CHECK_EQ(w % 2, tu_rank % 2);
            if (i > 0)
                CHECK_INT(w, <, world_rank_of(c, i - 1));
        }
    }
    all_to_all(c);

    /* A split of the split: halves of it by rank, keys equal (ties keep the order). */
    CHECK_MPI(MPI_Comm_split(c, rank < size / 2, 0, &c2));
    {
        int s2, r2;
        CHECK_MPI(MPI_Comm_size(c2, &s2));
        CHECK_MPI(MPI_Comm_rank(c2, &r2));
        CHECK_EQ(s2, rank < size / 2 ? size / 2 : size - size / 2);
        CHECK_EQ(r2, rank < size / 2 ? rank : rank - size / 2);
        all_to_all(c2);
    }
    CHECK_MPI(MPI_Comm_free(&c2));
    CHECK_MPI(MPI_Comm_free(&c));

    /* MPI_UNDEFINED on the odd ranks: they get MPI_COMM_NULL, the evens a communicator. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2 ? MPI_UNDEFINED : 3, 0, &c));
    if (tu_rank % 2) {
        CHECK(c == MPI_COMM_NULL);
    } else {
        CHECK_MPI(MPI_Comm_size(c, &size));
        CHECK_EQ(size, (n + 1) / 2);
        all_to_all(c);
        CHECK_MPI(MPI_Comm_free(&c));
    }

    /* Everybody undefined. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &c));
    CHECK(c == MPI_COMM_NULL);

    /* One color per process. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank, 0, &c));
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK_EQ(size, 1);
    CHECK_EQ(rank, 0);
    all_to_all(c);
    CHECK_MPI(MPI_Comm_free(&c));

    /* Same color, same key: the parent's order. */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, 42, &c));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK_EQ(rank, tu_rank);
    all_to_all(c);
    CHECK_MPI(MPI_Comm_free(&c));

    /* A bad color on the last process: an error there, the others get their communicator. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (!tu_quirk("unchecked_color")) {
        int rc = MPI_Comm_split(MPI_COMM_WORLD, tu_rank == n - 1 ? -5 : 0, 0, &c);
        if (tu_rank == n - 1) {
            CHECK_CLASS(rc, MPI_ERR_ARG);
            CHECK(c == MPI_COMM_NULL);
            /* Take part as an undefined color so the others complete. */
            CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &c));
            CHECK(c == MPI_COMM_NULL);
        } else {
            CHECK_MPI(rc);
            CHECK_MPI(MPI_Comm_size(c, &size));
            CHECK_EQ(size, n - 1);
            all_to_all(c);
            CHECK_MPI(MPI_Comm_free(&c));
        }
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    CHECK_MPI(MPI_Group_free(&world_group));
    return tu_finish();
}
