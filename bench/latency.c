/*
 * latency: ping-pong between ranks 0 and 1 (other ranks idle).
 *
 * For each size, rank 0 sends a message to rank 1 with MPI_Send and waits for a reply of the same
 * size with MPI_Recv; rank 1 does the mirror image. One-way latency is half the round-trip time.
 * Each repetition times a block of round trips; the printed value is the median over repetitions.
 * The first warm-up round trip of every size carries a pattern that both sides check.
 *
 * Output: header lines starting with '#', then "<size_bytes> <latency_us> <min_us> <max_us> <iters>".
 */
#include "common.h"

#define TAG_PING 1
#define TAG_PONG 2
#define TAG_CTRL 3

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 7, .warmup = 200, .target_ms = 20.0, .max_iters = 1000000};
    int pr = bench_parse(argc, argv, &o, 0, 4L << 20, 0);
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "one-way latency (half round trip) between ranks 0 and 1, in microseconds; default sizes 0,1,2,4..4M", NULL);
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "latency: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }

    long maxsz = 0;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxsz)
            maxsz = o.sizes[i];
    unsigned char *sbuf = malloc(maxsz > 0 ? maxsz : 1);
    unsigned char *rbuf = malloc(maxsz > 0 ? maxsz : 1);
    if (!sbuf || !rbuf)
        bench_die("out of memory");
    memset(sbuf, 0, maxsz > 0 ? maxsz : 1);
    memset(rbuf, 0, maxsz > 0 ? maxsz : 1);

    if (rank == 0) {
        print_header("latency", size, &o);
        printf("# measure: one-way latency = round trip / 2, ranks 0 <-> 1, MPI_Send/MPI_Recv\n");
        printf("# unit: microseconds (lower is better)\n");
        printf("# columns: size_bytes latency_us min_us max_us iters_per_rep\n");
    }
    if (rank <= 1)
        print_binding(rank, 2);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        long n = o.sizes[si];
        if (n < 0 || n > maxsz)
            bench_die("bad size");
        int cnt = (int)n;
        if (rank > 1)
            continue;
        int peer = 1 - rank;

        /* Warm-up: fewer round trips for large messages; the first one is checked. */
        long warm = o.warmup;
        if (n > 65536 && warm > 2) {
            warm = (long)((double)warm * 65536.0 / (double)n);
            if (warm < 2)
                warm = 2;
        }
        if (warm < 1)
            warm = 1;
        fill_pattern(sbuf, n, n);
        memset(rbuf, 0, (size_t)n);
        /* Only the second half of the warm-up is timed for calibration: the first round trips
         * of a size may include connection set-up and page faults. */
        long half = warm / 2;
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(sbuf, cnt, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rbuf, cnt, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, cnt, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, cnt, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
            }
            if (it == 0) {
                long bad = check_pattern(rbuf, n, n);
                if (bad >= 0) {
                    fprintf(stderr, "latency: rank %d: wrong data at byte %ld of a %ld-byte message\n",
                            rank, bad, n);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
        }
        double per_rt = (MPI_Wtime() - t0) / (double)(warm - half);

        /* Rank 0 decides the iteration count and tells rank 1. */
        long iters;
        if (rank == 0) {
            iters = calibrate(&o, per_rt, 5);
            MPI_Send(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }

        for (int r = 0; r < o.reps; r++) {
            if (rank == 0) {
                double start = MPI_Wtime();
                for (long it = 0; it < iters; it++) {
                    MPI_Send(sbuf, cnt, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, cnt, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                samples[r] = (MPI_Wtime() - start) / (double)iters / 2.0 * 1e6;
            } else {
                for (long it = 0; it < iters; it++) {
                    MPI_Recv(rbuf, cnt, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, cnt, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
                }
            }
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
