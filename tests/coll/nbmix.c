/*
 * A nonblocking collective started on one process before, and on the others after, a blocking
 * collective on the same communicator: the two never exchange each other's messages.
 * (MPI-4.1 6.12 asks that all processes start collectives in the same order, so this is
 * beyond the standard; MPICH and Open MPI keep blocking and nonblocking collectives apart,
 * and mpi4py's fallback for MPIX_Comm_iagree, an MPI_Iallreduce, relies on it.)
 * For each root in turn:
 *   root:   Barrier; Iallreduce(BAND); Test (not complete: the others have not started it);
 *           Barrier; Wait
 *   others: Barrier; Barrier; Iallreduce(BAND); Wait
 * The result is the AND of everyone's value, on every process. Then the same with
 * MPI_Ibarrier against MPI_Bcast, and with a persistent MPI_Allreduce_init started late.
 * Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    MPI_Request r;
    int root, flag, in, out;

    tu_init(&argc, &argv);
    for (root = 0; root < tu_size; root++) {
        in = tu_rank == root ? 0xB : 0xD; /* 1011 and 1101: AND 1001, or 1011 alone */
        out = -1;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (tu_rank == root) {
            CHECK_MPI(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECK_EQ(flag, tu_size == 1);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        } else {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &r));
        }
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_EQ(out, tu_size == 1 ? 0xB : 0x9);
    }

    /* Ibarrier against Bcast: the root's Ibarrier cannot complete before the others start
     * theirs, which they do only after the Bcast that the root enters after its Test. */
    for (root = 0; root < tu_size; root++) {
        int v = tu_rank == root ? 4711 : -1;
        if (tu_rank == root) {
            CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECK_EQ(flag, tu_size == 1);
            CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, root, MPI_COMM_WORLD));
        } else {
            CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, root, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        }
        CHECK_EQ(v, 4711);
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }

#if MPI_VERSION >= 4
    /* A persistent allreduce (initialized in the same order everywhere) started by rank 0
     * before a blocking allreduce and by the others after it. */
    if (!tu_quirk("no_persistent")) {
        int a = tu_rank + 1, b = -1, c, d;
        CHECK_MPI(MPI_Allreduce_init(&a, &b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                                     &r));
        c = 10 * (tu_rank + 1);
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Start(&r));
            CHECK_MPI(MPI_Allreduce(&c, &d, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        } else {
            CHECK_MPI(MPI_Allreduce(&c, &d, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Start(&r));
        }
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_EQ(b, tu_size * (tu_size + 1) / 2);
        CHECK_EQ(d, 10 * tu_size * (tu_size + 1) / 2);
        CHECK_MPI(MPI_Request_free(&r));
    }
#endif
    return tu_finish();
}
