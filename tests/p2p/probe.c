/*
 * MPI_Probe and MPI_Iprobe: a probe reports source, tag and size of the message that a
 * receive with the same arguments would get, and does not consume it; with MPI_ANY_TAG it
 * sees the earliest message of that source; with MPI_PROC_NULL it returns at once with the
 * PROC_NULL status; Iprobe says "no" when no message can match. Also probing messages to
 * rank 0 from everyone with MPI_ANY_SOURCE and receiving exactly what was probed.
 * Pairs (0,1), (2,3), ...: the odd rank sends, the even rank probes; alone, a rank sends to
 * itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_NEVER = 4242, TAG_ALL = 500 };

static const int sz[3] = {10, 1000, 1 << 20};

int main(int argc, char **argv)
{
    MPI_Status st, st2;
    MPI_Request sreq[3];
    unsigned char *sb[3], *rb;
    int partner, flag, n, i;

    tu_init(&argc, &argv);
    partner = tu_partner();
    rb = tu_malloc(1 << 20);

    /* PROC_NULL */
    memset(&st, 0x55, sizeof st);
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_BYTE);
    memset(&st, 0x55, sizeof st);
    flag = 0;
    CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);

    /* Nothing is ever sent with TAG_NEVER. */
    flag = -1;
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Iprobe(0, TAG_NEVER, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(flag, 0);

    /* Senders: three messages with tags 1, 2, 3 (the third one large). */
    if (tu_rank % 2 == 1 || partner == tu_rank) {
        for (i = 0; i < 3; i++) {
            sb[i] = tu_malloc(sz[i]);
            tu_fill(sb[i], sz[i], TU_SEED(tu_rank, partner, i));
            CHECK_MPI(MPI_Isend(sb[i], sz[i], MPI_BYTE, partner, i + 1, MPI_COMM_WORLD,
                                &sreq[i]));
        }
    }
    if (tu_rank % 2 == 0 || partner == tu_rank) {
        /* Probe a specific tag out of order; probing twice gives the same answer. */
        CHECK_MPI(MPI_Probe(partner, 2, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, 2, sz[1]);
        CHECK_MPI(MPI_Probe(partner, 2, MPI_COMM_WORLD, &st2));
        CHECK_STATUS(st2, MPI_BYTE, partner, 2, sz[1]);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
        CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
        CHECK_STATUS(st2, MPI_BYTE, partner, 2, sz[1]);
        CHECK_BUF(rb, n, TU_SEED(partner, tu_rank, 1));

        /* ANY_TAG from this source: the earliest remaining one is tag 1. */
        CHECK_MPI(MPI_Probe(partner, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, 1, sz[0]);
        /* A receive with the probed source and tag gets that message. */
        CHECK_MPI(MPI_Recv(rb, sz[0], MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
        CHECK_STATUS(st2, MPI_BYTE, partner, 1, sz[0]);
        CHECK_BUF(rb, sz[0], TU_SEED(partner, tu_rank, 0));

        /* Poll with Iprobe for the large one; size known before the receive. */
        do {
            CHECK_MPI(MPI_Iprobe(partner, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        CHECK_STATUS(st, MPI_BYTE, partner, 3, sz[2]);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
        CHECK_EQ(n, sz[2] / (int)sizeof(int));
        CHECK_MPI(MPI_Recv(rb, n, MPI_INT, partner, 3, MPI_COMM_WORLD, &st2));
        CHECK_STATUS(st2, MPI_INT, partner, 3, n);
        CHECK_BUF(rb, sz[2], TU_SEED(partner, tu_rank, 2));
        /* All three were received: none of them can be probed any more. (Not ANY_TAG: the
         * partner may already have sent its message of the next step.) */
        for (i = 1; i <= 3; i++) {
            CHECK_MPI(MPI_Iprobe(partner, i, MPI_COMM_WORLD, &flag, &st));
            CHECK_EQ(flag, 0);
        }
    }
    if (tu_rank % 2 == 1 || partner == tu_rank) {
        CHECK_MPI(MPI_Waitall(3, sreq, MPI_STATUSES_IGNORE));
        for (i = 0; i < 3; i++)
            free(sb[i]);
    }

    /* Everyone (rank 0 too) sends one message to rank 0, of a size that depends on the
     * sender; rank 0 probes with wildcards and receives exactly the probed message. */
    {
        int mysz = 16 + 1000 * tu_rank;
        unsigned char *m = tu_malloc(mysz);
        MPI_Request r;
        tu_fill(m, mysz, TU_SEED(tu_rank, 0, 77));
        CHECK_MPI(MPI_Isend(m, mysz, MPI_BYTE, 0, TAG_ALL + tu_rank, MPI_COMM_WORLD, &r));
        if (tu_rank == 0) {
            int *seen = tu_malloc(sizeof(int) * tu_size), k;
            memset(seen, 0, sizeof(int) * tu_size);
            for (k = 0; k < tu_size; k++) {
                unsigned char *b;
                int src;
                CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                src = st.MPI_SOURCE;
                CHECK(src >= 0 && src < tu_size);
                CHECK_MSG(!seen[src], "message from %d probed twice", src);
                seen[src] = 1;
                CHECK_EQ(st.MPI_TAG, TAG_ALL + src);
                CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
                CHECK_EQ(n, 16 + 1000 * src);
                b = tu_malloc(n);
                CHECK_MPI(MPI_Recv(b, n, MPI_BYTE, src, st.MPI_TAG, MPI_COMM_WORLD, &st2));
                CHECK_STATUS(st2, MPI_BYTE, src, TAG_ALL + src, n);
                CHECK_BUF(b, n, TU_SEED(src, 0, 77));
                free(b);
            }
            free(seen);
        }
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        free(m);
    }

    free(rb);
    return tu_finish();
}
