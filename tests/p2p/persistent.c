/*
 * Persistent requests: MPI_Send_init, Bsend_init, Ssend_init, Rsend_init, Recv_init,
 * MPI_Start, MPI_Startall, reused many times with the buffer contents changed between
 * starts; a synchronous persistent send stays incomplete until the receive is started;
 * ready mode with the receive started before (announced by a message); a large message;
 * MPI_PROC_NULL; Startall of nothing; Request_free of inactive persistent requests.
 * Pairs (0,1), (2,3), ...; alone, a rank talks to itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_STD = 1, TAG_PING = 2, TAG_PONG = 3, TAG_SYNC = 4, TAG_BUF = 5, TAG_RDY = 6,
       TAG_READY = 7, TAG_BIG = 8, TAG_GO = 9 };
#define ITERS 100
#define BIG (1 << 20)

int main(int argc, char **argv)
{
    MPI_Status st, sts[4];
    MPI_Request req[4];
    int partner, a, b, it, k, go = 0, flag;
    int sbuf[64], rbuf[64];
    int low; /* the lower rank of the pair starts; alone, both roles */

    tu_init(&argc, &argv);
    partner = tu_partner();
    low = tu_rank <= partner;

    /* 1. Standard mode, both directions at once: each side has a Send_init and a Recv_init,
     * started together with Startall, ITERS times. */
    CHECK_MPI(MPI_Send_init(sbuf, 64, MPI_INT, partner, TAG_STD, MPI_COMM_WORLD, &req[0]));
    CHECK_MPI(MPI_Recv_init(rbuf, 64, MPI_INT, partner, TAG_STD, MPI_COMM_WORLD, &req[1]));
    for (it = 0; it < ITERS; it++) {
        for (k = 0; k < 64; k++) {
            sbuf[k] = tu_rank * 100000 + it * 100 + k;
            rbuf[k] = -1;
        }
        CHECK_MPI(MPI_Startall(2, req));
        CHECK_MPI(MPI_Waitall(2, req, sts));
        CHECK(req[0] != MPI_REQUEST_NULL && req[1] != MPI_REQUEST_NULL);
        CHECK_STATUS(sts[1], MPI_INT, partner, TAG_STD, 64);
        for (k = 0; k < 64; k++)
            CHECK_EQ(rbuf[k], partner * 100000 + it * 100 + k);
    }
    CHECK_MPI(MPI_Request_free(&req[0]));
    CHECK_MPI(MPI_Request_free(&req[1]));
    CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL);

    /* 2. Ping-pong with persistent requests started one at a time. */
    if (partner != tu_rank) {
        MPI_Request s, r;
        CHECK_MPI(MPI_Send_init(&a, 1, MPI_INT, partner, low ? TAG_PING : TAG_PONG,
                                MPI_COMM_WORLD, &s));
        CHECK_MPI(MPI_Recv_init(&b, 1, MPI_INT, partner, low ? TAG_PONG : TAG_PING,
                                MPI_COMM_WORLD, &r));
        for (it = 0; it < ITERS; it++) {
            if (low) {
                a = it;
                CHECK_MPI(MPI_Start(&s));
                CHECK_MPI(MPI_Start(&r));
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_EQ(b, it + 1000);
            } else {
                CHECK_MPI(MPI_Start(&r));
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_EQ(b, it);
                a = b + 1000;
                CHECK_MPI(MPI_Start(&s));
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
            }
            CHECK_STATUS(st, MPI_INT, partner, low ? TAG_PONG : TAG_PING, 1);
        }
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
    }

    /* 3. Ssend_init: incomplete until the receive is started. The receiver starts its receive
     * only after a "go" message sent after the sender tested. 20 rounds. */
    {
        MPI_Request s = MPI_REQUEST_NULL, r = MPI_REQUEST_NULL;
        if (low)
            CHECK_MPI(MPI_Ssend_init(&a, 1, MPI_INT, partner, TAG_SYNC, MPI_COMM_WORLD, &s));
        if (!low || partner == tu_rank)
            CHECK_MPI(MPI_Recv_init(&b, 1, MPI_INT, partner, TAG_SYNC, MPI_COMM_WORLD, &r));
        for (it = 0; it < 20; it++) {
            if (low) {
                a = 5000 + it;
                CHECK_MPI(MPI_Start(&s));
                for (k = 0; k < 5; k++) {
                    CHECK_MPI(MPI_Test(&s, &flag, MPI_STATUS_IGNORE));
                    CHECK_MSG(!flag, "persistent synchronous send completed before the receive "
                              "was started (round %d)", it);
                }
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
            }
            if (!low || partner == tu_rank) {
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Start(&r));
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_STATUS(st, MPI_INT, partner, TAG_SYNC, 1);
                CHECK_EQ(b, 5000 + it);
            }
            if (low)
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        }
        if (s != MPI_REQUEST_NULL)
            CHECK_MPI(MPI_Request_free(&s));
        if (r != MPI_REQUEST_NULL)
            CHECK_MPI(MPI_Request_free(&r));
    }

    /* 4. Bsend_init with an attached buffer, 30 rounds; Rsend_init with the receive started
     * first and announced, 30 rounds. The higher rank sends (alone: both). */
    {
        MPI_Request bs = MPI_REQUEST_NULL, rs = MPI_REQUEST_NULL, br = MPI_REQUEST_NULL,
                    rr = MPI_REQUEST_NULL;
        int bsize, dsize, bval = 0, rval = 0, bgot = 0, rgot = 0;
        void *bb, *db;
        int sends = !low || partner == tu_rank, recvs = low;
        CHECK_MPI(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &bsize));
        bsize = 2 * (bsize + MPI_BSEND_OVERHEAD);
        bb = tu_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(bb, bsize));
        if (sends) {
            CHECK_MPI(MPI_Bsend_init(&bval, 1, MPI_INT, partner, TAG_BUF, MPI_COMM_WORLD, &bs));
            CHECK_MPI(MPI_Rsend_init(&rval, 1, MPI_INT, partner, TAG_RDY, MPI_COMM_WORLD, &rs));
        }
        if (recvs) {
            CHECK_MPI(MPI_Recv_init(&bgot, 1, MPI_INT, partner, TAG_BUF, MPI_COMM_WORLD, &br));
            CHECK_MPI(MPI_Recv_init(&rgot, 1, MPI_INT, partner, TAG_RDY, MPI_COMM_WORLD, &rr));
        }
        for (it = 0; it < 30; it++) {
            if (recvs) {
                CHECK_MPI(MPI_Start(&rr));
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_READY, MPI_COMM_WORLD));
            }
            if (sends) {
                bval = 100 + it;
                rval = 200 + it;
                CHECK_MPI(MPI_Start(&bs));
                CHECK_MPI(MPI_Wait(&bs, MPI_STATUS_IGNORE)); /* local */
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_READY, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Start(&rs));
            }
            if (recvs) {
                CHECK_MPI(MPI_Start(&br));
                CHECK_MPI(MPI_Wait(&br, &st));
                CHECK_STATUS(st, MPI_INT, partner, TAG_BUF, 1);
                CHECK_EQ(bgot, 100 + it);
                CHECK_MPI(MPI_Wait(&rr, &st));
                CHECK_STATUS(st, MPI_INT, partner, TAG_RDY, 1);
                CHECK_EQ(rgot, 200 + it);
            }
            if (sends)
                CHECK_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
            /* the next round's Bsend must not find the buffer still full; the receiver
             * took this round's message, so its space is free */
        }
        if (sends) {
            CHECK_MPI(MPI_Request_free(&bs));
            CHECK_MPI(MPI_Request_free(&rs));
        }
        if (recvs) {
            CHECK_MPI(MPI_Request_free(&br));
            CHECK_MPI(MPI_Request_free(&rr));
        }
        CHECK_MPI(MPI_Buffer_detach(&db, &dsize));
        CHECK(db == bb);
        free(bb);
    }

    /* 5. A large persistent message, reused 5 times with new contents. */
    {
        unsigned char *s = tu_malloc(BIG), *r = tu_malloc(BIG);
        CHECK_MPI(MPI_Send_init(s, BIG, MPI_BYTE, partner, TAG_BIG, MPI_COMM_WORLD, &req[0]));
        CHECK_MPI(MPI_Recv_init(r, BIG, MPI_BYTE, partner, TAG_BIG, MPI_COMM_WORLD, &req[1]));
        for (it = 0; it < 5; it++) {
            tu_fill(s, BIG, TU_SEED(tu_rank, partner, it));
            CHECK_MPI(MPI_Start(&req[1]));
            CHECK_MPI(MPI_Start(&req[0]));
            CHECK_MPI(MPI_Waitall(2, req, sts));
            CHECK_STATUS(sts[1], MPI_BYTE, partner, TAG_BIG, BIG);
            CHECK_BUF(r, BIG, TU_SEED(partner, tu_rank, it));
        }
        CHECK_MPI(MPI_Request_free(&req[0]));
        CHECK_MPI(MPI_Request_free(&req[1]));
        free(s);
        free(r);
    }

    /* 6. PROC_NULL, and Startall of nothing. */
    {
        int x = 1, y = 77;
        CHECK_MPI(MPI_Send_init(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[0]));
        CHECK_MPI(MPI_Ssend_init(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[1]));
        CHECK_MPI(MPI_Rsend_init(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[2]));
        CHECK_MPI(MPI_Recv_init(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[3]));
        for (it = 0; it < 3; it++) {
            CHECK_MPI(MPI_Startall(4, req));
            CHECK_MPI(MPI_Waitall(4, req, sts));
            CHECK_EQ(y, 77); /* the status is checked in procnull_nb.c */
        }
        for (k = 0; k < 4; k++) {
            CHECK_MPI(MPI_Request_free(&req[k]));
            CHECK(req[k] == MPI_REQUEST_NULL);
        }
        CHECK_MPI(MPI_Startall(0, req));
    }

    return tu_finish();
}
