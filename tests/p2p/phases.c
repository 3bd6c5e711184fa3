/*
 * Messages in order while the set of busy peers changes every phase (the traffic that moves
 * fast channels between peers; PRO-MPI's synthetic benchmark, checked).
 *
 * NPHASE phases, each begun with MPI_Pcontrol. In phase p every rank exchanges NMSG messages
 * with each of the two ranks at distance d(p) = 1 + p % max(1, size/2) (before and after it,
 * wrapping), all in flight at once: sizes cycle through eager and rendezvous sizes, tags through
 * three values, and the receives take MPI_ANY_TAG, so a message that overtook another from the
 * same sender shows as a wrong tag, size or content. Every few phases the receives are posted
 * after the sends (unexpected messages) instead of before.
 *
 * With PROTEAN_TEST_EXPECT_MOVES=1 (set by the manifest line that forces churn), the MPI_T
 * variables protean_chan_promotions and protean_chan_demotions, summed over the ranks, must
 * both be positive: channels did move while messages flowed; with PROTEAN_TEST_EXPECT_MOVES=conn
 * (hybrid channels), protean_chan_conn_promotions and protean_chan_conn_demotions: peers
 * moved between datagrams and TCP connections and back. With
 * PROTEAN_TEST_MIN_FAST_SHARE=X (tests/channels/profile-run), the share of the frames that
 * arrived through fast channels (protean_chan_fast_frames_recvd over it plus
 * protean_chan_shared_frames_recvd, summed over the ranks) must be at least X; it is printed
 * as "fast share X". With PROTEAN_TEST_PHASE_MARK=barrier, phases begin with MPI_Barrier
 * instead of MPI_Pcontrol (and the barrier inside a phase is a nonblocking one), for the
 * phases Protean infers from collectives (chan_phases). Any size >= 1.
 */
#include "util.h"
#include "pvar.h"

#define NPHASE 12
#define NMSG 24
#define NSIZE 6
static const int sizes[NSIZE] = {8, 1000, 40, 16384, 100000, 3000};

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int half = tu_size / 2 > 1 ? tu_size / 2 : 1;
    unsigned char *sbuf[2][NMSG], *rbuf[2][NMSG];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NMSG; i++) {
            sbuf[s][i] = tu_malloc(sizes[i % NSIZE]);
            rbuf[s][i] = tu_malloc(sizes[i % NSIZE]);
        }
    const char *mark = getenv("PROTEAN_TEST_PHASE_MARK");
    int by_barrier = mark && strcmp(mark, "barrier") == 0;
    for (int p = 0; p < NPHASE; p++) {
        if (by_barrier)
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        else
            CHECK_MPI(MPI_Pcontrol(1));
        int d = 1 + p % half;
        int to[2] = {(tu_rank + d) % tu_size, (tu_rank - d + tu_size) % tu_size};
        int late = p % 3 == 2;
        MPI_Request rr[2 * NMSG], sr[2 * NMSG];
        MPI_Status st[2 * NMSG];
        for (int s = 0; s < 2 && !late; s++)
            for (int i = 0; i < NMSG; i++)
                CHECK_MPI(MPI_Irecv(rbuf[s][i], sizes[i % NSIZE], MPI_BYTE, to[1 - s],
                                    MPI_ANY_TAG, MPI_COMM_WORLD, &rr[s * NMSG + i]));
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < NMSG; i++) {
                tu_fill(sbuf[s][i], sizes[i % NSIZE], TU_SEED(tu_rank, to[s], p * NMSG + i));
                CHECK_MPI(MPI_Isend(sbuf[s][i], sizes[i % NSIZE], MPI_BYTE, to[s], i % 3,
                                    MPI_COMM_WORLD, &sr[s * NMSG + i]));
            }
        if (late) {
            /* Let the messages arrive unexpected before receiving them. */
            if (by_barrier) {
                MPI_Request b;
                CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &b));
                CHECK_MPI(MPI_Wait(&b, MPI_STATUS_IGNORE));
            } else {
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            }
            for (int s = 0; s < 2; s++)
                for (int i = 0; i < NMSG; i++)
                    CHECK_MPI(MPI_Irecv(rbuf[s][i], sizes[i % NSIZE], MPI_BYTE, to[1 - s],
                                        MPI_ANY_TAG, MPI_COMM_WORLD, &rr[s * NMSG + i]));
        }
        CHECK_MPI(MPI_Waitall(2 * NMSG, rr, st));
        for (int s = 0; s < 2; s++) {
            /* With d = size/2 on an even size both directions name the same peer: its two
             * streams arrive one after the other, and message i of either has the same
             * content. */
            for (int i = 0; i < NMSG; i++) {
                MPI_Status *x = &st[s * NMSG + i];
                int n;
                CHECK_MPI(MPI_Get_count(x, MPI_BYTE, &n));
                CHECK_MSG(x->MPI_TAG == i % 3 && n == sizes[i % NSIZE],
                          "phase %d: message %d from %d has tag %d and %d bytes, expected "
                          "tag %d and %d bytes: messages overtook each other",
                          p, i, to[1 - s], x->MPI_TAG, n, i % 3, sizes[i % NSIZE]);
                CHECK_EQ(x->MPI_SOURCE, to[1 - s]);
                CHECK_BUF(rbuf[s][i], n, TU_SEED(to[1 - s], tu_rank, p * NMSG + i));
            }
        }
        CHECK_MPI(MPI_Waitall(2 * NMSG, sr, MPI_STATUSES_IGNORE));
    }
    const char *expect = getenv("PROTEAN_TEST_EXPECT_MOVES");
    int conn = expect && strcmp(expect, "conn") == 0;
    if (expect && (atoi(expect) > 0 || conn)) {
        long long v[2] = {
            tu_pvar(conn ? "protean_chan_conn_promotions" : "protean_chan_promotions"),
            tu_pvar(conn ? "protean_chan_conn_demotions" : "protean_chan_demotions")};
        long long sum[2];
        CHECK_MSG(v[0] >= 0 && v[1] >= 0, "no MPI_T variables for channel promotions/demotions");
        CHECK_MPI(MPI_Reduce(v, sum, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
        if (tu_rank == 0) {
            TU_LOG("channel promotions %lld, demotions %lld", sum[0], sum[1]);
            CHECK_MSG(sum[0] > 0 && sum[1] > 0,
                      "channels never moved (promotions %lld, demotions %lld)", sum[0], sum[1]);
        }
    }
    const char *share = getenv("PROTEAN_TEST_MIN_FAST_SHARE");
    if (share) {
        long long v[2] = {tu_pvar("protean_chan_fast_frames_recvd"),
                          tu_pvar("protean_chan_shared_frames_recvd")};
        long long sum[2];
        CHECK_MSG(v[0] >= 0 && v[1] >= 0, "no MPI_T variables protean_chan_*_frames_recvd");
        CHECK_MPI(MPI_Reduce(v, sum, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
        if (tu_rank == 0) {
            double f = (double)sum[0] / (double)(sum[0] + sum[1] > 0 ? sum[0] + sum[1] : 1);
            printf("fast share %.3f (%lld fast, %lld shared)\n", f, sum[0], sum[1]);
            CHECK_MSG(f >= atof(share), "fast share %.3f below %s", f, share);
        }
    }
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NMSG; i++) {
            free(sbuf[s][i]);
            free(rbuf[s][i]);
        }
    return tu_finish();
}
