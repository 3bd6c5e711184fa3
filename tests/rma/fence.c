/*
 * rma/fence: active-target epochs with MPI_Win_fence, for every way of making a window
 * (argument: create, allocate, shared, dynamic). Every rank puts into every rank, gets from
 * every rank, accumulates every predefined operation on ints, with contiguous and strided
 * datatypes on both sides; fences with and without assertions; MPI_PROC_NULL targets; a zero
 * count; many short epochs of puts and gets between neighbours checking that a fence lets
 * nobody through early. Values are checked at the target after the closing fence and at the
 * origin. A lock epoch after a fence that no operation followed, and none open after it.
 */
#include "util.h"

#define N 64

static int flavor_of(const char *s)
{
    if (!strcmp(s, "create")) return MPI_WIN_FLAVOR_CREATE;
    if (!strcmp(s, "allocate")) return MPI_WIN_FLAVOR_ALLOCATE;
    if (!strcmp(s, "shared")) return MPI_WIN_FLAVOR_SHARED;
    if (!strcmp(s, "dynamic")) return MPI_WIN_FLAVOR_DYNAMIC;
    TU_FAIL("unknown flavor %s", s);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int flavor = flavor_of(argc > 1 ? argv[1] : "create");
    MPI_Comm comm = MPI_COMM_WORLD;
    if (flavor == MPI_WIN_FLAVOR_SHARED)
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm));
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t bytes = (size_t)N * (size + 4) * sizeof(int);
    int *mem = NULL;
    MPI_Win win;
    MPI_Aint *bases = tu_malloc(size * sizeof(MPI_Aint));
    switch (flavor) {
    case MPI_WIN_FLAVOR_CREATE:
        mem = tu_malloc(bytes);
        CHECK_MPI(MPI_Win_create(mem, bytes, sizeof(int), MPI_INFO_NULL, comm, &win));
        break;
    case MPI_WIN_FLAVOR_ALLOCATE:
        CHECK_MPI(MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, comm, &mem, &win));
        break;
    case MPI_WIN_FLAVOR_SHARED:
        CHECK_MPI(MPI_Win_allocate_shared(bytes, sizeof(int), MPI_INFO_NULL, comm, &mem, &win));
        break;
    default:
        mem = tu_malloc(bytes);
        CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &win));
        CHECK_MPI(MPI_Win_attach(win, mem, bytes));
        break;
    }
    /* Displacements of each target's memory: addresses for a dynamic window. */
    MPI_Aint mine = 0;
    if (flavor == MPI_WIN_FLAVOR_DYNAMIC)
        MPI_Get_address(mem, &mine);
    CHECK_MPI(MPI_Allgather(&mine, 1, MPI_AINT, bases, 1, MPI_AINT, comm));
    int unit = flavor == MPI_WIN_FLAVOR_DYNAMIC ? (int)sizeof(int) : 1;
#define DISP(t, i) (flavor == MPI_WIN_FLAVOR_DYNAMIC ? bases[t] + (MPI_Aint)(i) * unit : (MPI_Aint)(i))

    int flag, *fl;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(flag);
    CHECK_EQ(*fl, flavor);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &fl, &flag));
    CHECK(flag && *fl == MPI_WIN_UNIFIED);

    for (int i = 0; i < N * (size + 4); i++)
        mem[i] = -1;
    /* 1. Puts: rank r writes r*1000+i into slot block r of every target. */
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    int src[N];
    for (int i = 0; i < N; i++)
        src[i] = rank * 1000 + i;
    for (int t = 0; t < size; t++)
        CHECK_MPI(MPI_Put(src, N, MPI_INT, t, DISP(t, rank * N), N, MPI_INT, win));
    CHECK_MPI(MPI_Put(src, N, MPI_INT, MPI_PROC_NULL, 0, N, MPI_INT, win));
    CHECK_MPI(MPI_Put(src, 0, MPI_INT, 0, DISP(0, 0), 0, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++)
            CHECK_MSG(mem[r * N + i] == r * 1000 + i, "put: slot %d of block %d is %d", i, r, mem[r * N + i]);

    /* 2. Gets: read every target's block of the next rank, strided on both sides. */
    MPI_Datatype every2;
    CHECK_MPI(MPI_Type_vector(N / 2, 1, 2, MPI_INT, &every2));
    CHECK_MPI(MPI_Type_commit(&every2));
    int got[N];
    for (int t = 0; t < size; t++) {
        int b = (t + 1) % size;
        for (int i = 0; i < N; i++)
            got[i] = -7;
        CHECK_MPI(MPI_Get(got, 1, every2, t, DISP(t, b * N + 1), 1, every2, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        for (int i = 0; i < N; i++) {
            int want = i % 2 == 0 ? b * 1000 + i + 1 : -7;
            CHECK_MSG(got[i] == want, "get from %d: element %d is %d, want %d", t, i, got[i], want);
        }
    }
    /* Strided target, contiguous origin. */
    for (int i = 0; i < N; i++)
        got[i] = -7;
    CHECK_MPI(MPI_Get(got, N / 2, MPI_INT, 0, DISP(0, 0), 1, every2, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < N / 2; i++)
        CHECK_EQ(got[i], 2 * i);

    /* 3. Accumulates: everyone adds its rank+1 to block 0 of every target, takes MAX into
     *    block 1, BXOR into block 2, REPLACE into its own slot of block 3. */
    for (int i = 0; i < N * (size + 4); i++)
        mem[i] = i < 3 * N ? 0 : -1;
    CHECK_MPI(MPI_Win_fence(0, win));
    int v[N], x[N];
    for (int i = 0; i < N; i++) {
        v[i] = rank + 1;
        x[i] = 1 << (rank % 30);
    }
    for (int t = 0; t < size; t++) {
        CHECK_MPI(MPI_Accumulate(v, N, MPI_INT, t, DISP(t, 0), N, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(v, N, MPI_INT, t, DISP(t, N), N, MPI_INT, MPI_MAX, win));
        CHECK_MPI(MPI_Accumulate(x, N, MPI_INT, t, DISP(t, 2 * N), N, MPI_INT, MPI_BXOR, win));
        CHECK_MPI(MPI_Accumulate(v, 1, MPI_INT, t, DISP(t, 3 * N + rank), 1, MPI_INT, MPI_REPLACE, win));
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    int xr = 0;
    for (int r = 0; r < size; r++)
        xr ^= 1 << (r % 30);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(mem[i], size * (size + 1) / 2);
        CHECK_EQ(mem[N + i], size);
        CHECK_EQ(mem[2 * N + i], xr);
    }
    for (int r = 0; r < size; r++)
        CHECK_EQ(mem[3 * N + r], r + 1);

    /* 4. Fences with every assertion combination open and close empty epochs. */
    int asserts[] = {0, MPI_MODE_NOSTORE, MPI_MODE_NOPUT, MPI_MODE_NOSTORE | MPI_MODE_NOPUT,
                     MPI_MODE_NOPRECEDE, MPI_MODE_NOSUCCEED};
    for (unsigned k = 0; k < sizeof asserts / sizeof asserts[0]; k++)
        CHECK_MPI(MPI_Win_fence(asserts[k], win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    /* 5. Many short epochs. In epoch e every process stores e*1000+rank into one of two
     *    slots of its own memory, puts e*100+rank into one of two others of its right
     *    neighbour, and gets the slot its left neighbour stored in epoch e-1: a fence that let
     *    a process through before all arrived, or left a store unseen, shows an old value.
     *    The slots alternate so that local accesses and remote ones to the same slot are
     *    always in different epochs. First an empty fence that neither ends nor starts an
     *    epoch. */
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED, win));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    for (int e = 1; e <= 300; e++) {
        int mine = e * 100 + rank, g = -1;
        mem[2 + e % 2] = e * 1000 + rank;
        CHECK_MPI(MPI_Put(&mine, 1, MPI_INT, right, DISP(right, e % 2), 1, MPI_INT, win));
        if (e > 1)
            CHECK_MPI(MPI_Get(&g, 1, MPI_INT, left, DISP(left, 2 + (e - 1) % 2), 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK_MSG(mem[e % 2] == e * 100 + left, "epoch %d: put from %d is %d", e, left, mem[e % 2]);
        if (e > 1)
            CHECK_MSG(g == (e - 1) * 1000 + left, "epoch %d: get from %d is %d", e, left, g);
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    /* 6. An operation outside any epoch is MPI_ERR_RMA_SYNC. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_CLASS(MPI_Put(src, 1, MPI_INT, 0, DISP(0, 0), 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    /* A fence that no operation followed opened no epoch: a lock epoch may follow it, and
     * once that ends no epoch is open until the next fence (MPI-4.1 12.5.1). */
    int seen = -1;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_MPI(MPI_Get(&seen, 1, MPI_INT, 0, DISP(0, 0), 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_unlock(0, win));
    CHECK_CLASS(MPI_Put(src, 1, MPI_INT, 0, DISP(0, 0), 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    /* MPICH reports an invalid assertion as MPI_ERR_ARG; the standard has MPI_ERR_ASSERT. */
    CHECK_CLASS(MPI_Win_fence(1, win), tu_quirk("arg_classes") ? MPI_ERR_ARG : MPI_ERR_ASSERT);

    MPI_Type_free(&every2);
    if (flavor == MPI_WIN_FLAVOR_DYNAMIC)
        CHECK_MPI(MPI_Win_detach(win, mem));
    CHECK_MPI(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);
    if (flavor == MPI_WIN_FLAVOR_CREATE || flavor == MPI_WIN_FLAVOR_DYNAMIC)
        free(mem);
    if (comm != MPI_COMM_WORLD)
        MPI_Comm_free(&comm);
    free(bases);
    return tu_finish();
}
