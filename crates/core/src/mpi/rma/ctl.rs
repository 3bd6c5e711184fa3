//! A window's control block: one per process and window, in the host segment that the
//! window's processes on one host share (in the process's own memory when it is alone on its
//! host), so that origins on the host lock a target and serialise their accumulates without
//! the target taking part.
//!
//! Layout (`repr(C)`, all zero when created, which is the unlocked, empty state):
//! ```text
//! lock      u64   passive-target lock: EXCLUSIVE bit (63) | number of shared holders
//! acc       u32   accumulate lock: held around an accumulate that cannot be done element by
//!                 element with atomic instructions (memory read and written by cross-memory
//!                 attach, elements of 16 or 32 bytes, unaligned elements)
//! dyn_seq   u64   sequence lock of the attach table (odd while the owner changes it)
//! dyn_n     u64   entries in use; OVERFLOW when more regions are attached than the table holds
//! fence     u64   fences this process has arrived at on the window (its own cache line:
//!                 written by the owner only, read by the host's other members)
//! dyn_tab         DYN_MAX x (base u64, len u64, region [u8; 20]) of a dynamic window
//! ```
//! Every field is touched only through atomics: the block is shared memory written by several
//! processes. The lock word is a reader-writer lock without fairness (MPI leaves the order in
//! which competing lock requests are granted open).

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};

use crate::transport::{Region, REGION_LEN};

/// Regions of a dynamic window the table lists; beyond that origins on the host go through the
/// target (active messages).
pub const DYN_MAX: usize = 48;

const EXCLUSIVE: u64 = 1 << 63;
/// `dyn_n` when the table overflowed.
const OVERFLOW: u64 = u64::MAX;

#[repr(C)]
pub struct DynEntry {
    base: AtomicU64,
    len: AtomicU64,
    region: [AtomicU8; REGION_LEN],
    _pad: [u8; 4],
}

#[repr(C, align(64))]
pub struct Ctl {
    lock: AtomicU64,
    _a: [u64; 7],
    acc: AtomicU32,
    _b: [u32; 15],
    dyn_seq: AtomicU64,
    dyn_n: AtomicU64,
    _c: [u64; 6],
    fence: AtomicU64,
    _d: [u64; 7],
    dyn_tab: [DynEntry; DYN_MAX],
}

/// Bytes a control block takes in a host segment (a multiple of 64).
pub const CTL_BYTES: usize = std::mem::size_of::<Ctl>();

/// An attached region as origins see it in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attached {
    pub base: u64,
    pub len: u64,
    pub region: Region,
}

/// What an origin finds for an address range in a target's attach table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Found(Attached),
    /// No attached region holds the whole range.
    Missing,
    /// The table overflowed: ask the target.
    Unknown,
}

impl Ctl {
    /// A zeroed block in the process's own memory (no other process on the host).
    pub fn boxed() -> Box<Ctl> {
        // SAFETY: all-zero bytes are a valid Ctl (atomics and plain integers).
        unsafe { Box::new(std::mem::zeroed()) }
    }

    /// Take the passive-target lock once if it is free for this kind of holder.
    pub fn try_lock(&self, exclusive: bool) -> bool {
        if exclusive {
            return self
                .lock
                .compare_exchange(0, EXCLUSIVE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        }
        let mut v = self.lock.load(Ordering::Relaxed);
        loop {
            if v & EXCLUSIVE != 0 {
                return false;
            }
            match self
                .lock
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(x) => v = x,
            }
        }
    }

    /// Release the passive-target lock (the caller holds it this way).
    pub fn unlock(&self, exclusive: bool) {
        if exclusive {
            self.lock.store(0, Ordering::Release);
        } else {
            self.lock.fetch_sub(1, Ordering::Release);
        }
    }

    /// Holders of the passive-target lock: (exclusive, shared holders).
    pub fn lock_state(&self) -> (bool, u64) {
        let v = self.lock.load(Ordering::Relaxed);
        (v & EXCLUSIVE != 0, v & !EXCLUSIVE)
    }

    /// Take the accumulate lock (held for the few microseconds of one operation's copies).
    pub fn acc_lock(&self) {
        let mut spins = 0u32;
        while self
            .acc
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins > 64 {
                // The holder may be waiting for a CPU (ranks outnumber cores).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    pub fn acc_unlock(&self) {
        self.acc.store(0, Ordering::Release);
    }

    pub fn acc_word(&self) -> &AtomicU32 {
        &self.acc
    }

    /// Arrive at fence `g` (the owner; see `sync::fence_arrive` for the ordering): everything
    /// this thread did before, loads and stores to any window memory, happens before what a
    /// member that sees [`Ctl::fence_reached`] for `g` does after.
    #[inline]
    pub fn fence_arrive(&self, g: u64) {
        self.fence.store(g, Ordering::Release);
    }

    /// Has the owner arrived at fence `g`? (It may be one fence further: a member leaves fence
    /// `g` only once everyone arrived at it, so nobody reaches `g + 2` before we left `g`.)
    #[inline]
    pub fn fence_reached(&self, g: u64) -> bool {
        self.fence.load(Ordering::Acquire) >= g
    }

    /// Publish the attached regions of a dynamic window (the owner, after every change).
    pub fn publish(&self, regions: &[Attached]) {
        let s = self.dyn_seq.load(Ordering::Relaxed);
        self.dyn_seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        if regions.len() > DYN_MAX {
            self.dyn_n.store(OVERFLOW, Ordering::Relaxed);
        } else {
            for (e, a) in self.dyn_tab.iter().zip(regions) {
                e.base.store(a.base, Ordering::Relaxed);
                e.len.store(a.len, Ordering::Relaxed);
                for (d, s) in e.region.iter().zip(a.region.0) {
                    d.store(s, Ordering::Relaxed);
                }
            }
            self.dyn_n.store(regions.len() as u64, Ordering::Relaxed);
        }
        self.dyn_seq.store(s + 2, Ordering::Release);
    }

    /// Find the attached region that holds `[addr, addr + len)`.
    pub fn lookup(&self, addr: u64, len: u64) -> Lookup {
        loop {
            let s1 = self.dyn_seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let n = self.dyn_n.load(Ordering::Relaxed);
            let mut found = if n == OVERFLOW {
                Lookup::Unknown
            } else {
                Lookup::Missing
            };
            if n != OVERFLOW {
                for e in &self.dyn_tab[..(n as usize).min(DYN_MAX)] {
                    let base = e.base.load(Ordering::Relaxed);
                    let l = e.len.load(Ordering::Relaxed);
                    if addr >= base && addr.checked_add(len).is_some_and(|end| end <= base + l) {
                        let mut r = [0u8; REGION_LEN];
                        for (d, s) in r.iter_mut().zip(&e.region) {
                            *d = s.load(Ordering::Relaxed);
                        }
                        found = Lookup::Found(Attached {
                            base,
                            len: l,
                            region: Region(r),
                        });
                        break;
                    }
                }
            }
            fence(Ordering::Acquire);
            if self.dyn_seq.load(Ordering::Relaxed) == s1 {
                return found;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_writer_lock() {
        let c = Ctl::boxed();
        assert_eq!(CTL_BYTES % 64, 0);
        assert!(c.try_lock(false));
        assert!(c.try_lock(false));
        assert!(!c.try_lock(true));
        assert_eq!(c.lock_state(), (false, 2));
        c.unlock(false);
        c.unlock(false);
        assert!(c.try_lock(true));
        assert!(!c.try_lock(false));
        assert!(!c.try_lock(true));
        c.unlock(true);
        assert!(c.try_lock(false));
        c.acc_lock();
        c.acc_unlock();
        assert!(c.fence_reached(0) && !c.fence_reached(1));
        c.fence_arrive(1);
        assert!(c.fence_reached(1) && !c.fence_reached(2));
    }

    #[test]
    fn attach_table() {
        let c = Ctl::boxed();
        let r = Region([7; REGION_LEN]);
        c.publish(&[
            Attached {
                base: 1000,
                len: 100,
                region: r,
            },
            Attached {
                base: 5000,
                len: 8,
                region: Region::NONE,
            },
        ]);
        assert!(matches!(c.lookup(1000, 100), Lookup::Found(a) if a.region == r));
        assert!(matches!(c.lookup(5004, 4), Lookup::Found(a) if a.base == 5000));
        assert_eq!(c.lookup(1050, 51), Lookup::Missing);
        assert_eq!(c.lookup(u64::MAX, 2), Lookup::Missing);
        let many: Vec<Attached> = (0..DYN_MAX as u64 + 1)
            .map(|i| Attached {
                base: i * 10,
                len: 10,
                region: r,
            })
            .collect();
        c.publish(&many);
        assert_eq!(c.lookup(0, 1), Lookup::Unknown);
        c.publish(&[]);
        assert_eq!(c.lookup(0, 1), Lookup::Missing);
    }
}
