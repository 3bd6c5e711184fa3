//! Generalized requests (MPI-4.1 13.2): MPI_Grequest_start, MPI_Grequest_complete, and the
//! callbacks the completion calls run.
//!
//! A generalized request is a request of the engine (`Engine::grequest_start`) that nothing
//! in the engine completes: MPI_Grequest_complete marks it complete, and MPI_Wait, MPI_Test
//! and the others see it complete like any request. Its callbacks are kept here, by slot. The
//! engine keeps a completed generalized request in its slab when a completion call collects
//! it, until this module has run query_fn and free_fn and releases the slot, so a slot is
//! never reused while its callbacks are still to run. Callbacks run outside the engine (they
//! may call MPI):
//!
//! - a completion call (MPI_Wait, MPI_Test, MPI_Waitall, ...): query_fn fills the status (a
//!   nonzero return is the request's error, raised like a failed receive's), then free_fn;
//! - MPI_Request_get_status: query_fn only;
//! - MPI_Cancel: cancel_fn(extra_state, complete), `complete` telling whether
//!   MPI_Grequest_complete was called already;
//! - MPI_Request_free: free_fn, at once when the request is complete, else in
//!   MPI_Grequest_complete (whichever comes last, as the standard says).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::abi::*;
use crate::errors::{bad, class_of_code, class_of_number, raise};
use crate::handles::{comm_id, request_handle, request_slot};
use crate::util::{status_bytes, status_cancelled, write_status};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::global::with;
use protean_core::mpi::request::Status;

pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

#[derive(Clone, Copy)]
struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: usize,
    /// MPI_Request_free was called before MPI_Grequest_complete.
    freed: bool,
}

/// Generalized requests alive: the completion calls look in the table only when there are
/// some, so other requests pay one relaxed load.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static TABLE: Mutex<Option<HashMap<u32, Greq>>> = Mutex::new(None);

fn table<R>(f: impl FnOnce(&mut HashMap<u32, Greq>) -> R) -> R {
    let mut g = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

fn lookup(slot: u32) -> Option<Greq> {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    table(|t| t.get(&slot).copied())
}

/// An error of a callback's return code.
fn callback_error(which: &str, rc: c_int) -> Box<MpiError> {
    let class = class_of_number(class_of_code(rc)).unwrap_or(ErrorClass::Other);
    Box::new(MpiError::new(
        class,
        format!("the generalized request's {which} returned error code {rc}"),
    ))
}

/// Forget a generalized request and give its slot back to the engine.
fn release(slot: u32) {
    if table(|t| t.remove(&slot)).is_some() {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
    let _ = with(|e| e.grequest_release(slot));
}

/// A completion call collected request `slot` with status `st`: for a generalized request,
/// the status its query_fn gives, after which (`release`) free_fn runs and the slot is given
/// back. Other requests: `st` unchanged.
///
/// # Safety
/// The callbacks registered for the request are callable with its extra state.
pub unsafe fn finished(slot: u32, st: Status, release_it: bool) -> Status {
    let Some(g) = lookup(slot) else {
        return st;
    };
    let mut c = MPI_Status {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        MPI_SOURCE: 0,
        MPI_TAG: 0,
        MPI_ERROR: MPI_SUCCESS,
    };
    write_status(&mut c, &st);
    let mut error = None;
    if let Some(q) = g.query {
        let rc = q(g.extra as *mut c_void, &mut c);
        if rc != MPI_SUCCESS {
            error = Some(callback_error("query_fn", rc));
        }
    }
    if release_it {
        if let Some(f) = g.free {
            let rc = f(g.extra as *mut c_void);
            if rc != MPI_SUCCESS && error.is_none() {
                error = Some(callback_error("free_fn", rc));
            }
        }
        release(slot);
    }
    Status {
        source: c.MPI_SOURCE,
        tag: c.MPI_TAG,
        error,
        bytes: status_bytes(&c),
        cancelled: status_cancelled(&c),
    }
}

/// MPI_Cancel of a generalized request: its cancel_fn's return code; None for other requests.
///
/// # Safety
/// As [`finished`].
pub unsafe fn cancel(slot: u32) -> Option<c_int> {
    let g = lookup(slot)?;
    let complete = with(|e| e.is_complete(slot).unwrap_or(false)).unwrap_or(false);
    Some(match g.cancel {
        Some(f) => f(g.extra as *mut c_void, complete as c_int),
        None => MPI_SUCCESS,
    })
}

/// MPI_Request_free of a generalized request: free_fn's return code (MPI_SUCCESS when it
/// runs later, in MPI_Grequest_complete); None for other requests.
///
/// # Safety
/// As [`finished`].
pub unsafe fn free(slot: u32) -> Option<c_int> {
    let g = lookup(slot)?;
    let complete = with(|e| e.is_complete(slot).unwrap_or(false)).unwrap_or(false);
    if !complete {
        table(|t| {
            if let Some(x) = t.get_mut(&slot) {
                x.freed = true;
            }
        });
        return Some(MPI_SUCCESS);
    }
    let rc = match g.free {
        Some(f) => f(g.extra as *mut c_void),
        None => MPI_SUCCESS,
    };
    release(slot);
    Some(rc)
}

/// # Safety
/// The callbacks are null or functions of their MPI types; `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Grequest_start(
    query_fn: Option<QueryFn>,
    free_fn: Option<FreeFn>,
    cancel_fn: Option<CancelFn>,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    const F: &str = "MPI_Grequest_start";
    if request.is_null() {
        return raise(MPI_COMM_WORLD, bad(ErrorClass::Arg, "null request"), F);
    }
    let world = comm_id(MPI_COMM_WORLD).expect("MPI_COMM_WORLD");
    let slot = match with(|e| e.grequest_start(world)) {
        Ok(s) => s,
        Err(e) => return raise(MPI_COMM_WORLD, e, F),
    };
    table(|t| {
        t.insert(
            slot,
            Greq {
                query: query_fn,
                free: free_fn,
                cancel: cancel_fn,
                extra: extra_state as usize,
                freed: false,
            },
        )
    });
    LIVE.fetch_add(1, Ordering::Relaxed);
    *request = request_handle(slot);
    MPI_SUCCESS
}

/// # Safety
/// `request` is a handle MPI_Grequest_start returned.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Grequest_complete(request: MPI_Request) -> c_int {
    const F: &str = "MPI_Grequest_complete";
    let not_greq = || {
        raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Request,
                "not a generalized request (one MPI_Grequest_start made and that is not freed)",
            ),
            F,
        )
    };
    let Some(slot) = request_slot(request) else {
        return not_greq();
    };
    let Some(g) = lookup(slot) else {
        return not_greq();
    };
    match with(|e| e.grequest_complete(slot)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) | Err(e) => return raise(MPI_COMM_WORLD, e, F),
    }
    if g.freed {
        // MPI_Request_free came first: free_fn runs now.
        let rc = match g.free {
            Some(f) => f(g.extra as *mut c_void),
            None => MPI_SUCCESS,
        };
        release(slot);
        if rc != MPI_SUCCESS {
            let e = callback_error("free_fn", rc);
            return raise(MPI_COMM_WORLD, *e, F);
        }
    }
    MPI_SUCCESS
}
