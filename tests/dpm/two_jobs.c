/*
 * Two independent jobs (two mpiruns) that find each other through protean-nameserver and
 * connect with MPI_Comm_accept / MPI_Comm_connect.
 *
 * Run as the driver (no arguments after the two paths): rank 0 starts protean-nameserver, which
 * writes its URI (protean-ns:SECRET:HOST:PORT) into a file of mode 0600, then
 * `mpirun --nameserver file:FILE -n 2 two_jobs ... server SERVICE` and, with the URI itself in
 * PROTEAN_NAMESERVER instead of the option, `mpirun -n 3 two_jobs ... client SERVICE`, and
 * waits for both (90 s at most; then it kills them). Every request proves the name server's
 * secret (tests/security/attack checks that nothing else is answered). Every process it
 * started is ended and reaped before it returns, also when the driver is interrupted (SIGINT,
 * SIGTERM).
 *
 * The server job publishes a port under SERVICE-k for each round k; the client job looks it
 * up through the name server (retrying until it is there), and the two jobs connect. Rounds 0
 * and 1 (the second connect of the run, other roots, nonblocking collectives) check the
 * intercommunicator between the jobs: point-to-point both ways (small and 1 MiB messages,
 * MPI_SOURCE), every collective of tests/coll/inter.c with every root of both groups
 * (included from there) and the erroneous ones, MPI_Comm_dup and MPI_Comm_split of it,
 * MPI_Intercomm_merge (the client high: server ranks first), MPI_Intercomm_create from the
 * merged communicator between groups that mix both jobs with leaders in different jobs (the
 * leaders' groups cross between the jobs' numberings), then MPI_Comm_disconnect. Round 4: the
 * client job connects and dies (every client process kills itself); the server gets an error
 * on the intercommunicator, not a hang, and finishes normally, while the client's mpirun
 * reports the killed rank. Round 2: the client job, connected, spawns two children (numbered
 * past the aliases it gave the server's processes), and the three groups talk pairwise:
 * server-client, client-children, and server-children over a connection the children make
 * with a port name passed on by their parents. Round 3: MPI_Comm_join between the jobs' rank
 * 0s over a loopback socket (its port number passed through the name server). The name
 * service (publish, lookup from the other job, a name published twice, unpublish) is checked
 * along the way.
 *
 * argv: MPIRUN NAMESERVER [server|client SERVICE | child]
 */
#define main coll_inter_main
#include "../coll/inter.c"
#undef main

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5 /* the last one: the client job dies */
#define SPAWN_ROUND 2 /* the client job spawns while connected */
#define JOIN_ROUND 3  /* MPI_Comm_join between the two rank 0s, no port */
#define SERVER_NP 2
#define CLIENT_NP 3
#define NCHILD 2

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

/* Processes the driver started, ended on exit and on interrupt. */
static volatile pid_t kids[3];

static void end_kids(void)
{
    int st;
    for (int i = 0; i < 3; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGTERM);
    for (int i = 0; i < 3; i++)
        if (kids[i] > 0) {
            double t = now() + 3;
            while (waitpid(kids[i], &st, WNOHANG) == 0 && now() < t)
                tu_sleep_ms(20);
            if (waitpid(kids[i], &st, WNOHANG) == 0) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], &st, 0);
            }
            kids[i] = 0;
        }
}

static void on_signal(int sig)
{
    end_kids();
    signal(sig, SIG_DFL);
    raise(sig);
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

/* The intercommunicator `ic` between the jobs, round k: everything on it, then disconnect. */
static void exercise(int k, int server)
{
    static const int counts[] = {0, 1, 5, 1000, 20000};
    MPI_Comm dup, sub, merged, half, ic2;
    MPI_Request rq[2 * 8];
    MPI_Status st;
    MPI_Op first;
    int v[8], i, x, y, mrank, msize, color, n, want;

    grp = server ? 0 : 1;
    CHECK_MPI(MPI_Comm_rank(ic, &lrank));
    CHECK_MPI(MPI_Comm_size(ic, &lsize));
    CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
    CHECK_EQ(lsize, server ? SERVER_NP : CLIENT_NP);
    CHECK_EQ(rsize, server ? CLIENT_NP : SERVER_NP);
    CHECK_MPI(MPI_Comm_test_inter(ic, &x));
    CHECK(x);

    /* Point to point, both ways at once: every process to every remote process. */
    for (i = 0; i < rsize; i++) {
        x = val(grp, lrank, i);
        CHECK_MPI(MPI_Irecv(&v[i], 1, MPI_INT, i, 30 + k, ic, &rq[i]));
    }
    for (i = 0; i < rsize; i++)
        CHECK_MPI(MPI_Send((int[]){val(grp, lrank, i)}, 1, MPI_INT, i, 30 + k, ic));
    for (i = 0; i < rsize; i++) {
        CHECK_MPI(MPI_Wait(&rq[i], &st));
        CHECK_EQ(st.MPI_SOURCE, i);
        CHECK_EQ(st.MPI_TAG, 30 + k);
        CHECK_EQ(v[i], val(1 - grp, i, lrank));
    }
    /* A large message (rendezvous) between the two rank 0s, each way. */
    if (lrank == 0) {
        n = 1 << 18;
        int *big = malloc(n * sizeof(int)), *got = malloc(n * sizeof(int));
        CHECK(big && got);
        for (i = 0; i < n; i++)
            big[i] = val(grp, 0, i);
        CHECK_MPI(MPI_Sendrecv(big, n, MPI_INT, 0, 40, got, n, MPI_INT, 0, 40, ic, &st));
        for (i = 0; i < n; i++)
            CHECK_MSG(got[i] == val(1 - grp, 0, i), "element %d: %d", i, got[i]);
        free(big);
        free(got);
    }

    /* Every collective, blocking in round 0, nonblocking in round 1. */
    tu_form = k == 0 ? TU_BLOCKING : TU_NONBLOCKING;
    CHECK_MPI(MPI_Op_create(first_op, 0, &first));
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int cnt = counts[c];
        TU_LOG("round %d count %d\n", k, cnt);
        barrier();
        bcast(cnt);
        reduce(cnt, first);
        allreduce(cnt, first);
        gather(cnt);
        scatter(cnt);
        allgather(cnt);
        alltoall(cnt);
        if (cnt <= 1000)
            reduce_scatter(cnt);
    }
    CHECK_MPI(MPI_Op_free(&first));
    errors();
    tu_form = TU_BLOCKING;

    /* New communicators from the intercommunicator. */
    CHECK_MPI(MPI_Comm_dup(ic, &dup));
    x = lrank + 1;
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup));
    CHECK_EQ(y, rsize * (rsize + 1) / 2);
    CHECK_MPI(MPI_Comm_free(&dup));
    /* Split: even local ranks of both sides (both have a rank 0). */
    color = lrank % 2 == 0 ? 0 : MPI_UNDEFINED;
    CHECK_MPI(MPI_Comm_split(ic, color, lrank, &sub));
    if (color == 0) {
        CHECK_MPI(MPI_Comm_remote_size(sub, &n));
        CHECK_EQ(n, (rsize + 1) / 2);
        x = lrank;
        CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, sub));
        CHECK_EQ(y, 2 * ((rsize - 1) / 2));
        CHECK_MPI(MPI_Comm_free(&sub));
    } else {
        CHECK(sub == MPI_COMM_NULL);
    }

    /* Merge, the client high: the server's ranks first. */
    CHECK_MPI(MPI_Intercomm_merge(ic, !server, &merged));
    CHECK_MPI(MPI_Comm_rank(merged, &mrank));
    CHECK_MPI(MPI_Comm_size(merged, &msize));
    CHECK_EQ(msize, SERVER_NP + CLIENT_NP);
    CHECK_EQ(mrank, server ? lrank : SERVER_NP + lrank);
    CHECK_MPI(MPI_Allreduce(&mrank, &y, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(y, msize * (msize - 1) / 2);
    /* A ring over the merged communicator: each to the next, across the jobs too. */
    CHECK_MPI(MPI_Sendrecv(&mrank, 1, MPI_INT, (mrank + 1) % msize, 50, &x, 1, MPI_INT,
                           (mrank + msize - 1) % msize, 50, merged, &st));
    CHECK_EQ(x, (mrank + msize - 1) % msize);
    /* Two groups that mix both jobs, even and odd merged ranks (server 0, client 1, client 3
     * against server 1, client 2), joined with leaders in different jobs: the even group's
     * leader is server rank 0, the odd group's its last member, a client process. */
    color = mrank % 2;
    CHECK_MPI(MPI_Comm_split(merged, color, mrank, &half));
    CHECK_MPI(MPI_Comm_size(half, &n));
    CHECK_MPI(MPI_Intercomm_create(half, color == 0 ? 0 : n - 1, merged, color == 0 ? 3 : 0,
                                   60 + k, &ic2));
    CHECK_MPI(MPI_Allreduce(&mrank, &y, 1, MPI_INT, MPI_SUM, ic2));
    want = 0;
    for (i = 0; i < msize; i++)
        if (i % 2 != color)
            want += i;
    CHECK_EQ(y, want);
    CHECK_MPI(MPI_Comm_disconnect(&ic2));
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK_MPI(MPI_Comm_disconnect(&merged));
    CHECK_MPI(MPI_Comm_disconnect(&ic));
    CHECK(ic == MPI_COMM_NULL);
}

/* Round SPAWN_ROUND: connected to the server job, the client job spawns NCHILD children (its
 * mpirun, which knows nothing of the server job, must not number them onto the aliases the
 * client job gave the server's processes); then the three groups talk: server and client over
 * `ic`, client and children over the spawn's intercommunicator, server and children over a
 * third connection (the server's port name travels server -> client -> children). */
static void spawn_round(int server, const char *self, char **argv)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm kids;
    MPI_Info info;
    int x, y, i, errs[NCHILD];
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "60"));
    if (!server) {
        char *cargs[] = {argv[1], argv[2], "child", NULL};
        CHECK_MPI(MPI_Comm_spawn(self, cargs, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                                 errs));
        for (i = 0; i < NCHILD && tu_rank == 0; i++)
            CHECK_EQ(errs[i], MPI_SUCCESS);
        CHECK_MPI(MPI_Comm_remote_size(kids, &x));
        CHECK_EQ(x, NCHILD);
    }
    /* Server and client, after the spawn. */
    x = tu_rank + (server ? 100 : 1000);
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, ic));
    CHECK_EQ(y, server ? 1000 * CLIENT_NP + CLIENT_NP * (CLIENT_NP - 1) / 2
                       : 100 * SERVER_NP + SERVER_NP * (SERVER_NP - 1) / 2);
    for (i = 0; i < (server ? CLIENT_NP : SERVER_NP); i++) {
        CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, i, 82, &y, 1, MPI_INT, i, 82, ic,
                               MPI_STATUS_IGNORE));
        CHECK_EQ(y, i + (server ? 1000 : 100));
    }
    if (server) {
        /* A port for the children, its name sent to the client's rank 0. */
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 80, ic));
        }
        CHECK_MPI(MPI_Comm_accept(port, info, 0, MPI_COMM_WORLD, &kids));
        if (tu_rank == 0)
            CHECK_MPI(MPI_Close_port(port));
        CHECK_MPI(MPI_Comm_remote_size(kids, &x));
        CHECK_EQ(x, NCHILD);
        x = tu_rank + 100;
        CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, kids));
        CHECK_EQ(y, 10000 * NCHILD + NCHILD * (NCHILD - 1) / 2);
        for (i = 0; i < NCHILD; i++) {
            CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, i, 83, &y, 1, MPI_INT, i, 83, kids,
                                   MPI_STATUS_IGNORE));
            CHECK_EQ(y, 10000 + i);
        }
    } else {
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 80, ic, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 81, kids));
        }
        /* Client and children. */
        x = tu_rank + 1000;
        CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, kids));
        CHECK_EQ(y, 10000 * NCHILD + NCHILD * (NCHILD - 1) / 2);
        for (i = 0; i < NCHILD; i++) {
            CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, i, 84, &y, 1, MPI_INT, i, 84, kids,
                                   MPI_STATUS_IGNORE));
            CHECK_EQ(y, 10000 + i);
        }
    }
    CHECK_MPI(MPI_Comm_disconnect(&kids));
    CHECK_MPI(MPI_Comm_disconnect(&ic));
    CHECK_MPI(MPI_Info_free(&info));
}

/* Round JOIN_ROUND: the server's rank 0 listens on a loopback TCP socket and publishes
 * "join:PORT" under `name`; the client's rank 0 looks it up and connects; both call
 * MPI_Comm_join on their ends (two independent jobs: the pair key comes from an X25519
 * exchange over the socket), then talk over the 1x1 intercommunicator and disconnect. */
static void join_round(int server, const char *name)
{
    char port[MPI_MAX_PORT_NAME];
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    MPI_Comm j;
    int fd, lfd, x, y, rc;
    double t0 = now();
    if (tu_rank != 0)
        return;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (server) {
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(lfd >= 0);
        CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
        CHECK(listen(lfd, 1) == 0);
        CHECK(getsockname(lfd, (struct sockaddr *)&a, &len) == 0);
        snprintf(port, sizeof port, "join:%d", ntohs(a.sin_port));
        CHECK_MPI(MPI_Publish_name(name, MPI_INFO_NULL, port));
        fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0);
        close(lfd);
        CHECK_MPI(MPI_Unpublish_name(name, MPI_INFO_NULL, port));
    } else {
        while ((rc = MPI_Lookup_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
            CHECK_CLASS(rc, MPI_ERR_NAME);
            CHECK_MSG(now() - t0 < 60, "%s was not published within 60 s", name);
            tu_sleep_ms(20);
        }
        CHECK(strncmp(port, "join:", 5) == 0);
        a.sin_port = htons(atoi(port + 5));
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    }
    CHECK_MPI(MPI_Comm_join(fd, &j));
    CHECK_MPI(MPI_Comm_test_inter(j, &x));
    CHECK(x);
    CHECK_MPI(MPI_Comm_remote_size(j, &x));
    CHECK_EQ(x, 1);
    x = server ? 7 : 11;
    CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, 0, 90, &y, 1, MPI_INT, 0, 90, j, MPI_STATUS_IGNORE));
    CHECK_EQ(y, server ? 11 : 7);
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, j));
    CHECK_EQ(y, server ? 11 : 7);
    CHECK_MPI(MPI_Comm_disconnect(&j));
    close(fd);
}

/* A child of the client job (round SPAWN_ROUND): connects to the server job with the port
 * name its parents pass on, then talks with the server job and with its parents. */
static int child(void)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm parent, srv;
    MPI_Info info;
    int x, y, i;
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "60"));
    if (tu_rank == 0)
        CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 81, parent, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Comm_connect(port, info, 0, MPI_COMM_WORLD, &srv));
    x = tu_rank + 10000;
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, srv));
    CHECK_EQ(y, 100 * SERVER_NP + SERVER_NP * (SERVER_NP - 1) / 2);
    for (i = 0; i < SERVER_NP; i++) {
        CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, i, 83, &y, 1, MPI_INT, i, 83, srv,
                               MPI_STATUS_IGNORE));
        CHECK_EQ(y, 100 + i);
    }
    CHECK_MPI(MPI_Comm_disconnect(&srv));
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, parent));
    CHECK_EQ(y, 1000 * CLIENT_NP + CLIENT_NP * (CLIENT_NP - 1) / 2);
    for (i = 0; i < CLIENT_NP; i++) {
        CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, i, 84, &y, 1, MPI_INT, i, 84, parent,
                               MPI_STATUS_IGNORE));
        CHECK_EQ(y, 1000 + i);
    }
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Finalize());
    return 0;
}

static int server(const char *service, char **argv)
{
    char port[MPI_MAX_PORT_NAME], name[128];
    MPI_Info info;
    int k, root, rc, x, cls;
    double t0;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "60"));
    for (k = 0; k < ROUNDS; k++) {
        root = k % tu_size;
        snprintf(name, sizeof name, "%s-%d", service, k);
        if (k == JOIN_ROUND) {
            join_round(1, name);
            continue;
        }
        if (tu_rank == root) {
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK_MPI(MPI_Publish_name(name, MPI_INFO_NULL, port));
            CHECK_CLASS(MPI_Publish_name(name, MPI_INFO_NULL, port), MPI_ERR_SERVICE);
        }
        ic = MPI_COMM_NULL;
        if (k == ROUNDS - 1) {
            /* The client job dies 0.2 s after its connect returned, and it may return before
             * its last message to us left (it was complete to it, and a sleeping process
             * makes no progress): then our accept fails, on every member of this job, with
             * an error naming the lost connection, rather than waiting for ever. */
            CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
            t0 = now();
            rc = MPI_Comm_accept(port, info, root, MPI_COMM_WORLD, &ic);
            CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
            if (rc != MPI_SUCCESS) {
                char s[MPI_MAX_ERROR_STRING];
                int len;
                MPI_Error_string(rc, s, &len);
                TU_LOG("the accept of a job that died failed after %.2f s: %s\n", now() - t0, s);
                CHECK_MSG(now() - t0 < 30, "the error came after %.1f s", now() - t0);
                CHECK(ic == MPI_COMM_NULL);
                if (tu_rank == root) {
                    CHECK_MPI(MPI_Unpublish_name(name, MPI_INFO_NULL, port));
                    CHECK_MPI(MPI_Close_port(port));
                }
                continue;
            }
        } else {
            CHECK_MPI(MPI_Comm_accept(port, info, root, MPI_COMM_WORLD, &ic));
        }
        if (tu_rank == root) {
            CHECK_MPI(MPI_Unpublish_name(name, MPI_INFO_NULL, port));
            CHECK_MPI(MPI_Close_port(port));
        }
        if (k == SPAWN_ROUND) {
            spawn_round(1, NULL, argv);
            continue;
        }
        if (k < ROUNDS - 1) {
            exercise(k, 1);
            continue;
        }
        /* The client job dies: a receive from it fails (it does not hang), and so does
         * the disconnect; this job goes on. */
        CHECK_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
        t0 = now();
        rc = MPI_Recv(&x, 1, MPI_INT, tu_rank, 70, ic, MPI_STATUS_IGNORE);
        CHECK_MSG(rc != MPI_SUCCESS, "a receive from a dead job succeeded");
        MPI_Error_class(rc, &cls);
        {
            char s[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, s, &len);
            TU_LOG("the receive from the dead job after %.2f s: %s\n", now() - t0, s);
        }
        CHECK_MSG(now() - t0 < 30, "the error came after %.1f s", now() - t0);
        MPI_Comm_free(&ic);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Info_free(&info));
    return tu_finish();
}

static int client(const char *service, const char *self, char **argv)
{
    char port[MPI_MAX_PORT_NAME], name[128];
    MPI_Info info;
    int k, root, rc;
    double t0 = now();
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "timeout", "60"));
    CHECK_CLASS(MPI_Lookup_name("protean-never-published", MPI_INFO_NULL, port), MPI_ERR_NAME);
    for (k = 0; k < ROUNDS; k++) {
        root = (k + 1) % tu_size;
        snprintf(name, sizeof name, "%s-%d", service, k);
        if (k == JOIN_ROUND) {
            join_round(0, name);
            continue;
        }
        if (tu_rank == root) {
            while ((rc = MPI_Lookup_name(name, MPI_INFO_NULL, port)) != MPI_SUCCESS) {
                CHECK_CLASS(rc, MPI_ERR_NAME);
                CHECK_MSG(now() - t0 < 60, "%s was not published within 60 s", name);
                tu_sleep_ms(20);
            }
        }
        ic = MPI_COMM_NULL;
        CHECK_MPI(MPI_Comm_connect(port, info, root, MPI_COMM_WORLD, &ic));
        if (k == SPAWN_ROUND) {
            spawn_round(0, self, argv);
            continue;
        }
        if (k < ROUNDS - 1) {
            exercise(k, 0);
            continue;
        }
        /* Every client process dies, with the server waiting on it. */
        tu_sleep_ms(200);
        raise(SIGKILL);
    }
    CHECK_MPI(MPI_Info_free(&info));
    return tu_finish();
}

int main(int argc, char **argv)
{
    char addr[256] = "", file[64], envset[300], service[64], np_s[8], np_c[8];
    double deadline;
    FILE *f;
    int ra = -1, rb = -1;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MSG(argc >= 3, "usage: two_jobs MPIRUN NAMESERVER [server|client SERVICE]");
    if (argc >= 4 && strcmp(argv[3], "child") == 0)
        return child();
    if (argc >= 5 && strcmp(argv[3], "server") == 0)
        return server(argv[4], argv);
    if (argc >= 5 && strcmp(argv[3], "client") == 0)
        return client(argv[4], argv[0], argv);
    if (tu_rank == 0) {
        char *nsargv[] = {argv[2], "--bind", "127.0.0.1", "--report-uri", file, NULL};
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        snprintf(file, sizeof file, "/tmp/protean-ns-%d", (int)getpid());
        snprintf(service, sizeof service, "protean-two-jobs-%d", (int)getpid());
        unlink(file);
        kids[0] = start(nsargv, NULL);
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
            end_kids();
            TU_FAIL("protean-nameserver did not report its address");
        }
        *strchr(addr, '\n') = 0;
        CHECK_MSG(strncmp(addr, "protean-ns:", 11) == 0, "not a name server URI: %s", addr);
        snprintf(np_s, sizeof np_s, "%d", SERVER_NP);
        snprintf(np_c, sizeof np_c, "%d", CLIENT_NP);
        {
            char fileopt[80];
            char *sargv[] = {argv[1], "--nameserver", fileopt, "-n", np_s, argv[0], argv[1],
                             argv[2], "server", service, NULL};
            char *cargv[] = {argv[1], "-n", np_c, argv[0], argv[1], argv[2], "client", service,
                             NULL};
            snprintf(fileopt, sizeof fileopt, "file:%s", file);
            snprintf(envset, sizeof envset, "PROTEAN_NAMESERVER=%s", addr);
            unsetenv("TU_TEST_NP");
            kids[1] = start(sargv, NULL);
            kids[2] = start(cargv, envset);
            deadline = now() + 90;
            ra = wait_for(kids[1], deadline);
            kids[1] = 0;
            rb = wait_for(kids[2], deadline);
            kids[2] = 0;
        }
        unlink(file);
        end_kids();
        /* The client job was killed in the last round: its mpirun reports it (137). */
        CHECK_MSG(ra == 0 && rb == 137,
                  "the server job ended with %d (want 0), the client job with %d (want 137)", ra,
                  rb);
    }
    return tu_finish();
}
