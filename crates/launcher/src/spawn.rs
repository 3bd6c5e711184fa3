//! Starting one rank: the environment every launcher of ours gives it, its PMI descriptor, its
//! binding, and the promise that it dies with the process that started it.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
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
        .env("PMI_SPAWNED", "0")
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
