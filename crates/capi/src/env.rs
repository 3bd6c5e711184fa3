//! The environment (MPI-4.0 chapter 11 and parts of 7): start-up and shutdown, thread levels,
//! processor name, abort, the size and rank of a communicator. (Predefined attributes are in
//! `attr.rs`.)

use std::ffi::{c_char, c_int};

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::comm_id;
use crate::util::{copy_cstr, out};
use protean_core::error::ErrorClass;
use protean_core::mpi::engine::Engine;
use protean_core::mpi::global::{self, with, Phase};

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("Protean: internal error (please report it): {info}");
        previous(info);
    }));
}

fn init(required: c_int, func: &str) -> Result<c_int, c_int> {
    match global::phase() {
        Phase::Initialized => {
            return Err(raise(
                MPI_COMM_WORLD,
                bad(ErrorClass::Other, "MPI is already initialized"),
                func,
            ));
        }
        Phase::Finalized => {
            eprintln!("Protean: {func} called after MPI_Finalize: MPI cannot be initialized again");
            std::process::exit(1);
        }
        Phase::Uninitialized => {}
    }
    let provided = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE);
    install_panic_hook();
    match Engine::init(provided) {
        Ok(e) => {
            global::install(e, provided == MPI_THREAD_MULTIPLE);
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
    if global::phase() != Phase::Initialized {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "MPI is not initialized"),
            "MPI_Finalize",
        );
    }
    // Attributes of MPI_COMM_SELF (then MPI_COMM_WORLD) are deleted first, while MPI is still
    // fully usable (their delete callbacks are the standard's "at exit" hook).
    crate::attr::finalize_attrs();
    let r = with(|e| e.finalize());
    let engine = global::uninstall();
    drop(engine);
    match r {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) | Err(e) => {
            eprintln!("Protean: MPI_Finalize: {e}");
            MPI_ERR_OTHER
        }
    }
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Initialized(flag: *mut c_int) -> c_int {
    out(flag, (global::phase() != Phase::Uninitialized) as c_int);
    MPI_SUCCESS
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Finalized(flag: *mut c_int) -> c_int {
    out(flag, (global::phase() == Phase::Finalized) as c_int);
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
