/*
 * MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name, served by mpirun (or by
 * protean-nameserver when mpirun was given one): rank 0 opens a port and publishes it; every
 * rank looks it up and gets the same name; a name published twice is MPI_ERR_SERVICE, an
 * unknown name MPI_ERR_NAME, a second unpublish MPI_ERR_SERVICE. Then rank 0 accepts (alone)
 * on the looked-up port while the other ranks connect together, and the intercommunicator
 * carries a message both ways and an MPI_Allreduce.
 *
 * TU_SERVICE names the service (default: "protean-test-<pid of rank 0>").
 */
#include "util.h"

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME], service[128];
    const char *s = getenv("TU_SERVICE");
    MPI_Comm rest, ic;
    MPI_Status st;
    int pid, v, sum, n;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    pid = (int)getpid();
    CHECK_MPI(MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (s && *s)
        snprintf(service, sizeof service, "%s", s);
    else
        snprintf(service, sizeof service, "protean-test-%d", pid);

    CHECK_CLASS(MPI_Lookup_name("protean-never-published", MPI_INFO_NULL, found), MPI_ERR_NAME);
    if (tu_rank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Publish_name(service, MPI_INFO_NULL, port));
        CHECK_CLASS(MPI_Publish_name(service, MPI_INFO_NULL, port), MPI_ERR_SERVICE);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Lookup_name(service, MPI_INFO_NULL, found));
    if (tu_rank == 0)
        CHECK_MSG(strcmp(port, found) == 0, "looked up %s, published %s", found, port);
    n = (int)strlen(found);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    CHECK_EQ(n, (int)strlen(found));

    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank == 0, tu_rank, &rest));
    if (tu_size > 1) {
        if (tu_rank == 0)
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
        else
            CHECK_MPI(MPI_Comm_connect(found, MPI_INFO_NULL, 0, rest, &ic));
        if (tu_rank == 0) {
            CHECK_MPI(MPI_Send(&pid, 1, MPI_INT, tu_size - 2, 3, ic));
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 4, ic, &st));
            CHECK_EQ(v, 1);
        } else if (tu_rank == 1) {
            v = 1;
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 4, ic));
        }
        if (tu_rank == tu_size - 1) {
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 3, ic, &st));
            CHECK_EQ(v, pid);
        }
        CHECK_MPI(MPI_Allreduce(&tu_rank, &sum, 1, MPI_INT, MPI_SUM, ic));
        CHECK_EQ(sum, tu_rank == 0 ? tu_size * (tu_size - 1) / 2 : 0);
        CHECK_MPI(MPI_Comm_disconnect(&ic));
    }
    CHECK_MPI(MPI_Comm_free(&rest));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tu_rank == 0) {
        CHECK_MPI(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        CHECK_CLASS(MPI_Unpublish_name(service, MPI_INFO_NULL, port), MPI_ERR_SERVICE);
        CHECK_MPI(MPI_Close_port(port));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_CLASS(MPI_Lookup_name(service, MPI_INFO_NULL, found), MPI_ERR_NAME);
    return tu_finish();
}
