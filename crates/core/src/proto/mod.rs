//! Protocols without I/O: frame formats, the per-message protocol policy.

pub mod frame;
pub mod policy;
