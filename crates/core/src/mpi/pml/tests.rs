//! The protocols driven by hand: two engines joined by a recording transport that can refuse
//! frames (backpressure), hold them (pending tokens) and reorder them.

use crate::ids::{ContextId, DtypeId, ReqId};
use std::sync::Arc;

use super::*;
use crate::mpi::datatype::{predefined, predefined_index, Datatype};
use crate::proto::policy::{Costs, Protocol};

/// Frames in flight from one side to the other, and a fake of single copy: both engines live
/// in this process, so a "remote" read is a memcpy from the region's address.
#[derive(Default)]
pub(crate) struct Wire {
    pub(crate) frames: VecDeque<([u8; HEADER_LEN], Vec<u8>)>,
    /// Refuse this many sends with NotNow before accepting.
    pub(crate) refuse: usize,
    /// Report Pending (and keep the token) for frames with a body.
    pub(crate) pending: bool,
    pub(crate) tokens: Vec<Token>,
    max_payload: usize,
    /// Offer no direct reads (caps.get false).
    no_get: bool,
    /// Refuse direct reads as a kernel would.
    refuse_get: bool,
    /// Report reads as Pending, keeping their tokens in `gets` to report later.
    pending_get: bool,
    gets: Vec<Token>,
    exposed: usize,
    retracted: usize,
}

/// A region in the fake: address and length.
fn fake_region(buf: Span) -> Region {
    let mut r = [0u8; crate::transport::REGION_LEN];
    r[..8].copy_from_slice(&(buf.ptr() as u64).to_le_bytes());
    r[8..16].copy_from_slice(&(buf.len() as u64).to_le_bytes());
    Region(r)
}

impl Transport for Wire {
    fn name(&self) -> &'static str {
        "wire"
    }
    fn reaches(&self, _peer: Gpid) -> bool {
        true
    }
    fn caps(&self, _peer: Gpid) -> crate::transport::Caps {
        crate::transport::Caps {
            reliable: true,
            ordered: true,
            max_payload: self.max_payload,
            lanes: 1,
            get: !self.no_get,
            put: false,
            queues: false,
        }
    }
    fn progress<S: FrameSink>(&mut self, _sink: &mut S) -> usize {
        0
    }
    fn expose(&mut self, _peer: Gpid, buf: Span) -> Option<Region> {
        self.exposed += 1;
        Some(fake_region(buf))
    }
    fn retract(&mut self, _peer: Gpid, _region: &Region) {
        self.retracted += 1;
    }
    fn get(
        &mut self,
        _peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        if self.refuse_get {
            return Err(CopyError::Refused("not permitted".into()));
        }
        let addr = u64::from_le_bytes(region.0[..8].try_into().unwrap());
        let rlen = u64::from_le_bytes(region.0[8..16].try_into().unwrap());
        let len = dst.len();
        assert!((offset + len) as u64 <= rlen, "read past the region");
        unsafe { std::ptr::copy_nonoverlapping((addr as *const u8).add(offset), dst.ptr(), len) };
        if self.pending_get {
            self.gets.push(token);
            return Ok(Copied::Pending);
        }
        Ok(Copied::Done)
    }
    fn send(
        &mut self,
        _peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        if self.refuse > 0 {
            self.refuse -= 1;
            return Err(SendError::NotNow);
        }
        let mut p = small.to_vec();
        p.extend_from_slice(body);
        self.frames.push_back((*hdr, p));
        if self.pending && !body.is_empty() && token != Token::NONE {
            self.tokens.push(token);
            return Ok(Sent::Pending);
        }
        Ok(Sent::Done)
    }
}

/// What a transport reading a stream does with a large payload: ask where it goes, write it
/// there, say it is placed. Returns the place, if the engine gave one.
fn place(p: &mut Pml, hdr: &[u8; HEADER_LEN], len: usize) -> Option<*mut u8> {
    p.place(Gpid::new(0), hdr, len).map(|pl| pl.to.ptr())
}

struct Pair {
    a: Pml,
    b: Pml,
    ab: Wire,
    ba: Wire,
}

fn policy(protocol: Protocol) -> Policy {
    Policy {
        protocol,
        eager_limit_shm: 64,
        eager_limit_tcp: 64,
        eager_limit_self: 64,
        prefix: 10,
        ..Policy::default()
    }
}

impl Pair {
    fn new(protocol: Protocol, single_copy: bool) -> Pair {
        let routes = vec![Route::Shm, Route::Shm];
        let mut a = Pml::new(Gpid::new(0), routes.clone(), policy(protocol), single_copy);
        let mut b = Pml::new(Gpid::new(1), routes, policy(protocol), single_copy);
        a.verbose = false;
        b.verbose = false;
        let ab = Wire {
            max_payload: 100,
            ..Default::default()
        };
        let ba = Wire {
            max_payload: 100,
            ..Default::default()
        };
        a.refresh_limits(&ab);
        b.refresh_limits(&ba);
        Pair { a, b, ab, ba }
    }

    /// Deliver everything in flight both ways and flush outboxes until quiet.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            while let Some((h, p)) = self.ab.frames.pop_front() {
                self.b.on_frame(Gpid::new(0), &h, &p);
                moved = true;
            }
            while let Some((h, p)) = self.ba.frames.pop_front() {
                self.a.on_frame(Gpid::new(1), &h, &p);
                moved = true;
            }
            self.a.flush(&mut self.ab);
            self.b.flush(&mut self.ba);
            if !moved
                && self.ab.frames.is_empty()
                && self.ba.frames.is_empty()
                && !self.a.busy()
                && !self.b.busy()
            {
                return;
            }
        }
        panic!("protocol did not settle");
    }

    /// b sends a an empty message with `tag` (nobody receives it), and it is delivered.
    fn reply(&mut self, tag: i32) {
        let mut r = Request::new(Kind::Send, COMM_WORLD);
        r.peer = Gpid::new(0);
        r.env = Envelope {
            ctx: ContextId::new(0),
            src: 1,
            tag,
        };
        let slot = self.b.reqs.insert(r);
        self.b.start_send(slot, &mut self.ba);
        self.run();
    }

    fn release_tokens(&mut self) {
        for t in std::mem::take(&mut self.ab.tokens) {
            self.a.on_sent(t);
        }
        for t in std::mem::take(&mut self.ba.tokens) {
            self.b.on_sent(t);
        }
    }
}

fn env(tag: i32) -> Envelope {
    Envelope {
        ctx: ContextId::new(0),
        src: 0,
        tag,
    }
}

fn send(p: &mut Pml, io: &mut Wire, data: &[u8], tag: i32, mode: Mode) -> (ReqId, bool) {
    let mut r = Request::new(Kind::Send, COMM_WORLD);
    r.peer = Gpid::new(1);
    r.env = env(tag);
    r.buf = data.as_ptr() as *mut u8;
    r.len = data.len();
    r.mode = mode;
    let slot = p.reqs.insert(r);
    let done = p.start_send(slot, io);
    (slot, done)
}

fn recv(p: &mut Pml, buf: &mut [u8], src: i32, tag: i32) -> (ReqId, bool) {
    let mut r = Request::new(Kind::Recv, COMM_WORLD);
    r.env = Envelope {
        ctx: ContextId::new(0),
        src,
        tag,
    };
    r.buf = buf.as_mut_ptr();
    r.len = buf.len();
    let slot = p.reqs.insert(r);
    let done = p.post_recv(slot);
    (slot, done)
}

fn done(p: &Pml, slot: ReqId) -> bool {
    p.reqs.get(slot).unwrap().complete
}

fn status(p: &Pml, slot: ReqId) -> Status {
    p.reqs.get(slot).unwrap().status.clone()
}

#[test]
fn eager_preposted_and_unexpected_keep_order() {
    let mut t = Pair::new(Protocol::Static, false);
    let mut b1 = [0u8; 8];
    let (r1, _) = recv(&mut t.b, &mut b1, ANY_SOURCE, ANY_TAG);
    let (s1, d1) = send(&mut t.a, &mut t.ab, b"first", 5, Mode::Standard);
    let (_, d2) = send(&mut t.a, &mut t.ab, b"second", 6, Mode::Standard);
    assert!(d1 && d2, "eager sends complete locally");
    assert!(done(&t.a, s1));
    t.run();
    assert!(done(&t.b, r1));
    assert_eq!(&b1[..5], b"first");
    let st = status(&t.b, r1);
    assert_eq!((st.source, st.tag, st.bytes), (0, 5, 5));
    // The second one waits unexpected; a probe sees it; a late receive takes it.
    assert_eq!(
        t.b.probe(&Envelope {
            ctx: ContextId::new(0),
            src: 0,
            tag: ANY_TAG
        })
        .map(|s| s.tag),
        Some(6)
    );
    let mut b2 = [0u8; 8];
    let (r2, d) = recv(&mut t.b, &mut b2, 0, 6);
    assert!(d && done(&t.b, r2));
    assert_eq!(&b2[..6], b"second");
    assert_eq!(
        (
            t.b.counters.on(Route::Shm).preposted,
            t.b.counters.on(Route::Shm).unexpected
        ),
        (1, 1)
    );
}

/// Unexpected messages wait in buffers the engine keeps for the next burst: bursts of
/// messages of mixed sizes (eager and the prefix of eager-rendezvous) arrive before their
/// receives, every receive gets its own bytes, and the buffers come back to the cache.
#[test]
fn unexpected_buffers_are_reused_across_bursts() {
    let mut t = Pair::new(Protocol::EagerRendezvous, false);
    t.b.keep_unexpected_buffers(1 << 20);
    let sizes = [1usize, 40, 64, 90, 0, 33];
    let mut kept = 0;
    for burst in 0..3u8 {
        let msgs: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (j as u8) ^ (i as u8 * 7) ^ burst).collect())
            .collect();
        for (i, m) in msgs.iter().enumerate() {
            send(&mut t.a, &mut t.ab, m, i as i32, Mode::Standard);
        }
        t.run();
        // The burst waits in the buffers the last one left.
        assert!(burst == 0 || t.b.cache.kept() < kept, "burst {burst}");
        for (i, m) in msgs.iter().enumerate().rev() {
            let mut buf = vec![0xeeu8; 100];
            let (r, _) = recv(&mut t.b, &mut buf, 0, i as i32);
            t.run();
            t.release_tokens();
            t.run();
            assert!(done(&t.b, r), "burst {burst} message {i}");
            assert_eq!(status(&t.b, r).bytes as usize, m.len());
            assert_eq!(&buf[..m.len()], &m[..], "burst {burst} message {i}");
        }
        kept = t.b.cache.kept();
        assert!(kept > 0, "burst {burst}: the buffers are kept");
    }
}

#[test]
fn tags_select_but_order_holds_per_tag() {
    let mut t = Pair::new(Protocol::Static, false);
    for i in 0..10u8 {
        send(&mut t.a, &mut t.ab, &[i], (i % 2) as i32, Mode::Standard);
    }
    t.run();
    for tag in [1, 0] {
        for k in 0..5u8 {
            let mut b = [0u8; 1];
            let (r, d) = recv(&mut t.b, &mut b, ANY_SOURCE, tag);
            assert!(d && done(&t.b, r));
            assert_eq!(b[0], k * 2 + tag as u8);
        }
    }
}

#[test]
fn rendezvous_pipelined_with_truncation() {
    let mut t = Pair::new(Protocol::Static, false);
    let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let (s, d) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    assert!(!d, "rendezvous waits for the receiver");
    t.run();
    assert!(!done(&t.a, s));
    let mut small = vec![0u8; 700];
    let (r, _) = recv(&mut t.b, &mut small, 0, 1);
    t.run();
    assert!(done(&t.a, s) && done(&t.b, r));
    assert_eq!(&small[..], &data[..700]);
    let st = status(&t.b, r);
    assert_eq!(st.error_class(), Some(ErrorClass::Truncate));
    assert_eq!(st.bytes, 700);
    assert_eq!(t.a.counters.on(Route::Shm).rndv_sent, 1);
}

#[test]
fn rendezvous_single_copy_within_one_process() {
    // Both engines live in this process, so the "remote" read is a memcpy from our own memory.
    let mut t = Pair::new(Protocol::Rendezvous, true);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 3) as u8).collect();
    let mut buf = vec![0u8; 5000];
    let (r, _) = recv(&mut t.b, &mut buf, ANY_SOURCE, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    t.run();
    assert!(done(&t.a, s) && done(&t.b, r));
    assert_eq!(buf, data);
    assert_eq!(t.b.counters.on(Route::Shm).single_copy, 1);
}

#[test]
fn eager_rendezvous_sends_a_prefix() {
    let mut t = Pair::new(Protocol::EagerRendezvous, false);
    let data: Vec<u8> = (0..300u32).map(|i| (i ^ 0x55) as u8).collect();
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 2, Mode::Standard);
    // The Rts frame carries info + 10 bytes of prefix.
    assert_eq!(t.ab.frames[0].1.len(), RndvInfo::LEN + 10);
    t.run();
    let mut buf = vec![0u8; 300];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 2);
    t.run();
    assert!(done(&t.a, s) && done(&t.b, r));
    assert_eq!(buf, data);
    assert_eq!(t.a.counters.on(Route::Shm).split_sent, 1);
}

#[test]
fn synchronous_send_completes_only_when_matched() {
    let mut t = Pair::new(Protocol::Static, false);
    let (s, d) = send(&mut t.a, &mut t.ab, b"sync", 3, Mode::Sync);
    assert!(!d);
    t.run();
    assert!(!done(&t.a, s), "no receive yet");
    let mut b = [0u8; 4];
    recv(&mut t.b, &mut b, 0, 3);
    t.run();
    assert!(done(&t.a, s));
}

#[test]
fn pending_tokens_hold_completion() {
    let mut t = Pair::new(Protocol::Static, false);
    t.ab.pending = true;
    let (s, d) = send(&mut t.a, &mut t.ab, b"held", 1, Mode::Standard);
    assert!(!d && !done(&t.a, s));
    t.release_tokens();
    assert!(done(&t.a, s));
}

#[test]
fn backpressure_keeps_send_order() {
    let mut t = Pair::new(Protocol::Static, false);
    t.ab.refuse = 3;
    let mut slots = vec![];
    // Backlogged sends reference their buffers until they go out: keep them alive.
    let bufs: Vec<[u8; 1]> = (0..6u8).map(|i| [i]).collect();
    for b in &bufs {
        let (s, _) = send(&mut t.a, &mut t.ab, b, 9, Mode::Standard);
        slots.push(s);
    }
    assert!(t.a.backlog_len(Gpid::new(1)) > 0);
    t.run();
    for s in &slots {
        assert!(done(&t.a, *s));
    }
    for i in 0..6u8 {
        let mut b = [0u8; 1];
        recv(&mut t.b, &mut b, 0, 9);
        assert_eq!(b[0], i);
    }
}

#[test]
fn frames_arriving_out_of_turn_are_matched_in_order() {
    let mut t = Pair::new(Protocol::Static, false);
    for i in 0..5u8 {
        send(&mut t.a, &mut t.ab, &[i], 4, Mode::Standard);
    }
    // Reverse what is in flight, as a channel switch could.
    let v: Vec<_> = t.ab.frames.drain(..).rev().collect();
    t.ab.frames.extend(v);
    t.run();
    for i in 0..5u8 {
        let mut b = [0u8; 1];
        let (_, d) = recv(&mut t.b, &mut b, 0, 4);
        assert!(d);
        assert_eq!(b[0], i);
    }
}

#[test]
fn cancel_receive_and_unmatched_send() {
    let mut t = Pair::new(Protocol::Static, false);
    let mut b = [0u8; 4];
    let (r, _) = recv(&mut t.b, &mut b, 0, 1);
    assert!(t.b.cancel(r));
    assert!(status(&t.b, r).cancelled);
    // A synchronous send nobody receives can be cancelled remotely.
    let (s, _) = send(&mut t.a, &mut t.ab, b"gone", 2, Mode::Sync);
    t.run();
    assert!(!t.a.cancel(s));
    t.run();
    assert!(done(&t.a, s) && status(&t.a, s).cancelled);
    assert!(t
        .b
        .probe(&Envelope {
            ctx: ContextId::new(0),
            src: ANY_SOURCE,
            tag: ANY_TAG
        })
        .is_none());
    // Once matched, a cancel fails and the send completes normally.
    let data = vec![1u8; 500];
    let (s2, _) = send(&mut t.a, &mut t.ab, &data, 3, Mode::Standard);
    let mut big = vec![0u8; 500];
    let (r2, _) = recv(&mut t.b, &mut big, 0, 3);
    t.b.flush(&mut t.ba); // Cts is on its way before the cancel
    t.a.cancel(s2);
    t.run();
    assert!(done(&t.a, s2) && !status(&t.a, s2).cancelled);
    assert!(done(&t.b, r2) && big == data);
}

#[test]
fn cancel_eager_sends_that_are_complete_here() {
    let mut t = Pair::new(Protocol::Static, false);
    // A standard eager send completes at once; its message waits unexpected at b. Cancel
    // makes it incomplete until b answers that it took the message out.
    let (s, d) = send(&mut t.a, &mut t.ab, b"x1", 5, Mode::Standard);
    assert!(d);
    t.run();
    assert!(!t.a.cancel(s), "incomplete until the answer");
    assert!(!done(&t.a, s));
    t.run();
    assert!(done(&t.a, s) && status(&t.a, s).cancelled);
    assert!(t.b.probe(&env(5)).is_none(), "the message is gone");
    // A send of the request-free path, cancelled by its sequence number; the one after it
    // (same tag) is untouched.
    assert!(t.a.try_eager(Gpid::new(1), env(6), b"y1", &mut t.ab));
    let mut r = Request::new(Kind::Send, COMM_WORLD);
    r.send = Sender::sent();
    r.complete = true;
    r.peer = Gpid::new(1);
    r.seq = t.a.sent_seq(Gpid::new(1));
    let s2 = t.a.reqs.insert(r);
    let (s3, _) = send(&mut t.a, &mut t.ab, b"y2", 6, Mode::Standard);
    t.run();
    t.a.cancel(s2);
    t.run();
    assert!(done(&t.a, s2) && status(&t.a, s2).cancelled);
    assert!(done(&t.a, s3) && !status(&t.a, s3).cancelled);
    let mut got = [0u8; 2];
    let (_, d) = recv(&mut t.b, &mut got, 0, 6);
    assert!(d && &got == b"y2");
    // Received already: the answer says no, and the send is complete again, not cancelled.
    let (s4, _) = send(&mut t.a, &mut t.ab, b"z1", 7, Mode::Standard);
    t.run();
    let (_, d) = recv(&mut t.b, &mut got, 0, 7);
    assert!(d);
    t.a.cancel(s4);
    assert!(!done(&t.a, s4));
    t.run();
    assert!(done(&t.a, s4) && !status(&t.a, s4).cancelled);
}

#[test]
fn matched_probe_then_receive() {
    let mut t = Pair::new(Protocol::Static, false);
    let data = vec![7u8; 400];
    send(&mut t.a, &mut t.ab, b"tiny", 1, Mode::Standard);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 2, Mode::Standard);
    t.run();
    let (id, st) =
        t.b.mprobe(&Envelope {
            ctx: ContextId::new(0),
            src: 0,
            tag: 2,
        })
        .unwrap();
    assert_eq!(st.bytes, 400);
    assert!(
        t.b.probe(&Envelope {
            ctx: ContextId::new(0),
            src: 0,
            tag: 2
        })
        .is_none(),
        "taken out of the queue"
    );
    let mut buf = vec![0u8; 400];
    let mut r = Request::new(Kind::Recv, COMM_WORLD);
    r.buf = buf.as_mut_ptr();
    r.len = 400;
    let slot = t.b.reqs.insert(r);
    let u = t.b.take_message(id).unwrap();
    t.b.deliver_unexpected(slot, u);
    t.run();
    assert!(done(&t.b, slot) && done(&t.a, s));
    assert_eq!(buf, data);
    assert!(t.b.take_message(id).is_none());
}

#[test]
fn malformed_and_stale_frames_are_dropped() {
    let mut t = Pair::new(Protocol::Static, false);
    t.b.on_frame(Gpid::new(0), &[0xee; HEADER_LEN], &[]);
    t.b.on_frame(Gpid::new(7), &Frame::Fin { sreq: 1 }.encode(), &[]);
    // Rts with a payload too short for its info.
    let rts = Frame::Rts {
        env: env(1),
        seq: 0,
        sreq: 3,
        len: 10,
    }
    .encode();
    t.b.on_frame(Gpid::new(0), &rts, &[1, 2]);
    // Frames for requests that do not exist.
    t.b.on_frame(
        Gpid::new(0),
        &Frame::Data {
            rreq: 12345,
            offset: 0,
        }
        .encode(),
        b"x",
    );
    t.a.on_frame(
        Gpid::new(1),
        &Frame::Cts { sreq: 999, rreq: 1 }.encode(),
        &[],
    );
    assert_eq!(t.b.counters.bad_frames, 3);
    assert!(t
        .b
        .probe(&Envelope {
            ctx: ContextId::new(0),
            src: ANY_SOURCE,
            tag: ANY_TAG
        })
        .is_none());
}

#[test]
fn zero_length_messages_every_protocol() {
    for proto in [
        Protocol::Static,
        Protocol::Eager,
        Protocol::Rendezvous,
        Protocol::EagerRendezvous,
    ] {
        let mut t = Pair::new(proto, false);
        let (s, _) = send(&mut t.a, &mut t.ab, &[], 0, Mode::Standard);
        let mut b = [0u8; 0];
        let (r, _) = recv(&mut t.b, &mut b, 0, 0);
        t.run();
        assert!(done(&t.a, s) && done(&t.b, r), "{proto:?}");
        assert_eq!(status(&t.b, r).bytes, 0);
    }
}

#[test]
fn eager_without_request_keeps_order_with_queued_sends() {
    let mut t = Pair::new(Protocol::Static, false);
    assert!(t.a.try_eager(Gpid::new(1), env(1), b"a", &mut t.ab));
    // Too big for eager: refused, nothing sent.
    assert!(!t.a.try_eager(Gpid::new(1), env(1), &[0u8; 200], &mut t.ab));
    t.ab.refuse = 1;
    let b = *b"b";
    send(&mut t.a, &mut t.ab, &b, 1, Mode::Standard);
    // Something is backlogged: the fast path must not overtake it.
    assert!(!t.a.try_eager(Gpid::new(1), env(1), b"c", &mut t.ab));
    assert!(t.a.busy());
    t.run();
    for want in [b'a', b'b'] {
        let mut got = [0u8; 1];
        let (_, d) = recv(&mut t.b, &mut got, 0, 1);
        assert!(d);
        assert_eq!(got[0], want);
    }
}

#[test]
fn single_copy_reads_through_the_transport_and_retracts_after_fin() {
    let mut t = Pair::new(Protocol::Rendezvous, true);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    let mut buf = vec![0u8; 5000];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    assert_eq!(t.ab.exposed, 1, "the send buffer is offered");
    // The request-to-send matches; the read waits for the receiver's flush (a transport
    // cannot be called from inside its own delivery).
    let (h, p) = t.ab.frames.pop_front().unwrap();
    t.b.on_frame(Gpid::new(0), &h, &p);
    assert!(!done(&t.b, r) && t.b.busy());
    t.b.flush(&mut t.ba);
    assert!(done(&t.b, r));
    assert_eq!(buf, data);
    assert!(!done(&t.a, s), "the send waits for the receiver's Fin");
    t.run();
    assert!(done(&t.a, s));
    assert_eq!(
        t.ab.retracted, 1,
        "the region is retracted once the receiver is done"
    );
    assert_eq!(t.b.counters.on(Route::Shm).single_copy, 1);
}

#[test]
fn single_copy_that_ends_later_and_a_truncated_one() {
    let mut t = Pair::new(Protocol::EagerRendezvous, true);
    t.ba.pending_get = true;
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 5 + 1) as u8).collect();
    let mut buf = vec![0u8; 2000];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    t.run();
    assert!(!done(&t.b, r), "the transport has not reported the read");
    let tok = t.ba.gets.pop().expect("a read in progress");
    t.b.on_got(tok, Ok(()));
    t.run();
    assert!(done(&t.b, r) && done(&t.a, s));
    assert_eq!(&buf[..], &data[..2000], "prefix and read part, truncated");
    let st = status(&t.b, r);
    assert_eq!(st.error_class(), Some(ErrorClass::Truncate));
    assert_eq!(st.bytes, 2000);
    // A read that fails completes the receive with the transport's reason.
    let mut buf = vec![0u8; 3000];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 2);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 2, Mode::Standard);
    t.run();
    let tok = t.ba.gets.pop().expect("a read in progress");
    t.b.on_got(tok, Err("the owner went away".into()));
    t.run();
    assert!(done(&t.b, r) && done(&t.a, s));
    let e = status(&t.b, r).error.unwrap();
    assert!(e.msg.contains("the owner went away"), "{e:?}");
    assert_eq!(t.ab.retracted, 2);
}

#[test]
fn a_refused_single_copy_falls_back_to_data_frames() {
    let mut t = Pair::new(Protocol::Rendezvous, true);
    t.ba.refuse_get = true;
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 3) as u8).collect();
    let mut buf = vec![0u8; 5000];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    t.run();
    assert!(done(&t.b, r) && done(&t.a, s));
    assert_eq!(buf, data);
    assert_eq!(t.b.counters.on(Route::Shm).single_copy, 0);
    assert!(!t.b.single_copy, "no more reads are tried");
    // A channel without direct reads is never offered one.
    let mut t = Pair::new(Protocol::Rendezvous, true);
    t.ab.no_get = true;
    t.a.refresh_limits(&t.ab);
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    t.run();
    assert!(done(&t.b, r) && done(&t.a, s));
    assert_eq!(t.ab.exposed, 0);
}

#[test]
fn blocking_receive_without_a_request() {
    let mut t = Pair::new(Protocol::Static, false);
    let any = Envelope {
        ctx: ContextId::new(0),
        src: ANY_SOURCE,
        tag: ANY_TAG,
    };
    // Posted, then an eager message completes it in place.
    let mut buf = [0u8; 8];
    assert!(matches!(
        t.b.post_direct(any, UNKNOWN_PEER, buf.as_mut_ptr(), 8),
        DirectPost::Posted
    ));
    assert!(!t.b.direct_ready());
    assert!(
        matches!(
            t.b.post_direct(any, UNKNOWN_PEER, buf.as_mut_ptr(), 8),
            DirectPost::UseRequest
        ),
        "one at a time"
    );
    send(&mut t.a, &mut t.ab, b"direct!", 4, Mode::Standard);
    t.run();
    assert!(t.b.direct_ready());
    let st = t.b.take_direct().unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (0, 4, 7));
    assert_eq!(&buf[..7], b"direct!");
    assert_eq!(
        t.b.reqs.live(),
        1,
        "no request was made (the shared complete-send one is always there)"
    );
    // An unexpected eager message completes it at once; a synchronous sender gets its ack.
    let (s, _) = send(&mut t.a, &mut t.ab, b"sync", 5, Mode::Sync);
    t.run();
    let mut small = [0u8; 2];
    match t.b.post_direct(any, UNKNOWN_PEER, small.as_mut_ptr(), 2) {
        DirectPost::Done(st) => assert_eq!(st.error_class(), Some(ErrorClass::Truncate)),
        other => panic!("{other:?}"),
    }
    t.run();
    assert!(done(&t.a, s));
    // A rendezvous message turns the receive into a request.
    let big: Vec<u8> = (0..500u32).map(|i| i as u8).collect();
    let mut dst = vec![0u8; 500];
    assert!(matches!(
        t.b.post_direct(any, UNKNOWN_PEER, dst.as_mut_ptr(), 500),
        DirectPost::Posted
    ));
    let (s2, _) = send(&mut t.a, &mut t.ab, &big, 6, Mode::Standard);
    t.run();
    let slot = t.b.take_direct().unwrap().unwrap_err();
    assert!(done(&t.b, slot) && done(&t.a, s2));
    assert_eq!(dst, big);
    // A rendezvous message already waiting: use a request.
    send(&mut t.a, &mut t.ab, &big, 7, Mode::Standard);
    t.run();
    assert!(matches!(
        t.b.post_direct(any, UNKNOWN_PEER, dst.as_mut_ptr(), 500),
        DirectPost::UseRequest
    ));
}

/// A waiting receive can be ended with an error only while nothing has matched it (what a
/// collective does when its sender went another way, `coll::passed_over`): it leaves the posted
/// queue, and the message it would have taken goes unexpected.
#[test]
fn receives_still_unmatched_can_be_failed() {
    let mut t = Pair::new(Protocol::Static, false);
    let gone = || MpiError::new(ErrorClass::Other, "went another way");
    let mut buf = [0u8; 8];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    assert!(t.b.fail_posted(r, gone()));
    assert!(done(&t.b, r));
    assert_eq!(
        t.b.reqs.get(r).unwrap().status.error_class(),
        Some(ErrorClass::Other)
    );
    assert!(!t.b.fail_posted(r, gone()), "once");
    send(&mut t.a, &mut t.ab, b"late", 1, Mode::Standard);
    t.run();
    assert_eq!(&buf[..4], &[0; 4], "the failed receive took nothing");
    assert_eq!(
        t.b.find_unexpected(|e| e.tag == 1).map(|e| (e.src, e.tag)),
        Some((0, 1))
    );
    assert!(t.b.find_unexpected(|e| e.tag == 2).is_none());
    // A receive that matched is not failed.
    let (r2, _) = recv(&mut t.b, &mut buf, 0, 1);
    assert!(done(&t.b, r2) && !t.b.fail_posted(r2, gone()));
    assert_eq!(&buf[..4], b"late");
    // The blocking receive without a request: failed while waiting, then it reports the error;
    // once a message completed it, it is not.
    assert!(matches!(
        t.b.post_direct(env(3), Gpid::new(0), buf.as_mut_ptr(), 8),
        DirectPost::Posted
    ));
    assert!(t.b.fail_direct(gone()));
    assert!(t.b.direct_ready());
    let st = t.b.take_direct().unwrap().unwrap();
    assert_eq!(st.error_class(), Some(ErrorClass::Other));
    send(&mut t.a, &mut t.ab, b"x", 3, Mode::Standard);
    t.run();
    assert!(
        t.b.find_unexpected(|e| e.tag == 3).is_some(),
        "went unexpected"
    );
    assert!(matches!(
        t.b.post_direct(env(4), Gpid::new(0), buf.as_mut_ptr(), 8),
        DirectPost::Posted
    ));
    send(&mut t.a, &mut t.ab, b"y", 4, Mode::Standard);
    t.run();
    assert!(!t.b.fail_direct(gone()));
    let st = t.b.take_direct().unwrap().unwrap();
    assert_eq!((st.tag, st.error_class()), (4, None));
}

#[test]
fn eager_payload_placed_straight_into_a_posted_receive() {
    let mut t = Pair::new(Protocol::Eager, false);
    let hdr = |seq: u32, sync: bool| {
        Frame::Eager {
            env: env(3),
            seq,
            sreq: if sync { 77 } else { 0 },
            sync,
        }
        .encode()
    };
    let mut buf = vec![0u8; 100];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 3);
    // Out of turn, or too big for the receive: no target.
    assert!(place(&mut t.b, &hdr(1, false), 100).is_none());
    assert!(place(&mut t.b, &hdr(0, false), 101).is_none());
    let p = place(&mut t.b, &hdr(0, true), 60).expect("posted and in turn");
    assert_eq!(p, buf.as_mut_ptr());
    unsafe { std::ptr::write_bytes(p, 0xab, 60) };
    assert!(!done(&t.b, r));
    t.b.placed(Gpid::new(0), &hdr(0, true), 60);
    assert!(done(&t.b, r));
    let st = status(&t.b, r);
    assert_eq!((st.source, st.tag, st.bytes), (0, 3, 60));
    assert!(buf[..60].iter().all(|b| *b == 0xab) && buf[60] == 0);
    // The synchronous sender gets its acknowledgement.
    assert!(t.b.busy());
    // A blocking receive without a request can be the target too.
    let mut small = [0u8; 16];
    let any = Envelope {
        ctx: ContextId::new(0),
        src: ANY_SOURCE,
        tag: ANY_TAG,
    };
    assert!(matches!(
        t.b.post_direct(any, UNKNOWN_PEER, small.as_mut_ptr(), 16),
        DirectPost::Posted
    ));
    let p = place(&mut t.b, &hdr(1, false), 16).unwrap();
    unsafe { std::ptr::write_bytes(p, 7, 16) };
    t.b.placed(Gpid::new(0), &hdr(1, false), 16);
    let st = t.b.take_direct().unwrap().unwrap();
    assert_eq!(st.bytes, 16);
    assert_eq!(small, [7u8; 16]);
}

/// An eager payload with no receive posted is read straight into the buffer it waits in; a
/// receive posted while it is being read takes it when it is complete, otherwise it waits
/// unexpected, in order with the messages after it.
#[test]
fn eager_payload_placed_into_its_unexpected_buffer() {
    let mut t = Pair::new(Protocol::Eager, false);
    t.b.keep_unexpected_buffers(1 << 20);
    let hdr = |seq: u32, tag: i32| {
        Frame::Eager {
            env: env(tag),
            seq,
            sreq: 0,
            sync: false,
        }
        .encode()
    };
    // Nothing posted: it is read into a buffer of its own, out of turn it is not.
    assert!(place(&mut t.b, &hdr(1, 3), 50).is_none());
    let p = place(&mut t.b, &hdr(0, 3), 50).expect("in turn");
    unsafe { std::ptr::write_bytes(p, 0x5a, 50) };
    // A receive posted meanwhile does not see it yet...
    let any = Envelope {
        ctx: ContextId::new(0),
        src: 0,
        tag: 3,
    };
    assert!(t.b.probe(&any).is_none());
    let mut buf = vec![0u8; 64];
    let (r, d) = recv(&mut t.b, &mut buf, 0, 3);
    assert!(!d);
    // ...and takes it once it is complete.
    t.b.placed(Gpid::new(0), &hdr(0, 3), 50);
    assert!(done(&t.b, r));
    assert_eq!(status(&t.b, r).bytes, 50);
    assert!(buf[..50].iter().all(|b| *b == 0x5a) && buf[50] == 0);
    assert!(t.b.cache.kept() > 0, "the buffer went back to the cache");
    // With no receive at all it waits unexpected, then the next message (sent normally)
    // queues behind it.
    let p = place(&mut t.b, &hdr(1, 4), 40).expect("in turn");
    unsafe { std::ptr::write_bytes(p, 0x11, 40) };
    t.b.placed(Gpid::new(0), &hdr(1, 4), 40);
    let second = [0x22u8; 8];
    send(&mut t.a, &mut t.ab, &second, 4, Mode::Standard);
    // a's own sequence numbers start at 0: feed b the frame as if it were the third.
    let (h, pl) = t.ab.frames.pop_front().unwrap();
    let Ok(Frame::Eager {
        env: e, sreq, sync, ..
    }) = Frame::decode(&h)
    else {
        panic!("eager frame")
    };
    let h = Frame::Eager {
        env: e,
        seq: 2,
        sreq,
        sync,
    }
    .encode();
    t.b.on_frame(Gpid::new(0), &h, &pl);
    for (n, fill) in [(40usize, 0x11u8), (8, 0x22)] {
        let mut b = vec![0u8; 64];
        let (r, d) = recv(&mut t.b, &mut b, 0, 4);
        assert!(d && done(&t.b, r));
        assert_eq!(status(&t.b, r).bytes as usize, n);
        assert!(b[..n].iter().all(|x| *x == fill));
    }
    assert_eq!(t.b.counters.on(Route::Shm).unexpected, 3);
}

/// Receivers report how messages arrive; an adaptive sender moves its eager boundary when
/// they stop finding receives posted, and back when they find them again.
#[test]
fn adaptive_sender_follows_the_receivers_reports() {
    let mut t = Pair::new(Protocol::Adaptive, false);
    // Eager costs 1 ns/B, 10 more when unexpected; rendezvous a fixed 50 ns more than eager.
    let costs = Costs::parse("eager=0+1,unexpected=0+10,pressure=1e12,rndv=50+1,split=1000,hide=0")
        .unwrap();
    for p in [&mut t.a, &mut t.b] {
        p.policy.costs_shm = costs;
    }
    t.a.refresh_limits(&t.ab);
    t.b.refresh_limits(&t.ba);
    assert_eq!(
        t.a.limits(Gpid::new(1)).unwrap().eager_max,
        Some(100),
        "before any report"
    );
    let data = [7u8; 50];
    // 64 messages nobody waits for.
    for i in 0..64 {
        send(&mut t.a, &mut t.ab, &data, i, Mode::Standard);
    }
    t.run();
    assert_eq!(t.a.counters.on(Route::Shm).eager_sent, 64);
    // The receiver told the sender (on a frame of its own: nothing else went that way).
    // (at 5 bytes eager and rendezvous cost the same, bar the unexpected data's pressure)
    assert!(matches!(
        t.a.limits(Gpid::new(1)).unwrap().eager_max,
        Some(4 | 5)
    ));
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 64, Mode::Standard);
    t.run();
    assert!(!done(&t.a, s));
    assert_eq!(t.a.counters.on(Route::Shm).rndv_sent, 1);
    // Take them all; from now on every receive is posted before its message.
    let mut bufs = vec![[0u8; 50]; 65];
    for (i, b) in bufs.iter_mut().enumerate() {
        let (r, _) = recv(&mut t.b, b, 0, i as i32);
        t.run();
        assert!(done(&t.b, r));
    }
    assert!(done(&t.a, s));
    let mut rounds = 0;
    while t.a.limits(Gpid::new(1)).unwrap().eager_max != Some(100) {
        rounds += 1;
        assert!(rounds < 200, "the sender never went back to eager");
        let mut b = [0u8; 50];
        let (r, _) = recv(&mut t.b, &mut b, 0, 1000);
        send(&mut t.a, &mut t.ab, &data, 1000, Mode::Standard);
        t.run();
        assert!(done(&t.b, r));
        // Replies carry the report back at no cost.
        t.reply(1);
    }
    // A static sender ignores reports.
    let mut s = Pair::new(Protocol::Static, false);
    for i in 0..64 {
        send(&mut s.a, &mut s.ab, &data[..8], i, Mode::Standard);
    }
    s.run();
    assert_eq!(s.a.limits(Gpid::new(1)).unwrap().eager_max, Some(64));
}

/// A send the transport did not take waits in the backlog unplanned: when it leaves, it goes
/// by what the receiver reported meanwhile.
#[test]
fn backlogged_sends_follow_the_report_that_came_meanwhile() {
    let mut t = Pair::new(Protocol::Adaptive, false);
    let costs = Costs::parse("eager=0+1,unexpected=0+10,pressure=1e12,rndv=50+1,split=1000,hide=0")
        .unwrap();
    t.a.policy.costs_shm = costs;
    t.a.refresh_limits(&t.ab);
    assert_eq!(t.a.limits(Gpid::new(1)).unwrap().eager_max, Some(100));
    let data = [7u8; 50];
    t.ab.refuse = 1;
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 0, Mode::Standard);
    assert!(t.ab.frames.is_empty() && t.a.backlog_len(Gpid::new(1)) == 1);
    // The receiver reports that no receive was posted for a while.
    let mut h = Frame::Feedback.encode();
    frame::set_feedback(&mut h, frame::feedback_word(0, 20));
    t.a.on_frame(Gpid::new(1), &h, &[]);
    assert_eq!(t.a.limits(Gpid::new(1)).unwrap().eager_max, Some(4));
    t.a.flush(&mut t.ab);
    let c = t.a.counters.on(Route::Shm);
    assert_eq!((c.eager_sent, c.rndv_sent), (0, 1));
    assert!(matches!(
        Frame::decode(&t.ab.frames[0].0),
        Ok(Frame::Rts { .. })
    ));
    let mut b = [0u8; 50];
    recv(&mut t.b, &mut b, 0, 0);
    t.run();
    assert!(done(&t.a, s) && b == data);
}

/// A send after a message from the peer (or the first one) is lone and follows the lone costs;
/// one that follows our own sends to the peer follows the stream costs. The requestless eager
/// path obeys the same boundary.
#[test]
fn lone_messages_follow_their_own_boundary() {
    let mut t = Pair::new(Protocol::Adaptive, false);
    // Streams: eager wins at every size. Lone: rendezvous from 31 bytes.
    let costs = Costs::parse(
        "eager=0+1,unexpected=0+10,pressure=1e12,rndv=50+1,lone_eager=0+2,lone_rndv=30+1",
    )
    .unwrap();
    for p in [&mut t.a, &mut t.b] {
        p.policy.costs_shm = costs;
    }
    t.a.refresh_limits(&t.ab);
    t.b.refresh_limits(&t.ba);
    let l = t.a.limits(Gpid::new(1)).unwrap();
    assert_eq!((l.eager_max, l.lone_eager_max), (Some(100), Some(30)));
    let data = [7u8; 40];
    let sent = |t: &mut Pair| {
        let c = t.a.counters.on(Route::Shm);
        (c.rndv_sent, c.eager_sent)
    };
    let mut bufs = vec![[0u8; 40]; 8];
    for (i, b) in bufs.iter_mut().enumerate() {
        recv(&mut t.b, b, 0, i as i32);
    }
    // The first message to a peer is lone; the next follows it.
    send(&mut t.a, &mut t.ab, &data, 0, Mode::Standard);
    send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    t.run();
    assert_eq!(sent(&mut t), (1, 1));
    // A reply makes the next send lone again, on the requestless path too.
    t.reply(99);
    assert!(!t.a.try_eager(Gpid::new(1), env(2), &data, &mut t.ab));
    send(&mut t.a, &mut t.ab, &data, 2, Mode::Standard);
    assert!(t.a.try_eager(Gpid::new(1), env(3), &data, &mut t.ab));
    t.run();
    assert_eq!(sent(&mut t), (2, 2));
    // Small lone messages still go eagerly.
    t.reply(99);
    assert!(t.a.try_eager(Gpid::new(1), env(4), &data[..30], &mut t.ab));
    t.run();
    for (i, b) in bufs.iter().enumerate().take(5) {
        assert_eq!(b[..30], data[..30], "message {i}");
    }
}

/// A non-contiguous send of `count` elements of `dt` at `buf`, streamed (packed as it goes).
fn send_streamed(t: &mut Pair, buf: &[u8], count: usize, dt: &Arc<Datatype>, tag: i32) -> ReqId {
    let mut r = Request::new(Kind::Send, COMM_WORLD);
    r.peer = Gpid::new(1);
    r.env = env(tag);
    r.len = dt.size * count;
    r.packed = Some(Box::new(Packed {
        data: Vec::new(),
        user_buf: buf.as_ptr() as *mut u8,
        count,
        dtype: dt.clone(),
    }));
    r.streamed = true;
    let slot = t.a.reqs.insert(r);
    t.a.start_send(slot, &mut t.ab);
    slot
}

/// A non-contiguous receive of `count` elements of `dt` into `buf` (packed copy as p2p makes).
fn recv_packed(t: &mut Pair, buf: &mut [u8], count: usize, dt: &Arc<Datatype>, tag: i32) -> ReqId {
    let mut r = Request::new(Kind::Recv, COMM_WORLD);
    r.env = Envelope {
        ctx: ContextId::new(0),
        src: 0,
        tag,
    };
    r.len = dt.size * count;
    let mut pk = Box::new(Packed {
        data: vec![0u8; r.len],
        user_buf: buf.as_mut_ptr(),
        count,
        dtype: dt.clone(),
    });
    r.buf = pk.data.as_mut_ptr();
    r.packed = Some(pk);
    let slot = t.b.reqs.insert(r);
    t.b.post_recv(slot);
    slot
}

#[test]
fn streamed_noncontiguous_sends_under_every_protocol() {
    let byte = Arc::new(predefined()[predefined_index("MPI_BYTE").unwrap()].clone());
    // Sender: blocks of 3 bytes, 5 apart; receiver: blocks of 7 bytes, 9 apart (same signature).
    let n = 3 * 7 * 40;
    let st = Arc::new(Datatype::vector(n / 3, 3, 5, false, &byte, DtypeId::new(0)).unwrap());
    let rt = Arc::new(Datatype::vector(n / 7, 7, 9, false, &byte, DtypeId::new(0)).unwrap());
    let src: Vec<u8> = (0..5 * n / 3).map(|i| (i * 13 + 1) as u8).collect();
    let want: Vec<u8> = (0..n).map(|k| src[k / 3 * 5 + k % 3]).collect();
    for (protocol, refuse, pending, truncate) in [
        (Protocol::Rendezvous, 0, false, false),
        (Protocol::Rendezvous, 5, true, false),
        (Protocol::EagerRendezvous, 2, true, false),
        (Protocol::Eager, 1, false, false),
        (Protocol::Rendezvous, 3, false, true),
    ] {
        let mut t = Pair::new(protocol, true);
        t.ab.pending = pending;
        let rcount = if truncate { 1 } else { n / 7 };
        let rt = if truncate {
            Arc::new(Datatype::vector(n / 7 - 10, 7, 9, false, &byte, DtypeId::new(0)).unwrap())
        } else {
            rt.clone()
        };
        let mut dst = vec![0xeeu8; 9 * n / 7];
        let r = recv_packed(&mut t, &mut dst, if truncate { rcount } else { 1 }, &rt, 4);
        let s = send_streamed(&mut t, &src, 1, &st, 4);
        t.ab.refuse = refuse;
        t.run();
        t.release_tokens();
        t.run();
        let what = format!("{protocol:?} refuse {refuse} pending {pending} truncate {truncate}");
        assert!(done(&t.a, s) && done(&t.b, r), "{what}");
        let got = rt.size;
        for (k, w) in want.iter().enumerate() {
            let at = k / 7 * 9 + k % 7;
            let expect = if k < got { *w } else { 0xee };
            assert_eq!(dst[at], expect, "{what}: byte {k}");
        }
        for (i, b) in dst.iter().enumerate() {
            if i % 9 >= 7 {
                assert_eq!(*b, 0xee, "{what}: gap byte {i} written");
            }
        }
        let st_r = status(&t.b, r);
        assert_eq!(st_r.bytes as usize, got, "{what}");
        assert_eq!(
            st_r.error_class(),
            truncate.then_some(ErrorClass::Truncate),
            "{what}"
        );
        // Single copy was allowed but never offered for a streamed send.
        assert_eq!(t.b.counters.on(Route::Shm).single_copy, 0, "{what}");
    }
}

/// After a long run of receives posted in time, a burst of large messages nobody waits for is
/// reported to the sender at once, on frames of the receiver's own: after the first few
/// messages, and again each time the unexpected data doubles past a megabyte.
#[test]
fn a_receiver_tells_a_change_of_phase_at_once() {
    let mut t = Pair::new(Protocol::Eager, false);
    t.ab.max_payload = 1 << 20;
    t.ba.max_payload = 1 << 20;
    t.a.refresh_limits(&t.ab);
    let data = vec![5u8; 256 * 1024];
    let mut buf = vec![0u8; 256 * 1024];
    for i in 0..RxStats::WINDOW as i32 + 8 {
        let (r, _) = recv(&mut t.b, &mut buf, 0, i);
        send(&mut t.a, &mut t.ab, &data, i, Mode::Standard);
        t.run();
        assert!(done(&t.b, r));
    }
    // Reports the receiver sends on frames of its own from now on, as (share, level).
    let mut told = vec![];
    for i in 0..24 {
        send(&mut t.a, &mut t.ab, &data, 1000 + i, Mode::Standard);
        while let Some((h, p)) = t.ab.frames.pop_front() {
            t.b.on_frame(Gpid::new(0), &h, &p);
        }
        t.b.flush(&mut t.ba);
        while let Some((h, _)) = t.ba.frames.pop_front() {
            assert!(matches!(Frame::decode(&h), Ok(Frame::Feedback)));
            told.push((
                i + 1,
                frame::feedback_of(frame::feedback_field(&h)).unwrap(),
            ));
        }
    }
    // 8 messages: none of the new ones preposted, 2 MiB unexpected (22 bits); 16: 4 MiB;
    // 24: 6 MiB, the same power of two, so nothing new.
    assert_eq!(told, vec![(8, (0, 22)), (16, (0, 23))]);
}

/// Sends without a request read nothing: after POLL_EVERY bytes of them the fast path declines
/// until the engine has taken a progress pass (which resets the count), so a burst reads the
/// receiver's reports while it goes.
#[test]
fn eager_without_request_declines_after_a_megabyte_unpolled() {
    let mut t = Pair::new(Protocol::Eager, false);
    let chunk = [3u8; 100];
    let mut sent = 0;
    while t.a.try_eager(Gpid::new(1), env(1), &chunk, &mut t.ab) {
        sent += chunk.len();
        assert!(sent <= POLL_EVERY + chunk.len(), "never declined");
    }
    assert!(sent >= POLL_EVERY);
    assert!(t.a.eager_unpolled >= POLL_EVERY);
    t.a.eager_unpolled = 0; // what Engine::progress_p2p does
    assert!(t.a.try_eager(Gpid::new(1), env(1), &chunk, &mut t.ab));
}

/// A transport asks where large payloads go and whether to await them whole: rendezvous data
/// always, an eager payload of at least AWAIT_WHOLE_EAGER_MIN only when it is part of a stream
/// (nothing was sent back to its sender since its last frame); a lone one is read as it comes.
#[test]
fn placement_waits_whole_for_streams_and_not_for_lone_messages() {
    let mut t = Pair::new(Protocol::Eager, false);
    let n = AWAIT_WHOLE_EAGER_MIN;
    let hdr = |seq: u32| {
        Frame::Eager {
            env: env(3),
            seq,
            sreq: 0,
            sync: false,
        }
        .encode()
    };
    let mut buf = vec![0u8; n];
    let (r0, _) = recv(&mut t.b, &mut buf, 0, 3);
    // A small frame from a first: b has sent nothing since, so what follows is a stream.
    t.b.on_frame(Gpid::new(0), &Frame::Feedback.encode(), &[]);
    let pl = t.b.place(Gpid::new(0), &hdr(0), n).expect("posted");
    assert_eq!(pl.wait, Await::Whole);
    t.b.placed(Gpid::new(0), &hdr(0), n);
    assert!(done(&t.b, r0));
    // Smaller payloads in a stream are read as they come.
    let mut small = vec![0u8; n / 2];
    let (r1, _) = recv(&mut t.b, &mut small, 0, 3);
    let pl = t.b.place(Gpid::new(0), &hdr(1), n / 2).expect("posted");
    assert_eq!(pl.wait, Await::AsItComes);
    t.b.placed(Gpid::new(0), &hdr(1), n / 2);
    assert!(done(&t.b, r1));
    // b answers a: the next large payload from a is lone.
    t.reply(9);
    let (r2, _) = recv(&mut t.b, &mut buf, 0, 3);
    let pl = t.b.place(Gpid::new(0), &hdr(2), n).expect("posted");
    assert_eq!(pl.wait, Await::AsItComes);
    t.b.placed(Gpid::new(0), &hdr(2), n);
    assert!(done(&t.b, r2));
    // Rendezvous data is awaited whole.
    let data: Vec<u8> = (0..500u32).map(|i| i as u8).collect();
    let mut dst = vec![0u8; 500];
    let mut t = Pair::new(Protocol::Rendezvous, false);
    let (r, _) = recv(&mut t.b, &mut dst, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    let (h, p) = t.ab.frames.pop_front().unwrap();
    t.b.on_frame(Gpid::new(0), &h, &p);
    t.b.flush(&mut t.ba);
    let (h, p) = t.ba.frames.pop_front().unwrap();
    t.a.on_frame(Gpid::new(1), &h, &p); // clear to send
    t.a.flush(&mut t.ab);
    let (h, p) = t.ab.frames.pop_front().unwrap();
    let pl =
        t.b.place(Gpid::new(0), &h, p.len())
            .expect("a receive waits for it");
    assert_eq!(pl.wait, Await::Whole);
    pl.to.write(&p);
    t.b.placed(Gpid::new(0), &h, p.len());
    t.run();
    assert!(done(&t.b, r) && done(&t.a, s));
    assert_eq!(dst, data);
}

/// A broken channel ends what is under way with the peer, with an error naming it; nothing
/// waits for bytes that will not come.
#[test]
fn a_lost_peer_fails_what_is_under_way_with_it() {
    let mut t = Pair::new(Protocol::Rendezvous, false);
    let data = vec![5u8; 1000];
    let mut buf = vec![0u8; 1000];
    let (r, _) = recv(&mut t.b, &mut buf, 0, 1);
    let (s, _) = send(&mut t.a, &mut t.ab, &data, 1, Mode::Standard);
    // The request-to-send arrives and is matched; its data never comes.
    let (h, p) = t.ab.frames.pop_front().unwrap();
    t.b.on_frame(Gpid::new(0), &h, &p);
    assert!(!done(&t.b, r));
    t.b.on_peer_lost(Gpid::new(0), "lane 2 reset");
    assert!(done(&t.b, r));
    let e = status(&t.b, r).error.unwrap();
    assert!(
        e.msg.contains("process 0") && e.msg.contains("lane 2 reset"),
        "{e:?}"
    );
    // The sender, waiting for its clear-to-send, ends too; a later send fails at once.
    t.a.on_peer_lost(Gpid::new(1), "connection reset");
    assert!(done(&t.a, s));
    assert!(status(&t.a, s).error.is_some());
    let (s2, d2) = send(&mut t.a, &mut t.ab, &data, 2, Mode::Standard);
    assert!(d2 && status(&t.a, s2).error.is_some());
}
