//! A datagram arriving at a process over UDP: the outer header, the tag (arbitrary bytes
//! fail it, and are counted), then the same bytes sealed with the job's key so that the
//! reliability header and the data reach the reliability machine and the stream parser, as
//! from a process of the job that sends nonsense. No panic, no frame above the limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use protean_core::proto::reliable::{Links, Params};

fuzz_target!(|data: &[u8]| {
    let rel = Links::with_params(Params::default(), 4);
    protean_core::transport::udp::fuzzing::datagram(rel, data);
});
