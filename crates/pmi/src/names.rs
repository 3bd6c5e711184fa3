//! The standalone name server's protocol (`protean-nameserver`, the counterpart of Open MPI's
//! `ompi-server` and MPICH's `hydra_nameserver`): a TCP connection carrying the PMI-1
//! `publish_name`, `unpublish_name` and `lookup_name` lines and their answers, exactly as a
//! process sends them to its process manager. mpirun started with `--nameserver HOST:PORT`
//! forwards its processes' requests there, so that independent jobs share one name space.
//!
//! The server answers one request per line, in order, on any number of connections; it keeps
//! no state per connection. It trusts its clients as the process managers trust theirs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::server::NameTable;
use crate::wire::{Request, Response};

/// Asks the name server at `addr` (`host:port`) one question (a connection per question:
/// publishing is rare). Err: the server cannot be reached or answered nonsense.
pub fn ask(addr: &str, req: &Request, timeout: Duration) -> Result<Response, String> {
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("name server {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("name server {addr}: no address"))?;
    let mut s = TcpStream::connect_timeout(&sa, timeout)
        .map_err(|e| format!("cannot reach the name server at {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    s.write_all(req.encode().as_bytes())
        .map_err(|e| format!("name server {addr}: {e}"))?;
    let mut line = String::new();
    BufReader::new(s)
        .take(64 * 1024)
        .read_line(&mut line)
        .map_err(|e| format!("name server {addr}: {e}"))?;
    if line.is_empty() {
        return Err(format!("the name server at {addr} closed the connection"));
    }
    Response::parse(&line).map_err(|e| format!("name server {addr}: {e}"))
}

/// Serves one client connection: its requests, line by line, until it closes. A line that
/// is not a name-service request ends the connection (after an answer naming the problem,
/// where it is a request at all).
pub fn serve_connection(table: &std::sync::Mutex<NameTable>, s: TcpStream) {
    let Ok(mut out) = s.try_clone() else { return };
    let mut r = BufReader::new(s).take(1 << 20);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(req) = Request::parse(&line) else {
            return;
        };
        let resp = match table.lock() {
            Ok(mut t) => t.handle(&req),
            Err(_) => return,
        };
        let Some(resp) = resp else { return };
        if out.write_all(resp.encode().as_bytes()).is_err() {
            return;
        }
        r.set_limit(1 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_server_answers_over_tcp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let table = Arc::new(Mutex::new(NameTable::default()));
        let t = table.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                serve_connection(&t, s);
            }
        });
        let d = Duration::from_secs(5);
        let publish = Request::PublishName {
            service: "svc".into(),
            port: "p".into(),
        };
        assert!(matches!(
            ask(&addr, &publish, d),
            Ok(Response::PublishResult { rc: 0, .. })
        ));
        let lookup = Request::LookupName {
            service: "svc".into(),
        };
        assert!(matches!(
            ask(&addr, &lookup, d),
            Ok(Response::LookupResult { rc: 0, port: Some(p), .. }) if p == "p"
        ));
        assert_eq!(table.lock().unwrap().len(), 1);
        assert!(ask("127.0.0.1:1", &lookup, d).is_err());
    }
}
