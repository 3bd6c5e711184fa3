//! Command-line options of `mpirun` / `mpiexec`.
//!
//! Parsed by hand rather than with an argument-parsing crate: mpirun's conventions are not
//! getopt's. Long options take one dash or two (`-np 4`, `--np 4`, `-tag-output`), some take two
//! values (`-genv VAR value`), and everything from the first word that is not an option on is the
//! program and its own arguments, passed through untouched (even words that look like options).

use std::ffi::OsString;
use std::time::Duration;

/// What the user asked for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Run(Options),
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

/// A job to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Number of processes.
    pub np: usize,
    /// Variables to set in every rank, in order (a later setting of a name wins).
    pub env: Vec<(String, String)>,
    /// Prefix each output line with `[1,rank]<stdout>:` or `[1,rank]<stderr>:`.
    pub tag_output: bool,
    /// End the job after this long.
    pub timeout: Option<Duration>,
    /// Where standard input goes.
    pub stdin: StdinTarget,
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

Starts NP copies of PROGRAM on this machine as one MPI job, serves them the PMI-1 protocol,
and tears the whole job down if any process fails. Options may be written with one dash or
two (-np 4, --np 4); the first word that is not an option is the program, and everything
after it is passed to the program untouched.

Options:
  -n N, -np N, --np N     number of processes to start (default 1)
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
  --stdin 0|none          forward mpirun's standard input to rank 0 (default), or to nobody
                          (then every rank reads /dev/null and mpirun does not touch its input)
  -h, --help              print this help and exit
  -V, --version           print the version and exit

Accepted for compatibility with Open MPI and MPICH command lines, and ignored:
  --oversubscribe         Protean never refuses to run more processes than cores
  --allow-run-as-root     Protean never refuses to run as root
  --bind-to X             processes are not bound to cores (X is not checked)

Every rank's environment is mpirun's, plus the variables set above, plus:
  PMI_FD, PMI_RANK, PMI_SIZE, PMI_SPAWNED=0   the PMI-1 connection (MPICH's simple PMI)
  MPI_LOCALRANKID, MPI_LOCALNRANKS            rank and size on this node (as Hydra sets)
  PROTEAN_JOBID                               unique per job: <mpirun pid>x<8 hex digits>
  PROTEAN_LAUNCHER=1                          started by Protean's mpirun

All ranks run in one process group of their own. Standard output and error of the ranks
go straight to mpirun's own (or through mpirun with --tag-output).

The job is torn down (SIGTERM to the whole process group, SIGKILL after half a second)
when a rank is killed by a signal, exits with a non-zero status, exits after MPI_Init but
before MPI_Finalize, calls MPI_Abort, or when mpirun receives SIGINT, SIGTERM or SIGHUP,
or the timeout expires. A program that never calls MPI_Init and exits with 0 is fine
(mpirun -n 2 hostname works). Afterwards, shared-memory files
/dev/shm/protean-<PROTEAN_JOBID>-* left by the job are removed.

Exit status: 0 when every rank exited with 0; otherwise the first failing rank's status
(128+N for a rank killed by signal N; 1 for a rank that exited with 0 before MPI_Finalize),
the code given to MPI_Abort, 124 on timeout, 128+N when mpirun got signal N, 127 when the
program cannot be found or started, and 1 for a bad command line.
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
        env: Vec::new(),
        tag_output: false,
        timeout: None,
        stdin: StdinTarget::Rank0,
        warnings: Vec::new(),
        program: Vec::new(),
    };
    let mut timeout_given = false;
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
            }
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
            "oversubscribe" | "allow-run-as-root" => {}
            "bind-to" => {
                value("a binding (ignored)")?;
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
    if !timeout_given {
        if let Some(t) = getenv("MPIEXEC_TIMEOUT").filter(|t| !t.trim().is_empty()) {
            opts.timeout = parse_timeout("MPIEXEC_TIMEOUT", &t)?;
        }
    }
    Ok(Command::Run(opts))
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
            Ok(Command::Run(o)) => o,
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
            Ok(Command::Run(o)) => o,
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
    fn flags_and_ignored_options() {
        let o = opts(&[
            "--tag-output",
            "--oversubscribe",
            "-allow-run-as-root",
            "--bind-to",
            "core",
            "--bind-to=none",
            "--stdin",
            "none",
            "p",
        ]);
        assert!(o.tag_output);
        assert_eq!(o.stdin, StdinTarget::None);
        assert_eq!(program(&o), ["p"]);
        assert_eq!(run(&["-h"]), Ok(Command::Help));
        assert_eq!(run(&["--help", "p"]), Ok(Command::Help));
        assert_eq!(run(&["--version"]), Ok(Command::Version));
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
            "--help",
            "--version",
            "--oversubscribe",
            "--allow-run-as-root",
            "--bind-to",
        ] {
            assert!(HELP.contains(opt), "help lacks {opt}");
        }
    }
}
