/* Asks the MPI library who it is, through both the MPI_ and the PMPI_ names.  Runs without
 * MPI_Init (these calls are allowed before it), so it works before the runtime exists. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = -1, major = -1, minor = -1, pmajor = -1, pminor = -1;

    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS || (int)strlen(version) != len)
        return 1;
    if (MPI_Get_version(&major, &minor) != MPI_SUCCESS ||
        PMPI_Get_version(&pmajor, &pminor) != MPI_SUCCESS || major != pmajor || minor != pminor)
        return 2;
    double t0 = MPI_Wtime(), t1 = MPI_Wtime(), tick = MPI_Wtick();
    if (t1 < t0 || tick <= 0.0 || tick > 1.0)
        return 3;
    printf("%s\nMPI %d.%d\n", version, major, minor);
    return 0;
}
