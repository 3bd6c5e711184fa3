//! The shared-memory transport's control records (help requests of a cooperative copy) and
//! region descriptions: decoding never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use protean_core::transport::shm::copy::{Help, RegionDesc};
use protean_core::transport::{Region, REGION_LEN};

fuzz_target!(|data: &[u8]| {
    if let Some(h) = Help::decode(data) {
        assert_eq!(Help::decode(&h.encode()), Some(h));
    }
    if data.len() >= REGION_LEN {
        let r = Region(data[..REGION_LEN].try_into().unwrap());
        if let Ok(d) = RegionDesc::decode(&r) {
            assert_eq!(d.encode(), r);
        }
    }
});
