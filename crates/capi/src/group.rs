//! Groups (MPI-4.0 section 7.3): the C side of `protean_core::mpi::group`.
//!
//! Group functions have no communicator; their errors go to MPI_COMM_WORLD's error handler.
//! Operations whose result is empty return MPI_GROUP_EMPTY (as MPICH does); freeing
//! MPI_GROUP_EMPTY is accepted and only resets the handle.

use std::ffi::c_int;

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::{comm_id, group_handle, group_id};
use crate::util::{c_fill, c_slice, nonnull, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::ids::Gpid;
use protean_core::mpi::global::with;
use protean_core::mpi::group;

type R<T> = Result<T, MpiError>;

fn gid(h: MPI_Group) -> R<u32> {
    group_id(h).ok_or_else(|| {
        bad(
            ErrorClass::Group,
            "invalid group (MPI_GROUP_NULL or not a group)",
        )
    })
}

/// The members of group handle `h`.
pub fn members(h: MPI_Group) -> R<Vec<Gpid>> {
    let id = gid(h)?;
    with(|e| e.group(id).map(|g| g.to_vec()))?
}

/// Store a new group and return its handle.
pub fn new_group(g: Vec<Gpid>) -> R<MPI_Group> {
    with(|e| group_handle(e.add_group(g)))
}

fn finish(r: R<()>, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    let r = (|| {
        nonnull(size, "size")?;
        let n = members(group)?.len();
        out(size, n as c_int);
        Ok(())
    })();
    finish(r, "MPI_Group_size")
}

/// # Safety
/// `rank` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    let r = (|| {
        nonnull(rank, "rank")?;
        let id = gid(group)?;
        let v = with(|e| e.group_rank(id))??;
        out(rank, v);
        Ok(())
    })();
    finish(r, "MPI_Group_rank")
}

/// # Safety
/// `ranks1` has `n` entries, `ranks2` room for `n`.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_translate_ranks(
    group1: MPI_Group,
    n: c_int,
    ranks1: *const c_int,
    group2: MPI_Group,
    ranks2: *mut c_int,
) -> c_int {
    let r = (|| {
        let a = members(group1)?;
        let b = members(group2)?;
        let input = c_slice(ranks1, n, "ranks")?;
        let t = group::translate(&a, input, &b)?;
        c_fill(ranks2, &t, "translated ranks")
    })();
    finish(r, "MPI_Group_translate_ranks")
}

/// # Safety
/// `result` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_compare(
    group1: MPI_Group,
    group2: MPI_Group,
    result: *mut c_int,
) -> c_int {
    let r = (|| {
        nonnull(result, "result")?;
        let a = members(group1)?;
        let b = members(group2)?;
        out(result, group::compare(&a, &b));
        Ok(())
    })();
    finish(r, "MPI_Group_compare")
}

unsafe fn binary(
    g1: MPI_Group,
    g2: MPI_Group,
    newgroup: *mut MPI_Group,
    f: fn(&[Gpid], &[Gpid]) -> Vec<Gpid>,
    func: &str,
) -> c_int {
    let r = (|| {
        nonnull(newgroup, "newgroup")?;
        let a = members(g1)?;
        let b = members(g2)?;
        *newgroup = new_group(f(&a, &b))?;
        Ok(())
    })();
    finish(r, func)
}

/// # Safety
/// `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_union(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary(group1, group2, newgroup, group::union, "MPI_Group_union")
}

/// # Safety
/// `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_intersection(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary(
        group1,
        group2,
        newgroup,
        group::intersection,
        "MPI_Group_intersection",
    )
}

/// # Safety
/// `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_difference(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary(
        group1,
        group2,
        newgroup,
        group::difference,
        "MPI_Group_difference",
    )
}

unsafe fn subset(
    g: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
    f: fn(&[Gpid], &[i32]) -> protean_core::Result<Vec<Gpid>>,
    func: &str,
) -> c_int {
    let r = (|| {
        nonnull(newgroup, "newgroup")?;
        let m = members(g)?;
        let ranks = c_slice(ranks, n, "ranks")?;
        *newgroup = new_group(f(&m, ranks)?)?;
        Ok(())
    })();
    finish(r, func)
}

/// # Safety
/// `ranks` has `n` entries; `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_incl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    subset(group, n, ranks, newgroup, group::incl, "MPI_Group_incl")
}

/// # Safety
/// `ranks` has `n` entries; `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    subset(group, n, ranks, newgroup, group::excl, "MPI_Group_excl")
}

/// A range-based group constructor of the engine (range_incl or range_excl).
type RangeFn = fn(&[Gpid], &[[i32; 3]]) -> protean_core::Result<Vec<Gpid>>;

unsafe fn ranges(
    g: MPI_Group,
    n: c_int,
    r3: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
    f: RangeFn,
    func: &str,
) -> c_int {
    let r = (|| {
        nonnull(newgroup, "newgroup")?;
        let m = members(g)?;
        let rs = c_slice(r3 as *const [c_int; 3], n, "ranges")?;
        *newgroup = new_group(f(&m, rs)?)?;
        Ok(())
    })();
    finish(r, func)
}

/// # Safety
/// `ranges` has `n` triplets; `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges3: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    ranges(
        group,
        n,
        ranges3,
        newgroup,
        group::range_incl,
        "MPI_Group_range_incl",
    )
}

/// # Safety
/// `ranges` has `n` triplets; `newgroup` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges3: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    ranges(
        group,
        n,
        ranges3,
        newgroup,
        group::range_excl,
        "MPI_Group_range_excl",
    )
}

/// # Safety
/// `group` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Group_free(group: *mut MPI_Group) -> c_int {
    let r = (|| {
        nonnull(group, "group")?;
        let id = gid(*group)?;
        with(|e| e.free_group(id))??;
        *group = MPI_GROUP_NULL;
        Ok(())
    })();
    finish(r, "MPI_Group_free")
}

/// The (local or remote) group of a communicator handle.
fn comm_members(comm: MPI_Comm, remote: bool) -> R<Vec<Gpid>> {
    let id = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
    with(|e| -> R<Vec<Gpid>> {
        let c = e.live_comm(id)?;
        if remote {
            match &c.remote {
                Some(r) => Ok(r.clone()),
                None => Err(bad(
                    ErrorClass::Comm,
                    "not an intercommunicator (it has no remote group)",
                )),
            }
        } else {
            Ok(c.group.clone())
        }
    })?
}

/// # Safety
/// `group` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    let r = (|| {
        nonnull(group, "group")?;
        *group = new_group(comm_members(comm, false)?)?;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, e, "MPI_Comm_group"),
    }
}

/// # Safety
/// `group` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_remote_group(
    comm: MPI_Comm,
    group: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        nonnull(group, "group")?;
        *group = new_group(comm_members(comm, true)?)?;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, e, "MPI_Comm_remote_group"),
    }
}
