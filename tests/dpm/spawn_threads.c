/*
 * MPI_Comm_spawn from several threads of one process at once (MPI_THREAD_MULTIPLE), as
 * mpi4py.futures does when pools start in several threads: NT threads (argument, default 6)
 * of every parent each own a duplicate of MPI_COMM_SELF made by the main thread, and ROUNDS
 * times, all at the same time as the others, spawn one child on it, send it (rank, thread,
 * round), get the value back plus one, and disconnect. Every spawn's children must be let go
 * by their own root's word, whatever the root's other spawns in flight do: with one tag per
 * root in the process manager's space, a spawn that wrote its word after an earlier one's
 * children had read nothing yet left those children waiting in MPI_Init forever (the hang
 * seen twice in mpi4py.futures' tests).
 */
#include "util.h"
#include <pthread.h>

#define MAXT 16
#define ROUNDS 4

static int nt = 6;
static char *program;
static MPI_Comm own[MAXT];

static void *run(void *arg)
{
    int t = (int)(intptr_t)arg, round, v, back;
    char *args[] = {"child", NULL};
    MPI_Comm ic;
    for (round = 0; round < ROUNDS; round++) {
        CHECK_MPI(MPI_Comm_spawn(program, args, 1, MPI_INFO_NULL, 0, own[t], &ic,
                                 MPI_ERRCODES_IGNORE));
        v = (tu_rank * MAXT + t) * ROUNDS + round;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 5, ic));
        CHECK_MPI(MPI_Recv(&back, 1, MPI_INT, 0, 6, ic, MPI_STATUS_IGNORE));
        CHECK_MSG(back == v + 1, "thread %d round %d: sent %d, the child answered %d", t, round,
                  v, back);
        CHECK_MPI(MPI_Comm_disconnect(&ic));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, t, v;
    pthread_t th[MAXT];
    MPI_Comm parent;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        CHECK_MPI(MPI_Init(NULL, NULL));
        CHECK_MPI(MPI_Comm_get_parent(&parent));
        CHECK(parent != MPI_COMM_NULL);
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 5, parent, MPI_STATUS_IGNORE));
        v++;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 6, parent));
        CHECK_MPI(MPI_Comm_disconnect(&parent));
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    tu_after_init();
    CHECK_EQ(provided, MPI_THREAD_MULTIPLE);
    if (argc > 1)
        nt = atoi(argv[1]);
    CHECK(nt >= 1 && nt <= MAXT);
    program = argv[0];
    for (t = 0; t < nt; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &own[t]));
    for (t = 0; t < nt; t++)
        CHECK(pthread_create(&th[t], NULL, run, (void *)(intptr_t)t) == 0);
    for (t = 0; t < nt; t++)
        CHECK(pthread_join(th[t], NULL) == 0);
    for (t = 0; t < nt; t++)
        CHECK_MPI(MPI_Comm_free(&own[t]));
    return tu_finish();
}
