/*
 * Ready mode: MPI_Rsend and MPI_Irsend with the receive preposted, the sender learning that
 * from a message. Several receives with different tags are preposted and the ready sends go
 * in reverse order. Also ready sends to self. Pairs (0,1), (2,3), ...; any size >= 1.
 */
#include "util.h"

enum { TAG_READY = 1, TAG_BASE = 100 };

static const int sizes[] = {0, 8, 4000, 65536, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request req[NSIZES];
    unsigned char *bufs[NSIZES];
    int i, partner, token = 0, round;

    tu_init(&argc, &argv);
    partner = tu_partner();
    for (i = 0; i < NSIZES; i++)
        bufs[i] = tu_malloc(sizes[i]);

    /* Round 0: blocking Rsend; round 1: Irsend + Waitall. Roles alternate. With no partner
     * the process is both sides. */
    for (round = 0; round < 2; round++) {
        int receiver = (partner == tu_rank) || ((tu_rank < partner) == (round == 0));
        int sender = (partner == tu_rank) || !receiver;
        if (receiver) {
            for (i = 0; i < NSIZES; i++) {
                memset(bufs[i], 0, sizes[i]);
                CHECK_MPI(MPI_Irecv(bufs[i], sizes[i], MPI_BYTE, partner, TAG_BASE + i,
                                    MPI_COMM_WORLD, &req[i]));
            }
            if (partner != tu_rank)
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_READY, MPI_COMM_WORLD));
        }
        if (sender) {
            unsigned char *s[NSIZES];
            MPI_Request sreq[NSIZES];
            if (partner != tu_rank)
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_READY, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
            for (i = NSIZES - 1; i >= 0; i--) {
                s[i] = tu_malloc(sizes[i]);
                tu_fill(s[i], sizes[i], TU_SEED(tu_rank, partner, 10 * round + i));
                if (round == 0)
                    CHECK_MPI(MPI_Rsend(s[i], sizes[i], MPI_BYTE, partner, TAG_BASE + i,
                                        MPI_COMM_WORLD));
                else
                    CHECK_MPI(MPI_Irsend(s[i], sizes[i], MPI_BYTE, partner, TAG_BASE + i,
                                         MPI_COMM_WORLD, &sreq[i]));
            }
            if (round == 1)
                CHECK_MPI(MPI_Waitall(NSIZES, sreq, MPI_STATUSES_IGNORE));
            for (i = 0; i < NSIZES; i++)
                free(s[i]);
        }
        if (receiver) {
            for (i = 0; i < NSIZES; i++) {
                CHECK_MPI(MPI_Wait(&req[i], &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_BASE + i, sizes[i]);
                CHECK_BUF(bufs[i], sizes[i], TU_SEED(partner, tu_rank, 10 * round + i));
            }
        }
    }

    /* Typed ready send to self with a wildcard receive. */
    {
        double d[50], e[50];
        int k;
        MPI_Request r;
        for (k = 0; k < 50; k++) {
            d[k] = k * 1.25;
            e[k] = -1;
        }
        CHECK_MPI(MPI_Irecv(e, 50, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &r));
        CHECK_MPI(MPI_Rsend(d, 50, MPI_DOUBLE, 0, 77, MPI_COMM_SELF));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_STATUS(st, MPI_DOUBLE, 0, 77, 50);
        for (k = 0; k < 50; k++)
            CHECK(e[k] == k * 1.25);
    }

    for (i = 0; i < NSIZES; i++)
        free(bufs[i]);
    return tu_finish();
}
