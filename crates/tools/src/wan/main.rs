//! protean-wan: a WAN link emulator in user space.
//!
//! Joins two TUN devices, usually in two network namespaces that route for two "sites", and
//! forwards IP packets between them with a one-way delay, jitter, a rate limit behind a
//! drop-tail queue, and random loss, in each direction. The kernel here has no `netem`; this
//! does what `tc qdisc add ... netem delay D loss L rate R limit N` would, in user space. See
//! `sched.rs` for the model, `fwd.rs` for the forwarding loop, `tests/wan/README.md` for the
//! emulated sites around it.

mod fwd;
mod packet;
mod sched;
mod tun;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use crate::fwd::{Direction, Stats};
use crate::sched::{Link, LinkConfig, Nanos};
use crate::tun::Endpoint;

const LONG_ABOUT: &str = "\
Emulates a WAN link between two TUN devices, usually in two network namespaces that route \
for two sites. Each IP packet read from one device is written to the other after the path \
below, in each direction independently (the settings apply to both):

  loss (--loss, seeded by --seed)
  -> bottleneck: drop-tail queue (--limit, --limit-bytes) in front of a link of --rate
     (a token bucket of --burst bytes; 0: exact serialization)
  -> propagation: --delay, moved by a uniform --jitter (a flow's packets stay in order
     unless --reorder)
  -> written to the other device when due

A device that exists (made by `ip tuntap add dev wan0 mode tun`) is attached to; with --create \
one that does not is created, and disappears when protean-wan exits. Either way protean-wan \
brings it up; addresses and routes are the caller's. Prints one line starting with 'protean-wan: ready' on \
standard output once both devices are open, runs until SIGINT, SIGTERM or SIGHUP, then prints \
the counters of each direction on standard error and exits 0 (1 on a failure, 2 on bad \
options). Must run as root (CAP_NET_ADMIN and CAP_SYS_ADMIN for setns).";

#[derive(Parser, Debug)]
#[command(
    name = "protean-wan",
    version,
    about = "WAN link emulator: delay, jitter, rate limit, queue and loss between two TUN devices",
    long_about = LONG_ABOUT,
    after_help = "Example: protean-wan --site-a wan-gwa --site-b wan-gwb --delay 10ms --rate 1gbit"
)]
struct Args {
    /// One end of the link: NETNS[:DEV]. NETNS is a name under /run/netns (as `ip netns` makes
    /// them) or a path such as /proc/PID/ns/net; DEV is the TUN device in it (default wan0).
    #[arg(long, value_name = "NETNS[:DEV]", value_parser = Endpoint::parse)]
    site_a: Endpoint,

    /// The other end of the link, as --site-a.
    #[arg(long, value_name = "NETNS[:DEV]", value_parser = Endpoint::parse)]
    site_b: Endpoint,

    /// One-way delay in each direction: a number with a unit, ns, us, ms or s (e.g. 10ms, 0.5ms).
    /// The round-trip time is twice this (plus the time to send at --rate).
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_duration)]
    delay: Nanos,

    /// Jitter: each packet's delay moves by a uniform random amount in [-TIME, +TIME] (never
    /// below zero). Packets of one flow (addresses, protocol, ports) keep their order, as on a
    /// real path, unless --reorder.
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_duration)]
    jitter: Nanos,

    /// Let jitter reorder the packets of a flow (netem's behaviour).
    #[arg(long)]
    reorder: bool,

    /// Bottleneck rate in each direction, as tc writes it: a number with bit, kbit, mbit, gbit,
    /// tbit (bits per second, powers of 1000) or bps, kbps, mbps, gbps (bytes per second);
    /// e.g. 1gbit, 100mbit. Counts IP bytes on the wire. Default: no limit (and no queue).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rate: Option<u64>,

    /// Token bucket depth of the rate limit: this many bytes may leave at once after the link
    /// was idle. 0 (default) makes it a link that sends one packet at a time at --rate.
    /// Sizes take K, M, G (powers of 1024).
    #[arg(long, value_name = "BYTES", default_value = "0", value_parser = parse_size)]
    burst: u64,

    /// Random loss per packet on the wire in each direction, in percent (e.g. 1, 0.5%). With
    /// segmentation offload, a 64 KiB packet is lost when any of the wire packets it stands for
    /// is (see --offload).
    #[arg(long, value_name = "PERCENT", default_value = "0", value_parser = parse_loss)]
    loss: f64,

    /// Seed of the random loss and jitter: the same seed and the same packets give the same
    /// drops and delays.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,

    /// Queue limit of the bottleneck in packets on the wire (drop-tail): a packet that arrives
    /// while this many wait is dropped. Only with --rate.
    #[arg(long, value_name = "PACKETS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,

    /// Queue limit of the bottleneck in bytes, in addition to --limit. Only with --rate.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    limit_bytes: Option<u64>,

    /// Create a device that does not exist (it lives as long as protean-wan), instead of failing.
    #[arg(long)]
    create: bool,

    /// Set the MTU of both devices (68 to 65535). Without it the devices keep theirs (1500 for
    /// a new one).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(68..=65535))]
    mtu: Option<u32>,

    /// Segmentation offload on the devices: on, the kernel hands over TCP segment trains of
    /// up to 64 KiB in one read and takes them back in one write (the fast way, whatever the
    /// MTU); off, one packet of at most the MTU per read. auto: on unless --loss is set, so that
    /// each wire packet is lost on its own.
    #[arg(long, value_enum, default_value_t = Offload::Auto)]
    offload: Offload,

    /// Memory for packets in flight, per direction; packets beyond it are dropped and counted.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_size)]
    memory: u64,

    /// Print the counters of each direction every SECONDS on standard error.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    stats: Option<Duration>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Offload {
    Auto,
    On,
    Off,
}

/// `10ms`, `0.5ms`, `200us`, `1s`, `0`.
fn parse_duration(s: &str) -> Result<Nanos, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(0);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{s}' has no unit (ns, us, ms or s)"))?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a number with a unit"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "usec" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" => 1e9,
        _ => return Err(format!("'{unit}' is not a time unit (ns, us, ms or s)")),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns > 3600e9 {
        return Err(format!("'{s}' is more than an hour"));
    }
    Ok(ns.round() as Nanos)
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err("must be more than 0".into());
    }
    Ok(Duration::from_secs_f64(v))
}

/// tc's rate units: `1gbit`, `100mbit`, `12.5mbps` (bytes), `1000000bit`.
fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            format!("'{s}' has no unit (bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps)")
        })?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a number with a unit"))?;
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => {
            return Err(format!(
            "'{unit}' is not a rate unit (bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps)"
        ))
        }
    };
    let bps = (v * scale).round();
    if bps < 1.0 {
        return Err(format!("rate '{s}' must be more than 0 (at least 1bit)"));
    }
    if bps > 1e13 {
        return Err(format!("rate '{s}' is more than 10tbit"));
    }
    Ok(bps as u64)
}

/// `65536`, `64K`, `64KiB`, `1M`, `2G`.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (bytes, or with K, M, G)"))?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{unit}' is not a size unit (K, M, G)")),
    };
    v.checked_mul(scale)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// `1`, `0.5%`: percent.
fn parse_loss(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let num = t.strip_suffix('%').unwrap_or(t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(0.0..100.0).contains(&v) {
        return Err(format!("loss '{s}' is not in [0, 100) percent"));
    }
    Ok(v / 100.0)
}

fn fmt_time(ns: Nanos) -> String {
    if ns == 0 {
        "0".into()
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns >= 1_000_000 {
        format!("{:.3}ms", ns as f64 / 1e6)
    } else {
        format!("{}us", ns as f64 / 1e3)
    }
}

fn fmt_rate(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{}gbit", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{}mbit", b as f64 / 1e6),
        b if b >= 1_000 => format!("{}kbit", b as f64 / 1e3),
        b => format!("{b}bit"),
    }
}

fn stats_line(name: &str, s: &Stats, secs: f64) -> String {
    let g = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed);
    format!(
        "protean-wan: {name}: in {} packets {} bytes, out {} packets {} bytes ({:.1} Mbit/s), \
         lost {}, queue full {}, no memory {}, errors {}, in flight {}, queued {}",
        g(&s.rx_pkts),
        g(&s.rx_bytes),
        g(&s.tx_pkts),
        g(&s.tx_bytes),
        g(&s.tx_bytes) as f64 * 8.0 / secs.max(1e-9) / 1e6,
        g(&s.lost),
        g(&s.overflow),
        g(&s.nomem),
        g(&s.errors),
        g(&s.in_flight),
        g(&s.queued),
    )
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: plain signal-mask calls on a zeroed set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits up to `timeout` for one of the signals in `set`; returns it.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timeout.
    let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (r > 0).then_some(r)
}

fn run(args: Args) -> Result<(), String> {
    if args.site_a == args.site_b {
        return Err(format!(
            "--site-a and --site-b are the same device ({})",
            args.site_a
        ));
    }
    if args.memory < 2 * fwd::BIG as u64 {
        return Err(format!(
            "--memory {} is less than two packet buffers ({} bytes)",
            args.memory,
            2 * fwd::BIG
        ));
    }
    if args.rate.is_none() && (args.limit_bytes.is_some() || args.burst > 0) {
        return Err("--limit-bytes and --burst shape the bottleneck: they need --rate".into());
    }
    let offload = match args.offload {
        Offload::On => true,
        Offload::Off => false,
        Offload::Auto => args.loss == 0.0,
    };
    // Signals are blocked before any thread starts, so that all of them leave them to main.
    let sigs = block_signals();
    let a = tun::open(&args.site_a, args.mtu, offload, args.create)
        .map_err(|e| format!("--site-a: {e}"))?;
    let b = tun::open(&args.site_b, args.mtu, offload, args.create)
        .map_err(|e| format!("--site-b: {e}"))?;
    if a.mtu != b.mtu {
        eprintln!(
            "protean-wan: warning: the MTUs differ ({} {}, {} {}); packets larger than the \
             smaller one are dropped on the way",
            args.site_a, a.mtu, args.site_b, b.mtu
        );
    }

    let start = Instant::now();
    let cfg = |seed: u64| LinkConfig {
        delay: args.delay,
        jitter: args.jitter,
        reorder: args.reorder,
        rate_bps: args.rate,
        burst_bytes: args.burst,
        loss: args.loss,
        limit_pkts: args.limit,
        limit_bytes: args.limit_bytes.unwrap_or(u64::MAX),
        seed,
    };
    let stop = AtomicBool::new(false);
    let (stats_ab, stats_ba) = (Stats::default(), Stats::default());
    let dir = |name, src: &tun::Tun, dst: &tun::Tun, seed, stats| Direction {
        name,
        src: src.raw(),
        dst: dst.raw(),
        link: Link::new(cfg(seed), 0),
        stats,
        stop: &stop,
        memory: args.memory as usize,
    };
    let ab = dir("a->b", &a, &b, args.seed.wrapping_mul(2), &stats_ab);
    let ba = dir(
        "b->a",
        &b,
        &a,
        args.seed.wrapping_mul(2).wrapping_add(1),
        &stats_ba,
    );

    let created = |t: &tun::Tun| if t.created { " (created)" } else { "" };
    println!(
        "protean-wan: ready: {}{} <-> {}{}, delay {}, jitter {}{}, rate {}, burst {}, loss {}%, \
         queue {} packets{}, mtu {}, offload {}",
        args.site_a,
        created(&a),
        args.site_b,
        created(&b),
        fmt_time(args.delay),
        fmt_time(args.jitter),
        if args.reorder { " (reordering)" } else { "" },
        args.rate.map_or("unlimited".into(), fmt_rate),
        args.burst,
        args.loss * 100.0,
        args.limit,
        args.limit_bytes
            .map_or(String::new(), |b| format!(" or {b} bytes")),
        a.mtu,
        if offload { "on" } else { "off" },
    );
    let _ = std::io::stdout().flush();

    let failure = std::thread::scope(|s| {
        let stop_ref = &stop;
        let spawn = |d: Direction<'_>| {
            let name = d.name;
            let r = d.run(start).map_err(|e| format!("{name}: {e}"));
            if r.is_err() {
                stop_ref.store(true, Relaxed);
            }
            r
        };
        let h_ab = s.spawn(move || spawn(ab));
        let h_ba = s.spawn(move || spawn(ba));
        let mut next_stats = args.stats.map(|d| start + d);
        loop {
            if let Some(sig) = wait_signal(&sigs, Duration::from_millis(100)) {
                let name = match sig {
                    libc::SIGINT => "SIGINT",
                    libc::SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                };
                eprintln!("protean-wan: {name}: stopping");
                break;
            }
            if stop.load(Relaxed) {
                break;
            }
            if let (Some(t), Some(every)) = (next_stats, args.stats) {
                if Instant::now() >= t {
                    let secs = start.elapsed().as_secs_f64();
                    eprintln!("{}", stats_line("a->b", &stats_ab, secs));
                    eprintln!("{}", stats_line("b->a", &stats_ba, secs));
                    next_stats = Some(t + every);
                }
            }
        }
        stop.store(true, Relaxed);
        let r_ab = h_ab.join().unwrap_or_else(|_| Err("a->b panicked".into()));
        let r_ba = h_ba.join().unwrap_or_else(|_| Err("b->a panicked".into()));
        r_ab.err().or(r_ba.err())
    });
    let secs = start.elapsed().as_secs_f64();
    eprintln!("{}", stats_line("a->b", &stats_ab, secs));
    eprintln!("{}", stats_line("b->a", &stats_ba, secs));
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("protean-wan: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::NS_PER_SEC;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration("0.5ms"), Ok(500_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("2s"), Ok(2 * NS_PER_SEC));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10m").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("2h").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100Mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("10mbps"), Ok(80_000_000));
        let e = parse_rate("0mbit").unwrap_err();
        assert!(e.contains("more than 0"), "{e}");
        assert!(parse_rate("100").unwrap_err().contains("no unit"));
        assert!(parse_rate("1gb").is_err());
    }

    #[test]
    fn sizes_and_loss() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert!(parse_size("1T").is_err());
        assert!(parse_size("x").is_err());
        assert_eq!(parse_loss("1%"), Ok(0.01));
        assert_eq!(parse_loss("0.5"), Ok(0.005));
        assert!(parse_loss("100").is_err());
        assert!(parse_loss("-1").is_err());
    }

    #[test]
    fn options_parse_and_rate_zero_is_refused() {
        let a = Args::try_parse_from([
            "protean-wan",
            "--site-a",
            "x",
            "--site-b",
            "y:t1",
            "--delay",
            "10ms",
            "--rate",
            "1gbit",
        ])
        .unwrap();
        assert_eq!(a.delay, 10_000_000);
        assert_eq!(a.site_b.dev, "t1");
        assert_eq!(a.rate, Some(1_000_000_000));
        let e = Args::try_parse_from([
            "protean-wan",
            "--site-a",
            "x",
            "--site-b",
            "y",
            "--rate",
            "0gbit",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("more than 0"), "{e}");
        assert!(Args::try_parse_from(["protean-wan", "--site-a", "x"]).is_err());
        assert!(Args::try_parse_from([
            "protean-wan",
            "--site-a",
            "x",
            "--site-b",
            "y",
            "--limit",
            "0"
        ])
        .is_err());
    }

    #[test]
    fn help_documents_every_option() {
        use clap::CommandFactory;
        let help = Args::command().render_long_help().to_string();
        for a in Args::command().get_arguments() {
            if let Some(l) = a.get_long() {
                assert!(
                    help.contains(&format!("--{l}")),
                    "--{l} missing from --help"
                );
                assert!(
                    a.get_long_help().or(a.get_help()).is_some(),
                    "--{l} undocumented"
                );
            }
        }
    }
}
