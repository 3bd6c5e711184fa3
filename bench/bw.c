/*
 * bw: streaming bandwidth from rank 0 to rank 1 (other ranks idle), in the style of osu_bw.
 *
 * One iteration: rank 0 posts a window of W nonblocking sends (MPI_Isend) of one size and waits
 * for all of them; rank 1 posts W matching MPI_Irecv into W distinct buffers, waits for all, and
 * answers with a 4-byte acknowledgement that rank 0 receives before the next window. Bandwidth is
 * bytes moved (size * W * iterations) over the time rank 0 measured, in MB/s with MB = 10^6 bytes.
 * Each repetition times a block of iterations; the printed value is the median over repetitions.
 * The first warm-up window of every size is checked byte by byte on rank 1.
 *
 * All sends of a window read the same buffer (allowed since MPI-3); receives go to distinct
 * buffers, so rank 1 holds W * max_size bytes (256 MiB at the default 64 x 4 MiB).
 *
 * Output: header lines starting with '#', then "<size_bytes> <MB_per_s> <min> <max> <iters>".
 */
#include "common.h"

#define TAG_DATA 10
#define TAG_ACK 11
#define TAG_CTRL 12

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 7, .warmup = 20, .target_ms = 40.0, .max_iters = 100000,
                           .extra_int = 64};
    int pr = bench_parse(argc, argv, &o, 1, 4L << 20, 'W');
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "streaming bandwidth rank 0 -> rank 1, MB/s (10^6 bytes/s); "
                        "-W N sets the window of Isends per ack (default 64); default sizes 1..4M",
                        " [-W WINDOW]");
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "bw: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const int W = o.extra_int;

    long maxsz = 1;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxsz)
            maxsz = o.sizes[i];
    unsigned char *sbuf = NULL, *rbufs = NULL;
    if (rank == 0) {
        sbuf = malloc((size_t)maxsz);
        if (!sbuf)
            bench_die("out of memory");
        memset(sbuf, 0, (size_t)maxsz);
    } else if (rank == 1) {
        rbufs = malloc((size_t)maxsz * (size_t)W);
        if (!rbufs)
            bench_die("out of memory");
        memset(rbufs, 0, (size_t)maxsz * (size_t)W);
    }
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)W);
    if (!reqs)
        bench_die("out of memory");

    if (rank == 0) {
        print_header("bw", size, &o);
        printf("# measure: streaming bandwidth rank 0 -> 1, window of %d MPI_Isend / MPI_Irecv, "
               "then a 4-byte ack\n", W);
        printf("# unit: MB/s, MB = 10^6 bytes (higher is better)\n");
        printf("# columns: size_bytes bw_MBps min_MBps max_MBps iters_per_rep\n");
    }
    if (rank <= 1)
        print_binding(rank, 2);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    int ack = 0;
    for (int si = 0; si < o.nsizes; si++) {
        long n = o.sizes[si];
        if (n < 0 || n > maxsz)
            bench_die("bad size");
        int cnt = (int)n;
        if (rank > 1)
            continue;
        int peer = 1 - rank;

        long warm = o.warmup;
        if (n > 65536 && warm > 2) {
            warm = (long)((double)warm * 65536.0 / (double)n);
            if (warm < 2)
                warm = 2;
        }
        if (warm < 2)
            warm = 2;
        if (rank == 0)
            fill_pattern(sbuf, n, n);
        else
            memset(rbufs, 0, (size_t)n * (size_t)W);

        long half = warm / 2;
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            if (rank == 0) {
                for (int w = 0; w < W; w++)
                    MPI_Isend(sbuf, cnt, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < W; w++)
                    MPI_Irecv(rbufs + (size_t)w * (size_t)n, cnt, MPI_BYTE, peer, TAG_DATA,
                              MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                if (it == 0) {
                    for (int w = 0; w < W; w++) {
                        long bad = check_pattern(rbufs + (size_t)w * (size_t)n, n, n);
                        if (bad >= 0) {
                            fprintf(stderr, "bw: wrong data at byte %ld of message %d of a window "
                                    "of %ld-byte messages\n", bad, w, n);
                            MPI_Abort(MPI_COMM_WORLD, 3);
                        }
                    }
                }
                MPI_Send(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD);
            }
        }
        double per_iter = (MPI_Wtime() - t0) / (double)(warm - half);

        long iters;
        if (rank == 0) {
            iters = calibrate(&o, per_iter, 3);
            MPI_Send(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }

        for (int r = 0; r < o.reps; r++) {
            if (rank == 0) {
                double start = MPI_Wtime();
                for (long it = 0; it < iters; it++) {
                    for (int w = 0; w < W; w++)
                        MPI_Isend(sbuf, cnt, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
                    MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                double el = MPI_Wtime() - start;
                samples[r] = (double)n * (double)W * (double)iters / el / 1e6;
            } else {
                for (long it = 0; it < iters; it++) {
                    for (int w = 0; w < W; w++)
                        MPI_Irecv(rbufs + (size_t)w * (size_t)n, cnt, MPI_BYTE, peer, TAG_DATA,
                                  MPI_COMM_WORLD, &reqs[w]);
                    MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD);
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
            printf("%ld %.2f %.2f %.2f %ld\n", n, med, lo, hi, iters);
            fflush(stdout);
        }
    }

    free(reqs);
    free(sbuf);
    free(rbufs);
    bench_done(rank);
    MPI_Finalize();
    return 0;
}
