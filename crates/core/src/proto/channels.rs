//! The channel manager: which peers hold this process's dedicated channels (PRO-MPI's
//! reconfiguration manager, with its profiler and analyzer formats).
//!
//! A transport offers a few dedicated channels that carry one peer's frames to us
//! ([`Transport::channel_slots`]; on shared memory a ring in our segment). The mechanism of
//! handing one over and taking it back (CONNECTED -> QUIESCE -> DISCONNECTED) with every frame in
//! order lives in the transport; this module decides, from three sources:
//!
//! - **static**: what the transport assigned at setup (every local peer, when they all fit),
//!   changed only where a schedule says so;
//! - **online** (the default): a peer whose frames arrived by the shared path at least
//!   `chan_promote_after` times within a window of `chan_window` shared arrivals is promoted
//!   while a channel is free; when none is, the least recently used channel that carried
//!   nothing for a window is taken back (QUIESCE) and goes to the peer once drained;
//! - **a schedule** (`PROTEAN_SCHEDULE=FILE`, written by `protean-prof analyze` from the
//!   profiles of earlier runs): at each phase boundary (`MPI_Pcontrol`) the peers the schedule
//!   lists for this process and phase get channels, in priority order, each taking a free one
//!   or, when none is free, the least recently used one of a peer not listed (drained first);
//!   phases and slots the schedule leaves free follow the online rule. A schedule
//!   from a run with another number of processes applies by relative position: this rank plays
//!   the schedule rank at the same relative place, and each scheduled peer keeps its distance
//!   (in ranks, wrapping) from it.
//!
//! The profiler (`PROTEAN_PROFILE=PATH`) records, per phase and per peer, the messages and bytes
//! this process sent to it (counted where they are sent, so a peer running ahead of us cannot
//! blur the phases) and writes `PATH.<rank>` at finalize; the analyzer turns what j sent to i in
//! phase k into i's priority for j (a channel carries its peer's messages to its owner). Both file formats are text, described at [`Profile`] and
//! [`Schedule`].
//!
//! The manager runs in the progress pass, but only looks at peers when frames arrived by the
//! shared path since its last look ([`Transport::shared_arrivals`], one load), a channel
//! change completed ([`Transport::channel_changes`], one load), or its settings or candidates
//! changed. A change it asked for and still under way is not a reason by itself: looking at
//! every pass until the peer answered made `look` about 13% of an 8-byte `MPI_Iallreduce` at
//! 16 ranks (session 42's profile), and nothing it could decide changes before the change
//! completes.

use std::fmt::Write as _;

use crate::events::{self, reason, Event};
use crate::transport::{ChannelState, Gpid, Transport};

pub use crate::config::CHAN_POLICIES;

/// One peer as the manager follows it.
#[derive(Debug, Clone, Copy, Default)]
struct PeerStat {
    /// The peer's shared-path frames when the current window began.
    base: u64,
    /// Its fast-path frames when last looked at, and the clock (shared arrivals) then.
    fast_seen: u64,
    last_active: u64,
    /// Messages and bytes sent to the peer before the current phase (the profiler's delta).
    phase_start: (u64, u64),
}

/// The per-phase record of one process: `phases[k]` = (peer, messages, bytes) for each peer
/// it sent messages to in phase k.
///
/// File format (`PATH.<rank>`): a first line `protean-profile 1 rank R size S`, then one line
/// `PHASE PEER MESSAGES BYTES` per phase and peer with traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub rank: Gpid,
    pub size: u32,
    pub phases: Vec<Vec<(Gpid, u64, u64)>>,
}

impl Profile {
    pub fn to_text(&self) -> String {
        let mut s = format!("protean-profile 1 rank {} size {}\n", self.rank, self.size);
        for (k, ph) in self.phases.iter().enumerate() {
            for &(p, f, b) in ph {
                let _ = writeln!(s, "{k} {p} {f} {b}");
            }
        }
        s
    }

    pub fn parse(text: &str) -> Result<Profile, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let head: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
        let (rank, size) = match head[..] {
            ["protean-profile", "1", "rank", r, "size", s] => (
                r.parse().map_err(|_| format!("bad rank '{r}'"))?,
                s.parse().map_err(|_| format!("bad size '{s}'"))?,
            ),
            _ => {
                return Err(
                    "not a Protean profile (first line 'protean-profile 1 rank R size S')".into(),
                )
            }
        };
        let mut p = Profile {
            rank,
            size,
            phases: Vec::new(),
        };
        for (i, l) in lines.enumerate() {
            let v: Vec<u64> = l
                .split_whitespace()
                .map(|x| x.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("line {}: '{l}' is not 'PHASE PEER FRAMES BYTES'", i + 2))?;
            let [k, peer, f, b] = v[..] else {
                return Err(format!(
                    "line {}: '{l}' is not 'PHASE PEER FRAMES BYTES'",
                    i + 2
                ));
            };
            if k > 1 << 20 || peer >= u64::from(size) {
                return Err(format!("line {}: phase or peer out of range", i + 2));
            }
            while p.phases.len() <= k as usize {
                p.phases.push(Vec::new());
            }
            p.phases[k as usize].push((Gpid::new(peer as u32), f, b));
        }
        Ok(p)
    }
}

/// The analyzer's output: per process and phase, the peers that get channels, best first.
///
/// File format: a first line `protean-schedule 1 size S`, then lines
/// `RANK PHASE PEER,PEER,...` (an empty list is `-`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    pub size: u32,
    /// `ranks[r][k]`: peers of rank r in phase k, in priority order.
    pub ranks: Vec<Vec<Vec<Gpid>>>,
}

impl Schedule {
    /// PRO-MPI's analyzer: the priority matrix p[i][j][k] is the number of messages process
    /// j sent to i in phase k (they would travel in a channel of i's); each process's maximum
    /// number of channels is the most peers that carried at least `min_share` of its incoming
    /// messages in any phase, capped at `max_fast`; in each phase its peers, ranked by
    /// messages (bytes break ties), take up to that many channels.
    pub fn analyze(
        profiles: &[Profile],
        max_fast: usize,
        min_share: f64,
    ) -> Result<Schedule, String> {
        let size = profiles.first().ok_or("no profiles")?.size;
        if profiles.iter().any(|p| p.size != size) {
            return Err("the profiles come from runs of different sizes".into());
        }
        // Transpose: incoming[i][k] = (j, messages, bytes) that j sent to i in phase k.
        let mut incoming: Vec<Vec<Vec<(Gpid, u64, u64)>>> = vec![Vec::new(); size as usize];
        for p in profiles {
            if p.rank.get() >= size {
                return Err(format!("rank {} in a run of {size}", p.rank));
            }
            for (k, ph) in p.phases.iter().enumerate() {
                for &(to, f, b) in ph {
                    let inc = &mut incoming[to.idx()];
                    while inc.len() <= k {
                        inc.push(Vec::new());
                    }
                    inc[k].push((p.rank, f, b));
                }
            }
        }
        let mut ranks = vec![Vec::new(); size as usize];
        for (i, inc) in incoming.iter().enumerate() {
            let ranked: Vec<Vec<(Gpid, u64)>> = inc
                .iter()
                .map(|ph| {
                    let total: u64 = ph.iter().map(|x| x.1).sum();
                    let mut v: Vec<(Gpid, u64, u64)> = ph
                        .iter()
                        .copied()
                        .filter(|&(_, f, _)| f > 0 && f as f64 >= min_share * total as f64)
                        .collect();
                    v.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
                    v.into_iter().map(|(g, f, _)| (g, f)).collect()
                })
                .collect();
            let max = ranked
                .iter()
                .map(|v| v.len())
                .max()
                .unwrap_or(0)
                .min(max_fast);
            ranks[i] = ranked
                .into_iter()
                .map(|v| v.into_iter().take(max).map(|x| x.0).collect())
                .collect();
        }
        Ok(Schedule { size, ranks })
    }

    pub fn to_text(&self) -> String {
        let mut s = format!("protean-schedule 1 size {}\n", self.size);
        for (r, phases) in self.ranks.iter().enumerate() {
            for (k, peers) in phases.iter().enumerate() {
                let list = if peers.is_empty() {
                    "-".to_string()
                } else {
                    peers
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let _ = writeln!(s, "{r} {k} {list}");
            }
        }
        s
    }

    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut lines = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
        let head: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
        let size: u32 = match head[..] {
            ["protean-schedule", "1", "size", s] => {
                s.parse().map_err(|_| format!("bad size '{s}'"))?
            }
            _ => {
                return Err(
                    "not a Protean schedule (first line 'protean-schedule 1 size S')".into(),
                )
            }
        };
        if size == 0 || size > 1 << 24 {
            return Err(format!("size {size} out of range"));
        }
        let mut ranks = vec![Vec::new(); size as usize];
        for l in lines {
            let bad = || format!("'{l}' is not 'RANK PHASE PEER,PEER,...'");
            let v: Vec<&str> = l.split_whitespace().collect();
            let [r, k, list] = v[..] else {
                return Err(bad());
            };
            let r: u32 = r.parse().map_err(|_| bad())?;
            let k: usize = k.parse().map_err(|_| bad())?;
            if r >= size || k > 1 << 20 {
                return Err(format!("'{l}': rank or phase out of range"));
            }
            let peers = if list == "-" {
                Vec::new()
            } else {
                list.split(',')
                    .map(|p| p.parse::<Gpid>().ok().filter(|&p| p.get() < size))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(bad)?
            };
            let phases: &mut Vec<Vec<Gpid>> = &mut ranks[r as usize];
            while phases.len() <= k {
                phases.push(Vec::new());
            }
            phases[k] = peers;
        }
        Ok(Schedule { size, ranks })
    }

    /// The peers of `rank` (of `size`) in `phase`, mapped from the schedule's run by relative
    /// position when the sizes differ; None where the schedule has nothing for that phase.
    pub fn peers_for(&self, rank: Gpid, size: u32, phase: usize) -> Option<Vec<Gpid>> {
        let ss = self.size as u64;
        let (r, n) = (u64::from(rank.get()), u64::from(size));
        let rs = if ss == n { r } else { r * ss / n };
        let list = self.ranks.get(rs as usize)?.get(phase)?;
        let mut out = Vec::with_capacity(list.len());
        for &ps in list {
            // The peer's distance from rs, wrapped into -ss/2..ss/2, kept from us.
            let mut d = (ps.get() as i64 - rs as i64).rem_euclid(ss as i64);
            if d > ss as i64 / 2 {
                d -= ss as i64;
            }
            let p = Gpid::new((r as i64 + d).rem_euclid(n as i64) as u32);
            if p != rank && !out.contains(&p) {
                out.push(p);
            }
        }
        Some(out)
    }
}

/// Settings of the manager (the `chan_*` tunables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Index into [`CHAN_POLICIES`].
    pub policy: usize,
    /// Channels the manager may hand out at most (<= what the transport offers); fewer than
    /// held now: the surplus is taken back.
    pub max: usize,
    pub promote_after: u64,
    pub window: u64,
}

/// The reconfiguration manager of one process.
pub struct Manager {
    pub set: Settings,
    me: Gpid,
    size: u32,
    /// Peers a channel can go to (on a transport with channels), ascending.
    candidates: Vec<Gpid>,
    stats: Vec<PeerStat>,
    /// Look again once shared arrivals reach this count (the earliest a rule can decide
    /// anything new; see [`Manager::look`]), and when the window began.
    next: u64,
    window_start: u64,
    /// Channel changes completed at the last look.
    changes: u64,
    /// Look at the next pass whatever the counts (new settings, candidates or phase).
    pending: bool,
    pub phase: usize,
    schedule: Option<Schedule>,
    /// The scheduled peers of this phase (best first); the online rule never evicts them.
    pinned: Vec<Gpid>,
    /// The profiler, when on: completed phases.
    recording: Option<Profile>,
}

impl Manager {
    /// `candidates`: the peers reached by a transport with channels.
    pub fn new(me: Gpid, size: u32, candidates: Vec<Gpid>, set: Settings) -> Manager {
        Manager {
            set,
            me,
            size,
            candidates,
            stats: vec![PeerStat::default(); size as usize],
            next: 0,
            window_start: 0,
            changes: 0,
            pending: true,
            phase: 0,
            schedule: None,
            pinned: Vec::new(),
            recording: None,
        }
    }

    /// The process table grew to `size` (processes of another job joined).
    pub fn grow(&mut self, size: u32) {
        if size > self.size {
            self.size = size;
            self.stats.resize(size as usize, PeerStat::default());
        }
    }

    /// Processes of another job joined on a transport with channels (spawned, or connected):
    /// they compete for channels like the job's own peers from the next look on.
    pub fn add_candidates(&mut self, peers: impl IntoIterator<Item = Gpid>) {
        for p in peers {
            if p == self.me {
                continue;
            }
            if let Err(i) = self.candidates.binary_search(&p) {
                self.candidates.insert(i, p);
                self.pending = true;
            }
        }
        self.grow(self.candidates.last().map_or(0, |&p| p.offset(1).get()));
    }

    /// A process of another job left: it competes no more (its channel, if it held one, is
    /// reclaimed by the transport when it detaches the process).
    pub fn remove_candidate(&mut self, p: Gpid) {
        if let Ok(i) = self.candidates.binary_search(&p) {
            self.candidates.remove(i);
            self.pinned.retain(|&q| q != p);
            if let Some(s) = self.stats.get_mut(p.idx()) {
                *s = PeerStat::default();
            }
            self.pending = true;
        }
    }

    /// Start recording a profile.
    pub fn record(&mut self) {
        self.recording = Some(Profile {
            rank: self.me,
            size: self.size,
            phases: Vec::new(),
        });
    }

    /// Follow `s` from the current phase on.
    pub fn use_schedule(&mut self, s: Schedule) {
        self.schedule = Some(s);
        self.enter_phase();
    }

    /// Change the settings (MPI_T): a lower `max` takes channels back at the next look.
    pub fn configure(&mut self, set: Settings) {
        self.set = set;
        self.pending = true;
    }

    /// Is there anything to look at this pass? (Inline, two loads on the idle path.)
    #[inline(always)]
    pub fn due<T: Transport>(&self, io: &T) -> bool {
        self.pending || io.shared_arrivals() >= self.next || io.channel_changes() != self.changes
    }

    /// MPI_Pcontrol: the next phase begins. `sent(p)`: messages and bytes sent to `p` so far.
    pub fn next_phase(&mut self, sent: impl Fn(Gpid) -> (u64, u64)) {
        self.close_phase(sent);
        self.phase += 1;
        self.enter_phase();
    }

    /// Record the phase that ends (profiler).
    fn close_phase(&mut self, sent: impl Fn(Gpid) -> (u64, u64)) {
        let Some(rec) = self.recording.as_mut() else {
            return;
        };
        let mut ph = Vec::new();
        for p in Gpid::new(0).block(self.size) {
            let (m, bytes) = sent(p);
            let s = &mut self.stats[p.idx()];
            let (f, b) = (m - s.phase_start.0, bytes - s.phase_start.1);
            s.phase_start = (m, bytes);
            if f > 0 && p != self.me {
                ph.push((p, f, b));
            }
        }
        while rec.phases.len() < self.phase {
            rec.phases.push(Vec::new());
        }
        rec.phases.push(ph);
    }

    fn enter_phase(&mut self) {
        self.pinned = match &self.schedule {
            Some(s) => s
                .peers_for(self.me, self.size, self.phase)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        self.pinned.retain(|p| self.candidates.contains(p));
        self.pinned.truncate(self.set.max);
        self.pending = true;
    }

    /// The profile recorded so far, the current phase closed (at finalize).
    pub fn finish(&mut self, sent: impl Fn(Gpid) -> (u64, u64)) -> Option<Profile> {
        self.close_phase(sent);
        self.recording.take()
    }

    /// Look at the peers and change channels as the rules say. Call when [`Manager::due`].
    ///
    /// It also says when to look next: after as many shared arrivals as the online rule
    /// needs at least before it can decide anything new (a peer reaching `promote_after`
    /// recent frames, a connected peer idle for a window, the window's end), or at once
    /// where that is not known; and whenever a channel change completes. At 16 ranks a look
    /// at every arrival was about 2,700 instructions, 11% of an 8-byte `MPI_Iallreduce`,
    /// deciding nothing most times.
    pub fn look<T: Transport>(&mut self, io: &mut T) {
        let now = io.shared_arrivals();
        self.changes = io.channel_changes();
        self.pending = false;
        let online = self.set.policy == 0;
        if !online && self.pinned.is_empty() {
            // Nothing to do until the settings or the phase change (`pending`).
            self.next = u64::MAX;
            return;
        }
        let window = self.set.window.max(1);
        let threshold = self.set.promote_after.max(1);
        // Arrivals before the next look: the fewest after which a rule may decide otherwise.
        let mut wait = u64::MAX;
        let mut held = 0;
        let mut changing = false;
        for &p in &self.candidates {
            let st = io.channel(p);
            if st.holds_slot() {
                held += 1;
            }
            if matches!(st, ChannelState::Connecting | ChannelState::Quiesce) {
                changing = true;
            }
            if st == ChannelState::Connected {
                let f = io.usage(p).fast_frames;
                let s = &mut self.stats[p.idx()];
                if f != s.fast_seen {
                    s.fast_seen = f;
                    s.last_active = now;
                }
            }
        }
        // Over the limit (chan_max lowered): the least recently used give theirs back.
        while held > self.set.max {
            let Some(v) = self.victim(io) else {
                wait = 1;
                break;
            };
            take_back(io, v, reason::OVER_MAX);
            held -= 1;
            changing = true;
        }
        // The schedule's peers first, best first; one drained channel per peer still waiting.
        let mut draining = self
            .candidates
            .iter()
            .filter(|&&p| io.channel(p) == ChannelState::Quiesce)
            .count();
        for i in 0..self.pinned.len() {
            let p = self.pinned[i];
            if io.channel(p) != ChannelState::Shared {
                continue;
            }
            changing = true;
            wait = 1;
            if held < self.set.max && grant(io, p, reason::SCHEDULE) {
                held += 1;
            } else if draining > 0 {
                draining -= 1;
            } else if let Some(v) = self.victim(io) {
                take_back(io, v, reason::SCHEDULE);
            }
        }
        // The online rule: the busiest peer on the shared path within the window.
        let mut best: Option<(u64, Gpid)> = None;
        let mut most = 0;
        for &p in self.candidates.iter().filter(|_| online) {
            if io.channel(p) != ChannelState::Shared {
                continue;
            }
            let u = io.usage(p).shared_frames;
            let s = &mut self.stats[p.idx()];
            if s.base > u {
                s.base = u;
            }
            let recent = u - s.base;
            most = most.max(recent);
            if recent >= threshold && best.is_none_or(|b| recent > b.0) {
                best = Some((recent, p));
            }
        }
        match best {
            // No peer is busy enough yet: none can be before `threshold - most` arrivals.
            None => wait = wait.min(threshold - most),
            Some((_, p)) if held < self.set.max => {
                if grant(io, p, reason::ONLINE) {
                    self.stats[p.idx()].last_active = now;
                } else {
                    wait = 1;
                }
            }
            Some(_) if !changing => {
                // One change at a time: take back the least recently used idle channel; the
                // peer gets it at a later look once it is drained (that look comes with the
                // completed change, `Transport::channel_changes`).
                // Not idle yet: it becomes so a window after it was last seen active, at the
                // earliest (and is the first to).
                if let Some(v) = self.victim(io) {
                    let idle_at = self.stats[v.idx()].last_active + window;
                    if idle_at <= now {
                        take_back(io, v, reason::IDLE);
                    } else {
                        wait = wait.min(idle_at - now);
                    }
                }
            }
            // A change is under way: its completion brings the next look.
            Some(_) => {}
        }
        if now - self.window_start >= window {
            self.window_start = now;
            for &p in &self.candidates {
                self.stats[p.idx()].base = io.usage(p).shared_frames;
            }
        }
        wait = wait.min(self.window_start + window - now).max(1);
        self.next = now.saturating_add(wait);
    }

    /// The connected peer to take a channel from: the least recently active, not pinned (if
    /// any peer is idle for a window, this one is).
    fn victim<T: Transport>(&self, io: &T) -> Option<Gpid> {
        self.candidates
            .iter()
            .copied()
            .filter(|&p| io.channel(p) == ChannelState::Connected && !self.pinned.contains(&p))
            .min_by_key(|&p| self.stats[p.idx()].last_active)
    }
}

/// Offer `p` a channel (the transport's `connect`); an event tells tools when it was offered.
fn grant<T: Transport>(io: &mut T, p: Gpid, why: i64) -> bool {
    let done = io.connect(p);
    if done {
        events::raise(Event::ChanGrant, || [p.get() as i64, why]);
    }
    done
}

/// Take back `p`'s channel (the transport's `quiesce`), with its event.
fn take_back<T: Transport>(io: &mut T, p: Gpid, why: i64) {
    if io.quiesce(p) {
        events::raise(Event::ChanTakeBack, || [p.get() as i64, why]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Caps, FrameSink, SendError, Sent, Token, Usage, HEADER_LEN};

    /// A transport with `slots` channels whose changes complete at the next `progress`.
    struct Fake {
        slots: usize,
        state: Vec<ChannelState>,
        usage: Vec<Usage>,
        arrivals: u64,
        changes: u64,
    }

    impl Fake {
        fn new(n: usize, slots: usize) -> Fake {
            Fake {
                slots,
                state: vec![ChannelState::Shared; n],
                usage: vec![Usage::default(); n],
                arrivals: 0,
                changes: 0,
            }
        }
        fn arrive(&mut self, p: usize, k: u64) {
            if self.state[p] == ChannelState::Connected {
                self.usage[p].fast_frames += k;
            } else {
                self.usage[p].shared_frames += k;
                self.arrivals += k;
            }
        }
        fn settle(&mut self) {
            for s in self.state.iter_mut() {
                *s = match *s {
                    ChannelState::Connecting | ChannelState::Quiesce => {
                        self.changes += 1;
                        if *s == ChannelState::Connecting {
                            ChannelState::Connected
                        } else {
                            ChannelState::Shared
                        }
                    }
                    x => x,
                };
            }
        }
        fn held(&self) -> Vec<usize> {
            (0..self.state.len())
                .filter(|&p| self.state[p] == ChannelState::Connected)
                .collect()
        }
    }

    impl Transport for Fake {
        fn reaches(&self, _: Gpid) -> bool {
            true
        }
        fn caps(&self, _: Gpid) -> Caps {
            Caps::NONE
        }
        fn name(&self) -> &'static str {
            "fake"
        }
        fn send(
            &mut self,
            _: Gpid,
            _: &[u8; HEADER_LEN],
            _: &[u8],
            _: &[u8],
            _: Token,
        ) -> Result<Sent, SendError> {
            Ok(Sent::Done)
        }
        fn progress<S: FrameSink>(&mut self, _: &mut S) -> usize {
            0
        }
        fn channel_slots(&self) -> usize {
            self.slots
        }
        fn channel(&self, p: Gpid) -> ChannelState {
            self.state[p.idx()]
        }
        fn connect(&mut self, p: Gpid) -> bool {
            let used = self.state.iter().filter(|s| s.holds_slot()).count();
            if used >= self.slots || self.state[p.idx()] != ChannelState::Shared {
                return false;
            }
            self.state[p.idx()] = ChannelState::Connecting;
            true
        }
        fn quiesce(&mut self, p: Gpid) -> bool {
            if self.state[p.idx()] != ChannelState::Connected {
                return false;
            }
            self.state[p.idx()] = ChannelState::Quiesce;
            true
        }
        fn usage(&self, p: Gpid) -> Usage {
            self.usage[p.idx()]
        }
        fn shared_arrivals(&self) -> u64 {
            self.arrivals
        }
        fn channel_changes(&self) -> u64 {
            self.changes
        }
    }

    fn online(max: usize, n: u64, w: u64) -> Settings {
        Settings {
            policy: 0,
            max,
            promote_after: n,
            window: w,
        }
    }

    fn run(m: &mut Manager, io: &mut Fake) {
        for _ in 0..4 {
            if m.due(io) {
                m.look(io);
            }
            io.settle();
        }
    }

    #[test]
    fn online_promotes_busy_peers_and_moves_channels_when_they_change() {
        let mut io = Fake::new(8, 2);
        let mut m = Manager::new(
            Gpid::new(0),
            8,
            Gpid::new(1).block(7).collect(),
            online(2, 4, 64),
        );
        // Peers 1 and 2 talk: they get the two channels; a peer below the threshold does not.
        io.arrive(1, 10);
        io.arrive(2, 5);
        io.arrive(3, 2);
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![1, 2]);
        // The busy set moves to 5 and 6: the idle channels go to them, one change at a time.
        for _ in 0..40 {
            io.arrive(5, 3);
            io.arrive(6, 3);
            run(&mut m, &mut io);
        }
        assert_eq!(io.held(), vec![5, 6]);
        // A busy channel is not taken from its peer for a newcomer.
        for _ in 0..40 {
            io.arrive(5, 3);
            io.arrive(6, 3);
            io.arrive(7, 3);
            run(&mut m, &mut io);
        }
        assert_eq!(io.held(), vec![5, 6]);
    }

    #[test]
    fn a_change_under_way_is_looked_at_again_only_once_it_completes() {
        let mut io = Fake::new(4, 1);
        let mut m = Manager::new(
            Gpid::new(0),
            4,
            Gpid::new(1).block(3).collect(),
            online(1, 4, 64),
        );
        assert!(m.due(&io), "a new manager looks once");
        m.look(&mut io);
        assert!(!m.due(&io));
        // No peer can reach promote_after (4) recent frames before 4 more arrivals.
        io.arrive(1, 3);
        assert!(!m.due(&io), "3 arrivals cannot promote anyone");
        io.arrive(3, 1);
        assert!(m.due(&io), "4 may");
        m.look(&mut io);
        assert_eq!(io.held(), Vec::<usize>::new());
        assert!(!m.due(&io), "peer 1 needs one more");
        io.arrive(1, 7);
        assert!(m.due(&io), "arrivals on the shared path");
        m.look(&mut io);
        assert_eq!(io.state[1], ChannelState::Connecting);
        // The peer has not answered: nothing to decide, no look at every pass.
        assert!(!m.due(&io));
        io.settle();
        assert!(m.due(&io), "the change completed");
        m.look(&mut io);
        assert!(!m.due(&io));
        // The busy peer moves: the idle channel is taken back (one change), and once drained
        // (a completed change, no arrivals) it goes to the new peer.
        for _ in 0..20 {
            io.arrive(2, 10);
            if m.due(&io) {
                m.look(&mut io);
            }
        }
        assert_eq!(io.state[1], ChannelState::Quiesce);
        io.settle();
        assert!(m.due(&io));
        m.look(&mut io);
        io.arrive(2, 10);
        m.look(&mut io);
        assert_eq!(io.state[2], ChannelState::Connecting);
        io.settle();
        assert_eq!(io.held(), vec![2]);
    }

    #[test]
    fn processes_of_another_job_compete_once_added_and_stop_once_removed() {
        // A job of 3 (gpids 0-2); a spawned job's processes 3 and 4 join later.
        let mut io = Fake::new(5, 2);
        let mut m = Manager::new(
            Gpid::new(0),
            3,
            vec![Gpid::new(1), Gpid::new(2)],
            online(2, 4, 64),
        );
        io.arrive(3, 50);
        run(&mut m, &mut io);
        assert_eq!(
            io.held(),
            Vec::<usize>::new(),
            "not a candidate before it joins"
        );
        m.add_candidates(crate::ids::gpids(&[4, 3, 0, 3]));
        io.arrive(3, 50);
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![3]);
        // It leaves (the transport reclaims its channel): never promoted again.
        m.remove_candidate(Gpid::new(3));
        io.state[3] = ChannelState::Shared;
        io.arrive(3, 50);
        io.arrive(4, 50);
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![4]);
    }

    #[test]
    fn each_grant_and_take_back_is_an_event_with_its_reason() {
        use crate::events::testing;
        testing::record(&[Event::ChanGrant, Event::ChanTakeBack]);
        let ev = |v: Vec<(Event, u64, Vec<i64>)>| -> Vec<(Event, i64, i64)> {
            v.into_iter().map(|(e, _, x)| (e, x[0], x[1])).collect()
        };
        let (grant, back) = (Event::ChanGrant, Event::ChanTakeBack);
        let mut io = Fake::new(4, 1);
        let peers = vec![Gpid::new(1), Gpid::new(2), Gpid::new(3)];
        let mut m = Manager::new(Gpid::new(0), 4, peers, online(1, 1, 4));
        io.arrive(1, 2);
        run(&mut m, &mut io);
        assert_eq!(ev(testing::take()), vec![(grant, 1, reason::ONLINE)]);
        // Peer 1 falls silent, 2 is busy: 1's channel is taken back once idle, 2 gets it.
        for _ in 0..4 {
            io.arrive(2, 2);
            run(&mut m, &mut io);
        }
        assert_eq!(
            ev(testing::take()),
            vec![(back, 1, reason::IDLE), (grant, 2, reason::ONLINE)]
        );
        // The schedule wants 3 in phase 1: 2's channel goes to it.
        m.use_schedule(Schedule::parse("protean-schedule 1 size 4\n0 1 3\n").unwrap());
        m.next_phase(|_| (0, 0));
        run(&mut m, &mut io);
        assert_eq!(
            ev(testing::take()),
            vec![(back, 2, reason::SCHEDULE), (grant, 3, reason::SCHEDULE)]
        );
        // Phase 2 is not scheduled, and no channel at all is allowed: 3 gives its back.
        m.next_phase(|_| (0, 0));
        m.configure(Settings {
            max: 0,
            ..online(1, 1, 4)
        });
        run(&mut m, &mut io);
        assert_eq!(ev(testing::take()), vec![(back, 3, reason::OVER_MAX)]);
    }

    #[test]
    fn lowering_max_gives_channels_back_and_static_changes_nothing() {
        let mut io = Fake::new(4, 3);
        let mut m = Manager::new(
            Gpid::new(0),
            4,
            vec![Gpid::new(1), Gpid::new(2), Gpid::new(3)],
            online(3, 1, 8),
        );
        for p in 1..4 {
            io.arrive(p, 2);
            run(&mut m, &mut io);
        }
        assert_eq!(io.held(), vec![1, 2, 3]);
        m.configure(online(1, 1, 8));
        io.arrive(3, 1);
        run(&mut m, &mut io);
        assert_eq!(io.held().len(), 1);
        let mut s = Manager::new(
            Gpid::new(0),
            4,
            vec![Gpid::new(1), Gpid::new(2), Gpid::new(3)],
            Settings {
                policy: 1,
                ..online(3, 1, 8)
            },
        );
        let mut io = Fake::new(4, 3);
        io.arrive(1, 50);
        run(&mut s, &mut io);
        assert!(io.held().is_empty());
        // A schedule still applies under the static rule.
        let sched = Schedule::parse("protean-schedule 1 size 4\n0 1 2\n").unwrap();
        s.use_schedule(sched);
        run(&mut s, &mut io);
        assert!(io.held().is_empty());
        s.next_phase(|_| (0, 0));
        run(&mut s, &mut io);
        assert_eq!(io.held(), vec![2]);
    }

    #[test]
    fn schedule_assigns_per_phase_and_online_fills_the_rest() {
        let text = "protean-schedule 1 size 4\n0 0 1\n0 1 3,2\n";
        let sched = Schedule::parse(text).unwrap();
        assert_eq!(Schedule::parse(&sched.to_text()).unwrap(), sched);
        let mut io = Fake::new(4, 2);
        let mut m = Manager::new(
            Gpid::new(0),
            4,
            vec![Gpid::new(1), Gpid::new(2), Gpid::new(3)],
            online(2, 1000, 1 << 20),
        );
        m.use_schedule(sched);
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![1]);
        m.next_phase(|_| (0, 0));
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![2, 3]);
        // Phase 2 is not in the schedule: the online rule keeps what is busy.
        m.next_phase(|_| (0, 0));
        run(&mut m, &mut io);
        assert_eq!(io.held(), vec![2, 3]);
    }

    #[test]
    fn profiles_analyze_into_schedules_that_map_to_other_sizes() {
        let mk = |rank, phases: Vec<Vec<(Gpid, u64, u64)>>| Profile {
            rank,
            size: 4,
            phases,
        };
        // What each rank sent: 1 and 2 to 0 in phase 0 (100 and 1 messages), 2 and 3 to 0 in
        // phase 1 (60 and 50), 0 to 1 in phase 0.
        let profs = vec![
            mk(Gpid::new(0), vec![vec![(Gpid::new(1), 5, 5)]]),
            mk(Gpid::new(1), vec![vec![(Gpid::new(0), 100, 1000)]]),
            mk(
                Gpid::new(2),
                vec![vec![(Gpid::new(0), 1, 10)], vec![(Gpid::new(0), 60, 0)]],
            ),
            mk(Gpid::new(3), vec![vec![], vec![(Gpid::new(0), 50, 0)]]),
        ];
        for p in &profs {
            assert_eq!(&Profile::parse(&p.to_text()).unwrap(), p);
        }
        assert!(Profile::parse("protean-profile 1 rank 0 size 2\n0 5 1 1\n").is_err());
        assert!(Profile::parse("garbage").is_err());
        assert!(Schedule::parse("protean-schedule 1 size 2\n0 0 7\n").is_err());
        let s = Schedule::analyze(&profs, 8, 0.05).unwrap();
        assert_eq!(s.ranks[0], vec![vec![1], vec![2, 3]]);
        assert_eq!(s.ranks[1], vec![vec![0]]);
        assert!(s.ranks[2].is_empty() && s.ranks[3].is_empty());
        assert_eq!(
            Schedule::analyze(&profs, 1, 0.05).unwrap().ranks[0],
            vec![vec![1], vec![2]]
        );
        // Same size: as written. Twice the size: rank 2 plays rank 1, rank 0 keeps its
        // neighbours at their distances (+1 -> +1, +2 and +3=-1 -> +2 and -1).
        assert_eq!(
            s.peers_for(Gpid::new(0), 4, 1),
            Some(crate::ids::gpids(&[2, 3]))
        );
        assert_eq!(
            s.peers_for(Gpid::new(0), 8, 1),
            Some(crate::ids::gpids(&[2, 7]))
        );
        assert_eq!(
            s.peers_for(Gpid::new(2), 8, 0),
            Some(crate::ids::gpids(&[1]))
        );
        assert_eq!(s.peers_for(Gpid::new(0), 4, 5), None);
    }
}
