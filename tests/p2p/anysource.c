/*
 * Wildcards: MPI_ANY_SOURCE and MPI_ANY_TAG, and the status fields they fill in.
 *  - every process (rank 0 too) sends 3 messages to rank 0 with tags 3r, 3r+1, 3r+2 and
 *    sizes depending on (r, k); rank 0 receives them all with ANY_SOURCE/ANY_TAG. Each
 *    (source, tag) arrives once, the status names it and gives its size, and per source the
 *    tags arrive in send order (non-overtaking also holds for wildcard receives);
 *  - rank 0 answers each with ANY_TAG receives on a specific source (tag in the status);
 *  - ANY_SOURCE with a specific tag, and preposted wildcard receives.
 * Any size >= 1.
 */
#include "util.h"

#define K 3
static int msg_size(int r, int k) { return 4 * (1 + r + 50 * k * k); }

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request sreq[K], r;
    unsigned char *sb[K], *rb;
    int k, n, src;

    tu_init(&argc, &argv);
    rb = tu_malloc(msg_size(tu_size, K) + 64);

    for (k = 0; k < K; k++) {
        n = msg_size(tu_rank, k);
        sb[k] = tu_malloc(n);
        tu_fill(sb[k], n, TU_SEED(tu_rank, 0, k));
        CHECK_MPI(MPI_Isend(sb[k], n, MPI_BYTE, 0, K * tu_rank + k, MPI_COMM_WORLD, &sreq[k]));
    }
    if (tu_rank == 0) {
        int *next = tu_malloc(sizeof(int) * tu_size), i;
        memset(next, 0, sizeof(int) * tu_size);
        for (i = 0; i < K * tu_size; i++) {
            memset(&st, 0x77, sizeof st);
            CHECK_MPI(MPI_Recv(rb, msg_size(tu_size, K), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                               MPI_COMM_WORLD, &st));
            src = st.MPI_SOURCE;
            CHECK_MSG(src >= 0 && src < tu_size, "status source %d", src);
            CHECK_MSG(next[src] < K, "more than %d messages from %d", K, src);
            k = next[src]++;
            CHECK_MSG(st.MPI_TAG == K * src + k, "from %d: tag %d, expected %d (send order)", src,
                      st.MPI_TAG, K * src + k);
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK_EQ(n, msg_size(src, k));
            CHECK_BUF(rb, n, TU_SEED(src, 0, k));
        }
        for (i = 0; i < tu_size; i++)
            CHECK_EQ(next[i], K);
        free(next);
    }
    CHECK_MPI(MPI_Waitall(K, sreq, MPI_STATUSES_IGNORE));

    /* Rank 0 answers everyone with one message of tag 1000+r; each receives it with
     * ANY_TAG from source 0, then with ANY_SOURCE and a specific tag. */
    if (tu_rank == 0) {
        int i;
        MPI_Request *rq = tu_malloc(sizeof(MPI_Request) * 2 * tu_size);
        int *vals = tu_malloc(sizeof(int) * tu_size);
        for (i = 0; i < tu_size; i++) {
            vals[i] = 5000 + i;
            CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, i, 1000 + i, MPI_COMM_WORLD, &rq[2 * i]));
            CHECK_MPI(MPI_Isend(&vals[i], 1, MPI_INT, i, 2000, MPI_COMM_WORLD, &rq[2 * i + 1]));
        }
        /* rank 0 receives its own two messages below, then completes the sends */
        {
            int v = 0;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_INT, 0, 1000, 1);
            CHECK_EQ(v, 5000);
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 2000, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_INT, 0, 2000, 1);
            CHECK_EQ(v, 5000);
        }
        CHECK_MPI(MPI_Waitall(2 * tu_size, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(vals);
    } else {
        int v = 0;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, 0, 1000 + tu_rank, 1);
        CHECK_EQ(v, 5000 + tu_rank);
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 2000, MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_INT, 0, 2000, 1);
        CHECK_EQ(v, 5000 + tu_rank);
    }

    /* Preposted wildcard receive on a ring: everyone posts ANY_SOURCE/ANY_TAG first, then
     * sends to the next; only the previous process sends to us in this step. */
    {
        int prev = (tu_rank + tu_size - 1) % tu_size, next = (tu_rank + 1) % tu_size;
        int v = -1, w = 7 * tu_rank;
        CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(&w, 1, MPI_INT, next, 3000 + tu_rank, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_STATUS(st, MPI_INT, prev, 3000 + prev, 1);
        CHECK_EQ(v, 7 * prev);
    }

    for (k = 0; k < K; k++)
        free(sb[k]);
    free(rb);
    return tu_finish();
}
