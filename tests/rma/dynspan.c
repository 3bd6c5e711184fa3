/*
 * rma/dynspan: operations on a dynamic window that run from one attached region into the
 * next, adjacent to it in memory (all the memory they touch is attached, MPI-4.1 12.2.4).
 * Every rank attaches the two halves of one array separately; each rank then puts a run
 * across the boundary into its right neighbour's array, accumulates into it, reads it back
 * with MPI_Get and with MPI_Get_accumulate (MPI_NO_OP and MPI_REPLACE), and puts a strided
 * vector whose middle block straddles the boundary, checking every value it reads.
 */
#include "util.h"

enum { H = 1000, RUN = 300, BEFORE = 100 };

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    int *arr = tu_malloc(2 * H * sizeof(int));
    memset(arr, 0, 2 * H * sizeof(int));
    MPI_Win win;
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_attach(win, arr, H * sizeof(int)));
    CHECK_MPI(MPI_Win_attach(win, arr + H, H * sizeof(int)));
    MPI_Aint *base = tu_malloc(size * sizeof(MPI_Aint)), me;
    MPI_Get_address(arr, &me);
    MPI_Allgather(&me, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
    int t = (rank + 1) % size;
    MPI_Aint at = base[t] + (MPI_Aint)((H - BEFORE) * sizeof(int));

    int src[RUN], got[RUN], old[RUN], ones[RUN];
    for (int k = 0; k < RUN; k++) {
        src[k] = rank * 10000 + k;
        ones[k] = 1;
    }
    CHECK_MPI(MPI_Win_lock_all(0, win));
    MPI_Barrier(MPI_COMM_WORLD);

    /* Put, then Get. */
    CHECK_MPI(MPI_Put(src, RUN, MPI_INT, t, at, RUN, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Get(got, RUN, MPI_INT, t, at, RUN, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    for (int k = 0; k < RUN; k++)
        CHECK_MSG(got[k] == src[k], "put/get: element %d is %d, expected %d", k, got[k], src[k]);

    /* Accumulate, then an atomic read. */
    CHECK_MPI(MPI_Accumulate(ones, RUN, MPI_INT, t, at, RUN, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_INT, got, RUN, MPI_INT, t, at, RUN, MPI_INT,
                                 MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    for (int k = 0; k < RUN; k++)
        CHECK_MSG(got[k] == src[k] + 1, "accumulate: element %d is %d, expected %d", k, got[k],
                  src[k] + 1);

    /* A swap: the values before come back, the new ones stay. */
    for (int k = 0; k < RUN; k++)
        src[k] = -src[k];
    CHECK_MPI(MPI_Get_accumulate(src, RUN, MPI_INT, old, RUN, MPI_INT, t, at, RUN, MPI_INT,
                                 MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Get(got, RUN, MPI_INT, t, at, RUN, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    for (int k = 0; k < RUN; k++) {
        CHECK_MSG(old[k] == -src[k] + 1, "swap: old element %d is %d, expected %d", k, old[k],
                  -src[k] + 1);
        CHECK_MSG(got[k] == src[k], "swap: element %d is %d, expected %d", k, got[k], src[k]);
    }

    /* A vector of blocks of 3, 40 apart, from 81 before the boundary: its third block is the
     * last int of the first region and the first two of the second. */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(5, 3, 40, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    MPI_Aint vat = base[t] + (MPI_Aint)((H - 81) * sizeof(int));
    int vsrc[15], vgot[15];
    for (int k = 0; k < 15; k++)
        vsrc[k] = 7000 + rank * 100 + k;
    CHECK_MPI(MPI_Put(vsrc, 15, MPI_INT, t, vat, 1, vec, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Accumulate(ones, 15, MPI_INT, t, vat, 1, vec, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK_MPI(MPI_Get(vgot, 15, MPI_INT, t, vat, 1, vec, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    for (int k = 0; k < 15; k++)
        CHECK_MSG(vgot[k] == vsrc[k] + 1, "vector: element %d is %d, expected %d", k, vgot[k],
                  vsrc[k] + 1);
    CHECK_MPI(MPI_Type_free(&vec));

    CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_detach(win, arr));
    CHECK_MPI(MPI_Win_detach(win, arr + H));
    CHECK_MPI(MPI_Win_free(&win));
    free(arr);
    free(base);
    return tu_finish();
}
