//! The policy: which protocol carries a message.
//!
//! For every peer the engine keeps [`Limits`], computed here from the route, the largest frame
//! the channel in use carries, and — for the adaptive policy — what the peer reports about its
//! receives ([`Feedback`]). Picking the protocol of a message is then two comparisons
//! ([`Limits::plan`]); the policy itself runs only when one of its inputs changes.
//!
//! Policies:
//! - `static`: per-route size thresholds, like every static MPI (eager up to the limit,
//!   rendezvous above); the limit can be overridden per peer.
//! - `adaptive` (the default): a cost model per route ([`Costs`]) evaluated with the share of
//!   this peer's recent messages whose receive was already posted when they arrived and the
//!   volume of its unexpected messages. Eager costs one copy more, and a buffer, for every
//!   message that arrives unexpected — and the more unexpected data piles up, the more each
//!   byte costs (it falls out of the caches); rendezvous costs a handshake but moves the data
//!   once, when the receive is there. Eager-rendezvous hides part of the handshake behind its
//!   prefix when the receive is posted. The policy picks, for every size, the protocol with
//!   the lowest expected cost now.
//! - `eager`, `rendezvous`, `eager-rendezvous`: one protocol for every message (experiments).
//!
//! A message is *lone* when the peer has sent us a message since our last send to it: a
//! request and its reply (a ping-pong, a halo swap) wait for each other, so what counts is the
//! message's latency. A message that follows others to the same peer shares the pipeline with
//! them, and what counts is its share of the throughput: eager's two copies of successive
//! messages overlap, and a rendezvous handshake hides behind the data before it. The adaptive
//! policy keeps one eager boundary for each case ([`Limits::eager_max`],
//! [`Limits::lone_eager_max`]) from two sets of costs. Latency counts only when the receive
//! is there to wait for the message: for the share of lone messages that arrive unexpected,
//! the stream's costs apply.
//!
//! An explicit eager limit (`eager_limit` >= 0, or a per-peer override) pins the boundary of
//! eager under `static` and `adaptive` alike: messages up to it go eager, larger ones by
//! rendezvous (as every static MPI's eager limit; no eager prefix either).

use crate::ids::Gpid;
use std::fmt;

/// How a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The whole message in one frame, buffered by the receiver if unexpected.
    Eager,
    /// A request-to-send; data moves once the receiver has matched it.
    Rendezvous,
    /// The first `prefix` bytes with the request-to-send, the rest by rendezvous.
    EagerRendezvous { prefix: usize },
}

pub use crate::transport::Route;

/// Protocol selection setting (`protocol` tunable, `protean_protocol` info hint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Static,
    Eager,
    Rendezvous,
    EagerRendezvous,
    Adaptive,
}

/// Names of the settings, indexed like [`Protocol::from_index`].
pub use crate::config::PROTOCOLS as PROTOCOL_NAMES;

impl Protocol {
    /// From the index of [`PROTOCOL_NAMES`] (= `config::PROTOCOLS`).
    pub fn from_index(i: usize) -> Protocol {
        match i {
            1 => Protocol::Eager,
            2 => Protocol::Rendezvous,
            3 => Protocol::EagerRendezvous,
            4 => Protocol::Adaptive,
            _ => Protocol::Static,
        }
    }

    pub fn from_name(s: &str) -> Option<Protocol> {
        PROTOCOL_NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(s.trim()))
            .map(Protocol::from_index)
    }

    pub fn name(self) -> &'static str {
        PROTOCOL_NAMES[self as usize]
    }
}

/// Bytes of a request-to-send's payload before any eager prefix.
pub const RTS_INFO: usize = crate::proto::frame::RndvInfo::LEN;

/// What a receiver tells its senders about the messages it gets from them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    /// Share of recent messages whose receive was posted when they arrived, 0..=1.
    pub preposted: f64,
    /// Bytes of recent messages that arrived unexpected (their receive not yet posted).
    pub unexpected_bytes: f64,
    /// Messages sent to the peer since its report last said anything but "every receive
    /// preposted" (0 while it does not say so). The sender counts them; see [`Costs::lag`].
    pub streak: f64,
}

impl Feedback {
    /// What a sender assumes before its peer has reported anything: every receive posted.
    pub const INITIAL: Feedback = Feedback {
        preposted: 1.0,
        unexpected_bytes: 0.0,
        streak: 0.0,
    };

    /// The same report for a message whose receive is not posted.
    fn unposted(fb: Feedback) -> Feedback {
        Feedback {
            preposted: 0.0,
            ..fb
        }
    }

    /// From a header's feedback field (`frame::feedback`): share 0..=63, bit length of the
    /// unexpected bytes (taken as the middle of its power-of-two range).
    pub fn from_field(share: u16, level: u16) -> Feedback {
        let max = crate::proto::frame::FEEDBACK_SHARE_MAX;
        Feedback {
            preposted: f64::from(share.min(max)) / f64::from(max),
            unexpected_bytes: if level == 0 {
                0.0
            } else {
                1.5 * 2f64.powi(i32::from(level.min(63)) - 1)
            },
            streak: 0.0,
        }
    }
}

/// A receiver's statistics about the messages from one peer, which it reports back.
///
/// A window of about the last [`RxStats::WINDOW`] messages: counts are halved when it fills,
/// so old behaviour fades out. The report changes only when it moved by more than the
/// quantisation noise, and is re-evaluated every [`RxStats::EVERY`] messages.
///
/// A change of phase is reported at once: when the window, a whole window of messages old,
/// says that 90% or more of the receives were preposted and then [`RxStats::CHANGE`]
/// messages in a row arrive unexpected, or the other way round, the window restarts from
/// those messages. (Receives preposted for part of each burst, which is what a steady share
/// means, keep the window in between: at 75%, 16 in a row arrive unexpected, but the window
/// says at most 86% before them. Phases too short to take the window to 90%, and bursts
/// shorter than `CHANGE` between other messages, fade in as before.) The fading window alone took half a window to move the report far enough for
/// the sender to change its plan, and the sender had sent the rest of a burst by then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    hits: u32,
    total: u32,
    unexpected_bytes: u64,
    /// Messages in a row with the same outcome (`run_hit`), their unexpected bytes, and
    /// whether the window said the opposite when the run began.
    run: u32,
    run_hit: bool,
    run_bytes: u64,
    run_against: bool,
    /// Messages since the window last restarted (saturating).
    age: u32,
    /// (share, level) last reported.
    reported: Option<(u16, u16)>,
}

impl RxStats {
    pub const WINDOW: u32 = 64;
    pub const EVERY: u32 = 8;
    /// Messages in a row against the window that restart it (a multiple of
    /// [`RxStats::EVERY`], so the restarted window is evaluated at once).
    pub const CHANGE: u32 = 8;

    /// A message arrived; `preposted`: its receive was already posted. Returns a new report
    /// (share 0..=63, level) when it changed enough to tell the sender.
    #[inline]
    pub fn note(&mut self, preposted: bool, bytes: usize) -> Option<(u16, u16)> {
        let unexpected = if preposted { 0 } else { bytes as u64 };
        if self.run > 0 && self.run_hit == preposted {
            self.run = self.run.saturating_add(1);
            self.run_bytes += unexpected;
        } else {
            // Does the window, as it stands, say the opposite of this message nearly always?
            let (h, t) = (self.hits, self.total);
            self.run_against = self.age >= Self::WINDOW
                && if preposted {
                    h * 10 <= t
                } else {
                    h * 10 >= t * 9
                };
            self.run = 1;
            self.run_hit = preposted;
            self.run_bytes = unexpected;
        }
        self.total += 1;
        self.age = self.age.saturating_add(1);
        if preposted {
            self.hits += 1;
        } else {
            self.unexpected_bytes += unexpected;
        }
        if self.run == Self::CHANGE && self.run_against {
            // A phase change: start over from these messages.
            self.age = self.run;
            self.total = self.run;
            self.hits = if preposted { self.run } else { 0 };
            self.unexpected_bytes = self.run_bytes;
        }
        if !self.total.is_multiple_of(Self::EVERY) {
            return None;
        }
        let max = u32::from(crate::proto::frame::FEEDBACK_SHARE_MAX);
        let share = ((self.hits * max + self.total / 2) / self.total) as u16;
        let level = (64 - self.unexpected_bytes.leading_zeros()) as u16;
        if self.total >= Self::WINDOW {
            self.hits /= 2;
            self.total /= 2;
            self.unexpected_bytes /= 2;
        }
        let moved = match self.reported {
            None => true,
            Some((s, l)) => s.abs_diff(share) >= 2 || l.abs_diff(level) >= 1,
        };
        if moved {
            self.reported = Some((share, level));
            return self.reported;
        }
        None
    }
}

/// What a sender counts for [`Costs::lag`] about one peer: whether the peer's last report said
/// every receive was preposted (or none came yet), and the messages sent to it since that
/// began ([`Feedback::streak`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streak {
    full: bool,
    sent: u32,
}

impl Default for Streak {
    fn default() -> Streak {
        Streak {
            full: true,
            sent: 0,
        }
    }
}

impl Streak {
    /// A new report arrived; `full`: it says every receive was preposted.
    pub fn on_report(&mut self, full: bool) {
        if !(full && self.full) {
            self.sent = 0;
        }
        self.full = full;
    }

    /// A message is going to the peer. True when the streak reached a length worth
    /// recomputing the peer's limits at (powers of two from 8: a few dozen times in a run).
    #[inline(always)]
    pub fn on_send(&mut self) -> bool {
        if !self.full {
            return false;
        }
        self.sent = self.sent.saturating_add(1);
        self.sent >= 8 && self.sent.is_power_of_two()
    }

    /// `fb`, with the streak while it lasts.
    pub fn apply(&self, fb: Feedback) -> Feedback {
        if self.full {
            Feedback {
                streak: f64::from(self.sent),
                ..fb
            }
        } else {
            fb
        }
    }
}

/// The cost model of one route: per-message time in nanoseconds as `fixed + per_byte * bytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// An eager message whose receive is posted (copy in, copy out).
    pub eager: (f64, f64),
    /// Added to an eager message that arrives unexpected (a buffer and one more copy), when
    /// no unexpected data piles up.
    pub unexpected: (f64, f64),
    /// Unexpected bytes at which the per-byte cost of unexpected data has doubled.
    pub pressure: f64,
    /// A rendezvous message (handshake, one transfer once the receive is there).
    pub rndv: (f64, f64),
    /// Added to a rendezvous message whose receive is not posted when its request arrives:
    /// the clear-to-send waits for the receive, and the data for the clear-to-send.
    pub late: f64,
    /// Added to a rendezvous message by splitting off an eager prefix.
    pub split: f64,
    /// Handshake time an eager prefix hides when the receive is posted, at most.
    pub hide: f64,
    /// Messages a sender goes on sending by the old plan after its peer stops preposting its
    /// receives (the report takes that long to move). While the peer reports every receive
    /// preposted, a message goes eagerly only if what eager saves over rendezvous on the
    /// messages of the current streak pays for `lag` messages sent eagerly into unposted
    /// receives, should the streak end now (the streak so far standing for what is left of
    /// it). 0: no such check.
    pub lag: f64,
    /// A lone eager message whose receive is posted: its latency (copy in, then copy out).
    /// Defaults to `eager`.
    pub lone_eager: (f64, f64),
    /// A lone rendezvous message: its latency (the whole handshake, then the data). Defaults
    /// to `rndv`.
    pub lone_rndv: (f64, f64),
}

impl Costs {
    /// Shared memory, fitted to `bench/prepost` with every protocol forced (2 ranks, one per
    /// core): eager copies twice through the ring, rendezvous once by single copy after a
    /// handshake of about 0.7 us.
    ///
    /// Lone messages: `lone_eager` fitted by `protean-tune --p2p` (ping-pongs of 1 KiB-1 MiB,
    /// the same fit in three runs) on a 2-vCPU AMD EPYC VM with kernel 6.18, where
    /// cross-memory attach costs 1.4 us a call before it copies anything: a lone 8 KiB message
    /// takes 1.0 us eagerly and 3.6 us by rendezvous, 32 KiB 2.3 and 5.7, so a ping-pong goes
    /// eagerly up to the ring's largest frame (64 KiB) and by rendezvous above. The earlier
    /// fit (346+0.134, rendezvous from 5.5 KiB) made an 8 KiB ping-pong 3.3x slower there
    /// than MPICH's (3.9 against 1.2 us).
    pub const SHM: &'static str = "eager=100+0.05,unexpected=0+0.1,pressure=1048576,rndv=700+0.028,split=100,hide=0,lone_eager=86.5+0.0335,lone_rndv=807+0.051";
    /// TCP over loopback, fitted the same way (16-64 KiB, where the choice is made): a
    /// rendezvous costs about 1.1 us more than an eager message whose receive is posted, and
    /// 1.5 us more again when its receive is not. The fixed rendezvous cost is set 0.8 us
    /// above that fit so that a 64 KiB message whose receive is posted still goes eagerly:
    /// in a stream the two tie there, but a lone message waits for the whole handshake
    /// (64 KiB ping-pong 14 us eager, 22 us rendezvous).
    ///
    /// Lone messages, fitted by `bench/fit-lone` (16-512 KiB): a rendezvous waits 7.3 us
    /// longer for its handshake. Per byte, the two move data alike on some hosts (0.087 and
    /// 0.089 ns/B where this was fitted), but on others a lone eager message above about
    /// 96 KiB is sent 3-4x slower than the same bytes after a handshake: on a 2-vCPU VM
    /// (kernel 6.18) a 1 MiB ping-pong took 640 us eager against 250 us by rendezvous, the
    /// time going into the sender's copy into the socket, and Open MPI's TCP path with its
    /// eager limit raised to 2 MiB took the same 750 us. The built-in eager slope (0.155
    /// ns/B) stops lone eager at about 110 KiB: where eager would have been as fast, a
    /// rendezvous costs the handshake (under 7% from 128 KiB up); where it is not, it saves
    /// 2-3x. `protean-tune --p2p` fits the host (there: 6036+0.261).
    pub const TCP: &'static str = "eager=2150+0.116,unexpected=0+0.2,pressure=4194304,rndv=4100+0.096,late=1500,split=300,hide=0,lone_eager=6170+0.155,lone_rndv=13500+0.089";
    /// Messages to the own process: eager copies twice, rendezvous once.
    pub const SELF: &'static str =
        "eager=50+0.06,unexpected=0+0.06,pressure=1048576,rndv=300+0.03,split=50,hide=0";

    /// Parse `key=fixed+per_byte` items (`pressure`, `split`, `hide` take one number).
    pub fn parse(text: &str) -> Result<Costs, String> {
        let mut c = Costs {
            eager: (f64::NAN, f64::NAN),
            unexpected: (f64::NAN, f64::NAN),
            pressure: f64::NAN,
            rndv: (f64::NAN, f64::NAN),
            late: 0.0,
            lag: 0.0,
            split: 0.0,
            hide: 0.0,
            lone_eager: (f64::NAN, f64::NAN),
            lone_rndv: (f64::NAN, f64::NAN),
        };
        let num = |k: &str, v: &str| -> Result<f64, String> {
            match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                _ => Err(format!("cost '{k}': '{v}' is not a non-negative number")),
            }
        };
        let pair = |k: &str, v: &str| -> Result<(f64, f64), String> {
            let (a, b) = v
                .split_once('+')
                .ok_or_else(|| format!("cost '{k}': expected FIXED_NS+NS_PER_BYTE, got '{v}'"))?;
            Ok((num(k, a)?, num(k, b)?))
        };
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("cost item '{item}' is not KEY=VALUE"))?;
            match k.trim() {
                "eager" => c.eager = pair(k, v)?,
                "unexpected" => c.unexpected = pair(k, v)?,
                "rndv" => c.rndv = pair(k, v)?,
                "late" => c.late = num(k, v)?,
                "lag" => c.lag = num(k, v)?,
                "pressure" => c.pressure = num(k, v)?.max(1.0),
                "split" => c.split = num(k, v)?,
                "hide" => c.hide = num(k, v)?,
                "lone_eager" => c.lone_eager = pair(k, v)?,
                "lone_rndv" => c.lone_rndv = pair(k, v)?,
                other => {
                    return Err(format!(
                    "unknown cost '{other}' (have eager, unexpected, pressure, rndv, late, lag, split, hide, lone_eager, lone_rndv)"
                ))
                }
            }
        }
        for (name, v) in [
            ("eager", c.eager.0),
            ("unexpected", c.unexpected.0),
            ("pressure", c.pressure),
            ("rndv", c.rndv.0),
        ] {
            if v.is_nan() {
                return Err(format!("cost '{name}' is missing"));
            }
        }
        if c.lone_eager.0.is_nan() {
            c.lone_eager = c.eager;
        }
        if c.lone_rndv.0.is_nan() {
            c.lone_rndv = c.rndv;
        }
        Ok(c)
    }

    /// Expected time (ns) of an eager message of `s` bytes in a stream.
    pub fn eager_ns(&self, s: f64, fb: Feedback) -> f64 {
        let unx = 1.0 - fb.preposted;
        self.eager.0
            + s * self.eager.1
            + unx * (self.unexpected.0 + s * self.unexpected_per_byte(fb))
    }

    /// Expected time (ns) of a rendezvous message of `s` bytes in a stream.
    pub fn rndv_ns(&self, s: f64, fb: Feedback) -> f64 {
        self.rndv.0 + (1.0 - fb.preposted) * self.late + s * self.rndv.1
    }

    /// Expected cost (ns) of a lone eager message of `s` bytes: its latency when its receive
    /// is waiting for it; when the receive is not, the message waits for the receiver anyway
    /// and what counts is the work, as in a stream.
    pub fn lone_eager_ns(&self, s: f64, fb: Feedback) -> f64 {
        let pp = fb.preposted;
        pp * (self.lone_eager.0 + s * self.lone_eager.1)
            + (1.0 - pp) * self.eager_ns(s, Feedback::unposted(fb))
    }

    /// Expected cost (ns) of a lone rendezvous message of `s` bytes (as `lone_eager_ns`).
    pub fn lone_rndv_ns(&self, s: f64, fb: Feedback) -> f64 {
        let pp = fb.preposted;
        pp * (self.lone_rndv.0 + s * self.lone_rndv.1)
            + (1.0 - pp) * self.rndv_ns(s, Feedback::unposted(fb))
    }

    /// Expected time (ns) of an eager-rendezvous message of `s` bytes with a `prefix`: a
    /// rendezvous of the rest, plus the prefix sent eagerly.
    pub fn split_ns(&self, s: f64, prefix: f64, fb: Feedback) -> f64 {
        let unx = 1.0 - fb.preposted;
        self.rndv_ns(s - prefix, fb)
            + self.split
            + prefix * (self.eager.1 + unx * self.unexpected_per_byte(fb))
            - fb.preposted * self.hide.min(prefix * self.eager.1)
    }

    /// While the peer reports every receive preposted: does eager's saving over the current
    /// streak pay for `lag` eager messages into unposted receives (see [`Costs::lag`])?
    pub fn streak_pays(&self, s: f64, fb: Feedback) -> bool {
        if self.lag <= 0.0 || fb.preposted < 1.0 {
            return true;
        }
        // The lag's messages pile up unexpected.
        let unposted = Feedback {
            preposted: 0.0,
            unexpected_bytes: self.lag * s,
            streak: 0.0,
        };
        let loss = self.eager_ns(s, unposted) - self.rndv_ns(s, unposted);
        let gain = self.rndv_ns(s, fb) - self.eager_ns(s, fb);
        loss <= 0.0 || fb.streak * gain >= self.lag * loss
    }

    fn unexpected_per_byte(&self, fb: Feedback) -> f64 {
        self.unexpected.1 * (1.0 + fb.unexpected_bytes / self.pressure)
    }
}

impl fmt::Display for Costs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "eager={}+{},unexpected={}+{},pressure={},rndv={}+{},late={},lag={},split={},hide={},lone_eager={}+{},lone_rndv={}+{}",
            self.eager.0,
            self.eager.1,
            self.unexpected.0,
            self.unexpected.1,
            self.pressure,
            self.rndv.0,
            self.rndv.1,
            self.late,
            self.lag,
            self.split,
            self.hide,
            self.lone_eager.0,
            self.lone_eager.1,
            self.lone_rndv.0,
            self.lone_rndv.1
        )
    }
}

pub use crate::config::{parse_rules, RankSet};

/// What every message to one peer is sent with, until an input of the policy changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Messages of at most this many bytes go eager; None: none does.
    pub eager_max: Option<usize>,
    /// The same for lone messages (see the module documentation).
    pub lone_eager_max: Option<usize>,
    /// Larger messages of at most this many bytes go eager-rendezvous, the rest rendezvous.
    pub split_max: usize,
    /// Eager prefix of eager-rendezvous messages (bytes).
    pub prefix: usize,
}

impl Limits {
    /// Everything by rendezvous.
    pub const RENDEZVOUS: Limits = Limits {
        eager_max: None,
        lone_eager_max: None,
        split_max: 0,
        prefix: 0,
    };

    /// The largest eager message, lone or not; None: none goes eager.
    #[inline]
    pub fn eager_max_for(&self, lone: bool) -> Option<usize> {
        if lone {
            self.lone_eager_max
        } else {
            self.eager_max
        }
    }

    /// The plan of a message of `len` bytes; `lone`: the peer has sent us a message since
    /// our last send to it.
    #[inline]
    pub fn plan(&self, len: usize, lone: bool) -> Plan {
        match self.eager_max_for(lone) {
            Some(m) if len <= m => Plan::Eager,
            _ if len <= self.split_max => {
                let prefix = self.prefix.min(len.saturating_sub(1));
                if prefix == 0 {
                    Plan::Rendezvous
                } else {
                    Plan::EagerRendezvous { prefix }
                }
            }
            _ => Plan::Rendezvous,
        }
    }
}

/// Inputs that do not change per message.
#[derive(Debug, Clone)]
pub struct Policy {
    pub protocol: Protocol,
    /// Static eager limits per route (`*_eager_max`).
    pub eager_limit_shm: usize,
    pub eager_limit_tcp: usize,
    pub eager_limit_self: usize,
    /// `eager_limit` when set (>= 0): pins eager on every route.
    pub eager_limit: Option<usize>,
    /// Per-peer eager limits, first match wins; pin eager like `eager_limit`.
    pub peer_limits: Vec<(RankSet, usize)>,
    pub prefix: usize,
    pub costs_shm: Costs,
    pub costs_tcp: Costs,
    pub costs_self: Costs,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            protocol: Protocol::Adaptive,
            eager_limit_shm: 8192,
            eager_limit_tcp: 65536,
            eager_limit_self: 16384,
            eager_limit: None,
            peer_limits: Vec::new(),
            prefix: 8192,
            costs_shm: Costs::parse(Costs::SHM).expect("built-in costs"),
            costs_tcp: Costs::parse(Costs::TCP).expect("built-in costs"),
            costs_self: Costs::parse(Costs::SELF).expect("built-in costs"),
        }
    }
}

impl Policy {
    /// The static eager limit of a route.
    pub fn eager_limit(&self, route: Route) -> usize {
        match route {
            Route::Shm => self.eager_limit_shm,
            // UDP follows TCP's limit and costs until it is tuned on its own.
            Route::Tcp | Route::Udp => self.eager_limit_tcp,
            Route::SelfLoop => self.eager_limit_self,
            Route::Unreachable => 0,
        }
    }

    pub fn costs(&self, route: Route) -> &Costs {
        match route {
            Route::Tcp | Route::Udp | Route::Unreachable => &self.costs_tcp,
            Route::Shm => &self.costs_shm,
            Route::SelfLoop => &self.costs_self,
        }
    }

    /// The pinned eager limit for `peer`, if any.
    fn pinned(&self, peer: Gpid) -> Option<usize> {
        self.peer_limits
            .iter()
            .find(|(s, _)| s.contains(peer.get()))
            .map(|(_, l)| *l)
            .or(self.eager_limit)
    }

    /// Does the plan depend on what the peer reports?
    pub fn uses_feedback(&self, protocol: Protocol) -> bool {
        protocol == Protocol::Adaptive
    }

    /// Limits for messages to `peer` on `route`, whose channel carries frames of at most
    /// `max_payload` bytes, under the setting `protocol` (the policy's own, or a
    /// communicator's), given what the peer reported.
    pub fn limits(
        &self,
        protocol: Protocol,
        peer: Gpid,
        route: Route,
        max_payload: usize,
        fb: Feedback,
    ) -> Limits {
        let prefix = self.prefix.min(max_payload.saturating_sub(RTS_INFO));
        let all_split = Limits {
            eager_max: None,
            lone_eager_max: None,
            split_max: usize::MAX,
            prefix,
        };
        match protocol {
            Protocol::Static => {
                let limit = Some(
                    self.pinned(peer)
                        .unwrap_or(self.eager_limit(route))
                        .min(max_payload),
                );
                Limits {
                    eager_max: limit,
                    lone_eager_max: limit,
                    ..Limits::RENDEZVOUS
                }
            }
            Protocol::Eager => Limits {
                eager_max: Some(max_payload),
                lone_eager_max: Some(max_payload),
                ..all_split
            },
            Protocol::Rendezvous => Limits::RENDEZVOUS,
            Protocol::EagerRendezvous => all_split,
            Protocol::Adaptive => self.adaptive(peer, route, max_payload, prefix, fb),
        }
    }

    fn adaptive(
        &self,
        peer: Gpid,
        route: Route,
        max_payload: usize,
        prefix: usize,
        fb: Feedback,
    ) -> Limits {
        let c = self.costs(route);
        let split = |s: usize| {
            let f = prefix.min(s.saturating_sub(1));
            if f == 0 {
                f64::INFINITY
            } else {
                c.split_ns(s as f64, f as f64, fb)
            }
        };
        let eager_best = |s: usize| {
            let e = c.eager_ns(s as f64, fb);
            e <= c.rndv_ns(s as f64, fb) && e <= split(s) && c.streak_pays(s as f64, fb)
        };
        if let Some(l) = self.pinned(peer) {
            // As under static: eager up to the limit, rendezvous above (no eager prefix).
            let limit = Some(l.min(max_payload));
            return Limits {
                eager_max: limit,
                lone_eager_max: limit,
                ..Limits::RENDEZVOUS
            };
        }
        let (eager_max, lone_eager_max) = (
            boundary(eager_best, max_payload),
            // A lone message weighs eager against a rendezvous that hides nothing.
            boundary(
                |s| c.lone_eager_ns(s as f64, fb) <= c.lone_rndv_ns(s as f64, fb),
                max_payload,
            ),
        );
        Limits {
            eager_max,
            lone_eager_max,
            ..self.split_or_rndv(c, prefix, fb, eager_max.unwrap_or(0))
        }
    }

    /// Above the eager range: eager-rendezvous while it beats rendezvous. Past the prefix,
    /// both grow alike with the size, so the answer is the same for every larger message.
    fn split_or_rndv(&self, c: &Costs, prefix: usize, fb: Feedback, from: usize) -> Limits {
        let s = (from.max(prefix) + 1) as f64;
        let f = prefix as f64;
        let split_max = if prefix > 0 && c.split_ns(s, f, fb) < c.rndv_ns(s, fb) {
            usize::MAX
        } else {
            0
        };
        Limits {
            eager_max: None,
            lone_eager_max: None,
            split_max,
            prefix,
        }
    }
}

/// The largest size up to `max` at which `eager_best` holds, None if not even at 0. Eager
/// wins for small messages and loses (or ties) for ever larger ones: the difference of two
/// straight lines changes sign once.
fn boundary(eager_best: impl Fn(usize) -> bool, max: usize) -> Option<usize> {
    if !eager_best(0) {
        return None;
    }
    let (mut lo, mut hi) = (0usize, max);
    if eager_best(hi) {
        lo = hi;
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if eager_best(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

impl Policy {
    /// The policy from the tunables; Err names the tunable that does not parse.
    pub fn from_config(cfg: &crate::config::Config) -> Result<Policy, String> {
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
                crate::config::parse_size(v)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_defaults_are_the_built_in_costs() {
        let c = crate::config::Config::defaults();
        assert_eq!(
            Costs::parse(&c.adaptive_costs_shm),
            Costs::parse(Costs::SHM)
        );
        assert_eq!(
            Costs::parse(&c.adaptive_costs_tcp),
            Costs::parse(Costs::TCP)
        );
        assert_eq!(
            Costs::parse(&c.adaptive_costs_self),
            Costs::parse(Costs::SELF)
        );
    }
    use crate::proto::frame::FEEDBACK_SHARE_MAX as FEEDBACK_MAX;

    fn p(protocol: Protocol) -> Policy {
        Policy {
            protocol,
            eager_limit_shm: 1000,
            eager_limit_tcp: 5000,
            eager_limit_self: 100,
            prefix: 300,
            ..Policy::default()
        }
    }

    fn plan(pol: &Policy, route: Route, len: usize, max: usize) -> Plan {
        pol.limits(pol.protocol, Gpid::new(7), route, max, Feedback::INITIAL)
            .plan(len, false)
    }

    fn fb(preposted: f64, unexpected_bytes: f64) -> Feedback {
        Feedback {
            preposted,
            unexpected_bytes,
            streak: 0.0,
        }
    }

    /// With `lag`, a peer that has just started preposting everything gets large messages by
    /// rendezvous (one round of eager into unposted receives would cost more than eager
    /// saves), and eagerly once its streak is long enough; small messages, which lose little
    /// when unexpected, go eagerly at once. Without `lag`, the streak does not matter.
    #[test]
    fn a_long_streak_lets_large_messages_go_eagerly() {
        let mut pol = p(Protocol::Adaptive);
        pol.costs_tcp = Costs::parse(
            "eager=500+0.08,unexpected=0+0.4,pressure=1e9,rndv=4000+0.09,late=1500,lag=32",
        )
        .unwrap();
        let at = |pol: &Policy, streak: f64| {
            let f = Feedback {
                streak,
                ..Feedback::INITIAL
            };
            pol.limits(Protocol::Adaptive, Gpid::new(1), Route::Tcp, 1 << 30, f)
                .eager_max
                .unwrap_or(0)
        };
        let (fresh, later, long) = (at(&pol, 0.0), at(&pol, 300.0), at(&pol, 1e5));
        assert!((8192..64 << 10).contains(&fresh), "{fresh}");
        assert!(later > fresh && later < 1 << 20, "{later}");
        assert!(long >= 1 << 22, "{long}");
        // A report short of "every receive preposted" is judged by the cost model alone.
        let f = Feedback {
            streak: 0.0,
            ..fb(0.95, 0.0)
        };
        let partial = pol
            .limits(Protocol::Adaptive, Gpid::new(1), Route::Tcp, 1 << 30, f)
            .eager_max;
        pol.costs_tcp.lag = 0.0;
        assert_eq!(at(&pol, 0.0), at(&pol, 1e5));
        assert_eq!(
            pol.limits(Protocol::Adaptive, Gpid::new(1), Route::Tcp, 1 << 30, f)
                .eager_max,
            partial
        );
    }

    #[test]
    fn static_thresholds_per_route() {
        let s = p(Protocol::Static);
        assert_eq!(plan(&s, Route::Shm, 1000, 1 << 20), Plan::Eager);
        assert_eq!(plan(&s, Route::Shm, 1001, 1 << 20), Plan::Rendezvous);
        assert_eq!(plan(&s, Route::Tcp, 4000, 1 << 20), Plan::Eager);
        assert_eq!(plan(&s, Route::SelfLoop, 101, 1 << 20), Plan::Rendezvous);
        // The channel's frame size caps eager whatever the limit says.
        assert_eq!(plan(&s, Route::Shm, 900, 800), Plan::Rendezvous);
    }

    #[test]
    fn per_peer_limits_override_and_first_match_wins() {
        let mut s = p(Protocol::Static);
        s.peer_limits = parse_rules("7=50;0-9=20000", |v| {
            v.parse::<usize>().map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(plan(&s, Route::Shm, 51, 1 << 20), Plan::Rendezvous);
        let l = s.limits(
            Protocol::Static,
            Gpid::new(3),
            Route::Shm,
            1 << 20,
            Feedback::INITIAL,
        );
        assert_eq!(l.plan(15000, false), Plan::Eager);
        let l = s.limits(
            Protocol::Static,
            Gpid::new(11),
            Route::Shm,
            1 << 20,
            Feedback::INITIAL,
        );
        assert_eq!(l.plan(1001, false), Plan::Rendezvous);
        // The same pin holds under adaptive.
        let l = s.limits(
            Protocol::Adaptive,
            Gpid::new(7),
            Route::Shm,
            1 << 20,
            fb(0.0, 1e9),
        );
        assert_eq!(l.plan(50, false), Plan::Eager);
        assert_ne!(l.plan(51, false), Plan::Eager);
    }

    #[test]
    fn forced_protocols() {
        assert_eq!(
            plan(&p(Protocol::Eager), Route::Shm, 50_000, 1 << 20),
            Plan::Eager
        );
        assert_eq!(
            plan(&p(Protocol::Eager), Route::Shm, 50_000, 1000),
            Plan::EagerRendezvous { prefix: 300 }
        );
        assert_eq!(
            plan(&p(Protocol::Rendezvous), Route::Shm, 0, 1000),
            Plan::Rendezvous
        );
        assert_eq!(
            plan(&p(Protocol::EagerRendezvous), Route::Tcp, 10_000, 1 << 20),
            Plan::EagerRendezvous { prefix: 300 }
        );
        assert_eq!(
            plan(&p(Protocol::EagerRendezvous), Route::Tcp, 100, 1 << 20),
            Plan::EagerRendezvous { prefix: 99 }
        );
        assert_eq!(
            plan(&p(Protocol::EagerRendezvous), Route::Tcp, 1, 1 << 20),
            Plan::Rendezvous
        );
        assert_eq!(
            plan(&p(Protocol::EagerRendezvous), Route::Shm, 10_000, 200),
            Plan::EagerRendezvous {
                prefix: 200 - RTS_INFO
            }
        );
    }

    /// The cached limits give the plan of the cheapest protocol at every size.
    #[test]
    fn adaptive_limits_pick_the_cheapest_protocol() {
        let mut pol = Policy::default();
        for costs in [
            Costs::SHM,
            Costs::TCP,
            Costs::SELF,
            "eager=10+0.2,unexpected=5+0.5,pressure=1000,rndv=900+0.01,split=1,hide=800",
            "eager=10+0.2,unexpected=5+0.5,pressure=1000,rndv=300+0.01,late=2000,split=1",
        ] {
            pol.costs_shm = Costs::parse(costs).unwrap();
            let c = pol.costs_shm;
            for share in [0.0, 0.1, 0.5, 0.9, 1.0] {
                for vol in [0.0, 1e5, 1e7] {
                    let f = fb(share, vol);
                    let l = pol.limits(Protocol::Adaptive, Gpid::new(1), Route::Shm, 1 << 22, f);
                    for s in (0..23).map(|k| 1usize << k).chain([3, 1000, 20000, 77777]) {
                        let e = c.eager_ns(s as f64, f);
                        let r = c.rndv_ns(s as f64, f);
                        let pf = pol.prefix.min(s - s.min(1));
                        let sp = if pf > 0 {
                            c.split_ns(s as f64, pf as f64, f)
                        } else {
                            f64::INFINITY
                        };
                        let best = e.min(r).min(sp);
                        let got = match l.plan(s, false) {
                            Plan::Eager => e,
                            Plan::Rendezvous => r,
                            Plan::EagerRendezvous { .. } => sp,
                        };
                        assert!(
                            got <= best * 1.0001 + 1e-9,
                            "{costs} share {share} vol {vol} size {s}: {:?} costs {got}, best {best}",
                            l.plan(s, false)
                        );
                        // Lone: eager exactly where its latency is the lower one.
                        let le = c.lone_eager_ns(s as f64, f);
                        let lr = c.lone_rndv_ns(s as f64, f);
                        if (le - lr).abs() > 1e-6 * lr {
                            assert_eq!(
                                l.plan(s, true) == Plan::Eager,
                                le < lr,
                                "{costs} share {share} vol {vol} size {s}: lone {le} vs {lr}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn adaptive_moves_the_eager_boundary_with_preposting() {
        let pol = Policy::default();
        let at = |share, vol| {
            pol.limits(
                Protocol::Adaptive,
                Gpid::new(1),
                Route::Shm,
                1 << 20,
                fb(share, vol),
            )
            .eager_max
            .unwrap_or(0)
        };
        // Receives posted: eager until a single copy pays for its handshake (~20 KB with the
        // shared-memory costs); nothing posted and data piling up: rendezvous much earlier.
        assert!(at(1.0, 0.0) >= 16 << 10, "{}", at(1.0, 0.0));
        assert!(at(0.0, 1e6) <= 8 << 10, "{}", at(0.0, 1e6));
        assert!(at(0.5, 2.5e5) < at(1.0, 0.0));
        assert!(at(0.0, 1e8) <= at(0.0, 1e6));
        // An explicit eager limit pins the boundary.
        let pinned = Policy {
            eager_limit: Some(0),
            ..Policy::default()
        };
        let l = pinned.limits(
            Protocol::Adaptive,
            Gpid::new(1),
            Route::Shm,
            1 << 20,
            Feedback::INITIAL,
        );
        assert_eq!(l.plan(0, false), Plan::Eager);
        assert_eq!(l.plan(1, false), Plan::Rendezvous);
        assert_eq!(l.plan(1, true), Plan::Rendezvous);
        // Even where the costs would send a prefix eagerly, above a pinned limit is rendezvous.
        let mut split = pinned.clone();
        split.eager_limit = Some(4096);
        split.costs_shm.split = 0.0;
        split.costs_shm.hide = 1e6;
        let l = split.limits(
            Protocol::Adaptive,
            Gpid::new(1),
            Route::Shm,
            1 << 20,
            Feedback::INITIAL,
        );
        assert_eq!(l.plan(4096, false), Plan::Eager);
        assert_eq!(l.plan(1 << 16, false), Plan::Rendezvous);
        let unpinned = Policy {
            eager_limit: None,
            ..split
        };
        let l = unpinned.limits(
            Protocol::Adaptive,
            Gpid::new(1),
            Route::Shm,
            1 << 20,
            Feedback::INITIAL,
        );
        assert!(
            matches!(
                l.plan(1 << 16, false),
                Plan::EagerRendezvous { .. } | Plan::Eager
            ),
            "the costs alone would not choose plain rendezvous"
        );
    }

    /// Lone messages (a ping-pong) have their own boundary: earlier than a stream's on shared
    /// memory, where a single copy beats two copies one after the other; on TCP a lone
    /// message whose receive is posted goes eagerly up to about 110 KiB (see `Costs::TCP`).
    #[test]
    fn lone_messages_weigh_latency() {
        let pol = Policy::default();
        let at = |route, share| {
            let l = pol.limits(
                Protocol::Adaptive,
                Gpid::new(1),
                route,
                1 << 20,
                fb(share, 0.0),
            );
            (l.eager_max.unwrap_or(0), l.lone_eager_max.unwrap_or(0))
        };
        // On shared memory a lone message whose receive is posted goes eagerly up to the
        // largest frame (cross-memory attach costs more than a second copy below that); a
        // stream's boundary stays where the stream costs put it.
        let (stream, lone) = at(Route::Shm, 1.0);
        assert_eq!(lone, 1 << 20);
        assert!((16 << 10..64 << 10).contains(&stream), "{stream}");
        // With the ring's largest frame as the cap, a larger lone message goes by
        // rendezvous, a lone 32 KiB one eagerly.
        let l = pol.limits(
            Protocol::Adaptive,
            Gpid::new(1),
            Route::Shm,
            (64 << 10) - 40,
            Feedback::INITIAL,
        );
        assert_eq!(l.plan(32 << 10, true), Plan::Eager);
        assert_eq!(l.plan(256 << 10, true), Plan::Rendezvous);
        let (stream, lone) = at(Route::Tcp, 1.0);
        assert!((96 << 10..128 << 10).contains(&lone), "{lone}");
        assert!(stream < 256 << 10, "{stream}");
        // A receiver that is late for everything is not waiting for the message: its latency
        // does not count, and lone messages follow the stream's boundary.
        for route in [Route::Shm, Route::Tcp] {
            let (stream, lone) = at(route, 0.0);
            assert_eq!(stream, lone, "{route:?}");
        }
        // Without lone costs, lone messages follow the stream's boundary; forced and static
        // settings do not tell the two apart.
        let c = Costs::parse("eager=100+0.05,unexpected=0+0.1,pressure=1048576,rndv=700+0.028")
            .unwrap();
        assert_eq!((c.lone_eager, c.lone_rndv), (c.eager, c.rndv));
        for protocol in [Protocol::Static, Protocol::Eager, Protocol::Rendezvous] {
            let l = pol.limits(
                protocol,
                Gpid::new(1),
                Route::Shm,
                1 << 20,
                Feedback::INITIAL,
            );
            assert_eq!(l.eager_max, l.lone_eager_max, "{protocol:?}");
        }
    }

    #[test]
    fn costs_parse_and_report_errors() {
        for text in [Costs::SHM, Costs::TCP, Costs::SELF] {
            let c = Costs::parse(text).unwrap();
            assert_eq!(Costs::parse(&c.to_string()).unwrap(), c);
        }
        assert_eq!(Costs::parse(Costs::TCP).unwrap().late, 1500.0);
        assert!(Costs::parse("eager=1+2").unwrap_err().contains("missing"));
        assert!(Costs::parse("eager=1")
            .unwrap_err()
            .contains("FIXED_NS+NS_PER_BYTE"));
        assert!(Costs::parse("bogus=1")
            .unwrap_err()
            .contains("unknown cost"));
        assert!(Costs::parse("eager=-1+0")
            .unwrap_err()
            .contains("non-negative"));
    }

    #[test]
    fn rank_sets() {
        let s = RankSet::parse("1,4-6").unwrap();
        assert!(s.contains(1) && s.contains(5) && !s.contains(2) && !s.contains(7));
        assert!(RankSet::parse("*").unwrap().contains(123456));
        assert!(RankSet::parse("5-2").is_err());
        assert!(RankSet::parse("x").is_err());
        assert!(parse_rules("1=tcp;2", |v| Ok(v.to_string())).is_err());
    }

    #[test]
    fn a_streak_counts_sends_under_full_reports_only() {
        let mut st = Streak::default();
        let fb = |st: &Streak| st.apply(Feedback::INITIAL).streak;
        // Before any report: full. Limits are recomputed at 8, 16, 32, ...
        let recounts: Vec<u32> = (1..=40).filter(|_| st.on_send()).collect();
        assert_eq!(recounts, [8, 16, 32]);
        assert_eq!(fb(&st), 40.0);
        // A full report keeps the streak going; any other ends it.
        st.on_report(true);
        assert_eq!(fb(&st), 40.0);
        st.on_report(false);
        assert!(!st.on_send());
        assert_eq!(fb(&st), 0.0);
        st.on_report(true);
        assert!(!st.on_send());
        assert_eq!(fb(&st), 1.0);
    }

    #[test]
    fn receive_statistics_report_changes_and_forget_the_past() {
        let mut rx = RxStats::default();
        let mut last = None;
        for i in 0..RxStats::EVERY * 2 {
            if let Some(r) = rx.note(false, 1000) {
                last = Some(r);
                assert_eq!(
                    (i + 1) % RxStats::EVERY,
                    0,
                    "reports only every EVERY messages"
                );
            }
        }
        let (share, level) = last.expect("first report");
        assert_eq!(share, 0);
        assert_eq!(level, 14); // 16000 bytes: 14 bits
        let f = Feedback::from_field(share, level);
        assert_eq!(f.preposted, 0.0);
        assert!(f.unexpected_bytes >= 8192.0 && f.unexpected_bytes < 65536.0);
        // Steady behaviour is not reported again.
        let mut rx2 = RxStats::default();
        let n = (0..1000).filter(|_| rx2.note(true, 10).is_some()).count();
        assert_eq!(n, 1);
        // After a phase change the old phase fades out within a few windows.
        let mut got = (0, 0);
        for _ in 0..RxStats::WINDOW * 4 {
            if let Some(r) = rx.note(true, 1000) {
                got = r;
            }
        }
        assert!(got.0 >= 59, "{got:?}");
        assert_eq!(Feedback::from_field(FEEDBACK_MAX, 0), Feedback::INITIAL);
    }

    #[test]
    fn a_phase_change_is_reported_within_a_few_messages() {
        let max = FEEDBACK_MAX;
        for first in [true, false] {
            let mut rx = RxStats::default();
            for _ in 0..RxStats::WINDOW * 3 {
                rx.note(first, 1000);
            }
            // The other way now: the report follows after CHANGE messages, all the way.
            let mut got = None;
            for i in 1..=RxStats::CHANGE {
                if let Some(r) = rx.note(!first, 1000) {
                    assert_eq!(
                        i,
                        RxStats::CHANGE,
                        "reported before the run was long enough"
                    );
                    got = Some(r);
                }
            }
            let (share, level) = got.expect("reported at once");
            if first {
                assert_eq!((share, level), (0, 13)); // 8000 unexpected bytes
            } else {
                assert_eq!((share, level), (max, 0));
            }
        }
    }

    #[test]
    fn receives_preposted_for_part_of_every_burst_give_a_steady_share() {
        // Bursts of 64 with the first pct% of receives preposted (bench/prepost's rounds): the
        // report settles near the share and stays there; no run restarts the window.
        for pct in [10u32, 25, 50, 75, 90] {
            let mut rx = RxStats::default();
            let pre = RxStats::WINDOW * pct / 100;
            let mut shares = vec![];
            for round in 0..40 {
                // The burst, then a small message whose receive waits for it ("done").
                for i in 0..=RxStats::WINDOW {
                    if let Some((s, _)) = rx.note(i < pre || i == RxStats::WINDOW, 1000) {
                        if round >= 8 {
                            shares.push(s);
                        }
                    }
                }
            }
            let want = f64::from(pct) / 100.0 * f64::from(FEEDBACK_MAX);
            for s in &shares {
                assert!(
                    (f64::from(*s) - want).abs() <= 0.25 * f64::from(FEEDBACK_MAX),
                    "{pct}%: share {s} of {shares:?}"
                );
            }
        }
    }

    #[test]
    fn phases_of_bursts_are_told_apart_within_a_burst() {
        // bench/prepost's mixed workload: phases of 8 bursts of k messages, each burst
        // followed by a "done" message whose receive waits for it; receives of the bursts
        // all preposted or none. From the second burst of a phase on, the report says so.
        for k in [32u32, 64] {
            let mut rx = RxStats::default();
            let mut share = FEEDBACK_MAX;
            for phase in 0..12 {
                let posted = phase % 2 == 1;
                for burst in 0..8 {
                    for i in 0..=k {
                        if let Some((s, _)) = rx.note(posted || i == k, 100) {
                            share = s;
                        }
                    }
                    if phase >= 2 && burst >= 1 {
                        let want = if posted { FEEDBACK_MAX } else { 0 };
                        assert!(
                            share.abs_diff(want) <= FEEDBACK_MAX / 5,
                            "k {k} phase {phase} burst {burst}: share {share}"
                        );
                    }
                }
            }
        }
    }
}
