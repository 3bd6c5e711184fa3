//! Sessions (MPI-4.0 section 11.3): MPI_Session_init and _finalize, process sets, the
//! session's info and error handler, and groups made from process sets (which
//! MPI_Comm_create_from_group, in `comm.rs`, turns into communicators).
//!
//! A session is a handle on the engine that the world model also uses (`env.rs` says who
//! starts and stops it), with its own error handler and thread level. Its objects live here,
//! outside the engine, like info objects: a session's error handler must work while no engine
//! runs (an error in MPI_Session_init itself).
//!
//! Process sets: `mpi://WORLD` (the processes started with this one: MPI_COMM_WORLD's group)
//! and `mpi://SELF`. Their names are compared without regard to case.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

use crate::abi::*;
use crate::env::{life, start_engine};
use crate::errhandler::live_errhandler;
use crate::errors::{self, bad, raise};
use crate::group::new_group;
use crate::handles::{errh_handle, errh_id};
use crate::info::{new_info, with_info};
use crate::util::{copy_cstr, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::comm::{Errhandler, COMM_WORLD, ERRH_ABORT, ERRH_FATAL, ERRH_RETURN};
use protean_core::mpi::global::{self, with, Phase};

type R<T> = Result<T, MpiError>;

/// MPICH's handle layout: the session object type is 0xe (bits 26-29, MPI_SESSION_NULL is
/// 0x38000000); created sessions use the direct kind.
const SESSION_DIRECT: u32 = 0xb800_0000;
const ID_MASK: u32 = (1 << 26) - 1;

/// The info key that asks for, and reports, a session's thread level (MPI-4.1 11.3.1), and
/// the name MPI-4.0's example gave it, which MPICH 4.0 reads: both are understood (the first
/// wins) and reported.
const THREAD_KEY: &str = "mpi_thread_support_level";
const THREAD_KEY_4_0: &str = "thread_level";
const THREAD_LEVELS: [(&str, c_int); 4] = [
    ("MPI_THREAD_SINGLE", MPI_THREAD_SINGLE),
    ("MPI_THREAD_FUNNELED", MPI_THREAD_FUNNELED),
    ("MPI_THREAD_SERIALIZED", MPI_THREAD_SERIALIZED),
    ("MPI_THREAD_MULTIPLE", MPI_THREAD_MULTIPLE),
];

const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

struct Session {
    /// Engine id of its error handler.
    errhandler: u32,
    /// The thread level it was given.
    thread_level: c_int,
}

static SESSIONS: Mutex<Vec<Option<Session>>> = Mutex::new(Vec::new());

fn sessions() -> std::sync::MutexGuard<'static, Vec<Option<Session>>> {
    SESSIONS.lock().unwrap_or_else(|p| p.into_inner())
}

fn session_id(h: MPI_Session) -> Option<usize> {
    let h = h as u32;
    (h & !ID_MASK == SESSION_DIRECT).then_some((h & ID_MASK) as usize)
}

/// Run `f` on the session behind handle `h`.
fn with_session<T>(h: MPI_Session, f: impl FnOnce(&mut Session) -> T) -> R<T> {
    let mut t = sessions();
    match session_id(h).and_then(|id| t.get_mut(id)) {
        Some(Some(s)) => Ok(f(s)),
        _ => Err(bad(
            ErrorClass::Session,
            "invalid session (MPI_SESSION_NULL or finalized)",
        )),
    }
}

/// Hand error code `code` to the handler with engine id `handler`, as raised on `session`.
fn call_handler(handler: u32, session: MPI_Session, code: c_int, func: &str, text: &str) -> c_int {
    let h = match handler {
        ERRH_FATAL => Errhandler::Fatal,
        ERRH_RETURN => Errhandler::Return,
        ERRH_ABORT => Errhandler::Abort,
        id => with(|e| e.errhandlers.get(id as usize).copied().flatten())
            .ok()
            .flatten()
            .unwrap_or(Errhandler::Fatal),
    };
    errors::run_handler(h, code, func, text, |f, mut k| {
        // SAFETY: stored by MPI_Session_create_errhandler (or another kind's, which has the
        // same shape) from a function of this type.
        let f: MPI_Session_errhandler_function = unsafe { std::mem::transmute(f) };
        let mut s = session;
        unsafe { f(&mut s, &mut k) };
    })
}

/// Report `e`, raised by `func`, on `session` (its handler; MPI_COMM_WORLD's when the session
/// is not valid).
#[cold]
fn raise_session(session: MPI_Session, e: MpiError, func: &str) -> c_int {
    let Ok(handler) = with_session(session, |s| s.errhandler) else {
        return raise(MPI_COMM_WORLD, e, func);
    };
    let (code, text) = errors::code_of(&e, func);
    call_handler(handler, session, code, func, &text)
}

fn done(r: R<()>, session: MPI_Session, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_session(session, e, func),
    }
}

/// The thread level that info `info` asks for (MPI_THREAD_SINGLE when it asks none).
fn requested_level(info: MPI_Info) -> R<c_int> {
    if info == MPI_INFO_NULL {
        return Ok(MPI_THREAD_SINGLE);
    }
    let v = with_info(info, |i| {
        let get = |key: &str| {
            i.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        get(THREAD_KEY).or_else(|| get(THREAD_KEY_4_0))
    })?;
    let Some(v) = v else {
        return Ok(MPI_THREAD_SINGLE);
    };
    THREAD_LEVELS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v.trim()))
        .map(|&(_, l)| l)
        .ok_or_else(|| {
            bad(
                ErrorClass::InfoValue,
                format!(
                    "\"{v}\" is not a thread level for {THREAD_KEY} (MPI_THREAD_SINGLE, \
                     MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE)"
                ),
            )
        })
}

fn level_name(l: c_int) -> &'static str {
    THREAD_LEVELS
        .iter()
        .find(|&&(_, v)| v == l)
        .map_or("MPI_THREAD_SINGLE", |&(n, _)| n)
}

/// # Safety
/// `session` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_init(
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    session: *mut MPI_Session,
) -> c_int {
    let func = "MPI_Session_init";
    // Errors before the session exists go to the handler the call was given.
    let fail = |e: MpiError, handler: u32| {
        let (code, text) = errors::code_of(&e, func);
        call_handler(handler, MPI_SESSION_NULL, code, func, &text)
    };
    let mut l = life();
    // Before the engine runs, the handlers are the predefined ones and those made early.
    let early = l.early_errhandlers.len() as u32;
    let exists = |id: u32| match global::phase() {
        Phase::Initialized => live_errhandler(id),
        _ => id <= ERRH_ABORT + early,
    };
    let handler = match errh_id(errhandler) {
        Some(id) if exists(id) => id,
        _ => {
            drop(l);
            return fail(bad(ErrorClass::Arg, "invalid error handler"), ERRH_FATAL);
        }
    };
    if session.is_null() {
        drop(l);
        return fail(bad(ErrorClass::Arg, "null session pointer"), handler);
    }
    let required = match requested_level(info) {
        Ok(r) => r,
        Err(e) => {
            drop(l);
            return fail(e, handler);
        }
    };
    let provided = match start_engine(&mut l, required, func) {
        Ok(p) => p,
        Err(e) => {
            drop(l);
            return fail(e, handler);
        }
    };
    l.sessions += 1;
    drop(l);
    let s = Session {
        errhandler: handler,
        thread_level: provided,
    };
    let mut t = sessions();
    let id = crate::util::store(&mut t, s);
    *session = (SESSION_DIRECT | id as u32) as MPI_Session;
    MPI_SUCCESS
}

/// # Safety
/// `session` is a valid pointer to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_finalize(session: *mut MPI_Session) -> c_int {
    let func = "MPI_Session_finalize";
    if session.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null session pointer"),
            func,
        );
    }
    let h = *session;
    let removed = {
        let mut t = sessions();
        session_id(h)
            .and_then(|id| t.get_mut(id))
            .and_then(|s| s.take())
    };
    if removed.is_none() {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Session,
                "invalid session (MPI_SESSION_NULL or finalized)",
            ),
            func,
        );
    }
    *session = MPI_SESSION_NULL;
    let mut l = life();
    l.sessions -= 1;
    if l.sessions == 0 && l.world == crate::env::World::After {
        // MPI_Finalize has run: the last session takes the engine with it.
        if let Err(e) = crate::env::stop_engine() {
            eprintln!("Protean: {func}: {e}");
            return MPI_ERR_OTHER;
        }
    }
    MPI_SUCCESS
}

/// # Safety
/// `info_used` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_get_info(
    session: MPI_Session,
    info_used: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        let level = with_session(session, |s| s.thread_level)?;
        if info_used.is_null() {
            return Err(bad(ErrorClass::Arg, "null info pointer"));
        }
        let level = level_name(level);
        *info_used = new_info(vec![
            (THREAD_KEY.into(), level.into()),
            (THREAD_KEY_4_0.into(), level.into()),
        ]);
        Ok(())
    })();
    done(r, session, "MPI_Session_get_info")
}

/// The members of process set `name`.
fn pset_members(name: &str) -> R<Vec<protean_core::ids::Gpid>> {
    if name.eq_ignore_ascii_case(PSETS[0]) {
        with(|e| e.comm(COMM_WORLD).map(|c| c.group.clone()))?
    } else if name.eq_ignore_ascii_case(PSETS[1]) {
        with(|e| vec![e.me])
    } else {
        Err(bad(
            ErrorClass::Arg,
            format!(
                "no process set named \"{name}\" (there are {})",
                PSETS.join(" and ")
            ),
        ))
    }
}

unsafe fn pset_str<'a>(p: *const c_char) -> R<std::borrow::Cow<'a, str>> {
    if p.is_null() {
        return Err(bad(ErrorClass::Arg, "null process set name"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy())
}

/// # Safety
/// `npset_names` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_get_num_psets(
    session: MPI_Session,
    _info: MPI_Info,
    npset_names: *mut c_int,
) -> c_int {
    let r = (|| {
        with_session(session, |_| ())?;
        if npset_names.is_null() {
            return Err(bad(ErrorClass::Arg, "null count pointer"));
        }
        out(npset_names, PSETS.len() as c_int);
        Ok(())
    })();
    done(r, session, "MPI_Session_get_num_psets")
}

/// # Safety
/// `pset_len` is writable; `pset_name` is null or has room for `*pset_len` chars.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_get_nth_pset(
    session: MPI_Session,
    _info: MPI_Info,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    let r = (|| {
        with_session(session, |_| ())?;
        if pset_len.is_null() {
            return Err(bad(ErrorClass::Arg, "null length pointer"));
        }
        let Some(name) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
            return Err(bad(
                ErrorClass::Arg,
                format!(
                    "process set {n} does not exist (there are {}, numbered from 0)",
                    PSETS.len()
                ),
            ));
        };
        // A zero length asks for the length (with the NUL); otherwise the name is copied,
        // cut to the room given.
        if *pset_len > 0 && !pset_name.is_null() {
            copy_cstr(name, pset_name, *pset_len as usize);
        }
        *pset_len = name.len() as c_int + 1;
        Ok(())
    })();
    done(r, session, "MPI_Session_get_nth_pset")
}

/// # Safety
/// `pset_name` is a NUL-terminated string; `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_get_pset_info(
    session: MPI_Session,
    pset_name: *const c_char,
    info: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        with_session(session, |_| ())?;
        let name = pset_str(pset_name)?;
        if info.is_null() {
            return Err(bad(ErrorClass::Arg, "null info pointer"));
        }
        let n = pset_members(&name)?.len();
        *info = new_info(vec![("mpi_size".into(), n.to_string())]);
        Ok(())
    })();
    done(r, session, "MPI_Session_get_pset_info")
}

/// # Safety
/// `pset_name` is a NUL-terminated string; `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_from_session_pset(
    session: MPI_Session,
    pset_name: *const c_char,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        with_session(session, |_| ())?;
        let name = pset_str(pset_name)?;
        if newgroup.is_null() {
            return Err(bad(ErrorClass::Arg, "null group pointer"));
        }
        *newgroup = new_group(pset_members(&name)?)?;
        Ok(())
    })();
    done(r, session, "MPI_Group_from_session_pset")
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_create_errhandler(
    session_errhandler_fn: Option<MPI_Session_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let func = "MPI_Session_create_errhandler";
    let Some(f) = session_errhandler_fn else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null error handler function"),
            func,
        );
    };
    if errhandler.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null handle pointer"),
            func,
        );
    }
    let mut l = life();
    let id = if global::phase() == Phase::Initialized {
        match with(|e| {
            e.errhandlers.push(Some(Errhandler::User(f as usize)));
            (e.errhandlers.len() - 1) as u32
        }) {
            Ok(id) => id,
            Err(e) => {
                drop(l);
                return raise(MPI_COMM_WORLD, e, func);
            }
        }
    } else if global::phase() == Phase::Uninitialized {
        // Before MPI starts (to give MPI_Session_init a handler of its own).
        l.early_errhandlers.push(f as usize);
        ERRH_ABORT + l.early_errhandlers.len() as u32
    } else {
        drop(l);
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "MPI has been finalized"),
            func,
        );
    };
    *errhandler = errh_handle(id);
    MPI_SUCCESS
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_set_errhandler(
    session: MPI_Session,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| {
        with_session(session, |_| ())?;
        let id = errh_id(errhandler)
            .filter(|&id| live_errhandler(id))
            .ok_or_else(|| bad(ErrorClass::Arg, "invalid error handler"))?;
        with_session(session, |s| s.errhandler = id)
    })();
    done(r, session, "MPI_Session_set_errhandler")
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_get_errhandler(
    session: MPI_Session,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let id = with_session(session, |s| s.errhandler)?;
        if errhandler.is_null() {
            return Err(bad(ErrorClass::Arg, "null handle pointer"));
        }
        *errhandler = errh_handle(id);
        Ok(())
    })();
    done(r, session, "MPI_Session_get_errhandler")
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Session_call_errhandler(
    session: MPI_Session,
    errorcode: c_int,
) -> c_int {
    let func = "MPI_Session_call_errhandler";
    let Ok(handler) = with_session(session, |s| s.errhandler) else {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Session,
                "invalid session (MPI_SESSION_NULL or finalized)",
            ),
            func,
        );
    };
    let text = errors::text_of_code(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    call_handler(handler, session, errorcode, func, &text);
    // The handler ran (or aborted); the call itself succeeded.
    MPI_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_levels_by_name() {
        for (name, level) in THREAD_LEVELS {
            assert_eq!(level_name(level), name);
        }
        assert_eq!(requested_level(MPI_INFO_NULL).unwrap(), MPI_THREAD_SINGLE);
        let i = new_info(vec![(THREAD_KEY.into(), " mpi_thread_multiple".into())]);
        assert_eq!(requested_level(i).unwrap(), MPI_THREAD_MULTIPLE);
        let k = new_info(vec![(
            THREAD_KEY_4_0.into(),
            "MPI_THREAD_SERIALIZED".into(),
        )]);
        assert_eq!(requested_level(k).unwrap(), MPI_THREAD_SERIALIZED);
        let j = new_info(vec![(THREAD_KEY.into(), "lots".into())]);
        assert_eq!(requested_level(j).unwrap_err().class, ErrorClass::InfoValue);
    }

    #[test]
    fn handles_name_sessions_only() {
        assert_eq!(session_id(MPI_SESSION_NULL), None);
        assert_eq!(session_id((SESSION_DIRECT | 5) as MPI_Session), Some(5));
        assert_eq!(session_id(MPI_COMM_WORLD), None);
    }
}
