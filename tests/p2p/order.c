/*
 * Non-overtaking order.
 *  1. 1000 small messages with the same tag arrive in send order (blocking sends);
 *  2. two interleaved tag streams, received one stream after the other: each in order;
 *  3. one stream mixing 8 B, 16 KiB and 1 MiB messages, so that eager and rendezvous
 *     messages interleave: received in order, first with receives posted in advance, then
 *     with receives posted after everything was sent, then with ANY_TAG receives;
 *  4. receive order: of several posted receives that match a message, the first posted
 *     one gets it, including wildcard and specific receives mixed.
 * Pairs (0,1), (2,3), ...: the lower rank sends; alone, a rank sends to itself.
 * Any size >= 1.
 */
#include "util.h"

enum { TAG_SEQ = 1, TAG_A = 2, TAG_B = 3, TAG_MIX = 4, TAG_MIX2 = 5, TAG_POST = 6, TAG_GO = 7,
       TAG_ANYMIX = 8 };

#define NSEQ 1000
#define NIL 200
#define NMIX 24
#define MAXMIX (1 << 20)
static const int mixsz[NMIX] = {8, 16384, 1 << 20, 8, 8, 1 << 20, 16384, 16384, 8, 1 << 20,
                                1 << 20, 8, 16384, 8, 1 << 20, 16384, 8, 8, 8, 16384,
                                1 << 20, 16384, 8, 1 << 20};

static int sender, receiver, partner;

static void send_mix(int tag, unsigned char **bufs, MPI_Request *reqs)
{
    int i;
    for (i = 0; i < NMIX; i++) {
        tu_fill(bufs[i], mixsz[i], TU_SEED(tag, i, 3));
        CHECK_MPI(MPI_Isend(bufs[i], mixsz[i], MPI_BYTE, partner, tag, MPI_COMM_WORLD, &reqs[i]));
    }
}

static void check_mix(int tag, int i, MPI_Status *st, unsigned char *b)
{
    int n;
    CHECK_EQ(st->MPI_SOURCE, partner);
    CHECK_EQ(st->MPI_TAG, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &n));
    CHECK_MSG(n == mixsz[i], "message %d of the mixed stream has %d bytes, expected %d: "
              "messages overtook each other", i, n, mixsz[i]);
    CHECK_BUF(b, n, TU_SEED(tag, i, 3));
}

int main(int argc, char **argv)
{
    MPI_Status st;
    int i, v, go = 0;

    tu_init(&argc, &argv);
    partner = tu_partner();
    sender = tu_rank <= partner;
    receiver = tu_rank >= partner;

    /* 1. Same tag, blocking sends (alone: nonblocking sends to self). */
    if (partner != tu_rank) {
        for (i = 0; i < NSEQ; i++) {
            if (sender) {
                CHECK_MPI(MPI_Send(&i, 1, MPI_INT, partner, TAG_SEQ, MPI_COMM_WORLD));
            } else {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_SEQ, MPI_COMM_WORLD, &st));
                CHECK_MSG(v == i, "message %d arrived as number %d", v, i);
            }
        }
    } else {
        MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * NSEQ);
        int *vals = tu_malloc(sizeof(int) * NSEQ);
        for (i = 0; i < NSEQ; i++) {
            vals[i] = i;
            CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, tu_rank, TAG_SEQ, MPI_COMM_WORLD, &rq[i]));
        }
        for (i = 0; i < NSEQ; i++) {
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, tu_rank, TAG_SEQ, MPI_COMM_WORLD, &st));
            CHECK_MSG(v == i, "message %d arrived as number %d", v, i);
        }
        CHECK_MPI(MPI_Waitall(NSEQ, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(vals);
    }

    /* 2. Interleaved tags A, B, A, B, ...; the receiver takes all of B, then all of A. */
    {
        MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * NIL);
        int *vals = tu_malloc(sizeof(int) * NIL);
        if (sender)
            for (i = 0; i < NIL; i++) {
                vals[i] = i;
                CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, partner, i % 2 ? TAG_B : TAG_A,
                                    MPI_COMM_WORLD, &rq[i]));
            }
        if (receiver) {
            for (i = 1; i < NIL; i += 2) {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_B, MPI_COMM_WORLD, &st));
                CHECK_EQ(v, i);
            }
            for (i = 0; i < NIL; i += 2) {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_A, MPI_COMM_WORLD, &st));
                CHECK_EQ(v, i);
            }
        }
        if (sender)
            CHECK_MPI(MPI_Waitall(NIL, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(vals);
    }

    /* 3. Mixed sizes in one stream. */
    {
        unsigned char *sb[NMIX], *rb[NMIX];
        MPI_Request sr[NMIX], rr[NMIX];
        MPI_Status sts[NMIX];
        for (i = 0; i < NMIX; i++) {
            sb[i] = sender ? tu_malloc(mixsz[i]) : NULL;
            rb[i] = receiver ? tu_malloc(MAXMIX) : NULL;
        }
        /* (a) receives posted before the sends (announced by a message). */
        if (receiver) {
            for (i = 0; i < NMIX; i++)
                CHECK_MPI(MPI_Irecv(rb[i], MAXMIX, MPI_BYTE, partner, TAG_MIX, MPI_COMM_WORLD,
                                    &rr[i]));
            if (partner != tu_rank)
                CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_POST, MPI_COMM_WORLD));
        }
        if (sender) {
            if (partner != tu_rank)
                CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_POST, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
            send_mix(TAG_MIX, sb, sr);
        }
        if (receiver) {
            CHECK_MPI(MPI_Waitall(NMIX, rr, sts));
            for (i = 0; i < NMIX; i++)
                check_mix(TAG_MIX, i, &sts[i], rb[i]);
        }
        if (sender)
            CHECK_MPI(MPI_Waitall(NMIX, sr, MPI_STATUSES_IGNORE));

        /* (b) all sent before the receiver posts anything: the receiver waits for a message
         * sent after the stream, with another tag. */
        if (sender) {
            send_mix(TAG_MIX2, sb, sr);
            if (partner != tu_rank)
                CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
        }
        if (receiver) {
            if (partner != tu_rank)
                CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
            for (i = 0; i < NMIX; i++) {
                CHECK_MPI(MPI_Recv(rb[i], MAXMIX, MPI_BYTE, partner, TAG_MIX2, MPI_COMM_WORLD,
                                   &st));
                check_mix(TAG_MIX2, i, &st, rb[i]);
            }
        }
        if (sender)
            CHECK_MPI(MPI_Waitall(NMIX, sr, MPI_STATUSES_IGNORE));

        /* (c) received with ANY_TAG (only this stream is in flight to us). */
        if (sender)
            send_mix(TAG_ANYMIX, sb, sr);
        if (receiver)
            for (i = 0; i < NMIX; i++) {
                CHECK_MPI(MPI_Recv(rb[i], MAXMIX, MPI_BYTE, partner, MPI_ANY_TAG, MPI_COMM_WORLD,
                                   &st));
                check_mix(TAG_ANYMIX, i, &st, rb[i]);
            }
        if (sender)
            CHECK_MPI(MPI_Waitall(NMIX, sr, MPI_STATUSES_IGNORE));
        for (i = 0; i < NMIX; i++) {
            free(sb[i]);
            free(rb[i]);
        }
    }

    /* 4. Posted-receive order: R0 = (ANY_SOURCE, T), R1 = (partner, T), R2 = (ANY_SOURCE,
     * ANY_TAG), R3 = (partner, ANY_TAG); messages 0..3 with tag T must land in R0..R3. Done
     * twice: receives posted before the messages (announced), and after (unexpected). */
    {
        int round;
        for (round = 0; round < 2; round++) {
            MPI_Request rr[4], sr[4];
            int got[4], vals[4], tag = 40 + round;
            if (receiver && round == 0) {
                CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &rr[0]));
                CHECK_MPI(MPI_Irecv(&got[1], 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &rr[1]));
                CHECK_MPI(MPI_Irecv(&got[2], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                    &rr[2]));
                CHECK_MPI(MPI_Irecv(&got[3], 1, MPI_INT, partner, MPI_ANY_TAG, MPI_COMM_WORLD, &rr[3]));
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_POST, MPI_COMM_WORLD));
            }
            if (sender) {
                if (round == 0 && partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_POST, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                for (i = 0; i < 4; i++) {
                    vals[i] = 100 * round + i;
                    CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &sr[i]));
                }
                if (round == 1 && partner != tu_rank)
                    CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
            }
            if (receiver && round == 1) {
                if (partner != tu_rank)
                    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &rr[0]));
                CHECK_MPI(MPI_Irecv(&got[1], 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &rr[1]));
                CHECK_MPI(MPI_Irecv(&got[2], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                    &rr[2]));
                CHECK_MPI(MPI_Irecv(&got[3], 1, MPI_INT, partner, MPI_ANY_TAG, MPI_COMM_WORLD, &rr[3]));
            }
            if (receiver) {
                MPI_Status sts[4];
                CHECK_MPI(MPI_Waitall(4, rr, sts));
                for (i = 0; i < 4; i++) {
                    CHECK_MSG(got[i] == 100 * round + i, "round %d: receive %d got message %d",
                              round, i, got[i] - 100 * round);
                    CHECK_STATUS(sts[i], MPI_INT, partner, tag, 1);
                }
            }
            if (sender)
                CHECK_MPI(MPI_Waitall(4, sr, MPI_STATUSES_IGNORE));
        }
    }

    return tu_finish();
}
