/*
 * MPI_Comm_accept / MPI_Comm_connect between two spawned jobs that do not know each other:
 * the parents (any number) spawn job A (2 processes, "acceptor") and job B (2 processes,
 * "connector") from root 0. A's rank 0 opens a port and sends its name to the parents' root
 * over the parent intercommunicator, which passes it on to B's rank 0; A accepts and B
 * connects over their own MPI_COMM_WORLDs. Over the result: point-to-point from every process
 * to every remote one, MPI_Allreduce, MPI_Intercomm_merge (B high), MPI_Comm_disconnect.
 * Then both jobs report to the parents and disconnect from them.
 */
#include "util.h"

#define NCHILD 2

static void child(const char *role)
{
    int acceptor = strcmp(role, "acceptor") == 0, rank, rsize, i, v, sum, mrank, msize;
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm parent, ic, merged;
    MPI_Status st;

    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (acceptor) {
        if (rank == 0) {
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, parent));
        }
        CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic));
        if (rank == 0)
            CHECK_MPI(MPI_Close_port(port));
    } else {
        if (rank == 0)
            CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 2, parent, &st));
        CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic));
    }
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    CHECK_EQ(rsize, NCHILD);
    v = rank + (acceptor ? 0 : 100);
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, i, 3, ic));
    for (i = 0; i < rsize; i++) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, i, 3, ic, &st));
        CHECK_EQ(v, i + (acceptor ? 100 : 0));
    }
    v = acceptor ? 1 : 10;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, ic));
    CHECK_EQ(sum, acceptor ? 10 * NCHILD : NCHILD);
    CHECK_MPI(MPI_Intercomm_merge(ic, !acceptor, &merged));
    CHECK_MPI(MPI_Comm_rank(merged, &mrank));
    CHECK_MPI(MPI_Comm_size(merged, &msize));
    CHECK_EQ(msize, 2 * NCHILD);
    CHECK_EQ(mrank, rank + (acceptor ? 0 : NCHILD));
    CHECK_MPI(MPI_Allreduce(&mrank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(sum, (2 * NCHILD) * (2 * NCHILD - 1) / 2);
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_disconnect(&ic));
    /* Tell the parents we are done. */
    v = acceptor ? 1 : 2;
    CHECK_MPI(MPI_Reduce(&v, NULL, 1, MPI_INT, MPI_SUM, 0, parent));
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    CHECK_MPI(MPI_Finalize());
}

int main(int argc, char **argv)
{
    char *acc[] = {"acceptor", NULL}, *con[] = {"connector", NULL};
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm a, b;
    MPI_Status st;
    int codes[NCHILD], v = 0, sum = 0;

    if (argc > 1) {
        CHECK_MPI(MPI_Init(&argc, &argv));
        child(argv[1]);
        return 0;
    }
    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_spawn(argv[0], acc, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &a, codes));
    CHECK_MPI(MPI_Comm_spawn(argv[0], con, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &b, codes));
    if (tu_rank == 0) {
        CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, a, &st));
        CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 2, b));
    }
    CHECK_MPI(MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, tu_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, a));
    if (tu_rank == 0)
        CHECK_EQ(sum, NCHILD);
    CHECK_MPI(MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, tu_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, b));
    if (tu_rank == 0)
        CHECK_EQ(sum, 2 * NCHILD);
    CHECK_MPI(MPI_Comm_disconnect(&a));
    CHECK_MPI(MPI_Comm_disconnect(&b));
    return tu_finish();
}
