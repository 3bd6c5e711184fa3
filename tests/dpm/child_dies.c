/*
 * A spawned child that dies: child 1 of 2 kills itself with SIGKILL after joining, while the
 * parents wait for a message from it. The parents must not hang: mpirun tears the whole job
 * down by its usual rules and names the dead process (the manifest expects exit status 137
 * and the message).
 */
#include "util.h"

#include <signal.h>

int main(int argc, char **argv)
{
    MPI_Comm ic, parent;
    char *args[] = {"child", NULL};
    int v = 0, rank;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        CHECK_MPI(MPI_Init(NULL, NULL));
        CHECK_MPI(MPI_Comm_get_parent(&parent));
        CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        if (rank == 1)
            raise(SIGKILL);
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                             MPI_ERRCODES_IGNORE));
    /* Never sent: the parents wait here until the job is torn down. */
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 1, ic, MPI_STATUS_IGNORE));
    TU_FAIL("a message from a dead child arrived");
}
