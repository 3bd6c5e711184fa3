/*
 * Many outstanding requests.
 *  1. Every process has 2000 Isends and 2000 Irecvs outstanding at once, spread over all
 *     processes (itself included), tags cycling through 50 values; receives are posted in
 *     send order per source, so each receive must get exactly the message with its sequence
 *     number. Completed with Waitall; then again completed with a Testsome loop and the
 *     receives posted after the sends.
 *  2. 1200 Isends to one partner, completed with a single Waitall, the partner receiving
 *     with 1200 blocking Recvs.
 * Any size >= 1.
 */
#include "util.h"

#define NMSG 2000
#define NTAGS 50

int main(int argc, char **argv)
{
    MPI_Request *sreq, *rreq;
    int *sval, *rval, *dest;
    int i, round, np, me, partner;

    tu_init(&argc, &argv);
    np = tu_size;
    me = tu_rank;
    partner = tu_partner();
    sreq = tu_malloc(sizeof(MPI_Request) * NMSG);
    rreq = tu_malloc(sizeof(MPI_Request) * NMSG);
    sval = tu_malloc(sizeof(int) * 2 * NMSG);
    rval = tu_malloc(sizeof(int) * 2 * NMSG);
    dest = tu_malloc(sizeof(int) * NMSG);

    /* Message i of process p goes to (p + i) % np with tag (i / np) % NTAGS and carries
     * (p, i). Every process receives NMSG messages: number i from (me - i) mod np. */
    for (round = 0; round < 2; round++) {
        for (i = 0; i < NMSG; i++) {
            dest[i] = (me + i) % np;
            sval[2 * i] = me;
            sval[2 * i + 1] = i;
            rval[2 * i] = rval[2 * i + 1] = -1;
        }
        if (round == 0)
            for (i = 0; i < NMSG; i++)
                CHECK_MPI(MPI_Irecv(&rval[2 * i], 2, MPI_INT, (me - i % np + np) % np,
                                    (i / np) % NTAGS, MPI_COMM_WORLD, &rreq[i]));
        for (i = 0; i < NMSG; i++)
            CHECK_MPI(MPI_Isend(&sval[2 * i], 2, MPI_INT, dest[i], (i / np) % NTAGS,
                                MPI_COMM_WORLD, &sreq[i]));
        if (round == 1)
            for (i = 0; i < NMSG; i++)
                CHECK_MPI(MPI_Irecv(&rval[2 * i], 2, MPI_INT, (me - i % np + np) % np,
                                    (i / np) % NTAGS, MPI_COMM_WORLD, &rreq[i]));
        if (round == 0) {
            CHECK_MPI(MPI_Waitall(NMSG, rreq, MPI_STATUSES_IGNORE));
            CHECK_MPI(MPI_Waitall(NMSG, sreq, MPI_STATUSES_IGNORE));
        } else {
            int done = 0, out, *idx = tu_malloc(sizeof(int) * NMSG);
            char *seen = tu_malloc(NMSG);
            memset(seen, 0, NMSG);
            while (done < NMSG) {
                CHECK_MPI(MPI_Testsome(NMSG, rreq, &out, idx, MPI_STATUSES_IGNORE));
                CHECK(out != MPI_UNDEFINED);
                for (i = 0; i < out; i++) {
                    CHECK(!seen[idx[i]]);
                    seen[idx[i]] = 1;
                }
                done += out;
            }
            CHECK_MPI(MPI_Waitall(NMSG, sreq, MPI_STATUSES_IGNORE));
            free(idx);
            free(seen);
        }
        /* Receive i is the k-th receive from its source with its tag, and that source sent
         * its k-th message with that tag to us as its message number i. */
        for (i = 0; i < NMSG; i++) {
            CHECK(rreq[i] == MPI_REQUEST_NULL && sreq[i] == MPI_REQUEST_NULL);
            CHECK_MSG(rval[2 * i] == (me - i % np + np) % np && rval[2 * i + 1] == i,
                      "round %d: receive %d got message %d from %d", round, i, rval[2 * i + 1],
                      rval[2 * i]);
        }
    }

    /* 2. One partner, 1200 outstanding sends, blocking receives on the other side. */
    {
        int n = 1200, v;
        MPI_Status st;
        if (tu_rank <= partner)
            for (i = 0; i < n; i++) {
                sval[i] = i * 3;
                CHECK_MPI(MPI_Isend(&sval[i], 1, MPI_INT, partner, 77, MPI_COMM_WORLD, &sreq[i]));
            }
        if (tu_rank >= partner)
            for (i = 0; i < n; i++) {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, 77, MPI_COMM_WORLD, &st));
                CHECK_EQ(v, i * 3);
            }
        if (tu_rank <= partner)
            CHECK_MPI(MPI_Waitall(n, sreq, MPI_STATUSES_IGNORE));
    }

    free(sreq);
    free(rreq);
    free(sval);
    free(rval);
    free(dest);
    return tu_finish();
}
