/*
 * Cancelling sends (MPI-4.1 3.8.4): "either the cancellation succeeds, or the communication
 * succeeds, but not both". Protean cancels every send whose message the receiver has not
 * matched (it asks the receiver to take it out of its unexpected queue), so:
 *  1. unmatched sends are cancelled: standard, synchronous and buffered, nonblocking and
 *     persistent (restarted afterwards and then delivered), 8 B, 64 KiB and 1 MiB, to the
 *     partner and to oneself; MPI_Wait returns with MPI_Test_cancelled true and the message
 *     never arrives (the receiver gets the next message with that tag instead);
 *  2. a send to oneself is settled by MPI_Cancel itself: MPI_Request_get_status right after
 *     it says complete and cancelled (mpi4py's testProbeCancel: Issend, Probe, Cancel);
 *  3. sends whose message was received (standard, ready, synchronous) are not cancelled, and
 *     MPI_Wait still returns;
 *  4. MPI_Request_free right after MPI_Cancel: the message is not delivered.
 * (The checks under the quirk no_send_cancel say what an implementation that never cancels
 * sends would have to do instead; MPICH and Open MPI are not run, see the manifest.)
 * Pairs (0,1), (2,3), ...: the odd rank sends; a rank without partner talks to itself.
 */
#include "util.h"

enum { TAG_GO = 800, TAG_ACK = 801, TAG_M = 820 };

static const int sizes[3] = {8, 65536, 1 << 20};
static int partner, sender, receiver, self;

/* Receiver side of case 1: after the sender's outcome arrives, the next message with `tag`
 * is the sentinel (4 bytes, -1) if the send was cancelled, else the message then the
 * sentinel. */
static void expect_after_cancel(int tag, int n, uint64_t seed, unsigned char *rb)
{
    int outcome, got, w;
    MPI_Status st;
    CHECK_MPI(MPI_Recv(&outcome, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (!outcome) {
        CHECK_MSG(tu_quirk("no_send_cancel"), "an unmatched send of %d bytes was not cancelled",
                  n);
        CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, tag, n);
        CHECK_BUF(rb, n, seed);
    }
    CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
    CHECK_MSG(got == (int)sizeof(int), "expected the 4-byte sentinel, got %d bytes%s", got,
              outcome ? " (a cancelled send was delivered)" : "");
    memcpy(&w, rb, sizeof w);
    CHECK_EQ(w, -1);
}

/* Sender side of case 1, after MPI_Cancel on `r`: complete it, tell the receiver the outcome,
 * send the sentinel. For a send to oneself, check it here. Returns the outcome. */
static int finish_cancelled(MPI_Request *r, int tag, int n, uint64_t seed, unsigned char *rb)
{
    MPI_Status st;
    int outcome, w = -1;
    CHECK_MPI(MPI_Wait(r, &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &outcome));
    if (!self) {
        CHECK_MPI(MPI_Send(&outcome, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(&w, 1, MPI_INT, partner, tag, MPI_COMM_WORLD));
        return outcome;
    }
    /* Alone: the sentinel is received into a posted receive. */
    {
        MPI_Request rr;
        int got;
        if (!outcome) {
            CHECK(tu_quirk("no_send_cancel"));
            CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, tu_rank, tag, MPI_COMM_WORLD, &st));
            CHECK_BUF(rb, n, seed);
        }
        CHECK_MPI(MPI_Irecv(rb, n, MPI_BYTE, tu_rank, tag, MPI_COMM_WORLD, &rr));
        CHECK_MPI(MPI_Send(&w, 1, MPI_INT, tu_rank, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&rr, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
        CHECK_EQ(got, (int)sizeof(int));
    }
    return outcome;
}

int main(int argc, char **argv)
{
    MPI_Request r;
    MPI_Status st;
    unsigned char *m, *rb, *bbuf;
    int mode, i, flag, bsize, tag = TAG_M, pers;
    void *dbuf;
    int dsize;

    tu_init(&argc, &argv);
    partner = tu_partner();
    self = partner == tu_rank;
    sender = tu_rank % 2 == 1 || self;
    receiver = tu_rank % 2 == 0 || self;
    m = tu_malloc(sizes[2]);
    rb = tu_malloc(sizes[2]);
    /* Room for every size at once: a buffered message may still be on its way when the next
     * one is started. */
    for (i = 0, bsize = 0; i < 3; i++) {
        int one;
        CHECK_MPI(MPI_Pack_size(sizes[i], MPI_BYTE, MPI_COMM_WORLD, &one));
        bsize += 2 * (one + MPI_BSEND_OVERHEAD);
    }
    bbuf = tu_malloc(bsize);
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));

    /* 1. Unmatched sends: mode 0 standard, 1 synchronous, 2 buffered; nonblocking, then
     * persistent (started, cancelled, started again and delivered). */
    for (pers = 0; pers < 2; pers++) {
        for (mode = 0; mode < 3; mode++) {
            for (i = 0; i < 3; i++, tag++) {
                int n = sizes[i];
                uint64_t seed = TU_SEED(tu_rank, partner, tag);
                if (sender) {
                    tu_fill(m, n, seed);
                    if (!pers) {
                        if (mode == 0)
                            CHECK_MPI(MPI_Isend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                        else if (mode == 1)
                            CHECK_MPI(MPI_Issend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                        else
                            CHECK_MPI(MPI_Ibsend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                    } else {
                        if (mode == 0)
                            CHECK_MPI(MPI_Send_init(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD,
                                                    &r));
                        else if (mode == 1)
                            CHECK_MPI(MPI_Ssend_init(m, n, MPI_BYTE, partner, tag,
                                                     MPI_COMM_WORLD, &r));
                        else
                            CHECK_MPI(MPI_Bsend_init(m, n, MPI_BYTE, partner, tag,
                                                     MPI_COMM_WORLD, &r));
                        CHECK_MPI(MPI_Start(&r));
                    }
                    CHECK_MPI(MPI_Cancel(&r));
                    finish_cancelled(&r, tag, n, seed, rb);
                    if (pers) {
                        /* Started again, the request sends normally. */
                        CHECK(r != MPI_REQUEST_NULL);
                        CHECK_MPI(MPI_Start(&r));
                        if (self) {
                            CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, tu_rank, tag, MPI_COMM_WORLD, &st));
                            CHECK_BUF(rb, n, seed);
                        }
                        CHECK_MPI(MPI_Wait(&r, &st));
                        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
                        CHECK_EQ(flag, 0);
                        CHECK_MPI(MPI_Request_free(&r));
                    }
                }
                if (receiver && !self) {
                    expect_after_cancel(tag, n, TU_SEED(partner, tu_rank, tag), rb);
                    if (pers) {
                        CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
                        CHECK_STATUS(st, MPI_BYTE, partner, tag, n);
                        CHECK_BUF(rb, n, TU_SEED(partner, tu_rank, tag));
                    }
                }
            }
        }
    }

    /* 2. To oneself: MPI_Cancel settles it (mpi4py's testProbeCancel and testCancel). */
    for (mode = 0; mode < 2; mode++) {
        int x = 5;
        if (mode == 0)
            CHECK_MPI(MPI_Issend(NULL, 0, MPI_BYTE, 0, 123, MPI_COMM_SELF, &r));
        else
            CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, 0, 123, MPI_COMM_SELF, &r));
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &st));
        CHECK_EQ(st.MPI_TAG, 123);
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        if (!tu_quirk("no_send_cancel")) {
            CHECK_EQ(flag, 1);
            CHECK_MPI(MPI_Test_cancelled(&st, &flag));
            CHECK_EQ(flag, 1);
            CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 123, MPI_COMM_SELF, &flag, &st));
            CHECK_EQ(flag, 0);
            CHECK_MPI(MPI_Request_free(&r));
        } else {
            CHECK_MPI(MPI_Recv(&x, mode, MPI_INT, 0, 123, MPI_COMM_SELF, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
    }

    /* 3. Matched sends are not cancelled: the receiver receives the whole message, then
     * acknowledges; the sender cancels only after the acknowledgement. Ready mode sends into
     * a receive posted before a GO message. */
    for (mode = 0; mode < 3; mode++) {
        for (i = 0; i < 3; i++, tag++) {
            int n = sizes[i], ack = 0;
            uint64_t seed = TU_SEED(tu_rank, partner, tag);
            MPI_Request rr = MPI_REQUEST_NULL;
            if (receiver)
                CHECK_MPI(MPI_Irecv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &rr));
            if (receiver && !self)
                CHECK_MPI(MPI_Send(&ack, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
            if (sender) {
                if (!self)
                    CHECK_MPI(MPI_Recv(&ack, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                tu_fill(m, n, seed);
                if (mode == 0)
                    CHECK_MPI(MPI_Isend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                else if (mode == 1)
                    CHECK_MPI(MPI_Irsend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                else
                    CHECK_MPI(MPI_Issend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
            }
            if (receiver) {
                CHECK_MPI(MPI_Wait(&rr, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, tag, n);
                CHECK_BUF(rb, n, TU_SEED(partner, tu_rank, tag));
                if (!self)
                    CHECK_MPI(MPI_Send(&ack, 0, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD));
            }
            if (sender) {
                if (!self)
                    CHECK_MPI(MPI_Recv(&ack, 0, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Cancel(&r));
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_MPI(MPI_Test_cancelled(&st, &flag));
                CHECK_MSG(flag == 0, "a received message's send (mode %d, %d bytes) reported "
                          "cancelled", mode, n);
            }
        }
    }

    /* 4. Cancel and free at once: the message does not arrive (the receiver gets the
     * sentinel sent after it with the same tag). */
    if (!tu_quirk("no_send_cancel")) {
        int w = -1, got;
        tag++;
        MPI_Request rr = MPI_REQUEST_NULL;
        if (sender) {
            CHECK_MPI(MPI_Isend(m, 8, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Cancel(&r));
            CHECK_MPI(MPI_Request_free(&r));
            CHECK(r == MPI_REQUEST_NULL);
            if (self) /* the sentinel's receive is posted before it is sent */
                CHECK_MPI(MPI_Irecv(rb, 8, MPI_BYTE, tu_rank, tag, MPI_COMM_WORLD, &rr));
            else
                CHECK_MPI(MPI_Send(&w, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(&w, 1, MPI_INT, partner, tag, MPI_COMM_WORLD));
        }
        if (receiver) {
            if (!self) {
                CHECK_MPI(MPI_Recv(&w, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Irecv(rb, 8, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &rr));
            }
            CHECK_MPI(MPI_Wait(&rr, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
            CHECK_EQ(got, (int)sizeof(int));
        }
    }

    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    free(bbuf);
    free(m);
    free(rb);
    return tu_finish();
}
