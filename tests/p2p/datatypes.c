/*
 * Every predefined datatype of the MPI header, sent and received with itself around a ring
 * (MPI_Sendrecv to the next process, from the previous one): C integer and floating types,
 * fixed-width integers, C99 bool and complex types, MPI_AINT / MPI_OFFSET / MPI_COUNT,
 * MPI_BYTE and MPI_PACKED, the pair types of MINLOC/MAXLOC (MPI_DOUBLE_INT, ...), the C++
 * types and the Fortran types. Checks MPI_Type_size against the C type where there is one,
 * MPI_Get_count, and the values (compared by value for types with padding bytes: long
 * double, long double complex, pair types). A type the implementation leaves undefined
 * (MPI_DATATYPE_NULL, as MPICH does for MPI_INTEGER16 without a compiler for it) is skipped.
 * Also MPI_Pack into MPI_PACKED, received as the packed types. Any size >= 1.
 */
#include "util.h"
#include <complex.h>
#include <stdbool.h>
#include <wchar.h>

enum kind { RAW, FLT, DBL, LDBL, LDCPLX, BOOLEAN, PAIR_FI, PAIR_DI, PAIR_LI, PAIR_SI, PAIR_II,
            PAIR_LDI };

struct tinfo {
    const char *name;
    MPI_Datatype t;
    enum kind kind;
    size_t csize; /* sizeof the C type, 0 if none (Fortran types) */
};

struct fi { float v; int i; };
struct di { double v; int i; };
struct li { long v; int i; };
struct si { short v; int i; };
struct ii { int v; int i; };
struct ldi { long double v; int i; };

#define T(name, kind, csize) {#name, name, kind, csize}

#define COUNT 37
static int prev, next;

/* Fill element j of an array of the kind with values derived from (seed, j). */
static void fill(const struct tinfo *ti, int tsize, void *buf, int n, int seed)
{
    int j;
    unsigned char *p = buf;
    for (j = 0; j < n; j++) {
        double x = seed * 1000.0 + j * 1.25 + 0.5;
        int ix = seed * 1000 + j;
        switch (ti->kind) {
        case RAW:
            tu_fill(p + (size_t)j * tsize, tsize, (uint64_t)seed * 1000 + j);
            break;
        case FLT: ((float *)buf)[j] = (float)x; break;
        case DBL: ((double *)buf)[j] = x; break;
        case LDBL: ((long double *)buf)[j] = (long double)x / 3; break;
        case LDCPLX: ((long double complex *)buf)[j] = (long double)x / 3 + I * (long double)ix; break;
        case BOOLEAN: ((bool *)buf)[j] = (ix % 3) == 0; break;
        case PAIR_FI: ((struct fi *)buf)[j].v = (float)x; ((struct fi *)buf)[j].i = ix; break;
        case PAIR_DI: ((struct di *)buf)[j].v = x; ((struct di *)buf)[j].i = ix; break;
        case PAIR_LI: ((struct li *)buf)[j].v = -ix * 7L; ((struct li *)buf)[j].i = ix; break;
        case PAIR_SI: ((struct si *)buf)[j].v = (short)(ix % 30000); ((struct si *)buf)[j].i = ix; break;
        case PAIR_II: ((struct ii *)buf)[j].v = -ix; ((struct ii *)buf)[j].i = ix; break;
        case PAIR_LDI: ((struct ldi *)buf)[j].v = (long double)x / 7; ((struct ldi *)buf)[j].i = ix; break;
        }
    }
}

static int same(const struct tinfo *ti, int tsize, const void *a, const void *b, int n)
{
    int j;
    for (j = 0; j < n; j++) {
        int ok = 1;
        switch (ti->kind) {
        case RAW:
            ok = memcmp((const char *)a + (size_t)j * tsize, (const char *)b + (size_t)j * tsize,
                        tsize) == 0;
            break;
        case FLT: ok = ((const float *)a)[j] == ((const float *)b)[j]; break;
        case DBL: ok = ((const double *)a)[j] == ((const double *)b)[j]; break;
        case LDBL: ok = ((const long double *)a)[j] == ((const long double *)b)[j]; break;
        case LDCPLX: ok = ((const long double complex *)a)[j] == ((const long double complex *)b)[j]; break;
        case BOOLEAN: ok = ((const bool *)a)[j] == ((const bool *)b)[j]; break;
#define PAIRCMP(S) ok = ((const struct S *)a)[j].v == ((const struct S *)b)[j].v && \
                        ((const struct S *)a)[j].i == ((const struct S *)b)[j].i; break
        case PAIR_FI: PAIRCMP(fi);
        case PAIR_DI: PAIRCMP(di);
        case PAIR_LI: PAIRCMP(li);
        case PAIR_SI: PAIRCMP(si);
        case PAIR_II: PAIRCMP(ii);
        case PAIR_LDI: PAIRCMP(ldi);
        }
        if (!ok)
            return j;
    }
    return -1;
}

static size_t extent_of(const struct tinfo *ti, int tsize)
{
    MPI_Aint lb, ext;
    CHECK_MPI(MPI_Type_get_extent(ti->t, &lb, &ext));
    CHECK_EQ(lb, 0);
    CHECK_INT(ext, >=, tsize);
    return (size_t)ext;
}

static int test_type(const struct tinfo *ti)
{
    int tsize = -1, n, k;
    size_t ext;
    unsigned char *s, *r, *expect;
    MPI_Status st;

    if (ti->t == MPI_DATATYPE_NULL) {
        TU_LOG("%s: not defined by this implementation, skipped\n", ti->name);
        return 0;
    }
    CHECK_MPI(MPI_Type_size(ti->t, &tsize));
    if (tsize == 0) {
        TU_LOG("%s: size 0 (unsupported here), skipped\n", ti->name);
        return 0;
    }
    if (ti->csize && ti->kind < PAIR_FI)
        CHECK_MSG((size_t)tsize == ti->csize, "%s: MPI_Type_size %d, sizeof the C type %zu",
                  ti->name, tsize, ti->csize);
    ext = extent_of(ti, tsize);
    if (ti->csize)
        CHECK_MSG(ext == ti->csize, "%s: extent %zu, sizeof the C type %zu", ti->name, ext,
                  ti->csize);
    if (ti->kind == FLT || ti->kind == DBL) /* Fortran REAL kinds: pick by size */
        CHECK_MSG(tsize == (ti->kind == FLT ? 4 : 8), "%s: size %d", ti->name, tsize);

    s = tu_malloc(ext * COUNT);
    r = tu_malloc(ext * (COUNT + 3));
    expect = tu_malloc(ext * COUNT);
    memset(s, 0, ext * COUNT);
    memset(r, 0, ext * (COUNT + 3));
    memset(expect, 0, ext * COUNT);
    fill(ti, tsize, s, COUNT, tu_rank);
    fill(ti, tsize, expect, COUNT, prev);
    CHECK_MPI(MPI_Sendrecv(s, COUNT, ti->t, next, 5, r, COUNT + 3, ti->t, prev, 5,
                           MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, ti->t, &n));
    CHECK_MSG(n == COUNT, "%s: received %d items, expected %d", ti->name, n, COUNT);
    k = same(ti, tsize, r, expect, COUNT);
    CHECK_MSG(k < 0, "%s: item %d differs after the transfer", ti->name, k);
    free(s);
    free(r);
    free(expect);
    TU_LOG("%s: size %d extent %zu ok\n", ti->name, tsize, ext);
    return 1;
}

static const struct tinfo types[] = {
    T(MPI_CHAR, RAW, sizeof(char)),
    T(MPI_SIGNED_CHAR, RAW, sizeof(signed char)),
    T(MPI_UNSIGNED_CHAR, RAW, sizeof(unsigned char)),
    T(MPI_BYTE, RAW, 1),
    T(MPI_WCHAR, RAW, sizeof(wchar_t)),
    T(MPI_SHORT, RAW, sizeof(short)),
    T(MPI_UNSIGNED_SHORT, RAW, sizeof(unsigned short)),
    T(MPI_INT, RAW, sizeof(int)),
    T(MPI_UNSIGNED, RAW, sizeof(unsigned)),
    T(MPI_LONG, RAW, sizeof(long)),
    T(MPI_UNSIGNED_LONG, RAW, sizeof(unsigned long)),
    T(MPI_LONG_LONG_INT, RAW, sizeof(long long)),
    T(MPI_LONG_LONG, RAW, sizeof(long long)),
    T(MPI_UNSIGNED_LONG_LONG, RAW, sizeof(unsigned long long)),
    T(MPI_FLOAT, FLT, sizeof(float)),
    T(MPI_DOUBLE, DBL, sizeof(double)),
    T(MPI_LONG_DOUBLE, LDBL, sizeof(long double)),
    T(MPI_INT8_T, RAW, 1),
    T(MPI_INT16_T, RAW, 2),
    T(MPI_INT32_T, RAW, 4),
    T(MPI_INT64_T, RAW, 8),
    T(MPI_UINT8_T, RAW, 1),
    T(MPI_UINT16_T, RAW, 2),
    T(MPI_UINT32_T, RAW, 4),
    T(MPI_UINT64_T, RAW, 8),
    T(MPI_C_BOOL, BOOLEAN, sizeof(bool)),
    T(MPI_C_COMPLEX, RAW, sizeof(float complex)),
    T(MPI_C_FLOAT_COMPLEX, RAW, sizeof(float complex)),
    T(MPI_C_DOUBLE_COMPLEX, RAW, sizeof(double complex)),
    T(MPI_C_LONG_DOUBLE_COMPLEX, LDCPLX, sizeof(long double complex)),
    T(MPI_AINT, RAW, sizeof(MPI_Aint)),
    T(MPI_OFFSET, RAW, sizeof(MPI_Offset)),
    T(MPI_COUNT, RAW, sizeof(MPI_Count)),
    T(MPI_PACKED, RAW, 1),
    T(MPI_FLOAT_INT, PAIR_FI, sizeof(struct fi)),
    T(MPI_DOUBLE_INT, PAIR_DI, sizeof(struct di)),
    T(MPI_LONG_INT, PAIR_LI, sizeof(struct li)),
    T(MPI_SHORT_INT, PAIR_SI, sizeof(struct si)),
    T(MPI_2INT, PAIR_II, sizeof(struct ii)),
    T(MPI_LONG_DOUBLE_INT, PAIR_LDI, sizeof(struct ldi)),
#ifdef MPI_CXX_BOOL
    T(MPI_CXX_BOOL, BOOLEAN, sizeof(bool)),
#endif
#ifdef MPI_CXX_FLOAT_COMPLEX
    T(MPI_CXX_FLOAT_COMPLEX, RAW, sizeof(float complex)),
#endif
#ifdef MPI_CXX_DOUBLE_COMPLEX
    T(MPI_CXX_DOUBLE_COMPLEX, RAW, sizeof(double complex)),
#endif
#ifdef MPI_CXX_LONG_DOUBLE_COMPLEX
    T(MPI_CXX_LONG_DOUBLE_COMPLEX, LDCPLX, sizeof(long double complex)),
#endif
    /* Fortran types: no C type to compare the size with. Integers, logicals and characters
     * are compared as raw bytes; reals by value through the C type of the same size; complex
     * as raw bytes (two reals; any bit pattern survives a copy). */
    T(MPI_CHARACTER, RAW, 0),
    T(MPI_LOGICAL, RAW, 0),
    T(MPI_INTEGER, RAW, 0),
    T(MPI_REAL, FLT, 0),
    T(MPI_DOUBLE_PRECISION, DBL, 0),
    T(MPI_COMPLEX, RAW, 0),
    T(MPI_DOUBLE_COMPLEX, RAW, 0),
    T(MPI_2INTEGER, RAW, 0),
    T(MPI_2REAL, RAW, 0),
    T(MPI_2DOUBLE_PRECISION, RAW, 0),
    T(MPI_INTEGER1, RAW, 0),
    T(MPI_INTEGER2, RAW, 0),
    T(MPI_INTEGER4, RAW, 0),
    T(MPI_INTEGER8, RAW, 0),
#ifdef MPI_INTEGER16
    T(MPI_INTEGER16, RAW, 0),
#endif
    T(MPI_REAL4, FLT, 0),
    T(MPI_REAL8, DBL, 0),
#ifdef MPI_REAL16
    T(MPI_REAL16, RAW, 0),
#endif
    T(MPI_COMPLEX8, RAW, 0),
    T(MPI_COMPLEX16, RAW, 0),
#ifdef MPI_COMPLEX32
    T(MPI_COMPLEX32, RAW, 0),
#endif
};

int main(int argc, char **argv)
{
    int i, ntested = 0, ntypes = (int)(sizeof types / sizeof types[0]);

    tu_init(&argc, &argv);
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;

    for (i = 0; i < ntypes; i++)
        ntested += test_type(&types[i]);
    CHECK_INT(ntested, >=, 55);

    /* MPI_Pack several types into a buffer, send it as MPI_PACKED, receive it as MPI_PACKED
     * and unpack; also receive the packed message directly as the typed values. */
    {
        int iv[5] = {1, -2, 3, -4, 5}, io[5], pos = 0, psize, k, n;
        double dv[3] = {0.25, -1e300, 3.5}, dov[3];
        char *pk, *pr;
        MPI_Status st;
        CHECK_MPI(MPI_Pack_size(5, MPI_INT, MPI_COMM_WORLD, &psize));
        CHECK_MPI(MPI_Pack_size(3, MPI_DOUBLE, MPI_COMM_WORLD, &k));
        psize += k;
        pk = tu_malloc(psize);
        pr = tu_malloc(psize);
        for (k = 0; k < 5; k++)
            iv[k] += 10 * tu_rank;
        CHECK_MPI(MPI_Pack(iv, 5, MPI_INT, pk, psize, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Pack(dv, 3, MPI_DOUBLE, pk, psize, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Sendrecv(pk, pos, MPI_PACKED, next, 6, pr, psize, MPI_PACKED, prev, 6,
                               MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_PACKED, &n));
        CHECK_EQ(n, pos);
        pos = 0;
        CHECK_MPI(MPI_Unpack(pr, n, &pos, io, 5, MPI_INT, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Unpack(pr, n, &pos, dov, 3, MPI_DOUBLE, MPI_COMM_WORLD));
        for (k = 0; k < 5; k++)
            CHECK_EQ(io[k], iv[k] - 10 * tu_rank + 10 * prev);
        for (k = 0; k < 3; k++)
            CHECK(dov[k] == dv[k]);
        /* A packed message of ints only, received as MPI_INT. */
        pos = 0;
        CHECK_MPI(MPI_Pack(iv, 5, MPI_INT, pk, psize, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Sendrecv(pk, pos, MPI_PACKED, next, 7, io, 5, MPI_INT, prev, 7,
                               MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, prev, 7, 5);
        for (k = 0; k < 5; k++)
            CHECK_EQ(io[k], iv[k] - 10 * tu_rank + 10 * prev);
        free(pk);
        free(pr);
    }
    TU_LOG("%d of %d predefined types tested\n", ntested, ntypes);
    return tu_finish();
}
