//! The answer of every MPI function that has no Rust implementation yet.

use core::ffi::{c_char, c_int, CStr};
use std::io::Write;

use crate::abi::MPI_ERR_UNSUPPORTED_OPERATION;

/// Called by the generated `PMPI_` stubs.  Says on stderr which function was called and returns
/// `MPI_ERR_UNSUPPORTED_OPERATION`.
///
/// # Safety
/// `name` is null or a NUL-terminated string (the stubs pass string literals).
#[no_mangle]
pub unsafe extern "C" fn protean_unimplemented(name: *const c_char) -> c_int {
    let name = if name.is_null() {
        "an MPI function".into()
    } else {
        // SAFETY: non-null and NUL-terminated per the contract above.
        unsafe { CStr::from_ptr(name) }.to_string_lossy()
    };
    // One write, so lines from several threads or ranks do not interleave; a failure to write
    // to stderr must not take the process down.
    let line = format!("Protean: {name} is not implemented yet\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    MPI_ERR_UNSUPPORTED_OPERATION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_unsupported_operation() {
        let rc = unsafe { protean_unimplemented(c"MPI_Foo".as_ptr()) };
        assert_eq!(rc, MPI_ERR_UNSUPPORTED_OPERATION);
        assert_eq!(
            unsafe { protean_unimplemented(core::ptr::null()) },
            MPI_ERR_UNSUPPORTED_OPERATION
        );
    }
}
