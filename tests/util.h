/*
 * util.h: the small harness shared by the C test programs in tests/.
 *
 * Every program includes this header first (it sets the feature macros before any system
 * header). Conventions:
 *   - A failed check prints "file:line: rank R: what failed (values)" on stderr and ends the
 *     job with MPI_Abort (or exit(1) when MPI is not initialized or already finalized).
 *     So a program never reports a failure by exiting 0.
 *   - On success rank 0 prints " No Errors" after MPI_Finalize (tu_finish). The runner needs
 *     both exit status 0 and that line.
 *   - Only the MPI API and libc (plus pthreads where a test is about threads) are used.
 *     Point-to-point tests do not use collectives, so they can run before collectives work.
 *   - If TU_TEST_NP is set (the runner sets it), tu_init checks that the size of
 *     MPI_COMM_WORLD equals it.
 */
#ifndef PROTEAN_TESTS_UTIL_H
#define PROTEAN_TESTS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int tu_rank = -1;
static int tu_size = -1;
static int tu_verbose = 0;

#if defined(__GNUC__)
#define TU_UNUSED __attribute__((unused))
#define TU_NORETURN __attribute__((noreturn))
#define TU_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TU_UNUSED
#define TU_NORETURN
#define TU_PRINTF(a, b)
#endif

/* Name of an error class, for readable failure messages. */
static TU_UNUSED const char *tu_class_name(int cls)
{
    switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_TAG: return "MPI_ERR_TAG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_GROUP: return "MPI_ERR_GROUP";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_UNKNOWN: return "MPI_ERR_UNKNOWN";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_NO_MEM: return "MPI_ERR_NO_MEM";
    default: return "(another class)";
    }
}

static TU_UNUSED TU_NORETURN TU_PRINTF(3, 4) void tu_fail(const char *file, int line,
                                                          const char *fmt, ...)
{
    int init = 0, fin = 0;
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: rank %d: ", file, line, tu_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define TU_FAIL(...) tu_fail(__FILE__, __LINE__, __VA_ARGS__)

/* CHECK(cond): the condition must hold. */
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond))                                                                     \
            TU_FAIL("check failed: %s", #cond);                                          \
    } while (0)

/* CHECK_MSG(cond, fmt, ...): same, with an explanation. */
#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            char tu_m_[512];                                                             \
            snprintf(tu_m_, sizeof tu_m_, __VA_ARGS__);                                  \
            TU_FAIL("check failed: %s: %s", #cond, tu_m_);                               \
        }                                                                                \
    } while (0)

/* CHECK_INT(a, op, b): integer comparison that prints both values on failure. */
#define CHECK_INT(a, op, b)                                                              \
    do {                                                                                 \
        long long tu_a_ = (long long)(a), tu_b_ = (long long)(b);                        \
        if (!(tu_a_ op tu_b_))                                                           \
            TU_FAIL("check failed: %s %s %s (%lld vs %lld)", #a, #op, #b, tu_a_, tu_b_); \
    } while (0)

#define CHECK_EQ(a, b) CHECK_INT(a, ==, b)

/* CHECK_MPI(call): the call must return MPI_SUCCESS. */
#define CHECK_MPI(call)                                                                  \
    do {                                                                                 \
        int tu_rc_ = (call);                                                             \
        if (tu_rc_ != MPI_SUCCESS) {                                                     \
            char tu_s_[MPI_MAX_ERROR_STRING];                                            \
            int tu_l_ = 0;                                                               \
            tu_s_[0] = 0;                                                                \
            MPI_Error_string(tu_rc_, tu_s_, &tu_l_);                                     \
            TU_FAIL("%s returned %d: %s", #call, tu_rc_, tu_s_);                         \
        }                                                                                \
    } while (0)

/* CHECK_CLASS(rc, cls): the error code rc must belong to error class cls. */
#define CHECK_CLASS(rc, cls)                                                             \
    do {                                                                                 \
        int tu_rc_ = (rc), tu_c_ = -1;                                                   \
        if (tu_rc_ == MPI_SUCCESS)                                                       \
            tu_c_ = MPI_SUCCESS;                                                         \
        else                                                                             \
            MPI_Error_class(tu_rc_, &tu_c_);                                             \
        if (tu_c_ != (cls)) {                                                            \
            char tu_s_[MPI_MAX_ERROR_STRING];                                            \
            int tu_l_ = 0;                                                               \
            tu_s_[0] = 0;                                                                \
            if (tu_rc_ != MPI_SUCCESS)                                                   \
                MPI_Error_string(tu_rc_, tu_s_, &tu_l_);                                 \
            TU_FAIL("%s: error class %d %s, expected %s (%d) [%s]", #rc, tu_c_,          \
                    tu_class_name(tu_c_), tu_class_name(cls), (int)(cls), tu_s_);        \
        }                                                                                \
    } while (0)

/* CHECK_STATUS(st, dtype, src, tag, count): source, tag and count of a received message. */
#define CHECK_STATUS(st, dtype, src, tag, count)                                         \
    do {                                                                                 \
        int tu_n_ = -12345;                                                              \
        CHECK_MPI(MPI_Get_count(&(st), (dtype), &tu_n_));                                \
        if ((st).MPI_SOURCE != (src) || (st).MPI_TAG != (tag) || tu_n_ != (count))       \
            TU_FAIL("status %s: source %d tag %d count %d, expected source %d tag %d "   \
                    "count %d", #st, (st).MPI_SOURCE, (st).MPI_TAG, tu_n_, (int)(src),   \
                    (int)(tag), (int)(count));                                           \
    } while (0)

/* The status of a completed operation on MPI_PROC_NULL, and an "empty" status (completion
 * of MPI_REQUEST_NULL or an inactive persistent request) are both defined by the standard. */
#define CHECK_PROC_NULL_STATUS(st, dtype) CHECK_STATUS(st, dtype, MPI_PROC_NULL, MPI_ANY_TAG, 0)

#define CHECK_EMPTY_STATUS(st)                                                           \
    do {                                                                                 \
        int tu_n_ = -12345, tu_f_ = -1;                                                  \
        CHECK_EQ((st).MPI_SOURCE, MPI_ANY_SOURCE);                                       \
        CHECK_EQ((st).MPI_TAG, MPI_ANY_TAG);                                             \
        CHECK_MPI(MPI_Get_count(&(st), MPI_BYTE, &tu_n_));                               \
        CHECK_EQ(tu_n_, 0);                                                              \
        CHECK_MPI(MPI_Test_cancelled(&(st), &tu_f_));                                    \
        CHECK_EQ(tu_f_, 0);                                                              \
    } while (0)

/* Message contents: a pseudo-random but reproducible pattern, different for each seed and
 * position, so that a shifted, truncated or mixed-up message is detected. Works on any
 * byte count; fast enough for multi-GiB buffers (one multiply per 8 bytes). */
static TU_UNUSED uint64_t tu_word(uint64_t seed, uint64_t i)
{
    uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull + seed);
    v ^= v >> 31;
    return v;
}

static TU_UNUSED void tu_fill(void *buf, size_t nbytes, uint64_t seed)
{
    unsigned char *p = (unsigned char *)buf;
    size_t nw = nbytes / 8, i;
    for (i = 0; i < nw; i++) {
        uint64_t w = tu_word(seed, i);
        memcpy(p + 8 * i, &w, 8);
    }
    if (nbytes % 8) {
        uint64_t w = tu_word(seed, nw);
        memcpy(p + 8 * nw, &w, nbytes % 8);
    }
}

/* Returns the first byte offset that differs from the pattern, or -1 if all match. */
static TU_UNUSED long long tu_verify(const void *buf, size_t nbytes, uint64_t seed)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t nw = nbytes / 8, i, j;
    for (i = 0; i < nw; i++) {
        uint64_t w = tu_word(seed, i);
        if (memcmp(p + 8 * i, &w, 8) != 0) {
            const unsigned char *q = (const unsigned char *)&w;
            for (j = 0; j < 8 && p[8 * i + j] == q[j]; j++)
                ;
            return (long long)(8 * i + j);
        }
    }
    if (nbytes % 8) {
        uint64_t w = tu_word(seed, nw);
        const unsigned char *q = (const unsigned char *)&w;
        for (j = 0; j < nbytes % 8; j++)
            if (p[8 * nw + j] != q[j])
                return (long long)(8 * nw + j);
    }
    return -1;
}

/* CHECK_BUF(buf, nbytes, seed): the buffer holds the pattern for seed. */
#define CHECK_BUF(buf, nbytes, seed)                                                     \
    do {                                                                                 \
        long long tu_o_ = tu_verify((buf), (size_t)(nbytes), (uint64_t)(seed));          \
        if (tu_o_ >= 0)                                                                  \
            TU_FAIL("data mismatch in %s (%lld bytes, seed %llu) at byte %lld", #buf,     \
                    (long long)(nbytes), (unsigned long long)(seed), tu_o_);              \
    } while (0)

/* CHECK_BYTES(buf, nbytes, value): every byte equals value (for "left untouched" checks). */
#define CHECK_BYTES(buf, nbytes, value)                                                  \
    do {                                                                                 \
        const unsigned char *tu_p_ = (const unsigned char *)(buf);                       \
        size_t tu_i_;                                                                    \
        for (tu_i_ = 0; tu_i_ < (size_t)(nbytes); tu_i_++)                               \
            if (tu_p_[tu_i_] != (unsigned char)(value))                                  \
                TU_FAIL("%s[%zu] = 0x%02x, expected 0x%02x", #buf, tu_i_, tu_p_[tu_i_],   \
                        (unsigned)(unsigned char)(value));                               \
    } while (0)

/* Seed of the k-th message from src to dst: distinct for every (src, dst, k). */
#define TU_SEED(src, dst, k) ((uint64_t)(src) * 1000003u + (uint64_t)(dst) * 7919u + (uint64_t)(k))

static TU_UNUSED void *tu_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        TU_FAIL("out of memory allocating %zu bytes", n);
    return p;
}

static TU_UNUSED void tu_sleep_ms(int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Verbose output (TU_VERBOSE=1 in the environment), prefixed with the rank. */
#define TU_LOG(...)                                                                      \
    do {                                                                                 \
        if (tu_verbose) {                                                                \
            printf("[%d] ", tu_rank);                                                    \
            printf(__VA_ARGS__);                                                         \
            fflush(stdout);                                                              \
        }                                                                                \
    } while (0)

/* The directory for the files a program makes: the runner's scratch directory for this run
 * (TU_TEST_SCRATCH, removed after the run however it ended), else /tmp. */
static TU_UNUSED const char *tu_scratch(void)
{
    const char *d = getenv("TU_TEST_SCRATCH");
    return d && *d ? d : "/tmp";
}

/* Known deviations of the implementation under test that the manifest asks a program to
 * tolerate (quirk=mpi:name; the runner passes the names in TU_TEST_QUIRKS). A program
 * relaxes exactly the one check named, so the rest of it still runs on that implementation.
 * Nothing is set for Protean. */
static TU_UNUSED int tu_quirk(const char *name)
{
    const char *q = getenv("TU_TEST_QUIRKS");
    size_t n = strlen(name);
    while (q && *q) {
        if (strncmp(q, name, n) == 0 && (q[n] == ',' || q[n] == 0))
            return 1;
        q = strchr(q, ',');
        if (q)
            q++;
    }
    return 0;
}

/* After MPI_Init / MPI_Init_thread: record rank and size, check the expected size. */
static TU_UNUSED void tu_after_init(void)
{
    const char *np = getenv("TU_TEST_NP");
    const char *v = getenv("TU_VERBOSE");
    tu_verbose = v && *v && *v != '0';
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tu_rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tu_size));
    if (np && *np)
        CHECK_MSG(tu_size == atoi(np), "MPI_COMM_WORLD has %d processes, launched with %s",
                  tu_size, np);
}

static TU_UNUSED void tu_init(int *argc, char ***argv)
{
    CHECK_MPI(MPI_Init(argc, argv));
    tu_after_init();
}

/* Finalize; rank 0 reports success. Returns the process exit status. */
static TU_UNUSED int tu_finish(void)
{
    int rank = tu_rank;
    fflush(stdout);
    CHECK_MPI(MPI_Finalize());
    if (rank == 0) {
        printf(" No Errors\n");
        fflush(stdout);
    }
    return 0;
}

/* Collective tests run every call in one form, named by the program's first argument:
 * blocking (the default), nonblocking or persistent. tu_coll_form(argc, argv) reads it into
 * tu_form; TU_COLL(MPI_X, MPI_Ix, MPI_X_init, args...) runs MPI_X(args...) in that form. The
 * nonblocking request is tested once, then waited for, and must be freed by completion; the
 * persistent request is started and completed tu_starts times (it must stay allocated), then
 * freed. A program whose calls work in place sets tu_starts to 1, since a second start would
 * combine the results of the first. */
enum { TU_BLOCKING, TU_NONBLOCKING, TU_PERSISTENT };
static TU_UNUSED int tu_form = TU_BLOCKING;
static TU_UNUSED int tu_starts = 2;

static TU_UNUSED void tu_coll_form(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "blocking";
    if (!strcmp(m, "nonblocking"))
        tu_form = TU_NONBLOCKING;
    else if (!strcmp(m, "persistent"))
        tu_form = TU_PERSISTENT;
    else
        CHECK_MSG(!strcmp(m, "blocking"), "unknown form %s", m);
}

#if MPI_VERSION >= 4
#define TU_PERSIST(init, ...)                                                            \
    do {                                                                                 \
        MPI_Request tu_q_;                                                               \
        CHECK_MPI(init(__VA_ARGS__, MPI_INFO_NULL, &tu_q_));                             \
        for (int tu_k_ = 0; tu_k_ < tu_starts; tu_k_++) {                                \
            CHECK_MPI(MPI_Start(&tu_q_));                                                \
            CHECK_MPI(MPI_Wait(&tu_q_, MPI_STATUS_IGNORE));                              \
            CHECK(tu_q_ != MPI_REQUEST_NULL);                                            \
        }                                                                                \
        CHECK_MPI(MPI_Request_free(&tu_q_));                                             \
    } while (0)
#else
#define TU_PERSIST(init, ...) TU_FAIL("persistent collectives need MPI 4")
#endif

#define TU_COLL(blk, nb, init, ...)                                                      \
    do {                                                                                 \
        if (tu_form == TU_BLOCKING) {                                                    \
            CHECK_MPI(blk(__VA_ARGS__));                                                 \
        } else if (tu_form == TU_NONBLOCKING) {                                          \
            MPI_Request tu_q_;                                                           \
            int tu_f_ = 0;                                                               \
            CHECK_MPI(nb(__VA_ARGS__, &tu_q_));                                          \
            CHECK_MPI(MPI_Test(&tu_q_, &tu_f_, MPI_STATUS_IGNORE));                      \
            if (!tu_f_)                                                                  \
                CHECK_MPI(MPI_Wait(&tu_q_, MPI_STATUS_IGNORE));                          \
            CHECK(tu_q_ == MPI_REQUEST_NULL);                                            \
        } else {                                                                         \
            TU_PERSIST(init, __VA_ARGS__);                                               \
        }                                                                                \
    } while (0)

/* Integer buffers for collective tests: b[0..n) = v; a new buffer of n ints (one at least,
 * so that a count of 0 still has a valid address) set to v. */
static TU_UNUSED void tu_set_ints(int *b, size_t n, int v)
{
    for (size_t i = 0; i < n; i++)
        b[i] = v;
}

static TU_UNUSED int *tu_ints(size_t n, int v)
{
    int *p = (int *)tu_malloc((n ? n : 1) * sizeof(int));
    tu_set_ints(p, n, v);
    return p;
}

/* Partner for pairwise tests: ranks (0,1), (2,3), ...; a rank without a partner (the last one
 * when the size is odd, or the only one) is its own partner. */
static TU_UNUSED int tu_partner(void)
{
    int p = tu_rank ^ 1;
    return p < tu_size ? p : tu_rank;
}

#endif /* PROTEAN_TESTS_UTIL_H */
