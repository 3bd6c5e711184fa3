//! Direct paths for small blocking collectives: the same algorithms as the schedules
//! (dissemination barrier, binomial broadcast, recursive doubling allreduce, linear gather and
//! scatter, and the single exchange that allgather and alltoall are between two processes),
//! run inline with request-free eager sends and the blocking receive without a request
//! (`Pml::post_direct`), scratch on the stack, and the reduction done between rounds. No
//! allocation, and one engine borrow per round plus the waiting loop.
//!
//! Taken only when the algorithm chosen for the call is the one implemented here, the data is
//! small and contiguous, the operation predefined, the communicator an intracommunicator, and
//! the thread level below MPI_THREAD_MULTIPLE (the direct receive is one per process).

use crate::ids::{CommId, ContextId, DtypeId, ReqId};
use std::sync::Arc;

use super::decide::{AllreduceAlg, BarrierAlg, BcastAlg, GatherAlg, ReduceAlg, ScatterAlg};
use super::op::{Builtin, Op, Reducer};
use super::sched::{post_recv, post_send};
use super::{byte_type, in_place, Args, Counts, Types};
use crate::error::Result;
use crate::mpi::datatype::Datatype;
use crate::mpi::engine::Engine;
use crate::mpi::global::{self, with};
use crate::mpi::pml::DirectPost;
use crate::mpi::request::{Status, UNKNOWN_PEER};
use crate::proto::frame::Envelope;
use crate::transport::Gpid;

/// Largest buffer (bytes) the direct paths take.
const FAST_MAX: usize = 2048;

/// What a round does: optionally send `slen` bytes to a process, optionally receive up to
/// `rcap` bytes from a rank.
struct Round {
    to: Option<Gpid>,
    sdata: *const u8,
    slen: usize,
    from: Option<i32>,
    rbuf: *mut u8,
    rcap: usize,
}

/// A small collective in progress: communicator, context, our rank, the tag.
struct Call {
    comm: CommId,
    ctx: ContextId,
    src: i32,
    tag: i32,
}

/// Where a round's receive is.
enum Recv {
    Nothing,
    Done(Status),
    /// Posted as the direct receive.
    Direct,
    /// Posted with a request.
    Req(ReqId),
}

impl Call {
    /// Has `src`, whose message the direct receive waits for, gone another way
    /// ([`super::passed_over`])? Then end the receive with the error. Out of line: asked
    /// every 16th waiting pass, kept off the round's code.
    #[cold]
    #[inline(never)]
    fn passed_over(&self, src: i32) -> Result<()> {
        with(|e| {
            if let Some(err) = super::passed_over(e, self.ctx, src, self.tag) {
                e.pml.fail_direct(err);
            }
        })
    }

    unsafe fn round(&self, r: Round) -> Result<()> {
        let byte = byte_type();
        let (sreq, recv) = with(|e| {
            let recv = match r.from {
                Some(src) => {
                    let spec = Envelope {
                        ctx: self.ctx,
                        src,
                        tag: self.tag,
                    };
                    let peer = e
                        .comm(self.comm)
                        .ok()
                        .and_then(|c| c.peers().get(src as usize).copied())
                        .unwrap_or(UNKNOWN_PEER);
                    match e.pml.post_direct(spec, peer, r.rbuf, r.rcap) {
                        DirectPost::Done(st) => Recv::Done(st),
                        DirectPost::Posted => Recv::Direct,
                        DirectPost::UseRequest => {
                            Recv::Req(post_recv(e, self.comm, spec, r.rbuf, r.rcap, &byte))
                        }
                    }
                }
                None => Recv::Nothing,
            };
            let sreq = match r.to {
                Some(peer) => {
                    let env = Envelope {
                        ctx: self.ctx,
                        src: self.src,
                        tag: self.tag,
                    };
                    post_send(e, self.comm, peer, env, r.sdata, r.slen, &byte)
                }
                None => None,
            };
            if e.pml.busy() {
                e.pml.flush(&mut e.net);
            }
            (sreq, recv)
        })?;
        match recv {
            Recv::Direct => {
                let mut pass = 0u32;
                let got = loop {
                    let t = with(|e| {
                        if !e.pml.direct_ready() {
                            e.progress();
                        }
                        if e.pml.direct_ready() {
                            e.pml.take_direct()
                        } else {
                            None
                        }
                    })?;
                    match t {
                        Some(x) => break x,
                        None => {
                            super::run_deferred();
                            global::idle();
                            pass = pass.wrapping_add(1);
                            if pass.is_multiple_of(16) {
                                self.passed_over(r.from.unwrap_or(-1))?;
                            }
                        }
                    }
                };
                match got {
                    Ok(st) => self.received(st, r.rcap, sreq)?,
                    Err(slot) => self.received(crate::mpi::p2p::wait(slot)?, r.rcap, sreq)?,
                }
            }
            Recv::Done(st) => self.received(st, r.rcap, sreq)?,
            Recv::Req(slot) => self.received(crate::mpi::p2p::wait(slot)?, r.rcap, sreq)?,
            Recv::Nothing => {}
        }
        if let Some(slot) = sreq {
            status_ok(crate::mpi::p2p::wait(slot)?)?;
        }
        Ok(())
    }
}

impl Call {
    /// A receive of `expected` bytes completed with `st`: its error, or that of a shorter
    /// message ([`super::short_message`]). `sreq`: the round's send, if in flight.
    #[inline]
    fn received(&self, st: Status, expected: usize, sreq: Option<ReqId>) -> Result<()> {
        if st.error.is_none() && st.bytes >= expected as u64 {
            return Ok(());
        }
        self.fail(st, expected, sreq)
    }

    /// The call fails at this receive. The processes that would still wait for a message of
    /// this call from us (our children in a tree, our partners of later rounds) must fail
    /// too rather than wait forever: every other member gets an empty message with the
    /// call's tag, which such a receive takes as a short message (and passes on the same
    /// way); at the others it stays unexpected, under a tag no later call uses. Our own sends
    /// of the call are not waited for (a rendezvous to a process that went another way would
    /// never complete): the round's send in flight (`sreq`) is detached, freed when it
    /// completes. Out of line, so the rounds keep their code.
    #[cold]
    #[inline(never)]
    fn fail(&self, st: Status, expected: usize, sreq: Option<ReqId>) -> Result<()> {
        let Some(err) = super::status_error(st, expected) else {
            return Ok(());
        };
        let byte = byte_type();
        with(|e| {
            if let Some(slot) = sreq {
                e.pml.detach(slot);
            }
            let peers = match e.comm(self.comm) {
                Ok(c) => c.peers().to_vec(),
                Err(_) => return,
            };
            let env = Envelope {
                ctx: self.ctx,
                src: self.src,
                tag: self.tag,
            };
            for (r, &peer) in peers.iter().enumerate() {
                if r as i32 == self.src {
                    continue;
                }
                // SAFETY: an empty message reads no buffer.
                if let Some(slot) =
                    unsafe { post_send(e, self.comm, peer, env, std::ptr::null(), 0, &byte) }
                {
                    e.pml.detach(slot);
                }
            }
            if e.pml.busy() {
                e.pml.flush(&mut e.net);
            }
        })?;
        Err(err)
    }

    /// Every process sends its contribution to every other and reduces all of them in rank
    /// order: one round, which matters when processes share cores.
    #[allow(clippy::too_many_arguments)]
    unsafe fn allgather_reduce(
        &self,
        m: &[(Gpid, i32)],
        me: usize,
        sbuf: *const u8,
        rbuf: *mut u8,
        bytes: usize,
        count: usize,
        red: &Reducer,
    ) -> Result<()> {
        let n = m.len();
        if n == 1 {
            if !std::ptr::eq(sbuf, rbuf) {
                crate::mem::copy(sbuf, rbuf, bytes);
            }
            return Ok(());
        }
        let byte = byte_type();
        let mut tmp = [0u128; FAST_MAX / 16];
        let t = tmp.as_mut_ptr() as *mut u8;
        let slot = |i: usize| t.add(i * bytes);
        let mut reqs = [ReqId::new(0); FAST_MAX];
        let nreq = with(|e| {
            let mut k = 0;
            for (i, (_, src)) in m.iter().enumerate() {
                if i != me {
                    let spec = Envelope {
                        ctx: self.ctx,
                        src: *src,
                        tag: self.tag,
                    };
                    reqs[k] = post_recv(e, self.comm, spec, slot(i), bytes, &byte);
                    k += 1;
                }
            }
            let env = Envelope {
                ctx: self.ctx,
                src: self.src,
                tag: self.tag,
            };
            for j in 1..n {
                let (peer, _) = m[(me + j) % n];
                if let Some(s) = post_send(e, self.comm, peer, env, sbuf, bytes, &byte) {
                    reqs[k] = s;
                    k += 1;
                }
            }
            if e.pml.busy() {
                e.pml.flush(&mut e.net);
            }
            k
        })?;
        let reqs = &reqs[..nreq];
        global::wait_until(|e| {
            reqs.iter()
                .all(|&s| e.pml.reqs.get(s).is_none_or(|r| r.complete))
        })?;
        let mut err = None;
        with(|e| {
            for &s in reqs {
                if let Some(x) = e.pml.release(s).and_then(super::message_error) {
                    err.get_or_insert(x);
                }
            }
        })?;
        if let Some(x) = err {
            return Err(x);
        }
        let own = if std::ptr::eq(sbuf, rbuf) {
            // In place: our contribution must survive the first partial result in rbuf.
            crate::mem::copy(sbuf, slot(me), bytes);
            slot(me) as *const u8
        } else {
            sbuf
        };
        let src = |i: usize| if i == me { own } else { slot(i) as *const u8 };
        red.apply(src(0), src(1), rbuf, count);
        for i in 2..n {
            red.apply(rbuf, src(i), rbuf, count);
        }
        Ok(())
    }
}

fn status_ok(st: Status) -> Result<()> {
    match st.error {
        Some(e) => Err(*e),
        None => Ok(()),
    }
}

/// Start a small collective: the checks the schedule builder would make, then the tag.
fn begin(e: &mut Engine, comm: CommId) -> Option<(Call, usize, usize, Arc<super::Views>)> {
    if global::is_multithreaded() {
        return None;
    }
    let c = e.comm(comm).ok()?;
    if c.is_inter() {
        return None;
    }
    let (ctx, src) = (c.coll_ctx(), c.rank);
    let views = e.coll_views(comm).ok()?;
    Some((
        Call {
            comm,
            ctx,
            src,
            tag: 0,
        },
        views.local.size(),
        views.local.me,
        views,
    ))
}

/// Run `a` without a schedule when a direct path serves it; None otherwise.
///
/// # Safety
/// As for [`super::blocking`].
pub unsafe fn try_blocking(comm: CommId, a: &Args) -> Option<Result<()>> {
    if let Some(r) = a.rooted() {
        return match (r.v, r.many) {
            (false, (mbuf, Counts::Uniform(mcount), mdt)) => {
                rooted(comm, r.own, (mbuf, *mcount, mdt), r.root, r.gather)
            }
            _ => None,
        };
    }
    match a {
        Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        } => allreduce(comm, *sbuf, *rbuf, *count, *dt, *op),
        Args::Barrier => barrier(comm),
        Args::Bcast {
            buf,
            count,
            dt,
            root,
        } => bcast(comm, *buf, *count, *dt, *root),
        Args::Reduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
            root,
        } => reduce(comm, *sbuf, *rbuf, *count, *dt, *op, *root),
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts: Counts::Uniform(rcount),
            rdt,
        } => pair_exchange(comm, *sbuf, (*scount, *sdt), *rbuf, (*rcount, *rdt), false),
        Args::Alltoall {
            sbuf,
            scounts: Counts::Uniform(scount),
            sdt: Types::One(sdt),
            rbuf,
            rcounts: Counts::Uniform(rcount),
            rdt: Types::One(rdt),
        } => pair_exchange(comm, *sbuf, (*scount, *sdt), *rbuf, (*rcount, *rdt), true),
        _ => None,
    }
}

/// Allgather (`alltoall` false) or alltoall of small contiguous blocks between two
/// processes: every algorithm comes down to one exchange there, so copy our own block and
/// trade the other in one round. Anything unusual (MPI_IN_PLACE, differing block sizes, null
/// or aliased buffers, other sizes) takes the schedule, which also reports the errors.
unsafe fn pair_exchange(
    comm: CommId,
    sbuf: *const u8,
    (scount, sdt): (i64, DtypeId),
    rbuf: *mut u8,
    (rcount, rdt): (i64, DtypeId),
    alltoall: bool,
) -> Option<Result<()>> {
    let prep = with(|e| {
        let (call, n, me, views) = begin(e, comm)?;
        if n != 2 || in_place(sbuf) {
            return None;
        }
        let sd = e.coll_dtype(sdt).ok()?;
        let rd = e.coll_dtype(rdt).ok()?;
        let bytes = contiguous_small(&sd, usize::try_from(scount).ok()?)?;
        if contiguous_small(&rd, usize::try_from(rcount).ok()?)? != bytes {
            return None;
        }
        let own_block = !alltoall && std::ptr::eq(sbuf, rbuf.wrapping_add(me * bytes));
        if bytes > 0 && (sbuf.is_null() || rbuf.is_null() || std::ptr::eq(sbuf, rbuf) || own_block)
        {
            return None;
        }
        let peer = views.local.members[1 - me];
        Some((call, me, peer, bytes))
    });
    let (mut call, me, (to, from), bytes) = match prep {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        call.tag = with(|e| e.coll_tag(comm))?;
        let block = |i: usize| if alltoall { i * bytes } else { 0 };
        if bytes > 0 {
            crate::mem::copy(sbuf.add(block(me)), rbuf.add(me * bytes), bytes);
        }
        call.round(Round {
            to: Some(to),
            sdata: sbuf.add(block(1 - me)),
            slen: bytes,
            from: Some(from),
            rbuf: rbuf.add((1 - me) * bytes),
            rcap: bytes,
        })
    })())
}

/// Gather (`gather`) or scatter, not the v forms, of small contiguous blocks, linear as the
/// schedule (`gather::rooted_linear`): the root copies its own block and receives (sends)
/// every other process's block, a round each in rank order; the others send (receive) theirs.
/// Each block is one message with the schedule's envelope, so processes that take this path
/// meet those that take the schedule. `own` is a process's own block (a gather's send side, a
/// scatter's receive side), `many` the root's buffer of n blocks. Anything unusual
/// (MPI_IN_PLACE away from the root, a null or aliased buffer, blocks of other sizes, the
/// binomial algorithm) takes the schedule, which also reports the errors.
unsafe fn rooted(
    comm: CommId,
    (obuf, ocount, odt): (*const u8, i64, DtypeId),
    (mbuf, mcount, mdt): (*const u8, i64, DtypeId),
    root: i32,
    gather: bool,
) -> Option<Result<()>> {
    let prep = with(|e| {
        let (call, n, me, views) = begin(e, comm)?;
        let root = usize::try_from(root).ok().filter(|&r| r < n)?;
        // Our own block's bytes; None: MPI_IN_PLACE at the root.
        let own = if in_place(obuf) {
            if me != root {
                return None;
            }
            None
        } else {
            let d = e.coll_dtype(odt).ok()?;
            let b = contiguous_small(&d, usize::try_from(ocount).ok()?)?;
            if b > 0 && obuf.is_null() {
                return None;
            }
            Some(b)
        };
        let bytes = if me == root {
            let d = e.coll_dtype(mdt).ok()?;
            let b = contiguous_small(&d, usize::try_from(mcount).ok()?)?;
            if b > 0 && (mbuf.is_null() || (own.is_some() && std::ptr::eq(obuf, mbuf))) {
                return None;
            }
            if own.is_some_and(|o| o != b) {
                return None;
            }
            b
        } else {
            own?
        };
        let binomial = if gather {
            e.coll_choose::<GatherAlg>(n, bytes).0 == GatherAlg::Binomial
        } else {
            e.coll_choose::<ScatterAlg>(n, bytes).0 == ScatterAlg::Binomial
        };
        if binomial && n > 1 {
            return None;
        }
        Some((call, me, views, root, bytes, own.is_some()))
    });
    let (mut call, me, views, root, bytes, own) = match prep {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| -> Result<()> {
        call.tag = with(|e| e.coll_tag(comm))?;
        let m = &views.local.members;
        let (obuf, mbuf) = (obuf as *mut u8, mbuf as *mut u8);
        if me != root {
            let (to, from) = m[root];
            return call.round(if gather {
                Round {
                    to: Some(to),
                    sdata: obuf,
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                }
            } else {
                Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(from),
                    rbuf: obuf,
                    rcap: bytes,
                }
            });
        }
        let blk = |j: usize| mbuf.add(j * bytes);
        if own && bytes > 0 {
            if gather {
                crate::mem::copy(obuf, blk(root), bytes);
            } else {
                crate::mem::copy(blk(root), obuf, bytes);
            }
        }
        // Every round runs even after one fails (a truncated block, say), so that no message
        // of this call is left behind; the first error is reported.
        let mut first = Ok(());
        for (j, &(to, from)) in m.iter().enumerate().filter(|&(j, _)| j != root) {
            let r = call.round(if gather {
                Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(from),
                    rbuf: blk(j),
                    rcap: bytes,
                }
            } else {
                Round {
                    to: Some(to),
                    sdata: blk(j),
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                }
            });
            if first.is_ok() {
                first = r;
            }
        }
        first
    })())
}

fn contiguous_small(d: &Datatype, count: usize) -> Option<usize> {
    let bytes = count.checked_mul(d.size)?;
    (d.contig && d.committed && bytes <= FAST_MAX).then_some(bytes)
}

unsafe fn barrier(comm: CommId) -> Option<Result<()>> {
    let (mut call, n, me) = match with(|e| {
        let (call, n, me, _) = begin(e, comm)?;
        let (alg, _) = e.coll_choose::<BarrierAlg>(n, 0);
        let multi = e.coll_views(comm).ok()?.nodes.count() > 1;
        if alg != BarrierAlg::Dissemination || multi {
            return None;
        }
        Some((call, n, me))
    }) {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        let members = with(|e| {
            call.tag = e.coll_tag(comm);
            e.coll_views(comm).map(|v| v.local.members.clone())
        })??;
        let mut k = 1;
        while k < n {
            let to = members[(me + k) % n].0;
            let from = members[(me + n - k) % n].1;
            call.round(Round {
                to: Some(to),
                sdata: std::ptr::null(),
                slen: 0,
                from: Some(from),
                rbuf: std::ptr::null_mut(),
                rcap: 0,
            })?;
            k *= 2;
        }
        Ok(())
    })())
}

unsafe fn bcast(
    comm: CommId,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    root: i32,
) -> Option<Result<()>> {
    let prep = with(|e| {
        let (call, n, me, views) = begin(e, comm)?;
        let d = e.coll_dtype(dt).ok()?;
        let count = usize::try_from(count).ok()?;
        let bytes = contiguous_small(&d, count)?;
        if root < 0 || root as usize >= n || (bytes > 0 && buf.is_null()) {
            return None;
        }
        let (alg, auto) = e.coll_choose::<BcastAlg>(n, bytes);
        let multi = views.nodes.count() > 1;
        if alg != BcastAlg::Binomial || (multi && auto) {
            return None;
        }
        Some((call, n, me, views, bytes))
    });
    let (mut call, n, me, views, bytes) = match prep {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        call.tag = with(|e| e.coll_tag(comm))?;
        if n == 1 || bytes == 0 {
            return Ok(());
        }
        let root = root as usize;
        let m = &views.local.members;
        let v = (me + n - root) % n;
        let mut mask = 1;
        while mask < n {
            if v & mask != 0 {
                call.round(Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(m[(v - mask + root) % n].1),
                    rbuf: buf,
                    rcap: bytes,
                })?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if v + mask < n {
                call.round(Round {
                    to: Some(m[(v + mask + root) % n].0),
                    sdata: buf,
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                })?;
            }
            mask >>= 1;
        }
        Ok(())
    })())
}

unsafe fn allreduce(
    comm: CommId,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
) -> Option<Result<()>> {
    let prep = with(|e| {
        let (call, n, me, views) = begin(e, comm)?;
        let o = e.coll_op(op).ok()?;
        if matches!(o, Op::User { .. }) {
            return None;
        }
        let d = e.coll_dtype(dt).ok()?;
        let count = usize::try_from(count).ok()?;
        let bytes = contiguous_small(&d, count)?;
        if bytes > 0 && (rbuf.is_null() || sbuf.is_null() || std::ptr::eq(sbuf, rbuf)) {
            return None;
        }
        let red = Reducer::new(o, dt, &e.dtypes).ok()?;
        let (alg, auto) = e.coll_choose::<AllreduceAlg>(n, bytes);
        let multi = views.nodes.count() > 1;
        if multi && auto && red.commutative() {
            return None;
        }
        let gather = match alg {
            AllreduceAlg::RecursiveDoubling => false,
            AllreduceAlg::AllgatherReduce if n * bytes <= FAST_MAX && n <= 512 => true,
            _ => return None,
        };
        Some((call, n, me, views, bytes, count, red, gather))
    });
    let (mut call, n, me, views, bytes, count, red, gather) = match prep {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| -> Result<()> {
        call.tag = with(|e| e.coll_tag(comm))?;
        let sbuf = if in_place(sbuf) {
            rbuf as *const u8
        } else {
            sbuf
        };
        let m = &views.local.members;
        if gather {
            return call.allgather_reduce(m, me, sbuf, rbuf, bytes, count, &red);
        }
        let mut tmp = [0u128; FAST_MAX / 16];
        let t = tmp.as_mut_ptr() as *mut u8;
        let pof2: usize = 1 << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - pof2;
        let mut acc = sbuf;
        let newrank = if me < 2 * rem {
            if me % 2 == 0 {
                call.round(Round {
                    to: Some(m[me + 1].0),
                    sdata: acc,
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                })?;
                None
            } else {
                call.round(Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(m[me - 1].1),
                    rbuf: t,
                    rcap: bytes,
                })?;
                red.apply(t, acc, rbuf, count);
                acc = rbuf;
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(nr) = newrank {
            let mut mask = 1;
            while mask < pof2 {
                let pr = nr ^ mask;
                let dst = if pr < rem { 2 * pr + 1 } else { pr + rem };
                call.round(Round {
                    to: Some(m[dst].0),
                    sdata: acc,
                    slen: bytes,
                    from: Some(m[dst].1),
                    rbuf: t,
                    rcap: bytes,
                })?;
                if dst < me {
                    red.apply(t, acc, rbuf, count);
                } else {
                    red.apply(acc, t, rbuf, count);
                }
                acc = rbuf;
                mask <<= 1;
            }
            if !std::ptr::eq(acc, rbuf) {
                crate::mem::copy(acc, rbuf, bytes);
            }
        }
        if me < 2 * rem {
            if me % 2 == 1 {
                call.round(Round {
                    to: Some(m[me - 1].0),
                    sdata: rbuf,
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                })?;
            } else {
                call.round(Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(m[me + 1].1),
                    rbuf,
                    rcap: bytes,
                })?;
            }
        }
        Ok(())
    })())
}

/// Binomial reduce to `root` for predefined operations (all commutative, so the tree may be
/// rotated to the root): partial results in a stack buffer, the root's in its receive buffer.
unsafe fn reduce(
    comm: CommId,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    root: i32,
) -> Option<Result<()>> {
    let prep = with(|e| {
        let (call, n, me, views) = begin(e, comm)?;
        let o = e.coll_op(op).ok()?;
        if !matches!(o, Op::Builtin(b) if !matches!(b, Builtin::Replace | Builtin::NoOp)) {
            return None;
        }
        let d = e.coll_dtype(dt).ok()?;
        let count = usize::try_from(count).ok()?;
        let bytes = contiguous_small(&d, count)?;
        if root < 0 || root as usize >= n {
            return None;
        }
        let root = root as usize;
        let at_root = me == root;
        if bytes > 0 {
            let ip = in_place(sbuf);
            if (ip && !at_root)
                || (!ip && sbuf.is_null())
                || (at_root && (rbuf.is_null() || std::ptr::eq(sbuf, rbuf)))
            {
                return None;
            }
        }
        let red = Reducer::new(o, dt, &e.dtypes).ok()?;
        let (alg, auto) = e.coll_choose::<ReduceAlg>(n, bytes);
        if alg != ReduceAlg::Binomial || (views.nodes.count() > 1 && auto) {
            return None;
        }
        Some((call, n, me, views, bytes, count, red, root))
    });
    let (mut call, n, me, views, bytes, count, red, root) = match prep {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| -> Result<()> {
        call.tag = with(|e| e.coll_tag(comm))?;
        if bytes == 0 {
            return Ok(());
        }
        let m = &views.local.members;
        let mut tmp = [0u128; FAST_MAX / 16];
        let mut part = [0u128; FAST_MAX / 16];
        let t = tmp.as_mut_ptr() as *mut u8;
        let dest = if me == root {
            rbuf
        } else {
            part.as_mut_ptr() as *mut u8
        };
        let mut acc = if in_place(sbuf) {
            rbuf as *const u8
        } else {
            sbuf
        };
        let v = (me + n - root) % n;
        let mut mask = 1;
        while mask < n {
            if v & mask != 0 {
                call.round(Round {
                    to: Some(m[(v - mask + root) % n].0),
                    sdata: acc,
                    slen: bytes,
                    from: None,
                    rbuf: std::ptr::null_mut(),
                    rcap: 0,
                })?;
                return Ok(());
            }
            if v + mask < n {
                call.round(Round {
                    to: None,
                    sdata: std::ptr::null(),
                    slen: 0,
                    from: Some(m[(v + mask + root) % n].1),
                    rbuf: t,
                    rcap: bytes,
                })?;
                red.apply(t, acc, dest, count);
                acc = dest;
            }
            mask <<= 1;
        }
        // The root: its result is in `dest` (its receive buffer) unless nothing arrived.
        if !std::ptr::eq(acc, rbuf) {
            crate::mem::copy(acc, rbuf, bytes);
        }
        Ok(())
    })())
}
