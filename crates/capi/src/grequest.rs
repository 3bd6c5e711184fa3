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
//!
//! MPICH's extensions, with its ABI (`include/mpi.h`): MPIX_Grequest_start takes two more
//! callbacks (all five must be given, as MPICH checks; MPI_ERR_ARG otherwise), and MPIX_Grequest_class_create / MPIX_Grequest_class_allocate make requests of a
//! class that shares its five callbacks (a class handle is MPICH's direct handle of object
//! kind 0xd, `0xb4000000 | index`; classes live until MPI_Finalize):
//!
//! - poll_fn(extra_state, status): polled by every test call and every pass of a waiting loop
//!   (through `mpi::global::poll_hook`), outside the engine, for each generalized request not
//!   complete yet, the freed ones included; it completes the request with
//!   MPI_Grequest_complete when the work is done;
//! - wait_fn(count, array_of_states, timeout, status): may block until work completes; the
//!   waiting calls (MPI_Wait, MPI_Waitall, MPI_Waitany, MPI_Waitsome) call it (timeout 0, as
//!   MPICH) on their generalized requests not complete yet, all the requests of one class in
//!   one call (a request of MPIX_Grequest_start is a class of its own), repeatedly until
//!   they are complete. MPI_Waitany and MPI_Waitsome call it only when every request still
//!   pending in the call is a generalized one (blocking there could otherwise hold up a
//!   request that is complete already or would be by progress).
//!
//! A poll_fn or wait_fn that returns an error completes its requests, and the completion call
//! reports the error as theirs.

use protean_core::ids::ReqId;
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
pub type PollFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
pub type WaitFn = unsafe extern "C" fn(c_int, *mut *mut c_void, f64, *mut MPI_Status) -> c_int;

/// The callbacks of a request (or of a class of them).
#[derive(Clone, Copy)]
struct Fns {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    poll: Option<PollFn>,
    wait: Option<WaitFn>,
}

#[derive(Clone, Copy)]
struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    poll: Option<PollFn>,
    wait: Option<WaitFn>,
    /// The class (MPIX_Grequest_class_allocate: its index + 1; 0: a class of its own).
    class: u32,
    extra: usize,
    /// MPI_Request_free was called before MPI_Grequest_complete.
    freed: bool,
    /// A poll_fn or wait_fn failed with this code (the request was completed then).
    failed: Option<(&'static str, c_int)>,
}

/// Live generalized requests with a poll_fn (the poll hook looks in the table only then).
static POLLED: AtomicUsize = AtomicUsize::new(0);
/// Live generalized requests with a wait_fn.
static WAITED: AtomicUsize = AtomicUsize::new(0);
/// The classes of MPIX_Grequest_class_create, by index.
static CLASSES: Mutex<Vec<Fns>> = Mutex::new(Vec::new());
/// MPICH's handle of a class: direct handle (0x2 << 30) of object kind MPIR_GREQ_CLASS
/// (0xd << 26).
const CLASS_DIRECT: u32 = 0xb400_0000;
const CLASS_MASK: u32 = (1 << 26) - 1;

thread_local! {
    /// This thread runs poll_fns now (a poll_fn calling MPI_Test does not poll again).
    static POLLING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Generalized requests alive: the completion calls look in the table only when there are
/// some, so other requests pay one relaxed load.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static TABLE: Mutex<Option<HashMap<ReqId, Greq>>> = Mutex::new(None);

fn table<R>(f: impl FnOnce(&mut HashMap<ReqId, Greq>) -> R) -> R {
    let mut g = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

fn lookup(slot: ReqId) -> Option<Greq> {
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
fn release(slot: ReqId) {
    if let Some(g) = table(|t| t.remove(&slot)) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if g.poll.is_some() {
            POLLED.fetch_sub(1, Ordering::Relaxed);
        }
        if g.wait.is_some() {
            WAITED.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _ = with(|e| e.grequest_release(slot));
}

/// A completion call collected request `slot` with status `st`: for a generalized request,
/// the status its query_fn gives, after which (`release`) free_fn runs and the slot is given
/// back. Other requests: `st` unchanged.
///
/// # Safety
/// The callbacks registered for the request are callable with its extra state.
#[inline]
pub unsafe fn finished(slot: ReqId, st: Status, release_it: bool) -> Status {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return st;
    }
    finished_greq(slot, st, release_it)
}

/// [`finished`] while generalized requests are alive.
///
/// # Safety
/// As [`finished`].
#[inline(never)]
unsafe fn finished_greq(slot: ReqId, st: Status, release_it: bool) -> Status {
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
    let mut error = g.failed.map(|(which, rc)| callback_error(which, rc));
    if let Some(q) = g.query {
        let rc = q(g.extra as *mut c_void, &mut c);
        if rc != MPI_SUCCESS && error.is_none() {
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
pub unsafe fn cancel(slot: ReqId) -> Option<c_int> {
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
pub unsafe fn free(slot: ReqId) -> Option<c_int> {
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

/// A generalized request with callbacks `f` of class `class` (see [`Greq::class`]).
///
/// # Safety
/// The callbacks are null or functions of their MPI types; `request` is writable.
unsafe fn start(
    f: Fns,
    class: u32,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    if request.is_null() {
        return raise(MPI_COMM_WORLD, bad(ErrorClass::Arg, "null request"), func);
    }
    let world = comm_id(MPI_COMM_WORLD).expect("MPI_COMM_WORLD");
    let slot = match with(|e| e.grequest_start(world)) {
        Ok(s) => s,
        Err(e) => return raise(MPI_COMM_WORLD, e, func),
    };
    table(|t| {
        t.insert(
            slot,
            Greq {
                query: f.query,
                free: f.free,
                cancel: f.cancel,
                poll: f.poll,
                wait: f.wait,
                class,
                extra: extra_state as usize,
                freed: false,
                failed: None,
            },
        )
    });
    LIVE.fetch_add(1, Ordering::Relaxed);
    if f.poll.is_some() {
        POLLED.fetch_add(1, Ordering::Relaxed);
        protean_core::mpi::global::set_poll_hook(poll_all);
    }
    if f.wait.is_some() {
        WAITED.fetch_add(1, Ordering::Relaxed);
    }
    *request = request_handle(slot);
    MPI_SUCCESS
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
    let f = Fns {
        query: query_fn,
        free: free_fn,
        cancel: cancel_fn,
        poll: None,
        wait: None,
    };
    start(f, 0, extra_state, request, "MPI_Grequest_start")
}

/// # Safety
/// The callbacks are null or functions of their MPICH types; `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPIX_Grequest_start(
    query_fn: Option<QueryFn>,
    free_fn: Option<FreeFn>,
    cancel_fn: Option<CancelFn>,
    poll_fn: Option<PollFn>,
    wait_fn: Option<WaitFn>,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    let f = Fns {
        query: query_fn,
        free: free_fn,
        cancel: cancel_fn,
        poll: poll_fn,
        wait: wait_fn,
    };
    if let Err(e) = all_given(&f) {
        return raise(MPI_COMM_WORLD, e, "MPIX_Grequest_start");
    }
    start(f, 0, extra_state, request, "MPIX_Grequest_start")
}

/// MPICH wants all five callbacks of MPIX_Grequest_start and MPIX_Grequest_class_create.
fn all_given(f: &Fns) -> Result<(), MpiError> {
    let missing = [
        (f.query.is_none(), "query_fn"),
        (f.free.is_none(), "free_fn"),
        (f.cancel.is_none(), "cancel_fn"),
        (f.poll.is_none(), "poll_fn"),
        (f.wait.is_none(), "wait_fn"),
    ];
    match missing.iter().find(|m| m.0) {
        Some((_, name)) => Err(bad(ErrorClass::Arg, format!("null {name}"))),
        None => Ok(()),
    }
}

/// # Safety
/// The callbacks are null or functions of their MPICH types; `greq_class` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPIX_Grequest_class_create(
    query_fn: Option<QueryFn>,
    free_fn: Option<FreeFn>,
    cancel_fn: Option<CancelFn>,
    poll_fn: Option<PollFn>,
    wait_fn: Option<WaitFn>,
    greq_class: *mut MPIX_Grequest_class,
) -> c_int {
    const F: &str = "MPIX_Grequest_class_create";
    if greq_class.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null class argument"),
            F,
        );
    }
    if protean_core::mpi::global::phase() != protean_core::mpi::global::Phase::Initialized {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Other,
                "MPI is not initialized (or already finalized)",
            ),
            F,
        );
    }
    let f = Fns {
        query: query_fn,
        free: free_fn,
        cancel: cancel_fn,
        poll: poll_fn,
        wait: wait_fn,
    };
    if let Err(e) = all_given(&f) {
        return raise(MPI_COMM_WORLD, e, F);
    }
    let mut c = CLASSES.lock().unwrap_or_else(|p| p.into_inner());
    if c.len() as u32 >= CLASS_MASK {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "too many generalized request classes"),
            F,
        );
    }
    c.push(f);
    *greq_class = (CLASS_DIRECT | (c.len() as u32 - 1)) as MPIX_Grequest_class;
    MPI_SUCCESS
}

/// # Safety
/// `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPIX_Grequest_class_allocate(
    greq_class: MPIX_Grequest_class,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    const F: &str = "MPIX_Grequest_class_allocate";
    let h = greq_class as u32;
    let f = (h & !CLASS_MASK == CLASS_DIRECT)
        .then(|| {
            let c = CLASSES.lock().unwrap_or_else(|p| p.into_inner());
            c.get((h & CLASS_MASK) as usize).copied()
        })
        .flatten();
    let Some(f) = f else {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                "invalid generalized request class (not one MPIX_Grequest_class_create made)",
            ),
            F,
        );
    };
    start(f, (h & CLASS_MASK) + 1, extra_state, request, F)
}

/// A poll_fn or wait_fn of request `slot` failed with `rc`: the request completes, and its
/// completion call reports the error.
fn fail(slot: ReqId, which: &'static str, rc: c_int) {
    table(|t| {
        if let Some(g) = t.get_mut(&slot) {
            g.failed.get_or_insert((which, rc));
        }
    });
    let _ = with(|e| e.grequest_complete(slot));
}

fn complete(slot: ReqId) -> bool {
    with(|e| e.is_complete(slot).unwrap_or(true)).unwrap_or(true)
}

fn scratch_status() -> MPI_Status {
    MPI_Status {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
    }
}

/// The poll hook: poll_fn of every generalized request not complete yet (module doc).
fn poll_all() {
    if POLLED.load(Ordering::Relaxed) == 0 || POLLING.with(|p| p.replace(true)) {
        return;
    }
    let polled: Vec<(ReqId, PollFn, usize)> = table(|t| {
        t.iter()
            .filter_map(|(&s, g)| g.poll.map(|p| (s, p, g.extra)))
            .collect()
    });
    for (slot, poll, extra) in polled {
        // Still there and not complete (an earlier poll_fn may have completed or freed it)?
        if lookup(slot).is_none() || complete(slot) {
            continue;
        }
        let mut st = scratch_status();
        // SAFETY: the request's poll_fn, with its extra state, outside the engine.
        let rc = unsafe { poll(extra as *mut c_void, &mut st) };
        if rc != MPI_SUCCESS {
            fail(slot, "poll_fn", rc);
        }
    }
    POLLING.with(|p| p.set(false));
}

/// Pending requests of one class in a waiting call: the class's key, its wait_fn, and each
/// request's slot and extra state.
type Group = (u32, WaitFn, Vec<(ReqId, usize)>);

/// Before a waiting call on `slots` (module doc): call the wait_fn of its generalized requests
/// not complete yet until they are. `all`: MPI_Wait, MPI_Waitall (else MPI_Waitany,
/// MPI_Waitsome: only while every pending request is a generalized one with a wait_fn and
/// none is complete).
///
/// # Safety
/// The callbacks registered for the requests are callable with their extra states.
pub unsafe fn block(slots: &[Option<ReqId>], all: bool) {
    if WAITED.load(Ordering::Relaxed) == 0 {
        return;
    }
    loop {
        // Pending generalized requests with a wait_fn, by class; whether others are pending.
        let mut groups: Vec<Group> = Vec::new();
        let mut stop = false;
        for &slot in slots.iter().flatten() {
            let g = lookup(slot);
            if complete(slot) {
                stop |= !all;
                continue;
            }
            match g.and_then(|g| g.wait.map(|w| (g, w))) {
                Some((g, w)) => {
                    let key = if g.class == 0 {
                        u32::MAX - slot.get()
                    } else {
                        g.class
                    };
                    match groups.iter_mut().find(|x| x.0 == key) {
                        Some(x) => x.2.push((slot, g.extra)),
                        None => groups.push((key, w, vec![(slot, g.extra)])),
                    }
                }
                None => stop |= !all,
            }
        }
        if stop || groups.is_empty() {
            return;
        }
        for (_, wait, reqs) in groups {
            let mut states: Vec<*mut c_void> =
                reqs.iter().map(|&(_, x)| x as *mut c_void).collect();
            let mut st = scratch_status();
            let rc = wait(states.len() as c_int, states.as_mut_ptr(), 0.0, &mut st);
            if rc != MPI_SUCCESS {
                for &(slot, _) in &reqs {
                    if !complete(slot) {
                        fail(slot, "wait_fn", rc);
                    }
                }
            }
        }
        let _ = with(|e| e.progress());
    }
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
