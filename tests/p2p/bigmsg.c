/*
 * Large messages: 64 MiB between partners with blocking Send/Recv (each direction in
 * turn), with Isend/Irecv in both directions at once, around a ring with Sendrecv, and a
 * 16 MiB strided (vector type) message received contiguously. Contents are checked in full.
 * Pairs (0,1), (2,3), ...; alone, a rank sends to itself (nonblocking). Any size >= 1.
 */
#include "util.h"

#define BIG ((size_t)64 << 20)

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request r[2];
    unsigned char *s, *d;
    int partner, next, prev;

    tu_init(&argc, &argv);
    partner = tu_partner();
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;
    s = tu_malloc(BIG);
    d = tu_malloc(BIG);

    /* 1. Blocking, one direction at a time (alone: Isend + Recv). */
    tu_fill(s, BIG, TU_SEED(tu_rank, partner, 1));
    if (partner == tu_rank) {
        CHECK_MPI(MPI_Isend(s, (int)BIG, MPI_BYTE, tu_rank, 1, MPI_COMM_WORLD, &r[0]));
        CHECK_MPI(MPI_Recv(d, (int)BIG, MPI_BYTE, tu_rank, 1, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    } else if (tu_rank < partner) {
        CHECK_MPI(MPI_Send(s, (int)BIG, MPI_BYTE, partner, 1, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(d, (int)BIG, MPI_BYTE, partner, 1, MPI_COMM_WORLD, &st));
    } else {
        CHECK_MPI(MPI_Recv(d, (int)BIG, MPI_BYTE, partner, 1, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Send(s, (int)BIG, MPI_BYTE, partner, 1, MPI_COMM_WORLD));
    }
    CHECK_STATUS(st, MPI_BYTE, partner, 1, (int)BIG);
    CHECK_BUF(d, BIG, TU_SEED(partner, tu_rank, 1));

    /* 2. Both directions at once, as MPI_INT. */
    tu_fill(s, BIG, TU_SEED(tu_rank, partner, 2));
    CHECK_MPI(MPI_Irecv(d, (int)(BIG / 4), MPI_INT, partner, 2, MPI_COMM_WORLD, &r[0]));
    CHECK_MPI(MPI_Isend(s, (int)(BIG / 4), MPI_INT, partner, 2, MPI_COMM_WORLD, &r[1]));
    CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK_BUF(d, BIG, TU_SEED(partner, tu_rank, 2));

    /* 3. Ring. */
    tu_fill(s, BIG, TU_SEED(tu_rank, next, 3));
    CHECK_MPI(MPI_Sendrecv(s, (int)BIG, MPI_BYTE, next, 3, d, (int)BIG, MPI_BYTE, prev, 3,
                           MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_BYTE, prev, 3, (int)BIG);
    CHECK_BUF(d, BIG, TU_SEED(prev, tu_rank, 3));

    /* 4. Strided: every other 64-byte block of 32 MiB (16 MiB of data) into a contiguous
     * buffer. */
    {
        MPI_Datatype vec;
        int nblk = (16 << 20) / 64, k;
        CHECK_MPI(MPI_Type_vector(nblk, 64, 128, MPI_BYTE, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        tu_fill(s, (size_t)32 << 20, TU_SEED(tu_rank, partner, 4));
        memset(d, 0, (size_t)16 << 20);
        CHECK_MPI(MPI_Irecv(d, 16 << 20, MPI_BYTE, partner, 4, MPI_COMM_WORLD, &r[0]));
        CHECK_MPI(MPI_Isend(s, 1, vec, partner, 4, MPI_COMM_WORLD, &r[1]));
        CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        /* rebuild what the partner sent: its pattern, every other block */
        tu_fill(s, (size_t)32 << 20, TU_SEED(partner, tu_rank, 4));
        for (k = 0; k < nblk; k++)
            if (memcmp(d + (size_t)k * 64, s + (size_t)k * 128, 64) != 0)
                TU_FAIL("strided message: block %d differs", k);
        MPI_Type_free(&vec);
    }

    free(s);
    free(d);
    return tu_finish();
}
