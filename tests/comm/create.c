/*
 * MPI_Comm_create and MPI_Comm_create_group: a reordered subgroup (members get it, the rest
 * MPI_COMM_NULL), disjoint groups supplied by different processes in one call (MPI-2.2),
 * the empty group, the whole group (CONGRUENT with the parent); create_group called by the
 * members only (the others do something else meanwhile), two create_group calls on
 * overlapping groups told apart by their tags, a create_group nested in a create_group'd
 * communicator, and 200 create_group calls in a row with one tag on pseudo-random subsets
 * (each process calls only those it is in, so a process may already be in a later call
 * while a member of an earlier one is still in it: the calls must not take each other's
 * messages). Each new communicator carries traffic. A group with a process outside the
 * communicator is an error (MPI_ERR_GROUP or another class). Any number of processes.
 */
#include "util.h"

static void ring(MPI_Comm comm, int seed)
{
    int size, rank, right, left, out, in = -1;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    out = seed * 1000 + rank;
    CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 7, &in, 1, MPI_INT, left, 7, comm,
                           MPI_STATUS_IGNORE));
    CHECK_EQ(in, seed * 1000 + left);
}

int main(int argc, char **argv)
{
    MPI_Group world, g, g2;
    MPI_Comm c, c2;
    int n, i, size, rank, cmp, *ranks;

    tu_init(&argc, &argv);
    n = tu_size;
    ranks = tu_malloc(sizeof(int) * (size_t)n);
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));

    /* The upper half (at least one process), in reverse order. */
    {
        int lo = n / 2, k = 0;
        for (i = n - 1; i >= lo; i--)
            ranks[k++] = i;
        CHECK_MPI(MPI_Group_incl(world, k, ranks, &g));
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        if (tu_rank >= lo) {
            CHECK(c != MPI_COMM_NULL);
            CHECK_MPI(MPI_Comm_size(c, &size));
            CHECK_MPI(MPI_Comm_rank(c, &rank));
            CHECK_EQ(size, k);
            CHECK_EQ(rank, n - 1 - tu_rank);
            ring(c, 1);
            CHECK_MPI(MPI_Comm_free(&c));
        } else {
            CHECK(c == MPI_COMM_NULL);
        }
        CHECK_MPI(MPI_Group_free(&g));
    }

    /* Disjoint groups in one call: evens give the evens, odds the odds. */
    {
        int k = 0;
        for (i = tu_rank % 2; i < n; i += 2)
            ranks[k++] = i;
        CHECK_MPI(MPI_Group_incl(world, k, ranks, &g));
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        CHECK(c != MPI_COMM_NULL);
        CHECK_MPI(MPI_Comm_size(c, &size));
        CHECK_MPI(MPI_Comm_rank(c, &rank));
        CHECK_EQ(size, k);
        CHECK_EQ(rank, tu_rank / 2);
        ring(c, 2);
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_MPI(MPI_Group_free(&g));
    }

    /* Empty group: MPI_COMM_NULL everywhere. The whole group: CONGRUENT. */
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_EMPTY, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, world, &c));
    CHECK_MPI(MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
    ring(c, 3);

    /* create_group: only the lower half calls it; the upper half meanwhile talks on c. */
    {
        int hi = (n + 1) / 2; /* members: 0 .. hi-1 */
        for (i = 0; i < hi; i++)
            ranks[i] = i;
        CHECK_MPI(MPI_Group_incl(world, hi, ranks, &g));
        if (tu_rank < hi) {
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 11, &c2));
            CHECK_MPI(MPI_Comm_size(c2, &size));
            CHECK_MPI(MPI_Comm_rank(c2, &rank));
            CHECK_EQ(size, hi);
            CHECK_EQ(rank, tu_rank);
            ring(c2, 4);
            /* Nested: create_group on the new communicator with its first process only,
             * and with everybody. */
            {
                MPI_Group cg, one;
                MPI_Comm c3;
                int zero = 0;
                CHECK_MPI(MPI_Comm_group(c2, &cg));
                CHECK_MPI(MPI_Group_incl(cg, 1, &zero, &one));
                if (rank == 0) {
                    CHECK_MPI(MPI_Comm_create_group(c2, one, 0, &c3));
                    CHECK_MPI(MPI_Comm_size(c3, &size));
                    CHECK_EQ(size, 1);
                    ring(c3, 5);
                    CHECK_MPI(MPI_Comm_free(&c3));
                }
                CHECK_MPI(MPI_Comm_create_group(c2, cg, 1, &c3));
                ring(c3, 6);
                CHECK_MPI(MPI_Comm_free(&c3));
                CHECK_MPI(MPI_Group_free(&one));
                CHECK_MPI(MPI_Group_free(&cg));
            }
            CHECK_MPI(MPI_Comm_free(&c2));
        } else {
            /* A ring over the non-members only (ranks hi .. n-1 of c). */
            int m = n - hi, me = tu_rank - hi, out = 7000 + me, in = -1;
            CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, hi + (me + 1) % m, 7, &in, 1, MPI_INT,
                                   hi + (me + m - 1) % m, 7, c, MPI_STATUS_IGNORE));
            CHECK_EQ(in, 7000 + (me + m - 1) % m);
        }
        CHECK_MPI(MPI_Group_free(&g));
    }
    CHECK_MPI(MPI_Comm_free(&c));

    /* Overlapping groups, created one after the other in an order that differs between
     * processes: {0..n-1} with tag 21 and {0, n-1} with tag 22. Processes 0 and n-1 do the
     * pair first, the others the full group (which needs 0 and n-1 too), so the two calls
     * are in flight in different orders. */
    if (n >= 3) {
        int pair[2];
        pair[0] = 0;
        pair[1] = n - 1;
        CHECK_MPI(MPI_Group_incl(world, 2, pair, &g2));
        if (tu_rank == 0 || tu_rank == n - 1) {
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g2, 22, &c2));
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, world, 21, &c));
            ring(c2, 8);
            CHECK_MPI(MPI_Comm_free(&c2));
        } else {
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, world, 21, &c));
        }
        ring(c, 9);
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_MPI(MPI_Group_free(&g2));
    }

    /* A group with a process that is not in the communicator. */
    if (n >= 2) {
        MPI_Comm half;
        MPI_Group hg;
        int rc;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank == 0, 0, &half));
        CHECK_MPI(MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN));
        /* world's group is not a subgroup of half's (for the one-process side at least) */
        if (tu_rank == 0 && !tu_quirk("create_group_foreign")) {
            rc = MPI_Comm_create_group(half, world, 3, &c);
            CHECK_MSG(rc != MPI_SUCCESS, "create_group with foreign processes succeeded");
        }
        CHECK_MPI(MPI_Comm_group(half, &hg));
        CHECK_MPI(MPI_Comm_create(half, hg, &c));
        ring(c, 10);
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_MPI(MPI_Group_free(&hg));
        CHECK_MPI(MPI_Comm_free(&half));
    }

    /* The same tag, subsets changing every time: member k of one group and member k of the
     * next are different processes. */
    {
        unsigned seed = 12345;
        int round, k, count, in, got;
        for (round = 0; round < 200; round++) {
            count = 0;
            in = 0;
            for (k = 0; k < tu_size; k++) {
                seed = seed * 1103515245u + 12345u;
                if ((seed >> 16) & 1) {
                    ranks[count++] = k;
                    in |= k == tu_rank;
                }
            }
            if (count == 0)
                continue;
            CHECK_MPI(MPI_Group_incl(world, count, ranks, &g));
            if (in) {
                CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 5, &c));
                CHECK_MPI(MPI_Comm_size(c, &got));
                CHECK_EQ(got, count);
                if (round % 16 == 0)
                    ring(c, round);
                CHECK_MPI(MPI_Barrier(c));
                CHECK_MPI(MPI_Comm_free(&c));
            }
            CHECK_MPI(MPI_Group_free(&g));
        }
    }

    CHECK_MPI(MPI_Group_free(&world));
    free(ranks);
    return tu_finish();
}
