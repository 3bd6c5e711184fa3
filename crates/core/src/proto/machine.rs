//! The message-transfer protocols as state machines, without I/O, buffers or matching.
//!
//! A send and a receive each run one protocol, chosen per message by the policy
//! ([`super::policy::Plan`]):
//!
//! ```text
//! eager             sender: Eager ─────────────────────────────▶ receiver: match, copy, done
//!                   (synchronous mode: ◀── SyncAck when matched)
//! rendezvous        sender: Rts ─▶ receiver matches ─┬─▶ reads the data itself (single copy) ◀── Fin
//!                                                    └─▶ Cts ─▶ sender streams Data ─▶ done
//! eager-rendezvous  as rendezvous, with the first bytes of the message inside the Rts
//! ```
//!
//! [`Sender`] and [`Receiver`] take the events of their side (frames that arrived, what the
//! transport did, what the user asked) and say what to do next ([`SendAction`],
//! [`RecvAction`]); the engine (`mpi::pml`) does it. An event that does not belong in the
//! current state is a [`ProtocolError`]: the engine drops it — a frame for a request that has
//! moved on (a clear-to-send racing with a cancel, say) is stale, not fatal.
//!
//! Cancellation: a receive can be cancelled while posted (not once matched); a send while it
//! waits behind other sends, or once its first frame went out while the receiver has not
//! matched it (also a standard eager send that is complete here: its message may still wait
//! in the receiver's unexpected queue). The receiver answers a cancel request; a send that
//! lost the race goes on where it was.
//! Truncation: a message longer than the receive delivers what fits and reports
//! `MPI_ERR_TRUNCATE` ([`Outcome`]).

use std::fmt;

use super::policy::Plan;

/// Where a send is in its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendState {
    /// Created; no frame sent yet.
    Idle,
    /// Waiting behind earlier frames to the same peer (transport said "not now").
    Backlogged,
    /// Eager message (standard mode) handed to the transport: complete here; whether the
    /// receiver matched it is not known, so a cancel may still remove it there.
    Sent,
    /// Synchronous eager message delivered; waiting for the receiver's match.
    WaitAck,
    /// Request-to-send delivered; waiting for clear-to-send or for the single-copy finish.
    WaitCts,
    /// Sending Data frames.
    Streaming,
    /// A cancel request is on its way to the receiver.
    Cancelling,
    Done,
}

/// What happens to a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendEvent {
    /// The transport could not take the first frame now.
    NotNow,
    /// The first frame (Eager or Rts) went out under `plan`.
    FirstSent { plan: Plan, sync: bool },
    /// Clear-to-send arrived.
    Cts,
    /// The receiver copied the data itself (single copy) and finished.
    Fin,
    /// The receiver matched a synchronous eager message.
    SyncAck,
    /// The last Data frame was handed to the transport.
    AllDataQueued,
    /// MPI_Cancel.
    Cancel,
    /// The receiver answered a cancel request.
    CancelAnswer { cancelled: bool },
    /// The peer is gone.
    Failed,
}

/// What the engine does after a send event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendAction {
    Nothing,
    /// Queue the send behind the peer's backlog.
    Backlog,
    /// Start sending Data frames.
    Stream,
    /// Send a cancel request to the receiver.
    AskCancel,
    /// Take the send out of the backlog: it is cancelled.
    Unbacklog,
    /// The protocol is over: complete once the transports release the buffer.
    Complete,
    /// The send was cancelled: complete it with the cancelled flag.
    CompleteCancelled,
}

/// An event that does not belong in the current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The sending side of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sender {
    state: SendState,
    /// Where a send was when a cancel was requested, to go on if the cancel fails.
    pre_cancel: SendState,
}

impl Default for Sender {
    fn default() -> Sender {
        Sender {
            state: SendState::Idle,
            pre_cancel: SendState::Idle,
        }
    }
}

impl Sender {
    #[inline(always)]
    pub fn state(&self) -> SendState {
        self.state
    }

    #[inline(always)]
    pub fn is_done(&self) -> bool {
        matches!(self.state, SendState::Done | SendState::Sent)
    }

    /// A send whose eager message went out before it had a request (the request-free fast
    /// path): in [`SendState::Sent`].
    pub fn sent() -> Sender {
        Sender {
            state: SendState::Sent,
            pre_cancel: SendState::Idle,
        }
    }

    /// Take an event; the state moves on only when the event belongs in it.
    #[inline]
    pub fn on(&mut self, ev: SendEvent) -> Result<SendAction, ProtocolError> {
        use SendAction as A;
        use SendEvent as E;
        use SendState as S;
        let (next, action) = match (self.state, ev) {
            (_, E::Failed) => (S::Done, A::Complete),
            (S::Idle | S::Backlogged, E::NotNow) => (S::Backlogged, A::Backlog),
            (S::Idle | S::Backlogged, E::FirstSent { plan, sync }) => match plan {
                Plan::Eager if sync => (S::WaitAck, A::Nothing),
                Plan::Eager => (S::Sent, A::Complete),
                Plan::Rendezvous | Plan::EagerRendezvous { .. } => (S::WaitCts, A::Nothing),
            },
            (S::Backlogged, E::Cancel) => (S::Done, A::Unbacklog),
            // Not matched yet, as far as we know: ask the receiver to take the message out of
            // its unexpected queue. A standard eager send is complete here and becomes
            // incomplete again until the answer comes.
            (S::Sent | S::WaitAck | S::WaitCts, E::Cancel) => {
                self.pre_cancel = self.state;
                (S::Cancelling, A::AskCancel)
            }
            // Too late (the data is moving or moved) or cancelled already: nothing to do.
            (S::Idle | S::Streaming | S::Cancelling | S::Done, E::Cancel) => return Ok(A::Nothing),
            (S::WaitAck, E::SyncAck) => (S::Done, A::Complete),
            // A cancel that lost the race: the receiver matched meanwhile.
            (S::WaitCts | S::Cancelling, E::Cts) => (S::Streaming, A::Stream),
            (S::WaitCts | S::Cancelling, E::Fin) => (S::Done, A::Complete),
            (S::Cancelling, E::SyncAck) => (S::Done, A::Complete),
            (S::Streaming, E::AllDataQueued) => (S::Done, A::Complete),
            (S::Cancelling, E::CancelAnswer { cancelled: true }) => (S::Done, A::CompleteCancelled),
            // Matched already: the protocol goes on where it was (an eager send is complete
            // again).
            (S::Cancelling, E::CancelAnswer { cancelled: false }) => match self.pre_cancel {
                S::Sent => (S::Sent, A::Complete),
                s => (s, A::Nothing),
            },
            (s, e) => return Err(ProtocolError(format!("send: {e:?} while {s:?}"))),
        };
        self.state = next;
        Ok(action)
    }
}

/// Where a receive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvState {
    Idle,
    /// In the posted queue.
    Posted,
    /// Matched a rendezvous; the data is on its way.
    Receiving,
    Done,
}

/// How a receive ends: bytes delivered, and whether the message was longer than the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub bytes: usize,
    pub truncated: bool,
}

impl Outcome {
    /// A message of `len` bytes into a receive of `cap` bytes.
    #[inline(always)]
    pub fn of(len: usize, cap: usize) -> Outcome {
        Outcome {
            bytes: len.min(cap),
            truncated: len > cap,
        }
    }
}

/// What the engine does after a receive event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvAction {
    Nothing,
    /// Complete the receive with this outcome.
    Complete(Outcome),
    /// The data beyond the first `from` bytes must be fetched (`take` bytes in all fit):
    /// read it directly (single copy) or ask the sender for it (clear-to-send).
    Fetch {
        from: usize,
        take: usize,
    },
    /// Take the receive out of the posted queue: it is cancelled.
    CompleteCancelled,
}

/// The receiving side of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receiver {
    state: RecvState,
    /// Rendezvous: message length, receive capacity, bytes arrived.
    len: usize,
    cap: usize,
    got: usize,
}

impl Default for Receiver {
    fn default() -> Receiver {
        Receiver {
            state: RecvState::Idle,
            len: 0,
            cap: 0,
            got: 0,
        }
    }
}

impl Receiver {
    #[inline(always)]
    pub fn state(&self) -> RecvState {
        self.state
    }

    /// Waiting in the posted queue.
    pub fn post(&mut self) -> Result<(), ProtocolError> {
        match self.state {
            RecvState::Idle => {
                self.state = RecvState::Posted;
                Ok(())
            }
            s => Err(ProtocolError(format!("receive: posted while {s:?}"))),
        }
    }

    /// Matched an eager message of `len` bytes (from the wire or the unexpected queue).
    #[inline]
    pub fn eager(&mut self, len: usize, cap: usize) -> Result<RecvAction, ProtocolError> {
        match self.state {
            RecvState::Idle | RecvState::Posted => {
                self.state = RecvState::Done;
                Ok(RecvAction::Complete(Outcome::of(len, cap)))
            }
            s => Err(ProtocolError(format!("receive: eager message while {s:?}"))),
        }
    }

    /// Matched a request-to-send for `len` bytes that carried the first `prefix` bytes.
    pub fn rendezvous(
        &mut self,
        len: usize,
        prefix: usize,
        cap: usize,
    ) -> Result<RecvAction, ProtocolError> {
        if !matches!(self.state, RecvState::Idle | RecvState::Posted) {
            return Err(ProtocolError(format!(
                "receive: request-to-send while {:?}",
                self.state
            )));
        }
        if prefix > len {
            return Err(ProtocolError(format!(
                "receive: a prefix of {prefix} bytes for a message of {len}"
            )));
        }
        (self.len, self.cap, self.got) = (len, cap, prefix);
        if prefix == len {
            self.state = RecvState::Done;
            return Ok(RecvAction::Complete(Outcome::of(len, cap)));
        }
        self.state = RecvState::Receiving;
        Ok(RecvAction::Fetch {
            from: prefix,
            take: len.min(cap),
        })
    }

    /// Matched an eager message of `len` bytes that the transport writes straight into the
    /// buffer (it fits); [`Receiver::fetched`] when it is there.
    pub fn eager_placing(&mut self, len: usize, cap: usize) -> Result<(), ProtocolError> {
        if !matches!(self.state, RecvState::Idle | RecvState::Posted) || len > cap {
            return Err(ProtocolError(format!(
                "receive: placing {len} bytes into {cap} while {:?}",
                self.state
            )));
        }
        (self.len, self.cap, self.got) = (len, cap, 0);
        self.state = RecvState::Receiving;
        Ok(())
    }

    /// May `n` bytes at `offset` of the message be written into the buffer now?
    #[inline]
    pub fn accepts(&self, offset: usize, n: usize) -> bool {
        self.state == RecvState::Receiving && offset.checked_add(n).is_some_and(|e| e <= self.cap)
    }

    /// `n` more bytes of the message arrived (or were read).
    #[inline]
    pub fn data(&mut self, n: usize) -> Result<RecvAction, ProtocolError> {
        if self.state != RecvState::Receiving {
            return Err(ProtocolError(format!(
                "receive: data while {:?}",
                self.state
            )));
        }
        self.got += n;
        if self.got >= self.len {
            self.state = RecvState::Done;
            return Ok(RecvAction::Complete(Outcome::of(self.len, self.cap)));
        }
        Ok(RecvAction::Nothing)
    }

    /// The whole rest of the message was read in one go (single copy).
    pub fn fetched(&mut self) -> Result<RecvAction, ProtocolError> {
        let rest = self.len.saturating_sub(self.got);
        self.data(rest)
    }

    /// MPI_Cancel: only a receive still waiting for its message can be cancelled.
    pub fn cancel(&mut self) -> RecvAction {
        if self.state == RecvState::Posted {
            self.state = RecvState::Done;
            return RecvAction::CompleteCancelled;
        }
        RecvAction::Nothing
    }

    /// The receive failed (the peer is gone).
    pub fn fail(&mut self) {
        self.state = RecvState::Done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RNDV: SendEvent = SendEvent::FirstSent {
        plan: Plan::Rendezvous,
        sync: false,
    };

    #[test]
    fn eager_send_completes_at_once_or_on_the_ack() {
        let mut s = Sender::default();
        assert_eq!(
            s.on(SendEvent::FirstSent {
                plan: Plan::Eager,
                sync: false
            }),
            Ok(SendAction::Complete)
        );
        assert!(s.is_done());
        assert_eq!(s.state(), SendState::Sent);
        let mut s = Sender::default();
        s.on(SendEvent::FirstSent {
            plan: Plan::Eager,
            sync: true,
        })
        .unwrap();
        assert_eq!(s.state(), SendState::WaitAck);
        assert!(s.on(SendEvent::Cts).is_err(), "no clear-to-send for eager");
        assert_eq!(s.on(SendEvent::SyncAck), Ok(SendAction::Complete));
    }

    #[test]
    fn rendezvous_send_streams_or_is_finished_by_the_receiver() {
        let mut s = Sender::default();
        assert_eq!(s.on(SendEvent::NotNow), Ok(SendAction::Backlog));
        assert_eq!(s.on(RNDV), Ok(SendAction::Nothing));
        assert!(
            s.on(SendEvent::AllDataQueued).is_err(),
            "no data before clear-to-send"
        );
        assert_eq!(s.on(SendEvent::Cts), Ok(SendAction::Stream));
        assert!(
            s.on(SendEvent::Cts).is_err(),
            "a second clear-to-send is stale"
        );
        assert_eq!(s.on(SendEvent::AllDataQueued), Ok(SendAction::Complete));
        // Single copy: the receiver reads (with the transport's help, if it offers any) and
        // says Fin.
        let mut s = Sender::default();
        s.on(SendEvent::FirstSent {
            plan: Plan::EagerRendezvous { prefix: 10 },
            sync: false,
        })
        .unwrap();
        assert_eq!(s.on(SendEvent::Fin), Ok(SendAction::Complete));
        assert!(s.on(SendEvent::Fin).is_err(), "a second finish is stale");
    }

    #[test]
    fn sends_cancelled_mid_protocol() {
        // Waiting behind other sends: cancelled on the spot.
        let mut s = Sender::default();
        s.on(SendEvent::NotNow).unwrap();
        assert_eq!(s.on(SendEvent::Cancel), Ok(SendAction::Unbacklog));
        assert!(s.is_done());
        // Waiting for clear-to-send: ask the receiver; it had not matched.
        let mut s = Sender::default();
        s.on(RNDV).unwrap();
        assert_eq!(s.on(SendEvent::Cancel), Ok(SendAction::AskCancel));
        assert_eq!(
            s.on(SendEvent::Cancel),
            Ok(SendAction::Nothing),
            "asked already"
        );
        assert_eq!(
            s.on(SendEvent::CancelAnswer { cancelled: true }),
            Ok(SendAction::CompleteCancelled)
        );
        // It had matched: the protocol goes on where it was.
        let mut s = Sender::default();
        s.on(RNDV).unwrap();
        s.on(SendEvent::Cancel).unwrap();
        assert_eq!(
            s.on(SendEvent::CancelAnswer { cancelled: false }),
            Ok(SendAction::Nothing)
        );
        assert_eq!(s.state(), SendState::WaitCts);
        assert_eq!(s.on(SendEvent::Cts), Ok(SendAction::Stream));
        // Clear-to-send overtakes the answer.
        let mut s = Sender::default();
        s.on(RNDV).unwrap();
        s.on(SendEvent::Cancel).unwrap();
        assert_eq!(s.on(SendEvent::Cts), Ok(SendAction::Stream));
        assert!(
            s.on(SendEvent::CancelAnswer { cancelled: false }).is_err(),
            "stale"
        );
        // Synchronous eager, acked while the cancel was on its way.
        let mut s = Sender::default();
        s.on(SendEvent::FirstSent {
            plan: Plan::Eager,
            sync: true,
        })
        .unwrap();
        s.on(SendEvent::Cancel).unwrap();
        assert_eq!(s.on(SendEvent::SyncAck), Ok(SendAction::Complete));
        // A standard eager send, complete here: the receiver had not matched it, or had.
        for (answer, action, state) in [
            (true, SendAction::CompleteCancelled, SendState::Done),
            (false, SendAction::Complete, SendState::Sent),
        ] {
            let mut s = Sender::sent();
            assert!(s.is_done());
            assert_eq!(s.on(SendEvent::Cancel), Ok(SendAction::AskCancel));
            assert!(!s.is_done(), "incomplete until the answer");
            assert_eq!(
                s.on(SendEvent::CancelAnswer { cancelled: answer }),
                Ok(action)
            );
            assert_eq!(s.state(), state);
            assert!(s.is_done());
        }
        // Streaming: too late.
        let mut s = Sender::default();
        s.on(RNDV).unwrap();
        s.on(SendEvent::Cts).unwrap();
        assert_eq!(s.on(SendEvent::Cancel), Ok(SendAction::Nothing));
        assert_eq!(s.state(), SendState::Streaming);
        assert_eq!(s.on(SendEvent::Failed), Ok(SendAction::Complete));
    }

    #[test]
    fn receives_deliver_what_fits_and_report_truncation() {
        let mut r = Receiver::default();
        r.post().unwrap();
        assert!(r.post().is_err());
        assert_eq!(
            r.eager(10, 4),
            Ok(RecvAction::Complete(Outcome {
                bytes: 4,
                truncated: true
            }))
        );
        assert!(r.eager(1, 4).is_err(), "a receive matches once");
        // Rendezvous with a prefix, data in pieces, truncated to the buffer.
        let mut r = Receiver::default();
        r.post().unwrap();
        assert_eq!(
            r.rendezvous(100, 10, 60),
            Ok(RecvAction::Fetch { from: 10, take: 60 })
        );
        assert!(r.accepts(10, 50) && !r.accepts(10, 51) && !r.accepts(usize::MAX, 2));
        assert_eq!(r.data(50), Ok(RecvAction::Nothing));
        assert_eq!(
            r.data(40),
            Ok(RecvAction::Complete(Outcome {
                bytes: 60,
                truncated: true
            }))
        );
        assert!(r.data(1).is_err() && !r.accepts(0, 1));
        // Everything in the request (an empty message), and a single-copy read.
        let mut r = Receiver::default();
        assert_eq!(
            r.rendezvous(0, 0, 8),
            Ok(RecvAction::Complete(Outcome::of(0, 8)))
        );
        let mut r = Receiver::default();
        r.rendezvous(1000, 0, 1000).unwrap();
        assert_eq!(
            r.fetched(),
            Ok(RecvAction::Complete(Outcome::of(1000, 1000)))
        );
        let mut r = Receiver::default();
        assert!(
            r.rendezvous(5, 6, 8).is_err(),
            "prefix longer than the message"
        );
        // An eager message placed by the transport: not cancellable while it is written.
        let mut r = Receiver::default();
        r.post().unwrap();
        assert!(r.clone().eager_placing(9, 8).is_err(), "placing needs room");
        r.eager_placing(8, 8).unwrap();
        assert_eq!(r.cancel(), RecvAction::Nothing);
        assert_eq!(r.fetched(), Ok(RecvAction::Complete(Outcome::of(8, 8))));
    }

    #[test]
    fn receives_cancel_only_before_matching() {
        let mut r = Receiver::default();
        r.post().unwrap();
        assert_eq!(r.cancel(), RecvAction::CompleteCancelled);
        assert_eq!(r.state(), RecvState::Done);
        let mut r = Receiver::default();
        r.post().unwrap();
        r.rendezvous(100, 0, 100).unwrap();
        assert_eq!(
            r.cancel(),
            RecvAction::Nothing,
            "matched: the message is coming"
        );
        assert_eq!(r.state(), RecvState::Receiving);
    }
}
