//! Process topologies (MPI-4.0 chapter 8): Cartesian grids, general graphs and distributed
//! graphs attached to a communicator, and the arithmetic on them.
//!
//! A topology is stored in [`Comm::topo`](crate::mpi::comm::Comm); it is never read by the
//! point-to-point path. Everything here is local: creating the communicator that carries a
//! topology is done by the communicator-management operations (`mpi::cm`).
//!
//! Invariants: a Cartesian topology's `dims` are all positive and their product is the size of
//! its communicator; `coords` are this process's coordinates (row-major: the last dimension
//! varies fastest, MPI-4.0 8.5.1). A graph's `index` is non-decreasing and `edges` has
//! `index[nnodes-1]` entries, each a rank of the communicator.

use crate::err;
use crate::error::Result;
use crate::ids::CommId;
use crate::mpi::engine::Engine;
use crate::mpi::request::PROC_NULL;

/// A topology attached to a communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    Cart {
        dims: Vec<i32>,
        periods: Vec<bool>,
        /// This process's coordinates.
        coords: Vec<i32>,
    },
    Graph {
        /// `index[i]`: total number of neighbours of nodes 0..=i.
        index: Vec<i32>,
        edges: Vec<i32>,
    },
    DistGraph {
        sources: Vec<i32>,
        destinations: Vec<i32>,
        /// None: MPI_UNWEIGHTED.
        source_weights: Option<Vec<i32>>,
        dest_weights: Option<Vec<i32>>,
    },
}

/// Rank of `coords` in a grid (row-major); coordinates outside a periodic dimension wrap,
/// outside a non-periodic one are an error.
pub fn cart_rank(dims: &[i32], periods: &[bool], coords: &[i32]) -> Result<i32> {
    if coords.len() != dims.len() {
        return err!(
            Arg,
            "{} coordinates given for a grid of {} dimensions",
            coords.len(),
            dims.len()
        );
    }
    let mut rank: i64 = 0;
    for (d, (&n, &c)) in dims.iter().zip(coords).enumerate() {
        let c = if periods[d] {
            c.rem_euclid(n)
        } else if (0..n).contains(&c) {
            c
        } else {
            return err!(
                Arg,
                "coordinate {c} is outside dimension {d} of extent {n} (not periodic)"
            );
        };
        rank = rank * n as i64 + c as i64;
    }
    Ok(rank as i32)
}

/// Coordinates of `rank` in a grid (row-major).
pub fn cart_coords(dims: &[i32], rank: i32) -> Vec<i32> {
    let mut coords = vec![0; dims.len()];
    let mut r = rank;
    for d in (0..dims.len()).rev() {
        coords[d] = r % dims[d];
        r /= dims[d];
    }
    coords
}

/// MPI_Cart_shift: (source, destination) for a shift of `disp` along `dim` from `coords`.
pub fn cart_shift(
    dims: &[i32],
    periods: &[bool],
    coords: &[i32],
    dim: usize,
    disp: i32,
) -> (i32, i32) {
    let at = |delta: i64| -> i32 {
        let mut c = coords.to_vec();
        let n = dims[dim] as i64;
        let v = c[dim] as i64 + delta;
        if periods[dim] {
            c[dim] = v.rem_euclid(n) as i32;
        } else if (0..n).contains(&v) {
            c[dim] = v as i32;
        } else {
            return PROC_NULL;
        }
        cart_rank(dims, periods, &c).expect("coordinates are in range")
    };
    (at(-(disp as i64)), at(disp as i64))
}

/// Product of the dimensions, None when it does not fit an `i32`.
pub fn grid_size(dims: &[i32]) -> Option<i32> {
    dims.iter().try_fold(1i32, |acc, &d| acc.checked_mul(d))
}

/// MPI_Dims_create: fill the zero entries of `dims` so that the product is `nnodes` and the
/// filled dimensions are as close to each other as possible, in non-increasing order.
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> Result<()> {
    if nnodes < 0 {
        return err!(Arg, "negative number of nodes {nnodes}");
    }
    let mut fixed: i64 = 1;
    let mut free = 0;
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 {
            return err!(Dims, "dims[{i}] = {d} is negative");
        }
        if d > 0 {
            fixed *= d as i64;
        } else {
            free += 1;
        }
    }
    if nnodes == 0 {
        // Only dims already all positive make sense with no nodes; zeros stay as they are.
        if free == 0 || fixed == 0 {
            return Ok(());
        }
        return err!(
            Dims,
            "cannot distribute 0 nodes over dimensions that are not fixed"
        );
    }
    if nnodes as i64 % fixed != 0 {
        return err!(
            Dims,
            "{nnodes} nodes cannot be divided by the product {fixed} of the fixed dimensions"
        );
    }
    if free == 0 {
        if fixed != nnodes as i64 {
            return err!(
                Dims,
                "the dimensions multiply to {fixed}, not to the {nnodes} nodes"
            );
        }
        return Ok(());
    }
    let rest = (nnodes as i64 / fixed) as i32;
    let filled = balanced_factors(rest, free);
    let mut it = filled.into_iter();
    for d in dims.iter_mut() {
        if *d == 0 {
            *d = it.next().expect("one factor per free dimension");
        }
    }
    Ok(())
}

/// `k` factors of `n`, as equal as possible, in non-increasing order. "As equal as possible"
/// is read as MPICH reads it (after Träff and Lübbe, "Specification Guideline Violations by
/// MPI_Dims_create", EuroMPI 2015): the smallest difference between the largest and the
/// smallest factor; among splits with the same difference, the one whose smallest factor is
/// largest, then the next smallest, and so on. A program built for MPICH then gets the same
/// grid here as there (Open MPI's greedy split differs from both, e.g. 5040 in 3-D: MPICH and
/// Protean 21 x 16 x 15, Open MPI 20 x 18 x 14).
fn balanced_factors(n: i32, k: usize) -> Vec<i32> {
    let mut divisors: Vec<i32> = Vec::new();
    let mut d = 1i64;
    while d * d <= n as i64 {
        if n as i64 % d == 0 {
            divisors.push(d as i32);
            divisors.push((n as i64 / d) as i32);
        }
        d += 1;
    }
    divisors.sort_unstable();
    divisors.dedup();
    let mut best = None;
    search(n, k, n, &divisors, &mut Vec::with_capacity(k), &mut best);
    best.expect("n, 1, 1, ... is always a solution")
}

/// Smallest `f` with `f^k >= n`.
fn kth_root_ceil(n: i32, k: usize) -> i32 {
    let mut lo = 1i32;
    while (lo as i64)
        .checked_pow(k as u32)
        .is_some_and(|p| p < n as i64)
    {
        lo += 1;
    }
    lo
}

/// Largest `f` with `f^k <= n` (`n` >= 1).
fn kth_root_floor(n: i32, k: usize) -> i32 {
    let c = kth_root_ceil(n, k);
    if (c as i64).pow(k as u32) == n as i64 {
        c
    } else {
        c - 1
    }
}

/// Whether the complete split `a` is better than `b` (both non-increasing, same length): a
/// smaller spread, or the same spread and larger factors when read from the smallest.
fn better_split(a: &[i32], b: &[i32]) -> bool {
    let spread = |v: &[i32]| v[0] - v[v.len() - 1];
    match spread(a).cmp(&spread(b)) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => a.iter().rev().gt(b.iter().rev()),
    }
}

/// Choose `k` more factors of `n` from `divisors`, each at most `cap`, in non-increasing
/// order after `cur`, keeping the best complete split in `best` ([`better_split`]).
fn search(
    n: i32,
    k: usize,
    cap: i32,
    divisors: &[i32],
    cur: &mut Vec<i32>,
    best: &mut Option<Vec<i32>>,
) {
    if k == 0 {
        if n == 1 && best.as_ref().is_none_or(|b| better_split(cur, b)) {
            *best = Some(cur.clone());
        }
        return;
    }
    // The largest remaining factor is at least the k-th root of what is left.
    let lo = kth_root_ceil(n, k);
    for &f in divisors.iter().filter(|&&f| f >= lo && f <= cap.min(n)) {
        if n % f != 0 {
            continue;
        }
        if let Some(b) = best.as_ref() {
            // The smallest factor of the split is at most the (k-1)-th root of what is left
            // after f (or f itself when it is the last), so the spread is at least the
            // largest factor less that; it only grows with f.
            let largest = cur.first().copied().unwrap_or(f);
            let smallest = if k == 1 {
                f
            } else {
                kth_root_floor(n / f, k - 1)
            };
            if largest - smallest > b[0] - b[b.len() - 1] {
                break;
            }
        }
        cur.push(f);
        search(n / f, k - 1, f, divisors, cur, best);
        cur.pop();
    }
}

impl Topology {
    /// The neighbours of `rank` in a graph topology.
    pub fn graph_neighbors<'a>(index: &'a [i32], edges: &'a [i32], rank: i32) -> &'a [i32] {
        let r = rank as usize;
        let start = if r == 0 { 0 } else { index[r - 1] as usize };
        let end = index[r] as usize;
        &edges[start..end]
    }

    /// (sources, destinations) in the order neighbourhood collectives use (MPI-4.0 8.6).
    pub fn neighbors(&self, rank: i32) -> (Vec<i32>, Vec<i32>) {
        match self {
            Topology::Cart {
                dims,
                periods,
                coords,
            } => {
                // For each dimension: the neighbour at -1, then at +1 (the source and the
                // destination of MPI_Cart_shift(dim, 1)); both lists are the same.
                let mut v = Vec::with_capacity(2 * dims.len());
                for d in 0..dims.len() {
                    let (src, dst) = cart_shift(dims, periods, coords, d, 1);
                    v.push(src);
                    v.push(dst);
                }
                (v.clone(), v)
            }
            Topology::Graph { index, edges } => {
                let n = Self::graph_neighbors(index, edges, rank).to_vec();
                (n.clone(), n)
            }
            Topology::DistGraph {
                sources,
                destinations,
                ..
            } => (sources.clone(), destinations.clone()),
        }
    }
}

impl Engine {
    /// The neighbours of this process in the topology of `comm`: (sources, destinations), in
    /// the order of neighbourhood collectives' buffers. MPI_PROC_NULL entries are kept (a
    /// non-periodic Cartesian boundary). Errors when the communicator has no topology.
    pub fn topo_neighbors(&self, comm: CommId) -> Result<(Vec<i32>, Vec<i32>)> {
        let c = self.comm(comm)?;
        match c.topo.as_deref() {
            Some(t) => Ok(t.neighbors(c.rank)),
            None => err!(
                Topology,
                "communicator {} has no topology (create it with MPI_Cart_create, MPI_Graph_create or MPI_Dist_graph_create)",
                c.label()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coords_and_ranks_roundtrip() {
        let dims = [2, 3, 4];
        let periods = [false, true, false];
        for r in 0..24 {
            let c = cart_coords(&dims, r);
            assert_eq!(cart_rank(&dims, &periods, &c).unwrap(), r);
        }
        assert_eq!(cart_coords(&dims, 5), vec![0, 1, 1]);
        // Periodic dimension wraps, non-periodic is an error.
        assert_eq!(cart_rank(&dims, &periods, &[0, -1, 0]).unwrap(), 8);
        assert!(cart_rank(&dims, &periods, &[2, 0, 0]).is_err());
        assert!(cart_rank(&dims, &periods, &[0, 0]).is_err());
    }

    #[test]
    fn shifts_respect_periods() {
        let dims = [4, 2];
        let periods = [false, true];
        let c = cart_coords(&dims, 0);
        assert_eq!(cart_shift(&dims, &periods, &c, 0, 1), (PROC_NULL, 2));
        assert_eq!(cart_shift(&dims, &periods, &c, 1, 1), (1, 1));
        let c = cart_coords(&dims, 6);
        assert_eq!(cart_shift(&dims, &periods, &c, 0, 1), (4, PROC_NULL));
        assert_eq!(cart_shift(&dims, &periods, &c, 0, -2), (PROC_NULL, 2));
        assert_eq!(cart_shift(&dims, &periods, &c, 0, 0), (6, 6));
    }

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        let cases: &[(i32, Vec<i32>, Vec<i32>)] = &[
            (6, vec![0, 0], vec![3, 2]),
            (7, vec![0, 0], vec![7, 1]),
            (6, vec![0, 3, 0], vec![2, 3, 1]),
            (16, vec![0, 0, 0, 0], vec![2, 2, 2, 2]),
            (24, vec![0, 0, 0], vec![4, 3, 2]),
            (1, vec![0, 0, 0], vec![1, 1, 1]),
            (12, vec![0], vec![12]),
            (36, vec![0, 0], vec![6, 6]),
            (64, vec![0, 0, 0], vec![4, 4, 4]),
            (60, vec![0, 0, 0], vec![5, 4, 3]),
            (8, vec![2, 0], vec![2, 4]),
            // MPICH 4.0's answers (the smallest spread, then the largest smallest factor);
            // Open MPI gives 20 x 18 x 14, 24 x 24 x 13 and 30 x 20 x 18.
            (5040, vec![0, 0, 0], vec![21, 16, 15]),
            (7488, vec![0, 0, 0], vec![26, 18, 16]),
            (10800, vec![0, 0, 0], vec![27, 20, 20]),
            (34425, vec![0, 0, 0], vec![51, 27, 25]),
        ];
        for (n, input, want) in cases {
            let mut d = input.clone();
            dims_create(*n, &mut d).unwrap();
            assert_eq!(&d, want, "dims_create({n}, {input:?})");
        }
        let mut d = [0, 0];
        assert!(dims_create(-1, &mut d).is_err());
        let mut d = [5, 0];
        assert!(dims_create(12, &mut d).is_err());
        let mut d = [2, 3];
        assert!(dims_create(7, &mut d).is_err());
        let mut d = [-1, 0];
        assert!(dims_create(4, &mut d).is_err());
        let mut d: [i32; 0] = [];
        assert!(dims_create(1, &mut d).is_ok());
    }

    #[test]
    fn neighbour_order() {
        let t = Topology::Cart {
            dims: vec![3],
            periods: vec![false],
            coords: vec![0],
        };
        assert_eq!(t.neighbors(0), (vec![PROC_NULL, 1], vec![PROC_NULL, 1]));
        let t = Topology::Graph {
            index: vec![2, 3, 4],
            edges: vec![1, 2, 0, 0],
        };
        assert_eq!(t.neighbors(0).0, vec![1, 2]);
        assert_eq!(t.neighbors(2).1, vec![0]);
    }
}
