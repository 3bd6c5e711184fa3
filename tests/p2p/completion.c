/*
 * Completion calls: MPI_Wait, Test, Waitall, Testall, Waitany, Testany, Waitsome, Testsome.
 *  - MPI_REQUEST_NULL entries and all-null arrays (empty statuses, MPI_UNDEFINED index and
 *    outcount), arrays of length 0;
 *  - mixes of completed and pending requests: a pending request is one whose message has
 *    not been sent yet. Each message is "released" on demand: the tester asks a server
 *    process to send it (or, without a partner, sends it to itself), so what can have
 *    completed at each point is known without relying on timing;
 *  - Testall leaves the requests alone when not all are complete;
 *  - MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE;
 *  - inactive persistent requests behave like null ones, and stay allocated.
 * Pairs: even rank = tester, odd rank = server; a rank without a partner serves itself.
 */
#include "util.h"

enum { TAG_CMD = 30000 };

static int srv;        /* who sends our data messages */
static int self_mode;  /* srv == ourselves */
static MPI_Request pend[256];
static unsigned char *pbuf[256];
static int npend;

/* Make message (tag, n bytes, seeded by tag) be sent to the tester. */
static void release(int tag, int n)
{
    if (self_mode) {
        CHECK(npend < 256);
        pbuf[npend] = tu_malloc(n);
        tu_fill(pbuf[npend], n, tag);
        CHECK_MPI(MPI_Isend(pbuf[npend], n, MPI_BYTE, tu_rank, tag, MPI_COMM_WORLD,
                            &pend[npend]));
        npend++;
    } else {
        int cmd[2] = {tag, n};
        CHECK_MPI(MPI_Send(cmd, 2, MPI_INT, srv, TAG_CMD, MPI_COMM_WORLD));
    }
}

static void serve(int tester)
{
    for (;;) {
        int cmd[2];
        unsigned char *b;
        CHECK_MPI(MPI_Recv(cmd, 2, MPI_INT, tester, TAG_CMD, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (cmd[0] < 0)
            break;
        b = tu_malloc(cmd[1]);
        tu_fill(b, cmd[1], cmd[0]);
        CHECK_MPI(MPI_Send(b, cmd[1], MPI_BYTE, tester, cmd[0], MPI_COMM_WORLD));
        free(b);
    }
}

static void garbage(MPI_Status *st, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        memset(&st[i], 0x7B, sizeof st[i]);
        st[i].MPI_SOURCE = -77;
        st[i].MPI_TAG = -77;
    }
}

#define N 8

static void null_requests(void)
{
    MPI_Request r = MPI_REQUEST_NULL, reqs[N];
    MPI_Status st, sts[N];
    int flag, idx, out, idxs[N], i;

    garbage(&st, 1);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK_EMPTY_STATUS(st);
    garbage(&st, 1);
    flag = -1;
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EMPTY_STATUS(st);
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EMPTY_STATUS(st);

    for (i = 0; i < N; i++)
        reqs[i] = MPI_REQUEST_NULL;
    garbage(sts, N);
    CHECK_MPI(MPI_Waitall(N, reqs, sts));
    for (i = 0; i < N; i++)
        CHECK_EMPTY_STATUS(sts[i]);
    garbage(sts, N);
    flag = -1;
    CHECK_MPI(MPI_Testall(N, reqs, &flag, sts));
    CHECK_EQ(flag, 1);
    for (i = 0; i < N; i++)
        CHECK_EMPTY_STATUS(sts[i]);
    garbage(&st, 1);
    idx = -5;
    CHECK_MPI(MPI_Waitany(N, reqs, &idx, &st));
    CHECK_EQ(idx, MPI_UNDEFINED);
    CHECK_EMPTY_STATUS(st);
    garbage(&st, 1);
    idx = -5;
    flag = -1;
    CHECK_MPI(MPI_Testany(N, reqs, &idx, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EQ(idx, MPI_UNDEFINED);
    CHECK_EMPTY_STATUS(st);
    out = -5;
    CHECK_MPI(MPI_Waitsome(N, reqs, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
    out = -5;
    CHECK_MPI(MPI_Testsome(N, reqs, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
    out = -5;
    CHECK_MPI(MPI_Testsome(N, reqs, &out, idxs, MPI_STATUSES_IGNORE));
    CHECK_EQ(out, MPI_UNDEFINED);

    /* Arrays of length 0. */
    CHECK_MPI(MPI_Waitall(0, reqs, sts));
    CHECK_MPI(MPI_Waitall(0, reqs, MPI_STATUSES_IGNORE));
    flag = -1;
    CHECK_MPI(MPI_Testall(0, reqs, &flag, sts));
    CHECK_EQ(flag, 1);
    idx = -5;
    CHECK_MPI(MPI_Waitany(0, reqs, &idx, &st));
    CHECK_EQ(idx, MPI_UNDEFINED);
    idx = -5;
    flag = -1;
    CHECK_MPI(MPI_Testany(0, reqs, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(flag, 1);
    CHECK_EQ(idx, MPI_UNDEFINED);
    out = -5;
    CHECK_MPI(MPI_Waitsome(0, reqs, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
    out = -5;
    CHECK_MPI(MPI_Testsome(0, reqs, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
}

static void post(MPI_Request *r, unsigned char **b, int tag, int n)
{
    *b = tu_malloc(n);
    memset(*b, 0, n);
    CHECK_MPI(MPI_Irecv(*b, n, MPI_BYTE, srv, tag, MPI_COMM_WORLD, r));
}

static void mixed(void)
{
    MPI_Request reqs[4], saved[4];
    unsigned char *b1, *b3;
    MPI_Status st, sts[4];
    int flag, idx, out, idxs[4], i;

    reqs[0] = reqs[2] = MPI_REQUEST_NULL;
    post(&reqs[1], &b1, 1, 200);
    post(&reqs[3], &b3, 3, 100);
    memcpy(saved, reqs, sizeof reqs);

    flag = -1;
    CHECK_MPI(MPI_Testall(4, reqs, &flag, sts));
    CHECK_EQ(flag, 0);
    CHECK(memcmp(saved, reqs, sizeof reqs) == 0); /* nothing modified */
    flag = -1;
    idx = -5;
    CHECK_MPI(MPI_Testany(4, reqs, &idx, &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK_EQ(idx, MPI_UNDEFINED);
    out = -5;
    CHECK_MPI(MPI_Testsome(4, reqs, &out, idxs, sts));
    CHECK_EQ(out, 0);
    flag = -1;
    CHECK_MPI(MPI_Test(&reqs[1], &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK(memcmp(saved, reqs, sizeof reqs) == 0);

    release(3, 100);
    garbage(&st, 1);
    CHECK_MPI(MPI_Waitany(4, reqs, &idx, &st));
    CHECK_EQ(idx, 3);
    CHECK(reqs[3] == MPI_REQUEST_NULL);
    CHECK(reqs[1] == saved[1]);
    CHECK_STATUS(st, MPI_BYTE, srv, 3, 100);
    CHECK_BUF(b3, 100, 3);
    flag = -1;
    CHECK_MPI(MPI_Testany(4, reqs, &idx, &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK_EQ(idx, MPI_UNDEFINED);

    release(1, 200);
    garbage(sts, 4);
    CHECK_MPI(MPI_Waitsome(4, reqs, &out, idxs, sts));
    CHECK_EQ(out, 1);
    CHECK_EQ(idxs[0], 1);
    CHECK_STATUS(sts[0], MPI_BYTE, srv, 1, 200);
    CHECK_BUF(b1, 200, 1);
    for (i = 0; i < 4; i++)
        CHECK(reqs[i] == MPI_REQUEST_NULL);
    CHECK_MPI(MPI_Waitany(4, reqs, &idx, MPI_STATUS_IGNORE));
    CHECK_EQ(idx, MPI_UNDEFINED);
    free(b1);
    free(b3);
}

static void waitany_several(void)
{
    MPI_Request reqs[5];
    unsigned char *b[5];
    MPI_Status st;
    int i, idx, flag, out, idxs[5], seen[5] = {0};

    for (i = 0; i < 5; i++)
        post(&reqs[i], &b[i], 10 + i, 50 + i);
    release(10, 50);
    release(12, 52);
    release(14, 54);
    for (i = 0; i < 3; i++) {
        CHECK_MPI(MPI_Waitany(5, reqs, &idx, &st));
        CHECK_MSG(idx == 0 || idx == 2 || idx == 4, "Waitany returned index %d", idx);
        CHECK(!seen[idx]);
        seen[idx] = 1;
        CHECK_STATUS(st, MPI_BYTE, srv, 10 + idx, 50 + idx);
        CHECK_BUF(b[idx], 50 + idx, 10 + idx);
    }
    flag = -1;
    CHECK_MPI(MPI_Testall(5, reqs, &flag, MPI_STATUSES_IGNORE));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Testsome(5, reqs, &out, idxs, MPI_STATUSES_IGNORE));
    CHECK_EQ(out, 0);
    release(13, 53);
    release(11, 51);
    CHECK_MPI(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE));
    for (i = 0; i < 5; i++) {
        CHECK(reqs[i] == MPI_REQUEST_NULL);
        CHECK_BUF(b[i], 50 + i, 10 + i);
        free(b[i]);
    }
}

/* Poll with Testsome (or Waitsome, or Testall) until all N receives completed. */
static void drain(int how)
{
    static const int sz[N] = {0, 1, 100, 4096, 20000, 65536, 262144, 8};
    MPI_Request reqs[N];
    unsigned char *b[N];
    MPI_Status sts[N];
    int i, done = 0, seen[N] = {0}, out, idxs[N], flag, loops = 0, tag0 = 100 + 10 * how;

    for (i = 0; i < N; i++)
        post(&reqs[i], &b[i], tag0 + i, sz[i]);
    for (i = N - 1; i >= 0; i--)
        release(tag0 + i, sz[i]);
    while (done < N) {
        int ignore = how != 2 && (loops++ % 2);
        garbage(sts, N);
        if (how == 2) {
            CHECK_MPI(MPI_Testall(N, reqs, &flag, sts));
            if (!flag)
                continue;
            for (i = 0; i < N; i++) {
                idxs[i] = i;
                CHECK(reqs[i] == MPI_REQUEST_NULL);
            }
            out = N;
        } else if (how == 0) {
            CHECK_MPI(MPI_Testsome(N, reqs, &out, idxs, ignore ? MPI_STATUSES_IGNORE : sts));
        } else {
            CHECK_MPI(MPI_Waitsome(N, reqs, &out, idxs, ignore ? MPI_STATUSES_IGNORE : sts));
            CHECK_INT(out, >=, 1);
        }
        CHECK_INT(out, !=, MPI_UNDEFINED);
        for (i = 0; i < out; i++) {
            int k = idxs[i];
            CHECK(k >= 0 && k < N);
            CHECK_MSG(!seen[k], "index %d reported twice", k);
            seen[k] = 1;
            CHECK(reqs[k] == MPI_REQUEST_NULL);
            if (!ignore) /* for Testall, sts is indexed by request, and idxs[i] == i */
                CHECK_STATUS(sts[i], MPI_BYTE, srv, tag0 + k, sz[k]);
            CHECK_BUF(b[k], sz[k], tag0 + k);
        }
        done += out;
    }
    for (i = 0; i < N; i++)
        free(b[i]);
}

static void inactive_persistent(void)
{
    MPI_Request p, arr[2];
    MPI_Status st, sts[2];
    unsigned char buf[64];
    int flag, idx, out, idxs[2];

    CHECK_MPI(MPI_Recv_init(buf, 64, MPI_BYTE, srv, 40, MPI_COMM_WORLD, &p));
    CHECK(p != MPI_REQUEST_NULL);
    garbage(&st, 1);
    CHECK_MPI(MPI_Wait(&p, &st));
    CHECK_EMPTY_STATUS(st);
    CHECK(p != MPI_REQUEST_NULL);
    garbage(&st, 1);
    CHECK_MPI(MPI_Test(&p, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EMPTY_STATUS(st);
    CHECK(p != MPI_REQUEST_NULL);
    CHECK_MPI(MPI_Request_get_status(p, &flag, &st));
    CHECK_EQ(flag, 1);

    arr[0] = p;
    arr[1] = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Waitany(2, arr, &idx, &st));
    CHECK_EQ(idx, MPI_UNDEFINED);
    CHECK_MPI(MPI_Testany(2, arr, &idx, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK_EQ(idx, MPI_UNDEFINED);
    CHECK_MPI(MPI_Waitsome(2, arr, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
    CHECK_MPI(MPI_Testsome(2, arr, &out, idxs, sts));
    CHECK_EQ(out, MPI_UNDEFINED);
    garbage(sts, 2);
    CHECK_MPI(MPI_Testall(2, arr, &flag, sts));
    CHECK_EQ(flag, 1);
    CHECK_EMPTY_STATUS(sts[0]);
    CHECK_EMPTY_STATUS(sts[1]);
    CHECK_MPI(MPI_Waitall(2, arr, sts));
    CHECK(arr[0] == p);

    /* Active, then inactive again (still allocated) after completion. */
    CHECK_MPI(MPI_Start(&p));
    CHECK_MPI(MPI_Test(&p, &flag, &st));
    CHECK_EQ(flag, 0);
    release(40, 64);
    CHECK_MPI(MPI_Wait(&p, &st));
    CHECK_STATUS(st, MPI_BYTE, srv, 40, 64);
    CHECK_BUF(buf, 64, 40);
    CHECK(p != MPI_REQUEST_NULL);
    garbage(&st, 1);
    CHECK_MPI(MPI_Wait(&p, &st));
    CHECK_EMPTY_STATUS(st);

    memset(buf, 0, sizeof buf);
    CHECK_MPI(MPI_Start(&p));
    arr[0] = MPI_REQUEST_NULL;
    arr[1] = p;
    release(40, 30);
    CHECK_MPI(MPI_Waitany(2, arr, &idx, &st));
    CHECK_EQ(idx, 1);
    CHECK(arr[1] == p); /* persistent: not freed, just inactive */
    CHECK_STATUS(st, MPI_BYTE, srv, 40, 30);
    CHECK_BUF(buf, 30, 40);
    CHECK_MPI(MPI_Request_free(&p));
    CHECK(p == MPI_REQUEST_NULL);
}

/* Send and receive requests together (to and from self). */
static void mixed_send_recv(void)
{
    MPI_Request reqs[6];
    int sv[3] = {7, 8, 9}, rv[3] = {0, 0, 0}, i, out, idxs[6], done = 0;
    MPI_Status sts[6];

    for (i = 0; i < 3; i++)
        CHECK_MPI(MPI_Irecv(&rv[i], 1, MPI_INT, tu_rank, 50 + i, MPI_COMM_WORLD, &reqs[2 * i]));
    for (i = 0; i < 3; i++)
        CHECK_MPI(MPI_Isend(&sv[i], 1, MPI_INT, tu_rank, 52 - i, MPI_COMM_WORLD,
                            &reqs[2 * i + 1]));
    while (done < 6) {
        CHECK_MPI(MPI_Waitsome(6, reqs, &out, idxs, sts));
        CHECK(out >= 1 && out <= 6);
        for (i = 0; i < out; i++)
            if (idxs[i] % 2 == 0) /* a receive */
                CHECK_STATUS(sts[i], MPI_INT, tu_rank, 50 + idxs[i] / 2, 1);
        done += out;
    }
    CHECK_EQ(rv[0], 9);
    CHECK_EQ(rv[1], 8);
    CHECK_EQ(rv[2], 7);
}

int main(int argc, char **argv)
{
    int partner;

    tu_init(&argc, &argv);
    partner = tu_partner();
    srv = partner;
    self_mode = partner == tu_rank;
    if (!self_mode && tu_rank % 2 == 1) {
        serve(partner);
    } else {
        int stop[2] = {-1, 0};
        null_requests();
        mixed();
        waitany_several();
        drain(0);
        drain(1);
        drain(2);
        inactive_persistent();
        mixed_send_recv();
        if (self_mode)
            CHECK_MPI(MPI_Waitall(npend, pend, MPI_STATUSES_IGNORE));
        else
            CHECK_MPI(MPI_Send(stop, 2, MPI_INT, srv, TAG_CMD, MPI_COMM_WORLD));
        while (npend > 0)
            free(pbuf[--npend]);
    }
    return tu_finish();
}
