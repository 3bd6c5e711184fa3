//! Memory for the message path: the one type user buffers travel in below the C layer
//! ([`Span`]); copies of a few bytes inline instead of through a call to `memcpy`, which costs
//! more than the copy itself, and copies that `memcpy` makes slow on some processors done
//! another way ([`copy`], [`copy_overlap`]); buffers for unexpected messages kept for reuse ([`BufCache`]).

/// Memory lent to an operation: `len` bytes at `ptr`, a user's send or receive buffer (or
/// the engine's own), valid until the operation that holds the span is over.
///
/// The one way to make a span from a pointer is [`Span::new`], whose caller states that
/// invariant; everything that takes a span afterwards (transports reading a region into it,
/// placing a payload in it) relies on it and needs no `unsafe` of its own to be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    ptr: *mut u8,
    len: usize,
}

impl Span {
    /// No memory.
    pub const EMPTY: Span = Span {
        ptr: std::ptr::null_mut(),
        len: 0,
    };

    /// # Safety
    /// Unless `len` is 0, `ptr` points to `len` bytes that stay allocated until the operation
    /// given this span (and every span cut from it) is over; a span that is written (a receive
    /// buffer, a placement) is not read or written by anyone else meanwhile, and one that is
    /// only read (a send buffer) is not written meanwhile.
    #[inline(always)]
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Span {
        Span { ptr, len }
    }

    /// A span over a slice that outlives the operation (the caller's promise, as for
    /// [`Span::new`]).
    ///
    /// # Safety
    /// As for [`Span::new`].
    #[inline(always)]
    pub unsafe fn of(s: &[u8]) -> Span {
        Span {
            ptr: s.as_ptr() as *mut u8,
            len: s.len(),
        }
    }

    #[inline(always)]
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `n` bytes at `offset`, or None when they are not all inside.
    #[inline]
    pub fn sub(&self, offset: usize, n: usize) -> Option<Span> {
        let end = offset.checked_add(n)?;
        (end <= self.len).then(|| Span {
            // SAFETY: `offset <= len`: inside (or one past) the span's memory.
            ptr: if n == 0 {
                self.ptr
            } else {
                unsafe { self.ptr.add(offset) }
            },
            len: n,
        })
    }

    /// Copy `src` into the start of the span (at most `len` bytes); returns the bytes copied.
    #[inline]
    pub fn write(&self, src: &[u8]) -> usize {
        let n = src.len().min(self.len);
        if n > 0 {
            // SAFETY: the span's memory is writable for `len` bytes and not otherwise accessed
            // (Span::new's contract); `src` is a distinct slice.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr, n) };
        }
        n
    }

    /// The span's bytes.
    ///
    /// # Safety
    /// The returned slice must not outlive the operation, nor overlap a write to the span.
    #[inline]
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }

    /// The span's bytes, to write.
    ///
    /// # Safety
    /// As for [`Span::as_slice`], and no other reference to the bytes may be alive.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        std::slice::from_raw_parts_mut(self.ptr, self.len)
    }
}

/// Copy `n` bytes from `src` to `dst`: a few inline, those that glibc's memcpy would make
/// slowly (`aliases`) backwards, the rest with memcpy.
///
/// # Safety
/// As for `std::ptr::copy_nonoverlapping`.
#[inline(always)]
pub unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n <= 16 {
        if n >= 8 {
            // Two possibly overlapping 8-byte moves cover 8..=16 bytes.
            let a = (src as *const u64).read_unaligned();
            let b = (src.add(n - 8) as *const u64).read_unaligned();
            (dst as *mut u64).write_unaligned(a);
            (dst.add(n - 8) as *mut u64).write_unaligned(b);
        } else if n >= 4 {
            let a = (src as *const u32).read_unaligned();
            let b = (src.add(n - 4) as *const u32).read_unaligned();
            (dst as *mut u32).write_unaligned(a);
            (dst.add(n - 4) as *mut u32).write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
        return;
    }
    if (ALIAS_MIN..=ALIAS_MAX).contains(&n) && aliases(src, dst, n) {
        return copy_backward(src, dst, n);
    }
    std::ptr::copy_nonoverlapping(src, dst, n);
}

/// `std::ptr::copy` (overlap allowed), with up to 64 bytes done in registers instead of a call
/// to memmove: the sizes of one basic element directly, others as two (or four) overlapping
/// unaligned words, every load before the first store (so overlapping buffers are fine); and
/// copies that memmove would make slowly (`aliases`) done backwards.
///
/// # Safety
/// As `std::ptr::copy`.
#[inline(always)]
pub unsafe fn copy_overlap(src: *const u8, dst: *mut u8, n: usize) {
    macro_rules! reg {
        ($t:ty) => {
            (dst as *mut $t).write_unaligned((src as *const $t).read_unaligned())
        };
    }
    // Two words of type $t: the first and the last (overlapping when n < 2 * size).
    macro_rules! two {
        ($t:ty) => {{
            let k = std::mem::size_of::<$t>();
            let a = (src as *const $t).read_unaligned();
            let b = (src.add(n - k) as *const $t).read_unaligned();
            (dst as *mut $t).write_unaligned(a);
            (dst.add(n - k) as *mut $t).write_unaligned(b);
        }};
    }
    match n {
        1 => reg!(u8),
        2 => reg!(u16),
        4 => reg!(u32),
        8 => reg!(u64),
        16 => reg!(u128),
        3 => two!(u16),
        5..=7 => two!(u32),
        9..=15 => two!(u64),
        17..=32 => two!(u128),
        33..=64 => {
            let w = |o: usize| (src.add(o) as *const u128).read_unaligned();
            let (a, b, c, d) = (w(0), w(16), w(n - 32), w(n - 16));
            let p = |o: usize, v: u128| (dst.add(o) as *mut u128).write_unaligned(v);
            p(0, a);
            p(16, b);
            p(n - 32, c);
            p(n - 16, d);
        }
        ALIAS_MIN..=ALIAS_MAX if aliases(src, dst, n) => copy_backward(src, dst, n),
        _ => std::ptr::copy(src, dst, n),
    }
}

/// Sizes where glibc's memmove copies with `rep movsb`, which on some x86-64 processors (this
/// project's AMD EPYC machines) runs 15-20x slower when the destination lies 1-63 bytes past
/// the source modulo 4096 (4K aliasing: every load seems to depend on a store just made).
/// A page-aligned window and a `malloc`ed user buffer (page + 16) meet exactly that on a
/// one-sided get; a ring slot and a user buffer can on any copy.
/// Larger copies use non-temporal stores and are not affected.
pub(crate) const ALIAS_MIN: usize = 2048;
pub(crate) const ALIAS_MAX: usize = 512 << 10;

/// Would `memmove(dst, src, n)` be slow here ([`short_distance_slow`] and
/// [`slow_distance`]), and may the copy go backwards (not a destination below the source
/// that overlaps it)?
#[inline(always)]
pub(crate) fn aliases(src: *const u8, dst: *mut u8, n: usize) -> bool {
    let (s, d) = (src as usize, dst as usize);
    slow_distance(s, d) && !(d < s && d + n > s) && short_distance_slow()
}

/// Is `dst` 1-63 bytes past `src` modulo 4096 (the distance at which `rep movsb` is slow on
/// the processors of [`short_distance_slow`], glibc's and the kernel's copies alike)?
#[inline(always)]
pub(crate) fn slow_distance(src: usize, dst: usize) -> bool {
    (1..64).contains(&(dst.wrapping_sub(src) & 4095))
}

/// Is a copy at a [`slow_distance`] slow on this processor? Measured once per process
/// ([`measure_short_distance`]): on the AMD EPYC machines where the trap was found an 8 KiB
/// `memcpy` 16 bytes past its source took 4.4 us against 0.16 (and the kernel's copy 5x its
/// time), so copies at that distance go backwards ([`copy_backward`]) or, from another
/// process, through a bounce buffer (`transport::shm::cma`). On an Intel Xeon (session 45)
/// the distance costs nothing (8 KiB 0.12 against 0.09 us, 64 KiB 2.56 against 2.50, the
/// kernel's copy 10-15% more), and the backward copy took twice memcpy's time: one-sided gets
/// of 8-64 KiB from a page-aligned window into a `malloc`ed buffer ran at 0.56-0.64x Open
/// MPI's bandwidth until this check.
#[inline(always)]
pub(crate) fn short_distance_slow() -> bool {
    static SLOW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SLOW.get_or_init(measure_short_distance)
}

/// Time 8 KiB memcpys (`rep movsb` in glibc at that size) at distance 16 against distance 0,
/// in cache, the best of 32 rounds of each: slow when the first takes more than 4x the
/// second (the trap costs 15-20x, noise on a loaded machine slows single rounds, not the
/// best). About 20 us, once.
#[cold]
fn measure_short_distance() -> bool {
    const N: usize = 8192;
    let mut buf = vec![0u8; 4 * 4096 + 2 * N];
    let base = buf.as_mut_ptr();
    let page = base.wrapping_add(base.align_offset(4096));
    let src = page;
    let near = page.wrapping_add(N + 4096); // distance 0 modulo 4096, apart from `src`
    let best = |dst: *mut u8| {
        let mut best = std::time::Duration::MAX;
        for _ in 0..32 {
            let t = std::time::Instant::now();
            for _ in 0..4 {
                // SAFETY: both ranges lie in `buf` and do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(src, dst, N) };
                std::hint::black_box(dst);
            }
            best = best.min(t.elapsed());
        }
        best
    };
    best(near); // warm both ranges
    let d0 = best(near);
    let d16 = best(near.wrapping_add(16));
    drop(buf);
    d16 > d0 * 4
}

/// Copy `n` bytes from the end down, 64 at a time through vector registers (all four loads of
/// a step before its stores), then the first `n % 64` with memmove: as `std::ptr::copy` for a
/// destination above the source or apart from it.
///
/// # Safety
/// As `std::ptr::copy`, and not a destination below an overlapping source.
#[inline(never)]
pub(crate) unsafe fn copy_backward(src: *const u8, dst: *mut u8, n: usize) {
    let mut i = n;
    while i >= 64 {
        i -= 64;
        let w = |o: usize| (src.add(i + o) as *const u128).read_unaligned();
        let (a, b, c, d) = (w(0), w(16), w(32), w(48));
        let p = |o: usize, v: u128| (dst.add(i + o) as *mut u128).write_unaligned(v);
        p(0, a);
        p(16, b);
        p(32, c);
        p(48, d);
    }
    std::ptr::copy(src, dst, i);
}

/// Buffers for the payloads of unexpected messages, kept for reuse.
///
/// A message that arrives before its receive is posted waits in a buffer of its own until the
/// receive takes it. Allocating that buffer afresh costs far more than copying into it: glibc
/// gives freed memory back to the kernel (it trims the top of the heap beyond 128 KiB free and
/// unmaps large blocks), so every burst of unexpected messages faults its pages in again.
/// Measured with bench/prepost, eager messages into unposted receives, two ranks: 32 KiB over
/// shared memory 3.1 GB/s with fresh buffers, 26.7 GB/s with memory kept; 256 KiB over TCP
/// 1.7 and 8.2 GB/s.
///
/// Buffers are kept by power-of-two capacity, up to `limit` bytes in all (the `unexpected_cache`
/// tunable); beyond that they go back to the allocator.
#[derive(Debug, Default)]
pub struct BufCache {
    /// Free buffers by class: class `c` holds buffers of at least `1 << c` bytes.
    classes: Vec<Vec<Vec<u8>>>,
    kept: usize,
    limit: usize,
}

impl BufCache {
    pub fn new(limit: usize) -> BufCache {
        BufCache {
            classes: Vec::new(),
            kept: 0,
            limit,
        }
    }

    /// Bytes held in free buffers.
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// A buffer holding a copy of `data`.
    pub fn copy_of(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = self.take(data.len());
        v.extend_from_slice(data);
        v
    }

    /// An empty buffer with room for `len` bytes.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        if len == 0 {
            return Vec::new();
        }
        let class = len.next_power_of_two().trailing_zeros() as usize;
        if let Some(v) = self.classes.get_mut(class).and_then(Vec::pop) {
            self.kept -= v.capacity();
            return v;
        }
        Vec::with_capacity(1 << class)
    }

    /// Return a buffer for reuse (or to the allocator, beyond the limit).
    pub fn give(&mut self, mut v: Vec<u8>) {
        let cap = v.capacity();
        if cap == 0 || self.kept + cap > self.limit {
            return;
        }
        let class = (usize::BITS - 1 - cap.leading_zeros()) as usize;
        if self.classes.len() <= class {
            self.classes.resize_with(class + 1, Vec::new);
        }
        v.clear();
        self.classes[class].push(v);
        self.kept += cap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_overlap_is_memmove_for_every_size_and_overlap() {
        for n in 0..=80usize {
            for (from, to) in [(0usize, 100usize), (3, 101), (10, 13), (13, 10), (5, 5)] {
                let mut want: Vec<u8> = (0..200).map(|i| (i * 7 + 1) as u8).collect();
                let mut got = want.clone();
                // SAFETY: both ranges lie in the 200-byte buffers.
                unsafe {
                    let w = want.as_mut_ptr();
                    std::ptr::copy(w.add(from), w.add(to), n);
                    let g = got.as_mut_ptr();
                    copy_overlap(g.add(from), g.add(to), n);
                }
                assert_eq!(got, want, "n {n}, from {from} to {to}");
            }
        }
    }

    #[test]
    fn copies_past_the_aliasing_distance_are_memmove() {
        // Sizes around the bounds and odd ones, every distance class: apart (aliasing or
        // not), overlapping with the destination above or below the source.
        let buf = 3 * ALIAS_MAX + 3 * 4096;
        let mut want: Vec<u8> = (0..buf).map(|i| (i * 31 + i / 251) as u8).collect();
        let mut got = want.clone();
        let mut apart = want.clone();
        for n in [
            2047usize,
            2048,
            2049,
            4095,
            8192 + 17,
            65536,
            ALIAS_MAX,
            ALIAS_MAX + 1,
        ] {
            for (from, to) in [
                (0usize, 4096 + 16),
                (16, 2 * 4096 + 63),
                (5, ALIAS_MAX + 4096 + 64),
                (100, 100 + 4096 * 2 + 1),
                (1000, 1016),
                (4096 + 40, 40),
                (ALIAS_MAX + 8192, 8192 + 16),
            ] {
                if from.max(to) + n > buf {
                    continue;
                }
                // SAFETY: both ranges lie in the buffers.
                unsafe {
                    let w = want.as_mut_ptr();
                    std::ptr::copy(w.add(from), w.add(to), n);
                    let g = got.as_mut_ptr();
                    copy_overlap(g.add(from), g.add(to), n);
                    if from + n <= to || to + n <= from {
                        // Apart: `copy` must do the same (onto a copy taken before).
                        let c = apart.as_mut_ptr();
                        copy(c.add(from), c.add(to), n);
                    }
                }
                assert!(got == want, "n {n}, from {from} to {to}");
                if from + n <= to || to + n <= from {
                    assert!(apart == want, "copy: n {n}, from {from} to {to}");
                }
                apart.copy_from_slice(&want);
            }
        }
        let p = 4096 * 8;
        assert!(slow_distance(p, p + 4096 + 16) && slow_distance(p, p + 63));
        assert!(!slow_distance(p, p + 64) && !slow_distance(p, p) && !slow_distance(p + 16, p));
        assert_eq!(
            aliases(p as *const u8, (p + 4096 + 16) as *mut u8, 8192),
            short_distance_slow()
        );
        assert!(!aliases(p as *const u8, (p + 64) as *mut u8, 8192));
        assert!(
            !aliases(p as *const u8, (p - 4096 + 16) as *mut u8, 8192),
            "overlaps below"
        );
    }

    /// The backward copy is right whether or not this machine uses it.
    #[test]
    fn the_backward_copy_copies() {
        let src: Vec<u8> = (0..70_000).map(|i| (i * 13 + i / 97) as u8).collect();
        for n in [0usize, 1, 63, 64, 65, 4096 + 17, 70_000 - 16] {
            let mut dst = vec![0u8; 70_016];
            // SAFETY: `n` bytes fit both, which are apart.
            unsafe { copy_backward(src.as_ptr(), dst.as_mut_ptr().add(16), n) };
            assert_eq!(&dst[16..16 + n], &src[..n], "n {n}");
            assert!(dst[..16].iter().chain(&dst[16 + n..]).all(|&b| b == 0));
        }
    }

    #[test]
    fn cached_buffers_are_reused_by_size_and_bounded() {
        let mut c = BufCache::new(100_000);
        let a = c.copy_of(&[7u8; 3000]);
        assert_eq!(&a[..], &[7u8; 3000][..]);
        assert_eq!(a.capacity(), 4096);
        let ptr = a.as_ptr();
        c.give(a);
        assert_eq!(c.kept(), 4096);
        // A message of the same class gets the same memory back, emptied.
        let b = c.copy_of(&[1u8; 2049]);
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!(b.len(), 2049);
        assert_eq!(c.kept(), 0);
        // A smaller class does not take it.
        c.give(b);
        let small = c.take(100);
        assert!(small.capacity() >= 100 && small.capacity() < 4096);
        assert_eq!(c.kept(), 4096);
        // Beyond the limit buffers go back to the allocator.
        c.give(Vec::with_capacity(65536));
        c.give(Vec::with_capacity(65536));
        assert_eq!(c.kept(), 4096 + 65536);
        assert!(c.take(0).capacity() == 0);
        let mut none = BufCache::new(0);
        none.give(vec![0u8; 10]);
        assert_eq!(none.kept(), 0);
    }

    #[test]
    fn every_small_length() {
        let src: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for n in 0..40 {
            let mut dst = vec![0u8; 48];
            unsafe { copy(src.as_ptr(), dst.as_mut_ptr().add(3), n) };
            assert_eq!(&dst[3..3 + n], &src[..n], "n={n}");
            assert!(dst[..3].iter().all(|b| *b == 0));
            assert!(
                dst[3 + n..].iter().all(|b| *b == 0),
                "n={n}: wrote past the end"
            );
        }
    }
}
