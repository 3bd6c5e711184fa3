/* reduce: MPI_Reduce(MPI_SUM) of `size` bytes of doubles, root rotating, slowest rank (see
 * collbench.h). Sizes must be multiples of 8. */
#include "collbench.h"

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)rank;
    MPI_Reduce(s, r, (int)(n / 8), MPI_DOUBLE, MPI_SUM, (int)(it % np), MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct coll c = {"reduce", "MPI_Reduce(MPI_SUM, MPI_DOUBLE), root rotating", 8, 1L << 20,
                     cb_same, cb_same, call, NULL};
    return coll_main(argc, argv, &c);
}
