/*
 * Types made by MPI_Type_create_f90_real/complex/integer are predefined types (MPI-4.1
 * 19.1.9): reductions accept them wherever they accept their base types.
 *  - Allreduce MPI_SUM and MPI_MAX on f90 reals (single and double precision), MPI_SUM and
 *    MPI_BAND on f90 integers (4 and 8 bytes), MPI_PROD on f90 complex; Reduce to every root,
 *    Reduce_local, Iallreduce;
 *  - a duplicate (MPI_Type_dup) and a contiguous type of an f90 type reduce too (Protean
 *    reduces derived types whose basic elements are all of one predefined type);
 *  - the same arguments give the same handle; envelopes name the f90 combiners;
 *  - point-to-point with f90 types;
 *  - MPI_MAX on f90 complex is refused (MPI_ERR_OP) like on MPI_C_DOUBLE_COMPLEX.
 * Any size >= 1.
 */
#include "util.h"

int main(int argc, char **argv)
{
    MPI_Datatype r4, r8, i4, i8, c8, again, dup, cont;
    int ni, na, nd, comb, root;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r4));
    CHECK_MPI(MPI_Type_create_f90_real(15, 300, &r8));
    CHECK_MPI(MPI_Type_create_f90_integer(9, &i4));
    CHECK_MPI(MPI_Type_create_f90_integer(18, &i8));
    CHECK_MPI(MPI_Type_create_f90_complex(15, MPI_UNDEFINED, &c8));
    CHECK_MPI(MPI_Type_create_f90_real(15, 300, &again));
    CHECK(again == r8);
    CHECK_MPI(MPI_Type_get_envelope(r8, &ni, &na, &nd, &comb));
    CHECK_EQ(comb, MPI_COMBINER_F90_REAL);
    CHECK_MPI(MPI_Type_get_envelope(i4, &ni, &na, &nd, &comb));
    CHECK_EQ(comb, MPI_COMBINER_F90_INTEGER);
    {
        int sz;
        CHECK_MPI(MPI_Type_size(r4, &sz));
        CHECK_EQ(sz, 4);
        CHECK_MPI(MPI_Type_size(r8, &sz));
        CHECK_EQ(sz, 8);
        CHECK_MPI(MPI_Type_size(i8, &sz));
        CHECK_EQ(sz, 8);
        CHECK_MPI(MPI_Type_size(c8, &sz));
        CHECK_EQ(sz, 16);
    }

    /* Allreduce on each kind. */
    {
        float f[2] = {(float)tu_rank, 0.5f}, fo[2];
        double d[2] = {tu_rank + 0.25, -1.0 * tu_rank}, dmax[2];
        int32_t a[2] = {tu_rank + 1, 0x7 << tu_rank}, ao[2];
        int64_t l[1] = {(int64_t)1 << (32 + tu_rank % 8)}, lo[1];
        double z[2] = {0.0, 1.0}, zo[2]; /* i on every process: the product is i^size */
        int k, expect_or = 0;
        double sum = 0;
        CHECK_MPI(MPI_Allreduce(f, fo, 2, r4, MPI_SUM, MPI_COMM_WORLD));
        CHECK(fo[0] == (float)(tu_size * (tu_size - 1) / 2));
        CHECK(fo[1] == 0.5f * tu_size);
        CHECK_MPI(MPI_Allreduce(d, dmax, 2, r8, MPI_MAX, MPI_COMM_WORLD));
        CHECK(dmax[0] == tu_size - 1 + 0.25);
        CHECK(dmax[1] == 0.0);
        CHECK_MPI(MPI_Allreduce(a, ao, 2, i4, MPI_SUM, MPI_COMM_WORLD));
        CHECK_EQ(ao[0], tu_size * (tu_size + 1) / 2);
        CHECK_MPI(MPI_Allreduce(a + 1, ao + 1, 1, i4, MPI_BAND, MPI_COMM_WORLD));
        for (k = 0, expect_or = -1; k < tu_size; k++)
            expect_or &= 0x7 << k;
        CHECK_EQ(ao[1], expect_or);
        CHECK_MPI(MPI_Allreduce(l, lo, 1, i8, MPI_SUM, MPI_COMM_WORLD));
        for (k = 0, sum = 0; k < tu_size; k++)
            sum += (double)((int64_t)1 << (32 + k % 8));
        CHECK(lo[0] == (int64_t)sum);
        CHECK_MPI(MPI_Allreduce(z, zo, 1, c8, MPI_PROD, MPI_COMM_WORLD));
        /* i^n cycles through i, -1, -i, 1 */
        {
            static const double re[4] = {1, 0, -1, 0}, im[4] = {0, 1, 0, -1};
            CHECK(zo[0] == re[tu_size % 4] && zo[1] == im[tu_size % 4]);
        }
    }

    /* Reduce to every root, and Reduce_local. */
    for (root = 0; root < tu_size; root++) {
        double v = tu_rank + 1, s = -1;
        CHECK_MPI(MPI_Reduce(&v, &s, 1, r8, MPI_SUM, root, MPI_COMM_WORLD));
        if (tu_rank == root)
            CHECK(s == tu_size * (tu_size + 1) / 2.0);
    }
    {
        int32_t in[3] = {1, 2, 3}, io[3] = {10, 20, 30};
        CHECK_MPI(MPI_Reduce_local(in, io, 3, i4, MPI_PROD));
        CHECK(io[0] == 10 && io[1] == 40 && io[2] == 90);
    }

    /* Nonblocking, and (as Protean allows for every predefined type) derived types built on
     * f90 types. */
    {
        MPI_Request r;
        double v[4] = {1, 2, 3, 4}, o[4];
        int k;
        CHECK_MPI(MPI_Iallreduce(v, o, 4, r8, MPI_SUM, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (k = 0; k < 4; k++)
            CHECK(o[k] == v[k] * tu_size);
    }
    if (!tu_quirk("derived_reduce")) {
        MPI_Request r;
        double v[4] = {1, 2, 3, 4}, o[4];
        int k;
        CHECK_MPI(MPI_Type_dup(r8, &dup));
        CHECK_MPI(MPI_Type_contiguous(2, r8, &cont));
        CHECK_MPI(MPI_Type_commit(&cont));
        CHECK_MPI(MPI_Iallreduce(v, o, 4, dup, MPI_SUM, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (k = 0; k < 4; k++)
            CHECK(o[k] == v[k] * tu_size);
        CHECK_MPI(MPI_Allreduce(v, o, 2, cont, MPI_MIN, MPI_COMM_WORLD));
        for (k = 0; k < 4; k++)
            CHECK(o[k] == v[k]);
        CHECK_MPI(MPI_Type_free(&cont));
        CHECK_MPI(MPI_Type_free(&dup));
    }

    /* Point to point. */
    {
        int next = (tu_rank + 1) % tu_size, prev = (tu_rank + tu_size - 1) % tu_size;
        double sv[3] = {tu_rank, tu_rank + 0.5, -tu_rank}, rv[3];
        MPI_Status st;
        CHECK_MPI(MPI_Sendrecv(sv, 3, r8, next, 5, rv, 3, r8, prev, 5, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, r8, prev, 5, 3);
        CHECK(rv[0] == prev && rv[1] == prev + 0.5 && rv[2] == -prev);
    }

    /* No order on complex numbers. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        double z[2] = {1, 1}, zo[2];
        CHECK_CLASS(MPI_Allreduce(z, zo, 1, c8, MPI_MAX, MPI_COMM_WORLD), MPI_ERR_OP);
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    return tu_finish();
}
