//! Protean's process manager: `mpirun` / `mpiexec` and `protean-proxy`.
//!
//! * [`options`]: mpirun's command line;
//! * [`hosts`]: host lists (`--host`, hostfiles, Slurm allocations) and rank placement;
//! * [`job`]: a job from start to end: its ranks on this host, its proxies on the others, the
//!   PMI-1 server, output, teardown, exit status;
//! * [`launch`]: starting proxies on other hosts (ssh, rsh, fork, slurm) and accepting them;
//! * [`proxy`]: `protean-proxy`, which runs one host's ranks for mpirun;
//! * [`channel`] and [`msg`]: the authenticated, encrypted connection between the two;
//! * [`spawn`]: starting one rank (environment, PMI descriptor, binding, parent-death signal);
//! * [`sys`]: the system calls, every `unsafe` block of the crate.

pub mod channel;
pub mod hosts;
pub mod job;
pub mod launch;
pub mod msg;
pub mod options;
pub mod proxy;
pub mod spawn;
pub mod sys;
