/*
 * Initialization and finalization: MPI_Initialized / MPI_Finalized before MPI_Init, after
 * it and after MPI_Finalize; MPI_Init with NULL arguments; MPI_Get_version and
 * MPI_Get_library_version before, during and after (they may be called at any time);
 * MPI_Get_processor_name; size and rank of MPI_COMM_WORLD and MPI_COMM_SELF, with every
 * rank distinct (checked by messages to rank 0). Runs as a singleton too.
 */
#include "util.h"

static void versions(const char *when)
{
    int v = -1, sv = -1, len = -1;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    CHECK_MPI(MPI_Get_version(&v, &sv));
    CHECK_MSG(v == MPI_VERSION && sv == MPI_SUBVERSION,
              "%s: MPI_Get_version says %d.%d, the header says %d.%d", when, v, sv, MPI_VERSION,
              MPI_SUBVERSION);
    /* Protean implements MPI 4.0 (quirk "mpi_version_3": Open MPI 4.1 is MPI 3.1). */
    if (tu_quirk("mpi_version_3"))
        CHECK_MSG(v == 3 && sv >= 1, "%s: MPI version %d.%d", when, v, sv);
    else
        CHECK_MSG(v >= 4, "%s: MPI version %d.%d is older than 4.0", when, v, sv);
    memset(lib, 0x5A, sizeof lib);
    CHECK_MPI(MPI_Get_library_version(lib, &len));
    CHECK_MSG(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING, "%s: library version length %d",
              when, len);
    /* resultlen excludes the terminating NUL, as for MPI_Get_processor_name (quirk
     * "libversion_len": Open MPI 4.1 counts it). */
    if (tu_quirk("libversion_len") && strnlen(lib, sizeof lib) + 1 == (size_t)len)
        len--;
    CHECK_MSG(strnlen(lib, sizeof lib) == (size_t)len,
              "%s: library version string length is %zu, resultlen says %d", when,
              strnlen(lib, sizeof lib), len);
}

int main(int argc, char **argv)
{
    int flag, size, rank, len, k;
    char name[MPI_MAX_PROCESSOR_NAME];

    (void)argc;
    (void)argv;
    flag = -1;
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(flag, 0);
    flag = -1;
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(flag, 0);
    versions("before MPI_Init");

    CHECK_MPI(MPI_Init(NULL, NULL));
    tu_after_init();
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(flag, 1);
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(flag, 0);
    versions("after MPI_Init");

    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_INT(size, >=, 1);
    CHECK(rank >= 0 && rank < size);
    CHECK_MPI(MPI_Comm_size(MPI_COMM_SELF, &k));
    CHECK_EQ(k, 1);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_SELF, &k));
    CHECK_EQ(k, 0);

    memset(name, 0x5A, sizeof name);
    len = -1;
    CHECK_MPI(MPI_Get_processor_name(name, &len));
    CHECK_MSG(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "processor name length %d", len);
    CHECK_MSG(strnlen(name, sizeof name) == (size_t)len,
              "processor name is not NUL-terminated at its length %d", len);

    /* Ranks are distinct and agree with the message sources: everyone tells rank 0. */
    if (rank != 0) {
        CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
    } else {
        char *seen = tu_malloc(size);
        MPI_Status st;
        memset(seen, 0, size);
        seen[0] = 1;
        for (k = 1; k < size; k++) {
            int r = -1;
            CHECK_MPI(MPI_Recv(&r, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st));
            CHECK_MSG(r == st.MPI_SOURCE, "process %d says it is rank %d", st.MPI_SOURCE, r);
            CHECK(r > 0 && r < size && !seen[r]);
            seen[r] = 1;
        }
        free(seen);
    }

    CHECK_MPI(MPI_Finalize());
    flag = -1;
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(flag, 1);
    flag = -1;
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(flag, 1); /* stays true after finalization */
    versions("after MPI_Finalize");
    if (rank == 0)
        printf(" No Errors\n");
    return 0;
}
