/*
 * Matched probe and receive: MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv.
 *  - MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC; receiving it yields the PROC_NULL status and
 *    sets the handle to MPI_MESSAGE_NULL;
 *  - Improbe says "no" when nothing matches;
 *  - a matched message is removed from matching: of two messages with the same tag, after
 *    Mprobe took the first, (I)probe and a second Mprobe see the second one;
 *  - matched messages can be received in any order, with Mrecv or Imrecv, small or large,
 *    empty, and with MPI_ANY_TAG;
 *  - rank 0 matches one message from every process with wildcards.
 * Pairs (0,1), (2,3), ...: the odd rank sends; alone, a rank sends to itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_A = 5, TAG_ALL = 600, TAG_NEVER = 4343 };

static const int sz[5] = {100, 200, 1 << 20, 0, 3000};

int main(int argc, char **argv)
{
    MPI_Status st, st2;
    MPI_Message m1, m2, m3;
    MPI_Request r, sreq[5];
    unsigned char *sb[5], *rb[5];
    int partner, flag, n, i;

    tu_init(&argc, &argv);
    partner = tu_partner();

    /* PROC_NULL */
    m1 = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &m1, &st));
    CHECK(m1 == MPI_MESSAGE_NO_PROC);
    CHECK_PROC_NULL_STATUS(st, MPI_BYTE);
    memset(&st, 0x33, sizeof st);
    CHECK_MPI(MPI_Mrecv(NULL, 0, MPI_BYTE, &m1, &st));
    CHECK(m1 == MPI_MESSAGE_NULL);
    CHECK_PROC_NULL_STATUS(st, MPI_BYTE);
    flag = 0;
    m1 = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m1, &st));
    CHECK_EQ(flag, 1);
    CHECK(m1 == MPI_MESSAGE_NO_PROC);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    {
        int x = 12345;
        CHECK_MPI(MPI_Imrecv(&x, 1, MPI_INT, &m1, &r));
        CHECK(m1 == MPI_MESSAGE_NULL);
        memset(&st, 0x33, sizeof st);
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_PROC_NULL_STATUS(st, MPI_INT);
        CHECK_EQ(x, 12345); /* untouched */
    }

    /* Nothing matches. */
    flag = -1;
    CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &flag, &m1, &st));
    CHECK_EQ(flag, 0);

    /* Sender: A (100 bytes) and B (200 bytes) with TAG_A, C (1 MiB) with TAG_A + 1,
     * D (empty) with TAG_A + 2, E (3000) with TAG_A + 3. */
    if (tu_rank % 2 == 1 || partner == tu_rank) {
        for (i = 0; i < 5; i++) {
            int tag = i < 2 ? TAG_A : TAG_A + i - 1;
            sb[i] = tu_malloc(sz[i]);
            tu_fill(sb[i], sz[i], TU_SEED(tu_rank, partner, i));
            CHECK_MPI(MPI_Isend(sb[i], sz[i], MPI_BYTE, partner, tag, MPI_COMM_WORLD, &sreq[i]));
        }
    }
    if (tu_rank % 2 == 0 || partner == tu_rank) {
        for (i = 0; i < 5; i++) {
            rb[i] = tu_malloc(sz[i]);
            memset(rb[i], 0, sz[i]);
        }
        CHECK_MPI(MPI_Mprobe(partner, TAG_A, MPI_COMM_WORLD, &m1, &st));
        CHECK(m1 != MPI_MESSAGE_NULL && m1 != MPI_MESSAGE_NO_PROC);
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A, sz[0]);
        /* A is taken: probing the same source and tag now finds B. */
        do {
            CHECK_MPI(MPI_Iprobe(partner, TAG_A, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A, sz[1]);
        do {
            CHECK_MPI(MPI_Improbe(partner, TAG_A, MPI_COMM_WORLD, &flag, &m2, &st));
        } while (!flag);
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A, sz[1]);
        CHECK(m2 != m1);
        /* Nothing with TAG_A is left to match. */
        CHECK_MPI(MPI_Improbe(partner, TAG_A, MPI_COMM_WORLD, &flag, &m3, &st));
        CHECK_EQ(flag, 0);
        /* The large one, with ANY_TAG: the earliest remaining message is C. */
        CHECK_MPI(MPI_Mprobe(partner, MPI_ANY_TAG, MPI_COMM_WORLD, &m3, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A + 1, sz[2]);

        /* Receive in reverse order: B, then C (nonblocking), then A. */
        CHECK_MPI(MPI_Mrecv(rb[1], sz[1], MPI_BYTE, &m2, &st));
        CHECK(m2 == MPI_MESSAGE_NULL);
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A, sz[1]);
        CHECK_BUF(rb[1], sz[1], TU_SEED(partner, tu_rank, 1));
        CHECK_MPI(MPI_Imrecv(rb[2], sz[2], MPI_BYTE, &m3, &r));
        CHECK(m3 == MPI_MESSAGE_NULL);
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A + 1, sz[2]);
        CHECK_BUF(rb[2], sz[2], TU_SEED(partner, tu_rank, 2));
        CHECK_MPI(MPI_Mrecv(rb[0], sz[0], MPI_BYTE, &m1, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A, sz[0]);
        CHECK_BUF(rb[0], sz[0], TU_SEED(partner, tu_rank, 0));

        /* The empty message, matched with ANY_TAG, received into no buffer. */
        CHECK_MPI(MPI_Mprobe(partner, MPI_ANY_TAG, MPI_COMM_WORLD, &m1, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A + 2, 0);
        CHECK_MPI(MPI_Mrecv(NULL, 0, MPI_BYTE, &m1, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, TAG_A + 2, 0);

        /* E, received with a typed buffer larger than the message. */
        CHECK_MPI(MPI_Mprobe(partner, TAG_A + 3, MPI_COMM_WORLD, &m1, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
        CHECK_EQ(n, sz[4] / (int)sizeof(int));
        {
            int *ib = tu_malloc(sizeof(int) * 2 * n);
            CHECK_MPI(MPI_Imrecv(ib, 2 * n, MPI_INT, &m1, &r));
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK_STATUS(st, MPI_INT, partner, TAG_A + 3, n);
            CHECK_BUF(ib, sz[4], TU_SEED(partner, tu_rank, 4));
            free(ib);
        }
        for (i = 0; i < 5; i++)
            free(rb[i]);
    }
    if (tu_rank % 2 == 1 || partner == tu_rank) {
        CHECK_MPI(MPI_Waitall(5, sreq, MPI_STATUSES_IGNORE));
        for (i = 0; i < 5; i++)
            free(sb[i]);
    }

    /* Everyone sends to rank 0; rank 0 matches with wildcards, collecting all the message
     * handles first, then receives them in reverse order. */
    {
        int mysz = 8 + 100 * tu_rank, k;
        unsigned char *mine = tu_malloc(mysz);
        tu_fill(mine, mysz, TU_SEED(tu_rank, 0, 88));
        CHECK_MPI(MPI_Isend(mine, mysz, MPI_BYTE, 0, TAG_ALL, MPI_COMM_WORLD, &r));
        if (tu_rank == 0) {
            MPI_Message *msgs = tu_malloc(sizeof(MPI_Message) * tu_size);
            int *src = tu_malloc(sizeof(int) * tu_size), *seen = tu_malloc(sizeof(int) * tu_size);
            memset(seen, 0, sizeof(int) * tu_size);
            for (k = 0; k < tu_size; k++) {
                if (k % 2)
                    CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msgs[k], &st));
                else
                    do {
                        CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, TAG_ALL, MPI_COMM_WORLD, &flag,
                                              &msgs[k], &st));
                    } while (!flag);
                src[k] = st.MPI_SOURCE;
                CHECK(src[k] >= 0 && src[k] < tu_size);
                CHECK_MSG(!seen[src[k]], "message from %d matched twice", src[k]);
                seen[src[k]] = 1;
                CHECK_STATUS(st, MPI_BYTE, src[k], TAG_ALL, 8 + 100 * src[k]);
            }
            for (k = tu_size - 1; k >= 0; k--) {
                int len = 8 + 100 * src[k];
                unsigned char *b = tu_malloc(len);
                CHECK_MPI(MPI_Mrecv(b, len, MPI_BYTE, &msgs[k], &st2));
                CHECK(msgs[k] == MPI_MESSAGE_NULL);
                CHECK_STATUS(st2, MPI_BYTE, src[k], TAG_ALL, len);
                CHECK_BUF(b, len, TU_SEED(src[k], 0, 88));
                free(b);
            }
            free(msgs);
            free(src);
            free(seen);
        }
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        free(mine);
    }

    return tu_finish();
}
