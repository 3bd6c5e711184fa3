/*
 * MPI_Abort(MPI_COMM_WORLD, 7) from the last process while all others wait in a receive
 * that nothing will satisfy: the whole job must end, and the launcher must exit with the
 * error code 7 (manifest: expect=exit:7). Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int v;

    tu_init(&argc, &argv);
    if (tu_rank == tu_size - 1) {
        fprintf(stderr, "rank %d: calling MPI_Abort(MPI_COMM_WORLD, 7)\n", tu_rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 7);
        TU_FAIL("MPI_Abort returned");
    } else {
        MPI_Recv(&v, 1, MPI_INT, tu_size - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        TU_FAIL("a receive from the aborting process completed");
    }
    return 0;
}
