/*
 * Spawn latency (the seed's first dynamic-process benchmark): every parent of MPI_COMM_WORLD
 * calls MPI_Comm_spawn of NCHILD copies of this program (root 0), a barrier across the new
 * intercommunicator proves the children are up and connected, then both sides
 * MPI_Comm_disconnect and the children exit. The time of rank 0 from before MPI_Comm_spawn to
 * after the barrier, per repetition, and the spawn rate (the seed's second benchmark:
 * repetitions, each a spawn followed by a disconnect, per second of the whole loop); one line:
 *   <parents> <children> <median ms> <min ms> <max ms> <repetitions> <spawns per s>
 * Usage: spawn NCHILD [REPS]  (the children are started as "spawn child").
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Comm ic;
    int nchild, reps, rank, size, r;
    double *t;
    char *args[] = {"child", NULL};
    MPI_Init(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        MPI_Comm_get_parent(&ic);
        MPI_Barrier(ic);
        MPI_Comm_disconnect(&ic);
        MPI_Finalize();
        return 0;
    }
    nchild = argc > 1 ? atoi(argv[1]) : 1;
    reps = argc > 2 ? atoi(argv[2]) : 10;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t = malloc(sizeof(double) * (size_t)reps);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (r = 0; r < reps; r++) {
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Comm_spawn(argv[0], args, nchild, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                       MPI_ERRCODES_IGNORE);
        MPI_Barrier(ic);
        t[r] = (MPI_Wtime() - t0) * 1e3;
        MPI_Comm_disconnect(&ic);
    }
    double all = MPI_Wtime() - start;
    if (rank == 0) {
        qsort(t, (size_t)reps, sizeof(double), cmp);
        printf("%d %d %.2f %.2f %.2f %d %.1f\n", size, nchild, t[reps / 2], t[0], t[reps - 1], reps,
               reps / all);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
