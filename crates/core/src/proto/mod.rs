//! Protocols without I/O: frame formats, the protocols' state machines, the per-message
//! protocol policy.

pub mod channels;
pub mod frame;
pub mod machine;
pub mod policy;
pub mod reliable;
