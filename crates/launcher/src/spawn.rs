//! Starting one rank: the environment every launcher of ours gives it, its PMI descriptor, its
//! binding, and the promise that it dies with the process that started it.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::sys;

/// Variables an outer launcher may have set that must not reach our ranks.
pub const OUTER_PMI_VARS: [&str; 5] = ["PMI_PORT", "PMI_ID", "PMI_FD", "PMI_RANK", "PMI_SIZE"];

/// Exit status when the program cannot be started.
pub const EXIT_CANNOT_START: i32 = 127;

/// One rank to start.
pub struct RankSpec<'a> {
    pub program: &'a [OsString],
    pub env: &'a [(OsString, OsString)],
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub local_size: usize,
    pub jobid: &'a str,
    /// The rank's end of its PMI socketpair (PMI_FD); kept open by the caller until spawn
    /// returns.
    pub pmi: &'a OwnedFd,
    pub stdin: Stdio,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
    /// Process group to join (0: a new one led by this rank).
    pub pgid: libc::pid_t,
    /// CPUs to bind to.
    pub cpus: Option<&'a [usize]>,
    pub wdir: Option<&'a std::path::Path>,
    /// Started by MPI_Comm_spawn (`PMI_SPAWNED=1`).
    pub spawned: bool,
}

/// One command of a spawn request, checked and ready to start.
#[derive(Debug)]
pub struct Plan {
    pub nprocs: usize,
    /// The program, found, and its arguments.
    pub program: Vec<OsString>,
    /// The job's `-x`/`--env` variables, then the command's `env` info key.
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
    /// The hosts named by the `host`/`hosts` info keys, in order (empty: where mpirun is);
    /// the processes go round-robin over them.
    pub hosts: Vec<String>,
}

/// Checks one command of a spawn request against the info keys other MPIs accept and finds
/// its program: `wdir` (the working directory, also where a relative program is looked for),
/// `path` (directories searched before `PATH`, separated by `:`), `env` (`NAME=value` lines,
/// as Open MPI's), `host`/`hosts` (host names of the job, separated by commas, a `:slots`
/// suffix ignored; checked by mpirun, which knows the job's hosts), `hostfile` (a file of
/// such names, one per line, the first word of each: `h2 slots=4`); other keys are ignored,
/// as the standard allows. Err says why nothing may start.
pub fn plan(c: &protean_pmi::SpawnCommand, job_env: &[(String, String)]) -> Result<Plan, String> {
    let name = &c.execname;
    if name.is_empty() {
        return Err("the program to spawn has an empty name".into());
    }
    let mut env: Vec<(OsString, OsString)> = job_env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    let mut wdir = None;
    let mut path = None;
    let mut hosts = Vec::new();
    for (k, v) in &c.info {
        match k.as_str() {
            "wdir" => {
                let d = PathBuf::from(v);
                if !d.is_dir() {
                    return Err(format!("info wdir '{v}' is not a directory"));
                }
                wdir = Some(d);
            }
            "path" => path = Some(v.clone()),
            "env" => {
                for line in v.split('\n').map(str::trim).filter(|l| !l.is_empty()) {
                    let Some((n, val)) = line.split_once('=').filter(|(n, _)| !n.is_empty()) else {
                        return Err(format!("info env: '{line}' is not NAME=value"));
                    };
                    env.push((n.into(), val.into()));
                }
            }
            "hostfile" => {
                let text =
                    std::fs::read_to_string(v).map_err(|e| format!("info hostfile '{v}': {e}"))?;
                hosts.extend(
                    text.lines()
                        .map(|l| l.split('#').next().unwrap_or("").trim())
                        .filter_map(|l| l.split_whitespace().next())
                        .map(|h| h.split(':').next().unwrap_or(h).to_string()),
                );
            }
            "host" | "hosts" => {
                hosts.extend(
                    v.split(',')
                        .map(str::trim)
                        .filter(|h| !h.is_empty())
                        .map(|h| h.split(':').next().unwrap_or(h).to_string()),
                );
            }
            _ => {}
        }
    }
    let program = find_program(name, wdir.as_deref(), path.as_deref())?;
    let mut argv = vec![program.into_os_string()];
    argv.extend(c.args.iter().map(OsString::from));
    Ok(Plan {
        nprocs: c.nprocs as usize,
        program: argv,
        env,
        wdir,
        hosts,
    })
}

/// The program a spawn names: with a `/`, relative to `wdir` (or ours); else the first
/// executable file of that name in `path`'s directories, then `PATH`'s.
fn find_program(name: &str, wdir: Option<&Path>, path: Option<&str>) -> Result<PathBuf, String> {
    let runnable = |p: &Path| -> Result<(), String> {
        let meta = std::fs::metadata(p).map_err(|e| format!("cannot spawn '{name}': {e}"))?;
        if !meta.is_file() {
            return Err(format!("cannot spawn '{name}': not a regular file"));
        }
        let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| "a NUL in the program name")?;
        // SAFETY: access(2) on a NUL-terminated path we own.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
            return Err(format!(
                "cannot spawn '{name}': not executable (permission denied)"
            ));
        }
        Ok(())
    };
    if name.contains('/') {
        let p = match wdir {
            Some(d) if !name.starts_with('/') => d.join(name),
            _ => PathBuf::from(name),
        };
        runnable(&p)?;
        return Ok(p);
    }
    let env_path = std::env::var("PATH").unwrap_or_default();
    let mut last = None;
    for dir in path
        .into_iter()
        .chain(std::iter::once(env_path.as_str()))
        .flat_map(|l| l.split(':'))
        .filter(|d| !d.is_empty())
    {
        let p = Path::new(dir).join(name);
        if p.exists() {
            match runnable(&p) {
                Ok(()) => return Ok(p),
                Err(e) => last = Some(e),
            }
        }
    }
    Err(last
        .unwrap_or_else(|| format!("cannot spawn '{name}': no such program in the path or PATH")))
}

/// Starts the rank. On failure: the exit status mpirun should end with and why.
pub fn spawn_rank(s: RankSpec) -> Result<Child, (i32, String)> {
    let program = &s.program[0];
    let mut cmd = Command::new(program);
    cmd.args(&s.program[1..]);
    for var in OUTER_PMI_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in s.env {
        cmd.env(k, v);
    }
    let child_fd = s.pmi.as_raw_fd();
    cmd.env("PMI_FD", child_fd.to_string())
        .env("PMI_RANK", s.rank.to_string())
        .env("PMI_SIZE", s.size.to_string())
        .env("PMI_SPAWNED", if s.spawned { "1" } else { "0" })
        .env("MPI_LOCALRANKID", s.local_rank.to_string())
        .env("MPI_LOCALNRANKS", s.local_size.to_string())
        .env("PROTEAN_JOBID", s.jobid)
        .env("PROTEAN_LAUNCHER", "1");
    cmd.process_group(s.pgid);
    cmd.stdin(s.stdin);
    if let Some(fd) = s.stdout {
        cmd.stdout(Stdio::from(fd));
    }
    if let Some(fd) = s.stderr {
        cmd.stderr(Stdio::from(fd));
    }
    if let Some(d) = s.wdir {
        cmd.current_dir(d);
    }
    let set = s.cpus.map(sys::cpu_set);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the hook runs in the child between fork and exec and calls only async-signal-safe
    // functions (fcntl, sigprocmask, signal, prctl, getppid, sched_setaffinity); `child_fd` is
    // open in the child because the caller holds it until spawn returns, and `set` was built
    // before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // A rank dies with its launcher, whatever kills the launcher (SIGKILL included).
            sys::die_with_parent_raw(libc::SIGKILL, parent)?;
            sys::clear_cloexec_raw(child_fd)?;
            if let Some(set) = &set {
                sys::set_affinity_raw(set)?;
            }
            sys::reset_signals_raw()
        });
    }
    cmd.spawn().map_err(|e| {
        let name = program.to_string_lossy();
        let code = match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => EXIT_CANNOT_START,
            _ => 1,
        };
        (code, format!("cannot start '{name}': {e}"))
    })
}

/// The CPUs each of `n` local ranks is bound to: `bind` 1 is one core each (all its hardware
/// threads), 2 one socket each; cores and sockets are dealt in turn among the CPUs this process
/// may use, round again when there are more ranks. None for no binding.
pub fn bindings(bind: u8, n: usize) -> Option<Vec<Vec<usize>>> {
    if bind == 0 {
        return None;
    }
    let cpus = sys::allowed_cpus();
    let read = |cpu: usize, what: &str| -> i64 {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(cpu as i64)
    };
    // Groups of CPUs: per (package, core) for cores, per package for sockets; in CPU order.
    let mut groups: Vec<((i64, i64), Vec<usize>)> = Vec::new();
    for &c in &cpus {
        let pkg = read(c, "physical_package_id");
        let key = if bind == 1 {
            (pkg, read(c, "core_id"))
        } else {
            (pkg, 0)
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    Some((0..n).map(|i| groups[i % groups.len()].1.clone()).collect())
}

/// `0-3,8` style list of CPUs.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&[]), "");
    }

    #[test]
    fn core_bindings_cover_the_allowed_cpus() {
        let cpus = sys::allowed_cpus();
        let b = bindings(1, cpus.len() * 2).unwrap();
        let mut seen: Vec<usize> = b.iter().flatten().copied().collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, cpus);
        assert!(bindings(0, 4).is_none());
        assert_eq!(bindings(2, 3).unwrap().len(), 3);
    }
}
