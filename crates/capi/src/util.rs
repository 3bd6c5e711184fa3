//! Small helpers for the C boundary: out-parameters, strings, statuses, handle tables.

use std::ffi::{c_char, c_int, CStr};

use crate::abi::*;
use crate::errors;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::request::Status;

/// Write `v` through `p` when `p` is not null.
///
/// # Safety
/// `p` is null or valid for one write.
#[inline(always)]
pub unsafe fn out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        p.write(v);
    }
}

/// Copy `s` into a C buffer of `cap` chars (NUL-terminated, truncated to fit); returns the
/// length written without the NUL.
///
/// # Safety
/// `dst` has room for `cap` chars.
pub unsafe fn copy_cstr(s: &str, dst: *mut c_char, cap: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let mut n = s.len().min(cap - 1);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), n);
    *dst.add(n) = 0;
    n
}

/// The name given to MPI_Comm_set_name / MPI_Type_set_name, truncated to
/// MPI_MAX_OBJECT_NAME - 1 bytes (at a character boundary); an MPI_ERR_ARG error for a null
/// pointer.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub unsafe fn object_name(p: *const c_char) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "null name"));
    }
    let mut name = CStr::from_ptr(p).to_string_lossy().into_owned();
    let mut n = MPI_MAX_OBJECT_NAME as usize - 1;
    if name.len() > n {
        while !name.is_char_boundary(n) {
            n -= 1;
        }
        name.truncate(n);
    }
    Ok(name)
}

/// Is this pointer MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE?
#[inline(always)]
pub fn ignored(st: *const MPI_Status) -> bool {
    st as usize == MPI_STATUS_IGNORE || st.is_null()
}

/// Error code to put in a status's MPI_ERROR field for this status.
pub fn status_code(s: &Status) -> c_int {
    match &s.error {
        None => MPI_SUCCESS,
        Some(e) => errors::code_for(errors::class_code(e.class), e.msg.clone()),
    }
}

/// Fill a C status from an engine status: source, tag, count and the cancelled flag.
///
/// MPI_ERROR is left alone: MPI-4.1 3.2.5 lets only the calls that complete several requests
/// (Waitall, Testall, Waitsome, Testsome) write it, and only when they return
/// MPI_ERR_IN_STATUS ([`write_error`]); a single completion's error is its return value.
///
/// # Safety
/// `st` is MPI_STATUS_IGNORE, null, or valid for a write.
#[inline]
pub unsafe fn write_status(st: *mut MPI_Status, s: &Status) {
    write_raw(st, s.source, s.tag, s.bytes, s.cancelled);
}

/// Fill a C status field by field (MPI_ERROR is left alone, see [`write_status`]).
///
/// # Safety
/// As for [`write_status`].
#[inline]
pub unsafe fn write_raw(
    st: *mut MPI_Status,
    source: c_int,
    tag: c_int,
    bytes: u64,
    cancelled: bool,
) {
    if ignored(st) {
        return;
    }
    let st = &mut *st;
    st.count_lo = bytes as u32 as c_int;
    st.count_hi_and_cancelled = (((bytes >> 32) << 1) as u32 | cancelled as u32) as c_int;
    st.MPI_SOURCE = source;
    st.MPI_TAG = tag;
}

/// Set the MPI_ERROR field of a status (multiple completions returning MPI_ERR_IN_STATUS).
///
/// # Safety
/// As for [`write_status`].
#[inline]
pub unsafe fn write_error(st: *mut MPI_Status, code: c_int) {
    if !ignored(st) {
        (*st).MPI_ERROR = code;
    }
}

/// Bytes recorded in a C status.
pub fn status_bytes(st: &MPI_Status) -> u64 {
    (st.count_lo as u32 as u64) | (((st.count_hi_and_cancelled as u32 >> 1) as u64) << 32)
}

pub fn status_cancelled(st: &MPI_Status) -> bool {
    st.count_hi_and_cancelled & 1 != 0
}

/// The empty status (MPI-4.0 3.7.3): source ANY_SOURCE, tag ANY_TAG, no error, count 0.
///
/// # Safety
/// As for [`write_status`].
pub unsafe fn write_empty(st: *mut MPI_Status) {
    write_raw(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false);
}

/// A C array of `n` elements as a slice: empty for `n == 0` (the pointer may then be
/// anything), an MPI_ERR_ARG / MPI_ERR_COUNT error for a null pointer or a negative count.
///
/// # Safety
/// When `n > 0` and `p` is not null, `p` points to `n` readable elements that outlive `'a`.
pub unsafe fn c_slice<'a, T>(p: *const T, n: c_int, what: &str) -> Result<&'a [T], MpiError> {
    if n < 0 {
        return Err(MpiError::new(
            ErrorClass::Count,
            format!("negative number of {what} ({n})"),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("null array of {n} {what}"),
        ));
    }
    Ok(std::slice::from_raw_parts(p, n as usize))
}

/// Copy `v` into a C array, checking the pointer when there is something to write.
///
/// # Safety
/// `p` is null or has room for `v.len()` elements.
pub unsafe fn c_fill<T: Copy>(p: *mut T, v: &[T], what: &str) -> Result<(), MpiError> {
    if v.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("null array for {} {what}", v.len()),
        ));
    }
    std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len());
    Ok(())
}

/// Check an output pointer: MPI_ERR_ARG naming it when null.
pub fn nonnull<T>(p: *mut T, what: &str) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("null pointer for {what}"),
        ));
    }
    Ok(())
}

/// Put `x` in the first free slot of a handle table (or a new one at the end); its index.
pub fn store<T>(table: &mut Vec<Option<T>>, x: T) -> usize {
    match table.iter().position(|s| s.is_none()) {
        Some(i) => {
            table[i] = Some(x);
            i
        }
        None => {
            table.push(Some(x));
            table.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_beyond_32_bits() {
        let mut st = MPI_Status {
            count_lo: 0,
            count_hi_and_cancelled: 0,
            MPI_SOURCE: 0,
            MPI_TAG: 0,
            MPI_ERROR: 0,
        };
        for (bytes, c) in [
            (0u64, false),
            (5, true),
            (u32::MAX as u64 + 7, false),
            (3 << 40, true),
        ] {
            unsafe { write_raw(&mut st, 1, 2, bytes, c) };
            assert_eq!(status_bytes(&st), bytes);
            assert_eq!(status_cancelled(&st), c);
        }
    }

    #[test]
    fn cstr_truncates_on_char_boundary() {
        let mut buf = [0x7f as c_char; 6];
        let n = unsafe { copy_cstr("héllo world", buf.as_mut_ptr(), 6) };
        assert_eq!(n, 5);
        assert_eq!(buf[5], 0);
        let n = unsafe { copy_cstr("hé", buf.as_mut_ptr(), 3) };
        assert_eq!(n, 1, "é would not fit whole");
    }
}
