//! Starting a job, serving it, and ending it.
//!
//! One thread, one poll(2) loop over: a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP), each rank's
//! PMI socket, the ranks' output pipes (with `--tag-output`), mpirun's standard input and the
//! pipe to rank 0's (stdin forwarding), and the timers (job timeout, SIGKILL grace, drain).
//!
//! Invariants:
//! * All ranks are in one process group, led by rank 0, that contains nothing else we started;
//!   signalling `-pgid` reaches the whole job including the ranks' own children. mpirun is a
//!   child subreaper, so descendants orphaned by a dying rank are re-parented to it and reaped.
//! * A rank is judged only after its PMI socket has been drained, so an `abort` or `finalize`
//!   sent just before exiting is seen before the exit itself.
//! * The first failure decides the exit status and prints the one line that names it; what
//!   dies during the teardown it starts is expected and reported no further.
//! * Whatever the end, the loop returns only when every rank is reaped and the process group is
//!   empty (or did not empty within `GIVE_UP` after SIGKILL, which is reported), and then the
//!   job's shared-memory files are removed.

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use protean_pmi::{Event, Framer, Server};

use crate::options::{Options, StdinTarget};
use crate::sys::{self, ExitStatus};

/// Time between SIGTERM and SIGKILL in a teardown.
const GRACE: Duration = Duration::from_millis(500);
/// Time after SIGKILL after which we stop waiting for the process group to empty.
const GIVE_UP: Duration = Duration::from_secs(5);
/// Time we keep reading output pipes after the job is gone (a process outside the group may
/// still hold one open).
const DRAIN: Duration = Duration::from_secs(1);
/// Longest partial output line kept before it is printed anyway.
const MAX_PARTIAL_LINE: usize = 64 * 1024;

/// Exit status when the program cannot be started.
const EXIT_CANNOT_START: i32 = 127;
/// Exit status on timeout (as timeout(1)).
const EXIT_TIMEOUT: i32 = 124;

struct Rank {
    pid: libc::pid_t,
    pmi: Option<OwnedFd>,
    framer: Framer,
    outq: Vec<u8>,
    status: Option<ExitStatus>,
}

struct OutStream {
    fd: OwnedFd,
    rank: usize,
    stderr: bool,
    partial: Vec<u8>,
}

struct StdinForward {
    /// Write end of rank 0's standard input; None once closed.
    to: Option<OwnedFd>,
    buf: Vec<u8>,
    /// mpirun's standard input reached its end (or failed).
    eof: bool,
}

struct Teardown {
    sigkill_at: Instant,
    killed_at: Option<Instant>,
}

struct Job {
    jobid: String,
    ranks: Vec<Rank>,
    by_pid: HashMap<libc::pid_t, usize>,
    server: Server,
    pgid: libc::pid_t,
    outputs: Vec<OutStream>,
    stdin: Option<StdinForward>,
    signals: sys::SignalFd,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    teardown: Option<Teardown>,
    /// The first failure's exit status.
    failure: Option<i32>,
    group_alive: bool,
    drain_until: Option<Instant>,
}

/// A job identifier unique on this machine: `<mpirun pid>x<8 random hex digits>`.
pub fn new_jobid() -> String {
    format!("{}x{:08x}", std::process::id(), sys::random_u32())
}

/// Removes `/dev/shm/protean-<jobid>-*`; returns how many files were removed.
pub fn remove_job_segments(dir: &std::path::Path, jobid: &str) -> usize {
    let prefix = format!("protean-{jobid}-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if name.to_str().is_some_and(|n| n.starts_with(&prefix))
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

fn say(msg: &str) {
    let _ = writeln!(io::stderr().lock(), "mpirun: {msg}");
}

fn fmt_seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}", d.as_secs())
    } else {
        format!("{}", d.as_secs_f64())
    }
}

/// Runs a job to its end and returns mpirun's exit status.
pub fn run(opts: Options) -> i32 {
    // A background mpirun reading a terminal gets EIO instead of being stopped; a closed
    // reader of a pipe is EPIPE, not death.
    sys::ignore_signal(libc::SIGTTIN);
    sys::ignore_signal(libc::SIGPIPE);
    let signals =
        match sys::SignalFd::new(&[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                say(&format!("cannot set up signal handling: {e}"));
                return 1;
            }
        };
    if let Err(e) = sys::become_subreaper() {
        say(&format!("warning: cannot become a child subreaper: {e}"));
    }
    let jobid = new_jobid();
    let universe = opts.np.max(sys::cpu_count()) as i32;
    let server = Server::new(opts.np, &format!("kvs_{jobid}"), 0, universe);
    let mut job = Job {
        jobid,
        ranks: Vec::new(),
        by_pid: HashMap::new(),
        server,
        pgid: 0,
        outputs: Vec::new(),
        stdin: None,
        signals,
        timeout: opts.timeout,
        deadline: opts.timeout.map(|t| Instant::now() + t),
        teardown: None,
        failure: None,
        group_alive: false,
        drain_until: None,
    };
    if let Err((code, msg)) = job.start(&opts) {
        job.fail(code, &msg);
    }
    job.event_loop();
    remove_job_segments(std::path::Path::new("/dev/shm"), &job.jobid);
    job.failure.unwrap_or(0)
}

impl Job {
    /// Starts every rank. On failure the ranks started so far are left for the teardown.
    fn start(&mut self, opts: &Options) -> Result<(), (i32, String)> {
        let np = opts.np;
        let program = &opts.program[0];
        let mut rank0_stdin = None;
        if opts.stdin == StdinTarget::Rank0 {
            let (r, w) = sys::pipe().map_err(|e| (1, format!("cannot create a pipe: {e}")))?;
            sys::set_nonblocking(&w).map_err(|e| (1, format!("fcntl: {e}")))?;
            rank0_stdin = Some(r);
            self.stdin = Some(StdinForward {
                to: Some(w),
                buf: Vec::new(),
                eof: false,
            });
        }
        for rank in 0..np {
            let err = |e: io::Error| (1, format!("cannot set up rank {rank}: {e}"));
            let (mine, theirs) = sys::socketpair().map_err(err)?;
            sys::set_nonblocking(&mine).map_err(err)?;
            let mut cmd = Command::new(program);
            cmd.args(&opts.program[1..]);
            // A PMI_PORT/PMI_ID inherited from an outer launcher must not confuse the ranks.
            for var in ["PMI_PORT", "PMI_ID", "PMI_FD", "PMI_RANK", "PMI_SIZE"] {
                cmd.env_remove(var);
            }
            for (k, v) in &opts.env {
                cmd.env(k, v);
            }
            let child_fd = theirs.as_raw_fd();
            cmd.env("PMI_FD", child_fd.to_string())
                .env("PMI_RANK", rank.to_string())
                .env("PMI_SIZE", np.to_string())
                .env("PMI_SPAWNED", "0")
                .env("MPI_LOCALRANKID", rank.to_string())
                .env("MPI_LOCALNRANKS", np.to_string())
                .env("PROTEAN_JOBID", &self.jobid)
                .env("PROTEAN_LAUNCHER", "1");
            cmd.process_group(self.pgid);
            match rank0_stdin.take() {
                Some(r) if rank == 0 => cmd.stdin(Stdio::from(r)),
                _ => cmd.stdin(Stdio::null()),
            };
            if opts.tag_output {
                for stderr in [false, true] {
                    let (r, w) = sys::pipe().map_err(err)?;
                    sys::set_nonblocking(&r).map_err(err)?;
                    if stderr {
                        cmd.stderr(Stdio::from(w));
                    } else {
                        cmd.stdout(Stdio::from(w));
                    }
                    self.outputs.push(OutStream {
                        fd: r,
                        rank,
                        stderr,
                        partial: Vec::new(),
                    });
                }
            }
            // SAFETY: the hook runs in the child between fork and exec and calls only
            // async-signal-safe functions (fcntl, sigprocmask, signal); `child_fd` is open in the
            // child because the parent holds `theirs` until after spawn.
            unsafe {
                cmd.pre_exec(move || {
                    sys::clear_cloexec_raw(child_fd)?;
                    sys::reset_signals_raw()
                });
            }
            let child = cmd.spawn().map_err(|e| {
                let name = program.to_string_lossy();
                let code = match e.kind() {
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => EXIT_CANNOT_START,
                    _ => 1,
                };
                (code, format!("cannot start '{name}': {e}"))
            })?;
            drop(theirs);
            let pid = child.id() as libc::pid_t;
            if rank == 0 {
                self.pgid = pid;
                self.group_alive = true;
            }
            self.by_pid.insert(pid, rank);
            self.ranks.push(Rank {
                pid,
                pmi: Some(mine),
                framer: Framer::default(),
                outq: Vec::new(),
                status: None,
            });
        }
        Ok(())
    }

    /// Records the first failure, says why, and starts the teardown. Later failures (the ones
    /// the teardown causes) change nothing.
    fn fail(&mut self, code: i32, msg: &str) {
        if self.failure.is_some() {
            return;
        }
        self.failure = Some(code);
        say(msg);
        self.terminate();
    }

    /// SIGTERM to the whole job now, SIGKILL after the grace time.
    fn terminate(&mut self) {
        if self.teardown.is_some() {
            return;
        }
        self.signal_group(libc::SIGTERM);
        // A stopped process would not act on SIGTERM until continued.
        self.signal_group(libc::SIGCONT);
        self.teardown = Some(Teardown {
            sigkill_at: Instant::now() + GRACE,
            killed_at: None,
        });
    }

    fn kill_now(&mut self) {
        self.signal_group(libc::SIGKILL);
        // Ranks that left the group (setpgid/setsid) are still ours to end.
        for r in &self.ranks {
            if r.status.is_none() {
                sys::kill(r.pid, libc::SIGKILL);
            }
        }
        let now = Instant::now();
        match &mut self.teardown {
            Some(t) if t.killed_at.is_none() => t.killed_at = Some(now),
            Some(_) => {}
            None => {
                self.teardown = Some(Teardown {
                    sigkill_at: now,
                    killed_at: Some(now),
                })
            }
        }
    }

    fn signal_group(&mut self, sig: libc::c_int) {
        if !self.group_alive {
            return;
        }
        match sys::kill_group(self.pgid, sig) {
            Ok(alive) => self.group_alive = alive,
            Err(e) => say(&format!("cannot signal the job's process group: {e}")),
        }
    }

    fn all_reaped(&self) -> bool {
        self.ranks.iter().all(|r| r.status.is_some())
    }

    fn event_loop(&mut self) {
        loop {
            self.reap();
            let now = Instant::now();
            if self.all_reaped() {
                if self.group_alive {
                    self.group_alive = sys::kill_group(self.pgid, 0).unwrap_or(false);
                }
                if self.group_alive {
                    // Leftover descendants of finished ranks: end them too.
                    self.terminate();
                } else {
                    let until = *self.drain_until.get_or_insert(now + DRAIN);
                    let draining = !self.outputs.is_empty() && now < until;
                    if !draining {
                        break;
                    }
                }
            }
            if let Some(t) = &self.teardown {
                match t.killed_at {
                    None if now >= t.sigkill_at => self.kill_now(),
                    Some(at) if now >= at + GIVE_UP => {
                        say("some processes of the job did not end after SIGKILL; giving up");
                        break;
                    }
                    _ => {}
                }
            }
            if self.teardown.is_none() {
                if let (Some(deadline), Some(t)) = (self.deadline, self.timeout) {
                    if now >= deadline {
                        self.fail(
                            EXIT_TIMEOUT,
                            &format!(
                                "the job timed out after {} seconds (--timeout or \
                                 MPIEXEC_TIMEOUT); terminating the job",
                                fmt_seconds(t)
                            ),
                        );
                    }
                }
            }
            self.poll_once();
        }
        // Print what is left of partial lines.
        for i in 0..self.outputs.len() {
            self.flush_partial(i);
        }
        self.outputs.clear();
    }

    /// The time poll may sleep before a timer needs attention.
    fn next_wakeup(&self) -> Option<Duration> {
        let now = Instant::now();
        let mut at: Option<Instant> = None;
        let mut consider = |t: Instant| at = Some(at.map_or(t, |a| a.min(t)));
        if self.teardown.is_none() {
            if let Some(d) = self.deadline {
                consider(d);
            }
        }
        if let Some(t) = &self.teardown {
            match t.killed_at {
                None => consider(t.sigkill_at),
                Some(k) => consider(k + GIVE_UP),
            }
            // Watch the process group empty out (processes we are not the parent of).
            consider(now + Duration::from_millis(20));
        }
        if self.all_reaped() {
            consider(now + Duration::from_millis(20));
        }
        at.map(|t| t.saturating_duration_since(now))
    }

    fn poll_once(&mut self) {
        #[derive(Clone, Copy)]
        enum Src {
            Signals,
            Pmi(usize),
            Output(usize),
            StdinIn,
            StdinOut,
        }
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut srcs: Vec<Src> = Vec::new();
        let mut add = |fd: RawFd, events: libc::c_short, src: Src| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            srcs.push(src);
        };
        add(self.signals.as_raw_fd(), libc::POLLIN, Src::Signals);
        for (i, r) in self.ranks.iter().enumerate() {
            if let Some(fd) = &r.pmi {
                let mut ev = libc::POLLIN;
                if !r.outq.is_empty() {
                    ev |= libc::POLLOUT;
                }
                add(fd.as_raw_fd(), ev, Src::Pmi(i));
            }
        }
        for (i, o) in self.outputs.iter().enumerate() {
            add(o.fd.as_raw_fd(), libc::POLLIN, Src::Output(i));
        }
        if let Some(f) = &self.stdin {
            if let Some(to) = &f.to {
                if !f.buf.is_empty() {
                    add(to.as_raw_fd(), libc::POLLOUT, Src::StdinOut);
                } else if !f.eof {
                    add(0, libc::POLLIN, Src::StdinIn);
                }
            }
        }
        let timeout = self.next_wakeup();
        if let Err(e) = sys::poll(&mut fds, timeout) {
            say(&format!("poll failed: {e}"));
            self.kill_now();
            return;
        }
        let ready: Vec<(Src, libc::c_short)> = srcs
            .into_iter()
            .zip(fds.iter().map(|p| p.revents))
            .filter(|(_, rev)| *rev != 0)
            .collect();
        // PMI before anything else: an abort or finalize must be seen before the exit that
        // follows it (which the signalfd may report in the same round).
        for &(src, rev) in &ready {
            if let Src::Pmi(i) = src {
                if rev & libc::POLLOUT != 0 {
                    self.flush_pmi(i);
                }
                if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    self.read_pmi(i);
                }
            }
        }
        let mut closed_outputs = Vec::new();
        for &(src, _) in &ready {
            match src {
                Src::Signals => {
                    for sig in self.signals.read() {
                        self.on_signal(sig);
                    }
                }
                Src::Output(i) => {
                    if !self.read_output(i) {
                        closed_outputs.push(i);
                    }
                }
                Src::StdinIn => self.read_stdin(),
                Src::StdinOut => self.write_stdin(),
                Src::Pmi(_) => {}
            }
        }
        closed_outputs.sort_unstable();
        for i in closed_outputs.into_iter().rev() {
            self.flush_partial(i);
            self.outputs.remove(i);
        }
    }

    fn on_signal(&mut self, sig: libc::c_int) {
        if sig == libc::SIGCHLD {
            return; // reaping happens at the top of every loop
        }
        if self.failure.is_some() {
            // Asked again while tearing down: no more grace.
            self.kill_now();
            return;
        }
        self.fail(
            128 + sig,
            &format!(
                "received signal {sig} ({}); terminating the job",
                sys::signal_name(sig)
            ),
        );
    }

    fn reap(&mut self) {
        while let Some((pid, status)) = sys::reap_any() {
            let Some(&rank) = self.by_pid.get(&pid) else {
                continue; // an orphaned descendant re-parented to us
            };
            // Hear what it said before judging how it ended.
            self.read_pmi(rank);
            self.ranks[rank].status = Some(status);
            if rank == 0 {
                if let Some(f) = &mut self.stdin {
                    f.to = None;
                    f.buf.clear();
                }
            }
            self.judge_exit(rank, pid, status);
        }
    }

    fn judge_exit(&mut self, rank: usize, pid: libc::pid_t, status: ExitStatus) {
        if self.failure.is_some() {
            return;
        }
        let in_mpi = self.server.is_initialized(rank) && !self.server.is_finalized(rank);
        let before = if in_mpi { " before MPI_Finalize" } else { "" };
        match status {
            ExitStatus::Signaled(sig) => self.fail(
                128 + sig,
                &format!(
                    "rank {rank} (pid {pid}) was killed by signal {sig} ({}); terminating the job",
                    sys::signal_name(sig)
                ),
            ),
            ExitStatus::Exited(code) if code != 0 => self.fail(
                code,
                &format!(
                    "rank {rank} (pid {pid}) exited with status {code}{before}; terminating the job"
                ),
            ),
            ExitStatus::Exited(_) if in_mpi => self.fail(
                1,
                &format!(
                    "rank {rank} (pid {pid}) exited with status 0 before MPI_Finalize; \
                     terminating the job"
                ),
            ),
            ExitStatus::Exited(_) => {}
        }
    }

    fn read_pmi(&mut self, i: usize) {
        let mut buf = [0u8; 8192];
        loop {
            let Some(fd) = &self.ranks[i].pmi else { return };
            match sys::read(fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    self.ranks[i].pmi = None;
                    break;
                }
                Ok(n) => {
                    self.ranks[i].framer.push(&buf[..n]);
                    self.process_pmi(i);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.ranks[i].pmi = None;
                    break;
                }
            }
        }
        self.process_pmi(i);
    }

    fn process_pmi(&mut self, i: usize) {
        while let Some(msg) = self.ranks[i].framer.next_message() {
            let out = match msg {
                Ok(text) => self.server.handle(i, &text),
                Err(e) => self.server.handle_wire_error(i, &e),
            };
            for (to, resp) in out {
                if let Some(r) = self.ranks.get_mut(to) {
                    r.outq.extend_from_slice(resp.encode().as_bytes());
                }
                self.flush_pmi(to);
            }
            self.handle_events();
        }
    }

    fn handle_events(&mut self) {
        while let Some(ev) = self.server.poll_event() {
            match ev {
                Event::Initialized { .. } | Event::Finalized { .. } => {}
                Event::Abort {
                    client,
                    exitcode,
                    message,
                } => {
                    let pid = self.ranks[client].pid;
                    let tail = match message.as_deref().map(str::trim) {
                        Some(m) if !m.is_empty() => format!(": {m}"),
                        _ => String::new(),
                    };
                    self.fail(
                        exitcode & 0xff,
                        &format!(
                            "rank {client} (pid {pid}) called MPI_Abort with error code \
                             {exitcode}{tail}"
                        ),
                    );
                }
                Event::Spawn { client, .. } => {
                    // Dynamic processes are not served yet: refuse, the caller gets an error.
                    for (to, resp) in self.server.spawn_result(client, -1, "spawn_not_supported") {
                        self.ranks[to]
                            .outq
                            .extend_from_slice(resp.encode().as_bytes());
                        self.flush_pmi(to);
                    }
                }
                Event::ProtocolError {
                    client,
                    message,
                    error,
                } => {
                    let pid = self.ranks[client].pid;
                    self.fail(
                        1,
                        &format!(
                            "rank {client} (pid {pid}) sent an invalid PMI message ({error}): \
                             {message:?}; terminating the job"
                        ),
                    );
                }
            }
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
                    // The rank closed its end; it will be judged when it exits.
                    r.outq.clear();
                    return;
                }
            }
        }
    }

    /// Reads a tagged output pipe; false at end of file.
    fn read_output(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 16384];
        loop {
            match sys::read(self.outputs[i].fd.as_raw_fd(), &mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.outputs[i].partial.extend_from_slice(&buf[..n]);
                    self.emit_lines(i);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }

    fn emit_lines(&mut self, i: usize) {
        let o = &mut self.outputs[i];
        let Some(last_nl) = o.partial.iter().rposition(|&b| b == b'\n') else {
            if o.partial.len() > MAX_PARTIAL_LINE {
                self.flush_partial(i);
            }
            return;
        };
        let rest = o.partial.split_off(last_nl + 1);
        let lines = std::mem::replace(&mut o.partial, rest);
        let prefix = tag(o.rank, o.stderr);
        let mut text = Vec::with_capacity(lines.len() + 16);
        for line in lines.split_inclusive(|&b| b == b'\n') {
            text.extend_from_slice(prefix.as_bytes());
            text.extend_from_slice(line);
        }
        write_out(o.stderr, &text);
    }

    /// Prints a line that never got its newline, with one added.
    fn flush_partial(&mut self, i: usize) {
        let o = &mut self.outputs[i];
        if o.partial.is_empty() {
            return;
        }
        let mut text = tag(o.rank, o.stderr).into_bytes();
        text.append(&mut o.partial);
        text.push(b'\n');
        write_out(o.stderr, &text);
    }

    fn read_stdin(&mut self) {
        let Some(f) = &mut self.stdin else { return };
        let mut buf = vec![0u8; 65536];
        match sys::read(0, &mut buf) {
            Ok(0) | Err(_) => f.eof = true,
            Ok(n) => {
                buf.truncate(n);
                f.buf = buf;
            }
        }
        self.write_stdin();
    }

    fn write_stdin(&mut self) {
        let Some(f) = &mut self.stdin else { return };
        let Some(to) = &f.to else { return };
        while !f.buf.is_empty() {
            match sys::write(to.as_raw_fd(), &f.buf) {
                Ok(n) => {
                    f.buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    // Rank 0 closed its standard input: stop forwarding.
                    f.buf.clear();
                    f.to = None;
                    return;
                }
            }
        }
        if f.eof {
            f.to = None; // end of input for rank 0
        }
    }
}

fn tag(rank: usize, stderr: bool) -> String {
    format!("[1,{rank}]<{}>:", if stderr { "stderr" } else { "stdout" })
}

fn write_out(stderr: bool, text: &[u8]) {
    // Nobody left to tell if our own output is gone.
    if stderr {
        let mut e = io::stderr().lock();
        let _ = e.write_all(text);
        let _ = e.flush();
    } else {
        let mut o = io::stdout().lock();
        let _ = o.write_all(text);
        let _ = o.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobids_are_unique_and_well_formed() {
        let a = new_jobid();
        let b = new_jobid();
        assert_ne!(a, b);
        let (pid, hex) = a.split_once('x').unwrap();
        assert_eq!(pid, std::process::id().to_string());
        assert_eq!(hex.len(), 8);
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn removes_only_the_jobs_segments() {
        let dir = std::env::temp_dir().join(format!("protean-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "protean-12x1-a",
            "protean-12x1-b",
            "protean-12x10-a",
            "other",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        assert_eq!(remove_job_segments(&dir, "12x1"), 2);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["other", "protean-12x10-a"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tags_match_open_mpi() {
        assert_eq!(tag(3, false), "[1,3]<stdout>:");
        assert_eq!(tag(0, true), "[1,0]<stderr>:");
    }

    #[test]
    fn seconds_are_printed_plainly() {
        assert_eq!(fmt_seconds(Duration::from_secs(5)), "5");
        assert_eq!(fmt_seconds(Duration::from_millis(1500)), "1.5");
    }
}
