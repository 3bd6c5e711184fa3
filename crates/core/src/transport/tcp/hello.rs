//! The handshake that opens every TCP connection between two processes of a job.
//!
//! Nothing outside the job may inject frames or speak for a process, so a connection carries
//! frames only after both ends proved they hold the key of their pair (`runtime::keys`): the
//! job's key (32 random bytes that rank 0 makes at start-up and hands out through the process
//! manager's key-value store, under our mpirun), or the pair's own key, derived by X25519
//! from each side's secret and the other's public key (under Hydra or Slurm, whose stores
//! cross hosts in clear). The acceptor picks the key by the gpid the hello names. The key never
//! travels on the connection: each side proves it with an HMAC-SHA256 over both sides' fresh
//! nonces and the fixed fields of both messages, so nothing that was said before can be
//! replayed.
//!
//! ```text
//! connector -> acceptor   Hello      magic "PTC2", connector gpid, lane, max frame, nonce_c (32 B)
//! acceptor  -> connector  Challenge  magic "PTC2", acceptor gpid, max frame, 0, nonce_a,
//!                                    mac_a = HMAC(key, "accept"  | hello | challenge[..32]) (64 B)
//! connector -> acceptor   Proof      mac_c = HMAC(key, "connect" | hello | challenge[..32]) (32 B)
//! ```
//! All integers little endian. The acceptor checks the hello before it answers (magic, a gpid
//! inside the job that is not its own); each side checks the other's MAC in constant time. A
//! connection that fails is closed and counted; it never touches a peer's state. Parsing never
//! panics (fuzzed in `fuzz/` and by the proptests below).

use crate::ids::Gpid;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key of a pair of processes (`runtime::keys`: the job's key, or the pair's own).
pub use crate::runtime::keys::Key;

pub const MAGIC: u32 = 0x3243_5450; // "PTC2" in memory order
pub const HELLO_LEN: usize = 32;
pub const CHALLENGE_LEN: usize = 64;
pub const PROOF_LEN: usize = 32;

const ACCEPT: &[u8] = b"protean tcp accept v2";
const CONNECT: &[u8] = b"protean tcp connect v2";

/// What a connector says first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub gpid: Gpid,
    pub lane: u8,
    /// The largest frame payload the connector accepts.
    pub max_frame: u32,
    pub nonce: [u8; 16],
}

/// Why a handshake message is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    BadMagic,
    BadField,
    /// The MAC does not prove the key.
    BadProof,
    /// We have no key for the process (no public key known for it, or a refused one).
    NoKey,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::BadMagic => "not a Protean connection",
            Refused::BadField => "malformed handshake",
            Refused::BadProof => "the peer does not hold the key",
            Refused::NoKey => "no key for that process",
        })
    }
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.gpid.get().to_le_bytes());
        b[8] = self.lane;
        b[12..16].copy_from_slice(&self.max_frame.to_le_bytes());
        b[16..32].copy_from_slice(&self.nonce);
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, Refused> {
        if u32_at(b, 0) != MAGIC {
            return Err(Refused::BadMagic);
        }
        if b[9..12] != [0, 0, 0] {
            return Err(Refused::BadField);
        }
        Ok(Hello {
            gpid: Gpid::new(u32_at(b, 4)),
            lane: b[8],
            max_frame: u32_at(b, 12),
            nonce: b[16..32].try_into().expect("16 bytes"),
        })
    }
}

fn mac(key: &Key, label: &[u8], hello: &[u8; HELLO_LEN], head: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    m.update(label);
    m.update(hello);
    m.update(head);
    m
}

/// The acceptor's answer to `hello`: its gpid, frame limit and nonce, and its proof.
pub fn challenge(
    key: &Key,
    hello: &[u8; HELLO_LEN],
    gpid: Gpid,
    max_frame: u32,
    nonce: [u8; 16],
) -> [u8; CHALLENGE_LEN] {
    let mut b = [0u8; CHALLENGE_LEN];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&gpid.get().to_le_bytes());
    b[8..12].copy_from_slice(&max_frame.to_le_bytes());
    b[16..32].copy_from_slice(&nonce);
    let tag = mac(key, ACCEPT, hello, &b[..32]).finalize().into_bytes();
    b[32..64].copy_from_slice(&tag);
    b
}

/// The connector checks a challenge for its `hello` and the acceptor it expects: the
/// acceptor's frame limit, and the proof to send back.
pub fn check_challenge(
    key: &Key,
    hello: &[u8; HELLO_LEN],
    expect_gpid: Gpid,
    c: &[u8; CHALLENGE_LEN],
) -> Result<(u32, [u8; PROOF_LEN]), Refused> {
    if u32_at(c, 0) != MAGIC {
        return Err(Refused::BadMagic);
    }
    if u32_at(c, 4) != expect_gpid.get() || u32_at(c, 12) != 0 {
        return Err(Refused::BadField);
    }
    mac(key, ACCEPT, hello, &c[..32])
        .verify_slice(&c[32..64])
        .map_err(|_| Refused::BadProof)?;
    let proof = mac(key, CONNECT, hello, &c[..32]).finalize().into_bytes();
    Ok((u32_at(c, 8), proof.into()))
}

/// The acceptor checks the connector's proof.
pub fn check_proof(
    key: &Key,
    hello: &[u8; HELLO_LEN],
    challenge: &[u8; CHALLENGE_LEN],
    proof: &[u8; PROOF_LEN],
) -> Result<(), Refused> {
    mac(key, CONNECT, hello, &challenge[..32])
        .verify_slice(proof)
        .map_err(|_| Refused::BadProof)
}

/// 16 fresh random bytes.
pub fn nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    getrandom::getrandom(&mut n).expect("the kernel's random source");
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hello() -> Hello {
        Hello {
            gpid: Gpid::new(3),
            lane: 0,
            max_frame: 1 << 26,
            nonce: [7; 16],
        }
    }

    #[test]
    fn both_sides_prove_the_key() {
        let key = [9u8; 32];
        let h = hello().encode();
        assert_eq!(Hello::decode(&h), Ok(hello()));
        let c = challenge(&key, &h, Gpid::new(5), 1 << 20, [1; 16]);
        let (max, proof) = check_challenge(&key, &h, Gpid::new(5), &c).unwrap();
        assert_eq!(max, 1 << 20);
        assert_eq!(check_proof(&key, &h, &c, &proof), Ok(()));
    }

    #[test]
    fn forgeries_fail() {
        let key = [9u8; 32];
        let other = [8u8; 32];
        let h = hello().encode();
        // An acceptor without the key cannot answer; one that answers for another process is
        // refused.
        let c = challenge(&other, &h, Gpid::new(5), 1 << 20, [1; 16]);
        assert_eq!(
            check_challenge(&key, &h, Gpid::new(5), &c),
            Err(Refused::BadProof)
        );
        let c = challenge(&key, &h, Gpid::new(5), 1 << 20, [1; 16]);
        assert_eq!(
            check_challenge(&key, &h, Gpid::new(6), &c),
            Err(Refused::BadField)
        );
        // A connector without the key cannot prove it; a proof for another hello (a replay)
        // does not pass either.
        let (_, bad) = check_challenge(
            &other,
            &h,
            Gpid::new(5),
            &challenge(&other, &h, Gpid::new(5), 1, [1; 16]),
        )
        .unwrap();
        assert_eq!(check_proof(&key, &h, &c, &bad), Err(Refused::BadProof));
        let mut h2 = hello();
        h2.nonce = [6; 16];
        let h2 = h2.encode();
        let c2 = challenge(&key, &h2, Gpid::new(5), 1 << 20, [1; 16]);
        let (_, p2) = check_challenge(&key, &h2, Gpid::new(5), &c2).unwrap();
        assert_eq!(check_proof(&key, &h, &c, &p2), Err(Refused::BadProof));
        // Tampering with any field of the challenge breaks its proof.
        for i in 0..32 {
            let mut t = c;
            t[i] ^= 1;
            assert!(
                check_challenge(&key, &h, Gpid::new(5), &t).is_err(),
                "byte {i}"
            );
        }
        let mut bad = h;
        bad[0] = 0;
        assert_eq!(Hello::decode(&bad), Err(Refused::BadMagic));
        let mut bad = h;
        bad[10] = 1;
        assert_eq!(Hello::decode(&bad), Err(Refused::BadField));
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn pair_keys_prove_and_a_forged_public_key_fails() {
        use crate::runtime::keys::{Keys, Pairs};
        let (mut a, mut b) = (
            Pairs::new(Gpid::new(0), "j").unwrap(),
            Pairs::new(Gpid::new(3), "j").unwrap(),
        );
        a.set_peer(Gpid::new(3), b.public());
        b.set_peer(Gpid::new(0), a.public());
        let a_public = a.public();
        let (mut a, mut b) = (Keys::Pairs(a), Keys::Pairs(b));
        let (ka, kb) = (a.pair(Gpid::new(3)).unwrap(), b.pair(Gpid::new(0)).unwrap());
        // Process 3 connects to process 0: both prove the key of their pair.
        let h = hello().encode();
        let c = challenge(&ka, &h, Gpid::new(0), 1 << 20, [1; 16]);
        let (_, proof) = check_challenge(&kb, &h, Gpid::new(0), &c).unwrap();
        assert_eq!(check_proof(&ka, &h, &c, &proof), Ok(()));
        // Someone who published (or swapped in) a public key of its own for process 3 holds
        // the key of another pair: process 0 refuses its proof, and it refuses process 0's.
        let mut forged = Pairs::new(Gpid::new(3), "j").unwrap();
        forged.set_peer(Gpid::new(0), a_public);
        let kf = Keys::Pairs(forged).pair(Gpid::new(0)).unwrap();
        assert_ne!(kf, ka);
        assert_eq!(
            check_challenge(&kf, &h, Gpid::new(0), &c),
            Err(Refused::BadProof)
        );
        let (_, bad) = check_challenge(
            &kf,
            &h,
            Gpid::new(0),
            &challenge(&kf, &h, Gpid::new(0), 1, [1; 16]),
        )
        .unwrap();
        assert_eq!(check_proof(&ka, &h, &c, &bad), Err(Refused::BadProof));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 96)) {
            let key = [1u8; 32];
            let h: [u8; 32] = b[..32].try_into().unwrap();
            let c: [u8; 64] = b[32..96].try_into().unwrap();
            let _ = Hello::decode(&h);
            prop_assert!(check_challenge(&key, &h, Gpid::new(1), &c).is_err() || u32_at(&c, 0) == MAGIC);
            let p: [u8; 32] = b[64..96].try_into().unwrap();
            prop_assert!(check_proof(&key, &h, &c, &p).is_err());
        }
    }
}
