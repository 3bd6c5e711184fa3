//! Communicator management (MPI-4.0 sections 7.4-7.6, 8.5): every operation that creates a
//! communicator — dup, idup, split, split_type, create, create_group, Intercomm_create, merge,
//! the topology constructors — is one *agreement* between the processes involved, run as a
//! state machine advanced by the progress engine. Blocking calls start one and wait for it;
//! MPI_Comm_idup returns a request that completes when it is done (no thread).
//!
//! # Context ids
//!
//! Every process keeps a bit set of free context-id blocks ([`CtxPool`], [`CTX_BLOCKS`] of
//! them; a block is the four context ids of one communicator, see `mpi::comm`). An agreement
//! reduces the bit sets of its participants with AND and takes the lowest common free block,
//! so every member of the new communicator gets the same block and no process ever has two
//! live communicators with the same block. Disjoint results of one operation (the colors of a
//! split) share the block, which is safe because no process belongs to two of them.
//!
//! Several agreements can be in flight in one process (MPI_Comm_idup, or threads). An
//! agreement may only offer the process's free bits while it *owns* the pool; otherwise it
//! offers nothing and the round yields no common block: everyone sees that (the AND of
//! "owned" flags is false) and tries again. A process gives ownership only to an agreement
//! that every participant has *joined* (it has completed a round), and among those to the one
//! with the smallest key (parent context id, operation number); keys order agreements the
//! same way in every process, so the globally smallest joined agreement gets the pool
//! everywhere within one round of the others' and always finishes: no livelock. An agreement
//! not joined yet must not hold the pool: its round waits for a process whose thread may be
//! inside another agreement that needs this very pool (threads of two processes creating
//! communicators in different orders) — a deadlock. A first round therefore offers only the
//! *eager* part of the partition (its first words), which one agreement at a time may offer
//! without any other condition; most creations end there, in one round. When every
//! participant owned its pool and its eager part and still no block is common, the context
//! ids are exhausted: the operation fails with an error.
//!
//! Blocking and nonblocking agreements draw from two disjoint partitions of the blocks, each
//! with its own owner. Otherwise an MPI_Comm_idup whose round waits for a process that is
//! still inside a blocking MPI_Comm_dup on another communicator (a valid program: nonblocking
//! collectives never block) would hold the pool that this very dup needs: a deadlock. With
//! the partitions, blocking agreements never wait for nonblocking ones.
//!
//! # One round
//!
//! 1. *Exchange* among the local participants (recursive doubling, with the usual fold for
//!    sizes that are not powers of two): the AND of the bit sets and of the "owned" flags, and
//!    in the first round the union of what the operation gathers (colors and keys of a split).
//! 2. Intercommunicator operations only: the two *leaders* swap their side's result (and their
//!    side's group where the other side needs it) and broadcast the other side's to their group
//!    (binomial tree).
//! 3. *Decide*: every participant computes the same outcome from the same data: a block (and
//!    builds its new communicator, or MPI_COMM_NULL), a retry, or exhaustion.
//!
//! Messages travel in the parent communicator's management context (`ctx + 2`) with the
//! operation's number as the tag, or in the tagged context (`ctx + 3`) with the user's tag
//! (MPI_Comm_create_group, the leaders of MPI_Intercomm_create). A message's source is the
//! sender's rank in the parent communicator (`Party::srcs`), which names one process in every
//! operation of that context; an index into the operation's group would not, for groups that
//! differ from call to call under one tag. Between two processes the
//! messages of one operation are always consumed in the order they were sent, so one tag per
//! operation is enough; every message still carries its kind and round, which are checked.

use crate::err;
use crate::error::{ErrorClass, MpiError, Result};
use crate::ids::{CommId, ContextId, ReqId};
use crate::mpi::comm::{
    Comm, Errhandler, COMM_WORLD, CTX_FROM_GROUP, CTX_RESERVED_BLOCKS, CTX_STRIDE,
};
use crate::mpi::engine::Engine;
use crate::mpi::global::{self, with};
use crate::mpi::group::UNDEFINED;
use crate::mpi::request::{Kind, Request};
use crate::mpi::topo::{cart_coords, Topology};
use crate::proto::frame::Envelope;
use crate::transport::Gpid;

/// Words of the context-id bit set.
pub const CTX_WORDS: usize = 64;
/// Context-id blocks (communicators that can exist at once in a process, predefined and
/// reserved ones included).
pub const CTX_BLOCKS: usize = CTX_WORDS * 64;
/// Words (from here to the end) of the partition that nonblocking agreements use.
const NB_FIRST_WORD: usize = 48;

/// Words of each partition's eager part (at its start): blocks a first round offers without
/// owning the pool (see the module doc).
const EAGER_WORDS: [usize; 2] = [8, 2];

/// The blocks an agreement may take: the nonblocking partition or the rest; `eager` selects
/// the partition's eager part, else the part offered by the pool's owner.
fn partition(nonblocking: bool, eager: bool) -> [u64; CTX_WORDS] {
    let (lo, hi) = if nonblocking {
        (NB_FIRST_WORD, CTX_WORDS)
    } else {
        (0, NB_FIRST_WORD)
    };
    let split = lo + EAGER_WORDS[nonblocking as usize];
    let (lo, hi) = if eager { (lo, split) } else { (split, hi) };
    let mut m = [0u64; CTX_WORDS];
    for w in &mut m[lo..hi] {
        *w = !0;
    }
    m
}

/// Tag bit that marks the local phase of an intercommunicator operation (the leaders' messages
/// use the same context without it).
const LOCAL_BIT: i32 = 1 << 30;
const TAG_MASK: i32 = LOCAL_BIT - 1;

/// The free context-id blocks of this process.
#[derive(Debug, Clone)]
pub struct CtxPool {
    free: [u64; CTX_WORDS],
    /// The agreement that currently offers the free bits of the blocking (0) and the
    /// nonblocking (1) partition.
    owner: [Option<u32>; 2],
    /// The agreement that currently offers the free bits of the eager part of each.
    eager_owner: [Option<u32>; 2],
}

fn reserved_mask() -> [u64; CTX_WORDS] {
    let mut m = [0u64; CTX_WORDS];
    for b in 0..CTX_RESERVED_BLOCKS as usize {
        m[b / 64] |= 1 << (b % 64);
    }
    m
}

impl Default for CtxPool {
    fn default() -> Self {
        let r = reserved_mask();
        let mut free = [!0u64; CTX_WORDS];
        for (f, r) in free.iter_mut().zip(r) {
            *f &= !r;
        }
        CtxPool {
            free,
            owner: [None; 2],
            eager_owner: [None; 2],
        }
    }
}

impl CtxPool {
    /// Return the block of context id `ctx` (MPI_Comm_free).
    pub fn release(&mut self, ctx: ContextId) {
        let b = (ctx.get() / CTX_STRIDE) as usize;
        if b >= CTX_RESERVED_BLOCKS as usize && b < CTX_BLOCKS {
            self.free[b / 64] |= 1 << (b % 64);
        }
    }

    /// Take a block that the agreement found free here. False: it was not free (a bug).
    fn claim(&mut self, b: usize) -> bool {
        let bit = 1u64 << (b % 64);
        if self.free[b / 64] & bit == 0 {
            return false;
        }
        self.free[b / 64] &= !bit;
        true
    }

    /// Blocks in use (communicators alive in this process, including the predefined ones).
    pub fn used(&self) -> usize {
        CTX_BLOCKS
            - self
                .free
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
    }
}

/// Lowest set bit of a bit set.
fn lowest(mask: &[u64]) -> Option<usize> {
    mask.iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
}

// ---------------------------------------------------------------------------------------------
// What one participant contributes, and the wire format

/// One participant's (color, key) in a split; `idx` is its index among the local
/// participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub idx: u32,
    pub color: i32,
    pub key: i32,
}

/// The reduced data of a set of participants.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Contrib {
    mask: Vec<u64>,
    owned: bool,
    entries: Vec<Entry>,
}

impl Contrib {
    fn merge(&mut self, o: Contrib) {
        for (a, b) in self.mask.iter_mut().zip(o.mask) {
            *a &= b;
        }
        self.owned &= o.owned;
        self.entries.extend(o.entries);
    }
}

/// The other side of an intercommunicator operation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Remote {
    contrib: Contrib,
    /// The group the other side sends (its whole group, or its group argument).
    group: Vec<Gpid>,
    /// The other leader's flag (MPI_Intercomm_merge's `high`).
    flag: i32,
    /// Our leader lost its connection to the other side before that side's data came: the
    /// broadcast carries only this, and every member fails the operation.
    lost: bool,
}

const MSG_EXCHANGE: u32 = 1;
const MSG_LINK: u32 = 2;
const MSG_BCAST: u32 = 3;

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.0.len() < n {
            return err!(Intern, "malformed communicator-management message (short)");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(self.u32()? as i32)
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn count(&mut self, limit: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n > limit {
            return err!(
                Intern,
                "malformed communicator-management message (count {n})"
            );
        }
        Ok(n)
    }
}

fn header(w: &mut Writer, kind: u32, round: u32) {
    w.u32(kind << 24 | (round & 0xff_ffff));
}

fn check_header(r: &mut Reader, kind: u32, round: u32) -> Result<()> {
    let h = r.u32()?;
    if h != kind << 24 | (round & 0xff_ffff) {
        return err!(
            Intern,
            "communicator-management messages out of step (got {h:#x}, expected kind {kind} round {round})"
        );
    }
    Ok(())
}

fn put_contrib(w: &mut Writer, c: &Contrib) {
    w.u32(c.owned as u32);
    for m in &c.mask {
        w.0.extend_from_slice(&m.to_le_bytes());
    }
    w.u32(c.entries.len() as u32);
    for e in &c.entries {
        w.u32(e.idx);
        w.i32(e.color);
        w.i32(e.key);
    }
}

fn get_contrib(r: &mut Reader, limit: usize) -> Result<Contrib> {
    let owned = r.u32()? != 0;
    let mask = (0..CTX_WORDS)
        .map(|_| r.u64())
        .collect::<Result<Vec<_>>>()?;
    let n = r.count(limit)?;
    let entries = (0..n)
        .map(|_| {
            Ok(Entry {
                idx: r.u32()?,
                color: r.i32()?,
                key: r.i32()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Contrib {
        mask,
        owned,
        entries,
    })
}

fn put_remote(w: &mut Writer, c: &Contrib, group: &[Gpid], flag: i32, lost: bool) {
    put_contrib(w, c);
    w.i32(flag);
    w.u32(u32::from(lost));
    w.u32(group.len() as u32);
    for g in group {
        w.u32(g.get());
    }
}

fn get_remote(r: &mut Reader, limit: usize) -> Result<Remote> {
    let contrib = get_contrib(r, limit)?;
    let flag = r.i32()?;
    let lost = r.u32()? != 0;
    let n = r.count(limit)?;
    let group = (0..n)
        .map(|_| r.u32().map(Gpid::new))
        .collect::<Result<Vec<_>>>()?;
    Ok(Remote {
        contrib,
        group,
        flag,
        lost,
    })
}

// ---------------------------------------------------------------------------------------------
// Operations

/// What an agreement builds when it has its context id.
#[derive(Debug, Clone)]
pub enum Build {
    /// MPI_Comm_dup(_with_info), MPI_Comm_idup: same groups; info replaces the parent's
    /// hints when given.
    Dup { info: Option<Vec<(String, String)>> },
    /// MPI_Comm_split (intra or inter), split_type, Cart/Graph create and Cart_sub.
    Split { color: i32, key: i32 },
    /// MPI_Comm_create: the new (local) group; this process may not be in it.
    Create { group: Vec<Gpid> },
    /// MPI_Comm_create_group / create_from_group: the participants are the group.
    Group,
    /// MPI_Intercomm_create(_from_groups): the participants are the local group, the other
    /// side's leader sends the remote group.
    Intercomm,
    /// MPI_Intercomm_merge.
    Merge { high: bool },
}

/// Where the participants of an operation are and how their messages are labelled.
#[derive(Debug, Clone)]
struct Party {
    members: Vec<Gpid>,
    me: usize,
    ctx: ContextId,
    tag: i32,
    /// The envelope's source of each member, when it is not the member's index: matching
    /// compares (context, source, tag) only, so the source must name the same process in
    /// every operation that shares a context and tag. MPI_Comm_create_group's parties are
    /// any subsets of the parent with the user's tag: member 2 of one group and member 2 of
    /// the next are different processes, and a process still in the first call took the
    /// second call's message (MPICH's comm/comm_group_rand hung). Their sources are the
    /// members' ranks in the parent communicator.
    srcs: Option<Vec<i32>>,
}

impl Party {
    /// The envelope source of member `j`'s messages.
    fn src(&self, j: usize) -> i32 {
        self.srcs.as_ref().map_or(j as i32, |s| s[j])
    }
}

/// The leaders' connection of an intercommunicator operation (at the leader only).
#[derive(Debug, Clone)]
struct Link {
    peer: Gpid,
    ctx: ContextId,
    tag: i32,
    my_src: i32,
    peer_src: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Send the current local result to participant i.
    XSend(usize),
    /// Receive participant i's partial result: merge it, or take it as the final one.
    XRecv(usize, bool),
    LinkSend,
    LinkRecv,
    /// Forward the other side's data to participant i.
    BSend(usize),
    BRecv(usize),
}

/// A communicator-creating operation in flight.
pub struct Op {
    key: Key,
    needs_id: bool,
    party: Party,
    /// The intercommunicator phases run (link at the leader, broadcast from it).
    inter: bool,
    leader: usize,
    link: Option<Link>,
    /// What this side sends the other one: its group (when the other side needs it).
    link_group: Vec<Gpid>,
    flag: i32,
    build: Build,
    /// The parent communicator as it was when the operation started.
    base: Option<Comm>,
    errhandler: u32,
    /// Topology for the new communicator (Cartesian coordinates are filled from its rank).
    attach: Option<Topology>,
    round: u32,
    started: bool,
    steps: Vec<Step>,
    at: usize,
    owns: bool,
    /// It offers the free bits of the eager part this round.
    owns_eager: bool,
    contrib: Contrib,
    remote: Option<Remote>,
    /// The leader's link broke (see [`Remote::lost`]): the error it ends with.
    lost: Option<MpiError>,
    /// First-round data (entries of both sides, the other side's group and flag).
    gathered: Option<(Vec<Entry>, Option<Remote>)>,
    recv: Option<(ReqId, Box<[u8]>)>,
    sends: Vec<(ReqId, Box<[u8]>)>,
    /// Largest message this operation can receive.
    cap: usize,
    outcome: Option<Result<Option<CommId>>>,
    /// MPI_Comm_idup: the user's request, and the communicator slot reserved for the result.
    pub request: Option<ReqId>,
    pub target: Option<CommId>,
}

/// Priority of an agreement for the context-id pool: blocking operations first (a blocking call
/// stops its process until it finishes, so it must never wait behind a nonblocking one that
/// the same process has not started elsewhere), then the parent's context id and the
/// operation's number. Every participant computes the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    nonblocking: bool,
    ctx: ContextId,
    seq: u32,
}

/// Every communicator-management operation of the process.
#[derive(Default)]
pub struct CommMgr {
    pub ctx: CtxPool,
    ops: Vec<Option<Box<Op>>>,
    /// Keys of the operations still running that need a context id (the ownership rule), and
    /// whether every participant has joined them (a round has completed).
    pending: Vec<(u32, Key, bool)>,
    /// Operations still being advanced by progress.
    pub live: usize,
    /// Communicators freed while in use and not released yet.
    pub deferred: usize,
}

/// How to start an operation (built by the `Engine::op_*` constructors).
pub struct OpSpec {
    key: Key,
    needs_id: bool,
    party: Party,
    inter: bool,
    leader: usize,
    link: Option<Link>,
    link_group: Vec<Gpid>,
    flag: i32,
    build: Build,
    base: Option<Comm>,
    errhandler: u32,
    attach: Option<Topology>,
    first: Vec<Entry>,
}

impl OpSpec {
    /// Mark the operation nonblocking (MPI_Comm_idup): it yields the pool to blocking ones.
    pub fn nonblocking(mut self) -> OpSpec {
        self.key.nonblocking = true;
        self
    }

    /// Attach a topology to the communicator this operation creates.
    pub fn with_topology(mut self, t: Topology) -> OpSpec {
        self.attach = Some(t);
        self
    }
}

/// Steps of one recursive-doubling exchange among `n` participants, for participant `me`.
fn exchange_steps(n: usize, me: usize, out: &mut Vec<Step>) {
    if n <= 1 {
        return;
    }
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p;
    if me >= p {
        out.push(Step::XSend(me - p));
        out.push(Step::XRecv(me - p, true));
        return;
    }
    if me < rem {
        out.push(Step::XRecv(me + p, false));
    }
    let mut mask = 1;
    while mask < p {
        out.push(Step::XSend(me ^ mask));
        out.push(Step::XRecv(me ^ mask, false));
        mask <<= 1;
    }
    if me < rem {
        out.push(Step::XSend(me + p));
    }
}

/// Steps of a binomial broadcast from `root` among `n` participants, for participant `me`.
fn bcast_steps(n: usize, me: usize, root: usize, out: &mut Vec<Step>) {
    let v = (me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            out.push(Step::BRecv((v - mask + root) % n));
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if v + mask < n {
            out.push(Step::BSend((v + mask + root) % n));
        }
        mask >>= 1;
    }
}

fn internal(e: MpiError) -> MpiError {
    MpiError::new(e.class, format!("communicator creation: {}", e.msg))
}

impl Engine {
    // -----------------------------------------------------------------------------------------
    // Starting operations: argument checks, the participants, the first contribution

    /// Number the next management operation of communicator `id`.
    fn next_seq(&mut self, id: CommId) -> Result<u32> {
        let c = self.comm_mut(id)?;
        let s = c.mgmt_seq;
        c.mgmt_seq = s.wrapping_add(1);
        Ok(s)
    }

    pub fn comm_mut(&mut self, id: CommId) -> Result<&mut Comm> {
        match self.comms.get_mut(id.idx()) {
            Some(Some(c)) => Ok(c),
            _ => err!(Comm, "invalid communicator"),
        }
    }

    /// [`Engine::live_comm`], to change.
    pub fn live_comm_mut(&mut self, id: CommId) -> Result<&mut Comm> {
        self.live_comm(id)?;
        self.comm_mut(id)
    }

    /// The error handler that errors raised on communicator `id` go to: its own, or
    /// MPI_COMM_WORLD's when `id` names no communicator (MPI-4.1 9.3); fatal when neither
    /// names a live handler.
    pub fn errhandler_for(&self, id: Option<CommId>) -> Errhandler {
        let c = id
            .and_then(|id| self.comms.get(id.idx()))
            .and_then(|c| c.as_ref())
            .or_else(|| {
                self.comms
                    .get(crate::mpi::comm::COMM_WORLD.idx())
                    .and_then(|c| c.as_ref())
            });
        let h = c.map_or(0, |c| c.errhandler);
        self.errhandlers
            .get(h as usize)
            .copied()
            .flatten()
            .unwrap_or(Errhandler::Fatal)
    }

    /// MPI_Comm_set_errhandler: `h` must name a live error handler.
    pub fn set_comm_errhandler(&mut self, id: CommId, h: u32) -> Result<()> {
        if !self
            .errhandlers
            .get(h as usize)
            .is_some_and(|x| x.is_some())
        {
            return err!(Arg, "invalid error handler");
        }
        self.comm_mut(id)?.errhandler = h;
        Ok(())
    }

    /// A usable communicator (not one MPI_Comm_idup is still creating).
    pub fn live_comm(&self, id: CommId) -> Result<&Comm> {
        let c = self.comm(id)?;
        if c.freed {
            return err!(Comm, "invalid communicator (already freed)");
        }
        if c.pending {
            return err!(
                Comm,
                "the communicator is still being created by MPI_Comm_idup (wait for its request first)"
            );
        }
        Ok(c)
    }

    /// The participants and link of an operation collective over communicator `id`.
    fn spec_over(&mut self, id: CommId, build: Build, first: Vec<Entry>) -> Result<OpSpec> {
        let seq = self.next_seq(id)?;
        let c = self.live_comm(id)?;
        let tag = (seq as i32) & TAG_MASK;
        let inter = c.is_inter();
        let party = Party {
            members: c.group.clone(),
            me: c.rank as usize,
            ctx: c.mgmt_ctx(),
            tag: if inter { tag | LOCAL_BIT } else { tag },
            srcs: None,
        };
        let link = (inter && c.rank == 0).then(|| Link {
            peer: c.peers()[0],
            ctx: c.mgmt_ctx(),
            tag,
            my_src: 0,
            peer_src: 0,
        });
        let needs_id = match &build {
            Build::Split { color, .. } => *color != UNDEFINED,
            Build::Create { group } => group.contains(&(self.me)),
            _ => true,
        };
        let link_group = match &build {
            Build::Create { group } if inter => group.clone(),
            _ => Vec::new(),
        };
        let flag = match &build {
            Build::Merge { high } => *high as i32,
            _ => 0,
        };
        Ok(OpSpec {
            key: Key {
                nonblocking: false,
                ctx: c.ctx,
                seq,
            },
            needs_id,
            party,
            inter,
            leader: 0,
            link,
            link_group,
            flag,
            build,
            errhandler: c.errhandler,
            base: Some(c.clone()),
            attach: None,
            first,
        })
    }

    /// MPI_Comm_dup / dup_with_info / idup.
    pub fn op_dup(&mut self, comm: CommId, info: Option<Vec<(String, String)>>) -> Result<OpSpec> {
        self.spec_over(comm, Build::Dup { info }, Vec::new())
    }

    /// MPI_Comm_split (intra- and intercommunicators).
    pub fn op_split(&mut self, comm: CommId, color: i32, key: i32) -> Result<OpSpec> {
        if color < 0 && color != UNDEFINED {
            return err!(
                Arg,
                "color {color} is invalid (must be non-negative or MPI_UNDEFINED)"
            );
        }
        let me = self.live_comm(comm)?.rank as u32;
        let first = if color == UNDEFINED {
            Vec::new()
        } else {
            vec![Entry {
                idx: me,
                color,
                key,
            }]
        };
        self.spec_over(comm, Build::Split { color, key }, first)
    }

    /// MPI_Comm_create: `group` must be a subset of the (local) group of `comm`.
    pub fn op_create(&mut self, comm: CommId, group: Vec<Gpid>) -> Result<OpSpec> {
        let c = self.live_comm(comm)?;
        if let Some(p) = group.iter().find(|p| !c.group.contains(p)) {
            return err!(
                Group,
                "the group contains process {p}, which is not in the communicator's group"
            );
        }
        self.spec_over(comm, Build::Create { group }, Vec::new())
    }

    /// MPI_Intercomm_merge.
    pub fn op_merge(&mut self, comm: CommId, high: bool) -> Result<OpSpec> {
        if !self.live_comm(comm)?.is_inter() {
            return err!(Comm, "MPI_Intercomm_merge needs an intercommunicator");
        }
        self.spec_over(comm, Build::Merge { high }, Vec::new())
    }

    /// MPI_Comm_create_group: collective over `group` only, messages in `comm`'s tagged context
    /// with the user's tag.
    pub fn op_create_group(&mut self, comm: CommId, group: Vec<Gpid>, tag: i32) -> Result<OpSpec> {
        let c = self.live_comm(comm)?;
        if c.is_inter() {
            return err!(Comm, "MPI_Comm_create_group needs an intracommunicator");
        }
        if tag < 0 {
            return err!(Tag, "tag {tag} is invalid (must be non-negative)");
        }
        if let Some(p) = group.iter().find(|p| !c.group.contains(p)) {
            return err!(
                Group,
                "the group contains process {p}, which is not in the communicator's group"
            );
        }
        let me = self.me;
        let Some(idx) = group.iter().position(|&p| p == me) else {
            return err!(
                Group,
                "the calling process is not in the group (only its members call MPI_Comm_create_group)"
            );
        };
        Ok(OpSpec {
            key: Key {
                nonblocking: false,
                ctx: c.ctx,
                seq: (tag as u32) | 1 << 31,
            },
            needs_id: true,
            party: Party {
                srcs: Some(
                    group
                        .iter()
                        .map(|p| c.group.iter().position(|q| q == p).unwrap_or(0) as i32)
                        .collect(),
                ),
                members: group,
                me: idx,
                ctx: c.tagged_ctx(),
                tag,
            },
            inter: false,
            leader: 0,
            link: None,
            link_group: Vec::new(),
            flag: 0,
            build: Build::Group,
            errhandler: c.errhandler,
            base: Some(c.clone()),
            attach: None,
            first: Vec::new(),
        })
    }

    /// MPI_Comm_create_from_group: like create_group, without a parent communicator (the
    /// string tag is hashed into the tag of a context reserved for this).
    pub fn op_from_group(
        &mut self,
        group: Vec<Gpid>,
        stringtag: &str,
        errhandler: u32,
    ) -> Result<OpSpec> {
        let me = self.me;
        let Some(idx) = group.iter().position(|&p| p == me) else {
            return err!(Group, "the calling process is not in the group");
        };
        let tag = hash_tag(stringtag);
        Ok(OpSpec {
            key: Key {
                nonblocking: false,
                ctx: CTX_FROM_GROUP,
                seq: tag as u32,
            },
            needs_id: true,
            // No parent communicator whose ranks could name the members in every process
            // alike (a group may mix jobs, whose processes each job names its own way): the
            // index in the group, as MPI_Comm_create_from_group with the same string tag and
            // overlapping groups at once is for the application to avoid.
            party: Party {
                members: group,
                me: idx,
                ctx: CTX_FROM_GROUP.offset(2),
                tag,
                srcs: None,
            },
            inter: false,
            leader: 0,
            link: None,
            link_group: Vec::new(),
            flag: 0,
            build: Build::Group,
            errhandler,
            base: None,
            attach: None,
            first: Vec::new(),
        })
    }

    /// MPI_Intercomm_create. `peer` (peer_comm, remote_leader) is only used by the leader.
    pub fn op_intercomm(
        &mut self,
        local: CommId,
        leader: i32,
        peer: Option<(CommId, i32)>,
        tag: i32,
    ) -> Result<OpSpec> {
        let c = self.live_comm(local)?;
        if c.is_inter() {
            return err!(Comm, "the local communicator must be an intracommunicator");
        }
        if leader < 0 || leader as usize >= c.size() {
            return err!(
                Rank,
                "local leader {leader} is out of range for a communicator of size {}",
                c.size()
            );
        }
        if tag < 0 {
            return err!(Tag, "tag {tag} is invalid (must be non-negative)");
        }
        let link = if c.rank == leader {
            let Some((pc, rl)) = peer else {
                return err!(Comm, "the local leader needs a valid peer communicator");
            };
            let p = self.live_comm(pc)?;
            let Some(&peer_gpid) = p.peers().get(rl as usize).filter(|_| rl >= 0) else {
                return err!(
                    Rank,
                    "remote leader {rl} is out of range for the peer communicator of size {}",
                    p.peers().len()
                );
            };
            if c.group.contains(&peer_gpid) {
                return err!(
                    Rank,
                    "the remote leader (rank {rl} of the peer communicator) is in the local group"
                );
            }
            Some(Link {
                peer: peer_gpid,
                ctx: p.tagged_ctx(),
                tag,
                my_src: p.rank,
                peer_src: rl,
            })
        } else {
            None
        };
        let mut s = self.spec_over(local, Build::Intercomm, Vec::new())?;
        s.inter = true;
        s.leader = leader as usize;
        s.link = link;
        s.link_group = s.party.members.clone();
        Ok(s)
    }

    /// MPI_Intercomm_create_from_groups.
    pub fn op_intercomm_from_groups(
        &mut self,
        local: Vec<Gpid>,
        local_leader: i32,
        remote: Vec<Gpid>,
        remote_leader: i32,
        stringtag: &str,
        errhandler: u32,
    ) -> Result<OpSpec> {
        let me = self.me;
        let Some(idx) = local.iter().position(|&p| p == me) else {
            return err!(Group, "the calling process is not in the local group");
        };
        if local_leader < 0 || local_leader as usize >= local.len() {
            return err!(
                Rank,
                "local leader {local_leader} is out of range for the local group of size {}",
                local.len()
            );
        }
        let Some(&peer) = remote
            .get(remote_leader as usize)
            .filter(|_| remote_leader >= 0)
        else {
            return err!(
                Rank,
                "remote leader {remote_leader} is out of range for the remote group of size {}",
                remote.len()
            );
        };
        if local.iter().any(|p| remote.contains(p)) {
            return err!(Group, "the local and remote groups overlap");
        }
        let tag = hash_tag(stringtag);
        Ok(OpSpec {
            key: Key {
                nonblocking: false,
                ctx: CTX_FROM_GROUP,
                seq: tag as u32,
            },
            needs_id: true,
            party: Party {
                members: local.clone(),
                me: idx,
                ctx: CTX_FROM_GROUP.offset(2),
                tag: tag | LOCAL_BIT,
                srcs: None,
            },
            inter: true,
            leader: local_leader as usize,
            link: (idx == local_leader as usize).then_some(Link {
                peer,
                ctx: CTX_FROM_GROUP.offset(3),
                tag,
                my_src: idx as i32,
                peer_src: remote_leader,
            }),
            link_group: local,
            flag: 0,
            build: Build::Intercomm,
            errhandler,
            base: None,
            attach: None,
            first: Vec::new(),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Running operations

    /// Register an operation and take its first steps; its id.
    pub fn cm_start(&mut self, s: OpSpec, request: Option<ReqId>, target: Option<CommId>) -> u32 {
        // Contexts of communicators freed while in use go back first, if they may.
        self.sweep_comms();
        let n = self.size as usize;
        let cap = 64 + CTX_WORDS * 8 + 16 * n.max(s.party.members.len()) * 2;
        let op = Box::new(Op {
            key: s.key,
            needs_id: s.needs_id,
            party: s.party,
            inter: s.inter,
            leader: s.leader,
            link: s.link,
            link_group: s.link_group,
            flag: s.flag,
            build: s.build,
            base: s.base,
            errhandler: s.errhandler,
            attach: s.attach,
            round: 0,
            started: false,
            steps: Vec::new(),
            at: 0,
            owns: false,
            owns_eager: false,
            contrib: Contrib {
                mask: vec![0; CTX_WORDS],
                owned: false,
                entries: s.first,
            },
            remote: None,
            lost: None,
            gathered: None,
            recv: None,
            sends: Vec::new(),
            cap,
            outcome: None,
            request,
            target,
        });
        let id = match self.cm.ops.iter().position(|o| o.is_none()) {
            Some(i) => i,
            None => {
                self.cm.ops.push(None);
                self.cm.ops.len() - 1
            }
        } as u32;
        if op.needs_id {
            self.cm.pending.push((id, op.key, false));
        }
        self.cm.live += 1;
        self.cm.ops[id as usize] = Some(op);
        self.cm_advance(id);
        id
    }

    /// Is operation `id` finished (its outcome known and its messages sent)?
    pub fn cm_done(&self, id: u32) -> bool {
        self.cm
            .ops
            .get(id as usize)
            .and_then(|o| o.as_ref())
            .is_none_or(|o| o.outcome.is_some() && o.sends.is_empty())
    }

    /// Collect the outcome of a finished operation: the new communicator, None for
    /// MPI_COMM_NULL.
    pub fn cm_finish(&mut self, id: u32) -> Result<Option<CommId>> {
        let op = self
            .cm
            .ops
            .get_mut(id as usize)
            .and_then(|o| o.take())
            .ok_or_else(|| crate::mpi_error!(Intern, "unknown communicator operation {id}"))?;
        op.outcome.unwrap_or_else(|| {
            err!(
                Intern,
                "communicator operation collected before it finished"
            )
        })
    }

    /// Advance every running operation (called by each progress pass while any runs).
    pub fn cm_progress(&mut self) {
        for id in 0..self.cm.ops.len() as u32 {
            let running = self.cm.ops[id as usize]
                .as_ref()
                .is_some_and(|o| o.outcome.is_none() || !o.sends.is_empty());
            if running {
                self.cm_advance(id);
            }
        }
    }

    fn cm_advance(&mut self, id: u32) {
        let Some(mut op) = self.cm.ops[id as usize].take() else {
            return;
        };
        if op.outcome.is_none() {
            if let Err(e) = self.step(id, &mut op) {
                self.finish_op(id, &mut op, Err(internal(e)));
            }
        }
        // Sends still referencing their buffers.
        self.reap_sends(&mut op.sends);
        let finished = op.outcome.is_some() && op.sends.is_empty();
        if finished {
            self.cm.live -= 1;
            if let Some(slot) = op.request {
                // MPI_Comm_idup: complete the user's request; nobody collects the outcome.
                let err = match op.outcome.take() {
                    Some(Err(e)) => Some(Box::new(e)),
                    _ => None,
                };
                if let Some(r) = self.pml.reqs.get_mut(slot) {
                    r.status.error = err;
                    r.complete = true;
                    if r.user_freed {
                        self.pml.release(slot);
                    }
                }
                return;
            }
        }
        self.cm.ops[id as usize] = Some(op);
    }

    fn finish_op(&mut self, id: u32, op: &mut Op, outcome: Result<Option<CommId>>) {
        self.release_pool(id, op);
        self.cm.pending.retain(|(i, _, _)| *i != id);
        if let Some((slot, _)) = op.recv.take() {
            self.pml.release(slot);
        }
        if let Some(t) = op.target {
            match &outcome {
                Ok(Some(_)) => {}
                // The reserved slot is given back (the user's handle becomes invalid).
                _ => self.comms[t.idx()] = None,
            }
        }
        op.outcome = Some(outcome);
    }

    fn release_pool(&mut self, id: u32, op: &mut Op) {
        let nb = op.key.nonblocking as usize;
        if op.owns {
            op.owns = false;
            let o = &mut self.cm.ctx.owner[nb];
            if *o == Some(id) {
                *o = None;
            }
        }
        if op.owns_eager {
            op.owns_eager = false;
            let o = &mut self.cm.ctx.eager_owner[nb];
            if *o == Some(id) {
                *o = None;
            }
        }
    }

    /// Begin a round: this process's contribution and the steps to take.
    fn begin_round(&mut self, id: u32, op: &mut Op) {
        let mut mask = vec![0u64; CTX_WORDS];
        let owned;
        if !op.needs_id {
            // Not joining the result: offer every block (without constraining anyone).
            let r = reserved_mask();
            for (m, r) in mask.iter_mut().zip(r) {
                *m = !r;
            }
            owned = true;
        } else {
            let nb = op.key.nonblocking;
            // After a round every participant has joined: only then may the agreement own
            // the pool (one that waits for a process still busy elsewhere must not hold it).
            let joined = op.round > 0;
            if joined {
                if let Some(p) = self.cm.pending.iter_mut().find(|p| p.0 == id) {
                    p.2 = true;
                }
            }
            let first = joined
                && self
                    .cm
                    .pending
                    .iter()
                    .filter(|(i, k, j)| *i != id && k.nonblocking == nb && *j)
                    .all(|(_, k, _)| *k > op.key);
            let owner = &mut self.cm.ctx.owner[nb as usize];
            let mut main = false;
            if first && owner.is_none_or(|o| o == id) {
                *owner = Some(id);
                op.owns = true;
                main = true;
                for ((m, f), p) in mask
                    .iter_mut()
                    .zip(self.cm.ctx.free)
                    .zip(partition(nb, false))
                {
                    *m |= f & p;
                }
            }
            // The eager part goes to whichever agreement asks first, joined or not.
            let eager = &mut self.cm.ctx.eager_owner[nb as usize];
            if eager.is_none_or(|o| o == id) {
                *eager = Some(id);
                op.owns_eager = true;
                for ((m, f), p) in mask
                    .iter_mut()
                    .zip(self.cm.ctx.free)
                    .zip(partition(nb, true))
                {
                    *m |= f & p;
                }
            }
            owned = main && op.owns_eager;
        }
        op.contrib.mask = mask;
        op.contrib.owned = owned;
        if op.round > 0 {
            op.contrib.entries.clear();
        }
        op.remote = None;
        op.steps.clear();
        op.at = 0;
        let n = op.party.members.len();
        exchange_steps(n, op.party.me, &mut op.steps);
        if op.inter {
            if op.party.me == op.leader {
                op.steps.push(Step::LinkSend);
                op.steps.push(Step::LinkRecv);
            }
            bcast_steps(n, op.party.me, op.leader, &mut op.steps);
        }
    }

    /// Take every step that can be taken now.
    fn step(&mut self, id: u32, op: &mut Op) -> Result<()> {
        if !op.started {
            op.started = true;
            self.begin_round(id, op);
        }
        loop {
            if op.at == op.steps.len() {
                // Finished, or a new round began: either way, let progress come back.
                self.decide(id, op)?;
                return Ok(());
            }
            let party_env = Envelope {
                ctx: op.party.ctx,
                src: op.party.src(op.party.me),
                tag: op.party.tag,
            };
            match op.steps[op.at] {
                Step::XSend(j) => {
                    let mut w = Writer(Vec::with_capacity(64 + CTX_WORDS * 8));
                    header(&mut w, MSG_EXCHANGE, op.round);
                    put_contrib(&mut w, &op.contrib);
                    self.mgmt_send(op.party.members[j], party_env, w.0, &mut op.sends);
                }
                Step::XRecv(j, replace) => {
                    let spec = Envelope {
                        src: op.party.src(j),
                        ..party_env
                    };
                    let from = op.party.members[j];
                    let Some(data) = self.mgmt_take(&mut op.recv, spec, op.cap, from)? else {
                        return Ok(());
                    };
                    let mut r = Reader(&data);
                    check_header(&mut r, MSG_EXCHANGE, op.round)?;
                    let c = get_contrib(&mut r, op.cap)?;
                    if replace {
                        op.contrib = c;
                    } else {
                        op.contrib.merge(c);
                    }
                }
                Step::LinkSend => {
                    let l = op
                        .link
                        .clone()
                        .ok_or_else(|| crate::mpi_error!(Intern, "leader without a link"))?;
                    let mut w = Writer(Vec::new());
                    header(&mut w, MSG_LINK, op.round);
                    let g: &[Gpid] = if op.round == 0 { &op.link_group } else { &[] };
                    put_remote(&mut w, &op.contrib, g, op.flag, false);
                    let env = Envelope {
                        ctx: l.ctx,
                        src: l.my_src,
                        tag: l.tag,
                    };
                    self.mgmt_send(l.peer, env, w.0, &mut op.sends);
                }
                Step::LinkRecv => {
                    let l = op
                        .link
                        .clone()
                        .ok_or_else(|| crate::mpi_error!(Intern, "leader without a link"))?;
                    let spec = Envelope {
                        ctx: l.ctx,
                        src: l.peer_src,
                        tag: l.tag,
                    };
                    let data = match self.mgmt_take(&mut op.recv, spec, op.cap, l.peer) {
                        Ok(Some(d)) => d,
                        Ok(None) => return Ok(()),
                        Err(e) if self.pml.peer_lost(l.peer).is_some() => {
                            // The other side is gone: our members wait for our broadcast,
                            // which tells them so; we fail once it is out.
                            op.remote = Some(Remote {
                                contrib: op.contrib.clone(),
                                group: Vec::new(),
                                flag: 0,
                                lost: true,
                            });
                            op.lost = Some(e);
                            op.at += 1;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    let mut r = Reader(&data);
                    check_header(&mut r, MSG_LINK, op.round)?;
                    let mut rem = get_remote(&mut r, op.cap)?;
                    // A leader of an independent job names processes as its job does.
                    rem.group = self.group_from_peer(l.peer, rem.group)?;
                    op.remote = Some(rem);
                }
                Step::BSend(j) => {
                    let rem = op.remote.as_ref().ok_or_else(|| {
                        crate::mpi_error!(Intern, "broadcast before the other side's data")
                    })?;
                    let mut w = Writer(Vec::new());
                    header(&mut w, MSG_BCAST, op.round);
                    put_remote(&mut w, &rem.contrib, &rem.group, rem.flag, rem.lost);
                    self.mgmt_send(op.party.members[j], party_env, w.0, &mut op.sends);
                }
                Step::BRecv(j) => {
                    let spec = Envelope {
                        src: op.party.src(j),
                        ..party_env
                    };
                    let from = op.party.members[j];
                    let Some(data) = self.mgmt_take(&mut op.recv, spec, op.cap, from)? else {
                        return Ok(());
                    };
                    let mut r = Reader(&data);
                    check_header(&mut r, MSG_BCAST, op.round)?;
                    let mut rem = get_remote(&mut r, op.cap)?;
                    if rem.lost {
                        return Err(MpiError::new(
                            ErrorClass::Other,
                            "the group's leader lost its connection to the other group before \
                             the intercommunicator was made",
                        ));
                    }
                    // The leader may belong to an independent job (a group that mixes jobs).
                    rem.group = self.group_from_peer(op.party.members[j], rem.group)?;
                    op.remote = Some(rem);
                }
            }
            op.at += 1;
        }
    }

    /// End of a round: the operation finishes, or a new round begins (its first steps are
    /// taken at the next progress pass).
    fn decide(&mut self, id: u32, op: &mut Op) -> Result<()> {
        if let Some(e) = op.lost.take() {
            return Err(e);
        }
        let mut mask = op.contrib.mask.clone();
        let mut owned = op.contrib.owned;
        if op.inter {
            let r = op
                .remote
                .as_ref()
                .ok_or_else(|| crate::mpi_error!(Intern, "no data from the other side"))?;
            for (a, b) in mask.iter_mut().zip(&r.contrib.mask) {
                *a &= b;
            }
            owned &= r.contrib.owned;
        }
        if op.round == 0 {
            op.gathered = Some((op.contrib.entries.clone(), op.remote.clone()));
        }
        match lowest(&mask) {
            Some(b) => {
                let r = self.build(op, b);
                self.finish_op(id, op, r);
                Ok(())
            }
            None if owned => {
                let used = self.cm.ctx.used();
                let kind = if op.key.nonblocking {
                    "for nonblocking creation (MPI_Comm_idup) "
                } else {
                    ""
                };
                self.finish_op(
                    id,
                    op,
                    err!(
                        Other,
                        "no context id {kind}is free in every process involved: too many communicators exist ({used} in this process, at most {CTX_BLOCKS}); free some with MPI_Comm_free"
                    ),
                );
                Ok(())
            }
            None => {
                // Another agreement held some process's pool: try again.
                self.release_pool(id, op);
                op.round += 1;
                self.begin_round(id, op);
                Ok(())
            }
        }
    }

    /// Build this process's new communicator with context block `b`.
    fn build(&mut self, op: &mut Op, b: usize) -> Result<Option<CommId>> {
        let me = self.me;
        let (entries, remote) = op.gathered.take().unwrap_or_default();
        let base = op.base.as_ref();
        let need_base = || {
            base.ok_or_else(|| crate::mpi_error!(Intern, "operation without a parent communicator"))
        };
        let ordered = |color: i32, ents: &[Entry], group: &[Gpid]| -> Result<Vec<Gpid>> {
            let mut v: Vec<&Entry> = ents.iter().filter(|e| e.color == color).collect();
            v.sort_by_key(|e| (e.key, e.idx));
            v.iter()
                .map(|e| {
                    group.get(e.idx as usize).copied().ok_or_else(|| {
                        crate::mpi_error!(Intern, "split entry for rank {} out of range", e.idx)
                    })
                })
                .collect()
        };
        let remote_group = |remote: &Option<Remote>| -> Result<Vec<Gpid>> {
            remote
                .as_ref()
                .map(|r| r.group.clone())
                .ok_or_else(|| crate::mpi_error!(Intern, "no group from the other side"))
        };
        // (local group, remote group) of the result, or None (MPI_COMM_NULL).
        let groups: Option<(Vec<Gpid>, Option<Vec<Gpid>>)> = match &op.build {
            Build::Dup { .. } => {
                let c = need_base()?;
                Some((c.group.clone(), c.remote.clone()))
            }
            Build::Split { color, .. } => {
                let c = need_base()?;
                if *color == UNDEFINED {
                    None
                } else {
                    let local = ordered(*color, &entries, &c.group)?;
                    match &c.remote {
                        None => Some((local, None)),
                        Some(rg) => {
                            let rents = remote
                                .as_ref()
                                .map(|r| r.contrib.entries.as_slice())
                                .unwrap_or(&[]);
                            let rem = ordered(*color, rents, rg)?;
                            (!rem.is_empty()).then_some((local, Some(rem)))
                        }
                    }
                }
            }
            Build::Create { group } => {
                let c = need_base()?;
                if !group.contains(&me) {
                    None
                } else if c.is_inter() {
                    let rem = remote_group(&remote)?;
                    (!rem.is_empty()).then(|| (group.clone(), Some(rem)))
                } else {
                    Some((group.clone(), None))
                }
            }
            Build::Group => Some((op.party.members.clone(), None)),
            Build::Intercomm => Some((op.party.members.clone(), Some(remote_group(&remote)?))),
            Build::Merge { high } => {
                let c = need_base()?;
                let rem_high = remote.as_ref().map_or(0, |r| r.flag) != 0;
                let local = c.group.clone();
                let rg = c.remote.clone().unwrap_or_default();
                let local_first = if *high != rem_high {
                    !*high
                } else {
                    // Same value on both sides: the side whose first process has the
                    // smaller id goes first (both sides compute the same answer).
                    local.first() < rg.first()
                };
                let g = if local_first {
                    [local, rg].concat()
                } else {
                    [rg, local].concat()
                };
                Some((g, None))
            }
        };
        let Some((group, remote_g)) = groups else {
            return Ok(None);
        };
        let Some(rank) = group.iter().position(|&p| p == me) else {
            return Ok(None);
        };
        // A process of the other group that this one was never introduced to (a job spawned
        // by other processes of ours, which this one took no part in, where the operation is
        // not MPI_Intercomm_create: `dpm::introduce`): no route to it.
        if let Some(rg) = &remote_g {
            let unknown = rg
                .iter()
                .find(|&&g| g != me && self.net.route(g) == crate::transport::Route::Unreachable);
            if let Some(g) = unknown {
                return err!(
                    Other,
                    "process {g} of the other group is unknown to this process (it joined \
                     through processes this one did not take part with, e.g. a job they \
                     spawned, and only MPI_Intercomm_create introduces processes that never \
                     met: see mpi::dpm::introduce)"
                );
            }
        }
        if !self.cm.ctx.claim(b) {
            return err!(Intern, "context block {b} was agreed but is not free here");
        }
        let ctx = ContextId::new(b as u32 * CTX_STRIDE);
        let mut c = match (&op.build, base) {
            (Build::Dup { info }, Some(p)) => {
                let mut c = p.clone();
                c.ctx = ctx;
                c.name = String::new();
                c.predefined = false;
                c.mgmt_seq = 0;
                c.pending = false;
                if let Some(i) = info {
                    c.set_info(i.clone());
                }
                c
            }
            _ => {
                let mut c = Comm::new(ctx, rank as i32, group, "");
                c.remote = remote_g;
                c
            }
        };
        c.rank = rank as i32;
        c.errhandler = op.errhandler;
        if let Some(mut t) = op.attach.take() {
            if let Topology::Cart { dims, coords, .. } = &mut t {
                *coords = cart_coords(dims, c.rank);
            }
            c.topo = Some(Box::new(t));
        }
        let id = match op.target {
            Some(t) => {
                self.comms[t.idx()] = Some(c);
                t
            }
            None => self.add_comm(c),
        };
        Ok(Some(id))
    }

    /// Store a communicator; its id (reusing freed slots after the predefined ones).
    pub fn add_comm(&mut self, c: Comm) -> CommId {
        match self.comms.iter().skip(2).position(|x| x.is_none()) {
            Some(i) => {
                self.comms[i + 2] = Some(c);
                CommId::from_idx(i + 2)
            }
            None => {
                self.comms.push(Some(c));
                CommId::from_idx(self.comms.len() - 1)
            }
        }
    }

    /// Reserve a communicator slot for MPI_Comm_idup (filled when the operation finishes).
    pub fn reserve_comm(&mut self, parent: CommId) -> Result<CommId> {
        let p = self.live_comm(parent)?;
        let mut c = Comm::new(ContextId::new(u32::MAX - 3), p.rank, p.group.clone(), "");
        c.remote = p.remote.clone();
        c.pending = true;
        Ok(self.add_comm(c))
    }

    /// MPI_Comm_free: local. Returns the context block to the pool.
    pub fn free_comm(&mut self, id: CommId) -> Result<()> {
        let c = self.comm(id)?;
        if c.predefined {
            return err!(Comm, "{} cannot be freed", c.name);
        }
        if c.pending {
            return err!(
                Comm,
                "the communicator is still being created by MPI_Comm_idup (wait for its request first)"
            );
        }
        if self.comm_in_use(id) {
            // Pending operations complete normally (MPI-4.1 7.4.3): the context may not be
            // given to another communicator while their messages can still arrive.
            self.comm_mut(id)?.freed = true;
            self.cm.deferred += 1;
            return Ok(());
        }
        let ctx = c.ctx;
        self.comms[id.idx()] = None;
        self.cm.ctx.release(ctx);
        Ok(())
    }

    /// Does a request (pending, or complete and not yet collected) still name communicator
    /// `id`?
    pub fn comm_in_use(&self, id: CommId) -> bool {
        self.pml.reqs.iter().any(|r| r.comm == id && !r.permanent)
    }

    /// Does a pending request still name communicator `id` (MPI_Comm_disconnect waits)?
    pub fn comm_busy(&self, id: CommId) -> bool {
        self.pml
            .reqs
            .iter()
            .any(|r| r.comm == id && !r.permanent && !r.complete)
    }

    /// Release the communicators freed while in use whose requests are all gone.
    pub fn sweep_comms(&mut self) {
        if self.cm.deferred == 0 {
            return;
        }
        for i in 0..self.comms.len() {
            let freed = self.comms[i].as_ref().is_some_and(|c| c.freed);
            if freed && !self.comm_in_use(CommId::from_idx(i)) {
                let ctx = self.comms[i].take().expect("freed").ctx;
                self.cm.ctx.release(ctx);
                self.cm.deferred -= 1;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Messages of management operations (raw bytes, no datatype, tags outside the user's
    // reach)

    /// Send `data`; if it cannot go out at once, keep its buffer in `sends` until the request
    /// completes.
    fn mgmt_send(
        &mut self,
        to: Gpid,
        env: Envelope,
        data: Vec<u8>,
        sends: &mut Vec<(ReqId, Box<[u8]>)>,
    ) {
        if self.pml.try_eager(to, env, &data, &mut self.net) {
            return;
        }
        let mut buf = data.into_boxed_slice();
        let mut r = Request::new(Kind::Send, COMM_WORLD);
        r.peer = to;
        r.env = env;
        r.buf = buf.as_mut_ptr();
        r.len = buf.len();
        let slot = self.pml.reqs.insert(r);
        self.pml.start_send(slot, &mut self.net);
        sends.push((slot, buf));
    }

    /// Receive the message matching `spec` (posting the receive the first time): its bytes
    /// when it has arrived.
    /// `from`: the process it comes from, so that the receive fails when the connection to it
    /// breaks (or has broken) rather than waiting for ever.
    fn mgmt_take(
        &mut self,
        pending: &mut Option<(ReqId, Box<[u8]>)>,
        spec: Envelope,
        cap: usize,
        from: Gpid,
    ) -> Result<Option<Vec<u8>>> {
        if pending.is_none() {
            let mut buf = vec![0u8; cap].into_boxed_slice();
            let mut r = Request::new(Kind::Recv, COMM_WORLD);
            r.env = spec;
            r.peer = from;
            r.buf = buf.as_mut_ptr();
            r.len = buf.len();
            let slot = self.pml.reqs.insert(r);
            self.pml.post_recv(slot);
            if self.pml.busy() {
                self.pml.flush(&mut self.net);
            }
            *pending = Some((slot, buf));
        }
        let slot = pending.as_ref().expect("posted").0;
        if !self.pml.reqs.get(slot).is_some_and(|r| r.complete) {
            if let Some(why) = self.pml.peer_lost(from) {
                // Lost before the receive was posted (the loss fails only what is posted).
                let e = MpiError::new(
                    ErrorClass::Other,
                    format!("the connection to process {from} broke: {why}"),
                );
                let (slot, _) = pending.take().expect("posted");
                self.pml.release(slot);
                return Err(e);
            }
            return Ok(None);
        }
        let (slot, buf) = pending.take().expect("posted");
        let r = self.pml.release(slot).expect("live request");
        if let Some(e) = r.status.error {
            return Err(*e);
        }
        let n = (r.status.bytes as usize).min(buf.len());
        Ok(Some(buf[..n].to_vec()))
    }

    /// The color of process `p` for MPI_COMM_TYPE_SHARED: the lowest world rank on its host.
    pub fn host_color(&self, p: Gpid) -> i32 {
        let h = &self.hosts[p.idx()];
        self.hosts.iter().position(|x| x == h).unwrap_or(0) as i32
    }
}

/// A blocking personalised exchange among the members of intracommunicator `comm`, in its
/// management context: `data[j]` goes to rank j; returns what every rank sent to this one
/// (messages of any size; MPI_Dist_graph_create uses it to route edges to their ends).
pub fn exchange_all(comm: CommId, data: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
    exchange_all_watching(comm, None, data, |_, _| Ok(()))
}

/// [`exchange_all`], in the context and with the tag of `at` where the caller reserved them
/// (else the management context and its next sequence number), giving up with the error
/// `watch` returns, which it is asked at every pass of the wait (with the engine and what has
/// come so far: None for the ranks still awaited). The shared-memory collectives map their
/// region this way, tagged with the call's collective tag so that a member that took another
/// path for the call recognises it, and watching for such a member's messages and for
/// awaited members that went on to a later call.
pub fn exchange_all_watching(
    comm: CommId,
    at: Option<(ContextId, i32)>,
    mut data: Vec<Vec<u8>>,
    mut watch: impl FnMut(&mut Engine, &[Option<Vec<u8>>]) -> Result<()>,
) -> Result<Vec<Vec<u8>>> {
    let (me, members, ctx, tag) = with(|e| -> Result<_> {
        let c = e.live_comm(comm)?;
        if c.is_inter() {
            return err!(Comm, "an intracommunicator is needed");
        }
        let (rank, group) = (c.rank as usize, c.group.clone());
        let (ctx, tag) = match at {
            Some(x) => x,
            None => {
                let seq = e.next_seq(comm)?;
                (e.live_comm(comm)?.mgmt_ctx(), (seq as i32) & TAG_MASK)
            }
        };
        Ok((rank, group, ctx, tag))
    })??;
    let n = members.len();
    if data.len() != n {
        return err!(Intern, "exchange with {} parts for {n} ranks", data.len());
    }
    let mut got: Vec<Option<Vec<u8>>> = vec![None; n];
    got[me] = Some(std::mem::take(&mut data[me]));
    let mut sends = Vec::new();
    with(|e| {
        for (j, d) in data.into_iter().enumerate() {
            if j != me {
                let env = Envelope {
                    ctx,
                    src: me as i32,
                    tag,
                };
                e.mgmt_send(members[j], env, d, &mut sends);
            }
        }
    })?;
    let mut recvs: Vec<Option<(ReqId, Box<[u8]>)>> = (0..n).map(|_| None).collect();
    loop {
        let done = with(|e| -> Result<bool> {
            e.progress();
            for j in 0..n {
                if got[j].is_some() {
                    continue;
                }
                let spec = Envelope {
                    ctx,
                    src: j as i32,
                    tag,
                };
                if let Some(d) = e.mgmt_take_any(&mut recvs[j], spec)? {
                    got[j] = Some(d);
                }
            }
            e.reap_sends(&mut sends);
            let done = sends.is_empty() && got.iter().all(|g| g.is_some());
            if !done {
                watch(e, &got)?;
            }
            Ok(done)
        })??;
        if done {
            return Ok(got.into_iter().map(|g| g.expect("all received")).collect());
        }
        global::idle();
    }
}

/// Two processes swap `data` (blocking): the leaders of the two groups of an
/// MPI_Intercomm_create, over its peer communicator. `ctx` is that communicator's tagged
/// context, `my_src` and `peer_src` the two sides' ranks in it, and `tag` one no other message
/// of that context carries (the caller's: negative, unlike every user tag).
pub fn swap_with(
    peer: Gpid,
    ctx: ContextId,
    my_src: i32,
    peer_src: i32,
    tag: i32,
    data: Vec<u8>,
) -> Result<Vec<u8>> {
    let mut sends = Vec::new();
    with(|e| {
        let env = Envelope {
            ctx,
            src: my_src,
            tag,
        };
        e.mgmt_send(peer, env, data, &mut sends);
    })?;
    let spec = Envelope {
        ctx,
        src: peer_src,
        tag,
    };
    let mut recv = None;
    let mut got = None;
    loop {
        let done = with(|e| -> Result<bool> {
            e.progress();
            if got.is_none() {
                got = e.mgmt_take_any(&mut recv, spec)?;
            }
            e.reap_sends(&mut sends);
            if got.is_none() {
                if let Some(why) = e.pml.peer_lost(peer) {
                    return Err(MpiError::new(
                        ErrorClass::Other,
                        format!("the other group's leader (process {peer}) is gone: {why}"),
                    ));
                }
            }
            Ok(sends.is_empty() && got.is_some())
        })??;
        if done {
            return Ok(got.expect("received"));
        }
        global::idle();
    }
}

impl Engine {
    /// Release the management sends that completed (their buffers go with them).
    fn reap_sends(&mut self, sends: &mut Vec<(ReqId, Box<[u8]>)>) {
        sends.retain(|(slot, _)| {
            if self.pml.reqs.get(*slot).is_some_and(|r| r.complete) {
                self.pml.release(*slot);
                false
            } else {
                true
            }
        });
    }

    /// Like `mgmt_take`, for a message of unknown size: the receive is posted once the
    /// message has arrived (its size is then known).
    fn mgmt_take_any(
        &mut self,
        pending: &mut Option<(ReqId, Box<[u8]>)>,
        spec: Envelope,
    ) -> Result<Option<Vec<u8>>> {
        if pending.is_none() {
            let Some((id, st)) = self.pml.mprobe(&spec) else {
                return Ok(None);
            };
            let u = self
                .pml
                .take_message(id)
                .ok_or_else(|| crate::mpi_error!(Intern, "a probed message disappeared"))?;
            let mut buf = vec![0u8; st.bytes as usize].into_boxed_slice();
            let mut r = Request::new(Kind::Recv, COMM_WORLD);
            r.env = u.env;
            r.buf = buf.as_mut_ptr();
            r.len = buf.len();
            let slot = self.pml.reqs.insert(r);
            self.pml.deliver_unexpected(slot, u);
            if self.pml.busy() {
                self.pml.flush(&mut self.net);
            }
            *pending = Some((slot, buf));
        }
        let slot = pending.as_ref().expect("posted").0;
        if !self.pml.reqs.get(slot).is_some_and(|r| r.complete) {
            return Ok(None);
        }
        let (slot, buf) = pending.take().expect("posted");
        let r = self.pml.release(slot).expect("live request");
        if let Some(e) = r.status.error {
            return Err(*e);
        }
        Ok(Some(buf.into_vec()))
    }
}

/// A tag from an MPI-4 string tag (FNV-1a, folded into the tag range).
fn hash_tag(s: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (h as i32) & TAG_MASK
}

/// Run an operation to the end (the blocking calls).
pub fn run(spec: OpSpec) -> Result<Option<CommId>> {
    let id = with(|e| e.cm_start(spec, None, None))?;
    global::wait_until(|e| e.cm_done(id))?;
    with(|e| e.cm_finish(id))?
}

/// Start an operation whose result goes into a reserved communicator slot, completing a new
/// request (MPI_Comm_idup). Returns (communicator id, request slot).
pub fn start_nonblocking(
    parent: CommId,
    make: impl FnOnce(&mut Engine) -> Result<OpSpec>,
) -> Result<(CommId, ReqId)> {
    with(|e| -> Result<(CommId, ReqId)> {
        let spec = make(e)?.nonblocking();
        let target = e.reserve_comm(parent)?;
        let mut r = Request::new(Kind::Done, parent);
        r.complete = false;
        let slot = e.pml.reqs.insert(r);
        e.cm_start(spec, Some(slot), Some(target));
        Ok((target, slot))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulate the exchange step plans of n participants: every send is received by the
    /// matching step, and every participant ends with everybody's data.
    fn simulate(n: usize) {
        let mut plans: Vec<Vec<Step>> = (0..n)
            .map(|me| {
                let mut v = Vec::new();
                exchange_steps(n, me, &mut v);
                v
            })
            .collect();
        let mut data: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
        let mut at = vec![0usize; n];
        // Channels (from, to) -> FIFO of messages.
        let mut chans: std::collections::HashMap<
            (usize, usize),
            std::collections::VecDeque<Vec<usize>>,
        > = Default::default();
        let mut moved = true;
        while moved {
            moved = false;
            for me in 0..n {
                while at[me] < plans[me].len() {
                    match plans[me][at[me]] {
                        Step::XSend(j) => {
                            chans
                                .entry((me, j))
                                .or_default()
                                .push_back(data[me].clone());
                        }
                        Step::XRecv(j, replace) => {
                            let Some(m) = chans.entry((j, me)).or_default().pop_front() else {
                                break;
                            };
                            if replace {
                                data[me] = m;
                            } else {
                                data[me].extend(m);
                            }
                        }
                        _ => unreachable!(),
                    }
                    at[me] += 1;
                    moved = true;
                }
            }
        }
        for me in 0..n {
            assert_eq!(at[me], plans[me].len(), "n={n}: participant {me} stuck");
            let mut d = data[me].clone();
            d.sort();
            assert_eq!(d, (0..n).collect::<Vec<_>>(), "n={n}: participant {me}");
        }
        assert!(chans.values().all(|q| q.is_empty()));
        plans.clear();
    }

    #[test]
    fn exchange_plans_reach_everybody() {
        for n in 1..=33 {
            simulate(n);
        }
    }

    #[test]
    fn bcast_plans_form_a_tree() {
        for n in 1..=17 {
            for root in 0..n {
                let mut got = 1usize; // processes that have the data (the root, then receivers)
                let mut sends = Vec::new();
                let mut recvs = Vec::new();
                for me in 0..n {
                    let mut v = Vec::new();
                    bcast_steps(n, me, root, &mut v);
                    let r: Vec<usize> = v
                        .iter()
                        .filter_map(|s| {
                            if let Step::BRecv(j) = s {
                                Some(*j)
                            } else {
                                None
                            }
                        })
                        .collect();
                    assert_eq!(r.len(), (me != root) as usize, "n={n} root={root} me={me}");
                    for s in v {
                        if let Step::BSend(j) = s {
                            sends.push((me, j));
                        }
                    }
                    if let Some(&p) = r.first() {
                        recvs.push((p, me));
                        got += 1;
                    }
                }
                sends.sort();
                recvs.sort();
                assert_eq!(sends, recvs);
                assert_eq!(got, n);
            }
        }
    }

    #[test]
    fn messages_roundtrip_and_reject_garbage() {
        let c = Contrib {
            mask: (0..CTX_WORDS as u64).collect(),
            owned: true,
            entries: vec![
                Entry {
                    idx: 3,
                    color: 1,
                    key: -5,
                },
                Entry {
                    idx: 0,
                    color: 0,
                    key: 7,
                },
            ],
        };
        let mut w = Writer(Vec::new());
        header(&mut w, MSG_LINK, 2);
        put_remote(
            &mut w,
            &c,
            &[Gpid::new(9), Gpid::new(4), Gpid::new(1)],
            -1,
            false,
        );
        let mut r = Reader(&w.0);
        check_header(&mut r, MSG_LINK, 2).unwrap();
        let rem = get_remote(&mut r, 100).unwrap();
        assert_eq!(rem.contrib, c);
        assert_eq!(rem.group, vec![9, 4, 1]);
        assert_eq!(rem.flag, -1);
        assert!(!rem.lost);
        // The broadcast of a leader that lost the other group says so.
        let mut w2 = Writer(Vec::new());
        put_remote(&mut w2, &c, &[], 0, true);
        let rem = get_remote(&mut Reader(&w2.0), 100).unwrap();
        assert!(rem.lost && rem.group.is_empty());
        // Wrong kind or round, truncation, absurd counts.
        let mut r = Reader(&w.0);
        assert!(check_header(&mut r, MSG_BCAST, 2).is_err());
        let mut r = Reader(&w.0);
        assert!(check_header(&mut r, MSG_LINK, 3).is_err());
        for cut in [0, 3, 10, w.0.len() - 1] {
            let mut r = Reader(&w.0[..cut]);
            let ok = check_header(&mut r, MSG_LINK, 2).and_then(|_| get_remote(&mut r, 100));
            assert!(ok.is_err(), "cut at {cut}");
        }
        let mut r = Reader(&w.0);
        check_header(&mut r, MSG_LINK, 2).unwrap();
        assert!(get_remote(&mut r, 1).is_err());
    }

    #[test]
    fn pool_claims_and_releases() {
        let mut p = CtxPool::default();
        assert_eq!(p.used(), CTX_RESERVED_BLOCKS as usize);
        let b = lowest(&p.free).unwrap();
        assert_eq!(b, CTX_RESERVED_BLOCKS as usize);
        assert!(p.claim(b));
        assert!(!p.claim(b));
        assert_eq!(lowest(&p.free), Some(b + 1));
        p.release(ContextId::new(b as u32 * CTX_STRIDE));
        assert_eq!(lowest(&p.free), Some(b));
        // Reserved blocks are never released into the pool.
        p.release(ContextId::new(0));
        assert_eq!(p.used(), CTX_RESERVED_BLOCKS as usize);
        assert_eq!(lowest(&[0, 0, 8]), Some(131));
        assert_eq!(lowest(&[0, 0]), None);
    }

    #[test]
    fn partitions_are_disjoint_and_cover_the_pool() {
        let parts = [
            partition(false, true),
            partition(false, false),
            partition(true, true),
            partition(true, false),
        ];
        for i in 0..CTX_WORDS {
            for a in 0..4 {
                for c in a + 1..4 {
                    assert_eq!(parts[a][i] & parts[c][i], 0);
                }
            }
            assert_eq!(parts.iter().fold(0, |o, p| o | p[i]), !0);
        }
        let or = |x: [u64; CTX_WORDS], y: [u64; CTX_WORDS]| -> Vec<u64> {
            x.iter().zip(y).map(|(a, b)| a | b).collect()
        };
        let b = or(parts[0], parts[1]);
        let n = or(parts[2], parts[3]);
        let p = CtxPool::default();
        let first_b: Vec<u64> = p.free.iter().zip(b).map(|(f, m)| f & m).collect();
        let first_n: Vec<u64> = p.free.iter().zip(n).map(|(f, m)| f & m).collect();
        assert_eq!(lowest(&first_b), Some(CTX_RESERVED_BLOCKS as usize));
        assert_eq!(lowest(&first_n), Some(NB_FIRST_WORD * 64));
    }

    #[test]
    fn tags_from_strings_stay_in_range() {
        for s in ["", "a", "mpi4py", "a much longer string tag with spaces"] {
            let t = hash_tag(s);
            assert!((0..LOCAL_BIT).contains(&t));
        }
        assert_ne!(hash_tag("a"), hash_tag("b"));
    }
}
