//! Data movement algorithms (MPI-4.0 sections 6.5-6.8): gather, scatter, allgather, alltoall,
//! their v and w forms, and the neighbourhood collectives (section 8.6).
//!
//! A process's blocks are described by [`Blk`]s (address, count, datatype), so the uniform,
//! v and w forms share one implementation; algorithms that need equal blocks (binomial trees,
//! recursive doubling, Bruck) move packed bytes, whose length is the same on every process by
//! MPI's type-matching rule.

use std::sync::Arc;

use super::byte_type;
use super::sched::{Sched, Team};
use crate::mpi::datatype::Datatype;

/// One block of a collective buffer.
#[derive(Debug, Clone)]
pub struct Blk {
    pub ptr: *mut u8,
    pub count: usize,
    pub dt: Arc<Datatype>,
}

impl Blk {
    pub fn new(ptr: *const u8, count: usize, dt: &Arc<Datatype>) -> Blk {
        Blk {
            ptr: ptr as *mut u8,
            count,
            dt: dt.clone(),
        }
    }

    pub fn bytes(&self) -> usize {
        self.count * self.dt.size
    }
}

/// `n` blocks of `count` elements each, one after the other.
pub fn uniform(buf: *const u8, count: usize, dt: &Arc<Datatype>, n: usize) -> Vec<Blk> {
    let step = count as isize * dt.extent();
    (0..n)
        .map(|i| Blk::new(buf.wrapping_offset(i as isize * step), count, dt))
        .collect()
}

fn send_blk(s: &mut Sched, t: &Team, to: usize, b: &Blk) {
    s.send(t, to, b.ptr, b.count, &b.dt);
}

fn recv_blk(s: &mut Sched, t: &Team, from: usize, b: &Blk) {
    s.recv(t, from, b.ptr, b.count, &b.dt);
}

fn copy_blk(s: &mut Sched, from: &Blk, to: &Blk) {
    s.copy(from.ptr, from.count, &from.dt, to.ptr, to.count, &to.dt);
}

/// A block copy that runs while the current round's messages travel ([`Sched::copy_beside`]).
fn copy_beside(s: &mut Sched, from: &Blk, to: &Blk) {
    s.copy_beside(from.ptr, from.count, &from.dt, to.ptr, to.count, &to.dt);
}

/// Size of the binomial subtree of virtual rank `v` among `n`.
fn subtree(v: usize, n: usize) -> usize {
    if v == 0 {
        n
    } else {
        (v & v.wrapping_neg()).min(n - v)
    }
}

// ---------------------------------------------------------------------------------------------
// Gather and scatter

/// A process's place in the binomial tree of gathers and scatters rooted at `root`, shared by
/// the two mirror-image algorithms: its virtual rank (distance from the root), the size of its
/// subtree, and its lowest set bit (the distance to its parent; above n at the root).
struct Tree {
    n: usize,
    v: usize,
    sub: usize,
    low: usize,
}

impl Tree {
    fn new(t: &Team, root: usize) -> Tree {
        let n = t.size();
        let v = (t.me + n - root) % n;
        Tree {
            n,
            v,
            sub: subtree(v, n),
            low: if v == 0 {
                n.next_power_of_two()
            } else {
                v & v.wrapping_neg()
            },
        }
    }
}

/// Linear gather: the root receives every block. `own` is None with MPI_IN_PLACE.
pub fn gather_linear(s: &mut Sched, t: &Team, own: Option<&Blk>, recv: &[Blk], root: usize) {
    rooted_linear(s, t, own, recv, root, true);
}

/// Linear scatter: the root sends every block. `own` (the root's receive block) is None with
/// MPI_IN_PLACE.
pub fn scatter_linear(s: &mut Sched, t: &Team, send: &[Blk], own: Option<&Blk>, root: usize) {
    rooted_linear(s, t, own, send, root, false);
}

/// The linear gather (`gather`) and its mirror image, the linear scatter: the root moves
/// `many[i]` from or to every process i, which moves its `own` block.
fn rooted_linear(
    s: &mut Sched,
    t: &Team,
    own: Option<&Blk>,
    many: &[Blk],
    root: usize,
    gather: bool,
) {
    if t.me == root {
        for (i, b) in many.iter().enumerate().filter(|&(i, _)| i != root) {
            if gather {
                recv_blk(s, t, i, b);
            } else {
                send_blk(s, t, i, b);
            }
        }
        // The own block moves while the others travel (it shares no buffer with them).
        let (from, to) = match (own, gather) {
            (Some(o), true) => (o, &many[root]),
            (Some(o), false) => (&many[root], o),
            (None, _) => {
                s.fence();
                return;
            }
        };
        copy_beside(s, from, to);
    } else if let Some(o) = own {
        if gather {
            send_blk(s, t, root, o);
        } else {
            recv_blk(s, t, root, o);
        }
    }
    s.fence();
}

/// Binomial gather of equal blocks of `blk` packed bytes: each process forwards its subtree's
/// blocks, packed in virtual-rank order. `recv` is only used at the root.
pub fn gather_binomial(
    s: &mut Sched,
    t: &Team,
    own: Option<&Blk>,
    recv: &[Blk],
    blk: usize,
    root: usize,
) {
    let Tree { n, v, sub, low } = Tree::new(t, root);
    let real = |x: usize| (x + root) % n;
    let byte = byte_type();
    if sub == 1 && v != 0 {
        // A leaf sends its own block straight from the user's buffer.
        let o = own.expect("non-root processes send");
        send_blk(s, t, real(v - low), o);
        s.fence();
        return;
    }
    let tbuf = s.alloc(sub * blk);
    if v != 0 {
        let o = own.expect("non-root processes send");
        s.copy(o.ptr, o.count, &o.dt, tbuf, blk, &byte);
    }
    let mut m = 1;
    while m < low {
        if v + m < n {
            let c = v + m;
            s.recv(
                t,
                real(c),
                tbuf.wrapping_add(m * blk),
                subtree(c, n) * blk,
                &byte,
            );
        }
        m <<= 1;
    }
    s.fence();
    if v != 0 {
        s.send(t, real(v - low), tbuf, sub * blk, &byte);
        s.fence();
        return;
    }
    // The root unpacks the blocks in rank order (its own is already in place).
    for u in 0..n {
        let r = real(u);
        if u == 0 {
            continue;
        }
        let b = &recv[r];
        s.copy(
            tbuf.wrapping_add(u * blk),
            blk,
            &byte,
            b.ptr,
            b.count,
            &b.dt,
        );
    }
    if let Some(o) = own {
        copy_blk(s, o, &recv[root]);
    }
}

/// Binomial scatter of equal blocks of `blk` packed bytes (the mirror of [`gather_binomial`]).
pub fn scatter_binomial(
    s: &mut Sched,
    t: &Team,
    send: &[Blk],
    own: Option<&Blk>,
    blk: usize,
    root: usize,
) {
    let Tree { n, v, sub, low } = Tree::new(t, root);
    let real = |x: usize| (x + root) % n;
    let byte = byte_type();
    if sub == 1 && v != 0 {
        let o = own.expect("non-root processes receive");
        recv_blk(s, t, real(v - low), o);
        s.fence();
        return;
    }
    let tbuf = s.alloc(sub * blk);
    if v == 0 {
        for u in 1..n {
            let b = &send[real(u)];
            s.copy(
                b.ptr,
                b.count,
                &b.dt,
                tbuf.wrapping_add(u * blk),
                blk,
                &byte,
            );
        }
    } else {
        s.recv(t, real(v - low), tbuf, sub * blk, &byte);
        s.fence();
    }
    let mut m = low >> 1;
    while m >= 1 {
        if v + m < n {
            let c = v + m;
            s.send(
                t,
                real(c),
                tbuf.wrapping_add(m * blk),
                subtree(c, n) * blk,
                &byte,
            );
        }
        m >>= 1;
    }
    // The own block moves beside the sends (they only read the same buffers).
    if let Some(o) = own {
        if v == 0 {
            copy_beside(s, &send[root], o);
        } else {
            s.copy_beside(tbuf, blk, &byte, o.ptr, o.count, &o.dt);
        }
    }
    s.fence();
}

// ---------------------------------------------------------------------------------------------
// Allgather

/// Ring allgather (any block sizes): n-1 steps passing blocks to the right.
/// The first step sends the process's own block from where it is, and copies it into place
/// beside that step's messages.
pub fn allgather_ring(s: &mut Sched, t: &Team, own: Option<&Blk>, recv: &[Blk]) {
    let n = t.size();
    let me = t.me;
    if n == 1 {
        if let Some(o) = own {
            copy_blk(s, o, &recv[me]);
        }
        return;
    }
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for j in 0..n - 1 {
        match own.filter(|_| j == 0) {
            Some(o) => {
                send_blk(s, t, right, o);
                recv_blk(s, t, left, &recv[left]);
                copy_beside(s, o, &recv[me]);
            }
            None => {
                send_blk(s, t, right, &recv[(me + n - j) % n]);
                recv_blk(s, t, left, &recv[(me + 2 * n - j - 1) % n]);
            }
        }
        s.fence();
    }
}

/// Linear allgather: every block to every process at once.
/// The own block goes out from where it is and is copied into place beside the messages.
pub fn allgather_linear(s: &mut Sched, t: &Team, own: Option<&Blk>, recv: &[Blk]) {
    let n = t.size();
    let me = t.me;
    let mine = own.unwrap_or(&recv[me]);
    for i in (0..n).filter(|&i| i != me) {
        send_blk(s, t, i, mine);
        recv_blk(s, t, i, &recv[i]);
    }
    if let Some(o) = own {
        copy_beside(s, o, &recv[me]);
    }
    s.fence();
}

/// Recursive doubling allgather for a power-of-two size and uniform blocks laid out one after
/// the other in `rbuf`.
pub fn allgather_recursive_doubling(
    s: &mut Sched,
    t: &Team,
    own: Option<&Blk>,
    rbuf: *mut u8,
    rcount: usize,
    rdt: &Arc<Datatype>,
) {
    let n = t.size();
    let me = t.me;
    let recv = uniform(rbuf, rcount, rdt, n);
    if let Some(o) = own {
        copy_blk(s, o, &recv[me]);
    }
    let mut d = 1;
    while d < n {
        let partner = me ^ d;
        let mine = me & !(d - 1);
        let theirs = partner & !(d - 1);
        s.send(t, partner, recv[mine].ptr, d * rcount, rdt);
        s.recv(t, partner, recv[theirs].ptr, d * rcount, rdt);
        s.fence();
        d *= 2;
    }
}

/// Bruck allgather for uniform blocks: ceil(log2 n) steps on a rotated copy, then one
/// rotation back.
pub fn allgather_bruck(
    s: &mut Sched,
    t: &Team,
    own: Option<&Blk>,
    rbuf: *mut u8,
    rcount: usize,
    rdt: &Arc<Datatype>,
) {
    let n = t.size();
    let me = t.me;
    let recv = uniform(rbuf, rcount, rdt, n);
    let tmp = s.tmp_of(n * rcount, rdt);
    let tblk = uniform(tmp, rcount, rdt, n);
    match own {
        Some(o) => copy_blk(s, o, &tblk[0]),
        None => copy_blk(s, &recv[me], &tblk[0]),
    }
    let mut d = 1;
    while d < n {
        let k = d.min(n - d);
        s.send(t, (me + n - d) % n, tblk[0].ptr, k * rcount, rdt);
        s.recv(t, (me + d) % n, tblk[d].ptr, k * rcount, rdt);
        s.fence();
        d *= 2;
    }
    // tmp block i holds the block of rank me+i.
    for (i, b) in tblk.iter().enumerate() {
        let r = (me + i) % n;
        if r == me && own.is_none() {
            continue;
        }
        copy_blk(s, b, &recv[r]);
    }
}

// ---------------------------------------------------------------------------------------------
// Alltoall

/// With MPI_IN_PLACE the outgoing blocks are the receive blocks as they were: copy them aside.
pub fn in_place_sends(s: &mut Sched, recv: &[Blk], me: usize) -> Vec<Blk> {
    recv.iter()
        .enumerate()
        .map(|(i, b)| {
            if i == me {
                b.clone()
            } else {
                let p = s.tmp_of(b.count, &b.dt);
                let c = Blk::new(p, b.count, &b.dt);
                copy_blk(s, b, &c);
                c
            }
        })
        .collect()
}

/// Alltoall by shifts: for k = 1..n, receive from me-k and send to me+k. Pairwise: each shift
/// completes before the next starts; linear: every message is posted at once.
pub fn alltoall_shifts(
    s: &mut Sched,
    t: &Team,
    send: &[Blk],
    recv: &[Blk],
    in_place: bool,
    pairwise: bool,
) {
    let n = t.size();
    let me = t.me;
    if n == 1 && !in_place {
        copy_blk(s, &send[me], &recv[me]);
    }
    // The own block is copied beside the first shift's messages.
    for k in 1..n {
        let to = (me + k) % n;
        let from = (me + n - k) % n;
        recv_blk(s, t, from, &recv[from]);
        send_blk(s, t, to, &send[to]);
        if k == 1 && !in_place {
            copy_beside(s, &send[me], &recv[me]);
        }
        if pairwise {
            s.fence();
        }
    }
    if !pairwise {
        s.fence();
    }
}

/// Bruck's alltoall: log2(n) rounds, in round d every block whose slot has bit d set moves d
/// ranks on. The blocks of a round lie in runs of d slots, so a run is one copy; a round of
/// one run (d >= n/2) sends straight from the slots; and the first rotation is two copies when
/// the send blocks lie one after another (a contiguous datatype). At 16 ranks that is 46 local
/// copies instead of 96 (each a schedule step).
pub fn alltoall_bruck(s: &mut Sched, t: &Team, send: &[Blk], recv: &[Blk], blk: usize) {
    let n = t.size();
    let me = t.me;
    let byte = byte_type();
    // Rotate: slot i holds the block for rank me+i.
    let tmp = s.alloc(n * blk);
    let packed = send.iter().enumerate().all(|(k, b)| {
        b.bytes() == blk
            && b.dt.contiguous_span(b.count) == Some(0)
            && std::ptr::eq(b.ptr, send[0].ptr.wrapping_add(k * blk))
    });
    if packed {
        let (hi, lo) = ((n - me) * blk, me * blk);
        s.copy(send[me].ptr, hi, &byte, tmp, hi, &byte);
        if lo > 0 {
            s.copy(send[0].ptr, lo, &byte, tmp.wrapping_add(hi), lo, &byte);
        }
    } else {
        for i in 0..n {
            let b = &send[(me + i) % n];
            s.copy(b.ptr, b.count, &b.dt, tmp.wrapping_add(i * blk), blk, &byte);
        }
    }
    let pack = s.alloc(n.div_ceil(2) * blk);
    let unpack = s.alloc(n.div_ceil(2) * blk);
    // The runs of round d: slots [i, i + len) for i = d, 3d, 5d, ...
    let runs = |d: usize| (d..n).step_by(2 * d).map(move |i| (i, d.min(n - i)));
    let mut d = 1;
    while d < n {
        let total: usize = runs(d).map(|(_, len)| len).sum::<usize>() * blk;
        let from = if 2 * d >= n {
            // One run: send it from the slots.
            tmp.wrapping_add(d * blk)
        } else {
            let mut at = 0;
            for (i, len) in runs(d) {
                let b = len * blk;
                s.copy(
                    tmp.wrapping_add(i * blk),
                    b,
                    &byte,
                    pack.wrapping_add(at),
                    b,
                    &byte,
                );
                at += b;
            }
            pack
        };
        s.send(t, (me + d) % n, from, total, &byte);
        s.recv(t, (me + n - d) % n, unpack, total, &byte);
        s.fence();
        let mut at = 0;
        for (i, len) in runs(d) {
            let b = len * blk;
            s.copy(
                unpack.wrapping_add(at),
                b,
                &byte,
                tmp.wrapping_add(i * blk),
                b,
                &byte,
            );
            at += b;
        }
        d *= 2;
    }
    // Slot i now holds the block from rank me-i.
    for i in 0..n {
        let r = (me + n - i) % n;
        let b = &recv[r];
        s.copy(tmp.wrapping_add(i * blk), blk, &byte, b.ptr, b.count, &b.dt);
    }
}

// ---------------------------------------------------------------------------------------------
// Neighbourhood collectives

/// Neighbourhood exchange: block `send[i]` to out-neighbour `dests[i]`, `recv[j]` from
/// in-neighbour `sources[j]`; MPI_PROC_NULL neighbours (None) are skipped. `tags` gives, per
/// send and per receive, a tag offset that pairs them when the same two processes are
/// neighbours in several ways (Cartesian topologies on short periodic dimensions).
pub fn neighbor_exchange(
    s: &mut Sched,
    t: &Team,
    send: &[(Option<usize>, Blk, i32)],
    recv: &[(Option<usize>, Blk, i32)],
) {
    let base = s.tag;
    for (src, b, off) in recv {
        if let Some(r) = src {
            s.tag = super::subtag(base, *off);
            recv_blk(s, t, *r, b);
        }
    }
    for (dst, b, off) in send {
        if let Some(r) = dst {
            s.tag = super::subtag(base, *off);
            send_blk(s, t, *r, b);
        }
    }
    s.tag = base;
    s.fence();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{CommId, ContextId};
    use crate::mpi::coll::byte_type;
    use crate::transport::Gpid;

    /// The own block of a linear or binomial scatter, a linear gather, an alltoall by shifts
    /// and an allgather moves beside the first round's messages, not in a round after them.
    #[test]
    fn own_blocks_move_beside_the_first_messages() {
        let byte = byte_type();
        let n = 3;
        let t = Team {
            members: (0..n).map(|i| (Gpid::new(i as u32), i as i32)).collect(),
            me: 0,
            bit: 0,
        };
        let mut a = vec![0u8; 8 * n];
        let mut b = vec![0u8; 8 * n];
        let blks = |p: &mut Vec<u8>| uniform(p.as_mut_ptr(), 8, &byte, n);
        let (sa, rb) = (blks(&mut a), blks(&mut b));
        let mut own = [0u8; 8];
        let o = Blk::new(own.as_mut_ptr(), 8, &byte);
        let sched = || Sched::new(CommId::new(0), ContextId::new(0), 0, 0);
        let mut s = sched();
        rooted_linear(&mut s, &t, Some(&o), &sa, 0, false);
        assert_eq!(s.shape(), ["SSC"]);
        let mut s = sched();
        rooted_linear(&mut s, &t, Some(&o), &rb, 0, true);
        assert_eq!(s.shape(), ["RRC"]);
        let mut s = sched();
        rooted_linear(&mut s, &t, None, &rb, 0, true);
        assert_eq!(s.shape(), ["RR"]);
        let mut s = sched();
        alltoall_shifts(&mut s, &t, &sa, &rb, false, true);
        assert_eq!(s.shape(), ["RSC", "RS"]);
        let mut s = sched();
        alltoall_shifts(&mut s, &t, &sa, &rb, false, false);
        assert_eq!(s.shape(), ["RSCRS"]);
        let mut s = sched();
        allgather_ring(&mut s, &t, Some(&o), &rb);
        assert_eq!(s.shape(), ["SRC", "SR"]);
        let mut s = sched();
        allgather_linear(&mut s, &t, Some(&o), &rb);
        assert_eq!(s.shape(), ["SRSRC"]);
        // The binomial scatter's root packs the others' blocks first, then sends them.
        let mut s = sched();
        scatter_binomial(&mut s, &t, &sa, Some(&o), 8, 0);
        assert_eq!(s.shape(), ["CCSSC"]);
    }
}
