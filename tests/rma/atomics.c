/*
 * rma/atomics: the accumulate family with every predefined operation on the types it is
 * defined for, checked against the same reduction done locally (MPI_Reduce_local), and its
 * atomicity: every rank hammers rank 0 with MPI_Fetch_and_op(MPI_SUM) on one counter and the
 * values fetched must all differ (each update seen exactly once), concurrent MPI_Accumulate
 * of long doubles and of MAXLOC pairs (elements of 16 bytes: not one atomic instruction),
 * MPI_Compare_and_swap on 1-, 2-, 4- and 8-byte integers, MPI_Get_accumulate with MPI_NO_OP
 * (an atomic read) and MPI_REPLACE (an atomic swap), unaligned targets; the datatypes
 * MPI_Compare_and_swap refuses (floating point, derived) with MPI_ERR_TYPE.
 * Argument: create | allocate | dynamic (window flavor).
 */
#include "util.h"

#include <complex.h>

#define HAMMER 200

typedef struct {
    MPI_Datatype t;
    size_t size;
    const char *name;
    int integer, floating, complex_, logical;
} Ty;

static const Ty types[] = {
    {MPI_CHAR, 1, "MPI_CHAR", 1, 0, 0, 0},
    {MPI_UNSIGNED_CHAR, 1, "MPI_UNSIGNED_CHAR", 1, 0, 0, 0},
    {MPI_SHORT, 2, "MPI_SHORT", 1, 0, 0, 0},
    {MPI_INT, 4, "MPI_INT", 1, 0, 0, 0},
    {MPI_UNSIGNED, 4, "MPI_UNSIGNED", 1, 0, 0, 0},
    {MPI_LONG, 8, "MPI_LONG", 1, 0, 0, 0},
    {MPI_INT64_T, 8, "MPI_INT64_T", 1, 0, 0, 0},
    {MPI_UINT16_T, 2, "MPI_UINT16_T", 1, 0, 0, 0},
    {MPI_FLOAT, 4, "MPI_FLOAT", 0, 1, 0, 0},
    {MPI_DOUBLE, 8, "MPI_DOUBLE", 0, 1, 0, 0},
    {MPI_LONG_DOUBLE, sizeof(long double), "MPI_LONG_DOUBLE", 0, 1, 0, 0},
    {MPI_C_DOUBLE_COMPLEX, 16, "MPI_C_DOUBLE_COMPLEX", 0, 0, 1, 0},
    {MPI_C_BOOL, 1, "MPI_C_BOOL", 0, 0, 0, 1},
};

static const struct {
    MPI_Op op;
    const char *name;
} ops[] = {{MPI_SUM, "SUM"},   {MPI_PROD, "PROD"}, {MPI_MAX, "MAX"},   {MPI_MIN, "MIN"},
           {MPI_LAND, "LAND"}, {MPI_LOR, "LOR"},   {MPI_LXOR, "LXOR"}, {MPI_BAND, "BAND"},
           {MPI_BOR, "BOR"},   {MPI_BXOR, "BXOR"}, {MPI_REPLACE, "REPLACE"}, {MPI_NO_OP, "NO_OP"}};

static int applies(const Ty *t, MPI_Op op)
{
    if (op == MPI_REPLACE || op == MPI_NO_OP)
        return 1;
    if (op == MPI_SUM || op == MPI_PROD)
        return t->integer || t->floating || t->complex_;
    if (op == MPI_MAX || op == MPI_MIN)
        return t->integer || t->floating;
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return t->integer || t->logical;
    return t->integer; /* bitwise */
}

/* Small values of each type, so that sums and products stay exact. */
static void fill(const Ty *t, void *buf, int n, int seed)
{
    for (int i = 0; i < n; i++) {
        int v = (seed * 7 + i * 3) % 5 + 1;
        char *p = (char *)buf + i * t->size;
        if (t->t == MPI_FLOAT) *(float *)p = v;
        else if (t->t == MPI_DOUBLE) *(double *)p = v;
        else if (t->t == MPI_LONG_DOUBLE) *(long double *)p = v;
        else if (t->t == MPI_C_DOUBLE_COMPLEX) *(double complex *)p = v + I * (v % 3);
        else if (t->t == MPI_C_BOOL) *(_Bool *)p = v % 2;
        else if (t->size == 1) *(signed char *)p = v;
        else if (t->size == 2) *(short *)p = v;
        else if (t->size == 4) *(int *)p = v;
        else *(long *)p = v;
    }
}

static int same(const Ty *t, const void *a, const void *b, int n)
{
    if (t->t == MPI_LONG_DOUBLE) {
        for (int i = 0; i < n; i++)
            if (((const long double *)a)[i] != ((const long double *)b)[i])
                return 0;
        return 1;
    }
    return memcmp(a, b, n * t->size) == 0;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    const char *fl = argc > 1 ? argv[1] : "create";
    int dynamic = !strcmp(fl, "dynamic");
    enum { SLOTS = 8, BYTES = 4096 };
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
    memset(mem, 0, BYTES);
    MPI_Aint *base = tu_malloc(size * sizeof(MPI_Aint)), me = 0;
    if (dynamic)
        MPI_Get_address(mem, &me);
    MPI_Allgather(&me, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
#define AT(t, off) (base[t] + (MPI_Aint)(off))

    /* 1. Every operation on every type it applies to: rank 0 accumulates into each target
     *    (one at a time), the target compares with MPI_Reduce_local of the same values. */
    int target = size - 1;
    for (unsigned ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const Ty *t = &types[ti];
        for (unsigned oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            if (!applies(t, ops[oi].op))
                continue;
            char init[SLOTS * 16], orig[SLOTS * 16], want[SLOTS * 16], old[SLOTS * 16];
            fill(t, init, SLOTS, 3);
            fill(t, orig, SLOTS, 5 + oi);
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == target)
                memcpy(mem, init, SLOTS * t->size);
            CHECK_MPI(MPI_Win_fence(0, win));
            if (rank == 0) {
                if (oi % 2 == 0)
                    CHECK_MPI(MPI_Accumulate(orig, SLOTS, t->t, target, AT(target, 0), SLOTS, t->t, ops[oi].op, win));
                else
                    CHECK_MPI(MPI_Get_accumulate(orig, SLOTS, t->t, old, SLOTS, t->t, target, AT(target, 0), SLOTS, t->t, ops[oi].op, win));
            }
            CHECK_MPI(MPI_Win_fence(0, win));
            if (rank == 0 && oi % 2 == 1)
                CHECK_MSG(same(t, old, init, SLOTS), "%s %s: fetched values differ", t->name, ops[oi].name);
            if (rank == target) {
                memcpy(want, init, SLOTS * t->size);
                if (ops[oi].op == MPI_REPLACE)
                    memcpy(want, orig, SLOTS * t->size);
                else if (ops[oi].op != MPI_NO_OP)
                    CHECK_MPI(MPI_Reduce_local(orig, want, SLOTS, t->t, ops[oi].op));
                CHECK_MSG(same(t, mem, want, SLOTS), "%s %s: target differs from MPI_Reduce_local", t->name, ops[oi].name);
            }
        }
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    /* 2. Atomicity: every rank fetch-and-adds 1 to rank 0's counter HAMMER times. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        memset(mem, 0, BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    long *seen = tu_malloc(HAMMER * sizeof(long));
    long one = 1;
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int k = 0; k < HAMMER; k++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &seen[k], MPI_LONG, 0, AT(0, 0), MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        if (k > 0)
            CHECK_INT(seen[k], >, seen[k - 1]);
    }
    /* Long doubles and MAXLOC pairs at once, from everyone. */
    long double ld = 1.0L;
    struct { double v; int i; } pair = {(double)rank, rank};
    for (int k = 0; k < HAMMER / 4; k++) {
        CHECK_MPI(MPI_Accumulate(&ld, 1, MPI_LONG_DOUBLE, 0, AT(0, 64), 1, MPI_LONG_DOUBLE, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(&pair, 1, MPI_DOUBLE_INT, 0, AT(0, 128), 1, MPI_DOUBLE_INT, MPI_MAXLOC, win));
    }
    /* An unaligned int. */
    int ione = 1;
    for (int k = 0; k < HAMMER / 4; k++)
        CHECK_MPI(MPI_Accumulate(&ione, 1, MPI_INT, 0, AT(0, 201), 1, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    /* All fetched values over all ranks are distinct: gather them at rank 0. */
    long *all = rank == 0 ? tu_malloc((size_t)size * HAMMER * sizeof(long)) : NULL;
    MPI_Gather(seen, HAMMER, MPI_LONG, all, HAMMER, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        long n = (long)size * HAMMER;
        char *hit = calloc(n, 1);
        for (long i = 0; i < n; i++) {
            CHECK_MSG(all[i] >= 0 && all[i] < n && !hit[all[i]], "value %ld fetched twice or out of range", all[i]);
            hit[all[i]] = 1;
        }
        free(hit);
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_EQ(*(long *)mem, n);
        long double lsum;
        memcpy(&lsum, mem + 64, sizeof lsum);
        CHECK(lsum == (long double)(size * (HAMMER / 4)));
        memcpy(&pair, mem + 128, sizeof pair);
        CHECK(pair.v == size - 1 && pair.i == size - 1);
        int u;
        memcpy(&u, mem + 201, sizeof u);
        CHECK_EQ(u, size * (HAMMER / 4));
        CHECK_MPI(MPI_Win_unlock(0, win));
        free(all);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3. Compare-and-swap on each integer width: a ticket taken by exactly one rank. */
    MPI_Datatype cas_types[] = {MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T};
    for (int w = 0; w < 4; w++) {
        int64_t mine = rank + 1, zero = 0, got = -1;
        /* little endian: the low bytes of an int64 hold the value for every width */
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_MPI(MPI_Compare_and_swap(&mine, &zero, &got, cas_types[w], 0, AT(0, 256 + 8 * w), win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        int64_t mask = w == 3 ? -1 : (((int64_t)1 << (8 << w)) - 1);
        int won = (got & mask) == 0;
        TU_LOG("cas width %d: got %lld", w, (long long)got);
        int winners = 0;
        MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK_EQ(winners, 1);
    }
    /* NO_OP reads, REPLACE swaps. */
    int r1 = -1, r2 = -1, nine = 9;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    CHECK_MPI(MPI_Fetch_and_op(NULL, &r1, MPI_INT, 0, AT(0, 512), MPI_NO_OP, win));
    CHECK_MPI(MPI_Fetch_and_op(&nine, &r2, MPI_INT, 0, AT(0, 512), MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_unlock(0, win));
    CHECK_EQ(r1, r2);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 4. Errors: SUM on bytes, user operations, mixed types. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    char c = 1;
    if (!tu_quirk("unchecked_acc")) {
        CHECK_CLASS(MPI_Accumulate(&c, 1, MPI_BYTE, 0, AT(0, 600), 1, MPI_BYTE, MPI_SUM, win), MPI_ERR_OP);
        CHECK_CLASS(MPI_Accumulate(&ione, 1, MPI_INT, 0, AT(0, 600), 1, MPI_FLOAT, MPI_SUM, win), MPI_ERR_TYPE);
        CHECK_CLASS(MPI_Fetch_and_op(&ione, &r1, MPI_INT, 0, AT(0, 600), MPI_MAXLOC, win), MPI_ERR_OP);
    }
    /* MPI_Compare_and_swap takes integer, logical, byte and multi-language types only:
     * not floating point, nor a derived type, even one of bytes. */
    {
        long double lv = 0, lc = 0, lr = 0;
        MPI_Datatype four;
        CHECK_MPI(MPI_Type_contiguous(4, MPI_BYTE, &four));
        CHECK_MPI(MPI_Type_commit(&four));
        const MPI_Datatype bad[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, four};
        for (int k = 0; k < 4; k++)
            CHECK_CLASS(MPI_Compare_and_swap(&lv, &lc, &lr, bad[k], 0, AT(0, 640), win), MPI_ERR_TYPE);
        CHECK_MPI(MPI_Type_free(&four));
        const MPI_Datatype good[] = {MPI_CHAR, MPI_BYTE, MPI_C_BOOL, MPI_AINT, MPI_COUNT, MPI_UINT64_T};
        for (int k = 0; k < 6; k++)
            CHECK_MPI(MPI_Compare_and_swap(&lv, &lc, &lr, good[k], 0, AT(0, 640), win));
    }
    CHECK_MPI(MPI_Win_unlock(0, win));

    /* Detaching is local: rank 0 keeps its memory until every origin is done with it. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (dynamic)
        CHECK_MPI(MPI_Win_detach(win, mem));
    CHECK_MPI(MPI_Win_free(&win));
    if (strcmp(fl, "allocate"))
        free(mem);
    free(seen);
    free(base);
    return tu_finish();
}
