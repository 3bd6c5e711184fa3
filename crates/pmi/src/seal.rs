//! Sealed frames: what an authenticated connection carries once its handshake is done. Used by
//! the proxy channel (`protean_launcher::channel`, mpirun and its proxies) and by the name
//! server's connections ([`crate::names`]); kept here because both link this crate.
//!
//! A frame on the wire is `length (u32 BE) | ciphertext`, the ciphertext being the plaintext
//! sealed with ChaCha20-Poly1305 (its 16-byte tag included) under the sending direction's key,
//! with the count of frames sent before it in that direction as the nonce. Each direction has a
//! key of its own (derived by the handshake from the shared secret and both sides' nonces), so
//! a frame cannot be read, forged, replayed, reordered or reflected back to its sender: any of
//! those fails to open. A frame that fails to open ends the connection (the counters are then
//! out of step for good). An announced length beyond the connection's maximum is an error
//! before anything is allocated for it.

use std::io::{self, Read};

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};

/// Bytes the seal adds to a plaintext (the Poly1305 tag).
pub const TAG_LEN: usize = 16;

/// Seals outgoing and opens incoming frames of one connection.
pub struct Session {
    tx: ChaCha20Poly1305,
    rx: ChaCha20Poly1305,
    tx_count: u64,
    rx_count: u64,
    /// Largest ciphertext (plaintext plus tag) accepted.
    max_frame: usize,
    /// Bytes received and not yet a whole frame (for [`Session::push`]).
    inbuf: Vec<u8>,
}

impl std::fmt::Debug for Session {
    /// The counters only, never the keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Session(sent {}, received {})",
            self.tx_count, self.rx_count
        )
    }
}

fn counter_nonce(n: u64) -> Nonce {
    let mut b = [0u8; 12];
    b[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::from(b)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Session {
    /// Keys for what this end sends and receives; incoming frames of at most `max_frame` bytes
    /// (ciphertext, tag included).
    pub fn new(tx_key: &[u8; 32], rx_key: &[u8; 32], max_frame: usize) -> Session {
        Session {
            tx: ChaCha20Poly1305::new(tx_key.into()),
            rx: ChaCha20Poly1305::new(rx_key.into()),
            tx_count: 0,
            rx_count: 0,
            max_frame,
            inbuf: Vec::new(),
        }
    }

    /// A sealed frame, length included, ready to be written.
    pub fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        let ct = self
            .tx
            .encrypt(&counter_nonce(self.tx_count), plain)
            .expect("ChaCha20-Poly1305 seals any length below 256 GiB");
        self.tx_count += 1;
        let mut out = Vec::with_capacity(4 + ct.len());
        out.extend_from_slice(&(ct.len() as u32).to_be_bytes());
        out.extend_from_slice(&ct);
        out
    }

    /// The ciphertext length a frame header announces, or an error when it is out of bounds.
    pub fn frame_len(&self, header: [u8; 4]) -> io::Result<usize> {
        let len = u32::from_be_bytes(header) as usize;
        if !(TAG_LEN..=self.max_frame).contains(&len) {
            return Err(invalid(format!(
                "frame of {len} bytes announced (at most {})",
                self.max_frame
            )));
        }
        Ok(len)
    }

    /// Opens the next incoming ciphertext (the frame after its length).
    pub fn open(&mut self, ct: &[u8]) -> io::Result<Vec<u8>> {
        let opened = self.rx.decrypt(&counter_nonce(self.rx_count), ct);
        self.rx_count += 1;
        opened.map_err(|_| {
            invalid("a frame failed authentication (forged, replayed, reordered or damaged)".into())
        })
    }

    /// Adds received bytes (for event loops; see [`Session::next_frame`]).
    pub fn push(&mut self, bytes: &[u8]) {
        self.inbuf.extend_from_slice(bytes);
    }

    /// The next opened frame of the pushed bytes: None until one is whole; an error when the
    /// length is out of bounds or the frame does not open.
    pub fn next_frame(&mut self) -> Option<io::Result<Vec<u8>>> {
        if self.inbuf.len() < 4 {
            return None;
        }
        let len = match self.frame_len(self.inbuf[..4].try_into().expect("4 bytes")) {
            Ok(len) => len,
            Err(e) => return Some(Err(e)),
        };
        if self.inbuf.len() < 4 + len {
            return None;
        }
        let ct: Vec<u8> = self.inbuf.drain(..4 + len).skip(4).collect();
        Some(self.open(&ct))
    }

    /// Reads and opens one frame from a blocking stream. The error kind tells a closed
    /// connection (UnexpectedEof, nothing read: Ok(None)) from a cut frame or a bad one.
    pub fn read_frame(&mut self, r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
        let mut header = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match r.read(&mut header[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = self.frame_len(header)?;
        let mut ct = vec![0u8; len];
        r.read_exact(&mut ct)?;
        self.open(&ct).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(max: usize) -> (Session, Session) {
        let (k1, k2) = ([1u8; 32], [2u8; 32]);
        (Session::new(&k1, &k2, max), Session::new(&k2, &k1, max))
    }

    #[test]
    fn frames_go_both_ways_pushed_or_read() {
        let (mut a, mut b) = pair(1 << 20);
        for msg in [&b"hello"[..], b"", &[7u8; 70000][..]] {
            let f = a.seal(msg);
            b.push(&f[..3]);
            assert!(b.next_frame().is_none());
            b.push(&f[3..]);
            assert_eq!(b.next_frame().unwrap().unwrap(), msg);
            let f = b.seal(msg);
            assert_eq!(a.read_frame(&mut &f[..]).unwrap().unwrap(), msg);
        }
        assert!(a.read_frame(&mut &b""[..]).unwrap().is_none());
        let f = b.seal(b"cut");
        assert!(a.read_frame(&mut &f[..6]).is_err());
    }

    #[test]
    fn forged_replayed_reflected_and_huge_frames_fail() {
        let (mut a, mut b) = pair(100);
        let f = a.seal(b"one");
        let mut bad = f.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(b.read_frame(&mut &bad[..]).is_err());
        let (mut a, mut b) = pair(100);
        let f = a.seal(b"one");
        assert!(b.read_frame(&mut &f[..]).unwrap().is_some());
        // Replayed.
        assert!(b.read_frame(&mut &f[..]).is_err());
        // Reflected: a's own frame back to a.
        let (mut a, _) = pair(100);
        let f = a.seal(b"one");
        assert!(a.read_frame(&mut &f[..]).is_err());
        // Reordered.
        let (mut a, mut b) = pair(100);
        let (f1, f2) = (a.seal(b"1"), a.seal(b"2"));
        assert!(b.read_frame(&mut &f2[..]).is_err());
        let _ = f1;
        // Beyond the maximum, refused from the header alone.
        let (_, mut b) = pair(100);
        assert!(b.read_frame(&mut &[0, 0, 0, 101][..]).is_err());
        b.push(&[0xff; 4]);
        assert!(b.next_frame().unwrap().is_err());
        assert!(b.frame_len([0, 0, 0, 15]).is_err());
    }
}
