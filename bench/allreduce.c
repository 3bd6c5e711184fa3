/*
 * allreduce: latency of MPI_Allreduce(MPI_SUM) on doubles, all ranks of MPI_COMM_WORLD.
 *
 * Each repetition starts after an MPI_Barrier, times a block of MPI_Allreduce calls on every
 * rank, and takes the slowest rank's time per call (MPI_Allreduce with MPI_MAX over the ranks'
 * elapsed times). The printed value is the median over repetitions. The first warm-up call of
 * every size is checked: rank r contributes r+1+i at index i, so the sum is known.
 *
 * Sizes are in bytes and must be multiples of 8 (one double = 8 bytes); default 8 and 1 MiB.
 *
 * Output: header lines starting with '#', then "<size_bytes> <time_us> <min_us> <max_us> <iters>".
 */
#include "common.h"

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 7, .warmup = 50, .target_ms = 40.0, .max_iters = 1000000};
    int pr = bench_parse(argc, argv, &o, 8, 8, 0);
    int explicit_sizes = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-s") || !strcmp(argv[i], "-m") || !strcmp(argv[i], "-M"))
            explicit_sizes = 1;
    if (pr == 0 && !explicit_sizes) {
        o.nsizes = 2;
        o.sizes[0] = 8;
        o.sizes[1] = 1L << 20;
    }
    for (int i = 0; pr == 0 && i < o.nsizes; i++)
        if (o.sizes[i] % 8 != 0 || o.sizes[i] == 0)
            pr = -1;
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "MPI_Allreduce(MPI_SUM, MPI_DOUBLE) time per call, slowest rank, "
                        "microseconds; sizes in bytes, multiples of 8; default 8 and 1M", NULL);
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }

    long maxsz = 8;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxsz)
            maxsz = o.sizes[i];
    long maxn = maxsz / 8;
    double *sbuf = malloc(sizeof(double) * (size_t)maxn);
    double *rbuf = malloc(sizeof(double) * (size_t)maxn);
    if (!sbuf || !rbuf)
        bench_die("out of memory");
    for (long i = 0; i < maxn; i++) {
        sbuf[i] = (double)(rank + 1 + (i % 1000));
        rbuf[i] = 0.0;
    }

    if (rank == 0) {
        print_header("allreduce", size, &o);
        printf("# measure: MPI_Allreduce(MPI_SUM) of doubles over %d ranks; time per call of the "
               "slowest rank\n", size);
        printf("# unit: microseconds (lower is better)\n");
        printf("# columns: size_bytes time_us min_us max_us iters_per_rep\n");
    }
    print_binding(rank, size);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        long n = o.sizes[si];
        if (n <= 0 || n > maxsz)
            bench_die("bad size");
        int cnt = (int)(n / 8);

        long warm = o.warmup;
        if (n > 65536) {
            warm = (long)((double)warm * 65536.0 / (double)n);
        }
        if (warm < 2)
            warm = 2;
        long half = warm / 2;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            MPI_Allreduce(sbuf, rbuf, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (it == 0) {
                double base = (double)size * (double)(size + 1) / 2.0;
                for (long i = 0; i < cnt; i++) {
                    double want = base + (double)size * (double)(i % 1000);
                    if (rbuf[i] != want) {
                        fprintf(stderr, "allreduce: rank %d: element %ld is %g, expected %g\n",
                                rank, i, rbuf[i], want);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                }
            }
        }
        double per_call = (MPI_Wtime() - t0) / (double)(warm - half);
        long mine = calibrate(&o, per_call, 5), iters = 0;
        /* Every rank must run the same count: take the smallest proposal (the slowest rank's). */
        MPI_Allreduce(&mine, &iters, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);

        for (int r = 0; r < o.reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (long it = 0; it < iters; it++)
                MPI_Allreduce(sbuf, rbuf, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
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
            double med = median(samples, o.reps);
            printf("%ld %.3f %.3f %.3f %ld\n", n, med, lo, hi, iters);
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    bench_done(rank);
    MPI_Finalize();
    return 0;
}
