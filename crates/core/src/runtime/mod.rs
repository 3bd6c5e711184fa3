//! The floor: how a process joins its job (the bootstrap: PMI, business cards, host identity), the keys that
//! authenticate its connections (`keys`)
//! and the process-wide state cell with its threading rule. Nothing here knows about MPI
//! objects, protocols or transports: `transport` and `mpi` build on it.

pub mod bootstrap;
pub mod global;
pub mod keys;
