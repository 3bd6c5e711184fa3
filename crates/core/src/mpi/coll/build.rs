//! One builder per collective: check the call's arguments, choose its algorithm (an enum per
//! collective, `decide`) and compile the schedule. Every check happens before the schedule
//! takes the call's tag ([`Builder::sched`]), so a call that fails on every process leaves the
//! tag sequence in step. Intercommunicators and neighbourhood collectives go to `inter.rs`.

use crate::ids::{CommId, ContextId, DtypeId};
use std::sync::Arc;

use super::decide::{
    AllgatherAlg, AllreduceAlg, AlltoallAlg, BarrierAlg, BcastAlg, GatherAlg, ReduceAlg,
    ReduceScatterAlg, ScanAlg, ScatterAlg,
};
use super::gather::Blk;
use super::sched::{Sched, Team};
use super::{
    all_equal, avg_bytes, bcast, blocks, byte_type, check_buf, check_root, count_of, gather,
    in_place, inter, no_alias, no_alias_own, own_blk, red_input, reduce, Args, Counts, Nodes,
    Rooted, Types, Views,
};
use crate::err;
use crate::error::Result;
use crate::mpi::datatype::Datatype;
use crate::mpi::engine::Engine;

/// What every builder of one call needs: the communicator and its views.
pub(super) struct Builder {
    comm: CommId,
    ctx: ContextId,
    rank: i32,
    pub(super) views: Arc<Views>,
}

impl Builder {
    pub(super) fn new(e: &mut Engine, comm: CommId) -> Result<Builder> {
        let views = e.coll_views(comm)?;
        let c = e.comm(comm)?;
        Ok(Builder {
            comm,
            ctx: c.coll_ctx(),
            rank: c.rank,
            views,
        })
    }

    /// An empty schedule with the call's tag. Every check happens before this: a call that
    /// fails on every process then leaves the tag sequence in step.
    pub(super) fn sched(&self, e: &mut Engine) -> Sched {
        let tag = e.coll_tag(self.comm);
        Sched::new(self.comm, self.ctx, self.rank, tag)
    }

    fn team(&self) -> &Team {
        &self.views.local
    }

    /// Are the members on more than one host?
    fn multi(&self) -> bool {
        self.views.nodes.count() > 1
    }
}

/// Check a call's arguments, choose the algorithm and compile the schedule.
///
/// # Safety
/// The buffers follow MPI's rules for the collective.
pub(super) unsafe fn build(e: &mut Engine, comm: CommId, a: &Args) -> Result<Sched> {
    if e.comm(comm)?.is_inter() {
        return inter::build(e, comm, a);
    }
    let b = Builder::new(e, comm)?;
    match a {
        Args::Barrier => build_barrier(e, &b),
        Args::Bcast {
            buf,
            count,
            dt,
            root,
        } => build_bcast(e, &b, *buf, *count, *dt, *root),
        Args::Reduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
            root,
        } => build_reduce(e, &b, *sbuf, *rbuf, *count, *dt, *op, *root),
        Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        } => build_allreduce(e, &b, *sbuf, *rbuf, *count, *dt, *op),
        Args::ReduceScatter {
            sbuf,
            rbuf,
            counts,
            dt,
            op,
        } => build_reduce_scatter(e, &b, *sbuf, *rbuf, counts, *dt, *op),
        Args::Scan {
            sbuf,
            rbuf,
            count,
            dt,
            op,
            exclusive,
        } => build_scan(e, &b, *sbuf, *rbuf, *count, *dt, *op, *exclusive),
        Args::Gather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts,
            rdt,
            root,
            v,
        } => build_gather(
            e,
            &b,
            (*sbuf, *scount, *sdt),
            (*rbuf, rcounts, *rdt),
            *root,
            *v,
        ),
        Args::Scatter {
            sbuf,
            scounts,
            sdt,
            rbuf,
            rcount,
            rdt,
            root,
            v,
        } => build_scatter(
            e,
            &b,
            (*sbuf, scounts, *sdt),
            (*rbuf, *rcount, *rdt),
            *root,
            *v,
        ),
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => build_allgather(e, &b, (*sbuf, *scount, *sdt), (*rbuf, rcounts, *rdt)),
        Args::Alltoall {
            sbuf,
            scounts,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => build_alltoall(e, &b, (*sbuf, scounts, sdt), (*rbuf, rcounts, rdt)),
        Args::NeighborAllgather { .. } | Args::NeighborAlltoall { .. } => {
            inter::build_neighbor(e, comm, a, &b)
        }
    }
}

fn build_barrier(e: &mut Engine, b: &Builder) -> Result<Sched> {
    let (t, nodes) = (b.team(), &b.views.nodes);
    let mut s = b.sched(e);
    let (alg, auto) = e.coll_choose::<BarrierAlg>(t.size(), 0);
    match alg {
        _ if b.multi()
            && (matches!(alg, BarrierAlg::TwoLevel | BarrierAlg::TwoLevelShm) || auto) =>
        {
            bcast::barrier_two_level(&mut s, t, nodes)
        }
        BarrierAlg::Linear => bcast::barrier_linear(&mut s, t),
        _ => bcast::barrier_dissemination(&mut s, t),
    }
    Ok(s)
}

unsafe fn build_bcast(
    e: &mut Engine,
    b: &Builder,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    root: i32,
) -> Result<Sched> {
    let t = b.team();
    let n = t.size();
    let count = count_of(count, "count")?;
    let d = e.coll_dtype(dt)?;
    let root = check_root(root, n)?;
    check_buf(buf, count, &d, "buffer")?;
    let mut s = b.sched(e);
    let bytes = count * d.size;
    if n == 1 || bytes == 0 {
        return Ok(s);
    }
    let (alg, auto) = e.coll_choose::<BcastAlg>(n, bytes);
    let seg = e.cfg.coll_segment as usize;
    bcast_body(
        &mut s,
        t,
        &b.views.nodes,
        buf,
        count,
        &d,
        root,
        alg,
        auto,
        seg,
    );
    Ok(s)
}

/// The broadcast algorithms, shared by the intracommunicator and intercommunicator forms.
#[allow(clippy::too_many_arguments)]
pub(super) fn bcast_body(
    s: &mut Sched,
    t: &Team,
    nodes: &Nodes,
    buf: *mut u8,
    count: usize,
    d: &Arc<Datatype>,
    root: usize,
    alg: BcastAlg,
    auto: bool,
    seg: usize,
) {
    let multi = nodes.count() > 1 && t.bit == 0;
    if multi && (matches!(alg, BcastAlg::TwoLevel | BcastAlg::TwoLevelShm) || auto) {
        return bcast::bcast_two_level(s, t, nodes, buf, count, d, root);
    }
    match alg {
        BcastAlg::ScatterAllgather | BcastAlg::Chain => {
            // Pieces are cut in bytes, so that processes with different (count, type) pairs
            // of the same signature agree; non-contiguous data travels packed.
            let bytes = count * d.size;
            let byte = byte_type();
            let (p, packed) = if d.contig {
                (buf, false)
            } else {
                let tmp = s.alloc(bytes);
                if t.me == root {
                    s.copy(buf, count, d, tmp, bytes, &byte);
                }
                (tmp, true)
            };
            if alg == BcastAlg::Chain {
                bcast::bcast_chain(s, t, p, bytes, &byte, root, seg);
            } else {
                bcast::bcast_scatter_allgather(s, t, p, bytes, &byte, root);
            }
            if packed && t.me != root {
                s.copy(p, bytes, &byte, buf, count, d);
            }
        }
        BcastAlg::Linear => bcast::bcast_linear(s, t, buf, count, d, root),
        _ => bcast::bcast_binomial(s, t, buf, count, d, root),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn build_reduce(
    e: &mut Engine,
    b: &Builder,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    root: i32,
) -> Result<Sched> {
    let t = b.team();
    let (n, me) = (t.size(), t.me);
    let count = count_of(count, "count")?;
    let red = e.coll_reducer(op, dt)?;
    let root = check_root(root, n)?;
    let d = red.dt.clone();
    let mut sbuf = sbuf;
    if in_place(sbuf) {
        if me != root {
            return err!(Buffer, "MPI_IN_PLACE is only valid at the root");
        }
        sbuf = rbuf;
    } else if me == root {
        no_alias(sbuf, rbuf, count * d.size)?;
    }
    check_buf(sbuf, count, &d, "send buffer")?;
    if me == root {
        check_buf(rbuf, count, &d, "receive buffer")?;
    }
    let mut s = b.sched(e);
    let commutative = red.commutative();
    s.red = Some(red);
    let (alg, auto) = e.coll_choose::<ReduceAlg>(n, count * d.size);
    match alg {
        _ if b.multi()
            && commutative
            && (matches!(alg, ReduceAlg::TwoLevel | ReduceAlg::TwoLevelShm) || auto) =>
        {
            reduce::reduce_two_level(&mut s, t, &b.views.nodes, sbuf, rbuf, count, root)
        }
        ReduceAlg::Linear => reduce::reduce_linear(&mut s, t, sbuf, rbuf, count, root),
        _ => reduce::reduce_binomial(&mut s, t, sbuf, rbuf, count, root),
    }
    Ok(s)
}

unsafe fn build_allreduce(
    e: &mut Engine,
    b: &Builder,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
) -> Result<Sched> {
    let t = b.team();
    let count = count_of(count, "count")?;
    let red = e.coll_reducer(op, dt)?;
    let d = red.dt.clone();
    let sbuf = red_input(sbuf, rbuf, count, &d)?;
    let mut s = b.sched(e);
    let commutative = red.commutative();
    s.red = Some(red);
    let bytes = count * d.size;
    let (alg, auto) = e.coll_choose::<AllreduceAlg>(t.size(), bytes);
    allreduce_body(
        &mut s,
        t,
        &b.views.nodes,
        sbuf,
        rbuf,
        count,
        alg,
        auto,
        commutative,
        bytes,
    );
    Ok(s)
}

#[allow(clippy::too_many_arguments)]
fn allreduce_body(
    s: &mut Sched,
    t: &Team,
    nodes: &Nodes,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    alg: AllreduceAlg,
    auto: bool,
    commutative: bool,
    bytes: usize,
) {
    let multi = nodes.count() > 1 && t.bit == 0;
    if multi
        && commutative
        && (matches!(alg, AllreduceAlg::TwoLevel | AllreduceAlg::TwoLevelShm) || auto)
    {
        return reduce::allreduce_two_level(s, t, nodes, sbuf, rbuf, count, bytes > 4096);
    }
    match alg {
        AllreduceAlg::Rabenseifner if commutative => {
            reduce::allreduce_rabenseifner(s, t, sbuf, rbuf, count)
        }
        AllreduceAlg::Ring if commutative => reduce::allreduce_ring(s, t, sbuf, rbuf, count),
        AllreduceAlg::ReduceBcast => reduce::allreduce_reduce_bcast(s, t, sbuf, rbuf, count),
        AllreduceAlg::AllgatherReduce => reduce::allreduce_allgather(s, t, sbuf, rbuf, count),
        _ => reduce::allreduce_recursive_doubling(s, t, sbuf, rbuf, count),
    }
}

unsafe fn build_reduce_scatter(
    e: &mut Engine,
    b: &Builder,
    sbuf: *const u8,
    rbuf: *mut u8,
    counts: &Counts,
    dt: DtypeId,
    op: u32,
) -> Result<Sched> {
    let t = b.team();
    let (n, me) = (t.size(), t.me);
    let red = e.coll_reducer(op, dt)?;
    let d = red.dt.clone();
    let counts: Vec<usize> = match counts {
        Counts::Uniform(c) => vec![count_of(*c, "recvcount")?; n],
        Counts::Varied { counts, .. } => {
            if counts.len() < n {
                return err!(
                    Arg,
                    "recvcounts: {} entries for {n} processes",
                    counts.len()
                );
            }
            counts[..n]
                .iter()
                .map(|c| count_of(*c, "recvcount"))
                .collect::<Result<_>>()?
        }
    };
    let total: usize = counts.iter().sum();
    let ip = in_place(sbuf);
    let input = if ip { rbuf as *const u8 } else { sbuf };
    if !ip {
        no_alias(sbuf, rbuf, total * d.size)?;
    }
    check_buf(input, total, &d, "send buffer")?;
    check_buf(rbuf, counts[me], &d, "receive buffer")?;
    let mut s = b.sched(e);
    let commutative = red.commutative();
    s.red = Some(red);
    let (alg, _) = e.coll_choose::<ReduceScatterAlg>(n, total * d.size);
    if alg == ReduceScatterAlg::Ring && commutative && n > 1 {
        let input = if ip {
            let tmp = s.tmp(total);
            s.copy_red(input, tmp, total);
            tmp as *const u8
        } else {
            input
        };
        reduce::reduce_scatter_ring(&mut s, t, input, rbuf, &counts);
    } else {
        reduce::reduce_scatter_via_reduce(&mut s, t, input, rbuf, &counts);
    }
    Ok(s)
}

#[allow(clippy::too_many_arguments)]
unsafe fn build_scan(
    e: &mut Engine,
    b: &Builder,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    exclusive: bool,
) -> Result<Sched> {
    let t = b.team();
    let count = count_of(count, "count")?;
    let red = e.coll_reducer(op, dt)?;
    let d = red.dt.clone();
    let sbuf = red_input(sbuf, rbuf, count, &d)?;
    let mut s = b.sched(e);
    s.red = Some(red);
    let (alg, _) = e.coll_choose::<ScanAlg>(t.size(), count * d.size);
    if alg == ScanAlg::Linear {
        reduce::scan_linear(&mut s, t, sbuf, rbuf, count, exclusive)
    } else {
        reduce::scan_recursive_doubling(&mut s, t, sbuf, rbuf, count, exclusive)
    }
    Ok(s)
}

/// (buffer, count, datatype) of the side every process has one block of.
type One = (*const u8, i64, DtypeId);
/// (buffer, counts, datatype) of the side the root (or everyone) has many blocks of.
type Many<'a> = (*const u8, &'a Counts, DtypeId);

unsafe fn build_gather(
    e: &mut Engine,
    b: &Builder,
    own: One,
    many: Many,
    root: i32,
    v: bool,
) -> Result<Sched> {
    let t = b.team();
    let (n, me) = (t.size(), t.me);
    let root = check_root(root, n)?;
    let r = Rooted::check(e, own, many, me, root, n, ["send", "recv"])?;
    let mut s = b.sched(e);
    let (alg, _) = e.coll_choose::<GatherAlg>(n, r.bytes());
    match (alg, r.blk) {
        (GatherAlg::Binomial, Some(blk)) if !v && n > 1 => {
            gather::gather_binomial(&mut s, t, r.own.as_ref(), &r.many, blk, root)
        }
        _ => gather::gather_linear(&mut s, t, r.own.as_ref(), &r.many, root),
    }
    Ok(s)
}

unsafe fn build_scatter(
    e: &mut Engine,
    b: &Builder,
    many: Many,
    own: One,
    root: i32,
    v: bool,
) -> Result<Sched> {
    let t = b.team();
    let (n, me) = (t.size(), t.me);
    let root = check_root(root, n)?;
    let r = Rooted::check(e, own, many, me, root, n, ["recv", "send"])?;
    let mut s = b.sched(e);
    let (alg, _) = e.coll_choose::<ScatterAlg>(n, r.bytes());
    match (alg, r.blk) {
        (ScatterAlg::Binomial, Some(blk)) if !v && n > 1 => {
            gather::scatter_binomial(&mut s, t, &r.many, r.own.as_ref(), blk, root)
        }
        _ => gather::scatter_linear(&mut s, t, &r.many, r.own.as_ref(), root),
    }
    Ok(s)
}

unsafe fn build_allgather(
    e: &mut Engine,
    b: &Builder,
    send: One,
    recv: (*mut u8, &Counts, DtypeId),
) -> Result<Sched> {
    let t = b.team();
    let n = t.size();
    let (sbuf, scount, sdt) = send;
    let (rbuf, rcounts, rdt) = recv;
    let recv = blocks(e, rbuf, rcounts, &Types::One(rdt), n, "receive buffer")?;
    let own = if in_place(sbuf) {
        None
    } else {
        let o = own_blk(e, sbuf, scount, sdt, "send")?;
        no_alias(sbuf, rbuf, o.bytes())?;
        no_alias_own(sbuf, recv[t.me].ptr, o.bytes())?;
        Some(o)
    };
    let mut s = b.sched(e);
    let (alg, _) = e.coll_choose::<AllgatherAlg>(n, avg_bytes(&recv));
    let uniform = match rcounts {
        Counts::Uniform(c) => Some((*c as usize, e.coll_dtype(rdt)?)),
        _ => None,
    };
    match (alg, uniform) {
        (AllgatherAlg::RecursiveDoubling, Some((c, d))) if n.is_power_of_two() => {
            gather::allgather_recursive_doubling(&mut s, t, own.as_ref(), rbuf, c, &d)
        }
        (AllgatherAlg::Bruck, Some((c, d))) => {
            gather::allgather_bruck(&mut s, t, own.as_ref(), rbuf, c, &d)
        }
        (AllgatherAlg::Linear, _) => gather::allgather_linear(&mut s, t, own.as_ref(), &recv),
        _ => gather::allgather_ring(&mut s, t, own.as_ref(), &recv),
    }
    Ok(s)
}

unsafe fn build_alltoall(
    e: &mut Engine,
    b: &Builder,
    send: (*const u8, &Counts, &Types),
    recv: (*mut u8, &Counts, &Types),
) -> Result<Sched> {
    let t = b.team();
    let (n, me) = (t.size(), t.me);
    let (sbuf, scounts, sdt) = send;
    let (rbuf, rcounts, rdt) = recv;
    let recv = blocks(e, rbuf, rcounts, rdt, n, "receive buffer")?;
    let ip = in_place(sbuf);
    let send: Vec<Blk> = if ip {
        Vec::new()
    } else {
        let b = blocks(e, sbuf, scounts, sdt, n, "send buffer")?;
        let sb: usize = b.iter().map(|x| x.bytes()).sum();
        no_alias(sbuf, rbuf, sb)?;
        b
    };
    let mut s = b.sched(e);
    let bytes = avg_bytes(&recv);
    let (alg, _) = e.coll_choose::<AlltoallAlg>(n, bytes);
    let equal = all_equal(&recv).filter(|_| ip || all_equal(&send).is_some());
    match (alg, equal) {
        (AlltoallAlg::Bruck, Some(blk)) if n > 1 => {
            let send = if ip { &recv } else { &send };
            gather::alltoall_bruck(&mut s, t, send, &recv, blk)
        }
        _ => {
            let send = if ip {
                gather::in_place_sends(&mut s, &recv, me)
            } else {
                send
            };
            let pairwise = alg == AlltoallAlg::Pairwise;
            gather::alltoall_shifts(&mut s, t, &send, &recv, ip, pairwise)
        }
    }
    Ok(s)
}
