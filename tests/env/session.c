/*
 * MPI-4 sessions, in the mode named by the argument:
 *   alone     sessions without MPI_Init: an error handler made before MPI starts and given
 *             to MPI_Session_init; the session's info (thread level asked for is given);
 *             the process sets mpi://WORLD and mpi://SELF (names, lengths, mpi_size, groups);
 *             communicators from both groups (collectives and point-to-point on them);
 *             errors raised on the session (a bad process set name, a bad index) reach its
 *             handler; MPI_Session_call_errhandler; MPI_Initialized stays false; a second
 *             session after the first one ends.
 *   world     MPI_Init, then a session; MPI_Finalize while the session is open (its
 *             communicator still works), MPI_Session_finalize after.
 *   upgrade   MPI_Init (MPI_THREAD_SINGLE), then a session asking for MPI_THREAD_MULTIPLE:
 *             the session gets it, and MPI_Query_thread says so.
 *   threads   MPI_Init_thread(MPI_THREAD_MULTIPLE); three threads each open a session and
 *             make a communicator from mpi://WORLD with their own string tag, at once, while
 *             the main thread uses MPI_COMM_WORLD.
 *   late      a session opened and finalized, then MPI_Init and MPI_Finalize.
 * Any size >= 1.
 */
#include "util.h"
#include <pthread.h>
#include <strings.h>

static int handler_calls, handler_class;
static MPI_Session handler_session;

static void on_error(MPI_Session *s, int *code, ...)
{
    handler_calls++;
    handler_session = *s;
    MPI_Error_class(*code, &handler_class);
}

static int expected_size(void)
{
    const char *np = getenv("TU_TEST_NP");
    return np && *np ? atoi(np) : -1;
}

static int pset_size(MPI_Session s, const char *name)
{
    MPI_Info info = MPI_INFO_NULL;
    char v[32];
    int flag = 0;
    CHECK_MPI(MPI_Session_get_pset_info(s, name, &info));
    CHECK_MPI(MPI_Info_get(info, "mpi_size", (int)sizeof v - 1, v, &flag));
    CHECK_MSG(flag, "no mpi_size in the info of %s", name);
    CHECK_MPI(MPI_Info_free(&info));
    return atoi(v);
}

/* A communicator from process set `pset` of session `s`, checked with an allreduce of the
 * ranks and a ring exchange. */
static MPI_Comm comm_from(MPI_Session s, const char *pset, const char *tag)
{
    MPI_Group g = MPI_GROUP_NULL;
    MPI_Comm c = MPI_COMM_NULL;
    int size, rank, gsize, sum = -1, from = -1;
    CHECK_MPI(MPI_Group_from_session_pset(s, pset, &g));
    CHECK_MPI(MPI_Group_size(g, &gsize));
    CHECK_MPI(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    CHECK_MPI(MPI_Group_free(&g));
    CHECK(c != MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK_EQ(size, gsize);
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(sum, size * (size - 1) / 2);
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 5, &from, 1, MPI_INT,
                           (rank + size - 1) % size, 5, c, MPI_STATUS_IGNORE));
    CHECK_EQ(from, (rank + size - 1) % size);
    return c;
}

static MPI_Session open_session(const char *level, MPI_Errhandler eh)
{
    MPI_Session s = MPI_SESSION_NULL;
    MPI_Info info = MPI_INFO_NULL;
    if (level) {
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpi_thread_support_level", level));
    }
    CHECK_MPI(MPI_Session_init(info, eh, &s));
    CHECK(s != MPI_SESSION_NULL);
    if (info != MPI_INFO_NULL)
        CHECK_MPI(MPI_Info_free(&info));
    return s;
}

static void check_level(MPI_Session s, const char *want)
{
    MPI_Info used = MPI_INFO_NULL;
    char v[64];
    int flag = 0;
    /* MPI-4.1's key; MPI-4.0's example named it thread_level. */
    const char *key = tu_quirk("thread_level_key") ? "thread_level" : "mpi_thread_support_level";
    CHECK_MPI(MPI_Session_get_info(s, &used));
    CHECK_MPI(MPI_Info_get(used, key, (int)sizeof v - 1, v, &flag));
    CHECK_MSG(flag, "no %s in the session's info", key);
    CHECK_MSG(!strcmp(v, want), "thread level %s, asked for %s", v, want);
    CHECK_MPI(MPI_Info_free(&used));
}

static void alone(void)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL, got = MPI_ERRHANDLER_NULL;
    MPI_Session s, s2;
    MPI_Comm world, self;
    MPI_Group g = MPI_GROUP_NULL;
    int n = -1, len, world_seen = 0, self_seen = 0, flag = -1, rc, np = expected_size();

    /* Before MPI starts, as the standard allows, to hand to MPI_Session_init. */
    if (tu_quirk("early_errhandler")) {
        s = open_session("MPI_THREAD_MULTIPLE", MPI_ERRORS_RETURN);
        CHECK_MPI(MPI_Session_create_errhandler(on_error, &eh));
        CHECK_MPI(MPI_Session_set_errhandler(s, eh));
    } else {
        CHECK_MPI(MPI_Session_create_errhandler(on_error, &eh));
        s = open_session("MPI_THREAD_MULTIPLE", eh);
    }
    check_level(s, "MPI_THREAD_MULTIPLE");
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Session_get_errhandler(s, &got));
    CHECK(got == eh);

    CHECK_MPI(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK_INT(n, >=, 2);
    for (int i = 0; i < n; i++) {
        char *name;
        len = 0;
        CHECK_MPI(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        CHECK_INT(len, >, 1);
        name = malloc(len);
        CHECK_MPI(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK_EQ(strlen(name) + 1, len);
        if (!strcasecmp(name, "mpi://WORLD"))
            world_seen = 1;
        if (!strcasecmp(name, "mpi://SELF"))
            self_seen = 1;
        free(name);
    }
    CHECK(world_seen && self_seen);
    if (np > 0)
        CHECK_EQ(pset_size(s, "mpi://WORLD"), np);
    CHECK_EQ(pset_size(s, "mpi://SELF"), 1);

    world = comm_from(s, "mpi://WORLD", "org.protean.test.world");
    CHECK_MPI(MPI_Comm_rank(world, &tu_rank));
    self = comm_from(s, "mpi://SELF", "org.protean.test.self");

    /* Errors raised on the session go to its handler. */
    handler_calls = 0;
    if (!tu_quirk("session_errhandler")) {
        rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g);
        CHECK(rc != MPI_SUCCESS);
        CHECK_EQ(handler_calls, 1);
        CHECK(handler_session == s);
        CHECK_EQ(handler_class, MPI_ERR_ARG);
        len = 0;
        rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, n, &len, NULL);
        CHECK(rc != MPI_SUCCESS);
        CHECK_EQ(handler_calls, 2);
        CHECK_MPI(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
        CHECK_EQ(handler_calls, 3);
        CHECK_EQ(handler_class, MPI_ERR_OTHER);
        CHECK_MPI(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
        len = 0;
        CHECK_CLASS(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, -1, &len, NULL), MPI_ERR_ARG);
        CHECK_EQ(handler_calls, 3);
    }
    CHECK_MPI(MPI_Errhandler_free(&eh));

    CHECK_MPI(MPI_Comm_free(&self));
    CHECK_MPI(MPI_Barrier(world));
    CHECK_MPI(MPI_Comm_free(&world));
    CHECK_MPI(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL);

    /* Once more: a session after the last one ended. */
    if (!tu_quirk("session_reinit")) {
        s2 = open_session(NULL, MPI_ERRORS_RETURN);
        world = comm_from(s2, "mpi://world", "org.protean.test.again");
        CHECK_MPI(MPI_Comm_free(&world));
        CHECK_MPI(MPI_Session_finalize(&s2));
    }
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(flag, 0);
}

static void world_first(void)
{
    MPI_Session s;
    MPI_Comm c;
    int flag = -1, v;
    tu_init(NULL, NULL);
    s = open_session(NULL, MPI_ERRORS_RETURN);
    c = comm_from(s, "mpi://WORLD", "org.protean.test.world");
    CHECK_MPI(MPI_Finalize());
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(flag, 1);
    /* The session, and what it made, outlive MPI_Finalize. */
    v = tu_rank;
    CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, c));
    CHECK_EQ(v, 0);
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Session_finalize(&s));
}

static void upgrade(void)
{
    MPI_Session s;
    MPI_Comm c;
    int lvl = -1;
    tu_init(NULL, NULL);
    s = open_session("mpi_thread_multiple", MPI_ERRORS_RETURN);
    check_level(s, "MPI_THREAD_MULTIPLE");
    /* The process now provides MPI_THREAD_MULTIPLE, to the world model too. */
    CHECK_MPI(MPI_Query_thread(&lvl));
    if (!tu_quirk("query_thread_world"))
        CHECK_EQ(lvl, MPI_THREAD_MULTIPLE);
    c = comm_from(s, "mpi://WORLD", "org.protean.test.upgrade");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Session_finalize(&s));
    /* An invalid session has no handler of its own: MPI_COMM_WORLD's (here) answers. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_CLASS(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &lvl), MPI_ERR_SESSION);
    tu_finish();
}

static void *library(void *arg)
{
    char tag[32];
    MPI_Session s = open_session("MPI_THREAD_MULTIPLE", MPI_ERRORS_RETURN);
    MPI_Comm c;
    snprintf(tag, sizeof tag, "org.protean.test.thread%d", (int)(long)arg);
    for (int round = 0; round < 3; round++) {
        c = comm_from(s, "mpi://WORLD", tag);
        CHECK_MPI(MPI_Comm_free(&c));
    }
    CHECK_MPI(MPI_Session_finalize(&s));
    return NULL;
}

static void threads(void)
{
    pthread_t t[3];
    int provided = -1, sum = -1;
    CHECK_MPI(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided));
    tu_after_init();
    CHECK_EQ(provided, MPI_THREAD_MULTIPLE);
    for (long i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, library, (void *)i) == 0);
    for (int round = 0; round < 10; round++) {
        CHECK_MPI(MPI_Allreduce(&tu_rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK_EQ(sum, tu_size * (tu_size - 1) / 2);
    }
    for (int i = 0; i < 3; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    tu_finish();
}

static void late(void)
{
    MPI_Session s = open_session(NULL, MPI_ERRORS_RETURN);
    MPI_Comm c = comm_from(s, "mpi://WORLD", "org.protean.test.late");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Session_finalize(&s));
    tu_init(NULL, NULL);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    tu_finish();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "alone") || !strcmp(mode, "world")) {
        if (!strcmp(mode, "alone"))
            alone();
        else
            world_first();
        if (tu_rank == 0)
            printf(" No Errors\n");
    } else if (!strcmp(mode, "upgrade"))
        upgrade();
    else if (!strcmp(mode, "threads"))
        threads();
    else if (!strcmp(mode, "late"))
        late();
    else
        TU_FAIL("usage: session alone|world|upgrade|threads|late");
    return 0;
}
