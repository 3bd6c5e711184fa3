//! protean-nameserver: serves MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name to
//! independent jobs (the counterpart of Open MPI's `ompi-server` and MPICH's
//! `hydra_nameserver`). It draws a secret when it starts and writes its URI,
//! `protean-ns:SECRET:HOST:PORT`, into a file only its owner can read; each mpirun is given
//! that URI (`--nameserver file:PATH`, `--nameserver URI`, or PROTEAN_NAMESERVER) and proves
//! the secret on every connection. The protocol is `protean_pmi::names`.

use std::io::Write as _;
use std::net::TcpListener;
use std::sync::Arc;

use protean_pmi::names::{Address, Limits, NameServer};
use protean_pmi::NameTable;

const HELP: &str = "\
Usage: protean-nameserver --report-uri FILE|- [--port N] [--bind ADDR] [--max-names N]
                          [--max-connections N] [--max-pending N]

Serves published MPI service names to jobs started with mpirun --nameserver file:FILE.
Draws a secret, listens, writes its URI (protean-ns:SECRET:HOST:PORT) into FILE, then runs
until it is killed (SIGTERM or SIGINT: it prints how many requests it answered and refused).
Every connection must prove the secret (HMAC over both sides' nonces); one that does not is
closed, logged on standard error and counted, and never reads or changes a name. After that
proof every request and answer is sealed (ChaCha20-Poly1305, a key per connection and
direction, a counter per frame): names and ports never cross the network readable, and a
forged, altered, replayed or reflected request is refused, counted and ends its connection.

  --report-uri FILE    write the URI into FILE, readable by its owner only (mode 0600);
                       '-': to standard output (the URI is a capability: whoever has it may
                       publish, look up and unpublish names)
  --port N             the TCP port to listen on (default: one the kernel picks)
  --bind ADDR          the address to listen on (default 0.0.0.0: every interface)
  --max-names N        names held at once (default 65536)
  --max-connections N  connections open at once (default 64)
  --max-pending N      connections from one address still in their handshake at once
                       (default 4; more are closed at once), so a flood of idle connections
                       from one address cannot take every slot
  -h, --help           print this help

Limits: service names of at most 255 bytes, port names of at most 1024, requests of at most
4096 bytes, 2 s to complete the whole handshake, 30 s idle after it; a request beyond a limit is
answered with an error naming it.
";

fn fail(msg: &str) -> ! {
    eprintln!("protean-nameserver: {msg}");
    std::process::exit(2)
}

/// Writes `text` into `path` readable by its owner only: a new file beside it, then renamed
/// over it (never writing through a link someone else left there).
fn report(path: &str, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = format!("{path}.{}.tmp", std::process::id());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let done = f
        .write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .and_then(|_| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

fn main() {
    let mut port = 0u16;
    let mut bind = "0.0.0.0".to_string();
    let mut report_to: Option<String> = None;
    let mut limits = Limits::default();
    let mut max_names = NameTable::DEFAULT_MAX_NAMES;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs {what}")))
        };
        let count = |v: String| -> usize {
            v.parse()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| fail(&format!("{a}: {v:?} is not a positive number")))
        };
        match a.trim_start_matches('-') {
            "port" | "p" => {
                let v = val("a port number");
                port = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--port: {v:?} is not a port number")));
            }
            "bind" => bind = val("an address"),
            "report-uri" => report_to = Some(val("a file name or -")),
            "max-names" => max_names = count(val("a number")),
            "max-connections" => limits.connections = count(val("a number")),
            "max-pending" => limits.pending_per_address = count(val("a number")),
            "h" | "help" => {
                print!("{HELP}");
                return;
            }
            _ => fail(&format!("unknown option '{a}' (see --help)")),
        }
    }
    let Some(report_to) = report_to else {
        fail(
            "--report-uri FILE is needed: the URI carries the server's secret, so it is written \
             only where asked (FILE, mode 0600, or '-' for standard output)",
        )
    };
    let secret = protean_pmi::proof::random::<32>().unwrap_or_else(|e| fail(&e));
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
    let addr = Address {
        secret,
        host,
        port: local.port(),
    };
    // Signals are taken by a thread of their own (below); block them before any thread starts.
    // SAFETY: plain signal-set calls on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let ns = Arc::new(NameServer::new(
        secret,
        limits,
        NameTable::with_limits(
            max_names,
            NameTable::DEFAULT_MAX_SERVICE,
            NameTable::DEFAULT_MAX_PORT,
        ),
        Box::new(|line| eprintln!("protean-nameserver: {line}")),
    ));
    let me = ns.clone();
    std::thread::spawn(move || me.serve(l));
    if report_to == "-" {
        println!("{}", addr.uri());
        let _ = std::io::stdout().flush();
    } else {
        report(&report_to, &format!("{}\n", addr.uri()))
            .unwrap_or_else(|e| fail(&format!("cannot write {report_to}: {e}")));
    }
    eprintln!(
        "protean-nameserver: listening on {} (URI in {})",
        addr.endpoint(),
        if report_to == "-" {
            "standard output"
        } else {
            &report_to
        }
    );
    let mut sig = 0;
    // SAFETY: waits on the blocked set above.
    unsafe { libc::sigwait(&set, &mut sig) };
    eprintln!(
        "protean-nameserver: stopping on signal {sig}: {} requests answered, {} refused, {} \
         names held",
        ns.requests(),
        ns.refused(),
        ns.names()
    );
    std::process::exit(0)
}
