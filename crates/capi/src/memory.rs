//! MPI_Alloc_mem / MPI_Free_mem (MPI-4.0 section 8.2). Memory comes from the C heap; no
//! transport needs registered memory, so the info hints are accepted and ignored.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, raise};
use protean_core::error::ErrorClass;

/// # Safety
/// `baseptr` is really a `void **` (the standard types it `void *`).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Alloc_mem(
    size: MPI_Aint,
    info: MPI_Info,
    baseptr: *mut c_void,
) -> c_int {
    let _ = info;
    if size < 0 || baseptr.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("invalid size {size} or null base pointer"),
            ),
            "MPI_Alloc_mem",
        );
    }
    // SAFETY: malloc of a non-negative size; a zero size still gets a unique pointer.
    let p = libc::malloc((size as usize).max(1));
    if p.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::NoMem, format!("cannot allocate {size} bytes")),
            "MPI_Alloc_mem",
        );
    }
    *(baseptr as *mut *mut c_void) = p;
    MPI_SUCCESS
}

/// # Safety
/// `base` came from MPI_Alloc_mem.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Free_mem(base: *mut c_void) -> c_int {
    libc::free(base);
    MPI_SUCCESS
}
