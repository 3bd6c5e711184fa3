/*
 * Statuses of nonblocking and persistent receives from MPI_PROC_NULL: like a blocking one,
 * source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0, buffer untouched, whichever completion
 * call is used (Wait, Test, Waitall, Waitany, Waitsome, Testsome, Request_get_status).
 * A persistent one reports the same status each time it is started. Any size >= 1.
 */
#include "util.h"

static void garbage(MPI_Status *st)
{
    memset(st, 0x66, sizeof *st);
}

int main(int argc, char **argv)
{
    MPI_Status st, sts[2];
    MPI_Request r, rs[2];
    int y = 77, z = 88, flag, idx, out, idxs[2], it;

    tu_init(&argc, &argv);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r));
    garbage(&st);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK_PROC_NULL_STATUS(st, MPI_INT);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
    garbage(&st);
    do {
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    } while (!flag);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r));
    garbage(&st);
    do {
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    } while (!flag);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rs[0]));
    CHECK_MPI(MPI_Irecv(&z, 1, MPI_INT, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rs[1]));
    garbage(&sts[0]);
    garbage(&sts[1]);
    CHECK_MPI(MPI_Waitall(2, rs, sts));
    CHECK_PROC_NULL_STATUS(sts[0], MPI_INT);
    CHECK_PROC_NULL_STATUS(sts[1], MPI_INT);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rs[0]));
    rs[1] = MPI_REQUEST_NULL;
    garbage(&st);
    CHECK_MPI(MPI_Waitany(2, rs, &idx, &st));
    CHECK_EQ(idx, 0);
    CHECK_PROC_NULL_STATUS(st, MPI_INT);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rs[1]));
    garbage(&sts[0]);
    CHECK_MPI(MPI_Waitsome(2, rs, &out, idxs, sts));
    CHECK_EQ(out, 1);
    CHECK_EQ(idxs[0], 1);
    CHECK_PROC_NULL_STATUS(sts[0], MPI_INT);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rs[0]));
    out = 0;
    while (out == 0) {
        garbage(&sts[0]);
        CHECK_MPI(MPI_Testsome(2, rs, &out, idxs, sts));
    }
    CHECK_EQ(out, 1);
    CHECK_PROC_NULL_STATUS(sts[0], MPI_INT);

    /* Persistent. */
    CHECK_MPI(MPI_Recv_init(&y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r));
    for (it = 0; it < 3; it++) {
        CHECK_MPI(MPI_Start(&r));
        garbage(&st);
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_PROC_NULL_STATUS(st, MPI_INT);
    }
    CHECK_MPI(MPI_Request_free(&r));

    CHECK_EQ(y, 77);
    CHECK_EQ(z, 88);
    return tu_finish();
}
