/*
 * Nonblocking modes between every pair of processes (and each process with itself):
 * MPI_Isend, MPI_Issend, MPI_Irsend, MPI_Ibsend against MPI_Irecv, completed with
 * MPI_Waitall. Round 1 preposts all receives (so MPI_Irsend is allowed, after an exchange of
 * "posted" messages); round 2 posts the receives after the sends (unexpected messages).
 * Any size >= 1.
 */
#include "util.h"

enum { MODE_STD, MODE_SYNC, MODE_READY, MODE_BUF, MODE_BIG, NMODES };
static const int msize[NMODES] = {400, 40000, 4, 2000, 300000};
static const char *mname[NMODES] = {"Isend", "Issend", "Irsend", "Ibsend", "Isend(big)"};
#define TAG_POSTED 999

static int tag_of(int mode, int round) { return 10 * round + mode; }

int main(int argc, char **argv)
{
    int np, me, round, p, m, nreq, token = 0, bsize, dsize;
    unsigned char **sbuf, **rbuf;
    MPI_Request *sreq, *rreq, *treq;
    MPI_Status *rst;
    void *bbuf, *dbuf;

    tu_init(&argc, &argv);
    np = tu_size;
    me = tu_rank;
    sbuf = tu_malloc(sizeof(*sbuf) * np * NMODES);
    rbuf = tu_malloc(sizeof(*rbuf) * np * NMODES);
    sreq = tu_malloc(sizeof(*sreq) * np * NMODES);
    rreq = tu_malloc(sizeof(*rreq) * np * NMODES);
    treq = tu_malloc(sizeof(*treq) * np * 2);
    rst = tu_malloc(sizeof(*rst) * np * NMODES);
    for (p = 0; p < np; p++)
        for (m = 0; m < NMODES; m++) {
            sbuf[p * NMODES + m] = tu_malloc(msize[m]);
            rbuf[p * NMODES + m] = tu_malloc(msize[m]);
        }
    {
        int one = 0;
        CHECK_MPI(MPI_Pack_size(msize[MODE_BUF], MPI_BYTE, MPI_COMM_WORLD, &one));
        bsize = 2 * np * (one + MPI_BSEND_OVERHEAD); /* both rounds */
        bbuf = tu_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
    }

    for (round = 0; round < 2; round++) {
        for (p = 0; p < np; p++)
            for (m = 0; m < NMODES; m++) {
                memset(rbuf[p * NMODES + m], 0, msize[m]);
                tu_fill(sbuf[p * NMODES + m], msize[m], TU_SEED(me, p, 10 * round + m));
            }
        if (round == 0) {
            for (p = 0; p < np; p++)
                for (m = 0; m < NMODES; m++)
                    CHECK_MPI(MPI_Irecv(rbuf[p * NMODES + m], msize[m], MPI_BYTE, p,
                                        tag_of(m, round), MPI_COMM_WORLD, &rreq[p * NMODES + m]));
            /* Tell everyone our receives are posted; learn the same from everyone. */
            for (p = 0; p < np; p++) {
                CHECK_MPI(MPI_Irecv(&token, 0, MPI_INT, p, TAG_POSTED, MPI_COMM_WORLD, &treq[p]));
                CHECK_MPI(MPI_Isend(&token, 0, MPI_INT, p, TAG_POSTED, MPI_COMM_WORLD,
                                    &treq[np + p]));
            }
            CHECK_MPI(MPI_Waitall(2 * np, treq, MPI_STATUSES_IGNORE));
        }
        nreq = 0;
        for (p = 0; p < np; p++) {
            /* Start with a different peer on each process to mix up the order. */
            int q = (me + p) % np;
            for (m = 0; m < NMODES; m++) {
                void *b = sbuf[q * NMODES + m];
                int t = tag_of(m, round);
                MPI_Request *rq = &sreq[nreq++];
                switch (m) {
                case MODE_STD:
                case MODE_BIG:
                    CHECK_MPI(MPI_Isend(b, msize[m], MPI_BYTE, q, t, MPI_COMM_WORLD, rq));
                    break;
                case MODE_SYNC:
                    CHECK_MPI(MPI_Issend(b, msize[m], MPI_BYTE, q, t, MPI_COMM_WORLD, rq));
                    break;
                case MODE_READY:
                    if (round == 0)
                        CHECK_MPI(MPI_Irsend(b, msize[m], MPI_BYTE, q, t, MPI_COMM_WORLD, rq));
                    else /* no receive is posted yet in round 2: standard mode instead */
                        CHECK_MPI(MPI_Isend(b, msize[m], MPI_BYTE, q, t, MPI_COMM_WORLD, rq));
                    break;
                case MODE_BUF:
                    CHECK_MPI(MPI_Ibsend(b, msize[m], MPI_BYTE, q, t, MPI_COMM_WORLD, rq));
                    break;
                }
            }
        }
        if (round == 1) {
            /* Receives after the sends, peers in reverse order, modes in reverse order. */
            for (p = np - 1; p >= 0; p--)
                for (m = NMODES - 1; m >= 0; m--)
                    CHECK_MPI(MPI_Irecv(rbuf[p * NMODES + m], msize[m], MPI_BYTE, p,
                                        tag_of(m, round), MPI_COMM_WORLD, &rreq[p * NMODES + m]));
        }
        CHECK_MPI(MPI_Waitall(np * NMODES, rreq, rst));
        CHECK_MPI(MPI_Waitall(nreq, sreq, MPI_STATUSES_IGNORE));
        for (p = 0; p < np; p++)
            for (m = 0; m < NMODES; m++) {
                int k = p * NMODES + m;
                CHECK(rreq[k] == MPI_REQUEST_NULL);
                CHECK_STATUS(rst[k], MPI_BYTE, p, tag_of(m, round), msize[m]);
                if (tu_verify(rbuf[k], msize[m], TU_SEED(p, me, 10 * round + m)) >= 0)
                    TU_FAIL("round %d: bad data from %d sent with %s", round, p, mname[m]);
            }
    }

    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    CHECK(dbuf == bbuf);
    CHECK_EQ(dsize, bsize);
    free(bbuf);
    for (p = 0; p < np * NMODES; p++) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
    free(sbuf);
    free(rbuf);
    free(sreq);
    free(rreq);
    free(treq);
    free(rst);
    return tu_finish();
}
