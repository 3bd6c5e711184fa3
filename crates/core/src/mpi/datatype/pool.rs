//! Reusable buffers for packed copies of non-contiguous messages.
//!
//! A non-contiguous send packs into a temporary buffer, and a non-contiguous receive lands in
//! one before it is unpacked. Allocating those afresh for every message costs page faults (large
//! allocations come straight from the kernel, zeroed) on top of the copy itself; programs send
//! the same shapes over and over, so a few buffers are kept per thread and handed out again.
//!
//! Kept: at most [`KEEP`] buffers per thread, each between [`MIN_KEPT`] and [`MAX_KEPT`] bytes
//! of capacity. A buffer handed out always has initialized contents (so it may be exposed as a
//! byte slice); which bytes it holds is unspecified.

use std::cell::RefCell;

const KEEP: usize = 6;
const MIN_KEPT: usize = 4096;
const MAX_KEPT: usize = 64 << 20;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// The smallest kept buffer with room for `len` bytes (removed from the pool), if any.
fn best_fit(len: usize) -> Option<Vec<u8>> {
    if len < MIN_KEPT {
        return None;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let i = p
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= len)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i)?;
        Some(p.swap_remove(i))
    })
}

/// An empty buffer with capacity for at least `len` bytes (for packing into).
pub fn take_empty(len: usize) -> Vec<u8> {
    match best_fit(len) {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(len),
    }
}

/// A buffer of exactly `len` initialized bytes (for receiving into).
pub fn take_filled(len: usize) -> Vec<u8> {
    match best_fit(len) {
        Some(mut v) => {
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, 0);
            }
            v
        }
        None => vec![0u8; len],
    }
}

/// Return a buffer for reuse (dropped if it is too small or too big to keep, or the pool is
/// full: then the smallest of the kept ones and it is dropped).
pub fn give(v: Vec<u8>) {
    let cap = v.capacity();
    if !(MIN_KEPT..=MAX_KEPT).contains(&cap) {
        return;
    }
    // During thread teardown the pool may already be gone: then the buffer is just freed.
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEEP {
            p.push(v);
            return;
        }
        if let Some((i, small)) = p.iter().enumerate().min_by_key(|(_, v)| v.capacity()) {
            if small.capacity() < cap {
                p[i] = v;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_best_fit() {
        let a = take_empty(10_000);
        let pa = a.as_ptr();
        give(a);
        let b = take_filled(8_000);
        assert_eq!(b.len(), 8_000);
        assert_eq!(b.as_ptr(), pa, "reused");
        give(b);
        let c = take_empty(20_000);
        assert!(c.capacity() >= 20_000);
        assert_ne!(c.as_ptr(), pa);
        let small = take_filled(100);
        assert_eq!(small, vec![0u8; 100]);
        give(c);
        give(small);
    }
}
