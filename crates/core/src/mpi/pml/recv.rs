//! Receiving and matching: posted and unexpected queues, the blocking receive without a
//! request, eager and rendezvous deliveries, per-peer ordering of matchable frames, probes,
//! and payloads placed directly by a transport.

use super::*;
use crate::ids::ReqId;

/// An eager message a transport is writing straight into memory of ours.
#[derive(Debug)]
pub(super) struct Placing {
    pub(super) from: Gpid,
    pub(super) into: PlaceInto,
    pub(super) env: Envelope,
    pub(super) sync: bool,
    pub(super) sreq: u32,
    pub(super) seq: u32,
    pub(super) len: usize,
}

/// Where a [`Placing`] goes.
#[derive(Debug)]
pub(super) enum PlaceInto {
    /// The receive it matched: its slot, or DIRECT.
    Receive(ReqId),
    /// No receive matched: the buffer it will wait in, unexpected.
    Unexpected(Vec<u8>),
}

/// Posted-queue marker of the blocking receive that waits without a request.
pub(super) const DIRECT: ReqId = ReqId::new(u32::MAX);

/// Where the blocking receive without a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DirectState {
    Waiting,
    Done(Status),
    /// A rendezvous message matched: the receive continues as a request in this slot.
    Upgraded(ReqId),
}

/// A blocking receive of contiguous data posted without a request (MPI_Recv's common case):
/// an eager message is copied straight into its buffer and completes it.
#[derive(Debug)]
pub(super) struct Direct {
    pub(super) spec: Envelope,
    /// The process the receive names as its source (`UNKNOWN_PEER` for MPI_ANY_SOURCE).
    pub(super) from: Gpid,
    pub(super) buf: *mut u8,
    pub(super) cap: usize,
    pub(super) state: DirectState,
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
pub(super) struct Posted {
    pub(super) spec: Envelope,
    pub(super) slot: ReqId,
}

/// What an unexpected message brought with it.
#[derive(Debug)]
pub enum UnexpectedData {
    Eager { data: Vec<u8>, sync: bool },
    Rts { info: RndvInfo, prefix: Vec<u8> },
}

impl Unexpected {
    /// Bytes of ours it holds.
    pub fn held(&self) -> usize {
        match &self.data {
            UnexpectedData::Eager { data, .. } => data.len(),
            UnexpectedData::Rts { prefix, .. } => prefix.len(),
        }
    }
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

/// Data frame bytes `off..off + n` of a non-contiguous receive arrived (in `data`, or already
/// written to the packed copy when `data` is None): unpack the part inside the receive now.
pub(super) fn unpack_arrived(r: &mut Request, off: usize, data: Option<&[u8]>, n: usize) {
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
pub(super) fn copy_eager(buf: *mut u8, cap: usize, env: Envelope, data: &[u8]) -> Status {
    let o = Outcome::of(data.len(), cap);
    if o.bytes > 0 {
        // SAFETY: the receive buffer has `cap` writable bytes until the receive completes.
        unsafe { crate::mem::copy(data.as_ptr(), buf, o.bytes) };
    }
    status_of(env, data.len(), cap, o)
}

/// The status of a receive that ended with `o`.
#[inline]
pub(super) fn status_of(env: Envelope, len: usize, cap: usize, o: Outcome) -> Status {
    Status {
        source: env.src,
        tag: env.tag,
        error: o.truncated.then(|| truncated(len, cap)),
        bytes: o.bytes as u64,
        cancelled: false,
    }
}

pub(super) fn truncated(msg: usize, cap: usize) -> Box<MpiError> {
    Box::new(MpiError::new(
        ErrorClass::Truncate,
        format!("message of {msg} bytes truncated: the receive buffer holds only {cap} bytes"),
    ))
}

impl Pml {
    /// A message waits unexpected; its bytes count against `unexpected_max`, and the first
    /// one that goes over sets `overflow` (the engine stops the job with it).
    pub(super) fn queue_unexpected(&mut self, u: Unexpected) {
        self.unexpected_bytes += u.held();
        if self.unexpected_bytes > self.unexpected_max && self.overflow.is_none() {
            self.overflow = Some(format!(
                "messages that no receive has matched yet hold {} bytes, more than unexpected_max ({} bytes); the last one came from process {}. Post receives earlier, or raise PROTEAN_UNEXPECTED_MAX",
                self.unexpected_bytes, self.unexpected_max, u.from
            ));
        }
        self.unexpected.push_back(u);
    }

    /// Take unexpected message `i` off the queue.
    pub(super) fn take_unexpected(&mut self, i: usize) -> Unexpected {
        let u = take_at(&mut self.unexpected, i);
        self.unexpected_bytes -= u.held();
        u
    }

    /// Stop the job when unexpected messages hold more than `max` bytes.
    pub fn limit_unexpected(&mut self, max: usize) {
        self.unexpected_max = max;
    }

    /// Why the job must stop, if it must (see [`Pml::queue_unexpected`]).
    #[inline]
    pub fn overflowed(&mut self) -> Option<String> {
        self.overflow.as_ref()?;
        self.overflow.take()
    }

    // ----------------------------------------------------------------------------------------
    // Receiving

    /// Post a blocking receive of `cap` contiguous bytes without a request; `from` is the
    /// process `spec.src` names (`UNKNOWN_PEER` for MPI_ANY_SOURCE).
    pub fn post_direct(
        &mut self,
        spec: Envelope,
        from: Gpid,
        buf: *mut u8,
        cap: usize,
    ) -> DirectPost {
        // Busy, or a source that is gone (the request path reports it).
        if self.direct.is_some() || self.peers.get(from.idx()).is_some_and(|p| p.lost.is_some()) {
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
            let u = self.take_unexpected(i);
            self.recycle(u.data);
            return DirectPost::Done(st);
        }
        self.posted.push_back(Posted { spec, slot: DIRECT });
        self.direct = Some(Direct {
            spec,
            from,
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

    /// End the blocking receive without a request with error `e` while no message has matched
    /// it (it leaves the posted queue; [`Pml::take_direct`] then gives the error): true if
    /// it did.
    pub fn fail_direct(&mut self, e: MpiError) -> bool {
        let waiting = self
            .direct
            .as_ref()
            .is_some_and(|d| d.state == DirectState::Waiting);
        if !waiting || !self.posted.iter().any(|p| p.slot == DIRECT) {
            return false;
        }
        self.posted.retain(|p| p.slot != DIRECT);
        let mut st = Status::EMPTY;
        st.error = Some(Box::new(e));
        self.direct.as_mut().expect("checked").state = DirectState::Done(st);
        true
    }

    /// End the receive in `slot` with error `e` while it is posted and no message has
    /// matched it (it leaves the posted queue and completes): true if it did.
    pub fn fail_posted(&mut self, slot: ReqId, e: MpiError) -> bool {
        let posted = self.reqs.get(slot).is_some_and(|r| {
            r.kind == Kind::Recv && !r.complete && r.recv.state() == RecvState::Posted
        });
        if !posted || !self.posted.iter().any(|p| p.slot == slot) {
            return false;
        }
        self.posted.retain(|p| p.slot != slot);
        self.fail(slot, e);
        true
    }

    /// Take the finished blocking receive: its status, or the request slot it became.
    pub fn take_direct(&mut self) -> Option<Result<Status, ReqId>> {
        match self.direct.take()?.state {
            DirectState::Done(st) => Some(Ok(st)),
            DirectState::Upgraded(slot) => Some(Err(slot)),
            DirectState::Waiting => None,
        }
    }

    /// Post the receive in `slot` (spec in `env`, buffer and capacity set). Returns true when
    /// it completed at once from the unexpected queue.
    pub fn post_recv(&mut self, slot: ReqId) -> bool {
        let spec = self.reqs.get(slot).expect("recv slot").env;
        if let Some(i) = self.unexpected.iter().position(|u| matches(&spec, &u.env)) {
            let u = self.take_unexpected(i);
            self.deliver_unexpected(slot, u);
            return self.reqs.get(slot).is_none_or(|r| r.complete);
        }
        // A receive from one process that is gone (and sent nothing matching before) fails
        // now rather than wait for it.
        let from = self.reqs.get(slot).expect("slot").peer;
        if spec.src >= 0 {
            if let Some(why) = self.peers.get(from.idx()).and_then(|p| p.lost.clone()) {
                let e = MpiError::new(ErrorClass::Other, format!("process {from} is gone: {why}"));
                self.fail(slot, e);
                return true;
            }
        }
        let r = self.reqs.get_mut(slot).expect("slot");
        if let Err(e) = r.recv.post() {
            debug_assert!(false, "{e}");
        }
        self.posted.push_back(Posted { spec, slot });
        false
    }

    /// Receive a message taken out of the unexpected queue (MPI_Mrecv, or a late post).
    pub fn deliver_unexpected(&mut self, slot: ReqId, u: Unexpected) {
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
    pub(super) fn recycle(&mut self, d: UnexpectedData) {
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
    #[inline(always)]
    pub(super) fn eager_into(&mut self, slot: ReqId, from: Gpid, env: Envelope, data: &[u8]) {
        let r = self.reqs.get_mut(slot).expect("recv slot");
        r.peer = from;
        if let Ok(RecvAction::Complete(_)) = r.recv.eager(data.len(), r.len) {
            r.status = copy_eager(r.buf, r.len, env, data);
            self.finish(slot);
        }
    }

    /// Start receiving a rendezvous message into a matched receive.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rndv_into(
        &mut self,
        slot: ReqId,
        from: Gpid,
        env: Envelope,
        sreq: u32,
        len: u64,
        info: RndvInfo,
        prefix: &[u8],
    ) {
        let wire = self.reqs.wire_id(slot);
        let single_copy = self.single_copy;
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
            unsafe { crate::mem::copy(prefix.as_ptr(), r.buf, pre) };
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
        if single_copy && !info.region.is_none() && take > prefix.len() {
            // The sender offered its memory: read it through the transport at the next flush
            // (a transport cannot be called from inside its own delivery).
            r.off = prefix.len();
            self.gets.push(GetJob {
                slot,
                from,
                sreq,
                region: info.region,
                prefix: prefix.len(),
                take,
            });
            return;
        }
        r.off = prefix.len();
        self.outbox
            .push_back(Ctrl::new(from, Frame::Cts { sreq, rreq: wire }));
    }

    /// Data of a rendezvous message arrived (bytes `offset..offset+n` were written already
    /// when `data` is None).
    pub(super) fn on_data(&mut self, rreq: u32, offset: u64, data: Option<&[u8]>, n: usize) {
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
                unsafe { crate::mem::copy(d.as_ptr(), r.buf.add(off), k) };
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
    pub(super) fn find_posted(&self, env: &Envelope) -> Option<usize> {
        // The oldest posted receive is the usual match: test it before searching.
        match self.posted.front() {
            Some(p) if matches(&p.spec, env) => Some(0),
            Some(_) => self.posted.iter().position(|p| matches(&p.spec, env)),
            None => None,
        }
    }

    /// A matchable frame in its turn: match it or queue it as unexpected.
    pub(super) fn on_matchable(&mut self, from: Gpid, f: Frame, payload: &[u8]) {
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
        self.queue_unexpected(Unexpected {
            env,
            from,
            sreq,
            seq,
            len,
            data,
        });
    }

    /// Deliver a matchable frame into the posted receive at `i` of the posted queue. Inline:
    /// it is the whole of an eager message's delivery, and as a call it cost a prologue,
    /// an epilogue and a copy of the frame.
    #[inline(always)]
    pub(super) fn deliver_posted(&mut self, i: usize, from: Gpid, f: Frame, payload: &[u8]) {
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
            let mut r = Request::new(Kind::Recv, COMM_WORLD);
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
    pub(super) fn drain_early(&mut self, from: Gpid) {
        loop {
            let p = &mut self.peers[from.idx()];
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

    // ----------------------------------------------------------------------------------------
    // Probe, matched probe, cancel

    /// The envelope of the first unexpected message that `f` accepts.
    pub fn find_unexpected(&self, f: impl Fn(&Envelope) -> bool) -> Option<Envelope> {
        self.unexpected.iter().map(|u| u.env).find(|env| f(env))
    }

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
        let u = self.take_unexpected(i);
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

    /// For an eager message from `from` whose payload has not arrived: where to write it, if
    /// the frame is next in order (see [`FrameSink::place`]).
    pub(super) fn eager_target(
        &mut self,
        from: Gpid,
        env: Envelope,
        seq: u32,
        sreq: u32,
        sync: bool,
        len: usize,
    ) -> Option<*mut u8> {
        let p = self.peers.get(from.idx())?;
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
        self.peers[from.idx()].recv_seq = seq.wrapping_add(1);
        let c = self.counters.on(self.route(from));
        if preposted {
            c.preposted += 1;
        } else {
            c.unexpected += 1;
        }
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

    /// The payload announced by `eager_target` was written.
    pub(super) fn on_eager_placed(&mut self, from: Gpid) {
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
                    None => self.queue_unexpected(Unexpected {
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
}
