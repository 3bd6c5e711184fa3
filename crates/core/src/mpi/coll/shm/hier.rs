//! Hierarchical collectives (`two_level_shm`): barrier, bcast, reduce, allreduce, allgather,
//! gather and scatter for communicators spanning hosts, as a shared-memory phase among each
//! host's members around a point-to-point phase among the hosts' leaders.
//!
//! Each host's members of the communicator share a collective region (`region` in `shm.rs`,
//! made by the lowest member of the host at the first call, like the region of a communicator
//! within one host); a member's index in it is its position among its host's members in rank
//! order. A host's leader is the root where the root is on that host, else its lowest member
//! (`Nodes::leader`): the leaders' phase is a schedule over `Nodes::leaders_team`, with the
//! call's collective tag (every member takes one, so the tag sequence stays in step), run
//! while the other members wait on the region.
//!
//! - barrier: every member signs and publishes (generation g); the leader waits for all of
//!   them, runs a dissemination barrier among the leaders, and releases its host by setting
//!   its flags of g;
//! - bcast: a binomial tree among the leaders (rooted at the root), then within each host the
//!   leader's shared-memory broadcast (`bcast_chunks`; any datatype, packed);
//! - reduce: a shared-memory reduction to each host's leader (`reduce_local`, in rank order;
//!   the root's host reduces straight into its receive buffer), then a binomial reduction
//!   among the leaders to the root;
//! - allreduce: a shared-memory reduction to each host's lowest member, in its receive buffer;
//!   recursive doubling among the leaders (Rabenseifner's algorithm above 4 KiB for
//!   commutative operations), in place; then a shared-memory broadcast within each host.
//! - allgather, gather, scatter (not the v forms): every rank's block packed into a staging
//!   buffer laid out host by host (`layout`; any placement), a shared-memory gather to each
//!   host's leader (`local_gather`), an allgather (ring) / gather / scatter (linear) of the
//!   hosts' parts among the leaders, then a shared-memory broadcast of the whole buffer
//!   (allgather) or scatter of the host's part (`local_scatter`) within each host, and every
//!   member unpacks its blocks. The v forms and alltoall decline (the decision's choice
//!   without `two_level_shm` serves them).
//!
//! Reductions keep MPI's order for non-commutative operations where every host holds a run of
//! consecutive ranks (the usual block placement): the hosts are then in rank order, each
//! host's part is combined in rank order, and the leaders' algorithms keep their team's order.
//! With another placement (round-robin, say) a non-commutative reduction declines this
//! algorithm, and the call takes the point-to-point algorithms over the whole communicator.
//! Reductions need a contiguous datatype, as the shared-memory ones do; others decline too
//! (and run `two_level` for commutative operations). Only blocking calls come here, as for
//! `shm.rs`; a nonblocking or persistent call that names `two_level_shm` runs `two_level`.
//! A host with one member of the communicator skips the region.
//!
//! A call that fails at one process (arguments that disagree, say) fails at the others too,
//! and leaves the tags and the region as a finished call does: every process goes through
//! every phase of the call whatever happened before, so all count the same tags and
//! generations. A process that feeds a phase after its part of the call failed gives the
//! phase up: a leader's schedule sends its messages empty (`Sched::fail`; the leaders it
//! feeds see a short message), a leader gives up its host's broadcast or scatter at its first
//! generation (`Place::local`; the members check its signature there). A process that only
//! receives, or sends to its leader, runs the phase as usual and keeps its first error. Each
//! shared-memory phase runs under `ShmComm::serve`. Blocks that disagree are found where they
//! meet: the leader of a gather compares each member's length with its own, a member of a
//! scatter the leader's with its own, and the leaders' messages carry the hosts' parts.

use std::sync::Arc;

use super::super::gather::{self as p2p_gather, Blk};
use super::super::op::Reducer;
use super::super::sched::{self, Sched};
use super::super::{bcast as p2p_bcast, reduce as p2p_reduce};
use super::super::{
    byte_type, check_buf, check_root, count_of, in_place, no_alias, Args, Counts, Rooted, Views,
};
use super::{
    bcast_chunks, block_mismatch, idler, pack_blk, part_len, reduce_args, reduce_local, reducible,
    region, unpack_blk, unpack_part, LocalReduce, ShmComm, Sig,
};
use crate::err;
use crate::error::Result;
use crate::ids::{CommId, DtypeId};
use crate::mpi::coll::decide::Coll;
use crate::mpi::global::with;
use crate::transport::RegionFlag as Flag;

/// Allreduce chunks above this many bytes take Rabenseifner's algorithm among the leaders
/// (commutative operations), as `two_level` does.
const LARGE: usize = 4096;

/// Run `a` with the hierarchical algorithm when the decision names it for a communicator
/// spanning hosts; None otherwise.
///
/// # Safety
/// As for [`super::super::blocking`].
pub unsafe fn try_blocking(comm: CommId, a: &Args) -> Option<Result<()>> {
    if let Some(r) = a.rooted() {
        return if r.v {
            None
        } else {
            rooted(comm, r.own, r.many, r.root, r.gather)
        };
    }
    match a {
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
        } => reduce(comm, *sbuf, *rbuf, *count, *dt, *op, Some(*root)),
        Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        } => reduce(comm, *sbuf, *rbuf, *count, *dt, *op, None),
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts: Counts::Uniform(rcount),
            rdt,
        } => allgather(comm, *sbuf, (*scount, *sdt), *rbuf, (*rcount, *rdt)),
        _ => None,
    }
}

/// The communicator's views when a hierarchical algorithm may serve a call on it: an
/// intracommunicator spanning hosts, in a job whose transports include shared memory. The
/// test is on the configuration, the same at every process (whether this process opened the
/// shared-memory transport is not: one alone on its host has none).
fn spanning(e: &mut crate::mpi::engine::Engine, comm: CommId) -> Option<Arc<Views>> {
    if e.comm(comm).ok()?.is_inter() {
        return None;
    }
    let views = e.coll_views(comm).ok()?;
    // The configuration's list last: most calls are on communicators within one host.
    (views.nodes.count() > 1 && e.cfg.transports.split(',').any(|t| t.trim() == "shm"))
        .then_some(views)
}

/// Where this process stands in a hierarchical call.
struct Place {
    views: Arc<Views>,
    /// The host's region (None for a host with one member).
    shm: Option<Arc<ShmComm>>,
    /// Members of this host.
    local: usize,
    /// Our index among them.
    me: usize,
    /// The call's collective tag (the leaders' phase uses it).
    tag: i32,
}

impl Place {
    /// The region (after the agreed decision to use one) and the call's tag.
    fn new(comm: CommId, views: Arc<Views>) -> Option<Result<Place>> {
        let shm = match region(comm, None) {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let nodes = &views.nodes;
        let local = nodes.members[nodes.my_node].len();
        let me = shm.me;
        Some(with(|e| e.coll_tag(comm)).map(|tag| Place {
            shm: (local > 1).then_some(shm),
            local,
            me,
            tag,
            views,
        }))
    }

    /// Our host's leader's index among its members, for a call rooted at `root` (or not).
    fn lead(&self, root: Option<usize>) -> usize {
        let nodes = &self.views.nodes;
        let k = nodes.my_node;
        let l = nodes.leader(k, root);
        nodes.members[k].iter().position(|&m| m == l).unwrap_or(0)
    }

    /// Run the leaders' phase: a schedule over the leaders' team, built by `build`, with the
    /// call's tag (and reducer). `res` is the call's result so far at this process: after a
    /// failure the schedule runs failed (its sends go out empty, see the module doc), and the
    /// first error is the phase's.
    fn leaders(
        &self,
        comm: CommId,
        root: Option<usize>,
        red: Option<&Reducer>,
        res: Result<()>,
        build: impl FnOnce(&mut Sched, &sched::Team),
    ) -> Result<()> {
        let team = self.views.nodes.leaders_team(&self.views.local, root);
        if team.size() < 2 {
            return res;
        }
        let (ctx, rank) = with(|e| -> Result<_> {
            let c = e.comm(comm)?;
            Ok((c.coll_ctx(), c.rank))
        })??;
        let mut s = Sched::new(comm, ctx, rank, self.tag);
        s.red = red.cloned();
        build(&mut s, &team);
        if let Err(e) = res {
            s.fail(e);
        }
        sched::run(&mut s)
    }

    /// Run a shared-memory phase of the call on this host's region with `f` (nothing for a
    /// host with one member), after `res`, the call's result so far here. `feeds`: this
    /// process is the phase's source (the leader of a broadcast or scatter within the host);
    /// where the call has failed here, it gives the phase up at its first generation instead
    /// ([`ShmComm::serve`]), and the members fail with it. Otherwise the phase runs, and the
    /// first error is the call's.
    fn local(
        &self,
        res: Result<()>,
        feeds: bool,
        f: impl FnOnce(&ShmComm) -> Result<()>,
    ) -> Result<()> {
        let Some(s) = &self.shm else {
            return res;
        };
        match res {
            Err(e) if feeds => s.serve(|| {
                s.next();
                Err(e)
            }),
            res => first(res, s.serve(|| f(s))),
        }
    }
}

/// Take the first error of a phase after the region's flags are set, so that the host's other
/// members are not left waiting.
fn first(a: Result<()>, b: Result<()>) -> Result<()> {
    a.and(b)
}

unsafe fn barrier(comm: CommId) -> Option<Result<()>> {
    let views = prepared!(with(|e| {
        let v = spanning(e, comm)?;
        e.coll_choose_hier(Coll::Barrier, v.local.size(), 0)
            .then_some(v)
    }));
    let p = prepared!(Place::new(comm, views).transpose());
    Some((|| {
        let Some(s) = &p.shm else {
            return p.leaders(comm, None, None, Ok(()), |s, t| {
                p2p_bcast::barrier_dissemination(s, t)
            });
        };
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(None)?;
        let lead = p.lead(None);
        let g = s.next();
        // Signed as the shared-memory barrier (early, see `ShmComm::announce`), so that a host's
        // members that call other collectives at this point find out.
        let sig = s.announce(Sig::new(g, Coll::Barrier, 0));
        r.set(p.me, Flag::Published, g);
        let res;
        if p.me == lead {
            r.wait_all(Flag::Published, g, &mut idle)?;
            res = p.leaders(comm, None, None, s.agree_all(sig), |s, t| {
                p2p_bcast::barrier_dissemination(s, t)
            });
            r.set(p.me, Flag::Reduced, g);
        } else {
            // Done rather than Reduced: a leader in another call at g sets it too.
            r.wait(|r| r.reached(lead, Flag::Done, g), &mut idle)?;
            res = s.agree(lead, sig);
        }
        r.set(p.me, Flag::Done, g);
        res
    })())
}

unsafe fn bcast(
    comm: CommId,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    root: i32,
) -> Option<Result<()>> {
    let (views, root, count, d) = prepared!(with(|e| -> Result<Option<_>> {
        let Some(v) = spanning(e, comm) else {
            return Ok(None);
        };
        let n = v.local.size();
        let count = count_of(count, "count")?;
        let d = e.coll_dtype(dt)?;
        let root = check_root(root, n)?;
        check_buf(buf, count, &d, "buffer")?;
        let bytes = count * d.size;
        if bytes == 0 || !e.coll_choose_hier(Coll::Bcast, n, bytes) {
            return Ok(None);
        }
        Ok(Some((v, root, count, d)))
    })
    .and_then(|x| x));
    let p = prepared!(Place::new(comm, views).transpose());
    Some({
        let nodes = &p.views.nodes;
        let root_node = nodes.node_of[root];
        let lead = p.lead(Some(root));
        let mut res = Ok(());
        if p.me == lead {
            res = p.leaders(comm, Some(root), None, Ok(()), |s, t| {
                p2p_bcast::bcast_binomial(s, t, buf, count, &d, root_node)
            });
        }
        p.local(res, p.me == lead, |s| {
            let mut idle = idler(None)?;
            bcast_chunks(s, p.me, lead, buf, count, &d, &mut idle)
        })
    })
}

/// MPI_Reduce (`root` Some) and MPI_Allreduce (None).
#[allow(clippy::too_many_arguments)]
unsafe fn reduce(
    comm: CommId,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    root: Option<i32>,
) -> Option<Result<()>> {
    let coll = if root.is_some() {
        Coll::Reduce
    } else {
        Coll::Allreduce
    };
    let (views, root, count, red, input, direct_from) = prepared!(with(|e| -> Result<Option<_>> {
        let Some(v) = spanning(e, comm) else {
            return Ok(None);
        };
        let (n, me) = (v.local.size(), v.local.me);
        let (root, count, red, input) = reduce_args(e, n, me, sbuf, rbuf, count, dt, op, root)?;
        if !reducible(&red, count)
            || !(red.commutative() || v.nodes.consecutive())
            || !e.coll_choose_hier(coll, n, count * red.dt.size)
        {
            return Ok(None);
        }
        let direct_from = e.cfg.coll_shm_reduce_direct as usize;
        Ok(Some((v, root, count, red, input, direct_from)))
    })
    .and_then(|x| x));
    let p = prepared!(Place::new(comm, views).transpose());
    Some({
        let me = p.views.local.me;
        let nodes = &p.views.nodes;
        let lead = p.lead(root);
        let leader = p.me == lead;
        let bytes = count * red.dt.size;
        // Where the host's part goes at its leader: the receive buffer at the root and in an
        // allreduce, else scratch.
        let mut scratch: Vec<u128> = Vec::new();
        let part = if root.is_none_or(|r| r == me) {
            rbuf
        } else if leader {
            scratch.resize(bytes.div_ceil(16), 0);
            scratch.as_mut_ptr() as *mut u8
        } else {
            std::ptr::null_mut()
        };
        if p.shm.is_none() && !std::ptr::eq(input, part) {
            crate::mem::copy(input, part, bytes);
        }
        let mut res = p.local(Ok(()), false, |s| {
            let job = LocalReduce {
                n: p.local,
                me: p.me,
                root: Some(lead),
                input,
                rbuf: part,
                count,
            };
            reduce_local(s, job, &red, &mut idler(None)?, direct_from)
        });
        if leader {
            res = match root {
                Some(r) => p.leaders(comm, Some(r), Some(&red), res, |s, t| {
                    p2p_reduce::reduce_binomial(s, t, part, rbuf, count, nodes.node_of[r])
                }),
                None => p.leaders(comm, None, Some(&red), res, |s, t| {
                    if bytes > LARGE && red.commutative() {
                        p2p_reduce::allreduce_rabenseifner(s, t, part, part, count)
                    } else {
                        p2p_reduce::allreduce_recursive_doubling(s, t, part, part, count)
                    }
                }),
            };
        }
        if root.is_none() {
            res = p.local(res, leader, |s| {
                bcast_chunks(s, p.me, lead, rbuf, count, &red.dt, &mut idler(None)?)
            });
        }
        res
    })
}

/// Where every rank's block lies in the packed form of the whole call: the hosts one after the
/// other (in node order), each host's members in rank order, `blk` bytes each. Returns each
/// host's offset (one more entry: the total) and each rank's offset.
fn layout(views: &Views, blk: usize) -> (Vec<usize>, Vec<usize>) {
    let nodes = &views.nodes;
    let mut host = Vec::with_capacity(nodes.count() + 1);
    let mut at = vec![0usize; nodes.node_of.len()];
    let mut off = 0;
    for m in &nodes.members {
        host.push(off);
        for &j in m {
            at[j] = off;
            off += blk;
        }
    }
    host.push(off);
    (host, at)
}

/// Gather `blk` packed bytes of every member of this host to its leader `lead`, at `dst`
/// (member i's at `dst + i * blk`): each member packs its block (`own`; None at a leader
/// whose own block is already in place) into its area, an area per generation, and the
/// leader copies them out. Without a region (a host with one member) the block is packed
/// straight to `dst`. Each member says how many bytes its block has; the leader reports a
/// length other than its own `blk` after the phase (the member fails in a later phase, or,
/// sending only, returns).
///
/// # Safety
/// `dst` (at the leader) has room for the host's members' blocks; `own` is valid.
unsafe fn local_gather(
    p: &Place,
    lead: usize,
    own: Option<&Blk>,
    dst: *mut u8,
    blk: usize,
) -> Result<()> {
    let Some(s) = &p.shm else {
        if let Some(o) = own {
            pack_blk(o, 0, dst, blk.min(o.bytes()));
        }
        return Ok(());
    };
    s.serve(|| {
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(None)?;
        let mut off = 0;
        let mut failure = None;
        // One generation at least, so that every member counts alike.
        loop {
            let len = part_len(blk, off);
            let g = s.next();
            if p.me == lead {
                if let Some(o) = own {
                    pack_blk(
                        o,
                        off,
                        dst.add(p.me * blk + off),
                        len.min(part_len(o.bytes(), off)),
                    );
                }
                for t in 1..p.local {
                    let j = (lead + t) % p.local;
                    r.wait(|x| x.reached(j, Flag::Published, g), &mut idle)?;
                    // Each member says how many bytes it sends: a block of another length (type
                    // signatures that differ) is reported, and never copied past its place.
                    let sent = r.word(j, g) as usize;
                    if sent != blk && failure.is_none() {
                        failure = Some(block_mismatch(s.rank_of(j), sent, blk));
                    }
                    crate::mem::copy(r.area(j, g), dst.add(j * blk + off), len);
                }
                r.set(p.me, Flag::Published, g);
            } else {
                r.wait_free(g, &mut idle)?;
                r.set_word(p.me, g, own.map_or(0, Blk::bytes) as u64);
                if let Some(o) = own {
                    pack_blk(o, off, r.area(p.me, g), len.min(part_len(o.bytes(), off)));
                }
                r.set(p.me, Flag::Published, g);
            }
            r.set(p.me, Flag::Done, g);
            off += len;
            if off >= blk {
                return failure.map_or(Ok(()), Err);
            }
        }
    })
}

/// The mirror image of [`local_gather`]: the leader `lead` holds the host's members' packed
/// blocks at `src` (member i's at `src + i * blk`) and writes each member's into that
/// member's area; each member unpacks its own into `own` (None: nothing to unpack, the root's
/// MPI_IN_PLACE). `res` is the call's result so far ([`Place::local`]: a leader whose call
/// failed gives the phase up). The leader says its block's length at the first generation;
/// a member whose own differs runs the leader's generations without unpacking and reports
/// it.
///
/// # Safety
/// As for [`local_gather`].
unsafe fn local_scatter(
    p: &Place,
    lead: usize,
    src: *const u8,
    own: Option<&Blk>,
    blk: usize,
    res: Result<()>,
) -> Result<()> {
    if p.me == lead {
        if let Some(o) = own {
            unpack_blk(o, 0, src.add(p.me * blk), blk.min(o.bytes()));
        }
    }
    p.local(res, p.me == lead, |s| {
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(None)?;
        let (mut off, mut blk, mut own) = (0, blk, own);
        let mut failure = None;
        loop {
            let len = part_len(blk, off);
            let g = s.next();
            if p.me == lead {
                r.wait_free(g, &mut idle)?;
                for t in 1..p.local {
                    let j = (lead + t) % p.local;
                    crate::mem::copy(src.add(j * blk + off), r.area(j, g), len);
                }
                r.set_word(p.me, g, blk as u64);
                r.set(p.me, Flag::Published, g);
            } else {
                r.wait(|x| x.reached(lead, Flag::Published, g), &mut idle)?;
                if off == 0 {
                    s.intact(lead, g)?;
                    let sent = r.word(lead, g) as usize;
                    if sent != blk {
                        failure = Some(block_mismatch(s.rank_of(lead), sent, blk));
                        (blk, own) = (sent, None);
                    }
                }
                if let Some(o) = own {
                    let l = len.min(part_len(o.bytes(), off));
                    unpack_blk(o, off, r.area(p.me, g), l);
                }
            }
            r.set(p.me, Flag::Done, g);
            off += part_len(blk, off);
            if off >= blk {
                return failure.map_or(Ok(()), Err);
            }
        }
    })
}

/// MPI_Allgather with one count and datatype per side: the shm gather of each host's packed
/// blocks to its lowest member, a ring allgather of the hosts' parts among the leaders, the
/// shm broadcast of the whole packed result within each host, and every member unpacks each
/// rank's block into its place (any placement: the packed form is in host order).
unsafe fn allgather(
    comm: CommId,
    sbuf: *const u8,
    (scount, sdt): (i64, DtypeId),
    rbuf: *mut u8,
    (rcount, rdt): (i64, DtypeId),
) -> Option<Result<()>> {
    let (views, own, rcount, rd, blk, bad) = prepared!(with(|e| -> Result<Option<_>> {
        let Some(v) = spanning(e, comm) else {
            return Ok(None);
        };
        let (n, me) = (v.local.size(), v.local.me);
        let rcount = count_of(rcount, "recvcount")?;
        let rd = e.coll_dtype(rdt)?;
        let blk = rcount * rd.size;
        check_buf(rbuf, rcount * n, &rd, "receive buffer")?;
        let mut bad = None;
        let own = if in_place(sbuf) {
            Blk::new(
                rbuf.wrapping_offset(me as isize * rcount as isize * rd.extent()),
                rcount,
                &rd,
            )
        } else {
            let scount = count_of(scount, "sendcount")?;
            let sd = e.coll_dtype(sdt)?;
            check_buf(sbuf, scount, &sd, "send buffer")?;
            no_alias(sbuf, rbuf, scount * sd.size)?;
            if scount * sd.size != blk {
                // The receive side decides the path, alike everywhere: this process takes it
                // too and fails there (the module doc), so that the others fail with it.
                bad = Some(crate::mpi_error!(
                    Truncate,
                    "MPI_Allgather sends {} bytes per block and receives {blk}: the type \
                     signatures differ",
                    scount * sd.size
                ));
            }
            Blk::new(sbuf, scount, &sd)
        };
        if blk == 0 || !e.coll_choose_hier(Coll::Allgather, n, blk) {
            return bad.map_or(Ok(None), Err);
        }
        Ok(Some((v, own, rcount, rd, blk, bad)))
    })
    .and_then(|x| x));
    let p = prepared!(Place::new(comm, views).transpose());
    Some((|| {
        let nodes = &p.views.nodes;
        let (host, at) = layout(&p.views, blk);
        let total = host[nodes.count()];
        let mut all: Vec<u128> = vec![0; total.div_ceil(16)];
        let full = all.as_mut_ptr() as *mut u8;
        let lead = p.lead(None);
        let k = nodes.my_node;
        // Every phase runs whatever failed before it (the module doc).
        let mut res = first(
            bad.map_or(Ok(()), Err),
            local_gather(&p, lead, Some(&own), full.add(host[k]), blk),
        );
        if p.me == lead {
            let bt = byte_type();
            let parts: Vec<Blk> = (0..nodes.count())
                .map(|h| Blk::new(full.add(host[h]), host[h + 1] - host[h], &bt))
                .collect();
            res = p.leaders(comm, None, None, res, |s, t| {
                p2p_gather::allgather_ring(s, t, None, &parts)
            });
        }
        p.local(res, p.me == lead, |s| {
            bcast_chunks(s, p.me, lead, full, total, &byte_type(), &mut idler(None)?)
        })?;
        let rstep = rcount as isize * rd.extent();
        for (j, &o) in at.iter().enumerate() {
            unpack_part(
                &rd,
                rbuf.offset(j as isize * rstep),
                rcount,
                0,
                full.add(o),
                blk,
            );
        }
        Ok(())
    })())
}

/// MPI_Gather (`gather` true) and MPI_Scatter, not the v forms (they decline: a member knows
/// only its own count). Gather: the shm gather of each host's packed blocks to its leader
/// (the root on the root's host), a linear gather of the hosts' parts among the leaders to
/// the root, which unpacks every rank's block into its place. Scatter: the converse (the root
/// packs every block in host order, a linear scatter of the hosts' parts among the leaders,
/// the shm scatter within each host).
unsafe fn rooted(
    comm: CommId,
    own: (*const u8, i64, DtypeId),
    many: (*const u8, &Counts, DtypeId),
    root: i32,
    gather: bool,
) -> Option<Result<()>> {
    let (coll, names) = if gather {
        (Coll::Gather, ["send", "recv"])
    } else {
        (Coll::Scatter, ["recv", "send"])
    };
    let (views, root, r, blk) = prepared!(with(|e| -> Result<Option<_>> {
        let Some(v) = spanning(e, comm) else {
            return Ok(None);
        };
        let (n, me) = (v.local.size(), v.local.me);
        let root = check_root(root, n)?;
        let r = Rooted::check(e, own, many, me, root, n, names)?;
        let Some(blk) = r.blk else {
            return Ok(None);
        };
        if blk == 0 || !e.coll_choose_hier(coll, n, blk) {
            return Ok(None);
        }
        Ok(Some((v, root, r, blk)))
    })
    .and_then(|x| x));
    let p = prepared!(Place::new(comm, views).transpose());
    Some({
        let me = p.views.local.me;
        let nodes = &p.views.nodes;
        let (host, at) = layout(&p.views, blk);
        let k = nodes.my_node;
        let lead = p.lead(Some(root));
        let leader = p.me == lead;
        let root_node = nodes.node_of[root];
        // The root holds the whole packed form; another leader its host's part.
        let len = if me == root {
            host[nodes.count()]
        } else if leader {
            host[k + 1] - host[k]
        } else {
            0
        };
        let mut buf: Vec<u128> = vec![0; len.div_ceil(16)];
        let base = buf.as_mut_ptr() as *mut u8;
        let mine = if me == root { base.add(host[k]) } else { base };
        let bt = byte_type();
        let parts = |b: *mut u8| -> Vec<Blk> {
            (0..nodes.count())
                .map(|h| Blk::new(b.add(host[h]), host[h + 1] - host[h], &bt))
                .collect()
        };
        // The root's own block must have its blocks' length (every phase runs whatever
        // failed before it: the module doc).
        let mut res = match &r.own {
            Some(o) if me == root && o.bytes() != blk => {
                let (sent, expected) = if gather {
                    (o.bytes(), blk)
                } else {
                    (blk, o.bytes())
                };
                err!(
                    Truncate,
                    "the root's own block: {sent} bytes sent where the receiving side expects \
                     {expected}: the counts (and type signatures) must agree"
                )
            }
            _ => Ok(()),
        };
        if gather {
            res = first(res, local_gather(&p, lead, r.own.as_ref(), mine, blk));
            if leader {
                let (own, all) = if me == root {
                    (None, parts(base))
                } else {
                    (Some(Blk::new(mine, host[k + 1] - host[k], &bt)), Vec::new())
                };
                res = p.leaders(comm, Some(root), None, res, |s, t| {
                    p2p_gather::gather_linear(s, t, own.as_ref(), &all, root_node)
                });
            }
            if me == root && res.is_ok() {
                for (j, b) in r.many.iter().enumerate() {
                    if j != root || r.own.is_some() {
                        unpack_blk(b, 0, base.add(at[j]), blk.min(b.bytes()));
                    }
                }
            }
            res
        } else {
            if me == root {
                for (j, b) in r.many.iter().enumerate() {
                    if j != root || r.own.is_some() {
                        pack_blk(b, 0, base.add(at[j]), blk.min(b.bytes()));
                    }
                }
            }
            if leader {
                let (own, all) = if me == root {
                    (None, parts(base))
                } else {
                    (Some(Blk::new(mine, host[k + 1] - host[k], &bt)), Vec::new())
                };
                res = p.leaders(comm, Some(root), None, res, |s, t| {
                    p2p_gather::scatter_linear(s, t, &all, own.as_ref(), root_node)
                });
            }
            local_scatter(&p, lead, mine, r.own.as_ref(), blk, res)
        }
    })
}
