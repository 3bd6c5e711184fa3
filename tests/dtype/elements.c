/*
 * Receives that fill a derived type only partly, and MPI_BOTTOM with absolute addresses.
 *
 * - MPI_Get_count is MPI_UNDEFINED when the received data is not a whole number of the
 *   receive type, and MPI_Get_elements(_x/_c) counts the basic elements received, for
 *   contiguous, vector and struct types (also a struct whose partial element ends after some
 *   of its fields); MPI_Get_elements with a basic type that does not divide the data gives
 *   MPI_UNDEFINED.
 * - MPI_Status_set_elements sets what Get_count / Get_elements report.
 * - A message longer than the receive buffer is MPI_ERR_TRUNCATE.
 * - A struct of absolute addresses (MPI_Get_address) sent from and received into MPI_BOTTOM,
 *   mixing stack, heap and global variables; also MPI_Pack/MPI_Unpack from MPI_BOTTOM.
 * - MPI_Aint_add / MPI_Aint_diff agree with MPI_Get_address.
 * Ranks pair up (0,1), (2,3), ...; an odd one out talks to itself.
 */
#include "util.h"
#include <stddef.h>

static int peer;

struct pt {
    int id;
    double x, y;
    char c;
};

static MPI_Datatype pt_type(void)
{
    int bl[4] = {1, 1, 1, 1};
    MPI_Aint d[4] = {offsetof(struct pt, id), offsetof(struct pt, x), offsetof(struct pt, y),
                     offsetof(struct pt, c)};
    MPI_Datatype ts[4] = {MPI_INT, MPI_DOUBLE, MPI_DOUBLE, MPI_CHAR}, s, t;
    CHECK_MPI(MPI_Type_create_struct(4, bl, d, ts, &s));
    CHECK_MPI(MPI_Type_create_resized(s, 0, sizeof(struct pt), &t));
    CHECK_MPI(MPI_Type_free(&s));
    CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

/* Send `n` bytes of the pattern `sent` described by (scount, stype); receive into (rcount,
 * rtype); check count and elements. */
static void exchange(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, MPI_Status *st)
{
    CHECK_MPI(MPI_Sendrecv(sbuf, scount, stype, peer, 11, rbuf, rcount, rtype, peer, 11,
                           MPI_COMM_WORLD, st));
}

static void test_partial(void)
{
    MPI_Status st;
    int cnt;
    MPI_Count big;

    /* 7 ints into contiguous(3) x 5: two whole elements and one int */
    int src[15], dst[15];
    MPI_Datatype c3;
    for (int i = 0; i < 15; i++)
        src[i] = 100 + i;
    CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &c3));
    CHECK_MPI(MPI_Type_commit(&c3));
    for (int i = 0; i < 15; i++)
        dst[i] = -1;
    exchange(src, 7, MPI_INT, dst, 5, c3, &st);
    CHECK_MPI(MPI_Get_count(&st, c3, &cnt));
    CHECK_EQ(cnt, MPI_UNDEFINED);
    CHECK_MPI(MPI_Get_elements(&st, c3, &cnt));
    CHECK_EQ(cnt, 7);
    CHECK_MPI(MPI_Get_elements_x(&st, c3, &big));
    CHECK_EQ(big, 7);
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK_EQ(cnt, 7);
    for (int i = 0; i < 15; i++)
        CHECK_EQ(dst[i], i < 7 ? 100 + i : -1);
    /* 6 ints: a whole number of c3 */
    exchange(src, 6, MPI_INT, dst, 5, c3, &st);
    CHECK_MPI(MPI_Get_count(&st, c3, &cnt));
    CHECK_EQ(cnt, 2);
    CHECK_MPI(MPI_Get_elements(&st, c3, &cnt));
    CHECK_EQ(cnt, 6);
    /* bytes that are not a whole number of ints */
    if (!(peer == tu_rank && tu_quirk("self_partial_basic"))) {
        exchange(src, 6, MPI_BYTE, dst, 5, c3, &st);
        CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &cnt));
        CHECK_EQ(cnt, MPI_UNDEFINED);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
        CHECK_EQ(cnt, 6);
    }
    CHECK_MPI(MPI_Type_free(&c3));

    /* a vector receive: 5 ints into vector(4, 2, 3) */
    MPI_Datatype v;
    CHECK_MPI(MPI_Type_vector(4, 2, 3, MPI_INT, &v));
    CHECK_MPI(MPI_Type_commit(&v));
    for (int i = 0; i < 15; i++)
        dst[i] = -1;
    exchange(src, 5, MPI_INT, dst, 1, v, &st);
    CHECK_MPI(MPI_Get_count(&st, v, &cnt));
    CHECK_EQ(cnt, MPI_UNDEFINED);
    CHECK_MPI(MPI_Get_elements(&st, v, &cnt));
    CHECK_EQ(cnt, 5);
    {
        int want[15] = {100, 101, -1, 102, 103, -1, 104, -1, -1, -1, -1, -1, -1, -1, -1};
        for (int i = 0; i < 15; i++)
            CHECK_EQ(dst[i], want[i]);
    }
    CHECK_MPI(MPI_Type_free(&v));

    /* structs: 2 whole structs and the id and x of a third, sent as a struct of basics */
    MPI_Datatype t = pt_type();
    struct pt a[3] = {{1, 1.5, 2.5, 'a'}, {2, 3.5, 4.5, 'b'}, {3, 5.5, -1, 'c'}}, b[4];
    MPI_Datatype part;
    {
        int bl[2] = {2, 1};
        MPI_Aint d[2] = {0, 2 * sizeof(struct pt)};
        MPI_Datatype ts[2] = {t, MPI_DATATYPE_NULL};
        int bl2[2] = {1, 1};
        MPI_Aint d2[2] = {offsetof(struct pt, id), offsetof(struct pt, x)};
        MPI_Datatype ts2[2] = {MPI_INT, MPI_DOUBLE}, idx;
        CHECK_MPI(MPI_Type_create_struct(2, bl2, d2, ts2, &idx));
        ts[1] = idx;
        CHECK_MPI(MPI_Type_create_struct(2, bl, d, ts, &part));
        CHECK_MPI(MPI_Type_commit(&part));
        CHECK_MPI(MPI_Type_free(&idx));
    }
    memset(b, 0, sizeof b);
    b[2].y = 77;
    b[2].c = 'z';
    exchange(a, 1, part, b, 4, t, &st);
    CHECK_MPI(MPI_Get_count(&st, t, &cnt));
    CHECK_EQ(cnt, MPI_UNDEFINED);
    CHECK_MPI(MPI_Get_elements(&st, t, &cnt));
    CHECK_EQ(cnt, 4 + 4 + 2);
    CHECK(b[0].id == 1 && b[0].x == 1.5 && b[0].y == 2.5 && b[0].c == 'a');
    CHECK(b[1].id == 2 && b[1].c == 'b');
    CHECK(b[2].id == 3 && b[2].x == 5.5 && b[2].y == 77 && b[2].c == 'z');
#if MPI_VERSION >= 4
    {
        MPI_Count e;
        CHECK_MPI(MPI_Get_elements_c(&st, t, &e));
        CHECK_EQ(e, 10);
    }
#endif
    CHECK_MPI(MPI_Type_free(&part));

    /* Status_set_elements with a struct type: 8 basics are 2 structs, 9 are not whole */
    MPI_Status s2;
    if (!tu_quirk("set_elements_derived")) {
        CHECK_MPI(MPI_Status_set_elements(&s2, t, 8));
        CHECK_MPI(MPI_Get_count(&s2, t, &cnt));
        CHECK_EQ(cnt, 2);
        CHECK_MPI(MPI_Get_elements(&s2, t, &cnt));
        CHECK_EQ(cnt, 8);
        CHECK_MPI(MPI_Status_set_elements_x(&s2, t, 9));
        CHECK_MPI(MPI_Get_count(&s2, t, &cnt));
        CHECK_EQ(cnt, MPI_UNDEFINED);
        CHECK_MPI(MPI_Get_elements_x(&s2, t, &big));
        CHECK_EQ(big, 9);
    }
    /* and with a vector of ints */
    CHECK_MPI(MPI_Type_vector(2, 2, 5, MPI_INT, &v));
    CHECK_MPI(MPI_Type_commit(&v));
    if (tu_quirk("set_elements_derived"))
        goto done;
    CHECK_MPI(MPI_Status_set_elements(&s2, v, 12));
    CHECK_MPI(MPI_Get_count(&s2, v, &cnt));
    CHECK_EQ(cnt, 3);
    CHECK_MPI(MPI_Get_elements(&s2, v, &cnt));
    CHECK_EQ(cnt, 12);
    CHECK_MPI(MPI_Get_count(&s2, MPI_INT, &cnt));
    CHECK_EQ(cnt, 12);
    CHECK_MPI(MPI_Status_set_elements(&s2, v, 5));
    CHECK_MPI(MPI_Get_count(&s2, v, &cnt));
    CHECK_EQ(cnt, MPI_UNDEFINED);
    CHECK_MPI(MPI_Get_elements(&s2, v, &cnt));
    CHECK_EQ(cnt, 5);
done:
    CHECK_MPI(MPI_Type_free(&v));
    CHECK_MPI(MPI_Type_free(&t));
}

static void test_truncate(void)
{
    int src[8] = {0}, dst[8];
    MPI_Datatype c4;
    MPI_Status st;
    MPI_Request r;
    CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &c4));
    CHECK_MPI(MPI_Type_commit(&c4));
    if (peer == tu_rank && tu_quirk("self_truncate"))
        return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Irecv(dst, 1, c4, peer, 12, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Send(src, 6, MPI_INT, peer, 12, MPI_COMM_WORLD));
    int rc = MPI_Wait(&r, &st);
    CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK_MPI(MPI_Type_free(&c4));
}

static double global_d[3];

static void test_bottom(void)
{
    int local_i[2] = {11 * tu_rank, 12};
    double *heap = tu_malloc(5 * sizeof(double));
    char tag = (char)('A' + tu_rank);
    for (int i = 0; i < 5; i++)
        heap[i] = tu_rank + i * 0.25;
    for (int i = 0; i < 3; i++)
        global_d[i] = -i - tu_rank;

    int bl[4] = {2, 5, 3, 1};
    MPI_Aint d[4];
    MPI_Datatype ts[4] = {MPI_INT, MPI_DOUBLE, MPI_DOUBLE, MPI_CHAR}, t;
    CHECK_MPI(MPI_Get_address(local_i, &d[0]));
    CHECK_MPI(MPI_Get_address(heap, &d[1]));
    CHECK_MPI(MPI_Get_address(global_d, &d[2]));
    CHECK_MPI(MPI_Get_address(&tag, &d[3]));
    CHECK_MPI(MPI_Type_create_struct(4, bl, d, ts, &t));
    CHECK_MPI(MPI_Type_commit(&t));

    /* Aint arithmetic agrees with Get_address. */
    MPI_Aint a1, a2;
    CHECK_MPI(MPI_Get_address(&heap[3], &a1));
    CHECK_EQ(MPI_Aint_add(d[1], 3 * sizeof(double)), a1);
    CHECK_EQ(MPI_Aint_diff(a1, d[1]), 3 * sizeof(double));
    CHECK_MPI(MPI_Get_address(&local_i[1], &a2));
    CHECK_EQ(MPI_Aint_diff(a2, d[0]), sizeof(int));

    /* Pack from MPI_BOTTOM: int, int, 5 doubles, 3 doubles, char in that order. */
    int psize, pos = 0, pack_ok = !tu_quirk("pack_bottom");
    CHECK_MPI(MPI_Pack_size(1, t, MPI_COMM_WORLD, &psize));
    char *packed = tu_malloc((size_t)psize);
    if (pack_ok) {
    CHECK_MPI(MPI_Pack(MPI_BOTTOM, 1, t, packed, psize, &pos, MPI_COMM_WORLD));
    CHECK_EQ(pos, 2 * 4 + 8 * 8 + 1);
    int si;
    double sd;
    pos = 0;
    CHECK_MPI(MPI_Unpack(packed, psize, &pos, &si, 1, MPI_INT, MPI_COMM_WORLD));
    CHECK_EQ(si, 11 * tu_rank);
    pos = 4 * 2 + 8 * 5;
    CHECK_MPI(MPI_Unpack(packed, psize, &pos, &sd, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    CHECK(sd == -0.0 - tu_rank);
    }

    /* Send the pieces and receive them in place of the peer's: exchange contents. */
    CHECK_MPI(MPI_Sendrecv_replace(MPI_BOTTOM, 1, t, peer, 13, peer, 13, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
    CHECK_EQ(local_i[0], 11 * peer);
    CHECK_EQ(local_i[1], 12);
    for (int i = 0; i < 5; i++)
        CHECK(heap[i] == peer + i * 0.25);
    for (int i = 0; i < 3; i++)
        CHECK(global_d[i] == -i - peer);
    CHECK_EQ(tag, 'A' + peer);

    /* And nonblocking, into MPI_BOTTOM on the receiving side only. */
    if (!pack_ok)
        goto out;
    double in[5];
    MPI_Request rq[2];
    CHECK_MPI(MPI_Irecv(MPI_BOTTOM, 1, t, peer, 14, MPI_COMM_WORLD, &rq[0]));
    for (int i = 0; i < 5; i++)
        in[i] = 1000 + tu_rank;
    (void)in;
    CHECK_MPI(MPI_Isend(packed, psize, MPI_PACKED, peer, 14, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    /* our original values came back from the peer's packed copy of them... the peer packed its
     * own (before the exchange), so now we hold the peer's originals again */
    CHECK_EQ(local_i[0], 11 * peer);
    CHECK(heap[4] == peer + 1.0);
    CHECK_EQ(tag, 'A' + peer);

out:
    free(packed);
    free(heap);
    CHECK_MPI(MPI_Type_free(&t));
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    peer = tu_partner();
    test_partial();
    test_truncate();
    test_bottom();
    return tu_finish();
}
