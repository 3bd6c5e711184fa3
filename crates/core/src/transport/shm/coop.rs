//! Cooperative single copy: sender and receiver copy a large message together.
//!
//! A large rendezvous message is split into chunks. Its sender owns a *copy slot* in its own
//! segment (two counters: chunks claimed, chunks done) and names it in the request-to-send.
//! Once the receive is matched, the receiver asks the sender to help and then both claim
//! chunks with an atomic increment of `claimed`: the receiver reads its chunks from the sender
//! (`process_vm_readv`), the sender writes its chunks into the receiver (`process_vm_writev`),
//! and each bumps `done` after a chunk is copied. The receiver completes when `done` reaches
//! the chunk count. On two cores this halves the time of a large transfer that one process
//! would otherwise copy alone; if the sender is busy elsewhere the receiver simply claims
//! every chunk itself, so nothing waits for the helper.
//!
//! A chunk the sender claimed but could not write (the kernel refused) is reported in
//! `redo`, and the receiver copies it itself.
//!
//! Layout of a slot (one 64-byte line): `claimed: u32, done: u32, redo: u32` (redo is the
//! chunk index + 1, or 0).

use std::sync::atomic::{AtomicU32, Ordering};

pub const SLOT_BYTES: usize = 64;

/// The copy slots of one process's segment, as mapped in this process.
#[derive(Clone, Copy, Debug)]
pub struct CoopSlots {
    base: *mut u8,
    n: u32,
}

// SAFETY: the slots are plain atomics in shared memory; any thread may touch them.
unsafe impl Send for CoopSlots {}

impl CoopSlots {
    /// # Safety
    /// `base` points to `n * SLOT_BYTES` bytes of shared memory, 64-byte aligned, mapped for
    /// as long as this value is used.
    pub unsafe fn new(base: *mut u8, n: u32) -> CoopSlots {
        CoopSlots { base, n }
    }

    pub fn len(&self) -> u32 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn word(&self, slot: u32, i: usize) -> Option<&AtomicU32> {
        if slot >= self.n {
            return None;
        }
        // SAFETY: slot < n, so the word lies inside the slot array (new()'s contract).
        Some(unsafe { &*(self.base.add(slot as usize * SLOT_BYTES + 4 * i) as *const AtomicU32) })
    }

    /// Prepare a slot for a new message (sender, before the request-to-send goes out).
    pub fn reset(&self, slot: u32) {
        for i in 0..3 {
            if let Some(w) = self.word(slot, i) {
                w.store(0, Ordering::Relaxed);
            }
        }
        std::sync::atomic::fence(Ordering::Release);
    }

    /// Claim the next chunk: its index, if any remain below `chunks`.
    #[inline]
    pub fn claim(&self, slot: u32, chunks: u32) -> Option<u32> {
        let w = self.word(slot, 0)?;
        if w.load(Ordering::Relaxed) >= chunks {
            return None;
        }
        let k = w.fetch_add(1, Ordering::AcqRel);
        (k < chunks).then_some(k)
    }

    /// A claimed chunk is copied.
    #[inline]
    pub fn finish(&self, slot: u32) {
        if let Some(w) = self.word(slot, 1) {
            w.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Chunks copied so far.
    #[inline]
    pub fn done(&self, slot: u32) -> u32 {
        self.word(slot, 1).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// The sender could not copy chunk `k`: the receiver must.
    pub fn give_back(&self, slot: u32, k: u32) {
        if let Some(w) = self.word(slot, 2) {
            w.store(k + 1, Ordering::Release);
        }
    }

    /// A chunk given back, if any.
    pub fn take_back(&self, slot: u32) -> Option<u32> {
        let w = self.word(slot, 2)?;
        match w.swap(0, Ordering::AcqRel) {
            0 => None,
            k => Some(k - 1),
        }
    }
}

/// Which of our own slots are in use.
#[derive(Debug, Default)]
pub struct SlotPool {
    used: Vec<bool>,
}

impl SlotPool {
    pub fn new(n: u32) -> SlotPool {
        SlotPool {
            used: vec![false; n as usize],
        }
    }

    pub fn take(&mut self) -> Option<u32> {
        let i = self.used.iter().position(|u| !u)?;
        self.used[i] = true;
        Some(i as u32)
    }

    pub fn put(&mut self, slot: u32) {
        if let Some(u) = self.used.get_mut(slot as usize) {
            *u = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Mem([u8; 4 * SLOT_BYTES]);

    #[test]
    fn two_copiers_claim_every_chunk_once() {
        let mut m = Box::new(Mem([0; 4 * SLOT_BYTES]));
        let s = unsafe { CoopSlots::new(m.0.as_mut_ptr(), 4) };
        s.reset(2);
        let addr = m.0.as_mut_ptr() as usize;
        const CHUNKS: u32 = 10_000;
        let helper = std::thread::spawn(move || {
            let s = unsafe { CoopSlots::new(addr as *mut u8, 4) };
            let mut mine = vec![];
            while let Some(k) = s.claim(2, CHUNKS) {
                mine.push(k);
                s.finish(2);
            }
            mine
        });
        let mut mine = vec![];
        while let Some(k) = s.claim(2, CHUNKS) {
            mine.push(k);
            s.finish(2);
        }
        let mut all = helper.join().unwrap();
        all.extend(mine);
        all.sort();
        assert_eq!(all, (0..CHUNKS).collect::<Vec<_>>());
        assert_eq!(s.done(2), CHUNKS);
        assert_eq!(s.claim(9, 1), None, "out-of-range slot");
    }

    #[test]
    fn given_back_chunks_are_taken_once() {
        let mut m = Box::new(Mem([0; 4 * SLOT_BYTES]));
        let s = unsafe { CoopSlots::new(m.0.as_mut_ptr(), 4) };
        s.reset(0);
        assert_eq!(s.take_back(0), None);
        s.give_back(0, 7);
        assert_eq!(s.take_back(0), Some(7));
        assert_eq!(s.take_back(0), None);
        let mut p = SlotPool::new(2);
        assert_eq!((p.take(), p.take(), p.take()), (Some(0), Some(1), None));
        p.put(0);
        assert_eq!(p.take(), Some(0));
    }
}
