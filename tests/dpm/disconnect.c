/*
 * Spawn and MPI_Comm_disconnect in a loop (40 cycles of 2 children from every parent): each
 * cycle the children send their pids and a message goes both ways, both sides disconnect,
 * the children finalize and exit; the parents check that every child of the cycle is gone
 * (reaped by mpirun) within 10 s. At the end the parents' open descriptors and mappings
 * (/proc/self/fd and /proc/self/maps entries) have not grown with the cycles, and no
 * shared-memory segment of the spawned jobs is left in /dev/shm.
 */
#include "util.h"

#include <dirent.h>
#include <signal.h>

#define NCHILD 2
#define CYCLES 40

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, c;
    CHECK(f != NULL);
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* True while the process exists and has not exited: not a zombie (Z) nor being reaped (X,
 * which a process shows for an instant after Z while its parent collects it). */
static int alive(int pid)
{
    char path[64], state = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%*d %*s %c", &state) != 1)
        state = 0;
    fclose(f);
    return state != 0 && state != 'Z' && state != 'X' && state != 'x';
}

int main(int argc, char **argv)
{
    MPI_Comm ic, parent;
    char *args[] = {"child", NULL};
    int cycle, i, pids[NCHILD], v, fds0 = 0, maps0 = 0, fds, maps;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        CHECK_MPI(MPI_Init(NULL, NULL));
        CHECK_MPI(MPI_Comm_get_parent(&parent));
        CHECK(parent != MPI_COMM_NULL);
        v = (int)getpid();
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 1, parent));
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, parent));
        CHECK_EQ(v, 77);
        CHECK_MPI(MPI_Comm_disconnect(&parent));
        CHECK(parent == MPI_COMM_NULL);
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    tu_init(&argc, &argv);
    for (cycle = 0; cycle < CYCLES; cycle++) {
        if (cycle == 5) {
            /* After a few cycles, when every lazily made resource exists. */
            fds0 = count_dir("/proc/self/fd");
            maps0 = count_lines("/proc/self/maps");
        }
        CHECK_MPI(MPI_Comm_spawn(argv[0], args, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                                 MPI_ERRCODES_IGNORE));
        if (tu_rank == 0)
            for (i = 0; i < NCHILD; i++)
                CHECK_MPI(MPI_Recv(&pids[i], 1, MPI_INT, i, 1, ic, MPI_STATUS_IGNORE));
        v = 77;
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, tu_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
        CHECK_MPI(MPI_Comm_disconnect(&ic));
        CHECK(ic == MPI_COMM_NULL);
        if (tu_rank == 0)
            for (i = 0; i < NCHILD; i++) {
                int waited = 0, running;
                while ((running = alive(pids[i])) && waited < 10000) {
                    tu_sleep_ms(5);
                    waited += 5;
                }
                /* Gone once is gone: the pid is not looked at again (it could be reused). */
                CHECK_MSG(!running, "cycle %d: child pid %d is still running", cycle, pids[i]);
            }
    }
    fds = count_dir("/proc/self/fd");
    maps = count_lines("/proc/self/maps");
    CHECK_MSG(fds <= fds0 + 2, "open descriptors grew from %d to %d over %d cycles", fds0, fds,
              CYCLES - 5);
    CHECK_MSG(maps <= maps0 + 8, "mappings grew from %d to %d over %d cycles", maps0, maps,
              CYCLES - 5);
    {
        /* The spawned jobs' segments: /dev/shm/protean-<jobid>-s<k>-<gpid> (PROTEAN_JOBID is
         * set by our mpirun only). */
        const char *job = getenv("PROTEAN_JOBID");
        if (job && *job) {
            char prefix[256];
            DIR *d = opendir("/dev/shm");
            struct dirent *e;
            CHECK(d != NULL);
            snprintf(prefix, sizeof prefix, "protean-%s-s", job);
            while ((e = readdir(d)) != NULL)
                CHECK_MSG(strncmp(e->d_name, prefix, strlen(prefix)) != 0,
                          "/dev/shm/%s is left behind", e->d_name);
            closedir(d);
        }
    }
    return tu_finish();
}
