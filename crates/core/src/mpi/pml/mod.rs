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
//! The engine does no I/O itself: sending goes through a [`Transport`] (the dispatcher over
//! the process's transports, or a recorder in tests); frames arrive through [`FrameSink`].
//! Replies produced while a transport is delivering (clear-to-send, finish, acks) wait in an
//! outbox that [`Pml::flush`] drains; so do the direct reads of single copy (a transport
//! capability, [`Transport::get`]) and the release of regions exposed for them.
//!
//! Files: this one (per-peer state, the outbox and flush, completion, cancel, the
//! [`FrameSink`] dispatch), `send.rs` (the sending side), `recv.rs` (matching and receiving),
//! `copy.rs` (single copy through the transport), `tests.rs` (two engines driven by hand).

mod copy;
mod recv;
mod send;

use crate::ids::{CommId, ReqId};
use std::collections::VecDeque;

use crate::error::{ErrorClass, MpiError};
use crate::events::{self, Event};
use crate::mem::BufCache;
use crate::mpi::comm::COMM_WORLD;
use crate::mpi::datatype::pool;
use crate::profile::Counters;
use crate::proto::frame::{self, Envelope, Frame, RndvInfo, HEADER_LEN};
use crate::proto::policy::{Feedback, Limits, Plan, Policy, Protocol, Route, RxStats, Streak};
pub use crate::transport::SendError;
use crate::transport::{
    Await, Caps, Copied, CopyError, FrameSink, Gpid, Placement, Region, Sent, Span, Token,
    Transport,
};

use super::request::*;
use crate::proto::machine::{Outcome, RecvAction, SendAction, SendEvent};

use copy::GetJob;
use recv::*;
pub use recv::{DirectPost, Unexpected, UnexpectedData};

/// Bytes waiting unsent to a peer (on a transport that queues without bound, TCP) at or above
/// which no eager message starts: later sends wait in the engine's backlog and are planned
/// when they leave, by the receiver's latest report. The kernel's socket buffers take
/// megabytes at once, so without this a burst of sends was planned, and committed to eager,
/// before any report on it could come back. Requests-to-send always go: they commit to
/// nothing, and holding one back would cost a stream of rendezvous messages a handshake each.
pub const HOLD_BACK_QUEUED: usize = 1 << 20;

/// Eager payloads in a stream at least this large are awaited whole by a transport that
/// places them directly ([`Await::Whole`]); smaller ones, and lone ones, are read as they come.
/// Measured in the mixed workload of bench/prepost over TCP loopback, eager into posted
/// receives against rendezvous: 1 MiB 0.8x without, 1.0x with; 512 KiB 0.87-0.96x without,
/// 0.98-1.02x with; 256 KiB 1.01x without, 0.91-0.97x with.
pub const AWAIT_WHOLE_EAGER_MIN: usize = 512 * 1024;

/// A control frame waiting for a transport.
#[derive(Debug, Clone, Copy)]
struct Ctrl {
    peer: Gpid,
    hdr: [u8; HEADER_LEN],
}

impl Ctrl {
    fn new(peer: Gpid, f: Frame) -> Ctrl {
        Ctrl {
            peer,
            hdr: f.encode(),
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
    /// The channel in use can read the peer's memory directly (single copy).
    direct: bool,
    /// The channel queues output without bound: hold eager messages back behind
    /// [`HOLD_BACK_QUEUED`] bytes of it.
    queues: bool,
    /// We sent the peer a frame since the last one arrived from it. A large eager payload
    /// that arrives while this is false is part of a stream (see [`AWAIT_WHOLE_EAGER_MIN`]).
    sent_since: bool,
    /// The peer's last report on how our messages arrive (raw header field; 0: none yet).
    fb_in: u16,
    /// What we see of the messages from this peer, and the report we stamp on every frame
    /// to it; `fb_told`: the report that last went out.
    rx: RxStats,
    fb_out: u16,
    fb_told: u16,
    send_seq: u32,
    recv_seq: u32,
    /// Messages and bytes sent to this peer (the channel profiler's record).
    sent_msgs: u64,
    sent_bytes: u64,
    /// A matchable message from this peer arrived since our last send to it: the next send
    /// is lone (a reply, or a request after one), and the policy weighs its latency.
    replied: bool,
    /// Messages sent under a report of every receive preposted (`Costs::lag`).
    streak: Streak,
    /// Matchable frames that arrived ahead of their turn: (seq, header, payload).
    early: Vec<(u32, [u8; HEADER_LEN], Vec<u8>)>,
    /// Sends waiting to emit their first frame, in start order.
    backlog: VecDeque<ReqId>,
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
    streaming: Vec<ReqId>,
    /// Sends waiting in some peer's backlog.
    backlogged: usize,
    pub counters: Counters,
    pub policy: Policy,
    pub me: Gpid,
    pub single_copy: bool,
    /// Sends whose buffer is exposed to their receiver for a direct read: (slot, peer,
    /// region), until the send ends.
    exposed: Vec<(ReqId, Gpid, Region)>,
    /// Regions to retract at the next flush (their sends ended).
    retracts: Vec<(Gpid, Region)>,
    /// Single-copy reads to start at the next flush.
    gets: Vec<GetJob>,
    /// Reads in progress in a transport, by receive slot.
    getting: Vec<GetJob>,
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
    /// Bytes the unexpected queue holds, its limit, and why the job must stop once a sender
    /// pushed it over.
    unexpected_bytes: usize,
    unexpected_max: usize,
    overflow: Option<String>,
}

impl Peer {
    fn new(route: Route) -> Peer {
        Peer {
            route,
            limits: Limits::RENDEZVOUS,
            max_payload: 0,
            direct: false,
            queues: false,
            sent_since: false,
            fb_in: 0,
            rx: RxStats::default(),
            fb_out: 0,
            fb_told: 0,
            send_seq: 0,
            sent_msgs: 0,
            sent_bytes: 0,
            recv_seq: 0,
            // Nothing is in flight before the first send.
            replied: true,
            streak: Streak::default(),
            early: Vec::new(),
            backlog: VecDeque::new(),
            lost: None,
        }
    }
}

impl Pml {
    /// Processes of another job joined the table (a spawn, a connection): their routes, for
    /// gpids from the current end of the table on, or changed for gpids already in it that
    /// were unreachable. Limits follow from the transports' caps.
    pub fn add_peers<T: Transport>(&mut self, routes: &[Route], io: &T) {
        for (g, &route) in routes.iter().enumerate() {
            if g >= self.peers.len() {
                self.peers.push(Peer::new(route));
            } else if self.peers[g].route != route && self.peers[g].route == Route::Unreachable {
                self.peers[g] = Peer::new(route);
            } else {
                continue;
            }
            let caps = io.caps(Gpid::from_idx(g));
            self.on_caps(Gpid::from_idx(g), caps);
        }
    }

    /// A process of another job left the table (disconnected): forget its state.
    pub fn drop_peer(&mut self, peer: Gpid) {
        if let Some(p) = self.peers.get_mut(peer.idx()) {
            *p = Peer::new(Route::Unreachable);
        }
    }

    /// Slot of the request every eagerly completed nonblocking send shares: a handle to a
    /// complete send with an empty status, which waiting and freeing leave in place.
    pub const DONE_SEND: ReqId = ReqId::new(0);

    pub fn new(me: Gpid, routes: Vec<Route>, policy: Policy, single_copy: bool) -> Pml {
        let peers = routes.into_iter().map(Peer::new).collect();
        let mut reqs = Slab::default();
        let mut done = Request::new(Kind::Done, COMM_WORLD);
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
            single_copy,
            exposed: Vec::new(),
            retracts: Vec::new(),
            gets: Vec::new(),
            getting: Vec::new(),
            direct: None,
            placing: Vec::new(),
            messages: Vec::new(),
            free_messages: Vec::new(),
            cache: BufCache::default(),
            eager_unpolled: 0,
            verbose: false,
            finalizing: false,
            unexpected_bytes: 0,
            unexpected_max: usize::MAX,
            overflow: None,
        }
    }

    /// Messages and bytes sent to `peer` so far (the channel profiler reads them at phase
    /// boundaries).
    pub fn sent_to(&self, peer: Gpid) -> (u64, u64) {
        self.peers
            .get(peer.idx())
            .map_or((0, 0), |p| (p.sent_msgs, p.sent_bytes))
    }

    /// Recompute what depends on the policy and the channels (at start-up and whenever the
    /// policy changes; a transport reports a peer's new channel through
    /// [`FrameSink::on_caps`]).
    pub fn refresh_limits<T: Transport>(&mut self, io: &T) {
        for g in 0..self.peers.len() {
            let caps = io.caps(Gpid::from_idx(g));
            self.on_caps(Gpid::from_idx(g), caps);
        }
    }

    fn update_limits(&mut self, peer: Gpid) {
        let p = &mut self.peers[peer.idx()];
        let limits = p.limits_under(&self.policy, self.policy.protocol, peer);
        if events::armed(Event::ProtocolLimits) && limits != p.limits {
            let none = |m: Option<usize>| m.map_or(-1, |m| m as i64);
            events::raise(Event::ProtocolLimits, || {
                [
                    peer.get() as i64,
                    none(limits.eager_max),
                    none(limits.lone_eager_max),
                    limits.split_max as i64,
                ]
            });
        }
        p.limits = limits;
    }

    /// The limits in use for messages to `peer` (protean-info, tests).
    pub fn limits(&self, peer: Gpid) -> Option<Limits> {
        self.peers.get(peer.idx()).map(|p| p.limits)
    }

    /// A header arrived from `from`: take in the feedback it carries.
    #[inline(always)]
    fn take_feedback(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN]) {
        let w = frame::feedback_field(hdr);
        if w == 0 {
            return;
        }
        let Some(p) = self.peers.get_mut(from.idx()) else {
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
        let p = &mut self.peers[from.idx()];
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
            .get(peer.idx())
            .map_or(Route::Unreachable, |p| p.route)
    }

    /// Is there work that progress must still do on our side (queued frames, transfers)?
    #[inline]
    pub fn busy(&self) -> bool {
        !self.outbox.is_empty()
            || !self.streaming.is_empty()
            || self.backlogged > 0
            || !self.gets.is_empty()
            || !self.retracts.is_empty()
    }

    /// Mark a request complete; release it if nobody will wait for it. Inline for the common
    /// case (nothing to unpack, not freed by the user), the rest out of line.
    #[inline]
    fn finish(&mut self, slot: ReqId) {
        let r = self.reqs.get_mut(slot).expect("slot");
        r.complete = true;
        if r.packed.is_some() || r.user_freed {
            self.finish_rest(slot);
        }
    }

    #[inline(never)]
    fn finish_rest(&mut self, slot: ReqId) {
        let r = self.reqs.get_mut(slot).expect("slot");
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

    fn fail(&mut self, slot: ReqId, e: MpiError) {
        self.release_region(slot);
        let r = self.reqs.get_mut(slot).expect("slot");
        r.status.error = Some(Box::new(e));
        let _ = r.send.on(SendEvent::Failed);
        r.recv.fail();
        r.inflight = 0;
        self.finish(slot);
    }

    /// Push out what waits: control frames, backlogged sends, rendezvous data.
    pub fn flush<I: Transport>(&mut self, io: &mut I) {
        for (peer, region) in self.retracts.drain(..) {
            io.retract(peer, &region);
        }
        if !self.gets.is_empty() {
            self.start_gets(io);
        }
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
    fn send_ctrl<I: Transport>(&mut self, io: &mut I) -> Result<(), SendError> {
        let c = self.outbox.front_mut().expect("outbox not empty");
        let p = &mut self.peers[c.peer.idx()];
        frame::set_feedback(&mut c.hdr, p.fb_out);
        io.send(c.peer, &c.hdr, &[], &[], Token::NONE)?;
        p.sent_since = true;
        p.fb_told = p.fb_out;
        self.outbox.pop_front();
        Ok(())
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

    /// Ask to cancel the request in `slot`. Returns true when it is now complete.
    pub fn cancel(&mut self, slot: ReqId) -> bool {
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
                    let peer = r.peer.idx();
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
    pub fn release(&mut self, slot: ReqId) -> Option<Request> {
        let r = self.reqs.get(slot)?;
        if r.permanent {
            let mut copy = Request::new(Kind::Done, r.comm);
            copy.complete = true;
            return Some(copy);
        }
        self.unpost(slot);
        self.reqs.remove(slot)
    }

    /// Let go of a request nobody will wait for: released now if it is complete, else when it
    /// completes (a collective's send abandoned with its call).
    pub fn detach(&mut self, slot: ReqId) {
        match self.reqs.get_mut(slot) {
            Some(r) if !r.complete => r.user_freed = true,
            Some(_) => drop(self.release(slot)),
            None => {}
        }
    }

    /// [`Pml::release`] for a caller that has taken what it needs from the request: it is
    /// dropped in place. Moving a request out of the slab to drop it cost a Waitall of small
    /// messages a tenth of its time.
    pub fn discard(&mut self, slot: ReqId) {
        if self.reqs.get(slot).is_some_and(|r| !r.permanent) {
            self.unpost(slot);
            self.reqs.discard(slot);
        }
    }

    /// Collect, in one lookup, a request that needs nothing but its status taken and its slot
    /// freed: the record of a request-free eager send, or a complete, non-persistent send or
    /// receive with no generalized, partitioned, MPI_Isendrecv or shared part. Its
    /// communicator and status; None for anything else, left as it was for the general path
    /// (`Engine::collect`). The completion calls of a window of small messages spent more on
    /// collecting (three lookups, the status moved through four results) than on matching.
    #[inline]
    pub fn take_plain(&mut self, slot: ReqId) -> Option<(CommId, Status)> {
        if Slab::is_sent(slot) {
            let rec = *self.reqs.sent(slot)?;
            if rec.promoted != 0 {
                return None;
            }
            self.reqs.remove_sent(slot);
            return Some((rec.comm, Status::EMPTY));
        }
        let r = self.reqs.get_mut(slot)?;
        if !r.complete
            || r.permanent
            || r.greq
            || r.persist.is_some()
            || r.part.is_some()
            || r.parts.is_some()
            || (r.kind == Kind::Recv && r.recv.state() == RecvState::Posted)
        {
            return None;
        }
        let st = std::mem::replace(&mut r.status, Status::EMPTY);
        let comm = r.comm;
        self.reqs.discard(slot);
        Some((comm, st))
    }

    /// A receive request that goes while posted leaves the posted queue.
    fn unpost(&mut self, slot: ReqId) {
        let r = self.reqs.get(slot).expect("live request");
        if r.kind == Kind::Recv && r.recv.state() == RecvState::Posted {
            self.posted.retain(|p| p.slot != slot);
        }
    }

    /// The sequence number of the last matchable frame sent to `peer` (that of a send
    /// [`Pml::try_eager`] just made, for the request that stands for it).
    pub fn sent_seq(&self, peer: Gpid) -> u32 {
        self.peers[peer.idx()].send_seq.wrapping_sub(1)
    }

    /// Sends still waiting for their first frame to go out, for a peer (diagnostics).
    pub fn backlog_len(&self, peer: Gpid) -> usize {
        self.peers.get(peer.idx()).map_or(0, |p| p.backlog.len())
    }

    /// Describe why `peer` is unusable, if it is.
    pub fn peer_lost(&self, peer: Gpid) -> Option<&str> {
        self.peers.get(peer.idx())?.lost.as_deref()
    }
}

impl FrameSink for Pml {
    #[inline]
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
        let f = match Frame::decode(hdr) {
            Ok(f) => f,
            Err(e) => return self.bad_frame(from, &e.to_string()),
        };
        if from.idx() >= self.peers.len() {
            return self.bad_frame(from, "frame from an unknown process");
        }
        self.take_feedback(from, hdr);
        let p = &mut self.peers[from.idx()];
        p.sent_since = false;
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
                if !self.peers[from.idx()].early.is_empty() {
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
                self.release_region(slot);
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
            Frame::CancelReq { sreq, seq } => {
                // The message, if it still waits unmatched (matchable frames from one peer
                // have distinct sequence numbers; eager ones carry no request id).
                let found = self
                    .unexpected
                    .iter()
                    .position(|u| u.from == from && u.seq == seq);
                if let Some(i) = found {
                    let u = self.take_unexpected(i);
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
                        self.release_region(slot);
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

    /// A transport reading a stream asks where a large payload goes: a rendezvous Data
    /// payload into its receive buffer; an eager message in its turn into the receive it
    /// matches, or the buffer it will wait in as an unexpected message.
    #[inline]
    fn place(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
        match Frame::decode(hdr).ok()? {
            Frame::Data { rreq, offset } => {
                let slot = self.reqs.from_wire(rreq)?;
                let r = self.reqs.get(slot)?;
                if !r.recv.accepts(offset as usize, len) {
                    return None;
                }
                // SAFETY: offset + len <= r.len: inside the receive buffer, written only by
                // this transfer until the receive completes.
                let to = unsafe { Span::new(r.buf.add(offset as usize), len) };
                Some(Placement {
                    to,
                    wait: Await::Whole,
                })
            }
            Frame::Eager {
                env,
                seq,
                sreq,
                sync,
            } => {
                let ptr = self.eager_target(from, env, seq, sreq, sync, len)?;
                self.take_feedback(from, hdr);
                let p = &mut self.peers[from.idx()];
                let stream = !std::mem::take(&mut p.sent_since);
                Some(Placement {
                    // SAFETY: eager_target names a receive buffer of at least `len` bytes, or
                    // an unexpected buffer it keeps, both untouched until `placed`.
                    to: unsafe { Span::new(ptr, len) },
                    wait: if stream && len >= AWAIT_WHOLE_EAGER_MIN {
                        Await::Whole
                    } else {
                        Await::AsItComes
                    },
                })
            }
            _ => None,
        }
    }

    fn placed(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) {
        match Frame::decode(hdr) {
            Ok(Frame::Data { rreq, offset }) => self.on_data(rreq, offset, None, len),
            Ok(Frame::Eager { .. }) => self.on_eager_placed(from),
            _ => {}
        }
    }

    fn on_got(&mut self, token: Token, result: Result<(), String>) {
        let Some(slot) = self.reqs.from_wire(token.0) else {
            return;
        };
        if let Some(i) = self.getting.iter().position(|j| j.slot == slot) {
            let job = self.getting.swap_remove(i);
            self.got(job, result);
        }
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

    /// A dedicated channel to `peer` was gained or given back: later frames follow its caps.
    fn on_caps(&mut self, peer: Gpid, caps: Caps) {
        let Some(p) = self.peers.get_mut(peer.idx()) else {
            return;
        };
        p.max_payload = caps.max_payload;
        p.direct = caps.get;
        p.queues = caps.queues;
        self.update_limits(peer);
    }

    fn on_peer_lost(&mut self, peer: Gpid, why: &str) {
        if self.finalizing {
            return;
        }
        if let Some(p) = self.peers.get_mut(peer.idx()) {
            if p.lost.is_none() {
                p.lost = Some(why.to_string());
                if self.verbose {
                    eprintln!("Protean[{}]: lost process {peer}: {why}", self.me);
                }
                self.fail_with(peer, why);
            }
        }
    }
}

impl Pml {
    /// The channel to `peer` broke: every operation under way with it (a send waiting for
    /// its receiver or streaming, a receive whose message is arriving) ends with an error
    /// naming the peer and the reason, rather than waiting for bytes that will not come.
    fn fail_with(&mut self, peer: Gpid, why: &str) {
        let slots: Vec<ReqId> = self
            .reqs
            .slots()
            .filter(|&s| {
                self.reqs.get(s).is_some_and(|r| {
                    r.peer == peer
                        && !r.complete
                        && match r.kind {
                            Kind::Send => !r.send.is_done(),
                            // Arriving, or posted for this process alone (MPI_ANY_SOURCE
                            // receives may still be matched by others).
                            Kind::Recv => {
                                r.recv.state() == RecvState::Receiving
                                    || (r.recv.state() == RecvState::Posted && r.env.src >= 0)
                            }
                            Kind::Done => false,
                        }
                })
            })
            .collect();
        let p = &mut self.peers[peer.idx()];
        self.backlogged -= p.backlog.len();
        p.backlog.clear();
        if let Some(d) = self.direct.as_mut() {
            if d.from == peer && d.spec.src >= 0 && d.state == DirectState::Waiting {
                let mut st = Status::EMPTY;
                st.error = Some(Box::new(MpiError::new(
                    ErrorClass::Other,
                    format!("the connection to process {peer} broke: {why}"),
                )));
                d.state = DirectState::Done(st);
                self.posted.retain(|p| p.slot != DIRECT);
            }
        }
        self.posted.retain(|p| !slots.contains(&p.slot));
        for s in slots {
            self.streaming.retain(|x| *x != s);
            self.fail(
                s,
                MpiError::new(
                    ErrorClass::Other,
                    format!("the connection to process {peer} broke: {why}"),
                ),
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
