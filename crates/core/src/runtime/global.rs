//! The process-wide state cell and the rule for touching it.
//!
//! Under MPI_THREAD_SINGLE, FUNNELED and SERIALIZED the application never calls MPI from two
//! threads at once, so the state is used without a lock (the single-threaded path pays one
//! relaxed load per call). Under MPI_THREAD_MULTIPLE every access takes one mutex; waiting
//! loops release it between progress passes so other threads get in.
//!
//! The cell is generic: the layer that owns the state (the MPI engine, `mpi::global`) makes
//! the one instance, so this floor module knows nothing of what it holds.
//!
//! User callbacks (error handlers, reduction operators, attribute callbacks) are never called
//! from inside [`Global::with`]; the C layer calls them after `with` returns, so re-entering
//! MPI from a callback cannot alias the state.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

/// Life cycle of the MPI library in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Uninitialized = 0,
    Initialized = 1,
    Finalized = 2,
}

/// Passes of one wait that only spin (when ranks do not outnumber the cores) before each
/// further pass yields: about 100-300 us, far above a message's latency on one host, so
/// latency-bound waits never yield, and far below a scheduler time slice.
pub const SPIN_PASSES: u32 = 1024;

/// The process-wide state `T`, absent before initialisation and after finalisation.
pub struct Global<T> {
    cell: UnsafeCell<Option<Box<T>>>,
    lock: Mutex<()>,
    multi: AtomicBool,
    phase: AtomicU8,
    yield_wait: AtomicBool,
    /// `progress_yield=never`: even long waits only spin.
    spin_only: AtomicBool,
}

// SAFETY: access to `cell` follows the rule in the module doc: either one application thread
// at a time (single-threaded levels) or under `lock` (MPI_THREAD_MULTIPLE).
unsafe impl<T> Sync for Global<T> {}

impl<T> Global<T> {
    pub const fn new() -> Global<T> {
        Global {
            cell: UnsafeCell::new(None),
            lock: Mutex::new(()),
            multi: AtomicBool::new(false),
            phase: AtomicU8::new(0),
            yield_wait: AtomicBool::new(false),
            spin_only: AtomicBool::new(false),
        }
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Uninitialized,
            1 => Phase::Initialized,
            _ => Phase::Finalized,
        }
    }

    pub fn is_multithreaded(&self) -> bool {
        self.multi.load(Ordering::Relaxed)
    }

    /// Run `f` on the state; None when there is none (not initialised, or finalised).
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !self.multi.load(Ordering::Relaxed) {
            // SAFETY: single-threaded level: no other thread is inside MPI (module doc).
            unsafe { &mut *self.cell.get() }.as_deref_mut().map(f)
        } else {
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: we hold the lock.
            unsafe { &mut *self.cell.get() }.as_deref_mut().map(f)
        }
    }

    /// Install the state (MPI_Init). `multi`: the thread level provided is
    /// MPI_THREAD_MULTIPLE; `yield_wait`: waiting loops yield the CPU.
    pub fn install(&self, state: T, multi: bool, yield_wait: bool) {
        // SAFETY: called once, by the initialising thread, before any other MPI call can run.
        unsafe { *self.cell.get() = Some(Box::new(state)) };
        self.yield_wait.store(yield_wait, Ordering::Relaxed);
        self.multi.store(multi, Ordering::Release);
        self.phase
            .store(Phase::Initialized as u8, Ordering::Release);
    }

    /// Switch to MPI_THREAD_MULTIPLE's rule (every access under the mutex) while the state is
    /// installed: an MPI_Session_init that asks for MPI_THREAD_MULTIPLE where an earlier
    /// initialisation provided less. The caller is the only thread inside MPI at that moment
    /// (the lower level promised it), so no access is in flight without the lock.
    pub fn make_multi(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.multi.store(true, Ordering::Release);
    }

    /// Remove the state (end of MPI_Finalize). Further calls report "already finalized".
    pub fn uninstall(&self) -> Option<Box<T>> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.phase.store(Phase::Finalized as u8, Ordering::Release);
        // SAFETY: finalize runs on one thread; we hold the lock against MULTIPLE-level callers.
        unsafe { (*self.cell.get()).take() }
    }

    /// Change whether waiting loops yield (run time reconfiguration of `progress_yield`).
    pub fn set_yield(&self, y: bool) {
        self.yield_wait.store(y, Ordering::Relaxed);
    }

    /// Whether long waits only spin (`progress_yield=never`) rather than yield.
    pub fn set_spin_only(&self, s: bool) {
        self.spin_only.store(s, Ordering::Relaxed);
    }

    /// What a waiting loop does between progress passes.
    #[inline]
    pub fn idle(&self) {
        if self.yield_wait.load(Ordering::Relaxed) || self.multi.load(Ordering::Relaxed) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    /// What a waiting loop does between progress passes once its wait has lasted
    /// [`SPIN_PASSES`]: yield, unless told to spin only. A rank that has its core to itself
    /// by the placement may still share it with other programs; spinning on then keeps the
    /// processes it waits for off the CPU for a scheduler time slice (milliseconds), while a
    /// yield with nobody else runnable returns at once.
    #[inline]
    pub fn idle_long(&self) {
        if self.spin_only.load(Ordering::Relaxed) && !self.multi.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// [`Global::idle`] for the `pass`-th pass of one wait (counted from 0), and
    /// [`Global::idle_long`] from [`SPIN_PASSES`] on.
    #[inline]
    pub fn idle_pass(&self, pass: u32) {
        if pass < SPIN_PASSES {
            self.idle();
        } else {
            self.idle_long();
        }
    }
}

impl<T> Default for Global<T> {
    fn default() -> Self {
        Global::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn life_cycle() {
        static G: Global<u32> = Global::new();
        assert_eq!(G.phase(), Phase::Uninitialized);
        assert_eq!(G.with(|v| *v), None);
        G.install(7, false, false);
        assert_eq!(G.phase(), Phase::Initialized);
        assert_eq!(
            G.with(|v| {
                *v += 1;
                *v
            }),
            Some(8)
        );
        assert_eq!(G.uninstall().map(|b| *b), Some(8));
        assert_eq!(G.phase(), Phase::Finalized);
        assert_eq!(G.with(|v| *v), None);
    }

    #[test]
    fn threads_share_it_under_the_lock() {
        static G: Global<u64> = Global::new();
        G.install(0, true, true);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        G.with(|v| *v += 1).unwrap();
                    }
                });
            }
        });
        assert_eq!(G.with(|v| *v), Some(4000));
    }
}
