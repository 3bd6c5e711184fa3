/*
 * Neighbourhood collectives (MPI-4.0 section 8.6): Neighbor_allgather(v) and
 * Neighbor_alltoall(v,w) on Cartesian, graph and distributed-graph topologies, checked
 * element by element.
 *
 * Topologies: a non-periodic line (the end processes have MPI_PROC_NULL neighbours, whose
 * receive blocks must stay untouched); a periodic 2-d grid from MPI_Dims_create (at 2 ranks a
 * dimension of extent 2, where both neighbours are the same process, and one of extent 1,
 * where the process is its own neighbour: the block sent in the +1 direction arrives as the
 * block from the -1 neighbour); a 3-d grid with mixed periods; a symmetric graph (ring plus a
 * star around rank 0); a distributed graph with multiple edges between the same processes and
 * self edges at small sizes (the k-th edge from p to q pairs with the k-th edge into q from
 * p). Then MPI_ERR_TOPOLOGY on a communicator without topology.
 *
 * args: blocking | nonblocking | persistent (the form every call uses). Any size >= 1.
 */
#include "util.h"

#define FILLER (-77)
#define MAXN 64

/* A topology's neighbours as this process sees them, and for each source k the index of the
 * matching block in that source's destination list (-1 for MPI_PROC_NULL). */
struct nbrs {
    const char *name;
    int indeg, outdeg;
    int src[MAXN], dst[MAXN], sidx[MAXN];
    int no_alltoall; /* peer quirk: skip the alltoall checks */
};

static int me, np;

/* Element i of the block that rank r sends at destination index k. */
static int val(int r, int k, int i)
{
    return r * 100003 + k * 1009 + i * 7 + 1;
}

/* Count of the block rank r sends at destination index k (v forms). */
static int vcount(int c, int r, int k)
{
    return c == 0 ? 0 : (c + r + k) % (c + 2);
}

/* Send count of rank r in Neighbor_allgatherv. */
static int gcount(int c, int r)
{
    return c == 0 ? 0 : (c + r) % (c + 2);
}

static void allgather(MPI_Comm comm, const struct nbrs *t, int c)
{
    int *s = tu_ints(c + 1, 0);
    for (int i = 0; i <= c; i++)
        s[i] = val(me, 0, i);
    int *d = tu_ints((size_t)c * t->indeg + 1, FILLER);
    TU_COLL(MPI_Neighbor_allgather, MPI_Ineighbor_allgather, MPI_Neighbor_allgather_init, s, c,
            MPI_INT, d, c, MPI_INT, comm);
    for (int k = 0; k < t->indeg; k++)
        for (int i = 0; i < c; i++) {
            int want = t->src[k] == MPI_PROC_NULL ? FILLER : val(t->src[k], 0, i);
            CHECK_MSG(d[k * c + i] == want, "%s allgather from %d (#%d) [%d] = %d, want %d",
                      t->name, t->src[k], k, i, d[k * c + i], want);
        }
    CHECK_EQ(d[c * t->indeg], FILLER);
    free(d);

    /* v form: blocks in reverse order with a one-element gap. */
    int counts[MAXN], displs[MAXN], total = 0;
    for (int k = 0; k < t->indeg; k++) {
        counts[k] = t->src[k] == MPI_PROC_NULL ? c : gcount(c, t->src[k]);
        total += counts[k] + 1;
    }
    int pos = total;
    for (int k = 0; k < t->indeg; k++) {
        pos -= counts[k] + 1;
        displs[k] = pos;
    }
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init, s,
            gcount(c, me), MPI_INT, d, counts, displs, MPI_INT, comm);
    for (int k = 0; k < t->indeg; k++) {
        for (int i = 0; i < counts[k]; i++) {
            int want = t->src[k] == MPI_PROC_NULL ? FILLER : val(t->src[k], 0, i);
            CHECK_MSG(d[displs[k] + i] == want, "%s allgatherv from #%d [%d] = %d, want %d",
                      t->name, k, i, d[displs[k] + i], want);
        }
        CHECK_EQ(d[displs[k] + counts[k]], FILLER);
    }
    free(d);
    free(s);
}

static void alltoall(MPI_Comm comm, const struct nbrs *t, int c)
{
    int *s = tu_ints((size_t)c * t->outdeg + 1, 0);
    for (int k = 0; k < t->outdeg; k++)
        for (int i = 0; i < c; i++)
            s[k * c + i] = val(me, k, i);
    int *d = tu_ints((size_t)c * t->indeg + 1, FILLER);
    TU_COLL(MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init, s, c,
            MPI_INT, d, c, MPI_INT, comm);
    for (int k = 0; k < t->indeg; k++)
        for (int i = 0; i < c; i++) {
            int want =
                t->src[k] == MPI_PROC_NULL ? FILLER : val(t->src[k], t->sidx[k], i);
            CHECK_MSG(d[k * c + i] == want, "%s alltoall from %d (#%d) [%d] = %d, want %d",
                      t->name, t->src[k], k, i, d[k * c + i], want);
        }
    CHECK_EQ(d[c * t->indeg], FILLER);
    free(d);
    free(s);

    /* v form: send block k at 2k(c+1), receive blocks in reverse order with a gap. */
    int sc[MAXN], sd[MAXN], rc[MAXN], rd[MAXN], total = 0;
    for (int k = 0; k < t->outdeg; k++) {
        sc[k] = vcount(c, me, k);
        sd[k] = 2 * k * (c + 1);
    }
    for (int k = 0; k < t->indeg; k++) {
        rc[k] = t->src[k] == MPI_PROC_NULL ? c : vcount(c, t->src[k], t->sidx[k]);
        total += rc[k] + 1;
    }
    int pos = total;
    for (int k = 0; k < t->indeg; k++) {
        pos -= rc[k] + 1;
        rd[k] = pos;
    }
    s = tu_ints((size_t)2 * (t->outdeg + 1) * (c + 1), 0);
    for (int k = 0; k < t->outdeg; k++)
        for (int i = 0; i < sc[k]; i++)
            s[sd[k] + i] = val(me, k, i);
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init, s, sc,
            sd, MPI_INT, d, rc, rd, MPI_INT, comm);
    for (int k = 0; k < t->indeg; k++) {
        for (int i = 0; i < rc[k]; i++) {
            int want =
                t->src[k] == MPI_PROC_NULL ? FILLER : val(t->src[k], t->sidx[k], i);
            CHECK_MSG(d[rd[k] + i] == want, "%s alltoallv from #%d [%d] = %d, want %d",
                      t->name, k, i, d[rd[k] + i], want);
        }
        CHECK_EQ(d[rd[k] + rc[k]], FILLER);
    }
    free(d);

    /* w form: the same in bytes, MPI_INT blocks. */
    MPI_Aint sdb[MAXN], rdb[MAXN];
    MPI_Datatype st[MAXN], rt[MAXN];
    for (int k = 0; k < t->outdeg; k++) {
        sdb[k] = (MPI_Aint)sd[k] * (MPI_Aint)sizeof(int);
        st[k] = MPI_INT;
    }
    for (int k = 0; k < t->indeg; k++) {
        rdb[k] = (MPI_Aint)rd[k] * (MPI_Aint)sizeof(int);
        rt[k] = MPI_INT;
    }
    d = tu_ints(total, FILLER);
    TU_COLL(MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init, s, sc,
            sdb, st, d, rc, rdb, rt, comm);
    for (int k = 0; k < t->indeg; k++) {
        for (int i = 0; i < rc[k]; i++) {
            int want =
                t->src[k] == MPI_PROC_NULL ? FILLER : val(t->src[k], t->sidx[k], i);
            CHECK_MSG(d[rd[k] + i] == want, "%s alltoallw from #%d [%d] = %d, want %d",
                      t->name, k, i, d[rd[k] + i], want);
        }
        CHECK_EQ(d[rd[k] + rc[k]], FILLER);
    }
    free(d);
    free(s);
}

static void run(MPI_Comm comm, const struct nbrs *t)
{
    static const int counts[] = {0, 1, 5, 3000};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        TU_LOG("%s count %d\n", t->name, counts[i]);
        allgather(comm, t, counts[i]);
        if (!t->no_alltoall)
            alltoall(comm, t, counts[i]);
    }
}

static void cart(const char *name, int ndims, const int *periods)
{
    int dims[3] = {0, 0, 0};
    MPI_Comm comm;
    struct nbrs t;
    CHECK_MPI(MPI_Dims_create(np, ndims, dims));
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &comm));
    t.name = name;
    t.no_alltoall = 0;
    for (int d = 0; d < ndims; d++)
        if (periods[d] && dims[d] <= 2 && tu_quirk("cart_short_periodic"))
            t.no_alltoall = 1;
    t.indeg = t.outdeg = 2 * ndims;
    for (int d = 0; d < ndims; d++) {
        CHECK_MPI(MPI_Cart_shift(comm, d, 1, &t.src[2 * d], &t.src[2 * d + 1]));
        t.dst[2 * d] = t.src[2 * d];
        t.dst[2 * d + 1] = t.src[2 * d + 1];
    }
    /* The block from the -1 neighbour is the one it sent in its +1 direction. */
    for (int k = 0; k < t.indeg; k++)
        t.sidx[k] = t.src[k] == MPI_PROC_NULL ? -1 : k ^ 1;
    run(comm, &t);
    CHECK_MPI(MPI_Comm_free(&comm));
}

/* Symmetric graph: ring plus a star around rank 0; neighbours in descending order. */
static int adjacent(int i, int j)
{
    if (i == j)
        return 0;
    return i == 0 || j == 0 || (j - i + np) % np == 1 || (i - j + np) % np == 1;
}

static void graph(void)
{
    int index[MAXN], edges[MAXN * MAXN], ne = 0;
    struct nbrs t;
    MPI_Comm comm;
    CHECK(np <= MAXN);
    for (int i = 0; i < np; i++) {
        for (int j = np - 1; j >= 0; j--)
            if (adjacent(i, j))
                edges[ne++] = j;
        index[i] = ne;
    }
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, np, index, edges, 0, &comm));
    t.name = "graph";
    t.no_alltoall = 0;
    CHECK_MPI(MPI_Graph_neighbors_count(comm, me, &t.indeg));
    t.outdeg = t.indeg;
    CHECK_MPI(MPI_Graph_neighbors(comm, me, MAXN, t.src));
    memcpy(t.dst, t.src, sizeof t.src);
    for (int k = 0; k < t.indeg; k++) {
        int nb[MAXN], n;
        CHECK_MPI(MPI_Graph_neighbors_count(comm, t.src[k], &n));
        CHECK_MPI(MPI_Graph_neighbors(comm, t.src[k], MAXN, nb));
        t.sidx[k] = -1;
        for (int j = 0; j < n; j++)
            if (nb[j] == me)
                t.sidx[k] = j;
        CHECK(t.sidx[k] >= 0);
    }
    run(comm, &t);
    CHECK_MPI(MPI_Comm_free(&comm));
}

/* Distributed graph: r sends to r+1, r+2, r+1 (a double edge; self edges when np <= 2). */
static void dests_of(int r, int *d)
{
    d[0] = (r + 1) % np;
    d[1] = (r + 2) % np;
    d[2] = (r + 1) % np;
}

static void dist_graph(void)
{
    struct nbrs t;
    MPI_Comm comm;
    t.name = "dist_graph";
    t.no_alltoall = tu_quirk("multi_edge_order");
    t.outdeg = 3;
    dests_of(me, t.dst);
    /* Sources: every (r, k) with dests_of(r)[k] == me, ordered by r then k, listed in the
     * order r-1, r-2, ... (the k-th edge from p pairs with the k-th entry p here). */
    t.indeg = 0;
    for (int back = 1; back <= np; back++) {
        int r = (me - back + np) % np, d[3];
        dests_of(r, d);
        for (int k = 0; k < 3; k++)
            if (d[k] == me) {
                t.src[t.indeg] = r;
                t.sidx[t.indeg] = k;
                t.indeg++;
            }
    }
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, t.indeg, t.src, MPI_UNWEIGHTED,
                                             t.outdeg, t.dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                             &comm));
    int indeg, outdeg, weighted;
    CHECK_MPI(MPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &weighted));
    CHECK_EQ(indeg, t.indeg);
    CHECK_EQ(outdeg, t.outdeg);
    run(comm, &t);
    CHECK_MPI(MPI_Comm_free(&comm));
}

static void errors(void)
{
    int x = 1, y[4], rc;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* Peer quirk: another class than MPI_ERR_TOPOLOGY (still an error). */
    int any = tu_quirk("no_topology_class");
#define CHECK_TOPO(rc)                                                                    \
    do {                                                                                  \
        if (any)                                                                          \
            CHECK((rc) != MPI_SUCCESS);                                                   \
        else                                                                              \
            CHECK_CLASS(rc, MPI_ERR_TOPOLOGY);                                            \
    } while (0)
    rc = MPI_Neighbor_allgather(&x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD);
    CHECK_TOPO(rc);
    rc = MPI_Neighbor_alltoall(&x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD);
    CHECK_TOPO(rc);
    MPI_Request rq;
    rc = MPI_Ineighbor_allgather(&x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD, &rq);
    CHECK_TOPO(rc);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    static const int line[1] = {0}, torus[2] = {1, 1}, mixed[3] = {1, 0, 1};
    tu_init(&argc, &argv);
    me = tu_rank;
    np = tu_size;
    CHECK(np <= MAXN);
    tu_coll_form(argc, argv);

    cart("line", 1, line);
    cart("torus", 2, torus);
    cart("mixed", 3, mixed);
    graph();
    dist_graph();
    errors();
    return tu_finish();
}
