/*
 * MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size with "external32": every
 * value is written big-endian with the standard's sizes, in type-map order, whatever the host;
 * unpacking restores the values (and leaves gaps untouched); positions advance by the packed
 * size; a buffer too small is an error and an unknown representation is an error. Also the
 * packed form crosses processes: rank r packs, its successor unpacks (any number of
 * processes).
 */
#include "util.h"
#include <stddef.h>
#include <stdint.h>

static const char *ext32 = "external32";

/* Pack n elements of t from buf; the result must be exactly `want` (len bytes). */
static void packs_to(const char *what, const void *buf, int n, MPI_Datatype t,
                     const unsigned char *want, int len)
{
    unsigned char out[256];
    MPI_Aint size = -1, pos = 0;
    CHECK(len <= (int)sizeof out);
    CHECK_MPI(MPI_Pack_external_size(ext32, n, t, &size));
    CHECK_MSG(size == len, "%s: Pack_external_size %ld, expected %d", what, (long)size, len);
    memset(out, 0xcc, sizeof out);
    CHECK_MPI(MPI_Pack_external(ext32, buf, n, t, out, (MPI_Aint)sizeof out, &pos));
    CHECK_MSG(pos == len, "%s: position %ld after packing, expected %d", what, (long)pos, len);
    for (int i = 0; i < len; i++)
        CHECK_MSG(out[i] == want[i], "%s: packed byte %d is 0x%02x, expected 0x%02x", what, i,
                  out[i], want[i]);
    CHECK_EQ(out[len], 0xcc);
}

static void test_basic(void)
{
    int32_t i4[2] = {0x01020304, -2};
    packs_to("int", i4, 2, MPI_INT,
             (const unsigned char[]){1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe}, 8);
    int16_t s = 0x0a0b;
    packs_to("short", &s, 1, MPI_SHORT, (const unsigned char[]){0x0a, 0x0b}, 2);
    int64_t ll = 0x0102030405060708LL;
    packs_to("long long", &ll, 1, MPI_LONG_LONG, (const unsigned char[]){1, 2, 3, 4, 5, 6, 7, 8},
             8);
    double d = 1.0; /* IEEE 754: 3ff0000000000000 */
    packs_to("double", &d, 1, MPI_DOUBLE,
             (const unsigned char[]){0x3f, 0xf0, 0, 0, 0, 0, 0, 0}, 8);
    float f = -2.0f; /* c0000000 */
    packs_to("float", &f, 1, MPI_FLOAT, (const unsigned char[]){0xc0, 0, 0, 0}, 4);
    char c[3] = {'x', 'y', 'z'};
    packs_to("char", c, 3, MPI_CHAR, (const unsigned char[]){'x', 'y', 'z'}, 3);
    uint64_t u8 = 0xf1e2d3c4b5a69788ULL;
    packs_to("uint64_t", &u8, 1, MPI_UINT64_T,
             (const unsigned char[]){0xf1, 0xe2, 0xd3, 0xc4, 0xb5, 0xa6, 0x97, 0x88}, 8);
}

/* A vector and a struct with gaps: type-map order, big-endian, gaps untouched on unpack. */
static void test_derived(void)
{
    int32_t m[12];
    MPI_Datatype col;
    for (int i = 0; i < 12; i++)
        m[i] = 0x100 * i + 1;
    CHECK_MPI(MPI_Type_vector(3, 1, 4, MPI_INT32_T, &col));
    CHECK_MPI(MPI_Type_commit(&col));
    packs_to("vector column", m + 1, 1, col,
             (const unsigned char[]){0, 0, 1, 1, 0, 0, 5, 1, 0, 0, 9, 1}, 12);

    unsigned char packed[64];
    MPI_Aint pos = 0;
    int32_t back[12];
    CHECK_MPI(MPI_Pack_external(ext32, m + 1, 1, col, packed, sizeof packed, &pos));
    for (int i = 0; i < 12; i++)
        back[i] = -1;
    pos = 0;
    CHECK_MPI(MPI_Unpack_external(ext32, packed, 12, &pos, back + 1, 1, col));
    CHECK_EQ(pos, 12);
    for (int i = 0; i < 12; i++)
        CHECK_EQ(back[i], (i % 4 == 1) ? m[i] : -1);
    CHECK_MPI(MPI_Type_free(&col));

    if (tu_quirk("ext32_struct"))
        return;
    struct rec {
        char tag;
        double x;
        short s[2];
    } r[2] = {{'A', 0.5, {1, -1}}, {'B', -0.25, {0x1234, 2}}}, rb[2];
    int bl[3] = {1, 1, 2};
    MPI_Aint dp[3] = {offsetof(struct rec, tag), offsetof(struct rec, x), offsetof(struct rec, s)};
    MPI_Datatype ts[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, st;
    CHECK_MPI(MPI_Type_create_struct(3, bl, dp, ts, &st));
    CHECK_MPI(MPI_Type_commit(&st));
    /* 0.5 = 3fe0..., -0.25 = bfd0... */
    packs_to("struct", r, 2, st,
             (const unsigned char[]){'A', 0x3f, 0xe0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff,
                                     'B', 0xbf, 0xd0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 2},
             26);
    pos = 0;
    CHECK_MPI(MPI_Pack_external(ext32, r, 2, st, packed, sizeof packed, &pos));
    memset(rb, 0x77, sizeof rb);
    pos = 0;
    CHECK_MPI(MPI_Unpack_external(ext32, packed, sizeof packed, &pos, rb, 2, st));
    CHECK_EQ(pos, 26);
    for (int i = 0; i < 2; i++) {
        CHECK(rb[i].tag == r[i].tag && rb[i].x == r[i].x && rb[i].s[0] == r[i].s[0] &&
              rb[i].s[1] == r[i].s[1]);
        CHECK_EQ(((unsigned char *)&rb[i])[1], 0x77); /* padding after tag */
    }

    /* Two packs in a row append at the position. */
    pos = 0;
    int32_t a = 5, b = 6;
    CHECK_MPI(MPI_Pack_external(ext32, &a, 1, MPI_INT, packed, sizeof packed, &pos));
    CHECK_MPI(MPI_Pack_external(ext32, &b, 1, MPI_INT, packed, sizeof packed, &pos));
    CHECK_EQ(pos, 8);
    CHECK(packed[3] == 5 && packed[7] == 6);

    /* Across processes: rank r packs a struct array, rank r+1 unpacks it. */
    int next = (tu_rank + 1) % tu_size, prev = (tu_rank + tu_size - 1) % tu_size;
    r[0].x = tu_rank + 0.125;
    pos = 0;
    CHECK_MPI(MPI_Pack_external(ext32, r, 2, st, packed, sizeof packed, &pos));
    unsigned char in[64];
    CHECK_MPI(MPI_Sendrecv(packed, (int)pos, MPI_BYTE, next, 3, in, sizeof in, MPI_BYTE, prev, 3,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    pos = 0;
    CHECK_MPI(MPI_Unpack_external(ext32, in, sizeof in, &pos, rb, 2, st));
    CHECK(rb[0].x == prev + 0.125 && rb[1].s[0] == 0x1234);
    CHECK_MPI(MPI_Type_free(&st));
}

static void test_errors(void)
{
    int32_t v[4] = {1, 2, 3, 4};
    unsigned char out[16];
    MPI_Aint pos = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc;
    if (!tu_quirk("ext32_nocheck")) {
        /* 16 bytes do not fit in 8 */
        rc = MPI_Pack_external(ext32, v, 4, MPI_INT, out, 8, &pos);
        CHECK(rc != MPI_SUCCESS);
        /* unpacking more than the input holds */
        pos = 0;
        rc = MPI_Unpack_external(ext32, out, 4, &pos, v, 2, MPI_INT);
        CHECK(rc != MPI_SUCCESS);
    }
    /* an unknown data representation */
    if (!tu_quirk("ext32_datarep")) {
        pos = 0;
        rc = MPI_Pack_external("no-such-representation", v, 1, MPI_INT, out, 16, &pos);
        CHECK(rc != MPI_SUCCESS);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    test_basic();
    test_derived();
    test_errors();
    return tu_finish();
}
