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
//! - Events: `protean_core::events::EVENTS` (channel grants, take-backs, promotions and
//!   demotions, protocol boundaries per peer, program phases), all from one source, the clock
//!   of MPI_Wtime in nanoseconds; how callbacks are called is described at their section.
//! - Categories: protocol, transport, progress.
//!
//! MPI_T functions return their error codes; they do not call error handlers.
//! Handles are small integers disguised as pointers (never 0, never dereferenced).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

use crate::abi::*;
use crate::util::{copy_cstr, out};
use protean_core::config::{Config, Kind, Value, TUNABLES};
use protean_core::events::{self, Elem, Event, Group, EVENTS};
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

/// The position of the NUL-terminated `name` among `names` (a get_index call's answer);
/// MPI_T_ERR_INVALID_NAME for a null name or none that matches.
unsafe fn index_by_name<'a>(
    name: *const c_char,
    mut names: impl Iterator<Item = &'a str>,
) -> Result<usize, c_int> {
    if name.is_null() {
        return Err(MPI_T_ERR_INVALID_NAME);
    }
    let n = CStr::from_ptr(name).to_string_lossy();
    names.position(|x| x == n).ok_or(MPI_T_ERR_INVALID_NAME)
}

// -------------------------------------------------------------------------------------------
// Setup

/// # Safety
/// `provided` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    events::set_sink(on_event);
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
        // Registrations end with the interface (their callbacks are not called again).
        let mut regs = registrations();
        regs.clear();
        for k in 0..EVENTS.len() {
            rearm(&regs, k);
        }
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
        let i = index_by_name(name, PVARS.iter().map(|p| p.name.as_str()))?;
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
    events: Option<Group>,
}

const CATEGORIES: &[Category] = &[
    Category {
        name: "protean_protocol",
        desc: "Point-to-point protocols: the policy, eager limits, single copy; counters of messages per protocol and transport",
        cvars: |n| n.contains("eager") || n.contains("protocol") || n.contains("coop") || n.contains("single_copy") || n == "eager_rndv_prefix",
        pvars: true,
        events: Some(Group::Protocol),
    },
    Category {
        name: "protean_transport",
        desc: "Transports: which are used, shared-memory channel geometry, TCP settings, host identity; the dedicated channels' changes and the program's phases",
        cvars: |n| n == "transports" || n == "hostname" || ((n.starts_with("shm_") || n.starts_with("tcp_")) && !n.contains("eager") && !n.contains("coop") && !n.contains("single_copy")),
        pvars: false,
        events: Some(Group::Transport),
    },
    Category {
        name: "protean_progress",
        desc: "Progress: how waiting ranks wait, diagnostics",
        cvars: |n| n == "progress_yield" || n == "verbose",
        pvars: false,
        events: None,
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

fn category_events(c: &Category) -> Vec<c_int> {
    (0..EVENTS.len())
        .filter(|&k| Some(EVENTS[k].group) == c.events)
        .map(|k| k as c_int)
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
        let i = index_by_name(name, CATEGORIES.iter().map(|c| c.name))?;
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
        give_indices(&category_events(category(cat_index)?), len, indices)
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
        out(
            num_events,
            category_events(category(cat_index)?).len() as c_int,
        );
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
// Events and their source
//
// The kinds are `protean_core::events::EVENTS`; the layer where a change happens raises an
// occurrence, and `on_event` below hands it to the registrations for its kind. Every
// occurrence is raised inside an MPI call with the engine held, so the context Protean offers
// is MPI_T_CB_REQUIRE_MPI_RESTRICTED: a registration's callback for that level is called, or
// else its callback for the least strict level above it (THREAD_SAFE, then
// ASYNC_SIGNAL_SAFE), each promising more. A registration with none of those (no callback,
// or one at MPI_T_CB_REQUIRE_NONE only, which may call any MPI function and so cannot run
// inside one) drops the occurrence and counts it; its dropped handler hears the count
// before the next callback it gets (with that callback's user data), or at
// MPI_T_event_handle_free (with the free call's). The registrations live under their own
// lock, never held while the engine is taken (the engine's holder takes it to raise) nor
// while a callback runs.

/// The source of every event: the clock of the timestamps.
const SOURCE_NAME: &str = "protean_clock";
const SOURCE_DESC: &str = "CLOCK_MONOTONIC in nanoseconds, MPI_Wtime's clock (timestamp / 1e9 = MPI_Wtime then); raises every event of this process, in order";

/// An occurrence as a callback sees it: `MPI_T_event_instance` points at it, on the raising
/// thread's stack, for the duration of the callback.
struct Instance {
    magic: u64,
    kind: usize,
    timestamp: u64,
    values: [i64; MAX_ELEMENTS],
}

const INSTANCE_MAGIC: u64 = 0x7072_6f74_6576_7421;
const MAX_ELEMENTS: usize = 8;

/// A callback and its user data (a pointer the tool owns, kept as a number).
#[derive(Clone, Copy)]
struct Callback {
    f: MPI_T_event_cb_function,
    user_data: usize,
}

struct Registration {
    kind: usize,
    info: Vec<(String, String)>,
    /// By safety level (MPI_T_CB_REQUIRE_NONE ..= ASYNC_SIGNAL_SAFE), with their info.
    callbacks: [Option<Callback>; 4],
    callback_info: [Vec<(String, String)>; 4],
    dropped_handler: Option<MPI_T_event_dropped_cb_function>,
    dropped: u64,
    /// Callbacks running now; a free waits for them (the last one calls the free callback).
    running: u32,
    freeing: Option<(Option<MPI_T_event_free_cb_function>, usize)>,
}

static REGISTRATIONS: Mutex<Vec<Option<Registration>>> = Mutex::new(Vec::new());

fn registrations() -> std::sync::MutexGuard<'static, Vec<Option<Registration>>> {
    REGISTRATIONS.lock().unwrap_or_else(|p| p.into_inner())
}

/// MPI_T is initialised (the registrations' lock is not held while asking).
fn live() -> Result<(), c_int> {
    initialised(|_| Ok(()))
}

fn event_kind(i: c_int) -> Result<usize, c_int> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < EVENTS.len())
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

/// Arm kind `k` exactly when a live registration listens to it.
fn rearm(regs: &[Option<Registration>], k: usize) {
    let on = regs
        .iter()
        .flatten()
        .any(|r| r.kind == k && r.freeing.is_none());
    events::arm(Event::ALL[k], on);
}

/// Run `f` on the live registration behind `h`.
fn with_registration<R>(
    h: MPI_T_event_registration,
    f: impl FnOnce(&mut Registration) -> Result<R, c_int>,
) -> Result<R, c_int> {
    live()?;
    let mut regs = registrations();
    let r = from_ptr(h)
        .and_then(|i| regs.get_mut(i))
        .and_then(|r| r.as_mut())
        .filter(|r| r.freeing.is_none())
        .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    f(r)
}

/// The (key, value) pairs of an info argument; MPI_INFO_NULL has none.
fn info_pairs(info: MPI_Info) -> Result<Vec<(String, String)>, c_int> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    crate::info::with_info(info, |i| i.clone()).map_err(|_| MPI_T_ERR_INVALID)
}

/// Set each of `pairs` in `held` (a key already there takes the new value).
fn set_pairs(held: &mut Vec<(String, String)>, pairs: Vec<(String, String)>) {
    for (k, v) in pairs {
        match held.iter_mut().find(|(key, _)| *key == k) {
            Some(e) => e.1 = v,
            None => held.push((k, v)),
        }
    }
}

fn safety_level(cb_safety: MPI_T_cb_safety) -> Result<usize, c_int> {
    usize::try_from(cb_safety)
        .ok()
        .filter(|&l| l <= MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE as usize)
        .ok_or(MPI_T_ERR_INVALID)
}

/// The sink of `protean_core::events`: one occurrence for every registration of its kind.
fn on_event(e: Event, timestamp: u64, values: &[i64]) {
    let mut inst = Instance {
        magic: INSTANCE_MAGIC,
        kind: e as usize,
        timestamp,
        values: [0; MAX_ELEMENTS],
    };
    inst.values[..values.len()].copy_from_slice(values);
    // (registration, callback, drops to report first and their handler)
    let mut calls = Vec::new();
    {
        let mut regs = registrations();
        for (i, r) in regs.iter_mut().enumerate() {
            let Some(r) = r
                .as_mut()
                .filter(|r| r.kind == e as usize && r.freeing.is_none())
            else {
                continue;
            };
            let level = MPI_T_CB_REQUIRE_MPI_RESTRICTED as usize;
            match r.callbacks[level..].iter().flatten().next().copied() {
                Some(cb) => {
                    let drops = std::mem::take(&mut r.dropped);
                    r.running += 1;
                    calls.push((i, cb, r.dropped_handler.filter(|_| drops > 0), drops));
                }
                None => r.dropped += 1,
            }
        }
    }
    let ptr = &mut inst as *mut Instance as MPI_T_event_instance;
    for &(i, cb, dropped_handler, drops) in &calls {
        let h = to_ptr(i);
        let user = cb.user_data as *mut c_void;
        // SAFETY: functions the tool registered, called as MPI_T defines them; the instance
        // outlives the calls.
        unsafe {
            if let Some(d) = dropped_handler {
                d(
                    drops as MPI_Count,
                    h,
                    0,
                    MPI_T_CB_REQUIRE_MPI_RESTRICTED,
                    user,
                );
            }
            (cb.f)(ptr, h, MPI_T_CB_REQUIRE_MPI_RESTRICTED, user);
        }
    }
    // A stale instance handle kept by a tool is refused from now on.
    // SAFETY: a field of our own local.
    unsafe { std::ptr::write_volatile(&mut inst.magic, 0) };
    // A free that came while a callback ran completes with the last one.
    let mut frees = Vec::new();
    {
        let mut regs = registrations();
        for &(i, ..) in &calls {
            let Some(r) = regs.get_mut(i).and_then(|r| r.as_mut()) else {
                continue;
            };
            r.running -= 1;
            if r.running == 0 {
                if let Some(f) = r.freeing {
                    regs[i] = None;
                    frees.push((i, f));
                }
            }
        }
    }
    for (i, (f, user)) in frees {
        if let Some(f) = f {
            // SAFETY: the tool's free callback, as MPI_T_event_handle_free promised it.
            unsafe {
                f(
                    to_ptr(i),
                    MPI_T_CB_REQUIRE_MPI_RESTRICTED,
                    user as *mut c_void,
                )
            };
        }
    }
}

/// # Safety
/// `num_events` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_num(num_events: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_events, EVENTS.len() as c_int);
        Ok(())
    }))
}

/// # Safety
/// Output arguments are null or writable; the arrays have room for `*num_elements` entries
/// (its value on input); strings follow MPI_T's length convention.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_info(
    event_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    array_of_datatypes: *mut MPI_Datatype,
    array_of_displacements: *mut MPI_Aint,
    num_elements: *mut c_int,
    enumtype: *mut MPI_T_enum,
    info: *mut MPI_Info,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        let k = &EVENTS[event_kind(event_index)?];
        give_string(k.name, name, name_len);
        give_string(k.desc, desc, desc_len);
        out(
            verbosity,
            if k.basic {
                MPI_T_VERBOSITY_TUNER_BASIC
            } else {
                MPI_T_VERBOSITY_TUNER_DETAIL
            },
        );
        let (offsets, _) = k.layout();
        let room = if num_elements.is_null() {
            0
        } else {
            usize::try_from(*num_elements).unwrap_or(0)
        };
        for (j, (e, off)) in k.elements.iter().zip(&offsets).enumerate().take(room) {
            if !array_of_datatypes.is_null() {
                *array_of_datatypes.add(j) = match e {
                    Elem::Int => MPI_INT,
                    Elem::Count => MPI_COUNT,
                };
            }
            if !array_of_displacements.is_null() {
                *array_of_displacements.add(j) = *off as MPI_Aint;
            }
        }
        out(num_elements, k.elements.len() as c_int);
        out(enumtype, MPI_T_ENUM_NULL as MPI_T_enum);
        out(info, MPI_INFO_NULL);
        out(bind, MPI_T_BIND_NO_OBJECT);
        Ok(())
    }))
}

/// # Safety
/// `name` is a NUL-terminated string; `event_index` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_index(
    name: *const c_char,
    event_index: *mut c_int,
) -> c_int {
    code(initialised(|_| {
        if name.is_null() || event_index.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let i = index_by_name(name, EVENTS.iter().map(|k| k.name))?;
        out(event_index, i as c_int);
        Ok(())
    }))
}

/// # Safety
/// `event_registration` is writable. Every kind binds no object: `obj_handle` is not read.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_handle_alloc(
    event_index: c_int,
    obj_handle: *mut c_void,
    info: MPI_Info,
    event_registration: *mut MPI_T_event_registration,
) -> c_int {
    let _ = obj_handle;
    code((|| {
        live()?;
        let kind = event_kind(event_index)?;
        if event_registration.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let info = info_pairs(info)?;
        let mut regs = registrations();
        let r = Registration {
            kind,
            info,
            callbacks: [None; 4],
            callback_info: Default::default(),
            dropped_handler: None,
            dropped: 0,
            running: 0,
            freeing: None,
        };
        let i = crate::util::store(&mut regs, r);
        rearm(&regs, kind);
        *event_registration = to_ptr(i);
        Ok(())
    })())
}

/// # Safety
/// `info` is MPI_INFO_NULL or an info object.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_handle_set_info(
    event_registration: MPI_T_event_registration,
    info: MPI_Info,
) -> c_int {
    code((|| {
        let pairs = info_pairs(info)?;
        with_registration(event_registration, |r| {
            set_pairs(&mut r.info, pairs);
            Ok(())
        })
    })())
}

/// # Safety
/// `info_used` is writable; the new info object is the caller's to free.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_handle_get_info(
    event_registration: MPI_T_event_registration,
    info_used: *mut MPI_Info,
) -> c_int {
    code((|| {
        if info_used.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let pairs = with_registration(event_registration, |r| Ok(r.info.clone()))?;
        *info_used = crate::info::new_info(pairs);
        Ok(())
    })())
}

/// # Safety
/// `event_cb_function` is null (the level's callback is removed) or a callback of that
/// safety; `info` is MPI_INFO_NULL or an info object.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_register_callback(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info: MPI_Info,
    user_data: *mut c_void,
    event_cb_function: Option<MPI_T_event_cb_function>,
) -> c_int {
    code((|| {
        let level = safety_level(cb_safety)?;
        let pairs = info_pairs(info)?;
        with_registration(event_registration, |r| {
            r.callbacks[level] = event_cb_function.map(|f| Callback {
                f,
                user_data: user_data as usize,
            });
            r.callback_info[level] = pairs;
            Ok(())
        })
    })())
}

/// # Safety
/// `info` is MPI_INFO_NULL or an info object.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_callback_set_info(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info: MPI_Info,
) -> c_int {
    code((|| {
        let level = safety_level(cb_safety)?;
        let pairs = info_pairs(info)?;
        with_registration(event_registration, |r| {
            set_pairs(&mut r.callback_info[level], pairs);
            Ok(())
        })
    })())
}

/// # Safety
/// `info_used` is writable; the new info object is the caller's to free.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_callback_get_info(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info_used: *mut MPI_Info,
) -> c_int {
    code((|| {
        let level = safety_level(cb_safety)?;
        if info_used.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let pairs = with_registration(event_registration, |r| Ok(r.callback_info[level].clone()))?;
        *info_used = crate::info::new_info(pairs);
        Ok(())
    })())
}

/// # Safety
/// `dropped_cb_function` is null (removes the handler) or a dropped handler.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_set_dropped_handler(
    event_registration: MPI_T_event_registration,
    dropped_cb_function: Option<MPI_T_event_dropped_cb_function>,
) -> c_int {
    code(with_registration(event_registration, |r| {
        r.dropped_handler = dropped_cb_function;
        Ok(())
    }))
}

/// No callback of the registration starts after this returns; the free callback runs once
/// none is running (here, or at the end of the last one).
///
/// # Safety
/// `free_cb_function` is null or a free callback.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_handle_free(
    event_registration: MPI_T_event_registration,
    user_data: *mut c_void,
    free_cb_function: Option<MPI_T_event_free_cb_function>,
) -> c_int {
    let report = (|| {
        live()?;
        let mut regs = registrations();
        let i = from_ptr(event_registration)
            .filter(|&i| {
                regs.get(i)
                    .is_some_and(|r| r.as_ref().is_some_and(|r| r.freeing.is_none()))
            })
            .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        let r = regs[i].as_mut().expect("checked");
        let kind = r.kind;
        let drops = (r.dropped_handler, std::mem::take(&mut r.dropped));
        let now = r.running == 0;
        if now {
            regs[i] = None;
        } else {
            r.freeing = Some((free_cb_function, user_data as usize));
        }
        rearm(&regs, kind);
        Ok((drops, now))
    })();
    match report {
        Err(c) => c,
        Ok(((dropped_handler, drops), now)) => {
            // SAFETY: the tool's functions, outside every lock of ours.
            if let (Some(d), true) = (dropped_handler, drops > 0) {
                d(
                    drops as MPI_Count,
                    event_registration,
                    0,
                    MPI_T_CB_REQUIRE_NONE,
                    user_data,
                );
            }
            if let (Some(f), true) = (free_cb_function, now) {
                f(event_registration, MPI_T_CB_REQUIRE_NONE, user_data);
            }
            MPI_SUCCESS
        }
    }
}

/// The occurrence behind an instance handle a callback was given.
unsafe fn instance<'a>(h: MPI_T_event_instance) -> Result<&'a Instance, c_int> {
    let p = h as *const Instance;
    if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<Instance>()) {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    let i = &*p;
    if i.magic != INSTANCE_MAGIC {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    Ok(i)
}

/// Write element `j` of `inst` at `buf` (unaligned: the tool's buffer).
unsafe fn put_element(inst: &Instance, j: usize, buf: *mut u8) {
    match EVENTS[inst.kind].elements[j] {
        Elem::Int => (buf as *mut i32).write_unaligned(inst.values[j] as i32),
        Elem::Count => (buf as *mut i64).write_unaligned(inst.values[j]),
    }
}

/// # Safety
/// `event_instance` is the instance a running callback was given; `buffer` has room for the
/// element (its datatype in MPI_T_event_get_info).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_read(
    event_instance: MPI_T_event_instance,
    element_index: c_int,
    buffer: *mut c_void,
) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        let j = usize::try_from(element_index)
            .ok()
            .filter(|&j| j < EVENTS[inst.kind].elements.len())
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        if buffer.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        put_element(inst, j, buffer as *mut u8);
        Ok(())
    })())
}

/// # Safety
/// `event_instance` is the instance a running callback was given; `buffer` has room for every
/// element at its displacement.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_copy(
    event_instance: MPI_T_event_instance,
    buffer: *mut c_void,
) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        if buffer.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let (offsets, _) = EVENTS[inst.kind].layout();
        for (j, off) in offsets.iter().enumerate() {
            put_element(inst, j, (buffer as *mut u8).add(*off));
        }
        Ok(())
    })())
}

/// # Safety
/// `event_instance` is the instance a running callback was given; `event_timestamp` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_timestamp(
    event_instance: MPI_T_event_instance,
    event_timestamp: *mut MPI_Count,
) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        out(event_timestamp, inst.timestamp as MPI_Count);
        Ok(())
    })())
}

/// # Safety
/// `event_instance` is the instance a running callback was given; `source_index` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_event_get_source(
    event_instance: MPI_T_event_instance,
    source_index: *mut c_int,
) -> c_int {
    code((|| {
        instance(event_instance)?;
        out(source_index, 0);
        Ok(())
    })())
}

/// # Safety
/// `num_sources` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_source_get_num(num_sources: *mut c_int) -> c_int {
    code(initialised(|_| {
        out(num_sources, 1);
        Ok(())
    }))
}

fn source(i: c_int) -> Result<(), c_int> {
    if i == 0 {
        Ok(())
    } else {
        Err(MPI_T_ERR_INVALID_INDEX)
    }
}

/// # Safety
/// Output arguments are null or writable; strings follow MPI_T's length convention.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_source_get_info(
    source_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    desc: *mut c_char,
    desc_len: *mut c_int,
    ordering: *mut MPI_T_source_order,
    ticks_per_second: *mut MPI_Count,
    max_ticks: *mut MPI_Count,
    info: *mut MPI_Info,
) -> c_int {
    code(initialised(|_| {
        source(source_index)?;
        give_string(SOURCE_NAME, name, name_len);
        give_string(SOURCE_DESC, desc, desc_len);
        out(ordering, MPI_T_SOURCE_ORDERED);
        out(ticks_per_second, 1_000_000_000);
        out(max_ticks, MPI_Count::MAX);
        out(info, MPI_INFO_NULL);
        Ok(())
    }))
}

/// # Safety
/// `timestamp` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_T_source_get_timestamp(
    source_index: c_int,
    timestamp: *mut MPI_Count,
) -> c_int {
    code(initialised(|_| {
        source(source_index)?;
        out(timestamp, events::now_ns() as MPI_Count);
        Ok(())
    }))
}
