//! A dedicated fast channel: a single-producer single-consumer ring of 64-byte lines in shared
//! memory, carrying variable-size records.
//!
//! Layout of a channel (`CHANNEL_HDR` bytes of control, then the ring):
//! ```text
//! [0..64)    head: u64   consumer's absolute line position (written by the consumer only)
//! [64..128)  owner: u32  sender's global process id + 1, or 0 when the channel is free
//! [128..)    ring of `lines` lines of 64 bytes
//! ```
//! A record starts on a line boundary with `stamp: u32, len: u32`, then the 32-byte frame
//! header, then `len` payload bytes; the first line therefore holds 24 payload bytes and an
//! 8-byte message travels in one cache line. `stamp` is the record's absolute line position
//! plus one (truncated to 32 bits); the producer writes it last with release ordering, and the
//! consumer polls for exactly that value. A record never wraps: when it does not fit before the
//! end, the producer writes a `WRAP` record and continues at line 0.
//!
//! A line the consumer waits on must never hold an old value that looks fresh. Old record
//! stamps cannot (they name an earlier lap), but a line that was the *middle* of an earlier
//! record holds payload bytes, and those can be anything, including the awaited stamp. So the
//! producer clears the stamp of the line after each record before it publishes the record,
//! and publishes a `WRAP` only after the record at line 0 that follows it.
//!
//! Invariants: only the owner process writes records and only the receiving process writes
//! `head`; the producer never has more than `lines - 1` lines outstanding (`tail - head <
//! lines`), so the line after the last record is always free to clear.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::proto::frame::HEADER_LEN;

pub const LINE: usize = 64;
/// Control bytes before the ring lines.
pub const CHANNEL_HDR: usize = 128;
/// Bytes of a record before its payload: stamp, length, frame header.
pub const RECORD_HDR: usize = 8 + HEADER_LEN;
const WRAP: u32 = u32::MAX;

/// Bytes of shared memory a channel of `ring_bytes` ring bytes occupies.
pub fn channel_bytes(ring_bytes: usize) -> usize {
    CHANNEL_HDR + ring_bytes
}

/// Largest payload a record can carry in a ring of `lines` lines (a quarter of the ring, so a
/// wrap never starves a full-size record).
pub fn max_payload(lines: usize) -> usize {
    (lines / 4) * LINE - RECORD_HDR
}

#[inline(always)]
fn lines_for(payload: usize) -> u64 {
    (RECORD_HDR + payload).div_ceil(LINE) as u64
}

/// Raw view of a channel; both sides hold one over the same memory.
#[derive(Clone, Copy)]
struct Chan {
    base: *mut u8,
    lines: u64,
}

impl Chan {
    #[inline(always)]
    fn head(&self) -> &AtomicU64 {
        // SAFETY: `base` points to a channel of at least CHANNEL_HDR bytes, 64-byte aligned,
        // which lives as long as the mapping that both Tx and Rx borrow from.
        unsafe { &*(self.base as *const AtomicU64) }
    }
    #[inline(always)]
    fn owner(&self) -> &AtomicU32 {
        // SAFETY: as for `head`; offset 64 is inside the control block.
        unsafe { &*(self.base.add(64) as *const AtomicU32) }
    }
    #[inline(always)]
    fn line(&self, abs: u64) -> *mut u8 {
        // SAFETY: the index is reduced modulo `lines`, so the pointer stays inside the ring.
        unsafe {
            self.base
                .add(CHANNEL_HDR + ((abs & (self.lines - 1)) as usize) * LINE)
        }
    }
    #[inline(always)]
    fn stamp(&self, abs: u64) -> &AtomicU32 {
        // SAFETY: every line starts with a 4-byte aligned stamp inside the ring.
        unsafe { &*(self.line(abs) as *const AtomicU32) }
    }
}

/// Initialise a channel in fresh (zeroed) shared memory.
///
/// # Safety
/// `base` must point to `channel_bytes(ring_bytes)` writable bytes, 64-byte aligned, that no
/// other process uses yet.
pub unsafe fn init_channel(base: *mut u8, ring_bytes: usize) {
    std::ptr::write_bytes(base, 0, channel_bytes(ring_bytes));
}

/// Owner field of a channel (which sender it is dedicated to).
///
/// # Safety
/// `base` must point to an initialised channel.
pub unsafe fn owner(base: *mut u8) -> &'static AtomicU32 {
    &*(base.add(64) as *const AtomicU32)
}

/// The producer side.
pub struct Tx {
    ch: Chan,
    tail: u64,
    cached_head: u64,
    max_payload: usize,
}

// SAFETY: a Tx is the only writer of records in its channel; moving it between threads keeps
// that property (the engine serialises access).
unsafe impl Send for Tx {}

impl Tx {
    /// # Safety
    /// `base` must point to an initialised channel of `ring_bytes` ring bytes (a power of two
    /// of lines) that stays mapped while the Tx lives, and this must be the only Tx for it.
    pub unsafe fn new(base: *mut u8, ring_bytes: usize) -> Tx {
        let lines = (ring_bytes / LINE) as u64;
        debug_assert!(lines.is_power_of_two());
        let ch = Chan { base, lines };
        let head = ch.head().load(Ordering::Acquire);
        Tx {
            ch,
            tail: head,
            cached_head: head,
            max_payload: max_payload(lines as usize),
        }
    }

    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    #[inline(always)]
    fn room(&mut self, need: u64) -> bool {
        if self.tail + need - self.cached_head <= self.ch.lines {
            return true;
        }
        self.cached_head = self.ch.head().load(Ordering::Acquire);
        self.tail + need - self.cached_head <= self.ch.lines
    }

    /// Append a record with `hdr` and the concatenation of `parts` as payload. Returns false
    /// (nothing written) when the ring has no room now; the caller retries later.
    #[inline]
    pub fn push(&mut self, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        debug_assert!(len <= self.max_payload);
        let need = lines_for(len);
        let to_end = self.ch.lines - (self.tail & (self.ch.lines - 1));
        let wrap = if need > to_end { to_end } else { 0 };
        // One line more than the record: the line after it, whose stamp we clear.
        if !self.room(need + wrap + 1) {
            return false;
        }
        let at = self.tail + wrap;
        let p = self.ch.line(at);
        // SAFETY: `need` lines from `p` are inside the ring (no wrap) and owned by the producer
        // until the stamp store publishes them; so is the line after them (room above).
        unsafe {
            (p.add(4) as *mut u32).write(len as u32);
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), p.add(8), HEADER_LEN);
            let mut dst = p.add(RECORD_HDR);
            for part in parts {
                crate::mem::copy(part.as_ptr(), dst, part.len());
                dst = dst.add(part.len());
            }
        }
        self.ch.stamp(at + need).store(0, Ordering::Relaxed);
        self.ch
            .stamp(at)
            .store((at as u32).wrapping_add(1), Ordering::Release);
        if wrap != 0 {
            // Published last: the consumer moves to line 0 only once the record there is.
            let w = self.ch.line(self.tail);
            // SAFETY: the line is inside the ring and not visible to the consumer until its
            // stamp is published.
            unsafe { (w.add(4) as *mut u32).write(WRAP) };
            self.ch
                .stamp(self.tail)
                .store((self.tail as u32).wrapping_add(1), Ordering::Release);
        }
        self.tail = at + need;
        true
    }

    pub fn owner(&self) -> &AtomicU32 {
        self.ch.owner()
    }
}

/// The consumer side.
pub struct Rx {
    ch: Chan,
    head: u64,
    /// The head value last stored for the producer to see.
    published: u64,
}

// SAFETY: an Rx is the only reader of its channel; the engine serialises access.
unsafe impl Send for Rx {}

impl Rx {
    /// # Safety
    /// As for [`Tx::new`], and this must be the only Rx for the channel.
    pub unsafe fn new(base: *mut u8, ring_bytes: usize) -> Rx {
        let lines = (ring_bytes / LINE) as u64;
        let ch = Chan { base, lines };
        let head = ch.head().load(Ordering::Acquire);
        Rx {
            ch,
            head,
            published: head,
        }
    }

    /// Is a record waiting? (One load of the line at the head.)
    #[inline(always)]
    pub fn ready(&self) -> bool {
        self.ch.stamp(self.head).load(Ordering::Acquire) == (self.head as u32).wrapping_add(1)
    }

    /// Let the producer reuse what we consumed. Publishing after every record would bounce
    /// the head line between the two caches while a producer waits for room; we publish
    /// once a quarter of the ring is consumed, and whenever the ring runs empty (so a waiting
    /// producer always learns of all the room there is before we go idle).
    #[inline(always)]
    fn consumed(&mut self, lines: u64) {
        self.head += lines;
        if self.head - self.published >= self.ch.lines / 4 {
            self.publish();
        }
    }

    #[inline(always)]
    fn publish(&mut self) {
        self.ch.head().store(self.head, Ordering::Release);
        self.published = self.head;
    }

    /// Hand the next record, if any, to `f(header, payload)`; the payload borrows ring memory
    /// and is released when `f` returns. Returns whether a record was consumed.
    #[inline]
    pub fn pop(&mut self, f: impl FnOnce(&[u8; HEADER_LEN], &[u8])) -> bool {
        loop {
            if !self.ready() {
                if self.published != self.head {
                    self.publish();
                }
                return false;
            }
            let p = self.ch.line(self.head);
            // SAFETY: the stamp matched with acquire ordering, so the producer's writes of this
            // record are visible; its length was written by the producer before the stamp.
            let len = unsafe { (p.add(4) as *const u32).read() };
            if len == WRAP {
                let to_end = self.ch.lines - (self.head & (self.ch.lines - 1));
                self.consumed(to_end);
                continue;
            }
            let len = len as usize;
            let to_end = ((self.ch.lines - (self.head & (self.ch.lines - 1))) as usize) * LINE;
            if RECORD_HDR + len > to_end {
                // A record never wraps; a length that claims to is corrupt. Skip to the end
                // of the ring rather than read outside it.
                debug_assert!(false, "corrupt shared-memory record length {len}");
                self.consumed((to_end / LINE) as u64);
                continue;
            }
            // SAFETY: header and payload lie inside the ring (checked just above) and stay
            // untouched by the producer until `head` moves past them.
            let (hdr, payload) = unsafe {
                (
                    &*(p.add(8) as *const [u8; HEADER_LEN]),
                    std::slice::from_raw_parts(p.add(RECORD_HDR), len),
                )
            };
            f(hdr, payload);
            self.consumed(lines_for(len));
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::frame::{Envelope, Frame};

    #[repr(C, align(64))]
    struct Mem([u8; CHANNEL_HDR + 4096]);

    fn hdr(i: u32) -> [u8; HEADER_LEN] {
        Frame::Eager {
            env: Envelope {
                ctx: 0,
                src: 0,
                tag: i as i32,
            },
            seq: i,
            sreq: 0,
            sync: false,
        }
        .encode()
    }

    #[test]
    fn fifo_with_wraps_and_full_ring() {
        let mut mem = Box::new(Mem([0; CHANNEL_HDR + 4096]));
        let base = mem.0.as_mut_ptr();
        unsafe { init_channel(base, 4096) };
        let mut tx = unsafe { Tx::new(base, 4096) };
        let mut rx = unsafe { Rx::new(base, 4096) };
        let max = tx.max_payload();
        assert_eq!(max, 16 * 64 - RECORD_HDR);
        let mut sent = 0u32;
        let mut got = 0u32;
        // Sizes cycle so records straddle the end of the ring many times.
        let sizes = [0usize, 8, 24, 25, 100, max, 63, 1];
        for round in 0..2000 {
            // Fill until full, then drain some.
            loop {
                let n = sizes[(sent as usize) % sizes.len()];
                let payload: Vec<u8> = (0..n).map(|k| (k as u32 ^ sent) as u8).collect();
                let (a, b) = payload.split_at(n / 2);
                if !tx.push(&hdr(sent), &[a, b]) {
                    break;
                }
                sent += 1;
            }
            let drain = if round % 3 == 0 { usize::MAX } else { 3 };
            for _ in 0..drain {
                let ok = rx.pop(|h, p| {
                    let f = Frame::decode(h).unwrap();
                    let Frame::Eager { seq, .. } = f else {
                        panic!()
                    };
                    assert_eq!(seq, got);
                    let n = sizes[(got as usize) % sizes.len()];
                    assert_eq!(p.len(), n);
                    for (k, b) in p.iter().enumerate() {
                        assert_eq!(*b, (k as u32 ^ got) as u8);
                    }
                });
                if !ok {
                    break;
                }
                got += 1;
            }
        }
        while rx.pop(|_, _| {}) {
            got += 1;
        }
        assert_eq!(got, sent);
        assert!(!rx.ready());
    }

    #[test]
    fn stale_payload_never_passes_for_a_stamp() {
        // Lap 1: a record whose payload puts, at the start of each line it covers, the stamp
        // that line will await one lap later. Lap 2 stops right at one of those lines.
        let mut mem = Box::new(Mem([0; CHANNEL_HDR + 4096]));
        let base = mem.0.as_mut_ptr();
        unsafe { init_channel(base, 4096) };
        let mut tx = unsafe { Tx::new(base, 4096) };
        let mut rx = unsafe { Rx::new(base, 4096) };
        let lines = 64u32;
        let mut big = vec![0u8; 10 * LINE - RECORD_HDR];
        for l in 1..10u32 {
            let at = (l as usize) * LINE - RECORD_HDR;
            big[at..at + 4].copy_from_slice(&(lines + l + 1).to_le_bytes());
        }
        assert!(tx.push(&hdr(0), &[&big]));
        assert!(rx.pop(|_, p| assert_eq!(p.len(), big.len())));
        for i in 10..lines {
            assert!(tx.push(&hdr(i), &[&[i as u8; 8]]));
            assert!(rx.pop(|_, _| {}));
        }
        // Lap 2: one 5-line record, after which the consumer waits at line 64 + 5.
        assert!(tx.push(&hdr(1), &[&[7u8; 5 * LINE - RECORD_HDR]]));
        assert!(rx.pop(|_, p| assert_eq!(p, &[7u8; 5 * LINE - RECORD_HDR][..])));
        assert!(!rx.ready(), "old payload read as a fresh record");
        assert!(!rx.pop(|_, _| panic!("old payload read as a fresh record")));
    }

    #[test]
    fn two_threads() {
        let mut mem = Box::new(Mem([0; CHANNEL_HDR + 4096]));
        let base = mem.0.as_mut_ptr();
        unsafe { init_channel(base, 4096) };
        let addr = base as usize;
        const N: u32 = 200_000;
        let prod = std::thread::spawn(move || {
            let mut tx = unsafe { Tx::new(addr as *mut u8, 4096) };
            let mut i = 0u32;
            while i < N {
                let v = i.to_le_bytes();
                let n = (i % 300) as usize;
                let pad = vec![i as u8; n];
                if tx.push(&hdr(i), &[&v, &pad]) {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut rx = unsafe { Rx::new(base, 4096) };
        let mut next = 0u32;
        while next < N {
            rx.pop(|_, p| {
                assert_eq!(u32::from_le_bytes(p[..4].try_into().unwrap()), next);
                if let Some(k) = p[4..].iter().position(|b| *b != next as u8) {
                    panic!(
                        "msg {next} len {} bad byte at payload {} = {} head {}",
                        p.len(),
                        k + 4,
                        p[4 + k],
                        0
                    );
                }
                next += 1;
            });
        }
        prod.join().unwrap();
        drop(mem);
    }
}
