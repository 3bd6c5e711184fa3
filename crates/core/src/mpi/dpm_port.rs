//! Dynamic processes, part two: ports (MPI_Open_port, MPI_Close_port), MPI_Comm_accept,
//! MPI_Comm_connect and MPI_Comm_join.
//!
//! # Ports
//!
//! A port is a TCP listener that MPI_Open_port opens on the address of the process's TCP
//! transport, with a secret of 32 random bytes. Its name is printable and works from any host
//! that reaches that address:
//!
//! ```text
//! protean-port:<secret, 64 hex digits>:<ip>:<port>        (IPv6: ...:[<ip>]:<port>)
//! ```
//!
//! The name is a capability: whoever holds it may connect. It travels through the
//! application (or MPI_Publish_name), never over the port's own connection.
//!
//! # The roots' connection
//!
//! The root of MPI_Comm_connect connects to the port; the root of MPI_Comm_accept takes
//! connections from the listener (only inside MPI_Comm_accept: a connection made earlier
//! waits in the kernel's backlog). Both prove the secret without sending it, as the TCP
//! transport's handshake does with the job key (`transport::tcp::hello`):
//!
//! ```text
//! connector -> acceptor  "PPT1", nonce_c (16 B)
//! acceptor  -> connector "PPT1", nonce_a (16 B), HMAC-SHA256(secret, "accept"  | nonce_c | nonce_a)
//! connector -> acceptor  HMAC-SHA256(secret, "connect" | nonce_c | nonce_a)
//! ```
//!
//! A connection that fails the handshake is closed and the acceptor goes on waiting; a
//! connector that gets no valid answer fails with MPI_ERR_PORT. Then each side proves which
//! job it belongs to, HMAC(job key, "job" | role | nonce_c | nonce_a), and compares with what
//! its own key gives: equal keys mean one mpirun (spawned jobs adopt their parents' key), so
//! one space of global process ids and TCP connections that authenticate with that key, and
//! the two groups join as a spawn's do: each root sends its group (leader rank and every
//! process's `gpid:fd:card`, gathered over `comm`), every process adds the other group to its
//! table (`Engine::add_peers`: shared memory on one host, TCP otherwise), and after both
//! groups said they are ready, the intercommunicator is made from the two groups
//! (`cm::op_intercomm_from_groups`, the tag drawn from both nonces). Different keys mean
//! independent jobs (separate mpiruns), whose process ids overlap: each side gives the other's
//! processes aliases (`dpm::Foreign`), both derive a key for the pair of jobs from the port's
//! secret and both nonces, their TCP connections prove that key, and the accepting side
//! connects to every process of the other job at once so that a dead job is an error, not a
//! hang (docs/architecture.md).
//!
//! # Timeouts
//!
//! MPI_Comm_connect gives up after `connect_timeout` seconds (a port nobody accepts on, an
//! owner that never calls MPI_Comm_accept) and at once on a port that is not open;
//! MPI_Comm_accept waits for `accept_timeout` seconds (0, the default: for ever, as the
//! standard describes). The info key `timeout` (seconds) of either call overrides them.
//! Every wait keeps this process's progress going.
//!
//! # MPI_Comm_join
//!
//! Over a socket the application connected, there is no port secret: both sides send a nonce
//! and an ephemeral X25519 public key (`PJN2`, nonce, key), the larger nonce plays the
//! acceptor, and the rest is as above with MPI_COMM_SELF as the group. Two processes of one
//! mpirun recognise each other by the job key's proof; two independent jobs use as the link's
//! secret `HMAC(X25519(ours, theirs), "join" | nonce_c | nonce_a)`, from which the pair of
//! jobs' key derives as for a port.
//!
//! The trust model is the socket's: MPI_Comm_join trusts whoever is at the other end of the
//! descriptor the application hands it (as in other MPIs, which send their port names over it
//! in the clear). The exchange keeps the pair key from anyone who only observes the socket,
//! and no one outside the two processes can then prove it to their TCP transports; it does
//! not authenticate the other end, so an active attacker on the path of an unprotected
//! socket could stand in the middle. An application that needs more protects its socket
//! (TLS, a local socket) or uses MPI_Comm_connect/MPI_Comm_accept, whose port name is a
//! capability.

use crate::ids::CommId;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::Mac;
use protean_pmi::proof::hmac;

use crate::error::{ErrorClass, MpiError, Result};
use crate::mpi::cm;
use crate::mpi::dpm::{parse_peer, peer_entry, Caller, Foreign};
use crate::mpi::global::{self, with};
use crate::runtime::bootstrap::{hex, unhex};
use crate::transport::Gpid;

const PREFIX: &str = "protean-port:";
const MAGIC: &[u8; 4] = b"PPT1";
const ACCEPT: &[u8] = b"protean port accept v1";
const CONNECT: &[u8] = b"protean port connect v1";
const JOB: &[u8] = b"protean port job v1";
const PAIR: &[u8] = b"protean port pair v1";
/// MPI_Comm_join's hello (magic, nonce, X25519 public key) and the label of its secret.
const JOIN_MAGIC: &[u8; 4] = b"PJN2";
const JOIN_SECRET: &[u8] = b"protean join x25519 v1";
/// How long an acceptor gives one connection to complete the handshake.
const STEP: Duration = Duration::from_secs(10);
/// The largest group description a root accepts from the other side.
const MAX_BODY: usize = 64 << 20;

struct Port {
    name: String,
    listener: TcpListener,
    secret: [u8; 32],
}

/// The ports this process opened.
static PORTS: Mutex<Vec<Port>> = Mutex::new(Vec::new());

fn port_err(msg: impl Into<String>) -> MpiError {
    MpiError::new(ErrorClass::Port, msg.into())
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).map_err(|e| {
        MpiError::new(
            ErrorClass::Other,
            format!("cannot draw random bytes from the kernel: {e}"),
        )
    })?;
    Ok(b)
}

/// MPI_Open_port: a new port's name.
pub fn open_port() -> Result<String> {
    let ip = with(|e| e.dyn_card().map(|r| r.card.tcp.map(|a| a.ip())))??
        .ok_or_else(|| port_err("this process has no TCP address to open a port on"))?;
    let l = TcpListener::bind((ip, 0))
        .map_err(|e| port_err(format!("cannot open a port on {ip}: {e}")))?;
    l.set_nonblocking(true)
        .map_err(|e| port_err(format!("cannot open a port on {ip}: {e}")))?;
    let addr = l
        .local_addr()
        .map_err(|e| port_err(format!("a port without an address: {e}")))?;
    let secret = random::<32>()?;
    let name = format!("{PREFIX}{}:{addr}", hex(&secret));
    PORTS.lock().map_err(poisoned)?.push(Port {
        name: name.clone(),
        listener: l,
        secret,
    });
    Ok(name)
}

fn poisoned<T>(_: T) -> MpiError {
    MpiError::new(ErrorClass::Intern, "the port table is poisoned")
}

/// MPI_Close_port: closes a port this process opened (a connector waiting on it fails).
pub fn close_port(name: &str) -> Result<()> {
    let mut ports = PORTS.lock().map_err(poisoned)?;
    match ports.iter().position(|p| p.name == name.trim()) {
        Some(i) => {
            ports.swap_remove(i);
            Ok(())
        }
        None => Err(port_err(format!(
            "'{name}' is not a port opened by this process (or it was closed already)"
        ))),
    }
}

/// The secret and the address in a port's name.
fn parse_port(name: &str) -> Result<([u8; 32], SocketAddr)> {
    let bad = || {
        port_err(format!(
            "'{name}' is not a Protean port name (protean-port:SECRET:ADDRESS:PORT, as \
             MPI_Open_port writes it)"
        ))
    };
    let rest = name.trim().strip_prefix(PREFIX).ok_or_else(bad)?;
    let (secret, addr) = rest.split_once(':').ok_or_else(bad)?;
    let secret = unhex(secret).ok_or_else(bad)?;
    let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
    Ok((secret, addr))
}

/// Keeps our progress going while we wait on socket `fd` (`events`: POLLIN or POLLOUT):
/// progress, then sleep in poll until the socket is ready or `pause` (doubling up to 2 ms)
/// passed, so that an answer is taken at once and the engine still progresses.
fn pump(fd: RawFd, events: i16, pause: &mut Duration) {
    let _ = with(|e| e.progress());
    global::idle();
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: pause.as_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd; a plain timeout; no signal mask.
    unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    *pause = (*pause * 2).min(Duration::from_millis(2));
}

/// The connection between the two roots (or the two sides of MPI_Comm_join): both nonces,
/// and which side accepted.
struct Link {
    s: TcpStream,
    nc: [u8; 16],
    na: [u8; 16],
    acceptor: bool,
    /// The port's secret, or for MPI_Comm_join the one agreed over the socket.
    secret: Option<[u8; 32]>,
    deadline: Option<Instant>,
    /// For MPI_Comm_join: the application's socket's O_NONBLOCK, restored at the end.
    restore: Option<bool>,
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(nb) = self.restore {
            let _ = self.s.set_nonblocking(nb);
        }
    }
}

/// Reads exactly `buf.len()` bytes before `deadline` (None: no limit), keeping our progress
/// going; `what` names the wait in errors.
fn read_exact(
    s: &mut TcpStream,
    buf: &mut [u8],
    deadline: Option<Instant>,
    what: &dyn Fn() -> String,
) -> Result<()> {
    let mut got = 0;
    let mut pause = Duration::from_micros(20);
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(port_err(format!(
                    "{}: the other side closed the connection",
                    what()
                )))
            }
            Ok(n) => {
                got += n;
                pause = Duration::from_micros(20);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(port_err(format!("{}: timed out", what())));
                }
                pump(s.as_raw_fd(), libc::POLLIN, &mut pause);
            }
            Err(e) => return Err(port_err(format!("{}: {e}", what()))),
        }
    }
    Ok(())
}

fn write_all(s: &mut TcpStream, buf: &[u8]) -> Result<()> {
    let mut done = 0;
    let mut pause = Duration::from_micros(20);
    let start = Instant::now();
    while done < buf.len() {
        match s.write(&buf[done..]) {
            Ok(0) => return Err(port_err("the other side closed the connection")),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if start.elapsed() > STEP * 6 {
                    return Err(port_err("the other side stopped reading"));
                }
                pump(s.as_raw_fd(), libc::POLLOUT, &mut pause);
            }
            Err(e) => return Err(port_err(format!("cannot write to the other side: {e}"))),
        }
    }
    Ok(())
}

/// The acceptor's half of the handshake on a fresh connection.
fn serve_handshake(mut s: TcpStream, secret: &[u8; 32], deadline: Option<Instant>) -> Result<Link> {
    s.set_nonblocking(true)
        .map_err(|e| port_err(format!("{e}")))?;
    let _ = s.set_nodelay(true);
    let step = Some(Instant::now() + STEP);
    let mut hello = [0u8; 20];
    read_exact(&mut s, &mut hello, step, &|| {
        "waiting for a connector's hello".into()
    })?;
    if &hello[..4] != MAGIC {
        return Err(port_err(
            "a connection that does not speak the port protocol",
        ));
    }
    let nc: [u8; 16] = hello[4..20].try_into().expect("16 bytes");
    let na = random::<16>()?;
    let mut ch = Vec::with_capacity(52);
    ch.extend_from_slice(MAGIC);
    ch.extend_from_slice(&na);
    ch.extend_from_slice(&hmac(secret, &[ACCEPT, &nc, &na]).finalize().into_bytes());
    write_all(&mut s, &ch)?;
    let mut proof = [0u8; 32];
    read_exact(&mut s, &mut proof, step, &|| {
        "waiting for a connector's proof".into()
    })?;
    hmac(secret, &[CONNECT, &nc, &na])
        .verify_slice(&proof)
        .map_err(|_| port_err("a connector that does not hold the port's secret"))?;
    Ok(Link {
        s,
        nc,
        na,
        acceptor: true,
        secret: Some(*secret),
        deadline,
        restore: None,
    })
}

fn timeout_text(t: Option<Duration>) -> String {
    match t {
        Some(t) => format!("{} s", t.as_secs_f64()),
        None => "ever".into(),
    }
}

/// The accepting root: the first connection to `port` that completes the handshake.
fn accept_link(port: &str, timeout: Option<Duration>) -> Result<Link> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut pause = Duration::from_micros(50);
    loop {
        let lfd;
        let got = {
            let ports = PORTS.lock().map_err(poisoned)?;
            let p = ports
                .iter()
                .find(|p| p.name == port.trim())
                .ok_or_else(|| {
                    port_err(format!(
                        "'{port}' is not an open port of this process (MPI_Open_port makes one; \
                     only the process that opened it can accept on it)"
                    ))
                })?;
            lfd = p.listener.as_raw_fd();
            match p.listener.accept() {
                Ok((s, _)) => Some((s, p.secret)),
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted =>
                {
                    None
                }
                Err(e) => return Err(port_err(format!("accepting on {port}: {e}"))),
            }
        };
        match got {
            Some((s, secret)) => {
                let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                match serve_handshake(s, &secret, deadline) {
                    Ok(l) => return Ok(l),
                    Err(e) => {
                        if with(|e| e.cfg.verbose > 0).unwrap_or(false) {
                            eprintln!(
                                "protean: MPI_Comm_accept: refused a connection from {peer}: {}",
                                e.msg
                            );
                        }
                    }
                }
                pause = Duration::from_micros(50);
            }
            None => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(port_err(format!(
                        "no process connected to the port within {} (the accept timeout: info \
                         key 'timeout' or PROTEAN_ACCEPT_TIMEOUT)",
                        timeout_text(timeout)
                    )));
                }
                pump(lfd, libc::POLLIN, &mut pause);
            }
        }
    }
}

/// The connecting root: connects to `port` and completes the handshake.
fn connect_link(port: &str, timeout: Duration) -> Result<Link> {
    let (secret, addr) = parse_port(port)?;
    let deadline = Instant::now() + timeout;
    let mut s =
        TcpStream::connect_timeout(&addr, timeout.max(Duration::from_millis(1))).map_err(|e| {
            port_err(format!(
                "cannot connect to the port at {addr}: {e} (the port is not open: never \
                 opened, or closed)"
            ))
        })?;
    s.set_nonblocking(true)
        .map_err(|e| port_err(format!("{e}")))?;
    let _ = s.set_nodelay(true);
    let nc = random::<16>()?;
    let mut hello = Vec::with_capacity(20);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&nc);
    write_all(&mut s, &hello)?;
    let mut ch = [0u8; 52];
    let what = || {
        format!(
            "waiting for the port's owner at {addr} to accept (MPI_Comm_accept did not come \
             within the connect timeout of {} s: info key 'timeout' or PROTEAN_CONNECT_TIMEOUT)",
            timeout.as_secs_f64()
        )
    };
    read_exact(&mut s, &mut ch, Some(deadline), &what)?;
    if &ch[..4] != MAGIC {
        return Err(port_err(format!("{addr} does not speak the port protocol")));
    }
    let na: [u8; 16] = ch[4..20].try_into().expect("16 bytes");
    hmac(&secret, &[ACCEPT, &nc, &na])
        .verify_slice(&ch[20..52])
        .map_err(|_| {
            port_err(format!(
                "the process at {addr} does not hold the port's secret"
            ))
        })?;
    write_all(
        &mut s,
        &hmac(&secret, &[CONNECT, &nc, &na]).finalize().into_bytes(),
    )?;
    Ok(Link {
        s,
        nc,
        na,
        acceptor: false,
        secret: Some(secret),
        deadline: Some(deadline),
        restore: None,
    })
}

/// The two sides of MPI_Comm_join: a nonce each; the larger accepts.
fn join_link(fd: RawFd) -> Result<Link> {
    if fd < 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("fd {fd} is not a socket"),
        ));
    }
    // SAFETY: fd is open per the caller (checked by the dup); we own the duplicate only.
    let dup = unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|e| MpiError::new(ErrorClass::Arg, format!("fd {fd}: {e}")))?;
    // The descriptor shares its file status flags with the application's: note O_NONBLOCK
    // to restore it when we are done.
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_GETFL) };
    let was_nonblocking = flags >= 0 && flags & libc::O_NONBLOCK != 0;
    let mut s = TcpStream::from(dup);
    s.set_nonblocking(true)
        .map_err(|e| MpiError::new(ErrorClass::Arg, format!("fd {fd} is not a socket: {e}")))?;
    let mine = random::<16>()?;
    // An ephemeral X25519 key pair: the secret both sides agree on over the socket, used
    // only when they turn out to be independent jobs (the pair of jobs' key derives from it).
    let eph = x25519_dalek::StaticSecret::from(random::<32>()?);
    let public = x25519_dalek::PublicKey::from(&eph);
    let mut m = Vec::from(&JOIN_MAGIC[..]);
    m.extend_from_slice(&mine);
    m.extend_from_slice(public.as_bytes());
    write_all(&mut s, &m)?;
    let mut theirs = [0u8; 52];
    read_exact(&mut s, &mut theirs, None, &|| {
        "MPI_Comm_join: waiting for the other side".into()
    })?;
    if &theirs[..4] != JOIN_MAGIC {
        return Err(port_err(
            "the other end of the socket is not in MPI_Comm_join",
        ));
    }
    let other: [u8; 16] = theirs[4..20].try_into().expect("16 bytes");
    if other == mine {
        return Err(port_err("MPI_Comm_join: both sides drew the same nonce"));
    }
    let their_public: [u8; 32] = theirs[20..].try_into().expect("32 bytes");
    let shared = eph.diffie_hellman(&x25519_dalek::PublicKey::from(their_public));
    if !shared.was_contributory() {
        return Err(port_err(
            "MPI_Comm_join: the other side sent a degenerate X25519 public key",
        ));
    }
    let acceptor = mine > other;
    let (nc, na) = if acceptor {
        (other, mine)
    } else {
        (mine, other)
    };
    // The socket's secret, bound to both nonces (so the pair key below is fresh per join).
    let secret: [u8; 32] = hmac(shared.as_bytes(), &[JOIN_SECRET, &nc, &na])
        .finalize()
        .into_bytes()
        .into();
    Ok(Link {
        s,
        nc,
        na,
        acceptor,
        secret: Some(secret),
        deadline: None,
        restore: Some(was_nonblocking),
    })
}

impl Link {
    /// Sends `body` and receives the other side's (the acceptor first, so that two large
    /// bodies never block each other).
    fn swap(&mut self, body: &[u8]) -> Result<Vec<u8>> {
        let send = |l: &mut Link| -> Result<()> {
            let mut m = (body.len() as u32).to_le_bytes().to_vec();
            m.extend_from_slice(body);
            write_all(&mut l.s, &m)
        };
        let recv = |l: &mut Link| -> Result<Vec<u8>> {
            let what = || "exchanging the groups with the other side".to_string();
            let dl = l.deadline.map(|d| d.max(Instant::now() + STEP));
            let mut n = [0u8; 4];
            read_exact(&mut l.s, &mut n, dl, &what)?;
            let n = u32::from_le_bytes(n) as usize;
            if n > MAX_BODY {
                return Err(port_err(format!("the other side announced {n} bytes")));
            }
            let mut b = vec![0u8; n];
            read_exact(&mut l.s, &mut b, dl, &what)?;
            Ok(b)
        };
        if self.acceptor {
            send(self)?;
            recv(self)
        } else {
            let b = recv(self)?;
            send(self)?;
            Ok(b)
        }
    }

    /// Do both sides belong to one mpirun (one job key)?
    fn same_job(&mut self, key: &[u8; 32]) -> Result<bool> {
        let role = |acc: bool| if acc { [1u8] } else { [0u8] };
        let mine = hmac(key, &[JOB, &role(self.acceptor), &self.nc, &self.na])
            .finalize()
            .into_bytes();
        let theirs = self.swap(&mine)?;
        Ok(hmac(key, &[JOB, &role(!self.acceptor), &self.nc, &self.na])
            .verify_slice(&theirs)
            .is_ok())
    }

    /// The key of the pair of independent jobs: HMAC(port secret, "pair" | nonce_c | nonce_a),
    /// fresh for each connection and known to no one without the port's name.
    fn pair_key(&self) -> Option<[u8; 32]> {
        let s = self.secret?;
        Some(
            hmac(&s, &[PAIR, &self.nc, &self.na])
                .finalize()
                .into_bytes()
                .into(),
        )
    }

    fn tag(&self) -> String {
        format!("protean-port-{}{}", hex(&self.nc), hex(&self.na))
    }
}

/// What the root tells the rest of its group: ok with the tag, the other group's leader and
/// entries, or an error (class and message).
fn encode_err(e: &MpiError) -> Vec<u8> {
    let class = ErrorClass::ALL
        .iter()
        .position(|c| *c == e.class)
        .unwrap_or(0);
    format!("E{class}\u{1f}{}", e.msg).into_bytes()
}

fn decode_err(b: &[u8]) -> MpiError {
    let s = String::from_utf8_lossy(b);
    let body = s.strip_prefix('E').unwrap_or(&s);
    match body.split_once('\u{1f}') {
        Some((c, m)) => MpiError::new(
            c.parse::<usize>()
                .ok()
                .and_then(|i| ErrorClass::ALL.get(i).copied())
                .unwrap_or(ErrorClass::Other),
            m.to_string(),
        ),
        None => MpiError::new(ErrorClass::Other, body.to_string()),
    }
}

/// How the root gets its link (called at the root only).
pub enum How {
    Accept {
        port: String,
        timeout: Option<Duration>,
    },
    Connect {
        port: String,
        timeout: Duration,
    },
    Join(RawFd),
}

/// MPI_Comm_accept, MPI_Comm_connect and MPI_Comm_join over intracommunicator `comm` (for
/// join: MPI_COMM_SELF): the new intercommunicator's id. `how` matters at `root` only.
pub fn connect_accept(comm: CommId, root: i32, how: Option<How>) -> Result<CommId> {
    let Caller {
        me,
        size,
        group,
        errhandler,
        root: root_u,
    } = Caller::of(comm, root, "an intracommunicator is needed")?;
    // 1. Every process's entry to the root.
    let mine = with(|e| -> Result<String> {
        if e.pmi.is_none() {
            return Err(port_err(
                "connecting groups of processes needs a process manager: start the program \
                 with mpirun",
            ));
        }
        let card = e.dyn_card()?;
        Ok(format!("{}\n{}", e.next_free_gpid(), peer_entry(&card)))
    })?;
    let mut data = vec![Vec::new(); size];
    data[root_u] = match &mine {
        Ok(s) => format!("O{s}").into_bytes(),
        Err(err) => encode_err(err),
    };
    let entries = cm::exchange_all(comm, data)?;
    // 2. The roots meet and swap their groups.
    let mut link = None;
    let mut word = vec![Vec::new(); size];
    if me == root_u {
        let w = match root_meet(&entries, root, how) {
            Ok((l, tag, leader, remote, mode)) => {
                let mode = match mode {
                    None => "S".to_string(),
                    Some((key, ours, theirs)) => {
                        format!("F{} {ours} {theirs} {}", hex(&key), u8::from(l.acceptor))
                    }
                };
                link = Some(l);
                let mut w = format!("O{tag}\n{leader}\n{mode}");
                for r in remote {
                    w.push('\n');
                    w.push_str(&r);
                }
                w.into_bytes()
            }
            Err(e) => encode_err(&e),
        };
        word = vec![w; size];
    }
    let w = cm::exchange_all(comm, word)?.swap_remove(root_u);
    mine?;
    if w.first() != Some(&b'O') {
        return Err(decode_err(&w));
    }
    let text = String::from_utf8_lossy(&w[1..]).into_owned();
    let mut lines = text.split('\n');
    let tag = lines.next().unwrap_or_default().to_string();
    let leader: i32 = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| port_err("the other side named no leader"))?;
    let mode = lines.next().unwrap_or_default().to_string();
    let mut remote = lines
        .map(|l| parse_peer(l).map_err(|e| port_err(e.msg)))
        .collect::<Result<Vec<_>>>()?;
    // An independent job: its processes get our aliases (see `dpm::Foreign`).
    let foreign = match mode.strip_prefix('F') {
        None => None,
        Some(f) => {
            let bad = || port_err(format!("a malformed word from the root: {mode}"));
            let mut it = f.split(' ');
            let key: [u8; 32] = it.next().and_then(unhex).ok_or_else(bad)?;
            let ours: Gpid = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let theirs: Gpid = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let acceptor = it.next() == Some("1");
            let pair = Foreign {
                alias: ours,
                theirs: remote.iter().map(|r| r.gpid).collect(),
                ours: group
                    .iter()
                    .enumerate()
                    .map(|(i, g)| (theirs.offset(i as u32), *g))
                    .collect(),
            };
            for (i, r) in remote.iter_mut().enumerate() {
                r.gpid = ours.offset(i as u32);
            }
            Some((key, theirs.offset(me as u32), pair, acceptor))
        }
    };
    // 3. Everyone adds the other group; the roots tell each other when their group is done,
    // and then their groups, so that nobody connects to a process that does not know it yet.
    // Processes already in our table (our own job's, or a job we spawned or were spawned
    // by) keep their routes and connections; a new process under a number we knew replaces
    // the old one's state. The other group stays in the table until the intercommunicator
    // is made, whatever another thread disconnects meanwhile (`Engine::hold`).
    let added = with(|e| {
        let r = match foreign.clone() {
            Some((key, me_there, pair, _)) => e.add_foreign(&remote, key, me_there, pair),
            None => {
                let new: Vec<_> = remote.iter().filter(|r| !e.knows(r)).cloned().collect();
                e.add_peers(&new)
            }
        };
        r.map(|()| e.hold(remote.iter().map(|r| r.gpid).collect()))
    })
    .and_then(|r| r);
    let mut flag = vec![Vec::new(); size];
    flag[root_u] = match &added {
        Ok(_) => b"O".to_vec(),
        Err(e) => encode_err(e),
    };
    let flags = cm::exchange_all(comm, flag)?;
    let mut go = vec![Vec::new(); size];
    if let Some(l) = link.as_mut() {
        let ours = flags
            .iter()
            .find(|f| f.first() != Some(&b'O'))
            .cloned()
            .unwrap_or_else(|| b"O".to_vec());
        // Our group's failure first, else the other group's, else go.
        let g = match l.swap(&ours) {
            Ok(_) if ours.first() != Some(&b'O') => ours,
            Ok(theirs) => theirs,
            Err(e) => encode_err(&e),
        };
        go = vec![g; size];
    }
    let g = cm::exchange_all(comm, go)?.swap_remove(root_u);
    let _held = added?;
    if g.first() != Some(&b'O') {
        return Err(decode_err(&g));
    }
    if let Some((_, _, _, true)) = foreign {
        let all: Vec<Gpid> = remote.iter().map(|r| r.gpid).collect();
        with(|e| e.connect_foreign(&all))??;
    }
    drop(link);
    let remote: Vec<Gpid> = remote.iter().map(|r| r.gpid).collect();
    let spec =
        with(|e| e.op_intercomm_from_groups(group, root, remote, leader, &tag, errhandler))??;
    cm::run(spec)?.ok_or_else(|| port_err("the intercommunicator was not made"))
}

/// The root's part: gets the link, checks both sides are one mpirun, swaps the groups.
/// Returns the link, the tag, the other group's leader and its entries.
#[allow(clippy::type_complexity)]
fn root_meet(
    entries: &[Vec<u8>],
    root: i32,
    how: Option<How>,
) -> Result<(
    Link,
    String,
    i32,
    Vec<String>,
    Option<([u8; 32], Gpid, Gpid)>,
)> {
    let mut ours = Vec::with_capacity(entries.len());
    // Where our aliases for an independent job's processes start: after every gpid any
    // process of our group has in its table.
    let mut next = Gpid::new(0);
    for e in entries {
        match e.first() {
            Some(b'O') => {
                let s = String::from_utf8_lossy(&e[1..]).into_owned();
                let (n, entry) = s
                    .split_once('\n')
                    .ok_or_else(|| MpiError::new(ErrorClass::Intern, "a malformed entry"))?;
                next = next.max(n.parse().unwrap_or(Gpid::new(0)));
                ours.push(entry.to_string());
            }
            _ => return Err(decode_err(e)),
        }
    }
    let mut link = match how {
        Some(How::Accept { port, timeout }) => accept_link(&port, timeout)?,
        Some(How::Connect { port, timeout }) => connect_link(&port, timeout)?,
        Some(How::Join(fd)) => join_link(fd)?,
        None => return Err(MpiError::new(ErrorClass::Intern, "the root has no port")),
    };
    let key = with(|e| e.dyn_key())??;
    let same = link.same_job(&key)?;
    let pair = if same { None } else { link.pair_key() };
    if !same && pair.is_none() {
        return Err(MpiError::new(
            ErrorClass::Intern,
            "the link to an independent job has no secret to derive the pair's key from",
        ));
    }
    let body = format!("{root} {next}\n{}", ours.join("\n"));
    let theirs = link.swap(body.as_bytes())?;
    let text = String::from_utf8_lossy(&theirs).into_owned();
    let mut lines = text.split('\n');
    let (leader, base) = lines
        .next()
        .and_then(|l| l.split_once(' '))
        .and_then(|(l, b)| Some((l.parse::<i32>().ok()?, b.parse::<Gpid>().ok()?)))
        .ok_or_else(|| port_err("the other side sent a malformed group"))?;
    let remote: Vec<String> = lines.map(str::to_string).collect();
    if remote.is_empty() || leader < 0 || leader as usize >= remote.len() {
        return Err(port_err("the other side sent a malformed group"));
    }
    let tag = link.tag();
    let mode = pair.map(|k| (k, next, base));
    Ok((link, tag, leader, remote, mode))
}

/// The timeout for `info`'s `timeout` value, else the tunable (seconds; 0: none).
pub fn timeout_of(info: Option<&str>, tunable: i64) -> Result<Option<Duration>> {
    let secs = match info {
        Some(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s >= 0.0 && s.is_finite())
            .ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Info,
                    format!("info key timeout: {v:?} is not a number of seconds"),
                )
            })?,
        None => tunable as f64,
    };
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs)))
}

/// Asks the process manager's name service (mpirun's table, or the name server mpirun was
/// given); errors of the conversation itself are MPI_ERR_OTHER.
fn names<T>(
    class: ErrorClass,
    ask: impl FnOnce(
        &mut protean_pmi::PmiClient,
    ) -> std::result::Result<std::result::Result<T, String>, protean_pmi::PmiError>,
) -> Result<T> {
    with(|e| -> Result<T> {
        let p = e.pmi.as_mut().ok_or_else(|| {
            MpiError::new(
                class,
                "publishing names needs a process manager: start the program with mpirun",
            )
        })?;
        match ask(p) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(why)) => Err(MpiError::new(class, why)),
            Err(e) => Err(crate::runtime::bootstrap::pmi_err(e)),
        }
    })?
}

/// MPI_Publish_name. A name published already (by anyone) is MPI_ERR_SERVICE.
pub fn publish_name(service: &str, port: &str) -> Result<()> {
    check_service(service)?;
    names(ErrorClass::Service, |p| p.publish_name(service, port))
        .map_err(|e| MpiError::new(e.class, format!("cannot publish '{service}': {}", e.msg)))
}

/// MPI_Unpublish_name. A name not published is MPI_ERR_SERVICE.
pub fn unpublish_name(service: &str) -> Result<()> {
    check_service(service)?;
    names(ErrorClass::Service, |p| p.unpublish_name(service))
        .map_err(|e| MpiError::new(e.class, format!("cannot unpublish '{service}': {}", e.msg)))
}

/// MPI_Lookup_name. A name not published is MPI_ERR_NAME.
pub fn lookup_name(service: &str) -> Result<String> {
    check_service(service)?;
    names(ErrorClass::Name, |p| p.lookup_name(service)).map_err(|e| {
        MpiError::new(
            e.class,
            format!("no port is published under '{service}' ({})", e.msg),
        )
    })
}

/// Service names travel as PMI values: printable, without spaces.
fn check_service(service: &str) -> Result<()> {
    if service.is_empty()
        || service.len() > 255
        || !service
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'\\' && b != b'=')
    {
        return Err(MpiError::new(
            ErrorClass::Service,
            format!(
                "service name {service:?}: Protean takes 1 to 255 printable characters without \
                 spaces, '=' or '\\'"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_parse() {
        let s = [7u8; 32];
        let n = format!("{PREFIX}{}:127.0.0.1:4000", hex(&s));
        assert_eq!(
            parse_port(&n).unwrap(),
            (s, "127.0.0.1:4000".parse().unwrap())
        );
        let n6 = format!("{PREFIX}{}:[::1]:9", hex(&s));
        assert_eq!(parse_port(&n6).unwrap().1, "[::1]:9".parse().unwrap());
        for bad in [
            "",
            "protean-port:",
            "tcp://x:1",
            &format!("{PREFIX}zz:127.0.0.1:1"),
        ] {
            assert_eq!(
                parse_port(bad).unwrap_err().class,
                ErrorClass::Port,
                "{bad}"
            );
        }
    }

    #[test]
    fn errors_cross_the_group_with_their_class() {
        let e = decode_err(&encode_err(&port_err("gone")));
        assert_eq!((e.class, e.msg.as_str()), (ErrorClass::Port, "gone"));
    }

    #[test]
    fn timeouts() {
        assert_eq!(timeout_of(None, 0).unwrap(), None);
        assert_eq!(
            timeout_of(Some("1.5"), 0).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(timeout_of(None, 3).unwrap(), Some(Duration::from_secs(3)));
        assert!(timeout_of(Some("soon"), 0).is_err());
    }
}
