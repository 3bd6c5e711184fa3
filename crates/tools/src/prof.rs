//! protean-prof: the analyzer of the channel profiles (PRO-MPI's profiler -> analyzer ->
//! reconfiguration manager).
//!
//! `protean-prof analyze PROFILE... -o SCHEDULE` reads the profiles a run wrote with
//! `PROTEAN_PROFILE=PATH` (the files `PATH.<rank>`, or `PATH` itself for all of them) and
//! writes the schedule that `PROTEAN_SCHEDULE=SCHEDULE` makes the next run follow: per process
//! and phase, the peers that get its fast channels, best first (see `proto::channels`).
//!
//! `protean-prof report PROFILE... -o REPORT.html` writes a page with plots of the same
//! profiles (see `report`): the priority matrix of each phase, the channel assignments over
//! time and the share of messages on fast channels, for the schedule analyze would write (or
//! the one given with `--schedule`).

#[path = "prof/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use protean_core::proto::channels::{Profile, Schedule};

#[derive(Parser)]
#[command(
    name = "protean-prof",
    about = "Analyze channel profiles of Protean runs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a channel schedule from the profiles of one run.
    Analyze {
        /// Profile files, or the PATH given to PROTEAN_PROFILE (its PATH.<rank> files).
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// Where to write the schedule.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Channels a process may hand out at most (its shm_fast_channels).
        #[arg(long, default_value_t = 8)]
        max_fast: usize,
        /// Peers below this share of a process's messages in a phase get no channel.
        #[arg(long, default_value_t = 0.02)]
        min_share: f64,
    },
    /// Write an HTML page with plots of the profiles of one run.
    Report {
        /// Profile files, or the PATH given to PROTEAN_PROFILE (its PATH.<rank> files).
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// Where to write the page.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// The schedule to show (default: the one `analyze` with the same options would write).
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// As for analyze; also the static rule's number of channels.
        #[arg(long, default_value_t = 8)]
        max_fast: usize,
        /// As for analyze.
        #[arg(long, default_value_t = 0.02)]
        min_share: f64,
    },
}

/// The files a profile argument names: itself, or `P.<rank>` beside it.
fn files_of(p: &Path) -> Result<Vec<PathBuf>, String> {
    if p.is_file() {
        return Ok(vec![p.to_path_buf()]);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = p
        .file_name()
        .ok_or_else(|| format!("{}: not a profile", p.display()))?
        .to_string_lossy()
        .to_string();
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            let r = n
                .strip_prefix(&stem)?
                .strip_prefix('.')?
                .parse::<u64>()
                .ok()?;
            Some((r, e.path()))
        })
        .collect();
    if v.is_empty() {
        return Err(format!(
            "{}: no such profile (nor {}.<rank> files)",
            p.display(),
            p.display()
        ));
    }
    v.sort();
    Ok(v.into_iter().map(|x| x.1).collect())
}

/// Every profile the arguments name.
fn load(profiles: &[PathBuf]) -> Result<Vec<Profile>, String> {
    let mut all = Vec::new();
    for p in profiles {
        for f in files_of(p)? {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            all.push(Profile::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?);
        }
    }
    Ok(all)
}

fn analyze(
    profiles: &[PathBuf],
    output: &Path,
    max_fast: usize,
    min_share: f64,
) -> Result<(), String> {
    let all = load(profiles)?;
    let s = Schedule::analyze(&all, max_fast, min_share)?;
    std::fs::write(output, s.to_text()).map_err(|e| format!("{}: {e}", output.display()))?;
    let phases = all.iter().map(|p| p.phases.len()).max().unwrap_or(0);
    eprintln!(
        "protean-prof: {} profiles of a run of {} processes, {phases} phases -> {}",
        all.len(),
        s.size,
        output.display()
    );
    Ok(())
}

fn report(
    profiles: &[PathBuf],
    output: &Path,
    schedule: Option<&Path>,
    max_fast: usize,
    min_share: f64,
) -> Result<(), String> {
    let all = load(profiles)?;
    let sched = match schedule {
        Some(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            Schedule::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?
        }
        None => Schedule::analyze(&all, max_fast, min_share)?,
    };
    let r = report::Report::new(&all, &sched, max_fast)?;
    let title = format!(
        "Protean channel profile: {}",
        profiles
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    std::fs::write(output, r.html(&title)).map_err(|e| format!("{}: {e}", output.display()))?;
    eprintln!(
        "protean-prof: {} profiles of a run of {} processes, {} phases -> {}",
        all.len(),
        r.size,
        r.phases,
        output.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Analyze {
            profiles,
            output,
            max_fast,
            min_share,
        } => analyze(&profiles, &output, max_fast, min_share),
        Cmd::Report {
            profiles,
            output,
            schedule,
            max_fast,
            min_share,
        } => report(&profiles, &output, schedule.as_deref(), max_fast, min_share),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("protean-prof: {e}");
            ExitCode::FAILURE
        }
    }
}
