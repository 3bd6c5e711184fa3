//! MPI objects and semantics: communicators, datatypes, requests, matching, point-to-point.

pub mod coll;
pub mod comm;
pub mod datatype;
pub mod p2p;
pub mod pml;
pub mod request;
