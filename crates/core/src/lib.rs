//! Protean's engine: everything below the C ABI.
//!
//! Layers (see DESIGN.md): [`mpi`] (communicators, datatypes, requests, matching,
//! point-to-point), [`proto`] (frames and the protocol policy, no I/O), [`transport`] (shared
//! memory, TCP), [`runtime`] (bootstrap, the engine, progress) and [`config`] (the registry
//! of tunables).

// The point-to-point API carries MPI's argument lists (buffer, count, type, rank, tag, comm...).
#![allow(clippy::too_many_arguments)]

pub mod config;
pub mod error;
pub mod events;
pub mod ids;
pub mod mem;
pub mod mpi;
pub mod profile;
pub mod proto;
pub mod runtime;
pub mod transport;

pub use error::{ErrorClass, MpiError, Result};
