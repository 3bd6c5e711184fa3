/*
 * Derived datatypes lay out exactly the elements the standard's type maps say, in order.
 *
 * Every constructor (contiguous, vector with positive and negative strides, hvector, indexed,
 * hindexed, indexed_block, hindexed_block, struct, resized, dup, nesting, subarray in C and
 * Fortran order, darray with block and cyclic distributions) is built over MPI_INT, and its
 * expected type map is computed here with plain loops as a list of int indices in packing
 * order. For each type and a few counts the program checks: size, lower bound and extent, true
 * bounds, MPI_Pack_size; MPI_Pack produces the elements in type-map order; MPI_Unpack writes
 * exactly those elements and leaves every other int untouched; and the same type sent around a
 * ring (MPI_Sendrecv to the next process from the previous) delivers the same. darray types of
 * every process of a grid are checked to tile the global array exactly once (built locally
 * for each rank). Also an array of C structs with padding, sent as a resized struct type,
 * arrives field by field with the padding untouched. Any number of processes.
 */
#include "util.h"
#include <stddef.h>

#define MAXE 4096

static int prev, next;

/* The expected map: int indices (relative to the buffer start) in packing order. */
static long ex[MAXE];
static int nex;

static void add(long i)
{
    CHECK(nex < MAXE);
    ex[nex++] = i;
}

static void check_bounds(const char *what, MPI_Datatype t, long size, long lb, long extent,
                         long tlb, long textent)
{
    int sz;
    MPI_Aint l, e, tl, te;
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK_MPI(MPI_Type_get_extent(t, &l, &e));
    CHECK_MPI(MPI_Type_get_true_extent(t, &tl, &te));
    CHECK_MSG(sz == size && l == lb && e == extent && tl == tlb && te == textent,
              "%s: size %d lb %ld extent %ld true lb %ld true extent %ld, expected %ld %ld %ld "
              "%ld %ld", what, sz, (long)l, (long)e, (long)tl, (long)te, size, lb, extent, tlb,
              textent);
}

/* Pack, unpack and a ring transfer of `count` elements of t, against ex[0..nex). */
static void check_map(const char *what, MPI_Datatype t, int count)
{
    long lo = 0, hi = 1, i;
    int k, psize, pos = 0;
    for (k = 0; k < nex; k++) {
        if (ex[k] < lo)
            lo = ex[k];
        if (ex[k] + 1 > hi)
            hi = ex[k] + 1;
    }
    long n = hi - lo;
    int *src = tu_malloc(sizeof(int) * (size_t)n), *dst = tu_malloc(sizeof(int) * (size_t)n);
    int *sbase = src - lo, *dbase = dst - lo;
    for (i = lo; i < hi; i++)
        sbase[i] = (int)(100000 + i);

    CHECK_MPI(MPI_Pack_size(count, t, MPI_COMM_WORLD, &psize));
    CHECK_MSG(psize >= nex * (int)sizeof(int), "%s: Pack_size %d < %d", what, psize,
              nex * (int)sizeof(int));
    int *packed = tu_malloc((size_t)psize + sizeof(int));
    CHECK_MPI(MPI_Pack(sbase, count, t, packed, psize, &pos, MPI_COMM_WORLD));
    CHECK_MSG(pos == nex * (int)sizeof(int), "%s x%d: packed %d bytes, expected %d", what, count,
              pos, nex * (int)sizeof(int));
    for (k = 0; k < nex; k++)
        CHECK_MSG(packed[k] == 100000 + ex[k], "%s x%d: packed element %d is %d, expected %ld",
                  what, count, k, packed[k], 100000 + ex[k]);

    /* Unpack: exactly the mapped ints change. */
    for (i = 0; i < n; i++)
        dst[i] = -1;
    pos = 0;
    CHECK_MPI(MPI_Unpack(packed, psize, &pos, dbase, count, t, MPI_COMM_WORLD));
    CHECK_EQ(pos, nex * (int)sizeof(int));
    char *mapped = calloc((size_t)n, 1);
    for (k = 0; k < nex; k++)
        mapped[ex[k] - lo] = 1;
    for (i = lo; i < hi; i++)
        CHECK_MSG(dbase[i] == (mapped[i - lo] ? 100000 + i : -1),
                  "%s x%d: after unpack int %ld is %d", what, count, i, dbase[i]);

    /* A ring transfer with the type on both sides. */
    for (i = 0; i < n; i++)
        dst[i] = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(sbase, count, t, next, 7, dbase, count, t, prev, 7, MPI_COMM_WORLD,
                           &st));
    int got = -5;
    CHECK_MPI(MPI_Get_count(&st, t, &got));
    CHECK_MSG(got == (nex ? count : 0) || (nex == 0 && got == count), "%s: Get_count %d", what, got);
    CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &got));
    CHECK_EQ(got, nex);
    for (i = lo; i < hi; i++)
        CHECK_MSG(dbase[i] == (mapped[i - lo] ? 100000 + i : -1),
                  "%s x%d: after the ring transfer int %ld is %d", what, count, i, dbase[i]);
    free(mapped);
    free(packed);
    free(src);
    free(dst);
}

/* Element e of a sequence starts `ext` ints after element e-1: expand `per` (one element's
 * map) count times. */
static void repeat_map(const long *per, int nper, int count, long ext)
{
    int e, k;
    nex = 0;
    for (e = 0; e < count; e++)
        for (k = 0; k < nper; k++)
            add(e * ext + per[k]);
}

static void test_simple(void)
{
    MPI_Datatype t, u;
    long per[256];
    int np, c, b, j;

    /* contiguous(5) */
    CHECK_MPI(MPI_Type_contiguous(5, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    check_bounds("contiguous", t, 20, 0, 20, 0, 20);
    for (np = 0; np < 5; np++)
        per[np] = np;
    for (c = 0; c <= 3; c++) {
        repeat_map(per, 5, c, 5);
        check_map("contiguous", t, c);
    }
    CHECK_MPI(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL);

    /* vector(4, 2, 3): blocks of 2 ints every 3 ints */
    CHECK_MPI(MPI_Type_vector(4, 2, 3, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    check_bounds("vector", t, 32, 0, 44, 0, 44);
    np = 0;
    for (b = 0; b < 4; b++)
        for (j = 0; j < 2; j++)
            per[np++] = b * 3 + j;
    for (c = 1; c <= 3; c++) {
        repeat_map(per, np, c, 11);
        check_map("vector", t, c);
    }
    CHECK_MPI(MPI_Type_free(&t));

    /* vector(3, 2, -4): blocks at 0, -4, -8 ints */
    CHECK_MPI(MPI_Type_vector(3, 2, -4, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    check_bounds("vector with a negative stride", t, 24, -32, 40, -32, 40);
    np = 0;
    for (b = 0; b < 3; b++)
        for (j = 0; j < 2; j++)
            per[np++] = -4 * b + j;
    for (c = 1; c <= 2; c++) {
        repeat_map(per, np, c, 10);
        check_map("vector with a negative stride", t, c);
    }
    CHECK_MPI(MPI_Type_free(&t));

    /* hvector(3, 1, 20 bytes) */
    CHECK_MPI(MPI_Type_create_hvector(3, 1, 20, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    check_bounds("hvector", t, 12, 0, 44, 0, 44);
    per[0] = 0, per[1] = 5, per[2] = 10;
    for (c = 1; c <= 3; c++) {
        repeat_map(per, 3, c, 11);
        check_map("hvector", t, c);
    }
    CHECK_MPI(MPI_Type_free(&t));

    /* indexed({2,1,3}, {5,0,9}) */
    {
        int bl[3] = {2, 1, 3}, d[3] = {5, 0, 9};
        long m[6] = {5, 6, 0, 9, 10, 11};
        CHECK_MPI(MPI_Type_indexed(3, bl, d, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("indexed", t, 24, 0, 48, 0, 48);
        for (c = 0; c <= 2; c++) {
            repeat_map(m, 6, c, 12);
            check_map("indexed", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* hindexed({1,2}, {12, -8} bytes): ints 3, -2, -1 */
    {
        int bl[2] = {1, 2};
        MPI_Aint d[2] = {12, -8};
        long m[3] = {3, -2, -1};
        CHECK_MPI(MPI_Type_create_hindexed(2, bl, d, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("hindexed", t, 12, -8, 24, -8, 24);
        for (c = 1; c <= 3; c++) {
            repeat_map(m, 3, c, 6);
            check_map("hindexed", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* indexed_block(2, {4, 0, 7}) */
    {
        int d[3] = {4, 0, 7};
        long m[6] = {4, 5, 0, 1, 7, 8};
        CHECK_MPI(MPI_Type_create_indexed_block(3, 2, d, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("indexed_block", t, 24, 0, 36, 0, 36);
        for (c = 1; c <= 2; c++) {
            repeat_map(m, 6, c, 9);
            check_map("indexed_block", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* hindexed_block(1, {8, 0, 4} bytes) */
    {
        MPI_Aint d[3] = {8, 0, 4};
        long m[3] = {2, 0, 1};
        CHECK_MPI(MPI_Type_create_hindexed_block(3, 1, d, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("hindexed_block", t, 12, 0, 12, 0, 12);
        for (c = 1; c <= 4; c++) {
            repeat_map(m, 3, c, 3);
            check_map("hindexed_block", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* struct({1,2}, {4, 16} bytes, {INT, vector(2,1,2,INT)}): ints 1, 4, 6, 7, 9 */
    {
        int bl[2] = {1, 2};
        MPI_Aint d[2] = {4, 16};
        MPI_Datatype v, ts[2];
        long m[5] = {1, 4, 6, 7, 9};
        CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &v));
        ts[0] = MPI_INT;
        ts[1] = v;
        CHECK_MPI(MPI_Type_create_struct(2, bl, d, ts, &t));
        CHECK_MPI(MPI_Type_free(&v)); /* t keeps what it needs */
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("struct", t, 20, 4, 36, 4, 36);
        for (c = 1; c <= 3; c++) {
            repeat_map(m, 5, c, 9);
            check_map("struct", t, c);
        }
        /* dup: the same map */
        CHECK_MPI(MPI_Type_dup(t, &u));
        check_bounds("dup of struct", u, 20, 4, 36, 4, 36);
        repeat_map(m, 5, 2, 9);
        check_map("dup of struct", u, 2);
        CHECK_MPI(MPI_Type_free(&u));
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* resized(vector(2,1,3), lb -4 bytes, extent 20 bytes) */
    {
        long m[2] = {0, 3};
        CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_INT, &u));
        CHECK_MPI(MPI_Type_create_resized(u, -4, 20, &t));
        CHECK_MPI(MPI_Type_free(&u));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("resized", t, 8, -4, 20, 0, 16);
        for (c = 1; c <= 4; c++) {
            repeat_map(m, 2, c, 5);
            check_map("resized", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* Nesting: vector(3, 2, 5, hindexed({1,1}, {0, 8})) */
    {
        int bl[2] = {1, 1};
        MPI_Aint d[2] = {0, 8};
        CHECK_MPI(MPI_Type_create_hindexed(2, bl, d, MPI_INT, &u));
        CHECK_MPI(MPI_Type_vector(3, 2, 5, u, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        CHECK_MPI(MPI_Type_free(&u));
        check_bounds("vector of hindexed", t, 48, 0, 144, 0, 144);
        np = 0;
        for (b = 0; b < 3; b++)
            for (j = 0; j < 2; j++) {
                per[np++] = b * 15 + j * 3;
                per[np++] = b * 15 + j * 3 + 2;
            }
        for (c = 1; c <= 2; c++) {
            repeat_map(per, np, c, 36);
            check_map("vector of hindexed", t, c);
        }
        CHECK_MPI(MPI_Type_free(&t));
    }
    /* Empty types: contiguous(0) and a vector of empty blocks send nothing. */
    CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    check_bounds("contiguous(0)", t, 0, 0, 0, 0, 0);
    nex = 0;
    check_map("contiguous(0)", t, 3);
    CHECK_MPI(MPI_Type_free(&t));
}

static void test_subarray(void)
{
    MPI_Datatype t;
    int sizes[3] = {4, 5, 6}, subs[3] = {2, 3, 2}, starts[3] = {1, 1, 3};
    int i, j, k;

    CHECK_MPI(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    /* true lb: (1,1,3) = int 39; true ub: (2,3,4) = int 82, plus one */
    check_bounds("subarray C", t, 48, 0, 480, 156, 176);
    nex = 0;
    for (i = 1; i < 3; i++)
        for (j = 1; j < 4; j++)
            for (k = 3; k < 5; k++)
                add((i * 5 + j) * 6 + k);
    check_map("subarray C", t, 1);
    {
        int n0 = nex;
        for (k = 0; k < n0; k++)
            add(ex[k] + 120);
        check_map("subarray C x2", t, 2);
    }
    CHECK_MPI(MPI_Type_free(&t));

    CHECK_MPI(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    nex = 0;
    for (k = 3; k < 5; k++)
        for (j = 1; j < 4; j++)
            for (i = 1; i < 3; i++)
                add(i + 4 * (j + 5 * k));
    check_bounds("subarray Fortran", t, 48, 0, 480, 4 * ex[0], 4 * (ex[nex - 1] + 1 - ex[0]));
    check_map("subarray Fortran", t, 1);
    CHECK_MPI(MPI_Type_free(&t));

    /* A 1-d subarray is a contiguous run at an offset within the whole array's extent. */
    {
        int s1 = 10, b1 = 4, st1 = 3;
        CHECK_MPI(MPI_Type_create_subarray(1, &s1, &b1, &st1, MPI_ORDER_C, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        check_bounds("subarray 1-d", t, 16, 0, 40, 12, 16);
        nex = 0;
        for (k = 0; k < 3; k++)
            for (i = 3; i < 7; i++)
                add(k * 10 + i);
        check_map("subarray 1-d x3", t, 3);
        CHECK_MPI(MPI_Type_free(&t));
    }
}

/* Indices a process owns in one dimension of a darray, ascending. */
static int owned(int g, int p, int c, int dist, int darg, int *out)
{
    int n = 0, i;
    for (i = 0; i < g; i++) {
        int owner;
        if (dist == MPI_DISTRIBUTE_BLOCK) {
            int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
            owner = i / b;
        } else if (dist == MPI_DISTRIBUTE_CYCLIC) {
            int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
            owner = (i / b) % p;
        } else {
            owner = 0;
        }
        if (owner == c)
            out[n++] = i;
    }
    return n;
}

static void test_darray_2d(int order, int d0, int a0, int d1, int a1)
{
    int gs[2] = {7, 8}, ps[2] = {2, 3}, dist[2] = {d0, d1}, dargs[2] = {a0, a1};
    int cover[56] = {0}, r, i, j;
    for (r = 0; r < 6; r++) {
        MPI_Datatype t;
        int rows[8], cols[8], nr, nc;
        /* Process grids are row-major whatever the array order. */
        int c0 = r / 3, c1 = r % 3;
        CHECK_MPI(MPI_Type_create_darray(6, r, 2, gs, dist, dargs, ps, order, MPI_INT, &t));
        CHECK_MPI(MPI_Type_commit(&t));
        nr = owned(7, 2, c0, d0, a0, rows);
        nc = owned(8, 3, c1, d1, a1, cols);
        nex = 0;
        if (order == MPI_ORDER_C) {
            for (i = 0; i < nr; i++)
                for (j = 0; j < nc; j++)
                    add(rows[i] * 8 + cols[j]);
        } else {
            for (j = 0; j < nc; j++)
                for (i = 0; i < nr; i++)
                    add(rows[i] + 7 * cols[j]);
        }
        for (i = 0; i < nex; i++)
            cover[ex[i]]++;
        {
            MPI_Aint lb, ext;
            int sz;
            CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
            CHECK_MPI(MPI_Type_size(t, &sz));
            CHECK_MSG(lb == 0 && ext == 56 * 4 && sz == 4 * nex,
                      "darray rank %d: lb %ld extent %ld size %d (%d elements)", r, (long)lb,
                      (long)ext, sz, nex);
        }
        check_map("darray", t, 1);
        CHECK_MPI(MPI_Type_free(&t));
    }
    for (i = 0; i < 56; i++)
        CHECK_MSG(cover[i] == 1, "darray: element %d is owned by %d processes", i, cover[i]);
}

static void test_darray(void)
{
    int o, k;
    int orders[2] = {MPI_ORDER_C, MPI_ORDER_FORTRAN};
    for (o = 0; o < 2; o++) {
        k = orders[o];
        test_darray_2d(k, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_CYCLIC, 2);
        test_darray_2d(k, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_BLOCK,
                       MPI_DISTRIBUTE_DFLT_DARG);
        test_darray_2d(k, MPI_DISTRIBUTE_BLOCK, 5, MPI_DISTRIBUTE_CYCLIC, 3);
    }
    /* One dimension not distributed (MPI_DISTRIBUTE_NONE with one process). */
    {
        int g[2] = {3, 4}, d[2] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_BLOCK},
            a[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, p[2] = {1, 2}, r, i;
        for (r = 0; r < 2; r++) {
            MPI_Datatype t;
            CHECK_MPI(MPI_Type_create_darray(2, r, 2, g, d, a, p, MPI_ORDER_C, MPI_INT, &t));
            CHECK_MPI(MPI_Type_commit(&t));
            nex = 0;
            for (i = 0; i < 3; i++) {
                add(i * 4 + 2 * r);
                add(i * 4 + 2 * r + 1);
            }
            check_map("darray NONE x BLOCK", t, 1);
            CHECK_MPI(MPI_Type_free(&t));
        }
    }
}

struct particle {
    char kind;
    double pos[3];
    int id;
    short flags[3];
};

static void test_struct_array(void)
{
    enum { N = 37 };
    struct particle a[N], b[N];
    int bl[4] = {1, 3, 1, 3}, i, k;
    MPI_Aint d[4] = {offsetof(struct particle, kind), offsetof(struct particle, pos),
                     offsetof(struct particle, id), offsetof(struct particle, flags)};
    MPI_Datatype ts[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT}, s, t;
    MPI_Aint lb, ext;
    MPI_Status st;
    int cnt;

    CHECK_MPI(MPI_Type_create_struct(4, bl, d, ts, &s));
    CHECK_MPI(MPI_Type_get_extent(s, &lb, &ext));
    /* A C compiler and MPI pad the struct alike: its extent is sizeof. */
    CHECK_EQ(ext, sizeof(struct particle));
    CHECK_MPI(MPI_Type_create_resized(s, 0, sizeof(struct particle), &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Type_free(&s));
    memset(a, 0x33, sizeof a);
    for (i = 0; i < N; i++) {
        a[i].kind = (char)('a' + i % 26);
        for (k = 0; k < 3; k++) {
            a[i].pos[k] = i * 10.5 + k;
            a[i].flags[k] = (short)(i * 3 + k);
        }
        a[i].id = 1000 * tu_rank + i;
    }
    memset(b, 0x5a, sizeof b);
    CHECK_MPI(MPI_Sendrecv(a, N, t, next, 9, b, N, t, prev, 9, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, t, &cnt));
    CHECK_EQ(cnt, N);
    CHECK_MPI(MPI_Get_elements(&st, t, &cnt));
    CHECK_EQ(cnt, N * 8);
    for (i = 0; i < N; i++) {
        const unsigned char *raw = (const unsigned char *)&b[i];
        size_t off;
        CHECK_EQ(b[i].kind, 'a' + i % 26);
        CHECK_EQ(b[i].id, 1000 * prev + i);
        for (k = 0; k < 3; k++) {
            CHECK(b[i].pos[k] == i * 10.5 + k);
            CHECK_EQ(b[i].flags[k], i * 3 + k);
        }
        /* padding between kind and pos, and after flags, is not written */
        for (off = 1; off < offsetof(struct particle, pos); off++)
            CHECK_EQ(raw[off], 0x5a);
        for (off = offsetof(struct particle, flags) + 6; off < sizeof(struct particle); off++)
            CHECK_EQ(raw[off], 0x5a);
    }
    CHECK_MPI(MPI_Type_free(&t));
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;
    test_simple();
    test_subarray();
    test_darray();
    test_struct_array();
    return tu_finish();
}
