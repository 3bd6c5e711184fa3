//! Process topologies (MPI-4.0 chapter 8): Cartesian, graph and distributed-graph
//! communicators and the queries on them. The arithmetic is `protean_core::mpi::topo`; the new
//! communicators come from the communicator-management agreements (a Cartesian or graph
//! communicator is a split of its parent into the first `n` ranks and the rest). Protean never
//! reorders ranks (`reorder` is accepted and ignored: identity is a valid mapping), so
//! MPI_Cart_map and MPI_Graph_map return the calling rank when it takes part.

use protean_core::ids::CommId;
use std::ffi::c_int;

use crate::abi::*;
use crate::comm::{cid, derive_comm, run};
use crate::errors::{bad, ret_with};
use crate::util::{c_fill, c_slice, nonnull};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::cm;
use protean_core::mpi::global::with;
use protean_core::mpi::group::UNDEFINED;
use protean_core::mpi::topo::{self, Topology};

type R<T> = Result<T, MpiError>;

/// Size and rank in the intracommunicator with engine id `id` (topologies need one).
fn intra(id: CommId) -> R<(i32, i32)> {
    with(|e| -> R<(i32, i32)> {
        let c = e.live_comm(id)?;
        if c.is_inter() {
            return Err(bad(
                ErrorClass::Comm,
                "topologies need an intracommunicator, not an intercommunicator",
            ));
        }
        Ok((c.size() as i32, c.rank))
    })?
}

/// The topology of a communicator (an MPI_ERR_TOPOLOGY error when it has none).
fn topology(comm: MPI_Comm) -> R<(Topology, i32, i32)> {
    let id = cid(comm)?;
    with(|e| -> R<(Topology, i32, i32)> {
        let c = e.live_comm(id)?;
        match &c.topo {
            Some(t) => Ok(((**t).clone(), c.rank, c.size() as i32)),
            None => Err(bad(
                ErrorClass::Topology,
                "the communicator has no topology",
            )),
        }
    })?
}

/// A Cartesian topology as the C calls report it: dimensions, periods, this process's
/// coordinates, its rank.
type CartView = (Vec<i32>, Vec<bool>, Vec<i32>, i32);

fn cart(comm: MPI_Comm) -> R<CartView> {
    match topology(comm)? {
        (
            Topology::Cart {
                dims,
                periods,
                coords,
            },
            _,
            size,
        ) => Ok((dims, periods, coords, size)),
        _ => Err(bad(
            ErrorClass::Topology,
            "the communicator has no Cartesian topology",
        )),
    }
}

fn graph(comm: MPI_Comm) -> R<(Vec<i32>, Vec<i32>, i32)> {
    match topology(comm)? {
        (Topology::Graph { index, edges }, _, size) => Ok((index, edges, size)),
        _ => Err(bad(
            ErrorClass::Topology,
            "the communicator has no graph topology",
        )),
    }
}

/// MPI_Comm_split of communicator `id` (this process: `color`, key `rank`), the new
/// communicator carrying topology `t`.
fn split_with(id: CommId, color: i32, rank: i32, t: Topology) -> R<MPI_Comm> {
    run(|e| e.op_split(id, color, rank).map(|s| s.with_topology(t)))
}

/// Split `comm` into its first `n` ranks (with topology `t`) and MPI_COMM_NULL for the rest.
fn create_prefix(id: CommId, n: i32, rank: i32, t: Topology) -> R<MPI_Comm> {
    split_with(id, if rank < n { 0 } else { UNDEFINED }, rank, t)
}

unsafe fn cart_args(
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
) -> R<(Vec<i32>, Vec<bool>)> {
    let d = c_slice(dims, ndims, "dimensions")?.to_vec();
    let p = c_slice(periods, ndims, "periods")?
        .iter()
        .map(|&x| x != 0)
        .collect();
    if let Some((i, v)) = d.iter().enumerate().find(|(_, v)| **v <= 0) {
        return Err(bad(
            ErrorClass::Dims,
            format!("dims[{i}] = {v} is not positive"),
        ));
    }
    Ok((d, p))
}

/// # Safety
/// `dims` and `periods` have `ndims` entries; `comm_cart` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_create(
    comm_old: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    comm_cart: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm_old, comm_cart, "comm_cart", "MPI_Cart_create", |id| {
        let (size, rank) = intra(id)?;
        let (d, p) = cart_args(ndims, dims, periods)?;
        let n = topo::grid_size(&d).filter(|&n| n <= size).ok_or_else(|| {
            bad(
                ErrorClass::Dims,
                format!("a grid of {d:?} needs more processes than the {size} of the communicator"),
            )
        })?;
        let t = Topology::Cart {
            dims: d,
            periods: p,
            coords: Vec::new(),
        };
        Ok(create_prefix(id, n, rank, t)?)
    })
}

/// # Safety
/// `dims`, `periods`, `coords` have room for `maxdims` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_get(
    comm: MPI_Comm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        let (d, p, c, _) = cart(comm)?;
        if maxdims < 0 {
            return Err(bad(ErrorClass::Arg, format!("negative maxdims {maxdims}")));
        }
        let n = d.len().min(maxdims as usize);
        let p: Vec<c_int> = p.iter().map(|&x| x as c_int).collect();
        c_fill(dims, &d[..n], "dimensions")?;
        c_fill(periods, &p[..n], "periods")?;
        c_fill(coords, &c[..n], "coordinates")
    })();
    ret_with(r, comm, "MPI_Cart_get", |_| {})
}

/// # Safety
/// `ndims` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
    let r = nonnull(ndims, "ndims").and_then(|_| cart(comm));
    ret_with(r, comm, "MPI_Cartdim_get", |(d, ..)| {
        *ndims = d.len() as c_int
    })
}

/// # Safety
/// `coords` has one entry per dimension; `rank` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_rank(
    comm: MPI_Comm,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    let r = (|| -> R<i32> {
        nonnull(rank, "rank")?;
        let (d, p, _, _) = cart(comm)?;
        let c = c_slice(coords, d.len() as c_int, "coordinates")?;
        topo::cart_rank(&d, &p, c)
    })();
    ret_with(r, comm, "MPI_Cart_rank", |v| *rank = v)
}

/// # Safety
/// `coords` has room for `maxdims` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_coords(
    comm: MPI_Comm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        let (d, _, _, size) = cart(comm)?;
        if rank < 0 || rank >= size {
            return Err(bad(
                ErrorClass::Rank,
                format!("rank {rank} is out of range for a communicator of size {size}"),
            ));
        }
        if maxdims < d.len() as c_int {
            return Err(bad(
                ErrorClass::Arg,
                format!(
                    "maxdims {maxdims} is smaller than the {} dimensions",
                    d.len()
                ),
            ));
        }
        c_fill(coords, &topo::cart_coords(&d, rank), "coordinates")
    })();
    ret_with(r, comm, "MPI_Cart_coords", |_| {})
}

/// # Safety
/// `rank_source` and `rank_dest` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_shift(
    comm: MPI_Comm,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    let r = (|| -> R<(i32, i32)> {
        nonnull(rank_source, "rank_source")?;
        nonnull(rank_dest, "rank_dest")?;
        let (d, p, c, _) = cart(comm)?;
        if direction < 0 || direction as usize >= d.len() {
            return Err(bad(
                ErrorClass::Arg,
                format!(
                    "direction {direction} is not a dimension of the {}-dimensional grid",
                    d.len()
                ),
            ));
        }
        Ok(topo::cart_shift(&d, &p, &c, direction as usize, disp))
    })();
    ret_with(r, comm, "MPI_Cart_shift", |(s, t)| {
        *rank_source = s;
        *rank_dest = t;
    })
}

/// # Safety
/// `remain_dims` has one entry per dimension; `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_sub(
    comm: MPI_Comm,
    remain_dims: *const c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm, newcomm, "newcomm", "MPI_Cart_sub", |id| {
        let (d, p, c, _) = cart(comm)?;
        let keep = c_slice(remain_dims, d.len() as c_int, "remain_dims")?;
        // Processes that agree on the dropped coordinates form one sub-grid; ranks keep
        // their order, which is row-major order in the kept dimensions.
        let mut color: i64 = 0;
        let (mut sd, mut sp) = (Vec::new(), Vec::new());
        for i in 0..d.len() {
            if keep[i] != 0 {
                sd.push(d[i]);
                sp.push(p[i]);
            } else {
                color = color * d[i] as i64 + c[i] as i64;
            }
        }
        let rank = with(|e| e.live_comm(id).map(|c| c.rank))??;
        let t = Topology::Cart {
            dims: sd,
            periods: sp,
            coords: Vec::new(),
        };
        Ok(split_with(id, color as i32, rank, t)?)
    })
}

/// # Safety
/// `dims` and `periods` have `ndims` entries; `newrank` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cart_map(
    comm: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let r = (|| -> R<i32> {
        nonnull(newrank, "newrank")?;
        let (size, rank) = intra(cid(comm)?)?;
        let (d, _) = cart_args(ndims, dims, periods)?;
        let n = topo::grid_size(&d).filter(|&n| n <= size).ok_or_else(|| {
            bad(
                ErrorClass::Dims,
                format!("a grid of {d:?} needs more than {size} processes"),
            )
        })?;
        Ok(if rank < n { rank } else { UNDEFINED })
    })();
    ret_with(r, comm, "MPI_Cart_map", |v| *newrank = v)
}

/// Check a graph description against the communicator size.
fn check_graph(nnodes: i32, index: &[i32], size: i32) -> R<()> {
    if nnodes > size {
        return Err(bad(
            ErrorClass::Arg,
            format!("a graph of {nnodes} nodes needs more than the {size} processes of the communicator"),
        ));
    }
    let mut prev = 0;
    for (i, &x) in index.iter().enumerate() {
        if x < prev {
            return Err(bad(
                ErrorClass::Arg,
                format!("index[{i}] = {x} is smaller than the previous entry {prev}"),
            ));
        }
        prev = x;
    }
    Ok(())
}

unsafe fn graph_args(
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
) -> R<(Vec<i32>, Vec<i32>)> {
    if nnodes < 0 {
        return Err(bad(
            ErrorClass::Arg,
            format!("negative number of nodes {nnodes}"),
        ));
    }
    let idx = c_slice(index, nnodes, "index entries")?.to_vec();
    let nedges = idx.last().copied().unwrap_or(0);
    let e = c_slice(edges, nedges, "edges")?.to_vec();
    if let Some((i, v)) = e.iter().enumerate().find(|(_, v)| **v < 0 || **v >= nnodes) {
        return Err(bad(
            ErrorClass::Rank,
            format!("edges[{i}] = {v} is not a node of a graph of {nnodes} nodes"),
        ));
    }
    Ok((idx, e))
}

/// # Safety
/// `index` has `nnodes` entries, `edges` `index[nnodes-1]`; `comm_graph` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graph_create(
    comm_old: MPI_Comm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    comm_graph: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Graph_create";
    derive_comm(comm_old, comm_graph, "comm_graph", func, |id| {
        let (size, rank) = intra(id)?;
        let (idx, e) = graph_args(nnodes, index, edges)?;
        check_graph(nnodes, &idx, size)?;
        let t = Topology::Graph {
            index: idx,
            edges: e,
        };
        Ok(create_prefix(id, nnodes, rank, t)?)
    })
}

/// # Safety
/// `nnodes` and `nedges` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graphdims_get(
    comm: MPI_Comm,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    let r = nonnull(nnodes, "nnodes")
        .and_then(|_| nonnull(nedges, "nedges"))
        .and_then(|_| graph(comm));
    ret_with(r, comm, "MPI_Graphdims_get", |(i, e, _)| {
        *nnodes = i.len() as c_int;
        *nedges = e.len() as c_int;
    })
}

/// # Safety
/// `index` has room for `maxindex`, `edges` for `maxedges` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graph_get(
    comm: MPI_Comm,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        let (i, e, _) = graph(comm)?;
        if maxindex < 0 || maxedges < 0 {
            return Err(bad(ErrorClass::Arg, "negative maxindex or maxedges"));
        }
        c_fill(index, &i[..i.len().min(maxindex as usize)], "index entries")?;
        c_fill(edges, &e[..e.len().min(maxedges as usize)], "edges")
    })();
    ret_with(r, comm, "MPI_Graph_get", |_| {})
}

fn graph_neighbors_of(comm: MPI_Comm, rank: c_int) -> R<Vec<i32>> {
    let (i, e, size) = graph(comm)?;
    if rank < 0 || rank >= size {
        return Err(bad(
            ErrorClass::Rank,
            format!("rank {rank} is out of range for a communicator of size {size}"),
        ));
    }
    Ok(Topology::graph_neighbors(&i, &e, rank).to_vec())
}

/// # Safety
/// `nneighbors` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graph_neighbors_count(
    comm: MPI_Comm,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    let r = nonnull(nneighbors, "nneighbors").and_then(|_| graph_neighbors_of(comm, rank));
    ret_with(r, comm, "MPI_Graph_neighbors_count", |v| {
        *nneighbors = v.len() as c_int
    })
}

/// # Safety
/// `neighbors` has room for `maxneighbors` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graph_neighbors(
    comm: MPI_Comm,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        let v = graph_neighbors_of(comm, rank)?;
        if maxneighbors < 0 {
            return Err(bad(ErrorClass::Arg, "negative maxneighbors"));
        }
        c_fill(
            neighbors,
            &v[..v.len().min(maxneighbors as usize)],
            "neighbors",
        )
    })();
    ret_with(r, comm, "MPI_Graph_neighbors", |_| {})
}

/// # Safety
/// `index` has `nnodes` entries, `edges` `index[nnodes-1]`; `newrank` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Graph_map(
    comm: MPI_Comm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let r = (|| -> R<i32> {
        nonnull(newrank, "newrank")?;
        let (size, rank) = intra(cid(comm)?)?;
        let (idx, _) = graph_args(nnodes, index, edges)?;
        check_graph(nnodes, &idx, size)?;
        Ok(if rank < nnodes { rank } else { UNDEFINED })
    })();
    ret_with(r, comm, "MPI_Graph_map", |v| *newrank = v)
}

/// Weights of a distributed-graph argument: None for MPI_UNWEIGHTED, empty for
/// MPI_WEIGHTS_EMPTY (degree 0 only).
unsafe fn weights(p: *const c_int, n: c_int, what: &str) -> R<Option<Vec<i32>>> {
    if std::ptr::eq(p, MPI_UNWEIGHTED) {
        return Ok(None);
    }
    if std::ptr::eq(p, MPI_WEIGHTS_EMPTY) {
        if n > 0 {
            return Err(bad(
                ErrorClass::Arg,
                format!("MPI_WEIGHTS_EMPTY given for {n} {what}"),
            ));
        }
        return Ok(Some(Vec::new()));
    }
    Ok(Some(c_slice(p, n, what)?.to_vec()))
}

fn check_ranks(v: &[i32], size: i32, what: &str) -> R<()> {
    match v.iter().enumerate().find(|(_, r)| **r < 0 || **r >= size) {
        Some((i, r)) => Err(bad(
            ErrorClass::Rank,
            format!("{what}[{i}] = {r} is out of range for a communicator of size {size}"),
        )),
        None => Ok(()),
    }
}

/// A duplicate of `id` carrying topology `t` (an agreement over every process).
fn create_with(id: CommId, rank: i32, t: Topology) -> R<MPI_Comm> {
    split_with(id, 0, rank, t)
}

/// # Safety
/// Arrays have the given degrees; `comm_dist_graph` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Dist_graph_create_adjacent(
    comm_old: MPI_Comm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    _info: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Dist_graph_create_adjacent";
    derive_comm(comm_old, comm_dist_graph, "comm_dist_graph", func, |id| {
        let (size, rank) = intra(id)?;
        let s = c_slice(sources, indegree, "sources")?.to_vec();
        let d = c_slice(destinations, outdegree, "destinations")?.to_vec();
        check_ranks(&s, size, "sources")?;
        check_ranks(&d, size, "destinations")?;
        let sw = weights(sourceweights, indegree, "sources")?;
        let dw = weights(destweights, outdegree, "destinations")?;
        // Weighted unless MPI_UNWEIGHTED was given (for both lists).
        let (sw, dw) = match (sw, dw) {
            (None, None) => (None, None),
            (a, b) => (
                Some(a.unwrap_or_else(|| vec![1; s.len()])),
                Some(b.unwrap_or_else(|| vec![1; d.len()])),
            ),
        };
        let t = Topology::DistGraph {
            sources: s,
            destinations: d,
            source_weights: sw,
            dest_weights: dw,
        };
        Ok(create_with(id, rank, t)?)
    })
}

fn put_i32s(w: &mut Vec<u8>, v: &[i32]) {
    for x in v {
        w.extend_from_slice(&x.to_le_bytes());
    }
}

fn get_i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// # Safety
/// `sources` and `degrees` have `n` entries, `destinations` (and `weights`) the sum of the
/// degrees; `comm_dist_graph` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_: *const c_int,
    _info: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Dist_graph_create";
    derive_comm(comm_old, comm_dist_graph, "comm_dist_graph", func, |id| {
        let (size, rank) = intra(id)?;
        let src = c_slice(sources, n, "sources")?;
        let deg = c_slice(degrees, n, "degrees")?;
        check_ranks(src, size, "sources")?;
        if let Some((i, d)) = deg.iter().enumerate().find(|(_, d)| **d < 0) {
            return Err(bad(ErrorClass::Arg, format!("degrees[{i}] = {d} is negative")).into());
        }
        let total: i64 = deg.iter().map(|&d| d as i64).sum();
        let total = c_int::try_from(total).map_err(|_| bad(ErrorClass::Arg, "too many edges"))?;
        let dst = c_slice(destinations, total, "destinations")?;
        check_ranks(dst, size, "destinations")?;
        let w = weights(weights_, total, "edges")?;
        // Route every edge s -> d (weight w) to both ends: d learns an incoming edge, s an
        // outgoing one. Each message is a list of (kind, peer, weight).
        let mut parts: Vec<Vec<u8>> = vec![Vec::new(); size as usize];
        let mut k = 0usize;
        for (i, &s) in src.iter().enumerate() {
            for _ in 0..deg[i] {
                let d = dst[k];
                let wt = w.as_ref().map_or(1, |w| w[k]);
                put_i32s(&mut parts[d as usize], &[0, s, wt]);
                put_i32s(&mut parts[s as usize], &[1, d, wt]);
                k += 1;
            }
        }
        // The new communicator first (same group), then the exchange inside it.
        let placeholder = Topology::DistGraph {
            sources: Vec::new(),
            destinations: Vec::new(),
            source_weights: None,
            dest_weights: None,
        };
        let h = create_with(id, rank, placeholder)?;
        let new = crate::handles::comm_id(h).expect("a communicator");
        let got = cm::exchange_all(new, parts)?;
        let (mut s, mut sw, mut d, mut dw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for part in got {
            for t in get_i32s(&part).chunks_exact(3) {
                if t[0] == 0 {
                    s.push(t[1]);
                    sw.push(t[2]);
                } else {
                    d.push(t[1]);
                    dw.push(t[2]);
                }
            }
        }
        let weighted = w.is_some();
        with(|e| {
            if let Ok(c) = e.comm_mut(new) {
                c.topo = Some(Box::new(Topology::DistGraph {
                    sources: s,
                    destinations: d,
                    source_weights: weighted.then_some(sw),
                    dest_weights: weighted.then_some(dw),
                }));
            }
        })?;
        Ok(h)
    })
}

/// A distributed graph as the C calls report it: sources, destinations and their weights
/// (None when unweighted).
type DistGraphView = (Vec<i32>, Vec<i32>, Option<Vec<i32>>, Option<Vec<i32>>);

fn dist_graph(comm: MPI_Comm) -> R<DistGraphView> {
    match topology(comm)? {
        (
            Topology::DistGraph {
                sources,
                destinations,
                source_weights,
                dest_weights,
            },
            ..,
        ) => Ok((sources, destinations, source_weights, dest_weights)),
        _ => Err(bad(
            ErrorClass::Topology,
            "the communicator has no distributed-graph topology",
        )),
    }
}

/// # Safety
/// The outputs are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Dist_graph_neighbors_count(
    comm: MPI_Comm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    let r = (|| -> R<_> {
        nonnull(indegree, "indegree")?;
        nonnull(outdegree, "outdegree")?;
        nonnull(weighted, "weighted")?;
        dist_graph(comm)
    })();
    ret_with(
        r,
        comm,
        "MPI_Dist_graph_neighbors_count",
        |(s, d, sw, _)| {
            *indegree = s.len() as c_int;
            *outdegree = d.len() as c_int;
            *weighted = sw.is_some() as c_int;
        },
    )
}

/// # Safety
/// The arrays have room for the given maxima (weights may be MPI_UNWEIGHTED).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Dist_graph_neighbors(
    comm: MPI_Comm,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        let (s, d, sw, dw) = dist_graph(comm)?;
        if maxindegree < 0 || maxoutdegree < 0 {
            return Err(bad(ErrorClass::Arg, "negative maximum degree"));
        }
        let ni = s.len().min(maxindegree as usize);
        let no = d.len().min(maxoutdegree as usize);
        c_fill(sources, &s[..ni], "sources")?;
        c_fill(destinations, &d[..no], "destinations")?;
        let real = |p: *mut c_int| {
            !p.is_null() && !std::ptr::eq(p, MPI_UNWEIGHTED) && !std::ptr::eq(p, MPI_WEIGHTS_EMPTY)
        };
        if let Some(w) = sw.filter(|_| real(sourceweights)) {
            c_fill(sourceweights, &w[..ni], "source weights")?;
        }
        if let Some(w) = dw.filter(|_| real(destweights)) {
            c_fill(destweights, &w[..no], "destination weights")?;
        }
        Ok(())
    })();
    ret_with(r, comm, "MPI_Dist_graph_neighbors", |_| {})
}

/// # Safety
/// `dims` has `ndims` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Dims_create(
    nnodes: c_int,
    ndims: c_int,
    dims: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        if ndims < 0 {
            return Err(bad(
                ErrorClass::Dims,
                format!("negative number of dimensions {ndims}"),
            ));
        }
        if ndims == 0 {
            return Ok(());
        }
        nonnull(dims, "dims")?;
        let d = std::slice::from_raw_parts_mut(dims, ndims as usize);
        topo::dims_create(nnodes, d)?;
        Ok(())
    })();
    ret_with(r, MPI_COMM_WORLD, "MPI_Dims_create", |_| {})
}

/// # Safety
/// `status` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
    let r = (|| -> R<c_int> {
        nonnull(status, "status")?;
        let id = cid(comm)?;
        with(|e| {
            e.live_comm(id).map(|c| match c.topo.as_deref() {
                Some(Topology::Cart { .. }) => MPI_CART,
                Some(Topology::Graph { .. }) => MPI_GRAPH,
                Some(Topology::DistGraph { .. }) => MPI_DIST_GRAPH,
                None => MPI_UNDEFINED,
            })
        })?
    })();
    ret_with(r, comm, "MPI_Topo_test", |v| *status = v)
}
