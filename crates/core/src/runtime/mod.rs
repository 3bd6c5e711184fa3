//! Runtime: bootstrap, the engine that owns every MPI object of the process, progress.
//!
//! Start-up (MPI_Init) with a PMI server:
//! 1. read the configuration registry (defaults, config file, `PROTEAN_*`);
//! 2. open a TCP listener if TCP may be used, and publish a business card
//!    (`h=<host>;p=<pid>;t=<addr>:<port>`) in the PMI key-value space; barrier; read all cards;
//! 3. processes with the same host share memory when allowed: create our segment; barrier;
//!    map the peers' segments; barrier; unlink ours (nothing can leak after this);
//! 4. choose a route per peer (self / shm / tcp) — coarse-grained, per peer, at connection time;
//! 5. detect oversubscription (ranks on this host > usable cores) to decide whether waiting
//!    ranks yield.
//!
//! Without PMI variables the process is a singleton: size 1, only the self route.

pub mod global;
pub mod net;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use protean_pmi::PmiClient;

use crate::config::{self, Config, PROTOCOLS, YIELD_MODES};
use crate::error::{ErrorClass, MpiError, Result};
use crate::mpi::attr::AttrStore;
use crate::mpi::cm::CommMgr;
use crate::mpi::comm::{
    predefined_errhandlers, Comm, Errhandler, COMM_SELF, COMM_WORLD, CTX_SELF, CTX_WORLD,
};
use crate::mpi::datatype::{predefined, Datatype};
use crate::mpi::pml::{Coop, Pml};
use crate::proto::policy::{parse_rules, Costs, Policy, Protocol, Route};
use crate::transport::shm::{Geometry, Shm};
use crate::transport::tcp::Tcp;
use crate::transport::Gpid;
use net::Net;

/// Cooperative-copy slots each process offers (large sends in flight at once that may use it).
const COOP_SLOTS: usize = 64;

/// What each process publishes about itself at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// Host identity for the choice of transport (`hostname` tunable, else the kernel's).
    pub host: String,
    /// The kernel's host name: the machine whose CPUs the process shares.
    pub node: String,
    pub pid: u32,
    pub tcp: Option<SocketAddr>,
    /// CPUs the process may run on (bit set).
    pub cpus: Vec<u64>,
}

impl Card {
    /// `host|node|pid|addr:port|cpus` (`-` without TCP; cpus as hex words). PMI values may not
    /// contain spaces, `=` or backslashes (Hydra cuts or drops such values), and host names
    /// contain none of `|`.
    pub fn encode(&self) -> String {
        let t = self.tcp.map_or_else(|| "-".to_string(), |a| a.to_string());
        format!(
            "{}|{}|{}|{t}|{}",
            self.host,
            self.node,
            self.pid,
            mask_encode(&self.cpus)
        )
    }

    pub fn decode(s: &str) -> Option<Card> {
        let mut it = s.split('|');
        let host = it.next().filter(|h| !h.is_empty())?.to_string();
        let node = it.next().filter(|h| !h.is_empty())?.to_string();
        let pid = it.next()?.parse().ok()?;
        let tcp = match it.next()? {
            "-" => None,
            a => Some(a.parse().ok()?),
        };
        let cpus = mask_decode(it.next()?)?;
        if it.next().is_some() {
            return None;
        }
        Some(Card {
            host,
            node,
            pid,
            tcp,
            cpus,
        })
    }
}

/// A buffer attached with MPI_Buffer_attach.
#[derive(Debug)]
pub struct BsendBuffer {
    pub base: *mut u8,
    pub size: usize,
    /// Regions in use: (offset, length, request slot), sorted by offset.
    pub used: Vec<(usize, usize, u32)>,
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
    pub jobid: String,
    pub hostname: String,
    pub hosts: Vec<String>,
    /// Processes on this host (ascending gpids), us included.
    pub local: Vec<Gpid>,
    pub pml: Pml,
    pub net: Net,
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
    /// Datatypes the user freed while operations or other types still hold them: their slots
    /// stay taken (the handle stays meaningful to those users) until `Engine::free_dtype`
    /// finds them unreferenced.
    pub freed_types: Vec<u32>,
}

/// The CPUs this process may run on, as a bit set (bit i: CPU i).
fn affinity() -> Vec<u64> {
    // SAFETY: sched_getaffinity fills a cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_SETSIZE as usize;
            let mut words = vec![0u64; n.div_ceil(64)];
            for cpu in 0..n {
                if libc::CPU_ISSET(cpu, &set) {
                    words[cpu / 64] |= 1 << (cpu % 64);
                }
            }
            while words.len() > 1 && *words.last().expect("non-empty") == 0 {
                words.pop();
            }
            if words.iter().any(|w| *w != 0) {
                return words;
            }
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut words = vec![0u64; n.div_ceil(64)];
    for cpu in 0..n {
        words[cpu / 64] |= 1 << (cpu % 64);
    }
    words
}

/// A CPU set as hex words, most significant first, `.`-separated (no PMI-unsafe characters).
fn mask_encode(m: &[u64]) -> String {
    m.iter()
        .rev()
        .map(|w| format!("{w:x}"))
        .collect::<Vec<_>>()
        .join(".")
}

fn mask_decode(s: &str) -> Option<Vec<u64>> {
    let mut v: Vec<u64> = s
        .split('.')
        .map(|w| u64::from_str_radix(w, 16).ok())
        .collect::<Option<_>>()?;
    v.reverse();
    Some(v)
}

/// CPUs the processes of this host can use between them (the union of their affinities).
fn cpus_of(masks: &[&[u64]]) -> usize {
    let len = masks.iter().map(|m| m.len()).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            masks
                .iter()
                .fold(0u64, |acc, m| acc | m.get(i).copied().unwrap_or(0))
                .count_ones() as usize
        })
        .sum::<usize>()
        .max(1)
}

fn kernel_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let n = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..n]).into_owned();
    }
    "localhost".into()
}

/// First non-loopback IPv4 address of this host, if any.
fn primary_ipv4() -> Option<Ipv4Addr> {
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free.
    unsafe {
        if libc::getifaddrs(&mut ifs) != 0 {
            return None;
        }
        let mut found = None;
        let mut p = ifs;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null()
                && (*a).sa_family as i32 == libc::AF_INET
                && (*p).ifa_flags & libc::IFF_UP as u32 != 0
            {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() {
                    found = Some(ip);
                    break;
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifs);
        found
    }
}

fn pmi_err(e: protean_pmi::PmiError) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("process manager (PMI): {e}"))
}

fn io_err(what: &str, e: std::io::Error) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("{what}: {e}"))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect()
}

impl Engine {
    /// MPI_Init / MPI_Init_thread. `thread_level` is the level provided.
    pub fn init(thread_level: i32) -> Result<Engine> {
        let cfg = Config::effective()
            .map_err(|e| MpiError::new(ErrorClass::Other, format!("configuration: {e}")))?;
        let mut pmi = PmiClient::from_env().map_err(pmi_err)?;
        let (rank, size, appnum) = match &pmi {
            Some(p) => (p.rank(), p.size(), p.appnum()),
            None => (0, 1, 0),
        };
        let jobid = match (std::env::var("PROTEAN_JOBID"), &pmi) {
            (Ok(j), _) if !j.is_empty() => sanitize(&j),
            (_, Some(p)) => sanitize(p.kvsname()),
            _ => format!("s{}", std::process::id()),
        };
        let hostname = if cfg.hostname.is_empty() {
            kernel_hostname()
        } else {
            cfg.hostname.clone()
        };
        let cfg_err = |name: &str, why: String| {
            MpiError::new(ErrorClass::Other, format!("PROTEAN_{name}: {why}"))
        };
        let allowed = transport_list(&cfg.transports).map_err(|e| cfg_err("TRANSPORTS", e))?;
        // Per-peer overrides: the first rule naming either end of a pair decides for both.
        let peer_rules = parse_rules(&cfg.transport_peers, transport_list)
            .map_err(|e| cfg_err("TRANSPORT_PEERS", e))?;
        let me = rank as Gpid;
        let allowed_for = |r: Gpid| -> &[&str] {
            peer_rules
                .iter()
                .find(|(s, _)| s.contains(me) || s.contains(r))
                .map_or(&allowed[..], |(_, l)| &l[..])
        };
        let any_allows =
            |t: &str| allowed.contains(&t) || peer_rules.iter().any(|(_, l)| l.contains(&t));
        let allow_shm = any_allows("shm");
        let allow_tcp = any_allows("tcp");

        let mut hosts = vec![hostname.clone(); size as usize];
        let mut cards: Vec<Option<Card>> = vec![None; size as usize];
        let mut tcp = None;
        if let Some(p) = pmi.as_mut().filter(|_| size > 1) {
            if allow_tcp {
                tcp = Some(
                    Tcp::new(
                        me,
                        Ipv4Addr::UNSPECIFIED,
                        cfg.tcp_nodelay,
                        cfg.tcp_sockbuf as usize,
                        cfg.verbose > 0,
                    )
                    .map_err(|e| io_err("cannot open a TCP listener", e))?,
                );
            }
            let addr = tcp.as_ref().map(|t| {
                let ip = cfg
                    .tcp_addr
                    .parse::<Ipv4Addr>()
                    .ok()
                    .or_else(primary_ipv4)
                    .unwrap_or(Ipv4Addr::LOCALHOST);
                SocketAddr::from((ip, t.port()))
            });
            let card = Card {
                host: hostname.clone(),
                node: kernel_hostname(),
                pid: std::process::id(),
                tcp: addr,
                cpus: affinity(),
            };
            p.put(&format!("protean-card-{rank}"), &card.encode())
                .map_err(pmi_err)?;
            p.barrier().map_err(pmi_err)?;
            for r in 0..size {
                let v = p
                    .get(&format!("protean-card-{r}"))
                    .map_err(pmi_err)?
                    .ok_or_else(|| {
                        MpiError::new(
                            ErrorClass::Other,
                            format!("rank {r} published no business card"),
                        )
                    })?;
                let c = Card::decode(&v).ok_or_else(|| {
                    MpiError::new(
                        ErrorClass::Other,
                        format!("rank {r} published a malformed business card: {v}"),
                    )
                })?;
                hosts[r as usize] = c.host.clone();
                cards[r as usize] = Some(c);
            }
        }
        let local: Vec<Gpid> = (0..size)
            .filter(|&r| hosts[r as usize] == hostname)
            .collect();

        // Shared memory among the processes of this host. The PMI barriers are collective over
        // the whole job: every process takes part when any host has several processes, also
        // one alone on its host (with three processes on two hosts, the single one's absence
        // would stop the other two forever).
        let mut shm = None;
        let shared_somewhere = {
            let mut h: Vec<&String> = hosts.iter().collect();
            h.sort();
            h.windows(2).any(|w| w[0] == w[1])
        };
        if allow_shm && shared_somewhere {
            let p = pmi.as_mut().expect("several processes on a host imply PMI");
            let mut s = None;
            if local.len() > 1 {
                let g = Geometry::new(
                    cfg.shm_fast_channels as usize,
                    cfg.shm_ring_bytes as usize,
                    cfg.shm_queue_cells as usize,
                    cfg.shm_cell_bytes as usize,
                    COOP_SLOTS,
                );
                s = Some(
                    Shm::create(&jobid, me, &local, g)
                        .map_err(|e| io_err("cannot create the shared-memory segment", e))?,
                );
            }
            p.barrier().map_err(pmi_err)?;
            if let Some(s) = s.as_mut() {
                s.attach(&local, size as usize)
                    .map_err(|e| io_err("cannot map a peer's shared-memory segment", e))?;
            }
            p.barrier().map_err(pmi_err)?;
            if let Some(s) = s.as_mut() {
                s.unlink();
            }
            shm = s;
        }

        // Routes.
        let mut routes = vec![Route::Unreachable; size as usize];
        for r in 0..size {
            let i = r as usize;
            let pair = allowed_for(r);
            routes[i] = if r == rank {
                Route::SelfLoop
            } else if pair.contains(&"shm") && shm.as_ref().is_some_and(|s| s.reaches(r)) {
                Route::Shm
            } else if let (true, Some(t), Some(Some(c))) =
                (pair.contains(&"tcp"), tcp.as_mut(), cards.get(i))
            {
                match c.tcp {
                    Some(a) => {
                        let a = if c.host == hostname {
                            SocketAddr::from((Ipv4Addr::LOCALHOST, a.port()))
                        } else {
                            a
                        };
                        t.set_addr(r, a);
                        Route::Tcp
                    }
                    None => Route::Unreachable,
                }
            } else {
                Route::Unreachable
            };
        }
        if let Some(r) = routes.iter().position(|r| *r == Route::Unreachable) {
            return Err(MpiError::new(
                ErrorClass::Other,
                format!(
                    "no transport reaches rank {r} (host {}) from rank {rank} (host {hostname}) with PROTEAN_TRANSPORTS={}{}",
                    hosts[r],
                    cfg.transports,
                    if cfg.transport_peers.is_empty() {
                        String::new()
                    } else {
                        format!(" PROTEAN_TRANSPORT_PEERS={}", cfg.transport_peers)
                    }
                ),
            ));
        }

        // Routes are symmetric (same host and same settings on both ends), so when no peer
        // uses TCP nobody will connect to us either: close the listener rather than poll it.
        if !routes.contains(&Route::Tcp) {
            tcp = None;
        }

        // Oversubscribed when the processes of this machine outnumber the CPUs they may use
        // between them (each may be pinned to one CPU, so one process's own mask says little;
        // and emulated hosts share the machine's CPUs).
        let own_mask = affinity();
        let node = kernel_hostname();
        let masks: Vec<&[u64]> = match pmi.as_ref().filter(|_| size > 1) {
            Some(_) => cards
                .iter()
                .flatten()
                .filter(|c| c.node == node)
                .map(|c| &c.cpus[..])
                .collect(),
            None => vec![&own_mask[..]],
        };
        let node_procs = masks.len().max(1);
        let ncpus = cpus_of(&masks);
        let yield_wait = match YIELD_MODES[cfg.progress_yield] {
            "always" => true,
            "never" => false,
            _ => node_procs > ncpus,
        };
        let policy = policy_from(&cfg).map_err(|e| MpiError::new(ErrorClass::Other, e))?;
        let mut pml = Pml::new(me, routes.clone(), policy, cfg.shm_single_copy);
        pml.verbose = cfg.verbose > 0;
        pml.keep_unexpected_buffers(cfg.unexpected_cache as usize);
        if let Some(s) = shm.as_ref() {
            pml.coop = Coop::new(s, size as usize, &cfg);
        }
        if cfg.verbose > 0 && rank == 0 {
            eprintln!(
                "Protean: {size} ranks, {} on this host, {node_procs} on this machine ({ncpus} cpus, waiting ranks {}), protocol {}",
                local.len(),
                if yield_wait { "yield" } else { "poll" },
                PROTOCOLS[cfg.protocol]
            );
        }
        let net = Net {
            me,
            shm,
            tcp,
            selfq: VecDeque::new(),
            routes,
            tcp_frag: cfg.tcp_frag_bytes as usize,
        };

        let world = Comm {
            predefined: true,
            ..Comm::new(
                CTX_WORLD,
                rank as i32,
                (0..size).collect(),
                "MPI_COMM_WORLD",
            )
        };
        let selfc = Comm {
            predefined: true,
            ..Comm::new(CTX_SELF, 0, vec![me], "MPI_COMM_SELF")
        };
        let mut comms = vec![None, None];
        comms[COMM_WORLD as usize] = Some(world);
        comms[COMM_SELF as usize] = Some(selfc);
        let dtypes = predefined()
            .into_iter()
            .map(|d| Some(Arc::new(d)))
            .collect();

        pml.refresh_limits(&net);
        let coll = crate::mpi::coll::State::new(&cfg)?;
        Ok(Engine {
            cfg,
            rank,
            size,
            jobid,
            hostname,
            hosts,
            local,
            pml,
            net,
            comms,
            groups: vec![Some(Vec::new())],
            cm: CommMgr::default(),
            attrs: AttrStore::default(),
            dtypes,
            errhandlers: predefined_errhandlers(),
            yield_wait,
            pmi,
            thread_level,
            main_thread: std::thread::current().id(),
            bsend: None,
            appnum,
            ncpus,
            node_procs,
            coll,
            freed_types: Vec::new(),
        })
    }

    /// See [`crate::mpi::pml::POLL_EVERY`].
    pub const POLL_EVERY: usize = crate::mpi::pml::POLL_EVERY;

    /// One progress pass: deliver arrived frames, push out what waits.
    #[inline]
    pub fn progress(&mut self) -> usize {
        let n = self.progress_p2p();
        if self.bsend.as_ref().is_some_and(|b| !b.used.is_empty()) {
            self.reap_bsend();
        }
        if self.cm.live > 0 {
            self.cm_progress();
        }
        if self.coll.busy() {
            self.coll_progress();
        }
        n
    }

    /// The point-to-point part of a progress pass: deliver arrived frames and push out what
    /// the engine has to send. Safe in the middle of any operation (it runs no collective
    /// schedule and no communicator construction).
    #[inline]
    pub fn progress_p2p(&mut self) -> usize {
        self.pml.eager_unpolled = 0;
        let n = self.net.poll(&mut self.pml);
        if self.pml.busy() {
            // The frames of one pass leave together (see `Tcp::hold`).
            self.net.hold();
            self.pml.flush(&mut self.net);
            self.net.release(&mut self.pml);
        }
        n
    }

    /// Re-read the tunables that can change at run time (after an MPI_T write).
    /// Err: a value does not parse; nothing changed.
    pub fn reconfigure(&mut self) -> std::result::Result<(), String> {
        self.pml.policy = policy_from(&self.cfg)?;
        self.pml.refresh_limits(&self.net);
        self.net.tcp_frag = self.cfg.tcp_frag_bytes as usize;
        self.pml.coop.min = self.cfg.shm_coop_min as usize;
        self.pml.coop.chunk = self.cfg.shm_coop_chunk as usize;
        self.pml.verbose = self.cfg.verbose > 0;
        if !self.cfg.shm_single_copy {
            self.pml.single_copy = false;
        }
        self.yield_wait = match YIELD_MODES[self.cfg.progress_yield] {
            "always" => true,
            "never" => false,
            _ => self.node_procs > self.ncpus,
        };
        global::set_yield(self.yield_wait);
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
                || self.net.has_output()
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
        if let Some(p) = self.pmi.as_mut() {
            p.barrier().map_err(pmi_err)?;
        }
        if let Some(t) = self.net.tcp.as_mut() {
            t.shutdown();
        }
        self.net.shm = None;
        if let Some(p) = self.pmi.as_mut() {
            p.finalize().map_err(pmi_err)?;
        }
        Ok(())
    }

    /// MPI_Abort: tell the launcher, then leave.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        if let Some(p) = self.pmi.as_mut() {
            let _ = p.abort(code, msg);
        }
        // The launcher tears the job down; make sure this process goes even if it does not.
        std::process::exit(if code == 0 { 1 } else { code & 0xff })
    }

    #[inline]
    pub fn comm(&self, id: u32) -> Result<&Comm> {
        match self.comms.get(id as usize) {
            Some(Some(c)) => Ok(c),
            _ => Err(MpiError::new(ErrorClass::Comm, "invalid communicator")),
        }
    }

    #[inline]
    pub fn dtype(&self, id: u32) -> Result<&Arc<Datatype>> {
        match self.dtypes.get(id as usize) {
            Some(Some(d)) => Ok(d),
            _ => Err(MpiError::new(ErrorClass::Type, "invalid datatype")),
        }
    }

    /// Store a new datatype; returns its id (reusing a freed slot).
    pub fn add_dtype(&mut self, d: Datatype) -> u32 {
        let first_free = self
            .dtypes
            .iter()
            .skip(crate::mpi::datatype::PREDEFINED_NAMES.len())
            .position(|d| d.is_none());
        match first_free {
            Some(i) => {
                let id = i + crate::mpi::datatype::PREDEFINED_NAMES.len();
                self.dtypes[id] = Some(Arc::new(d));
                id as u32
            }
            None => {
                self.dtypes.push(Some(Arc::new(d)));
                (self.dtypes.len() - 1) as u32
            }
        }
    }

    /// Processes on this machine outnumber the CPUs they may use.
    pub fn oversubscribed(&self) -> bool {
        self.node_procs > self.ncpus
    }
}

/// `transports`-style list: `shm,tcp`.
fn transport_list(text: &str) -> std::result::Result<Vec<&'static str>, String> {
    let mut v = Vec::new();
    for t in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        v.push(match t.to_ascii_lowercase().as_str() {
            "shm" => "shm",
            "tcp" => "tcp",
            "self" => "self",
            _ => return Err(format!("unknown transport '{t}' (known: shm, tcp)")),
        });
    }
    Ok(v)
}

/// The policy from the tunables; Err names the tunable that does not parse.
fn policy_from(cfg: &Config) -> std::result::Result<Policy, String> {
    let costs = |name: &str, text: &str| {
        Costs::parse(text).map_err(|e| format!("PROTEAN_{}: {e}", name.to_ascii_uppercase()))
    };
    Ok(Policy {
        protocol: Protocol::from_index(cfg.protocol),
        eager_limit_shm: cfg.shm_eager_max as usize,
        eager_limit_tcp: cfg.tcp_eager_max as usize,
        eager_limit_self: cfg.self_eager_max as usize,
        eager_limit: (cfg.eager_limit >= 0).then_some(cfg.eager_limit as usize),
        peer_limits: parse_rules(&cfg.eager_limit_peers, |v| {
            config::parse_size(v)
                .map(|n| n as usize)
                .ok_or_else(|| format!("'{v}' is not a size in bytes"))
        })
        .map_err(|e| format!("PROTEAN_EAGER_LIMIT_PEERS: {e}"))?,
        prefix: cfg.eager_rndv_prefix as usize,
        costs_shm: costs("adaptive_costs_shm", &cfg.adaptive_costs_shm)?,
        costs_tcp: costs("adaptive_costs_tcp", &cfg.adaptive_costs_tcp)?,
        costs_self: costs("adaptive_costs_self", &cfg.adaptive_costs_self)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_roundtrip_and_reject_garbage() {
        let c = Card {
            host: "node-1".into(),
            node: "m1".into(),
            pid: 42,
            tcp: Some("10.0.0.2:5555".parse().unwrap()),
            cpus: vec![0xf0, 0, 1],
        };
        assert_eq!(Card::decode(&c.encode()), Some(c));
        let c = Card {
            host: "n".into(),
            node: "m".into(),
            pid: 1,
            tcp: None,
            cpus: vec![3],
        };
        assert_eq!(Card::decode(&c.encode()), Some(c.clone()));
        assert!(!c.encode().contains(['=', ' ', '\\']));
        assert_eq!(Card::decode("x"), None);
        assert_eq!(Card::decode("x|m|notanumber|-|1"), None);
        assert_eq!(Card::decode("x|m|1|bad|1"), None);
        assert_eq!(Card::decode("x|m|1|-|1|extra"), None);
        assert_eq!(Card::decode("x|m|1|-|zz"), None);
        assert_eq!(Card::decode("x||1|-|1"), None);
        assert_eq!(Card::decode(""), None);
    }

    #[test]
    fn cpus_are_the_union_of_masks() {
        // Two processes pinned to CPUs 0 and 1: two CPUs between them.
        assert_eq!(cpus_of(&[&[0b01], &[0b10]]), 2);
        // Both restricted to CPU 0.
        assert_eq!(cpus_of(&[&[0b1], &[0b1]]), 1);
        assert_eq!(cpus_of(&[&[0b11, 1], &[0b100]]), 4);
        assert_eq!(cpus_of(&[]), 1);
        assert!(!affinity().is_empty());
    }

    #[test]
    fn singleton_engine() {
        // No PMI variables in the unit-test environment: a singleton with only the self route.
        if std::env::var("PMI_FD").is_ok() || std::env::var("PMI_PORT").is_ok() {
            return;
        }
        let e = Engine::init(0).unwrap();
        assert_eq!((e.rank, e.size), (0, 1));
        assert_eq!(e.net.routes, vec![Route::SelfLoop]);
        assert!(e.net.shm.is_none() && e.net.tcp.is_none());
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
        b.used = vec![(10, 20, 1), (50, 10, 2)];
        assert_eq!(b.first_fit(10), Some((0, 0)));
        assert_eq!(b.first_fit(11), Some((1, 30)));
        assert_eq!(b.first_fit(40), Some((2, 60)));
        assert_eq!(b.first_fit(41), None);
    }
}
