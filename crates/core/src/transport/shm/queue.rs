//! The shared receive queue: one per receiving process, any local peer may post to it.
//!
//! A bounded multi-producer single-consumer queue of fixed-size cells (the sequence-number
//! design of D. Vyukov's bounded MPMC queue, with a single consumer). Layout:
//! ```text
//! [0..64)     enqueue position: u64 (producers CAS it)
//! [64..128)   dequeue position: u64 (consumer only; kept here so the queue is self-describing)
//! [128..)     cells of `cell_bytes`: seq: u64, len: u32, from: u32, frame header (32), payload
//! ```
//! Cell `i` starts with `seq = i`. A producer that wins position `p` (CAS from `p` to `p+1`)
//! owns cell `p % n` when its `seq == p`; it fills it and stores `seq = p + 1` (release). The
//! consumer at position `d` takes cell `d % n` when `seq == d + 1` and frees it with
//! `seq = d + n`. Posts by one producer are therefore delivered in the order it made them.
//! A full queue is reported as "not now", never as an error.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::Gpid;
use crate::transport::HEADER_LEN;

pub const QUEUE_HDR: usize = 128;
/// Bytes of a cell before its payload.
pub const CELL_HDR: usize = 16 + HEADER_LEN;

pub fn queue_bytes(cells: usize, cell_bytes: usize) -> usize {
    QUEUE_HDR + cells * cell_bytes
}

#[derive(Clone, Copy)]
struct Q {
    base: *mut u8,
    cells: u64,
    cell_bytes: usize,
}

impl Q {
    #[inline(always)]
    fn enq(&self) -> &AtomicU64 {
        // SAFETY: `base` points to an initialised queue, 64-byte aligned.
        unsafe { &*(self.base as *const AtomicU64) }
    }
    #[inline(always)]
    fn deq(&self) -> &AtomicU64 {
        // SAFETY: as above; offset 64 is inside the queue header.
        unsafe { &*(self.base.add(64) as *const AtomicU64) }
    }
    #[inline(always)]
    fn cell(&self, pos: u64) -> *mut u8 {
        // SAFETY: the index is reduced modulo the cell count.
        unsafe {
            self.base
                .add(QUEUE_HDR + ((pos % self.cells) as usize) * self.cell_bytes)
        }
    }
    #[inline(always)]
    fn seq(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: each cell starts with an 8-byte aligned sequence word (cell_bytes % 64 == 0).
        unsafe { &*(self.cell(pos) as *const AtomicU64) }
    }
}

/// Initialise a queue in fresh shared memory.
///
/// # Safety
/// `base` must point to `queue_bytes(cells, cell_bytes)` writable bytes, 64-byte aligned, not
/// yet shared; `cell_bytes` must be a multiple of 64 and larger than [`CELL_HDR`].
pub unsafe fn init_queue(base: *mut u8, cells: usize, cell_bytes: usize) {
    std::ptr::write_bytes(base, 0, QUEUE_HDR);
    let q = Q {
        base,
        cells: cells as u64,
        cell_bytes,
    };
    for i in 0..cells as u64 {
        q.seq(i).store(i, Ordering::Relaxed);
    }
    std::sync::atomic::fence(Ordering::Release);
}

/// A producer's handle on some receiver's queue.
#[derive(Clone, Copy)]
pub struct Producer {
    q: Q,
}

// SAFETY: producers coordinate through atomics only.
unsafe impl Send for Producer {}

impl Producer {
    /// # Safety
    /// `base` must point to a queue initialised with the same geometry, mapped while this lives.
    pub unsafe fn new(base: *mut u8, cells: usize, cell_bytes: usize) -> Producer {
        Producer {
            q: Q {
                base,
                cells: cells as u64,
                cell_bytes,
            },
        }
    }

    pub fn max_payload(&self) -> usize {
        self.q.cell_bytes - CELL_HDR
    }

    /// Post one frame from process `from`. Returns false when the queue is full (not now).
    pub fn push(&self, from: Gpid, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        assert!(
            len <= self.max_payload(),
            "queue frame {len} > {}",
            self.max_payload()
        );
        let q = self.q;
        let mut pos = q.enq().load(Ordering::Relaxed);
        loop {
            let seq = q.seq(pos).load(Ordering::Acquire);
            let diff = seq as i64 - pos as i64;
            if diff == 0 {
                match q.enq().compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                return false;
            } else {
                pos = q.enq().load(Ordering::Relaxed);
            }
        }
        let c = q.cell(pos);
        // SAFETY: winning the CAS for `pos` while `seq == pos` gives this producer exclusive
        // use of the cell until it publishes `seq = pos + 1`.
        unsafe {
            (c.add(8) as *mut u32).write(len as u32);
            (c.add(12) as *mut u32).write(from.get());
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), c.add(16), HEADER_LEN);
            let mut at = c.add(CELL_HDR);
            for part in parts {
                crate::mem::copy(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
        }
        q.seq(pos).store(pos + 1, Ordering::Release);
        true
    }
}

/// The receiving process's side.
pub struct Consumer {
    q: Q,
    pos: u64,
}

// SAFETY: the single consumer; the engine serialises access.
unsafe impl Send for Consumer {}

impl Consumer {
    /// # Safety
    /// As for [`Producer::new`], and this must be the only consumer.
    pub unsafe fn new(base: *mut u8, cells: usize, cell_bytes: usize) -> Consumer {
        let q = Q {
            base,
            cells: cells as u64,
            cell_bytes,
        };
        let pos = q.deq().load(Ordering::Relaxed);
        Consumer { q, pos }
    }

    #[inline(always)]
    pub fn ready(&self) -> bool {
        self.q.seq(self.pos).load(Ordering::Acquire) == self.pos + 1
    }

    /// Hand the next cell, if any, to `f(from, header, payload)`; returns whether one was taken.
    #[inline]
    pub fn pop(&mut self, f: impl FnOnce(Gpid, &[u8; HEADER_LEN], &[u8])) -> bool {
        if !self.ready() {
            return false;
        }
        let c = self.q.cell(self.pos);
        let max = self.q.cell_bytes - CELL_HDR;
        // SAFETY: `seq == pos + 1` (acquire) means the producer finished writing this cell.
        // The length is clamped to the cell so a corrupt value cannot make us read outside it.
        let (from, hdr, payload) = unsafe {
            let len = ((c.add(8) as *const u32).read() as usize).min(max);
            let from = Gpid::new((c.add(12) as *const u32).read());
            (
                from,
                &*(c.add(16) as *const [u8; HEADER_LEN]),
                std::slice::from_raw_parts(c.add(CELL_HDR), len),
            )
        };
        f(from, hdr, payload);
        self.q
            .seq(self.pos)
            .store(self.pos + self.q.cells, Ordering::Release);
        self.pos += 1;
        self.q.deq().store(self.pos, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Mem([u8; QUEUE_HDR + 8 * 256]);

    #[test]
    fn full_queue_is_not_now() {
        let mut m = Box::new(Mem([0; QUEUE_HDR + 8 * 256]));
        let base = m.0.as_mut_ptr();
        unsafe { init_queue(base, 8, 256) };
        let p = unsafe { Producer::new(base, 8, 256) };
        let mut c = unsafe { Consumer::new(base, 8, 256) };
        let h = [0u8; HEADER_LEN];
        for i in 0..8u32 {
            assert!(p.push(Gpid::new(i), &h, &[&i.to_le_bytes()]));
        }
        assert!(!p.push(Gpid::new(99), &h, &[]));
        for i in 0..8u32 {
            assert!(c.pop(|from, _, pl| {
                assert_eq!(from, Gpid::new(i));
                assert_eq!(pl, &i.to_le_bytes());
            }));
        }
        assert!(!c.pop(|_, _, _| {}));
        assert!(p.push(Gpid::new(5), &h, &[b"abc", b"de"]));
        assert!(c.pop(|_, _, pl| assert_eq!(pl, b"abcde")));
    }

    #[test]
    fn many_producers_keep_their_own_order() {
        let mut m = Box::new(Mem([0; QUEUE_HDR + 8 * 256]));
        let base = m.0.as_mut_ptr();
        unsafe { init_queue(base, 8, 256) };
        let addr = base as usize;
        const N: u32 = 50_000;
        let threads: Vec<_> = (0..3u32)
            .map(|t| {
                std::thread::spawn(move || {
                    let p = unsafe { Producer::new(addr as *mut u8, 8, 256) };
                    let h = [0u8; HEADER_LEN];
                    let mut i = 0;
                    while i < N {
                        if p.push(Gpid::new(t), &h, &[&i.to_le_bytes()]) {
                            i += 1;
                        } else {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut c = unsafe { Consumer::new(base, 8, 256) };
        let mut next = [0u32; 3];
        let mut total = 0;
        while total < 3 * N {
            if c.pop(|from, _, pl| {
                let v = u32::from_le_bytes(pl.try_into().unwrap());
                assert_eq!(v, next[from.idx()]);
                next[from.idx()] += 1;
            }) {
                total += 1;
            }
        }
        for t in threads {
            t.join().unwrap();
        }
    }
}
