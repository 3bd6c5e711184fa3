//! The TCP stream parser of an authenticated connection fed arbitrary bytes: no panic, no
//! allocation beyond the frame limit, no frame above it delivered.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    protean_core::transport::tcp::fuzzing::stream(data);
});
