/*
 * Communicator constructors, attributes and point to point called from several threads of a
 * process at once under MPI_THREAD_MULTIPLE (MPI-4.1 11.6). NT threads (argument, default 4)
 * each own a duplicate of MPI_COMM_WORLD made by the main thread, and ROUNDS times, all at
 * the same time as the others:
 *  - MPI_Comm_dup, MPI_Comm_idup (+ Wait), MPI_Comm_split (two colours) and
 *    MPI_Comm_create_group on their own communicator, and MPI_Comm_create_group on
 *    MPI_COMM_WORLD shared by every thread with the thread's number as the tag;
 *  - checks each new communicator's size and rank, and that a message goes round a ring on
 *    it carrying (thread, round) (a message that reached another thread's communicator, or a
 *    context id given twice, shows there);
 *  - puts an attribute with copy and delete callbacks on its communicator (a keyval created
 *    and freed by the thread itself), duplicates it (the copy runs), frees (the delete runs);
 *  - frees everything it made.
 * Any size >= 1.
 */
#include "util.h"
#include <pthread.h>

#define MAXT 16
#define ROUNDS 20

static int np, me, nt = 4;
static MPI_Comm own[MAXT];
static MPI_Group world_group;
static int copies[MAXT], deletes[MAXT];

static int copy_fn(MPI_Comm c, int kv, void *extra, void *in, void *out, int *flag)
{
    int t = (int)(intptr_t)extra;
    (void)c;
    (void)kv;
    copies[t]++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm c, int kv, void *val, void *extra)
{
    int t = (int)(intptr_t)extra;
    (void)c;
    (void)kv;
    CHECK_MSG((intptr_t)val == 1000 + t, "thread %d: delete sees value %ld", t, (long)(intptr_t)val);
    deletes[t]++;
    return MPI_SUCCESS;
}

/* A token round the ring of `c` carrying (t, round, hop): every member checks it. */
static void ring(MPI_Comm c, int t, int round)
{
    int n, r, out[3], in[3];
    MPI_Status st;
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    out[0] = t;
    out[1] = round;
    out[2] = r;
    CHECK_MPI(MPI_Sendrecv(out, 3, MPI_INT, (r + 1) % n, 7, in, 3, MPI_INT, (r + n - 1) % n, 7,
                           c, &st));
    CHECK_MSG(in[0] == t && in[1] == round && in[2] == (r + n - 1) % n,
              "thread %d round %d: ring got (%d, %d, %d)", t, round, in[0], in[1], in[2]);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg, round, n, r, kv, flag;
    MPI_Comm base = own[t], d, id, s, g, gw, dd;
    MPI_Request req;
    MPI_Group grp;
    void *val;

    for (round = 0; round < ROUNDS; round++) {
        CHECK_MPI(MPI_Comm_dup(base, &d));
        CHECK_MPI(MPI_Comm_size(d, &n));
        CHECK_EQ(n, np);
        ring(d, t, round);

        CHECK_MPI(MPI_Comm_idup(base, &id, &req));
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        ring(id, t, round);

        CHECK_MPI(MPI_Comm_split(base, me % 2, np - me, &s));
        CHECK_MPI(MPI_Comm_size(s, &n));
        CHECK_MPI(MPI_Comm_rank(s, &r));
        CHECK_EQ(n, me % 2 ? np / 2 : (np + 1) / 2);
        ring(s, t, round);

        /* The even processes in a group: create_group on our own communicator, and on
         * MPI_COMM_WORLD, shared by all threads, told apart by the tag. */
        {
            int range[1][3] = {{0, np - 1, 2}};
            CHECK_MPI(MPI_Group_range_incl(world_group, 1, range, &grp));
        }
        if (me % 2 == 0) {
            CHECK_MPI(MPI_Comm_create_group(base, grp, 0, &g));
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, grp, t, &gw));
            CHECK_MPI(MPI_Comm_size(gw, &n));
            CHECK_EQ(n, (np + 1) / 2);
            ring(g, t, round);
            ring(gw, t, round);
            CHECK_MPI(MPI_Comm_free(&g));
            CHECK_MPI(MPI_Comm_free(&gw));
        }
        CHECK_MPI(MPI_Group_free(&grp));

        /* Attributes: a keyval of the thread's own, copied on dup, deleted on free. */
        CHECK_MPI(MPI_Comm_create_keyval(copy_fn, delete_fn, &kv, (void *)(intptr_t)t));
        CHECK_MPI(MPI_Comm_set_attr(d, kv, (void *)(intptr_t)(1000 + t)));
        CHECK_MPI(MPI_Comm_dup(d, &dd));
        CHECK_MPI(MPI_Comm_get_attr(dd, kv, &val, &flag));
        CHECK(flag && (intptr_t)val == 1000 + t);
        ring(dd, t, round);
        CHECK_MPI(MPI_Comm_free_keyval(&kv));
        CHECK_MPI(MPI_Comm_free(&dd));
        CHECK_MPI(MPI_Comm_free(&d));
        CHECK_MPI(MPI_Comm_free(&id));
        CHECK_MPI(MPI_Comm_free(&s));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1, t;
    pthread_t th[MAXT];

    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    tu_after_init();
    CHECK_MSG(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    if (argc > 1)
        nt = atoi(argv[1]);
    CHECK(nt >= 1 && nt <= MAXT);
    np = tu_size;
    me = tu_rank;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    for (t = 0; t < nt; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &own[t]));
    for (t = 0; t < nt; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    for (t = 0; t < nt; t++)
        CHECK(pthread_join(th[t], NULL) == 0);
    for (t = 0; t < nt; t++) {
        CHECK_MSG(copies[t] == ROUNDS && deletes[t] == 2 * ROUNDS,
                  "thread %d: %d copies, %d deletes", t, copies[t], deletes[t]);
        CHECK_MPI(MPI_Comm_free(&own[t]));
    }
    CHECK_MPI(MPI_Group_free(&world_group));
    return tu_finish();
}
