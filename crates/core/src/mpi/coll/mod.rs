//! Collective operations (MPI-4.0 chapter 6; neighbourhood collectives, section 8.6).
//!
//! Read first: MPI-4.0 sections 6.2 (semantics: all processes call collectives on a
//! communicator in the same order; a collective may or may not synchronise), 6.9 (reduction
//! order), 6.12 (nonblocking collectives: matched in call order, never with point-to-point),
//! 6.13 (persistent collectives).
//!
//! Structure:
//! - [`op`]: reduction operations and their kernels;
//! - [`sched`]: compiled schedules (rounds of local steps and messages) and their executor;
//! - `bcast.rs`, `reduce.rs`, `gather.rs`, `inter.rs`: the algorithms, as schedule builders;
//! - [`decide`]: which algorithm serves a call (overrides, decision file, built-in table), with
//!   an algorithm enum per collective;
//! - `build.rs`: one builder per collective: checks a call's arguments, chooses its algorithm
//!   and compiles the schedule (`inter.rs` for intercommunicators and neighbourhoods);
//! - this file: the per-communicator state, argument helpers, and the entry points for the
//!   blocking, nonblocking (`start`) and persistent (`init`) forms, which all build the same
//!   schedules. A blocking call goes first to the shared-memory component (`shm.rs`, or
//!   `shm/hier.rs` across hosts) where a rule or override for its collective at the
//!   communicator's size names it (`Engine::coll_shm_route`, cached per communicator); a few
//!   on small buffers take a direct path without a schedule (`fast.rs`).
//!
//! Matching: collective messages use the communicator's collective context (`ctx + 1`) and a
//! tag made of the communicator's collective sequence number (bits 0-22, counted identically
//! by every member because collectives are called in the same order), bit 23 for nonblocking
//! and persistent collectives, which count in a sequence of their own, a sub-tag (bits 24-29,
//! used by neighbourhood collectives) and, on an intercommunicator, bit 30 for traffic inside
//! the local group. Concurrent nonblocking collectives therefore never confuse messages, and
//! neither does a blocking collective issued between a nonblocking one's start on one process
//! and on another (strictly erroneous, but MPICH and Open MPI keep the two kinds apart too,
//! and mpi4py's fallback for `MPIX_Comm_iagree`, an MPI_Iallreduce, relies on it).
//!
//! Progress: nonblocking and persistent schedules are advanced by `Engine::progress`; their
//! user-function reductions are deferred to [`run_deferred`], which every waiting loop calls
//! outside the engine.

pub mod decide;
pub mod op;
pub mod sched;

mod bcast;
mod build;
mod fast;
mod gather;
mod inter;
mod reduce;
mod shm;

use crate::ids::{CommId, DtypeId, ReqId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::err;
use crate::error::Result;
use crate::mpi::datatype::{predefined_index, Datatype};
use crate::mpi::engine::Engine;
use crate::mpi::global::with;
use crate::mpi::request::{Kind, Mode, Persist, Request, Status};
use decide::{Algorithm, AllreduceAlg, BarrierAlg, Coll, ReduceAlg, Table};
use gather::Blk;
use op::{Op, Reducer};
use sched::{Adv, Sched, Team, UserStep};

/// MPI_IN_PLACE in the MPICH ABI: `(void *)-1`.
pub const IN_PLACE: *const u8 = usize::MAX as *const u8;

const SEQ_MASK: i32 = (1 << 23) - 1;
/// Tag bit of nonblocking and persistent collectives (their own sequence).
const NB_BIT: i32 = 1 << 23;
/// Tag bit of messages inside the local group of an intercommunicator.
pub const LOCAL_BIT: i32 = 1 << 30;

/// A collective's receive of `expected` bytes completed with `st`: the error where the
/// message was shorter. Every receive of a collective algorithm expects exactly what the
/// sender's arguments make (MPI asks the type signatures of the two sides to agree), so a
/// shorter message means the ranks' counts disagree (an erroneous program), at the sender or
/// upstream of it (a process whose part of a call failed sends empty messages on: a
/// schedule for its remaining rounds, a direct path one to every member); a longer one is
/// the point-to-point layer's truncation error already.
pub(crate) fn short_message(st: &Status, expected: usize) -> Option<crate::error::MpiError> {
    if st.error.is_some() || st.cancelled || st.bytes >= expected as u64 {
        return None;
    }
    Some(short_error(st.source, st.bytes, expected))
}

/// The error of a block or message of `sent` bytes from rank `from` where this rank's
/// arguments make `expected` (more).
pub(crate) fn short_error(
    from: impl std::fmt::Display,
    sent: impl std::fmt::Display,
    expected: usize,
) -> crate::error::MpiError {
    crate::mpi_error!(
        Truncate,
        "rank {from} of the communicator sends {sent} bytes where this rank expects \
         {expected}: the counts (and type signatures) must agree"
    )
}

/// The error a collective's message completed with `st`: its own, else (a receive of
/// `expected` bytes) that of a shorter message.
#[inline]
pub(crate) fn status_error(st: Status, expected: usize) -> Option<crate::error::MpiError> {
    match st.error {
        Some(e) => Some(*e),
        None => short_message(&st, expected),
    }
}

/// [`status_error`] of a released request of a collective (a send expects nothing).
#[inline]
pub(crate) fn message_error(r: Request) -> Option<crate::error::MpiError> {
    let expected = if r.kind == Kind::Recv { r.len } else { 0 };
    status_error(r.status, expected)
}

/// A blocking collective waits for a message from rank `src` with its tag `tag` on `ctx`:
/// the error to end that receive with when `src` has sent a message of a later blocking
/// collective there instead (same kind of traffic, a tag up to 2^22 calls ahead). Messages
/// between two processes arrive in the order they were sent, so a later call's message
/// overtakes ours only where `src` never sent ours: it served this call another way (from
/// shared memory, or another algorithm), because the ranks' arguments differ or their
/// collectives come in different orders. Without the check the receive would wait forever.
/// Asked where blocking collectives wait (`sched::run`, `fast.rs`), every few passes.
pub(crate) fn passed_over(
    e: &Engine,
    ctx: crate::ids::ContextId,
    src: i32,
    tag: i32,
) -> Option<crate::error::MpiError> {
    Some(match over(e, ctx, src, tag, false)? {
        Over::Mapping => crate::mpi_error!(
            Other,
            "rank {src} of the communicator serves this call from shared memory and this rank \
             with point-to-point messages: the ranks' arguments differ (counts or type \
             signatures?) or they call the communicator's collectives in different orders"
        ),
        Over::Later => crate::mpi_error!(
            Other,
            "rank {src} of the communicator has gone on to a later collective without sending \
             this one's message: the ranks' arguments differ (counts or type signatures?) or \
             they call the communicator's collectives in different orders"
        ),
    })
}

/// What a message with tag `t` from the sender that a blocking collective with tag `tag`
/// waits for says of it ([`passed_over`]): None, nothing (a message of an earlier call, or
/// of this one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    /// It maps the shared-memory region for this call.
    Mapping,
    /// It has gone on to a later call.
    Later,
}

fn passes_over(tag: i32, t: i32) -> Option<Over> {
    let ahead = t.wrapping_sub(tag) & SEQ_MASK;
    // A region's mapping on an intracommunicator (whose collectives' tags have no local-group
    // bit): of this call, or of a later one.
    let mapping = is_setup(t) && tag & LOCAL_BIT == 0;
    if (t & !SEQ_MASK == tag & !SEQ_MASK || mapping) && ahead != 0 && ahead < 1 << 22 {
        Some(Over::Later)
    } else if mapping && ahead == 0 {
        Some(Over::Mapping)
    } else {
        None
    }
}

/// A process mapping a shared-memory region at the blocking collective with tag `tag` on
/// `ctx` waits for rank `src`'s part of the exchange: has `src` gone on to a later call
/// instead (a message of it there, its own mapping at a later call included)? Then it left
/// this call (its arguments chose another path, which failed), and the exchange would wait
/// forever ([`passed_over`]'s reasoning).
pub(crate) fn gone_on(e: &Engine, ctx: crate::ids::ContextId, src: i32, tag: i32) -> bool {
    over(e, ctx, src, tag, true).is_some()
}

/// What the first message waiting unexpected from rank `src` on `ctx` says of the blocking
/// collective with tag `tag` ([`passes_over`]; `later`: only a later call's), if any.
pub(crate) fn over(
    e: &Engine,
    ctx: crate::ids::ContextId,
    src: i32,
    tag: i32,
    later: bool,
) -> Option<Over> {
    if src < 0 || tag & NB_BIT != 0 {
        return None;
    }
    let env = e.pml.find_unexpected(|env| {
        env.ctx == ctx
            && env.src == src
            && passes_over(tag, env.tag).is_some_and(|o| !later || o == Over::Later)
    })?;
    passes_over(tag, env.tag)
}

/// The tag of round `round` (0 or 1) of the exchanges that map a communicator's shared-memory
/// region at a call with tag `tag` ([`shm`]): the local-group bit of intercommunicators with
/// sub-tag 62 or 63, a pair no other traffic has (sub-tags are the neighbourhood
/// collectives', on intracommunicators, and regions are only made on intracommunicators).
fn setup_tag(tag: i32, round: i32) -> i32 {
    subtag(tag | LOCAL_BIT, 62 + round)
}

/// Is `t` a tag of [`setup_tag`]?
fn is_setup(t: i32) -> bool {
    t & LOCAL_BIT != 0 && (t >> 24) & 63 >= 62
}

/// A tag with sub-tag `off` (0..63).
#[inline]
pub fn subtag(base: i32, off: i32) -> i32 {
    (base & !(63 << 24)) | ((off & 63) << 24)
}

#[inline]
fn in_place(p: *const u8) -> bool {
    p == IN_PLACE
}

/// MPI_BYTE, for messages of packed bytes.
pub fn byte_type() -> Arc<Datatype> {
    static B: OnceLock<Arc<Datatype>> = OnceLock::new();
    B.get_or_init(|| {
        let i = predefined_index("MPI_BYTE").expect("MPI_BYTE is predefined");
        Arc::new(crate::mpi::datatype::predefined().swap_remove(i))
    })
    .clone()
}

// ---------------------------------------------------------------------------------------------
// Per-communicator state

/// A communicator's collective state (a field of `Comm`).
#[derive(Debug, Clone, Default)]
pub struct CommColl {
    /// Sequence number of the next blocking collective on this communicator.
    pub seq: u32,
    /// ... of the next nonblocking or persistent one.
    pub nbseq: u32,
    /// The algorithms' views of the group, built at the first collective.
    pub views: Option<Arc<Views>>,
    /// The shared-memory collective region, mapped at the first call that uses it
    /// (`shm.rs`); a duplicate of the communicator starts without one.
    pub shm: shm::ShmCell,
    /// Which shared-memory component may serve a blocking call, and from how many bytes
    /// without an override ([`Engine::coll_shm_route`]), found at the first call: the
    /// decision file and the built-in table do not change while the communicator lives.
    routes: Option<ShmRoutes>,
}

/// How algorithms see a communicator.
#[derive(Debug)]
pub struct Views {
    /// The local group (the whole communicator for an intracommunicator).
    pub local: Team,
    /// The remote group of an intercommunicator.
    pub remote: Option<Team>,
    /// Which members share a host (the local group).
    pub nodes: Nodes,
}

/// The local group cut by host.
#[derive(Debug, Clone)]
pub struct Nodes {
    /// Node index of each member.
    pub node_of: Vec<usize>,
    /// Members of each node, ascending.
    pub members: Vec<Vec<usize>>,
    pub my_node: usize,
}

impl Nodes {
    fn new(hosts: &[&str], me: usize) -> Nodes {
        let mut names: Vec<&str> = Vec::new();
        let mut node_of = Vec::with_capacity(hosts.len());
        let mut members: Vec<Vec<usize>> = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            let k = match names.iter().position(|n| n == h) {
                Some(k) => k,
                None => {
                    names.push(h);
                    members.push(Vec::new());
                    names.len() - 1
                }
            };
            node_of.push(k);
            members[k].push(i);
        }
        let my_node = node_of.get(me).copied().unwrap_or(0);
        Nodes {
            node_of,
            members,
            my_node,
        }
    }

    pub fn count(&self) -> usize {
        self.members.len()
    }

    /// Does every node hold a run of consecutive ranks? Nodes are numbered in the order of
    /// their lowest member, so they are then in rank order too (reductions over the nodes'
    /// leaders keep MPI's order for non-commutative operations).
    pub fn consecutive(&self) -> bool {
        self.members
            .iter()
            .all(|m| m.windows(2).all(|w| w[1] == w[0] + 1))
    }

    fn leader(&self, k: usize, root: Option<usize>) -> usize {
        match root {
            Some(r) if self.node_of[r] == k => r,
            _ => self.members[k][0],
        }
    }

    /// The members of node `k` as a team of `t`'s members, leader first (the root when it is
    /// on this node, else the lowest rank).
    pub fn sub_team(&self, t: &Team, k: usize, root: Option<usize>) -> Team {
        let lead = self.leader(k, root);
        let order: Vec<usize> = std::iter::once(lead)
            .chain(self.members[k].iter().copied().filter(|&m| m != lead))
            .collect();
        Team {
            me: order.iter().position(|&m| m == t.me).unwrap_or(usize::MAX),
            members: order.iter().map(|&m| t.members[m]).collect(),
            bit: t.bit,
        }
    }

    /// The nodes' leaders as a team (member i leads node i).
    pub fn leaders_team(&self, t: &Team, root: Option<usize>) -> Team {
        let leads: Vec<usize> = (0..self.count()).map(|k| self.leader(k, root)).collect();
        Team {
            me: leads.iter().position(|&m| m == t.me).unwrap_or(usize::MAX),
            members: leads.iter().map(|&m| t.members[m]).collect(),
            bit: t.bit,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engine state

/// A nonblocking or persistent collective in the engine.
struct Running {
    id: u64,
    slot: ReqId,
    sched: Box<Sched>,
    active: bool,
    /// Waiting for a deferred user reduction.
    blocked: bool,
    persistent: bool,
}

struct Deferred {
    id: u64,
    step: UserStep,
}

// SAFETY: see `Sched`: raw pointers into buffers MPI keeps valid, touched under the engine's
// rules only.
unsafe impl Send for Deferred {}

/// Collective state of the engine.
pub struct State {
    /// Reduction operations by engine id (predefined first).
    pub ops: Vec<Option<Op>>,
    running: Vec<Running>,
    /// Running entries that are active.
    nactive: usize,
    deferred: Vec<Deferred>,
    next_id: u64,
    /// Rules from the decision file (empty without one).
    pub file: Table,
    pub builtin: Table,
    /// A nonblocking or persistent collective is being built (its tag counts in `nbseq`).
    nonblocking: bool,
    /// Serial of the last shared-memory collective region this process made.
    shm_serial: u32,
}

/// Deferred user reductions exist (checked by waiting loops without taking the engine).
static DEFERRED: AtomicBool = AtomicBool::new(false);

impl State {
    /// Collective state for a new engine; reads the decision file if one is configured.
    pub fn new(cfg: &crate::config::Config) -> Result<State> {
        let file = if cfg.coll_decision_file.is_empty() {
            Table::default()
        } else {
            let path = &cfg.coll_decision_file;
            let text = std::fs::read_to_string(path)
                .map_err(|e| crate::mpi_error!(Other, "PROTEAN_COLL_DECISION_FILE={path}: {e}"))?;
            Table::parse(&text)
                .map_err(|e| crate::mpi_error!(Other, "PROTEAN_COLL_DECISION_FILE={path}: {e}"))?
        };
        Ok(State {
            ops: op::predefined_ops(),
            running: Vec::new(),
            nactive: 0,
            deferred: Vec::new(),
            next_id: 1,
            file,
            builtin: decide::builtin(),
            nonblocking: false,
            shm_serial: 0,
        })
    }

    /// Are nonblocking collectives waiting for progress?
    #[inline]
    pub fn busy(&self) -> bool {
        self.nactive > 0
    }
}

impl Engine {
    fn coll_views(&mut self, comm: CommId) -> Result<Arc<Views>> {
        let c = self.comm(comm)?;
        if let Some(v) = &c.coll.views {
            return Ok(v.clone());
        }
        let bit = if c.is_inter() { LOCAL_BIT } else { 0 };
        let local = Team {
            members: c
                .group
                .iter()
                .enumerate()
                .map(|(i, g)| (*g, i as i32))
                .collect(),
            me: c.rank as usize,
            bit,
        };
        let remote = c.remote.as_ref().map(|r| Team {
            members: r.iter().enumerate().map(|(i, g)| (*g, i as i32)).collect(),
            me: usize::MAX,
            bit: 0,
        });
        let hosts: Vec<&str> = c
            .group
            .iter()
            .map(|g| self.hosts.get(g.idx()).map_or("", |h| &**h))
            .collect();
        let nodes = Nodes::new(&hosts, c.rank as usize);
        let v = Arc::new(Views {
            local,
            remote,
            nodes,
        });
        if let Some(Some(c)) = self.comms.get_mut(comm.idx()) {
            c.coll.views = Some(v.clone());
        }
        Ok(v)
    }

    /// The tag of the next collective on `comm` (every member counts the same).
    fn coll_tag(&mut self, comm: CommId) -> i32 {
        let nb = self.coll.nonblocking;
        match self.comms.get_mut(comm.idx()) {
            Some(Some(c)) => {
                let seq = if nb {
                    &mut c.coll.nbseq
                } else {
                    &mut c.coll.seq
                };
                let s = *seq;
                *seq = s.wrapping_add(1);
                (s as i32) & SEQ_MASK | if nb { NB_BIT } else { 0 }
            }
            _ => 0,
        }
    }

    /// Build the schedule of a nonblocking or persistent collective (tagged in its own
    /// sequence, see the module doc).
    unsafe fn build_nonblocking(&mut self, comm: CommId, a: &Args) -> Result<Sched> {
        self.coll.nonblocking = true;
        let s = build::build(self, comm, a);
        self.coll.nonblocking = false;
        s
    }

    /// The algorithm for a call: override, then decision file, then built-in table. The
    /// second value says whether the built-in table chose (host-aware variants may then
    /// replace the choice). With `shm` false the shared-memory algorithm is never the answer:
    /// a source that names it is passed over, so the call gets what would serve it if there
    /// were no shared-memory algorithm (the schedule builders ask this way, since the
    /// shared-memory algorithms run only as blocking calls, see `shm.rs`).
    fn coll_choose_index(
        &self,
        coll: Coll,
        ranks: usize,
        bytes: usize,
        shm: bool,
    ) -> (usize, bool) {
        let shm_alg = coll.shm_index();
        let skip = if shm { None } else { shm_alg };
        let i = coll.configured(&self.cfg);
        if i != 0 && Some(i) != skip {
            return (i, false);
        }
        if let Some(a) = self.coll.file.lookup_except(coll, ranks, bytes, skip) {
            return (a, false);
        }
        // The built-in table's shared-memory rules come before the oversubscribed ones: the
        // shared-memory algorithms wait for no message, and their waiting ranks yield.
        if shm && shm_alg.is_some() && self.coll.builtin.lookup(coll, ranks, bytes) == shm_alg {
            return (shm_alg.unwrap_or(0), true);
        }
        // Oversubscribed (more ranks on this machine than CPUs): a process waiting for a peer
        // that is not running costs a time slice per round, so small calls take the
        // algorithms with the fewest dependent rounds. Measured at 8 ranks on 2 cores (see
        // docs/collectives.md): allreduce of 8 B in one round (everyone sends its vector to
        // everyone, and reduces in rank order) 31 us against 40 us for recursive doubling;
        // linear barrier 15 us against 32 us for dissemination; linear reduce of 8 B 8 us
        // against 50 us for binomial.
        if ranks > 2 && self.node_procs > self.ncpus {
            match coll {
                Coll::Allreduce if bytes <= 256 => {
                    return (AllreduceAlg::AllgatherReduce as usize, false)
                }
                Coll::Barrier => return (BarrierAlg::Linear as usize, false),
                Coll::Reduce if bytes <= 4096 => return (ReduceAlg::Linear as usize, false),
                _ => {}
            }
        }
        (
            self.coll
                .builtin
                .lookup_except(coll, ranks, bytes, shm_alg)
                .unwrap_or(0),
            true,
        )
    }

    /// The algorithm for a call of collective `A::COLL` (see `coll_choose_index`), and whether
    /// the built-in table chose it; never the shared-memory algorithm.
    pub(super) fn coll_choose<A: Algorithm>(&self, ranks: usize, bytes: usize) -> (A, bool) {
        let (i, auto) = self.coll_choose_index(A::COLL, ranks, bytes, false);
        (A::from_index(i), auto)
    }

    /// Which shared-memory component could serve blocking call `a` on `comm`: the answer of
    /// [`Engine::coll_choose_shm`] (one host) or [`Engine::coll_choose_hier`] (several) for
    /// any size from the fewest bytes a rule names it for, found before the call's arguments
    /// are checked. A component it rules out is not asked (at two ranks on one host, say,
    /// where no rule names `shm` for small calls): its argument checks and decline cost more
    /// than the call.
    pub(super) fn coll_shm_route(&mut self, comm: CommId, a: &Args) -> Option<ShmVia> {
        let coll = a.coll()?;
        let routes = match self.comm(comm).ok()?.coll.routes {
            Some(r) => r,
            None => {
                let r = self.coll_routes(comm);
                self.comm_mut(comm).ok()?.coll.routes = Some(r);
                r
            }
        };
        let via = routes.via?;
        let i = coll.configured(&self.cfg);
        if i == 0 {
            let least = routes.least[coll as usize]?;
            return (least == 0 || a.bytes(self) >= least).then_some(via);
        }
        // An override names one algorithm for every size.
        let named = match via {
            ShmVia::Shm => Some(i) == coll.shm_index() || Some(i) == coll.hier_index(),
            ShmVia::Hier => Some(i) == coll.hier_index(),
        };
        named.then_some(via)
    }

    /// [`Engine::coll_shm_route`]'s component for `comm` and, per collective, the fewest bytes
    /// a rule of the decision file or the built-in table names it for.
    fn coll_routes(&mut self, comm: CommId) -> ShmRoutes {
        let none = ShmRoutes {
            via: None,
            least: [None; Coll::ALL.len()],
        };
        let Ok(c) = self.comm(comm) else {
            return none;
        };
        if c.is_inter() || c.size() < 2 {
            return none;
        }
        let n = c.size();
        let Ok(views) = self.coll_views(comm) else {
            return none;
        };
        let via = if views.nodes.count() > 1 {
            ShmVia::Hier
        } else if self.net.has(crate::transport::Route::Shm) {
            ShmVia::Shm
        } else {
            return none;
        };
        let least = Coll::ALL.map(|coll| {
            let (shm, hier) = (coll.shm_index(), coll.hier_index());
            match via {
                ShmVia::Shm => {
                    let file = self
                        .coll
                        .file
                        .least(coll, n, |a| Some(a) == shm || Some(a) == hier);
                    let builtin = self.coll.builtin.least(coll, n, |a| Some(a) == shm);
                    file.into_iter().chain(builtin).min()
                }
                ShmVia::Hier => self.coll.file.least(coll, n, |a| Some(a) == hier),
            }
        });
        ShmRoutes {
            via: Some(via),
            least,
        }
    }

    /// Does the choice for a call of `coll` (on a communicator within one host) fall on its
    /// shared-memory algorithm? `two_level_shm` named for such a communicator is `shm` (one
    /// host, one level).
    pub(super) fn coll_choose_shm(&self, coll: Coll, ranks: usize, bytes: usize) -> bool {
        let (i, _) = self.coll_choose_index(coll, ranks, bytes, true);
        Some(i) == coll.shm_index() || Some(i) == coll.hier_index()
    }

    /// Does the choice for a call of `coll` on a communicator spanning hosts fall on its
    /// hierarchical shared-memory algorithm (`two_level_shm`, `shm/hier.rs`)? An override or
    /// a decision-file rule naming another algorithm says no (a rule naming `shm` is passed
    /// over: it cannot serve several hosts); with neither, no: `auto` keeps `two_level` there,
    /// since two_level_shm was not measurably faster across emulated hosts on the 2-core
    /// machine (two runs disagreed in direction; docs/collectives.md).
    pub(super) fn coll_choose_hier(&self, coll: Coll, ranks: usize, bytes: usize) -> bool {
        let Some(h) = coll.hier_index() else {
            return false;
        };
        let i = coll.configured(&self.cfg);
        if i != 0 {
            return i == h;
        }
        match self
            .coll
            .file
            .lookup_except(coll, ranks, bytes, coll.shm_index())
        {
            Some(a) => a == h,
            None => false,
        }
    }

    /// One progress pass over the running nonblocking and persistent collectives.
    pub fn coll_progress(&mut self) {
        let mut list = std::mem::take(&mut self.coll.running);
        let mut i = 0;
        while i < list.len() {
            let r = &mut list[i];
            if !r.active || r.blocked {
                i += 1;
                continue;
            }
            match r.sched.advance(self) {
                Adv::Pending => i += 1,
                Adv::User => {
                    r.blocked = true;
                    self.coll.deferred.push(Deferred {
                        id: r.id,
                        step: r.sched.user_step(),
                    });
                    DEFERRED.store(true, Ordering::Release);
                    i += 1;
                }
                Adv::Done => {
                    r.active = false;
                    self.coll.nactive -= 1;
                    let err = r.sched.take_error();
                    let slot = r.slot;
                    let mut drop_it = !r.persistent;
                    if let Some(req) = self.pml.reqs.get_mut(slot) {
                        req.complete = true;
                        req.status = Status::EMPTY;
                        req.status.error = err.map(Box::new);
                        if req.user_freed {
                            self.pml.reqs.remove(slot);
                            drop_it = true;
                        }
                    }
                    if drop_it {
                        list.swap_remove(i);
                    } else {
                        i += 1;
                    }
                }
            }
        }
        list.append(&mut self.coll.running);
        self.coll.running = list;
    }

    /// Is `slot` a persistent collective request?
    pub fn coll_owns(&self, slot: ReqId) -> bool {
        self.coll
            .running
            .iter()
            .any(|r| r.slot == slot && r.persistent)
    }

    /// MPI_Start on a persistent collective.
    pub fn coll_start(&mut self, slot: ReqId) -> Result<()> {
        let Some(req) = self.pml.reqs.get_mut(slot) else {
            return err!(Request, "invalid request");
        };
        if req.active {
            return err!(
                Request,
                "MPI_Start on a persistent collective request that is already active"
            );
        }
        req.active = true;
        req.complete = false;
        req.status = Status::EMPTY;
        let Some(i) = self.coll.running.iter().position(|r| r.slot == slot) else {
            return err!(Intern, "persistent collective without a schedule");
        };
        let mut r = self.coll.running.swap_remove(i);
        r.sched.rewind();
        r.active = true;
        self.coll.nactive += 1;
        self.coll.running.push(r);
        self.coll_progress();
        Ok(())
    }

    /// A persistent collective request was freed while inactive: drop its schedule.
    pub fn coll_forget(&mut self, slot: ReqId) {
        if let Some(i) = self
            .coll
            .running
            .iter()
            .position(|r| r.slot == slot && r.persistent && !r.active)
        {
            self.coll.running.swap_remove(i);
        }
    }

    fn coll_register(&mut self, comm: CommId, sched: Sched, persistent: bool) -> ReqId {
        let mut req = Request::new(Kind::Done, comm);
        if persistent {
            let byte = byte_type();
            req.persist = Some(Box::new(Persist {
                user_buf: std::ptr::null_mut(),
                count: 0,
                dtype: byte,
                rank: 0,
                tag: 0,
                comm,
                mode: Mode::Standard,
                is_send: false,
            }));
            req.active = false;
            req.complete = true;
        }
        let slot = self.pml.reqs.insert(req);
        let id = self.coll.next_id;
        self.coll.next_id += 1;
        self.coll.running.push(Running {
            id,
            slot,
            sched: Box::new(sched),
            active: !persistent,
            blocked: false,
            persistent,
        });
        if !persistent {
            self.coll.nactive += 1;
            self.coll_progress();
        }
        slot
    }
}

/// Run the user reductions that nonblocking collectives deferred, and the poll hook of the
/// layer above ([`crate::mpi::global::poll_hook`]). Called by waiting loops and test calls,
/// outside the engine.
///
/// Every pass of every waiting loop calls it, nearly always with nothing to do: the two loads
/// are inline, the work is out of line (as one function it pushed and popped six registers per
/// pass, 22 instructions for nothing).
#[inline]
pub fn run_deferred() {
    crate::mpi::global::poll_hook();
    if DEFERRED.load(Ordering::Acquire) {
        run_deferred_now();
    }
}

#[cold]
#[inline(never)]
fn run_deferred_now() {
    DEFERRED.store(false, Ordering::Release);
    let Ok(items) = with(|e| std::mem::take(&mut e.coll.deferred)) else {
        return;
    };
    for d in &items {
        // SAFETY: outside the engine; the schedule is blocked on this step, so its buffers
        // are alive and untouched by anyone else.
        unsafe { d.step.run() };
    }
    let _ = with(|e| {
        for d in &items {
            if let Some(r) = e.coll.running.iter_mut().find(|r| r.id == d.id) {
                r.sched.user_done();
                r.blocked = false;
            }
        }
        e.coll_progress();
    });
}

// ---------------------------------------------------------------------------------------------
// Arguments

/// Per-process counts of a v/w collective, or one count for all.
#[derive(Debug, Clone)]
pub enum Counts {
    Uniform(i64),
    /// Counts and displacements (in extents of the datatype, or bytes with [`Types::Each`]).
    Varied {
        counts: Vec<i64>,
        displs: Vec<isize>,
    },
}

/// One datatype for all blocks, or one per block (the w forms).
#[derive(Debug, Clone)]
pub enum Types {
    One(DtypeId),
    Each(Vec<DtypeId>),
}

/// The arguments of a collective call, as the C layer passes them (buffers may be
/// [`IN_PLACE`]; arguments that are not significant at a process are ignored there).
#[derive(Debug, Clone)]
pub enum Args {
    Barrier,
    Bcast {
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        root: i32,
    },
    Reduce {
        sbuf: *const u8,
        rbuf: *mut u8,
        count: i64,
        dt: DtypeId,
        op: u32,
        root: i32,
    },
    Allreduce {
        sbuf: *const u8,
        rbuf: *mut u8,
        count: i64,
        dt: DtypeId,
        op: u32,
    },
    /// MPI_Reduce_scatter_block (`Counts::Uniform`) and MPI_Reduce_scatter.
    ReduceScatter {
        sbuf: *const u8,
        rbuf: *mut u8,
        counts: Counts,
        dt: DtypeId,
        op: u32,
    },
    Scan {
        sbuf: *const u8,
        rbuf: *mut u8,
        count: i64,
        dt: DtypeId,
        op: u32,
        exclusive: bool,
    },
    /// MPI_Gather and (`v`) MPI_Gatherv. The counts are known at the root only: elsewhere
    /// MPI_Gatherv passes `Counts::Uniform(0)`, so `v` is what tells every process which of
    /// the two was called (algorithms that need uniform blocks must decide alike everywhere).
    Gather {
        sbuf: *const u8,
        scount: i64,
        sdt: DtypeId,
        rbuf: *mut u8,
        rcounts: Counts,
        rdt: DtypeId,
        root: i32,
        v: bool,
    },
    /// MPI_Scatter and (`v`) MPI_Scatterv, as for `Gather`.
    Scatter {
        sbuf: *const u8,
        scounts: Counts,
        sdt: DtypeId,
        rbuf: *mut u8,
        rcount: i64,
        rdt: DtypeId,
        root: i32,
        v: bool,
    },
    Allgather {
        sbuf: *const u8,
        scount: i64,
        sdt: DtypeId,
        rbuf: *mut u8,
        rcounts: Counts,
        rdt: DtypeId,
    },
    Alltoall {
        sbuf: *const u8,
        scounts: Counts,
        sdt: Types,
        rbuf: *mut u8,
        rcounts: Counts,
        rdt: Types,
    },
    NeighborAllgather {
        sbuf: *const u8,
        scount: i64,
        sdt: DtypeId,
        rbuf: *mut u8,
        rcounts: Counts,
        rdt: DtypeId,
    },
    NeighborAlltoall {
        sbuf: *const u8,
        scounts: Counts,
        sdt: Types,
        rbuf: *mut u8,
        rcounts: Counts,
        rdt: Types,
    },
}

// SAFETY: the raw pointers are the caller's buffers, used under MPI's rules.
unsafe impl Send for Args {}

/// A gather or scatter as the mirror images its algorithms take: every process's `own` block
/// (a gather's send side, a scatter's receive side) and the root's `many` blocks (the other
/// side).
pub(super) struct RootedArgs<'a> {
    pub own: (*const u8, i64, DtypeId),
    pub many: (*const u8, &'a Counts, DtypeId),
    pub root: i32,
    pub v: bool,
    pub gather: bool,
}

/// The shared-memory component that may serve a communicator's blocking calls
/// ([`Engine::coll_shm_route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShmVia {
    /// `shm.rs`: a communicator within one host.
    Shm,
    /// `shm/hier.rs`: a communicator spanning hosts.
    Hier,
}

/// A communicator's [`ShmVia`] (None: an intercommunicator, one member, or one host in a job
/// without shared memory) and, per collective, the fewest bytes for which a rule without an
/// override names it (None: no rule does).
#[derive(Debug, Clone, Copy)]
pub(super) struct ShmRoutes {
    via: Option<ShmVia>,
    least: [Option<usize>; Coll::ALL.len()],
}

impl Args {
    /// The collective whose algorithm is chosen for the call; None for those without a
    /// choice (the neighbourhood collectives).
    pub(super) fn coll(&self) -> Option<Coll> {
        Some(match self {
            Args::Barrier => Coll::Barrier,
            Args::Bcast { .. } => Coll::Bcast,
            Args::Reduce { .. } => Coll::Reduce,
            Args::Allreduce { .. } => Coll::Allreduce,
            Args::ReduceScatter { .. } => Coll::ReduceScatter,
            Args::Scan { .. } => Coll::Scan,
            Args::Gather { .. } => Coll::Gather,
            Args::Scatter { .. } => Coll::Scatter,
            Args::Allgather { .. } => Coll::Allgather,
            Args::Alltoall { .. } => Coll::Alltoall,
            Args::NeighborAllgather { .. } | Args::NeighborAlltoall { .. } => return None,
        })
    }

    /// The bytes the decision asks about for this call (see `docs/collectives.md`) where they
    /// are known without checking the arguments: the whole buffer of a bcast or reduction, a
    /// block of an allgather or alltoall (the receive side, which MPI_IN_PLACE keeps);
    /// usize::MAX for the others (gather and scatter, whose own block MPI_IN_PLACE leaves out
    /// at the root) and where a datatype is not valid (the algorithm's checks report it).
    fn bytes(&self, e: &Engine) -> usize {
        let of = |count: i64, dt: DtypeId| match e.dtype(dt) {
            Ok(d) => (count.max(0) as usize).saturating_mul(d.size),
            Err(_) => usize::MAX,
        };
        match *self {
            Args::Bcast { count, dt, .. }
            | Args::Reduce { count, dt, .. }
            | Args::Allreduce { count, dt, .. } => of(count, dt),
            Args::Allgather {
                rcounts: Counts::Uniform(c),
                rdt,
                ..
            } => of(c, rdt),
            Args::Alltoall {
                rcounts: Counts::Uniform(c),
                rdt: Types::One(rdt),
                ..
            } => of(c, rdt),
            _ => usize::MAX,
        }
    }

    /// MPI_Gather(v) and MPI_Scatter(v) as [`RootedArgs`]; None for the other collectives.
    pub(super) fn rooted(&self) -> Option<RootedArgs<'_>> {
        match *self {
            Args::Gather {
                sbuf,
                scount,
                sdt,
                rbuf,
                ref rcounts,
                rdt,
                root,
                v,
            } => Some(RootedArgs {
                own: (sbuf, scount, sdt),
                many: (rbuf as *const u8, rcounts, rdt),
                root,
                v,
                gather: true,
            }),
            Args::Scatter {
                sbuf,
                ref scounts,
                sdt,
                rbuf,
                rcount,
                rdt,
                root,
                v,
            } => Some(RootedArgs {
                own: (rbuf as *const u8, rcount, rdt),
                many: (sbuf, scounts, sdt),
                root,
                v,
                gather: false,
            }),
            _ => None,
        }
    }
}

/// A buffer's or count's name in an error message, made of two parts (`"recv"` and `"count"`,
/// say): formatted only when there is an error, since the checks run at every call.
#[derive(Clone, Copy)]
struct Name<'a>(&'a str, &'static str);

impl std::fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.0, self.1)
    }
}

fn count_of(c: i64, what: impl std::fmt::Display) -> Result<usize> {
    if c < 0 {
        return err!(Count, "negative {what} {c}");
    }
    Ok(c as usize)
}

impl Engine {
    fn coll_dtype(&self, id: DtypeId) -> Result<Arc<Datatype>> {
        let d = self.dtype(id)?;
        if !d.committed {
            return err!(
                Type,
                "datatype {} has not been committed (call MPI_Type_commit)",
                if d.name.is_empty() {
                    "(derived)"
                } else {
                    &d.name
                }
            );
        }
        Ok(d.clone())
    }

    fn coll_op(&self, id: u32) -> Result<Op> {
        match self.coll.ops.get(id as usize) {
            Some(Some(o)) => Ok(*o),
            _ => err!(Op, "invalid reduction operation (MPI_OP_NULL or freed)"),
        }
    }

    fn coll_reducer(&self, op: u32, dt: DtypeId) -> Result<Reducer> {
        let o = self.coll_op(op)?;
        self.coll_dtype(dt)?;
        Reducer::new(o, dt, &self.dtypes)
    }
}

fn check_buf(
    p: *const u8,
    count: usize,
    dt: &Datatype,
    what: impl std::fmt::Display,
) -> Result<()> {
    if count > 0 && dt.size > 0 && p.is_null() && dt.predefined && dt.true_lb >= 0 {
        return err!(
            Buffer,
            "null {what} for {count} elements of {}",
            if dt.name.is_empty() {
                "a type"
            } else {
                &dt.name
            }
        );
    }
    Ok(())
}

fn check_root(root: i32, n: usize) -> Result<usize> {
    if root < 0 || root as usize >= n {
        return err!(
            Root,
            "root {root} is out of range for a communicator of size {n}"
        );
    }
    Ok(root as usize)
}

fn no_alias(sbuf: *const u8, rbuf: *const u8, bytes: usize) -> Result<()> {
    if bytes > 0 && sbuf == rbuf && !sbuf.is_null() {
        return err!(
            Buffer,
            "the send and receive buffers are the same (use MPI_IN_PLACE)"
        );
    }
    Ok(())
}

/// An allgather's send buffer must not be this process's own block of the receive buffer
/// either: that is MPI_IN_PLACE spelled wrong, and the other processes would hang waiting for
/// a process that was refused.
fn no_alias_own(sbuf: *const u8, own: *const u8, bytes: usize) -> Result<()> {
    if bytes > 0 && std::ptr::eq(sbuf, own) {
        return err!(
            Buffer,
            "the send buffer is this process's own block of the receive buffer (use MPI_IN_PLACE)"
        );
    }
    Ok(())
}

/// Blocks of a buffer, one per process, checked.
fn blocks(
    e: &Engine,
    buf: *const u8,
    counts: &Counts,
    types: &Types,
    n: usize,
    what: impl std::fmt::Display + Copy,
) -> Result<Vec<Blk>> {
    match (counts, types) {
        (Counts::Uniform(c), Types::One(t)) => {
            let c = count_of(*c, what)?;
            let dt = e.coll_dtype(*t)?;
            check_buf(buf, c, &dt, what)?;
            Ok(gather::uniform(buf, c, &dt, n))
        }
        (Counts::Varied { counts, displs }, types) => {
            if counts.len() < n || displs.len() < n {
                return err!(Arg, "{what}: {} counts for {n} processes", counts.len());
            }
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                let c = count_of(counts[i], what)?;
                let (dt, off) = match types {
                    Types::One(t) => {
                        let dt = e.coll_dtype(*t)?;
                        let off = displs[i].wrapping_mul(dt.extent());
                        (dt, off)
                    }
                    Types::Each(ts) => {
                        let t = *ts
                            .get(i)
                            .ok_or_else(|| crate::mpi_error!(Arg, "{what}: missing datatype"))?;
                        (e.coll_dtype(t)?, displs[i])
                    }
                };
                // The block's own address: a null base with displacements is MPI_BOTTOM.
                let p = buf.wrapping_offset(off);
                check_buf(p, c, &dt, what)?;
                v.push(Blk::new(p, c, &dt));
            }
            Ok(v)
        }
        (Counts::Uniform(_), Types::Each(_)) => err!(Intern, "uniform counts with w types"),
    }
}

fn avg_bytes(b: &[Blk]) -> usize {
    if b.is_empty() {
        0
    } else {
        b.iter().map(|x| x.bytes()).sum::<usize>() / b.len()
    }
}

fn all_equal(b: &[Blk]) -> Option<usize> {
    let first = b.first()?.bytes();
    b.iter().all(|x| x.bytes() == first).then_some(first)
}

/// The input of a reduction whose every process has `count` elements in and out: the send
/// buffer, or the receive buffer with MPI_IN_PLACE; both checked.
fn red_input(sbuf: *const u8, rbuf: *mut u8, count: usize, d: &Datatype) -> Result<*const u8> {
    let input = if in_place(sbuf) {
        rbuf as *const u8
    } else {
        no_alias(sbuf, rbuf, count * d.size)?;
        sbuf
    };
    check_buf(input, count, d, "send buffer")?;
    check_buf(rbuf, count, d, "receive buffer")?;
    Ok(input)
}

/// A process's own block of a collective (`what`: "send" or "recv"), checked.
fn own_blk(e: &Engine, buf: *const u8, count: i64, dt: DtypeId, what: &str) -> Result<Blk> {
    let c = count_of(count, Name(what, "count"))?;
    let d = e.coll_dtype(dt)?;
    check_buf(buf, c, &d, Name(what, " buffer"))?;
    Ok(Blk::new(buf, c, &d))
}

/// The checked buffers of a gather or scatter: every process's own block (None with
/// MPI_IN_PLACE at the root) and, at the root, one block per process. Gather and scatter are
/// mirror images, so one check serves both: `own` is the send side of a gather and the
/// receive side of a scatter, `many` the other.
struct Rooted {
    own: Option<Blk>,
    many: Vec<Blk>,
    /// Bytes of every block when they are all equal.
    blk: Option<usize>,
}

impl Rooted {
    fn check(
        e: &Engine,
        (obuf, ocount, odt): (*const u8, i64, DtypeId),
        (mbuf, mcounts, mdt): (*const u8, &Counts, DtypeId),
        me: usize,
        root: usize,
        n: usize,
        [oname, mname]: [&str; 2],
    ) -> Result<Rooted> {
        let ip = in_place(obuf);
        if ip && me != root {
            return err!(Buffer, "MPI_IN_PLACE is only valid at the root");
        }
        let own = if ip {
            None
        } else {
            Some(own_blk(e, obuf, ocount, odt, oname)?)
        };
        let many = if me == root {
            let b = blocks(
                e,
                mbuf,
                mcounts,
                &Types::One(mdt),
                n,
                Name(mname, " buffer"),
            )?;
            if let Some(o) = &own {
                no_alias(o.ptr, mbuf, o.bytes())?;
            }
            b
        } else {
            Vec::new()
        };
        let blk = match &own {
            Some(o) if me != root => Some(o.bytes()),
            _ => all_equal(&many),
        };
        Ok(Rooted { own, many, blk })
    }

    /// Bytes per block, for the decision table.
    fn bytes(&self) -> usize {
        self.blk.unwrap_or_else(|| avg_bytes(&self.many))
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// A blocking collective.
///
/// # Safety
/// The buffers follow MPI's rules for the collective.
pub unsafe fn blocking(comm: CommId, a: &Args) -> Result<()> {
    Engine::collective_mark(comm, matches!(a, Args::Barrier))?;
    let shm = match with(|e| e.coll_shm_route(comm, a))? {
        Some(ShmVia::Shm) => shm::try_blocking(comm, a),
        Some(ShmVia::Hier) => shm::hier::try_blocking(comm, a),
        None => None,
    };
    if let Some(r) = shm {
        return r;
    }
    if let Some(r) = fast::try_blocking(comm, a) {
        return r;
    }
    let mut s = with(|e| build::build(e, comm, a))??;
    sched::run(&mut s)
}

/// A nonblocking collective: its request slot.
///
/// # Safety
/// The buffers follow MPI's rules and stay valid until the request completes.
pub unsafe fn start(comm: CommId, a: &Args) -> Result<ReqId> {
    with(|e| {
        let s = e.build_nonblocking(comm, a)?;
        Ok(e.coll_register(comm, s, false))
    })?
}

/// A persistent collective (MPI_X_init): an inactive request that MPI_Start runs.
///
/// # Safety
/// The buffers follow MPI's rules and stay valid until the request is freed.
pub unsafe fn init(comm: CommId, a: &Args) -> Result<ReqId> {
    with(|e| {
        let s = e.build_nonblocking(comm, a)?;
        Ok(e.coll_register(comm, s, true))
    })?
}

/// MPI_Barrier.
pub fn barrier(comm: CommId) -> Result<()> {
    // SAFETY: a barrier has no buffers.
    unsafe { blocking(comm, &Args::Barrier) }
}

/// MPI_Bcast.
///
/// # Safety
/// `buf` holds `count` elements of the datatype.
pub unsafe fn bcast(buf: *mut u8, count: i64, dt: DtypeId, root: i32, comm: CommId) -> Result<()> {
    blocking(
        comm,
        &Args::Bcast {
            buf,
            count,
            dt,
            root,
        },
    )
}

/// MPI_Allreduce.
///
/// # Safety
/// The buffers hold `count` elements of the datatype.
pub unsafe fn allreduce(
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    comm: CommId,
) -> Result<()> {
    blocking(
        comm,
        &Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        },
    )
}

/// MPI_Reduce_local: `inout = in op inout`.
///
/// # Safety
/// Both buffers hold `count` elements of the datatype.
pub unsafe fn reduce_local(
    inbuf: *const u8,
    inout: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
) -> Result<()> {
    let count = count_of(count, "count")?;
    let red = with(|e| e.coll_reducer(op, dt))??;
    if in_place(inbuf) || in_place(inout) {
        return err!(Buffer, "MPI_IN_PLACE is not valid in MPI_Reduce_local");
    }
    check_buf(inbuf, count, &red.dt, "input buffer")?;
    check_buf(inout, count, &red.dt, "inout buffer")?;
    no_alias(inbuf, inout, count * red.dt.size)?;
    if count == 0 {
        return Ok(());
    }
    if red.is_user() {
        // Outside the engine: the function may call MPI.
        red.call_user(inbuf, inout, count);
    } else {
        red.apply(inbuf, inout, inout, count);
    }
    Ok(())
}

/// MPI_Op_create / MPI_Op_create_c: the new operation's engine id.
pub fn op_create(func: usize, big: bool, commute: bool) -> Result<u32> {
    with(|e| {
        let o = Some(Op::User { func, big, commute });
        let ops = &mut e.coll.ops;
        match ops
            .iter()
            .skip(op::NPREDEFINED as usize)
            .position(|x| x.is_none())
        {
            Some(i) => {
                let id = i + op::NPREDEFINED as usize;
                ops[id] = o;
                id as u32
            }
            None => {
                ops.push(o);
                (ops.len() - 1) as u32
            }
        }
    })
}

/// MPI_Op_free.
pub fn op_free(id: u32) -> Result<()> {
    with(|e| {
        if id < op::NPREDEFINED {
            return err!(Op, "predefined operations cannot be freed");
        }
        match e.coll.ops.get_mut(id as usize) {
            Some(o @ Some(_)) => {
                *o = None;
                Ok(())
            }
            _ => err!(Op, "invalid reduction operation (MPI_OP_NULL or freed)"),
        }
    })?
}

/// MPI_Op_commutative.
pub fn op_commutative(id: u32) -> Result<bool> {
    with(|e| e.coll_op(id).map(|o| o.commutative()))?
}

/// What the C layer needs to know to read a collective's array arguments: our rank, the size
/// of the local group, and of the remote group for an intercommunicator.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub rank: usize,
    pub size: usize,
    pub remote: Option<usize>,
}

/// In- and out-degree of a communicator's process topology (neighbourhood collectives).
pub fn neighbor_degrees(comm: CommId) -> Result<(usize, usize)> {
    with(|e| inter::neighbors(e, comm).map(|(s, d)| (s.len(), d.len())))?
}

pub fn shape(comm: CommId) -> Result<Shape> {
    with(|e| {
        let c = e.comm(comm)?;
        Ok(Shape {
            rank: c.rank as usize,
            size: c.size(),
            remote: c.remote.as_ref().map(|r| r.len()),
        })
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_shorter_than_the_arguments_make_is_an_error() {
        let st = |bytes| Status {
            source: 2,
            tag: 0,
            error: None,
            bytes,
            cancelled: false,
        };
        assert!(short_message(&st(40), 40).is_none());
        assert!(short_message(&st(0), 0).is_none());
        let e = short_message(&st(4), 40).expect("short");
        assert_eq!(e.class, crate::error::ErrorClass::Truncate);
        assert!(
            e.msg
                .contains("rank 2 of the communicator sends 4 bytes where this rank expects 40"),
            "{}",
            e.msg
        );
        // A receive that failed already keeps its own error; a cancelled one is no message.
        let mut failed = st(0);
        failed.error = Some(Box::new(crate::mpi_error!(Other, "lost")));
        assert!(short_message(&failed, 40).is_none());
        let mut cancelled = st(0);
        cancelled.cancelled = true;
        assert!(short_message(&cancelled, 40).is_none());
    }

    #[test]
    fn a_later_call_or_the_region_mapping_passes_a_waiting_receive_over() {
        let t = 41;
        assert_eq!(passes_over(t, 42), Some(Over::Later));
        assert_eq!(passes_over(t, 41 + 1000), Some(Over::Later));
        assert_eq!(
            passes_over(SEQ_MASK, 0),
            Some(Over::Later),
            "the sequence wraps"
        );
        assert_eq!(passes_over(t, 41), None, "this call's own messages");
        assert_eq!(passes_over(t, 40), None, "an earlier call's");
        assert_eq!(
            passes_over(t, 42 | NB_BIT),
            None,
            "nonblocking calls count apart"
        );
        assert_eq!(
            passes_over(t | LOCAL_BIT, 42),
            None,
            "the other group's traffic"
        );
        assert_eq!(
            passes_over(subtag(t, 3), subtag(42, 5)),
            None,
            "other sub-tags"
        );
        assert_eq!(passes_over(t, setup_tag(41, 0)), Some(Over::Mapping));
        assert_eq!(passes_over(t, setup_tag(41, 1)), Some(Over::Mapping));
        assert_eq!(
            passes_over(t, setup_tag(40, 0)),
            None,
            "an earlier call's mapping"
        );
        assert_eq!(
            passes_over(t, setup_tag(42, 0)),
            Some(Over::Later),
            "a later call's mapping"
        );
        assert_eq!(
            passes_over(subtag(t, 3), setup_tag(43, 1)),
            Some(Over::Later)
        );
        assert_eq!(
            passes_over(t | LOCAL_BIT, setup_tag(41, 0)),
            None,
            "intercommunicators"
        );
        assert!(is_setup(setup_tag(7, 1)));
        assert!(!is_setup(subtag(41, 62)) && !is_setup(41 | LOCAL_BIT));
    }
}
