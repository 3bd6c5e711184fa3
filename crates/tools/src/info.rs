//! protean-info: what this Protean build is and what it implements.
//!
//! Each query is one entry in `QUERIES`; add components, tunables, counters and events by adding entries.

use std::io::{self, Write};
use std::process::ExitCode;

use protean_capi::abi::{FUNCTIONS, MISSING, MPI_SUBVERSION, MPI_VERSION};
use protean_capi::version::LIBRARY_VERSION;
use protean_core::config::{Config, Kind, PROTOCOLS, TUNABLES};
use protean_core::events::{Elem, EVENTS};
use protean_core::profile::PVARS;
use protean_core::proto::policy::Protocol;

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
        flag: "--components",
        help: "transports, protocols and policies this build offers",
        run: components,
    },
    Query {
        flag: "--tunables",
        help: "every tunable: name, type, default, whether it can change at run time, doc",
        run: tunables,
    },
    Query {
        flag: "--counters",
        help: "the counters the library keeps (MPI_T performance variables)",
        run: counters,
    },
    Query {
        flag: "--events",
        help: "the events the library raises (MPI_T events) and their elements",
        run: events,
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

fn components(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "transports:")?;
    writeln!(out, "  self   messages to the own process (always on)")?;
    writeln!(out, "  shm    shared memory on one host: a shared receive queue per process plus dedicated per-peer fast channels; single copy by process_vm_readv")?;
    writeln!(
        out,
        "  tcp    TCP between hosts (or on one host with transports=tcp)"
    )?;
    writeln!(out, "protocols:")?;
    writeln!(out, "  eager              the whole message in one frame")?;
    writeln!(out, "  rendezvous         request-to-send; data moves once the receive is matched (single copy on shm, pipelined fragments otherwise)")?;
    writeln!(
        out,
        "  eager-rendezvous   the first part with the request-to-send, the rest by rendezvous"
    )?;
    writeln!(
        out,
        "policies (tunable 'protocol', info key 'protean_protocol'; default {}):",
        TUNABLES[Config::index_of("protocol").expect("protocol tunable")].default
    )?;
    for p in PROTOCOLS {
        let doc = match Protocol::from_name(p) {
            Some(Protocol::Static) => "size thresholds per transport (shm_eager_max, tcp_eager_max, self_eager_max; eager_limit, eager_limit_peers override)",
            Some(Protocol::Adaptive) => "per peer, the protocol with the lowest expected cost given how that peer's receives were posted lately (reported back on every frame) and the cost model of the route (adaptive_costs_*)",
            Some(Protocol::Eager) => "every message eager (up to the channel's largest frame, eager-rendezvous above)",
            Some(Protocol::Rendezvous) => "every message by rendezvous",
            Some(Protocol::EagerRendezvous) => "every message by eager-rendezvous (prefix eager_rndv_prefix bytes)",
            None => "",
        };
        writeln!(out, "  {p:<18} {doc}")?;
    }
    writeln!(out, "adaptive cost models (ns = fixed + per_byte * bytes):")?;
    for (route, name) in [
        ("shm", "adaptive_costs_shm"),
        ("tcp", "adaptive_costs_tcp"),
        ("self", "adaptive_costs_self"),
    ] {
        let i = Config::index_of(name).expect("cost tunable");
        writeln!(out, "  {route:<6} {}", TUNABLES[i].default)?;
    }
    Ok(())
}

fn kind_name(k: Kind) -> String {
    match k {
        Kind::Int { min, max } if max == i64::MAX => format!("int >= {min}"),
        Kind::Int { min, max } => format!("int {min}..{max}"),
        Kind::Bool => "bool".into(),
        Kind::Str => "string".into(),
        Kind::Choice(c) => c.join("|"),
    }
}

fn tunables(out: &mut dyn Write) -> io::Result<()> {
    for t in TUNABLES {
        let default = if t.default.is_empty() {
            "(empty)"
        } else {
            t.default
        };
        writeln!(
            out,
            "{} = {}  [{}; env {}; {}]\n    {}",
            t.name,
            default,
            kind_name(t.kind),
            t.env_name(),
            if t.writable {
                "changeable at run time"
            } else {
                "fixed after MPI_Init"
            },
            t.doc
        )?;
    }
    Ok(())
}

fn counters(out: &mut dyn Write) -> io::Result<()> {
    for p in PVARS.iter() {
        writeln!(out, "{}\n    {}", p.name, p.desc)?;
    }
    Ok(())
}

fn events(out: &mut dyn Write) -> io::Result<()> {
    for k in EVENTS {
        let elems: Vec<&str> = k
            .elements
            .iter()
            .map(|e| match e {
                Elem::Int => "int",
                Elem::Count => "MPI_Count",
            })
            .collect();
        writeln!(out, "{} ({})\n    {}", k.name, elems.join(", "), k.desc)?;
    }
    Ok(())
}

fn summary(out: &mut dyn Write) -> io::Result<()> {
    version(out)?;
    writeln!(
        out,
        "Functions: {} of {} implemented",
        FUNCTIONS.len() - MISSING.len(),
        FUNCTIONS.len()
    )?;
    writeln!(out)?;
    components(out)?;
    writeln!(
        out,
        "tunables (protean-info --tunables for types and docs):"
    )?;
    for t in TUNABLES {
        writeln!(out, "  {} = {}", t.name, t.default)?;
    }
    Ok(())
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
