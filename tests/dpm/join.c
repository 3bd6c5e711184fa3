/*
 * MPI_Comm_join: rank 0 listens on a loopback socket and sends its port to rank 1 (MPI_Send),
 * rank 1 connects, and the two join over the connected socket (ranks above 1 take no part).
 * Over the intercommunicator: a message both ways, MPI_Allreduce, MPI_Intercomm_merge; the
 * socket stays usable by the application afterwards (a byte each way). Then an MPI_Comm_join
 * whose other side writes garbage fails with MPI_ERR_PORT instead of hanging.
 */
#include "util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static void pair(int *a, int *b)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(listen(l, 1) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&sa, &len) == 0);
    *b = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(*b, (struct sockaddr *)&sa, sizeof sa) == 0);
    *a = accept(l, NULL, NULL);
    CHECK(*a >= 0);
    close(l);
}

int main(int argc, char **argv)
{
    MPI_Comm ic = MPI_COMM_NULL, merged;
    MPI_Status st;
    int fd = -1, port = 0, v, sum, mrank;
    char c;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    if (tu_size >= 2 && tu_rank < 2) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (tu_rank == 0) {
            int l = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(l >= 0);
            CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0);
            CHECK(listen(l, 1) == 0);
            CHECK(getsockname(l, (struct sockaddr *)&sa, &len) == 0);
            port = ntohs(sa.sin_port);
            CHECK_MPI(MPI_Send(&port, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
            /* accept() makes no MPI progress: wait (in MPI) until rank 1 connected, so that
             * the send above is surely delivered (over TCP it may still be in our queue). */
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &st));
            fd = accept(l, NULL, NULL);
            CHECK(fd >= 0);
            close(l);
        } else {
            CHECK_MPI(MPI_Recv(&port, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
            sa.sin_port = htons((unsigned short)port);
            fd = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
            CHECK_MPI(MPI_Send(&port, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
        }
        CHECK_MPI(MPI_Comm_join(fd, &ic));
        CHECK(ic != MPI_COMM_NULL);
        CHECK_MPI(MPI_Comm_remote_size(ic, &v));
        CHECK_EQ(v, 1);
        v = 100 + tu_rank;
        CHECK_MPI(MPI_Sendrecv_replace(&v, 1, MPI_INT, 0, 5, 0, 5, ic, &st));
        CHECK_EQ(v, 100 + (1 - tu_rank));
        CHECK_MPI(MPI_Allreduce(&tu_rank, &sum, 1, MPI_INT, MPI_SUM, ic));
        CHECK_EQ(sum, 1 - tu_rank);
        CHECK_MPI(MPI_Intercomm_merge(ic, tu_rank, &merged));
        CHECK_MPI(MPI_Comm_rank(merged, &mrank));
        CHECK_EQ(mrank, tu_rank);
        CHECK_MPI(MPI_Comm_free(&merged));
        CHECK_MPI(MPI_Comm_disconnect(&ic));
        /* The socket is still the application's, and still blocking. */
        c = (char)('a' + tu_rank);
        CHECK(write(fd, &c, 1) == 1);
        CHECK(read(fd, &c, 1) == 1);
        CHECK_EQ(c, 'a' + (1 - tu_rank));
        close(fd);
    }
    /* The other end is not in MPI_Comm_join: it writes garbage and closes. */
    {
        int a, b;
        pair(&a, &b);
        CHECK(write(b, "garbage garbage garbage", 23) == 23);
        close(b);
        CHECK_CLASS(MPI_Comm_join(a, &ic), MPI_ERR_PORT);
        CHECK(ic == MPI_COMM_NULL);
        close(a);
    }
    return tu_finish();
}
