//! The TCP handshake's messages: no input panics, and none passes a check without the key.
#![no_main]
use libfuzzer_sys::fuzz_target;
use protean_core::ids::Gpid;
use protean_core::transport::tcp::hello::{self, Hello, CHALLENGE_LEN, HELLO_LEN, PROOF_LEN};

fuzz_target!(|data: &[u8]| {
    if data.len() < HELLO_LEN + CHALLENGE_LEN + PROOF_LEN {
        return;
    }
    let key = [7u8; 32];
    let h: [u8; HELLO_LEN] = data[..HELLO_LEN].try_into().unwrap();
    let c: [u8; CHALLENGE_LEN] = data[HELLO_LEN..HELLO_LEN + CHALLENGE_LEN].try_into().unwrap();
    let p: [u8; PROOF_LEN] = data[HELLO_LEN + CHALLENGE_LEN..][..PROOF_LEN].try_into().unwrap();
    let _ = Hello::decode(&h);
    // Forging a MAC without the key is what must not happen (it would take 2^256 tries).
    assert!(hello::check_challenge(&key, &h, Gpid::new(1), &c).is_err());
    assert!(hello::check_proof(&key, &h, &c, &p).is_err());
});
