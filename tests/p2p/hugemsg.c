/*
 * A message larger than INT_MAX bytes: 2.5 GiB from rank 0 to rank 1.
 *  1. count 2560 of a contiguous 1 MiB derived type (MPI_Send / MPI_Recv). MPI_Get_count
 *     in that type gives 2560; MPI_Get_elements (int) cannot hold the byte count and gives
 *     MPI_UNDEFINED; MPI_Get_elements_x gives it exactly.
 *  2. If the header is MPI 4 or later: MPI_Send_c / MPI_Recv_c with a byte count beyond
 *     INT_MAX, the other way (1 -> 0), checked with MPI_Get_count_c.
 * Contents are checked in full. Needs at least 2 processes (others do nothing) and about
 * 2.6 GiB of memory per process of the pair.
 */
#include "util.h"

#define CHUNK ((size_t)1 << 20)
#define NCHUNK 2560
#define TOTAL (CHUNK * NCHUNK)

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Datatype mib;
    unsigned char *buf;
    int n;
    MPI_Count nx;

    tu_init(&argc, &argv);
    CHECK_MSG(tu_size >= 2, "needs at least 2 processes");
    CHECK(TOTAL > (size_t)INT_MAX);
    CHECK_MPI(MPI_Type_contiguous((int)CHUNK, MPI_BYTE, &mib));
    CHECK_MPI(MPI_Type_commit(&mib));

    if (tu_rank <= 1) {
        buf = tu_malloc(TOTAL);
        if (tu_rank == 0) {
            tu_fill(buf, TOTAL, 2501);
            CHECK_MPI(MPI_Send(buf, NCHUNK, mib, 1, 1, MPI_COMM_WORLD));
        } else {
            memset(buf, 0, TOTAL);
            CHECK_MPI(MPI_Recv(buf, NCHUNK, mib, 0, 1, MPI_COMM_WORLD, &st));
            CHECK_EQ(st.MPI_SOURCE, 0);
            CHECK_EQ(st.MPI_TAG, 1);
            CHECK_MPI(MPI_Get_count(&st, mib, &n));
            CHECK_EQ(n, NCHUNK);
            CHECK_MPI(MPI_Get_elements(&st, mib, &n));
            CHECK_EQ(n, MPI_UNDEFINED);
            CHECK_MPI(MPI_Get_elements_x(&st, mib, &nx));
            CHECK_EQ(nx, (MPI_Count)TOTAL);
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK_EQ(n, MPI_UNDEFINED);
            CHECK_BUF(buf, TOTAL, 2501);
        }
#if MPI_VERSION >= 4
        if (tu_rank == 1) {
            tu_fill(buf, TOTAL, 2502);
            CHECK_MPI(MPI_Send_c(buf, (MPI_Count)TOTAL, MPI_BYTE, 0, 2, MPI_COMM_WORLD));
        } else {
            memset(buf, 0, TOTAL);
            CHECK_MPI(MPI_Recv_c(buf, (MPI_Count)TOTAL, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count_c(&st, MPI_BYTE, &nx));
            CHECK_EQ(nx, (MPI_Count)TOTAL);
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK_EQ(n, MPI_UNDEFINED);
            CHECK_BUF(buf, TOTAL, 2502);
        }
#endif
        free(buf);
    }
    MPI_Type_free(&mib);
    return tu_finish();
}
