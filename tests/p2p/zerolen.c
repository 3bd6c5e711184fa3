/*
 * Zero-length messages: count 0 with a NULL buffer in every send mode (standard,
 * synchronous, ready, buffered; blocking, nonblocking and persistent), received into NULL
 * and into a real buffer that must stay untouched; status count and elements 0 with any
 * type; probes report 0; zero items of a large derived type; a zero-length Issend still
 * waits for its receive. Pairs (0,1), (2,3), ...: the lower rank sends; alone, a rank sends
 * to itself. Any size >= 1.
 */
#include "util.h"

enum { TAG_Z = 1, TAG_POSTED = 2, TAG_GO = 3, TAG_SYNC = 4 };
#define NMODES 9

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request sr[NMODES], rr[NMODES];
    MPI_Datatype bigtype;
    int partner, sender, receiver, i, n, go = 0, flag, bsize, dsize;
    double guard[NMODES][4];
    void *bb, *db;

    tu_init(&argc, &argv);
    partner = tu_partner();
    sender = tu_rank <= partner;
    receiver = tu_rank >= partner;
    CHECK_MPI(MPI_Type_contiguous(1 << 20, MPI_DOUBLE, &bigtype));
    CHECK_MPI(MPI_Type_commit(&bigtype));
    bsize = 4 * MPI_BSEND_OVERHEAD + 64;
    bb = tu_malloc(bsize);
    CHECK_MPI(MPI_Buffer_attach(bb, bsize));

    /* Receives first (ready mode needs them), announced to the sender. Even slots receive
     * into NULL, odd slots into a guarded buffer. Slot 8 uses the big derived type. */
    if (receiver) {
        for (i = 0; i < NMODES; i++) {
            void *buf = i % 2 ? (void *)guard[i] : NULL;
            int cnt = i % 2 ? 4 : 0;
            MPI_Datatype t = MPI_DOUBLE;
            guard[i][0] = guard[i][1] = guard[i][2] = guard[i][3] = -1.5;
            if (i == 8) {
                t = bigtype;
                cnt = 0;
            }
            CHECK_MPI(MPI_Irecv(buf, cnt, t, partner, TAG_Z + 10 * i, MPI_COMM_WORLD, &rr[i]));
        }
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(NULL, 0, MPI_INT, partner, TAG_POSTED, MPI_COMM_WORLD));
    }
    if (sender) {
        MPI_Request p;
        if (partner != tu_rank) {
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, partner, TAG_POSTED, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_INT, partner, TAG_POSTED, 0);
        }
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 0, MPI_COMM_WORLD, &sr[0]));
        CHECK_MPI(MPI_Issend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 10, MPI_COMM_WORLD, &sr[1]));
        CHECK_MPI(MPI_Irsend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 20, MPI_COMM_WORLD, &sr[2]));
        CHECK_MPI(MPI_Ibsend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 30, MPI_COMM_WORLD, &sr[3]));
        CHECK_MPI(MPI_Bsend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 40, MPI_COMM_WORLD));
        sr[4] = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Rsend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 50, MPI_COMM_WORLD));
        sr[5] = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Send_init(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 60, MPI_COMM_WORLD, &p));
        CHECK_MPI(MPI_Start(&p));
        CHECK_MPI(MPI_Wait(&p, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Request_free(&p));
        sr[6] = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_DOUBLE, partner, TAG_Z + 70, MPI_COMM_WORLD, &sr[7]));
        CHECK_MPI(MPI_Isend(NULL, 0, bigtype, partner, TAG_Z + 80, MPI_COMM_WORLD, &sr[8]));
    }
    if (receiver) {
        MPI_Status sts[NMODES];
        CHECK_MPI(MPI_Waitall(NMODES, rr, sts));
        for (i = 0; i < NMODES; i++) {
            CHECK_STATUS(sts[i], i == 8 ? bigtype : MPI_DOUBLE, partner, TAG_Z + 10 * i, 0);
            CHECK_MPI(MPI_Get_elements(&sts[i], MPI_DOUBLE, &n));
            CHECK_EQ(n, 0);
            CHECK_MPI(MPI_Get_count(&sts[i], MPI_BYTE, &n));
            CHECK_EQ(n, 0);
            if (i % 2)
                CHECK(guard[i][0] == -1.5 && guard[i][3] == -1.5);
        }
    }
    if (sender)
        CHECK_MPI(MPI_Waitall(NMODES, sr, MPI_STATUSES_IGNORE));

    /* Probe and Mprobe of empty messages; blocking Send/Recv and Sendrecv. */
    if (sender) {
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD, &sr[0]));
        CHECK_MPI(MPI_Isend(NULL, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD, &sr[1]));
    }
    if (receiver) {
        MPI_Message m;
        CHECK_MPI(MPI_Probe(partner, TAG_GO, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_GO, 0);
        do {
            CHECK_MPI(MPI_Iprobe(partner, TAG_GO, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        CHECK_STATUS(st, MPI_INT, partner, TAG_GO, 0);
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_GO, 0);
        CHECK_MPI(MPI_Mprobe(partner, TAG_GO, MPI_COMM_WORLD, &m, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_GO, 0);
        CHECK_MPI(MPI_Mrecv(NULL, 0, MPI_INT, &m, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_GO, 0);
    }
    if (sender)
        CHECK_MPI(MPI_Waitall(2, sr, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_CHAR, partner, TAG_GO, NULL, 0, MPI_CHAR, partner,
                           TAG_GO, MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_CHAR, partner, TAG_GO, 0);

    /* A zero-length synchronous send still waits for its receive. */
    if (sender) {
        CHECK_MPI(MPI_Issend(NULL, 0, MPI_INT, partner, TAG_SYNC, MPI_COMM_WORLD, &sr[0]));
        for (i = 0; i < 10; i++) {
            CHECK_MPI(MPI_Test(&sr[0], &flag, MPI_STATUS_IGNORE));
            CHECK_MSG(!flag, "empty Issend completed before its receive was posted");
        }
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
    }
    if (receiver) {
        if (partner != tu_rank)
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, partner, TAG_SYNC, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, partner, TAG_SYNC, 0);
    }
    if (sender)
        CHECK_MPI(MPI_Wait(&sr[0], MPI_STATUS_IGNORE));

    CHECK_MPI(MPI_Buffer_detach(&db, &dsize));
    free(bb);
    MPI_Type_free(&bigtype);
    return tu_finish();
}
