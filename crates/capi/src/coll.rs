//! Collective operations (MPI-4.0 chapter 6): the subset the point-to-point foundation needs.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, raise, ret};
use crate::handles::{comm_id, dtype_id};
use protean_core::error::ErrorClass;
use protean_core::mpi::coll;

#[no_mangle]
pub extern "C" fn protean_MPI_Barrier(comm: MPI_Comm) -> c_int {
    let Some(c) = comm_id(comm) else {
        return raise(
            comm,
            bad(ErrorClass::Comm, "invalid communicator"),
            "MPI_Barrier",
        );
    };
    ret(coll::barrier(c), comm, "MPI_Barrier")
}

/// # Safety
/// `buffer` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let Some(c) = comm_id(comm) else {
        return raise(
            comm,
            bad(ErrorClass::Comm, "invalid communicator"),
            "MPI_Bcast",
        );
    };
    let Some(d) = dtype_id(datatype) else {
        return raise(comm, bad(ErrorClass::Type, "invalid datatype"), "MPI_Bcast");
    };
    ret(
        coll::bcast(buffer.cast(), count as i64, d, root, c),
        comm,
        "MPI_Bcast",
    )
}
