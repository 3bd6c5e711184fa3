//! Communicators.
//!
//! A communicator is a group of processes (global process ids, in rank order), this process's
//! rank in it, and a context id that separates its traffic from every other communicator's.
//! Context ids come in blocks of [`CTX_STRIDE`]:
//!
//! | context | traffic |
//! |---|---|
//! | `ctx` | point-to-point |
//! | `ctx + 1` ([`Comm::coll_ctx`]) | collectives |
//! | `ctx + 2` ([`Comm::mgmt_ctx`]) | communicator management (dup, split, ...: internal tags) |
//! | `ctx + 3` ([`Comm::tagged_ctx`]) | management with user tags (MPI_Comm_create_group, the leaders of MPI_Intercomm_create) |
//!
//! Blocks are agreed by all members of a new communicator (see `mpi::cm`), so two
//! communicators that share a process never share a block.

use crate::ids::{CommId, ContextId, Gpid};
use crate::mpi::topo::Topology;

/// Context ids per communicator.
pub const CTX_STRIDE: u32 = 4;
/// Context id of MPI_COMM_WORLD (block 0); MPI_COMM_SELF has block 1. Block 2 is reserved for
/// operations that create communicators from groups alone (no parent communicator).
pub const CTX_WORLD: ContextId = ContextId::new(0);
pub const CTX_SELF: ContextId = ContextId::new(CTX_STRIDE);
pub const CTX_FROM_GROUP: ContextId = ContextId::new(2 * CTX_STRIDE);
/// Blocks that are never allocated.
pub const CTX_RESERVED_BLOCKS: u32 = 3;

/// Engine ids of the predefined communicators.
pub const COMM_WORLD: CommId = CommId::new(0);
pub const COMM_SELF: CommId = CommId::new(1);

/// Engine ids of the predefined error handlers.
pub const ERRH_FATAL: u32 = 0;
pub const ERRH_RETURN: u32 = 1;
pub const ERRH_ABORT: u32 = 2;

/// A communicator. The point-to-point path reads `ctx`, `rank` and `group`/`remote` only; the
/// other fields serve the communicator chapter.
#[derive(Debug, Clone)]
pub struct Comm {
    pub ctx: ContextId,
    pub rank: i32,
    /// Local group, in rank order.
    pub group: Vec<Gpid>,
    /// Remote group of an intercommunicator.
    pub remote: Option<Vec<Gpid>>,
    pub errhandler: u32,
    pub name: String,
    pub predefined: bool,
    /// Cartesian, graph or distributed-graph topology.
    pub topo: Option<Box<Topology>>,
    /// Info hints set with MPI_Comm_set_info / dup_with_info (key, value), in order.
    pub info: Vec<(String, String)>,
    /// The `protean_protocol` hint: the protocol setting for point-to-point sends on this
    /// communicator, when it overrides the process's.
    pub protocol: Option<crate::proto::policy::Protocol>,
    /// Management operations started on this communicator so far (every member starts them
    /// in the same order, so this numbers them consistently: it becomes their tag).
    pub mgmt_seq: u32,
    /// Created by MPI_Comm_idup and not complete yet: not usable.
    pub pending: bool,
    /// Freed by the user while requests still use it: its context and slot stay until they
    /// are gone (`Engine::sweep_comms`).
    pub freed: bool,
    /// Collective state: the sequence number that tags each collective instance, and the
    /// algorithms' views of the group (owned by `mpi::coll`).
    pub coll: crate::mpi::coll::CommColl,
}

impl Comm {
    pub fn new(ctx: ContextId, rank: i32, group: Vec<Gpid>, name: &str) -> Comm {
        Comm {
            ctx,
            rank,
            group,
            remote: None,
            errhandler: ERRH_FATAL,
            name: name.to_string(),
            predefined: false,
            coll: Default::default(),
            topo: None,
            info: Vec::new(),
            protocol: None,
            mgmt_seq: 0,
            pending: false,
            freed: false,
        }
    }

    /// Set the hints, and what they mean to the engine (`protean_protocol`; a value that
    /// names no protocol setting is ignored, as the standard asks of hints).
    pub fn set_info(&mut self, info: Vec<(String, String)>) {
        self.protocol = info
            .iter()
            .rev()
            .find(|(k, _)| k == "protean_protocol")
            .and_then(|(_, v)| crate::proto::policy::Protocol::from_name(v));
        self.info = info;
    }

    /// Add hints to the communicator's (a key given again takes its new value; keys not
    /// given keep theirs).
    pub fn merge_info(&mut self, hints: Vec<(String, String)>) {
        let mut info = self.info.clone();
        for (k, v) in hints {
            match info.iter_mut().find(|(ck, _)| *ck == k) {
                Some(e) => e.1 = v,
                None => info.push((k, v)),
            }
        }
        self.set_info(info);
    }

    /// The communicator's name for messages: its name, or "(unnamed, size n)".
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("(unnamed, size {})", self.size())
        } else {
            self.name.clone()
        }
    }

    /// Size of the local group.
    #[inline]
    pub fn size(&self) -> usize {
        self.group.len()
    }

    /// The group point-to-point ranks refer to (the remote one for an intercommunicator).
    #[inline]
    pub fn peers(&self) -> &[Gpid] {
        self.remote.as_deref().unwrap_or(&self.group)
    }

    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }

    #[inline]
    pub fn coll_ctx(&self) -> ContextId {
        self.ctx.offset(1)
    }

    /// Context of communicator-management messages (internal tags).
    #[inline]
    pub fn mgmt_ctx(&self) -> ContextId {
        self.ctx.offset(2)
    }

    /// Context of management messages that carry a user's tag.
    #[inline]
    pub fn tagged_ctx(&self) -> ContextId {
        self.ctx.offset(3)
    }

    /// Remote group size (intercommunicator), else the local size.
    pub fn remote_size(&self) -> usize {
        self.peers().len()
    }
}

/// An error handler (MPI-4.0 section 9.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errhandler {
    /// MPI_ERRORS_ARE_FATAL: abort every process of the job.
    Fatal,
    /// MPI_ERRORS_RETURN: return the error code.
    Return,
    /// MPI_ERRORS_ABORT: abort the processes of the communicator (here: the job).
    Abort,
    /// A user function (its address; the C layer knows its type), for communicators.
    User(usize),
}

/// The predefined error handlers, at ids ERRH_FATAL, ERRH_RETURN, ERRH_ABORT.
pub fn predefined_errhandlers() -> Vec<Option<Errhandler>> {
    vec![
        Some(Errhandler::Fatal),
        Some(Errhandler::Return),
        Some(Errhandler::Abort),
    ]
}
