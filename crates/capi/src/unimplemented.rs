//! The answer of every MPI function that has no Rust implementation yet: an
//! MPI_ERR_UNSUPPORTED_OPERATION error naming the function, raised through the error handler
//! of MPI_COMM_WORLD like any other error (fatal by default; returned under
//! MPI_ERRORS_RETURN). `protean-info --missing` lists these functions.

use core::ffi::{c_char, c_int, CStr};

use crate::abi::MPI_COMM_WORLD;
use crate::errors::raise;
use protean_core::error::{ErrorClass, MpiError};

fn error_for(name: &str) -> MpiError {
    MpiError::new(
        ErrorClass::UnsupportedOperation,
        format!("{name} is not implemented in Protean yet (protean-info --missing lists what is missing)"),
    )
}

/// Called by the generated `PMPI_` stubs.
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
    raise(MPI_COMM_WORLD, error_for(&name), &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_function_and_the_class() {
        let e = error_for("MPI_Foo");
        assert_eq!(e.class, ErrorClass::UnsupportedOperation);
        assert!(e.msg.starts_with("MPI_Foo is not implemented"));
    }
}
