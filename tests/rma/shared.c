/*
 * rma/shared: MPI_Win_allocate_shared and MPI_Win_shared_query. The processes of each host
 * (MPI_Comm_split_type SHARED) allocate segments of different sizes (rank 1 none at all,
 * and the query answers NULL for it);
 * by default the segments are contiguous in rank order, and every process can load and
 * store every other's memory through the queried address, synchronised with MPI_Win_sync and
 * barriers inside a lock_all epoch (the idiom of MPI-3 shared memory programs);
 * MPI_PROC_NULL queries the first non-empty segment; with alloc_shared_noncontig the
 * segments need not touch but the same holds. Also MPI_Win_shared_query on a window of
 * MPI_Win_allocate (MPI-4.1: it may answer) and of MPI_Win_create (size 0 or the memory).
 */
#include "util.h"

static void run(MPI_Comm node, int noncontig)
{
    int rank, size;
    MPI_Comm_rank(node, &rank);
    MPI_Comm_size(node, &size);
    MPI_Info info = MPI_INFO_NULL;
    if (noncontig) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
    }
    MPI_Aint mine = rank == 1 ? 0 : (MPI_Aint)(100 + 8 * rank) * sizeof(int);
    int *base = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(mine, sizeof(int), info, node, &base, &win));
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    int **ptr = tu_malloc(size * sizeof(int *));
    MPI_Aint *sz = tu_malloc(size * sizeof(MPI_Aint));
    for (int r = 0; r < size; r++) {
        int du = 0;
        CHECK_MPI(MPI_Win_shared_query(win, r, &sz[r], &du, &ptr[r]));
        CHECK_EQ(sz[r], r == 1 ? 0 : (MPI_Aint)(100 + 8 * r) * sizeof(int));
        CHECK_EQ(du, sizeof(int));
        if (r == rank && mine > 0)
            CHECK(ptr[r] == base);
        /* A process that gave size 0 has no memory, so no address (as in MPICH). */
        if (sz[r] == 0)
            CHECK_MSG(ptr[r] == NULL, "rank %d has size 0 but its address is %p", r, (void *)ptr[r]);
        if (!noncontig && r > 0 && sz[r] > 0) {
            /* Contiguous: the segment starts where the previous ones end. */
            int k = r - 1;
            while (k > 0 && sz[k] == 0)
                k--;
            if (sz[k] > 0)
                CHECK((char *)ptr[r] == (char *)ptr[k] + sz[k]);
        }
    }
    MPI_Aint s0;
    int d0;
    int *p0;
    CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &s0, &d0, &p0));
    CHECK(p0 == ptr[0] && s0 == sz[0]);

    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    /* Everyone writes its rank into slot `rank` of every non-empty segment. */
    for (int r = 0; r < size; r++)
        if (sz[r] > 0 && rank < 100)
            ptr[r][rank] = 1000 * r + rank;
    CHECK_MPI(MPI_Win_sync(win));
    MPI_Barrier(node);
    CHECK_MPI(MPI_Win_sync(win));
    if (mine > 0)
        for (int o = 0; o < size && o < 100; o++)
            CHECK_MSG(base[o] == 1000 * rank + o, "slot %d of rank %d is %d", o, rank, base[o]);
    /* And one-sided calls on the same memory. */
    int v = 7 + rank, got = -1;
    int t = size > 1 ? 2 % size : 0;
    if (sz[t] > 0) {
        CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT, t, 99, 1, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(t, win));
    }
    CHECK_MPI(MPI_Win_sync(win));
    MPI_Barrier(node);
    CHECK_MPI(MPI_Win_sync(win));
    if (sz[t] > 0) {
        CHECK_MPI(MPI_Get(&got, 1, MPI_INT, t, 99, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(t, win));
        /* Slot 99 started as rank 99's store (when there is one) or zero. */
        int want = size > 99 ? 1000 * t + 99 : 0;
        for (int o = 0; o < size; o++)
            want += 7 + o;
        CHECK_EQ(got, want);
        CHECK_EQ(ptr[t][99], want);
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(node);
    CHECK_MPI(MPI_Win_free(&win));
    free(ptr);
    free(sz);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    run(node, 0);
    run(node, 1);

    /* MPI_Win_allocate: a process may always load and store its own memory through the
     * query; others' memory only where answered (size > 0). (MPI-4.1; MPI-4.0 allowed the
     * query on shared windows only.) */
    if (tu_quirk("query_shared_only")) {
        MPI_Comm_free(&node);
        return tu_finish();
    }
    int nrank, nsize;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    int *base;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(64 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &base, &win));
    MPI_Aint s;
    int du;
    int *p;
    CHECK_MPI(MPI_Win_shared_query(win, nrank, &s, &du, &p));
    CHECK(s == 0 || (p == base && s == 64 * sizeof(int)));
    CHECK_MPI(MPI_Win_free(&win));
    int buf[4];
    CHECK_MPI(MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, node, &win));
    CHECK_MPI(MPI_Win_shared_query(win, nrank, &s, &du, &p));
    CHECK(s == 0 || (p == buf && s == sizeof buf));
    CHECK_MPI(MPI_Win_free(&win));

    /* Processes on different hosts cannot share: MPI_ERR_RMA_SHARED. Only checkable when the
     * job spans hosts, which a single-machine run does not. */
    MPI_Comm_free(&node);
    return tu_finish();
}
