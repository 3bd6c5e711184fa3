//! A blocking PMI-1 client: what an MPI process uses to bootstrap.
//!
//! Works with our `mpirun` and with any process manager that speaks PMI-1 (MPICH's Hydra,
//! Slurm's PMI-1 plugin). Two ways in, both read from the environment:
//!
//! * `PMI_FD=N` (an inherited, connected socket), with `PMI_RANK` and `PMI_SIZE`;
//! * `PMI_PORT=host:port` and `PMI_ID=N`: connect, send `cmd=initack pmiid=N`, and learn size and
//!   rank from the `cmd=set` lines of the answer (Hydra's `-pmi-port` mode sets no `PMI_RANK`).
//!
//! Guarantees: the socket is close-on-exec (so programs the process starts do not inherit it);
//! writes never raise SIGPIPE (a dead server is an [`PmiError::Io`]); every reply is parsed and
//! checked against the request, and anything unexpected is a [`PmiError::Protocol`] carrying the
//! offending line. Not guaranteed: timeouts. A server that stops answering blocks the caller.

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::wire::{Framer, Request, Response};

/// Why a PMI operation failed.
#[derive(Debug)]
pub enum PmiError {
    /// Reading or writing the PMI socket failed, or the server closed it.
    Io(io::Error),
    /// The server sent something other than the expected answer.
    Protocol { line: String, reason: String },
    /// The server answered with a non-zero return code.
    Server { cmd: String, rc: i32, msg: String },
    /// The environment or an argument is not usable (bad `PMI_FD`, a value too long or with
    /// characters PMI-1 cannot carry).
    Invalid(String),
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmiError::Io(e) => write!(f, "PMI connection failed: {e}"),
            PmiError::Protocol { line, reason } => {
                write!(f, "PMI protocol error ({reason}) in {line:?}")
            }
            PmiError::Server { cmd, rc, msg } => {
                write!(f, "PMI {cmd} failed on the server: rc={rc} {msg}")
            }
            PmiError::Invalid(what) => write!(f, "PMI: {what}"),
        }
    }
}

impl std::error::Error for PmiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PmiError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for PmiError {
    fn from(e: io::Error) -> Self {
        PmiError::Io(e)
    }
}

/// A connection to the process manager, initialised (`cmd=init` done).
#[derive(Debug)]
pub struct PmiClient {
    fd: OwnedFd,
    framer: Framer,
    rank: u32,
    size: u32,
    appnum: i32,
    spawned: bool,
    kvsname: String,
    keylen_max: usize,
    vallen_max: usize,
    finalized: bool,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_number<T: std::str::FromStr>(name: &str) -> Result<T, PmiError> {
    let v = env_var(name).ok_or_else(|| PmiError::Invalid(format!("{name} is not set")))?;
    v.trim()
        .parse()
        .map_err(|_| PmiError::Invalid(format!("{name}={v:?} is not a valid number")))
}

/// A key or value PMI-1 can carry through every known server: printable ASCII without space,
/// `=` or backslash (Hydra 4.0.2 cuts values at the first space, loses values holding `=`, and
/// does not unescape). Values must also be non-empty (Hydra drops empty values).
fn check_token(what: &str, s: &str, max: usize) -> Result<(), PmiError> {
    if s.is_empty() {
        return Err(PmiError::Invalid(format!("empty {what}")));
    }
    if s.len() > max {
        return Err(PmiError::Invalid(format!(
            "{what} of {} bytes exceeds the server's limit of {max}",
            s.len()
        )));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !c.is_ascii_graphic() || c == '=' || c == '\\')
    {
        return Err(PmiError::Invalid(format!(
            "{what} {s:?} holds {c:?}; PMI-1 carries printable ASCII except space, '=' and '\\'"
        )));
    }
    Ok(())
}

impl PmiClient {
    /// Connects to the process manager named by the environment and initialises PMI.
    /// Ok(None) when no PMI variables are set: the process is a singleton.
    pub fn from_env() -> Result<Option<PmiClient>, PmiError> {
        if let Some(fd) = env_var("PMI_FD") {
            let fd: RawFd =
                fd.trim().parse().ok().filter(|&n| n >= 0).ok_or_else(|| {
                    PmiError::Invalid(format!("PMI_FD={fd:?} is not a descriptor"))
                })?;
            let rank = env_number("PMI_RANK")?;
            let size = env_number("PMI_SIZE")?;
            check_is_socket(fd)?;
            // SAFETY: PMI_FD names a descriptor the process manager left open for us, checked to
            // be a socket just above; from here on this client is its only owner.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            return PmiClient::from_fd(owned, rank, size).map(Some);
        }
        if let Some(port) = env_var("PMI_PORT") {
            let id: i64 = env_number("PMI_ID")?;
            // std opens sockets with SOCK_CLOEXEC.
            let stream = TcpStream::connect(port.trim())?;
            stream.set_nodelay(true)?;
            let owned = OwnedFd::from(stream);
            let mut client = PmiClient::new(owned, 0, 0);
            client.initack(id)?;
            return client.init_handshake().map(Some);
        }
        Ok(None)
    }

    /// Initialises PMI over an already connected socket (`PMI_FD` style), for a process that
    /// learnt its rank and the job size some other way. Sets close-on-exec on the socket.
    pub fn from_fd(fd: OwnedFd, rank: u32, size: u32) -> Result<PmiClient, PmiError> {
        set_cloexec(fd.as_raw_fd())?;
        PmiClient::new(fd, rank, size).init_handshake()
    }

    fn new(fd: OwnedFd, rank: u32, size: u32) -> PmiClient {
        PmiClient {
            fd,
            framer: Framer::default(),
            rank,
            size,
            appnum: 0,
            spawned: env_var("PMI_SPAWNED").is_some_and(|v| v.trim() != "0"),
            kvsname: String::new(),
            keylen_max: 64,
            vallen_max: 1024,
            finalized: false,
        }
    }

    fn initack(&mut self, id: i64) -> Result<(), PmiError> {
        self.send(&Request::InitAck { pmiid: id })?;
        let (line, r) = self.recv()?;
        if r != Response::InitAck {
            return Err(protocol(line, "expected cmd=initack"));
        }
        let mut size = None;
        let mut rank = None;
        // Then `set size`, `set rank`, `set debug`, in that order.
        for _ in 0..3 {
            match self.recv()? {
                (_, Response::Set { name, value }) if name == "size" => size = Some(value),
                (_, Response::Set { name, value }) if name == "rank" => rank = Some(value),
                (_, Response::Set { .. }) => {}
                (line, _) => return Err(protocol(line, "expected cmd=set after initack")),
            }
        }
        let (Some(size), Some(rank)) = (size, rank) else {
            return Err(protocol(String::new(), "initack without size and rank"));
        };
        match (u32::try_from(size), u32::try_from(rank)) {
            (Ok(s), Ok(r)) if r < s => {
                self.size = s;
                self.rank = r;
                Ok(())
            }
            _ => Err(protocol(
                format!("size={size} rank={rank}"),
                "rank out of range",
            )),
        }
    }

    fn init_handshake(mut self) -> Result<PmiClient, PmiError> {
        if self.rank >= self.size {
            return Err(PmiError::Invalid(format!(
                "rank {} out of range for size {}",
                self.rank, self.size
            )));
        }
        self.send(&Request::Init {
            version: 1,
            subversion: 1,
        })?;
        match self.recv()? {
            (_, Response::ResponseToInit { rc: 0, .. }) => {}
            (_, Response::ResponseToInit { rc, .. }) => {
                return Err(PmiError::Server {
                    cmd: "init".into(),
                    rc,
                    msg: "PMI version 1.1 refused".into(),
                })
            }
            (line, _) => return Err(protocol(line, "expected cmd=response_to_init")),
        }
        self.send(&Request::GetMaxes)?;
        match self.recv()? {
            (
                _,
                Response::Maxes {
                    keylen_max,
                    vallen_max,
                    ..
                },
            ) => {
                self.keylen_max = keylen_max as usize;
                self.vallen_max = vallen_max as usize;
            }
            (line, _) => return Err(protocol(line, "expected cmd=maxes")),
        }
        self.send(&Request::GetAppnum)?;
        match self.recv()? {
            (_, Response::Appnum { appnum }) => self.appnum = appnum,
            (line, _) => return Err(protocol(line, "expected cmd=appnum")),
        }
        self.send(&Request::GetMyKvsname)?;
        match self.recv()? {
            (_, Response::MyKvsname { kvsname }) => self.kvsname = kvsname,
            (line, _) => return Err(protocol(line, "expected cmd=my_kvsname")),
        }
        Ok(self)
    }

    /// This process's rank in the job.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Which application of an MPMD launch this process belongs to.
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// True when this job was started by `MPI_Comm_spawn` (`PMI_SPAWNED` set and not 0).
    pub fn spawned(&self) -> bool {
        self.spawned
    }

    /// The job's KVS name.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Longest value [`put`](Self::put) accepts (the server's `vallen_max`).
    pub fn max_value_len(&self) -> usize {
        self.vallen_max
    }

    /// Longest key [`put`](Self::put) accepts (the server's `keylen_max`).
    pub fn max_key_len(&self) -> usize {
        self.keylen_max
    }

    /// The universe size as the process manager reports it (-1 when it does not know: Hydra).
    pub fn universe_size(&mut self) -> Result<i32, PmiError> {
        self.send(&Request::GetUniverseSize)?;
        match self.recv()? {
            (_, Response::UniverseSize { size }) => Ok(size),
            (line, _) => Err(protocol(line, "expected cmd=universe_size")),
        }
    }

    /// Stores a key in the job's KVS. Keys and values are printable ASCII without space, `=`
    /// or backslash, non-empty, within the server's limits; anything else is
    /// [`PmiError::Invalid`] (encode binary data, e.g. as hex, before putting it).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        check_token("key", key, self.keylen_max)?;
        check_token("value", value, self.vallen_max)?;
        self.send(&Request::Put {
            kvsname: self.kvsname.clone(),
            key: key.to_string(),
            value: value.to_string(),
        })?;
        match self.recv()? {
            (_, Response::PutResult { rc: 0, .. }) => Ok(()),
            (_, Response::PutResult { rc, msg }) => Err(PmiError::Server {
                cmd: "put".into(),
                rc,
                msg: msg.unwrap_or_default(),
            }),
            (line, _) => Err(protocol(line, "expected cmd=put_result")),
        }
    }

    /// Waits until every process of the job has entered the barrier. Puts made before it are
    /// visible to every process's `get` after it.
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        self.send(&Request::BarrierIn)?;
        match self.recv()? {
            (_, Response::BarrierOut) => Ok(()),
            (line, _) => Err(protocol(line, "expected cmd=barrier_out")),
        }
    }

    /// [`PmiClient::barrier`], calling `idle` until the answer is there: for a process that
    /// must keep answering its peers while it waits (over UDP, a peer may still need our
    /// acknowledgement of its last datagrams before it can enter the barrier itself).
    pub fn barrier_while(&mut self, mut idle: impl FnMut()) -> Result<(), PmiError> {
        self.send(&Request::BarrierIn)?;
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a zero timeout never blocks.
            let r = unsafe { libc::poll(&mut pfd, 1, 0) };
            if r != 0 {
                // Readable, closed or failed: recv says which.
                break;
            }
            idle();
        }
        match self.recv()? {
            (_, Response::BarrierOut) => Ok(()),
            (line, _) => Err(protocol(line, "expected cmd=barrier_out")),
        }
    }

    /// Looks a key up in the job's KVS: Ok(None) when the server has no such key.
    pub fn get(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        let kvs = self.kvsname.clone();
        self.lookup(&kvs, key, true)
    }

    /// Looks many keys up in the job's KVS with the requests pipelined: up to `PIPELINE` gets
    /// leave in one write, then their answers are read in order, so a lookup of every rank's
    /// key costs a few round trips instead of one per rank (with every process of a job
    /// looking up every other's, one per pair: 16,256 round trips through the process manager
    /// at 128 ranks). Only for a server known to read requests as a stream, answering each in
    /// order (Protean's mpirun and proxies: `PROTEAN_LAUNCHER=1`); others get one at a time.
    pub fn get_many(&mut self, keys: &[String]) -> Result<Vec<Option<String>>, PmiError> {
        const PIPELINE: usize = 256;
        let kvs = self.kvsname.clone();
        let mut out = Vec::with_capacity(keys.len());
        for batch in keys.chunks(PIPELINE) {
            let mut text = String::new();
            for key in batch {
                check_token("key", key, self.keylen_max)?;
                text.push_str(
                    &Request::Get {
                        kvsname: kvs.clone(),
                        key: key.clone(),
                    }
                    .encode(),
                );
            }
            self.send_text(&text)?;
            for _ in batch {
                out.push(self.get_result(true)?);
            }
        }
        Ok(out)
    }

    /// Looks a key up in another KVS space (a spawned job's or a parent's), Ok(None) when the
    /// server has no such key or space.
    pub fn get_from(&mut self, kvsname: &str, key: &str) -> Result<Option<String>, PmiError> {
        self.lookup(kvsname, key, false)
    }

    /// `get` in space `kvsname`; `strict`: a success without a value is a protocol error (in
    /// our own space), rather than a key not there.
    fn lookup(
        &mut self,
        kvsname: &str,
        key: &str,
        strict: bool,
    ) -> Result<Option<String>, PmiError> {
        check_token("key", key, self.keylen_max)?;
        self.send(&Request::Get {
            kvsname: kvsname.to_string(),
            key: key.to_string(),
        })?;
        self.get_result(strict)
    }

    /// The answer to a `get`: Ok(None) for a key or space not there; `strict`: a success
    /// without a value is a protocol error.
    fn get_result(&mut self, strict: bool) -> Result<Option<String>, PmiError> {
        match self.recv()? {
            (
                _,
                Response::GetResult {
                    rc: 0,
                    value: Some(v),
                    ..
                },
            ) => Ok(Some(v)),
            (
                line,
                Response::GetResult {
                    rc: 0, value: None, ..
                },
            ) if strict => Err(protocol(line, "get_result without value")),
            (_, Response::GetResult { .. }) => Ok(None),
            (line, _) => Err(protocol(line, "expected cmd=get_result")),
        }
    }

    /// Stores a key in another KVS space (see [`PmiClient::get_from`]).
    pub fn put_to(&mut self, kvsname: &str, key: &str, value: &str) -> Result<(), PmiError> {
        check_token("key", key, self.keylen_max)?;
        check_token("value", value, self.vallen_max)?;
        self.send(&Request::Put {
            kvsname: kvsname.to_string(),
            key: key.to_string(),
            value: value.to_string(),
        })?;
        match self.recv()? {
            (_, Response::PutResult { rc: 0, .. }) => Ok(()),
            (_, Response::PutResult { rc, msg }) => Err(PmiError::Server {
                cmd: "put".into(),
                rc,
                msg: msg.unwrap_or_default(),
            }),
            (line, _) => Err(protocol(line, "expected cmd=put_result")),
        }
    }

    /// Asks the process manager to start a job (the PMI-1 `spawn` command, one message per
    /// command of `MPI_Comm_spawn_multiple`; `totspawns` and `spawnssofar` are set here).
    /// Ok(Err(reason)) when the process manager refused or failed (nothing started).
    pub fn spawn(
        &mut self,
        commands: &[crate::wire::SpawnCommand],
    ) -> Result<Result<(), String>, PmiError> {
        let total = commands.len() as u32;
        for (i, c) in commands.iter().enumerate() {
            let mut c = c.clone();
            c.totspawns = total;
            c.spawnssofar = i as u32 + 1;
            self.send(&Request::Spawn(c))?;
        }
        match self.recv()? {
            (_, Response::SpawnResult { rc: 0, .. }) => Ok(Ok(())),
            (_, Response::SpawnResult { rc, msg }) => Ok(Err(msg
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("the process manager answered rc={rc}")))),
            (line, _) => Err(protocol(line, "expected cmd=spawn_result")),
        }
    }

    /// Publishes `port` under `service` (the PMI-1 `publish_name` command).
    /// Ok(Err(reason)) when the name server refused (the name is taken, for one).
    pub fn publish_name(
        &mut self,
        service: &str,
        port: &str,
    ) -> Result<Result<(), String>, PmiError> {
        check_token("service", service, self.vallen_max)?;
        check_token("port", port, self.vallen_max)?;
        self.send(&Request::PublishName {
            service: service.to_string(),
            port: port.to_string(),
        })?;
        match self.recv()? {
            (_, Response::PublishResult { rc: 0, .. }) => Ok(Ok(())),
            (_, Response::PublishResult { rc, msg }) => Ok(Err(refusal(rc, msg))),
            (line, _) => Err(protocol(line, "expected cmd=publish_result")),
        }
    }

    /// Withdraws `service` (the PMI-1 `unpublish_name` command). Ok(Err(reason)) when it was
    /// not published.
    pub fn unpublish_name(&mut self, service: &str) -> Result<Result<(), String>, PmiError> {
        check_token("service", service, self.vallen_max)?;
        self.send(&Request::UnpublishName {
            service: service.to_string(),
        })?;
        match self.recv()? {
            (_, Response::UnpublishResult { rc: 0, .. }) => Ok(Ok(())),
            (_, Response::UnpublishResult { rc, msg }) => Ok(Err(refusal(rc, msg))),
            (line, _) => Err(protocol(line, "expected cmd=unpublish_result")),
        }
    }

    /// The port published under `service` (the PMI-1 `lookup_name` command). Ok(Err(reason))
    /// when no such name is published.
    pub fn lookup_name(&mut self, service: &str) -> Result<Result<String, String>, PmiError> {
        check_token("service", service, self.vallen_max)?;
        self.send(&Request::LookupName {
            service: service.to_string(),
        })?;
        match self.recv()? {
            (
                _,
                Response::LookupResult {
                    rc: 0,
                    port: Some(p),
                    ..
                },
            ) => Ok(Ok(p)),
            (_, Response::LookupResult { rc, msg, .. }) => Ok(Err(refusal(rc, msg))),
            (line, _) => Err(protocol(line, "expected cmd=lookup_result")),
        }
    }

    /// Tells the process manager this process is done with PMI. Calling it twice is harmless.
    pub fn finalize(&mut self) -> Result<(), PmiError> {
        if self.finalized {
            return Ok(());
        }
        self.send(&Request::Finalize)?;
        match self.recv()? {
            (_, Response::FinalizeAck) => {
                self.finalized = true;
                Ok(())
            }
            (line, _) => Err(protocol(line, "expected cmd=finalize_ack")),
        }
    }

    /// Asks the process manager to end the whole job with exit code `code`. The server does not
    /// answer; the caller should exit (with `code`) right after.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        let message = msg.trim();
        self.send(&Request::Abort {
            exitcode: code,
            message: (!message.is_empty()).then(|| message.to_string()),
        })
    }

    /// The socket, for a caller that wants to poll it (the client keeps owning it).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn send(&mut self, req: &Request) -> Result<(), PmiError> {
        self.send_text(&req.encode())
    }

    /// Writes encoded requests, all of them.
    fn send_text(&mut self, text: &str) -> Result<(), PmiError> {
        let mut buf = text.as_bytes();
        while !buf.is_empty() {
            // SAFETY: the descriptor is owned by self and open; buf is a live, initialised slice.
            // MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(PmiError::Io(e));
            }
            buf = &buf[n as usize..];
        }
        Ok(())
    }

    /// The next message from the server, as text and parsed.
    fn recv(&mut self) -> Result<(String, Response), PmiError> {
        loop {
            if let Some(m) = self.framer.next_message() {
                let line = m.map_err(|e| protocol(String::new(), &e.to_string()))?;
                return match Response::parse(&line) {
                    Ok(r) => Ok((line, r)),
                    Err(e) => Err(protocol(line, &e.to_string())),
                };
            }
            let mut buf = [0u8; 4096];
            // SAFETY: the descriptor is owned by self and open; buf is writable for its length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(PmiError::Io(e));
            }
            if n == 0 {
                return Err(PmiError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the process manager closed the PMI connection",
                )));
            }
            self.framer.push(&buf[..n as usize]);
        }
    }
}

/// The reason a name-service request was refused, from the server's `msg` or its code.
fn refusal(rc: i32, msg: Option<String>) -> String {
    msg.filter(|m| !m.is_empty())
        .unwrap_or_else(|| format!("the process manager answered rc={rc}"))
}

fn protocol(line: String, reason: &str) -> PmiError {
    PmiError::Protocol {
        line: line.trim_end().to_string(),
        reason: reason.to_string(),
    }
}

fn check_is_socket(fd: RawFd) -> Result<(), PmiError> {
    // SAFETY: fstat writes into the zeroed struct we own; an invalid fd is reported as EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(PmiError::Invalid(format!(
            "PMI_FD={fd} is not open: {}",
            io::Error::last_os_error()
        )));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(PmiError::Invalid(format!("PMI_FD={fd} is not a socket")));
    }
    Ok(())
}

fn set_cloexec(fd: RawFd) -> Result<(), PmiError> {
    // SAFETY: fcntl on a descriptor we own; F_GETFD/F_SETFD touch only its flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) < 0 {
            return Err(PmiError::Io(io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Server;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::thread;

    /// Serves PMI on `conns` (one per rank) from one thread until every connection closes.
    fn serve(size: usize, conns: Vec<UnixStream>) -> thread::JoinHandle<Vec<String>> {
        thread::spawn(move || {
            let mut server = Server::new(size, "kvs_test", 0, size as i32);
            let mut framers: Vec<Framer> = conns.iter().map(|_| Framer::default()).collect();
            let mut open = vec![true; conns.len()];
            for c in &conns {
                c.set_nonblocking(true).unwrap();
            }
            let mut seen = Vec::new();
            while open.iter().any(|&o| o) {
                let mut idle = true;
                for (i, mut c) in conns.iter().enumerate() {
                    if !open[i] {
                        continue;
                    }
                    let mut buf = [0u8; 512];
                    match c.read(&mut buf) {
                        Ok(0) => open[i] = false,
                        Ok(n) => {
                            idle = false;
                            framers[i].push(&buf[..n]);
                            while let Some(Ok(m)) = framers[i].next_message() {
                                seen.push(m.clone());
                                for (to, r) in server.handle(i, &m) {
                                    (&conns[to]).write_all(r.encode().as_bytes()).unwrap();
                                }
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => open[i] = false,
                    }
                }
                if idle {
                    thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            seen
        })
    }

    #[test]
    fn kvs_exchange_between_threads() {
        let n = 3;
        let (mine, theirs): (Vec<_>, Vec<_>) = (0..n).map(|_| UnixStream::pair().unwrap()).unzip();
        let server = serve(n, theirs);
        let ranks: Vec<_> = mine
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                thread::spawn(move || {
                    let mut c = PmiClient::from_fd(OwnedFd::from(s), r as u32, n as u32).unwrap();
                    assert_eq!(c.kvsname(), "kvs_test");
                    assert_eq!(c.max_value_len(), 1024);
                    assert_eq!(c.universe_size().unwrap(), n as i32);
                    c.put(&format!("card-{r}"), &format!("addr:{r}:x=1"))
                        .unwrap_err();
                    c.put(&format!("card-{r}"), &format!("addr:{r}")).unwrap();
                    c.barrier().unwrap();
                    for peer in 0..n {
                        let v = c.get(&format!("card-{peer}")).unwrap();
                        assert_eq!(v, Some(format!("addr:{peer}")));
                    }
                    assert_eq!(c.get("missing").unwrap(), None);
                    // Pipelined: answers in order, a missing key in the middle, more keys than
                    // one batch.
                    let mut keys: Vec<String> = (0..n).map(|p| format!("card-{p}")).collect();
                    keys.insert(1, "missing".into());
                    keys = keys
                        .iter()
                        .cycle()
                        .take(100 * keys.len())
                        .cloned()
                        .collect();
                    let got = c.get_many(&keys).unwrap();
                    assert_eq!(got.len(), keys.len());
                    for (k, v) in keys.iter().zip(&got) {
                        let want = k.strip_prefix("card-").map(|p| format!("addr:{p}"));
                        assert_eq!(v, &want, "{k}");
                    }
                    assert!(c.get_many(&["a b".to_string()]).is_err());
                    assert_eq!(c.get("card-0").unwrap(), Some("addr:0".into()));
                    c.finalize().unwrap();
                    c.finalize().unwrap();
                })
            })
            .collect();
        for r in ranks {
            r.join().unwrap();
        }
        let seen = server.join().unwrap();
        assert_eq!(seen.iter().filter(|m| *m == "cmd=finalize\n").count(), n);
    }

    #[test]
    fn invalid_values_are_refused_before_sending() {
        for bad in ["", "a b", "a=b", "a\\b", "é", "x\n"] {
            assert!(matches!(
                check_token("value", bad, 100),
                Err(PmiError::Invalid(_))
            ));
        }
        assert!(check_token("value", &"v".repeat(101), 100).is_err());
        assert!(check_token("value", "tcp:127.0.0.1:4000;shm:/protean-1", 100).is_ok());
    }

    #[test]
    fn garbage_from_the_server_is_a_protocol_error() {
        let (mine, mut theirs) = UnixStream::pair().unwrap();
        let t = thread::spawn(move || {
            let mut buf = [0u8; 256];
            let _ = theirs.read(&mut buf).unwrap();
            theirs.write_all(b"cmd=barrier_out\n").unwrap();
        });
        let err = PmiClient::from_fd(OwnedFd::from(mine), 0, 1).unwrap_err();
        t.join().unwrap();
        match err {
            PmiError::Protocol { line, .. } => assert_eq!(line, "cmd=barrier_out"),
            other => panic!("expected a protocol error, got {other}"),
        }
    }

    #[test]
    fn server_gone_is_an_io_error() {
        let (mine, theirs) = UnixStream::pair().unwrap();
        drop(theirs);
        let err = PmiClient::from_fd(OwnedFd::from(mine), 0, 1).unwrap_err();
        assert!(matches!(err, PmiError::Io(_)), "{err}");
    }

    #[test]
    fn port_mode_learns_rank_and_size_from_initack() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut server = Server::new(4, "kvs_port", 0, 4);
            let mut framer = Framer::default();
            let mut buf = [0u8; 512];
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                framer.push(&buf[..n]);
                while let Some(Ok(m)) = framer.next_message() {
                    // All answers of one request in one write, as Hydra sends initack.
                    let out: String = server
                        .handle(0, &m)
                        .iter()
                        .map(|(_, r)| r.encode())
                        .collect();
                    s.write_all(out.as_bytes()).unwrap();
                }
            }
        });
        let stream = TcpStream::connect(addr).unwrap();
        let mut c = PmiClient::new(OwnedFd::from(stream), 0, 0);
        c.initack(2).unwrap();
        let mut c = c.init_handshake().unwrap();
        assert_eq!((c.rank(), c.size()), (2, 4));
        assert_eq!(c.kvsname(), "kvs_port");
        c.finalize().unwrap();
        drop(c);
        t.join().unwrap();
    }

    #[test]
    fn socket_is_close_on_exec() {
        let (mine, theirs) = UnixStream::pair().unwrap();
        let server = serve(1, vec![theirs]);
        let fd = OwnedFd::from(mine);
        // An inherited PMI_FD has the flag clear (it had to survive exec); the client sets it.
        // SAFETY: F_SETFD on a descriptor this test owns.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) };
        let mut c = PmiClient::from_fd(fd, 0, 1).unwrap();
        // SAFETY: F_GETFD on the client's open descriptor.
        let flags = unsafe { libc::fcntl(c.raw_fd(), libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
        c.finalize().unwrap();
        drop(c);
        server.join().unwrap();
    }
}
