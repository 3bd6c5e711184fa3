/*
 * A process number that comes back on a new process. Two ranks: rank 1 opens a port; in each
 * of three rounds rank 0 spawns one child (over MPI_COMM_SELF), the child connects to rank 1
 * through the port, and the two exchange messages both ways (enough for rank 1 to give the
 * child a fast channel). Then the child and rank 1 free their intercommunicator, or (with the
 * argument "disconnect") disconnect it, while rank 0 disconnects from the child and waits
 * until it has exited. mpirun gives the next round's child the number of the ended one
 * (checked under Protean's mpirun through PROTEAN_GPID_BASE): rank 0 no longer knows it, but
 * rank 1 still has the old process's state under that number after a free (which must give
 * way to the new process's, or its messages would be taken for the old one's), and after
 * either, its channel once marked as the old process's (which the new one must not take for
 * its own).
 */
#include "util.h"

#define ROUNDS 3
#define MSGS 20

static int gone(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", pid);
    return access(path, F_OK) != 0;
}

static void exchange(MPI_Comm ic, int base)
{
    int i, v;
    for (i = 0; i < MSGS; i++) {
        v = base + i;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, i, ic));
    }
    for (i = 0; i < MSGS; i++) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, i, ic, MPI_STATUS_IGNORE));
        CHECK_EQ(v, (base == 0 ? 1000 : 0) + i);
    }
}

static void part(MPI_Comm *ic, int disconnect)
{
    if (disconnect)
        CHECK_MPI(MPI_Comm_disconnect(ic));
    else
        CHECK_MPI(MPI_Comm_free(ic));
}

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm parent, ic;
    int round, info[2], bases[ROUNDS], disconnect;
    if (argc > 3 && strcmp(argv[1], "child") == 0) {
        const char *b = getenv("PROTEAN_GPID_BASE");
        CHECK_MPI(MPI_Init(NULL, NULL));
        CHECK_MPI(MPI_Comm_get_parent(&parent));
        CHECK(parent != MPI_COMM_NULL);
        info[0] = (int)getpid();
        info[1] = b ? atoi(b) : -1;
        CHECK_MPI(MPI_Send(info, 2, MPI_INT, 0, 1, parent));
        CHECK_MPI(MPI_Comm_connect(argv[2], MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
        exchange(ic, 1000);
        part(&ic, strcmp(argv[3], "disconnect") == 0);
        CHECK_MPI(MPI_Comm_disconnect(&parent));
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    tu_init(&argc, &argv);
    CHECK(tu_size == 2);
    disconnect = argc > 1 && strcmp(argv[1], "disconnect") == 0;
    if (tu_rank == 1)
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK_MPI(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, MPI_COMM_WORLD));
    for (round = 0; round < ROUNDS; round++) {
        if (tu_rank == 0) {
            char *args[] = {"child", port, disconnect ? "disconnect" : "free", NULL};
            int waited = 0;
            CHECK_MPI(MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic,
                                     MPI_ERRCODES_IGNORE));
            CHECK_MPI(MPI_Recv(info, 2, MPI_INT, 0, 1, ic, MPI_STATUS_IGNORE));
            bases[round] = info[1];
            CHECK_MPI(MPI_Comm_disconnect(&ic));
            while (!gone(info[0]) && waited < 10000) {
                tu_sleep_ms(5);
                waited += 5;
            }
            CHECK_MSG(gone(info[0]), "round %d: the child (pid %d) did not end", round, info[0]);
        } else {
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
            exchange(ic, 0);
            part(&ic, disconnect);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (tu_rank == 0 && getenv("PROTEAN_JOBID"))
        for (round = 1; round < ROUNDS; round++)
            CHECK_MSG(bases[round] == bases[0],
                      "round %d's child has ids from %d, the first round's from %d: not reused",
                      round, bases[round], bases[0]);
    if (tu_rank == 1)
        CHECK_MPI(MPI_Close_port(port));
    return tu_finish();
}
