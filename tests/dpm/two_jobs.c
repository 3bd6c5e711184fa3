/*
 * Two independent jobs (two mpiruns) that find each other through protean-nameserver.
 *
 * Run as the driver (no arguments after the two paths): rank 0 starts protean-nameserver, which
 * writes its URI (protean-ns:SECRET:HOST:PORT) into a file of mode 0600, then
 * `mpirun --nameserver file:FILE -n 2 two_jobs ... server SERVICE` and, with the URI itself in
 * PROTEAN_NAMESERVER instead of the option, `mpirun -n 2 two_jobs ... client SERVICE`, and
 * waits for both (60 s at most; then it kills them). Every request proves the name server's
 * secret (tests/security/attack checks that nothing else is answered). Every process it
 * started is ended and reaped before it returns.
 *
 * The server job publishes a port under SERVICE; the client job looks it up through the name
 * server (retrying until it is there) and both sides then call MPI_Comm_connect /
 * MPI_Comm_accept, which fail on both sides, cleanly and with a message, with
 * MPI_ERR_UNSUPPORTED_OPERATION: connecting independent jobs is not implemented yet (see
 * docs/architecture.md). The name service (publish, lookup from the other job, a name
 * published twice, unpublish) is checked for real.
 *
 * argv: MPIRUN NAMESERVER [server|client SERVICE]
 */
#include "util.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static pid_t start(char *const argv[], const char *envset)
{
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
        /* A new job: nothing of this job's process manager may leak into it. */
        extern char **environ;
        char name[256];
        int i = 0;
        while (environ[i]) {
            size_t n = strcspn(environ[i], "=");
            if (n < sizeof name &&
                (strncmp(environ[i], "PMI_", 4) == 0 || strncmp(environ[i], "PROTEAN_JOBID=", 14) == 0 ||
                 strncmp(environ[i], "PROTEAN_GPID_BASE=", 18) == 0 ||
                 strncmp(environ[i], "PROTEAN_LAUNCHER=", 17) == 0 ||
                 strncmp(environ[i], "MPI_LOCAL", 9) == 0)) {
                memcpy(name, environ[i], n);
                name[n] = 0;
                unsetenv(name);
                continue;
            }
            i++;
        }
        if (envset)
            putenv((char *)envset);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s\n", argv[0]);
        _exit(127);
    }
    return p;
}

/* Waits for pid until the deadline; -1 on timeout (the process is then killed and reaped). */
static int wait_for(pid_t pid, double deadline)
{
    int st;
    while (now() < deadline) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        tu_sleep_ms(20);
    }
    kill(pid, SIGTERM);
    tu_sleep_ms(2000);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void check_independent(int rc, MPI_Comm c, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    CHECK_CLASS(rc, MPI_ERR_UNSUPPORTED_OPERATION);
    CHECK(c == MPI_COMM_NULL);
    MPI_Error_string(rc, s, &n);
    CHECK_MSG(strstr(s, "independent job") != NULL, "%s: %s", what, s);
}

static int server(const char *service)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Info info;
    int rc;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "30"));
    if (tu_rank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Publish_name(service, MPI_INFO_NULL, port));
        CHECK_CLASS(MPI_Publish_name(service, MPI_INFO_NULL, port), MPI_ERR_SERVICE);
    }
    rc = MPI_Comm_accept(port, info, 0, MPI_COMM_WORLD, &c);
    check_independent(rc, c, "MPI_Comm_accept");
    if (tu_rank == 0) {
        CHECK_MPI(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Close_port(port));
    }
    CHECK_MPI(MPI_Info_free(&info));
    return tu_finish();
}

static int client(const char *service)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Info info;
    double t0 = now();
    int rc;
    CHECK_CLASS(MPI_Lookup_name("protean-never-published", MPI_INFO_NULL, port), MPI_ERR_NAME);
    while ((rc = MPI_Lookup_name(service, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
        CHECK_CLASS(rc, MPI_ERR_NAME);
        CHECK_MSG(now() - t0 < 30, "%s was not published within 30 s", service);
        tu_sleep_ms(20);
    }
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "30"));
    rc = MPI_Comm_connect(port, info, 0, MPI_COMM_WORLD, &c);
    check_independent(rc, c, "MPI_Comm_connect");
    CHECK_MPI(MPI_Info_free(&info));
    return tu_finish();
}

int main(int argc, char **argv)
{
    char addr[256] = "", file[64], envset[300], service[64];
    pid_t ns, a, b;
    double deadline;
    FILE *f;
    int ra, rb;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MSG(argc >= 3, "usage: two_jobs MPIRUN NAMESERVER [server|client SERVICE]");
    if (argc >= 5 && strcmp(argv[3], "server") == 0)
        return server(argv[4]);
    if (argc >= 5 && strcmp(argv[3], "client") == 0)
        return client(argv[4]);
    if (tu_rank == 0) {
        char *nsargv[] = {argv[2], "--bind", "127.0.0.1", "--report-uri", file, NULL};
        snprintf(file, sizeof file, "/tmp/protean-ns-%d", (int)getpid());
        snprintf(service, sizeof service, "protean-two-jobs-%d", (int)getpid());
        unlink(file);
        ns = start(nsargv, NULL);
        deadline = now() + 20;
        while (now() < deadline) {
            f = fopen(file, "r");
            if (f && fgets(addr, sizeof addr, f) && strchr(addr, '\n')) {
                fclose(f);
                break;
            }
            if (f)
                fclose(f);
            tu_sleep_ms(20);
        }
        if (!strchr(addr, '\n')) {
            unlink(file);
            kill(ns, SIGKILL);
            waitpid(ns, NULL, 0);
            TU_FAIL("protean-nameserver did not report its address");
        }
        *strchr(addr, '\n') = 0;
        CHECK_MSG(strncmp(addr, "protean-ns:", 11) == 0, "not a name server URI: %s", addr);
        {
            char fileopt[80];
            char *sargv[] = {argv[1], "--nameserver", fileopt, "-n", "2", argv[0], argv[1],
                             argv[2], "server", service, NULL};
            char *cargv[] = {argv[1], "-n", "2", argv[0], argv[1], argv[2], "client", service,
                             NULL};
            snprintf(fileopt, sizeof fileopt, "file:%s", file);
            snprintf(envset, sizeof envset, "PROTEAN_NAMESERVER=%s", addr);
            unsetenv("TU_TEST_NP");
            a = start(sargv, NULL);
            b = start(cargv, envset);
            deadline = now() + 60;
            ra = wait_for(a, deadline);
            rb = wait_for(b, deadline);
        }
        unlink(file);
        kill(ns, SIGTERM);
        waitpid(ns, NULL, 0);
        CHECK_MSG(ra == 0 && rb == 0, "the server job ended with %d, the client job with %d", ra,
                  rb);
    }
    return tu_finish();
}
