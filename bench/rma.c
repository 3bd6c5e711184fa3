/*
 * bench/rma: one-sided communication, rank 0 the origin and rank 1 the target of a window made
 * by MPI_Win_allocate (or MPI_Win_create with -c). Prints "<op> <size_bytes> <median> <unit>"
 * lines, the median over -r repetitions:
 *
 *   put-lat, get-lat   MPI_Put / MPI_Get then MPI_Win_flush inside MPI_Win_lock_all: time per
 *                      operation (us)
 *   fence-put          MPI_Put then MPI_Win_fence on both ranks: time per epoch (us)
 *   put-bw, get-bw     64 operations of the size then one flush: MB/s (10^6 bytes)
 *   fao                every rank hammers rank 0's counter with MPI_Fetch_and_op (MPI_SUM on
 *                      one long) + flush: million operations per second, all ranks together;
 *                      the counter is checked at the end
 *
 * The first transfer of every size carries a pattern the target checks. Ranks other than 0
 * and 1 only take part in fao. -C times with the process's CPU time instead of the wall clock:
 * on a machine loaded far beyond its CPUs a rank is descheduled for most of the wall time, and
 * every MPI here waits by polling, so CPU time is what an operation costs.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cpu = 0;

static double now(void)
{
    if (!cpu)
        return MPI_Wtime();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int reps = 5;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

static void die(const char *m)
{
    fprintf(stderr, "bench/rma: %s\n", m);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, create = 0, opt;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "cCr:")) != -1) {
        if (opt == 'c')
            create = 1;
        else if (opt == 'C')
            cpu = 1;
        else if (opt == 'r')
            reps = atoi(optarg);
    }
    if (size < 2)
        die("needs at least 2 ranks");
    const long MAXB = 4L << 20;
    const int W = 64;
    long sizes[] = {8, 64, 1024, 8192, 65536, 1L << 20, 4L << 20};
    int nsizes = sizeof sizes / sizeof *sizes;
    char *mem, *src = malloc(MAXB * W > (64L << 20) ? (64L << 20) : MAXB * W);
    long wsize = 64L << 20;
    MPI_Win win;
    if (create) {
        MPI_Alloc_mem(wsize, MPI_INFO_NULL, &mem);
        MPI_Win_create(mem, wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        MPI_Win_allocate(wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    }
    memset(mem, 0, wsize);
    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int l;
        MPI_Get_library_version(ver, &l);
        char *nl = strchr(ver, '\n');
        if (nl)
            *nl = 0;
        printf("# rma %s, %d ranks, window by %s, median of %d, %s time\n", ver, size,
               create ? "MPI_Win_create" : "MPI_Win_allocate", reps, cpu ? "CPU" : "wall");
    }
    double *t = malloc(reps * sizeof *t);

    /* Latency: put / get + flush. */
    for (int g = 0; g < 2; g++) {
        for (int s = 0; s < nsizes; s++) {
            long n = sizes[s];
            int iters = n <= 8192 ? 2000 : n <= 65536 ? 500 : 40;
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                MPI_Win_lock_all(0, win);
                memset(src, 0x5a, n);
                if (!g) {
                    MPI_Put(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                    MPI_Win_flush(1, win);
                }
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    for (int i = 0; i < iters; i++) {
                        if (g)
                            MPI_Get(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                        else
                            MPI_Put(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                        MPI_Win_flush(1, win);
                    }
                    t[r] = (now() - t0) / iters * 1e6;
                }
                if (g && src[n - 1] != 0x5a)
                    die("MPI_Get read wrong data");
                MPI_Win_unlock_all(win);
                printf("%s %ld %.3f us\n", g ? "get-lat" : "put-lat", n, median(t, reps));
                fflush(stdout);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 1 && !g) {
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
                if (mem[0] != 0x5a || mem[n - 1] != 0x5a)
                    die("MPI_Put wrote wrong data");
                MPI_Win_unlock(1, win);
            }
        }
    }

    /* Fence epochs with one put. */
    for (int s = 0; s < 3; s++) {
        long n = sizes[s * 2];
        int iters = 500;
        MPI_Win_fence(0, win);
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (rank == 0)
                    MPI_Put(src, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
                MPI_Win_fence(0, win);
            }
            t[r] = (now() - t0) / iters * 1e6;
        }
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        if (rank == 0) {
            printf("fence-put %ld %.3f us\n", n, median(t, reps));
            fflush(stdout);
        }
    }

    /* Bandwidth: W operations then a flush. */
    for (int g = 0; g < 2; g++) {
        for (int s = 0; s < nsizes; s++) {
            long n = sizes[s];
            if (n * W > wsize)
                n = wsize / W;
            int iters = n <= 8192 ? 100 : n <= 65536 ? 20 : 2;
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                MPI_Win_lock_all(0, win);
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    for (int i = 0; i < iters; i++) {
                        for (int k = 0; k < W; k++) {
                            if (g)
                                MPI_Get(src + (n * k) % (64L << 20), n, MPI_BYTE, 1, n * k, n, MPI_BYTE, win);
                            else
                                MPI_Put(src, n, MPI_BYTE, 1, n * k, n, MPI_BYTE, win);
                        }
                        MPI_Win_flush(1, win);
                    }
                    t[r] = (double)n * W * iters / (now() - t0) / 1e6;
                }
                MPI_Win_unlock_all(win);
                printf("%s %ld %.1f MB/s\n", g ? "get-bw" : "put-bw", sizes[s], median(t, reps));
                fflush(stdout);
            }
        }
    }

    /* Atomics: every rank on rank 0's counter. */
    MPI_Barrier(MPI_COMM_WORLD);
    long *ctr = (long *)(mem + 64);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    *ctr = 0;
    MPI_Win_unlock(rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    const int FAO = 20000;
    long one = 1, prev;
    MPI_Win_lock_all(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < FAO; i++) {
        MPI_Fetch_and_op(&one, &prev, MPI_LONG, 0, 64, MPI_SUM, win);
        MPI_Win_flush(0, win);
    }
    double mine = now() - t0, slowest;
    MPI_Win_unlock_all(win);
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        if (*ctr != (long)FAO * size)
            die("MPI_Fetch_and_op lost updates");
        MPI_Win_unlock(0, win);
        printf("fao 8 %.3f Mops/s\n", (double)FAO * size / slowest / 1e6);
        printf("# done\n");
        fflush(stdout);
    }
    MPI_Win_free(&win);
    if (create)
        MPI_Free_mem(mem);
    free(src);
    free(t);
    MPI_Finalize();
    return 0;
}
