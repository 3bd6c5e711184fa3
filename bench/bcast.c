/* bcast: MPI_Bcast of `size` bytes (MPI_BYTE), root rotating, slowest rank (see collbench.h). */
#include "collbench.h"

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)r;
    (void)rank;
    MPI_Bcast(s, (int)n, MPI_BYTE, (int)(it % np), MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct coll c = {"bcast", "MPI_Bcast(MPI_BYTE), root rotating", 8, 1L << 20, cb_same, cb_same,
                     call, NULL};
    return coll_main(argc, argv, &c);
}
