/*
 * Groups: size and rank of the world group, MPI_GROUP_EMPTY; incl, excl, range_incl and
 * range_excl (order, strides, empty results); union, intersection, difference (order and
 * identities with the empty group); compare (IDENT, SIMILAR, UNEQUAL); translate_ranks
 * (MPI_PROC_NULL, MPI_UNDEFINED); the group of a communicator and of its dup; free; errors
 * under MPI_ERRORS_RETURN (duplicate or out-of-range ranks -> MPI_ERR_RANK, stride 0 ->
 * MPI_ERR_ARG, MPI_GROUP_NULL -> MPI_ERR_GROUP). No communication. Any number of processes.
 */
#include "util.h"

static int gsize(MPI_Group g)
{
    int n;
    CHECK_MPI(MPI_Group_size(g, &n));
    return n;
}

static int grank(MPI_Group g)
{
    int r;
    CHECK_MPI(MPI_Group_rank(g, &r));
    return r;
}

static int gcmp(MPI_Group a, MPI_Group b)
{
    int r;
    CHECK_MPI(MPI_Group_compare(a, b, &r));
    return r;
}

/* World ranks of the members of g, in order. */
static void world_ranks(MPI_Group world, MPI_Group g, int *out)
{
    int n = gsize(g), i;
    int *in = tu_malloc(sizeof(int) * (size_t)(n ? n : 1));
    for (i = 0; i < n; i++)
        in[i] = i;
    CHECK_MPI(MPI_Group_translate_ranks(g, n, in, world, out));
    free(in);
}

int main(int argc, char **argv)
{
    MPI_Group world, g, h, u, e;
    int n, i, r, *ranks, *tr;

    tu_init(&argc, &argv);
    n = tu_size;
    ranks = tu_malloc(sizeof(int) * (size_t)n * 3);
    tr = tu_malloc(sizeof(int) * (size_t)n * 3);

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_EQ(gsize(world), n);
    CHECK_EQ(grank(world), tu_rank);
    CHECK_EQ(gsize(MPI_GROUP_EMPTY), 0);
    CHECK_EQ(grank(MPI_GROUP_EMPTY), MPI_UNDEFINED);
    CHECK_EQ(gcmp(world, world), MPI_IDENT);
    CHECK_EQ(gcmp(MPI_GROUP_EMPTY, MPI_GROUP_EMPTY), MPI_IDENT);

    /* incl in reverse order: rank i of the new group is world rank n-1-i. */
    for (i = 0; i < n; i++)
        ranks[i] = n - 1 - i;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
    CHECK_EQ(gsize(g), n);
    CHECK_EQ(grank(g), n - 1 - tu_rank);
    world_ranks(world, g, tr);
    for (i = 0; i < n; i++)
        CHECK_EQ(tr[i], n - 1 - i);
    CHECK_EQ(gcmp(world, g), n == 1 ? MPI_IDENT : MPI_SIMILAR);
    /* translate from world to g, with MPI_PROC_NULL passed through */
    ranks[0] = MPI_PROC_NULL;
    CHECK_MPI(MPI_Group_translate_ranks(world, 1, ranks, g, tr));
    CHECK_EQ(tr[0], MPI_PROC_NULL);
    ranks[0] = 0;
    CHECK_MPI(MPI_Group_translate_ranks(world, 1, ranks, g, tr));
    CHECK_EQ(tr[0], n - 1);

    /* excl of the even world ranks: the odd ones in order */
    {
        int ne = 0;
        for (i = 0; i < n; i += 2)
            ranks[ne++] = i;
        CHECK_MPI(MPI_Group_excl(world, ne, ranks, &h));
        CHECK_EQ(gsize(h), n - ne);
        CHECK_EQ(grank(h), tu_rank % 2 ? tu_rank / 2 : MPI_UNDEFINED);
        world_ranks(world, h, tr);
        for (i = 0; i < n - ne; i++)
            CHECK_EQ(tr[i], 2 * i + 1);
        /* the evens, by range: same members as world minus h */
        {
            int rg[1][3];
            rg[0][0] = 0;
            rg[0][1] = n - 1;
            rg[0][2] = 2;
            CHECK_MPI(MPI_Group_range_incl(world, 1, rg, &u));
            CHECK_EQ(gsize(u), ne);
            CHECK_MPI(MPI_Group_difference(world, h, &e));
            CHECK_EQ(gcmp(u, e), MPI_IDENT);
            CHECK_MPI(MPI_Group_free(&e));
            /* union(evens, odds) has world's members, evens first */
            CHECK_MPI(MPI_Group_union(u, h, &e));
            CHECK_EQ(gsize(e), n);
            CHECK_EQ(gcmp(e, world), n <= 2 ? MPI_IDENT : MPI_SIMILAR);
            world_ranks(world, e, tr);
            for (i = 0; i < ne; i++)
                CHECK_EQ(tr[i], 2 * i);
            for (i = ne; i < n; i++)
                CHECK_EQ(tr[i], 2 * (i - ne) + 1);
            CHECK_MPI(MPI_Group_free(&e));
            /* intersection of evens and odds is empty; of world and odds is the odds */
            CHECK_MPI(MPI_Group_intersection(u, h, &e));
            CHECK_EQ(gsize(e), 0);
            CHECK_EQ(gcmp(e, MPI_GROUP_EMPTY), MPI_IDENT);
            CHECK_MPI(MPI_Group_free(&e));
            CHECK(e == MPI_GROUP_NULL);
            CHECK_MPI(MPI_Group_intersection(world, h, &e));
            CHECK_EQ(gcmp(e, h), MPI_IDENT);
            CHECK_MPI(MPI_Group_free(&e));
            /* range_excl of the evens gives the odds */
            CHECK_MPI(MPI_Group_range_excl(world, 1, rg, &e));
            CHECK_EQ(gcmp(e, h), MPI_IDENT);
            CHECK_MPI(MPI_Group_free(&e));
            /* a descending range with a negative stride, then a one-element range */
            if (n > 1) {
                int rr[2][3] = {{n - 1, 1, -1}, {0, 0, 1}};
                CHECK_MPI(MPI_Group_range_incl(world, 2, rr, &e));
                CHECK_EQ(gsize(e), n);
                world_ranks(world, e, tr);
                for (i = 0; i < n - 1; i++)
                    CHECK_EQ(tr[i], n - 1 - i);
                CHECK_EQ(tr[n - 1], 0);
                CHECK_MPI(MPI_Group_free(&e));
            }
            CHECK_MPI(MPI_Group_free(&u));
        }
        CHECK_MPI(MPI_Group_free(&h));
    }

    /* identities with the empty group */
    CHECK_MPI(MPI_Group_union(MPI_GROUP_EMPTY, world, &e));
    CHECK_EQ(gcmp(e, world), MPI_IDENT);
    CHECK_MPI(MPI_Group_free(&e));
    CHECK_MPI(MPI_Group_difference(world, world, &e));
    CHECK_EQ(gsize(e), 0);
    CHECK_MPI(MPI_Group_free(&e));
    CHECK_MPI(MPI_Group_incl(world, 0, ranks, &e));
    CHECK_EQ(gcmp(e, MPI_GROUP_EMPTY), MPI_IDENT);
    CHECK_MPI(MPI_Group_free(&e));
    CHECK_MPI(MPI_Group_excl(world, 0, ranks, &e));
    CHECK_EQ(gcmp(e, world), MPI_IDENT);
    CHECK_MPI(MPI_Group_free(&e));
    /* translating into the empty group: MPI_UNDEFINED everywhere */
    for (i = 0; i < n; i++)
        ranks[i] = i;
    CHECK_MPI(MPI_Group_translate_ranks(world, n, ranks, MPI_GROUP_EMPTY, tr));
    for (i = 0; i < n; i++)
        CHECK_EQ(tr[i], MPI_UNDEFINED);

    /* UNEQUAL: groups of different members */
    if (n > 1) {
        ranks[0] = 0;
        CHECK_MPI(MPI_Group_incl(world, 1, ranks, &e));
        ranks[0] = 1;
        CHECK_MPI(MPI_Group_incl(world, 1, ranks, &u));
        CHECK_EQ(gcmp(e, u), MPI_UNEQUAL);
        CHECK_EQ(gcmp(e, world), MPI_UNEQUAL);
        CHECK_MPI(MPI_Group_free(&e));
        CHECK_MPI(MPI_Group_free(&u));
    }

    /* the group of a dup and of MPI_COMM_SELF */
    {
        MPI_Comm d;
        MPI_Group dg, sg;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        CHECK_MPI(MPI_Comm_group(d, &dg));
        CHECK_EQ(gcmp(dg, world), MPI_IDENT);
        CHECK_MPI(MPI_Group_free(&dg));
        CHECK_MPI(MPI_Comm_free(&d));
        CHECK_MPI(MPI_Comm_group(MPI_COMM_SELF, &sg));
        CHECK_EQ(gsize(sg), 1);
        CHECK_EQ(grank(sg), 0);
        ranks[0] = 0;
        CHECK_MPI(MPI_Group_translate_ranks(sg, 1, ranks, world, tr));
        CHECK_EQ(tr[0], tu_rank);
        CHECK_MPI(MPI_Group_free(&sg));
    }

    /* errors */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        int rc, bad[2] = {0, 0};
        int rg[1][3] = {{0, 0, 0}};
        e = MPI_GROUP_NULL;
        if (!tu_quirk("unchecked_duplicate_ranks")) {
            rc = MPI_Group_incl(world, 2, bad, &e);
            CHECK_CLASS(rc, MPI_ERR_RANK);
        }
        bad[0] = n;
        rc = MPI_Group_incl(world, 1, bad, &e);
        CHECK_CLASS(rc, MPI_ERR_RANK);
        bad[0] = -1;
        rc = MPI_Group_excl(world, 1, bad, &e);
        CHECK_CLASS(rc, MPI_ERR_RANK);
        /* a zero stride: MPI_ERR_ARG here, MPI_ERR_RANK in Open MPI; both say what is wrong */
        rc = MPI_Group_range_incl(world, 1, rg, &e);
        CHECK(rc != MPI_SUCCESS);
        if (rc != MPI_SUCCESS) {
            int cls;
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_ARG || cls == MPI_ERR_RANK);
        }
        rc = MPI_Group_size(MPI_GROUP_NULL, &r);
        CHECK_CLASS(rc, MPI_ERR_GROUP);
        bad[0] = n;
        if (!tu_quirk("unchecked_translate_rank")) {
            rc = MPI_Group_translate_ranks(world, 1, bad, world, tr);
            CHECK_CLASS(rc, MPI_ERR_RANK);
        }
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&world));
    CHECK(world == MPI_GROUP_NULL);
    free(ranks);
    free(tr);
    return tu_finish();
}
