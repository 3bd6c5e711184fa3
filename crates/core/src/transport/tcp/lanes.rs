//! How many connections ("lanes") to stripe a peer's bulk data over.
//!
//! One TCP connection moves at most a window per round trip: with 256 KiB socket buffers and a
//! 20 ms round trip that is about 100 Mbit/s whatever the link can do, and on long links an
//! MPI message waits for that one window (the second seed document measured 70-80 Mbit/s on a
//! 1 Gbit/s link between sites, and 6x with parallel streams). Several connections to the same
//! peer each bring a window. On loopback and LANs the round trip is tens of microseconds, one
//! window covers the link, and more lanes only cost: there one lane is kept.
//!
//! The choice is per peer, from what the transport measures (sans-IO here: the caller passes
//! in each finished bulk transfer, the round trip and the window of the connection):
//! - `Fixed(n)`: always `n` lanes (the `tcp_lanes` tunable, or a per-peer rule).
//! - `Auto`: one lane while the round trip is short (below [`LONG_RTT`]); on a long link, probe:
//!   double the lanes while a transfer's throughput rises by at least [`GAIN`] over the best so
//!   far, and settle on the best count when it does not (or at the maximum). A settled count is
//!   probed again from one lane when throughput falls to half the best, since the link changed.
//!
//! Only transfers of at least [`MIN_BULK`] bytes that ran on lanes all open before they started
//! count: a connection that just opened is still in slow start and would understate its lanes.

use std::time::Duration;

/// Round trips at least this long make a link worth striping.
pub const LONG_RTT: Duration = Duration::from_millis(1);
/// A transfer must be this large to measure a link.
pub const MIN_BULK: u64 = 1 << 20;
/// More lanes must bring this much more throughput to be kept.
pub const GAIN: f64 = 1.10;

/// How a peer's lane count is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Fixed(u8),
    /// Chosen by measurement, up to `max`.
    Auto {
        max: u8,
    },
}

impl Mode {
    /// `auto`, or a number of lanes (1 to `limit`).
    pub fn parse(text: &str, limit: u8) -> Result<Mode, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(Mode::Auto { max: limit });
        }
        match t.parse::<u8>() {
            Ok(n) if n >= 1 && n <= limit => Ok(Mode::Fixed(n)),
            _ => Err(format!(
                "'{t}' is neither auto nor a lane count from 1 to {limit}"
            )),
        }
    }
}

/// The lane count of one peer.
#[derive(Debug, Clone)]
pub struct LaneCtl {
    mode: Mode,
    target: u8,
    /// Best throughput seen (bytes per second) and its lane count.
    best: Option<(f64, u8)>,
    settled: bool,
}

impl LaneCtl {
    pub fn new(mode: Mode) -> LaneCtl {
        LaneCtl {
            mode,
            target: match mode {
                Mode::Fixed(n) => n.max(1),
                Mode::Auto { .. } => 1,
            },
            best: None,
            settled: false,
        }
    }

    /// Lanes bulk data should use now.
    pub fn target(&self) -> u8 {
        self.target
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Has the count stopped changing (auto) or never changes (fixed)?
    pub fn settled(&self) -> bool {
        self.settled || matches!(self.mode, Mode::Fixed(_))
    }

    /// A bulk transfer of `bytes` took `elapsed` on `lanes` lanes; the link's round trip is
    /// `rtt`. Returns true when the target changed.
    pub fn observe(&mut self, bytes: u64, elapsed: Duration, lanes: u8, rtt: Duration) -> bool {
        let Mode::Auto { max } = self.mode else {
            return false;
        };
        if bytes < MIN_BULK || elapsed.is_zero() || lanes != self.target {
            return false;
        }
        let rate = bytes as f64 / elapsed.as_secs_f64();
        let before = self.target;
        if self.settled {
            // The link changed a lot: probe again from one lane.
            if self.best.is_some_and(|(b, _)| rate < b / 2.0) && rtt >= LONG_RTT {
                self.best = None;
                self.settled = false;
                self.target = 1;
            } else if let Some((b, n)) = self.best.as_mut() {
                if *n == lanes && rate > *b {
                    *b = rate;
                }
            }
            return self.target != before;
        }
        match self.best {
            None => {
                self.best = Some((rate, lanes));
                if rtt >= LONG_RTT && lanes < max {
                    self.target = (lanes * 2).min(max);
                } else {
                    self.settled = true;
                }
            }
            Some((b, n)) => {
                if rate >= b * GAIN {
                    self.best = Some((rate, lanes));
                    if lanes < max {
                        self.target = lanes.saturating_mul(2).min(max);
                    } else {
                        self.settled = true;
                    }
                } else {
                    self.target = n;
                    self.settled = true;
                }
            }
        }
        self.target != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    /// Throughput (bytes per second) of `lanes` window-limited connections on a link of
    /// `cap` bytes per second, each bringing `per` bytes per second.
    fn link(cap: f64, per: f64, lanes: u8) -> f64 {
        (per * lanes as f64).min(cap)
    }

    fn settle(ctl: &mut LaneCtl, rtt: Duration, rate: impl Fn(u8) -> f64) -> u8 {
        for _ in 0..20 {
            let n = ctl.target();
            let secs = (16 * MB) as f64 / rate(n);
            ctl.observe(16 * MB, Duration::from_secs_f64(secs), n, rtt);
            if ctl.settled() {
                break;
            }
        }
        ctl.target()
    }

    #[test]
    fn short_links_keep_one_lane() {
        let mut c = LaneCtl::new(Mode::Auto { max: 16 });
        let n = settle(&mut c, Duration::from_micros(40), |n| link(5e9, 5e9, n));
        assert_eq!(n, 1);
        assert!(c.settled());
    }

    #[test]
    fn long_links_take_lanes_while_they_pay() {
        // 1 Gbit/s link, one window-limited connection brings 9 MB/s: 16 lanes saturate it at
        // 14; doubling stops where the gain is under 10%.
        let mut c = LaneCtl::new(Mode::Auto { max: 16 });
        let n = settle(&mut c, Duration::from_millis(20), |n| link(125e6, 9e6, n));
        assert_eq!(n, 16);
        // A 100 Mbit/s link: 2 lanes fill it, 4 bring nothing.
        let mut c = LaneCtl::new(Mode::Auto { max: 16 });
        let n = settle(&mut c, Duration::from_millis(20), |n| link(12.5e6, 9e6, n));
        assert_eq!(n, 2);
        // The maximum holds.
        let mut c = LaneCtl::new(Mode::Auto { max: 4 });
        assert_eq!(
            settle(&mut c, Duration::from_millis(50), |n| link(1e9, 3e6, n)),
            4
        );
    }

    #[test]
    fn small_or_stale_transfers_do_not_count_and_fixed_never_moves() {
        let mut c = LaneCtl::new(Mode::Auto { max: 8 });
        assert!(!c.observe(
            MB / 2,
            Duration::from_millis(50),
            1,
            Duration::from_millis(20)
        ));
        assert!(!c.observe(
            4 * MB,
            Duration::from_millis(50),
            3,
            Duration::from_millis(20)
        ));
        assert_eq!(c.target(), 1);
        assert!(c.observe(
            4 * MB,
            Duration::from_millis(500),
            1,
            Duration::from_millis(20)
        ));
        assert_eq!(c.target(), 2);
        let mut f = LaneCtl::new(Mode::Fixed(4));
        assert!(!f.observe(
            64 * MB,
            Duration::from_secs(1),
            4,
            Duration::from_millis(20)
        ));
        assert_eq!(f.target(), 4);
        assert_eq!(Mode::parse("auto", 16), Ok(Mode::Auto { max: 16 }));
        assert_eq!(Mode::parse(" 8 ", 16), Ok(Mode::Fixed(8)));
        assert!(Mode::parse("0", 16).is_err() && Mode::parse("17", 16).is_err());
        assert!(Mode::parse("many", 16).is_err());
    }

    #[test]
    fn a_link_that_changes_is_probed_again() {
        let mut c = LaneCtl::new(Mode::Auto { max: 16 });
        let rtt = Duration::from_millis(20);
        assert_eq!(settle(&mut c, rtt, |n| link(125e6, 9e6, n)), 16);
        // The link now carries a tenth: the count is probed again from one lane.
        let slow = |n| link(12.5e6, 9e6, n);
        let secs = (16 * MB) as f64 / slow(16);
        assert!(c.observe(16 * MB, Duration::from_secs_f64(secs), 16, rtt));
        assert_eq!(c.target(), 1);
        assert_eq!(settle(&mut c, rtt, slow), 2);
    }
}
