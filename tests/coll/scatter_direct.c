/*
 * MPI_Scatter(v) with blocks large enough that Protean's shared-memory scatter lets the members
 * read them straight from the root's buffer (coll_scatter=shm, blocks of 4 KiB and more), and
 * small enough that the root packs them all into one area: at every root, into contiguous and
 * strided receive buffers (the direct read then goes through a buffer of the receiver), and a
 * scatterv whose last block is too long for its receiver (MPI_ERR_TRUNCATE there only, the
 * others get their blocks, the communicator stays usable), and the same for a scatter whose
 * last receiver expects less than every block (with the argument "truncate": MPICH 4.0.2 does
 * not report them, or hangs). Run with PROTEAN_SHM_SINGLE_COPY=0
 * too (the blocks then go through the region's areas). Any size >= 1.
 */
#include "util.h"
#include <string.h>

static void one(int cnt, int it, int strided, int me, int n)
{
    int root = it % n;
    int *s = malloc(sizeof(int) * (size_t)cnt * (size_t)n);
    int *r = malloc(sizeof(int) * (size_t)cnt * 2 + sizeof(int));
    CHECK(s && r);
    for (long i = 0; i < (long)cnt * n; i++)
        s[i] = (int)(i * 7 + it);
    for (int i = 0; i < 2 * cnt + 1; i++)
        r[i] = -1;
    if (strided) {
        MPI_Datatype vec;
        CHECK_MPI(MPI_Type_vector(cnt, 1, 2, MPI_INT, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        CHECK_MPI(MPI_Scatter(s, cnt, MPI_INT, r, 1, vec, root, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Type_free(&vec));
        for (int i = 0; i < cnt; i++) {
            CHECK_MSG(r[2 * i] == (int)(((long)me * cnt + i) * 7 + it), "strided cnt=%d root=%d [%d]=%d",
                      cnt, root, i, r[2 * i]);
            CHECK_MSG(r[2 * i + 1] == -1, "strided cnt=%d: a gap was written", cnt);
        }
    } else {
        CHECK_MPI(MPI_Scatter(s, cnt, MPI_INT, r, cnt, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < cnt; i++)
            CHECK_MSG(r[i] == (int)(((long)me * cnt + i) * 7 + it), "cnt=%d root=%d [%d]=%d", cnt,
                      root, i, r[i]);
        CHECK_MSG(r[cnt] == -1, "cnt=%d: written past the block", cnt);
    }
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int me = tu_rank, n = tu_size;
    int counts[] = {1, 100, 1024, 1500, 20000, 300000};
    for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int it = 0; it < 2 * n; it++)
            one(counts[c], it, it & 1, me, n);

    if (argc < 2 || strcmp(argv[argc - 1], "truncate") != 0)
        return tu_finish();
    /* scatterv: block j has 2000 + j ints at reverse positions; the last receiver expects one
       int fewer than it is sent */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int *cnt = malloc(sizeof(int) * (size_t)n), *dsp = malloc(sizeof(int) * (size_t)n);
    long total = 0;
    for (int j = 0; j < n; j++)
        total += 2000 + j;
    int *s = malloc(sizeof(int) * (size_t)total), *r = malloc(sizeof(int) * (2000 + (size_t)n));
    long at = total;
    for (int j = 0; j < n; j++) {
        cnt[j] = 2000 + j;
        at -= cnt[j];
        dsp[j] = (int)at;
    }
    for (long i = 0; i < total; i++)
        s[i] = (int)(i * 3 + 1);
    for (int root = 0; root < n; root++) {
        int want = cnt[me] - (me == n - 1 && n > 1);
        int rc = MPI_Scatterv(s, cnt, dsp, MPI_INT, r, want, MPI_INT, root, MPI_COMM_WORLD);
        if (me == n - 1 && n > 1) {
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
        } else {
            CHECK_MPI(rc);
            for (int i = 0; i < cnt[me]; i++)
                CHECK_MSG(r[i] == (dsp[me] + i) * 3 + 1, "scatterv root=%d [%d]=%d", root, i, r[i]);
        }
    }
    /* a scatter (not v) whose last receiver expects one int fewer than every block: small
       blocks (in the root's area) and large ones */
    int tcounts[] = {2, 5000};
    for (unsigned c = 0; c < sizeof tcounts / sizeof tcounts[0]; c++) {
        int tc = tcounts[c];
        int *ts = malloc(sizeof(int) * (size_t)tc * (size_t)n), *tr = malloc(sizeof(int) * (size_t)tc);
        CHECK(ts && tr);
        for (long i = 0; i < (long)tc * n; i++)
            ts[i] = (int)(i + 5);
        for (int root = 0; root < n; root++) {
            int short_one = me == n - 1 && n > 1;
            int rc = MPI_Scatter(ts, tc, MPI_INT, tr, tc - short_one, MPI_INT, root, MPI_COMM_WORLD);
            if (short_one) {
                CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
            } else {
                CHECK_MPI(rc);
                for (int i = 0; i < tc; i++)
                    CHECK_MSG(tr[i] == me * tc + i + 5, "scatter tc=%d root=%d [%d]=%d", tc, root, i, tr[i]);
            }
        }
        free(ts);
        free(tr);
    }
    int x = 1;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(x, n);
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    return tu_finish();
}
