/*
 * Messages to oneself, on MPI_COMM_WORLD and MPI_COMM_SELF: Isend + Recv from 0 bytes to
 * 16 MiB, Irecv + blocking Send / Ssend / Rsend / Bsend, Issend pending until the receive,
 * Sendrecv and Sendrecv_replace, 500 unexpected messages received in order, probing a
 * message to self. Every process does it on its own; runs as a singleton too.
 */
#include "util.h"

static const int sizes[] = {0, 1, 4096, 65536, 1 << 20, 16 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define NUNEXP 500

static void run(MPI_Comm comm, int me)
{
    MPI_Status st;
    MPI_Request r, rs[NUNEXP];
    unsigned char *s, *d;
    int i, flag, v;

    s = tu_malloc(16 << 20);
    d = tu_malloc(16 << 20);
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        tu_fill(s, n, TU_SEED(me, i, 1));
        memset(d, 0, n);
        CHECK_MPI(MPI_Isend(s, n, MPI_BYTE, me, i, comm, &r));
        CHECK_MPI(MPI_Recv(d, n, MPI_BYTE, me, i, comm, &st));
        CHECK_STATUS(st, MPI_BYTE, me, i, n);
        CHECK_BUF(d, n, TU_SEED(me, i, 1));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

        /* receive posted first, then each blocking mode */
        memset(d, 0, n);
        CHECK_MPI(MPI_Irecv(d, n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &r));
        CHECK_MPI(MPI_Send(s, n, MPI_BYTE, me, 100 + i, comm));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_STATUS(st, MPI_BYTE, me, 100 + i, n);
        CHECK_BUF(d, n, TU_SEED(me, i, 1));
        if (n <= 65536) {
            CHECK_MPI(MPI_Irecv(d, n, MPI_BYTE, me, 200 + i, comm, &r));
            CHECK_MPI(MPI_Ssend(s, n, MPI_BYTE, me, 200 + i, comm));
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK_STATUS(st, MPI_BYTE, me, 200 + i, n);
            CHECK_MPI(MPI_Irecv(d, n, MPI_BYTE, me, 300 + i, comm, &r));
            CHECK_MPI(MPI_Rsend(s, n, MPI_BYTE, me, 300 + i, comm));
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK_STATUS(st, MPI_BYTE, me, 300 + i, n);
            CHECK_BUF(d, n, TU_SEED(me, i, 1));
        }
    }

    /* Bsend to self, received later. */
    {
        int bsize, dsize;
        void *bb, *db;
        CHECK_MPI(MPI_Pack_size(65536, MPI_BYTE, comm, &bsize));
        bsize += MPI_BSEND_OVERHEAD;
        bb = tu_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(bb, bsize));
        tu_fill(s, 65536, 4242);
        CHECK_MPI(MPI_Bsend(s, 65536, MPI_BYTE, me, 400, comm));
        memset(s, 0, 65536);
        CHECK_MPI(MPI_Recv(d, 65536, MPI_BYTE, me, 400, comm, &st));
        CHECK_STATUS(st, MPI_BYTE, me, 400, 65536);
        CHECK_BUF(d, 65536, 4242);
        CHECK_MPI(MPI_Buffer_detach(&db, &dsize));
        free(bb);
    }

    /* Issend to self is pending until the receive. */
    tu_fill(s, 1000, 77);
    CHECK_MPI(MPI_Issend(s, 1000, MPI_BYTE, me, 500, comm, &r));
    for (i = 0; i < 10; i++) {
        CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        CHECK_MSG(!flag, "Issend to self completed before the receive");
    }
    CHECK_MPI(MPI_Probe(me, 500, comm, &st));
    CHECK_STATUS(st, MPI_BYTE, me, 500, 1000);
    CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK_MSG(!flag, "Issend to self completed after a probe, before the receive");
    CHECK_MPI(MPI_Recv(d, 1000, MPI_BYTE, me, 500, comm, &st));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_BUF(d, 1000, 77);

    /* Sendrecv and Sendrecv_replace with self, large. */
    tu_fill(s, 4 << 20, 99);
    CHECK_MPI(MPI_Sendrecv(s, 4 << 20, MPI_BYTE, me, 600, d, 4 << 20, MPI_BYTE, me, 600, comm,
                           &st));
    CHECK_STATUS(st, MPI_BYTE, me, 600, 4 << 20);
    CHECK_BUF(d, 4 << 20, 99);
    CHECK_MPI(MPI_Sendrecv_replace(s, 4 << 20, MPI_BYTE, me, 601, me, 601, comm, &st));
    CHECK_STATUS(st, MPI_BYTE, me, 601, 4 << 20);
    CHECK_BUF(s, 4 << 20, 99);

    /* Many unexpected messages to self, received in order. */
    {
        int *vals = tu_malloc(sizeof(int) * NUNEXP);
        for (i = 0; i < NUNEXP; i++) {
            vals[i] = i;
            CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, me, 700, comm, &rs[i]));
        }
        for (i = 0; i < NUNEXP; i++) {
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, me, 700, comm, &st));
            CHECK_EQ(v, i);
        }
        CHECK_MPI(MPI_Waitall(NUNEXP, rs, MPI_STATUSES_IGNORE));
        free(vals);
    }
    free(s);
    free(d);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    run(MPI_COMM_WORLD, tu_rank);
    run(MPI_COMM_SELF, 0);
    return tu_finish();
}
