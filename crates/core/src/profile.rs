//! The profiler's counters: what the point-to-point engine observes, per transport.
//!
//! Every counter is kept per route (self, shm, tcp, udp) and read as an aggregate too. The table
//! [`PVARS`] is the single description of them: `protean-info --counters` prints it and the
//! MPI_T interface exposes each entry as a performance variable (class COUNTER, continuous,
//! read-only). Names of per-protocol counters contain the protocol's short name (`eager`,
//! `rndv`, `split` for eager-rendezvous) and `sent`.

use crate::transport::Route;

/// Counters of one route.
#[derive(Debug, Default, Clone, Copy)]
pub struct RouteCounters {
    pub eager_sent: u64,
    pub eager_bytes: u64,
    pub rndv_sent: u64,
    pub rndv_bytes: u64,
    /// Eager-rendezvous: first part eager, rest by rendezvous.
    pub split_sent: u64,
    pub split_bytes: u64,
    /// Messages that arrived before their receive was posted.
    pub unexpected: u64,
    /// Messages that found their receive already posted.
    pub preposted: u64,
    /// Rendezvous messages read straight from the sender's memory.
    pub single_copy: u64,
}

/// All counters of the process.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub routes: [RouteCounters; 4],
    /// Malformed or stale frames dropped.
    pub bad_frames: u64,
    /// What the transports counted (refused connections, lanes); kept by them and copied
    /// here when read.
    pub transport: crate::transport::Stats,
    /// Channel changes and traffic by path (fast channel or shared queue), kept by the
    /// transports and copied here when read.
    pub channels: crate::transport::ChannelCounters,
}

/// The channel variables: name, description, value.
type ChanVar = (
    &'static str,
    &'static str,
    fn(&crate::transport::ChannelCounters) -> u64,
);
const CHAN_VARS: &[ChanVar] = &[
    (
        "protean_chan_promotions",
        "peers that switched to a fast channel of this process (CONNECTED)",
        |c| c.promotions,
    ),
    (
        "protean_chan_demotions",
        "fast channels of this process taken back and drained (QUIESCE -> DISCONNECTED)",
        |c| c.demotions,
    ),
    (
        "protean_chan_fast_frames_recvd",
        "frames that arrived through fast channels (shared-memory rings; TCP connections of hybrid channels), transport records included",
        |c| c.usage.fast_frames,
    ),
    (
        "protean_chan_fast_bytes_recvd",
        "payload bytes that arrived through fast channels",
        |c| c.usage.fast_bytes,
    ),
    (
        "protean_chan_shared_frames_recvd",
        "frames that arrived through the shared path (the shared-memory receive queue; datagrams of hybrid channels), transport records included",
        |c| c.usage.shared_frames,
    ),
    (
        "protean_chan_shared_bytes_recvd",
        "payload bytes that arrived through the shared path",
        |c| c.usage.shared_bytes,
    ),
    (
        "protean_chan_conn_promotions",
        "hybrid channels (transports=udp,tcp): peers that switched from datagrams to a TCP connection to this process",
        |c| c.conn_promotions,
    ),
    (
        "protean_chan_conn_demotions",
        "hybrid channels: peers whose TCP connection to this process was taken back and drained (back on datagrams)",
        |c| c.conn_demotions,
    ),
    (
        "protean_chan_conn_frames_recvd",
        "hybrid channels: frames that arrived through TCP connections, transport records included",
        |c| c.conn_usage.fast_frames,
    ),
    (
        "protean_chan_conn_bytes_recvd",
        "hybrid channels: payload bytes that arrived through TCP connections",
        |c| c.conn_usage.fast_bytes,
    ),
    (
        "protean_chan_dgram_frames_recvd",
        "hybrid channels: frames that arrived by datagram from the peers they cover, transport records included",
        |c| c.conn_usage.shared_frames,
    ),
    (
        "protean_chan_dgram_bytes_recvd",
        "hybrid channels: payload bytes that arrived by datagram from the peers they cover",
        |c| c.conn_usage.shared_bytes,
    ),
];

/// Index of a route in [`Counters::routes`].
#[inline(always)]
pub fn route_index(r: Route) -> usize {
    match r {
        Route::SelfLoop => 0,
        Route::Shm => 1,
        Route::Tcp | Route::Unreachable => 2,
        Route::Udp => 3,
    }
}

pub const ROUTE_NAMES: [&str; 4] = ["self", "shm", "tcp", "udp"];

impl Counters {
    #[inline(always)]
    pub fn on(&mut self, r: Route) -> &mut RouteCounters {
        &mut self.routes[route_index(r)]
    }

    /// The value of pvar `i` of [`PVARS`].
    pub fn read(&self, i: usize) -> u64 {
        let Some(p) = PVARS.get(i) else { return 0 };
        match p.route {
            Some(r) => (p.field)(&self.routes[r]),
            None if p.name == "protean_bad_frames" => self.bad_frames,
            None if p.name.starts_with("protean_chan_") => CHAN_VARS
                .iter()
                .find(|v| v.0 == p.name)
                .map_or(0, |v| (v.2)(&self.channels)),
            None if p.name == "protean_rejected_connections" => self.transport.rejected,
            None if p.name == "protean_rejected_datagrams" => self.transport.rejected_datagrams,
            None if p.name == "protean_tcp_lanes_open" => self.transport.extra_lanes,
            None => match p.name.strip_prefix("protean_tcp_lane") {
                Some(rest) => rest
                    .split('_')
                    .next()
                    .and_then(|k| k.parse::<usize>().ok())
                    .and_then(|k| self.transport.lane_bytes.get(k).copied())
                    .unwrap_or(0),
                None => self.routes.iter().map(p.field).sum(),
            },
        }
    }
}

/// A counter as a performance variable.
pub struct Pvar {
    pub name: String,
    pub desc: String,
    /// None: the sum over routes.
    pub route: Option<usize>,
    pub field: fn(&RouteCounters) -> u64,
}

type Field = (&'static str, &'static str, fn(&RouteCounters) -> u64);

/// Counter fields, in the order their variables are numbered.
const FIELDS: &[Field] = &[
    ("eager_sent", "messages sent with the eager protocol", |c| c.eager_sent),
    ("rndv_sent", "messages sent with the rendezvous protocol", |c| c.rndv_sent),
    ("split_sent", "messages sent with the eager-rendezvous protocol (first part eager, the rest by rendezvous)", |c| c.split_sent),
    ("eager_bytes_sent", "bytes sent with the eager protocol", |c| c.eager_bytes),
    ("rndv_bytes_sent", "bytes sent with the rendezvous protocol", |c| c.rndv_bytes),
    ("split_bytes_sent", "bytes sent with the eager-rendezvous protocol", |c| c.split_bytes),
    ("unexpected_recvd", "messages that arrived before their receive was posted", |c| c.unexpected),
    ("preposted_recvd", "messages that found their receive already posted", |c| c.preposted),
    ("single_copy_recvd", "rendezvous messages read straight from the sender's memory", |c| c.single_copy),
];

fn no_field(_: &RouteCounters) -> u64 {
    0
}

/// Every performance variable: the aggregates first (`protean_<field>`), then per route
/// (`protean_<field>_<route>`), then `protean_bad_frames`, `protean_rejected_connections` and
/// `protean_rejected_datagrams`.
pub static PVARS: std::sync::LazyLock<Vec<Pvar>> = std::sync::LazyLock::new(|| {
    let mut v = Vec::new();
    for (name, desc, field) in FIELDS {
        v.push(Pvar {
            name: format!("protean_{name}"),
            desc: format!("{desc}, every transport"),
            route: None,
            field: *field,
        });
    }
    for (r, rname) in ROUTE_NAMES.iter().enumerate() {
        for (name, desc, field) in FIELDS {
            v.push(Pvar {
                name: format!("protean_{name}_{rname}"),
                desc: format!("{desc}, over {rname}"),
                route: Some(r),
                field: *field,
            });
        }
    }
    v.push(Pvar {
        name: "protean_bad_frames".into(),
        desc: "malformed or stale frames dropped".into(),
        route: None,
        field: no_field,
    });
    v.push(Pvar {
        name: "protean_tcp_lanes_open".into(),
        desc: "TCP connections open to peers beyond the first per peer: lanes that large messages are striped over".into(),
        route: None,
        field: no_field,
    });
    for k in 0..crate::transport::STAT_LANES {
        v.push(Pvar {
            name: format!("protean_tcp_lane{k}_bytes_sent"),
            desc: format!("bytes of rendezvous data sent on TCP lane {k} (every peer)"),
            route: None,
            field: no_field,
        });
    }
    for (name, desc, _) in CHAN_VARS {
        v.push(Pvar {
            name: name.to_string(),
            desc: desc.to_string(),
            route: None,
            field: no_field,
        });
    }
    v.push(Pvar {
        name: "protean_rejected_connections".into(),
        desc: "connections refused: failed or forged handshakes, a second connection from a connected process, handshakes not finished in time, floods".into(),
        route: None,
        field: no_field,
    });
    v.push(Pvar {
        name: "protean_rejected_datagrams".into(),
        desc: "UDP datagrams dropped unread: failed authentication (forged, altered, from outside the job), malformed, or naming a process outside the job".into(),
        route: None,
        field: no_field,
    });
    v
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_sum_routes_and_names_are_unique() {
        let mut c = Counters::default();
        c.on(Route::Shm).eager_sent = 3;
        c.on(Route::Tcp).eager_sent = 4;
        c.on(Route::SelfLoop).rndv_bytes = 9;
        c.bad_frames = 2;
        c.channels.promotions = 5;
        c.channels.usage.fast_bytes = 6;
        let idx = |n: &str| PVARS.iter().position(|p| p.name == n).unwrap();
        assert_eq!(c.read(idx("protean_eager_sent")), 7);
        assert_eq!(c.read(idx("protean_eager_sent_tcp")), 4);
        assert_eq!(c.read(idx("protean_rndv_bytes_sent")), 9);
        assert_eq!(c.read(idx("protean_bad_frames")), 2);
        assert_eq!(c.read(idx("protean_chan_promotions")), 5);
        assert_eq!(c.read(idx("protean_chan_fast_bytes_recvd")), 6);
        let mut names: Vec<_> = PVARS.iter().map(|p| &p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PVARS.len());
        // The first variable naming each protocol and "sent" counts that protocol's messages.
        let first = |a: &str| {
            PVARS
                .iter()
                .find(|p| p.name.contains(a) && p.name.contains("sent"))
                .unwrap()
        };
        assert_eq!(first("eager").name, "protean_eager_sent");
        assert_eq!(first("rndv").name, "protean_rndv_sent");
        assert_eq!(c.read(PVARS.len()), 0);
    }
}
