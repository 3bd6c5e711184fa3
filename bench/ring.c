/*
 * ring: a token passed around all ranks, rank r -> r+1 -> ... -> 0, with MPI_Send / MPI_Recv.
 *
 * Rank 0 starts each lap and receives the token back from the last rank. The token's first 8
 * bytes are a counter that every rank increments, so rank 0 can check that the token really went
 * through every rank. The reported time is per ring step (one hop): the time of a block of laps
 * divided by laps * ranks; the printed value is the median over repetitions. The program is meant
 * to be run with more ranks than cores (8 ranks on 2 cores), where it measures how well an MPI
 * behaves when its processes must share cores (yielding versus busy polling).
 *
 * Output: header lines starting with '#', then "<size_bytes> <step_us> <min_us> <max_us> <laps>".
 */
#include "common.h"

#define TAG_TOKEN 20
#define TAG_CTRL 21

/* One lap. Returns the counter rank 0 sees when the token comes back. */
static int64_t lap(int rank, int size, unsigned char *buf, int cnt)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int64_t c = 0;
    if (rank == 0) {
        if (cnt >= 8)
            memcpy(buf, &c, 8);
        MPI_Send(buf, cnt, MPI_BYTE, next, TAG_TOKEN, MPI_COMM_WORLD);
        MPI_Recv(buf, cnt, MPI_BYTE, prev, TAG_TOKEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (cnt >= 8)
            memcpy(&c, buf, 8);
    } else {
        MPI_Recv(buf, cnt, MPI_BYTE, prev, TAG_TOKEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (cnt >= 8) {
            memcpy(&c, buf, 8);
            c++;
            memcpy(buf, &c, 8);
        }
        MPI_Send(buf, cnt, MPI_BYTE, next, TAG_TOKEN, MPI_COMM_WORLD);
    }
    return c;
}

/* Rank 0 tells every other rank a number by passing it around the ring. */
static long ring_share(int rank, int size, long v)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank == 0) {
        MPI_Send(&v, 1, MPI_LONG, next, TAG_CTRL, MPI_COMM_WORLD);
        MPI_Recv(&v, 1, MPI_LONG, prev, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&v, 1, MPI_LONG, prev, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&v, 1, MPI_LONG, next, TAG_CTRL, MPI_COMM_WORLD);
    }
    return v;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct bench_opts o = {.reps = 5, .warmup = 20, .target_ms = 100.0, .max_iters = 1000000};
    int pr = bench_parse(argc, argv, &o, 8, 8, 0);
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "time per ring step (one hop) of a token around all ranks, in "
                        "microseconds; -i/-w count laps; default size 8 bytes", NULL);
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "ring: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }

    long maxsz = 8;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxsz)
            maxsz = o.sizes[i];
    unsigned char *buf = malloc((size_t)maxsz);
    if (!buf)
        bench_die("out of memory");
    memset(buf, 0, (size_t)maxsz);

    if (rank == 0) {
        print_header("ring", size, &o);
        printf("# measure: token around a ring of %d ranks with MPI_Send/MPI_Recv; time per step "
               "(hop) = lap time / %d\n", size, size);
        printf("# unit: microseconds per step (lower is better)\n");
        printf("# columns: size_bytes step_us min_us max_us laps_per_rep\n");
    }
    print_binding(rank, size);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        long n = o.sizes[si];
        if (n < 0 || n > maxsz)
            bench_die("bad size");
        int cnt = (int)n;

        long warm = o.warmup < 2 ? 2 : o.warmup;
        long half = warm / 2;
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            int64_t c = lap(rank, size, buf, cnt);
            if (rank == 0 && cnt >= 8 && c != size - 1) {
                fprintf(stderr, "ring: token came back with count %lld, expected %d\n",
                        (long long)c, size - 1);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        double per_lap = (MPI_Wtime() - t0) / (double)(warm - half);
        long laps = ring_share(rank, size, rank == 0 ? calibrate(&o, per_lap, 3) : 0);

        for (int r = 0; r < o.reps; r++) {
            double start = MPI_Wtime();
            for (long it = 0; it < laps; it++)
                lap(rank, size, buf, cnt);
            if (rank == 0)
                samples[r] = (MPI_Wtime() - start) / (double)laps / (double)size * 1e6;
        }
        if (rank == 0) {
            double lo = samples[0], hi = samples[0];
            for (int r = 1; r < o.reps; r++) {
                if (samples[r] < lo) lo = samples[r];
                if (samples[r] > hi) hi = samples[r];
            }
            double med = median(samples, o.reps);
            printf("%ld %.3f %.3f %.3f %ld\n", n, med, lo, hi, laps);
            fflush(stdout);
        }
    }

    free(buf);
    bench_done(rank);
    MPI_Finalize();
    return 0;
}
