//! Reliable, ordered delivery over datagrams that may be lost, duplicated, reordered or
//! delayed: the microprotocol under the UDP transport, as a state machine without I/O.
//!
//! The design follows TCP's with selective acknowledgements (RFC 2018, 6675), its
//! retransmission timer (RFC 6298) and its congestion response (RFC 5681), scaled to one
//! process per endpoint and counted in datagrams; Open MPI's UD work (the fourth seed) names
//! what a connectionless MPI transport needs: reliability, flow control, and a sender that
//! throttles instead of storming a receiver that drops.
//!
//! # The header (every datagram, [`HEADER_LEN`] bytes, little endian)
//!
//! ```text
//!  0  seq    u64  sequence number of this datagram's data, from 1 per ordered pair of
//!                 processes; 0: an acknowledgement alone (never retransmitted)
//!  8  ack    u64  every datagram below this was received (the next one expected)
//! 16  limit  u64  the highest sequence number the receiver accepts now (its credit)
//! 24  delay  u32  microseconds the newest datagram it acknowledges had waited at the
//!                 receiver when this header went out
//! 28  zero   u32
//! 32  sack   4 x (start u32, end u32): datagrams ack + start .. ack + end - 1 were received
//!                 too (start >= 1, end > start); unused blocks are (0, 0) and come last
//! ```
//! The selective acknowledgements are ranges, as TCP's SACK blocks (RFC 2018), not a bitmap:
//! a window holds thousands of 1472-byte datagrams, and 5% random loss leaves dozens of gaps
//! in it. The first block is the run holding the datagram received last, then come the runs
//! that began or grew by a repair since the last acknowledgement (a receiver reads a batch of
//! datagrams before it answers, and a sender that hears only of the highest run would deem
//! the others lost), then the highest run, then the remaining runs in turn, so a sender learns of every
//! run over a few acknowledgements even when some are lost; it keeps what it learnt (a
//! scoreboard of ranges), so nothing has to be repeated.
//! Fields above 2^62 are malformed, so no arithmetic here can overflow. Everything a header
//! says stays true (a receiver never forgets what it acknowledged, and its limit only grows),
//! so an old header, in a retransmission or a replay, tells nothing false: the machine takes
//! the newest information and ignores the rest.
//!
//! # Sender
//!
//! Datagrams get consecutive sequence numbers and are kept until acknowledged, cumulatively
//! or selectively. A datagram is deemed lost when three datagrams sent after it were
//! acknowledged (a retransmission: when one sent after it, later by a quarter of the round
//! trip, was), or when the retransmission timer expires: RTO = SRTT + 4 RTTVAR from round
//! trips measured on datagrams sent once (Karn's rule), at least `rto_min`, doubled at each
//! expiry up to `rto_max`. Before that, a tail-loss probe (RFC 8985): when no acknowledgement
//! comes within twice the smoothed round trip and the peer's acknowledgement delay after the
//! newest datagram sent (or the last acknowledgement that left some in flight), the newest
//! datagram in the network goes again, once per tail, window and timer unchanged; the answer
//! to it (a duplicate is acknowledged at once) repairs a lost tail, or reveals the gaps before
//! it, well before the timer would. A round trip is measured on the newest datagram an acknowledgement
//! covers, less the time that datagram waited at the receiver (`delay`, as QUIC does): the
//! peer's process answers only when it runs its progress engine, and an acknowledgement that
//! rides on a reply carries the peer's think time, which says nothing about the network and
//! would stretch the timeout that repairs a lost lone message by tens of milliseconds.
//!
//! New data goes only while the datagrams in the network are fewer than the congestion
//! window and their sequence numbers within the receiver's limit; lost datagrams go again
//! first. The window starts at `initial_window`, grows by one per acknowledged datagram up to
//! the slow-start threshold and by a 64th of the largest window (at least one datagram) per
//! window after. A loss is answered at most once per window of data, and only when it is
//! congestion:
//! when the round trip shows a queue (the smallest round trip of the current round, about
//! one round trip of samples, exceeds the smallest ever by a quarter of it and 50 us) and the
//! losses are dense (more than a tenth of the last few hundred datagrams), a
//! queue has filled somewhere (a switch, the receiver's socket buffer) and drops most of what
//! reaches it, and the window halves. Otherwise the loss was random (a bad link, the
//! `udp_fault` injector) and the window stays, only leaving slow start. The round trip alone
//! does not tell: on a machine whose CPUs are shared, a receiver that is not scheduled for
//! milliseconds holds a standing queue in its socket buffer that no window reduction short
//! of starving it removes; nor does heavy loss alone (a bad link is not helped by sending
//! less). Halving on every random loss would, at 5% loss, halve a window of 1424 datagrams
//! every round trip and hold it near 30.
//!
//! The first two expiries of the retransmission timer in a row send the oldest datagram in
//! the network again as a probe and keep the window (on a loaded machine a peer that was not
//! scheduled for a few milliseconds expires it as surely as a lost tail); the third deems
//! everything in the network lost and sets the window to one datagram. A sender therefore
//! backs off when the receiver or the network drops from a full queue, rather than repeating
//! a storm, and keeps its pace through random loss; the simulator checks both (5% random
//! loss keeps at least half the loss-free bandwidth, about 0.95x; a bottleneck with a short
//! queue stays 0.96 busy with about 8% dropped, where halving at every loss dropped 2.4%:
//! the price of riding through random loss).
//!
//! Acknowledgement processing costs what it brings, not the window: the scoreboard takes in
//! only ranges it did not have, each first transmission is checked once against the
//! duplicate threshold, and retransmissions wait in the order they went to be overtaken.
//!
//! # Receiver
//!
//! The next datagram in order is delivered at once; one after a gap is kept (at most the
//! credit, `window` datagrams past the last in-order one, which is the limit it advertises)
//! until the gap fills; duplicates are dropped. Acknowledgements ride on every data datagram
//! going back; with none going back, an acknowledgement alone goes after `ack_every` datagrams
//! or `ack_delay`, whichever comes first, and at once after a gap or a duplicate (which tells
//! the sender about a loss, or that our acknowledgement was lost).
//!
//! # Liveness
//!
//! A peer that has acknowledged nothing while we retransmitted to it for `dead_after` (and at
//! least three expiries) is reported failed, naming it; nothing waits for it forever. A peer
//! that merely computes for a while without calling MPI does not acknowledge either, so the
//! bound is generous by default (`udp_peer_timeout`).
//!
//! [`Links`] holds one [`Link`] per peer and is what the UDP transport drives (through
//! `transport::udp::rel::Reliability`); [`sim`] drives many of them over a simulated network.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::Config;
use crate::ids::Gpid;
use crate::transport::udp::rel::{Arrival, Nanos, Reliability};
use lazy::LazyDeque;
use ranges::Ranges;

mod lazy;
#[cfg(test)]
mod over_udp;
mod ranges;
#[cfg(test)]
mod sim;

/// Bytes of the reliability header.
pub const HEADER_LEN: usize = 64;

/// Largest value of a header field.
pub const FIELD_MAX: u64 = 1 << 62;

/// Datagrams acknowledged after one that make it lost.
const DUPTHRESH: u64 = 3;

/// Selective-acknowledgement blocks in a header.
pub const SACK_BLOCKS: usize = 4;

/// Runs with news a receiver remembers to report (see `Link::unreported`).
const UNREPORTED_MAX: usize = 64;

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// The reliability header of a datagram (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub seq: u64,
    pub ack: u64,
    pub limit: u64,
    pub delay_us: u32,
    /// Received ranges `ack + start .. ack + end` as (start, end); (0, 0): unused.
    pub sack: [(u32, u32); SACK_BLOCKS],
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

impl Header {
    /// Write into the first [`HEADER_LEN`] bytes of `b` (which must have them).
    pub fn encode(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.ack.to_le_bytes());
        b[16..24].copy_from_slice(&self.limit.to_le_bytes());
        b[24..28].copy_from_slice(&self.delay_us.to_le_bytes());
        b[28..32].copy_from_slice(&[0; 4]);
        for (i, &(lo, hi)) in self.sack.iter().enumerate() {
            b[32 + 8 * i..36 + 8 * i].copy_from_slice(&lo.to_le_bytes());
            b[36 + 8 * i..40 + 8 * i].copy_from_slice(&hi.to_le_bytes());
        }
    }

    /// Read and check a header; never panics.
    pub fn decode(b: &[u8]) -> Result<Header, Malformed> {
        if b.len() < HEADER_LEN {
            return Err(Malformed("short reliability header"));
        }
        let mut h = Header {
            seq: u64_at(b, 0),
            ack: u64_at(b, 8),
            limit: u64_at(b, 16),
            delay_us: u32_at(b, 24),
            sack: [(0, 0); SACK_BLOCKS],
        };
        if b[28..32] != [0; 4] {
            return Err(Malformed("nonzero reserved bytes"));
        }
        if h.seq > FIELD_MAX || h.ack > FIELD_MAX || h.limit > FIELD_MAX {
            return Err(Malformed("sequence number out of range"));
        }
        if h.ack == 0 {
            return Err(Malformed("acknowledgement 0 (sequence numbers start at 1)"));
        }
        if h.limit + 1 < h.ack {
            return Err(Malformed("credit limit below the acknowledged sequence"));
        }
        let mut unused = false;
        for i in 0..SACK_BLOCKS {
            let blk = (u32_at(b, 32 + 8 * i), u32_at(b, 36 + 8 * i));
            if blk == (0, 0) {
                unused = true;
            } else if unused {
                return Err(Malformed(
                    "a selective acknowledgement after an unused block",
                ));
            } else if blk.0 == 0 || blk.1 <= blk.0 {
                return Err(Malformed("an empty or misplaced selective acknowledgement"));
            }
            h.sack[i] = blk;
        }
        Ok(h)
    }

    /// The received ranges it reports, as sequence numbers `[lo, hi)`.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.sack
            .iter()
            .take_while(|b| b.1 != 0)
            .map(|&(lo, hi)| (self.ack + lo as u64, self.ack + hi as u64))
    }
}

/// In congestion avoidance the window grows by this share of the largest window per round
/// trip (one datagram per round trip at the default 64): a window of thousands of small
/// datagrams recovers from a halving in as many round trips as one of 64 large ones.
const AI_SHARE: u32 = 64;

/// Expiries in a row before everything in flight is deemed lost (see [`Link::expire`]).
const COLLAPSE_AFTER: u32 = 3;

/// A share of datagrams lost above which losses are dense (see [`Link::dense`]), and the
/// number of datagrams the share is averaged over.
const DENSE_LOSS: f64 = 0.1;
const LOSS_SPAN: u32 = 256;

/// A queue shorter than this is no sign of congestion (see [`Link::queueing`]).
const QUEUE_MIN: Nanos = 50 * US;

/// Bytes the automatic window (`udp_window` 0) lets be in flight to one peer: the window is
/// this many bytes of datagrams, at least 64 datagrams.
pub const AUTO_WINDOW_BYTES: usize = 2 << 20;

/// Settings of the machine (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Receiver credit and largest congestion window, in datagrams.
    pub window: u32,
    /// Congestion window at start.
    pub initial_window: u32,
    pub rto_initial: Nanos,
    pub rto_min: Nanos,
    pub rto_max: Nanos,
    /// Longest an acknowledgement waits for a datagram going back to ride on.
    pub ack_delay: Nanos,
    /// An acknowledgement alone goes after this many datagrams at the latest.
    pub ack_every: u32,
    /// A peer silent while we retransmit to it for this long is failed.
    pub dead_after: Nanos,
}

const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;

impl Default for Params {
    fn default() -> Params {
        Params {
            window: 64,
            initial_window: 16,
            rto_initial: 20 * MS,
            rto_min: 2 * MS,
            rto_max: S,
            ack_delay: 500 * US,
            ack_every: 2,
            dead_after: 60 * S,
        }
    }
}

impl Params {
    /// From the tunables `udp_window`, `udp_rto_min`, `udp_ack_delay`, `udp_peer_timeout`.
    pub fn from_config(cfg: &Config) -> Params {
        let d = Params::default();
        let window = match cfg.udp_window {
            0 => d.window,
            w => w.clamp(4, 1 << 16) as u32,
        };
        let rto_min = (cfg.udp_rto_min.max(1) as Nanos) * US;
        Params {
            window,
            initial_window: d.initial_window.min(window),
            rto_initial: d.rto_initial.max(rto_min),
            rto_min,
            rto_max: d.rto_max.max(rto_min),
            ack_delay: cfg.udp_ack_delay.max(0) as Nanos * US,
            ack_every: d.ack_every,
            dead_after: (cfg.udp_peer_timeout.max(1) as Nanos) * S,
        }
    }
}

/// A datagram sent and not acknowledged yet.
struct Slot<B> {
    seq: u64,
    /// None once selectively acknowledged.
    body: Option<B>,
    /// When it last went out.
    sent_at: Nanos,
    /// Times it went again.
    retx: u32,
    /// Deemed lost and waiting in `lost` to go again (not in the network).
    lost: bool,
}

/// What a link counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub sent: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    pub losses: u64,
    pub received: u64,
    pub duplicates: u64,
    pub early: u64,
    pub beyond: u64,
    pub acks_sent: u64,
    /// Loss events answered by shrinking the window (the round trip showed a queue), and
    /// those taken as random loss (no queue: the window stays).
    pub congestion_events: u64,
    pub random_loss_events: u64,
    /// Tail-loss probes sent (the newest datagram again, before the timeout).
    pub tail_probes: u64,
}

/// The reliability state between us and one peer, both directions; `B` is what the caller
/// keeps per datagram (its bytes).
pub struct Link<B> {
    /// Shared by every link of a process (one word here rather than the 56 bytes of a copy).
    p: Arc<Params>,
    // --- sending
    next_seq: u64,
    /// Sent and not acknowledged: consecutive sequence numbers from the front's; the front is
    /// never acknowledged (acknowledged slots at the front are dropped at once).
    inflight: VecDeque<Slot<B>>,
    /// Slots deemed lost, to go again in this order (entries acknowledged meanwhile are
    /// skipped).
    lost: LazyDeque<u64>,
    /// Slots in the network: not acknowledged, not lost.
    pipe: u32,
    /// The highest sequence number the peer accepts.
    peer_limit: u64,
    /// The highest sequence number the peer acknowledged, and when the newest datagram it
    /// acknowledged had gone out.
    highest_acked: u64,
    latest_acked_sent: Nanos,
    cwnd: u32,
    /// Datagrams acknowledged since the window last grew, in congestion avoidance.
    ca_acked: u32,
    ssthresh: u32,
    /// Losses of datagrams up to here belong to the congestion event already answered, or
    /// to the window already counted as one of random loss.
    recover: u64,
    random_seen: u64,
    /// What the peer acknowledged selectively, from `una` on (the scoreboard).
    sacked: Ranges,
    /// The next first transmission to check against the duplicate threshold.
    loss_scan: u64,
    /// Retransmissions in the network, in the order they went, with when.
    retx_q: LazyDeque<(u64, Nanos)>,
    /// The smallest round trip measured (the path without a queue), the smallest in the
    /// round trip now and in the one before; a round ends when `round_end` is acknowledged.
    base_rtt: Nanos,
    round_min: Nanos,
    prev_round_min: Nanos,
    round_end: u64,
    /// The share of datagrams deemed lost, averaged over the last few hundred (an EWMA of
    /// gain 1/[`LOSS_SPAN`], in 1/65536).
    loss_avg: u32,
    srtt: Option<Nanos>,
    rttvar: Nanos,
    /// The timeout now (backed off).
    rto: Nanos,
    rto_at: Option<Nanos>,
    /// The tail-loss probe: when it goes (0: not armed); armed by each new datagram and by
    /// acknowledgements that leave datagrams in flight, one probe per tail.
    probe_at: Nanos,
    /// Since when we have retransmitted without hearing any progress, and how many expiries.
    stalled_since: Option<Nanos>,
    expiries: u32,
    // --- receiving
    /// The next sequence number in order.
    expected: u64,
    /// Datagrams kept ahead of a gap: index i is sequence number `expected + i` (index 0 is
    /// always empty outside [`Link::ready`]).
    early: LazyDeque<Option<B>>,
    /// Runs of datagrams kept in `early`, as sequence numbers (what selective
    /// acknowledgements report), the one received last, and where the rotation of the other
    /// blocks goes on.
    runs: Ranges,
    last_early: u64,
    /// Early datagrams that began or joined a run since the last acknowledgement went out
    /// (oldest first): their runs are reported first.
    unreported: LazyDeque<u64>,
    sack_cursor: u64,
    /// The highest sequence number received, and when.
    newest: u64,
    newest_at: Nanos,
    /// The smallest round trip seen (before taking out the receiver's delay).
    min_rtt: Nanos,
    /// Data datagrams received since our last acknowledgement went out.
    ack_owed: u32,
    /// Acknowledge now (a gap, a duplicate, or enough datagrams).
    ack_now: bool,
    ack_at: Option<Nanos>,
    pub stats: Stats,
}

impl<B> Link<B> {
    pub fn new(p: impl Into<Arc<Params>>) -> Link<B> {
        let p: Arc<Params> = p.into();
        Link {
            next_seq: 1,
            inflight: VecDeque::new(),
            lost: LazyDeque::new(),
            pipe: 0,
            peer_limit: p.window as u64,
            highest_acked: 0,
            latest_acked_sent: 0,
            cwnd: p.initial_window.clamp(1, p.window),
            ca_acked: 0,
            ssthresh: p.window,
            recover: 0,
            random_seen: 0,
            sacked: Ranges::default(),
            loss_scan: 1,
            retx_q: LazyDeque::new(),
            base_rtt: Nanos::MAX,
            round_min: Nanos::MAX,
            prev_round_min: Nanos::MAX,
            round_end: 0,
            loss_avg: 0,
            srtt: None,
            rttvar: 0,
            rto: p.rto_initial,
            rto_at: None,
            probe_at: 0,
            stalled_since: None,
            expiries: 0,
            expected: 1,
            early: LazyDeque::new(),
            runs: Ranges::default(),
            last_early: 0,
            unreported: LazyDeque::new(),
            sack_cursor: 0,
            newest: 0,
            newest_at: 0,
            min_rtt: Nanos::MAX,
            ack_owed: 0,
            ack_now: false,
            ack_at: None,
            stats: Stats::default(),
            p,
        }
    }

    fn una(&self) -> u64 {
        self.inflight.front().map_or(self.next_seq, |s| s.seq)
    }

    /// May a new data datagram go now?
    pub fn may_send(&self) -> bool {
        self.next_seq <= self.peer_limit
            && self.pipe < self.cwnd
            && self.lost.is_empty()
            && self.inflight.len() < 2 * self.p.window as usize
    }

    /// The congestion window (datagrams).
    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The retransmission timeout now.
    pub fn rto(&self) -> Nanos {
        self.rto
    }

    /// Datagrams sent and not acknowledged.
    pub fn unacked(&self) -> usize {
        self.inflight.iter().filter(|s| s.body.is_some()).count()
    }

    /// Our acknowledgement state for the peer, in a header for `seq` (0: none).
    fn header(&mut self, now: Nanos, seq: u64) -> Header {
        let ack = self.expected;
        let mut sack = [(0u32, 0u32); SACK_BLOCKS];
        let mut n = 0;
        let add = |r: (u64, u64), sack: &mut [(u32, u32); SACK_BLOCKS], n: &mut usize| {
            // Runs lie within the window past `ack`, so the offsets fit.
            let b = ((r.0 - ack) as u32, (r.1 - ack) as u32);
            if *n == SACK_BLOCKS || sack[..*n].contains(&b) {
                return false;
            }
            sack[*n] = b;
            *n += 1;
            true
        };
        if self.runs.is_empty() {
            self.unreported.clear();
        } else {
            if let Some(r) = self.runs.containing(self.last_early) {
                add(r, &mut sack, &mut n);
            }
            // Runs with news since the last acknowledgement, newest first: a receiver that
            // reads a batch of datagrams before it answers may have seen several runs begin.
            while n < SACK_BLOCKS {
                let Some(seq) = self.unreported.pop_back() else {
                    break;
                };
                if let Some(r) = self.runs.containing(seq) {
                    add(r, &mut sack, &mut n);
                }
            }
            if let Some(r) = self.runs.last() {
                add(r, &mut sack, &mut n);
            }
            let k = self.runs.len();
            let mut i = self.runs.first_after(self.sack_cursor);
            for _ in 0..k {
                if i >= k {
                    i = 0;
                }
                let r = self.runs.get(i);
                if add(r, &mut sack, &mut n) {
                    self.sack_cursor = r.1;
                }
                if n == SACK_BLOCKS {
                    break;
                }
                i += 1;
            }
        }
        Header {
            seq,
            ack,
            limit: ack - 1 + self.p.window as u64,
            delay_us: (now.saturating_sub(self.newest_at) / US).min(u32::MAX as u64) as u32,
            sack,
        }
    }

    fn acked_now(&mut self) {
        self.ack_owed = 0;
        self.ack_now = false;
        self.ack_at = None;
    }

    /// Header of a new data datagram; its sequence number is taken.
    pub fn stamp(&mut self, now: Nanos) -> Header {
        let h = self.header(now, self.next_seq);
        self.next_seq += 1;
        self.acked_now();
        h
    }

    /// The datagram stamped `seq` is done (see [`Reliability::sent`]).
    pub fn sent(&mut self, now: Nanos, seq: u64, body: B, taken: bool) {
        // In stamping order, one after the last in flight (with nothing in flight, una() is
        // already past `seq`: stamp moved next_seq on).
        debug_assert!(seq < self.next_seq);
        debug_assert!(self.inflight.back().is_none_or(|s| s.seq + 1 == seq));
        self.inflight.push_back(Slot {
            seq,
            body: Some(body),
            sent_at: now,
            retx: 0,
            lost: !taken,
        });
        self.stats.sent += 1;
        if taken {
            self.pipe += 1;
        } else {
            self.lost.push_back(seq);
        }
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
        self.arm_probe(now);
    }

    /// The tail-loss probe's timeout (RFC 8985's PTO, with QUIC's allowance for a delayed
    /// acknowledgement): twice the smoothed round trip and the peer's longest acknowledgement
    /// delay. Armed from the newest datagram sent (the end of a burst), so it only fires when
    /// the burst's acknowledgement does not come; None when it would not come before the
    /// retransmission timer, or before a round trip is measured.
    fn arm_probe(&mut self, now: Nanos) {
        self.probe_at = 0;
        let Some(srtt) = self.srtt else { return };
        let at = now + 2 * srtt + self.p.ack_delay;
        if self.rto_at.is_some_and(|r| at < r) && !self.inflight.is_empty() {
            self.probe_at = at;
        }
    }

    /// A lost datagram to send again now, if the window allows.
    pub fn retransmit(&mut self, now: Nanos) -> Option<&B> {
        // Entries acknowledged since they were deemed lost are dropped first, window or not.
        let una = self.una();
        while let Some(&seq) = self.lost.front() {
            let live = seq >= una
                && self
                    .inflight
                    .get((seq - una) as usize)
                    .is_some_and(|s| s.body.is_some() && s.lost);
            if live {
                break;
            }
            self.lost.pop_front();
        }
        let &seq = self.lost.front()?;
        if self.pipe >= self.cwnd {
            return None;
        }
        self.lost.pop_front();
        let s = &mut self.inflight[(seq - una) as usize];
        s.lost = false;
        s.retx += 1;
        s.sent_at = now;
        self.retx_q.push_back((seq, now));
        self.pipe += 1;
        self.stats.retransmitted += 1;
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
        self.inflight[(seq - una) as usize].body.as_ref()
    }

    /// Header of an acknowledgement alone, when one is owed now.
    pub fn stamp_ack(&mut self, now: Nanos) -> Option<Header> {
        if self.ack_owed == 0 && !self.ack_now {
            return None;
        }
        if !self.ack_now && self.ack_at.is_some_and(|t| now < t) {
            return None;
        }
        let h = self.header(now, 0);
        self.acked_now();
        if !self.unreported.is_empty() {
            // Runs left out of this one: another acknowledgement goes at once.
            self.ack_owed = 1;
            self.ack_now = true;
        }
        self.stats.acks_sent += 1;
        Some(h)
    }

    /// A datagram arrived with header `h`: take in its acknowledgements (acknowledged bodies
    /// go to `freed`) and say what to do with its data.
    pub fn arrived(&mut self, now: Nanos, h: &Header, freed: &mut Vec<B>) -> Arrival {
        self.on_ack(now, h, freed);
        if h.seq == 0 {
            return Arrival::AckOnly;
        }
        self.stats.received += 1;
        if h.seq > self.newest {
            self.newest = h.seq;
            self.newest_at = now;
        }
        if h.seq < self.expected {
            self.stats.duplicates += 1;
            self.ack_now = true;
            self.ack_owed = self.ack_owed.max(1);
            return Arrival::Duplicate;
        }
        if h.seq > self.expected - 1 + self.p.window as u64 {
            self.stats.beyond += 1;
            return Arrival::Beyond;
        }
        if h.seq == self.expected {
            self.expected += 1;
            self.early.pop_front();
            self.runs.remove_below(self.expected);
            self.ack_owed += 1;
            if self.ack_owed >= self.p.ack_every || !self.early.is_empty() {
                self.ack_now = true;
            } else if self.ack_at.is_none() {
                self.ack_at = Some(now + self.p.ack_delay);
            }
            return Arrival::Next;
        }
        let i = (h.seq - self.expected) as usize;
        if self.early.get(i).is_some_and(|e| e.is_some()) {
            self.stats.duplicates += 1;
            self.ack_now = true;
            self.ack_owed = self.ack_owed.max(1);
            return Arrival::Duplicate;
        }
        // A gap: say so at once, so that the sender learns of the loss.
        self.ack_owed += 1;
        self.ack_now = true;
        Arrival::Early(h.seq)
    }

    /// Keep the data of early datagram `seq`; false when it is no longer early (then it is
    /// dropped).
    pub fn keep(&mut self, seq: u64, body: B) -> bool {
        if seq <= self.expected || seq > self.expected - 1 + self.p.window as u64 {
            return false;
        }
        let i = (seq - self.expected) as usize;
        if self.early.len() <= i {
            self.early.resize_with(i + 1, || None);
        }
        if self.early[i].is_some() {
            return false;
        }
        self.early[i] = Some(body);
        self.runs.insert(seq, seq + 1, &mut Vec::new());
        if seq != self.last_early + 1 {
            if self.unreported.len() >= UNREPORTED_MAX {
                self.unreported.pop_front();
            }
            self.unreported.push_back(seq);
        }
        self.last_early = seq;
        self.stats.early += 1;
        true
    }

    /// The next kept datagram in order, if it is there now.
    pub fn ready(&mut self) -> Option<B> {
        match self.early.front_mut() {
            Some(e) if e.is_some() => {
                let b = e.take();
                self.early.pop_front();
                self.expected += 1;
                self.runs.remove_below(self.expected);
                self.ack_owed += 1;
                if self.ack_owed >= self.p.ack_every {
                    self.ack_now = true;
                }
                b
            }
            _ => None,
        }
    }

    /// Datagrams kept ahead of a gap.
    pub fn kept(&self) -> usize {
        self.early.iter().filter(|e| e.is_some()).count()
    }

    fn on_ack(&mut self, now: Nanos, h: &Header, freed: &mut Vec<B>) {
        // An acknowledgement of data never sent cannot be right: take no part of it.
        if h.ack > self.next_seq || h.blocks().any(|(_, hi)| hi > self.next_seq) {
            return;
        }
        // The peer's credit only grows (an old header's is smaller and changes nothing); one
        // that claims more than we could ever have in flight is capped.
        let cap = self.next_seq + 4 * self.p.window as u64;
        self.peer_limit = self.peer_limit.max(h.limit.min(cap));
        if self.inflight.is_empty() {
            return;
        }
        let mut progress = false;
        let mut newest_sent: Option<Nanos> = None;
        // The round trip is measured on the largest sequence number this header
        // acknowledges, if this is the first news of it and it went only once.
        let largest = h.blocks().map(|(_, hi)| hi - 1).fold(h.ack - 1, u64::max);
        let mut sample: Option<Nanos> = None;
        // Cumulative part.
        while self.inflight.front().is_some_and(|s| s.seq < h.ack) {
            let s = self.inflight.pop_front().expect("front");
            if let Some(b) = s.body {
                if s.seq == largest && s.retx == 0 {
                    sample = Some(s.sent_at);
                }
                self.on_acked(s.lost, s.sent_at, &mut newest_sent);
                freed.push(b);
                progress = true;
            }
        }
        // Selective part: only what the scoreboard did not have yet.
        let una2 = self.una();
        self.sacked.remove_below(una2);
        let mut new = Vec::new();
        for (lo, hi) in h.blocks() {
            self.sacked.insert(lo.max(una2), hi, &mut new);
        }
        for (lo, hi) in new {
            for seq in lo..hi {
                let Some(s) = self.inflight.get_mut((seq - una2) as usize) else {
                    break;
                };
                if let Some(b) = s.body.take() {
                    let (lost, retx, sent_at) = (s.lost, s.retx, s.sent_at);
                    if seq == largest && retx == 0 {
                        sample = Some(sent_at);
                    }
                    self.on_acked(lost, sent_at, &mut newest_sent);
                    freed.push(b);
                    progress = true;
                }
            }
        }
        // Slots acknowledged selectively at the front: the receiver never forgets them.
        while self.inflight.front().is_some_and(|s| s.body.is_none()) {
            self.inflight.pop_front();
        }
        if self.inflight.is_empty() {
            // Everything acknowledged: a peer talked to now and then keeps no buffers.
            release(&mut self.inflight);
            self.lost.release();
            self.retx_q.release();
        }
        self.sacked.remove_below(self.una());
        self.highest_acked = self.highest_acked.max(largest);
        if let Some(t) = newest_sent {
            self.latest_acked_sent = self.latest_acked_sent.max(t);
        }
        if self.highest_acked >= self.round_end {
            self.prev_round_min = self.round_min;
            self.round_min = Nanos::MAX;
            self.round_end = self.next_seq;
        }
        if let Some(sent_at) = sample {
            self.take_sample(now, sent_at, h.delay_us as Nanos * US);
        }
        if !progress {
            return;
        }
        self.expiries = 0;
        self.stalled_since = None;
        self.rto = self.rto_from_rtt();
        self.rto_at = if self.inflight.is_empty() {
            None
        } else {
            Some(now + self.rto)
        };
        self.arm_probe(now);
        self.detect_losses();
    }

    /// One datagram acknowledged: the window grows, the round trip is measured.
    fn on_acked(&mut self, lost: bool, sent_at: Nanos, newest: &mut Option<Nanos>) {
        self.loss_avg -= self.loss_avg / LOSS_SPAN;
        if !lost {
            self.pipe -= 1;
        }
        *newest = Some(newest.map_or(sent_at, |n: Nanos| n.max(sent_at)));
        if self.cwnd < self.ssthresh {
            self.cwnd += 1;
        } else {
            self.ca_acked += 1;
            if self.ca_acked >= self.cwnd {
                self.ca_acked = 0;
                self.cwnd += self.p.window.div_ceil(AI_SHARE);
            }
        }
        self.cwnd = self.cwnd.min(self.p.window);
    }

    fn rto_from_rtt(&self) -> Nanos {
        match self.srtt {
            Some(s) => (s + (4 * self.rttvar).max(US)).clamp(self.p.rto_min, self.p.rto_max),
            None => self.p.rto_initial,
        }
    }

    /// Deem lost what was overtaken (see the module doc) and answer a new loss: by halving
    /// the window when the round trip shows a queue and losses are dense (congestion), else
    /// not at all (random loss; see [`Link::queueing`], [`Link::dense`]). Each datagram is looked at once by the duplicate
    /// threshold (`loss_scan`), each retransmission once it is overtaken (`retx_q`), so an
    /// acknowledgement costs what it brings, not the window.
    fn detect_losses(&mut self) {
        let reo = self.srtt.map_or(self.p.rto_min / 4, |s| s / 4);
        let una = self.una();
        let mut newly: Option<u64> = None;
        self.loss_scan = self.loss_scan.max(una);
        while self.loss_scan + DUPTHRESH <= self.highest_acked {
            let seq = self.loss_scan;
            self.loss_scan += 1;
            let Some(s) = self.inflight.get_mut((seq - una) as usize) else {
                break;
            };
            if s.body.is_none() || s.lost || s.retx > 0 {
                continue;
            }
            s.lost = true;
            self.pipe -= 1;
            self.lost.push_back(seq);
            self.stats.losses += 1;
            self.loss_avg += (65536 - self.loss_avg) / LOSS_SPAN;
            newly = Some(seq);
        }
        while let Some(&(seq, at)) = self.retx_q.front() {
            let s = if seq >= una {
                self.inflight.get_mut((seq - una) as usize)
            } else {
                None
            };
            let Some(s) = s.filter(|s| s.body.is_some() && !s.lost && s.sent_at == at) else {
                self.retx_q.pop_front();
                continue;
            };
            if at + reo >= self.latest_acked_sent {
                break;
            }
            s.lost = true;
            self.pipe -= 1;
            self.lost.push_back(seq);
            self.stats.losses += 1;
            self.loss_avg += (65536 - self.loss_avg) / LOSS_SPAN;
            self.retx_q.pop_front();
            newly = Some(newly.map_or(seq, |n| n.max(seq)));
        }
        // Judged at every loss, not only the window's first: the losses of an overflowing
        // queue are found one after another, and only together are they dense.
        if let Some(seq) = newly {
            if seq > self.recover && self.queueing() && self.dense() {
                self.ssthresh = (self.cwnd / 2).max(2);
                self.cwnd = self.ssthresh;
                self.ca_acked = 0;
                self.stats.congestion_events += 1;
                self.recover = self.next_seq - 1;
            } else if seq > self.random_seen {
                // Leave slow start: the window found here is worth keeping.
                self.ssthresh = self.ssthresh.min(self.cwnd.max(2));
                self.stats.random_loss_events += 1;
                self.random_seen = self.next_seq - 1;
            }
        }
    }

    /// Are losses dense: more than [`DENSE_LOSS`] of the last few hundred datagrams lost?
    /// Random loss is sparse (the `udp-lossy` variant drops 5%); a queue that overflows drops
    /// most of what comes while it is full. An average over a fixed number of datagrams, not
    /// over a round trip, so that a small window does not judge from a handful.
    fn dense(&self) -> bool {
        self.loss_avg as f64 > DENSE_LOSS * 65536.0
    }

    /// Does the path hold a queue now: the smallest round trip of this and the last round
    /// exceeds the smallest ever by a quarter of it and [`QUEUE_MIN`]? Random loss comes
    /// without one (the datagram was lost on its own); congestion fills a queue before it
    /// drops (a router's, or the receiver's socket buffer), so a loss with the round trip
    /// stretched is answered as congestion (TCP Veno's reasoning, with the round's minimum
    /// to be robust against delays of the processes themselves). Without a measurement yet,
    /// every loss counts as congestion.
    fn queueing(&self) -> bool {
        if self.base_rtt == Nanos::MAX {
            return true;
        }
        let recent = if self.round_min != Nanos::MAX {
            self.round_min
        } else {
            self.prev_round_min
        };
        recent != Nanos::MAX && recent > self.base_rtt + (self.base_rtt / 4).max(QUEUE_MIN)
    }

    /// Run the timers due by `now`. True: something is to be sent (retransmissions, an
    /// acknowledgement). Err: the peer stopped answering (why).
    pub fn tick(&mut self, now: Nanos) -> Result<bool, String> {
        let mut due = self.ack_owed > 0 && (self.ack_now || self.ack_at.is_some_and(|t| t <= now));
        if self.rto_at.is_some_and(|t| t <= now) {
            if self.inflight.is_empty() {
                self.rto_at = None;
            } else {
                self.expire(now);
                due = true;
                let since = *self.stalled_since.get_or_insert(now);
                if self.expiries >= 3 && now - since >= self.p.dead_after {
                    return Err(format!(
                        "acknowledged nothing for {:.1} s while {} datagrams waited for it ({} retransmissions)",
                        (now - since) as f64 / 1e9,
                        self.unacked(),
                        self.stats.retransmitted
                    ));
                }
            }
        }
        if self.probe_at != 0 && self.probe_at <= now {
            self.probe_at = 0;
            if self.probe_tail() {
                due = true;
            }
        }
        if !self.lost.is_empty() && self.pipe < self.cwnd {
            due = true;
        }
        Ok(due)
    }

    /// The tail-loss probe fired: the newest datagram in the network goes again (RFC 8985),
    /// window and timer unchanged. If the tail was lost the probe repairs it; if only its
    /// acknowledgement was, or the datagrams before it, the duplicate makes the peer answer at
    /// once and its selective acknowledgement deems the gaps lost (the duplicate threshold),
    /// well before the retransmission timer. False: nothing to probe.
    fn probe_tail(&mut self) -> bool {
        let Some(s) = self
            .inflight
            .iter_mut()
            .rev()
            .find(|s| s.body.is_some() && !s.lost)
        else {
            return false;
        };
        s.lost = true;
        self.pipe -= 1;
        self.lost.push_front(s.seq);
        self.stats.tail_probes += 1;
        true
    }

    /// The retransmission timer expired. The first two expiries since the last progress are
    /// probes (as QUIC's probe timeout): the oldest datagram in the network goes again and the
    /// window stays, since a peer process that did not run for a few milliseconds (a loaded
    /// machine) expires the timer as surely as a lost tail does, and the acknowledgement the
    /// probe brings back repairs the rest through the scoreboard. The third in a row
    /// ([`COLLAPSE_AFTER`]) deems everything in the network lost and drops the window to one
    /// datagram. Each doubles the timeout.
    fn expire(&mut self, now: Nanos) {
        self.stats.timeouts += 1;
        self.expiries += 1;
        if self.expiries < COLLAPSE_AFTER {
            if let Some(s) = self
                .inflight
                .iter_mut()
                .find(|s| s.body.is_some() && !s.lost)
            {
                s.lost = true;
                self.pipe -= 1;
                self.lost.push_front(s.seq);
            }
        } else {
            let flight = self.pipe;
            let mut lost: Vec<u64> = Vec::new();
            for s in self.inflight.iter_mut() {
                if s.body.is_some() && !s.lost {
                    s.lost = true;
                    lost.push(s.seq);
                }
            }
            // Datagrams already waiting to go again keep their place ahead of these.
            self.lost.extend(lost);
            self.pipe = 0;
            self.ssthresh = (flight / 2).max(2);
            self.cwnd = 1;
            self.ca_acked = 0;
            self.recover = self.next_seq - 1;
        }
        self.rto = (self.rto * 2).min(self.p.rto_max);
        self.rto_at = Some(now + self.rto);
    }

    /// When this link next needs a visit, if ever.
    pub fn next_timer(&self) -> Option<Nanos> {
        let ack = if self.ack_owed > 0 { self.ack_at } else { None };
        let probe = (self.probe_at != 0).then_some(self.probe_at);
        [ack, self.rto_at, probe].into_iter().flatten().min()
    }

    /// Anything unacknowledged, owed or kept.
    pub fn busy(&self) -> bool {
        !self.inflight.is_empty() || self.ack_owed > 0 || self.ack_now
    }

    /// See [`Reliability::quiet`].
    pub fn quiet(&self) -> bool {
        !self.busy() && self.early.iter().all(|e| e.is_none())
    }

    /// Give up everything kept (the peer failed).
    pub fn clear(&mut self, freed: &mut Vec<B>) {
        for s in self.inflight.drain(..) {
            if let Some(b) = s.body {
                freed.push(b);
            }
        }
        for b in self.early.take_all().flatten() {
            freed.push(b);
        }
        self.lost.clear();
        self.retx_q.clear();
        self.sacked.clear();
        self.runs.clear();
        self.unreported.clear();
        self.pipe = 0;
        self.rto_at = None;
        self.probe_at = 0;
        self.acked_now();
    }
}

impl<B> Link<B> {
    /// A round trip measured: a datagram sent at `sent_at` acknowledged at `now` after it
    /// waited `delay` at the receiver (taken out unless that would go below the smallest
    /// round trip seen, as QUIC does: clocks and delays are coarse).
    fn take_sample(&mut self, now: Nanos, sent_at: Nanos, delay: Nanos) {
        let raw = now.saturating_sub(sent_at);
        self.min_rtt = self.min_rtt.min(raw);
        let r = if raw >= self.min_rtt.saturating_add(delay) {
            raw - delay
        } else {
            raw
        };
        self.base_rtt = self.base_rtt.min(r);
        self.round_min = self.round_min.min(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let d = s.abs_diff(r);
                self.rttvar = (3 * self.rttvar + d) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
    }
}

/// Give an empty queue's buffer back (memory per peer: most peers of a large job are talked
/// to now and then, and a queue that grew once would otherwise keep its buffer for good).
fn release<T>(q: &mut VecDeque<T>) {
    if q.is_empty() && q.capacity() > 0 {
        *q = VecDeque::new();
    }
}

/// The reliability machine's fixed state per peer talked to, in bytes: the link (boxed, made
/// when first used), its slot, and its entries among the active peers. Queue buffers come on
/// top only while datagrams are unacknowledged or early ([`release`]).
pub const LINK_BYTES: usize = std::mem::size_of::<Option<Box<Link<Vec<u8>>>>>()
    + std::mem::size_of::<Link<Vec<u8>>>()
    + std::mem::size_of::<bool>()
    + std::mem::size_of::<Gpid>();

/// The reliability machine of one process: a [`Link`] per peer, made when first used, and
/// the bounds over all of them. This is what the UDP transport drives.
pub struct Links {
    p: Arc<Params>,
    links: Vec<Option<Box<Link<Vec<u8>>>>>,
    /// Peers whose link has timers running or something owed (visited by `tick`).
    active: Vec<Gpid>,
    is_active: Vec<bool>,
    /// The earliest timer of any active link (a lower bound: `tick` does nothing before).
    next_due: Nanos,
    failed: VecDeque<(Gpid, String)>,
    freed: Vec<Vec<u8>>,
    /// Bytes of datagrams kept (unacknowledged, and early arrivals).
    held: usize,
    scratch: Vec<Vec<u8>>,
    /// The window follows the datagram size (`udp_window` 0).
    auto_window: bool,
}

impl Links {
    pub fn with_params(p: Params, nprocs: usize) -> Links {
        let mut links = Vec::new();
        links.resize_with(nprocs, || None);
        Links {
            p: Arc::new(p),
            links,
            active: Vec::new(),
            is_active: vec![false; nprocs],
            next_due: 0,
            failed: VecDeque::new(),
            freed: Vec::new(),
            held: 0,
            scratch: Vec::new(),
            auto_window: false,
        }
    }

    /// The link to `peer` (made on first use); None for a process outside the job.
    pub fn link(&mut self, peer: Gpid) -> Option<&mut Link<Vec<u8>>> {
        let slot = self.links.get_mut(peer.idx())?;
        Some(slot.get_or_insert_with(|| Box::new(Link::new(self.p.clone()))))
    }

    fn get(&self, peer: Gpid) -> Option<&Link<Vec<u8>>> {
        self.links.get(peer.idx())?.as_deref()
    }

    /// When `tick` next has something to do, if ever (a lower bound).
    pub fn next_due(&self) -> Option<Nanos> {
        self.active
            .iter()
            .filter_map(|&p| self.get(p).and_then(|l| l.next_timer()))
            .min()
    }

    /// `peer`'s link has something pending: visit it in `tick`, and from `when` on.
    fn activate(&mut self, peer: Gpid) {
        let i = peer.idx();
        if let Some(l) = self.links.get(i).and_then(|l| l.as_deref()) {
            if let Some(t) = l.next_timer() {
                self.next_due = self.next_due.min(t);
            }
        }
        if !self.is_active[i] {
            self.is_active[i] = true;
            self.active.push(peer);
        }
    }

    /// Move freed bodies out of `scratch` into the pool, accounting for them.
    fn collect(&mut self) {
        for b in self.scratch.drain(..) {
            self.held -= b.len();
            self.freed.push(b);
        }
    }
}

impl Reliability for Links {
    fn new(cfg: &Config, nprocs: usize) -> Links {
        let mut l = Links::with_params(Params::from_config(cfg), nprocs);
        l.auto_window = cfg.udp_window == 0;
        l
    }

    fn datagram_size(&mut self, bytes: usize) {
        if self.auto_window && self.links.iter().all(Option::is_none) {
            let w = (AUTO_WINDOW_BYTES / bytes.max(1)).clamp(64, 1 << 16) as u32;
            Arc::make_mut(&mut self.p).window = w;
        }
    }

    fn header_len(&self) -> usize {
        HEADER_LEN
    }

    fn may_send(&self, peer: Gpid) -> bool {
        self.get(peer).is_none_or(|l| l.may_send())
    }

    fn stamp(&mut self, now: Nanos, peer: Gpid, hdr: &mut [u8]) -> u64 {
        let l = self.link(peer).expect("a peer inside the job");
        let h = l.stamp(now);
        h.encode(hdr);
        h.seq
    }

    fn sent(&mut self, now: Nanos, peer: Gpid, seq: u64, dgram: Vec<u8>, taken: bool) {
        self.held += dgram.len();
        self.link(peer)
            .expect("a peer inside the job")
            .sent(now, seq, dgram, taken);
        self.activate(peer);
    }

    fn retransmit(&mut self, now: Nanos, peer: Gpid) -> Option<&[u8]> {
        let l = self.links.get_mut(peer.idx())?.as_deref_mut()?;
        l.retransmit(now).map(|b| &b[..])
    }

    fn stamp_ack(&mut self, now: Nanos, peer: Gpid, hdr: &mut [u8]) -> bool {
        let Some(l) = self
            .links
            .get_mut(peer.idx())
            .and_then(|l| l.as_deref_mut())
        else {
            return false;
        };
        match l.stamp_ack(now) {
            Some(h) => {
                h.encode(hdr);
                true
            }
            None => false,
        }
    }

    fn arrived(&mut self, now: Nanos, peer: Gpid, hdr: &[u8]) -> Arrival {
        let Ok(h) = Header::decode(hdr) else {
            return Arrival::Malformed;
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let Some(l) = self.link(peer) else {
            return Arrival::Malformed;
        };
        let a = l.arrived(now, &h, &mut scratch);
        self.scratch = scratch;
        self.collect();
        self.activate(peer);
        a
    }

    fn keep(&mut self, peer: Gpid, seq: u64, data: Vec<u8>) {
        let n = data.len();
        if let Some(l) = self.link(peer) {
            if l.keep(seq, data) {
                self.held += n;
            }
        }
    }

    fn ready(&mut self, peer: Gpid) -> Option<Vec<u8>> {
        let b = self.link(peer)?.ready()?;
        self.held -= b.len();
        self.activate(peer);
        Some(b)
    }

    fn tick(&mut self, now: Nanos, due: &mut Vec<Gpid>) {
        if now < self.next_due || self.active.is_empty() {
            return;
        }
        let mut next = Nanos::MAX;
        let mut i = 0;
        while i < self.active.len() {
            let peer = self.active[i];
            let Some(l) = self.links[peer.idx()].as_deref_mut() else {
                i += 1;
                continue;
            };
            match l.tick(now) {
                Ok(true) => due.push(peer),
                Ok(false) => {}
                Err(why) => {
                    self.failed.push_back((peer, why));
                    l.clear(&mut self.scratch);
                }
            }
            if let Some(t) = l.next_timer() {
                next = next.min(t);
            }
            if l.busy() {
                i += 1;
            } else {
                self.is_active[peer.idx()] = false;
                self.active.swap_remove(i);
            }
        }
        self.collect();
        self.next_due = next;
    }

    fn failed(&mut self) -> Option<(Gpid, String)> {
        self.failed.pop_front()
    }

    fn busy(&self) -> bool {
        self.active
            .iter()
            .any(|&p| self.get(p).is_some_and(|l| l.busy()))
    }

    fn quiet(&self, peer: Gpid) -> bool {
        self.get(peer).is_none_or(|l| l.quiet())
    }

    fn reclaim(&mut self) -> Option<Vec<u8>> {
        self.freed.pop()
    }

    fn held(&self) -> usize {
        self.held
    }

    fn forget(&mut self, peer: Gpid) {
        let mut scratch = std::mem::take(&mut self.scratch);
        if let Some(l) = self
            .links
            .get_mut(peer.idx())
            .and_then(|l| l.as_deref_mut())
        {
            l.clear(&mut scratch);
        }
        self.scratch = scratch;
        self.collect();
    }

    fn stats(&self) -> String {
        let mut t = Stats::default();
        for l in self.links.iter().flatten() {
            let s = l.stats;
            t.sent += s.sent;
            t.retransmitted += s.retransmitted;
            t.timeouts += s.timeouts;
            t.losses += s.losses;
            t.received += s.received;
            t.duplicates += s.duplicates;
            t.early += s.early;
            t.beyond += s.beyond;
            t.acks_sent += s.acks_sent;
            t.congestion_events += s.congestion_events;
            t.random_loss_events += s.random_loss_events;
            t.tail_probes += s.tail_probes;
        }
        let timing: Vec<String> = self
            .links
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let l = l.as_deref()?;
                Some(format!(
                    "{i}: srtt {} us rttvar {} us rto {} us cwnd {}",
                    l.srtt.unwrap_or(0) / US,
                    l.rttvar / US,
                    l.rto / US,
                    l.cwnd
                ))
            })
            .collect();
        format!("{t:?} [{}]", timing.join("; "))
    }
}

/// Entry points for the fuzz targets in `fuzz/`.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Bytes as a peer's sequence of events on a link: each record is an operation
    /// byte and a reliability header (decoded first; malformed ones are refused).
    /// Whatever comes, nothing panics, and the link's bounds hold.
    pub fn link(bytes: &[u8]) {
        let p = Params {
            window: 16,
            ..Params::default()
        };
        let mut l: Link<Vec<u8>> = Link::new(p);
        let mut freed = Vec::new();
        let mut now: Nanos = 0;
        for rec in bytes.chunks(1 + HEADER_LEN) {
            let (op, h) = (rec[0], &rec[1..]);
            now += (op as Nanos) * 50 * US;
            match op % 4 {
                0 | 1 => {
                    if let Ok(h) = Header::decode(h) {
                        match l.arrived(now, &h, &mut freed) {
                            Arrival::Next => while l.ready().is_some() {},
                            Arrival::Early(seq) => {
                                l.keep(seq, vec![op]);
                            }
                            _ => {}
                        }
                    }
                }
                2 => {
                    if l.may_send() {
                        let h = l.stamp(now);
                        l.sent(now, h.seq, vec![op], op & 8 == 0);
                    }
                    while l.retransmit(now).is_some() {}
                }
                _ => {
                    let _ = l.tick(now);
                    let _ = l.stamp_ack(now);
                }
            }
            assert!(l.inflight.len() <= 2 * p.window as usize);
            assert!(l.early.len() <= p.window as usize);
            assert!(l.pipe <= l.cwnd.max(l.inflight.len() as u32));
        }
        let _ = Header::decode(bytes);
    }
}
