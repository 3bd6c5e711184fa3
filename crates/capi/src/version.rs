//! Environment inquiry that needs no runtime: library version and the clock.
//! MPI-4.0 sections 9.1.1 (version) and 9.6 (timers); all four may be called before MPI_Init.

use core::ffi::{c_char, c_int};

use crate::abi::{
    MPI_ERR_ARG, MPI_MAX_LIBRARY_VERSION_STRING, MPI_SUBVERSION, MPI_SUCCESS, MPI_VERSION,
};

/// What MPI_Get_library_version reports.
pub const LIBRARY_VERSION: &str = concat!(
    "Protean ",
    env!("CARGO_PKG_VERSION"),
    " (MPI 4.0, MPICH 4.x ABI)"
);

// The header cannot ask Cargo for the version; keep the two in step.
const _: () = assert!(LIBRARY_VERSION.len() < MPI_MAX_LIBRARY_VERSION_STRING as usize);

/// # Safety
/// `version` and `subversion` are null or valid for writing one int.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_version(
    version: *mut c_int,
    subversion: *mut c_int,
) -> c_int {
    if version.is_null() || subversion.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: both checked non-null; the caller provides writable ints.
    unsafe {
        *version = MPI_VERSION;
        *subversion = MPI_SUBVERSION;
    }
    MPI_SUCCESS
}

/// # Safety
/// `version` is null or has room for MPI_MAX_LIBRARY_VERSION_STRING chars; `resultlen` is null
/// or valid for writing one int.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    if version.is_null() || resultlen.is_null() {
        return MPI_ERR_ARG;
    }
    let bytes = LIBRARY_VERSION.as_bytes();
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING bytes (the standard requires it)
    // and the string plus its NUL is shorter (asserted at compile time above).
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), version.cast::<u8>(), bytes.len());
        *version.add(bytes.len()) = 0;
        *resultlen = bytes.len() as c_int;
    }
    MPI_SUCCESS
}

fn clock(read: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int) -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    if unsafe { read(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// Seconds on the monotonic clock (its origin is arbitrary but fixed for the process).
#[no_mangle]
pub extern "C" fn protean_MPI_Wtime() -> f64 {
    // CLOCK_MONOTONIC cannot fail on Linux for a valid timespec; 0.0 is the fallback anyway.
    clock(libc::clock_gettime).unwrap_or(0.0)
}

/// Resolution of MPI_Wtime in seconds.
#[no_mangle]
pub extern "C" fn protean_MPI_Wtick() -> f64 {
    clock(libc::clock_getres)
        .filter(|r| *r > 0.0)
        .unwrap_or(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::PROTEAN_VERSION;

    #[test]
    fn header_and_crate_agree_on_the_version() {
        assert_eq!(PROTEAN_VERSION, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn get_version_reports_mpi_4_0() {
        let (mut v, mut s) = (-1, -1);
        assert_eq!(
            unsafe { protean_MPI_Get_version(&mut v, &mut s) },
            MPI_SUCCESS
        );
        assert_eq!((v, s), (4, 0));
        assert_eq!(
            unsafe { protean_MPI_Get_version(core::ptr::null_mut(), &mut s) },
            MPI_ERR_ARG
        );
    }

    #[test]
    fn library_version_is_nul_terminated_and_counted() {
        let mut buf = vec![0x55 as c_char; MPI_MAX_LIBRARY_VERSION_STRING as usize];
        let mut len = -1;
        assert_eq!(
            unsafe { protean_MPI_Get_library_version(buf.as_mut_ptr(), &mut len) },
            MPI_SUCCESS
        );
        let s = unsafe { core::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_str()
            .unwrap();
        assert!(s.starts_with("Protean 0.1.0"), "{s}");
        assert_eq!(len as usize, s.len());
        assert_eq!(
            unsafe { protean_MPI_Get_library_version(buf.as_mut_ptr(), core::ptr::null_mut()) },
            MPI_ERR_ARG
        );
    }

    #[test]
    fn wtime_advances_and_wtick_is_fine_grained() {
        let t0 = protean_MPI_Wtime();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let t1 = protean_MPI_Wtime();
        assert!(t1 - t0 >= 0.019, "{t0} -> {t1}");
        let tick = protean_MPI_Wtick();
        assert!(tick > 0.0 && tick <= 1e-3, "{tick}");
    }
}
