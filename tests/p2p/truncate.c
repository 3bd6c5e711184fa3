/*
 * Truncation under MPI_ERRORS_RETURN: a message longer than the receive buffer.
 *  - MPI_Recv returns an error of class MPI_ERR_TRUNCATE (small and large messages), the
 *    status still names source and tag, and the sender's call succeeds;
 *  - MPI_Irecv + MPI_Wait returns MPI_ERR_TRUNCATE;
 *  - MPI_Waitall over three receives of which the middle one is truncated returns
 *    MPI_ERR_IN_STATUS, with MPI_ERR_TRUNCATE in that status and MPI_SUCCESS (completed) or
 *    MPI_ERR_PENDING (still active, completed afterwards) in the others;
 *  - MPI_Sendrecv and MPI_Mrecv truncate too;
 *  - nothing written past the receive buffer, and the process goes on: later messages
 *    between the same processes arrive intact.
 * Pairs (0,1), (2,3), ...: the lower rank sends; alone, a rank sends to itself.
 * Any size >= 1.
 */
#include "util.h"

enum { TAG_T = 1, TAG_OK = 2, TAG_W = 3, TAG_SR = 4, TAG_M = 5, TAG_DONE = 6 };
#define BIG (1 << 20)
#define SMALLBUF 40
#define GUARD 64

int main(int argc, char **argv)
{
    MPI_Status st, sts[3];
    MPI_Request r, rr[3], sr[8];
    unsigned char *big, *rb;
    int partner, sender, receiver, rc, k, ns = 0;
    int vals[3] = {1, 2, 3};

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    partner = tu_partner();
    sender = tu_rank <= partner;
    receiver = tu_rank >= partner;
    big = tu_malloc(BIG);
    rb = tu_malloc(BIG + GUARD);
    tu_fill(big, BIG, TU_SEED(7, 7, 7));

    /* Sends: 100 bytes and BIG bytes on TAG_T (to be truncated), then an intact one. The
     * sends themselves must succeed. */
    if (sender) {
        CHECK_MPI(MPI_Isend(big, 100, MPI_BYTE, partner, TAG_T, MPI_COMM_WORLD, &sr[ns++]));
        CHECK_MPI(MPI_Isend(big, BIG, MPI_BYTE, partner, TAG_T, MPI_COMM_WORLD, &sr[ns++]));
        CHECK_MPI(MPI_Isend(big, 1000, MPI_BYTE, partner, TAG_OK, MPI_COMM_WORLD, &sr[ns++]));
    }
    if (receiver) {
        for (k = 0; k < 2; k++) {
            memset(rb, 0xAB, SMALLBUF + GUARD);
            memset(&st, 0, sizeof st);
            rc = MPI_Recv(rb, SMALLBUF, MPI_BYTE, partner, TAG_T, MPI_COMM_WORLD, &st);
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
            CHECK_EQ(st.MPI_SOURCE, partner);
            CHECK_EQ(st.MPI_TAG, TAG_T);
            CHECK_BYTES(rb + SMALLBUF, GUARD, 0xAB);
        }
        CHECK_MPI(MPI_Recv(rb, BIG, MPI_BYTE, partner, TAG_OK, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_OK, 1000);
        CHECK_BUF(rb, 1000, TU_SEED(7, 7, 7));
    }
    if (sender) {
        CHECK_MPI(MPI_Waitall(ns, sr, MPI_STATUSES_IGNORE));
        ns = 0;
    }

    /* Irecv + Wait, small then large. */
    if (receiver) {
        for (k = 0; k < 2; k++) {
            memset(rb, 0xAB, SMALLBUF + GUARD);
            CHECK_MPI(MPI_Irecv(rb, SMALLBUF, MPI_BYTE, partner, TAG_W, MPI_COMM_WORLD, &r));
            if (k == 0 && sender) /* alone: send after posting */
                CHECK_MPI(MPI_Isend(big, 200, MPI_BYTE, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
            if (k == 1 && sender)
                CHECK_MPI(MPI_Isend(big, BIG, MPI_BYTE, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
            rc = MPI_Wait(&r, &st);
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
            CHECK(r == MPI_REQUEST_NULL);
            CHECK_BYTES(rb + SMALLBUF, GUARD, 0xAB);
        }
    } else {
        CHECK_MPI(MPI_Isend(big, 200, MPI_BYTE, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
        CHECK_MPI(MPI_Isend(big, BIG, MPI_BYTE, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
    }

    /* Waitall: three receives on TAG_W, the middle one too small. */
    if (sender) {
        CHECK_MPI(MPI_Isend(&vals[0], 1, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
        CHECK_MPI(MPI_Isend(vals, 3, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
        CHECK_MPI(MPI_Isend(&vals[2], 1, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &sr[ns++]));
    }
    if (receiver) {
        int a = 0, b[2] = {0, 0}, c = 0;
        CHECK_MPI(MPI_Irecv(&a, 1, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &rr[0]));
        CHECK_MPI(MPI_Irecv(b, 2, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &rr[1]));
        CHECK_MPI(MPI_Irecv(&c, 1, MPI_INT, partner, TAG_W, MPI_COMM_WORLD, &rr[2]));
        for (k = 0; k < 3; k++)
            sts[k].MPI_ERROR = -1;
        rc = MPI_Waitall(3, rr, sts);
        CHECK_CLASS(rc, MPI_ERR_IN_STATUS);
        CHECK_CLASS(sts[1].MPI_ERROR, MPI_ERR_TRUNCATE);
        CHECK(rr[1] == MPI_REQUEST_NULL);
        /* The others either completed (MPI_SUCCESS) or are still pending (MPI_ERR_PENDING:
         * Waitall may stop at the first error) and must then be completed by the caller. */
        for (k = 0; k < 3; k += 2) {
            int cls = -1;
            MPI_Error_class(sts[k].MPI_ERROR, &cls);
            CHECK_MSG(cls == MPI_SUCCESS || cls == MPI_ERR_PENDING,
                      "status %d: error class %d (%s)", k, cls, tu_class_name(cls));
            if (cls == MPI_ERR_PENDING) {
                CHECK(rr[k] != MPI_REQUEST_NULL);
                CHECK_MPI(MPI_Wait(&rr[k], &sts[k]));
            } else {
                CHECK(rr[k] == MPI_REQUEST_NULL);
            }
            CHECK_STATUS(sts[k], MPI_INT, partner, TAG_W, 1);
        }
        CHECK_EQ(a, 1);
        CHECK_EQ(c, 3);
    }
    if (sender) {
        CHECK_MPI(MPI_Waitall(ns, sr, MPI_STATUSES_IGNORE));
        ns = 0;
    }

    /* Sendrecv: everyone sends 64 ints to its partner and receives into 16. */
    {
        int out[64], in[16 + 8];
        for (k = 0; k < 64; k++)
            out[k] = k;
        for (k = 0; k < 24; k++)
            in[k] = -9;
        rc = MPI_Sendrecv(out, 64, MPI_INT, partner, TAG_SR, in, 16, MPI_INT, partner, TAG_SR,
                          MPI_COMM_WORLD, &st);
        CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
        for (k = 16; k < 24; k++)
            CHECK_EQ(in[k], -9);
    }

    /* Mprobe + Mrecv into a short buffer. */
    if (sender)
        CHECK_MPI(MPI_Isend(big, 5000, MPI_BYTE, partner, TAG_M, MPI_COMM_WORLD, &sr[ns++]));
    if (receiver) {
        MPI_Message m;
        CHECK_MPI(MPI_Mprobe(partner, TAG_M, MPI_COMM_WORLD, &m, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_M, 5000);
        memset(rb, 0xAB, SMALLBUF + GUARD);
        rc = MPI_Mrecv(rb, SMALLBUF, MPI_BYTE, &m, &st);
        CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
        CHECK_BYTES(rb + SMALLBUF, GUARD, 0xAB);
    }
    if (sender) {
        CHECK_MPI(MPI_Waitall(ns, sr, MPI_STATUSES_IGNORE));
        ns = 0;
    }

    /* The process continues: a large and a small message, both directions. */
    tu_fill(big, BIG, TU_SEED(tu_rank, partner, 99));
    CHECK_MPI(MPI_Isend(big, BIG, MPI_BYTE, partner, TAG_DONE, MPI_COMM_WORLD, &sr[0]));
    CHECK_MPI(MPI_Isend(big, 10, MPI_BYTE, partner, TAG_DONE, MPI_COMM_WORLD, &sr[1]));
    CHECK_MPI(MPI_Recv(rb, BIG, MPI_BYTE, partner, TAG_DONE, MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_BYTE, partner, TAG_DONE, BIG);
    CHECK_BUF(rb, BIG, TU_SEED(partner, tu_rank, 99));
    CHECK_MPI(MPI_Recv(rb, BIG, MPI_BYTE, partner, TAG_DONE, MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_BYTE, partner, TAG_DONE, 10);
    CHECK_MPI(MPI_Waitall(2, sr, MPI_STATUSES_IGNORE));

    free(big);
    free(rb);
    return tu_finish();
}
