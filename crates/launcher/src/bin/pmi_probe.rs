//! `pmi-probe`: a small PMI-1 program for testing launchers (ours, Hydra, Slurm).
//!
//! Every rank initialises PMI from the environment, puts `probe-<rank>`, enters the barrier,
//! reads every rank's key back and checks it, then finalizes and prints
//! `rank R of N ok kvsname=K universe=U`. Options make one rank misbehave, for teardown tests:
//!
//! ```text
//! pmi-probe [--pids] [--grandchild] [--shm] [--sleep SECS] [--fail RANK:ACTION]
//!   --pids          print "pid R PID" before the barrier
//!   --grandchild    start `sleep 30` (inheriting stdout) and print "grandchild R PID"
//!   --shm           rank 0 creates /dev/shm/protean-$PROTEAN_JOBID-probe, prints "shm 0 PATH"
//!   --sleep SECS    ranks that do not fail sleep this long before finalizing
//!   --fail R:ACTION after the exchange, rank R prints "failing R <ns since 1970>", then:
//!       sigkill        kill itself with SIGKILL
//!       exit=N         exit with status N before finalizing
//!       exit-after=N   finalize, then exit with status N
//!       abort=N[:MSG]  call PMI abort with code N and MSG, then exit with N
//!       garbage        write a line that is not PMI to the PMI socket, then sleep
//!       flood          put keys with the longest value the server allows until a put fails
//!                      (prints "flood R KEYS" then), then sleep
//!   --spawn N[:PROG] rank 0 spawns N processes of PROG (default: this probe, twice: two
//!                  commands of N, the second with info env PROBE_ENV=set and wdir /)
//!                  with the pre-put key probe-parent=<its KVS name>, then prints
//!                  "spawned 0 ok" or "spawn-error 0 <reason>"; spawned probes print
//!                  "child R of N appnum A parent=P env=E cwd=D" and put child-R into the
//!                  parent's KVS, which rank 0 waits for
//! ```
//! Exit status 2: bad usage; 3: not started by a PMI process manager; 4: a PMI call failed or a
//! value read back was wrong; 5: the PMI socket is not close-on-exec.

use std::io::Write;
use std::process::exit;
use std::time::Duration;

use protean_pmi::PmiClient;

struct Args {
    pids: bool,
    grandchild: bool,
    shm: bool,
    sleep: f64,
    fail: Option<(u32, String)>,
    spawn: Option<(u32, Option<String>)>,
}

fn usage(msg: &str) -> ! {
    eprintln!("pmi-probe: {msg}");
    exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        pids: false,
        grandchild: false,
        shm: false,
        sleep: 0.0,
        fail: None,
        spawn: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--pids" => a.pids = true,
            "--grandchild" => a.grandchild = true,
            "--shm" => a.shm = true,
            "--sleep" => {
                a.sleep = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| usage("--sleep needs seconds"))
            }
            "--fail" => {
                let spec = it
                    .next()
                    .unwrap_or_else(|| usage("--fail needs RANK:ACTION"));
                let (rank, action) = spec
                    .split_once(':')
                    .unwrap_or_else(|| usage("--fail needs RANK:ACTION"));
                let rank = rank.parse().unwrap_or_else(|_| usage("bad rank"));
                a.fail = Some((rank, action.to_string()));
            }
            "--spawn" => {
                let spec = it.next().unwrap_or_else(|| usage("--spawn needs N[:PROG]"));
                let (n, prog) = match spec.split_once(':') {
                    Some((n, p)) => (n, Some(p.to_string())),
                    None => (spec.as_str(), None),
                };
                let n = n.parse().unwrap_or_else(|_| usage("bad --spawn count"));
                a.spawn = Some((n, prog));
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    a
}

fn check<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("pmi-probe: {what}: {e}");
        exit(4)
    })
}

fn main() {
    let args = parse_args();
    let mut pmi = match check("PMI init", PmiClient::from_env()) {
        Some(c) => c,
        None => {
            eprintln!("pmi-probe: no PMI environment (PMI_FD or PMI_PORT): not under a launcher");
            exit(3)
        }
    };
    let (rank, size) = (pmi.rank(), pmi.size());
    // SAFETY: F_GETFD on the client's open socket.
    let fdflags = unsafe { libc::fcntl(pmi.raw_fd(), libc::F_GETFD) };
    if fdflags < 0 || fdflags & libc::FD_CLOEXEC == 0 {
        eprintln!("pmi-probe: rank {rank}: PMI socket is not close-on-exec");
        exit(5);
    }
    let out = std::io::stdout();
    if args.pids {
        let _ = writeln!(out.lock(), "pid {rank} {}", std::process::id());
    }
    if args.grandchild {
        // Deliberately never waited for: it is there to be left behind, and the launcher must
        // end it (and reap it, as the subreaper) when the job ends.
        #[allow(clippy::zombie_processes)]
        let child = check(
            "start sleep",
            std::process::Command::new("sleep").arg("30").spawn(),
        );
        let _ = writeln!(out.lock(), "grandchild {rank} {}", child.id());
    }
    if args.shm && rank == 0 {
        let jobid = std::env::var("PROTEAN_JOBID").unwrap_or_else(|_| usage("no PROTEAN_JOBID"));
        let path = format!("/dev/shm/protean-{jobid}-probe");
        check("create shm file", std::fs::write(&path, b"probe"));
        let _ = writeln!(out.lock(), "shm {rank} {path}");
    }
    let value = |r: u32| format!("v{r}-of-{size}-{}", "x".repeat(r as usize % 7));
    check("put", pmi.put(&format!("probe-{rank}"), &value(rank)));
    check("barrier", pmi.barrier());
    for r in 0..size {
        let got = check("get", pmi.get(&format!("probe-{r}")));
        if got.as_deref() != Some(value(r).as_str()) {
            eprintln!(
                "pmi-probe: rank {rank}: probe-{r} = {got:?}, expected {}",
                value(r)
            );
            exit(4);
        }
    }
    if check("get", pmi.get("probe-missing")).is_some() {
        eprintln!("pmi-probe: rank {rank}: a missing key has a value");
        exit(4);
    }
    let universe = check("universe size", pmi.universe_size());
    if pmi.spawned() {
        let parent = check("get", pmi.get("probe-parent")).unwrap_or_default();
        let appnum = pmi.appnum();
        let env = std::env::var("PROBE_ENV").unwrap_or_else(|_| "-".into());
        let cwd = std::env::current_dir().map_or("-".into(), |d| d.display().to_string());
        let _ = writeln!(
            out.lock(),
            "child {rank} of {size} appnum {appnum} parent={parent} env={env} cwd={cwd}"
        );
        check("put", pmi.put_to(&parent, &format!("child-{rank}"), "here"));
    }
    if let Some((n, prog)) = args.spawn.as_ref().filter(|_| rank == 0) {
        let me = std::env::current_exe().unwrap_or_else(|_| usage("no current exe"));
        let cmd = |prog: &str, info: Vec<(String, String)>| protean_pmi::SpawnCommand {
            nprocs: *n,
            execname: prog.to_string(),
            preput: vec![("probe-parent".into(), pmi.kvsname().to_string())],
            info,
            ..Default::default()
        };
        let commands = match prog {
            Some(p) => vec![cmd(p, Vec::new())],
            None => {
                let me = me.display().to_string();
                vec![
                    cmd(&me, Vec::new()),
                    cmd(
                        &me,
                        vec![
                            ("env".into(), "PROBE_ENV=set".into()),
                            ("wdir".into(), "/".into()),
                        ],
                    ),
                ]
            }
        };
        match check("spawn", pmi.spawn(&commands)) {
            Ok(()) => {
                for c in 0..*n * commands.len() as u32 {
                    let key = format!("child-{c}");
                    while check("get", pmi.get(&key)).is_none() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                let _ = writeln!(out.lock(), "spawned {rank} ok");
            }
            Err(why) => {
                let _ = writeln!(out.lock(), "spawn-error {rank} {why}");
            }
        }
    }

    let mut exit_after = None;
    if let Some((r, action)) = &args.fail {
        if *r == rank {
            // When the failure happens, for callers that time the teardown.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let _ = writeln!(out.lock(), "failing {rank} {now}");
            let code = |s: &str| s.parse::<i32>().unwrap_or_else(|_| usage("bad exit code"));
            match action.split_once('=') {
                None if action == "sigkill" => {
                    // SAFETY: signalling ourselves.
                    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                }
                None if action == "flood" => {
                    let v = "f".repeat(pmi.max_value_len());
                    let mut n = 0u64;
                    while pmi.put(&format!("flood-{n}"), &v).is_ok() {
                        n += 1;
                    }
                    let _ = writeln!(out.lock(), "flood {rank} {n}");
                    std::thread::sleep(Duration::from_secs(30));
                }
                None if action == "garbage" => {
                    let line = b"this is not PMI\n";
                    // SAFETY: writing a live buffer to the client's open socket.
                    unsafe { libc::write(pmi.raw_fd(), line.as_ptr().cast(), line.len()) };
                    std::thread::sleep(Duration::from_secs(30));
                }
                Some(("exit", n)) => exit(code(n)),
                Some(("exit-after", n)) => exit_after = Some(code(n)),
                Some(("abort", spec)) => {
                    let (n, msg) = spec.split_once(':').unwrap_or((spec, ""));
                    let n = code(n);
                    check("abort", pmi.abort(n, msg));
                    exit(n);
                }
                _ => usage(&format!("unknown action {action:?}")),
            }
        }
    }
    if args.sleep > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(args.sleep));
    }
    check("finalize", pmi.finalize());
    let _ = writeln!(
        out.lock(),
        "rank {rank} of {size} ok kvsname={} universe={universe}",
        pmi.kvsname()
    );
    if let Some(n) = exit_after {
        exit(n);
    }
}
