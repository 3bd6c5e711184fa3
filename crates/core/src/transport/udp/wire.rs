//! The datagram's outer header, and the authentication every datagram carries.
//!
//! ```text
//!  0  magic  u32  "PUD1"
//!  4  src    u32  sending process (gpid)
//!  8  dst    u32  receiving process
//! 12  kind   u8   1: data, 2: an acknowledgement alone
//! 13  flags  u8   bit 0 ([`FLAG_CLEAR`]): the payload is in clear and the tag covers the
//!                 headers only (loopback, see below); the other bits are zero
//! 14  len    u16  with [`FLAG_CLEAR`]: the payload's length in bytes (so that the tag covers
//!                 it); zero otherwise (the sealed payload's length is part of its tag)
//! 16  pn     u64  the sender's datagram number: every datagram a process sends, to any peer,
//!                 first transmissions and acknowledgements, has its own, from 1
//! 24  the reliability header (proto::reliable, its own length)
//!     the payload: a piece of the sender's stream of frames to dst (encrypted)
//!     tag    [u8; 16]
//! ```
//! All integers little endian.
//!
//! # What the authentication protects against
//!
//! A UDP socket takes datagrams from anyone who can reach its address, with any source address
//! they like. Every datagram is sealed with AES-256-GCM under a key only its two processes
//! (or, under the shared scheme, the job's processes) hold: derived from the key of the pair,
//! as for TCP's handshake (`runtime::keys`: the job's key, or the pair's own X25519-derived
//! key); the transport makes one [`Seal`] per peer when it first needs it and keeps it. The
//! headers are authenticated, the payload is authenticated and encrypted. The nonce is the
//! sender's gpid and its datagram number, so no two datagrams under one key share one (a
//! retransmission is the same datagram, byte for byte, sent again). A receiver trusts nothing before the tag
//! checks, and never trusts the source address (it answers the address in the peer's card;
//! it checks the source of a datagram in clear, below, only to refuse more).
//! So a process outside the job cannot:
//! - inject a datagram, or forge one that claims to come from a process of the job (it fails
//!   the tag, is dropped and counted; it never touches a peer's state);
//! - alter a datagram of the job in flight, or redirect it to another process (the tag
//!   covers source, destination and every header field);
//! - replay one: a replayed datagram is authentic, but its sequence number has been seen, so
//!   the reliability machine drops it as a duplicate, and what its header says is old and
//!   true, so it changes nothing there either (`proto::reliable`);
//! - read the payload.
//!
//! # In clear on loopback (`udp_seal=auto`)
//!
//! Sealing every byte costs what the kernel's copy of it costs several times over (AES-GCM
//! runs at 4-6 GB/s on the development machine, where TCP moves 5 GB/s over loopback), so a
//! job whose processes all sit on one host (the sockets bind loopback) sends its payloads in
//! clear, as TCP does, and the tag covers the outer and reliability headers only
//! ([`FLAG_CLEAR`]; about 0.1 us a datagram): everything the transport and the reliability
//! machine act on (source, destination, datagram number, sequence numbers, acknowledgements,
//! selective acknowledgements, the receiver's limit, and the payload's length, `len`), but not
//! the stream's bytes themselves (frame lengths and frame headers travel in the payload, as
//! on TCP, which carries no per-frame MAC either). A receiver accepts such a datagram only when it
//! binds loopback itself and the datagram comes from one of the sending peer's sockets
//! (its card's addresses; `Udp`'s receive path checks the source the kernel reports). What
//! this keeps: a process of another user still cannot inject a datagram or forge one's
//! headers (no key), nor send from a peer's port (the peer holds it; binding it again is
//! refused) nor read loopback traffic, so it cannot replay a genuine header with another
//! payload either. What it gives up is what only root can do on loopback (read the traffic,
//! or alter a datagram in flight), and root can read the processes' memory anyway. Across
//! hosts, and with `udp_seal=full`, every payload is encrypted and authenticated as above.
//!
//! It can still flood the socket (each bogus datagram costs a header check and at most one
//! tag check, allocates nothing, and is counted), or drop and delay datagrams on the path,
//! which the reliability machine repairs like any loss. Processes of the job are trusted.
//!
//! AES-GCM rather than a keyed hash over the datagram because it is the cheapest
//! authentication here by far: with the processor's AES and carry-less multiply vector
//! instructions, `ring` seals 64 KiB at about 9 GB/s (encrypting it in the same pass), against
//! 3-5 GB/s for a BLAKE3 keyed hash, 1.2 GB/s for HMAC-SHA256 and 1.9 GB/s for GMAC over
//! associated data alone (measured on the development machine); a small datagram costs
//! about 0.1 us either way.

use crate::ids::Gpid;
use hmac::{Hmac, Mac};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use sha2::Sha256;

/// "PUD1" in memory order.
pub const MAGIC: u32 = u32::from_le_bytes(*b"PUD1");
/// Bytes of the outer header.
pub const OUTER_LEN: usize = 24;
/// Bytes of the authentication tag.
pub const TAG_LEN: usize = 16;

pub const KIND_DATA: u8 = 1;
pub const KIND_ACK: u8 = 2;

/// Flag of the outer header: the payload is in clear, the tag covers the headers only.
pub const FLAG_CLEAR: u8 = 1;

/// Why a datagram is refused before (or at) its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Short,
    BadMagic,
    BadField,
    /// Not addressed to us, or from a process outside the job, or from ourselves.
    Stranger,
    /// In clear where this process accepts only sealed datagrams, or from an address that is
    /// not the sending peer's.
    Clear,
    /// The tag does not check: not from the job, or altered.
    BadTag,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::Short => "a datagram too short to be ours",
            Refused::BadMagic => "not a Protean datagram",
            Refused::BadField => "a malformed datagram header",
            Refused::Stranger => "a datagram naming a process outside the job",
            Refused::Clear => {
                "a datagram in clear from an address not the sender's, or where only sealed ones are accepted"
            }
            Refused::BadTag => "a datagram that fails authentication",
        })
    }
}

/// The outer header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    pub src: Gpid,
    pub dst: Gpid,
    pub kind: u8,
    /// The payload is in clear ([`FLAG_CLEAR`]).
    pub clear: bool,
    pub pn: u64,
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

impl Outer {
    /// The first [`OUTER_LEN`] bytes of a datagram.
    pub fn encode(&self) -> [u8; OUTER_LEN] {
        let mut b = [0u8; OUTER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.src.get().to_le_bytes());
        b[8..12].copy_from_slice(&self.dst.get().to_le_bytes());
        b[12] = self.kind;
        b[13] = if self.clear { FLAG_CLEAR } else { 0 };
        b[16..24].copy_from_slice(&self.pn.to_le_bytes());
        b
    }

    /// Read and check the outer header of a datagram that must also hold a reliability
    /// header of `rel_len` bytes and a tag. Never panics.
    pub fn decode(b: &[u8], rel_len: usize) -> Result<Outer, Refused> {
        if b.len() < OUTER_LEN + rel_len + TAG_LEN {
            return Err(Refused::Short);
        }
        if u32_at(b, 0) != MAGIC {
            return Err(Refused::BadMagic);
        }
        let o = Outer {
            src: Gpid::new(u32_at(b, 4)),
            dst: Gpid::new(u32_at(b, 8)),
            kind: b[12],
            clear: b[13] & FLAG_CLEAR != 0,
            pn: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        };
        let len = u16::from_le_bytes([b[14], b[15]]) as usize;
        let want = if o.clear {
            b.len() - OUTER_LEN - rel_len - TAG_LEN
        } else {
            0
        };
        if b[13] & !FLAG_CLEAR != 0
            || len != want
            || !matches!(o.kind, KIND_DATA | KIND_ACK)
            || o.pn == 0
        {
            return Err(Refused::BadField);
        }
        if o.kind == KIND_ACK && b.len() != OUTER_LEN + rel_len + TAG_LEN {
            return Err(Refused::BadField);
        }
        Ok(o)
    }
}

/// The datagram key of a pair of processes (of the job, under the shared scheme).
pub struct Seal {
    key: LessSafeKey,
}

const LABEL: &[u8] = b"protean udp datagrams v1, aes-256-gcm";

fn nonce(src: Gpid, pn: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&src.get().to_le_bytes());
    n[4..].copy_from_slice(&pn.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

impl Seal {
    /// The datagram key for the pair key (or job key) `job_key` (HMAC-SHA256 of a label under
    /// it, so that it is used for nothing else).
    pub fn new(job_key: &[u8; 32]) -> Seal {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(job_key).expect("any key length");
        m.update(LABEL);
        let k = m.finalize().into_bytes();
        Seal {
            key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k).expect("a 32-byte key")),
        }
    }

    /// Seal `d`: its first `head` bytes (outer and reliability headers) are authenticated,
    /// the bytes after them up to the last [`TAG_LEN`] encrypted (left in clear, and not
    /// covered, when the outer header says [`FLAG_CLEAR`]), and the tag written into those
    /// last bytes. The outer header must be in place (its source and number make the nonce,
    /// its flags say how to seal; in clear, the payload's length is written into it first).
    pub fn seal(&self, d: &mut [u8], head: usize) {
        let o = (
            Gpid::new(u32_at(d, 4)),
            u64::from_le_bytes(d[16..24].try_into().expect("8")),
        );
        let clear = d[13] & FLAG_CLEAR != 0;
        let end = d.len() - TAG_LEN;
        if clear {
            let len = u16::try_from(end - head).expect("a datagram's payload fits 16 bits");
            d[14..16].copy_from_slice(&len.to_le_bytes());
        }
        let (aad, rest) = d.split_at_mut(head);
        let (body, tag_out) = rest.split_at_mut(end - head);
        let body = if clear { &mut body[..0] } else { body };
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(o.0, o.1), Aad::from(&*aad), body)
            .expect("a datagram is far below AES-GCM's length limit");
        tag_out.copy_from_slice(tag.as_ref());
    }

    /// Check and decrypt a datagram whose outer header `o` was decoded: Ok when its tag
    /// checks (its payload is then decrypted in place, or was in clear), Err when it does not.
    /// Whether a datagram in clear may be taken at all is the caller's to judge.
    pub fn open(&self, o: &Outer, d: &mut [u8], head: usize) -> Result<(), Refused> {
        if d.len() < head + TAG_LEN {
            return Err(Refused::Short);
        }
        let (aad, rest) = d.split_at_mut(head);
        if o.clear {
            let tag: [u8; TAG_LEN] = rest[rest.len() - TAG_LEN..].try_into().expect("tag");
            return self
                .key
                .open_in_place_separate_tag(
                    nonce(o.src, o.pn),
                    Aad::from(&*aad),
                    Tag::from(tag),
                    &mut [],
                    0..,
                )
                .map(|_| ())
                .map_err(|_| Refused::BadTag);
        }
        self.key
            .open_in_place(nonce(o.src, o.pn), Aad::from(&*aad), rest)
            .map(|_| ())
            .map_err(|_| Refused::BadTag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn datagram(seal: &Seal, payload: &[u8]) -> Vec<u8> {
        sealed(seal, payload, false)
    }

    fn sealed(seal: &Seal, payload: &[u8], clear: bool) -> Vec<u8> {
        let o = Outer {
            src: Gpid::new(3),
            dst: Gpid::new(5),
            kind: KIND_DATA,
            clear,
            pn: 42,
        };
        let mut d = o.encode().to_vec();
        d.extend_from_slice(&[7u8; 32]);
        d.extend_from_slice(payload);
        d.extend_from_slice(&[0u8; TAG_LEN]);
        seal.seal(&mut d, OUTER_LEN + 32);
        d
    }

    #[test]
    fn sealed_datagrams_open_and_tampering_fails() {
        let seal = Seal::new(&[9u8; 32]);
        let d = datagram(&seal, b"hello, peer");
        assert_ne!(
            &d[OUTER_LEN + 32..OUTER_LEN + 43],
            b"hello, peer",
            "encrypted"
        );
        let o = Outer::decode(&d, 32).unwrap();
        assert_eq!(
            (o.src, o.dst, o.kind, o.clear, o.pn),
            (Gpid::new(3), Gpid::new(5), KIND_DATA, false, 42)
        );
        let mut ok = d.clone();
        seal.open(&o, &mut ok, OUTER_LEN + 32).unwrap();
        assert_eq!(&ok[OUTER_LEN + 32..OUTER_LEN + 43], b"hello, peer");
        // Any bit flipped anywhere fails (headers, payload or tag), and so does another key.
        for i in 0..d.len() {
            let mut t = d.clone();
            t[i] ^= 0x10;
            let refused = match Outer::decode(&t, 32) {
                Ok(o) => seal.open(&o, &mut t, OUTER_LEN + 32).is_err(),
                Err(_) => true,
            };
            assert!(refused, "byte {i}");
        }
        let other = Seal::new(&[8u8; 32]);
        let mut t = d.clone();
        assert_eq!(other.open(&o, &mut t, OUTER_LEN + 32), Err(Refused::BadTag));
    }

    #[test]
    fn in_clear_the_headers_are_authenticated() {
        let seal = Seal::new(&[9u8; 32]);
        let d = sealed(&seal, b"hello, peer", true);
        assert_eq!(
            &d[OUTER_LEN + 32..OUTER_LEN + 43],
            b"hello, peer",
            "in clear"
        );
        let o = Outer::decode(&d, 32).unwrap();
        assert!(o.clear);
        let mut ok = d.clone();
        seal.open(&o, &mut ok, OUTER_LEN + 32).unwrap();
        assert_eq!(ok, d);
        // A bit flipped in the headers or the tag fails, and so does the flag taken away
        // (the same header sealed as a whole datagram); the payload is not covered.
        for i in (0..OUTER_LEN + 32).chain(d.len() - TAG_LEN..d.len()) {
            let mut t = d.clone();
            t[i] ^= 0x10;
            let refused = match Outer::decode(&t, 32) {
                Ok(o) => seal.open(&o, &mut t, OUTER_LEN + 32).is_err(),
                Err(_) => true,
            };
            assert!(refused, "byte {i}");
        }
        let mut t = d.clone();
        t[13] = 0;
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadField), "len left");
        t[14..16].fill(0);
        let o2 = Outer::decode(&t, 32).unwrap();
        assert_eq!(seal.open(&o2, &mut t, OUTER_LEN + 32), Err(Refused::BadTag));
        // The payload's length is covered: a payload cut short or made longer is refused,
        // also with the length field rewritten to match.
        let p = OUTER_LEN + 32;
        for cut in [0usize, 1, 11] {
            for grow in [0usize, 1, 7] {
                if cut == grow {
                    continue; // the same length: the payload is not covered
                }
                let mut t = d[..p + 11 - cut].to_vec();
                t.resize(t.len() + grow, b'x');
                t.extend_from_slice(&d[d.len() - TAG_LEN..]);
                assert_eq!(
                    Outer::decode(&t, 32),
                    Err(Refused::BadField),
                    "-{cut}+{grow}"
                );
                let len = (11 - cut + grow) as u16;
                t[14..16].copy_from_slice(&len.to_le_bytes());
                let o3 = Outer::decode(&t, 32).unwrap();
                assert_eq!(
                    seal.open(&o3, &mut t, p),
                    Err(Refused::BadTag),
                    "-{cut}+{grow}"
                );
            }
        }
        let other = Seal::new(&[8u8; 32]);
        let mut t = d.clone();
        assert_eq!(other.open(&o, &mut t, OUTER_LEN + 32), Err(Refused::BadTag));
    }

    #[test]
    fn outer_headers_are_checked() {
        let seal = Seal::new(&[1u8; 32]);
        let d = datagram(&seal, b"");
        assert_eq!(Outer::decode(&d[..10], 32), Err(Refused::Short));
        let mut t = d.clone();
        t[0] = b'X';
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadMagic));
        let mut t = d.clone();
        t[14] = 1;
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadField));
        let mut t = d.clone();
        t[13] = 2;
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadField));
        let mut t = d.clone();
        t[12] = 9;
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadField));
        let mut t = d.clone();
        t[16..24].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(Outer::decode(&t, 32), Err(Refused::BadField));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_never_open(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let seal = Seal::new(&[1u8; 32]);
            let mut b = b;
            if let Ok(o) = Outer::decode(&b, 32) {
                prop_assert!(seal.open(&o, &mut b, OUTER_LEN + 32).is_err());
            }
        }
    }
}
