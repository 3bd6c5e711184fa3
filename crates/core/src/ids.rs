//! The values that cross module boundaries, named for what they are.
//!
//! The ids of the engine's tables are distinct types (`#[repr(transparent)]` over `u32`), so
//! that a signature says which kind of id it takes (`comm: CommId, dt: DtypeId`) and passing a
//! communicator id where a datatype id is expected does not compile. Each has the same small
//! API: `X::new(u32)` and `.get() -> u32` where an id becomes a plain integer or comes from
//! one (the C layer's handles, the wire encoders and decoders in `proto/`), `.idx() -> usize`
//! for indexing its table, and `Display` (the bare number, as error messages print it). They
//! cost nothing: the same size, alignment and passing convention as the `u32` they wrap.
//!
//! ```
//! use protean_core::ids::{CommId, DtypeId};
//! fn type_size(_dt: DtypeId) {}
//! type_size(DtypeId::new(3));
//! # let _ = CommId::new(0);
//! ```
//!
//! ```compile_fail,E0308
//! use protean_core::ids::{CommId, DtypeId};
//! fn type_size(_dt: DtypeId) {}
//! type_size(CommId::new(0)); // a communicator where a datatype is expected
//! ```
//!
//! The conversions stay at the edges: the C layer's handles (`capi/handles.rs`) and its
//! attribute store (which keys every object kind by the raw number), the frames' wire ids
//! (`mpi::request::Slab::wire_id`; a remote request id in a frame is a wire value, not one of
//! our slots), and the tables themselves (`comms[id.idx()]`, the Slab's own methods).
//!
//! Still aliases under their names:
//! - `Gpid`: not converted yet. It is the busiest of the ids (the transports, the runtime,
//!   the routes, the process table, dynamic processes); it is next.
//! - `Tag` and `Rank` stay aliases by choice: they are MPI's own integer values, not ids of
//!   an engine table. They carry sentinels the user passes (MPI_ANY_TAG, MPI_ANY_SOURCE,
//!   MPI_PROC_NULL) and the engine's internal negative tags, are compared with them and
//!   computed with everywhere (`(rank + 1) % size` in every collective), and a newtype would
//!   put a conversion at nearly every use without keeping apart anything the types above do
//!   not already.

/// Defines an id newtype over `u32` with the common API (see the module doc).
macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Debug)]
        pub struct $name(u32);

        impl $name {
            /// The id with this number (from a handle, a frame or a table position).
            #[inline(always)]
            pub const fn new(n: u32) -> Self {
                Self(n)
            }

            /// The id as a plain integer (for a handle or a frame).
            #[inline(always)]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// The id as an index into its table.
            #[inline(always)]
            pub const fn idx(self) -> usize {
                self.0 as usize
            }

            /// The id at position `i` of its table.
            #[inline(always)]
            pub const fn from_idx(i: usize) -> Self {
                Self(i as u32)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

/// Global process id: index into the engine's process table (world ranks first, then the
/// processes of other jobs this one connected to).
pub type Gpid = u32;

id_type!(
    /// A communicator: index into the engine's communicator table (`Engine::comms`).
    CommId
);

id_type!(
    /// A datatype: index into the engine's datatype table (`Engine::dtypes`; predefined types
    /// first, `mpi::datatype::predefined_index`).
    DtypeId
);

id_type!(
    /// A request: a slot of the PML's request table (`mpi::request::Slab`; the records of sends
    /// made without a request have `SENT_BIT` set). Frames carry it with its generation
    /// (`Slab::wire_id`).
    ReqId
);

id_type!(
    /// A context id: what a message's envelope carries to keep communicators (and their
    /// collective and management traffic) apart on the wire.
    ContextId
);

impl Default for ContextId {
    /// Context id 0 (MPI_COMM_WORLD's point-to-point traffic), as the plain integer was.
    fn default() -> Self {
        Self(0)
    }
}

impl ContextId {
    /// The context id `k` past this one: the other ids of a communicator's block
    /// (`mpi::comm::CTX_STRIDE`), and those of partitioned communication (`+ 2^31`,
    /// `mpi::part::PART_SPACE`).
    #[inline(always)]
    pub const fn offset(self, k: u32) -> Self {
        Self(self.0 + k)
    }
}

/// A message tag (MPI_ANY_TAG and the internal negative tags included).
pub type Tag = i32;

/// A rank within a communicator's group (MPI_ANY_SOURCE, MPI_PROC_NULL included).
pub type Rank = i32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_free() {
        assert_eq!(std::mem::size_of::<CommId>(), 4);
        assert_eq!(std::mem::size_of::<Option<CommId>>(), 8);
        let c = CommId::new(7);
        assert_eq!((c.get(), c.idx(), CommId::from_idx(7)), (7, 7, c));
        assert_eq!(format!("{c}"), "7");
    }
}
