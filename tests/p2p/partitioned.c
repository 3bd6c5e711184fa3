/*
 * Partitioned communication (MPI-4.1 chapter 4): MPI_Psend_init, MPI_Precv_init, MPI_Pready,
 * MPI_Pready_range, MPI_Pready_list, MPI_Parrived, with MPI_Start(all) and the completion
 * calls. Around a ring (rank r sends to r+1, receives from r-1; one process talks to itself):
 *  1. 8 partitions of 100 ints, three rounds of one pair of requests: partitions made ready
 *     in reverse order, the receiver polls MPI_Parrived until every partition is in (each
 *     partition's data checked as soon as it has arrived), then MPI_Wait on both; the
 *     receive's status (source, tag, count); the handles stay (persistent);
 *  2. different partitionings on the two sides: 4 partitions of 50 doubles sent, 8 of 25
 *     received; MPI_Pready_range and MPI_Pready_list; MPI_Startall, MPI_Testall loop;
 *  3. a non-contiguous datatype (every other int: a resized vector) on the send side, a
 *     contiguous one on the receive side, and the reverse (the gaps untouched);
 *  4. two partitioned operations with the same peer and tag at once: they match in
 *     initialization order; MPI_Request_get_status on a send before its partitions are ready
 *     (not complete) and on a receive after completion;
 *  5. MPI_PROC_NULL on both sides: rounds complete at once, MPI_Parrived says arrived;
 *  6. under MPI_ERRORS_RETURN: MPI_Pready out of range (MPI_ERR_ARG), on a receive request
 *     (MPI_ERR_REQUEST); MPI_Precv_init with MPI_ANY_SOURCE (MPI_ERR_RANK), a negative tag
 *     (MPI_ERR_TAG), no partitions (MPI_ERR_ARG);
 *  7. freeing and cancelling (MPI-4.1 chapter 4: either on an active request whose round has
 *     not completed is erroneous): refused with MPI_ERR_REQUEST, the handle kept and the round
 *     going on to deliver its data; MPI_Cancel of an inactive request and of a round that is
 *     complete does nothing (not cancelled); MPI_Request_free of an active request whose
 *     round is complete frees it (its data in the buffer);
 *  8. matching follows initialization, not MPI_Start: two sends and two receives with the
 *     same peer and tag, the sends started (and made ready) in the reverse order of their
 *     initialization, the receives in order; then a pair initialized and freed on both sides
 *     without ever being started, and a new pair of that peer and tag after it, which still
 *     matches its own partner;
 *  9. partitions of no elements naming MPI_DATATYPE_NULL (accepted, as in point-to-point).
 * Any size.
 */
#include "util.h"

#define NP 8
#define CNT 100

static int next, prev;

static void ring_round(MPI_Request *s, MPI_Request *r, int *sbuf, int *rbuf, int round)
{
    int got[NP] = {0}, left = NP, flag;
    MPI_Status st;
    for (int i = 0; i < NP * CNT; i++)
        sbuf[i] = tu_rank * 1000000 + round * 10000 + i;
    for (int i = 0; i < NP * CNT; i++)
        rbuf[i] = -1;
    CHECK_MPI(MPI_Start(r));
    CHECK_MPI(MPI_Start(s));
    for (int p = NP - 1; p >= 0; p--)
        CHECK_MPI(MPI_Pready(p, *s));
    while (left > 0) {
        for (int p = 0; p < NP; p++) {
            if (got[p])
                continue;
            CHECK_MPI(MPI_Parrived(*r, p, &flag));
            if (flag) {
                got[p] = 1;
                left--;
                for (int i = p * CNT; i < (p + 1) * CNT; i++)
                    CHECK_EQ(rbuf[i], prev * 1000000 + round * 10000 + i);
            }
        }
    }
    CHECK_MPI(MPI_Wait(s, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(r, &st));
    CHECK(*s != MPI_REQUEST_NULL && *r != MPI_REQUEST_NULL);
    CHECK_STATUS(st, MPI_INT, prev, 5, NP * CNT);
}

int main(int argc, char **argv)
{
    MPI_Request s, r, rs[4];
    MPI_Status st, sts[4];
    int flag, rc;

    tu_init(&argc, &argv);
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;

    /* 1. Rounds. */
    {
        int *sbuf = tu_malloc(NP * CNT * sizeof(int)), *rbuf = tu_malloc(NP * CNT * sizeof(int));
        CHECK_MPI(MPI_Precv_init(rbuf, NP, CNT, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Psend_init(sbuf, NP, CNT, MPI_INT, next, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        for (int round = 0; round < 3; round++)
            ring_round(&s, &r, sbuf, rbuf, round);
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(s == MPI_REQUEST_NULL && r == MPI_REQUEST_NULL);
        free(sbuf);
        free(rbuf);
    }

    /* 2. 4 x 50 doubles sent, 8 x 25 received; range, list, Startall, Testall. */
    {
        double sb[200], rb[200];
        int list[2] = {3, 2}, done = 0;
        for (int i = 0; i < 200; i++) {
            sb[i] = tu_rank + i / 1000.0;
            rb[i] = -1;
        }
        CHECK_MPI(MPI_Psend_init(sb, 4, 50, MPI_DOUBLE, next, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
        CHECK_MPI(MPI_Precv_init(rb, 8, 25, MPI_DOUBLE, prev, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
        CHECK_MPI(MPI_Startall(2, rs));
        CHECK_MPI(MPI_Pready_range(0, 1, rs[0]));
        /* Receive partitions 0-3 are sender partitions 0-1. */
        for (int p = 0; p < 4; p++) {
            do
                CHECK_MPI(MPI_Parrived(rs[1], p, &flag));
            while (!flag);
        }
        CHECK_MPI(MPI_Pready_list(2, list, rs[0]));
        while (!done)
            CHECK_MPI(MPI_Testall(2, rs, &done, sts));
        for (int i = 0; i < 200; i++)
            CHECK(rb[i] == prev + i / 1000.0);
        CHECK_STATUS(sts[1], MPI_DOUBLE, prev, 6, 200);
        CHECK_MPI(MPI_Request_free(&rs[0]));
        CHECK_MPI(MPI_Request_free(&rs[1]));
    }

    /* 3. Non-contiguous on one side. */
    {
        MPI_Datatype every_other, t;
        int sb[2 * 60], rb[2 * 60], cb[60];
        CHECK_MPI(MPI_Type_vector(1, 1, 2, MPI_INT, &t));
        CHECK_MPI(MPI_Type_create_resized(t, 0, 2 * sizeof(int), &every_other));
        CHECK_MPI(MPI_Type_commit(&every_other));
        CHECK_MPI(MPI_Type_free(&t));
        for (int i = 0; i < 120; i++) {
            sb[i] = i % 2 ? -7 : tu_rank * 1000 + i / 2;
            rb[i] = -3;
        }
        /* strided -> contiguous */
        CHECK_MPI(MPI_Psend_init(sb, 3, 20, every_other, next, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
        CHECK_MPI(MPI_Precv_init(cb, 6, 10, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
        CHECK_MPI(MPI_Startall(2, rs));
        CHECK_MPI(MPI_Pready_range(0, 2, rs[0]));
        CHECK_MPI(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 60; i++)
            CHECK_EQ(cb[i], prev * 1000 + i);
        CHECK_MPI(MPI_Request_free(&rs[0]));
        CHECK_MPI(MPI_Request_free(&rs[1]));
        /* contiguous -> strided (partition by partition, checked with Parrived) */
        for (int i = 0; i < 60; i++)
            cb[i] = tu_rank * 1000 + 500 + i;
        CHECK_MPI(MPI_Psend_init(cb, 2, 30, MPI_INT, next, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
        CHECK_MPI(MPI_Precv_init(rb, 4, 15, every_other, prev, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
        CHECK_MPI(MPI_Startall(2, rs));
        CHECK_MPI(MPI_Pready(1, rs[0]));
        for (int p = 2; p < 4; p++) {
            do
                CHECK_MPI(MPI_Parrived(rs[1], p, &flag));
            while (!flag);
            for (int i = p * 15; i < (p + 1) * 15; i++)
                CHECK_EQ(rb[2 * i], prev * 1000 + 500 + i);
        }
        CHECK_MPI(MPI_Pready(0, rs[0]));
        CHECK_MPI(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 60; i++) {
            CHECK_EQ(rb[2 * i], prev * 1000 + 500 + i);
            CHECK_EQ(rb[2 * i + 1], -3);
        }
        CHECK_MPI(MPI_Request_free(&rs[0]));
        CHECK_MPI(MPI_Request_free(&rs[1]));
        CHECK_MPI(MPI_Type_free(&every_other));
    }

    /* 4. Same peer and tag twice: initialization order. */
    {
        int a[4], b[4], ra[4] = {0}, rb2[4] = {0};
        for (int i = 0; i < 4; i++) {
            a[i] = 100 + i;
            b[i] = 200 + i;
        }
        CHECK_MPI(MPI_Precv_init(ra, 2, 2, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
        CHECK_MPI(MPI_Precv_init(rb2, 2, 2, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
        CHECK_MPI(MPI_Psend_init(a, 2, 2, MPI_INT, next, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[2]));
        CHECK_MPI(MPI_Psend_init(b, 2, 2, MPI_INT, next, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[3]));
        CHECK_MPI(MPI_Startall(4, rs));
        /* A send is not complete before all its partitions are ready. */
        CHECK_MPI(MPI_Request_get_status(rs[2], &flag, &st));
        CHECK_EQ(flag, 0);
        CHECK_MPI(MPI_Pready_range(0, 1, rs[3]));
        CHECK_MPI(MPI_Pready_range(0, 1, rs[2]));
        CHECK_MPI(MPI_Waitall(4, rs, sts));
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(ra[i], 100 + i);
            CHECK_EQ(rb2[i], 200 + i);
        }
        CHECK_MPI(MPI_Request_get_status(rs[0], &flag, &st));
        CHECK_EQ(flag, 1);
        for (int i = 0; i < 4; i++)
            CHECK_MPI(MPI_Request_free(&rs[i]));
    }

    /* 5. MPI_PROC_NULL. */
    {
        int x[4];
        CHECK_MPI(MPI_Psend_init(x, 2, 2, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(x, 2, 2, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&s));
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Pready(0, s));
        CHECK_MPI(MPI_Pready(1, s));
        CHECK_MPI(MPI_Parrived(r, 1, &flag));
        CHECK_EQ(flag, 1);
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_PROC_NULL_STATUS(st, MPI_INT);
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
    }

    /* 6. Errors. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        int x[4] = {0}, y[4];
        CHECK_MPI(MPI_Psend_init(x, 2, 2, MPI_INT, next, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(y, 2, 2, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        rc = MPI_Pready(2, s);
        CHECK_CLASS(rc, MPI_ERR_ARG);
        rc = MPI_Pready(0, r);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        CHECK_MPI(MPI_Pready_range(0, 1, s));
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
        rc = MPI_Precv_init(y, 2, 2, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
        CHECK_CLASS(rc, MPI_ERR_RANK);
        rc = MPI_Precv_init(y, 2, 2, MPI_INT, prev, -5, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
        CHECK_CLASS(rc, MPI_ERR_TAG);
        rc = MPI_Psend_init(x, 0, 2, MPI_INT, next, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
        CHECK_CLASS(rc, MPI_ERR_ARG);
    }

    /* 7. Freeing and cancelling. */
    {
        int x[6], y[6], flag, cancelled;
        MPI_Status st;
        for (int i = 0; i < 6; i++) {
            x[i] = tu_rank * 100 + i;
            y[i] = -1;
        }
        CHECK_MPI(MPI_Psend_init(x, 3, 2, MPI_INT, next, 12, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(y, 3, 2, MPI_INT, prev, 12, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Cancel(&s)); /* inactive: nothing to cancel */
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        /* No partition is ready anywhere before the barrier: neither round can complete. */
        rc = MPI_Cancel(&s);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        rc = MPI_Request_free(&s);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        CHECK(s != MPI_REQUEST_NULL);
        rc = MPI_Cancel(&r);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        rc = MPI_Request_free(&r);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        CHECK(r != MPI_REQUEST_NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Pready_range(0, 2, s));
        /* The receive's round completes (every partition arrived): freeing it is allowed. */
        for (int p = 0; p < 3; p++)
            do
                CHECK_MPI(MPI_Parrived(r, p, &flag));
            while (!flag);
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL);
        for (int i = 0; i < 6; i++)
            CHECK_EQ(y[i], prev * 100 + i);
        /* The send's round completes: cancelling it does nothing. */
        do
            CHECK_MPI(MPI_Request_get_status(s, &flag, MPI_STATUS_IGNORE));
        while (!flag);
        CHECK_MPI(MPI_Cancel(&s));
        CHECK_MPI(MPI_Wait(&s, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &cancelled));
        CHECK_EQ(cancelled, 0);
        CHECK_MPI(MPI_Request_free(&s));
        CHECK(s == MPI_REQUEST_NULL);
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* 8. Initialization order, whatever the order of the starts; a pair never started. */
    {
        int a[8], b[8], ra[8], rb2[8];
        for (int i = 0; i < 8; i++) {
            a[i] = tu_rank * 100 + i;
            b[i] = tu_rank * 100 + 50 + i;
            ra[i] = rb2[i] = -1;
        }
        CHECK_MPI(MPI_Psend_init(a, 4, 2, MPI_INT, next, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
        CHECK_MPI(MPI_Psend_init(b, 4, 2, MPI_INT, next, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
        CHECK_MPI(MPI_Precv_init(ra, 4, 2, MPI_INT, prev, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[2]));
        CHECK_MPI(MPI_Precv_init(rb2, 4, 2, MPI_INT, prev, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[3]));
        CHECK_MPI(MPI_Start(&rs[1]));
        CHECK_MPI(MPI_Pready_range(0, 3, rs[1]));
        CHECK_MPI(MPI_Start(&rs[0]));
        CHECK_MPI(MPI_Pready_range(0, 3, rs[0]));
        CHECK_MPI(MPI_Start(&rs[2]));
        CHECK_MPI(MPI_Start(&rs[3]));
        CHECK_MPI(MPI_Waitall(4, rs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 8; i++) {
            CHECK_EQ(ra[i], prev * 100 + i);
            CHECK_EQ(rb2[i], prev * 100 + 50 + i);
        }
        for (int i = 0; i < 4; i++)
            CHECK_MPI(MPI_Request_free(&rs[i]));

        /* Never started: freed on both sides. */
        CHECK_MPI(MPI_Psend_init(a, 4, 2, MPI_INT, next, 14, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(ra, 4, 2, MPI_INT, prev, 14, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(s == MPI_REQUEST_NULL && r == MPI_REQUEST_NULL);
        for (int i = 0; i < 8; i++)
            ra[i] = -1;
        CHECK_MPI(MPI_Psend_init(b, 2, 4, MPI_INT, next, 14, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(ra, 2, 4, MPI_INT, prev, 14, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        CHECK_MPI(MPI_Pready_range(0, 1, s));
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_STATUS(st, MPI_INT, prev, 14, 8);
        for (int i = 0; i < 8; i++)
            CHECK_EQ(ra[i], prev * 100 + 50 + i);
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
    }

    /* 9. Empty partitions of MPI_DATATYPE_NULL. */
    {
        int x = 1;
        CHECK_MPI(MPI_Psend_init(&x, 2, 0, MPI_DATATYPE_NULL, next, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(&x, 2, 0, MPI_DATATYPE_NULL, prev, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        CHECK_MPI(MPI_Pready_range(0, 1, s));
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK_EQ(x, 1);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    return tu_finish();
}
