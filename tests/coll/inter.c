/*
 * Collectives on intercommunicators (MPI-4.0 6.2.2 and the intercommunicator paragraphs of
 * 6.4-6.11): Barrier, Bcast, Reduce, Allreduce, Reduce_scatter(_block), Gather(v),
 * Scatter(v), Allgather(v), Alltoall(v,w), with results checked element by element.
 *
 * MPI_COMM_WORLD is split in two groups in two ways (halves, the smaller first: 5 ranks give
 * 2 and 3; then rank 0 alone against the rest), and each split is joined by
 * MPI_Intercomm_create. Rooted collectives run with every root of each group: the root passes
 * MPI_ROOT, the rest of its group MPI_PROC_NULL (their buffers must stay untouched), the
 * other group the root's rank. All-to-all collectives move data both ways at once; a
 * non-commutative user operation (the result is the lowest rank's operand) checks that the
 * remote group's contributions are combined in rank order. Then the erroneous calls:
 * MPI_IN_PLACE (not defined on intercommunicators), Scan and Exscan (MPI_ERR_COMM), a root
 * that is neither MPI_ROOT, MPI_PROC_NULL nor a remote rank (MPI_ERR_ROOT).
 *
 * args: blocking | nonblocking | persistent (the form every call uses). Size >= 2.
 */
#include "util.h"

/* The intercommunicator under test and this process's place in it. */
static MPI_Comm ic;
static int grp, lrank, lsize, rsize;

/* Element i contributed by local rank r of group g. */
static int val(int g, int r, int i)
{
    return g * 100003 + r * 1009 + i * 7 + 1;
}

#define FILLER (-77)

/* The root argument of a rooted collective whose root is rank r of group g. */
static int root_arg(int g, int r)
{
    if (g != grp)
        return r;
    return lrank == r ? MPI_ROOT : MPI_PROC_NULL;
}

static void barrier(void)
{
    TU_COLL(MPI_Barrier, MPI_Ibarrier, MPI_Barrier_init, ic);
}

static void bcast(int c)
{
    for (int g = 0; g < 2; g++) {
        int rootsize = g == grp ? lsize : rsize;
        for (int r = 0; r < rootsize; r++) {
            if (r > 0 && tu_form != TU_BLOCKING && tu_quirk("inter_nb_bcast_root"))
                break;
            int arg = root_arg(g, r);
            int *b = tu_ints(c, FILLER);
            if (arg == MPI_ROOT)
                for (int i = 0; i < c; i++)
                    b[i] = val(g, r, i);
            TU_COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, b, c, MPI_INT, arg, ic);
            for (int i = 0; i < c; i++) {
                int want = arg == MPI_PROC_NULL ? FILLER : val(g, r, i);
                CHECK_MSG(b[i] == want, "bcast root %d/%d [%d] = %d, want %d", g, r, i, b[i],
                          want);
            }
            free(b);
        }
    }
    /* A non-contiguous type at the root, contiguous ints at the receivers. */
    if (c > 0) {
        MPI_Datatype vec;
        CHECK_MPI(MPI_Type_vector(c, 1, 2, MPI_INT, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        int arg = root_arg(0, 0);
        int *b = tu_ints(2 * (size_t)c, FILLER);
        if (arg == MPI_ROOT) {
            for (int i = 0; i < c; i++)
                b[2 * i] = val(0, 0, i);
            TU_COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, b, 1, vec, arg, ic);
        } else {
            TU_COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, b, c, MPI_INT, arg, ic);
            if (grp == 1)
                for (int i = 0; i < c; i++)
                    CHECK_EQ(b[i], val(0, 0, i));
        }
        free(b);
        CHECK_MPI(MPI_Type_free(&vec));
    }
}

/* Non-commutative: the result is the lowest rank's operand. */
static void first_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

static void reduce(int c, MPI_Op first)
{
    for (int g = 0; g < 2; g++) {
        int rootsize = g == grp ? lsize : rsize;
        for (int r = 0; r < rootsize; r++) {
            int arg = root_arg(g, r);
            int *s = tu_ints(c, 0), *d = tu_ints(c, FILLER), *f = tu_ints(c, FILLER);
            for (int i = 0; i < c; i++)
                s[i] = val(grp, lrank, i);
            TU_COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, s, d, c, MPI_INT, MPI_SUM, arg, ic);
            TU_COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, s, f, c, MPI_INT, first, arg, ic);
            for (int i = 0; i < c; i++) {
                if (arg == MPI_ROOT) {
                    long want = 0;
                    for (int j = 0; j < rsize; j++)
                        want += val(1 - grp, j, i);
                    CHECK_MSG(d[i] == want, "reduce root %d/%d [%d] = %d, want %ld", g, r, i,
                              d[i], want);
                    CHECK_EQ(f[i], val(1 - grp, 0, i));
                } else {
                    CHECK_EQ(d[i], FILLER);
                    CHECK_EQ(f[i], FILLER);
                }
                CHECK_EQ(s[i], val(grp, lrank, i));
            }
            free(s);
            free(d);
            free(f);
        }
    }
}

static void allreduce(int c, MPI_Op first)
{
    int *s = tu_ints(c, 0), *d = tu_ints(c, FILLER), *f = tu_ints(c, FILLER);
    for (int i = 0; i < c; i++)
        s[i] = val(grp, lrank, i);
    TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, s, d, c, MPI_INT, MPI_SUM, ic);
    TU_COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, s, f, c, MPI_INT, first, ic);
    for (int i = 0; i < c; i++) {
        long want = 0;
        for (int j = 0; j < rsize; j++)
            want += val(1 - grp, j, i);
        CHECK_MSG(d[i] == want, "allreduce [%d] = %d, want %ld", i, d[i], want);
        CHECK_EQ(f[i], val(1 - grp, 0, i));
    }
    free(s);
    free(d);
    free(f);
}

/* Both groups reduce vectors of the same length t = lsize * rsize * k; each group receives
 * the other group's sum, scattered by its own counts. */
static void reduce_scatter(int k)
{
    int t = lsize * rsize * k;
    int *s = tu_ints(t, 0);
    for (int i = 0; i < t; i++)
        s[i] = val(grp, lrank, i);
    int c = rsize * k;
    int *d = tu_ints(c + 1, FILLER);
    TU_COLL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init, s,
            d, c, MPI_INT, MPI_SUM, ic);
    for (int i = 0; i < c; i++) {
        long want = 0;
        for (int j = 0; j < rsize; j++)
            want += val(1 - grp, j, lrank * c + i);
        CHECK_MSG(d[i] == want, "reduce_scatter_block [%d] = %d, want %ld", i, d[i], want);
    }
    CHECK_EQ(d[c], FILLER);
    free(d);
    /* Uneven counts: local rank 0 gets nothing, the last rank gets its share too. */
    int *counts = tu_ints(lsize, c);
    if (lsize > 1) {
        counts[0] = 0;
        counts[lsize - 1] += c;
    }
    int off = 0;
    for (int i = 0; i < lrank; i++)
        off += counts[i];
    d = tu_ints(counts[lrank] + 1, FILLER);
    TU_COLL(MPI_Reduce_scatter, MPI_Ireduce_scatter, MPI_Reduce_scatter_init, s, d, counts, MPI_INT,
            MPI_SUM, ic);
    for (int i = 0; i < counts[lrank]; i++) {
        long want = 0;
        for (int j = 0; j < rsize; j++)
            want += val(1 - grp, j, off + i);
        CHECK_MSG(d[i] == want, "reduce_scatter [%d] = %d, want %ld", i, d[i], want);
    }
    CHECK_EQ(d[counts[lrank]], FILLER);
    free(d);
    free(counts);
    free(s);
}

/* Count of rank i's block in the v forms: varies with i, 0 for some. */
static int vcount(int c, int i)
{
    return c == 0 ? 0 : (c + i) % (c + 2);
}

static void gather(int c)
{
    for (int g = 0; g < 2; g++) {
        int rootsize = g == grp ? lsize : rsize;
        for (int r = 0; r < rootsize; r++) {
            int arg = root_arg(g, r);
            int *s = tu_ints(c + 1, 0);
            for (int i = 0; i <= c; i++)
                s[i] = val(grp, lrank, i);
            int *d = tu_ints((size_t)c * rsize + 1, FILLER);
            TU_COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, s, c, MPI_INT, d, c, MPI_INT, arg,
                    ic);
            if (arg == MPI_ROOT) {
                for (int j = 0; j < rsize; j++)
                    for (int i = 0; i < c; i++)
                        CHECK_MSG(d[j * c + i] == val(1 - grp, j, i),
                                  "gather root %d/%d from %d [%d] = %d", g, r, j, i, d[j * c + i]);
            } else {
                for (int i = 0; i < c * rsize; i++)
                    CHECK_EQ(d[i], FILLER);
            }
            CHECK_EQ(d[c * rsize], FILLER);
            free(d);

            /* Gatherv: block j has vcount(c, j) elements, stored in reverse rank order with a
             * gap of one element between blocks. */
            int total = 0;
            int *counts = tu_ints(rsize, 0), *displs = tu_ints(rsize, 0);
            for (int j = 0; j < rsize; j++)
                total += vcount(c, j) + 1;
            int pos = total;
            for (int j = 0; j < rsize; j++) {
                counts[j] = vcount(c, j);
                pos -= counts[j] + 1;
                displs[j] = pos;
            }
            d = tu_ints(total, FILLER);
            int mine = g == grp ? 0 : vcount(c, lrank);
            TU_COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, s, mine, MPI_INT, d, counts,
                    displs, MPI_INT, arg, ic);
            if (arg == MPI_ROOT) {
                for (int j = 0; j < rsize; j++) {
                    for (int i = 0; i < counts[j]; i++)
                        CHECK_EQ(d[displs[j] + i], val(1 - grp, j, i));
                    CHECK_EQ(d[displs[j] + counts[j]], FILLER);
                }
            } else {
                for (int i = 0; i < total; i++)
                    CHECK_EQ(d[i], FILLER);
            }
            free(d);
            free(counts);
            free(displs);
            free(s);
        }
    }
}

static void scatter(int c)
{
    for (int g = 0; g < 2; g++) {
        int rootsize = g == grp ? lsize : rsize;
        for (int r = 0; r < rootsize; r++) {
            int arg = root_arg(g, r);
            int *s = tu_ints((size_t)c * rsize + 1, 0);
            if (arg == MPI_ROOT)
                for (int i = 0; i < c * rsize; i++)
                    s[i] = val(grp, lrank, i);
            int *d = tu_ints(c + 1, FILLER);
            TU_COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, s, c, MPI_INT, d, c, MPI_INT, arg,
                    ic);
            for (int i = 0; i < c; i++) {
                int want = g == grp ? FILLER : val(g, r, lrank * c + i);
                CHECK_MSG(d[i] == want, "scatter root %d/%d [%d] = %d, want %d", g, r, i, d[i],
                          want);
            }
            CHECK_EQ(d[c], FILLER);
            free(d);
            free(s);

            /* Scatterv: block j has vcount(c, j) elements at displacement 2 * j * (c + 1). */
            int *counts = tu_ints(rsize, 0), *displs = tu_ints(rsize, 0);
            for (int j = 0; j < rsize; j++) {
                counts[j] = vcount(c, j);
                displs[j] = 2 * j * (c + 1);
            }
            size_t slen = (size_t)2 * rsize * (c + 1);
            s = tu_ints(slen, 0);
            if (arg == MPI_ROOT)
                for (size_t i = 0; i < slen; i++)
                    s[i] = val(grp, lrank, (int)i);
            int mine = g == grp ? 0 : vcount(c, lrank);
            d = tu_ints(mine + 1, FILLER);
            TU_COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, s, counts, displs, MPI_INT, d,
                    mine, MPI_INT, arg, ic);
            for (int i = 0; i < mine; i++)
                CHECK_EQ(d[i], val(g, r, 2 * lrank * (c + 1) + i));
            CHECK_EQ(d[mine], FILLER);
            free(d);
            free(s);
            free(counts);
            free(displs);
        }
    }
}

static void allgather(int c)
{
    int *s = tu_ints(c + 1, 0);
    for (int i = 0; i <= c; i++)
        s[i] = val(grp, lrank, i);
    int *d = tu_ints((size_t)c * rsize + 1, FILLER);
    TU_COLL(MPI_Allgather, MPI_Iallgather, MPI_Allgather_init, s, c, MPI_INT, d, c, MPI_INT, ic);
    for (int j = 0; j < rsize; j++)
        for (int i = 0; i < c; i++)
            CHECK_MSG(d[j * c + i] == val(1 - grp, j, i), "allgather from %d [%d] = %d", j, i,
                      d[j * c + i]);
    CHECK_EQ(d[c * rsize], FILLER);
    free(d);

    /* Allgatherv: remote rank j sends vcount(c, j) elements; blocks in reverse order. */
    int *counts = tu_ints(rsize, 0), *displs = tu_ints(rsize, 0);
    int total = 0;
    for (int j = 0; j < rsize; j++) {
        counts[j] = vcount(c, j);
        total += counts[j] + 1;
    }
    int pos = total;
    for (int j = 0; j < rsize; j++) {
        pos -= counts[j] + 1;
        displs[j] = pos;
    }
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Allgatherv, MPI_Iallgatherv, MPI_Allgatherv_init, s, vcount(c, lrank), MPI_INT, d,
            counts, displs, MPI_INT, ic);
    for (int j = 0; j < rsize; j++) {
        for (int i = 0; i < counts[j]; i++)
            CHECK_EQ(d[displs[j] + i], val(1 - grp, j, i));
        CHECK_EQ(d[displs[j] + counts[j]], FILLER);
    }
    free(d);
    free(counts);
    free(displs);
    free(s);
}

/* Element i of the block local rank r of group g sends to remote rank j. */
static int aval(int g, int r, int j, int i)
{
    return val(g, r, i) + 31 * j;
}

static void alltoall(int c)
{
    int *s = tu_ints((size_t)c * rsize + 1, 0);
    for (int j = 0; j < rsize; j++)
        for (int i = 0; i < c; i++)
            s[j * c + i] = aval(grp, lrank, j, i);
    int *d = tu_ints((size_t)c * rsize + 1, FILLER);
    TU_COLL(MPI_Alltoall, MPI_Ialltoall, MPI_Alltoall_init, s, c, MPI_INT, d, c, MPI_INT, ic);
    for (int j = 0; j < rsize; j++)
        for (int i = 0; i < c; i++)
            CHECK_MSG(d[j * c + i] == aval(1 - grp, j, lrank, i), "alltoall from %d [%d] = %d",
                      j, i, d[j * c + i]);
    CHECK_EQ(d[c * rsize], FILLER);
    free(d);
    free(s);

    /* Alltoallv: to remote j, vcount(c, lrank + j) elements (the receiver computes the same
     * from its side); send blocks at 2 * j * (c + 1), receive blocks in reverse order. */
    int *sc = tu_ints(rsize, 0), *sd = tu_ints(rsize, 0);
    int *rc = tu_ints(rsize, 0), *rd = tu_ints(rsize, 0);
    int total = 0;
    for (int j = 0; j < rsize; j++) {
        sc[j] = vcount(c, lrank + j);
        sd[j] = 2 * j * (c + 1);
        rc[j] = vcount(c, j + lrank);
        total += rc[j] + 1;
    }
    int pos = total;
    for (int j = 0; j < rsize; j++) {
        pos -= rc[j] + 1;
        rd[j] = pos;
    }
    s = tu_ints((size_t)2 * rsize * (c + 1), 0);
    for (int j = 0; j < rsize; j++)
        for (int i = 0; i < sc[j]; i++)
            s[sd[j] + i] = aval(grp, lrank, j, i);
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Alltoallv, MPI_Ialltoallv, MPI_Alltoallv_init, s, sc, sd, MPI_INT, d, rc, rd,
            MPI_INT, ic);
    for (int j = 0; j < rsize; j++) {
        for (int i = 0; i < rc[j]; i++)
            CHECK_EQ(d[rd[j] + i], aval(1 - grp, j, lrank, i));
        CHECK_EQ(d[rd[j] + rc[j]], FILLER);
    }

    /* Alltoallw: the same layout in bytes, blocks of remote rank 0 received as one
     * contiguous type, the others as ints. */
    MPI_Datatype *st = malloc(rsize * sizeof *st), *rt = malloc(rsize * sizeof *rt);
    MPI_Datatype blk = MPI_DATATYPE_NULL;
    CHECK(st && rt);
    for (int j = 0; j < rsize; j++) {
        sd[j] *= (int)sizeof(int);
        rd[j] *= (int)sizeof(int);
        st[j] = MPI_INT;
        rt[j] = MPI_INT;
    }
    if (rc[0] > 0) {
        CHECK_MPI(MPI_Type_contiguous(rc[0], MPI_INT, &blk));
        CHECK_MPI(MPI_Type_commit(&blk));
        rt[0] = blk;
        rc[0] = 1;
    }
    free(d);
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Alltoallw, MPI_Ialltoallw, MPI_Alltoallw_init, s, sc, sd, st, d, rc, rd, rt, ic);
    for (int j = 0; j < rsize; j++) {
        int n = vcount(c, j + lrank);
        int at = rd[j] / (int)sizeof(int);
        for (int i = 0; i < n; i++)
            CHECK_EQ(d[at + i], aval(1 - grp, j, lrank, i));
        CHECK_EQ(d[at + n], FILLER);
    }
    if (blk != MPI_DATATYPE_NULL)
        CHECK_MPI(MPI_Type_free(&blk));
    free(st);
    free(rt);
    free(d);
    free(s);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void errors(void)
{
    int x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0}, rc, cls;
    CHECK_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    rc = MPI_Scan(x, y, 1, MPI_INT, MPI_SUM, ic);
    CHECK_CLASS(rc, MPI_ERR_COMM);
    if (!tu_quirk("inter_exscan")) {
        rc = MPI_Exscan(x, y, 1, MPI_INT, MPI_SUM, ic);
        CHECK_CLASS(rc, MPI_ERR_COMM);
    }
    /* MPI_IN_PLACE is not defined on intercommunicators: the class is not specified. */
#define CHECK_ERROR(call)                                                                 \
    do {                                                                                  \
        rc = (call);                                                                      \
        CHECK_MSG(rc != MPI_SUCCESS, "%s succeeded", #call);                              \
        MPI_Error_class(rc, &cls);                                                        \
        CHECK_MSG(cls == MPI_ERR_BUFFER || cls == MPI_ERR_ARG, "%s: class %d", #call, cls); \
    } while (0)
    if (!tu_quirk("inter_in_place")) {
        CHECK_ERROR(MPI_Allreduce(MPI_IN_PLACE, y, 1, MPI_INT, MPI_SUM, ic));
        CHECK_ERROR(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y, 1, MPI_INT, ic));
        CHECK_ERROR(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y, 1, MPI_INT, ic));
    }
    /* A root that is not a rank of the remote group. */
    if (!tu_quirk("inter_root")) {
        rc = MPI_Bcast(x, 1, MPI_INT, rsize + 3, ic);
        CHECK_CLASS(rc, MPI_ERR_ROOT);
    }
    /* The intercommunicator still works. */
    int s = lrank + 1, r = -1;
    CHECK_MPI(MPI_Allreduce(&s, &r, 1, MPI_INT, MPI_SUM, ic));
    CHECK_EQ(r, rsize * (rsize + 1) / 2);
    CHECK_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    static const int counts[] = {0, 1, 5, 1000, 20000};
    tu_init(&argc, &argv);
    tu_coll_form(argc, argv);
    if (tu_size < 2)
        return tu_finish();

    MPI_Op first;
    CHECK_MPI(MPI_Op_create(first_op, 0, &first));
    for (int split = 0; split < 2; split++) {
        int na = split == 0 ? tu_size / 2 : 1;
        grp = tu_rank < na ? 0 : 1;
        MPI_Comm local;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, grp, tu_rank, &local));
        CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, grp == 0 ? na : 0, 17 + split,
                                       &ic));
        CHECK_MPI(MPI_Comm_rank(ic, &lrank));
        CHECK_MPI(MPI_Comm_size(ic, &lsize));
        CHECK_MPI(MPI_Comm_remote_size(ic, &rsize));
        CHECK_EQ(lsize, grp == 0 ? na : tu_size - na);
        CHECK_EQ(rsize, tu_size - lsize);

        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            int c = counts[k];
#define STEP(call)                                                                        \
    do {                                                                                  \
        TU_LOG("split %d count %d: %s\n", split, c, #call);                               \
        call;                                                                             \
    } while (0)
            STEP(barrier());
            STEP(bcast(c));
            STEP(reduce(c, first));
            STEP(allreduce(c, first));
            STEP(gather(c));
            if (!(tu_form == TU_PERSISTENT && tu_quirk("inter_persistent_local")))
                STEP(scatter(c));
            STEP(allgather(c));
            STEP(alltoall(c));
            if (c <= 1000 && !(tu_form == TU_PERSISTENT && tu_quirk("inter_persistent_local")))
                STEP(reduce_scatter(c));
        }
        errors();
        barrier();
        CHECK_MPI(MPI_Comm_free(&ic));
        CHECK_MPI(MPI_Comm_free(&local));
    }
    CHECK_MPI(MPI_Op_free(&first));
    return tu_finish();
}
