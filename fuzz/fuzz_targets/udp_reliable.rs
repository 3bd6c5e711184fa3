//! The reliability machine of a UDP link fed arbitrary reliability headers interleaved with
//! sends, retransmissions and timers: no panic, and its windows stay bounded.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    protean_core::proto::reliable::fuzzing::link(data);
});
