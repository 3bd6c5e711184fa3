/*
 * Erroneous programs: one collective whose arguments disagree between the ranks, under the
 * default handler MPI_ERRORS_ARE_FATAL. The job must end with a non-zero exit status and a
 * message that says what disagrees (manifest: expect=fail match=...), never wait forever or
 * read past a buffer. The argument chooses the call; rank 0 passes a, the others b:
 *   allreduce a b   MPI_Allreduce of a (b) doubles, MPI_SUM
 *   bcast a b       MPI_Bcast of a (b) bytes from rank 0
 *   alltoall a b    MPI_Alltoall of a (b) ints per block
 *   order           rank 0 calls MPI_Bcast of 1000 ints, the others MPI_Allreduce of 1000
 * Whether the ranks take the same algorithm (then the shared-memory region's signatures
 * disagree) or different ones (then the one served from shared memory sees the other's
 * point-to-point messages of the call) depends on the sizes and the manifest's settings.
 * If every rank returns, rank 0 prints " No Errors" and the program exits 0, which the
 * runner counts as a failure. With a fourth argument "return" the program sets
 * MPI_ERRORS_RETURN instead and every rank must get an error from the call (those lines
 * expect=pass); it then finalizes without another collective. Any size >= 2.
 */
#include "util.h"

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;
    int ret = argc > 4 && !strcmp(argv[4], "return"), rc = MPI_SUCCESS;
    long n;
    void *s, *r;

    tu_init(&argc, &argv);
    if (ret)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    n = tu_rank == 0 ? a : b;
    s = calloc((size_t)(n > 0 ? n : 1000) * (size_t)tu_size, sizeof(double));
    r = calloc((size_t)(n > 0 ? n : 1000) * (size_t)tu_size, sizeof(double));
    CHECK_MSG(s && r, "out of memory");
    if (!strcmp(what, "allreduce"))
        rc = MPI_Allreduce(s, r, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "bcast"))
        rc = MPI_Bcast(s, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    else if (!strcmp(what, "alltoall"))
        rc = MPI_Alltoall(s, (int)n, MPI_INT, r, (int)n, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(what, "order")) {
        if (tu_rank == 0)
            MPI_Bcast(s, 1000, MPI_INT, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(s, r, 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else
        TU_FAIL("usage: mismatch allreduce|bcast|alltoall a b, or mismatch order");
    if (ret) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        CHECK_MSG(rc != MPI_SUCCESS, "the call returned MPI_SUCCESS at rank %d", tu_rank);
        MPI_Error_string(rc, msg, &len);
        TU_LOG("rank %d: %s\n", tu_rank, msg);
    } else {
        /* A rank that returns waits here for the others (or for the end of the job). */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(s);
    free(r);
    tu_finish();
    return 0;
}
