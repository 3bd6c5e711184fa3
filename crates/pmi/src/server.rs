//! A sans-IO PMI-1 server: the process manager's side of the protocol.
//!
//! The caller owns the connections. It frames the bytes of each client (see
//! [`crate::wire::Framer`]), hands every message to [`Server::handle`] with the client's index,
//! and writes out the responses it gets back, each addressed to a client. A barrier answers
//! nobody until the last client enters, then answers all of them at once. Things the process
//! manager must act on (a client initialised, finalised, aborted, asked to spawn, or sent
//! garbage) come out of [`Server::poll_event`], in order.
//!
//! Invariants: the server never blocks, reads no clock and does no I/O; any input, however
//! malformed, yields responses and events, never a panic. A client is identified by the index the
//! caller gives; with `PMI_FD` the launcher uses the rank, with `PMI_PORT` the `initack` message
//! carries the rank (`pmiid`) and the server answers with it.
//!
//! Semantics kept from Hydra: a `put` is visible to `get` at once (PMI-1 only promises it after
//! the next barrier, so clients must still call the barrier); a `put` of an existing key
//! overwrites it; a `get` of a missing key answers `rc=-1`. The KVS is pre-loaded with
//! `PMI_process_mapping` (all ranks on one node), which MPICH-built programs read.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::wire::{Request, Response, SpawnCommand, WireError};

/// Limits announced by `cmd=maxes` (the values Hydra announces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    pub kvsname_max: u32,
    pub keylen_max: u32,
    pub vallen_max: u32,
}

impl Default for Maxes {
    fn default() -> Self {
        Maxes {
            kvsname_max: 256,
            keylen_max: 64,
            vallen_max: 1024,
        }
    }
}

/// Something the process manager must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The client sent `cmd=init`.
    Initialized { client: usize },
    /// The client sent `cmd=finalize` (it has been answered).
    Finalized { client: usize },
    /// The client called `PMI_Abort`: the job must be torn down and end with `exitcode`.
    Abort {
        client: usize,
        exitcode: i32,
        message: Option<String>,
    },
    /// The client sent a complete spawn request (all `totspawns` commands). Answer it with
    /// [`Server::spawn_result`].
    Spawn {
        client: usize,
        commands: Vec<SpawnCommand>,
    },
    /// The client sent something that is not a valid request, or a request out of place. The
    /// client was not answered; the process manager should end the job.
    ProtocolError {
        client: usize,
        message: String,
        error: String,
    },
}

#[derive(Debug, Default, Clone)]
struct ClientState {
    initialized: bool,
    finalized: bool,
    aborted: bool,
}

/// The server state machine for one job.
#[derive(Debug)]
pub struct Server {
    size: usize,
    kvsname: String,
    appnum: i32,
    universe_size: i32,
    maxes: Maxes,
    kvs: BTreeMap<String, HashMap<String, String>>,
    clients: BTreeMap<usize, ClientState>,
    barrier: BTreeSet<usize>,
    spawning: BTreeMap<usize, Vec<SpawnCommand>>,
    events: VecDeque<Event>,
}

impl Server {
    /// A server for a job of `size` processes whose KVS is named `kvsname`.
    pub fn new(size: usize, kvsname: &str, appnum: i32, universe_size: i32) -> Server {
        let mut kvs = BTreeMap::new();
        let mut space = HashMap::new();
        space.insert(
            "PMI_process_mapping".to_string(),
            format!("(vector,(0,1,{size}))"),
        );
        kvs.insert(kvsname.to_string(), space);
        Server {
            size,
            kvsname: kvsname.to_string(),
            appnum,
            universe_size,
            maxes: Maxes::default(),
            kvs,
            clients: BTreeMap::new(),
            barrier: BTreeSet::new(),
            spawning: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    /// The job's KVS name.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The job's size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The limits announced to clients.
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    /// Creates another KVS space (for spawned jobs), empty if new.
    pub fn add_kvs(&mut self, name: &str) {
        self.kvs.entry(name.to_string()).or_default();
    }

    /// Puts a key into a KVS space, creating the space if needed (pre-put values of a spawn).
    pub fn kvs_put(&mut self, kvsname: &str, key: &str, value: &str) {
        self.kvs
            .entry(kvsname.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }

    /// Looks a key up in a KVS space.
    pub fn kvs_get(&self, kvsname: &str, key: &str) -> Option<&str> {
        self.kvs.get(kvsname)?.get(key).map(String::as_str)
    }

    /// True once the client has sent `cmd=init`.
    pub fn is_initialized(&self, client: usize) -> bool {
        self.clients.get(&client).is_some_and(|c| c.initialized)
    }

    /// True once the client has sent `cmd=finalize`.
    pub fn is_finalized(&self, client: usize) -> bool {
        self.clients.get(&client).is_some_and(|c| c.finalized)
    }

    /// True once the client has sent `cmd=abort`.
    pub fn has_aborted(&self, client: usize) -> bool {
        self.clients.get(&client).is_some_and(|c| c.aborted)
    }

    /// The next event for the process manager.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Handles one framed message from `client`.
    pub fn handle(&mut self, client: usize, message: &str) -> Vec<(usize, Response)> {
        match Request::parse(message) {
            Ok(req) => self.handle_request(client, req),
            Err(e) => self.protocol_error(client, message, &e),
        }
    }

    /// Handles one framing failure on `client`'s stream.
    pub fn handle_wire_error(
        &mut self,
        client: usize,
        error: &WireError,
    ) -> Vec<(usize, Response)> {
        self.protocol_error(client, "", error)
    }

    fn protocol_error(
        &mut self,
        client: usize,
        message: &str,
        error: &dyn std::fmt::Display,
    ) -> Vec<(usize, Response)> {
        self.events.push_back(Event::ProtocolError {
            client,
            message: message.trim_end().to_string(),
            error: error.to_string(),
        });
        Vec::new()
    }

    /// Handles one validated request from `client`.
    pub fn handle_request(&mut self, client: usize, req: Request) -> Vec<(usize, Response)> {
        let state = self.clients.entry(client).or_default();
        let one = |r: Response| vec![(client, r)];
        match req {
            Request::InitAck { pmiid } => vec![
                (client, Response::InitAck),
                (
                    client,
                    Response::Set {
                        name: "size".into(),
                        value: self.size as i64,
                    },
                ),
                (
                    client,
                    Response::Set {
                        name: "rank".into(),
                        value: pmiid,
                    },
                ),
                (
                    client,
                    Response::Set {
                        name: "debug".into(),
                        value: 0,
                    },
                ),
            ],
            Request::Init {
                version,
                subversion,
            } => {
                if version != 1 {
                    return one(Response::ResponseToInit {
                        version: 1,
                        subversion: 1,
                        rc: -1,
                    });
                }
                if !state.initialized {
                    state.initialized = true;
                    self.events.push_back(Event::Initialized { client });
                }
                one(Response::ResponseToInit {
                    version,
                    subversion: subversion.min(1),
                    rc: 0,
                })
            }
            Request::GetMaxes => one(Response::Maxes {
                kvsname_max: self.maxes.kvsname_max,
                keylen_max: self.maxes.keylen_max,
                vallen_max: self.maxes.vallen_max,
            }),
            Request::GetAppnum => one(Response::Appnum {
                appnum: self.appnum,
            }),
            Request::GetMyKvsname => one(Response::MyKvsname {
                kvsname: self.kvsname.clone(),
            }),
            Request::GetUniverseSize => one(Response::UniverseSize {
                size: self.universe_size,
            }),
            Request::Put {
                kvsname,
                key,
                value,
            } => {
                let result = if key.len() > self.maxes.keylen_max as usize {
                    Err("key_too_long")
                } else if value.len() > self.maxes.vallen_max as usize {
                    Err("value_too_long")
                } else {
                    match self.kvs.get_mut(&kvsname) {
                        Some(space) => {
                            space.insert(key, value);
                            Ok(())
                        }
                        None => Err("unknown_kvsname"),
                    }
                };
                one(match result {
                    Ok(()) => Response::PutResult {
                        rc: 0,
                        msg: Some("success".into()),
                    },
                    Err(why) => Response::PutResult {
                        rc: -1,
                        msg: Some(why.into()),
                    },
                })
            }
            Request::Get { kvsname, key } => {
                one(match self.kvs.get(&kvsname).map(|s| s.get(&key)) {
                    Some(Some(v)) => Response::GetResult {
                        rc: 0,
                        msg: Some("success".into()),
                        value: Some(v.clone()),
                    },
                    Some(None) => Response::GetResult {
                        rc: -1,
                        msg: Some("key_not_found".into()),
                        value: None,
                    },
                    None => Response::GetResult {
                        rc: -1,
                        msg: Some("unknown_kvsname".into()),
                        value: None,
                    },
                })
            }
            Request::BarrierIn => {
                if !self.barrier.insert(client) {
                    return self.protocol_error(
                        client,
                        "cmd=barrier_in",
                        &"entered the barrier twice",
                    );
                }
                if self.barrier.len() < self.size {
                    return Vec::new();
                }
                std::mem::take(&mut self.barrier)
                    .into_iter()
                    .map(|c| (c, Response::BarrierOut))
                    .collect()
            }
            Request::Finalize => {
                if !state.finalized {
                    state.finalized = true;
                    self.events.push_back(Event::Finalized { client });
                }
                one(Response::FinalizeAck)
            }
            Request::Abort { exitcode, message } => {
                state.aborted = true;
                self.events.push_back(Event::Abort {
                    client,
                    exitcode,
                    message,
                });
                Vec::new()
            }
            Request::Spawn(cmd) => {
                let total = cmd.totspawns.max(1) as usize;
                let pending = self.spawning.entry(client).or_default();
                pending.push(cmd);
                if pending.len() < total {
                    return Vec::new();
                }
                let commands = self.spawning.remove(&client).unwrap_or_default();
                self.events.push_back(Event::Spawn { client, commands });
                Vec::new()
            }
        }
    }

    /// The answer to a spawn request (after [`Event::Spawn`]): `rc` 0 for success.
    pub fn spawn_result(&mut self, client: usize, rc: i32, msg: &str) -> Vec<(usize, Response)> {
        vec![(
            client,
            Response::SpawnResult {
                rc,
                msg: Some(msg.to_string()),
            },
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(s: &mut Server, client: usize, line: &str) -> Vec<(usize, String)> {
        s.handle(client, line)
            .into_iter()
            .map(|(c, r)| (c, r.encode()))
            .collect()
    }

    fn one(s: &mut Server, client: usize, line: &str) -> String {
        let mut out = ask(s, client, line);
        assert_eq!(out.len(), 1, "{line} -> {out:?}");
        let (c, text) = out.pop().unwrap();
        assert_eq!(c, client);
        text
    }

    #[test]
    fn init_queries_and_finalize() {
        let mut s = Server::new(2, "kvs_1", 0, 4);
        assert_eq!(
            one(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1\n"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        );
        assert_eq!(s.poll_event(), Some(Event::Initialized { client: 0 }));
        assert!(s.is_initialized(0) && !s.is_initialized(1));
        assert_eq!(
            one(&mut s, 0, "cmd=get_maxes\n"),
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
        );
        assert_eq!(one(&mut s, 0, "cmd=get_appnum\n"), "cmd=appnum appnum=0\n");
        assert_eq!(
            one(&mut s, 0, "cmd=get_my_kvsname\n"),
            "cmd=my_kvsname kvsname=kvs_1\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=get_universe_size\n"),
            "cmd=universe_size size=4\n"
        );
        assert_eq!(one(&mut s, 0, "cmd=finalize\n"), "cmd=finalize_ack\n");
        assert_eq!(s.poll_event(), Some(Event::Finalized { client: 0 }));
        assert!(s.is_finalized(0));
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn unsupported_version_is_refused() {
        let mut s = Server::new(1, "k", 0, 1);
        assert_eq!(
            one(&mut s, 0, "cmd=init pmi_version=2 pmi_subversion=0\n"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n"
        );
        assert!(!s.is_initialized(0));
    }

    #[test]
    fn kvs_put_get() {
        let mut s = Server::new(2, "k", 0, 2);
        assert_eq!(
            one(
                &mut s,
                1,
                "cmd=put kvsname=k key=card-1 value=tcp:127.0.0.1:5=x\n"
            ),
            "cmd=put_result rc=0 msg=success\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=get kvsname=k key=card-1\n"),
            "cmd=get_result rc=0 msg=success value=tcp:127.0.0.1:5=x\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=get kvsname=k key=card-9\n"),
            "cmd=get_result rc=-1 msg=key_not_found\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=get kvsname=other key=card-1\n"),
            "cmd=get_result rc=-1 msg=unknown_kvsname\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=put kvsname=other key=a value=b\n"),
            "cmd=put_result rc=-1 msg=unknown_kvsname\n"
        );
        let long = "v".repeat(1025);
        assert_eq!(
            one(
                &mut s,
                0,
                &format!("cmd=put kvsname=k key=a value={long}\n")
            ),
            "cmd=put_result rc=-1 msg=value_too_long\n"
        );
        // Overwrite, as Hydra does.
        one(&mut s, 1, "cmd=put kvsname=k key=card-1 value=second\n");
        assert_eq!(s.kvs_get("k", "card-1"), Some("second"));
        assert_eq!(
            one(&mut s, 0, "cmd=get kvsname=k key=PMI_process_mapping\n"),
            "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))\n"
        );
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn barrier_releases_everyone_when_the_last_enters() {
        let mut s = Server::new(3, "k", 0, 3);
        assert!(ask(&mut s, 2, "cmd=barrier_in\n").is_empty());
        assert!(ask(&mut s, 0, "cmd=barrier_in\n").is_empty());
        let mut out = ask(&mut s, 1, "cmd=barrier_in\n");
        out.sort();
        let expect: Vec<_> = (0..3)
            .map(|c| (c, "cmd=barrier_out\n".to_string()))
            .collect();
        assert_eq!(out, expect);
        // The barrier can be used again.
        assert!(ask(&mut s, 1, "cmd=barrier_in\n").is_empty());
        assert!(ask(&mut s, 1, "cmd=barrier_in\n").is_empty());
        assert!(matches!(
            s.poll_event(),
            Some(Event::ProtocolError { client: 1, .. })
        ));
    }

    #[test]
    fn initack_answers_with_four_lines() {
        let mut s = Server::new(4, "k", 0, 4);
        let out = ask(&mut s, 7, "cmd=initack pmiid=3\n");
        let text: String = out.iter().map(|(_, t)| t.as_str()).collect();
        assert!(out.iter().all(|(c, _)| *c == 7));
        assert_eq!(
            text,
            "cmd=initack\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n"
        );
    }

    #[test]
    fn abort_is_an_event_without_answer() {
        let mut s = Server::new(2, "k", 0, 2);
        assert!(ask(&mut s, 1, "cmd=abort exitcode=5 message=bad input file\n").is_empty());
        assert_eq!(
            s.poll_event(),
            Some(Event::Abort {
                client: 1,
                exitcode: 5,
                message: Some("bad input file".into())
            })
        );
        assert!(s.has_aborted(1));
    }

    #[test]
    fn spawn_waits_for_all_commands() {
        let mut s = Server::new(1, "k", 0, 1);
        let first = "mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=2\nspawnssofar=1\nargcnt=0\n\
                     preput_num=0\ninfo_num=0\nendcmd\n";
        let second = first
            .replace("execname=a", "execname=b")
            .replace("sofar=1", "sofar=2");
        assert!(ask(&mut s, 0, first).is_empty());
        assert_eq!(s.poll_event(), None);
        assert!(ask(&mut s, 0, &second).is_empty());
        match s.poll_event() {
            Some(Event::Spawn {
                client: 0,
                commands,
            }) => {
                let names: Vec<_> = commands.iter().map(|c| c.execname.as_str()).collect();
                assert_eq!(names, ["a", "b"]);
            }
            other => panic!("expected a spawn event, got {other:?}"),
        }
        let out = s.spawn_result(0, -1, "spawn_not_supported");
        assert_eq!(
            out[0].1.encode(),
            "cmd=spawn_result rc=-1 msg=spawn_not_supported\n"
        );
    }

    #[test]
    fn garbage_is_an_event_not_a_panic() {
        let mut s = Server::new(2, "k", 0, 2);
        for line in [
            "",
            "\n",
            "cmd=\n",
            "cmd=nope\n",
            "cmd=put key\n",
            "\u{0}\u{1}",
            "cmd=get\n",
        ] {
            assert!(ask(&mut s, 0, line).is_empty(), "{line:?}");
            assert!(matches!(
                s.poll_event(),
                Some(Event::ProtocolError { client: 0, .. })
            ));
        }
    }
}
