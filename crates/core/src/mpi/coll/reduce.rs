//! Reduction algorithms (MPI-4.0 sections 6.9-6.11): reduce, allreduce, reduce-scatter, scan.
//!
//! Every reduction is written as `d = a op b` with `a` the contribution of the lower ranks,
//! so the non-commutative order the standard requires holds wherever an algorithm claims to
//! keep it (recursive doubling, binomial in rank order, scans); the others (Rabenseifner, ring,
//! two-level) are only chosen for commutative operations. `sbuf` is never written; with
//! MPI_IN_PLACE the caller passes `sbuf == rbuf`.

use super::bcast::{bcast_binomial, piece};
use super::sched::{Sched, Team};
use super::Nodes;

#[inline]
fn el(s: &Sched, p: *const u8, i: usize) -> *mut u8 {
    let ext = s.red.as_ref().expect("reduction schedule").dt.extent();
    (p as *mut u8).wrapping_offset(i as isize * ext)
}

fn red_dt(s: &Sched) -> std::sync::Arc<crate::mpi::datatype::Datatype> {
    s.red.as_ref().expect("reduction schedule").dt.clone()
}

/// Reduce to member `root` along a binomial tree. For a non-commutative operation the tree is
/// taken in rank order with its result at member 0, which forwards it to the root.
/// `rbuf` is only used at the root.
pub fn reduce_binomial(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    root: usize,
) {
    let n = t.size();
    let dt = red_dt(s);
    let commutative = s.red.as_ref().is_some_and(|r| r.commutative());
    let top = if commutative { root } else { 0 };
    let v = (t.me + n - top) % n;
    let real = |x: usize| (x + top) % n;
    // Children, lowest bit first (each covers the ranks just above what we hold).
    let mut children = Vec::new();
    let mut parent = None;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            parent = Some(v - mask);
            break;
        }
        if v + mask < n {
            children.push(v + mask);
        }
        mask <<= 1;
    }
    let final_here = t.me == root;
    let bufs: Vec<*mut u8> = children.iter().map(|_| s.tmp(count)).collect();
    for (c, b) in children.iter().zip(&bufs) {
        s.recv(t, real(*c), *b, count, &dt);
    }
    s.fence();
    let mut acc = sbuf;
    for (i, b) in bufs.iter().enumerate() {
        // acc covers ranks [v, v+mask), child i covers the next ones: acc op child.
        let d = if i + 1 == bufs.len() && final_here && parent.is_none() {
            rbuf
        } else {
            *b
        };
        s.reduce(acc, *b, d, count);
        acc = d;
    }
    match parent {
        Some(p) => {
            s.send(t, real(p), acc, count, &dt);
            s.fence();
        }
        None => {
            // Member `top`: the result is complete.
            if top == root {
                if !std::ptr::eq(acc, rbuf) {
                    s.copy_red(acc, rbuf, count);
                }
            } else {
                s.send(t, root, acc, count, &dt);
                s.fence();
            }
        }
    }
    if t.me == root && top != root {
        s.recv(t, top, rbuf, count, &dt);
        s.fence();
    }
}

/// Linear reduce: the root receives every contribution and combines them in rank order.
pub fn reduce_linear(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    root: usize,
) {
    let n = t.size();
    let dt = red_dt(s);
    if t.me != root {
        s.send(t, root, sbuf, count, &dt);
        s.fence();
        return;
    }
    let bufs: Vec<*mut u8> = (0..n)
        .map(|i| {
            if i == root {
                sbuf as *mut u8
            } else {
                let b = s.tmp(count);
                s.recv(t, i, b, count, &dt);
                b
            }
        })
        .collect();
    s.fence();
    fold_right(s, &bufs, sbuf, rbuf, count);
}

/// Combine contributions `bufs` (rank order) into `rbuf`, right to left so that user
/// functions always combine into their second argument; never writes `sbuf`.
fn fold_right(s: &mut Sched, bufs: &[*mut u8], sbuf: *const u8, rbuf: *mut u8, count: usize) {
    let n = bufs.len();
    let mut acc = bufs[n - 1] as *const u8;
    for i in (0..n - 1).rev() {
        let d = if i == 0 {
            rbuf
        } else if acc != sbuf {
            acc as *mut u8
        } else {
            s.tmp(count)
        };
        s.reduce(bufs[i], acc, d, count);
        acc = d;
    }
    if !std::ptr::eq(acc, rbuf) {
        s.copy_red(acc, rbuf, count);
    }
}

/// Allgather the contributions, then every process reduces all of them in rank order: one
/// round of messages, which matters when processes share cores.
pub fn allreduce_allgather(s: &mut Sched, t: &Team, sbuf: *const u8, rbuf: *mut u8, count: usize) {
    let n = t.size();
    let dt = red_dt(s);
    // n - 1 receives, sends and reductions, and the copies around them.
    s.reserve(3 * n + 2);
    let bufs: Vec<*mut u8> = (0..n)
        .map(|i| {
            if i == t.me {
                sbuf as *mut u8
            } else {
                let b = s.tmp(count);
                s.recv(t, i, b, count, &dt);
                b
            }
        })
        .collect();
    for i in (0..n).filter(|&i| i != t.me) {
        s.send(t, i, sbuf, count, &dt);
    }
    s.fence();
    fold_right(s, &bufs, sbuf, rbuf, count);
}

/// Two-level reduce (commutative): reduce within each host to its leader, then among the
/// leaders to the root (which leads its own host).
pub fn reduce_two_level(
    s: &mut Sched,
    t: &Team,
    nodes: &Nodes,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    root: usize,
) {
    let node = nodes.sub_team(t, nodes.my_node, Some(root));
    let leaders = nodes.leaders_team(t, Some(root));
    if node.me == 0 {
        let mid = if t.me == root { rbuf } else { s.tmp(count) };
        reduce_binomial(s, &node, sbuf, mid, count, 0);
        reduce_binomial(s, &leaders, mid, rbuf, count, nodes.node_of[root]);
    } else {
        reduce_binomial(s, &node, sbuf, std::ptr::null_mut(), count, 0);
    }
}

/// Fold the processes beyond the largest power of two into their neighbours: with
/// `rem = n - pof2`, ranks below `2 rem` pair up (even sends to odd). Returns our rank among
/// the `pof2` survivors (None for those that sent) and where our data is now.
fn fold_in(
    s: &mut Sched,
    t: &Team,
    acc: *const u8,
    out: *mut u8,
    count: usize,
) -> (Option<usize>, *const u8) {
    let n = t.size();
    let pof2 = 1 << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    let me = t.me;
    let dt = red_dt(s);
    if me < 2 * rem {
        if me.is_multiple_of(2) {
            s.send(t, me + 1, acc, count, &dt);
            s.fence();
            (None, acc)
        } else {
            let tmp = s.tmp(count);
            s.recv(t, me - 1, tmp, count, &dt);
            s.fence();
            s.reduce(tmp, acc, out, count);
            (Some(me / 2), out)
        }
    } else {
        (Some(me - rem), acc)
    }
}

/// The real rank of survivor `r` after [`fold_in`].
fn survivor(n: usize, r: usize) -> usize {
    let pof2 = 1 << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    if r < rem {
        2 * r + 1
    } else {
        r + rem
    }
}

/// Give the folded-out processes the result.
fn fold_out(s: &mut Sched, t: &Team, rbuf: *mut u8, count: usize) {
    let n = t.size();
    let pof2 = 1 << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    let dt = red_dt(s);
    if t.me < 2 * rem {
        if t.me % 2 == 1 {
            s.send(t, t.me - 1, rbuf, count, &dt);
        } else {
            s.recv(t, t.me + 1, rbuf, count, &dt);
        }
        s.fence();
    }
}

/// Recursive doubling allreduce: log2 n exchanges of the whole buffer. Keeps the operation's
/// order; best for small buffers.
pub fn allreduce_recursive_doubling(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
) {
    let n = t.size();
    let dt = red_dt(s);
    let mut acc = sbuf;
    if s.red.as_ref().is_some_and(|r| r.is_user()) && !std::ptr::eq(acc, rbuf) && n > 1 {
        // User functions combine in place: work in rbuf from the start.
        s.copy_red(sbuf, rbuf, count);
        acc = rbuf;
    }
    let (newrank, a) = fold_in(s, t, acc, rbuf, count);
    acc = a;
    if let Some(nr) = newrank {
        let pof2 = 1 << (usize::BITS - 1 - n.leading_zeros());
        let tmp = if pof2 > 1 { s.tmp(count) } else { rbuf };
        let mut mask = 1;
        while mask < pof2 {
            let dst = survivor(n, nr ^ mask);
            s.send(t, dst, acc, count, &dt);
            s.recv(t, dst, tmp, count, &dt);
            s.fence();
            if dst < t.me {
                s.reduce(tmp, acc, rbuf, count);
            } else {
                s.reduce(acc, tmp, rbuf, count);
            }
            acc = rbuf;
            mask <<= 1;
        }
    }
    if newrank.is_some() && !std::ptr::eq(acc, rbuf) {
        s.copy_red(acc, rbuf, count);
    }
    fold_out(s, t, rbuf, count);
}

/// Rabenseifner's allreduce (commutative): reduce-scatter by recursive halving, then
/// allgather by recursive doubling; moves about 2x the buffer whatever the process count.
pub fn allreduce_rabenseifner(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
) {
    let n = t.size();
    let pof2: usize = 1 << (usize::BITS - 1 - n.leading_zeros());
    if count < pof2 || n == 1 {
        return allreduce_recursive_doubling(s, t, sbuf, rbuf, count);
    }
    let dt = red_dt(s);
    let mut acc = sbuf;
    if s.red.as_ref().is_some_and(|r| r.is_user()) && !std::ptr::eq(acc, rbuf) {
        s.copy_red(sbuf, rbuf, count);
        acc = rbuf;
    }
    let (newrank, a) = fold_in(s, t, acc, rbuf, count);
    acc = a;
    if let Some(nr) = newrank {
        // Blocks of elements, one per survivor.
        let blk = |b: usize| piece(count, pof2, b).0;
        let tmp = s.tmp(count.div_ceil(2));
        // Halving: keep the half of the current block range that our bit selects.
        let (mut lo, mut hi) = (0usize, pof2);
        let mut d = pof2 / 2;
        while d >= 1 {
            let partner = survivor(n, nr ^ d);
            let mid = (lo + hi) / 2;
            let (keep, give) = if nr & d == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let (k0, k1) = (blk(keep.0), blk(keep.1));
            let (g0, g1) = (blk(give.0), blk(give.1));
            s.send(t, partner, el(s, acc, g0), g1 - g0, &dt);
            s.recv(t, partner, tmp, k1 - k0, &dt);
            s.fence();
            s.reduce(tmp, el(s, acc, k0), el(s, rbuf, k0), k1 - k0);
            acc = rbuf;
            (lo, hi) = keep;
            d /= 2;
        }
        // Doubling: exchange ranges with partners at growing distances.
        let mut d = 1;
        while d < pof2 {
            let partner = survivor(n, nr ^ d);
            let size = hi - lo;
            let (plo, phi) = if nr & d == 0 {
                (hi, hi + size)
            } else {
                (lo - size, lo)
            };
            let (m0, m1) = (blk(lo), blk(hi));
            let (p0, p1) = (blk(plo), blk(phi));
            s.send(t, partner, el(s, rbuf, m0), m1 - m0, &dt);
            s.recv(t, partner, el(s, rbuf, p0), p1 - p0, &dt);
            s.fence();
            lo = lo.min(plo);
            hi = hi.max(phi);
            d *= 2;
        }
    }
    fold_out(s, t, rbuf, count);
}

/// Ring allreduce (commutative): a ring reduce-scatter of n pieces, then a ring allgather;
/// 2(n-1) steps each moving 1/n of the buffer.
pub fn allreduce_ring(s: &mut Sched, t: &Team, sbuf: *const u8, rbuf: *mut u8, count: usize) {
    let n = t.size();
    if count < n || n == 1 {
        return allreduce_recursive_doubling(s, t, sbuf, rbuf, count);
    }
    let dt = red_dt(s);
    let me = t.me;
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let tmp = s.tmp(count.div_ceil(n));
    // Reduce-scatter: at step j we send piece me-j (ours alone at j = 0, then the partial sum
    // received at step j-1) and receive piece me-j-1; we end holding piece me+1 complete.
    for j in 0..n - 1 {
        let sp = (me + n - j) % n;
        let rp = (me + 2 * n - j - 1) % n;
        let (slo, shi) = piece(count, n, sp);
        let (rlo, rhi) = piece(count, n, rp);
        let src = if j == 0 { sbuf } else { rbuf as *const u8 };
        s.send(t, right, el(s, src, slo), shi - slo, &dt);
        s.recv(t, left, tmp, rhi - rlo, &dt);
        s.fence();
        s.reduce(tmp, el(s, sbuf, rlo), el(s, rbuf, rlo), rhi - rlo);
    }
    // Allgather the complete pieces around the ring.
    for j in 0..n - 1 {
        let sp = (me + 1 + n - j) % n;
        let rp = (me + n - j) % n;
        let (slo, shi) = piece(count, n, sp);
        let (rlo, rhi) = piece(count, n, rp);
        s.send(t, right, el(s, rbuf, slo), shi - slo, &dt);
        s.recv(t, left, el(s, rbuf, rlo), rhi - rlo, &dt);
        s.fence();
    }
}

/// Reduce to member 0, then broadcast (keeps the operation's order).
pub fn allreduce_reduce_bcast(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
) {
    let dt = red_dt(s);
    let rb = if t.me == 0 {
        rbuf
    } else {
        std::ptr::null_mut()
    };
    reduce_binomial(s, t, sbuf, rb, count, 0);
    bcast_binomial(s, t, rbuf, count, &dt, 0);
}

/// Two-level allreduce (commutative): reduce within each host to its leader, allreduce among
/// the leaders, broadcast within each host.
pub fn allreduce_two_level(
    s: &mut Sched,
    t: &Team,
    nodes: &Nodes,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    large: bool,
) {
    let dt = red_dt(s);
    let node = nodes.sub_team(t, nodes.my_node, None);
    let leaders = nodes.leaders_team(t, None);
    reduce_binomial(s, &node, sbuf, rbuf, count, 0);
    if node.me == 0 && leaders.size() > 1 {
        if large {
            allreduce_rabenseifner(s, &leaders, rbuf, rbuf, count);
        } else {
            allreduce_recursive_doubling(s, &leaders, rbuf, rbuf, count);
        }
    }
    bcast_binomial(s, &node, rbuf, count, &dt, 0);
}

/// Reduce-scatter by a reduction to member 0 and a scatter of the pieces (keeps the order).
/// `counts[i]` elements go to member i; `input` holds their sum.
pub fn reduce_scatter_via_reduce(
    s: &mut Sched,
    t: &Team,
    input: *const u8,
    rbuf: *mut u8,
    counts: &[usize],
) {
    let dt = red_dt(s);
    let total: usize = counts.iter().sum();
    let full = if t.me == 0 {
        s.tmp(total)
    } else {
        std::ptr::null_mut()
    };
    reduce_binomial(s, t, input, full, total, 0);
    if t.me == 0 {
        let mut off = 0;
        for (i, &c) in counts.iter().enumerate() {
            if i == 0 {
                s.copy_red(full, rbuf, c);
            } else {
                s.send(t, i, el(s, full, off), c, &dt);
            }
            off += c;
        }
    } else {
        s.recv(t, 0, rbuf, counts[t.me], &dt);
    }
    s.fence();
}

/// Ring reduce-scatter (commutative): n-1 steps; each passes on a partial result for one
/// piece and adds its own contribution to the piece it receives.
pub fn reduce_scatter_ring(
    s: &mut Sched,
    t: &Team,
    input: *const u8,
    rbuf: *mut u8,
    counts: &[usize],
) {
    let n = t.size();
    let dt = red_dt(s);
    let me = t.me;
    let mut displs = Vec::with_capacity(n);
    let mut off = 0;
    for &c in counts {
        displs.push(off);
        off += c;
    }
    if n == 1 {
        s.copy_red(input, rbuf, counts[0]);
        return;
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    let recv = s.tmp(max);
    let acc = s.tmp(max);
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    // Step j sends the partial result for piece me-j-1 and receives the one for me-j-2; the
    // last piece received is our own.
    for j in 0..n - 1 {
        let sp = (me + 2 * n - j - 1) % n;
        let rp = (me + 2 * n - j - 2) % n;
        let src = if j == 0 {
            el(s, input, displs[sp])
        } else {
            acc
        };
        s.send(t, right, src, counts[sp], &dt);
        s.recv(t, left, recv, counts[rp], &dt);
        s.fence();
        let d = if j == n - 2 { rbuf } else { acc };
        s.reduce(recv, el(s, input, displs[rp]), d, counts[rp]);
    }
}

/// Scan by recursive doubling (keeps the order), inclusive or exclusive; with `exclusive`,
/// rank 0's rbuf is not touched.
pub fn scan_recursive_doubling(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    exclusive: bool,
) {
    let n = t.size();
    let dt = red_dt(s);
    let commutative = s.red.as_ref().is_some_and(|r| r.commutative());
    let me = t.me;
    // Whether rbuf holds a partial result yet: our own contribution when inclusive; when
    // exclusive, nothing until the first lower rank's prefix arrives.
    let mut have = !exclusive;
    if have {
        s.copy_red(sbuf, rbuf, count);
    }
    if n == 1 {
        return;
    }
    let mut partial = s.tmp(count);
    let mut tmp = s.tmp(count);
    s.copy_red(sbuf, partial, count);
    let mut mask = 1;
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            s.send(t, dst, partial, count, &dt);
            s.recv(t, dst, tmp, count, &dt);
            s.fence();
            if dst < me {
                if have {
                    s.reduce(tmp, rbuf, rbuf, count);
                } else {
                    s.copy_red(tmp, rbuf, count);
                    have = true;
                }
                s.reduce(tmp, partial, partial, count);
            } else if commutative {
                s.reduce(tmp, partial, partial, count);
            } else {
                s.reduce(partial, tmp, tmp, count);
                std::mem::swap(&mut partial, &mut tmp);
            }
        }
        mask <<= 1;
    }
}

/// Linear scan: member i receives the prefix from i-1, combines, passes it on (inclusive or
/// exclusive).
pub fn scan_linear(
    s: &mut Sched,
    t: &Team,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: usize,
    exclusive: bool,
) {
    let n = t.size();
    let dt = red_dt(s);
    let me = t.me;
    if me == 0 {
        if exclusive {
            if n > 1 {
                s.send(t, 1, sbuf, count, &dt);
            }
        } else {
            s.copy_red(sbuf, rbuf, count);
            if n > 1 {
                s.send(t, 1, rbuf, count, &dt);
            }
        }
        s.fence();
        return;
    }
    let prefix = s.tmp(count);
    s.recv(t, me - 1, prefix, count, &dt);
    s.fence();
    if exclusive {
        if me + 1 < n {
            let out = s.tmp(count);
            s.reduce(prefix, sbuf, out, count);
            s.copy_red(prefix, rbuf, count);
            s.send(t, me + 1, out, count, &dt);
        } else {
            s.copy_red(prefix, rbuf, count);
        }
    } else {
        s.reduce(prefix, sbuf, rbuf, count);
        if me + 1 < n {
            s.send(t, me + 1, rbuf, count, &dt);
        }
    }
    s.fence();
}
