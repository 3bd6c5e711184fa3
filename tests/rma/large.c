/*
 * rma/large: single operations of 64 KiB to 3 MiB between neighbours (each rank the origin
 * of rank+1), for windows by MPI_Win_create or MPI_Win_allocate (argument). Large data may
 * leave from the caller's memory without a copy (the origin's buffer for a put, the window
 * for a get's answer), so what completes an operation must also give that memory back: the
 * origin rewrites its buffer right after MPI_Win_flush, MPI_Win_flush_local, MPI_Win_unlock,
 * MPI_Win_fence, MPI_Win_complete and MPI_Wait on an MPI_Rput, and the target must hold what
 * was there before. Sources at a cache-line boundary and 16 bytes past one; targets at 0 and
 * at odd displacements; gets read back what the target wrote, and a window freed right after
 * a get still answered it in full.
 */
#include "util.h"

#define MIB (1u << 20)
#define WBYTES (8u * MIB)

static const size_t sizes[] = {64u << 10, 256u << 10, MIB, 3 * MIB};
#define NSIZES (sizeof sizes / sizeof *sizes)

/* An origin buffer: 64-byte aligned, or `skew` bytes past that. */
static char *buffer(size_t n, size_t skew, void **raw)
{
    CHECK_EQ(posix_memalign(raw, 64, n + 64), 0);
    return (char *)*raw + skew;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int create = argc < 2 || !strcmp(argv[1], "create");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    char *mem;
    MPI_Win win;
    if (create) {
        mem = tu_malloc(WBYTES);
        CHECK_MPI(MPI_Win_create(mem, WBYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    } else {
        CHECK_MPI(MPI_Win_allocate(WBYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    }
    memset(mem, 0, WBYTES);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        for (size_t skew = 0; skew <= 16; skew += 16) {
            void *raw;
            char *src = buffer(n, skew, &raw);
            MPI_Aint d1 = (MPI_Aint)(skew ? 3 : 0), d2 = (MPI_Aint)(4 * MIB + skew);
            int k = (int)(s * 2 + skew / 16) * 16;

            /* Passive target: flush, then flush_local, each followed by a rewrite. */
            CHECK_MPI(MPI_Win_lock_all(0, win));
            tu_fill(src, n, TU_SEED(rank, to, k));
            CHECK_MPI(MPI_Put(src, (int)n, MPI_BYTE, to, d1, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_flush(to, win));
            tu_fill(src, n, TU_SEED(rank, to, k + 1));
            CHECK_MPI(MPI_Put(src, (int)n, MPI_BYTE, to, d2, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_flush_local(to, win));
            memset(src, 0xee, n);
            CHECK_MPI(MPI_Win_flush(to, win));
            CHECK_MPI(MPI_Win_unlock_all(win));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_BUF(mem + d1, n, TU_SEED(from, rank, k));
            CHECK_BUF(mem + d2, n, TU_SEED(from, rank, k + 1));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

            /* Get back what the origin's origin wrote here, from `to`'s window. */
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, to, 0, win));
            memset(src, 0, n);
            CHECK_MPI(MPI_Get(src, (int)n, MPI_BYTE, to, d2, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_unlock(to, win));
            CHECK_BUF(src, n, TU_SEED(rank, to, k + 1));

            /* An exclusive lock: the rewrite comes after the unlock. */
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, to, 0, win));
            tu_fill(src, n, TU_SEED(rank, to, k + 2));
            CHECK_MPI(MPI_Put(src, (int)n, MPI_BYTE, to, d1, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_unlock(to, win));
            memset(src, 0xdd, n);

            /* A request: the buffer is ours again once MPI_Wait returns. */
            CHECK_MPI(MPI_Win_lock_all(0, win));
            tu_fill(src, n, TU_SEED(rank, to, k + 3));
            MPI_Request rq;
            CHECK_MPI(MPI_Rput(src, (int)n, MPI_BYTE, to, d2, (int)n, MPI_BYTE, win, &rq));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            memset(src, 0xcc, n);
            CHECK_MPI(MPI_Win_unlock_all(win));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_BUF(mem + d1, n, TU_SEED(from, rank, k + 2));
            CHECK_BUF(mem + d2, n, TU_SEED(from, rank, k + 3));

            /* Fence, then post-start-complete-wait. */
            CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
            tu_fill(src, n, TU_SEED(rank, to, k + 4));
            CHECK_MPI(MPI_Put(src, (int)n, MPI_BYTE, to, d1, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
            memset(src, 0xbb, n);
            CHECK_BUF(mem + d1, n, TU_SEED(from, rank, k + 4));
            MPI_Group world, g_to, g_from;
            CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
            CHECK_MPI(MPI_Group_incl(world, 1, &to, &g_to));
            CHECK_MPI(MPI_Group_incl(world, 1, &from, &g_from));
            CHECK_MPI(MPI_Win_post(g_from, 0, win));
            CHECK_MPI(MPI_Win_start(g_to, 0, win));
            tu_fill(src, n, TU_SEED(rank, to, k + 5));
            CHECK_MPI(MPI_Put(src, (int)n, MPI_BYTE, to, d2, (int)n, MPI_BYTE, win));
            CHECK_MPI(MPI_Win_complete(win));
            memset(src, 0xaa, n);
            CHECK_MPI(MPI_Win_wait(win));
            CHECK_BUF(mem + d2, n, TU_SEED(from, rank, k + 5));
            MPI_Group_free(&g_to);
            MPI_Group_free(&g_from);
            MPI_Group_free(&world);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            free(raw);
        }
    }

    /* A get of 3 MiB, and the window freed at once: its answer is read in full first. */
    void *raw;
    char *dst = buffer(3 * MIB, 0, &raw);
    tu_fill(mem + MIB, 3 * MIB, TU_SEED(rank, rank, 99));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    CHECK_MPI(MPI_Get(dst, (int)(3 * MIB), MPI_BYTE, to, (MPI_Aint)MIB, (int)(3 * MIB), MPI_BYTE,
                      win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_BUF(dst, 3 * MIB, TU_SEED(to, to, 99));
    free(raw);
    if (create)
        free(mem);
    tu_finish();
    return 0;
}
