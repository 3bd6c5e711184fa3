//! Communicators.
//!
//! A communicator is a group of processes (global process ids, in rank order), this process's
//! rank in it, and a context id that separates its traffic from every other communicator's.
//! Point-to-point traffic uses the context id itself, collective traffic `ctx + 1`, so context
//! ids are allocated in steps of two.

use crate::transport::Gpid;

/// Context id of MPI_COMM_WORLD; MPI_COMM_SELF uses the next pair.
pub const CTX_WORLD: u32 = 0;
pub const CTX_SELF: u32 = 2;

/// Engine ids of the predefined communicators.
pub const COMM_WORLD: u32 = 0;
pub const COMM_SELF: u32 = 1;

/// Engine ids of the predefined error handlers.
pub const ERRH_FATAL: u32 = 0;
pub const ERRH_RETURN: u32 = 1;
pub const ERRH_ABORT: u32 = 2;

#[derive(Debug, Clone)]
pub struct Comm {
    pub ctx: u32,
    pub rank: i32,
    /// Local group, in rank order.
    pub group: Vec<Gpid>,
    /// Remote group of an intercommunicator.
    pub remote: Option<Vec<Gpid>>,
    pub errhandler: u32,
    pub name: String,
    pub predefined: bool,
    /// Collective state: the sequence number that tags each collective instance, and the
    /// algorithms' views of the group (owned by `mpi::coll`).
    pub coll: crate::mpi::coll::CommColl,
}

impl Comm {
    pub fn new(ctx: u32, rank: i32, group: Vec<Gpid>, name: &str) -> Comm {
        Comm {
            ctx,
            rank,
            group,
            remote: None,
            errhandler: ERRH_FATAL,
            name: name.to_string(),
            predefined: false,
            coll: Default::default(),
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
    pub fn coll_ctx(&self) -> u32 {
        self.ctx + 1
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
