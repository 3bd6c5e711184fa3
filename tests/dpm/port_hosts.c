/*
 * Two independent jobs on different hosts connect through a port name (tests/cluster/test,
 * case jobs_on_two_hosts_connect_through_a_port). Each job runs on one host only, so its own
 * processes talk loopback and shared memory; the port name and the addresses its processes
 * give the other job must still be ones the other host reaches.
 *
 *   port_hosts server FILE   rank 0 opens a port and writes its name to FILE (atomically,
 *                            through FILE.tmp); the job accepts
 *   port_hosts client FILE   rank 0 waits for FILE (30 s at most); the job connects
 *
 * Then, on the intercommunicator: every process sends its rank to the other group's process of
 * the same rank modulo its size and checks what it gets; the groups merge (server first) and
 * check an MPI_Allreduce of every process's merged rank (so every pair of processes across the
 * jobs may talk, not only the roots); both disconnect and the server closes its port. Prints
 * "port_hosts <role> ok <port name>" at rank 0 and exits 0, or names what failed and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fail(const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int l = 0;
    if (rc != MPI_SUCCESS)
        MPI_Error_string(rc, s, &l);
    fprintf(stderr, "port_hosts: %s %s\n", what, s);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
        fprintf(stderr, "usage: port_hosts server|client FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int server = strcmp(argv[1], "server") == 0, me, n, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char name[MPI_MAX_PORT_NAME] = "";
    MPI_Comm inter;
    if (server) {
        if (me == 0) {
            if ((rc = MPI_Open_port(MPI_INFO_NULL, name)) != MPI_SUCCESS)
                fail("MPI_Open_port", rc);
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
            FILE *f = fopen(tmp, "w");
            if (!f || fprintf(f, "%s\n", name) < 0 || fclose(f) != 0 || rename(tmp, argv[2]) != 0)
                fail("cannot write the port name", MPI_SUCCESS);
        }
        if ((rc = MPI_Comm_accept(name, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter)) != MPI_SUCCESS)
            fail("MPI_Comm_accept", rc);
    } else {
        if (me == 0) {
            FILE *f = NULL;
            for (int i = 0; i < 300 && !(f = fopen(argv[2], "r")); i++)
                usleep(100000);
            if (!f || !fgets(name, sizeof name, f))
                fail("no port name in the file", MPI_SUCCESS);
            fclose(f);
            name[strcspn(name, "\n")] = 0;
        }
        if ((rc = MPI_Comm_connect(name, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter)) != MPI_SUCCESS)
            fail("MPI_Comm_connect", rc);
    }
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int rn;
    MPI_Comm_remote_size(inter, &rn);
    /* every process to the other group's process me % rn; receive from all that send to us */
    int out = 1000 * server + me, got;
    MPI_Request req;
    if ((rc = MPI_Isend(&out, 1, MPI_INT, me % rn, 7, inter, &req)) != MPI_SUCCESS)
        fail("MPI_Isend", rc);
    for (int j = 0; j < rn; j++) {
        if (j % n != me)
            continue;
        MPI_Status st;
        if ((rc = MPI_Recv(&got, 1, MPI_INT, j, 7, inter, &st)) != MPI_SUCCESS)
            fail("MPI_Recv", rc);
        if (got != 1000 * !server + j)
            fail("a message from the other job has the wrong value", MPI_SUCCESS);
    }
    if ((rc = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
        fail("MPI_Wait", rc);
    MPI_Comm merged;
    if ((rc = MPI_Intercomm_merge(inter, !server, &merged)) != MPI_SUCCESS)
        fail("MPI_Intercomm_merge", rc);
    int mr, ms, sum = 0;
    MPI_Comm_rank(merged, &mr);
    MPI_Comm_size(merged, &ms);
    if ((rc = MPI_Allreduce(&mr, &sum, 1, MPI_INT, MPI_SUM, merged)) != MPI_SUCCESS)
        fail("MPI_Allreduce", rc);
    if (sum != ms * (ms - 1) / 2 || ms != n + rn)
        fail("the merged communicator's allreduce is wrong", MPI_SUCCESS);
    MPI_Comm_free(&merged);
    if ((rc = MPI_Comm_disconnect(&inter)) != MPI_SUCCESS)
        fail("MPI_Comm_disconnect", rc);
    if (server && me == 0 && (rc = MPI_Close_port(name)) != MPI_SUCCESS)
        fail("MPI_Close_port", rc);
    if (me == 0)
        printf("port_hosts %s ok %s\n", argv[1], name);
    MPI_Finalize();
    return 0;
}
