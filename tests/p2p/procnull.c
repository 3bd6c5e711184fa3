/*
 * MPI_PROC_NULL as source or destination of the blocking calls and of nonblocking sends:
 * every send mode completes at once (Bsend without a buffer attached too), a receive
 * completes with source MPI_PROC_NULL, tag MPI_ANY_TAG and count 0 and leaves the buffer
 * alone, Sendrecv and Sendrecv_replace with one or both sides PROC_NULL, probes. The
 * statuses of nonblocking and persistent receives from PROC_NULL are in procnull_nb.c.
 * Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request r[5];
    int buf[16], k, flag;

    tu_init(&argc, &argv);
    for (k = 0; k < 16; k++)
        buf[k] = 1000 + k;

    /* Sends: all modes, blocking and not. No buffer is attached for the buffered ones. */
    CHECK_MPI(MPI_Send(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Ssend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Rsend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Bsend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Isend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[0]));
    CHECK_MPI(MPI_Issend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[1]));
    CHECK_MPI(MPI_Irsend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[2]));
    CHECK_MPI(MPI_Ibsend(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[3]));
    CHECK_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
    for (k = 0; k < 4; k++)
        CHECK(r[k] == MPI_REQUEST_NULL);
    /* Any tag value that is valid for a send, and on another communicator. */
    CHECK_MPI(MPI_Send(buf, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_SELF));
    CHECK_MPI(MPI_Send(NULL, 0, MPI_INT, MPI_PROC_NULL, 32767, MPI_COMM_WORLD));

    /* Blocking receive: PROC_NULL status, buffer untouched. */
    for (k = 0; k < 16; k++)
        buf[k] = -5;
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Recv(buf, 16, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Recv(buf, 16, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    {
        int n = -1;
        CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &n));
        CHECK_EQ(n, 0);
        CHECK_MPI(MPI_Test_cancelled(&st, &n));
        CHECK_EQ(n, 0);
    }
    CHECK_MPI(MPI_Recv(buf, 16, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (k = 0; k < 16; k++)
        CHECK_EQ(buf[k], -5);

    /* Sendrecv: both sides PROC_NULL; send to self and receive from PROC_NULL. */
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Sendrecv(buf, 16, MPI_INT, MPI_PROC_NULL, 1, buf + 8, 8, MPI_INT,
                           MPI_PROC_NULL, 2, MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    for (k = 0; k < 16; k++)
        CHECK_EQ(buf[k], -5);
    {
        int one = 42, got = 0;
        CHECK_MPI(MPI_Sendrecv(&one, 1, MPI_INT, MPI_PROC_NULL, 1, &got, 1, MPI_INT,
                               MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_EQ(got, 0);
        int got2 = 0;
        MPI_Request rr;
        /* the receive for the message to self is posted first: a standard send to self
         * may wait for it */
        CHECK_MPI(MPI_Irecv(&got2, 1, MPI_INT, tu_rank, 5, MPI_COMM_WORLD, &rr));
        CHECK_MPI(MPI_Sendrecv(&one, 1, MPI_INT, tu_rank, 5, &got, 1, MPI_INT, MPI_PROC_NULL,
                               5, MPI_COMM_WORLD, &st));
        CHECK_PROC_NULL_STATUS(st, MPI_INT);
        CHECK_EQ(got, 0);
        CHECK_MPI(MPI_Wait(&rr, &st));
        CHECK_STATUS(st, MPI_INT, tu_rank, 5, 1);
        CHECK_EQ(got2, 42);
    }

    /* Sendrecv_replace with PROC_NULL on both sides: buffer unchanged. */
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Sendrecv_replace(buf, 16, MPI_INT, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1,
                                   MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    for (k = 0; k < 16; k++)
        CHECK_EQ(buf[k], -5);

    /* Probes. */
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    flag = 0;
    memset(&st, 0x66, sizeof st);
    CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);

    return tu_finish();
}
