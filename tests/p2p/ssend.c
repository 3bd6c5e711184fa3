/*
 * Synchronous mode: MPI_Issend must not complete before the matching receive is posted, and
 * a probe of the message is not a receive. The ordering is forced by messages, not by time:
 * the receiver only posts the receive after a "go" message that the sender sends after
 * testing. Also blocking MPI_Ssend with the receive preposted and not, and MPI_Issend to self.
 * Pairs (0,1), (2,3), ...; a rank without a partner does only the self part. Any size >= 1.
 */
#include "util.h"

enum { TAG_DATA = 10, TAG_GO = 11, TAG_PROBED = 12, TAG_GO2 = 13, TAG_POSTED = 14 };

static const int sizes[] = {0, 8, 1000, 100000, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Test the request a number of times; it must stay incomplete. */
static void expect_pending(MPI_Request *req, int rounds)
{
    int k, flag;
    for (k = 0; k < rounds; k++) {
        CHECK_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        CHECK_MSG(!flag, "synchronous send completed before a matching receive (round %d)", k);
        CHECK(*req != MPI_REQUEST_NULL);
        if (k % 8 == 7)
            tu_sleep_ms(1);
    }
}

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request req;
    unsigned char *buf;
    int i, partner, token = 0, flag;

    tu_init(&argc, &argv);
    partner = tu_partner();
    buf = tu_malloc(1 << 20);

    if (partner != tu_rank) {
        int sender = tu_rank < partner;
        for (i = 0; i < NSIZES; i++) {
            int n = sizes[i];
            if (sender) {
                tu_fill(buf, n, TU_SEED(tu_rank, partner, i));
                CHECK_MPI(MPI_Issend(buf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &req));
                expect_pending(&req, 40);
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
                /* The receiver probes the message (that is not a receive) and tells us. */
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_PROBED, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                expect_pending(&req, 20);
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_GO2, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Wait(&req, &st));
                CHECK(req == MPI_REQUEST_NULL);
            } else {
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Probe(partner, TAG_DATA, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, n);
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_PROBED, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_GO2, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                memset(buf, 0, n);
                CHECK_MPI(MPI_Recv(buf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, n);
                CHECK_BUF(buf, n, TU_SEED(partner, tu_rank, i));
            }
        }

        /* Blocking Ssend, receive not yet posted (the receiver gets there when it gets
         * there), then with the receive preposted and announced. Roles swap. */
        for (i = 0; i < NSIZES; i++) {
            int n = sizes[i];
            if (!sender) {
                tu_fill(buf, n, TU_SEED(tu_rank, partner, 20 + i));
                CHECK_MPI(MPI_Ssend(buf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_POSTED, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                tu_fill(buf, n, TU_SEED(tu_rank, partner, 40 + i));
                CHECK_MPI(MPI_Ssend(buf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD));
            } else {
                unsigned char *b2 = tu_malloc(n);
                CHECK_MPI(MPI_Recv(buf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, n);
                CHECK_BUF(buf, n, TU_SEED(partner, tu_rank, 20 + i));
                CHECK_MPI(MPI_Irecv(b2, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &req));
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_POSTED, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Wait(&req, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, n);
                CHECK_BUF(b2, n, TU_SEED(partner, tu_rank, 40 + i));
                free(b2);
            }
        }
    }

    /* Self: Issend to self stays pending until this process posts the receive. */
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        unsigned char *r = tu_malloc(n);
        tu_fill(buf, n, TU_SEED(tu_rank, tu_rank, 60 + i));
        CHECK_MPI(MPI_Issend(buf, n, MPI_BYTE, tu_rank, TAG_DATA + 100, MPI_COMM_WORLD, &req));
        expect_pending(&req, 20);
        CHECK_MPI(MPI_Iprobe(tu_rank, TAG_DATA + 100, MPI_COMM_WORLD, &flag, &st));
        if (flag)
            CHECK_STATUS(st, MPI_BYTE, tu_rank, TAG_DATA + 100, n);
        expect_pending(&req, 5);
        CHECK_MPI(MPI_Recv(r, n, MPI_BYTE, tu_rank, TAG_DATA + 100, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, tu_rank, TAG_DATA + 100, n);
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CHECK_BUF(r, n, TU_SEED(tu_rank, tu_rank, 60 + i));
        free(r);
    }

    /* Self: blocking Ssend completes when the receive was posted before. */
    {
        int v = 42, w = 0;
        CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, tu_rank, TAG_DATA + 101, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Ssend(&v, 1, MPI_INT, tu_rank, TAG_DATA + 101, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&req, &st));
        CHECK_STATUS(st, MPI_INT, tu_rank, TAG_DATA + 101, 1);
        CHECK_EQ(w, 42);
    }

    free(buf);
    return tu_finish();
}
