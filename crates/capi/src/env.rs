//! The environment (MPI-4.0 chapter 11 and parts of 7): start-up and shutdown, thread levels,
//! processor name, abort, the size and rank of a communicator. (Predefined attributes are in
//! `attr.rs`.)

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::comm_id;
use crate::util::{copy_cstr, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::comm::Errhandler;
use protean_core::mpi::engine::Engine;
use protean_core::mpi::global::{self, with, Phase};

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("Protean: internal error (please report it): {info}");
        previous(info);
    }));
}

/// The world model's stage in this process (MPI_Init .. MPI_Finalize).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum World {
    Before,
    Active,
    After,
}

/// Who holds the engine. The world model and every open session (MPI-4.0 11.3) share one
/// engine: the first of MPI_Init and MPI_Session_init starts it. It stops at MPI_Finalize
/// when no session is open, else at the last MPI_Session_finalize after MPI_Finalize; in a
/// program that never calls MPI_Init it stays after its last session ends (sessions may be
/// initialized again, and MPI_Init may still come) and stops when the process exits.
/// An engine that has stopped cannot start again: the job's process manager has let this
/// process go.
pub(crate) struct Life {
    pub world: World,
    /// Sessions initialized and not finalized.
    pub sessions: usize,
    /// Error handlers made by MPI_Session_create_errhandler before the engine ran (the
    /// standard allows it, to hand one to MPI_Session_init): the engine's first user handlers
    /// when it starts, with the ids they were given (from ERRH_ABORT + 1, in order).
    pub early_errhandlers: Vec<usize>,
    exit_hook: bool,
}

static LIFE: Mutex<Life> = Mutex::new(Life {
    world: World::Before,
    sessions: 0,
    early_errhandlers: Vec::new(),
    exit_hook: false,
});

/// The lock on [`Life`]. Taken before the engine's (never inside `with`).
pub(crate) fn life() -> MutexGuard<'static, Life> {
    LIFE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Start the engine at thread level `required` unless it runs; the level provided. A running
/// engine keeps its level, raised to MPI_THREAD_MULTIPLE when that is asked for.
pub(crate) fn start_engine(l: &mut Life, required: c_int, func: &str) -> Result<c_int, MpiError> {
    match global::phase() {
        Phase::Initialized => {
            let current = with(|e| e.thread_level)?;
            if required >= MPI_THREAD_MULTIPLE && current < MPI_THREAD_MULTIPLE {
                global::make_multithreaded();
                with(|e| e.thread_level = MPI_THREAD_MULTIPLE)?;
                return Ok(MPI_THREAD_MULTIPLE);
            }
            return Ok(current);
        }
        Phase::Finalized => {
            return Err(bad(
                ErrorClass::Other,
                "MPI has been finalized in this process and cannot be initialized again",
            ));
        }
        Phase::Uninitialized => {}
    }
    let provided = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE);
    install_panic_hook();
    match Engine::init(provided) {
        Ok(mut e) => {
            let early = std::mem::take(&mut l.early_errhandlers);
            e.errhandlers
                .extend(early.into_iter().map(|f| Some(Errhandler::User(f))));
            global::install(e, provided == MPI_THREAD_MULTIPLE);
            // A spawned process joins its parents before MPI_Init returns.
            if let Err(e) = protean_core::mpi::dpm::join_parent() {
                eprintln!("Protean: {func} failed: {}", e);
                let _ = with(|eng| {
                    if let Some(p) = eng.pmi.as_mut() {
                        let _ = p.abort(1, &format!("{func} failed: {}", e.msg));
                    }
                });
                std::process::exit(1);
            }
            if !l.exit_hook {
                l.exit_hook = true;
                // SAFETY: registers a plain extern "C" function.
                unsafe { libc::atexit(at_exit) };
            }
            Ok(provided)
        }
        Err(e) => {
            // No engine: error handlers cannot run; this is fatal like in every MPI.
            eprintln!("Protean: {func} failed: {}", e);
            if let Ok(Some(mut p)) = protean_pmi::PmiClient::from_env() {
                let _ = p.abort(1, &format!("{func} failed: {}", e.msg));
            }
            std::process::exit(1);
        }
    }
}

/// Stop the engine: deliver what is still owed, leave the job (a barrier with every other
/// process of it), drop every object.
pub(crate) fn stop_engine() -> Result<(), MpiError> {
    let r = with(|e| e.finalize());
    let engine = global::uninstall();
    drop(engine);
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) | Err(e) => Err(e),
    }
}

/// At the exit of a program that used sessions only (or ended them after MPI_Finalize):
/// leave the job as MPI_Finalize does. Not when the program took the job down, left with a
/// session open (an error path) or never called MPI_Finalize after MPI_Init: those exits
/// are the process manager's to report, and waiting for the other processes could hang.
extern "C" fn at_exit() {
    let Ok(l) = LIFE.try_lock() else { return };
    if l.world == World::Active || l.sessions > 0 || global::aborting() {
        return;
    }
    if global::phase() == Phase::Initialized {
        drop(l);
        if let Err(e) = stop_engine() {
            eprintln!("Protean: leaving the job at exit: {e}");
        }
    }
}

fn init(required: c_int, func: &str) -> Result<c_int, c_int> {
    let mut l = life();
    match l.world {
        World::Active => {
            drop(l);
            return Err(raise(
                MPI_COMM_WORLD,
                bad(ErrorClass::Other, "MPI is already initialized"),
                func,
            ));
        }
        World::After => {
            eprintln!("Protean: {func} called after MPI_Finalize: MPI cannot be initialized again");
            std::process::exit(1);
        }
        World::Before => {}
    }
    match start_engine(&mut l, required, func) {
        Ok(provided) => {
            l.world = World::Active;
            Ok(provided)
        }
        Err(e) => {
            // Sessions stopped the engine: this process has left the job.
            eprintln!("Protean: {func} failed: {e}");
            std::process::exit(1);
        }
    }
}

/// # Safety
/// argc/argv are ignored (they may be null).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Init(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
) -> c_int {
    match init(MPI_THREAD_SINGLE, "MPI_Init") {
        Ok(_) => MPI_SUCCESS,
        Err(code) => code,
    }
}

/// # Safety
/// `provided` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    if !(MPI_THREAD_SINGLE..=MPI_THREAD_MULTIPLE).contains(&required) {
        // Tolerated like MPICH: a level outside the range gets the nearest one.
    }
    match init(required, "MPI_Init_thread") {
        Ok(p) => {
            out(provided, p);
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

#[no_mangle]
pub extern "C" fn protean_MPI_Finalize() -> c_int {
    let l = life();
    if l.world != World::Active {
        drop(l);
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "MPI is not initialized"),
            "MPI_Finalize",
        );
    }
    drop(l);
    // Attributes of MPI_COMM_SELF (then MPI_COMM_WORLD) are deleted first, while MPI is still
    // fully usable (their delete callbacks are the standard's "at exit" hook).
    crate::attr::finalize_attrs();
    let mut l = life();
    l.world = World::After;
    if l.sessions > 0 {
        // Open sessions keep the engine; the last MPI_Session_finalize stops it.
        return MPI_SUCCESS;
    }
    match stop_engine() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => {
            eprintln!("Protean: MPI_Finalize: {e}");
            MPI_ERR_OTHER
        }
    }
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Initialized(flag: *mut c_int) -> c_int {
    out(flag, (life().world != World::Before) as c_int);
    MPI_SUCCESS
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Finalized(flag: *mut c_int) -> c_int {
    out(flag, (life().world == World::After) as c_int);
    MPI_SUCCESS
}

#[no_mangle]
pub extern "C" fn protean_MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let _ = comm;
    let rank = with(|e| e.rank as i64).unwrap_or(-1);
    let msg = format!("MPI_Abort(errorcode {errorcode}) called by rank {rank}");
    match with(|e| e.abort(errorcode, &msg)) {
        Ok(never) => never,
        Err(_) => {
            eprintln!("Protean: {msg}");
            std::process::exit(if errorcode == 0 { 1 } else { errorcode & 0xff })
        }
    }
}

/// # Safety
/// `provided` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Query_thread(provided: *mut c_int) -> c_int {
    match with(|e| e.thread_level) {
        Ok(l) => {
            out(provided, l);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Query_thread"),
    }
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    match with(|e| e.main_thread == std::thread::current().id()) {
        Ok(m) => {
            out(flag, m as c_int);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Is_thread_main"),
    }
}

/// # Safety
/// `name` has room for MPI_MAX_PROCESSOR_NAME chars; `resultlen` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_processor_name(
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    if name.is_null() || resultlen.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null argument"),
            "MPI_Get_processor_name",
        );
    }
    let host = with(|e| e.hostname.clone()).unwrap_or_else(|_| "localhost".into());
    let n = copy_cstr(&host, name, MPI_MAX_PROCESSOR_NAME as usize);
    *resultlen = n as c_int;
    MPI_SUCCESS
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = with(|e| match comm_id(comm) {
        Some(c) => e.comm(c).map(|c| c.size() as c_int),
        None => Err(bad(ErrorClass::Comm, "invalid communicator")),
    });
    match r {
        Ok(Ok(s)) if !size.is_null() => {
            *size = s;
            MPI_SUCCESS
        }
        Ok(Ok(_)) => raise(
            comm,
            bad(ErrorClass::Arg, "null size pointer"),
            "MPI_Comm_size",
        ),
        Ok(Err(e)) | Err(e) => raise(comm, e, "MPI_Comm_size"),
    }
}

/// # Safety
/// `rank` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    let r = with(|e| match comm_id(comm) {
        Some(c) => e.comm(c).map(|c| c.rank),
        None => Err(bad(ErrorClass::Comm, "invalid communicator")),
    });
    match r {
        Ok(Ok(s)) if !rank.is_null() => {
            *rank = s;
            MPI_SUCCESS
        }
        Ok(Ok(_)) => raise(
            comm,
            bad(ErrorClass::Arg, "null rank pointer"),
            "MPI_Comm_rank",
        ),
        Ok(Err(e)) | Err(e) => raise(comm, e, "MPI_Comm_rank"),
    }
}

/// Profiling control: every call, at any level, marks the start of the program's next phase
/// (the channel manager's profiler and schedule count phases by it). Before MPI_Init or after
/// MPI_Finalize it does nothing.
#[no_mangle]
pub extern "C" fn protean_MPI_Pcontrol(_level: c_int) -> c_int {
    let _ = with(|e| e.pcontrol());
    MPI_SUCCESS
}
