//! Status conversions between the C, Fortran (`MPI_Fint[MPI_F_STATUS_SIZE]`) and Fortran 2008
//! (`MPI_F08_status`) forms (MPI-4.1 19.3.5). All three hold the same five integers in the
//! same order here (MPICH's layout), so a conversion copies them; the ignore objects are not
//! statuses and are refused, as MPICH does.

use std::ffi::c_int;

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::util::ignored;
use protean_core::error::ErrorClass;

extern "C" {
    static MPI_F_STATUS_IGNORE: *mut MPI_Fint;
    static MPI_F_STATUSES_IGNORE: *mut MPI_Fint;
    static MPI_F08_STATUS_IGNORE: *mut MPI_F08_status;
    static MPI_F08_STATUSES_IGNORE: *mut MPI_F08_status;
}

const N: usize = MPI_F_STATUS_SIZE as usize;

fn refuse(what: &str, func: &str) -> c_int {
    raise(
        MPI_COMM_WORLD,
        bad(
            ErrorClass::Arg,
            format!("{what} is not a status that can be converted"),
        ),
        func,
    )
}

/// Is `p` null or one of the Fortran ignore objects?
unsafe fn f_ignored(p: *const MPI_Fint) -> bool {
    p.is_null() || std::ptr::eq(p, MPI_F_STATUS_IGNORE) || std::ptr::eq(p, MPI_F_STATUSES_IGNORE)
}

unsafe fn f08_ignored(p: *const MPI_F08_status) -> bool {
    p.is_null()
        || std::ptr::eq(p, MPI_F08_STATUS_IGNORE)
        || std::ptr::eq(p, MPI_F08_STATUSES_IGNORE)
}

/// Copy the five integers of one status form into another.
unsafe fn copy5<A, B>(from: *const A, to: *mut B) {
    const _: () = assert!(std::mem::size_of::<MPI_Status>() == N * std::mem::size_of::<c_int>());
    const _: () =
        assert!(std::mem::size_of::<MPI_F08_status>() == N * std::mem::size_of::<MPI_Fint>());
    std::ptr::copy(from as *const MPI_Fint, to as *mut MPI_Fint, N);
}

/// # Safety
/// The pointers are statuses of their kinds (or the ignore objects, refused).
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_c2f(c: *const MPI_Status, f: *mut MPI_Fint) -> c_int {
    if ignored(c) || f_ignored(f) {
        return refuse("MPI_STATUS_IGNORE (or null)", "MPI_Status_c2f");
    }
    copy5(c, f);
    MPI_SUCCESS
}

/// # Safety
/// As [`protean_MPI_Status_c2f`].
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_f2c(f: *const MPI_Fint, c: *mut MPI_Status) -> c_int {
    if f_ignored(f) || ignored(c) {
        return refuse("MPI_F_STATUS_IGNORE (or null)", "MPI_Status_f2c");
    }
    copy5(f, c);
    MPI_SUCCESS
}

/// # Safety
/// As [`protean_MPI_Status_c2f`].
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_c2f08(
    c: *const MPI_Status,
    f08: *mut MPI_F08_status,
) -> c_int {
    if ignored(c) || f08_ignored(f08) {
        return refuse("MPI_STATUS_IGNORE (or null)", "MPI_Status_c2f08");
    }
    copy5(c, f08);
    MPI_SUCCESS
}

/// # Safety
/// As [`protean_MPI_Status_c2f`].
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_f082c(
    f08: *const MPI_F08_status,
    c: *mut MPI_Status,
) -> c_int {
    if f08_ignored(f08) || ignored(c) {
        return refuse("MPI_F08_STATUS_IGNORE (or null)", "MPI_Status_f082c");
    }
    copy5(f08, c);
    MPI_SUCCESS
}

/// # Safety
/// As [`protean_MPI_Status_c2f`].
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_f082f(
    f08: *const MPI_F08_status,
    f: *mut MPI_Fint,
) -> c_int {
    if f08_ignored(f08) || f_ignored(f) {
        return refuse("MPI_F08_STATUS_IGNORE (or null)", "MPI_Status_f082f");
    }
    copy5(f08, f);
    MPI_SUCCESS
}

/// # Safety
/// As [`protean_MPI_Status_c2f`].
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_f2f08(
    f: *const MPI_Fint,
    f08: *mut MPI_F08_status,
) -> c_int {
    if f_ignored(f) || f08_ignored(f08) {
        return refuse("MPI_F_STATUS_IGNORE (or null)", "MPI_Status_f2f08");
    }
    copy5(f, f08);
    MPI_SUCCESS
}
