/*
 * dynpeers: PRO-MPI's synthetic benchmark. Processes change which peers they exchange
 * messages with at each phase.
 *
 * -P phases, each begun with MPI_Pcontrol(1). In phase p every rank exchanges -m messages of -s
 * bytes (default 1 KiB) with each of -k peers: the ranks at distances +d and -d for d in
 * d(p), d(p)+1, ... (k/2 of them, k rounded up to even), d(p) = 1 + (p * 5 + seed) mod
 * (size/2) with seed = -S (another "input" is another seed: the same kind of pattern, other
 * peers in each phase). Messages go in windows of 32 nonblocking sends and receives per peer;
 * the first message of each phase from each peer is checked. A barrier separates phases.
 *
 * Rank 0 prints "# dynpeers ranks N phases P msgs M size S peers K seed X", then
 * "time_s T" (the slowest rank's time from the first phase to the end of the last) and, where
 * the MPI has them (Protean's MPI_T variables), "fast_share F" (frames that arrived through
 * fast channels over all frames, every rank) and "promotions N demotions N"; then "# done".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/pvar.h"

#define WINDOW 32

int main(int argc, char **argv)
{
    int phases = 12, msgs = 200, size = 1024, k = 2, seed = 0, opt;
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((opt = getopt(argc, argv, "P:m:s:k:S:h")) != -1) {
        switch (opt) {
        case 'P': phases = atoi(optarg); break;
        case 'm': msgs = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'S': seed = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: dynpeers [-P phases] [-m msgs] [-s bytes] [-k peers] [-S seed]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    int half = n / 2 > 1 ? n / 2 : 1;
    int npair = (k + 1) / 2;
    if (npair > half)
        npair = half;
    int np = 2 * npair;
    char *sbuf = malloc((size_t)size * np * WINDOW), *rbuf = malloc((size_t)size * np * WINDOW);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * np * WINDOW);
    int *peer = malloc(sizeof(int) * np);
    if (!sbuf || !rbuf || !req || !peer)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(sbuf, 0, (size_t)size * np * WINDOW);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int p = 0; p < phases; p++) {
        MPI_Pcontrol(1);
        int d0 = 1 + (p * 5 + seed) % half;
        for (int j = 0; j < npair; j++) {
            int d = 1 + (d0 - 1 + j) % half;
            peer[2 * j] = (rank + d) % n;
            peer[2 * j + 1] = (rank - d + n) % n;
        }
        for (int done = 0; done < msgs; done += WINDOW) {
            int w = msgs - done < WINDOW ? msgs - done : WINDOW, nr = 0;
            /* Receives from peer i match sends to peer i^1 (the one at the opposite distance). */
            for (int i = 0; i < np; i++)
                for (int m = 0; m < w; m++)
                    MPI_Irecv(rbuf + ((size_t)i * WINDOW + m) * size, size, MPI_BYTE, peer[i ^ 1],
                              p, MPI_COMM_WORLD, &req[nr++]);
            for (int i = 0; i < np; i++)
                for (int m = 0; m < w; m++) {
                    char *b = sbuf + ((size_t)i * WINDOW + m) * size;
                    if (done == 0 && m == 0 && size >= 8)
                        memcpy(b, (int[2]){rank, p}, 8);
                    MPI_Isend(b, size, MPI_BYTE, peer[i], p, MPI_COMM_WORLD, &req[nr++]);
                }
            MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
            if (done == 0 && size >= 8)
                for (int i = 0; i < np; i++) {
                    int got[2];
                    memcpy(got, rbuf + (size_t)i * WINDOW * size, 8);
                    if (got[0] != peer[i ^ 1] || got[1] != p) {
                        fprintf(stderr, "dynpeers: rank %d phase %d: message from %d carries (%d, %d)\n",
                                rank, p, peer[i ^ 1], got[0], got[1]);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double t = MPI_Wtime() - t0, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# dynpeers ranks %d phases %d msgs %d size %d peers %d seed %d\n", n, phases, msgs,
               size, np, seed);
        printf("time_s %.6f\n", tmax);
    }
    tu_print_channel_share();
    if (rank == 0) {
        printf("# done\n");
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(peer);
    MPI_Finalize();
    return 0;
}
