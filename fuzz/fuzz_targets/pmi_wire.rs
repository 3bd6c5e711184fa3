//! The PMI-1 wire protocol as a server and a client read it: framing and parsing never panic,
//! and what parses re-encodes to something that parses the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use protean_pmi::wire::{Framer, Request, Response};

fuzz_target!(|data: &[u8]| {
    let mut f = Framer::new(1024);
    f.push(data);
    while let Some(m) = f.next_message() {
        if let Ok(text) = m {
            if let Ok(r) = Request::parse(&text) {
                assert_eq!(Request::parse(&r.encode()), Ok(r));
            }
            if let Ok(r) = Response::parse(&text) {
                assert_eq!(Response::parse(&r.encode()), Ok(r));
            }
        }
    }
});
