/*
 * MPI_Type_get_envelope / MPI_Type_get_contents give back exactly the arguments each
 * constructor was called with (combiner, integers, addresses, datatypes, in the standard's
 * order), for every combiner; predefined types are MPI_COMBINER_NAMED and have no contents;
 * derived types returned by get_contents are new handles that can be used and freed, predefined
 * ones are returned as they are. Also the large-count forms (get_envelope_c / get_contents_c)
 * of types made by the ordinary constructors report no large counts. Any number of processes
 * (each checks alone).
 */
#include "util.h"

#define MAXA 64

static int ni, na, nd, comb;
static int ints[MAXA];
static MPI_Aint addrs[MAXA];
static MPI_Datatype types[MAXA];

/* Envelope and contents of t; the combiner must be `want`. */
static void contents(const char *what, MPI_Datatype t, int want, int wi, int wa, int wd)
{
    CHECK_MPI(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK_MSG(comb == want && ni == wi && na == wa && nd == wd,
              "%s: envelope combiner %d ints %d addresses %d types %d, expected %d %d %d %d",
              what, comb, ni, na, nd, want, wi, wa, wd);
    CHECK(ni <= MAXA && na <= MAXA && nd <= MAXA);
    for (int i = 0; i < MAXA; i++) {
        ints[i] = -777;
        addrs[i] = -777;
        types[i] = MPI_DATATYPE_NULL;
    }
    CHECK_MPI(MPI_Type_get_contents(t, ni, na, nd, ints, addrs, types));

#if MPI_VERSION >= 4
    /* The large-count envelope of a type built without large counts has none (MPI 4). */
    MPI_Count ci, ca, cl, cd;
    int cc;
    CHECK_MPI(MPI_Type_get_envelope_c(t, &ci, &ca, &cl, &cd, &cc));
    CHECK_MSG(cc == want && ci == wi && ca == wa && cl == 0 && cd == wd,
              "%s: envelope_c combiner %d ints %lld addresses %lld large %lld types %lld", what,
              cc, (long long)ci, (long long)ca, (long long)cl, (long long)cd);
#endif
}

static void check_ints(const char *what, const int *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_MSG(ints[i] == want[i], "%s: integer %d is %d, expected %d", what, i, ints[i],
                  want[i]);
}

static void check_addrs(const char *what, const MPI_Aint *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_MSG(addrs[i] == want[i], "%s: address %d is %ld, expected %ld", what, i,
                  (long)addrs[i], (long)want[i]);
}

/* Returned datatypes: predefined ones must be the same handle; derived ones are checked by
 * the caller and freed here. */
static void free_types(void)
{
    for (int i = 0; i < nd; i++) {
        int a, b, c, k;
        CHECK(types[i] != MPI_DATATYPE_NULL);
        CHECK_MPI(MPI_Type_get_envelope(types[i], &a, &b, &c, &k));
        if (k != MPI_COMBINER_NAMED)
            CHECK_MPI(MPI_Type_free(&types[i]));
    }
}

static void test_named(void)
{
    MPI_Datatype named[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_BYTE, MPI_PACKED, MPI_FLOAT_INT,
                            MPI_2INT, MPI_LONG_DOUBLE, MPI_INT64_T, MPI_C_DOUBLE_COMPLEX, MPI_AINT,
                            MPI_COUNT, MPI_OFFSET};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (named[i] == MPI_DATATYPE_NULL)
            continue;
        CHECK_MPI(MPI_Type_get_envelope(named[i], &ni, &na, &nd, &comb));
        CHECK_MSG(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0,
                  "predefined type %d: combiner %d (%d %d %d)", (int)i, comb, ni, na, nd);
    }
    /* get_contents of a predefined type is an error */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Type_get_contents(MPI_INT, 0, 0, 0, ints, addrs, types);
    CHECK(rc != MPI_SUCCESS);
    rc = MPI_Type_get_envelope(MPI_DATATYPE_NULL, &ni, &na, &nd, &comb);
    CHECK_CLASS(rc, MPI_ERR_TYPE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void test_simple(void)
{
    MPI_Datatype t, u;

    CHECK_MPI(MPI_Type_contiguous(7, MPI_DOUBLE, &t));
    contents("contiguous", t, MPI_COMBINER_CONTIGUOUS, 1, 0, 1);
    check_ints("contiguous", (int[]){7}, 1);
    CHECK(types[0] == MPI_DOUBLE);
    free_types();

    /* A derived type inside: get_contents returns a new handle to an equal type. */
    CHECK_MPI(MPI_Type_vector(3, 2, -5, t, &u));
    contents("vector", u, MPI_COMBINER_VECTOR, 3, 0, 1);
    check_ints("vector", (int[]){3, 2, -5}, 3);
    {
        int a, b, c, k, sz;
        CHECK_MPI(MPI_Type_get_envelope(types[0], &a, &b, &c, &k));
        CHECK_EQ(k, MPI_COMBINER_CONTIGUOUS);
        CHECK_MPI(MPI_Type_size(types[0], &sz));
        CHECK_EQ(sz, 56);
    }
    free_types();
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_create_hvector(4, 1, 100, MPI_INT, &u));
    contents("hvector", u, MPI_COMBINER_HVECTOR, 2, 1, 1);
    check_ints("hvector", (int[]){4, 1}, 2);
    check_addrs("hvector", (MPI_Aint[]){100}, 1);
    CHECK(types[0] == MPI_INT);
    CHECK_MPI(MPI_Type_free(&u));

    int bl[3] = {2, 0, 5}, di[3] = {10, 3, -4};
    CHECK_MPI(MPI_Type_indexed(3, bl, di, MPI_SHORT, &u));
    contents("indexed", u, MPI_COMBINER_INDEXED, 7, 0, 1);
    check_ints("indexed", (int[]){3, 2, 0, 5, 10, 3, -4}, 7);
    CHECK(types[0] == MPI_SHORT);
    CHECK_MPI(MPI_Type_free(&u));

    MPI_Aint hd[3] = {-8, 64, 1000};
    CHECK_MPI(MPI_Type_create_hindexed(3, bl, hd, t, &u));
    contents("hindexed", u, MPI_COMBINER_HINDEXED, 4, 3, 1);
    check_ints("hindexed", (int[]){3, 2, 0, 5}, 4);
    check_addrs("hindexed", hd, 3);
    free_types();
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_create_indexed_block(3, 4, di, MPI_FLOAT, &u));
    contents("indexed_block", u, MPI_COMBINER_INDEXED_BLOCK, 5, 0, 1);
    check_ints("indexed_block", (int[]){3, 4, 10, 3, -4}, 5);
    CHECK(types[0] == MPI_FLOAT);
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_create_hindexed_block(3, 2, hd, MPI_CHAR, &u));
    contents("hindexed_block", u, MPI_COMBINER_HINDEXED_BLOCK, 2, 3, 1);
    check_ints("hindexed_block", (int[]){3, 2}, 2);
    check_addrs("hindexed_block", hd, 3);
    CHECK(types[0] == MPI_CHAR);
    CHECK_MPI(MPI_Type_free(&u));

    MPI_Datatype st[3] = {MPI_CHAR, t, MPI_LONG};
    CHECK_MPI(MPI_Type_create_struct(3, bl, hd, st, &u));
    contents("struct", u, MPI_COMBINER_STRUCT, 4, 3, 3);
    check_ints("struct", (int[]){3, 2, 0, 5}, 4);
    check_addrs("struct", hd, 3);
    CHECK(types[0] == MPI_CHAR && types[2] == MPI_LONG);
    free_types();
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_create_resized(MPI_INT, -4, 32, &u));
    contents("resized", u, MPI_COMBINER_RESIZED, 0, 2, 1);
    check_addrs("resized", (MPI_Aint[]){-4, 32}, 2);
    CHECK(types[0] == MPI_INT);
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_dup(t, &u));
    contents("dup", u, MPI_COMBINER_DUP, 0, 0, 1);
    free_types();
    CHECK_MPI(MPI_Type_free(&u));
    /* dup of a predefined type */
    CHECK_MPI(MPI_Type_dup(MPI_INT, &u));
    contents("dup of MPI_INT", u, MPI_COMBINER_DUP, 0, 0, 1);
    CHECK(types[0] == MPI_INT);
    CHECK_MPI(MPI_Type_free(&u));

    int sizes[3] = {10, 20, 30}, subs[3] = {2, 3, 4}, starts[3] = {1, 0, 5};
    CHECK_MPI(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &u));
    contents("subarray", u, MPI_COMBINER_SUBARRAY, 11, 0, 1);
    check_ints("subarray", (int[]){3, 10, 20, 30, 2, 3, 4, 1, 0, 5, MPI_ORDER_FORTRAN}, 11);
    CHECK(types[0] == MPI_INT);
    CHECK_MPI(MPI_Type_free(&u));

    int gs[2] = {9, 7}, distrib[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2] = {2, 3};
    CHECK_MPI(MPI_Type_create_darray(6, 4, 2, gs, distrib, dargs, ps, MPI_ORDER_C, MPI_DOUBLE,
                                     &u));
    contents("darray", u, MPI_COMBINER_DARRAY, 4 * 2 + 4, 0, 1);
    check_ints("darray",
               (int[]){6, 4, 2, 9, 7, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC,
                       MPI_DISTRIBUTE_DFLT_DARG, 2, 2, 3, MPI_ORDER_C},
               12);
    CHECK(types[0] == MPI_DOUBLE);
    CHECK_MPI(MPI_Type_free(&u));

    CHECK_MPI(MPI_Type_free(&t));
}

/* The contents stay valid after the inner type is freed (the outer one keeps it alive). */
static void test_lifetime(void)
{
    MPI_Datatype inner, outer;
    int sz;
    CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &inner));
    CHECK_MPI(MPI_Type_vector(2, 1, 4, inner, &outer));
    CHECK_MPI(MPI_Type_free(&inner));
    CHECK_MPI(MPI_Type_commit(&outer));
    contents("vector of a freed type", outer, MPI_COMBINER_VECTOR, 3, 0, 1);
    CHECK_MPI(MPI_Type_size(types[0], &sz));
    CHECK_EQ(sz, 12);
    free_types();
    CHECK_MPI(MPI_Type_size(outer, &sz));
    CHECK_EQ(sz, 24);
    CHECK_MPI(MPI_Type_free(&outer));
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    test_named();
    test_simple();
    test_lifetime();
    return tu_finish();
}
