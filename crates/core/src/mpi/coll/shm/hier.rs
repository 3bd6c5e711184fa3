//! Hierarchical collectives (`two_level_shm`): barrier, bcast, reduce and allreduce for
//! communicators spanning hosts, as a shared-memory phase among each host's members around a
//! point-to-point phase among the hosts' leaders.
//!
//! Each host's members of the communicator share a collective region (`region` in `shm.rs`,
//! made by the lowest member of the host at the first call, like the region of a communicator
//! within one host); a member's index in it is its position among its host's members in rank
//! order. A host's leader is the root where the root is on that host, else its lowest member
//! (`Nodes::leader`): the leaders' phase is a schedule over `Nodes::leaders_team`, with the
//! call's collective tag (every member takes one, so the tag sequence stays in step), run
//! while the other members wait on the region.
//!
//! - barrier: every member publishes (generation g); the leader waits for all of them, runs a
//!   dissemination barrier among the leaders, and releases its host by setting its `Reduced`
//!   flag of g;
//! - bcast: a binomial tree among the leaders (rooted at the root), then within each host the
//!   leader's shared-memory broadcast (`bcast_chunks`; any datatype, packed);
//! - reduce: a shared-memory reduction to each host's leader (`reduce_chunks`, in rank order;
//!   the root's host reduces straight into its receive buffer), then a binomial reduction
//!   among the leaders to the root;
//! - allreduce: a shared-memory reduction to each host's lowest member, in its receive buffer;
//!   recursive doubling among the leaders (Rabenseifner's algorithm above 4 KiB for
//!   commutative operations), in place; then a shared-memory broadcast within each host.
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

use std::sync::Arc;

use super::super::op::Reducer;
use super::super::sched::{self, Sched};
use super::super::{bcast as p2p_bcast, reduce as p2p_reduce};
use super::super::{check_buf, check_root, count_of, Args, Views};
use super::{bcast_chunks, idler, reduce_args, reduce_chunks, reducible, region, ShmComm};
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
        _ => None,
    }
}

/// The communicator's views when a hierarchical algorithm may serve a call on it: an
/// intracommunicator spanning hosts, in a job whose transports include shared memory. The
/// test is on the configuration, the same at every process (whether this process opened the
/// shared-memory transport is not: one alone on its host has none).
fn spanning(e: &mut crate::mpi::engine::Engine, comm: CommId) -> Option<Arc<Views>> {
    if !e.cfg.transports.split(',').any(|t| t.trim() == "shm") {
        return None;
    }
    if e.comm(comm).ok()?.is_inter() {
        return None;
    }
    let views = e.coll_views(comm).ok()?;
    (views.nodes.count() > 1).then_some(views)
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
        let shm = match region(comm) {
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
    /// call's tag (and reducer).
    fn leaders(
        &self,
        comm: CommId,
        root: Option<usize>,
        red: Option<&Reducer>,
        build: impl FnOnce(&mut Sched, &sched::Team),
    ) -> Result<()> {
        let team = self.views.nodes.leaders_team(&self.views.local, root);
        if team.size() < 2 {
            return Ok(());
        }
        let (ctx, rank) = with(|e| -> Result<_> {
            let c = e.comm(comm)?;
            Ok((c.coll_ctx(), c.rank))
        })??;
        let mut s = Sched::new(comm, ctx, rank, self.tag);
        s.red = red.cloned();
        build(&mut s, &team);
        sched::run(&mut s)
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
            return p.leaders(comm, None, None, |s, t| {
                p2p_bcast::barrier_dissemination(s, t)
            });
        };
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler()?;
        let lead = p.lead(None);
        let g = s.next();
        r.set(p.me, Flag::Published, g);
        let mut res = Ok(());
        if p.me == lead {
            r.wait_all(Flag::Published, g, &mut idle)?;
            res = p.leaders(comm, None, None, |s, t| {
                p2p_bcast::barrier_dissemination(s, t)
            });
            r.set(p.me, Flag::Reduced, g);
        } else {
            r.wait(|r| r.reached(lead, Flag::Reduced, g), &mut idle)?;
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
    Some((|| {
        let nodes = &p.views.nodes;
        let root_node = nodes.node_of[root];
        let lead = p.lead(Some(root));
        let mut res = Ok(());
        if p.me == lead {
            res = p.leaders(comm, Some(root), None, |s, t| {
                p2p_bcast::bcast_binomial(s, t, buf, count, &d, root_node)
            });
        }
        match &p.shm {
            Some(s) => {
                let mut idle = idler()?;
                first(res, bcast_chunks(s, p.me, lead, buf, count, &d, &mut idle))
            }
            None => res,
        }
    })())
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
    let (views, root, count, red, input) = prepared!(with(|e| -> Result<Option<_>> {
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
        Ok(Some((v, root, count, red, input)))
    })
    .and_then(|x| x));
    let p = prepared!(Place::new(comm, views).transpose());
    Some((|| {
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
        let mut idle = idler()?;
        match &p.shm {
            Some(s) => reduce_chunks(
                s,
                p.local,
                p.me,
                Some(lead),
                input,
                part,
                count,
                &red,
                &mut idle,
            )?,
            None if !std::ptr::eq(input, part) => crate::mem::copy(input, part, bytes),
            None => {}
        }
        let mut res = Ok(());
        if leader {
            res = match root {
                Some(r) => p.leaders(comm, Some(r), Some(&red), |s, t| {
                    p2p_reduce::reduce_binomial(s, t, part, rbuf, count, nodes.node_of[r])
                }),
                None => p.leaders(comm, None, Some(&red), |s, t| {
                    if bytes > LARGE && red.commutative() {
                        p2p_reduce::allreduce_rabenseifner(s, t, part, part, count)
                    } else {
                        p2p_reduce::allreduce_recursive_doubling(s, t, part, part, count)
                    }
                }),
            };
        }
        if root.is_none() {
            if let Some(s) = &p.shm {
                res = first(
                    res,
                    bcast_chunks(s, p.me, lead, rbuf, count, &red.dt, &mut idle),
                );
            }
        }
        res
    })())
}
