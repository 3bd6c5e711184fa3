//! The frames a stream-like transport (TCP, UDP) has taken but not yet written out.
//!
//! A frame goes on the wire as `length (u32 LE) | header | payload`. Small payloads are copied
//! into the queued record; a large body stays where the caller keeps it while it is written
//! out, and is copied only when the send call returns with the frame still queued and the
//! caller gave no token to be told when it is sent (the contract lends such bodies only for the
//! call; see `Transport::try_send`).

use std::collections::VecDeque;

use crate::transport::{Sent, Token, HEADER_LEN};

/// Bytes before a frame's payload: its length and its header.
pub const PREFIX: usize = 4 + HEADER_LEN;
/// Payloads up to this size travel inside the queued record, beside the header.
pub const INLINE_SMALL: usize = 28;

/// One queued frame.
pub struct Out {
    /// The prefix, and the payload when it is inline.
    pub head: [u8; PREFIX + INLINE_SMALL],
    pub head_len: usize,
    /// The rest of the payload: the caller's memory, or `owned`.
    pub body: *const u8,
    pub body_len: usize,
    /// The payload, when it had to be copied (never moves: the vector's heap buffer stays put
    /// when the record moves into the queue).
    pub owned: Option<Vec<u8>>,
    /// Bytes of the frame already written (or put in datagrams).
    pub off: usize,
    pub token: Token,
}

impl Out {
    /// A frame of header `hdr` whose payload is `small` followed by `body`: `small` inline when
    /// it fits (the body lent), else both copied.
    pub fn new(hdr: &[u8; HEADER_LEN], small: &[u8], body: &[u8], token: Token) -> Out {
        let mut head = [0u8; PREFIX + INLINE_SMALL];
        let plen = small.len() + body.len();
        head[..4].copy_from_slice(&(plen as u32).to_le_bytes());
        head[4..PREFIX].copy_from_slice(hdr);
        let (head_len, owned) = if small.len() <= INLINE_SMALL {
            head[PREFIX..PREFIX + small.len()].copy_from_slice(small);
            (PREFIX + small.len(), None)
        } else {
            let mut v = small.to_vec();
            v.extend_from_slice(body);
            (PREFIX, Some(v))
        };
        let (body, body_len) = match &owned {
            Some(v) => (v.as_ptr(), v.len()),
            None => (body.as_ptr(), body.len()),
        };
        Out {
            head,
            head_len,
            body,
            body_len,
            owned,
            off: 0,
            token,
        }
    }

    /// Bytes of the whole frame.
    pub fn total(&self) -> usize {
        self.head_len + self.body_len
    }
}

/// The answer of a send call that queued a frame with `token` at the back of `out` and tried
/// to write: `Done` when the queue emptied (the frame is out; its token, already reported in
/// `done` by the write, is taken back since the caller learns it from the return value), `Done`
/// as well for a frame without a token still queued (its lent body is copied now), else
/// `Pending` (the token comes through `done` later).
pub fn settle(out: &mut VecDeque<Out>, done: &mut Vec<Token>, token: Token) -> Sent {
    if out.is_empty() {
        if token != Token::NONE {
            if let Some(i) = done.iter().rposition(|t| *t == token) {
                done.swap_remove(i);
            }
        }
        return Sent::Done;
    }
    if token == Token::NONE {
        let o = out.back_mut().expect("queued frame");
        if o.owned.is_none() && o.body_len > 0 {
            // SAFETY: body is the caller's slice, alive for the duration of the send call
            // that is returning now.
            let v = unsafe { std::slice::from_raw_parts(o.body, o.body_len) }.to_vec();
            o.body = v.as_ptr();
            o.owned = Some(v);
        }
        return Sent::Done;
    }
    Sent::Pending
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_payloads_inline_large_ones_lent_or_copied() {
        let hdr = [7u8; HEADER_LEN];
        let o = Out::new(&hdr, &[1, 2, 3], &[9; 100], Token::NONE);
        assert_eq!(o.head_len, PREFIX + 3);
        assert_eq!(&o.head[..4], &103u32.to_le_bytes());
        assert_eq!(&o.head[4..PREFIX], &hdr);
        assert!(o.owned.is_none() && o.body_len == 100);
        let big = vec![5u8; INLINE_SMALL + 1];
        let o = Out::new(&hdr, &big, &[6; 10], Token::NONE);
        assert_eq!((o.head_len, o.body_len), (PREFIX, INLINE_SMALL + 11));
        assert_eq!(o.owned.as_ref().unwrap()[INLINE_SMALL + 1], 6);
        assert_eq!(o.total(), PREFIX + INLINE_SMALL + 11);
    }

    #[test]
    fn settle_copies_a_lent_body_left_queued() {
        let hdr = [0u8; HEADER_LEN];
        let body = vec![3u8; 64];
        let mut q = VecDeque::new();
        q.push_back(Out::new(&hdr, &[], &body, Token::NONE));
        let mut done = Vec::new();
        assert!(matches!(settle(&mut q, &mut done, Token::NONE), Sent::Done));
        let o = q.back().unwrap();
        assert!(o.owned.is_some() && o.body != body.as_ptr());
    }

    #[test]
    fn settle_takes_back_the_token_of_a_frame_written_out() {
        let t = Token(5);
        let mut done = vec![Token(4), t];
        let mut q = VecDeque::new();
        assert!(matches!(settle(&mut q, &mut done, t), Sent::Done));
        assert_eq!(done, vec![Token(4)]);
        q.push_back(Out::new(&[0; HEADER_LEN], &[], &[1; 8], t));
        assert!(matches!(settle(&mut q, &mut done, t), Sent::Pending));
    }
}
