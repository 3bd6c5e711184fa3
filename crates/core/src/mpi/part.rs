//! Partitioned communication (MPI-4.1 chapter 4): MPI_Psend_init, MPI_Precv_init,
//! MPI_Pready (and its range and list forms), MPI_Parrived, on the point-to-point engine.
//!
//! A partitioned request is a persistent request whose [`Part`] (`Request::part`) holds the
//! operation; each round starts with MPI_Start and ends with a completion call. Its messages
//! travel in three matching spaces of the communicator that nothing else uses: context ids
//! with the top bit set (`ctx + PART_SPACE + 0, 1, 2`; context ids are multiples of 4 far below
//! 2^31, and matching compares context ids for equality only), so they never meet the user's
//! point-to-point messages, collectives or management traffic.
//!
//! - **Matching, once, at initialization** (MPI-4.1 4.2.3: a partitioned send matches the
//!   partitioned receive by communicator, ranks and tag, in initialization order): at
//!   MPI_Psend_init the sender sends a Hello (`HELLO` space, the user's tag) with its token (a
//!   process-wide counter), its partition count S and bytes per partition s, and posts the
//!   receive of the reply; MPI_Precv_init posts the receive of a Hello. Messages of one pair
//!   and space are not overtaken, so hellos match receives in initialization order, whatever
//!   the order of the first MPI_Start calls. When its first round starts and the Hello is in,
//!   the receiver checks that S * s equals its own size, takes a block of S data tags from a
//!   process-wide counter and answers with its first tag (`REPLY` space, tag = the sender's
//!   token). A request freed before its handshake ended leaves the hello going on (kept in
//!   `Engine::part_orphans` with its buffers), so later pairs still match in order.
//! - **Data**: partition k of the sender is one message in the `DATA` space with tag
//!   base + k, sent at MPI_Pready (or, before the reply came, by the next progress pass after
//!   it); the receiver posts the S receives when its round starts (once matched), straight into
//!   the buffer when its datatype is contiguous, else into a packed copy unpacked per receive
//!   partition as it becomes complete. Receive partition p is complete when the sender
//!   partitions covering its bytes are (MPI_Parrived).
//! - Rounds after the first post and send at once: a message of round r+1 that arrives before
//!   the receiver's round r+1 starts waits unexpected, behind round r's message of the same
//!   tag, which matched round r's receive.
//!
//! Active partitioned requests are listed in `Engine::parts`; each progress pass advances them
//! (the handshake, deferred sends).

use crate::ids::{CommId, DtypeId, ReqId};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::err;
use crate::error::{MpiError, Result};
use crate::mpi::datatype::Datatype;
use crate::mpi::engine::Engine;
use crate::mpi::p2p::TAG_UB;
use crate::mpi::pml::Pml;
use crate::mpi::request::{Kind, Mode, Request, Status, ANY_SOURCE, ANY_TAG, PROC_NULL};

/// Context offset of the partitioned spaces (see the module doc).
pub const PART_SPACE: u32 = 1 << 31;
const HELLO: u32 = PART_SPACE;
const REPLY: u32 = PART_SPACE + 1;
const DATA: u32 = PART_SPACE + 2;

/// The engine id of MPI_BYTE.
const BYTE: DtypeId = DtypeId::new(3);

/// Data tags handed out by receivers of this process.
static NEXT_TAG: AtomicU32 = AtomicU32::new(0);

/// Tokens of partitioned sends of this process: the tag of their handshake reply.
static NEXT_TOKEN: AtomicU32 = AtomicU32::new(0);

/// A fresh token (unique among the live requests, and not reused for a long time, so that a
/// reply meant for a freed request can never meet a later one).
fn token() -> u32 {
    NEXT_TOKEN
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            Some(if t >= TAG_UB as u32 { 0 } else { t + 1 })
        })
        .unwrap_or(0)
}

/// A block of `n` data tags.
fn tag_block(n: u32) -> i32 {
    loop {
        let base = NEXT_TAG.load(Ordering::Relaxed);
        let (b, next) = match base.checked_add(n) {
            Some(e) if e <= TAG_UB as u32 => (base, e),
            _ => (0, n),
        };
        if NEXT_TAG
            .compare_exchange(base, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return b as i32;
        }
    }
}

/// What the two sides agreed on at the first round.
#[derive(Debug, Clone, Copy)]
struct Matched {
    /// The sender's partitions and bytes per partition.
    parts: usize,
    bytes: usize,
    /// Data tag of sender partition 0.
    base: i32,
}

/// A partitioned operation (see the module doc).
#[derive(Debug)]
pub struct Part {
    pub send: bool,
    buf: *mut u8,
    partitions: usize,
    count: usize,
    dtype: Arc<Datatype>,
    peer: i32,
    tag: i32,
    comm: CommId,
    /// The round is on (between MPI_Start and the completion call that ends it).
    pub active: bool,
    matched: Option<Matched>,
    /// Handshake buffers (hello: token, S, s low, s high; reply: base) and requests.
    hello: Box<[u32; 4]>,
    reply: Box<[u32; 1]>,
    handshake: Vec<ReqId>,
    /// Sender: partitions marked ready this round, and their send requests (None: not sent).
    ready: Vec<bool>,
    /// Per sender partition: its request this round (sends at the sender, receives at the
    /// receiver); None before it is posted.
    subs: Vec<Option<ReqId>>,
    /// Receiver with a non-contiguous datatype: the packed bytes, and which receive
    /// partitions were unpacked this round.
    staged: Option<Vec<u8>>,
    unpacked: Vec<bool>,
    /// Sender with a non-contiguous datatype: each partition packed for its send.
    packed: Vec<Vec<u8>>,
    /// A failure of the handshake, reported by the completion call.
    error: Option<MpiError>,
}

impl Part {
    fn total(&self) -> usize {
        self.dtype.size * self.count * self.partitions
    }
}

impl Engine {
    /// MPI_Psend_init / MPI_Precv_init: an inactive partitioned request.
    ///
    /// # Safety
    /// `buf` holds `partitions * count` elements of `dt` and stays valid while the request
    /// lives (MPI's rule for persistent requests).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn part_init(
        &mut self,
        send: bool,
        buf: *mut u8,
        partitions: i64,
        count: i64,
        dt: DtypeId,
        peer: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        let call = if send {
            "MPI_Psend_init"
        } else {
            "MPI_Precv_init"
        };
        if partitions < 1 {
            return err!(Arg, "{call}: {partitions} partitions (at least 1)");
        }
        if count < 0 {
            return err!(Count, "{call}: negative count {count}");
        }
        if !(0..=TAG_UB).contains(&tag) {
            return err!(
                Tag,
                "{call}: tag {tag} is invalid (between 0 and {TAG_UB}; MPI_ANY_TAG is not allowed)"
            );
        }
        if peer == ANY_SOURCE {
            return err!(Rank, "{call}: MPI_ANY_SOURCE is not allowed");
        }
        let n = self.comm(comm)?.peers().len();
        if peer != PROC_NULL && !(peer >= 0 && (peer as usize) < n) {
            return err!(
                Rank,
                "{call}: rank {peer} is out of range for a communicator of size {n}"
            );
        }
        let d = self.dtype(dt)?.clone();
        if !d.committed {
            return err!(
                Type,
                "{call}: {} has not been committed (call MPI_Type_commit)",
                d.describe()
            );
        }
        let partitions = partitions as usize;
        let count = count as usize;
        if d.size
            .checked_mul(count)
            .and_then(|b| b.checked_mul(partitions))
            .is_none()
        {
            return err!(
                Count,
                "{call}: {partitions} partitions of {count} elements overflow"
            );
        }
        let mut r = Request::new(Kind::Done, comm);
        r.active = false;
        r.part = Some(Box::new(Part {
            send,
            buf,
            partitions,
            count,
            dtype: d,
            peer,
            tag,
            comm,
            active: false,
            matched: None,
            hello: Box::new([0; 4]),
            reply: Box::new([0]),
            handshake: Vec::new(),
            ready: vec![false; partitions],
            subs: Vec::new(),
            staged: None,
            unpacked: vec![false; partitions],
            packed: Vec::new(),
            error: None,
        }));
        let slot = self.pml.reqs.insert(r);
        // The handshake is posted now, so that sends and receives match in initialization
        // order (not in the order of their first MPI_Start).
        let mut p = self.part_take(slot)?;
        let posted = self.part_post_handshake(&mut p);
        self.part_put(slot, p);
        if let Err(e) = posted {
            let _ = self.part_free(slot);
            return Err(e);
        }
        Ok(slot)
    }

    /// The handshake of a new partitioned request: the sender's hello and the receive of its
    /// reply; the receiver's receive of the hello.
    fn part_post_handshake(&mut self, p: &mut Part) -> Result<()> {
        if p.peer == PROC_NULL {
            return Ok(());
        }
        // SAFETY: the handshake buffers are boxed in the Part, which lives as long as the
        // request, and past it while these requests are pending (`part_orphans`).
        unsafe {
            if p.send {
                let s = p.dtype.size * p.count;
                let token = token();
                *p.hello = [
                    token,
                    p.partitions as u32,
                    s as u32,
                    (s as u64 >> 32) as u32,
                ];
                let h = self.isend_on(
                    p.hello.as_ptr().cast(),
                    16,
                    BYTE,
                    p.peer,
                    p.tag,
                    p.comm,
                    Mode::Standard,
                    HELLO,
                )?;
                p.handshake.push(h);
                let rr = self.irecv_on(
                    p.reply.as_mut_ptr().cast(),
                    4,
                    BYTE,
                    p.peer,
                    token as i32,
                    p.comm,
                    REPLY,
                )?;
                p.handshake.push(rr);
            } else {
                let h = self.irecv_on(
                    p.hello.as_mut_ptr().cast(),
                    16,
                    BYTE,
                    p.peer,
                    p.tag,
                    p.comm,
                    HELLO,
                )?;
                p.handshake.push(h);
            }
        }
        Ok(())
    }

    /// Take a partitioned request's [`Part`] out of its slot (put back by `part_put`).
    fn part_take(&mut self, slot: ReqId) -> Result<Box<Part>> {
        match self.pml.reqs.get_mut(slot) {
            Some(r) => r
                .part
                .take()
                .ok_or_else(|| crate::mpi_error!(Request, "not a partitioned request")),
            None => err!(Request, "invalid request (freed, or not a request)"),
        }
    }

    fn part_put(&mut self, slot: ReqId, p: Box<Part>) {
        if let Some(r) = self.pml.reqs.get_mut(slot) {
            r.part = Some(p);
        }
    }

    /// MPI_Start of a partitioned request.
    pub(crate) fn part_start(&mut self, slot: ReqId) -> Result<()> {
        let mut p = self.part_take(slot)?;
        let r = self.part_start_in(&mut p);
        self.part_put(slot, p);
        r?;
        if !self.parts.contains(&slot) {
            self.parts.push(slot);
        }
        self.part_step(slot);
        Ok(())
    }

    fn part_start_in(&mut self, p: &mut Part) -> Result<()> {
        if p.active {
            return err!(
                Request,
                "MPI_Start on a partitioned request that is already active"
            );
        }
        p.active = true;
        p.error = None;
        p.ready.iter_mut().for_each(|x| *x = false);
        p.unpacked.iter_mut().for_each(|x| *x = false);
        if p.peer == PROC_NULL {
            return Ok(());
        }
        if p.matched.is_some() && !p.send {
            self.part_post_receives(p)?;
        }
        Ok(())
    }

    /// The receiver's S data receives of a round.
    fn part_post_receives(&mut self, p: &mut Part) -> Result<()> {
        let m = p.matched.expect("matched");
        let contiguous = p.dtype.contiguous_span(p.count * p.partitions);
        let base: *mut u8 = match contiguous {
            Some(off) => p.buf.wrapping_offset(off),
            None => {
                let total = p.total();
                p.staged
                    .get_or_insert_with(|| vec![0u8; total])
                    .as_mut_ptr()
            }
        };
        p.subs.clear();
        for k in 0..m.parts {
            // SAFETY: the user's buffer (or the staged copy, owned by the Part) holds the
            // round's bytes; sender partition k is bytes [k*s, (k+1)*s).
            let s = unsafe {
                self.irecv_on(
                    base.wrapping_add(k * m.bytes),
                    m.bytes as i64,
                    BYTE,
                    p.peer,
                    m.base + k as i32,
                    p.comm,
                    DATA,
                )?
            };
            p.subs.push(Some(s));
        }
        Ok(())
    }

    /// Send the ready partitions not sent yet (the sender, once matched).
    fn part_send_ready(&mut self, p: &mut Part) -> Result<()> {
        let Some(m) = p.matched else { return Ok(()) };
        if p.subs.len() != p.partitions {
            p.subs = vec![None; p.partitions];
        }
        if p.packed.len() != p.partitions {
            p.packed = vec![Vec::new(); p.partitions];
        }
        let contiguous = p.dtype.contiguous_span(p.count);
        let ext = p.dtype.extent();
        for k in 0..p.partitions {
            if !p.ready[k] || p.subs[k].is_some() {
                continue;
            }
            let at = p.buf.wrapping_offset(k as isize * p.count as isize * ext);
            let src: *const u8 = match contiguous {
                Some(off) => at.wrapping_offset(off),
                None => {
                    let v = &mut p.packed[k];
                    v.clear();
                    // SAFETY: partition k is `count` elements of the datatype at `at`.
                    unsafe { p.dtype.pack(at, p.count, v) };
                    v.as_ptr()
                }
            };
            // SAFETY: `src` holds the partition's bytes until its send completes (the
            // user's buffer, or `packed`, untouched until the round is collected).
            let s = unsafe {
                self.isend_on(
                    src,
                    m.bytes as i64,
                    BYTE,
                    p.peer,
                    m.base + k as i32,
                    p.comm,
                    Mode::Standard,
                    DATA,
                )?
            };
            p.subs[k] = Some(s);
        }
        Ok(())
    }

    /// Advance one partitioned request: the handshake, deferred sends.
    pub(crate) fn part_step(&mut self, slot: ReqId) {
        let Ok(mut p) = self.part_take(slot) else {
            return;
        };
        if let Err(e) = self.part_step_in(&mut p) {
            p.error.get_or_insert(e);
        }
        self.part_put(slot, p);
    }

    fn part_step_in(&mut self, p: &mut Part) -> Result<()> {
        if !p.active || p.peer == PROC_NULL || p.error.is_some() {
            return Ok(());
        }
        if p.matched.is_none() {
            if !p
                .handshake
                .iter()
                .all(|&h| self.is_complete(h).unwrap_or(true))
            {
                return Ok(());
            }
            for h in std::mem::take(&mut p.handshake) {
                if h != Pml::DONE_SEND {
                    if let Some(st) = self.collect(h)? {
                        if let Some(e) = st.error {
                            return Err(*e);
                        }
                    }
                }
            }
            if p.send {
                p.matched = Some(Matched {
                    parts: p.partitions,
                    bytes: p.dtype.size * p.count,
                    base: p.reply[0] as i32,
                });
            } else {
                let parts = p.hello[1] as usize;
                let bytes = (p.hello[2] as u64 | (p.hello[3] as u64) << 32) as usize;
                if parts.checked_mul(bytes) != Some(p.total()) {
                    return err!(
                        Truncate,
                        "the partitioned send of {parts} partitions of {bytes} bytes does not fit the partitioned receive of {} partitions of {} bytes",
                        p.partitions,
                        p.dtype.size * p.count
                    );
                }
                let base = tag_block(parts as u32);
                p.matched = Some(Matched { parts, bytes, base });
                *p.reply = [base as u32];
                // SAFETY: the reply buffer is boxed in the Part; the send copies it or
                // completes before the request ends.
                let h = unsafe {
                    self.isend_on(
                        p.reply.as_ptr().cast(),
                        4,
                        BYTE,
                        p.peer,
                        p.hello[0] as i32,
                        p.comm,
                        Mode::Standard,
                        REPLY,
                    )?
                };
                p.handshake.push(h);
                self.part_post_receives(p)?;
            }
        }
        if p.send {
            self.part_send_ready(p)?;
        }
        Ok(())
    }

    /// Progress pass: every active partitioned request.
    pub(crate) fn part_progress(&mut self) {
        for slot in self.parts.clone() {
            self.part_step(slot);
        }
        if !self.part_orphans.is_empty() {
            self.part_sweep_orphans();
        }
    }

    fn part_ref(&self, slot: ReqId) -> Result<&Part> {
        match self.pml.reqs.get(slot).and_then(|r| r.part.as_deref()) {
            Some(p) => Ok(p),
            None => err!(Request, "not a partitioned request"),
        }
    }

    /// Is the round of a partitioned request complete (true when inactive)?
    pub(crate) fn part_complete(&self, p: &Part) -> bool {
        if !p.active || p.peer == PROC_NULL || p.error.is_some() {
            return true;
        }
        let Some(m) = p.matched else { return false };
        let done = |s: &Option<ReqId>| s.is_some_and(|s| self.is_complete(s).unwrap_or(true));
        let subs = if p.send { p.partitions } else { m.parts };
        p.handshake
            .iter()
            .all(|&h| self.is_complete(h).unwrap_or(true))
            && p.subs.len() == subs
            && p.subs.iter().all(done)
    }

    /// MPI_Pready and friends: mark partitions ready (and send them when matched).
    pub fn part_ready(&mut self, slot: ReqId, partitions: &[i32]) -> Result<()> {
        let mut p = self.part_take(slot)?;
        let r = (|| {
            if !p.send {
                return err!(Request, "MPI_Pready on a partitioned receive request");
            }
            if !p.active {
                return err!(
                    Request,
                    "MPI_Pready on an inactive partitioned request (call MPI_Start first)"
                );
            }
            for &k in partitions {
                if k < 0 || k as usize >= p.partitions {
                    return err!(
                        Arg,
                        "partition {k} is out of range for a request of {} partitions",
                        p.partitions
                    );
                }
                if p.ready[k as usize] {
                    return err!(Arg, "partition {k} was marked ready already in this round");
                }
            }
            for &k in partitions {
                p.ready[k as usize] = true;
            }
            Ok(())
        })();
        if r.is_ok() && p.peer != PROC_NULL {
            if let Err(e) = self.part_step_in(&mut p) {
                p.error.get_or_insert(e);
            }
        }
        self.part_put(slot, p);
        r
    }

    /// MPI_Parrived: has receive partition `k` arrived? (Its data is in the buffer then.)
    pub fn part_arrived(&mut self, slot: ReqId, k: i32) -> Result<bool> {
        {
            let p = self.part_ref(slot)?;
            if p.send {
                return err!(Request, "MPI_Parrived on a partitioned send request");
            }
            if k < 0 || k as usize >= p.partitions {
                return err!(
                    Arg,
                    "partition {k} is out of range for a request of {} partitions",
                    p.partitions
                );
            }
            if !p.active || p.peer == PROC_NULL {
                return Ok(true);
            }
        }
        let mut arrived = self.part_arrived_now(slot, k as usize)?;
        if !arrived {
            self.progress();
            arrived = self.part_arrived_now(slot, k as usize)?;
        }
        Ok(arrived)
    }

    fn part_arrived_now(&mut self, slot: ReqId, k: usize) -> Result<bool> {
        self.part_step(slot);
        let mut p = self.part_take(slot)?;
        let got = self.part_arrived_in(&mut p, k);
        self.part_put(slot, p);
        Ok(got)
    }

    /// Whether receive partition `k` is in; unpacks it from the staged copy when it is.
    fn part_arrived_in(&mut self, p: &mut Part, k: usize) -> bool {
        if p.error.is_some() {
            return true;
        }
        let Some(m) = p.matched else { return false };
        if p.subs.len() != m.parts {
            return false;
        }
        let r = p.dtype.size * p.count;
        let (first, last) = if r == 0 || m.bytes == 0 {
            // Empty partitions: the sender's partition k, when both have as many; else
            // every sender partition.
            if m.parts == p.partitions {
                (k, k + 1)
            } else {
                (0, m.parts)
            }
        } else {
            (
                k * r / m.bytes,
                ((k + 1) * r).div_ceil(m.bytes).min(m.parts),
            )
        };
        let all =
            (first..last).all(|j| p.subs[j].is_some_and(|s| self.is_complete(s).unwrap_or(true)));
        if all && !p.unpacked[k] {
            if let Some(v) = p.staged.as_ref().filter(|_| r > 0) {
                // SAFETY: the user's buffer holds the request's elements; partition k is
                // `count` elements at buf + k * count * extent.
                unsafe {
                    p.dtype.unpack(
                        &v[k * r..(k + 1) * r],
                        p.buf
                            .wrapping_offset(k as isize * p.count as isize * p.dtype.extent()),
                        p.count,
                    )
                };
            }
            p.unpacked[k] = true;
        }
        all
    }

    /// [`Engine::collect`] of a partitioned request: the round's status once complete; the
    /// request becomes inactive.
    pub(crate) fn part_collect(&mut self, slot: ReqId) -> Result<Option<Status>> {
        let mut p = self.part_take(slot)?;
        let r = self.part_collect_in(&mut p);
        self.part_put(slot, p);
        if let Ok(Some(_)) = r {
            self.parts.retain(|&s| s != slot);
        }
        r
    }

    fn part_collect_in(&mut self, p: &mut Part) -> Result<Option<Status>> {
        if !p.active {
            return Ok(Some(Status::EMPTY));
        }
        if p.peer == PROC_NULL {
            p.active = false;
            return Ok(Some(Status::PROC_NULL));
        }
        if !self.part_complete(p) {
            return Ok(None);
        }
        if !p.send && p.error.is_none() {
            for k in 0..p.partitions {
                self.part_arrived_in(p, k);
            }
        }
        let mut error = p.error.take().map(Box::new);
        for h in std::mem::take(&mut p.handshake)
            .into_iter()
            .chain(p.subs.drain(..).flatten())
        {
            if h == Pml::DONE_SEND {
                continue;
            }
            if let Some(st) = self.collect(h)? {
                if error.is_none() {
                    error = st.error;
                }
            }
        }
        p.active = false;
        Ok(Some(Status {
            source: if p.send { ANY_SOURCE } else { p.peer },
            tag: if p.send { ANY_TAG } else { p.tag },
            error,
            bytes: if p.send { 0 } else { p.total() as u64 },
            cancelled: false,
        }))
    }

    /// MPI_Request_get_status of a partitioned request: the status its completion would give,
    /// once complete (the request stays active).
    pub(crate) fn part_peek(&self, p: &Part) -> Option<Status> {
        if !p.active {
            return Some(Status::EMPTY);
        }
        if p.peer == PROC_NULL {
            return Some(Status::PROC_NULL);
        }
        self.part_complete(p).then(|| Status {
            source: if p.send { ANY_SOURCE } else { p.peer },
            tag: if p.send { ANY_TAG } else { p.tag },
            error: p.error.clone().map(Box::new),
            bytes: if p.send { 0 } else { p.total() as u64 },
            cancelled: false,
        })
    }

    /// Is the partitioned request in slot `slot` inactive (or not one)?
    pub(crate) fn part_inactive(&self, slot: ReqId) -> bool {
        self.part_ref(slot).is_ok_and(|p| !p.active)
    }

    /// MPI_Request_free of a partitioned request. MPI-4.1 (chapter 4, as MPI-4.0 p. 116)
    /// makes freeing an active partitioned request whose round has not completed erroneous,
    /// so that is refused with MPI_ERR_REQUEST and the round goes on untouched. An inactive
    /// request, or an active one whose round is complete (every partition transferred, the
    /// completion call not made yet), is freed: the round is collected first.
    pub(crate) fn part_free(&mut self, slot: ReqId) -> Result<()> {
        if !self.part_inactive(slot) {
            self.part_step(slot);
            if !self.part_round_done(slot)? {
                return err!(
                    Request,
                    "MPI_Request_free of an active partitioned request whose round has not completed is erroneous (MPI-4.1 chapter 4); complete the round (MPI_Wait, MPI_Test) first"
                );
            }
            // Its status (an error of the round included) has nowhere to go.
            let _ = self.part_collect(slot)?;
        }
        self.parts.retain(|&s| s != slot);
        // A request never started may have its handshake pending: the sender's reply
        // receive is cancelled; the hello (sent, or a receive posted for it) goes on, so
        // that later requests of the pair still match in initialization order; the Part
        // (the buffers) stays until they end.
        if let Ok(mut p) = self.part_take(slot) {
            if p.send && p.handshake.len() == 2 && !self.is_complete(p.handshake[1]).unwrap_or(true)
            {
                // (A receive not matched yet is cancelled at once; one that is completes.)
                let _ = self.cancel(p.handshake[1]);
            }
            self.pml.reqs.remove(slot);
            if !self.part_settle_handshake(&mut p) {
                // (The buffers are boxed apart: moving the Part moves no buffer.)
                self.part_orphans.push(*p);
            }
        } else {
            self.pml.reqs.remove(slot);
        }
        Ok(())
    }

    /// Collect the ended handshake requests of a freed partitioned request; true when none
    /// is left.
    fn part_settle_handshake(&mut self, p: &mut Part) -> bool {
        let hs = std::mem::take(&mut p.handshake);
        for h in hs {
            if h == Pml::DONE_SEND {
                continue;
            }
            if self.is_complete(h).unwrap_or(true) {
                let _ = self.collect(h);
            } else {
                p.handshake.push(h);
            }
        }
        p.handshake.is_empty()
    }

    /// Progress pass: drop the freed partitioned requests whose handshake has ended.
    fn part_sweep_orphans(&mut self) {
        let mut orphans = std::mem::take(&mut self.part_orphans);
        orphans.retain_mut(|p| !self.part_settle_handshake(p));
        orphans.append(&mut self.part_orphans);
        self.part_orphans = orphans;
    }

    /// MPI_Cancel of a partitioned request. Cancelling an active one whose round has not
    /// completed is erroneous (as freeing it, see [`Engine::part_free`]) and refused with
    /// MPI_ERR_REQUEST; on an inactive request, or a round that is complete, there is nothing
    /// to cancel: the completion call reports it not cancelled.
    pub(crate) fn part_cancel(&mut self, slot: ReqId) -> Result<()> {
        if self.part_inactive(slot) {
            return Ok(());
        }
        self.part_step(slot);
        if self.part_round_done(slot)? {
            return Ok(());
        }
        err!(
            Request,
            "MPI_Cancel of an active partitioned request whose round has not completed is erroneous (MPI-4.1 chapter 4)"
        )
    }

    /// Has the round of an active partitioned request completed (after a progress pass)?
    fn part_round_done(&mut self, slot: ReqId) -> Result<bool> {
        if self.part_complete(self.part_ref(slot)?) {
            return Ok(true);
        }
        self.progress();
        self.part_step(slot);
        Ok(self.part_complete(self.part_ref(slot)?))
    }
}
