/*
 * Generalized requests (MPI-4.1 13.2): MPI_Grequest_start, MPI_Grequest_complete and their
 * callbacks as the completion calls run them.
 *  1. MPI_Test before MPI_Grequest_complete: not complete, no callback ran; after it MPI_Wait
 *     completes it: query_fn fills the status (source, tag, count set with
 *     MPI_Status_set_elements, not cancelled), then free_fn runs, once each, and the handle
 *     becomes MPI_REQUEST_NULL;
 *  2. MPI_Request_get_status: flag 0 before completion; after it, flag 1 with query_fn's
 *     status, free_fn not run, the request still alive; MPI_Test then collects it;
 *  3. MPI_Cancel: cancel_fn gets complete=0 before MPI_Grequest_complete and 1 after; a
 *     query_fn that marks the status cancelled shows through MPI_Test_cancelled;
 *  4. MPI_Request_free before MPI_Grequest_complete: free_fn runs in MPI_Grequest_complete
 *     (not before, and query_fn never; quirk greq_free_early: an implementation that runs
 *     it in MPI_Request_free already); after it: free_fn runs in MPI_Request_free;
 *  5. MPI_Waitall over three generalized requests and a receive, completed in any order
 *     (the generalized ones by MPI_Grequest_complete before the wait);
 *  6. MPI_Waitany and MPI_Testsome pick up generalized requests;
 *  7. under MPI_ERRORS_RETURN: a query_fn returning MPI_ERR_OTHER fails MPI_Wait with that
 *     class (free_fn still runs), and in MPI_Waitall with MPI_ERR_IN_STATUS and the class in
 *     the status; MPI_Grequest_complete on a request that is not a generalized one fails with
 *     MPI_ERR_REQUEST;
 *  8. a generalized request completed by another thread while this one waits (when the
 *     library provides MPI_THREAD_MULTIPLE: the test initialises with it).
 * Any size; every rank runs it alone (receives in 5 are from itself).
 */
#include "util.h"

#include <pthread.h>

struct state {
    int id;
    int queries, frees, cancels;
    int last_complete;
    int query_rc;
    int mark_cancelled;
};

static int query_fn(void *extra, MPI_Status *st)
{
    struct state *s = extra;
    s->queries++;
    st->MPI_SOURCE = 100 + s->id;
    st->MPI_TAG = 200 + s->id;
    MPI_Status_set_elements(st, MPI_INT, s->id);
    MPI_Status_set_cancelled(st, s->mark_cancelled);
    return s->query_rc;
}

static int free_fn(void *extra)
{
    ((struct state *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    struct state *s = extra;
    s->cancels++;
    s->last_complete = complete;
    return MPI_SUCCESS;
}

static void start(struct state *s, int id, MPI_Request *r)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    s->last_complete = -1;
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, s, r));
    CHECK(*r != MPI_REQUEST_NULL);
}

static void check_status(MPI_Status *st, int id)
{
    int n;
    CHECK_EQ(st->MPI_SOURCE, 100 + id);
    CHECK_EQ(st->MPI_TAG, 200 + id);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK_EQ(n, id);
}

struct later {
    MPI_Request r;
    volatile int go;
};

static void *completer(void *arg)
{
    struct later *l = arg;
    while (!l->go)
        ;
    usleep(20000);
    MPI_Grequest_complete(l->r);
    return NULL;
}

int main(int argc, char **argv)
{
    struct state s[4];
    MPI_Request r, rs[4];
    MPI_Status st, sts[4];
    int flag, idx, provided;

    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    tu_after_init();

    /* 1. Test before completion, Wait after. */
    start(&s[0], 3, &r);
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK_EQ(s[0].queries + s[0].frees + s[0].cancels, 0);
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_EQ(s[0].queries + s[0].frees, 0);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL);
    CHECK_EQ(s[0].queries, 1);
    CHECK_EQ(s[0].frees, 1);
    check_status(&st, 3);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK_EQ(flag, 0);

    /* 2. Request_get_status leaves the request alive. */
    start(&s[0], 5, &r);
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK_EQ(flag, 0);
    CHECK_EQ(s[0].queries, 0);
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK_EQ(flag, 1);
    check_status(&st, 5);
    CHECK_EQ(s[0].queries, 1);
    CHECK_EQ(s[0].frees, 0);
    CHECK(r != MPI_REQUEST_NULL);
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK_EQ(flag, 1);
    CHECK(r == MPI_REQUEST_NULL);
    check_status(&st, 5);
    CHECK_EQ(s[0].queries, 2);
    CHECK_EQ(s[0].frees, 1);

    /* 3. Cancel before and after completion; a cancelled status. */
    start(&s[0], 1, &r);
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_EQ(s[0].cancels, 1);
    CHECK_EQ(s[0].last_complete, 0);
    s[0].mark_cancelled = 1;
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_EQ(s[0].cancels, 2);
    CHECK_EQ(s[0].last_complete, 1);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK_EQ(flag, 1);
    CHECK_EQ(s[0].frees, 1);

    /* 4. Request_free before and after completion. */
    start(&s[0], 2, &r);
    rs[0] = r;
    CHECK_MPI(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL);
    if (!tu_quirk("greq_free_early"))
        CHECK_EQ(s[0].frees, 0);
    CHECK_MPI(MPI_Grequest_complete(rs[0]));
    CHECK_EQ(s[0].frees, 1);
    CHECK_EQ(s[0].queries, 0);
    start(&s[0], 2, &r);
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_EQ(s[0].frees, 1);
    CHECK_EQ(s[0].queries, 0);

    /* 5. Waitall with a receive among them. */
    {
        int out = 7 + tu_rank, in = -1;
        for (int i = 0; i < 3; i++)
            start(&s[i], 10 + i, &rs[i]);
        CHECK_MPI(MPI_Irecv(&in, 1, MPI_INT, tu_rank, 9, MPI_COMM_WORLD, &rs[3]));
        CHECK_MPI(MPI_Grequest_complete(rs[2]));
        CHECK_MPI(MPI_Grequest_complete(rs[0]));
        CHECK_MPI(MPI_Send(&out, 1, MPI_INT, tu_rank, 9, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Grequest_complete(rs[1]));
        CHECK_MPI(MPI_Waitall(4, rs, sts));
        for (int i = 0; i < 3; i++) {
            CHECK(rs[i] == MPI_REQUEST_NULL);
            check_status(&sts[i], 10 + i);
            CHECK_EQ(s[i].queries, 1);
            CHECK_EQ(s[i].frees, 1);
        }
        CHECK_EQ(in, out);
        CHECK_STATUS(sts[3], MPI_INT, tu_rank, 9, 1);
    }

    /* 6. Waitany, Testsome. */
    {
        int outcount, idxs[4];
        for (int i = 0; i < 2; i++)
            start(&s[i], 20 + i, &rs[i]);
        CHECK_MPI(MPI_Grequest_complete(rs[1]));
        CHECK_MPI(MPI_Waitany(2, rs, &idx, &st));
        CHECK_EQ(idx, 1);
        check_status(&st, 21);
        CHECK_EQ(s[1].frees, 1);
        CHECK_MPI(MPI_Testsome(2, rs, &outcount, idxs, sts));
        CHECK_EQ(outcount, 0);
        CHECK_MPI(MPI_Grequest_complete(rs[0]));
        CHECK_MPI(MPI_Testsome(2, rs, &outcount, idxs, sts));
        CHECK_EQ(outcount, 1);
        CHECK_EQ(idxs[0], 0);
        check_status(&sts[0], 20);
        CHECK_EQ(s[0].frees, 1);
    }

    /* 7. Errors. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        int rc;
        start(&s[0], 4, &r);
        s[0].query_rc = MPI_ERR_OTHER;
        CHECK_MPI(MPI_Grequest_complete(r));
        rc = MPI_Wait(&r, &st);
        CHECK_CLASS(rc, MPI_ERR_OTHER);
        CHECK_EQ(s[0].frees, 1);
        CHECK(r == MPI_REQUEST_NULL);

        start(&s[0], 4, &rs[0]);
        start(&s[1], 6, &rs[1]);
        s[0].query_rc = MPI_ERR_OTHER;
        CHECK_MPI(MPI_Grequest_complete(rs[0]));
        CHECK_MPI(MPI_Grequest_complete(rs[1]));
        rc = MPI_Waitall(2, rs, sts);
        CHECK_CLASS(rc, MPI_ERR_IN_STATUS);
        CHECK_CLASS(sts[0].MPI_ERROR, MPI_ERR_OTHER);
        if (!tu_quirk("multi_error")) {
            CHECK_EQ(sts[1].MPI_ERROR, MPI_SUCCESS);
            check_status(&sts[1], 6);
        }

        int x = 0;
        CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, tu_rank, 33, MPI_COMM_WORLD, &r));
        rc = MPI_Grequest_complete(r);
        CHECK_CLASS(rc, MPI_ERR_REQUEST);
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* 8. Completed by another thread. */
    if (provided == MPI_THREAD_MULTIPLE) {
        struct later l;
        pthread_t t;
        start(&s[0], 8, &l.r);
        l.go = 0;
        CHECK(pthread_create(&t, NULL, completer, &l) == 0);
        r = l.r;
        l.go = 1;
        CHECK_MPI(MPI_Wait(&r, &st));
        check_status(&st, 8);
        CHECK_EQ(s[0].frees, 1);
        pthread_join(t, NULL);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    return tu_finish();
}
