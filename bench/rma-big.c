/*
 * bench/rma-big: single large one-sided operations, rank 0 the origin and rank 1 the target of
 * a window by MPI_Win_allocate: MPI_Put or MPI_Get of 64 KiB to 4 MiB, then MPI_Win_flush,
 * 40 times; prints "<put|get> <bytes> <us per operation> us <MB/s> MB/s", the best of three
 * rounds. The origin buffer is a plain malloc (16 bytes past a page boundary with glibc);
 * with OFF=k in the environment it is page-aligned plus k bytes instead, and with ONLY=n
 * every size is n (to profile one). Arguments: 0 (puts only) or 1 (gets only).
 * The sizes between rma.c's 1 MiB and 4 MiB show where an operation becomes several frames.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long wsize = 8L << 20;
    char *mem, *src;
    MPI_Win win;
    MPI_Win_allocate(wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    if (getenv("OFF")) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, wsize + 4096))
            MPI_Abort(MPI_COMM_WORLD, 1);
        src = (char *)p + atoi(getenv("OFF"));
    } else {
        src = malloc(wsize);
    }
    memset(src, 1, wsize);
    long sizes[] = {65536, 262144, 1L << 20, 2L << 20, 4L << 20};
    if (getenv("ONLY"))
        for (int k = 0; k < 5; k++)
            sizes[k] = atol(getenv("ONLY"));
    int only = argc > 1 ? atoi(argv[1]) : -1;
    for (int g = 0; g < 2; g++) {
        for (int s = 0; s < 5; s++) {
            if (only >= 0 && only != g)
                continue;
            long n = sizes[s];
            int it = 40;
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                MPI_Win_lock_all(0, win);
                double best = 1e9;
                for (int r = 0; r < 3; r++) {
                    double t0 = MPI_Wtime();
                    for (int i = 0; i < it; i++) {
                        if (g)
                            MPI_Get(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                        else
                            MPI_Put(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                        MPI_Win_flush(1, win);
                    }
                    double t = (MPI_Wtime() - t0) / it * 1e6;
                    if (t < best)
                        best = t;
                }
                MPI_Win_unlock_all(win);
                printf("%s %8ld %9.1f us %7.0f MB/s\n", g ? "get" : "put", n, best, n / best);
                fflush(stdout);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
