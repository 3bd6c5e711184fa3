//! PMI-1, the process-management interface between MPI processes and their launcher.
//!
//! * [`wire`]: framing, parsing and formatting of the text protocol (parsing never panics);
//! * [`server`]: the launcher's side, a sans-IO state machine (KVS, barrier, finalize, abort);
//! * [`names`]: the standalone name server's protocol (PMI-1 name-service lines over TCP,
//!   after a handshake proving the server's secret);
//! * [`proof`]: the keyed MAC the name server's and the ports' handshakes compute;
//! * [`seal`]: sealed frames (ChaCha20-Poly1305, a key and a counter per direction), what the
//!   name server's connections and the launcher's proxy channel carry after their handshakes;
//! * [`client`]: the MPI process's side, a blocking client over `PMI_FD` or `PMI_PORT`.
//!
//! The protocol is MPICH's "simple PMI" wire protocol (PMI version 1.1), so the client works under
//! MPICH's Hydra and Slurm, and MPICH-built programs work under our server.

pub mod client;
pub mod names;
pub mod proof;
pub mod seal;
pub mod server;
pub mod wire;

pub use client::{PmiClient, PmiError};
pub use server::{Event, Limits, Maxes, NameTable, Server};
pub use wire::{Framer, Message, Request, Response, SpawnCommand, WireError};
