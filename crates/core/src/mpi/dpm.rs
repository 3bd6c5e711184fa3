//! Dynamic processes (MPI-4.0 chapter 11): MPI_Comm_spawn and MPI_Comm_spawn_multiple, and
//! the parent intercommunicator of a spawned job (MPI_Comm_get_parent).
//!
//! # Spawn
//!
//! The request travels as the PMI-1 `spawn` command (one per command of a
//! `MPI_Comm_spawn_multiple`) from the root to the process manager, our mpirun, which starts
//! the children as a job of their own (see the launcher's `Job::spawn_job`). Processes started
//! by one mpirun are numbered in one space: a spawned job's ranks get the global process ids
//! after every process started before them (`PROTEAN_GPID_BASE`), so a gpid names the same
//! process in the parents and in the children, and the two sides can build the
//! intercommunicator from their groups' gpids with the machinery of
//! MPI_Intercomm_create_from_groups (`cm::op_intercomm_from_groups`).
//!
//! The two jobs learn about each other through the process manager's key-value store:
//! 1. every parent in `comm` makes sure it has a TCP listener ([`Engine::dyn_card`]) and sends
//!    its business card to the root;
//! 2. the root spawns with pre-put values in the children's KVS: the job key (the children
//!    adopt it, so TCP connections between the jobs authenticate as within one job: see
//!    `transport::tcp::hello`), the parents' KVS name, a tag naming this spawn, the parents'
//!    gpids and cards, the root's rank, and the first gpid the children may take (after every
//!    gpid in a parent's table, so not an alias a parent gave to a process of an independent
//!    job: mpirun numbers the children from the larger of that and its own count);
//! 3. each child, in MPI_Init, adds the parents to its process table (TCP routes), and puts its
//!    own gpid and card into the parents' KVS under the spawn's tag;
//! 4. the root reads every child's card and hands the list to the other parents, which add
//!    the children to their tables; after a barrier over `comm` (every parent can now accept
//!    the children's connections) the root puts the spawn's `go` key;
//! 5. the children wait for `go`, then both sides create the intercommunicator (leaders: the
//!    root and child 0; string tag: the spawn's tag).
//!
//! A spawn the process manager refuses (a program missing or not executable, a bad info
//! value) starts nothing (mpirun checks every command first) and fails on every parent with
//! MPI_ERR_SPAWN and the process manager's reason; every errcode is MPI_ERR_SPAWN.
//!
//! Processes of the other job are reached over TCP (loopback on one host), whatever the
//! transports among the processes of each job.
//!
//! # Introductions
//!
//! A process knows the processes of its own job, and those of the jobs it spawned or was
//! spawned by together with them. MPI_Intercomm_create over a link between jobs can bring
//! together processes that never met (rank 0 spawns alone through MPI_COMM_SELF, then
//! MPI_COMM_WORLD and the children make an intercommunicator): [`introduce`] first hands
//! every member's card to the other side.

use crate::error::{ErrorClass, MpiError, Result};
use crate::ids::CommId;
use crate::mpi::cm;
use crate::mpi::engine::Engine;
use crate::mpi::global::{self, with};
use crate::runtime::bootstrap::{hex, pmi_err, unhex, Card, PARENT_KEY};
use crate::transport::{Gpid, Route, Transport};

/// Pre-put keys of the children's KVS (besides [`PARENT_KEY`]).
const KEY_KVS: &str = "protean-dpm-kvs";
const KEY_TAG: &str = "protean-dpm-tag";
const KEY_NPARENTS: &str = "protean-dpm-np";
const KEY_LEADER: &str = "protean-dpm-leader";
/// The first gpid the children may have: after every gpid in a parent's table, aliases of an
/// independent job's processes included (our mpirun reads it: `launcher::job::GPID_MIN_KEY`).
const KEY_GPID_MIN: &str = "protean-dpm-gpid-min";

/// One command of a spawn (one of MPI_Comm_spawn_multiple's).
#[derive(Debug, Clone)]
pub struct Command {
    pub program: String,
    pub args: Vec<String>,
    pub maxprocs: i32,
    pub info: Vec<(String, String)>,
}

fn spawn_err(why: impl Into<String>) -> MpiError {
    MpiError::new(ErrorClass::Spawn, why.into())
}

/// A process of another job: its gpid, card (with a TCP address) and the descriptor of its
/// shared-memory segment (-1: none), which processes on its host map through /proc.
#[derive(Debug, Clone)]
pub struct Remote {
    pub gpid: Gpid,
    pub card: Card,
    pub shm_fd: i32,
}

/// `gpid:fd:card`, the form in which processes of another job are described.
pub(crate) fn peer_entry(r: &Remote) -> String {
    format!("{}:{}:{}", r.gpid, r.shm_fd, r.card.encode())
}

pub(crate) fn parse_peer(s: &str) -> Result<Remote> {
    let bad = || spawn_err(format!("a malformed process entry from the other job: {s}"));
    let mut it = s.splitn(3, ':');
    let g = it.next().and_then(|g| g.parse().ok()).ok_or_else(bad)?;
    let fd = it.next().and_then(|f| f.parse().ok()).ok_or_else(bad)?;
    let card = it.next().and_then(Card::decode).ok_or_else(bad)?;
    Ok(Remote {
        gpid: g,
        card,
        shm_fd: fd,
    })
}

/// An independent job (another mpirun's) we are connected with. Both jobs number their
/// processes from 0, so each side gives the other's processes *aliases*: gpids after every
/// gpid its group knew (`alias..alias + theirs.len()`, `theirs[i]` being what that job calls
/// alias `alias + i`). `ours` holds, for our processes in the connection, the alias the other
/// job gave each (theirs, ours). Frames carry no gpid; what crosses between the jobs in their
/// own numbering is the TCP hello (`transport::tcp`, which names each side as the other
/// numbers it) and the groups that communicator-creating agreements send between leaders
/// ([`Engine::group_from_peer`]).
#[derive(Debug, Clone)]
pub struct Foreign {
    pub alias: Gpid,
    pub theirs: Vec<Gpid>,
    pub ours: Vec<(Gpid, Gpid)>,
}

impl Foreign {
    fn holds(&self, g: Gpid) -> bool {
        g >= self.alias && (g.since(self.alias) as usize) < self.theirs.len()
    }
}

impl Engine {
    /// The first gpid after every process this one has in its table (reachable now): where
    /// the aliases of an independent job's processes may start.
    pub(crate) fn next_free_gpid(&self) -> Gpid {
        let r = self.net.routes();
        let last = r
            .iter()
            .rposition(|x| *x != Route::Unreachable)
            .map_or(0, |i| i + 1);
        let own = self.base.offset(self.size).idx();
        Gpid::from_idx(last.max(own))
    }

    /// The processes of an independent job join our table under their aliases (`peers`'
    /// gpids are ours for them): TCP only, authenticated with `key`, the pair of jobs' key;
    /// `pair` records the numbering.
    /// The accepting side connects to every process of the independent job at once (after
    /// both sides added each other): each pair of processes then has a connection whose end
    /// tells either side that the other died, also while nothing is sent to it (a mpirun
    /// ends its whole job when one of its processes dies, so every connection to that job
    /// ends). Without it a receive from a dead job that was never sent to would wait for ever.
    pub(crate) fn connect_foreign(&mut self, peers: &[Gpid]) -> Result<()> {
        for &g in peers {
            self.net
                .connect_now(g)
                .map_err(|e| MpiError::new(ErrorClass::Port, e))?;
        }
        Ok(())
    }

    /// The processes of an independent job join our table under their aliases (`peers`'
    /// gpids are ours for them): TCP only, authenticated with `key`, the pair of jobs' key;
    /// `pair` records the numbering.
    pub(crate) fn add_foreign(
        &mut self,
        peers: &[Remote],
        key: [u8; 32],
        me_there: Gpid,
        pair: Foreign,
    ) -> Result<()> {
        self.dyn_card()?;
        for r in peers {
            if self.net.route(r.gpid) != Route::Unreachable {
                return Err(MpiError::new(
                    ErrorClass::Intern,
                    format!(
                        "alias {} for a process of an independent job is in use",
                        r.gpid
                    ),
                ));
            }
            self.net
                .set_foreign(r.gpid, key, me_there)
                .map_err(|e| MpiError::new(ErrorClass::Port, e))?;
        }
        let tcp_only: Vec<Remote> = peers
            .iter()
            .map(|r| Remote {
                shm_fd: -1,
                ..r.clone()
            })
            .collect();
        self.add_peers(&tcp_only)?;
        self.foreign.push(pair);
        Ok(())
    }

    /// A group that the leader `peer` of the other side sent in a communicator-creating
    /// agreement, in our numbering: unchanged from a process of our mpirun; translated
    /// through the aliases when `peer` belongs to an independent job.
    pub(crate) fn group_from_peer(&self, peer: Gpid, group: Vec<Gpid>) -> Result<Vec<Gpid>> {
        let Some(f) = self.foreign.iter().find(|f| f.holds(peer)) else {
            return Ok(group);
        };
        group
            .into_iter()
            .map(|g| {
                if let Some(i) = f.theirs.iter().position(|&t| t == g) {
                    Ok(f.alias.offset(i as u32))
                } else if let Some(&(_, o)) = f.ours.iter().find(|(a, _)| *a == g) {
                    Ok(o)
                } else {
                    Err(MpiError::new(
                        ErrorClass::Group,
                        format!(
                            "the independent job's leader named its process {g}, which is \
                             neither of its processes in this connection nor one of ours \
                             (groups spanning a third job are not supported)"
                        ),
                    ))
                }
            })
            .collect()
    }

    /// The key for connections with other jobs: the job's, or one drawn now for a process
    /// alone in its job.
    pub(crate) fn dyn_key(&mut self) -> Result<[u8; 32]> {
        if let Some(k) = self.key {
            return Ok(k);
        }
        if self.pair_keys {
            return Err(spawn_err(
                "dynamic processes share the job's key with the other job, and this job uses pair keys (job_keys=pairs, the default under a process manager other than Protean's mpirun): start the job with Protean's mpirun",
            ));
        }
        let mut k = [0u8; 32];
        getrandom::getrandom(&mut k).map_err(|e| {
            MpiError::new(
                ErrorClass::Other,
                format!("cannot draw a key from the kernel: {e}"),
            )
        })?;
        self.key = Some(k);
        Ok(k)
    }

    /// How processes of another job reach us: our card with a TCP address (the listener is
    /// opened now if the job's transports did not need one) and our shared-memory segment
    /// (made now if need be; -1 where shared memory is not allowed).
    pub fn dyn_card(&mut self) -> Result<Remote> {
        let key = self.dyn_key()?;
        let n = self.pml_peers();
        let addr = self.net.ensure_tcp(&self.cfg, key, n)?;
        let shm_fd = self.net.ensure_shm(&self.cfg, &self.jobid, n).unwrap_or(-1);
        let card = Card {
            host: self.hosts[self.me.idx()].clone(),
            node: crate::runtime::bootstrap::machine_id().into(),
            pid: std::process::id(),
            tcp: Some(addr),
            // The placement of other jobs' processes plays no part in ours.
            cpus: vec![0],
            udp: Vec::new(),
            public: None,
        };
        Ok(Remote {
            gpid: self.me,
            card,
            shm_fd,
        })
    }

    fn pml_peers(&self) -> usize {
        self.net.routes().len()
    }

    /// Processes of another job join our table: by shared memory those on our host when both
    /// sides offer a segment (both decide alike: routes stay symmetric), by TCP the others.
    pub fn add_peers(&mut self, peers: &[Remote]) -> Result<()> {
        let mut addrs = Vec::new();
        let mine = self.dyn_card()?;
        for r in peers {
            let g = r.gpid;
            if g == self.me {
                continue;
            }
            // mpirun numbers a spawned job from the lowest ids no running process holds, so a
            // number we still know can come back on a new process when the old one ended
            // without our disconnecting from it (a communicator freed, not disconnected): the
            // old one's state goes first.
            if self.net.route(g) != Route::Unreachable && self.replaced(r) {
                self.forget_peer(g);
            }
            if self.foreign.iter().any(|f| f.holds(g)) {
                return Err(spawn_err(format!(
                    "process {g} of the other job has the number this process gave to a process \
                     of an independent job (connected by MPI_Comm_connect/accept): the aliases \
                     were chosen without knowing that process of this mpirun, which was not in \
                     the connecting group; disconnect from the independent job first"
                )));
            }
            let a = r.card.tcp.ok_or_else(|| {
                spawn_err(format!("process {g} of the other job has no TCP address"))
            })?;
            if r.card.host == mine.card.host && r.shm_fd >= 0 && mine.shm_fd >= 0 {
                self.net
                    .add_shm_peer(g, r.card.pid, r.shm_fd)
                    .map_err(spawn_err)?;
            }
            addrs.push((g, a));
        }
        self.net.add_peers(&addrs);
        let routes: Vec<Route> = self.net.routes().to_vec();
        self.pml.add_peers(&routes, &self.net);
        self.chan.grow(routes.len() as u32);
        // Those on shared memory compete for our fast channels like our own job's peers (a
        // process alone on its host made its channels just now, with its segment).
        let slots = self.net.channel_slots_of(Route::Shm);
        if slots > 0 {
            self.chan
                .configure(crate::mpi::engine::chan_settings(&self.cfg, slots));
            self.chan.add_candidates(
                peers
                    .iter()
                    .map(|r| r.gpid)
                    .filter(|&g| self.net.route(g) == Route::Shm),
            );
        }
        if let Some(c) = self.conn.as_mut() {
            c.grow(routes.len() as u32);
        }
        if self.hosts.len() < routes.len() {
            self.hosts.resize(routes.len(), "".into());
        }
        // The other job's processes on this machine load its CPUs too: the choices made from
        // the oversubscription (collective algorithms, waiting) count them, as the other job
        // does ours, so that both sides of a communicator choose alike.
        let node = crate::runtime::bootstrap::machine_id();
        if self.dyn_pids.len() < routes.len() {
            self.dyn_pids.resize(routes.len(), 0);
        }
        for r in peers {
            let g = r.gpid.idx();
            let new = self.hosts[g].is_empty();
            self.hosts[g] = r.card.host.clone();
            if !(self.base..self.base.offset(self.size)).contains(&r.gpid) {
                self.dyn_pids[g] = r.card.pid;
            }
            if new && *r.card.node == *node && r.gpid != self.me {
                self.node_procs += 1;
                if self.dyn_nodes.len() <= g {
                    self.dyn_nodes.resize(g + 1, false);
                }
                self.dyn_nodes[g] = true;
            }
        }
        Ok(())
    }

    /// Does communicator `id` include processes of another job?
    pub fn reaches_other_jobs(&self, id: CommId) -> bool {
        let own = self.base..self.base.offset(self.size);
        self.comms
            .get(id.idx())
            .and_then(Option::as_ref)
            .is_some_and(|c| {
                c.group
                    .iter()
                    .chain(c.remote.iter().flatten())
                    .any(|g| !own.contains(g))
            })
    }

    /// Processes of another job added for a communicator still being made (a spawn,
    /// connect, accept or join in flight) keep their places in the table until it is made,
    /// though no communicator names them yet: another thread may disconnect meanwhile
    /// ([`Engine::drop_unused_peers`]). Call it in the engine call that added them; the
    /// guard lets them go when it is dropped, whichever way the caller leaves.
    pub(crate) fn hold(&mut self, gpids: Vec<Gpid>) -> Held {
        self.dyn_held.extend_from_slice(&gpids);
        Held(gpids)
    }

    fn release(&mut self, gpids: &[Gpid]) {
        for &g in gpids {
            if let Some(i) = self.dyn_held.iter().position(|&h| h == g) {
                self.dyn_held.swap_remove(i);
            }
        }
    }

    /// After MPI_Comm_disconnect: the processes of other jobs that no communicator of ours
    /// names any more, and no communicator being made holds ([`Engine::hold`]), leave
    /// the table (segments unmapped, connections closed), so that spawning and disconnecting
    /// in a loop leaves nothing behind.
    pub fn drop_unused_peers(&mut self) {
        let mut used = vec![false; self.net.routes().len()];
        for g in &self.dyn_held {
            if let Some(u) = used.get_mut(g.idx()) {
                *u = true;
            }
        }
        for c in self.comms.iter().flatten() {
            for g in c.group.iter().chain(c.remote.iter().flatten()) {
                if let Some(u) = used.get_mut(g.idx()) {
                    *u = true;
                }
            }
        }
        let own = self.base..self.base.offset(self.size);
        let unused: Vec<Gpid> = (used.into_iter().enumerate())
            .map(|(g, u)| (Gpid::from_idx(g), u))
            .filter(|&(g, u)| !u && !own.contains(&g) && self.net.route(g) != Route::Unreachable)
            .map(|(g, _)| g)
            .collect();
        // What we queued for them goes out first: the bytes of eager sends that completed
        // (on a communicator freed since) can still wait in a connection's queue, and closing
        // it would lose them while the peer waits for them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while unused
            .iter()
            .any(|&g| self.net.queued(g) > 0 && self.pml.peer_lost(g).is_none())
            && std::time::Instant::now() < deadline
        {
            self.progress();
            std::thread::yield_now();
        }
        for g in unused {
            self.forget_peer(g);
        }
        let net = &self.net;
        self.foreign.retain(|f| {
            (0..f.theirs.len()).any(|i| net.route(f.alias.offset(i as u32)) != Route::Unreachable)
        });
    }

    /// Does `r` stand for a process we know, under its number? False for a number not in
    /// the table, and for one whose process was replaced (see [`Engine::replaced`]).
    pub(crate) fn knows(&self, r: &Remote) -> bool {
        self.net.route(r.gpid) != Route::Unreachable && !self.replaced(r)
    }

    /// Is `r` a new process under the number of another job's process we knew (another pid
    /// or host)? mpirun gives the numbers of ended processes to new ones.
    fn replaced(&self, r: &Remote) -> bool {
        let g = r.gpid.idx();
        let known = self.dyn_pids.get(g).copied().unwrap_or(0);
        known != 0
            && (known != r.card.pid || self.hosts.get(g).map(|h| &**h) != Some(&*r.card.host))
    }

    /// Process `g` of another job leaves the table: segment unmapped, connections closed,
    /// protocol state and host forgotten, unreachable until a process with its number joins.
    fn forget_peer(&mut self, gp: Gpid) {
        let g = gp.idx();
        self.chan.remove_candidate(gp);
        self.net.drop_peer(gp);
        self.pml.drop_peer(gp);
        if !self.hosts[g].is_empty() {
            self.hosts[g] = "".into();
        }
        if self.node_procs > 1 && self.dyn_nodes.get(g).copied() == Some(true) {
            self.node_procs -= 1;
        }
        if let Some(n) = self.dyn_nodes.get_mut(g) {
            *n = false;
        }
        if let Some(p) = self.dyn_pids.get_mut(g) {
            *p = 0;
        }
    }

    fn pmi_mut(&mut self) -> Result<&mut protean_pmi::PmiClient> {
        self.pmi.as_mut().ok_or_else(|| {
            spawn_err("dynamic processes need a process manager: start the program with mpirun")
        })
    }
}

/// The key of the parents' space under which their root lets the children of its spawn
/// `tag` go: one key per root, so that spawning in a loop does not grow the space. Its value
/// lists the tags of the root's spawns whose children may still be waiting ([`set_go`]).
fn go_key(tag: &str) -> String {
    let root = tag.split_once('x').map_or(tag, |(me, _)| me);
    format!("dpm-{root}-go")
}

/// Processes of another job held in the table while a communicator with them is made
/// ([`Engine::hold`]): let go when this is dropped. Drop it outside the engine lock.
#[must_use = "the processes are let go as soon as the guard is dropped"]
pub(crate) struct Held(Vec<Gpid>);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = with(|e| e.release(&self.0));
    }
}

/// Let the children of this root's spawn `tag` go (`on`), or take the tag back once they
/// have joined. Threads of one process may spawn at the same time (MPI_THREAD_MULTIPLE;
/// mpi4py.futures starts pools from several threads), and a key holding one tag would let
/// a later spawn overwrite an earlier one's word before that one's children read it: they
/// would wait forever. So the value is every tag in flight, comma-separated ("-" for none),
/// kept in [`Engine::go_tags`] and written whole under the engine's lock; it is as long as
/// the spawns in flight, not as their number.
fn set_go(tag: &str, on: bool) -> Result<()> {
    with(|e| -> Result<()> {
        if on {
            e.go_tags.push(tag.to_string());
        } else {
            e.go_tags.retain(|t| t != tag);
        }
        let value = if e.go_tags.is_empty() {
            "-".to_string()
        } else {
            e.go_tags.join(",")
        };
        let p = e.pmi_mut()?;
        let kvs = p.kvsname().to_string();
        p.put_to(&kvs, &go_key(tag), &value).map_err(pmi_err)
    })?
}

/// Does a value of a go key ([`set_go`]) let the children of spawn `tag` go?
fn lets_go(value: &str, tag: &str) -> bool {
    value.split(',').any(|t| t == tag)
}

/// Polls the process manager's key `key` of space `kvs` until it is there, keeping our
/// progress going meanwhile.
fn wait_key(kvs: &str, key: &str) -> Result<String> {
    wait_for(kvs, key, |_| true)
}

/// Polls key `key` of space `kvs` until it has a value that `accept` takes, keeping our
/// progress going meanwhile.
fn wait_for(kvs: &str, key: &str, accept: impl Fn(&str) -> bool) -> Result<String> {
    let mut pause = std::time::Duration::from_micros(50);
    loop {
        let v = with(|e| -> Result<Option<String>> {
            e.progress();
            e.pmi_mut()?.get_from(kvs, key).map_err(pmi_err)
        })??;
        if let Some(v) = v.filter(|v| accept(v)) {
            return Ok(v);
        }
        global::idle();
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(2));
    }
}

/// Where a collective dynamic-process call (spawn, accept, connect, join) stands in its
/// communicator, checked first by each: an intracommunicator, and a root within it.
pub(crate) struct Caller {
    pub me: usize,
    pub size: usize,
    pub group: Vec<Gpid>,
    pub errhandler: u32,
    pub root: usize,
}

impl Caller {
    /// `inter`: the error when `comm` is an intercommunicator.
    pub fn of(comm: CommId, root: i32, inter: &str) -> Result<Caller> {
        let (rank, size, group, errhandler) = with(|e| -> Result<_> {
            let c = e.live_comm(comm)?;
            if c.is_inter() {
                return crate::err!(Comm, "{inter}");
            }
            Ok((c.rank, c.size(), c.group.clone(), c.errhandler))
        })??;
        if root < 0 || root as usize >= size {
            return crate::err!(
                Root,
                "root {root} is out of range for a communicator of size {size}"
            );
        }
        Ok(Caller {
            me: rank as usize,
            size,
            group,
            errhandler,
            root: root as usize,
        })
    }
}

/// MPI_Comm_spawn / MPI_Comm_spawn_multiple over intracommunicator `comm`: `commands` matter
/// at `root` only. The parent intercommunicator's id, and how many processes started.
pub fn spawn(comm: CommId, root: i32, commands: &[Command]) -> Result<(CommId, usize)> {
    let Caller {
        me,
        size,
        group,
        errhandler,
        root,
    } = Caller::of(comm, root, "spawning needs an intracommunicator")?;
    // 1. Every parent's card to the root. A process that cannot take part (no process
    // manager, no TCP) still answers, so that the others fail with it rather than wait.
    let mine = with(|e| -> Result<String> {
        e.pmi_mut()?;
        let entry = peer_entry(&e.dyn_card()?);
        Ok(format!("{}\n{entry}", e.next_free_gpid()))
    })?;
    let mut data = vec![Vec::new(); size];
    data[root] = match &mine {
        Ok(s) => format!("O{s}").into_bytes(),
        Err(err) => format!("E{}", err.msg).into_bytes(),
    };
    let cards = cm::exchange_all(comm, data)?;
    // 2-4. The root spawns and collects the children's cards; the others wait for its word.
    let mut outcome = vec![Vec::new(); size];
    if me == root {
        let word = match root_spawn(&cards, root, commands) {
            Ok((tag, children)) => {
                let mut w = format!("O{tag}");
                for c in &children {
                    w.push('\n');
                    w.push_str(c);
                }
                w
            }
            Err(e) => format!("E{}", e.msg),
        };
        outcome = vec![word.into_bytes(); size];
    }
    let word = cm::exchange_all(comm, outcome)?.swap_remove(root);
    let word = String::from_utf8_lossy(&word).into_owned();
    mine?;
    let body = match word.strip_prefix('O') {
        Some(b) => b,
        None => {
            return Err(spawn_err(
                word.strip_prefix('E').unwrap_or(&word).to_string(),
            ))
        }
    };
    let mut lines = body.split('\n');
    let tag = lines.next().unwrap_or_default().to_string();
    let children = lines.map(parse_peer).collect::<Result<Vec<_>>>()?;
    let remote: Vec<Gpid> = children.iter().map(|r| r.gpid).collect();
    let _held = with(|e| -> Result<Held> {
        e.add_peers(&children)?;
        Ok(e.hold(remote.clone()))
    })??;
    // Every parent accepts the children's connections: let them go.
    cm::exchange_all(comm, vec![Vec::new(); size])?;
    if me == root {
        set_go(&tag, true)?;
    }
    let n = remote.len();
    let spec = with(|e| {
        e.op_intercomm_from_groups(
            group,
            root as i32,
            remote,
            0,
            &format!("protean-spawn-{tag}"),
            errhandler,
        )
    })??;
    let made = cm::run(spec);
    if me == root {
        // The children joined the intercommunicator: they have read their word.
        set_go(&tag, false)?;
    }
    let id = made?.ok_or_else(|| spawn_err("the parent intercommunicator was not made"))?;
    Ok((id, n))
}

/// The root's part: spawn, then the children's entries (`gpid:card`, by child rank).
fn root_spawn(
    cards: &[Vec<u8>],
    root: usize,
    commands: &[Command],
) -> Result<(String, Vec<String>)> {
    let mut parents = Vec::new();
    // The children's gpids start after every gpid a parent knows, so that none is an alias a
    // parent gave to a process of an independent job (our mpirun knows only its own).
    let mut gpid_min = Gpid::new(0);
    for c in cards {
        let s = String::from_utf8_lossy(c);
        match s.strip_prefix('O') {
            Some(p) => {
                let (next, entry) = p
                    .split_once('\n')
                    .and_then(|(n, e)| Some((n.parse::<Gpid>().ok()?, e)))
                    .ok_or_else(|| spawn_err(format!("a malformed parent entry: {p}")))?;
                gpid_min = gpid_min.max(next);
                parents.push(entry.to_string());
            }
            None => return Err(spawn_err(s.strip_prefix('E').unwrap_or(&s).to_string())),
        }
    }
    if commands.is_empty() {
        return Err(spawn_err("no command to spawn"));
    }
    let mut total = 0usize;
    for c in commands {
        if c.maxprocs < 1 {
            return Err(spawn_err(format!(
                "maxprocs {} for '{}' (at least 1)",
                c.maxprocs, c.program
            )));
        }
        total += c.maxprocs as usize;
    }
    let (tag, kvs, key) = with(|e| -> Result<_> {
        e.spawns += 1;
        let tag = format!("{}x{}", e.me, e.spawns);
        let key = e.dyn_key()?;
        let kvs = e.pmi_mut()?.kvsname().to_string();
        Ok((tag, kvs, key))
    })??;
    let mut preput = vec![
        (PARENT_KEY.to_string(), hex(&key)),
        (KEY_KVS.to_string(), kvs.clone()),
        (KEY_TAG.to_string(), tag.clone()),
        (KEY_NPARENTS.to_string(), parents.len().to_string()),
        (KEY_LEADER.to_string(), root.to_string()),
        (KEY_GPID_MIN.to_string(), gpid_min.to_string()),
    ];
    for (i, p) in parents.iter().enumerate() {
        preput.push((format!("protean-dpm-p{i}"), p.clone()));
    }
    let cmds: Vec<protean_pmi::SpawnCommand> = commands
        .iter()
        .map(|c| protean_pmi::SpawnCommand {
            nprocs: c.maxprocs as u32,
            execname: c.program.clone(),
            args: c.args.clone(),
            preput: preput.clone(),
            info: c.info.clone(),
            ..Default::default()
        })
        .collect();
    with(|e| -> Result<()> {
        match e.pmi_mut()?.spawn(&cmds).map_err(pmi_err)? {
            Ok(()) => Ok(()),
            Err(why) => Err(spawn_err(why)),
        }
    })??;
    let mut children = Vec::with_capacity(total);
    for r in 0..total {
        children.push(wait_key(&kvs, &format!("dpm-{tag}-c{r}"))?);
    }
    Ok((tag, children))
}

/// Tag of the leaders' introduction messages ([`introduce`]): negative, as no user tag is, in
/// the peer communicator's tagged context, with the user's tag below it.
const INTRO_TAG: i32 = i32::MIN;

/// The first step of MPI_Intercomm_create, collective over `local`: when the leaders' link
/// crosses jobs of this mpirun (a spawned job and its parents, or two jobs spawned apart),
/// processes of the two groups that never met (a job spawned by other processes of ours,
/// which this one took no part in) are introduced, so that the intercommunicator reaches
/// every member. The leader says whether its link crosses (one small exchange over `local`
/// in every MPI_Intercomm_create); if so, every member's card goes to the leader, the leaders
/// swap their sides' cards over the peer communicator, and every member adds the processes of
/// the other side it has no route to (as a spawn adds the children). They are added before
/// the member enters the agreement, and the other side's members send to them only once it
/// is done, so a process is always known before anyone connects to it. Processes of an
/// independent job (MPI_Comm_connect/accept) number theirs their own way: not introduced.
pub fn introduce(local: CommId, leader: i32, peer: Option<(CommId, i32)>, tag: i32) -> Result<()> {
    let (rank, size) = with(|e| e.live_comm(local).map(|c| (c.rank as usize, c.size())))??;
    if leader < 0 || leader as usize >= size || tag < 0 {
        // The agreement reports it.
        return Ok(());
    }
    let leader = leader as usize;
    let link = if rank == leader {
        with(|e| {
            let (pc, rl) = peer?;
            let p = e.live_comm(pc).ok()?;
            let &g = p.peers().get(usize::try_from(rl).ok()?)?;
            let own = e.base..e.base.offset(e.size);
            let crosses = !own.contains(&g) && !e.foreign.iter().any(|f| f.holds(g));
            crosses.then(|| (g, p.tagged_ctx(), p.rank, rl))
        })?
    } else {
        None
    };
    let mut word = vec![Vec::new(); size];
    if rank == leader {
        word = vec![vec![link.is_some() as u8]; size];
    }
    if cm::exchange_all(local, word)?.swap_remove(leader).first() != Some(&1) {
        return Ok(());
    }
    let mine = with(|e| e.dyn_card().map(|r| peer_entry(&r)))??;
    let mut cards = vec![Vec::new(); size];
    cards[leader] = mine.into_bytes();
    let cards = cm::exchange_all(local, cards)?;
    let mut theirs = Vec::new();
    if let Some((g, ctx, my_src, peer_src)) = link {
        let ours = cards
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join("\n");
        let t = INTRO_TAG | (tag & 0x3fff_ffff);
        theirs = cm::swap_with(g, ctx, my_src, peer_src, t, ours.into_bytes())?;
    }
    let mut word = vec![Vec::new(); size];
    if rank == leader {
        word = vec![theirs; size];
    }
    let theirs = cm::exchange_all(local, word)?.swap_remove(leader);
    let remotes = String::from_utf8_lossy(&theirs)
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(parse_peer)
        .collect::<Result<Vec<_>>>()?;
    with(|e| {
        let new: Vec<Remote> = remotes
            .into_iter()
            .filter(|r| r.gpid != e.me && e.net.route(r.gpid) == Route::Unreachable)
            .collect();
        if new.is_empty() {
            Ok(())
        } else {
            e.add_peers(&new)
        }
    })?
}

/// A spawned process joins its parents (end of MPI_Init): reads what the spawning root
/// pre-put, adds the parents, hands its card to them, waits for their word and makes the
/// parent intercommunicator ([`Engine::parent`]). Nothing to do for a process not spawned by
/// a Protean parent.
pub fn join_parent() -> Result<()> {
    let info = with(|e| -> Result<Option<_>> {
        if !e.spawned {
            return Ok(None);
        }
        let p = e.pmi_mut()?;
        let get = |p: &mut protean_pmi::PmiClient, k: &str| -> Result<Option<String>> {
            p.get(k).map_err(pmi_err)
        };
        let Some(kvs) = get(p, KEY_KVS)? else {
            return Ok(None);
        };
        let missing = |k: &str| spawn_err(format!("the spawning parent pre-put no {k}"));
        let tag = get(p, KEY_TAG)?.ok_or_else(|| missing(KEY_TAG))?;
        let np: usize = get(p, KEY_NPARENTS)?
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| missing(KEY_NPARENTS))?;
        let leader: i32 = get(p, KEY_LEADER)?
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| missing(KEY_LEADER))?;
        let mut parents = Vec::with_capacity(np);
        for i in 0..np {
            let k = format!("protean-dpm-p{i}");
            parents.push(parse_peer(&get(p, &k)?.ok_or_else(|| missing(&k))?)?);
        }
        if get(p, PARENT_KEY)?.as_deref().and_then(unhex).is_none() {
            return Err(missing(PARENT_KEY));
        }
        Ok(Some((kvs, tag, parents, leader)))
    })??;
    let Some((kvs, tag, parents, leader)) = info else {
        return Ok(());
    };
    let (world, errhandler) = with(|e| -> Result<_> {
        let entry = peer_entry(&e.dyn_card()?);
        e.add_peers(&parents)?;
        let rank = e.rank;
        e.pmi_mut()?
            .put_to(&kvs, &format!("dpm-{tag}-c{rank}"), &entry)
            .map_err(pmi_err)?;
        let w = e.live_comm(crate::mpi::comm::COMM_WORLD)?;
        Ok((w.group.clone(), w.errhandler))
    })??;
    wait_for(&kvs, &go_key(&tag), |v| lets_go(v, &tag))?;
    let remote: Vec<Gpid> = parents.iter().map(|r| r.gpid).collect();
    let spec = with(|e| {
        e.op_intercomm_from_groups(
            world,
            0,
            remote,
            leader,
            &format!("protean-spawn-{tag}"),
            errhandler,
        )
    })??;
    let id =
        cm::run(spec)?.ok_or_else(|| spawn_err("the parent intercommunicator was not made"))?;
    with(|e| {
        if let Some(c) = e.comms.get_mut(id.idx()).and_then(Option::as_mut) {
            c.name = "MPI_COMM_PARENT".into();
        }
        e.parent = Some(id);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A go key's value lets go the children of each spawn it lists, and no other's: a
    /// tag that is a prefix of another is not taken for it.
    #[test]
    fn a_go_value_lets_go_the_spawns_it_lists() {
        assert_eq!(go_key("0x7"), "dpm-0-go");
        assert_eq!(go_key("12x3"), "dpm-12-go");
        assert!(lets_go("0x7", "0x7"));
        assert!(lets_go("0x5,0x7,0x9", "0x7"));
        assert!(!lets_go("0x5,0x9", "0x7"));
        assert!(!lets_go("0x71", "0x7"));
        assert!(!lets_go("-", "0x7"));
    }
}
