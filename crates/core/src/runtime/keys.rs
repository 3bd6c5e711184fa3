//! The keys that authenticate a job's TCP connections and seal its UDP datagrams.
//!
//! Two schemes, chosen by the `job_keys` tunable (the same on every process of a job):
//!
//! - **shared** (the default under Protean's mpirun): rank 0 draws 32 random bytes, the job's
//!   key, and hands them to the others through the process manager's key-value store. Our
//!   mpirun carries that store between hosts only inside its sealed proxy channel
//!   (`launcher::channel`), so the key never crosses a network readable.
//! - **pairs** (the default under any other process manager: MPICH's Hydra, Slurm's PMI-1 and
//!   PMI-2): those carry their key-value store between hosts in clear, so nothing secret may
//!   go into it. Each process draws its own X25519 key pair and publishes only the public key,
//!   in its business card. Two processes derive the key of their pair by Diffie-Hellman:
//!   `HKDF-SHA256(salt = label, ikm = X25519(own secret, peer's public key), info = job id,
//!   then (gpid, public key) of the lower gpid, then of the higher)`, the same on both sides
//!   and different for every pair, process and run. A public key that gives a non-contributory
//!   shared secret (a low-order point: the result would not depend on our secret) is refused.
//!
//! Either way the transports ask [`Keys::pair`] for the key they use with one peer: the TCP
//! handshake MACs it (`transport::tcp::hello`), UDP seals datagrams under a key derived from it
//! (`transport::udp::wire`); both compute it once per peer (a Diffie-Hellman costs tens of
//! microseconds) and keep it, so the per-message cost is the same under both schemes.
//!
//! For tests and debugging, the `key_log` tunable names a file to which each process appends
//! the keys it holds (as `SSLKEYLOGFILE` does for TLS): `job JOBID GPID KEY` for the job's
//! key, `secret JOBID GPID KEY` for its X25519 secret, `pair JOBID GPID PEER KEY` for each
//! pair key when derived (hex). The cluster attack test searches every frame on the wire for
//! them. Whoever reads that file can read and forge the job's traffic: never set it otherwise.
//!
//! What the pair scheme protects against: everyone who reads the network (the key-value store
//! carries public keys only). The cards themselves are as trustworthy as the process manager's
//! connections: an attacker able to rewrite Hydra's or Slurm's traffic in flight could swap a
//! public key for its own, as it could rewrite the job's commands; those connections are the
//! process manager's to protect.

use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

use crate::ids::Gpid;

/// A key of 32 bytes.
pub type Key = [u8; 32];

const PAIR_SALT: &[u8] = b"protean pair key v1, x25519 hkdf-sha256";

/// The keys of one process.
#[derive(Clone)]
pub enum Keys {
    /// The job's key, the same for every pair.
    Shared(Key),
    /// Our key pair and the peers' public keys.
    Pairs(Pairs),
}

impl Keys {
    /// The key that authenticates what passes between us and `peer`; None when there is none
    /// (a process whose public key we do not know, ourselves, or a refused public key).
    /// Computed on the first call for a peer, remembered after.
    pub fn pair(&mut self, peer: Gpid) -> Option<Key> {
        match self {
            Keys::Shared(k) => Some(*k),
            Keys::Pairs(p) => p.pair(peer),
        }
    }

    /// The job's key under the shared scheme.
    pub fn shared(&self) -> Option<Key> {
        match self {
            Keys::Shared(k) => Some(*k),
            Keys::Pairs(_) => None,
        }
    }
}

/// A process's key pair, the peers' public keys (by gpid) and the pair keys derived so far.
#[derive(Clone)]
pub struct Pairs {
    me: Gpid,
    jobid: String,
    secret: StaticSecret,
    public: Key,
    peers: Vec<Option<Key>>,
    derived: Vec<Option<Key>>,
    /// The `key_log` file, if any.
    log: Option<String>,
}

impl Pairs {
    /// A fresh key pair for process `me` of job `jobid`, from the kernel's random source.
    pub fn new(me: Gpid, jobid: &str) -> Result<Pairs, String> {
        let mut s = [0u8; 32];
        getrandom::getrandom(&mut s)
            .map_err(|e| format!("cannot draw a key pair from the kernel: {e}"))?;
        Ok(Pairs::from_secret(me, jobid, s))
    }

    fn from_secret(me: Gpid, jobid: &str, s: Key) -> Pairs {
        let secret = StaticSecret::from(s);
        let public = PublicKey::from(&secret).to_bytes();
        Pairs {
            me,
            jobid: jobid.to_string(),
            secret,
            public,
            peers: Vec::new(),
            derived: Vec::new(),
            log: None,
        }
    }

    /// Append our secret, and from now on every pair key we derive, to the file `path`
    /// (`key_log`: tests only).
    pub fn log_to(&mut self, path: &str) {
        log_line(
            path,
            &format!(
                "secret {} {} {}\n",
                self.jobid,
                self.me,
                hex(&self.secret.to_bytes())
            ),
        );
        self.log = Some(path.to_string());
    }

    /// Our public key (what our business card publishes).
    pub fn public(&self) -> Key {
        self.public
    }

    /// The public key of process `gpid` (from its card).
    pub fn set_peer(&mut self, gpid: Gpid, public: Key) {
        let i = gpid.idx();
        if self.peers.len() <= i {
            self.peers.resize(i + 1, None);
            self.derived.resize(i + 1, None);
        }
        self.peers[i] = Some(public);
        self.derived[i] = None;
    }

    fn pair(&mut self, peer: Gpid) -> Option<Key> {
        let i = peer.idx();
        if let Some(Some(k)) = self.derived.get(i) {
            return Some(*k);
        }
        let public = (*self.peers.get(i)?)?;
        let k = derive(
            &self.secret,
            (self.me, self.public),
            (peer, public),
            &self.jobid,
        )?;
        self.derived[i] = Some(k);
        if let Some(path) = &self.log {
            log_line(
                path,
                &format!("pair {} {} {peer} {}\n", self.jobid, self.me, hex(&k)),
            );
        }
        Some(k)
    }
}

/// Append `line` to the key log `path` (one write: the lines of concurrent processes do not
/// mix), readable by its owner only; a file that cannot be written is skipped.
fn log_line(path: &str, line: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Append the job's key to the key log `path` (`key_log`: tests only).
pub fn log_job_key(path: &str, jobid: &str, me: Gpid, key: &Key) {
    log_line(path, &format!("job {jobid} {me} {}\n", hex(key)));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The key of the pair (`me`, `peer`), each a (gpid, public key), seen from `me`'s side whose
/// secret is `secret`. None for ourselves or for a public key that does not contribute to the
/// shared secret.
fn derive(secret: &StaticSecret, me: (Gpid, Key), peer: (Gpid, Key), jobid: &str) -> Option<Key> {
    if peer.0 == me.0 {
        return None;
    }
    let shared = secret.diffie_hellman(&PublicKey::from(peer.1));
    if !shared.was_contributory() {
        return None;
    }
    let (lo, hi) = if me.0 < peer.0 {
        (me, peer)
    } else {
        (peer, me)
    };
    let mut info = Vec::with_capacity(8 + jobid.len() + 72);
    info.extend_from_slice(&(jobid.len() as u32).to_le_bytes());
    info.extend_from_slice(jobid.as_bytes());
    for (g, pk) in [lo, hi] {
        info.extend_from_slice(&g.get().to_le_bytes());
        info.extend_from_slice(&pk);
    }
    let mut out = [0u8; 32];
    Hkdf::<Sha256>::new(Some(PAIR_SALT), shared.as_bytes())
        .expand(&info, &mut out)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(me: Gpid, seed: u8) -> Pairs {
        Pairs::from_secret(me, "job7", [seed; 32])
    }

    #[test]
    fn both_sides_of_a_pair_agree_and_other_pairs_differ() {
        let (mut a, mut b, mut c) = (
            pairs(Gpid::new(0), 1),
            pairs(Gpid::new(1), 2),
            pairs(Gpid::new(2), 3),
        );
        for (x, y) in [(&mut a, b.public()), (&mut c, b.public())] {
            x.set_peer(Gpid::new(1), y);
        }
        a.set_peer(Gpid::new(2), c.public());
        b.set_peer(Gpid::new(0), a.public());
        b.set_peer(Gpid::new(2), c.public());
        c.set_peer(Gpid::new(0), a.public());
        let ab = a.pair(Gpid::new(1)).unwrap();
        assert_eq!(b.pair(Gpid::new(0)), Some(ab));
        assert_eq!(a.pair(Gpid::new(1)), Some(ab), "remembered");
        let bc = b.pair(Gpid::new(2)).unwrap();
        assert_eq!(c.pair(Gpid::new(1)), Some(bc));
        let ac = a.pair(Gpid::new(2)).unwrap();
        assert_eq!(c.pair(Gpid::new(0)), Some(ac));
        assert!(ab != bc && bc != ac && ab != ac);
        // Nothing for ourselves, nor for a process whose key we do not know.
        assert_eq!(a.pair(Gpid::new(0)), None);
        assert_eq!(a.pair(Gpid::new(9)), None);
        // Fresh key pairs: a new run of the same processes gets new keys.
        let (mut a2, b2) = (
            Pairs::new(Gpid::new(0), "job7").unwrap(),
            Pairs::new(Gpid::new(1), "job7").unwrap(),
        );
        assert_ne!(a2.public(), b2.public());
        a2.set_peer(Gpid::new(1), b2.public());
        assert_ne!(a2.pair(Gpid::new(1)), Some(ab));
    }

    #[test]
    fn the_key_is_bound_to_the_gpids_and_the_job() {
        let (a, b) = (pairs(Gpid::new(0), 1), pairs(Gpid::new(1), 2));
        let k = derive(
            &a.secret,
            (Gpid::new(0), a.public),
            (Gpid::new(1), b.public),
            "job7",
        )
        .unwrap();
        // The same key pairs under other gpids, or in another job, give another key.
        assert_ne!(
            derive(
                &a.secret,
                (Gpid::new(0), a.public),
                (Gpid::new(2), b.public),
                "job7"
            ),
            Some(k)
        );
        assert_ne!(
            derive(
                &a.secret,
                (Gpid::new(3), a.public),
                (Gpid::new(1), b.public),
                "job7"
            ),
            Some(k)
        );
        assert_ne!(
            derive(
                &a.secret,
                (Gpid::new(0), a.public),
                (Gpid::new(1), b.public),
                "job8"
            ),
            Some(k)
        );
        assert_eq!(
            derive(
                &b.secret,
                (Gpid::new(1), b.public),
                (Gpid::new(0), a.public),
                "job7"
            ),
            Some(k)
        );
    }

    #[test]
    fn the_key_log_holds_the_secret_and_each_pair_key_once() {
        let path = std::env::temp_dir().join(format!("protean-keylog-{}", std::process::id()));
        let path = path.to_str().unwrap();
        let _ = std::fs::remove_file(path);
        let (mut a, b) = (pairs(Gpid::new(0), 1), pairs(Gpid::new(1), 2));
        a.log_to(path);
        a.set_peer(Gpid::new(1), b.public());
        let k = a.pair(Gpid::new(1)).unwrap();
        a.pair(Gpid::new(1));
        log_job_key(path, "job7", Gpid::new(0), &[7; 32]);
        let log = std::fs::read_to_string(path).unwrap();
        let _ = std::fs::remove_file(path);
        assert_eq!(
            log,
            format!(
                "secret job7 0 {}\npair job7 0 1 {}\njob job7 0 {}\n",
                "01".repeat(32),
                hex(&k),
                "07".repeat(32)
            )
        );
    }

    #[test]
    fn low_order_public_keys_are_refused() {
        let mut a = pairs(Gpid::new(0), 1);
        // The identity and a point of order 8: the shared secret would be all zero.
        let mut p8 = [0u8; 32];
        p8.copy_from_slice(
            &[
                0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f,
                0xc4, 0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16,
                0x5f, 0x49, 0xb8, 0x00,
            ][..],
        );
        for bad in [[0u8; 32], p8] {
            a.set_peer(Gpid::new(1), bad);
            assert_eq!(a.pair(Gpid::new(1)), None);
        }
        assert_eq!(Keys::Shared([4; 32]).pair(Gpid::new(5)), Some([4; 32]));
        assert_eq!(Keys::Shared([4; 32]).shared(), Some([4; 32]));
        assert_eq!(Keys::Pairs(a).shared(), None);
    }
}
