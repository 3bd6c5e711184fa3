/*
 * The rest of the environment chapter:
 *  - MPI_Pcontrol at levels 0, 1, 2 and other values, with extra arguments: returns
 *    MPI_SUCCESS and changes nothing observable;
 *  - MPI_Alloc_mem / MPI_Free_mem: memory usable as a send and receive buffer, several
 *    sizes including 0, MPI_INFO_NULL and an info object;
 *  - MPI_INFO_ENV exists and can be queried;
 *  - MPICH's GPU queries (where the header has them): a GPU kind gets an answer of 0 or 1,
 *    one that is no GPU kind MPI_ERR_ARG, and the three shorthand queries agree with it.
 * Runs as a singleton too.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int partner, k, nkeys = -1;
    static const MPI_Aint sizes[] = {0, 1, 100, 1 << 20};

    tu_init(&argc, &argv);
    partner = tu_partner();

    CHECK_MPI(MPI_Pcontrol(0));
    CHECK_MPI(MPI_Pcontrol(1));
    CHECK_MPI(MPI_Pcontrol(2));
    CHECK_MPI(MPI_Pcontrol(-3, "extra", 42));
    CHECK_MPI(MPI_Pcontrol(1));

    for (k = 0; k < 4; k++) {
        unsigned char *s = NULL, *r = NULL;
        MPI_Info info = MPI_INFO_NULL;
        MPI_Status st;
        int n = (int)sizes[k];
        if (k == 2) {
            CHECK_MPI(MPI_Info_create(&info));
            CHECK_MPI(MPI_Info_set(info, "protean_test_key", "1"));
        }
        CHECK_MPI(MPI_Alloc_mem(sizes[k], info, &s));
        CHECK_MPI(MPI_Alloc_mem(sizes[k], info, &r));
        if (n > 0)
            CHECK(s != NULL && r != NULL && s != r);
        tu_fill(s, n, TU_SEED(tu_rank, partner, k));
        CHECK_MPI(MPI_Sendrecv(s, n, MPI_BYTE, partner, k, r, n, MPI_BYTE, partner, k,
                               MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, k, n);
        CHECK_BUF(r, n, TU_SEED(partner, tu_rank, k));
        CHECK_MPI(MPI_Free_mem(s));
        CHECK_MPI(MPI_Free_mem(r));
        if (info != MPI_INFO_NULL)
            CHECK_MPI(MPI_Info_free(&info));
    }

    CHECK(MPI_INFO_ENV != MPI_INFO_NULL);
    CHECK_MPI(MPI_Info_get_nkeys(MPI_INFO_ENV, &nkeys));
    CHECK_INT(nkeys, >=, 0);
#ifdef MPIX_GPU_SUPPORT_CUDA
    {
        static const int kinds[] = {MPIX_GPU_SUPPORT_CUDA, MPIX_GPU_SUPPORT_ZE,
                                    MPIX_GPU_SUPPORT_HIP};
        int answers[3], bad = -1;
        for (k = 0; k < 3; k++) {
            answers[k] = -1;
            CHECK_MPI(MPIX_GPU_query_support(kinds[k], &answers[k]));
            CHECK(answers[k] == 0 || answers[k] == 1);
        }
        CHECK_EQ(MPIX_Query_cuda_support(), answers[0]);
        CHECK_EQ(MPIX_Query_ze_support(), answers[1]);
        CHECK_EQ(MPIX_Query_hip_support(), answers[2]);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK_CLASS(MPIX_GPU_query_support(77, &bad), MPI_ERR_ARG);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
#endif
    return tu_finish();
}
