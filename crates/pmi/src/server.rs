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
//! `PMI_process_mapping` (all ranks on one node, until the process manager sets the real one),
//! which MPICH-built programs read.
//!
//! Limits (a rank is a client, not a trusted party): every client index and `pmiid` is checked
//! against the job's size, an `initack` must name a rank no other connection has claimed (and a
//! connection may claim one rank only), keys
//! and values are bounded by the announced `maxes`, and the store as a whole by
//! [`Limits::store_max`]. A request that breaks a limit is answered with `rc=-1` (so the client
//! never hangs) and reported as [`Event::LimitExceeded`] naming the client, for the process
//! manager to end the job; nothing of it is stored.

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

/// Per-job limits of the server: what `cmd=maxes` announces, and what it enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Announced in `cmd=maxes`; longer keys and values are refused.
    pub maxes: Maxes,
    /// Bytes of keys and values the store holds at most, all spaces together.
    pub store_max: usize,
    /// Commands one spawn request may have (`totspawns`).
    pub spawns_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            maxes: Maxes::default(),
            store_max: 16 << 20,
            spawns_max: 64,
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
    /// The client sent `publish_name`, `unpublish_name` or `lookup_name` while the names are
    /// served elsewhere ([`Server::forward_names`]): answer it with [`Server::name_result`].
    Name { client: usize, request: Request },
    /// The client broke one of the server's [`Limits`] (`limit` says which, with the numbers);
    /// it was answered `rc=-1` and nothing was stored. The process manager should end the job.
    LimitExceeded { client: usize, limit: String },
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
    /// The rank this client claimed with `initack`.
    pmiid: Option<usize>,
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
    limits: Limits,
    /// Bytes of keys and values in `kvs`.
    store_bytes: usize,
    /// Ranks claimed by `initack`.
    acked: BTreeSet<usize>,
    kvs: BTreeMap<String, HashMap<String, String>>,
    clients: BTreeMap<usize, ClientState>,
    barrier: BTreeSet<usize>,
    spawning: BTreeMap<usize, Vec<SpawnCommand>>,
    events: VecDeque<Event>,
    /// Jobs started later by a spawn ([`Server::add_group`]): their clients follow the first
    /// job's, in order.
    groups: Vec<Group>,
    /// The published names (MPI_Publish_name), unless they are forwarded.
    names: NameTable,
    forward_names: bool,
    /// Keys a client of a spawned job put into another job's space (its card, for its
    /// parents), removed with the job ([`Server::retire_group`]).
    put_elsewhere: BTreeMap<usize, Vec<(String, String)>>,
}

/// Service names and their ports (MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name),
/// as served by mpirun for its jobs and by the standalone name server for independent jobs.
/// Answers as Hydra does: `rc=0 msg=success`, or `rc=1` and a reason. Bounded: at most
/// `max_names` names of at most `max_service` bytes, ports of at most `max_port` bytes, and
/// [`NameTable::MAX_BYTES`] in all; a request beyond a bound is refused with a reason naming
/// it.
#[derive(Debug)]
pub struct NameTable {
    names: BTreeMap<String, String>,
    /// Bytes of names and ports held.
    bytes: usize,
    max_names: usize,
    max_service: usize,
    max_port: usize,
}

impl Default for NameTable {
    fn default() -> Self {
        NameTable::with_limits(
            Self::DEFAULT_MAX_NAMES,
            Self::DEFAULT_MAX_SERVICE,
            Self::DEFAULT_MAX_PORT,
        )
    }
}

impl NameTable {
    /// The most bytes of names and ports one table holds.
    pub const MAX_BYTES: usize = 16 << 20;
    /// Names one table holds, by default.
    pub const DEFAULT_MAX_NAMES: usize = 65536;
    /// Bytes of a service name, by default (what MPI_Publish_name takes).
    pub const DEFAULT_MAX_SERVICE: usize = 255;
    /// Bytes of a port name, by default (MPI_MAX_INFO_VAL: port names of other MPIs fit).
    pub const DEFAULT_MAX_PORT: usize = 1024;

    /// An empty table with the given bounds.
    pub fn with_limits(max_names: usize, max_service: usize, max_port: usize) -> NameTable {
        NameTable {
            names: BTreeMap::new(),
            bytes: 0,
            max_names,
            max_service,
            max_port,
        }
    }

    /// Why a service name cannot be taken, if it cannot.
    fn check_service(&self, service: &str) -> Option<String> {
        (service.len() > self.max_service).then(|| {
            format!(
                "a service name of {} bytes (the name server takes at most {})",
                service.len(),
                self.max_service
            )
        })
    }

    /// The answer to a name-service request; None for any other request.
    pub fn handle(&mut self, req: &Request) -> Option<Response> {
        let ok = || Some("success".to_string());
        Some(match req {
            Request::PublishName { service, port } => {
                let (rc, msg) = if let Some(why) = self.check_service(service) {
                    (1, Some(why))
                } else if port.len() > self.max_port {
                    (
                        1,
                        Some(format!(
                            "a port name of {} bytes (the name server takes at most {})",
                            port.len(),
                            self.max_port
                        )),
                    )
                } else if self.names.contains_key(service) {
                    (1, Some("service_already_published".to_string()))
                } else if self.names.len() >= self.max_names {
                    (
                        1,
                        Some(format!(
                            "name_table_full: the name server holds at most {} names",
                            self.max_names
                        )),
                    )
                } else if self.bytes + service.len() + port.len() > Self::MAX_BYTES {
                    (1, Some("name_table_full".to_string()))
                } else {
                    self.bytes += service.len() + port.len();
                    self.names.insert(service.clone(), port.clone());
                    (0, ok())
                };
                Response::PublishResult { rc, msg }
            }
            Request::UnpublishName { service } => match self.names.remove(service) {
                Some(port) => {
                    self.bytes -= service.len() + port.len();
                    Response::UnpublishResult { rc: 0, msg: ok() }
                }
                None => Response::UnpublishResult {
                    rc: 1,
                    msg: Some(
                        self.check_service(service)
                            .unwrap_or_else(|| "service_not_found".into()),
                    ),
                },
            },
            Request::LookupName { service } => match self.names.get(service) {
                Some(p) => Response::LookupResult {
                    rc: 0,
                    msg: ok(),
                    port: Some(p.clone()),
                },
                None => Response::LookupResult {
                    rc: 1,
                    msg: Some(
                        self.check_service(service)
                            .unwrap_or_else(|| "service_not_found".into()),
                    ),
                    port: None,
                },
            },
            _ => return None,
        })
    }

    /// How many names are published.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A job started by a spawn: clients `first..first + size`, its own KVS space and barrier,
/// and an application number per client (one per command of `MPI_Comm_spawn_multiple`).
#[derive(Debug)]
struct Group {
    first: usize,
    size: usize,
    kvsname: String,
    appnums: Vec<i32>,
    barrier: BTreeSet<usize>,
    /// Every process of it ended ([`Server::retire_group`]).
    retired: bool,
}

impl Server {
    /// A server for a job of `size` processes whose KVS is named `kvsname`.
    pub fn new(size: usize, kvsname: &str, appnum: i32, universe_size: i32) -> Server {
        let mut kvs = BTreeMap::new();
        kvs.insert(kvsname.to_string(), HashMap::new());
        let mut s = Server {
            size,
            kvsname: kvsname.to_string(),
            appnum,
            universe_size,
            limits: Limits::default(),
            store_bytes: 0,
            acked: BTreeSet::new(),
            kvs,
            clients: BTreeMap::new(),
            barrier: BTreeSet::new(),
            spawning: BTreeMap::new(),
            events: VecDeque::new(),
            groups: Vec::new(),
            names: NameTable::default(),
            forward_names: false,
            put_elsewhere: BTreeMap::new(),
        };
        s.kvs_put(
            kvsname,
            "PMI_process_mapping",
            &format!("(vector,(0,1,{size}))"),
        );
        s
    }

    /// Name-service requests become [`Event::Name`] (for a process manager that forwards them
    /// to a standalone name server) instead of being served from this server's table.
    pub fn forward_names(&mut self, on: bool) {
        self.forward_names = on;
    }

    /// The answer to a forwarded name-service request (after [`Event::Name`]).
    pub fn name_result(&mut self, client: usize, resp: Response) -> Vec<(usize, Response)> {
        vec![(client, resp)]
    }

    /// Replaces the limits (before the first client speaks).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Bytes of keys and values stored, all spaces together.
    pub fn store_bytes(&self) -> usize {
        self.store_bytes
    }

    /// Commands of spawn requests held until their last command arrives, all clients together
    /// (at most [`Limits::spawns_max`] less one a client).
    pub fn pending_spawn_commands(&self) -> usize {
        self.spawning.values().map(Vec::len).sum()
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
        self.limits.maxes
    }

    /// Clients of every job together (the first job's and those started by spawns).
    pub fn clients(&self) -> usize {
        self.groups.last().map_or(self.size, |g| g.first + g.size)
    }

    /// MPI_UNIVERSE_SIZE as answered now: the size given to [`Server::new`] (negative: unset,
    /// answered as it is), but never fewer
    /// than the processes of the universe still running (the first job and every spawned job
    /// not yet retired). A spawned job would otherwise see a universe no larger than itself
    /// once its parents had spawned up to the limit, and could not tell that it may spawn too
    /// (the limit is soft: spawning past it oversubscribes, it is not refused).
    fn universe_size_now(&self) -> i32 {
        if self.universe_size < 0 {
            // Unset (mpirun -usize INFINITE): no limit to state.
            return self.universe_size;
        }
        let running = self.size
            + self
                .groups
                .iter()
                .filter(|g| !g.retired)
                .map(|g| g.size)
                .sum::<usize>();
        self.universe_size
            .max(i32::try_from(running).unwrap_or(i32::MAX))
    }

    /// Adds a job started by a spawn: `appnums.len()` clients numbered after every client so
    /// far, with the KVS space `kvsname` (created if new) and a barrier of their own. Returns
    /// the number of its first client.
    pub fn add_group(&mut self, kvsname: &str, appnums: Vec<i32>) -> usize {
        let first = self.clients();
        self.add_kvs(kvsname);
        let size = appnums.len();
        self.kvs_put(
            kvsname,
            "PMI_process_mapping",
            &format!("(vector,(0,1,{size}))"),
        );
        self.groups.push(Group {
            first,
            size,
            kvsname: kvsname.to_string(),
            appnums,
            barrier: BTreeSet::new(),
            retired: false,
        });
        first
    }

    /// A job started by a spawn ended (every process of it exited): its space, the keys its
    /// processes put elsewhere and their states go, so that spawning in a loop leaves the
    /// store and the server's memory where they were. The numbers of its clients stay taken.
    /// `first`: the number [`Server::add_group`] returned for it.
    pub fn retire_group(&mut self, first: usize) {
        let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| g.first == first && !g.retired)
        else {
            return;
        };
        g.retired = true;
        let range = g.first..g.first + g.size;
        let kvsname = std::mem::take(&mut g.kvsname);
        g.appnums = Vec::new();
        g.barrier = BTreeSet::new();
        if let Some(space) = self.kvs.remove(&kvsname) {
            self.store_bytes -= space.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        }
        for c in range {
            self.clients.remove(&c);
            self.spawning.remove(&c);
            for (space, key) in self.put_elsewhere.remove(&c).unwrap_or_default() {
                if let Some(v) = self.kvs.get_mut(&space).and_then(|s| s.remove(&key)) {
                    self.store_bytes -= key.len() + v.len();
                }
            }
        }
    }

    /// The first client of the last spawned job, if it is retired.
    pub fn last_group_first(&self) -> Option<usize> {
        self.groups.last().filter(|g| g.retired).map(|g| g.first)
    }

    /// The last spawned job, retired ([`Server::retire_group`]), gives its clients' numbers
    /// back: the next [`Server::add_group`] starts at its first. Its first, or None when
    /// the last job is the first one or has not been retired.
    pub fn drop_last_group(&mut self) -> Option<usize> {
        let g = self.groups.last().filter(|g| g.retired)?;
        let first = g.first;
        self.groups.pop();
        Some(first)
    }

    /// The KVS space of the job `client` belongs to.
    fn own_kvsname(&self, client: usize) -> &str {
        self.group_of(client)
            .map_or(self.kvsname.as_str(), |g| self.groups[g].kvsname.as_str())
    }

    /// The spawned job `client` belongs to (None: the first job).
    fn group_of(&self, client: usize) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| client >= g.first && client < g.first + g.size)
    }

    /// Creates another KVS space (for spawned jobs), empty if new.
    pub fn add_kvs(&mut self, name: &str) {
        self.kvs.entry(name.to_string()).or_default();
    }

    /// Puts a key into a KVS space, creating the space if needed (the process manager's own
    /// values: the process mapping, pre-put values of a spawn). Not subject to the limits, but
    /// counted in the store's size.
    pub fn kvs_put(&mut self, kvsname: &str, key: &str, value: &str) {
        let old = self
            .kvs
            .entry(kvsname.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self.store_bytes += key.len() + value.len();
        if let Some(old) = old {
            self.store_bytes -= key.len() + old.len();
        }
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
        if client >= self.clients() {
            return self.protocol_error(
                client,
                message,
                &format!(
                    "client {client} is out of range for a job of {} processes",
                    self.clients()
                ),
            );
        }
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
        if client >= self.clients() {
            return self.protocol_error(
                client,
                &req.encode(),
                &format!(
                    "client {client} is out of range for a job of {} processes",
                    self.clients()
                ),
            );
        }
        let group = self.group_of(client);
        let one = |r: Response| vec![(client, r)];
        if let Request::InitAck { pmiid } = req {
            if let Some(had) = self.clients.get(&client).and_then(|c| c.pmiid) {
                // One connection is one process: it may not claim a second rank.
                let why = format!("sent initack again (pmiid {pmiid}) after claiming rank {had}");
                return self.protocol_error(client, &req.encode(), &why);
            }
            let free = usize::try_from(pmiid)
                .ok()
                .filter(|&id| id < self.size && !self.acked.contains(&id));
            let Some(id) = free else {
                let why = if pmiid >= 0 && (pmiid as u64) < self.size as u64 {
                    format!("pmiid {pmiid} was already claimed by another connection")
                } else {
                    format!(
                        "pmiid {pmiid} is out of range for a job of {} processes",
                        self.size
                    )
                };
                return self.protocol_error(client, &req.encode(), &why);
            };
            self.acked.insert(id);
            self.clients.entry(client).or_default().pmiid = Some(id);
        }
        if let Request::Spawn(cmd) = &req {
            let total = cmd.totspawns.max(1) as usize;
            if total > self.limits.spawns_max {
                let limit = format!(
                    "a spawn of {} commands (at most {})",
                    cmd.totspawns, self.limits.spawns_max
                );
                return self.limit_exceeded(client, limit, Vec::new());
            }
        }
        let state = self.clients.entry(client).or_default();
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
                kvsname_max: self.limits.maxes.kvsname_max,
                keylen_max: self.limits.maxes.keylen_max,
                vallen_max: self.limits.maxes.vallen_max,
            }),
            Request::GetAppnum => one(Response::Appnum {
                appnum: group.map_or(self.appnum, |g| {
                    let g = &self.groups[g];
                    g.appnums[client - g.first]
                }),
            }),
            Request::GetMyKvsname => one(Response::MyKvsname {
                kvsname: group
                    .map_or_else(|| self.kvsname.clone(), |g| self.groups[g].kvsname.clone()),
            }),
            Request::GetUniverseSize => one(Response::UniverseSize {
                size: self.universe_size_now(),
            }),
            Request::Put {
                kvsname,
                key,
                value,
            } => {
                let maxes = self.limits.maxes;
                let refuse = |msg: &str| {
                    one(Response::PutResult {
                        rc: -1,
                        msg: Some(msg.into()),
                    })
                };
                if key.len() > maxes.keylen_max as usize {
                    let limit = format!(
                        "a key of {} bytes (at most {})",
                        key.len(),
                        maxes.keylen_max
                    );
                    return self.limit_exceeded(client, limit, refuse("key_too_long"));
                }
                if value.len() > maxes.vallen_max as usize {
                    let limit = format!(
                        "a value of {} bytes for key {key:?} (at most {})",
                        value.len(),
                        maxes.vallen_max
                    );
                    return self.limit_exceeded(client, limit, refuse("value_too_long"));
                }
                let Some(space) = self.kvs.get(&kvsname) else {
                    return refuse("unknown_kvsname");
                };
                let old = space.get(&key).map_or(0, |v| key.len() + v.len());
                let after = self.store_bytes - old + key.len() + value.len();
                if after > self.limits.store_max {
                    let limit = format!(
                        "the key-value store's size: {after} bytes with key {key:?} (at most {})",
                        self.limits.store_max
                    );
                    return self.limit_exceeded(client, limit, refuse("store_full"));
                }
                if kvsname != self.own_kvsname(client) && self.group_of(client).is_some() {
                    let keys = self.put_elsewhere.entry(client).or_default();
                    if !keys.iter().any(|(s, k)| *s == kvsname && *k == key) {
                        keys.push((kvsname.clone(), key.clone()));
                    }
                }
                self.kvs_put(&kvsname, &key, &value);
                one(Response::PutResult {
                    rc: 0,
                    msg: Some("success".into()),
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
                let entered = match group {
                    Some(i) => {
                        let g = &mut self.groups[i];
                        enter_barrier(&mut g.barrier, g.size, client)
                    }
                    None => enter_barrier(&mut self.barrier, self.size, client),
                };
                entered.unwrap_or_else(|| {
                    self.protocol_error(client, "cmd=barrier_in", &"entered the barrier twice")
                })
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
            Request::PublishName { .. }
            | Request::UnpublishName { .. }
            | Request::LookupName { .. } => {
                if self.forward_names {
                    self.events.push_back(Event::Name {
                        client,
                        request: req,
                    });
                    return Vec::new();
                }
                self.names.handle(&req).map(one).unwrap_or_default()
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

    fn limit_exceeded(
        &mut self,
        client: usize,
        limit: String,
        answer: Vec<(usize, Response)>,
    ) -> Vec<(usize, Response)> {
        self.events
            .push_back(Event::LimitExceeded { client, limit });
        answer
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

/// Client `client` enters a barrier of `size` members (the job's, or a spawned group's): the
/// releases when it is the last to come, none before; None when it is in it already.
fn enter_barrier(
    set: &mut BTreeSet<usize>,
    size: usize,
    client: usize,
) -> Option<Vec<(usize, Response)>> {
    if !set.insert(client) {
        return None;
    }
    if set.len() < size {
        return Some(Vec::new());
    }
    Some(
        std::mem::take(set)
            .into_iter()
            .map(|c| (c, Response::BarrierOut))
            .collect(),
    )
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
        assert!(matches!(
            s.poll_event(),
            Some(Event::LimitExceeded { client: 0, .. })
        ));
        assert_eq!(s.kvs_get("k", "a"), None);
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
        let out = ask(&mut s, 2, "cmd=initack pmiid=3\n");
        let text: String = out.iter().map(|(_, t)| t.as_str()).collect();
        assert!(out.iter().all(|(c, _)| *c == 2));
        assert_eq!(
            text,
            "cmd=initack\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n"
        );
    }

    #[test]
    fn initack_needs_a_valid_unused_pmiid() {
        let mut s = Server::new(2, "k", 0, 2);
        for bad in ["cmd=initack pmiid=2\n", "cmd=initack pmiid=-1\n"] {
            assert!(ask(&mut s, 0, bad).is_empty(), "{bad}");
            match s.poll_event() {
                Some(Event::ProtocolError { error, .. }) => {
                    assert!(error.contains("out of range"), "{error}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert_eq!(ask(&mut s, 0, "cmd=initack pmiid=1\n").len(), 4);
        assert!(ask(&mut s, 1, "cmd=initack pmiid=1\n").is_empty());
        match s.poll_event() {
            Some(Event::ProtocolError {
                client: 1, error, ..
            }) => {
                assert!(error.contains("already claimed"), "{error}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ask(&mut s, 1, "cmd=initack pmiid=0\n").len(), 4);
    }

    #[test]
    fn a_connection_claims_one_rank_only() {
        let mut s = Server::new(3, "k", 0, 3);
        assert_eq!(ask(&mut s, 0, "cmd=initack pmiid=1\n").len(), 4);
        assert!(ask(&mut s, 0, "cmd=initack pmiid=2\n").is_empty());
        match s.poll_event() {
            Some(Event::ProtocolError {
                client: 0, error, ..
            }) => assert!(error.contains("after claiming rank 1"), "{error}"),
            other => panic!("{other:?}"),
        }
        // Rank 2 is still free for the connection that is rank 2.
        assert_eq!(ask(&mut s, 2, "cmd=initack pmiid=2\n").len(), 4);
    }

    #[test]
    fn client_ids_are_range_checked() {
        let mut s = Server::new(2, "k", 0, 2);
        assert!(ask(&mut s, 2, "cmd=barrier_in\n").is_empty());
        assert!(ask(&mut s, usize::MAX, "cmd=get_maxes\n").is_empty());
        assert!(s.handle_request(5, Request::BarrierIn).is_empty());
        for _ in 0..3 {
            match s.poll_event() {
                Some(Event::ProtocolError { error, .. }) => {
                    assert!(error.contains("out of range"), "{error}")
                }
                other => panic!("{other:?}"),
            }
        }
        // The barrier did not count the strangers.
        assert!(ask(&mut s, 0, "cmd=barrier_in\n").is_empty());
        assert_eq!(ask(&mut s, 1, "cmd=barrier_in\n").len(), 2);
    }

    #[test]
    fn the_store_has_a_size_limit() {
        let mut s = Server::new(2, "k", 0, 2);
        let base = s.store_bytes();
        assert_eq!(base, "PMI_process_mapping(vector,(0,1,2))".len());
        s.set_limits(Limits {
            store_max: base + 100,
            ..Limits::default()
        });
        let v = "v".repeat(40);
        assert_eq!(
            one(&mut s, 1, &format!("cmd=put kvsname=k key=a value={v}\n")),
            "cmd=put_result rc=0 msg=success\n"
        );
        assert_eq!(
            one(&mut s, 1, &format!("cmd=put kvsname=k key=b value={v}\n")),
            "cmd=put_result rc=0 msg=success\n"
        );
        assert_eq!(s.store_bytes(), base + 82);
        // An overwrite counts the difference only.
        assert_eq!(
            one(&mut s, 1, &format!("cmd=put kvsname=k key=b value={v}xx\n")),
            "cmd=put_result rc=0 msg=success\n"
        );
        assert_eq!(s.store_bytes(), base + 84);
        assert_eq!(s.poll_event(), None);
        assert_eq!(
            one(&mut s, 1, &format!("cmd=put kvsname=k key=c value={v}\n")),
            "cmd=put_result rc=-1 msg=store_full\n"
        );
        match s.poll_event() {
            Some(Event::LimitExceeded { client: 1, limit }) => {
                assert!(
                    limit.contains("store") && limit.contains("\"c\""),
                    "{limit}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.kvs_get("k", "c"), None);
        assert_eq!(s.store_bytes(), base + 84);
        // A key longer than announced.
        let key = "k".repeat(65);
        assert_eq!(
            one(&mut s, 0, &format!("cmd=put kvsname=k key={key} value=1\n")),
            "cmd=put_result rc=-1 msg=key_too_long\n"
        );
        assert!(matches!(
            s.poll_event(),
            Some(Event::LimitExceeded { client: 0, .. })
        ));
    }

    #[test]
    fn a_retired_spawned_job_leaves_the_store_as_it_was() {
        let mut s = Server::new(1, "k", 0, 8);
        one(&mut s, 0, "cmd=put kvsname=k key=mine value=1\n");
        let before = s.store_bytes();
        for round in 0..3 {
            let first = s.add_group("k_s", vec![0, 0]);
            assert_eq!(first, 1 + 2 * round);
            s.kvs_put("k_s", "parent", "p");
            // Each child puts its card into its own space and into the parents'.
            for c in first..first + 2 {
                one(
                    &mut s,
                    c,
                    &format!("cmd=put kvsname=k_s key=own{c} value=x\n"),
                );
                one(
                    &mut s,
                    c,
                    &format!("cmd=put kvsname=k key=card{c} value=yy\n"),
                );
                one(
                    &mut s,
                    c,
                    &format!("cmd=put kvsname=k key=card{c} value=zz\n"),
                );
            }
            assert!(s.store_bytes() > before);
            s.retire_group(first);
            assert_eq!(s.store_bytes(), before, "round {round}");
            assert_eq!(s.kvs_get("k", "mine"), Some("1"));
            assert_eq!(s.kvs_get("k", &format!("card{first}")), None);
            assert_eq!(s.kvs_get("k_s", "parent"), None);
        }
        // Retiring an unknown or already retired job changes nothing.
        s.retire_group(1);
        s.retire_group(99);
        assert_eq!(s.store_bytes(), before);
        // The retired jobs at the end give their numbers back, the first job's stay.
        let first = s.add_group("k_s4", vec![0]);
        assert_eq!(first, 7);
        assert_eq!(s.drop_last_group(), None, "not retired yet");
        s.retire_group(first);
        assert_eq!(s.drop_last_group(), Some(7));
        assert_eq!(s.drop_last_group(), Some(5));
        assert_eq!(s.drop_last_group(), Some(3));
        assert_eq!(s.drop_last_group(), Some(1));
        assert_eq!(s.drop_last_group(), None);
        assert_eq!(s.clients(), 1);
        assert_eq!(s.add_group("k_s5", vec![0]), 1);
        assert_eq!(
            one(&mut s, 1, "cmd=get_my_kvsname\n"),
            "cmd=my_kvsname kvsname=k_s5\n"
        );
    }

    #[test]
    fn spawned_jobs_have_their_own_kvs_barrier_and_appnums() {
        let mut s = Server::new(2, "k", 0, 8);
        assert_eq!(s.clients(), 2);
        assert_eq!(s.add_group("k_s1", vec![0, 1, 1]), 2);
        assert_eq!(s.clients(), 5);
        s.kvs_put("k_s1", "parent", "p");
        assert_eq!(
            one(&mut s, 3, "cmd=get_my_kvsname\n"),
            "cmd=my_kvsname kvsname=k_s1\n"
        );
        assert_eq!(
            one(&mut s, 1, "cmd=get_my_kvsname\n"),
            "cmd=my_kvsname kvsname=k\n"
        );
        assert_eq!(one(&mut s, 2, "cmd=get_appnum\n"), "cmd=appnum appnum=0\n");
        assert_eq!(one(&mut s, 4, "cmd=get_appnum\n"), "cmd=appnum appnum=1\n");
        assert_eq!(
            one(&mut s, 4, "cmd=get kvsname=k_s1 key=parent\n"),
            "cmd=get_result rc=0 msg=success value=p\n"
        );
        // The spawned job's barrier does not wait for the first job, nor releases it.
        assert!(ask(&mut s, 0, "cmd=barrier_in\n").is_empty());
        assert!(ask(&mut s, 2, "cmd=barrier_in\n").is_empty());
        assert!(ask(&mut s, 3, "cmd=barrier_in\n").is_empty());
        let out = ask(&mut s, 4, "cmd=barrier_in\n");
        let mut to: Vec<usize> = out.iter().map(|(c, _)| *c).collect();
        to.sort();
        assert_eq!(to, vec![2, 3, 4]);
        assert_eq!(ask(&mut s, 1, "cmd=barrier_in\n").len(), 2);
        // Clients past the last job are refused.
        assert!(ask(&mut s, 5, "cmd=get_appnum\n").is_empty());
        assert!(matches!(
            s.poll_event(),
            Some(Event::ProtocolError { client: 5, .. })
        ));
    }

    #[test]
    fn the_universe_is_never_smaller_than_the_processes_running() {
        let mut s = Server::new(2, "k", 0, 4);
        let universe = |s: &mut Server| one(s, 0, "cmd=get_universe_size\n");
        let g1 = s.add_group("k_s1", vec![0; 2]);
        assert_eq!(universe(&mut s), "cmd=universe_size size=4\n");
        let g2 = s.add_group("k_s2", vec![0; 3]);
        assert_eq!(universe(&mut s), "cmd=universe_size size=7\n");
        assert_eq!(one(&mut s, g2, "cmd=get_universe_size\n"), universe(&mut s));
        s.retire_group(g1);
        assert_eq!(universe(&mut s), "cmd=universe_size size=5\n");
        s.retire_group(g2);
        assert_eq!(universe(&mut s), "cmd=universe_size size=4\n");
    }

    #[test]
    fn a_spawn_of_too_many_commands_is_refused() {
        let mut s = Server::new(1, "k", 0, 1);
        let cmd = "mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=100000\nspawnssofar=1\n\
                   argcnt=0\npreput_num=0\ninfo_num=0\nendcmd\n";
        assert!(ask(&mut s, 0, cmd).is_empty());
        assert!(matches!(
            s.poll_event(),
            Some(Event::LimitExceeded { client: 0, .. })
        ));
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
    fn names_are_published_looked_up_and_withdrawn() {
        let mut s = Server::new(2, "kvs_1", 0, 2);
        assert_eq!(
            one(&mut s, 0, "cmd=lookup_name service=ocean\n"),
            "cmd=lookup_result rc=1 info=fail msg=service_not_found\n"
        );
        assert_eq!(
            one(&mut s, 0, "cmd=publish_name service=ocean port=tcp:1\n"),
            "cmd=publish_result rc=0 info=ok msg=success\n"
        );
        assert!(one(&mut s, 1, "cmd=publish_name service=ocean port=tcp:2\n").contains("rc=1"));
        assert_eq!(
            one(&mut s, 1, "cmd=lookup_name service=ocean\n"),
            "cmd=lookup_result rc=0 info=ok msg=success port=tcp:1\n"
        );
        assert!(one(&mut s, 1, "cmd=unpublish_name service=ocean\n").contains("rc=0"));
        assert!(one(&mut s, 1, "cmd=unpublish_name service=ocean\n").contains("rc=1"));
        s.forward_names(true);
        assert!(s.handle(0, "cmd=lookup_name service=x\n").is_empty());
        assert!(matches!(
            s.poll_event(),
            Some(Event::Name { client: 0, .. })
        ));
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
