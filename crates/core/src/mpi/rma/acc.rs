//! Accumulate operations applied to window memory (MPI-4.1 section 12.3.4, 12.7.1).
//!
//! The standard makes accumulates atomic per basic element: concurrent accumulates (and
//! get-accumulates, fetch-and-ops, compare-and-swaps) with the same predefined datatype on the
//! same location behave as if done one after the other. Here every process that applies one —
//! an origin writing shared memory directly, or the target applying an active message — does
//! it the same way, chosen by the element's address and size only, so any mix of them is
//! atomic:
//!
//! - in windows whose memory is shared memory the library allocated ([`Mode::Atomic`]),
//!   elements of 1, 2, 4 or 8 bytes at an aligned address are updated with one atomic
//!   instruction (a fetch-and-add, a swap, a load, or a compare-and-swap loop around the
//!   operation's kernel); the others (16- and 32-byte types, unaligned elements) under the
//!   target's accumulate lock (`ctl::Ctl`);
//! - in windows of user memory ([`Mode::Locked`]), which origins on the host reach by
//!   cross-memory attach (a copy, never atomic), every accumulate runs under the target's
//!   accumulate lock, which the caller holds.
//!
//! Operations are the predefined ones (user-defined operations are not allowed in one-sided
//! calls), on the element type named by a predefined datatype's engine id: the one basic type
//! (or MINLOC/MAXLOC pair type) both the origin's and the target's datatype are made of.

use crate::ids::DtypeId;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::err;
use crate::error::Result;
use crate::mpi::coll::op::{
    elem_of, pair_kernel, Builtin, Elem, Op, PairKernel, Reducer, NPREDEFINED,
};
use crate::mpi::datatype::{predefined, Basic, Datatype, PREDEFINED_NAMES};

/// The predefined datatypes, as the reducers look them up.
fn predefined_table() -> &'static [Option<Arc<Datatype>>] {
    static T: OnceLock<Vec<Option<Arc<Datatype>>>> = OnceLock::new();
    T.get_or_init(|| {
        predefined()
            .into_iter()
            .map(|d| Some(Arc::new(d)))
            .collect()
    })
}

/// The engine id of the predefined type whose element kind is `e` (the first such type).
pub fn elem_id(e: Elem) -> Option<u16> {
    static T: OnceLock<Vec<(Elem, u16)>> = OnceLock::new();
    let t = T.get_or_init(|| {
        (0..PREDEFINED_NAMES.len())
            .filter_map(|i| elem_of(&[], DtypeId::from_idx(i)).map(|e| (e, i as u16)))
            .collect()
    });
    t.iter().find(|(x, _)| *x == e).map(|(_, id)| *id)
}

/// Engine id of MPI_BYTE (the element of REPLACE / NO_OP on mixed types).
pub fn byte_id() -> u16 {
    crate::mpi::datatype::predefined_index("MPI_BYTE").expect("MPI_BYTE") as u16
}

/// How an accumulate may touch the target's memory.
#[derive(Clone, Copy)]
pub enum Mode<'a> {
    /// Shared memory: atomic instructions per element, the lock for the rest.
    Atomic(&'a crate::mpi::rma::ctl::Ctl),
    /// The caller holds the target's accumulate lock.
    Locked,
}

/// What an atomic fast path does for the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fast {
    /// Integer addition: fetch-and-add.
    Add,
    Swap,
    Load,
    /// A compare-and-swap loop around the kernel.
    Loop,
}

/// An operation bound to an element type. Elements are packed: a MINLOC/MAXLOC pair is its
/// value followed at once by its index (`size` bytes), as the origin's data travels, whatever
/// padding the pair type has in memory (MPI_SHORT_INT: 2 bytes of value, 2 of padding, 4 of
/// index).
pub struct Acc {
    red: Reducer,
    pub size: usize,
    fast: Fast,
    /// MINLOC/MAXLOC on a pair type: the kernel and the index's offset in a packed pair.
    pair: Option<(PairKernel, usize)>,
}

fn is_integer(b: Basic) -> bool {
    use Basic::*;
    matches!(
        b,
        Char | SignedChar
            | UnsignedChar
            | Short
            | UnsignedShort
            | Int
            | Unsigned
            | Long
            | UnsignedLong
            | LongLong
            | UnsignedLongLong
            | Int8
            | Int16
            | Int32
            | Int64
            | Uint8
            | Uint16
            | Uint32
            | Uint64
            | WChar
            | Aint
            | Offset
            | Count
    )
}

impl Acc {
    /// Operation `op` (a predefined operation's engine id) on elements of the predefined type
    /// `elem`; MPI_ERR_OP when the operation is not defined for it.
    pub fn new(op: u8, elem: u16) -> Result<Acc> {
        if op as u32 >= NPREDEFINED {
            return err!(Op, "one-sided operations take predefined operations only");
        }
        let b = Builtin::ALL[op as usize];
        let red = Reducer::new(
            Op::Builtin(b),
            DtypeId::new(elem as u32),
            predefined_table(),
        )?;
        let size = red.dt.size;
        if size == 0 {
            return err!(Type, "an accumulate needs a type with data");
        }
        let fast = match (b, elem_of(&[], DtypeId::new(elem as u32))) {
            (Builtin::Replace, _) => Fast::Swap,
            (Builtin::NoOp, _) => Fast::Load,
            (Builtin::Sum, Some(Elem::Basic(t))) if is_integer(t) => Fast::Add,
            _ => Fast::Loop,
        };
        let pair = match (b, elem_of(&[], DtypeId::new(elem as u32))) {
            (Builtin::Maxloc | Builtin::Minloc, Some(Elem::Pair { val, idx })) => {
                match pair_kernel(b, val, idx) {
                    Some(k) => Some((k, val.size())),
                    None => return err!(Op, "{} is not defined for this pair type", b.name()),
                }
            }
            _ => None,
        };
        Ok(Acc {
            red,
            size,
            fast,
            pair,
        })
    }

    /// `d = a op b` on `n` packed elements (`d` may be `a` or `b`); not for MPI_NO_OP.
    #[inline]
    unsafe fn kernel(&self, a: *const u8, b: *const u8, d: *mut u8, n: usize) {
        match (self.fast, self.pair) {
            (Fast::Swap, _) => std::ptr::copy(a, d, n * self.size),
            (_, Some((k, off))) => k(a, b, d, n, self.size, off),
            _ => self.red.apply(a, b, d, n),
        }
    }

    /// [`Acc::apply`] on window memory given as runs of bytes (address, length), in order,
    /// that together hold whole elements, where an element may straddle two runs: a pair
    /// type with a gap between value and index (MPI_SHORT_INT), alone or in a derived type.
    /// `origin` and `old` are packed. When an element straddles, every element is gathered,
    /// computed and scattered back under the accumulate lock; such elements (6 bytes for
    /// MPI_SHORT_INT) never take the atomic instructions, so every process updates them
    /// under the lock.
    ///
    /// # Safety
    /// As [`Acc::apply`], for each run; the runs do not overlap.
    pub unsafe fn apply_runs<I>(&self, origin: *const u8, runs: I, old: Option<*mut u8>, mode: Mode)
    where
        I: Iterator<Item = (*mut u8, usize)> + Clone,
    {
        let s = self.size;
        if runs.clone().all(|(_, len)| len % s == 0) {
            let mut done = 0usize;
            for (p, len) in runs {
                let o = if origin.is_null() {
                    origin
                } else {
                    origin.add(done)
                };
                self.apply(o, p, len / s, old.map(|q| q.add(done)), mode);
                done += len;
            }
            return;
        }
        let total: usize = runs.clone().map(|r| r.1).sum();
        let mut tmp = vec![0u8; total];
        if let Mode::Atomic(ctl) = mode {
            ctl.acc_lock();
        }
        let mut done = 0usize;
        for (p, len) in runs.clone() {
            std::ptr::copy(p, tmp.as_mut_ptr().add(done), len);
            done += len;
        }
        self.plain(origin, tmp.as_mut_ptr(), total / s, old);
        if self.fast != Fast::Load {
            let mut done = 0usize;
            for (p, len) in runs {
                std::ptr::copy(tmp.as_ptr().add(done), p, len);
                done += len;
            }
        }
        if let Mode::Atomic(ctl) = mode {
            ctl.acc_unlock();
        }
    }

    /// `dst[i] = origin[i] op dst[i]` for `n` elements, the values before into `old` when
    /// given.
    ///
    /// # Safety
    /// `origin` holds `n` elements (unless the operation is MPI_NO_OP), `dst` is window
    /// memory of `n` elements mapped here, `old` has room for `n` elements.
    pub unsafe fn apply(
        &self,
        origin: *const u8,
        dst: *mut u8,
        n: usize,
        old: Option<*mut u8>,
        mode: Mode,
    ) {
        let s = self.size;
        if n == 0 {
            return;
        }
        match mode {
            Mode::Atomic(_) if matches!(s, 1 | 2 | 4 | 8) && (dst as usize).is_multiple_of(s) => {
                for i in 0..n {
                    let o = if origin.is_null() {
                        origin
                    } else {
                        origin.add(i * s)
                    };
                    self.atomic_one(o, dst.add(i * s), old.map(|p| p.add(i * s)));
                }
            }
            Mode::Atomic(ctl) => {
                ctl.acc_lock();
                self.plain(origin, dst, n, old);
                ctl.acc_unlock();
            }
            Mode::Locked => self.plain(origin, dst, n, old),
        }
    }

    /// Under the lock (or on private memory).
    unsafe fn plain(&self, origin: *const u8, dst: *mut u8, n: usize, old: Option<*mut u8>) {
        if let Some(o) = old {
            std::ptr::copy(dst, o, n * self.size);
        }
        if self.fast == Fast::Load {
            return;
        }
        self.kernel(origin, dst, dst, n);
    }

    /// One element with atomic instructions.
    unsafe fn atomic_one(&self, origin: *const u8, dst: *mut u8, old: Option<*mut u8>) {
        macro_rules! run {
            ($a:ty, $t:ty) => {{
                // SAFETY: dst is aligned for $t (checked by the caller) and lies in shared
                // window memory that other processes also touch only atomically.
                let a = &*(dst as *const $a);
                let prev: $t = match self.fast {
                    Fast::Load => a.load(Ordering::Acquire),
                    Fast::Swap => a.swap((origin as *const $t).read_unaligned(), Ordering::AcqRel),
                    Fast::Add => {
                        a.fetch_add((origin as *const $t).read_unaligned(), Ordering::AcqRel)
                    }
                    Fast::Loop => {
                        let mut cur = a.load(Ordering::Relaxed);
                        loop {
                            let mut new = cur;
                            self.kernel(
                                origin,
                                (&cur as *const $t).cast(),
                                (&mut new as *mut $t).cast(),
                                1,
                            );
                            match a.compare_exchange_weak(
                                cur,
                                new,
                                Ordering::AcqRel,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => break cur,
                                Err(x) => cur = x,
                            }
                        }
                    }
                };
                if let Some(o) = old {
                    (o as *mut $t).write_unaligned(prev);
                }
            }};
        }
        match self.size {
            1 => run!(AtomicU8, u8),
            2 => run!(AtomicU16, u16),
            4 => run!(AtomicU32, u32),
            _ => run!(AtomicU64, u64),
        }
    }
}

/// MPI_Compare_and_swap on one element of `size` bytes: if `*dst == *compare` then
/// `*dst = *origin`; the value before goes to `old`.
///
/// # Safety
/// `dst` is `size` bytes of window memory mapped here; the others hold one element.
pub unsafe fn compare_and_swap(
    size: usize,
    origin: *const u8,
    compare: *const u8,
    dst: *mut u8,
    old: *mut u8,
    mode: Mode,
) {
    macro_rules! cas {
        ($a:ty, $t:ty) => {{
            // SAFETY: aligned (checked below) shared window memory, touched atomically.
            let a = &*(dst as *const $a);
            let want = (compare as *const $t).read_unaligned();
            let new = (origin as *const $t).read_unaligned();
            let prev = match a.compare_exchange(want, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            };
            (old as *mut $t).write_unaligned(prev);
        }};
    }
    let plain = || {
        std::ptr::copy(dst, old, size);
        if std::slice::from_raw_parts(old, size) == std::slice::from_raw_parts(compare, size) {
            std::ptr::copy(origin, dst, size);
        }
    };
    match mode {
        Mode::Atomic(_) if matches!(size, 1 | 2 | 4 | 8) && (dst as usize).is_multiple_of(size) => {
            match size {
                1 => cas!(AtomicU8, u8),
                2 => cas!(AtomicU16, u16),
                4 => cas!(AtomicU32, u32),
                _ => cas!(AtomicU64, u64),
            }
        }
        Mode::Atomic(ctl) => {
            ctl.acc_lock();
            plain();
            ctl.acc_unlock();
        }
        Mode::Locked => plain(),
    }
}

/// Bound operations by (operation, element type), made once; a flat table indexed by both
/// (element types are predefined datatype ids), so a lookup is an index.
#[derive(Default)]
pub struct Cache {
    table: Vec<Option<Arc<Acc>>>,
}

impl Cache {
    fn slot(op: u8, elem: u16) -> Option<usize> {
        let n = PREDEFINED_NAMES.len();
        ((op as u32) < NPREDEFINED && (elem as usize) < n).then(|| op as usize * n + elem as usize)
    }

    /// As [`Cache::get`], borrowed (no reference count to take).
    pub fn get_ref(&mut self, op: u8, elem: u16) -> Result<&Acc> {
        let Some(i) = Self::slot(op, elem) else {
            return err!(
                Op,
                "no accumulate kernel for operation {op} on element {elem}"
            );
        };
        if self.table.len() <= i {
            self.table
                .resize(NPREDEFINED as usize * PREDEFINED_NAMES.len(), None);
        }
        if self.table[i].is_none() {
            self.table[i] = Some(Arc::new(Acc::new(op, elem)?));
        }
        Ok(self.table[i].as_deref().expect("made above"))
    }

    pub fn get(&mut self, op: u8, elem: u16) -> Result<Arc<Acc>> {
        self.get_ref(op, elem)?;
        let i = Self::slot(op, elem).expect("checked by get_ref");
        Ok(self.table[i].clone().expect("made by get_ref"))
    }
}

/// Whether MPI_Compare_and_swap takes elements of `b`: a C or Fortran integer, a
/// multi-language type (MPI_AINT, MPI_OFFSET, MPI_COUNT), a logical or MPI_BYTE (MPI-4.1
/// 12.3.4, 6.9.2). MPI_CHAR counts as the C integer it is, as in MPICH.
pub fn cas_allowed(b: Basic) -> bool {
    is_integer(b) || matches!(b, Basic::Byte | Basic::Bool | Basic::Logical)
}

/// The compare-and-swap element of a predefined datatype (its own id) when
/// [`cas_allowed`], from a table made once: None for derived and other types.
#[inline]
pub fn predefined_cas_elem(dt: DtypeId) -> Option<u16> {
    static T: OnceLock<Vec<Option<u16>>> = OnceLock::new();
    let t = T.get_or_init(|| {
        (0..PREDEFINED_NAMES.len())
            .map(|i| match elem_of(&[], DtypeId::from_idx(i)) {
                Some(Elem::Basic(b)) if cas_allowed(b) => elem_id(Elem::Basic(b)),
                _ => None,
            })
            .collect()
    });
    t.get(dt.idx()).copied().flatten()
}

/// The accumulate element of a predefined datatype ([`elem_id`] of its [`elem_of`]), from a
/// table made once: None for derived types and types without one.
#[inline]
pub fn predefined_elem(dt: DtypeId) -> Option<u16> {
    static T: OnceLock<Vec<Option<u16>>> = OnceLock::new();
    let t = T.get_or_init(|| {
        (0..PREDEFINED_NAMES.len())
            .map(|i| elem_of(&[], DtypeId::from_idx(i)).and_then(elem_id))
            .collect()
    });
    t.get(dt.idx()).copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::coll::op::OP_SUM;
    use crate::mpi::datatype::predefined_index;
    use crate::mpi::rma::ctl::Ctl;

    fn id(name: &str) -> u16 {
        predefined_index(name).unwrap() as u16
    }

    #[test]
    fn every_path_computes_the_same() {
        let ctl = Ctl::boxed();
        let int = id("MPI_INT");
        let add = Acc::new(OP_SUM as u8, int).unwrap();
        let mut t = [1i32, 2, 3, 4];
        let o = [10i32, 20, 30, 40];
        let mut old = [0i32; 4];
        unsafe {
            add.apply(
                o.as_ptr().cast(),
                t.as_mut_ptr().cast(),
                4,
                Some(old.as_mut_ptr().cast()),
                Mode::Atomic(&ctl),
            );
        }
        assert_eq!(t, [11, 22, 33, 44]);
        assert_eq!(old, [1, 2, 3, 4]);
        unsafe {
            add.apply(
                o.as_ptr().cast(),
                t.as_mut_ptr().cast(),
                4,
                None,
                Mode::Locked,
            )
        };
        assert_eq!(t, [21, 42, 63, 84]);
        // MAX through the compare-and-swap loop, on doubles.
        let max = Acc::new(0, id("MPI_DOUBLE")).unwrap();
        let mut d = [1.0f64, 5.0];
        let od = [3.0f64, 4.0];
        unsafe {
            max.apply(
                od.as_ptr().cast(),
                d.as_mut_ptr().cast(),
                2,
                None,
                Mode::Atomic(&ctl),
            )
        };
        assert_eq!(d, [3.0, 5.0]);
        // An unaligned element goes under the lock and still computes.
        let mut raw = [0u8; 9];
        let one = 7i32.to_ne_bytes();
        unsafe {
            add.apply(
                one.as_ptr(),
                raw.as_mut_ptr().add(1),
                1,
                None,
                Mode::Atomic(&ctl),
            );
            add.apply(
                one.as_ptr(),
                raw.as_mut_ptr().add(1),
                1,
                None,
                Mode::Atomic(&ctl),
            );
        }
        assert_eq!(i32::from_ne_bytes(raw[1..5].try_into().unwrap()), 14);
        // REPLACE, NO_OP, MINLOC on a pair type.
        let rep = Acc::new(12, int).unwrap();
        let noop = Acc::new(13, int).unwrap();
        let mut x = [5i32];
        let mut prev = [0i32];
        unsafe {
            rep.apply(
                [9i32].as_ptr().cast(),
                x.as_mut_ptr().cast(),
                1,
                Some(prev.as_mut_ptr().cast()),
                Mode::Atomic(&ctl),
            );
        }
        assert_eq!((x, prev), ([9], [5]));
        unsafe {
            noop.apply(
                std::ptr::null(),
                x.as_mut_ptr().cast(),
                1,
                Some(prev.as_mut_ptr().cast()),
                Mode::Atomic(&ctl),
            );
        }
        assert_eq!((x, prev), ([9], [9]));
        let minloc = Acc::new(10, id("MPI_2INT")).unwrap();
        let mut p = [5i32, 1];
        unsafe {
            minloc.apply(
                [3i32, 2].as_ptr().cast(),
                p.as_mut_ptr().cast(),
                1,
                None,
                Mode::Atomic(&ctl),
            )
        };
        assert_eq!(p, [3, 2]);
        assert!(
            Acc::new(OP_SUM as u8, id("MPI_BYTE")).is_err(),
            "SUM is not defined on bytes"
        );
        assert!(Acc::new(14, int).is_err(), "not a predefined operation");
    }

    /// MPI_SHORT_INT in memory: value, 2 bytes of padding, index.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct ShortInt(i16, i32);

    fn pack(v: &[(i16, i32)]) -> Vec<u8> {
        v.iter()
            .flat_map(|&(a, b)| a.to_ne_bytes().into_iter().chain(b.to_ne_bytes()))
            .collect()
    }

    #[test]
    fn pairs_across_their_gap() {
        let ctl = Ctl::boxed();
        let maxloc = Acc::new(11, id("MPI_SHORT_INT")).unwrap();
        let rep = Acc::new(12, id("MPI_SHORT_INT")).unwrap();
        let noop = Acc::new(13, id("MPI_SHORT_INT")).unwrap();
        assert_eq!(maxloc.size, 6);
        for mode in [Mode::Atomic(&ctl), Mode::Locked] {
            let mut t = [ShortInt(1, 10), ShortInt(5, 11), ShortInt(3, 12)];
            // Runs as the segments of three pairs: each value, then each index.
            let runs = |t: &mut [ShortInt; 3]| {
                let b = t.as_mut_ptr() as *mut u8;
                (0..3usize)
                    .flat_map(move |i| unsafe { [(b.add(8 * i), 2usize), (b.add(8 * i + 4), 4)] })
                    .collect::<Vec<_>>()
            };
            let o = pack(&[(2, 20), (5, 3), (1, 22)]);
            let mut old = vec![0u8; 18];
            unsafe {
                maxloc.apply_runs(
                    o.as_ptr(),
                    runs(&mut t).into_iter(),
                    Some(old.as_mut_ptr()),
                    mode,
                )
            };
            assert_eq!(t, [ShortInt(2, 20), ShortInt(5, 3), ShortInt(3, 12)]);
            assert_eq!(old, pack(&[(1, 10), (5, 11), (3, 12)]));
            let o = pack(&[(7, 70), (8, 80), (9, 90)]);
            unsafe { rep.apply_runs(o.as_ptr(), runs(&mut t).into_iter(), None, mode) };
            assert_eq!(t, [ShortInt(7, 70), ShortInt(8, 80), ShortInt(9, 90)]);
            unsafe {
                noop.apply_runs(
                    std::ptr::null(),
                    runs(&mut t).into_iter(),
                    Some(old.as_mut_ptr()),
                    mode,
                )
            };
            assert_eq!(old, pack(&[(7, 70), (8, 80), (9, 90)]));
            assert_eq!(t, [ShortInt(7, 70), ShortInt(8, 80), ShortInt(9, 90)]);
        }
        // Packed pairs with no gap (MPI_DOUBLE_INT's 12 bytes) in whole runs.
        let minloc = Acc::new(10, id("MPI_DOUBLE_INT")).unwrap();
        let mut t = [0u8; 24];
        t[..8].copy_from_slice(&4.0f64.to_ne_bytes());
        t[8..12].copy_from_slice(&1i32.to_ne_bytes());
        t[12..20].copy_from_slice(&4.0f64.to_ne_bytes());
        t[20..24].copy_from_slice(&9i32.to_ne_bytes());
        let mut o = [0u8; 24];
        o[..8].copy_from_slice(&4.0f64.to_ne_bytes());
        o[8..12].copy_from_slice(&0i32.to_ne_bytes());
        o[12..20].copy_from_slice(&5.0f64.to_ne_bytes());
        o[20..24].copy_from_slice(&0i32.to_ne_bytes());
        let p = t.as_mut_ptr();
        unsafe {
            minloc.apply_runs(
                o.as_ptr(),
                [(p, 12), (p.add(12), 12)].into_iter(),
                None,
                Mode::Locked,
            )
        };
        assert_eq!(
            i32::from_ne_bytes(t[8..12].try_into().unwrap()),
            0,
            "tie: lower index"
        );
        assert_eq!(i32::from_ne_bytes(t[20..24].try_into().unwrap()), 9);
        assert!(Acc::new(OP_SUM as u8, id("MPI_SHORT_INT")).is_err());
    }

    #[test]
    fn compare_and_swap_both_ways() {
        let ctl = Ctl::boxed();
        for mode in [Mode::Atomic(&ctl), Mode::Locked] {
            let mut t = 5u64;
            let mut old = 0u64;
            unsafe {
                compare_and_swap(
                    8,
                    (&9u64 as *const u64).cast(),
                    (&4u64 as *const u64).cast(),
                    (&mut t as *mut u64).cast(),
                    (&mut old as *mut u64).cast(),
                    mode,
                );
            }
            assert_eq!((t, old), (5, 5));
            unsafe {
                compare_and_swap(
                    8,
                    (&9u64 as *const u64).cast(),
                    (&5u64 as *const u64).cast(),
                    (&mut t as *mut u64).cast(),
                    (&mut old as *mut u64).cast(),
                    mode,
                );
            }
            assert_eq!((t, old), (9, 5));
        }
    }

    #[test]
    fn element_ids_name_their_type() {
        assert_eq!(elem_id(Elem::Basic(Basic::Int)), Some(id("MPI_INT")));
        assert_eq!(
            elem_id(Elem::Pair {
                val: Basic::Double,
                idx: Basic::Int
            }),
            Some(id("MPI_DOUBLE_INT"))
        );
        assert_eq!(byte_id(), id("MPI_BYTE"));
    }

    #[test]
    fn compare_and_swap_takes_integers_logicals_and_bytes() {
        for ok in [
            "MPI_CHAR",
            "MPI_INT",
            "MPI_UINT64_T",
            "MPI_BYTE",
            "MPI_C_BOOL",
            "MPI_AINT",
            "MPI_COUNT",
        ] {
            assert!(
                predefined_cas_elem(DtypeId::from_idx(id(ok) as usize)).is_some(),
                "{ok}"
            );
        }
        for bad in [
            "MPI_FLOAT",
            "MPI_DOUBLE",
            "MPI_LONG_DOUBLE",
            "MPI_C_DOUBLE_COMPLEX",
            "MPI_2INT",
            "MPI_PACKED",
        ] {
            assert!(
                predefined_cas_elem(DtypeId::from_idx(id(bad) as usize)).is_none(),
                "{bad}"
            );
        }
    }
}
