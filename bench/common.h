/*
 * Shared helpers for the Protean benchmark programs in bench/.
 *
 * The programs use only the MPI API for communication (plus libc and, for the header line that
 * reports CPU binding, sched_getaffinity). Every program prints a few header lines starting with
 * '#', then one line per message size: "<size_bytes> <value>". bench/run parses exactly that.
 *
 * Rank 0 prints "# done" after the last size, just before MPI_Finalize.
 *
 * Common flags (each program documents its own defaults in --help):
 *   -m BYTES   smallest size (0 means: also measure 0 bytes, then 1, 2, 4, ...)
 *   -M BYTES   largest size (powers of two between -m and -M)
 *   -s LIST    explicit comma-separated list of sizes (overrides -m/-M)
 *   -r N       repetitions per size; the value printed is the median over them
 *   -w N       warm-up iterations per size (not timed)
 *   -i N       fixed number of timed iterations per repetition (default: calibrated so that one
 *              repetition takes about -t milliseconds)
 *   -t MS      target duration of one repetition when calibrating
 *   -q         quick: fewer repetitions, shorter repetitions
 *   -h         help
 */
#ifndef PROTEAN_BENCH_COMMON_H
#define PROTEAN_BENCH_COMMON_H

#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_MAX_SIZES 64
#define BENCH_MAX_REPS 1000

struct bench_opts {
    long sizes[BENCH_MAX_SIZES];
    int nsizes;
    int reps;
    int warmup;
    long fixed_iters;  /* 0 = calibrate */
    double target_ms;
    long max_iters;
    int quick;
    int extra_int;     /* program-specific (-W window for bw, -l laps for ring) */
};

static inline void bench_die(const char *msg)
{
    fprintf(stderr, "bench: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static inline long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0)
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end != '\0' || v > (1L << 30))
        return -1;
    return v;
}

/* Powers of two from lo to hi; if lo is 0, the list starts with 0 then 1. */
static inline void sizes_range(struct bench_opts *o, long lo, long hi)
{
    o->nsizes = 0;
    if (lo == 0) {
        o->sizes[o->nsizes++] = 0;
        lo = 1;
    }
    long p = 1;
    while (p < lo)
        p <<= 1;
    for (; p <= hi && o->nsizes < BENCH_MAX_SIZES; p <<= 1)
        o->sizes[o->nsizes++] = p;
}

static inline int sizes_list(struct bench_opts *o, const char *list)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    o->nsizes = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long v = parse_size(tok);
        if (v < 0 || o->nsizes >= BENCH_MAX_SIZES)
            return -1;
        o->sizes[o->nsizes++] = v;
    }
    return o->nsizes > 0 ? 0 : -1;
}

/*
 * Parse the common flags. 'xflag' is a program-specific integer flag letter (0 for none) stored
 * in o->extra_int. Returns 0 to run, 1 if help was asked for, -1 on a bad flag.
 */
static inline int bench_parse(int argc, char **argv, struct bench_opts *o, long def_lo, long def_hi,
                       char xflag)
{
    long lo = def_lo, hi = def_hi;
    const char *list = NULL;
    int reps_set = 0, target_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0' || a[2] != '\0')
            goto bad;
        char f = a[1];
        if (f == 'h')
            return 1;
        if (f == 'q') {
            o->quick = 1;
            continue;
        }
        if (i + 1 >= argc)
            goto bad;
        const char *v = argv[++i];
        long n;
        switch (f) {
        case 'm': if ((lo = parse_size(v)) < 0) goto bad; break;
        case 'M': if ((hi = parse_size(v)) < 0) goto bad; break;
        case 's': list = v; break;
        case 'r': o->reps = atoi(v); reps_set = 1; if (o->reps < 1 || o->reps > BENCH_MAX_REPS) goto bad; break;
        case 'w': o->warmup = atoi(v); if (o->warmup < 0) goto bad; break;
        case 'i': if ((n = parse_size(v)) < 1) goto bad; o->fixed_iters = n; break;
        case 't': o->target_ms = atof(v); target_set = 1; if (o->target_ms <= 0) goto bad; break;
        default:
            if (xflag && f == xflag) {
                o->extra_int = atoi(v);
                if (o->extra_int < 1) goto bad;
                break;
            }
            goto bad;
        }
    }
    if (o->quick) {
        if (!reps_set) o->reps = 3;
        if (!target_set) o->target_ms /= 4;
        if (o->warmup > 10) o->warmup /= 4;
    }
    if (list) {
        if (sizes_list(o, list) < 0) goto bad;
    } else {
        if (hi < lo) goto bad;
        sizes_range(o, lo, hi);
    }
    return 0;
bad:
    return -1;
}

static inline void bench_usage(const char *prog, const char *what, const char *extra)
{
    fprintf(stderr,
            "usage: %s [-m MIN] [-M MAX] [-s LIST] [-r REPS] [-w WARMUP] [-i ITERS] [-t MS] [-q]%s\n"
            "  %s\n"
            "  sizes accept k/M suffixes (powers of 1024); -s gives an explicit list, e.g. -s 8,1M\n",
            prog, extra ? extra : "", what);
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Calibrated iteration count: enough iterations for one repetition to last target_ms, given the
 * time one iteration took during warm-up. */
static inline long calibrate(const struct bench_opts *o, double per_iter_s, long min_iters)
{
    if (o->fixed_iters > 0)
        return o->fixed_iters;
    long n = per_iter_s > 0 ? (long)(o->target_ms * 1e-3 / per_iter_s) : o->max_iters;
    if (n < min_iters) n = min_iters;
    if (n > o->max_iters) n = o->max_iters;
    return n;
}

/* Compact list of the CPUs this process may run on, e.g. "0" or "0-1". */
static inline void affinity_string(char *out, size_t len)
{
    cpu_set_t set;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        snprintf(out, len, "?");
        return;
    }
    size_t used = 0;
    for (int c = 0; c < CPU_SETSIZE && used + 16 < len; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
            e++;
        used += snprintf(out + used, len - used, "%s%d", used ? "," : "", c);
        if (e > c)
            used += snprintf(out + used, len - used, "-%d", e);
        c = e;
    }
}

/* Rank 0 prints "# binding: r0=<cpus> r1=<cpus> ..." collected with point-to-point messages. */
static inline void print_binding(int rank, int size)
{
    char mine[128];
    affinity_string(mine, sizeof mine);
    if (rank != 0) {
        MPI_Send(mine, (int)sizeof mine, MPI_CHAR, 0, 9001, MPI_COMM_WORLD);
        return;
    }
    printf("# binding:");
    for (int r = 0; r < size; r++) {
        char other[128];
        if (r == 0)
            memcpy(other, mine, sizeof other);
        else
            MPI_Recv(other, (int)sizeof other, MPI_CHAR, r, 9001, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        other[sizeof other - 1] = '\0';
        printf(" r%d=%s", r, other);
    }
    printf("\n");
}

/* Rank 0 prints the common header: benchmark name, MPI library, ranks, repetitions. */
static inline void print_header(const char *name, int size, const struct bench_opts *o)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[len < (int)sizeof ver ? len : (int)sizeof ver - 1] = '\0';
    char *nl = strchr(ver, '\n');
    if (nl) *nl = '\0';
    printf("# protean-bench %s\n", name);
    printf("# mpi: %s\n", ver);
    printf("# ranks: %d\n", size);
    if (o->fixed_iters > 0)
        printf("# reps: %d (median reported); iterations per rep: %ld (fixed)\n", o->reps, o->fixed_iters);
    else
        printf("# reps: %d (median reported); iterations per rep: calibrated to ~%.1f ms, max %ld\n",
               o->reps, o->target_ms, o->max_iters);
}

/* Rank 0 prints "# done" just before MPI_Finalize, so that a runner can tell a finished
 * measurement from one still running if MPI_Finalize itself does not return. */
static inline void bench_done(int rank)
{
    if (rank == 0) {
        printf("# done\n");
        fflush(stdout);
    }
}

/* Fill a buffer with a pattern that depends on the size and the offset, for a one-time check. */
static inline void fill_pattern(unsigned char *p, long n, long seed)
{
    for (long i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 7 + seed * 13 + 1) & 0xff);
}

static inline long check_pattern(const unsigned char *p, long n, long seed)
{
    for (long i = 0; i < n; i++)
        if (p[i] != (unsigned char)((i * 7 + seed * 13 + 1) & 0xff))
            return i;
    return -1;
}

#endif
