/*
 * Context ids under load: thousands of create/free cycles (dup, split, create) must neither
 * run out of ids nor let two live communicators share traffic; 300 communicators alive at
 * once, freed in a scattered order and created again; communicators freed by different
 * processes in different orders before the next creation. After every batch a message on
 * each live communicator must arrive on that communicator only. Any number of processes.
 */
#include "util.h"

#define LIVE 300
#define CYCLES 2000

/* Send each communicator's index to the right neighbour on it, receive from the left:
 * receives are posted in reverse order so that any mix-up of contexts shows. */
static void check_all(MPI_Comm *c, int k)
{
    int i, right = (tu_rank + 1) % tu_size, left = (tu_rank + tu_size - 1) % tu_size;
    int *in = tu_malloc(sizeof(int) * (size_t)k), *out = tu_malloc(sizeof(int) * (size_t)k);
    MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * (size_t)k * 2);
    for (i = k - 1; i >= 0; i--)
        CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 0, c[i], &rq[i]));
    for (i = 0; i < k; i++) {
        out[i] = i * 7 + tu_rank;
        CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, right, 0, c[i], &rq[k + i]));
    }
    CHECK_MPI(MPI_Waitall(2 * k, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < k; i++)
        CHECK_EQ(in[i], i * 7 + left);
    free(in);
    free(out);
    free(rq);
}

int main(int argc, char **argv)
{
    MPI_Comm c[LIVE], t;
    MPI_Group g;
    int i, j;

    tu_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &g));

    /* Create/free cycles of each kind. */
    for (i = 0; i < CYCLES; i++) {
        switch (i % 3) {
        case 0:
            CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &t));
            break;
        case 1:
            CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, tu_rank, &t));
            break;
        default:
            CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &t));
            break;
        }
        if (i % 500 == 0)
            check_all(&t, 1);
        CHECK_MPI(MPI_Comm_free(&t));
    }

    /* Many alive at once. */
    for (i = 0; i < LIVE; i++)
        CHECK_MPI(MPI_Comm_dup(i ? c[i - 1] : MPI_COMM_WORLD, &c[i]));
    check_all(c, LIVE);

    /* Free a scattered third (each process in its own order), recreate, check. */
    for (j = 0; j < 3; j++) {
        int k;
        for (k = 0; k < LIVE; k++) {
            int idx = (tu_rank % 2) ? LIVE - 1 - k : k;
            if (idx % 3 == j)
                CHECK_MPI(MPI_Comm_free(&c[idx]));
        }
        for (k = 0; k < LIVE; k++)
            if (k % 3 == j)
                CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 1, -tu_rank, &c[k]));
        /* c[k] for k % 3 == j now has reversed ranks: send on all of them in index order. */
        {
            int right, left, *in, *out;
            MPI_Request *rq;
            int size = tu_size, rank;
            in = tu_malloc(sizeof(int) * LIVE);
            out = tu_malloc(sizeof(int) * LIVE);
            rq = tu_malloc(sizeof(MPI_Request) * LIVE * 2);
            for (k = LIVE - 1; k >= 0; k--) {
                CHECK_MPI(MPI_Comm_rank(c[k], &rank));
                left = (rank + size - 1) % size;
                CHECK_MPI(MPI_Irecv(&in[k], 1, MPI_INT, left, 1, c[k], &rq[k]));
            }
            for (k = 0; k < LIVE; k++) {
                CHECK_MPI(MPI_Comm_rank(c[k], &rank));
                right = (rank + 1) % size;
                out[k] = k * 1000 + rank;
                CHECK_MPI(MPI_Isend(&out[k], 1, MPI_INT, right, 1, c[k], &rq[LIVE + k]));
            }
            CHECK_MPI(MPI_Waitall(2 * LIVE, rq, MPI_STATUSES_IGNORE));
            for (k = 0; k < LIVE; k++) {
                CHECK_MPI(MPI_Comm_rank(c[k], &rank));
                CHECK_EQ(in[k], k * 1000 + (rank + size - 1) % size);
            }
            free(in);
            free(out);
            free(rq);
        }
    }
    for (i = 0; i < LIVE; i++)
        CHECK_MPI(MPI_Comm_free(&c[i]));

    CHECK_MPI(MPI_Group_free(&g));
    return tu_finish();
}
