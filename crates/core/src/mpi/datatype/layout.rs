//! Copy programs: where the bytes of one element of a datatype are, as a short list of strided
//! runs and loops.
//!
//! A committed type is reduced once to a program of [`Op`]s. A `Run` is `count` blocks of `len`
//! bytes, `stride` bytes apart (a single block has `count == 1`); a `Loop` repeats a body program
//! `count` times, `stride` bytes apart. Offsets are relative to the start of the element. The
//! builder ([`Prog`]) merges as it goes: adjacent blocks become one block, equally spaced blocks
//! of one length become one run, repeated runs that tile become one longer run. So a vector of a
//! million doubles is one `Run`, a column of a matrix of structs is one `Loop` over the struct's
//! few runs, and packing walks the program with a tight strided copy per run: the cost per
//! element is a few instructions, never a walk of the constructor tree.
//!
//! Invariants (kept by [`Prog::push`] and [`repeat`]): no op copies zero bytes; a `Run` with
//! `count == 1` has `stride == 0`; a `Run` with `count > 1` never has `stride == len` (that is one
//! longer block); a `Loop` has `count >= 1`, a non-empty body, `stride == 0` when `count == 1`,
//! and `size` equal to the bytes its body copies.
//!
//! Addresses are computed with wrapping integer arithmetic on `usize`, never by offsetting a
//! pointer: with MPI_BOTTOM the base is null and the offsets are absolute addresses.

use std::sync::Arc;

use crate::err;
use crate::error::Result;

/// One step of a copy program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `count` blocks of `len` bytes; block `i` starts at `off + i * stride`.
    Run {
        off: isize,
        len: usize,
        count: usize,
        stride: isize,
    },
    /// `count` repetitions of `body`; repetition `i` is displaced by `off + i * stride`.
    Loop {
        off: isize,
        count: usize,
        stride: isize,
        body: Arc<[Op]>,
        /// Bytes one repetition of the body copies.
        size: usize,
    },
}

/// Ops above which a type is refused: its description would not fit in memory.
pub const MAX_OPS: usize = 1 << 22;

/// Bodies at most this long are copied inline when placed once, rather than wrapped in a loop.
const INLINE_OPS: usize = 8;

impl Op {
    /// Bytes this op copies.
    pub fn size(&self) -> usize {
        match self {
            Op::Run { len, count, .. } => len * count,
            Op::Loop { count, size, .. } => size * count,
        }
    }

    fn shifted(&self, d: isize) -> Op {
        let mut op = self.clone();
        match &mut op {
            Op::Run { off, .. } | Op::Loop { off, .. } => *off += d,
        }
        op
    }
}

/// Bytes a program copies.
pub fn prog_size(ops: &[Op]) -> usize {
    ops.iter().map(Op::size).sum()
}

/// A `Run` in canonical form, or None when it copies nothing.
fn run(off: isize, len: usize, count: usize, stride: isize) -> Option<Op> {
    if len == 0 || count == 0 {
        return None;
    }
    if count == 1 {
        return Some(Op::Run {
            off,
            len,
            count: 1,
            stride: 0,
        });
    }
    if stride == len as isize {
        return Some(Op::Run {
            off,
            len: len * count,
            count: 1,
            stride: 0,
        });
    }
    Some(Op::Run {
        off,
        len,
        count,
        stride,
    })
}

fn same_body(a: &Arc<[Op]>, b: &Arc<[Op]>) -> bool {
    Arc::ptr_eq(a, b) || (a.len() <= 16 && a == b)
}

/// A program under construction.
#[derive(Debug, Default, Clone)]
pub struct Prog {
    ops: Vec<Op>,
}

impl Prog {
    pub fn new() -> Prog {
        Prog::default()
    }

    /// Append one op, merging it into the previous one where the result is a single op.
    pub fn push(&mut self, op: Op) -> Result<()> {
        if op.size() == 0 {
            return Ok(());
        }
        if let Some(last) = self.ops.last_mut() {
            if let Some(m) = merge(last, &op) {
                *last = m;
                return Ok(());
            }
        }
        if self.ops.len() >= MAX_OPS {
            return err!(
                Type,
                "the type's layout needs more than {MAX_OPS} separate pieces; build it from regular (vector-like) parts"
            );
        }
        self.ops.push(op);
        Ok(())
    }

    /// Append a program displaced by `d` bytes.
    pub fn extend_shifted(&mut self, ops: &[Op], d: isize) -> Result<()> {
        for op in ops {
            self.push(op.shifted(d))?;
        }
        Ok(())
    }

    /// Append `count` copies of `body`, `stride` apart, the first at `d`.
    pub fn push_repeat(
        &mut self,
        body: &Arc<[Op]>,
        count: usize,
        stride: isize,
        d: isize,
    ) -> Result<()> {
        if count == 1 && body.len() > INLINE_OPS {
            // Placed once: a loop of one keeps the description small.
            let size = prog_size(body);
            return self.push(Op::Loop {
                off: d,
                count: 1,
                stride: 0,
                body: body.clone(),
                size,
            });
        }
        for op in repeat(body, count, stride) {
            self.push(op.shifted(d))?;
        }
        Ok(())
    }

    pub fn finish(self) -> Arc<[Op]> {
        self.ops.into()
    }
}

/// `a` then `b` as one op, if possible.
fn merge(a: &Op, b: &Op) -> Option<Op> {
    match (a, b) {
        (
            &Op::Run {
                off: o1,
                len: l1,
                count: c1,
                stride: s1,
            },
            &Op::Run {
                off: o2,
                len: l2,
                count: c2,
                stride: s2,
            },
        ) => {
            if c1 == 1 && c2 == 1 && o1.checked_add(l1 as isize) == Some(o2) {
                return run(o1, l1 + l2, 1, 0);
            }
            if l1 != l2 {
                return None;
            }
            let s = match (c1, c2) {
                (1, 1) => o2.checked_sub(o1)?,
                (1, _) => s2,
                (_, 1) => s1,
                _ if s1 == s2 => s1,
                _ => return None,
            };
            // b must start where a's next block would.
            let next = (c1 as isize)
                .checked_mul(s)
                .and_then(|x| x.checked_add(o1))?;
            (next == o2).then(|| run(o1, l1, c1 + c2, s)).flatten()
        }
        (
            Op::Loop {
                off: o1,
                count: c1,
                stride: s1,
                body: b1,
                size,
            },
            Op::Loop {
                off: o2,
                count: c2,
                stride: s2,
                body: b2,
                ..
            },
        ) => {
            if !same_body(b1, b2) {
                return None;
            }
            let s = match (*c1, *c2) {
                (1, 1) => o2.checked_sub(*o1)?,
                (1, _) => *s2,
                (_, 1) => *s1,
                _ if s1 == s2 => *s1,
                _ => return None,
            };
            let next = (*c1 as isize)
                .checked_mul(s)
                .and_then(|x| x.checked_add(*o1))?;
            (next == *o2).then(|| Op::Loop {
                off: *o1,
                count: c1 + c2,
                stride: s,
                body: b1.clone(),
                size: *size,
            })
        }
        _ => None,
    }
}

/// `count` copies of the program `body`, `stride` bytes apart, the first at offset 0, as
/// canonical ops: a single block repeated becomes a run, a run that tiles becomes a longer run.
pub fn repeat(body: &Arc<[Op]>, count: usize, stride: isize) -> Vec<Op> {
    if count == 0 || body.is_empty() {
        return Vec::new();
    }
    if count == 1 {
        return body.to_vec();
    }
    if body.len() == 1 {
        if let Op::Run {
            off,
            len,
            count: k,
            stride: s,
        } = body[0]
        {
            if k == 1 {
                return run(off, len, count, stride).into_iter().collect();
            }
            if (k as isize).checked_mul(s) == Some(stride) {
                return run(off, len, k * count, s).into_iter().collect();
            }
        }
    }
    vec![Op::Loop {
        off: 0,
        count,
        stride,
        body: body.clone(),
        size: prog_size(body),
    }]
}

// -------------------------------------------------------------------------------------------
// Execution

#[inline(always)]
fn at(base: usize, off: isize) -> usize {
    base.wrapping_add(off as usize)
}

/// Copy `n` bytes between user memory at address `user` and the packed stream at `packed`
/// (`PACK`: user -> packed).
///
/// # Safety
/// Both ranges are valid for the direction of the copy and do not overlap.
#[inline(always)]
unsafe fn copy<const PACK: bool>(user: usize, packed: *mut u8, n: usize) {
    let u = user as *mut u8;
    if PACK {
        crate::mem::copy(u, packed, n)
    } else {
        crate::mem::copy(packed, u, n)
    }
}

/// Copy a value of type `T` (a fixed small size) without alignment requirements.
#[inline(always)]
unsafe fn copy_fixed<T: Copy, const PACK: bool>(user: usize, packed: *mut u8) {
    let u = user as *mut T;
    let p = packed as *mut T;
    if PACK {
        p.write_unaligned(u.read_unaligned())
    } else {
        u.write_unaligned(p.read_unaligned())
    }
}

/// Copy `n` bytes, `n` not known at compile time: blocks of up to 32 bytes (the pieces of
/// structs) with two overlapping fixed-size moves instead of a call to memcpy.
///
/// # Safety
/// As for [`copy`].
#[inline(always)]
unsafe fn copy_var<const PACK: bool>(user: usize, packed: *mut u8, n: usize) {
    macro_rules! two {
        ($t:ty) => {{
            let w = std::mem::size_of::<$t>();
            copy_fixed::<$t, PACK>(user, packed);
            copy_fixed::<$t, PACK>(user.wrapping_add(n - w), packed.add(n - w));
        }};
    }
    match n {
        0 => {}
        1 => copy_fixed::<u8, PACK>(user, packed),
        2..=3 => two!(u16),
        4..=7 => two!(u32),
        8..=15 => two!(u64),
        16..=32 => two!(u128),
        _ => copy::<PACK>(user, packed, n),
    }
}

/// A strided run: `count` blocks of `len` bytes from `addr`, `stride` apart. Returns the
/// packed position after it. Small block lengths get a loop of fixed-size moves.
///
/// # Safety
/// Every block and `count * len` bytes at `p` are valid for the copy.
#[inline(always)]
unsafe fn strided<const PACK: bool>(
    mut addr: usize,
    len: usize,
    count: usize,
    stride: isize,
    mut p: *mut u8,
) -> *mut u8 {
    macro_rules! fixed {
        ($t:ty) => {{
            for _ in 0..count {
                copy_fixed::<$t, PACK>(addr, p);
                addr = addr.wrapping_add(stride as usize);
                p = p.add(len);
            }
        }};
    }
    match len {
        1 => fixed!(u8),
        2 => fixed!(u16),
        4 => fixed!(u32),
        8 => fixed!(u64),
        16 => fixed!(u128),
        _ => {
            for _ in 0..count {
                copy_var::<PACK>(addr, p, len);
                addr = addr.wrapping_add(stride as usize);
                p = p.add(len);
            }
        }
    }
    p
}

/// Run a whole program for one element at `base`; returns the packed position after it.
///
/// # Safety
/// Every byte the program names (relative to `base`) and `prog_size(ops)` bytes at `p` are
/// valid for the copy.
pub unsafe fn exec<const PACK: bool>(ops: &[Op], base: usize, mut p: *mut u8) -> *mut u8 {
    for op in ops {
        match *op {
            Op::Run {
                off,
                len,
                count,
                stride,
            } => {
                if count == 1 {
                    copy_var::<PACK>(at(base, off), p, len);
                    p = p.add(len);
                } else {
                    p = strided::<PACK>(at(base, off), len, count, stride, p);
                }
            }
            Op::Loop {
                off,
                count,
                stride,
                ref body,
                ..
            } => {
                let mut b = at(base, off);
                for _ in 0..count {
                    p = exec::<PACK>(body, b, p);
                    b = b.wrapping_add(stride as usize);
                }
            }
        }
    }
    p
}

/// Run `count` elements, `extent` apart, from `base`: one strided run when the element is a
/// single block or a run that tiles, else the element program per element.
///
/// # Safety
/// As for [`exec`], for every element.
pub unsafe fn exec_count<const PACK: bool>(
    ops: &[Op],
    count: usize,
    extent: isize,
    base: usize,
    mut p: *mut u8,
) -> *mut u8 {
    if let [Op::Run {
        off,
        len,
        count: k,
        stride: s,
    }] = *ops
    {
        if k == 1 {
            return if extent == len as isize {
                copy::<PACK>(at(base, off), p, len * count);
                p.add(len * count)
            } else {
                strided::<PACK>(at(base, off), len, count, extent, p)
            };
        }
        if (k as isize).wrapping_mul(s) == extent {
            return strided::<PACK>(at(base, off), len, k * count, s, p);
        }
    }
    let mut b = base;
    for _ in 0..count {
        p = exec::<PACK>(ops, b, p);
        b = b.wrapping_add(extent as usize);
    }
    p
}

/// Every contiguous block of one element of a program, as (byte offset from `base`, length),
/// in packing order (a reduction over a derived type applies its kernel block by block).
pub fn for_each_block(ops: &[Op], base: isize, f: &mut impl FnMut(isize, usize)) {
    for op in ops {
        match *op {
            Op::Run {
                off,
                len,
                count,
                stride,
            } => {
                for j in 0..count as isize {
                    f(base + off + j * stride, len);
                }
            }
            Op::Loop {
                off,
                count,
                stride,
                ref body,
                ..
            } => {
                for j in 0..count as isize {
                    for_each_block(body, base + off + j * stride, f);
                }
            }
        }
    }
}

/// A window of the packed stream: skip the first `skip` bytes, then copy at most `budget`.
pub struct Window {
    pub skip: usize,
    pub budget: usize,
    pub p: *mut u8,
}

impl Window {
    /// Copy the part of a `len`-byte piece at `addr` that falls in the window. Returns true
    /// when the budget is used up.
    #[inline(always)]
    unsafe fn piece<const PACK: bool>(&mut self, addr: usize, len: usize) -> bool {
        if self.skip >= len {
            self.skip -= len;
            return false;
        }
        let from = self.skip;
        self.skip = 0;
        let n = (len - from).min(self.budget);
        copy::<PACK>(addr.wrapping_add(from), self.p, n);
        self.p = self.p.add(n);
        self.budget -= n;
        self.budget == 0
    }
}

/// Run the part of a program (one element at `base`) that falls in the window. Returns true
/// when the budget is used up. Whole ops and whole loop repetitions before the window are
/// skipped by arithmetic.
///
/// # Safety
/// As for [`exec`], for the bytes inside the window.
pub unsafe fn exec_window<const PACK: bool>(ops: &[Op], base: usize, w: &mut Window) -> bool {
    for op in ops {
        if w.budget == 0 {
            return true;
        }
        let size = op.size();
        if w.skip >= size {
            w.skip -= size;
            continue;
        }
        if w.skip == 0 && w.budget >= size {
            // Wholly inside the window: the plain copy, without window arithmetic per block.
            w.p = exec::<PACK>(std::slice::from_ref(op), base, w.p);
            w.budget -= size;
            continue;
        }
        match *op {
            Op::Run {
                off,
                len,
                count,
                stride,
            } => {
                let first = w.skip / len;
                w.skip %= len;
                let mut addr = at(base, off).wrapping_add((first as isize * stride) as usize);
                let mut i = first;
                if w.skip > 0 {
                    if w.piece::<PACK>(addr, len) {
                        return true;
                    }
                    addr = addr.wrapping_add(stride as usize);
                    i += 1;
                }
                // Whole blocks that fit, then a partial one.
                let whole = (count - i).min(w.budget / len);
                w.p = strided::<PACK>(addr, len, whole, stride, w.p);
                w.budget -= whole * len;
                i += whole;
                addr = addr.wrapping_add((whole as isize).wrapping_mul(stride) as usize);
                if i < count && w.piece::<PACK>(addr, len) {
                    return true;
                }
            }
            Op::Loop {
                off,
                count,
                stride,
                ref body,
                size,
            } => {
                let first = w.skip / size;
                w.skip %= size;
                let mut b = at(base, off).wrapping_add((first as isize * stride) as usize);
                for _ in first..count {
                    if exec_window::<PACK>(body, b, w) {
                        return true;
                    }
                    b = b.wrapping_add(stride as usize);
                }
            }
        }
    }
    w.budget == 0
}

/// The window over `count` elements `extent` apart (see [`exec_window`]); returns the bytes
/// copied.
///
/// # Safety
/// As for [`exec`], for the bytes inside the window.
pub unsafe fn exec_count_window<const PACK: bool>(
    ops: &[Op],
    elem_size: usize,
    count: usize,
    extent: isize,
    base: usize,
    skip: usize,
    budget: usize,
    p: *mut u8,
) -> usize {
    if elem_size == 0 || budget == 0 {
        return 0;
    }
    let mut w = Window { skip, budget, p };
    let mut i = w.skip / elem_size;
    w.skip %= elem_size;
    let mut b = base.wrapping_add((i as isize).wrapping_mul(extent) as usize);
    // A partial first element, whole elements by the plain copy, a partial last element.
    if w.skip > 0 && i < count {
        if exec_window::<PACK>(ops, b, &mut w) {
            return budget - w.budget;
        }
        i += 1;
        b = b.wrapping_add(extent as usize);
    }
    let whole = count.saturating_sub(i).min(w.budget / elem_size);
    if whole > 0 {
        w.p = exec_count::<PACK>(ops, whole, extent, b, w.p);
        w.budget -= whole * elem_size;
        i += whole;
        b = b.wrapping_add((whole as isize).wrapping_mul(extent) as usize);
    }
    if i < count && w.budget > 0 {
        exec_window::<PACK>(ops, b, &mut w);
    }
    budget - w.budget
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(off: isize, len: usize, count: usize, stride: isize) -> Op {
        run(off, len, count, stride).unwrap()
    }

    #[test]
    fn merging() {
        let mut p = Prog::new();
        for i in 0..1000 {
            p.push(r(i * 16, 8, 1, 0)).unwrap();
        }
        assert_eq!(&*p.finish(), &[r(0, 8, 1000, 16)]);
        let mut p = Prog::new();
        p.push(r(0, 4, 1, 0)).unwrap();
        p.push(r(4, 4, 1, 0)).unwrap();
        assert_eq!(&*p.finish(), &[r(0, 8, 1, 0)]);
        // Runs that continue each other join; a different stride does not.
        let mut p = Prog::new();
        p.push(r(0, 4, 3, 10)).unwrap();
        p.push(r(30, 4, 2, 10)).unwrap();
        p.push(r(50, 4, 2, 11)).unwrap();
        assert_eq!(&*p.finish(), &[r(0, 4, 5, 10), r(50, 4, 2, 11)]);
        // A tiling run collapses to a block.
        assert_eq!(run(0, 4, 3, 4), Some(r(0, 12, 1, 0)));
        let body: Arc<[Op]> = vec![r(0, 4, 2, 8)].into();
        assert_eq!(repeat(&body, 10, 16), vec![r(0, 4, 20, 8)]);
        let body: Arc<[Op]> = vec![r(0, 4, 1, 0), r(8, 2, 1, 0)].into();
        let rep = repeat(&body, 3, 12);
        assert!(matches!(rep[..], [Op::Loop { count: 3, .. }]));
        let mut p = Prog::new();
        p.push_repeat(&body, 3, 12, 0).unwrap();
        p.push_repeat(&body, 2, 12, 36).unwrap();
        assert!(matches!(
            p.finish()[..],
            [Op::Loop {
                count: 5,
                stride: 12,
                ..
            }]
        ));
    }

    #[test]
    fn variable_copies_of_every_small_length() {
        let src: Vec<u8> = (0..100u8).collect();
        for n in 0..=40 {
            let mut dst = vec![0xffu8; 64];
            unsafe { copy_var::<true>(src.as_ptr() as usize + 3, dst.as_mut_ptr().add(1), n) };
            assert_eq!(&dst[1..1 + n], &src[3..3 + n], "pack {n}");
            assert!(dst[1 + n..].iter().all(|b| *b == 0xff) && dst[0] == 0xff);
            let mut back = vec![0xeeu8; 64];
            unsafe {
                copy_var::<false>(back.as_mut_ptr() as usize + 2, dst.as_mut_ptr().add(1), n)
            };
            assert_eq!(&back[2..2 + n], &src[3..3 + n], "unpack {n}");
            assert!(
                back[2 + n..].iter().all(|b| *b == 0xee) && back[..2].iter().all(|b| *b == 0xee)
            );
        }
    }

    #[test]
    fn windows_match_whole_copies() {
        let body: Arc<[Op]> = vec![r(1, 3, 4, 7), r(40, 5, 1, 0)].into();
        let ops: Arc<[Op]> = vec![
            r(0, 2, 1, 0),
            Op::Loop {
                off: 50,
                count: 3,
                stride: 50,
                body: body.clone(),
                size: prog_size(&body),
            },
        ]
        .into();
        let size = prog_size(&ops);
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut whole = vec![0u8; size * 3];
        unsafe { exec_count::<true>(&ops, 3, 220, src.as_ptr() as usize, whole.as_mut_ptr()) };
        for skip in 0..whole.len() {
            for budget in [0, 1, 2, 5, 17, 1000] {
                let mut part = vec![0u8; budget];
                let n = unsafe {
                    exec_count_window::<true>(
                        &ops,
                        size,
                        3,
                        220,
                        src.as_ptr() as usize,
                        skip,
                        budget,
                        part.as_mut_ptr(),
                    )
                };
                let want = &whole[skip..(skip + budget).min(whole.len())];
                assert_eq!(&part[..n], want, "skip {skip} budget {budget}");
            }
        }
    }
}
