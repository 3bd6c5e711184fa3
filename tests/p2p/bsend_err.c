/*
 * Buffered-mode errors under MPI_ERRORS_RETURN: MPI_Bsend with no buffer attached, and with
 * a buffer too small for the message, fail with MPI_ERR_BUFFER; the failed send delivers
 * nothing; afterwards buffered and standard sends to the same destination work again (the
 * process continues). Then the same between partners. Any size >= 1.
 */
#include "util.h"

enum { TAG_ERR = 8, TAG_OK = 9 };
#define BIG 5000

int main(int argc, char **argv)
{
    MPI_Status st;
    unsigned char *big, fits[16], got[16], *bbuf;
    void *dbuf;
    int rc, flag, bsize, dsize, partner, p, v, w;

    tu_init(&argc, &argv);
    partner = tu_partner();
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    big = tu_malloc(BIG);
    tu_fill(big, BIG, 1);
    CHECK_MPI(MPI_Pack_size(64, MPI_BYTE, MPI_COMM_WORLD, &bsize));
    bsize += MPI_BSEND_OVERHEAD;
    bbuf = tu_malloc(bsize);

    /* Destination self, then the partner (they are the same without a partner). The partner
     * receives what the sender is expected to deliver: only the sends that succeed. */
    for (p = 0; p < 2; p++) {
        int dest = p == 0 ? tu_rank : partner;
        /* 1. No buffer attached. (BIG, not a few bytes: Open MPI 4.1 sends small messages
         * at once without buffer space and reports no error; the standard says an error
         * occurs. We check what both peers agree on.) */
        rc = MPI_Bsend(big, BIG, MPI_BYTE, dest, TAG_ERR, MPI_COMM_WORLD);
        CHECK_CLASS(rc, MPI_ERR_BUFFER);
        /* 2. A buffer too small for the message. */
        CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
        rc = MPI_Bsend(big, BIG, MPI_BYTE, dest, TAG_ERR, MPI_COMM_WORLD);
        CHECK_CLASS(rc, MPI_ERR_BUFFER);
        /* 3. Sending continues: a buffered message that fits, then a standard one. */
        tu_fill(fits, 16, TU_SEED(tu_rank, dest, p));
        CHECK_MPI(MPI_Bsend(fits, 16, MPI_BYTE, dest, TAG_OK, MPI_COMM_WORLD));
        v = 1000 + tu_rank;
        if (dest == tu_rank) {
            MPI_Request r;
            CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, dest, TAG_OK, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Recv(got, 16, MPI_BYTE, tu_rank, TAG_OK, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_BYTE, tu_rank, TAG_OK, 16);
            CHECK_BUF(got, 16, TU_SEED(tu_rank, tu_rank, p));
            CHECK_MPI(MPI_Recv(&w, 1, MPI_INT, tu_rank, TAG_OK, MPI_COMM_WORLD, &st));
            CHECK_EQ(w, 1000 + tu_rank);
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Iprobe(tu_rank, TAG_ERR, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK_MSG(!flag, "a Bsend that failed delivered a message");
        } else {
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, dest, TAG_OK, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(got, 16, MPI_BYTE, partner, TAG_OK, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_BYTE, partner, TAG_OK, 16);
            CHECK_BUF(got, 16, TU_SEED(partner, tu_rank, p));
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_OK, MPI_COMM_WORLD, &st));
            CHECK_EQ(v, 1000 + partner);
            /* Both messages from the partner came after its failed sends: if one of those
             * had been delivered, it would be here now. */
            CHECK_MPI(MPI_Iprobe(partner, TAG_ERR, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK_MSG(!flag, "a Bsend that failed delivered a message");
        }
        CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
        CHECK(dbuf == (void *)bbuf);
        CHECK_EQ(dsize, bsize);
    }

    free(bbuf);
    free(big);
    return tu_finish();
}
