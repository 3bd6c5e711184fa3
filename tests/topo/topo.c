/*
 * Process topologies: MPI_Dims_create (free and fixed dimensions, the product, non-increasing
 * order); a 2-D Cartesian grid over all processes, periodic in the first dimension: Topo_test,
 * Cartdim_get, Cart_get, Cart_coords / Cart_rank round trips (with out-of-range coordinates
 * wrapped in the periodic dimension), Cart_shift (MPI_PROC_NULL off the open edge) with halo
 * traffic along the shift; Cart_sub keeping each dimension; Cart_map; a ring as a graph
 * (Graph_create, Graphdims_get, Graph_get, Graph_neighbors(_count)), Graph_map; a
 * distributed graph (Dist_graph_create_adjacent and Dist_graph_create, each process giving
 * its out-edges) with Dist_graph_neighbors(_count) and traffic along the edges; Topo_test of
 * a plain communicator is MPI_UNDEFINED. Any number of processes.
 */
#include "util.h"

int main(int argc, char **argv)
{
    int n, dims[2], periods[2], coords[2], r, i, st, nd;
    MPI_Comm cart, sub, graph, dg;

    tu_init(&argc, &argv);
    n = tu_size;

    /* Dims_create */
    {
        int d3[3] = {0, 0, 0}, d2[2] = {0, 3};
        CHECK_MPI(MPI_Dims_create(12, 3, d3));
        CHECK_EQ(d3[0] * d3[1] * d3[2], 12);
        CHECK(d3[0] >= d3[1] && d3[1] >= d3[2]);
        CHECK_EQ(d3[0], 3);
        CHECK_MPI(MPI_Dims_create(6, 2, d2));
        CHECK_EQ(d2[0], 2);
        CHECK_EQ(d2[1], 3);
    }

    CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK_EQ(st, MPI_UNDEFINED);

    dims[0] = dims[1] = 0;
    CHECK_MPI(MPI_Dims_create(n, 2, dims));
    periods[0] = 1;
    periods[1] = 0;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK(cart != MPI_COMM_NULL);
    CHECK_MPI(MPI_Topo_test(cart, &st));
    CHECK_EQ(st, MPI_CART);
    CHECK_MPI(MPI_Cartdim_get(cart, &nd));
    CHECK_EQ(nd, 2);
    {
        int gd[2], gp[2], gc[2], me;
        CHECK_MPI(MPI_Comm_rank(cart, &me));
        CHECK_MPI(MPI_Cart_get(cart, 2, gd, gp, gc));
        CHECK_EQ(gd[0], dims[0]);
        CHECK_EQ(gd[1], dims[1]);
        CHECK_EQ(gp[0], 1);
        CHECK_EQ(gp[1], 0);
        /* row-major */
        CHECK_EQ(gc[0], me / dims[1]);
        CHECK_EQ(gc[1], me % dims[1]);
        for (r = 0; r < n; r++) {
            int back;
            CHECK_MPI(MPI_Cart_coords(cart, r, 2, coords));
            CHECK_MPI(MPI_Cart_rank(cart, coords, &back));
            CHECK_EQ(back, r);
        }
        /* periodic wrap in dimension 0 */
        coords[0] = gc[0] + dims[0];
        coords[1] = gc[1];
        CHECK_MPI(MPI_Cart_rank(cart, coords, &r));
        CHECK_EQ(r, me);
        coords[0] = -1;
        coords[1] = 0;
        CHECK_MPI(MPI_Cart_rank(cart, coords, &r));
        CHECK_EQ(r, (dims[0] - 1) * dims[1]);

        /* shifts and halo traffic */
        {
            int src, dst, out, in;
            CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &src, &dst));
            CHECK_EQ(src, ((gc[0] + dims[0] - 1) % dims[0]) * dims[1] + gc[1]);
            CHECK_EQ(dst, ((gc[0] + 1) % dims[0]) * dims[1] + gc[1]);
            out = me;
            in = -1;
            CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, dst, 1, &in, 1, MPI_INT, src, 1, cart,
                                   MPI_STATUS_IGNORE));
            CHECK_EQ(in, src);
            CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &src, &dst));
            CHECK_EQ(src, gc[1] == 0 ? MPI_PROC_NULL : me - 1);
            CHECK_EQ(dst, gc[1] == dims[1] - 1 ? MPI_PROC_NULL : me + 1);
            in = -1;
            CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, dst, 2, &in, 1, MPI_INT, src, 2, cart,
                                   MPI_STATUS_IGNORE));
            CHECK_EQ(in, src == MPI_PROC_NULL ? -1 : src);
        }

        /* Cart_sub: keep dimension 1 (the rows), then dimension 0 (the columns). */
        {
            int keep[2] = {0, 1}, ss, sr, sd;
            CHECK_MPI(MPI_Cart_sub(cart, keep, &sub));
            CHECK_MPI(MPI_Comm_size(sub, &ss));
            CHECK_MPI(MPI_Comm_rank(sub, &sr));
            CHECK_EQ(ss, dims[1]);
            CHECK_EQ(sr, gc[1]);
            CHECK_MPI(MPI_Cartdim_get(sub, &sd));
            CHECK_EQ(sd, 1);
            CHECK_MPI(MPI_Comm_free(&sub));
            keep[0] = 1;
            keep[1] = 0;
            CHECK_MPI(MPI_Cart_sub(cart, keep, &sub));
            CHECK_MPI(MPI_Comm_size(sub, &ss));
            CHECK_MPI(MPI_Comm_rank(sub, &sr));
            CHECK_EQ(ss, dims[0]);
            CHECK_EQ(sr, gc[0]);
            {
                int p1[1], d1[1], c1[1];
                CHECK_MPI(MPI_Cart_get(sub, 1, d1, p1, c1));
                CHECK_EQ(p1[0], 1);
            }
            CHECK_MPI(MPI_Comm_free(&sub));
        }
        /* Cart_map: a rank for every process that fits, MPI_UNDEFINED for the rest. */
        {
            int one[1] = {1}, per[1] = {0}, newrank;
            CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, one, per, &newrank));
            if (!tu_quirk("cart_map_undefined"))
                CHECK(newrank == 0 || newrank == MPI_UNDEFINED);
        }
    }
    CHECK_MPI(MPI_Comm_free(&cart));

    /* A grid bigger than the communicator is an error; a smaller one leaves processes out. */
    if (n >= 2) {
        int d1[1] = {n - 1}, p1[1] = {0};
        CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, d1, p1, 0, &cart));
        if (tu_rank == n - 1)
            CHECK(cart == MPI_COMM_NULL);
        else
            CHECK_MPI(MPI_Comm_free(&cart));
    }

    /* Graph: a ring (each node linked to both neighbours; one node: no edges; two: both
     * edges to the same neighbour). */
    {
        int *index = tu_malloc(sizeof(int) * (size_t)n), *edges = tu_malloc(sizeof(int) * 2 * (size_t)n);
        int ne = 0, nn, nedges, cnt, nb[2], gi[64], ge[128];
        for (i = 0; i < n; i++) {
            if (n > 1) {
                edges[ne++] = (i + n - 1) % n;
                edges[ne++] = (i + 1) % n;
            }
            index[i] = ne;
        }
        CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &graph));
        CHECK_MPI(MPI_Topo_test(graph, &st));
        CHECK_EQ(st, MPI_GRAPH);
        CHECK_MPI(MPI_Graphdims_get(graph, &nn, &nedges));
        CHECK_EQ(nn, n);
        CHECK_EQ(nedges, ne);
        if (n <= 64) {
            CHECK_MPI(MPI_Graph_get(graph, 64, 128, gi, ge));
            for (i = 0; i < n; i++)
                CHECK_EQ(gi[i], index[i]);
            for (i = 0; i < ne; i++)
                CHECK_EQ(ge[i], edges[i]);
        }
        CHECK_MPI(MPI_Graph_neighbors_count(graph, tu_rank, &cnt));
        CHECK_EQ(cnt, n > 1 ? 2 : 0);
        if (n > 1) {
            CHECK_MPI(MPI_Graph_neighbors(graph, tu_rank, 2, nb));
            CHECK_EQ(nb[0], (tu_rank + n - 1) % n);
            CHECK_EQ(nb[1], (tu_rank + 1) % n);
        }
        {
            int newrank;
            CHECK_MPI(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &newrank));
            CHECK(newrank >= 0 && newrank < n);
        }
        CHECK_MPI(MPI_Comm_free(&graph));
        free(index);
        free(edges);
    }

    /* Distributed graph, adjacent form: I receive from my left, send to my right. */
    {
        int left = (tu_rank + n - 1) % n, right = (tu_rank + 1) % n, w[1] = {1};
        int indeg, outdeg, weighted, src[1], dst[1], sw[1], dw[1], out = tu_rank, in = -1;
        CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, w, 1, &right, w,
                                                 MPI_INFO_NULL, 0, &dg));
        CHECK_MPI(MPI_Topo_test(dg, &st));
        CHECK_EQ(st, MPI_DIST_GRAPH);
        CHECK_MPI(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
        CHECK_EQ(indeg, 1);
        CHECK_EQ(outdeg, 1);
        CHECK_EQ(weighted, 1);
        CHECK_MPI(MPI_Dist_graph_neighbors(dg, 1, src, sw, 1, dst, dw));
        CHECK_EQ(src[0], left);
        CHECK_EQ(dst[0], right);
        CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, dst[0], 4, &in, 1, MPI_INT, src[0], 4, dg,
                               MPI_STATUS_IGNORE));
        CHECK_EQ(in, left);
        CHECK_MPI(MPI_Comm_free(&dg));
    }

    /* Distributed graph, general form: each process gives the edge from itself to its right
     * neighbour. */
    {
        int right = (tu_rank + 1) % n, deg[1] = {1}, indeg, outdeg, weighted;
        int srcs[4], dsts[4];
        CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &tu_rank, deg, &right,
                                        MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg));
        CHECK_MPI(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
        CHECK_EQ(indeg, 1);
        CHECK_EQ(outdeg, 1);
        CHECK_EQ(weighted, 0);
        CHECK_MPI(MPI_Dist_graph_neighbors(dg, 4, srcs, MPI_UNWEIGHTED, 4, dsts, MPI_UNWEIGHTED));
        CHECK_EQ(srcs[0], (tu_rank + n - 1) % n);
        CHECK_EQ(dsts[0], right);
        CHECK_MPI(MPI_Comm_free(&dg));
    }

    return tu_finish();
}
