//! Frames: what point-to-point protocols put on a transport, and their wire layout.
//!
//! Every frame is a fixed 32-byte header ([`HEADER_LEN`], the transport contract) followed by
//! a payload whose length the transport carries (shared-memory record length, TCP length
//! prefix). Names follow what the frame *is* in the protocol (as Open MPI's ob1 headers do),
//! not which transport carries it. As in smoltcp's wire modules, parsing never panics: a
//! header decodes into a validated [`Frame`] or a [`FrameError`], and re-encoding a decoded
//! frame gives back the same bytes.
//!
//! Every kind shares the first word:
//! ```text
//! offset size  field
//!  0      1    kind       FrameKind (0 is reserved for a transport's own records)
//!  1      1    flags      SYNC (0x1, Eager only): sent in synchronous mode, ack when matched
//!  2      2    feedback   the sender's report on what it receives from the destination
//! ```
//! The other seven words are laid out per kind ([`field`] names them); every word a kind does
//! not use is zero, and decoding checks that it is:
//! ```text
//! kind        4..8   8..12   12..16      16..20   20..24   24..32
//! Eager       seq    ctx     src         tag      sreq     -
//! Rts         seq    ctx     src         tag      sreq     len      (payload: RndvInfo [+ prefix])
//! Cts         -      rreq    -           -        sreq     -
//! Data        -      rreq    -           -        -        offset   (payload: message bytes)
//! Fin         -      -       -           -        sreq     -
//! SyncAck     -      -       -           -        sreq     -
//! CancelReq   seq    -       -           -        sreq     -
//! CancelResp  -      -       cancelled   -        sreq     -
//! Feedback    -      -       -           -        -        -
//! ```
//! `seq`: per (sender, receiver) sequence number of matchable frames; `ctx`, `src`, `tag`: the
//! matching envelope; `sreq`/`rreq`: the sender's and receiver's request ids (wire ids with a
//! generation); `len`: total message bytes; `offset`: byte offset of a Data payload;
//! `cancelled`: 1 if the receiver removed the message, else 0. All little endian.
//!
//! Feedback (bytes 2-3, any kind) is how receivers tell senders, at no extra cost, how the
//! messages they send are received (see `policy::Feedback`): bit 15 set when present, bits
//! 0-5 the share of recent messages that found their receive posted (0..=63 for 0..=1), bits
//! 6-11 the bit length of the bytes of recent messages that arrived unexpected; bits 12-14
//! are zero. A `Feedback` frame carries nothing else, for when no other frame goes that way.
//!
//! Rendezvous (`Rts`) payloads start with [`RndvInfo`] (24 bytes: the eager prefix length and
//! a transport's description of the sender's memory for single copy) and may carry the first
//! part of the message after it (eager-rendezvous).
//!
//! # One-sided communication (active messages)
//!
//! Kinds [`RMA_FIRST`] and up carry one-sided operations to a target that applies them itself
//! (`mpi::rma`: across hosts, and wherever a transport cannot reach a window's memory
//! directly). They never take part in matching; the engine hands them to the RMA layer before
//! the point-to-point engine sees them, and [`Frame::decode`] rejects them. One layout serves
//! every RMA kind ([`RmaHeader`]; a field a kind does not use is zero, and decoding checks the
//! ones a kind must not carry):
//! ```text
//! offset size  field
//!  0      1    kind     RmaKind (16..=26)
//!  1      1    flags    EXCLUSIVE (0x1, Lock/Unlock); FETCH (0x2, Acc: send the old values)
//!  2      2    -        zero (RMA frames carry no feedback)
//!  4      4    win      the window: the context id of its communicator
//!  8      4    id       the origin's operation id, which the answer names (0: none wanted)
//! 12      4    nsegs    target pieces listed at the start of the payload (0: one, at disp)
//! 16      2    elem     accumulate element type (a predefined datatype's engine id)
//! 18      1    op       accumulate operation (a predefined operation's engine id)
//! 19      1    -        zero
//! 20      4    len      bytes at the target (one contiguous piece), or of a reply's data
//! 24      8    disp     byte offset in the target's window (an address for a dynamic window);
//!                       in a Data reply, the offset of its bytes in the operation's result
//!
//! kind        flags      id  nsegs elem op len disp   payload
//! Put         -          -   n     -    -  l   d      [segments] data
//! Acc         FETCH      i?  n     e    o  l   d      [segments] origin values (FETCH: Data)
//! Get         -          i   n     -    -  l   d      [segments]                    (Data)
//! Cas         -          i   -     e    -  l   d      origin value, compare value   (Data)
//! Data        -          i   -     -    -  l   off    bytes of the result
//! Flush       -          i   -     -    -  -   -      -                             (Ack)
//! Ack         -          i   -     -    -  -   -      -
//! Lock        EXCLUSIVE  i   -     -    -  -   -      -             (Ack once granted)
//! Unlock      EXCLUSIVE  i   -     -    -  -   -      -             (Ack once released)
//! Post        -          -   -     -    -  -   -      - (the target exposes its window to us)
//! Complete    -          -   -     -    -  -   -      - (the origin ended its access epoch)
//! ```
//! A segment is `offset: u64, len: u64` in the target's window (absolute, `disp` unused);
//! segments and data together fit one frame: the origin cuts larger operations into pieces at
//! element boundaries, each its own frame (a Get's or fetching operation's pieces are answered
//! with one Data frame each, at the piece's offset in the result).

use std::fmt;

use crate::ids::{ContextId, Rank, Tag};
pub use crate::transport::HEADER_LEN;
use crate::transport::{Region, REGION_LEN};

/// Byte ranges of the header fields (see the table in the module doc).
pub mod field {
    use std::ops::Range;

    pub const KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const FEEDBACK: Range<usize> = 2..4;
    /// Eager, Rts, CancelReq.
    pub const SEQ: Range<usize> = 4..8;
    /// Eager, Rts.
    pub const CTX: Range<usize> = 8..12;
    /// Cts, Data.
    pub const RREQ: Range<usize> = 8..12;
    /// Eager, Rts.
    pub const SRC: Range<usize> = 12..16;
    /// CancelResp.
    pub const CANCELLED: Range<usize> = 12..16;
    /// Eager, Rts.
    pub const TAG: Range<usize> = 16..20;
    /// Every kind that names the sender's request.
    pub const SREQ: Range<usize> = 20..24;
    /// Rts.
    pub const LEN: Range<usize> = 24..32;
    /// Data.
    pub const OFFSET: Range<usize> = 24..32;
}

/// Bits of byte 3 (the feedback's high byte) that must be zero.
const FEEDBACK_RESERVED_HI: u8 = 0x70;
/// Feedback present.
const FEEDBACK_VALID: u16 = 0x8000;
/// Largest value of the preposted-share field.
pub const FEEDBACK_SHARE_MAX: u16 = 63;

/// The feedback field of a header: (preposted share 0..=63, unexpected-bytes bit length
/// 0..=63), or None when the sender put none.
#[inline(always)]
pub fn feedback(hdr: &[u8; HEADER_LEN]) -> Option<(u16, u16)> {
    feedback_of(feedback_field(hdr))
}

/// The raw feedback field of a header (0: none).
#[inline(always)]
pub fn feedback_field(hdr: &[u8; HEADER_LEN]) -> u16 {
    u16::from_le_bytes([hdr[2], hdr[3]])
}

/// The same, from the field's value.
#[inline(always)]
pub fn feedback_of(v: u16) -> Option<(u16, u16)> {
    (v & FEEDBACK_VALID != 0).then_some((v & 63, (v >> 6) & 63))
}

/// Encode a feedback field (see [`feedback`]); values saturate.
#[inline]
pub fn feedback_word(share: u16, level: u16) -> u16 {
    FEEDBACK_VALID | share.min(FEEDBACK_SHARE_MAX) | (level.min(63) << 6)
}

/// Put a feedback word (from [`feedback_word`], or 0 for none) into a header.
#[inline(always)]
pub fn set_feedback(hdr: &mut [u8; HEADER_LEN], word: u16) {
    hdr[field::FEEDBACK].copy_from_slice(&word.to_le_bytes());
}

/// Flag: the eager message was sent with MPI_Ssend/Issend; the receiver acks when it matches.
pub const FLAG_SYNC: u8 = 0x1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// A whole message.
    Eager = 1,
    /// Request to send: envelope + total length; payload is [`RndvInfo`] (+ an eager prefix).
    Rts = 2,
    /// Clear to send: the receiver matched an Rts and wants the data as `Data` frames.
    Cts = 3,
    /// Part of a rendezvous message at a byte offset.
    Data = 4,
    /// The receiver has read the data itself (single copy): the send is complete.
    Fin = 5,
    /// A synchronous eager message was matched.
    SyncAck = 6,
    /// The sender asks to cancel an unmatched message.
    CancelReq = 7,
    /// Answer to `CancelReq`.
    CancelResp = 8,
    /// Nothing but the feedback field.
    Feedback = 10,
}

/// Words 1..8 (bytes 4..32, four bytes each) a kind uses, as a bit set (bit i: word i).
const fn words(kind: FrameKind) -> u8 {
    const SEQ: u8 = 1 << 1;
    const W2: u8 = 1 << 2; // ctx / rreq
    const W3: u8 = 1 << 3; // src / cancelled
    const TAG: u8 = 1 << 4;
    const SREQ: u8 = 1 << 5;
    const Q: u8 = 1 << 6 | 1 << 7; // len / offset
    match kind {
        FrameKind::Eager => SEQ | W2 | W3 | TAG | SREQ,
        FrameKind::Rts => SEQ | W2 | W3 | TAG | SREQ | Q,
        FrameKind::Cts => W2 | SREQ,
        FrameKind::Data => W2 | Q,
        FrameKind::Fin | FrameKind::SyncAck => SREQ,
        FrameKind::CancelReq => SEQ | SREQ,
        FrameKind::CancelResp => W3 | SREQ,
        FrameKind::Feedback => 0,
    }
}

/// The header bytes a kind does not use, as masks over its four little-endian u64 words, so
/// that checking them costs four loads and a compare.
const fn unused_masks(kind: FrameKind) -> [u64; 4] {
    let used = words(kind);
    let mut m = [0u64; 4];
    let mut w = 1;
    while w < 8 {
        if used & (1 << w) == 0 {
            m[w / 2] |= 0xffff_ffff << (32 * (w % 2));
        }
        w += 1;
    }
    m
}

/// Are the bytes under `m` (from [`unused_masks`]) all zero? With a constant `m` only the
/// words a kind leaves unused are loaded: one for an Eager header, none for an Rts.
#[inline(always)]
fn clear(b: &[u8; HEADER_LEN], m: [u64; 4]) -> bool {
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
    (m[0] == 0 || word(0) & m[0] == 0)
        && (m[1] == 0 || word(1) & m[1] == 0)
        && (m[2] == 0 || word(2) & m[2] == 0)
        && (m[3] == 0 || word(3) & m[3] == 0)
}

impl FrameKind {
    fn from_u8(v: u8) -> Option<FrameKind> {
        Some(match v {
            1 => FrameKind::Eager,
            2 => FrameKind::Rts,
            3 => FrameKind::Cts,
            4 => FrameKind::Data,
            5 => FrameKind::Fin,
            6 => FrameKind::SyncAck,
            7 => FrameKind::CancelReq,
            8 => FrameKind::CancelResp,
            10 => FrameKind::Feedback,
            _ => return None,
        })
    }

    /// Frames that take part in matching, and so in per-peer ordering.
    pub fn is_matchable(self) -> bool {
        matches!(self, FrameKind::Eager | FrameKind::Rts)
    }
}

/// The matching envelope of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Envelope {
    pub ctx: ContextId,
    pub src: Rank,
    pub tag: Tag,
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    Eager {
        env: Envelope,
        seq: u32,
        sreq: u32,
        sync: bool,
    },
    Rts {
        env: Envelope,
        seq: u32,
        sreq: u32,
        len: u64,
    },
    Cts {
        sreq: u32,
        rreq: u32,
    },
    Data {
        rreq: u32,
        offset: u64,
    },
    Fin {
        sreq: u32,
    },
    SyncAck {
        sreq: u32,
    },
    CancelReq {
        sreq: u32,
        seq: u32,
    },
    CancelResp {
        sreq: u32,
        cancelled: bool,
    },
    Feedback,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    BadKind(u8),
    BadFlags(u8),
    Reserved,
    /// A field the kind does not use is not zero, or a field holds an impossible value.
    BadField(&'static str),
    Short(usize),
    BadPayload(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::BadFlags(x) => write!(f, "unknown frame flags {x:#x}"),
            FrameError::Reserved => write!(f, "reserved feedback bits are not zero"),
            FrameError::BadField(what) => write!(f, "malformed frame header: {what}"),
            FrameError::Short(n) => write!(f, "frame of {n} bytes is shorter than its header"),
            FrameError::BadPayload(why) => write!(f, "malformed frame payload: {why}"),
        }
    }
}

impl std::error::Error for FrameError {}

#[inline(always)]
fn put32(b: &mut [u8; HEADER_LEN], at: std::ops::Range<usize>, v: u32) {
    b[at].copy_from_slice(&v.to_le_bytes());
}

#[inline(always)]
fn put64(b: &mut [u8; HEADER_LEN], at: std::ops::Range<usize>, v: u64) {
    b[at].copy_from_slice(&v.to_le_bytes());
}

#[inline(always)]
fn get32(b: &[u8; HEADER_LEN], at: std::ops::Range<usize>) -> u32 {
    u32::from_le_bytes([
        b[at.start],
        b[at.start + 1],
        b[at.start + 2],
        b[at.start + 3],
    ])
}

#[inline(always)]
fn get64(b: &[u8; HEADER_LEN], at: std::ops::Range<usize>) -> u64 {
    u64::from_le_bytes(b[at].try_into().expect("8 bytes"))
}

impl Frame {
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::Eager { .. } => FrameKind::Eager,
            Frame::Rts { .. } => FrameKind::Rts,
            Frame::Cts { .. } => FrameKind::Cts,
            Frame::Data { .. } => FrameKind::Data,
            Frame::Fin { .. } => FrameKind::Fin,
            Frame::SyncAck { .. } => FrameKind::SyncAck,
            Frame::CancelReq { .. } => FrameKind::CancelReq,
            Frame::CancelResp { .. } => FrameKind::CancelResp,
            Frame::Feedback => FrameKind::Feedback,
        }
    }

    #[inline]
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[field::KIND] = self.kind() as u8;
        let envelope = |b: &mut [u8; HEADER_LEN], env: &Envelope| {
            put32(b, field::CTX, env.ctx.get());
            put32(b, field::SRC, env.src as u32);
            put32(b, field::TAG, env.tag as u32);
        };
        match *self {
            Frame::Eager {
                env,
                seq,
                sreq,
                sync,
            } => {
                b[field::FLAGS] = if sync { FLAG_SYNC } else { 0 };
                put32(&mut b, field::SEQ, seq);
                envelope(&mut b, &env);
                put32(&mut b, field::SREQ, sreq);
            }
            Frame::Rts {
                env,
                seq,
                sreq,
                len,
            } => {
                put32(&mut b, field::SEQ, seq);
                envelope(&mut b, &env);
                put32(&mut b, field::SREQ, sreq);
                put64(&mut b, field::LEN, len);
            }
            Frame::Cts { sreq, rreq } => {
                put32(&mut b, field::RREQ, rreq);
                put32(&mut b, field::SREQ, sreq);
            }
            Frame::Data { rreq, offset } => {
                put32(&mut b, field::RREQ, rreq);
                put64(&mut b, field::OFFSET, offset);
            }
            Frame::Fin { sreq } | Frame::SyncAck { sreq } => put32(&mut b, field::SREQ, sreq),
            Frame::CancelReq { sreq, seq } => {
                put32(&mut b, field::SEQ, seq);
                put32(&mut b, field::SREQ, sreq);
            }
            Frame::CancelResp { sreq, cancelled } => {
                put32(&mut b, field::CANCELLED, cancelled as u32);
                put32(&mut b, field::SREQ, sreq);
            }
            Frame::Feedback => {}
        }
        b
    }

    /// Always inlined: the receive path decodes every frame, and the match folds into the
    /// caller's own match on the kind.
    #[inline(always)]
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Frame, FrameError> {
        let kind = FrameKind::from_u8(b[field::KIND]).ok_or(FrameError::BadKind(b[0]))?;
        let flags = b[field::FLAGS];
        if flags != 0 && (kind != FrameKind::Eager || flags & !FLAG_SYNC != 0) {
            return Err(FrameError::BadFlags(flags));
        }
        if b[3] & FEEDBACK_RESERVED_HI != 0 {
            return Err(FrameError::Reserved);
        }
        // Each arm checks the words its kind leaves unused, with a constant mask.
        macro_rules! unused_clear {
            ($k:expr) => {
                if !clear(b, const { unused_masks($k) }) {
                    return Err(FrameError::BadField(
                        "a field this kind does not use is set",
                    ));
                }
            };
        }
        let envelope = || Envelope {
            ctx: ContextId::new(get32(b, field::CTX)),
            src: get32(b, field::SRC) as i32,
            tag: get32(b, field::TAG) as i32,
        };
        Ok(match kind {
            FrameKind::Eager => {
                unused_clear!(FrameKind::Eager);
                Frame::Eager {
                    env: envelope(),
                    seq: get32(b, field::SEQ),
                    sreq: get32(b, field::SREQ),
                    sync: flags & FLAG_SYNC != 0,
                }
            }
            FrameKind::Rts => {
                unused_clear!(FrameKind::Rts);
                Frame::Rts {
                    env: envelope(),
                    seq: get32(b, field::SEQ),
                    sreq: get32(b, field::SREQ),
                    len: get64(b, field::LEN),
                }
            }
            FrameKind::Cts => {
                unused_clear!(FrameKind::Cts);
                Frame::Cts {
                    sreq: get32(b, field::SREQ),
                    rreq: get32(b, field::RREQ),
                }
            }
            FrameKind::Data => {
                unused_clear!(FrameKind::Data);
                Frame::Data {
                    rreq: get32(b, field::RREQ),
                    offset: get64(b, field::OFFSET),
                }
            }
            FrameKind::Fin => {
                unused_clear!(FrameKind::Fin);
                Frame::Fin {
                    sreq: get32(b, field::SREQ),
                }
            }
            FrameKind::SyncAck => {
                unused_clear!(FrameKind::SyncAck);
                Frame::SyncAck {
                    sreq: get32(b, field::SREQ),
                }
            }
            FrameKind::CancelReq => {
                unused_clear!(FrameKind::CancelReq);
                Frame::CancelReq {
                    sreq: get32(b, field::SREQ),
                    seq: get32(b, field::SEQ),
                }
            }
            FrameKind::CancelResp => {
                unused_clear!(FrameKind::CancelResp);
                Frame::CancelResp {
                    sreq: get32(b, field::SREQ),
                    cancelled: match get32(b, field::CANCELLED) {
                        0 => false,
                        1 => true,
                        _ => return Err(FrameError::BadField("cancelled is neither 0 nor 1")),
                    },
                }
            }
            FrameKind::Feedback => {
                unused_clear!(FrameKind::Feedback);
                Frame::Feedback
            }
        })
    }

    /// Decode from a byte slice that starts with a header.
    pub fn decode_slice(b: &[u8]) -> Result<Frame, FrameError> {
        let h: &[u8; HEADER_LEN] = b
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(FrameError::Short(b.len()))?;
        Frame::decode(h)
    }
}

/// What a request-to-send tells the receiver about the sender's data.
///
/// ```text
/// offset size  field
///  0      4    prefix   bytes of the message carried after this info (eager-rendezvous)
///  4     20    region   the sender's transport's description of the rest of the message
///                       for a direct read (transport::Region), all zero when not offered
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RndvInfo {
    pub prefix: u32,
    /// Where the receiver may read the message after the prefix itself (single copy).
    pub region: Region,
}

impl RndvInfo {
    pub const LEN: usize = 4 + REGION_LEN;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.prefix.to_le_bytes());
        b[4..].copy_from_slice(&self.region.0);
        b
    }

    /// Decode the info and return the eager prefix that follows it.
    pub fn decode(payload: &[u8]) -> Result<(RndvInfo, &[u8]), FrameError> {
        if payload.len() < Self::LEN {
            return Err(FrameError::BadPayload(
                "request-to-send payload shorter than its info",
            ));
        }
        let info = RndvInfo {
            prefix: u32::from_le_bytes(payload[0..4].try_into().expect("4")),
            region: Region(payload[4..Self::LEN].try_into().expect("region")),
        };
        let rest = &payload[Self::LEN..];
        if rest.len() != info.prefix as usize {
            return Err(FrameError::BadPayload(
                "eager prefix length does not match the payload",
            ));
        }
        Ok((info, rest))
    }
}

// ---------------------------------------------------------------------------------------------
// One-sided communication

/// First frame kind of one-sided communication (see the module doc).
pub const RMA_FIRST: u8 = 16;

/// Is a header's kind one of the RMA kinds?
#[inline(always)]
pub fn is_rma(hdr: &[u8; HEADER_LEN]) -> bool {
    hdr[field::KIND] >= RMA_FIRST
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RmaKind {
    Put = 16,
    Acc = 17,
    Get = 18,
    Cas = 19,
    Data = 20,
    Flush = 21,
    Ack = 22,
    Lock = 23,
    Unlock = 24,
    Post = 25,
    Complete = 26,
}

impl RmaKind {
    pub fn from_u8(v: u8) -> Option<RmaKind> {
        use RmaKind::*;
        Some(match v {
            16 => Put,
            17 => Acc,
            18 => Get,
            19 => Cas,
            20 => Data,
            21 => Flush,
            22 => Ack,
            23 => Lock,
            24 => Unlock,
            25 => Post,
            26 => Complete,
            _ => return None,
        })
    }

    /// An answer (Data, Ack) to a frame of this process, not a request to its target.
    #[inline]
    pub fn is_answer(self) -> bool {
        matches!(self, RmaKind::Data | RmaKind::Ack)
    }

    /// Flags the kind may carry.
    fn flags(self) -> u8 {
        let own = match self {
            RmaKind::Lock | RmaKind::Unlock => RMA_EXCLUSIVE,
            RmaKind::Acc => RMA_FETCH | RMA_ACK,
            RmaKind::Put => RMA_ACK,
            _ => 0,
        };
        if self.is_answer() {
            own
        } else {
            own | RMA_ODD
        }
    }
}

/// Lock / Unlock: the lock is exclusive.
pub const RMA_EXCLUSIVE: u8 = 0x1;
/// Acc: answer with the target's values before the operation (MPI_Get_accumulate).
pub const RMA_FETCH: u8 = 0x2;
/// Put, Acc without FETCH: acknowledge (Ack with the frame's id) once applied, as a Flush
/// frame right after it would be: a flush whose target's last frame has not left yet marks
/// that frame instead of sending one more (`mpi::rma::sync`).
pub const RMA_ACK: u8 = 0x8;
/// Every request (not Data, Ack): sent after an odd number of counted fences on the window,
/// so that a target still in a fence tells the next epoch's frames from the ending one's
/// (`mpi::rma::sync::fence_counted`).
pub const RMA_ODD: u8 = 0x4;

/// The header of an RMA frame (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaHeader {
    pub kind: RmaKind,
    pub flags: u8,
    pub win: ContextId,
    pub id: u32,
    pub nsegs: u32,
    pub elem: u16,
    pub op: u8,
    pub len: u32,
    pub disp: u64,
}

/// Bytes of one target segment in an RMA payload.
pub const SEG_LEN: usize = 16;

impl RmaHeader {
    pub fn new(kind: RmaKind, win: ContextId) -> RmaHeader {
        RmaHeader {
            kind,
            flags: 0,
            win,
            id: 0,
            nsegs: 0,
            elem: 0,
            op: 0,
            len: 0,
            disp: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.win.get().to_le_bytes());
        b[8..12].copy_from_slice(&self.id.to_le_bytes());
        b[12..16].copy_from_slice(&self.nsegs.to_le_bytes());
        b[16..18].copy_from_slice(&self.elem.to_le_bytes());
        b[18] = self.op;
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.disp.to_le_bytes());
        b
    }

    /// Decode and check a header: a known kind, only its flags, zero reserved bytes, and no
    /// field the kind cannot carry (segments only with data-moving kinds, an element type and
    /// operation only with accumulates).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<RmaHeader, FrameError> {
        let kind = RmaKind::from_u8(b[0]).ok_or(FrameError::BadKind(b[0]))?;
        if b[1] & !kind.flags() != 0 {
            return Err(FrameError::BadFlags(b[1]));
        }
        if b[2] != 0 || b[3] != 0 || b[19] != 0 {
            return Err(FrameError::Reserved);
        }
        let h = RmaHeader {
            kind,
            flags: b[1],
            win: ContextId::new(get32(b, 4..8)),
            id: get32(b, 8..12),
            nsegs: get32(b, 12..16),
            elem: u16::from_le_bytes([b[16], b[17]]),
            op: b[18],
            len: get32(b, 20..24),
            disp: get64(b, 24..32),
        };
        let segs_ok = matches!(kind, RmaKind::Put | RmaKind::Acc | RmaKind::Get) || h.nsegs == 0;
        let elem_ok = matches!(kind, RmaKind::Acc | RmaKind::Cas) || (h.elem == 0 && h.op == 0);
        if !segs_ok || !elem_ok {
            return Err(FrameError::BadField(
                "a field this RMA kind does not use is set",
            ));
        }
        Ok(h)
    }
}

/// Encode target segments (absolute offsets in the window) for an RMA payload.
pub fn put_segments(out: &mut Vec<u8>, segs: &[(u64, u64)]) {
    for &(off, len) in segs {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
}

/// Target segments of an RMA frame: (offset, bytes).
pub type Segments = Vec<(u64, u64)>;

/// Split an RMA payload into its `n` segments and the data after them; an error when it is
/// too short, or a segment's end overflows.
pub fn take_segments(payload: &[u8], n: u32) -> Result<(Segments, &[u8]), FrameError> {
    let n = n as usize;
    let need = n
        .checked_mul(SEG_LEN)
        .filter(|&k| k <= payload.len())
        .ok_or(FrameError::BadPayload(
            "RMA payload shorter than its segment list",
        ))?;
    let mut segs = Vec::with_capacity(n);
    for k in 0..n {
        let at = k * SEG_LEN;
        let off = u64::from_le_bytes(payload[at..at + 8].try_into().expect("8"));
        let len = u64::from_le_bytes(payload[at + 8..at + 16].try_into().expect("8"));
        if off.checked_add(len).is_none() {
            return Err(FrameError::BadPayload("RMA segment past the end of memory"));
        }
        segs.push((off, len));
    }
    Ok((segs, &payload[need..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn env() -> Envelope {
        Envelope {
            ctx: ContextId::new(4),
            src: -2,
            tag: 77,
        }
    }

    fn every_kind() -> Vec<Frame> {
        vec![
            Frame::Eager {
                env: env(),
                seq: 9,
                sreq: 0,
                sync: false,
            },
            Frame::Eager {
                env: env(),
                seq: 10,
                sreq: 5,
                sync: true,
            },
            Frame::Rts {
                env: env(),
                seq: 11,
                sreq: 6,
                len: 3 << 32,
            },
            Frame::Cts { sreq: 6, rreq: 8 },
            Frame::Data {
                rreq: 8,
                offset: 1 << 40,
            },
            Frame::Fin { sreq: 6 },
            Frame::SyncAck { sreq: 5 },
            Frame::CancelReq { sreq: 5, seq: 10 },
            Frame::CancelResp {
                sreq: 5,
                cancelled: true,
            },
            Frame::Feedback,
        ]
    }

    #[test]
    fn roundtrip_every_kind() {
        for f in every_kind() {
            assert_eq!(Frame::decode(&f.encode()), Ok(f));
            assert_eq!(feedback(&f.encode()), None);
            // Feedback rides on every kind without changing what the frame says.
            let mut b = f.encode();
            set_feedback(&mut b, feedback_word(40, 17));
            assert_eq!(Frame::decode(&b), Ok(f));
            assert_eq!(feedback(&b), Some((40, 17)));
        }
        let mut b = Frame::Feedback.encode();
        set_feedback(&mut b, feedback_word(1000, 1000));
        assert_eq!(feedback(&b), Some((FEEDBACK_SHARE_MAX, 63)));
        set_feedback(&mut b, feedback_word(0, 0));
        assert_eq!(feedback(&b), Some((0, 0)));
    }

    #[test]
    fn fields_sit_where_the_layout_says() {
        let b = Frame::Rts {
            env: env(),
            seq: 0x0102_0304,
            sreq: 0x0a0b_0c0d,
            len: 0x1122_3344_5566_7788,
        }
        .encode();
        assert_eq!(b[field::KIND], FrameKind::Rts as u8);
        assert_eq!(get32(&b, field::SEQ), 0x0102_0304);
        assert_eq!(get32(&b, field::CTX), 4);
        assert_eq!(get32(&b, field::SRC) as i32, -2);
        assert_eq!(get32(&b, field::TAG), 77);
        assert_eq!(get32(&b, field::SREQ), 0x0a0b_0c0d);
        assert_eq!(get64(&b, field::LEN), 0x1122_3344_5566_7788);
        let b = Frame::Data { rreq: 3, offset: 9 }.encode();
        assert_eq!((get32(&b, field::RREQ), get64(&b, field::OFFSET)), (3, 9));
    }

    #[test]
    fn malformed_headers_are_errors() {
        let mut b = Frame::Fin { sreq: 1 }.encode();
        b[0] = 0;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(0)));
        b[0] = 200;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(200)));
        b[0] = 9; // the retired Help kind
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(9)));
        let mut b = Frame::Fin { sreq: 1 }.encode();
        b[1] = FLAG_SYNC;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadFlags(1)));
        let mut b = Frame::Eager {
            env: env(),
            seq: 0,
            sreq: 0,
            sync: false,
        }
        .encode();
        b[1] = 0x80;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadFlags(0x80)));
        b[1] = 0;
        b[3] = 0x10;
        assert_eq!(Frame::decode(&b), Err(FrameError::Reserved));
        b[3] = 0;
        b[30] = 1; // an Eager frame has no length
        assert!(matches!(Frame::decode(&b), Err(FrameError::BadField(_))));
        let mut b = Frame::Data { rreq: 1, offset: 2 }.encode();
        b[16] = 7; // no tag in a Data frame
        assert!(matches!(Frame::decode(&b), Err(FrameError::BadField(_))));
        let mut b = Frame::CancelResp {
            sreq: 1,
            cancelled: false,
        }
        .encode();
        b[12] = 2;
        assert!(matches!(Frame::decode(&b), Err(FrameError::BadField(_))));
        assert_eq!(Frame::decode_slice(&[1, 0, 0]), Err(FrameError::Short(3)));
    }

    #[test]
    fn rndv_info_checks_prefix_length() {
        let mut region = [0u8; REGION_LEN];
        region[3] = 42;
        let info = RndvInfo {
            prefix: 3,
            region: Region(region),
        };
        let mut p = info.encode().to_vec();
        p.extend_from_slice(b"abc");
        let (got, rest) = RndvInfo::decode(&p).unwrap();
        assert_eq!(got, info);
        assert_eq!(rest, b"abc");
        assert!(RndvInfo::decode(&p[..p.len() - 1]).is_err());
        assert!(RndvInfo::decode(&p[..5]).is_err());
    }

    #[test]
    fn rma_headers_roundtrip_and_reject_misuse() {
        let mut h = RmaHeader::new(RmaKind::Acc, ContextId::new(12));
        h.flags = RMA_FETCH;
        h.id = 99;
        h.nsegs = 3;
        h.elem = 7;
        h.op = 2;
        h.len = 1 << 20;
        h.disp = 1 << 40;
        let b = h.encode();
        assert!(is_rma(&b));
        assert_eq!(RmaHeader::decode(&b), Ok(h));
        // RMA kinds are not point-to-point frames.
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(17)));
        let mut bad = b;
        bad[1] = RMA_EXCLUSIVE; // not an accumulate flag
        assert_eq!(RmaHeader::decode(&bad), Err(FrameError::BadFlags(1)));
        let mut odd = h;
        odd.flags |= RMA_ODD;
        assert_eq!(RmaHeader::decode(&odd.encode()), Ok(odd));
        let mut put = RmaHeader::new(RmaKind::Put, ContextId::new(12));
        put.flags = RMA_ACK | RMA_ODD;
        assert_eq!(RmaHeader::decode(&put.encode()), Ok(put));
        let mut get = RmaHeader::new(RmaKind::Get, ContextId::new(12));
        get.flags = RMA_ACK; // answered by its data
        assert_eq!(
            RmaHeader::decode(&get.encode()),
            Err(FrameError::BadFlags(RMA_ACK))
        );
        let mut ack = RmaHeader::new(RmaKind::Ack, ContextId::new(12));
        ack.flags = RMA_ODD; // answers carry no epoch
        assert_eq!(
            RmaHeader::decode(&ack.encode()),
            Err(FrameError::BadFlags(RMA_ODD))
        );
        let mut bad = b;
        bad[19] = 1;
        assert_eq!(RmaHeader::decode(&bad), Err(FrameError::Reserved));
        let mut g = RmaHeader::new(RmaKind::Flush, ContextId::new(1));
        g.nsegs = 1;
        assert!(matches!(
            RmaHeader::decode(&g.encode()),
            Err(FrameError::BadField(_))
        ));
        let mut g = RmaHeader::new(RmaKind::Put, ContextId::new(1));
        g.op = 2;
        assert!(matches!(
            RmaHeader::decode(&g.encode()),
            Err(FrameError::BadField(_))
        ));
        let mut b = RmaHeader::new(RmaKind::Lock, ContextId::new(1)).encode();
        b[0] = 27;
        assert_eq!(RmaHeader::decode(&b), Err(FrameError::BadKind(27)));
        let mut p = Vec::new();
        put_segments(&mut p, &[(8, 16), (100, 4)]);
        p.extend_from_slice(b"data");
        let (segs, rest) = take_segments(&p, 2).unwrap();
        assert_eq!(segs, vec![(8, 16), (100, 4)]);
        assert_eq!(rest, b"data");
        assert!(take_segments(&p, 3).is_err());
        let mut p = Vec::new();
        put_segments(&mut p, &[(u64::MAX, 2)]);
        assert!(take_segments(&p, 1).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics_and_is_canonical(bytes in proptest::array::uniform32(any::<u8>())) {
            if let Ok(f) = Frame::decode(&bytes) {
                // Whatever decodes re-encodes to the same header (feedback aside).
                let mut b = f.encode();
                b[field::FEEDBACK].copy_from_slice(&bytes[field::FEEDBACK]);
                prop_assert_eq!(b, bytes);
            }
        }

        #[test]
        fn every_encoded_frame_decodes(k in 0usize..10, a in any::<u32>(), b in any::<u32>(), q in any::<u64>()) {
            let env = Envelope { ctx: ContextId::new(a), src: b as i32, tag: (a ^ b) as i32 };
            let f = match k {
                0 => Frame::Eager { env, seq: b, sreq: a, sync: q & 1 == 1 },
                1 => Frame::Rts { env, seq: b, sreq: a, len: q },
                2 => Frame::Cts { sreq: a, rreq: b },
                3 => Frame::Data { rreq: a, offset: q },
                4 => Frame::Fin { sreq: a },
                5 => Frame::SyncAck { sreq: a },
                6 => Frame::CancelReq { sreq: a, seq: b },
                7 => Frame::CancelResp { sreq: a, cancelled: q & 1 == 1 },
                _ => Frame::Feedback,
            };
            prop_assert_eq!(Frame::decode(&f.encode()), Ok(f));
        }

        #[test]
        fn rndv_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = RndvInfo::decode(&bytes);
        }

        #[test]
        fn rma_decode_never_panics_and_is_canonical(bytes in proptest::array::uniform32(any::<u8>())) {
            if let Ok(h) = RmaHeader::decode(&bytes) {
                prop_assert_eq!(h.encode(), bytes);
            }
            let _ = take_segments(&bytes, bytes[0] as u32 % 4);
        }
    }
}
