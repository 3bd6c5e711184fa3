//! The values that cross module boundaries, named for what they are.
//!
//! Each is a plain integer under its own name, so that a signature says which kind of id it
//! takes (`comm: CommId, dt: DtypeId`) and the C layer converts handles to exactly these.
//! They are aliases rather than distinct types: the engine's tables and the wire formats index
//! and encode them as integers on the hot path, and the conversion to newtypes is left for
//! when the concurrent branches on the engine have settled (see docs/architecture.md).

/// Global process id: index into the engine's process table (world ranks first, then the
/// processes of other jobs this one connected to).
pub type Gpid = u32;

/// A communicator: index into the engine's communicator table (`Engine::comms`).
pub type CommId = u32;

/// A datatype: index into the engine's datatype table (`Engine::dtypes`; predefined types
/// first, `mpi::datatype::predefined_index`).
pub type DtypeId = u32;

/// A request: a slot of the PML's request table (`mpi::request::Slab`), with its generation.
pub type ReqId = u32;

/// A context id: what a message's envelope carries to keep communicators (and their
/// collective and management traffic) apart on the wire.
pub type ContextId = u32;

/// A message tag (MPI_ANY_TAG and the internal negative tags included).
pub type Tag = i32;

/// A rank within a communicator's group (MPI_ANY_SOURCE, MPI_PROC_NULL included).
pub type Rank = i32;
