/*
 * commcreate: time to create a communicator, all ranks of MPI_COMM_WORLD.
 *
 * Two operations, each timed as a block of (create, free) pairs per repetition after an
 * MPI_Barrier; the value is the slowest rank's time per pair (gathered with point-to-point,
 * so the benchmark needs no reduction):
 *   1  MPI_Comm_dup(MPI_COMM_WORLD) + MPI_Comm_free
 *   2  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank) + MPI_Comm_free (two halves,
 *      reversed order)
 * The first warm-up result of each operation is checked (size, rank, and a message on it).
 * The iteration count is rank 0's calibration, broadcast.
 *
 * Output: header lines starting with '#', then "<op> <time_us> <min_us> <max_us> <iters>"
 * where op is 1 (dup) or 2 (split).
 */
#include "common.h"

static int rank, size;

static void create(int op, MPI_Comm *c)
{
    if (op == 1)
        MPI_Comm_dup(MPI_COMM_WORLD, c);
    else
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, c);
}

static void check(int op, MPI_Comm c)
{
    int s, r, want_s = op == 1 ? size : (size - rank % 2 + 1) / 2, want_r;
    MPI_Comm_size(c, &s);
    MPI_Comm_rank(c, &r);
    want_r = op == 1 ? rank : want_s - 1 - rank / 2;
    if (s != want_s || r != want_r) {
        fprintf(stderr, "commcreate: rank %d op %d: size %d rank %d, expected %d %d\n", rank, op,
                s, r, want_s, want_r);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int token = r, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (r + 1) % s, 0, &got, 1, MPI_INT, (r + s - 1) % s, 0, c,
                 MPI_STATUS_IGNORE);
    if (got != (r + s - 1) % s) {
        fprintf(stderr, "commcreate: rank %d op %d: token %d, expected %d\n", rank, op, got,
                (r + s - 1) % s);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* The largest of every rank's value, at rank 0. */
static double slowest(double v)
{
    if (rank != 0) {
        MPI_Send(&v, 1, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD);
        return v;
    }
    for (int i = 1; i < size; i++) {
        double o;
        MPI_Recv(&o, 1, MPI_DOUBLE, i, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (o > v)
            v = o;
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 7, .warmup = 40, .target_ms = 40.0, .max_iters = 100000};
    int pr = bench_parse(argc, argv, &o, 1, 2, 0);
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "MPI_Comm_dup (1) and MPI_Comm_split (2) + MPI_Comm_free, "
                        "time per pair of the slowest rank, microseconds", NULL);
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    o.nsizes = 2;
    o.sizes[0] = 1;
    o.sizes[1] = 2;

    if (rank == 0) {
        print_header("commcreate", size, &o);
        printf("# measure: (MPI_Comm_dup | MPI_Comm_split) + MPI_Comm_free over %d ranks; time per "
               "pair of the slowest rank; op 1 = dup, 2 = split\n", size);
        printf("# unit: microseconds (lower is better)\n");
        printf("# columns: op time_us min_us max_us iters_per_rep\n");
    }
    print_binding(rank, size);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        int op = (int)o.sizes[si];
        long warm = o.warmup, half = warm / 2;
        MPI_Comm c;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            create(op, &c);
            if (it == 0)
                check(op, c);
            MPI_Comm_free(&c);
        }
        double per = (MPI_Wtime() - t0) / (double)(warm - half);
        long iters = calibrate(&o, per, 5);
        MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);

        for (int r = 0; r < o.reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (long it = 0; it < iters; it++) {
                create(op, &c);
                MPI_Comm_free(&c);
            }
            samples[r] = slowest((MPI_Wtime() - start) / (double)iters * 1e6);
        }
        if (rank == 0) {
            double lo = samples[0], hi = samples[0];
            for (int r = 1; r < o.reps; r++) {
                if (samples[r] < lo)
                    lo = samples[r];
                if (samples[r] > hi)
                    hi = samples[r];
            }
            printf("%d %.3f %.3f %.3f %ld\n", op, median(samples, o.reps), lo, hi, iters);
            fflush(stdout);
        }
    }
    bench_done(rank);
    MPI_Finalize();
    return 0;
}
