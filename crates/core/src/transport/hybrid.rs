//! Hybrid channels: datagrams for every peer, a TCP connection for the busiest few
//! (MVAPICH2's hybrid UD/RC), handed over with every frame in order.
//!
//! With `transports=udp,tcp` (UDP listed before TCP for a pair of processes, both reaching the
//! peer, `udp_max_connections` > 0) every peer starts on the UDP transport, whose one socket
//! reaches everybody. Each process offers `udp_max_connections` dedicated channels: a TCP
//! connection that carries one peer's frames *to us*. Which peers get them is the channel
//! manager's decision (`proto::channels`, the same online rule and settings as the
//! shared-memory rings); this module is the mechanism, sans I/O: [`Hybrid`] sees each frame
//! as it arrives (by which path, from whom) and says what to send; the dispatcher
//! (`net::Net`) does the sending and moves the peer's route.
//!
//! # The hand-over
//!
//! Three transport control records (header byte 0 [`CONTROL_KIND`], byte 1 [`TAG`]):
//!
//! - OFFER (receiver to sender, by any path): "send me your frames by TCP". The receiver's
//!   channel state becomes CONNECTING; it holds a slot.
//! - TAKEBACK (receiver to sender): "by datagrams again"; the state becomes QUIESCE.
//! - SWITCH (sender to receiver, the last frame on the old path): the sender's frames continue
//!   on the other path. The sender sends it, then moves its route to the peer, in the same
//!   progress pass and before any other frame goes to the peer.
//!
//! The receiver keeps, per peer, the path it delivers from (`rx_on`). Frames from the peer
//! that arrive by the other path are held, copied, in arrival order (each path is reliable
//! and ordered on its own); the SWITCH record, delivered in its turn on the current path,
//! flips `rx_on` and then delivers what was held. So nothing is lost, duplicated or reordered
//! across a switch, whatever the frames' kinds and however the two paths race: the same
//! guarantee as the shared-memory ring's QUIESCE. A payload the protocol layer would place
//! directly is not placed while held ([`Hybrid::may_place`]). Requests (OFFER, TAKEBACK) are
//! acted on as they arrive, by whichever path.
//!
//! The channel states follow the contract: SHARED (datagrams), CONNECTING (offered) ->
//! CONNECTED (the SWITCH arrived by datagram; a promotion), QUIESCE (taken back) -> SHARED
//! (the SWITCH arrived by TCP; a demotion, and the slot is free).
//!
//! # Memory
//!
//! A peer that never holds a channel costs 17 bytes here (its datagram frame count, a flag
//! and an empty box pointer); the [`Link`] of a peer is made when a channel first concerns
//! it.

use crate::events::{self, Event};
use std::collections::VecDeque;

use super::HEADER_LEN;
use super::{ChannelCounters, ChannelState, FrameSink, Gpid, Placement, Usage, CONTROL_KIND};

/// Header byte 1 of a hybrid control record.
pub const TAG: u8 = b'H';
/// Header byte 2: the record.
pub const OFFER: u8 = 1;
pub const TAKEBACK: u8 = 2;
pub const SWITCH: u8 = 3;

/// The header of a control record.
pub fn record(kind: u8) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = CONTROL_KIND;
    h[1] = TAG;
    h[2] = kind;
    h
}

/// How frames travel between two processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Path {
    /// The UDP transport (the shared path).
    #[default]
    Dgram,
    /// A TCP connection (the dedicated channel).
    Conn,
}

impl Path {
    fn other(self) -> Path {
        match self {
            Path::Dgram => Path::Conn,
            Path::Conn => Path::Dgram,
        }
    }
}

/// What the dispatcher must do after a progress pass (in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send the control record `kind` to the peer by its current route.
    Send(Gpid, u8),
    /// Send SWITCH to the peer by its current route, then route it by `to`.
    Switch(Gpid, Path),
}

/// One peer that a channel concerned.
#[derive(Debug, Default)]
struct Link {
    /// Our channel from it (receive side).
    state: ChannelState,
    /// The path its frames are delivered from now.
    rx_on: Path,
    /// Its frames that came by the other path (which), waiting for its SWITCH.
    held: VecDeque<(Path, [u8; HEADER_LEN], Box<[u8]>)>,
    fast_frames: u64,
    fast_bytes: u64,
}

/// The hybrid state of one process (see the module doc).
pub struct Hybrid {
    slots: usize,
    /// Peers a connection may be offered to (reached by both, UDP first).
    eligible: Vec<bool>,
    links: Vec<Option<Box<Link>>>,
    /// Frames that arrived by datagram, per peer and in all (eligible peers only).
    dgram_frames: Vec<u64>,
    dgram_total: u64,
    dgram_bytes: u64,
    /// The path our frames to each peer take (the sending side's view; mirrors the route).
    tx: Vec<Path>,
    actions: Vec<Action>,
    promotions: u64,
    demotions: u64,
}

impl Hybrid {
    /// `slots` connections offered at most; `eligible[g]`: process g may get one.
    pub fn new(slots: usize, eligible: Vec<bool>) -> Hybrid {
        let n = eligible.len();
        Hybrid {
            slots,
            eligible,
            links: (0..n).map(|_| None).collect(),
            dgram_frames: vec![0; n],
            dgram_total: 0,
            dgram_bytes: 0,
            tx: vec![Path::Dgram; n],
            actions: Vec::new(),
            promotions: 0,
            demotions: 0,
        }
    }

    /// Does the hybrid scheme cover `peer`?
    #[inline]
    pub fn covers(&self, peer: Gpid) -> bool {
        self.eligible.get(peer.idx()).copied().unwrap_or(false)
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The path our frames to `peer` take.
    pub fn tx(&self, peer: Gpid) -> Path {
        self.tx.get(peer.idx()).copied().unwrap_or_default()
    }

    /// The actions the last frames asked for, to carry out now.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// Are actions waiting?
    #[inline]
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// The dispatcher carried out `Switch(peer, to)`.
    pub fn switched(&mut self, peer: Gpid, to: Path) {
        if let Some(t) = self.tx.get_mut(peer.idx()) {
            *t = to;
        }
    }

    fn link(&mut self, peer: Gpid) -> &mut Link {
        self.links[peer.idx()].get_or_insert_with(Box::default)
    }

    fn rx_on(&self, peer: Gpid) -> Path {
        self.links
            .get(peer.idx())
            .and_then(|l| l.as_ref())
            .map_or(Path::Dgram, |l| l.rx_on)
    }

    /// May a payload from `peer` arriving by `path` be placed directly (it is not held)?
    #[inline]
    pub fn may_place(&self, path: Path, peer: Gpid) -> bool {
        !self.covers(peer) || self.rx_on(peer) == path
    }

    /// A frame arrived from `from` by `path`: deliver it to `sink`, hold it, or act on it.
    pub fn on_frame<S: FrameSink>(
        &mut self,
        path: Path,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        payload: &[u8],
        sink: &mut S,
    ) {
        if !self.covers(from) {
            sink.on_frame(from, hdr, payload);
            return;
        }
        if hdr[0] == CONTROL_KIND && hdr[1] == TAG && hdr[2] != SWITCH {
            self.request(from, hdr[2]);
            return;
        }
        if self.rx_on(from) != path {
            self.link(from)
                .held
                .push_back((path, *hdr, payload.to_vec().into_boxed_slice()));
            return;
        }
        self.deliver(path, from, hdr, payload, sink);
    }

    /// A frame from the path `from` is delivered from now.
    fn deliver<S: FrameSink>(
        &mut self,
        path: Path,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        payload: &[u8],
        sink: &mut S,
    ) {
        self.count(path, from, payload.len());
        if hdr[0] == CONTROL_KIND && hdr[1] == TAG {
            self.on_switch(from, sink);
        } else {
            sink.on_frame(from, hdr, payload);
        }
    }

    fn count(&mut self, path: Path, from: Gpid, len: usize) {
        match path {
            Path::Dgram => {
                self.dgram_frames[from.idx()] += 1;
                self.dgram_total += 1;
                self.dgram_bytes += len as u64;
            }
            Path::Conn => {
                let l = self.link(from);
                l.fast_frames += 1;
                l.fast_bytes += len as u64;
            }
        }
    }

    /// The peer's frames continue on the other path: deliver what that path held, up to
    /// the next SWITCH among them (which delivers the rest in its turn).
    fn on_switch<S: FrameSink>(&mut self, from: Gpid, sink: &mut S) {
        let l = self.link(from);
        l.rx_on = l.rx_on.other();
        if l.rx_on == Path::Conn {
            l.state = ChannelState::Connected;
            self.promotions += 1;
            events::raise(Event::ChanPromoted, || [from.get() as i64]);
        } else {
            l.state = ChannelState::Shared;
            self.demotions += 1;
            events::raise(Event::ChanDemoted, || [from.get() as i64]);
        }
        loop {
            let l = self.link(from);
            match l.held.front() {
                Some((p, _, _)) if *p == l.rx_on => {}
                _ => break,
            }
            let (p, h, body) = l.held.pop_front().expect("a front");
            self.deliver(p, from, &h, &body, sink);
        }
    }

    /// An OFFER or TAKEBACK from the receiving side of `from`.
    fn request(&mut self, from: Gpid, kind: u8) {
        let tx = self.tx(from);
        let want = match kind {
            OFFER => Path::Conn,
            TAKEBACK => Path::Dgram,
            _ => return,
        };
        // A request that repeats what is already so (or is under way) changes nothing.
        let pending = self
            .actions
            .iter()
            .any(|a| matches!(a, Action::Switch(p, _) if *p == from));
        if tx != want && !pending {
            self.actions.push(Action::Switch(from, want));
        }
    }

    /// Where a payload goes: the sink's answer when the frame is not held, else None (held
    /// frames are copied).
    pub fn place<S: FrameSink>(
        &mut self,
        path: Path,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        len: usize,
        sink: &mut S,
    ) -> Option<Placement> {
        if hdr[0] == CONTROL_KIND || !self.may_place(path, from) {
            return None;
        }
        sink.place(from, hdr, len)
    }

    /// A placed payload was written (it was not held: see [`Hybrid::place`]).
    pub fn placed<S: FrameSink>(
        &mut self,
        path: Path,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        len: usize,
        sink: &mut S,
    ) {
        if self.covers(from) {
            self.count(path, from, len);
        }
        sink.placed(from, hdr, len);
    }

    // --- the channel manager's side (the Transport trait's channel methods) ---------------

    pub fn channel(&self, peer: Gpid) -> ChannelState {
        self.links
            .get(peer.idx())
            .and_then(|l| l.as_ref())
            .map_or(ChannelState::Shared, |l| l.state)
    }

    fn held_slots(&self) -> usize {
        self.links
            .iter()
            .flatten()
            .filter(|l| l.state.holds_slot())
            .count()
    }

    /// Offer `peer` a connection (see [`super::Transport::connect`]).
    pub fn connect(&mut self, peer: Gpid) -> bool {
        if !self.covers(peer)
            || self.channel(peer) != ChannelState::Shared
            || self.rx_on(peer) != Path::Dgram
            || self.held_slots() >= self.slots
        {
            return false;
        }
        self.link(peer).state = ChannelState::Connecting;
        self.actions.push(Action::Send(peer, OFFER));
        true
    }

    /// Take the connection back (see [`super::Transport::quiesce`]).
    pub fn quiesce(&mut self, peer: Gpid) -> bool {
        if !self.covers(peer) || self.channel(peer) != ChannelState::Connected {
            return false;
        }
        self.link(peer).state = ChannelState::Quiesce;
        self.actions.push(Action::Send(peer, TAKEBACK));
        true
    }

    pub fn usage(&self, peer: Gpid) -> Usage {
        let (ff, fb) = self
            .links
            .get(peer.idx())
            .and_then(|l| l.as_ref())
            .map_or((0, 0), |l| (l.fast_frames, l.fast_bytes));
        Usage {
            shared_frames: self.dgram_frames.get(peer.idx()).copied().unwrap_or(0),
            shared_bytes: 0,
            fast_frames: ff,
            fast_bytes: fb,
        }
    }

    #[inline]
    pub fn shared_arrivals(&self) -> u64 {
        self.dgram_total
    }

    /// Connections that came or went (see [`super::Transport::channel_changes`]).
    #[inline]
    pub fn channel_changes(&self) -> u64 {
        self.promotions + self.demotions
    }

    /// Promotions, demotions and traffic by path, as counters of connections.
    pub fn counters(&self) -> ChannelCounters {
        let mut u = Usage {
            shared_frames: self.dgram_total,
            shared_bytes: self.dgram_bytes,
            ..Default::default()
        };
        for l in self.links.iter().flatten() {
            u.fast_frames += l.fast_frames;
            u.fast_bytes += l.fast_bytes;
        }
        ChannelCounters {
            promotions: self.promotions,
            demotions: self.demotions,
            usage: u,
            conn_promotions: self.promotions,
            conn_demotions: self.demotions,
            conn_usage: u,
        }
    }

    /// Frames held now, from every peer (for tests and the finalize check).
    pub fn held(&self) -> usize {
        self.links.iter().flatten().map(|l| l.held.len()).sum()
    }
}

/// A sink that passes a transport's deliveries through the hybrid state: `path` says which
/// transport delivers.
pub struct Through<'a, S: FrameSink> {
    pub hy: &'a mut Hybrid,
    pub path: Path,
    pub sink: &'a mut S,
}

impl<S: FrameSink> FrameSink for Through<'_, S> {
    #[inline]
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
        self.hy.on_frame(self.path, from, hdr, payload, self.sink);
    }
    fn place(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
        self.hy.place(self.path, from, hdr, len, self.sink)
    }
    fn placed(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) {
        self.hy.placed(self.path, from, hdr, len, self.sink);
    }
    fn on_sent(&mut self, token: super::Token) {
        self.sink.on_sent(token);
    }
    fn on_got(&mut self, token: super::Token, result: Result<(), String>) {
        self.sink.on_got(token, result);
    }
    fn on_peer_lost(&mut self, peer: Gpid, why: &str) {
        self.sink.on_peer_lost(peer, why);
    }
    fn on_caps(&mut self, peer: Gpid, caps: super::Caps) {
        self.sink.on_caps(peer, caps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the data frames delivered: (from, number in header bytes 4..12).
    #[derive(Default)]
    struct Got(Vec<(Gpid, u64)>);

    impl FrameSink for Got {
        fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            assert_ne!(hdr[0], CONTROL_KIND, "a control record reached the sink");
            let n = u64::from_le_bytes(hdr[4..12].try_into().unwrap());
            assert_eq!(payload, &n.to_le_bytes()[..]);
            self.0.push((from, n));
        }
        fn place(&mut self, _: Gpid, _: &[u8; HEADER_LEN], _: usize) -> Option<Placement> {
            panic!("placement asked for");
        }
    }

    fn data(n: u64) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = 7;
        h[4..12].copy_from_slice(&n.to_le_bytes());
        h
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Process 0 streams numbered frames to process 1 over two reliable, ordered paths that
    /// race each other (either may deliver next); process 1's manager offers and takes back
    /// the connection at random moments. Every frame arrives once and in order, and nothing
    /// stays held.
    fn race(seed: u64, frames: u64) -> (u64, u64) {
        let mut rng = Rng(seed | 1);
        let mut snd = Hybrid::new(1, vec![false, true]);
        let mut rcv = Hybrid::new(1, vec![true, false]);
        // In flight 0 -> 1 by path (index 0: datagrams, 1: connection), and 1 -> 0 requests.
        let mut wire: [VecDeque<[u8; HEADER_LEN]>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut back: VecDeque<[u8; HEADER_LEN]> = VecDeque::new();
        let mut got = Got::default();
        let mut sent = 0;
        let idx = |p: Path| (p == Path::Conn) as usize;
        let mut quiet = Got::default();
        while got.0.len() < frames as usize || !wire[0].is_empty() || !wire[1].is_empty() {
            match rng.below(10) {
                0..=3 if sent < frames => {
                    let p = snd.tx(Gpid::new(1));
                    wire[idx(p)].push_back(data(sent));
                    sent += 1;
                }
                4 | 5 => {
                    if let Some(h) = wire[0].pop_front() {
                        let n = u64::from_le_bytes(h[4..12].try_into().unwrap());
                        let pl = if h[0] == CONTROL_KIND {
                            vec![]
                        } else {
                            n.to_le_bytes().to_vec()
                        };
                        rcv.on_frame(Path::Dgram, Gpid::new(0), &h, &pl, &mut got);
                    }
                }
                6 | 7 => {
                    if let Some(h) = wire[1].pop_front() {
                        let n = u64::from_le_bytes(h[4..12].try_into().unwrap());
                        let pl = if h[0] == CONTROL_KIND {
                            vec![]
                        } else {
                            n.to_le_bytes().to_vec()
                        };
                        rcv.on_frame(Path::Conn, Gpid::new(0), &h, &pl, &mut got);
                    }
                }
                8 => {
                    // The manager on 1 changes its mind.
                    if !rcv.connect(Gpid::new(0)) {
                        rcv.quiesce(Gpid::new(0));
                    }
                }
                _ => {
                    if let Some(h) = back.pop_front() {
                        snd.on_frame(Path::Dgram, Gpid::new(1), &h, &[], &mut quiet);
                    }
                }
            }
            for a in rcv.take_actions() {
                match a {
                    Action::Send(p, k) if p == Gpid::new(0) => back.push_back(record(k)),
                    a => panic!("unexpected action {a:?}"),
                }
            }
            for a in snd.take_actions() {
                match a {
                    Action::Switch(p, to) if p == Gpid::new(1) => {
                        wire[idx(snd.tx(Gpid::new(1)))].push_back(record(SWITCH));
                        snd.switched(Gpid::new(1), to);
                    }
                    a => panic!("unexpected action {a:?}"),
                }
            }
        }
        let want: Vec<(Gpid, u64)> = (0..frames).map(|n| (Gpid::new(0), n)).collect();
        assert_eq!(got.0, want, "seed {seed}");
        assert_eq!(rcv.held(), 0);
        assert!(quiet.0.is_empty());
        let c = rcv.counters();
        assert_eq!(
            c.usage.shared_frames + c.usage.fast_frames,
            frames + c.promotions + c.demotions,
            "every frame and SWITCH counted once"
        );
        (c.promotions, c.demotions)
    }

    #[test]
    fn frames_stay_in_order_across_switches_whatever_the_race() {
        let mut moves = 0;
        for seed in 1..200 {
            let (p, d) = race(seed * 0x9e37_79b9, 400);
            assert!(p >= d && p <= d + 1);
            moves += p + d;
        }
        assert!(moves > 1000, "the connection hardly moved ({moves})");
    }

    #[test]
    fn states_slots_and_placement() {
        let mut h = Hybrid::new(1, vec![false, true, true, false]);
        assert!(!h.connect(Gpid::new(3)), "a peer not covered gets nothing");
        assert!(h.connect(Gpid::new(1)));
        assert_eq!(h.channel(Gpid::new(1)), ChannelState::Connecting);
        assert!(!h.connect(Gpid::new(2)), "one slot");
        assert!(!h.quiesce(Gpid::new(1)), "not connected yet");
        assert_eq!(h.take_actions(), vec![Action::Send(Gpid::new(1), OFFER)]);
        // A frame by TCP before the SWITCH is held, and not placed.
        assert!(!h.may_place(Path::Conn, Gpid::new(1)) && h.may_place(Path::Dgram, Gpid::new(1)));
        let mut got = Got::default();
        h.on_frame(
            Path::Conn,
            Gpid::new(1),
            &data(1),
            &1u64.to_le_bytes(),
            &mut got,
        );
        h.on_frame(
            Path::Dgram,
            Gpid::new(1),
            &data(0),
            &0u64.to_le_bytes(),
            &mut got,
        );
        assert_eq!(got.0, vec![(Gpid::new(1), 0)]);
        assert_eq!(h.held(), 1);
        h.on_frame(Path::Dgram, Gpid::new(1), &record(SWITCH), &[], &mut got);
        assert_eq!(got.0, vec![(Gpid::new(1), 0), (Gpid::new(1), 1)]);
        assert_eq!(h.channel(Gpid::new(1)), ChannelState::Connected);
        assert!(h.may_place(Path::Conn, Gpid::new(1)) && !h.may_place(Path::Dgram, Gpid::new(1)));
        assert!(h.quiesce(Gpid::new(1)));
        assert_eq!(h.channel(Gpid::new(1)), ChannelState::Quiesce);
        assert_eq!(h.take_actions(), vec![Action::Send(Gpid::new(1), TAKEBACK)]);
        assert!(
            !h.connect(Gpid::new(2)),
            "the slot is still held while draining"
        );
        h.on_frame(Path::Conn, Gpid::new(1), &record(SWITCH), &[], &mut got);
        assert_eq!(h.channel(Gpid::new(1)), ChannelState::Shared);
        assert!(h.connect(Gpid::new(2)));
        let c = h.counters();
        assert_eq!((c.conn_promotions, c.conn_demotions), (1, 1));
        assert_eq!(h.usage(Gpid::new(1)).shared_frames, 2);
        assert_eq!(h.usage(Gpid::new(1)).fast_frames, 2);
        // Frames of peers the scheme does not cover pass straight through.
        h.on_frame(
            Path::Conn,
            Gpid::new(3),
            &data(9),
            &9u64.to_le_bytes(),
            &mut got,
        );
        assert_eq!(got.0.last(), Some(&(Gpid::new(3), 9)));
        // Requests from a peer: switch our frames to it, once.
        h.on_frame(Path::Dgram, Gpid::new(2), &record(OFFER), &[], &mut got);
        h.on_frame(Path::Dgram, Gpid::new(2), &record(OFFER), &[], &mut got);
        let a = h.take_actions();
        assert_eq!(
            a,
            vec![
                Action::Send(Gpid::new(2), OFFER),
                Action::Switch(Gpid::new(2), Path::Conn)
            ]
        );
    }
}
