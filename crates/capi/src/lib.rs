//! The MPI C ABI of Protean.
//!
//! `build.rs` turns `include/mpi.h` into the exported `PMPI_`/`MPI_` symbols: functions written
//! here as `#[no_mangle] pub unsafe extern "C" fn protean_MPI_X` are called by `PMPI_X`, and
//! every other function reports that it is not implemented.  [`abi`] holds the generated types
//! and constants.

// MPI functions have the arguments the standard gives them; the helpers behind them follow.
#![allow(clippy::too_many_arguments)]

pub mod abi;
pub mod attr;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod dpm;
pub mod env;
pub mod errhandler;
pub mod errors;
pub mod file;
pub mod grequest;
pub mod group;
pub mod handles;
pub mod info;
pub mod memory;
pub mod mpit;
pub mod p2p;
pub mod part;
pub mod rma;
pub mod session;
pub mod status;
pub mod topo;
mod unimplemented;
pub mod util;
pub mod version;
