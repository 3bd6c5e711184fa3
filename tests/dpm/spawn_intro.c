/*
 * Processes that never met, introduced by MPI_Intercomm_create: rank 0 alone spawns two
 * children (MPI_Comm_spawn on MPI_COMM_SELF), then MPI_COMM_WORLD and the children's world
 * make an intercommunicator through rank 0's parent intercommunicator. The other parents had
 * no route to the children, nor the children to them. Checked: every process sends its rank
 * to every process of the other group and receives theirs (both directions, every pair),
 * a barrier across, and MPI_Intercomm_merge (parents first) with an allreduce of the ranks.
 * Twice, with a new intercommunicator the second time (the introduced processes are known
 * by then). Size >= 1 (the parents).
 */
#include "util.h"

#define NCHILD 2

static void exercise(MPI_Comm inter, int parents_first)
{
    int rank, size, rsize, i, *got, sum = -1, msize;
    MPI_Request *reqs;
    MPI_Comm merged;
    CHECK_MPI(MPI_Comm_rank(inter, &rank));
    CHECK_MPI(MPI_Comm_size(inter, &size));
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    got = malloc(sizeof(int) * rsize);
    reqs = malloc(sizeof(MPI_Request) * 2 * rsize);
    for (i = 0; i < rsize; i++) {
        got[i] = -1;
        CHECK_MPI(MPI_Irecv(&got[i], 1, MPI_INT, i, 7, inter, &reqs[i]));
    }
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Isend(&rank, 1, MPI_INT, i, 7, inter, &reqs[rsize + i]));
    CHECK_MPI(MPI_Waitall(2 * rsize, reqs, MPI_STATUSES_IGNORE));
    for (i = 0; i < rsize; i++)
        CHECK_EQ(got[i], i);
    CHECK_MPI(MPI_Barrier(inter));
    CHECK_MPI(MPI_Intercomm_merge(inter, !parents_first, &merged));
    CHECK_MPI(MPI_Comm_size(merged, &msize));
    CHECK_EQ(msize, size + rsize);
    CHECK_MPI(MPI_Comm_rank(merged, &rank));
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(sum, msize * (msize - 1) / 2);
    CHECK_MPI(MPI_Comm_free(&merged));
    free(got);
    free(reqs);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, ic = MPI_COMM_NULL, inter;
    int errcodes[NCHILD], round, is_parent;
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    is_parent = parent == MPI_COMM_NULL;
    if (is_parent) {
        tu_after_init(); /* (the children's world is not the size the runner launched) */
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, NCHILD, MPI_INFO_NULL, 0,
                                     MPI_COMM_SELF, &ic, errcodes));
            for (int i = 0; i < NCHILD; i++)
                CHECK_EQ(errcodes[i], MPI_SUCCESS);
        }
    } else {
        ic = parent;
    }
    for (round = 0; round < 2; round++) {
        CHECK_MPI(MPI_Intercomm_create(MPI_COMM_WORLD, 0, ic, 0, 40 + round, &inter));
        exercise(inter, is_parent);
        CHECK_MPI(MPI_Comm_free(&inter));
    }
    if (ic != MPI_COMM_NULL)
        CHECK_MPI(MPI_Comm_disconnect(&ic));
    if (is_parent)
        return tu_finish();
    CHECK_MPI(MPI_Finalize());
    return 0;
}
