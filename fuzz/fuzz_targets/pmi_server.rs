//! The PMI server (mpirun's side of PMI-1) fed by several clients at once: raw bytes through
//! each client's framer, and well-formed requests of every kind in any order, from clients in
//! and out of the job's range. It never panics, answers only clients of the job (a request
//! other than a barrier only its sender), never stores more than its limits allow, and
//! behaves as a key-value store: a `get` answers what the last accepted `put` of that key
//! stored, and a refused `put` stores nothing; each rank is claimed by one connection, and
//! each connection claims one rank.
#![no_main]
use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use protean_pmi::server::{Event, Limits, Maxes, Server};
use protean_pmi::wire::{Framer, Request, Response, SpawnCommand};

const KVS: &str = "kvs_fuzz";
const MESSAGE_MAX: usize = 512;

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// What the fuzzer knows of the server: the job's key-value space as accepted puts left it.
struct Model {
    size: usize,
    limits: Limits,
    kvs: HashMap<String, String>,
    /// The rank each client claimed with an `initack` the server accepted.
    ranks: HashMap<usize, i64>,
}

impl Model {
    /// Checks what the server did with one message from `client` (`req`: the request it
    /// carried, if it was one).
    fn check(
        &mut self,
        s: &mut Server,
        client: usize,
        text: &str,
        req: Option<Request>,
        out: &[(usize, Response)],
    ) {
        let barrier = matches!(req, Some(Request::BarrierIn));
        for (to, _) in out {
            assert!(*to < self.size, "answered client {to} of {}", self.size);
            assert!(
                barrier || *to == client,
                "{text:?} from {client} answered {to}"
            );
        }
        while let Some(ev) = s.poll_event() {
            let who = match ev {
                Event::Initialized { client }
                | Event::Finalized { client }
                | Event::Abort { client, .. }
                | Event::Spawn { client, .. }
                | Event::Name { client, .. }
                | Event::LimitExceeded { client, .. }
                | Event::ProtocolError { client, .. } => client,
            };
            assert_eq!(who, client, "{text:?}: an event names another client");
        }
        if client >= self.size {
            assert!(out.is_empty(), "client {client} out of range was answered");
        }
        if let Some(Request::InitAck { pmiid }) = req {
            if !out.is_empty() {
                // Accepted: a rank of the job that no connection had, for a client that had none.
                assert!(pmiid >= 0 && (pmiid as usize) < self.size, "pmiid {pmiid}");
                assert!(
                    !self.ranks.values().any(|&r| r == pmiid),
                    "rank {pmiid} twice"
                );
                assert!(
                    self.ranks.insert(client, pmiid).is_none(),
                    "{client} acked twice"
                );
            }
        }
        match (req, out) {
            (
                Some(Request::Put {
                    kvsname,
                    key,
                    value,
                }),
                [(_, Response::PutResult { rc, .. })],
            ) => {
                if *rc == 0 {
                    assert!(key.len() <= self.limits.maxes.keylen_max as usize);
                    assert!(value.len() <= self.limits.maxes.vallen_max as usize);
                    if kvsname == KVS {
                        self.kvs.insert(key.clone(), value);
                    }
                }
                if kvsname == KVS {
                    assert_eq!(s.kvs_get(KVS, &key), self.kvs.get(&key).map(String::as_str));
                }
            }
            (Some(Request::Get { kvsname, key }), [(_, Response::GetResult { rc, value, .. })])
                if kvsname == KVS =>
            {
                let want = self.kvs.get(&key);
                assert_eq!(*rc == 0, want.is_some(), "get {key:?}");
                assert_eq!(value.as_ref(), want, "get {key:?}");
            }
            _ => {}
        }
        // Bounded: the store by its limit (the process manager's own mapping counts too), the
        // spawn requests held by the number of commands one may have.
        assert!(
            s.store_bytes() <= self.limits.store_max,
            "{}",
            s.store_bytes()
        );
        assert!(s.pending_spawn_commands() <= self.size * self.limits.spawns_max);
    }
}

fn word(b: &mut Bytes, len_max: u8) -> String {
    // Two bytes make a word: its length and a pattern over a small alphabet, so that keys
    // repeat (overwrites, gets that hit) and a few puts fill the store.
    let n = b.byte().unwrap_or(0) % len_max.max(1);
    let seed = b.byte().unwrap_or(0);
    (0..n)
        .map(|i| (b'a' + (seed >> (2 * (i % 4))) % 4) as char)
        .collect()
}

fn request(b: &mut Bytes) -> Request {
    let kind = b.byte().unwrap_or(0);
    // Mostly the job's space; a quarter of the time another (unknown) one.
    let kvsname = if kind & 0xc0 != 0xc0 {
        KVS.to_string()
    } else {
        word(b, 8)
    };
    match kind % 16 {
        0 => Request::InitAck {
            pmiid: b.byte().unwrap_or(0) as i64 - 2,
        },
        1 => Request::Init {
            version: (b.byte().unwrap_or(1) % 3) as u32,
            subversion: (b.byte().unwrap_or(1) % 3) as u32,
        },
        2 => Request::GetMaxes,
        3 => Request::GetAppnum,
        4 => Request::GetMyKvsname,
        5 => Request::GetUniverseSize,
        6 => Request::BarrierIn,
        7..=10 => Request::Put {
            kvsname,
            key: word(b, 24),
            // Up to 255 bytes: across the announced maximum of 64.
            value: word(b, 255),
        },
        11 | 12 => Request::Get {
            kvsname,
            key: word(b, 24),
        },
        13 => Request::Finalize,
        _ => {
            let tot = b.byte().unwrap_or(1) as u32 % 8;
            Request::Spawn(SpawnCommand {
                nprocs: 1,
                execname: word(b, 16),
                totspawns: tot,
                spawnssofar: 1,
                args: vec![word(b, 16)],
                preput: vec![(word(b, 8), word(b, 8))],
                info: Vec::new(),
            })
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let size = 1 + (b.byte().unwrap_or(0) % 4) as usize;
    let mut s = Server::new(size, KVS, 0, size as i32);
    // Small limits, so that fuzzing reaches them.
    let limits = Limits {
        maxes: Maxes {
            kvsname_max: 32,
            keylen_max: 16,
            vallen_max: 64,
        },
        store_max: 256,
        spawns_max: 4,
    };
    s.set_limits(limits);
    let mut model = Model {
        size,
        limits,
        kvs: HashMap::new(),
        ranks: HashMap::new(),
    };
    let mapping = s.kvs_get(KVS, "PMI_process_mapping").unwrap().to_string();
    model.kvs.insert("PMI_process_mapping".into(), mapping);
    // One framer for every client and one for a client out of range.
    let mut framers: Vec<Framer> = (0..=size).map(|_| Framer::new(MESSAGE_MAX)).collect();
    while let Some(op) = b.byte() {
        let client = (op >> 2) as usize % (size + 1);
        match op & 3 {
            0 => {
                // Raw bytes on the client's stream.
                let n = b.byte().unwrap_or(0) as usize * 4;
                framers[client].push(b.take(n));
                while let Some(m) = framers[client].next_message() {
                    match m {
                        Ok(text) => {
                            let out = s.handle(client, &text);
                            let req = Request::parse(&text).ok();
                            model.check(&mut s, client, &text, req, &out);
                        }
                        Err(e) => {
                            let out = s.handle_wire_error(client, &e);
                            assert!(out.is_empty());
                            model.check(&mut s, client, "", None, &out);
                        }
                    }
                }
                assert!(framers[client].pending() <= MESSAGE_MAX);
            }
            1 | 2 => {
                // A well-formed request, as text (op 1) or already parsed (op 2).
                let req = request(&mut b);
                let text = req.encode();
                let (out, req) = if op & 3 == 1 {
                    (s.handle(client, &text), Request::parse(&text).ok())
                } else {
                    (s.handle_request(client, req.clone()), Some(req))
                };
                model.check(&mut s, client, &text, req, &out);
            }
            _ => {
                // The process manager answers a spawn.
                let out = s.spawn_result(client, -1, "spawn_not_supported");
                assert!(out.iter().all(|(to, _)| *to == client));
            }
        }
    }
});
