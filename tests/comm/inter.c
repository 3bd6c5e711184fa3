/*
 * Intercommunicators: MPI_Intercomm_create from the two halves of MPI_COMM_WORLD (even and
 * odd ranks, leaders 0 and 1, over MPI_COMM_WORLD as the peer communicator); test_inter,
 * size, remote size, remote group; point-to-point across (every process sends to every
 * remote rank, with MPI_ANY_SOURCE receives too); MPI_Comm_dup of the intercommunicator;
 * MPI_Intercomm_merge with high chosen so the odd side comes first, and with both sides
 * passing the same value (then which side comes first is unspecified, so only sizes and
 * the rank order within a side are checked); 300 Intercomm_create + merge + free cycles
 * with traffic now and then; MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED (the processes of one host; over the emulated hosts of the hosts2
 * variant, the ranks of one parity; all members report the same processor name) and
 * MPI_UNDEFINED. 2 or more processes.
 */
#include "util.h"

static void cross_traffic(MPI_Comm ic, int seed)
{
    int rsize, rank, i, *in, *out;
    MPI_Request *rq;
    MPI_Status st;
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    CHECK_MPI(MPI_Comm_rank(ic, &rank));
    in = tu_malloc(sizeof(int) * (size_t)rsize);
    out = tu_malloc(sizeof(int) * (size_t)rsize);
    rq = tu_malloc(sizeof(MPI_Request) * (size_t)rsize);
    for (i = 0; i < rsize; i++) {
        out[i] = seed * 10000 + rank * 100 + i;
        CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, i, 5, ic, &rq[i]));
    }
    /* The remote processes' messages to me, by explicit source... */
    for (i = 0; i < rsize; i++) {
        CHECK_MPI(MPI_Recv(&in[i], 1, MPI_INT, i, 5, ic, &st));
        CHECK_EQ(st.MPI_SOURCE, i);
        CHECK_EQ(in[i], seed * 10000 + i * 100 + rank);
    }
    CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));
    /* ... and once more through MPI_ANY_SOURCE. */
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, i, 6, ic, &rq[i]));
    for (i = 0; i < rsize; i++) {
        int v;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 6, ic, &st));
        CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize);
        CHECK_EQ(v, seed * 10000 + st.MPI_SOURCE * 100 + rank);
    }
    CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));
    free(in);
    free(out);
    free(rq);
}

int main(int argc, char **argv)
{
    MPI_Comm local, ic, ic2, merged;
    MPI_Group rg, wg;
    int n, side, flag, size, rsize, rank, i, cmp;

    tu_init(&argc, &argv);
    n = tu_size;
    if (n < 2) {
        /* The world has no second half; check test_inter on intracommunicators. */
        CHECK_MPI(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
        CHECK_EQ(flag, 0);
        return tu_finish();
    }
    side = tu_rank % 2;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, side, tu_rank, &local));
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - side, 77, &ic));

    CHECK_MPI(MPI_Comm_test_inter(ic, &flag));
    CHECK_EQ(flag, 1);
    CHECK_MPI(MPI_Comm_test_inter(local, &flag));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Comm_size(ic, &size));
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    CHECK_MPI(MPI_Comm_rank(ic, &rank));
    CHECK_EQ(size, side == 0 ? (n + 1) / 2 : n / 2);
    CHECK_EQ(rsize, side == 0 ? n / 2 : (n + 1) / 2);
    CHECK_EQ(rank, tu_rank / 2);

    /* The remote group, translated to MPI_COMM_WORLD ranks: the other parity, in order. */
    CHECK_MPI(MPI_Comm_remote_group(ic, &rg));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    {
        int *r = tu_malloc(sizeof(int) * (size_t)rsize), *w = tu_malloc(sizeof(int) * (size_t)rsize);
        for (i = 0; i < rsize; i++)
            r[i] = i;
        CHECK_MPI(MPI_Group_translate_ranks(rg, rsize, r, wg, w));
        for (i = 0; i < rsize; i++)
            CHECK_EQ(w[i], 2 * i + (1 - side));
        free(r);
        free(w);
    }
    CHECK_MPI(MPI_Group_free(&rg));

    cross_traffic(ic, 1);

    /* A dup is an intercommunicator too, congruent with the original. */
    CHECK_MPI(MPI_Comm_dup(ic, &ic2));
    CHECK_MPI(MPI_Comm_test_inter(ic2, &flag));
    CHECK_EQ(flag, 1);
    CHECK_MPI(MPI_Comm_compare(ic, ic2, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
    cross_traffic(ic2, 2);
    CHECK_MPI(MPI_Comm_free(&ic2));

    /* Merge: the odd side says low, the even side high: odd ranks first. */
    CHECK_MPI(MPI_Intercomm_merge(ic, side == 0, &merged));
    CHECK_MPI(MPI_Comm_test_inter(merged, &flag));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Comm_size(merged, &size));
    CHECK_EQ(size, n);
    CHECK_MPI(MPI_Comm_rank(merged, &rank));
    CHECK_EQ(rank, side == 1 ? tu_rank / 2 : n / 2 + tu_rank / 2);
    {
        int out = tu_rank, in = -1, right = (rank + 1) % n, left = (rank + n - 1) % n;
        CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 3, &in, 1, MPI_INT, left, 3, merged,
                               MPI_STATUS_IGNORE));
        /* left neighbour in the merged order */
        {
            int want = left < n / 2 ? 2 * left + 1 : 2 * (left - n / 2);
            CHECK_EQ(in, want);
        }
    }
    CHECK_MPI(MPI_Comm_free(&merged));

    /* Merge with the same value on both sides: each side stays contiguous and in order. */
    CHECK_MPI(MPI_Intercomm_merge(ic, 0, &merged));
    CHECK_MPI(MPI_Comm_size(merged, &size));
    CHECK_EQ(size, n);
    {
        int lsize, mr, r0, first;
        CHECK_MPI(MPI_Comm_size(local, &lsize));
        CHECK_MPI(MPI_Comm_rank(merged, &mr));
        CHECK_MPI(MPI_Comm_rank(local, &r0));
        first = mr - r0; /* where this side starts */
        CHECK(first == 0 || first == n - lsize);
        CHECK_MPI(MPI_Barrier(merged));
    }
    CHECK_MPI(MPI_Comm_free(&merged));

    /* Many creations and frees: context ids of intercommunicators are reused without
     * collisions (a message on each of two live ones lands on its own). */
    for (i = 0; i < 300; i++) {
        MPI_Comm a, b;
        int va = -1, vb = -1, one = 1, two = 2;
        MPI_Request rq[2];
        CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - side, 100 + i % 7, &a));
        CHECK_MPI(MPI_Intercomm_merge(a, side, &b));
        if (i % 50 == 0) {
            int br, ar;
            CHECK_MPI(MPI_Comm_rank(b, &br));
            CHECK_MPI(MPI_Comm_rank(a, &ar));
            if (ar == 0) {
                /* the two leaders exchange on the intercommunicator */
                CHECK_MPI(MPI_Irecv(&va, 1, MPI_INT, 0, 9, a, &rq[0]));
                CHECK_MPI(MPI_Send(&one, 1, MPI_INT, 0, 9, a));
                CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
                CHECK_EQ(va, 1);
            }
            /* ring on the merged communicator */
            CHECK_MPI(MPI_Sendrecv(&two, 1, MPI_INT, (br + 1) % n, 9, &vb, 1, MPI_INT,
                                   (br + n - 1) % n, 9, b, MPI_STATUS_IGNORE));
            CHECK_EQ(vb, 2);
        }
        CHECK_MPI(MPI_Comm_free(&b));
        CHECK_MPI(MPI_Comm_free(&a));
    }

    CHECK_MPI(MPI_Comm_free(&ic));
    CHECK_MPI(MPI_Comm_free(&local));
    CHECK_MPI(MPI_Group_free(&wg));

    /* split_type SHARED: the members share this process's host. Every rank's processor name
     * is compared through the new communicator. */
    {
        MPI_Comm sh;
        char name[MPI_MAX_PROCESSOR_NAME], first[MPI_MAX_PROCESSOR_NAME];
        int len, ss;
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &sh));
        CHECK(sh != MPI_COMM_NULL);
        CHECK_MPI(MPI_Comm_size(sh, &ss));
        CHECK(ss >= 1 && ss <= n);
        memset(name, 0, sizeof name);
        CHECK_MPI(MPI_Get_processor_name(name, &len));
        memcpy(first, name, sizeof name);
        CHECK_MPI(MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, sh));
        CHECK_MSG(strcmp(first, name) == 0, "host %s in a shared communicator with %s", name, first);
        CHECK_MPI(MPI_Comm_free(&sh));
        /* MPI_UNDEFINED on one process: it gets MPI_COMM_NULL. */
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, tu_rank == 0 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED,
                                      0, MPI_INFO_NULL, &sh));
        if (tu_rank == 0)
            CHECK(sh == MPI_COMM_NULL);
        else
            CHECK_MPI(MPI_Comm_free(&sh));
    }
    return tu_finish();
}
