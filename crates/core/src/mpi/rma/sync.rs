//! Epochs (MPI-4.1 12.5): fence, post-start-complete-wait, lock/unlock (shared, exclusive,
//! all), flushes and MPI_Win_sync.
//!
//! Completing operations at a target (`settle`): direct and cross-memory operations are done
//! when they return; for a target reached by active messages that has had frames changing its
//! memory since its last answer, a Flush frame goes out and its Ack comes back after
//! everything before it was applied; reading operations complete with their Data.
//!
//! Locks: a target whose control block is mapped here (same host) is locked with atomic
//! instructions on its lock word, retried between progress passes; another is sent a Lock
//! frame and granted by its progress, on the same word. MPI_MODE_NOCHECK takes no lock.

use super::{wait, Waiting, MODE_NOCHECK, MODE_NOSUCCEED};
use crate::err;
use crate::error::Result;
use crate::ids::CommId;
use crate::mpi::engine::Engine;
use crate::mpi::global::with;
use crate::proto::frame::{RmaHeader, RmaKind, RMA_EXCLUSIVE};
use crate::transport::Gpid;

/// A full memory barrier: every load and store before it is done (globally visible) before
/// any after it, as `fence(SeqCst)`. On x86-64 a locked read-modify-write of the stack top
/// (`lock or [rsp], 0`, the way GCC emits a sequentially consistent fence, and Open MPI's
/// flush) instead of the MFENCE that LLVM emits, which costs about twice as much: locked
/// instructions order all ordinary (write-back) memory accesses, and the only others a copy
/// here can make, the non-temporal stores of a large `memcpy`, are fenced by `memcpy` itself
/// (SFENCE). The `asm!` block names no `nomem`, so the compiler keeps every memory access on
/// its side too. Elsewhere `fence(SeqCst)`.
#[inline(always)]
pub(crate) fn full_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rewrites the 8 bytes at the stack top, which belong to this thread, with
    // their own value.
    unsafe {
        std::arch::asm!("lock or qword ptr [rsp], 0", options(nostack))
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// A passive-target lock held by this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockType {
    Shared,
    Exclusive,
}

/// How a held lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    NoCheck,
    Direct,
    Frames,
}

impl Engine {
    /// Ask `targets` of window `win` for an Ack to a frame of `kind` (Flush, Lock, Unlock).
    fn rma_ask(&mut self, win: u32, targets: &[usize], kind: RmaKind, flags: u8) -> Result<()> {
        let ctx = self.rma.win(win)?.ctx;
        for &t in targets {
            let id = self.rma.id();
            let w = self.rma.win_mut(win)?;
            let p = &mut w.peers[t];
            p.outstanding += 1;
            if matches!(kind, RmaKind::Flush | RmaKind::Unlock) {
                p.unflushed = false;
            }
            let g = p.gpid;
            self.rma.waiting.insert(id, Waiting::Ack { win, target: t });
            if kind == RmaKind::Flush && self.rma.ack_last(g, ctx, id) {
                continue;
            }
            let mut h = RmaHeader::new(kind, ctx);
            h.id = id;
            h.flags = flags;
            self.rma.send(g, h, Vec::new());
        }
        self.rma_push();
        Ok(())
    }

    /// Start completing every operation to `targets` at the targets: Flush frames to those
    /// reached by frames that have unanswered changes.
    fn rma_flush_start(&mut self, win: u32, targets: &[usize]) -> Result<()> {
        let w = self.rma.win(win)?;
        let need: Vec<usize> = targets
            .iter()
            .copied()
            .filter(|&t| w.peers[t].unflushed)
            .collect();
        full_barrier();
        self.rma_ask(win, &need, RmaKind::Flush, 0)
    }

    fn rma_settled(&self, win: u32, targets: &[usize]) -> bool {
        self.rma.win(win).map_or(true, |w| {
            targets.iter().all(|&t| w.peers[t].outstanding == 0)
        })
    }

    /// An error an earlier operation left on the window (an active message the target could
    /// not apply), reported once.
    fn rma_take_error(&mut self, win: u32) -> Result<()> {
        match self.rma.win_mut(win)?.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Complete every operation of this process on `targets` at the targets.
fn settle(win: u32, targets: &[usize]) -> Result<()> {
    with(|e| {
        // Flush frames first: one may ride on a write still queued (`State::ack_last`).
        e.rma_flush_start(win, targets)?;
        e.rma_poke(win);
        Ok::<(), crate::error::MpiError>(())
    })??;
    wait(|e| e.rma_settled(win, targets))?;
    with(|e| e.rma_take_error(win))?
}

/// Complete every operation of this process on the window, at every target.
pub(crate) fn settle_all(win: u32) -> Result<()> {
    let n = with(|e| e.rma.win(win).map(|w| w.peers.len()))??;
    let all: Vec<usize> = (0..n).collect();
    settle(win, &all)
}

fn check_assert(assert: i32, allowed: i32, call: &str) -> Result<()> {
    if assert & !allowed != 0 {
        return err!(
            Assert,
            "{call}: assertion {assert:#x} holds flags it does not take"
        );
    }
    Ok(())
}

/// MPI_Win_fence.
///
/// A fence completes every operation of the ending epoch at its target (direct and
/// cross-memory operations already are), then waits until every member has done so. Where
/// every member is on this host ([`super::Win::fence_shm`]) active messages are flushed
/// (`settle`) and the waiting is on fence counts in the control blocks ([`fence_arrive`],
/// [`fence_wait`]), with no message. Elsewhere the operations are counted ([`fence_counted`]):
/// one allreduce on the window's communicator tells each member how many operation frames
/// were sent to it, and it waits until it has applied that many; no flush and no
/// acknowledgement, so a fence across hosts costs one collective, where flushing first and
/// then a barrier cost a round trip more.
///
/// Assertions (given alike by every member, as MPI-4.1 12.5.5 requires): MPI_MODE_NOPRECEDE
/// with MPI_MODE_NOSUCCEED neither ends nor starts an epoch, so nothing is waited for at all;
/// MPI_MODE_NOPRECEDE alone still waits (the members' local stores before it must be visible
/// to the next epoch's operations); MPI_MODE_NOSTORE and MPI_MODE_NOPUT leave no work to skip
/// in the unified model (there is no private copy to synchronise).
pub fn fence(win: u32, assert: i32) -> Result<()> {
    check_assert(
        assert,
        super::MODE_NOSTORE | super::MODE_NOPUT | super::MODE_NOPRECEDE | MODE_NOSUCCEED,
        "MPI_Win_fence",
    )?;
    let both = super::MODE_NOPRECEDE | MODE_NOSUCCEED;
    let skip = assert & both == both;
    let open = assert & MODE_NOSUCCEED == 0;
    // The common case in one visit to the engine: no active messages (so every operation of
    // the epoch is complete already, and none can have left an error), members on this host.
    let step = with(|e| -> Result<Step> {
        let w = e.rma.win_mut(win)?;
        if w.access.is_some()
            || w.exposure.is_some()
            || w.lock_all
            || w.peers.iter().any(|p| p.lock.is_some())
        {
            return err!(
                RmaSync,
                "MPI_Win_fence inside a post-start-complete-wait or lock epoch"
            );
        }
        if (w.am || w.error.is_some()) && (w.fence_shm || skip) {
            return Ok(Step::Settle);
        }
        if skip {
            full_barrier();
        } else if !w.fence_shm {
            return Ok(Step::Counted(w.comm));
        } else if let Some(g) = fence_arrive(w) {
            return Ok(Step::Wait(g));
        }
        w.fence_open = open;
        Ok(Step::Done)
    })??;
    match step {
        Step::Done => return Ok(()),
        Step::Wait(g) => fence_wait(win, g)?,
        Step::Counted(comm) => fence_counted(win, comm)?,
        Step::Settle => {
            // Members on this host (or a fence that neither ends nor starts an epoch).
            settle_all(win)?;
            if skip {
                full_barrier();
            } else if let Some(g) = with(|e| e.rma.win_mut(win).map(fence_arrive))?? {
                fence_wait(win, g)?;
            }
        }
    }
    with(|e| -> Result<()> {
        e.rma.win_mut(win)?.fence_open = open;
        Ok(())
    })?
}

/// What [`fence`] does after its first look at the window.
enum Step {
    Done,
    /// Wait for the members to arrive at this fence count.
    Wait(u64),
    /// Count the operations across the window's communicator ([`fence_counted`]).
    Counted(CommId),
    /// Complete the operations by active messages first (flush), then as `Wait` (members on
    /// this host) or nothing more (`skip`).
    Settle,
}

/// A fence among members not all on this host: every member contributes how many operation
/// frames it sent to each member since the window was made (`Peer::sent_ops`), an allreduce
/// (sum) gives each member the total sent to it, and it waits, making progress,
/// until it has applied that many (`Win::applied_ops`) and its own reading operations have
/// their answers. The allreduce also orders the fence like a barrier: no member leaves before
/// every member has entered (every result sums every member's input).
///
/// A member that leaves first may send the next epoch's requests to one still waiting here;
/// applied at once they could read memory an operation of the ending epoch has yet to write,
/// and counted they could end the wait before those arrive. So every request carries the
/// parity of its sender's counted fences (`frame::RMA_ODD`, `Win::counted`): a member is at
/// most one fence ahead of another, so a parity other than ours means the next epoch, and
/// such frames wait in `Win::deferred` until this fence ends (`Engine::rma_next_epoch`).
/// Every member of a window that is not on one host goes through here for every fence but
/// those that neither end nor start an epoch, so the parities agree.
///
/// Operations on members reached directly (shared memory, cross-memory attach) are complete
/// when issued; a window without active messages sends zeros. An error an operation met at its
/// target is reported as before (the answers of reading operations carry it; writes that a
/// target cannot apply are dropped and counted there, and acknowledged only where marked
/// `RMA_ACK`, as a Flush after them would be).
fn fence_counted(win: u32, comm: CommId) -> Result<()> {
    let (sent, me): (Vec<u64>, usize) = with(|e| -> Result<_> {
        e.rma_push();
        e.rma_poke(win);
        let w = e.rma.win(win)?;
        Ok((w.peers.iter().map(|p| p.sent_ops).collect(), w.rank))
    })??;
    let mut total = vec![0u64; sent.len()];
    let u64_type = crate::mpi::datatype::predefined_index("MPI_UINT64_T").expect("MPI_UINT64_T");
    // An allreduce of the whole vector rather than a reduce-scatter of it: for the few
    // hundred members a window has at most here its latency is a barrier's (recursive
    // doubling, one exchange at two members), where a reduce-scatter took a reduce and a
    // scatter one after the other.
    // SAFETY: `sent` and `total` hold one u64 per member of the window's communicator (its
    // group, in rank order).
    unsafe {
        crate::mpi::coll::allreduce(
            sent.as_ptr().cast(),
            total.as_mut_ptr().cast(),
            sent.len() as i64,
            crate::ids::DtypeId::from_idx(u64_type),
            crate::mpi::coll::op::OP_SUM,
            comm,
        )?;
    }
    let expected = total[me];
    wait(|e| {
        e.rma.win(win).map_or(true, |w| {
            w.applied_ops >= expected && w.peers.iter().all(|p| p.outstanding == 0)
        })
    })?;
    let g = with(|e| -> Result<Option<u64>> {
        e.rma_next_epoch(win)?;
        let w = e.rma.win_mut(win)?;
        if w.peers.iter().all(|p| p.ctl.is_null()) {
            return Ok(None);
        }
        w.fence_gen += 1;
        w.ctl().fence_arrive(w.fence_gen);
        // Members on this host that we reach directly (loads and stores, cross-memory
        // attach) in the next epoch, past frames still waiting at them: where frames went to
        // one in the ending epoch (its total grew), we leave only once it has applied them.
        let mut waits = false;
        for (j, p) in w.peers.iter_mut().enumerate() {
            p.fence_wait = j != me
                && !p.ctl.is_null()
                && matches!(p.mech, super::Mech::Direct(_) | super::Mech::Cma(_))
                && total[j] > p.fence_total;
            p.fence_total = total[j];
            waits |= p.fence_wait;
        }
        Ok(waits.then_some(w.fence_gen))
    })??;
    if let Some(g) = g {
        wait(|e| e.rma.win(win).map_or(true, |w| fence_local(w, g)))?;
    }
    full_barrier();
    with(|e| e.rma_take_error(win))?
}

/// Have the members of the window on this host that [`fence_counted`] waits for
/// (`Peer::fence_wait`) arrived at fence count `g`?
fn fence_local(w: &super::Win, g: u64) -> bool {
    w.peers
        .iter()
        // SAFETY: a member's control block, where mapped, is mapped as long as the window.
        .all(|p| !p.fence_wait || unsafe { &*p.ctl }.fence_reached(g))
}

/// Polls of the members' fence words before a waiting fence makes progress and yields.
const FENCE_SPINS: u32 = 64;

/// The barrier of a fence among members that all share this host ([`super::Win::fence_shm`]),
/// first half: arrive by storing our next fence count `g` in our control block, then poll the
/// other members' counts a little. None: all arrived at `g`; Some(g): wait for them
/// ([`fence_wait`]).
///
/// Memory ordering: everything a member did before its fence (its direct stores and loads
/// to any member's window memory, its cross-memory writes, which the kernel finished in this
/// thread before the call returned, its local loads and stores of its own window) is sequenced
/// before its Release store of the count ([`super::ctl::Ctl::fence_arrive`]); a member that
/// reads that count with Acquire ([`super::ctl::Ctl::fence_reached`]) synchronises with the
/// store, so all of it happens before everything that member does after its fence (the next
/// epoch's operations and local accesses): puts are visible to their targets, and no later
/// put overwrites memory a target was still reading. Release and Acquire are all the ordering
/// this needs (no full barrier: a store followed by a load of another location within one
/// epoch is a conflict MPI leaves undefined, except for accumulates, which are locked
/// instructions). A member leaves fence `g` only once all arrived at `g`, so none is more
/// than one fence ahead and `>=` is the test. Operations by active messages were acknowledged
/// by their targets before we arrive (`settle`); a member waiting here makes progress (after a
/// few polls), so it answers the flushes of the others meanwhile.
fn fence_arrive(w: &mut super::Win) -> Option<u64> {
    w.fence_gen += 1;
    let g = w.fence_gen;
    w.ctl().fence_arrive(g);
    if !w.am {
        for _ in 0..FENCE_SPINS {
            if fence_all(w, g) {
                return None;
            }
            std::hint::spin_loop();
        }
    }
    Some(g)
}

/// Have all members of the window arrived at fence count `g`?
#[inline]
fn fence_all(w: &super::Win, g: u64) -> bool {
    w.peers
        .iter()
        .enumerate()
        // SAFETY: every member's control block is mapped for as long as the window lives
        // (`fence_shm`).
        .all(|(j, p)| j == w.rank || unsafe { &*p.ctl }.fence_reached(g))
}

/// The second half of the barrier: wait, making progress, until every member arrived at `g`.
fn fence_wait(win: u32, g: u64) -> Result<()> {
    wait(|e| e.rma.win(win).map_or(true, |w| fence_all(w, g)))
}

/// Window ranks of a group of processes (a PSCW group), checked against the window's.
fn ranks_of(e: &Engine, win: u32, group: &[Gpid]) -> Result<Vec<usize>> {
    let w = e.rma.win(win)?;
    group
        .iter()
        .map(|g| {
            w.rank_of(*g).ok_or_else(|| {
                crate::mpi_error!(
                    Group,
                    "process {g} of the group is not in the window's group"
                )
            })
        })
        .collect()
}

/// MPI_Win_post: expose the window to the origins in `group`.
pub fn post(win: u32, group: &[Gpid], assert: i32) -> Result<()> {
    check_assert(
        assert,
        MODE_NOCHECK | super::MODE_NOSTORE | super::MODE_NOPUT,
        "MPI_Win_post",
    )?;
    with(|e| -> Result<()> {
        let ranks = ranks_of(e, win, group)?;
        let w = e.rma.win_mut(win)?;
        if w.exposure.is_some() {
            return err!(RmaSync, "MPI_Win_post: an exposure epoch is already open");
        }
        w.exposure = Some(ranks.clone());
        full_barrier();
        if assert & MODE_NOCHECK == 0 {
            let ctx = w.ctx;
            for r in ranks {
                let g = e.rma.win(win)?.peers[r].gpid;
                e.rma
                    .send(g, RmaHeader::new(RmaKind::Post, ctx), Vec::new());
            }
            e.rma_push();
        }
        Ok(())
    })?
}

/// MPI_Win_start: begin an access epoch to the targets in `group` (waits for their posts).
pub fn start(win: u32, group: &[Gpid], assert: i32) -> Result<()> {
    check_assert(assert, MODE_NOCHECK, "MPI_Win_start")?;
    let ranks = with(|e| -> Result<Vec<usize>> {
        let ranks = ranks_of(e, win, group)?;
        let w = e.rma.win_mut(win)?;
        if w.access.is_some() {
            return err!(RmaSync, "MPI_Win_start: an access epoch is already open");
        }
        if w.lock_all || w.peers.iter().any(|p| p.lock.is_some()) {
            return err!(
                RmaSync,
                "MPI_Win_start inside a lock epoch (unlock the window first)"
            );
        }
        Ok(ranks)
    })??;
    if assert & MODE_NOCHECK == 0 {
        wait(|e| {
            e.rma
                .win(win)
                .map_or(true, |w| ranks.iter().all(|&r| w.peers[r].posts > 0))
        })?;
    }
    with(|e| -> Result<()> {
        let w = e.rma.win_mut(win)?;
        if assert & MODE_NOCHECK == 0 {
            for &r in &ranks {
                w.peers[r].posts -= 1;
            }
        }
        full_barrier();
        w.access = Some(ranks);
        w.fence_open = false;
        Ok(())
    })?
}

/// MPI_Win_complete: end the access epoch; the targets learn it after our operations.
pub fn complete(win: u32) -> Result<()> {
    let ranks = with(|e| -> Result<Vec<usize>> {
        match e.rma.win(win)?.access.clone() {
            Some(r) => Ok(r),
            None => err!(RmaSync, "MPI_Win_complete without MPI_Win_start"),
        }
    })??;
    // Reads must have their data; frames that change memory are followed by Complete in order.
    wait(|e| e.rma_settled(win, &ranks))?;
    with(|e| -> Result<()> {
        full_barrier();
        let w = e.rma.win_mut(win)?;
        w.access = None;
        let ctx = w.ctx;
        let targets: Vec<Gpid> = ranks.iter().map(|&r| w.peers[r].gpid).collect();
        for r in &ranks {
            w.peers[*r].unflushed = false;
        }
        for g in targets {
            e.rma
                .send(g, RmaHeader::new(RmaKind::Complete, ctx), Vec::new());
        }
        e.rma_push();
        Ok(())
    })??;
    with(|e| e.rma_take_error(win))?
}

fn exposure_done(e: &Engine, win: u32) -> bool {
    e.rma.win(win).map_or(true, |w| {
        w.exposure
            .as_ref()
            .is_none_or(|g| g.iter().all(|&r| w.peers[r].completes > 0))
    })
}

fn end_exposure(e: &mut Engine, win: u32) -> Result<()> {
    let w = e.rma.win_mut(win)?;
    if let Some(g) = w.exposure.take() {
        for r in g {
            w.peers[r].completes -= 1;
        }
    }
    full_barrier();
    Ok(())
}

/// MPI_Win_wait: end the exposure epoch once every origin completed.
pub fn wait_epoch(win: u32) -> Result<()> {
    with(|e| -> Result<()> {
        if e.rma.win(win)?.exposure.is_none() {
            return err!(RmaSync, "MPI_Win_wait without MPI_Win_post");
        }
        Ok(())
    })??;
    wait(|e| exposure_done(e, win))?;
    with(|e| end_exposure(e, win))?
}

/// MPI_Win_test: MPI_Win_wait if it would not block.
pub fn test(win: u32) -> Result<bool> {
    with(|e| -> Result<bool> {
        if e.rma.win(win)?.exposure.is_none() {
            return err!(RmaSync, "MPI_Win_test without MPI_Win_post");
        }
        if !exposure_done(e, win) {
            e.progress();
        }
        if exposure_done(e, win) {
            end_exposure(e, win)?;
            return Ok(true);
        }
        Ok(false)
    })?
}

fn lock_kind(t: LockType) -> bool {
    t == LockType::Exclusive
}

/// Take `targets`' locks (MPI_Win_lock, MPI_Win_lock_all).
fn acquire(win: u32, targets: &[usize], t: LockType, assert: i32) -> Result<()> {
    let exclusive = lock_kind(t);
    let hows = with(|e| -> Result<Vec<How>> {
        e.rma_poke(win);
        let w = e.rma.win(win)?;
        let hows: Vec<How> = targets
            .iter()
            .map(|&r| {
                if assert & MODE_NOCHECK != 0 {
                    How::NoCheck
                } else if !w.peers[r].ctl.is_null() || r == w.rank {
                    How::Direct
                } else {
                    How::Frames
                }
            })
            .collect();
        let by_frames: Vec<usize> = targets
            .iter()
            .zip(&hows)
            .filter(|(_, h)| **h == How::Frames)
            .map(|(r, _)| *r)
            .collect();
        let flags = if exclusive { RMA_EXCLUSIVE } else { 0 };
        e.rma_ask(win, &by_frames, RmaKind::Lock, flags)?;
        Ok(hows)
    })??;
    for (&r, &h) in targets.iter().zip(&hows) {
        if h == How::Direct {
            wait(|e| {
                e.rma.win(win).map_or(true, |w| {
                    let c = if r == w.rank { w.ctl } else { w.peers[r].ctl };
                    // SAFETY: a control block mapped here for as long as the window lives.
                    unsafe { &*c }.try_lock(exclusive)
                })
            })?;
        }
    }
    wait(|e| e.rma_settled(win, targets))?;
    with(|e| -> Result<()> {
        let w = e.rma.win_mut(win)?;
        for (&r, &h) in targets.iter().zip(&hows) {
            w.peers[r].lock = Some(t);
            w.peers[r].lock_direct = h == How::Direct;
            w.peers[r].lock_nocheck = h == How::NoCheck;
        }
        full_barrier();
        Ok(())
    })?
}

/// Release `targets`' locks after completing our operations there.
fn release(win: u32, targets: &[usize]) -> Result<()> {
    // Targets locked by frames get an Unlock (answered after everything before it); the
    // others a Flush if needed, then their lock word is released here.
    let unlock_by_frames = with(|e| -> Result<Vec<(usize, bool)>> {
        e.rma_poke(win);
        let w = e.rma.win(win)?;
        let mut v = Vec::new();
        for &r in targets {
            let p = &w.peers[r];
            if !p.lock_direct && !p.lock_nocheck {
                v.push((r, p.lock == Some(LockType::Exclusive)));
            }
        }
        Ok(v)
    })??;
    let others: Vec<usize> = targets
        .iter()
        .copied()
        .filter(|r| !unlock_by_frames.iter().any(|(x, _)| x == r))
        .collect();
    with(|e| -> Result<()> {
        e.rma_flush_start(win, &others)?;
        for &(r, excl) in &unlock_by_frames {
            e.rma_ask(
                win,
                &[r],
                RmaKind::Unlock,
                if excl { RMA_EXCLUSIVE } else { 0 },
            )?;
        }
        Ok(())
    })??;
    wait(|e| e.rma_settled(win, targets))?;
    with(|e| -> Result<()> {
        full_barrier();
        let w = e.rma.win_mut(win)?;
        for &r in targets {
            let (direct, lock) = (w.peers[r].lock_direct, w.peers[r].lock);
            if direct {
                let c = if r == w.rank { w.ctl } else { w.peers[r].ctl };
                // SAFETY: mapped for as long as the window lives.
                unsafe { &*c }.unlock(lock == Some(LockType::Exclusive));
            }
            let p = &mut w.peers[r];
            p.lock = None;
            p.lock_direct = false;
            p.lock_nocheck = false;
        }
        Ok(())
    })??;
    with(|e| e.rma_take_error(win))?
}

fn target_rank(e: &Engine, win: u32, rank: i32) -> Result<usize> {
    let w = e.rma.win(win)?;
    if rank < 0 || rank as usize >= w.peers.len() {
        return err!(
            Rank,
            "rank {rank} is out of range for a window of {} processes",
            w.peers.len()
        );
    }
    Ok(rank as usize)
}

/// MPI_Win_lock.
pub fn lock(win: u32, t: LockType, rank: i32, assert: i32) -> Result<()> {
    check_assert(assert, MODE_NOCHECK, "MPI_Win_lock")?;
    if rank == crate::mpi::request::PROC_NULL {
        return Ok(());
    }
    let r = with(|e| -> Result<usize> {
        let r = target_rank(e, win, rank)?;
        let w = e.rma.win(win)?;
        if w.lock_all || w.peers[r].lock.is_some() {
            return err!(
                RmaSync,
                "MPI_Win_lock: rank {r} is already locked by this process"
            );
        }
        no_active_access(w, "MPI_Win_lock")?;
        Ok(r)
    })??;
    acquire(win, &[r], t, assert)?;
    end_fence_epoch(win)
}

/// A lock epoch may not begin inside a post-start-complete-wait access epoch (MPI-4.1 12.5:
/// access epochs of one window do not overlap).
fn no_active_access(w: &super::Win, call: &str) -> Result<()> {
    if w.access.is_some() {
        return err!(
            RmaSync,
            "{call} inside an access epoch begun by MPI_Win_start (call MPI_Win_complete first)"
        );
    }
    Ok(())
}

/// A fence that did not end the window's epochs (no MPI_MODE_NOSUCCEED) begins an access
/// epoch only if RMA calls follow it (MPI-4.1 12.5.1); a lock or start that follows it
/// instead begins its own, and once that ends no epoch is open until the next fence.
fn end_fence_epoch(win: u32) -> Result<()> {
    with(|e| -> Result<()> {
        e.rma.win_mut(win)?.fence_open = false;
        Ok(())
    })?
}

/// MPI_Win_unlock.
pub fn unlock(win: u32, rank: i32) -> Result<()> {
    if rank == crate::mpi::request::PROC_NULL {
        return Ok(());
    }
    let r = with(|e| -> Result<usize> {
        let r = target_rank(e, win, rank)?;
        let w = e.rma.win(win)?;
        if w.lock_all || w.peers[r].lock.is_none() {
            return err!(
                RmaSync,
                "MPI_Win_unlock: rank {r} is not locked by this process"
            );
        }
        Ok(r)
    })??;
    release(win, &[r])
}

/// MPI_Win_lock_all: a shared lock on every member.
pub fn lock_all(win: u32, assert: i32) -> Result<()> {
    check_assert(assert, MODE_NOCHECK, "MPI_Win_lock_all")?;
    let all = with(|e| -> Result<Vec<usize>> {
        let w = e.rma.win(win)?;
        if w.lock_all || w.peers.iter().any(|p| p.lock.is_some()) {
            return err!(RmaSync, "MPI_Win_lock_all: the window is already locked");
        }
        no_active_access(w, "MPI_Win_lock_all")?;
        Ok((0..w.peers.len()).collect())
    })??;
    acquire(win, &all, LockType::Shared, assert)?;
    with(|e| -> Result<()> {
        let w = e.rma.win_mut(win)?;
        w.lock_all = true;
        w.fence_open = false;
        Ok(())
    })?
}

/// MPI_Win_unlock_all.
pub fn unlock_all(win: u32) -> Result<()> {
    let all = with(|e| -> Result<Vec<usize>> {
        let w = e.rma.win(win)?;
        if !w.lock_all {
            return err!(RmaSync, "MPI_Win_unlock_all without MPI_Win_lock_all");
        }
        Ok((0..w.peers.len()).collect())
    })??;
    release(win, &all)?;
    with(|e| -> Result<()> {
        e.rma.win_mut(win)?.lock_all = false;
        Ok(())
    })?
}

/// Targets a flush applies to: one rank, or all (None); they must be in a passive epoch.
fn flush_targets(win: u32, rank: Option<i32>, call: &str) -> Result<Vec<usize>> {
    with(|e| -> Result<Vec<usize>> {
        let w = e.rma.win(win)?;
        let ranks: Vec<usize> = match rank {
            Some(r) if r == crate::mpi::request::PROC_NULL => return Ok(Vec::new()),
            Some(r) => vec![target_rank(e, win, r)?],
            None => (0..w.peers.len()).collect(),
        };
        if !w.lock_all && rank.is_some() && w.peers[ranks[0]].lock.is_none() {
            return err!(
                RmaSync,
                "{call}: rank {} is not locked by this process",
                ranks[0]
            );
        }
        if rank.is_none() && !w.lock_all && w.peers.iter().all(|p| p.lock.is_none()) {
            return err!(RmaSync, "{call} outside a passive-target epoch");
        }
        Ok(ranks)
    })?
}

impl Engine {
    /// The fast path of a flush: in a window without active messages, with nothing in
    /// flight to the targets (direct and cross-memory operations are complete when they
    /// return), a flush is a memory barrier. None: the general path decides (and reports
    /// errors).
    #[inline]
    fn rma_flush_fast(&self, win: u32, rank: Option<i32>) -> Option<()> {
        if !self.cfg.rma_fastpath {
            return None;
        }
        let w = self.rma.win(win).ok()?;
        if w.am || w.error.is_some() {
            return None;
        }
        let idle = |p: &super::Peer| !p.unflushed && p.outstanding == 0;
        match rank {
            Some(r) => {
                let p = w.peers.get(usize::try_from(r).ok()?)?;
                if !(w.lock_all || p.lock.is_some()) || !idle(p) {
                    return None;
                }
            }
            None => {
                if !(w.lock_all || w.peers.iter().any(|p| p.lock.is_some()))
                    || !w.peers.iter().all(idle)
                {
                    return None;
                }
            }
        }
        full_barrier();
        Some(())
    }
}

/// MPI_Win_flush (Some(rank)) / MPI_Win_flush_all (None).
pub fn flush(win: u32, rank: Option<i32>) -> Result<()> {
    if crate::mpi::global::try_with(|e| e.rma_flush_fast(win, rank).is_some()) == Some(true) {
        return Ok(());
    }
    let targets = flush_targets(
        win,
        rank,
        if rank.is_some() {
            "MPI_Win_flush"
        } else {
            "MPI_Win_flush_all"
        },
    )?;
    settle(win, &targets)
}

/// MPI_Win_flush_local / MPI_Win_flush_local_all: our buffers may be reused. Reads wait for
/// their data, and large puts sent from the origin's buffer until the transport is done
/// with it (`State::send_lent`); smaller frames copy what they carry.
pub fn flush_local(win: u32, rank: Option<i32>) -> Result<()> {
    if crate::mpi::global::try_with(|e| e.rma_flush_fast(win, rank).is_some()) == Some(true) {
        return Ok(());
    }
    let targets = flush_targets(
        win,
        rank,
        if rank.is_some() {
            "MPI_Win_flush_local"
        } else {
            "MPI_Win_flush_local_all"
        },
    )?;
    with(|e| e.rma_poke(win))?;
    wait(|e| e.rma_settled(win, &targets))?;
    with(|e| e.rma_take_error(win))?
}

/// MPI_Win_sync: the public and private copies agree (one copy here: a memory barrier).
pub fn sync(win: u32) -> Result<()> {
    with(|e| {
        e.rma_poke(win);
        e.rma.win(win).map(|_| ())
    })??;
    full_barrier();
    Ok(())
}
