//! The authenticated, encrypted channel between `mpirun` and a `protean-proxy`.
//!
//! Trust: `mpirun` draws a per-job secret of 32 random bytes and hands it to each proxy through
//! the launcher's standard input (ssh and srun forward it; it never appears on a command line or
//! in a file). The proxy connects to mpirun over TCP and both prove that they hold the secret
//! without sending it:
//!
//! ```text
//! proxy  -> mpirun  "PRTNPRX1" | host index (u32 BE) | nonce_p (32 bytes)
//! mpirun -> proxy   nonce_m (32) | HMAC-SHA256(secret, "mpirun" | jobid | index | nonce_p | nonce_m)
//! proxy  -> mpirun  HMAC-SHA256(secret, "proxy" | jobid | index | nonce_p | nonce_m)
//! ```
//!
//! Both nonces come from the kernel's random source, so an answer recorded from one connection
//! is worth nothing in another. After the hello every frame is `length (u32 BE) | ciphertext`
//! sealed with ChaCha20-Poly1305 under a key per direction (HMAC of the secret over the
//! direction's name and both nonces) and a counter nonce, so a frame cannot be read, forged,
//! replayed or reordered by anyone on the network. A frame that fails to open ends the channel.
//! The sealing itself is `protean_pmi::seal`, shared with the name server's connections.
//! Frames are at most [`MAX_FRAME`] bytes; a longer announced length is an error before anything
//! is allocated for it.

use std::io::{self, Read, Write};

use hmac::{Hmac, Mac};
pub use protean_pmi::seal::Session;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The first bytes a proxy sends.
pub const MAGIC: &[u8; 8] = b"PRTNPRX1";
/// Length of the proxy's hello: magic, host index, nonce.
pub const HELLO_LEN: usize = 8 + 4 + 32;
/// Length of mpirun's answer: nonce and MAC.
pub const ANSWER_LEN: usize = 32 + 32;
/// Largest sealed frame (plaintext plus the 16-byte tag).
pub const MAX_FRAME: usize = 1 << 20;

/// A 32-byte secret shared by mpirun and its proxies.
#[derive(Clone)]
pub struct Secret(pub [u8; 32]);

impl Secret {
    /// A fresh secret from the kernel's random source.
    pub fn generate() -> io::Result<Secret> {
        let mut s = [0u8; 32];
        getrandom::getrandom(&mut s).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Secret(s))
    }

    /// Lower-case hex, as written to a proxy's standard input.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(text: &str) -> Option<Secret> {
        let t = text.trim();
        if t.len() != 64 || !t.is_ascii() {
            return None;
        }
        let mut s = [0u8; 32];
        for (i, b) in s.iter_mut().enumerate() {
            *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Secret(s))
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        for p in parts {
            m.update(&(p.len() as u32).to_be_bytes());
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        for p in parts {
            m.update(&(p.len() as u32).to_be_bytes());
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// 32 random bytes.
pub fn nonce() -> io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::getrandom(&mut n).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(n)
}

/// The proxy's hello.
pub fn hello(index: u32, nonce_p: &[u8; 32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HELLO_LEN);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&index.to_be_bytes());
    v.extend_from_slice(nonce_p);
    v
}

/// Reads a hello: (host index, nonce_p), or None when it is not one.
pub fn parse_hello(b: &[u8]) -> Option<(u32, [u8; 32])> {
    if b.len() != HELLO_LEN || &b[..8] != MAGIC {
        return None;
    }
    let index = u32::from_be_bytes(b[8..12].try_into().ok()?);
    Some((index, b[12..44].try_into().ok()?))
}

/// What both ends agree on once the hello is done.
pub struct Handshake<'a> {
    pub secret: &'a Secret,
    pub jobid: &'a str,
    pub index: u32,
    pub nonce_p: [u8; 32],
    pub nonce_m: [u8; 32],
}

impl Handshake<'_> {
    fn parts<'b>(&'b self, who: &'b [u8], idx: &'b [u8; 4]) -> [&'b [u8]; 5] {
        [
            who,
            self.jobid.as_bytes(),
            idx,
            &self.nonce_p,
            &self.nonce_m,
        ]
    }

    /// mpirun's proof.
    pub fn mpirun_mac(&self) -> [u8; 32] {
        let idx = self.index.to_be_bytes();
        self.secret.mac(&self.parts(b"mpirun", &idx))
    }

    pub fn check_mpirun(&self, tag: &[u8]) -> bool {
        let idx = self.index.to_be_bytes();
        self.secret.verify(&self.parts(b"mpirun", &idx), tag)
    }

    /// The proxy's proof.
    pub fn proxy_mac(&self) -> [u8; 32] {
        let idx = self.index.to_be_bytes();
        self.secret.mac(&self.parts(b"proxy", &idx))
    }

    pub fn check_proxy(&self, tag: &[u8]) -> bool {
        let idx = self.index.to_be_bytes();
        self.secret.verify(&self.parts(b"proxy", &idx), tag)
    }

    fn key(&self, direction: &[u8]) -> [u8; 32] {
        self.secret.mac(&[
            direction,
            self.jobid.as_bytes(),
            &self.nonce_p,
            &self.nonce_m,
        ])
    }

    /// The sealing state of mpirun's end.
    pub fn mpirun_session(&self) -> Session {
        Session::new(
            &self.key(b"mpirun->proxy"),
            &self.key(b"proxy->mpirun"),
            MAX_FRAME,
        )
    }

    /// The sealing state of the proxy's end.
    pub fn proxy_session(&self) -> Session {
        Session::new(
            &self.key(b"proxy->mpirun"),
            &self.key(b"mpirun->proxy"),
            MAX_FRAME,
        )
    }
}

/// The proxy's side of the hello, blocking: sends the hello, checks mpirun's proof, sends its
/// own. The stream should have a read timeout.
pub fn proxy_hello(
    stream: &mut (impl Read + Write),
    secret: &Secret,
    jobid: &str,
    index: u32,
) -> io::Result<Session> {
    let nonce_p = nonce()?;
    stream.write_all(&hello(index, &nonce_p))?;
    let mut answer = [0u8; ANSWER_LEN];
    stream.read_exact(&mut answer)?;
    let hs = Handshake {
        secret,
        jobid,
        index,
        nonce_p,
        nonce_m: answer[..32].try_into().expect("32 bytes"),
    };
    if !hs.check_mpirun(&answer[32..]) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the peer could not prove it is this job's mpirun (wrong secret)",
        ));
    }
    stream.write_all(&hs.proxy_mac())?;
    Ok(hs.proxy_session())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// mpirun's side as a blocking function, for the tests.
    fn mpirun_hello(s: &mut UnixStream, secret: &Secret, jobid: &str) -> io::Result<Session> {
        let mut h = [0u8; HELLO_LEN];
        s.read_exact(&mut h)?;
        let (index, nonce_p) = parse_hello(&h).ok_or(io::ErrorKind::InvalidData)?;
        let hs = Handshake {
            secret,
            jobid,
            index,
            nonce_p,
            nonce_m: nonce()?,
        };
        s.write_all(&hs.nonce_m)?;
        s.write_all(&hs.mpirun_mac())?;
        let mut tag = [0u8; 32];
        s.read_exact(&mut tag)?;
        if !hs.check_proxy(&tag) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        Ok(hs.mpirun_session())
    }

    fn pair(m_secret: Secret, p_secret: Secret) -> (io::Result<Session>, io::Result<Session>) {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let r = mpirun_hello(&mut a, &m_secret, "job1");
            drop(a);
            r
        });
        let p = proxy_hello(&mut b, &p_secret, "job1", 3);
        drop(b);
        (t.join().unwrap(), p)
    }

    #[test]
    fn hex_round_trip() {
        let s = Secret::generate().unwrap();
        assert_eq!(Secret::from_hex(&s.to_hex()).unwrap().0, s.0);
        assert!(Secret::from_hex("12").is_none());
        assert!(Secret::from_hex(&"zz".repeat(32)).is_none());
        assert_eq!(format!("{s:?}"), "Secret(..)");
    }

    #[test]
    fn same_secret_talks_both_ways() {
        let s = Secret::generate().unwrap();
        let (m, p) = pair(s.clone(), s);
        let (mut m, mut p) = (m.unwrap(), p.unwrap());
        for msg in [&b"hello"[..], b"", &[7u8; 70000][..]] {
            let f = m.seal(msg);
            p.push(&f[..3]);
            assert!(p.next_frame().is_none());
            p.push(&f[3..]);
            assert_eq!(p.next_frame().unwrap().unwrap(), msg);
            let f = p.seal(msg);
            m.push(&f);
            assert_eq!(m.next_frame().unwrap().unwrap(), msg);
        }
    }

    #[test]
    fn a_wrong_secret_fails_on_both_sides() {
        let (m, p) = pair(Secret::generate().unwrap(), Secret::generate().unwrap());
        assert!(p.is_err());
        assert!(m.is_err());
    }

    #[test]
    fn forged_replayed_and_huge_frames_are_refused() {
        let s = Secret::generate().unwrap();
        let (m, p) = pair(s.clone(), s);
        let (mut m, mut p) = (m.unwrap(), p.unwrap());
        let f1 = m.seal(b"one");
        // Flipped bit.
        let mut bad = f1.clone();
        *bad.last_mut().unwrap() ^= 1;
        p.push(&bad);
        assert!(p.next_frame().unwrap().is_err());
        // Replay of a frame already opened.
        let s2 = Secret::generate().unwrap();
        let (m2, p2) = pair(s2.clone(), s2);
        let (mut m2, mut p2) = (m2.unwrap(), p2.unwrap());
        let f = m2.seal(b"x");
        p2.push(&f);
        assert!(p2.next_frame().unwrap().is_ok());
        p2.push(&f);
        assert!(p2.next_frame().unwrap().is_err());
        // A huge announced length is refused before any payload arrives.
        let mut fresh = m.seal(b"");
        fresh.truncate(0);
        p.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(p.next_frame().unwrap().is_err());
    }

    #[test]
    fn hellos_parse_only_when_well_formed() {
        let n = nonce().unwrap();
        assert_eq!(parse_hello(&hello(9, &n)), Some((9, n)));
        assert_eq!(parse_hello(&[0u8; HELLO_LEN]), None);
        assert_eq!(parse_hello(b"PRTNPRX1"), None);
    }
}
