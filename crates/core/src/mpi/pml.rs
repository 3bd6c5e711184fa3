//! The point-to-point engine: matching, and the eager / rendezvous / eager-rendezvous protocols.
//!
//! MPI-4.0 chapter 3. Invariants this module keeps:
//! - **Non-overtaking** (3.5): frames that take part in matching (`Eager`, `Rts`) carry a
//!   per-(sender, receiver) sequence number; the receiver matches them strictly in that order,
//!   holding early ones aside, so a change of channel or lane cannot reorder messages. A sender
//!   emits them in the order the sends were started: while a peer has a backlog (a transport
//!   said "not now"), later sends queue behind it.
//! - **Matching order**: posted receives are searched in the order they were posted and the
//!   unexpected queue in arrival order; the first match wins.
//! - A send buffer is referenced until its request completes; a receive buffer is written only
//!   between matching and completion.
//!
//! The engine does no I/O itself: sending goes through an [`Io`] (the transports, or a
//! recorder in tests); frames arrive through [`FrameSink`]. Replies produced while a transport
//! is delivering (clear-to-send, finish, acks) wait in an outbox that [`Pml::flush`] drains.

use std::collections::VecDeque;

use crate::error::{ErrorClass, MpiError};
use crate::mem::BufCache;
use crate::mpi::datatype::pool;
use crate::profile::Counters;
use crate::proto::frame::{self, Envelope, Frame, HelpInfo, RndvInfo, HEADER_LEN};
use crate::proto::policy::{Feedback, Limits, Plan, Policy, Protocol, Route, RxStats, Streak};
use crate::transport::shm::coop::{CoopSlots, SlotPool};
use crate::transport::shm::{cma, Shm};
use crate::transport::{FrameSink, Gpid, Sent, Token};

use super::request::*;
use crate::proto::machine::{Outcome, RecvAction, SendAction, SendEvent};

/// Why a transport did not take a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Backpressure: retry later.
    NotNow,
    /// The peer cannot be reached.
    Failed(String),
}

/// The sending side of the transports, as the protocols see it.
pub trait Io {
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError>;
    /// Largest frame payload to `peer` on the channel in use now.
    fn max_payload(&self, peer: Gpid) -> usize;

    /// Send a frame only if the transport can take all of it now without holding on to `body`
    /// and without queueing it behind other output (the request-free eager path). False:
    /// nothing was sent.
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        self.send(peer, hdr, &[], body, Token::NONE).is_ok()
    }
}

/// An eager message a transport is writing straight into memory of ours.
#[derive(Debug)]
struct Placing {
    from: Gpid,
    into: PlaceInto,
    env: Envelope,
    sync: bool,
    sreq: u32,
    seq: u32,
    len: usize,
}

/// Where a [`Placing`] goes.
#[derive(Debug)]
enum PlaceInto {
    /// The receive it matched: its slot, or DIRECT.
    Receive(u32),
    /// No receive matched: the buffer it will wait in, unexpected.
    Unexpected(Vec<u8>),
}

/// Posted-queue marker of the blocking receive that waits without a request.
const DIRECT: u32 = u32::MAX;

/// Where the blocking receive without a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DirectState {
    Waiting,
    Done(Status),
    /// A rendezvous message matched: the receive continues as a request in this slot.
    Upgraded(u32),
}

/// A blocking receive of contiguous data posted without a request (MPI_Recv's common case):
/// an eager message is copied straight into its buffer and completes it.
#[derive(Debug)]
struct Direct {
    spec: Envelope,
    buf: *mut u8,
    cap: usize,
    state: DirectState,
}

/// What posting a blocking receive did.
#[derive(Debug)]
pub enum DirectPost {
    /// Complete already (an unexpected eager message matched).
    Done(Status),
    /// Posted; progress until [`Pml::direct_ready`].
    Posted,
    /// Not possible here (a receive is already posted this way, or a rendezvous message is
    /// waiting): use a request.
    UseRequest,
}

/// A receive waiting for a message.
#[derive(Debug, Clone, Copy)]
struct Posted {
    spec: Envelope,
    slot: u32,
}

/// What an unexpected message brought with it.
#[derive(Debug)]
pub enum UnexpectedData {
    Eager { data: Vec<u8>, sync: bool },
    Rts { info: RndvInfo, prefix: Vec<u8> },
}

/// A message that arrived before its receive was posted.
#[derive(Debug)]
pub struct Unexpected {
    pub env: Envelope,
    pub from: Gpid,
    pub sreq: u32,
    /// The sender's sequence number of the message (what a cancel request names).
    pub seq: u32,
    /// Total message length in bytes.
    pub len: u64,
    pub data: UnexpectedData,
}

/// Cooperative single copy (see `transport::shm::coop`): our slots, the peers' slots as mapped
/// here, and the copies in progress.
#[derive(Default)]
pub struct Coop {
    own: Option<CoopSlots>,
    peers: Vec<Option<CoopSlots>>,
    pool: SlotPool,
    jobs: Vec<CoopJob>,
    /// Smallest message (bytes after the eager prefix) copied cooperatively; 0: never.
    pub min: usize,
    pub chunk: usize,
}

impl Coop {
    pub fn new(shm: &Shm, nprocs: usize, cfg: &crate::config::Config) -> Coop {
        let own = shm.coop_slots(shm_me(shm));
        Coop {
            pool: SlotPool::new(own.map_or(0, |o| o.len())),
            own,
            peers: (0..nprocs as u32).map(|g| shm.coop_slots(g)).collect(),
            jobs: Vec::new(),
            min: cfg.shm_coop_min as usize,
            chunk: cfg.shm_coop_chunk as usize,
        }
    }
}

fn shm_me(shm: &Shm) -> Gpid {
    shm.me()
}

/// A cooperative copy this process takes part in.
#[derive(Debug, Clone, Copy)]
enum CoopJob {
    /// We receive: read chunks from the sender until none is left, then wait for its chunks.
    Recv {
        slot: u32,
        from: Gpid,
        sreq: u32,
        cslot: u32,
        chunks: u32,
        chunk: usize,
        pid: u32,
        src: u64,
        prefix: usize,
        take: usize,
    },
    /// We send: write chunks into the receiver while any is left.
    Help {
        slot: u32,
        cslot: u32,
        chunks: u32,
        chunk: usize,
        pid: u32,
        dst: u64,
        prefix: usize,
        take: usize,
    },
}

/// Byte range of chunk `k` of the data after `prefix`, up to `take`.
fn chunk_range(k: u32, chunk: usize, prefix: usize, take: usize) -> (usize, usize) {
    let start = prefix + k as usize * chunk;
    (start, (take - start).min(chunk))
}

/// A control frame waiting for a transport, with a small payload.
#[derive(Debug, Clone, Copy)]
struct Ctrl {
    peer: Gpid,
    hdr: [u8; HEADER_LEN],
    small: [u8; HelpInfo::LEN],
    small_len: u8,
}

impl Ctrl {
    fn new(peer: Gpid, f: Frame) -> Ctrl {
        Ctrl {
            peer,
            hdr: f.encode(),
            small: [0; HelpInfo::LEN],
            small_len: 0,
        }
    }
}

/// Per-peer protocol state.
#[derive(Debug)]
struct Peer {
    route: Route,
    /// What the policy says for messages to this peer; recomputed when one of its inputs
    /// changes (the policy, the channel, the peer's feedback), not per message.
    limits: Limits,
    /// Largest frame payload of the channel in use.
    max_payload: usize,
    /// The peer's last report on how our messages arrive (raw header field; 0: none yet).
    fb_in: u16,
    /// What we see of the messages from this peer, and the report we stamp on every frame
    /// to it; `fb_told`: the report that last went out.
    rx: RxStats,
    fb_out: u16,
    fb_told: u16,
    send_seq: u32,
    recv_seq: u32,
    /// A matchable message from this peer arrived since our last send to it: the next send
    /// is lone (a reply, or a request after one), and the policy weighs its latency.
    replied: bool,
    /// Messages sent under a report of every receive preposted (`Costs::lag`).
    streak: Streak,
    /// Matchable frames that arrived ahead of their turn: (seq, header, payload).
    early: Vec<(u32, [u8; HEADER_LEN], Vec<u8>)>,
    /// Sends waiting to emit their first frame, in start order.
    backlog: VecDeque<u32>,
    lost: Option<String>,
}

impl Peer {
    /// The limits for messages to this peer (`id`) under the setting `protocol` (the policy's
    /// own, or a communicator's info hint), given its last report.
    fn limits_under(&self, policy: &Policy, protocol: Protocol, id: Gpid) -> Limits {
        let fb = frame::feedback_of(self.fb_in)
            .map_or(Feedback::INITIAL, |(s, l)| Feedback::from_field(s, l));
        let fb = self.streak.apply(fb);
        policy.limits(protocol, id, self.route, self.max_payload, fb)
    }
}

/// Remove entry `i` of a queue; the front (the common case) without shifting anything.
#[inline]
fn take_at<T>(q: &mut VecDeque<T>, i: usize) -> T {
    if i == 0 { q.pop_front() } else { q.remove(i) }.expect("index in range")
}

#[inline]
fn matches(spec: &Envelope, env: &Envelope) -> bool {
    spec.ctx == env.ctx
        && (spec.src == ANY_SOURCE || spec.src == env.src)
        && (spec.tag == ANY_TAG || spec.tag == env.tag)
}

/// Unexpected-data level (bit length of the bytes, see `frame::feedback`) from which any
/// change of the report goes to the sender at once: 2^20, a megabyte.
const FEEDBACK_LEVEL_LARGE: u16 = 21;

/// Eager bytes a run of sends goes on without a progress pass. Sends the transport takes at
/// once read nothing, so a burst of large eager messages never saw the receiver's report that
/// its receives stopped being posted: the whole burst went eagerly into unexpected buffers
/// (256 KiB over TCP: all 64 messages of such a round, 0.8x the throughput of rendezvous).
/// After this many bytes [`Pml::try_eager`] declines, and the engine's general send path takes
/// a point-to-point progress pass first, which reads the report while the burst is still
/// going, for one idle poll per megabyte.
pub const POLL_EVERY: usize = 1 << 20;

pub struct Pml {
    pub reqs: Slab,
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexpected>,
    peers: Vec<Peer>,
    outbox: VecDeque<Ctrl>,
    streaming: Vec<u32>,
    /// Sends waiting in some peer's backlog.
    backlogged: usize,
    pub counters: Counters,
    pub policy: Policy,
    pub me: Gpid,
    pid: u32,
    pub single_copy: bool,
    /// Cooperative single copy state.
    pub coop: Coop,
    direct: Option<Direct>,
    placing: Vec<Placing>,
    /// Messages taken by MPI_Mprobe/Improbe, waiting for MPI_Mrecv.
    messages: Vec<Option<Unexpected>>,
    free_messages: Vec<u32>,
    /// Buffers of unexpected messages, kept for the next ones (none until
    /// [`Pml::keep_unexpected_buffers`]).
    cache: BufCache,
    /// Bytes [`Pml::try_eager`] sent since the engine's last progress pass; from
    /// [`POLL_EVERY`] on it declines, and the engine's general send path polls first.
    pub eager_unpolled: usize,
    pub verbose: bool,
    /// Set once Finalize has begun: lost peers are expected then.
    pub finalizing: bool,
}

impl Pml {
    /// Slot of the request every eagerly completed nonblocking send shares: a handle to a
    /// complete send with an empty status, which waiting and freeing leave in place.
    pub const DONE_SEND: u32 = 0;

    pub fn new(me: Gpid, routes: Vec<Route>, policy: Policy, single_copy: bool) -> Pml {
        let peers = routes
            .into_iter()
            .map(|route| Peer {
                route,
                limits: Limits::RENDEZVOUS,
                max_payload: 0,
                fb_in: 0,
                rx: RxStats::default(),
                fb_out: 0,
                fb_told: 0,
                send_seq: 0,
                recv_seq: 0,
                // Nothing is in flight before the first send.
                replied: true,
                streak: Streak::default(),
                early: Vec::new(),
                backlog: VecDeque::new(),
                lost: None,
            })
            .collect();
        let mut reqs = Slab::default();
        let mut done = Request::new(Kind::Done, 0);
        done.complete = true;
        done.permanent = true;
        let slot = reqs.insert(done);
        debug_assert_eq!(slot, Pml::DONE_SEND);
        Pml {
            reqs,
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            peers,
            outbox: VecDeque::new(),
            streaming: Vec::new(),
            backlogged: 0,
            counters: Counters::default(),
            policy,
            me,
            pid: std::process::id(),
            single_copy,
            coop: Coop::default(),
            direct: None,
            placing: Vec::new(),
            messages: Vec::new(),
            free_messages: Vec::new(),
            cache: BufCache::default(),
            eager_unpolled: 0,
            verbose: false,
            finalizing: false,
        }
    }

    /// Recompute what depends on the policy and the channels (at start-up and whenever either
    /// changes).
    pub fn refresh_limits<I: Io>(&mut self, io: &I) {
        for g in 0..self.peers.len() {
            self.peers[g].max_payload = io.max_payload(g as Gpid);
            self.update_limits(g as Gpid);
        }
    }

    fn update_limits(&mut self, peer: Gpid) {
        let p = &self.peers[peer as usize];
        let limits = p.limits_under(&self.policy, self.policy.protocol, peer);
        self.peers[peer as usize].limits = limits;
    }

    /// The limits in use for messages to `peer` (protean-info, tests).
    pub fn limits(&self, peer: Gpid) -> Option<Limits> {
        self.peers.get(peer as usize).map(|p| p.limits)
    }

    /// A header arrived from `from`: take in the feedback it carries.
    #[inline(always)]
    fn take_feedback(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN]) {
        let w = frame::feedback_field(hdr);
        if w == 0 {
            return;
        }
        let Some(p) = self.peers.get_mut(from as usize) else {
            return;
        };
        if p.fb_in != w {
            p.fb_in = w;
            let full = frame::feedback_of(w).is_some_and(|(s, _)| s == frame::FEEDBACK_SHARE_MAX);
            p.streak.on_report(full);
            if self.policy.uses_feedback(self.policy.protocol) {
                self.update_limits(from);
            }
        }
    }

    /// A matchable message from `from` arrived; `preposted`: its receive was waiting.
    #[inline(always)]
    fn note_arrival(&mut self, from: Gpid, preposted: bool, bytes: usize) {
        let p = &mut self.peers[from as usize];
        p.replied = true;
        if let Some((share, level)) = p.rx.note(preposted, bytes) {
            p.fb_out = frame::feedback_word(share, level);
            // Most traffic carries the report back by itself; when little goes that way and
            // the report moved a lot since it last went out, send it on its own. Unexpected
            // data doubling counts as a lot once it is a megabyte or more: that is what turns
            // large messages from eager to rendezvous, and a frame per eight such messages
            // costs nothing.
            let told = frame::feedback_of(p.fb_told);
            let far = told.is_none_or(|(s, l)| {
                s.abs_diff(share) >= 8
                    || l.abs_diff(level) >= 2
                    || (l != level && l.max(level) >= FEEDBACK_LEVEL_LARGE)
            });
            if far && p.lost.is_none() {
                p.fb_told = p.fb_out;
                self.outbox.push_back(Ctrl::new(from, Frame::Feedback));
            }
        }
    }

    pub fn route(&self, peer: Gpid) -> Route {
        self.peers
            .get(peer as usize)
            .map_or(Route::Unreachable, |p| p.route)
    }

    /// Is there work that progress must still do on our side (queued frames, transfers)?
    #[inline]
    pub fn busy(&self) -> bool {
        !self.outbox.is_empty()
            || !self.streaming.is_empty()
            || self.backlogged > 0
            || !self.coop.jobs.is_empty()
    }

    // ----------------------------------------------------------------------------------------
    // Sending

    /// Send `data` eagerly without a request if nothing is queued for the peer, the policy
    /// says eager and the transport takes the frame now. False: nothing was sent.
    #[inline]
    pub fn try_eager<I: Io>(&mut self, peer: Gpid, env: Envelope, data: &[u8], io: &mut I) -> bool {
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return false;
        };
        if !p.backlog.is_empty() || p.lost.is_some() || self.eager_unpolled >= POLL_EVERY {
            return false;
        }
        if p.limits
            .eager_max_for(p.replied)
            .is_none_or(|m| data.len() > m)
        {
            return false;
        }
        let mut hdr = Frame::Eager {
            env,
            seq: p.send_seq,
            sreq: 0,
            sync: false,
        }
        .encode();
        frame::set_feedback(&mut hdr, p.fb_out);
        if !io.try_send(peer, &hdr, data) {
            return false;
        }
        p.fb_told = p.fb_out;
        p.send_seq = p.send_seq.wrapping_add(1);
        p.replied = false;
        let recount = p.streak.on_send();
        let c = self.counters.on(p.route);
        c.eager_sent += 1;
        c.eager_bytes += data.len() as u64;
        self.eager_unpolled += data.len();
        if recount && self.policy.uses_feedback(self.policy.protocol) {
            self.update_limits(peer);
        }
        true
    }

    /// Start the send in `slot` (its peer, envelope, buffer, length and mode are set).
    /// Returns true when it completed at once.
    #[inline]
    pub fn start_send<I: Io>(&mut self, slot: u32, io: &mut I) -> bool {
        let peer = self.reqs.get(slot).expect("send slot").peer;
        let p = &mut self.peers[peer as usize];
        if let Some(why) = &p.lost {
            let e = MpiError::new(ErrorClass::Other, format!("process {peer} is gone: {why}"));
            self.fail(slot, e);
            return true;
        }
        if !p.backlog.is_empty() {
            p.backlog.push_back(slot);
            self.backlogged += 1;
            let _ = self
                .reqs
                .get_mut(slot)
                .expect("slot")
                .send
                .on(SendEvent::NotNow);
            return false;
        }
        match self.emit_first(slot, io) {
            Ok(done) => done,
            Err(SendError::NotNow) => {
                self.peers[peer as usize].backlog.push_back(slot);
                self.backlogged += 1;
                let _ = self
                    .reqs
                    .get_mut(slot)
                    .expect("slot")
                    .send
                    .on(SendEvent::NotNow);
                false
            }
            Err(SendError::Failed(why)) => {
                self.fail(
                    slot,
                    MpiError::new(
                        ErrorClass::Other,
                        format!("cannot send to process {peer}: {why}"),
                    ),
                );
                true
            }
        }
    }

    /// Emit the first (matchable) frame of a send. Ok(true): the send is complete.
    #[inline]
    fn emit_first<I: Io>(&mut self, slot: u32, io: &mut I) -> Result<bool, SendError> {
        let wire = self.reqs.wire_id(slot);
        let r = self.reqs.get_mut(slot).expect("send slot");
        let (peer, len) = (r.peer, r.len);
        let p = &mut self.peers[peer as usize];
        // The limits were computed for the channel in use (refresh_limits runs when it
        // changes), so the plan's frames fit it.
        let plan = match r.protocol {
            Some(pr) if pr != self.policy.protocol => p.limits_under(&self.policy, pr, peer),
            _ => p.limits,
        }
        .plan(len, p.replied);
        p.replied = false;
        let recount = p.streak.on_send();
        if r.streamed {
            self.prepare_streamed(slot, plan);
        }
        let r = self.reqs.get_mut(slot).expect("send slot");
        let p = &mut self.peers[peer as usize];
        let seq = p.send_seq;
        r.seq = seq;
        let fb = p.fb_out;
        // SAFETY: the send buffer holds `len` bytes and stays valid until the request completes.
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(r.buf, len) }
        };
        match plan {
            Plan::Eager => {
                let sync = r.mode == Mode::Sync;
                let mut hdr = Frame::Eager {
                    env: r.env,
                    seq,
                    sreq: if sync { wire } else { 0 },
                    sync,
                }
                .encode();
                frame::set_feedback(&mut hdr, fb);
                let sent = io.send(peer, &hdr, &[], data, Token(wire))?;
                p.fb_told = fb;
                p.send_seq = seq.wrapping_add(1);
                let c = self.counters.on(p.route);
                c.eager_sent += 1;
                c.eager_bytes += len as u64;
                if sent == Sent::Pending {
                    r.inflight += 1;
                }
                let _ = r.send.on(SendEvent::FirstSent { plan, sync });
            }
            Plan::Rendezvous | Plan::EagerRendezvous { .. } => {
                let prefix = match plan {
                    Plan::EagerRendezvous { prefix } => prefix,
                    _ => 0,
                };
                // A streamed message is packed as it goes: the receiver cannot read it whole.
                let offer = self.single_copy
                    && !r.streamed
                    && matches!(p.route, Route::Shm | Route::SelfLoop);
                let coop = &mut self.coop;
                let coop_slot = match coop.own {
                    Some(own)
                        if offer
                            && p.route == Route::Shm
                            && coop.min > 0
                            && len - prefix >= coop.min =>
                    {
                        coop.pool.take().inspect(|&cs| own.reset(cs))
                    }
                    _ => None,
                };
                let info = RndvInfo {
                    pid: if offer { self.pid } else { 0 },
                    prefix: prefix as u32,
                    addr: if offer { r.buf as u64 } else { 0 },
                    slot: coop_slot.map_or(0, |c| c + 1),
                    chunk: if coop_slot.is_some() {
                        coop.chunk as u32
                    } else {
                        0
                    },
                };
                let mut hdr = Frame::Rts {
                    env: r.env,
                    seq,
                    sreq: wire,
                    len: len as u64,
                }
                .encode();
                frame::set_feedback(&mut hdr, fb);
                let sent = match io.send(peer, &hdr, &info.encode(), &data[..prefix], Token(wire)) {
                    Ok(s) => s,
                    Err(e) => {
                        if let Some(cs) = coop_slot {
                            self.coop.pool.put(cs);
                        }
                        return Err(e);
                    }
                };
                r.coop_slot = coop_slot.map_or(0, |c| c + 1);
                p.fb_told = fb;
                p.send_seq = seq.wrapping_add(1);
                if prefix > 0 {
                    let c = self.counters.on(p.route);
                    c.split_sent += 1;
                    c.split_bytes += len as u64;
                } else {
                    let c = self.counters.on(p.route);
                    c.rndv_sent += 1;
                    c.rndv_bytes += len as u64;
                }
                if sent == Sent::Pending {
                    r.inflight += 1;
                }
                r.off = prefix;
                let _ = r.send.on(SendEvent::FirstSent { plan, sync: false });
            }
        }
        if recount && self.policy.uses_feedback(self.policy.protocol) {
            self.update_limits(peer);
        }
        Ok(self.maybe_complete_send(slot))
    }

    /// Complete a send whose protocol is done and whose buffer no transport references.
    #[inline]
    fn maybe_complete_send(&mut self, slot: u32) -> bool {
        let r = self.reqs.get_mut(slot).expect("slot");
        if r.send.is_done() && r.inflight == 0 {
            self.finish(slot);
            true
        } else {
            false
        }
    }

    /// Mark a request complete; release it if nobody will wait for it.
    #[inline]
    fn finish(&mut self, slot: u32) {
        let r = self.reqs.get_mut(slot).expect("slot");
        r.complete = true;
        if r.kind == Kind::Recv {
            if let Some(pk) = r.packed.take() {
                // Bytes from `unpacked_from` on were unpacked as their frames arrived.
                let n = (r.status.bytes as usize)
                    .min(pk.data.len())
                    .min(r.unpacked_from);
                // SAFETY: the user's buffer holds `count` elements of the type until the
                // receive completes, which is now.
                unsafe { pk.dtype.unpack(&pk.data[..n], pk.user_buf, pk.count) };
            }
        }
        if r.user_freed && r.bsend_region.is_none() {
            self.reqs.remove(slot);
        }
    }

    fn fail(&mut self, slot: u32, e: MpiError) {
        self.release_coop(slot);
        let r = self.reqs.get_mut(slot).expect("slot");
        r.status.error = Some(Box::new(e));
        let _ = r.send.on(SendEvent::Failed);
        r.recv.fail();
        r.inflight = 0;
        self.finish(slot);
    }

    /// Push out what waits: control frames, backlogged sends, rendezvous data.
    pub fn flush<I: Io>(&mut self, io: &mut I) {
        while !self.outbox.is_empty() {
            match self.send_ctrl(io) {
                Ok(()) => {}
                Err(SendError::NotNow) => break,
                Err(SendError::Failed(_)) => {
                    self.outbox.pop_front();
                }
            }
        }
        for pi in 0..if self.backlogged > 0 {
            self.peers.len()
        } else {
            0
        } {
            while let Some(&slot) = self.peers[pi].backlog.front() {
                if self.reqs.get(slot).is_none() {
                    self.peers[pi].backlog.pop_front();
                    self.backlogged -= 1;
                    continue;
                }
                match self.emit_first(slot, io) {
                    Ok(_) => {
                        self.peers[pi].backlog.pop_front();
                        self.backlogged -= 1;
                    }
                    Err(SendError::NotNow) => break,
                    Err(SendError::Failed(why)) => {
                        self.peers[pi].backlog.pop_front();
                        self.backlogged -= 1;
                        self.fail(
                            slot,
                            MpiError::new(
                                ErrorClass::Other,
                                format!("cannot send to process {pi}: {why}"),
                            ),
                        );
                    }
                }
            }
        }
        if !self.coop.jobs.is_empty() {
            self.run_coop();
            // A finished copy queued its Fin: send it now rather than next pass.
            while !self.outbox.is_empty() && self.send_ctrl(io).is_ok() {}
        }
        let mut i = 0;
        while i < self.streaming.len() {
            let slot = self.streaming[i];
            if self.pump(slot, io) {
                self.streaming.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Send the first control frame of the outbox, with the latest feedback for its peer.
    /// Ok: sent and taken off the outbox.
    fn send_ctrl<I: Io>(&mut self, io: &mut I) -> Result<(), SendError> {
        let c = self.outbox.front_mut().expect("outbox not empty");
        let p = &mut self.peers[c.peer as usize];
        frame::set_feedback(&mut c.hdr, p.fb_out);
        io.send(
            c.peer,
            &c.hdr,
            &c.small[..c.small_len as usize],
            &[],
            Token::NONE,
        )?;
        p.fb_told = p.fb_out;
        self.outbox.pop_front();
        Ok(())
    }

    /// Send Data frames of a rendezvous send. Returns true when no more frames are needed.
    fn pump<I: Io>(&mut self, slot: u32, io: &mut I) -> bool {
        let wire = self.reqs.wire_id(slot);
        let Some(r) = self.reqs.get_mut(slot) else {
            return true;
        };
        if r.send.state() != SendState::Streaming {
            return true;
        }
        if r.streamed {
            return self.pump_packed(slot, io);
        }
        let peer = r.peer;
        let frag = io.max_payload(peer).max(1);
        let fb = self.peers[peer as usize].fb_out;
        while r.off < r.len {
            let n = frag.min(r.len - r.off);
            let mut hdr = Frame::Data {
                rreq: r.remote,
                offset: r.off as u64,
            }
            .encode();
            frame::set_feedback(&mut hdr, fb);
            // SAFETY: the send buffer stays valid until the request completes, which waits for
            // every pending Data frame (`inflight`).
            let body = unsafe { std::slice::from_raw_parts(r.buf.add(r.off), n) };
            match io.send(peer, &hdr, &[], body, Token(wire)) {
                Ok(Sent::Done) => r.off += n,
                Ok(Sent::Pending) => {
                    r.off += n;
                    r.inflight += 1;
                }
                Err(SendError::NotNow) => return false,
                Err(SendError::Failed(why)) => {
                    let e = MpiError::new(
                        ErrorClass::Other,
                        format!("cannot send to process {peer}: {why}"),
                    );
                    self.fail(slot, e);
                    return true;
                }
            }
        }
        let _ = r.send.on(SendEvent::AllDataQueued);
        self.maybe_complete_send(slot);
        true
    }

    // ----------------------------------------------------------------------------------------
    // Large non-contiguous sends, packed as they go
    //
    // A non-contiguous send of at least `p2p::STREAM_MIN` bytes is not packed before its first
    // frame (`Request::streamed`). The first frame packs what it carries: everything for an
    // eager message or a message to ourselves (which then is an ordinary packed send), the
    // eager prefix for a rendezvous. The rest waits for the receiver's clear-to-send and goes
    // in Data frames of an eighth of the message (8 to 64 KiB), each packed into a staging
    // area just before it is handed to the transport; the receiver unpacks each one as it
    // lands (`unpack_arrived`). Packing thus overlaps the transfer and the receiver's
    // unpacking; the sender never holds a packed copy of the whole message, and the
    // receiver's packed copy (kept for what lands whole: eager data, a prefix, a single-copy
    // read from a contiguous sender) is not touched by these frames. Single copy is not
    // offered for such a message: the receiver could read it only once it is packed whole.

    /// Before the first frame of a streamed send (planned as `plan`): pack what that frame
    /// carries and lay out the staging area. Runs again if the frame has to be retried.
    #[cold]
    fn prepare_streamed(&mut self, slot: u32, plan: Plan) {
        let r = self.reqs.get_mut(slot).expect("send slot");
        let route = self.peers[r.peer as usize].route;
        let Some(pk) = r.packed.as_mut() else {
            r.streamed = false;
            return;
        };
        let prefix = match plan {
            Plan::Eager => None,
            Plan::EagerRendezvous { prefix } => Some(prefix),
            Plan::Rendezvous => Some(0),
        };
        match prefix {
            Some(prefix) if route != Route::SelfLoop => {
                // [prefix | one staged piece]; the buffer never grows afterwards, so a
                // transport may keep referencing the prefix while pieces are staged.
                let mut v = pool::take_filled(prefix + STREAM_PIECE);
                // SAFETY: the user's buffer holds `count` elements of the type until the
                // request completes; the window is inside the message.
                unsafe {
                    pk.dtype
                        .pack_window(pk.user_buf, pk.count, 0, &mut v[..prefix])
                };
                pk.data = v;
            }
            _ => {
                // Sent whole: pack it now and continue as an ordinary packed send.
                let mut v = pool::take_empty(r.len);
                // SAFETY: as above, for the whole message.
                unsafe { pk.dtype.pack(pk.user_buf, pk.count, &mut v) };
                pk.data = v;
                r.streamed = false;
            }
        }
        r.buf = pk.data.as_mut_ptr();
        r.staged = 0;
    }

    /// Send Data frames of a streamed send, packing each piece just before it goes. Returns
    /// true when no more frames are needed.
    fn pump_packed<I: Io>(&mut self, slot: u32, io: &mut I) -> bool {
        let r = self.reqs.get_mut(slot).expect("send slot");
        let peer = r.peer;
        // At least 8 pieces where the message allows, so that packing and unpacking overlap
        // also for messages of a few pieces.
        let piece = (r.len / 8)
            .clamp(STREAM_PIECE_MIN, STREAM_PIECE)
            .min(io.max_payload(peer))
            .max(1);
        let fb = self.peers[peer as usize].fb_out;
        let Request {
            packed: Some(pk),
            off,
            len,
            staged,
            remote,
            ..
        } = r
        else {
            return true;
        };
        let stage = pk.data.len() - STREAM_PIECE;
        let mut failed = None;
        while *off < *len {
            let n = piece.min(*len - *off);
            let body = &mut pk.data[stage..stage + n];
            if *staged != n {
                // SAFETY: the user's buffer holds `count` elements of the type until the
                // request completes; the window `off..off + n` is inside the message.
                unsafe { pk.dtype.pack_window(pk.user_buf, pk.count, *off, body) };
                *staged = n;
            }
            let mut hdr = Frame::Data {
                rreq: *remote,
                offset: *off as u64,
            }
            .encode();
            frame::set_feedback(&mut hdr, fb);
            // Token::NONE: a transport that cannot write the piece at once copies it, so the
            // staging area is free again when send returns.
            match io.send(peer, &hdr, &[], body, Token::NONE) {
                Ok(_) => {
                    *off += n;
                    *staged = 0;
                }
                Err(SendError::NotNow) => return false,
                Err(SendError::Failed(why)) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        if let Some(why) = failed {
            let e = MpiError::new(
                ErrorClass::Other,
                format!("cannot send to process {peer}: {why}"),
            );
            self.fail(slot, e);
            return true;
        }
        let _ = r.send.on(SendEvent::AllDataQueued);
        self.maybe_complete_send(slot);
        true
    }

    // ----------------------------------------------------------------------------------------
    // Receiving

    /// Post a blocking receive of `cap` contiguous bytes without a request.
    pub fn post_direct(&mut self, spec: Envelope, buf: *mut u8, cap: usize) -> DirectPost {
        if self.direct.is_some() {
            return DirectPost::UseRequest;
        }
        if let Some(i) = self.unexpected.iter().position(|u| matches(&spec, &u.env)) {
            let UnexpectedData::Eager { data, sync } = &self.unexpected[i].data else {
                return DirectPost::UseRequest;
            };
            let st = copy_eager(buf, cap, self.unexpected[i].env, data);
            if *sync {
                let (from, sreq) = (self.unexpected[i].from, self.unexpected[i].sreq);
                self.outbox
                    .push_back(Ctrl::new(from, Frame::SyncAck { sreq }));
            }
            let u = take_at(&mut self.unexpected, i);
            self.recycle(u.data);
            return DirectPost::Done(st);
        }
        self.posted.push_back(Posted { spec, slot: DIRECT });
        self.direct = Some(Direct {
            spec,
            buf,
            cap,
            state: DirectState::Waiting,
        });
        DirectPost::Posted
    }

    /// Has the blocking receive without a request finished (or become a request)?
    #[inline]
    pub fn direct_ready(&self) -> bool {
        self.direct
            .as_ref()
            .is_none_or(|d| d.state != DirectState::Waiting)
    }

    /// Take the finished blocking receive: its status, or the request slot it became.
    pub fn take_direct(&mut self) -> Option<Result<Status, u32>> {
        match self.direct.take()?.state {
            DirectState::Done(st) => Some(Ok(st)),
            DirectState::Upgraded(slot) => Some(Err(slot)),
            DirectState::Waiting => None,
        }
    }

    /// Post the receive in `slot` (spec in `env`, buffer and capacity set). Returns true when
    /// it completed at once from the unexpected queue.
    pub fn post_recv(&mut self, slot: u32) -> bool {
        let spec = self.reqs.get(slot).expect("recv slot").env;
        if let Some(i) = self.unexpected.iter().position(|u| matches(&spec, &u.env)) {
            let u = take_at(&mut self.unexpected, i);
            self.deliver_unexpected(slot, u);
            return self.reqs.get(slot).is_none_or(|r| r.complete);
        }
        let r = self.reqs.get_mut(slot).expect("slot");
        if let Err(e) = r.recv.post() {
            debug_assert!(false, "{e}");
        }
        self.posted.push_back(Posted { spec, slot });
        false
    }

    /// Receive a message taken out of the unexpected queue (MPI_Mrecv, or a late post).
    pub fn deliver_unexpected(&mut self, slot: u32, u: Unexpected) {
        match &u.data {
            UnexpectedData::Eager { data, sync } => {
                self.eager_into(slot, u.from, u.env, data);
                if *sync {
                    self.outbox
                        .push_back(Ctrl::new(u.from, Frame::SyncAck { sreq: u.sreq }));
                }
            }
            UnexpectedData::Rts { info, prefix } => {
                self.rndv_into(slot, u.from, u.env, u.sreq, u.len, *info, prefix);
            }
        }
        self.recycle(u.data);
    }

    /// Keep the buffer of an unexpected message that is done with for the next one.
    fn recycle(&mut self, d: UnexpectedData) {
        match d {
            UnexpectedData::Eager { data, .. } => self.cache.give(data),
            UnexpectedData::Rts { prefix, .. } => self.cache.give(prefix),
        }
    }

    /// Keep up to `limit` bytes of freed unexpected-message buffers for reuse (see
    /// [`BufCache`]); what is kept beyond a new limit goes back to the allocator.
    pub fn keep_unexpected_buffers(&mut self, limit: usize) {
        self.cache = BufCache::new(limit);
    }

    /// Copy an eager message into a matched receive and complete it.
    #[inline]
    fn eager_into(&mut self, slot: u32, from: Gpid, env: Envelope, data: &[u8]) {
        let r = self.reqs.get_mut(slot).expect("recv slot");
        r.peer = from;
        if let Ok(RecvAction::Complete(_)) = r.recv.eager(data.len(), r.len) {
            r.status = copy_eager(r.buf, r.len, env, data);
            self.finish(slot);
        }
    }

    /// Start receiving a rendezvous message into a matched receive.
    #[allow(clippy::too_many_arguments)]
    fn rndv_into(
        &mut self,
        slot: u32,
        from: Gpid,
        env: Envelope,
        sreq: u32,
        len: u64,
        info: RndvInfo,
        prefix: &[u8],
    ) {
        let wire = self.reqs.wire_id(slot);
        let single_copy = self.single_copy;
        let own_pid = self.pid;
        let r = self.reqs.get_mut(slot).expect("recv slot");
        let len = len as usize;
        r.peer = from;
        r.remote = sreq;
        r.msg_len = len;
        r.status.source = env.src;
        r.status.tag = env.tag;
        let action = r.recv.rendezvous(len, prefix.len(), r.len);
        let pre = prefix.len().min(len.min(r.len));
        if pre > 0 {
            // SAFETY: `pre <= r.len` bytes of the receive buffer.
            unsafe { std::ptr::copy_nonoverlapping(prefix.as_ptr(), r.buf, pre) };
        }
        let take = match action {
            Ok(RecvAction::Fetch { take, .. }) => take,
            Ok(RecvAction::Complete(o)) => {
                // Everything came with the request (an empty message): nothing to move.
                r.status = status_of(env, len, r.len, o);
                self.outbox.push_back(Ctrl::new(from, Frame::Fin { sreq }));
                self.finish(slot);
                return;
            }
            Ok(_) | Err(_) => {
                let e = MpiError::new(
                    ErrorClass::Other,
                    format!("malformed request-to-send from process {from}: {len} bytes with a prefix of {}", prefix.len()),
                );
                r.status.error = Some(Box::new(e));
                r.recv.fail();
                self.finish(slot);
                return;
            }
        };
        if info.pid != 0 && info.addr != 0 && single_copy && info.slot != 0 {
            let rest = take.saturating_sub(prefix.len());
            let chunk = info.chunk as usize;
            let chunks = rest.div_ceil(chunk);
            if self
                .coop
                .peers
                .get(from as usize)
                .is_some_and(|s| s.is_some())
                && chunks > 0
                && chunks <= u32::MAX as usize
            {
                let buf = r.buf;
                r.off = prefix.len();
                self.coop.jobs.push(CoopJob::Recv {
                    slot,
                    from,
                    sreq,
                    cslot: info.slot - 1,
                    chunks: chunks as u32,
                    chunk,
                    pid: info.pid,
                    src: info.addr,
                    prefix: prefix.len(),
                    take,
                });
                let help = HelpInfo {
                    pid: own_pid,
                    chunks: chunks as u32,
                    addr: buf as u64,
                    take: take as u64,
                };
                self.outbox.push_back(Ctrl {
                    peer: from,
                    hdr: Frame::Help { sreq, rreq: wire }.encode(),
                    small: help.encode(),
                    small_len: HelpInfo::LEN as u8,
                });
                return;
            }
        }
        if info.pid != 0 && info.addr != 0 && single_copy {
            let rest = take.saturating_sub(prefix.len());
            let from_addr = info.addr + prefix.len() as u64;
            let res = if rest == 0 {
                Ok(())
            } else if info.pid == own_pid {
                // Our own process (self route): one memcpy from the sender's buffer.
                // SAFETY: the sender's buffer is valid until it receives Fin; ranges are
                // within both buffers; they may overlap only in an erroneous program.
                unsafe { std::ptr::copy(from_addr as *const u8, r.buf.add(prefix.len()), rest) };
                Ok(())
            } else {
                // SAFETY: `rest` bytes after the prefix are inside the receive buffer.
                let dst = unsafe { std::slice::from_raw_parts_mut(r.buf.add(prefix.len()), rest) };
                cma::read_from(info.pid, from_addr, dst)
            };
            match res {
                Ok(()) => {
                    if let Ok(RecvAction::Complete(o)) = r.recv.fetched() {
                        r.status = status_of(env, len, r.len, o);
                    }
                    self.counters.on(self.route(from)).single_copy += 1;
                    self.outbox.push_back(Ctrl::new(from, Frame::Fin { sreq }));
                    self.finish(slot);
                    return;
                }
                Err(e) => {
                    if self.verbose {
                        eprintln!("Protean[{}]: single copy from process {from} refused ({e}); pipelining through shared memory instead", self.me);
                    }
                    self.single_copy = false;
                }
            }
        }
        let r = self.reqs.get_mut(slot).expect("recv slot");
        r.off = prefix.len();
        self.outbox
            .push_back(Ctrl::new(from, Frame::Cts { sreq, rreq: wire }));
    }

    /// Data of a rendezvous message arrived (bytes `offset..offset+n` were written already
    /// when `data` is None).
    fn on_data(&mut self, rreq: u32, offset: u64, data: Option<&[u8]>, n: usize) {
        let Some(slot) = self.reqs.from_wire(rreq) else {
            return;
        };
        let r = self.reqs.get_mut(slot).expect("slot");
        if r.recv.state() != RecvState::Receiving {
            return;
        }
        let off = offset as usize;
        if r.packed.is_some() {
            unpack_arrived(r, off, data, n);
        } else if let Some(d) = data {
            if off < r.len {
                let k = d.len().min(r.len - off);
                // SAFETY: `off + k <= r.len`, inside the receive buffer.
                unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), r.buf.add(off), k) };
            }
        }
        r.off += n;
        if let Ok(RecvAction::Complete(o)) = r.recv.data(n) {
            r.status.bytes = o.bytes as u64;
            if o.truncated {
                r.status.error = Some(truncated(r.msg_len, r.len));
            }
            self.finish(slot);
        }
    }

    /// The posted receive a message with `env` matches, if any.
    #[inline]
    fn find_posted(&self, env: &Envelope) -> Option<usize> {
        // The oldest posted receive is the usual match: test it before searching.
        match self.posted.front() {
            Some(p) if matches(&p.spec, env) => Some(0),
            Some(_) => self.posted.iter().position(|p| matches(&p.spec, env)),
            None => None,
        }
    }

    /// A matchable frame in its turn: match it or queue it as unexpected.
    fn on_matchable(&mut self, from: Gpid, f: Frame, payload: &[u8]) {
        let (env, sreq, seq) = match f {
            Frame::Eager { env, sreq, seq, .. } | Frame::Rts { env, sreq, seq, .. } => {
                (env, sreq, seq)
            }
            _ => return,
        };
        let found = self.find_posted(&env);
        let bytes = match f {
            Frame::Rts { len, .. } => len as usize,
            _ => payload.len(),
        };
        self.note_arrival(from, found.is_some(), bytes);
        if let Some(i) = found {
            self.counters.on(self.route(from)).preposted += 1;
            return self.deliver_posted(i, from, f, payload);
        }
        self.counters.on(self.route(from)).unexpected += 1;
        let (len, data) = match f {
            Frame::Eager { sync, .. } => (
                payload.len() as u64,
                UnexpectedData::Eager {
                    data: self.cache.copy_of(payload),
                    sync,
                },
            ),
            Frame::Rts { len, .. } => match RndvInfo::decode(payload) {
                Ok((info, prefix)) => (
                    len,
                    UnexpectedData::Rts {
                        info,
                        prefix: self.cache.copy_of(prefix),
                    },
                ),
                Err(e) => return self.bad_frame(from, &e.to_string()),
            },
            _ => return,
        };
        self.unexpected.push_back(Unexpected {
            env,
            from,
            sreq,
            seq,
            len,
            data,
        });
    }

    /// Deliver a matchable frame into the posted receive at `i` of the posted queue.
    fn deliver_posted(&mut self, i: usize, from: Gpid, f: Frame, payload: &[u8]) {
        let (env, sreq) = match f {
            Frame::Eager { env, sreq, .. } | Frame::Rts { env, sreq, .. } => (env, sreq),
            _ => return,
        };
        let mut p = take_at(&mut self.posted, i);
        if p.slot == DIRECT {
            let d = self.direct.as_mut().expect("a direct receive is posted");
            if let Frame::Eager { sync, .. } = f {
                d.state = DirectState::Done(copy_eager(d.buf, d.cap, env, payload));
                if sync {
                    self.outbox
                        .push_back(Ctrl::new(from, Frame::SyncAck { sreq }));
                }
                return;
            }
            // A rendezvous needs request ids and state: continue as a request.
            let mut r = Request::new(Kind::Recv, 0);
            r.env = d.spec;
            r.buf = d.buf;
            r.len = d.cap;
            p.slot = self.reqs.insert(r);
            self.direct.as_mut().expect("posted").state = DirectState::Upgraded(p.slot);
        }
        match f {
            Frame::Eager { sync, .. } => {
                self.eager_into(p.slot, from, env, payload);
                if sync {
                    self.outbox
                        .push_back(Ctrl::new(from, Frame::SyncAck { sreq }));
                }
            }
            Frame::Rts { len, .. } => match RndvInfo::decode(payload) {
                Ok((info, prefix)) => self.rndv_into(p.slot, from, env, sreq, len, info, prefix),
                Err(e) => self.bad_frame(from, &e.to_string()),
            },
            _ => {}
        }
    }

    /// Match the frames from `from` held back because they arrived ahead of their turn, as
    /// long as the next one in sequence is among them.
    fn drain_early(&mut self, from: Gpid) {
        loop {
            let p = &mut self.peers[from as usize];
            if p.early.is_empty() {
                return;
            }
            let Some(i) = p.early.iter().position(|e| e.0 == p.recv_seq) else {
                return;
            };
            let (seq, h, pl) = p.early.swap_remove(i);
            p.recv_seq = seq.wrapping_add(1);
            let f = Frame::decode(&h).expect("decoded before");
            self.on_matchable(from, f, &pl);
        }
    }

    /// Do the copying of cooperative transfers in progress (outside the transports' polling).
    fn run_coop(&mut self) {
        let mut i = 0;
        while i < self.coop.jobs.len() {
            let finished = match self.coop.jobs[i] {
                CoopJob::Recv { .. } => self.coop_recv(self.coop.jobs[i]),
                CoopJob::Help { .. } => self.coop_help(self.coop.jobs[i]),
            };
            if finished {
                self.coop.jobs.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Our side of a cooperative receive. True when the message is complete.
    fn coop_recv(&mut self, job: CoopJob) -> bool {
        let CoopJob::Recv {
            slot,
            from,
            sreq,
            cslot,
            chunks,
            chunk,
            pid,
            src,
            prefix,
            take,
        } = job
        else {
            return true;
        };
        let Some(Some(slots)) = self.coop.peers.get(from as usize).copied() else {
            return true;
        };
        let Some(r) = self.reqs.get_mut(slot) else {
            return true;
        };
        let buf = r.buf;
        let mut failed = None;
        let mut copy = |k: u32| {
            let (at, n) = chunk_range(k, chunk, prefix, take);
            // SAFETY: at + n <= take <= the receive buffer's capacity.
            let dst = unsafe { std::slice::from_raw_parts_mut(buf.add(at), n) };
            if let Err(e) = cma::read_from(pid, src + at as u64, dst) {
                failed = Some(e);
            }
        };
        while let Some(k) = slots.claim(cslot, chunks) {
            copy(k);
            slots.finish(cslot);
        }
        if slots.done(cslot) < chunks {
            return false; // the sender is still copying its chunks
        }
        if let Some(k) = slots.take_back(cslot) {
            copy(k);
        }
        let r = self.reqs.get_mut(slot).expect("slot");
        if let Ok(RecvAction::Complete(o)) = r.recv.fetched() {
            r.status.bytes = o.bytes as u64;
            if o.truncated {
                r.status.error = Some(truncated(r.msg_len, r.len));
            }
        }
        if let Some(e) = failed {
            r.status.error = Some(Box::new(MpiError::new(
                ErrorClass::Other,
                format!("single-copy read from process {from} failed: {e}"),
            )));
        }
        self.counters.on(self.route(from)).single_copy += 1;
        self.outbox.push_back(Ctrl::new(from, Frame::Fin { sreq }));
        self.finish(slot);
        true
    }

    /// A send is done with its copy slot (its receiver finished, or the send ended): the slot
    /// goes back to the pool, and our help job for it, if any, goes away first. A Help that
    /// arrived in the same batch as the Fin would otherwise copy into a receive buffer that is
    /// no longer the message's, and claim chunks of the slot's next message.
    fn release_coop(&mut self, slot: u32) {
        let r = self.reqs.get_mut(slot).expect("slot");
        if r.coop_slot == 0 {
            return;
        }
        self.coop.pool.put(r.coop_slot - 1);
        r.coop_slot = 0;
        self.coop
            .jobs
            .retain(|j| !matches!(*j, CoopJob::Help { slot: s, .. } if s == slot));
    }

    /// Our side of a cooperative send: copy chunks while any is left. Always finishes (the
    /// send itself completes when the receiver's Fin arrives).
    fn coop_help(&mut self, job: CoopJob) -> bool {
        let CoopJob::Help {
            slot,
            cslot,
            chunks,
            chunk,
            pid,
            dst,
            prefix,
            take,
        } = job
        else {
            return true;
        };
        let (Some(own), Some(r)) = (self.coop.own, self.reqs.get(slot)) else {
            return true;
        };
        if r.coop_slot != cslot + 1 {
            return true; // the send let go of the slot (see `release_coop`)
        }
        let buf = r.buf;
        while let Some(k) = own.claim(cslot, chunks) {
            let (at, n) = chunk_range(k, chunk, prefix, take);
            // SAFETY: at + n <= take <= the send buffer's length (checked when the help
            // request arrived); the buffer is valid until the send completes (after Fin).
            let src = unsafe { std::slice::from_raw_parts(buf.add(at), n) };
            if cma::write_to(pid, dst + at as u64, src).is_err() {
                // The receiver copies this chunk itself; stop helping.
                own.give_back(cslot, k);
                own.finish(cslot);
                break;
            }
            own.finish(cslot);
        }
        true
    }

    fn bad_frame(&mut self, from: Gpid, why: &str) {
        self.counters.bad_frames += 1;
        if self.verbose {
            eprintln!(
                "Protean[{}]: dropped a malformed frame from process {from}: {why}",
                self.me
            );
        }
    }

    // ----------------------------------------------------------------------------------------
    // Probe, matched probe, cancel

    /// First unexpected message matching `spec`: (source, tag, bytes).
    pub fn probe(&self, spec: &Envelope) -> Option<Status> {
        self.unexpected
            .iter()
            .find(|u| matches(spec, &u.env))
            .map(|u| Status {
                source: u.env.src,
                tag: u.env.tag,
                error: None,
                bytes: u.len,
                cancelled: false,
            })
    }

    /// Take the first unexpected message matching `spec` (MPI_Mprobe): its message id and status.
    pub fn mprobe(&mut self, spec: &Envelope) -> Option<(u32, Status)> {
        let i = self.unexpected.iter().position(|u| matches(spec, &u.env))?;
        let u = take_at(&mut self.unexpected, i);
        let st = Status {
            source: u.env.src,
            tag: u.env.tag,
            error: None,
            bytes: u.len,
            cancelled: false,
        };
        let id = match self.free_messages.pop() {
            Some(id) => {
                self.messages[id as usize] = Some(u);
                id
            }
            None => {
                self.messages.push(Some(u));
                (self.messages.len() - 1) as u32
            }
        };
        Some((id, st))
    }

    /// Take a message handed out by [`Pml::mprobe`].
    pub fn take_message(&mut self, id: u32) -> Option<Unexpected> {
        let u = self.messages.get_mut(id as usize)?.take()?;
        self.free_messages.push(id);
        Some(u)
    }

    /// Ask to cancel the request in `slot`. Returns true when it is now complete.
    pub fn cancel(&mut self, slot: u32) -> bool {
        let wire = self.reqs.wire_id(slot);
        let Some(r) = self.reqs.get_mut(slot) else {
            return false;
        };
        // A standard eager send is complete here but may still be unmatched there.
        let sent = r.kind == Kind::Send && r.send.state() == SendState::Sent && !r.permanent;
        if r.complete && !sent {
            return true;
        }
        match r.kind {
            Kind::Recv => {
                if r.recv.cancel() == RecvAction::CompleteCancelled {
                    self.posted.retain(|p| p.slot != slot);
                    r.status.cancelled = true;
                    r.status.bytes = 0;
                    self.finish(slot);
                    return true;
                }
                false
            }
            Kind::Send => match r.send.on(SendEvent::Cancel) {
                Ok(SendAction::Unbacklog) => {
                    let peer = r.peer as usize;
                    r.status.cancelled = true;
                    let before = self.peers[peer].backlog.len();
                    self.peers[peer].backlog.retain(|s| *s != slot);
                    self.backlogged -= before - self.peers[peer].backlog.len();
                    self.maybe_complete_send(slot)
                }
                Ok(SendAction::AskCancel) => {
                    let (peer, seq) = (r.peer, r.seq);
                    // Incomplete until the answer (an eager send was complete).
                    r.complete = false;
                    self.outbox
                        .push_back(Ctrl::new(peer, Frame::CancelReq { sreq: wire, seq }));
                    false
                }
                _ => false,
            },
            Kind::Done => true,
        }
    }

    /// Remove a completed-and-collected request.
    pub fn release(&mut self, slot: u32) -> Option<Request> {
        let r = self.reqs.get(slot)?;
        if r.permanent {
            let mut copy = Request::new(Kind::Done, r.comm);
            copy.complete = true;
            return Some(copy);
        }
        self.unpost(slot);
        self.reqs.remove(slot)
    }

    /// [`Pml::release`] for a caller that has taken what it needs from the request: it is
    /// dropped in place. Moving a request out of the slab to drop it cost a Waitall of small
    /// messages a tenth of its time.
    pub fn discard(&mut self, slot: u32) {
        if self.reqs.get(slot).is_some_and(|r| !r.permanent) {
            self.unpost(slot);
            self.reqs.discard(slot);
        }
    }

    /// A receive request that goes while posted leaves the posted queue.
    fn unpost(&mut self, slot: u32) {
        let r = self.reqs.get(slot).expect("live request");
        if r.kind == Kind::Recv && r.recv.state() == RecvState::Posted {
            self.posted.retain(|p| p.slot != slot);
        }
    }

    /// The sequence number of the last matchable frame sent to `peer` (that of a send
    /// [`Pml::try_eager`] just made, for the request that stands for it).
    pub fn sent_seq(&self, peer: Gpid) -> u32 {
        self.peers[peer as usize].send_seq.wrapping_sub(1)
    }

    /// Sends still waiting for their first frame to go out, for a peer (diagnostics).
    pub fn backlog_len(&self, peer: Gpid) -> usize {
        self.peers.get(peer as usize).map_or(0, |p| p.backlog.len())
    }

    /// Describe why `peer` is unusable, if it is.
    pub fn peer_lost(&self, peer: Gpid) -> Option<&str> {
        self.peers.get(peer as usize)?.lost.as_deref()
    }
}

/// Largest piece of a streamed non-contiguous send (one Data frame).
const STREAM_PIECE: usize = 64 * 1024;
/// Smallest piece of a streamed send (unless the channel's frames are smaller).
const STREAM_PIECE_MIN: usize = 8 * 1024;

/// Data frame bytes `off..off + n` of a non-contiguous receive arrived (in `data`, or already
/// written to the packed copy when `data` is None): unpack the part inside the receive now.
fn unpack_arrived(r: &mut Request, off: usize, data: Option<&[u8]>, n: usize) {
    let Some(pk) = r.packed.as_ref() else {
        return;
    };
    if off >= r.len {
        return;
    }
    let k = n.min(r.len - off);
    let src = match data {
        Some(d) => &d[..k.min(d.len())],
        // SAFETY: the transport wrote `n` bytes at `off` of the packed copy, which holds
        // `r.len` bytes.
        None => unsafe { std::slice::from_raw_parts(r.buf.add(off), k) },
    };
    // SAFETY: the user's buffer holds `count` elements of the type until the receive
    // completes; the window lies inside the message.
    unsafe { pk.dtype.unpack_window(src, off, pk.user_buf, pk.count) };
    r.unpacked_from = r.unpacked_from.min(off);
}

/// Copy an eager message into a receive buffer of `cap` bytes; the receive's status.
#[inline]
fn copy_eager(buf: *mut u8, cap: usize, env: Envelope, data: &[u8]) -> Status {
    let o = Outcome::of(data.len(), cap);
    if o.bytes > 0 {
        // SAFETY: the receive buffer has `cap` writable bytes until the receive completes.
        unsafe { crate::mem::copy(data.as_ptr(), buf, o.bytes) };
    }
    status_of(env, data.len(), cap, o)
}

/// The status of a receive that ended with `o`.
#[inline]
fn status_of(env: Envelope, len: usize, cap: usize, o: Outcome) -> Status {
    Status {
        source: env.src,
        tag: env.tag,
        error: o.truncated.then(|| truncated(len, cap)),
        bytes: o.bytes as u64,
        cancelled: false,
    }
}

fn truncated(msg: usize, cap: usize) -> Box<MpiError> {
    Box::new(MpiError::new(
        ErrorClass::Truncate,
        format!("message of {msg} bytes truncated: the receive buffer holds only {cap} bytes"),
    ))
}

impl FrameSink for Pml {
    #[inline]
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
        let f = match Frame::decode(hdr) {
            Ok(f) => f,
            Err(e) => return self.bad_frame(from, &e.to_string()),
        };
        if from as usize >= self.peers.len() {
            return self.bad_frame(from, "frame from an unknown process");
        }
        self.take_feedback(from, hdr);
        let p = &mut self.peers[from as usize];
        match f {
            Frame::Feedback => {}
            Frame::Eager { seq, .. } | Frame::Rts { seq, .. } => {
                if seq != p.recv_seq {
                    // Ahead of its turn (it came over another channel): hold it.
                    p.early.push((seq, *hdr, payload.to_vec()));
                    return;
                }
                p.recv_seq = seq.wrapping_add(1);
                self.on_matchable(from, f, payload);
                if !self.peers[from as usize].early.is_empty() {
                    self.drain_early(from);
                }
            }
            Frame::Cts { sreq, rreq } => {
                let Some(slot) = self.reqs.from_wire(sreq) else {
                    return;
                };
                let r = self.reqs.get_mut(slot).expect("slot");
                if let Ok(SendAction::Stream) = r.send.on(SendEvent::Cts) {
                    r.remote = rreq;
                    self.streaming.push(slot);
                }
            }
            Frame::Data { rreq, offset } => {
                self.on_data(rreq, offset, Some(payload), payload.len())
            }
            Frame::Fin { sreq } | Frame::SyncAck { sreq } => {
                let Some(slot) = self.reqs.from_wire(sreq) else {
                    return;
                };
                self.release_coop(slot);
                let r = self.reqs.get_mut(slot).expect("slot");
                let ev = if matches!(f, Frame::Fin { .. }) {
                    SendEvent::Fin
                } else {
                    SendEvent::SyncAck
                };
                if let Ok(SendAction::Complete) = r.send.on(ev) {
                    self.maybe_complete_send(slot);
                }
            }
            Frame::Help { sreq, rreq: _ } => {
                let Some(slot) = self.reqs.from_wire(sreq) else {
                    return;
                };
                let r = self.reqs.get_mut(slot).expect("slot");
                if r.coop_slot == 0 || r.send.on(SendEvent::Help).is_err() {
                    return;
                }
                match HelpInfo::decode(payload) {
                    Ok(h) if (h.take as usize) <= r.len => self.coop.jobs.push(CoopJob::Help {
                        slot,
                        cslot: r.coop_slot - 1,
                        chunks: h.chunks,
                        chunk: self.coop.chunk,
                        pid: h.pid,
                        dst: h.addr,
                        prefix: r.off,
                        take: h.take as usize,
                    }),
                    Ok(_) => {
                        self.bad_frame(from, "help request for more bytes than the message has")
                    }
                    Err(e) => self.bad_frame(from, &e.to_string()),
                }
            }
            Frame::CancelReq { sreq, seq } => {
                // The message, if it still waits unmatched (matchable frames from one peer
                // have distinct sequence numbers; eager ones carry no request id).
                let found = self
                    .unexpected
                    .iter()
                    .position(|u| u.from == from && u.seq == seq);
                if let Some(i) = found {
                    let u = take_at(&mut self.unexpected, i);
                    self.recycle(u.data);
                }
                self.outbox.push_back(Ctrl::new(
                    from,
                    Frame::CancelResp {
                        sreq,
                        cancelled: found.is_some(),
                    },
                ));
            }
            Frame::CancelResp { sreq, cancelled } => {
                let Some(slot) = self.reqs.from_wire(sreq) else {
                    return;
                };
                let r = self.reqs.get_mut(slot).expect("slot");
                // Not cancelled (matched already): the protocol goes on where it was. Stale
                // (an ack or finish arrived first): nothing to do.
                match r.send.on(SendEvent::CancelAnswer { cancelled }) {
                    Ok(SendAction::CompleteCancelled) => {
                        r.status.cancelled = true;
                        self.release_coop(slot);
                        self.maybe_complete_send(slot);
                    }
                    // An eager send the receiver had matched: complete again.
                    Ok(SendAction::Complete) => {
                        self.maybe_complete_send(slot);
                    }
                    _ => {}
                }
            }
        }
    }

    #[inline]
    fn data_target(&mut self, rreq: u32, offset: u64, len: usize) -> Option<*mut u8> {
        let slot = self.reqs.from_wire(rreq)?;
        let r = self.reqs.get(slot)?;
        if !r.recv.accepts(offset as usize, len) {
            return None;
        }
        // SAFETY: offset + len <= r.len: inside the receive buffer.
        Some(unsafe { r.buf.add(offset as usize) })
    }

    fn eager_target(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) -> Option<*mut u8> {
        let Ok(Frame::Eager {
            env,
            seq,
            sreq,
            sync,
        }) = Frame::decode(hdr)
        else {
            return None;
        };
        let p = self.peers.get(from as usize)?;
        if seq != p.recv_seq || !p.early.is_empty() {
            return None;
        }
        let (ptr, into) = match self.find_posted(&env) {
            Some(i) => {
                let slot = self.posted[i].slot;
                let (buf, cap) = if slot == DIRECT {
                    let d = self.direct.as_ref()?;
                    (d.buf, d.cap)
                } else {
                    let r = self.reqs.get(slot)?;
                    (r.buf, r.len)
                };
                if cap < len {
                    return None; // truncation: the ordinary path reports it
                }
                if let Some(r) = self.reqs.get_mut(slot) {
                    r.recv.eager_placing(len, cap).ok()?;
                }
                take_at(&mut self.posted, i);
                (buf, PlaceInto::Receive(slot))
            }
            // No receive for it yet: the payload goes straight into the buffer it will wait
            // in, not through the transport's (which a large frame would make it grow).
            None => {
                // The pointer stays valid as the Vec moves: its heap memory does not.
                let mut buf = self.cache.take(len);
                (buf.as_mut_ptr(), PlaceInto::Unexpected(buf))
            }
        };
        let preposted = matches!(into, PlaceInto::Receive(_));
        self.peers[from as usize].recv_seq = seq.wrapping_add(1);
        let c = self.counters.on(self.route(from));
        if preposted {
            c.preposted += 1;
        } else {
            c.unexpected += 1;
        }
        self.take_feedback(from, hdr);
        self.note_arrival(from, preposted, len);
        self.placing.push(Placing {
            from,
            into,
            env,
            sync,
            sreq,
            seq,
            len,
        });
        Some(ptr)
    }

    fn on_eager_placed(&mut self, from: Gpid) {
        let Some(i) = self.placing.iter().position(|p| p.from == from) else {
            return;
        };
        let pl = self.placing.swap_remove(i);
        let slot = match pl.into {
            PlaceInto::Receive(slot) => slot,
            PlaceInto::Unexpected(mut data) => {
                // SAFETY: eager_target took `data` with room for `len` bytes, and the transport
                // has written all of them.
                unsafe { data.set_len(pl.len) };
                let f = Frame::Eager {
                    env: pl.env,
                    seq: 0,
                    sreq: pl.sreq,
                    sync: pl.sync,
                };
                // A receive posted while it was being read takes it now.
                match self.find_posted(&pl.env) {
                    Some(i) => {
                        self.deliver_posted(i, from, f, &data);
                        self.cache.give(data);
                    }
                    None => self.unexpected.push_back(Unexpected {
                        env: pl.env,
                        from,
                        sreq: pl.sreq,
                        seq: pl.seq,
                        len: pl.len as u64,
                        data: UnexpectedData::Eager {
                            data,
                            sync: pl.sync,
                        },
                    }),
                }
                self.drain_early(from);
                return;
            }
        };
        let st = Status {
            source: pl.env.src,
            tag: pl.env.tag,
            error: None,
            bytes: pl.len as u64,
            cancelled: false,
        };
        if slot == DIRECT {
            if let Some(d) = self.direct.as_mut() {
                d.state = DirectState::Done(st);
            }
        } else if let Some(r) = self.reqs.get_mut(slot) {
            r.peer = from;
            r.status = st;
            let _ = r.recv.fetched();
            self.finish(slot);
        }
        if pl.sync {
            self.outbox
                .push_back(Ctrl::new(from, Frame::SyncAck { sreq: pl.sreq }));
        }
        self.drain_early(from);
    }

    fn on_data_placed(&mut self, _from: Gpid, rreq: u32, offset: u64, len: usize) {
        self.on_data(rreq, offset, None, len);
    }

    fn on_sent(&mut self, token: Token) {
        let Some(slot) = self.reqs.from_wire(token.0) else {
            return;
        };
        let r = self.reqs.get_mut(slot).expect("slot");
        r.inflight = r.inflight.saturating_sub(1);
        if r.kind == Kind::Send {
            self.maybe_complete_send(slot);
        }
    }

    fn on_peer_lost(&mut self, peer: Gpid, why: &str) {
        if self.finalizing {
            return;
        }
        if let Some(p) = self.peers.get_mut(peer as usize) {
            if p.lost.is_none() {
                p.lost = Some(why.to_string());
                if self.verbose {
                    eprintln!("Protean[{}]: lost process {peer}: {why}", self.me);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
