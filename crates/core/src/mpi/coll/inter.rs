//! Intercommunicator collectives (MPI-4.0 sections 6.2.2, 6.4-6.11) and neighbourhood
//! collectives (section 8.6).
//!
//! # Intercommunicators
//!
//! An intercommunicator collective moves data from one group to the other. Rooted ones
//! (bcast, reduce, gather, scatter) have the root pass MPI_ROOT, the rest of its group
//! MPI_PROC_NULL, and every process of the other group the root's rank in the root's group.
//! All-to-all ones (allreduce, allgather, alltoall, reduce-scatter, barrier) run both
//! directions at once: each group receives what the other contributed.
//!
//! Every form is a schedule over two teams of [`Views`]: the local group (its traffic carries
//! the LOCAL_BIT tag bit, so that local rank 3 and remote rank 3 never confuse each other's
//! messages in the shared collective context) and the remote group. Two shapes serve them:
//!
//! - *through the leaders* where data is combined or replicated: reductions run inside the
//!   local group to local rank 0 with the intracommunicator algorithms, the leaders trade the
//!   result, and a local broadcast or scatter delivers it (allreduce, reduce-scatter,
//!   barrier); a broadcast enters the other group at its rank 0 and continues as a local
//!   broadcast. This keeps the number of messages crossing between the groups at one or two
//!   and reuses the tuned intracommunicator trees.
//! - *direct* where every block has one sender and one receiver anyway (gather, scatter,
//!   allgather, alltoall and their v/w forms): each process talks to the remote processes
//!   itself. Counts, displacements and datatypes are only known where the standard makes
//!   them significant (the root's arrays for gatherv, the receiver's for allgatherv), so
//!   relaying through a leader would need the arrays shipped first; direct messages need no
//!   packing and no extra round.
//!
//! MPI_IN_PLACE is not defined for intercommunicators (MPI-4.0 6.2.2) and is refused with
//! MPI_ERR_BUFFER; MPI_Scan and MPI_Exscan are intracommunicator-only (MPI_ERR_COMM).
//!
//! # Neighbourhood collectives
//!
//! Each process sends one block to each out-neighbour and receives one from each in-neighbour,
//! in the order of [`crate::mpi::engine::Engine::topo_neighbors`]; MPI_PROC_NULL neighbours of a
//! non-periodic Cartesian grid are skipped and their blocks untouched. On a periodic dimension
//! of extent 1 or 2 the same process is both the -1 and the +1 neighbour: sub-tags pair the
//! message sent in the +1 direction with the receive from the -1 neighbour (and vice versa).

use super::build::{bcast_body, Builder};
use super::decide::{BcastAlg, ReduceAlg};
use super::gather::{neighbor_exchange, Blk};
use super::sched::{Sched, Team};
use super::{
    bcast, blocks, byte_type, check_buf, count_of, in_place, own_blk, reduce, Args, Counts, Types,
    Views,
};
use crate::err;
use crate::error::Result;
use crate::ids::{CommId, DtypeId};
use crate::mpi::engine::Engine;
use crate::mpi::request::PROC_NULL;
use crate::mpi::topo::Topology;

/// MPI_ROOT in the MPICH ABI.
pub const ROOT: i32 = -3;

/// What a process does in a rooted intercommunicator collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The root (MPI_ROOT).
    Root,
    /// The root's group, not the root (MPI_PROC_NULL): takes no part.
    Idle,
    /// The other group; the root is this rank of the remote group.
    Leaf(usize),
}

/// A direct gather (`to_root`) or its mirror image, a scatter: the root moves one block with
/// each remote process (`at_root`, in remote rank order), a leaf its `own` block with the root.
fn rooted_direct(
    s: &mut Sched,
    remote: &Team,
    role: Role,
    at_root: &[Blk],
    own: Option<&Blk>,
    to_root: bool,
) {
    let mut step = |peer: usize, b: &Blk, inbound: bool| {
        if inbound {
            s.recv(remote, peer, b.ptr, b.count, &b.dt)
        } else {
            s.send(remote, peer, b.ptr, b.count, &b.dt)
        }
    };
    match (role, own) {
        (Role::Root, _) => {
            for (i, b) in at_root.iter().enumerate() {
                step(i, b, to_root);
            }
        }
        (Role::Leaf(r), Some(o)) => step(r, o, !to_root),
        _ => {}
    }
    s.fence();
}

/// The checked buffers of a direct gather (`to_root`) or scatter, mirror images as in
/// `rooted_direct`: at the root one block per remote process (`many`: the receive side of a
/// gather, the send side of a scatter), at a leaf its `own` block (never MPI_IN_PLACE),
/// nothing at an idle process.
fn rooted_blocks(
    e: &Engine,
    role: Role,
    (obuf, ocount, odt): (*const u8, i64, DtypeId),
    (mbuf, mcounts, mdt): (*const u8, &Counts, DtypeId),
    m: usize,
    to_root: bool,
) -> Result<(Vec<Blk>, Option<Blk>)> {
    // Names in error messages: the own block's (count prefix, buffer), the root's buffer.
    let ((oname, obuf_name), mname) = if to_root {
        (("send", "send buffer"), "receive buffer")
    } else {
        (("recv", "receive buffer"), "send buffer")
    };
    match role {
        Role::Root => Ok((blocks(e, mbuf, mcounts, &Types::One(mdt), m, mname)?, None)),
        Role::Leaf(_) => {
            no_in_place(obuf, obuf_name)?;
            Ok((Vec::new(), Some(own_blk(e, obuf, ocount, odt, oname)?)))
        }
        Role::Idle => Ok((Vec::new(), None)),
    }
}

fn role(root: i32, remote: usize) -> Result<Role> {
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as usize) < remote => Ok(Role::Leaf(r as usize)),
        r => err!(
            Root,
            "root {r} on an intercommunicator: pass MPI_ROOT at the root, MPI_PROC_NULL at the other processes of its group, and the root's rank (0..{remote}) in the remote group"
        ),
    }
}

fn no_in_place(p: *const u8, what: &str) -> Result<()> {
    if in_place(p) {
        return err!(
            Buffer,
            "MPI_IN_PLACE is not allowed as the {what} on an intercommunicator"
        );
    }
    Ok(())
}

/// Zero-byte fan-in to member 0 along a binomial tree (the first half of a barrier).
fn fan_in(s: &mut Sched, t: &Team) {
    let n = t.size();
    let v = t.me;
    let byte = byte_type();
    let nothing = std::ptr::NonNull::<u8>::dangling().as_ptr();
    let mut mask = 1;
    let mut parent = None;
    while mask < n {
        if v & mask != 0 {
            parent = Some(v - mask);
            break;
        }
        if v + mask < n {
            s.recv(t, v + mask, nothing, 0, &byte);
        }
        mask <<= 1;
    }
    s.fence();
    if let Some(p) = parent {
        s.send(t, p, nothing, 0, &byte);
        s.fence();
    }
}

/// Check a call's arguments on an intercommunicator and compile its schedule.
///
/// # Safety
/// As for `super::build`.
pub unsafe fn build(e: &mut Engine, comm: CommId, a: &Args) -> Result<Sched> {
    let bld = Builder::new(e, comm)?;
    let Views {
        local,
        remote,
        nodes,
    } = &*bld.views;
    let Some(remote) = remote.as_ref() else {
        return err!(Intern, "intercommunicator without a remote group");
    };
    let n = local.size();
    let m = remote.size();
    let me = local.me;
    let byte = byte_type();
    let nothing = std::ptr::NonNull::<u8>::dangling().as_ptr();
    match a {
        Args::Barrier => {
            let mut s = bld.sched(e);
            fan_in(&mut s, local);
            if me == 0 {
                s.send(remote, 0, nothing, 0, &byte);
                s.recv(remote, 0, nothing, 0, &byte);
                s.fence();
            }
            bcast::bcast_binomial(&mut s, local, nothing, 0, &byte, 0);
            Ok(s)
        }
        Args::Bcast {
            buf,
            count,
            dt,
            root,
        } => {
            let role = role(*root, m)?;
            if role == Role::Idle {
                return Ok(bld.sched(e));
            }
            let count = count_of(*count, "count")?;
            let d = e.coll_dtype(*dt)?;
            check_buf(*buf, count, &d, "buffer")?;
            let bytes = count * d.size;
            let (alg, auto) = e.coll_choose::<BcastAlg>(n, bytes);
            let seg = e.cfg.coll_segment as usize;
            let mut s = bld.sched(e);
            match role {
                Role::Root => s.send(remote, 0, *buf, count, &d),
                Role::Leaf(r) => {
                    if me == 0 {
                        s.recv(remote, r, *buf, count, &d);
                    }
                    s.fence();
                    if n > 1 && bytes > 0 {
                        bcast_body(
                            &mut s,
                            local,
                            nodes,
                            *buf,
                            count,
                            &d,
                            0,
                            alg,
                            auto,
                            seg,
                        );
                    }
                }
                Role::Idle => {}
            }
            s.fence();
            Ok(s)
        }
        Args::Reduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
            root,
        } => {
            let role = role(*root, m)?;
            if role == Role::Idle {
                return Ok(bld.sched(e));
            }
            let count = count_of(*count, "count")?;
            let red = e.coll_reducer(*op, *dt)?;
            let d = red.dt.clone();
            match role {
                Role::Root => check_buf(*rbuf, count, &d, "receive buffer")?,
                _ => {
                    no_in_place(*sbuf, "send buffer")?;
                    check_buf(*sbuf, count, &d, "send buffer")?;
                }
            }
            let (alg, _) = e.coll_choose::<ReduceAlg>(n, count * d.size);
            let mut s = bld.sched(e);
            s.red = Some(red);
            match role {
                Role::Root => s.recv(remote, 0, *rbuf, count, &d),
                Role::Leaf(r) => {
                    let tmp = if me == 0 {
                        s.tmp(count)
                    } else {
                        std::ptr::null_mut()
                    };
                    local_reduce(&mut s, local, alg, *sbuf, tmp, count);
                    if me == 0 {
                        s.send(remote, r, tmp, count, &d);
                    }
                }
                Role::Idle => {}
            }
            s.fence();
            Ok(s)
        }
        Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        } => {
            no_in_place(*sbuf, "send buffer")?;
            let count = count_of(*count, "count")?;
            let red = e.coll_reducer(*op, *dt)?;
            let d = red.dt.clone();
            check_buf(*sbuf, count, &d, "send buffer")?;
            check_buf(*rbuf, count, &d, "receive buffer")?;
            let (alg, _) = e.coll_choose::<ReduceAlg>(n, count * d.size);
            let mut s = bld.sched(e);
            s.red = Some(red);
            // Our group's result goes to the other group; theirs comes back into rbuf.
            let tmp = if me == 0 {
                s.tmp(count)
            } else {
                std::ptr::null_mut()
            };
            local_reduce(&mut s, local, alg, *sbuf, tmp, count);
            if me == 0 {
                s.send(remote, 0, tmp, count, &d);
                s.recv(remote, 0, *rbuf, count, &d);
                s.fence();
            }
            bcast::bcast_binomial(&mut s, local, *rbuf, count, &d, 0);
            Ok(s)
        }
        Args::ReduceScatter {
            sbuf,
            rbuf,
            counts,
            dt,
            op,
        } => {
            no_in_place(*sbuf, "send buffer")?;
            let red = e.coll_reducer(*op, *dt)?;
            let d = red.dt.clone();
            let counts = counts_of(counts, n)?;
            let total: usize = counts.iter().sum();
            check_buf(*sbuf, total, &d, "send buffer")?;
            check_buf(*rbuf, counts[me], &d, "receive buffer")?;
            let (alg, _) = e.coll_choose::<ReduceAlg>(n, total * d.size);
            let mut s = bld.sched(e);
            s.red = Some(red);
            // Reduce our group's vectors at our leader, trade them with the other leader,
            // and scatter what came back by our counts.
            let (mine, theirs) = if me == 0 {
                (s.tmp(total), s.tmp(total))
            } else {
                (std::ptr::null_mut(), std::ptr::null_mut())
            };
            local_reduce(&mut s, local, alg, *sbuf, mine, total);
            let mut pieces = Vec::new();
            if me == 0 {
                s.send(remote, 0, mine, total, &d);
                s.recv(remote, 0, theirs, total, &d);
                s.fence();
                let mut off = 0isize;
                for &c in &counts {
                    pieces.push(Blk::new(theirs.wrapping_offset(off * d.extent()), c, &d));
                    off += c as isize;
                }
            }
            let own = Blk::new(*rbuf, counts[me], &d);
            super::gather::scatter_linear(&mut s, local, &pieces, Some(&own), 0);
            Ok(s)
        }
        Args::Scan { exclusive, .. } => err!(
            Comm,
            "{} is not defined on intercommunicators (use an intracommunicator)",
            if *exclusive { "MPI_Exscan" } else { "MPI_Scan" }
        ),
        Args::Gather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts,
            rdt,
            root,
            ..
        } => {
            let role = role(*root, m)?;
            let own = (*sbuf, *scount, *sdt);
            let (recv, own) = rooted_blocks(e, role, own, (*rbuf, rcounts, *rdt), m, true)?;
            let mut s = bld.sched(e);
            rooted_direct(&mut s, remote, role, &recv, own.as_ref(), true);
            Ok(s)
        }
        Args::Scatter {
            sbuf,
            scounts,
            sdt,
            rbuf,
            rcount,
            rdt,
            root,
            ..
        } => {
            let role = role(*root, m)?;
            let own = (*rbuf as *const u8, *rcount, *rdt);
            let (send, own) = rooted_blocks(e, role, own, (*sbuf, scounts, *sdt), m, false)?;
            let mut s = bld.sched(e);
            rooted_direct(&mut s, remote, role, &send, own.as_ref(), false);
            Ok(s)
        }
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => {
            no_in_place(*sbuf, "send buffer")?;
            let own = own_blk(e, *sbuf, *scount, *sdt, "send")?;
            let recv = blocks(e, *rbuf, rcounts, &Types::One(*rdt), m, "receive buffer")?;
            let mut s = bld.sched(e);
            // Start with the remote process of our own rank, so that not everyone sends to
            // remote rank 0 first.
            for k in 0..m {
                let i = (me + k) % m;
                s.recv(remote, i, recv[i].ptr, recv[i].count, &recv[i].dt);
                s.send(remote, i, own.ptr, own.count, &own.dt);
            }
            s.fence();
            Ok(s)
        }
        Args::Alltoall {
            sbuf,
            scounts,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => {
            no_in_place(*sbuf, "send buffer")?;
            let send = blocks(e, *sbuf, scounts, sdt, m, "send buffer")?;
            let recv = blocks(e, *rbuf, rcounts, rdt, m, "receive buffer")?;
            let mut s = bld.sched(e);
            for k in 0..m {
                let i = (me + k) % m;
                s.recv(remote, i, recv[i].ptr, recv[i].count, &recv[i].dt);
                s.send(remote, i, send[i].ptr, send[i].count, &send[i].dt);
            }
            s.fence();
            Ok(s)
        }
        Args::NeighborAllgather { .. } | Args::NeighborAlltoall { .. } => err!(
            Topology,
            "neighbourhood collectives need a communicator with a process topology, not an intercommunicator"
        ),
    }
}

/// A reduction inside the local group to member 0 (`rbuf` is only used there).
fn local_reduce(
    s: &mut Sched,
    t: &Team,
    alg: ReduceAlg,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
) {
    if alg == ReduceAlg::Linear {
        reduce::reduce_linear(s, t, sbuf, rbuf, count, 0);
    } else {
        reduce::reduce_binomial(s, t, sbuf, rbuf, count, 0);
    }
}

/// Per-process counts of a reduce-scatter (`n` of them), checked.
fn counts_of(counts: &Counts, n: usize) -> Result<Vec<usize>> {
    match counts {
        Counts::Uniform(c) => Ok(vec![count_of(*c, "recvcount")?; n]),
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
                .collect()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Neighbourhood collectives

/// Compile a neighbourhood collective (`a` is NeighborAllgather or NeighborAlltoall).
///
/// # Safety
/// As for `super::build`.
pub unsafe fn build_neighbor(
    e: &mut Engine,
    comm: CommId,
    a: &Args,
    bld: &Builder,
) -> Result<Sched> {
    let (srcs, dsts) = neighbors(e, comm)?;
    let (send, recv) = match a {
        Args::NeighborAllgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => {
            if in_place(*sbuf) {
                return err!(
                    Buffer,
                    "MPI_IN_PLACE is not allowed in neighbourhood collectives"
                );
            }
            let own = own_blk(e, *sbuf, *scount, *sdt, "send")?;
            let recv = blocks(
                e,
                *rbuf,
                rcounts,
                &Types::One(*rdt),
                srcs.len(),
                "receive buffer",
            )?;
            (vec![own; dsts.len()], recv)
        }
        Args::NeighborAlltoall {
            sbuf,
            scounts,
            sdt,
            rbuf,
            rcounts,
            rdt,
        } => {
            if in_place(*sbuf) {
                return err!(
                    Buffer,
                    "MPI_IN_PLACE is not allowed in neighbourhood collectives"
                );
            }
            let send = blocks(e, *sbuf, scounts, sdt, dsts.len(), "send buffer")?;
            let recv = blocks(e, *rbuf, rcounts, rdt, srcs.len(), "receive buffer")?;
            (send, recv)
        }
        _ => return err!(Intern, "not a neighbourhood collective"),
    };
    let mut s = bld.sched(e);
    let send: Vec<_> = dsts
        .iter()
        .zip(send)
        .map(|(&(p, off), b)| (p, b, off))
        .collect();
    let recv: Vec<_> = srcs
        .iter()
        .zip(recv)
        .map(|(&(p, off), b)| (p, b, off))
        .collect();
    neighbor_exchange(&mut s, &bld.views.local, &send, &recv);
    Ok(s)
}

/// The in-neighbours (sources) and out-neighbours (destinations) of a topology, as ranks
/// (None for MPI_PROC_NULL), with the sub-tags that pair sends and receives.
#[allow(clippy::type_complexity)]
pub fn neighbors(
    e: &Engine,
    comm: CommId,
) -> Result<(Vec<(Option<usize>, i32)>, Vec<(Option<usize>, i32)>)> {
    let c = e.comm(comm)?;
    if c.is_inter() {
        return err!(
            Topology,
            "neighbourhood collectives need a communicator with a process topology, not an intercommunicator"
        );
    }
    let cart = matches!(c.topo.as_deref(), Some(Topology::Cart { .. }));
    let (srcs, dsts) = e.topo_neighbors(comm)?;
    let rank = |r: i32| (r != PROC_NULL && r >= 0).then_some(r as usize);
    // Cartesian: the block sent in direction k (2d: -1, 2d+1: +1 along dimension d) arrives
    // at that neighbour as the block from its neighbour in the opposite direction, k ^ 1.
    let sources = srcs
        .iter()
        .enumerate()
        .map(|(k, &r)| (rank(r), if cart { (k as i32 ^ 1) & 63 } else { 0 }))
        .collect();
    let destinations = dsts
        .iter()
        .enumerate()
        .map(|(k, &r)| (rank(r), if cart { k as i32 & 63 } else { 0 }))
        .collect();
    Ok((sources, destinations))
}
