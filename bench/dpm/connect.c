/*
 * Connect/accept latency: two ranks of one job; rank 0 opens a port and sends its name to
 * rank 1; then REPS times rank 0 accepts and rank 1 connects (each over MPI_COMM_SELF), a
 * barrier runs over the new intercommunicator, and both disconnect. Prints
 * "connect REPS median_ms min_ms max_ms" (the time of one accept + barrier + disconnect as
 * rank 0 sees it).
 *
 * Between independent jobs: `connect REPS server` (one rank: opens a port, publishes it as
 * "protean-bench-connect" and accepts REPS times) and `connect REPS client` (one rank of
 * another mpirun: looks the name up, retrying until it is there, and connects REPS times),
 * both started with the same name server. The server prints the same line as "jobs ...".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVICE "protean-bench-connect"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Accept (or connect) over MPI_COMM_SELF, a barrier and a disconnect, reps times: the time of
 * each cycle in ms into t. */
static void cycles(const char *port, int accepting, int reps, double *t)
{
    MPI_Comm ic;
    for (int i = 0; i < reps; i++) {
        double t0 = MPI_Wtime();
        if (accepting)
            MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        else
            MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        MPI_Barrier(ic);
        MPI_Comm_disconnect(&ic);
        t[i] = (MPI_Wtime() - t0) * 1e3;
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 20, rank, tries = 0;
    char port[MPI_MAX_PORT_NAME];
    double *t;
    const char *mode = argc > 2 ? argv[2] : "";
    int server = !strcmp(mode, "server"), client = !strcmp(mode, "client");
    int accepting, active;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (reps < 1)
        reps = 1;
    t = malloc(sizeof(double) * (size_t)reps);
    if (server) {
        MPI_Open_port(MPI_INFO_NULL, port);
        MPI_Publish_name(SERVICE, MPI_INFO_NULL, port);
    } else if (client) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        while (MPI_Lookup_name(SERVICE, MPI_INFO_NULL, port) != MPI_SUCCESS) {
            if (++tries > 3000) {
                fprintf(stderr, "connect: %s was never published\n", SERVICE);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            usleep(10000);
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    } else if (rank == 0) {
        MPI_Open_port(MPI_INFO_NULL, port);
        MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    accepting = server || (!client && rank == 0);
    active = server || client || rank < 2;
    if (active)
        cycles(port, accepting, reps, t);
    if (accepting) {
        if (server)
            MPI_Unpublish_name(SERVICE, MPI_INFO_NULL, port);
        MPI_Close_port(port);
        qsort(t, (size_t)reps, sizeof(double), cmp);
        printf("%s %d %.3f %.3f %.3f\n", server ? "jobs" : "connect", reps, t[reps / 2], t[0],
               t[reps - 1]);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
