//! Frame headers and rendezvous payloads: decoding never panics, and what decodes re-encodes
//! to the same header (feedback bits aside).
#![no_main]
use libfuzzer_sys::fuzz_target;
use protean_core::proto::frame::{Frame, RndvInfo, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if data.len() >= HEADER_LEN {
        let h: [u8; HEADER_LEN] = data[..HEADER_LEN].try_into().unwrap();
        if let Ok(f) = Frame::decode(&h) {
            let mut again = f.encode();
            again[2..4].copy_from_slice(&h[2..4]);
            assert_eq!(again, h);
        }
        let _ = RndvInfo::decode(&data[HEADER_LEN..]);
    }
    let _ = Frame::decode_slice(data);
});
