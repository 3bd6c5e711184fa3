//! MPI_Alloc_mem / MPI_Free_mem (MPI-4.0 section 8.2). Memory comes from the C heap; no
//! transport needs registered memory, so the info hints are accepted and ignored.
//!
//! And MPICH's queries of GPU support (MPIX_GPU_query_support, MPIX_Query_*_support): buffers
//! are host memory to every transport here, so a device pointer is not supported, and the
//! answers say so (a program that asks then stages its data through host memory).

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

/// # Safety
/// `is_supported` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPIX_GPU_query_support(
    gpu_type: c_int,
    is_supported: *mut c_int,
) -> c_int {
    let func = "MPIX_GPU_query_support";
    if ![
        MPIX_GPU_SUPPORT_CUDA,
        MPIX_GPU_SUPPORT_ZE,
        MPIX_GPU_SUPPORT_HIP,
    ]
    .contains(&gpu_type)
    {
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("{gpu_type} is not a GPU kind (MPIX_GPU_SUPPORT_CUDA, _ZE or _HIP)"),
            ),
            func,
        );
    }
    if is_supported.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null is_supported"),
            func,
        );
    }
    *is_supported = 0;
    MPI_SUCCESS
}

#[no_mangle]
pub extern "C" fn protean_MPIX_Query_cuda_support() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn protean_MPIX_Query_hip_support() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn protean_MPIX_Query_ze_support() -> c_int {
    0
}
