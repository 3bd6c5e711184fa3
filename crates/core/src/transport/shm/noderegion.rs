//! A per-node collective region: memory the members of one communicator on one host share
//! for shared-memory collectives (`mpi::coll::shm` builds the algorithms on it; this module
//! only knows flags, generations and byte areas, nothing of MPI).
//!
//! The region is a [`HostMem`] segment made by the group's first member and mapped by the
//! others from its description (the caller exchanges it, and unlinks the name once all have
//! mapped it). Collective regions use host-memory serials with [`SERIAL_BIT`] set, so their
//! names never meet those of windows.
//!
//! # Layout (`n` members, `slot` bytes per area, `depth` areas per member)
//!
//! ```text
//! [0 .. n*256)                     one 256-byte control block per member (four cache lines,
//!                                  so a neighbour's prefetch does not share them): its three
//!                                  flags, one signature per ring position
//!                                  (`NodeRegion::sig`; at a depth up to 5 all of them in
//!                                  the flags' cache line), one word per ring position
//!                                  (`NodeRegion::word`), its process id and the address of
//!                                  its mapping
//! then depth*n areas of `slot`     member r's published data, a ring of `depth` areas used by
//!                                  generation: area(r, g) is r's (g mod depth)-th
//! then depth areas of `slot`       a result area every member may write parts of, per ring
//!                                  position
//! ```
//!
//! # Flags, generations and memory ordering
//!
//! Every use of the region is a *generation* `g` (1, 2, ...), counted identically by every
//! member (each blocking shared-memory collective, or each chunk of a large one, takes the
//! next). A member owns its flags and only it writes them; each holds the last generation in
//! which it reached a point, so flags only grow and are never reset:
//!
//! - [`Flag::Published`]: the member's area of generation g holds its data;
//! - [`Flag::Reduced`]: the member's part of the result area of generation g is written;
//! - [`Flag::Done`]: the member will not read any area of generation g (or earlier) again.
//!
//! Ordering: a writer fills an area with plain stores and then sets its flag with a
//! `Release` store; a reader that sees the flag at `>= g` with an `Acquire` load therefore sees
//! the data (the store of the flag synchronises-with the load). Reuse: the areas of
//! generation g are those of g - depth (a ring of at least two, so a fast member can publish
//! the next generations while slow ones still read this one: the pipeline of a large call);
//! before writing an area for generation g a
//! member waits until every member's `Done` is `>= g - depth` (Acquire), and members store `Done`
//! (Release) only after their last read of that generation, so every read of the old data
//! happens before the overwrite. Because flags are compared with `>=`, a member that is one
//! generation ahead never hides the generation a slower member waits for.
//!
//! # Direct reads
//!
//! Each member also writes its process id and the address of its mapping into its control
//! block ([`NodeRegion::enroll`]). Another member can then check that the kernel lets it read
//! that member's memory ([`NodeRegion::probe_direct`]: cross-memory attach, the same
//! permission as ptrace) and read a buffer the member published by address
//! ([`NodeRegion::read_direct`]) or write one ([`NodeRegion::write_direct`]), under the same
//! flag protocol as an area.
//!
//! Waiting never blocks in the kernel: [`NodeRegion::wait`] polls, and after a few polls calls
//! the caller's `idle` (which drives the engine's progress and yields the processor, since
//! ranks may outnumber cores).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::{Gpid, HostMem, Region};

/// Host-memory serials of collective regions have this bit set (windows count from 1 up).
pub const SERIAL_BIT: u32 = 1 << 31;

/// Bytes of a member's control block.
pub const CTL_BYTES: usize = 256;

/// A member's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    Published = 0,
    Reduced = 1,
    Done = 2,
}

/// The most areas per member (the control block holds a word per area).
pub const MAX_DEPTH: usize = 8;

fn check_depth(depth: usize) -> io::Result<usize> {
    if (2..=MAX_DEPTH).contains(&depth) {
        Ok(depth)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a collective region's depth must be 2 to {MAX_DEPTH}, not {depth}"),
        ))
    }
}

/// The control-block words after the flags and the ring's words: a member's process id and
/// the address at which it mapped the region (see [`NodeRegion::enroll`]).
/// The first signature, one per ring position (see [`NodeRegion::sig`]), after the flags.
const SIG_WORD: usize = 3;
/// The first word of the ring (see [`NodeRegion::word`]).
const RING_WORD: usize = SIG_WORD + MAX_DEPTH;
const PID_WORD: usize = RING_WORD + MAX_DEPTH;
const BASE_WORD: usize = PID_WORD + 1;
const _: () = assert!((BASE_WORD + 1) * 8 <= CTL_BYTES);

/// Polls before the first call of `idle` while waiting.
const SPINS: u32 = 64;

/// The mapped region of one group, as seen by one member.
pub struct NodeRegion {
    base: *mut u8,
    n: usize,
    slot: usize,
    /// Areas per member, used in a ring by generation (2 to [`MAX_DEPTH`]).
    depth: usize,
    /// The mapping (None: memory the caller owns, in tests).
    _mem: Option<HostMem>,
}

// SAFETY: the region is shared memory accessed through atomics (flags) and under the flag
// protocol (areas); the mapping lives as long as the value.
unsafe impl Send for NodeRegion {}
// SAFETY: as above; `&NodeRegion` only hands out atomics and raw pointers.
unsafe impl Sync for NodeRegion {}

impl std::fmt::Debug for NodeRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRegion")
            .field("n", &self.n)
            .field("slot", &self.slot)
            .field("depth", &self.depth)
            .finish()
    }
}

impl NodeRegion {
    /// Bytes of a region for `n` members with `depth` areas of `slot` bytes each.
    pub fn bytes(n: usize, slot: usize, depth: usize) -> usize {
        n * CTL_BYTES + (depth * n + depth) * slot
    }

    /// Make the region of a group of `n` (the first member calls this; `me` is its global
    /// process id, `serial` a number it has not used for a region before).
    pub fn create(
        jobid: &str,
        me: Gpid,
        serial: u32,
        n: usize,
        slot: usize,
        depth: usize,
    ) -> io::Result<NodeRegion> {
        let depth = check_depth(depth)?;
        let slot = slot.next_multiple_of(CTL_BYTES);
        let mem = HostMem::create(jobid, me, serial | SERIAL_BIT, Self::bytes(n, slot, depth))?;
        Ok(NodeRegion {
            base: mem.base(),
            n,
            slot,
            depth,
            _mem: Some(mem),
        })
    }

    /// Map the region another member made, from its description.
    pub fn open(
        jobid: &str,
        desc: &Region,
        n: usize,
        slot: usize,
        depth: usize,
    ) -> io::Result<NodeRegion> {
        let depth = check_depth(depth)?;
        let slot = slot.next_multiple_of(CTL_BYTES);
        let mem = HostMem::open(jobid, desc)?;
        if mem.len() < Self::bytes(n, slot, depth) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a collective region is smaller than its group needs",
            ));
        }
        Ok(NodeRegion {
            base: mem.base(),
            n,
            slot,
            depth,
            _mem: Some(mem),
        })
    }

    /// A region over memory the caller provides (tests: threads standing for processes).
    ///
    /// # Safety
    /// `base` is 128-byte aligned, zero-filled, `bytes(n, slot, depth)` long (slot a multiple
    /// of 128, depth from 2 to [`MAX_DEPTH`]) and outlives the value.
    pub unsafe fn from_raw(base: *mut u8, n: usize, slot: usize, depth: usize) -> NodeRegion {
        NodeRegion {
            base,
            n,
            slot,
            depth,
            _mem: None,
        }
    }

    /// The description the others map it by (creator only).
    pub fn desc(&self) -> Option<Region> {
        self._mem.as_ref().map(|m| m.desc())
    }

    /// Remove the name from /dev/shm (the creator, once every member has mapped it).
    pub fn unlink(&mut self) {
        if let Some(m) = self._mem.as_mut() {
            m.unlink();
        }
    }

    pub fn members(&self) -> usize {
        self.n
    }

    /// Bytes of one area.
    pub fn slot_bytes(&self) -> usize {
        self.slot
    }

    /// Areas per member (generations that may be in flight at once).
    pub fn depth(&self) -> usize {
        self.depth
    }

    #[inline]
    fn flag(&self, r: usize, f: Flag) -> &AtomicU64 {
        assert!(r < self.n, "member {r} of a region of {}", self.n);
        // SAFETY: r < n, so the word lies in r's control block; 8-aligned as the base is.
        unsafe { &*(self.base.add(r * CTL_BYTES + 8 * f as usize) as *const AtomicU64) }
    }

    /// Member `me` has reached point `f` of generation `g` (Release: its stores before are
    /// visible to whoever sees the flag).
    #[inline]
    pub fn set(&self, me: usize, f: Flag, g: u64) {
        self.flag(me, f).store(g, Ordering::Release);
    }

    /// Member `me`'s word of generation `g` (one per ring position, after the flags in its control
    /// block): a number it publishes with its area (a length, say). It follows the area's
    /// rules: written before the member's flag of `g` is set (the flag's Release store orders
    /// it), read after that flag is seen, and reused at `g + depth` only after everyone is done
    /// with `g`.
    #[inline]
    fn word_at(&self, r: usize, g: u64) -> &AtomicU64 {
        assert!(r < self.n, "member {r} of a region of {}", self.n);
        let i = RING_WORD + (g % self.depth as u64) as usize;
        // SAFETY: r < n and 8 * (RING_WORD + MAX_DEPTH) <= CTL_BYTES, so the word lies in r's control
        // block.
        unsafe { &*(self.base.add(r * CTL_BYTES + 8 * i) as *const AtomicU64) }
    }

    /// Set member `me`'s word of generation `g` (see [`NodeRegion::word`]).
    #[inline]
    pub fn set_word(&self, me: usize, g: u64, v: u64) {
        self.word_at(me, g).store(v, Ordering::Relaxed);
    }

    /// Member `r`'s word of generation `g`, once its flag of `g` has been seen.
    #[inline]
    pub fn word(&self, r: usize, g: u64) -> u64 {
        self.word_at(r, g).load(Ordering::Relaxed)
    }

    /// Set member `me`'s signature of generation `g`: what its call that begins at `g` is,
    /// in the caller's terms (`mpi::coll::shm` puts there that generation, the collective
    /// and its bytes, so that members whose arguments disagree find out instead of waiting
    /// for each other or reading past each other's buffers). The rules of
    /// [`NodeRegion::word`]: set once the ring position of `g` is free and before the
    /// member's flag of `g`, read after that flag is seen, reused at `g + depth`. A ring of
    /// its own (algorithms keep the words for their lengths), next to the flags: up to a
    /// depth of 5 a reader that polls a member's flags has its signatures in the same cache
    /// line.
    #[inline]
    pub fn set_sig(&self, me: usize, g: u64, v: u64) {
        self.ctl(me, SIG_WORD + (g % self.depth as u64) as usize)
            .store(v, Ordering::Relaxed);
    }

    /// Member `r`'s signature of generation `g` (see [`NodeRegion::set_sig`]): whatever an
    /// earlier generation left there where `r` set none at `g`.
    #[inline]
    pub fn sig(&self, r: usize, g: u64) -> u64 {
        self.ctl(r, SIG_WORD + (g % self.depth as u64) as usize)
            .load(Ordering::Relaxed)
    }

    /// Has member `r` reached point `f` of generation `g` (Acquire)?
    #[inline]
    pub fn reached(&self, r: usize, f: Flag, g: u64) -> bool {
        self.flag(r, f).load(Ordering::Acquire) >= g
    }

    /// Have all members reached point `f` of generation `g`?
    #[inline]
    pub fn all_reached(&self, f: Flag, g: u64) -> bool {
        (0..self.n).all(|r| self.reached(r, f, g))
    }

    /// Wait until `ready()` holds: poll, then call `idle` between polls. `idle` returns an
    /// error to give up (the engine saw a failure).
    #[inline]
    pub fn wait<E>(
        &self,
        mut ready: impl FnMut(&Self) -> bool,
        idle: &mut impl FnMut() -> Result<(), E>,
    ) -> Result<(), E> {
        let mut k = 0u32;
        while !ready(self) {
            if k < SPINS {
                k += 1;
                std::hint::spin_loop();
            } else {
                idle()?;
            }
        }
        Ok(())
    }

    /// Wait until every member has reached `f` of generation `g`.
    #[inline]
    pub fn wait_all<E>(
        &self,
        f: Flag,
        g: u64,
        idle: &mut impl FnMut() -> Result<(), E>,
    ) -> Result<(), E> {
        // Remember how far we got, so a long wait does not poll the early members again.
        let mut next = 0;
        self.wait(
            |s| {
                while next < s.n && s.reached(next, f, g) {
                    next += 1;
                }
                next == s.n
            },
            idle,
        )
    }

    /// Wait until the areas of generation `g` may be written: every member is done with
    /// generation `g - depth`, which used the same areas.
    #[inline]
    pub fn wait_free<E>(&self, g: u64, idle: &mut impl FnMut() -> Result<(), E>) -> Result<(), E> {
        let d = self.depth as u64;
        if g <= d {
            return Ok(());
        }
        self.wait_all(Flag::Done, g - d, idle)
    }

    /// The word at index `i` of member `r`'s control block.
    #[inline]
    fn ctl(&self, r: usize, i: usize) -> &AtomicU64 {
        assert!(r < self.n && i * 8 < CTL_BYTES, "word {i} of member {r}");
        // SAFETY: r < n and 8 * i < CTL_BYTES: the word lies in r's control block.
        unsafe { &*(self.base.add(r * CTL_BYTES + 8 * i) as *const AtomicU64) }
    }

    /// Say who member `me` is, for direct copies ([`NodeRegion::read_direct`]): its process
    /// id and where it mapped the region. Each member enrolls once, before the exchange that
    /// tells the others the region is ready (the creator before it hands out the description).
    pub fn enroll(&self, me: usize) {
        self.ctl(me, PID_WORD)
            .store(u64::from(std::process::id()), Ordering::Release);
        self.ctl(me, BASE_WORD)
            .store(self.base as u64, Ordering::Release);
    }

    /// Can this process read member `r`'s memory directly (cross-memory attach)? Reads `r`'s
    /// process id from its own mapping of the region, by `r`'s address of it, and compares.
    /// `r` has enrolled.
    pub fn probe_direct(&self, r: usize) -> bool {
        let pid = self.ctl(r, PID_WORD).load(Ordering::Acquire);
        let base = self.ctl(r, BASE_WORD).load(Ordering::Acquire);
        if pid == 0 || base == 0 {
            return false;
        }
        let mut got = [0u8; 8];
        let at = base + (r * CTL_BYTES + 8 * PID_WORD) as u64;
        super::cma::read_from(pid as u32, at, &mut got).is_ok() && u64::from_ne_bytes(got) == pid
    }

    /// Copy `len` bytes at `addr` in member `r`'s address space to `dst` (cross-memory
    /// attach; `r` has enrolled).
    ///
    /// # Safety
    /// `dst` has room for `len` bytes that nothing else touches meanwhile.
    pub unsafe fn read_direct(
        &self,
        r: usize,
        addr: u64,
        dst: *mut u8,
        len: usize,
    ) -> io::Result<()> {
        let pid = self.ctl(r, PID_WORD).load(Ordering::Acquire) as u32;
        super::cma::read_from(pid, addr, std::slice::from_raw_parts_mut(dst, len))
    }

    /// Copy `len` bytes at `src` to `addr` in member `r`'s address space (cross-memory
    /// attach; `r` has enrolled).
    ///
    /// # Safety
    /// `src` holds `len` bytes.
    pub unsafe fn write_direct(
        &self,
        r: usize,
        addr: u64,
        src: *const u8,
        len: usize,
    ) -> io::Result<()> {
        let pid = self.ctl(r, PID_WORD).load(Ordering::Acquire) as u32;
        super::cma::write_to(pid, addr, std::slice::from_raw_parts(src, len))
    }

    /// Member `r`'s area of generation `g` (`slot_bytes` long).
    #[inline]
    pub fn area(&self, r: usize, g: u64) -> *mut u8 {
        assert!(r < self.n);
        let i = self.depth * r + (g % self.depth as u64) as usize;
        // SAFETY: inside the mapping (see the layout).
        unsafe { self.base.add(self.n * CTL_BYTES + i * self.slot) }
    }

    /// The result area of generation `g` (`slot_bytes` long).
    #[inline]
    pub fn result(&self, g: u64) -> *mut u8 {
        let i = self.depth * self.n + (g % self.depth as u64) as usize;
        // SAFETY: inside the mapping (see the layout).
        unsafe { self.base.add(self.n * CTL_BYTES + i * self.slot) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Zeroed, 128-byte aligned memory for a region in one process.
    struct Mem {
        p: *mut u8,
        l: std::alloc::Layout,
    }
    unsafe impl Send for Mem {}
    unsafe impl Sync for Mem {}
    impl Mem {
        fn new(bytes: usize) -> Mem {
            let l = std::alloc::Layout::from_size_align(bytes, 128).unwrap();
            let p = unsafe { std::alloc::alloc_zeroed(l) };
            assert!(!p.is_null());
            Mem { p, l }
        }
    }
    impl Drop for Mem {
        fn drop(&mut self) {
            unsafe { std::alloc::dealloc(self.p, self.l) }
        }
    }

    fn yield_idle() -> Result<(), ()> {
        std::thread::yield_now();
        Ok(())
    }

    /// A member that has not enrolled cannot be read; once enrolled, reads of its memory by
    /// address work (here within one process, which the kernel always allows) and reach
    /// exactly the bytes asked for.
    #[test]
    fn direct_reads_after_enrolling() {
        let (n, slot, depth) = (3, 128, 2);
        let m = Mem::new(NodeRegion::bytes(n, slot, depth));
        let r = unsafe { NodeRegion::from_raw(m.p, n, slot, depth) };
        assert!(!r.probe_direct(1));
        r.enroll(1);
        match r.probe_direct(1) {
            true => {}
            // A kernel without cross-memory attach (or a seccomp filter): nothing more to test.
            false => return,
        }
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; 5002];
        unsafe { r.read_direct(1, src.as_ptr() as u64 + 3, dst.as_mut_ptr().add(1), 4990) }
            .unwrap();
        assert_eq!(dst[0], 0);
        assert_eq!(&dst[1..4991], &src[3..4993]);
        assert_eq!(&dst[4991..], &[0u8; 11]);
        // Another member's words are untouched.
        assert!(!r.probe_direct(0));
    }

    /// Threads standing for members run many generations of "publish, read everyone's data,
    /// done" (an allgather) through a ring of two: every reader must see exactly the data of
    /// its generation, never a half-written or overwritten area.
    #[test]
    fn published_areas_are_seen_whole_and_not_overwritten_early() {
        const N: usize = 4;
        const SLOT: usize = 1024;
        const GENS: u64 = 3000;
        let mem = Arc::new(Mem::new(NodeRegion::bytes(N, SLOT, 2)));
        let threads: Vec<_> = (0..N)
            .map(|me| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    let r = unsafe { NodeRegion::from_raw(mem.p, N, SLOT, 2) };
                    let words = SLOT / 8;
                    for g in 1..=GENS {
                        r.wait_free(g, &mut || yield_idle()).unwrap();
                        let a = r.area(me, g) as *mut u64;
                        for w in 0..words {
                            unsafe { a.add(w).write_volatile(g * 1000 + me as u64) };
                        }
                        r.set(me, Flag::Published, g);
                        r.wait_all(Flag::Published, g, &mut || yield_idle())
                            .unwrap();
                        for j in 0..N {
                            let b = r.area(j, g) as *const u64;
                            for w in 0..words {
                                let v = unsafe { b.add(w).read_volatile() };
                                assert_eq!(v, g * 1000 + j as u64, "gen {g} member {j} word {w}");
                            }
                        }
                        r.set(me, Flag::Done, g);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// Gathers and scatters, alternately, with a rotating root: members publish a word and a
    /// signature with their area (a gather's lengths), and a scatter's root writes every member's area. Every
    /// reader sees the word and the data of its own generation.
    #[test]
    fn words_and_areas_written_for_others_are_seen_in_their_generation() {
        const N: usize = 4;
        const SLOT: usize = 256;
        const GENS: u64 = 4000;
        let mem = Arc::new(Mem::new(NodeRegion::bytes(N, SLOT, 3)));
        let threads: Vec<_> = (0..N)
            .map(|me| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    let r = unsafe { NodeRegion::from_raw(mem.p, N, SLOT, 3) };
                    let mut idle = || yield_idle();
                    for g in 1..=GENS {
                        let root = (g as usize / 2) % N;
                        let tag = |j: usize| g * 100 + j as u64;
                        r.wait_free(g, &mut idle).unwrap();
                        if g % 2 == 0 {
                            // gather: everyone but the root publishes its word and area
                            if me != root {
                                r.set_word(me, g, tag(me));
                                r.set_sig(me, g, !tag(me));
                                let a = r.area(me, g) as *mut u64;
                                unsafe { a.write_volatile(tag(me)) };
                                r.set(me, Flag::Published, g);
                            } else {
                                for j in (0..N).filter(|&j| j != root) {
                                    r.wait(|s| s.reached(j, Flag::Published, g), &mut idle)
                                        .unwrap();
                                    assert_eq!(r.word(j, g), tag(j), "gen {g} word of {j}");
                                    assert_eq!(r.sig(j, g), !tag(j), "gen {g} signature of {j}");
                                    let v = unsafe { (r.area(j, g) as *const u64).read_volatile() };
                                    assert_eq!(v, tag(j), "gen {g} area of {j}");
                                }
                            }
                        } else if me == root {
                            // scatter: the root writes every member's area
                            for j in 0..N {
                                unsafe { (r.area(j, g) as *mut u64).write_volatile(tag(j)) };
                            }
                            r.set(me, Flag::Published, g);
                        } else {
                            r.wait(|s| s.reached(root, Flag::Published, g), &mut idle)
                                .unwrap();
                            let v = unsafe { (r.area(me, g) as *const u64).read_volatile() };
                            assert_eq!(v, tag(me), "gen {g} scattered to {me}");
                        }
                        r.set(me, Flag::Done, g);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// One writer (a broadcast root) runs ahead of its readers by at most the ring's depth.
    #[test]
    fn a_root_never_overwrites_an_area_a_reader_still_needs() {
        for depth in [2, 3, 4, MAX_DEPTH] {
            root_ahead(depth);
        }
    }

    fn root_ahead(depth: usize) {
        const N: usize = 3;
        const SLOT: usize = 256;
        const GENS: u64 = 3000;
        let mem = Arc::new(Mem::new(NodeRegion::bytes(N, SLOT, depth)));
        let threads: Vec<_> = (0..N)
            .map(|me| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    let r = unsafe { NodeRegion::from_raw(mem.p, N, SLOT, depth) };
                    for g in 1..=GENS {
                        let root = (g % N as u64) as usize;
                        if me == root {
                            r.wait_free(g, &mut || yield_idle()).unwrap();
                            let a = r.area(root, g) as *mut u64;
                            for w in 0..SLOT / 8 {
                                unsafe { a.add(w).write_volatile(g) };
                            }
                            r.set(me, Flag::Published, g);
                        } else {
                            r.wait(|s| s.reached(root, Flag::Published, g), &mut || {
                                yield_idle()
                            })
                            .unwrap();
                            let a = r.area(root, g) as *const u64;
                            for w in 0..SLOT / 8 {
                                assert_eq!(unsafe { a.add(w).read_volatile() }, g);
                            }
                        }
                        r.set(me, Flag::Done, g);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn idle_errors_end_a_wait_and_regions_map_across_handles() {
        let r0 = {
            let job = format!("nr{}", std::process::id());
            let mut a = NodeRegion::create(&job, Gpid::new(1), 5, 2, 100, 2).unwrap();
            assert_eq!(a.slot_bytes(), CTL_BYTES, "rounded to a control block");
            let b = NodeRegion::open(&job, &a.desc().unwrap(), 2, 100, 2).unwrap();
            a.set(0, Flag::Reduced, 9);
            assert!(b.reached(0, Flag::Reduced, 9) && !b.reached(0, Flag::Reduced, 10));
            unsafe { *a.result(3) = 7 };
            assert_eq!(unsafe { *b.result(1) }, 7, "same ring position, same area");
            assert!(
                NodeRegion::open(&job, &a.desc().unwrap(), 4, 100, 2).is_err(),
                "too small"
            );
            a.unlink();
            assert!(NodeRegion::open(&job, &a.desc().unwrap(), 2, 100, 2).is_err());
            b
        };
        let mut calls = 0;
        let e = r0.wait_all(Flag::Done, 1, &mut || {
            calls += 1;
            if calls == 3 {
                Err("gave up")
            } else {
                Ok(())
            }
        });
        assert_eq!(e, Err("gave up"));
    }
}
