//! The engine of this process, and how the layers above reach it (see `runtime::global` for
//! the rule: no lock below MPI_THREAD_MULTIPLE, one mutex at that level).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::engine::Engine;
use crate::config::YIELD_MODES;
use crate::error::{ErrorClass, MpiError, Result};
use crate::runtime::global::Global;
pub use crate::runtime::global::Phase;

static ENGINE: Global<Engine> = Global::new();

/// A function of the layer above that waiting loops and test calls run outside the engine
/// (0: none): the C layer's poll of generalized requests (MPIX_Grequest_start's poll_fn).
static POLL_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Register the poll hook (see [`POLL_HOOK`]); it may call MPI.
pub fn set_poll_hook(f: fn()) {
    POLL_HOOK.store(f as usize, Ordering::Release);
}

/// Run the poll hook, if one is registered (one relaxed load otherwise).
#[inline]
pub fn poll_hook() {
    if POLL_HOOK.load(Ordering::Relaxed) == 0 {
        return;
    }
    let h = POLL_HOOK.load(Ordering::Acquire);
    // SAFETY: only `set_poll_hook` stores a non-zero value, a `fn()` cast to usize.
    let f: fn() = unsafe { std::mem::transmute::<usize, fn()>(h) };
    f();
}

/// Set when this process is taking the job down (MPI_Abort, a fatal error): what runs at its
/// exit must not wait for other processes then.
static ABORTING: AtomicBool = AtomicBool::new(false);

pub fn mark_aborting() {
    ABORTING.store(true, Ordering::Release);
}

pub fn aborting() -> bool {
    ABORTING.load(Ordering::Acquire)
}

/// Switch the engine to MPI_THREAD_MULTIPLE's locking (see [`Global::make_multi`]).
pub fn make_multithreaded() {
    ENGINE.make_multi();
}

pub fn phase() -> Phase {
    ENGINE.phase()
}

pub fn is_multithreaded() -> bool {
    ENGINE.is_multithreaded()
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
    ENGINE.with(f).ok_or_else(not_initialized)
}

/// Run `f` on the engine; None when there is none. For the fast paths: the result stays in
/// registers, where [`with`]'s `Result` (with its error) goes through memory.
#[inline(always)]
pub fn try_with<R>(f: impl FnOnce(&mut Engine) -> R) -> Option<R> {
    ENGINE.with(f)
}

/// Install the engine (MPI_Init). `multi`: the thread level provided is MPI_THREAD_MULTIPLE.
pub fn install(e: Engine, multi: bool) {
    let yield_wait = e.yield_wait;
    let spin_only = YIELD_MODES[e.cfg.progress_yield] == "never";
    ENGINE.set_spin_only(spin_only);
    ENGINE.install(e, multi, yield_wait);
}

/// Remove the engine (end of MPI_Finalize). Further calls report "already finalized".
pub fn uninstall() -> Option<Box<Engine>> {
    ENGINE.uninstall()
}

/// Change whether waiting loops yield (run time reconfiguration of `progress_yield`), and
/// whether long waits only spin (`never`).
pub fn set_yield(y: bool, spin_only: bool) {
    ENGINE.set_yield(y);
    ENGINE.set_spin_only(spin_only);
}

/// What a waiting loop does between progress passes.
#[inline]
pub fn idle() {
    ENGINE.idle();
}

/// What the `pass`-th pass of one wait does (see [`Global::idle_pass`]): spin or yield as
/// [`idle`], and yield once the wait is long.
#[inline]
pub fn idle_pass(pass: u32) {
    ENGINE.idle_pass(pass);
}

/// Progress the engine until `done` holds.
#[inline]
pub fn wait_until(mut done: impl FnMut(&mut Engine) -> bool) -> Result<()> {
    let mut pass = 0u32;
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
        idle_pass(pass);
        pass = pass.saturating_add(1);
    }
}
