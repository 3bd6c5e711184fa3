/*
 * MPI_Request_get_status and MPI_Request_free.
 *  - Request_get_status reports completion without freeing the request: flag false while
 *    the message has not been sent, then true with the right status, and the request can
 *    still be waited on (and gives the same status);
 *  - on MPI_REQUEST_NULL it returns flag true and an empty status;
 *  - Request_free on an active send: the message is still delivered (small and large);
 *  - Request_free on an active receive: the receive still matches the first message, so a
 *    later receive with the same signature gets the second one;
 *  - Request_free on an inactive persistent request.
 * Pairs (0,1), (2,3), ...: the even rank tests, the odd one answers; alone, a rank plays
 * both sides with messages to itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_GO = 1, TAG_DATA = 2, TAG_FREED = 3, TAG_ACK = 4, TAG_RFREE = 5 };
#define BIG (1 << 20)

int main(int argc, char **argv)
{
    MPI_Status st, st2;
    MPI_Request r, q;
    int partner, flag, go = 1, v, w, i;
    int tester, helper; /* roles of this process */
    unsigned char *big;

    tu_init(&argc, &argv);
    partner = tu_partner();
    tester = tu_rank % 2 == 0 || partner == tu_rank;
    helper = tu_rank % 2 == 1 || partner == tu_rank;
    big = tu_malloc(BIG);

    /* Null request. */
    memset(&st, 0x44, sizeof st);
    flag = 0;
    CHECK_MPI(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EMPTY_STATUS(st);

    /* 1. get_status on a pending receive, then on a completed one. The helper sends the data
     * only after the "go" message. */
    if (tester) {
        v = 0;
        CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, partner, TAG_DATA, MPI_COMM_WORLD, &r));
        for (i = 0; i < 10; i++) {
            CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
            CHECK_EQ(flag, 0);
            CHECK(r != MPI_REQUEST_NULL);
        }
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
    }
    if (helper) {
        if (partner != tu_rank)
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        w = 4711;
        CHECK_MPI(MPI_Send(&w, 1, MPI_INT, partner, TAG_DATA, MPI_COMM_WORLD));
    }
    if (tester) {
        do {
            CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        } while (!flag);
        CHECK(r != MPI_REQUEST_NULL); /* not freed */
        CHECK_STATUS(st, MPI_INT, partner, TAG_DATA, 1);
        CHECK_EQ(v, 4711);
        CHECK_MPI(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(flag, 1);
        CHECK_MPI(MPI_Wait(&r, &st2));
        CHECK(r == MPI_REQUEST_NULL);
        CHECK_STATUS(st2, MPI_INT, partner, TAG_DATA, 1);
    }

    /* 2. Request_free on active sends (small, then large). The receiver gets both and then
     * acknowledges, which tells the sender its buffers are free again. */
    if (helper) {
        w = 99;
        tu_fill(big, BIG, TU_SEED(tu_rank, partner, 1));
        CHECK_MPI(MPI_Isend(&w, 1, MPI_INT, partner, TAG_FREED, MPI_COMM_WORLD, &q));
        CHECK_MPI(MPI_Request_free(&q));
        CHECK(q == MPI_REQUEST_NULL);
        CHECK_MPI(MPI_Isend(big, BIG, MPI_BYTE, partner, TAG_FREED, MPI_COMM_WORLD, &q));
        CHECK_MPI(MPI_Request_free(&q));
        CHECK(q == MPI_REQUEST_NULL);
    }
    if (tester) {
        unsigned char *rb = tu_malloc(BIG);
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_FREED, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_FREED, 1);
        CHECK_EQ(v, 99);
        CHECK_MPI(MPI_Recv(rb, BIG, MPI_BYTE, partner, TAG_FREED, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_FREED, BIG);
        CHECK_BUF(rb, BIG, TU_SEED(partner, tu_rank, 1));
        free(rb);
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD));
    }
    if (helper && partner != tu_rank)
        CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));

    /* 3. Request_free on an active receive. It was posted first, so it matches the first
     * message; the second receive, with the same source and tag, gets the second one. */
    if (tester) {
        static int lost; /* written by the freed receive at some point; never read */
        CHECK_MPI(MPI_Irecv(&lost, 1, MPI_INT, partner, TAG_RFREE, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL);
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
    }
    if (helper) {
        int m[2] = {1, 2};
        if (partner != tu_rank)
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Isend(&m[0], 1, MPI_INT, partner, TAG_RFREE, MPI_COMM_WORLD, &q));
        CHECK_MPI(MPI_Request_free(&q));
        CHECK_MPI(MPI_Isend(&m[1], 1, MPI_INT, partner, TAG_RFREE, MPI_COMM_WORLD, &q));
        if (partner != tu_rank)
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }
    if (tester) {
        v = 0;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, TAG_RFREE, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_RFREE, 1);
        CHECK_MSG(v == 2, "got message %d: the freed receive did not take the first one", v);
        if (partner == tu_rank)
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }

    /* 4. Persistent requests: free while inactive, before and after use. */
    {
        MPI_Request p1, p2;
        int x = 5, y = 0;
        CHECK_MPI(MPI_Send_init(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &p1));
        CHECK_MPI(MPI_Request_free(&p1));
        CHECK(p1 == MPI_REQUEST_NULL);
        CHECK_MPI(MPI_Recv_init(&y, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &p1));
        CHECK_MPI(MPI_Send_init(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &p2));
        CHECK_MPI(MPI_Start(&p1));
        CHECK_MPI(MPI_Start(&p2));
        CHECK_MPI(MPI_Request_get_status(p2, &flag, MPI_STATUS_IGNORE)); /* either way */
        CHECK_MPI(MPI_Wait(&p1, &st));
        CHECK_MPI(MPI_Wait(&p2, MPI_STATUS_IGNORE));
        CHECK_STATUS(st, MPI_INT, 0, 9, 1);
        CHECK_EQ(y, 5);
        CHECK_MPI(MPI_Request_get_status(p1, &flag, &st));
        CHECK_EQ(flag, 1);
        CHECK_EMPTY_STATUS(st);
        CHECK_MPI(MPI_Request_free(&p1));
        CHECK_MPI(MPI_Request_free(&p2));
        CHECK(p1 == MPI_REQUEST_NULL && p2 == MPI_REQUEST_NULL);
    }

    free(big);
    return tu_finish();
}
