//! Starting a job, serving it, and ending it.
//!
//! One thread, one poll(2) loop over: a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1,
//! SIGUSR2), each local rank's PMI socket, the local ranks' output pipes (with `--tag-output`),
//! mpirun's standard input and the pipe to rank 0's (stdin forwarding), the timers (job
//! timeout, SIGKILL grace, drain), and for a job on other hosts the descriptors of
//! [`crate::launch::Remote`]: the listener, each proxy's connection, each launcher's stderr.
//!
//! Ranks placed on this machine are forked here; the ranks of every other host by that host's
//! proxy, which relays their PMI messages, output and exits. There is one PMI server for the
//! whole job, here: a remote rank's messages are handled exactly as a local rank's, and the
//! answers go back through its proxy.
//!
//! Invariants:
//! * All local ranks are in one process group, led by the first, that contains nothing else we started;
//!   signalling `-pgid` reaches the whole job including the ranks' own children. mpirun is a
//!   child subreaper, so descendants orphaned by a dying rank are re-parented to it and reaped.
//! * A rank is judged only after its PMI socket has been drained, so an `abort` or `finalize`
//!   sent just before exiting is seen before the exit itself.
//! * The first failure decides the exit status and prints the one line that names it; what
//!   dies during the teardown it starts is expected and reported no further.
//!   A remote rank is judged when its proxy reports its exit, which the proxy sends after the
//!   rank's last PMI message on the same ordered connection.
//! * Whatever the end, the loop returns only when every rank is reaped and the process group is
//!   empty, and every host's proxy said it is done (or was lost) and its launcher was reaped (or
//!   this did not happen within `GIVE_UP` after SIGKILL, which is reported), and then the job's
//!   shared-memory files are removed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use protean_pmi::{Event, Framer, Response, Server};

use crate::hosts::{self, Host};
use crate::launch::{self, LaunchSpec, LauncherKind, Remote, RemoteEvent, RemoteSrc};
use crate::msg::{Launch, ToMpirun, ToProxy};
use crate::options::{BindTo, Options, StdinTarget, Universe};
use crate::spawn::{self, RankSpec};
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

/// Exit status on timeout (as timeout(1)).
const EXIT_TIMEOUT: i32 = 124;
/// Exit status when a host fails (its launcher, or its proxy), as Hydra's.
const EXIT_HOST: i32 = 255;

struct Rank {
    /// 0 until a remote rank's proxy reports it started.
    pid: libc::pid_t,
    /// Index into `Job::hosts`.
    host: usize,
    /// Started here (else by the host's proxy).
    local: bool,
    pmi: Option<OwnedFd>,
    framer: Framer,
    outq: Vec<u8>,
    status: Option<ExitStatus>,
    /// Started by a spawn: (the spawned job's number from 1, the rank in it).
    spawned: Option<(usize, usize)>,
    /// Killed because its spawn failed part way: its end is no failure of the job.
    abandoned: bool,
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
    /// Rank 0 runs on another host: what we read goes to its proxy.
    remote: bool,
    buf: Vec<u8>,
    /// mpirun's standard input reached its end (or failed).
    eof: bool,
}

struct Teardown {
    sigkill_at: Instant,
    killed_at: Option<Instant>,
}

/// A spawn waiting for its processes on other hosts to start.
struct PendingSpawn {
    /// The spawn's number (`Rank::spawned`).
    k: usize,
    /// The PMI client that asked for it.
    client: usize,
    /// Its processes not started yet.
    waiting: usize,
}

struct Job {
    jobid: String,
    /// Host names, for messages (one entry, this machine's name, for a local job).
    hosts: Vec<String>,
    /// The proxies of the other hosts (None: a job on this machine alone).
    remote: Option<Remote>,
    /// Index in `Job::hosts` of each remote host of `remote`.
    remote_hosts: Vec<usize>,
    /// Partial lines of remote ranks' output (with --tag-output), by (rank, stderr).
    remote_partial: HashMap<(usize, bool), Vec<u8>>,
    tag_output: bool,
    /// Events of `remote` not yet acted on.
    revents: Vec<RemoteEvent>,
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
    /// The job's options, kept for the proxies' launch messages.
    launch_opts: Option<Options>,
    /// Ranks of the first job (those started by spawns follow them in `ranks`).
    np: usize,
    /// Jobs started by MPI_Comm_spawn so far.
    spawns: usize,
    /// Spawns that started processes on other hosts, answered once every one of them has
    /// started (or one failed).
    pending_spawns: Vec<PendingSpawn>,
    /// The spawned jobs whose processes have not all ended, with the global process ids they
    /// hold. The next spawned job's ids start at the lowest free ones, no lower than its
    /// parents ask ([`GPID_MIN_KEY`]).
    spawned: Vec<Spawned>,
    /// The standalone name server the processes' name-service requests go to (`--nameserver`).
    nameserver: Option<protean_pmi::names::Address>,
}

/// A job started by a spawn, until every process of it ended.
struct Spawned {
    /// Its first process in [`Job::ranks`] (the PMI server's number for it).
    first: usize,
    /// Its global process ids.
    gpids: std::ops::Range<usize>,
}

/// The pre-put key in which a spawning root names the first global process id its children
/// may have (the core's `mpi::dpm`: every id below it may be in use in the parents' tables).
pub const GPID_MIN_KEY: &str = "protean-dpm-gpid-min";

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
    let signals = match sys::SignalFd::new(&[
        libc::SIGCHLD,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ]) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("cannot set up signal handling: {e}"));
            return 1;
        }
    };
    let mut opts = opts;
    let (host_list, from_slurm) = match job_hosts(&opts, &|k| std::env::var(k).ok()) {
        Ok(h) => h,
        Err(e) => {
            say(&e);
            return 1;
        }
    };
    let placement = match &host_list {
        None => vec![0; opts.np],
        Some(list) => {
            if !opts.np_given {
                opts.np = match opts.ppn {
                    Some(p) => p * list.len(),
                    None => list.iter().map(|h| h.slots).sum(),
                };
            }
            match hosts::place(list, opts.np, opts.ppn, opts.map_by, opts.oversubscribe) {
                Ok(p) => p,
                Err(e) => {
                    say(&e.0);
                    return 1;
                }
            }
        }
    };
    let host_names: Vec<String> = match &host_list {
        None => vec![sys::hostname()],
        Some(l) => l.iter().map(|h| h.name.clone()).collect(),
    };
    if let Err(e) = sys::become_subreaper() {
        say(&format!("warning: cannot become a child subreaper: {e}"));
    }
    let jobid = new_jobid();
    // MPI_UNIVERSE_SIZE (-usize): by default the slots of the hosts given, else this machine's
    // CPUs (at least the job's size); -1 leaves it unset.
    let universe = match opts.universe {
        Universe::System => match &host_list {
            Some(l) => l.iter().map(|h| h.slots).sum::<usize>(),
            None => sys::cpu_count(),
        }
        .max(opts.np) as i32,
        Universe::Infinite => -1,
        Universe::Size(n) => n as i32,
    };
    let mut server = Server::new(opts.np, &format!("kvs_{jobid}"), 0, universe);
    server.forward_names(opts.nameserver.is_some());
    server.kvs_put(
        &format!("kvs_{jobid}"),
        "PMI_process_mapping",
        &hosts::process_mapping(&placement),
    );
    let local: Vec<bool> = host_names
        .iter()
        .map(|h| host_list.is_none() || launch::is_local_host(h))
        .collect();
    let ranks = placement
        .iter()
        .map(|&h| Rank {
            pid: 0,
            host: h,
            local: local[h],
            pmi: None,
            framer: Framer::default(),
            outq: Vec::new(),
            status: None,
            spawned: None,
            abandoned: false,
        })
        .collect();
    let mut job = Job {
        jobid,
        hosts: host_names,
        remote: None,
        remote_hosts: Vec::new(),
        remote_partial: HashMap::new(),
        tag_output: opts.tag_output,
        revents: Vec::new(),
        ranks,
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
        launch_opts: None,
        np: opts.np,
        spawns: 0,
        pending_spawns: Vec::new(),
        spawned: Vec::new(),
        nameserver: opts.nameserver.clone(),
    };
    let remote: Vec<usize> = (0..job.hosts.len())
        .filter(|&h| !local[h] && placement.contains(&h))
        .collect();
    if !remote.is_empty() {
        let kind = opts.launcher.unwrap_or(if from_slurm {
            LauncherKind::Slurm
        } else {
            LauncherKind::Ssh
        });
        let proxy = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("protean-proxy")))
            .unwrap_or_else(|| "protean-proxy".into());
        let spec = LaunchSpec {
            kind,
            exec: opts.launcher_exec.as_deref(),
            hosts: remote.iter().map(|&h| job.hosts[h].clone()).collect(),
            jobid: &job.jobid,
            proxy,
            launch_timeout: opts.launch_timeout,
        };
        match Remote::start(spec) {
            Ok(r) => {
                job.remote = Some(r);
                job.remote_hosts = remote;
            }
            Err(e) => {
                say(&e);
                return EXIT_HOST;
            }
        }
    }
    if let Err((code, msg)) = job.start(&opts) {
        // This machine's ranks that were never started have nothing to reap: without a status
        // the teardown waited for them and gave up after SIGKILL (5.5 s, and a false message).
        for r in job.ranks.iter_mut().filter(|r| r.local && r.pid == 0) {
            r.status = Some(ExitStatus::Exited(code));
        }
        job.fail(code, &msg);
    }
    job.launch_opts = Some(opts);
    job.event_loop();
    if let Some(r) = job.remote.as_ref().filter(|r| r.refused > 0) {
        say(&format!(
            "refused {} connection(s) to the proxies' port that did not prove the job's secret",
            r.refused
        ));
    }
    remove_job_segments(std::path::Path::new("/dev/shm"), &job.jobid);
    job.failure.unwrap_or(0)
}

impl Job {
    /// Starts the ranks of this machine. On failure the ranks started so far are left for the
    /// teardown.
    fn start(&mut self, opts: &Options) -> Result<(), (i32, String)> {
        let np = opts.np;
        let mine: Vec<usize> = (0..np).filter(|&r| self.ranks[r].local).collect();
        let mut rank0_stdin = None;
        if opts.stdin == StdinTarget::Rank0 && self.ranks.first().is_some_and(|r| r.local) {
            let (r, w) = sys::pipe().map_err(|e| (1, format!("cannot create a pipe: {e}")))?;
            sys::set_nonblocking(&w).map_err(|e| (1, format!("fcntl: {e}")))?;
            rank0_stdin = Some(r);
            self.stdin = Some(StdinForward {
                to: Some(w),
                remote: false,
                buf: Vec::new(),
                eof: false,
            });
        } else if opts.stdin == StdinTarget::Rank0 && !self.ranks.is_empty() {
            // Rank 0 is on another host: its proxy gets what we read.
            self.stdin = Some(StdinForward {
                to: None,
                remote: true,
                buf: Vec::new(),
                eof: false,
            });
        }
        let env: Vec<(OsString, OsString)> = opts
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        let binds = spawn::bindings(bind_code(opts.bind_to), mine.len());
        let wdir = opts.wdir.as_ref().map(std::path::PathBuf::from);
        for (local_rank, &rank) in mine.iter().enumerate() {
            let err = |e: io::Error| (1, format!("cannot set up rank {rank}: {e}"));
            let (ours, theirs) = sys::socketpair().map_err(err)?;
            sys::set_nonblocking(&ours).map_err(err)?;
            let mut pipes = [None, None];
            if opts.tag_output {
                for stderr in [false, true] {
                    let (r, w) = sys::pipe().map_err(err)?;
                    sys::set_nonblocking(&r).map_err(err)?;
                    pipes[stderr as usize] = Some(w);
                    self.outputs.push(OutStream {
                        fd: r,
                        rank,
                        stderr,
                        partial: Vec::new(),
                    });
                }
            }
            let [stdout, stderr] = pipes;
            let cpus = binds.as_ref().map(|b| b[local_rank].as_slice());
            let child = spawn::spawn_rank(RankSpec {
                program: &opts.program,
                env: &env,
                rank,
                size: np,
                local_rank,
                local_size: mine.len(),
                jobid: &self.jobid,
                pmi: &theirs,
                stdin: match rank0_stdin.take() {
                    Some(r) if rank == 0 => Stdio::from(r),
                    _ => Stdio::null(),
                },
                stdout,
                stderr,
                pgid: self.pgid,
                cpus,
                wdir: wdir.as_deref(),
                spawned: false,
            })?;
            drop(theirs);
            let pid = child.id() as libc::pid_t;
            if self.pgid == 0 {
                self.pgid = pid;
                self.group_alive = true;
            }
            if opts.report_bindings {
                let what = match (opts.bind_to, cpus) {
                    (BindTo::Core, Some(c)) => {
                        format!("bound to a core: cpus {}", spawn::cpu_list(c))
                    }
                    (BindTo::Socket, Some(c)) => {
                        format!("bound to a socket: cpus {}", spawn::cpu_list(c))
                    }
                    _ => "not bound".to_string(),
                };
                say(&format!(
                    "rank {rank} (pid {pid} on {}) {what}",
                    self.hosts[self.ranks[rank].host]
                ));
            }
            self.by_pid.insert(pid, rank);
            let r = &mut self.ranks[rank];
            r.pid = pid;
            r.pmi = Some(ours);
        }
        Ok(())
    }

    /// Starts the job a client asked for with the PMI `spawn` command (every command of an
    /// `MPI_Comm_spawn_multiple`, appnum = the command's position): a PMI group of its own
    /// in the server (KVS space with the pre-put values, barrier), its processes forked here
    /// into the job's process group with `PMI_SPAWNED=1`. Every command is checked before
    /// anything starts (program found and executable, `wdir` a directory, hosts this one), and
    /// a fork that fails part way kills what it started: a spawn starts all or nothing.
    /// Err is the reason, for the caller's error string.
    /// Start the processes of a spawn: those of this host now, those of other hosts through
    /// their proxies. Ok(n): n processes of other hosts are still to start (the answer waits
    /// for them: see `pending_spawns`).
    fn spawn_job(&mut self, commands: &[protean_pmi::SpawnCommand]) -> Result<usize, String> {
        let opts = self
            .launch_opts
            .as_ref()
            .ok_or("mpirun is still starting the job")?;
        let mut plans = Vec::new();
        for c in commands {
            plans.push(spawn::plan(c, &opts.env)?);
        }
        self.retire_ended_spawns();
        let total: usize = plans.iter().map(|p| p.nprocs).sum();
        if total == 0 {
            return Err("a spawn of no processes".into());
        }
        let here = match self.hosts.iter().position(|h| launch::is_local_host(h)) {
            Some(h) => h,
            None => {
                self.hosts.push(sys::hostname());
                self.hosts.len() - 1
            }
        };
        // Where each process goes: round-robin over its command's hosts (all of them checked
        // before anything starts or is numbered), else here.
        let mut places = Vec::with_capacity(total);
        for p in &plans {
            let hosts = p
                .hosts
                .iter()
                .map(|name| self.spawn_host(name, here))
                .collect::<Result<Vec<_>, _>>()?;
            places.extend(
                (0..p.nprocs).map(|i| hosts.get(i % hosts.len().max(1)).copied().unwrap_or(here)),
            );
        }
        self.spawns += 1;
        let k = self.spawns;
        let jobid = format!("{}-s{k}", self.jobid);
        let kvsname = format!("kvs_{jobid}");
        let appnums: Vec<i32> = plans
            .iter()
            .enumerate()
            .flat_map(|(i, p)| std::iter::repeat_n(i as i32, p.nprocs))
            .collect();
        let first = self.server.add_group(&kvsname, appnums);
        debug_assert_eq!(first, self.ranks.len());
        if let Some(c) = commands.first() {
            for (key, val) in &c.preput {
                self.server.kvs_put(&kvsname, key, val);
            }
        }
        // Global process ids continue after every process started so far (see the core's
        // bootstrap and dynamic processes), and after the ids the parents ask to keep free:
        // those they gave as aliases to the processes of an independent job they are
        // connected with, which this mpirun does not number.
        let min = commands
            .first()
            .and_then(|c| c.preput.iter().find(|(k, _)| k == GPID_MIN_KEY))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let base = self.free_gpids(self.np.max(min), total);
        self.spawned.push(Spawned {
            first,
            gpids: base..base + total,
        });
        // The hosts of the whole universe (every process so far and these): beyond one, the
        // children's listeners must be reachable from the others (the core's bootstrap).
        let mut universe: Vec<usize> = self
            .ranks
            .iter()
            .map(|r| r.host)
            .chain(places.iter().copied())
            .collect();
        universe.sort_unstable();
        universe.dedup();
        for p in &mut plans {
            p.env
                .push(("PROTEAN_GPID_BASE".into(), base.to_string().into()));
            p.env.push((
                "PROTEAN_UNIVERSE_HOSTS".into(),
                universe.len().to_string().into(),
            ));
        }
        let mut started = Vec::new();
        // (host, command index, what its proxy starts)
        let mut remote: Vec<(usize, usize, Launch)> = Vec::new();
        let mut rank = 0;
        // The children started here, and this one's place among them.
        let local_size = places.iter().filter(|&&h| h == here).count();
        let mut local_rank = 0;
        let mut failed = None;
        'all: for (pi, p) in plans.iter().enumerate() {
            for _ in 0..p.nprocs {
                let host = places[rank];
                if host != here {
                    // Its host's proxy starts it (below, once every local one is forked).
                    let i = self.ranks.len();
                    match remote.iter_mut().find(|(h, c, _)| (*h, *c) == (host, pi)) {
                        Some((_, _, l)) => l.ranks.push(i as u32),
                        None => {
                            let l = self.spawn_launch(p, host, &jobid, total, first, i);
                            remote.push((host, pi, l));
                        }
                    }
                    self.ranks.push(Rank {
                        pid: 0,
                        host,
                        local: false,
                        pmi: None,
                        framer: Framer::default(),
                        outq: Vec::new(),
                        status: None,
                        spawned: Some((k, rank)),
                        abandoned: false,
                    });
                    rank += 1;
                    continue;
                }
                let err = |e: io::Error| format!("cannot set up a spawned process: {e}");
                let pair = sys::socketpair()
                    .map_err(err)
                    .and_then(|(o, t)| sys::set_nonblocking(&o).map(|_| (o, t)).map_err(err));
                let (ours, theirs) = match pair {
                    Ok(x) => x,
                    Err(e) => {
                        failed = Some(e);
                        break 'all;
                    }
                };
                let child = spawn::spawn_rank(spawn::RankSpec {
                    program: &p.program,
                    env: &p.env,
                    rank,
                    size: total,
                    local_rank,
                    local_size,
                    jobid: &jobid,
                    pmi: &theirs,
                    stdin: Stdio::null(),
                    stdout: None,
                    stderr: None,
                    pgid: self.pgid,
                    cpus: None,
                    wdir: p.wdir.as_deref(),
                    spawned: true,
                });
                drop(theirs);
                let child = match child {
                    Ok(c) => c,
                    Err((_, why)) => {
                        failed = Some(why);
                        break 'all;
                    }
                };
                let pid = child.id() as libc::pid_t;
                if self.pgid == 0 {
                    self.pgid = pid;
                    self.group_alive = true;
                }
                let i = self.ranks.len();
                self.by_pid.insert(pid, i);
                self.ranks.push(Rank {
                    pid,
                    host: here,
                    local: true,
                    pmi: Some(ours),
                    framer: Framer::default(),
                    outq: Vec::new(),
                    status: None,
                    spawned: Some((k, rank)),
                    abandoned: false,
                });
                started.push(i);
                rank += 1;
                local_rank += 1;
            }
        }
        if let Some(why) = failed {
            // All or nothing: end what started; the PMI group stays, empty of live clients.
            for i in started {
                let r = &mut self.ranks[i];
                r.abandoned = true;
                r.pmi = None;
                sys::kill(r.pid, libc::SIGKILL);
            }
            // Those another host's proxy was to start were never asked for.
            for r in &mut self.ranks[first..] {
                if !r.local {
                    r.abandoned = true;
                    r.status = Some(ExitStatus::Exited(0));
                }
            }
            while self.ranks.len() < first + total {
                self.ranks.push(Rank {
                    pid: 0,
                    host: here,
                    local: true,
                    pmi: None,
                    framer: Framer::default(),
                    outq: Vec::new(),
                    status: Some(ExitStatus::Exited(0)),
                    spawned: Some((k, self.ranks.len() - first)),
                    abandoned: true,
                });
            }
            return Err(why);
        }
        let mut waiting = 0;
        for (h, _, l) in remote {
            waiting += l.ranks.len();
            self.send_host(h, &ToProxy::Spawn(l));
        }
        Ok(waiting)
    }

    /// The spawned jobs whose processes all ended give back their global ids (for the next
    /// spawns), their state in the PMI server (their space, the cards they put in their
    /// parents') and their buffers; the last ones give back their places in `ranks` too.
    /// Spawning and disconnecting in a loop then grows neither mpirun nor the processes'
    /// tables indexed by global id.
    fn retire_ended_spawns(&mut self) {
        let ranks = &mut self.ranks;
        let server = &mut self.server;
        let by_pid = &mut self.by_pid;
        self.spawned.retain(|s| {
            let n = s.gpids.len();
            let ended =
                (s.first..s.first + n).all(|i| ranks.get(i).is_none_or(|r| r.status.is_some()));
            if ended {
                server.retire_group(s.first);
                for (i, r) in ranks.iter_mut().enumerate().skip(s.first).take(n) {
                    r.framer = Framer::default();
                    r.outq = Vec::new();
                    if by_pid.get(&r.pid) == Some(&i) {
                        by_pid.remove(&r.pid);
                    }
                }
            }
            !ended
        });
        // The last ones, ended and started here, give their places in `ranks` (and their PMI
        // numbers) back when no output of theirs is still to be read.
        while let Some(first) = self.server.last_group_first() {
            let busy = self.ranks[first..]
                .iter()
                .any(|r| !r.local || r.status.is_none())
                || self.outputs.iter().any(|o| o.rank >= first)
                || self.spawned.iter().any(|s| s.first >= first);
            if busy || self.server.drop_last_group() != Some(first) {
                break;
            }
            self.ranks.truncate(first);
        }
    }

    /// The lowest `n` consecutive global ids from `lo` on that no unended spawned job holds
    /// (`lo` is at least the first job's size).
    fn free_gpids(&self, lo: usize, n: usize) -> usize {
        let mut held: Vec<&std::ops::Range<usize>> =
            self.spawned.iter().map(|s| &s.gpids).collect();
        held.sort_by_key(|r| r.start);
        let mut base = lo;
        for r in held {
            if r.start >= base + n {
                break;
            }
            base = base.max(r.end);
        }
        base
    }

    /// A process of spawn `k` on another host started: answer the spawn once all did.
    fn spawn_started(&mut self, k: usize) {
        let Some(i) = self.pending_spawns.iter().position(|p| p.k == k) else {
            return;
        };
        self.pending_spawns[i].waiting -= 1;
        if self.pending_spawns[i].waiting == 0 {
            let client = self.pending_spawns.swap_remove(i).client;
            for (to, resp) in self.server.spawn_result(client, 0, "success") {
                self.answer(to, resp);
            }
        }
    }

    /// A process of spawn `k` could not start on another host: the spawn fails (not the job).
    /// Every process of it is ended (those of other hosts by their proxies, which report
    /// each as exited) and left out of the job's outcome; the parents get the reason.
    fn spawn_failed(&mut self, k: usize, why: &str) {
        let Some(i) = self.pending_spawns.iter().position(|p| p.k == k) else {
            return;
        };
        let client = self.pending_spawns.swap_remove(i).client;
        let mut kill: Vec<(usize, Vec<u32>)> = Vec::new();
        for (g, r) in self.ranks.iter_mut().enumerate() {
            if r.spawned.map(|s| s.0) != Some(k) {
                continue;
            }
            r.abandoned = true;
            if r.local {
                r.pmi = None;
                if r.status.is_none() && r.pid > 0 {
                    sys::kill(r.pid, libc::SIGKILL);
                }
            } else if r.status.is_none() {
                match kill.iter_mut().find(|(h, _)| *h == r.host) {
                    Some((_, v)) => v.push(g as u32),
                    None => kill.push((r.host, vec![g as u32])),
                }
            }
        }
        for (h, ranks) in kill {
            self.send_host(h, &ToProxy::KillRanks(ranks));
        }
        for (to, resp) in self.server.spawn_result(client, -1, why) {
            self.answer(to, resp);
        }
    }

    /// The host a spawn's info key names: one of the job's hosts, here or with a running
    /// proxy. Err names what is wrong.
    fn spawn_host(&self, name: &str, here: usize) -> Result<usize, String> {
        if launch::is_local_host(name) {
            return Ok(here);
        }
        let Some(h) = self.hosts.iter().position(|x| x == name) else {
            return Err(format!(
                "info host: '{name}' is not a host of this job (its hosts: {})",
                self.hosts.join(", ")
            ));
        };
        if !self.host_connected(h) {
            return Err(format!(
                "info host: '{name}' has no running protean-proxy (mpirun starts one only on the hosts the job's ranks were placed on)"
            ));
        }
        Ok(h)
    }

    /// The message that has host `h`'s proxy start processes of spawn command `p`, the first
    /// of them global index `i` (more are added to `ranks` by the caller).
    fn spawn_launch(
        &self,
        p: &spawn::Plan,
        h: usize,
        jobid: &str,
        total: usize,
        first: usize,
        i: usize,
    ) -> Launch {
        let mut env = forwarded_env();
        env.extend(
            p.env
                .iter()
                .map(|(k, v)| (k.clone().into_vec(), v.clone().into_vec())),
        );
        let wdir = wdir_bytes(p.wdir.clone());
        Launch {
            size: total as u32,
            jobid: jobid.to_string(),
            ranks: vec![i as u32],
            program: p.program.iter().map(|a| a.clone().into_vec()).collect(),
            env,
            wdir,
            stdin: false,
            bind: 0,
            report_bindings: false,
            host: self.hosts[h].clone(),
            first: first as u32,
            spawned: true,
        }
    }

    /// "rank 3 (pid 77)" or, in a job on several hosts, "rank 3 (pid 77 on h2)".
    fn who(&self, rank: usize) -> String {
        let r = &self.ranks[rank];
        let pid = if r.pid > 0 {
            format!("pid {}", r.pid)
        } else {
            "not started".to_string()
        };
        if let Some((job, in_job)) = r.spawned {
            return format!("rank {in_job} of spawned job {job} ({pid})");
        }
        if self.remote.is_some() {
            format!("rank {rank} ({pid} on {})", self.hosts[r.host])
        } else {
            format!("rank {rank} ({pid})")
        }
    }

    /// The launch message of remote host `h` (an index into `Job::hosts`).
    fn launch_for(&self, h: usize) -> Launch {
        let opts = self
            .launch_opts
            .as_ref()
            .expect("options kept before the loop");
        let ranks: Vec<u32> = (0..self.np)
            .filter(|&r| self.ranks[r].host == h)
            .map(|r| r as u32)
            .collect();
        let mut env = forwarded_env();
        for (k, v) in &opts.env {
            env.push((k.clone().into_bytes(), v.clone().into_bytes()));
        }
        let wdir = wdir_bytes(opts.wdir.as_ref().map(std::path::PathBuf::from));
        Launch {
            size: self.np as u32,
            jobid: self.jobid.clone(),
            stdin: self.stdin.is_some() && ranks.first() == Some(&0),
            ranks,
            program: opts.program.iter().map(|a| a.clone().into_vec()).collect(),
            env,
            wdir,
            bind: bind_code(opts.bind_to),
            report_bindings: opts.report_bindings,
            host: self.hosts[h].clone(),
            first: 0,
            spawned: false,
        }
    }

    /// Sends a PMI answer to its rank, here or through its proxy.
    fn answer(&mut self, to: usize, resp: Response) {
        let Some(r) = self.ranks.get_mut(to) else {
            return;
        };
        if r.local {
            r.outq.extend_from_slice(resp.encode().as_bytes());
            self.flush_pmi(to);
        } else {
            let h = self.ranks[to].host;
            self.send_host(
                h,
                &ToProxy::Pmi {
                    rank: to as u32,
                    text: resp.encode().into_bytes(),
                },
            );
        }
    }

    /// True when rank `rank`'s host is another host whose proxy is connected (and launched).
    fn connected(&self, rank: usize) -> bool {
        self.host_connected(self.ranks[rank].host)
    }

    /// True when host `h` is another host whose proxy is connected (and launched).
    fn host_connected(&self, h: usize) -> bool {
        match (&self.remote, self.remote_hosts.iter().position(|&x| x == h)) {
            (Some(r), Some(i)) => r.hosts[i].state == launch::HostState::Connected,
            _ => false,
        }
    }

    fn send_host(&mut self, h: usize, m: &ToProxy) {
        let Some(i) = self.remote_hosts.iter().position(|&x| x == h) else {
            return;
        };
        if let Some(remote) = &mut self.remote {
            remote.send(i, m, &mut self.revents);
        }
    }

    fn send_all_hosts(&mut self, m: &ToProxy) {
        if let Some(remote) = &mut self.remote {
            remote.broadcast(m, &mut self.revents);
        }
    }

    /// Acts on what the proxies said.
    fn remote_events(&mut self) {
        while !self.revents.is_empty() {
            let evs = std::mem::take(&mut self.revents);
            for ev in evs {
                self.remote_event(ev);
            }
        }
    }

    fn remote_event(&mut self, ev: RemoteEvent) {
        let host_of = |i: usize, job: &Job| job.remote_hosts[i];
        match ev {
            RemoteEvent::Connected(i) => {
                let h = host_of(i, self);
                if self.teardown.is_some() {
                    // Too late: the proxy gets nothing to run, says Done and exits.
                    self.send_host(h, &ToProxy::Kill);
                } else {
                    let launch = self.launch_for(h);
                    self.send_host(h, &ToProxy::Launch(launch));
                }
            }
            RemoteEvent::Stderr(i, line) => {
                let h = host_of(i, self);
                say(&format!("host {}: {line}", self.hosts[h]));
            }
            RemoteEvent::Lost(i, why) => {
                let h = host_of(i, self);
                for r in 0..self.ranks.len() {
                    if self.ranks[r].host == h && self.ranks[r].status.is_none() {
                        self.ranks[r].status = Some(ExitStatus::Signaled(libc::SIGKILL));
                    }
                }
                if self.failure.is_none() {
                    let msg = format!("host {}: {why}; terminating the job", self.hosts[h]);
                    self.fail(EXIT_HOST, &msg);
                }
            }
            RemoteEvent::Message(i, m) => {
                let h = host_of(i, self);
                self.host_message(h, m);
            }
        }
    }

    fn host_message(&mut self, h: usize, m: ToMpirun) {
        // A rank of another host in a message is a protocol violation of the proxy.
        let rank_ok = |job: &Job, r: u32| {
            job.ranks
                .get(r as usize)
                .is_some_and(|x| x.host == h && !x.local)
        };
        match m {
            ToMpirun::Started { rank, pid } if rank_ok(self, rank) => {
                let r = &mut self.ranks[rank as usize];
                r.pid = pid as libc::pid_t;
                if let Some((k, _)) = r.spawned.filter(|_| !r.abandoned) {
                    self.spawn_started(k);
                }
            }
            ToMpirun::StartFailed {
                rank,
                code,
                message,
            } if rank_ok(self, rank) => {
                let r = &self.ranks[rank as usize];
                match r.spawned {
                    Some((k, n)) if self.pending_spawns.iter().any(|p| p.k == k) => {
                        let why = format!(
                            "host {}: process {n} of the spawned job: {message}",
                            self.hosts[h]
                        );
                        self.spawn_failed(k, &why);
                    }
                    Some(_) if r.abandoned => {}
                    _ => {
                        let msg = format!("host {}: rank {rank}: {message}", self.hosts[h]);
                        self.fail(code, &msg);
                    }
                }
            }
            ToMpirun::Pmi { rank, text } if rank_ok(self, rank) => {
                let text = String::from_utf8_lossy(&text).into_owned();
                let out = self.server.handle(rank as usize, &text);
                for (to, resp) in out {
                    self.answer(to, resp);
                }
                self.handle_events();
            }
            ToMpirun::Output {
                rank,
                stderr,
                bytes,
            } if rank_ok(self, rank) => self.remote_output(rank as usize, stderr, &bytes),
            ToMpirun::Exited { rank, code, signal } if rank_ok(self, rank) => {
                let r = rank as usize;
                if self.ranks[r].status.is_some() {
                    return;
                }
                let status = if signal != 0 {
                    ExitStatus::Signaled(signal)
                } else {
                    ExitStatus::Exited(code)
                };
                self.ranks[r].status = Some(status);
                self.judge_exit(r, status);
            }
            ToMpirun::Note(text) => say(&text),
            ToMpirun::Done => {
                // Ranks it never started (the job ended first) are finished too.
                for r in 0..self.ranks.len() {
                    if self.ranks[r].host == h && self.ranks[r].status.is_none() {
                        self.ranks[r].status = Some(ExitStatus::Signaled(libc::SIGKILL));
                        if self.failure.is_none() && !self.ranks[r].abandoned {
                            let msg = format!(
                                "host {}: its proxy ended without rank {r}; terminating the job",
                                self.hosts[h]
                            );
                            self.fail(EXIT_HOST, &msg);
                        }
                    }
                }
            }
            other => {
                let msg = format!(
                    "host {}: its proxy sent a message about a rank it does not run: {other:?}; \
                     terminating the job",
                    self.hosts[h]
                );
                self.fail(EXIT_HOST, &msg);
            }
        }
    }

    fn remote_output(&mut self, rank: usize, stderr: bool, bytes: &[u8]) {
        if !self.tag_output {
            write_out(stderr, bytes);
            return;
        }
        let partial = self.remote_partial.entry((rank, stderr)).or_default();
        partial.extend_from_slice(bytes);
        let Some(last_nl) = partial.iter().rposition(|&b| b == b'\n') else {
            if partial.len() > MAX_PARTIAL_LINE {
                let mut text = tag(rank, stderr).into_bytes();
                text.append(partial);
                text.push(b'\n');
                write_out(stderr, &text);
            }
            return;
        };
        let rest = partial.split_off(last_nl + 1);
        let lines = std::mem::replace(partial, rest);
        let prefix = tag(rank, stderr);
        let mut text = Vec::with_capacity(lines.len() + 16);
        for line in lines.split_inclusive(|&b| b == b'\n') {
            text.extend_from_slice(prefix.as_bytes());
            text.extend_from_slice(line);
        }
        write_out(stderr, &text);
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
        self.send_all_hosts(&ToProxy::Terminate);
        if let Some(r) = &mut self.remote {
            r.stop_launching(libc::SIGTERM);
        }
        self.teardown = Some(Teardown {
            sigkill_at: Instant::now() + GRACE,
            killed_at: None,
        });
    }

    fn kill_now(&mut self) {
        self.signal_group(libc::SIGKILL);
        // Ranks that left the group (setpgid/setsid) are still ours to end.
        for r in &self.ranks {
            if r.status.is_none() && r.local && r.pid > 0 {
                sys::kill(r.pid, libc::SIGKILL);
            }
        }
        self.send_all_hosts(&ToProxy::Kill);
        if let Some(r) = &mut self.remote {
            r.stop_launching(libc::SIGKILL);
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
        let mut hosts_done_at: Option<Instant> = None;
        loop {
            self.reap();
            self.remote_events();
            let now = Instant::now();
            if let Some(r) = &mut self.remote {
                r.check_timers(now, &mut self.revents);
                r.close_done();
            }
            self.remote_events();
            let remote_finished = self.remote.as_ref().is_none_or(|r| r.finished());
            if self.all_reaped() {
                if self.group_alive {
                    self.group_alive = sys::kill_group(self.pgid, 0).unwrap_or(false);
                }
                if self.group_alive {
                    // Leftover descendants of finished ranks: end them too.
                    self.terminate();
                } else if remote_finished {
                    let until = *self.drain_until.get_or_insert(now + DRAIN);
                    let draining = !self.outputs.is_empty() && now < until;
                    if !draining {
                        break;
                    }
                } else if self.remote.as_ref().is_some_and(|r| r.hosts_finished()) {
                    // Every proxy is done: its launcher (ssh) should exit at once.
                    let at = *hosts_done_at.get_or_insert(now);
                    if now >= at + GIVE_UP {
                        if let Some(r) = &mut self.remote {
                            r.kill_launchers();
                        }
                    }
                }
            }
            if let Some(t) = &self.teardown {
                match t.killed_at {
                    None if now >= t.sigkill_at => self.kill_now(),
                    Some(at) if now >= at + GIVE_UP => {
                        if let Some(r) = &mut self.remote {
                            r.kill_launchers();
                        }
                        if now >= at + GIVE_UP + GRACE || !self.all_reaped() {
                            say("some processes of the job did not end after SIGKILL; giving up");
                            break;
                        }
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
        let mut left: Vec<_> = std::mem::take(&mut self.remote_partial)
            .into_iter()
            .collect();
        left.sort_by_key(|(k, _)| *k);
        for ((rank, stderr), mut partial) in left {
            if !partial.is_empty() {
                let mut text = tag(rank, stderr).into_bytes();
                text.append(&mut partial);
                text.push(b'\n');
                write_out(stderr, &text);
            }
        }
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
        if let Some(t) = self.remote.as_ref().and_then(|r| r.next_wakeup()) {
            consider(t);
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
            Remote(RemoteSrc),
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
            } else if f.remote && !f.eof && self.ranks[0].status.is_none() && self.connected(0) {
                add(0, libc::POLLIN, Src::StdinIn);
            }
        }
        if let Some(r) = &self.remote {
            r.poll_fds(&mut |fd, ev, rs| add(fd, ev, Src::Remote(rs)));
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
        for &(src, rev) in &ready {
            if let Src::Remote(rs) = src {
                if let Some(r) = &mut self.remote {
                    r.ready(rs, rev, &mut self.revents);
                }
                self.remote_events();
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
                Src::Pmi(_) | Src::Remote(_) => {}
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
        if sig == libc::SIGUSR1 || sig == libc::SIGUSR2 {
            // Passed on to every rank (as Open MPI and Hydra do).
            self.signal_group(sig);
            self.send_all_hosts(&ToProxy::Signal(sig));
            return;
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
                if let Some(r) = &mut self.remote {
                    // A launcher (ssh, srun), or an orphaned descendant re-parented to us.
                    r.reaped(pid, status, &mut self.revents);
                }
                continue;
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
            self.judge_exit(rank, status);
        }
        self.remote_events();
    }

    fn judge_exit(&mut self, rank: usize, status: ExitStatus) {
        if self.failure.is_some() || self.ranks[rank].abandoned {
            return;
        }
        let who = self.who(rank);
        let in_mpi = self.server.is_initialized(rank) && !self.server.is_finalized(rank);
        let before = if in_mpi { " before MPI_Finalize" } else { "" };
        match status {
            ExitStatus::Signaled(sig) => self.fail(
                128 + sig,
                &format!(
                    "{who} was killed by signal {sig} ({}); terminating the job",
                    sys::signal_name(sig)
                ),
            ),
            ExitStatus::Exited(code) if code != 0 => self.fail(
                code,
                &format!("{who} exited with status {code}{before}; terminating the job"),
            ),
            ExitStatus::Exited(_) if in_mpi => self.fail(
                1,
                &format!("{who} exited with status 0 before MPI_Finalize; terminating the job"),
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
                self.answer(to, resp);
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
                    let tail = match message.as_deref().map(str::trim) {
                        Some(m) if !m.is_empty() => format!(": {m}"),
                        _ => String::new(),
                    };
                    let msg = format!(
                        "{} called MPI_Abort with error code {exitcode}{tail}",
                        self.who(client)
                    );
                    self.fail(exitcode & 0xff, &msg);
                }
                Event::Spawn { client, commands } => {
                    let (rc, msg) = match self.spawn_job(&commands) {
                        Ok(0) => (0, "success".to_string()),
                        Ok(waiting) => {
                            self.pending_spawns.push(PendingSpawn {
                                k: self.spawns,
                                client,
                                waiting,
                            });
                            continue;
                        }
                        Err(why) => (-1, why),
                    };
                    for (to, resp) in self.server.spawn_result(client, rc, &msg) {
                        self.answer(to, resp);
                    }
                }
                Event::Name { client, request } => {
                    let resp = self.ask_nameserver(&request);
                    for (to, resp) in self.server.name_result(client, resp) {
                        self.answer(to, resp);
                    }
                }
                Event::LimitExceeded { client, limit } => {
                    let msg = format!(
                        "{} exceeded a limit of the PMI server: {limit}; terminating the job",
                        self.who(client)
                    );
                    self.fail(1, &msg);
                }
                Event::ProtocolError {
                    client,
                    message,
                    error,
                } => {
                    let who = if client < self.ranks.len() {
                        self.who(client)
                    } else {
                        format!("client {client}")
                    };
                    let msg = format!(
                        "{who} sent an invalid PMI message ({error}): {message:?}; terminating \
                         the job"
                    );
                    self.fail(1, &msg);
                }
            }
        }
    }

    /// Forwards a name-service request to the name server; a failure to reach it becomes the
    /// request's refusal (the process raises it through its error handler).
    fn ask_nameserver(&self, req: &protean_pmi::Request) -> Response {
        use protean_pmi::Request as Q;
        let asked = match self.nameserver.as_ref() {
            Some(addr) => protean_pmi::names::ask(addr, req, Duration::from_secs(10)),
            None => Err("mpirun has no name server to ask".into()),
        };
        match asked {
            Ok(r) => r,
            Err(why) => {
                let msg = Some(why);
                match req {
                    Q::PublishName { .. } => Response::PublishResult { rc: -1, msg },
                    Q::UnpublishName { .. } => Response::UnpublishResult { rc: -1, msg },
                    _ => Response::LookupResult {
                        rc: -1,
                        msg,
                        port: None,
                    },
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
        let got = match sys::read(0, &mut buf) {
            Ok(0) | Err(_) => {
                f.eof = true;
                Vec::new()
            }
            Ok(n) => {
                buf.truncate(n);
                buf
            }
        };
        if f.remote {
            // Empty: end of input.
            let h = self.ranks[0].host;
            self.send_host(h, &ToProxy::Stdin(got));
            return;
        }
        f.buf = got;
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

fn bind_code(b: BindTo) -> u8 {
    match b {
        BindTo::None => 0,
        BindTo::Core => 1,
        BindTo::Socket => 2,
    }
}

/// True for a variable of mpirun's environment that remote ranks get: not those that describe
/// this host, this shell or an outer launcher's job (Hydra leaves similar ones out).
/// mpirun's own variables that a proxy's ranks get ([`forwarded`]), for a `Launch`.
fn forwarded_env() -> Vec<(Vec<u8>, Vec<u8>)> {
    std::env::vars_os()
        .filter(|(k, _)| forwarded(&k.to_string_lossy()))
        .map(|(k, v)| (k.into_vec(), v.into_vec()))
        .collect()
}

/// A `Launch`'s working directory: `wdir`, else mpirun's own.
fn wdir_bytes(wdir: Option<std::path::PathBuf>) -> Vec<u8> {
    wdir.or_else(|| std::env::current_dir().ok())
        .map(|d| d.into_os_string().into_vec())
        .unwrap_or_default()
}

fn forwarded(name: &str) -> bool {
    const HOST_VARS: [&str; 10] = [
        "HOSTNAME",
        "DISPLAY",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TERM",
        "TMUX",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
    ];
    !(HOST_VARS.contains(&name)
        || name.starts_with("SLURM_")
        || name.starts_with("SLURMD_")
        || name.starts_with("PMI_")
        || name.starts_with("PMIX_")
        || name.starts_with("SSH_")
        || name == "PROTEAN_JOBID"
        || name == "PROTEAN_LAUNCHER")
}

/// The hosts of the job: (None for this machine alone, whether they came from Slurm).
fn job_hosts(
    opts: &Options,
    getenv: &dyn Fn(&str) -> Option<String>,
) -> Result<(Option<Vec<Host>>, bool), String> {
    let mut list = Vec::new();
    for h in &opts.host_lists {
        hosts::parse_host_list(h, &mut list).map_err(|e| e.0)?;
    }
    for f in &opts.hostfiles {
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("cannot read the hostfile {f}: {e}"))?;
        hosts::parse_hostfile(f, &text, &mut list).map_err(|e| e.0)?;
    }
    if !list.is_empty() {
        return Ok((Some(list), false));
    }
    // Inside a Slurm allocation (salloc, sbatch), its nodes are the hosts, as in Open MPI.
    if let Some(l) = hosts::slurm_hosts(getenv).map_err(|e| e.0)? {
        return Ok((Some(l), true));
    }
    Ok((None, false))
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
