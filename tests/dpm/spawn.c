/*
 * MPI_Comm_spawn: every parent (any size) spawns 3 copies of this program ("child" as the
 * argument, info env DPM_ENV=yes and wdir /tmp) from root 0, then a second spawn rooted at
 * the last rank. Checks MPI_Comm_get_parent (MPI_COMM_NULL in the parents), the errcodes,
 * the intercommunicator's sizes, point-to-point both ways (every parent with every child),
 * MPI_Bcast and MPI_Allreduce across it, MPI_Intercomm_merge (parents first), MPI_UNIVERSE_SIZE
 * and MPI_APPNUM; the children check their parent intercommunicator, their environment and
 * working directory, and talk among themselves in their own MPI_COMM_WORLD.
 * With TU_EXPECT_ROUTE=shm (or tcp), the children check through MPI_T that their
 * messages to the parents went by that transport (protean_eager_sent_<route>); with shm,
 * rank 0 of each side then streams 200 ping-pongs with the other side's rank 0 and checks that
 * most of them arrived through a fast channel (the other job's process was promoted like a
 * peer of the own job: protean_chan_fast_frames_recvd).
 */
#include "util.h"
#include "pvar.h"

#define NCHILD 3

static void exercise(MPI_Comm ic, int parent_side)
{
    int rank, size, rsize, i, v, sum, flag, merged_rank, merged_size;
    MPI_Comm merged;
    MPI_Status st;
    const char *route = getenv("TU_EXPECT_ROUTE");
    char counter[64];
    long long before = 0, after;
    if (route && *route) {
        snprintf(counter, sizeof counter, "protean_eager_sent_%s", route);
        before = tu_pvar(counter);
        CHECK_MSG(before >= 0, "no MPI_T variable %s", counter);
    }
    CHECK_MPI(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag);
    CHECK_MPI(MPI_Comm_rank(ic, &rank));
    CHECK_MPI(MPI_Comm_size(ic, &size));
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    if (parent_side)
        CHECK_EQ(rsize, NCHILD);
    else
        CHECK_EQ(size, NCHILD);
    /* Point to point: each side sends its rank * 100 + peer to every remote process. */
    int *out = tu_malloc(sizeof(int) * (size_t)rsize);
    MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * (size_t)rsize);
    for (i = 0; i < rsize; i++) {
        out[i] = rank * 100 + i + (parent_side ? 0 : 50000);
        CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, i, 7, ic, &rq[i]));
    }
    if (route && *route) {
        after = tu_pvar(counter);
        CHECK_MSG(after - before >= rsize, "%s went from %lld to %lld for %d messages", counter,
                  before, after, rsize);
    }
    for (i = 0; i < rsize; i++) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, i, 7, ic, &st));
        CHECK_EQ(v, i * 100 + rank + (parent_side ? 50000 : 0));
        CHECK_EQ(st.MPI_SOURCE, i);
    }
    CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));
    free(out);
    free(rq);
    if (route && strcmp(route, "shm") == 0 && rank == 0) {
        long long fast0 = tu_pvar("protean_chan_fast_frames_recvd");
        CHECK_MSG(fast0 >= 0, "no MPI_T variable protean_chan_fast_frames_recvd");
        for (i = 0; i < 200; i++) {
            if (parent_side) {
                CHECK_MPI(MPI_Send(&i, 1, MPI_INT, 0, 8, ic));
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 8, ic, &st));
            } else {
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 8, ic, &st));
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 8, ic));
            }
            CHECK_EQ(v, i);
        }
        long long fast = tu_pvar("protean_chan_fast_frames_recvd") - fast0;
        CHECK_MSG(fast >= 100, "%lld of 200 messages from the other job came by a fast channel",
                  fast);
    }
    /* Broadcast from parent rank 0 to the children. */
    v = 0;
    if (parent_side) {
        v = 4242;
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    } else {
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, ic));
        CHECK_EQ(v, 4242);
    }
    /* Allreduce across: each side gets the sum over the other side. */
    v = parent_side ? 1 : 1000;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, ic));
    CHECK_EQ(sum, parent_side ? 1000 * rsize : rsize);
    /* Merge: parents low. */
    CHECK_MPI(MPI_Intercomm_merge(ic, parent_side ? 0 : 1, &merged));
    CHECK_MPI(MPI_Comm_rank(merged, &merged_rank));
    CHECK_MPI(MPI_Comm_size(merged, &merged_size));
    CHECK_EQ(merged_size, size + rsize);
    CHECK_EQ(merged_rank, parent_side ? rank : rsize + rank);
    v = merged_rank;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(sum, merged_size * (merged_size - 1) / 2);
    CHECK_MPI(MPI_Comm_free(&merged));
}

static int child(void)
{
    MPI_Comm parent;
    int flag, *appnum, rank, size, v, sum;
    const char *env = getenv("DPM_ENV");
    char cwd[4096];
    CHECK_MPI(MPI_Init(NULL, NULL));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    tu_rank = rank;
    CHECK_EQ(size, NCHILD);
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    CHECK_MSG(env && strcmp(env, "yes") == 0, "DPM_ENV=%s", env ? env : "(unset)");
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK_MSG(strcmp(cwd, "/tmp") == 0, "cwd %s", cwd);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag));
    CHECK(flag);
    CHECK_EQ(*appnum, 0);
    v = rank;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(sum, NCHILD * (NCHILD - 1) / 2);
    exercise(parent, 0);
    CHECK_MPI(MPI_Comm_free(&parent));
    CHECK_MPI(MPI_Finalize());
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Comm parent, ic;
    MPI_Info info;
    int errcodes[NCHILD], i, round, *universe, flag;
    char *args[] = {"child", NULL};
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child();
    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag));
    CHECK(flag);
    /* At least one; Open MPI reports its slots (the cores) even when oversubscribed, Protean at
     * least the job's size. */
    CHECK_INT(*universe, >=, 1);
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "env", "DPM_ENV=yes"));
    CHECK_MPI(MPI_Info_set(info, "wdir", "/tmp"));
    for (round = 0; round < 2; round++) {
        int root = round == 0 ? 0 : tu_size - 1;
        for (i = 0; i < NCHILD; i++)
            errcodes[i] = -1;
        CHECK_MPI(MPI_Comm_spawn(argv[0], args, NCHILD, info, root, MPI_COMM_WORLD, &ic,
                                 errcodes));
        for (i = 0; i < NCHILD; i++)
            CHECK_EQ(errcodes[i], MPI_SUCCESS);
        exercise(ic, 1);
        CHECK_MPI(MPI_Comm_free(&ic));
    }
    CHECK_MPI(MPI_Info_free(&info));
    return tu_finish();
}
