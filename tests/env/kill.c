/*
 * A process that dies: after a first exchange with everyone (so that connections exist),
 * the last process kills itself with SIGKILL while the others wait in a receive from it.
 * The job must end by itself (manifest: expect=fail, within the timeout), and the runner
 * checks that no process of the run is left and no /dev/shm file of the run remains.
 * Any size >= 1.
 */
#include "util.h"
#include <signal.h>

int main(int argc, char **argv)
{
    int v = 0, w, k, last;

    tu_init(&argc, &argv);
    last = tu_size - 1;
    /* Everyone exchanges a message with the last process, large enough to set up whatever
     * a transport sets up for bulk data. */
    {
        static unsigned char big[1 << 20];
        MPI_Status st;
        if (tu_rank == last) {
            for (k = 0; k < tu_size; k++) {
                if (k == last)
                    continue;
                CHECK_MPI(MPI_Recv(big, sizeof big, MPI_BYTE, k, 1, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(big, sizeof big, MPI_BYTE, k, 2, MPI_COMM_WORLD));
            }
        } else {
            CHECK_MPI(MPI_Send(big, sizeof big, MPI_BYTE, last, 1, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(big, sizeof big, MPI_BYTE, last, 2, MPI_COMM_WORLD, &st));
        }
    }
    if (tu_rank == last) {
        fprintf(stderr, "rank %d: raising SIGKILL\n", tu_rank);
        fflush(stderr);
        raise(SIGKILL);
        TU_FAIL("survived SIGKILL");
    }
    w = MPI_Recv(&v, 1, MPI_INT, last, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* An implementation may report the failure instead of ending the job; either way this
     * process must not report success. */
    fprintf(stderr, "rank %d: receive from the dead process returned %d\n", tu_rank, w);
    return 3;
}
