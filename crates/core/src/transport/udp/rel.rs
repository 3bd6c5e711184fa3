//! What the UDP transport needs from the reliability microprotocol.
//!
//! Datagrams may be lost, duplicated, reordered or delayed; the transport contract promises
//! the protocol layer reliable, ordered frames. The machine that makes datagrams reliable
//! (sequence numbers, acknowledgements, retransmission, flow and congestion control) is
//! protocol logic without I/O and lives in the protocol layer (`proto::reliable`), which sits
//! above the transports; since the transport layer imports nothing above it, this trait is
//! the seam: the transport owns a `Box<dyn Reliability>` that the engine chooses when it opens
//! the transports (`Net::open::<R>`), and calls it for every datagram. One virtual call per
//! event costs nothing beside the system call every datagram needs.
//!
//! The machine sees a datagram as its reliability header ([`Reliability::header_len`] bytes,
//! which it writes and reads) and opaque bytes it keeps for retransmission or reordering. It
//! never reads a clock: every call that depends on time takes `now` ([`Nanos`] on a monotonic
//! clock the transport reads).

use crate::config::Config;
use crate::ids::Gpid;

/// Nanoseconds on a monotonic clock (the transport's, or a simulator's).
pub type Nanos = u64;

/// What to do with the data of a datagram that arrived ([`Reliability::arrived`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The next datagram in order: deliver its data now, then whatever [`Reliability::ready`]
    /// gives.
    Next,
    /// Ahead of a gap: hand its data to [`Reliability::keep`] (or drop it).
    Early(u64),
    /// Seen before (a retransmission whose acknowledgement was lost, a duplicate, a replay):
    /// drop it.
    Duplicate,
    /// Beyond the credit we gave the sender, or more than we may hold now: drop it (the
    /// sender retransmits).
    Beyond,
    /// An acknowledgement alone: nothing to deliver.
    AckOnly,
    /// A header that cannot be right (authenticated, so a peer's bug): drop it.
    Malformed,
}

/// One reliability machine for every peer of a process (see the module doc).
pub trait Reliability {
    /// A machine for a process of a job of `nprocs` processes, with the settings in `cfg`.
    fn new(cfg: &Config, nprocs: usize) -> Self
    where
        Self: Sized;

    /// The transport sends datagrams of at most `bytes` (before any traffic): a machine
    /// counting its windows in datagrams may size them by it.
    fn datagram_size(&mut self, _bytes: usize) {}

    /// Bytes of the reliability header in every datagram.
    fn header_len(&self) -> usize;

    /// May a new data datagram go to `peer` now (its credit and our congestion window allow
    /// it, and nothing waits for retransmission)?
    fn may_send(&self, peer: Gpid) -> bool;

    /// Write the header of a new data datagram to `peer` into `hdr` (its sequence number and
    /// our acknowledgement state for the peer) and return its sequence number; the datagram
    /// is then handed to [`Reliability::sent`].
    fn stamp(&mut self, now: Nanos, peer: Gpid, hdr: &mut [u8]) -> u64;

    /// The datagram stamped `seq` is finished: keep it until the peer acknowledges it.
    /// `taken`: the kernel took it (false: it could not go now; send it again at the next
    /// chance, without counting it as lost).
    fn sent(&mut self, now: Nanos, peer: Gpid, seq: u64, dgram: Vec<u8>, taken: bool);

    /// A datagram to send to `peer` again, exactly as it was (lost, or its timer expired),
    /// when the window allows one now.
    fn retransmit(&mut self, now: Nanos, peer: Gpid) -> Option<&[u8]>;

    /// When an acknowledgement alone is owed to `peer` now: write its header into `hdr` and
    /// return true.
    fn stamp_ack(&mut self, now: Nanos, peer: Gpid, hdr: &mut [u8]) -> bool;

    /// A datagram from `peer` passed authentication; `hdr` is its reliability header. Takes
    /// in the acknowledgements it carries and says what to do with its data.
    fn arrived(&mut self, now: Nanos, peer: Gpid, hdr: &[u8]) -> Arrival;

    /// Keep the data of the [`Arrival::Early`] datagram `seq` until the gap before it fills.
    fn keep(&mut self, peer: Gpid, seq: u64, data: Vec<u8>);

    /// After an [`Arrival::Next`] was delivered: the kept datagrams that are next now, one by
    /// one, in order.
    fn ready(&mut self, peer: Gpid) -> Option<Vec<u8>>;

    /// Run the timers due by `now` (retransmission timeouts, delayed acknowledgements, the
    /// liveness check); push the peers that need a visit (something to send) onto `due`.
    fn tick(&mut self, now: Nanos, due: &mut Vec<Gpid>);

    /// A peer that stopped answering, with a reason naming it; each is reported once and
    /// then forgotten.
    fn failed(&mut self) -> Option<(Gpid, String)>;

    /// Data not acknowledged yet, or acknowledgements owed, to any peer.
    fn busy(&self) -> bool;

    /// Nothing unacknowledged to `peer`, nothing owed to it and nothing kept from it: its
    /// traffic may move to another channel without anything in flight here.
    fn quiet(&self, peer: Gpid) -> bool;

    /// A buffer of a datagram the machine no longer needs (acknowledged), for reuse.
    fn reclaim(&mut self) -> Option<Vec<u8>>;

    /// Bytes of datagrams the machine holds (unacknowledged, or kept early arrivals).
    fn held(&self) -> usize;

    /// Forget `peer` (it failed): drop everything kept for it.
    fn forget(&mut self, peer: Gpid);

    /// Counters of the machine, for diagnostics (`verbose`).
    fn stats(&self) -> String {
        String::new()
    }
}
