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
//! `Gpid`, the process id, crosses the most modules (the transports, the runtime, the routes,
//! the process table, dynamic processes). Besides the common API it has what a block of
//! processes needs: `offset(k)` (the id `k` past one), `since(base)` (the position in a block),
//! `block(n)` (the `n` ids from one on), `Gpid::NONE` (no process) and `FromStr` (mpirun writes
//! ids into the environment). It has no arithmetic operators: adding two process ids means
//! nothing, and a wire value (a frame's source, a hello's sender) becomes one with `new`.
//!
//! `Tag` and `Rank` stay aliases by choice: they are MPI's own integer values, not ids of
//!   an engine table. They carry sentinels the user passes (MPI_ANY_TAG, MPI_ANY_SOURCE,
//!   MPI_PROC_NULL) and the engine's internal negative tags, are compared with them and
//!   computed with everywhere (`(rank + 1) % size` in every collective), and a newtype would
//!   put a conversion at nearly every use without keeping apart anything the types above do
//!   not already.

/// Defines an id newtype over `u32` with the common API (see the module doc).
/// A hasher for ids as map keys: one multiplication, where the standard library's SipHash
/// (made to resist keys chosen by an attacker) took about 130 instructions a lookup: the
/// one-sided layer finds a window by its context id for every put it merges and every frame
/// it receives. Keys here are numbers this library hands out (context ids come from frames,
/// but only a job's own processes can send those).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        // Odd: the low bits (the bucket) stay distinct for distinct small ids; the high bits
        // (hashbrown's tag) are mixed.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }

    #[inline(always)]
    fn write_u32(&mut self, n: u32) {
        self.0 = self.0.rotate_left(32) ^ n as u64;
    }

    #[inline(always)]
    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(32) ^ n;
    }
}

/// A map keyed by ids, hashed by [`IdHasher`].
pub type IdMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

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

id_type!(
    /// Global process id: index into the engine's process table (world ranks first, then the
    /// processes of other jobs this one connected to, and spawned children).
    Gpid
);

impl Gpid {
    /// No process (a sentinel where a slot has no process yet).
    pub const NONE: Self = Self(u32::MAX);

    /// The process id `k` past this one: the processes of one job, one spawn or one
    /// connected group are numbered in a block.
    #[inline(always)]
    pub const fn offset(self, k: u32) -> Self {
        Self(self.0 + k)
    }

    /// The `n` process ids from this one on (a job's or a group's block).
    pub fn block(self, n: u32) -> impl Iterator<Item = Self> + Clone {
        (self.0..self.0 + n).map(Self)
    }

    /// How far this id lies past `base`, the first of its block (`base.offset(k).since(base) == k`).
    #[inline(always)]
    pub const fn since(self, base: Self) -> u32 {
        self.0 - base.0
    }
}

impl Default for Gpid {
    /// Process 0 (a job's first rank), as the plain integer was.
    fn default() -> Self {
        Self(0)
    }
}

/// Tests compare process ids with literals (`assert_eq!(group, vec![5, 1, 3])`).
#[cfg(test)]
impl PartialEq<u32> for Gpid {
    fn eq(&self, n: &u32) -> bool {
        self.0 == *n
    }
}

/// The process ids with these numbers (tests).
#[cfg(test)]
pub fn gpids(v: &[u32]) -> Vec<Gpid> {
    v.iter().copied().map(Gpid::new).collect()
}

impl std::str::FromStr for Gpid {
    type Err = std::num::ParseIntError;

    /// A process id as mpirun writes it into the environment and business cards (the number).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self)
    }
}

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

    #[test]
    fn id_maps_keep_ids_apart() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let mut m: IdMap<ContextId, u32> = IdMap::default();
        for i in 0..5000u32 {
            m.insert(ContextId::new(i * 3), i);
        }
        assert!((0..5000u32).all(|i| m.get(&ContextId::new(i * 3)) == Some(&i)));
        assert_eq!(m.get(&ContextId::new(1)), None);
        // Consecutive ids land in distinct buckets of a small table (distinct low bits).
        let b = BuildHasherDefault::<IdHasher>::default();
        let low: std::collections::HashSet<u64> = (0..64u32)
            .map(|i| b.hash_one(ContextId::new(i)) & 63)
            .collect();
        assert_eq!(low.len(), 64);
    }
}
