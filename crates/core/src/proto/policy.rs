//! The policy: which protocol carries a message.
//!
//! Given what the engine knows about the peer (its route, the largest frame the channel in use
//! carries, whether single copy is possible) and the message (size, send mode), the policy
//! returns a [`Plan`]. `static` uses per-route size thresholds (like every static MPI); the
//! forced settings exist for experiments.

/// How a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The whole message in one frame, buffered by the receiver if unexpected.
    Eager,
    /// A request-to-send; data moves once the receiver has matched it.
    Rendezvous,
    /// The first `prefix` bytes with the request-to-send, the rest by rendezvous.
    EagerRendezvous { prefix: usize },
}

/// Which transport reaches a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    SelfLoop,
    Shm,
    Tcp,
    /// No transport reaches this process.
    Unreachable,
}

/// Protocol selection setting (`protocol` tunable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Static,
    Eager,
    Rendezvous,
    EagerRendezvous,
}

impl Protocol {
    /// From the index of [`crate::config::PROTOCOLS`].
    pub fn from_index(i: usize) -> Protocol {
        match i {
            1 => Protocol::Eager,
            2 => Protocol::Rendezvous,
            3 => Protocol::EagerRendezvous,
            _ => Protocol::Static,
        }
    }
}

/// Inputs that do not change per message.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub protocol: Protocol,
    pub eager_limit_shm: usize,
    pub eager_limit_tcp: usize,
    pub eager_limit_self: usize,
    pub prefix: usize,
}

/// Bytes of a request-to-send's payload before any eager prefix.
pub const RTS_INFO: usize = crate::proto::frame::RndvInfo::LEN;

impl Policy {
    pub fn eager_limit(&self, route: Route) -> usize {
        match route {
            Route::Shm => self.eager_limit_shm,
            Route::Tcp => self.eager_limit_tcp,
            Route::SelfLoop => self.eager_limit_self,
            Route::Unreachable => 0,
        }
    }

    /// Plan for a message of `len` bytes to a peer on `route` whose channel carries frames of
    /// at most `max_payload` bytes.
    #[inline]
    pub fn plan(&self, route: Route, len: usize, max_payload: usize) -> Plan {
        let fits = len <= max_payload;
        match self.protocol {
            Protocol::Static => {
                if fits && len <= self.eager_limit(route) {
                    Plan::Eager
                } else {
                    Plan::Rendezvous
                }
            }
            Protocol::Eager if fits => Plan::Eager,
            Protocol::Eager => self.eager_rndv(len, max_payload),
            Protocol::Rendezvous => Plan::Rendezvous,
            Protocol::EagerRendezvous => self.eager_rndv(len, max_payload),
        }
    }

    /// The largest message [`Policy::plan`] sends eagerly to a peer on `route` (every smaller
    /// one is eager too), or None when no message is sent eagerly. Lets the message path test
    /// one number instead of asking the policy.
    pub fn eager_max(&self, route: Route, max_payload: usize) -> Option<usize> {
        match self.protocol {
            Protocol::Static => Some(self.eager_limit(route).min(max_payload)),
            Protocol::Eager => Some(max_payload),
            Protocol::Rendezvous | Protocol::EagerRendezvous => None,
        }
    }

    fn eager_rndv(&self, len: usize, max_payload: usize) -> Plan {
        // Something must be left for the rendezvous part, or it is just an eager message.
        let prefix = self
            .prefix
            .min(max_payload.saturating_sub(RTS_INFO))
            .min(len.saturating_sub(1));
        if prefix == 0 {
            Plan::Rendezvous
        } else {
            Plan::EagerRendezvous { prefix }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(protocol: Protocol) -> Policy {
        Policy {
            protocol,
            eager_limit_shm: 1000,
            eager_limit_tcp: 5000,
            eager_limit_self: 100,
            prefix: 300,
        }
    }

    #[test]
    fn static_thresholds_per_route() {
        let s = p(Protocol::Static);
        assert_eq!(s.plan(Route::Shm, 1000, 1 << 20), Plan::Eager);
        assert_eq!(s.plan(Route::Shm, 1001, 1 << 20), Plan::Rendezvous);
        assert_eq!(s.plan(Route::Tcp, 4000, 1 << 20), Plan::Eager);
        assert_eq!(s.plan(Route::SelfLoop, 101, 1 << 20), Plan::Rendezvous);
        // The channel's frame size caps eager whatever the limit says.
        assert_eq!(s.plan(Route::Shm, 900, 800), Plan::Rendezvous);
    }

    #[test]
    fn eager_max_agrees_with_plan() {
        for proto in [
            Protocol::Static,
            Protocol::Eager,
            Protocol::Rendezvous,
            Protocol::EagerRendezvous,
        ] {
            let pol = p(proto);
            for route in [Route::Shm, Route::Tcp, Route::SelfLoop] {
                for max in [0usize, 50, 800, 1 << 20] {
                    let m = pol.eager_max(route, max);
                    for len in [
                        0usize,
                        1,
                        49,
                        50,
                        51,
                        99,
                        100,
                        101,
                        799,
                        800,
                        801,
                        1000,
                        4999,
                        5000,
                        5001,
                        1 << 20,
                    ] {
                        let eager = pol.plan(route, len, max) == Plan::Eager;
                        assert_eq!(
                            eager,
                            m.is_some_and(|m| len <= m),
                            "{proto:?} {route:?} max {max} len {len}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn forced_protocols() {
        assert_eq!(
            p(Protocol::Eager).plan(Route::Shm, 50_000, 1 << 20),
            Plan::Eager
        );
        assert_eq!(
            p(Protocol::Eager).plan(Route::Shm, 50_000, 1000),
            Plan::EagerRendezvous { prefix: 300 }
        );
        assert_eq!(
            p(Protocol::Rendezvous).plan(Route::Shm, 0, 1000),
            Plan::Rendezvous
        );
        assert_eq!(
            p(Protocol::EagerRendezvous).plan(Route::Tcp, 10_000, 1 << 20),
            Plan::EagerRendezvous { prefix: 300 }
        );
        assert_eq!(
            p(Protocol::EagerRendezvous).plan(Route::Tcp, 100, 1 << 20),
            Plan::EagerRendezvous { prefix: 99 }
        );
        assert_eq!(
            p(Protocol::EagerRendezvous).plan(Route::Tcp, 1, 1 << 20),
            Plan::Rendezvous
        );
        assert_eq!(
            p(Protocol::EagerRendezvous).plan(Route::Shm, 10_000, 200),
            Plan::EagerRendezvous {
                prefix: 200 - RTS_INFO
            }
        );
    }
}
