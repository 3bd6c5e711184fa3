/*
 * rma/pscw: general active target synchronisation (post, start, complete, wait, test).
 * Even ranks expose their window to the odd ranks, which put into it; then the roles swap;
 * a ring where every rank is origin and target in the same epoch; MPI_Win_test polls until
 * the origins completed (and not before: the origins complete only after a message that
 * the target sends once it saw MPI_Win_test fail); MPI_MODE_NOCHECK with a barrier standing
 * in for the post; empty groups; errors for epochs opened twice or closed unopened, and for
 * a lock inside an access epoch.
 */
#include "util.h"

#define N 32

static MPI_Group group_of(MPI_Group world, int *ranks, int n)
{
    MPI_Group g;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
    return g;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    int alloc = argc > 1 && !strcmp(argv[1], "allocate");
    int *mem;
    MPI_Win win;
    if (alloc) {
        CHECK_MPI(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    } else {
        mem = tu_malloc(N * sizeof(int));
        CHECK_MPI(MPI_Win_create(mem, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    MPI_Group world;
    CHECK_MPI(MPI_Win_get_group(win, &world));
    int *evens = tu_malloc(size * sizeof(int)), *odds = tu_malloc(size * sizeof(int));
    int ne = 0, no = 0;
    for (int r = 0; r < size; r++) {
        if (r % 2 == 0)
            evens[ne++] = r;
        else
            odds[no++] = r;
    }
    MPI_Group ge = group_of(world, evens, ne), go = group_of(world, odds, no);

    for (int phase = 0; phase < 2; phase++) {
        int target_side = (rank % 2) == phase;
        for (int i = 0; i < N; i++)
            mem[i] = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        if (target_side) {
            CHECK_MPI(MPI_Win_post(phase == 0 ? go : ge, 0, win));
            CHECK_MPI(MPI_Win_wait(win));
            int origins = phase == 0 ? no : ne;
            for (int k = 0; k < origins; k++) {
                int o = phase == 0 ? odds[k] : evens[k];
                if (o < N)
                    CHECK_MSG(mem[o] == o * 10 + rank, "slot %d is %d", o, mem[o]);
            }
        } else {
            CHECK_MPI(MPI_Win_start(phase == 0 ? ge : go, 0, win));
            int targets = phase == 0 ? ne : no;
            for (int k = 0; k < targets; k++) {
                int t = phase == 0 ? evens[k] : odds[k];
                int v = rank * 10 + t;
                if (rank < N)
                    CHECK_MPI(MPI_Put(&v, 1, MPI_INT, t, rank, 1, MPI_INT, win));
            }
            CHECK_MPI(MPI_Win_complete(win));
        }
    }

    /* Ring: each rank exposes to its left neighbour and accesses its right one. */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Group gl = group_of(world, &left, 1), gr = group_of(world, &right, 1);
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < 10; k++) {
        CHECK_MPI(MPI_Win_post(gl, MPI_MODE_NOSTORE, win));
        CHECK_MPI(MPI_Win_start(gr, 0, win));
        int v = 1000 * k + rank, got = -1;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win));
        CHECK_MPI(MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, win));
        CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_MAX, win));
        CHECK_MPI(MPI_Win_complete(win));
        CHECK_MPI(MPI_Win_wait(win));
        CHECK_EQ(mem[0], 1000 * k + left);
        CHECK_EQ(mem[2], 1000 * k + left);
        mem[1] = 7 * k + rank;
        if (k > 0)
            CHECK_EQ(got, 7 * (k - 1) + right);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* MPI_Win_test: the origin completes only after the target saw a test fail. */
    if (size >= 2 && rank < 2) {
        int other = 1 - rank;
        MPI_Group g = group_of(world, &other, 1);
        if (rank == 0) {
            CHECK_MPI(MPI_Win_post(g, 0, win));
            int flag = 1;
            CHECK_MPI(MPI_Win_test(win, &flag));
            CHECK(!flag);
            int go_on = 1;
            CHECK_MPI(MPI_Send(&go_on, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
            while (!flag)
                CHECK_MPI(MPI_Win_test(win, &flag));
            CHECK_EQ(mem[5], 55);
        } else {
            int v = 55, go_on;
            CHECK_MPI(MPI_Win_start(g, 0, win));
            CHECK_MPI(MPI_Put(&v, 1, MPI_INT, 0, 5, 1, MPI_INT, win));
            CHECK_MPI(MPI_Recv(&go_on, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Win_complete(win));
        }
        MPI_Group_free(&g);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* MPI_MODE_NOCHECK: the barrier guarantees the posts. */
    CHECK_MPI(MPI_Win_post(gl, MPI_MODE_NOCHECK, win));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_start(gr, MPI_MODE_NOCHECK, win));
    int nine = 9;
    CHECK_MPI(MPI_Put(&nine, 1, MPI_INT, right, 6, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    CHECK_EQ(mem[6], 9);

    /* Empty groups, and errors. */
    CHECK_MPI(MPI_Win_start(MPI_GROUP_EMPTY, 0, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_post(MPI_GROUP_EMPTY, 0, win));
    CHECK_MPI(MPI_Win_wait(win));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    if (!tu_quirk("unchecked_epochs")) {
        CHECK_CLASS(MPI_Win_complete(win), MPI_ERR_RMA_SYNC);
        CHECK_CLASS(MPI_Win_wait(win), MPI_ERR_RMA_SYNC);
        CHECK_MPI(MPI_Win_start(MPI_GROUP_EMPTY, 0, win));
        CHECK_CLASS(MPI_Win_start(MPI_GROUP_EMPTY, 0, win), MPI_ERR_RMA_SYNC);
        CHECK_CLASS(MPI_Put(&nine, 1, MPI_INT, right, 6, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
        /* No lock epoch inside an access epoch of MPI_Win_start. */
        CHECK_CLASS(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win), MPI_ERR_RMA_SYNC);
        CHECK_CLASS(MPI_Win_lock_all(0, win), MPI_ERR_RMA_SYNC);
        CHECK_MPI(MPI_Win_complete(win));
    }

    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
    MPI_Group_free(&ge);
    MPI_Group_free(&go);
    MPI_Group_free(&world);
    CHECK_MPI(MPI_Win_free(&win));
    if (!alloc)
        free(mem);
    free(evens);
    free(odds);
    return tu_finish();
}
