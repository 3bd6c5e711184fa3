/*
 * MPI_Init_thread with the level named by the argument (single, funneled, serialized or
 * multiple): the levels are ordered constants, provided is a valid level and at least the
 * required one, MPI_Query_thread returns it, MPI_Is_thread_main is true on the main thread.
 * With serialized or multiple, another thread (the main one waiting for it) is not the main
 * thread and can communicate; with multiple it also queries the level. A message exchange
 * with the partner checks that communication works after this initialization.
 * Any size >= 1.
 */
#include "util.h"
#include <pthread.h>

static int provided;

static void *other_thread(void *arg)
{
    int flag = -1, lvl = -1, v = 0, w = 0;
    MPI_Request r;
    (void)arg;
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK_EQ(flag, 0);
    if (provided == MPI_THREAD_MULTIPLE) {
        CHECK_MPI(MPI_Query_thread(&lvl));
        CHECK_EQ(lvl, provided);
    }
    v = 31;
    CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &r));
    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 9, MPI_COMM_SELF));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_EQ(w, 31);
    return NULL;
}

int main(int argc, char **argv)
{
    int required = -1, lvl = -1, flag = -1, partner, v, w;
    const char *name = argc > 1 ? argv[1] : "";
    MPI_Status st;

    CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED);
    CHECK(MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED);
    CHECK(MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE);
    if (!strcmp(name, "single"))
        required = MPI_THREAD_SINGLE;
    else if (!strcmp(name, "funneled"))
        required = MPI_THREAD_FUNNELED;
    else if (!strcmp(name, "serialized"))
        required = MPI_THREAD_SERIALIZED;
    else if (!strcmp(name, "multiple"))
        required = MPI_THREAD_MULTIPLE;
    else
        TU_FAIL("usage: init_thread single|funneled|serialized|multiple");

    provided = -1;
    CHECK_MPI(MPI_Init_thread(&argc, &argv, required, &provided));
    tu_after_init();
    CHECK_MSG(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
              provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE,
              "provided = %d is not a thread level", provided);
    CHECK_MSG(provided >= required, "required %s (%d), provided %d", name, required, provided);
    CHECK_MPI(MPI_Query_thread(&lvl));
    CHECK_EQ(lvl, provided);
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK_EQ(flag, 1);

    if (provided >= MPI_THREAD_SERIALIZED) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
        CHECK(pthread_join(th, NULL) == 0);
    }
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK_EQ(flag, 1);

    partner = tu_partner();
    v = tu_rank;
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, partner, 1, &w, 1, MPI_INT, partner, 1,
                           MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, MPI_INT, partner, 1, 1);
    CHECK_EQ(w, partner);
    return tu_finish();
}
