/*
 * Inter-communicator latency (the seed's third dynamic-process benchmark): one-way latency
 * (half the round trip of MPI_Send/MPI_Recv ping-pongs) between a parent and the child it
 * spawned, over the parent-child intercommunicator, against the same ping-pong between the two
 * ranks of an ordinary job over MPI_COMM_WORLD.
 *
 * Usage: intercomm spawn   (run on 1 rank: spawns 1 child, measures over the intercommunicator)
 *        intercomm intra   (run on 2 ranks: measures over MPI_COMM_WORLD)
 * Rank 0 (the parent) prints "<size> <microseconds>" for sizes 0, 1, 4, ..., 1 MiB, each the
 * best of 5 runs of ITERS round trips (fewer for large sizes). Under Protean it then prints
 * "# fast_share F promotions P": the share of the lead's arrivals that came by a fast channel.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../tests/pvar.h"

#ifndef MAXSIZE
#define MAXSIZE (1 << 20)
#endif

/* One-way latency in microseconds over `comm` with peer `peer` (the side with `lead` times). */
static double pingpong(MPI_Comm comm, int peer, int lead, int size, char *buf)
{
    int iters = size >= 65536 ? 200 : 5000;
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            if (lead) {
                MPI_Send(buf, size, MPI_BYTE, peer, 0, comm);
                MPI_Recv(buf, size, MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, size, MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, peer, 0, comm);
            }
        }
        double t = (MPI_Wtime() - t0) / iters / 2 * 1e6;
        if (t < best)
            best = t;
    }
    return best;
}

static void sweep(MPI_Comm comm, int peer, int lead)
{
    char *buf = calloc(MAXSIZE, 1);
    for (int size = 0; size <= MAXSIZE; size = size ? size * 4 : 1) {
        double us = pingpong(comm, peer, lead, size, buf);
        if (lead)
            printf("%d %.3f\n", size, us);
    }
    /* Protean: did the peer's frames come through a fast channel (a ring of ours)? */
    long long fast = tu_pvar("protean_chan_fast_frames_recvd");
    long long shared = tu_pvar("protean_chan_shared_frames_recvd");
    if (lead && fast >= 0 && shared >= 0)
        printf("# fast_share %.4f promotions %lld\n",
               fast + shared > 0 ? (double)fast / (double)(fast + shared) : 0.0,
               tu_pvar("protean_chan_promotions"));
    fflush(stdout);
    free(buf);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, ic;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    const char *mode = argc > 1 ? argv[1] : "intra";
    if (parent != MPI_COMM_NULL) {
        sweep(parent, 0, 0);
        MPI_Comm_disconnect(&parent);
    } else if (strcmp(mode, "spawn") == 0) {
        char *args[] = {"child", NULL};
        MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic,
                       MPI_ERRCODES_IGNORE);
        sweep(ic, 0, 1);
        MPI_Comm_disconnect(&ic);
    } else {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        sweep(MPI_COMM_WORLD, 1 - rank, rank == 0);
    }
    MPI_Finalize();
    return 0;
}
