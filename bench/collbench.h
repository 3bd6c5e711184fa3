/*
 * collbench.h: the driver shared by the collective latency programs (barrier, bcast, reduce,
 * allgather, alltoall). Each program defines one `struct coll` (its name, what a size means,
 * and a function making one call) and calls coll_main.
 *
 * Method (as allreduce.c): per size, warm-up calls (the first result is checked where the
 * collective has one), then calibrated blocks of calls between barriers; the time per call of
 * the slowest rank (MPI_MAX over ranks) is one sample; the median over repetitions is printed.
 * Roots rotate over the ranks call by call for rooted collectives, so no rank is always the
 * root.
 *
 * Output: header lines starting with '#', then "<size_bytes> <time_us> <min_us> <max_us> <iters>".
 */
#ifndef PROTEAN_BENCH_COLLBENCH_H
#define PROTEAN_BENCH_COLLBENCH_H

#include "common.h"

struct coll {
    const char *name;
    const char *what;             /* one line for the header and usage */
    long def_lo, def_hi;          /* default size range (bytes) */
    /* Buffer bytes needed for a size: send and receive. */
    long (*sbytes)(long size, int np);
    long (*rbytes)(long size, int np);
    /* One call; `it` numbers calls (for rotating roots). */
    void (*call)(unsigned char *s, unsigned char *r, long size, long it, int rank, int np);
    /* Check the first call's result; NULL: nothing to check. Returns 0 when correct. */
    int (*check)(const unsigned char *r, long size, long it, int rank, int np);
};

static inline int coll_main(int argc, char **argv, const struct coll *c)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 7, .warmup = 50, .target_ms = 40.0, .max_iters = 1000000};
    int pr = bench_parse(argc, argv, &o, c->def_lo, c->def_hi, 0);
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], c->what, NULL);
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    long maxs = 1, maxr = 1;
    for (int i = 0; i < o.nsizes; i++) {
        long a = c->sbytes(o.sizes[i], size), b = c->rbytes(o.sizes[i], size);
        if (a > maxs) maxs = a;
        if (b > maxr) maxr = b;
    }
    unsigned char *sbuf = malloc((size_t)maxs), *rbuf = malloc((size_t)maxr);
    if (!sbuf || !rbuf)
        bench_die("out of memory");
    memset(sbuf, 0, (size_t)maxs);
    memset(rbuf, 0, (size_t)maxr);

    if (rank == 0) {
        print_header(c->name, size, &o);
        printf("# measure: %s over %d ranks; time per call of the slowest rank\n", c->what, size);
        printf("# unit: microseconds (lower is better)\n");
        printf("# columns: size_bytes time_us min_us max_us iters_per_rep\n");
    }
    print_binding(rank, size);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        long n = o.sizes[si];
        long warm = o.warmup;
        long total = c->rbytes(n, size);
        if (total > 65536)
            warm = (long)((double)warm * 65536.0 / (double)total);
        if (warm < 2)
            warm = 2;
        long half = warm / 2;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            if (it == 0 && c->check) {
                /* a recognisable send buffer for the checked call */
                long sb = c->sbytes(n, size);
                for (long i = 0; i < sb; i++)
                    sbuf[i] = (unsigned char)(rank * 31 + i % 251);
            }
            c->call(sbuf, rbuf, n, it, rank, size);
            if (it == 0 && c->check && c->check(rbuf, n, it, rank, size)) {
                fprintf(stderr, "%s: rank %d: wrong result at size %ld\n", c->name, rank, n);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        double per_call = (MPI_Wtime() - t0) / (double)(warm - half);
        long mine = calibrate(&o, per_call, 5), iters = 0;
        MPI_Allreduce(&mine, &iters, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
        for (int r = 0; r < o.reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (long it = 0; it < iters; it++)
                c->call(sbuf, rbuf, n, it, rank, size);
            double el = (MPI_Wtime() - start) / (double)iters * 1e6, slowest = 0.0;
            MPI_Allreduce(&el, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            samples[r] = slowest;
        }
        if (rank == 0) {
            double lo = samples[0], hi = samples[0];
            for (int r = 1; r < o.reps; r++) {
                if (samples[r] < lo) lo = samples[r];
                if (samples[r] > hi) hi = samples[r];
            }
            printf("%ld %.3f %.3f %.3f %ld\n", n, median(samples, o.reps), lo, hi, iters);
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    bench_done(rank);
    MPI_Finalize();
    return 0;
}

static inline long cb_same(long size, int np)
{
    (void)np;
    return size > 0 ? size : 1;
}

static inline long cb_times_np(long size, int np)
{
    return (size > 0 ? size : 1) * np;
}

/* The byte the checked call's sender `p` put at offset i. */
static inline unsigned char cb_byte(int p, long i)
{
    return (unsigned char)(p * 31 + i % 251);
}

#endif
