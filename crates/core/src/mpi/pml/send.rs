//! Sending: the request-free eager path, the first frame of a send by its plan, rendezvous
//! data, and large non-contiguous sends packed piece by piece as they go.

use super::*;
use crate::ids::ReqId;

/// Largest piece of a streamed non-contiguous send (one Data frame).
pub(super) const STREAM_PIECE: usize = 64 * 1024;

/// Smallest Data frame of a message striped over several lanes.
pub(super) const STRIPE_PIECE_MIN: usize = 64 * 1024;
/// Smallest piece of a streamed send (unless the channel's frames are smaller).
pub(super) const STREAM_PIECE_MIN: usize = 8 * 1024;

impl Pml {
    // ----------------------------------------------------------------------------------------
    // Sending

    /// Send `data` eagerly without a request if nothing is queued for the peer, the policy
    /// says eager and the transport takes the frame now. False: nothing was sent.
    #[inline]
    pub fn try_eager<I: Transport>(
        &mut self,
        peer: Gpid,
        env: Envelope,
        data: &[u8],
        io: &mut I,
    ) -> bool {
        let Some(p) = self.peers.get_mut(peer.idx()) else {
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
        p.sent_since = true;
        p.fb_told = p.fb_out;
        p.send_seq = p.send_seq.wrapping_add(1);
        p.sent_msgs += 1;
        p.sent_bytes += data.len() as u64;
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
    pub fn start_send<I: Transport>(&mut self, slot: ReqId, io: &mut I) -> bool {
        let peer = self.reqs.get(slot).expect("send slot").peer;
        let p = &mut self.peers[peer.idx()];
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
                self.peers[peer.idx()].backlog.push_back(slot);
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
    pub(super) fn emit_first<I: Transport>(
        &mut self,
        slot: ReqId,
        io: &mut I,
    ) -> Result<bool, SendError> {
        let wire = self.reqs.wire_id(slot);
        let r = self.reqs.get_mut(slot).expect("send slot");
        let (peer, len) = (r.peer, r.len);
        let p = &mut self.peers[peer.idx()];
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
        let p = &mut self.peers[peer.idx()];
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
                // An eager message starts only while little waits ahead of it: the sends
                // behind wait in the engine, whose plan for them then follows the receiver's
                // latest report.
                if p.queues && io.queued(peer) >= HOLD_BACK_QUEUED {
                    return Err(SendError::NotNow);
                }
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
                p.sent_since = true;
                p.fb_told = fb;
                p.send_seq = seq.wrapping_add(1);
                p.sent_msgs += 1;
                p.sent_bytes += len as u64;
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
                // Otherwise the part after the prefix is offered for a direct read when the
                // channel can do one.
                let region = if self.single_copy && !r.streamed && p.direct && len > prefix {
                    // SAFETY: the send buffer holds `len > prefix` bytes, not written until the
                    // request completes, which is after the region is retracted.
                    io.expose(peer, unsafe { Span::new(r.buf.add(prefix), len - prefix) })
                } else {
                    None
                };
                let info = RndvInfo {
                    prefix: prefix as u32,
                    region: region.unwrap_or(Region::NONE),
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
                        if let Some(reg) = region {
                            io.retract(peer, &reg);
                        }
                        return Err(e);
                    }
                };
                if let Some(reg) = region {
                    r.exposed = true;
                    self.exposed.push((slot, peer, reg));
                }
                p.sent_since = true;
                p.fb_told = fb;
                p.send_seq = seq.wrapping_add(1);
                p.sent_msgs += 1;
                p.sent_bytes += len as u64;
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
    pub(super) fn maybe_complete_send(&mut self, slot: ReqId) -> bool {
        let r = self.reqs.get_mut(slot).expect("slot");
        if r.send.is_done() && r.inflight == 0 {
            self.finish(slot);
            true
        } else {
            false
        }
    }

    /// Send Data frames of a rendezvous send. Returns true when no more frames are needed.
    pub(super) fn pump<I: Transport>(&mut self, slot: ReqId, io: &mut I) -> bool {
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
        let max = self.peers[peer.idx()].max_payload.max(1);
        // Striped over several lanes: pieces small enough for every lane to carry a few, so a
        // slow lane holds back less of the message.
        let lanes = io.caps(peer).lanes.max(1) as usize;
        let frag = if lanes > 1 {
            (r.len / (lanes * 4)).clamp(STRIPE_PIECE_MIN, max)
        } else {
            max
        };
        let fb = self.peers[peer.idx()].fb_out;
        self.peers[peer.idx()].sent_since = true;
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
            match io.send_any(peer, &hdr, &[], body, Token(wire)) {
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
    pub(super) fn prepare_streamed(&mut self, slot: ReqId, plan: Plan) {
        let r = self.reqs.get_mut(slot).expect("send slot");
        let route = self.peers[r.peer.idx()].route;
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
    pub(super) fn pump_packed<I: Transport>(&mut self, slot: ReqId, io: &mut I) -> bool {
        let r = self.reqs.get_mut(slot).expect("send slot");
        let peer = r.peer;
        // At least 8 pieces where the message allows, so that packing and unpacking overlap
        // also for messages of a few pieces.
        let piece = (r.len / 8)
            .clamp(STREAM_PIECE_MIN, STREAM_PIECE)
            .min(self.peers[peer.idx()].max_payload)
            .max(1);
        let fb = self.peers[peer.idx()].fb_out;
        self.peers[peer.idx()].sent_since = true;
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
}
