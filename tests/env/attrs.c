/*
 * Attributes of MPI_COMM_WORLD that describe the environment: MPI_TAG_UB (present, at
 * least 32767, and usable as a tag), MPI_HOST, MPI_IO (a rank, MPI_ANY_SOURCE or
 * MPI_PROC_NULL), MPI_WTIME_IS_GLOBAL, MPI_APPNUM and MPI_UNIVERSE_SIZE (optional; sane
 * when present), MPI_LASTUSEDCODE (present, at least MPI_ERR_LASTCODE). Runs as a
 * singleton too.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int *v, flag, tag_ub, size;
    MPI_Status st;

    tu_init(&argc, &argv);
    size = tu_size;

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK_MSG(flag, "MPI_TAG_UB is not set on MPI_COMM_WORLD");
    tag_ub = *v;
    CHECK_INT(tag_ub, >=, 32767);
    {
        int x = 5, y = 0;
        MPI_Request r;
        CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, tu_rank, tag_ub, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, tu_rank, tag_ub, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_STATUS(st, MPI_INT, tu_rank, tag_ub, 1);
        CHECK_EQ(y, 5);
    }

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag));
    CHECK_MSG(flag, "MPI_HOST is not set on MPI_COMM_WORLD");
    CHECK_MSG(*v == MPI_PROC_NULL || (*v >= 0 && *v < size), "MPI_HOST = %d", *v);

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &v, &flag));
    CHECK_MSG(flag, "MPI_IO is not set on MPI_COMM_WORLD");
    CHECK_MSG(*v == MPI_PROC_NULL || *v == MPI_ANY_SOURCE || (*v >= 0 && *v < size),
              "MPI_IO = %d", *v);

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    if (flag)
        CHECK_MSG(*v == 0 || *v == 1, "MPI_WTIME_IS_GLOBAL = %d", *v);

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
    if (flag)
        CHECK_MSG(*v >= 0, "MPI_APPNUM = %d", *v);

    /* (quirk "singleton_universe": MPICH 4.0.2 started as a singleton tries to start
     * "mpiexec -pmi_args ..." to answer this, which its own Hydra rejects, and hangs.) */
    if (!tu_quirk("singleton_universe")) {
        const char *want = getenv("TU_EXPECT_UNIVERSE");
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
        if (flag)
            CHECK_MSG(*v >= 1, "MPI_UNIVERSE_SIZE = %d", *v);
        /* What the launcher was told (mpirun -usize, MPIEXEC_UNIVERSE_SIZE): "unset" or N. */
        if (want && !strcmp(want, "unset"))
            CHECK_MSG(!flag, "MPI_UNIVERSE_SIZE is set (%d) where the launcher was told INFINITE",
                      *v);
        else if (want)
            CHECK_MSG(flag && *v == atoi(want), "MPI_UNIVERSE_SIZE is %d (flag %d), not %s",
                      flag ? *v : -1, flag, want);
    }

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &v, &flag));
    CHECK_MSG(flag, "MPI_LASTUSEDCODE is not set on MPI_COMM_WORLD");
    CHECK_INT(*v, >=, MPI_ERR_LASTCODE);

    return tu_finish();
}
