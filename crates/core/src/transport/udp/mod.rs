//! UDP transport: one socket per process reaches every peer (or a few, striped), with no
//! setup per peer; reliability comes from the protocol layer's machine.
//!
//! A connection-oriented transport spends a socket, buffers and a handshake on every peer it
//! talks to; datagrams need only the peer's address, which its business card gives at
//! start-up. So descriptors stay constant and memory grows by a few hundred bytes per peer as
//! jobs grow (the fourth seed: Open MPI over InfiniBand unreliable datagrams), at the price
//! of doing in software what TCP's kernel does: reliability, ordering, flow and congestion
//! control. That part is the sans-IO machine in `proto::reliable`, reached through
//! [`rel::Reliability`] (see there why the seam); this module does the I/O around it.
//!
//! # Sending
//!
//! Frames to a peer queue in order (the caller's body is referenced until its token is
//! reported, as on TCP) and are written as one stream of bytes, `payload_len: u32`, header,
//! payload, cut into datagrams of at most `udp_dgram_bytes` ([`rx`]). A datagram is built
//! once (outer header, reliability header from the machine, the stream's next bytes), sealed
//! ([`wire`]: authenticated with the job's key and encrypted; on loopback, under
//! `udp_seal=auto`, the payload goes in clear as on TCP and only the headers are
//! authenticated), sent, and handed to the
//! machine, which keeps it until the peer acknowledges it and hands it back for
//! retransmission byte for byte. New datagrams go as the machine's window allows; while it is
//! closed, frames wait (`queued`), and the protocol layer holds eager messages back as on TCP
//! (`caps.queues`). Between [`Transport::hold`] and [`Transport::release`] frames only queue,
//! so the frames of one progress pass share datagrams. With several sockets
//! (`udp_sockets`), datagrams take each socket in turn and go to each of the peer's in turn:
//! the seed's queue-pair striping; the machine puts them back in order.
//!
//! # Receiving
//!
//! Every progress pass reads each socket until it is dry (at most [`RX_BATCH`] datagrams
//! each), checks a datagram's outer header and tag before anything else (a datagram that
//! fails is dropped and counted: `protean_rejected_datagrams`; one in clear must also come
//! from the sending peer's address, as the kernel reports it), gives its reliability header
//! to the machine, and feeds the data of the datagrams it says are next to the peer's stream
//! parser ([`rx::Rx`]), which delivers frames in place, places large payloads where the
//! protocol layer wants them, or gathers frames that span datagrams. Acknowledgements ride on
//! data going back, or go alone when the machine says so.
//!
//! # Failure
//!
//! A peer the machine reports as no longer answering (`udp_peer_timeout`) is lost with a
//! reason naming it, and so is one whose stream is malformed; sends to it then fail.
//!
//! # Channels beside it
//!
//! The transport keeps no state that assumes it is a peer's only channel: it reaches every
//! process with a card, takes datagrams from any process of the job whatever route the
//! dispatcher chose for it, and [`Udp::quiet`] says when nothing is in flight to or from a
//! peer, so a channel manager may move a peer to a TCP connection and back (the protocol
//! layer's sequence numbers keep matching in order across channels).

pub mod fault;
pub mod rel;
pub mod rx;
pub mod wire;

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use socket2::{Domain, Protocol, Socket, Type};

use super::outq::{self, Out};
use super::{Caps, FrameSink, Gpid, SendError, Sent, Token, Transport, HEADER_LEN};
use crate::runtime::keys::Keys;
use fault::{Fate, Faults, Injector};
use rel::{Arrival, Nanos, Reliability};
use rx::{Rx, PREFIX};
use wire::{Outer, Refused, Seal, KIND_ACK, KIND_DATA, OUTER_LEN, TAG_LEN};

/// Largest UDP payload over IPv4.
pub const DGRAM_MAX: usize = 65507;
/// A datagram in one 1500-byte Ethernet frame.
pub const DGRAM_LAN: usize = 1472;
/// Smallest datagram size that may be set.
pub const DGRAM_MIN: usize = 576;
/// Largest frame payload a receiver accepts.
pub const FRAME_MAX: usize = 64 << 20;
/// Largest frame payload we send (the protocol layer's fragment size on UDP).
pub const FRAG: usize = 1 << 20;
/// Datagrams read from one socket per progress pass at most.
pub const RX_BATCH: usize = 64;
/// Reusable buffers kept, per size class.
const POOL_MAX: usize = 256;
/// Buffers up to this capacity are "tiny": a datagram of a short message (headers, a frame
/// header and a few dozen payload bytes). Kept apart from the small ones so that a process that
/// has a short message in flight to every peer (all-connect, the start of an alltoall) holds
/// 256 bytes per peer until the acknowledgements come, not 2 KiB (`bench/allconn` measures the
/// memory per peer).
const TINY: usize = 256;
/// Buffers up to this capacity are "small".
const SMALL: usize = 2048;

/// A frame waiting to be cut into datagrams.
/// One peer: where it listens, our frames waiting for it, its stream to us.
#[derive(Default)]
struct Peer {
    /// Its sockets (from its card); empty: not reached.
    addrs: Box<[libc::sockaddr_in]>,
    out: VecDeque<Out>,
    queued: usize,
    rx: Rx,
    /// Lost, and why.
    lost: Option<String>,
    /// In `Udp::pending` (frames wait) / `Udp::touched` (heard from this pass).
    pending: bool,
    touched: bool,
}

/// The transport's own fixed state per peer, in bytes: its [`Peer`] and its entry among the
/// datagram keys (the reliability machine's link comes on top; `bench/allconn` measures the
/// whole process). A peer's sockets (16 bytes each) are on the heap besides.
pub const PEER_BYTES: usize =
    std::mem::size_of::<Peer>() + std::mem::size_of::<Option<Arc<Seal>>>();

impl Peer {
    /// Is `from` one of the peer's sockets?
    fn sent_from(&self, from: Option<&libc::sockaddr_in>) -> bool {
        from.is_some_and(|f| {
            self.addrs
                .iter()
                .any(|a| a.sin_port == f.sin_port && a.sin_addr.s_addr == f.sin_addr.s_addr)
        })
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The sockets, and the faults injected on the way out.
struct Wire {
    socks: Vec<Socket>,
    /// Turn of the striping.
    turn: usize,
    inject: Option<Injector>,
    /// A datagram held back to go after the next one (an injected reordering).
    delayed: Option<(usize, libc::sockaddr_in, Vec<u8>)>,
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}

impl Wire {
    /// Send one datagram from socket `s` to `to`; false when the kernel could not take it now.
    fn raw(&self, s: usize, to: &libc::sockaddr_in, d: &[u8]) -> bool {
        // SAFETY: `d` is a live slice and `to` a valid IPv4 address of the size given; the
        // socket is ours.
        let r = unsafe {
            libc::sendto(
                self.socks[s].as_raw_fd(),
                d.as_ptr().cast(),
                d.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (to as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        // Other errors (an unreachable address, say) lose the datagram, which the
        // reliability machine repairs like any loss or reports the peer when it persists.
        r >= 0 || !would_block(&io::Error::last_os_error())
    }

    /// Send `d` to the peer at `to` (one of its sockets in turn, from one of ours in turn).
    fn send(&mut self, to: &[libc::sockaddr_in], d: &[u8]) -> bool {
        let t = self.turn;
        self.turn = self.turn.wrapping_add(1);
        let s = t % self.socks.len();
        let a = &to[t % to.len()];
        let fate = self.inject.as_mut().map_or(Fate::Send, |i| i.fate());
        match fate {
            Fate::Send => {
                let ok = self.raw(s, a, d);
                self.flush_delayed();
                ok
            }
            // Lost on the way, as far as anyone can tell.
            Fate::Drop => true,
            Fate::Duplicate => {
                let ok = self.raw(s, a, d);
                self.raw(s, a, d);
                ok
            }
            Fate::Delay => {
                self.flush_delayed();
                self.delayed = Some((s, *a, d.to_vec()));
                true
            }
        }
    }

    fn flush_delayed(&mut self) {
        if let Some((s, a, d)) = self.delayed.take() {
            self.raw(s, &a, &d);
        }
    }
}

/// Buffers for datagrams, reused.
#[derive(Default)]
struct Pool {
    tiny: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
    big: Vec<Vec<u8>>,
}

impl Pool {
    /// An empty buffer with room for `n` bytes.
    fn take(&mut self, n: usize, big: usize) -> Vec<u8> {
        let (from, class) = if n <= TINY {
            (&mut self.tiny, TINY)
        } else if n <= SMALL {
            (&mut self.small, SMALL)
        } else {
            (&mut self.big, n.max(big))
        };
        match from.pop() {
            Some(mut v) if v.capacity() >= n => {
                v.clear();
                v
            }
            _ => Vec::with_capacity(class),
        }
    }

    fn give(&mut self, mut v: Vec<u8>, big: usize) {
        v.clear();
        let to = if v.capacity() >= big {
            &mut self.big
        } else if v.capacity() >= SMALL {
            &mut self.small
        } else if v.capacity() >= TINY {
            &mut self.tiny
        } else {
            return;
        };
        if to.len() < POOL_MAX {
            to.push(v);
        }
    }
}

/// The UDP transport of one process.
pub struct Udp {
    me: Gpid,
    wire: Wire,
    local: Vec<SocketAddr>,
    peers: Vec<Peer>,
    rel: Box<dyn Reliability>,
    rel_len: usize,
    /// Set once the keys are known (`runtime::keys`); nothing is read or sent before.
    keys: Option<Keys>,
    /// By peer, the datagram key of our pair: made from `keys` when first needed, kept after,
    /// so a datagram costs the same under the job's key and under pair keys.
    seals: Vec<Option<Arc<Seal>>>,
    /// Under the shared key scheme every pair's datagram key is the same: made once, and
    /// every peer's entry in `seals` points to it (an AES-GCM key with its tables is over
    /// 500 bytes; memory per peer).
    shared_seal: Option<Arc<Seal>>,
    /// Largest datagram we send.
    dgram: usize,
    /// Payloads go in clear, and datagrams in clear from peers' addresses are accepted
    /// (`udp_seal=auto` on loopback; see `wire`).
    clear: bool,
    /// Our datagram numbers (the nonce's counter): the last one used.
    pn: u64,
    clock: Instant,
    pool: Pool,
    rxbuf: Vec<u8>,
    /// Tokens of frames now wholly in datagrams, to report.
    done: Vec<Token>,
    held: bool,
    /// Peers with frames waiting / heard from this pass / with timers due.
    pending: Vec<Gpid>,
    touched: Vec<Gpid>,
    due: Vec<Gpid>,
    /// Bytes of datagrams the machine may hold at most.
    buffer_max: usize,
    /// Datagrams refused: not ours, not from the job, failed authentication.
    rejected: u64,
    verbose: bool,
}

/// Settings of [`Udp::new`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub sockets: usize,
    pub sockbuf: usize,
    /// 0: automatic (see `udp_dgram_bytes`).
    pub dgram: usize,
    pub buffer_max: usize,
    pub faults: Option<Faults>,
    /// `udp_seal=auto`: payloads in clear when the sockets bind loopback (see `wire`).
    pub clear_on_loopback: bool,
    pub verbose: bool,
}

/// Set a socket buffer size, beyond the system's maximum when we may (root).
fn set_buf(s: &Socket, opt_force: libc::c_int, opt: libc::c_int, bytes: usize) {
    let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    for o in [opt_force, opt] {
        // SAFETY: setting an int socket option on our own open socket.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                o,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

impl Udp {
    /// Open `settings.sockets` sockets on `bind` (any free ports); the machine `rel` makes
    /// datagrams reliable. Publish [`Udp::addrs`] in the card, then call [`Udp::start`].
    pub fn new(
        me: Gpid,
        bind: Ipv4Addr,
        settings: &Settings,
        rel: Box<dyn Reliability>,
    ) -> io::Result<Udp> {
        let mut socks = Vec::new();
        let mut local = Vec::new();
        for _ in 0..settings.sockets.clamp(1, 16) {
            let s = Socket::new(Domain::IPV4, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
            s.bind(&SocketAddr::V4(SocketAddrV4::new(bind, 0)).into())?;
            s.set_nonblocking(true)?;
            if settings.sockbuf > 0 {
                set_buf(&s, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, settings.sockbuf);
                set_buf(&s, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, settings.sockbuf);
            }
            local.push(
                s.local_addr()?
                    .as_socket()
                    .ok_or_else(|| io::Error::other("UDP socket has no IP address"))?,
            );
            socks.push(s);
        }
        let dgram = match settings.dgram {
            0 if bind.is_loopback() => DGRAM_MAX,
            0 => DGRAM_LAN,
            n => n.clamp(DGRAM_MIN, DGRAM_MAX),
        };
        let mut rel = rel;
        rel.datagram_size(dgram);
        let rel_len = rel.header_len();
        Ok(Udp {
            me,
            wire: Wire {
                socks,
                turn: 0,
                inject: settings.faults.map(|f| Injector::new(f, me.get() as u64)),
                delayed: None,
            },
            local,
            peers: Vec::new(),
            rel,
            rel_len,
            keys: None,
            seals: Vec::new(),
            shared_seal: None,
            dgram,
            clear: settings.clear_on_loopback && bind.is_loopback(),
            pn: 0,
            clock: Instant::now(),
            pool: Pool::default(),
            rxbuf: vec![0u8; 1 << 16],
            done: Vec::new(),
            held: false,
            pending: Vec::new(),
            touched: Vec::new(),
            due: Vec::new(),
            buffer_max: settings.buffer_max.max(1 << 20),
            rejected: 0,
            verbose: settings.verbose,
        })
    }

    /// The addresses of our sockets, for the business card.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.local
    }

    /// The largest datagram we send.
    pub fn dgram(&self) -> usize {
        self.dgram
    }

    /// Datagrams may flow: the keys and the job's number of processes (from the bootstrap).
    pub fn start(&mut self, keys: Keys, nprocs: usize) {
        self.shared_seal = keys.shared().map(|k| Arc::new(Seal::new(&k)));
        self.keys = Some(keys);
        self.seals.clear();
        self.seals.resize_with(nprocs, || None);
        self.peers.resize_with(nprocs, Peer::default);
    }

    /// Is the datagram key of our pair with `peer` ready (made now if need be)? False before
    /// the keys are known, and for a process we have no key for.
    #[inline]
    fn has_seal(&mut self, peer: Gpid) -> bool {
        let i = peer.idx();
        if matches!(self.seals.get(i), Some(Some(_))) {
            return true;
        }
        let seal = match &self.shared_seal {
            Some(s) => s.clone(),
            None => {
                let Some(k) = self.keys.as_mut().and_then(|k| k.pair(peer)) else {
                    return false;
                };
                Arc::new(Seal::new(&k))
            }
        };
        if self.seals.len() <= i {
            self.seals.resize_with(i + 1, || None);
        }
        self.seals[i] = Some(seal);
        true
    }

    /// Our datagram key with `peer` (made now if need be), for tests.
    #[cfg(test)]
    pub(crate) fn seal_for(&mut self, peer: Gpid) -> Option<Arc<Seal>> {
        self.has_seal(peer)
            .then(|| self.seals[peer.idx()].clone().expect("made"))
    }

    /// Where peer `gpid` receives (its card's addresses).
    pub fn set_addrs(&mut self, gpid: Gpid, addrs: &[SocketAddr]) {
        let v: Vec<libc::sockaddr_in> = addrs
            .iter()
            .filter_map(|a| match a {
                SocketAddr::V4(a) => Some(sockaddr(*a)),
                SocketAddr::V6(_) => None,
            })
            .collect();
        if let Some(p) = self.peers.get_mut(gpid.idx()) {
            p.addrs = v.into_boxed_slice();
        }
    }

    /// Nothing in flight to or from `peer`, nothing queued for it (see the module doc).
    pub fn quiet(&self, peer: Gpid) -> bool {
        self.peers
            .get(peer.idx())
            .is_none_or(|p| p.out.is_empty() && !p.rx.partial())
            && self.rel.quiet(peer)
    }

    fn now(&self) -> Nanos {
        self.clock.elapsed().as_nanos() as Nanos
    }

    /// Queue one frame for `peer` (and send it now unless output is held).
    fn post(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        // The key of the pair is made on the first send (a refused public key fails here
        // rather than leaving the frames queued for ever).
        if self.keys.is_some() && peer.idx() < self.peers.len() && !self.has_seal(peer) {
            return Err(SendError::Failed(format!(
                "no key for process {peer} (its public key was refused)"
            )));
        }
        let Some(p) = self.peers.get_mut(peer.idx()) else {
            return Err(SendError::Failed(format!(
                "no UDP address known for process {peer}"
            )));
        };
        if let Some(why) = &p.lost {
            return Err(SendError::Failed(format!("process {peer} is lost: {why}")));
        }
        if p.addrs.is_empty() {
            return Err(SendError::Failed(format!(
                "no UDP address known for process {peer}"
            )));
        }
        let plen = small.len() + body.len();
        if plen > FRAME_MAX {
            return Err(SendError::Failed(format!(
                "a frame of {plen} bytes is above the UDP frame limit of {FRAME_MAX}"
            )));
        }
        let o = Out::new(hdr, small, body, token);
        p.queued += o.total();
        p.out.push_back(o);
        if !p.pending {
            p.pending = true;
            self.pending.push(peer);
        }
        if !self.held {
            let now = self.now();
            self.pump(peer, now);
        }
        let p = &mut self.peers[peer.idx()];
        Ok(outq::settle(&mut p.out, &mut self.done, token))
    }

    /// Send what `peer` is owed: retransmissions, new datagrams of its queued frames as the
    /// window allows, an acknowledgement alone when one is due and nothing carried it.
    fn pump(&mut self, peer: Gpid, now: Nanos) {
        if !self.has_seal(peer) {
            return;
        }
        let i = peer.idx();
        let seal = self.seals[i].as_ref().expect("made above");
        let Some(p) = self.peers.get_mut(i) else {
            return;
        };
        if p.lost.is_some() || p.addrs.is_empty() {
            return;
        }
        let (rl, dgram) = (self.rel_len, self.dgram);
        let hl = OUTER_LEN + rl;
        while let Some(d) = self.rel.retransmit(now, peer) {
            if !self.wire.send(&p.addrs, d) {
                break;
            }
        }
        let room = dgram - hl - TAG_LEN;
        while p.queued > 0 && self.rel.may_send(peer) && self.rel.held() < self.buffer_max {
            let take = p.queued.min(room);
            let mut d = self.pool.take(hl + take + TAG_LEN, dgram);
            self.pn += 1;
            d.extend_from_slice(
                &Outer {
                    src: self.me,
                    dst: peer,
                    kind: KIND_DATA,
                    clear: self.clear,
                    pn: self.pn,
                }
                .encode(),
            );
            d.resize(hl, 0);
            let seq = self.rel.stamp(now, peer, &mut d[OUTER_LEN..hl]);
            fill(p, &mut d, take, &mut self.done);
            d.resize(d.len() + TAG_LEN, 0);
            seal.seal(&mut d, hl);
            let taken = self.wire.send(&p.addrs, &d);
            self.rel.sent(now, peer, seq, d, taken);
            if !taken {
                break;
            }
        }
        let mut a = [0u8; OUTER_LEN + 64 + TAG_LEN];
        // A few acknowledgements alone when one cannot report every run of early datagrams.
        for _ in 0..4 {
            if rl > 64 || !self.rel.stamp_ack(now, peer, &mut a[OUTER_LEN..hl]) {
                break;
            }
            self.pn += 1;
            a[..OUTER_LEN].copy_from_slice(
                &Outer {
                    src: self.me,
                    dst: peer,
                    kind: KIND_ACK,
                    clear: false,
                    pn: self.pn,
                }
                .encode(),
            );
            let d = &mut a[..hl + TAG_LEN];
            seal.seal(d, hl);
            self.wire.send(&p.addrs, d);
        }
        while let Some(b) = self.rel.reclaim() {
            self.pool.give(b, dgram);
        }
        if p.out.is_empty() && p.out.capacity() > 0 {
            // Every frame is in datagrams: give the queue's buffer back (memory per peer).
            p.out = VecDeque::new();
        }
    }

    /// Read every socket (a batch each) and handle what came.
    fn receive<S: FrameSink>(&mut self, sink: &mut S, now: Nanos) -> usize {
        let mut buf = std::mem::take(&mut self.rxbuf);
        let mut n = 0;
        for s in 0..self.wire.socks.len() {
            let fd = self.wire.socks[s].as_raw_fd();
            for _ in 0..RX_BATCH {
                // SAFETY: all zeros is a valid sockaddr_in.
                let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                let mut flen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                // SAFETY: reading into our own buffer of that length, the source into `from`
                // of the size given.
                let r = unsafe {
                    libc::recvfrom(
                        fd,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                        (&mut from as *mut libc::sockaddr_in).cast(),
                        &mut flen,
                    )
                };
                if r < 0 {
                    break;
                }
                let from = (flen as usize == std::mem::size_of::<libc::sockaddr_in>()
                    && from.sin_family == libc::AF_INET as libc::sa_family_t)
                    .then_some(from);
                n += self.on_datagram(&mut buf[..r as usize], from.as_ref(), sink, now);
            }
        }
        self.rxbuf = buf;
        n
    }

    fn refuse(&mut self, why: Refused) {
        self.rejected += 1;
        if self.verbose && self.rejected.is_power_of_two() {
            eprintln!(
                "Protean[{}]: dropped {} UDP datagrams so far; the last was {why}",
                self.me, self.rejected
            );
        }
    }

    /// One datagram from the socket (sent from `from`): check it, and deliver what it brings.
    fn on_datagram<S: FrameSink>(
        &mut self,
        d: &mut [u8],
        from: Option<&libc::sockaddr_in>,
        sink: &mut S,
        now: Nanos,
    ) -> usize {
        let rl = self.rel_len;
        let hl = OUTER_LEN + rl;
        let o = match Outer::decode(d, rl) {
            Ok(o) => o,
            Err(e) => {
                self.refuse(e);
                return 0;
            }
        };
        if o.dst != self.me || o.src == self.me || o.src.idx() >= self.peers.len() {
            self.refuse(Refused::Stranger);
            return 0;
        }
        if self.keys.is_none() {
            return 0;
        }
        if o.clear && !(self.clear && self.peers[o.src.idx()].sent_from(from)) {
            self.refuse(Refused::Clear);
            return 0;
        }
        if !self.has_seal(o.src) {
            self.refuse(Refused::Stranger);
            return 0;
        }
        let opened = self.seals[o.src.idx()]
            .as_ref()
            .expect("made above")
            .open(&o, d, hl);
        if let Err(e) = opened {
            self.refuse(e);
            return 0;
        }
        let peer = o.src;
        let i = peer.idx();
        if self.peers[i].lost.is_some() {
            return 0;
        }
        let end = d.len() - TAG_LEN;
        let a = self.rel.arrived(now, peer, &d[OUTER_LEN..hl]);
        if !self.peers[i].touched {
            self.peers[i].touched = true;
            self.touched.push(peer);
        }
        if (o.kind == KIND_ACK) != (a == Arrival::AckOnly) || a == Arrival::Malformed {
            self.lose(
                peer,
                "malformed UDP datagram (its reliability header does not fit it)".into(),
                sink,
            );
            return 0;
        }
        let mut n = 0;
        match a {
            Arrival::Next => {
                n += self.feed(peer, &d[hl..end], sink);
                while let Some(b) = self.rel.ready(peer) {
                    n += self.feed(peer, &b, sink);
                    self.pool.give(b, self.dgram);
                }
            }
            Arrival::Early(seq) if self.rel.held() < self.buffer_max => {
                let mut v = self.pool.take(end - hl, self.dgram);
                v.extend_from_slice(&d[hl..end]);
                self.rel.keep(peer, seq, v);
            }
            _ => {}
        }
        n
    }

    /// Hand `data`, the next piece of `peer`'s stream, to its parser.
    fn feed<S: FrameSink>(&mut self, peer: Gpid, data: &[u8], sink: &mut S) -> usize {
        let p = &mut self.peers[peer.idx()];
        if p.lost.is_some() {
            return 0;
        }
        match p.rx.feed(peer, data, sink, FRAME_MAX) {
            Ok(n) => n,
            Err(why) => {
                self.lose(peer, why, sink);
                0
            }
        }
    }

    /// `peer` is lost: forget what is kept for it and tell the protocol layer why.
    fn lose<S: FrameSink>(&mut self, peer: Gpid, why: String, sink: &mut S) {
        let p = &mut self.peers[peer.idx()];
        if p.lost.is_some() {
            return;
        }
        if self.verbose {
            eprintln!("Protean[{}]: lost process {peer} over UDP: {why}", self.me);
        }
        p.out.clear();
        p.queued = 0;
        p.rx = Rx::Idle;
        sink.on_peer_lost(peer, &why);
        p.lost = Some(why);
        self.rel.forget(peer);
        while let Some(b) = self.rel.reclaim() {
            self.pool.give(b, self.dgram);
        }
    }

    /// Pump every peer whose frames wait, keeping in `pending` those whose frames still do.
    fn pump_pending(&mut self, now: Nanos) {
        let list = std::mem::take(&mut self.pending);
        let mut keep = Vec::with_capacity(list.len());
        for &peer in &list {
            self.pump(peer, now);
            let p = &mut self.peers[peer.idx()];
            if p.queued > 0 && p.lost.is_none() {
                keep.push(peer);
            } else {
                p.pending = false;
            }
        }
        // Frames posted while pumping (none today) would have been pushed meanwhile.
        keep.append(&mut self.pending);
        self.pending = keep;
    }

    fn report<S: FrameSink>(&mut self, sink: &mut S) {
        for t in self.done.drain(..) {
            sink.on_sent(t);
        }
    }
}

/// Move the next `n` bytes of `p`'s queued frames into `d`; finished frames' tokens go to
/// `done`.
fn fill(p: &mut Peer, d: &mut Vec<u8>, mut n: usize, done: &mut Vec<Token>) {
    p.queued -= n;
    while n > 0 {
        let o = p.out.front_mut().expect("queued bytes belong to a frame");
        let k = if o.off < o.head_len {
            let k = n.min(o.head_len - o.off);
            d.extend_from_slice(&o.head[o.off..o.off + k]);
            k
        } else {
            let boff = o.off - o.head_len;
            let k = n.min(o.body_len - boff);
            // SAFETY: body points to body_len live bytes (owned, or kept alive by the token's
            // owner until it is reported, or lent for the duration of the current call).
            d.extend_from_slice(unsafe { std::slice::from_raw_parts(o.body.add(boff), k) });
            k
        };
        o.off += k;
        n -= k;
        if o.off == o.total() {
            let o = p.out.pop_front().expect("front");
            if o.token != Token::NONE {
                done.push(o.token);
            }
        }
    }
}

impl Transport for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn reaches(&self, peer: Gpid) -> bool {
        self.peers
            .get(peer.idx())
            .is_some_and(|p| !p.addrs.is_empty())
    }

    fn caps(&self, peer: Gpid) -> Caps {
        if !self.reaches(peer) {
            return Caps::NONE;
        }
        Caps {
            reliable: true,
            ordered: true,
            max_payload: FRAG,
            lanes: self.wire.socks.len() as u8,
            get: false,
            put: false,
            queues: true,
        }
    }

    #[inline]
    fn queued(&self, peer: Gpid) -> usize {
        self.peers.get(peer.idx()).map_or(0, |p| p.queued)
    }

    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        self.post(peer, hdr, small, body, token)
    }

    /// Only a frame that fits one datagram the window lets go now: anything else would have
    /// to queue (and be copied), so the caller takes the request path, which lends the body.
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        let fits = PREFIX + body.len() + OUTER_LEN + self.rel_len + TAG_LEN <= self.dgram;
        let free = self
            .peers
            .get(peer.idx())
            .is_some_and(|p| p.out.is_empty() && p.lost.is_none() && !p.addrs.is_empty());
        if !fits || !free || !self.rel.may_send(peer) || self.rel.held() >= self.buffer_max {
            return false;
        }
        let held = std::mem::replace(&mut self.held, false);
        let r = self.post(peer, hdr, &[], body, Token::NONE);
        self.held = held;
        matches!(r, Ok(Sent::Done))
    }

    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        if self.keys.is_none() {
            return 0;
        }
        // A datagram held back by an injected reordering goes at the latest one pass later.
        self.wire.flush_delayed();
        let now = self.now();
        let n = self.receive(sink, now);
        // Acknowledgements (or data carrying them) for the peers we heard from.
        let touched = std::mem::take(&mut self.touched);
        for &peer in &touched {
            self.peers[peer.idx()].touched = false;
            self.pump(peer, now);
        }
        self.touched = touched;
        self.touched.clear();
        // Timers: retransmissions, delayed acknowledgements, peers that stopped answering.
        let mut due = std::mem::take(&mut self.due);
        self.rel.tick(now, &mut due);
        for &peer in &due {
            self.pump(peer, now);
        }
        due.clear();
        self.due = due;
        while let Some((peer, why)) = self.rel.failed() {
            self.lose(
                peer,
                format!("process {peer} stopped answering over UDP: it {why} (udp_peer_timeout)"),
                sink,
            );
        }
        if !self.held && !self.pending.is_empty() {
            self.pump_pending(now);
        }
        self.report(sink);
        n
    }

    fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.rel.busy() || self.wire.delayed.is_some()
    }

    fn hold(&mut self) {
        self.held = true;
    }

    fn release<S: FrameSink>(&mut self, sink: &mut S) {
        self.held = false;
        if !self.pending.is_empty() {
            let now = self.now();
            self.pump_pending(now);
        }
        self.report(sink);
    }

    fn stats(&self) -> super::Stats {
        super::Stats {
            rejected_datagrams: self.rejected,
            ..Default::default()
        }
    }

    fn shutdown(&mut self) {
        if self.verbose {
            eprintln!(
                "Protean[{}]: udp: {} (datagrams refused: {})",
                self.me,
                self.rel.stats(),
                self.rejected
            );
        }
        self.wire.flush_delayed();
    }
}

/// Entry points for the fuzz targets in `fuzz/`.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    struct Sink;

    impl FrameSink for Sink {
        fn on_frame(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            assert!(payload.len() <= FRAME_MAX);
        }
    }

    /// The first byte splits the rest into datagrams (their lengths, cycled); each piece is
    /// fed to a peer's stream parser as if it were an authenticated datagram's data.
    pub fn stream(bytes: &[u8]) {
        let Some((&cut, rest)) = bytes.split_first() else {
            return;
        };
        let cut = cut as usize * 7 + 1;
        let mut rx = Rx::Idle;
        for piece in rest.chunks(cut) {
            if rx.feed(Gpid::new(1), piece, &mut Sink, 1 << 16).is_err() {
                return;
            }
        }
    }

    /// Bytes as a datagram arriving at a process: outer header checks and the tag (which
    /// arbitrary bytes fail); then the same bytes sealed under the job's key, so that the
    /// reliability header and the data reach the machine and the parser, as from a peer of
    /// the job that sends nonsense.
    pub fn datagram<R: Reliability + 'static>(rel: R, bytes: &[u8]) {
        let key = [5u8; 32];
        let settings = Settings {
            sockets: 1,
            sockbuf: 0,
            dgram: 0,
            buffer_max: 1 << 20,
            faults: None,
            clear_on_loopback: false,
            verbose: false,
        };
        let mut u = Udp::new(Gpid::new(0), Ipv4Addr::LOCALHOST, &settings, Box::new(rel))
            .expect("a socket on loopback");
        u.start(Keys::Shared(key), 4);
        let mut sink = Sink;
        let mut raw = bytes.to_vec();
        u.on_datagram(&mut raw, None, &mut sink, 0);
        // Sealed: from process 1 (the first bytes choose the kind), then fed in pieces.
        let rl = u.rel_len;
        let hl = OUTER_LEN + rl;
        for (k, chunk) in bytes.chunks(hl + 300).enumerate() {
            let kind = if chunk.first().is_some_and(|b| b & 1 == 1) {
                KIND_ACK
            } else {
                KIND_DATA
            };
            let mut d = Outer {
                src: Gpid::new(1),
                dst: Gpid::new(0),
                kind,
                clear: false,
                pn: k as u64 + 1,
            }
            .encode()
            .to_vec();
            let mut h = chunk.to_vec();
            h.resize(rl, 0);
            d.extend_from_slice(&h[..rl]);
            if kind == KIND_DATA {
                d.extend_from_slice(chunk.get(rl..).unwrap_or(&[]));
            }
            d.resize(d.len() + TAG_LEN, 0);
            Seal::new(&key).seal(&mut d, hl);
            u.on_datagram(&mut d, None, &mut sink, k as u64 * 1000);
        }
    }
}
