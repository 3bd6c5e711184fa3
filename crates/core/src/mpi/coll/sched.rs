//! Compiled collective schedules.
//!
//! Every collective algorithm is written once, as a builder that emits a [`Sched`]: rounds of
//! local steps (typed copies, reductions) followed by sends and receives. A round's local steps
//! run first, in order; then its sends and receives are posted together; the next round starts
//! when all of them have completed. A blocking collective runs its schedule to the end
//! ([`run`]); a nonblocking one is advanced by every progress pass of the engine and completes
//! an ordinary request; a persistent one keeps its schedule and replays it at each start.
//!
//! Invariants:
//! - Messages travel in the communicator's collective context (`ctx + 1`) with the tag of the
//!   collective instance (see `mod.rs`), so concurrent collectives never match each other's
//!   messages; within one instance, messages between two processes match in the order they
//!   were posted (MPI's non-overtaking rule), which the round structure makes deterministic.
//! - User reduction functions never run while the engine is borrowed: [`Sched::advance`] stops
//!   at such a step and returns [`Adv::User`]; the caller runs it outside `with` and calls
//!   [`Sched::user_done`].
//! - Buffers are raw pointers: the user's (valid until the operation completes, MPI's rule) or
//!   scratch owned by the schedule (boxed, so moving the schedule does not move them).

use crate::ids::{CommId, ContextId, ReqId};
use std::sync::Arc;

use crate::error::{MpiError, Result};
use crate::mpi::coll::op::{copy_typed, Reducer};
use crate::mpi::datatype::Datatype;
use crate::mpi::engine::Engine;
use crate::mpi::global::{self, with};
use crate::mpi::request::{Kind, Packed, Request};
use crate::proto::frame::Envelope;
use crate::transport::Gpid;

/// The processes an algorithm runs over, in its own numbering: member `i` is a process and
/// the rank it puts in the envelopes it sends (its rank in its own group).
#[derive(Debug, Clone, Default)]
pub struct Team {
    pub members: Vec<(Gpid, i32)>,
    /// Our index, or usize::MAX when we only talk to the team (the remote group).
    pub me: usize,
    /// Tag bit of this team's traffic (the local group of an intercommunicator).
    pub bit: i32,
}

impl Team {
    #[inline]
    pub fn size(&self) -> usize {
        self.members.len()
    }
}

#[derive(Debug)]
enum Step {
    Send {
        peer: Gpid,
        env: Envelope,
        buf: *const u8,
        count: usize,
        dt: Arc<Datatype>,
    },
    Recv {
        spec: Envelope,
        buf: *mut u8,
        count: usize,
        dt: Arc<Datatype>,
    },
    /// Typed copy from (scount, sdt) to (rcount, rdt).
    Copy {
        src: *const u8,
        scount: usize,
        sdt: Arc<Datatype>,
        dst: *mut u8,
        rcount: usize,
        rdt: Arc<Datatype>,
    },
    /// `d = a op b`, predefined operation.
    Reduce {
        a: *const u8,
        b: *const u8,
        d: *mut u8,
        count: usize,
    },
    /// `b = a op b` with the user's function.
    UserReduce {
        a: *const u8,
        b: *mut u8,
        count: usize,
    },
}

impl Step {
    fn is_local(&self) -> bool {
        !matches!(self, Step::Send { .. } | Step::Recv { .. })
    }
}

/// A typed copy step; None where it would copy a buffer onto itself.
fn copy_step(
    src: *const u8,
    scount: usize,
    sdt: &Arc<Datatype>,
    dst: *mut u8,
    rcount: usize,
    rdt: &Arc<Datatype>,
) -> Option<Step> {
    let same = std::ptr::eq(src, dst) && Arc::ptr_eq(sdt, rdt) && scount == rcount;
    (!same).then(|| Step::Copy {
        src,
        scount,
        sdt: sdt.clone(),
        dst,
        rcount,
        rdt: rdt.clone(),
    })
}

/// What [`Sched::advance`] left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adv {
    Done,
    /// Waiting for messages.
    Pending,
    /// The next step is a user reduction: run [`Sched::run_user`] outside the engine, then
    /// [`Sched::user_done`].
    User,
}

/// A user reduction to run outside the engine: `b = a op b`.
#[derive(Debug, Clone)]
pub struct UserStep {
    pub red: Reducer,
    pub a: *const u8,
    pub b: *mut u8,
    pub count: usize,
}

/// A compiled collective.
#[derive(Debug)]
pub struct Sched {
    steps: Vec<Step>,
    /// Index of the first step of each round.
    rounds: Vec<usize>,
    /// The last round already has sends or receives (a local step now opens a new round).
    open_comm: bool,
    scratch: Vec<Box<[u128]>>,
    /// The free end of the last small-scratch chunk and the 16-byte words left in it.
    bump: (*mut u128, usize),
    pub red: Option<Reducer>,
    /// Engine id of the communicator (requests report errors on it).
    pub comm: CommId,
    pub ctx: ContextId,
    /// Our rank in our group: the source of every message we send.
    pub src: i32,
    pub tag: i32,
    // Execution state.
    round: usize,
    pc: usize,
    posted: bool,
    waiting: Vec<ReqId>,
    err: Option<MpiError>,
}

// SAFETY: a schedule's raw pointers refer to buffers that MPI's rules keep valid until the
// operation completes, and to its own scratch; under MPI_THREAD_MULTIPLE it is only touched
// with the engine lock held.
unsafe impl Send for Sched {}

impl Sched {
    pub fn new(comm: CommId, ctx: ContextId, src: i32, tag: i32) -> Sched {
        // Room for a typical schedule's steps and rounds (Bruck at 16 ranks has about 60
        // steps), so that building it does not grow the vectors step by step.
        let mut rounds = Vec::with_capacity(8);
        rounds.push(0);
        Sched {
            steps: Vec::with_capacity(16),
            rounds,
            open_comm: false,
            scratch: Vec::new(),
            bump: (std::ptr::null_mut(), 0),
            red: None,
            comm,
            ctx,
            src,
            tag,
            round: 0,
            pc: 0,
            posted: false,
            waiting: Vec::new(),
            err: None,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Building

    /// End the current round: later steps wait for its messages.
    pub fn fence(&mut self) {
        if self.rounds.last() != Some(&self.steps.len()) {
            self.rounds.push(self.steps.len());
        }
        self.open_comm = false;
    }

    fn push_local(&mut self, s: Step) {
        if self.open_comm {
            self.fence();
        }
        self.steps.push(s);
    }

    fn push_comm(&mut self, s: Step) {
        self.open_comm = true;
        self.steps.push(s);
    }

    /// Send `count` elements at `buf` to member `to` of `team`.
    pub fn send(
        &mut self,
        team: &Team,
        to: usize,
        buf: *const u8,
        count: usize,
        dt: &Arc<Datatype>,
    ) {
        let (peer, _) = team.members[to];
        self.push_comm(Step::Send {
            peer,
            env: Envelope {
                ctx: self.ctx,
                src: self.src,
                tag: self.tag | team.bit,
            },
            buf,
            count,
            dt: dt.clone(),
        });
    }

    /// Receive `count` elements into `buf` from member `from` of `team`.
    pub fn recv(
        &mut self,
        team: &Team,
        from: usize,
        buf: *mut u8,
        count: usize,
        dt: &Arc<Datatype>,
    ) {
        let (_, src) = team.members[from];
        self.push_comm(Step::Recv {
            spec: Envelope {
                ctx: self.ctx,
                src,
                tag: self.tag | team.bit,
            },
            buf,
            count,
            dt: dt.clone(),
        });
    }

    /// Typed copy (the type signatures must agree: a longer or a shorter source is an error).
    pub fn copy(
        &mut self,
        src: *const u8,
        scount: usize,
        sdt: &Arc<Datatype>,
        dst: *mut u8,
        rcount: usize,
        rdt: &Arc<Datatype>,
    ) {
        if let Some(c) = copy_step(src, scount, sdt, dst, rcount, rdt) {
            self.push_local(c);
        }
    }

    /// Typed copy that runs while the current round's messages travel: after they are posted
    /// (and flushed), before the round waits for them. It must touch none of their buffers:
    /// a rooted linear gather or scatter copies the root's own block this way, instead of a
    /// round of its own after the messages (at 2 ranks, 256 KiB, the copy was the last
    /// quarter of the call).
    pub fn copy_beside(
        &mut self,
        src: *const u8,
        scount: usize,
        sdt: &Arc<Datatype>,
        dst: *mut u8,
        rcount: usize,
        rdt: &Arc<Datatype>,
    ) {
        if let Some(c) = copy_step(src, scount, sdt, dst, rcount, rdt) {
            self.steps.push(c);
        }
    }

    /// Copy `count` elements of the reduction's datatype.
    pub fn copy_red(&mut self, src: *const u8, dst: *mut u8, count: usize) {
        let dt = self.red.as_ref().expect("reduction schedule").dt.clone();
        self.copy(src, count, &dt, dst, count, &dt);
    }

    /// `d = a op b` over `count` elements of the reduction's datatype (`a` holds the lower
    /// ranks' contributions). `d` may be `a` or `b`; for a user operation, a `d` equal to `a`
    /// goes through scratch.
    pub fn reduce(&mut self, a: *const u8, b: *const u8, d: *mut u8, count: usize) {
        let red = self.red.as_ref().expect("reduction schedule");
        if !red.is_user() {
            self.push_local(Step::Reduce { a, b, d, count });
            return;
        }
        if std::ptr::eq(d, b) {
            self.push_local(Step::UserReduce { a, b: d, count });
        } else if std::ptr::eq(d, a) {
            let t = self.tmp(count);
            self.copy_red(b, t, count);
            self.push_local(Step::UserReduce { a, b: t, count });
            self.copy_red(t, d, count);
        } else {
            self.copy_red(b, d, count);
            self.push_local(Step::UserReduce { a, b: d, count });
        }
    }

    /// Room for `steps` more steps (a builder that knows its length asks once instead of
    /// growing the list step by step).
    pub fn reserve(&mut self, steps: usize) {
        self.steps.reserve(steps);
    }

    /// Scratch memory of `bytes` bytes, 16-byte aligned, owned by the schedule. Pieces of up to
    /// 256 bytes are cut from 1 KiB chunks (one allocation for the temporaries of a small
    /// reduction's rounds instead of one each).
    pub fn alloc(&mut self, bytes: usize) -> *mut u8 {
        const CHUNK: usize = 64;
        let words = bytes.div_ceil(16).max(1);
        if words <= CHUNK / 4 {
            if self.bump.1 < words {
                let mut b = vec![0u128; CHUNK].into_boxed_slice();
                self.bump = (b.as_mut_ptr(), CHUNK);
                self.scratch.push(b);
            }
            let p = self.bump.0;
            // Inside the chunk: `words` <= the words left.
            self.bump = (p.wrapping_add(words), self.bump.1 - words);
            return p as *mut u8;
        }
        let mut b = vec![0u128; words].into_boxed_slice();
        let p = b.as_mut_ptr() as *mut u8;
        self.scratch.push(b);
        p
    }

    /// Scratch for `count` elements of `dt`, returned as the address of element 0 (which may
    /// lie before the allocation when the type's true lower bound is positive, or after it
    /// when negative: the type map itself is always inside).
    pub fn tmp_of(&mut self, count: usize, dt: &Datatype) -> *mut u8 {
        if count == 0 {
            return self.alloc(0);
        }
        let last = (count as isize - 1) * dt.extent();
        let lo = dt.true_lb + last.min(0);
        let hi = dt.true_ub + last.max(0);
        let base = self.alloc((hi - lo).max(0) as usize);
        base.wrapping_offset(-lo)
    }

    /// Scratch for `count` elements of the reduction's datatype.
    pub fn tmp(&mut self, count: usize) -> *mut u8 {
        let dt = self.red.as_ref().expect("reduction schedule").dt.clone();
        self.tmp_of(count, &dt)
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    // -----------------------------------------------------------------------------------------
    // Running

    /// Prepare to run again from the start (persistent collectives).
    pub fn rewind(&mut self) {
        self.round = 0;
        self.pc = 0;
        self.posted = false;
        self.waiting.clear();
        self.err = None;
    }

    fn round_end(&self, r: usize) -> usize {
        self.rounds.get(r + 1).copied().unwrap_or(self.steps.len())
    }

    /// End with an error each receive of the running round whose sender has gone on to a
    /// later blocking collective without sending it ([`super::passed_over`]), and cancel
    /// each send whose receiver will never match it (a rendezvous would wait forever, and
    /// the call must not return while the send may still read its buffer).
    fn fail_passed_over(&self, e: &mut Engine) {
        for &slot in &self.waiting {
            let Some(r) = e.pml.reqs.get(slot) else {
                continue;
            };
            if r.kind != Kind::Recv || r.complete {
                continue;
            }
            let env = r.env;
            if let Some(err) = super::passed_over(e, env.ctx, env.src, env.tag) {
                e.pml.fail_posted(slot, err);
            }
        }
        // A send whose receiver maps a shared-memory region for this very call will never
        // be matched. One whose receiver went on to a later call is cancelled only once the
        // schedule has failed (in an earlier round, or a receive of this one failed or came
        // short): in a call that worked, the receiver took our message, whatever the order
        // its acknowledgement and its next message are seen in here.
        let failed = self.err.is_some()
            || self.waiting.iter().any(|&s| {
                e.pml.reqs.get(s).is_some_and(|r| {
                    r.complete
                        && (r.status.error.is_some()
                            || r.kind == Kind::Recv
                                && super::short_message(&r.status, r.len).is_some())
                })
            });
        for &slot in &self.waiting {
            let Some(r) = e.pml.reqs.get(slot) else {
                continue;
            };
            if r.kind != Kind::Send || r.complete {
                continue;
            }
            let (env, peer) = (r.env, r.peer);
            let Some(to) = e
                .comm(self.comm)
                .ok()
                .and_then(|c| crate::mpi::group::rank_of(c.peers(), peer))
            else {
                continue;
            };
            match super::over(e, env.ctx, to as i32, env.tag, false) {
                Some(super::Over::Mapping) => {}
                Some(super::Over::Later) if failed => {}
                _ => continue,
            }
            e.pml.cancel(slot);
        }
    }

    /// Run as far as possible without waiting.
    pub fn advance(&mut self, e: &mut Engine) -> Adv {
        loop {
            if self.round >= self.rounds.len() {
                return Adv::Done;
            }
            let end = self.round_end(self.round);
            while self.pc < end && self.steps[self.pc].is_local() {
                match &self.steps[self.pc] {
                    Step::UserReduce { .. } => return Adv::User,
                    step => {
                        // SAFETY: the builder only emits copies and reductions over buffers
                        // that hold their counts (module doc).
                        if let Err(err) = unsafe { run_local(step, self.red.as_ref()) } {
                            self.err.get_or_insert(err);
                        }
                    }
                }
                self.pc += 1;
            }
            if !self.posted {
                self.posted = true;
                // One allocation for the round's requests (the list is reused by later rounds).
                self.waiting.reserve(end - self.pc);
                while self.pc < end {
                    if self.steps[self.pc].is_local() {
                        // A copy beside the round's messages: those posted so far go out
                        // first, then it runs while they travel.
                        if e.pml.busy() {
                            e.pml.flush(&mut e.net);
                        }
                        // SAFETY: as above (`copy_beside` emits only copies).
                        if let Err(err) = unsafe { run_local(&self.steps[self.pc], None) } {
                            self.err.get_or_insert(err);
                        }
                        self.pc += 1;
                        continue;
                    }
                    // SAFETY: as above, for message buffers.
                    let empty = self.err.is_some();
                    match unsafe { post(e, self.comm, &self.steps[self.pc], empty) } {
                        Ok(Some(slot)) => self.waiting.push(slot),
                        Ok(None) => {}
                        Err(err) => {
                            self.err.get_or_insert(err);
                        }
                    }
                    self.pc += 1;
                }
                if e.pml.busy() {
                    e.pml.flush(&mut e.net);
                }
            }
            let done = self
                .waiting
                .iter()
                .all(|&s| e.pml.reqs.get(s).is_none_or(|r| r.complete));
            if !done {
                return Adv::Pending;
            }
            for s in self.waiting.drain(..) {
                if let Some(err) = e.pml.release(s).and_then(super::message_error) {
                    self.err.get_or_insert(err);
                }
            }
            self.round += 1;
            self.pc = end;
            self.posted = false;
        }
    }

    /// The user reduction [`Sched::advance`] stopped at.
    pub fn user_step(&self) -> UserStep {
        match &self.steps[self.pc] {
            Step::UserReduce { a, b, count } => UserStep {
                red: self.red.clone().expect("reduction schedule"),
                a: *a,
                b: *b,
                count: *count,
            },
            s => unreachable!("not a user step: {s:?}"),
        }
    }

    /// The user reduction has run.
    pub fn user_done(&mut self) {
        self.pc += 1;
    }

    /// Run as a schedule that has failed with `err` (before it starts: the process's part of
    /// the call failed elsewhere): its receives are posted as usual, its sends go out empty,
    /// so that the processes it feeds fail too rather than take its data for good
    /// ([`super::short_message`]), and [`run`] returns `err`.
    pub fn fail(&mut self, err: MpiError) {
        self.err.get_or_insert(err);
    }

    /// The first error any step met.
    pub fn take_error(&mut self) -> Option<MpiError> {
        self.err.take()
    }

    /// Give back the requests of a round in flight (the schedule is abandoned).
    pub fn abandon(&mut self, e: &mut Engine) {
        for s in self.waiting.drain(..) {
            e.pml.detach(s);
        }
    }
}

impl UserStep {
    /// Run the user's function.
    ///
    /// # Safety
    /// Outside `runtime::global::with`; the buffers are the schedule's (still alive).
    pub unsafe fn run(&self) {
        self.red.call_user(self.a, self.b, self.count);
    }
}

/// Run a copy or a predefined reduction.
unsafe fn run_local(step: &Step, red: Option<&Reducer>) -> Result<()> {
    match step {
        Step::Copy {
            src,
            scount,
            sdt,
            dst,
            rcount,
            rdt,
        } => copy_between(*src, *scount, sdt, *dst, *rcount, rdt),
        Step::Reduce { a, b, d, count } => {
            red.expect("reduction schedule").apply(*a, *b, *d, *count);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Copy (scount, sdt) at `src` into (rcount, rdt) at `dst` as a message would travel: the
/// packed bytes of the source fill the destination's type map in order.
///
/// # Safety
/// The buffers hold their counts of elements.
pub unsafe fn copy_between(
    src: *const u8,
    scount: usize,
    sdt: &Datatype,
    dst: *mut u8,
    rcount: usize,
    rdt: &Datatype,
) -> Result<()> {
    let sbytes = sdt.size * scount;
    let rbytes = rdt.size * rcount;
    if sbytes > rbytes {
        return crate::err!(
            Truncate,
            "{sbytes} bytes sent to a buffer of {rbytes} bytes"
        );
    }
    if sbytes < rbytes {
        // Every copy of a collective algorithm moves what both sides' arguments make alike
        // (as its receives: `super::short_message`).
        return crate::err!(
            Truncate,
            "{sbytes} bytes sent where the receiving side expects {rbytes}: the counts (and \
             type signatures) must agree"
        );
    }
    if sbytes == 0 {
        return Ok(());
    }
    if std::ptr::eq(sdt, rdt) && scount == rcount {
        copy_typed(src, dst, scount, sdt);
        return Ok(());
    }
    match (sdt.contig, rdt.contig) {
        (true, true) => crate::mem::copy(src, dst, sbytes),
        (true, false) => {
            rdt.unpack(std::slice::from_raw_parts(src, sbytes), dst, rcount);
        }
        (false, true) => {
            let mut v = Vec::with_capacity(sbytes);
            sdt.pack(src, scount, &mut v);
            crate::mem::copy(v.as_ptr(), dst, sbytes);
        }
        (false, false) => {
            let mut v = Vec::with_capacity(sbytes);
            sdt.pack(src, scount, &mut v);
            rdt.unpack(&v, dst, rcount);
        }
    }
    Ok(())
}

/// Post a send or receive step; Some(request slot) when it is in flight. `empty`: the
/// schedule has failed (a receive met a message of another length, say), and its sends go
/// out empty, so that the processes downstream fail as well rather than wait for a message
/// that would never come ([`super::short_message`]).
unsafe fn post(e: &mut Engine, comm: CommId, step: &Step, empty: bool) -> Result<Option<ReqId>> {
    match step {
        Step::Send {
            peer,
            env,
            buf,
            count,
            dt,
        } => {
            let count = if empty { 0 } else { *count };
            Ok(post_send(e, comm, *peer, *env, *buf, count, dt))
        }
        Step::Recv {
            spec,
            buf,
            count,
            dt,
        } => Ok(Some(post_recv(e, comm, *spec, *buf, *count, dt))),
        _ => Ok(None),
    }
}

/// Start sending `count` elements of `dt` at `buf` to process `peer`; None when the message
/// went out at once and needs no request.
///
/// # Safety
/// The buffer holds the elements until the send completes.
pub unsafe fn post_send(
    e: &mut Engine,
    comm: CommId,
    peer: Gpid,
    env: Envelope,
    buf: *const u8,
    count: usize,
    dt: &Arc<Datatype>,
) -> Option<ReqId> {
    let len = dt.size * count;
    let mut r = Request::new(Kind::Send, comm);
    if dt.contig {
        let data = if len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(buf, len)
        };
        if e.pml.try_eager(peer, env, data, &mut e.net) {
            return None;
        }
        r.buf = buf as *mut u8;
    } else {
        let mut v = Vec::with_capacity(len);
        dt.pack(buf, count, &mut v);
        let mut p = Box::new(Packed {
            data: v,
            user_buf: buf as *mut u8,
            count,
            dtype: dt.clone(),
        });
        r.buf = p.data.as_mut_ptr();
        r.packed = Some(p);
    }
    r.peer = peer;
    r.env = env;
    r.len = len;
    let slot = e.pml.reqs.insert(r);
    e.pml.start_send(slot, &mut e.net);
    Some(slot)
}

/// Post a receive of up to `count` elements of `dt` into `buf`.
///
/// # Safety
/// The buffer holds the elements until the receive completes.
pub unsafe fn post_recv(
    e: &mut Engine,
    comm: CommId,
    spec: Envelope,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
) -> ReqId {
    let len = dt.size * count;
    let mut r = Request::new(Kind::Recv, comm);
    r.env = spec;
    r.len = len;
    if dt.contig {
        r.buf = buf;
    } else {
        let mut p = Box::new(Packed {
            data: vec![0u8; len],
            user_buf: buf,
            count,
            dtype: dt.clone(),
        });
        r.buf = p.data.as_mut_ptr();
        r.packed = Some(p);
    }
    let slot = e.pml.reqs.insert(r);
    e.pml.post_recv(slot);
    slot
}

/// Run a schedule to completion (blocking collectives).
pub fn run(s: &mut Sched) -> Result<()> {
    let mut pass = 0u32;
    loop {
        let a = with(|e| match s.advance(e) {
            Adv::Pending => {
                e.progress();
                s.advance(e)
            }
            a => a,
        })?;
        match a {
            Adv::Done => break,
            Adv::User => {
                let u = s.user_step();
                // SAFETY: outside the engine; the schedule (and its buffers) is alive.
                unsafe { u.run() };
                s.user_done();
            }
            Adv::Pending => {
                super::run_deferred();
                global::idle_pass(pass);
                pass = pass.saturating_add(1);
                if pass.is_multiple_of(16) {
                    with(|e| s.fail_passed_over(e))?;
                }
            }
        }
    }
    match s.take_error() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
impl Sched {
    /// The rounds as the kinds of their steps: S(end), R(eceive), C(opy), r(eduction).
    pub(crate) fn shape(&self) -> Vec<String> {
        let kind = |st: &Step| match st {
            Step::Send { .. } => 'S',
            Step::Recv { .. } => 'R',
            Step::Copy { .. } => 'C',
            Step::Reduce { .. } | Step::UserReduce { .. } => 'r',
        };
        (0..self.rounds.len())
            .map(|r| {
                self.steps[self.rounds[r]..self.round_end(r)]
                    .iter()
                    .map(kind)
                    .collect()
            })
            .filter(|k: &String| !k.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collective's copy moves what both sides' arguments make: a longer or a shorter
    /// source is an error, and nothing is written then.
    #[test]
    fn copies_between_types_need_the_same_bytes() {
        let byte = crate::mpi::coll::byte_type();
        let (a, mut b) = ([7u8; 8], [0u8; 8]);
        // SAFETY: both buffers hold 8 bytes.
        unsafe {
            copy_between(a.as_ptr(), 8, &byte, b.as_mut_ptr(), 8, &byte).unwrap();
            assert_eq!(b, [7; 8]);
            b = [0; 8];
            for (sc, rc) in [(8, 4), (4, 8)] {
                let e = copy_between(a.as_ptr(), sc, &byte, b.as_mut_ptr(), rc, &byte).unwrap_err();
                assert_eq!(e.class, crate::error::ErrorClass::Truncate, "{sc} {rc}");
                assert_eq!(b, [0; 8]);
            }
        }
    }

    /// A copy beside a round's messages stays in their round (and runs after they are posted,
    /// `advance`); a plain copy after messages waits for them in a round of its own.
    #[test]
    fn copies_beside_messages_share_their_round() {
        let byte = crate::mpi::coll::byte_type();
        let t = Team {
            members: (0..2).map(|i| (Gpid::new(i), i as i32)).collect(),
            me: 0,
            bit: 0,
        };
        let (a, mut b) = ([1u8; 8], [0u8; 8]);
        let mut s = Sched::new(CommId::new(0), ContextId::new(0), 0, 0);
        s.send(&t, 1, a.as_ptr(), 8, &byte);
        s.copy_beside(a.as_ptr(), 8, &byte, b.as_mut_ptr(), 8, &byte);
        s.fence();
        s.send(&t, 1, a.as_ptr(), 8, &byte);
        s.copy(a.as_ptr(), 8, &byte, b.as_mut_ptr(), 8, &byte);
        s.fence();
        assert_eq!(s.shape(), ["SC", "S", "C"]);
    }

    /// Small temporaries come from shared chunks, large ones alone: every piece 16-byte
    /// aligned, zeroed, inside its own bytes (no two overlap), and still in place after the
    /// schedule moved.
    #[test]
    fn scratch_pieces_are_aligned_disjoint_and_stable() {
        let mut s = Sched::new(CommId::new(0), ContextId::new(0), 0, 0);
        let sizes = [
            1, 8, 16, 17, 100, 256, 257, 4096, 0, 255, 3, 1000, 8, 8, 8, 8, 200,
        ];
        let mut got: Vec<(usize, usize)> = Vec::new();
        for (k, &b) in sizes.iter().enumerate() {
            let p = s.alloc(b);
            assert_eq!(
                p as usize % 16,
                0,
                "piece {k} of {b} bytes is not 16-byte aligned"
            );
            // SAFETY: the piece has `b` bytes.
            unsafe {
                assert!((0..b).all(|i| *p.add(i) == 0), "piece {k} is not zeroed");
                std::ptr::write_bytes(p, k as u8 + 1, b);
            }
            got.push((p as usize, b.max(1)));
        }
        let moved = s;
        for (k, &(p, b)) in got.iter().enumerate() {
            for &(q, c) in &got[k + 1..] {
                assert!(p + b <= q || q + c <= p, "pieces overlap");
            }
            // SAFETY: as written above; the schedule (moved) still owns the pieces.
            let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, sizes[k]) };
            assert!(bytes.iter().all(|&x| x == k as u8 + 1), "piece {k} changed");
        }
        drop(moved);
    }
}
