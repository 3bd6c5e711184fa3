/*
 * MPI_Get_count, MPI_Get_elements, MPI_Get_elements_x (and the _c variants when the header
 * is MPI 4): whole counts, MPI_UNDEFINED when the message is not a whole number of
 * receive-type items, element counts of partial derived-type items, empty messages.
 * Messages go to self (and to the partner when there is one, with the same checks).
 * Any size >= 1.
 */
#include "util.h"

struct pair {
    int i;
    double d;
};

static MPI_Datatype pair_type, triple_type, contig3;

/* Send with stype/scount, receive with rtype/rcount from src; return the status. */
static MPI_Status xfer(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, int peer, int tag)
{
    MPI_Request r;
    MPI_Status st;
    CHECK_MPI(MPI_Isend(sbuf, scount, stype, peer, tag, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Recv(rbuf, rcount, rtype, peer, tag, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    return st;
}

static void check_counts(MPI_Status *st, MPI_Datatype t, int count, int elements)
{
    int c = -7, e = -7;
    MPI_Count ex = -7;
    CHECK_MPI(MPI_Get_count(st, t, &c));
    CHECK_EQ(c, count);
    CHECK_MPI(MPI_Get_elements(st, t, &e));
    CHECK_EQ(e, elements);
    CHECK_MPI(MPI_Get_elements_x(st, t, &ex));
    CHECK_EQ(ex, elements);
#if MPI_VERSION >= 4
    {
        MPI_Count cc = -7, ec = -7;
        CHECK_MPI(MPI_Get_count_c(st, t, &cc));
        CHECK_EQ(cc, count);
        CHECK_MPI(MPI_Get_elements_c(st, t, &ec));
        CHECK_EQ(ec, elements);
    }
#endif
}

static void run(int peer)
{
    MPI_Status st;
    int ibuf[64], jbuf[64], k;
    struct pair ps[4], pr[4];
    unsigned char bytes[64];

    for (k = 0; k < 64; k++)
        ibuf[k] = k;

    /* Basic type, whole counts. */
    st = xfer(ibuf, 10, MPI_INT, jbuf, 64, MPI_INT, peer, 1);
    check_counts(&st, MPI_INT, 10, 10);
    for (k = 0; k < 10; k++)
        CHECK_EQ(jbuf[k], k);
    /* The same message measured in bytes. */
    {
        int c;
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &c));
        CHECK_EQ(c, 10 * (int)sizeof(int));
    }

    /* Bytes: 7 bytes are not a whole number of ints. (Status queries with another type than
     * the receive's are common practice; the count is computed from the byte size.) */
    st = xfer(ibuf, 7, MPI_BYTE, bytes, 64, MPI_BYTE, peer, 2);
    check_counts(&st, MPI_BYTE, 7, 7);
    {
        int c = 0, e = 0;
        MPI_Count ex = 0;
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
        CHECK_EQ(c, MPI_UNDEFINED);
        CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &e));
        CHECK_EQ(e, MPI_UNDEFINED);
        CHECK_MPI(MPI_Get_elements_x(&st, MPI_INT, &ex));
        CHECK_EQ(ex, MPI_UNDEFINED);
    }

    /* Derived: {int, double}. Two whole items: count 2, 4 basic elements. */
    for (k = 0; k < 4; k++) {
        ps[k].i = 10 + k;
        ps[k].d = 0.5 + k;
    }
    st = xfer(ps, 2, pair_type, pr, 4, pair_type, peer, 3);
    check_counts(&st, pair_type, 2, 4);
    CHECK(pr[1].i == 11 && pr[1].d == 1.5);

    /* One and a half items: send {int, double, int} (same type signature as the first 3
     * basic elements of two pairs). Count undefined, 3 elements. */
    st = xfer(ps, 1, triple_type, pr, 4, pair_type, peer, 4);
    check_counts(&st, pair_type, MPI_UNDEFINED, 3);
    CHECK(pr[0].i == 10 && pr[0].d == 0.5 && pr[1].i == 11);

    /* contiguous(3, int): 5 ints are 1 item and 2 elements more. */
    st = xfer(ibuf, 5, MPI_INT, jbuf, 4, contig3, peer, 5);
    check_counts(&st, contig3, MPI_UNDEFINED, 5);
    st = xfer(ibuf, 6, MPI_INT, jbuf, 4, contig3, peer, 6);
    check_counts(&st, contig3, 2, 6);
    for (k = 0; k < 6; k++)
        CHECK_EQ(jbuf[k], k);

    /* Empty message: 0 of anything. */
    st = xfer(NULL, 0, MPI_INT, jbuf, 4, contig3, peer, 7);
    check_counts(&st, contig3, 0, 0);
    check_counts(&st, MPI_DOUBLE, 0, 0);
    st = xfer(NULL, 0, pair_type, pr, 4, pair_type, peer, 8);
    check_counts(&st, pair_type, 0, 0);
}

int main(int argc, char **argv)
{
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3];
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_INT};
    struct pair two[2];
    int partner;

    tu_init(&argc, &argv);
    partner = tu_partner();

    MPI_Get_address(&two[0].i, &disp[0]);
    MPI_Get_address(&two[0].d, &disp[1]);
    MPI_Get_address(&two[1].i, &disp[2]);
    disp[2] -= disp[0];
    disp[1] -= disp[0];
    disp[0] = 0;
    {
        MPI_Datatype raw;
        CHECK_MPI(MPI_Type_create_struct(2, bl, disp, types, &raw));
        CHECK_MPI(MPI_Type_create_resized(raw, 0, sizeof(struct pair), &pair_type));
        CHECK_MPI(MPI_Type_free(&raw));
    }
    CHECK_MPI(MPI_Type_commit(&pair_type));
    CHECK_MPI(MPI_Type_create_struct(3, bl, disp, types, &triple_type));
    CHECK_MPI(MPI_Type_commit(&triple_type));
    CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &contig3));
    CHECK_MPI(MPI_Type_commit(&contig3));

    run(tu_rank);
    if (partner != tu_rank)
        run(partner);

    MPI_Type_free(&pair_type);
    MPI_Type_free(&triple_type);
    MPI_Type_free(&contig3);
    return tu_finish();
}
