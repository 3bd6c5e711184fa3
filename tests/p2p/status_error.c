/*
 * The MPI_ERROR field of a status (MPI-4.1 3.2.5): calls that return one status leave it
 * alone, and the calls that complete several requests (Waitall, Testall, Waitsome,
 * Testsome) write it only when they return MPI_ERR_IN_STATUS, and then in every status they
 * return.
 *  1. Recv, Wait, Test, Waitany, Testany, Request_get_status, Sendrecv, Sendrecv_replace,
 *     Probe, Iprobe, Mprobe, Improbe, Mrecv, Imrecv + Wait, and the empty statuses of
 *     MPI_REQUEST_NULL and of MPI_PROC_NULL operations: a sentinel in MPI_ERROR survives;
 *  2. Waitall, Testall, Waitsome, Testsome that succeed: the sentinel survives;
 *  3. under MPI_ERRORS_RETURN, a truncated receive completed by Recv, Wait, Test and Waitany
 *     returns MPI_ERR_TRUNCATE and leaves MPI_ERROR alone; completed by Waitall together
 *     with a good receive, it returns MPI_ERR_IN_STATUS with MPI_ERR_TRUNCATE in the failed
 *     receive's status and MPI_SUCCESS in the other's.
 * Pairs (0,1), (2,3), ...: each sends to its partner (itself when alone). Any size >= 1.
 */
#include "util.h"

#define SENTINEL 4242

/* The MPI_ERROR field of `st` still holds the sentinel, unless the implementation's known
 * deviation `quirk` is declared (never for Protean). */
#define UNTOUCHED(st, quirk)                                                             \
    do {                                                                                 \
        if (!tu_quirk(quirk))                                                            \
            CHECK_EQ((st).MPI_ERROR, SENTINEL);                                          \
    } while (0)

static void set(MPI_Status *st, int n)
{
    for (int i = 0; i < n; i++)
        st[i].MPI_ERROR = SENTINEL;
}

/* A message of `n` ints with tag `tag` to the partner, started before the receive (every
 * send is completed at the end: under forced rendezvous it needs the partner's receive). */
static const int payload[4] = {1, 2, 3, 4};
static MPI_Request sends[64];
static int nsends;

static void send_to(int partner, int tag, int n)
{
    CHECK(nsends < 64);
    CHECK_MPI(MPI_Isend(payload, n, MPI_INT, partner, tag, MPI_COMM_WORLD, &sends[nsends++]));
}

int main(int argc, char **argv)
{
    MPI_Status st, sts[2];
    MPI_Request r, rs[2];
    MPI_Message m;
    int partner, flag, idx, outcount, indices[2], v[4], w[4] = {5, 6, 7, 8};

    tu_init(&argc, &argv);
    partner = tu_partner();

    /* 1. Single completions. The partner's message is sent before each receive is posted:
     * standard sends of 4 ints complete without a matching receive (eager). */
    set(&st, 1);
    send_to(partner, 1, 1);
    CHECK_MPI(MPI_Recv(v, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, &st));
    UNTOUCHED(st, "single_error");

    send_to(partner, 2, 1);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 2, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    UNTOUCHED(st, "single_error");

    send_to(partner, 3, 1);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, &r));
    do {
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    } while (!flag);
    UNTOUCHED(st, "single_error");

    send_to(partner, 4, 1);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 4, MPI_COMM_WORLD, &rs[0]));
    rs[1] = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Waitany(2, rs, &idx, &st));
    CHECK_EQ(idx, 0);
    UNTOUCHED(st, "single_error");

    send_to(partner, 5, 1);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 5, MPI_COMM_WORLD, &rs[0]));
    do {
        CHECK_MPI(MPI_Testany(2, rs, &idx, &flag, &st));
    } while (!flag);
    CHECK_EQ(idx, 0);
    UNTOUCHED(st, "single_error");

    send_to(partner, 6, 1);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 6, MPI_COMM_WORLD, &r));
    do {
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    } while (!flag);
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    CHECK_MPI(MPI_Sendrecv(w, 2, MPI_INT, partner, 7, v, 2, MPI_INT, partner, 7, MPI_COMM_WORLD,
                           &st));
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Sendrecv_replace(v, 2, MPI_INT, partner, 8, partner, 8, MPI_COMM_WORLD, &st));
    UNTOUCHED(st, "single_error");

    /* Probes and matched probes. */
    send_to(partner, 9, 3);
    CHECK_MPI(MPI_Probe(partner, 9, MPI_COMM_WORLD, &st));
    UNTOUCHED(st, "single_error");
    do {
        CHECK_MPI(MPI_Iprobe(partner, 9, MPI_COMM_WORLD, &flag, &st));
    } while (!flag);
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Mprobe(partner, 9, MPI_COMM_WORLD, &m, &st));
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Mrecv(v, 3, MPI_INT, &m, &st));
    UNTOUCHED(st, "single_error");
    CHECK_STATUS(st, MPI_INT, partner, 9, 3);

    send_to(partner, 10, 2);
    do {
        CHECK_MPI(MPI_Improbe(partner, 10, MPI_COMM_WORLD, &flag, &m, &st));
    } while (!flag);
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Imrecv(v, 2, MPI_INT, &m, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    UNTOUCHED(st, "single_error");

    /* Empty statuses and MPI_PROC_NULL. */
    r = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Wait(&r, &st));
    UNTOUCHED(st, "single_error");
    CHECK_EMPTY_STATUS(st);
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Recv(v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    UNTOUCHED(st, "single_error");
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    UNTOUCHED(st, "single_error");

    /* 2. Multiple completions without errors. */
    set(sts, 2);
    send_to(partner, 11, 1);
    send_to(partner, 12, 1);
    CHECK_MPI(MPI_Irecv(&v[0], 1, MPI_INT, partner, 11, MPI_COMM_WORLD, &rs[0]));
    CHECK_MPI(MPI_Irecv(&v[1], 1, MPI_INT, partner, 12, MPI_COMM_WORLD, &rs[1]));
    CHECK_MPI(MPI_Waitall(2, rs, sts));
    UNTOUCHED(sts[0], "multi_error");
    UNTOUCHED(sts[1], "multi_error");

    send_to(partner, 13, 1);
    send_to(partner, 14, 1);
    CHECK_MPI(MPI_Irecv(&v[0], 1, MPI_INT, partner, 13, MPI_COMM_WORLD, &rs[0]));
    CHECK_MPI(MPI_Irecv(&v[1], 1, MPI_INT, partner, 14, MPI_COMM_WORLD, &rs[1]));
    do {
        CHECK_MPI(MPI_Testall(2, rs, &flag, sts));
    } while (!flag);
    UNTOUCHED(sts[0], "multi_error");
    UNTOUCHED(sts[1], "multi_error");

    send_to(partner, 15, 1);
    CHECK_MPI(MPI_Irecv(&v[0], 1, MPI_INT, partner, 15, MPI_COMM_WORLD, &rs[0]));
    rs[1] = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Waitsome(2, rs, &outcount, indices, sts));
    CHECK_EQ(outcount, 1);
    UNTOUCHED(sts[0], "multi_error");

    send_to(partner, 16, 1);
    CHECK_MPI(MPI_Irecv(&v[0], 1, MPI_INT, partner, 16, MPI_COMM_WORLD, &rs[0]));
    do {
        CHECK_MPI(MPI_Testsome(2, rs, &outcount, indices, sts));
    } while (outcount == 0);
    CHECK_EQ(outcount, 1);
    UNTOUCHED(sts[0], "multi_error");

    /* 3. Errors: a 3-int message into a 1-int receive. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    set(&st, 1);
    send_to(partner, 20, 3);
    CHECK_CLASS(MPI_Recv(v, 1, MPI_INT, partner, 20, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
    UNTOUCHED(st, "single_error");

    send_to(partner, 21, 3);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 21, MPI_COMM_WORLD, &r));
    CHECK_CLASS(MPI_Wait(&r, &st), MPI_ERR_TRUNCATE);
    UNTOUCHED(st, "single_error");

    send_to(partner, 22, 3);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 22, MPI_COMM_WORLD, &r));
    do {
        int rc = MPI_Test(&r, &flag, &st);
        if (flag)
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
        else
            CHECK_MPI(rc);
    } while (!flag);
    UNTOUCHED(st, "single_error");

    send_to(partner, 23, 3);
    CHECK_MPI(MPI_Irecv(v, 1, MPI_INT, partner, 23, MPI_COMM_WORLD, &rs[0]));
    rs[1] = MPI_REQUEST_NULL;
    CHECK_CLASS(MPI_Waitany(2, rs, &idx, &st), MPI_ERR_TRUNCATE);
    UNTOUCHED(st, "single_error");

    set(sts, 2);
    send_to(partner, 24, 1);
    send_to(partner, 25, 3);
    CHECK_MPI(MPI_Irecv(&v[0], 1, MPI_INT, partner, 24, MPI_COMM_WORLD, &rs[0]));
    CHECK_MPI(MPI_Irecv(&v[1], 1, MPI_INT, partner, 25, MPI_COMM_WORLD, &rs[1]));
    CHECK_CLASS(MPI_Waitall(2, rs, sts), MPI_ERR_IN_STATUS);
    CHECK_CLASS(sts[0].MPI_ERROR, MPI_SUCCESS);
    CHECK_CLASS(sts[1].MPI_ERROR, MPI_ERR_TRUNCATE);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Waitall(nsends, sends, MPI_STATUSES_IGNORE));
    return tu_finish();
}
