//! Type constructors (MPI-4.0 sections 5.1.2-5.1.4, 5.1.7, and 19.1.9 for the Fortran 90
//! parameterized types). Each one builds the new type's layout, signature and bounds from its
//! parts' (never by expanding them element by element) and records its arguments for
//! MPI_Type_get_contents. The result is not committed.
//!
//! Errors carry the class the C layer reports: MPI_ERR_ARG for inconsistent arguments,
//! MPI_ERR_TYPE for types that cannot be described (overflowing displacements or sizes).

use crate::ids::DtypeId;
use std::sync::Arc;

use super::layout::{repeat, Op, Prog};
use super::sig::SigBuilder;
use super::{Combiner, Contents, Datatype, Marker};
use crate::error::Result;
use crate::{err, mpi_error};

fn overflow() -> crate::error::MpiError {
    mpi_error!(
        Type,
        "the type's displacements or size overflow the address space"
    )
}

fn mul(a: usize, b: isize) -> Result<isize> {
    isize::try_from(a)
        .ok()
        .and_then(|a| a.checked_mul(b))
        .ok_or_else(overflow)
}

fn add(a: isize, b: isize) -> Result<isize> {
    a.checked_add(b).ok_or_else(overflow)
}

fn lower(cur: Option<isize>, v: isize) -> Option<isize> {
    Some(cur.map_or(v, |c| c.min(v)))
}

fn upper(cur: Option<isize>, v: isize) -> Option<isize> {
    Some(cur.map_or(v, |c| c.max(v)))
}

/// The parts of a type under construction.
#[derive(Default)]
struct Acc {
    prog: Prog,
    sig: SigBuilder,
    size: usize,
    lb: Option<isize>,
    ub: Option<isize>,
    true_lb: Option<isize>,
    true_ub: Option<isize>,
    align: usize,
}

impl Acc {
    /// A type built from copies of `t` aligns like `t`, even when it holds none of them.
    fn of(t: &Datatype) -> Acc {
        Acc {
            align: t.align,
            ..Acc::default()
        }
    }

    /// `count` blocks of `bl` copies of `t` (one extent apart), block `i` at `d + i * step`.
    /// With `empty_blocks_bound`, blocks of zero copies still mark their position in the
    /// bounds (what MPICH does for vectors).
    fn blocks(
        &mut self,
        d: isize,
        count: usize,
        bl: usize,
        step: isize,
        t: &Datatype,
        empty_blocks_bound: bool,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        self.align = self.align.max(t.align);
        let last = add(d, mul(count - 1, step)?)?;
        if bl == 0 {
            if empty_blocks_bound {
                for p in [d, last] {
                    let p = add(p, t.lb)?;
                    self.lb = lower(self.lb, p);
                    self.ub = upper(self.ub, p);
                    self.true_lb = lower(self.true_lb, p);
                    self.true_ub = upper(self.true_ub, p);
                }
            }
            return Ok(());
        }
        let ext = t.extent();
        let span = mul(bl - 1, ext)?;
        for start in [d, last] {
            let (lo, hi) = (add(start, span.min(0))?, add(start, span.max(0))?);
            self.lb = lower(self.lb, add(lo, t.lb)?);
            self.ub = upper(self.ub, add(hi, t.ub)?);
            if t.size > 0 {
                self.true_lb = lower(self.true_lb, add(lo, t.true_lb)?);
                self.true_ub = upper(self.true_ub, add(hi, t.true_ub)?);
            }
        }
        let bytes = count
            .checked_mul(bl)
            .and_then(|n| n.checked_mul(t.size))
            .and_then(|n| n.checked_add(self.size))
            .filter(|n| *n <= isize::MAX as usize)
            .ok_or_else(overflow)?;
        self.size = bytes;
        if t.size > 0 {
            let blk: Arc<[Op]> = repeat(&t.ops, bl, ext).into();
            self.prog.push_repeat(&blk, count, step, d)?;
            let mut sb = SigBuilder::default();
            sb.push_repeat(&t.sig, bl as u64);
            self.sig.push_repeat(&sb.finish(), count as u64);
        }
        Ok(())
    }

    fn bounds(&self) -> (isize, isize) {
        (self.lb.unwrap_or(0), self.ub.unwrap_or(0))
    }

    fn finish(self, bounds: (isize, isize), combiner: Combiner, contents: Contents) -> Datatype {
        let true_bounds = (self.true_lb.unwrap_or(0), self.true_ub.unwrap_or(0));
        Datatype::assemble(
            self.prog.finish(),
            self.sig.finish(),
            self.size,
            bounds,
            true_bounds,
            self.align,
            combiner,
            contents,
        )
    }
}

fn ints(v: impl IntoIterator<Item = usize>) -> impl Iterator<Item = i64> {
    v.into_iter().map(|x| x as i64)
}

/// How one dimension of a distributed array is split (MPI_Type_create_darray).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distrib {
    /// Blocks of the given size (None: MPI_DISTRIBUTE_DFLT_DARG, ceil(gsize / psize)).
    Block(Option<usize>),
    /// Blocks of the given size dealt round-robin (None: 1).
    Cyclic(Option<usize>),
    /// Not distributed.
    None,
}

impl Datatype {
    /// MPI_Type_contiguous.
    pub fn contiguous(count: usize, t: &Arc<Datatype>, tid: DtypeId) -> Result<Datatype> {
        let mut a = Acc::of(t);
        a.blocks(0, 1, count, 0, t, false)?;
        let b = a.bounds();
        Ok(a.finish(
            b,
            Combiner::Contiguous,
            Contents {
                ints: vec![count as i64],
                types: vec![(tid, t.clone())],
                ..Contents::default()
            },
        ))
    }

    /// MPI_Type_vector (stride in elements) or MPI_Type_create_hvector (`bytes`: in bytes).
    pub fn vector(
        count: usize,
        blocklen: usize,
        stride: isize,
        bytes: bool,
        t: &Arc<Datatype>,
        tid: DtypeId,
    ) -> Result<Datatype> {
        let step = if bytes {
            stride
        } else {
            stride.checked_mul(t.extent()).ok_or_else(overflow)?
        };
        let mut a = Acc::of(t);
        a.blocks(0, count, blocklen, step, t, true)?;
        let b = a.bounds();
        let (combiner, contents) = if bytes {
            (
                Combiner::Hvector,
                Contents {
                    ints: vec![count as i64, blocklen as i64],
                    aints: vec![stride],
                    types: vec![(tid, t.clone())],
                    ..Contents::default()
                },
            )
        } else {
            (
                Combiner::Vector,
                Contents {
                    ints: vec![count as i64, blocklen as i64, stride as i64],
                    types: vec![(tid, t.clone())],
                    ..Contents::default()
                },
            )
        };
        Ok(a.finish(b, combiner, contents))
    }

    /// Blocks of copies of `t` at displacements in elements or (`bytes`) in bytes.
    fn indexed_parts(
        blocklens: &[usize],
        disps: &[isize],
        bytes: bool,
        t: &Datatype,
    ) -> Result<Acc> {
        if blocklens.len() != disps.len() {
            return err!(
                Arg,
                "{} block lengths for {} displacements",
                blocklens.len(),
                disps.len()
            );
        }
        let mut a = Acc::of(t);
        for (&bl, &d) in blocklens.iter().zip(disps) {
            if bl == 0 {
                continue;
            }
            let disp = if bytes {
                d
            } else {
                d.checked_mul(t.extent()).ok_or_else(overflow)?
            };
            a.blocks(disp, 1, bl, 0, t, false)?;
        }
        Ok(a)
    }

    /// MPI_Type_indexed (displacements in elements) or MPI_Type_create_hindexed (`bytes`).
    pub fn indexed(
        blocklens: &[usize],
        disps: &[isize],
        bytes: bool,
        t: &Arc<Datatype>,
        tid: DtypeId,
    ) -> Result<Datatype> {
        let a = Self::indexed_parts(blocklens, disps, bytes, t)?;
        let b = a.bounds();
        let n = blocklens.len() as i64;
        let contents = if bytes {
            Contents {
                ints: std::iter::once(n)
                    .chain(ints(blocklens.iter().copied()))
                    .collect(),
                aints: disps.to_vec(),
                types: vec![(tid, t.clone())],
                ..Contents::default()
            }
        } else {
            Contents {
                ints: std::iter::once(n)
                    .chain(ints(blocklens.iter().copied()))
                    .chain(disps.iter().map(|x| *x as i64))
                    .collect(),
                types: vec![(tid, t.clone())],
                ..Contents::default()
            }
        };
        let combiner = if bytes {
            Combiner::Hindexed
        } else {
            Combiner::Indexed
        };
        Ok(a.finish(b, combiner, contents))
    }

    /// MPI_Type_create_indexed_block / MPI_Type_create_hindexed_block (`bytes`).
    pub fn indexed_block(
        blocklen: usize,
        disps: &[isize],
        bytes: bool,
        t: &Arc<Datatype>,
        tid: DtypeId,
    ) -> Result<Datatype> {
        let lens = vec![blocklen; disps.len()];
        let a = Self::indexed_parts(&lens, disps, bytes, t)?;
        let b = a.bounds();
        let n = disps.len() as i64;
        let (combiner, contents) = if bytes {
            (
                Combiner::HindexedBlock,
                Contents {
                    ints: vec![n, blocklen as i64],
                    aints: disps.to_vec(),
                    types: vec![(tid, t.clone())],
                    ..Contents::default()
                },
            )
        } else {
            (
                Combiner::IndexedBlock,
                Contents {
                    ints: [n, blocklen as i64]
                        .into_iter()
                        .chain(disps.iter().map(|x| *x as i64))
                        .collect(),
                    types: vec![(tid, t.clone())],
                    ..Contents::default()
                },
            )
        };
        Ok(a.finish(b, combiner, contents))
    }

    /// MPI_Type_create_struct: blocks of different types at byte displacements. The extent is
    /// padded to the alignment of the most demanding member, as a C compiler pads a struct,
    /// unless an MPI_LB or MPI_UB marker sets a bound.
    pub fn structure(
        blocklens: &[usize],
        disps: &[isize],
        types: &[(Arc<Datatype>, DtypeId)],
    ) -> Result<Datatype> {
        if blocklens.len() != disps.len() || disps.len() != types.len() {
            return err!(Arg, "struct arrays of different lengths");
        }
        let mut a = Acc::default();
        let (mut lb_mark, mut ub_mark) = (None, None);
        for ((&bl, &d), (t, _)) in blocklens.iter().zip(disps).zip(types) {
            match t.marker {
                Some(Marker::Lb) => lb_mark = lower(lb_mark, d),
                Some(Marker::Ub) => ub_mark = upper(ub_mark, d),
                None if bl > 0 => a.blocks(d, 1, bl, 0, t, false)?,
                None => {}
            }
        }
        let (mut lb, mut ub) = a.bounds();
        if lb_mark.is_none() && ub_mark.is_none() {
            let align = a.align.max(1) as isize;
            let rem = (ub - lb).rem_euclid(align);
            if rem != 0 {
                ub = add(ub, align - rem)?;
            }
        }
        lb = lb_mark.unwrap_or(lb);
        ub = ub_mark.unwrap_or(ub);
        let n = blocklens.len() as i64;
        Ok(a.finish(
            (lb, ub),
            Combiner::Struct,
            Contents {
                ints: std::iter::once(n)
                    .chain(ints(blocklens.iter().copied()))
                    .collect(),
                aints: disps.to_vec(),
                types: types.iter().map(|(t, id)| (*id, t.clone())).collect(),
                ..Contents::default()
            },
        ))
    }

    /// MPI_Type_create_resized: the same data with a new lower bound and extent.
    pub fn resized(t: &Arc<Datatype>, lb: isize, extent: isize, tid: DtypeId) -> Result<Datatype> {
        let ub = add(lb, extent)?;
        let d = Datatype::assemble(
            t.ops.clone(),
            t.sig.clone(),
            t.size,
            (lb, ub),
            (t.true_lb, t.true_ub),
            t.align,
            Combiner::Resized,
            Contents {
                aints: vec![lb, extent],
                types: vec![(tid, t.clone())],
                ..Contents::default()
            },
        );
        Ok(d)
    }

    /// MPI_Type_dup: the same type map; committed if the original is.
    pub fn dup(t: &Arc<Datatype>, tid: DtypeId) -> Datatype {
        let mut d = (**t).clone();
        d.name = String::new();
        d.predefined = false;
        d.combiner = Combiner::Dup;
        d.contents = Contents {
            types: vec![(tid, t.clone())],
            ..Contents::default()
        };
        d
    }

    /// A type with `t`'s data placed at `disp`, lower bound 0 and the given extent (the last
    /// step of subarray and darray types, and of each darray dimension).
    fn placed(t: &Datatype, disp: isize, extent: isize) -> Result<Datatype> {
        let mut a = Acc::of(t);
        a.blocks(disp, 1, 1, 0, t, false)?;
        Ok(a.finish((0, extent), Combiner::Resized, Contents::default()))
    }

    /// MPI_Type_create_subarray: a `subsizes` block at `starts` of a `sizes` array of `t`, in
    /// C (row-major) or Fortran (column-major) order. Lower bound 0, extent the whole array.
    /// `raw` is the argument list for MPI_Type_get_contents.
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        fortran: bool,
        t: &Arc<Datatype>,
        tid: DtypeId,
        raw: Vec<i64>,
    ) -> Result<Datatype> {
        let n = sizes.len();
        if n == 0 || subsizes.len() != n || starts.len() != n {
            return err!(Arg, "subarray needs at least one dimension and one size, subsize and start per dimension");
        }
        for i in 0..n {
            if sizes[i] == 0 {
                return err!(Arg, "dimension {i}: size 0 (must be at least 1)");
            }
            if subsizes[i] > sizes[i] || starts[i] > sizes[i] - subsizes[i] {
                return err!(
                    Arg,
                    "dimension {i}: a subarray of {} from {} does not fit in a size of {}",
                    subsizes[i],
                    starts[i],
                    sizes[i]
                );
            }
        }
        let order: Vec<usize> = if fortran {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let mut stride = t.extent();
        let mut disp = 0isize;
        let mut cur: Arc<Datatype> = t.clone();
        for (level, &d) in order.iter().enumerate() {
            disp = add(disp, mul(starts[d], stride)?)?;
            let mut a = Acc::of(&cur);
            if level == 0 {
                a.blocks(0, 1, subsizes[d], 0, &cur, false)?;
            } else {
                a.blocks(0, subsizes[d], 1, stride, &cur, false)?;
            }
            let b = a.bounds();
            cur = Arc::new(a.finish(b, Combiner::Resized, Contents::default()));
            stride = mul(sizes[d], stride)?;
        }
        let mut out = Self::placed(&cur, disp, stride)?;
        out.combiner = Combiner::Subarray;
        out.contents = Contents {
            ints: raw,
            types: vec![(tid, t.clone())],
            ..Contents::default()
        };
        Ok(out)
    }

    /// MPI_Type_create_darray: the part of a `gsizes` array of `t` that process `rank` of a
    /// `psizes` process grid (row-major ranks) owns under the given distributions, in C or
    /// Fortran order. Lower bound 0, extent the whole array.
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        size: usize,
        rank: usize,
        gsizes: &[usize],
        distribs: &[Distrib],
        psizes: &[usize],
        fortran: bool,
        t: &Arc<Datatype>,
        tid: DtypeId,
        raw: Vec<i64>,
    ) -> Result<Datatype> {
        let n = gsizes.len();
        if n == 0 || distribs.len() != n || psizes.len() != n {
            return err!(Arg, "darray needs at least one dimension and a size, distribution and process count per dimension");
        }
        if rank >= size {
            return err!(Arg, "rank {rank} is out of range for {size} processes");
        }
        let grid = psizes
            .iter()
            .try_fold(1usize, |p, &x| p.checked_mul(x))
            .unwrap_or(usize::MAX);
        if grid != size {
            return err!(
                Arg,
                "the process grid {psizes:?} has {grid} processes, not {size}"
            );
        }
        for i in 0..n {
            if gsizes[i] == 0 || psizes[i] == 0 {
                return err!(Arg, "dimension {i}: sizes must be positive");
            }
            match distribs[i] {
                Distrib::Block(Some(b)) if b == 0 || b.saturating_mul(psizes[i]) < gsizes[i] => {
                    return err!(
                        Arg,
                        "dimension {i}: {} blocks of {b} do not cover {} elements",
                        psizes[i],
                        gsizes[i]
                    );
                }
                Distrib::Cyclic(Some(0)) => {
                    return err!(Arg, "dimension {i}: a cyclic block size must be positive");
                }
                Distrib::None if psizes[i] != 1 => {
                    return err!(
                        Arg,
                        "dimension {i} is not distributed (MPI_DISTRIBUTE_NONE) but has {} processes",
                        psizes[i]
                    );
                }
                _ => {}
            }
        }
        // Row-major process coordinates, whatever the array order.
        let mut coords = vec![0usize; n];
        let mut r = rank;
        for d in (0..n).rev() {
            coords[d] = r % psizes[d];
            r /= psizes[d];
        }
        let order: Vec<usize> = if fortran {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let mut stride = t.extent();
        let mut cur: Arc<Datatype> = t.clone();
        for &d in &order {
            let (g, p, c) = (gsizes[d], psizes[d], coords[d]);
            let mut a = Acc::of(&cur);
            match distribs[d] {
                Distrib::None => a.blocks(0, 1, g, 0, &cur, false)?,
                Distrib::Block(b) => {
                    let b = b.unwrap_or(g.div_ceil(p));
                    let start = c * b;
                    let mine = g.saturating_sub(start).min(b);
                    a.blocks(mul(start, stride)?, 1, mine, 0, &cur, false)?;
                }
                Distrib::Cyclic(b) => {
                    let b = b.unwrap_or(1);
                    let first = c * b;
                    if first < g {
                        let cycle = p * b;
                        let nblocks = (g - first).div_ceil(cycle);
                        let last_start = first + (nblocks - 1) * cycle;
                        let last_len = (g - last_start).min(b);
                        let step = mul(cycle, stride)?;
                        let full = if last_len == b { nblocks } else { nblocks - 1 };
                        a.blocks(mul(first, stride)?, full, b, step, &cur, false)?;
                        if last_len < b {
                            a.blocks(mul(last_start, stride)?, 1, last_len, 0, &cur, false)?;
                        }
                    }
                }
            }
            let span = mul(g, stride)?;
            let b = a.bounds();
            let dim = a.finish(b, Combiner::Resized, Contents::default());
            cur = Arc::new(Self::placed(&dim, 0, span)?);
            stride = span;
        }
        let mut out = (*cur).clone();
        out.combiner = Combiner::Darray;
        out.contents = Contents {
            ints: raw,
            types: vec![(tid, t.clone())],
            ..Contents::default()
        };
        Ok(out)
    }

    /// MPI_Type_create_f90_real/complex/integer: a predefined type with the layout of `base`,
    /// remembering the requested precision and range (`ints`).
    pub fn f90(combiner: Combiner, base: &Datatype, ints: Vec<i64>) -> Datatype {
        let mut d = base.clone();
        d.name = String::new();
        d.combiner = combiner;
        d.contents = Contents {
            ints,
            ..Contents::default()
        };
        d.predefined = true;
        d.committed = true;
        d
    }
}
