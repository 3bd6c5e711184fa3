//! protean-tune: measure every algorithm of the collectives on this machine and write a
//! decision file that later runs load (`PROTEAN_COLL_DECISION_FILE=FILE` or
//! `mpirun --set coll_decision_file=FILE`).
//!
//! For each collective, rank count and algorithm it runs the collective latency benchmark
//! (bench/<collective>.c, compiled into the binary and built with this tree's mpicc) with the
//! algorithm forced through `PROTEAN_COLL_<COLLECTIVE>`, and once more with `auto` (what
//! Protean does without a decision file). A rule is written only where the best algorithm beats
//! `auto` by more than the noise margin (`--margin`, default 5%), so everywhere else the
//! built-in choice stays in force: the file never makes a call slower than noise, by
//! construction of what was measured.
//!
//! `protean-tune --p2p` tunes the point-to-point protocol policy instead (see `p2p.rs`).
//!
//! Rule ranges: a measured rank count N covers N up to the next measured count minus one (the
//! last one: and above); a measured size S covers the sizes from the geometric midpoint with the
//! previous measured size to the one with the next (the first from 0, the last up to any size).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use protean_core::mpi::coll::decide::{Coll, Range, Rule, Table};

mod p2p;

const COMMON_H: &str = include_str!("../../../bench/common.h");
const COLLBENCH_H: &str = include_str!("../../../bench/collbench.h");
const SOURCES: &[(&str, &str)] = &[
    ("allreduce", include_str!("../../../bench/allreduce.c")),
    ("barrier", include_str!("../../../bench/barrier.c")),
    ("bcast", include_str!("../../../bench/bcast.c")),
    ("reduce", include_str!("../../../bench/reduce.c")),
    ("allgather", include_str!("../../../bench/allgather.c")),
    ("alltoall", include_str!("../../../bench/alltoall.c")),
];

struct Opts {
    ranks: Vec<usize>,
    colls: Vec<Coll>,
    sizes: Option<String>,
    out: PathBuf,
    margin: f64,
    quick: bool,
    runs: usize,
    prefix: PathBuf,
    verbose: bool,
    /// Prebuilt benchmark programs (`--bin`): DIR/<collective>, not compiled here.
    bin: Option<PathBuf>,
    /// A program every rank runs the benchmark through (`--wrap`, e.g. bench/pin).
    wrap: Option<PathBuf>,
}

fn usage() -> String {
    "usage: protean-tune [-n 2,4,8] [--colls allreduce,bcast,...] [--sizes 8,1K,64K] \
     [-o FILE] [--margin 0.05] [--runs 3] [--quick] [--prefix DIR] [--bin DIR] [--wrap PROG] [-v]\n\
     Measures each algorithm of each collective on this machine at each rank count and writes\n\
     a decision file (default ./protean-coll.decisions); load it with\n\
     (each measurement --runs times, interleaved across algorithms, best kept: noise only slows)\n\
     PROTEAN_COLL_DECISION_FILE=FILE or mpirun --set coll_decision_file=FILE.\n\
     --bin DIR runs prebuilt programs DIR/<collective> (bench/<collective>.c built with any\n\
     mpicc of the MPICH ABI) where no compiler is at hand; --wrap PROG starts each rank as\n\
     PROG <program> <arguments> (bench/pin binds each rank to its own CPU).\n\
     Collectives: barrier, bcast, reduce, allreduce, allgather, alltoall.\n\
     protean-tune --p2p [...] fits the point-to-point cost models instead (--p2p --help)."
        .to_string()
}

fn parse_args() -> Result<Opts, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let prefix = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut o = Opts {
        ranks: vec![2, 4],
        colls: [
            "barrier",
            "bcast",
            "reduce",
            "allreduce",
            "allgather",
            "alltoall",
        ]
        .iter()
        .map(|n| Coll::from_name(n).expect("known collective"))
        .collect(),
        sizes: None,
        out: PathBuf::from("protean-coll.decisions"),
        margin: 0.05,
        quick: false,
        runs: 0,
        prefix,
        verbose: false,
        bin: None,
        wrap: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Err(usage()),
            "-n" => {
                o.ranks = val()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .map_err(|_| format!("bad rank count '{s}'"))
                    })
                    .collect::<Result<_, _>>()?;
                if o.ranks.iter().any(|&n| n < 2) {
                    return Err("rank counts start at 2".into());
                }
                o.ranks.sort_unstable();
                o.ranks.dedup();
            }
            "--colls" => {
                o.colls = val()?
                    .split(',')
                    .map(|s| {
                        Coll::from_name(s.trim())
                            .filter(|c| SOURCES.iter().any(|(n, _)| *n == c.name()))
                            .ok_or_else(|| format!("cannot tune '{s}' (no benchmark for it)"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--sizes" => o.sizes = Some(val()?),
            "-o" => o.out = PathBuf::from(val()?),
            "--margin" => {
                o.margin = val()?
                    .parse()
                    .ok()
                    .filter(|m: &f64| (0.0..1.0).contains(m))
                    .ok_or("--margin takes a fraction, e.g. 0.05")?
            }
            "--quick" => o.quick = true,
            "--runs" => o.runs = parse_runs(&val()?)?,
            "--prefix" => o.prefix = PathBuf::from(val()?),
            "--bin" => o.bin = Some(PathBuf::from(val()?)),
            "--wrap" => o.wrap = Some(PathBuf::from(val()?)),
            "-v" => o.verbose = true,
            _ => return Err(format!("unknown argument '{a}'\n{}", usage())),
        }
    }
    if o.runs == 0 {
        o.runs = if o.quick { 1 } else { 3 };
    }
    Ok(o)
}

/// Compile the benchmarks with the tree's mpicc into `dir`.
fn build(o: &Opts, dir: &Path) -> Result<(), String> {
    let programs: Vec<(&str, &str)> = o
        .colls
        .iter()
        .map(|c| {
            *SOURCES
                .iter()
                .find(|(n, _)| *n == c.name())
                .expect("checked in parse_args")
        })
        .collect();
    compile(
        &o.prefix,
        dir,
        &[("common.h", COMMON_H), ("collbench.h", COLLBENCH_H)],
        &programs,
    )
}

/// The value of `--runs`: launches per measurement, at least 1.
pub fn parse_runs(v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|r| *r >= 1)
        .ok_or_else(|| "--runs takes a count >= 1".to_string())
}

/// Write `files` and the `programs` (name, C source) into `dir` and build each program there
/// with the mpicc of the installation at `prefix`.
pub fn compile(
    prefix: &Path,
    dir: &Path,
    files: &[(&str, &str)],
    programs: &[(&str, &str)],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let w = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    for (name, text) in files {
        w(name, text)?;
    }
    let mpicc = prefix.join("bin/mpicc");
    for (name, src) in programs {
        w(&format!("{name}.c"), src)?;
        let st = Command::new(&mpicc)
            .args(["-O2", "-o"])
            .arg(dir.join(name))
            .arg(dir.join(format!("{name}.c")))
            .status()
            .map_err(|e| format!("{}: {e}", mpicc.display()))?;
        if !st.success() {
            return Err(format!("building the {name} benchmark failed"));
        }
    }
    Ok(())
}

/// Default sizes of a collective's benchmark (bytes as the decision table counts them).
fn default_sizes(c: Coll) -> &'static str {
    match c {
        Coll::Barrier => "0",
        Coll::Alltoall => "8,64,512,4K,32K,128K",
        _ => "8,64,512,4K,32K,256K,1M",
    }
}

/// Run one benchmark; size -> microseconds.
fn measure(
    o: &Opts,
    dir: &Path,
    c: Coll,
    n: usize,
    alg: &str,
) -> Result<BTreeMap<usize, f64>, String> {
    let exe = dir.join(c.name());
    let mut cmd = Command::new(o.prefix.join("bin/mpirun"));
    cmd.arg("-n").arg(n.to_string());
    if let Some(w) = &o.wrap {
        cmd.arg(w);
    }
    cmd.arg(&exe);
    let sizes = o.sizes.clone().unwrap_or_else(|| default_sizes(c).into());
    if c != Coll::Barrier {
        cmd.arg("-s").arg(&sizes);
    }
    cmd.args(["-r", if o.quick { "3" } else { "5" }]);
    if o.quick {
        cmd.arg("-q");
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("PROTEAN_COLL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env(
        format!("PROTEAN_COLL_{}", c.name().to_ascii_uppercase()),
        alg,
    );
    let out = cmd.output().map_err(|e| format!("mpirun: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{} at {n} ranks with {alg} failed: {}",
            c.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if let (Some(s), Some(t)) = (f.first(), f.get(1)) {
            if let (Ok(s), Ok(t)) = (s.parse::<usize>(), t.parse::<f64>()) {
                m.insert(s, t);
            }
        }
    }
    if m.is_empty() {
        return Err(format!("{} at {n} ranks with {alg}: no results", c.name()));
    }
    Ok(m)
}

/// Inclusive ranges around the measured points `v` (sorted): geometric midpoints between
/// neighbours, the first from `first_lo`, the last unbounded.
fn cover(v: &[usize], first_lo: usize, geometric: bool) -> Vec<Range> {
    let mut r = Vec::with_capacity(v.len());
    let mut lo = first_lo;
    for (i, &x) in v.iter().enumerate() {
        let hi = match v.get(i + 1) {
            None => usize::MAX,
            Some(&y) if geometric => (((x.max(1) as f64) * (y as f64)).sqrt() as usize).max(x),
            Some(&y) => y - 1,
        };
        r.push(Range { lo, hi });
        lo = hi.saturating_add(1);
    }
    r
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--p2p") {
        let prefix = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        return p2p::main(&args[1..], prefix);
    }
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let dir = match &o.bin {
        Some(d) => {
            if let Some(c) = o.colls.iter().find(|c| !d.join(c.name()).is_file()) {
                eprintln!(
                    "protean-tune: no program {} (--bin)",
                    d.join(c.name()).display()
                );
                return ExitCode::from(2);
            }
            d.clone()
        }
        None => {
            let d = std::env::temp_dir().join(format!("protean-tune-{}", std::process::id()));
            if let Err(e) = build(&o, &d) {
                eprintln!("protean-tune: {e}");
                return ExitCode::FAILURE;
            }
            d
        }
    };
    let mut rules = Vec::new();
    let mut report = String::new();
    let rank_ranges = cover(&o.ranks, 2, false);
    for &c in &o.colls {
        // two_level and two_level_shm need several hosts; the oversubscription and host rules
        // of `auto` stay.
        let algs: Vec<&'static str> = c.algorithms()[1..]
            .iter()
            .copied()
            .filter(|a| *a != "two_level" && *a != "two_level_shm")
            .collect();
        for (ri, &n) in o.ranks.iter().enumerate() {
            // Launches interleaved across algorithms (run 1 of each, then run 2, ...), so that a
            // burst of load does not land on one algorithm only; per size the best is kept.
            let mut results: Vec<(&str, BTreeMap<usize, f64>)> = Vec::new();
            for _ in 0..o.runs {
                for alg in std::iter::once("auto").chain(algs.iter().copied()) {
                    match measure(&o, &dir, c, n, alg) {
                        Ok(m) => {
                            if o.verbose {
                                eprintln!("{} n={n} {alg}: {m:?}", c.name());
                            }
                            match results.iter_mut().find(|(a, _)| *a == alg) {
                                Some((_, best)) => {
                                    for (s, t) in m {
                                        let b = best.entry(s).or_insert(t);
                                        *b = b.min(t);
                                    }
                                }
                                None => results.push((alg, m)),
                            }
                        }
                        Err(e) => eprintln!("protean-tune: {e} (left out)"),
                    }
                }
            }
            let Some((_, auto)) = results.iter().find(|(a, _)| *a == "auto") else {
                continue;
            };
            let sizes: Vec<usize> = auto.keys().copied().collect();
            let size_ranges = cover(&sizes, 0, true);
            for (si, &s) in sizes.iter().enumerate() {
                let base = auto[&s];
                let best = results
                    .iter()
                    .filter(|(a, _)| *a != "auto")
                    .filter_map(|(a, m)| m.get(&s).map(|t| (*a, *t)))
                    .min_by(|x, y| x.1.total_cmp(&y.1));
                let Some((alg, t)) = best else { continue };
                let wins = t < base * (1.0 - o.margin);
                let _ = writeln!(
                    report,
                    "{:<15} n={n:<3} {s:>8} B  auto {base:>10.2} us  best {alg:<20} {t:>10.2} us  {}",
                    c.name(),
                    if wins { "-> rule" } else { "(auto kept)" }
                );
                if wins {
                    rules.push(Rule {
                        coll: c,
                        ranks: rank_ranges[ri],
                        bytes: size_ranges[si],
                        alg: c
                            .algorithms()
                            .iter()
                            .position(|a| *a == alg)
                            .expect("an algorithm of this collective"),
                    });
                }
            }
        }
    }
    if o.bin.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    print!("{report}");
    let table = Table::new(rules);
    let text = format!(
        "# Protean collective decision file, written by protean-tune on {} ({} CPUs).\n\
         # collective  ranks  bytes  algorithm; calls no rule matches use the built-in table.\n{}",
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        table.render()
    );
    if let Err(e) = Table::parse(&text) {
        eprintln!("protean-tune: internal error, the file does not parse: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::write(&o.out, text) {
        eprintln!("protean-tune: {}: {e}", o.out.display());
        return ExitCode::FAILURE;
    }
    println!(
        "wrote {} rule(s) to {}; use it with PROTEAN_COLL_DECISION_FILE={}",
        table.rules().len(),
        o.out.display(),
        o.out.display()
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_in_order() {
        let r = cover(&[2, 4, 8], 2, false);
        assert_eq!(r[0], Range { lo: 2, hi: 3 });
        assert_eq!(r[1], Range { lo: 4, hi: 7 });
        assert_eq!(
            r[2],
            Range {
                lo: 8,
                hi: usize::MAX
            }
        );
        let s = cover(&[8, 512, 32768], 0, true);
        assert_eq!(s[0], Range { lo: 0, hi: 64 });
        assert_eq!(s[1], Range { lo: 65, hi: 4096 });
        assert_eq!(s[2].hi, usize::MAX);
        let one = cover(&[0], 0, true);
        assert_eq!(
            one[0],
            Range {
                lo: 0,
                hi: usize::MAX
            }
        );
    }
}
