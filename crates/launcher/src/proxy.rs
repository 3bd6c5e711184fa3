//! `protean-proxy`: mpirun's hands on one host of a multi-host job.
//!
//! Started by mpirun through the launcher (`ssh host protean-proxy --connect ADDR:PORT --jobid J
//! --index I`, or one `srun` for all hosts), it reads the job's secret from its standard input,
//! connects back to mpirun and proves it holds the secret (see [`crate::channel`]), then waits
//! for its [`Launch`]: the ranks of this host. It forks them (each with a PMI socketpair, its
//! output on pipes, its binding, and `PR_SET_PDEATHSIG`), and from then on relays: PMI messages
//! both ways (mpirun keeps the job's one key-value store), output to mpirun, standard input to
//! rank 0, signals to the ranks, and each rank's end, after its last PMI message.
//!
//! Invariants, as mpirun's own: the ranks of this host form one process group that holds
//! nothing else; the proxy is their subreaper; it reports `Done` and exits only when every rank
//! is reaped and the group is empty. When mpirun goes away (the connection ends, however: mpirun
//! killed, host unreachable), the proxy ends its ranks (SIGTERM, SIGKILL after the grace time)
//! and exits; when the proxy itself is killed, its ranks get SIGKILL from the kernel.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use protean_pmi::Framer;

use crate::channel::{self, Secret, Session};
use crate::msg::{Launch, ToMpirun, ToProxy};
use crate::spawn::{self, RankSpec};
use crate::sys::{self, ExitStatus};

/// Time between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(500);
/// Time after SIGKILL after which we stop waiting for the group to empty.
const GIVE_UP: Duration = Duration::from_secs(5);
/// Time to finish the hello with mpirun.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Time to try one of mpirun's addresses.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// Output waiting for the connection above which the ranks' pipes are not read.
const OUTQ_HIGH: usize = 4 << 20;

fn say(msg: &str) {
    let host = sys::hostname();
    let _ = writeln!(io::stderr().lock(), "protean-proxy@{host}: {msg}");
}

struct Args {
    connect: String,
    jobid: String,
    index: u32,
}

const USAGE: &str = "usage: protean-proxy --connect ADDR:PORT --jobid JOBID \
                     (--index N | --slurm-hosts H1,H2,...)\n\
                     (started by mpirun; reads the job's secret from standard input)";

fn parse_args(args: Vec<String>) -> Result<Args, String> {
    let mut connect = None;
    let mut jobid = None;
    let mut index = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--connect" => connect = Some(val()?),
            "--jobid" => jobid = Some(val()?),
            "--index" => {
                let v = val()?;
                index = Some(
                    v.parse()
                        .map_err(|_| format!("--index {v:?}: not a number"))?,
                );
            }
            "--slurm-hosts" => {
                // One srun starts every proxy: each finds itself in the list by its node name.
                let list = val()?;
                let me = std::env::var("SLURMD_NODENAME").unwrap_or_else(|_| sys::hostname());
                let pos = list.split(',').position(|h| h == me).ok_or_else(|| {
                    format!("this node ({me}) is not among the job's hosts ({list})")
                })?;
                index = Some(pos as u32);
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    match (connect, jobid, index) {
        (Some(connect), Some(jobid), Some(index)) => Ok(Args {
            connect,
            jobid,
            index,
        }),
        _ => Err(USAGE.into()),
    }
}

/// Reads the secret: one line of hex on standard input.
fn read_secret() -> Result<Secret, String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    let mut stdin = io::stdin().lock();
    while line.len() < 128 {
        match stdin.read(&mut b) {
            Ok(0) => break,
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) => line.push(b[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read the job's secret: {e}")),
        }
    }
    Secret::from_hex(&String::from_utf8_lossy(&line)).ok_or_else(|| {
        "no job secret on standard input (protean-proxy is started by mpirun)".to_string()
    })
}

/// Connects to the first of mpirun's addresses (`A1,A2,...:PORT`) that answers and says hello.
fn connect(
    addr: &str,
    secret: &Secret,
    jobid: &str,
    index: u32,
) -> Result<(TcpStream, Session), String> {
    let (ips, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("--connect {addr:?}: expected ADDRESSES:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("--connect {addr:?}: bad port"))?;
    let mut last = None;
    for ip in ips.split(',') {
        let a: SocketAddr = match ip.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port),
            Err(_) => {
                last = Some(format!("--connect: {ip:?} is not an IP address"));
                continue;
            }
        };
        match TcpStream::connect_timeout(&a, ATTEMPT_TIMEOUT) {
            Ok(mut s) => {
                let _ = s.set_nodelay(true);
                s.set_read_timeout(Some(CONNECT_TIMEOUT))
                    .map_err(|e| e.to_string())?;
                let session = channel::proxy_hello(&mut s, secret, jobid, index)
                    .map_err(|e| format!("hello with mpirun at {a} failed: {e}"))?;
                s.set_read_timeout(None).map_err(|e| e.to_string())?;
                s.set_nonblocking(true).map_err(|e| e.to_string())?;
                return Ok((s, session));
            }
            Err(e) => last = Some(format!("cannot connect to mpirun at {a}: {e}")),
        }
    }
    Err(last.unwrap_or_else(|| format!("--connect {addr:?}: no address")))
}

struct PRank {
    global: u32,
    pid: libc::pid_t,
    pmi: Option<OwnedFd>,
    framer: Framer,
    outq: Vec<u8>,
    reaped: bool,
}

struct Pipe {
    fd: OwnedFd,
    rank: u32,
    stderr: bool,
}

struct Proxy {
    conn: TcpStream,
    session: Session,
    /// Sealed bytes waiting for the connection.
    outq: Vec<u8>,
    /// mpirun closed the connection or it failed.
    conn_gone: bool,
    launched: bool,
    ranks: Vec<PRank>,
    by_pid: HashMap<libc::pid_t, usize>,
    pipes: Vec<Pipe>,
    stdin_to: Option<OwnedFd>,
    stdin_buf: Vec<u8>,
    stdin_eof: bool,
    pgid: libc::pid_t,
    group_alive: bool,
    signals: sys::SignalFd,
    sigkill_at: Option<Instant>,
    killed_at: Option<Instant>,
}

/// Runs the proxy; returns its exit status.
pub fn main(args: Vec<String>) -> i32 {
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            say(&e);
            return 2;
        }
    };
    sys::ignore_signal(libc::SIGPIPE);
    sys::ignore_signal(libc::SIGTTIN);
    let signals =
        match sys::SignalFd::new(&[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                say(&format!("cannot set up signal handling: {e}"));
                return 1;
            }
        };
    // Whatever started us (sshd's session, slurmstepd, mpirun) going away ends us too.
    if let Err(e) = sys::die_with_parent(libc::SIGTERM) {
        say(&format!("warning: cannot watch the parent process: {e}"));
    }
    if let Err(e) = sys::become_subreaper() {
        say(&format!("warning: cannot become a child subreaper: {e}"));
    }
    let secret = match read_secret() {
        Ok(s) => s,
        Err(e) => {
            say(&e);
            return 1;
        }
    };
    let (conn, session) = match connect(&args.connect, &secret, &args.jobid, args.index) {
        Ok(c) => c,
        Err(e) => {
            say(&e);
            return 1;
        }
    };
    let mut p = Proxy {
        conn,
        session,
        outq: Vec::new(),
        conn_gone: false,
        launched: false,
        ranks: Vec::new(),
        by_pid: HashMap::new(),
        pipes: Vec::new(),
        stdin_to: None,
        stdin_buf: Vec::new(),
        stdin_eof: false,
        pgid: 0,
        group_alive: false,
        signals,
        sigkill_at: None,
        killed_at: None,
    };
    p.run()
}

impl Proxy {
    fn send(&mut self, m: &ToMpirun) {
        if self.conn_gone {
            return;
        }
        let f = self.session.seal(&m.encode());
        self.outq.extend_from_slice(&f);
        self.flush();
    }

    fn flush(&mut self) {
        while !self.outq.is_empty() && !self.conn_gone {
            match sys::write(self.conn.as_raw_fd(), &self.outq) {
                Ok(n) => {
                    self.outq.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => self.lost_mpirun(),
            }
        }
    }

    fn lost_mpirun(&mut self) {
        if self.conn_gone {
            return;
        }
        self.conn_gone = true;
        self.outq.clear();
        if !self.all_reaped() {
            say("lost the connection to mpirun; ending the ranks of this host");
        }
        self.terminate();
    }

    fn all_reaped(&self) -> bool {
        self.ranks.iter().all(|r| r.reaped)
    }

    fn terminate(&mut self) {
        if self.sigkill_at.is_some() || self.killed_at.is_some() {
            return;
        }
        self.signal_group(libc::SIGTERM);
        self.signal_group(libc::SIGCONT);
        self.sigkill_at = Some(Instant::now() + GRACE);
    }

    fn kill_now(&mut self) {
        self.signal_group(libc::SIGKILL);
        for r in &self.ranks {
            if !r.reaped {
                sys::kill(r.pid, libc::SIGKILL);
            }
        }
        self.killed_at.get_or_insert_with(Instant::now);
    }

    fn signal_group(&mut self, sig: libc::c_int) {
        if self.group_alive {
            self.group_alive = sys::kill_group(self.pgid, sig).unwrap_or(false);
        }
    }

    fn launch(&mut self, l: Launch) {
        self.launched = true;
        self.start(l);
    }

    /// Forks the ranks of `l` (the launch, or a spawn onto this host), each with its PMI
    /// socketpair and output pipes, into this host's process group.
    fn start(&mut self, l: Launch) {
        let n = l.ranks.len();
        let env: Vec<(OsString, OsString)> = l
            .env
            .into_iter()
            .map(|(k, v)| (OsString::from_vec(k), OsString::from_vec(v)))
            .collect();
        let program: Vec<OsString> = l.program.into_iter().map(OsString::from_vec).collect();
        if program.is_empty() {
            self.send(&ToMpirun::StartFailed {
                rank: l.ranks.first().copied().unwrap_or(0),
                code: 1,
                message: "no program to run".into(),
            });
            return;
        }
        let wdir =
            (!l.wdir.is_empty()).then(|| std::path::PathBuf::from(OsString::from_vec(l.wdir)));
        let binds = spawn::bindings(l.bind, n);
        let mut rank0_stdin = None;
        if l.stdin {
            match sys::pipe() {
                Ok((r, w)) => {
                    let _ = sys::set_nonblocking(&w);
                    rank0_stdin = Some(r);
                    self.stdin_to = Some(w);
                }
                Err(e) => say(&format!("cannot create a pipe: {e}")),
            }
        }
        for (local, &global) in l.ranks.iter().enumerate() {
            let fail = |p: &mut Proxy, code: i32, message: String| {
                p.send(&ToMpirun::StartFailed {
                    rank: global,
                    code,
                    message,
                });
            };
            let (mine, theirs) = match sys::socketpair() {
                Ok(p) => p,
                Err(e) => return fail(self, 1, format!("cannot create a socket pair: {e}")),
            };
            let _ = sys::set_nonblocking(&mine);
            let mut outs = Vec::new();
            let mut child_ends = Vec::new();
            for stderr in [false, true] {
                match sys::pipe() {
                    Ok((r, w)) => {
                        let _ = sys::set_nonblocking(&r);
                        outs.push(Pipe {
                            fd: r,
                            rank: global,
                            stderr,
                        });
                        child_ends.push(w);
                    }
                    Err(e) => return fail(self, 1, format!("cannot create a pipe: {e}")),
                }
            }
            let stderr_w = child_ends.pop();
            let stdout_w = child_ends.pop();
            let stdin = match rank0_stdin.take() {
                Some(r) if global == 0 => Stdio::from(r),
                other => {
                    rank0_stdin = other;
                    Stdio::null()
                }
            };
            let cpus = binds.as_ref().map(|b| b[local].as_slice());
            let spec = RankSpec {
                program: &program,
                env: &env,
                rank: global.saturating_sub(l.first) as usize,
                size: l.size as usize,
                local_rank: local,
                local_size: n,
                jobid: &l.jobid,
                pmi: &theirs,
                stdin,
                stdout: stdout_w,
                stderr: stderr_w,
                pgid: self.pgid,
                cpus,
                wdir: wdir.as_deref(),
                spawned: l.spawned,
            };
            match spawn::spawn_rank(spec) {
                Ok(child) => {
                    let pid = child.id() as libc::pid_t;
                    if self.pgid == 0 {
                        self.pgid = pid;
                        self.group_alive = true;
                    }
                    self.by_pid.insert(pid, self.ranks.len());
                    self.ranks.push(PRank {
                        global,
                        pid,
                        pmi: Some(mine),
                        framer: Framer::default(),
                        outq: Vec::new(),
                        reaped: false,
                    });
                    self.pipes.extend(outs);
                    self.send(&ToMpirun::Started {
                        rank: global,
                        pid: pid as u32,
                    });
                    if l.report_bindings {
                        let what = match (l.bind, cpus) {
                            (1, Some(c)) => format!("bound to a core: cpus {}", spawn::cpu_list(c)),
                            (2, Some(c)) => {
                                format!("bound to a socket: cpus {}", spawn::cpu_list(c))
                            }
                            _ => "not bound".to_string(),
                        };
                        self.send(&ToMpirun::Note(format!(
                            "rank {global} (pid {pid} on {}) {what}",
                            l.host
                        )));
                    }
                }
                Err((code, message)) => return fail(self, code, message),
            }
            drop(theirs);
        }
    }

    fn on_message(&mut self, m: ToProxy) {
        match m {
            ToProxy::Launch(l) if !self.launched => self.launch(l),
            ToProxy::Launch(_) => say("ignoring a second launch request"),
            ToProxy::Spawn(l) if self.launched => self.start(l),
            ToProxy::Spawn(_) => say("ignoring a spawn before the launch"),
            ToProxy::Pmi { rank, text } => {
                if let Some(i) = self.ranks.iter().position(|r| r.global == rank) {
                    self.ranks[i].outq.extend_from_slice(&text);
                    self.flush_pmi(i);
                }
            }
            ToProxy::Stdin(b) if b.is_empty() => {
                self.stdin_eof = true;
                self.write_stdin();
            }
            ToProxy::Stdin(b) => {
                if self.stdin_to.is_some() {
                    self.stdin_buf.extend_from_slice(&b);
                    self.write_stdin();
                }
            }
            ToProxy::Signal(sig) => {
                if matches!(sig, libc::SIGUSR1 | libc::SIGUSR2) {
                    self.signal_group(sig);
                }
            }
            // Before a launch: there is nothing to run any more.
            ToProxy::Terminate | ToProxy::Kill if !self.launched => self.launched = true,
            ToProxy::Terminate => self.terminate(),
            ToProxy::Kill => self.kill_now(),
            ToProxy::KillRanks(ranks) => {
                for g in ranks {
                    match self.ranks.iter().find(|r| r.global == g) {
                        Some(r) if !r.reaped && r.pid > 0 => {
                            sys::kill(r.pid, libc::SIGKILL);
                        }
                        Some(_) => {}
                        None => self.send(&ToMpirun::Exited {
                            rank: g,
                            code: 0,
                            signal: libc::SIGKILL,
                        }),
                    }
                }
            }
        }
    }

    fn write_stdin(&mut self) {
        let Some(to) = &self.stdin_to else {
            self.stdin_buf.clear();
            return;
        };
        while !self.stdin_buf.is_empty() {
            match sys::write(to.as_raw_fd(), &self.stdin_buf) {
                Ok(n) => {
                    self.stdin_buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.stdin_buf.clear();
                    self.stdin_to = None;
                    return;
                }
            }
        }
        if self.stdin_eof {
            self.stdin_to = None;
        }
    }

    fn flush_pmi(&mut self, i: usize) {
        let r = &mut self.ranks[i];
        let Some(fd) = &r.pmi else {
            r.outq.clear();
            return;
        };
        while !r.outq.is_empty() {
            match sys::write(fd.as_raw_fd(), &r.outq) {
                Ok(n) => {
                    r.outq.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    r.outq.clear();
                    return;
                }
            }
        }
    }

    fn read_pmi(&mut self, i: usize) {
        let mut buf = [0u8; 8192];
        while let Some(fd) = &self.ranks[i].pmi {
            match sys::read(fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    self.ranks[i].pmi = None;
                    break;
                }
                Ok(n) => {
                    self.ranks[i].framer.push(&buf[..n]);
                    self.forward_pmi(i);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.ranks[i].pmi = None;
                    break;
                }
            }
        }
        self.forward_pmi(i);
    }

    fn forward_pmi(&mut self, i: usize) {
        while let Some(m) = self.ranks[i].framer.next_message() {
            let text = match m {
                Ok(t) => t.into_bytes(),
                Err(e) => format!("invalid PMI framing: {e}\n").into_bytes(),
            };
            let rank = self.ranks[i].global;
            self.send(&ToMpirun::Pmi { rank, text });
        }
    }

    /// Reads a rank's output pipe; false at its end.
    fn read_pipe(&mut self, i: usize) -> bool {
        let mut buf = vec![0u8; 65536];
        loop {
            match sys::read(self.pipes[i].fd.as_raw_fd(), &mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    let (rank, stderr) = (self.pipes[i].rank, self.pipes[i].stderr);
                    self.send(&ToMpirun::Output {
                        rank,
                        stderr,
                        bytes: buf[..n].to_vec(),
                    });
                    if self.outq.len() > OUTQ_HIGH {
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }

    fn reap(&mut self) {
        while let Some((pid, status)) = sys::reap_any() {
            let Some(&i) = self.by_pid.get(&pid) else {
                continue;
            };
            self.read_pmi(i);
            self.ranks[i].reaped = true;
            if self.ranks[i].global == 0 {
                self.stdin_to = None;
            }
            let (code, signal) = match status {
                ExitStatus::Exited(c) => (c, 0),
                ExitStatus::Signaled(s) => (0, s),
            };
            let rank = self.ranks[i].global;
            self.send(&ToMpirun::Exited { rank, code, signal });
        }
    }

    fn read_conn(&mut self) {
        let mut buf = vec![0u8; 65536];
        loop {
            match sys::read(self.conn.as_raw_fd(), &mut buf) {
                Ok(0) => return self.lost_mpirun(),
                Ok(n) => {
                    self.session.push(&buf[..n]);
                    while let Some(f) = self.session.next_frame() {
                        match f.and_then(|b| ToProxy::decode(&b)) {
                            Ok(m) => self.on_message(m),
                            Err(e) => {
                                say(&format!("bad message from mpirun: {e}"));
                                return self.lost_mpirun();
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.lost_mpirun(),
            }
        }
    }

    fn run(&mut self) -> i32 {
        let mut done_at: Option<Instant> = None;
        loop {
            self.reap();
            let now = Instant::now();
            if self.launched || self.conn_gone {
                if self.all_reaped() && self.group_alive {
                    self.group_alive = sys::kill_group(self.pgid, 0).unwrap_or(false);
                    if self.group_alive {
                        self.terminate();
                    }
                }
                if self.all_reaped() && !self.group_alive {
                    // Output still in the pipes is sent first (for a short while).
                    let until = *done_at.get_or_insert(now + Duration::from_secs(1));
                    if self.pipes.is_empty() || now >= until || self.conn_gone {
                        break;
                    }
                }
            }
            if let Some(at) = self.sigkill_at {
                if self.killed_at.is_none() && now >= at {
                    self.kill_now();
                }
            }
            if let Some(k) = self.killed_at {
                if now >= k + GIVE_UP {
                    say("some processes of the job did not end after SIGKILL; giving up");
                    break;
                }
            }
            self.poll_once();
        }
        if self.conn_gone {
            return 1;
        }
        self.send(&ToMpirun::Done);
        // The last frames, blocking (mpirun is reading).
        let _ = self.conn.set_nonblocking(false);
        let _ = self.conn.set_write_timeout(Some(Duration::from_secs(5)));
        let q = std::mem::take(&mut self.outq);
        let _ = self.conn.write_all(&q);
        let _ = self.conn.shutdown(std::net::Shutdown::Write);
        // Wait for mpirun to close (so that our Done is read before we go).
        let _ = self.conn.set_read_timeout(Some(Duration::from_secs(5)));
        let mut sink = [0u8; 4096];
        while matches!(self.conn.read(&mut sink), Ok(n) if n > 0) {}
        0
    }

    fn poll_once(&mut self) {
        #[derive(Clone, Copy)]
        enum Src {
            Signals,
            Conn,
            Pmi(usize),
            Pipe(usize),
            Stdin,
        }
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut srcs = Vec::new();
        let mut add = |fd: RawFd, events: libc::c_short, s: Src| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            srcs.push(s);
        };
        add(self.signals.as_raw_fd(), libc::POLLIN, Src::Signals);
        if !self.conn_gone {
            let mut ev = libc::POLLIN;
            if !self.outq.is_empty() {
                ev |= libc::POLLOUT;
            }
            add(self.conn.as_raw_fd(), ev, Src::Conn);
        }
        for (i, r) in self.ranks.iter().enumerate() {
            if let Some(fd) = &r.pmi {
                let mut ev = libc::POLLIN;
                if !r.outq.is_empty() {
                    ev |= libc::POLLOUT;
                }
                add(fd.as_raw_fd(), ev, Src::Pmi(i));
            }
        }
        if self.outq.len() <= OUTQ_HIGH || self.conn_gone {
            for (i, p) in self.pipes.iter().enumerate() {
                add(p.fd.as_raw_fd(), libc::POLLIN, Src::Pipe(i));
            }
        }
        if let Some(to) = &self.stdin_to {
            if !self.stdin_buf.is_empty() {
                add(to.as_raw_fd(), libc::POLLOUT, Src::Stdin);
            }
        }
        let timeout = if self.sigkill_at.is_some() || self.all_reaped() {
            Some(Duration::from_millis(20))
        } else {
            None
        };
        if sys::poll(&mut fds, timeout).is_err() {
            self.kill_now();
            return;
        }
        let ready: Vec<(Src, libc::c_short)> = srcs
            .into_iter()
            .zip(fds.iter().map(|p| p.revents))
            .filter(|(_, r)| *r != 0)
            .collect();
        let mut closed = Vec::new();
        for (src, rev) in ready {
            match src {
                Src::Signals => {
                    for sig in self.signals.read() {
                        if sig != libc::SIGCHLD {
                            say(&format!(
                                "received signal {sig} ({}); ending the ranks of this host",
                                sys::signal_name(sig)
                            ));
                            if self.sigkill_at.is_some() {
                                self.kill_now();
                            } else {
                                self.terminate();
                            }
                        }
                    }
                }
                Src::Conn => {
                    if rev & libc::POLLOUT != 0 {
                        self.flush();
                    }
                    if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        self.read_conn();
                    }
                }
                Src::Pmi(i) => {
                    if rev & libc::POLLOUT != 0 {
                        self.flush_pmi(i);
                    }
                    if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        self.read_pmi(i);
                    }
                }
                Src::Pipe(i) => {
                    if !self.read_pipe(i) {
                        closed.push(i);
                    }
                }
                Src::Stdin => self.write_stdin(),
            }
        }
        closed.sort_unstable();
        for i in closed.into_iter().rev() {
            self.pipes.remove(i);
        }
    }
}
