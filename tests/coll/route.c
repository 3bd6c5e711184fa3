/*
 * Which algorithm serves a blocking collective at two processes, where Protean decides before
 * reading the arguments whether its shared-memory collectives may serve a call (the built-in
 * table names them from three processes): the answer must follow the decision file and a
 * control variable written at run time, for every call after the write.
 *
 * Each process writes a decision file naming `shm` for allreduce of 0-64 bytes at two
 * processes and sets PROTEAN_COLL_DECISION_FILE before MPI_Init. Messages sent (the
 * protean_{eager,rndv,split}_sent counters) tell the algorithms apart: a shared-memory collective sends
 * none, a point-to-point one at least one per call (or per two calls, for a bcast whose
 * root alternates). Where the point-to-point messages of an
 * allgather go over shared memory (the counters ending in _shm grow), the job uses the
 * shared-memory transport, and:
 *  - allreduce of 8 B (the file's shm rule) sends nothing; of 1 KiB (no rule) sends;
 *  - bcast of 8 B sends, of 64 KiB (the built-in table's rule at two processes) does not;
 *  - allgather of 8 B sends, and sends nothing once coll_allgather is written as "shm", and
 *    sends again once it is written back to "auto";
 *  - allreduce of 8 B sends once coll_allreduce names a point-to-point algorithm (the
 *    override before the file).
 * Under transports without shared memory every call sends. Every result is checked.
 * Two processes; Protean only (its variable names and decision file).
 */
#include "util.h"

#include "../pvar.h"

#define CALLS 20
#define LONG_COUNT 128 /* 1 KiB of longs */

/* Messages sent by every protocol, over every transport (`over` "") or one ("_shm"). */
static long long sent_over(const char *over)
{
    long long n = 0;
    const char *what[] = {"eager", "rndv", "split"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "protean_%s_sent%s", what[i], over);
        n += tu_pvar(name);
    }
    return n;
}

static long long sent(void)
{
    return sent_over("");
}

/* Write the enumerated control variable `name` to its item `item`. */
static void set_choice(const char *name, const char *item)
{
    int provided, idx, n, verb, bind, scope, nitems, count, v = -1;
    MPI_Datatype dt;
    MPI_T_enum en;
    MPI_T_cvar_handle h;
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK_MPI(MPI_T_cvar_get_index(name, &idx));
    n = 0;
    CHECK_MPI(MPI_T_cvar_get_info(idx, NULL, &n, &verb, &dt, &en, NULL, NULL, &bind, &scope));
    CHECK(en != MPI_T_ENUM_NULL);
    CHECK_MPI(MPI_T_enum_get_info(en, &nitems, NULL, NULL));
    for (int i = 0; i < nitems && v < 0; i++) {
        char iname[64];
        int ilen = sizeof iname, value;
        CHECK_MPI(MPI_T_enum_get_item(en, i, &value, iname, &ilen));
        if (strcmp(iname, item) == 0)
            v = value;
    }
    CHECK_MSG(v >= 0, "%s has no item %s", name, item);
    CHECK_MPI(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count));
    CHECK_MPI(MPI_T_cvar_write(h, &v));
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    CHECK_MPI(MPI_T_finalize());
}

/* CALLS allreduces of `count` longs (MPI_SUM), checked; the messages this process sent. */
static long long allreduces(int count)
{
    long *in = tu_malloc(count * sizeof(long)), *out = tu_malloc(count * sizeof(long));
    long long before = 0;
    /* The first call is not counted: a shared-memory collective's first call on a
     * communicator sets up its region, with messages. */
    for (int k = -1; k < CALLS; k++) {
        if (k == 0)
            before = sent();
        for (int i = 0; i < count; i++)
            in[i] = (long)(tu_rank + 1) * 1000 + i + k;
        CHECK_MPI(MPI_Allreduce(in, out, count, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < count; i++)
            CHECK_INT(out[i], ==, 3000L + 2L * (i + k));
    }
    long long d = sent() - before;
    free(in);
    free(out);
    return d;
}

/* CALLS allgathers of 8 B, checked; the messages this process sent. */
static long long allgathers(void)
{
    long in, out[2];
    long long before = 0;
    for (int k = -1; k < CALLS; k++) { /* the first call uncounted, as above */
        if (k == 0)
            before = sent();
        in = tu_rank * 100 + k;
        CHECK_MPI(MPI_Allgather(&in, 1, MPI_LONG, out, 1, MPI_LONG, MPI_COMM_WORLD));
        CHECK_INT(out[0], ==, (long)k);
        CHECK_INT(out[1], ==, 100L + k);
    }
    return sent() - before;
}

/* CALLS bcasts of `bytes` bytes, the root rotating, checked; the messages this process sent. */
static long long bcasts(int bytes)
{
    unsigned char *b = tu_malloc(bytes);
    long long before = 0;
    for (int k = -1; k < CALLS; k++) { /* the first call uncounted, as above */
        int root = (k + 2) % 2;
        if (k == 0)
            before = sent();
        if (tu_rank == root)
            tu_fill(b, bytes, TU_SEED(root, k + 1, bytes));
        else
            memset(b, 0, bytes);
        CHECK_MPI(MPI_Bcast(b, bytes, MPI_BYTE, root, MPI_COMM_WORLD));
        CHECK_BUF(b, bytes, TU_SEED(root, k + 1, bytes));
    }
    free(b);
    return sent() - before;
}

int main(int argc, char **argv)
{
    char path[256];
    snprintf(path, sizeof path, "%s/protean-route-%d.rules", tu_scratch(), (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    fprintf(f, "allreduce 2 0-64 shm\n");
    fclose(f);
    setenv("PROTEAN_COLL_DECISION_FILE", path, 1);
    tu_init(&argc, &argv);
    unlink(path);
    CHECK_EQ(tu_size, 2);

    /* Whether the shared-memory collectives serve this job at all: barriers forced onto
     * them send nothing where they do. */
    set_choice("coll_barrier", "shm");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* uncounted: may set up the region */
    long long before = sent();
    for (int k = 0; k < CALLS; k++)
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int shm = sent() == before;
    set_choice("coll_barrier", "auto");
    TU_LOG("shared-memory collectives: %d", shm);
    long long d = allgathers();
    CHECK_INT(d, >=, CALLS);

    d = allreduces(1);
    if (shm)
        CHECK_MSG(d == 0, "allreduce 8 B under the file's shm rule sent %lld messages", d);
    else
        CHECK_INT(d, >=, CALLS);
    d = allreduces(LONG_COUNT);
    CHECK_MSG(d >= CALLS, "allreduce 1 KiB (no shm rule) sent %lld messages", d);

    /* The built-in table names shm for bcast at two processes from 64 KiB only. */
    d = bcasts(8);
    CHECK_MSG(d >= CALLS / 2, "bcast 8 B sent %lld messages", d);
    d = bcasts(65536);
    if (shm)
        CHECK_MSG(d == 0, "bcast 64 KiB (the built-in shm rule) sent %lld messages", d);
    else
        CHECK_INT(d, >=, CALLS / 2);

    set_choice("coll_allgather", "shm");
    d = allgathers();
    if (shm)
        CHECK_MSG(d == 0, "allgather with coll_allgather=shm sent %lld messages", d);
    set_choice("coll_allgather", "auto");
    d = allgathers();
    CHECK_MSG(d >= CALLS, "allgather back on auto sent %lld messages", d);

    set_choice("coll_allreduce", "recursive_doubling");
    d = allreduces(1);
    CHECK_MSG(d >= CALLS, "allreduce with coll_allreduce=recursive_doubling sent %lld", d);
    set_choice("coll_allreduce", "auto");
    d = allreduces(1);
    if (shm)
        CHECK_MSG(d == 0, "allreduce 8 B back on auto (the file's rule) sent %lld messages", d);
    return tu_finish();
}
