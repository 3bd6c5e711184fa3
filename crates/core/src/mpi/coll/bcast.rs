//! Barrier and broadcast algorithms (MPI-4.0 sections 6.3, 6.4).
//!
//! Each function emits its steps into a schedule over a [`Team`]; team member `t.me` is the
//! calling process. Broadcast data is (`buf`, `count` elements of `dt`); pieces are ranges of
//! elements, so any datatype can be split.

use std::sync::Arc;

use super::sched::{Sched, Team};
use super::{byte_type, Nodes};
use crate::mpi::datatype::Datatype;

/// Dissemination barrier: ceil(log2 n) rounds; in round k each process signals the one 2^k
/// ahead and waits for the one 2^k behind.
pub fn barrier_dissemination(s: &mut Sched, t: &Team) {
    let n = t.size();
    let me = t.me;
    let byte = byte_type();
    let mut k = 1;
    while k < n {
        s.send(t, (me + k) % n, std::ptr::null(), 0, &byte);
        s.recv(t, (me + n - k) % n, std::ptr::null_mut(), 0, &byte);
        s.fence();
        k *= 2;
    }
}

/// Linear barrier: everyone signals member 0, which then releases everyone.
pub fn barrier_linear(s: &mut Sched, t: &Team) {
    let n = t.size();
    let byte = byte_type();
    if t.me == 0 {
        for i in 1..n {
            s.recv(t, i, std::ptr::null_mut(), 0, &byte);
        }
        s.fence();
        for i in 1..n {
            s.send(t, i, std::ptr::null(), 0, &byte);
        }
    } else if n > 1 {
        s.send(t, 0, std::ptr::null(), 0, &byte);
        s.fence();
        s.recv(t, 0, std::ptr::null_mut(), 0, &byte);
    }
    s.fence();
}

/// Two-level barrier: each host's members check in with their leader, the leaders run a
/// dissemination barrier, and each leader releases its host.
pub fn barrier_two_level(s: &mut Sched, t: &Team, nodes: &Nodes) {
    let node = nodes.sub_team(t, nodes.my_node, None);
    let leaders = nodes.leaders_team(t, None);
    let byte = byte_type();
    let nn = node.size();
    if node.me == 0 {
        for i in 1..nn {
            s.recv(&node, i, std::ptr::null_mut(), 0, &byte);
        }
        s.fence();
        barrier_dissemination(s, &leaders);
        for i in 1..nn {
            s.send(&node, i, std::ptr::null(), 0, &byte);
        }
    } else {
        s.send(&node, 0, std::ptr::null(), 0, &byte);
        s.fence();
        s.recv(&node, 0, std::ptr::null_mut(), 0, &byte);
    }
    s.fence();
}

/// Element range `[lo, hi)` of piece `i` when `count` elements are cut into `n` pieces.
#[inline]
pub fn piece(count: usize, n: usize, i: usize) -> (usize, usize) {
    let lo = (count as u128 * i as u128 / n as u128) as usize;
    let hi = (count as u128 * (i + 1) as u128 / n as u128) as usize;
    (lo, hi)
}

#[inline]
fn at(buf: *mut u8, i: usize, dt: &Datatype) -> *mut u8 {
    buf.wrapping_offset(i as isize * dt.extent())
}

/// Binomial tree broadcast from member `root`.
pub fn bcast_binomial(
    s: &mut Sched,
    t: &Team,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
    root: usize,
) {
    let n = t.size();
    let v = (t.me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            s.recv(t, (v - mask + root) % n, buf, count, dt);
            s.fence();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if v + mask < n {
            s.send(t, (v + mask + root) % n, buf, count, dt);
        }
        mask >>= 1;
    }
    s.fence();
}

/// Linear broadcast: the root sends to everyone.
pub fn bcast_linear(
    s: &mut Sched,
    t: &Team,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
    root: usize,
) {
    if t.me == root {
        for i in (0..t.size()).filter(|&i| i != root) {
            s.send(t, i, buf, count, dt);
        }
    } else {
        s.recv(t, root, buf, count, dt);
    }
    s.fence();
}

/// Scatter the buffer in n pieces down a binomial tree, then a ring allgather of the pieces
/// (van de Geijn): about 2x the data volume of one copy, whatever the number of processes.
pub fn bcast_scatter_allgather(
    s: &mut Sched,
    t: &Team,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
    root: usize,
) {
    let n = t.size();
    if n == 1 {
        return;
    }
    let v = (t.me + n - root) % n;
    let real = |x: usize| (x + root) % n;
    // Elements of the pieces [a, b) of virtual ranks.
    let span = |a: usize, b: usize| -> (usize, usize) {
        let lo = piece(count, n, a).0;
        let hi = piece(count, n, b.min(n) - 1).1;
        (lo, hi - lo)
    };
    // Binomial scatter: virtual rank v receives the pieces of its subtree [v, v + lowbit(v)).
    let mut top = n.next_power_of_two();
    if v != 0 {
        let low = v & v.wrapping_neg();
        let (lo, len) = span(v, v + low);
        s.recv(t, real(v - low), at(buf, lo, dt), len, dt);
        s.fence();
        top = low;
    }
    let mut m = top >> 1;
    while m > 0 {
        if v + m < n {
            let (lo, len) = span(v + m, v + 2 * m);
            s.send(t, real(v + m), at(buf, lo, dt), len, dt);
        }
        m >>= 1;
    }
    s.fence();
    // Ring allgather of the pieces, in virtual ranks.
    let right = real((v + 1) % n);
    let left = real((v + n - 1) % n);
    for j in 0..n - 1 {
        let sp = (v + n - j) % n;
        let rp = (v + n - j - 1) % n;
        let (slo, shi) = piece(count, n, sp);
        let (rlo, rhi) = piece(count, n, rp);
        s.send(t, right, at(buf, slo, dt), shi - slo, dt);
        s.recv(t, left, at(buf, rlo, dt), rhi - rlo, dt);
        s.fence();
    }
}

/// Pipelined chain: the buffer travels root -> root+1 -> ... in pieces of `seg` elements, each
/// process forwarding piece k while it receives piece k+1.
pub fn bcast_chain(
    s: &mut Sched,
    t: &Team,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
    root: usize,
    seg: usize,
) {
    let n = t.size();
    if n == 1 {
        return;
    }
    let v = (t.me + n - root) % n;
    let seg = seg.max(1);
    let nseg = count.div_ceil(seg).max(1);
    let piece_k = |k: usize| -> (usize, usize) {
        let lo = k * seg;
        (lo, (count - lo.min(count)).min(seg))
    };
    let prev = (t.me + n - 1) % n;
    let next = (t.me + 1) % n;
    if v == 0 {
        for k in 0..nseg {
            let (lo, len) = piece_k(k);
            s.send(t, next, at(buf, lo, dt), len, dt);
            s.fence();
        }
        return;
    }
    for k in 0..=nseg {
        if k < nseg {
            let (lo, len) = piece_k(k);
            s.recv(t, prev, at(buf, lo, dt), len, dt);
        }
        if k >= 1 && v + 1 < n {
            let (lo, len) = piece_k(k - 1);
            s.send(t, next, at(buf, lo, dt), len, dt);
        }
        s.fence();
    }
}

/// Two-level broadcast: among the hosts' leaders (the root leads its own host), then within
/// each host from its leader.
pub fn bcast_two_level(
    s: &mut Sched,
    t: &Team,
    nodes: &Nodes,
    buf: *mut u8,
    count: usize,
    dt: &Arc<Datatype>,
    root: usize,
) {
    let root_node = nodes.node_of[root];
    let node = nodes.sub_team(t, nodes.my_node, Some(root));
    let leaders = nodes.leaders_team(t, Some(root));
    if node.me == 0 {
        bcast_binomial(s, &leaders, buf, count, dt, root_node);
    }
    bcast_binomial(s, &node, buf, count, dt, 0);
}
