//! One-sided communication (MPI-4.1 chapter 12): windows, their operations and epochs.
//!
//! Read first: MPI-4.1 sections 12.2 (window creation; the unified memory model, which is the
//! one this library offers: MPI_WIN_MODEL is MPI_WIN_UNIFIED for every window), 12.3
//! (operations; datatypes on both sides; 12.3.4 accumulate rules), 12.5 (synchronisation:
//! fence, post-start-complete-wait, lock), 12.7 (semantics: atomicity of accumulates, the
//! default accumulate ordering rar,raw,war,waw, progress).
//!
//! # Mechanisms, per window and per target
//!
//! Every window has a context id of its own (its communicator is a duplicate of the user's),
//! which names it in frames. When it is made, each process decides how it reaches each
//! target ([`Mech`]):
//!
//! - **Direct**: the target's window memory is mapped here: windows of MPI_Win_allocate and
//!   MPI_Win_allocate_shared live in one segment per host ([`crate::transport::HostMem`]),
//!   so a target on this host reached through shared memory is written and read with plain
//!   copies, and accumulates with atomic instructions ([`acc`]). The target takes no part.
//! - **Cma**: a window of user memory (MPI_Win_create, memory attached to a dynamic window) on
//!   this host is read and written through the transport's single copy
//!   ([`crate::transport::Transport::expose_any`], `get`, `put`: cross-memory attach), and
//!   accumulated under the target's accumulate lock (read, combine, write). The target takes
//!   no part either. Where the kernel refuses, the target falls back to active messages.
//! - **Am**: active messages: the origin sends the operation in RMA frames
//!   (`proto::frame::RmaHeader`) and the target applies it when its engine makes progress
//!   (inside any MPI call that progresses): targets on other hosts, and on this host where the
//!   route is not shared memory (`transports=tcp`).
//!
//! Every window with several processes on a host also has, per process, a control block in
//! the host segment ([`ctl`]): the passive-target lock word, which origins on the host take
//! with atomic instructions (a target elsewhere takes Lock frames and grants them from its
//! progress, on the same word), the accumulate lock, and the attach table of a dynamic
//! window. So passive-target epochs within a host never wait for the target.
//!
//! # Completion
//!
//! Direct and cross-memory operations are complete when the call returns. Active messages
//! are complete at the origin once the transport has the frame (a copy), and at the target
//! when it has applied them; frames from one origin arrive in order, so a Flush (or Unlock)
//! frame answered with an Ack completes everything sent before it, and Data frames answer
//! reads. Fence = complete everything at every target, then a barrier (among members all on
//! one host: fence counts in their control blocks, `sync::fence_arrive`); Complete sends a
//! Complete frame after the epoch's operations, Wait counts them; Post sends Post frames,
//! Start waits for them.
//!
//! Files: this one (windows: creation, memory, attributes, the frame sink), [`ctl`] (control
//! blocks), [`acc`] (accumulate kernels, atomically), `ops.rs` (the origin's side of every
//! operation), `am.rs` (active messages: building and answering them), `sync.rs` (epochs).

pub mod acc;
pub mod ctl;

mod am;
pub mod ops;
pub mod sync;

use crate::ids::{CommId, ContextId, ReqId};
use std::collections::VecDeque;

use crate::err;
use crate::error::{ErrorClass, MpiError, Result};
use crate::mpi::engine::Engine;
use crate::mpi::global::{self, with};
use crate::mpi::pml::Pml;
use crate::mpi::request::{Kind, Request, Slab};
use crate::proto::frame::{self, HEADER_LEN};
use crate::transport::{
    FrameSink, Gpid, HostMem, Placement, Region, Route, Span, Token, Transport, REGION_LEN,
};
use ctl::{Attached, Ctl, CTL_BYTES};

pub use ops::{Buf, Target, What};
pub use sync::LockType;

/// How a window was made (the values of MPI_WIN_CREATE_FLAVOR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Create = 1,
    Allocate = 2,
    Dynamic = 3,
    Shared = 4,
}

/// MPI_WIN_UNIFIED: the only memory model here.
pub const MODEL_UNIFIED: i32 = 2;

/// Assertions (MPI_MODE_*), MPICH's values.
pub const MODE_NOCHECK: i32 = 1024;
pub const MODE_NOSTORE: i32 = 2048;
pub const MODE_NOPUT: i32 = 4096;
pub const MODE_NOPRECEDE: i32 = 8192;
pub const MODE_NOSUCCEED: i32 = 16384;

/// How this process reaches one target's window memory (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mech {
    /// The target's window starts at this address here.
    Direct(*mut u8),
    /// Our own dynamic window: displacements are addresses.
    SelfDyn,
    /// Cross-memory attach at this region (None: a dynamic window, regions looked up in the
    /// target's attach table).
    Cma(Option<Region>),
    /// Active messages.
    Am,
}

impl Mech {
    pub fn name(&self) -> &'static str {
        match self {
            Mech::Direct(_) | Mech::SelfDyn => "direct",
            Mech::Cma(_) => "cma",
            Mech::Am => "am",
        }
    }
}

/// What this process knows of one member of a window.
#[derive(Debug)]
pub(crate) struct Peer {
    pub gpid: Gpid,
    pub size: u64,
    pub disp_unit: u64,
    pub mech: Mech,
    /// The member's control block mapped here (null: not on this host).
    pub ctl: *const Ctl,
    /// Frames that change the target's memory went to it since its last Ack.
    pub unflushed: bool,
    /// Answers (Data, Ack) we wait for from it.
    pub outstanding: u32,
    /// Operation frames (Put, Acc, Get, Cas) sent to it since the window was made: what a
    /// fence across hosts counts ([`sync::fence`]).
    pub sent_ops: u64,
    /// Operation frames sent to it by all members, at our last fence across hosts, and
    /// whether that fence waits for it to apply them (`sync::fence_counted`).
    pub fence_total: u64,
    pub fence_wait: bool,
    /// Post frames from it not consumed by a Start yet, Complete frames not consumed by a Wait.
    pub posts: u32,
    pub completes: u32,
    /// We hold its passive-target lock (exclusive?), and took it on its control block.
    pub lock: Option<LockType>,
    pub lock_direct: bool,
    pub lock_nocheck: bool,
}

/// A window.
pub struct Win {
    /// The communicator the window's traffic uses (a duplicate of the user's).
    pub comm: CommId,
    pub ctx: ContextId,
    pub rank: usize,
    pub flavor: Flavor,
    pub base: *mut u8,
    pub size: usize,
    pub disp_unit: usize,
    pub name: String,
    pub info: Vec<(String, String)>,
    pub errhandler: u32,
    pub(crate) peers: Vec<Peer>,
    rank_of: crate::ids::IdMap<Gpid, usize>,
    /// Our control block (in the host segment, or `own_ctl`).
    ctl: *const Ctl,
    /// Owns our control block when it is not in a host segment (`ctl` points into it).
    _own_ctl: Option<Box<Ctl>>,
    seg: Option<HostMem>,
    /// Memory MPI_Win_allocate took from the heap (alone on the host).
    heap: Option<(*mut u8, std::alloc::Layout)>,
    /// Our window memory exposed for cross-memory attach (MPI_Win_create).
    exposed: Option<Region>,
    /// Dynamic window: attached regions (address, bytes, region for cross-memory attach).
    attached: Vec<Attached>,
    /// Accumulates on our memory use atomic instructions (memory the library allocated in
    /// shared memory), else the accumulate lock.
    atomic: bool,
    /// Some member may reach us (or we reach some member) by active messages: every call on
    /// the window makes a progress pass, so that a process spinning on its own window (a
    /// spin lock of compare-and-swap, a flag it polls under MPI_Win_lock) still applies the
    /// operations others sent it.
    pub(crate) am: bool,
    /// MPI_Win_fence synchronises through the members' control blocks (every member is on
    /// this host, and every member asked for it when the window was made: the same answer
    /// everywhere), not through a barrier on `comm`; `fence_gen` counts our fences.
    pub(crate) fence_shm: bool,
    pub(crate) fence_gen: u64,
    /// Epochs.
    pub(crate) fence_open: bool,
    pub(crate) access: Option<Vec<usize>>,
    pub(crate) exposure: Option<Vec<usize>>,
    pub(crate) lock_all: bool,
    /// An error an active message met at its target, reported by the next call that
    /// completes operations.
    pub(crate) error: Option<MpiError>,
    /// Operation frames from members applied here since the window was made (or dropped as
    /// malformed: counted all the same, so that a fence never waits for them).
    pub(crate) applied_ops: u64,
    /// Fences across hosts completed here ([`sync::fence`]): its parity goes on every request
    /// frame we send (`frame::RMA_ODD`).
    pub(crate) counted: u64,
    /// Requests of the next epoch, from members that left the fence we are still in: applied
    /// (and counted) when we leave it, in the order they came.
    pub(crate) deferred: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
    pub(crate) deferred_bytes: usize,
    /// Answers sent from our memory that the transports still read ([`Release::Answer`]).
    pub(crate) lent: u32,
}

impl Win {
    fn ctl(&self) -> &Ctl {
        // SAFETY: `ctl` points into our host segment or `own_ctl`, both alive as long as the
        // window.
        unsafe { &*self.ctl }
    }

    /// Our memory as the accumulate kernels may touch it.
    pub(crate) fn mode(&self) -> acc::Mode<'_> {
        if self.atomic {
            acc::Mode::Atomic(self.ctl())
        } else {
            acc::Mode::Locked
        }
    }

    /// Is `[off, off + len)` inside our memory (attached regions for a dynamic window)?
    fn holds(&self, off: u64, len: u64) -> bool {
        let Some(end) = off.checked_add(len) else {
            return false;
        };
        if self.flavor == Flavor::Dynamic {
            // Attached regions one after the other in memory hold what runs across them.
            let mut at = off;
            while at < end {
                match self
                    .attached
                    .iter()
                    .find(|a| at >= a.base && at < a.base + a.len)
                {
                    Some(a) => at = a.base + a.len,
                    None => return false,
                }
            }
            return true;
        }
        end <= self.size as u64
    }

    /// Where window offset `off` is in our address space.
    fn at(&self, off: u64) -> *mut u8 {
        if self.flavor == Flavor::Dynamic {
            off as usize as *mut u8
        } else {
            self.base.wrapping_add(off as usize)
        }
    }

    /// The rank of a process in the window's group.
    pub(crate) fn rank_of(&self, g: Gpid) -> Option<usize> {
        self.rank_of.get(&g).copied()
    }

    pub fn group(&self) -> Vec<Gpid> {
        self.peers.iter().map(|p| p.gpid).collect()
    }
}

/// A frame the RMA layer has to send: to whom, header, payload.
pub(crate) struct Out {
    pub to: Gpid,
    pub hdr: [u8; HEADER_LEN],
    pub payload: Vec<u8>,
    /// Puts merged into this frame ([`State::merge_put`]): their segments and data, kept
    /// apart until the frame leaves (the payload then lists the segments before the data).
    pub merged: Option<Box<Merged>>,
    /// The data follows `payload` from memory lent to the transport until it is written out
    /// ([`State::send_lent`]).
    pub lend: Option<Lend>,
}

/// Memory a large frame's data is sent from without a copy: the origin's buffer for a put,
/// the window for a get's answer. It stays referenced until the transport reports it sent
/// (through a request slot of the point-to-point engine, whose token the transport knows);
/// until then `release` is not done.
pub(crate) struct Lend {
    pub ptr: *const u8,
    pub len: usize,
    pub release: Release,
}

/// What waits for lent memory to be given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// A put's origin buffer: the operation counts as outstanding at its target (so flush,
    /// unlock, fence and complete wait, and the user may reuse the buffer after them).
    Origin { win: u32, target: usize },
    /// A get's answer from our window memory: MPI_Win_free waits.
    Answer { win: u32 },
}

/// The segments and data of puts merged into one frame.
pub(crate) type Merged = (frame::Segments, Vec<u8>);

/// The origin waits for the answer to operation `id`.
pub(crate) enum Waiting {
    /// Data for `len` bytes of result `op` at byte `at`.
    Data { op: u32, at: usize, len: usize },
    /// An Ack (flush, lock, unlock).
    Ack { win: u32, target: usize },
}

/// An operation whose result comes back in Data frames.
pub(crate) struct Fetching {
    pub win: u32,
    pub target: usize,
    /// Where the result goes: straight into the user's contiguous buffer, or staged and
    /// unpacked once complete.
    pub dst: *mut u8,
    pub staged: Option<Vec<u8>>,
    #[allow(clippy::type_complexity)]
    pub unpack: Option<(
        *mut u8,
        usize,
        std::sync::Arc<crate::mpi::datatype::Datatype>,
    )>,
    pub left: usize,
    /// The request of an MPI_R* call.
    pub request: Option<ReqId>,
    /// The target could not apply (a piece of) it.
    pub error: Option<MpiError>,
}

/// A Lock frame the target could not grant yet.
struct LockWait {
    from: Gpid,
    win: u32,
    id: u32,
    exclusive: bool,
}

/// The one-sided state of a process.
#[derive(Default)]
pub struct State {
    wins: Vec<Option<Win>>,
    by_ctx: crate::ids::IdMap<ContextId, u32>,
    /// Frames for windows this process has not finished making yet.
    early: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
    early_bytes: usize,
    pub(crate) outbox: VecDeque<Out>,
    /// The outbox holds a frame that leaves at the next progress pass (anything but small
    /// writes), or frames the transports did not take yet.
    hard: bool,
    /// Payload bytes of small writes in the outbox ([`State::send_soft`]).
    soft_bytes: usize,
    /// Writes issued ([`State::poke_due`]).
    writes: u32,
    pub(crate) waiting: crate::ids::IdMap<u32, Waiting>,
    pub(crate) fetching: crate::ids::IdMap<u32, Fetching>,
    next_id: u32,
    locks: Vec<LockWait>,
    pub(crate) accs: acc::Cache,
    serial: u32,
    /// Lent frames the transports have not written out yet: their request slots (in the
    /// point-to-point engine's table, `inflight` 1 until the transport's token comes back).
    pub(crate) lent: Vec<(ReqId, Release)>,
    /// Malformed or misdirected RMA frames dropped.
    pub bad_frames: u64,
    pub verbose: bool,
}

/// One write in this many makes a progress pass before it ([`State::poke_due`]).
const POKE_EVERY: u32 = 16;

/// Small puts are merged into one frame up to this many payload bytes
/// ([`State::merge_put`]).
pub(crate) const MERGE_MAX: usize = 4096;

/// RMA payloads up to this many bytes are copied by the transport rather than lent
/// ([`State::flush`]).
const COPY_MAX: usize = 4096;

/// Small writes wait in the outbox until a call completes them, another frame leaves, or
/// they hold this many bytes ([`State::send_soft`]).
const SOFT_MAX: usize = 64 << 10;

/// Frames whose data is at least this many bytes may be sent from the caller's memory (the
/// origin's buffer, the window) rather than copied into the frame ([`State::send_lent`]).
pub(crate) const LEND_MIN: usize = 64 << 10;

/// Is a frame's data of `len` bytes sent from where it lies (the origin's buffer, the
/// window: `State::send_lent`) rather than copied into the frame? From [`LEND_MIN`] bytes on,
/// whatever its address. Measured over TCP (put or get + flush, best of 3 rounds of 40):
/// copying each piece into a fresh vector made 2 and 4 MiB operations 2.5 and 6 ms (page
/// faults on every piece, the unwritten rest copied again), lent 0.7 and 1.4 ms. Session 42's
/// machine (AMD EPYC) had copied a put of up to 1.5 MiB from a source that is not
/// cache-line aligned (a large `malloc`'s buffer, page + 16): the kernel's copy out of it
/// was 1.5x slower than out of the copy (1 MiB on loopback 510-560 against 360-380 us). On
/// session 45's (Intel Xeon) the copy is what costs, 1 MiB from a `malloc`: on loopback 338-420
/// copied against 258-304 us lent; across two emulated hosts 410-496 against 248-419 (median of
/// 5 launches 460 against 282; Open MPI, which sends from the buffer, 386); 64 and 256 KiB
/// equal. Open MPI's pt2pt component sends from the user's buffer too.
pub(crate) fn lends(len: usize) -> bool {
    len >= LEND_MIN
}

/// Frames held for windows not made yet, at most this many bytes (a target that never
/// makes the window is a broken program; beyond this its frames are dropped).
const EARLY_MAX: usize = 64 << 20;

impl State {
    /// Work for the progress pass: frames to send, locks to grant.
    #[inline]
    pub fn busy(&self) -> bool {
        self.hard || self.soft_bytes > SOFT_MAX || !self.locks.is_empty() || !self.lent.is_empty()
    }

    /// Is it a write's turn to make a progress pass (`ops::op`)?
    #[inline]
    pub(crate) fn poke_due(&mut self) -> bool {
        self.writes = self.writes.wrapping_add(1);
        self.writes.is_multiple_of(POKE_EVERY)
    }

    /// A fresh operation id (never 0).
    pub(crate) fn id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    pub fn win(&self, id: u32) -> Result<&Win> {
        match self.wins.get(id as usize) {
            Some(Some(w)) => Ok(w),
            _ => err!(Win, "invalid window (MPI_WIN_NULL or freed)"),
        }
    }

    pub fn win_mut(&mut self, id: u32) -> Result<&mut Win> {
        match self.wins.get_mut(id as usize) {
            Some(Some(w)) => Ok(w),
            _ => err!(Win, "invalid window (MPI_WIN_NULL or freed)"),
        }
    }

    /// Windows alive (diagnostics, finalize).
    pub fn live(&self) -> usize {
        self.wins.iter().filter(|w| w.is_some()).count()
    }

    /// Queue a frame that leaves at the next progress pass at the latest.
    pub(crate) fn send(&mut self, to: Gpid, hdr: frame::RmaHeader, payload: Vec<u8>) {
        self.hard = true;
        self.queue(to, hdr, payload);
    }

    /// Queue a small write (Put, Acc without FETCH), which may wait: MPI completes it only at
    /// a flush, unlock, fence or complete (each pushes the outbox, `Engine::rma_push`), so
    /// writes issued one after another leave together, in one write to the socket, and a
    /// flush after them rides on the last one ([`State::ack_last`]). Any other frame, or
    /// [`SOFT_MAX`] bytes of them, sends them on at the next progress pass.
    pub(crate) fn send_soft(&mut self, to: Gpid, hdr: frame::RmaHeader, payload: Vec<u8>) {
        self.soft_bytes += payload.len() + HEADER_LEN;
        self.queue(to, hdr, payload);
    }

    /// Queue a frame whose data (`len` bytes at `ptr`, after `payload`) is sent from memory
    /// that stays valid and unchanged until `release` is done (see [`Lend`]); it leaves at the
    /// next progress pass at the latest. The wait starts now: a put's target counts it as
    /// outstanding, a window counts an answer lent from it.
    pub(crate) fn send_lent(
        &mut self,
        to: Gpid,
        hdr: frame::RmaHeader,
        payload: Vec<u8>,
        ptr: *const u8,
        len: usize,
        release: Release,
    ) {
        self.hold(release);
        self.send(to, hdr, payload);
        self.outbox.back_mut().expect("just queued").lend = Some(Lend { ptr, len, release });
    }

    fn hold(&mut self, r: Release) {
        match r {
            Release::Origin { win, target } => {
                if let Ok(w) = self.win_mut(win) {
                    w.peers[target].outstanding += 1;
                }
            }
            Release::Answer { win } => {
                if let Ok(w) = self.win_mut(win) {
                    w.lent += 1;
                }
            }
        }
    }

    fn release(&mut self, r: Release) {
        match r {
            Release::Origin { win, target } => {
                if let Ok(w) = self.win_mut(win) {
                    let p = &mut w.peers[target];
                    p.outstanding = p.outstanding.saturating_sub(1);
                }
            }
            Release::Answer { win } => {
                if let Ok(w) = self.win_mut(win) {
                    w.lent = w.lent.saturating_sub(1);
                }
            }
        }
    }

    /// Give back the memory of lent frames the transports have written out.
    pub(crate) fn sweep_lent(&mut self, reqs: &mut Slab) {
        let mut i = 0;
        while i < self.lent.len() {
            let (slot, r) = self.lent[i];
            if reqs.get(slot).is_none_or(|q| q.inflight == 0) {
                reqs.remove(slot);
                self.lent.swap_remove(i);
                self.release(r);
            } else {
                i += 1;
            }
        }
    }

    /// The parity flag of window `ctx`'s counted fences, for its requests.
    fn stamp(&self, ctx: ContextId) -> u8 {
        let odd = self
            .by_ctx
            .get(&ctx)
            .and_then(|&w| self.wins[w as usize].as_ref())
            .is_some_and(|w| w.counted & 1 == 1);
        if odd {
            frame::RMA_ODD
        } else {
            0
        }
    }

    /// Add a small put (target segments `segs`, data `data`) to the last frame queued, if that
    /// is a small put to the same process on the same window in the same epoch that has not
    /// left yet: one frame, one header and one segment list for a run of small puts (the
    /// target applies the segments in order, as it would the frames). False: queue a frame.
    pub(crate) fn merge_put(
        &mut self,
        to: Gpid,
        ctx: ContextId,
        segs: &[(u64, u64)],
        data: &[u8],
    ) -> bool {
        let stamp = self.stamp(ctx);
        let Some(o) = self.outbox.back_mut() else {
            return false;
        };
        if o.lend.is_some() {
            return false;
        }
        let had = match &o.merged {
            Some(m) => m.1.len() + frame::SEG_LEN * m.0.len(),
            None => o.payload.len() + frame::SEG_LEN,
        };
        if o.to != to || had + data.len() + frame::SEG_LEN * segs.len() > MERGE_MAX {
            return false;
        }
        let Ok(mut h) = frame::RmaHeader::decode(&o.hdr) else {
            return false;
        };
        if h.kind != frame::RmaKind::Put || h.win != ctx || h.flags != stamp {
            return false;
        }
        if o.merged.is_none() {
            let mut first = if h.nsegs == 0 {
                (vec![(h.disp, h.len as u64)], std::mem::take(&mut o.payload))
            } else {
                match frame::take_segments(&o.payload, h.nsegs) {
                    Ok((s, d)) => (s, d.to_vec()),
                    Err(_) => return false,
                }
            };
            // Room for a run of small puts at once (the vectors grew by doubling: a tenth
            // of a stream of 8-byte puts went to reallocation).
            first.0.reserve(63);
            first.1.reserve(MERGE_MAX / 4);
            h.nsegs = first.0.len() as u32;
            h.disp = 0;
            o.payload = Vec::new();
            o.merged = Some(Box::new(first));
        }
        let m = o.merged.as_mut().expect("just made");
        m.0.extend_from_slice(segs);
        m.1.extend_from_slice(data);
        h.nsegs += segs.len() as u32;
        h.len += data.len() as u32;
        o.hdr = h.encode();
        self.soft_bytes += data.len() + frame::SEG_LEN * segs.len();
        true
    }

    /// A request carries the parity of its window's counted fences.
    fn queue(&mut self, to: Gpid, mut hdr: frame::RmaHeader, payload: Vec<u8>) {
        if !hdr.kind.is_answer() {
            hdr.flags |= self.stamp(hdr.win);
        }
        self.outbox.push_back(Out {
            to,
            hdr: hdr.encode(),
            payload,
            merged: None,
            lend: None,
        });
    }

    /// Have the last frame queued for `to`, if it is a write on window `ctx` that has not left
    /// yet, acknowledged with `id` once applied (`frame::RMA_ACK`), where a Flush frame after
    /// it would have been: one frame less each way of a put and its flush.
    pub(crate) fn ack_last(&mut self, to: Gpid, ctx: ContextId, id: u32) -> bool {
        let Some(o) = self.outbox.iter_mut().rev().find(|o| o.to == to) else {
            return false;
        };
        let Ok(mut h) = frame::RmaHeader::decode(&o.hdr) else {
            return false;
        };
        let write = match h.kind {
            frame::RmaKind::Put => true,
            frame::RmaKind::Acc => h.flags & frame::RMA_FETCH == 0,
            _ => false,
        };
        if !write || h.win != ctx || h.flags & frame::RMA_ACK != 0 {
            return false;
        }
        h.flags |= frame::RMA_ACK;
        h.id = id;
        o.hdr = h.encode();
        true
    }

    /// Push queued frames to the transports; a peer that says "not now" keeps its frames (and
    /// their order) for the next pass. A lent frame's token is the wire id of a request slot
    /// in `reqs` (unique among the engine's tokens); the transport reports it to the
    /// point-to-point engine, and [`State::sweep_lent`] gives the memory back.
    pub fn flush<T: Transport>(&mut self, io: &mut T, reqs: &mut Slab) {
        let mut blocked: Vec<Gpid> = Vec::new();
        let mut keep = VecDeque::new();
        while let Some(mut o) = self.outbox.pop_front() {
            if let Some(m) = o.merged.take() {
                let (segs, data) = *m;
                let mut p = Vec::with_capacity(frame::SEG_LEN * segs.len() + data.len());
                frame::put_segments(&mut p, &segs);
                p.extend_from_slice(&data);
                o.payload = p;
            }
            if blocked.contains(&o.to) {
                keep.push_back(o);
                continue;
            }
            // A lent body goes with a token: the wire id of an internal request slot.
            let lent = o.lend.as_ref().map(|l| {
                let comm = match l.release {
                    Release::Origin { win, .. } | Release::Answer { win } => self
                        .win(win)
                        .map_or(crate::mpi::comm::COMM_WORLD, |w| w.comm),
                };
                let mut q = Request::new(Kind::Done, comm);
                q.internal = true;
                q.inflight = 1;
                let slot = reqs.insert(q);
                // SAFETY: the lender keeps `len` bytes at `ptr` valid and unchanged until the
                // release is done (`Lend`), which happens only once the transport is done.
                let body = unsafe { std::slice::from_raw_parts(l.ptr, l.len) };
                (slot, l.release, body)
            });
            // A small payload goes as the transport's copied part, so that a held output
            // (`Engine::rma_push`) keeps it and writes the frames together; a lent one would
            // be written at once.
            let (small, body, token): (&[u8], &[u8], Token) = match &lent {
                Some((slot, _, body)) => (&o.payload, body, Token(reqs.wire_id(*slot))),
                None if o.payload.len() <= COPY_MAX => (&o.payload, &[], Token::NONE),
                None => (&[], &o.payload, Token::NONE),
            };
            let sent = io.send(o.to, &o.hdr, small, body, token);
            if let Some((slot, r, _)) = lent {
                match sent {
                    Ok(crate::transport::Sent::Pending) => self.lent.push((slot, r)),
                    Err(crate::transport::SendError::NotNow) => {
                        reqs.remove(slot);
                    }
                    Ok(crate::transport::Sent::Done) | Err(_) => {
                        reqs.remove(slot);
                        self.release(r);
                    }
                }
            }
            match sent {
                Ok(_) => {}
                Err(crate::transport::SendError::NotNow) => {
                    blocked.push(o.to);
                    keep.push_back(o);
                }
                Err(crate::transport::SendError::Failed(why)) => {
                    if self.verbose {
                        eprintln!("Protean: one-sided frame to process {} lost: {why}", o.to);
                    }
                }
            }
        }
        self.outbox = keep;
        self.hard = !self.outbox.is_empty();
        if !self.hard {
            self.soft_bytes = 0;
        }
    }
}

/// What the transports deliver to: RMA frames to the RMA layer, the rest to the
/// point-to-point engine (one compare on the message path).
pub struct Sink<'a> {
    pub pml: &'a mut Pml,
    pub rma: &'a mut State,
}

impl FrameSink for Sink<'_> {
    #[inline(always)]
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
        if frame::is_rma(hdr) {
            self.rma.on_frame(self.pml, from, hdr, payload);
        } else {
            self.pml.on_frame(from, hdr, payload);
        }
    }

    #[inline]
    fn place(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
        if frame::is_rma(hdr) {
            return self.rma.place(from, hdr, len);
        }
        self.pml.place(from, hdr, len)
    }

    fn placed(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) {
        if frame::is_rma(hdr) {
            return self.rma.placed(self.pml, from, hdr, len);
        }
        self.pml.placed(from, hdr, len)
    }

    fn on_sent(&mut self, token: Token) {
        self.pml.on_sent(token)
    }

    fn on_got(&mut self, token: Token, result: std::result::Result<(), String>) {
        self.pml.on_got(token, result)
    }

    fn on_peer_lost(&mut self, peer: Gpid, why: &str) {
        self.pml.on_peer_lost(peer, why)
    }

    fn on_caps(&mut self, peer: Gpid, caps: crate::transport::Caps) {
        self.pml.on_caps(peer, caps)
    }
}

// ---------------------------------------------------------------------------------------------
// Creation

/// Where a local group's members are in their host segment.
struct Layout {
    /// Offset of each local member's control block, by local index.
    ctl: Vec<usize>,
    /// Offset of each local member's window memory (allocated flavors), by local index.
    data: Vec<usize>,
    total: usize,
}

fn layout(sizes: &[usize], with_data: bool, contiguous: bool) -> Layout {
    let n = sizes.len();
    let ctl: Vec<usize> = (0..n).map(|i| i * CTL_BYTES).collect();
    let mut at = (n * CTL_BYTES).div_ceil(4096) * 4096;
    let mut data = Vec::with_capacity(n);
    for &s in sizes {
        if with_data {
            if !contiguous {
                at = at.div_ceil(64) * 64;
            }
            data.push(at);
            at += s;
        } else {
            data.push(0);
        }
    }
    Layout {
        ctl,
        data,
        total: at.max(n * CTL_BYTES),
    }
}

/// What each member tells every other when a window is made.
struct Card {
    size: u64,
    disp_unit: u64,
    region: Region,
    /// It can expose memory to its host's processes (attached regions of a dynamic window).
    exposes: bool,
    /// It would fence through the control blocks (`rma_fastpath` when the window was made).
    fence_shm: bool,
}

impl Card {
    const LEN: usize = 16 + REGION_LEN + 2;

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.extend_from_slice(&self.size.to_le_bytes());
        v.extend_from_slice(&self.disp_unit.to_le_bytes());
        v.extend_from_slice(&self.region.0);
        v.push(self.exposes as u8);
        v.push(self.fence_shm as u8);
        v
    }

    fn decode(b: &[u8]) -> Result<Card> {
        if b.len() != Self::LEN {
            return err!(
                Intern,
                "window creation: a member's description is malformed"
            );
        }
        Ok(Card {
            size: u64::from_le_bytes(b[0..8].try_into().expect("8")),
            disp_unit: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            region: Region(b[16..16 + REGION_LEN].try_into().expect("region")),
            exposes: b[16 + REGION_LEN] != 0,
            fence_shm: b[17 + REGION_LEN] != 0,
        })
    }
}

fn info_flag(info: &[(String, String)], key: &str) -> bool {
    info.iter()
        .rev()
        .find(|(k, _)| k == key)
        .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
}

/// The hints a window knows (others are ignored, as MPICH does).
const HINTS: &[&str] = &[
    "no_locks",
    "accumulate_ordering",
    "accumulate_ops",
    "same_size",
    "same_disp_unit",
    "mpi_accumulate_granularity",
    "alloc_shared_noncontig",
];

/// Add hints to a window's (MPI_Win_set_info): known keys only.
pub fn set_hints(have: &mut Vec<(String, String)>, set: &[(String, String)]) {
    for (k, val) in set {
        if !HINTS.contains(&k.as_str()) {
            continue;
        }
        match have.iter_mut().find(|(x, _)| x == k) {
            Some(e) => e.1 = val.clone(),
            None => have.push((k.clone(), val.clone())),
        }
    }
}

/// The hints a window reports (MPI_Win_get_info): the defaults, then what was set.
fn effective_info(flavor: Flavor, set: &[(String, String)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        ("no_locks".into(), "false".into()),
        ("accumulate_ordering".into(), "rar,raw,war,waw".into()),
        ("accumulate_ops".into(), "same_op_no_op".into()),
        ("same_size".into(), "false".into()),
        ("same_disp_unit".into(), "false".into()),
        ("mpi_accumulate_granularity".into(), "0".into()),
    ];
    if flavor == Flavor::Shared {
        v.push(("alloc_shared_noncontig".into(), "false".into()));
    }
    set_hints(&mut v, set);
    v
}

/// MPI_Win_create, MPI_Win_allocate, MPI_Win_allocate_shared, MPI_Win_create_dynamic:
/// collective over `comm`. `base` is the user's memory for MPI_Win_create. Returns the window
/// and its memory.
///
/// # Safety
/// For MPI_Win_create, `base` holds `size` bytes until the window is freed.
pub unsafe fn create(
    flavor: Flavor,
    base: *mut u8,
    size: i64,
    disp_unit: i64,
    info: Vec<(String, String)>,
    comm: CommId,
) -> Result<(u32, *mut u8)> {
    if size < 0 {
        return err!(Size, "negative window size {size}");
    }
    if disp_unit <= 0 {
        return err!(Disp, "displacement unit {disp_unit} is not positive");
    }
    if flavor == Flavor::Create && size > 0 && base.is_null() {
        return err!(Base, "null base for a window of {size} bytes");
    }
    let (size, disp_unit) = (size as usize, disp_unit as usize);
    let spec = with(|e| -> Result<_> {
        let c = e.live_comm(comm)?;
        if c.is_inter() {
            return err!(Comm, "windows are made over intracommunicators");
        }
        if flavor == Flavor::Shared {
            let h = &e.hosts[e.me.idx()];
            if let Some(g) = c.group.iter().find(|g| &e.hosts[(**g).idx()] != h) {
                return err!(
                    RmaShared,
                    "MPI_Win_allocate_shared needs every process of the communicator on one host (rank {} is on {}, this one on {h})",
                    c.group.iter().position(|x| x == g).unwrap_or(0),
                    e.hosts[g.idx()]
                );
            }
        }
        e.op_dup(comm, None)
    })??;
    let wcomm = crate::mpi::cm::run(spec)?
        .ok_or_else(|| crate::mpi_error!(Intern, "window creation: no communicator"))?;
    let made = build(flavor, base, size, disp_unit, info, wcomm);
    if made.is_err() {
        let _ = with(|e| e.free_comm(wcomm));
    }
    made
}

/// The rest of [`create`], over the window's own communicator.
unsafe fn build(
    flavor: Flavor,
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    info: Vec<(String, String)>,
    wcomm: CommId,
) -> Result<(u32, *mut u8)> {
    // 1. Every member tells every other its size, unit and (for user memory) its region.
    let (n, me, group, card) = with(|e| -> Result<_> {
        let (csize, crank, cgroup) = {
            let c = e.live_comm(wcomm)?;
            (c.size(), c.rank as usize, c.group.clone())
        };
        let exposed = if flavor == Flavor::Create && size > 0 {
            e.net.expose_any(Span::new(base, size))
        } else {
            None
        };
        let probe = [0u8; 1];
        let exposes = e.net.expose_any(Span::of(&probe)).is_some();
        let card = Card {
            size: size as u64,
            disp_unit: if flavor == Flavor::Dynamic {
                1
            } else {
                disp_unit as u64
            },
            region: exposed.unwrap_or(Region::NONE),
            exposes,
            fence_shm: e.cfg.rma_fastpath,
        };
        Ok((csize, crank, cgroup, card))
    })??;
    let cards: Vec<Card> = crate::mpi::cm::exchange_all(wcomm, vec![card.encode(); n])?
        .iter()
        .map(|b| Card::decode(b))
        .collect::<Result<_>>()?;

    // 2. The members on each host share a segment for their control blocks (and their
    //    memory, for the allocating flavors); its first member makes it.
    let (hosts, my_host) = with(|e| {
        (
            group
                .iter()
                .map(|g| e.hosts[g.idx()].clone())
                .collect::<Vec<_>>(),
            e.hosts[e.me.idx()].clone(),
        )
    })?;
    let local: Vec<usize> = (0..n).filter(|&j| hosts[j] == my_host).collect();
    let li = local.iter().position(|&j| j == me).expect("we are local");
    let allocates = matches!(flavor, Flavor::Allocate | Flavor::Shared);
    let contiguous = flavor == Flavor::Shared && !info_flag(&info, "alloc_shared_noncontig");
    let shared = local.len() > 1 || flavor == Flavor::Shared;
    let sizes: Vec<usize> = local.iter().map(|&j| cards[j].size as usize).collect();
    let lay = layout(&sizes, allocates, contiguous);
    let mut seg = None;
    let mut msgs = vec![Vec::new(); n];
    if shared && li == 0 {
        let s = with(|e| {
            e.rma.serial = e.rma.serial.wrapping_add(1);
            HostMem::create(&e.jobid, e.me, e.rma.serial, lay.total)
        })?
        .map_err(|err| {
            crate::mpi_error!(
                NoMem,
                "cannot make {} bytes of shared memory for a window: {err}",
                lay.total
            )
        })?;
        for &j in &local[1..] {
            msgs[j] = s.desc().0.to_vec();
        }
        seg = Some(s);
    }
    let got = crate::mpi::cm::exchange_all(wcomm, msgs)?;
    if shared && li > 0 {
        let leader = local[0];
        let desc: [u8; REGION_LEN] = got[leader].as_slice().try_into().map_err(|_| {
            crate::mpi_error!(Intern, "window creation: malformed segment description")
        })?;
        let jobid = with(|e| e.jobid.clone())?;
        seg = Some(HostMem::open(&jobid, &Region(desc)).map_err(|err| {
            crate::mpi_error!(
                NoMem,
                "cannot map the shared memory of a window made by rank {leader}: {err}"
            )
        })?);
    }
    // Some host has a segment (the same answer at every member: the barrier is collective).
    let any_shared = flavor == Flavor::Shared || (0..n).any(|j| hosts[..j].contains(&hosts[j]));
    if any_shared {
        // Everyone on the host has mapped the segment before its name goes.
        crate::mpi::coll::barrier(wcomm)?;
        if let Some(s) = seg.as_mut() {
            s.unlink();
        }
    }

    // 3. Our memory and control block, and how we reach every member.
    let mut heap = None;
    let mut own_ctl = None;
    let seg_base = seg.as_ref().map(|s| s.base());
    let mem = match flavor {
        Flavor::Create => base,
        Flavor::Dynamic => std::ptr::null_mut(),
        _ => match seg_base {
            Some(b) => b.add(lay.data[li]),
            None => {
                let l = std::alloc::Layout::from_size_align(size.max(1), 64)
                    .map_err(|_| crate::mpi_error!(NoMem, "window of {size} bytes"))?;
                let p = std::alloc::alloc_zeroed(l);
                if p.is_null() {
                    return err!(NoMem, "cannot allocate {size} bytes for a window");
                }
                heap = Some((p, l));
                p
            }
        },
    };
    let ctl: *const Ctl = match seg_base {
        Some(b) => b.add(lay.ctl[li]) as *const Ctl,
        None => {
            let c = Ctl::boxed();
            let p = &*c as *const Ctl;
            own_ctl = Some(c);
            p
        }
    };
    with(|e| -> Result<(u32, *mut u8)> {
        let ctx = e.live_comm(wcomm)?.ctx;
        let mut peers = Vec::with_capacity(n);
        for (j, card) in cards.iter().enumerate() {
            let g = group[j];
            let lj = local.iter().position(|&x| x == j);
            let route = e.net.route(g);
            let pctl = match (seg_base, lj) {
                (Some(b), Some(l)) => b.add(lay.ctl[l]) as *const Ctl,
                _ => std::ptr::null(),
            };
            let mech = if j == me {
                if flavor == Flavor::Dynamic {
                    Mech::SelfDyn
                } else {
                    Mech::Direct(mem)
                }
            } else if route == Route::Shm && lj.is_some() {
                match flavor {
                    Flavor::Allocate | Flavor::Shared => match (seg_base, lj) {
                        (Some(b), Some(l)) => Mech::Direct(b.add(lay.data[l])),
                        _ => Mech::Am,
                    },
                    Flavor::Create if !card.region.is_none() => Mech::Cma(Some(card.region)),
                    Flavor::Dynamic if card.exposes && !pctl.is_null() => Mech::Cma(None),
                    _ => Mech::Am,
                }
            } else {
                Mech::Am
            };
            peers.push(Peer {
                gpid: g,
                size: card.size,
                disp_unit: card.disp_unit,
                mech,
                ctl: pctl,
                unflushed: false,
                outstanding: 0,
                sent_ops: 0,
                fence_total: 0,
                fence_wait: false,
                posts: 0,
                completes: 0,
                lock: None,
                lock_direct: false,
                lock_nocheck: false,
            });
        }
        if e.cfg.verbose >= 2 {
            let mechs: Vec<&str> = peers.iter().map(|p| p.mech.name()).collect();
            eprintln!(
                "Protean[{}]: window ctx {ctx} ({flavor:?}, {size} bytes): {mechs:?}",
                e.rank
            );
        }
        let exposed = (!cards[me].region.is_none()).then_some(cards[me].region);
        // Members reach us by frames where we reach them by frames (routes are symmetric),
        // and every local member does where our memory is not exposed to them.
        let unexposed = match flavor {
            Flavor::Create => cards[me].region.is_none(),
            Flavor::Dynamic => !cards[me].exposes,
            _ => false,
        };
        let am = peers.iter().any(|p| p.mech == Mech::Am) || (n > 1 && unexposed);
        // Every member's control block is mapped here (all on this host; alone: none to wait
        // for), and everyone asked: the same answer at every member.
        let fence_shm = cards.iter().all(|c| c.fence_shm)
            && peers
                .iter()
                .enumerate()
                .all(|(j, p)| j == me || !p.ctl.is_null());
        let w = Win {
            comm: wcomm,
            ctx,
            rank: me,
            flavor,
            base: mem,
            size: if flavor == Flavor::Dynamic { 0 } else { size },
            disp_unit: if flavor == Flavor::Dynamic {
                1
            } else {
                disp_unit
            },
            name: String::new(),
            info: effective_info(flavor, &info),
            errhandler: crate::mpi::comm::ERRH_FATAL,
            rank_of: group.iter().enumerate().map(|(j, g)| (*g, j)).collect(),
            peers,
            ctl,
            _own_ctl: own_ctl.take(),
            seg: seg.take(),
            heap,
            exposed,
            attached: Vec::new(),
            atomic: allocates,
            am,
            applied_ops: 0,
            counted: 0,
            deferred: Vec::new(),
            deferred_bytes: 0,
            lent: 0,
            fence_shm,
            fence_gen: 0,
            fence_open: false,
            access: None,
            exposure: None,
            lock_all: false,
            error: None,
        };
        let id = match e.rma.wins.iter().position(|w| w.is_none()) {
            Some(i) => {
                e.rma.wins[i] = Some(w);
                i as u32
            }
            None => {
                e.rma.wins.push(Some(w));
                (e.rma.wins.len() - 1) as u32
            }
        };
        e.rma.by_ctx.insert(ctx, id);
        e.rma.verbose = e.cfg.verbose > 0;
        e.rma_replay(ctx);
        Ok((id, mem))
    })?
}

/// MPI_Win_free: collective; every epoch must be over.
pub fn free(win: u32) -> Result<()> {
    let comm = with(|e| -> Result<CommId> {
        let w = e.rma.win(win)?;
        if w.lock_all || w.peers.iter().any(|p| p.lock.is_some()) {
            return err!(
                RmaSync,
                "the window is still locked (call MPI_Win_unlock / MPI_Win_unlock_all first)"
            );
        }
        if w.access.is_some() || w.exposure.is_some() {
            return err!(
                RmaSync,
                "a post-start-complete-wait epoch of the window is still open"
            );
        }
        Ok(w.comm)
    })??;
    // Operations of every member on our memory are complete once every member has completed
    // its epochs and reached this barrier.
    sync::settle_all(win)?;
    crate::mpi::coll::barrier(comm)?;
    // Answers sent from our memory are read by the transports until written out.
    wait(|e| e.rma.win(win).map_or(true, |w| w.lent == 0))?;
    with(|e| -> Result<()> {
        let w = e.rma.wins[win as usize].take().expect("checked");
        e.rma.by_ctx.remove(&w.ctx);
        if let Some(r) = w.exposed {
            e.net.retract(e.me, &r);
        }
        for a in &w.attached {
            if !a.region.is_none() {
                e.net.retract(e.me, &a.region);
            }
        }
        if let Some((p, l)) = w.heap {
            // SAFETY: allocated in `build` with this layout; the window is gone.
            unsafe { std::alloc::dealloc(p, l) };
        }
        e.rma.locks.retain(|l| l.win != win);
        e.free_comm(w.comm)
    })?
}

/// MPI_Win_attach: make `size` bytes at `base` accessible in a dynamic window.
///
/// # Safety
/// The memory stays valid until it is detached.
pub unsafe fn attach(win: u32, base: *mut u8, size: i64) -> Result<()> {
    with(|e| -> Result<()> {
        if size < 0 {
            return err!(Size, "negative size {size}");
        }
        let w = e.rma.win(win)?;
        if w.flavor != Flavor::Dynamic {
            return err!(
                RmaFlavor,
                "memory can be attached only to a window made by MPI_Win_create_dynamic"
            );
        }
        if size == 0 {
            return Ok(());
        }
        if base.is_null() {
            return err!(Base, "null base");
        }
        let (b, l) = (base as u64, size as u64);
        if w.attached
            .iter()
            .any(|a| b < a.base + a.len && a.base < b + l)
        {
            return err!(
                RmaAttach,
                "the memory overlaps a region already attached to the window"
            );
        }
        let region = e
            .net
            .expose_any(Span::new(base, size as usize))
            .unwrap_or(Region::NONE);
        let w = e.rma.win_mut(win)?;
        w.attached.push(Attached {
            base: b,
            len: l,
            region,
        });
        w.ctl().publish(&w.attached);
        Ok(())
    })?
}

/// MPI_Win_detach.
pub fn detach(win: u32, base: *const u8) -> Result<()> {
    with(|e| -> Result<()> {
        let w = e.rma.win_mut(win)?;
        if w.flavor != Flavor::Dynamic {
            return err!(
                RmaFlavor,
                "memory can be detached only from a window made by MPI_Win_create_dynamic"
            );
        }
        let Some(i) = w.attached.iter().position(|a| a.base == base as u64) else {
            return err!(
                RmaAttach,
                "no region attached to the window starts at {base:p}"
            );
        };
        let a = w.attached.remove(i);
        w.ctl().publish(&w.attached);
        if !a.region.is_none() {
            e.net.retract(e.me, &a.region);
        }
        Ok(())
    })?
}

/// MPI_Win_shared_query: the size, unit and address (here) of `rank`'s memory when this
/// process can load and store it directly (size 0 and null otherwise, and null for a member
/// that gave size 0); MPI_PROC_NULL (-1) asks for the first member with memory.
pub fn shared_query(win: u32, rank: i32) -> Result<(u64, u64, *mut u8)> {
    with(|e| -> Result<_> {
        let w = e.rma.win(win)?;
        let direct = |p: &Peer| match p.mech {
            Mech::Direct(b) if w.flavor != Flavor::Dynamic => Some(b),
            _ => None,
        };
        if rank == -1 {
            for (j, p) in w.peers.iter().enumerate() {
                if p.size > 0 {
                    let b = direct(p).or_else(|| match (w.flavor, w.seg.as_ref()) {
                        (Flavor::Shared, Some(s)) if !p.ctl.is_null() => shared_address(w, s, j),
                        _ => None,
                    });
                    if let Some(b) = b {
                        return Ok((p.size, p.disp_unit, b));
                    }
                }
            }
            return Ok((0, 0, std::ptr::null_mut()));
        }
        let p = w
            .peers
            .get(rank as usize)
            .filter(|_| rank >= 0)
            .ok_or_else(|| {
                crate::mpi_error!(
                    Rank,
                    "rank {rank} is out of range for a window of {} processes",
                    w.peers.len()
                )
            })?;
        if p.size == 0 {
            // No memory: no address (as MPICH answers), not where its memory
            // would have begun in the segment.
            return Ok((0, p.disp_unit, std::ptr::null_mut()));
        }
        let mut b = direct(p);
        if b.is_none() && w.flavor == Flavor::Shared {
            // A member on this host reached by TCP: its memory is still mapped here.
            if let (Some(s), false) = (w.seg.as_ref(), p.ctl.is_null()) {
                b = shared_address(w, s, rank as usize);
            }
        }
        Ok(match b {
            Some(b) => (p.size, p.disp_unit, b),
            None => (0, p.disp_unit, std::ptr::null_mut()),
        })
    })?
}

/// The address of member `j`'s memory in a shared window's segment, recomputed from the
/// layout (for members whose data goes through active messages).
fn shared_address(w: &Win, s: &HostMem, j: usize) -> Option<*mut u8> {
    let local: Vec<usize> = (0..w.peers.len())
        .filter(|&k| !w.peers[k].ctl.is_null())
        .collect();
    let sizes: Vec<usize> = local.iter().map(|&k| w.peers[k].size as usize).collect();
    let contiguous = !info_flag(&w.info, "alloc_shared_noncontig");
    let lay = layout(&sizes, true, contiguous);
    let l = local.iter().position(|&k| k == j)?;
    Some(s.base().wrapping_add(lay.data[l]))
}

impl Engine {
    /// Hand the frames that arrived for window `ctx` before it was made to it.
    fn rma_replay(&mut self, ctx: ContextId) {
        if self.rma.early.is_empty() {
            return;
        }
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.rma.early)
            .into_iter()
            .partition(|(_, h, _)| frame::RmaHeader::decode(h).is_ok_and(|h| h.win == ctx));
        self.rma.early = rest;
        self.rma.early_bytes = self.rma.early.iter().map(|(_, _, p)| p.len()).sum();
        for (from, h, p) in mine {
            self.rma.on_frame(&mut self.pml, from, &h, &p);
        }
    }

    /// Leave a counted fence on window `win` ([`sync::fence`]): the next epoch begins here, so
    /// its requests that came early are applied now, in the order they came.
    pub(crate) fn rma_next_epoch(&mut self, win: u32) -> Result<()> {
        let w = self.rma.win_mut(win)?;
        w.counted += 1;
        // Everything sent before this fence is applied at its target now.
        w.peers.iter_mut().for_each(|p| p.unflushed = false);
        let early = std::mem::take(&mut w.deferred);
        w.deferred_bytes = 0;
        for (from, h, p) in early {
            self.rma.on_frame(&mut self.pml, from, &h, &p);
        }
        Ok(())
    }

    /// A progress pass at the start of a call on window `win` when active messages may
    /// arrive for it (see [`Win::am`]).
    #[inline]
    pub(crate) fn rma_poke(&mut self, win: u32) {
        if self.rma.win(win).is_ok_and(|w| w.am) {
            self.progress_p2p();
        }
    }

    /// Give a window's progress its part of the pass: grant locks, push frames.
    #[inline]
    pub fn rma_progress(&mut self) {
        if !self.rma.locks.is_empty() {
            self.rma.grant_locks();
        }
        if !self.rma.outbox.is_empty() {
            self.rma_push();
        }
        if !self.rma.lent.is_empty() {
            self.rma.sweep_lent(&mut self.pml.reqs);
        }
    }

    /// Send every queued RMA frame, those to one peer in one write where the transport
    /// can (`Transport::hold`).
    pub(crate) fn rma_push(&mut self) {
        self.net.hold();
        self.rma.flush(&mut self.net, &mut self.pml.reqs);
        self.net.release(&mut self.pml);
    }
}

/// Wait until `done` holds for the engine, making progress meanwhile.
pub(crate) fn wait(done: impl FnMut(&mut Engine) -> bool) -> Result<()> {
    global::wait_until(done)
}

/// A window error, for the C layer to raise on the window's handler.
pub fn win_err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::frame::{RmaHeader, RmaKind, RMA_ACK};

    #[test]
    fn small_writes_wait_and_a_flush_rides_on_the_last() {
        let (a, b) = (Gpid::new(1), Gpid::new(2));
        let (w1, w2) = (ContextId::new(7), ContextId::new(8));
        let mut s = State::default();
        let put = |win| {
            let mut h = RmaHeader::new(RmaKind::Put, win);
            h.len = 8;
            h
        };
        s.send_soft(a, put(w1), vec![1; 8]);
        s.send_soft(b, put(w1), vec![2; 8]);
        assert!(
            !s.busy(),
            "small writes wait for a call that completes them"
        );
        // The last frame to `a` is a write on w1: marked, no Flush frame needed.
        assert!(s.ack_last(a, w1, 42));
        let h = RmaHeader::decode(&s.outbox[0].hdr).unwrap();
        assert_eq!((h.flags & RMA_ACK, h.id), (RMA_ACK, 42));
        // Not twice, not for another window, not for a peer with nothing queued.
        assert!(!s.ack_last(a, w1, 43));
        assert!(!s.ack_last(b, w2, 44));
        assert!(!s.ack_last(Gpid::new(3), w1, 45));
        // A read is answered by its data: a flush after it needs a frame of its own.
        s.send(b, RmaHeader::new(RmaKind::Get, w1), Vec::new());
        assert!(s.busy(), "any other frame leaves at the next pass");
        assert!(!s.ack_last(b, w1, 46));
        // Small puts merge into the last frame while it is theirs: to `c` on w1, three puts
        // in one frame (segments first, then the data, in order).
        let c = Gpid::new(3);
        let mut m = State::default();
        let mut h = put(w1);
        h.disp = 100;
        m.send_soft(c, h, vec![1; 8]);
        assert!(m.merge_put(c, w1, &[(200, 4)], &[2; 4]));
        assert!(m.merge_put(c, w1, &[(300, 2), (310, 2)], &[3; 4]));
        assert!(!m.merge_put(b, w1, &[(0, 1)], &[4]), "another target");
        assert!(!m.merge_put(c, w2, &[(0, 1)], &[4]), "another window");
        assert!(!m.merge_put(c, w1, &[(0, 5000)], &[0; 5000]), "too large");
        assert!(m.ack_last(c, w1, 9));
        assert!(
            !m.merge_put(c, w1, &[(0, 1)], &[4]),
            "a marked frame is closed"
        );
        let mut io = crate::transport::selfloop::SelfLoop::new(c);
        m.flush(&mut io, &mut Slab::default());
        struct Got(Vec<([u8; HEADER_LEN], Vec<u8>)>);
        impl crate::transport::FrameSink for Got {
            fn on_frame(&mut self, _: Gpid, h: &[u8; HEADER_LEN], p: &[u8]) {
                self.0.push((*h, p.to_vec()));
            }
            fn on_sent(&mut self, _: crate::transport::Token) {}
        }
        let mut got = Got(Vec::new());
        crate::transport::Transport::progress(&mut io, &mut got);
        assert_eq!(got.0.len(), 1);
        let h = RmaHeader::decode(&got.0[0].0).unwrap();
        assert_eq!((h.nsegs, h.len, h.id, h.flags), (4, 16, 9, RMA_ACK));
        let (segs, data) = frame::take_segments(&got.0[0].1, h.nsegs).unwrap();
        assert_eq!(segs, vec![(100, 8), (200, 4), (300, 2), (310, 2)]);
        assert_eq!(data, &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);

        // Enough small writes leave on their own.
        let mut t = State::default();
        while !t.busy() {
            t.send_soft(a, put(w1), vec![0; 1024]);
        }
        assert!(t.soft_bytes > SOFT_MAX);
        // Pushed (to a transport that takes everything): nothing waits any more.
        let mut io = crate::transport::selfloop::SelfLoop::new(a);
        t.outbox.retain(|o| o.to == a);
        t.flush(&mut io, &mut Slab::default());
        assert!(t.outbox.is_empty() && !t.busy() && t.soft_bytes == 0);
    }

    #[test]
    fn lent_frames_are_held_until_the_transport_gives_them_back() {
        use crate::mpi::pml::tests::Wire;
        let to = Gpid::new(1);
        let data = vec![7u8; 100];
        let mut s = State::default();
        let mut reqs = Slab::default();
        let rel = Release::Answer { win: 3 };
        let mut h = RmaHeader::new(RmaKind::Data, ContextId::new(5));
        h.len = 100;
        // A transport that keeps the body: the frame's slot waits with one write in flight.
        let mut io = Wire::default();
        io.pending = true;
        s.send_lent(to, h, Vec::new(), data.as_ptr(), data.len(), rel);
        assert!(s.busy(), "a lent frame leaves at the next pass");
        s.flush(&mut io, &mut reqs);
        assert_eq!(io.frames.len(), 1);
        assert_eq!(
            io.frames[0].1, data,
            "the data is the lender's, not a copy's"
        );
        assert_eq!(s.lent.len(), 1);
        assert!(
            s.busy(),
            "the pass keeps coming back until it is given back"
        );
        let (slot, r) = s.lent[0];
        assert_eq!(r, rel);
        assert_eq!(io.tokens, vec![Token(reqs.wire_id(slot))]);
        s.sweep_lent(&mut reqs);
        assert_eq!(s.lent.len(), 1, "still referenced");
        // The transport reports the token (to the point-to-point engine, which counts it).
        reqs.get_mut(slot).unwrap().inflight -= 1;
        s.sweep_lent(&mut reqs);
        assert!(s.lent.is_empty() && reqs.get(slot).is_none() && !s.busy());
        // Refused now: kept, in order, and no slot is left behind.
        let mut io = Wire::default();
        io.refuse = 1;
        s.send_lent(to, h, Vec::new(), data.as_ptr(), data.len(), rel);
        s.flush(&mut io, &mut reqs);
        assert_eq!((s.outbox.len(), reqs.live()), (1, 0));
        // Taken whole: given back at once.
        s.flush(&mut io, &mut reqs);
        assert!(s.outbox.is_empty() && s.lent.is_empty() && reqs.live() == 0);
        // Nothing merges into a lent frame.
        s.send_lent(to, h, Vec::new(), data.as_ptr(), data.len(), rel);
        assert!(!s.merge_put(to, ContextId::new(5), &[(0, 1)], &[1]));
        // Only large data is lent.
        assert!(lends(LEND_MIN) && !lends(LEND_MIN - 1));
    }

    #[test]
    fn layouts_keep_blocks_apart_and_memory_contiguous_when_asked() {
        let l = layout(&[10, 0, 7], true, true);
        assert_eq!(l.ctl, vec![0, CTL_BYTES, 2 * CTL_BYTES]);
        let d0 = l.data[0];
        assert_eq!(d0 % 4096, 0);
        assert_eq!(l.data, vec![d0, d0 + 10, d0 + 10]);
        assert_eq!(l.total, d0 + 17);
        let l = layout(&[10, 3, 7], true, false);
        assert!(l.data.iter().all(|d| d % 64 == 0));
        assert!(l.data[1] >= l.data[0] + 10 && l.data[2] >= l.data[1] + 3);
        let l = layout(&[10, 3], false, false);
        assert_eq!(l.total, 4096.max(2 * CTL_BYTES).div_ceil(4096) * 4096);
        let c = Card {
            size: 5,
            disp_unit: 8,
            region: Region([3; REGION_LEN]),
            exposes: true,
            fence_shm: true,
        };
        let d = Card::decode(&c.encode()).unwrap();
        assert_eq!(
            (d.size, d.disp_unit, d.region, d.exposes, d.fence_shm),
            (5, 8, c.region, true, true)
        );
        assert!(Card::decode(&[0; 3]).is_err());
    }
}
