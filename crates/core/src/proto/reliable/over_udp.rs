//! The machine driving the real UDP transport over loopback: processes of one test process,
//! each with its own sockets, through the transport contract only.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::*;
use crate::mem::Span;
use crate::runtime::keys::Keys;
use crate::transport::udp::fault::Faults;
use crate::transport::udp::wire::{Outer, Seal, KIND_DATA, OUTER_LEN, TAG_LEN};
use crate::transport::udp::{Settings, Udp};
use crate::transport::{Await, FrameSink, Placement, Sent, Token, Transport, HEADER_LEN};

const KEY: [u8; 32] = [0x5a; 32];

#[derive(Default)]
struct Sink {
    frames: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
    /// Large payloads are placed here when set.
    target: Option<Vec<u8>>,
    placed: usize,
    sent: Vec<Token>,
    lost: Vec<(Gpid, String)>,
}

impl FrameSink for Sink {
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
        self.frames.push((from, *hdr, payload.to_vec()));
    }
    fn place(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
        let t = self.target.as_mut()?;
        t.resize(len, 0);
        Some(Placement {
            // SAFETY: the test's buffer outlives the transfer and is not touched meanwhile.
            to: unsafe { Span::new(t.as_mut_ptr(), len) },
            wait: Await::Whole,
        })
    }
    fn placed(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], _len: usize) {
        self.placed += 1;
    }
    fn on_sent(&mut self, t: Token) {
        self.sent.push(t);
    }
    fn on_peer_lost(&mut self, peer: Gpid, why: &str) {
        self.lost.push((peer, why.to_string()));
    }
}

fn settings(dgram: usize, sockets: usize, faults: Option<Faults>) -> Settings {
    Settings {
        sockets,
        sockbuf: 1 << 20,
        dgram,
        buffer_max: 64 << 20,
        faults,
        clear_on_loopback: true,
        verbose: false,
    }
}

fn params() -> Params {
    Params {
        rto_min: MS,
        ..Params::default()
    }
}

/// `n` processes of a job, on loopback.
fn job(n: usize, s: &Settings, p: Params) -> Vec<Udp> {
    let mut v: Vec<Udp> = (0..n as u32)
        .map(|me| {
            Udp::new(
                Gpid::new(me),
                Ipv4Addr::LOCALHOST,
                s,
                Box::new(Links::with_params(p, n)),
            )
            .unwrap()
        })
        .collect();
    let addrs: Vec<Vec<SocketAddr>> = v.iter().map(|u| u.addrs().to_vec()).collect();
    for u in &mut v {
        u.start(Keys::Shared(KEY), n);
        for (g, a) in addrs.iter().enumerate() {
            u.set_addrs(Gpid::from_idx(g), a);
        }
    }
    v
}

fn msg(kind: u8, i: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = kind;
    h[4..8].copy_from_slice(&i.to_le_bytes());
    h
}

fn idx(h: &[u8; HEADER_LEN]) -> u32 {
    u32::from_le_bytes(h[4..8].try_into().unwrap())
}

/// Progress every process until `done` or `secs`.
fn run(ps: &mut [Udp], sinks: &mut [Sink], secs: u64, done: impl Fn(&[Sink]) -> bool) {
    let t0 = Instant::now();
    while !done(sinks) {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "not done after {secs} s"
        );
        for (u, s) in ps.iter_mut().zip(sinks.iter_mut()) {
            u.progress(s);
        }
    }
}

fn payload(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k as u32 * 31 + i) as u8).collect()
}

/// Process 0 sends `count` frames of growing sizes to process 1 (and 1 one back); all arrive
/// in order and intact.
fn stream(s: &Settings, count: u32, sizes: usize) -> (Vec<Udp>, Vec<Sink>) {
    let mut ps = job(2, s, params());
    let mut sinks = vec![Sink::default(), Sink::default()];
    let bodies: Vec<Vec<u8>> = (0..count)
        .map(|i| payload(i, (i as usize * 7919) % sizes))
        .collect();
    for (i, b) in bodies.iter().enumerate() {
        match ps[0].send(Gpid::new(1), &msg(1, i as u32), b"sm", b, Token::NONE) {
            Ok(Sent::Done) => {}
            r => panic!("{r:?}"),
        }
        ps[0].progress(&mut sinks[0]);
        ps[1].progress(&mut sinks[1]);
    }
    ps[1]
        .send(Gpid::new(0), &msg(2, 0), &[], b"back", Token::NONE)
        .unwrap();
    run(&mut ps, &mut sinks, 60, |s| {
        s[1].frames.len() == count as usize && !s[0].frames.is_empty()
    });
    for (i, (from, h, p)) in sinks[1].frames.iter().enumerate() {
        assert_eq!((*from, idx(h)), (Gpid::new(0), i as u32));
        assert_eq!(&p[..2], b"sm");
        assert!(p[2..] == bodies[i][..], "frame {i} intact");
    }
    assert_eq!(sinks[0].frames[0].2, b"back");
    // Everything gets acknowledged, and then nothing is left to do.
    run(&mut ps, &mut sinks, 30, |_| true);
    let t0 = Instant::now();
    while ps.iter().any(|u| u.has_work()) {
        assert!(t0.elapsed() < Duration::from_secs(30), "still busy");
        for (u, s) in ps.iter_mut().zip(sinks.iter_mut()) {
            u.progress(s);
        }
    }
    assert!(ps[0].quiet(Gpid::new(1)) && ps[1].quiet(Gpid::new(0)));
    assert!(sinks.iter().all(|s| s.lost.is_empty()));
    (ps, sinks)
}

#[test]
fn frames_of_any_size_arrive_in_order_over_loopback_datagrams() {
    stream(&settings(0, 1, None), 300, 200_000);
}

#[test]
fn frames_arrive_sealed_whole_when_payloads_may_not_go_in_clear() {
    let s = Settings {
        clear_on_loopback: false,
        ..settings(0, 1, None)
    };
    stream(&s, 100, 200_000);
}

#[test]
fn small_datagrams_cut_and_join_frames() {
    stream(&settings(1472, 1, None), 200, 50_000);
}

#[test]
fn striping_over_several_sockets_keeps_order() {
    let (ps, _) = stream(&settings(4096, 3, None), 200, 30_000);
    assert_eq!(ps[0].addrs().len(), 3);
}

#[test]
fn loss_duplication_and_reordering_are_repaired() {
    let f = Faults::parse("drop=0.1,dup=0.05,reorder=0.1,seed=3")
        .unwrap()
        .unwrap();
    stream(&settings(8192, 2, Some(f)), 300, 100_000);
}

#[test]
fn large_payloads_are_placed_and_pending_tokens_reported() {
    let mut ps = job(2, &settings(1472, 1, None), params());
    let mut sinks = vec![Sink::default(), Sink::default()];
    sinks[1].target = Some(Vec::new());
    let src = payload(9, 1 << 20);
    // The body is lent until its token is reported.
    let r = ps[0]
        .send(Gpid::new(1), &msg(3, 0), &[], &src, Token(7))
        .unwrap();
    assert_eq!(r, Sent::Pending, "a megabyte does not fit the first window");
    run(&mut ps, &mut sinks, 60, |s| {
        s[1].placed == 1 && s[0].sent == [Token(7)]
    });
    assert!(sinks[1].target.as_deref() == Some(&src[..]));
    assert!(sinks[1].frames.is_empty());
}

#[test]
fn try_send_takes_only_what_fits_one_datagram_now() {
    let mut ps = job(2, &settings(1472, 1, None), params());
    let mut sinks = vec![Sink::default(), Sink::default()];
    assert!(ps[0].try_send(Gpid::new(1), &msg(1, 0), &[1u8; 1000]));
    assert!(
        !ps[0].try_send(Gpid::new(1), &msg(1, 1), &[1u8; 2000]),
        "two datagrams"
    );
    assert_eq!(ps[0].queued(Gpid::new(1)), 0, "nothing taken");
    run(&mut ps, &mut sinks, 10, |s| s[1].frames.len() == 1);
}

/// A datagram from `src` to `dst` sealed with `key` (in clear or not), data sequence 1, that
/// carries a whole eager frame with the payload "forged!!".
fn forged(key: &[u8; 32], src: u32, dst: u32, clear: bool) -> Vec<u8> {
    let mut d = Outer {
        src: Gpid::new(src),
        dst: Gpid::new(dst),
        kind: KIND_DATA,
        clear,
        pn: 1,
    }
    .encode()
    .to_vec();
    let mut h = [0u8; super::HEADER_LEN];
    Header {
        seq: 1,
        ack: 1,
        sack: [(0, 0); SACK_BLOCKS],
        limit: 64,
        delay_us: 0,
    }
    .encode(&mut h);
    d.extend_from_slice(&h);
    let mut frame = 8u32.to_le_bytes().to_vec();
    frame.extend_from_slice(&msg(1, 666));
    frame.extend_from_slice(b"forged!!");
    d.extend_from_slice(&frame);
    d.resize(d.len() + TAG_LEN, 0);
    Seal::new(key).seal(&mut d, OUTER_LEN + super::HEADER_LEN);
    d
}

#[test]
fn forged_garbage_and_replayed_datagrams_are_dropped_and_counted() {
    let mut ps = job(2, &settings(0, 1, None), params());
    let mut sinks = vec![Sink::default(), Sink::default()];
    let to = ps[1].addrs()[0];
    let spy = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Garbage, a datagram claiming to come from process 0 sealed with another key, one to a
    // process outside the job, and a short one.
    spy.send_to(b"hello there", to).unwrap();
    let forged = |key: &[u8; 32], src: u32, dst: u32| forged(key, src, dst, false);
    spy.send_to(&forged(&[1u8; 32], 0, 1), to).unwrap();
    spy.send_to(&forged(&KEY, 0, 9), to).unwrap();
    spy.send_to(&forged(&KEY, 7, 1), to).unwrap();
    spy.send_to(&[0u8; 20], to).unwrap();
    // A real message, then the spy replays a genuine datagram (sealed with the job's key:
    // as if it had recorded one) after the real sequence moved on.
    ps[0]
        .send(Gpid::new(1), &msg(1, 0), &[], b"real", Token::NONE)
        .unwrap();
    run(&mut ps, &mut sinks, 10, |s| s[1].frames.len() == 1);
    spy.send_to(&forged(&KEY, 0, 1), to).unwrap();
    ps[0]
        .send(Gpid::new(1), &msg(1, 1), &[], b"real", Token::NONE)
        .unwrap();
    run(&mut ps, &mut sinks, 10, |s| s[1].frames.len() == 2);
    for _ in 0..1000 {
        for (u, s) in ps.iter_mut().zip(sinks.iter_mut()) {
            u.progress(s);
        }
    }
    assert_eq!(ps[1].stats().rejected_datagrams, 5);
    assert_eq!(sinks[1].frames.len(), 2);
    assert!(sinks[1].frames.iter().all(|f| f.2 == b"real"));
    assert!(sinks.iter().all(|s| s.lost.is_empty()));
}

#[test]
fn datagrams_in_clear_are_taken_only_from_the_senders_socket_on_loopback() {
    for clear in [true, false] {
        let s = Settings {
            clear_on_loopback: clear,
            ..settings(0, 1, None)
        };
        let mut ps = job(2, &s, params());
        let mut sinks = vec![Sink::default(), Sink::default()];
        // Sealed with the job's key, so its tag checks; but it comes from another socket
        // than process 0's (or, sealed only, from anywhere to a process that takes nothing
        // in clear).
        let spy = UdpSocket::bind("127.0.0.1:0").unwrap();
        spy.send_to(&forged(&KEY, 0, 1, true), ps[1].addrs()[0])
            .unwrap();
        ps[0]
            .send(Gpid::new(1), &msg(1, 0), &[], b"real", Token::NONE)
            .unwrap();
        run(&mut ps, &mut sinks, 10, |s| s[1].frames.len() == 1);
        for _ in 0..1000 {
            for (u, s) in ps.iter_mut().zip(sinks.iter_mut()) {
                u.progress(s);
            }
        }
        assert_eq!(ps[1].stats().rejected_datagrams, 1, "clear={clear}");
        assert_eq!(sinks[1].frames.len(), 1);
        assert_eq!(sinks[1].frames[0].2, b"real");
    }
}

/// Memory per peer (issue 24: at most 1 KiB per peer): the transport's fixed state and the
/// link's, plus the heap blocks behind them (the link's box and the peer's socket address,
/// with the allocator's 16 bytes of overhead each), 837 bytes in session 34 (160 + 629 + 48),
/// 661 since session 38 (160 + 453 + 48: queues one word until used, parameters shared), stay
/// inside it; `bench/allconn` checks the whole process (with MPI_Init's tables).
#[test]
fn fixed_state_per_peer_is_under_a_kib() {
    use crate::transport::udp::PEER_BYTES;
    let heap = 2 * 16 + std::mem::size_of::<libc::sockaddr_in>();
    let total = PEER_BYTES + LINK_BYTES + heap;
    eprintln!(
        "per peer: transport {PEER_BYTES} B + link {LINK_BYTES} B + heap {heap} B = {total} B"
    );
    assert!(total <= 1024, "{total} bytes of fixed state per peer");
}

/// Memory per peer: under the job's key every peer's datagram key is one and the same (an
/// AES-GCM key with its tables, over 500 bytes, made once rather than once per peer).
#[test]
fn the_jobs_key_makes_one_datagram_key_for_every_peer() {
    let mut ps = job(4, &settings(0, 1, None), params());
    let seals: Vec<_> = [1, 2, 3]
        .map(|g| ps[0].seal_for(Gpid::new(g)).unwrap())
        .into();
    assert!(seals.iter().all(|s| std::sync::Arc::ptr_eq(s, &seals[0])));
    let mut sinks: Vec<Sink> = (0..4).map(|_| Sink::default()).collect();
    for g in 1..4 {
        ps[0]
            .send(Gpid::new(g), &msg(1, g), &[], b"shared", Token::NONE)
            .unwrap();
    }
    run(&mut ps, &mut sinks, 10, |s| {
        s[1..].iter().all(|s| s.frames.len() == 1)
    });
}

#[test]
fn pair_keys_seal_each_pair_apart_and_another_pairs_key_opens_nothing() {
    use crate::runtime::keys::Pairs;
    // Three processes with key pairs of their own (the pair-key scheme, `runtime::keys`).
    let n = 3;
    let s = settings(0, 1, None);
    let mut ps: Vec<Udp> = (0..n as u32)
        .map(|me| {
            Udp::new(
                Gpid::new(me),
                Ipv4Addr::LOCALHOST,
                &s,
                Box::new(Links::with_params(params(), n)),
            )
            .unwrap()
        })
        .collect();
    let mut keys: Vec<Pairs> = (0..n as u32)
        .map(|g| Pairs::new(Gpid::new(g), "j").unwrap())
        .collect();
    let publics: Vec<[u8; 32]> = keys.iter().map(Pairs::public).collect();
    for k in &mut keys {
        for (g, p) in publics.iter().enumerate() {
            k.set_peer(Gpid::from_idx(g), *p);
        }
    }
    let addrs: Vec<Vec<SocketAddr>> = ps.iter().map(|u| u.addrs().to_vec()).collect();
    for (u, k) in ps.iter_mut().zip(keys.iter()) {
        u.start(Keys::Pairs(k.clone()), n);
        for (g, a) in addrs.iter().enumerate() {
            u.set_addrs(Gpid::from_idx(g), a);
        }
    }
    // Each pair its own datagram key (not one shared as under the job's key).
    let (a, b) = (
        ps[1].seal_for(Gpid::new(0)).unwrap(),
        ps[1].seal_for(Gpid::new(2)).unwrap(),
    );
    assert!(!std::sync::Arc::ptr_eq(&a, &b));
    let mut sinks = vec![Sink::default(), Sink::default(), Sink::default()];
    ps[0]
        .send(Gpid::new(1), &msg(1, 0), &[], b"zero", Token::NONE)
        .unwrap();
    ps[2]
        .send(Gpid::new(1), &msg(1, 1), &[], b"two", Token::NONE)
        .unwrap();
    ps[1]
        .send(Gpid::new(0), &msg(1, 2), &[], b"one", Token::NONE)
        .unwrap();
    run(&mut ps, &mut sinks, 10, |s| {
        s[1].frames.len() == 2 && s[0].frames.len() == 1
    });
    // Process 2 seals a datagram to process 1 with the key of its pair with process 0, and
    // claims to be process 0: process 1 opens datagrams from 0 with the key of (0, 1) only.
    let k20 = Keys::Pairs(keys[2].clone()).pair(Gpid::new(0)).unwrap();
    let mut d = Outer {
        src: Gpid::new(0),
        dst: Gpid::new(1),
        kind: KIND_DATA,
        clear: false,
        pn: 1 << 40,
    }
    .encode()
    .to_vec();
    d.resize(OUTER_LEN + super::HEADER_LEN + 20 + TAG_LEN, 0);
    Seal::new(&k20).seal(&mut d, OUTER_LEN + super::HEADER_LEN);
    let spy = UdpSocket::bind("127.0.0.1:0").unwrap();
    spy.send_to(&d, addrs[1][0]).unwrap();
    let before = ps[1].stats().rejected_datagrams;
    let t0 = Instant::now();
    while ps[1].stats().rejected_datagrams == before && t0.elapsed() < Duration::from_secs(10) {
        for (u, s) in ps.iter_mut().zip(sinks.iter_mut()) {
            u.progress(s);
        }
    }
    assert_eq!(ps[1].stats().rejected_datagrams, before + 1);
    let mut got: Vec<&[u8]> = sinks[1].frames.iter().map(|f| &f.2[..]).collect();
    got.sort();
    assert_eq!(got, [&b"two"[..], b"zero"]);
    assert!(sinks.iter().all(|s| s.lost.is_empty()));
    // A public key that contributes nothing (all zero) gives no key: sending fails at once,
    // naming the process, rather than leaving the frame queued.
    let mut bad = keys[0].clone();
    bad.set_peer(Gpid::new(1), [0u8; 32]);
    ps[0].start(Keys::Pairs(bad), n);
    match ps[0].send(Gpid::new(1), &msg(1, 9), &[], b"x", Token::NONE) {
        Err(crate::transport::SendError::Failed(why)) => {
            assert!(why.contains("no key for process 1"), "{why}")
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_peer_that_stops_answering_is_lost_with_its_name_and_sends_then_fail() {
    let p = Params {
        rto_min: MS,
        rto_max: 20 * MS,
        dead_after: 300 * MS,
        ..Params::default()
    };
    let mut ps = job(3, &settings(0, 1, None), p);
    let mut sinks = vec![Sink::default(), Sink::default(), Sink::default()];
    ps[0]
        .send(Gpid::new(2), &msg(1, 0), &[], b"x", Token::NONE)
        .unwrap();
    run(&mut ps, &mut sinks, 10, |s| s[2].frames.len() == 1);
    // Process 2 dies (its transport is gone); 0 keeps sending to it, and to 1.
    drop(ps.pop());
    sinks.pop();
    ps[0]
        .send(Gpid::new(2), &msg(1, 1), &[], b"y", Token::NONE)
        .unwrap();
    ps[0]
        .send(Gpid::new(1), &msg(1, 0), &[], b"z", Token::NONE)
        .unwrap();
    let t0 = Instant::now();
    run(&mut ps, &mut sinks, 20, |s| !s[0].lost.is_empty());
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "not before the bound"
    );
    let (peer, why) = &sinks[0].lost[0];
    assert_eq!(*peer, Gpid::new(2));
    assert!(why.contains("process 2 stopped answering"), "{why}");
    assert!(ps[0]
        .send(Gpid::new(2), &msg(1, 2), &[], b"w", Token::NONE)
        .is_err());
    assert_eq!(sinks[1].frames.len(), 1, "the other peer is not disturbed");
}
