//! Dynamic processes (MPI-4.0 chapter 11): MPI_Comm_spawn, MPI_Comm_spawn_multiple and
//! MPI_Comm_get_parent. The work is `protean_core::mpi::dpm`.
//!
//! Errors are raised on the parent communicator. On failure every errcode the caller can
//! size is MPI_ERR_SPAWN (at the root: one per process asked for; elsewhere the sizes are not
//! significant and the array is left alone), and the intercommunicator is MPI_COMM_NULL.

use std::ffi::{c_char, c_int, CStr};

use crate::abi::*;
use crate::comm::cid;
use crate::errors::{bad, class_code, raise};
use crate::handles::comm_handle;
use crate::info::with_info;
use crate::util::{copy_cstr, nonnull, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::dpm::{self, Command};
use protean_core::mpi::dpm_port;
use protean_core::mpi::global::with;

type R<T> = Result<T, MpiError>;

unsafe fn string(p: *const c_char, what: &str) -> R<String> {
    if p.is_null() {
        return Err(bad(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: non-null; the caller passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A NULL-terminated argument vector (MPI_ARGV_NULL: none).
unsafe fn argv(p: *mut *mut c_char) -> R<Vec<String>> {
    let mut v = Vec::new();
    if p.is_null() {
        return Ok(v);
    }
    let mut i = 0;
    loop {
        // SAFETY: the vector is NULL-terminated per the standard.
        let a = unsafe { *p.add(i) };
        if a.is_null() {
            return Ok(v);
        }
        if v.len() >= 1 << 16 {
            return Err(bad(
                ErrorClass::Arg,
                "argv has no NULL terminator within 65536 entries",
            ));
        }
        v.push(unsafe { string(a, "an argument")? });
        i += 1;
    }
}

fn info_pairs(info: MPI_Info) -> R<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    with_info(info, |i| i.clone().into_iter().collect())
}

unsafe fn spawn_common(
    func: &str,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    errcodes: *mut c_int,
    commands: impl FnOnce() -> R<Vec<Command>>,
) -> c_int {
    let r = (|| -> R<(MPI_Comm, usize)> {
        nonnull(intercomm, "intercomm")?;
        let id = cid(comm)?;
        let rank = with(|e| e.live_comm(id).map(|c| c.rank))??;
        // The arguments count at the root only: elsewhere they are not even read.
        let cmds = if rank == root {
            commands()?
        } else {
            Vec::new()
        };
        let (ic, n) = dpm::spawn(id, root, &cmds)?;
        Ok((comm_handle(ic), n))
    })();
    match r {
        Ok((h, n)) => {
            out(intercomm, h);
            if !errcodes.is_null() {
                for i in 0..n {
                    // SAFETY: the standard sizes the array by the processes spawned.
                    unsafe { *errcodes.add(i) = MPI_SUCCESS };
                }
            }
            MPI_SUCCESS
        }
        Err(e) => {
            out(intercomm, MPI_COMM_NULL);
            raise(comm, e, func)
        }
    }
}

/// Fill `n` errcodes with MPI_ERR_SPAWN (the root's view of a failed spawn).
unsafe fn fail_codes(errcodes: *mut c_int, n: usize) {
    if errcodes.is_null() {
        return;
    }
    for i in 0..n {
        // SAFETY: the caller's array holds one code per process asked for.
        unsafe { *errcodes.add(i) = class_code(ErrorClass::Spawn) };
    }
}

/// # Safety
/// Pointer arguments follow the C prototype; `argv` is MPI_ARGV_NULL or NULL-terminated.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_spawn(
    command: *const c_char,
    argv_: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let rc = spawn_common(
        "MPI_Comm_spawn",
        root,
        comm,
        intercomm,
        array_of_errcodes,
        || {
            Ok(vec![Command {
                program: unsafe { string(command, "command")? },
                args: unsafe { argv(argv_)? },
                maxprocs,
                info: info_pairs(info)?,
            }])
        },
    );
    if rc != MPI_SUCCESS && is_root(comm, root) {
        fail_codes(array_of_errcodes, maxprocs.max(0) as usize);
    }
    rc
}

fn is_root(comm: MPI_Comm, root: c_int) -> bool {
    cid(comm)
        .ok()
        .and_then(|id| {
            with(|e| e.live_comm(id).map(|c| c.rank == root).ok())
                .ok()
                .flatten()
        })
        .unwrap_or(false)
}

/// # Safety
/// Pointer arguments follow the C prototype: `count` commands, argument vectors (or
/// MPI_ARGVS_NULL), process counts and info objects.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let rc = spawn_common(
        "MPI_Comm_spawn_multiple",
        root,
        comm,
        intercomm,
        array_of_errcodes,
        || {
            if count < 1 {
                return Err(bad(ErrorClass::Arg, format!("count {count} (at least 1)")));
            }
            if array_of_commands.is_null() || array_of_maxprocs.is_null() || array_of_info.is_null()
            {
                return Err(bad(
                    ErrorClass::Arg,
                    "array_of_commands, array_of_maxprocs or array_of_info is NULL",
                ));
            }
            let mut v = Vec::new();
            for i in 0..count as usize {
                // SAFETY: the arrays hold `count` entries per the standard.
                unsafe {
                    v.push(Command {
                        program: string(*array_of_commands.add(i), "a command")?,
                        args: if array_of_argv.is_null() {
                            Vec::new()
                        } else {
                            argv(*array_of_argv.add(i))?
                        },
                        maxprocs: *array_of_maxprocs.add(i),
                        info: info_pairs(*array_of_info.add(i))?,
                    });
                }
            }
            Ok(v)
        },
    );
    if rc != MPI_SUCCESS && count > 0 && !array_of_maxprocs.is_null() && is_root(comm, root) {
        let n: usize = (0..count as usize)
            .map(|i| unsafe { *array_of_maxprocs.add(i) }.max(0) as usize)
            .sum();
        fail_codes(array_of_errcodes, n);
    }
    rc
}

/// # Safety
/// `parent` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    let r = (|| -> R<MPI_Comm> {
        nonnull(parent, "parent")?;
        with(|e| {
            e.parent
                .filter(|&id| e.live_comm(id).is_ok())
                .map_or(MPI_COMM_NULL, comm_handle)
        })
    })();
    match r {
        Ok(h) => {
            out(parent, h);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Comm_get_parent"),
    }
}

// --- ports, connect/accept, join, names (protean_core::mpi::dpm_port) ---------------------
//
// Errors of calls without a communicator (ports, names) are raised on MPI_COMM_WORLD, as the
// info calls do here and as MPICH does; accept, connect and join raise on `comm`
// (MPI_COMM_SELF for join).

/// The info value of `key`, if any (MPI_INFO_NULL: none).
fn info_value(info: MPI_Info, key: &str) -> R<Option<String>> {
    Ok(info_pairs(info)?
        .into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v))
}

/// # Safety
/// `port_name` has room for MPI_MAX_PORT_NAME characters.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Open_port(info: MPI_Info, port_name: *mut c_char) -> c_int {
    let r = (|| -> R<String> {
        nonnull(port_name, "port_name")?;
        info_pairs(info)?;
        let name = dpm_port::open_port()?;
        if name.len() >= MPI_MAX_PORT_NAME as usize {
            let _ = dpm_port::close_port(&name);
            return Err(bad(
                ErrorClass::Other,
                format!("the port name is longer than MPI_MAX_PORT_NAME: {name}"),
            ));
        }
        Ok(name)
    })();
    match r {
        Ok(name) => {
            // SAFETY: the caller's buffer holds MPI_MAX_PORT_NAME characters.
            unsafe { copy_cstr(&name, port_name, MPI_MAX_PORT_NAME as usize) };
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Open_port"),
    }
}

/// # Safety
/// `port_name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Close_port(port_name: *const c_char) -> c_int {
    let r = (|| -> R<()> { dpm_port::close_port(&unsafe { string(port_name, "port_name")? }) })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Close_port"),
    }
}

unsafe fn connect_accept_common(
    func: &str,
    accept: bool,
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| -> R<MPI_Comm> {
        nonnull(newcomm, "newcomm")?;
        let id = cid(comm)?;
        let rank = with(|e| e.live_comm(id).map(|c| c.rank))??;
        // The port and the info count at the root only.
        let how = if rank == root {
            let port = unsafe { string(port_name, "port_name")? };
            let t = info_value(info, "timeout")?;
            Some(if accept {
                let tunable = with(|e| e.cfg.accept_timeout)?;
                dpm_port::How::Accept {
                    port,
                    timeout: dpm_port::timeout_of(t.as_deref(), tunable)?,
                }
            } else {
                let tunable = with(|e| e.cfg.connect_timeout)?;
                dpm_port::How::Connect {
                    port,
                    timeout: dpm_port::timeout_of(t.as_deref(), tunable)?
                        .unwrap_or(std::time::Duration::from_secs(tunable.max(1) as u64)),
                }
            })
        } else {
            None
        };
        Ok(comm_handle(dpm_port::connect_accept(id, root, how)?))
    })();
    match r {
        Ok(h) => {
            out(newcomm, h);
            MPI_SUCCESS
        }
        Err(e) => {
            if !newcomm.is_null() {
                out(newcomm, MPI_COMM_NULL);
            }
            raise(comm, e, func)
        }
    }
}

/// # Safety
/// Pointer arguments follow the C prototype.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_accept(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    connect_accept_common(
        "MPI_Comm_accept",
        true,
        port_name,
        info,
        root,
        comm,
        newcomm,
    )
}

/// # Safety
/// Pointer arguments follow the C prototype.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_connect(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    connect_accept_common(
        "MPI_Comm_connect",
        false,
        port_name,
        info,
        root,
        comm,
        newcomm,
    )
}

/// # Safety
/// `intercomm` is writable; `fd` is a connected socket whose other end calls MPI_Comm_join.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    let r = (|| -> R<MPI_Comm> {
        nonnull(intercomm, "intercomm")?;
        let id = cid(MPI_COMM_SELF)?;
        Ok(comm_handle(dpm_port::connect_accept(
            id,
            0,
            Some(dpm_port::How::Join(fd)),
        )?))
    })();
    match r {
        Ok(h) => {
            out(intercomm, h);
            MPI_SUCCESS
        }
        Err(e) => {
            if !intercomm.is_null() {
                out(intercomm, MPI_COMM_NULL);
            }
            raise(MPI_COMM_SELF, e, "MPI_Comm_join")
        }
    }
}

/// # Safety
/// The strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Publish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    let r = (|| -> R<()> {
        info_pairs(info)?;
        let s = unsafe { string(service_name, "service_name")? };
        let p = unsafe { string(port_name, "port_name")? };
        dpm_port::publish_name(&s, &p)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Publish_name"),
    }
}

/// # Safety
/// The strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Unpublish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    let r = (|| -> R<()> {
        info_pairs(info)?;
        let s = unsafe { string(service_name, "service_name")? };
        // The port is not checked: the name alone identifies the entry, as in MPICH.
        let _ = port_name;
        dpm_port::unpublish_name(&s)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Unpublish_name"),
    }
}

/// # Safety
/// `service_name` is NUL-terminated; `port_name` has room for MPI_MAX_PORT_NAME characters.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Lookup_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *mut c_char,
) -> c_int {
    let r = (|| -> R<String> {
        nonnull(port_name, "port_name")?;
        info_pairs(info)?;
        let s = unsafe { string(service_name, "service_name")? };
        dpm_port::lookup_name(&s)
    })();
    match r {
        Ok(p) => {
            // SAFETY: the caller's buffer holds MPI_MAX_PORT_NAME characters.
            unsafe { copy_cstr(&p, port_name, MPI_MAX_PORT_NAME as usize) };
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Lookup_name"),
    }
}
