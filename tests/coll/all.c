/*
 * Every collective of MPI-4.0 chapter 6 on MPI_COMM_WORLD, with results checked element by
 * element: Barrier, Bcast, Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan,
 * Gather(v), Scatter(v), Allgather(v), Alltoall(v,w), each with MPI_IN_PLACE where the
 * standard allows it, every root, and counts from 0 to 40000 ints (so that the large-message
 * algorithms run too); a non-contiguous datatype for Bcast; user operations, one commutative
 * and one that is not (composition of affine maps), checking the standard's reduction order.
 *
 * args: blocking | nonblocking | persistent (the form every call uses). The nonblocking
 * form also overlaps point-to-point traffic and several outstanding collectives; the
 * persistent form starts each request twice. Any size >= 1.
 */
#include "util.h"

static int np, me;

#define MODP 1000003

/* Contribution of rank p at element i. */
static int val(int p, int i)
{
    return p * 1000 + i % 997;
}

static long long sum_upto(int i, int last) /* sum over p in [0, last] of val(p, i) */
{
    long long s = 0;
    for (int p = 0; p <= last; p++)
        s += val(p, i);
    return s;
}

static void barrier(void)
{
    TU_COLL(MPI_Barrier, MPI_Ibarrier, MPI_Barrier_init, MPI_COMM_WORLD);
}

static void bcast(int c)
{
    int *b = tu_ints(c, 0);
    for (int root = 0; root < np; root++) {
        for (int i = 0; i < c; i++)
            b[i] = me == root ? val(root, i) : -1;
        TU_COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, b, c, MPI_INT, root, MPI_COMM_WORLD);
        for (int i = 0; i < c; i++)
            CHECK_MSG(b[i] == val(root, i), "bcast c=%d root=%d [%d]=%d", c, root, i, b[i]);
    }
    /* Every other int: a non-contiguous type. */
    if (c > 0 && c <= 20000) {
        MPI_Datatype v;
        int *w = tu_ints(2 * c, 0);
        CHECK_MPI(MPI_Type_vector(c, 1, 2, MPI_INT, &v));
        CHECK_MPI(MPI_Type_commit(&v));
        int root = c % np;
        for (int i = 0; i < 2 * c; i++)
            w[i] = me == root ? val(root, i) : -7;
        TU_COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, w, 1, v, root, MPI_COMM_WORLD);
        for (int i = 0; i < 2 * c; i++) {
            int want = (i % 2 == 0 || me == root) ? val(root, i) : -7;
            CHECK_MSG(w[i] == want, "bcast vector c=%d [%d]=%d want %d", c, i, w[i], want);
        }
        CHECK_MPI(MPI_Type_free(&v));
        free(w);
    }
    free(b);
}

static void reduce(int c)
{
    int *s = tu_ints(c, 0), *r = tu_ints(c, 0);
    for (int root = 0; root < np; root++) {
        for (int ip = 0; ip < 2; ip++) {
            if (ip && tu_form == TU_BLOCKING && c >= 1000 && tu_quirk("reduce_in_place"))
                continue;
            for (int i = 0; i < c; i++)
                s[i] = val(me, i);
            tu_set_ints(r, c, -1);
            const void *sb = s;
            if (ip && me == root) {
                memcpy(r, s, c * sizeof(int));
                sb = MPI_IN_PLACE;
            }
            TU_COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, sb, r, c, MPI_INT, MPI_SUM, root,
                    MPI_COMM_WORLD);
            for (int i = 0; i < c && me == root; i++)
                CHECK_MSG(r[i] == sum_upto(i, np - 1), "reduce c=%d root=%d ip=%d [%d]=%d", c,
                          root, ip, i, r[i]);
        }
    }
    free(s);
    free(r);
}

static void allreduce(int c)
{
    int *s = tu_ints(c, 0), *r = tu_ints(c, 0);
    for (int ip = 0; ip < 2; ip++) {
        for (int i = 0; i < c; i++)
            s[i] = val(me, i);
        tu_set_ints(r, c, -1);
        if (ip)
            memcpy(r, s, c * sizeof(int));
        TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, ip ? MPI_IN_PLACE : s, r, c,
                MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < c; i++)
            CHECK_MSG(r[i] == sum_upto(i, np - 1), "allreduce c=%d ip=%d [%d]=%d", c, ip, i,
                      r[i]);
        tu_set_ints(r, c, -1);
        TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, s, r, c, MPI_INT, MPI_MAX,
                MPI_COMM_WORLD);
        for (int i = 0; i < c; i++)
            CHECK_MSG(r[i] == val(np - 1, i), "allreduce max c=%d [%d]=%d", c, i, r[i]);
    }
    free(s);
    free(r);
}

static void reduce_scatter(int c)
{
    /* block: c per process; v: (j % 3) * c / 2 for process j */
    int *cnt = tu_ints(np, 0), total = 0;
    for (int j = 0; j < np; j++)
        total += cnt[j] = (j % 3) * c / 2;
    for (int v = 0; v < 2; v++) {
        int n = v ? total : c * np;
        int mine = v ? cnt[me] : c, off = 0;
        for (int j = 0; j < me; j++)
            off += v ? cnt[j] : c;
        int *s = tu_ints(n, 0), *r = tu_ints(n, 0);
        for (int ip = 0; ip < 2; ip++) {
            if (ip && c >= 40000 && tu_quirk("reduce_scatter_in_place"))
                continue;
            for (int i = 0; i < n; i++)
                s[i] = val(me, i);
            tu_set_ints(r, n, -1);
            if (ip)
                memcpy(r, s, n * sizeof(int));
            const void *sb = ip ? MPI_IN_PLACE : s;
            if (v)
                TU_COLL(MPI_Reduce_scatter, MPI_Ireduce_scatter, MPI_Reduce_scatter_init, sb, r,
                        cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            else
                TU_COLL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block,
                        MPI_Reduce_scatter_block_init, sb, r, c, MPI_INT, MPI_SUM,
                        MPI_COMM_WORLD);
            for (int i = 0; i < mine; i++)
                CHECK_MSG(r[i] == sum_upto(off + i, np - 1),
                          "reduce_scatter%s c=%d ip=%d [%d]=%d", v ? "" : "_block", c, ip, i,
                          r[i]);
        }
        free(s);
        free(r);
    }
    free(cnt);
}

static void scan(int c)
{
    int *s = tu_ints(c, 0), *r = tu_ints(c, 0);
    for (int ex = 0; ex < 2; ex++) {
        for (int ip = 0; ip < 2; ip++) {
            for (int i = 0; i < c; i++)
                s[i] = val(me, i);
            tu_set_ints(r, c, -1);
            if (ip)
                memcpy(r, s, c * sizeof(int));
            const void *sb = ip ? MPI_IN_PLACE : s;
            if (ex)
                TU_COLL(MPI_Exscan, MPI_Iexscan, MPI_Exscan_init, sb, r, c, MPI_INT, MPI_SUM,
                        MPI_COMM_WORLD);
            else
                TU_COLL(MPI_Scan, MPI_Iscan, MPI_Scan_init, sb, r, c, MPI_INT, MPI_SUM,
                        MPI_COMM_WORLD);
            if (ex && me == 0)
                continue; /* undefined at rank 0 */
            for (int i = 0; i < c; i++)
                CHECK_MSG(r[i] == sum_upto(i, ex ? me - 1 : me), "%s c=%d ip=%d [%d]=%d",
                          ex ? "exscan" : "scan", c, ip, i, r[i]);
        }
    }
    free(s);
    free(r);
}

/* Gather and gatherv (blocks in reverse order with gaps), each with MPI_IN_PLACE at root. */
static void gather(int c)
{
    int *s = tu_ints(c, 0), *r = tu_ints((size_t)(c + 3) * np, 0);
    int *cnt = tu_ints(np, 0), *dsp = tu_ints(np, 0);
    for (int j = 0; j < np; j++) {
        cnt[j] = (j + c) % 3 == 0 ? c / 2 : c;
        dsp[j] = (np - 1 - j) * (c + 3);
    }
    for (int i = 0; i < c; i++)
        s[i] = val(me, i);
    for (int root = 0; root < np; root++) {
        for (int v = 0; v < 2; v++) {
            for (int ip = 0; ip < 2; ip++) {
                tu_set_ints(r, (size_t)(c + 3) * np, -1);
                int at = v ? dsp[me] : me * c, mine = v ? cnt[me] : c;
                const void *sb = s;
                if (ip && me == root) {
                    memcpy(r + at, s, mine * sizeof(int));
                    sb = MPI_IN_PLACE;
                }
                if (v)
                    TU_COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, sb, mine, MPI_INT, r, cnt,
                            dsp, MPI_INT, root, MPI_COMM_WORLD);
                else
                    TU_COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, sb, c, MPI_INT, r, c,
                            MPI_INT, root, MPI_COMM_WORLD);
                if (me != root)
                    continue;
                for (int j = 0; j < np; j++) {
                    int o = v ? dsp[j] : j * c, k = v ? cnt[j] : c;
                    for (int i = 0; i < k; i++)
                        CHECK_MSG(r[o + i] == val(j, i),
                                  "gather%s c=%d root=%d ip=%d from %d [%d]=%d", v ? "v" : "", c,
                                  root, ip, j, i, r[o + i]);
                    if (v)
                        for (int i = k; i < c + 3; i++)
                            CHECK_MSG(r[o + i] == -1, "gatherv wrote a gap");
                }
            }
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
}

static void scatter(int c)
{
    int *s = tu_ints((size_t)(c + 3) * np, 0), *r = tu_ints(c, 0);
    int *cnt = tu_ints(np, 0), *dsp = tu_ints(np, 0);
    for (int j = 0; j < np; j++) {
        cnt[j] = (j + c) % 3 == 1 ? c / 3 : c;
        dsp[j] = (np - 1 - j) * (c + 3);
    }
    for (int root = 0; root < np; root++) {
        for (int v = 0; v < 2; v++) {
            for (int ip = 0; ip < 2; ip++) {
                for (int j = 0; j < np; j++)
                    for (int i = 0; i < c + 3; i++)
                        s[j * (c + 3) + i] = -5;
                for (int j = 0; j < np; j++) {
                    int o = v ? dsp[j] : j * c, k = v ? cnt[j] : c;
                    for (int i = 0; i < k; i++)
                        s[o + i] = val(j, i) + root;
                }
                tu_set_ints(r, c, -1);
                int mine = v ? cnt[me] : c;
                void *rb = (ip && me == root) ? MPI_IN_PLACE : (void *)r;
                if (v)
                    TU_COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, s, cnt, dsp, MPI_INT,
                            rb, mine, MPI_INT, root, MPI_COMM_WORLD);
                else
                    TU_COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, s, c, MPI_INT, rb, c,
                            MPI_INT, root, MPI_COMM_WORLD);
                if (rb == MPI_IN_PLACE)
                    continue;
                for (int i = 0; i < mine; i++)
                    CHECK_MSG(r[i] == val(me, i) + root, "scatter%s c=%d root=%d [%d]=%d",
                              v ? "v" : "", c, root, i, r[i]);
                for (int i = mine; i < c; i++)
                    CHECK_MSG(r[i] == -1, "scatterv wrote past its count");
            }
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
}

static void allgather(int c)
{
    int *s = tu_ints(c, 0), *r = tu_ints((size_t)(c + 3) * np, 0);
    int *cnt = tu_ints(np, 0), *dsp = tu_ints(np, 0);
    for (int j = 0; j < np; j++) {
        cnt[j] = (j + c) % 3 == 2 ? c / 2 : c;
        dsp[j] = (np - 1 - j) * (c + 3);
    }
    for (int i = 0; i < c; i++)
        s[i] = val(me, i);
    for (int v = 0; v < 2; v++) {
        for (int ip = 0; ip < 2; ip++) {
            tu_set_ints(r, (size_t)(c + 3) * np, -1);
            int at = v ? dsp[me] : me * c, mine = v ? cnt[me] : c;
            const void *sb = s;
            if (ip) {
                memcpy(r + at, s, mine * sizeof(int));
                sb = MPI_IN_PLACE;
            }
            if (v)
                TU_COLL(MPI_Allgatherv, MPI_Iallgatherv, MPI_Allgatherv_init, sb, mine, MPI_INT, r,
                        cnt, dsp, MPI_INT, MPI_COMM_WORLD);
            else
                TU_COLL(MPI_Allgather, MPI_Iallgather, MPI_Allgather_init, sb, c, MPI_INT, r, c,
                        MPI_INT, MPI_COMM_WORLD);
            for (int j = 0; j < np; j++) {
                int o = v ? dsp[j] : j * c, k = v ? cnt[j] : c;
                for (int i = 0; i < k; i++)
                    CHECK_MSG(r[o + i] == val(j, i), "allgather%s c=%d ip=%d from %d [%d]=%d",
                              v ? "v" : "", c, ip, j, i, r[o + i]);
            }
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
}

/* Alltoall, alltoallv (varied counts, reversed blocks), alltoallw (bytes displacements),
 * each with MPI_IN_PLACE. Element i of the block p sends to q: val(p, q * 7 + i). */
static void alltoall(int c)
{
    size_t n = (size_t)(c + 2) * np;
    int *s = tu_ints(n, 0), *r = tu_ints(n, 0), *sc = tu_ints(np, 0), *sd = tu_ints(np, 0);
    int *rc = tu_ints(np, 0), *rd = tu_ints(np, 0), *sdb = tu_ints(np, 0), *rdb = tu_ints(np, 0);
    MPI_Datatype *ty = tu_malloc(np * sizeof(MPI_Datatype));
    for (int form = 0; form < 3; form++) {
        for (int ip = 0; ip < 2; ip++) {
            /* counts: uniform for alltoall; count(p->q) = (p + q) % 3 == 0 ? c / 2 : c */
            for (int q = 0; q < np; q++) {
                sc[q] = form == 0 || (me + q) % 3 ? c : c / 2;
                rc[q] = form == 0 || (q + me) % 3 ? c : c / 2;
                sd[q] = form == 0 ? q * c : (np - 1 - q) * (c + 2);
                rd[q] = form == 0 ? q * c : (np - 1 - q) * (c + 2);
                sdb[q] = sd[q] * (int)sizeof(int);
                rdb[q] = rd[q] * (int)sizeof(int);
                ty[q] = MPI_INT;
            }
            tu_set_ints(s, n, -3);
            tu_set_ints(r, n, -1);
            for (int q = 0; q < np; q++)
                for (int i = 0; i < sc[q]; i++)
                    s[sd[q] + i] = val(me, q * 7 + i);
            const void *sb = s;
            if (ip) {
                /* in place: the send data sits in the receive buffer, same layout */
                if (form == 0)
                    memcpy(r, s, (size_t)c * np * sizeof(int));
                else
                    memcpy(r, s, n * sizeof(int));
                sb = MPI_IN_PLACE;
            }
            if (form == 0)
                TU_COLL(MPI_Alltoall, MPI_Ialltoall, MPI_Alltoall_init, sb, c, MPI_INT, r, c,
                        MPI_INT, MPI_COMM_WORLD);
            else if (form == 1)
                TU_COLL(MPI_Alltoallv, MPI_Ialltoallv, MPI_Alltoallv_init, sb, sc, sd, MPI_INT, r,
                        rc, rd, MPI_INT, MPI_COMM_WORLD);
            else
                TU_COLL(MPI_Alltoallw, MPI_Ialltoallw, MPI_Alltoallw_init, sb, sc, sdb, ty, r, rc,
                        rdb, ty, MPI_COMM_WORLD);
            for (int p = 0; p < np; p++)
                for (int i = 0; i < rc[p]; i++)
                    CHECK_MSG(r[rd[p] + i] == val(p, me * 7 + i),
                              "alltoall form %d c=%d ip=%d from %d [%d]=%d want %d", form, c,
                              ip, p, i, r[rd[p] + i], val(p, me * 7 + i));
        }
    }
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sdb);
    free(rdb);
    free(ty);
}

/* ---- user operations ---------------------------------------------------------------- */

/* An affine map x -> a x + b (mod MODP); in op inout = in o inout (apply inout first). */
typedef struct {
    int a, b;
} affine;

static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    affine *x = in, *y = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) {
        long long a = (long long)x[i].a * y[i].a % MODP;
        long long b = ((long long)x[i].a * y[i].b + x[i].b) % MODP;
        y[i].a = (int)a;
        y[i].b = (int)b;
    }
}

static void isum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static affine aff(int p, int i)
{
    affine f = {2 + (p * 3 + i) % 5, 1 + (p * 7 + i * 11) % 13};
    return f;
}

/* x_lo o x_lo+1 o ... o x_hi at element i */
static affine fold(int lo, int hi, int i)
{
    affine acc = aff(hi, i);
    for (int p = hi - 1; p >= lo; p--) {
        affine x = aff(p, i);
        int one = 1;
        compose(&x, &acc, &one, NULL);
    }
    return acc;
}

static void user_ops(int c)
{
    MPI_Op nc, cm;
    MPI_Datatype pair;
    int commute = -1;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    CHECK_MPI(MPI_Op_create(compose, 0, &nc));
    CHECK_MPI(MPI_Op_create(isum, 1, &cm));
    CHECK_MPI(MPI_Op_commutative(nc, &commute));
    CHECK_EQ(commute, 0);
    CHECK_MPI(MPI_Op_commutative(cm, &commute));
    CHECK_EQ(commute, 1);

    affine *s = tu_malloc((size_t)(c ? c : 1) * np * sizeof(affine));
    affine *r = tu_malloc((size_t)(c ? c : 1) * np * sizeof(affine));
    for (int i = 0; i < c * np; i++)
        s[i] = aff(me, i);
    /* allreduce, reduce at each root, scan, exscan, reduce_scatter_block */
    memset(r, 0, c * sizeof(affine));
    TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, s, r, c, pair, nc, MPI_COMM_WORLD);
    for (int i = 0; i < c; i++) {
        affine w = fold(0, np - 1, i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "user allreduce c=%d [%d]", c, i);
    }
    for (int root = 0; root < np; root++) {
        memset(r, 0, c * sizeof(affine));
        TU_COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, s, r, c, pair, nc, root, MPI_COMM_WORLD);
        for (int i = 0; i < c && me == root; i++) {
            affine w = fold(0, np - 1, i);
            CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "user reduce c=%d root=%d [%d]", c, root,
                      i);
        }
    }
    memset(r, 0, c * sizeof(affine));
    TU_COLL(MPI_Scan, MPI_Iscan, MPI_Scan_init, s, r, c, pair, nc, MPI_COMM_WORLD);
    for (int i = 0; i < c; i++) {
        affine w = fold(0, me, i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "user scan c=%d [%d]", c, i);
    }
    memset(r, 0, c * sizeof(affine));
    TU_COLL(MPI_Exscan, MPI_Iexscan, MPI_Exscan_init, s, r, c, pair, nc, MPI_COMM_WORLD);
    for (int i = 0; i < c && me > 0; i++) {
        affine w = fold(0, me - 1, i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "user exscan c=%d [%d]", c, i);
    }
    memset(r, 0, c * sizeof(affine));
    TU_COLL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init, s,
            r, c, pair, nc, MPI_COMM_WORLD);
    for (int i = 0; i < c; i++) {
        affine w = fold(0, np - 1, me * c + i);
        CHECK_MSG(r[i].a == w.a && r[i].b == w.b, "user reduce_scatter_block c=%d [%d]", c, i);
    }
    /* commutative user sum */
    int *is = tu_ints(c, 0), *ir = tu_ints(c, 0);
    for (int i = 0; i < c; i++)
        is[i] = val(me, i);
    TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, is, ir, c, MPI_INT, cm,
            MPI_COMM_WORLD);
    for (int i = 0; i < c; i++)
        CHECK_MSG(ir[i] == sum_upto(i, np - 1), "user sum c=%d [%d]=%d", c, i, ir[i]);
    free(is);
    free(ir);
    free(s);
    free(r);
    CHECK_MPI(MPI_Op_free(&nc));
    CHECK_MPI(MPI_Op_free(&cm));
    CHECK(nc == MPI_OP_NULL);
    CHECK_MPI(MPI_Type_free(&pair));
}

/* Several nonblocking collectives outstanding at once, completed in reverse order, with
 * point-to-point traffic around a ring in between. */
static void overlap(void)
{
    int c = 1000;
    int *a = tu_ints(c, 0), *b = tu_ints(c, 0), *g = tu_ints((size_t)np, 0), token = me, got = -1;
    MPI_Request rq[5];
    for (int i = 0; i < c; i++) {
        a[i] = me == 0 ? val(0, i) : -1;
        b[i] = val(me, i);
    }
    CHECK_MPI(MPI_Ibcast(a, c, MPI_INT, 0, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, b, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, (me + np - 1) % np, 5, MPI_COMM_WORLD, &rq[2]));
    CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, (me + 1) % np, 5, MPI_COMM_WORLD, &rq[3]));
    CHECK_MPI(MPI_Iallgather(&me, 1, MPI_INT, g, 1, MPI_INT, MPI_COMM_WORLD, &rq[4]));
    for (int k = 4; k >= 0; k--)
        CHECK_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
    CHECK_EQ(got, (me + np - 1) % np);
    for (int i = 0; i < c; i++) {
        CHECK_EQ(a[i], val(0, i));
        CHECK_EQ(b[i], sum_upto(i, np - 1));
    }
    for (int j = 0; j < np; j++)
        CHECK_EQ(g[j], j);
    /* an Ibarrier tested to completion */
    MPI_Request br;
    int flag = 0;
    CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &br));
    while (!flag)
        CHECK_MPI(MPI_Test(&br, &flag, MPI_STATUS_IGNORE));
    free(a);
    free(b);
    free(g);
}

#if MPI_VERSION >= 4
/* A persistent request started several times, its buffers changing between starts. */
static void restart(void)
{
    int c = 300, *s = tu_ints(c, 0), *r = tu_ints(c, 0);
    MPI_Request rq[2];
    CHECK_MPI(MPI_Allreduce_init(s, r, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                                 &rq[0]));
    CHECK_MPI(MPI_Bcast_init(s, c, MPI_INT, np - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < c; i++)
            s[i] = val(me, i) + round;
        CHECK_MPI(MPI_Start(&rq[0]));
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        for (int i = 0; i < c; i++)
            CHECK_EQ(r[i], sum_upto(i, np - 1) + (long long)round * np);
        CHECK_MPI(MPI_Start(&rq[1]));
        CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        for (int i = 0; i < c; i++)
            CHECK_EQ(s[i], val(np - 1, i) + round);
    }
    CHECK_MPI(MPI_Request_free(&rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[1]));
    free(s);
    free(r);
}
#endif

int main(int argc, char **argv)
{
    static const int counts[] = {0, 1, 7, 1000, 40000};
    tu_init(&argc, &argv);
    np = tu_size;
    me = tu_rank;
    tu_coll_form(argc, argv);
    tu_starts = 1; /* the MPI_IN_PLACE calls would combine the first start's results */

    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        int c = counts[k];
#define STEP(call)                                                                        \
    do {                                                                                  \
        TU_LOG("%s count %d\n", #call, c);                                                \
        call;                                                                             \
    } while (0)
        STEP(barrier());
        STEP(bcast(c));
        STEP(reduce(c));
        STEP(allreduce(c));
        STEP(reduce_scatter(c));
        STEP(scan(c));
        STEP(gather(c));
        STEP(scatter(c));
        STEP(allgather(c));
        STEP(alltoall(c));
        STEP(user_ops(c > 5000 ? 5000 : c));
    }
    if (tu_form == TU_NONBLOCKING)
        overlap();
#if MPI_VERSION >= 4
    if (tu_form == TU_PERSISTENT)
        restart();
#endif
    barrier();
    return tu_finish();
}
