//! MPI objects and semantics: communicators, groups, attributes, topologies, datatypes,
//! requests, matching, point-to-point.

pub mod attr;
pub mod cm;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod dpm;
pub mod dpm_port;
pub mod engine;
pub mod global;
pub mod group;
pub mod io;
pub mod p2p;
pub mod part;
pub mod pml;
pub mod request;
pub mod rma;
pub mod topo;
