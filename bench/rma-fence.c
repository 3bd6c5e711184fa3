/*
 * bench/rma-fence: MPI_Win_fence epochs on every rank of an MPI_Win_allocate window (not in
 * bench/run): an empty fence, a put of one long to the next rank + fence (a ring), and a put,
 * fence, get back, fence, the value checked. Prints "<ranks> ranks <what> <median us>" (7
 * repetitions of ITERS epochs, default 2000): mpirun -n N rma-fence [ITERS]. Used to measure
 * the counted fence across hosts (bench/README.md, bench/hosts rma).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 2000, reps = 7;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long *mem; MPI_Win win;
    MPI_Win_allocate(64 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    for (int i = 0; i < 64; i++) mem[i] = -1;
    double t[7];
    for (int mode = 0; mode < 3; mode++) {
        MPI_Win_fence(0, win);
        for (int r = 0; r < reps; r++) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                long v = i;
                if (mode == 1)
                    MPI_Put(&v, 1, MPI_LONG, (rank + 1) % size, rank, 1, MPI_LONG, win);
                else if (mode == 2) {
                    MPI_Put(&v, 1, MPI_LONG, (rank + 1) % size, rank, 1, MPI_LONG, win);
                    MPI_Win_fence(0, win);
                    long g = -7;
                    MPI_Get(&g, 1, MPI_LONG, (rank + 1) % size, rank, 1, MPI_LONG, win);
                    MPI_Win_fence(0, win);
                    if (g != i) { fprintf(stderr, "rank %d: got %ld want %d\n", rank, g, i); MPI_Abort(MPI_COMM_WORLD, 1); }
                    continue;
                }
                MPI_Win_fence(0, win);
            }
            t[r] = (MPI_Wtime() - t0) / iters * 1e6;
        }
        qsort(t, reps, sizeof *t, cmp);
        if (rank == 0) printf("%d ranks %s %.2f us\n", size, mode == 0 ? "fence      " : mode == 1 ? "put+fence  " : "put,get,2fences", t[reps / 2]);
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
