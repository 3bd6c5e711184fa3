/*
 * rma/passive: passive-target epochs. Exclusive locks serialise read-modify-write sequences
 * (a counter updated with Get + Put under MPI_LOCK_EXCLUSIVE by every rank must count every
 * update); shared locks with MPI_Accumulate; MPI_Win_lock_all with MPI_Win_flush,
 * MPI_Win_flush_all, MPI_Win_flush_local(_all) and the request-based operations (Rput, Rget,
 * Raccumulate, Rget_accumulate, completed by Wait/Test/Waitall); MPI_Fetch_and_op and
 * MPI_Compare_and_swap (a spin lock made of compare-and-swap); MPI_MODE_NOCHECK;
 * MPI_Win_sync; lock errors. Argument "quiet": the target (rank 0) then waits in a loop that
 * makes no MPI call until every other rank has written into its window (progress without the
 * target, for windows whose targets are reached through shared memory).
 * Window flavor: second argument (create | allocate), default create.
 */
#include "util.h"

#define ROUNDS 20

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int quiet = argc > 1 && !strcmp(argv[1], "quiet");
    int alloc = argc > 2 && !strcmp(argv[2], "allocate");
    int rank = tu_rank, size = tu_size;
    long *mem;
    MPI_Win win;
    const int NL = 16;
    if (alloc) {
        CHECK_MPI(MPI_Win_allocate(NL * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    } else {
        mem = tu_malloc(NL * sizeof(long));
        CHECK_MPI(MPI_Win_create(mem, NL * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < NL; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Win_unlock(rank, win));
    MPI_Barrier(MPI_COMM_WORLD);

    if (quiet) {
        /* Every other rank sets its flag in rank 0's window; rank 0 watches its own memory
         * without calling MPI until all flags are set. */
        if (rank == 0) {
            volatile long *flags = mem;
            time_t start = time(NULL);
            for (;;) {
                int all = 1;
                CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
                CHECK_MPI(MPI_Win_sync(win));
                for (int r = 1; r < size && r < NL; r++)
                    all &= flags[r] == r;
                CHECK_MPI(MPI_Win_unlock(0, win));
                if (all)
                    break;
                CHECK_MSG(time(NULL) - start < 30, "the flags never arrived");
                /* no MPI call but the local lock above (no other rank waits for us) */
            }
        } else if (rank < NL) {
            long v = rank;
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, rank, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_unlock(0, win));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Win_free(&win));
        if (!alloc)
            free(mem);
        return tu_finish();
    }

    /* 1. Get + Put of a counter under an exclusive lock, ROUNDS times by every rank, on every
     *    target's slot 0. */
    for (int k = 0; k < ROUNDS; k++) {
        for (int t = 0; t < size; t++) {
            long c = -1;
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
            CHECK_MPI(MPI_Get(&c, 1, MPI_LONG, t, 0, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_flush(t, win));
            c++;
            CHECK_MPI(MPI_Put(&c, 1, MPI_LONG, t, 0, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_unlock(t, win));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK_EQ(mem[0], (long)ROUNDS * size);
    CHECK_MPI(MPI_Win_unlock(rank, win));
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. Shared locks, accumulate into slot 1; fetch-and-op into slot 2. */
    long one = 1, prev;
    for (int k = 0; k < ROUNDS; k++)
        for (int t = 0; t < size; t++) {
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
            CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, 1, 1, MPI_LONG, MPI_SUM, win));
            CHECK_MPI(MPI_Fetch_and_op(&one, &prev, MPI_LONG, t, 2, MPI_SUM, win));
            CHECK_MPI(MPI_Win_unlock(t, win));
            CHECK_INT(prev, >=, 0);
            CHECK_INT(prev, <, (long)ROUNDS * size);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK_EQ(mem[1], (long)ROUNDS * size);
    CHECK_EQ(mem[2], (long)ROUNDS * size);
    CHECK_MPI(MPI_Win_unlock(rank, win));
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3. A spin lock made of compare-and-swap on rank 0's slot 3 guards slot 4. */
    for (int k = 0; k < ROUNDS / 2; k++) {
        long mine = rank + 1, zero = 0, got = -1;
        CHECK_MPI(MPI_Win_lock_all(0, win));
        do {
            CHECK_MPI(MPI_Compare_and_swap(&mine, &zero, &got, MPI_LONG, 0, 3, win));
            CHECK_MPI(MPI_Win_flush(0, win));
        } while (got != 0);
        long c;
        CHECK_MPI(MPI_Get(&c, 1, MPI_LONG, 0, 4, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        c += 1;
        CHECK_MPI(MPI_Put(&c, 1, MPI_LONG, 0, 4, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        CHECK_MPI(MPI_Compare_and_swap(&zero, &mine, &got, MPI_LONG, 0, 3, win));
        CHECK_MPI(MPI_Win_flush_all(win));
        CHECK_EQ(got, mine);
        CHECK_MPI(MPI_Win_unlock_all(win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_EQ(mem[4], (long)(ROUNDS / 2) * size);
        CHECK_EQ(mem[3], 0);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 4. Request-based operations inside lock_all: each rank writes its slot 8+rank%8 of
     *    its right neighbour, reads it back, accumulates and fetches. */
    int right = (rank + 1) % size;
    int slot = 8 + rank % 8;
    long w = 100 + rank, r = -1, g = -1;
    MPI_Request q[4];
    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    if (size <= 8 || rank < 8) {
        CHECK_MPI(MPI_Rput(&w, 1, MPI_LONG, right, slot, 1, MPI_LONG, win, &q[0]));
        CHECK_MPI(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
        CHECK(q[0] == MPI_REQUEST_NULL);
        CHECK_MPI(MPI_Win_flush(right, win));
        CHECK_MPI(MPI_Rget(&r, 1, MPI_LONG, right, slot, 1, MPI_LONG, win, &q[1]));
        int done = 0;
        while (!done)
            CHECK_MPI(MPI_Test(&q[1], &done, MPI_STATUS_IGNORE));
        CHECK_EQ(r, w);
        CHECK_MPI(MPI_Raccumulate(&one, 1, MPI_LONG, right, slot, 1, MPI_LONG, MPI_SUM, win, &q[2]));
        CHECK_MPI(MPI_Win_flush_local(right, win));
        CHECK_MPI(MPI_Rget_accumulate(&one, 1, MPI_LONG, &g, 1, MPI_LONG, right, slot, 1, MPI_LONG, MPI_SUM, win, &q[3]));
        MPI_Status sts[2];
        CHECK_MPI(MPI_Waitall(2, &q[2], sts));
        CHECK_EQ(g, w + 1);
        CHECK_MPI(MPI_Win_flush_local_all(win));
        CHECK_MPI(MPI_Win_flush_all(win));
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (size <= 8) {
        int left = (rank + size - 1) % size;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
        CHECK_EQ(mem[8 + left % 8], 100 + left + 2);
        CHECK_MPI(MPI_Win_unlock(rank, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 5. Errors. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_CLASS(MPI_Win_unlock(0, win), MPI_ERR_RMA_SYNC);
    CHECK_CLASS(MPI_Win_flush(0, win), MPI_ERR_RMA_SYNC);
    CHECK_CLASS(MPI_Win_unlock_all(win), MPI_ERR_RMA_SYNC);
    CHECK_CLASS(MPI_Win_lock(7, 0, 0, win), tu_quirk("arg_classes") ? MPI_ERR_ARG : MPI_ERR_LOCKTYPE);
    CHECK_CLASS(MPI_Win_lock(MPI_LOCK_SHARED, size, 0, win), MPI_ERR_RANK);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_CLASS(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), MPI_ERR_RMA_SYNC);
    if (!tu_quirk("unchecked_range"))
        CHECK_CLASS(MPI_Put(&one, 1, MPI_LONG, 0, NL, 1, MPI_LONG, win), MPI_ERR_RMA_RANGE);
    CHECK_CLASS(MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_OP_NULL, win), MPI_ERR_OP);
    CHECK_CLASS(MPI_Win_free(&win), MPI_ERR_RMA_SYNC);
    CHECK_MPI(MPI_Win_unlock(0, win));

    CHECK_MPI(MPI_Win_free(&win));
    if (!alloc)
        free(mem);
    return tu_finish();
}
