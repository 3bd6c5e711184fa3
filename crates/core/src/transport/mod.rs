//! Byte movers.
//!
//! # What a transport provides
//! Every transport (shared memory, TCP, later UDP) offers the same small contract; the engine
//! calls the concrete types directly (no dynamic dispatch on the message path), and
//! [`Transport`] states the contract so a new one knows what to implement:
//!
//! - **peers**: it is told at setup which global process ids it reaches;
//! - **capabilities** ([`Caps`]): reliable, ordered per peer, the largest frame payload it
//!   carries to a given peer, whether it offers single-copy transfers;
//! - **send**: `send(peer, header, small, body, token)` either takes the frame
//!   ([`Sent::Done`], or [`Sent::Pending`] when it still references `body` and will report
//!   `token` through [`FrameSink::on_sent`] once it no longer does) or returns
//!   [`NotNow`] having taken nothing. Backpressure is a value, not an error: the caller keeps the
//!   frame and retries from progress. `small` is always copied; `body` may be referenced until
//!   the token is reported, so the caller must keep it alive (an MPI send buffer is, until its
//!   request completes). With [`Token::NONE`] the transport copies whatever it must keep.
//! - **progress**: deliver arrived frames to a [`FrameSink`] (payload slices are valid only
//!   during the call) and push queued bytes out. It never blocks.
//!
//! Nothing in a transport knows about communicators, datatypes or matching; frames are opaque
//! 32-byte headers plus payload ([`crate::proto::frame`]). The self transport (messages to the
//! own process) lives in the engine as a queue of frames and is the stub every build has.

pub mod shm;
pub mod tcp;

use crate::proto::frame::HEADER_LEN;

/// Global process id: index into the engine's process table (world ranks first).
pub type Gpid = u32;

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

/// The transport cannot take the frame now; nothing was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotNow;

/// What a transport can do for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub reliable: bool,
    pub ordered: bool,
    /// Largest payload of one frame.
    pub max_payload: usize,
    /// The receiver can read the sender's memory directly.
    pub single_copy: bool,
}

/// The receiving end of a transport: the engine's protocol layer.
pub trait FrameSink {
    /// A frame arrived from `from`; `payload` is valid during this call only.
    fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]);

    /// For a `Data` frame of `len` bytes at `offset` for receive `rreq`: a place to write the
    /// payload directly (transports that read from a stream use it to avoid a copy), or None
    /// to have it delivered through `on_frame`. When Some, the transport calls
    /// [`FrameSink::on_data_placed`] after writing all `len` bytes there.
    fn data_target(&mut self, _rreq: u32, _offset: u64, _len: usize) -> Option<*mut u8> {
        None
    }

    /// The bytes announced by `data_target` were written.
    fn on_data_placed(&mut self, _from: Gpid, _rreq: u32, _offset: u64, _len: usize) {}

    /// For an `Eager` frame of `len` payload bytes from `from` whose payload has not arrived
    /// yet: where to write it, if the frame is next in order — the buffer of the receive it
    /// matches, or, when none is posted, the buffer it will wait in as an unexpected message;
    /// the transport then writes the payload there and calls [`FrameSink::on_eager_placed`]
    /// (and delivers nothing else from `from` in between).
    fn eager_target(
        &mut self,
        _from: Gpid,
        _hdr: &[u8; HEADER_LEN],
        _len: usize,
    ) -> Option<*mut u8> {
        None
    }

    /// The payload announced by `eager_target` was written.
    fn on_eager_placed(&mut self, _from: Gpid) {}

    /// A [`Sent::Pending`] send no longer references its body.
    fn on_sent(&mut self, _token: Token) {}

    /// The connection to `peer` failed or closed unexpectedly.
    fn on_peer_lost(&mut self, _peer: Gpid, _why: &str) {}
}

/// The contract of a transport (see the module doc).
pub trait Transport {
    fn name(&self) -> &'static str;
    fn caps(&self, peer: Gpid) -> Caps;
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, NotNow>;
    /// Returns the number of frames delivered.
    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize;
}
