//! Frames: what point-to-point protocols put on a transport.
//!
//! Every frame is a fixed 32-byte header followed by a payload whose length the transport
//! carries (shared-memory record length, TCP length prefix). Names follow what the frame *is*
//! in the protocol (as Open MPI's ob1 headers do), not which transport carries it.
//!
//! ```text
//! offset size  field
//!  0      1    kind        FrameKind
//!  1      1    flags       SYNC (0x1): eager message sent in synchronous mode, ack when matched
//!  2      2    feedback    the sender's report on what it receives from the destination
//!  4      4    seq         per (sender, receiver) sequence number of matchable frames
//!  8      4    w0          Eager/Rts: context id      Cts/Data/Help: receiver request  other: 0
//! 12      4    w1          Eager/Rts: source rank     CancelResp: 1 if cancelled
//! 16      4    w2          Eager/Rts: tag
//! 20      4    sreq        sender's request id (sync eager, rendezvous, cancel)
//! 24      8    q           Rts: total message bytes   Data: byte offset
//! ```
//! All fields little endian. Decoding validates the kind, the flags and the feedback field and
//! never panics; a malformed header is a [`FrameError`].
//!
//! Feedback (bytes 2–3, any frame kind) is how receivers tell senders, at no extra cost, how
//! the messages they send are received (see `policy::Feedback`): bit 15 set when present, bits
//! 0–5 the share of recent messages that found their receive posted (0..=63 for 0..=1), bits
//! 6–11 the bit length of the bytes of recent messages that arrived unexpected; bits 12–14
//! are zero. A `Feedback` frame carries nothing else, for when no other frame goes that way.
//!
//! Rendezvous (`Rts`) payloads start with [`RndvInfo`] (24 bytes) and may carry the first part
//! of the message after it (eager-rendezvous). `Help` payloads are a [`HelpInfo`].

use std::fmt;

pub const HEADER_LEN: usize = 32;

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
    hdr[2..4].copy_from_slice(&word.to_le_bytes());
}

/// Flag: the eager message was sent with MPI_Ssend/Issend; the receiver acks when it matches.
pub const FLAG_SYNC: u8 = 0x1;
const KNOWN_FLAGS: u8 = FLAG_SYNC;

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
    /// The receiver matched a cooperative-copy message and asks the sender to copy chunks
    /// too; payload is [`HelpInfo`].
    Help = 9,
    /// Nothing but the feedback field.
    Feedback = 10,
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
            9 => FrameKind::Help,
            10 => FrameKind::Feedback,
            _ => return None,
        })
    }

    /// Frames that take part in matching, and so in per-peer ordering.
    pub fn is_matchable(self) -> bool {
        matches!(self, FrameKind::Eager | FrameKind::Rts)
    }
}

/// Is `hdr` the header of an eager message?
#[inline]
pub fn is_eager(hdr: &[u8; HEADER_LEN]) -> bool {
    hdr[0] == FrameKind::Eager as u8
}

/// The matching envelope of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Envelope {
    pub ctx: u32,
    pub src: i32,
    pub tag: i32,
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
    Help {
        sreq: u32,
        rreq: u32,
    },
    Feedback,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    BadKind(u8),
    BadFlags(u8),
    Reserved,
    Short(usize),
    BadPayload(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::BadFlags(x) => write!(f, "unknown frame flags {x:#x}"),
            FrameError::Reserved => write!(f, "reserved feedback bits are not zero"),
            FrameError::Short(n) => write!(f, "frame of {n} bytes is shorter than its header"),
            FrameError::BadPayload(why) => write!(f, "malformed frame payload: {why}"),
        }
    }
}

impl std::error::Error for FrameError {}

#[inline(always)]
fn put32(b: &mut [u8; HEADER_LEN], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline(always)]
fn get32(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
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
            Frame::Help { .. } => FrameKind::Help,
            Frame::Feedback => FrameKind::Feedback,
        }
    }

    #[inline]
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind() as u8;
        let (flags, seq, w0, w1, w2, sreq, q) = match *self {
            Frame::Eager {
                env,
                seq,
                sreq,
                sync,
            } => (
                if sync { FLAG_SYNC } else { 0 },
                seq,
                env.ctx,
                env.src as u32,
                env.tag as u32,
                sreq,
                0,
            ),
            Frame::Rts {
                env,
                seq,
                sreq,
                len,
            } => (0, seq, env.ctx, env.src as u32, env.tag as u32, sreq, len),
            Frame::Cts { sreq, rreq } => (0, 0, rreq, 0, 0, sreq, 0),
            Frame::Data { rreq, offset } => (0, 0, rreq, 0, 0, 0, offset),
            Frame::Fin { sreq } | Frame::SyncAck { sreq } => (0, 0, 0, 0, 0, sreq, 0),
            Frame::CancelReq { sreq, seq } => (0, seq, 0, 0, 0, sreq, 0),
            Frame::CancelResp { sreq, cancelled } => (0, 0, 0, cancelled as u32, 0, sreq, 0),
            Frame::Help { sreq, rreq } => (0, 0, rreq, 0, 0, sreq, 0),
            Frame::Feedback => (0, 0, 0, 0, 0, 0, 0),
        };
        b[1] = flags;
        put32(&mut b, 4, seq);
        put32(&mut b, 8, w0);
        put32(&mut b, 12, w1);
        put32(&mut b, 16, w2);
        put32(&mut b, 20, sreq);
        b[24..32].copy_from_slice(&q.to_le_bytes());
        b
    }

    #[inline]
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Frame, FrameError> {
        let kind = FrameKind::from_u8(b[0]).ok_or(FrameError::BadKind(b[0]))?;
        let flags = b[1];
        if flags & !KNOWN_FLAGS != 0 || (flags != 0 && kind != FrameKind::Eager) {
            return Err(FrameError::BadFlags(flags));
        }
        if b[3] & FEEDBACK_RESERVED_HI != 0 {
            return Err(FrameError::Reserved);
        }
        let seq = get32(b, 4);
        let w0 = get32(b, 8);
        let w1 = get32(b, 12);
        let w2 = get32(b, 16);
        let sreq = get32(b, 20);
        let q = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes"));
        let env = Envelope {
            ctx: w0,
            src: w1 as i32,
            tag: w2 as i32,
        };
        Ok(match kind {
            FrameKind::Eager => Frame::Eager {
                env,
                seq,
                sreq,
                sync: flags & FLAG_SYNC != 0,
            },
            FrameKind::Rts => Frame::Rts {
                env,
                seq,
                sreq,
                len: q,
            },
            FrameKind::Cts => Frame::Cts { sreq, rreq: w0 },
            FrameKind::Data => Frame::Data {
                rreq: w0,
                offset: q,
            },
            FrameKind::Fin => Frame::Fin { sreq },
            FrameKind::SyncAck => Frame::SyncAck { sreq },
            FrameKind::Feedback => Frame::Feedback,
            FrameKind::CancelReq => Frame::CancelReq { sreq, seq },
            FrameKind::CancelResp => Frame::CancelResp {
                sreq,
                cancelled: w1 != 0,
            },
            FrameKind::Help => Frame::Help { sreq, rreq: w0 },
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RndvInfo {
    /// Sender's process id, for single-copy reads; 0 when single copy is not offered.
    pub pid: u32,
    /// Bytes of the message carried after this struct in the Rts payload (eager-rendezvous).
    pub prefix: u32,
    /// Address of the sender's contiguous data in its address space (single copy).
    pub addr: u64,
    /// Cooperative copy: the sender's copy slot + 1, or 0 when it does not offer to help.
    pub slot: u32,
    /// Cooperative copy: bytes per chunk.
    pub chunk: u32,
}

impl RndvInfo {
    pub const LEN: usize = 24;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&self.prefix.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..20].copy_from_slice(&self.slot.to_le_bytes());
        b[20..24].copy_from_slice(&self.chunk.to_le_bytes());
        b
    }

    /// Decode the info and return the eager prefix that follows it.
    pub fn decode(payload: &[u8]) -> Result<(RndvInfo, &[u8]), FrameError> {
        if payload.len() < Self::LEN {
            return Err(FrameError::BadPayload(
                "request-to-send payload shorter than its info",
            ));
        }
        let u32_at = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().expect("4"));
        let info = RndvInfo {
            pid: u32_at(0),
            prefix: u32_at(4),
            addr: u64::from_le_bytes(payload[8..16].try_into().expect("8")),
            slot: u32_at(16),
            chunk: u32_at(20),
        };
        let rest = &payload[Self::LEN..];
        if rest.len() != info.prefix as usize {
            return Err(FrameError::BadPayload(
                "eager prefix length does not match the payload",
            ));
        }
        if info.slot != 0 && info.chunk == 0 {
            return Err(FrameError::BadPayload(
                "cooperative copy offered with a zero chunk size",
            ));
        }
        Ok((info, rest))
    }
}

/// What the receiver tells the sender when it asks for help with a cooperative copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelpInfo {
    /// Receiver's process id (the sender writes into its memory).
    pub pid: u32,
    /// Chunks to copy (after the eager prefix).
    pub chunks: u32,
    /// Address in the receiver where byte 0 of the message goes.
    pub addr: u64,
    /// Bytes of the message the receiver takes (less than the length when truncated).
    pub take: u64,
}

impl HelpInfo {
    pub const LEN: usize = 24;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&self.chunks.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.take.to_le_bytes());
        b
    }

    pub fn decode(payload: &[u8]) -> Result<HelpInfo, FrameError> {
        if payload.len() != Self::LEN {
            return Err(FrameError::BadPayload("help request of the wrong size"));
        }
        Ok(HelpInfo {
            pid: u32::from_le_bytes(payload[0..4].try_into().expect("4")),
            chunks: u32::from_le_bytes(payload[4..8].try_into().expect("4")),
            addr: u64::from_le_bytes(payload[8..16].try_into().expect("8")),
            take: u64::from_le_bytes(payload[16..24].try_into().expect("8")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn env() -> Envelope {
        Envelope {
            ctx: 4,
            src: -2,
            tag: 77,
        }
    }

    #[test]
    fn roundtrip_every_kind() {
        let frames = [
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
            Frame::Help { sreq: 5, rreq: 9 },
            Frame::Feedback,
        ];
        for f in frames {
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
    fn malformed_headers_are_errors() {
        let mut b = Frame::Fin { sreq: 1 }.encode();
        b[0] = 0;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(0)));
        b[0] = 200;
        assert_eq!(Frame::decode(&b), Err(FrameError::BadKind(200)));
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
        assert_eq!(Frame::decode_slice(&[1, 0, 0]), Err(FrameError::Short(3)));
    }

    #[test]
    fn rndv_info_checks_prefix_length() {
        let info = RndvInfo {
            pid: 42,
            prefix: 3,
            addr: 0xdead_beef,
            slot: 2,
            chunk: 4096,
        };
        let mut p = info.encode().to_vec();
        p.extend_from_slice(b"abc");
        let (got, rest) = RndvInfo::decode(&p).unwrap();
        assert_eq!(got, info);
        assert_eq!(rest, b"abc");
        assert!(RndvInfo::decode(&p[..p.len() - 1]).is_err());
        assert!(RndvInfo::decode(&p[..5]).is_err());
        let mut bad = RndvInfo { chunk: 0, ..info }.encode().to_vec();
        bad.extend_from_slice(b"abc");
        assert!(
            RndvInfo::decode(&bad).is_err(),
            "help offered without a chunk size"
        );
        let h = HelpInfo {
            pid: 7,
            chunks: 3,
            addr: 1 << 40,
            take: 12345,
        };
        assert_eq!(HelpInfo::decode(&h.encode()), Ok(h));
        assert!(HelpInfo::decode(&h.encode()[..20]).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::array::uniform32(any::<u8>())) {
            if let Ok(f) = Frame::decode(&bytes) {
                // Whatever decodes re-encodes to a header that decodes the same.
                prop_assert_eq!(Frame::decode(&f.encode()), Ok(f));
            }
        }

        #[test]
        fn rndv_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = RndvInfo::decode(&bytes);
        }
    }
}
