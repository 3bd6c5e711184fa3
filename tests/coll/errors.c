/*
 * Erroneous collective calls return the error class the standard names (with
 * MPI_ERRORS_RETURN on the communicator), and the communicator stays usable afterwards:
 * a root out of range (MPI_ERR_ROOT), a negative count (MPI_ERR_COUNT), MPI_DATATYPE_NULL
 * (MPI_ERR_TYPE), MPI_OP_NULL and an operation that does not apply to the type (MPI_ERR_OP),
 * MPI_COMM_NULL (MPI_ERR_COMM), an uncommitted datatype (MPI_ERR_TYPE), freeing a predefined
 * operation (MPI_ERR_OP); a send buffer that is the receive buffer, or (allgather) this
 * process's own block of it, without MPI_IN_PLACE, and MPI_IN_PLACE or aliased buffers in
 * MPI_Reduce_local (MPI_ERR_BUFFER). Every process makes the same erroneous calls, so no
 * process waits for another. Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int np, me, x = 1, y = 0, rc;
    double d = 1.0, dr = 0.0;
    tu_init(&argc, &argv);
    np = tu_size;
    me = tu_rank;
    (void)me;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    rc = MPI_Bcast(&x, 1, MPI_INT, np, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_ROOT);
    rc = MPI_Bcast(&x, 1, MPI_INT, -1, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_ROOT);
    rc = MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, np + 3, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_ROOT);
    if (!tu_quirk("negative_count")) {
        rc = MPI_Allreduce(&x, &y, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK_CLASS(rc, MPI_ERR_COUNT);
        rc = MPI_Bcast(&x, -5, MPI_INT, 0, MPI_COMM_WORLD);
        CHECK_CLASS(rc, MPI_ERR_COUNT);
    }
    /* Which argument is checked first is not specified: the type or the operation. */
    rc = MPI_Allreduce(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
    {
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK_MSG(cls == MPI_ERR_TYPE || cls == MPI_ERR_OP, "class %d", cls);
    }
    rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_OP);
    rc = MPI_Allreduce(&d, &dr, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_OP);
    rc = MPI_Reduce_local(&d, &dr, 1, MPI_DOUBLE, MPI_LXOR);
    if (!tu_quirk("reduce_local_logical_float"))
        CHECK_CLASS(rc, MPI_ERR_OP);
    rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_OP);

    MPI_Request rq = MPI_REQUEST_NULL;
    rc = MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, &rq);
    CHECK_CLASS(rc, MPI_ERR_OP);
    rc = MPI_Ibcast(&x, 1, MPI_INT, np, MPI_COMM_WORLD, &rq);
    CHECK_CLASS(rc, MPI_ERR_ROOT);

    MPI_Datatype v;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &v));
    int two[2] = {1, 2};
    rc = MPI_Bcast(two, 1, v, 0, MPI_COMM_WORLD);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    CHECK_MPI(MPI_Type_free(&v));

    /* Aliased buffers. In an allgather each process passes its own block of the receive
     * buffer as the send buffer: every process must refuse it, or the others wait for ever
     * for the one that did. */
    {
        int *all = calloc((size_t)np, sizeof(int)), *cnt = calloc((size_t)np, sizeof(int));
        int *dsp = calloc((size_t)np, sizeof(int)), i;
        CHECK(all && cnt && dsp);
        for (i = 0; i < np; i++) {
            cnt[i] = 1;
            dsp[i] = i;
        }
        if (!tu_quirk("no_alias_check")) {
            rc = MPI_Allreduce(all, all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
            rc = MPI_Allgather(&all[me], 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
            rc = MPI_Allgatherv(&all[me], 1, MPI_INT, all, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
            rc = MPI_Iallgather(&all[me], 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &rq);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
            rc = MPI_Reduce_local(MPI_IN_PLACE, all, 1, MPI_INT, MPI_SUM);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
            rc = MPI_Reduce_local(all, all, 1, MPI_INT, MPI_SUM);
            CHECK_CLASS(rc, MPI_ERR_BUFFER);
        }
        free(all);
        free(cnt);
        free(dsp);
    }

    MPI_Op sum = MPI_SUM;
    rc = MPI_Op_free(&sum);
    CHECK_CLASS(rc, MPI_ERR_OP);

    /* MPI_COMM_NULL: the error goes to MPI_COMM_WORLD's handler (MPI-4.0 9.3). */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Barrier(MPI_COMM_NULL);
    CHECK_CLASS(rc, MPI_ERR_COMM);

    /* Still usable. */
    x = 1;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(x, np);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return tu_finish();
}
