//! The point-to-point API (MPI-4.0 chapter 3) over the engine: argument checks, buffers and
//! datatypes, persistent and buffered sends, completion.
//!
//! Methods on [`Engine`] never block; the free functions at the end wait (they release the
//! engine between progress passes, see `runtime::global`).

use std::sync::Arc;

use crate::err;
use crate::error::{ErrorClass, MpiError, Result};
use crate::ids::{CommId, DtypeId, Gpid, Rank, ReqId, Tag};
use crate::mpi::comm::COMM_WORLD;
use crate::mpi::datatype::{pool, Datatype};
use crate::mpi::engine::{BsendBuffer, Engine};
use crate::mpi::global::{self, with};
use crate::mpi::pml::{DirectPost, Pml};
use crate::mpi::request::*;
use crate::proto::frame::Envelope;

/// Largest tag (MPI_TAG_UB).
pub const TAG_UB: i32 = i32::MAX;
/// Bytes a buffered send reserves in the attached buffer beyond its data (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 96;

/// Non-contiguous sends of at least this many bytes are packed piece by piece as their frames
/// go out (pipelined with the receiver's unpacking) rather than whole before the first frame.
pub const STREAM_MIN: usize = 32 * 1024;

/// When a non-contiguous buffer is packed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Packing {
    /// A send packed whole now.
    Now,
    /// A send packed by the engine as its frames go out.
    Later,
    /// A receive: unpacked as it arrives or on completion.
    Unpack,
}

/// A request handle value that is not a live request.
fn bad_request() -> MpiError {
    MpiError::new(
        ErrorClass::Request,
        "invalid request (not active, or already freed)",
    )
}

impl Engine {
    #[inline(always)]
    fn check_count(count: i64) -> Result<usize> {
        if count < 0 {
            return err!(Count, "negative count {count}");
        }
        Ok(count as usize)
    }

    #[inline(always)]
    fn check_dtype(&self, dt: DtypeId) -> Result<&Arc<Datatype>> {
        let d = self.dtype(dt)?;
        if !d.committed {
            return err!(
                Type,
                "{} has not been committed (call MPI_Type_commit)",
                d.describe()
            );
        }
        Ok(d)
    }

    /// The contiguous view of a communication buffer: pointer, bytes, and for a
    /// non-contiguous type the packed copy (filled from the user's buffer when `pack` is
    /// set, as for a send; unpacked into it on completion for a receive).
    #[inline(always)]
    fn buffer_view(
        &self,
        buf: *mut u8,
        count: usize,
        d: &Arc<Datatype>,
        pack: Packing,
    ) -> Result<(*mut u8, usize, Option<Box<Packed>>)> {
        let Some(len) = d.packed_size(count) else {
            return err!(Count, "count {count} overflows the message size");
        };
        if len > 0 && buf.is_null() && d.predefined && d.true_lb >= 0 {
            return err!(Buffer, "null buffer for {count} elements of {}", d.name);
        }
        if let Some(off) = d.contiguous_span(count) {
            // One span of `len` bytes: a contiguous type, or a single block elsewhere (a
            // resized type, a struct of absolute addresses used with MPI_BOTTOM).
            return Ok((buf.wrapping_offset(off), len, None));
        }
        Ok(Self::packed_view(buf, count, len, d, pack))
    }

    /// [`Self::buffer_view`] of non-contiguous data: the packed copy (out of line, so the
    /// contiguous case stays small enough to inline).
    #[inline(never)]
    fn packed_view(
        buf: *mut u8,
        count: usize,
        len: usize,
        d: &Arc<Datatype>,
        pack: Packing,
    ) -> (*mut u8, usize, Option<Box<Packed>>) {
        // Packed copies come from a per-thread pool (see datatype::pool) and go back to it when
        // the request drops them.
        let data = match pack {
            Packing::Now => {
                let mut v = pool::take_empty(len);
                // SAFETY: the caller guarantees the buffer holds `count` elements of the type.
                unsafe { d.pack(buf, count, &mut v) };
                v
            }
            // The engine packs what each frame carries when it sends it.
            Packing::Later => Vec::new(),
            Packing::Unpack => pool::take_filled(len),
        };
        let mut p = Box::new(Packed {
            data,
            user_buf: buf,
            count,
            dtype: d.clone(),
        });
        let ptr = match pack {
            Packing::Later => std::ptr::null_mut(),
            _ => p.data.as_mut_ptr(),
        };
        (ptr, len, Some(p))
    }

    /// A send's data: pointer, bytes, the packed copy, and whether the message is packed
    /// piece by piece as it goes out (large non-contiguous data, see `Pml::pump_packed`).
    #[allow(clippy::type_complexity)]
    fn send_data(
        &self,
        buf: *const u8,
        count: usize,
        d: &Arc<Datatype>,
    ) -> Result<(*mut u8, usize, Option<Box<Packed>>, bool)> {
        let stream = d.packed_size(count).is_some_and(|l| l >= STREAM_MIN);
        let how = if stream { Packing::Later } else { Packing::Now };
        let (ptr, len, packed) = self.buffer_view(buf as *mut u8, count, d, how)?;
        let streamed = stream && packed.is_some();
        Ok((ptr, len, packed, streamed))
    }

    #[inline(always)]
    fn recv_data(
        &self,
        buf: *mut u8,
        count: usize,
        d: &Arc<Datatype>,
    ) -> Result<(*mut u8, usize, Option<Box<Packed>>)> {
        self.buffer_view(buf, count, d, Packing::Unpack)
    }

    /// Resolve a destination rank to a process; None for MPI_PROC_NULL.
    #[inline]
    fn dest_gpid(&self, comm: CommId, rank: i32) -> Result<Option<Gpid>> {
        let c = self.comm(comm)?;
        if rank == PROC_NULL {
            return Ok(None);
        }
        let peers = c.peers();
        match peers.get(rank as usize) {
            Some(g) if rank >= 0 => Ok(Some(*g)),
            _ => err!(
                Rank,
                "rank {rank} is out of range for a communicator of size {}",
                peers.len()
            ),
        }
    }

    #[inline(always)]
    fn check_source(&self, comm: CommId, src: i32) -> Result<()> {
        let c = self.comm(comm)?;
        if src == ANY_SOURCE || src == PROC_NULL || (src >= 0 && (src as usize) < c.peers().len()) {
            return Ok(());
        }
        err!(
            Rank,
            "source rank {src} is out of range for a communicator of size {}",
            c.peers().len()
        )
    }

    /// A request complete from the start, with status `st` (also MPI-IO's nonblocking
    /// accesses, done when they return).
    pub(crate) fn done_request(&mut self, comm: CommId, st: Status) -> ReqId {
        let mut r = Request::new(Kind::Done, comm);
        r.complete = true;
        r.status = st;
        self.pml.reqs.insert(r)
    }

    /// Start a send; returns its request slot.
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[inline]
    pub unsafe fn isend(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        mode: Mode,
    ) -> Result<ReqId> {
        self.isend_on(buf, count, dt, dest, tag, comm, mode, 0)
    }

    /// [`Engine::isend`] for MPI_Isend and friends: a send that goes out on the request-free
    /// eager path gets a [`SentRec`] slot instead of the shared complete request, which
    /// remembers the message's sequence number, so that MPI_Cancel can still ask the receiver
    /// to take it out of its unexpected queue. (Blocking sends keep the shared request.)
    /// # Safety
    /// As for [`Engine::isend`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub unsafe fn isend_nb(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        mode: Mode,
    ) -> Result<ReqId> {
        if matches!(mode, Mode::Standard | Mode::Ready) {
            if let Some(peer) = self.send_now_to(buf, count, dt, dest, tag, comm, 0)? {
                let seq = self.pml.sent_seq(peer);
                return Ok(self.pml.reqs.insert_sent(SentRec {
                    peer,
                    seq,
                    comm,
                    promoted: 0,
                }));
            }
        }
        self.isend_general(buf, count, dt, dest, tag, comm, mode, 0)
    }

    /// The request a [`SentRec`] slot stands for once MPI_Cancel made one (None before).
    fn promoted(&self, slot: ReqId) -> Result<Option<ReqId>> {
        let rec = self.pml.reqs.sent(slot).ok_or_else(bad_request)?;
        Ok(rec.promoted.checked_sub(1).map(ReqId::new))
    }

    /// The communicator and persistence of a live request (None: not a request).
    pub fn request_info(&self, slot: ReqId) -> Option<(CommId, bool)> {
        if Slab::is_sent(slot) {
            return self.pml.reqs.sent(slot).map(|r| (r.comm, false));
        }
        self.pml
            .reqs
            .get(slot)
            .map(|r| (r.comm, r.persist.is_some() || r.part.is_some()))
    }

    /// Post a receive; returns its request slot.
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[inline]
    pub unsafe fn irecv(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        src: Rank,
        tag: Tag,
        comm: CommId,
    ) -> Result<ReqId> {
        self.irecv_on(buf, count, dt, src, tag, comm, 0)
    }

    /// [`Engine::isend`] in context `ctx + ctx_offset` (1: the communicator's collective
    /// context, which user point-to-point traffic never matches).
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub unsafe fn isend_on(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        mode: Mode,
        ctx_offset: u32,
    ) -> Result<ReqId> {
        if matches!(mode, Mode::Standard | Mode::Ready)
            && self.send_now(buf, count, dt, dest, tag, comm, ctx_offset)?
        {
            // Sent and complete: the shared complete-send request stands for it.
            return Ok(Pml::DONE_SEND);
        }
        self.isend_general(buf, count, dt, dest, tag, comm, mode, ctx_offset)
    }

    /// [`Engine::isend_on`] past the request-free path: every check, a request.
    /// # Safety
    /// As for [`Engine::isend`].
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    unsafe fn isend_general(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        mode: Mode,
        ctx_offset: u32,
    ) -> Result<ReqId> {
        if self.pml.eager_unpolled >= Self::POLL_EVERY {
            // A run of eager sends read nothing for a while (`Pml::try_eager` declined this
            // one for that): take the receivers' reports first, and plan by them.
            self.progress_p2p();
        }
        let count = Self::check_count(count)?;
        let d = self.check_dtype(dt)?;
        if !(0..=TAG_UB).contains(&tag) {
            return err!(
                Tag,
                "tag {tag} is invalid for a send (must be between 0 and {TAG_UB})"
            );
        }
        let Some(peer) = self.dest_gpid(comm, dest)? else {
            return Ok(self.done_request(comm, Status::PROC_NULL));
        };
        if mode == Mode::Buffered {
            let d = d.clone();
            return self.bsend_start(buf, count, &d, dest, tag, comm);
        }
        let (ptr, len, packed, streamed) = self.send_data(buf, count, d)?;
        let c = self.comm(comm)?;
        let env = Envelope {
            ctx: c.ctx.offset(ctx_offset),
            src: c.rank,
            tag,
        };
        let protocol = c.protocol;
        let mut r = Request::new(Kind::Send, comm);
        r.peer = peer;
        r.env = env;
        r.buf = ptr;
        r.len = len;
        r.packed = packed;
        r.streamed = streamed;
        r.mode = mode;
        r.protocol = protocol;
        let slot = self.pml.reqs.insert(r);
        self.pml.start_send(slot, &mut self.net);
        Ok(slot)
    }

    /// A blocking standard-mode send of contiguous data that the policy sends eagerly and the
    /// transport takes at once completes here without a request. Ok(false): take the general
    /// path (which also reports every argument error).
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[inline]
    pub unsafe fn send_now(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        ctx_offset: u32,
    ) -> Result<bool> {
        Ok(self
            .send_now_to(buf, count, dt, dest, tag, comm, ctx_offset)?
            .is_some())
    }

    /// [`Engine::send_now`], saying to which process the message went.
    /// # Safety
    /// As for [`Engine::send_now`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn send_now_to(
        &mut self,
        buf: *const u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        tag: Tag,
        comm: CommId,
        ctx_offset: u32,
    ) -> Result<Option<Gpid>> {
        let (Ok(count), Some(Some(d)), Some(Some(c))) = (
            usize::try_from(count),
            self.dtypes.get(dt.idx()),
            self.comms.get(comm.idx()),
        ) else {
            return Ok(None);
        };
        if !d.contig || !d.committed || !(0..=TAG_UB).contains(&tag) || c.protocol.is_some() {
            return Ok(None);
        }
        let Some(&peer) = c.peers().get(dest as usize).filter(|_| dest >= 0) else {
            return Ok(None);
        };
        let len = match d.packed_size(count) {
            Some(l) if l == 0 || !buf.is_null() => l,
            _ => return Ok(None),
        };
        let env = Envelope {
            ctx: c.ctx.offset(ctx_offset),
            src: c.rank,
            tag,
        };
        // SAFETY: the caller's buffer holds `count` elements of a contiguous type: `len` bytes.
        let data = if len == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(buf, len) }
        };
        if !self.pml.try_eager(peer, env, data, &mut self.net) {
            return Ok(None);
        }
        Ok(Some(peer))
    }

    /// A blocking receive of contiguous data without a request, when possible
    /// ([`Pml::post_direct`]); argument errors are reported as by [`Engine::irecv`].
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    #[inline]
    pub unsafe fn recv_direct(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        src: Rank,
        tag: Tag,
        comm: CommId,
    ) -> Result<DirectPost> {
        let (Ok(count), Some(Some(d)), Some(Some(c))) = (
            usize::try_from(count),
            self.dtypes.get(dt.idx()),
            self.comms.get(comm.idx()),
        ) else {
            return Ok(DirectPost::UseRequest);
        };
        let valid_src = src == ANY_SOURCE || (src >= 0 && (src as usize) < c.peers().len());
        let valid_tag = tag == ANY_TAG || (0..=TAG_UB).contains(&tag);
        let Some(cap) = d.packed_size(count).filter(|&l| l == 0 || !buf.is_null()) else {
            return Ok(DirectPost::UseRequest);
        };
        if !d.contig || !d.committed || !valid_src || !valid_tag {
            return Ok(DirectPost::UseRequest);
        }
        let spec = Envelope {
            ctx: c.ctx,
            src,
            tag,
        };
        let from = usize::try_from(src)
            .ok()
            .and_then(|s| c.peers().get(s).copied())
            .unwrap_or(UNKNOWN_PEER);
        let r = self.pml.post_direct(spec, from, buf, cap);
        if self.pml.busy() {
            // A synchronous sender may be waiting for its acknowledgement.
            self.pml.flush(&mut self.net);
        }
        Ok(r)
    }

    /// [`Engine::irecv`] in context `ctx + ctx_offset`.
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub unsafe fn irecv_on(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        src: Rank,
        tag: Tag,
        comm: CommId,
        ctx_offset: u32,
    ) -> Result<ReqId> {
        let count = Self::check_count(count)?;
        let d = self.check_dtype(dt)?;
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return err!(Tag, "tag {tag} is invalid for a receive (must be MPI_ANY_TAG or between 0 and {TAG_UB})");
        }
        self.check_source(comm, src)?;
        if src == PROC_NULL {
            return Ok(self.done_request(comm, Status::PROC_NULL));
        }
        let (ptr, len, packed) = self.recv_data(buf, count, d)?;
        let c = self.comm(comm)?;
        let ctx = c.ctx.offset(ctx_offset);
        let from = usize::try_from(src)
            .ok()
            .and_then(|s| c.peers().get(s).copied());
        let (slot, r) = self.pml.reqs.insert_new(Kind::Recv, comm);
        r.env = Envelope { ctx, src, tag };
        if let Some(g) = from {
            r.peer = g;
        }
        r.buf = ptr;
        r.len = len;
        r.packed = packed;
        self.pml.post_recv(slot);
        if self.pml.busy() {
            // A synchronous match or rendezvous reply may be waiting in the outbox.
            self.pml.flush(&mut self.net);
        }
        Ok(slot)
    }

    /// Is the request complete (without collecting it)? Errors for an unknown slot.
    #[inline]
    pub fn is_complete(&self, slot: ReqId) -> Result<bool> {
        if Slab::is_sent(slot) {
            return match self.pml.reqs.sent(slot) {
                Some(&SentRec { promoted: 0, .. }) => Ok(true),
                _ => self.is_complete(self.promoted(slot)?.expect("promoted")),
            };
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if let Some(p) = &r.part {
            return Ok(self.part_complete(p));
        }
        if let Some(parts) = r.parts {
            return Ok(self.parts_done(parts));
        }
        if let Some(done) = self.buffered_cancel(r) {
            return Ok(done.is_some());
        }
        Ok(r.complete || (r.persist.is_some() && !r.active))
    }

    /// A buffered send whose cancellation is being asked (the user's request, incomplete while
    /// the send from the attached buffer awaits the receiver's answer): None when `r` is not
    /// one; Some(None) while the answer is out; Some(Some(cancelled)) once it came.
    fn buffered_cancel(&self, r: &Request) -> Option<Option<bool>> {
        if r.complete || r.link == 0 || r.internal {
            return None;
        }
        Some(match self.pml.reqs.from_wire(r.link) {
            None => Some(false),
            Some(i) => {
                let q = self.pml.reqs.get(i).expect("live");
                q.complete.then_some(q.status.cancelled)
            }
        })
    }

    /// Have both halves of an MPI_Isendrecv completed?
    fn parts_done(&self, parts: [ReqId; 2]) -> bool {
        parts.iter().all(|&p| self.is_complete(p).unwrap_or(true))
    }

    /// The status of an MPI_Isendrecv whose halves completed: the receive's, with the send's
    /// error when the receive has none; cancelled when both halves were.
    fn parts_status(send: Status, recv: Status) -> Status {
        let mut st = recv;
        if st.error.is_none() {
            st.error = send.error;
        }
        st.cancelled = st.cancelled && send.cancelled;
        st
    }

    /// [`Engine::collect`] of an MPI_Isendrecv request.
    fn collect_parts(&mut self, slot: ReqId, [s, r]: [ReqId; 2]) -> Result<Option<Status>> {
        if !self.parts_done([s, r]) {
            return Ok(None);
        }
        let sst = self.collect(s)?.unwrap_or(Status::EMPTY);
        let rst = self.collect(r)?.unwrap_or(Status::EMPTY);
        self.pml.discard(slot);
        Ok(Some(Self::parts_status(sst, rst)))
    }

    /// Collect a complete request: its status; a non-persistent request is released, a
    /// persistent one becomes inactive. None when not complete.
    pub fn collect(&mut self, slot: ReqId) -> Result<Option<Status>> {
        if let Some((_, st)) = self.pml.take_plain(slot) {
            return Ok(Some(st));
        }
        if Slab::is_sent(slot) {
            let st = match self.pml.reqs.sent(slot) {
                Some(&SentRec { promoted: 0, .. }) => Status::EMPTY,
                _ => match self.collect(self.promoted(slot)?.expect("promoted"))? {
                    Some(st) => st,
                    None => return Ok(None),
                },
            };
            self.pml.reqs.remove_sent(slot);
            return Ok(Some(st));
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if r.part.is_some() {
            return self.part_collect(slot);
        }
        if r.greq {
            return Ok(r.complete.then(|| r.status.clone()));
        }
        if let Some(parts) = r.parts {
            return self.collect_parts(slot, parts);
        }
        match self.buffered_cancel(r) {
            Some(None) => return Ok(None),
            Some(Some(cancelled)) => {
                let r = self.pml.reqs.get_mut(slot).expect("live");
                r.complete = true;
                r.status.cancelled = cancelled;
                self.drop_cancel_request(slot);
            }
            None => {}
        }
        let r = self.pml.reqs.get_mut(slot).expect("live");
        if r.persist.is_some() {
            if !r.active {
                return Ok(Some(Status::EMPTY));
            }
            if !r.complete {
                return Ok(None);
            }
            r.active = false;
            return Ok(Some(r.status.clone()));
        }
        if !r.complete {
            return Ok(None);
        }
        if r.permanent {
            // The shared complete-send request stays; what it stands for had an empty status.
            return Ok(Some(Status::EMPTY));
        }
        // Take the status out and drop the request where it lies: moving the whole request
        // out of the slab to read its status cost more than the rest of a Waitall's work.
        let st = std::mem::replace(&mut r.status, Status::EMPTY);
        self.pml.discard(slot);
        Ok(Some(st))
    }

    /// MPI_Request_get_status: the status if complete, without collecting.
    pub fn peek(&self, slot: ReqId) -> Result<Option<Status>> {
        if Slab::is_sent(slot) {
            return match self.promoted(slot)? {
                Some(p) => self.peek(p),
                None => Ok(Some(Status::EMPTY)),
            };
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if let Some(p) = &r.part {
            return Ok(self.part_peek(p));
        }
        if let Some([s, rv]) = r.parts {
            if !self.parts_done([s, rv]) {
                return Ok(None);
            }
            let part = |p| self.peek(p).ok().flatten().unwrap_or(Status::EMPTY);
            return Ok(Some(Self::parts_status(part(s), part(rv))));
        }
        match self.buffered_cancel(r) {
            Some(None) => return Ok(None),
            Some(Some(cancelled)) => {
                let mut st = r.status.clone();
                st.cancelled = cancelled;
                return Ok(Some(st));
            }
            None => {}
        }
        if r.persist.is_some() && !r.active {
            return Ok(Some(Status::EMPTY));
        }
        Ok(r.complete.then(|| r.status.clone()))
    }

    /// Is the request a persistent one that is not active (Wait on it returns at once)?
    pub fn is_inactive(&self, slot: ReqId) -> bool {
        self.pml.reqs.get(slot).is_some_and(|r| {
            (r.persist.is_some() && !r.active) || r.part.as_ref().is_some_and(|p| !p.active)
        })
    }

    /// MPI_Grequest_start: a request only [`Engine::grequest_complete`] completes, on
    /// communicator `comm` (whose error handler its errors go to).
    pub fn grequest_start(&mut self, comm: CommId) -> ReqId {
        let mut r = Request::new(Kind::Done, comm);
        r.greq = true;
        self.pml.reqs.insert(r)
    }

    /// MPI_Grequest_complete.
    pub fn grequest_complete(&mut self, slot: ReqId) -> Result<()> {
        match self.pml.reqs.get_mut(slot) {
            Some(r) if r.greq && !r.complete => {
                r.complete = true;
                Ok(())
            }
            Some(r) if r.greq => err!(
                Request,
                "MPI_Grequest_complete was already called on this generalized request"
            ),
            _ => err!(Request, "not a generalized request"),
        }
    }

    /// Give back the slot of a generalized request whose callbacks have run.
    pub fn grequest_release(&mut self, slot: ReqId) {
        if self.pml.reqs.get(slot).is_some_and(|r| r.greq) {
            self.pml.reqs.remove(slot);
        }
    }

    /// MPI_Request_free.
    pub fn request_free(&mut self, slot: ReqId) -> Result<()> {
        if Slab::is_sent(slot) {
            if let Some(p) = self.promoted(slot)? {
                self.request_free(p)?;
            }
            self.pml.reqs.remove_sent(slot);
            return Ok(());
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if r.part.is_some() {
            return self.part_free(slot);
        }
        if r.permanent {
            return Ok(());
        }
        if let Some([s, rv]) = r.parts {
            // The halves go on (or are released) by themselves.
            self.request_free(s)?;
            self.request_free(rv)?;
            self.pml.release(slot);
            return Ok(());
        }
        let done = r.complete || (r.persist.is_some() && !r.active);
        if done || self.buffered_cancel(r).is_some() {
            // (A buffered send being cancelled goes on by itself.)
            self.coll_forget(slot);
            self.pml.release(slot);
        } else {
            self.pml.reqs.get_mut(slot).expect("live").user_freed = true;
        }
        Ok(())
    }

    /// MPI_Cancel.
    pub fn cancel(&mut self, slot: ReqId) -> Result<()> {
        if Slab::is_sent(slot) {
            if self.promoted(slot)?.is_some() {
                return Ok(());
            }
            // A request now carries the cancellation: complete, in `SendState::Sent`.
            let rec = *self.pml.reqs.sent(slot).expect("checked");
            let (p, r) = self.pml.reqs.insert_new(Kind::Send, rec.comm);
            r.send = Sender::sent();
            r.complete = true;
            r.peer = rec.peer;
            r.seq = rec.seq;
            self.pml.reqs.sent_mut(slot).expect("checked").promoted = p.get() + 1;
            return self.cancel(p);
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if r.part.is_some() {
            return self.part_cancel(slot);
        }
        if let Some([s, rv]) = r.parts {
            self.cancel(s)?;
            return self.cancel(rv);
        }
        if r.persist.is_some() && !r.active {
            return Ok(());
        }
        if r.bsend_region.is_some() {
            return Ok(());
        }
        if r.link != 0 {
            return self.cancel_buffered(slot);
        }
        self.pml.cancel(slot);
        if self.pml.busy() {
            self.pml.flush(&mut self.net);
        }
        self.settle_self_cancel(slot);
        Ok(())
    }

    /// A cancel request to ourselves is answered by our own next progress passes: take them
    /// now, so that the outcome is known when MPI_Cancel returns (as for a send to another
    /// process, the request stays incomplete until the answer).
    fn settle_self_cancel(&mut self, slot: ReqId) {
        for _ in 0..8 {
            let Some(r) = self.pml.reqs.get(slot) else {
                return;
            };
            if r.kind != Kind::Send
                || r.send.state() != SendState::Cancelling
                || self.pml.route(r.peer) != crate::proto::policy::Route::SelfLoop
            {
                return;
            }
            self.progress_p2p();
        }
    }

    /// MPI_Cancel of a buffered send: cancel the send from the attached buffer. The user's
    /// request, complete since the data was copied, stays incomplete until that send's
    /// outcome is known (see [`Engine::buffered_cancel`]).
    fn cancel_buffered(&mut self, slot: ReqId) -> Result<()> {
        let r = self.pml.reqs.get(slot).expect("live");
        let (link, peer, seq, emitted, comm) = (
            r.link,
            r.peer,
            r.seq,
            r.send.state() == SendState::Sent,
            r.comm,
        );
        let inner = match self.pml.reqs.from_wire(link) {
            Some(i) => i,
            // The send from the buffer completed and went; its message may still wait at the
            // receiver: a request of our own asks for it.
            None if emitted => {
                let (p, q) = self.pml.reqs.insert_new(Kind::Send, comm);
                q.send = Sender::sent();
                q.complete = true;
                (q.peer, q.seq) = (peer, seq);
                let w = self.pml.reqs.wire_id(p);
                self.pml.reqs.get_mut(slot).expect("live").link = w;
                p
            }
            None => return Ok(()),
        };
        self.pml.cancel(inner);
        if self.pml.busy() {
            self.pml.flush(&mut self.net);
        }
        self.settle_self_cancel(inner);
        let q = self.pml.reqs.get(inner).expect("live");
        let (done, cancelled) = (q.complete, q.status.cancelled);
        let r = self.pml.reqs.get_mut(slot).expect("live");
        if done {
            r.status.cancelled = cancelled;
            self.drop_cancel_request(slot);
        } else {
            r.complete = false;
        }
        Ok(())
    }

    /// The outcome of a buffered send's cancellation is in: a request made only to ask for it
    /// (not the send from the buffer, which `reap_bsend` releases) goes.
    fn drop_cancel_request(&mut self, slot: ReqId) {
        let link = self.pml.reqs.get(slot).map_or(0, |r| r.link);
        if let Some(q) = self.pml.reqs.from_wire(link).filter(|_| link != 0) {
            if !self.pml.reqs.get(q).expect("live").internal {
                self.pml.discard(q);
                self.pml.reqs.get_mut(slot).expect("live").link = 0;
            }
        }
    }

    /// MPI_Iprobe (after one progress pass).
    pub fn iprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
        self.check_probe(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Some(Status::PROC_NULL));
        }
        let spec = Envelope {
            ctx: self.comm(comm)?.ctx,
            src,
            tag,
        };
        if let Some(s) = self.pml.probe(&spec) {
            return Ok(Some(s));
        }
        self.progress();
        Ok(self.pml.probe(&spec))
    }

    fn check_probe(&self, src: i32, tag: i32, comm: CommId) -> Result<()> {
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return err!(
                Tag,
                "tag {tag} is invalid (must be MPI_ANY_TAG or between 0 and {TAG_UB})"
            );
        }
        self.check_source(comm, src)
    }

    /// MPI_Improbe: Some((message id or None for MPI_MESSAGE_NO_PROC, status)).
    pub fn improbe(
        &mut self,
        src: Rank,
        tag: Tag,
        comm: CommId,
    ) -> Result<Option<(Option<u32>, Status)>> {
        self.check_probe(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Some((None, Status::PROC_NULL)));
        }
        let spec = Envelope {
            ctx: self.comm(comm)?.ctx,
            src,
            tag,
        };
        if self.pml.probe(&spec).is_none() {
            self.progress();
        }
        Ok(self.pml.mprobe(&spec).map(|(id, s)| (Some(id), s)))
    }

    /// MPI_Imrecv: receive a message taken by Mprobe; None `msg` is MPI_MESSAGE_NO_PROC.
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    pub unsafe fn imrecv(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        msg: Option<u32>,
    ) -> Result<ReqId> {
        let count = Self::check_count(count)?;
        let d = self.check_dtype(dt)?.clone();
        let Some(id) = msg else {
            return Ok(self.done_request(COMM_WORLD, Status::PROC_NULL));
        };
        let u = self.pml.take_message(id).ok_or_else(|| {
            MpiError::new(
                ErrorClass::Request,
                "invalid message handle (already received?)",
            )
        })?;
        let (ptr, len, packed) = self.recv_data(buf, count, &d)?;
        let mut r = Request::new(Kind::Recv, COMM_WORLD);
        r.env = u.env;
        r.buf = ptr;
        r.len = len;
        r.packed = packed;
        let slot = self.pml.reqs.insert(r);
        self.pml.deliver_unexpected(slot, u);
        if self.pml.busy() {
            self.pml.flush(&mut self.net);
        }
        Ok(slot)
    }

    // ---------------------------------------------------------------------------------------
    // MPI_Isendrecv, MPI_Isendrecv_replace

    /// MPI_Isendrecv: the receive is posted, then the send started; the request returned
    /// completes when both have (see [`Engine::parts_status`] for its status).
    /// # Safety
    /// Both buffers hold their counts of elements of their datatypes and stay valid until the
    /// request completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn isendrecv(
        &mut self,
        sbuf: *const u8,
        scount: i64,
        sdt: DtypeId,
        dest: Rank,
        stag: i32,
        rbuf: *mut u8,
        rcount: i64,
        rdt: DtypeId,
        src: Rank,
        rtag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        // Check the send's arguments first: nothing is started when either half is wrong.
        self.check_send_args(scount, sdt, dest, stag, comm)?;
        let r = self.irecv(rbuf, rcount, rdt, src, rtag, comm)?;
        let s = match self.isend_nb(sbuf, scount, sdt, dest, stag, comm, Mode::Standard) {
            Ok(s) => s,
            Err(e) => {
                self.pml.release(r);
                return Err(e);
            }
        };
        Ok(self.parts_request(comm, s, r))
    }

    /// MPI_Isendrecv_replace: as [`Engine::isendrecv`], the message sent being a packed copy
    /// of the buffer taken before the receive may write it.
    /// # Safety
    /// The buffer holds `count` elements of the datatype and stays valid until the request
    /// completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn isendrecv_replace(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        dest: Rank,
        stag: i32,
        src: Rank,
        rtag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        self.check_send_args(count, dt, dest, stag, comm)?;
        let d = self.check_dtype(dt)?.clone();
        let n = Self::check_count(count)?;
        let Some(len) = d.packed_size(n) else {
            return err!(Count, "count {n} overflows the message size");
        };
        let mut copy = pool::take_empty(len);
        if len > 0 {
            d.pack(buf, n, &mut copy);
        }
        let r = self.irecv(buf, count, dt, src, rtag, comm)?;
        let byte = crate::mpi::datatype::predefined_index("MPI_BYTE").expect("MPI_BYTE");
        let byte = DtypeId::from_idx(byte);
        let s = match self.isend(
            copy.as_ptr(),
            len as i64,
            byte,
            dest,
            stag,
            comm,
            Mode::Standard,
        ) {
            Ok(s) => s,
            Err(e) => {
                self.pml.release(r);
                return Err(e);
            }
        };
        let bytes = self.dtype(byte)?.clone();
        match self.pml.reqs.get_mut(s) {
            // Still sending: the request keeps the copy (a send request's `packed` only holds
            // memory unless the send is streamed, which a contiguous send never is).
            Some(q) if !q.permanent && !q.complete => {
                q.packed = Some(Box::new(Packed {
                    data: copy,
                    user_buf: std::ptr::null_mut(),
                    count: 0,
                    dtype: bytes,
                }))
            }
            // Sent already (the transport copied it): the copy goes back to the pool.
            _ => pool::give(copy),
        }
        Ok(self.parts_request(comm, s, r))
    }

    /// The argument checks of a send, without starting it.
    fn check_send_args(
        &self,
        count: i64,
        dt: DtypeId,
        dest: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<()> {
        Self::check_count(count)?;
        self.check_dtype(dt)?;
        if !(0..=TAG_UB).contains(&tag) {
            return err!(
                Tag,
                "tag {tag} is invalid for a send (must be between 0 and {TAG_UB})"
            );
        }
        self.dest_gpid(comm, dest).map(|_| ())
    }

    fn parts_request(&mut self, comm: CommId, send: ReqId, recv: ReqId) -> ReqId {
        let mut r = Request::new(Kind::Done, comm);
        r.parts = Some([send, recv]);
        self.pml.reqs.insert(r)
    }

    // ---------------------------------------------------------------------------------------
    // Persistent requests

    /// MPI_Send_init and friends / MPI_Recv_init: an inactive persistent request.
    /// # Safety
    /// The buffer must hold `count` elements of the datatype and stay valid until the
    /// operation completes (MPI's rule for communication buffers).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn persistent(
        &mut self,
        buf: *mut u8,
        count: i64,
        dt: DtypeId,
        rank: i32,
        tag: Tag,
        comm: CommId,
        mode: Mode,
        is_send: bool,
    ) -> Result<ReqId> {
        let n = Self::check_count(count)?;
        let dtype = self.check_dtype(dt)?.clone();
        if is_send {
            if !(0..=TAG_UB).contains(&tag) {
                return err!(
                    Tag,
                    "tag {tag} is invalid for a send (must be between 0 and {TAG_UB})"
                );
            }
            self.dest_gpid(comm, rank)?;
        } else {
            if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
                return err!(Tag, "tag {tag} is invalid for a receive (must be MPI_ANY_TAG or between 0 and {TAG_UB})");
            }
            self.check_source(comm, rank)?;
        }
        let mut r = Request::new(if is_send { Kind::Send } else { Kind::Recv }, comm);
        r.persist = Some(Box::new(Persist {
            user_buf: buf,
            count: n,
            dtype,
            rank,
            tag,
            comm,
            mode,
            is_send,
        }));
        r.active = false;
        r.complete = true;
        Ok(self.pml.reqs.insert(r))
    }

    /// MPI_Start.
    pub fn start(&mut self, slot: ReqId) -> Result<()> {
        if self.coll_owns(slot) {
            return self.coll_start(slot);
        }
        let r = self.pml.reqs.get(slot).ok_or_else(bad_request)?;
        if r.part.is_some() {
            return self.part_start(slot);
        }
        let p = match &r.persist {
            Some(p) if !r.active => (**p).clone(),
            Some(_) => {
                return err!(
                    Request,
                    "MPI_Start on a persistent request that is already active"
                )
            }
            None => return err!(Request, "MPI_Start on a request that is not persistent"),
        };
        let d = p.dtype.clone();
        // The buffered send of the previous start is no longer this request's.
        let old = r.link;
        if let Some(q) = self.pml.reqs.from_wire(old).filter(|_| old != 0) {
            self.pml.reqs.get_mut(q).expect("live").link = 0;
        }
        let fresh = |kind| {
            let mut r = Request::new(kind, p.comm);
            r.active = true;
            r
        };
        let mut nr;
        if p.is_send {
            nr = fresh(Kind::Send);
            match self.dest_gpid(p.comm, p.rank)? {
                None => {
                    nr.complete = true;
                    nr.status = Status::PROC_NULL;
                }
                Some(_) if p.mode == Mode::Buffered => {
                    // The buffered copy is made now; the persistent request completes at once
                    // and takes the place of the user's request of the buffered send (linked
                    // below, once its generation is renewed).
                    let user = self.bsend_start(p.user_buf, p.count, &d, p.rank, p.tag, p.comm)?;
                    if let Some(u) = self.pml.release(user) {
                        (nr.link, nr.peer, nr.seq, nr.send) = (u.link, u.peer, u.seq, u.send);
                    }
                    nr.complete = true;
                }
                Some(peer) => {
                    let (ptr, len, packed, streamed) = self.send_data(p.user_buf, p.count, &d)?;
                    let c = self.comm(p.comm)?;
                    nr.peer = peer;
                    nr.env = Envelope {
                        ctx: c.ctx,
                        src: c.rank,
                        tag: p.tag,
                    };
                    nr.buf = ptr;
                    nr.len = len;
                    nr.packed = packed;
                    nr.streamed = streamed;
                    nr.mode = p.mode;
                }
            }
        } else {
            nr = fresh(Kind::Recv);
            if p.rank == PROC_NULL {
                nr.complete = true;
                nr.status = Status::PROC_NULL;
            } else {
                let (ptr, len, packed) = self.recv_data(p.user_buf, p.count, &d)?;
                nr.env = Envelope {
                    ctx: self.comm(p.comm)?.ctx,
                    src: p.rank,
                    tag: p.tag,
                };
                nr.buf = ptr;
                nr.len = len;
                nr.packed = packed;
            }
        }
        let pending = !nr.complete;
        {
            let r = self.pml.reqs.get_mut(slot).expect("checked above");
            let persist = r.persist.take();
            let user_freed = r.user_freed;
            *r = nr;
            r.persist = persist;
            r.user_freed = user_freed;
        }
        self.pml.reqs.renew(slot);
        let link = self.pml.reqs.get(slot).expect("live").link;
        if let Some(inner) = self.pml.reqs.from_wire(link).filter(|_| link != 0) {
            let w = self.pml.reqs.wire_id(slot);
            self.pml.reqs.get_mut(inner).expect("live").link = w;
        }
        if pending {
            if p.is_send {
                self.pml.start_send(slot, &mut self.net);
            } else {
                self.pml.post_recv(slot);
                if self.pml.busy() {
                    self.pml.flush(&mut self.net);
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Buffered sends

    /// MPI_Buffer_attach.
    /// # Safety
    /// `base` holds `size` bytes until the buffer is detached.
    pub unsafe fn buffer_attach(&mut self, base: *mut u8, size: i64) -> Result<()> {
        if self.bsend.is_some() {
            return err!(Buffer, "a buffer is already attached (detach it first)");
        }
        if size < 0 {
            return err!(Arg, "negative buffer size {size}");
        }
        if base.is_null() && size > 0 {
            return err!(Buffer, "null buffer of {size} bytes");
        }
        self.bsend = Some(BsendBuffer {
            base,
            size: size as usize,
            used: Vec::new(),
        });
        Ok(())
    }

    /// Copy a message into the attached buffer and start sending it from there. The request
    /// returned is complete (the user's buffer is free again).
    fn bsend_start(
        &mut self,
        buf: *const u8,
        count: usize,
        d: &Arc<Datatype>,
        dest: Rank,
        tag: Tag,
        comm: CommId,
    ) -> Result<ReqId> {
        let len = d
            .packed_size(count)
            .ok_or_else(|| crate::mpi_error!(Count, "count {count} overflows the message size"))?;
        let need = len + BSEND_OVERHEAD;
        // Space held by earlier buffered sends is free once they are transmitted; let
        // progress run (completions may only be waiting to be noticed) before giving up.
        let mut tries = 0;
        let (idx, off) = loop {
            self.reap_bsend();
            let Some(b) = self.bsend.as_ref() else {
                return err!(
                    Buffer,
                    "buffered send of {len} bytes with no buffer attached (use MPI_Buffer_attach)"
                );
            };
            if let Some(p) = b.first_fit(need) {
                break p;
            }
            let moved = self.progress();
            tries += 1;
            if tries > 64 && moved == 0 && !self.pml.busy() {
                let b = self.bsend.as_ref().expect("attached");
                let free: usize = b.size - b.used.iter().map(|u| u.1).sum::<usize>();
                return err!(
                    Buffer,
                    "buffered send of {len} bytes (+{BSEND_OVERHEAD} overhead) does not fit in the attached buffer ({} bytes, {free} free)",
                    b.size
                );
            }
        };
        let b = self.bsend.as_mut().expect("attached");
        // SAFETY: [off, off+need) is inside the attached buffer and not used by another send.
        let region = unsafe { b.base.add(off) };
        let peer = self
            .dest_gpid(comm, dest)?
            .expect("PROC_NULL handled by the caller");
        if d.contig {
            // SAFETY: the user's buffer holds `len` bytes; the region has room for them.
            unsafe { crate::mem::copy(buf, region, len) };
        } else {
            // SAFETY: the user's buffer holds `count` elements of the type; the region has room
            // for their `len` packed bytes.
            unsafe { d.pack_to(buf, count, region) };
        }
        let c = self.comm(comm)?;
        let mut r = Request::new(Kind::Send, comm);
        r.peer = peer;
        r.env = Envelope {
            ctx: c.ctx,
            src: c.rank,
            tag,
        };
        r.buf = region;
        r.len = len;
        r.mode = Mode::Standard;
        r.internal = true;
        r.bsend_region = Some((off, need));
        let slot = self.pml.reqs.insert(r);
        self.bsend
            .as_mut()
            .expect("attached")
            .used
            .insert(idx, (off, need, slot));
        self.pml.start_send(slot, &mut self.net);
        // The user's request and the send name each other: MPI_Cancel on the former cancels
        // the latter, which stays (holding its buffer space) while the former lives.
        let user = self.done_request(comm, Status::EMPTY);
        let (uw, iw) = (self.pml.reqs.wire_id(user), self.pml.reqs.wire_id(slot));
        let q = self.pml.reqs.get_mut(slot).expect("live");
        q.link = uw;
        // Once its frame went out, the message is known by its sequence number: the user's
        // request can still cancel it after the send from the buffer is gone.
        let emitted = (!matches!(q.send.state(), SendState::Idle | SendState::Backlogged))
            .then_some((q.peer, q.seq));
        let u = self.pml.reqs.get_mut(user).expect("live");
        u.link = iw;
        if let Some((peer, seq)) = emitted {
            (u.peer, u.seq, u.send) = (peer, seq, Sender::sent());
        }
        self.reap_bsend();
        Ok(user)
    }

    /// Release the buffer space of buffered sends that completed.
    pub fn reap_bsend(&mut self) {
        let Some(b) = self.bsend.as_mut() else { return };
        let reqs = &mut self.pml.reqs;
        b.used.retain(|&(_, _, slot)| {
            // Kept while the user's request waits for the outcome of its cancellation.
            let free = reqs.get(slot).is_some_and(|r| {
                r.complete
                    && (r.link == 0
                        || reqs
                            .from_wire(r.link)
                            .is_none_or(|u| reqs.get(u).is_none_or(|u| u.complete)))
            });
            if free {
                reqs.remove(slot);
            }
            !free
        });
    }

    /// Buffered sends still in flight.
    pub fn bsend_pending(&self) -> usize {
        self.bsend.as_ref().map_or(0, |b| b.used.len())
    }
}

// -------------------------------------------------------------------------------------------
// Blocking operations

/// MPI_Send / Ssend / Rsend / Bsend.
/// # Safety
/// The buffer must hold `count` elements of the datatype.
#[inline]
pub unsafe fn send(
    buf: *const u8,
    count: i64,
    dt: DtypeId,
    dest: Rank,
    tag: Tag,
    comm: CommId,
    mode: Mode,
) -> Result<()> {
    let (slot, done) = with(|e| -> Result<(ReqId, bool)> {
        let s = e.isend(buf, count, dt, dest, tag, comm, mode)?;
        Ok((s, e.pml.reqs.get(s).is_some_and(|r| r.complete)))
    })??;
    if slot == Pml::DONE_SEND {
        return Ok(());
    }
    if !done {
        global::wait_until(|e| e.pml.reqs.get(slot).is_none_or(|r| r.complete))?;
    }
    let st = with(|e| e.pml.release(slot).map(|r| r.status))?;
    match st.and_then(|s| s.error) {
        Some(err) => Err(*err),
        None => Ok(()),
    }
}

/// MPI_Recv: the status (whose `error` may report truncation).
/// # Safety
/// The buffer must hold `count` elements of the datatype.
#[inline]
pub unsafe fn recv(
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    src: Rank,
    tag: Tag,
    comm: CommId,
) -> Result<Status> {
    if !global::is_multithreaded() {
        match with(|e| e.recv_direct(buf, count, dt, src, tag, comm))?? {
            DirectPost::Done(st) => return Ok(st),
            DirectPost::Posted => {
                global::wait_until(|e| e.pml.direct_ready())?;
                match with(|e| e.pml.take_direct())? {
                    Some(Ok(st)) => return Ok(st),
                    Some(Err(slot)) => return wait(slot),
                    None => unreachable!("direct_ready() held"),
                }
            }
            DirectPost::UseRequest => {}
        }
    }
    let slot = with(|e| e.irecv(buf, count, dt, src, tag, comm))??;
    wait(slot)
}

/// MPI_Wait on one request slot.
#[inline]
pub fn wait(slot: ReqId) -> Result<Status> {
    global::wait_until(|e| e.is_complete(slot).unwrap_or(true))?;
    with(|e| e.collect(slot))?.map(|s| s.expect("complete"))
}

/// MPI_Test on one request: its status once complete (collected as by MPI_Wait), after one
/// progress pass if it was not; when it still is not, the waiting policy's idle step, so that
/// a rank polling in a loop yields its core to the ranks it waits for.
pub fn test(slot: ReqId) -> Result<Option<Status>> {
    // A nonblocking collective may be waiting for a user reduction, run out here.
    crate::mpi::coll::run_deferred();
    let st = with(|e| -> Result<Option<Status>> {
        if !e.is_complete(slot)? {
            e.progress();
        }
        e.collect(slot)
    })??;
    if st.is_none() {
        global::idle();
    }
    Ok(st)
}

/// MPI_Request_get_status: as [`test`], without collecting the request.
pub fn test_status(slot: ReqId) -> Result<Option<Status>> {
    crate::mpi::coll::run_deferred();
    let st = with(|e| -> Result<Option<Status>> {
        if let Some(s) = e.peek(slot)? {
            return Ok(Some(s));
        }
        e.progress();
        e.peek(slot)
    })??;
    if st.is_none() {
        global::idle();
    }
    Ok(st)
}

/// Has every entry of a request array completed (None entries and unknown slots count as
/// complete: collecting them reports the error)?
fn all_complete(e: &Engine, slots: &[Option<ReqId>]) -> bool {
    slots
        .iter()
        .all(|x| x.is_none_or(|slot| e.is_complete(slot).unwrap_or(true)))
}

/// The indices of the complete entries of a request array.
fn complete_entries(e: &Engine, slots: &[Option<ReqId>]) -> Vec<usize> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_some_and(|slot| e.is_complete(slot).unwrap_or(false)))
        .map(|(i, _)| i)
        .collect()
}

/// The entries of a request array that are active: None for null handles and for persistent
/// requests that are not started (MPI_Waitany and the *some calls skip both).
pub fn active(slots: &[Option<ReqId>]) -> Result<Vec<Option<ReqId>>> {
    with(|e| {
        slots
            .iter()
            .map(|x| x.filter(|slot| !e.is_inactive(*slot)))
            .collect()
    })
}

/// MPI_Waitall: wait until every entry has completed; the caller collects them. A request
/// stays complete until collected, so each check starts at the first entry the last one
/// found incomplete (a window of receives completing in order was checked from its start on
/// every progress pass).
pub fn wait_all(slots: &[Option<ReqId>]) -> Result<()> {
    let mut from = 0;
    global::wait_until(|e| {
        while let Some(x) = slots.get(from) {
            if x.is_some_and(|slot| !e.is_complete(slot).unwrap_or(true)) {
                return false;
            }
            from += 1;
        }
        true
    })
}

/// MPI_Testall: have all entries completed (after one progress pass if not)? The caller
/// collects them when they have.
pub fn test_all(slots: &[Option<ReqId>]) -> Result<bool> {
    crate::mpi::coll::run_deferred();
    let done = with(|e| {
        if all_complete(e, slots) {
            return true;
        }
        e.progress();
        all_complete(e, slots)
    })?;
    if !done {
        global::idle();
    }
    Ok(done)
}

/// MPI_Testany: the index of the first complete active entry, after one progress pass if
/// none was; the caller collects it.
pub fn test_any(slots: &[Option<ReqId>]) -> Result<Option<usize>> {
    crate::mpi::coll::run_deferred();
    let first = |e: &Engine| {
        slots
            .iter()
            .position(|x| x.is_some_and(|slot| e.is_complete(slot).unwrap_or(false)))
    };
    let found = with(|e| {
        first(e).or_else(|| {
            e.progress();
            first(e)
        })
    })?;
    if found.is_none() {
        global::idle();
    }
    Ok(found)
}

/// MPI_Waitsome: wait until at least one active entry completes; the indices of every
/// complete entry, for the caller to collect.
pub fn wait_some(slots: &[Option<ReqId>]) -> Result<Vec<usize>> {
    global::wait_until(|e| {
        slots
            .iter()
            .any(|x| x.is_some_and(|slot| e.is_complete(slot).unwrap_or(true)))
    })?;
    with(|e| complete_entries(e, slots))
}

/// MPI_Testsome: one progress pass, then the indices of the complete entries.
pub fn test_some(slots: &[Option<ReqId>]) -> Result<Vec<usize>> {
    crate::mpi::coll::run_deferred();
    let done = with(|e| {
        e.progress();
        complete_entries(e, slots)
    })?;
    if done.is_empty() {
        global::idle();
    }
    Ok(done)
}

/// MPI_Sendrecv: the receive is posted first, then the send; the status is the receive's,
/// with the send's error when the receive has none.
/// # Safety
/// Each buffer must hold its count of elements of its datatype.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sendrecv(
    sendbuf: *const u8,
    sendcount: i64,
    sendtype: DtypeId,
    dest: Rank,
    sendtag: Tag,
    recvbuf: *mut u8,
    recvcount: i64,
    recvtype: DtypeId,
    source: Rank,
    recvtag: Tag,
    comm: CommId,
) -> Result<Status> {
    let (s, r) = with(|e| -> Result<(ReqId, ReqId)> {
        let r = e.irecv(recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        match e.isend(
            sendbuf,
            sendcount,
            sendtype,
            dest,
            sendtag,
            comm,
            Mode::Standard,
        ) {
            Ok(s) => Ok((s, r)),
            Err(err) => {
                e.pml.cancel(r);
                e.pml.release(r);
                Err(err)
            }
        }
    })??;
    let sst = wait(s)?;
    let mut st = wait(r)?;
    if st.error.is_none() {
        st.error = sst.error;
    }
    Ok(st)
}

/// MPI_Sendrecv_replace: a packed copy of the buffer is sent, so that the receive can land in
/// the buffer itself.
/// # Safety
/// The buffer must hold `count` elements of the datatype.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sendrecv_replace(
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    dest: Rank,
    sendtag: Tag,
    source: Rank,
    recvtag: Tag,
    comm: CommId,
) -> Result<Status> {
    if count < 0 {
        return err!(Count, "negative count {count}");
    }
    let copy = with(|e| -> Result<Vec<u8>> {
        let t = e.dtype(dt)?.clone();
        let mut v = Vec::new();
        t.pack(buf as *const u8, count as usize, &mut v);
        Ok(v)
    })??;
    let byte = crate::mpi::datatype::predefined_index("MPI_BYTE").expect("MPI_BYTE");
    let byte = DtypeId::from_idx(byte);
    sendrecv(
        copy.as_ptr(),
        copy.len() as i64,
        byte,
        dest,
        sendtag,
        buf,
        count,
        dt,
        source,
        recvtag,
        comm,
    )
}

/// MPI_Iprobe: the status of a matching message, or None after the idle step.
pub fn iprobe(src: Rank, tag: Tag, comm: CommId) -> Result<Option<Status>> {
    let st = with(|e| e.iprobe(src, tag, comm))??;
    if st.is_none() {
        global::idle();
    }
    Ok(st)
}

/// MPI_Improbe: the message and its status, or None after the idle step.
pub fn improbe(src: Rank, tag: Tag, comm: CommId) -> Result<Option<(Option<u32>, Status)>> {
    let m = with(|e| e.improbe(src, tag, comm))??;
    if m.is_none() {
        global::idle();
    }
    Ok(m)
}

/// MPI_Probe.
pub fn probe(src: Rank, tag: Tag, comm: CommId) -> Result<Status> {
    loop {
        if let Some(s) = with(|e| e.iprobe(src, tag, comm))?? {
            return Ok(s);
        }
        global::idle();
    }
}

/// MPI_Mprobe.
pub fn mprobe(src: Rank, tag: Tag, comm: CommId) -> Result<(Option<u32>, Status)> {
    loop {
        if let Some(m) = with(|e| e.improbe(src, tag, comm))?? {
            return Ok(m);
        }
        global::idle();
    }
}

/// MPI_Buffer_detach: waits for buffered sends, returns the buffer and its size.
pub fn buffer_detach() -> Result<(*mut u8, usize)> {
    global::wait_until(|e| {
        e.reap_bsend();
        e.bsend_pending() == 0
    })?;
    with(|e| match e.bsend.take() {
        Some(b) => Ok((b.base, b.size)),
        None => err!(Buffer, "no buffer is attached"),
    })?
}

/// Wait until any of `slots` (None entries are inactive) completes; its index and status.
/// None when every entry is inactive.
pub fn wait_any(slots: &[Option<ReqId>]) -> Result<Option<(usize, Status)>> {
    if slots.iter().all(|s| s.is_none()) {
        return Ok(None);
    }
    loop {
        let found = with(|e| -> Result<Option<(usize, Status)>> {
            for pass in 0..2 {
                let mut any_active = false;
                for (i, s) in slots.iter().enumerate() {
                    let Some(s) = *s else { continue };
                    if e.is_inactive(s) {
                        continue;
                    }
                    any_active = true;
                    if e.is_complete(s)? {
                        return Ok(Some((i, e.collect(s)?.expect("complete"))));
                    }
                }
                if !any_active {
                    return Ok(Some((usize::MAX, Status::EMPTY)));
                }
                if pass == 0 {
                    e.progress();
                }
            }
            Ok(None)
        })??;
        if let Some((i, s)) = found {
            return Ok(if i == usize::MAX { None } else { Some((i, s)) });
        }
        global::idle();
    }
}
