/*
 * Bad arguments to the communicator, group and topology calls, under MPI_ERRORS_RETURN: each
 * is reported as an error of the expected class (where the standard or common practice fixes
 * one) and leaves the program able to go on: MPI_COMM_NULL to size/rank/dup/split/free
 * (MPI_ERR_COMM); an intercommunicator's local leader out of range (MPI_ERR_RANK, or
 * MPI_ERR_ARG); topology queries on a communicator without that topology
 * (MPI_ERR_TOPOLOGY); Cart_create with more processes in the grid than in the
 * communicator; Dims_create with a fixed dimension that does not divide
 * the size (MPI_ERR_DIMS); Cart_coords of a rank out of range (MPI_ERR_RANK); Group_incl of a
 * bad group (MPI_ERR_GROUP). Afterwards a dup and a split still work. Any number of
 * processes.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int n, rc, v, flag;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Group g;

    tu_init(&argc, &argv);
    n = tu_size;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    rc = MPI_Comm_size(MPI_COMM_NULL, &v);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    rc = MPI_Comm_rank(MPI_COMM_NULL, &v);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    rc = MPI_Comm_dup(MPI_COMM_NULL, &c);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    rc = MPI_Comm_split(MPI_COMM_NULL, 0, 0, &c);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    c = MPI_COMM_NULL;
    rc = MPI_Comm_free(&c);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    rc = MPI_Comm_test_inter(MPI_COMM_NULL, &flag);
    CHECK_CLASS(rc, MPI_ERR_COMM);

    /* A local leader that is not a rank of the local communicator (a local check: every
     * process gives the same bad value, so none waits for the others). */
    rc = MPI_Intercomm_create(MPI_COMM_SELF, 5, MPI_COMM_WORLD, 0, 1, &c);
    CHECK(rc != MPI_SUCCESS);
    if (rc != MPI_SUCCESS) { /* MPI_ERR_RANK here and in MPICH, MPI_ERR_ARG in Open MPI */
        int cls;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RANK || cls == MPI_ERR_ARG);
    }

    /* Topology queries without the topology. */
    rc = MPI_Cartdim_get(MPI_COMM_WORLD, &v);
    CHECK_CLASS(rc, MPI_ERR_TOPOLOGY);
    {
        int coords[2];
        rc = MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, coords);
        CHECK_CLASS(rc, MPI_ERR_TOPOLOGY);
    }
    {
        int nn, ne;
        rc = MPI_Graphdims_get(MPI_COMM_WORLD, &nn, &ne);
        CHECK_CLASS(rc, MPI_ERR_TOPOLOGY);
    }

    /* Cart_create: more grid points than processes. */
    {
        int dims[1] = {n + 1}, periods[1] = {0};
        rc = MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c);
        CHECK(rc != MPI_SUCCESS);
    }

    /* Dims_create with a fixed dimension that does not divide the number of nodes. */
    {
        int dims[2] = {0, 7};
        rc = MPI_Dims_create(6, 2, dims);
        CHECK_CLASS(rc, MPI_ERR_DIMS);
    }

    /* Cart_coords of a rank outside the grid. */
    {
        int dims[1] = {n}, periods[1] = {1}, coords[1];
        MPI_Comm cart;
        CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
        CHECK_MPI(MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN));
        if (!tu_quirk("unchecked_cart_rank")) {
            rc = MPI_Cart_coords(cart, n, 1, coords);
            CHECK_CLASS(rc, MPI_ERR_RANK);
        }
        CHECK_MPI(MPI_Comm_free(&cart));
    }

    /* A bad group. */
    {
        int r0 = 0;
        rc = MPI_Group_incl(MPI_GROUP_NULL, 1, &r0, &g);
        CHECK_CLASS(rc, MPI_ERR_GROUP);
    }

    /* Everything still works. */
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Comm_size(c, &v));
    CHECK_EQ(v, n);
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, 0, &c));
    CHECK_MPI(MPI_Comm_free(&c));
    return tu_finish();
}
