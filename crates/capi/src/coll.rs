//! Collective operations (MPI-4.0 chapter 6) and neighbourhood collectives (section 8.6):
//! blocking, nonblocking (MPI_I...) and persistent (..._init) forms, each with its large-count
//! `_c` twin, plus reduction operations (MPI_Op_*, MPI_Reduce_local).
//!
//! Each collective is one `collective!` line: the C arguments become a
//! `protean_core::mpi::coll::Args` once, and the six entry points differ only in how the
//! result is run. Array arguments are read only where the standard makes them significant
//! (a non-root process may pass NULL for MPI_Gatherv's recvcounts), so reading them needs the
//! communicator's shape.

use protean_core::ids::{CommId, DtypeId};
use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, raise, ret};
use crate::handles::{comm_id, dtype_handle, dtype_id, op_handle, op_id, request_handle};
use crate::util::out;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::coll::{self, Args, Counts, Shape, Types};

type R<T> = Result<T, MpiError>;

/// Integer arguments of both widths (int and MPI_Count / MPI_Aint).
pub trait CInt: Copy {
    fn get(self) -> i64;
}
impl CInt for c_int {
    #[inline(always)]
    fn get(self) -> i64 {
        self as i64
    }
}
impl CInt for i64 {
    #[inline(always)]
    fn get(self) -> i64 {
        self
    }
}

/// `n` integers from a C array.
unsafe fn arr<T: CInt>(p: *const T, n: usize, what: &str) -> R<Vec<i64>> {
    if n > 0 && p.is_null() {
        return Err(bad(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok((0..n).map(|i| (*p.add(i)).get()).collect())
}

unsafe fn displs<T: CInt>(p: *const T, n: usize, what: &str) -> R<Vec<isize>> {
    Ok(arr(p, n, what)?.into_iter().map(|v| v as isize).collect())
}

fn dt(h: MPI_Datatype) -> R<DtypeId> {
    dtype_id(h).ok_or_else(|| {
        bad(
            ErrorClass::Type,
            "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
        )
    })
}

unsafe fn dts(p: *const MPI_Datatype, n: usize, what: &str) -> R<Vec<DtypeId>> {
    if n > 0 && p.is_null() {
        return Err(bad(ErrorClass::Arg, format!("{what} is NULL")));
    }
    (0..n).map(|i| dt(*p.add(i))).collect()
}

fn op(h: MPI_Op) -> R<u32> {
    op_id(h).ok_or_else(|| {
        bad(
            ErrorClass::Op,
            "invalid reduction operation (MPI_OP_NULL or not an operation)",
        )
    })
}

fn shape(c: CommId) -> R<Shape> {
    coll::shape(c)
}

/// Processes a rooted collective's root-side arrays describe (None: not significant here).
fn root_side(sh: &Shape, root: c_int) -> Option<usize> {
    match sh.remote {
        None => (root as usize == sh.rank && root >= 0).then_some(sh.size),
        Some(r) => (root == MPI_ROOT).then_some(r),
    }
}

/// Processes an all-to-all collective's arrays describe.
fn peers(sh: &Shape) -> usize {
    sh.remote.unwrap_or(sh.size)
}

fn is_in_place(p: *const c_void) -> bool {
    p as usize == MPI_IN_PLACE
}

// ---------------------------------------------------------------------------------------------
// Running a collective in its three forms

#[inline(always)]
fn comm_or_raise(comm: MPI_Comm, func: &str) -> Result<CommId, c_int> {
    comm_id(comm).ok_or_else(|| {
        raise(
            comm,
            bad(
                ErrorClass::Comm,
                "invalid communicator (MPI_COMM_NULL or not a communicator)",
            ),
            func,
        )
    })
}

#[inline(always)]
unsafe fn do_blocking(comm: MPI_Comm, func: &str, args: impl FnOnce(CommId) -> R<Args>) -> c_int {
    let c = match comm_or_raise(comm, func) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match args(c) {
        Ok(a) => ret(coll::blocking(c, &a), comm, func),
        Err(e) => raise(comm, e, func),
    }
}

unsafe fn do_start(
    comm: MPI_Comm,
    func: &str,
    request: *mut MPI_Request,
    persistent: bool,
    args: impl FnOnce(CommId) -> R<Args>,
) -> c_int {
    let c = match comm_or_raise(comm, func) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Arg, "null request pointer"), func);
    }
    let r = args(c).and_then(|a| {
        if persistent {
            coll::init(c, &a)
        } else {
            coll::start(c, &a)
        }
    });
    match r {
        Ok(slot) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, func),
    }
}

/// The `_c` twin's type of an argument: counts are MPI_Count, displacements MPI_Aint.
macro_rules! c_ty {
    (count, $t:ty) => { MPI_Count };
    (sendcount, $t:ty) => { MPI_Count };
    (recvcount, $t:ty) => { MPI_Count };
    (sendcounts, $t:ty) => { *const MPI_Count };
    (recvcounts, $t:ty) => { *const MPI_Count };
    (displs, $t:ty) => { *const MPI_Aint };
    (sdispls, $t:ty) => { *const MPI_Aint };
    (rdispls, $t:ty) => { *const MPI_Aint };
    ($other:ident, $t:ty) => { $t };
}

/// The six entry points of a collective: blocking, nonblocking and persistent, each with
/// int and large counts. `$c` names the communicator's engine id in the body, which turns
/// the arguments into `Args`.
macro_rules! collective {
    ($blk:ident, $blk_c:ident, $nb:ident, $nb_c:ident, $pi:ident, $pi_c:ident, $name:literal, $iname:literal, $pname:literal;
     ($($arg:ident : $ty:ty),*) [$comm:ident, $c:ident] => $body:expr) => {
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $blk($($arg: $ty),*) -> c_int {
            do_blocking($comm, $name, |$c| $body)
        }
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $blk_c($($arg: c_ty!($arg, $ty)),*) -> c_int {
            do_blocking($comm, $name, |$c| $body)
        }
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $nb($($arg: $ty,)* request: *mut MPI_Request) -> c_int {
            do_start($comm, $iname, request, false, |$c| $body)
        }
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $nb_c($($arg: c_ty!($arg, $ty),)* request: *mut MPI_Request) -> c_int {
            do_start($comm, $iname, request, false, |$c| $body)
        }
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $pi($($arg: $ty,)* _info: MPI_Info, request: *mut MPI_Request) -> c_int {
            do_start($comm, $pname, request, true, |$c| $body)
        }
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $pi_c($($arg: c_ty!($arg, $ty),)* _info: MPI_Info, request: *mut MPI_Request) -> c_int {
            do_start($comm, $pname, request, true, |$c| $body)
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Barrier (no count, so no `_c` forms)

#[no_mangle]
pub extern "C" fn protean_MPI_Barrier(comm: MPI_Comm) -> c_int {
    // SAFETY: a barrier has no buffers.
    unsafe { do_blocking(comm, "MPI_Barrier", |_| Ok(Args::Barrier)) }
}

/// # Safety
/// `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    do_start(comm, "MPI_Ibarrier", request, false, |_| Ok(Args::Barrier))
}

/// # Safety
/// `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Barrier_init(
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    do_start(comm, "MPI_Barrier_init", request, true, |_| {
        Ok(Args::Barrier)
    })
}

// ---------------------------------------------------------------------------------------------
// Broadcast, reductions

collective!(protean_MPI_Bcast, protean_MPI_Bcast_c, protean_MPI_Ibcast, protean_MPI_Ibcast_c, protean_MPI_Bcast_init, protean_MPI_Bcast_init_c, "MPI_Bcast", "MPI_Ibcast", "MPI_Bcast_init";
    (buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Bcast { buf: buffer.cast(), count: count.get(), dt: dt(datatype)?, root }));

collective!(protean_MPI_Reduce, protean_MPI_Reduce_c, protean_MPI_Ireduce, protean_MPI_Ireduce_c, protean_MPI_Reduce_init, protean_MPI_Reduce_init_c, "MPI_Reduce", "MPI_Ireduce", "MPI_Reduce_init";
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Reduce { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), count: count.get(), dt: dt(datatype)?, op: self::op(op)?, root }));

collective!(protean_MPI_Allreduce, protean_MPI_Allreduce_c, protean_MPI_Iallreduce, protean_MPI_Iallreduce_c, protean_MPI_Allreduce_init, protean_MPI_Allreduce_init_c, "MPI_Allreduce", "MPI_Iallreduce", "MPI_Allreduce_init";
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Allreduce { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), count: count.get(), dt: dt(datatype)?, op: self::op(op)? }));

collective!(protean_MPI_Reduce_scatter_block, protean_MPI_Reduce_scatter_block_c, protean_MPI_Ireduce_scatter_block, protean_MPI_Ireduce_scatter_block_c, protean_MPI_Reduce_scatter_block_init, protean_MPI_Reduce_scatter_block_init_c, "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", "MPI_Reduce_scatter_block_init";
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::ReduceScatter { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), counts: Counts::Uniform(recvcount.get()), dt: dt(datatype)?, op: self::op(op)? }));

collective!(protean_MPI_Reduce_scatter, protean_MPI_Reduce_scatter_c, protean_MPI_Ireduce_scatter, protean_MPI_Ireduce_scatter_c, protean_MPI_Reduce_scatter_init, protean_MPI_Reduce_scatter_init_c, "MPI_Reduce_scatter", "MPI_Ireduce_scatter", "MPI_Reduce_scatter_init";
(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) [comm, c] => {
    let n = shape(c)?.size;
    Ok(Args::ReduceScatter { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), counts: Counts::Varied { counts: arr(recvcounts, n, "recvcounts")?, displs: vec![0; n] }, dt: dt(datatype)?, op: self::op(op)? })
});

collective!(protean_MPI_Scan, protean_MPI_Scan_c, protean_MPI_Iscan, protean_MPI_Iscan_c, protean_MPI_Scan_init, protean_MPI_Scan_init_c, "MPI_Scan", "MPI_Iscan", "MPI_Scan_init";
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Scan { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), count: count.get(), dt: dt(datatype)?, op: self::op(op)?, exclusive: false }));

collective!(protean_MPI_Exscan, protean_MPI_Exscan_c, protean_MPI_Iexscan, protean_MPI_Iexscan_c, protean_MPI_Exscan_init, protean_MPI_Exscan_init_c, "MPI_Exscan", "MPI_Iexscan", "MPI_Exscan_init";
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Scan { sbuf: sendbuf.cast(), rbuf: recvbuf.cast(), count: count.get(), dt: dt(datatype)?, op: self::op(op)?, exclusive: true }));

// ---------------------------------------------------------------------------------------------
// Gather, scatter, allgather, alltoall

collective!(protean_MPI_Gather, protean_MPI_Gather_c, protean_MPI_Igather, protean_MPI_Igather_c, protean_MPI_Gather_init, protean_MPI_Gather_init_c, "MPI_Gather", "MPI_Igather", "MPI_Gather_init";
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) [comm, c] => {
    let sh = shape(c)?;
    let at_root = root_side(&sh, root).is_some();
    let sends = !(is_in_place(sendbuf) || (sh.remote.is_some() && root < 0));
    Ok(Args::Gather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: if sends { dt(sendtype)? } else { DtypeId::new(0) }, rbuf: recvbuf.cast(), rcounts: Counts::Uniform(recvcount.get()), rdt: if at_root { dt(recvtype)? } else { DtypeId::new(0) }, root, v: false })
});

collective!(protean_MPI_Gatherv, protean_MPI_Gatherv_c, protean_MPI_Igatherv, protean_MPI_Igatherv_c, protean_MPI_Gatherv_init, protean_MPI_Gatherv_init_c, "MPI_Gatherv", "MPI_Igatherv", "MPI_Gatherv_init";
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) [comm, c] => {
    let sh = shape(c)?;
    let n = root_side(&sh, root);
    let sends = !(is_in_place(sendbuf) || (sh.remote.is_some() && root < 0));
    let rcounts = match n {
        Some(n) => Counts::Varied { counts: arr(recvcounts, n, "recvcounts")?, displs: self::displs(displs, n, "displs")? },
        None => Counts::Uniform(0),
    };
    Ok(Args::Gather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: if sends { dt(sendtype)? } else { DtypeId::new(0) }, rbuf: recvbuf.cast(), rcounts, rdt: if n.is_some() { dt(recvtype)? } else { DtypeId::new(0) }, root, v: true })
});

collective!(protean_MPI_Scatter, protean_MPI_Scatter_c, protean_MPI_Iscatter, protean_MPI_Iscatter_c, protean_MPI_Scatter_init, protean_MPI_Scatter_init_c, "MPI_Scatter", "MPI_Iscatter", "MPI_Scatter_init";
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) [comm, c] => {
    let sh = shape(c)?;
    let at_root = root_side(&sh, root).is_some();
    let recvs = !(is_in_place(recvbuf) || (sh.remote.is_some() && root < 0));
    Ok(Args::Scatter { sbuf: sendbuf.cast(), scounts: Counts::Uniform(sendcount.get()), sdt: if at_root { dt(sendtype)? } else { DtypeId::new(0) }, rbuf: recvbuf.cast(), rcount: recvcount.get(), rdt: if recvs { dt(recvtype)? } else { DtypeId::new(0) }, root, v: false })
});

collective!(protean_MPI_Scatterv, protean_MPI_Scatterv_c, protean_MPI_Iscatterv, protean_MPI_Iscatterv_c, protean_MPI_Scatterv_init, protean_MPI_Scatterv_init_c, "MPI_Scatterv", "MPI_Iscatterv", "MPI_Scatterv_init";
(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) [comm, c] => {
    let sh = shape(c)?;
    let n = root_side(&sh, root);
    let recvs = !(is_in_place(recvbuf) || (sh.remote.is_some() && root < 0));
    let scounts = match n {
        Some(n) => Counts::Varied { counts: arr(sendcounts, n, "sendcounts")?, displs: self::displs(displs, n, "displs")? },
        None => Counts::Uniform(0),
    };
    Ok(Args::Scatter { sbuf: sendbuf.cast(), scounts, sdt: if n.is_some() { dt(sendtype)? } else { DtypeId::new(0) }, rbuf: recvbuf.cast(), rcount: recvcount.get(), rdt: if recvs { dt(recvtype)? } else { DtypeId::new(0) }, root, v: true })
});

collective!(protean_MPI_Allgather, protean_MPI_Allgather_c, protean_MPI_Iallgather, protean_MPI_Iallgather_c, protean_MPI_Allgather_init, protean_MPI_Allgather_init_c, "MPI_Allgather", "MPI_Iallgather", "MPI_Allgather_init";
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Allgather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: if is_in_place(sendbuf) { DtypeId::new(0) } else { dt(sendtype)? }, rbuf: recvbuf.cast(), rcounts: Counts::Uniform(recvcount.get()), rdt: dt(recvtype)? }));

collective!(protean_MPI_Allgatherv, protean_MPI_Allgatherv_c, protean_MPI_Iallgatherv, protean_MPI_Iallgatherv_c, protean_MPI_Allgatherv_init, protean_MPI_Allgatherv_init_c, "MPI_Allgatherv", "MPI_Iallgatherv", "MPI_Allgatherv_init";
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let n = peers(&shape(c)?);
    Ok(Args::Allgather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: if is_in_place(sendbuf) { DtypeId::new(0) } else { dt(sendtype)? }, rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, n, "recvcounts")?, displs: self::displs(displs, n, "displs")? }, rdt: dt(recvtype)? })
});

collective!(protean_MPI_Alltoall, protean_MPI_Alltoall_c, protean_MPI_Ialltoall, protean_MPI_Ialltoall_c, protean_MPI_Alltoall_init, protean_MPI_Alltoall_init_c, "MPI_Alltoall", "MPI_Ialltoall", "MPI_Alltoall_init";
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::Alltoall { sbuf: sendbuf.cast(), scounts: Counts::Uniform(sendcount.get()), sdt: Types::One(if is_in_place(sendbuf) { DtypeId::new(0) } else { dt(sendtype)? }), rbuf: recvbuf.cast(), rcounts: Counts::Uniform(recvcount.get()), rdt: Types::One(dt(recvtype)?) }));

collective!(protean_MPI_Alltoallv, protean_MPI_Alltoallv_c, protean_MPI_Ialltoallv, protean_MPI_Ialltoallv_c, protean_MPI_Alltoallv_init, protean_MPI_Alltoallv_init_c, "MPI_Alltoallv", "MPI_Ialltoallv", "MPI_Alltoallv_init";
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let n = peers(&shape(c)?);
    let ip = is_in_place(sendbuf);
    let scounts = if ip { Counts::Uniform(0) } else { Counts::Varied { counts: arr(sendcounts, n, "sendcounts")?, displs: self::displs(sdispls, n, "sdispls")? } };
    Ok(Args::Alltoall { sbuf: sendbuf.cast(), scounts, sdt: Types::One(if ip { DtypeId::new(0) } else { dt(sendtype)? }), rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, n, "recvcounts")?, displs: self::displs(rdispls, n, "rdispls")? }, rdt: Types::One(dt(recvtype)?) })
});

collective!(protean_MPI_Alltoallw, protean_MPI_Alltoallw_c, protean_MPI_Ialltoallw, protean_MPI_Ialltoallw_c, protean_MPI_Alltoallw_init, protean_MPI_Alltoallw_init_c, "MPI_Alltoallw", "MPI_Ialltoallw", "MPI_Alltoallw_init";
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let n = peers(&shape(c)?);
    let ip = is_in_place(sendbuf);
    let (scounts, sdt) = if ip { (Counts::Uniform(0), Types::One(DtypeId::new(0))) } else {
        (Counts::Varied { counts: arr(sendcounts, n, "sendcounts")?, displs: self::displs(sdispls, n, "sdispls")? }, Types::Each(dts(sendtypes, n, "sendtypes")?))
    };
    Ok(Args::Alltoall { sbuf: sendbuf.cast(), scounts, sdt, rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, n, "recvcounts")?, displs: self::displs(rdispls, n, "rdispls")? }, rdt: Types::Each(dts(recvtypes, n, "recvtypes")?) })
});

// ---------------------------------------------------------------------------------------------
// Neighbourhood collectives

fn degrees(c: CommId) -> R<(usize, usize)> {
    coll::neighbor_degrees(c)
}

collective!(protean_MPI_Neighbor_allgather, protean_MPI_Neighbor_allgather_c, protean_MPI_Ineighbor_allgather, protean_MPI_Ineighbor_allgather_c, protean_MPI_Neighbor_allgather_init, protean_MPI_Neighbor_allgather_init_c, "MPI_Neighbor_allgather", "MPI_Ineighbor_allgather", "MPI_Neighbor_allgather_init";
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::NeighborAllgather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: dt(sendtype)?, rbuf: recvbuf.cast(), rcounts: Counts::Uniform(recvcount.get()), rdt: dt(recvtype)? }));

collective!(protean_MPI_Neighbor_allgatherv, protean_MPI_Neighbor_allgatherv_c, protean_MPI_Ineighbor_allgatherv, protean_MPI_Ineighbor_allgatherv_c, protean_MPI_Neighbor_allgatherv_init, protean_MPI_Neighbor_allgatherv_init_c, "MPI_Neighbor_allgatherv", "MPI_Ineighbor_allgatherv", "MPI_Neighbor_allgatherv_init";
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let (indeg, _) = degrees(c)?;
    Ok(Args::NeighborAllgather { sbuf: sendbuf.cast(), scount: sendcount.get(), sdt: dt(sendtype)?, rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, indeg, "recvcounts")?, displs: self::displs(displs, indeg, "displs")? }, rdt: dt(recvtype)? })
});

collective!(protean_MPI_Neighbor_alltoall, protean_MPI_Neighbor_alltoall_c, protean_MPI_Ineighbor_alltoall, protean_MPI_Ineighbor_alltoall_c, protean_MPI_Neighbor_alltoall_init, protean_MPI_Neighbor_alltoall_init_c, "MPI_Neighbor_alltoall", "MPI_Ineighbor_alltoall", "MPI_Neighbor_alltoall_init";
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, _c] =>
    Ok(Args::NeighborAlltoall { sbuf: sendbuf.cast(), scounts: Counts::Uniform(sendcount.get()), sdt: Types::One(dt(sendtype)?), rbuf: recvbuf.cast(), rcounts: Counts::Uniform(recvcount.get()), rdt: Types::One(dt(recvtype)?) }));

collective!(protean_MPI_Neighbor_alltoallv, protean_MPI_Neighbor_alltoallv_c, protean_MPI_Ineighbor_alltoallv, protean_MPI_Ineighbor_alltoallv_c, protean_MPI_Neighbor_alltoallv_init, protean_MPI_Neighbor_alltoallv_init_c, "MPI_Neighbor_alltoallv", "MPI_Ineighbor_alltoallv", "MPI_Neighbor_alltoallv_init";
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let (indeg, outdeg) = degrees(c)?;
    Ok(Args::NeighborAlltoall { sbuf: sendbuf.cast(), scounts: Counts::Varied { counts: arr(sendcounts, outdeg, "sendcounts")?, displs: self::displs(sdispls, outdeg, "sdispls")? }, sdt: Types::One(dt(sendtype)?), rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, indeg, "recvcounts")?, displs: self::displs(rdispls, indeg, "rdispls")? }, rdt: Types::One(dt(recvtype)?) })
});

collective!(protean_MPI_Neighbor_alltoallw, protean_MPI_Neighbor_alltoallw_c, protean_MPI_Ineighbor_alltoallw, protean_MPI_Ineighbor_alltoallw_c, protean_MPI_Neighbor_alltoallw_init, protean_MPI_Neighbor_alltoallw_init_c, "MPI_Neighbor_alltoallw", "MPI_Ineighbor_alltoallw", "MPI_Neighbor_alltoallw_init";
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm) [comm, c] => {
    let (indeg, outdeg) = degrees(c)?;
    Ok(Args::NeighborAlltoall { sbuf: sendbuf.cast(), scounts: Counts::Varied { counts: arr(sendcounts, outdeg, "sendcounts")?, displs: self::displs(sdispls, outdeg, "sdispls")? }, sdt: Types::Each(dts(sendtypes, outdeg, "sendtypes")?), rbuf: recvbuf.cast(), rcounts: Counts::Varied { counts: arr(recvcounts, indeg, "recvcounts")?, displs: self::displs(rdispls, indeg, "rdispls")? }, rdt: Types::Each(dts(recvtypes, indeg, "recvtypes")?) })
});

// ---------------------------------------------------------------------------------------------
// Reduction operations

/// How the engine calls a user function (installed at the first MPI_Op_create).
unsafe fn call_user(
    func: usize,
    big: bool,
    inv: *mut u8,
    inout: *mut u8,
    count: usize,
    dt: DtypeId,
) {
    let mut h = dtype_handle(dt);
    if big {
        // SAFETY: stored by MPI_Op_create_c from a function of this type.
        let f: MPI_User_function_c = std::mem::transmute(func);
        let mut n = count as MPI_Count;
        f(inv.cast(), inout.cast(), &mut n, &mut h);
    } else {
        // SAFETY: stored by MPI_Op_create from a function of this type; the engine splits
        // runs longer than an int.
        let f: MPI_User_function = std::mem::transmute(func);
        let mut n = count as c_int;
        f(inv.cast(), inout.cast(), &mut n, &mut h);
    }
}

unsafe fn op_create(func: usize, big: bool, commute: c_int, op: *mut MPI_Op, name: &str) -> c_int {
    if op.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null op pointer"),
            name,
        );
    }
    let _ = coll::op::USER_CALL.set(call_user);
    match coll::op_create(func, big, commute != 0) {
        Ok(id) => {
            *op = op_handle(id);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, name),
    }
}

/// # Safety
/// `op` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Op_create(
    user_fn: Option<MPI_User_function>,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    let Some(f) = user_fn else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null user function"),
            "MPI_Op_create",
        );
    };
    op_create(f as usize, false, commute, op, "MPI_Op_create")
}

/// # Safety
/// `op` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Op_create_c(
    user_fn: Option<MPI_User_function_c>,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    let Some(f) = user_fn else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null user function"),
            "MPI_Op_create_c",
        );
    };
    op_create(f as usize, true, commute, op, "MPI_Op_create_c")
}

/// # Safety
/// `op` points to an operation handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Op_free(op: *mut MPI_Op) -> c_int {
    if op.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null op pointer"),
            "MPI_Op_free",
        );
    }
    let r = self::op(*op).and_then(coll::op_free);
    match r {
        Ok(()) => {
            *op = MPI_OP_NULL;
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Op_free"),
    }
}

/// # Safety
/// `commute` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
    if commute.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null commute pointer"),
            "MPI_Op_commutative",
        );
    }
    match self::op(op).and_then(coll::op_commutative) {
        Ok(c) => {
            out(commute, c as c_int);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Op_commutative"),
    }
}

unsafe fn reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    op: MPI_Op,
    name: &str,
) -> c_int {
    let r = dt(datatype).and_then(|d| {
        let o = self::op(op)?;
        coll::reduce_local(inbuf.cast(), inoutbuf.cast(), count, d, o)
    });
    ret(r, MPI_COMM_WORLD, name)
}

/// # Safety
/// Both buffers hold `count` elements of the datatype.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    reduce_local(
        inbuf,
        inoutbuf,
        count as i64,
        datatype,
        op,
        "MPI_Reduce_local",
    )
}

/// # Safety
/// Both buffers hold `count` elements of the datatype.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    reduce_local(inbuf, inoutbuf, count, datatype, op, "MPI_Reduce_local_c")
}
