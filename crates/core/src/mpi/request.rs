//! Requests: the state of one nonblocking operation, kept in a slab.
//!
//! A request's slot index is its handle; frames carry a *wire id* that adds an 8-bit
//! generation, bumped every time the slot is reused or a persistent request restarts, so a
//! late frame for an earlier use of the slot is recognised and dropped.

use crate::error::{ErrorClass, MpiError};
use crate::ids::{CommId, Gpid, ReqId};
use crate::proto::frame::Envelope;

/// Source value that matches any sender.
pub const ANY_SOURCE: i32 = -2;
/// Tag value that matches any tag.
pub const ANY_TAG: i32 = -1;
/// The null process.
pub const PROC_NULL: i32 = -1;

/// What MPI_Status reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    /// Boxed: errors are rare and the status travels through every completion.
    pub error: Option<Box<MpiError>>,
    /// Bytes received (packed representation).
    pub bytes: u64,
    pub cancelled: bool,
}

impl Status {
    pub const EMPTY: Status = Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        error: None,
        bytes: 0,
        cancelled: false,
    };

    /// Status of an operation with MPI_PROC_NULL.
    pub const PROC_NULL: Status = Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: None,
        bytes: 0,
        cancelled: false,
    };

    pub fn error_class(&self) -> Option<ErrorClass> {
        self.error.as_ref().map(|e| e.class)
    }
}

/// Send modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Sync,
    Ready,
    Buffered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Send,
    Recv,
    /// Completed at creation (MPI_PROC_NULL, or an operation that finished at once).
    Done,
}

pub use crate::proto::machine::{Receiver, RecvState, SendState, Sender};

/// Parameters kept by a persistent request to restart it.
#[derive(Debug, Clone)]
pub struct Persist {
    pub user_buf: *mut u8,
    pub count: usize,
    /// The datatype, held: the user may free it between MPI_Send_init and MPI_Start (the
    /// free takes effect once no operation uses it, MPI-4.1 5.1.9).
    pub dtype: std::sync::Arc<crate::mpi::datatype::Datatype>,
    /// Destination or source rank in the communicator.
    pub rank: i32,
    pub tag: i32,
    pub comm: CommId,
    pub mode: Mode,
    pub is_send: bool,
}

/// Data of a non-contiguous buffer: the packed bytes and where to unpack them.
#[derive(Debug)]
pub struct Packed {
    pub data: Vec<u8>,
    pub user_buf: *mut u8,
    pub count: usize,
    pub dtype: std::sync::Arc<crate::mpi::datatype::Datatype>,
}

impl Drop for Packed {
    /// The packed copy goes back to the buffer pool for the next non-contiguous message.
    fn drop(&mut self) {
        crate::mpi::datatype::pool::give(std::mem::take(&mut self.data));
    }
}

/// `Request::peer` of a receive whose source process is not known (yet).
pub const UNKNOWN_PEER: Gpid = Gpid::NONE;

#[derive(Debug)]
pub struct Request {
    pub gen: u8,
    pub kind: Kind,
    pub complete: bool,
    pub status: Status,
    pub comm: CommId,
    /// Send: destination; receive: the matched sender, or before the match the process the
    /// receive names as its source ([`UNKNOWN_PEER`] for MPI_ANY_SOURCE or not known).
    pub peer: Gpid,
    /// Send: the envelope sent; receive: the match specification.
    pub env: Envelope,
    /// Contiguous data: the user's buffer, or `packed.data`.
    pub buf: *mut u8,
    /// Send: message bytes. Receive: capacity in bytes.
    pub len: usize,
    pub packed: Option<Box<Packed>>,
    pub mode: Mode,
    /// The protocol state of a send / a receive.
    pub send: Sender,
    pub recv: Receiver,
    /// Rendezvous: the receiver's request id (on the sender), the sender's (on the receiver).
    pub remote: u32,
    /// Rendezvous progress in bytes (sent or received).
    pub off: usize,
    /// Rendezvous message length (receiver side).
    pub msg_len: usize,
    /// Data frames still referenced by a transport (sender).
    pub inflight: u32,
    /// Sender: the buffer is exposed to the receiver for a direct read (single copy), until
    /// the send ends.
    pub exposed: bool,
    /// MPI_Request_free was called while active: release the slot on completion.
    pub user_freed: bool,
    /// This request was created internally (buffered send) and nobody waits on it.
    pub internal: bool,
    /// Byte range in the attached buffer that a buffered send occupies.
    pub bsend_region: Option<(usize, usize)>,
    pub persist: Option<Box<Persist>>,
    /// Persistent request that has been started and not yet completed by a Wait/Test.
    pub active: bool,
    /// The shared "already complete" request that eager sends return (never released).
    pub permanent: bool,
    /// Send: the protocol setting of its communicator when it differs from the process's
    /// (the `protean_protocol` info hint).
    pub protocol: Option<crate::proto::policy::Protocol>,
    /// Send of non-contiguous data packed piece by piece as it goes out (`Pml::pump_packed`)
    /// rather than whole before the first frame: `packed.data` then holds the eager prefix
    /// and one staged piece.
    pub streamed: bool,
    /// Streamed send: bytes of the piece at `off` already packed into the staging area (0:
    /// none).
    pub staged: usize,
    /// Non-contiguous receive: message bytes from this offset on were unpacked into the
    /// user's buffer as their Data frames arrived (usize::MAX: none); completion unpacks only
    /// the bytes before it.
    pub unpacked_from: usize,
    /// MPI_Isendrecv(_replace): the send and the receive this request stands for (a
    /// `Kind::Done` request, complete when both are).
    pub parts: Option<[ReqId; 2]>,
    /// Send: the sequence number of its matchable frame to the peer (what a cancel request
    /// names: a standard eager frame carries no request id).
    pub seq: u32,
    /// Buffered send: on the request the user holds, the wire id of the send from the
    /// attached buffer; on that send, the wire id of the user's request (0: none).
    pub link: u32,
    /// A generalized request (MPI_Grequest_start): MPI_Grequest_complete completes it, and a
    /// completion call that collects it leaves it in the slab for the C layer, which runs
    /// its callbacks and then releases it (`Engine::grequest_release`).
    pub greq: bool,
    /// A partitioned request (MPI_Psend_init, MPI_Precv_init; `mpi::part`).
    pub part: Option<Box<crate::mpi::part::Part>>,
}

impl Request {
    pub fn new(kind: Kind, comm: CommId) -> Request {
        Request {
            gen: 0,
            kind,
            complete: false,
            status: Status::EMPTY,
            comm,
            peer: UNKNOWN_PEER,
            env: Envelope::default(),
            buf: std::ptr::null_mut(),
            len: 0,
            packed: None,
            mode: Mode::Standard,
            send: Sender::default(),
            recv: Receiver::default(),
            remote: 0,
            off: 0,
            msg_len: 0,
            inflight: 0,
            exposed: false,
            user_freed: false,
            internal: false,
            bsend_region: None,
            persist: None,
            active: true,
            permanent: false,
            protocol: None,
            streamed: false,
            staged: 0,
            unpacked_from: usize::MAX,
            parts: None,
            greq: false,
            part: None,
            seq: 0,
            link: 0,
        }
    }
}

/// What MPI_Isend returns for a standard send that went out on the request-free eager path
/// (complete at once): which message it was, so that MPI_Cancel can still ask the receiver to
/// take it out of its unexpected queue. A full [`Request`] for each such send cost MPI_Isend
/// and MPI_Waitall about 200 instructions per message (callgrind, bench/bw, 1 byte over shm);
/// a record costs a few.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentRec {
    pub peer: Gpid,
    /// The sequence number of its frame (what a cancel request names).
    pub seq: u32,
    pub comm: CommId,
    /// After MPI_Cancel: the request that carries the cancellation (slot + 1), 0 before.
    pub promoted: u32,
}

/// Slots at and above this bit are [`SentRec`]s, below it requests.
pub const SENT_BIT: u32 = 1 << 25;

/// Requests by slot, with a free list; and the records of sends made without a request.
#[derive(Default)]
pub struct Slab {
    slots: Vec<Option<Request>>,
    gens: Vec<u8>,
    free: Vec<u32>,
    live: usize,
    sent: Vec<SentRec>,
    sent_free: Vec<u32>,
}

const GEN_SHIFT: u32 = 24;
const INDEX_MASK: u32 = (1 << GEN_SHIFT) - 1;

impl Slab {
    /// Store a request; returns its slot. Inlined, so that the caller builds the request where
    /// it goes instead of moving it through a call.
    #[inline(always)]
    pub fn insert(&mut self, mut r: Request) -> ReqId {
        let Some(i) = self.free.pop() else {
            return ReqId::new(self.push(r));
        };
        self.live += 1;
        let g = self.gens[i as usize].wrapping_add(1);
        self.gens[i as usize] = g;
        r.gen = g;
        let slot = &mut self.slots[i as usize];
        debug_assert!(slot.is_none(), "free slot {i} holds a request");
        // SAFETY: a slot on the free list holds None, so there is nothing to drop.
        unsafe { std::ptr::write(slot, Some(r)) };
        ReqId::new(i)
    }

    /// Store a fresh `Request::new(kind, comm)` and return its slot and the request, for the
    /// caller to fill in where it lies (a request built by the caller and then stored is
    /// copied, 200 bytes, on every receive).
    #[inline(always)]
    pub fn insert_new(&mut self, kind: Kind, comm: CommId) -> (ReqId, &mut Request) {
        let Some(i) = self.free.pop() else {
            let i = self.push(Request::new(kind, comm));
            return (
                ReqId::new(i),
                self.slots[i as usize].as_mut().expect("just stored"),
            );
        };
        self.live += 1;
        let g = self.gens[i as usize].wrapping_add(1);
        self.gens[i as usize] = g;
        let slot = &mut self.slots[i as usize];
        debug_assert!(slot.is_none(), "free slot {i} holds a request");
        // SAFETY: a slot on the free list holds None, so there is nothing to drop.
        unsafe { std::ptr::write(slot, Some(Request::new(kind, comm))) };
        let r = slot.as_mut().expect("just stored");
        r.gen = g;
        (ReqId::new(i), r)
    }

    #[inline(never)]
    fn push(&mut self, r: Request) -> u32 {
        let i = self.slots.len() as u32;
        assert!(i <= INDEX_MASK, "more than 16 million requests outstanding");
        self.live += 1;
        self.slots.push(Some(r));
        self.gens.push(0);
        i
    }

    /// Drop the request in slot `i` where it lies, without moving it out. False: none there.
    pub fn discard(&mut self, i: ReqId) -> bool {
        let i = i.get();
        let Some(slot) = self.slots.get_mut(i as usize).filter(|s| s.is_some()) else {
            return false;
        };
        *slot = None;
        self.free.push(i);
        self.live -= 1;
        true
    }

    pub fn remove(&mut self, i: ReqId) -> Option<Request> {
        let i = i.get();
        let r = self.slots.get_mut(i as usize)?.take();
        if r.is_some() {
            self.free.push(i);
            self.live -= 1;
        }
        r
    }

    #[inline]
    pub fn get(&self, i: ReqId) -> Option<&Request> {
        self.slots.get(i.idx())?.as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, i: ReqId) -> Option<&mut Request> {
        self.slots.get_mut(i.idx())?.as_mut()
    }

    /// The id a frame carries for slot `i`.
    #[inline]
    pub fn wire_id(&self, i: ReqId) -> u32 {
        let g = self.get(i).map_or(0, |r| r.gen);
        i.get() | ((g as u32) << GEN_SHIFT)
    }

    /// Resolve a wire id to a live slot of the same generation.
    #[inline]
    pub fn from_wire(&self, w: u32) -> Option<ReqId> {
        let i = ReqId::new(w & INDEX_MASK);
        let r = self.get(i)?;
        (r.gen as u32 == w >> GEN_SHIFT).then_some(i)
    }

    /// Bump the generation of a live slot (a persistent request restarts).
    pub fn renew(&mut self, i: ReqId) {
        let i = i.get();
        if let Some(r) = self.slots.get_mut(i as usize).and_then(|s| s.as_mut()) {
            r.gen = r.gen.wrapping_add(1);
            self.gens[i as usize] = r.gen;
        }
    }

    /// Slots of the live requests.
    pub fn slots(&self) -> impl Iterator<Item = ReqId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some())
            .map(|(i, _)| ReqId::from_idx(i))
    }

    pub fn live(&self) -> usize {
        self.live
    }

    /// The live requests.
    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.slots.iter().flatten()
    }

    /// Store the record of a send made without a request; its slot (with [`SENT_BIT`]).
    #[inline(always)]
    pub fn insert_sent(&mut self, rec: SentRec) -> ReqId {
        match self.sent_free.pop() {
            Some(i) => {
                self.sent[i as usize] = rec;
                ReqId::new(i | SENT_BIT)
            }
            None => {
                self.sent.push(rec);
                ReqId::new((self.sent.len() - 1) as u32 | SENT_BIT)
            }
        }
    }

    /// Is `slot` the slot of a [`SentRec`]?
    #[inline(always)]
    pub fn is_sent(slot: ReqId) -> bool {
        slot.get() & SENT_BIT != 0
    }

    #[inline]
    pub fn sent(&self, slot: ReqId) -> Option<&SentRec> {
        self.sent.get((slot.get() & !SENT_BIT) as usize)
    }

    #[inline]
    pub fn sent_mut(&mut self, slot: ReqId) -> Option<&mut SentRec> {
        self.sent.get_mut((slot.get() & !SENT_BIT) as usize)
    }

    #[inline]
    pub fn remove_sent(&mut self, slot: ReqId) {
        self.sent_free.push(slot.get() & !SENT_BIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::comm::COMM_WORLD;

    #[test]
    fn stale_wire_ids_do_not_resolve() {
        let mut s = Slab::default();
        let a = s.insert(Request::new(Kind::Send, COMM_WORLD));
        let wa = s.wire_id(a);
        assert_eq!(s.from_wire(wa), Some(a));
        s.remove(a);
        assert_eq!(s.from_wire(wa), None);
        let b = s.insert(Request::new(Kind::Recv, COMM_WORLD));
        assert_eq!(a, b, "slot reused");
        assert_eq!(s.from_wire(wa), None, "old generation rejected");
        let wb = s.wire_id(b);
        assert_eq!(s.from_wire(wb), Some(b));
        s.renew(b);
        assert_eq!(s.from_wire(wb), None);
        assert_eq!(s.live(), 1);
        assert!(s.remove(ReqId::new(999)).is_none());
    }

    #[test]
    fn sent_records_have_slots_of_their_own() {
        let mut s = Slab::default();
        let a = s.insert(Request::new(Kind::Send, COMM_WORLD));
        let rec = SentRec {
            peer: Gpid::new(3),
            seq: 9,
            comm: CommId::new(1),
            promoted: 0,
        };
        let x = s.insert_sent(rec);
        assert!(Slab::is_sent(x) && !Slab::is_sent(a));
        assert!(s.get(x).is_none(), "not a request");
        assert_eq!(s.sent(x), Some(&rec));
        s.sent_mut(x).unwrap().promoted = a.get() + 1;
        s.remove_sent(x);
        let y = s.insert_sent(rec);
        assert_eq!(x, y, "reused");
        assert_eq!(s.sent(y), Some(&rec));
    }

    #[test]
    fn discarded_slots_are_free_and_stale() {
        let mut s = Slab::default();
        let a = s.insert(Request::new(Kind::Recv, COMM_WORLD));
        let wa = s.wire_id(a);
        assert!(s.discard(a));
        assert!(!s.discard(a), "already gone");
        assert!(!s.discard(ReqId::new(999)));
        assert_eq!(s.live(), 0);
        assert!(s.get(a).is_none());
        assert_eq!(s.from_wire(wa), None);
        assert_eq!(
            s.insert(Request::new(Kind::Send, COMM_WORLD)),
            a,
            "slot reused"
        );
        assert_eq!(s.from_wire(wa), None, "old generation rejected");
    }
}
