//! Info objects (MPI-4.0 section 10): ordered (key, value) lists. They live outside the engine
//! because the standard lets them be used before MPI_Init and after MPI_Finalize.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::util::{copy_cstr, out};
use protean_core::error::{ErrorClass, MpiError};

const INFO_DIRECT: u32 = 0x9c00_0000;
const ID_MASK: u32 = (1 << 26) - 1;

type Info = Vec<(String, String)>;

static INFOS: Mutex<Vec<Option<Info>>> = Mutex::new(Vec::new());

/// The keys of MPI_INFO_ENV (MPI-4.0 11.2.3) that Protean can state.
fn env_info() -> Info {
    let mut v = Vec::new();
    let args: Vec<String> = std::env::args().collect();
    if let Some(cmd) = args.first() {
        v.push(("command".into(), cmd.clone()));
    }
    if args.len() > 1 {
        v.push(("argv".into(), args[1..].join(" ")));
    }
    if let Ok(n) = std::env::var("PMI_SIZE") {
        v.push(("maxprocs".into(), n));
    }
    if let Ok(d) = std::env::current_dir() {
        v.push(("wdir".into(), d.display().to_string()));
    }
    v.push(("arch".into(), std::env::consts::ARCH.into()));
    v
}

/// Run `f` on the info object behind handle `h`.
pub fn with_info<R>(h: MPI_Info, f: impl FnOnce(&mut Info) -> R) -> Result<R, MpiError> {
    if h == MPI_INFO_ENV {
        let mut e = env_info();
        return Ok(f(&mut e));
    }
    let (kind, id) = (h as u32 & !ID_MASK, h as u32 & ID_MASK);
    let mut t = INFOS.lock().unwrap_or_else(|p| p.into_inner());
    match t.get_mut(id as usize) {
        Some(Some(i)) if kind == INFO_DIRECT => Ok(f(i)),
        _ => Err(bad(
            ErrorClass::Info,
            "invalid info object (MPI_INFO_NULL or freed)",
        )),
    }
}

/// Store an info object; its handle.
pub fn new_info(i: Info) -> MPI_Info {
    let mut t = INFOS.lock().unwrap_or_else(|p| p.into_inner());
    let id = crate::util::store(&mut t, i);
    (INFO_DIRECT | id as u32) as MPI_Info
}

unsafe fn key_of(key: *const c_char) -> Result<String, MpiError> {
    if key.is_null() {
        return Err(bad(ErrorClass::InfoKey, "null key"));
    }
    let k = CStr::from_ptr(key).to_string_lossy().into_owned();
    if k.is_empty() || k.len() > MPI_MAX_INFO_KEY as usize {
        return Err(bad(
            ErrorClass::InfoKey,
            format!("key '{k}' is empty or longer than MPI_MAX_INFO_KEY ({MPI_MAX_INFO_KEY})"),
        ));
    }
    Ok(k)
}

fn done(r: Result<(), MpiError>, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_create(info: *mut MPI_Info) -> c_int {
    if info.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null info pointer"),
            "MPI_Info_create",
        );
    }
    *info = new_info(Vec::new());
    MPI_SUCCESS
}

/// # Safety
/// `key` and `value` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_set(
    info: MPI_Info,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    let r = (|| {
        let k = key_of(key)?;
        if value.is_null() {
            return Err(bad(ErrorClass::InfoValue, "null value"));
        }
        let v = CStr::from_ptr(value).to_string_lossy().into_owned();
        if v.len() > MPI_MAX_INFO_VAL as usize {
            return Err(bad(
                ErrorClass::InfoValue,
                format!("value longer than MPI_MAX_INFO_VAL ({MPI_MAX_INFO_VAL})"),
            ));
        }
        if info == MPI_INFO_ENV {
            return Err(bad(ErrorClass::Info, "MPI_INFO_ENV cannot be modified"));
        }
        with_info(info, |i| match i.iter_mut().find(|(ik, _)| *ik == k) {
            Some(e) => e.1 = v,
            None => i.push((k, v)),
        })
    })();
    done(r, "MPI_Info_set")
}

/// # Safety
/// `key` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
    let r = (|| {
        let k = key_of(key)?;
        if info == MPI_INFO_ENV {
            return Err(bad(ErrorClass::Info, "MPI_INFO_ENV cannot be modified"));
        }
        with_info(info, |i| match i.iter().position(|(ik, _)| *ik == k) {
            Some(p) => {
                i.remove(p);
                Ok(())
            }
            None => Err(bad(ErrorClass::InfoNokey, format!("key '{k}' is not set"))),
        })?
    })();
    done(r, "MPI_Info_delete")
}

/// Look up `key`: the value if present.
unsafe fn lookup(info: MPI_Info, key: *const c_char) -> Result<Option<String>, MpiError> {
    let k = key_of(key)?;
    with_info(info, |i| {
        i.iter().find(|(ik, _)| *ik == k).map(|(_, v)| v.clone())
    })
}

/// # Safety
/// `value` has room for `valuelen` + 1 chars; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_get(
    info: MPI_Info,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    if valuelen < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, format!("negative value length {valuelen}")),
            "MPI_Info_get",
        );
    }
    match lookup(info, key) {
        Ok(Some(v)) => {
            if !value.is_null() {
                copy_cstr(&v, value, valuelen as usize + 1);
            }
            out(flag, 1);
            MPI_SUCCESS
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_get"),
    }
}

/// # Safety
/// `valuelen` and `flag` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_get_valuelen(
    info: MPI_Info,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    match lookup(info, key) {
        Ok(Some(v)) => {
            out(valuelen, v.len() as c_int);
            out(flag, 1);
            MPI_SUCCESS
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_get_valuelen"),
    }
}

/// MPI-4 form: `*buflen` is the buffer size on input, the value length + 1 on output.
///
/// # Safety
/// `buflen` and `flag` are writable; `value` has `*buflen` chars (or `*buflen` is 0).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_get_string(
    info: MPI_Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    if buflen.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null buflen"),
            "MPI_Info_get_string",
        );
    }
    match lookup(info, key) {
        Ok(Some(v)) => {
            let cap = *buflen;
            if cap > 0 && !value.is_null() {
                copy_cstr(&v, value, cap as usize);
            }
            *buflen = v.len() as c_int + 1;
            out(flag, 1);
            MPI_SUCCESS
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_get_string"),
    }
}

/// # Safety
/// `nkeys` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
    match with_info(info, |i| i.len()) {
        Ok(n) => {
            out(nkeys, n as c_int);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_get_nkeys"),
    }
}

/// # Safety
/// `key` has room for MPI_MAX_INFO_KEY + 1 chars.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_get_nthkey(
    info: MPI_Info,
    n: c_int,
    key: *mut c_char,
) -> c_int {
    let r = with_info(info, |i| {
        i.get(n as usize).filter(|_| n >= 0).map(|(k, _)| k.clone())
    });
    match r {
        Ok(Some(k)) if !key.is_null() => {
            copy_cstr(&k, key, MPI_MAX_INFO_KEY as usize + 1);
            MPI_SUCCESS
        }
        Ok(Some(_)) => raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null key buffer"),
            "MPI_Info_get_nthkey",
        ),
        Ok(None) => raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, format!("key index {n} is out of range")),
            "MPI_Info_get_nthkey",
        ),
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_get_nthkey"),
    }
}

/// # Safety
/// `newinfo` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
    match with_info(info, |i| i.clone()) {
        Ok(c) if !newinfo.is_null() => {
            *newinfo = new_info(c);
            MPI_SUCCESS
        }
        Ok(_) => raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null newinfo pointer"),
            "MPI_Info_dup",
        ),
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Info_dup"),
    }
}

/// # Safety
/// `info` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_free(info: *mut MPI_Info) -> c_int {
    if info.is_null() || *info == MPI_INFO_ENV || *info == MPI_INFO_NULL {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Info, "invalid info object to free"),
            "MPI_Info_free",
        );
    }
    let h = *info;
    let (kind, id) = (h as u32 & !ID_MASK, h as u32 & ID_MASK);
    let mut t = INFOS.lock().unwrap_or_else(|p| p.into_inner());
    match t.get_mut(id as usize) {
        Some(slot @ Some(_)) if kind == INFO_DIRECT => {
            *slot = None;
            drop(t);
            *info = MPI_INFO_NULL;
            MPI_SUCCESS
        }
        _ => {
            drop(t);
            raise(
                MPI_COMM_WORLD,
                bad(
                    ErrorClass::Info,
                    "invalid info object (MPI_INFO_NULL or freed)",
                ),
                "MPI_Info_free",
            )
        }
    }
}

/// MPI_Info_create_env (MPI-4.0 11.2.3): a new info object with the keys of MPI_INFO_ENV.
/// Callable before MPI_Init; argc/argv are not needed (the process's own arguments are read).
///
/// # Safety
/// `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Info_create_env(
    _argc: c_int,
    _argv: *mut *mut c_char,
    info: *mut MPI_Info,
) -> c_int {
    if info.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null info pointer"),
            "MPI_Info_create_env",
        );
    }
    *info = new_info(env_info());
    MPI_SUCCESS
}
