//! Types, constants and exported objects of the MPI C ABI, generated from `include/mpi.h` by
//! `build.rs`; names and values are exactly the C ones (`MPI_Comm`, `MPI_COMM_WORLD`, ...).
//!
//! Also `FUNCTIONS` (every API function) and `MISSING` (those not implemented yet).  Sentinel
//! pointers (`MPI_IN_PLACE`, `MPI_STATUS_IGNORE`, ...) are `usize` constants to compare with
//! `ptr as usize`.

#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code
)]

include!(concat!(env!("OUT_DIR"), "/abi.rs"));
