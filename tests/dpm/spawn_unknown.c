/*
 * A job spawned by rank 0 alone (MPI_Comm_spawn on MPI_COMM_SELF), then MPI_Intercomm_create
 * between MPI_COMM_WORLD and the children, through rank 0's intercommunicator: rank 1 has
 * never met the children (nor they it). Protean cannot introduce processes to each other
 * there yet, so the call must fail cleanly: an error on the processes that lack a route,
 * naming the unknown process, which MPI_ERRORS_ARE_FATAL turns into a job abort with that
 * message (the manifest expects the failure and the text), never a crash or a hang.
 * Size 2.
 */
#include "util.h"

int main(int argc, char **argv)
{
    MPI_Comm parent, ic = MPI_COMM_NULL, ic2;
    int errcode = -1;
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    if (parent == MPI_COMM_NULL) {
        tu_after_init(); /* (the child's world is not the size the runner launched) */
        CHECK_EQ(tu_size, 2);
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF,
                                     &ic, &errcode));
            CHECK_EQ(errcode, MPI_SUCCESS);
        }
    } else {
        ic = parent;
    }
    CHECK_MPI(MPI_Intercomm_create(MPI_COMM_WORLD, 0, ic, 0, 123, &ic2));
    /* Rank 0 knows everybody and gets its intercommunicator; it waits here until the abort of
     * the others ends it. Everybody getting past it would mean the limitation is gone. */
    CHECK_MPI(MPI_Barrier(ic2));
    TU_FAIL("MPI_Intercomm_create with a process never met succeeded: update this test");
    return 0;
}
