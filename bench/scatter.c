/* scatter: MPI_Scatter of `size` bytes per rank (MPI_BYTE), root rotating, slowest rank (see
 * collbench.h); the first call's result is checked. */
#include "collbench.h"

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)rank;
    MPI_Scatter(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, (int)(it % np), MPI_COMM_WORLD);
}

static int check(const unsigned char *r, long n, long it, int rank, int np)
{
    int root = (int)(it % np);
    (void)np;
    for (long i = 0; i < n; i++)
        if (r[i] != cb_byte(root, rank * n + i))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct coll c = {"scatter", "MPI_Scatter(MPI_BYTE), bytes per rank, root rotating", 8, 1L << 20,
                     cb_times_np, cb_same, call, check};
    return coll_main(argc, argv, &c);
}
