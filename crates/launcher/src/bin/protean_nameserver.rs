//! protean-nameserver: serves MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name to
//! independent jobs (the counterpart of Open MPI's `ompi-server` and MPICH's
//! `hydra_nameserver`). Start it, then give its address to each mpirun with
//! `--nameserver HOST:PORT` (or PROTEAN_NAMESERVER). The protocol is `protean_pmi::names`.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const HELP: &str = "\
Usage: protean-nameserver [--port N] [--bind ADDR] [--report-uri FILE|-]

Serves published MPI service names to jobs started with mpirun --nameserver HOST:PORT.
Prints its HOST:PORT on standard output (and into FILE with --report-uri FILE) once it
listens, then runs until it is killed.

  --port N          the TCP port to listen on (default: one the kernel picks)
  --bind ADDR       the address to listen on (default 0.0.0.0: every interface)
  --report-uri FILE write HOST:PORT into FILE ('-': standard output, the default)
  -h, --help        print this help
";

fn fail(msg: &str) -> ! {
    eprintln!("protean-nameserver: {msg}");
    std::process::exit(2)
}

fn main() {
    let mut port = 0u16;
    let mut bind = "0.0.0.0".to_string();
    let mut report: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs {what}")))
        };
        match a.trim_start_matches('-') {
            "port" | "p" => {
                let v = val("a port number");
                port = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--port: {v:?} is not a port number")));
            }
            "bind" => bind = val("an address"),
            "report-uri" => report = Some(val("a file name or -")),
            "h" | "help" => {
                print!("{HELP}");
                return;
            }
            _ => fail(&format!("unknown option '{a}' (see --help)")),
        }
    }
    let l = TcpListener::bind((bind.as_str(), port))
        .unwrap_or_else(|e| fail(&format!("cannot listen on {bind}:{port}: {e}")));
    let local = l
        .local_addr()
        .unwrap_or_else(|e| fail(&format!("no local address: {e}")));
    let host = if local.ip().is_unspecified() {
        let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let h = h.trim().to_string();
        if h.is_empty() {
            "127.0.0.1".into()
        } else {
            h
        }
    } else {
        local.ip().to_string()
    };
    let uri = format!("{host}:{}", local.port());
    match report.as_deref() {
        None | Some("-") => println!("{uri}"),
        Some(f) => {
            std::fs::write(f, format!("{uri}\n"))
                .unwrap_or_else(|e| fail(&format!("cannot write {f}: {e}")));
        }
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let table = Arc::new(Mutex::new(protean_pmi::NameTable::default()));
    for s in l.incoming() {
        match s {
            Ok(s) => {
                let t = table.clone();
                std::thread::spawn(move || protean_pmi::names::serve_connection(&t, s));
            }
            Err(e) => eprintln!("protean-nameserver: accept: {e}"),
        }
    }
}
