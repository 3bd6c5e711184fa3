/*
 * Large non-contiguous messages: every byte of the type map arrives, in order, and nothing
 * outside the receiver's type map is written, whatever the two sides' layouts are.
 *
 * Each case sends a byte pattern: the sender unpacks it into its buffer with its own type
 * (MPI_Unpack; the gaps hold other bytes), sends, and the receiver compares its whole buffer
 * with a reference it builds the same way with its type over a buffer of 0xEE bytes (so gaps
 * must still be 0xEE). Sizes run from 40 KB to 2 MB of payload, so they cover messages that
 * travel in many pieces and pieces that end inside an element.
 *  1. a column of a row-major matrix of doubles (MPI_Type_vector), both sides;
 *  2. an array of C structs with padding (struct resized to sizeof), both sides, also an odd
 *     number of structs;
 *  3. column -> contiguous doubles, and contiguous doubles -> column;
 *  4. a vector of int blocks of 3 -> an indexed type with irregular blocks (same signature);
 *  5. three messages in flight at once (MPI_Isend, MPI_Irecv posted in the reverse order of
 *     their tags), and MPI_Ssend;
 *  6. truncation under MPI_ERRORS_RETURN: the receive holds fewer elements; MPI_ERR_TRUNCATE,
 *     the source and tag in the status, and nothing written outside the receive's type map;
 *     later messages still arrive intact.
 * Pairs (0,1), (2,3), ...: the even rank sends, the odd one receives; alone, a rank sends to
 * itself. Any size >= 1.
 */
#include "util.h"
#include <stddef.h>

struct particle {
    char kind;
    double pos[3];
    int id;
    double mass;
};

#define COLS 8

static int partner, sender, receiver;

/* Bytes from the buffer start to the end of the last byte of `count` elements of `t` (types
 * here have lb 0 and true lb >= 0). */
static size_t span_of(MPI_Datatype t, int count)
{
    MPI_Aint lb, ext, tlb, text;
    CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
    CHECK_MPI(MPI_Type_get_true_extent(t, &tlb, &text));
    CHECK(lb == 0 && tlb >= 0);
    return count == 0 ? 0 : (size_t)(tlb + (MPI_Aint)(count - 1) * ext + text);
}

static size_t bytes_of(MPI_Datatype t, int count)
{
    int sz;
    CHECK_MPI(MPI_Type_size(t, &sz));
    return (size_t)sz * (size_t)count;
}

/* A buffer of `count` elements of `t` holding the first bytes of the pattern `seed`, the rest
 * `fill`. */
static unsigned char *make_buf(MPI_Datatype t, int count, uint64_t seed, int fill)
{
    size_t span = span_of(t, count), n = bytes_of(t, count);
    unsigned char *b = tu_malloc(span + 1), *pat = tu_malloc(n + 1);
    int pos = 0;
    memset(b, fill, span + 1);
    tu_fill(pat, n, seed);
    CHECK_MPI(MPI_Unpack(pat, (int)n, &pos, b, count, t, MPI_COMM_WORLD));
    CHECK_EQ(pos, (int)n);
    free(pat);
    return b;
}

/* Compare a received buffer with the reference for `count` elements of `t` (of which only
 * the first `got` bytes of the pattern arrived). */
static void check_buf(const char *what, const unsigned char *b, MPI_Datatype t, int count,
                      size_t got, uint64_t seed)
{
    size_t span = span_of(t, count), n = bytes_of(t, count), i;
    unsigned char *ref = tu_malloc(span + 1), *pat = tu_malloc(n + 1);
    int pos = 0;
    memset(ref, 0xEE, span + 1);
    tu_fill(pat, n, seed);
    /* The bytes that did not arrive keep 0xEE in the reference: unpack the pattern, then
     * put 0xEE back over the part of the stream past `got`. */
    memset(pat + got, 0xEE, n - got);
    CHECK_MPI(MPI_Unpack(pat, (int)n, &pos, ref, count, t, MPI_COMM_WORLD));
    for (i = 0; i < span; i++)
        if (b[i] != ref[i])
            TU_FAIL("%s: byte %zu of the receive buffer is 0x%02x, expected 0x%02x", what, i,
                    b[i], ref[i]);
    free(ref);
    free(pat);
}

/* For each byte of `count` elements of `t` (from the buffer start): 1 if the type map names
 * it. */
static unsigned char *type_map_mask(MPI_Datatype t, int count)
{
    size_t span = span_of(t, count), n = bytes_of(t, count);
    unsigned char *m = tu_malloc(span + 1), *ones = tu_malloc(n + 1);
    int pos = 0;
    memset(m, 0, span + 1);
    memset(ones, 1, n + 1);
    CHECK_MPI(MPI_Unpack(ones, (int)n, &pos, m, count, t, MPI_COMM_WORLD));
    free(ones);
    return m;
}

/* One message: `sc` elements of `st` from the sender, `rc` elements of `rt` at the receiver. */
static void one(const char *what, MPI_Datatype st, int sc, MPI_Datatype rt, int rc, int tag,
                int sync)
{
    uint64_t seed = TU_SEED(sender ? tu_rank : partner, receiver ? tu_rank : partner, tag);
    MPI_Request sr = MPI_REQUEST_NULL;
    MPI_Status s;
    unsigned char *sb = NULL, *rb = NULL;
    int got;
    if (sender) {
        sb = make_buf(st, sc, seed, 0x55);
        if (sync)
            CHECK_MPI(MPI_Issend(sb, sc, st, partner, tag, MPI_COMM_WORLD, &sr));
        else
            CHECK_MPI(MPI_Isend(sb, sc, st, partner, tag, MPI_COMM_WORLD, &sr));
    }
    if (receiver) {
        size_t span = span_of(rt, rc);
        rb = tu_malloc(span + 1);
        memset(rb, 0xEE, span + 1);
        CHECK_MPI(MPI_Recv(rb, rc, rt, partner, tag, MPI_COMM_WORLD, &s));
        CHECK_EQ(s.MPI_SOURCE, partner);
        CHECK_EQ(s.MPI_TAG, tag);
        CHECK_MPI(MPI_Get_count(&s, MPI_BYTE, &got));
        CHECK_EQ(got, (int)bytes_of(st, sc));
        check_buf(what, rb, rt, rc, (size_t)got, seed);
        free(rb);
    }
    if (sender) {
        CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        free(sb);
    }
}

static MPI_Datatype column(int rows)
{
    MPI_Datatype t;
    CHECK_MPI(MPI_Type_vector(rows, 1, COLS, MPI_DOUBLE, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

static MPI_Datatype particle_type(void)
{
    int bl[4] = {1, 3, 1, 1};
    MPI_Aint d[4] = {offsetof(struct particle, kind), offsetof(struct particle, pos),
                     offsetof(struct particle, id), offsetof(struct particle, mass)};
    MPI_Datatype ts[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_DOUBLE}, s, r;
    CHECK_MPI(MPI_Type_create_struct(4, bl, d, ts, &s));
    CHECK_MPI(MPI_Type_create_resized(s, 0, sizeof(struct particle), &r));
    CHECK_MPI(MPI_Type_free(&s));
    CHECK_MPI(MPI_Type_commit(&r));
    return r;
}

/* `n` ints (n a multiple of 3) as blocks of 3, 5 apart. */
static MPI_Datatype blocks3(int n)
{
    MPI_Datatype t;
    CHECK_MPI(MPI_Type_vector(n / 3, 3, 5, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

/* `n` ints as blocks of 1, 2 and 7 ints in turn, each followed by a gap of 2 ints. */
static MPI_Datatype irregular(int n)
{
    int k = 0, left = n, at = 0, *bl = tu_malloc(sizeof(int) * (size_t)n),
        *dl = tu_malloc(sizeof(int) * (size_t)n);
    static const int lens[3] = {1, 2, 7};
    MPI_Datatype t;
    while (left > 0) {
        int l = lens[k % 3] < left ? lens[k % 3] : left;
        bl[k] = l;
        dl[k] = at;
        at += l + 2;
        left -= l;
        k++;
    }
    CHECK_MPI(MPI_Type_indexed(k, bl, dl, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    free(bl);
    free(dl);
    return t;
}

int main(int argc, char **argv)
{
    MPI_Datatype col1m, col40k, colhalf, ptype, b3, irr, b3small;
    const int rows = 1 << 17, nparts = 28340, nint = 300000;
    int tag = 100, rc;

    tu_init(&argc, &argv);
    partner = tu_partner();
    sender = tu_rank % 2 == 0 || partner == tu_rank;
    receiver = tu_rank % 2 == 1 || partner == tu_rank;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    col1m = column(rows);
    col40k = column(5000);
    colhalf = column(rows / 2);
    ptype = particle_type();
    b3 = blocks3(nint);
    irr = irregular(nint);
    b3small = blocks3(nint / 2);

    /* 1, 2: the same layout on both sides. */
    one("column 1 MiB", col1m, 1, col1m, 1, tag++, 0);
    one("column 40 KB", col40k, 1, col40k, 1, tag++, 0);
    one("two columns", col1m, 2, col1m, 2, tag++, 0);
    one("structs 1 MiB", ptype, nparts, ptype, nparts, tag++, 0);
    one("structs, odd count", ptype, 12345, ptype, 12345, tag++, 0);
    one("structs 2 MB", ptype, 2 * nparts + 7, ptype, 2 * nparts + 7, tag++, 0);
    /* 3: non-contiguous on one side only. */
    one("column -> doubles", col1m, 1, MPI_DOUBLE, rows, tag++, 0);
    one("doubles -> column", MPI_DOUBLE, rows, col1m, 1, tag++, 0);
    /* 4: different layouts with the same signature. */
    one("blocks of 3 -> irregular", b3, 1, irr, 1, tag++, 0);
    one("irregular -> blocks of 3", irr, 1, b3, 1, tag++, 0);
    /* 5: synchronous, then three messages in flight at once. */
    one("structs, synchronous", ptype, nparts, ptype, nparts, tag++, 1);
    {
        MPI_Datatype ts[3] = {col1m, ptype, b3}, tr[3] = {col1m, ptype, irr};
        int cs[3] = {1, 9999, 1}, i;
        unsigned char *sb[3] = {NULL, NULL, NULL}, *rb[3] = {NULL, NULL, NULL};
        MPI_Request sr[3], rr[3];
        MPI_Status sts[3];
        uint64_t seed[3];
        for (i = 0; i < 3; i++)
            seed[i] = TU_SEED(sender ? tu_rank : partner, receiver ? tu_rank : partner, tag + i);
        if (receiver)
            for (i = 2; i >= 0; i--) {
                size_t span = span_of(tr[i], cs[i]);
                rb[i] = tu_malloc(span + 1);
                memset(rb[i], 0xEE, span + 1);
                CHECK_MPI(MPI_Irecv(rb[i], cs[i], tr[i], partner, tag + i, MPI_COMM_WORLD,
                                    &rr[i]));
            }
        if (sender)
            for (i = 0; i < 3; i++) {
                sb[i] = make_buf(ts[i], cs[i], seed[i], 0x55);
                CHECK_MPI(MPI_Isend(sb[i], cs[i], ts[i], partner, tag + i, MPI_COMM_WORLD,
                                    &sr[i]));
            }
        if (receiver) {
            CHECK_MPI(MPI_Waitall(3, rr, sts));
            for (i = 0; i < 3; i++) {
                CHECK_EQ(sts[i].MPI_TAG, tag + i);
                check_buf("three in flight", rb[i], tr[i], cs[i], bytes_of(tr[i], cs[i]),
                          seed[i]);
                free(rb[i]);
            }
        }
        if (sender) {
            CHECK_MPI(MPI_Waitall(3, sr, MPI_STATUSES_IGNORE));
            for (i = 0; i < 3; i++)
                free(sb[i]);
        }
        tag += 3;
    }
    /* 6: truncation. */
    {
        struct {
            const char *what;
            MPI_Datatype st, rt;
            int sc, rc;
        } tc[3] = {{"column truncated", col1m, colhalf, 1, 1},
                   {"structs truncated", ptype, ptype, nparts, nparts / 3},
                   {"irregular truncated", b3, b3small, 1, 1}};
        int i;
        for (i = 0; i < 3; i++, tag++) {
            uint64_t seed = TU_SEED(sender ? tu_rank : partner, receiver ? tu_rank : partner, tag);
            unsigned char *sb = NULL, *rb = NULL;
            MPI_Request sr = MPI_REQUEST_NULL;
            MPI_Status s;
            if (sender) {
                sb = make_buf(tc[i].st, tc[i].sc, seed, 0x55);
                CHECK_MPI(MPI_Isend(sb, tc[i].sc, tc[i].st, partner, tag, MPI_COMM_WORLD, &sr));
            }
            if (receiver) {
                size_t span = span_of(tc[i].rt, tc[i].rc);
                rb = tu_malloc(span + 1);
                memset(rb, 0xEE, span + 1);
                rc = MPI_Recv(rb, tc[i].rc, tc[i].rt, partner, tag, MPI_COMM_WORLD, &s);
                CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
                CHECK_EQ(s.MPI_SOURCE, partner);
                CHECK_EQ(s.MPI_TAG, tag);
                /* What a truncated receive holds is not specified; only its type map may
                 * have been written. */
                {
                    unsigned char *inside = type_map_mask(tc[i].rt, tc[i].rc);
                    size_t j;
                    for (j = 0; j <= span; j++)
                        if (!inside[j] && rb[j] != 0xEE)
                            TU_FAIL("%s: byte %zu outside the receive's type map was written "
                                    "(0x%02x)",
                                    tc[i].what, j, rb[j]);
                    free(inside);
                }
                free(rb);
            }
            if (sender) {
                CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
                free(sb);
            }
        }
    }
    /* Later messages are intact. */
    one("column after truncation", col1m, 1, col1m, 1, tag++, 0);

    CHECK_MPI(MPI_Type_free(&col1m));
    CHECK_MPI(MPI_Type_free(&col40k));
    CHECK_MPI(MPI_Type_free(&colhalf));
    CHECK_MPI(MPI_Type_free(&ptype));
    CHECK_MPI(MPI_Type_free(&b3));
    CHECK_MPI(MPI_Type_free(&irr));
    CHECK_MPI(MPI_Type_free(&b3small));
    return tu_finish();
}
