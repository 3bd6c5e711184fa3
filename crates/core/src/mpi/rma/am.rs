//! Active messages: cutting operations into frames at the origin, applying them at the target,
//! and the answers (Data, Ack) back at the origin.
//!
//! Invariants:
//! - A target applies the frames of one origin in the order they were sent (transports are
//!   ordered), all of a frame at once, while its engine makes progress; so an Ack to a Flush
//!   or Unlock means everything before it is done, and accumulates from one origin keep their
//!   order (the standard's default accumulate ordering).
//! - Nothing the target reads from a frame is trusted: headers are checked by
//!   `RmaHeader::decode`, segments must lie in the window's memory (attached memory of a
//!   dynamic window), accumulate element types and operations must be predefined and agree;
//!   anything else is dropped and counted, and an operation that reads is answered with an
//!   empty Data frame, which fails it at the origin.

use super::acc;
use super::{Flavor, LockWait, State, Waiting};
use crate::ids::ContextId;
use crate::mpi::pml::Pml;
use crate::proto::frame::{
    self, RmaHeader, RmaKind, HEADER_LEN, RMA_ACK, RMA_EXCLUSIVE, RMA_FETCH, RMA_ODD,
};
use crate::transport::{Await, Gpid, Placement, Span};

/// A piece of an operation that goes in one frame: its target segments, and where its data
/// lies in the operation's packed data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub segs: Vec<(u64, u64)>,
    pub at: usize,
    pub len: usize,
}

/// Cut `segs` into pieces whose segment list and data fit `budget` bytes, each piece whole
/// elements of `elem` bytes of the operation's packed data. An element may straddle two
/// segments (a pair type with a gap between value and index): a piece that fills up in the
/// middle of one gives the element's first bytes back to the next piece.
pub(crate) fn cut(segs: &[(u64, u64)], elem: usize, budget: usize) -> Vec<Piece> {
    let elem = elem.max(1);
    let mut out = Vec::new();
    let mut cur = Piece {
        segs: Vec::new(),
        at: 0,
        len: 0,
    };
    // The segments (or the parts of them) still to place, in order.
    let mut rest: std::collections::VecDeque<(u64, usize)> =
        segs.iter().map(|&(o, l)| (o, l as usize)).collect();
    while let Some((o, l)) = rest.pop_front() {
        if l == 0 {
            continue;
        }
        let room = budget.saturating_sub(frame::SEG_LEN * (cur.segs.len() + 1) + cur.len);
        let here = cur.at + cur.len;
        let mut take = if l <= room {
            l
        } else {
            // Within a segment, cut where an element ends.
            ((here + room) / elem * elem).saturating_sub(here)
        };
        if take == 0 && cur.segs.is_empty() {
            // A budget smaller than one element: one element per piece all the same.
            take = l.min(elem);
        }
        if take == 0 {
            rest.push_front((o, l));
            // Close the piece at its last whole element; what follows goes back in front.
            let keep = match cur.len / elem * elem {
                0 => cur.len,
                k => k,
            };
            let mut excess = cur.len - keep;
            while excess > 0 {
                let (so, sl) = cur.segs.pop().expect("the excess lies in the piece");
                let sl = sl as usize;
                if sl <= excess {
                    rest.push_front((so, sl));
                    excess -= sl;
                } else {
                    cur.segs.push((so, (sl - excess) as u64));
                    rest.push_front((so + (sl - excess) as u64, excess));
                    excess = 0;
                }
            }
            cur.len = keep;
            let next = cur.at + keep;
            out.push(std::mem::replace(
                &mut cur,
                Piece {
                    segs: Vec::new(),
                    at: next,
                    len: 0,
                },
            ));
            continue;
        }
        cur.segs.push((o, take as u64));
        cur.len += take;
        if take < l {
            rest.push_front((o + take as u64, l - take));
        }
    }
    if !cur.segs.is_empty() {
        out.push(cur);
    }
    out
}

impl State {
    fn bad(&mut self, from: Gpid, why: &str) {
        self.bad_frames += 1;
        if self.verbose {
            eprintln!("Protean: dropped a one-sided frame from process {from}: {why}");
        }
    }

    /// Answer an operation that reads.
    fn answer(&mut self, to: Gpid, win: ContextId, id: u32, data: Vec<u8>) {
        let mut h = RmaHeader::new(RmaKind::Data, win);
        h.id = id;
        h.len = data.len() as u32;
        self.send(to, h, data);
    }

    fn ack(&mut self, to: Gpid, win: ContextId, id: u32) {
        let mut h = RmaHeader::new(RmaKind::Ack, win);
        h.id = id;
        self.send(to, h, Vec::new());
    }

    /// An RMA frame arrived (see the module doc).
    pub(crate) fn on_frame(
        &mut self,
        pml: &mut Pml,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        payload: &[u8],
    ) {
        let h = match RmaHeader::decode(hdr) {
            Ok(h) => h,
            Err(e) => return self.bad(from, &e.to_string()),
        };
        if h.kind.is_answer() {
            return self.on_answer(pml, from, h, payload);
        }
        let Some(&wid) = self.by_ctx.get(&h.win) else {
            // The window is not made here yet (its creation ends at different times).
            if self.early_bytes + payload.len() > super::EARLY_MAX {
                return self.bad(from, "too much data for a window that does not exist");
            }
            self.early_bytes += payload.len();
            self.early.push((from, *hdr, payload.to_vec()));
            return;
        };
        let Some(rank) = self.wins[wid as usize]
            .as_ref()
            .and_then(|w| w.rank_of(from))
        else {
            return self.bad(from, "frame from a process outside the window's group");
        };
        let w = self.wins[wid as usize].as_mut().expect("live");
        if (h.flags & RMA_ODD != 0) != (w.counted & 1 == 1) {
            // The next epoch's, from a member out of the fence we are still in: it waits
            // until we leave it (sync::fence_counted), so that it neither reads memory the
            // ending epoch's operations have yet to write nor counts as one of them.
            if w.deferred_bytes + payload.len() > super::EARLY_MAX {
                return self.bad(from, "too much data for the next epoch");
            }
            w.deferred_bytes += payload.len();
            w.deferred.push((from, *hdr, payload.to_vec()));
            return;
        }
        if matches!(
            h.kind,
            RmaKind::Put | RmaKind::Acc | RmaKind::Get | RmaKind::Cas
        ) {
            // Counted whether or not it applies: a fence waits for the count (sync::fence).
            w.applied_ops += 1;
        }
        match h.kind {
            RmaKind::Put | RmaKind::Acc | RmaKind::Get => self.on_data_op(from, wid, h, payload),
            RmaKind::Cas => self.on_cas(from, wid, h, payload),
            RmaKind::Flush => self.ack(from, h.win, h.id),
            RmaKind::Lock => {
                let exclusive = h.flags & RMA_EXCLUSIVE != 0;
                let w = self.wins[wid as usize].as_ref().expect("live");
                let queued = self.locks.iter().any(|l| l.win == wid);
                if !queued && w.ctl().try_lock(exclusive) {
                    self.ack(from, h.win, h.id);
                } else {
                    self.locks.push(LockWait {
                        from,
                        win: wid,
                        id: h.id,
                        exclusive,
                    });
                }
            }
            RmaKind::Unlock => {
                let w = self.wins[wid as usize].as_ref().expect("live");
                w.ctl().unlock(h.flags & RMA_EXCLUSIVE != 0);
                self.ack(from, h.win, h.id);
            }
            RmaKind::Post => {
                let w = self.wins[wid as usize].as_mut().expect("live");
                w.peers[rank].posts += 1;
            }
            RmaKind::Complete => {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                let w = self.wins[wid as usize].as_mut().expect("live");
                w.peers[rank].completes += 1;
            }
            RmaKind::Data | RmaKind::Ack => unreachable!("answers handled above"),
        }
    }

    /// A large frame is next from `from`, its payload not arrived yet: the data of a read
    /// goes straight into the result, a put's straight into our window memory (one
    /// contiguous segment, checked as `on_data_op` checks it, in the current epoch), instead
    /// of through the transport's buffer and a copy. None: delivered as a whole frame.
    pub(crate) fn place(
        &mut self,
        from: Gpid,
        hdr: &[u8; HEADER_LEN],
        len: usize,
    ) -> Option<Placement> {
        let h = RmaHeader::decode(hdr).ok()?;
        let to = match h.kind {
            RmaKind::Data => {
                let Some(&Waiting::Data { op, at, len: want }) = self.waiting.get(&h.id) else {
                    return None;
                };
                let f = self.fetching.get(&op)?;
                if want != len || f.dst.is_null() || f.error.is_some() {
                    return None;
                }
                f.dst.wrapping_add(at)
            }
            RmaKind::Put if h.nsegs == 0 && h.len as usize == len => {
                let w = self.wins[*self.by_ctx.get(&h.win)? as usize].as_ref()?;
                w.rank_of(from)?;
                if (h.flags & RMA_ODD != 0) != (w.counted & 1 == 1) || !w.holds(h.disp, len as u64)
                {
                    return None;
                }
                w.at(h.disp)
            }
            _ => return None,
        };
        Some(Placement {
            // SAFETY: `len` bytes at `to` are the result's (the pieces partition it; it lives
            // until the operation completes, which this frame's arrival decides) or our
            // window memory (checked above, alive with the window).
            to: unsafe { Span::new(to, len) },
            wait: Await::AsItComes,
        })
    }

    /// The payload of a frame [`State::place`] placed has been written.
    pub(crate) fn placed(&mut self, pml: &mut Pml, from: Gpid, hdr: &[u8; HEADER_LEN], len: usize) {
        let Ok(h) = RmaHeader::decode(hdr) else {
            return;
        };
        if h.kind == RmaKind::Data {
            return self.answered(pml, from, h, None, len);
        }
        if let Some(w) = self
            .by_ctx
            .get(&h.win)
            .and_then(|&wid| self.wins[wid as usize].as_mut())
        {
            // Applied (the bytes are in place): counted as `on_frame` counts it.
            w.applied_ops += 1;
        }
        if h.flags & RMA_ACK != 0 {
            self.ack(from, h.win, h.id);
        }
    }

    /// Grant waiting Lock frames whose lock is free now, in the order they came per window.
    pub(crate) fn grant_locks(&mut self) {
        let mut i = 0;
        let mut stuck: Vec<u32> = Vec::new();
        while i < self.locks.len() {
            let l = &self.locks[i];
            if stuck.contains(&l.win) {
                i += 1;
                continue;
            }
            let granted = match self.wins.get(l.win as usize).and_then(|w| w.as_ref()) {
                Some(w) => w.ctl().try_lock(l.exclusive),
                None => {
                    self.locks.remove(i);
                    continue;
                }
            };
            if granted {
                let l = self.locks.remove(i);
                let ctx = self.wins[l.win as usize].as_ref().expect("live").ctx;
                self.ack(l.from, ctx, l.id);
            } else {
                stuck.push(l.win);
                i += 1;
            }
        }
    }

    /// Put, Acc (with or without FETCH), Get.
    fn on_data_op(&mut self, from: Gpid, wid: u32, h: RmaHeader, payload: &[u8]) {
        // One segment in the header (no list to allocate), or a list in the payload.
        let one = [(h.disp, h.len as u64)];
        let listed;
        let (segs, data): (&[(u64, u64)], &[u8]) = if h.nsegs == 0 {
            (&one, payload)
        } else {
            match frame::take_segments(payload, h.nsegs) {
                Ok((s, d)) => {
                    listed = s;
                    (&listed, d)
                }
                Err(e) => return self.bad(from, &e.to_string()),
            }
        };
        let total: u64 = segs.iter().map(|s| s.1).sum();
        let reads = h.kind == RmaKind::Get || h.flags & RMA_FETCH != 0;
        let acks = !reads && h.flags & RMA_ACK != 0;
        let fail = |s: &mut State, why: &str| {
            if reads {
                s.answer(from, h.win, h.id, Vec::new());
            } else if acks {
                // Acknowledged all the same, as a Flush would be: the origin's flush ends
                // (the error is the target's to report).
                s.ack(from, h.win, h.id);
            }
            eprintln!("Protean: a one-sided operation from process {from} was not applied: {why}");
            s.bad_frames += 1;
        };
        let w = self.wins[wid as usize].as_ref().expect("live");
        if total != h.len as u64 && h.nsegs != 0 {
            return fail(self, "its segments do not add up to its length");
        }
        if let Some(&(o, l)) = segs.iter().find(|s| !w.holds(s.0, s.1)) {
            return fail(
                self,
                &format!(
                    "bytes {o}..{} are outside the target's window memory",
                    o.saturating_add(l)
                ),
            );
        }
        let acc = if h.kind == RmaKind::Acc {
            match self.accs.get(h.op, h.elem) {
                Ok(a) => Some(a),
                Err(e) => return fail(self, &e.msg),
            }
        } else {
            None
        };
        let no_op = h.op == 13;
        let needs = match h.kind {
            RmaKind::Put => total as usize,
            RmaKind::Acc if no_op && data.is_empty() => 0,
            RmaKind::Acc => total as usize,
            _ => 0,
        };
        if data.len() != needs {
            return fail(self, "its data does not match its length");
        }
        if let Some(a) = &acc {
            if !total.is_multiple_of(a.size as u64) {
                return fail(self, "its length is no whole number of elements");
            }
        }
        let w = self.wins[wid as usize].as_ref().expect("live");
        // A large read of one run of a window that stays mapped (not a dynamic one, whose
        // regions the user may detach and free) is answered from the window itself.
        let p = w.at(segs.first().map_or(0, |s| s.0));
        if h.kind == RmaKind::Get
            && segs.len() == 1
            && w.flavor != super::Flavor::Dynamic
            && super::lends(total as usize)
        {
            let mut a = RmaHeader::new(RmaKind::Data, h.win);
            a.id = h.id;
            a.len = total as u32;
            let release = super::Release::Answer { win: wid };
            self.send_lent(from, a, Vec::new(), p, total as usize, release);
            return;
        }
        let mut out = if reads {
            vec![0u8; total as usize]
        } else {
            Vec::new()
        };
        let mut done = 0usize;
        let locked = acc.is_some() && !w.atomic;
        if locked {
            w.ctl().acc_lock();
        }
        if let Some(a) = &acc {
            let o = if data.is_empty() {
                std::ptr::null()
            } else {
                data.as_ptr()
            };
            let old = reads.then_some(out.as_mut_ptr());
            let mode = if w.atomic {
                w.mode()
            } else {
                acc::Mode::Locked
            };
            let runs = segs.iter().map(|&(off, len)| (w.at(off), len as usize));
            // SAFETY: every segment lies in our window memory (checked above), mapped here and
            // alive with the window; `data` and `out` hold `total` bytes, whole elements.
            unsafe { a.apply_runs(o, runs, old, mode) };
        } else {
            for &(off, len) in segs {
                let p = w.at(off);
                let len = len as usize;
                // SAFETY: [off, off + len) lies in our window memory (checked above), mapped
                // here and alive with the window; `data` and `out` hold `total` bytes.
                unsafe {
                    match h.kind {
                        RmaKind::Put => crate::mem::copy_overlap(data.as_ptr().add(done), p, len),
                        _ => crate::mem::copy_overlap(p, out.as_mut_ptr().add(done), len),
                    }
                }
                done += len;
            }
        }
        if locked {
            w.ctl().acc_unlock();
        }
        if reads {
            self.answer(from, h.win, h.id, out);
        } else if acks {
            self.ack(from, h.win, h.id);
        }
    }

    fn on_cas(&mut self, from: Gpid, wid: u32, h: RmaHeader, payload: &[u8]) {
        let n = h.len as usize;
        let w = self.wins[wid as usize].as_ref().expect("live");
        let size_ok = self.accs.get(12, h.elem).is_ok_and(|a| a.size == n);
        if !size_ok || payload.len() != 2 * n || !w.holds(h.disp, n as u64) {
            self.answer(from, h.win, h.id, Vec::new());
            return self.bad(from, "malformed compare-and-swap");
        }
        let mut old = vec![0u8; n];
        let p = w.at(h.disp);
        // SAFETY: n bytes at p are window memory (checked); payload holds two values.
        unsafe {
            if w.atomic {
                acc::compare_and_swap(
                    n,
                    payload.as_ptr(),
                    payload.as_ptr().add(n),
                    p,
                    old.as_mut_ptr(),
                    w.mode(),
                );
            } else {
                w.ctl().acc_lock();
                acc::compare_and_swap(
                    n,
                    payload.as_ptr(),
                    payload.as_ptr().add(n),
                    p,
                    old.as_mut_ptr(),
                    acc::Mode::Locked,
                );
                w.ctl().acc_unlock();
            }
        }
        self.answer(from, h.win, h.id, old);
    }

    /// Data and Ack frames: answers to this process's operations.
    fn on_answer(&mut self, pml: &mut Pml, from: Gpid, h: RmaHeader, payload: &[u8]) {
        self.answered(pml, from, h, Some(payload), payload.len());
    }

    /// An answer arrived: its `len` bytes of data in `payload`, or already written in place
    /// (None: [`State::place`]).
    fn answered(
        &mut self,
        pml: &mut Pml,
        from: Gpid,
        h: RmaHeader,
        payload: Option<&[u8]>,
        plen: usize,
    ) {
        let Some(wt) = self.waiting.remove(&h.id) else {
            return self.bad(from, "an answer nobody waits for");
        };
        let (win, target) = match wt {
            Waiting::Ack { win, target } => {
                if h.kind != RmaKind::Ack {
                    return self.bad(from, "data where an acknowledgement was due");
                }
                (win, target)
            }
            Waiting::Data { op, at, len } => {
                let Some(f) = self.fetching.get_mut(&op) else {
                    return self.bad(from, "data for a finished operation");
                };
                if h.kind != RmaKind::Data || plen != len {
                    f.error = Some(crate::mpi_error!(
                        RmaRange,
                        "rank {} did not apply a one-sided operation (outside its window memory, or malformed)",
                        f.target
                    ));
                } else if let (false, Some(payload)) = (f.dst.is_null(), payload) {
                    // SAFETY: the result (user buffer or staging) holds the operation's bytes;
                    // at + len is inside (the pieces partition it).
                    unsafe { crate::mem::copy(payload.as_ptr(), f.dst.add(at), len) };
                }
                f.left = f.left.saturating_sub(len);
                let (win, target) = (f.win, f.target);
                if f.left == 0 {
                    let f = self.fetching.remove(&op).expect("present");
                    if let Some(e) = &f.error {
                        if let Some(Some(w)) = self.wins.get_mut(win as usize) {
                            w.error.get_or_insert_with(|| e.clone());
                        }
                    }
                    self.finish_fetch(pml, f);
                }
                (win, target)
            }
        };
        if let Some(Some(w)) = self.wins.get_mut(win as usize) {
            if let Some(p) = w.peers.get_mut(target) {
                p.outstanding = p.outstanding.saturating_sub(1);
            }
        }
        let _ = Flavor::Create;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_fit_and_cover() {
        // One segment of 10000 bytes, budget 4096: three pieces of whole 8-byte elements.
        let p = cut(&[(100, 10000)], 8, 4096);
        assert!(p.len() >= 3);
        let mut at = 0;
        let mut off = 100;
        for x in &p {
            assert_eq!(x.at, at);
            assert!(frame::SEG_LEN * x.segs.len() + x.len <= 4096);
            for s in &x.segs {
                assert_eq!(s.0, off);
                assert_eq!(s.1 % 8, 0);
                off += s.1;
            }
            at += x.len;
        }
        assert_eq!(at, 10000);
        // Many small segments: the list itself is cut.
        let segs: Vec<(u64, u64)> = (0..1000).map(|i| (i * 16, 4)).collect();
        let p = cut(&segs, 4, 4096);
        assert_eq!(p.iter().map(|x| x.segs.len()).sum::<usize>(), 1000);
        assert!(p
            .iter()
            .all(|x| frame::SEG_LEN * x.segs.len() + x.len <= 4096));
        assert!(cut(&[], 4, 4096).is_empty());
    }

    #[test]
    fn pieces_keep_straddling_elements_whole() {
        // MPI_SHORT_INT: 6-byte packed elements, 2 bytes at +0 and 4 at +4 of each 8; a
        // vector of them merges the index of one with the value of the next.
        let mut segs = vec![(0u64, 2u64)];
        for i in 0..999u64 {
            segs.push((i * 8 + 4, 6));
        }
        segs.push((999 * 8 + 4, 4));
        for budget in [64, 100, 4096] {
            let p = cut(&segs, 6, budget);
            let mut at = 0;
            let mut all = Vec::new();
            for x in &p {
                assert_eq!(x.at, at);
                assert_eq!(
                    x.len % 6,
                    0,
                    "budget {budget}: a piece ends inside an element"
                );
                assert_eq!(x.segs.iter().map(|s| s.1 as usize).sum::<usize>(), x.len);
                assert!(frame::SEG_LEN * x.segs.len() + x.len <= budget);
                all.extend(x.segs.iter().copied());
                at += x.len;
            }
            assert_eq!(at, 6000);
            // The same bytes in the same order.
            let flat =
                |v: &[(u64, u64)]| -> Vec<u64> { v.iter().flat_map(|&(o, l)| o..o + l).collect() };
            assert_eq!(flat(&all), flat(&segs));
        }
    }
}
