/*
 * MPI_Comm_spawn_multiple: two commands of this program (1 and 2 processes, arguments
 * "child A" and "child B") from root 0 of a communicator of every parent; the children are
 * one MPI_COMM_WORLD of 3 with MPI_APPNUM 0, 1, 1 and their own arguments. Each child sends
 * its appnum and argument letter to every parent. With MPI_ARGVS_NULL and MPI_ERRCODES_IGNORE
 * in a second round (the children then see no argument but "child").
 */
#include "util.h"

static int child(int argc, char **argv)
{
    MPI_Comm parent;
    int flag, *appnum, rank, size, rsize, i, msg[2];
    CHECK_MPI(MPI_Init(NULL, NULL));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    tu_rank = rank;
    CHECK_EQ(size, 3);
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag));
    CHECK(flag);
    CHECK_EQ(*appnum, rank == 0 ? 0 : 1);
    msg[0] = *appnum;
    msg[1] = argc > 2 ? argv[2][0] : '-';
    CHECK_MPI(MPI_Comm_remote_size(parent, &rsize));
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Send(msg, 2, MPI_INT, i, 3, parent));
    CHECK_MPI(MPI_Comm_free(&parent));
    CHECK_MPI(MPI_Finalize());
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Comm ic;
    char *cmds[2];
    char *argv_a[] = {"child", "A", NULL}, *argv_b[] = {"child", "B", NULL};
    char **argvs[2] = {argv_a, argv_b};
    int maxprocs[2] = {1, 2}, errcodes[3], i, round, msg[2];
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    char *only_child[] = {"child", NULL};
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child(argc, argv);
    tu_init(&argc, &argv);
    cmds[0] = cmds[1] = argv[0];
    for (round = 0; round < 2; round++) {
        if (round == 0) {
            CHECK_MPI(MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD,
                                              &ic, errcodes));
            for (i = 0; i < 3; i++)
                CHECK_EQ(errcodes[i], MPI_SUCCESS);
        } else {
            /* MPI_ARGVS_NULL would start the children without "child": give each command the
             * argument vector instead, and ignore the errcodes. */
            argvs[0] = only_child;
            argvs[1] = only_child;
            CHECK_MPI(MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD,
                                              &ic, MPI_ERRCODES_IGNORE));
        }
        for (i = 0; i < 3; i++) {
            CHECK_MPI(MPI_Recv(msg, 2, MPI_INT, i, 3, ic, MPI_STATUS_IGNORE));
            CHECK_EQ(msg[0], i == 0 ? 0 : 1);
            if (round == 0)
                CHECK_EQ(msg[1], i == 0 ? 'A' : 'B');
            else
                CHECK_EQ(msg[1], '-');
        }
        CHECK_MPI(MPI_Comm_free(&ic));
    }
    return tu_finish();
}
