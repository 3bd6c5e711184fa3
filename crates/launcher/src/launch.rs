//! Starting proxies on other hosts and keeping their connections: mpirun's side of a
//! multi-host job.
//!
//! mpirun listens on a TCP port (all addresses: whoever connects must prove the job's secret
//! before anything else, see [`crate::channel`]), then starts one `protean-proxy` per remote
//! host, all at once (`ssh`/`rsh` one process per host, run in parallel; `slurm` one `srun` for
//! every host; `fork` a local process), and writes the secret to each launcher's standard input.
//! A proxy is told every address of this host's network namespace that is not loopback
//! (`--connect A1,A2,...:PORT`, the one that routes to the host first when the host is an IP
//! address) and takes the first that answers, so no host name needs to resolve on either side.
//!
//! The caller (the job's poll loop) polls [`Remote::poll_fds`], hands ready descriptors to
//! [`Remote::ready`], and acts on the [`RemoteEvent`]s it gets back. A connection that does not
//! finish its hello within [`HELLO_TIMEOUT`], fails it, claims a host that is already connected
//! or sends anything else is closed and counted in [`Remote::refused`], and changes nothing else.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::channel::{self, Handshake, Secret, Session, ANSWER_LEN, HELLO_LEN};
use crate::msg::{ToMpirun, ToProxy};
use crate::sys::{self, ExitStatus};

/// Time an accepted connection has to finish its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How proxies are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LauncherKind {
    Ssh,
    Rsh,
    Fork,
    Slurm,
}

impl LauncherKind {
    pub fn parse(s: &str) -> Option<LauncherKind> {
        Some(match s {
            "ssh" => LauncherKind::Ssh,
            "rsh" => LauncherKind::Rsh,
            "fork" => LauncherKind::Fork,
            "slurm" | "srun" => LauncherKind::Slurm,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            LauncherKind::Ssh => "ssh",
            LauncherKind::Rsh => "rsh",
            LauncherKind::Fork => "fork",
            LauncherKind::Slurm => "srun",
        }
    }
}

/// True when `name` is this machine: `localhost`, our host name, or an address of ours.
pub fn is_local_host(name: &str) -> bool {
    let me = sys::hostname();
    if name == "localhost" || name == me || me.split('.').next() == Some(name) {
        return true;
    }
    let literal = name.trim_start_matches('[').trim_end_matches(']');
    match literal.parse::<IpAddr>() {
        // Binding succeeds only for an address of one of our interfaces.
        Ok(ip) => ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok(),
        Err(_) => false,
    }
}

/// The non-loopback IPv4 addresses of this network namespace, in interface order.
fn local_addresses() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free.
    unsafe {
        if libc::getifaddrs(&mut ifs) != 0 {
            return out;
        }
        let mut p = ifs;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null()
                && (*a).sa_family as i32 == libc::AF_INET
                && (*p).ifa_flags & libc::IFF_UP as u32 != 0
            {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && !out.contains(&ip) {
                    out.push(ip);
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifs);
    }
    out
}

/// The addresses a proxy on `host` should try, best first.
fn connect_list(host: &str, all: &[Ipv4Addr], port: u16) -> String {
    let mut list: Vec<Ipv4Addr> = Vec::new();
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        // The source address of the route to the host.
        if let Ok(s) = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) {
            if s.connect((ip, 9)).is_ok() {
                if let Ok(SocketAddr::V4(a)) = s.local_addr() {
                    list.push(*a.ip());
                }
            }
        }
    }
    for a in all {
        if !list.contains(a) {
            list.push(*a);
        }
    }
    if list.is_empty() {
        list.push(Ipv4Addr::LOCALHOST);
    }
    let ips: Vec<String> = list.iter().map(|a| a.to_string()).collect();
    format!("{}:{port}", ips.join(","))
}

/// Why a host is lost when its proxy's connection ends without `Done`.
const PROXY_GONE: &str =
    "its proxy closed the connection before the job ended (the proxy or its host died)";

/// The same for a connection that failed: a reset is the proxy dying with unread data.
fn connection_failed(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => PROXY_GONE.to_string(),
        _ => format!("the connection to its proxy failed: {e}"),
    }
}

/// A host's connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    /// Its launcher is running; no proxy connected yet.
    Launching,
    Connected,
    /// The proxy said `Done` (or closed after it).
    Done,
    /// Gone without `Done`, or never came.
    Lost,
}

pub struct RemoteHost {
    pub name: String,
    pub state: HostState,
    stream: Option<TcpStream>,
    session: Option<Session>,
    outq: Vec<u8>,
    /// Index into `launchers`.
    launcher: usize,
}

struct Launcher {
    pid: libc::pid_t,
    /// Hosts this process starts.
    hosts: Vec<usize>,
    stderr: Option<OwnedFd>,
    partial: Vec<u8>,
    status: Option<ExitStatus>,
}

struct Pending {
    /// Names the connection in `RemoteSrc::Pending` (indices move as connections go).
    id: u64,
    stream: TcpStream,
    buf: Vec<u8>,
    deadline: Instant,
    /// After the hello: (host, nonce_p, nonce_m).
    answered: Option<(u32, [u8; 32], [u8; 32])>,
}

/// Something the job must act on.
#[derive(Debug)]
pub enum RemoteEvent {
    /// A proxy proved the secret: send it its launch.
    Connected(usize),
    Message(usize, ToMpirun),
    /// The host's proxy connection ended without `Done` (or was never made): why.
    Lost(usize, String),
    /// A launcher printed a line on its standard error (ssh's complaints, the proxy's own).
    Stderr(usize, String),
}

/// What a descriptor of ours is.
#[derive(Debug, Clone, Copy)]
pub enum RemoteSrc {
    Listener,
    Pending(u64),
    Host(usize),
    LauncherErr(usize),
}

pub struct Remote {
    pub hosts: Vec<RemoteHost>,
    launchers: Vec<Launcher>,
    listener: TcpListener,
    pending: Vec<Pending>,
    next_pending: u64,
    secret: Secret,
    jobid: String,
    kind: LauncherKind,
    started: Instant,
    launch_timeout: Duration,
    /// Connections closed because they did not prove the secret (or claimed a taken host).
    pub refused: usize,
}

/// What `Remote::start` needs.
pub struct LaunchSpec<'a> {
    pub kind: LauncherKind,
    /// The command instead of `ssh`/`rsh`/`srun` (Hydra's `-launcher-exec`).
    pub exec: Option<&'a str>,
    pub hosts: Vec<String>,
    pub jobid: &'a str,
    pub proxy: PathBuf,
    pub launch_timeout: Duration,
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,=@+".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Remote {
    /// Listens, then starts every host's launcher. An error names what could not be done.
    pub fn start(spec: LaunchSpec) -> Result<Remote, String> {
        let secret =
            Secret::generate().map_err(|e| format!("cannot draw the job's secret: {e}"))?;
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
            .map_err(|e| format!("cannot listen for the proxies: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen for the proxies: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot listen for the proxies: {e}"))?
            .port();
        let addrs = local_addresses();
        let mut r = Remote {
            hosts: spec
                .hosts
                .iter()
                .map(|h| RemoteHost {
                    name: h.clone(),
                    state: HostState::Launching,
                    stream: None,
                    session: None,
                    outq: Vec::new(),
                    launcher: 0,
                })
                .collect(),
            launchers: Vec::new(),
            listener,
            pending: Vec::new(),
            next_pending: 0,
            secret,
            jobid: spec.jobid.to_string(),
            kind: spec.kind,
            started: Instant::now(),
            launch_timeout: spec.launch_timeout,
            refused: 0,
        };
        let proxy = spec.proxy.to_string_lossy().into_owned();
        let base = |connect: String| -> Vec<String> {
            vec![
                proxy.clone(),
                "--connect".into(),
                connect,
                "--jobid".into(),
                spec.jobid.to_string(),
            ]
        };
        if spec.kind == LauncherKind::Slurm {
            let names = spec.hosts.join(",");
            let connect = connect_list(&spec.hosts[0], &addrs, port);
            let mut argv = vec![
                spec.exec.unwrap_or("srun").to_string(),
                format!("--nodelist={names}"),
                format!("--nodes={}", spec.hosts.len()),
                format!("--ntasks={}", spec.hosts.len()),
                "--ntasks-per-node=1".into(),
                "--kill-on-bad-exit=1".into(),
                "--input=all".into(),
                "--cpu-bind=none".into(),
                "--overlap".into(),
                "--export=ALL".into(),
                "--job-name=protean-proxy".into(),
            ];
            argv.extend(base(connect));
            argv.extend(["--slurm-hosts".into(), names]);
            let all: Vec<usize> = (0..spec.hosts.len()).collect();
            r.spawn_launcher(&argv, all)?;
        } else {
            for (i, h) in spec.hosts.iter().enumerate() {
                let connect = connect_list(h, &addrs, port);
                let mut proxy_cmd = base(connect);
                proxy_cmd.extend(["--index".into(), i.to_string()]);
                let argv: Vec<String> = match spec.kind {
                    LauncherKind::Fork => match spec.exec {
                        // A wrapper given the host first, as ssh would be.
                        Some(e) => [e.to_string(), h.clone()]
                            .into_iter()
                            .chain(proxy_cmd)
                            .collect(),
                        None => proxy_cmd,
                    },
                    kind => {
                        let mut v = vec![spec.exec.unwrap_or(kind.name()).to_string()];
                        if kind == LauncherKind::Ssh {
                            v.extend(
                                ["-x", "-T", "-o", "BatchMode=yes"]
                                    .iter()
                                    .map(|s| s.to_string()),
                            );
                        }
                        v.push(h.clone());
                        // ssh and rsh hand the words to the remote shell: one quoted line.
                        let line: Vec<String> = proxy_cmd.iter().map(|w| shell_quote(w)).collect();
                        v.push(line.join(" "));
                        v
                    }
                };
                r.spawn_launcher(&argv, vec![i])?;
            }
        }
        Ok(r)
    }

    fn spawn_launcher(&mut self, argv: &[String], hosts: Vec<usize>) -> Result<(), String> {
        let (err_r, err_w) = sys::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
        sys::set_nonblocking(&err_r).map_err(|e| format!("fcntl: {e}"))?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::from(err_w))
            // Out of mpirun's process group: a Ctrl-C at the terminal reaches mpirun alone,
            // which then ends the job in order.
            .process_group(0);
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the hook runs between fork and exec and calls only async-signal-safe
        // functions (prctl, getppid, sigprocmask, signal).
        unsafe {
            cmd.pre_exec(move || {
                sys::die_with_parent_raw(libc::SIGKILL, parent)?;
                sys::reset_signals_raw()
            });
        }
        let what = hosts
            .iter()
            .map(|&h| self.hosts[h].name.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("host {what}: cannot start the launcher '{}': {e}", argv[0]))?;
        // The secret, then end of input: the proxy reads one line.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "{}", self.secret.to_hex());
        }
        let idx = self.launchers.len();
        for &h in &hosts {
            self.hosts[h].launcher = idx;
        }
        self.launchers.push(Launcher {
            pid: child.id() as libc::pid_t,
            hosts,
            stderr: Some(err_r),
            partial: Vec::new(),
            status: None,
        });
        Ok(())
    }

    /// Descriptors to poll.
    pub fn poll_fds(&self, add: &mut dyn FnMut(RawFd, libc::c_short, RemoteSrc)) {
        add(self.listener.as_raw_fd(), libc::POLLIN, RemoteSrc::Listener);
        for p in &self.pending {
            add(p.stream.as_raw_fd(), libc::POLLIN, RemoteSrc::Pending(p.id));
        }
        for (i, h) in self.hosts.iter().enumerate() {
            if let Some(s) = &h.stream {
                let mut ev = libc::POLLIN;
                if !h.outq.is_empty() {
                    ev |= libc::POLLOUT;
                }
                add(s.as_raw_fd(), ev, RemoteSrc::Host(i));
            }
        }
        for (i, l) in self.launchers.iter().enumerate() {
            if let Some(fd) = &l.stderr {
                add(fd.as_raw_fd(), libc::POLLIN, RemoteSrc::LauncherErr(i));
            }
        }
    }

    /// The next time a timer of ours needs attention.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let mut at = self.pending.iter().map(|p| p.deadline).min();
        if self.hosts.iter().any(|h| h.state == HostState::Launching) {
            let t = self.started + self.launch_timeout;
            at = Some(at.map_or(t, |a| a.min(t)));
        }
        at
    }

    /// Timers: hellos that took too long, hosts whose proxy never came.
    pub fn check_timers(&mut self, now: Instant, events: &mut Vec<RemoteEvent>) {
        let before = self.pending.len();
        self.pending.retain(|p| p.deadline > now);
        self.refused += before - self.pending.len();
        if now >= self.started + self.launch_timeout {
            for i in 0..self.hosts.len() {
                if self.hosts[i].state == HostState::Launching {
                    let why = format!(
                        "its proxy did not connect within {} s (launcher {})",
                        self.launch_timeout.as_secs_f64(),
                        self.kind.name()
                    );
                    self.lose(i, why, events);
                }
            }
        }
    }

    fn lose(&mut self, h: usize, why: String, events: &mut Vec<RemoteEvent>) {
        let host = &mut self.hosts[h];
        if matches!(host.state, HostState::Done | HostState::Lost) {
            return;
        }
        host.state = HostState::Lost;
        host.stream = None;
        host.session = None;
        host.outq.clear();
        // A launcher of this host alone that is still running has nothing left to do.
        let l = &self.launchers[host.launcher];
        if l.status.is_none() && l.hosts.len() == 1 {
            sys::kill(l.pid, libc::SIGKILL);
        }
        events.push(RemoteEvent::Lost(h, why));
    }

    /// Handles a ready descriptor.
    pub fn ready(&mut self, src: RemoteSrc, revents: libc::c_short, events: &mut Vec<RemoteEvent>) {
        match src {
            RemoteSrc::Listener => self.accept(),
            RemoteSrc::Pending(id) => {
                if let Some(i) = self.pending.iter().position(|p| p.id == id) {
                    self.advance_pending(i, events);
                }
            }
            RemoteSrc::Host(h) => {
                if revents & libc::POLLOUT != 0 {
                    self.flush(h, events);
                }
                if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    self.read_host(h, events);
                }
            }
            RemoteSrc::LauncherErr(i) => self.read_launcher_err(i, events),
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = s.set_nodelay(true);
                    if self.pending.len() >= 256 {
                        // Many unfinished hellos at once: not our proxies.
                        self.refused += 1;
                        continue;
                    }
                    self.next_pending += 1;
                    self.pending.push(Pending {
                        id: self.next_pending,
                        stream: s,
                        buf: Vec::new(),
                        deadline: Instant::now() + HELLO_TIMEOUT,
                        answered: None,
                    });
                }
                Err(_) => return,
            }
        }
    }

    fn advance_pending(&mut self, i: usize, events: &mut Vec<RemoteEvent>) {
        let want = if self.pending[i].answered.is_some() {
            32
        } else {
            HELLO_LEN
        };
        let mut buf = [0u8; 64];
        let p = &mut self.pending[i];
        let need = want - p.buf.len();
        let ok = match sys::read(p.stream.as_raw_fd(), &mut buf[..need]) {
            Ok(0) => false,
            Ok(n) => {
                p.buf.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        };
        if !ok {
            return self.refuse(i);
        }
        if p.buf.len() < want {
            return;
        }
        match p.answered {
            None => {
                let Some((index, nonce_p)) = channel::parse_hello(&p.buf) else {
                    return self.refuse(i);
                };
                let taken = self
                    .hosts
                    .get(index as usize)
                    .is_none_or(|h| h.state != HostState::Launching);
                let Ok(nonce_m) = channel::nonce() else {
                    return self.refuse(i);
                };
                if taken {
                    return self.refuse(i);
                }
                let hs = Handshake {
                    secret: &self.secret,
                    jobid: &self.jobid,
                    index,
                    nonce_p,
                    nonce_m,
                };
                let mut answer = Vec::with_capacity(ANSWER_LEN);
                answer.extend_from_slice(&nonce_m);
                answer.extend_from_slice(&hs.mpirun_mac());
                // 64 bytes into a fresh socket's empty buffer: written whole or the peer is
                // not worth waiting for.
                if !matches!(sys::write(p.stream.as_raw_fd(), &answer), Ok(n) if n == answer.len())
                {
                    return self.refuse(i);
                }
                p.buf.clear();
                p.answered = Some((index, nonce_p, nonce_m));
            }
            Some((index, nonce_p, nonce_m)) => {
                let hs = Handshake {
                    secret: &self.secret,
                    jobid: &self.jobid,
                    index,
                    nonce_p,
                    nonce_m,
                };
                let h = index as usize;
                if !hs.check_proxy(&p.buf) || self.hosts[h].state != HostState::Launching {
                    return self.refuse(i);
                }
                let session = hs.mpirun_session();
                let p = self.pending.swap_remove(i);
                let host = &mut self.hosts[h];
                host.stream = Some(p.stream);
                host.session = Some(session);
                host.state = HostState::Connected;
                events.push(RemoteEvent::Connected(h));
            }
        }
    }

    fn refuse(&mut self, i: usize) {
        self.pending.swap_remove(i);
        self.refused += 1;
    }

    /// Queues a message for a host's proxy (dropped when the host is not connected).
    pub fn send(&mut self, h: usize, m: &ToProxy, events: &mut Vec<RemoteEvent>) {
        let host = &mut self.hosts[h];
        let Some(session) = &mut host.session else {
            return;
        };
        let f = session.seal(&m.encode());
        host.outq.extend_from_slice(&f);
        self.flush(h, events);
    }

    /// Sends to every connected host.
    pub fn broadcast(&mut self, m: &ToProxy, events: &mut Vec<RemoteEvent>) {
        for h in 0..self.hosts.len() {
            self.send(h, m, events);
        }
    }

    fn flush(&mut self, h: usize, events: &mut Vec<RemoteEvent>) {
        loop {
            let host = &mut self.hosts[h];
            let Some(s) = &host.stream else { return };
            if host.outq.is_empty() {
                return;
            }
            match sys::write(s.as_raw_fd(), &host.outq) {
                Ok(n) => {
                    host.outq.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => return self.lose(h, connection_failed(&e), events),
            }
        }
    }

    fn read_host(&mut self, h: usize, events: &mut Vec<RemoteEvent>) {
        let mut buf = vec![0u8; 65536];
        loop {
            let host = &mut self.hosts[h];
            let (Some(s), Some(session)) = (&host.stream, &mut host.session) else {
                return;
            };
            match sys::read(s.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    if host.state == HostState::Done {
                        host.stream = None;
                        host.session = None;
                        return;
                    }
                    return self.lose(h, PROXY_GONE.to_string(), events);
                }
                Ok(n) => {
                    session.push(&buf[..n]);
                    while let Some(f) = self.hosts[h].session.as_mut().and_then(|s| s.next_frame())
                    {
                        match f.and_then(|b| ToMpirun::decode(&b)) {
                            Ok(ToMpirun::Done) => {
                                self.hosts[h].state = HostState::Done;
                                events.push(RemoteEvent::Message(h, ToMpirun::Done));
                            }
                            Ok(m) => events.push(RemoteEvent::Message(h, m)),
                            Err(e) => {
                                return self.lose(
                                    h,
                                    format!("bad message from its proxy: {e}"),
                                    events,
                                )
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => return self.lose(h, connection_failed(&e), events),
            }
        }
    }

    fn read_launcher_err(&mut self, i: usize, events: &mut Vec<RemoteEvent>) {
        let mut buf = [0u8; 4096];
        let l = &mut self.launchers[i];
        let Some(fd) = &l.stderr else { return };
        let eof = match sys::read(fd.as_raw_fd(), &mut buf) {
            Ok(0) => true,
            Ok(n) => {
                l.partial.extend_from_slice(&buf[..n]);
                false
            }
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        };
        let host = l.hosts.first().copied().unwrap_or(0);
        while let Some(nl) = l.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = l.partial.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line).trim_end().to_string();
            if !text.is_empty() {
                events.push(RemoteEvent::Stderr(host, text));
            }
        }
        if eof || l.partial.len() > 4096 {
            let text = String::from_utf8_lossy(&l.partial).trim_end().to_string();
            l.partial.clear();
            if !text.is_empty() {
                events.push(RemoteEvent::Stderr(host, text));
            }
        }
        if eof {
            l.stderr = None;
        }
    }

    /// A child of mpirun ended: true when it was one of our launchers.
    pub fn reaped(
        &mut self,
        pid: libc::pid_t,
        status: ExitStatus,
        events: &mut Vec<RemoteEvent>,
    ) -> bool {
        let Some(i) = self.launchers.iter().position(|l| l.pid == pid) else {
            return false;
        };
        // Its last words first.
        while self.launchers[i].stderr.is_some() {
            let before = events.len();
            self.read_launcher_err(i, events);
            if events.len() == before {
                break;
            }
        }
        self.launchers[i].status = Some(status);
        let how = match status {
            ExitStatus::Exited(c) => format!("exited with status {c}"),
            ExitStatus::Signaled(s) => {
                format!("was killed by signal {s} ({})", sys::signal_name(s))
            }
        };
        for h in self.launchers[i].hosts.clone() {
            if self.hosts[h].state == HostState::Launching {
                let why = format!("{} {how} before its proxy connected", self.kind.name());
                self.lose(h, why, events);
            }
        }
        true
    }

    /// Ends the launchers of hosts whose proxy has not connected (teardown).
    pub fn stop_launching(&mut self, sig: libc::c_int) {
        for l in &self.launchers {
            if l.status.is_none()
                && l.hosts
                    .iter()
                    .any(|&h| self.hosts[h].state == HostState::Launching)
            {
                sys::kill(l.pid, sig);
            }
        }
    }

    /// Every host is done or lost, and every launcher has been reaped.
    pub fn finished(&self) -> bool {
        self.hosts
            .iter()
            .all(|h| matches!(h.state, HostState::Done | HostState::Lost))
            && self.launchers.iter().all(|l| l.status.is_some())
    }

    /// Every host is done or lost (launchers may still be exiting).
    pub fn hosts_finished(&self) -> bool {
        self.hosts
            .iter()
            .all(|h| matches!(h.state, HostState::Done | HostState::Lost))
    }

    /// SIGKILL to launchers still running (the end of a teardown that took too long).
    pub fn kill_launchers(&mut self) {
        for l in &self.launchers {
            if l.status.is_none() {
                sys::kill(l.pid, libc::SIGKILL);
            }
        }
    }

    /// Closes every connection to a finished host (after its Done).
    pub fn close_done(&mut self) {
        for h in &mut self.hosts {
            if h.state == HostState::Done && h.outq.is_empty() {
                h.stream = None;
                h.session = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_hosts() {
        assert!(is_local_host("localhost"));
        assert!(is_local_host(&sys::hostname()));
        assert!(is_local_host("127.0.0.1"));
        assert!(is_local_host("[::1]"));
        assert!(!is_local_host("192.0.2.77"));
        assert!(!is_local_host("no-such-host.invalid"));
    }

    #[test]
    fn quoting_for_the_remote_shell() {
        assert_eq!(
            shell_quote("/opt/protean/bin/protean-proxy"),
            "/opt/protean/bin/protean-proxy"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn connect_lists_put_the_route_first() {
        let l = connect_list("127.0.0.1", &[Ipv4Addr::new(10, 0, 0, 1)], 99);
        assert_eq!(l, "127.0.0.1,10.0.0.1:99");
        let l = connect_list("h1", &[Ipv4Addr::new(10, 0, 0, 1)], 99);
        assert_eq!(l, "10.0.0.1:99");
        assert_eq!(connect_list("h1", &[], 5), "127.0.0.1:5");
    }
}
