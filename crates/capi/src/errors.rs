//! Errors at the C boundary: one place that turns an engine error into an MPI error code and
//! hands it to the right error handler (MPI-4.0 section 9.3-9.5).
//!
//! An error code is `class | (message id << 8)`: the low byte is the MPI error class (MPICH's
//! numbers), the rest names the specific message kept in a small ring, so MPI_Error_string can
//! say exactly what went wrong ("MPI_Send: rank 9 is out of range for a communicator of size
//! 4"). Codes stay below MPI_ERR_LASTCODE. A code whose message has left the ring still yields
//! its class's text.

use std::ffi::c_int;
use std::sync::Mutex;

use crate::abi::*;
use crate::handles::comm_id;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::comm::Errhandler;
use protean_core::mpi::global::{self, with, Phase};

/// MPICH's number for each class.
pub fn class_code(c: ErrorClass) -> c_int {
    use ErrorClass::*;
    match c {
        Success => MPI_SUCCESS,
        Buffer => MPI_ERR_BUFFER,
        Count => MPI_ERR_COUNT,
        Type => MPI_ERR_TYPE,
        Tag => MPI_ERR_TAG,
        Comm => MPI_ERR_COMM,
        Rank => MPI_ERR_RANK,
        Root => MPI_ERR_ROOT,
        Group => MPI_ERR_GROUP,
        Op => MPI_ERR_OP,
        Topology => MPI_ERR_TOPOLOGY,
        Dims => MPI_ERR_DIMS,
        Arg => MPI_ERR_ARG,
        Unknown => MPI_ERR_UNKNOWN,
        Truncate => MPI_ERR_TRUNCATE,
        Other => MPI_ERR_OTHER,
        Intern => MPI_ERR_INTERN,
        InStatus => MPI_ERR_IN_STATUS,
        Pending => MPI_ERR_PENDING,
        Request => MPI_ERR_REQUEST,
        Access => MPI_ERR_ACCESS,
        Amode => MPI_ERR_AMODE,
        BadFile => MPI_ERR_BAD_FILE,
        Conversion => MPI_ERR_CONVERSION,
        DupDatarep => MPI_ERR_DUP_DATAREP,
        FileExists => MPI_ERR_FILE_EXISTS,
        FileInUse => MPI_ERR_FILE_IN_USE,
        File => MPI_ERR_FILE,
        Info => MPI_ERR_INFO,
        InfoKey => MPI_ERR_INFO_KEY,
        InfoValue => MPI_ERR_INFO_VALUE,
        InfoNokey => MPI_ERR_INFO_NOKEY,
        Io => MPI_ERR_IO,
        Name => MPI_ERR_NAME,
        NoMem => MPI_ERR_NO_MEM,
        NotSame => MPI_ERR_NOT_SAME,
        NoSpace => MPI_ERR_NO_SPACE,
        NoSuchFile => MPI_ERR_NO_SUCH_FILE,
        Port => MPI_ERR_PORT,
        Quota => MPI_ERR_QUOTA,
        ReadOnly => MPI_ERR_READ_ONLY,
        Service => MPI_ERR_SERVICE,
        Spawn => MPI_ERR_SPAWN,
        UnsupportedDatarep => MPI_ERR_UNSUPPORTED_DATAREP,
        UnsupportedOperation => MPI_ERR_UNSUPPORTED_OPERATION,
        Win => MPI_ERR_WIN,
        Base => MPI_ERR_BASE,
        Locktype => MPI_ERR_LOCKTYPE,
        Keyval => MPI_ERR_KEYVAL,
        RmaConflict => MPI_ERR_RMA_CONFLICT,
        RmaSync => MPI_ERR_RMA_SYNC,
        Size => MPI_ERR_SIZE,
        Disp => MPI_ERR_DISP,
        Assert => MPI_ERR_ASSERT,
        RmaRange => MPI_ERR_RMA_RANGE,
        RmaAttach => MPI_ERR_RMA_ATTACH,
        RmaShared => MPI_ERR_RMA_SHARED,
        RmaFlavor => MPI_ERR_RMA_FLAVOR,
        Session => MPI_ERR_SESSION,
        ProcAborted => MPI_ERR_PROC_ABORTED,
        ValueTooLarge => MPI_ERR_VALUE_TOO_LARGE,
        TMemory => MPI_T_ERR_MEMORY,
        TNotInitialized => MPI_T_ERR_NOT_INITIALIZED,
        TCannotInit => MPI_T_ERR_CANNOT_INIT,
        TInvalidIndex => MPI_T_ERR_INVALID_INDEX,
        TInvalidItem => MPI_T_ERR_INVALID_ITEM,
        TInvalidHandle => MPI_T_ERR_INVALID_HANDLE,
        TOutOfHandles => MPI_T_ERR_OUT_OF_HANDLES,
        TOutOfSessions => MPI_T_ERR_OUT_OF_SESSIONS,
        TInvalidSession => MPI_T_ERR_INVALID_SESSION,
        TCvarSetNotNow => MPI_T_ERR_CVAR_SET_NOT_NOW,
        TCvarSetNever => MPI_T_ERR_CVAR_SET_NEVER,
        TPvarNoStartstop => MPI_T_ERR_PVAR_NO_STARTSTOP,
        TPvarNoWrite => MPI_T_ERR_PVAR_NO_WRITE,
        TPvarNoAtomic => MPI_T_ERR_PVAR_NO_ATOMIC,
        TInvalidName => MPI_T_ERR_INVALID_NAME,
        TInvalid => MPI_T_ERR_INVALID,
        TNotSupported => MPI_T_ERR_NOT_SUPPORTED,
    }
}

/// The class with MPICH number `code`, if it is a predefined class.
pub fn class_of_number(code: c_int) -> Option<ErrorClass> {
    ErrorClass::ALL
        .iter()
        .copied()
        .find(|c| class_code(*c) == code)
}

const RING: usize = 1024;
/// Message ids (bits 8..29 of a code of a predefined class).
pub const ID_LIMIT: u32 = 1 << 21;

struct Messages {
    next: u32,
    ring: Vec<(u32, String)>,
}

static MESSAGES: Mutex<Messages> = Mutex::new(Messages {
    next: 1,
    ring: Vec::new(),
});

/// Register a specific message for `class` and return the error code that names it.
pub fn code_for(class: c_int, msg: String) -> c_int {
    let mut m = MESSAGES.lock().unwrap_or_else(|p| p.into_inner());
    if m.ring.is_empty() {
        m.ring = vec![(0, String::new()); RING];
    }
    let id = m.next;
    m.next = if id + 1 >= ID_LIMIT { 1 } else { id + 1 };
    m.ring[id as usize % RING] = (id, msg);
    class | ((id as c_int) << 8)
}

/// Error classes and codes added by the application (MPI_Add_error_class/code) have bit 30
/// set, so they lie above MPI_ERR_LASTCODE as MPICH's do: a class is `USER_BIT | k`, a code of
/// that class `USER_BIT | (n << USER_CODE_SHIFT) | k`.
pub const USER_BIT: c_int = 0x4000_0000;
pub const USER_CODE_SHIFT: u32 = 12;
const USER_CLASS_MASK: c_int = (1 << USER_CODE_SHIFT) - 1;

/// The error class of a code (MPI_Error_class).
pub fn class_of_code(code: c_int) -> c_int {
    if code & USER_BIT != 0 {
        code & (USER_BIT | USER_CLASS_MASK)
    } else {
        code & 0xff
    }
}

/// The text for a code: its specific message if still known, else its class's text.
pub fn text_of_code(code: c_int) -> Option<String> {
    let class = class_of_code(code);
    if let Some(s) = crate::errhandler::user_error_string(code) {
        return Some(s);
    }
    let id = (code as u32 >> 8) & (ID_LIMIT - 1);
    if code & USER_BIT == 0 && id != 0 {
        let m = MESSAGES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((i, s)) = m.ring.get(id as usize % RING) {
            if *i == id {
                return Some(s.clone());
            }
        }
    }
    class_of_number(class).map(|c| format!("{} ({})", capitalise(c.text()), c.mpi_name()))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Print a fatal error and take the job down.
pub fn fatal(func: &str, text: &str, code: c_int) -> ! {
    let rank = with(|e| e.rank as i64).unwrap_or(-1);
    let who = if rank >= 0 {
        format!("rank {rank}")
    } else {
        "a process".into()
    };
    let msg = format!("Protean: fatal error in {func} on {who}: {text}");
    eprintln!("{msg}");
    let class = class_of_code(code).clamp(1, 255);
    match with(|e| e.abort(class, &msg)) {
        Ok(never) => never,
        Err(_) => std::process::exit(class),
    }
}

/// Report `e`, raised by `func`, on communicator handle `comm` (MPI_COMM_WORLD's handler when
/// the communicator is not valid). Returns the code to return to the caller when the handler
/// returns.
#[cold]
pub fn raise(comm: MPI_Comm, e: MpiError, func: &str) -> c_int {
    let (code, text) = code_of(&e, func);
    raise_code(comm, code, func, &text)
}

/// The error code that names `e`, raised by `func` (its message kept for MPI_Error_string),
/// and the text a fatal handler prints.
pub fn code_of(e: &MpiError, func: &str) -> (c_int, String) {
    let text = format!("{func}: {}", e.msg);
    let code = code_for(
        class_code(e.class),
        format!("{text} ({})", e.class.mpi_name()),
    );
    (code, text)
}

/// Run error handler `h` on `code`, raised by `func`; returns the code for the caller to
/// return. `user` calls a user handler's function (its address) with the object's handle and
/// the code, in the shape of the object's kind (communicator, window, session); it runs
/// outside the engine, so the function may call MPI itself.
pub fn run_handler(
    h: Errhandler,
    code: c_int,
    func: &str,
    text: &str,
    user: impl FnOnce(usize, c_int),
) -> c_int {
    match h {
        Errhandler::Return => code,
        Errhandler::Fatal | Errhandler::Abort => fatal(func, text, code),
        Errhandler::User(f) => {
            user(f, code);
            code
        }
    }
}

/// Hand an existing error code to the handler of `comm`.
pub fn raise_code(comm: MPI_Comm, code: c_int, func: &str, text: &str) -> c_int {
    if global::phase() != Phase::Initialized {
        let when = if global::phase() == Phase::Finalized {
            "after MPI_Finalize"
        } else {
            "before MPI_Init"
        };
        eprintln!("Protean: {func} called {when}: {text}");
        std::process::exit(1);
    }
    let handler = with(|eng| eng.errhandler_for(comm_id(comm))).unwrap_or(Errhandler::Fatal);
    run_handler(handler, code, func, text, |f, mut k| {
        // SAFETY: the address was stored by MPI_Comm_create_errhandler from a function of
        // this type.
        let f: MPI_Comm_errhandler_function = unsafe { std::mem::transmute(f) };
        let mut c = comm;
        unsafe { f(&mut c, &mut k) };
    })
}

/// Shorthand for functions that return `Result<(), MpiError>`.
#[inline(always)]
pub fn ret(r: Result<(), MpiError>, comm: MPI_Comm, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, e, func),
    }
}

/// Shorthand for functions that compute a value for their output arguments: on success
/// `write` stores it and the call returns MPI_SUCCESS; an error is raised on `comm`.
#[inline(always)]
pub fn ret_with<T>(
    r: Result<T, MpiError>,
    comm: MPI_Comm,
    func: &str,
    write: impl FnOnce(T),
) -> c_int {
    match r {
        Ok(v) => {
            write(v);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, func),
    }
}

/// Errors raised before the engine can even be asked (e.g. a bad handle value).
pub fn bad(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}
