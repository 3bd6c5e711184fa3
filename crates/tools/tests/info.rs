//! protean-info lists what the library offers; scripts and users grep its output.

use std::process::Command;

fn info(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_protean-info"))
        .args(args)
        .output()
        .expect("run protean-info");
    assert!(out.status.success(), "protean-info {args:?} failed");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn components_list_protocols_policies_and_costs() {
    let s = info(&["--components"]);
    for want in [
        "shm",
        "tcp",
        "eager-rendezvous",
        "adaptive",
        "static",
        "protean_protocol",
        "adaptive cost models",
        "rndv=",
    ] {
        assert!(s.contains(want), "--components lacks '{want}':\n{s}");
    }
}

#[test]
fn every_tunable_and_counter_is_listed() {
    let t = info(&["--tunables"]);
    for want in [
        "eager_limit",
        "eager_limit_peers",
        "transport_peers",
        "adaptive_costs_tcp",
    ] {
        assert!(t.contains(want), "--tunables lacks '{want}'");
    }
    let c = info(&["--counters"]);
    assert!(
        c.contains("eager") && c.contains("rndv") && c.contains("preposted"),
        "{c}"
    );
}
