/* barrier: MPI_Barrier latency, slowest rank (see collbench.h). The size column is 0. */
#include "collbench.h"

static long none(long size, int np) { (void)size; (void)np; return 1; }

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)s; (void)r; (void)n; (void)it; (void)rank; (void)np;
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct coll c = {"barrier", "MPI_Barrier", 0, 0, none, none, call, NULL};
    return coll_main(argc, argv, &c);
}
