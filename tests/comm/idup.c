/*
 * MPI_Comm_idup: completes through MPI_Wait, MPI_Test loops and MPI_Waitall; several idups of
 * one communicator in flight at once; idups of overlapping pair communicators that every
 * process starts in a different order (blocking dups in that order would deadlock); an idup
 * in flight while the same processes run a blocking MPI_Comm_dup on another communicator, in
 * opposite orders on neighbouring processes; point-to-point traffic on the parent while an
 * idup is pending; idup_with_info. Each result is CONGRUENT with its parent and carries
 * traffic. Any number of processes.
 */
#include "util.h"

static void ring(MPI_Comm comm, int seed)
{
    int size, rank, right, left, out, in = -1;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    out = seed * 1000 + rank;
    CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 7, &in, 1, MPI_INT, left, 7, comm,
                           MPI_STATUS_IGNORE));
    CHECK_EQ(in, seed * 1000 + left);
}

static void congruent(MPI_Comm a, MPI_Comm b)
{
    int cmp;
    CHECK_MPI(MPI_Comm_compare(a, b, &cmp));
    CHECK_EQ(cmp, MPI_CONGRUENT);
}

#define NMUL 5

int main(int argc, char **argv)
{
    MPI_Comm d, m[NMUL], pair_lo = MPI_COMM_NULL, pair_hi = MPI_COMM_NULL, dl, dh, other, od;
    MPI_Request r, rq[NMUL];
    int i, flag, n;

    tu_init(&argc, &argv);
    n = tu_size;

    /* Plain idup + Wait. */
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &d, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL);
    congruent(d, MPI_COMM_WORLD);
    ring(d, 1);

    /* idup + Test loop, with traffic on the parent meanwhile. */
    CHECK_MPI(MPI_Comm_idup(d, &m[0], &r));
    ring(d, 2);
    do {
        CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    } while (!flag);
    congruent(m[0], d);
    ring(m[0], 3);
    CHECK_MPI(MPI_Comm_free(&m[0]));

    /* Several in flight, completed together. */
    for (i = 0; i < NMUL; i++)
        CHECK_MPI(MPI_Comm_idup(d, &m[i], &rq[i]));
    CHECK_MPI(MPI_Waitall(NMUL, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < NMUL; i++) {
        congruent(m[i], d);
        ring(m[i], 10 + i);
    }
    for (i = 0; i < NMUL; i++)
        CHECK_MPI(MPI_Comm_free(&m[i]));

    /* Overlapping pairs: process i is in pair {i, i+1} ("lo", where it is first) and in pair
     * {i-1, i} ("hi"). Every process idups its lo pair first, then its hi pair. */
    if (n >= 2) {
        for (i = 0; i < n; i++) {
            MPI_Comm t;
            int color = MPI_UNDEFINED;
            if (tu_rank == i || tu_rank == (i + 1) % n)
                color = 0;
            CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, tu_rank == i ? 0 : 1, &t));
            if (tu_rank == i)
                pair_lo = t;
            else if (tu_rank == (i + 1) % n)
                pair_hi = t;
            else if (t != MPI_COMM_NULL)
                CHECK_MPI(MPI_Comm_free(&t));
        }
        CHECK_MPI(MPI_Comm_idup(pair_lo, &dl, &rq[0]));
        CHECK_MPI(MPI_Comm_idup(pair_hi, &dh, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        congruent(dl, pair_lo);
        congruent(dh, pair_hi);
        /* Both pairs at once (each process's partner in dl is busy with its own dl). */
        {
            MPI_Request pr[4];
            int out[2], in[2] = {-1, -1}, rl, rh;
            CHECK_MPI(MPI_Comm_rank(dl, &rl));
            CHECK_MPI(MPI_Comm_rank(dh, &rh));
            out[0] = 2000 + rl;
            out[1] = 2100 + rh;
            CHECK_MPI(MPI_Irecv(&in[0], 1, MPI_INT, 1 - rl, 7, dl, &pr[0]));
            CHECK_MPI(MPI_Irecv(&in[1], 1, MPI_INT, 1 - rh, 7, dh, &pr[1]));
            CHECK_MPI(MPI_Isend(&out[0], 1, MPI_INT, 1 - rl, 7, dl, &pr[2]));
            CHECK_MPI(MPI_Isend(&out[1], 1, MPI_INT, 1 - rh, 7, dh, &pr[3]));
            CHECK_MPI(MPI_Waitall(4, pr, MPI_STATUSES_IGNORE));
            CHECK_EQ(in[0], 2100 + 1 - rl); /* the partner's hi pair */
            CHECK_EQ(in[1], 2000 + 1 - rh);
        }
        CHECK_MPI(MPI_Comm_free(&dl));
        CHECK_MPI(MPI_Comm_free(&dh));
        CHECK_MPI(MPI_Comm_free(&pair_lo));
        CHECK_MPI(MPI_Comm_free(&pair_hi));
    }

    /* idup of d in flight while a blocking dup of another communicator runs; even processes
     * start the idup first, odd ones the blocking dup first (then the idup). */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, tu_rank, &other));
    if (tu_rank % 2 == 0) {
        CHECK_MPI(MPI_Comm_idup(d, &m[0], &r));
        CHECK_MPI(MPI_Comm_dup(other, &od));
    } else {
        CHECK_MPI(MPI_Comm_dup(other, &od));
        CHECK_MPI(MPI_Comm_idup(d, &m[0], &r));
    }
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    congruent(m[0], d);
    congruent(od, other);
    ring(m[0], 30);
    ring(od, 31);
    CHECK_MPI(MPI_Comm_free(&m[0]));
    CHECK_MPI(MPI_Comm_free(&od));
    CHECK_MPI(MPI_Comm_free(&other));

    /* idup_with_info (MPI-4.0; not in Open MPI 4.1). */
#if MPI_VERSION >= 4
    {
        MPI_Info info;
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "false"));
        CHECK_MPI(MPI_Comm_idup_with_info(d, info, &m[0], &r));
        CHECK_MPI(MPI_Info_free(&info));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        congruent(m[0], d);
        ring(m[0], 40);
        CHECK_MPI(MPI_Comm_free(&m[0]));
    }
#endif

    CHECK_MPI(MPI_Comm_free(&d));
    return tu_finish();
}
