//! Typed errors inside the engine.
//!
//! Every failure the engine reports is an [`MpiError`]: an error class (the MPI standard's
//! classes, named, not numbered — the C layer maps them to the MPICH ABI values in one place)
//! and a message a user can act on. The C boundary turns it into an error code and hands it to
//! the communicator's error handler.

use std::fmt;

macro_rules! error_classes {
    ($($variant:ident => $mpi:literal, $text:literal;)*) => {
        /// MPI error classes (MPI-4.0 section 9.4), plus the MPI_T classes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorClass { $($variant,)* }

        impl ErrorClass {
            /// Every class, in declaration order.
            pub const ALL: &'static [ErrorClass] = &[$(ErrorClass::$variant,)*];

            /// The standard's name of the class, e.g. `MPI_ERR_RANK`.
            pub fn mpi_name(self) -> &'static str {
                match self { $(ErrorClass::$variant => $mpi,)* }
            }

            /// A one-line description of the class.
            pub fn text(self) -> &'static str {
                match self { $(ErrorClass::$variant => $text,)* }
            }
        }
    };
}

error_classes! {
    Success => "MPI_SUCCESS", "no error";
    Buffer => "MPI_ERR_BUFFER", "invalid buffer pointer";
    Count => "MPI_ERR_COUNT", "invalid count argument";
    Type => "MPI_ERR_TYPE", "invalid datatype";
    Tag => "MPI_ERR_TAG", "invalid tag";
    Comm => "MPI_ERR_COMM", "invalid communicator";
    Rank => "MPI_ERR_RANK", "invalid rank";
    Root => "MPI_ERR_ROOT", "invalid root";
    Group => "MPI_ERR_GROUP", "invalid group";
    Op => "MPI_ERR_OP", "invalid reduction operation";
    Topology => "MPI_ERR_TOPOLOGY", "invalid topology";
    Dims => "MPI_ERR_DIMS", "invalid dimension argument";
    Arg => "MPI_ERR_ARG", "invalid argument";
    Unknown => "MPI_ERR_UNKNOWN", "unknown error";
    Truncate => "MPI_ERR_TRUNCATE", "message truncated: the receive buffer is smaller than the message";
    Other => "MPI_ERR_OTHER", "other error";
    Intern => "MPI_ERR_INTERN", "internal error in the MPI library";
    InStatus => "MPI_ERR_IN_STATUS", "error code is in the status";
    Pending => "MPI_ERR_PENDING", "request pending";
    Request => "MPI_ERR_REQUEST", "invalid request";
    Access => "MPI_ERR_ACCESS", "permission denied";
    Amode => "MPI_ERR_AMODE", "invalid access mode";
    BadFile => "MPI_ERR_BAD_FILE", "invalid file name";
    Conversion => "MPI_ERR_CONVERSION", "error in a data conversion function";
    DupDatarep => "MPI_ERR_DUP_DATAREP", "data representation already defined";
    FileExists => "MPI_ERR_FILE_EXISTS", "file exists";
    FileInUse => "MPI_ERR_FILE_IN_USE", "file in use by another process";
    File => "MPI_ERR_FILE", "invalid file handle";
    Info => "MPI_ERR_INFO", "invalid info object";
    InfoKey => "MPI_ERR_INFO_KEY", "info key too long or invalid";
    InfoValue => "MPI_ERR_INFO_VALUE", "info value too long or invalid";
    InfoNokey => "MPI_ERR_INFO_NOKEY", "info key not defined";
    Io => "MPI_ERR_IO", "I/O error";
    Name => "MPI_ERR_NAME", "service name not published";
    NoMem => "MPI_ERR_NO_MEM", "out of memory";
    NotSame => "MPI_ERR_NOT_SAME", "collective arguments not identical on all processes";
    NoSpace => "MPI_ERR_NO_SPACE", "not enough space";
    NoSuchFile => "MPI_ERR_NO_SUCH_FILE", "file does not exist";
    Port => "MPI_ERR_PORT", "invalid port name";
    Quota => "MPI_ERR_QUOTA", "quota exceeded";
    ReadOnly => "MPI_ERR_READ_ONLY", "file is read-only";
    Service => "MPI_ERR_SERVICE", "invalid service name";
    Spawn => "MPI_ERR_SPAWN", "error spawning processes";
    UnsupportedDatarep => "MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation";
    UnsupportedOperation => "MPI_ERR_UNSUPPORTED_OPERATION", "operation not supported";
    Win => "MPI_ERR_WIN", "invalid window";
    Base => "MPI_ERR_BASE", "invalid base address";
    Locktype => "MPI_ERR_LOCKTYPE", "invalid lock type";
    Keyval => "MPI_ERR_KEYVAL", "invalid attribute key";
    RmaConflict => "MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window";
    RmaSync => "MPI_ERR_RMA_SYNC", "wrong synchronization of RMA calls";
    Size => "MPI_ERR_SIZE", "invalid size";
    Disp => "MPI_ERR_DISP", "invalid displacement";
    Assert => "MPI_ERR_ASSERT", "invalid assert argument";
    RmaRange => "MPI_ERR_RMA_RANGE", "target memory is outside the window";
    RmaAttach => "MPI_ERR_RMA_ATTACH", "memory cannot be attached";
    RmaShared => "MPI_ERR_RMA_SHARED", "memory cannot be shared";
    RmaFlavor => "MPI_ERR_RMA_FLAVOR", "wrong window flavor";
    Session => "MPI_ERR_SESSION", "invalid session";
    ProcAborted => "MPI_ERR_PROC_ABORTED", "the peer process has aborted";
    ValueTooLarge => "MPI_ERR_VALUE_TOO_LARGE", "value too large to store";
    TMemory => "MPI_T_ERR_MEMORY", "out of memory in the tools interface";
    TNotInitialized => "MPI_T_ERR_NOT_INITIALIZED", "the tools interface is not initialized";
    TCannotInit => "MPI_T_ERR_CANNOT_INIT", "the tools interface cannot be initialized now";
    TInvalidIndex => "MPI_T_ERR_INVALID_INDEX", "invalid index";
    TInvalidItem => "MPI_T_ERR_INVALID_ITEM", "invalid item index";
    TInvalidHandle => "MPI_T_ERR_INVALID_HANDLE", "invalid handle";
    TOutOfHandles => "MPI_T_ERR_OUT_OF_HANDLES", "no more handles available";
    TOutOfSessions => "MPI_T_ERR_OUT_OF_SESSIONS", "no more sessions available";
    TInvalidSession => "MPI_T_ERR_INVALID_SESSION", "invalid session";
    TCvarSetNotNow => "MPI_T_ERR_CVAR_SET_NOT_NOW", "the control variable cannot be set now";
    TCvarSetNever => "MPI_T_ERR_CVAR_SET_NEVER", "the control variable cannot be set until the end of execution";
    TPvarNoStartstop => "MPI_T_ERR_PVAR_NO_STARTSTOP", "the performance variable cannot be started or stopped";
    TPvarNoWrite => "MPI_T_ERR_PVAR_NO_WRITE", "the performance variable cannot be written or reset";
    TPvarNoAtomic => "MPI_T_ERR_PVAR_NO_ATOMIC", "the performance variable cannot be read and written atomically";
    TInvalidName => "MPI_T_ERR_INVALID_NAME", "no variable or category has this name";
    TInvalid => "MPI_T_ERR_INVALID", "invalid use of the tools interface";
    TNotSupported => "MPI_T_ERR_NOT_SUPPORTED", "not supported by the tools interface";
}

/// An error with its class and a message naming what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiError {
    pub class: ErrorClass,
    pub msg: String,
}

impl MpiError {
    pub fn new(class: ErrorClass, msg: impl Into<String>) -> Self {
        MpiError {
            class,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.msg, self.class.mpi_name())
    }
}

impl std::error::Error for MpiError {}

pub type Result<T> = std::result::Result<T, MpiError>;

/// `err!(Rank, "rank {} is out of range", r)` builds an `Err(MpiError)`.
#[macro_export]
macro_rules! err {
    ($class:ident, $($fmt:tt)+) => {
        Err($crate::error::MpiError::new($crate::error::ErrorClass::$class, format!($($fmt)+)))
    };
}

/// Same as [`err!`] but the bare error, for `map_err` and `ok_or_else`.
#[macro_export]
macro_rules! mpi_error {
    ($class:ident, $($fmt:tt)+) => {
        $crate::error::MpiError::new($crate::error::ErrorClass::$class, format!($($fmt)+))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorClass::ALL {
            assert!(c.mpi_name().starts_with("MPI_"));
            assert!(seen.insert(c.mpi_name()), "duplicate {}", c.mpi_name());
            assert!(!c.text().is_empty());
        }
    }

    #[test]
    fn macro_builds_error() {
        let e: Result<()> = err!(Rank, "rank {} is out of range", 9);
        let e = e.unwrap_err();
        assert_eq!(e.class, ErrorClass::Rank);
        assert_eq!(e.to_string(), "rank 9 is out of range (MPI_ERR_RANK)");
    }
}
