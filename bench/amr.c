/*
 * amr: a small AMR-like proxy for the dynamic channels (PRO-MPI's application case). The ranks
 * form a periodic 2-D grid of blocks; a refined region (a disc) moves across the domain, and
 * the blocks it covers are refined: a halo exchange whose busy peers change as it moves.
 *
 * Each time step every rank exchanges halos with its 4 face neighbours: -m messages of -s bytes
 * (default 1 KiB) to each, 4 times as many where either block of the pair is refined (the finer
 * level's ghost cells). A pair of blocks of which one is refined also exchanges -m messages
 * with the 4 diagonal neighbours and the face neighbours at distance 2 (the wider stencil and
 * the coarse-fine interpolation). Every -R steps the mesh is regridded: the disc moves by a
 * fifth of the domain along the diagonal (starting at -S fifths, another "input" is another
 * start), and the ranks agree on the refined blocks with an MPI_Allreduce (the collective that
 * begins a phase under Protean's chan_phases=auto: the program itself marks none).
 *
 * Rank 0 prints "# amr ranks N grid PXxPY steps T regrid R msgs M size S start X", then
 * "time_s T" (slowest rank), and under Protean "fast_share F" and "promotions N demotions N"
 * as bench/dynpeers does; then "# done". The first message from each peer of each step is
 * checked (sender and step).
 */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/pvar.h"

#define MAXP 12

static int px, py;

static int at(int x, int y)
{
    x = ((x % px) + px) % px;
    y = ((y % py) + py) % py;
    return y * px + x;
}

/* Is block b covered by the disc centred at (cx, cy) (in block units), radius r? */
static int refined(int b, double cx, double cy, double r)
{
    double dx = fabs(b % px + 0.5 - cx), dy = fabs(b / px + 0.5 - cy);
    dx = fmin(dx, px - dx);
    dy = fmin(dy, py - dy);
    return dx * dx + dy * dy <= r * r;
}

int main(int argc, char **argv)
{
    int steps = 48, regrid = 4, msgs = 20, size = 1024, start = 0, opt;
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((opt = getopt(argc, argv, "T:R:m:s:S:h")) != -1) {
        switch (opt) {
        case 'T': steps = atoi(optarg); break;
        case 'R': regrid = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
        case 'm': msgs = atoi(optarg); break;
        case 's': size = atoi(optarg) >= 8 ? atoi(optarg) : 8; break;
        case 'S': start = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: amr [-T steps] [-R regrid] [-m msgs] [-s bytes] [-S start]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    for (px = (int)sqrt((double)n); n % px; px--)
        ;
    py = n / px;
    int x = rank % px, y = rank / px;
    /* Candidate peers: 4 faces first, then 4 diagonals and 4 faces at distance 2. */
    int cand[MAXP] = {at(x + 1, y),     at(x - 1, y),     at(x, y + 1),     at(x, y - 1),
                      at(x + 1, y + 1), at(x - 1, y - 1), at(x + 1, y - 1), at(x - 1, y + 1),
                      at(x + 2, y),     at(x - 2, y),     at(x, y + 2),     at(x, y - 2)};
    int maxm = 4 * msgs;
    char *sbuf = calloc((size_t)MAXP * maxm, size), *rbuf = calloc((size_t)MAXP * maxm, size);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * MAXP * maxm);
    if (!sbuf || !rbuf || !req)
        MPI_Abort(MPI_COMM_WORLD, 2);
    double radius = (px < py ? px : py) / 4.0 + 0.5;
    char *ref = malloc(n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int t = 0; t < steps; t++) {
        if (t % regrid == 0) {
            /* Regrid: the disc moves; everyone agrees on the refined blocks. */
            int g = t / regrid + start;
            double cx = fmod(g * px / 5.0, px), cy = fmod(g * py / 5.0, py);
            for (int b = 0; b < n; b++)
                ref[b] = 0;
            ref[rank] = (char)refined(rank, cx, cy, radius);
            MPI_Allreduce(MPI_IN_PLACE, ref, n, MPI_CHAR, MPI_MAX, MPI_COMM_WORLD);
        }
        int nr = 0;
        int count[MAXP];
        /* Directions i and i^1 are opposite and counted alike, so what a rank sends in
         * direction i is what the peer there receives from direction i^1 (on small grids two
         * directions may name the same peer, or this rank: the tags keep them apart). */
        for (int i = 0; i < MAXP; i++) {
            int fine = ref[rank] || ref[cand[i]];
            count[i] = i < 4 ? (fine ? 4 * msgs : msgs) : (fine ? msgs : 0);
        }
        for (int i = 0; i < MAXP; i++)
            for (int m = 0; m < count[i]; m++)
                MPI_Irecv(rbuf + ((size_t)i * maxm + m) * size, size, MPI_BYTE, cand[i], i ^ 1,
                          MPI_COMM_WORLD, &req[nr++]);
        for (int i = 0; i < MAXP; i++)
            for (int m = 0; m < count[i]; m++) {
                char *b = sbuf + ((size_t)i * maxm + m) * size;
                if (m == 0)
                    memcpy(b, (int[2]){rank, t}, 8);
                MPI_Isend(b, size, MPI_BYTE, cand[i], i, MPI_COMM_WORLD, &req[nr++]);
            }
        MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
        for (int i = 0; i < MAXP; i++) {
            if (!count[i])
                continue;
            int got[2];
            memcpy(got, rbuf + (size_t)i * maxm * size, 8);
            if (got[0] != cand[i] || got[1] != t) {
                fprintf(stderr, "amr: rank %d step %d: message from %d carries (%d, %d)\n", rank,
                        t, cand[i], got[0], got[1]);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
    }
    double el = MPI_Wtime() - t0, tmax;
    MPI_Reduce(&el, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# amr ranks %d grid %dx%d steps %d regrid %d msgs %d size %d start %d\n", n, px,
               py, steps, regrid, msgs, size, start);
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
    free(ref);
    MPI_Finalize();
    return 0;
}
