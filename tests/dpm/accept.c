/*
 * MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect between two groups of one job: the
 * lower half of MPI_COMM_WORLD accepts, the upper half connects (the port name goes from one
 * root to the other by MPI_Send). Over the new intercommunicator: point-to-point both ways,
 * MPI_Allreduce (each side gets the other's sum), MPI_Bcast from each side, and
 * MPI_Intercomm_merge (the connectors high); then MPI_Comm_disconnect. Three cycles, the roles
 * of the roots changing (root = last rank of each half in the odd cycles).
 *
 * Errors, on MPI_COMM_SELF with MPI_ERRORS_RETURN: closing a port twice, connecting to a
 * malformed name or to a closed port (MPI_ERR_PORT at once), connecting to an open port whose
 * owner never accepts (MPI_ERR_PORT after the info key timeout), accepting with nobody
 * connecting (MPI_ERR_PORT after the timeout).
 */
#include "util.h"

#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void errors(void)
{
    char port[MPI_MAX_PORT_NAME], bad[MPI_MAX_PORT_NAME + 32];
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Info info;
    double t0;
    int rc;

    CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK_MSG(strlen(port) > 0 && strlen(port) < MPI_MAX_PORT_NAME, "port name %s", port);
    CHECK_MPI(MPI_Close_port(port));
    CHECK_CLASS(MPI_Close_port(port), MPI_ERR_PORT);

    /* A closed port refuses at once. */
    t0 = now();
    rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c);
    CHECK_CLASS(rc, MPI_ERR_PORT);
    CHECK(c == MPI_COMM_NULL);
    CHECK_MSG(now() - t0 < 5, "connecting to a closed port took %.1f s", now() - t0);
    snprintf(bad, sizeof bad, "no-such-port-%d", tu_rank);
    CHECK_CLASS(MPI_Comm_connect(bad, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT);

    /* An open port whose owner never accepts: the connect times out. */
    CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "0.5"));
    t0 = now();
    rc = MPI_Comm_connect(port, info, 0, MPI_COMM_SELF, &c);
    CHECK_CLASS(rc, MPI_ERR_PORT);
    CHECK_MSG(now() - t0 >= 0.4 && now() - t0 < 10, "the connect gave up after %.2f s",
              now() - t0);
    /* Nobody connects: the accept times out (the connection above was refused by then). */
    t0 = now();
    rc = MPI_Comm_accept(port, info, 0, MPI_COMM_SELF, &c);
    CHECK_CLASS(rc, MPI_ERR_PORT);
    CHECK_MSG(now() - t0 >= 0.4 && now() - t0 < 10, "the accept gave up after %.2f s",
              now() - t0);
    CHECK_MPI(MPI_Close_port(port));
    CHECK_MPI(MPI_Info_free(&info));
}

static void cycle(int k)
{
    int half = tu_size / 2, acceptor = tu_rank < half, color = acceptor ? 0 : 1;
    int lrank, lsize, rsize, root, wroot_a, wroot_c, i, v, sum, want, mrank, msize, high;
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm local, ic, merged;
    MPI_Status st;

    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, tu_rank, &local));
    CHECK_MPI(MPI_Comm_rank(local, &lrank));
    CHECK_MPI(MPI_Comm_size(local, &lsize));
    root = k % 2 ? lsize - 1 : 0;
    wroot_a = k % 2 ? half - 1 : 0;
    wroot_c = k % 2 ? tu_size - 1 : half;
    if (acceptor) {
        if (lrank == root) {
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, wroot_c, 7, MPI_COMM_WORLD));
        }
        CHECK_MPI(MPI_Comm_accept(lrank == root ? port : NULL, MPI_INFO_NULL, root, local, &ic));
        if (lrank == root)
            CHECK_MPI(MPI_Close_port(port));
    } else {
        if (lrank == root)
            CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, wroot_a, 7, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Comm_connect(lrank == root ? port : NULL, MPI_INFO_NULL, root, local, &ic));
    }
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    CHECK_EQ(rsize, acceptor ? tu_size - half : half);

    /* Point to point: every process sends its world rank to each remote process. */
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Send(&tu_rank, 1, MPI_INT, i, 10 + k, ic));
    for (i = 0; i < rsize; i++) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, i, 10 + k, ic, &st));
        CHECK_EQ(v, acceptor ? half + i : i);
        CHECK_EQ(st.MPI_SOURCE, i);
    }
    /* A collective: the sum of the other side's world ranks. */
    CHECK_MPI(MPI_Allreduce(&tu_rank, &sum, 1, MPI_INT, MPI_SUM, ic));
    want = 0;
    for (i = 0; i < rsize; i++)
        want += acceptor ? half + i : i;
    CHECK_EQ(sum, want);
    /* Bcast from the acceptors' rank 0. */
    v = acceptor ? 1000 + k : -1;
    if (acceptor)
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    else
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, ic));
    CHECK_EQ(v, 1000 + k);

    /* Merge: the connectors high. */
    high = !acceptor;
    CHECK_MPI(MPI_Intercomm_merge(ic, high, &merged));
    CHECK_MPI(MPI_Comm_rank(merged, &mrank));
    CHECK_MPI(MPI_Comm_size(merged, &msize));
    CHECK_EQ(msize, tu_size);
    CHECK_EQ(mrank, tu_rank);
    CHECK_MPI(MPI_Allreduce(&tu_rank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(sum, tu_size * (tu_size - 1) / 2);
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_disconnect(&ic));
    CHECK(ic == MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_free(&local));
}

int main(int argc, char **argv)
{
    int k;
    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    errors();
    if (tu_size >= 2)
        for (k = 0; k < 3; k++)
            cycle(k);
    return tu_finish();
}
