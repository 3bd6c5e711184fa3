/*
 * MPI_THREAD_MULTIPLE with pthreads. On every process:
 *  - NW worker threads; worker t sends to process (rank + t + 1) % size and receives from
 *    (rank - t - 1) % size with tag t, ITERS rounds of Isend + Recv + Wait, then the same
 *    with Sendrecv; contents carry (sender, thread, round), so a message delivered to the
 *    wrong thread is detected;
 *  - a collector thread that receives, with MPI_ANY_SOURCE, the NCOLL messages that every
 *    worker of every process sends to the collector of process (rank + t) % size; per
 *    (sender, thread) they arrive in order (one thread's sends are ordered);
 *  - then two threads share one tag and take messages with MPI_Mprobe/MPI_Mrecv (the
 *    thread-safe way to probe and receive) until all have been taken, each exactly once.
 * Requires MPI_THREAD_MULTIPLE. Any size >= 1.
 */
#include "util.h"
#include <pthread.h>

#define NW 4
#define ITERS 50
#define NCOLL 20
#define NMP 40
enum { TAG_COLL = 100, TAG_MP = 101, TAG_SR = 200 };

static int np, me;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int mp_taken;
static char *mp_seen;

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg, it, k;
    int to = (me + t + 1) % np, from = ((me - t - 1) % np + np) % np;
    int coll = (me + t) % np;
    int out[3], in[3];
    MPI_Request r, cr[NCOLL];
    MPI_Status st;
    int cvals[NCOLL][3];

    /* Collector messages go out first, nonblocking, completed at the end. */
    for (k = 0; k < NCOLL; k++) {
        cvals[k][0] = me;
        cvals[k][1] = t;
        cvals[k][2] = k;
        CHECK_MPI(MPI_Isend(cvals[k], 3, MPI_INT, coll, TAG_COLL, MPI_COMM_WORLD, &cr[k]));
    }
    for (it = 0; it < ITERS; it++) {
        out[0] = me;
        out[1] = t;
        out[2] = it;
        CHECK_MPI(MPI_Isend(out, 3, MPI_INT, to, t, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Recv(in, 3, MPI_INT, from, t, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, from, t, 3);
        CHECK_MSG(in[0] == from && in[1] == t && in[2] == it,
                  "thread %d round %d got (%d, %d, %d)", t, it, in[0], in[1], in[2]);
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    for (it = 0; it < ITERS; it++) {
        out[0] = me;
        out[1] = t;
        out[2] = -it;
        CHECK_MPI(MPI_Sendrecv(out, 3, MPI_INT, to, TAG_SR + t, in, 3, MPI_INT, from,
                               TAG_SR + t, MPI_COMM_WORLD, &st));
        CHECK_MSG(in[0] == from && in[1] == t && in[2] == -it,
                  "thread %d sendrecv round %d got (%d, %d, %d)", t, it, in[0], in[1], in[2]);
    }
    CHECK_MPI(MPI_Waitall(NCOLL, cr, MPI_STATUSES_IGNORE));
    return NULL;
}

static void *collector(void *arg)
{
    int expected = 0, r, t, k, v[3];
    int next[1024][NW];
    MPI_Status st;
    (void)arg;
    CHECK(np <= 1024);
    for (r = 0; r < np; r++)
        for (t = 0; t < NW; t++) {
            next[r][t] = 0;
            if ((r + t) % np == me)
                expected += NCOLL;
        }
    for (k = 0; k < expected; k++) {
        CHECK_MPI(MPI_Recv(v, 3, MPI_INT, MPI_ANY_SOURCE, TAG_COLL, MPI_COMM_WORLD, &st));
        CHECK_EQ(v[0], st.MPI_SOURCE);
        CHECK(v[1] >= 0 && v[1] < NW && (v[0] + v[1]) % np == me);
        CHECK_MSG(v[2] == next[v[0]][v[1]], "from %d thread %d: message %d, expected %d", v[0],
                  v[1], v[2], next[v[0]][v[1]]);
        next[v[0]][v[1]]++;
    }
    for (r = 0; r < np; r++)
        for (t = 0; t < NW; t++)
            if ((r + t) % np == me)
                CHECK_EQ(next[r][t], NCOLL);
    return NULL;
}

static void *mprober(void *arg)
{
    int total = NMP * np, v, flag;
    MPI_Message m;
    MPI_Status st;
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        if (mp_taken == total) {
            pthread_mutex_unlock(&lock);
            break;
        }
        pthread_mutex_unlock(&lock);
        CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, TAG_MP, MPI_COMM_WORLD, &flag, &m, &st));
        if (!flag)
            continue;
        CHECK_MPI(MPI_Mrecv(&v, 1, MPI_INT, &m, &st));
        CHECK(v >= 0 && v < total && v / NMP == st.MPI_SOURCE);
        pthread_mutex_lock(&lock);
        CHECK_MSG(!mp_seen[v], "message %d received twice", v);
        mp_seen[v] = 1;
        mp_taken++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1, t, k;
    pthread_t th[NW + 1];

    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    tu_after_init();
    CHECK_MSG(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    np = tu_size;
    me = tu_rank;

    CHECK(pthread_create(&th[NW], NULL, collector, NULL) == 0);
    for (t = 0; t < NW; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    for (t = 0; t <= NW; t++)
        CHECK(pthread_join(th[t], NULL) == 0);

    /* Everyone sends NMP messages (values me*NMP + k) to everyone, with one tag; two threads
     * per process match them with Improbe/Mrecv. */
    {
        MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * NMP * np);
        int *vals = tu_malloc(sizeof(int) * NMP), d;
        mp_seen = tu_malloc(NMP * np);
        memset(mp_seen, 0, NMP * np);
        for (k = 0; k < NMP; k++)
            vals[k] = me * NMP + k;
        CHECK(pthread_create(&th[0], NULL, mprober, NULL) == 0);
        CHECK(pthread_create(&th[1], NULL, mprober, NULL) == 0);
        for (d = 0; d < np; d++)
            for (k = 0; k < NMP; k++)
                CHECK_MPI(MPI_Isend(&vals[k], 1, MPI_INT, d, TAG_MP, MPI_COMM_WORLD,
                                    &rq[d * NMP + k]));
        CHECK(pthread_join(th[0], NULL) == 0);
        CHECK(pthread_join(th[1], NULL) == 0);
        CHECK_MPI(MPI_Waitall(NMP * np, rq, MPI_STATUSES_IGNORE));
        CHECK_EQ(mp_taken, NMP * np);
        free(rq);
        free(vals);
        free(mp_seen);
    }
    return tu_finish();
}
