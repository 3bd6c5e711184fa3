/* allgather: MPI_Allgather of `size` bytes per rank (MPI_BYTE), slowest rank (see collbench.h);
 * the first call's result is checked. */
#include "collbench.h"

static void call(unsigned char *s, unsigned char *r, long n, long it, int rank, int np)
{
    (void)it; (void)rank; (void)np;
    MPI_Allgather(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, MPI_COMM_WORLD);
}

static int check(const unsigned char *r, long n, long it, int rank, int np)
{
    (void)it; (void)rank;
    for (int p = 0; p < np; p++)
        for (long i = 0; i < n; i++)
            if (r[p * n + i] != cb_byte(p, i))
                return 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct coll c = {"allgather", "MPI_Allgather(MPI_BYTE), bytes per rank", 8, 1L << 20, cb_same,
                     cb_times_np, call, check};
    return coll_main(argc, argv, &c);
}
