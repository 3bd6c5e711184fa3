//! The configuration registry.
//!
//! Every tunable is declared once, in the `tunables!` table below: name, type, default, whether
//! it may change while the program runs, and a doc line. The same declaration feeds
//! - the environment (`PROTEAN_<NAME>` in upper case; `mpirun --set name=value` sets exactly that),
//! - the installation's site file (`<prefix>/etc/protean.conf`, where `protean-tune --p2p`
//!   writes the adaptive policy's measured costs) and an optional config file
//!   (`PROTEAN_CONFIG=path`), both of lines `name = value` with `#` comments,
//! - `protean-info`, which lists every tunable with its default and doc,
//! - MPI_T control variables (read, and written at run time where `writable` is true).
//!
//! The engine reads tunables as plain struct fields (`config.shm_eager_max`), so the hot path
//! pays nothing for the registry.

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The type and the accepted values of a tunable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    Str,
    /// One of a fixed set of names; the value is the index.
    Choice(&'static [&'static str]),
}

/// Static description of one tunable.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    /// May be changed after MPI_Init (through MPI_T); takes effect for the next message.
    pub writable: bool,
    pub doc: &'static str,
}

impl Meta {
    /// The environment variable that sets this tunable.
    pub fn env_name(&self) -> String {
        format!("PROTEAN_{}", self.name.to_ascii_uppercase())
    }
}

/// A tunable's value, as MPI_T and protean-info see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Str(String),
    Choice(usize),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "{v}"),
            Value::Choice(v) => write!(f, "#{v}"),
        }
    }
}

/// Conversion between a field's Rust type and the registry's textual and [`Value`] forms.
pub trait Tunable: Sized {
    fn parse(text: &str, kind: Kind) -> Result<Self, String>;
    fn to_value(&self) -> Value;
    fn from_value(v: &Value, kind: Kind) -> Result<Self, String>;
}

/// Parse an integer with an optional binary suffix (`64k`, `4m`, `1g`) or hex prefix.
pub fn parse_size(text: &str) -> Option<i64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1i64 << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1i64 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1i64 << 30),
        _ => (t, 1),
    };
    let v = if let Some(h) = num.strip_prefix("0x").or_else(|| num.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else {
        num.parse::<i64>().ok()?
    };
    v.checked_mul(mult)
}

impl Tunable for i64 {
    fn parse(text: &str, kind: Kind) -> Result<Self, String> {
        let v = parse_size(text).ok_or_else(|| format!("'{text}' is not an integer"))?;
        Self::from_value(&Value::Int(v), kind)
    }
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
    fn from_value(v: &Value, kind: Kind) -> Result<Self, String> {
        match (v, kind) {
            (Value::Int(v), Kind::Int { min, max }) if (min..=max).contains(v) => Ok(*v),
            (Value::Int(v), Kind::Int { min, max }) => {
                Err(format!("{v} is outside the range {min}..={max}"))
            }
            _ => Err("expected an integer".into()),
        }
    }
}

impl Tunable for bool {
    fn parse(text: &str, _kind: Kind) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err(format!(
                "'{text}' is not a boolean (use 1/0, true/false, yes/no, on/off)"
            )),
        }
    }
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
    fn from_value(v: &Value, _kind: Kind) -> Result<Self, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            Value::Int(i) => Ok(*i != 0),
            _ => Err("expected a boolean".into()),
        }
    }
}

impl Tunable for String {
    fn parse(text: &str, _kind: Kind) -> Result<Self, String> {
        Ok(text.trim().to_string())
    }
    fn to_value(&self) -> Value {
        Value::Str(self.clone())
    }
    fn from_value(v: &Value, _kind: Kind) -> Result<Self, String> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            _ => Err("expected a string".into()),
        }
    }
}

impl Tunable for usize {
    fn parse(text: &str, kind: Kind) -> Result<Self, String> {
        let Kind::Choice(names) = kind else {
            return Err("not a choice".into());
        };
        let t = text.trim().to_ascii_lowercase();
        names
            .iter()
            .position(|n| *n == t)
            .ok_or_else(|| format!("'{text}' is not one of {}", names.join(", ")))
    }
    fn to_value(&self) -> Value {
        Value::Choice(*self)
    }
    fn from_value(v: &Value, kind: Kind) -> Result<Self, String> {
        let Kind::Choice(names) = kind else {
            return Err("not a choice".into());
        };
        match v {
            Value::Choice(i) if *i < names.len() => Ok(*i),
            Value::Int(i) if *i >= 0 && (*i as usize) < names.len() => Ok(*i as usize),
            Value::Str(s) => Self::parse(s, kind),
            _ => Err(format!("expected one of {}", names.join(", "))),
        }
    }
}

macro_rules! tunables {
    ($( $(#[$attr:meta])* $name:ident : $ty:ty = $default:literal, $kind:expr, writable = $w:literal, $doc:literal; )*) => {
        /// Current values of every tunable (see the module doc).
        #[derive(Debug, Clone)]
        pub struct Config { $( $(#[$attr])* pub $name: $ty, )* }

        /// Metadata of every tunable, in declaration order; the index is the MPI_T cvar index.
        pub static TUNABLES: &[Meta] = &[ $( Meta { name: stringify!($name), kind: $kind, default: $default, writable: $w, doc: $doc }, )* ];

        impl Config {
            /// Every tunable at its declared default.
            pub fn defaults() -> Config {
                let mut i = 0usize;
                $( let $name: $ty = <$ty as Tunable>::parse($default, TUNABLES[i].kind).expect("bad default in the tunables table"); i += 1; )*
                let _ = i;
                Config { $( $name, )* }
            }

            /// The value of tunable `index` (an index into [`TUNABLES`]).
            pub fn get(&self, index: usize) -> Option<Value> {
                let mut i = 0usize;
                $( if i == index { return Some(Tunable::to_value(&self.$name)); } i += 1; )*
                let _ = i;
                None
            }

            /// Set tunable `index` from a value; the caller checks `writable` after init.
            pub fn set(&mut self, index: usize, v: &Value) -> Result<(), String> {
                let mut i = 0usize;
                $( if i == index { self.$name = <$ty as Tunable>::from_value(v, TUNABLES[i].kind)?; return Ok(()); } i += 1; )*
                let _ = i;
                Err(format!("no tunable with index {index}"))
            }

            /// Set tunable `index` from text (environment, config file, `--set`).
            pub fn set_text(&mut self, index: usize, text: &str) -> Result<(), String> {
                let mut i = 0usize;
                $( if i == index { self.$name = <$ty as Tunable>::parse(text, TUNABLES[i].kind)?; return Ok(()); } i += 1; )*
                let _ = i;
                Err(format!("no tunable with index {index}"))
            }
        }
    };
}

// The names a user may give choice tunables. The registry owns them, since they are what
// users type; the layers that act on a choice map the index to a type of their own
// (`proto::policy::Protocol`, the collectives' algorithm enums in `mpi::coll::decide`), and a
// test there checks that the two agree. So this module, the floor, imports nothing above it.

/// Choices for `protocol` (the order is `proto::policy::Protocol`'s).
pub const PROTOCOLS: &[&str] = &[
    "static",
    "eager",
    "rendezvous",
    "eager-rendezvous",
    "adaptive",
];
/// Choices for `progress_yield`.
pub const YIELD_MODES: &[&str] = &["auto", "always", "never"];
/// Collective algorithms, by collective (`auto`: the decision table chooses).
pub const BARRIER_ALGS: &[&str] = &[
    "auto",
    "dissemination",
    "two_level",
    "linear",
    "shm",
    "two_level_shm",
];
pub const BCAST_ALGS: &[&str] = &[
    "auto",
    "binomial",
    "scatter_allgather",
    "chain",
    "two_level",
    "linear",
    "shm",
    "two_level_shm",
];
pub const REDUCE_ALGS: &[&str] = &[
    "auto",
    "binomial",
    "linear",
    "two_level",
    "shm",
    "two_level_shm",
];
pub const ALLREDUCE_ALGS: &[&str] = &[
    "auto",
    "recursive_doubling",
    "allgather_reduce",
    "rabenseifner",
    "ring",
    "reduce_bcast",
    "two_level",
    "shm",
    "two_level_shm",
];
pub const GATHER_ALGS: &[&str] = &["auto", "linear", "binomial", "shm", "two_level_shm"];
pub const SCATTER_ALGS: &[&str] = &["auto", "linear", "binomial", "shm", "two_level_shm"];
pub const ALLGATHER_ALGS: &[&str] = &[
    "auto",
    "ring",
    "recursive_doubling",
    "bruck",
    "linear",
    "shm",
    "two_level_shm",
];
pub const ALLTOALL_ALGS: &[&str] = &["auto", "linear", "pairwise", "bruck", "shm"];
pub const REDUCE_SCATTER_ALGS: &[&str] = &["auto", "reduce_scatterv", "ring"];
/// Sources of fast-channel decisions (`chan_policy`; `proto::channels`).
pub const CHAN_POLICIES: &[&str] = &["online", "static"];

/// What begins a phase of the profiler and the schedule (`chan_phases`; `mpi::engine`).
pub const CHAN_PHASES: &[&str] = &["auto", "pcontrol", "barrier", "collective"];
pub const JOB_KEYS: &[&str] = &["auto", "shared", "pairs"];
pub const SCAN_ALGS: &[&str] = &["auto", "recursive_doubling", "linear"];
pub const UDP_SEAL: &[&str] = &["auto", "full"];

const SIZE: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};

tunables! {
    transports: String = "shm,tcp", Kind::Str, writable = false,
        "Transports allowed between ranks, in order of preference: shm (same host), tcp, udp (reliable datagrams: one socket per process for every peer). Ranks on one host use shm when allowed; between the others the first of tcp and udp listed is used; 'tcp' or 'udp' alone forces it everywhere. The self transport always carries messages to the own rank.";
    transport_peers: String = "", Kind::Str, writable = false,
        "Per-peer transport overrides, 'RANKS=LIST;...' with LIST as in transports and RANKS as in 3, 0-7, 1,4-5 or * (ranks of MPI_COMM_WORLD): a pair of ranks uses the first rule naming either of them, else transports. Example: '0=tcp' makes rank 0 talk TCP to everyone.";
    protocol: usize = "adaptive", Kind::Choice(PROTOCOLS), writable = true,
        "Point-to-point protocol policy. adaptive: per peer, the protocol with the lowest expected cost (adaptive_costs_*) given the share of recent messages the peer received preposted and its unexpected data, which receivers report back on every frame; static: size thresholds per transport (*_eager_max); eager, rendezvous, eager-rendezvous: that protocol for every message (experiments). Writable at run time; a communicator's info key protean_protocol overrides it for that communicator.";
    eager_limit: i64 = "-1", Kind::Int { min: -1, max: i64::MAX }, writable = true,
        "Largest message (bytes) sent eagerly on every transport, under the static and adaptive policies alike (it pins the eager boundary); -1 (the default): static uses each transport's own limit (shm_eager_max, tcp_eager_max, self_eager_max), adaptive chooses. Writable at run time: the next message follows it.";
    eager_limit_peers: String = "", Kind::Str, writable = true,
        "Per-peer eager limits, 'RANKS=BYTES;RANKS=BYTES...' with RANKS as in 3, 0-7, 1,4-5 or * (ranks of MPI_COMM_WORLD), the first rule naming the peer wins; they pin the eager boundary for those peers like eager_limit.";
    adaptive_costs_shm: String = "eager=100+0.05,unexpected=0+0.1,pressure=1048576,rndv=700+0.028,split=100,hide=0,lone_eager=86.5+0.0335,lone_rndv=807+0.051", Kind::Str, writable = true,
        "Cost model of the adaptive policy on shared memory, FIXED_NS+NS_PER_BYTE per protocol: eager (receive posted), unexpected (added to an eager message that arrives unexpected; its per-byte part doubles at 'pressure' bytes of recent unexpected data), rndv (rendezvous), late (one number: added to a rendezvous whose receive is not posted when its request arrives), lag (one number: messages sent by the old plan after a peer stops preposting; while it reports every receive preposted, eager must save over the streak so far what lag messages into unposted receives would lose), split (added by an eager-rendezvous prefix), hide (handshake time a prefix hides); lone_eager and lone_rndv: the latency of a lone message (one sent after the peer's last message to us, as in a ping-pong), eager and rndv when absent. protean-tune --p2p fits them all to this machine and writes them into the site file etc/protean.conf; bench/prepost-run --fit and bench/fit-lone print partial fits.";
    adaptive_costs_tcp: String = "eager=2150+0.116,unexpected=0+0.2,pressure=4194304,rndv=4100+0.096,late=1500,split=300,hide=0,lone_eager=6170+0.155,lone_rndv=13500+0.089", Kind::Str, writable = true,
        "Cost model of the adaptive policy on TCP (see adaptive_costs_shm).";
    adaptive_costs_self: String = "eager=50+0.06,unexpected=0+0.06,pressure=1048576,rndv=300+0.03,split=50,hide=0", Kind::Str, writable = true,
        "Cost model of the adaptive policy for messages to the own rank (see adaptive_costs_shm).";
    shm_eager_max: i64 = "8192", SIZE, writable = true,
        "Largest message (bytes) sent eagerly over shared memory when eager_limit is -1; larger ones use rendezvous. Capped by the channel's largest frame.";
    tcp_eager_max: i64 = "65536", SIZE, writable = true,
        "Largest message (bytes) sent eagerly over TCP when eager_limit is -1; larger ones use rendezvous.";
    self_eager_max: i64 = "16384", SIZE, writable = true,
        "Largest message (bytes) to the own rank copied eagerly when eager_limit is -1; larger ones are copied once when matched.";
    eager_rndv_prefix: i64 = "8192", SIZE, writable = true,
        "Bytes sent with the request-to-send under the eager-rendezvous protocol.";
    unexpected_max: i64 = "4g", SIZE, writable = true,
        "Bytes the messages that arrived before their receive was posted may hold in a rank; a sender that pushes them over stops the job with a message naming it (a bound against runaway senders: MPI lets standard sends go eagerly, so the receiver buffers them).";
    unexpected_cache: i64 = "67108864", SIZE, writable = false,
        "Bytes of freed buffers of unexpected messages (those that arrive before their receive is posted) each rank keeps for the next ones; 0 gives them back to the allocator at once, which then faults their pages in again for every burst of unexpected messages.";
    shm_single_copy: bool = "1", Kind::Bool, writable = true,
        "Use single-copy transfers (process_vm_readv) for shared-memory rendezvous when the kernel permits them; otherwise data is pipelined through shared memory.";
    shm_coop_min: i64 = "262144", SIZE, writable = true,
        "Shared-memory rendezvous messages of at least this many bytes are copied by sender and receiver together (cooperative single copy); 0 turns it off.";
    shm_coop_chunk: i64 = "131072", Kind::Int { min: 4096, max: 1 << 30 }, writable = true,
        "Chunk size of cooperative copies: each side claims chunks of this size.";
    shm_fast_channels: i64 = "8", Kind::Int { min: 0, max: 64 }, writable = false,
        "Dedicated per-peer fast channels (shared-memory rings) each rank offers and allocates; which local peers hold them is decided by chan_policy (every peer gets one at start-up when they all fit).";
    chan_policy: usize = "online", Kind::Choice(CHAN_POLICIES), writable = true,
        "Who gets the fast channels when the local peers outnumber them. online: a peer whose messages arrived through the shared queue at least chan_promote_after times within chan_window such arrivals is promoted while a channel is free, else the least recently used channel idle for a window is drained (QUIESCE) and handed to it; a schedule (the schedule tunable) takes precedence in the phases it covers. static: the assignment made at start-up, changed only where a schedule says so. Writable at run time.";
    chan_max: i64 = "-1", Kind::Int { min: -1, max: 64 }, writable = true,
        "Fast channels the channel manager hands out at most (max_fast), up to shm_fast_channels; -1: all of them. Lowering it at run time (MPI_T) drains the surplus.";
    chan_promote_after: i64 = "16", Kind::Int { min: 1, max: i64::MAX }, writable = true,
        "Messages from a peer through the shared queue, within one window, that earn it a fast channel (online policy).";
    chan_window: i64 = "4096", Kind::Int { min: 1, max: i64::MAX }, writable = true,
        "Window of the online channel policy, in messages that arrived through the shared queue: promotion counts restart after each, and a channel that carried nothing for one is idle (may be taken back).";
    profile: String = "", Kind::Str, writable = false,
        "Record a profile of this run: each process writes PATH.<rank> at MPI_Finalize, with the messages and bytes that arrived from each peer in each phase (phases begin as chan_phases says: at each MPI_Pcontrol call, or inferred from collectives over all processes when the program calls none). protean-prof analyze turns profiles into a schedule.";
    chan_phases: usize = "auto", Kind::Choice(CHAN_PHASES), writable = false,
        "What begins a phase of the profile and the schedule. pcontrol: each MPI_Pcontrol call. barrier: also each blocking MPI_Barrier over all processes of the job. collective: also each blocking collective over all processes. auto: as collective until the program's first MPI_Pcontrol, then as pcontrol (a program that marks its phases gets its own marks). Only counted when profile or schedule is set; a schedule is applied with the setting its profile was recorded with.";
    schedule: String = "", Kind::Str, writable = false,
        "Channel schedule (written by protean-prof analyze from profiles of earlier runs) applied at each phase boundary (MPI_Pcontrol, or a collective as chan_phases says): the peers it lists for this process and phase get the fast channels. A schedule from a run of another size is mapped by relative rank position; phases it does not cover follow chan_policy.";
    shm_ring_bytes: i64 = "262144", Kind::Int { min: 4096, max: 1 << 28 }, writable = false,
        "Size of each dedicated fast channel ring in bytes (rounded to a power of two).";
    shm_queue_cells: i64 = "64", Kind::Int { min: 4, max: 1 << 16 }, writable = false,
        "Cells in each rank's shared receive queue.";
    shm_cell_bytes: i64 = "16384", Kind::Int { min: 256, max: 1 << 24 }, writable = false,
        "Bytes per shared receive queue cell (header included).";
    tcp_frag_bytes: i64 = "1048576", Kind::Int { min: 4096, max: 1 << 30 }, writable = true,
        "Size of rendezvous data fragments on TCP.";
    tcp_lanes: String = "auto", Kind::Str, writable = true,
        "Connections (lanes) large messages to a peer are striped over on TCP: auto (one on short links; on links with a round trip of 1 ms or more, doubled while throughput rises by 10%, up to tcp_lanes_max), or a number from 1 to 16. Writable at run time.";
    tcp_lanes_peers: String = "", Kind::Str, writable = true,
        "Per-peer lane settings, RANKS=auto|N rules separated by ';', first match wins (e.g. 1-3=8;*=1).";
    tcp_lanes_max: i64 = "16", Kind::Int { min: 1, max: 16 }, writable = true,
        "Most lanes auto gives a peer.";
    tcp_nodelay: bool = "1", Kind::Bool, writable = false,
        "Disable Nagle's algorithm on TCP connections.";
    tcp_addr: String = "", Kind::Str, writable = false,
        "Address to listen on and publish for TCP connections and UDP datagrams (default: loopback when the process manager places every rank on one node, else the first non-loopback IPv4 address).";
    tcp_fault: String = "", Kind::Str, writable = false,
        "Fault injection for tests: lane K@BYTES resets (RST) lane K of the first peer whose lane K has carried BYTES of bulk data from this process (lane=1@4m). Empty: none.";
    tcp_if: String = "", Kind::Str, writable = false,
        "Interfaces TCP and UDP may use, comma-separated: interface names (eth0) or IPv4 subnets (10.1.0.0/16); the listener binds the first address of the first up interface that matches, in the order given (default: any; tcp_addr overrides it). Like Open MPI's btl_tcp_if_include.";
    job_keys: usize = "auto", Kind::Choice(JOB_KEYS), writable = false,
        "How TCP connections and UDP datagrams between processes are authenticated (the same on every process): shared (one key for the job, drawn by rank 0 and handed out through the process manager's key-value store), pairs (each process publishes an X25519 public key in its business card and each pair derives its own key; nothing secret goes through the store), or auto: shared under Protean's mpirun, whose store crosses hosts sealed, pairs under any other process manager (Hydra, Slurm), whose store crosses hosts in clear.";
    key_log: String = "", Kind::Str, writable = false,
        "Tests and debugging only: a file to which every process appends the keys it authenticates with (the job's key, its X25519 secret, its pair keys), as SSLKEYLOGFILE does for TLS. Whoever reads it can read and forge the job's traffic. Empty: none.";
    tcp_frame_max: i64 = "64m", Kind::Int { min: 65536, max: 1 << 31 }, writable = false,
        "Largest frame payload (bytes) a process accepts on a TCP connection, announced in the connection's handshake; a longer frame is a protocol error that closes the connection. tcp_frag_bytes is capped at it.";
    tcp_sockbuf: i64 = "4194304", SIZE, writable = false,
        "Socket send and receive buffer size for TCP connections (0: kernel default).";
    udp_dgram_bytes: i64 = "0", Kind::Int { min: 0, max: 65507 }, writable = false,
        "Largest UDP datagram (bytes of UDP payload, headers included) a process sends: 0 (auto) is 65507 when it binds loopback (the whole job on one node) and 1472 (a 1500-byte Ethernet frame) otherwise; other values are raised to at least 576. Larger frames are cut into datagrams and put together again.";
    udp_seal: usize = "auto", Kind::Choice(UDP_SEAL), writable = false,
        "How UDP datagrams between processes are protected: full (every datagram authenticated with AES-256-GCM under the pair's or job's key and its payload encrypted), or auto: full across hosts, and on loopback (the whole job on one host) the headers authenticated and the payload in clear as on TCP, taken only from the sending peer's own socket (AES-GCM over every byte costs more than the kernel's copy of it; on loopback only root can read or alter datagrams in flight).";
    udp_sockets: i64 = "1", Kind::Int { min: 1, max: 16 }, writable = false,
        "UDP sockets per process: datagrams to a peer are striped over them (and over the peer's), in turn.";
    udp_sockbuf: i64 = "4194304", SIZE, writable = false,
        "Send and receive buffer size of each UDP socket (0: kernel default; as root, beyond net.core.rmem_max).";
    udp_window: i64 = "0", Kind::Int { min: 0, max: 65536 }, writable = false,
        "Credit each process gives each peer over UDP, in datagrams past the last one received in order, and the largest congestion window: 0 (auto) is 2 MiB of datagrams, at least 64 (64 on loopback's 64 KiB datagrams, 1424 at 1472 bytes).";
    udp_rto_min: i64 = "2000", Kind::Int { min: 1, max: 10_000_000 }, writable = false,
        "Smallest UDP retransmission timeout, in microseconds (the timeout follows measured round trips above it and doubles at each expiry).";
    udp_ack_delay: i64 = "500", Kind::Int { min: 0, max: 1_000_000 }, writable = false,
        "Longest an acknowledgement of UDP data waits (microseconds) for data going back to ride on before it goes alone.";
    accept_timeout: i64 = "0", Kind::Int { min: 0, max: 31_536_000 }, writable = true,
        "Seconds MPI_Comm_accept waits for a process to connect before it fails with MPI_ERR_PORT (0: for ever, as the standard describes); the info key 'timeout' of the call overrides it.";
    connect_timeout: i64 = "60", Kind::Int { min: 1, max: 31_536_000 }, writable = true,
        "Seconds MPI_Comm_connect waits for the port's owner to accept before it fails with MPI_ERR_PORT; the info key 'timeout' of the call overrides it.";
    nameserver: String = "", Kind::Str, writable = false,
        "The URI of a protean-nameserver (protean-ns:SECRET:HOST:PORT, as it writes it into its --report-uri file) or file:PATH of that file; it serves MPI_Publish_name and MPI_Lookup_name to independent jobs. Read by mpirun (the same as its --nameserver option), which forwards its processes' requests there, proving the secret on each connection; an address without the secret is refused. Empty: mpirun serves the names of its own jobs.";
    udp_peer_timeout: i64 = "60", Kind::Int { min: 1, max: 86400 }, writable = false,
        "Seconds a peer may leave UDP data unacknowledged while we retransmit before it is reported failed (ranks that compute without calling MPI do not acknowledge either).";
    udp_buffer_max: i64 = "64m", Kind::Int { min: 1 << 20, max: i64::MAX }, writable = false,
        "Bytes of UDP datagrams a process keeps at most (sent and not acknowledged, and arrived ahead of a gap); beyond it, sends wait and early arrivals are dropped.";
    udp_max_connections: i64 = "8", Kind::Int { min: 0, max: 1024 }, writable = true,
        "Hybrid channels, when transports lists udp before tcp (transports=udp,tcp): every peer starts on datagrams, and the channel manager (chan_policy, chan_promote_after, chan_window) moves the frames of at most this many busiest peers to us onto a TCP connection, and back to datagrams once idle, with every frame in order across the switch. 0: datagrams only (TCP unused). Lowering it at run time (MPI_T) drains the surplus.";
    udp_fault: String = "", Kind::Str, writable = false,
        "For testing only: faults the UDP transport injects into what it sends, 'drop=P,dup=P,reorder=P,seed=N' (probabilities per datagram; a reordered datagram goes after the next one). Example: drop=0.05,dup=0.01,reorder=0.01.";
    rma_fastpath: bool = "1", Kind::Bool, writable = true,
        "One-sided operations on contiguous data at targets whose window memory is mapped here (MPI_Win_allocate and MPI_Win_allocate_shared on one host), and flushes with nothing in flight, take a short path that skips the general one (datatype flattening, staging, progress); 0 sends every operation through the general path (for comparison). Writable at run time.";
    progress_yield: usize = "auto", Kind::Choice(YIELD_MODES), writable = true,
        "Waiting ranks yield the CPU: auto (every pass when ranks on this host outnumber its cores; otherwise only once one wait has lasted 1024 passes, about 0.1-0.3 ms, so that other programs sharing the cores cannot keep the awaited process off the CPU for a time slice), always, or never (busy poll, also in long waits).";
    hostname: String = "", Kind::Str, writable = false,
        "Host identity used to decide which ranks share memory (default: the kernel's host name). Tests set it per rank to emulate several hosts.";
    verbose: i64 = "0", Kind::Int { min: 0, max: 9 }, writable = true,
        "Diagnostic output to stderr: 0 none, 1 connections and reconfigurations, 2+ more.";
    coll_barrier: usize = "auto", Kind::Choice(BARRIER_ALGS), writable = true,
        "MPI_Barrier algorithm: auto (decision file, then the built-in table), dissemination, two_level (gather within each host, dissemination among hosts, release), linear, shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls on communicators spanning hosts: the members of each host meet in a region they share, the hosts' leaders exchange point-to-point; by name or a decision file, auto keeps two_level).";
    coll_bcast: usize = "auto", Kind::Choice(BCAST_ALGS), writable = true,
        "MPI_Bcast algorithm: auto, binomial, scatter_allgather (binomial scatter then ring allgather), chain (pipelined in coll_segment pieces), two_level (among hosts, then within each), linear, shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls on communicators spanning hosts: the members of each host meet in a region they share, the hosts' leaders exchange point-to-point; by name or a decision file, auto keeps two_level).";
    coll_reduce: usize = "auto", Kind::Choice(REDUCE_ALGS), writable = true,
        "MPI_Reduce algorithm: auto, binomial, linear, two_level (commutative operations), shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls on communicators spanning hosts: the members of each host meet in a region they share, the hosts' leaders exchange point-to-point; by name or a decision file, auto keeps two_level).";
    coll_allreduce: usize = "auto", Kind::Choice(ALLREDUCE_ALGS), writable = true,
        "MPI_Allreduce algorithm: auto, recursive_doubling, rabenseifner (reduce-scatter by recursive halving + allgather by recursive doubling), ring, reduce_bcast, two_level (reduce within each host, allreduce among hosts, bcast within each), shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls on communicators spanning hosts: the members of each host meet in a region they share, the hosts' leaders exchange point-to-point; by name or a decision file, auto keeps two_level).";
    coll_gather: usize = "auto", Kind::Choice(GATHER_ALGS), writable = true,
        "MPI_Gather(v) algorithm: auto, linear, binomial (not the v form), shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls, not the v form, on communicators spanning hosts: a region per host, the hosts' leaders exchange point-to-point; by name or a decision file).";
    coll_scatter: usize = "auto", Kind::Choice(SCATTER_ALGS), writable = true,
        "MPI_Scatter(v) algorithm: auto, linear, binomial (not the v form), shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls, not the v form, on communicators spanning hosts: a region per host, the hosts' leaders exchange point-to-point; by name or a decision file).";
    coll_allgather: usize = "auto", Kind::Choice(ALLGATHER_ALGS), writable = true,
        "MPI_Allgather algorithm: auto, ring, recursive_doubling (power-of-two sizes), bruck, linear, shm (through a region the members on one host share; communicators within one host), two_level_shm (blocking calls, not the v form, on communicators spanning hosts: a region per host, the hosts' leaders exchange point-to-point; by name or a decision file).";
    coll_alltoall: usize = "auto", Kind::Choice(ALLTOALL_ALGS), writable = true,
        "MPI_Alltoall algorithm: auto, linear (every message at once), pairwise (one peer per round), bruck (log rounds, small messages), shm (through a region the members on one host share; communicators within one host).";
    coll_reduce_scatter: usize = "auto", Kind::Choice(REDUCE_SCATTER_ALGS), writable = true,
        "MPI_Reduce_scatter(_block) algorithm: auto, reduce_scatterv, ring (commutative operations).";
    coll_scan: usize = "auto", Kind::Choice(SCAN_ALGS), writable = true,
        "MPI_Scan/MPI_Exscan algorithm: auto, recursive_doubling, linear.";
    coll_decision_file: String = "", Kind::Str, writable = false,
        "Decision file (written by protean-tune) choosing collective algorithms by communicator size and message size; empty: the built-in table.";
    coll_segment: i64 = "65536", Kind::Int { min: 512, max: 1 << 30 }, writable = true,
        "Segment size in bytes of pipelined collective algorithms (chain bcast).";
    coll_shm_depth: i64 = "2", Kind::Int { min: 2, max: 8 }, writable = false,
        "Areas per member in a communicator's shared-memory collective region (32 KiB each), used in a ring: how many chunks of a large shm collective may be in flight at once (the communicator's rank 0 decides for all).";
    coll_shm_reduce_direct: i64 = "16384", Kind::Int { min: 0, max: 1 << 40 }, writable = false,
        "Shared-memory reduce and allreduce whose buffer divided by the members has at least this many bytes have each member reduce its part of the elements, reading the other members' inputs and writing the receivers' results straight in their memory (cross-memory attach) in cache-sized steps instead of through the region's areas; 0: never.";
    coll_shm_allgather_direct: i64 = "16384", Kind::Int { min: 0, max: 1 << 40 }, writable = false,
        "Blocks of at least this many bytes of the shared-memory allgather on a host of at most 4 members are read straight from the sending member's memory (cross-memory attach: one copy, one generation, no areas) instead of through the region's areas; 0: never.";
    coll_shm_alltoall_direct: i64 = "8192", Kind::Int { min: 0, max: 1 << 40 }, writable = false,
        "Blocks of at least this many bytes of the shared-memory alltoall are read straight from the sending member's memory (cross-memory attach: one copy, one generation, no areas) instead of through the region's areas; 0: never.";
}

/// Values written (through MPI_T) before MPI_Init; the engine applies them at start-up.
static BEFORE_INIT: std::sync::Mutex<Vec<(usize, Value)>> = std::sync::Mutex::new(Vec::new());

impl Config {
    /// Record a value for tunable `index` to take effect when MPI starts.
    pub fn set_before_init(index: usize, v: Value) -> Result<(), String> {
        let mut probe = Config::defaults();
        probe.set(index, &v)?;
        BEFORE_INIT
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((index, v));
        Ok(())
    }

    /// The configuration as the engine will start with it: environment, then values written
    /// before MPI_Init.
    pub fn effective() -> Result<Config, String> {
        let mut c = Config::from_env()?;
        for (i, v) in BEFORE_INIT.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            c.set(*i, v)?;
        }
        Ok(c)
    }

    /// Index of the tunable called `name`.
    pub fn index_of(name: &str) -> Option<usize> {
        TUNABLES.iter().position(|m| m.name == name)
    }

    /// Defaults, then the site file (`<prefix>/etc/protean.conf`, or `PROTEAN_SITE_CONFIG`),
    /// then the config file named by `PROTEAN_CONFIG`, then `PROTEAN_*` variables. Unknown
    /// `PROTEAN_*` names that look like tunables are reported as warnings.
    pub fn from_env() -> Result<Config, String> {
        let site = match std::env::var_os("PROTEAN_SITE_CONFIG") {
            Some(p) if p.is_empty() => None,
            Some(p) => Some(PathBuf::from(p)),
            None => site_config_path().filter(|p| p.exists()),
        };
        Self::from_lookup_with_site(
            |k| std::env::var(k).ok(),
            std::env::vars().map(|(k, _)| k),
            site.as_deref(),
        )
    }

    /// [`Config::from_env`] with the environment given as a function (for tests).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        all_keys: impl Iterator<Item = String>,
    ) -> Result<Config, String> {
        Self::from_lookup_with_site(lookup, all_keys, None)
    }

    /// [`Config::from_lookup`] with a site file read first.
    pub fn from_lookup_with_site(
        lookup: impl Fn(&str) -> Option<String>,
        all_keys: impl Iterator<Item = String>,
        site: Option<&Path>,
    ) -> Result<Config, String> {
        let mut c = Config::defaults();
        if let Some(path) = site {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("site config {}: {e}", path.display()))?;
            c.apply_file(&path.display().to_string(), &text)?;
        }
        if let Some(path) = lookup("PROTEAN_CONFIG") {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("PROTEAN_CONFIG={path}: {e}"))?;
            c.apply_file(&path, &text)?;
        }
        for (i, m) in TUNABLES.iter().enumerate() {
            if let Some(v) = lookup(&m.env_name()) {
                c.set_text(i, &v)
                    .map_err(|e| format!("{}={v}: {e}", m.env_name()))?;
            }
        }
        const NOT_TUNABLES: &[&str] = &[
            "PROTEAN_CONFIG",
            "PROTEAN_SITE_CONFIG",
            "PROTEAN_JOBID",
            "PROTEAN_LAUNCHER",
            "PROTEAN_GPID_BASE",
            "PROTEAN_UNIVERSE_HOSTS",
            "PROTEAN_CC",
            "PROTEAN_CXX",
        ];
        for k in all_keys {
            if let Some(rest) = k.strip_prefix("PROTEAN_") {
                if !NOT_TUNABLES.contains(&k.as_str())
                    && Self::index_of(&rest.to_ascii_lowercase()).is_none()
                {
                    eprintln!("Protean: warning: {k} is not a known tunable (see protean-info)");
                }
            }
        }
        Ok(c)
    }

    /// A config file's spelling of a tunable's name, as the registry spells it (case, `-`
    /// and `.` do not matter).
    pub fn file_key(k: &str) -> String {
        k.trim().to_ascii_lowercase().replace(['-', '.'], "_")
    }

    /// Apply the `name = value` lines of a config file (`#` starts a comment).
    pub fn apply_file(&mut self, path: &str, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("{path}:{}: expected 'name = value'", n + 1))?;
            let k = Self::file_key(k);
            let i = Self::index_of(&k)
                .ok_or_else(|| format!("{path}:{}: unknown tunable '{k}'", n + 1))?;
            self.set_text(i, v)
                .map_err(|e| format!("{path}:{}: {k}: {e}", n + 1))?;
        }
        Ok(())
    }
}

/// A set of ranks: `3`, `0-7`, `1,4-5`, `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankSet(Vec<(u32, u32)>);

impl RankSet {
    pub fn parse(text: &str) -> Result<RankSet, String> {
        let mut v = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part == "*" {
                v.push((0, u32::MAX));
                continue;
            }
            let bad = || format!("'{part}' is not a rank or a rank range (A-B)");
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                ),
                None => {
                    let a = part.parse().map_err(|_| bad())?;
                    (a, a)
                }
            };
            if a > b {
                return Err(bad());
            }
            v.push((a, b));
        }
        Ok(RankSet(v))
    }

    pub fn contains(&self, r: u32) -> bool {
        self.0.iter().any(|&(a, b)| a <= r && r <= b)
    }
}

/// Rules `RANKS=VALUE;RANKS=VALUE;...`, first match wins (per-peer overrides).
pub fn parse_rules<T>(
    text: &str,
    value: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<(RankSet, T)>, String> {
    let mut rules = Vec::new();
    for rule in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (ranks, v) = rule
            .split_once('=')
            .ok_or_else(|| format!("rule '{rule}' is not RANKS=VALUE"))?;
        rules.push((RankSet::parse(ranks)?, value(v.trim())?));
    }
    Ok(rules)
}

/// The site config file of this installation: `etc/protean.conf` beside the `lib/` (or
/// `bin/`) directory of the object this code is linked into — libmpi.so for MPI programs, the
/// executable for the tools. Like Open MPI's `etc/openmpi-mca-params.conf`, it holds settings
/// for every job of the installation; `protean-tune --p2p` writes the measured cost models of
/// the adaptive policy there.
pub fn site_config_path() -> Option<PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = site_config_path as *const libc::c_void;
    // SAFETY: dladdr only fills `info`; dli_fname, when set, is a NUL-terminated string owned
    // by the dynamic loader for as long as the object stays loaded (it contains this code).
    let file = if unsafe { libc::dladdr(here, &mut info) } != 0 && !info.dli_fname.is_null() {
        let f = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
        PathBuf::from(std::ffi::OsStr::from_bytes(f.to_bytes()))
    } else {
        PathBuf::new()
    };
    // The main program's entry is often an empty or bare name.
    let file = if file.as_os_str().is_empty() || file.parent() == Some(Path::new("")) {
        std::env::current_exe().ok()?
    } else {
        file
    };
    let file = std::fs::canonicalize(file).ok()?;
    Some(file.parent()?.parent()?.join("etc").join("protean.conf"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(
            |k| m.get(k).cloned(),
            m.keys().cloned().collect::<Vec<_>>().into_iter(),
        )
    }

    #[test]
    fn defaults_parse() {
        let c = Config::defaults();
        assert_eq!(c.shm_eager_max, 8192);
        assert_eq!(c.eager_limit, -1);
        assert_eq!(c.transports, "shm,tcp");
        assert_eq!(PROTOCOLS[c.protocol], "adaptive");
        assert!(c.shm_single_copy);
    }

    #[test]
    fn site_file_then_config_file_then_environment() {
        let dir = std::env::temp_dir().join(format!("protean-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let site = dir.join("site.conf");
        let user = dir.join("user.conf");
        std::fs::write(
            &site,
            "shm_eager_max = 1k\ntcp_eager_max = 2k # site\nprotocol = eager\n",
        )
        .unwrap();
        std::fs::write(&user, "tcp_eager_max = 3k\n").unwrap();
        let user_s = user.display().to_string();
        let env: HashMap<String, String> = [
            ("PROTEAN_CONFIG".to_string(), user_s),
            ("PROTEAN_PROTOCOL".to_string(), "static".to_string()),
        ]
        .into();
        let c = Config::from_lookup_with_site(
            |k| env.get(k).cloned(),
            env.keys().cloned().collect::<Vec<_>>().into_iter(),
            Some(&site),
        )
        .unwrap();
        assert_eq!(c.shm_eager_max, 1024);
        assert_eq!(c.tcp_eager_max, 3072);
        assert_eq!(PROTOCOLS[c.protocol], "static");
        std::fs::write(&site, "no_such_thing = 1\n").unwrap();
        let e =
            Config::from_lookup_with_site(|_| None, std::iter::empty(), Some(&site)).unwrap_err();
        assert!(
            e.contains("site.conf:1: unknown tunable 'no_such_thing'"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // The tools find their installation's etc/ from their own binary.
        let p = site_config_path().expect("a path");
        assert!(p.ends_with("etc/protean.conf"), "{}", p.display());
    }

    #[test]
    fn env_overrides_with_suffixes() {
        let c = from(&[
            ("PROTEAN_SHM_EAGER_MAX", "4k"),
            ("PROTEAN_PROTOCOL", "Rendezvous"),
        ])
        .unwrap();
        assert_eq!(c.shm_eager_max, 4096);
        assert_eq!(PROTOCOLS[c.protocol], "rendezvous");
    }

    #[test]
    fn bad_values_are_reported_with_the_variable() {
        let e = from(&[("PROTEAN_PROTOCOL", "fast")]).unwrap_err();
        assert!(e.contains("PROTEAN_PROTOCOL=fast"), "{e}");
        let e = from(&[("PROTEAN_SHM_FAST_CHANNELS", "1000")]).unwrap_err();
        assert!(e.contains("outside the range"), "{e}");
        let e = from(&[("PROTEAN_SHM_SINGLE_COPY", "maybe")]).unwrap_err();
        assert!(e.contains("not a boolean"), "{e}");
    }

    #[test]
    fn get_set_roundtrip_through_values() {
        let mut c = Config::defaults();
        let i = Config::index_of("tcp_eager_max").unwrap();
        c.set(i, &Value::Int(1234)).unwrap();
        assert_eq!(c.get(i), Some(Value::Int(1234)));
        assert!(c.set(i, &Value::Int(-1)).is_err());
        let p = Config::index_of("protocol").unwrap();
        c.set(p, &Value::Int(2)).unwrap();
        assert_eq!(PROTOCOLS[c.protocol], "rendezvous");
        assert!(c.get(TUNABLES.len()).is_none());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("0x10"), Some(16));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999999999999g"), None);
    }
}
