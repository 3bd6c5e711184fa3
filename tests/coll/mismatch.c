/*
 * Erroneous programs: one collective whose arguments disagree between the ranks, under the
 * default handler MPI_ERRORS_ARE_FATAL. The job must end with a non-zero exit status and a
 * message that says what disagrees (manifest: expect=fail match=...), never wait forever or
 * read past a buffer. The argument chooses the call; rank 0 passes a, the others b:
 *   allreduce a b   MPI_Allreduce of a (b) doubles, MPI_SUM
 *   allreduce-op a  MPI_Allreduce of a doubles, MPI_PROD at rank 0 and MPI_SUM elsewhere
 *   bcast a b       MPI_Bcast of a (b) bytes from rank 0
 *   ibcast a b      MPI_Ibcast and MPI_Wait, as bcast
 *   scatter a b     MPI_Scatter from rank 0 of a ints per block; the others receive b
 *   allgather a b   MPI_Allgather: rank 0 sends a ints and the others b, every rank
 *                   receives b per block
 *   alltoall a b    MPI_Alltoall of a (b) ints per block
 *   order           rank 0 calls MPI_Bcast of 1000 ints, the others MPI_Allreduce of 1000
 *   order-barrier   rank 0 calls MPI_Barrier, the others MPI_Bcast of 1000 ints from rank 1
 * Whether the ranks take the same algorithm (then the shared-memory region's signatures
 * disagree) or different ones (then the one served from shared memory sees the other's
 * point-to-point messages of the call) depends on the sizes and the manifest's settings.
 * If every rank returns, rank 0 prints " No Errors" and the program exits 0, which the
 * runner counts as a failure. With a fourth argument "return" the program sets
 * MPI_ERRORS_RETURN instead and every rank must get an error from the call (those lines
 * expect=pass); "return-others": every rank but rank 0 (the root of a bcast or scatter has
 * nothing to wait for and may return success). A fifth argument "then": afterwards every
 * rank calls MPI_Allreduce of one int and MPI_Barrier, which must succeed with the right sum
 * (the failed call left nothing behind that a later one trips over); else it finalizes
 * without another collective. Any size >= 2.
 */
#include "util.h"

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;
    int ret = argc > 4 && !strncmp(argv[4], "return", 6), rc = MPI_SUCCESS;
    int others = ret && !strcmp(argv[4], "return-others");
    int then = argc > 5 && !strcmp(argv[5], "then");
    long n, m;
    void *s, *r;

    tu_init(&argc, &argv);
    if (ret)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    n = tu_rank == 0 ? a : b;
    m = a > b ? a : b;
    s = calloc((size_t)(m > 0 ? m : 1000) * (size_t)tu_size, sizeof(double));
    r = calloc((size_t)(m > 0 ? m : 1000) * (size_t)tu_size, sizeof(double));
    CHECK_MSG(s && r, "out of memory");
    if (!strcmp(what, "allreduce"))
        rc = MPI_Allreduce(s, r, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "allreduce-op"))
        rc = MPI_Allreduce(s, r, (int)a, MPI_DOUBLE, tu_rank == 0 ? MPI_PROD : MPI_SUM,
                           MPI_COMM_WORLD);
    else if (!strcmp(what, "bcast"))
        rc = MPI_Bcast(s, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    else if (!strcmp(what, "ibcast")) {
        MPI_Request req;
        rc = MPI_Ibcast(s, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (!strcmp(what, "scatter"))
        rc = MPI_Scatter(s, (int)a, MPI_INT, r, (int)n, MPI_INT, 0, MPI_COMM_WORLD);
    else if (!strcmp(what, "allgather"))
        rc = MPI_Allgather(s, (int)n, MPI_INT, r, (int)b, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(what, "alltoall"))
        rc = MPI_Alltoall(s, (int)n, MPI_INT, r, (int)n, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(what, "order")) {
        if (tu_rank == 0)
            MPI_Bcast(s, 1000, MPI_INT, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(s, r, 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else if (!strcmp(what, "order-barrier")) {
        if (tu_rank == 0)
            MPI_Barrier(MPI_COMM_WORLD);
        else
            MPI_Bcast(s, 1000, MPI_INT, 1, MPI_COMM_WORLD);
    } else
        TU_FAIL("usage: mismatch allreduce|allreduce-op|bcast|ibcast|scatter|allgather|alltoall"
                " a b [return|return-others [then]], or mismatch order|order-barrier");
    if (ret) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        if (!others || tu_rank != 0)
            CHECK_MSG(rc != MPI_SUCCESS, "the call returned MPI_SUCCESS at rank %d", tu_rank);
        if (rc != MPI_SUCCESS) {
            MPI_Error_string(rc, msg, &len);
            TU_LOG("rank %d: %s\n", tu_rank, msg);
        }
        if (then) {
            int one = 1, sum = 0;
            CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK_EQ(sum, tu_size);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    } else {
        /* A rank that returns waits here for the others (or for the end of the job). */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(s);
    free(r);
    tu_finish();
    return 0;
}
