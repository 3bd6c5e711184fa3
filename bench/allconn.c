/*
 * The all-connect experiment (the fourth seed's "allconn"): every process sends a zero-byte
 * message to every other, in a ring-like order so that no process is everyone's first target
 * (step k: send to rank + k, receive from rank - k, k = 1 .. N-1). A connection-oriented
 * transport has to set up a connection to every peer on the way; a connectionless one only
 * sends.
 *
 *   allconn [LAUNCH_NS]
 *
 * LAUNCH_NS is the wall-clock time (CLOCK_REALTIME, nanoseconds) at which the runner started
 * the launcher. Rank 0 prints one line of key=value pairs:
 *   np            processes
 *   init_s        launch -> the last process out of MPI_Init
 *   exchange_s    the first process entering the exchange -> the last one leaving it
 *   total_s       launch -> the last process out of the exchange
 *   rss_kb_mean, rss_kb_max       VmRSS after the exchange
 *   rss_init_kb_mean              VmRSS right after MPI_Init, before any message (what the
 *                                 job's tables cost: business cards, the world's rank maps);
 *                                 rss - rss_init is what talking to every peer added
 *   fds_mean, fds_max             open file descriptors after the exchange
 *   sockbuf_kb_mean, sockbuf_kb_max   send + receive buffer sizes of the process's sockets
 *                                 (SO_SNDBUF + SO_RCVBUF, what the kernel may hold for it)
 *   sockets_mean                  sockets the process holds
 *   heap_kb_mean, heap_init_kb_mean   bytes in use on the malloc heap after the exchange and
 *                                 right after MPI_Init (glibc's mallinfo2; -1 elsewhere):
 *                                 exact where VmRSS moves in pages and with the allocator's
 *                                 slack, which at 128 processes is +-0.1 KiB per peer
 * then "# done" before MPI_Finalize (a launch that hangs in MPI_Finalize keeps its numbers).
 * Only the MPI API, /proc/self and getsockopt are used.
 */
#include <dirent.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Bytes in use on the malloc heap, in KiB (-1 where glibc's mallinfo2 is missing). */
static long heap_kb(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 m = mallinfo2();
    return (long)((m.uordblks + m.hblkhd) / 1024);
#else
    return -1;
#endif
}

static long vmrss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* Open descriptors, sockets among them, and their buffer sizes in KiB. */
static void descriptors(long *fds, long *socks, long *sockbuf_kb)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long buf = 0;
    *fds = *socks = 0;
    if (!d)
        return;
    int self = dirfd(d);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == self)
            continue;
        (*fds)++;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
            int v;
            socklen_t len = sizeof v;
            (*socks)++;
            if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0)
                buf += v;
            len = sizeof v;
            if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0)
                buf += v;
        }
    }
    closedir(d);
    *sockbuf_kb = buf / 1024;
}

int main(int argc, char **argv)
{
    double launch = argc > 1 ? atof(argv[1]) * 1e-9 : 0;
    int rank, size;
    MPI_Init(&argc, &argv);
    double inited = now_s();
    long rss_init = vmrss_kb(), heap_init = heap_kb();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double start = now_s();
    for (int k = 1; k < size; k++) {
        int to = (rank + k) % size, from = (rank - k + size) % size;
        MPI_Request r[2];
        MPI_Irecv(NULL, 0, MPI_BYTE, from, k, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(NULL, 0, MPI_BYTE, to, k, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    double end = now_s();
    long fds, socks, sockbuf;
    descriptors(&fds, &socks, &sockbuf);
    double t[3] = {inited, end, -start}, tmax[3];
    long v[7] = {vmrss_kb(), fds, sockbuf, socks, rss_init, heap_kb(), heap_init}, vsum[7], vmax[7];
    MPI_Reduce(t, tmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(v, vsum, 7, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(v, vmax, 7, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("np=%d init_s=%.4f exchange_s=%.4f total_s=%.4f rss_kb_mean=%.0f rss_kb_max=%ld "
               "fds_mean=%.1f fds_max=%ld sockbuf_kb_mean=%.0f sockbuf_kb_max=%ld "
               "sockets_mean=%.1f rss_init_kb_mean=%.0f heap_kb_mean=%.1f heap_init_kb_mean=%.1f\n",
               size, launch > 0 ? tmax[0] - launch : 0.0, tmax[1] + tmax[2],
               launch > 0 ? tmax[1] - launch : 0.0, (double)vsum[0] / size, vmax[0],
               (double)vsum[1] / size, vmax[1], (double)vsum[2] / size, vmax[2],
               (double)vsum[3] / size, (double)vsum[4] / size, (double)vsum[5] / size,
               (double)vsum[6] / size);
        printf("# done\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
