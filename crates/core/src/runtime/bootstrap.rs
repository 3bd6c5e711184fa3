//! Bootstrap: how a process learns who it is, who the others are and where they live.
//!
//! Start-up with a process manager (PMI: our mpirun, MPICH's Hydra, Slurm):
//! 1. connect to PMI (`PMI_FD`, or `PMI_PORT` + `PMI_ID`) and learn rank, size, job id;
//! 2. publish a business card (host identity, machine, pid, the TCP address when the transport
//!    layer opened a listener, the addresses of its UDP sockets when it opened any, CPU
//!    affinity, and the process's X25519 public key under the pair-key scheme) in the PMI
//!    key-value space; barrier; read every card ([`Boot::exchange`]). The keys that
//!    authenticate connections come with it: the job's key from rank 0, or every process's
//!    public key (see `runtime::keys`);
//! 3. the transport layer sets up shared memory between the processes of each host with
//!    further barriers ([`Boot::barrier`]) and chooses a route per peer
//!    (`transport::net::Net::open`);
//! 4. oversubscription (processes of this machine against its usable CPUs) decides whether
//!    waiting ranks yield ([`Boot::placement`]).
//!
//! Without PMI variables the process is a singleton: size 1, only the self route.

use std::net::{Ipv4Addr, SocketAddr};

use protean_pmi::PmiClient;

use crate::config::Config;
use crate::error::{ErrorClass, MpiError, Result};
use crate::runtime::keys::{log_job_key, Keys, Pairs};

pub use crate::ids::Gpid;

/// A host or machine identity (`Card::host`, `Card::node`): one allocation per distinct
/// value, shared by the cards, `Boot::hosts` and the engine's `hosts` (issue 24: memory per
/// peer; a host identity is a host name, boot id and network namespace, about 80 bytes, and
/// every process of a host has the same one).
pub type HostId = std::sync::Arc<str>;

/// The distinct identities seen so far, each kept once.
#[derive(Default)]
pub struct Interned(std::collections::HashSet<HostId>);

impl Interned {
    /// The kept identity equal to `s`, kept now if it is new.
    pub fn intern(&mut self, s: &str) -> HostId {
        if let Some(h) = self.0.get(s) {
            return h.clone();
        }
        let h: HostId = s.into();
        self.0.insert(h.clone());
        h
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// Host identity for the choice of transport (`hostname` tunable, else the kernel's host
    /// name, boot id and network namespace: see [`host_identity`]).
    pub host: HostId,
    /// The machine whose CPUs the process shares (its kernel's boot id, [`machine_id`]).
    pub node: HostId,
    pub pid: u32,
    pub tcp: Option<SocketAddr>,
    /// CPUs the process may run on (bit set).
    pub cpus: Vec<u64>,
    /// Where the process receives UDP datagrams (one address per socket; empty: no UDP).
    pub udp: Vec<SocketAddr>,
    /// Its X25519 public key, under the pair-key scheme (`runtime::keys`).
    pub public: Option<[u8; 32]>,
}

impl Card {
    /// `host|node|pid|addr:port|cpus|udp[|public]` (`-` without TCP; cpus as hex words; udp
    /// as `addr:port+port...`, one port per socket, all on one address, or `-`; the public key
    /// as 64 hex digits, only under the pair-key scheme). PMI values may
    /// not contain spaces, `=` or backslashes (Hydra cuts or drops such values), and host
    /// names contain none of `|`.
    pub fn encode(&self) -> String {
        let t = self.tcp.map_or_else(|| "-".to_string(), |a| a.to_string());
        let u = match self.udp.first() {
            None => "-".to_string(),
            Some(first) => {
                let mut u = first.to_string();
                for a in &self.udp[1..] {
                    u.push_str(&format!("+{}", a.port()));
                }
                u
            }
        };
        let mut s = format!(
            "{}|{}|{}|{t}|{}|{u}",
            self.host,
            self.node,
            self.pid,
            mask_encode(&self.cpus)
        );
        if let Some(p) = &self.public {
            s.push('|');
            s.push_str(&hex(p));
        }
        s
    }

    pub fn decode(s: &str) -> Option<Card> {
        let mut it = s.split('|');
        let host = it.next().filter(|h| !h.is_empty())?.into();
        let node = it.next().filter(|h| !h.is_empty())?.into();
        let pid = it.next()?.parse().ok()?;
        let tcp = match it.next()? {
            "-" => None,
            a => Some(a.parse().ok()?),
        };
        let cpus = mask_decode(it.next()?)?;
        let udp = match it.next() {
            None | Some("-") => Vec::new(),
            Some(u) => {
                let mut parts = u.split('+');
                let first: SocketAddr = parts.next()?.parse().ok()?;
                let mut v = vec![first];
                for p in parts {
                    v.push(SocketAddr::new(first.ip(), p.parse().ok()?));
                }
                if v.len() > 64 {
                    return None;
                }
                v
            }
        };
        let public = match it.next() {
            None => None,
            Some(p) => Some(unhex(p)?),
        };
        if it.next().is_some() {
            return None;
        }
        Some(Card {
            host,
            node,
            pid,
            tcp,
            cpus,
            udp,
            public,
        })
    }
}

/// The KVS key under which a spawning parent hands its key to the spawned job.
pub const PARENT_KEY: &str = "protean-parent-key";

/// What start-up learned about this process and the job.
pub struct Boot {
    pub pmi: Option<PmiClient>,
    pub rank: u32,
    pub size: u32,
    /// The global process id of rank 0: processes of jobs that one mpirun started by spawns
    /// are numbered after the earlier jobs' (`PROTEAN_GPID_BASE`, set by our mpirun; 0 for
    /// the first job), so a gpid names the same process in every job of that mpirun.
    pub base: Gpid,
    /// This job was started by MPI_Comm_spawn (`PMI_SPAWNED`).
    pub spawned: bool,
    pub appnum: i32,
    pub jobid: String,
    /// This host's name (`hostname` tunable, else the kernel's): for messages and
    /// MPI_Get_processor_name.
    pub hostname: String,
    /// Host identity for the choice of transport: the `hostname` tunable as given (emulated
    /// hosts), else [`host_identity`].
    pub host_id: String,
    /// Every process's card, by rank (None before [`Boot::exchange`], or for a singleton).
    pub cards: Vec<Option<Card>>,
    /// Every process's host identity, by rank (shared with its card).
    pub hosts: Vec<HostId>,
    /// The keys that authenticate connections (`runtime::keys`): the job's key, made by rank 0
    /// and handed out with the business cards, or our key pair and every process's public key
    /// (None for a singleton, and before [`Boot::exchange`]).
    pub keys: Option<Keys>,
    /// The pair-key scheme (`job_keys`: pairs, or auto under a process manager other than
    /// Protean's mpirun, whose key-value store may cross hosts in clear).
    pub pair_keys: bool,
    /// The `key_log` file (tests only; empty: none).
    pub key_log: String,
    /// The process manager placed every process on one node (PMI_process_mapping), when it
    /// says so; Some(false) for a spawned job whose universe spans hosts
    /// (`PROTEAN_UNIVERSE_HOSTS` from mpirun), whatever its own mapping says.
    pub one_node: Option<bool>,
}

impl Boot {
    /// Connect to the process manager, if there is one.
    pub fn start(cfg: &Config) -> Result<Boot> {
        let pmi = PmiClient::from_env().map_err(pmi_err)?;
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
        let base = match std::env::var("PROTEAN_GPID_BASE") {
            Ok(b) if pmi.is_some() => b
                .trim()
                .parse::<Gpid>()
                .ok()
                .filter(|b| b.get().checked_add(size).is_some())
                .ok_or_else(|| {
                    MpiError::new(
                        ErrorClass::Other,
                        format!("PROTEAN_GPID_BASE={b} is not a process number"),
                    )
                })?,
            _ => Gpid::new(0),
        };
        let spawned = pmi.as_ref().is_some_and(|p| p.spawned());
        let mut pmi = pmi;
        let one_node = match pmi.as_mut().filter(|_| size > 1) {
            Some(p) => p
                .get("PMI_process_mapping")
                .ok()
                .flatten()
                .and_then(|m| one_node(&m, size as usize)),
            None => Some(true),
        };
        // A spawned job on one node may still have parents (or siblings of other spawns) on
        // other hosts: mpirun says how many hosts the whole universe spans, and then the
        // listener must be reachable from them (not loopback).
        let one_node = match std::env::var("PROTEAN_UNIVERSE_HOSTS") {
            Ok(n) if spawned && n.trim() != "1" => Some(false),
            _ => one_node,
        };
        let host_id = if cfg.hostname.is_empty() {
            host_identity(&hostname)
        } else {
            hostname.clone()
        };
        // A spawned job shares its parents' key (pre-put in its KVS by the parent that asked
        // for it), so the connections between the two jobs authenticate as within one job.
        let key = match pmi.as_mut().filter(|_| spawned) {
            Some(p) => p
                .get(PARENT_KEY)
                .map_err(pmi_err)?
                .as_deref()
                .and_then(unhex),
            None => None,
        };
        let pair_keys = match crate::config::JOB_KEYS[cfg.job_keys] {
            "shared" => false,
            "pairs" => true,
            // Protean's mpirun carries the key-value store between hosts sealed; any other
            // process manager may not.
            _ => std::env::var("PROTEAN_LAUNCHER").as_deref() != Ok("1"),
        };
        if pair_keys && key.is_some() {
            return Err(MpiError::new(
                ErrorClass::Other,
                "this process was spawned with its parents' job key, but job_keys=pairs: spawned jobs share their parents' key (job_keys=shared)".to_string(),
            ));
        }
        Ok(Boot {
            keys: key.map(Keys::Shared),
            pair_keys,
            key_log: cfg.key_log.clone(),
            one_node,
            pmi,
            rank,
            size,
            base,
            spawned,
            appnum,
            jobid,
            hosts: vec![host_id.as_str().into(); size as usize],
            host_id,
            hostname,
            cards: vec![None; size as usize],
        })
    }

    /// Several processes, started by a process manager.
    pub fn is_job(&self) -> bool {
        self.pmi.is_some() && self.size > 1
    }

    /// Publish our card (with the TCP address we listen on and the UDP addresses we receive
    /// on, if any), wait for everyone's, and read them all; rank 0 publishes the job's key with
    /// its card, or, under the pair-key scheme, every card carries its process's public key.
    /// Nothing to do for a singleton.
    pub fn exchange(&mut self, tcp: Option<SocketAddr>, udp: &[SocketAddr]) -> Result<()> {
        let me = self.me();
        let Some(p) = self.pmi.as_mut().filter(|_| self.size > 1) else {
            return Ok(());
        };
        let mut pairs = None;
        if self.pair_keys {
            let mut k =
                Pairs::new(me, &self.jobid).map_err(|e| MpiError::new(ErrorClass::Other, e))?;
            if !self.key_log.is_empty() {
                k.log_to(&self.key_log);
            }
            pairs = Some(k);
        } else if self.rank == 0 && self.keys.is_none() {
            let mut key = [0u8; 32];
            getrandom::getrandom(&mut key).map_err(|e| {
                MpiError::new(
                    ErrorClass::Other,
                    format!("cannot draw the job's key from the kernel: {e}"),
                )
            })?;
            p.put("protean-key", &hex(&key)).map_err(pmi_err)?;
            self.keys = Some(Keys::Shared(key));
        }
        let card = Card {
            host: self.host_id.as_str().into(),
            node: machine_id().into(),
            pid: std::process::id(),
            tcp,
            cpus: affinity(),
            udp: udp.to_vec(),
            public: pairs.as_ref().map(Pairs::public),
        };
        p.put(&format!("protean-card-{}", self.rank), &card.encode())
            .map_err(pmi_err)?;
        p.barrier().map_err(pmi_err)?;
        let mut interned = Interned::default();
        let keys: Vec<String> = (0..self.size)
            .map(|r| format!("protean-card-{r}"))
            .collect();
        // Protean's mpirun answers pipelined gets: every card in a few round trips (at 128
        // ranks, 16,256 round trips through mpirun were most of MPI_Init's time).
        let values = if std::env::var("PROTEAN_LAUNCHER").as_deref() == Ok("1") {
            p.get_many(&keys).map_err(pmi_err)?
        } else {
            let mut v = Vec::with_capacity(keys.len());
            for k in &keys {
                v.push(p.get(k).map_err(pmi_err)?);
            }
            v
        };
        for (r, v) in (0..self.size).zip(values) {
            let v = v.ok_or_else(|| {
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
            if let Some(pairs) = pairs.as_mut().filter(|_| r != self.rank) {
                let public = c.public.ok_or_else(|| {
                    MpiError::new(
                        ErrorClass::Other,
                        format!("rank {r} published no public key in its business card, and this process (rank {}) uses pair keys: set job_keys alike on every process", self.rank),
                    )
                })?;
                pairs.set_peer(self.base.offset(r), public);
            }
            let mut c = c;
            c.host = interned.intern(&c.host);
            c.node = interned.intern(&c.node);
            self.hosts[r as usize] = c.host.clone();
            self.cards[r as usize] = Some(c);
        }
        if let Some(pairs) = pairs {
            self.keys = Some(Keys::Pairs(pairs));
        } else if self.keys.is_none() {
            let v = p.get("protean-key").map_err(pmi_err)?;
            let key = v.as_deref().and_then(unhex).ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Other,
                    "rank 0 published no key for the job's connections (with job_keys=pairs on rank 0 only? set job_keys alike on every process)".to_string(),
                )
            })?;
            self.keys = Some(Keys::Shared(key));
        }
        if let (Some(Keys::Shared(k)), false) = (&self.keys, self.key_log.is_empty()) {
            log_job_key(&self.key_log, &self.jobid, me, k);
        }
        Ok(())
    }

    /// A barrier over the whole job (a no-op for a singleton).
    pub fn barrier(&mut self) -> Result<()> {
        match self.pmi.as_mut() {
            Some(p) => p.barrier().map_err(pmi_err),
            None => Ok(()),
        }
    }

    /// The processes on this host (ascending gpids), us included.
    pub fn local(&self) -> Vec<Gpid> {
        (0..self.size)
            .filter(|&r| *self.hosts[r as usize] == *self.host_id)
            .map(|r| self.base.offset(r))
            .collect()
    }

    /// Our global process id.
    pub fn me(&self) -> Gpid {
        self.base.offset(self.rank)
    }

    /// Length of the process table: every job's processes up to the end of ours.
    pub fn nprocs(&self) -> usize {
        self.base.offset(self.size).idx()
    }

    /// Does any host hold several processes of the job?
    pub fn shared_somewhere(&self) -> bool {
        let mut h: Vec<&str> = self.hosts.iter().map(|h| &**h).collect();
        h.sort();
        h.windows(2).any(|w| w[0] == w[1])
    }

    /// Processes of the job on this machine, and the CPUs they may use between them. The
    /// machine is the kernel's boot id: emulated hosts (names, network namespaces) share its
    /// CPUs, and each process may be pinned to one CPU, so one process's own mask says little.
    pub fn placement(&self) -> (usize, usize) {
        let own_mask = affinity();
        let node = machine_id();
        let masks: Vec<&[u64]> = match self.pmi.as_ref().filter(|_| self.size > 1) {
            Some(_) => self
                .cards
                .iter()
                .flatten()
                .filter(|c| *c.node == *node)
                .map(|c| &c.cpus[..])
                .collect(),
            None => vec![&own_mask[..]],
        };
        (masks.len().max(1), cpus_of(&masks))
    }

    /// The address to listen on and advertise: `tcp_addr` when set; else the first address
    /// that `tcp_if` selects (an error when it selects none); else loopback when the whole job
    /// is on this node; else the host's first non-loopback IPv4 address (loopback when it has
    /// none).
    pub fn listen_addr(cfg: &Config, one_node: bool) -> std::result::Result<Ipv4Addr, String> {
        if let Ok(ip) = cfg.tcp_addr.parse::<Ipv4Addr>() {
            return Ok(ip);
        }
        let ifs = interfaces();
        if !cfg.tcp_if.is_empty() {
            let want = parse_if_list(&cfg.tcp_if)?;
            return want
                .iter()
                .find_map(|w| ifs.iter().find(|(n, ip)| w.matches(n, *ip)).map(|x| x.1))
                .ok_or_else(|| {
                    let have: Vec<String> = ifs.iter().map(|(n, ip)| format!("{n} {ip}")).collect();
                    format!(
                        "tcp_if={} selects no up IPv4 interface of this host (it has: {})",
                        cfg.tcp_if,
                        have.join(", ")
                    )
                });
        }
        if one_node {
            return Ok(Ipv4Addr::LOCALHOST);
        }
        Ok(ifs
            .iter()
            .map(|x| x.1)
            .find(|ip| !ip.is_loopback())
            .unwrap_or(Ipv4Addr::LOCALHOST))
    }
}

/// One entry of `tcp_if`: an interface name or an IPv4 subnet.
#[derive(Debug, PartialEq)]
enum IfSel {
    Name(String),
    Net(Ipv4Addr, u32),
}

impl IfSel {
    fn matches(&self, name: &str, ip: Ipv4Addr) -> bool {
        match self {
            IfSel::Name(n) => n == name,
            IfSel::Net(net, bits) => {
                let mask = if *bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                u32::from(ip) & mask == u32::from(*net) & mask
            }
        }
    }
}

fn parse_if_list(s: &str) -> std::result::Result<Vec<IfSel>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| match w.split_once('/') {
            Some((a, b)) => match (a.parse::<Ipv4Addr>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b <= 32 => Ok(IfSel::Net(a, b)),
                _ => Err(format!(
                    "tcp_if: '{w}' is not an IPv4 subnet (like 10.1.0.0/16)"
                )),
            },
            None => Ok(IfSel::Name(w.to_string())),
        })
        .collect()
}

/// The up IPv4 interfaces of this host, in the kernel's order: (name, address).
fn interfaces() -> Vec<(String, Ipv4Addr)> {
    let mut out = Vec::new();
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free.
    unsafe {
        if libc::getifaddrs(&mut ifs) != 0 {
            return out;
        }
        let mut p = ifs;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null()
                && (*a).sa_family as i32 == libc::AF_INET
                && (*p).ifa_flags & libc::IFF_UP as u32 != 0
            {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let name = std::ffi::CStr::from_ptr((*p).ifa_name)
                    .to_string_lossy()
                    .into_owned();
                out.push((name, ip));
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifs);
    }
    out
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

/// This process's host identity for the choice of transport: the kernel's host name, the boot
/// (the machine) and the network namespace. Processes in different network namespaces are
/// different hosts even on one machine (their loopback and addresses differ), as are those of
/// different machines that happen to share a host name.
pub fn host_identity(name: &str) -> String {
    let netns = std::fs::read_link("/proc/self/ns/net")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            let n = l
                .strip_prefix("net:[")?
                .strip_suffix(']')?
                .parse::<u64>()
                .ok()?;
            Some(format!("{n:x}"))
        })
        .unwrap_or_default();
    format!("{name}~{}.{netns}", &machine_id()[..8])
}

/// The running kernel's boot id: one per machine (and per boot), shared by every namespace and
/// container on it; the kernel host name when it cannot be read.
pub fn machine_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().replace('-', ""))
        .filter(|s| s.len() >= 8 && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| format!("{:0<8}", sanitize(&kernel_hostname())))
}

pub fn kernel_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let n = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..n]).into_owned();
    }
    "localhost".into()
}

/// Lower-case hex; 32 bytes from 64 hex digits (shared with the name server's secrets).
pub use protean_pmi::proof::{hex, unhex};

/// Does PMI_process_mapping (`(vector,(node,nodes,per_node),...)`, as Hydra and Slurm write
/// it) put all `size` processes on one node? None when it does not parse or does not cover
/// them.
fn one_node(mapping: &str, size: usize) -> Option<bool> {
    let body = mapping.trim().strip_prefix("(vector,")?.strip_suffix(')')?;
    let mut nodes = std::collections::BTreeSet::new();
    let mut covered = 0usize;
    for part in body.split("),") {
        let t = part.trim().trim_start_matches('(').trim_end_matches(')');
        let v: Vec<usize> = t
            .split(',')
            .map(|x| x.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [node, count, per] = v[..] else {
            return None;
        };
        for k in 0..count {
            nodes.insert(node + k);
        }
        covered = covered.checked_add(count.checked_mul(per)?)?;
    }
    (covered >= size).then_some(nodes.len() == 1)
}

pub fn pmi_err(e: protean_pmi::PmiError) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("process manager (PMI): {e}"))
}

pub fn io_err(what: &str, e: std::io::Error) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("{what}: {e}"))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_if_selects_by_name_or_subnet_in_the_order_given() {
        let l = parse_if_list("site0, 10.201.0.0/16,lo").unwrap();
        assert_eq!(l[0], IfSel::Name("site0".into()));
        assert!(l[1].matches("eth0", Ipv4Addr::new(10, 201, 2, 7)));
        assert!(!l[1].matches("eth0", Ipv4Addr::new(10, 202, 2, 7)));
        assert!(IfSel::Net(Ipv4Addr::UNSPECIFIED, 0).matches("x", Ipv4Addr::new(1, 2, 3, 4)));
        assert!(parse_if_list("10.1.0.0/33").is_err());
        assert!(parse_if_list("10.1.0/8").is_err());
        let mut cfg = Config::defaults();
        cfg.tcp_if = "lo".into();
        assert_eq!(Boot::listen_addr(&cfg, false), Ok(Ipv4Addr::LOCALHOST));
        cfg.tcp_if = "no-such-interface".into();
        let e = Boot::listen_addr(&cfg, true).unwrap_err();
        assert!(e.contains("selects no up IPv4 interface"), "{e}");
        cfg.tcp_addr = "127.0.0.2".into();
        assert_eq!(
            Boot::listen_addr(&cfg, true),
            Ok(Ipv4Addr::new(127, 0, 0, 2))
        );
    }

    #[test]
    fn host_identity_names_the_host_machine_and_network_namespace() {
        let id = host_identity("h1");
        let (name, rest) = id.split_once('~').unwrap();
        assert_eq!(name, "h1");
        let (boot, netns) = rest.split_once('.').unwrap();
        assert_eq!(boot, &machine_id()[..8]);
        assert!(
            !netns.is_empty() && netns.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        // Nothing a business card or PMI value cannot carry.
        assert!(!id.contains(['|', ' ', '=', '\\']));
        assert_eq!(host_identity("h1"), id);
        assert_ne!(host_identity("h2"), id);
    }

    #[test]
    fn cards_roundtrip_and_reject_garbage() {
        let c = Card {
            host: "node-1".into(),
            node: "m1".into(),
            pid: 42,
            tcp: Some("10.0.0.2:5555".parse().unwrap()),
            cpus: vec![0xf0, 0, 1],
            udp: vec![
                "10.0.0.2:6000".parse().unwrap(),
                "10.0.0.2:6010".parse().unwrap(),
            ],
            public: None,
        };
        assert_eq!(Card::decode(&c.encode()), Some(c.clone()));
        let mut with_key = c;
        with_key.public = Some([0x3c; 32]);
        let e = with_key.encode();
        assert!(e.ends_with(&format!("|{}", "3c".repeat(32))), "{e}");
        assert_eq!(Card::decode(&e), Some(with_key));
        assert_eq!(Card::decode(&format!("{e}|x")), None);
        assert_eq!(Card::decode(&e[..e.len() - 2]), None, "a cut public key");
        let c = Card {
            host: "n".into(),
            node: "m".into(),
            pid: 1,
            tcp: None,
            cpus: vec![3],
            udp: Vec::new(),
            public: None,
        };
        assert_eq!(Card::decode(&c.encode()), Some(c.clone()));
        assert!(!c.encode().contains(['=', ' ', '\\']));
        assert_eq!(Card::decode("x"), None);
        assert_eq!(Card::decode("x|m|notanumber|-|1"), None);
        assert_eq!(Card::decode("x|m|1|bad|1"), None);
        assert_eq!(Card::decode("x|m|1|-|1|extra"), None);
        assert_eq!(Card::decode("x|m|1|-|1|-|extra"), None);
        assert_eq!(Card::decode("x|m|1|-|1|-|-"), None);
        assert_eq!(Card::decode("x|m|1|-|1|1.2.3.4:5+x"), None);
        assert_eq!(
            Card::decode("x|m|1|-|1|1.2.3.4:5+6").unwrap().udp,
            vec![
                "1.2.3.4:5".parse::<SocketAddr>().unwrap(),
                "1.2.3.4:6".parse().unwrap()
            ]
        );
        assert_eq!(Card::decode("x|m|1|-|zz"), None);
        assert_eq!(Card::decode("x||1|-|1"), None);
        assert_eq!(Card::decode(""), None);
    }

    #[test]
    fn process_mappings_and_keys() {
        assert_eq!(one_node("(vector,(0,1,4))", 4), Some(true));
        assert_eq!(one_node("(vector,(0,2,2))", 4), Some(false));
        assert_eq!(one_node("(vector,(0,1,2),(1,1,2))", 4), Some(false));
        assert_eq!(
            one_node("(vector,(0,1,2))", 4),
            None,
            "does not cover the job"
        );
        assert_eq!(one_node("nonsense", 2), None);
        assert_eq!(one_node("(vector,(0,x,2))", 2), None);
        let k = [0xa5u8; 32];
        assert_eq!(unhex(&hex(&k)), Some(k));
        assert_eq!(unhex("00"), None);
        assert_eq!(unhex(&"zz".repeat(32)), None);
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
}
