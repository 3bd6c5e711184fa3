//! Byte movers, and the contract every one of them keeps.
//!
//! A transport moves *frames* between processes: a fixed [`HEADER_LEN`]-byte header and a
//! payload of any length up to [`Caps::max_payload`]. It does not know what a frame means; the
//! protocol layer (`proto`, `mpi::pml`) does. The dispatcher ([`net::Net`]) picks one
//! transport per peer (its [`Route`]) and calls nothing but the [`Transport`] trait, which it
//! implements itself, so the protocol engine sees all the transports of a process as one.
//!
//! # What a transport must provide
//!
//! - **Reach**: [`Transport::reaches`] says which global process ids it can send to; set up
//!   once at start-up from the business cards (see `runtime::bootstrap`).
//! - **Capabilities** ([`Caps`], per peer, stable until the channel to that peer changes):
//!   whether frames are delivered reliably and in order, the largest payload of one frame, how
//!   many lanes it offers to the peer, whether it can read ([`Transport::get`]) or write
//!   ([`Transport::put`]) a peer's memory directly, and whether it queues output without bound
//!   (then [`Transport::queued`] tells how many bytes wait unsent to a peer, and the policy, not
//!   the transport, decides to hold messages back).
//! - **Send**: [`Transport::send`] either takes the frame ([`Sent::Done`]; or [`Sent::Pending`]
//!   when it still references `body` and will report `token` through [`FrameSink::on_sent`]
//!   once it no longer does) or returns [`SendError::NotNow`] having taken nothing.
//!   Backpressure is a value, not an error: the caller keeps the frame and retries from
//!   progress. A peer that cannot be reached any more is [`SendError::Failed`], with a reason a
//!   user can act on. `small` is always copied; `body` may be referenced until the token is
//!   reported, so the caller keeps it alive (an MPI send buffer is, until its request
//!   completes). With [`Token::NONE`] the transport copies whatever it must keep.
//!   [`Transport::try_send`] is the request-free fast path: all of the frame now, without
//!   holding on to `body` and without queueing it behind other output, or nothing.
//! - **Progress**: [`Transport::progress`] hands arrived frames to a [`FrameSink`] (payload
//!   slices are valid only during the call), pushes queued bytes out and advances copies in
//!   flight. It never blocks. [`Transport::has_work`] says whether anything is still to do.
//! - **Order**: frames from one process to another arrive in the order they were sent, for
//!   transports whose caps say `ordered` (all of them today). Frames that take part in MPI
//!   matching also carry a sequence number of the protocol layer, so a peer may move between
//!   channels (or lanes) without reordering matching.
//! - **Control records**: byte 0 of a header is the protocol's frame kind, and kind
//!   [`CONTROL_KIND`] (0) is reserved for a transport's own records (the shared-memory
//!   transport's help requests for a cooperative copy). They never reach a sink.
//!
//! # What a transport may provide
//!
//! - **Direct placement**: a transport that reads a stream may ask the sink where a large
//!   payload goes before it has arrived ([`FrameSink::place`], naming the frame by its
//!   header), read it straight there, and report it with [`FrameSink::placed`]; the sink
//!   answers from the protocol's state, and the transport keeps none.
//! - **Single copy**: [`Transport::expose`] describes a region of our memory (a send buffer)
//!   to a peer as an opaque [`Region`] that travels in a protocol frame; the peer's transport
//!   reads it with [`Transport::get`] (or writes with [`Transport::put`]), now or later
//!   (completion reported through [`FrameSink::on_got`]), and the owner calls
//!   [`Transport::retract`] once the peer is done with it, before the buffer is given back.
//! - **Batching**: between [`Transport::hold`] and [`Transport::release`] sends may be queued
//!   and written together.
//! - **Windows** (one-sided communication, `mpi::rma`): [`Transport::expose_any`] describes a
//!   region of our memory (a window made from user memory, or memory attached to a dynamic
//!   window) to *every* peer the transport reaches, for as long as it stays exposed: peers
//!   read and write it with [`Transport::get`] and [`Transport::put`] at any time, without
//!   this process taking part (passive-target progress within a host), and no help with the
//!   copy is offered. It is retracted like any region. A transport that cannot offer it
//!   returns None, and the protocol layer moves the data by frames that the target handles
//!   (active messages). Memory that the processes of one host share outright (windows
//!   allocated by MPI, and every window's control block: its locks) is a [`HostMem`]
//!   segment: one process creates it, the others map it from its description, the creator
//!   unlinks its name once all have (the shared-memory module implements it; it does not
//!   need the shared-memory transport to be the route to those processes).
//! - **Dedicated channels, changed at run time**: besides a default path every peer shares
//!   (the shared-memory receive queue; datagrams), a transport may offer a few dedicated
//!   channels, each carrying one peer's frames *to us* (a ring in our segment that only that
//!   peer writes; a connection). [`Transport::channel_slots`] says how many it offers at most
//!   (`max_fast`; 0: none). Which peers hold them is decided above the transport (the channel
//!   manager in `proto::channels`), which calls [`Transport::connect`] to offer a free
//!   channel to a peer and [`Transport::quiesce`] to take one back, and reads
//!   [`Transport::channel`] (the state of the channel from a peer: DISCONNECTED
//!   ([`ChannelState::Shared`]), [`ChannelState::Connecting`], CONNECTED, QUIESCE) and
//!   [`Transport::usage`] (frames and bytes that arrived from a peer by each path;
//!   [`Transport::shared_arrivals`] and [`Transport::channel_changes`] are the cheap totals
//!   that tell the manager when to look).
//!   Both changes complete later, as the peer's progress answers: a peer switches to a
//!   channel once it is offered, and a channel taken back is QUIESCEd (the peer sends no new
//!   frames into it; the frames in it are delivered before any the peer sends afterwards by
//!   the shared path), then DISCONNECTED, and its memory serves the next peer. **Frames from
//!   one peer stay in order across every change, whatever their kind**: the protocol layer's
//!   sequence numbers are not needed for that (they still protect matching across lanes).
//!   The sending side's [`Caps`] may change with a channel (a ring carries larger frames than
//!   a queue cell): a transport reports new caps through [`FrameSink::on_caps`] during
//!   `progress`, and until the protocol layer has been told, it accepts every frame that fits
//!   the caps it last reported (so a change that shrinks the largest frame is reported before
//!   it takes effect, one that grows it after).
//!
//! # What a transport may assume
//!
//! - It is driven by one thread at a time (the engine's rule, `runtime::global`).
//! - A `body` lent with a token stays valid until the token is reported; a region exposed
//!   stays valid until it is retracted; a placement pointer stays valid until `placed`.
//! - Headers it is given are [`HEADER_LEN`] bytes whose byte 0 is not [`CONTROL_KIND`].
//!
//! # Unreliable carriers
//!
//! A transport over a carrier that loses, duplicates or reorders (UDP: [`udp::Udp`]) still
//! offers reliable, ordered frames; the machine that makes it so is protocol logic and lives in
//! the protocol layer (`proto::reliable`), which the transport reaches through a trait it
//! defines itself ([`udp::rel::Reliability`]), since nothing here imports the layers above.
//! The engine names the machine when it opens the transports (`net::Net::open::<R>`).
//!
//! The self transport ([`selfloop::SelfLoop`], messages to the own process) is the stub every
//! build has; a new transport copies its shape.

pub mod hybrid;
pub mod net;
pub mod outq;
pub mod selfloop;
pub mod shm;
pub mod tcp;
pub mod udp;

pub use crate::mem::Span;
pub use shm::hostmem::HostMem;
pub use shm::noderegion::{Flag as RegionFlag, NodeRegion};

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 32;

/// Frame kind (header byte 0) reserved for a transport's own control records.
pub const CONTROL_KIND: u8 = 0;

pub use crate::ids::Gpid;

/// Identifies a pending send to its owner (a request id), or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token(pub u32);

impl Token {
    pub const NONE: Token = Token(u32::MAX);
}

/// A transport took the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Fully handed over; `body` is no longer referenced.
    Done,
    /// Accepted, but `body` is still referenced until the token is reported.
    Pending,
}

/// Why a transport did not take a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Backpressure: nothing was taken; retry later.
    NotNow,
    /// The peer cannot be reached (any more).
    Failed(String),
}

/// Which transport reaches a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    SelfLoop,
    Shm,
    Tcp,
    Udp,
    /// No transport reaches this process.
    Unreachable,
}

impl Route {
    pub fn name(self) -> &'static str {
        match self {
            Route::SelfLoop => "self",
            Route::Shm => "shm",
            Route::Tcp => "tcp",
            Route::Udp => "udp",
            Route::Unreachable => "none",
        }
    }
}

/// What a transport can do for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Frames are never lost or duplicated.
    pub reliable: bool,
    /// Frames arrive in the order they were sent.
    pub ordered: bool,
    /// Largest payload of one frame.
    pub max_payload: usize,
    /// Connections (lanes) the transport stripes bulk data to the peer over now
    /// ([`Transport::send_any`]); 1 for a single channel. It may change as the transport
    /// measures the link.
    pub lanes: u8,
    /// Can read a region the peer exposed ([`Transport::get`]).
    pub get: bool,
    /// Can write a region the peer exposed ([`Transport::put`]).
    pub put: bool,
    /// Output to the peer queues without bound ([`Transport::queued`] is meaningful).
    pub queues: bool,
}

impl Caps {
    /// A peer the transport does not reach.
    pub const NONE: Caps = Caps {
        reliable: false,
        ordered: false,
        max_payload: 0,
        lanes: 0,
        get: false,
        put: false,
        queues: false,
    };
}

/// Where the frames a peer sends us travel, on a transport with dedicated channels (see the
/// module doc). The paper's connection states are DISCONNECTED (here `Shared`: the peer uses
/// the shared path), CONNECTED and QUIESCE; `Connecting` is the hand-over to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChannelState {
    /// No channel of ours is the peer's: its frames come by the shared path.
    #[default]
    Shared,
    /// A channel is offered to the peer, which has not switched to it yet.
    Connecting,
    /// The peer's frames come through its dedicated channel.
    Connected,
    /// Taken back: the peer sends nothing new through it, and what is in it is delivered
    /// before anything the peer sends afterwards; then `Shared`, and the channel is free.
    Quiesce,
}

impl ChannelState {
    /// The channel occupies one of the transport's slots (memory, polling).
    pub fn holds_slot(self) -> bool {
        self != ChannelState::Shared
    }
}

/// Frames and bytes that arrived from a peer (or from every peer), by path. Control records
/// of the transport count as frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub shared_frames: u64,
    pub shared_bytes: u64,
    pub fast_frames: u64,
    pub fast_bytes: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.shared_frames += o.shared_frames;
        self.shared_bytes += o.shared_bytes;
        self.fast_frames += o.fast_frames;
        self.fast_bytes += o.fast_bytes;
    }
}

/// Channel changes a transport completed, and what arrived by each path (MPI_T variables).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelCounters {
    /// Peers that switched to a channel we offered (CONNECTED).
    pub promotions: u64,
    /// Channels given back after their drain (DISCONNECTED).
    pub demotions: u64,
    pub usage: Usage,
    /// The part of the above that hybrid channels did (`transport::hybrid`): promotions to
    /// a TCP connection, demotions back to datagrams, and traffic (shared: datagrams; fast:
    /// the connections).
    pub conn_promotions: u64,
    pub conn_demotions: u64,
    pub conn_usage: Usage,
}

impl ChannelCounters {
    pub fn add(&mut self, o: &ChannelCounters) {
        self.promotions += o.promotions;
        self.demotions += o.demotions;
        self.usage.add(&o.usage);
        self.conn_promotions += o.conn_promotions;
        self.conn_demotions += o.conn_demotions;
        self.conn_usage.add(&o.conn_usage);
    }
}

/// Lanes a transport reports bytes for, at most.
pub const STAT_LANES: usize = 16;

/// What a transport counted, as MPI_T shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections refused: failed or forged handshakes, duplicates, floods.
    pub rejected: u64,
    /// Datagrams dropped because they failed authentication or named no process of the job.
    pub rejected_datagrams: u64,
    /// Connections open to peers beyond the first per peer (striping lanes).
    pub extra_lanes: u64,
    /// Payload bytes of bulk data sent on each lane number.
    pub lane_bytes: [u64; STAT_LANES],
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.rejected += o.rejected;
        self.rejected_datagrams += o.rejected_datagrams;
        self.extra_lanes += o.extra_lanes;
        for (a, b) in self.lane_bytes.iter_mut().zip(o.lane_bytes) {
            *a += b;
        }
    }
}

/// Bytes of a [`Region`] description.
pub const REGION_LEN: usize = 20;

/// A region of one process's memory that a peer may read or write directly, described by the
/// owner's transport for the peer's transport of the same kind. Opaque to the protocol layer,
/// which carries it in a frame. All zeros means "none".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region(pub [u8; REGION_LEN]);

impl Region {
    pub const NONE: Region = Region([0; REGION_LEN]);

    pub fn is_none(&self) -> bool {
        self.0 == [0; REGION_LEN]
    }
}

/// How a direct copy ([`Transport::get`], [`Transport::put`]) went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copied {
    /// Done: every byte was moved.
    Done,
    /// Under way; [`FrameSink::on_got`] reports the token when it ends.
    Pending,
}

/// A direct copy that could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyError {
    /// The transport cannot copy to or from this peer (no such capability, or the kernel
    /// refused: the caller moves the data by frames instead).
    Refused(String),
    /// The region description does not describe memory exposed to us.
    BadRegion,
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyError::Refused(why) => write!(f, "direct copy refused: {why}"),
            CopyError::BadRegion => f.write_str("malformed region description"),
        }
    }
}

/// When a transport reading a directly placed payload should wake for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Await {
    /// Deliver it as it comes (its latency counts: a lone message).
    AsItComes,
    /// Wait for the rest of it in as few reads as possible (part of a stream: throughput
    /// counts).
    Whole,
}

/// Where a payload goes, as the protocol layer answers [`FrameSink::place`].
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Exactly the payload's length, writable until [`FrameSink::placed`].
    pub to: Span,
    pub wait: Await,
}

/// The receiving end of a transport: the protocol layer.
pub trait FrameSink {
    /// A frame arrived from `from`; `payload` is valid during this call only.
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]);

    /// The frame with header `hdr` and a payload of `len` bytes from `from` is next in the
    /// stream, its payload not arrived yet: where to write it, or None to have it delivered
    /// through [`FrameSink::on_frame`]. When Some, the transport writes all `len` bytes there,
    /// then calls [`FrameSink::placed`] with the same header, and delivers nothing else from
    /// `from` in between.
    fn place(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], _len: usize) -> Option<Placement> {
        None
    }

    /// The payload of a frame [`FrameSink::place`] gave a place to was written there.
    fn placed(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], _len: usize) {}

    /// A [`Sent::Pending`] send no longer references its body.
    fn on_sent(&mut self, _token: Token) {}

    /// A [`Copied::Pending`] copy ended: Ok, or why not.
    fn on_got(&mut self, _token: Token, _result: Result<(), String>) {}

    /// The channel to `peer` failed or closed unexpectedly.
    fn on_peer_lost(&mut self, _peer: Gpid, _why: &str) {}

    /// What the transport does for `peer` changed (a dedicated channel to it was gained or
    /// given back): frames sent from now on follow `caps` (see the module doc).
    fn on_caps(&mut self, _peer: Gpid, _caps: Caps) {}
}

/// The contract of a transport (see the module doc). Static dispatch: the dispatcher matches
/// on the route and calls the concrete type, so the message path pays no virtual call.
pub trait Transport {
    fn name(&self) -> &'static str;

    /// Can frames go to `peer` through this transport?
    fn reaches(&self, peer: Gpid) -> bool;

    /// What the transport does for `peer` ([`Caps::NONE`] when it does not reach it).
    fn caps(&self, peer: Gpid) -> Caps;

    /// Bytes accepted for `peer` and not written out yet (0 where nothing queues).
    fn queued(&self, _peer: Gpid) -> usize {
        0
    }

    /// Send one frame (see the module doc).
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError>;

    /// Send a frame that may overtake the others to `peer` (rendezvous data, which its
    /// receiver places by the offset in its header): a transport with several lanes to the
    /// peer ([`Caps::lanes`]) picks one, otherwise it is [`Transport::send`].
    fn send_any(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        self.send(peer, hdr, small, body, token)
    }

    /// Send a frame only if the transport can take all of it now, without holding on to
    /// `body` and without queueing it behind other output. False: nothing was sent.
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        self.send(peer, hdr, &[], body, Token::NONE).is_ok()
    }

    /// Deliver arrived frames to `sink`, push queued output, advance copies. Returns the
    /// number of frames delivered. Never blocks.
    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize;

    /// Output or copies still in flight.
    fn has_work(&self) -> bool {
        false
    }

    /// Queue what is sent from now on, where writing it together gains, until
    /// [`Transport::release`].
    fn hold(&mut self) {}

    /// Write what was held and report the sends it finished.
    fn release<S: FrameSink>(&mut self, _sink: &mut S) {}

    /// Describe `buf` for `peer` to read (or write) directly, or None when this transport
    /// cannot offer that to the peer. The span stays valid until [`Transport::retract`].
    fn expose(&mut self, _peer: Gpid, _buf: Span) -> Option<Region> {
        None
    }

    /// The peer is done with a region we exposed to it: release what it held.
    fn retract(&mut self, _peer: Gpid, _region: &Region) {}

    /// Describe `buf` for every peer this transport reaches to read and write directly at
    /// any time until it is retracted (a one-sided window), or None when this transport
    /// cannot offer that. The span stays valid until [`Transport::retract`].
    fn expose_any(&mut self, _buf: Span) -> Option<Region> {
        None
    }

    /// Copy `dst.len()` bytes at `offset` of `peer`'s exposed `region` into `dst` (valid until
    /// the copy ends).
    fn get(
        &mut self,
        _peer: Gpid,
        _region: &Region,
        _offset: usize,
        _dst: Span,
        _token: Token,
    ) -> Result<Copied, CopyError> {
        Err(CopyError::Refused(format!(
            "the {} transport cannot read a peer's memory",
            self.name()
        )))
    }

    /// Copy `src` into `peer`'s exposed `region` at `offset` (`src` valid until the copy ends).
    fn put(
        &mut self,
        _peer: Gpid,
        _region: &Region,
        _offset: usize,
        _src: Span,
        _token: Token,
    ) -> Result<Copied, CopyError> {
        Err(CopyError::Refused(format!(
            "the {} transport cannot write a peer's memory",
            self.name()
        )))
    }

    /// Dedicated channels this transport offers at most (0: none; see the module doc).
    fn channel_slots(&self) -> usize {
        0
    }

    /// The state of the dedicated channel that carries `peer`'s frames to us.
    fn channel(&self, _peer: Gpid) -> ChannelState {
        ChannelState::Shared
    }

    /// Offer `peer` a free dedicated channel. False: none is free, or the peer has or is
    /// getting one, or is being drained (nothing changed).
    fn connect(&mut self, _peer: Gpid) -> bool {
        false
    }

    /// Take back the channel `peer` holds (CONNECTED -> QUIESCE -> DISCONNECTED, completed
    /// by progress). False: the peer holds none that is connected (nothing changed).
    fn quiesce(&mut self, _peer: Gpid) -> bool {
        false
    }

    /// What arrived from `peer`, by path.
    fn usage(&self, _peer: Gpid) -> Usage {
        Usage::default()
    }

    /// Frames that arrived by the shared path so far, from every peer: one load, for deciding
    /// when to look at [`Transport::usage`].
    fn shared_arrivals(&self) -> u64 {
        0
    }

    /// Channel changes completed so far (promotions and demotions, every peer): one load, for
    /// deciding when to look again after asking for a change. Every change that
    /// [`Transport::connect`] or [`Transport::quiesce`] starts counts here when it ends.
    fn channel_changes(&self) -> u64 {
        0
    }

    /// Channel changes completed and traffic by path, summed over peers.
    fn channel_counters(&self) -> ChannelCounters {
        ChannelCounters::default()
    }

    /// What the transport counted (MPI_T performance variables): zero where it counts nothing.
    fn stats(&self) -> Stats {
        Stats::default()
    }

    /// Close every channel (at finalize, after all traffic is done).
    fn shutdown(&mut self) {}
}
