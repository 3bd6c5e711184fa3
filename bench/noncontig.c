/*
 * noncontig: ping-pong of non-contiguous data described by a derived datatype, ranks 0 <-> 1.
 *
 *   -p column  (default) one column of a row-major R x C matrix of doubles, sent and received
 *              as MPI_Type_vector(R, 1, C, MPI_DOUBLE): R blocks of 8 bytes, C * 8 bytes apart
 *              (C = 64 by default, -c to change). The size is the payload, 8 * R bytes.
 *   -p struct  an array of n structs { char kind; double pos[3]; int id; double mass; }
 *              (48 bytes each in C, 37 of them data in 4 pieces) described by
 *              MPI_Type_create_struct with offsetof and resized to sizeof; the size is the
 *              payload, 37 * n bytes (the nearest whole number of structs).
 *
 * Both sides use the same datatype (rank 1 receives into its own column / array and sends it
 * back). One-way time = round trip / 2, in microseconds. The first warm-up round trip carries a
 * pattern that rank 1 checks element by element (and that must leave the gaps untouched).
 *
 * Output: header lines starting with '#', then "<size_bytes> <time_us> <min_us> <max_us> <iters>".
 */
#include "common.h"

#include <stddef.h>

#define TAG_PING 1
#define TAG_PONG 2
#define TAG_CTRL 3

struct particle {
    char kind;
    double pos[3];
    int id;
    double mass;
};

#define STRUCT_DATA (1 + 3 * 8 + 4 + 8)

static int use_struct;
static long ncols = 64;

/* Elements (rows or structs) carrying about `bytes` of payload. */
static long elements_for(long bytes)
{
    long per = use_struct ? STRUCT_DATA : 8;
    long n = (bytes + per / 2) / per;
    return n < 1 ? 1 : n;
}

static MPI_Datatype make_type(long n)
{
    MPI_Datatype t;
    if (!use_struct) {
        MPI_Type_vector((int)n, 1, (int)ncols, MPI_DOUBLE, &t);
    } else {
        int bl[4] = {1, 3, 1, 1};
        MPI_Aint d[4] = {offsetof(struct particle, kind), offsetof(struct particle, pos),
                         offsetof(struct particle, id), offsetof(struct particle, mass)};
        MPI_Datatype ts[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_DOUBLE};
        MPI_Datatype s, r;
        MPI_Type_create_struct(4, bl, d, ts, &s);
        MPI_Type_create_resized(s, 0, sizeof(struct particle), &r);
        MPI_Type_free(&s);
        MPI_Type_contiguous((int)n, r, &t);
        MPI_Type_free(&r);
    }
    MPI_Type_commit(&t);
    return t;
}

/* Fill the data of n elements with a pattern depending on the seed; gaps get `gap`. */
static void fill(void *buf, long n, long seed, int gap)
{
    if (!use_struct) {
        double *m = buf;
        for (long i = 0; i < n; i++)
            for (long j = 0; j < ncols; j++)
                m[i * ncols + j] = j == 0 ? (double)(i * 7 + seed) : (double)gap;
    } else {
        struct particle *p = buf;
        memset(p, gap, sizeof(struct particle) * (size_t)n);
        for (long i = 0; i < n; i++) {
            p[i].kind = (char)(i + seed);
            for (int k = 0; k < 3; k++)
                p[i].pos[k] = (double)(i * 3 + k + seed);
            p[i].id = (int)(i ^ seed);
            p[i].mass = (double)i * 0.5 + (double)seed;
        }
    }
}

/* -1 if the data of n elements has the pattern and the gaps still hold `gap`, else the index of
 * the first wrong element. */
static long check(const void *buf, long n, long seed, int gap)
{
    if (!use_struct) {
        const double *m = buf;
        for (long i = 0; i < n; i++)
            for (long j = 0; j < ncols; j++)
                if (m[i * ncols + j] != (j == 0 ? (double)(i * 7 + seed) : (double)gap))
                    return i;
    } else {
        const struct particle *p = buf;
        for (long i = 0; i < n; i++) {
            int ok = p[i].kind == (char)(i + seed) && p[i].id == (int)(i ^ seed) &&
                     p[i].mass == (double)i * 0.5 + (double)seed;
            for (int k = 0; k < 3; k++)
                ok = ok && p[i].pos[k] == (double)(i * 3 + k + seed);
            /* The 7 padding bytes after kind and the 4 after id must be untouched. */
            const unsigned char *raw = (const unsigned char *)&p[i];
            for (size_t b = 1; b < offsetof(struct particle, pos); b++)
                ok = ok && raw[b] == (unsigned char)gap;
            for (size_t b = offsetof(struct particle, id) + 4; b < offsetof(struct particle, mass); b++)
                ok = ok && raw[b] == (unsigned char)gap;
            if (!ok)
                return i;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Our own flags first (-p, -c), the common ones after. */
    int nargc = 1;
    char **nargv = malloc(sizeof(char *) * (size_t)(argc + 1));
    nargv[0] = argv[0];
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            const char *p = argv[++i];
            if (strcmp(p, "struct") == 0)
                use_struct = 1;
            else if (strcmp(p, "column") != 0)
                bad = 1;
        } else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            ncols = atol(argv[++i]);
            if (ncols < 1)
                bad = 1;
        } else {
            nargv[nargc++] = argv[i];
        }
    }
    nargv[nargc] = NULL;

    struct bench_opts o = {.reps = 7, .warmup = 100, .target_ms = 20.0, .max_iters = 1000000};
    int pr = bad ? -1 : bench_parse(nargc, nargv, &o, 8, 1L << 20, 0);
    if (pr != 0) {
        if (rank == 0)
            bench_usage(argv[0], "one-way time (half round trip) of a non-contiguous transfer, "
                        "microseconds: -p column (a column of an R x C matrix of doubles, -c C, "
                        "default 64) or -p struct (an array of structs); the size is the payload; "
                        "default sizes 8..1M", " [-p column|struct] [-c COLS]");
        MPI_Finalize();
        return pr < 0 ? 2 : 0;
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "noncontig: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }

    long maxn = 1;
    for (int i = 0; i < o.nsizes; i++)
        if (elements_for(o.sizes[i]) > maxn)
            maxn = elements_for(o.sizes[i]);
    size_t bytes = use_struct ? sizeof(struct particle) * (size_t)maxn
                              : sizeof(double) * (size_t)maxn * (size_t)ncols;
    void *buf = malloc(bytes);
    if (!buf)
        bench_die("out of memory");
    memset(buf, 0, bytes);

    if (rank == 0) {
        print_header(use_struct ? "noncontig struct" : "noncontig column", size, &o);
        if (use_struct)
            printf("# measure: one-way time = round trip / 2, ranks 0 <-> 1, MPI_Send/MPI_Recv of n "
                   "structs {char; double[3]; int; double} (%zu bytes, %d of data) as a resized "
                   "struct type\n", sizeof(struct particle), STRUCT_DATA);
        else
            printf("# measure: one-way time = round trip / 2, ranks 0 <-> 1, MPI_Send/MPI_Recv of "
                   "one column of an R x %ld matrix of doubles as MPI_Type_vector(R, 1, %ld, "
                   "MPI_DOUBLE)\n", ncols, ncols);
        printf("# unit: microseconds (lower is better); size = payload bytes\n");
        printf("# columns: size_bytes time_us min_us max_us iters_per_rep\n");
    }
    if (rank <= 1)
        print_binding(rank, 2);
    if (rank == 0)
        fflush(stdout);

    double samples[BENCH_MAX_REPS];
    for (int si = 0; si < o.nsizes; si++) {
        long n = elements_for(o.sizes[si]);
        long payload = n * (use_struct ? STRUCT_DATA : 8);
        if (rank > 1)
            continue;
        int peer = 1 - rank;
        MPI_Datatype t = make_type(n);

        long warm = o.warmup;
        if (payload > 65536 && warm > 4) {
            warm = (long)((double)warm * 65536.0 / (double)payload);
            if (warm < 4)
                warm = 4;
        }
        /* Rank 0 sends the pattern; rank 1 checks it, with its gaps preset to 0x5a. */
        fill(buf, n, si + 1, rank == 0 ? 0 : 0x5a);
        long half = warm / 2;
        double t0 = MPI_Wtime();
        for (long it = 0; it < warm; it++) {
            if (it == half)
                t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, 1, t, peer, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(buf, 1, t, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, 1, t, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (it == 0) {
                    long badi = check(buf, n, si + 1, 0x5a);
                    if (badi >= 0) {
                        fprintf(stderr, "noncontig: wrong data in element %ld of %ld (payload %ld "
                                "bytes)\n", badi, n, payload);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                }
                MPI_Send(buf, 1, t, peer, TAG_PONG, MPI_COMM_WORLD);
            }
        }
        double per_iter = (MPI_Wtime() - t0) / (double)(warm - half);

        long iters;
        if (rank == 0) {
            iters = calibrate(&o, per_iter, 5);
            MPI_Send(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&iters, 1, MPI_LONG, peer, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int r = 0; r < o.reps; r++) {
            double start = MPI_Wtime();
            for (long it = 0; it < iters; it++) {
                if (rank == 0) {
                    MPI_Send(buf, 1, t, peer, TAG_PING, MPI_COMM_WORLD);
                    MPI_Recv(buf, 1, t, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, 1, t, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, 1, t, peer, TAG_PONG, MPI_COMM_WORLD);
                }
            }
            samples[r] = (MPI_Wtime() - start) / (double)iters / 2.0 * 1e6;
        }
        if (rank == 0) {
            double lo = samples[0], hi = samples[0];
            for (int r = 1; r < o.reps; r++) {
                if (samples[r] < lo) lo = samples[r];
                if (samples[r] > hi) hi = samples[r];
            }
            printf("%ld %.3f %.3f %.3f %ld\n", payload, median(samples, o.reps), lo, hi, iters);
            fflush(stdout);
        }
        MPI_Type_free(&t);
    }

    free(buf);
    free(nargv);
    bench_done(rank);
    MPI_Finalize();
    return 0;
}
