/*
 * A runaway sender: the last process starts many sends that rank 0 has no receive for, while
 * rank 0 waits for a message that comes after them (nonblocking sends: a standard send may
 * wait for its receive). Under a small unexpected_max the
 * job must stop with a message that names the limit (manifest: expect=fail); with room for
 * them, rank 0 receives them all afterwards and the job passes. Any size >= 2 (size 1: no
 * sender, passes).
 */
#include "util.h"

#define N 200
#define LEN 8192

int main(int argc, char **argv)
{
    static char buf[LEN], out[N][LEN];
    MPI_Request reqs[N];
    int k, last, done = 0;

    tu_init(&argc, &argv);
    last = tu_size - 1;
    if (tu_size > 1 && tu_rank == last) {
        for (k = 0; k < N; k++) {
            tu_fill(out[k], LEN, k);
            CHECK_MPI(MPI_Isend(out[k], LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &reqs[k]));
        }
        CHECK_MPI(MPI_Send(&done, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    } else if (tu_size > 1 && tu_rank == 0) {
        CHECK_MPI(MPI_Recv(&done, 1, MPI_INT, last, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (k = 0; k < N; k++) {
            CHECK_MPI(MPI_Recv(buf, LEN, MPI_BYTE, last, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_BUF(buf, LEN, k);
        }
    }
    return tu_finish();
}
