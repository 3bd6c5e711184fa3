//! The self transport: frames a process sends to itself, delivered at its next progress pass.
//!
//! The smallest complete transport (the stub of the contract in `transport/mod.rs`): reliable,
//! ordered, any payload size, and direct copies within the own address space, so a
//! rendezvous message to oneself moves with one `memcpy` from the send buffer.

use std::collections::VecDeque;

use super::{
    Caps, Copied, CopyError, FrameSink, Gpid, Region, SendError, Sent, Span, Token, Transport,
    HEADER_LEN,
};

/// Frames to our own process.
pub struct SelfLoop {
    me: Gpid,
    queue: VecDeque<([u8; HEADER_LEN], Vec<u8>)>,
}

/// Largest payload of one frame to ourselves.
pub const MAX_PAYLOAD: usize = 1 << 30;

/// A region of our own memory: address and length.
fn region(buf: Span) -> Region {
    let mut r = [0u8; super::REGION_LEN];
    r[..8].copy_from_slice(&(buf.ptr() as u64).to_le_bytes());
    r[8..16].copy_from_slice(&(buf.len() as u64).to_le_bytes());
    Region(r)
}

/// The span a region of ours describes, checked against `offset..offset + n`.
fn span_of(r: &Region, offset: usize, n: usize) -> Result<Span, CopyError> {
    let addr = u64::from_le_bytes(r.0[..8].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(r.0[8..16].try_into().expect("8 bytes"));
    if addr == 0 {
        return Err(CopyError::BadRegion);
    }
    // SAFETY: we exposed this region (it names our own memory, which the protocol layer keeps
    // valid until it retracts the region: Span's contract); `sub` checks the range.
    unsafe { Span::new(addr as *mut u8, len as usize) }
        .sub(offset, n)
        .ok_or(CopyError::BadRegion)
}

impl SelfLoop {
    pub fn new(me: Gpid) -> SelfLoop {
        SelfLoop {
            me,
            queue: VecDeque::new(),
        }
    }
}

impl Transport for SelfLoop {
    fn name(&self) -> &'static str {
        "self"
    }

    fn reaches(&self, peer: Gpid) -> bool {
        peer == self.me
    }

    fn caps(&self, peer: Gpid) -> Caps {
        if peer != self.me {
            return Caps::NONE;
        }
        Caps {
            reliable: true,
            ordered: true,
            max_payload: MAX_PAYLOAD,
            lanes: 1,
            get: true,
            put: true,
            queues: false,
        }
    }

    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        _token: Token,
    ) -> Result<Sent, SendError> {
        if peer != self.me {
            return Err(SendError::Failed(format!(
                "the self transport does not reach process {peer}"
            )));
        }
        let mut v = Vec::with_capacity(small.len() + body.len());
        v.extend_from_slice(small);
        v.extend_from_slice(body);
        self.queue.push_back((*hdr, v));
        Ok(Sent::Done)
    }

    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        while let Some((h, p)) = self.queue.pop_front() {
            sink.on_frame(self.me, &h, &p);
            n += 1;
        }
        n
    }

    fn has_work(&self) -> bool {
        !self.queue.is_empty()
    }

    fn expose(&mut self, peer: Gpid, buf: Span) -> Option<Region> {
        (peer == self.me && !buf.ptr().is_null()).then(|| region(buf))
    }

    fn get(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        _token: Token,
    ) -> Result<Copied, CopyError> {
        if peer != self.me {
            return Err(CopyError::BadRegion);
        }
        let src = span_of(region, offset, dst.len())?;
        if !dst.is_empty() {
            // SAFETY: both spans are valid for their length (Span's contract); they overlap
            // only in an erroneous program, which `copy` tolerates.
            unsafe { crate::mem::copy_overlap(src.ptr(), dst.ptr(), dst.len()) };
        }
        Ok(Copied::Done)
    }

    fn put(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        src: Span,
        _token: Token,
    ) -> Result<Copied, CopyError> {
        if peer != self.me {
            return Err(CopyError::BadRegion);
        }
        let dst = span_of(region, offset, src.len())?;
        if !src.is_empty() {
            // SAFETY: as in `get`, with the roles of the two spans swapped.
            unsafe { crate::mem::copy_overlap(src.ptr(), dst.ptr(), src.len()) };
        }
        Ok(Copied::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sink(Vec<(Gpid, Vec<u8>)>);
    impl FrameSink for Sink {
        fn on_frame(&mut self, from: Gpid, _hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            self.0.push((from, payload.to_vec()));
        }
    }

    #[test]
    fn frames_come_back_in_order_at_the_next_pass() {
        let mut t = SelfLoop::new(Gpid::new(3));
        assert!(t.reaches(Gpid::new(3)) && !t.reaches(Gpid::new(2)));
        let h = [1u8; HEADER_LEN];
        t.send(Gpid::new(3), &h, b"ab", b"cd", Token::NONE).unwrap();
        t.send(Gpid::new(3), &h, b"", b"e", Token::NONE).unwrap();
        assert!(matches!(
            t.send(Gpid::new(2), &h, b"", b"", Token::NONE),
            Err(SendError::Failed(_))
        ));
        assert!(t.has_work());
        let mut s = Sink(Vec::new());
        assert_eq!(t.progress(&mut s), 2);
        assert_eq!(
            s.0,
            vec![
                (Gpid::new(3), b"abcd".to_vec()),
                (Gpid::new(3), b"e".to_vec())
            ]
        );
        assert!(!t.has_work());
    }

    #[test]
    fn direct_copies_stay_inside_the_region() {
        let mut t = SelfLoop::new(Gpid::new(0));
        let src = *b"0123456789";
        let r = t.expose(Gpid::new(0), unsafe { Span::of(&src) }).unwrap();
        let mut dst = [0u8; 4];
        let d = unsafe { Span::new(dst.as_mut_ptr(), 4) };
        assert_eq!(t.get(Gpid::new(0), &r, 3, d, Token::NONE), Ok(Copied::Done));
        assert_eq!(&dst, b"3456");
        assert_eq!(
            t.get(Gpid::new(0), &r, 8, d, Token::NONE),
            Err(CopyError::BadRegion)
        );
        assert_eq!(
            t.get(Gpid::new(0), &Region::NONE, 0, d, Token::NONE),
            Err(CopyError::BadRegion)
        );
        let mut target = [0u8; 6];
        let r = t
            .expose(Gpid::new(0), unsafe { Span::new(target.as_mut_ptr(), 6) })
            .unwrap();
        t.put(
            Gpid::new(0),
            &r,
            1,
            unsafe { Span::of(b"xyz") },
            Token::NONE,
        )
        .unwrap();
        assert_eq!(&target, b"\0xyz\0\0");
    }
}
