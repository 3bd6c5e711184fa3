/*
 * bench/rma-epoch: the one-sided loops whose instructions bench/rma-count counts under
 * callgrind, on two ranks of one MPI_Win_allocate window (rank 0 the origin, rank 1 the
 * target). Collection is on only inside the loop (valgrind's client requests; outside
 * callgrind they do nothing):
 *
 *   rma-epoch N 0 SIZE        N epochs of one put of SIZE bytes + MPI_Win_fence
 *   rma-epoch N 3 SIZE US     the same, rank 0 sleeping US microseconds (not counted) before
 *                             each epoch, so that it is the last to arrive and its fence does
 *                             not wait: its count is the fence's own work, free of polling
 *   rma-epoch N 1 SIZE        N times put + MPI_Win_flush in MPI_Win_lock_all
 *   rma-epoch N 2 SIZE        N times 64 puts + MPI_Win_flush
 *   rma-epoch N 4 SIZE        N times 64 gets + MPI_Win_flush
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 1000, mode = argc > 2 ? atoi(argv[2]) : 0;
    long sz = argc > 3 ? atol(argv[3]) : 8;
    int sleep_us = argc > 4 ? atoi(argv[4]) : 50000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (sz < 1 || sz > 4096)
        sz = 8;
    char *mem, src[4096];
    memset(src, 1, sizeof src);
    MPI_Win win;
    MPI_Win_allocate(1 << 20, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    if (mode == 0 || mode == 3) {
        MPI_Win_fence(0, win);
        CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < n; i++) {
            if (rank == 0 && mode == 3) {
                CALLGRIND_TOGGLE_COLLECT;
                usleep(sleep_us);
                CALLGRIND_TOGGLE_COLLECT;
            }
            if (rank == 0)
                MPI_Put(src, sz, MPI_BYTE, 1, 0, sz, MPI_BYTE, win);
            MPI_Win_fence(0, win);
        }
        CALLGRIND_TOGGLE_COLLECT;
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    } else if (rank == 0) {
        MPI_Win_lock_all(0, win);
        CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < n; i++) {
            if (mode == 1) {
                MPI_Put(src, sz, MPI_BYTE, 1, 0, sz, MPI_BYTE, win);
            } else if (mode == 4) {
                for (int k = 0; k < 64; k++)
                    MPI_Get(src, sz, MPI_BYTE, 1, sz * k, sz, MPI_BYTE, win);
            } else {
                for (int k = 0; k < 64; k++)
                    MPI_Put(src, sz, MPI_BYTE, 1, sz * k, sz, MPI_BYTE, win);
            }
            MPI_Win_flush(1, win);
        }
        CALLGRIND_TOGGLE_COLLECT;
        MPI_Win_unlock_all(win);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
