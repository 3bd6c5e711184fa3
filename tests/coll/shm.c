/*
 * Blocking barrier, bcast, reduce and allreduce on several communicators of one host at once,
 * with the shapes that Protean's shared-memory collectives (coll_*=shm) treat specially:
 *  - a non-commutative user operation (composition of affine maps mod a prime) and MPI_MAXLOC
 *    on MPI_2INT, at counts below the communicator's size, around the size where the
 *    reduction is split among the members, and across several chunks of the region
 *    (32 KiB) and of the direct reduction's steps (64 KiB at two members), at every root, with
 *    MPI_IN_PLACE;
 *  - bcast where the root sends MPI_INT and the others receive a vector type of the same
 *    signature (and the other way round), across several chunks;
 *  - MPI_COMM_WORLD, a duplicate, an even/odd split with the ranks reversed, calls alternating
 *    between them, and communicators made and freed in a loop (every one maps a region of
 *    its own and frees it);
 *  - allgather into strided blocks on some ranks, in and out of place, alltoall in and out of
 *    place, with blocks of several chunks;
 *  - gather, scatter, gatherv, scatterv at every root, in and out of place, strided blocks at
 *    odd roots, v forms with odd counts, empty blocks, blocks in reverse order with gaps, and
 *    blocks of several chunks; allgatherv in and out of place;
 *  - with args "shm" or "truncate" (Protean only): a gather, a scatter and a scatterv whose
 *    blocks are too long for their receivers return MPI_ERR_TRUNCATE there, and the
 *    communicator stays usable ("truncate" leaves the algorithms to the decision: at two
 *    processes, or across hosts, the point-to-point ones).
 * Any size >= 1.
 */
#include "util.h"

#define MODP 1000003

typedef struct {
    int a, b;
} affine; /* x -> a x + b */

/* inout = in o inout (apply inout first) */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    affine *f = in, *g = inout;
    for (int i = 0; i < *len; i++) {
        long long a = (long long)f[i].a * g[i].a % MODP;
        long long b = ((long long)f[i].a * g[i].b + f[i].b) % MODP;
        g[i].a = (int)a;
        g[i].b = (int)b;
    }
}

static affine aff(int p, int i)
{
    affine f = {2 + (p * 3 + i) % 5, 1 + (p * 7 + i * 11) % 13};
    return f;
}

static affine fold(int n, int i)
{
    affine acc = aff(n - 1, i);
    for (int p = n - 2; p >= 0; p--) {
        affine x = aff(p, i);
        int one = 1;
        compose(&x, &acc, &one, NULL);
    }
    return acc;
}

static MPI_Datatype pair;
static MPI_Op nc;

static void reductions(MPI_Comm comm, int c)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    affine *s = tu_malloc((size_t)(c ? c : 1) * sizeof(affine));
    affine *r = tu_malloc((size_t)(c ? c : 1) * sizeof(affine));
    for (int i = 0; i < c; i++)
        s[i] = aff(me, i);
    CHECK_MPI(MPI_Allreduce(s, r, c, pair, nc, comm));
    for (int i = 0; i < c; i++) {
        affine w = fold(n, i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "allreduce c=%d n=%d [%d]", c, n, i);
    }
    memcpy(r, s, c * sizeof(affine));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, r, c, pair, nc, comm));
    for (int i = 0; i < c; i++) {
        affine w = fold(n, i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "allreduce in place c=%d [%d]", c, i);
    }
    for (int root = 0; root < n; root++) {
        int ip = (root + c) % 2;
        if (me == root && ip)
            memcpy(r, s, c * sizeof(affine));
        else
            memset(r, 0, c * sizeof(affine));
        CHECK_MPI(MPI_Reduce(me == root && ip ? MPI_IN_PLACE : s, r, c, pair, nc, root, comm));
        for (int i = 0; i < c && me == root; i++) {
            affine w = fold(n, i);
            CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "reduce c=%d root=%d [%d]", c, root, i);
        }
    }
    /* MAXLOC: value i % 7 + rank % 3, ties to the lowest rank */
    int *v = tu_ints(2 * (size_t)(c ? c : 1), 0), *w = tu_ints(2 * (size_t)(c ? c : 1), 0);
    for (int i = 0; i < c; i++) {
        v[2 * i] = i % 7 + me % 3;
        v[2 * i + 1] = me;
    }
    CHECK_MPI(MPI_Allreduce(v, w, c, MPI_2INT, MPI_MAXLOC, comm));
    for (int i = 0; i < c; i++) {
        int best = n >= 3 ? 2 : n - 1;
        CHECK_MSG(w[2 * i] == i % 7 + best % 3 && w[2 * i + 1] == best, "maxloc c=%d [%d]=%d,%d",
                  c, i, w[2 * i], w[2 * i + 1]);
    }
    double *d = tu_malloc((size_t)(c ? c : 1) * sizeof(double));
    double *e = tu_malloc((size_t)(c ? c : 1) * sizeof(double));
    for (int i = 0; i < c; i++)
        d[i] = me + i * 0.5;
    CHECK_MPI(MPI_Reduce(d, e, c, MPI_DOUBLE, MPI_SUM, n - 1, comm));
    for (int i = 0; i < c && me == n - 1; i++)
        CHECK_MSG(e[i] == n * (n - 1) / 2.0 + n * i * 0.5, "sum c=%d [%d]=%g", c, i, e[i]);
    free(d);
    free(e);
    free(v);
    free(w);
    free(s);
    free(r);
}

static void bcasts(MPI_Comm comm, int c)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(c ? c : 1, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    int *b = tu_ints(2 * (size_t)(c ? c : 1), -1);
    for (int root = 0; root < n; root++) {
        /* even roots send contiguous and the others receive strided; odd roots the reverse */
        int strided = (root % 2 == 0) != (me == root);
        tu_set_ints(b, 2 * (size_t)(c ? c : 1), -1);
        for (int i = 0; i < c && me == root; i++)
            b[strided ? 2 * i : i] = i * 31 + root;
        if (strided)
            CHECK_MPI(MPI_Bcast(b, c ? 1 : 0, vec, root, comm));
        else
            CHECK_MPI(MPI_Bcast(b, c, MPI_INT, root, comm));
        for (int i = 0; i < c; i++) {
            int got = b[strided ? 2 * i : i];
            CHECK_MSG(got == i * 31 + root, "bcast c=%d root=%d strided=%d [%d]=%d", c, root,
                      strided, i, got);
        }
        if (strided)
            for (int i = 0; i < c; i++)
                CHECK_MSG(b[2 * i + 1] == -1, "bcast wrote a gap c=%d [%d]", c, 2 * i + 1);
    }
    free(b);
    CHECK_MPI(MPI_Type_free(&vec));
}

/* Allgather with the receivers' blocks strided on odd ranks, and alltoall in and out of
 * place, with blocks that take several chunks of the region at every size. */
static void exchanges(MPI_Comm comm, int c)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Datatype vec, blk;
    CHECK_MPI(MPI_Type_vector(c, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_create_resized(vec, 0, 2 * c * sizeof(int), &blk));
    CHECK_MPI(MPI_Type_commit(&blk));
    int *s = tu_ints((size_t)c * n, 0), *r = tu_ints(2 * (size_t)c * n, -1);
    for (int i = 0; i < c; i++)
        s[i] = me * 100003 + i;
    if (me % 2)
        CHECK_MPI(MPI_Allgather(s, c, MPI_INT, r, 1, blk, comm));
    else
        CHECK_MPI(MPI_Allgather(s, c, MPI_INT, r, c, MPI_INT, comm));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < c; i++) {
            int got = me % 2 ? r[2 * c * j + 2 * i] : r[c * j + i];
            CHECK_MSG(got == j * 100003 + i, "allgather c=%d from %d [%d]=%d", c, j, i, got);
            if (me % 2)
                CHECK_MSG(r[2 * c * j + 2 * i + 1] == -1, "allgather wrote a gap");
        }
    /* in place, into strided blocks on odd ranks (a member's own block is what it sends) */
    for (size_t i = 0; i < 2 * (size_t)c * n; i++)
        r[i] = -1;
    for (int i = 0; i < c; i++)
        r[me % 2 ? 2 * c * me + 2 * i : c * me + i] = me * 100003 + i + 7;
    if (me % 2)
        CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, 1, blk, comm));
    else
        CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, c, MPI_INT, comm));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < c; i++) {
            int got = me % 2 ? r[2 * c * j + 2 * i] : r[c * j + i];
            CHECK_MSG(got == j * 100003 + i + 7, "allgather in place c=%d from %d [%d]=%d", c, j,
                      i, got);
            if (me % 2)
                CHECK_MSG(r[2 * c * j + 2 * i + 1] == -1, "allgather in place wrote a gap");
        }
    for (int ip = 0; ip < 2; ip++) {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < c; i++)
                (ip ? r : s)[c * j + i] = me * 1000 + j * 10 + i % 7;
        CHECK_MPI(MPI_Alltoall(ip ? MPI_IN_PLACE : s, c, MPI_INT, r, c, MPI_INT, comm));
        for (int j = 0; j < n; j++)
            for (int i = 0; i < c; i++)
                CHECK_MSG(r[c * j + i] == j * 1000 + me * 10 + i % 7,
                          "alltoall c=%d in place %d from %d [%d]=%d", c, ip, j, i, r[c * j + i]);
    }
    free(s);
    free(r);
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Type_free(&blk));
}

/* Block length of rank j in the v forms: odd, zero at some ranks, several chunks at others. */
static int vcount(int c, int j)
{
    return j % 3 == 1 ? 0 : c + (c * j) % 7 + j;
}

/* Gather(v), scatter(v) and allgatherv at every root, in and out of place, into and out of
 * strided blocks at odd roots, with the v forms' blocks in reverse order with gaps between. */
static void rooteds(MPI_Comm comm, int c)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Datatype vec, blk;
    CHECK_MPI(MPI_Type_vector(c, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_create_resized(vec, 0, 2 * c * sizeof(int), &blk));
    CHECK_MPI(MPI_Type_commit(&blk));
    int *cnt = tu_malloc(n * sizeof(int)), *dsp = tu_malloc(n * sizeof(int));
    size_t tot = 0;
    for (int j = n - 1; j >= 0; j--) {
        cnt[j] = vcount(c, j);
        dsp[j] = (int)tot + 1; /* a one-int gap before every block */
        tot += cnt[j] + 1;
    }
    size_t big = 2 * (size_t)c * n + tot + 1;
    int *s = tu_ints(big, 0), *r = tu_ints(big, -1);
    for (int root = 0; root < n; root++) {
        int strided = root % 2, ip = (root / 2 + c) % 2 && me == root;
        /* gather */
        tu_set_ints(r, big, -1);
        for (int i = 0; i < c; i++)
            s[i] = me * 100003 + i;
        if (ip) {
            for (int i = 0; i < c; i++)
                r[strided ? 2 * c * me + 2 * i : c * me + i] = me * 100003 + i;
        }
        CHECK_MPI(MPI_Gather(ip ? MPI_IN_PLACE : s, c, MPI_INT, r, strided ? 1 : c,
                             strided ? blk : MPI_INT, root, comm));
        for (int j = 0; j < n && me == root; j++)
            for (int i = 0; i < c; i++) {
                int got = strided ? r[2 * c * j + 2 * i] : r[c * j + i];
                CHECK_MSG(got == j * 100003 + i, "gather c=%d root=%d from %d [%d]=%d", c, root,
                          j, i, got);
                if (strided)
                    CHECK_MSG(r[2 * c * j + 2 * i + 1] == -1, "gather wrote a gap");
            }
        /* scatter: the root's blocks strided at odd roots, received contiguous */
        for (int j = 0; j < n && me == root; j++)
            for (int i = 0; i < c; i++)
                s[strided ? 2 * c * j + 2 * i : c * j + i] = j * 1000 + i % 977 + root;
        tu_set_ints(r, big, -1);
        CHECK_MPI(MPI_Scatter(s, strided ? 1 : c, strided ? blk : MPI_INT,
                              ip ? MPI_IN_PLACE : r, c, MPI_INT, root, comm));
        /* in place, the root's own block stays where it is in the send buffer */
        for (int i = 0; i < c; i++) {
            int got = !ip ? r[i] : strided ? s[2 * c * me + 2 * i] : s[c * me + i];
            CHECK_MSG(got == me * 1000 + i % 977 + root, "scatter c=%d root=%d [%d]=%d", c, root,
                      i, got);
        }
        if (!ip)
            CHECK_MSG(r[c] == -1, "scatter wrote past its block");
        /* gatherv */
        tu_set_ints(r, big, -1);
        for (int i = 0; i < cnt[me]; i++)
            s[i] = me * 7919 + i;
        if (ip)
            for (int i = 0; i < cnt[me]; i++)
                r[dsp[me] + i] = me * 7919 + i;
        CHECK_MPI(MPI_Gatherv(ip ? MPI_IN_PLACE : s, cnt[me], MPI_INT, r, cnt, dsp, MPI_INT, root,
                              comm));
        for (int j = 0; j < n && me == root; j++) {
            for (int i = 0; i < cnt[j]; i++)
                CHECK_MSG(r[dsp[j] + i] == j * 7919 + i, "gatherv c=%d root=%d from %d [%d]=%d", c,
                          root, j, i, r[dsp[j] + i]);
            CHECK_MSG(r[dsp[j] - 1] == -1, "gatherv wrote a gap");
        }
        /* scatterv */
        for (int j = 0; j < n && me == root; j++)
            for (int i = 0; i < cnt[j]; i++)
                s[dsp[j] + i] = j * 31 + i + root;
        tu_set_ints(r, big, -1);
        CHECK_MPI(MPI_Scatterv(s, cnt, dsp, MPI_INT, ip ? MPI_IN_PLACE : r, cnt[me], MPI_INT, root,
                               comm));
        int *mine = ip ? s + dsp[me] : r;
        for (int i = 0; i < cnt[me]; i++)
            CHECK_MSG(mine[i] == me * 31 + i + root, "scatterv c=%d root=%d [%d]=%d", c, root, i,
                      mine[i]);
        if (!ip)
            CHECK_MSG(r[cnt[me]] == -1, "scatterv wrote past its block");
    }
    /* allgatherv, out of place and in place */
    for (int ip = 0; ip < 2; ip++) {
        tu_set_ints(r, big, -1);
        for (int i = 0; i < cnt[me]; i++)
            (ip ? r + dsp[me] : s)[i] = me * 7919 + i + ip;
        CHECK_MPI(MPI_Allgatherv(ip ? MPI_IN_PLACE : s, cnt[me], MPI_INT, r, cnt, dsp, MPI_INT,
                                 comm));
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < cnt[j]; i++)
                CHECK_MSG(r[dsp[j] + i] == j * 7919 + i + ip, "allgatherv c=%d ip=%d from %d [%d]=%d",
                          c, ip, j, i, r[dsp[j] + i]);
            CHECK_MSG(r[dsp[j] - 1] == -1, "allgatherv wrote a gap");
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Type_free(&blk));
}

/* A member that sends more than the root's block holds (or a root that sends more than a
 * member's block): MPI_ERR_TRUNCATE at the receiver, and the communicator stays usable.
 * Protean only (args "shm"): how the peers report it differs. */
static void truncation(MPI_Comm comm)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    int s[4] = {1, 2, 3, 4}, *r = tu_ints(4 * (size_t)n, -1);
    int rc = MPI_Gather(s, me == n - 1 && n > 1 ? 3 : 2, MPI_INT, r, 2, MPI_INT, 0, comm);
    if (me == 0 && n > 1)
        CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
    else
        CHECK_MPI(rc);
    rc = MPI_Scatter(r, 2, MPI_INT, s, me == n - 1 && n > 1 ? 1 : 2, MPI_INT, 0, comm);
    if (me == n - 1 && n > 1)
        CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
    else
        CHECK_MPI(rc);
    int cnt[64], dsp[64];
    for (int j = 0; j < n && j < 64; j++) {
        cnt[j] = j == n - 1 && n > 1 ? 3 : 2;
        dsp[j] = 4 * j;
    }
    if (n <= 64) {
        rc = MPI_Scatterv(r, cnt, dsp, MPI_INT, s, 2, MPI_INT, 0, comm);
        if (me == n - 1 && n > 1)
            CHECK_CLASS(rc, MPI_ERR_TRUNCATE);
        else
            CHECK_MPI(rc);
    }
    int x = 1;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, comm));
    CHECK_EQ(x, n);
    CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL));
    free(r);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int np, me;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    CHECK_MPI(MPI_Op_create(compose, 0, &nc));

    MPI_Comm dup, half;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half));
    MPI_Comm comms[3] = {MPI_COMM_WORLD, dup, half};
    /* around the split point (2 KiB: 256 pairs) and chunk boundaries (32 KiB: 4096 pairs) */
    static const int counts[] = {1, 2, 3, 5, 255, 256, 257, 1000, 4095, 4096, 4097, 10001, 40001};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        for (int j = 0; j < 3; j++) {
            reductions(comms[j], counts[k]);
            CHECK_MPI(MPI_Barrier(comms[(j + 1) % 3]));
            bcasts(comms[j], counts[k] * 2 + 1);
            exchanges(comms[j], counts[k]);
            rooteds(comms[j], counts[k]);
        }
    }
    if (argc > 1 && (strcmp(argv[1], "shm") == 0 || strcmp(argv[1], "truncate") == 0))
        truncation(dup);
    for (int round = 0; round < 20; round++) {
        MPI_Comm t;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, round % 3 == 0 ? 0 : me % 2, me, &t));
        int x = me + round, y = -1;
        CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, t));
        CHECK_MPI(MPI_Barrier(t));
        int tn;
        MPI_Comm_size(t, &tn);
        int want = round % 3 == 0 ? np - 1 + round : -1;
        if (want >= 0)
            CHECK_MSG(y == want, "round %d: max %d want %d", round, y, want);
        CHECK_MPI(MPI_Comm_free(&t));
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK_MPI(MPI_Op_free(&nc));
    CHECK_MPI(MPI_Type_free(&pair));
    return tu_finish();
}
