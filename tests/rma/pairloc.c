/*
 * rma/pairloc: accumulates on the MINLOC/MAXLOC pair types, which MPI-4.1 12.3.4 allows
 * alone and in derived types made of one of them. Every rank accumulates MPI_MAXLOC, then
 * MPI_MINLOC, into every rank through a strided vector of MPI_SHORT_INT (2 bytes of value, a
 * gap, 4 of index), MPI_DOUBLE_INT and MPI_LONG_DOUBLE_INT, from a contiguous origin; each
 * target checks the result against the same reduction done here, and that the padding and
 * the elements the vector skips are untouched. Then MPI_REPLACE and an atomic read
 * (MPI_Get_accumulate with MPI_NO_OP) of the vector of MPI_SHORT_INT, MPI_Fetch_and_op
 * MINLOC on one MPI_SHORT_INT, and the errors: MPI_SUM on a pair type (MPI_ERR_OP), origin
 * and target of different pair types (MPI_ERR_TYPE).
 * Argument: create | allocate | dynamic (window flavor).
 */
#include "util.h"

typedef struct {
    short v;
    int i;
} si_t;
typedef struct {
    double v;
    int i;
} di_t;
typedef struct {
    long double v;
    int i;
} ldi_t;

enum { N = 12, NV = 8, PAD = 0x5a };
enum { OFF_SI = 0, OFF_DI = 128, OFF_LDI = 384, BYTES = 1024 };

/* The vector (4 blocks of 2 elements, 3 apart) covers elements 0,1,3,4,6,7,9,10. */
static int slot(int j) { return j / 2 * 3 + j % 2; }
static int covered(int e) { return e % 3 < 2; }

/* What rank r contributes to vector element j (small, with ties between ranks). */
static int val(int r, int j, int max) { return (r * 5 + j * 3 + max) % 4; }

static void expect(int size, int j, int max, int *v, int *i)
{
    *v = max ? -100 : 100;
    *i = 999;
    for (int r = 0; r < size; r++) {
        int x = val(r, j, max);
        if ((max && x > *v) || (!max && x < *v) || (x == *v && r < *i)) {
            *v = x;
            *i = r;
        }
    }
}

/* Element e's bytes other than value and index must still hold PAD. */
static int pad_ok(const void *p, size_t vsize, size_t ioff, size_t ext)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < ext; k++)
        if ((k >= vsize && k < ioff) || k >= ioff + sizeof(int))
            if (b[k] != PAD)
                return 0;
    return 1;
}

static int all_pad(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < n; k++)
        if (b[k] != PAD)
            return 0;
    return 1;
}

/* One pair type: init (own memory), accumulate into everyone, check. */
#define ROUND(T, MPIT, OFF, VT)                                                              \
    do {                                                                                     \
        MPI_Datatype vec;                                                                    \
        CHECK_MPI(MPI_Type_vector(NV / 2, 2, 3, MPIT, &vec));                                \
        CHECK_MPI(MPI_Type_commit(&vec));                                                    \
        for (int max = 0; max < 2; max++) {                                                  \
            T *own = (T *)(mem + OFF);                                                       \
            memset(own, PAD, N * sizeof(T));                                                 \
            for (int j = 0; j < NV; j++) {                                                   \
                own[slot(j)].v = (VT)(max ? -100 : 100);                                     \
                own[slot(j)].i = 999;                                                        \
            }                                                                                \
            CHECK_MPI(MPI_Win_fence(0, win));                                                \
            T o[NV];                                                                         \
            for (int j = 0; j < NV; j++) {                                                   \
                o[j].v = (VT)val(rank, j, max);                                              \
                o[j].i = rank;                                                               \
            }                                                                                \
            for (int t = 0; t < size; t++)                                                   \
                CHECK_MPI(MPI_Accumulate(o, NV, MPIT, t, AT(t, OFF), 1, vec,                 \
                                         max ? MPI_MAXLOC : MPI_MINLOC, win));               \
            CHECK_MPI(MPI_Win_fence(0, win));                                                \
            for (int e = 0; e < N; e++) {                                                    \
                size_t ioff = (size_t)((char *)&own[e].i - (char *)&own[e]);                 \
                if (!covered(e)) {                                                           \
                    CHECK_MSG(all_pad(&own[e], sizeof(T)), #MPIT ": element %d changed", e); \
                    continue;                                                                \
                }                                                                            \
                int v, i;                                                                    \
                expect(size, e / 3 * 2 + e % 3, max, &v, &i);                                \
                CHECK_MSG(own[e].v == (VT)v && own[e].i == i,                                \
                          #MPIT " %s: element %d is (%g, %d), expected (%d, %d)",            \
                          max ? "MAXLOC" : "MINLOC", e, (double)own[e].v, own[e].i, v, i);   \
                CHECK_MSG(pad_ok(&own[e], sizeof(VT), ioff, sizeof(T)),                      \
                          #MPIT ": padding of element %d changed", e);                       \
            }                                                                                \
        }                                                                                    \
        CHECK_MPI(MPI_Type_free(&vec));                                                      \
    } while (0)

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    const char *fl = argc > 1 ? argv[1] : "create";
    int dynamic = !strcmp(fl, "dynamic");
    char *mem;
    MPI_Win win;
    if (!strcmp(fl, "allocate")) {
        CHECK_MPI(MPI_Win_allocate(BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    } else if (dynamic) {
        mem = tu_malloc(BYTES);
        CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        CHECK_MPI(MPI_Win_attach(win, mem, BYTES));
    } else {
        mem = tu_malloc(BYTES);
        CHECK_MPI(MPI_Win_create(mem, BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    MPI_Aint *base = tu_malloc(size * sizeof(MPI_Aint)), me = 0;
    if (dynamic)
        MPI_Get_address(mem, &me);
    MPI_Allgather(&me, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
#define AT(t, off) (base[t] + (MPI_Aint)(off))

    /* 1. MAXLOC and MINLOC from everyone into everyone. */
    CHECK_MPI(MPI_Win_fence(0, win));
    ROUND(si_t, MPI_SHORT_INT, OFF_SI, short);
    ROUND(di_t, MPI_DOUBLE_INT, OFF_DI, double);
    ROUND(ldi_t, MPI_LONG_DOUBLE_INT, OFF_LDI, long double);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    /* 2. REPLACE, then an atomic read through the vector, at the next rank (written by us
     *    alone); MPI_Fetch_and_op MINLOC on one element the vector skips (all PAD bytes). */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(NV / 2, 2, 3, MPI_SHORT_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    int t = (rank + 1) % size;
    si_t o[NV], got[NV];
    for (int j = 0; j < NV; j++) {
        o[j].v = (short)(rank * 100 + j);
        o[j].i = 1000 + rank + j;
        got[j].v = -1;
        got[j].i = -1;
    }
    si_t one = {(short)(50 + rank), rank}, old = {-1, -1};
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
    CHECK_MPI(MPI_Accumulate(o, NV, MPI_SHORT_INT, t, AT(t, OFF_SI), 1, vec, MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, got, NV, MPI_SHORT_INT, t,
                                 AT(t, OFF_SI), 1, vec, MPI_NO_OP, win));
    CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_SHORT_INT, t, AT(t, OFF_SI + 2 * sizeof(si_t)),
                               MPI_MINLOC, win));
    CHECK_MPI(MPI_Win_unlock(t, win));
    for (int j = 0; j < NV; j++)
        CHECK_MSG(got[j].v == o[j].v && got[j].i == o[j].i, "read back (%d, %d) at %d, wrote (%d, %d)",
                  got[j].v, got[j].i, j, o[j].v, o[j].i);
    CHECK_MSG(all_pad(&old.v, sizeof old.v) && all_pad(&old.i, sizeof old.i),
              "MPI_Fetch_and_op fetched (%d, %d)", old.v, old.i);
    MPI_Barrier(MPI_COMM_WORLD);
    si_t *own = (si_t *)(mem + OFF_SI);
    int from = (rank + size - 1) % size;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK_MSG(own[2].v == 50 + from && own[2].i == from, "MINLOC on a padding-filled element gave (%d, %d)",
              own[2].v, own[2].i);
    CHECK_MPI(MPI_Win_unlock(rank, win));

    /* 3. Errors. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    if (!tu_quirk("unchecked_acc")) {
        CHECK_CLASS(MPI_Accumulate(o, 1, MPI_SHORT_INT, 0, AT(0, OFF_SI), 1, MPI_SHORT_INT, MPI_SUM, win),
                    MPI_ERR_OP);
        /* 4 MPI_SHORT_INT and 3 MPI_2INT: 24 bytes each, different pairs. */
        CHECK_CLASS(MPI_Accumulate(o, 4, MPI_SHORT_INT, 0, AT(0, OFF_DI), 3, MPI_2INT, MPI_MAXLOC, win),
                    MPI_ERR_TYPE);
    }
    CHECK_MPI(MPI_Win_unlock(0, win));

    CHECK_MPI(MPI_Type_free(&vec));
    MPI_Barrier(MPI_COMM_WORLD); /* detaching is local: everyone is done with rank 0 first */
    if (dynamic)
        CHECK_MPI(MPI_Win_detach(win, mem));
    CHECK_MPI(MPI_Win_free(&win));
    if (strcmp(fl, "allocate"))
        free(mem);
    free(base);
    return tu_finish();
}
