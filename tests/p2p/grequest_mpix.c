/*
 * MPICH's generalized request extensions (its ABI): MPIX_Grequest_start with a poll_fn and a
 * wait_fn, MPIX_Grequest_class_create and MPIX_Grequest_class_allocate.
 *  1. a request with a poll_fn that calls MPI_Grequest_complete at its third call (and a
 *     wait_fn that polls it until then): MPI_Wait returns once it has (query_fn's status,
 *     free_fn run once); the same with an MPI_Test loop (the poll_fn alone);
 *  2. a class whose wait_fn completes every request it is given (a poll_fn that does nothing): MPI_Waitall over
 *     three requests of it completes them all (each query_fn and free_fn once); MPI_Wait on
 *     one (quirk greq_class_wait: an implementation whose MPI_Wait and MPI_Waitany never call
 *     the wait_fn of requests of a class; the test completes them first); MPI_Waitany over two, whose wait_fn completes only the first state it gets: one
 *     index comes back, the other request completes in a second MPI_Waitany;
 *  3. MPI_Waitall over a polled request and a receive from this process: both complete;
 *  4. under MPI_ERRORS_RETURN: MPIX_Grequest_class_allocate of a handle that is no class,
 *     MPIX_Grequest_start and MPIX_Grequest_class_create without a wait_fn fail with
 *     MPI_ERR_ARG (as MPICH, which wants all five functions; quirk greq_bad_class: an
 *     implementation that crashes on the bad class handle instead, not tried there).
 * Any size; every rank runs it alone.
 */
#include "util.h"

struct state {
    int id;
    int polls, waits, queries, frees;
    int complete_at; /* poll_fn completes the request at this call */
    int done;
    MPI_Request r;
};

static int query_fn(void *extra, MPI_Status *st)
{
    struct state *s = extra;
    s->queries++;
    st->MPI_SOURCE = 100 + s->id;
    st->MPI_TAG = 200 + s->id;
    MPI_Status_set_elements(st, MPI_INT, s->id < 0 ? -s->id : s->id);
    MPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    ((struct state *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

static int poll_fn(void *extra, MPI_Status *st)
{
    struct state *s = extra;
    (void)st;
    CHECK(!s->done);
    if (++s->polls == s->complete_at) {
        s->done = 1;
        CHECK_MPI(MPI_Grequest_complete(s->r));
    }
    return MPI_SUCCESS;
}

/* The wait_fn of the polled requests: polls each until it is complete. */
static int wait_poll_fn(int count, void **states, double timeout, MPI_Status *st)
{
    (void)timeout;
    for (int i = 0; i < count; i++)
        while (!((struct state *)states[i])->done)
            poll_fn(states[i], st);
    return MPI_SUCCESS;
}

/* The poll_fn of the class whose wait_fn does the work. */
static int noop_poll_fn(void *extra, MPI_Status *st)
{
    (void)extra;
    (void)st;
    return MPI_SUCCESS;
}

/* Completes every request given (or only the first, when the first's id is negative). */
static int wait_fn(int count, void **states, double timeout, MPI_Status *st)
{
    (void)timeout;
    (void)st;
    CHECK(count >= 1);
    int only_first = ((struct state *)states[0])->id < 0;
    for (int i = 0; i < count; i++) {
        struct state *s = states[i];
        s->waits++;
        CHECK(!s->done);
        s->done = 1;
        CHECK_MPI(MPI_Grequest_complete(s->r));
        if (only_first)
            break;
    }
    return MPI_SUCCESS;
}

static void check_status(MPI_Status *st, int id)
{
    int n;
    CHECK_EQ(st->MPI_SOURCE, 100 + id);
    CHECK_EQ(st->MPI_TAG, 200 + id);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK_EQ(n, id < 0 ? -id : id);
}

static void init(struct state *s, int id, int complete_at)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    s->complete_at = complete_at;
}

int main(int argc, char **argv)
{
    struct state s[4];
    MPI_Request rs[4];
    MPI_Status st, sts[4];
    MPIX_Grequest_class cls;
    int flag, idx, rc;

    CHECK_MPI(MPI_Init(&argc, &argv));
    tu_after_init();

    /* 1. poll_fn: MPI_Wait, then an MPI_Test loop. */
    init(&s[0], 3, 3);
    CHECK_MPI(MPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, wait_poll_fn, &s[0], &s[0].r));
    rs[0] = s[0].r;
    CHECK_MPI(MPI_Wait(&rs[0], &st));
    CHECK(rs[0] == MPI_REQUEST_NULL);
    CHECK_EQ(s[0].polls, 3);
    CHECK_EQ(s[0].queries, 1);
    CHECK_EQ(s[0].frees, 1);
    check_status(&st, 3);

    init(&s[0], 4, 5);
    CHECK_MPI(MPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, wait_poll_fn, &s[0], &s[0].r));
    rs[0] = s[0].r;
    int tests = 0;
    do {
        CHECK_MPI(MPI_Test(&rs[0], &flag, &st));
        tests++;
    } while (!flag);
    CHECK(tests >= 2);
    CHECK(rs[0] == MPI_REQUEST_NULL);
    CHECK_EQ(s[0].polls, 5);
    CHECK_EQ(s[0].queries, 1);
    CHECK_EQ(s[0].frees, 1);
    check_status(&st, 4);

    /* 2. A class with a wait_fn. */
    CHECK_MPI(MPIX_Grequest_class_create(query_fn, free_fn, cancel_fn, noop_poll_fn, wait_fn, &cls));
    for (int i = 0; i < 3; i++) {
        init(&s[i], i + 1, 0);
        CHECK_MPI(MPIX_Grequest_class_allocate(cls, &s[i], &s[i].r));
        rs[i] = s[i].r;
    }
    CHECK_MPI(MPI_Waitall(3, rs, sts));
    for (int i = 0; i < 3; i++) {
        CHECK(rs[i] == MPI_REQUEST_NULL);
        CHECK_EQ(s[i].waits, 1);
        CHECK_EQ(s[i].queries, 1);
        CHECK_EQ(s[i].frees, 1);
        check_status(&sts[i], i + 1);
    }

    init(&s[0], 7, 0);
    CHECK_MPI(MPIX_Grequest_class_allocate(cls, &s[0], &s[0].r));
    rs[0] = s[0].r;
    if (tu_quirk("greq_class_wait")) {
        s[0].waits = s[0].done = 1;
        CHECK_MPI(MPI_Grequest_complete(s[0].r));
    }
    CHECK_MPI(MPI_Wait(&rs[0], &st));
    CHECK_EQ(s[0].waits, 1);
    CHECK_EQ(s[0].frees, 1);
    check_status(&st, 7);

    init(&s[0], -1, 0);
    init(&s[1], -2, 0);
    for (int i = 0; i < 2; i++) {
        CHECK_MPI(MPIX_Grequest_class_allocate(cls, &s[i], &s[i].r));
        rs[i] = s[i].r;
    }
    if (tu_quirk("greq_class_wait"))
        for (int i = 0; i < 2; i++) {
            s[i].waits = s[i].done = 1;
            CHECK_MPI(MPI_Grequest_complete(s[i].r));
        }
    CHECK_MPI(MPI_Waitany(2, rs, &idx, &st));
    CHECK(idx == 0 || idx == 1);
    CHECK(s[idx].done);
    CHECK(rs[idx] == MPI_REQUEST_NULL);
    check_status(&st, s[idx].id);
    CHECK_MPI(MPI_Waitany(2, rs, &idx, &st));
    CHECK(idx == 0 || idx == 1);
    CHECK(s[0].done && s[1].done);
    CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL);
    CHECK_EQ(s[0].frees + s[1].frees, 2);
    check_status(&st, s[idx].id);

    /* 3. A polled request and a receive in one MPI_Waitall. */
    {
        int out = 42, in = -1;
        init(&s[0], 5, 4);
        CHECK_MPI(
            MPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, wait_poll_fn, &s[0], &s[0].r));
        rs[0] = s[0].r;
        CHECK_MPI(MPI_Irecv(&in, 1, MPI_INT, tu_rank, 9, MPI_COMM_WORLD, &rs[1]));
        CHECK_MPI(MPI_Isend(&out, 1, MPI_INT, tu_rank, 9, MPI_COMM_WORLD, &rs[2]));
        CHECK_MPI(MPI_Waitall(3, rs, sts));
        CHECK_EQ(in, 42);
        CHECK_EQ(s[0].polls, 4);
        CHECK_EQ(s[0].frees, 1);
        check_status(&sts[0], 5);
    }

    /* 4. Errors. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (!tu_quirk("greq_bad_class")) {
        rc = MPIX_Grequest_class_allocate((MPIX_Grequest_class)0x12345, &s[0], &rs[0]);
        CHECK_CLASS(rc, MPI_ERR_ARG);
    }
    rc = MPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, NULL, &s[0], &rs[0]);
    CHECK_CLASS(rc, MPI_ERR_ARG);
    rc = MPIX_Grequest_class_create(query_fn, free_fn, cancel_fn, poll_fn, NULL, &cls);
    CHECK_CLASS(rc, MPI_ERR_ARG);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    return tu_finish();
}
