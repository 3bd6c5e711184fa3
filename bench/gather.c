/* gather: MPI_Gather of `size` bytes per rank (MPI_BYTE), root rotating, slowest rank (see
 * collbench.h); the first call's result is checked at its root. */
#include "collbench.h"

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)rank;
    MPI_Gather(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, (int)(it % np), MPI_COMM_WORLD);
}

static int check(const unsigned char *r, long n, long it, int rank, int np)
{
    if (rank != (int)(it % np))
        return 0;
    for (int p = 0; p < np; p++)
        for (long i = 0; i < n; i++)
            if (r[p * n + i] != cb_byte(p, i))
                return 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct coll c = {"gather", "MPI_Gather(MPI_BYTE), bytes per rank, root rotating", 8, 1L << 20,
                     cb_same, cb_times_np, call, check};
    return coll_main(argc, argv, &c);
}
