//! The MPI tool information interface (MPI-4.0 chapter 15): every tunable of the configuration
//! registry is a control variable, every profiler counter a performance variable.
//!
//! - Control variables: index = the tunable's index in `config::TUNABLES`. Integers, booleans
//!   and choices are MPI_INT (choices with an MPI_T_enum); strings MPI_CHAR. Tunables marked
//!   writable have scope MPI_T_SCOPE_LOCAL and may be written at any time (the next message
//!   follows the new value); the others (scope MPI_T_SCOPE_ALL_EQ) may be written only before
//!   MPI_Init. Writes before MPI_Init take effect when MPI starts.
//! - Performance variables: `profile::PVARS`, class COUNTER, MPI_UNSIGNED_LONG_LONG,
//!   continuous (always counting: start/stop report MPI_T_ERR_PVAR_NO_STARTSTOP) and read-only
//!   (reset is per handle: it remembers the value to subtract).
//! - Categories: protocol, transport, progress. No events and no event sources.
//!
//! MPI_T functions return their error codes; they do not call error handlers.
//! Handles are small integers disguised as pointers (never 0, never dereferenced).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

use crate::abi::*;
use crate::util::{copy_cstr, out};
use protean_core::config::{Config, Kind, Value, TUNABLES};
use protean_core::mpi::global::{self, with, Phase};
use protean_core::profile::PVARS;

struct PvarHandle {
    session: usize,
    pvar: usize,
    /// Counter value at the last reset (reads report the difference).
    base: u64,
}

#[derive(Default)]
struct State {
    inits: u32,
    cvar_handles: Vec<Option<usize>>,
    sessions: Vec<bool>,
    pvar_handles: Vec<Option<PvarHandle>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    inits: 0,
    cvar_handles: Vec::new(),
    sessions: Vec::new(),
    pvar_handles: Vec::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run `f` on the state if the interface is initialised.
fn initialised<R>(f: impl FnOnce(&mut State) -> Result<R, c_int>) -> Result<R, c_int> {
    let mut s = state();
    if s.inits == 0 {
        return Err(MPI_T_ERR_NOT_INITIALIZED);
    }
    f(&mut s)
}

fn code(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(c) => c,
    }
}

fn to_ptr<T>(i: usize) -> *mut T {
    (i + 1) as *mut T
}

fn from_ptr<T>(p: *mut T) -> Option<usize> {
    (p as usize).checked_sub(1)
}

/// Copy a name or description out with MPI_T's (buffer, in/out length) convention: `len` is
/// the buffer size on input (0: only the length is wanted) and the length + 1 on output.
unsafe fn give_string(s: &str, buf: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    if !buf.is_null() && *len > 0 {
        copy_cstr(s, buf, *len as usize);
    }
    *len = s.len() as c_int + 1;
}

// -------------------------------------------------------------------------------------------
// Setup

/// # Safety
/// `provided` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    state().inits += 1;
    out(
        provided,
        required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE),
    );
    MPI_SUCCESS
}

#[no_mangle]
pub extern "C" fn protean_MPI_T_finalize() -> c_int {
    let mut s = state();
    if s.inits == 0 {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    s.inits -= 1;
    if s.inits == 0 {
        *s = State::default();
    }
    MPI_SUCCESS
}

// -------------------------------------------------------------------------------------------
// Control variables

fn cvar_type(k: Kind) -> MPI_Datatype {
    match k {
        Kind::Str => MPI_CHAR,
        _ => MPI_INT,
    }
}

/// Characters a string control variable may hold (with its NUL).
const CVAR_STRING_MAX: usize = 256;

/// Current value of tunable `i`: from the engine once MPI runs, else as MPI will start.
fn cvar_value(i: usize) -> Option<Value> {
    if global::phase() == Phase::Initialized {
        if let Ok(v) = with(|e| e.cfg.get(i)) {
            return v;
        }
    }
    Config::effective().ok()?.get(i)
}

/// # Safety
/// `num_cvar` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_cvar, TUNABLES.len() as c_int);
        Ok(())
    }))
}

/// # Safety
/// Output arguments are null or writable; strings follow MPI_T's length convention.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_get_info(
    cvar_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    scope: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let t = TUNABLES
            .get(usize::try_from(cvar_index).map_err(|_| MPI_T_ERR_INVALID_INDEX)?)
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        give_string(t.name, name, name_len);
        out(
            verbosity,
            match t.name {
                "eager_limit" | "protocol" | "transports" => MPI_T_VERBOSITY_USER_BASIC,
                _ if t.writable => MPI_T_VERBOSITY_TUNER_BASIC,
                _ => MPI_T_VERBOSITY_TUNER_DETAIL,
            },
        );
        out(datatype, cvar_type(t.kind));
        out(
            enumtype,
            match t.kind {
                Kind::Choice(_) => to_ptr(cvar_index as usize),
                _ => std::ptr::null_mut(),
            },
        );
        give_string(t.doc, desc, desc_len);
        out(bind, MPI_T_BIND_NO_OBJECT);
        out(
            scope,
            if t.writable {
                MPI_T_SCOPE_LOCAL
            } else {
                MPI_T_SCOPE_ALL_EQ
            },
        );
        Ok(())
    }))
}

/// # Safety
/// `name` is a NUL-terminated string; `cvar_index` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_get_index(
    name: *const c_char,
    cvar_index: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        if name.is_null() {
            return Err(MPI_T_ERR_INVALID_NAME);
        }
        let n = CStr::from_ptr(name).to_string_lossy();
        let i = Config::index_of(&n).ok_or(MPI_T_ERR_INVALID_NAME)?;
        out(cvar_index, i as c_int);
        Ok(())
    }))
}

/// # Safety
/// `handle` and `count` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_handle_alloc(
    cvar_index: c_int,
    obj_handle: *mut c_void,
    handle: *mut MPI_T_cvar_handle,
    count: *mut c_int,
) -> c_int {
    let _ = obj_handle; // every variable is bound to no object
    code(initialised(|s| {
        let i = usize::try_from(cvar_index).map_err(|_| MPI_T_ERR_INVALID_INDEX)?;
        let t = TUNABLES.get(i).ok_or(MPI_T_ERR_INVALID_INDEX)?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        s.cvar_handles.push(Some(i));
        *handle = to_ptr(s.cvar_handles.len() - 1);
        out(
            count,
            if t.kind == Kind::Str {
                CVAR_STRING_MAX as c_int
            } else {
                1
            },
        );
        Ok(())
    }))
}

/// # Safety
/// `handle` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_handle_free(handle: *mut MPI_T_cvar_handle) -> c_int {
    code(initialised(|s| {
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        let h = from_ptr(*handle).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        match s.cvar_handles.get_mut(h) {
            Some(slot @ Some(_)) => *slot = None,
            _ => return Err(MPI_T_ERR_INVALID_HANDLE),
        }
        *handle = std::ptr::null_mut();
        Ok(())
    }))
}

fn cvar_of(s: &State, handle: MPI_T_cvar_handle) -> Result<usize, c_int> {
    let h = from_ptr(handle).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    s.cvar_handles
        .get(h)
        .copied()
        .flatten()
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

/// # Safety
/// `buf` has room for the variable (`count` elements of its datatype).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_read(
    handle: MPI_T_cvar_handle,
    buf: *mut c_void,
) -> c_int {
    let i = match initialised(|s| cvar_of(s, handle)) {
        Ok(i) => i,
        Err(c) => return c,
    };
    if buf.is_null() {
        return MPI_T_ERR_INVALID;
    }
    match cvar_value(i) {
        Some(Value::Int(v)) => {
            *(buf as *mut c_int) = v.clamp(c_int::MIN as i64, c_int::MAX as i64) as c_int
        }
        Some(Value::Bool(b)) => *(buf as *mut c_int) = b as c_int,
        Some(Value::Choice(c)) => *(buf as *mut c_int) = c as c_int,
        Some(Value::Str(v)) => {
            copy_cstr(&v, buf as *mut c_char, CVAR_STRING_MAX);
        }
        None => return MPI_T_ERR_INVALID_INDEX,
    }
    MPI_SUCCESS
}

/// # Safety
/// `buf` holds a value of the variable's datatype.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_cvar_write(
    handle: MPI_T_cvar_handle,
    buf: *const c_void,
) -> c_int {
    let i = match initialised(|s| cvar_of(s, handle)) {
        Ok(i) => i,
        Err(c) => return c,
    };
    if buf.is_null() {
        return MPI_T_ERR_INVALID;
    }
    let t = &TUNABLES[i];
    let v = match t.kind {
        Kind::Str => Value::Str(
            CStr::from_ptr(buf as *const c_char)
                .to_string_lossy()
                .into_owned(),
        ),
        Kind::Bool => Value::Bool(*(buf as *const c_int) != 0),
        Kind::Choice(_) => Value::Choice(*(buf as *const c_int) as usize),
        Kind::Int { .. } => Value::Int(*(buf as *const c_int) as i64),
    };
    match global::phase() {
        Phase::Initialized => {
            if !t.writable {
                return MPI_T_ERR_CVAR_SET_NOT_NOW;
            }
            // A value the engine cannot use (a cost model that does not parse) is refused
            // and the old one stays.
            let set = |e: &mut protean_core::mpi::engine::Engine| -> Result<(), String> {
                let old = e.cfg.get(i).expect("tunable index");
                e.cfg.set(i, &v)?;
                e.reconfigure().inspect_err(|_| {
                    let _ = e.cfg.set(i, &old);
                })
            };
            match with(set) {
                Ok(Ok(())) => MPI_SUCCESS,
                Ok(Err(_)) => MPI_T_ERR_INVALID,
                Err(_) => MPI_T_ERR_CVAR_SET_NOT_NOW,
            }
        }
        Phase::Uninitialized => match Config::set_before_init(i, v) {
            Ok(()) => MPI_SUCCESS,
            Err(_) => MPI_T_ERR_INVALID,
        },
        Phase::Finalized => MPI_T_ERR_CVAR_SET_NEVER,
    }
}

// -------------------------------------------------------------------------------------------
// Enumerations (the choices of a choice tunable)

fn choices(enumtype: MPI_T_enum) -> Result<(&'static str, &'static [&'static str]), c_int> {
    let i = from_ptr(enumtype).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    match TUNABLES.get(i) {
        Some(t) => match t.kind {
            Kind::Choice(c) => Ok((t.name, c)),
            _ => Err(MPI_T_ERR_INVALID_HANDLE),
        },
        None => Err(MPI_T_ERR_INVALID_HANDLE),
    }
}

/// # Safety
/// Output arguments are null or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_enum_get_info(
    enumtype: MPI_T_enum,
    num: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let (n, c) = choices(enumtype)?;
        out(num, c.len() as c_int);
        give_string(n, name, name_len);
        Ok(())
    }))
}

/// # Safety
/// Output arguments are null or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_enum_get_item(
    enumtype: MPI_T_enum,
    indx: c_int,
    value: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let (_, c) = choices(enumtype)?;
        let item = usize::try_from(indx)
            .ok()
            .and_then(|i| c.get(i))
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        out(value, indx);
        give_string(item, name, name_len);
        Ok(())
    }))
}

// -------------------------------------------------------------------------------------------
// Performance variables

/// # Safety
/// `num_pvar` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_pvar, PVARS.len() as c_int);
        Ok(())
    }))
}

/// # Safety
/// Output arguments are null or writable; strings follow MPI_T's length convention.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_get_info(
    pvar_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    var_class: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    readonly: *mut c_int,
    continuous: *mut c_int,
    atomic: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let p = PVARS
            .get(usize::try_from(pvar_index).map_err(|_| MPI_T_ERR_INVALID_INDEX)?)
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        give_string(&p.name, name, name_len);
        out(
            verbosity,
            if p.route.is_none() {
                MPI_T_VERBOSITY_USER_BASIC
            } else {
                MPI_T_VERBOSITY_TUNER_DETAIL
            },
        );
        out(var_class, MPI_T_PVAR_CLASS_COUNTER);
        out(datatype, MPI_UNSIGNED_LONG_LONG);
        out(enumtype, std::ptr::null_mut());
        give_string(&p.desc, desc, desc_len);
        out(bind, MPI_T_BIND_NO_OBJECT);
        out(readonly, 1);
        out(continuous, 1);
        out(atomic, 0);
        Ok(())
    }))
}

/// # Safety
/// `name` is a NUL-terminated string; `pvar_index` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_get_index(
    name: *const c_char,
    var_class: c_int,
    pvar_index: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        if name.is_null() {
            return Err(MPI_T_ERR_INVALID_NAME);
        }
        let n = CStr::from_ptr(name).to_string_lossy();
        let i = PVARS
            .iter()
            .position(|p| p.name == n)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        if var_class != MPI_T_PVAR_CLASS_COUNTER {
            return Err(MPI_T_ERR_INVALID_NAME);
        }
        out(pvar_index, i as c_int);
        Ok(())
    }))
}

/// # Safety
/// `session` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_session_create(
    session: *mut MPI_T_pvar_session,
) -> c_int {
    code(initialised(|s| {
        if session.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        s.sessions.push(true);
        *session = to_ptr(s.sessions.len() - 1);
        Ok(())
    }))
}

fn session_of(s: &State, session: MPI_T_pvar_session) -> Result<usize, c_int> {
    let i = from_ptr(session).ok_or(MPI_T_ERR_INVALID_SESSION)?;
    match s.sessions.get(i) {
        Some(true) => Ok(i),
        _ => Err(MPI_T_ERR_INVALID_SESSION),
    }
}

/// # Safety
/// `session` points to a session handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_session_free(
    session: *mut MPI_T_pvar_session,
) -> c_int {
    code(initialised(|s| {
        if session.is_null() {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        let i = session_of(s, *session)?;
        s.sessions[i] = false;
        for h in s.pvar_handles.iter_mut() {
            if h.as_ref().is_some_and(|h| h.session == i) {
                *h = None;
            }
        }
        *session = std::ptr::null_mut();
        Ok(())
    }))
}

/// Current value of performance variable `i`.
fn pvar_now(i: usize) -> u64 {
    with(|e| e.pvar(i)).unwrap_or(0)
}

/// # Safety
/// `handle` and `count` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_handle_alloc(
    session: MPI_T_pvar_session,
    pvar_index: c_int,
    obj_handle: *mut c_void,
    handle: *mut MPI_T_pvar_handle,
    count: *mut c_int,
) -> c_int {
    let _ = obj_handle;
    code(initialised(|s| {
        let sess = session_of(s, session)?;
        let i = usize::try_from(pvar_index)
            .ok()
            .filter(|i| *i < PVARS.len())
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        s.pvar_handles.push(Some(PvarHandle {
            session: sess,
            pvar: i,
            base: 0,
        }));
        *handle = to_ptr(s.pvar_handles.len() - 1);
        out(count, 1);
        Ok(())
    }))
}

fn pvar_handle(
    s: &mut State,
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> Result<&mut PvarHandle, c_int> {
    let sess = session_of(s, session)?;
    let h = from_ptr(handle).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    match s.pvar_handles.get_mut(h) {
        Some(Some(p)) if p.session == sess => Ok(p),
        _ => Err(MPI_T_ERR_INVALID_HANDLE),
    }
}

fn all_handles(handle: MPI_T_pvar_handle) -> bool {
    // SAFETY: reading an immutable exported object.
    handle == unsafe { MPI_T_PVAR_ALL_HANDLES }
}

/// # Safety
/// `handle` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_handle_free(
    session: MPI_T_pvar_session,
    handle: *mut MPI_T_pvar_handle,
) -> c_int {
    code(initialised(|s| {
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        pvar_handle(s, session, *handle)?;
        let h = from_ptr(*handle).expect("checked");
        s.pvar_handles[h] = None;
        *handle = std::ptr::null_mut();
        Ok(())
    }))
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_start(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    code(initialised(|s| {
        session_of(s, session)?;
        if all_handles(handle) {
            return Ok(()); // every variable is continuous: nothing to start
        }
        pvar_handle(s, session, handle)?;
        Err(MPI_T_ERR_PVAR_NO_STARTSTOP)
    }))
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_stop(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    protean_MPI_T_pvar_start(session, handle)
}

/// # Safety
/// `buf` has room for one unsigned long long.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_read(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    pvar_read(session, handle, buf, false)
}

/// # Safety
/// `buf` has room for one unsigned long long.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_readreset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    pvar_read(session, handle, buf, true)
}

unsafe fn pvar_read(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
    reset: bool,
) -> c_int {
    if all_handles(handle) {
        return MPI_T_ERR_INVALID_HANDLE;
    }
    let pvar = match initialised(|s| pvar_handle(s, session, handle).map(|p| p.pvar)) {
        Ok(p) => p,
        Err(c) => return c,
    };
    if buf.is_null() {
        return MPI_T_ERR_INVALID;
    }
    // Read the engine outside the MPI_T lock (the engine may be busy on another thread).
    let now = pvar_now(pvar);
    code(initialised(|s| {
        let p = pvar_handle(s, session, handle)?;
        *(buf as *mut u64) = now.saturating_sub(p.base);
        if reset {
            p.base = now;
        }
        Ok(())
    }))
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_reset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    let targets: Vec<usize> = match initialised(|s| {
        let sess = session_of(s, session)?;
        if all_handles(handle) {
            return Ok(s
                .pvar_handles
                .iter()
                .enumerate()
                .filter(|(_, h)| h.as_ref().is_some_and(|h| h.session == sess))
                .map(|(i, _)| i)
                .collect());
        }
        pvar_handle(s, session, handle)?;
        Ok(vec![from_ptr(handle).expect("checked")])
    }) {
        Ok(t) => t,
        Err(c) => return c,
    };
    for h in targets {
        let pvar = match state().pvar_handles.get(h) {
            Some(Some(p)) => p.pvar,
            _ => continue,
        };
        let now = pvar_now(pvar);
        if let Some(Some(p)) = state().pvar_handles.get_mut(h) {
            p.base = now;
        }
    }
    MPI_SUCCESS
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_pvar_write(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *const c_void,
) -> c_int {
    let _ = buf;
    code(initialised(|s| {
        if !all_handles(handle) {
            pvar_handle(s, session, handle)?;
        }
        Err(MPI_T_ERR_PVAR_NO_WRITE)
    }))
}

// -------------------------------------------------------------------------------------------
// Categories

struct Category {
    name: &'static str,
    desc: &'static str,
    cvars: fn(&str) -> bool,
    pvars: bool,
}

const CATEGORIES: &[Category] = &[
    Category {
        name: "protean_protocol",
        desc: "Point-to-point protocols: the policy, eager limits, single copy; counters of messages per protocol and transport",
        cvars: |n| n.contains("eager") || n.contains("protocol") || n.contains("coop") || n.contains("single_copy") || n == "eager_rndv_prefix",
        pvars: true,
    },
    Category {
        name: "protean_transport",
        desc: "Transports: which are used, shared-memory channel geometry, TCP settings, host identity",
        cvars: |n| n == "transports" || n == "hostname" || ((n.starts_with("shm_") || n.starts_with("tcp_")) && !n.contains("eager") && !n.contains("coop") && !n.contains("single_copy")),
        pvars: false,
    },
    Category {
        name: "protean_progress",
        desc: "Progress: how waiting ranks wait, diagnostics",
        cvars: |n| n == "progress_yield" || n == "verbose",
        pvars: false,
    },
];

fn category(i: c_int) -> Result<&'static Category, c_int> {
    usize::try_from(i)
        .ok()
        .and_then(|i| CATEGORIES.get(i))
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

fn category_cvars(c: &Category) -> Vec<c_int> {
    TUNABLES
        .iter()
        .enumerate()
        .filter(|(_, t)| (c.cvars)(t.name))
        .map(|(i, _)| i as c_int)
        .collect()
}

fn category_pvars(c: &Category) -> Vec<c_int> {
    if c.pvars {
        (0..PVARS.len() as c_int).collect()
    } else {
        Vec::new()
    }
}

/// # Safety
/// `num_cat` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_num(num_cat: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_cat, CATEGORIES.len() as c_int);
        Ok(())
    }))
}

/// # Safety
/// Output arguments are null or writable; strings follow MPI_T's length convention.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_info(
    cat_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    desc: *mut c_char,
    desc_len: *mut c_int,
    num_cvars: *mut c_int,
    num_pvars: *mut c_int,
    num_categories: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let c = category(cat_index)?;
        give_string(c.name, name, name_len);
        give_string(c.desc, desc, desc_len);
        out(num_cvars, category_cvars(c).len() as c_int);
        out(num_pvars, category_pvars(c).len() as c_int);
        out(num_categories, 0);
        Ok(())
    }))
}

/// # Safety
/// `name` is a NUL-terminated string; `cat_index` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_index(
    name: *const c_char,
    cat_index: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        if name.is_null() {
            return Err(MPI_T_ERR_INVALID_NAME);
        }
        let n = CStr::from_ptr(name).to_string_lossy();
        let i = CATEGORIES
            .iter()
            .position(|c| c.name == n)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        out(cat_index, i as c_int);
        Ok(())
    }))
}

unsafe fn give_indices(v: &[c_int], len: c_int, indices: *mut c_int) -> Result<(), c_int> {
    if len < 0 {
        return Err(MPI_T_ERR_INVALID);
    }
    if indices.is_null() && len > 0 {
        return Err(MPI_T_ERR_INVALID);
    }
    for (k, i) in v.iter().take(len as usize).enumerate() {
        *indices.add(k) = *i;
    }
    Ok(())
}

/// # Safety
/// `indices` has room for `len` ints.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_cvars(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        give_indices(&category_cvars(category(cat_index)?), len, indices)
    }))
}

/// # Safety
/// `indices` has room for `len` ints.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_pvars(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        give_indices(&category_pvars(category(cat_index)?), len, indices)
    }))
}

/// # Safety
/// `indices` has room for `len` ints.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_categories(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        category(cat_index)?;
        give_indices(&[], len, indices)
    }))
}

/// # Safety
/// `indices` has room for `len` ints.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_events(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        category(cat_index)?;
        give_indices(&[], len, indices)
    }))
}

/// # Safety
/// `num_events` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_get_num_events(
    cat_index: c_int,
    num_events: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        category(cat_index)?;
        out(num_events, 0);
        Ok(())
    }))
}

/// # Safety
/// `update_number` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_category_changed(update_number: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(update_number, 0); // the set of variables never changes
        Ok(())
    }))
}

// -------------------------------------------------------------------------------------------
// Events and sources: Protean defines none.

/// # Safety
/// `num_events` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_num(num_events: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_events, 0);
        Ok(())
    }))
}

/// # Safety
/// `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_index(
    name: *const c_char,
    event_index: *mut c_int,
) -> c_int {
    let _ = (name, event_index);
    code(initialised(|_| Err(MPI_T_ERR_INVALID_NAME)))
}

/// # Safety
/// `num_sources` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_source_get_num(num_sources: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_sources, 0);
        Ok(())
    }))
}
