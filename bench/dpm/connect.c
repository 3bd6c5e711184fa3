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

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 20, rank, i;
    char port[MPI_MAX_PORT_NAME];
    double *t;
    MPI_Comm ic;

    const char *mode = argc > 2 ? argv[2] : "";
    int jobs = !strcmp(mode, "server") || !strcmp(mode, "client");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (reps < 1)
        reps = 1;
    t = malloc(sizeof(double) * (size_t)reps);
    if (jobs) {
        int server = !strcmp(mode, "server"), tries = 0;
        if (server) {
            MPI_Open_port(MPI_INFO_NULL, port);
            MPI_Publish_name(SERVICE, MPI_INFO_NULL, port);
        } else {
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
        }
        for (i = 0; i < reps; i++) {
            double t0 = MPI_Wtime();
            if (server)
                MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            else
                MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            MPI_Barrier(ic);
            MPI_Comm_disconnect(&ic);
            t[i] = (MPI_Wtime() - t0) * 1e3;
        }
        if (server) {
            MPI_Unpublish_name(SERVICE, MPI_INFO_NULL, port);
            MPI_Close_port(port);
            qsort(t, (size_t)reps, sizeof(double), cmp);
            printf("jobs %d %.3f %.3f %.3f\n", reps, t[reps / 2], t[0], t[reps - 1]);
        }
        free(t);
        MPI_Finalize();
        return 0;
    }
    if (rank == 0) {
        MPI_Open_port(MPI_INFO_NULL, port);
        MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    for (i = 0; i < reps && rank < 2; i++) {
        double t0 = MPI_Wtime();
        if (rank == 0)
            MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        else
            MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        MPI_Barrier(ic);
        MPI_Comm_disconnect(&ic);
        t[i] = (MPI_Wtime() - t0) * 1e3;
    }
    if (rank == 0) {
        MPI_Close_port(port);
        qsort(t, (size_t)reps, sizeof(double), cmp);
        printf("connect %d %.3f %.3f %.3f\n", reps, t[reps / 2], t[0], t[reps - 1]);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
