/*
 * Multi-threaded message rate: ranks 0 and 1, T threads each (MPI_THREAD_MULTIPLE). Thread t
 * of rank 0 sends windows of W messages of S bytes (MPI_Isend + MPI_Waitall) to thread t of
 * rank 1 (tag t), which receives them with MPI_Irecv + MPI_Waitall and answers each window
 * with a 0-byte message. Prints "<threads> <messages per second>" for T = 1, 2, 4, ... up to
 * -T (the rate of all threads together, best of -r repetitions of -n windows each).
 *
 *   mtrate [-T MAXTHREADS] [-s BYTES] [-w WINDOW] [-n WINDOWS] [-r REPS]
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size_b = 8, window = 64, nwin = 2000, reps = 3;

static void *run(void *arg)
{
    int t = (int)(long)arg, i, k;
    char *buf = calloc((size_t)window, (size_t)size_b + 1);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)window);
    for (i = 0; i < nwin; i++) {
        if (rank == 0) {
            for (k = 0; k < window; k++)
                MPI_Isend(buf + (size_t)k * size_b, size_b, MPI_BYTE, 1, t, MPI_COMM_WORLD, &rq[k]);
            MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (k = 0; k < window; k++)
                MPI_Irecv(buf + (size_t)k * size_b, size_b, MPI_BYTE, 0, t, MPI_COMM_WORLD, &rq[k]);
            MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, t, MPI_COMM_WORLD);
        }
    }
    free(buf);
    free(rq);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, maxt = 4, opt, nt, r, t;
    pthread_t th[64];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((opt = getopt(argc, argv, "T:s:w:n:r:")) != -1) {
        switch (opt) {
        case 'T': maxt = atoi(optarg); break;
        case 's': size_b = atoi(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'n': nwin = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default: MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (provided < MPI_THREAD_MULTIPLE || maxt < 1 || maxt > 64) {
        if (rank == 0)
            fprintf(stderr, "mtrate: needs MPI_THREAD_MULTIPLE and 1 <= T <= 64\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        printf("# mtrate: %d-byte messages, window %d, %d windows per thread; threads, msg/s\n",
               size_b, window, nwin);
    for (nt = 1; nt <= maxt; nt *= 2) {
        double best = 0;
        for (r = 0; r < reps; r++) {
            double t0, dt;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            if (rank < 2) {
                for (t = 0; t < nt; t++)
                    pthread_create(&th[t], NULL, run, (void *)(long)t);
                for (t = 0; t < nt; t++)
                    pthread_join(th[t], NULL);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            dt = MPI_Wtime() - t0;
            if ((double)nt * nwin * window / dt > best)
                best = (double)nt * nwin * window / dt;
        }
        if (rank == 0)
            printf("%d %.0f\n", nt, best);
    }
    if (rank == 0)
        printf("# done\n");
    MPI_Finalize();
    return 0;
}
