/*
 * Blocking standard-mode MPI_Send/MPI_Recv between partners, MPI_Sendrecv and
 * MPI_Sendrecv_replace around a ring, for message sizes from 0 bytes to 1 MiB.
 * Checks contents, and source, tag and count in the status. Empty messages whose buffers
 * name MPI_DATATYPE_NULL (count 0: MPICH checks the datatype only when count > 0) through
 * MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv, MPI_Sendrecv; a nonzero count with it is
 * MPI_ERR_TYPE. Any size >= 1.
 */
#include "util.h"

static const int sizes[] = {0, 1, 7, 8, 1000, 4096, 65536, 65537, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define MAXSZ (1 << 20)

int main(int argc, char **argv)
{
    MPI_Status st;
    unsigned char *sbuf, *rbuf;
    int i, next, prev, partner;

    tu_init(&argc, &argv);
    sbuf = tu_malloc(MAXSZ + 16);
    rbuf = tu_malloc(MAXSZ + 16);
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;
    partner = tu_partner();

    /* Pairs: the lower rank sends first, then receives; the other does the reverse. */
    if (partner != tu_rank) {
        for (i = 0; i < NSIZES; i++) {
            int n = sizes[i];
            tu_fill(sbuf, n, TU_SEED(tu_rank, partner, i));
            memset(rbuf, 0xA5, n + 16);
            if (tu_rank < partner) {
                CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD));
            }
            CHECK_STATUS(st, MPI_BYTE, partner, 100 + i, n);
            CHECK_BUF(rbuf, n, TU_SEED(partner, tu_rank, i));
            CHECK_BYTES(rbuf + n, 16, 0xA5); /* nothing written past the message */
        }
        /* The same with MPI_INT and a receive buffer larger than the message. */
        {
            int sv[100], rv[200], k, cnt;
            for (k = 0; k < 100; k++)
                sv[k] = tu_rank * 1000 + k;
            for (k = 0; k < 200; k++)
                rv[k] = -1;
            if (tu_rank < partner) {
                CHECK_MPI(MPI_Send(sv, 100, MPI_INT, partner, 7, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(rv, 200, MPI_INT, partner, 7, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Recv(rv, 200, MPI_INT, partner, 7, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(sv, 100, MPI_INT, partner, 7, MPI_COMM_WORLD));
            }
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
            CHECK_EQ(cnt, 100);
            for (k = 0; k < 100; k++)
                CHECK_EQ(rv[k], partner * 1000 + k);
            for (k = 100; k < 200; k++)
                CHECK_EQ(rv[k], -1);
        }
    }

    /* Ring with MPI_Sendrecv (with one process, the ring is a message to self). */
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        tu_fill(sbuf, n, TU_SEED(tu_rank, next, 50 + i));
        memset(rbuf, 0x5A, n + 16);
        CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, next, 200 + i, rbuf, n, MPI_BYTE, prev,
                               200 + i, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, prev, 200 + i, n);
        CHECK_BUF(rbuf, n, TU_SEED(prev, tu_rank, 50 + i));
        CHECK_BYTES(rbuf + n, 16, 0x5A);
        CHECK_BUF(sbuf, n, TU_SEED(tu_rank, next, 50 + i)); /* send buffer unchanged */
    }

    /* Sendrecv with wildcards on the receive side, different send and receive tags and
     * different send and receive types (int out, bytes back in). */
    {
        int sv[10], k;
        unsigned char rb[64];
        for (k = 0; k < 10; k++)
            sv[k] = tu_rank + k;
        CHECK_MPI(MPI_Sendrecv(sv, 10, MPI_INT, next, 300 + tu_rank, rb, 64, MPI_BYTE,
                               MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        /* Only prev sends to us in this step (everyone sends to its next). */
        CHECK_STATUS(st, MPI_BYTE, prev, 300 + prev, 10 * (int)sizeof(int));
        for (k = 0; k < 10; k++) {
            int v;
            memcpy(&v, rb + k * sizeof(int), sizeof v);
            CHECK_EQ(v, prev + k);
        }
    }

    /* MPI_Sendrecv_replace around the ring; the buffer ends up holding prev's data. */
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        tu_fill(rbuf, n, TU_SEED(tu_rank, next, 80 + i));
        CHECK_MPI(MPI_Sendrecv_replace(rbuf, n, MPI_BYTE, next, 400 + i, prev, 400 + i,
                                       MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, prev, 400 + i, n);
        CHECK_BUF(rbuf, n, TU_SEED(prev, tu_rank, 80 + i));
    }
    {
        /* ... with a typed buffer, in the reverse direction. */
        double d[1000];
        int k;
        for (k = 0; k < 1000; k++)
            d[k] = tu_rank + k * 0.5;
        CHECK_MPI(MPI_Sendrecv_replace(d, 1000, MPI_DOUBLE, prev, 500, next, 500,
                                       MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_DOUBLE, next, 500, 1000);
        for (k = 0; k < 1000; k++)
            CHECK(d[k] == next + k * 0.5);
    }

    /* Empty messages of MPI_DATATYPE_NULL (Open MPI 4.1.4 rejects them). */
    if (!tu_quirk("empty_datatype_null")) {
        MPI_Request rq[2];
        int rc;
        CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, next, 600, NULL, 0, MPI_DATATYPE_NULL,
                               prev, 600, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, prev, 600, 0);
        CHECK_MPI(MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, prev, 601, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_DATATYPE_NULL, next, 601, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        /* Blocking, between partners (a blocking send to self may wait for its receive). */
        if (partner != tu_rank) {
            if (tu_rank < partner) {
                CHECK_MPI(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, partner, 602, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, partner, 602, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, partner, 602, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, partner, 602, MPI_COMM_WORLD));
            }
            CHECK_STATUS(st, MPI_INT, partner, 602, 0);
        }
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        rc = MPI_Send(sbuf, 1, MPI_DATATYPE_NULL, next, 603, MPI_COMM_WORLD);
        CHECK_CLASS(rc, MPI_ERR_TYPE);
        rc = MPI_Irecv(rbuf, 4, MPI_DATATYPE_NULL, prev, 603, MPI_COMM_WORLD, &rq[0]);
        CHECK_CLASS(rc, MPI_ERR_TYPE);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    free(sbuf);
    free(rbuf);
    return tu_finish();
}
