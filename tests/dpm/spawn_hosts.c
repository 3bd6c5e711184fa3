/*
 * MPI_Comm_spawn onto the job's hosts by the info keys `host` and `hosts`: the parents learn
 * each other's host (MPI_Get_processor_name), spawn 2 children onto the host of the last
 * rank (`host`), and then one child per distinct host and one more (`hosts`, a list: the
 * children go round-robin over it). Each child reports its host to the parents' root, which
 * checks it is the one asked for; parents and children then add up over the merged
 * intracommunicator and exchange a message over the intercommunicator. A host that is not
 * one of the job's fails with MPI_ERR_SPAWN and its name in the error string, and the job
 * goes on; so does a program that cannot start on the last rank's host (reported by that
 * host's proxy under the cluster variants), and a spawn after it works. On one host every name is this host's, and the same checks hold; under the
 * cluster variants the children run on other hosts, started by those hosts' proxies.
 */
#include "util.h"
#include <sys/stat.h>
#include <unistd.h>

#define NAMELEN MPI_MAX_PROCESSOR_NAME

static void child(void)
{
    MPI_Comm parent, all;
    char name[NAMELEN] = {0};
    int len, sum = 0, one = 1, rank, size, got;
    CHECK_MPI(MPI_Init(NULL, NULL));
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK_MPI(MPI_Get_processor_name(name, &len));
    CHECK_MPI(MPI_Send(name, NAMELEN, MPI_CHAR, 0, rank, parent));
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE));
    CHECK_EQ(got, 1000 + rank);
    CHECK_MPI(MPI_Intercomm_merge(parent, 1, &all));
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all));
    {
        int total;
        CHECK_MPI(MPI_Comm_size(all, &total));
        CHECK_EQ(sum, total);
    }
    CHECK_MPI(MPI_Comm_free(&all));
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    CHECK_MPI(MPI_Finalize());
}

/* Spawn `n` children with `info`; the root checks child i ran on want[i]. */
static void spawn_on(const char *prog, MPI_Info info, int n, char (*want)[NAMELEN])
{
    MPI_Comm ic, all;
    int errcodes[16], i, one = 1, sum = 0, total;
    char name[NAMELEN];
    char *args[] = {"child", NULL};
    CHECK(n <= 16);
    CHECK_MPI(MPI_Comm_spawn(prog, args, n, info, 0, MPI_COMM_WORLD, &ic, errcodes));
    if (tu_rank == 0) {
        for (i = 0; i < n; i++) {
            CHECK_EQ(errcodes[i], MPI_SUCCESS);
            CHECK_MPI(MPI_Recv(name, NAMELEN, MPI_CHAR, i, i, ic, MPI_STATUS_IGNORE));
            CHECK_MSG(strcmp(name, want[i]) == 0, "child %d ran on '%s', asked for '%s'", i,
                      name, want[i]);
            int v = 1000 + i;
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, i, 7, ic));
        }
    }
    CHECK_MPI(MPI_Intercomm_merge(ic, 0, &all));
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all));
    CHECK_MPI(MPI_Comm_size(all, &total));
    CHECK_EQ(total, tu_size + n);
    CHECK_EQ(sum, total);
    CHECK_MPI(MPI_Comm_free(&all));
    CHECK_MPI(MPI_Comm_disconnect(&ic));
}

int main(int argc, char **argv)
{
    char mine[NAMELEN] = {0}, list[16 * NAMELEN] = {0}, text[MPI_MAX_ERROR_STRING];
    char (*names)[NAMELEN], (*want)[NAMELEN], (*hosts)[NAMELEN];
    int len, i, j, nhosts = 0, rc, cls, errcodes[2];
    MPI_Info info;
    MPI_Comm ic = MPI_COMM_WORLD;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        child();
        return 0;
    }
    tu_init(&argc, &argv);
    names = calloc((size_t)tu_size, NAMELEN);
    want = calloc(16, NAMELEN);
    hosts = calloc((size_t)tu_size, NAMELEN);
    CHECK(names && want && hosts);
    CHECK_MPI(MPI_Get_processor_name(mine, &len));
    CHECK_MPI(MPI_Allgather(mine, NAMELEN, MPI_CHAR, names, NAMELEN, MPI_CHAR, MPI_COMM_WORLD));

    /* `host`: both children on the last rank's host. */
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "host", names[tu_size - 1]));
    strcpy(want[0], names[tu_size - 1]);
    strcpy(want[1], names[tu_size - 1]);
    spawn_on(argv[0], info, 2, want);
    CHECK_MPI(MPI_Info_free(&info));

    /* `hosts`: the distinct hosts in rank order, then round-robin. */
    for (i = 0; i < tu_size; i++) {
        for (j = 0; j < nhosts && strcmp(hosts[j], names[i]) != 0; j++)
            ;
        if (j == nhosts)
            strcpy(hosts[nhosts++], names[i]);
    }
    for (i = 0; i < nhosts; i++) {
        if (i)
            strcat(list, ",");
        strcat(list, hosts[i]);
    }
    for (i = 0; i <= nhosts; i++)
        strcpy(want[i], hosts[i % nhosts]);
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "hosts", list));
    spawn_on(argv[0], info, nhosts + 1, want);
    CHECK_MPI(MPI_Info_free(&info));

    /* A host outside the job. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "host", "protean-no-such-host"));
    errcodes[0] = errcodes[1] = -1;
    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, info, 0, MPI_COMM_WORLD, &ic, errcodes);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK_MSG(cls == MPI_ERR_SPAWN, "class %s", tu_class_name(cls));
    CHECK(ic == MPI_COMM_NULL);
    CHECK_MPI(MPI_Error_string(rc, text, &len));
    CHECK_MSG(strstr(text, "protean-no-such-host") != NULL, "error string '%s'", text);
    if (tu_rank == 0)
        CHECK(errcodes[0] != MPI_SUCCESS && errcodes[1] != MPI_SUCCESS);
    CHECK_MPI(MPI_Info_free(&info));

    /* A program that cannot start on the last rank's host (another host under the cluster
       variants: its proxy reports it): an executable file whose interpreter does not exist,
       which mpirun's checks let through and exec refuses. The spawn fails, not the job, and
       the next one works. */
    char bad[64] = "/tmp/protean-spawn-hosts-XXXXXX";
    if (tu_rank == 0) {
        int fd = mkstemp(bad);
        CHECK(fd >= 0);
        const char *text = "#!/nonexistent/protean-interpreter\n";
        CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        CHECK(fchmod(fd, 0755) == 0);
        CHECK(close(fd) == 0);
    }
    CHECK_MPI(MPI_Bcast(bad, sizeof bad, MPI_CHAR, 0, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "host", names[tu_size - 1]));
    rc = MPI_Comm_spawn(bad, MPI_ARGV_NULL, 2, info, 0, MPI_COMM_WORLD, &ic, errcodes);
    if (tu_rank == 0)
        unlink(bad);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK_MSG(cls == MPI_ERR_SPAWN, "class %s", tu_class_name(cls));
    CHECK(ic == MPI_COMM_NULL);
    CHECK_MPI(MPI_Error_string(rc, text, &len));
    CHECK_MSG(strstr(text, "No such file") != NULL, "error string '%s'", text);
    strcpy(want[0], names[tu_size - 1]);
    spawn_on(argv[0], info, 1, want);
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(names);
    free(want);
    free(hosts);
    return tu_finish();
}
