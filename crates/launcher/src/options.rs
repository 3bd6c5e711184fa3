//! Command-line options of `mpirun` / `mpiexec`.
//!
//! Parsed by hand rather than with an argument-parsing crate: mpirun's conventions are not
//! getopt's. Long options take one dash or two (`-np 4`, `--np 4`, `-tag-output`), some take two
//! values (`-genv VAR value`), and everything from the first word that is not an option on is the
//! program and its own arguments, passed through untouched (even words that look like options).

use std::ffi::OsString;
use std::time::Duration;

use crate::hosts::MapBy;
use crate::launch::LauncherKind;

/// What the user asked for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Run(Box<Options>),
    Help,
    Version,
}

/// Where standard input goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinTarget {
    /// mpirun's standard input is forwarded to rank 0; the other ranks read /dev/null.
    Rank0,
    /// Every rank reads /dev/null and mpirun leaves its standard input alone.
    None,
}

/// Where ranks are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindTo {
    None,
    Core,
    Socket,
}

/// What MPI_UNIVERSE_SIZE says (`-usize`, Hydra's option and values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Universe {
    /// The slots of the hosts given, else this machine's CPUs (never fewer than the job).
    System,
    /// No limit: the attribute is not set (the program decides for itself).
    Infinite,
    /// This many processes.
    Size(usize),
}

/// A job to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Number of processes.
    pub np: usize,
    /// `-n` was given (else a host list's slots decide).
    pub np_given: bool,
    /// `--host` lists, in order.
    pub host_lists: Vec<String>,
    /// `--hostfile` paths, in order.
    pub hostfiles: Vec<String>,
    /// `-ppn`: processes per host.
    pub ppn: Option<usize>,
    pub map_by: MapBy,
    /// `--launcher` (None: ssh, or slurm inside a Slurm allocation).
    pub launcher: Option<LauncherKind>,
    /// `--launcher-exec`.
    pub launcher_exec: Option<String>,
    pub bind_to: BindTo,
    pub report_bindings: bool,
    pub oversubscribe: bool,
    /// Seconds the proxies have to connect.
    pub launch_timeout: Duration,
    /// Working directory of the ranks.
    pub wdir: Option<String>,
    /// Variables to set in every rank, in order (a later setting of a name wins).
    pub env: Vec<(String, String)>,
    /// Prefix each output line with `[1,rank]<stdout>:` or `[1,rank]<stderr>:`.
    pub tag_output: bool,
    /// End the job after this long.
    pub timeout: Option<Duration>,
    /// Where standard input goes.
    pub stdin: StdinTarget,
    /// The standalone name server (`protean-nameserver`) that serves MPI_Publish_name and
    /// MPI_Lookup_name for this job: its address and secret (None: mpirun serves them
    /// itself).
    pub nameserver: Option<protean_pmi::names::Address>,
    /// MPI_UNIVERSE_SIZE.
    pub universe: Universe,
    /// Warnings to print before running (e.g. `-x` of an unset variable).
    pub warnings: Vec<String>,
    /// The program and its arguments (not empty).
    pub program: Vec<OsString>,
}

/// A command line that cannot be run; mpirun prints it and exits with status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The help text (`mpirun --help`).
pub const HELP: &str = "\
Usage: mpirun [options] program [arguments...]
       mpiexec [options] program [arguments...]

Starts NP copies of PROGRAM as one MPI job, on this machine or on the hosts given, serves
them the PMI-1 protocol, and tears the whole job down if any process fails. Options may be
written with one dash or two (-np 4, --np 4); the first word that is not an option is the
program, and everything after it is passed to the program untouched.

Options:
  -n N, -np N, --np N     number of processes to start (default 1; with hosts given, their
                          slots)
  -H, --host LIST         run on these hosts: h1,h2:4,h3 (a host's slots after ':',
                          default 1); repeatable
  -f, --hostfile FILE     run on the hosts of FILE, one a line: 'host', 'host:N' (Hydra) or
                          'host slots=N' (Open MPI), '#' comments (also --machinefile)
  -ppn N                  N processes on each host (its slots become N; also --npernode)
  --map-by slot|node      fill each host's slots in turn (slot, default), or deal ranks to
                          the hosts round-robin (node; also -rr)
  --oversubscribe         allow more processes than slots (placement goes round again)
  --launcher NAME         how proxies reach the other hosts: ssh (default), rsh, fork (a local
                          process), slurm (one srun; the default inside a Slurm allocation)
  --launcher-exec CMD     the program to run instead of ssh, rsh or srun
  --launch-timeout SECS   time the hosts' proxies have to connect back (default 60)
  --bind-to core|socket|none
                          bind each rank to a core or a socket of its host, dealt in turn
                          (default none)
  --report-bindings       print each rank's binding on stderr
  -wdir DIR               working directory of the ranks (default: mpirun's)
  -x VAR                  export VAR, with its value in mpirun's environment, to every rank
                          (ranks inherit all of mpirun's environment anyway; this form is
                          accepted for Open MPI command lines and warns if VAR is unset)
  -x VAR=value            set VAR=value in every rank
  -genv VAR value         set VAR=value in every rank (MPICH style)
  -env VAR value          the same as -genv (there is only one program per job)
  --set NAME=VALUE        set a Protean tunable: exported to every rank as PROTEAN_<NAME>,
                          NAME upper-cased with '-' and '.' turned into '_'
                          (--set eager-limit=8192 sets PROTEAN_EAGER_LIMIT=8192); repeatable
  --tag-output            prefix every line of output with [1,RANK]<stdout>: or
                          [1,RANK]<stderr>: (the Open MPI format)
  --timeout SECONDS       end the job if it runs longer than SECONDS (also: environment
                          variable MPIEXEC_TIMEOUT; the option wins); exit status 124
  --nameserver file:PATH  serve MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name
                          from the protean-nameserver whose URI is in PATH (its --report-uri
                          file), so that independent jobs find each other; the URI itself,
                          protean-ns:SECRET:HOST:PORT, is taken too, but a command line is
                          visible to every user (also: PROTEAN_NAMESERVER=URI or file:PATH;
                          also --ompi-server); without it mpirun serves its own jobs' names.
                          Every request proves the server's secret and travels sealed
  -usize N|SYSTEM|INFINITE
                          MPI_UNIVERSE_SIZE, the processes a job may expect to run with
                          spawned ones: N, SYSTEM (default: the hosts' slots, else this
                          machine's CPUs, at least the job's size) or INFINITE (not set);
                          never less than the processes running (also: MPIEXEC_UNIVERSE_SIZE)
  --stdin 0|none          forward mpirun's standard input to rank 0 (default), or to nobody
                          (then every rank reads /dev/null and mpirun does not touch its input)
  -h, --help              print this help and exit
  -V, --version           print the version and exit

Accepted for compatibility with Open MPI and MPICH command lines, and ignored:
  --allow-run-as-root     Protean never refuses to run as root

Hosts: without --host or --hostfile the job runs on this machine, with no limit on the
number of processes, unless mpirun runs inside a Slurm allocation (SLURM_JOB_NODELIST), whose
nodes and tasks per node are then the hosts and slots. Ranks placed on this machine (a host
named localhost, its host name or one of its addresses) are started by mpirun itself; every
other host gets one protean-proxy (from mpirun's own directory, the same path on every host),
started through the launcher, that forks the host's ranks, serves their PMI over local
sockets and relays everything over one connection back to mpirun. That connection is
authenticated and encrypted with a secret drawn for the job, handed to each proxy on the
launcher's standard input. Ranks get mpirun's environment (less SLURM_*, PMI_* and the
shell's own variables), plus the variables set above.

Every rank's environment is mpirun's, plus the variables set above, plus:
  PMI_FD, PMI_RANK, PMI_SIZE, PMI_SPAWNED=0   the PMI-1 connection (MPICH's simple PMI)
  MPI_LOCALRANKID, MPI_LOCALNRANKS            rank and size on this node (as Hydra sets)
  PROTEAN_JOBID                               unique per job: <mpirun pid>x<8 hex digits>
  PROTEAN_LAUNCHER=1                          started by Protean's mpirun

All ranks of a host run in one process group of their own, and each dies with the process
that started it (mpirun or its proxy). Standard output and error of the ranks on this
machine go straight to mpirun's own (or through mpirun with --tag-output); those of other
hosts come through their proxy. SIGUSR1 and SIGUSR2 sent to mpirun are passed on to every
rank.

The job is torn down (SIGTERM to the whole process group, SIGKILL after half a second)
when a rank is killed by a signal, exits with a non-zero status, exits after MPI_Init but
before MPI_Finalize, calls MPI_Abort, or when mpirun receives SIGINT, SIGTERM or SIGHUP,
or the timeout expires, or a host's launcher fails or its proxy is lost. A program that never calls MPI_Init and exits with 0 is fine
(mpirun -n 2 hostname works). Afterwards, shared-memory files
/dev/shm/protean-<PROTEAN_JOBID>-* left by the job are removed.

Exit status: 0 when every rank exited with 0; otherwise the first failing rank's status
(128+N for a rank killed by signal N; 1 for a rank that exited with 0 before MPI_Finalize),
the code given to MPI_Abort, 124 on timeout, 128+N when mpirun got signal N, 127 when the
program cannot be found or started, 255 when a host failed (its launcher, ssh for instance,
failed, or its proxy was lost), and 1 for a bad command line or host list.
";

/// Turns a `--set` name into its environment variable.
pub fn tunable_env_name(name: &str) -> Result<String, UsageError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(UsageError(format!(
            "--set: {name:?} is not a tunable name (letters, digits, '_', '-', '.')"
        )));
    }
    let mut out = String::from("PROTEAN_");
    for c in name.chars() {
        out.push(match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        });
    }
    Ok(out)
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

/// A name server's URI (`protean-ns:SECRET:HOST:PORT`), or `file:PATH` of a file holding it
/// (as Open MPI's `--ompi-server file:PATH`). An address without the secret is refused.
fn nameserver_addr(what: &str, text: &str) -> Result<protean_pmi::names::Address, UsageError> {
    protean_pmi::names::Address::resolve(what, text).map_err(UsageError)
}

fn parse_timeout(what: &str, text: &str) -> Result<Option<Duration>, UsageError> {
    let secs: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .ok_or_else(|| UsageError(format!("{what}: {text:?} is not a number of seconds")))?;
    // Like Hydra's MPIEXEC_TIMEOUT, zero means no timeout.
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs)))
}

/// Parses the arguments after the program name. `getenv` reads mpirun's environment (for `-x VAR`
/// and MPIEXEC_TIMEOUT), so tests can supply their own.
pub fn parse(
    args: Vec<OsString>,
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Command, UsageError> {
    let mut opts = Options {
        np: 1,
        np_given: false,
        host_lists: Vec::new(),
        hostfiles: Vec::new(),
        ppn: None,
        map_by: MapBy::Slot,
        launcher: None,
        launcher_exec: None,
        bind_to: BindTo::None,
        report_bindings: false,
        oversubscribe: false,
        launch_timeout: Duration::from_secs(60),
        wdir: None,
        env: Vec::new(),
        tag_output: false,
        timeout: None,
        stdin: StdinTarget::Rank0,
        nameserver: None,
        universe: Universe::System,
        warnings: Vec::new(),
        program: Vec::new(),
    };
    let mut timeout_given = false;
    let mut universe_given = false;
    let mut it = args.into_iter().peekable();
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str() else {
            // Not UTF-8: cannot be one of our options, so it is the program.
            opts.program.push(arg);
            break;
        };
        if text == "--" {
            break;
        }
        if !text.starts_with('-') || text == "-" {
            opts.program.push(arg);
            break;
        }
        let body = text.trim_start_matches('-');
        let (name, attached) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let shown = text.split('=').next().unwrap_or(text).to_string();
        let mut value = |what: &str| -> Result<String, UsageError> {
            if let Some(v) = attached.clone() {
                return Ok(v);
            }
            match it.next() {
                Some(v) => v
                    .into_string()
                    .map_err(|_| UsageError(format!("{shown}: {what} is not valid UTF-8"))),
                None => Err(UsageError(format!("{shown} needs {what}"))),
            }
        };
        match name {
            "n" | "np" => {
                let v = value("a number of processes")?;
                opts.np = v.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    UsageError(format!(
                        "{shown}: {v:?} is not a number of processes (>= 1)"
                    ))
                })?;
                opts.np_given = true;
            }
            "H" | "host" | "hosts" => opts.host_lists.push(value("a host list")?),
            "f" | "hostfile" | "machinefile" => opts.hostfiles.push(value("a file name")?),
            "ppn" | "npernode" => {
                let v = value("a number of processes per host")?;
                opts.ppn = Some(v.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    UsageError(format!(
                        "{shown}: {v:?} is not a number of processes (>= 1)"
                    ))
                })?);
            }
            "map-by" => {
                let v = value("slot or node")?;
                opts.map_by = match v.split(':').next().unwrap_or("") {
                    "slot" | "core" => MapBy::Slot,
                    "node" => MapBy::Node,
                    _ => return Err(UsageError(format!("--map-by: {v:?} is not slot or node"))),
                };
            }
            "rr" | "bynode" => opts.map_by = MapBy::Node,
            "byslot" => opts.map_by = MapBy::Slot,
            "launcher" | "bootstrap" => {
                let v = value("a launcher")?;
                opts.launcher = Some(LauncherKind::parse(&v).ok_or_else(|| {
                    UsageError(format!("--launcher: {v:?} is not ssh, rsh, fork or slurm"))
                })?);
            }
            "launcher-exec" | "bootstrap-exec" => {
                let v = value("a program")?;
                if v.trim().is_empty() {
                    return Err(UsageError(format!("{shown}: empty program")));
                }
                opts.launcher_exec = Some(v);
            }
            "launch-timeout" => {
                let v = value("a number of seconds")?;
                opts.launch_timeout = parse_timeout(&shown, &v)?
                    .ok_or_else(|| UsageError(format!("{shown}: must be more than 0")))?;
            }
            "wdir" | "cwd" => opts.wdir = Some(value("a directory")?),
            "report-bindings" => opts.report_bindings = true,
            "x" => {
                let v = value("a variable name")?;
                match v.split_once('=') {
                    Some((k, val)) if env_name_ok(k) => opts.env.push((k.into(), val.into())),
                    Some(_) => return Err(UsageError(format!("-x: bad variable {v:?}"))),
                    None if !env_name_ok(&v) => {
                        return Err(UsageError(format!("-x: bad variable name {v:?}")))
                    }
                    None => match getenv(&v) {
                        Some(val) => opts.env.push((v, val)),
                        None => opts.warnings.push(format!(
                            "-x {v}: {v} is not set in mpirun's environment; not exported"
                        )),
                    },
                }
            }
            "genv" | "env" => {
                if attached.is_some() {
                    return Err(UsageError(format!("{shown} takes two words: VAR value")));
                }
                let k = value("a variable name and a value")?;
                if !env_name_ok(&k) {
                    return Err(UsageError(format!("{shown}: bad variable name {k:?}")));
                }
                let v = value("a value after the variable name")?;
                opts.env.push((k, v));
            }
            "set" => {
                let v = value("NAME=VALUE")?;
                let (k, val) = v
                    .split_once('=')
                    .ok_or_else(|| UsageError(format!("--set needs NAME=VALUE, got {v:?}")))?;
                opts.env.push((tunable_env_name(k)?, val.to_string()));
            }
            "tag-output" => opts.tag_output = true,
            "timeout" => {
                opts.timeout = parse_timeout(&shown, &value("a number of seconds")?)?;
                timeout_given = true;
            }
            "stdin" => {
                let v = value("0 or none")?;
                opts.stdin = match v.as_str() {
                    "0" | "rank0" => StdinTarget::Rank0,
                    "none" => StdinTarget::None,
                    _ => return Err(UsageError(format!("--stdin: {v:?} is not 0 or none"))),
                };
            }
            "nameserver" | "ompi-server" => {
                let v = value("file:PATH or a protean-ns: URI")?;
                opts.nameserver = Some(nameserver_addr(&shown, &v)?);
            }
            "usize" | "universe-size" => {
                opts.universe = parse_universe(&shown, &value("N, SYSTEM or INFINITE")?)?;
                universe_given = true;
            }
            "oversubscribe" => opts.oversubscribe = true,
            "allow-run-as-root" => {}
            "bind-to" | "binding" => {
                let v = value("core, socket or none")?;
                opts.bind_to = match v.split(':').next().unwrap_or("") {
                    "core" | "cores" | "hwthread" => BindTo::Core,
                    "socket" | "sockets" | "package" => BindTo::Socket,
                    "none" => BindTo::None,
                    _ => {
                        return Err(UsageError(format!(
                            "--bind-to: {v:?} is not core, socket or none"
                        )))
                    }
                };
            }
            "h" | "help" => return Ok(Command::Help),
            "V" | "version" => return Ok(Command::Version),
            _ => {
                return Err(UsageError(format!("unknown option '{shown}'")));
            }
        }
    }
    opts.program.extend(it);
    if opts.program.is_empty() {
        return Err(UsageError("no program given".into()));
    }
    if opts.nameserver.is_none() {
        if let Some(v) = getenv("PROTEAN_NAMESERVER").filter(|v| !v.trim().is_empty()) {
            opts.nameserver = Some(nameserver_addr("PROTEAN_NAMESERVER", &v)?);
        }
    }
    if !timeout_given {
        if let Some(t) = getenv("MPIEXEC_TIMEOUT").filter(|t| !t.trim().is_empty()) {
            opts.timeout = parse_timeout("MPIEXEC_TIMEOUT", &t)?;
        }
    }
    if !universe_given {
        if let Some(u) = getenv("MPIEXEC_UNIVERSE_SIZE").filter(|u| !u.trim().is_empty()) {
            opts.universe = parse_universe("MPIEXEC_UNIVERSE_SIZE", &u)?;
        }
    }
    Ok(Command::Run(Box::new(opts)))
}

fn parse_universe(what: &str, v: &str) -> Result<Universe, UsageError> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("SYSTEM") {
        Ok(Universe::System)
    } else if v.eq_ignore_ascii_case("INFINITE") {
        Ok(Universe::Infinite)
    } else {
        match v.parse::<usize>() {
            Ok(n) if n > 0 && n <= i32::MAX as usize => Ok(Universe::Size(n)),
            _ => Err(UsageError(format!(
                "{what}: {v:?} is not a number of processes (1 or more), SYSTEM or INFINITE"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(words: &[&str]) -> Result<Command, UsageError> {
        run_env(words, &[])
    }

    fn run_env(words: &[&str], env: &[(&str, &str)]) -> Result<Command, UsageError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(words.iter().map(OsString::from).collect(), move |k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    fn opts(words: &[&str]) -> Options {
        match run(words) {
            Ok(Command::Run(o)) => *o,
            other => panic!("{words:?} -> {other:?}"),
        }
    }

    fn program(o: &Options) -> Vec<&str> {
        o.program.iter().map(|s| s.to_str().unwrap()).collect()
    }

    #[test]
    fn process_counts() {
        assert_eq!(opts(&["prog"]).np, 1);
        for form in [
            &["-n", "4", "prog"][..],
            &["-np", "4", "prog"],
            &["--np", "4", "prog"],
            &["--n", "4", "prog"],
            &["--np=4", "prog"],
            &["-n=4", "prog"],
        ] {
            assert_eq!(opts(form).np, 4, "{form:?}");
        }
        for bad in [
            &["-n", "0", "p"][..],
            &["-n", "x", "p"],
            &["-n"],
            &["-np", "-1", "p"],
        ] {
            assert!(run(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn program_arguments_are_untouched() {
        let o = opts(&["-n", "2", "./a.out", "-n", "5", "--tag-output", "x"]);
        assert_eq!(o.np, 2);
        assert!(!o.tag_output);
        assert_eq!(program(&o), ["./a.out", "-n", "5", "--tag-output", "x"]);
        let o = opts(&["--", "-weird-name", "-x"]);
        assert_eq!(program(&o), ["-weird-name", "-x"]);
    }

    #[test]
    fn environment_options() {
        let o = match run_env(
            &[
                "-x",
                "HOME",
                "-x",
                "A=1=2",
                "-genv",
                "B",
                "two words",
                "-env",
                "C",
                "",
                "--set",
                "eager-limit=8192",
                "--set=shm.fast_channels=4",
                "-x",
                "UNSET",
                "p",
            ],
            &[("HOME", "/root")],
        ) {
            Ok(Command::Run(o)) => *o,
            other => panic!("{other:?}"),
        };
        let env: Vec<(&str, &str)> = o
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("HOME", "/root"),
                ("A", "1=2"),
                ("B", "two words"),
                ("C", ""),
                ("PROTEAN_EAGER_LIMIT", "8192"),
                ("PROTEAN_SHM_FAST_CHANNELS", "4"),
            ]
        );
        assert_eq!(o.warnings.len(), 1);
        assert!(o.warnings[0].contains("UNSET"));
        for bad in [
            &["-x", "=1", "p"][..],
            &["-genv", "A"],
            &["--set", "novalue", "p"],
            &["--set", "bad name=1", "p"],
            &["--set", "=1", "p"],
            &["-genv=A", "1", "p"],
        ] {
            assert!(run(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tunable_names() {
        assert_eq!(
            tunable_env_name("eager-limit").unwrap(),
            "PROTEAN_EAGER_LIMIT"
        );
        assert_eq!(tunable_env_name("tcp.lanes").unwrap(), "PROTEAN_TCP_LANES");
        assert_eq!(tunable_env_name("Max_Fast").unwrap(), "PROTEAN_MAX_FAST");
        assert!(tunable_env_name("a b").is_err());
    }

    #[test]
    fn timeouts() {
        assert_eq!(
            opts(&["--timeout", "5", "p"]).timeout,
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            opts(&["-timeout=0.5", "p"]).timeout,
            Some(Duration::from_millis(500))
        );
        assert_eq!(opts(&["--timeout", "0", "p"]).timeout, None);
        let from_env = |words: &[&str], t: &str| match run_env(words, &[("MPIEXEC_TIMEOUT", t)]) {
            Ok(Command::Run(o)) => Ok(o.timeout),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(from_env(&["p"], "7"), Ok(Some(Duration::from_secs(7))));
        assert_eq!(
            from_env(&["--timeout", "2", "p"], "7"),
            Ok(Some(Duration::from_secs(2)))
        );
        assert!(from_env(&["p"], "soon").is_err());
        assert!(run(&["--timeout", "-3", "p"]).is_err());
        assert!(run(&["--timeout", "inf", "p"]).is_err());
    }

    #[test]
    fn universe_size() {
        assert_eq!(opts(&["p"]).universe, Universe::System);
        assert_eq!(opts(&["-usize", "12", "p"]).universe, Universe::Size(12));
        assert_eq!(
            opts(&["--usize=infinite", "p"]).universe,
            Universe::Infinite
        );
        assert_eq!(opts(&["-usize", "SYSTEM", "p"]).universe, Universe::System);
        let from_env =
            |words: &[&str], u: &str| match run_env(words, &[("MPIEXEC_UNIVERSE_SIZE", u)]) {
                Ok(Command::Run(o)) => Ok(o.universe),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e),
            };
        assert_eq!(from_env(&["p"], "INFINITE"), Ok(Universe::Infinite));
        assert_eq!(
            from_env(&["-usize", "3", "p"], "INFINITE"),
            Ok(Universe::Size(3))
        );
        assert!(from_env(&["p"], "lots").is_err());
        assert!(run(&["-usize", "0", "p"]).is_err());
        assert!(run(&["-usize", "-2", "p"]).is_err());
    }

    #[test]
    fn flags_and_ignored_options() {
        let o = opts(&[
            "--tag-output",
            "--oversubscribe",
            "-allow-run-as-root",
            "--bind-to",
            "core",
            "--bind-to=socket",
            "--stdin",
            "none",
            "p",
        ]);
        assert!(o.tag_output);
        assert!(o.oversubscribe);
        assert_eq!(o.bind_to, BindTo::Socket);
        assert!(run(&["--bind-to", "tile", "p"]).is_err());
        assert_eq!(o.stdin, StdinTarget::None);
        assert_eq!(program(&o), ["p"]);
        assert_eq!(run(&["-h"]), Ok(Command::Help));
        assert_eq!(run(&["--help", "p"]), Ok(Command::Help));
        assert_eq!(run(&["--version"]), Ok(Command::Version));
    }

    #[test]
    fn host_options() {
        let o = opts(&[
            "-H",
            "a,b:2",
            "--host=c",
            "-f",
            "hosts.txt",
            "-ppn",
            "3",
            "--map-by",
            "node",
            "--launcher",
            "rsh",
            "--launcher-exec",
            "/usr/bin/myrsh",
            "--report-bindings",
            "-wdir",
            "/tmp",
            "--launch-timeout",
            "5",
            "p",
        ]);
        assert_eq!(o.host_lists, ["a,b:2", "c"]);
        assert_eq!(o.hostfiles, ["hosts.txt"]);
        assert_eq!(o.ppn, Some(3));
        assert_eq!(o.map_by, MapBy::Node);
        assert_eq!(o.launcher, Some(LauncherKind::Rsh));
        assert_eq!(o.launcher_exec.as_deref(), Some("/usr/bin/myrsh"));
        assert!(o.report_bindings && !o.np_given);
        assert_eq!(o.wdir.as_deref(), Some("/tmp"));
        assert_eq!(o.launch_timeout, Duration::from_secs(5));
        assert_eq!(
            opts(&["-launcher", "slurm", "p"]).launcher,
            Some(LauncherKind::Slurm)
        );
        assert!(opts(&["-n", "2", "p"]).np_given);
        for bad in [
            &["--launcher", "pbs", "p"][..],
            &["-ppn", "0", "p"],
            &["--map-by", "board", "p"],
            &["-H"],
            &["--launch-timeout", "0", "p"],
        ] {
            assert!(run(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors() {
        assert_eq!(
            run(&["--bogus", "p"]),
            Err(UsageError("unknown option '--bogus'".into()))
        );
        assert_eq!(
            run(&["-n4", "p"]),
            Err(UsageError("unknown option '-n4'".into()))
        );
        assert_eq!(run(&[]), Err(UsageError("no program given".into())));
        assert_eq!(
            run(&["-n", "2"]),
            Err(UsageError("no program given".into()))
        );
        assert!(run(&["--stdin", "all", "p"]).is_err());
    }

    #[test]
    fn nameserver_option_and_variable() {
        use protean_pmi::names::Address;
        let a = Address {
            secret: [3; 32],
            host: "h".into(),
            port: 7,
        };
        let uri = a.uri();
        assert_eq!(
            opts(&["--nameserver", &uri, "p"]).nameserver.as_ref(),
            Some(&a)
        );
        let path = std::env::temp_dir().join(format!("protean-opt-ns-{}", std::process::id()));
        std::fs::write(&path, format!("{uri}\n")).unwrap();
        let file = format!("file:{}", path.display());
        let o = opts(&["--ompi-server", &file, "p"]);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(o.nameserver.as_ref(), Some(&a));
        // An address without the secret is refused, naming what is missing.
        let Err(UsageError(e)) = run(&["--nameserver", "h:7", "p"]) else {
            panic!("HOST:PORT without a secret was taken")
        };
        assert!(
            e.contains("--nameserver") && e.contains("carries no secret"),
            "{e}"
        );
        assert!(run(&["--nameserver", "nohost", "p"]).is_err());
        let zero = uri.replace(":h:7", ":h:0");
        assert!(run(&["--nameserver", &zero, "p"]).is_err());
        let Ok(Command::Run(o)) = run_env(&["p"], &[("PROTEAN_NAMESERVER", &uri)]) else {
            panic!("expected a run")
        };
        assert_eq!(o.nameserver.as_ref(), Some(&a));
        let Err(UsageError(e)) = run_env(&["p"], &[("PROTEAN_NAMESERVER", "a:5")]) else {
            panic!("PROTEAN_NAMESERVER without a secret was taken")
        };
        assert!(
            e.contains("PROTEAN_NAMESERVER") && e.contains("carries no secret"),
            "{e}"
        );
    }

    #[test]
    fn help_documents_every_option() {
        for opt in [
            "-n N",
            "-np N",
            "--np N",
            "-x VAR",
            "-genv",
            "-env",
            "--set",
            "--tag-output",
            "--timeout",
            "MPIEXEC_TIMEOUT",
            "--stdin",
            "--nameserver",
            "PROTEAN_NAMESERVER",
            "--help",
            "--version",
            "--oversubscribe",
            "--allow-run-as-root",
            "--bind-to",
            "--host",
            "--hostfile",
            "-ppn",
            "--map-by",
            "--launcher",
            "--launcher-exec",
            "--launch-timeout",
            "--report-bindings",
            "-wdir",
        ] {
            assert!(HELP.contains(opt), "help lacks {opt}");
        }
    }
}
