//! The dispatcher: the transports of one process, seen by the protocol layer as one
//! [`Transport`].
//!
//! Each peer has a route chosen at setup (coarse-grained reconfiguration: self for our own
//! process, shared memory for processes on this host when allowed, else TCP). Every call
//! dispatches on the peer's route with a match, not a virtual call, and calls nothing but the
//! [`Transport`] trait of the transport behind it; a new transport adds a route, a field and
//! an arm to [`on_route!`].

use super::selfloop::SelfLoop;
use super::shm::Shm;
use super::tcp::Tcp;
use super::{
    Caps, Copied, CopyError, FrameSink, Gpid, Region, Route, SendError, Sent, Span, Token,
    Transport, HEADER_LEN,
};

pub struct Net {
    me: Gpid,
    routes: Vec<Route>,
    own: SelfLoop,
    shm: Option<Shm>,
    tcp: Option<Tcp>,
}

/// `on_route!(net, peer, t => expr, unreachable)`: evaluate `expr` with `t` the transport
/// that reaches `peer`, or `unreachable` when none does.
macro_rules! on_route {
    ($net:expr, $peer:expr, $t:ident => $e:expr, $none:expr) => {
        match $net.routes.get($peer as usize).copied() {
            Some(Route::Shm) => match $net.shm.as_mut() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Tcp) => match $net.tcp.as_mut() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::SelfLoop) => {
                let $t = &mut $net.own;
                $e
            }
            Some(Route::Unreachable) | None => $none,
        }
    };
}

/// The same for `&self` methods.
macro_rules! on_route_ref {
    ($net:expr, $peer:expr, $t:ident => $e:expr, $none:expr) => {
        match $net.routes.get($peer as usize).copied() {
            Some(Route::Shm) => match $net.shm.as_ref() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::Tcp) => match $net.tcp.as_ref() {
                Some($t) => $e,
                None => $none,
            },
            Some(Route::SelfLoop) => {
                let $t = &$net.own;
                $e
            }
            Some(Route::Unreachable) | None => $none,
        }
    };
}

fn unreachable(peer: Gpid) -> SendError {
    SendError::Failed(format!("no transport reaches process {peer}"))
}

impl Net {
    /// The transports of process `me`, and the route to each process (indexed by gpid).
    pub fn new(me: Gpid, routes: Vec<Route>, shm: Option<Shm>, tcp: Option<Tcp>) -> Net {
        Net {
            me,
            routes,
            own: SelfLoop::new(me),
            shm,
            tcp,
        }
    }

    pub fn me(&self) -> Gpid {
        self.me
    }

    /// The route to every process, by gpid.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route to `peer`.
    #[inline]
    pub fn route(&self, peer: Gpid) -> Route {
        self.routes
            .get(peer as usize)
            .copied()
            .unwrap_or(Route::Unreachable)
    }

    /// Is a transport of this kind open?
    pub fn has(&self, r: Route) -> bool {
        match r {
            Route::SelfLoop => true,
            Route::Shm => self.shm.is_some(),
            Route::Tcp => self.tcp.is_some(),
            Route::Unreachable => false,
        }
    }

    /// Largest payload of a frame sent over TCP (`tcp_frag_bytes`, writable at run time).
    pub fn set_tcp_frag(&mut self, frag: usize) {
        if let Some(t) = self.tcp.as_mut() {
            t.set_frag(frag);
        }
    }

    /// Cooperative single copy on shared memory (`shm_coop_min`, `shm_coop_chunk`).
    pub fn set_shm_copy(&mut self, min: usize, chunk: usize) {
        if let Some(s) = self.shm.as_mut() {
            s.set_copy(min, chunk);
        }
    }
}

impl Transport for Net {
    fn name(&self) -> &'static str {
        "net"
    }

    #[inline]
    fn reaches(&self, peer: Gpid) -> bool {
        on_route_ref!(self, peer, t => t.reaches(peer), false)
    }

    #[inline]
    fn caps(&self, peer: Gpid) -> Caps {
        on_route_ref!(self, peer, t => t.caps(peer), Caps::NONE)
    }

    #[inline]
    fn queued(&self, peer: Gpid) -> usize {
        on_route_ref!(self, peer, t => t.queued(peer), 0)
    }

    #[inline]
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        on_route!(self, peer, t => t.send(peer, hdr, small, body, token), Err(unreachable(peer)))
    }

    #[inline]
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        on_route!(self, peer, t => t.try_send(peer, hdr, body), false)
    }

    /// Poll every transport and hand arrived frames to the protocols.
    #[inline]
    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        if let Some(shm) = self.shm.as_mut() {
            n += shm.progress(sink);
        }
        if let Some(tcp) = self.tcp.as_mut() {
            n += tcp.progress(sink);
        }
        if self.own.has_work() {
            n += self.own.progress(sink);
        }
        n
    }

    fn has_work(&self) -> bool {
        self.own.has_work()
            || self.shm.as_ref().is_some_and(|s| s.has_work())
            || self.tcp.as_ref().is_some_and(|t| t.has_work())
    }

    #[inline]
    fn hold(&mut self) {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.hold();
        }
    }

    #[inline]
    fn release<S: FrameSink>(&mut self, sink: &mut S) {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.release(sink);
        }
    }

    fn expose(&mut self, peer: Gpid, buf: Span) -> Option<Region> {
        on_route!(self, peer, t => t.expose(peer, buf), None)
    }

    fn retract(&mut self, peer: Gpid, region: &Region) {
        on_route!(self, peer, t => t.retract(peer, region), ())
    }

    fn get(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        on_route!(self, peer, t => t.get(peer, region, offset, dst, token),
            Err(CopyError::Refused(format!("no transport reaches process {peer}"))))
    }

    fn put(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        src: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        on_route!(self, peer, t => t.put(peer, region, offset, src, token),
            Err(CopyError::Refused(format!("no transport reaches process {peer}"))))
    }

    /// Close every channel and unmap shared memory (at finalize).
    fn shutdown(&mut self) {
        if let Some(t) = self.tcp.as_mut() {
            t.shutdown();
        }
        self.shm = None;
    }
}
