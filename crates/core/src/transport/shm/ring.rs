//! A dedicated fast channel: a single-producer single-consumer ring of 64-byte lines in shared
//! memory, carrying variable-size records.
//!
//! Layout of a channel (`CHANNEL_HDR` bytes of control, then the ring):
//! ```text
//! [0..64)    head: u64   consumer's absolute line position (written by the consumer only)
//! [64..68)   owner: u32  sender's global process id + 1, or 0 when the channel is free
//! [72..80)   key: u64    random, drawn when the channel is created
//! [128..)    ring of `lines` lines of 64 bytes
//! ```
//! A record starts on a line boundary with one 64-bit word, `stamp << 16 | len` (48-bit stamp,
//! 16-bit payload length), then the 32-byte frame header, then `len` payload bytes; the first
//! line therefore holds 24 payload bytes and an 8-byte message travels in one cache line. The
//! stamp is the record's absolute line position plus one, XORed with the channel's key
//! (48 bits); the producer writes the word last with release ordering, and the consumer polls
//! the line at its head for exactly that stamp. A record never wraps: when it does not fit
//! before the end, the producer writes a `WRAP` record and continues at line 0.
//!
//! Why the key: the line the consumer polls may have been the *middle* of an earlier record,
//! and then holds payload, which can be anything, including a small number equal to the
//! awaited position (9-rank collective tests did hit that and read garbage as a record).
//! Payload that looks like a keyed stamp has to contain 48 bits of a random per-channel value:
//! a chance of 2^-48 per record at worst. Old stamps name other positions; fresh memory is
//! zero, which no stamp is (the key's top bit is set and positions stay below 2^47).
//! Clearing stale lines instead costs cache-line transfers on every multi-line message
//! (measured: +10 to +17% on 1 KiB latency); the key costs nothing.
//!
//! Invariants: only the owner process writes records and only the receiving process writes
//! `head`; the producer never has more than `lines` lines outstanding (`tail - head <= lines`).
//!
//! Reuse: a channel changes hands at run time (the reconfiguration in `super`). The receiver
//! hands it to the next sender with a fresh key and the position where the last one stopped
//! ([`Tx::resume`], [`Rx::resume`]), so nothing is cleared: the lines the previous sender wrote
//! carry stamps under the old key. Only the control block is written when a channel is made;
//! the kernel gives its ring pages on first touch, so a channel that is never used costs
//! address space, not memory.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::transport::HEADER_LEN;

pub const LINE: usize = 64;
/// Control bytes before the ring lines.
pub const CHANNEL_HDR: usize = 128;
/// Bytes of a record before its payload: stamp, length, frame header.
pub const RECORD_HDR: usize = 8 + HEADER_LEN;
/// The length of a wrap record (no payload is that long).
const WRAP: u64 = 0xffff;
/// Largest payload a record can describe.
const LEN_MAX: usize = 0xfffe;

/// Bytes of shared memory a channel of `ring_bytes` ring bytes occupies.
pub fn channel_bytes(ring_bytes: usize) -> usize {
    CHANNEL_HDR + ring_bytes
}

/// Largest payload a record can carry in a ring of `lines` lines (a quarter of the ring, so a
/// wrap never starves a full-size record).
pub fn max_payload(lines: usize) -> usize {
    ((lines / 4) * LINE - RECORD_HDR).min(LEN_MAX)
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
    /// The channel's key (see the module comment).
    key: u64,
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
    /// The first word of a line: a record's stamp and length.
    #[inline(always)]
    fn word(&self, abs: u64) -> &AtomicU64 {
        // SAFETY: every line starts with an 8-byte aligned word inside the ring.
        unsafe { &*(self.line(abs) as *const AtomicU64) }
    }
    /// The stamp of a record starting at line `abs`, in place in its first word.
    #[inline(always)]
    fn stamp(&self, abs: u64) -> u64 {
        ((abs + 1) ^ self.key) << 16
    }
    /// A view of the channel at `base` with `lines` lines.
    ///
    /// # Safety
    /// `base` points to an initialised channel.
    unsafe fn open(base: *mut u8, lines: u64) -> Chan {
        let key = (*(base.add(72) as *const AtomicU64)).load(Ordering::Acquire);
        Chan { base, lines, key }
    }
}

/// Initialise a channel in fresh (zeroed) shared memory: the control block only; the ring
/// lines are zero already and are left untouched until a sender uses them.
///
/// # Safety
/// `base` must point to `channel_bytes(ring_bytes)` writable bytes, 64-byte aligned and zero,
/// that no other process uses yet.
pub unsafe fn init_channel(base: *mut u8, _ring_bytes: usize) {
    std::ptr::write_bytes(base, 0, CHANNEL_HDR);
    (*(base.add(72) as *const AtomicU64)).store(new_key(), Ordering::Release);
}

/// Record the key and the start position of a channel handed to a new sender (diagnostics,
/// and what [`Tx::new`] would read), and publish the position as the consumer's head.
///
/// # Safety
/// `base` points to an initialised channel whose consumer is the caller, with no sender.
pub unsafe fn rekey(base: *mut u8, key: u64, pos: u64) {
    (*(base.add(72) as *const AtomicU64)).store(key, Ordering::Relaxed);
    (*(base as *const AtomicU64)).store(pos, Ordering::Release);
}

/// A random 48-bit channel key with its top bit set (so that no stamp is zero).
pub fn new_key() -> u64 {
    let mut k = 0u64;
    // SAFETY: getrandom writes at most 8 bytes into `k`.
    let n = unsafe { libc::getrandom((&mut k as *mut u64).cast(), 8, 0) };
    if n != 8 {
        // No kernel randomness: anything that differs between channels and runs will do.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        k = t.rotate_left(17) ^ (u64::from(std::process::id()) << 29) ^ (&k as *const u64 as u64);
    }
    (k & ((1 << 48) - 1)) | (1 << 47)
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
        let ch = Chan::open(base, lines);
        let head = ch.head().load(Ordering::Acquire);
        Tx {
            ch,
            tail: head,
            cached_head: head,
            max_payload: max_payload(lines as usize),
        }
    }

    /// A producer for a channel handed over at run time: the receiver's `key` and the
    /// position `pos` where the previous sender stopped (its head, published).
    ///
    /// # Safety
    /// As for [`Tx::new`]; `key` and `pos` are the ones the receiver chose for this hand-over.
    pub unsafe fn resume(base: *mut u8, ring_bytes: usize, key: u64, pos: u64) -> Tx {
        let lines = (ring_bytes / LINE) as u64;
        debug_assert!(lines.is_power_of_two());
        Tx {
            ch: Chan { base, lines, key },
            tail: pos,
            cached_head: pos,
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
        assert!(
            len <= self.max_payload,
            "ring frame {len} > {}",
            self.max_payload
        );
        let need = lines_for(len);
        let to_end = self.ch.lines - (self.tail & (self.ch.lines - 1));
        let wrap = if need > to_end { to_end } else { 0 };
        if !self.room(need + wrap) {
            return false;
        }
        if wrap != 0 {
            self.ch
                .word(self.tail)
                .store(self.ch.stamp(self.tail) | WRAP, Ordering::Release);
            self.tail += wrap;
        }
        let p = self.ch.line(self.tail);
        // SAFETY: `need` lines from `p` are inside the ring (no wrap) and owned by the producer
        // until the stamp store publishes them.
        unsafe {
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), p.add(8), HEADER_LEN);
            let mut at = p.add(RECORD_HDR);
            for part in parts {
                crate::mem::copy(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
        }
        self.ch
            .word(self.tail)
            .store(self.ch.stamp(self.tail) | len as u64, Ordering::Release);
        self.tail += need;
        true
    }

    pub fn owner(&self) -> &AtomicU32 {
        self.ch.owner()
    }

    /// (tail, cached head, shared head, key) for diagnostics.
    pub fn debug(&self) -> (u64, u64, u64, u64) {
        (
            self.tail,
            self.cached_head,
            self.ch.head().load(Ordering::Acquire),
            self.ch.key,
        )
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
        let ch = Chan::open(base, lines);
        let head = ch.head().load(Ordering::Acquire);
        Rx {
            ch,
            head,
            published: head,
        }
    }

    /// A consumer for a channel handed to a new sender with `key`, from position `pos`.
    ///
    /// # Safety
    /// As for [`Rx::new`].
    pub unsafe fn resume(base: *mut u8, ring_bytes: usize, key: u64, pos: u64) -> Rx {
        let lines = (ring_bytes / LINE) as u64;
        Rx {
            ch: Chan { base, lines, key },
            head: pos,
            published: pos,
        }
    }

    /// The consumer's position: where the next record starts.
    pub fn position(&self) -> u64 {
        self.head
    }

    /// The channel's key.
    pub fn key(&self) -> u64 {
        self.ch.key
    }

    /// Is a record waiting? (One load of the line at the head.)
    #[inline(always)]
    pub fn ready(&self) -> bool {
        self.ch.word(self.head).load(Ordering::Acquire) >> 16 == self.ch.stamp(self.head) >> 16
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
            // The stamp matched with acquire ordering (in `ready`), so the producer's writes
            // of this record are visible; the length came in the same word.
            let len = self.ch.word(self.head).load(Ordering::Relaxed) & 0xffff;
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

    #[repr(C, align(64))]
    struct Mem([u8; CHANNEL_HDR + 4096]);

    /// A header that names its record: kind 1, `i` in two places.
    fn hdr(i: u32) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = 1;
        h[4..8].copy_from_slice(&i.to_le_bytes());
        h[16..20].copy_from_slice(&i.to_le_bytes());
        h
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
                    assert_eq!(*h, hdr(got));
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
        // Lap 1: a record whose payload puts, at the start of each line it covers, what an
        // unkeyed stamp of that line one lap later would be. Lap 2 stops at one of them.
        let mut mem = Box::new(Mem([0; CHANNEL_HDR + 4096]));
        let base = mem.0.as_mut_ptr();
        unsafe { init_channel(base, 4096) };
        let mut tx = unsafe { Tx::new(base, 4096) };
        let mut rx = unsafe { Rx::new(base, 4096) };
        let lines = 64u64;
        let mut big = vec![0u8; 10 * LINE - RECORD_HDR];
        for l in 1..10u64 {
            let at = (l as usize) * LINE - RECORD_HDR;
            big[at..at + 8].copy_from_slice(&(((lines + l + 1) << 16) | 8).to_le_bytes());
        }
        assert!(tx.push(&hdr(0), &[&big]));
        assert!(rx.pop(|_, p| assert_eq!(p.len(), big.len())));
        for i in 10..lines as u32 {
            assert!(tx.push(&hdr(i), &[&[i as u8; 8]]));
            assert!(rx.pop(|_, _| {}));
        }
        // Lap 2: one 5-line record, after which the consumer waits at line 64 + 5.
        assert!(tx.push(&hdr(1), &[&[7u8; 5 * LINE - RECORD_HDR]]));
        assert!(rx.pop(|_, p| assert_eq!(p, &[7u8; 5 * LINE - RECORD_HDR][..])));
        assert!(!rx.ready(), "old payload read as a fresh record");
        assert!(!rx.pop(|_, _| panic!("old payload read as a fresh record")));
        // Keys: 48 bits with the top one set (zeroed memory is no stamp), per channel.
        let mut other = Box::new(Mem([0; CHANNEL_HDR + 4096]));
        unsafe { init_channel(other.0.as_mut_ptr(), 4096) };
        let (k1, k2) = unsafe {
            (
                Chan::open(base, lines).key,
                Chan::open(other.0.as_mut_ptr(), lines).key,
            )
        };
        assert!(k1 >> 47 == 1 && k2 >> 47 == 1);
        assert_ne!(k1, k2);
        assert_eq!(max_payload(1 << 20), LEN_MAX, "lengths fit their 16 bits");
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
