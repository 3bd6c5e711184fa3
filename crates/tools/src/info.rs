//! protean-info: what this Protean build is and what it implements.
//!
//! Each query is one entry in `QUERIES`; add components, tunables and counters by adding entries.

use std::io::{self, Write};
use std::process::ExitCode;

use protean_capi::abi::{FUNCTIONS, MISSING, MPI_SUBVERSION, MPI_VERSION};
use protean_capi::version::LIBRARY_VERSION;

struct Query {
    flag: &'static str,
    help: &'static str,
    run: fn(&mut dyn Write) -> io::Result<()>,
}

const QUERIES: &[Query] = &[
    Query {
        flag: "--version",
        help: "library version, MPI version and ABI",
        run: version,
    },
    Query {
        flag: "--functions",
        help: "every MPI function the library exports, one per line",
        run: functions,
    },
    Query {
        flag: "--missing",
        help: "the functions not implemented yet, one per line (count on stderr)",
        run: missing,
    },
];

fn version(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{LIBRARY_VERSION}")?;
    writeln!(out, "MPI standard: {MPI_VERSION}.{MPI_SUBVERSION}")?;
    writeln!(out, "ABI: MPICH 4.x (libmpi.so.12)")
}

fn functions(out: &mut dyn Write) -> io::Result<()> {
    for f in FUNCTIONS {
        writeln!(out, "{f}")?;
    }
    Ok(())
}

fn missing(out: &mut dyn Write) -> io::Result<()> {
    for f in MISSING {
        writeln!(out, "{f}")?;
    }
    out.flush()?;
    eprintln!(
        "{} of {} functions not implemented",
        MISSING.len(),
        FUNCTIONS.len()
    );
    Ok(())
}

fn summary(out: &mut dyn Write) -> io::Result<()> {
    version(out)?;
    writeln!(
        out,
        "Functions: {} of {} implemented",
        FUNCTIONS.len() - MISSING.len(),
        FUNCTIONS.len()
    )
}

fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "usage: protean-info [QUERY]...\n\nWith no query, a summary.  Queries:"
    )?;
    for q in QUERIES {
        writeln!(out, "  {:<14} {}", q.flag, q.help)?;
    }
    writeln!(out, "  {:<14} this text", "--help")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = if args.is_empty() {
        summary(&mut out)
    } else if args.iter().any(|a| a == "--help" || a == "-h") {
        usage(&mut out)
    } else {
        let mut chosen = Vec::new();
        for a in &args {
            match QUERIES.iter().find(|q| q.flag == a) {
                Some(q) => chosen.push(q),
                None => {
                    eprintln!("protean-info: unknown query '{a}'");
                    let _ = usage(&mut io::stderr());
                    return ExitCode::from(2);
                }
            }
        }
        chosen.iter().try_for_each(|q| (q.run)(&mut out))
    };
    match result.and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (protean-info --missing | head) is not an error worth reporting.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("protean-info: {e}");
            ExitCode::FAILURE
        }
    }
}
