/*
 * Datatype names, size lookups and bad arguments.
 *
 * - MPI_Type_get_name of predefined types gives their names; a new derived type has an empty
 *   name; MPI_Type_set_name sets it (truncation at MPI_MAX_OBJECT_NAME - 1 characters).
 * - MPI_Type_match_size finds a type of the asked size for each type class, and fails for a
 *   size that has none.
 * - MPI_Type_create_f90_integer/real/complex give types of the needed sizes, the same handle
 *   each time (and predefined ones: MPI_Type_free of them is an error).
 * - Sizes and extents in their _x (and _c) forms agree with the plain ones.
 * - Bad arguments give the standard's error classes under MPI_ERRORS_RETURN: negative counts,
 *   MPI_DATATYPE_NULL, freeing a predefined type, an uncommitted type in a send, negative
 *   block lengths, subarray bounds outside the array, darray grids that do not match, NULL
 *   for MPI_Type_get_(true_)extent's outputs.
 * One process or more (each checks alone).
 */
#include "util.h"

static void name_is(MPI_Datatype t, const char *want)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    memset(name, 'x', sizeof name);
    CHECK_MPI(MPI_Type_get_name(t, name, &len));
    CHECK_MSG(strcmp(name, want) == 0 && len == (int)strlen(want), "name \"%s\" (%d), expected %s",
              name, len, want);
}

static void test_names(void)
{
    name_is(MPI_INT, "MPI_INT");
    name_is(MPI_DOUBLE, "MPI_DOUBLE");
    name_is(MPI_CHAR, "MPI_CHAR");
    name_is(MPI_BYTE, "MPI_BYTE");
    name_is(MPI_PACKED, "MPI_PACKED");
    name_is(MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG");
    name_is(MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
    name_is(MPI_2INT, "MPI_2INT");
    /* One handle in MPICH's ABI; MPICH and Open MPI both call it MPI_C_COMPLEX. */
    name_is(MPI_C_COMPLEX, "MPI_C_COMPLEX");

    MPI_Datatype t, d;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
    name_is(t, "");
    CHECK_MPI(MPI_Type_set_name(t, "pair of ints"));
    name_is(t, "pair of ints");
    CHECK_MPI(MPI_Type_set_name(t, "renamed"));
    name_is(t, "renamed");
    CHECK_MPI(MPI_Type_commit(&t));
    name_is(t, "renamed");
    /* a name longer than the limit is truncated */
    char longname[MPI_MAX_OBJECT_NAME + 40];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_MPI(MPI_Type_set_name(t, longname));
    char got[MPI_MAX_OBJECT_NAME];
    int len;
    CHECK_MPI(MPI_Type_get_name(t, got, &len));
    CHECK_EQ(len, MPI_MAX_OBJECT_NAME - 1);
    CHECK_EQ(strlen(got), MPI_MAX_OBJECT_NAME - 1);
    CHECK_MPI(MPI_Type_dup(t, &d));
    CHECK_MPI(MPI_Type_free(&d));
    CHECK_MPI(MPI_Type_free(&t));
}

static void size_of(MPI_Datatype t, int want)
{
    int sz;
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK_EQ(sz, want);
}

static void test_match(void)
{
    MPI_Datatype t;
    int sizes_int[] = {1, 2, 4, 8}, sizes_real[] = {4, 8}, sizes_cplx[] = {8, 16};
    for (int i = 0; i < 4; i++) {
        CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, sizes_int[i], &t));
        size_of(t, sizes_int[i]);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_REAL, sizes_real[i], &t));
        size_of(t, sizes_real[i]);
        CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, sizes_cplx[i], &t));
        size_of(t, sizes_cplx[i]);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &t) != MPI_SUCCESS);
    CHECK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 5, &t) != MPI_SUCCESS);
    CHECK(MPI_Type_match_size(12345, 4, &t) != MPI_SUCCESS);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void test_f90(void)
{
    MPI_Datatype a, b;
    /* 9 decimal digits need 4 bytes, 18 need 8 */
    CHECK_MPI(MPI_Type_create_f90_integer(9, &a));
    size_of(a, 4);
    CHECK_MPI(MPI_Type_create_f90_integer(9, &b));
    CHECK(a == b);
    CHECK_MPI(MPI_Type_create_f90_integer(18, &a));
    size_of(a, 8);
    /* precision 6 is a 4-byte real, 15 an 8-byte one */
    CHECK_MPI(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &a));
    size_of(a, 4);
    CHECK_MPI(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &a));
    size_of(a, 8);
    CHECK_MPI(MPI_Type_create_f90_real(MPI_UNDEFINED, 300, &a));
    size_of(a, 8);
    CHECK_MPI(MPI_Type_create_f90_complex(15, MPI_UNDEFINED, &a));
    size_of(a, 16);
    int ni, na, nd, comb;
    CHECK_MPI(MPI_Type_get_envelope(a, &ni, &na, &nd, &comb));
    CHECK_EQ(comb, MPI_COMBINER_F90_COMPLEX);
    CHECK_EQ(ni, 2);
    int ints[2];
    CHECK_MPI(MPI_Type_get_contents(a, 2, 0, 0, ints, NULL, NULL));
    CHECK(ints[0] == 15 && ints[1] == MPI_UNDEFINED);
    /* a value out of range cannot be represented */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Type_create_f90_integer(1000, &a) != MPI_SUCCESS);
    CHECK(MPI_Type_create_f90_real(1000, MPI_UNDEFINED, &a) != MPI_SUCCESS);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void test_x_forms(void)
{
    MPI_Datatype t;
    MPI_Count sz, lb, ext, tlb, text;
    int bl[2] = {3, 1}, di[2] = {2, 10};
    CHECK_MPI(MPI_Type_indexed(2, bl, di, MPI_DOUBLE, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Type_size_x(t, &sz));
    CHECK_EQ(sz, 32);
    CHECK_MPI(MPI_Type_get_extent_x(t, &lb, &ext));
    CHECK(lb == 16 && ext == 72);
    CHECK_MPI(MPI_Type_get_true_extent_x(t, &tlb, &text));
    CHECK(tlb == 16 && text == 72);
#if MPI_VERSION >= 4
    MPI_Count csz, clb, cext;
    CHECK_MPI(MPI_Type_size_c(t, &csz));
    CHECK_EQ(csz, 32);
    CHECK_MPI(MPI_Type_get_extent_c(t, &clb, &cext));
    CHECK(clb == 16 && cext == 72);
    CHECK_MPI(MPI_Type_get_true_extent_c(t, &clb, &cext));
    CHECK(clb == 16 && cext == 72);
    /* a large-count vector: 3 blocks of 2^31 + 1 bytes does not fit an int size */
    MPI_Datatype big;
    CHECK_MPI(MPI_Type_vector_c(3, (MPI_Count)1 << 31, ((MPI_Count)1 << 31) + 8, MPI_BYTE, &big));
    CHECK_MPI(MPI_Type_size_c(big, &csz));
    CHECK_EQ(csz, 3 * ((MPI_Count)1 << 31));
    int isz;
    CHECK_MPI(MPI_Type_size(big, &isz));
    CHECK_EQ(isz, MPI_UNDEFINED);
    CHECK_MPI(MPI_Type_size_x(big, &sz));
    CHECK_EQ(sz, 3 * ((MPI_Count)1 << 31));
    CHECK_MPI(MPI_Type_free(&big));
#endif
    CHECK_MPI(MPI_Type_free(&t));
}

static void test_errors(void)
{
    MPI_Datatype t = MPI_DATATYPE_NULL, u;
    int rc;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Type_contiguous(-1, MPI_INT, &t);
    CHECK_CLASS(rc, MPI_ERR_COUNT);
    rc = MPI_Type_vector(2, 1, 1, MPI_DATATYPE_NULL, &t);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    u = MPI_DATATYPE_NULL;
    rc = MPI_Type_commit(&u);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    u = MPI_INT;
    rc = MPI_Type_free(&u);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    if (!tu_quirk("arg_checks")) {
        MPI_Aint lb, ext;
        MPI_Count clb;
        rc = MPI_Type_get_extent(MPI_INT, &lb, NULL);
        CHECK_CLASS(rc, MPI_ERR_ARG);
        rc = MPI_Type_get_true_extent(MPI_INT, NULL, &ext);
        CHECK_CLASS(rc, MPI_ERR_ARG);
        rc = MPI_Type_get_true_extent_x(MPI_INT, &clb, NULL);
        CHECK_CLASS(rc, MPI_ERR_ARG);
    }
    int bl[2] = {1, -2}, di[2] = {0, 4};
    rc = MPI_Type_indexed(2, bl, di, MPI_INT, &t);
    CHECK(rc != MPI_SUCCESS);
    int sizes[2] = {4, 4}, subs[2] = {2, 3}, starts[2] = {1, 2};
    if (!tu_quirk("arg_checks")) {
        rc = MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t);
        CHECK_CLASS(rc, MPI_ERR_ARG);
        rc = MPI_Type_create_subarray(2, sizes, subs, starts, 12345, MPI_INT, &t);
        CHECK_CLASS(rc, MPI_ERR_ARG);
    }
    int gs[2] = {8, 8}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK},
        dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {2, 2};
    /* rank 4 of a 2 x 2 grid */
    rc = MPI_Type_create_darray(4, 4, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &t);
    CHECK(rc != MPI_SUCCESS);
    /* a block size too small to cover the array */
    dargs[0] = 2;
    rc = MPI_Type_create_darray(4, 0, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &t);
    CHECK(rc != MPI_SUCCESS);

    /* an uncommitted type in communication */
    int buf[4] = {0};
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &u));
    MPI_Request r;
    rc = MPI_Isend(buf, 1, u, tu_rank, 0, MPI_COMM_WORLD, &r);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    CHECK_MPI(MPI_Type_free(&u));

    /* MPI_Pack into a buffer too small */
    int pos = 0;
    char out[4];
    if (!tu_quirk("arg_checks")) {
        rc = MPI_Pack(buf, 4, MPI_INT, out, 4, &pos, MPI_COMM_WORLD);
        CHECK(rc != MPI_SUCCESS);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    test_names();
    test_match();
    test_f90();
    test_x_forms();
    test_errors();
    return tu_finish();
}
