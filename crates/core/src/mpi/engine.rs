//! The engine: every MPI object of the process (communicators, groups, datatypes, requests
//! through the point-to-point engine, attributes, collectives in flight) and the transports,
//! and the progress pass that drives them.
//!
//! Start-up (MPI_Init): the configuration registry (defaults, site and config files,
//! `PROTEAN_*`), then the bootstrap (`runtime::bootstrap`: PMI, business cards), then the
//! transports and a route per peer (`transport::net::Net::open`), then the objects every
//! process starts with. The one engine of a process lives in [`super::global`].

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use protean_pmi::PmiClient;

use crate::config::{Config, CHAN_PHASES, PROTOCOLS, YIELD_MODES};
use crate::error::{ErrorClass, MpiError, Result};
use crate::ids::{CommId, DtypeId, Gpid, ReqId};
use crate::mpi::attr::AttrStore;
use crate::mpi::cm::CommMgr;
use crate::mpi::comm::{
    predefined_errhandlers, Comm, Errhandler, COMM_SELF, COMM_WORLD, CTX_SELF, CTX_WORLD,
};
use crate::mpi::datatype::{predefined, Datatype};
use crate::mpi::global;
use crate::mpi::pml::Pml;
use crate::proto::channels::{Manager, Schedule, Settings};
use crate::proto::policy::Policy;
use crate::runtime::bootstrap::{pmi_err, Boot};
use crate::transport::net::Net;
use crate::transport::{Route, Transport};

/// A buffer attached with MPI_Buffer_attach.
#[derive(Debug)]
pub struct BsendBuffer {
    pub base: *mut u8,
    pub size: usize,
    /// Regions in use: (offset, length, request slot), sorted by offset.
    pub used: Vec<(usize, usize, ReqId)>,
}

impl BsendBuffer {
    /// First free region of `need` bytes between the regions in use: (index to insert at,
    /// offset).
    pub fn first_fit(&self, need: usize) -> Option<(usize, usize)> {
        let mut at = 0usize;
        for (i, &(off, len, _)) in self.used.iter().enumerate() {
            if off - at >= need {
                return Some((i, at));
            }
            at = off + len;
        }
        (self.size - at >= need).then_some((self.used.len(), at))
    }
}

/// Every MPI object and the transports of this process.
pub struct Engine {
    pub cfg: Config,
    pub rank: u32,
    pub size: u32,
    /// Our global process id (world rank plus the job's base, see `runtime::bootstrap`).
    pub me: Gpid,
    /// World rank 0's global process id.
    pub base: Gpid,
    /// Started by MPI_Comm_spawn.
    pub spawned: bool,
    /// The parent intercommunicator of a spawned process (MPI_Comm_get_parent), once made.
    pub parent: Option<CommId>,
    /// The key that authenticates connections (the job's, shared with spawned jobs; drawn
    /// when first needed by a process alone in its job).
    pub key: Option<[u8; 32]>,
    /// Connections are authenticated by pair keys (`runtime::keys`): there is no job key to
    /// share with other jobs.
    pub pair_keys: bool,
    /// MPI_UNIVERSE_SIZE: what the process manager says (-1: unset), a singleton's own size.
    pub universe: i32,
    /// Spawns this process asked for as a root so far (names them).
    pub spawns: u32,
    /// Tags of this process's spawns whose children may still wait for the word to go
    /// (`dpm::set_go`).
    pub go_tags: Vec<String>,
    /// Processes of other jobs held in the table for communicators being made
    /// (`Engine::hold`), once per hold.
    pub dyn_held: Vec<Gpid>,
    /// Processes of other jobs counted in `node_procs` (on this machine), by gpid.
    pub dyn_nodes: Vec<bool>,
    /// Processes of other jobs in the table, by gpid: their pids (0: none, or of our own
    /// job). Another pid or host under a number still in the table means mpirun gave the
    /// number of an ended process to a new one (`Engine::replaced`).
    pub dyn_pids: Vec<u32>,
    /// The independent jobs we are connected with (`mpi::dpm::Foreign`: our aliases for
    /// their processes and how they name ours).
    pub foreign: Vec<crate::mpi::dpm::Foreign>,
    pub jobid: String,
    pub hostname: String,
    pub hosts: Vec<crate::runtime::bootstrap::HostId>,
    /// Processes on this host (ascending gpids), us included.
    pub local: Vec<Gpid>,
    pub pml: Pml,
    pub net: Net,
    /// Who holds this process's fast channels (`proto::channels`).
    pub chan: Manager,
    /// Who holds this process's TCP connections under hybrid channels (`transports=udp,tcp`;
    /// `transport::hybrid`): the same rules, over the peers on datagrams.
    pub conn: Option<Manager>,
    pub comms: Vec<Option<Comm>>,
    /// Groups by id; slot 0 is MPI_GROUP_EMPTY.
    pub groups: Vec<Option<Vec<Gpid>>>,
    /// Context ids and the communicator-creating operations in flight.
    pub cm: CommMgr,
    /// Keyvals and cached attributes of communicators, datatypes and windows.
    pub attrs: AttrStore,
    pub dtypes: Vec<Option<Arc<Datatype>>>,
    pub errhandlers: Vec<Option<Errhandler>>,
    pub yield_wait: bool,
    pub pmi: Option<PmiClient>,
    pub thread_level: i32,
    pub main_thread: std::thread::ThreadId,
    pub bsend: Option<BsendBuffer>,
    pub appnum: i32,
    pub ncpus: usize,
    /// Processes of the job on this machine.
    pub node_procs: usize,
    /// Reduction operations, running nonblocking and persistent collectives, decisions.
    pub coll: crate::mpi::coll::State,
    /// Windows and one-sided operations in flight.
    pub rma: crate::mpi::rma::State,
    /// Datatypes the user freed while operations or other types still hold them: their slots
    /// stay taken (the handle stays meaningful to those users) until `Engine::free_dtype`
    /// finds them unreferenced.
    pub freed_types: Vec<DtypeId>,
    /// Progress passes so far, and when the launcher was last seen alive (see
    /// [`Engine::watch_launcher`]).
    passes: u32,
    /// Active partitioned requests (`mpi::part`), advanced by each progress pass.
    pub(crate) parts: Vec<ReqId>,
    /// Partitioned requests freed before their handshake requests ended: kept (their
    /// buffers with them) until those end (`Engine::part_sweep_orphans`).
    pub(crate) part_orphans: Vec<crate::mpi::part::Part>,
    launcher_seen: std::time::Instant,
}

impl Engine {
    /// MPI_Init / MPI_Init_thread. `thread_level` is the level provided.
    pub fn init(thread_level: i32) -> Result<Engine> {
        let cfg = Config::effective()
            .map_err(|e| MpiError::new(ErrorClass::Other, format!("configuration: {e}")))?;
        let mut boot = Boot::start(&cfg)?;
        let net = Net::open::<crate::proto::reliable::Links>(&mut boot, &cfg)?;
        let (rank, size, me) = (boot.rank, boot.size, boot.me());
        let base = boot.base;
        // Host identity by gpid: the processes of earlier jobs are unknown ("") until a spawn
        // or a connection introduces them.
        let mut hosts = vec![crate::runtime::bootstrap::HostId::from(""); base.idx()];
        hosts.extend(boot.hosts.iter().cloned());
        let local = boot.local();
        let (node_procs, ncpus) = boot.placement();
        let yield_wait = match YIELD_MODES[cfg.progress_yield] {
            "always" => true,
            "never" => false,
            _ => node_procs > ncpus,
        };
        // MPI_UNIVERSE_SIZE: what the process manager says; -1 (unset) where it states none
        // (mpirun -usize INFINITE, Hydra's default); a singleton's own size.
        let universe = match boot.pmi.as_mut() {
            Some(p) => p.universe_size().map_err(pmi_err)?.max(-1),
            None => size as i32,
        };
        let universe = if universe == 0 { size as i32 } else { universe };
        let policy = Policy::from_config(&cfg).map_err(|e| MpiError::new(ErrorClass::Other, e))?;
        let mut pml = Pml::new(me, net.routes().to_vec(), policy, cfg.shm_single_copy);
        pml.verbose = cfg.verbose > 0;
        pml.keep_unexpected_buffers(cfg.unexpected_cache as usize);
        pml.limit_unexpected(cfg.unexpected_max as usize);
        // Measured here (about 20 us) rather than in the first copy that asks.
        let slow_copies = crate::mem::short_distance_slow();
        if cfg.verbose > 0 && rank == 0 {
            eprintln!(
                "Protean: {size} ranks, {} on this host, {node_procs} on this machine ({ncpus} cpus, waiting ranks {}), protocol {}{}",
                local.len(),
                if yield_wait { "yield" } else { "poll" },
                PROTOCOLS[cfg.protocol],
                if slow_copies { ", copies 1-63 bytes past their source modulo 4096 go backwards" } else { "" }
            );
        }

        let world = Comm {
            predefined: true,
            ..Comm::new(
                CTX_WORLD,
                rank as i32,
                base.block(size).collect(),
                "MPI_COMM_WORLD",
            )
        };
        let selfc = Comm {
            predefined: true,
            ..Comm::new(CTX_SELF, 0, vec![me], "MPI_COMM_SELF")
        };
        let mut comms = vec![None, None];
        comms[COMM_WORLD.idx()] = Some(world);
        comms[COMM_SELF.idx()] = Some(selfc);
        let dtypes = predefined()
            .into_iter()
            .map(|d| Some(Arc::new(d)))
            .collect();

        pml.refresh_limits(&net);
        let mut net = net;
        let chan = channel_manager(&cfg, me, base.offset(size).get(), &mut net)?;
        let conn = conn_manager(&cfg, me, base.offset(size).get(), &net);
        let coll = crate::mpi::coll::State::new(&cfg)?;
        Ok(Engine {
            cfg,
            rank,
            size,
            me,
            base,
            spawned: boot.spawned,
            parent: None,
            key: boot.keys.as_ref().and_then(|k| k.shared()),
            pair_keys: boot.pair_keys,
            universe,
            spawns: 0,
            go_tags: Vec::new(),
            dyn_held: Vec::new(),
            dyn_nodes: Vec::new(),
            dyn_pids: Vec::new(),
            foreign: Vec::new(),
            jobid: boot.jobid,
            hostname: boot.hostname,
            hosts,
            local,
            pml,
            net,
            chan,
            conn,
            comms,
            groups: vec![Some(Vec::new())],
            cm: CommMgr::default(),
            attrs: AttrStore::default(),
            dtypes,
            errhandlers: predefined_errhandlers(),
            yield_wait,
            pmi: boot.pmi,
            thread_level,
            main_thread: std::thread::current().id(),
            bsend: None,
            appnum: boot.appnum,
            ncpus,
            node_procs,
            coll,
            rma: Default::default(),
            freed_types: Vec::new(),
            passes: 0,
            parts: Vec::new(),
            part_orphans: Vec::new(),
            launcher_seen: std::time::Instant::now(),
        })
    }

    /// See [`crate::mpi::pml::POLL_EVERY`].
    pub const POLL_EVERY: usize = crate::mpi::pml::POLL_EVERY;

    /// One progress pass: deliver arrived frames, push out what waits.
    #[inline]
    pub fn progress(&mut self) -> usize {
        let n = self.progress_p2p();
        self.passes = self.passes.wrapping_add(1);
        if self.passes & 0xfff == 0 {
            self.watch_launcher();
        }
        if self.bsend.as_ref().is_some_and(|b| !b.used.is_empty()) {
            self.reap_bsend();
        }
        if self.cm.live > 0 {
            self.cm_progress();
        }
        if self.coll.busy() {
            self.coll_progress();
        }
        if !self.parts.is_empty() || !self.part_orphans.is_empty() {
            self.part_progress();
        }
        n
    }

    /// The point-to-point part of a progress pass: deliver arrived frames and push out what
    /// the engine has to send. Safe in the middle of any operation (it runs no collective
    /// schedule and no communicator construction).
    #[inline]
    pub fn progress_p2p(&mut self) -> usize {
        self.pml.eager_unpolled = 0;
        // One-sided frames go to the RMA layer, the rest to the point-to-point engine.
        let n = self.net.progress(&mut crate::mpi::rma::Sink {
            pml: &mut self.pml,
            rma: &mut self.rma,
        });
        if self.chan.due(&self.net) {
            self.chan.look(&mut self.net);
        }
        if let Some(c) = self.conn.as_mut() {
            if c.due(&self.net) {
                c.look(&mut self.net);
            }
        }
        if let Some(why) = self.pml.overflowed() {
            self.fatal(&why);
        }
        if self.pml.busy() {
            // The frames of one pass leave together (see `Tcp::hold`).
            self.net.hold();
            self.pml.flush(&mut self.net);
            self.net.release(&mut self.pml);
        }
        if self.rma.busy() {
            self.rma_progress();
        }
        n
    }

    /// Re-read the tunables that can change at run time (after an MPI_T write).
    /// Err: a value does not parse; nothing changed.
    pub fn reconfigure(&mut self) -> std::result::Result<(), String> {
        self.pml.policy = Policy::from_config(&self.cfg)?;
        self.net.set_tcp_frag(self.cfg.tcp_frag_bytes as usize);
        self.net.set_tcp_lanes(&self.cfg)?;
        self.net.set_shm_copy(
            self.cfg.shm_coop_min as usize,
            self.cfg.shm_coop_chunk as usize,
        );
        self.pml.refresh_limits(&self.net);
        self.chan.configure(chan_settings(
            &self.cfg,
            self.net.channel_slots_of(Route::Shm),
        ));
        if let Some(c) = self.conn.as_mut() {
            c.configure(conn_settings(
                &self.cfg,
                self.net.channel_slots_of(Route::Udp),
            ));
        }
        self.pml.limit_unexpected(self.cfg.unexpected_max as usize);
        self.pml.verbose = self.cfg.verbose > 0;
        if !self.cfg.shm_single_copy {
            self.pml.single_copy = false;
        }
        self.yield_wait = match YIELD_MODES[self.cfg.progress_yield] {
            "always" => true,
            "never" => false,
            _ => self.node_procs > self.ncpus,
        };
        global::set_yield(
            self.yield_wait,
            YIELD_MODES[self.cfg.progress_yield] == "never",
        );
        Ok(())
    }

    /// MPI_Finalize: finish internal work, synchronise with every process, close transports.
    pub fn finalize(&mut self) -> Result<()> {
        if self.cfg.verbose >= 2 {
            eprintln!(
                "Protean[{}]: counters at finalize: {:?}",
                self.rank, self.pml.counters
            );
        }
        // Buffered sends and freed requests must still be delivered.
        let start = std::time::Instant::now();
        let mut idle_since = std::time::Instant::now();
        loop {
            let busy = self.pml.busy()
                || !self.rma.outbox.is_empty()
                || self.net.has_work()
                || self.bsend.as_ref().is_some_and(|b| !b.used.is_empty());
            if !busy {
                break;
            }
            if self.progress() > 0 {
                idle_since = std::time::Instant::now();
            }
            // A peer that never receives what we still hold must not hang the job forever.
            if idle_since.elapsed().as_secs() >= 5 && start.elapsed().as_secs() >= 5 {
                if self.cfg.verbose > 0 {
                    eprintln!(
                        "Protean[{}]: finalize: giving up on undelivered messages",
                        self.rank
                    );
                }
                break;
            }
            global::idle();
        }
        self.pml.finalizing = true;
        self.write_profile();
        if let Some(p) = self.pmi.as_mut() {
            if self.net.has(Route::Udp) {
                // Datagram peers may still wait for our acknowledgement of what they sent
                // last (it can be lost): keep answering until everyone is here.
                let (net, pml) = (&mut self.net, &mut self.pml);
                p.barrier_while(|| {
                    net.progress(pml);
                    global::idle();
                })
                .map_err(pmi_err)?;
            } else {
                p.barrier().map_err(pmi_err)?;
            }
        }
        self.net.shutdown();
        if let Some(p) = self.pmi.as_mut() {
            p.finalize().map_err(pmi_err)?;
        }
        Ok(())
    }

    /// MPI_Pcontrol: the next phase of the program begins (the profiler's and the schedule's
    /// phases). Under `chan_phases=auto` the program's own marks replace collectives from now
    /// on.
    pub fn pcontrol(&mut self) {
        if PHASE_MARKS.load(Ordering::Relaxed) != MARK_NONE
            && CHAN_PHASES[self.cfg.chan_phases] == "auto"
        {
            PHASE_MARKS.store(MARK_NONE, Ordering::Relaxed);
        }
        self.next_phase();
    }

    /// The next phase of the program begins.
    pub fn next_phase(&mut self) {
        let pml = &self.pml;
        self.chan.next_phase(|p| pml.sent_to(p));
        let phase = self.chan.phase;
        crate::events::raise(crate::events::Event::Phase, || [phase as i64]);
    }

    /// A blocking collective over communicator `comm` begins (`barrier`: it is MPI_Barrier):
    /// under `chan_phases` it begins a phase when the communicator spans the whole job. Inline,
    /// one relaxed load when no profile or schedule is in use.
    #[inline(always)]
    pub fn collective_mark(comm: CommId, barrier: bool) -> Result<()> {
        let m = PHASE_MARKS.load(Ordering::Relaxed);
        if m == MARK_NONE || (m == MARK_BARRIER && !barrier) {
            return Ok(());
        }
        crate::mpi::global::with(|e| {
            let c = e.comm(comm)?;
            if !c.is_inter() && c.size() == e.size as usize {
                e.next_phase();
            }
            Ok(())
        })?
    }

    /// Write this process's profile (`profile` tunable) at finalize; a failure is reported,
    /// not fatal.
    fn write_profile(&mut self) {
        let pml = &self.pml;
        let Some(p) = self.chan.finish(|p| pml.sent_to(p)) else {
            return;
        };
        let path = format!("{}.{}", self.cfg.profile, self.rank);
        if let Err(e) = std::fs::write(&path, p.to_text()) {
            eprintln!(
                "Protean: rank {}: cannot write the profile {path}: {e}",
                self.rank
            );
        }
    }

    /// A rank blocked in communication must not outlive its job: every few thousand passes
    /// (at most every 200 ms) look at the connection to the process manager, and leave when
    /// it is closed (mpirun, a proxy, Hydra's or Slurm's step daemon died). Ranks our own
    /// launcher starts also die with it (a parent-death signal); this covers the others.
    #[cold]
    fn watch_launcher(&mut self) {
        if self.launcher_seen.elapsed() < std::time::Duration::from_millis(200) {
            return;
        }
        self.launcher_seen = std::time::Instant::now();
        let Some(fd) = self.pmi.as_ref().map(|p| p.raw_fd()) else {
            return;
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: polling one descriptor we own, without waiting.
        if unsafe { libc::poll(&mut pfd, 1, 0) } <= 0 {
            return;
        }
        let mut byte = 0u8;
        // SAFETY: peeking one byte into a local; the descriptor is ours.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        let gone = pfd.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0 || n == 0;
        if gone {
            eprintln!(
                "Protean: rank {}: the process manager's connection closed (the launcher is gone); ending this process",
                self.rank
            );
            std::process::exit(1);
        }
    }

    /// An error that ends the job, found while progressing (not in a call with a communicator
    /// to report to): say so, naming this rank, and abort.
    #[cold]
    pub fn fatal(&mut self, why: &str) -> ! {
        let msg = format!("Protean: rank {}: {why}", self.rank);
        // Our mpirun prints an abort's message; other process managers may not.
        if std::env::var_os("PROTEAN_LAUNCHER").is_none() {
            eprintln!("{msg}");
        }
        self.abort(1, &msg)
    }

    /// MPI_Abort: tell the launcher, then leave.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        global::mark_aborting();
        if let Some(p) = self.pmi.as_mut() {
            let _ = p.abort(code, msg);
        }
        // The launcher tears the job down; make sure this process goes even if it does not.
        std::process::exit(if code == 0 { 1 } else { code & 0xff })
    }

    /// Performance variable `i` now (profile.rs numbers them), with the transports' and the
    /// channels' counters brought up to date first.
    pub fn pvar(&mut self, i: usize) -> u64 {
        self.pml.counters.transport = self.net.stats();
        self.pml.counters.channels = self.net.channel_counters();
        self.pml.counters.read(i)
    }

    #[inline]
    pub fn comm(&self, id: CommId) -> Result<&Comm> {
        match self.comms.get(id.idx()) {
            Some(Some(c)) => Ok(c),
            _ => Err(MpiError::new(ErrorClass::Comm, "invalid communicator")),
        }
    }

    #[inline]
    pub fn dtype(&self, id: DtypeId) -> Result<&Arc<Datatype>> {
        match self.dtypes.get(id.idx()) {
            Some(Some(d)) => Ok(d),
            _ => Err(MpiError::new(ErrorClass::Type, "invalid datatype")),
        }
    }

    /// Store a new datatype; returns its id (reusing a freed slot).
    pub fn add_dtype(&mut self, d: Datatype) -> DtypeId {
        let first_free = self
            .dtypes
            .iter()
            .skip(crate::mpi::datatype::PREDEFINED_NAMES.len())
            .position(|d| d.is_none());
        match first_free {
            Some(i) => {
                let id = i + crate::mpi::datatype::PREDEFINED_NAMES.len();
                self.dtypes[id] = Some(Arc::new(d));
                DtypeId::from_idx(id)
            }
            None => {
                self.dtypes.push(Some(Arc::new(d)));
                DtypeId::from_idx(self.dtypes.len() - 1)
            }
        }
    }

    /// Processes on this machine outnumber the CPUs they may use.
    pub fn oversubscribed(&self) -> bool {
        self.node_procs > self.ncpus
    }
}

/// The channel manager's settings from the tunables; `slots`: channels the transport offers.
pub(crate) fn chan_settings(cfg: &Config, slots: usize) -> Settings {
    Settings {
        policy: cfg.chan_policy,
        max: if cfg.chan_max < 0 {
            slots
        } else {
            (cfg.chan_max as usize).min(slots)
        },
        promote_after: cfg.chan_promote_after as u64,
        window: cfg.chan_window as u64,
    }
}

/// The hybrid channels' manager settings: `udp_max_connections` (up to the `slots` the
/// transport was opened with), the rest as the fast channels'.
fn conn_settings(cfg: &Config, slots: usize) -> Settings {
    Settings {
        max: (cfg.udp_max_connections.max(0) as usize).min(slots),
        ..chan_settings(cfg, slots)
    }
}

/// The manager of the TCP connections of hybrid channels, when any peer is on them.
fn conn_manager(cfg: &Config, me: Gpid, size: u32, net: &Net) -> Option<Manager> {
    let candidates: Vec<Gpid> = Gpid::new(0)
        .block(size)
        .filter(|&g| g != me && net.hybrid_covers(g))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let slots = net.channel_slots_of(Route::Udp);
    Some(Manager::new(
        me,
        size,
        candidates,
        conn_settings(cfg, slots),
    ))
}

/// Which collectives begin a phase (`chan_phases`, while a profile or a schedule is in use).
static PHASE_MARKS: AtomicU8 = AtomicU8::new(MARK_NONE);
const MARK_NONE: u8 = 0;
const MARK_BARRIER: u8 = 1;
const MARK_COLLECTIVE: u8 = 2;

/// Set [`PHASE_MARKS`] for a job whose tunables are `cfg`.
fn set_phase_marks(cfg: &Config) {
    let m = if cfg.profile.is_empty() && cfg.schedule.is_empty() {
        MARK_NONE
    } else {
        match CHAN_PHASES[cfg.chan_phases] {
            "barrier" => MARK_BARRIER,
            "collective" | "auto" => MARK_COLLECTIVE,
            _ => MARK_NONE,
        }
    };
    PHASE_MARKS.store(m, Ordering::Relaxed);
}

/// The channel manager of this process: candidates are the peers on shared memory (the
/// transport with channels), the profiler and the schedule as the tunables say.
fn channel_manager(cfg: &Config, me: Gpid, size: u32, net: &mut Net) -> Result<Manager> {
    let slots = net.channel_slots_of(Route::Shm);
    let candidates = if slots == 0 {
        Vec::new()
    } else {
        Gpid::new(0)
            .block(size)
            .filter(|&g| g != me && net.routes().get(g.idx()) == Some(&Route::Shm))
            .collect()
    };
    let mut m = Manager::new(me, size, candidates, chan_settings(cfg, slots));
    set_phase_marks(cfg);
    if !cfg.profile.is_empty() {
        m.record();
    }
    if !cfg.schedule.is_empty() {
        let text = std::fs::read_to_string(&cfg.schedule).map_err(|e| {
            MpiError::new(
                ErrorClass::Other,
                format!("cannot read the channel schedule {}: {e}", cfg.schedule),
            )
        })?;
        let s = Schedule::parse(&text).map_err(|e| {
            MpiError::new(
                ErrorClass::Other,
                format!("channel schedule {}: {e}", cfg.schedule),
            )
        })?;
        m.use_schedule(s);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singleton_engine() {
        // No PMI variables in the unit-test environment: a singleton with only the self route.
        if std::env::var("PMI_FD").is_ok() || std::env::var("PMI_PORT").is_ok() {
            return;
        }
        let e = Engine::init(0).unwrap();
        assert_eq!((e.rank, e.size), (0, 1));
        assert_eq!(e.net.routes(), &[Route::SelfLoop]);
        assert!(!e.net.has(Route::Shm) && !e.net.has(Route::Tcp));
    }
}

#[cfg(test)]
mod bsend_tests {
    use super::BsendBuffer;

    #[test]
    fn first_fit_uses_gaps() {
        let mut b = BsendBuffer {
            base: std::ptr::null_mut(),
            size: 100,
            used: vec![],
        };
        assert_eq!(b.first_fit(100), Some((0, 0)));
        assert_eq!(b.first_fit(101), None);
        b.used = vec![
            (10, 20, crate::ids::ReqId::new(1)),
            (50, 10, crate::ids::ReqId::new(2)),
        ];
        assert_eq!(b.first_fit(10), Some((0, 0)));
        assert_eq!(b.first_fit(11), Some((1, 30)));
        assert_eq!(b.first_fit(40), Some((2, 60)));
        assert_eq!(b.first_fit(41), None);
    }
}
