//! Error handlers, error classes, codes and strings (MPI-4.0 sections 9.3-9.5).

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

use crate::abi::*;
use crate::errors::{self, bad, class_of_code, raise, USER_BIT, USER_CODE_SHIFT};
use crate::handles::{comm_id, errh_handle, errh_id};
use crate::util::{copy_cstr, out};
use protean_core::error::ErrorClass;
use protean_core::mpi::comm::Errhandler;
use protean_core::mpi::global::with;

/// MPICH's MPIX classes (101..=105) are valid classes too.
const MPIX_CLASSES: std::ops::RangeInclusive<c_int> = MPIX_ERR_PROC_FAILED..=MPIX_ERR_NOREQ;

/// Classes and codes added by the application, and the strings attached to them.
struct UserErrors {
    /// Class indices handed out so far (class k is `USER_BIT | k`, k from 1).
    classes: c_int,
    /// Code numbers handed out so far (code n of class k is
    /// `USER_BIT | (n << USER_CODE_SHIFT) | k`).
    codes: c_int,
    /// Class indices and code numbers given back by MPIX_Delete_error_class/code, handed out
    /// again before new ones (a program that adds and removes in a loop never runs out).
    free_classes: Vec<c_int>,
    free_codes: Vec<c_int>,
    /// Every class and code added and not removed, with its string (empty until one is added,
    /// and again after MPIX_Delete_error_string).
    strings: BTreeMap<c_int, String>,
}

static USER: Mutex<UserErrors> = Mutex::new(UserErrors {
    classes: 0,
    codes: 0,
    free_classes: Vec::new(),
    free_codes: Vec::new(),
    strings: BTreeMap::new(),
});

const MAX_USER_CLASSES: c_int = (1 << USER_CODE_SHIFT) - 1;
const MAX_USER_CODES: c_int = (1 << (30 - USER_CODE_SHIFT)) - 1;

fn user() -> std::sync::MutexGuard<'static, UserErrors> {
    USER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Is engine id `id` an error handler that exists (predefined, or made and not freed)?
pub fn live_errhandler(id: u32) -> bool {
    id <= protean_core::mpi::comm::ERRH_ABORT
        || with(|e| e.errhandlers.get(id as usize).is_some_and(|x| x.is_some())).unwrap_or(false)
}

pub fn user_error_string(code: c_int) -> Option<String> {
    user().strings.get(&code).cloned()
}

/// Is `class` a class the application added (and has not removed)?
fn is_user_class(u: &UserErrors, class: c_int) -> bool {
    class & USER_BIT != 0 && class_of_code(class) == class && u.strings.contains_key(&class)
}

/// Is `code` a code the application added (or one of its classes), not removed?
fn is_user_code(u: &UserErrors, code: c_int) -> bool {
    code & USER_BIT != 0 && u.strings.contains_key(&code)
}

/// MPI_LASTUSEDCODE: the largest error code or class in use (never below MPI_ERR_LASTCODE).
pub fn last_used_code() -> c_int {
    let u = user();
    let mut last = MPI_ERR_LASTCODE;
    if u.classes > 0 {
        last = last.max(USER_BIT | u.classes);
    }
    if u.codes > 0 {
        last = last.max(USER_BIT | (u.codes << USER_CODE_SHIFT) | u.classes);
    }
    last
}

/// # Safety
/// `string` has room for MPI_MAX_ERROR_STRING chars; `resultlen` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let text = if errorcode == MPI_SUCCESS {
        Some("No error (MPI_SUCCESS)".to_string())
    } else if errorcode & USER_BIT != 0 {
        let u = user();
        is_user_code(&u, errorcode).then(|| u.strings.get(&errorcode).cloned().unwrap_or_default())
    } else {
        errors::text_of_code(errorcode)
    };
    let Some(text) = text else {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("{errorcode} is not a valid error code"),
            ),
            "MPI_Error_string",
        );
    };
    if string.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null string buffer"),
            "MPI_Error_string",
        );
    }
    let n = copy_cstr(&text, string, MPI_MAX_ERROR_STRING as usize);
    out(resultlen, n as c_int);
    MPI_SUCCESS
}

/// # Safety
/// `errorclass` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Error_class(
    errorcode: c_int,
    errorclass: *mut c_int,
) -> c_int {
    let class = class_of_code(errorcode);
    let known = if errorcode & USER_BIT != 0 {
        is_user_code(&user(), errorcode)
    } else {
        errorcode >= 0
            && (errors::class_of_number(class).is_some() || MPIX_CLASSES.contains(&class))
    };
    if !known {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("{errorcode} is not a valid error code"),
            ),
            "MPI_Error_class",
        );
    }
    out(errorclass, class);
    MPI_SUCCESS
}

/// # Safety
/// `errorclass` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    let mut u = user();
    if u.classes >= MAX_USER_CLASSES && u.free_classes.is_empty() {
        drop(u);
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "no more error classes can be added"),
            "MPI_Add_error_class",
        );
    }
    let k = u.free_classes.pop().unwrap_or_else(|| {
        u.classes += 1;
        u.classes
    });
    let class = USER_BIT | k;
    u.strings.insert(class, String::new());
    out(errorclass, class);
    MPI_SUCCESS
}

/// # Safety
/// `errorcode` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Add_error_code(
    errorclass: c_int,
    errorcode: *mut c_int,
) -> c_int {
    let mut u = user();
    let valid = is_user_class(&u, errorclass)
        || (errorclass != MPI_SUCCESS
            && errorclass & USER_BIT == 0
            && errors::class_of_number(errorclass).is_some());
    if !valid {
        drop(u);
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("{errorclass} is not an error class"),
            ),
            "MPI_Add_error_code",
        );
    }
    if u.codes >= MAX_USER_CODES && u.free_codes.is_empty() {
        drop(u);
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Other, "no more error codes can be added"),
            "MPI_Add_error_code",
        );
    }
    // Codes of predefined classes keep the class in the low byte like every other code.
    let code = if errorclass & USER_BIT != 0 {
        let n = u.free_codes.pop().unwrap_or_else(|| {
            u.codes += 1;
            u.codes
        });
        USER_BIT | (n << USER_CODE_SHIFT) | (errorclass & !USER_BIT)
    } else {
        errors::code_for(errorclass, String::new())
    };
    u.strings.insert(code, String::new());
    out(errorcode, code);
    MPI_SUCCESS
}

/// # Safety
/// `string` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Add_error_string(
    errorcode: c_int,
    string: *const c_char,
) -> c_int {
    if string.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null string"),
            "MPI_Add_error_string",
        );
    }
    let s = CStr::from_ptr(string).to_string_lossy().into_owned();
    if s.len() >= MPI_MAX_ERROR_STRING as usize {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!(
                    "string of {} characters is longer than MPI_MAX_ERROR_STRING",
                    s.len()
                ),
            ),
            "MPI_Add_error_string",
        );
    }
    let mut u = user();
    if !u.strings.contains_key(&errorcode) {
        drop(u);
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!(
                    "{errorcode} is not an error code or class added with MPI_Add_error_code/class"
                ),
            ),
            "MPI_Add_error_string",
        );
    }
    u.strings.insert(errorcode, s);
    MPI_SUCCESS
}

/// Removes an error class added with MPI_Add_error_class (MPICH's MPIX_Delete_error_class,
/// MPI-4.1's MPI_Remove_error_class). A class that still has codes cannot go.
#[no_mangle]
pub extern "C" fn protean_MPIX_Delete_error_class(errorclass: c_int) -> c_int {
    const F: &str = "MPIX_Delete_error_class";
    let mut u = user();
    if !is_user_class(&u, errorclass) {
        drop(u);
        let why = format!("{errorclass} is not an error class added with MPI_Add_error_class");
        return raise(MPI_COMM_WORLD, bad(ErrorClass::Arg, why), F);
    }
    let codes = u
        .strings
        .keys()
        .filter(|&&c| c != errorclass && c & USER_BIT != 0 && class_of_code(c) == errorclass)
        .count();
    if codes > 0 {
        drop(u);
        let why = format!("error class {errorclass} still has {codes} error codes");
        return raise(MPI_COMM_WORLD, bad(ErrorClass::Arg, why), F);
    }
    u.strings.remove(&errorclass);
    u.free_classes.push(errorclass & !USER_BIT);
    MPI_SUCCESS
}

/// Removes an error code added with MPI_Add_error_code (MPIX_Delete_error_code).
#[no_mangle]
pub extern "C" fn protean_MPIX_Delete_error_code(errorcode: c_int) -> c_int {
    let mut u = user();
    let added = u.strings.contains_key(&errorcode) && class_of_code(errorcode) != errorcode;
    if !added {
        drop(u);
        let why = format!("{errorcode} is not an error code added with MPI_Add_error_code");
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, why),
            "MPIX_Delete_error_code",
        );
    }
    u.strings.remove(&errorcode);
    if errorcode & USER_BIT != 0 {
        u.free_codes
            .push((errorcode & !USER_BIT) >> USER_CODE_SHIFT);
    }
    MPI_SUCCESS
}

/// Removes the string of an added error class or code (MPIX_Delete_error_string); the class
/// or code stays, with no string of its own.
#[no_mangle]
pub extern "C" fn protean_MPIX_Delete_error_string(errorcode: c_int) -> c_int {
    let mut u = user();
    match u.strings.get_mut(&errorcode) {
        Some(s) => {
            s.clear();
            MPI_SUCCESS
        }
        None => {
            drop(u);
            let why = format!(
                "{errorcode} is not an error code or class added with MPI_Add_error_code/class"
            );
            raise(
                MPI_COMM_WORLD,
                bad(ErrorClass::Arg, why),
                "MPIX_Delete_error_string",
            )
        }
    }
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_create_errhandler(
    comm_errhandler_fn: Option<MPI_Comm_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    create_user(
        comm_errhandler_fn.map(|f| f as usize),
        errhandler,
        "MPI_Comm_create_errhandler",
    )
}

/// MPI_Comm/Win/File_create_errhandler: a user error handler (the function's address; the
/// object it is set on decides the shape it is called with).
///
/// # Safety
/// `errhandler` is writable or null (an error).
pub unsafe fn create_user(f: Option<usize>, errhandler: *mut MPI_Errhandler, func: &str) -> c_int {
    let Some(f) = f else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null error handler function"),
            func,
        );
    };
    if errhandler.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null errhandler pointer"),
            func,
        );
    }
    let r = with(|e| {
        e.errhandlers.push(Some(Errhandler::User(f)));
        (e.errhandlers.len() - 1) as u32
    });
    match r {
        Ok(id) => {
            out(errhandler, errh_handle(id));
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_set_errhandler(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = with(|e| {
        let h = errh_id(errhandler).ok_or_else(|| bad(ErrorClass::Arg, "invalid error handler"))?;
        let c = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
        e.set_comm_errhandler(c, h)
    });
    match r {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Comm_set_errhandler"),
    }
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = with(|e| {
        let c = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
        e.comm(c).map(|c| c.errhandler)
    });
    match r {
        Ok(Ok(h)) => {
            out(errhandler, errh_handle(h));
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Comm_get_errhandler"),
    }
}

/// # Safety
/// `errhandler` is a valid pointer to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
    if errhandler.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null handle pointer"),
            "MPI_Errhandler_free",
        );
    }
    let h = *errhandler;
    let r = with(|e| match errh_id(h) {
        // Freeing a predefined handler only resets the caller's handle.
        Some(id) if id <= protean_core::mpi::comm::ERRH_ABORT => Ok(()),
        // User handlers stay in the table while communicators may still refer to them.
        Some(id) if e.errhandlers.get(id as usize).is_some_and(|x| x.is_some()) => Ok(()),
        _ => Err(bad(ErrorClass::Arg, "invalid error handler")),
    });
    match r {
        Ok(Ok(())) => {
            *errhandler = MPI_ERRHANDLER_NULL;
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Errhandler_free"),
    }
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_call_errhandler(
    comm: MPI_Comm,
    errorcode: c_int,
) -> c_int {
    if comm_id(comm).is_none() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Comm, "invalid communicator"),
            "MPI_Comm_call_errhandler",
        );
    }
    let text = errors::text_of_code(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    errors::raise_code(comm, errorcode, "MPI_Comm_call_errhandler", &text);
    // The handler ran (or aborted); the call itself succeeded.
    MPI_SUCCESS
}

/// MPI-1 name of MPI_Comm_create_errhandler (still in MPICH's ABI).
///
/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Errhandler_create(
    comm_errhandler_fn: Option<MPI_Comm_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    protean_MPI_Comm_create_errhandler(comm_errhandler_fn, errhandler)
}

/// MPI-1 name of MPI_Comm_set_errhandler.
///
/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Errhandler_set(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    protean_MPI_Comm_set_errhandler(comm, errhandler)
}

/// MPI-1 name of MPI_Comm_get_errhandler.
///
/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Errhandler_get(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    protean_MPI_Comm_get_errhandler(comm, errhandler)
}
