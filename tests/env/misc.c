/*
 * The rest of the environment chapter:
 *  - MPI_Pcontrol at levels 0, 1, 2 and other values, with extra arguments: returns
 *    MPI_SUCCESS and changes nothing observable;
 *  - MPI_Alloc_mem / MPI_Free_mem: memory usable as a send and receive buffer, several
 *    sizes including 0, MPI_INFO_NULL and an info object;
 *  - MPI_INFO_ENV exists and can be queried.
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
    return tu_finish();
}
