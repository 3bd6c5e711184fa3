//! Proving a shared secret without sending it: the keyed MAC (HMAC-SHA256) that the
//! connect/accept ports (`protean_core::mpi::dpm_port`) and the name server's connections
//! ([`crate::names`]) compute over their labels and both sides' nonces, and the hex form their
//! secrets take in printable names. One implementation for both, kept here because the name
//! server and mpirun do not link the MPI library.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256 under `key` over the concatenation of `parts` (finalize it, or verify a tag
/// with `verify_slice`, which compares in constant time).
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    for p in parts {
        m.update(p);
    }
    m
}

/// `N` bytes from the kernel's random source.
pub fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b)
        .map_err(|e| format!("cannot draw random bytes from the kernel: {e}"))?;
    Ok(b)
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// 32 bytes from 64 hex digits.
pub fn unhex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?", in two parts.
        let tag = hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"])
            .finalize()
            .into_bytes();
        assert_eq!(
            hex(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hex_round_trips() {
        let k = random::<32>().unwrap();
        assert_eq!(unhex(&hex(&k)), Some(k));
        assert_eq!(unhex("00"), None);
        assert_eq!(unhex(&"zz".repeat(32)), None);
    }
}
