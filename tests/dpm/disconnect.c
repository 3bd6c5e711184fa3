/*
 * Spawn and MPI_Comm_disconnect in a loop (40 cycles of 2 children from every parent, or the
 * number given as the argument): each cycle the children send their pids and a message goes
 * both ways, both sides disconnect, the children finalize and exit; the parents check that
 * every child of the cycle is gone (reaped by mpirun) within 10 s. At the end the parents'
 * open descriptors and mappings (/proc/self/fd and /proc/self/maps entries) have not grown
 * with the cycles, nor has their resident memory by more than 64 KiB per 100 cycles (with
 * 4 MiB of slack for the allocator); under Protean's mpirun (the parents' parent) neither
 * have its descriptors nor its resident memory; no shared-memory segment of the spawned jobs
 * is left in /dev/shm. Before mpirun retired ended spawned jobs and reused their process
 * ids, 1000 cycles grew a parent by 1.3 MiB (tables indexed by process id) and mpirun by
 * 4 MiB (PMI spaces and cards).
 */
#include "util.h"

#include <dirent.h>
#include <signal.h>

#define NCHILD 2

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

/* Resident memory in KiB of process `pid` (0: this one), from VmRSS of its status. */
static long rss_kib(int pid)
{
    char path[64];
    FILE *f;
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    f = fopen(path, "r");
    char line[256];
    long kib = -1;
    CHECK(f != NULL);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    CHECK(kib > 0);
    return kib;
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
    int cycles = 40, cycle, i, pids[NCHILD], v, fds0 = 0, maps0 = 0, fds, maps;
    int ours = getenv("PROTEAN_JOBID") != NULL, mpirun_fds0 = 0, mpirun_fds;
    long rss0 = 0, rss, mpirun_rss0 = 0, mpirun_rss = 0;
    char mpirun_fd_dir[64];
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
    if (argc > 1)
        cycles = atoi(argv[1]);
    CHECK(cycles > 5);
    snprintf(mpirun_fd_dir, sizeof mpirun_fd_dir, "/proc/%d/fd", (int)getppid());
    for (cycle = 0; cycle < cycles; cycle++) {
        if (cycle == 5) {
            /* After a few cycles, when every lazily made resource exists. */
            fds0 = count_dir("/proc/self/fd");
            maps0 = count_lines("/proc/self/maps");
            rss0 = rss_kib(0);
            if (ours) {
                mpirun_fds0 = count_dir(mpirun_fd_dir);
                mpirun_rss0 = rss_kib(getppid());
            }
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
              cycles - 5);
    CHECK_MSG(maps <= maps0 + 8, "mappings grew from %d to %d over %d cycles", maps0, maps,
              cycles - 5);
    rss = rss_kib(0);
    CHECK_MSG(rss <= rss0 + 4096 + 64L * (cycles - 5) / 100,
              "resident memory grew from %ld to %ld KiB over %d cycles", rss0, rss, cycles - 5);
    if (ours) {
        /* mpirun on this host (a proxy under the cluster variants) */
        mpirun_fds = count_dir(mpirun_fd_dir);
        CHECK_MSG(mpirun_fds <= mpirun_fds0 + 2,
                  "the descriptors of mpirun (pid %d) grew from %d to %d over %d cycles",
                  (int)getppid(), mpirun_fds0, mpirun_fds, cycles - 5);
        mpirun_rss = rss_kib(getppid());
        CHECK_MSG(mpirun_rss <= mpirun_rss0 + 4096 + 64L * (cycles - 5) / 100,
                  "the resident memory of mpirun (pid %d) grew from %ld to %ld KiB over %d "
                  "cycles",
                  (int)getppid(), mpirun_rss0, mpirun_rss, cycles - 5);
    }
    if (tu_rank == 0)
        printf("%d cycles: descriptors %d -> %d, mappings %d -> %d, resident %ld -> %ld KiB; "
               "mpirun's descriptors %d -> %d, resident %ld -> %ld KiB\n",
               cycles, fds0, fds, maps0, maps, rss0, rss, mpirun_fds0, ours ? mpirun_fds : 0,
               mpirun_rss0, mpirun_rss);
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
