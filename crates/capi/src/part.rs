//! Partitioned communication (MPI-4.1 chapter 4): the C side of `protean_core::mpi::part`.
//! The requests are persistent requests: MPI_Start/MPI_Startall begin a round, the
//! completion calls end it, MPI_Request_free frees an inactive one.

// MPI_Count is i64 here; the cast keeps the code right for its C type.
#![allow(clippy::unnecessary_cast)]

use protean_core::ids::ReqId;
use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::{comm_handle, comm_id, dtype_id, request_handle, request_slot};
use crate::util::c_slice;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::global::with;

/// The slot of a request handle, and the communicator its errors go to.
fn req_of(h: MPI_Request) -> Result<(ReqId, MPI_Comm), MpiError> {
    let slot = request_slot(h).ok_or_else(|| {
        bad(
            ErrorClass::Request,
            "invalid request (MPI_REQUEST_NULL or not a request)",
        )
    })?;
    let comm = with(|e| e.request_info(slot).map(|(c, _)| comm_handle(c)))?
        .ok_or_else(|| bad(ErrorClass::Request, "invalid request (freed)"))?;
    Ok((slot, comm))
}

#[allow(clippy::too_many_arguments)]
unsafe fn init(
    send: bool,
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let r = (|| -> Result<(), MpiError> {
        if request.is_null() {
            return Err(bad(ErrorClass::Arg, "null request"));
        }
        let c = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
        // Partitions of no elements may name MPI_DATATYPE_NULL (as in point-to-point).
        let d = match dtype_id(datatype) {
            None if count == 0 && datatype == MPI_DATATYPE_NULL => dtype_id(MPI_BYTE),
            d => d,
        }
        .ok_or_else(|| bad(ErrorClass::Type, "invalid datatype"))?;
        let slot = with(|e| {
            e.part_init(
                send,
                buf.cast(),
                partitions as i64,
                count as i64,
                d,
                peer,
                tag,
                c,
            )
        })??;
        *request = request_handle(slot);
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(
            if comm_id(comm).is_some() {
                comm
            } else {
                MPI_COMM_WORLD
            },
            e,
            func,
        ),
    }
}

/// # Safety
/// `buf` holds `partitions * count` elements of `datatype` while the request lives;
/// `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Psend_init(
    buf: *const c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    init(
        true,
        buf as *mut c_void,
        partitions,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        "MPI_Psend_init",
    )
}

/// # Safety
/// As MPI_Psend_init.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Precv_init(
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    init(
        false,
        buf,
        partitions,
        count,
        datatype,
        source,
        tag,
        comm,
        request,
        "MPI_Precv_init",
    )
}

fn ready(parts: &[i32], req: MPI_Request, func: &str) -> c_int {
    let (slot, comm) = match req_of(req) {
        Ok(x) => x,
        Err(e) => return raise(MPI_COMM_WORLD, e, func),
    };
    match with(|e| e.part_ready(slot, parts)) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}

/// # Safety
/// Plain arguments.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pready(partition: c_int, request: MPI_Request) -> c_int {
    ready(&[partition], request, "MPI_Pready")
}

/// # Safety
/// Plain arguments.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pready_range(
    partition_low: c_int,
    partition_high: c_int,
    request: MPI_Request,
) -> c_int {
    if partition_high < partition_low {
        return raise(
            req_of(request).map_or(MPI_COMM_WORLD, |(_, c)| c),
            bad(
                ErrorClass::Arg,
                format!("partition range {partition_low}..{partition_high} is empty (high < low)"),
            ),
            "MPI_Pready_range",
        );
    }
    let parts: Vec<i32> = (partition_low..=partition_high).collect();
    ready(&parts, request, "MPI_Pready_range")
}

/// # Safety
/// `array_of_partitions` holds `length` partitions.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pready_list(
    length: c_int,
    array_of_partitions: *mut c_int,
    request: MPI_Request,
) -> c_int {
    match c_slice(array_of_partitions, length, "partitions") {
        Ok(parts) => ready(parts, request, "MPI_Pready_list"),
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Pready_list"),
    }
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Parrived(
    request: MPI_Request,
    partition: c_int,
    flag: *mut c_int,
) -> c_int {
    let r = (|| -> Result<(), (MpiError, MPI_Comm)> {
        let (slot, comm) = req_of(request).map_err(|e| (e, MPI_COMM_WORLD))?;
        if flag.is_null() {
            return Err((bad(ErrorClass::Arg, "null flag"), comm));
        }
        let got = with(|e| e.part_arrived(slot, partition))
            .and_then(|x| x)
            .map_err(|e| (e, comm))?;
        *flag = got as c_int;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((e, comm)) => raise(comm, e, "MPI_Parrived"),
    }
}
