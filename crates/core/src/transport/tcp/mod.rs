//! TCP transport: one stream per pair of processes (lanes for striping come later).
//!
//! Each process listens on one socket and publishes `addr:port` in its business card. A
//! process that wants to send to a peer uses the connection it already has with that peer
//! (accepted or opened), else connects and sends a hello (`magic: u32, gpid: u32`). When both
//! connected to each other at once (crossed connections), each first sends on the one it
//! opened, and then the one opened by the higher gpid gives way: drained, ended, and its
//! sender moves to the other, whose reader takes nothing from it before the retiring one's
//! end (see `Tcp::crossed`). Each side reads from every connection.
//!
//! A connection in the middle of a large payload (read straight into the receiver's memory)
//! is read only when an epoll set (level triggered, asked without waiting) says it is
//! readable: a receiver that keeps calling `recv` to find the socket dry takes the socket
//! lock every time and slows the sender's softirq, which is delivering that very payload on
//! the other core. Such a connection is read until the socket is dry before it waits for
//! epoll again. Between frames every connection is simply tried with `recv`, which costs
//! one system call less per small message than asking epoll first.
//!
//! Frames are read in chunks of up to 64 KiB, so the start of a large payload usually lands in
//! the connection buffer and has to be copied again. After a directly placed payload the next
//! frame is likely another one (a rendezvous stream), so its header is read alone first.
//!
//! Stream framing: `payload_len: u32` (little endian), the 32-byte frame header, the payload.
//! Reads go into a per-connection buffer from which small frames are delivered in place. When
//! the header of a large frame has arrived and its payload has not, the transport asks the
//! protocol layer where the payload goes ([`FrameSink::place`], naming the frame by its
//! header) and reads it straight there; the answer also says whether to wait for the payload
//! whole or take it as it comes ([`Await`]). The transport never decodes a frame header.
//! Writes use `sendmsg` with `MSG_NOSIGNAL` (a dead peer is an error, not a SIGPIPE); what the
//! socket does not take stays queued, still referencing the caller's body until the token is
//! reported.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use socket2::{Domain, Protocol, Socket, Type};

use super::{Await, Caps, FrameSink, Gpid, SendError, Sent, Token, Transport, HEADER_LEN};

pub mod hello;
pub mod lanes;

use crate::config::RankSet;
use crate::runtime::keys::Keys;
use crate::transport::outq::{self, Out, INLINE_SMALL, PREFIX};
use hello::{Hello, Key, Refused, CHALLENGE_LEN, HELLO_LEN, PROOF_LEN};
use lanes::{LaneCtl, Mode};

/// Lanes a peer may have at most (the `accepted` bit sets and the per-lane counters).
pub const MAX_LANES: u8 = 16;
/// Bulk data striped over lanes waits in the engine (`NotNow`) rather than queue more than this
/// on a lane: pieces stay free to go to whichever lane drains first, including lanes that
/// are still opening.
const LANE_QUEUE_MAX: usize = 1 << 20;

/// Largest payload a frame may have at all (the length prefix is 32 bits); the limit in force
/// is the receiver's `tcp_frame_max`, announced in the handshake.
pub const MAX_PAYLOAD: usize = 1 << 31;
/// Handshakes of incoming connections in progress at most; more are refused at once.
const MAX_PENDING: usize = 256;
/// An incoming connection that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const RX_BUF: usize = 256 * 1024;
/// Payloads at least this large, when their header is in and they are not, are offered for
/// direct placement ([`FrameSink::place`]).
const PLACE_MIN: usize = 16 * 1024;
/// Bytes written per `sendmsg` at most, rounded down to whole segments (see `flush`).
/// Measured on loopback (TCP latency and streams, 128 KiB to 4 MiB): 128 KiB halves stream
/// throughput, 1 MiB and more cost 1 MiB ping-pongs 10-100%; 512 KiB is best at both.
const SEND_CAP: usize = 512 * 1024;
/// Largest receive low-water mark while a payload is awaited whole (see `Conn::set_lowat`):
/// a whole fragment at the default `tcp_frag_bytes`.
const LOWAT_MAX: usize = 1 << 20;
/// Bytes asked of the kernel per read of frames (see `read_conn`).
const READ_CHUNK: usize = 64 * 1024;
/// Up to this many connections every one is tried each pass; above it, epoll picks those to
/// read (see `poll`).
const READ_ALL_MAX: usize = 8;
/// A length prefix no frame has (frames are at most `tcp_frame_max` < 2^31 bytes): what
/// follows is a record of the transport itself, its kind in the header's first byte, with no
/// payload.
const RECORD: u32 = u32::MAX;
/// Record: "I opened a connection to you and accepted yours; send on mine" (see
/// [`Tcp::crossed`]).
const CROSSED: u8 = 1;
/// The epoll tag of the listener (connections are tagged with their index).
const LISTENER_EVENT: u64 = u64::MAX;

enum RxState {
    Frames,
    /// Reading the payload of the frame `hdr` straight into the receiver's memory; `whole`:
    /// wake for it only once the rest of it is there (see `Conn::set_lowat`).
    Direct {
        hdr: [u8; HEADER_LEN],
        whole: bool,
        ptr: *mut u8,
        remaining: usize,
        len: usize,
    },
}

struct Conn {
    sock: Socket,
    peer: Gpid,
    out: VecDeque<Out>,
    /// Bytes of `out` not written yet (kept, not summed: every eager send over TCP asks).
    queued: usize,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    rx: RxState,
    /// Payload bytes the frame at the front of the buffer still needs (0: unknown).
    want: usize,
    closed: bool,
    /// While placing a payload directly: the epoll set said so since we last read, or the
    /// last read stopped before the socket ran dry: read it this pass.
    readable: bool,
    /// Not in the epoll set (adding it failed): read every pass.
    unwatched: bool,
    /// Bytes written per `sendmsg` at most: a whole number of segments (see `add_conn`).
    send_cap: usize,
    /// The last frame was placed directly, so the next is likely another large payload:
    /// read its header alone first, so that none of that payload lands in `buf` (from
    /// where it would have to be copied again).
    header_first: bool,
    /// The socket's receive low-water mark (SO_RCVLOWAT) now, and the most it may be set to.
    lowat: usize,
    lowat_max: usize,
    /// A connection we opened whose acceptor has not proved the key yet: nothing is written
    /// to it (frames queue) and nothing but the challenge is read from it.
    connecting: Option<Box<Connecting>>,
    /// The largest frame payload the peer accepts (from the handshake).
    peer_max: usize,
    /// Which of the peer's lanes this connection is (0: the one frames keep their order on).
    lane: u8,
    /// Bulk data bytes queued on it so far: a lane measures its link only once past slow
    /// start (see `lanes::WARM_BYTES`).
    bulk: u64,
    /// We opened it (the peer accepted it).
    dialed: bool,
    /// Crossed connections (see [`Tcp::crossed`]), on the side with the higher gpid: this
    /// lane-0 connection we opened gives way to the peer's, at that index, once it is drained.
    retire_to: Option<usize>,
    /// The same, on the side with the lower gpid: the peer's connection at that index is
    /// retiring, and its frames come before any the peer sends on this one.
    after: Option<usize>,
}

impl Conn {
    /// The connection is done with (it failed, or its peer left): what it still had to write
    /// is dropped, and the frames' tokens are reported all the same, since the transport
    /// holds their bodies no longer. A send whose last pieces were queued here completes
    /// (its buffer is the caller's again) rather than wait for ever.
    fn drop_output(&mut self, done: &mut Vec<Token>) {
        done.extend(
            self.out
                .drain(..)
                .map(|o| o.token)
                .filter(|t| *t != Token::NONE),
        );
        self.queued = 0;
    }

    /// Acknowledge what was read at once. A connection that carries data both ways (a
    /// request and its reply) puts its receiver into delayed-acknowledgement mode, and a
    /// sender whose payload ends in a short segment then waits for the acknowledgement
    /// before it sends on: 64 KiB eager streams (a full loopback segment and 93 bytes per
    /// message) ran at half speed in some launches. The option is not sticky; it is set
    /// after each read that leaves part of a payload still to come.
    fn quick_ack(&self) {
        let v: libc::c_int = 1;
        // SAFETY: setting an int socket option on our own open socket. Failure only costs
        // speed.
        unsafe {
            libc::setsockopt(
                self.sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }

    /// While a payload the protocol layer asked to await whole ([`Await::Whole`]) is placed
    /// directly, the socket reports itself readable (and wakes the epoll set) only once the
    /// rest of it (`left` bytes, at most `lowat_max`) is there, so it is read in one or a few
    /// large pieces. Reading it as it trickles in costs the sender, which on loopback is the
    /// bottleneck: every read that frees receive space can send it a window update, and every
    /// segment that lands wakes the epoll set from the sender's softirq. Measured on a 4 MiB
    /// rendezvous stream, the median round went from 6.3 to 8.8-10 GB/s, and the spread
    /// between rounds halved; 1 MiB eager messages into posted receives went from 0.8x to
    /// 1.0x of rendezvous. A payload whose latency counts ([`Await::AsItComes`]: a ping-pong)
    /// keeps reading as data comes, because its latency would grow by the copy of the last
    /// piece (1 MiB: 95 -> 113 us). `left` 0 restores the mark to 1 byte.
    fn set_lowat(&mut self, left: usize) {
        let want = left.clamp(1, self.lowat_max);
        if want == self.lowat {
            return;
        }
        let v = want as libc::c_int;
        // SAFETY: setting an int socket option on our own open socket.
        let ok = unsafe {
            libc::setsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        } == 0;
        if ok {
            self.lowat = want;
        } else {
            // Not supported: leave it at what it is and stop trying.
            self.lowat_max = self.lowat;
        }
    }
}

/// A process of an independent job: the key of the pair of jobs, and our gpid in its job.
#[derive(Clone, Copy)]
struct Foreign {
    key: Key,
    me_there: Gpid,
}

/// Our side of a connection we opened, until the acceptor proved it holds the key.
struct Connecting {
    /// The TCP connection itself is still being set up (a lane opened without waiting).
    tcp_pending: bool,
    hello: [u8; HELLO_LEN],
    hello_sent: usize,
    challenge: [u8; CHALLENGE_LEN],
    got: usize,
}

/// A peer's lanes, as the sender of bulk data sees them.
struct PeerLanes {
    /// Our connections to the peer, by lane (lane 0 is also `send_conn`).
    conns: Vec<Option<usize>>,
    /// The lane the next piece tries first (pieces go round the lanes).
    next: usize,
    ctl: LaneCtl,
    burst: Option<Burst>,
}

/// A run of bulk data to one peer, from when its lanes were idle until they are idle again
/// (every byte acknowledged): what the lane count is measured by.
struct Burst {
    start: std::time::Instant,
    bytes: u64,
    /// Lanes it used, and whether all of them were open when it began.
    lanes: u8,
    clean: bool,
}

/// Where the handshake of an incoming connection is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Reading the connector's hello.
    Hello,
    /// Writing our challenge (bytes of it sent so far).
    Answer(usize),
    /// Reading the connector's proof.
    Proof,
}

/// An incoming connection whose handshake is in progress (see [`hello`]).
struct Incoming {
    sock: Socket,
    stage: Stage,
    hello: [u8; HELLO_LEN],
    challenge: [u8; CHALLENGE_LEN],
    proof: [u8; PROOF_LEN],
    got: usize,
    peer: Gpid,
    lane: u8,
    /// The key of our pair with the process the hello names.
    key: Key,
    since: std::time::Instant,
}

/// The TCP transport of one process.
pub struct Tcp {
    me: Gpid,
    listener: Socket,
    local: SocketAddr,
    /// A second listener, on an address other hosts reach, when the first is on loopback and
    /// processes of other jobs may connect from elsewhere ([`Tcp::listen_also`]).
    outside: Option<(Socket, SocketAddr)>,
    addrs: Vec<Option<SocketAddr>>,
    conns: Vec<Conn>,
    /// Slots of `conns` whose peer left the process table ([`Tcp::drop_peer`]): the next
    /// connection takes one (closing the old socket then), so descriptors do not pile up.
    free_slots: Vec<usize>,
    send_conn: Vec<Option<usize>>,
    incoming: Vec<Incoming>,
    done: Vec<Token>,
    nodelay: bool,
    sockbuf: usize,
    verbose: bool,
    /// Progress passes since the listener was last checked.
    since_accept: u32,
    /// epoll reported the listener readable (see `find_readable`).
    listener_flagged: bool,
    /// The epoll set of our connections (event data: the connection index).
    ep: OwnedFd,
    /// Bytes of directly placed payloads that were read into a connection buffer first and
    /// copied from there (the rest went straight from the socket to their destination).
    relayed: u64,
    /// Frames posted now are queued, not written, until `release` (see `hold`).
    held: bool,
    /// Largest payload of a frame we send (the protocol's fragment size).
    frag: usize,
    /// The keys of our pairs with the other processes (`runtime::keys`: the job's key, or
    /// per-pair keys; set once the bootstrap handed them out; connections wait for them) and
    /// the number of processes a hello may name.
    keys: Option<Keys>,
    nprocs: usize,
    /// By gpid, the processes of independent jobs (connected with MPI_Comm_connect/accept):
    /// the key of the pair of jobs and the gpid by which that job knows us (ours are aliases
    /// there, theirs here; see [`Tcp::set_foreign`]).
    foreign: Vec<Option<Foreign>>,
    /// Largest frame payload we accept (`tcp_frame_max`, announced in the handshake).
    frame_max: usize,
    /// By peer, a bit per lane: an authenticated connection it opened to us for that lane
    /// exists (a second one is refused).
    accepted: Vec<u64>,
    /// Bulk data: lanes by peer, how many each peer gets (a default and per-peer rules), and
    /// payload bytes sent on each lane number.
    peer_lanes: Vec<Option<Box<PeerLanes>>>,
    /// Fault to inject (`tcp_fault`): reset lane .0 once it carried .1 bytes of bulk data.
    fault: Option<(u8, u64)>,
    /// Peers whose connection a fault reset, to report lost at the next progress.
    faulted: Vec<(Gpid, String)>,
    lane_mode: Mode,
    lane_rules: Vec<(RankSet, Mode)>,
    lane_bytes: [u64; MAX_LANES as usize],
    /// Bursts under way (see [`Burst`]).
    bursts: usize,
    /// Connections refused: bad handshakes, failed proofs, duplicates, timeouts, floods.
    rejected: u64,
    /// Connections on which a [`CROSSED`] record arrived this pass.
    crossed_in: Vec<usize>,
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The least round trip a connection has seen (TCP_INFO `tcpi_min_rtt`: the smoothed one
/// includes the time data waits in full buffers, which bulk transfers make long even on
/// loopback), zero when the kernel does not say.
fn rtt_of(s: &Socket) -> std::time::Duration {
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: TCP_INFO fills at most `len` bytes of our struct.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::from_micros(info.tcpi_min_rtt as u64)
}

/// Read into `buf[*got..]` without waiting: Ok(true) once `buf` is full, Ok(false) when the
/// socket has nothing more now, Err when it closed or failed.
fn read_exact_nb(fd: libc::c_int, buf: &mut [u8], got: &mut usize) -> Result<bool, String> {
    while *got < buf.len() {
        // SAFETY: reading into the unfilled tail of our own buffer.
        let n = unsafe {
            libc::recv(
                fd,
                buf[*got..].as_mut_ptr().cast(),
                buf.len() - *got,
                libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            *got += n as usize;
        } else if n == 0 {
            return Err("closed during the handshake".into());
        } else {
            let e = io::Error::last_os_error();
            if would_block(&e) {
                return Ok(false);
            }
            return Err(format!("handshake: {e}"));
        }
    }
    Ok(true)
}

/// Write `buf[*sent..]` without waiting: Ok(true) once all of it is written.
fn write_all_nb(fd: libc::c_int, buf: &[u8], sent: &mut usize) -> Result<bool, String> {
    while *sent < buf.len() {
        // SAFETY: writing from our own buffer; MSG_NOSIGNAL turns a dead peer into an error.
        let n = unsafe {
            libc::send(
                fd,
                buf[*sent..].as_ptr().cast(),
                buf.len() - *sent,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            *sent += n as usize;
        } else {
            let e = io::Error::last_os_error();
            if would_block(&e) {
                return Ok(false);
            }
            return Err(format!("handshake: {e}"));
        }
    }
    Ok(true)
}

/// Take a socket out of the epoll set `ep` (failure: it was not in it).
fn unwatch(ep: &OwnedFd, sock: &Socket) {
    // SAFETY: both descriptors are open and ours (sockets stay open until the transport
    // drops); a null event is allowed for EPOLL_CTL_DEL.
    unsafe {
        libc::epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            sock.as_raw_fd(),
            std::ptr::null_mut(),
        )
    };
}

/// A nonblocking listening socket on `bind`, port chosen by the kernel, and its address.
fn listen_on(bind: Ipv4Addr) -> io::Result<(Socket, SocketAddr)> {
    let l = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    l.set_reuse_address(true)?;
    l.bind(&SocketAddr::V4(SocketAddrV4::new(bind, 0)).into())?;
    l.listen(1024)?;
    l.set_nonblocking(true)?;
    let a = l
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("listener has no IP address"))?;
    Ok((l, a))
}

/// Put a listener into the epoll set, tagged [`LISTENER_EVENT`].
fn watch_listener(ep: &OwnedFd, l: &Socket) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: LISTENER_EVENT,
    };
    // SAFETY: both descriptors are open and ours; `ev` lives across the call.
    if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, l.as_raw_fd(), &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Tcp {
    /// Listen on `bind` (port 0: any) and return the transport; publish [`Tcp::card`].
    pub fn new(
        me: Gpid,
        bind: Ipv4Addr,
        nodelay: bool,
        sockbuf: usize,
        frag: usize,
        frame_max: usize,
        verbose: bool,
    ) -> io::Result<Tcp> {
        let (listener, local) = listen_on(bind)?;
        // SAFETY: plain system call; the descriptor it returns is ours alone.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a fresh descriptor nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        // The listener is in the epoll set too: where epoll picks the connections to read
        // (many of them), it also says when one waits to be accepted.
        watch_listener(&ep, &listener)?;
        Ok(Tcp {
            me,
            listener,
            local,
            outside: None,
            addrs: Vec::new(),
            conns: Vec::new(),
            free_slots: Vec::new(),
            send_conn: Vec::new(),
            incoming: Vec::new(),
            done: Vec::new(),
            nodelay,
            sockbuf,
            verbose,
            since_accept: 0,
            listener_flagged: false,
            ep,
            relayed: 0,
            held: false,
            frag: frag.clamp(1, frame_max.clamp(1, MAX_PAYLOAD)),
            keys: None,
            nprocs: 0,
            foreign: Vec::new(),
            frame_max: frame_max.clamp(1, MAX_PAYLOAD),
            accepted: Vec::new(),
            rejected: 0,
            crossed_in: Vec::new(),
            peer_lanes: Vec::new(),
            fault: None,
            faulted: Vec::new(),
            lane_mode: Mode::Fixed(1),
            lane_rules: Vec::new(),
            lane_bytes: [0; MAX_LANES as usize],
            bursts: 0,
        })
    }

    /// Fault injection (`tcp_fault`): reset lane `lane` of the first peer whose lane has
    /// carried `after` bytes of bulk data from this process. For tests of what a broken
    /// lane does to the messages under way.
    pub fn set_fault(&mut self, lane: u8, after: u64) {
        self.fault = Some((lane, after));
    }

    /// Connections may start: the keys and the job's number of processes (from the bootstrap).
    pub fn start(&mut self, keys: Keys, nprocs: usize) {
        self.keys = Some(keys);
        self.nprocs = nprocs;
        self.accepted.resize(nprocs, 0);
    }

    /// The process table grew to `nprocs` (processes of another job joined): connections
    /// from them are accepted from now on.
    pub fn grow(&mut self, nprocs: usize) {
        if nprocs > self.nprocs {
            self.nprocs = nprocs;
            self.accepted.resize(nprocs, 0);
        }
    }

    /// Process `gpid` (our alias for it) belongs to an independent job: connections with it
    /// authenticate with `key`, the key of the pair of jobs, and name us `me_there`, our
    /// alias in that job (both in the hello we send and in the challenge we answer with), so
    /// that each side's hello names the connector as the acceptor numbers it.
    pub fn set_foreign(&mut self, gpid: Gpid, key: Key, me_there: Gpid) {
        let i = gpid.idx();
        if self.foreign.len() <= i {
            self.foreign.resize(i + 1, None);
        }
        self.foreign[i] = Some(Foreign { key, me_there });
    }

    /// The key for `peer`: the pair of jobs' for a process of an independent job, else ours.
    fn key_of(foreign: &[Option<Foreign>], keys: &mut Keys, peer: Gpid) -> Option<Key> {
        match foreign.get(peer.idx()) {
            Some(Some(f)) => Some(f.key),
            _ => keys.pair(peer),
        }
    }

    /// Is `peer` a process of another job (connect/accept, spawn)?
    fn is_foreign(&self, peer: Gpid) -> bool {
        matches!(self.foreign.get(peer.idx()), Some(Some(_)))
    }

    /// The gpid by which `peer` knows us.
    fn me_for(&self, peer: Gpid) -> Gpid {
        match self.foreign.get(peer.idx()) {
            Some(Some(f)) => f.me_there,
            _ => self.me,
        }
    }

    /// A process of another job left the table (disconnected): close our connections to it
    /// (their slots serve the next connections), forget its address, and refuse its
    /// connections from now on as from any process not in the table.
    pub fn drop_peer(&mut self, peer: Gpid) {
        for ci in 0..self.conns.len() {
            let c = &mut self.conns[ci];
            if c.peer != peer || self.free_slots.contains(&ci) {
                continue;
            }
            unwatch(&self.ep, &c.sock);
            let _ = c.sock.shutdown(std::net::Shutdown::Both);
            c.closed = true;
            c.drop_output(&mut self.done);
            self.free_slots.push(ci);
        }
        let i = peer.idx();
        if let Some(s) = self.send_conn.get_mut(i) {
            *s = None;
        }
        if let Some(p) = self.peer_lanes.get_mut(i) {
            *p = None;
        }
        if let Some(a) = self.addrs.get_mut(i) {
            *a = None;
        }
        if let Some(a) = self.accepted.get_mut(i) {
            *a = 0;
        }
        if let Some(f) = self.foreign.get_mut(i) {
            *f = None;
        }
    }

    /// Does a connection wait on a listener? (One poll, no waiting.)
    fn listener_ready(&self) -> bool {
        let pfd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [pfd(self.listener.as_raw_fd()), pfd(-1)];
        if let Some((l, _)) = &self.outside {
            fds[1] = pfd(l.as_raw_fd());
        }
        // SAFETY: polling descriptors we own (a negative one is skipped), without waiting.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 0) > 0 }
    }

    /// The address the listener is bound to.
    pub fn addr(&self) -> SocketAddr {
        self.local
    }

    /// The address processes of other jobs connect to: the second listener's when there is
    /// one, else the first's.
    pub fn outside_addr(&self) -> SocketAddr {
        self.outside.as_ref().map_or(self.local, |o| o.1)
    }

    /// Listen on `bind` too (once), for processes of other jobs on other hosts when the job's
    /// own listener is on loopback (a job on one host); returns that address. Connections
    /// there prove the same key as on the first listener.
    pub fn listen_also(&mut self, bind: Ipv4Addr) -> io::Result<SocketAddr> {
        if let Some((_, a)) = &self.outside {
            return Ok(*a);
        }
        let (l, a) = listen_on(bind)?;
        watch_listener(&self.ep, &l)?;
        self.outside = Some((l, a));
        Ok(a)
    }

    /// How many lanes bulk data to each peer uses: `default`, unless a rule names the peer
    /// (first match). Peers already measured keep what they learned if their mode is the same.
    pub fn set_lanes(&mut self, default: Mode, rules: Vec<(RankSet, Mode)>) {
        self.lane_mode = default;
        self.lane_rules = rules;
        for (g, pl) in self.peer_lanes.iter_mut().enumerate() {
            if let Some(pl) = pl {
                let m = Self::mode_for(self.lane_mode, &self.lane_rules, Gpid::from_idx(g));
                if pl.ctl.mode() != m {
                    pl.ctl = LaneCtl::new(m);
                }
            }
        }
    }

    fn mode_for(default: Mode, rules: &[(RankSet, Mode)], peer: Gpid) -> Mode {
        rules
            .iter()
            .find(|(s, _)| s.contains(peer.get()))
            .map_or(default, |(_, m)| *m)
    }

    /// Lanes bulk data to `peer` uses now.
    pub fn lanes_of(&self, peer: Gpid) -> u8 {
        match self.peer_lanes.get(peer.idx()) {
            Some(Some(pl)) => pl.ctl.target(),
            _ => match Self::mode_for(self.lane_mode, &self.lane_rules, peer) {
                Mode::Fixed(n) => n,
                Mode::Auto { .. } => 1,
            },
        }
    }

    /// Connections open (or opening) to peers, beyond the first per peer: lanes in use.
    pub fn extra_lanes(&self) -> u64 {
        self.peer_lanes
            .iter()
            .flatten()
            .map(|pl| pl.conns.iter().skip(1).flatten().count() as u64)
            .sum()
    }

    /// The port we listen on.
    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// Tell the transport where peer `gpid` listens.
    pub fn set_addr(&mut self, gpid: Gpid, addr: SocketAddr) {
        let i = gpid.idx();
        if self.addrs.len() <= i {
            self.addrs.resize(i + 1, None);
        }
        self.addrs[i] = Some(addr);
    }

    /// The largest payload of a frame we send (`tcp_frag_bytes`).
    pub fn set_frag(&mut self, frag: usize) {
        self.frag = frag.clamp(1, self.frame_max);
    }

    fn tune(&self, s: &Socket) -> io::Result<()> {
        self.size_buffers(s);
        if self.nodelay {
            s.set_tcp_nodelay(true)?;
        }
        s.set_nonblocking(true)
    }

    /// Socket buffers, set before a connection opens so that its window scale is chosen for
    /// them (`tcp_sockbuf`; 0 leaves the kernel's defaults and autotuning).
    fn size_buffers(&self, s: &Socket) {
        if self.sockbuf > 0 {
            let _ = s.set_send_buffer_size(self.sockbuf);
            let _ = s.set_recv_buffer_size(self.sockbuf);
        }
    }

    fn add_conn(
        &mut self,
        sock: Socket,
        peer: Gpid,
        lane: u8,
        connecting: Option<Box<Connecting>>,
    ) -> usize {
        let i = self.free_slots.pop().unwrap_or(self.conns.len());
        // A write that is not a whole number of segments ends in a short one, which costs
        // (on loopback) about as much as a full one: cap writes at whole segments.
        let send_cap = match sock.tcp_mss() {
            Ok(mss) if mss > 0 => (SEND_CAP / mss as usize).max(1) * mss as usize,
            _ => SEND_CAP,
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: both descriptors are open and ours; `ev` is a valid event.
        let watched = unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                sock.as_raw_fd(),
                &mut ev,
            )
        } == 0;
        // A low-water mark above what the receive window holds would never be reached.
        let lowat_max = LOWAT_MAX
            .min(sock.recv_buffer_size().unwrap_or(0) / 4)
            .max(1);
        let dialed = connecting.is_some();
        let conn = Conn {
            sock,
            lowat: 1,
            lowat_max,
            peer,
            out: VecDeque::new(),
            queued: 0,
            buf: vec![0u8; RX_BUF],
            start: 0,
            end: 0,
            rx: RxState::Frames,
            want: 0,
            closed: false,
            // Frames may have come along with the handshake: look once.
            readable: true,
            unwatched: !watched,
            header_first: false,
            send_cap,
            connecting,
            peer_max: self.frame_max,
            lane,
            bulk: 0,
            dialed,
            retire_to: None,
            after: None,
        };
        if i == self.conns.len() {
            self.conns.push(conn);
        } else {
            // The old socket of a dropped peer closes here.
            self.conns[i] = conn;
        }
        if self.send_conn.len() <= peer.idx() {
            self.send_conn.resize(peer.idx() + 1, None);
        }
        if lane == 0 && self.send_conn[peer.idx()].is_none() {
            self.send_conn[peer.idx()] = Some(i);
        }
        i
    }

    fn connect(&mut self, peer: Gpid) -> io::Result<usize> {
        let addr = self
            .addrs
            .get(peer.idx())
            .copied()
            .flatten()
            .ok_or_else(|| io::Error::other(format!("no TCP address known for process {peer}")))?;
        let s = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
        self.size_buffers(&s);
        let mut tries = 0;
        loop {
            match s.connect(&addr.into()) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if tries < 50 && e.kind() == io::ErrorKind::ConnectionRefused => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(io::Error::new(e.kind(), format!("connect to {addr}: {e}"))),
            }
        }
        // The hello goes at once; frames wait until the acceptor proved the key.
        let hello = self.hello(peer, 0);
        let mut sent = 0;
        while sent < HELLO_LEN {
            match s.send(&hello[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.tune(&s)?;
        if self.verbose {
            eprintln!(
                "Protean[{}]: tcp connected to process {peer} at {addr}",
                self.me
            );
        }
        let hs = Box::new(Connecting {
            tcp_pending: false,
            hello,
            hello_sent: HELLO_LEN,
            challenge: [0; CHALLENGE_LEN],
            got: 0,
        });
        Ok(self.add_conn(s, peer, 0, Some(hs)))
    }

    fn hello(&self, peer: Gpid, lane: u8) -> [u8; HELLO_LEN] {
        Hello {
            gpid: self.me_for(peer),
            lane,
            max_frame: self.frame_max as u32,
            nonce: hello::nonce(),
        }
        .encode()
    }

    /// Open lane `lane` (> 0) to `peer` without waiting: the connection, the hello and the
    /// challenge complete in later passes (`finish_connect`).
    fn open_lane(&mut self, peer: Gpid, lane: u8) -> io::Result<usize> {
        let addr = self
            .addrs
            .get(peer.idx())
            .copied()
            .flatten()
            .ok_or_else(|| io::Error::other(format!("no TCP address known for process {peer}")))?;
        let s = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
        self.tune(&s)?;
        match s.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        if self.verbose {
            eprintln!(
                "Protean[{}]: opening tcp lane {lane} to process {peer} at {addr}",
                self.me
            );
        }
        let hs = Box::new(Connecting {
            tcp_pending: true,
            hello: self.hello(peer, lane),
            hello_sent: 0,
            challenge: [0; CHALLENGE_LEN],
            got: 0,
        });
        Ok(self.add_conn(s, peer, lane, Some(hs)))
    }

    /// Open the connection to `peer` now (it completes in later progress passes), rather than
    /// at the first frame: a peer that dies is then noticed by the end of its connection even
    /// while nothing is sent to it.
    pub fn connect_now(&mut self, peer: Gpid) -> io::Result<()> {
        self.conn_for(peer).map(|_| ())
    }

    fn conn_for(&mut self, peer: Gpid) -> io::Result<usize> {
        if let Some(Some(i)) = self.send_conn.get(peer.idx()) {
            return Ok(*i);
        }
        if self.keys.is_none() {
            return Err(io::Error::other(
                "TCP connections cannot start before the job's keys are known",
            ));
        }
        // The peer may have connected to us already; take that connection if so.
        self.accept_all();
        if let Some(Some(i)) = self.send_conn.get(peer.idx()) {
            return Ok(*i);
        }
        self.connect(peer)
    }

    /// A connection just accepted starts its handshake, unless too many are under way.
    fn take_incoming(&mut self, sock: Socket) {
        if self.incoming.len() >= MAX_PENDING || sock.set_nonblocking(true).is_err() {
            self.reject("too many connections in their handshake");
            return;
        }
        self.incoming.push(Incoming {
            sock,
            stage: Stage::Hello,
            hello: [0; HELLO_LEN],
            challenge: [0; CHALLENGE_LEN],
            proof: [0; PROOF_LEN],
            got: 0,
            peer: Gpid::new(0),
            lane: 0,
            key: [0; 32],
            since: std::time::Instant::now(),
        });
    }

    /// Take new connections and advance the handshakes of incoming ones; a connection whose
    /// connector proved the key joins the others. Nothing is read before the key is known.
    fn accept_all(&mut self) {
        let Some(mut keys) = self.keys.take() else {
            return;
        };
        // The job's listener, then the one for other hosts (if any), each until it is empty.
        for outside in [false, true] {
            while let Some(Ok((sock, _))) = match (outside, &self.outside) {
                (false, _) => Some(self.listener.accept()),
                (true, o) => o.as_ref().map(|(l, _)| l.accept()),
            } {
                self.take_incoming(sock);
            }
        }
        let mut i = 0;
        while i < self.incoming.len() {
            match self.handshake_step(i, &mut keys) {
                Ok(false) => i += 1,
                Ok(true) => {
                    let inc = self.incoming.swap_remove(i);
                    let bit = 1u64 << inc.lane;
                    if self.accepted[inc.peer.idx()] & bit != 0 {
                        self.reject("a second connection from an already connected process");
                        continue;
                    }
                    if self.tune(&inc.sock).is_ok() {
                        self.accepted[inc.peer.idx()] |= bit;
                        let ci = self.add_conn(inc.sock, inc.peer, inc.lane, None);
                        if inc.lane == 0 {
                            self.crossed(inc.peer, ci);
                        }
                    }
                }
                Err(why) => {
                    self.incoming.swap_remove(i);
                    self.reject(&why);
                }
            }
        }
        self.keys = Some(keys);
    }

    /// Crossed connections: `peer` opened lane-0 connection `accepted` to us while we had
    /// opened ours to it (both sent their first frames at once, as in most jobs' first
    /// collective). Each side sends on the connection it opened, so frames stay in order,
    /// but every connection then carries data one way only: twice the descriptors, a receive
    /// call more on every progress pass, and acknowledgements that cannot ride on data
    /// (across two emulated hosts a put + flush took 34 us this way, 21-25 us on one).
    ///
    /// The connection opened by the process with the higher gpid gives way. The lower one
    /// sees both connections authenticated here: from now on it reads the peer's frames on
    /// its own connection only after the accepted one has ended (`Conn::after`, checked in
    /// [`Tcp::read_conn`]), and tells the peer so with a [`CROSSED`] record on its own
    /// connection. The peer, on that record, writes what it queued on its connection, shuts
    /// it down (we read its end after its last frame) and sends on ours from then on
    /// ([`Tcp::try_retire`]). Only authenticated connections take part: a process that
    /// claims a peer's gpid without its key holds nothing back. Processes of other jobs keep
    /// both connections (their gpids are not comparable).
    fn crossed(&mut self, peer: Gpid, accepted: usize) {
        if peer < self.me || self.is_foreign(peer) {
            return;
        }
        let Some(Some(ours)) = self.send_conn.get(peer.idx()).copied() else {
            return;
        };
        let c = &self.conns[ours];
        if ours == accepted || !c.dialed || c.closed || c.after.is_some() {
            return;
        }
        let mut rec = Out::new(&[CROSSED; HEADER_LEN], &[], &[], Token::NONE);
        rec.head[..4].copy_from_slice(&RECORD.to_le_bytes());
        let c = &mut self.conns[ours];
        c.after = Some(accepted);
        c.queued += rec.total();
        c.out.push_back(rec);
        if !self.held {
            // A failure shows at the next pass's write (`flush_or_lose`).
            let _ = self.flush(ours);
        }
    }

    /// A [`CROSSED`] record came on connection `ci`, which the peer opened: our connection
    /// to it gives way ([`Tcp::try_retire`]). Ignored where it does not describe our
    /// connections, and from a foreign peer (both connections stay, as [`Tcp::crossed`]
    /// leaves them).
    fn on_crossed(&mut self, ci: usize) {
        let c = &self.conns[ci];
        let peer = c.peer;
        if c.dialed || c.lane != 0 || c.closed || peer > self.me || self.is_foreign(peer) {
            return;
        }
        if let Some(Some(ours)) = self.send_conn.get(peer.idx()).copied() {
            if ours != ci && self.conns[ours].dialed && !self.conns[ours].closed {
                self.conns[ours].retire_to = Some(ci);
                self.try_retire(ours);
            }
        }
    }

    /// Connection `ci`, which gives way to the peer's ([`Tcp::crossed`]): once its handshake
    /// is done and everything queued on it is written, shut it down and send on the other.
    fn try_retire(&mut self, ci: usize) {
        let c = &self.conns[ci];
        let Some(to) = c.retire_to else {
            return;
        };
        if c.connecting.is_some() || !c.out.is_empty() {
            return;
        }
        let (peer, closed) = (c.peer, c.closed);
        self.conns[ci].retire_to = None;
        if closed || self.conns[to].closed {
            return; // lost meanwhile: nothing to hand over
        }
        let c = &mut self.conns[ci];
        // The peer reads to the end of what was written, then its end (a FIN after the data).
        let _ = c.sock.shutdown(std::net::Shutdown::Write);
        c.closed = true;
        unwatch(&self.ep, &c.sock);
        self.send_conn[peer.idx()] = Some(to);
        if let Some(Some(pl)) = self.peer_lanes.get_mut(peer.idx()) {
            if let Some(l0) = pl.conns.first_mut() {
                *l0 = Some(to);
            }
        }
        if self.verbose {
            eprintln!(
                "Protean[{}]: crossed tcp connections with process {peer}: sending on the one it opened",
                self.me
            );
        }
    }

    /// A connection failed its handshake: counted, and dropped without touching anything.
    fn reject(&mut self, why: &str) {
        self.rejected += 1;
        if self.verbose {
            eprintln!("Protean[{}]: refused a TCP connection: {why}", self.me);
        }
    }

    /// Advance the handshake of incoming connection `i`: Ok(true) when its connector proved
    /// the key, Ok(false) while it waits for bytes, Err when it must be dropped.
    fn handshake_step(&mut self, i: usize, keys: &mut Keys) -> Result<bool, String> {
        let (me, nprocs, frame_max) = (self.me, self.nprocs, self.frame_max);
        let inc = &mut self.incoming[i];
        if inc.since.elapsed() > HANDSHAKE_TIMEOUT {
            return Err("handshake not finished in time".into());
        }
        let fd = inc.sock.as_raw_fd();
        loop {
            match inc.stage {
                Stage::Hello => {
                    if !read_exact_nb(fd, &mut inc.hello, &mut inc.got)? {
                        return Ok(false);
                    }
                    let h = Hello::decode(&inc.hello).map_err(|e| e.to_string())?;
                    if h.gpid.idx() >= nprocs || h.gpid == me {
                        return Err(format!("a hello from process {} (no such peer)", h.gpid));
                    }
                    if (h.max_frame as usize) < 4096 {
                        return Err(format!("a frame limit of {} bytes", h.max_frame));
                    }
                    if h.lane >= MAX_LANES {
                        return Err(format!("lane {} (at most {MAX_LANES})", h.lane));
                    }
                    // The key of our pair with the process the hello names (derived once per
                    // peer under the pair-key scheme, then remembered).
                    // A process of an independent job names itself by our alias for it and
                    // proves the key of the pair of jobs; we answer with its job's name for us.
                    inc.key = Self::key_of(&self.foreign, keys, h.gpid).ok_or_else(|| {
                        format!("a hello from process {} (no key for it)", h.gpid)
                    })?;
                    let me_there = match self.foreign.get(h.gpid.idx()) {
                        Some(Some(f)) => f.me_there,
                        _ => me,
                    };
                    inc.peer = h.gpid;
                    inc.lane = h.lane;
                    inc.challenge = hello::challenge(
                        &inc.key,
                        &inc.hello,
                        me_there,
                        frame_max as u32,
                        hello::nonce(),
                    );
                    inc.stage = Stage::Answer(0);
                }
                Stage::Answer(sent) => {
                    let mut sent = sent;
                    if !write_all_nb(fd, &inc.challenge, &mut sent)? {
                        inc.stage = Stage::Answer(sent);
                        return Ok(false);
                    }
                    inc.got = 0;
                    inc.stage = Stage::Proof;
                }
                Stage::Proof => {
                    if !read_exact_nb(fd, &mut inc.proof, &mut inc.got)? {
                        return Ok(false);
                    }
                    hello::check_proof(&inc.key, &inc.hello, &inc.challenge, &inc.proof)
                        .map_err(|e| format!("process {} claimed: {e}", inc.peer))?;
                    return Ok(true);
                }
            }
        }
    }

    /// Write queued output of connection `ci`; report finished tokens.
    fn flush(&mut self, ci: usize) -> io::Result<()> {
        let c = &mut self.conns[ci];
        if c.connecting.is_some() {
            return Ok(()); // nothing goes before the acceptor proved the key
        }
        while !c.out.is_empty() {
            let mut iov: [libc::iovec; 32] = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 32];
            let mut n = 0;
            for o in c.out.iter() {
                if n + 2 > iov.len() {
                    break;
                }
                if o.off < o.head_len {
                    iov[n] = libc::iovec {
                        iov_base: o.head[o.off..o.head_len].as_ptr() as *mut _,
                        iov_len: o.head_len - o.off,
                    };
                    n += 1;
                }
                let boff = o.off.saturating_sub(o.head_len);
                if boff < o.body_len {
                    // SAFETY: body points to body_len live bytes (owned, or kept alive by the
                    // token's owner until it is reported).
                    iov[n] = libc::iovec {
                        iov_base: unsafe { o.body.add(boff) } as *mut _,
                        iov_len: o.body_len - boff,
                    };
                    n += 1;
                }
            }
            // At most `send_cap` bytes per call (see SEND_CAP).
            let mut total = 0;
            for (i, v) in iov[..n].iter_mut().enumerate() {
                if total + v.iov_len >= c.send_cap {
                    v.iov_len = c.send_cap - total;
                    n = i + 1;
                    break;
                }
                total += v.iov_len;
            }
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = n as _;
            // SAFETY: the iovecs describe live memory (see above); the socket is ours.
            let r = unsafe {
                libc::sendmsg(
                    c.sock.as_raw_fd(),
                    &msg,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if would_block(&e) {
                    return Ok(());
                }
                return Err(e);
            }
            let mut wrote = r as usize;
            c.queued -= wrote;
            while wrote > 0 {
                let o = c.out.front_mut().expect("bytes written for a queued frame");
                let left = o.total() - o.off;
                if wrote >= left {
                    wrote -= left;
                    let o = c.out.pop_front().expect("front");
                    if o.token != Token::NONE {
                        self.done.push(o.token);
                    }
                } else {
                    o.off += wrote;
                    wrote = 0;
                }
            }
        }
        Ok(())
    }

    /// Read and deliver what connection `ci` has. Returns frames delivered.
    fn read_conn<S: FrameSink>(&mut self, ci: usize, sink: &mut S) -> usize {
        if self.conns[ci].connecting.is_some() && !self.finish_connect(ci, sink) {
            return 0;
        }
        // Crossed connections: the peer's frames on ours wait until its retiring one ended.
        if let Some(a) = self.conns[ci].after {
            if !self.conns[a].closed {
                return 0;
            }
            self.conns[ci].after = None;
        }
        let mut delivered = 0;
        let c = &mut self.conns[ci];
        if c.closed {
            return 0;
        }
        let fd = c.sock.as_raw_fd();
        for _round in 0..16 {
            // 1. Direct placement in progress: read into the destination.
            if let RxState::Direct {
                hdr,
                whole,
                ptr,
                remaining,
                len,
            } = c.rx
            {
                // SAFETY: place() gave a span of `len` writable bytes at ptr (Span's contract,
                // until we report it placed); we write the last `remaining` of them.
                let n = unsafe {
                    libc::recv(
                        fd,
                        ptr.add(len - remaining).cast(),
                        remaining,
                        libc::MSG_DONTWAIT,
                    )
                };
                if n <= 0 {
                    if n == 0 || !would_block(&io::Error::last_os_error()) {
                        c.closed = true;
                        sink.on_peer_lost(c.peer, "connection closed during a data transfer");
                    } else if whole {
                        c.set_lowat(remaining);
                    }
                    return delivered;
                }
                let left = remaining - n as usize;
                if whole {
                    c.set_lowat(left);
                }
                if left > 0 {
                    c.quick_ack();
                }
                if left == 0 {
                    c.rx = RxState::Frames;
                    c.header_first = true;
                    sink.placed(c.peer, &hdr, len);
                    delivered += 1;
                } else {
                    // More may have landed meanwhile: read until the socket is dry, and
                    // only then wait for epoll to say it is readable again.
                    c.rx = RxState::Direct {
                        hdr,
                        whole,
                        ptr,
                        remaining: left,
                        len,
                    };
                }
                continue;
            }
            // 2. Parse whole frames out of the buffer.
            loop {
                let avail = c.end - c.start;
                if avail < PREFIX {
                    break;
                }
                let b = &c.buf[c.start..c.end];
                let plen = u32::from_le_bytes(b[..4].try_into().expect("4")) as usize;
                let hdr: &[u8; HEADER_LEN] = b[4..PREFIX].try_into().expect("header");
                if plen == RECORD as usize && hdr[0] == CROSSED {
                    self.crossed_in.push(ci);
                    c.start += PREFIX;
                    continue;
                }
                if plen > self.frame_max {
                    c.closed = true;
                    sink.on_peer_lost(
                        c.peer,
                        &format!(
                            "malformed TCP stream: a frame of {plen} bytes, above the limit of {} (tcp_frame_max)",
                            self.frame_max
                        ),
                    );
                    return delivered;
                }
                // A large payload still on its way: read it where the protocol layer wants
                // it (a receive buffer, or the buffer it will wait in), not through this one.
                if plen >= PLACE_MIN && avail < PREFIX + plen {
                    if let Some(pl) = sink.place(c.peer, hdr, plen) {
                        let hdr = *hdr;
                        let have = avail - PREFIX;
                        self.relayed += have as u64;
                        debug_assert_eq!(pl.to.len(), plen);
                        pl.to.write(&b[PREFIX..PREFIX + have]);
                        c.start += PREFIX + have;
                        c.want = 0;
                        c.rx = RxState::Direct {
                            hdr,
                            whole: pl.wait == Await::Whole,
                            ptr: pl.to.ptr(),
                            remaining: plen - have,
                            len: plen,
                        };
                        break;
                    }
                }
                if avail < PREFIX + plen {
                    c.want = plen;
                    if PREFIX + plen > c.buf.len() {
                        // A frame larger than the buffer: grow it for this frame.
                        let mut nb = vec![0u8; PREFIX + plen];
                        nb[..avail].copy_from_slice(&c.buf[c.start..c.end]);
                        c.buf = nb;
                        c.end = avail;
                        c.start = 0;
                    }
                    break;
                }
                sink.on_frame(c.peer, hdr, &b[PREFIX..PREFIX + plen]);
                c.header_first = false;
                c.want = 0;
                delivered += 1;
                c.start += PREFIX + plen;
            }
            if matches!(c.rx, RxState::Direct { .. }) {
                if c.start == c.end {
                    c.start = 0;
                    c.end = 0;
                }
                continue;
            }
            // 3. Compact and read more.
            if c.start == c.end {
                c.start = 0;
                c.end = 0;
                if c.buf.len() > RX_BUF {
                    c.buf = vec![0u8; RX_BUF];
                }
            } else if c.start > 0 && c.buf.len() - c.end < PREFIX + 4096 {
                c.buf.copy_within(c.start..c.end, 0);
                c.end -= c.start;
                c.start = 0;
            }
            // Read at most READ_CHUNK at a time: the payload of a large Data frame that lands
            // in this buffer has to be copied again, what follows its header is read straight
            // into the receive buffer.
            let room = if c.header_first && c.start == c.end {
                PREFIX
            } else {
                (c.buf.len() - c.end).min(READ_CHUNK.max(PREFIX + c.want))
            };
            // SAFETY: reading into the unused tail of our own buffer.
            let n = unsafe {
                libc::recv(
                    fd,
                    c.buf[c.end..].as_mut_ptr().cast(),
                    room,
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                c.end += n as usize;
                continue;
            }
            if n == 0 {
                c.closed = true;
                let (peer, partial) = (c.peer, c.end > c.start);
                // A peer that closes in order (it left our table, or ended) may have sent its
                // last frames on its other connection with us, not read yet: the peer is lost
                // when the last one closes, not the first.
                let other = (self.conns.iter().enumerate())
                    .any(|(j, o)| j != ci && o.peer == peer && !o.closed);
                if partial {
                    sink.on_peer_lost(peer, "connection closed in the middle of a frame");
                } else if !other {
                    sink.on_peer_lost(peer, "connection closed");
                }
            } else {
                let e = io::Error::last_os_error();
                if !would_block(&e) {
                    c.closed = true;
                    sink.on_peer_lost(c.peer, &format!("receive failed: {e}"));
                }
            }
            return delivered;
        }
        // Stopped with data possibly left in the socket: read again next pass.
        c.readable = true;
        delivered
    }

    /// A connection we opened: read the acceptor's challenge and, when it proves the key,
    /// answer with our proof and let the queued frames go. True once the connection carries
    /// frames; a failed proof loses the peer (the address its card gave is not the peer).
    fn finish_connect<S: FrameSink>(&mut self, ci: usize, sink: &mut S) -> bool {
        let peer = self.conns[ci].peer;
        let key = Self::key_of(
            &self.foreign,
            self.keys.as_mut().expect("connections start with the keys"),
            peer,
        );
        let c = &mut self.conns[ci];
        let Some(hs) = c.connecting.as_mut() else {
            return true;
        };
        let fd = c.sock.as_raw_fd();
        if hs.tcp_pending {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: polling one descriptor we own, without waiting.
            if unsafe { libc::poll(&mut pfd, 1, 0) } <= 0 {
                return false;
            }
            if let Ok(Some(e)) | Err(e) = c.sock.take_error() {
                let why = format!("cannot open lane {} to process {}: {e}", c.lane, c.peer);
                c.closed = true;
                c.connecting = None;
                c.drop_output(&mut self.done);
                sink.on_peer_lost(c.peer, &why);
                return false;
            }
            hs.tcp_pending = false;
        }
        let failed = match write_all_nb(fd, &hs.hello, &mut hs.hello_sent) {
            Ok(false) => return false,
            Ok(true) => None,
            Err(e) => Some(e),
        };
        let failed = match failed {
            Some(e) => Err(e),
            None => read_exact_nb(fd, &mut hs.challenge, &mut hs.got),
        };
        let failed = match failed {
            Ok(false) => return false,
            Ok(true) => match key.map_or(Err(Refused::NoKey), |key| {
                hello::check_challenge(&key, &hs.hello, c.peer, &hs.challenge)
            }) {
                Ok((max, proof)) => {
                    c.peer_max = max as usize;
                    let mut head = [0u8; PREFIX + INLINE_SMALL];
                    head[..PROOF_LEN].copy_from_slice(&proof);
                    c.out.push_front(Out {
                        head,
                        head_len: PROOF_LEN,
                        body: std::ptr::null(),
                        body_len: 0,
                        owned: None,
                        off: 0,
                        token: Token::NONE,
                    });
                    c.queued += PROOF_LEN;
                    c.connecting = None;
                    None
                }
                Err(e) => Some(format!(
                    "the process listening at its address failed the handshake: {e}"
                )),
            },
            Err(e) => Some(e),
        };
        if let Some(why) = failed {
            c.closed = true;
            c.connecting = None;
            c.drop_output(&mut self.done);
            sink.on_peer_lost(c.peer, &why);
            return false;
        }
        self.flush_or_lose(ci, sink);
        true
    }

    /// Bytes queued and not yet written on the connection we send to `peer` on.
    fn queued_bytes(&self, peer: Gpid) -> usize {
        match self.send_conn.get(peer.idx()) {
            Some(Some(i)) => self.conns[*i].queued,
            _ => 0,
        }
    }

    /// Is output queued on the connection we send to `peer` on?
    fn has_queued(&self, peer: Gpid) -> bool {
        match self.send_conn.get(peer.idx()) {
            Some(Some(i)) => !self.conns[*i].out.is_empty(),
            _ => false,
        }
    }

    /// Queue (and try to write) one frame.
    fn post(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> io::Result<Sent> {
        let ci = self.conn_for(peer)?;
        self.post_on(ci, peer, hdr, small, body, token)
    }

    /// The lanes of `peer`, made on first use.
    fn lanes_mut(&mut self, peer: Gpid) -> &mut PeerLanes {
        let i = peer.idx();
        if self.peer_lanes.len() <= i {
            self.peer_lanes.resize_with(i + 1, || None);
        }
        let (mode, rules) = (self.lane_mode, &self.lane_rules);
        self.peer_lanes[i].get_or_insert_with(|| {
            Box::new(PeerLanes {
                conns: Vec::new(),
                next: 0,
                ctl: LaneCtl::new(Self::mode_for(mode, rules, peer)),
                burst: None,
            })
        })
    }

    /// Queue a frame of bulk data (one that may overtake others) on one of the peer's lanes:
    /// the open lane with the least output queued. Lanes up to the peer's target are opened
    /// first, without waiting; until they are ready the others carry the data.
    fn post_any(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        let failed = |e: io::Error| SendError::Failed(e.to_string());
        let ci0 = self.conn_for(peer).map_err(failed)?;
        let auto = matches!(
            Self::mode_for(self.lane_mode, &self.lane_rules, peer),
            Mode::Auto { .. }
        );
        if auto && self.conns[ci0].connecting.is_none() {
            let c = &self.conns[ci0];
            let (rtt, window) = (
                rtt_of(&c.sock),
                c.sock.send_buffer_size().unwrap_or(0) as u64,
            );
            if self.lanes_mut(peer).ctl.estimate(rtt, window) && self.verbose {
                eprintln!(
                    "Protean[{}]: {} lanes to process {peer} (first estimate: rtt {rtt:?}, buffer {window})",
                    self.me,
                    self.lanes_of(peer)
                );
            }
        }
        let target = self.lanes_of(peer) as usize;
        let measuring = match self.peer_lanes.get(peer.idx()) {
            Some(Some(pl)) => !pl.ctl.settled(),
            _ => matches!(
                Self::mode_for(self.lane_mode, &self.lane_rules, peer),
                Mode::Auto { .. }
            ),
        };
        if target <= 1 && !measuring {
            self.lane_bytes[0] += (small.len() + body.len()) as u64;
            return self
                .post_on(ci0, peer, hdr, small, body, token)
                .map_err(failed);
        }
        {
            let pl = self.lanes_mut(peer);
            if pl.conns.len() < target {
                pl.conns.resize(target, None);
            }
            pl.conns[0] = Some(ci0);
        }
        for lane in 1..target {
            let have = self.peer_lanes[peer.idx()].as_ref().expect("made").conns[lane]
                .is_some_and(|ci| !self.conns[ci].closed);
            if !have {
                let ci = self.open_lane(peer, lane as u8).map_err(failed)?;
                self.peer_lanes[peer.idx()].as_mut().expect("made").conns[lane] = Some(ci);
            }
        }
        let conns = &self.conns;
        let pl = self.peer_lanes[peer.idx()].as_mut().expect("made");
        let ready = |ci: &usize| !conns[*ci].closed && conns[*ci].connecting.is_none();
        // Round the open lanes from the one after the last used, the first with room: every
        // lane gets pieces, and one that drains slowly (its queue full) gets fewer.
        let mut pick = None;
        for k in 0..target {
            let lane = (pl.next + k) % target;
            if let Some(ci) = pl.conns[lane].filter(|ci| ready(ci)) {
                if target <= 1 || conns[ci].queued < LANE_QUEUE_MAX {
                    pick = Some((lane, ci));
                    break;
                }
                pick = pick.or(Some((usize::MAX, ci)));
            }
        }
        let ci = match pick {
            Some((lane, ci)) if lane != usize::MAX => {
                pl.next = lane + 1;
                ci
            }
            Some(_) => return Err(SendError::NotNow),
            None => ci0,
        };
        let len = (small.len() + body.len()) as u64;
        if pl.burst.is_none() {
            let idle = pl
                .conns
                .iter()
                .flatten()
                .all(|ci| conns[*ci].out.is_empty());
            if idle {
                // Lanes that just opened are in slow start and would understate the count.
                let all_ready = pl.conns[..target]
                    .iter()
                    .flatten()
                    .filter(|ci| {
                        ready(ci)
                            && (conns[**ci].lane == 0 || conns[**ci].bulk >= lanes::WARM_BYTES)
                    })
                    .count()
                    == target;
                self.bursts += 1;
                pl.burst = Some(Burst {
                    start: std::time::Instant::now(),
                    bytes: 0,
                    lanes: target as u8,
                    clean: all_ready,
                });
            }
        }
        if let Some(b) = pl.burst.as_mut() {
            b.bytes += len;
        }
        let lane = self.conns[ci].lane as usize;
        self.conns[ci].bulk += len;
        self.lane_bytes[lane.min(MAX_LANES as usize - 1)] += len;
        let sent = self
            .post_on(ci, peer, hdr, small, body, token)
            .map_err(failed);
        if let Some((k, after)) = self.fault {
            if lane == k as usize && self.conns[ci].bulk >= after {
                self.fault = None;
                self.reset(ci);
            }
        }
        sent
    }

    /// Abort connection `ci` (an RST to the peer, queued data dropped) and report its peer
    /// lost at the next progress: the fault `tcp_fault` injects.
    fn reset(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        let _ = c.sock.set_linger(Some(std::time::Duration::ZERO));
        // Closing with a zero linger time sends the RST; a placeholder takes the descriptor's
        // place (the slot stays, closed, for the indexes that name it).
        if let Ok(dead) = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None) {
            drop(std::mem::replace(&mut c.sock, dead));
        }
        c.closed = true;
        c.drop_output(&mut self.done);
        let why = format!("lane {} reset (fault injected by tcp_fault)", c.lane);
        self.faulted.push((c.peer, why));
    }

    /// Bursts of bulk data that ended (every lane idle, every byte acknowledged) tell the
    /// peer's lane control what the link does.
    fn end_bursts(&mut self) {
        for g in 0..self.peer_lanes.len() {
            let Some(pl) = self.peer_lanes[g].as_mut() else {
                continue;
            };
            let Some(b) = pl.burst.as_ref() else {
                continue;
            };
            let conns = &self.conns;
            let lanes: Vec<usize> = pl.conns.iter().flatten().copied().collect();
            if lanes.iter().any(|ci| !conns[*ci].out.is_empty()) {
                continue;
            }
            // Bytes the kernel still holds unsent or unacknowledged.
            let unacked = lanes.iter().any(|ci| {
                let mut n: libc::c_int = 0;
                // SAFETY: SIOCOUTQ writes an int for our own open socket.
                let rc =
                    unsafe { libc::ioctl(conns[*ci].sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
                rc == 0 && n > 0
            });
            if unacked {
                continue;
            }
            let elapsed = b.start.elapsed();
            let (bytes, used, clean) = (b.bytes, b.lanes, b.clean);
            pl.burst = None;
            self.bursts -= 1;
            if !clean {
                continue;
            }
            let rtt = lanes
                .first()
                .map_or(std::time::Duration::ZERO, |ci| rtt_of(&conns[*ci].sock));
            let window = lanes.first().map_or(0, |ci| {
                conns[*ci].sock.send_buffer_size().unwrap_or(0) as u64
            });
            if pl.ctl.observe(bytes, elapsed, used, rtt, window) && self.verbose {
                eprintln!(
                    "Protean[{}]: {} lanes to process {g} ({} bytes in {:?} on {used}, rtt {:?})",
                    self.me,
                    pl.ctl.target(),
                    bytes,
                    elapsed,
                    rtt
                );
            }
        }
    }

    /// Queue (and try to write) one frame on connection `ci`.
    fn post_on(
        &mut self,
        ci: usize,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> io::Result<Sent> {
        let plen = small.len() + body.len();
        let peer_max = self.conns[ci].peer_max;
        if plen > peer_max {
            return Err(io::Error::other(format!(
                "a frame of {plen} bytes is above the limit of {peer_max} that process {peer} accepts (tcp_frame_max)"
            )));
        }
        let c = &mut self.conns[ci];
        if c.closed {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("connection to process {peer} is closed"),
            ));
        }
        let was_empty = c.out.is_empty();
        let o = Out::new(hdr, small, body, token);
        c.queued += o.total();
        c.out.push_back(o);
        // A held frame would have to be copied if its body is only lent for this call (no
        // token): write it, and what is held before it, now.
        let lent = token == Token::NONE && !body.is_empty();
        if (was_empty && !self.held) || (self.held && lent) {
            self.flush(ci)?;
        }
        let c = &mut self.conns[ci];
        Ok(outq::settle(&mut c.out, &mut self.done, token))
    }

    fn poll<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        // New connections are rare: look at the listener every few passes, not every time
        // (a sender that needs a connection checks it at once, see `conn_for`), and ask
        // whether one waits before accepting: a failed accept4 still makes and frees a socket
        // and its inode in the kernel (measured: half the time of a spawned child's
        // ping-pong went there), where poll reads one flag.
        // With a few connections, trying each costs less than asking epoll; with many (a job
        // whose ranks all talk to each other), a pass of a recv per connection grows with the
        // job (at 64 processes, 126 failed recvs a pass): epoll says which to read, and when
        // the listener has a connection waiting. A connection stops reading only at EAGAIN,
        // or marks itself readable (`read_conn`), so nothing stays unread.
        let many = self.conns.len() > READ_ALL_MAX;
        if many
            || self
                .conns
                .iter()
                .any(|c| matches!(c.rx, RxState::Direct { .. }))
        {
            self.find_readable();
        }
        self.since_accept += 1;
        if !self.incoming.is_empty()
            || std::mem::take(&mut self.listener_flagged)
            || (self.since_accept >= 64 && self.listener_ready())
        {
            self.since_accept = 0;
            self.accept_all();
        } else if self.since_accept >= 64 {
            self.since_accept = 0;
        }
        let mut n = 0;
        for ci in 0..self.conns.len() {
            self.flush_or_lose(ci, sink);
            if self.conns[ci].retire_to.is_some() {
                self.try_retire(ci);
            }
            let c = &mut self.conns[ci];
            if c.readable || c.unwatched || (!many && matches!(c.rx, RxState::Frames)) {
                c.readable = false;
                n += self.read_conn(ci, sink);
            }
        }
        while let Some(ci) = self.crossed_in.pop() {
            self.on_crossed(ci);
        }
        for t in self.done.drain(..) {
            sink.on_sent(t);
        }
        if self.bursts > 0 {
            self.end_bursts();
        }
        n
    }

    /// Write what connection `ci` has queued; a connection that fails is lost.
    fn flush_or_lose<S: FrameSink>(&mut self, ci: usize, sink: &mut S) {
        if self.conns[ci].out.is_empty() {
            return;
        }
        if let Err(e) = self.flush(ci) {
            let c = &mut self.conns[ci];
            c.closed = true;
            let peer = c.peer;
            c.drop_output(&mut self.done);
            sink.on_peer_lost(peer, &format!("send failed: {e}"));
        }
    }

    /// Queue the frames posted from now on without writing them, until [`Tcp::release`].
    ///
    /// Every `sendmsg` ends its last TCP segment where its bytes end (Nagle is off), and on
    /// loopback each segment costs the sender about as much as a small message (the receive
    /// path runs in its softirq). A rendezvous Data frame of 64 KiB plus its header is just
    /// over one loopback segment: sent alone it takes two. The engine holds the frames of one
    /// progress pass (clear-to-sends, Data frames) and releases them together, so a stream of
    /// them goes out in full segments.
    fn hold_output(&mut self) {
        self.held = true;
    }

    /// Write what was queued since [`Tcp::hold`] (as much as the sockets take) and report
    /// the tokens of frames that went out whole.
    fn release_output<S: FrameSink>(&mut self, sink: &mut S) {
        self.held = false;
        for ci in 0..self.conns.len() {
            self.flush_or_lose(ci, sink);
            if self.conns[ci].retire_to.is_some() {
                self.try_retire(ci);
            }
        }
        for t in self.done.drain(..) {
            sink.on_sent(t);
        }
    }

    /// Mark the connections the epoll set reports readable (or closed). A full batch may
    /// leave some unreported: then every connection is read this pass.
    fn find_readable(&mut self) {
        const BATCH: usize = 32;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        // SAFETY: `evs` has room for BATCH events; a zero timeout never blocks.
        let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), BATCH as i32, 0) };
        if n < 0 {
            // EINTR and the like: read everything rather than miss data.
            self.conns.iter_mut().for_each(|c| c.readable = true);
            return;
        }
        for e in &evs[..n as usize] {
            if e.u64 == LISTENER_EVENT {
                self.listener_flagged = true;
                continue;
            }
            let ci = e.u64 as usize;
            let Some(c) = self.conns.get_mut(ci) else {
                continue;
            };
            if c.closed {
                // Level triggered: a closed socket would be reported on every pass.
                unwatch(&self.ep, &c.sock);
                continue;
            }
            c.readable = true;
        }
        if n as usize == BATCH {
            self.conns.iter_mut().for_each(|c| c.readable = true);
            self.listener_flagged = true;
        }
    }

    /// Frames or bytes still waiting to be written.
    fn has_output(&self) -> bool {
        self.conns.iter().any(|c| !c.out.is_empty() && !c.closed)
    }
}

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn reaches(&self, peer: Gpid) -> bool {
        matches!(self.addrs.get(peer.idx()), Some(Some(_)))
    }

    fn caps(&self, peer: Gpid) -> Caps {
        if !self.reaches(peer) {
            return Caps::NONE;
        }
        Caps {
            reliable: true,
            ordered: true,
            max_payload: self.frag,
            lanes: self.lanes_of(peer),
            get: false,
            put: false,
            queues: true,
        }
    }

    #[inline]
    fn queued(&self, peer: Gpid) -> usize {
        self.queued_bytes(peer)
    }

    #[inline]
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        self.post(peer, hdr, small, body, token)
            .map_err(|e| SendError::Failed(e.to_string()))
    }

    fn send_any(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        self.post_any(peer, hdr, small, body, token)
    }

    /// Behind queued output the frame would have to be copied: the caller takes the request
    /// path instead, which lends the buffer to the transport.
    #[inline]
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        !self.has_queued(peer) && self.post(peer, hdr, &[], body, Token::NONE).is_ok()
    }

    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        for (peer, why) in std::mem::take(&mut self.faulted) {
            sink.on_peer_lost(peer, &why);
        }
        self.poll(sink)
    }

    fn has_work(&self) -> bool {
        self.has_output()
    }

    fn hold(&mut self) {
        self.hold_output();
    }

    fn release<S: FrameSink>(&mut self, sink: &mut S) {
        self.release_output(sink);
    }

    fn stats(&self) -> super::Stats {
        super::Stats {
            rejected: self.rejected,
            extra_lanes: self.extra_lanes(),
            lane_bytes: self.lane_bytes,
            ..Default::default()
        }
    }

    fn shutdown(&mut self) {
        for c in &mut self.conns {
            let _ = c.sock.shutdown(std::net::Shutdown::Both);
            c.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Placement, Span};

    // The transport never looks into a header; these tests give theirs a meaning of their
    // own: byte 0 the kind (1: a message, 2: a piece of bulk data), a sequence number at 4..8,
    // a key at 8..12 and an offset at 24..32.
    const MSG: u8 = 1;
    const BULK: u8 = 2;

    fn hdr(kind: u8, seq: u32, key: u32, offset: u64) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = kind;
        h[4..8].copy_from_slice(&seq.to_le_bytes());
        h[8..12].copy_from_slice(&key.to_le_bytes());
        h[24..32].copy_from_slice(&offset.to_le_bytes());
        h
    }

    fn key_offset(h: &[u8; HEADER_LEN]) -> (u32, u64) {
        (
            u32::from_le_bytes(h[8..12].try_into().unwrap()),
            u64::from_le_bytes(h[24..32].try_into().unwrap()),
        )
    }

    fn eager(seq: u32) -> [u8; HEADER_LEN] {
        hdr(MSG, seq, 0, 0)
    }

    fn data(key: u32, offset: usize) -> [u8; HEADER_LEN] {
        hdr(BULK, 0, key, offset as u64)
    }

    #[derive(Default)]
    struct Sink {
        frames: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
        /// Bulk pieces with this key are placed here at their offset, awaited whole.
        target: Option<(u32, Vec<u8>)>,
        placed: Vec<(u32, u64, usize)>,
        /// Give large messages a buffer of their own, with this wait: the buffers, and how
        /// many were placed.
        msg_direct: Option<Await>,
        msg_bufs: Vec<Vec<u8>>,
        msg_placed: usize,
        sent: Vec<Token>,
        lost: Vec<String>,
    }

    impl FrameSink for Sink {
        fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            // A bulk piece too small to be offered for placement comes whole: copy it to the
            // target as a protocol layer would.
            if hdr[0] == BULK {
                let (key, offset) = key_offset(hdr);
                if let Some((k, buf)) = self.target.as_mut().filter(|(k, _)| *k == key) {
                    let at = offset as usize;
                    buf[at..at + payload.len()].copy_from_slice(payload);
                    self.placed.push((*k, offset, payload.len()));
                    return;
                }
            }
            self.frames.push((from, *hdr, payload.to_vec()));
        }
        fn place(&mut self, _from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
            match hdr[0] {
                BULK => {
                    let (key, offset) = key_offset(hdr);
                    let (k, buf) = self.target.as_mut()?;
                    if *k != key {
                        return None;
                    }
                    let b = &mut buf[offset as usize..offset as usize + len];
                    Some(Placement {
                        to: unsafe { Span::new(b.as_mut_ptr(), len) },
                        wait: Await::Whole,
                    })
                }
                _ => {
                    let wait = self.msg_direct?;
                    self.msg_bufs.push(vec![0u8; len]);
                    let b = self.msg_bufs.last_mut()?;
                    Some(Placement {
                        to: unsafe { Span::new(b.as_mut_ptr(), len) },
                        wait,
                    })
                }
            }
        }
        fn placed(&mut self, _from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) {
            match hdr[0] {
                BULK => {
                    let (key, offset) = key_offset(hdr);
                    self.placed.push((key, offset, len));
                }
                _ => self.msg_placed += 1,
            }
        }
        fn on_sent(&mut self, t: Token) {
            self.sent.push(t);
        }
        fn on_peer_lost(&mut self, _p: Gpid, why: &str) {
            self.lost.push(why.to_string());
        }
    }

    fn pair() -> (Tcp, Tcp) {
        let mut a = endpoint(Gpid::new(0));
        let mut b = endpoint(Gpid::new(1));
        let (pa, pb) = (a.port(), b.port());
        for t in [&mut a, &mut b] {
            t.set_addr(Gpid::new(0), SocketAddr::from((Ipv4Addr::LOCALHOST, pa)));
            t.set_addr(Gpid::new(1), SocketAddr::from((Ipv4Addr::LOCALHOST, pb)));
        }
        (a, b)
    }

    const KEY: Key = [0x5au8; 32];

    /// Process `me` of a two-process job with the test key.
    fn endpoint(me: Gpid) -> Tcp {
        let mut t = Tcp::new(me, Ipv4Addr::LOCALHOST, true, 0, 1 << 20, 64 << 20, false).unwrap();
        t.start(Keys::Shared(KEY), 2);
        t
    }

    /// A process with more connections than it tries each pass (`READ_ALL_MAX`) reads those
    /// epoll reports, and accepts newcomers when epoll flags the listener: every frame of
    /// every sender arrives, in order, also from senders that connect once the receiver
    /// already reads by epoll.
    #[test]
    fn many_connections_are_read_by_epoll_and_none_is_missed() {
        const N: usize = READ_ALL_MAX + 6;
        let mut v: Vec<Tcp> = (0..N as u32)
            .map(|g| {
                let mut t = Tcp::new(
                    Gpid::new(g),
                    Ipv4Addr::LOCALHOST,
                    true,
                    0,
                    1 << 20,
                    64 << 20,
                    false,
                )
                .unwrap();
                t.start(Keys::Shared(KEY), N);
                t
            })
            .collect();
        let addrs: Vec<SocketAddr> = v
            .iter()
            .map(|t| SocketAddr::from((Ipv4Addr::LOCALHOST, t.port())))
            .collect();
        for t in v.iter_mut() {
            for (g, a) in addrs.iter().enumerate() {
                t.set_addr(Gpid::from_idx(g), *a);
            }
        }
        let mut sinks: Vec<Sink> = (0..N).map(|_| Sink::default()).collect();
        // The first half connect and send; the receiver passes the threshold once they are in.
        let senders = |range: std::ops::Range<usize>, v: &mut Vec<Tcp>| {
            for g in range {
                for i in 0..20u32 {
                    v[g].post(Gpid::new(0), &eager(i), &[g as u8], b"x", Token::NONE)
                        .unwrap();
                }
            }
        };
        senders(1..N / 2 + 1, &mut v);
        let want = |upto: usize| 20 * (upto - 1);
        let t0 = std::time::Instant::now();
        while sinks[0].frames.len() < want(N / 2 + 1) && t0.elapsed().as_secs() < 10 {
            for (t, s) in v.iter_mut().zip(sinks.iter_mut()) {
                t.poll(s);
            }
        }
        senders(N / 2 + 1..N, &mut v);
        while sinks[0].frames.len() < want(N) && t0.elapsed().as_secs() < 10 {
            for (t, s) in v.iter_mut().zip(sinks.iter_mut()) {
                t.poll(s);
            }
        }
        assert!(
            v[0].conns.len() > READ_ALL_MAX,
            "{} connections",
            v[0].conns.len()
        );
        assert_eq!(sinks[0].frames.len(), want(N));
        for g in 1..N {
            let seqs: Vec<[u8; HEADER_LEN]> = sinks[0]
                .frames
                .iter()
                .filter(|(from, _, p)| *from == Gpid::from_idx(g) && p[0] == g as u8)
                .map(|(_, h, _)| *h)
                .collect();
            let expect: Vec<[u8; HEADER_LEN]> = (0..20).map(eager).collect();
            assert_eq!(seqs, expect, "frames of process {g}");
        }
        assert!(sinks.iter().all(|s| s.lost.is_empty()));
    }

    #[test]
    fn frames_both_ways_in_order() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        for i in 0..100u32 {
            let body = vec![i as u8; (i as usize) * 37];
            a.post(Gpid::new(1), &eager(i), b"sm", &body, Token::NONE)
                .unwrap();
        }
        // b also connects to a (crossing connections) and sends back.
        b.post(Gpid::new(0), &eager(7), &[], b"back", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while (sb.frames.len() < 100 || sa.frames.is_empty()) && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        assert_eq!(sb.frames.len(), 100);
        for (i, (from, f, p)) in sb.frames.iter().enumerate() {
            assert_eq!(*from, Gpid::new(0));
            assert_eq!(*f, eager(i as u32));
            assert_eq!(p.len(), 2 + i * 37);
        }
        assert_eq!(sa.frames[0].2, b"back");
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
    }

    /// Open lane-0 connections between `t` and `peer`.
    fn open_conns(t: &Tcp, peer: Gpid) -> usize {
        t.conns
            .iter()
            .filter(|c| c.peer == peer && c.lane == 0 && !c.closed)
            .count()
    }

    /// Both processes open a connection at once and keep sending, large frames among the
    /// small so that some wait in the queues while the connections change: the one opened
    /// by the higher gpid gives way, every frame arrives once and in order both ways, and
    /// one connection is left, carrying both directions.
    #[test]
    fn crossed_connections_become_one_and_keep_the_order() {
        let (mut a, mut b) = pair();
        let (ga, gb) = (Gpid::new(0), Gpid::new(1));
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        let body = |i: u32| {
            let len = match i {
                0..20 => 100 << 10,
                _ if i % 50 == 7 => 300 << 10,
                _ => i as usize % 90,
            };
            vec![i as u8; len]
        };
        const N: u32 = 400;
        let (mut na, mut nb) = (0u32, 0u32);
        // Both connect before either accepted; b's frames wait for its handshake.
        a.post(gb, &eager(na), &[], &body(na), Token::NONE).unwrap();
        na += 1;
        for _ in 0..20 {
            b.post(ga, &eager(nb), &[], &body(nb), Token::NONE).unwrap();
            nb += 1;
        }
        let ours = b.send_conn[0].unwrap();
        assert!(a.conns[a.send_conn[1].unwrap()].dialed && b.conns[ours].dialed);
        // b's handshake ends, its frames go out on its connection, which it then retires as
        // soon as the last byte is written; what it sends next goes on a's, where a finds
        // it, in its pass, before the rest of the retired one's (a's own connection comes
        // first) and must hold it back.
        let t0 = std::time::Instant::now();
        while b.send_conn[0] == Some(ours) && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        assert!(!b.conns[b.send_conn[0].unwrap()].dialed);
        assert!(
            sa.frames.len() < 20,
            "{} frames read before the switch",
            sa.frames.len()
        );
        for _ in 0..20 {
            b.post(ga, &eager(nb), &[], &body(nb), Token::NONE).unwrap();
            nb += 1;
        }
        let t0 = std::time::Instant::now();
        while (sa.frames.len() < N as usize || sb.frames.len() < N as usize)
            && t0.elapsed().as_secs() < 20
        {
            for _ in 0..3 {
                if na < N {
                    a.post(gb, &eager(na), &[], &body(na), Token::NONE).unwrap();
                    na += 1;
                }
                if nb < N {
                    b.post(ga, &eager(nb), &[], &body(nb), Token::NONE).unwrap();
                    nb += 1;
                }
            }
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        for (s, from) in [(&sa, gb), (&sb, ga)] {
            assert_eq!(s.frames.len(), N as usize);
            for (i, (f, h, p)) in s.frames.iter().enumerate() {
                assert_eq!((*f, *h), (from, eager(i as u32)));
                assert_eq!(*p, body(i as u32));
            }
        }
        assert!(
            sa.lost.is_empty() && sb.lost.is_empty(),
            "{:?} {:?}",
            sa.lost,
            sb.lost
        );
        // One connection each way: the higher gpid sends on the one the lower opened.
        assert_eq!((open_conns(&a, gb), open_conns(&b, ga)), (1, 1));
        assert!(a.conns[a.send_conn[1].unwrap()].dialed);
        assert!(!b.conns[b.send_conn[0].unwrap()].dialed);
        // The retired connection's end was read as an end, not as a lost peer; a peer that
        // goes now is still noticed.
        drop(b);
        let t0 = std::time::Instant::now();
        while sa.lost.is_empty() && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
        }
        assert_eq!(sa.lost, vec!["connection closed".to_string()]);
    }

    /// A CROSSED record where the connections are not crossed (the receiver opened none of
    /// its own) changes nothing: frames before and after it arrive in order on the one
    /// connection.
    #[test]
    fn a_crossed_record_without_crossed_connections_is_ignored() {
        let (mut a, mut b) = pair();
        let (ga, gb) = (Gpid::new(0), Gpid::new(1));
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        a.post(gb, &eager(0), &[], b"x", Token::NONE).unwrap();
        let x = a.send_conn[1].unwrap();
        let mut rec = Out::new(&[CROSSED; HEADER_LEN], &[], &[], Token::NONE);
        rec.head[..4].copy_from_slice(&RECORD.to_le_bytes());
        a.conns[x].queued += rec.total();
        a.conns[x].out.push_back(rec);
        a.post(gb, &eager(1), &[], b"y", Token::NONE).unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| s.frames.len() >= 2);
        b.post(ga, &eager(2), &[], b"z", Token::NONE).unwrap();
        run(&mut b, &mut a, &mut sb, &mut sa, |s| !s.frames.is_empty());
        let got: Vec<_> = sb.frames.iter().map(|f| f.1).collect();
        assert_eq!(got, vec![eager(0), eager(1)]);
        assert_eq!(sa.frames[0].1, eager(2));
        assert_eq!((open_conns(&a, gb), open_conns(&b, ga)), (1, 1));
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
    }

    /// A connection that breaks with frames still queued reports their tokens all the same
    /// (the bodies are the caller's again): a send whose last pieces were queued there
    /// completes instead of waiting for ever (`p2p/lanefault` hung that way now and then).
    #[test]
    fn frames_dropped_with_a_broken_connection_report_their_tokens() {
        let (mut a, mut b) = pair();
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        let big = vec![7u8; 16 << 20];
        a.post(Gpid::new(1), &eager(0), &[], b"x", Token::NONE)
            .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| !s.frames.is_empty());
        // b stops reading: most of 16 MiB stays queued at a.
        for t in 1..4 {
            a.post(Gpid::new(1), &eager(t), &[], &big, Token(t))
                .unwrap();
        }
        let ci = a.send_conn[1].unwrap();
        assert!(!a.conns[ci].out.is_empty());
        a.reset(ci);
        a.poll(&mut sa);
        let mut sent = sa.sent.clone();
        sent.sort_by_key(|t| t.0);
        assert_eq!(sent, vec![Token(1), Token(2), Token(3)]);
        assert_eq!(a.conns[ci].queued, 0);
    }

    #[test]
    fn big_data_is_placed_directly_and_tokens_reported() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        let n = 8 << 20;
        let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
        sb.target = Some((42, vec![0u8; n]));
        let half = n / 2;
        let d0 = data(42, 0);
        let d1 = data(42, half);
        let r0 = a
            .post(Gpid::new(1), &d0, &[], &src[..half], Token(1))
            .unwrap();
        let r1 = a
            .post(Gpid::new(1), &d1, &[], &src[half..], Token(2))
            .unwrap();
        let lowat = poll_lowat(&mut a, &mut b, &mut sa, &mut sb, |s| s.placed.len() >= 2);
        assert_eq!(sb.placed, vec![(42, 0, half), (42, half as u64, n - half)]);
        // The rest of a payload was awaited whole (up to the cap), and afterwards the socket
        // reports every byte again.
        assert!(lowat > 1 && lowat <= LOWAT_MAX, "{lowat}");
        for c in &b.conns {
            assert_eq!(c.lowat, 1);
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: reading an int socket option of an open socket into `v`.
            let rc = unsafe {
                libc::getsockopt(
                    c.sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVLOWAT,
                    (&mut v as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            assert_eq!((rc, v), (0, 1));
        }
        assert!(sb.target.as_ref().unwrap().1 == src);
        // Every Pending token is reported exactly once.
        let mut expect = vec![];
        if r0 == Sent::Pending {
            expect.push(Token(1));
        }
        if r1 == Sent::Pending {
            expect.push(Token(2));
        }
        a.poll(&mut sa);
        assert_eq!(sa.sent, expect);
    }

    /// The highest receive low-water mark `b` set while polling until `done`.
    fn poll_lowat(
        a: &mut Tcp,
        b: &mut Tcp,
        sa: &mut Sink,
        sb: &mut Sink,
        done: impl Fn(&Sink) -> bool,
    ) -> usize {
        let t0 = std::time::Instant::now();
        let mut lowat = 1;
        while !done(sb) && t0.elapsed().as_secs() < 20 {
            a.poll(sa);
            b.poll(sb);
            lowat = b.conns.iter().map(|c| c.lowat).fold(lowat, usize::max);
        }
        lowat
    }

    #[test]
    fn placed_payloads_are_awaited_whole_or_read_as_they_come_as_asked() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink {
            msg_direct: Some(Await::Whole),
            ..Sink::default()
        };
        let n = 4 << 20;
        let src: Vec<u8> = (0..n).map(|i| (i * 5 + 1) as u8).collect();
        a.post(Gpid::new(1), &eager(0), &[], b"ping", Token::NONE)
            .unwrap();
        let r = a
            .post(Gpid::new(1), &eager(1), &[], &src, Token(1))
            .unwrap();
        let lowat = poll_lowat(&mut a, &mut b, &mut sa, &mut sb, |s| s.msg_placed == 1);
        assert_eq!(sb.msg_placed, 1);
        assert!(sb.msg_bufs[0] == src);
        assert!(lowat > 1 && lowat <= LOWAT_MAX, "{lowat}");
        if r == Sent::Pending {
            while sa.sent.is_empty() {
                a.poll(&mut sa);
            }
        }
        // Asked to read it as it comes: the low-water mark stays at one byte.
        sb.msg_direct = Some(Await::AsItComes);
        for c in &mut b.conns {
            c.lowat = 1;
        }
        a.post(Gpid::new(1), &eager(2), &[], &src, Token(2))
            .unwrap();
        let lowat = poll_lowat(&mut a, &mut b, &mut sa, &mut sb, |s| s.msg_placed == 2);
        assert_eq!(sb.msg_placed, 2);
        assert!(sb.msg_bufs[1] == src);
        assert_eq!(lowat, 1);
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
    }

    #[test]
    fn queued_bytes_count_what_is_not_written_yet() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        assert_eq!(a.queued_bytes(Gpid::new(1)), 0);
        let body = vec![3u8; 32 << 20];
        let r = a
            .post(Gpid::new(1), &eager(0), &[], &body, Token(1))
            .unwrap();
        // More than the kernel takes before the receiver reads.
        assert_eq!(r, Sent::Pending);
        let q = a.queued_bytes(Gpid::new(1));
        assert!(q > 0 && q <= body.len() + PREFIX, "{q}");
        let t0 = std::time::Instant::now();
        while sb.frames.is_empty() && t0.elapsed().as_secs() < 20 {
            a.poll(&mut sa);
            b.poll(&mut sb);
            assert!(a.queued_bytes(Gpid::new(1)) <= q);
            let c = &a.conns[a.send_conn[1].unwrap()];
            let sum: usize = c.out.iter().map(|o| o.total() - o.off).sum();
            assert_eq!(c.queued, sum);
        }
        assert_eq!(sb.frames[0].2.len(), body.len());
        assert_eq!(a.queued_bytes(Gpid::new(1)), 0);
    }

    #[test]
    fn after_a_direct_payload_the_next_header_is_read_alone() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        let n = 4 << 20;
        let src: Vec<u8> = (0..n).map(|i| (i * 13 + 1) as u8).collect();
        sb.target = Some((9, vec![0u8; n]));
        let data = |offset: usize| data(9, offset);
        let run = |a: &mut Tcp, b: &mut Tcp, sa: &mut Sink, sb: &mut Sink, placed, frames| {
            let t0 = std::time::Instant::now();
            while (sb.placed.len() < placed || sb.frames.len() < frames)
                && t0.elapsed().as_secs() < 20
            {
                a.poll(sa);
                b.poll(sb);
            }
        };
        // Two big Data frames back to back and a small one: only the first one's payload
        // can have come through the connection buffer (at most one read's worth), the
        // others were read header first.
        let cuts = [0, n / 4, n / 2, n / 2 + 100, n];
        for w in cuts.windows(2).take(3) {
            a.post(
                Gpid::new(1),
                &data(w[0]),
                &[],
                &src[w[0]..w[1]],
                Token::NONE,
            )
            .unwrap();
        }
        run(&mut a, &mut b, &mut sa, &mut sb, 3, 0);
        assert!(
            b.relayed <= READ_CHUNK as u64,
            "relayed {} bytes",
            b.relayed
        );
        // An ordinary frame in between, then a big one again: order and bytes survive.
        a.post(Gpid::new(1), &eager(3), &[], b"between", Token::NONE)
            .unwrap();
        a.post(
            Gpid::new(1),
            &data(cuts[3]),
            &[],
            &src[cuts[3]..],
            Token::NONE,
        )
        .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, 4, 1);
        let lens: Vec<usize> = sb.placed.iter().map(|p| p.2).collect();
        assert_eq!(lens, vec![n / 4, n / 4, 100, n / 2 - 100]);
        assert_eq!(sb.frames.len(), 1);
        assert_eq!(sb.frames[0].2, b"between");
        assert!(sb.target.as_ref().unwrap().1 == src);
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
    }

    #[test]
    fn held_frames_wait_for_release_and_keep_their_order() {
        let (mut a, mut b) = pair();
        let mut sa = Sink::default();
        let mut sb = Sink::default();
        // Connect first, so that holding is all that keeps the frames back.
        a.post(Gpid::new(1), &eager(0), &[], b"hello", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while sb.frames.is_empty() && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        let big = vec![5u8; 3 << 20];
        a.hold();
        for i in 1..4u32 {
            let r = a.post(
                Gpid::new(1),
                &eager(i),
                &[],
                &big[..(i as usize) << 20],
                Token(i),
            );
            assert_eq!(r.unwrap(), Sent::Pending, "a held frame is not written");
        }
        for _ in 0..100 {
            b.poll(&mut sb);
        }
        assert_eq!(sb.frames.len(), 1, "nothing arrives while held");
        a.release(&mut sa);
        let t0 = std::time::Instant::now();
        while (sb.frames.len() < 4 || sa.sent.len() < 3) && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        let lens: Vec<usize> = sb.frames.iter().map(|f| f.2.len()).collect();
        assert_eq!(lens, vec![5, 1 << 20, 2 << 20, 3 << 20]);
        assert_eq!(sa.sent, vec![Token(1), Token(2), Token(3)]);
        // A frame whose body is only lent for the call (no token) is not held: it goes at
        // once, after what was held before it.
        a.hold();
        assert_eq!(
            a.post(Gpid::new(1), &eager(4), &[], b"held", Token(4))
                .unwrap(),
            Sent::Pending
        );
        assert_eq!(
            a.post(Gpid::new(1), &eager(5), &[], b"lent", Token::NONE)
                .unwrap(),
            Sent::Done
        );
        let t0 = std::time::Instant::now();
        while sb.frames.len() < 6 && t0.elapsed().as_secs() < 10 {
            b.poll(&mut sb);
        }
        assert_eq!(sb.frames[4].2, b"held");
        assert_eq!(sb.frames[5].2, b"lent");
        a.release(&mut sa);
        assert_eq!(sa.sent.last(), Some(&Token(4)));
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
    }

    /// Drive both ends until `done`, at most 10 s.
    fn run(a: &mut Tcp, b: &mut Tcp, sa: &mut Sink, sb: &mut Sink, done: impl Fn(&Sink) -> bool) {
        let t0 = std::time::Instant::now();
        while !done(sb) && t0.elapsed().as_secs() < 10 {
            a.poll(sa);
            b.poll(sb);
        }
    }

    #[test]
    fn forged_and_garbage_connections_are_refused_and_counted() {
        use std::io::{Read, Write};
        let (mut a, mut b) = pair();
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        let at = ("127.0.0.1", b.port());
        let accept = |b: &mut Tcp, sb: &mut Sink| {
            for _ in 0..200 {
                b.accept_all();
                b.poll(sb);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        // Garbage instead of a hello.
        let mut g = std::net::TcpStream::connect(at).unwrap();
        g.write_all(&[0xffu8; 64]).unwrap();
        // A hello naming a process that is not in the job.
        let mut h = std::net::TcpStream::connect(at).unwrap();
        let stranger = Hello {
            gpid: Gpid::new(7),
            lane: 0,
            max_frame: 1 << 20,
            nonce: [1; 16],
        };
        h.write_all(&stranger.encode()).unwrap();
        // A hello claiming to be process 0, then a proof made without the key, then a frame.
        let mut f = std::net::TcpStream::connect(at).unwrap();
        let forged = Hello {
            gpid: Gpid::new(0),
            lane: 0,
            max_frame: 1 << 20,
            nonce: [2; 16],
        };
        f.write_all(&forged.encode()).unwrap();
        accept(&mut b, &mut sb);
        let mut challenge = [0u8; CHALLENGE_LEN];
        f.read_exact(&mut challenge).unwrap();
        let (_, bad) = hello::check_challenge(&[0u8; 32], &forged.encode(), Gpid::new(1), &{
            hello::challenge(&[0u8; 32], &forged.encode(), Gpid::new(1), 1 << 20, [3; 16])
        })
        .unwrap();
        f.write_all(&bad).unwrap();
        let mut frame = (8u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&eager(0));
        frame.extend_from_slice(b"injected");
        let _ = f.write_all(&frame);
        accept(&mut b, &mut sb);
        assert_eq!(b.rejected, 3, "garbage, stranger and forgery are refused");
        assert!(
            sb.frames.is_empty() && sb.lost.is_empty(),
            "nothing reached the sink"
        );
        // The real process 0 still gets through, and what it sends arrives.
        a.post(Gpid::new(1), &eager(0), &[], b"real", Token::NONE)
            .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| !s.frames.is_empty());
        assert_eq!(sb.frames.len(), 1);
        assert_eq!(sb.frames[0].2, b"real");
        assert!(sa.lost.is_empty() && sb.lost.is_empty());
        drop((g, h, f));
        // A second authenticated connection from an already connected process is refused, and
        // its closing does not lose the real one.
        let mut dup = endpoint(Gpid::new(0));
        dup.set_addr(
            Gpid::new(1),
            SocketAddr::from((Ipv4Addr::LOCALHOST, b.port())),
        );
        let mut sd = Sink::default();
        dup.post(Gpid::new(1), &eager(1), &[], b"duplicate", Token::NONE)
            .unwrap();
        for _ in 0..200 {
            dup.poll(&mut sd);
            b.poll(&mut sb);
            b.accept_all();
        }
        assert_eq!(b.rejected, 4);
        drop(dup);
        for _ in 0..100 {
            b.poll(&mut sb);
        }
        assert!(sb.lost.is_empty(), "{:?}", sb.lost);
        assert_eq!(sb.frames.len(), 1, "the duplicate delivered nothing");
    }

    #[test]
    fn pair_keys_authenticate_and_an_impostor_key_pair_is_refused() {
        use crate::runtime::keys::Pairs;
        let mut ka = Pairs::new(Gpid::new(0), "job").unwrap();
        let mut kb = Pairs::new(Gpid::new(1), "job").unwrap();
        ka.set_peer(Gpid::new(1), kb.public());
        kb.set_peer(Gpid::new(0), ka.public());
        let open = |me: Gpid, k: Pairs| {
            let mut t =
                Tcp::new(me, Ipv4Addr::LOCALHOST, true, 0, 1 << 20, 64 << 20, false).unwrap();
            t.start(Keys::Pairs(k), 2);
            t
        };
        let (mut a, mut b) = (open(Gpid::new(0), ka), open(Gpid::new(1), kb.clone()));
        let (pa, pb) = (a.port(), b.port());
        for t in [&mut a, &mut b] {
            t.set_addr(Gpid::new(0), SocketAddr::from((Ipv4Addr::LOCALHOST, pa)));
            t.set_addr(Gpid::new(1), SocketAddr::from((Ipv4Addr::LOCALHOST, pb)));
        }
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        a.post(Gpid::new(1), &eager(0), &[], b"real", Token::NONE)
            .unwrap();
        b.post(Gpid::new(0), &eager(1), &[], b"back", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while (sb.frames.is_empty() || sa.frames.is_empty()) && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        assert_eq!(sb.frames.len(), 1);
        assert_eq!(sb.frames[0].2, b"real");
        assert_eq!(sa.frames[0].2, b"back");
        // An impostor with a key pair of its own claims to be process 0: it knows process 1's
        // public key, but process 1 derives the pair's key from process 0's, so neither side's
        // proof passes; nothing reaches process 1 and the real connection stays.
        let mut fake = Pairs::new(Gpid::new(0), "job").unwrap();
        fake.set_peer(Gpid::new(1), kb.public());
        let mut m = open(Gpid::new(0), fake);
        m.set_addr(Gpid::new(1), SocketAddr::from((Ipv4Addr::LOCALHOST, pb)));
        let mut sm = Sink::default();
        m.post(Gpid::new(1), &eager(2), &[], b"forged", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while sm.lost.is_empty() && t0.elapsed().as_secs() < 10 {
            m.poll(&mut sm);
            b.poll(&mut sb);
            b.accept_all();
        }
        assert!(sm.lost[0].contains("handshake"), "{:?}", sm.lost);
        // The impostor gives up (its connection closes): process 1 counts the refusal.
        drop(m);
        let t0 = std::time::Instant::now();
        while b.rejected == 0 && t0.elapsed().as_secs() < 10 {
            b.poll(&mut sb);
            b.accept_all();
        }
        assert_eq!(b.rejected, 1);
        assert_eq!(sb.frames.len(), 1, "the impostor delivered nothing");
        assert!(sb.lost.is_empty() && sa.lost.is_empty());
        // A hello from a process whose public key we do not know is refused too.
        let mut k2 = Pairs::new(Gpid::new(1), "job").unwrap();
        k2.set_peer(
            Gpid::new(0),
            Pairs::new(Gpid::new(0), "job").unwrap().public(),
        );
        let mut c = open(Gpid::new(1), k2);
        let mut sc = Sink::default();
        c.set_addr(Gpid::new(0), SocketAddr::from((Ipv4Addr::LOCALHOST, pa)));
        c.post(Gpid::new(0), &eager(3), &[], b"stranger", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while sc.lost.is_empty() && t0.elapsed().as_secs() < 10 {
            c.poll(&mut sc);
            a.poll(&mut sa);
            a.accept_all();
        }
        assert!(sc.lost[0].contains("handshake"), "{:?}", sc.lost);
        assert_eq!(sa.frames.len(), 1);
    }

    #[test]
    fn a_peer_that_fails_the_handshake_is_lost_with_a_reason() {
        // Our card says process 1 listens here, but whoever answers does not hold the key.
        let mut a = endpoint(Gpid::new(0));
        let mut b = Tcp::new(
            Gpid::new(1),
            Ipv4Addr::LOCALHOST,
            true,
            0,
            1 << 20,
            64 << 20,
            false,
        )
        .unwrap();
        b.start(Keys::Shared([1u8; 32]), 2);
        a.set_addr(
            Gpid::new(1),
            SocketAddr::from((Ipv4Addr::LOCALHOST, b.port())),
        );
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        a.post(Gpid::new(1), &eager(0), &[], b"secret", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while sa.lost.is_empty() && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
            b.accept_all();
        }
        assert!(sa.lost[0].contains("handshake"), "{:?}", sa.lost);
        drop(a);
        let t0 = std::time::Instant::now();
        while b.rejected == 0 && t0.elapsed().as_secs() < 10 {
            b.accept_all();
        }
        assert!(sb.frames.is_empty(), "nothing was written before the proof");
        assert_eq!(b.rejected, 1);
    }

    #[test]
    fn bulk_data_is_striped_over_lanes_and_lands_whole() {
        let (mut a, mut b) = pair();
        a.set_lanes(Mode::Fixed(4), Vec::new());
        assert_eq!(a.caps(Gpid::new(1)).lanes, 4);
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        let n = 16 << 20;
        let src: Vec<u8> = (0..n).map(|i| (i * 11 + 5) as u8).collect();
        sb.target = Some((3, vec![0u8; n]));
        // An ordered frame first (lane 0), then the data in 256 KiB pieces on any lane, then
        // another ordered frame: the two ordered ones keep their order.
        a.post(Gpid::new(1), &eager(0), &[], b"first", Token::NONE)
            .unwrap();
        let piece = 256 << 10;
        // The first piece opens the lanes; wait until they are all up.
        a.send_any(Gpid::new(1), &data(3, 0), &[], &src[..piece], Token::NONE)
            .unwrap();
        let up = |a: &Tcp| {
            a.peer_lanes[1].as_ref().is_some_and(|pl| {
                pl.conns.len() == 4
                    && pl
                        .conns
                        .iter()
                        .all(|c| c.is_some_and(|ci| a.conns[ci].connecting.is_none()))
            })
        };
        let t0 = std::time::Instant::now();
        while !up(&a) && t0.elapsed().as_secs() < 10 {
            a.poll(&mut sa);
            b.poll(&mut sb);
            b.accept_all();
        }
        assert!(up(&a), "four lanes open");
        let mut off = piece;
        let t0 = std::time::Instant::now();
        while off < n && t0.elapsed().as_secs() < 20 {
            match a.send_any(
                Gpid::new(1),
                &data(3, off),
                &[],
                &src[off..off + piece],
                Token::NONE,
            ) {
                Ok(_) => off += piece,
                Err(SendError::NotNow) => {
                    a.poll(&mut sa);
                    b.poll(&mut sb);
                    b.accept_all();
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        a.post(Gpid::new(1), &eager(1), &[], b"last", Token::NONE)
            .unwrap();
        let t0 = std::time::Instant::now();
        while (sb.placed.iter().map(|p| p.2).sum::<usize>() < n || sb.frames.len() < 2)
            && t0.elapsed().as_secs() < 20
        {
            a.poll(&mut sa);
            b.poll(&mut sb);
            b.accept_all();
        }
        assert!(
            sb.target.as_ref().unwrap().1 == src,
            "every byte where it belongs"
        );
        assert_eq!(sb.frames.len(), 2);
        assert_eq!(sb.frames[0].2, b"first");
        assert_eq!(sb.frames[1].2, b"last");
        let st = a.stats();
        assert_eq!(st.extra_lanes, 3, "three lanes beside the first");
        let used = st.lane_bytes.iter().filter(|b| **b > 0).count();
        assert!(
            used >= 2,
            "data went over several lanes: {:?}",
            &st.lane_bytes[..4]
        );
        assert_eq!(st.lane_bytes.iter().sum::<u64>(), n as u64);
        assert!(
            sa.lost.is_empty() && sb.lost.is_empty(),
            "{:?} {:?}",
            sa.lost,
            sb.lost
        );
    }

    #[test]
    fn auto_keeps_one_lane_on_loopback() {
        let (mut a, mut b) = pair();
        a.set_lanes(Mode::Auto { max: 16 }, Vec::new());
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        let n = 8 << 20;
        let src = vec![9u8; n];
        sb.target = Some((4, vec![0u8; n]));
        // A first exchange opens the connection, so that the burst measures an open lane.
        a.post(Gpid::new(1), &eager(0), &[], b"hello", Token::NONE)
            .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| !s.frames.is_empty());
        for off in (0..n).step_by(1 << 20) {
            // One lane: nothing waits in the engine.
            a.send_any(
                Gpid::new(1),
                &data(4, off),
                &[],
                &src[off..off + (1 << 20)],
                Token::NONE,
            )
            .unwrap();
        }
        let t0 = std::time::Instant::now();
        while (sb.placed.iter().map(|p| p.2).sum::<usize>() < n || a.bursts > 0)
            && t0.elapsed().as_secs() < 20
        {
            a.poll(&mut sa);
            b.poll(&mut sb);
        }
        assert_eq!(a.bursts, 0, "the burst ended");
        let pl = a.peer_lanes[1].as_ref().unwrap();
        assert_eq!(pl.ctl.target(), 1);
        assert!(pl.ctl.settled(), "a short link settles at once");
        assert_eq!(a.stats().extra_lanes, 0);
    }

    #[test]
    fn a_frame_above_the_limit_is_refused_on_both_sides() {
        let (mut a, mut b) = pair();
        let (mut sa, mut sb) = (Sink::default(), Sink::default());
        b.frame_max = 1 << 16;
        a.post(Gpid::new(1), &eager(0), &[], b"hello", Token::NONE)
            .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| !s.frames.is_empty());
        let ci = a.send_conn[1].unwrap();
        // The sender knows the limit from the handshake...
        assert_eq!(a.conns[ci].peer_max, 1 << 16);
        let big = vec![1u8; (1 << 16) + 1];
        assert!(a
            .post(Gpid::new(1), &eager(1), &[], &big, Token::NONE)
            .is_err());
        // ...and a sender that ignores it loses the connection.
        a.conns[ci].peer_max = 1 << 20;
        a.post(Gpid::new(1), &eager(1), &[], &big, Token::NONE)
            .unwrap();
        run(&mut a, &mut b, &mut sa, &mut sb, |s| !s.lost.is_empty());
        assert!(sb.lost[0].contains("tcp_frame_max"), "{:?}", sb.lost);
    }
}

/// Entry points for the fuzz targets in `fuzz/` (built with `--cfg fuzzing` by cargo-fuzz).
#[cfg(fuzzing)]
pub mod fuzzing {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    /// A sink that places large payloads when the header's first byte is odd, and checks that
    /// the transport never hands it more than the frame limit.
    struct Sink {
        bufs: Vec<Vec<u8>>,
        limit: usize,
    }

    impl FrameSink for Sink {
        fn on_frame(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            assert!(payload.len() <= self.limit);
        }
        fn place(
            &mut self,
            _from: Gpid,
            hdr: &[u8; HEADER_LEN],
            len: usize,
        ) -> Option<super::super::Placement> {
            assert!(len <= self.limit);
            if hdr[0] & 1 == 0 {
                return None;
            }
            let wait = if hdr[1] & 1 == 1 {
                Await::Whole
            } else {
                Await::AsItComes
            };
            self.bufs.push(vec![0u8; len]);
            let b = self.bufs.last_mut()?;
            // SAFETY: the buffer lives in `bufs` until the sink is dropped, after the transport.
            let to = unsafe { super::super::Span::new(b.as_mut_ptr(), len) };
            Some(super::super::Placement { to, wait })
        }
    }

    /// Feed `bytes` to an authenticated connection's stream parser as if a peer wrote them.
    pub fn stream(bytes: &[u8]) {
        let limit = 1 << 16;
        let mut t = Tcp::new(
            Gpid::new(0),
            Ipv4Addr::LOCALHOST,
            true,
            0,
            limit,
            limit,
            false,
        )
        .expect("a listener on loopback");
        t.start(Keys::Shared([0; 32]), 2);
        let (mine, mut theirs) = UnixStream::pair().expect("a socket pair");
        mine.set_nonblocking(true).expect("nonblocking");
        let sock = Socket::from(std::os::fd::OwnedFd::from(mine));
        let ci = t.add_conn(sock, Gpid::new(1), 0, None);
        theirs.set_nonblocking(true).expect("nonblocking");
        let mut sink = Sink {
            bufs: Vec::new(),
            limit,
        };
        let mut at = 0;
        for _ in 0..10_000 {
            if at < bytes.len() {
                match theirs.write(&bytes[at..]) {
                    Ok(n) => at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
                if at == bytes.len() {
                    let _ = theirs.shutdown(std::net::Shutdown::Write);
                }
            }
            t.read_conn(ci, &mut sink);
            if t.conns[ci].closed {
                break;
            }
        }
    }
}
