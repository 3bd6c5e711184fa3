//! The process-wide engine and the rule for touching it.
//!
//! Under MPI_THREAD_SINGLE, FUNNELED and SERIALIZED the application never calls MPI from two
//! threads at once, so the engine is used without a lock (the single-threaded path pays one
//! relaxed load per call). Under MPI_THREAD_MULTIPLE every access takes one mutex; waiting
//! loops release it between progress passes so other threads get in.
//!
//! User callbacks (error handlers, reduction operators, attribute callbacks) are never called
//! from inside [`with`]; the C layer calls them after `with` returns, so re-entering MPI from a
//! callback cannot alias the engine.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

use super::Engine;
use crate::error::{ErrorClass, MpiError, Result};

/// Life cycle of the MPI library in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Uninitialized = 0,
    Initialized = 1,
    Finalized = 2,
}

struct Global {
    cell: UnsafeCell<Option<Box<Engine>>>,
    lock: Mutex<()>,
    multi: AtomicBool,
    phase: AtomicU8,
    yield_wait: AtomicBool,
}

// SAFETY: access to `cell` follows the rule in the module doc: either one application thread
// at a time (single-threaded levels) or under `lock` (MPI_THREAD_MULTIPLE).
unsafe impl Sync for Global {}

static G: Global = Global {
    cell: UnsafeCell::new(None),
    lock: Mutex::new(()),
    multi: AtomicBool::new(false),
    phase: AtomicU8::new(0),
    yield_wait: AtomicBool::new(false),
};

pub fn phase() -> Phase {
    match G.phase.load(Ordering::Acquire) {
        0 => Phase::Uninitialized,
        1 => Phase::Initialized,
        _ => Phase::Finalized,
    }
}

pub fn is_multithreaded() -> bool {
    G.multi.load(Ordering::Relaxed)
}

fn not_initialized() -> MpiError {
    match phase() {
        Phase::Finalized => MpiError::new(ErrorClass::Other, "MPI has already been finalized"),
        _ => MpiError::new(
            ErrorClass::Other,
            "MPI has not been initialized (call MPI_Init first)",
        ),
    }
}

/// Run `f` on the engine.
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&mut Engine) -> R) -> Result<R> {
    if !G.multi.load(Ordering::Relaxed) {
        // SAFETY: single-threaded level: no other thread is inside MPI (module doc).
        match unsafe { &mut *G.cell.get() } {
            Some(e) => Ok(f(e)),
            None => Err(not_initialized()),
        }
    } else {
        let _g = G.lock.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: we hold the lock.
        match unsafe { &mut *G.cell.get() } {
            Some(e) => Ok(f(e)),
            None => Err(not_initialized()),
        }
    }
}

/// Install the engine (MPI_Init). `multi`: the thread level provided is MPI_THREAD_MULTIPLE.
pub fn install(e: Engine, multi: bool) {
    let yield_wait = e.yield_wait;
    // SAFETY: called once, by the initialising thread, before any other MPI call can run.
    unsafe { *G.cell.get() = Some(Box::new(e)) };
    G.yield_wait.store(yield_wait, Ordering::Relaxed);
    G.multi.store(multi, Ordering::Release);
    G.phase.store(Phase::Initialized as u8, Ordering::Release);
}

/// Remove the engine (end of MPI_Finalize). Further calls report "already finalized".
pub fn uninstall() -> Option<Box<Engine>> {
    let _g = G.lock.lock().unwrap_or_else(|p| p.into_inner());
    G.phase.store(Phase::Finalized as u8, Ordering::Release);
    // SAFETY: finalize runs on one thread; we hold the lock against MULTIPLE-level callers.
    unsafe { (*G.cell.get()).take() }
}

/// Change whether waiting loops yield (run time reconfiguration of `progress_yield`).
pub fn set_yield(y: bool) {
    G.yield_wait.store(y, Ordering::Relaxed);
}

/// What a waiting loop does between progress passes.
#[inline]
pub fn idle() {
    if G.yield_wait.load(Ordering::Relaxed) || G.multi.load(Ordering::Relaxed) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Progress the engine until `done` holds.
#[inline]
pub fn wait_until(mut done: impl FnMut(&mut Engine) -> bool) -> Result<()> {
    loop {
        let d = with(|e| {
            if done(e) {
                return true;
            }
            e.progress();
            done(e)
        })?;
        if d {
            return Ok(());
        }
        // Nonblocking collectives may wait for a user reduction that only runs out here.
        crate::mpi::coll::run_deferred();
        idle();
    }
}
