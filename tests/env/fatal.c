/*
 * Errors under the default handler MPI_ERRORS_ARE_FATAL: rank 0 makes one invalid call
 * (chosen by the argument) while the other processes wait in a receive from it. The whole
 * job must end with a non-zero exit status and an error message that names the function
 * (manifest: expect=fail match=...). If the call returns, the program says so and exits 0,
 * which the runner counts as a failure.
 *   rank   MPI_Send to rank = size          type   MPI_Send with MPI_DATATYPE_NULL
 *   tag    MPI_Recv with tag -5             comm   MPI_Send on MPI_COMM_NULL
 *   count  MPI_Isend with count -1
 * Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int v = 0, rc = -1;
    const char *what = argc > 1 ? argv[1] : "";
    MPI_Request r;

    tu_init(&argc, &argv);
    if (tu_rank == 0) {
        if (!strcmp(what, "rank"))
            rc = MPI_Send(&v, 1, MPI_INT, tu_size, 1, MPI_COMM_WORLD);
        else if (!strcmp(what, "tag"))
            rc = MPI_Recv(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (!strcmp(what, "count"))
            rc = MPI_Isend(&v, -1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
        else if (!strcmp(what, "type"))
            rc = MPI_Send(&v, 1, MPI_DATATYPE_NULL, 0, 1, MPI_COMM_WORLD);
        else if (!strcmp(what, "comm"))
            rc = MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_NULL);
        else
            TU_FAIL("usage: fatal rank|tag|count|type|comm");
        printf("the invalid call (%s) returned %d instead of ending the job\n", what, rc);
        printf(" No Errors\n"); /* makes the mistake visible as exit status 0 */
        fflush(stdout);
        exit(0);
    }
    MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    TU_FAIL("a receive from rank 0 completed");
    return 0;
}
