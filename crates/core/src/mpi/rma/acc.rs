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
use crate::mpi::coll::op::{elem_of, Builtin, Elem, Op, Reducer, NPREDEFINED};
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

/// An operation bound to an element type.
pub struct Acc {
    red: Reducer,
    pub size: usize,
    fast: Fast,
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
        Ok(Acc { red, size, fast })
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
        self.red.apply(origin, dst, dst, n);
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
                            self.red.apply(
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
}
