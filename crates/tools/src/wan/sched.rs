//! The link model of protean-wan, without I/O.
//!
//! Time is passed in explicitly (nanoseconds on any monotonic clock), so the tests below run it
//! on a simulated clock. One [`Link`] models one direction of the WAN link, in the order a packet
//! meets the parts of a real path:
//!
//! 1. random loss ([`Loss`], seeded), per packet on the wire;
//! 2. the bottleneck router: a drop-tail queue ([`DropTail`], in packets and optionally bytes) in
//!    front of a link of a fixed rate ([`TokenBucket`]; with no burst allowance it is exact
//!    serialization: a packet leaves when its last bit has been sent);
//! 3. propagation: the one-way delay plus jitter (uniform in `[-jitter, +jitter]`), where a packet
//!    never overtakes an earlier packet of its own flow unless reordering is allowed
//!    ([`FlowOrder`]);
//! 4. the packet waits in a [`DelayQueue`] (a deadline heap) until its delivery time.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Nanoseconds on a monotonic clock.
pub type Nanos = u64;

pub const NS_PER_SEC: u64 = 1_000_000_000;

/// A token bucket that shapes a FIFO of packets to `rate` bits per second.
///
/// Tokens (bits) accrue at `rate` up to `depth` bits. A packet leaves at the first moment at or
/// after its arrival and after the previous packet's departure at which the bucket holds its
/// size; it then takes that many tokens. With `depth` 0 this is a link of that rate: each packet
/// leaves `size / rate` after the link became free for it. Tokens are counted in bits times 10^9
/// so that one nanosecond adds exactly `rate` units and all arithmetic is exact.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u128,
    depth: u128,
    tokens: u128,
    /// When `tokens` was last brought up to date.
    last: Nanos,
    /// Departure of the previous packet: the next one does not leave before it.
    free: Nanos,
}

impl TokenBucket {
    /// A bucket of `rate` bits per second (more than 0) holding up to `burst_bytes`, full at `now`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Nanos) -> Self {
        assert!(rate_bps > 0, "a token bucket needs a rate");
        let depth = burst_bytes as u128 * 8 * NS_PER_SEC as u128;
        TokenBucket {
            rate: rate_bps as u128,
            depth,
            tokens: depth,
            last: now,
            free: now,
        }
    }

    /// When a packet of `bits` that arrives at `now` leaves the bucket.
    pub fn depart(&mut self, now: Nanos, bits: u64) -> Nanos {
        let t0 = now.max(self.free);
        let refill = self.rate * (t0 - self.last.min(t0)) as u128;
        // Never above the depth, except for the sub-nanosecond remainder of a wait below.
        self.tokens = (self.tokens + refill).min(self.depth.max(self.tokens));
        self.last = t0;
        let need = bits as u128 * NS_PER_SEC as u128;
        let dep = if self.tokens >= need {
            self.tokens -= need;
            t0
        } else {
            // Wait until the bucket holds `need` (not capped by `depth`: a packet larger than the
            // bucket still goes, at the rate), rounded up to a whole nanosecond; the remainder of
            // that last nanosecond stays in the bucket.
            let wait = (need - self.tokens).div_ceil(self.rate);
            self.tokens = self.tokens + wait * self.rate - need;
            let dep = t0 + wait as u64;
            self.last = dep;
            dep
        };
        self.free = dep;
        dep
    }
}

/// The router's queue in front of the bottleneck, drop-tail: a packet that arrives while the
/// packets still waiting (departure after now) hold `limit_pkts` packets or `limit_bytes` bytes
/// is dropped. A packet that arrives at an empty queue is always taken, whatever its size.
#[derive(Debug, Clone)]
pub struct DropTail {
    limit_pkts: u64,
    limit_bytes: u64,
    /// (departure, packets, bytes) of each admitted packet not yet departed, in departure order.
    waiting: VecDeque<(Nanos, u32, u32)>,
    pkts: u64,
    bytes: u64,
}

impl DropTail {
    pub fn new(limit_pkts: u64, limit_bytes: u64) -> Self {
        DropTail {
            limit_pkts,
            limit_bytes,
            waiting: VecDeque::with_capacity(limit_pkts.min(1 << 16) as usize + 1),
            pkts: 0,
            bytes: 0,
        }
    }

    fn expire(&mut self, now: Nanos) {
        while let Some(&(dep, p, b)) = self.waiting.front() {
            if dep > now {
                break;
            }
            self.waiting.pop_front();
            self.pkts -= p as u64;
            self.bytes -= b as u64;
        }
    }

    /// Whether a packet of `pkts` wire packets and `bytes` bytes arriving at `now` fits.
    pub fn admit(&mut self, now: Nanos, pkts: u32, bytes: u32) -> bool {
        self.expire(now);
        self.waiting.is_empty()
            || (self.pkts + pkts as u64 <= self.limit_pkts
                && self.bytes + bytes as u64 <= self.limit_bytes)
    }

    /// Records an admitted packet that leaves the queue at `dep` (not before the previous one).
    pub fn push(&mut self, dep: Nanos, pkts: u32, bytes: u32) {
        self.waiting.push_back((dep, pkts, bytes));
        self.pkts += pkts as u64;
        self.bytes += bytes as u64;
    }

    /// Packets waiting at `now` (as of the last `admit`).
    pub fn len_pkts(&self) -> u64 {
        self.pkts
    }
}

/// Independent random loss with probability `p` per packet on the wire, from a seeded generator
/// (the same seed and the same packets give the same drops).
#[derive(Debug, Clone)]
pub struct Loss {
    /// `p` scaled to 2^64: a packet is lost when a uniform u64 falls below it.
    threshold: u64,
    rng: Xoshiro256PlusPlus,
}

impl Loss {
    /// `p` in `[0, 1)`.
    pub fn new(p: f64, seed: u64) -> Self {
        assert!(
            (0.0..1.0).contains(&p),
            "loss probability {p} out of [0, 1)"
        );
        Loss {
            threshold: (p * 2f64.powi(64)) as u64,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// Whether a packet made of `segs` packets on the wire (a segmentation-offload packet carries
    /// several) is lost: it is when any of them is.
    pub fn lose(&mut self, segs: u32) -> bool {
        if self.threshold == 0 {
            return false;
        }
        let mut lost = false;
        for _ in 0..segs.max(1) {
            lost |= self.rng.next_u64() < self.threshold;
        }
        lost
    }
}

/// Keeps each flow's packets in order under jitter: a packet is not delivered before the last
/// packet of its flow. Flows are hashed into a fixed table; two flows in one slot only keep each
/// other's order as well.
#[derive(Debug, Clone)]
pub struct FlowOrder {
    last: Box<[Nanos]>,
}

impl FlowOrder {
    pub const SLOTS: usize = 4096;

    pub fn new() -> Self {
        FlowOrder {
            last: vec![0; Self::SLOTS].into_boxed_slice(),
        }
    }

    /// The delivery time of a packet of `flow` wanted at `at`: `at`, or later to keep order.
    pub fn clamp(&mut self, flow: u32, at: Nanos) -> Nanos {
        let slot = &mut self.last[flow as usize % Self::SLOTS];
        let at = at.max(*slot);
        *slot = at;
        at
    }
}

impl Default for FlowOrder {
    fn default() -> Self {
        Self::new()
    }
}

struct Entry<T> {
    at: Nanos,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Items waiting for their deadlines; items due at the same time leave in the order they came.
pub struct DelayQueue<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
}

impl<T> DelayQueue<T> {
    pub fn with_capacity(n: usize) -> Self {
        DelayQueue {
            heap: BinaryHeap::with_capacity(n),
            seq: 0,
        }
    }

    pub fn push(&mut self, at: Nanos, item: T) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            item,
        }));
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.0.at)
    }

    /// The earliest item if it is due at `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<T> {
        if self.next_deadline()? > now {
            return None;
        }
        self.heap.pop().map(|e| e.0.item)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Removes every item, in no particular order.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.heap.drain().map(|e| e.0.item)
    }
}

/// One direction's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Nanos,
    /// Jitter: each packet's delay is moved by a uniform amount in `[-jitter, +jitter]` (never
    /// below zero).
    pub jitter: Nanos,
    /// Whether jitter may deliver a flow's packets out of order.
    pub reorder: bool,
    /// Bottleneck rate in bits per second; `None`: no bottleneck (and no queue).
    pub rate_bps: Option<u64>,
    /// Token bucket depth in bytes (0: exact serialization at the rate).
    pub burst_bytes: u64,
    /// Loss probability per packet on the wire, in `[0, 1)`.
    pub loss: f64,
    /// Queue limit of the bottleneck, in packets on the wire.
    pub limit_pkts: u64,
    /// Queue limit of the bottleneck, in bytes.
    pub limit_bytes: u64,
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: 0,
            jitter: 0,
            reorder: false,
            rate_bps: None,
            burst_bytes: 0,
            loss: 0.0,
            limit_pkts: 1000,
            limit_bytes: u64::MAX,
            seed: 1,
        }
    }
}

/// What the link does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped by random loss.
    Lost,
    /// Dropped by the full queue of the bottleneck.
    Overflow,
    /// To be delivered at this time.
    At(Nanos),
}

/// A packet as the link sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Bytes on the wire (IP packets, headers included; a segmentation-offload packet counts
    /// the headers of each segment).
    pub bytes: u32,
    /// Packets on the wire (more than one for a segmentation-offload packet).
    pub segs: u32,
    /// Flow hash (addresses, protocol, ports).
    pub flow: u32,
}

/// One direction of the emulated WAN link.
pub struct Link {
    cfg: LinkConfig,
    bucket: Option<TokenBucket>,
    queue: DropTail,
    loss: Loss,
    jitter_rng: Xoshiro256PlusPlus,
    order: FlowOrder,
}

impl Link {
    pub fn new(cfg: LinkConfig, now: Nanos) -> Self {
        let bucket = cfg
            .rate_bps
            .map(|r| TokenBucket::new(r, cfg.burst_bytes, now));
        // Two streams from one seed, so that jitter settings do not change which packets are lost.
        let mut seeds = rand_xoshiro::SplitMix64::seed_from_u64(cfg.seed);
        let loss = Loss::new(cfg.loss, seeds.next_u64());
        let jitter_rng = Xoshiro256PlusPlus::seed_from_u64(seeds.next_u64());
        Link {
            queue: DropTail::new(cfg.limit_pkts, cfg.limit_bytes),
            bucket,
            loss,
            jitter_rng,
            order: FlowOrder::new(),
            cfg,
        }
    }

    /// Packets waiting in the bottleneck's queue (as of the last arrival).
    pub fn queued(&self) -> u64 {
        self.queue.len_pkts()
    }

    /// A packet arrives at `now`.
    pub fn arrive(&mut self, now: Nanos, p: &Packet) -> Verdict {
        if self.loss.lose(p.segs) {
            return Verdict::Lost;
        }
        let dep = match &mut self.bucket {
            None => now,
            Some(b) => {
                if !self.queue.admit(now, p.segs, p.bytes) {
                    return Verdict::Overflow;
                }
                let dep = b.depart(now, p.bytes as u64 * 8);
                self.queue.push(dep, p.segs, p.bytes);
                dep
            }
        };
        let mut at = dep + self.cfg.delay;
        if self.cfg.jitter > 0 {
            let j = self.cfg.jitter;
            let offset = self.jitter_rng.next_u64() % (2 * j + 1);
            // at + offset - j, never before the departure.
            at = (at + offset).saturating_sub(j).max(dep);
            if !self.cfg.reorder {
                at = self.order.clamp(p.flow, at);
            }
        }
        Verdict::At(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    const US: Nanos = 1_000;

    fn pkt(bytes: u32) -> Packet {
        Packet {
            bytes,
            segs: 1,
            flow: 7,
        }
    }

    #[test]
    fn bucket_without_burst_serializes_at_the_rate() {
        // 1 Gbit/s: 1500 bytes take 12 us.
        let mut b = TokenBucket::new(1_000_000_000, 0, 0);
        assert_eq!(b.depart(0, 1500 * 8), 12 * US);
        // Arriving while the link is busy: leaves one serialization time after the previous.
        assert_eq!(b.depart(US, 1500 * 8), 24 * US);
        // Arriving after the link went idle: starts at arrival, no credit for the idle time.
        assert_eq!(b.depart(100 * US, 1500 * 8), 112 * US);
    }

    #[test]
    fn bucket_rounds_up_and_keeps_the_remainder() {
        // 3 bits/s, 1 bit: 1/3 s each, rounded up; three of them take exactly one second.
        let mut b = TokenBucket::new(3, 0, 0);
        let d1 = b.depart(0, 1);
        assert_eq!(d1, NS_PER_SEC.div_ceil(3));
        let d2 = b.depart(0, 1);
        let d3 = b.depart(0, 1);
        assert!(d1 < d2 && d2 < d3);
        assert!(
            d3 - NS_PER_SEC <= 1,
            "three bits at 3 bit/s end at 1 s, got {d3}"
        );
    }

    #[test]
    fn bucket_burst_lets_a_burst_through_then_the_rate() {
        // 8 Mbit/s = 1 byte/us, 10_000 bytes of burst.
        let mut b = TokenBucket::new(8_000_000, 10_000, 0);
        for _ in 0..10 {
            assert_eq!(b.depart(0, 1000 * 8), 0);
        }
        // Bucket empty: the next 1000 bytes need 1000 us.
        assert_eq!(b.depart(0, 1000 * 8), 1000 * US);
        // Long idle refills only up to the depth.
        let t = 1_000 * MS;
        for _ in 0..10 {
            assert_eq!(b.depart(t, 1000 * 8), t);
        }
        assert_eq!(b.depart(t, 1000 * 8), t + 1000 * US);
    }

    #[test]
    fn bucket_long_run_rate_is_exact() {
        // Random sizes at 100 Mbit/s, offered faster than the rate: the last departure is the
        // total size over the rate (within a nanosecond per packet of rounding).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut b = TokenBucket::new(100_000_000, 0, 0);
        let mut bits = 0u64;
        let mut last = 0;
        for i in 0..10_000u64 {
            let size = 64 + rng.next_u64() % 65_000;
            bits += size * 8;
            last = b.depart(i * US, size * 8);
        }
        let ideal = bits * NS_PER_SEC / 100_000_000;
        assert!(last >= ideal && last - ideal <= 10_000, "{last} vs {ideal}");
    }

    #[test]
    fn bucket_packet_larger_than_the_burst_still_goes() {
        let mut b = TokenBucket::new(8_000_000, 100, 0);
        // 1000 bytes at 1 byte/us with 100 bytes of tokens: 900 us.
        assert_eq!(b.depart(0, 1000 * 8), 900 * US);
    }

    #[test]
    fn droptail_limits_packets_and_bytes() {
        let mut q = DropTail::new(3, u64::MAX);
        for i in 0..3 {
            assert!(q.admit(0, 1, 100));
            q.push(10 + i, 1, 100);
        }
        assert!(!q.admit(0, 1, 100), "fourth packet while three wait");
        assert!(q.admit(10, 1, 100), "one left at 10");
        q.push(20, 1, 100);
        assert_eq!(q.len_pkts(), 3);
        assert!(q.admit(100, 1, 100));
        assert_eq!(q.len_pkts(), 0);

        let mut q = DropTail::new(1000, 3000);
        assert!(q.admit(0, 1, 2000));
        q.push(5, 1, 2000);
        assert!(!q.admit(0, 1, 1001));
        assert!(q.admit(0, 1, 1000));
        // An empty queue takes any packet.
        let mut q = DropTail::new(1, 10);
        assert!(q.admit(0, 40, 65_000));
    }

    #[test]
    fn loss_rate_within_bounds_and_seeded() {
        let n = 100_000;
        let p = 0.1;
        let mut l = Loss::new(p, 42);
        let lost = (0..n).filter(|_| l.lose(1)).count() as f64;
        // 5 standard deviations of a binomial(n, p).
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!((lost - n as f64 * p).abs() < 5.0 * sd, "lost {lost} of {n}");
        // Same seed, same drops; another seed, other drops.
        let a: Vec<bool> = {
            let mut l = Loss::new(p, 42);
            (0..1000).map(|_| l.lose(1)).collect()
        };
        let b: Vec<bool> = {
            let mut l = Loss::new(p, 42);
            (0..1000).map(|_| l.lose(1)).collect()
        };
        let c: Vec<bool> = {
            let mut l = Loss::new(p, 43);
            (0..1000).map(|_| l.lose(1)).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        // No loss never draws and never loses.
        let mut l = Loss::new(0.0, 1);
        assert!((0..1000).all(|_| !l.lose(40)));
    }

    #[test]
    fn loss_of_an_offload_packet_is_any_segment_lost() {
        // p = 1% per segment, 40 segments: 1 - 0.99^40 = 33%.
        let mut l = Loss::new(0.01, 5);
        let n = 20_000;
        let lost = (0..n).filter(|_| l.lose(40)).count() as f64 / n as f64;
        let want = 1.0 - 0.99f64.powi(40);
        assert!((lost - want).abs() < 0.02, "{lost} vs {want}");
    }

    #[test]
    fn delay_queue_orders_by_deadline_then_arrival() {
        let mut q = DelayQueue::with_capacity(4);
        q.push(30, "c");
        q.push(10, "a");
        q.push(20, "b1");
        q.push(20, "b2");
        assert_eq!(q.next_deadline(), Some(10));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(10), Some("a"));
        assert_eq!(q.pop_due(25), Some("b1"));
        assert_eq!(q.pop_due(25), Some("b2"));
        assert_eq!(q.pop_due(25), None);
        assert_eq!(q.len(), 1);
        assert_eq!(q.drain().collect::<Vec<_>>(), vec!["c"]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_deadline(), None);
    }

    /// Runs packets arriving every `gap` ns through a link, returns the verdicts.
    fn run(cfg: LinkConfig, n: u64, gap: Nanos, p: Packet) -> Vec<Verdict> {
        let mut l = Link::new(cfg, 0);
        (0..n).map(|i| l.arrive(i * gap, &p)).collect()
    }

    #[test]
    fn link_adds_the_delay() {
        let cfg = LinkConfig {
            delay: 10 * MS,
            ..Default::default()
        };
        let v = run(cfg, 5, US, pkt(1500));
        for (i, v) in v.iter().enumerate() {
            assert_eq!(*v, Verdict::At(i as u64 * US + 10 * MS));
        }
    }

    #[test]
    fn link_rate_then_delay_and_queue_overflow() {
        // 12 Mbit/s: 1500 bytes in 1 ms. Ten packets at once, queue of 4 packets.
        let cfg = LinkConfig {
            delay: 5 * MS,
            rate_bps: Some(12_000_000),
            limit_pkts: 4,
            ..Default::default()
        };
        let v = run(cfg, 10, 0, pkt(1500));
        let want: Vec<Verdict> = (0..10)
            .map(|i| {
                if i < 4 {
                    Verdict::At((i + 1) * MS + 5 * MS)
                } else {
                    Verdict::Overflow
                }
            })
            .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn link_throughput_is_the_rate_under_overload() {
        // 100 Mbit/s offered 200 Mbit/s of 1500-byte packets for one simulated second: half is
        // delivered (minus what the queue held at the end), the rest overflows.
        let cfg = LinkConfig {
            rate_bps: Some(100_000_000),
            limit_pkts: 100,
            ..Default::default()
        };
        let gap = 60 * US; // 1500 B / 60 us = 200 Mbit/s
        let n = NS_PER_SEC / gap;
        let v = run(cfg, n, gap, pkt(1500));
        let sent = v
            .iter()
            .filter(|v| matches!(v, Verdict::At(t) if *t <= NS_PER_SEC))
            .count() as u64;
        let bits = sent * 1500 * 8;
        assert!(
            (99_000_000..=100_000_000).contains(&bits),
            "{bits} bits in one second"
        );
        assert!(v.contains(&Verdict::Overflow));
    }

    #[test]
    fn link_counts_offload_packets_by_their_segments() {
        // A 40-segment packet against a queue of 30 packets: taken when the queue is empty, then
        // a second one does not fit.
        let cfg = LinkConfig {
            rate_bps: Some(1_000_000_000),
            limit_pkts: 30,
            ..Default::default()
        };
        let p = Packet {
            bytes: 60_000,
            segs: 40,
            flow: 1,
        };
        let mut l = Link::new(cfg, 0);
        assert_eq!(l.arrive(0, &p), Verdict::At(480 * US));
        assert_eq!(l.queued(), 40);
        assert_eq!(l.arrive(0, &p), Verdict::Overflow);
        assert!(matches!(l.arrive(480 * US, &p), Verdict::At(_)));
    }

    #[test]
    fn jitter_stays_in_range_and_keeps_flow_order() {
        let cfg = LinkConfig {
            delay: 10 * MS,
            jitter: 2 * MS,
            ..Default::default()
        };
        let mut l = Link::new(cfg.clone(), 0);
        // Three flows, 30 us between packets of a flow: jitter would reorder them.
        let mut last = [0; 3];
        for i in 0..3000u64 {
            let now = i * 10 * US;
            let flow = (i % 3) as u32;
            let Verdict::At(at) = l.arrive(
                now,
                &Packet {
                    bytes: 100,
                    segs: 1,
                    flow,
                },
            ) else {
                panic!("no loss configured");
            };
            assert!(at >= now + 8 * MS, "too early: {} at {at}", now);
            assert!(at >= last[flow as usize], "flow {flow} reordered");
            last[flow as usize] = at;
        }
        // Packets 6 ms apart are not held back by their predecessor: the delays spread.
        let mut l = Link::new(cfg.clone(), 0);
        let ds: Vec<Nanos> = (0..200u64)
            .map(|i| match l.arrive(i * 6 * MS, &pkt(100)) {
                Verdict::At(t) => t - i * 6 * MS,
                v => panic!("{v:?}"),
            })
            .collect();
        let (lo, hi) = (*ds.iter().min().unwrap(), *ds.iter().max().unwrap());
        assert!(
            (8 * MS..9 * MS).contains(&lo) && hi > 11 * MS && hi <= 12 * MS,
            "{lo} {hi}"
        );

        // With reordering allowed, packets sent 10 us apart do overtake each other.
        let mut l = Link::new(
            LinkConfig {
                reorder: true,
                ..cfg
            },
            0,
        );
        let ats: Vec<Nanos> = (0..1000u64)
            .map(|i| match l.arrive(i * 10 * US, &pkt(100)) {
                Verdict::At(t) => t,
                v => panic!("{v:?}"),
            })
            .collect();
        assert!(ats.windows(2).any(|w| w[1] < w[0]));
        assert!(ats
            .iter()
            .enumerate()
            .all(|(i, &t)| t >= i as u64 * 10 * US + 8 * MS && t <= i as u64 * 10 * US + 12 * MS));
    }

    #[test]
    fn jitter_larger_than_delay_never_delivers_before_departure() {
        let cfg = LinkConfig {
            delay: MS,
            jitter: 5 * MS,
            reorder: true,
            ..Default::default()
        };
        let v = run(cfg, 1000, US, pkt(100));
        for (i, v) in v.iter().enumerate() {
            let Verdict::At(t) = v else { panic!() };
            assert!(*t >= i as u64 * US);
        }
    }

    #[test]
    fn link_loss_is_seeded_and_independent_of_jitter() {
        let base = LinkConfig {
            loss: 0.2,
            seed: 9,
            ..Default::default()
        };
        let lost = |cfg: LinkConfig| -> Vec<bool> {
            run(cfg, 2000, US, pkt(100))
                .iter()
                .map(|v| *v == Verdict::Lost)
                .collect()
        };
        let a = lost(base.clone());
        let b = lost(LinkConfig {
            jitter: MS,
            delay: 3 * MS,
            ..base.clone()
        });
        assert_eq!(a, b);
        let frac = a.iter().filter(|x| **x).count() as f64 / a.len() as f64;
        assert!((frac - 0.2).abs() < 0.05, "{frac}");
    }
}
