//! `mpirun` / `mpiexec`: starts an MPI job on this machine, serves it PMI-1, and ends it cleanly.
//! See `mpirun --help` (the text is in `options.rs`) for what it does and promises.

use std::process::exit;

use protean_launcher::job;
use protean_launcher::options::{self, Command, HELP};

/// Makes sure descriptors 0, 1 and 2 are open (on /dev/null if they were closed), so that no
/// socket or pipe of ours is ever created as a standard descriptor and clobbered when a child's
/// standard streams are set up.
fn ensure_standard_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries; open returns a new descriptor we intentionally leak so it
        // occupies the lowest free number, which is `fd` when `fd` was closed.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) < 0 {
                let flags = if fd == 0 {
                    libc::O_RDONLY
                } else {
                    libc::O_WRONLY
                };
                libc::open(c"/dev/null".as_ptr(), flags);
            }
        }
    }
}

fn main() {
    ensure_standard_fds();
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match options::parse(args, |k| std::env::var(k).ok()) {
        Ok(Command::Help) => print!("{HELP}"),
        Ok(Command::Version) => println!(
            "mpirun (Protean) {} - PMI-1 process manager for Protean MPI",
            env!("CARGO_PKG_VERSION")
        ),
        Ok(Command::Run(opts)) => {
            for w in &opts.warnings {
                eprintln!("mpirun: warning: {w}");
            }
            exit(job::run(*opts));
        }
        Err(e) => {
            eprintln!("mpirun: {e}\nRun 'mpirun --help' for the options.");
            exit(1);
        }
    }
}
