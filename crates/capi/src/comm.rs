//! Communicators (MPI-4.0 sections 7.4-7.6): creation (dup, idup, split, split_type, create,
//! create_group, create_from_group, intercommunicators), destruction, comparison, names and
//! info hints. The agreements themselves are `protean_core::mpi::cm`.
//!
//! Errors are raised on the communicator the call is made on (MPI_COMM_WORLD's handler when
//! there is none). A new communicator inherits its parent's error handler (the local
//! communicator's for MPI_Intercomm_create). MPI_Comm_dup copies attributes through their copy
//! callbacks; if one fails, the new communicator is freed, the call returns the callback's
//! error and the output handle is MPI_COMM_NULL.

use protean_core::ids::CommId;
use std::ffi::{c_char, c_int, CStr};

use crate::abi::*;
use crate::attr::{self, report, Failure};
use crate::errors::{bad, ret, ret_with};
use crate::group::members;
use crate::handles::{comm_handle, comm_id, errh_id, request_handle};
use crate::info::{new_info, with_info};
use crate::util::{copy_cstr, nonnull, object_name, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::attr::ObjKind;
use protean_core::mpi::cm::{self, OpSpec};
use protean_core::mpi::engine::Engine;
use protean_core::mpi::global::with;
use protean_core::mpi::group::{self as grp, UNDEFINED};

type R<T> = Result<T, MpiError>;

/// Communicator hints Protean recognises (MPI-4.0 7.4.4), with their defaults. Other keys
/// given to MPI_Comm_set_info or dup_with_info are ignored, as the standard allows.
const HINTS: &[(&str, &str)] = &[
    ("mpi_assert_no_any_tag", "false"),
    ("mpi_assert_no_any_source", "false"),
    ("mpi_assert_exact_length", "false"),
    ("mpi_assert_allow_overtaking", "false"),
    // Protean: the point-to-point protocol setting for this communicator (static, eager,
    // rendezvous, eager-rendezvous, adaptive); empty: the process's (tunable `protocol`).
    ("protean_protocol", ""),
];

pub(crate) fn cid(comm: MPI_Comm) -> R<CommId> {
    comm_id(comm).ok_or_else(|| {
        bad(
            ErrorClass::Comm,
            "invalid communicator (MPI_COMM_NULL or not a communicator)",
        )
    })
}

/// The recognised hints of an info object (None for MPI_INFO_NULL).
fn hints_of(info: MPI_Info) -> R<Option<Vec<(String, String)>>> {
    if info == MPI_INFO_NULL {
        return Ok(None);
    }
    let pairs = with_info(info, |i| i.clone())?;
    Ok(Some(
        pairs
            .into_iter()
            .filter(|(k, _)| HINTS.iter().any(|(h, _)| h == k))
            .collect(),
    ))
}

/// Run a blocking operation built by `make` on the engine; the new communicator's handle.
pub(crate) fn run(make: impl FnOnce(&mut Engine) -> R<OpSpec>) -> R<MPI_Comm> {
    let spec = with(make)??;
    Ok(cm::run(spec)?.map_or(MPI_COMM_NULL, comm_handle))
}

/// The shape of every communicator constructor: check the output pointer (`arg` is its name
/// in the standard), run `make`, and write the new communicator's handle; on failure, write
/// MPI_COMM_NULL and raise the error on `comm`.
pub(crate) unsafe fn make_comm(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    arg: &str,
    func: &str,
    make: impl FnOnce() -> Result<MPI_Comm, Failure>,
) -> c_int {
    match nonnull(newcomm, arg)
        .map_err(Failure::from)
        .and_then(|()| make())
    {
        Ok(h) => {
            *newcomm = h;
            MPI_SUCCESS
        }
        Err(f) => {
            out(newcomm, MPI_COMM_NULL);
            report(f, comm, func)
        }
    }
}

/// A constructor called on the communicator `comm`: [`make_comm`], with `make` given the
/// engine id of `comm` (checked after the output pointer).
pub(crate) unsafe fn derive_comm(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    arg: &str,
    func: &str,
    make: impl FnOnce(CommId) -> Result<MPI_Comm, Failure>,
) -> c_int {
    make_comm(comm, newcomm, arg, func, || make(cid(comm)?))
}

/// The hints of MPI_Comm_(i)dup_with_info's `info` (None for the calls without info).
fn dup_hints(info: Option<MPI_Info>) -> R<Option<Vec<(String, String)>>> {
    Ok(match info {
        Some(i) => Some(hints_of(i)?.unwrap_or_default()),
        None => None,
    })
}

unsafe fn dup(comm: MPI_Comm, info: Option<MPI_Info>, newcomm: *mut MPI_Comm, func: &str) -> c_int {
    derive_comm(comm, newcomm, "newcomm", func, |id| {
        let hints = dup_hints(info)?;
        let h = run(|e| e.op_dup(id, hints))?;
        let new = comm_id(h).expect("dup yields a communicator");
        if let Err(f) = attr::copy_attrs(ObjKind::Comm, comm, id.get(), h, new.get()) {
            let _ = with(|e| e.free_comm(new));
            return Err(f);
        }
        Ok(h)
    })
}

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    dup(comm, None, newcomm, "MPI_Comm_dup")
}

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    dup(comm, Some(info), newcomm, "MPI_Comm_dup_with_info")
}

unsafe fn idup(
    comm: MPI_Comm,
    info: Option<MPI_Info>,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let r = (|| -> Result<(), Failure> {
        nonnull(newcomm, "newcomm")?;
        nonnull(request, "request")?;
        let id = cid(comm)?;
        let hints = dup_hints(info)?;
        let (new, slot) = cm::start_nonblocking(id, |e| e.op_dup(id, hints))?;
        // Attributes are copied now (the callbacks see the communicator as it is at the call).
        attr::copy_attrs(ObjKind::Comm, comm, id.get(), comm_handle(new), new.get())?;
        *newcomm = comm_handle(new);
        *request = request_handle(slot);
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, comm, func),
    }
}

/// # Safety
/// `newcomm` and `request` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_idup(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    idup(comm, None, newcomm, request, "MPI_Comm_idup")
}

/// # Safety
/// `newcomm` and `request` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_idup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    idup(
        comm,
        Some(info),
        newcomm,
        request,
        "MPI_Comm_idup_with_info",
    )
}

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm, newcomm, "newcomm", "MPI_Comm_split", |id| {
        Ok(run(|e| e.op_split(id, color, key))?)
    })
}

/// The value of key `k` in info `info` (None for MPI_INFO_NULL or an absent key).
fn info_value(info: MPI_Info, k: &str) -> R<Option<String>> {
    if info == MPI_INFO_NULL {
        return Ok(None);
    }
    with_info(info, |i| {
        i.iter().find(|(ik, _)| ik == k).map(|(_, v)| v.clone())
    })
}

const HW_KEY: &str = "mpi_hw_resource_type";
const HW_SHARED: &str = "mpi_shared_memory";

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm, newcomm, "newcomm", "MPI_Comm_split_type", |id| {
        // Processes on one host share memory: the color is the host.
        let (host_color, spans_hosts) = with(|e| -> R<(i32, bool)> {
            let c = e.live_comm(id)?;
            let first = e.host_color(c.group[0]);
            let spans = c.group.iter().any(|&p| e.host_color(p) != first);
            Ok((e.host_color(e.me), spans))
        })??;
        let color = match split_type {
            MPI_UNDEFINED => UNDEFINED,
            MPI_COMM_TYPE_SHARED => host_color,
            MPI_COMM_TYPE_HW_GUIDED => match info_value(info, HW_KEY)?.as_deref() {
                Some(HW_SHARED) => host_color,
                // Unknown or absent resource types: no such level, MPI_COMM_NULL.
                _ => UNDEFINED,
            },
            // The only hardware level below a set of hosts is the host: split there, once.
            MPI_COMM_TYPE_HW_UNGUIDED if spans_hosts => host_color,
            MPI_COMM_TYPE_HW_UNGUIDED => UNDEFINED,
            MPIX_COMM_TYPE_NEIGHBORHOOD => UNDEFINED,
            t => {
                return Err(bad(
                    ErrorClass::Arg,
                    format!("split_type {t} is not MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_HW_GUIDED, MPI_COMM_TYPE_HW_UNGUIDED or MPI_UNDEFINED"),
                )
                .into())
            }
        };
        let h = run(|e| e.op_split(id, color, key))?;
        if split_type == MPI_COMM_TYPE_HW_UNGUIDED && h != MPI_COMM_NULL && info != MPI_INFO_NULL {
            // Tell the caller which kind of resource the new communicator spans.
            with_info(info, |i| match i.iter_mut().find(|(k, _)| k == HW_KEY) {
                Some(e) => e.1 = HW_SHARED.into(),
                None => i.push((HW_KEY.into(), HW_SHARED.into())),
            })?;
        }
        Ok(h)
    })
}

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_create(
    comm: MPI_Comm,
    group: MPI_Group,
    newcomm: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm, newcomm, "newcomm", "MPI_Comm_create", |id| {
        let g = members(group)?;
        Ok(run(|e| e.op_create(id, g))?)
    })
}

/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_create_group(
    comm: MPI_Comm,
    group: MPI_Group,
    tag: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    derive_comm(comm, newcomm, "newcomm", "MPI_Comm_create_group", |id| {
        let g = members(group)?;
        let me = with(|e| e.me)?;
        if !g.contains(&me) {
            // Not a member: nothing to do (MPI-4.0 7.4.2 only has members call it; accept
            // the call and return MPI_COMM_NULL like MPI_Comm_create would).
            return Ok(MPI_COMM_NULL);
        }
        Ok(run(|e| e.op_create_group(id, g, tag))?)
    })
}

unsafe fn string_tag(s: *const c_char) -> R<String> {
    if s.is_null() {
        return Err(bad(ErrorClass::Arg, "null string tag"));
    }
    Ok(CStr::from_ptr(s).to_string_lossy().into_owned())
}

fn errhandler_of(h: MPI_Errhandler) -> R<u32> {
    if h == MPI_ERRHANDLER_NULL {
        return Ok(protean_core::mpi::comm::ERRH_FATAL);
    }
    let id = errh_id(h).ok_or_else(|| bad(ErrorClass::Arg, "invalid error handler"))?;
    if crate::errhandler::live_errhandler(id) {
        Ok(id)
    } else {
        Err(bad(ErrorClass::Arg, "invalid error handler (freed?)"))
    }
}

/// # Safety
/// `stringtag` is a NUL-terminated string; `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_create_from_group(
    group: MPI_Group,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Comm_create_from_group";
    make_comm(MPI_COMM_WORLD, newcomm, "newcomm", func, || {
        let g = members(group)?;
        let tag = string_tag(stringtag)?;
        let eh = errhandler_of(errhandler)?;
        let hints = hints_of(info)?;
        let h = run(|e| e.op_from_group(g, &tag, eh))?;
        if let (Some(hints), Some(id)) = (hints, comm_id(h)) {
            with(|e| e.live_comm_mut(id).map(|c| c.merge_info(hints)))??;
        }
        Ok(h)
    })
}

/// # Safety
/// `newintercomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Intercomm_create";
    derive_comm(local_comm, newintercomm, "newintercomm", func, |id| {
        // peer_comm is significant only at the local leader (it may be MPI_COMM_NULL
        // elsewhere); the engine checks it there.
        let peer = comm_id(peer_comm).map(|p| (p, remote_leader));
        protean_core::mpi::dpm::introduce(id, local_leader, peer, tag)?;
        Ok(run(|e| e.op_intercomm(id, local_leader, peer, tag))?)
    })
}

/// # Safety
/// `stringtag` is a NUL-terminated string; `newintercomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Intercomm_create_from_groups(
    local_group: MPI_Group,
    local_leader: c_int,
    remote_group: MPI_Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Intercomm_create_from_groups";
    make_comm(MPI_COMM_WORLD, newintercomm, "newintercomm", func, || {
        let lg = members(local_group)?;
        let rg = members(remote_group)?;
        let tag = string_tag(stringtag)?;
        let eh = errhandler_of(errhandler)?;
        let hints = hints_of(info)?;
        let h = run(|e| e.op_intercomm_from_groups(lg, local_leader, rg, remote_leader, &tag, eh))?;
        if let (Some(hints), Some(id)) = (hints, comm_id(h)) {
            with(|e| e.live_comm_mut(id).map(|c| c.merge_info(hints)))??;
        }
        Ok(h)
    })
}

/// # Safety
/// `newintracomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Intercomm_merge(
    intercomm: MPI_Comm,
    high: c_int,
    newintracomm: *mut MPI_Comm,
) -> c_int {
    let func = "MPI_Intercomm_merge";
    derive_comm(intercomm, newintracomm, "newintracomm", func, |id| {
        Ok(run(|e| e.op_merge(id, high != 0))?)
    })
}

unsafe fn free(comm: *mut MPI_Comm, func: &str, disconnect: bool) -> c_int {
    let h = if comm.is_null() { MPI_COMM_NULL } else { *comm };
    let r = (|| -> Result<(), Failure> {
        nonnull(comm, "comm")?;
        let id = cid(h)?;
        with(|e| -> R<()> {
            let c = e.comm(id)?;
            if c.predefined {
                return Err(bad(ErrorClass::Comm, format!("{} cannot be freed", c.name)));
            }
            e.live_comm(id).map(|_| ())
        })??;
        let dynamic = disconnect && with(|e| e.reaches_other_jobs(id))?;
        if disconnect {
            // MPI_Comm_disconnect completes the pending communication first.
            protean_core::mpi::global::wait_until(|e| !e.comm_busy(id))?;
        }
        if dynamic {
            // With processes of another job it is collective: nothing of theirs is still on
            // its way when they leave our table below.
            let rc = crate::coll::protean_MPI_Barrier(h);
            if rc != MPI_SUCCESS {
                return Err(bad(
                    ErrorClass::Other,
                    "the barrier with the other side of the disconnection failed",
                )
                .into());
            }
        }
        // Delete callbacks first: if one fails the communicator stays.
        attr::comm_free_attrs(id)?;
        with(|e| {
            if e.parent == Some(id) {
                e.parent = None;
            }
            e.free_comm(id)
        })??;
        if dynamic {
            with(|e| e.drop_unused_peers())?;
        }
        *comm = MPI_COMM_NULL;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, h, func),
    }
}

/// # Safety
/// `comm` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    free(comm, "MPI_Comm_free", false)
}

/// Disconnecting is freeing after the pending communication on the communicator has completed;
/// where the communicator reaches processes of another job (spawned, parents), a barrier with
/// them comes first and the processes no communicator names any more then leave the process
/// table (`Engine::drop_unused_peers`).
///
/// # Safety
/// `comm` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    free(comm, "MPI_Comm_disconnect", true)
}

/// # Safety
/// `result` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_compare(
    comm1: MPI_Comm,
    comm2: MPI_Comm,
    result: *mut c_int,
) -> c_int {
    let r = (|| -> R<c_int> {
        nonnull(result, "result")?;
        let a = cid(comm1)?;
        let b = cid(comm2)?;
        with(|e| -> R<c_int> {
            let ca = e.live_comm(a)?;
            let cb = e.live_comm(b)?;
            if a == b {
                return Ok(MPI_IDENT);
            }
            if ca.is_inter() != cb.is_inter() {
                return Ok(MPI_UNEQUAL);
            }
            let mut worst = grp::compare(&ca.group, &cb.group);
            if let (Some(ra), Some(rb)) = (&ca.remote, &cb.remote) {
                worst = worst.max(grp::compare(ra, rb));
            }
            Ok(match worst {
                grp::IDENT => MPI_CONGRUENT,
                grp::SIMILAR => MPI_SIMILAR,
                _ => MPI_UNEQUAL,
            })
        })?
    })();
    ret_with(r, comm1, "MPI_Comm_compare", |v| *result = v)
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    let r = (|| -> R<bool> {
        nonnull(flag, "flag")?;
        let id = cid(comm)?;
        with(|e| e.live_comm(id).map(|c| c.is_inter()))?
    })();
    ret_with(r, comm, "MPI_Comm_test_inter", |v| *flag = v as c_int)
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_remote_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = (|| -> R<usize> {
        nonnull(size, "size")?;
        let id = cid(comm)?;
        with(|e| -> R<usize> {
            let c = e.live_comm(id)?;
            match &c.remote {
                Some(r) => Ok(r.len()),
                None => Err(bad(
                    ErrorClass::Comm,
                    "not an intercommunicator (MPI_Comm_remote_size needs one)",
                )),
            }
        })?
    })();
    ret_with(r, comm, "MPI_Comm_remote_size", |v| *size = v as c_int)
}

/// # Safety
/// `comm_name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_set_name(
    comm: MPI_Comm,
    comm_name: *const c_char,
) -> c_int {
    let r = (|| -> R<()> {
        let name = object_name(comm_name)?;
        let id = cid(comm)?;
        with(|e| -> R<()> {
            e.live_comm_mut(id)?.name = name;
            Ok(())
        })?
    })();
    ret(r, comm, "MPI_Comm_set_name")
}

/// # Safety
/// `comm_name` has room for MPI_MAX_OBJECT_NAME chars; `resultlen` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| -> R<String> {
        nonnull(comm_name, "comm_name")?;
        nonnull(resultlen, "resultlen")?;
        let id = cid(comm)?;
        with(|e| e.live_comm(id).map(|c| c.name.clone()))?
    })();
    ret_with(r, comm, "MPI_Comm_get_name", |name| {
        *resultlen = copy_cstr(&name, comm_name, MPI_MAX_OBJECT_NAME as usize) as c_int
    })
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_set_info(comm: MPI_Comm, info: MPI_Info) -> c_int {
    let r = (|| -> R<()> {
        let id = cid(comm)?;
        if info == MPI_INFO_NULL {
            return Err(bad(ErrorClass::Info, "MPI_INFO_NULL is not an info object"));
        }
        let hints = hints_of(info)?.unwrap_or_default();
        with(|e| e.live_comm_mut(id).map(|c| c.merge_info(hints)))?
    })();
    ret(r, comm, "MPI_Comm_set_info")
}

/// # Safety
/// `info_used` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_get_info(
    comm: MPI_Comm,
    info_used: *mut MPI_Info,
) -> c_int {
    let r = (|| -> R<MPI_Info> {
        nonnull(info_used, "info_used")?;
        let id = cid(comm)?;
        let set = with(|e| e.live_comm(id).map(|c| c.info.clone()))??;
        // Every recognised hint, with the value set or its default.
        let all = HINTS
            .iter()
            .map(|(k, d)| {
                let v = set
                    .iter()
                    .find(|(sk, _)| sk == k)
                    .map_or(d.to_string(), |(_, v)| v.clone());
                (k.to_string(), v)
            })
            .collect();
        Ok(new_info(all))
    })();
    ret_with(r, comm, "MPI_Comm_get_info", |h| *info_used = h)
}
