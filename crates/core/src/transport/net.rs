//! The dispatcher: the transports of one process, seen by the protocol layer as one
//! [`Transport`].
//!
//! Each peer has a route chosen at setup (coarse-grained reconfiguration: self for our own
//! process, shared memory for processes on this host when allowed, else TCP or UDP, whichever
//! `transports` lists first). Every call
//! dispatches on the peer's route with a match, not a virtual call, and calls nothing but the
//! [`Transport`] trait of the transport behind it; a new transport adds a route, a field and
//! an arm to [`on_route!`].

use std::net::SocketAddr;

use super::hybrid::{self, Action, Hybrid, Path, Through};
use super::selfloop::SelfLoop;
use super::shm::{Geometry, Shm};
use super::tcp::lanes::Mode;
use super::tcp::Tcp;
use super::tcp::MAX_LANES;
use super::udp::fault::Faults;
use super::udp::rel::Reliability;
use super::udp::{Settings, Udp};
use super::{
    Caps, ChannelCounters, ChannelState, Copied, CopyError, FrameSink, Gpid, Region, Route,
    SendError, Sent, Span, Token, Transport, Usage, HEADER_LEN,
};
use crate::config::{parse_rules, Config, RankSet};
use crate::error::{ErrorClass, MpiError};
use crate::runtime::bootstrap::{io_err, Boot};
use crate::runtime::keys::Keys;

pub struct Net {
    me: Gpid,
    routes: Vec<Route>,
    own: SelfLoop,
    shm: Option<Shm>,
    tcp: Option<Tcp>,
    udp: Option<Udp>,
    /// Hybrid channels (`transports=udp,tcp`): datagrams for every peer it covers, TCP
    /// connections for the busiest (see `hybrid`).
    hybrid: Option<Hybrid>,
}

/// `on_route!(net, peer, t => expr, unreachable)`: evaluate `expr` with `t` the transport
/// that reaches `peer`, or `unreachable` when none does.
macro_rules! on_route {
    ($net:expr, $peer:expr, $t:ident => $e:expr, $none:expr) => {
        match $net.routes.get(($peer).idx()).copied() {
            Some(Route::Shm) => match $net.shm.as_mut() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Tcp) => match $net.tcp.as_mut() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Udp) => match $net.udp.as_mut() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::SelfLoop) => {
                let $t = &mut $net.own;
                $e
            }
            Some(Route::Unreachable) | None => $none,
        }
    };
}

/// The same for `&self` methods.
macro_rules! on_route_ref {
    ($net:expr, $peer:expr, $t:ident => $e:expr, $none:expr) => {
        match $net.routes.get(($peer).idx()).copied() {
            Some(Route::Shm) => match $net.shm.as_ref() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Tcp) => match $net.tcp.as_ref() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Udp) => match $net.udp.as_ref() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::SelfLoop) => {
                let $t = &$net.own;
                $e
            }
            Some(Route::Unreachable) | None => $none,
        }
    };
}

fn unreachable(peer: Gpid) -> SendError {
    SendError::Failed(format!("no transport reaches process {peer}"))
}

/// Cooperative-copy slots each process offers (large sends in flight at once that may use it).
const COOP_SLOTS: usize = 64;

/// `tcp_fault`: `lane=K@BYTES` (BYTES with an optional k, m or g).
fn parse_fault(text: &str) -> std::result::Result<(u8, u64), String> {
    let bad = || format!("'{text}' is not lane=K@BYTES (lane=1@4m)");
    let spec = text.trim().strip_prefix("lane=").ok_or_else(bad)?;
    let (k, b) = spec.split_once('@').ok_or_else(bad)?;
    let lane = k
        .trim()
        .parse::<u8>()
        .ok()
        .filter(|k| *k < MAX_LANES)
        .ok_or_else(bad)?;
    let after = crate::config::parse_size(b.trim())
        .filter(|n| *n >= 0)
        .ok_or_else(bad)?;
    Ok((lane, after as u64))
}

/// The lane mode for TCP peers and the per-peer rules, from the tunables.
fn lane_settings(cfg: &Config) -> std::result::Result<(Mode, Vec<(RankSet, Mode)>), String> {
    let max = cfg.tcp_lanes_max.clamp(1, MAX_LANES as i64) as u8;
    let mode = Mode::parse(&cfg.tcp_lanes, max).map_err(|e| format!("tcp_lanes: {e}"))?;
    let rules = parse_rules(&cfg.tcp_lanes_peers, |v| Mode::parse(v, max))
        .map_err(|e| format!("tcp_lanes_peers: {e}"))?;
    Ok((mode, rules))
}

/// `transports`-style list: `shm,tcp`, `udp`, ...
fn transport_list(text: &str) -> std::result::Result<Vec<&'static str>, String> {
    let mut v = Vec::new();
    for t in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        v.push(match t.to_ascii_lowercase().as_str() {
            "shm" => "shm",
            "tcp" => "tcp",
            "udp" => "udp",
            "self" => "self",
            _ => return Err(format!("unknown transport '{t}' (known: shm, tcp, udp)")),
        });
    }
    Ok(v)
}

impl Net {
    /// Open the transports of this process and choose the route to every other: TCP listener
    /// and UDP sockets (when they may be used), business-card exchange, shared memory among
    /// the processes of each host (create, barrier, map the peers', barrier, unlink), then per
    /// peer self, shm (same host, when allowed) or the first of TCP and UDP the settings
    /// list. Every process of the job takes part in every barrier. `R` is the reliability
    /// machine the UDP transport runs (the protocol layer's: see `udp::rel`).
    pub fn open<R: Reliability + 'static>(
        boot: &mut Boot,
        cfg: &Config,
    ) -> crate::error::Result<Net> {
        let cfg_err = |name: &str, why: String| {
            MpiError::new(ErrorClass::Other, format!("PROTEAN_{name}: {why}"))
        };
        let allowed = transport_list(&cfg.transports).map_err(|e| cfg_err("TRANSPORTS", e))?;
        // Per-peer overrides: the first rule naming either end of a pair decides for both.
        let peer_rules = parse_rules(&cfg.transport_peers, transport_list)
            .map_err(|e| cfg_err("TRANSPORT_PEERS", e))?;
        let (rank, size) = (boot.rank, boot.size);
        let me = boot.me();
        let base = boot.base;
        let nprocs = boot.nprocs();
        let allowed_for = |r: Gpid| -> &[&str] {
            peer_rules
                .iter()
                .find(|(s, _)| s.contains(me.get()) || s.contains(r.get()))
                .map_or(&allowed[..], |(_, l)| &l[..])
        };
        let any_allows =
            |t: &str| allowed.contains(&t) || peer_rules.iter().any(|(_, l)| l.contains(&t));
        let allow_shm = any_allows("shm");
        let allow_tcp = any_allows("tcp");
        let allow_udp = any_allows("udp");

        // The listener binds the address its card advertises: loopback when every process of
        // the job is on this node, so nothing off the machine can even connect.
        let mut tcp = None;
        let mut bind = std::net::Ipv4Addr::LOCALHOST;
        if boot.is_job() && (allow_tcp || allow_udp) {
            bind = Boot::listen_addr(cfg, boot.one_node == Some(true))
                .map_err(|e| cfg_err("TCP_IF", e))?;
        }
        if boot.is_job() && allow_tcp {
            tcp = Some(
                Tcp::new(
                    me,
                    bind,
                    cfg.tcp_nodelay,
                    cfg.tcp_sockbuf as usize,
                    cfg.tcp_frag_bytes as usize,
                    cfg.tcp_frame_max as usize,
                    cfg.verbose > 0,
                )
                .map_err(|e| io_err("cannot open a TCP listener", e))?,
            );
        }
        // UDP sockets bind the same address: datagrams come from nowhere else either.
        let mut udp = None;
        if boot.is_job() && allow_udp {
            let faults = Faults::parse(&cfg.udp_fault).map_err(|e| cfg_err("UDP_FAULT", e))?;
            let settings = Settings {
                sockets: cfg.udp_sockets as usize,
                sockbuf: cfg.udp_sockbuf as usize,
                dgram: cfg.udp_dgram_bytes as usize,
                buffer_max: cfg.udp_buffer_max as usize,
                faults,
                clear_on_loopback: crate::config::UDP_SEAL[cfg.udp_seal] == "auto",
                verbose: cfg.verbose > 0,
            };
            let rel = Box::new(R::new(cfg, nprocs));
            udp = Some(
                Udp::new(me, bind, &settings, rel)
                    .map_err(|e| io_err("cannot open a UDP socket", e))?,
            );
        }
        boot.exchange(
            tcp.as_ref().map(|t| SocketAddr::from((bind, t.port()))),
            udp.as_ref().map_or(&[][..], |u| u.addrs()),
        )?;
        if let (Some(t), Some(keys)) = (tcp.as_mut(), boot.keys.as_ref()) {
            t.start(keys.clone(), nprocs);
            let (mode, rules) = lane_settings(cfg).map_err(|e| cfg_err("TCP_LANES", e))?;
            t.set_lanes(mode, rules);
            if !cfg.tcp_fault.is_empty() {
                let (lane, after) =
                    parse_fault(&cfg.tcp_fault).map_err(|e| cfg_err("TCP_FAULT", e))?;
                t.set_fault(lane, after);
            }
        }
        if let (Some(u), Some(keys)) = (udp.as_mut(), boot.keys.as_ref()) {
            u.start(keys.clone(), nprocs);
        }
        let local = boot.local();

        // Shared memory among the processes of this host. The PMI barriers are collective over
        // the whole job: every process takes part when any host has several processes, also
        // one alone on its host (with three processes on two hosts, the single one's absence
        // would stop the other two forever).
        let mut shm = None;
        if allow_shm && boot.is_job() && boot.shared_somewhere() {
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
                    Shm::create(&boot.jobid, me, &local, g)
                        .map_err(|e| io_err("cannot create the shared-memory segment", e))?,
                );
            }
            boot.barrier()?;
            if let Some(s) = s.as_mut() {
                s.attach(&local, nprocs)
                    .map_err(|e| io_err("cannot map a peer's shared-memory segment", e))?;
            }
            boot.barrier()?;
            if let Some(s) = s.as_mut() {
                s.unlink();
                s.set_copy(cfg.shm_coop_min as usize, cfg.shm_coop_chunk as usize);
            }
            shm = s;
        }

        // The processes of earlier jobs stay unreachable until a spawn or a connection
        // introduces them (`Net::add_peers`).
        let mut routes = vec![Route::Unreachable; nprocs];
        // Hybrid channels: a pair whose list names udp before tcp, both reaching the peer.
        let mut eligible = vec![false; nprocs];
        for rank_r in 0..size {
            let i = rank_r as usize;
            let r = base.offset(rank_r);
            let pair = allowed_for(r);
            // Every peer with a card is reachable by each transport it publishes, whichever
            // route it gets (a channel manager may move it later).
            if let Some(Some(c)) = boot.cards.get(i).filter(|_| rank_r != rank) {
                if let (Some(t), Some(a)) = (tcp.as_mut(), c.tcp) {
                    t.set_addr(r, a);
                }
                if let Some(u) = udp.as_mut().filter(|_| !c.udp.is_empty()) {
                    u.set_addrs(r, &c.udp);
                }
            }
            let net_route = pair.iter().find_map(|t| match *t {
                "tcp" if tcp.as_ref().is_some_and(|t| t.reaches(r)) => Some(Route::Tcp),
                "udp" if udp.as_ref().is_some_and(|u| u.reaches(r)) => Some(Route::Udp),
                _ => None,
            });
            routes[r.idx()] = if rank_r == rank {
                Route::SelfLoop
            } else if pair.contains(&"shm") && shm.as_ref().is_some_and(|s| s.reaches(r)) {
                Route::Shm
            } else {
                net_route.unwrap_or(Route::Unreachable)
            };
            let pos = |t: &str| pair.iter().position(|x| *x == t);
            eligible[r.idx()] = routes[r.idx()] == Route::Udp
                && cfg.udp_max_connections > 0
                && matches!((pos("udp"), pos("tcp")), (Some(u), Some(t)) if u < t)
                && tcp.as_ref().is_some_and(|t| t.reaches(r));
        }
        if let Some(r) = routes[base.idx()..]
            .iter()
            .position(|r| *r == Route::Unreachable)
        {
            return Err(MpiError::new(
                ErrorClass::Other,
                format!(
                    "no transport reaches rank {r} (host {}) from rank {rank} (host {}) with PROTEAN_TRANSPORTS={}{}",
                    boot.hosts[r],
                    boot.hostname,
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
        // The same for UDP: its sockets would only be read for nothing.
        let hybrid = eligible.contains(&true);
        if !routes.contains(&Route::Tcp) && !hybrid {
            tcp = None;
        }
        if !routes.contains(&Route::Udp) {
            udp = None;
        }
        let mut net = Net::new(me, routes, shm, tcp, udp);
        if hybrid {
            // One connection per peer: a frame striped onto another lane could arrive after
            // the SWITCH that follows it on the first.
            if let Some(t) = net.tcp.as_mut() {
                t.set_lanes(Mode::Fixed(1), Vec::new());
            }
            net.hybrid = Some(Hybrid::new(cfg.udp_max_connections as usize, eligible));
        }
        Ok(net)
    }

    /// The transports of process `me`, and the route to each process (indexed by gpid).
    pub fn new(
        me: Gpid,
        routes: Vec<Route>,
        shm: Option<Shm>,
        tcp: Option<Tcp>,
        udp: Option<Udp>,
    ) -> Net {
        Net {
            me,
            routes,
            own: SelfLoop::new(me),
            shm,
            tcp,
            udp,
            hybrid: None,
        }
    }

    /// Does the hybrid scheme (datagrams, connections for the busiest) cover `peer`?
    pub fn hybrid_covers(&self, peer: Gpid) -> bool {
        self.hybrid.as_ref().is_some_and(|h| h.covers(peer))
    }

    /// Carry out what the hybrid channels asked for in the last pass: control records, and
    /// a peer's switch (SWITCH by the old route, then the new route, and its caps told).
    fn hybrid_actions<S: FrameSink>(&mut self, sink: &mut S) {
        let Some(h) = self.hybrid.as_mut() else {
            return;
        };
        if !h.has_actions() {
            return;
        }
        for a in h.take_actions() {
            match a {
                Action::Send(p, kind) => {
                    // A peer that cannot be reached any more is reported by its transport.
                    let _ = self.send(p, &hybrid::record(kind), &[], &[], Token::NONE);
                }
                Action::Switch(p, to) => {
                    let sw = hybrid::record(hybrid::SWITCH);
                    if self.send(p, &sw, &[], &[], Token::NONE).is_err() {
                        continue;
                    }
                    self.routes[p.idx()] = match to {
                        Path::Conn => Route::Tcp,
                        Path::Dgram => Route::Udp,
                    };
                    if let Some(h) = self.hybrid.as_mut() {
                        h.switched(p, to);
                    }
                    let caps = self.caps(p);
                    sink.on_caps(p, caps);
                }
            }
        }
    }

    pub fn me(&self) -> Gpid {
        self.me
    }

    /// The route to every process, by gpid.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route to `peer`.
    #[inline]
    pub fn route(&self, peer: Gpid) -> Route {
        self.routes
            .get(peer.idx())
            .copied()
            .unwrap_or(Route::Unreachable)
    }

    /// Is a transport of this kind open?
    pub fn has(&self, r: Route) -> bool {
        match r {
            Route::SelfLoop => true,
            Route::Shm => self.shm.is_some(),
            Route::Tcp => self.tcp.is_some(),
            Route::Udp => self.udp.is_some(),
            Route::Unreachable => false,
        }
    }

    /// Largest payload of a frame sent over TCP (`tcp_frag_bytes`, writable at run time).
    pub fn set_tcp_frag(&mut self, frag: usize) {
        if let Some(t) = self.tcp.as_mut() {
            t.set_frag(frag);
        }
    }

    /// Dedicated channels the transport of route `r` offers (0 where it offers none).
    pub fn channel_slots_of(&self, r: Route) -> usize {
        match r {
            Route::Shm => self.shm.as_ref().map_or(0, |s| s.channel_slots()),
            Route::Tcp => self.tcp.as_ref().map_or(0, |t| t.channel_slots()),
            Route::Udp => self.hybrid.as_ref().map_or(0, |h| h.slots()),
            Route::SelfLoop => self.own.channel_slots(),
            Route::Unreachable => 0,
        }
    }

    /// Lanes on TCP (`tcp_lanes`, `tcp_lanes_peers`, `tcp_lanes_max`); Err names the problem.
    /// Under hybrid channels every peer keeps one connection.
    pub fn set_tcp_lanes(&mut self, cfg: &Config) -> std::result::Result<(), String> {
        let (mode, rules) = lane_settings(cfg)?;
        if let Some(t) = self.tcp.as_mut().filter(|_| self.hybrid.is_none()) {
            t.set_lanes(mode, rules);
        }
        Ok(())
    }

    /// Where processes of other jobs (spawned, or connected) reach our TCP listener, opening
    /// one (with the job's `key`) when there is none. They may be on any host, so it is on
    /// the address [`Boot::listen_addr`] chooses for a job spanning hosts (the host's address,
    /// unless `tcp_addr` or `tcp_if` says otherwise); where the job's own listener is on
    /// loopback (a job on one host), a second listener opens there. Err when the settings
    /// leave TCP out.
    pub fn ensure_tcp(
        &mut self,
        cfg: &Config,
        key: [u8; 32],
        nprocs: usize,
    ) -> crate::error::Result<SocketAddr> {
        let allowed = transport_list(&cfg.transports).unwrap_or_default();
        if !allowed.contains(&"tcp") {
            return Err(MpiError::new(
                ErrorClass::Other,
                format!(
                    "processes of other jobs are reached over TCP, which PROTEAN_TRANSPORTS={} leaves out",
                    cfg.transports
                ),
            ));
        }
        let bind = Boot::listen_addr(cfg, false)
            .map_err(|e| MpiError::new(ErrorClass::Other, format!("PROTEAN_TCP_IF: {e}")))?;
        if let Some(t) = &mut self.tcp {
            if t.addr().ip().is_loopback() && !bind.is_loopback() {
                return t
                    .listen_also(bind)
                    .map_err(|e| io_err("cannot open a TCP listener for other hosts", e));
            }
            return Ok(t.outside_addr());
        }
        let mut t = Tcp::new(
            self.me,
            bind,
            cfg.tcp_nodelay,
            cfg.tcp_sockbuf as usize,
            cfg.tcp_frag_bytes as usize,
            cfg.tcp_frame_max as usize,
            cfg.verbose > 0,
        )
        .map_err(|e| io_err("cannot open a TCP listener", e))?;
        t.start(Keys::Shared(key), nprocs);
        let (mode, rules) = lane_settings(cfg)
            .map_err(|e| MpiError::new(ErrorClass::Other, format!("PROTEAN_TCP_LANES: {e}")))?;
        t.set_lanes(mode, rules);
        let a = t.addr();
        self.tcp = Some(t);
        Ok(a)
    }

    /// The descriptor of our shared-memory segment for processes of other jobs on this host,
    /// creating the transport (a segment with no peer yet) when the job did not need one.
    /// None when the settings leave shared memory out or the segment cannot be made.
    pub fn ensure_shm(&mut self, cfg: &Config, jobid: &str, nprocs: usize) -> Option<i32> {
        let allowed = transport_list(&cfg.transports).unwrap_or_default();
        if !allowed.contains(&"shm") || !cfg.transport_peers.is_empty() {
            return None;
        }
        if self.shm.is_none() {
            let g = Geometry::new(
                cfg.shm_fast_channels as usize,
                cfg.shm_ring_bytes as usize,
                cfg.shm_queue_cells as usize,
                cfg.shm_cell_bytes as usize,
                COOP_SLOTS,
            );
            let mut s = Shm::create(jobid, self.me, &[self.me], g).ok()?;
            s.attach(&[], nprocs).ok()?;
            s.unlink();
            s.set_copy(cfg.shm_coop_min as usize, cfg.shm_coop_chunk as usize);
            self.shm = Some(s);
        }
        self.shm.as_ref().map(|s| s.segment_fd().1)
    }

    /// A process of another job on this host joins over shared memory: map its segment
    /// (`pid`, `fd`: see [`Shm::attach_dynamic`]) and route to it by shared memory. Err: the
    /// segment cannot be mapped (the caller routes by TCP instead).
    pub fn add_shm_peer(
        &mut self,
        peer: Gpid,
        pid: u32,
        fd: i32,
    ) -> std::result::Result<(), String> {
        let n = self.routes.len().max(peer.idx() + 1);
        let s = self.shm.as_mut().ok_or("no shared-memory transport")?;
        s.attach_dynamic(peer, pid, fd, n)
            .map_err(|e| format!("cannot map the segment of process {peer} (pid {pid}): {e}"))?;
        self.routes.resize(n, Route::Unreachable);
        self.routes[peer.idx()] = Route::Shm;
        Ok(())
    }

    /// Process `peer` (our alias for it) belongs to an independent job: TCP connections with
    /// it prove `key`, the key of the pair of jobs, and name us `me_there`, our alias in its
    /// job ([`Tcp::set_foreign`]). Call before [`Net::add_peers`]; such peers are reached by
    /// TCP only. Err when there is no TCP transport.
    pub fn set_foreign(
        &mut self,
        peer: Gpid,
        key: [u8; 32],
        me_there: Gpid,
    ) -> std::result::Result<(), String> {
        let t = self
            .tcp
            .as_mut()
            .ok_or("processes of independent jobs are reached over TCP, and it is not open")?;
        t.set_foreign(peer, key, me_there);
        Ok(())
    }

    /// Open the TCP connection to `peer` now rather than at the first frame
    /// ([`Tcp::connect_now`]).
    pub fn connect_now(&mut self, peer: Gpid) -> std::result::Result<(), String> {
        match self.tcp.as_mut() {
            Some(t) => t
                .connect_now(peer)
                .map_err(|e| format!("cannot connect to process {peer}: {e}")),
            None => Err("no TCP transport".into()),
        }
    }

    /// Processes of another job join the table: each reached over TCP at its address (the
    /// listener must be open, [`Net::ensure_tcp`]), unless already routed by shared memory
    /// ([`Net::add_shm_peer`]). The table grows to the largest gpid.
    pub fn add_peers(&mut self, peers: &[(Gpid, SocketAddr)]) {
        let n = peers
            .iter()
            .map(|(g, _)| g.idx() + 1)
            .max()
            .unwrap_or(0)
            .max(self.routes.len());
        self.routes.resize(n, Route::Unreachable);
        if let Some(t) = self.tcp.as_mut() {
            t.grow(n);
            for &(g, a) in peers {
                if g != self.me {
                    t.set_addr(g, a);
                    if self.routes[g.idx()] == Route::Unreachable {
                        self.routes[g.idx()] = Route::Tcp;
                    }
                }
            }
        }
    }

    /// A process of another job left the table: unmap its segment, close the connections to
    /// it, and make it unreachable.
    pub fn drop_peer(&mut self, peer: Gpid) {
        if let Some(s) = self.shm.as_mut() {
            s.detach(peer);
        }
        if let Some(t) = self.tcp.as_mut() {
            t.drop_peer(peer);
        }
        if let Some(r) = self.routes.get_mut(peer.idx()) {
            *r = Route::Unreachable;
        }
    }

    /// Cooperative single copy on shared memory (`shm_coop_min`, `shm_coop_chunk`).
    pub fn set_shm_copy(&mut self, min: usize, chunk: usize) {
        if let Some(s) = self.shm.as_mut() {
            s.set_copy(min, chunk);
        }
    }
}

impl Transport for Net {
    fn name(&self) -> &'static str {
        "net"
    }

    #[inline]
    fn reaches(&self, peer: Gpid) -> bool {
        on_route_ref!(self, peer, t => t.reaches(peer), false)
    }

    #[inline]
    fn caps(&self, peer: Gpid) -> Caps {
        on_route_ref!(self, peer, t => t.caps(peer), Caps::NONE)
    }

    #[inline]
    fn queued(&self, peer: Gpid) -> usize {
        on_route_ref!(self, peer, t => t.queued(peer), 0)
    }

    #[inline]
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        on_route!(self, peer, t => t.send(peer, hdr, small, body, token), Err(unreachable(peer)))
    }

    fn send_any(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        on_route!(self, peer, t => t.send_any(peer, hdr, small, body, token), Err(unreachable(peer)))
    }

    #[inline]
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        on_route!(self, peer, t => t.try_send(peer, hdr, body), false)
    }

    /// Poll every transport and hand arrived frames to the protocols.
    #[inline]
    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        if let Some(shm) = self.shm.as_mut() {
            n += shm.progress(sink);
        }
        if let Some(hy) = self.hybrid.as_mut() {
            // Deliveries by TCP and UDP pass through the hybrid channels' hand-over.
            if let Some(tcp) = self.tcp.as_mut() {
                n += tcp.progress(&mut Through {
                    hy: &mut *hy,
                    path: Path::Conn,
                    sink: &mut *sink,
                });
            }
            if let Some(udp) = self.udp.as_mut() {
                n += udp.progress(&mut Through {
                    hy,
                    path: Path::Dgram,
                    sink: &mut *sink,
                });
            }
            self.hybrid_actions(sink);
        } else {
            if let Some(tcp) = self.tcp.as_mut() {
                n += tcp.progress(sink);
            }
            if let Some(udp) = self.udp.as_mut() {
                n += udp.progress(sink);
            }
        }
        if self.own.has_work() {
            n += self.own.progress(sink);
        }
        n
    }

    fn has_work(&self) -> bool {
        self.own.has_work()
            || self.hybrid.as_ref().is_some_and(|h| h.has_actions())
            || self.shm.as_ref().is_some_and(|s| s.has_work())
            || self.tcp.as_ref().is_some_and(|t| t.has_work())
            || self.udp.as_ref().is_some_and(|u| u.has_work())
    }

    #[inline]
    fn hold(&mut self) {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.hold();
        }
        if let Some(udp) = self.udp.as_mut() {
            udp.hold();
        }
    }

    #[inline]
    fn release<S: FrameSink>(&mut self, sink: &mut S) {
        if let Some(hy) = self.hybrid.as_mut() {
            if let Some(tcp) = self.tcp.as_mut() {
                tcp.release(&mut Through {
                    hy: &mut *hy,
                    path: Path::Conn,
                    sink: &mut *sink,
                });
            }
            if let Some(udp) = self.udp.as_mut() {
                udp.release(&mut Through {
                    hy,
                    path: Path::Dgram,
                    sink: &mut *sink,
                });
            }
            return;
        }
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.release(sink);
        }
        if let Some(udp) = self.udp.as_mut() {
            udp.release(sink);
        }
    }

    fn expose(&mut self, peer: Gpid, buf: Span) -> Option<Region> {
        on_route!(self, peer, t => t.expose(peer, buf), None)
    }

    fn retract(&mut self, peer: Gpid, region: &Region) {
        on_route!(self, peer, t => t.retract(peer, region), ())
    }

    /// Only shared memory offers windows to every peer (the peers on this host).
    fn expose_any(&mut self, buf: Span) -> Option<Region> {
        self.shm.as_mut().and_then(|s| s.expose_any(buf))
    }

    fn get(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        on_route!(self, peer, t => t.get(peer, region, offset, dst, token),
            Err(CopyError::Refused(format!("no transport reaches process {peer}"))))
    }

    fn put(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        src: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        on_route!(self, peer, t => t.put(peer, region, offset, src, token),
            Err(CopyError::Refused(format!("no transport reaches process {peer}"))))
    }

    fn stats(&self) -> super::Stats {
        let mut s = super::Stats::default();
        if let Some(t) = self.tcp.as_ref() {
            s += t.stats();
        }
        if let Some(t) = self.shm.as_ref() {
            s += t.stats();
        }
        if let Some(u) = self.udp.as_ref() {
            s += u.stats();
        }
        s
    }

    /// Dedicated channels of every transport; [`Net::channel_slots_of`] gives one route's.
    fn channel_slots(&self) -> usize {
        self.shm.as_ref().map_or(0, |s| s.channel_slots())
            + self.tcp.as_ref().map_or(0, |t| t.channel_slots())
            + self.udp.as_ref().map_or(0, |u| u.channel_slots())
            + self.hybrid.as_ref().map_or(0, |h| h.slots())
    }

    #[inline]
    fn channel(&self, peer: Gpid) -> ChannelState {
        if let Some(h) = self.hybrid.as_ref().filter(|h| h.covers(peer)) {
            return h.channel(peer);
        }
        on_route_ref!(self, peer, t => t.channel(peer), ChannelState::Shared)
    }

    fn connect(&mut self, peer: Gpid) -> bool {
        if let Some(h) = self.hybrid.as_mut().filter(|h| h.covers(peer)) {
            return h.connect(peer);
        }
        on_route!(self, peer, t => t.connect(peer), false)
    }

    fn quiesce(&mut self, peer: Gpid) -> bool {
        if let Some(h) = self.hybrid.as_mut().filter(|h| h.covers(peer)) {
            return h.quiesce(peer);
        }
        on_route!(self, peer, t => t.quiesce(peer), false)
    }

    fn usage(&self, peer: Gpid) -> Usage {
        if let Some(h) = self.hybrid.as_ref().filter(|h| h.covers(peer)) {
            return h.usage(peer);
        }
        on_route_ref!(self, peer, t => t.usage(peer), Usage::default())
    }

    #[inline]
    fn shared_arrivals(&self) -> u64 {
        self.hybrid.as_ref().map_or(0, |h| h.shared_arrivals())
            + self.shm.as_ref().map_or(0, |s| s.shared_arrivals())
            + self.tcp.as_ref().map_or(0, |t| t.shared_arrivals())
            + self.udp.as_ref().map_or(0, |u| u.shared_arrivals())
    }

    #[inline]
    fn channel_changes(&self) -> u64 {
        self.hybrid.as_ref().map_or(0, |h| h.channel_changes())
            + self.shm.as_ref().map_or(0, |s| s.channel_changes())
            + self.tcp.as_ref().map_or(0, |t| t.channel_changes())
            + self.udp.as_ref().map_or(0, |u| u.channel_changes())
    }

    fn channel_counters(&self) -> ChannelCounters {
        let mut c = ChannelCounters::default();
        if let Some(s) = self.shm.as_ref() {
            c.add(&s.channel_counters());
        }
        if let Some(t) = self.tcp.as_ref() {
            c.add(&t.channel_counters());
        }
        if let Some(u) = self.udp.as_ref() {
            c.add(&u.channel_counters());
        }
        if let Some(h) = self.hybrid.as_ref() {
            c.add(&h.counters());
        }
        c
    }

    /// Close every channel and unmap shared memory (at finalize).
    fn shutdown(&mut self) {
        if let Some(t) = self.tcp.as_mut() {
            t.shutdown();
        }
        if let Some(u) = self.udp.as_mut() {
            u.shutdown();
        }
        self.shm = None;
    }
}
