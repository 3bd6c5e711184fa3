/*
 * A spawn that cannot start: a missing program, a file that is not executable, a program not
 * in the path, and a wdir that is not a directory each fail on every parent with
 * MPI_ERR_SPAWN (MPI_ERRORS_RETURN on the communicator), the process manager's reason in the
 * error string, every errcode at the root MPI_ERR_SPAWN, MPI_COMM_NULL for the
 * intercommunicator, and no process started (the job then goes on: a barrier and a good
 * spawn of this program succeed). maxprocs 0 is MPI_ERR_SPAWN too.
 */
#include "util.h"

static void expect_fail(const char *prog, MPI_Info info, int maxprocs, const char *why)
{
    MPI_Comm ic = MPI_COMM_WORLD;
    int errcodes[4] = {-1, -1, -1, -1}, rc, cls, len, i;
    char text[MPI_MAX_ERROR_STRING];
    rc = MPI_Comm_spawn(prog, MPI_ARGV_NULL, maxprocs, info, 0, MPI_COMM_WORLD, &ic, errcodes);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK_MSG(cls == MPI_ERR_SPAWN, "%s: class %s", prog, tu_class_name(cls));
    CHECK(ic == MPI_COMM_NULL);
    CHECK_MPI(MPI_Error_string(rc, text, &len));
    CHECK_MSG(strstr(text, why) != NULL, "%s: error string '%s' lacks '%s'", prog, text, why);
    if (tu_rank == 0)
        for (i = 0; i < maxprocs; i++)
            CHECK_MSG(errcodes[i] != MPI_SUCCESS && errcodes[i] != -1, "errcode %d: %d", i,
                      errcodes[i]);
}

int main(int argc, char **argv)
{
    MPI_Info info;
    MPI_Comm ic, parent;
    char plain[64];
    char *args[] = {"child", NULL};
    FILE *f;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        CHECK_MPI(MPI_Init(NULL, NULL));
        CHECK_MPI(MPI_Comm_get_parent(&parent));
        CHECK(parent != MPI_COMM_NULL);
        CHECK_MPI(MPI_Barrier(parent));
        CHECK_MPI(MPI_Comm_free(&parent));
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    snprintf(plain, sizeof plain, "/tmp/protean-spawn-plain-%d", (int)getpid());
    /* Every rank names its own file; only the root's is used. */
    f = fopen(plain, "w");
    CHECK(f != NULL);
    fputs("not a program\n", f);
    fclose(f);
    expect_fail("/nonexistent/program", MPI_INFO_NULL, 2, "No such file or directory");
    expect_fail(plain, MPI_INFO_NULL, 3, "not executable");
    expect_fail("protean-no-such-program", MPI_INFO_NULL, 1, "no such program in the path");
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "wdir", "/nonexistent/dir"));
    expect_fail(argv[0], info, 2, "is not a directory");
    CHECK_MPI(MPI_Info_free(&info));
    expect_fail(argv[0], MPI_INFO_NULL, 0, "maxprocs 0");
    unlink(plain);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* The job is intact: a good spawn works. */
    CHECK_MPI(MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                             MPI_ERRCODES_IGNORE));
    CHECK_MPI(MPI_Barrier(ic));
    CHECK_MPI(MPI_Comm_free(&ic));
    return tu_finish();
}
