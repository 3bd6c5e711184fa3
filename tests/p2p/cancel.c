/*
 * MPI_Cancel and MPI_Test_cancelled.
 *  - a pending receive (nothing will match it) is cancelled: completion reports cancelled,
 *    and a later message with that signature goes to a later receive;
 *  - the same for a receive with wildcards, completed with MPI_Test, and for a started
 *    persistent receive, which can be started again afterwards and then receives normally;
 *  - a send that no receive has matched yet (standard, synchronous and buffered, small and
 *    large): the implementation may or may not cancel it. Either way the outcome must be
 *    consistent: the sender tells the receiver what MPI_Test_cancelled said, then sends a
 *    "sentinel" with the same tag; by non-overtaking, the receiver gets the cancelled message
 *    before the sentinel if and only if the cancel failed (if cancelled, no part of it may
 *    arrive);
 *  - a normally completed receive is not cancelled.
 * Pairs (0,1), (2,3), ...: the odd rank sends; alone, a rank talks to itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_NEVER = 900, TAG_LATE = 901, TAG_P = 902, TAG_OUTCOME = 903, TAG_S = 910 };

static const int ssz[3] = {8, 65536, 1 << 20};

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request r;
    int partner, flag, v, w, i, mode, ncancelled = 0;
    int tester, sender;
    unsigned char *bbuf;
    void *dbuf;
    int bsize, dsize;

    tu_init(&argc, &argv);
    partner = tu_partner();
    tester = tu_rank % 2 == 0 || partner == tu_rank;
    sender = tu_rank % 2 == 1 || partner == tu_rank;

    /* 1. Cancel a receive nothing matches; complete with Wait. */
    CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, partner, TAG_NEVER, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK_EQ(flag, 1);

    /* ... with wildcards, completed with Test. */
    CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &r));
    CHECK_MPI(MPI_Cancel(&r));
    do {
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    } while (!flag);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK_EQ(flag, 1);

    /* 2. A cancelled receive does not consume the message sent afterwards. */
    if (tester) {
        CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, partner, TAG_LATE, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(flag, 1);
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&v, 0, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD));
    }
    if (sender) {
        w = 31337;
        if (partner != tu_rank)
            CHECK_MPI(MPI_Recv(&v, 0, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Isend(&w, 1, MPI_INT, partner, TAG_LATE, MPI_COMM_WORLD, &r));
    }
    if (tester) {
        v = 0;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_LATE, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_LATE, 1);
        CHECK_EQ(v, 31337);
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(flag, 0);
    }
    if (sender)
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    /* 3. Persistent receive: start, cancel, start again, receive. */
    if (tester) {
        MPI_Request p;
        CHECK_MPI(MPI_Recv_init(&v, 1, MPI_INT, partner, TAG_P, MPI_COMM_WORLD, &p));
        CHECK_MPI(MPI_Start(&p));
        CHECK_MPI(MPI_Cancel(&p));
        CHECK_MPI(MPI_Wait(&p, &st));
        CHECK(p != MPI_REQUEST_NULL);
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(flag, 1);
        CHECK_MPI(MPI_Start(&p));
        w = 777;
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&w, 1, MPI_INT, partner, TAG_P, MPI_COMM_WORLD));
        else
            CHECK_MPI(MPI_Send(&w, 1, MPI_INT, tu_rank, TAG_P, MPI_COMM_WORLD)); /* posted */
        CHECK_MPI(MPI_Wait(&p, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(flag, 0);
        CHECK_STATUS(st, MPI_INT, partner, TAG_P, 1);
        CHECK_EQ(v, partner != tu_rank ? 888 : 777);
        CHECK_MPI(MPI_Request_free(&p));
    }
    if (sender && partner != tu_rank) {
        /* The tester's receive is started again only after it saw the cancel, and we send
         * after getting its message, so our message cannot meet the cancelled receive. */
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_P, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_EQ(v, 777);
        w = 888;
        CHECK_MPI(MPI_Send(&w, 1, MPI_INT, partner, TAG_P, MPI_COMM_WORLD));
    }

    /* 4. Cancelling sends. Whether a send can still be cancelled is up to the
     * implementation (Open MPI never cancels sends; MPI 4.1 deprecates it), so the receive
     * is posted right after the cancel request and either takes the message (cancel failed)
     * or, by non-overtaking, the sentinel sent after it (cancel succeeded). */
    bsize = 0;
    for (i = 0; i < 3; i++) { /* room for all three buffered sends */
        int one;
        CHECK_MPI(MPI_Pack_size(ssz[i], MPI_BYTE, MPI_COMM_WORLD, &one));
        bsize += one + MPI_BSEND_OVERHEAD;
    }
    bbuf = tu_malloc(bsize);
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
    for (mode = 0; mode < 3; mode++) {
        for (i = 0; i < 3; i++) {
            int n = ssz[i], tag = TAG_S + 3 * mode + i, outcome = -1, note = 0, got;
            unsigned char *m = NULL, *rb = NULL;
            uint64_t seed = sender ? TU_SEED(tu_rank, partner, 10 * mode + i)
                                   : TU_SEED(partner, tu_rank, 10 * mode + i);
            MPI_Request rr = MPI_REQUEST_NULL, rs = MPI_REQUEST_NULL;
            if (sender) {
                m = tu_malloc(n);
                tu_fill(m, n, seed);
                if (mode == 0)
                    CHECK_MPI(MPI_Isend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                else if (mode == 1)
                    CHECK_MPI(MPI_Issend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                else
                    CHECK_MPI(MPI_Ibsend(m, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
                CHECK_MPI(MPI_Cancel(&r));
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Send(&note, 1, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD));
            }
            if (tester) {
                rb = tu_malloc(n);
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&note, 1, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Irecv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &rr));
            }
            if (sender) {
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_MPI(MPI_Test_cancelled(&st, &outcome));
                CHECK(outcome == 0 || outcome == 1);
                ncancelled += outcome;
                TU_LOG("mode %d size %d: send %s\n", mode, n,
                       outcome ? "cancelled" : "not cancelled");
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Send(&outcome, 1, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD));
                w = -1; /* sentinel: same tag, one int */
                CHECK_MPI(MPI_Isend(&w, 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &rs));
            }
            if (tester) {
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&outcome, 1, MPI_INT, partner, TAG_OUTCOME, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Wait(&rr, &st));
                CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
                if (!outcome) {
                    CHECK_MSG(got == n, "send reported not cancelled, but the receive got %d "
                              "bytes instead of %d", got, n);
                    CHECK_BUF(rb, n, seed);
                    CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
                    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
                }
                CHECK_MSG(got == (int)sizeof(int), "expected the sentinel (%d bytes), got %d "
                          "bytes: %s", (int)sizeof(int), got,
                          outcome ? "a cancelled send was delivered" : "wrong message");
                memcpy(&w, rb, sizeof w);
                CHECK_EQ(w, -1);
                free(rb);
            }
            if (sender) {
                CHECK_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
                free(m);
            }
        }
    }
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    free(bbuf);
    TU_LOG("%d of 9 sends were cancelled\n", ncancelled);

    return tu_finish();
}
