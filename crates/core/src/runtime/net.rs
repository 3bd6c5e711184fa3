//! The transports of one process, seen by the protocols as one [`Io`].
//!
//! Each peer has a route chosen at setup (coarse-grained reconfiguration: shm for processes on
//! this host when allowed, else TCP; self for our own process). Sending dispatches on the
//! route with a match, not a virtual call.

use std::collections::VecDeque;

use crate::mpi::pml::{Io, Pml, SendError};
use crate::proto::frame::{self, HEADER_LEN};
use crate::proto::policy::Route;
use crate::transport::shm::Shm;
use crate::transport::tcp::Tcp;
use crate::transport::{FrameSink, Gpid, Sent, Token};

/// Bytes queued on a TCP connection at or above which no eager message starts on it.
const TCP_QUEUE_MAX: usize = 1 << 20;

pub struct Net {
    pub me: Gpid,
    pub shm: Option<Shm>,
    pub tcp: Option<Tcp>,
    /// Frames to our own process, delivered at the next progress pass.
    pub selfq: VecDeque<([u8; HEADER_LEN], Vec<u8>)>,
    pub routes: Vec<Route>,
    pub tcp_frag: usize,
}

impl Net {
    /// Poll every transport and hand arrived frames to the protocols.
    #[inline]
    pub fn poll(&mut self, pml: &mut Pml) -> usize {
        let mut n = 0;
        if let Some(shm) = self.shm.as_mut() {
            n += shm.poll(pml);
        }
        if let Some(tcp) = self.tcp.as_mut() {
            n += tcp.poll(pml);
        }
        while let Some((h, p)) = self.selfq.pop_front() {
            pml.on_frame(self.me, &h, &p);
            n += 1;
        }
        n
    }

    /// Queue what is sent from now on where a transport gains by writing it together (TCP,
    /// see `Tcp::hold`), until [`Net::release`].
    #[inline]
    pub fn hold(&mut self) {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.hold();
        }
    }

    /// Write what was held and report the sends it finished.
    #[inline]
    pub fn release(&mut self, pml: &mut Pml) {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.release(pml);
        }
    }

    /// Anything still to be written by a transport?
    pub fn has_output(&self) -> bool {
        !self.selfq.is_empty() || self.tcp.as_ref().is_some_and(|t| t.has_output())
    }
}

impl Io for Net {
    #[inline]
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        token: Token,
    ) -> Result<Sent, SendError> {
        match self
            .routes
            .get(peer as usize)
            .copied()
            .unwrap_or(Route::Unreachable)
        {
            Route::Shm => {
                let shm = self.shm.as_mut().expect("shm route without shm transport");
                if shm.push(peer, hdr, &[small, body]) {
                    Ok(Sent::Done)
                } else {
                    Err(SendError::NotNow)
                }
            }
            Route::Tcp => {
                let tcp = self.tcp.as_mut().expect("tcp route without tcp transport");
                // An eager message starts only while little waits ahead of it: the sends
                // behind wait in the engine, whose plan for them then follows the receiver's
                // latest report (the kernel's socket buffers hold megabytes already). A
                // request-to-send goes at once: it commits to nothing, and holding it back
                // would stall a stream of rendezvous messages for a handshake each.
                if frame::is_eager(hdr) && tcp.queued_bytes(peer) >= TCP_QUEUE_MAX {
                    return Err(SendError::NotNow);
                }
                tcp.post(peer, hdr, small, body, token)
                    .map_err(|e| SendError::Failed(e.to_string()))
            }
            Route::SelfLoop => {
                let mut v = Vec::with_capacity(small.len() + body.len());
                v.extend_from_slice(small);
                v.extend_from_slice(body);
                self.selfq.push_back((*hdr, v));
                Ok(Sent::Done)
            }
            Route::Unreachable => Err(SendError::Failed(format!(
                "no transport reaches process {peer}"
            ))),
        }
    }

    #[inline]
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        match self
            .routes
            .get(peer as usize)
            .copied()
            .unwrap_or(Route::Unreachable)
        {
            Route::Shm => self
                .shm
                .as_mut()
                .expect("shm route without shm transport")
                .push(peer, hdr, &[body]),
            // Behind queued output the frame would have to be copied: let the caller take the
            // request path, which lends the buffer to the transport instead.
            Route::Tcp => {
                let tcp = self.tcp.as_mut().expect("tcp route without tcp transport");
                !tcp.has_queued(peer) && tcp.post(peer, hdr, &[], body, Token::NONE).is_ok()
            }
            Route::SelfLoop => self.send(peer, hdr, &[], body, Token::NONE).is_ok(),
            Route::Unreachable => false,
        }
    }

    #[inline]
    fn max_payload(&self, peer: Gpid) -> usize {
        match self
            .routes
            .get(peer as usize)
            .copied()
            .unwrap_or(Route::Unreachable)
        {
            Route::Shm => self.shm.as_ref().map_or(0, |s| s.max_payload(peer)),
            Route::Tcp => self.tcp_frag,
            Route::SelfLoop => 1 << 30,
            Route::Unreachable => 0,
        }
    }
}
