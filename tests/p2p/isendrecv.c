/*
 * MPI_Isendrecv and MPI_Isendrecv_replace (MPI-4.0 3.10).
 *  1. around a ring, 0 B to 1 MiB: contents, status (source, tag, count), the send buffer
 *     unchanged, nothing written past the message; completed by Wait;
 *  2. wildcards (MPI_ANY_SOURCE, MPI_ANY_TAG) and different send and receive types (ints
 *     received as bytes), completed by a Test loop and MPI_Request_get_status;
 *  3. several in flight with distinct tags, completed by Waitall in reverse order of start;
 *  4. Isendrecv_replace around the ring, bytes and a strided vector of doubles (elements
 *     between the vector's blocks untouched), completed by Wait and Testall;
 *  5. MPI_PROC_NULL as destination and as source: the PROC_NULL status;
 *  6. under MPI_ERRORS_RETURN: an invalid destination or receive tag is reported by the call
 *     itself (MPI_ERR_RANK, MPI_ERR_TAG) and starts nothing (a later receive gets the message
 *     meant for it); a truncated receive fails the completion with MPI_ERR_TRUNCATE.
 * Any size >= 1 (the ring of one process talks to itself).
 */
#include "util.h"

/* The status of a completed MPI_Isendrecv(_replace), unless the implementation's known
 * deviation is declared (never for Protean). */
#define CHECK_SR_STATUS(st, dtype, src, tag, count)                                      \
    do {                                                                                 \
        if (!tu_quirk("isendrecv_status"))                                               \
            CHECK_STATUS(st, dtype, src, tag, count);                                    \
    } while (0)

static const int sizes[] = {0, 1, 8, 1000, 65536, 65537, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define MAXSZ (1 << 20)

int main(int argc, char **argv)
{
    MPI_Status st, sts[4];
    MPI_Request r, rs[4];
    unsigned char *sbuf, *rbuf;
    int i, next, prev, flag;

    tu_init(&argc, &argv);
    sbuf = tu_malloc(MAXSZ + 16);
    rbuf = tu_malloc(MAXSZ + 16);
    next = (tu_rank + 1) % tu_size;
    prev = (tu_rank + tu_size - 1) % tu_size;

    /* 1. Ring. */
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        tu_fill(sbuf, n, TU_SEED(tu_rank, next, i));
        memset(rbuf, 0xA5, n + 16);
        CHECK_MPI(MPI_Isendrecv(sbuf, n, MPI_BYTE, next, 10 + i, rbuf, n, MPI_BYTE, prev, 10 + i,
                                MPI_COMM_WORLD, &r));
        CHECK(r != MPI_REQUEST_NULL);
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
        CHECK_SR_STATUS(st, MPI_BYTE, prev, 10 + i, n);
        CHECK_BUF(rbuf, n, TU_SEED(prev, tu_rank, i));
        CHECK_BYTES(rbuf + n, 16, 0xA5);
        CHECK_BUF(sbuf, n, TU_SEED(tu_rank, next, i));
    }

    /* 2. Wildcards, ints received as bytes, Test and Request_get_status. */
    {
        int sv[50], k;
        unsigned char rb[200];
        for (k = 0; k < 50; k++)
            sv[k] = tu_rank * 100 + k;
        CHECK_MPI(MPI_Isendrecv(sv, 50, MPI_INT, next, 30, rb, 200, MPI_BYTE, MPI_ANY_SOURCE,
                                MPI_ANY_TAG, MPI_COMM_WORLD, &r));
        do {
            CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        } while (!flag);
        CHECK(r != MPI_REQUEST_NULL);
        CHECK_SR_STATUS(st, MPI_BYTE, prev, 30, 200);
        do {
            CHECK_MPI(MPI_Test(&r, &flag, &st));
        } while (!flag);
        CHECK(r == MPI_REQUEST_NULL);
        CHECK_SR_STATUS(st, MPI_BYTE, prev, 30, 200);
        for (k = 0; k < 50; k++) {
            int x;
            memcpy(&x, rb + 4 * k, 4);
            CHECK_EQ(x, prev * 100 + k);
        }
    }

    /* 3. Four in flight, completed together. */
    {
        int sv[4], rv[4], k;
        for (k = 0; k < 4; k++) {
            sv[k] = 1000 * tu_rank + k;
            rv[k] = -1;
        }
        for (k = 3; k >= 0; k--)
            CHECK_MPI(MPI_Isendrecv(&sv[k], 1, MPI_INT, next, 40 + k, &rv[k], 1, MPI_INT, prev,
                                    40 + k, MPI_COMM_WORLD, &rs[k]));
        CHECK_MPI(MPI_Waitall(4, rs, sts));
        for (k = 0; k < 4; k++) {
            CHECK(rs[k] == MPI_REQUEST_NULL);
            CHECK_EQ(rv[k], 1000 * prev + k);
            CHECK_SR_STATUS(sts[k], MPI_INT, prev, 40 + k, 1);
        }
    }

    /* 4. Isendrecv_replace: bytes, then a vector of doubles. */
    for (i = 0; i < NSIZES; i++) {
        int n = sizes[i];
        tu_fill(rbuf, n, TU_SEED(tu_rank, next, 100 + i));
        memset(rbuf + n, 0xA5, 16);
        CHECK_MPI(MPI_Isendrecv_replace(rbuf, n, MPI_BYTE, next, 50 + i, prev, 50 + i,
                                        MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_SR_STATUS(st, MPI_BYTE, prev, 50 + i, n);
        CHECK_BUF(rbuf, n, TU_SEED(prev, tu_rank, 100 + i));
        CHECK_BYTES(rbuf + n, 16, 0xA5);
    }
    if (!tu_quirk("replace_derived")) {
        /* 1000 blocks of 2 doubles, stride 3: the third double of each block is a gap. */
        enum { NB = 1000 };
        double *d = tu_malloc(sizeof(double) * 3 * NB);
        MPI_Datatype vec;
        int k;
        CHECK_MPI(MPI_Type_vector(NB, 2, 3, MPI_DOUBLE, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        for (k = 0; k < 3 * NB; k++)
            d[k] = k % 3 == 2 ? -1.0 : tu_rank * 1e6 + k;
        CHECK_MPI(MPI_Isendrecv_replace(d, 1, vec, next, 60, prev, 60, MPI_COMM_WORLD, &rs[0]));
        do {
            CHECK_MPI(MPI_Testall(1, rs, &flag, sts));
        } while (!flag);
        CHECK_SR_STATUS(sts[0], vec, prev, 60, 1);
        for (k = 0; k < 3 * NB; k++) {
            if (k % 3 == 2)
                CHECK(d[k] == -1.0);
            else
                CHECK_MSG(d[k] == prev * 1e6 + k, "d[%d] = %g", k, d[k]);
        }
        CHECK_MPI(MPI_Type_free(&vec));
        free(d);
    }

    /* 5. MPI_PROC_NULL. */
    if (!tu_quirk("isendrecv_proc_null")) {
        int x = 5, y = 7;
        CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 70, &y, 1, MPI_INT, MPI_PROC_NULL,
                                70, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_SR_STATUS(st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0);
        CHECK_EQ(y, 7);
        CHECK_MPI(MPI_Isendrecv_replace(&y, 1, MPI_INT, MPI_PROC_NULL, 71, MPI_PROC_NULL, 71,
                                        MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_SR_STATUS(st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0);
        CHECK_EQ(y, 7);
        /* Sending to nobody while receiving from prev, and the reverse. */
        CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 72, &y, 1, MPI_INT, MPI_PROC_NULL,
                                72, MPI_COMM_WORLD, &rs[0]));
        x = tu_rank;
        CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, next, 73, &y, 1, MPI_INT, prev, 73,
                                MPI_COMM_WORLD, &rs[1]));
        CHECK_MPI(MPI_Waitall(2, rs, sts));
        CHECK_SR_STATUS(sts[0], MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0);
        CHECK_SR_STATUS(sts[1], MPI_INT, prev, 73, 1);
        CHECK_EQ(y, prev);
    }

    /* 6. Errors. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        int x = tu_rank, y = -1, big[3] = {1, 2, 3}, rc;
        r = MPI_REQUEST_NULL;
        CHECK_CLASS(MPI_Isendrecv(&x, 1, MPI_INT, tu_size, 80, &y, 1, MPI_INT, prev, 80,
                                  MPI_COMM_WORLD, &r), MPI_ERR_RANK);
        CHECK_CLASS(MPI_Isendrecv(&x, 1, MPI_INT, next, 80, &y, 1, MPI_INT, prev, -5,
                                  MPI_COMM_WORLD, &r), MPI_ERR_TAG);
        CHECK_CLASS(MPI_Isendrecv_replace(&y, 1, MPI_INT, next, -3, prev, 80, MPI_COMM_WORLD,
                                          &r), MPI_ERR_TAG);
        /* Nothing was started: this exchange gets exactly its own message. */
        CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, next, 80, &y, 1, MPI_INT, prev, 80,
                                MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_SR_STATUS(st, MPI_INT, prev, 80, 1);
        CHECK_EQ(y, prev);
        /* Three ints into one. */
        CHECK_MPI(MPI_Isendrecv(big, 3, MPI_INT, next, 81, &y, 1, MPI_INT, prev, 81,
                                MPI_COMM_WORLD, &r));
        rc = MPI_Wait(&r, &st);
        if (!tu_quirk("isendrecv_truncate"))
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    free(sbuf);
    free(rbuf);
    return tu_finish();
}
