/*
 * Buffered mode: MPI_Buffer_attach/MPI_Buffer_detach, MPI_Bsend, MPI_Ibsend.
 *  - a buffer sized with MPI_Pack_size + MPI_BSEND_OVERHEAD holds exactly the messages;
 *  - MPI_Bsend and MPI_Ibsend are local: they complete before the receiver has posted
 *    anything (the receiver waits for a message sent after them);
 *  - MPI_Buffer_detach returns the attached buffer and size, and blocks until the buffered
 *    messages are gone: overwriting the buffer right after detach must not change what the
 *    receiver gets;
 *  - space is reused: many rounds through a buffer that holds only a few messages;
 *  - Bsend to self.
 * The error cases are in bsend_err.c.
 * Pairs (0,1), (2,3), ...; any size >= 1.
 */
#include "util.h"

enum { TAG_DATA = 5, TAG_GO = 6, TAG_ACK = 7 };

static const int sizes[] = {0, 1, 100, 5000, 70000, 300000};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static int bsend_space(int nbytes)
{
    int p = 0;
    CHECK_MPI(MPI_Pack_size(nbytes, MPI_BYTE, MPI_COMM_WORLD, &p));
    CHECK_INT(p, >=, nbytes);
    return p + MPI_BSEND_OVERHEAD;
}

int main(int argc, char **argv)
{
    MPI_Status st;
    unsigned char *msgs[NSIZES], *bbuf, *r;
    void *dbuf;
    int i, partner, token = 0, bsize, dsize, total = 0, round;

    tu_init(&argc, &argv);
    partner = tu_partner();
    CHECK_INT(MPI_BSEND_OVERHEAD, >=, 0);

    for (i = 0; i < NSIZES; i++) {
        msgs[i] = tu_malloc(sizes[i]);
        total += bsend_space(sizes[i]);
    }
    r = tu_malloc(300000);

    /* 1. Sender: a buffer for exactly all messages, Bsend them all, then Ibsend one more after
     * the buffer was detached and re-attached. */
    if (tu_rank <= partner) {
        bsize = total;
        bbuf = tu_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
        for (i = 0; i < NSIZES; i++) {
            tu_fill(msgs[i], sizes[i], TU_SEED(tu_rank, partner, i));
            CHECK_MPI(MPI_Bsend(msgs[i], sizes[i], MPI_BYTE, partner, TAG_DATA + 100 * i,
                                MPI_COMM_WORLD));
            memset(msgs[i], 0xEE, sizes[i]); /* the data was copied: the user buffer is free */
        }
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
        else
            for (i = 0; i < NSIZES; i++) { /* self: receive them now */
                CHECK_MPI(MPI_Recv(r, sizes[i], MPI_BYTE, tu_rank, TAG_DATA + 100 * i,
                                   MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, tu_rank, TAG_DATA + 100 * i, sizes[i]);
                CHECK_BUF(r, sizes[i], TU_SEED(tu_rank, partner, i));
            }
        CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
        CHECK(dbuf == (void *)bbuf);
        CHECK_EQ(dsize, bsize);
        memset(bbuf, 0xDD, bsize); /* detach waited for the messages: the buffer is ours */
        free(bbuf);
    }
    if (tu_rank >= partner && partner != tu_rank) {
        CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        for (i = NSIZES - 1; i >= 0; i--) { /* any order: tags differ */
            CHECK_MPI(MPI_Recv(r, sizes[i], MPI_BYTE, partner, TAG_DATA + 100 * i,
                               MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA + 100 * i, sizes[i]);
            CHECK_BUF(r, sizes[i], TU_SEED(partner, tu_rank, i));
        }
    }

    /* 2. Ibsend is local too, and the request can be waited on before anything is received.
     * Roles are swapped. */
    if (tu_rank >= partner) {
        MPI_Request req[NSIZES];
        bbuf = tu_malloc(total);
        CHECK_MPI(MPI_Buffer_attach(bbuf, total));
        for (i = 0; i < NSIZES; i++) {
            tu_fill(msgs[i], sizes[i], TU_SEED(tu_rank, partner, 20 + i));
            CHECK_MPI(MPI_Ibsend(msgs[i], sizes[i], MPI_BYTE, partner, TAG_DATA,
                                 MPI_COMM_WORLD, &req[i]));
        }
        CHECK_MPI(MPI_Waitall(NSIZES, req, MPI_STATUSES_IGNORE));
        for (i = 0; i < NSIZES; i++)
            memset(msgs[i], 0xEE, sizes[i]);
        if (partner != tu_rank)
            CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD));
        else
            for (i = 0; i < NSIZES; i++) {
                CHECK_MPI(MPI_Recv(r, sizes[i], MPI_BYTE, tu_rank, TAG_DATA, MPI_COMM_WORLD,
                                   &st));
                CHECK_STATUS(st, MPI_BYTE, tu_rank, TAG_DATA, sizes[i]);
                CHECK_BUF(r, sizes[i], TU_SEED(tu_rank, partner, 20 + i));
            }
        CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
        CHECK(dbuf == (void *)bbuf);
        CHECK_EQ(dsize, total);
        memset(bbuf, 0xDD, total);
        free(bbuf);
    }
    if (tu_rank < partner) {
        CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_GO, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        for (i = 0; i < NSIZES; i++) { /* same tag: arrival order is send order */
            CHECK_MPI(MPI_Recv(r, sizes[i], MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, sizes[i]);
            CHECK_BUF(r, sizes[i], TU_SEED(partner, tu_rank, 20 + i));
        }
    }

    /* 3. Reuse: a buffer for 3 messages of 2000 bytes, 40 rounds of 3 messages. The receiver
     * acknowledges each round, after which the space must be available again. */
    bsize = 3 * bsend_space(2000);
    bbuf = tu_malloc(bsize);
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
    for (round = 0; round < 40; round++) {
        int k;
        if (tu_rank <= partner) {
            for (k = 0; k < 3; k++) {
                tu_fill(msgs[4], 2000, TU_SEED(tu_rank, round, k));
                CHECK_MPI(MPI_Bsend(msgs[4], 2000, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD));
            }
        }
        if (tu_rank >= partner) {
            for (k = 0; k < 3; k++) {
                CHECK_MPI(MPI_Recv(r, 2000, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, MPI_BYTE, partner, TAG_DATA, 2000);
                CHECK_BUF(r, 2000, TU_SEED(partner, round, k));
            }
            if (partner != tu_rank)
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD));
        }
        if (tu_rank < partner)
            CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, partner, TAG_ACK, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    CHECK(dbuf == (void *)bbuf);
    CHECK_EQ(dsize, bsize);
    free(bbuf);

    for (i = 0; i < NSIZES; i++)
        free(msgs[i]);
    free(r);
    return tu_finish();
}
