/*
 * Unexpected-message floods: many messages arrive before any receive is posted.
 *  1. Every process other than 0 sends 2000 small messages (sequence numbers) to rank 0,
 *     then a "done" message with another tag; rank 0 first collects all "done" messages
 *     (the floods are then queued or in flight), then receives each source's flood in
 *     order, sources in reverse order.
 *  2. The same with 100 messages of 32 KiB per source (around typical eager limits).
 *  3. Alone: the same to itself.
 * Any size >= 1.
 */
#include "util.h"

enum { TAG_FLOOD = 1, TAG_DONE = 2, TAG_MID = 3 };
#define NSMALL 2000
#define NMID 100
#define MID 32768

int main(int argc, char **argv)
{
    MPI_Status st;
    int i, src, v;

    tu_init(&argc, &argv);

    /* Senders: everyone but 0, or 0 itself when alone. */
    if (tu_rank != 0 || tu_size == 1) {
        MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * (NSMALL + NMID + 1));
        int *vals = tu_malloc(sizeof(int) * NSMALL);
        unsigned char *mid = tu_malloc((size_t)NMID * MID);
        for (i = 0; i < NSMALL; i++) {
            vals[i] = i;
            CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, 0, TAG_FLOOD, MPI_COMM_WORLD, &rq[i]));
        }
        for (i = 0; i < NMID; i++) {
            tu_fill(mid + (size_t)i * MID, MID, TU_SEED(tu_rank, 0, i));
            CHECK_MPI(MPI_Isend(mid + (size_t)i * MID, MID, MPI_BYTE, 0, TAG_MID, MPI_COMM_WORLD,
                                &rq[NSMALL + i]));
        }
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_INT, 0, TAG_DONE, MPI_COMM_WORLD, &rq[NSMALL + NMID]));
        if (tu_size > 1) {
            CHECK_MPI(MPI_Waitall(NSMALL + NMID + 1, rq, MPI_STATUSES_IGNORE));
            free(rq);
            free(vals);
            free(mid);
        } else {
            /* alone: receive below, then complete */
            int nreq = NSMALL + NMID + 1;
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, 0, TAG_DONE, MPI_COMM_WORLD, &st));
            for (i = 0; i < NSMALL; i++) {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, TAG_FLOOD, MPI_COMM_WORLD, &st));
                CHECK_EQ(v, i);
            }
            {
                unsigned char *b = tu_malloc(MID);
                for (i = 0; i < NMID; i++) {
                    CHECK_MPI(MPI_Recv(b, MID, MPI_BYTE, 0, TAG_MID, MPI_COMM_WORLD, &st));
                    CHECK_STATUS(st, MPI_BYTE, 0, TAG_MID, MID);
                    CHECK_BUF(b, MID, TU_SEED(0, 0, i));
                }
                free(b);
            }
            CHECK_MPI(MPI_Waitall(nreq, rq, MPI_STATUSES_IGNORE));
            free(rq);
            free(vals);
            free(mid);
        }
    }
    if (tu_rank == 0 && tu_size > 1) {
        unsigned char *b = tu_malloc(MID);
        char *seen = tu_malloc(tu_size);
        memset(seen, 0, tu_size);
        for (i = 1; i < tu_size; i++) {
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, MPI_ANY_SOURCE, TAG_DONE, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < tu_size && !seen[st.MPI_SOURCE]);
            seen[st.MPI_SOURCE] = 1;
        }
        for (src = tu_size - 1; src >= 1; src--) {
            for (i = 0; i < NSMALL; i++) {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, src, TAG_FLOOD, MPI_COMM_WORLD, &st));
                CHECK_MSG(v == i, "from %d: message %d arrived as number %d", src, v, i);
            }
            for (i = 0; i < NMID; i++) {
                CHECK_MPI(MPI_Recv(b, MID, MPI_BYTE, src, TAG_MID, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, src, TAG_MID, MID);
                CHECK_BUF(b, MID, TU_SEED(src, 0, i));
            }
        }
        free(b);
        free(seen);
    }
    return tu_finish();
}
