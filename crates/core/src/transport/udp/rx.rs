//! Frames out of a peer's datagrams, put back in order by the reliability machine.
//!
//! A sender writes its frames to a peer as one stream of bytes, `payload_len: u32` (little
//! endian), the 32-byte frame header, the payload, and cuts the stream into datagrams of at
//! most the datagram size (several small frames share a datagram; a large one spans many).
//! The receiver gets each peer's datagrams in order ([`Rx::feed`] on each one's data) and:
//! - delivers a frame that lies whole inside one datagram in place, without a copy;
//! - asks the protocol layer where a large payload goes when its header has come and the
//!   rest has not ([`FrameSink::place`]), and copies each later piece straight there;
//! - otherwise gathers the frame in a buffer that grows as its bytes come (never sized by
//!   the length a header claims), and delivers it whole.
//!
//! A length above the receiver's frame limit is a protocol error: the peer is lost with the
//! reason. Parsing never panics (fuzzed in `fuzz/`).

use crate::mem::Span;
use crate::transport::{FrameSink, Gpid, HEADER_LEN};

/// Bytes before a frame's payload in the stream.
pub use crate::transport::outq::PREFIX;

/// Payloads at least this large that span datagrams are offered for direct placement.
pub const PLACE_MIN: usize = 16 * 1024;

/// Where the stream from one peer is.
#[derive(Default)]
pub enum Rx {
    /// Between frames, or inside a frame's length and header (`got` bytes of it).
    #[default]
    Idle,
    Head {
        buf: [u8; PREFIX],
        got: usize,
    },
    /// Gathering a payload in a buffer.
    Gather {
        hdr: [u8; HEADER_LEN],
        len: usize,
        data: Vec<u8>,
    },
    /// Copying a payload to where the protocol layer placed it.
    Direct {
        hdr: [u8; HEADER_LEN],
        to: Span,
        got: usize,
    },
}

fn len_of(prefix: &[u8]) -> usize {
    u32::from_le_bytes(prefix[..4].try_into().expect("4 bytes")) as usize
}

impl Rx {
    /// The data of the next datagram from `from`. Returns the frames delivered, or why the
    /// stream is broken.
    pub fn feed<S: FrameSink>(
        &mut self,
        from: Gpid,
        mut data: &[u8],
        sink: &mut S,
        frame_max: usize,
    ) -> Result<usize, String> {
        let mut delivered = 0;
        while !data.is_empty() {
            match self {
                Rx::Idle => {
                    if data.len() < PREFIX {
                        let mut buf = [0u8; PREFIX];
                        buf[..data.len()].copy_from_slice(data);
                        *self = Rx::Head {
                            buf,
                            got: data.len(),
                        };
                        return Ok(delivered);
                    }
                    let len = len_of(data);
                    check(len, frame_max)?;
                    let hdr: &[u8; HEADER_LEN] = data[4..PREFIX].try_into().expect("header");
                    if data.len() >= PREFIX + len {
                        sink.on_frame(from, hdr, &data[PREFIX..PREFIX + len]);
                        delivered += 1;
                        data = &data[PREFIX + len..];
                        continue;
                    }
                    let hdr = *hdr;
                    self.start(from, hdr, len, sink);
                    data = &data[PREFIX..];
                }
                Rx::Head { buf, got } => {
                    let n = (PREFIX - *got).min(data.len());
                    buf[*got..*got + n].copy_from_slice(&data[..n]);
                    *got += n;
                    data = &data[n..];
                    if *got < PREFIX {
                        return Ok(delivered);
                    }
                    let len = len_of(&buf[..]);
                    check(len, frame_max)?;
                    let hdr: [u8; HEADER_LEN] = buf[4..].try_into().expect("header");
                    if len == 0 {
                        *self = Rx::Idle;
                        sink.on_frame(from, &hdr, &[]);
                        delivered += 1;
                        continue;
                    }
                    self.start(from, hdr, len, sink);
                }
                Rx::Gather {
                    hdr,
                    len,
                    data: buf,
                } => {
                    let n = (*len - buf.len()).min(data.len());
                    buf.extend_from_slice(&data[..n]);
                    data = &data[n..];
                    if buf.len() == *len {
                        let (hdr, buf) = (*hdr, std::mem::take(buf));
                        *self = Rx::Idle;
                        sink.on_frame(from, &hdr, &buf);
                        delivered += 1;
                    }
                }
                Rx::Direct { hdr, to, got } => {
                    let n = (to.len() - *got).min(data.len());
                    let dst = to.sub(*got, n).expect("inside the placement");
                    dst.write(&data[..n]);
                    *got += n;
                    data = &data[n..];
                    if *got == to.len() {
                        let (hdr, len) = (*hdr, to.len());
                        *self = Rx::Idle;
                        sink.placed(from, &hdr, len);
                        delivered += 1;
                    }
                }
            }
        }
        Ok(delivered)
    }

    /// A frame of `len` bytes whose payload is still to come (`len` > 0): place it or gather it.
    fn start<S: FrameSink>(&mut self, from: Gpid, hdr: [u8; HEADER_LEN], len: usize, sink: &mut S) {
        if len >= PLACE_MIN {
            if let Some(pl) = sink.place(from, &hdr, len) {
                if pl.to.len() == len {
                    *self = Rx::Direct {
                        hdr,
                        to: pl.to,
                        got: 0,
                    };
                    return;
                }
            }
        }
        *self = Rx::Gather {
            hdr,
            len,
            data: Vec::with_capacity(len.min(64 * 1024)),
        };
    }

    /// In the middle of a frame.
    pub fn partial(&self) -> bool {
        !matches!(self, Rx::Idle)
    }
}

fn check(len: usize, frame_max: usize) -> Result<(), String> {
    if len > frame_max {
        return Err(format!(
            "malformed UDP stream: a frame of {len} bytes, above the limit of {frame_max}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Await, Placement};

    #[derive(Default)]
    struct Sink {
        frames: Vec<([u8; HEADER_LEN], Vec<u8>)>,
        place: Option<Vec<u8>>,
        placed: Vec<usize>,
    }

    impl FrameSink for Sink {
        fn on_frame(&mut self, _from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            self.frames.push((*hdr, payload.to_vec()));
        }
        fn place(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], len: usize) -> Option<Placement> {
            let b = self.place.as_mut()?;
            b.resize(len, 0);
            Some(Placement {
                // SAFETY: the test's buffer outlives the transfer and nothing else touches it.
                to: unsafe { Span::new(b.as_mut_ptr(), len) },
                wait: Await::AsItComes,
            })
        }
        fn placed(&mut self, _from: Gpid, _hdr: &[u8; HEADER_LEN], len: usize) {
            self.placed.push(len);
        }
    }

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_le_bytes().to_vec();
        let mut h = [0u8; HEADER_LEN];
        h[0] = kind;
        v.extend_from_slice(&h);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn frames_come_whole_however_the_stream_is_cut() {
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut stream = frame(1, b"small");
        stream.extend(frame(2, &[]));
        stream.extend(frame(3, &big));
        stream.extend(frame(4, &big[..3000]));
        stream.extend(frame(5, b"last"));
        for cut in [1, 7, 35, 36, 37, 1000, 1472, 65_000, 1 << 20] {
            for placing in [false, true] {
                let mut rx = Rx::Idle;
                let mut sink = Sink {
                    place: placing.then(Vec::new),
                    ..Sink::default()
                };
                for piece in stream.chunks(cut) {
                    rx.feed(Gpid::new(0), piece, &mut sink, 1 << 20).unwrap();
                }
                assert!(!rx.partial());
                let kinds: Vec<u8> = sink.frames.iter().map(|f| f.0[0]).collect();
                if placing && cut < big.len() + PREFIX {
                    assert_eq!(kinds, [1, 2, 4, 5], "cut {cut}");
                    assert_eq!(sink.placed, [big.len()]);
                    assert_eq!(sink.place.as_deref(), Some(&big[..]));
                } else {
                    assert_eq!(kinds, [1, 2, 3, 4, 5], "cut {cut}");
                    assert_eq!(sink.frames[2].1, big);
                }
                assert_eq!(sink.frames[0].1, b"small");
                assert_eq!(sink.frames.last().unwrap().1, b"last");
            }
        }
    }

    #[test]
    fn a_frame_above_the_limit_breaks_the_stream() {
        let mut rx = Rx::Idle;
        let mut sink = Sink::default();
        let f = frame(1, &[0u8; 100]);
        assert!(rx.feed(Gpid::new(0), &f, &mut sink, 99).is_err());
        let mut rx = Rx::Idle;
        assert!(rx.feed(Gpid::new(0), &f[..10], &mut sink, 99).is_ok());
        assert!(rx.feed(Gpid::new(0), &f[10..], &mut sink, 99).is_err());
        assert!(sink.frames.is_empty());
    }
}
