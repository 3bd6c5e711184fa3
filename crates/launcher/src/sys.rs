//! Thin wrappers over the Linux system calls the launcher needs. Every `unsafe` block in the
//! launcher lives here, each with the invariant it relies on; callers get `io::Result`s.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A connected pair of Unix stream sockets, both close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two descriptors into the array we own.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe (read end, write end), both close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Makes a descriptor nonblocking.
pub fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on an open descriptor borrowed from its owner; only status flags change.
    unsafe {
        let flags = check(libc::fcntl(fd, libc::F_GETFL))?;
        check(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK))?;
    }
    Ok(())
}

/// Clears close-on-exec on `fd`. Async-signal-safe: meant for a `pre_exec` hook in the child,
/// where the descriptor must survive exec (the PMI socket).
pub fn clear_cloexec_raw(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl is async-signal-safe and only touches the descriptor flags of `fd`.
    unsafe {
        let flags = check(libc::fcntl(fd, libc::F_GETFD))?;
        check(libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC))?;
    }
    Ok(())
}

/// Restores default dispositions and an empty signal mask. Async-signal-safe: called in the child
/// between fork and exec, so the program starts as if launched from a shell.
pub fn reset_signals_raw() -> io::Result<()> {
    // SAFETY: sigemptyset/sigprocmask/signal are async-signal-safe; the set is a local we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            &set,
            std::ptr::null_mut(),
        ))?;
        for sig in [
            libc::SIGPIPE,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGCHLD,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    Ok(())
}

/// Ignores `sig` in this process.
pub fn ignore_signal(sig: libc::c_int) {
    // SAFETY: installing SIG_IGN has no handler code to be unsafe in.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

/// A signalfd for a set of signals, which are blocked for normal delivery.
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks `signals` and opens a nonblocking, close-on-exec signalfd for them. Call before
    /// starting threads or children (children get the default mask back in `reset_signals_raw`).
    pub fn new(signals: &[libc::c_int]) -> io::Result<SignalFd> {
        // SAFETY: the sigset is a local we own; sigprocmask and signalfd only read it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            check(libc::sigprocmask(
                libc::SIG_BLOCK,
                &set,
                std::ptr::null_mut(),
            ))?;
            let fd = check(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(SignalFd {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// Signals received since the last call (none when nothing is pending).
    pub fn read(&self) -> Vec<libc::c_int> {
        let mut out = Vec::new();
        loop {
            // SAFETY: signalfd_siginfo is plain data; read fills at most its size.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n as usize != size {
                break;
            }
            out.push(info.ssi_signo as libc::c_int);
        }
        out
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// poll(2) with a timeout (None: wait forever). EINTR counts as "nothing ready".
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms = match timeout {
        None => -1,
        Some(d) => d.as_millis().min(i32::MAX as u128) as libc::c_int,
    };
    // SAFETY: the slice is valid for its length, which is what we pass.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled(i32),
}

/// Reaps one terminated child of this process, without blocking.
pub fn reap_any() -> Option<(libc::pid_t, ExitStatus)> {
    let mut status = 0;
    // SAFETY: waitpid writes the status into our local.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
        return None;
    }
    // Without WUNTRACED/WCONTINUED waitpid reports only terminations: exited or signalled.
    let st = if libc::WIFSIGNALED(status) {
        ExitStatus::Signaled(libc::WTERMSIG(status))
    } else {
        ExitStatus::Exited(libc::WEXITSTATUS(status))
    };
    Some((pid, st))
}

/// Sends `sig` to every process of group `pgid`. Ok(false) when the group no longer exists.
pub fn kill_group(pgid: libc::pid_t, sig: libc::c_int) -> io::Result<bool> {
    if pgid <= 1 {
        return Ok(false);
    }
    // SAFETY: kill with a negative pid signals a process group; pgid > 1 rules out "all
    // processes" (-1) and our own group (0).
    if unsafe { libc::kill(-pgid, sig) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Sends `sig` to one process.
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> bool {
    // SAFETY: plain kill(2) on a positive pid.
    pid > 0 && unsafe { libc::kill(pid, sig) } == 0
}

/// Makes this process the reaper of its orphaned descendants (ranks' children whose parent
/// died are re-parented to us, so we can reap them and nothing is left as a zombie).
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
    Ok(())
}

/// The signal's description ("Killed", "Segmentation fault").
pub fn signal_name(sig: libc::c_int) -> String {
    // SAFETY: strsignal returns a pointer to a NUL-terminated string (static or thread-local)
    // that stays valid until the next call; we copy it out at once. Single-threaded caller.
    unsafe {
        let p = libc::strsignal(sig);
        if p.is_null() {
            return format!("signal {sig}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Random bytes from the kernel (falls back to time and pid if getrandom is unavailable).
pub fn random_u32() -> u32 {
    let mut v = 0u32;
    // SAFETY: getrandom writes at most 4 bytes into our local.
    let n = unsafe { libc::getrandom((&mut v as *mut u32).cast(), 4, libc::GRND_NONBLOCK) };
    if n == 4 {
        return v;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    t ^ std::process::id().rotate_left(16)
}

/// read(2) into `buf`. Ok(0) at end of file.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// write(2) to a socket or pipe without raising SIGPIPE on a closed peer (EPIPE instead).
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is readable for its length. SIGPIPE is ignored in the launcher, so a
        // closed reader is reported as EPIPE.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Number of processors this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Asks the kernel to send `sig` to this process when its parent dies, and exits at once if the
/// parent already died (re-parented: `getppid()` is no longer `parent`). Async-signal-safe: meant
/// for a `pre_exec` hook, where it makes a rank die with the launcher that forked it.
pub fn die_with_parent_raw(sig: libc::c_int, parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes one integer; getppid and _exit are
    // async-signal-safe.
    unsafe {
        check(libc::prctl(
            libc::PR_SET_PDEATHSIG,
            sig as libc::c_ulong,
            0,
            0,
            0,
        ))?;
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    Ok(())
}

/// The same for this process, after it started (a proxy watching the process that ran it).
pub fn die_with_parent(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    die_with_parent_raw(sig, parent)
}

/// A CPU set for `set_affinity_raw`, built before fork.
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for ids below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        set
    }
}

/// Binds this process to a CPU set. Async-signal-safe (a `pre_exec` hook).
pub fn set_affinity_raw(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: sched_setaffinity reads the set we pass, of the size we pass.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) })?;
    Ok(())
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills a cpu_set_t we own; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..cpu_count()).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// This machine's host name (the kernel's, per UTS namespace).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let n = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..n]).into_owned();
    }
    "localhost".into()
}
