//! mpirun end to end: real jobs of `pmi-probe` (a PMI-1 program built from this package) and of
//! ordinary programs, checking output, exit status, teardown time, and that no process or
//! shared-memory file of the job is left behind.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MPIRUN: &str = env!("CARGO_BIN_EXE_mpirun");
const PROBE: &str = env!("CARGO_BIN_EXE_pmi-probe");

/// No test may take longer than this; a hung mpirun is killed and the test fails.
const WATCHDOG: Duration = Duration::from_secs(30);

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// When mpirun was seen to exit (to within the 5 ms polling interval).
    ended: SystemTime,
}

impl Outcome {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
    /// Values of lines `<word> <rank> <value>` printed by the probe.
    fn tagged(&self, word: &str) -> Vec<(u32, String)> {
        self.stdout
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                (it.next() == Some(word)).then_some(())?;
                Some((it.next()?.parse().ok()?, it.next()?.to_string()))
            })
            .collect()
    }
    /// Time from the probe's "failing" line to mpirun's exit: the teardown time, whatever the
    /// start-up of the job cost on a loaded machine.
    fn teardown_time(&self) -> Duration {
        let (_, ns) = self
            .tagged("failing")
            .pop()
            .unwrap_or_else(|| panic!("no failing line in {:?}", self.stdout));
        let failed = UNIX_EPOCH + Duration::from_nanos(ns.parse().unwrap());
        self.ended.duration_since(failed).unwrap_or_default()
    }
    fn pid_of(&self, rank: u32) -> String {
        self.tagged("pid")
            .into_iter()
            .find(|(r, _)| *r == rank)
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("no pid line for rank {rank} in {:?}", self.stdout))
    }
}

fn mpirun() -> Command {
    let mut c = Command::new(MPIRUN);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn wait_with_watchdog(mut child: Child, started: Instant) -> Outcome {
    fn slurp(r: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
        thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    }
    let t_out = slurp(child.stdout.take());
    let t_err = slurp(child.stderr.take());
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mpirun did not finish within {WATCHDOG:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    let ended = SystemTime::now();
    Outcome {
        ended,
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
        elapsed,
    }
}

fn run(args: &[&str]) -> Outcome {
    run_cmd(mpirun().args(args))
}

fn run_cmd(cmd: &mut Command) -> Outcome {
    let started = Instant::now();
    wait_with_watchdog(cmd.spawn().unwrap(), started)
}

/// True while `pid` exists (zombies included).
fn exists(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits a little for processes that the kernel is still tearing down, then asserts.
fn assert_gone(pids: &[String]) {
    let until = Instant::now() + Duration::from_millis(500);
    while pids.iter().any(|p| exists(p)) && Instant::now() < until {
        thread::sleep(Duration::from_millis(10));
    }
    for p in pids {
        if exists(p) {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            panic!("process {p} of the job is still there: {stat}");
        }
    }
}

fn all_pids(o: &Outcome) -> Vec<String> {
    let mut pids: Vec<String> = o.tagged("pid").into_iter().map(|(_, p)| p).collect();
    pids.extend(o.tagged("grandchild").into_iter().map(|(_, p)| p));
    pids
}

#[test]
fn kvs_exchange_at_1_2_4_and_9_ranks() {
    for n in [1u32, 2, 4, 9] {
        let o = run(&["-n", &n.to_string(), PROBE]);
        assert_eq!(o.code(), Some(0), "n={n}: {}", o.stderr);
        assert_eq!(o.stderr, "", "n={n}");
        let mut ranks: Vec<u32> = o
            .lines()
            .iter()
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(&w[..5], ["rank", w[1], "of", &n.to_string(), "ok"], "{l}");
                w[1].parse().unwrap()
            })
            .collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>());
    }
}

#[test]
fn rank_killed_by_sigkill_tears_the_job_down() {
    let o = run(&[
        "-n",
        "3",
        PROBE,
        "--pids",
        "--grandchild",
        "--shm",
        "--sleep",
        "20",
        "--fail",
        "1:sigkill",
    ]);
    assert!(
        o.teardown_time() < Duration::from_secs(2),
        "{:?}",
        o.teardown_time()
    );
    assert_eq!(o.code(), Some(128 + 9), "{}", o.stderr);
    let pid = o.pid_of(1);
    assert_eq!(
        o.stderr,
        format!(
            "mpirun: rank 1 (pid {pid}) was killed by signal 9 (Killed); terminating the job\n"
        )
    );
    let pids = all_pids(&o);
    assert_eq!(pids.len(), 6, "{}", o.stdout);
    assert_gone(&pids);
    let shm = o.tagged("shm");
    assert_eq!(shm.len(), 1);
    assert!(shm[0].1.starts_with("/dev/shm/protean-"));
    assert!(
        !std::path::Path::new(&shm[0].1).exists(),
        "{} left",
        shm[0].1
    );
}

#[test]
fn exit_before_finalize_tears_the_job_down() {
    for (code, expect) in [("0", 1), ("5", 5)] {
        let o = run(&[
            "-n",
            "3",
            PROBE,
            "--pids",
            "--sleep",
            "20",
            "--fail",
            &format!("2:exit={code}"),
        ]);
        assert!(
            o.teardown_time() < Duration::from_secs(2),
            "{:?}",
            o.teardown_time()
        );
        assert_eq!(o.code(), Some(expect), "{}", o.stderr);
        let pid = o.pid_of(2);
        assert_eq!(
            o.stderr,
            format!(
                "mpirun: rank 2 (pid {pid}) exited with status {code} before MPI_Finalize; \
                 terminating the job\n"
            )
        );
        assert_gone(&all_pids(&o));
    }
}

#[test]
fn nonzero_exit_after_finalize_is_propagated() {
    let o = run(&["-n", "3", PROBE, "--pids", "--fail", "1:exit-after=7"]);
    assert_eq!(o.code(), Some(7), "{}", o.stderr);
    let pid = o.pid_of(1);
    assert_eq!(
        o.stderr,
        format!("mpirun: rank 1 (pid {pid}) exited with status 7; terminating the job\n")
    );
}

#[test]
fn abort_ends_the_job_with_its_code() {
    let o = run(&[
        "-n",
        "4",
        PROBE,
        "--pids",
        "--grandchild",
        "--sleep",
        "20",
        "--fail",
        "3:abort=13:input file missing",
    ]);
    assert!(
        o.teardown_time() < Duration::from_secs(2),
        "{:?}",
        o.teardown_time()
    );
    assert_eq!(o.code(), Some(13), "{}", o.stderr);
    let pid = o.pid_of(3);
    assert_eq!(
        o.stderr,
        format!(
            "mpirun: rank 3 (pid {pid}) called MPI_Abort with error code 13: input file missing\n"
        )
    );
    assert_gone(&all_pids(&o));

    let o = run(&["-n", "2", PROBE, "--pids", "--fail", "0:abort=2"]);
    assert_eq!(o.code(), Some(2));
    let pid = o.pid_of(0);
    assert_eq!(
        o.stderr,
        format!("mpirun: rank 0 (pid {pid}) called MPI_Abort with error code 2\n")
    );
}

#[test]
fn invalid_pmi_message_ends_the_job() {
    let o = run(&["-n", "2", PROBE, "--pids", "--fail", "1:garbage"]);
    assert!(
        o.teardown_time() < Duration::from_secs(2),
        "{:?}",
        o.teardown_time()
    );
    assert_eq!(o.code(), Some(1));
    assert!(
        o.stderr.contains("rank 1") && o.stderr.contains("invalid PMI message"),
        "{}",
        o.stderr
    );
    assert_gone(&all_pids(&o));
}

/// Starts a job of sleeping probes, waits until every rank has printed its pid, sends `sig` to
/// mpirun, and returns the outcome.
fn signal_mpirun(sig: libc::c_int, np: usize) -> Outcome {
    let started = Instant::now();
    let mut child = mpirun()
        .args([
            "-n",
            &np.to_string(),
            PROBE,
            "--pids",
            "--grandchild",
            "--sleep",
            "20",
        ])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut seen = String::new();
    while seen
        .lines()
        .filter(|l| l.starts_with("grandchild "))
        .count()
        < np
    {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("mpirun ended early: {seen}");
        }
        seen.push_str(&line);
    }
    let signalled = Instant::now();
    // SAFETY: signalling our own child, which has not been waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    let mut o = wait_with_watchdog(child, started);
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    o.stdout = seen + &rest;
    o.elapsed = signalled.elapsed();
    o
}

#[test]
fn sigint_and_sigterm_to_mpirun_tear_the_job_down() {
    for (sig, name) in [(libc::SIGINT, "Interrupt"), (libc::SIGTERM, "Terminated")] {
        let o = signal_mpirun(sig, 3);
        assert!(o.elapsed < Duration::from_secs(2), "took {:?}", o.elapsed);
        assert_eq!(o.code(), Some(128 + sig), "{}", o.stderr);
        assert_eq!(
            o.stderr,
            format!("mpirun: received signal {sig} ({name}); terminating the job\n")
        );
        assert_gone(&all_pids(&o));
    }
}

#[test]
fn timeout_ends_the_job() {
    let o = run(&[
        "--timeout",
        "1",
        "-n",
        "2",
        PROBE,
        "--pids",
        "--sleep",
        "20",
    ]);
    assert_eq!(o.code(), Some(124));
    assert!(o.elapsed < Duration::from_secs(4), "took {:?}", o.elapsed);
    assert!(o.elapsed >= Duration::from_secs(1), "took {:?}", o.elapsed);
    assert_eq!(
        o.stderr,
        "mpirun: the job timed out after 1 seconds (--timeout or MPIEXEC_TIMEOUT); \
         terminating the job\n"
    );
    assert_gone(&all_pids(&o));

    let o = run_cmd(
        mpirun()
            .env("MPIEXEC_TIMEOUT", "0.5")
            .args(["-n", "1", "sleep", "20"]),
    );
    assert_eq!(o.code(), Some(124));
    assert!(
        o.stderr.contains("timed out after 0.5 seconds"),
        "{}",
        o.stderr
    );
}

#[test]
fn environment_options_reach_every_rank() {
    let o = run_cmd(mpirun().env("FROM_MPIRUN", "inherited").args([
        "-n",
        "2",
        "-x",
        "FROM_MPIRUN",
        "-x",
        "XSET=a=b",
        "-genv",
        "GENV",
        "two words",
        "-env",
        "ENV",
        "e",
        "--set",
        "eager-limit=8192",
        "--set",
        "shm.fast_channels=4",
        "sh",
        "-c",
        "echo $PMI_RANK $PMI_SIZE $PMI_SPAWNED $PROTEAN_LAUNCHER $MPI_LOCALRANKID \
         $MPI_LOCALNRANKS $PROTEAN_JOBID $PMI_FD \"|$FROM_MPIRUN|$XSET|$GENV|$ENV|\
         $PROTEAN_EAGER_LIMIT|$PROTEAN_SHM_FAST_CHANNELS|\"",
    ]));
    assert_eq!(o.code(), Some(0), "{}", o.stderr);
    let mut lines = o.lines();
    lines.sort_unstable();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    let mut jobids = Vec::new();
    for (rank, line) in lines.iter().enumerate() {
        let (head, tail) = line.split_once(" |").unwrap();
        assert_eq!(tail, "inherited|a=b|two words|e|8192|4|");
        let w: Vec<&str> = head.split_whitespace().collect();
        let rank = rank.to_string();
        assert_eq!(&w[..6], [rank.as_str(), "2", "0", "1", rank.as_str(), "2"]);
        jobids.push(w[6].to_string());
        assert!(w[7].parse::<i32>().unwrap() > 2, "PMI_FD={}", w[7]);
    }
    assert_eq!(jobids[0], jobids[1]);
    let (pid, hex) = jobids[0].split_once('x').unwrap();
    assert!(
        pid.parse::<u32>().is_ok() && hex.len() == 8,
        "{}",
        jobids[0]
    );
}

#[test]
fn tag_output_prefixes_every_line() {
    let o = run(&[
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        "echo out-$PMI_RANK; echo err-$PMI_RANK >&2; echo two; printf tail",
    ]);
    assert_eq!(o.code(), Some(0));
    for r in 0..2 {
        let mine: Vec<&str> = o
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("[1,{r}]")))
            .collect();
        assert_eq!(
            mine,
            [
                format!("[1,{r}]<stdout>:out-{r}"),
                format!("[1,{r}]<stdout>:two"),
                format!("[1,{r}]<stdout>:tail"),
            ]
        );
        assert!(o.stderr.contains(&format!("[1,{r}]<stderr>:err-{r}\n")));
    }
    assert_eq!(o.stdout.lines().count(), 6);
    assert_eq!(o.stderr.lines().count(), 2);
}

#[test]
fn programs_that_are_not_mpi_programs() {
    let o = run(&["-n", "2", "echo", "hi"]);
    assert_eq!(
        (o.code(), o.stdout.as_str(), o.stderr.as_str()),
        (Some(0), "hi\nhi\n", "")
    );

    let o = run(&["-np", "3", "true"]);
    assert_eq!(o.code(), Some(0));

    let o = run(&["-n", "2", "sh", "-c", "exit $((PMI_RANK + 3))"]);
    assert!(o.code() == Some(3) || o.code() == Some(4), "{:?}", o.code());
    assert!(o.stderr.contains("exited with status"), "{}", o.stderr);
    assert!(!o.stderr.contains("MPI_Finalize"), "{}", o.stderr);

    let o = run(&["-n", "1", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(o.code(), Some(128 + 11));
    assert!(
        o.stderr
            .contains("killed by signal 11 (Segmentation fault)"),
        "{}",
        o.stderr
    );
}

#[test]
fn leftover_children_of_a_successful_job_are_ended() {
    let o = run(&["-n", "2", PROBE, "--pids", "--grandchild", "--shm"]);
    assert_eq!(o.code(), Some(0), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    assert_eq!(o.tagged("grandchild").len(), 2);
    assert_gone(&all_pids(&o));
    let shm = o.tagged("shm");
    assert!(!std::path::Path::new(&shm[0].1).exists());
}

#[test]
fn stdin_goes_to_rank_0_only() {
    let mut child = Command::new(MPIRUN)
        .args(["-n", "2", "sh", "-c", "echo $PMI_RANK:$(cat | tr '\\n' ,)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"line one\nline two\n").unwrap();
    }
    let o = wait_with_watchdog(child, Instant::now());
    assert_eq!(o.code(), Some(0), "{}", o.stderr);
    let mut lines = o.lines();
    lines.sort_unstable();
    assert_eq!(lines, ["0:line one,line two,", "1:"]);

    let o = run_cmd(mpirun().args(["--stdin", "none", "-n", "1", "cat"]));
    assert_eq!((o.code(), o.stdout.as_str()), (Some(0), ""));
}

#[test]
fn command_line_errors() {
    let o = run(&["--bogus", "-n", "2", "true"]);
    assert_eq!(o.code(), Some(1));
    assert!(
        o.stderr.starts_with("mpirun: unknown option '--bogus'\n"),
        "{}",
        o.stderr
    );

    let o = run(&["-n", "2"]);
    assert_eq!(o.code(), Some(1));
    assert!(o.stderr.contains("no program given"), "{}", o.stderr);

    let t0 = std::time::Instant::now();
    let o = run(&["-n", "2", "/nonexistent/program"]);
    assert_eq!(o.code(), Some(127));
    assert!(
        o.stderr.contains("cannot start '/nonexistent/program'"),
        "{}",
        o.stderr
    );
    // Nothing was started, so there is nothing to wait for (it gave up after 5.5 s, saying
    // some processes did not end after SIGKILL).
    assert!(!o.stderr.contains("SIGKILL"), "{}", o.stderr);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        t0.elapsed()
    );

    let o = run(&["--help"]);
    assert_eq!(o.code(), Some(0));
    for opt in [
        "-np N",
        "-genv",
        "--tag-output",
        "--timeout",
        "--set",
        "-x VAR",
    ] {
        assert!(o.stdout.contains(opt), "help lacks {opt}");
    }
    let o = run(&["--version"]);
    assert_eq!(o.code(), Some(0));
    assert!(o.stdout.starts_with("mpirun (Protean) "));
}

/// The same probe under MPICH's Hydra (PMI_FD and PMI_PORT modes): our client against a
/// process manager we did not write. Skipped where MPICH is not installed.
#[test]
fn probe_runs_under_hydra() {
    let found = Command::new("mpiexec.hydra")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        eprintln!("skipped: mpiexec.hydra is not installed");
        return;
    }
    for extra in [&[][..], &["-pmi-port"]] {
        let mut cmd = Command::new("mpiexec.hydra");
        cmd.args(extra)
            .args(["-n", "3", PROBE])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let o = run_cmd(&mut cmd);
        assert_eq!(o.code(), Some(0), "{extra:?}: {}", o.stderr);
        let ok = o.lines().iter().filter(|l| l.contains(" of 3 ok ")).count();
        assert_eq!(ok, 3, "{extra:?}: {}", o.stdout);
    }
}

/// A program built against MPICH's own library (its PMI-1 client, not ours) runs under our
/// mpirun, and its MPI_Abort reaches us. Skipped where MPICH's compiler wrapper is missing.
#[test]
fn mpich_program_runs_under_mpirun() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("mpich_hello.c");
    let exe = dir.join("mpich_hello");
    std::fs::write(
        &src,
        "#include <mpi.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int argc, char **argv) {\n\
           int rank, size, sum;\n\
           MPI_Init(&argc, &argv);\n\
           MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n\
           MPI_Comm_size(MPI_COMM_WORLD, &size);\n\
           MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);\n\
           printf(\"rank %d of %d sum %d\\n\", rank, size, sum);\n\
           fflush(stdout);\n\
           if (argc > 1 && rank == atoi(argv[1])) MPI_Abort(MPI_COMM_WORLD, 42);\n\
           MPI_Finalize();\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let built = Command::new("mpicc.mpich")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(built, Ok(st) if st.success()) {
        eprintln!("skipped: mpicc.mpich is not installed or failed");
        return;
    }
    let exe = exe.to_str().unwrap();
    let o = run(&["-n", "4", exe]);
    assert_eq!(o.code(), Some(0), "{}", o.stderr);
    let mut lines = o.lines();
    lines.sort_unstable();
    assert_eq!(
        lines,
        (0..4)
            .map(|r| format!("rank {r} of 4 sum 6"))
            .collect::<Vec<_>>()
    );

    let o = run(&["-n", "3", exe, "1"]);
    assert_eq!(o.code(), Some(42), "{}", o.stderr);
    assert!(
        o.stderr.contains("mpirun: rank 1 (pid ") && o.stderr.contains("error code 42"),
        "{}",
        o.stderr
    );
}

/// A rank that ignores SIGTERM is killed with SIGKILL after the grace time.
#[test]
fn ranks_that_ignore_sigterm_are_killed() {
    let o = run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "trap '' TERM; echo pid $PMI_RANK $$; \
         if [ $PMI_RANK = 0 ]; then sleep 0.3; exit 9; fi; sleep 20",
    ]);
    assert_eq!(o.code(), Some(9), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(3), "took {:?}", o.elapsed);
    assert!(
        o.stderr.starts_with(&format!(
            "mpirun: rank 0 (pid {}) exited with status 9;",
            o.pid_of(0)
        )),
        "{}",
        o.stderr
    );
    assert_gone(&all_pids(&o));
}

/// Resident memory of a process in KiB (VmRSS), 0 when gone.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_rank_flooding_the_pmi_store_ends_the_job_and_is_named() {
    let started = Instant::now();
    let child = mpirun()
        .args(["-n", "2", PROBE, "--fail", "1:flood"])
        .spawn()
        .unwrap();
    let pid = child.id();
    // Watch mpirun's memory while the flood goes on.
    let watch = thread::spawn(move || {
        let mut peak = 0;
        while exists(&pid.to_string()) {
            peak = peak.max(rss_kib(pid));
            thread::sleep(Duration::from_millis(20));
        }
        peak
    });
    let o = wait_with_watchdog(child, started);
    let peak = watch.join().unwrap();
    assert_eq!(o.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("rank 1 (pid")
            && o.stderr.contains("exceeded a limit of the PMI server")
            && o.stderr.contains("store"),
        "{}",
        o.stderr
    );
    // The store stops at 16 MiB (some 15,000 puts of 1 KiB; unbounded, the flood would go on
    // until memory ran out), and mpirun stays within a few times that.
    assert!(o.stderr.contains("at most 16777216"), "{}", o.stderr);
    assert!(peak < 80 * 1024, "mpirun peaked at {peak} KiB");
    assert_gone(&all_pids(&o));
}

#[test]
fn ranks_die_with_mpirun_killed_by_sigkill() {
    let np = 3;
    let mut child = mpirun()
        .args(["-n", &np.to_string(), PROBE, "--pids", "--sleep", "20"])
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    while pids.len() < np {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("mpirun ended early");
        }
        if let Some(p) = line.strip_prefix("pid ") {
            pids.push(p.split_whitespace().nth(1).unwrap().to_string());
        }
    }
    // SAFETY: signalling our own child, which has not been waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let killed = Instant::now();
    child.wait().unwrap();
    // No process of the job remains within 2 s (zombies reaped by init count as gone).
    let alive = |p: &String| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    while pids.iter().any(alive) && killed.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<_> = pids.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "ranks {left:?} outlived mpirun by 2 s");
}

// Jobs with ranks on "other hosts": the proxies are started with the fork launcher (on this
// machine, without ssh), so the proxy path is exercised everywhere; tests/cluster/test runs the
// same across real network namespaces through ssh.

#[test]
fn ranks_of_other_hosts_run_through_proxies() {
    let o = run(&[
        "--launcher",
        "fork",
        "-H",
        "localhost:1,other-a:2,other-b:1",
        "--tag-output",
        PROBE,
        "--pids",
    ]);
    assert_eq!(o.code(), Some(0), "{}", o.stderr);
    for r in 0..4 {
        assert!(
            o.stdout
                .contains(&format!("[1,{r}]<stdout>:rank {r} of 4 ok")),
            "{}",
            o.stdout
        );
    }
    assert_gone(&all_pids(&o));
}

#[test]
fn a_remote_rank_failing_is_named_with_its_host() {
    let o = run(&[
        "--launcher",
        "fork",
        "-H",
        "other-a:2",
        PROBE,
        "--fail",
        "1:exit=5",
        "--sleep",
        "20",
    ]);
    assert_eq!(o.code(), Some(5), "{}", o.stderr);
    assert!(
        o.stderr.contains("rank 1 (pid") && o.stderr.contains("on other-a) exited with status 5"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
}

#[test]
fn a_failing_launcher_is_named_and_ends_the_job() {
    let o = run(&[
        "--launcher-exec",
        "/bin/false",
        "-H",
        "localhost:1,other-a:1",
        PROBE,
        "--sleep",
        "20",
    ]);
    assert_eq!(o.code(), Some(255), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("host other-a: ssh exited with status 1 before its proxy connected"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
}

/// Proxies of this test's mpirun (children of `mpirun_pid` running protean-proxy).
fn proxies_of(mpirun_pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(mpirun_pid) && String::from_utf8_lossy(&cmd).contains("protean-proxy") {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_proxy_killed_mid_job_ends_it_and_ranks_die_with_a_killed_mpirun() {
    for victim in ["proxy", "mpirun"] {
        let mut child = mpirun()
            .args([
                "--launcher",
                "fork",
                "-H",
                "other-a:2,other-b:1",
                PROBE,
                "--pids",
                "--sleep",
                "20",
            ])
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut pids = Vec::new();
        while pids.len() < 3 {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "mpirun ended early"
            );
            if let Some(p) = line.strip_prefix("pid ") {
                pids.push(p.split_whitespace().nth(1).unwrap().to_string());
            }
        }
        let proxies = proxies_of(child.id());
        assert_eq!(proxies.len(), 2, "{proxies:?}");
        let started = Instant::now();
        let target = if victim == "proxy" {
            proxies[0] as libc::pid_t
        } else {
            child.id() as libc::pid_t
        };
        // SAFETY: signalling a process this test started (mpirun or its proxy).
        unsafe { libc::kill(target, libc::SIGKILL) };
        let o = wait_with_watchdog(child, started);
        if victim == "proxy" {
            assert_eq!(o.code(), Some(255), "{}", o.stderr);
            assert!(
                o.stderr.contains("its proxy closed the connection"),
                "{}",
                o.stderr
            );
            assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
        }
        let mut all = pids.clone();
        all.extend(proxies.iter().map(|p| p.to_string()));
        let alive = |p: &String| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
        };
        while all.iter().any(alive) && started.elapsed() < Duration::from_secs(2) {
            thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<_> = all.iter().filter(|p| alive(p)).collect();
        assert!(
            left.is_empty(),
            "{victim} killed: {left:?} still alive after 2 s"
        );
    }
}

#[test]
fn spawn_starts_a_job_of_its_own() {
    // Rank 0 of 2 spawns two commands of 2 probes each: one PMI group of 4 with its own KVS
    // and barrier, appnum by command, info env and wdir applied, pre-put values seen, and the
    // children's puts into the parent's KVS reach it.
    let o = run(&["-n", "2", PROBE, "--spawn", "2"]);
    assert_eq!(o.code(), Some(0), "{}\n{}", o.stdout, o.stderr);
    assert_eq!(o.stderr, "");
    let parent_kvs = o
        .lines()
        .iter()
        .find_map(|l| l.strip_prefix("rank 0 of 2 ok kvsname="))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{}", o.stdout))
        .to_string();
    let mut children: Vec<String> = o
        .lines()
        .iter()
        .filter(|l| l.starts_with("child "))
        .map(|l| l.to_string())
        .collect();
    children.sort();
    let cwd = std::env::current_dir().unwrap().display().to_string();
    assert_eq!(
        children,
        [
            format!("child 0 of 4 appnum 0 parent={parent_kvs} env=- cwd={cwd}"),
            format!("child 1 of 4 appnum 0 parent={parent_kvs} env=- cwd={cwd}"),
            format!("child 2 of 4 appnum 1 parent={parent_kvs} env=set cwd=/"),
            format!("child 3 of 4 appnum 1 parent={parent_kvs} env=set cwd=/"),
        ]
    );
    let child_job = format!("kvsname={parent_kvs}-s1");
    assert_eq!(
        o.lines()
            .iter()
            .filter(|l| l.starts_with("rank ") && l.contains(&child_job))
            .count(),
        4
    );
    assert!(o.stdout.contains("spawned 0 ok"));
}

#[test]
fn spawn_of_a_program_that_cannot_run_starts_nothing() {
    let dir = std::env::temp_dir().join(format!("protean-spawn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain");
    std::fs::write(&plain, "not a program").unwrap();
    let plain = plain.display().to_string();
    for (prog, why) in [
        (
            "/nonexistent/prog",
            "cannot spawn '/nonexistent/prog': No such file",
        ),
        (plain.as_str(), "not executable (permission denied)"),
        (
            "no-such-program-anywhere",
            "no such program in the path or PATH",
        ),
    ] {
        let o = run(&["-n", "1", PROBE, "--spawn", &format!("3:{prog}")]);
        assert_eq!(o.code(), Some(0), "{prog}: {}", o.stderr);
        let err = o
            .lines()
            .iter()
            .find_map(|l| l.strip_prefix("spawn-error 0 "))
            .unwrap_or_else(|| panic!("{prog}: {}", o.stdout))
            .to_string();
        assert!(err.contains(why), "{prog}: {err}");
        assert!(!o.stdout.contains("child "), "{}", o.stdout);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
