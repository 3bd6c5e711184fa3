//! Single copy between the processes of one host: the shared-memory transport's `expose`,
//! `get`, `put` and `retract`.
//!
//! A region is described as `pid: u32, addr: u64, slot: u32, chunk: u32` (little endian):
//! the owner's process id and the address of the memory in its address space, and, when the
//! owner offers to help with the copy, its copy slot + 1 in the low 16 bits of `slot` and an
//! exposure number in the high 16, and the chunk size (`slot` and `chunk` 0 otherwise).
//!
//! A reader (`get`) without a slot moves the bytes with one `process_vm_readv` ([`cma`]). With
//! a slot the copy is cooperative ([`coop`]): the reader sends the owner a help request (a
//! control record of this transport: header byte 0 is `CONTROL_KIND`, byte 1 [`CTL_HELP`],
//! the payload a [`Help`]), and from then on both claim chunks through the slot: the reader
//! reads its chunks, the owner writes its chunks into the reader (`process_vm_writev`). The
//! reader's copy ends when every chunk is done; the protocol layer learns it through
//! `FrameSink::on_got`.
//!
//! Invariants:
//! - A slot is reset when it is handed out by `expose`, and goes back to the pool only at
//!   `retract`, which also drops the owner's help job for it: a help request that arrives late
//!   (after the reader finished alone) finds every chunk claimed and copies nothing, and it can
//!   never claim chunks of the slot's next message.
//! - The owner checks a help request against what it exposed (slot in use by the same
//!   exposure, for that peer, range inside the region) before it writes a byte, so a request
//!   that arrives after its region was retracted (it may come over another channel than the
//!   protocol's finish) is dropped even when the slot is exposed again.

use std::collections::VecDeque;

use super::{cma, coop};
use crate::transport::{Copied, CopyError, FrameSink, Gpid, Region, Span, Token, HEADER_LEN};

/// Control record: help with a cooperative copy.
pub const CTL_HELP: u8 = 1;

/// What a region says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionDesc {
    pub pid: u32,
    pub addr: u64,
    /// Copy slot + 1 (low 16 bits) and exposure number (high 16), or 0: no help offered.
    pub slot: u32,
    pub chunk: u32,
}

impl RegionDesc {
    /// The owner's copy slot, when it offers help.
    pub fn slot_index(&self) -> Option<u32> {
        (self.slot & 0xffff).checked_sub(1)
    }
}

impl RegionDesc {
    pub fn encode(&self) -> Region {
        let mut b = [0u8; crate::transport::REGION_LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..12].copy_from_slice(&self.addr.to_le_bytes());
        b[12..16].copy_from_slice(&self.slot.to_le_bytes());
        b[16..20].copy_from_slice(&self.chunk.to_le_bytes());
        Region(b)
    }

    pub fn decode(r: &Region) -> Result<RegionDesc, CopyError> {
        let b = &r.0;
        let d = RegionDesc {
            pid: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            addr: u64::from_le_bytes(b[4..12].try_into().expect("8")),
            slot: u32::from_le_bytes(b[12..16].try_into().expect("4")),
            chunk: u32::from_le_bytes(b[16..20].try_into().expect("4")),
        };
        if d.pid == 0 || d.addr == 0 || (d.slot != 0 && (d.chunk == 0 || d.slot & 0xffff == 0)) {
            return Err(CopyError::BadRegion);
        }
        Ok(d)
    }
}

/// A help request: the owner writes chunks of its region into the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Help {
    /// The region's slot word (slot + 1 and exposure number, see [`RegionDesc`]).
    pub slot: u32,
    pub chunks: u32,
    pub chunk: u32,
    /// The reader's process id.
    pub pid: u32,
    /// Where byte `offset` of the region goes in the reader.
    pub dst: u64,
    /// Byte offset into the region, and bytes to copy.
    pub offset: u64,
    pub len: u64,
}

impl Help {
    pub const LEN: usize = 40;

    pub fn encode(&self) -> [u8; Help::LEN] {
        let mut b = [0u8; Help::LEN];
        b[0..4].copy_from_slice(&self.slot.to_le_bytes());
        b[4..8].copy_from_slice(&self.chunks.to_le_bytes());
        b[8..12].copy_from_slice(&self.chunk.to_le_bytes());
        b[12..16].copy_from_slice(&self.pid.to_le_bytes());
        b[16..24].copy_from_slice(&self.dst.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub fn decode(p: &[u8]) -> Option<Help> {
        if p.len() != Help::LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8"));
        let h = Help {
            slot: u32_at(0),
            chunks: u32_at(4),
            chunk: u32_at(8),
            pid: u32_at(12),
            dst: u64_at(16),
            offset: u64_at(24),
            len: u64_at(32),
        };
        (h.chunk > 0 && h.len.div_ceil(h.chunk as u64) == h.chunks as u64).then_some(h)
    }

    pub fn header() -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = crate::transport::CONTROL_KIND;
        h[1] = CTL_HELP;
        h
    }
}

/// Byte range of chunk `k` of a copy of `len` bytes in chunks of `chunk`.
fn chunk_range(k: u32, chunk: usize, len: usize) -> (usize, usize) {
    let start = k as usize * chunk;
    (start, (len - start).min(chunk))
}

/// A region we exposed with a copy slot.
#[derive(Debug, Clone, Copy)]
struct Exposed {
    /// The region's slot word.
    word: u32,
    peer: Gpid,
    buf: *const u8,
    len: usize,
}

/// A cooperative copy this process takes part in.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// We read: claim chunks from the owner's slot until none is left, then wait for the
    /// owner's chunks.
    Read {
        token: Token,
        slots: coop::CoopSlots,
        cslot: u32,
        chunks: u32,
        chunk: usize,
        pid: u32,
        src: u64,
        dst: *mut u8,
        len: usize,
    },
    /// We own the region: write chunks into the reader while any is left.
    Help {
        cslot: u32,
        chunks: u32,
        chunk: usize,
        pid: u32,
        src: *const u8,
        dst: u64,
        len: usize,
    },
}

/// The single-copy state of one process's shared-memory transport.
pub struct Copier {
    pid: u32,
    own: Option<coop::CoopSlots>,
    pub(super) pool: coop::SlotPool,
    /// By own slot: what it exposes.
    exposed: Vec<Option<Exposed>>,
    jobs: Vec<Job>,
    /// Help requests that found no room in the peer's channel yet.
    pub out: VecDeque<(Gpid, [u8; Help::LEN])>,
    /// Smallest region (bytes) copied cooperatively; 0: never.
    pub min: usize,
    pub chunk: usize,
    /// Help requests dropped because they did not match what we exposed.
    pub bad_requests: u64,
    /// Exposures so far (the high half of a slot word).
    exposures: u16,
}

impl Copier {
    pub fn new(own: Option<coop::CoopSlots>, min: usize, chunk: usize) -> Copier {
        let n = own.map_or(0, |o| o.len());
        Copier {
            pid: std::process::id(),
            own,
            pool: coop::SlotPool::new(n),
            exposed: vec![None; n as usize],
            jobs: Vec::new(),
            out: VecDeque::new(),
            min,
            chunk: chunk.max(1),
            bad_requests: 0,
            exposures: 0,
        }
    }

    pub fn busy(&self) -> bool {
        !self.jobs.is_empty() || !self.out.is_empty()
    }

    /// Describe `len` bytes at `buf` to `peer`, with a copy slot when the copy is large enough
    /// to share and one is free.
    pub fn expose(&mut self, peer: Gpid, span: Span) -> Region {
        let (buf, len) = (span.ptr() as *const u8, span.len());
        let slot = match self.own {
            Some(own) if self.min > 0 && len >= self.min => self
                .pool
                .take()
                .filter(|&s| s < 0xffff)
                .inspect(|&s| own.reset(s)),
            _ => None,
        };
        let mut word = 0;
        if let Some(s) = slot {
            self.exposures = self.exposures.wrapping_add(1);
            word = (self.exposures as u32) << 16 | (s + 1);
            self.exposed[s as usize] = Some(Exposed {
                word,
                peer,
                buf,
                len,
            });
        }
        RegionDesc {
            pid: self.pid,
            addr: buf as u64,
            slot: word,
            chunk: if slot.is_some() { self.chunk as u32 } else { 0 },
        }
        .encode()
    }

    /// The peer is done with the region: its slot goes back to the pool, and our help job for
    /// it, if any, goes away first.
    pub fn retract(&mut self, region: &Region) {
        let Ok(d) = RegionDesc::decode(region) else {
            return;
        };
        let Some(s) = d.slot_index().filter(|_| d.pid == self.pid) else {
            return;
        };
        let current = self.exposed.get(s as usize).copied().flatten();
        if current.is_none_or(|e| e.word != d.slot) {
            return;
        }
        self.jobs
            .retain(|j| !matches!(*j, Job::Help { cslot, .. } if cslot == s));
        if let Some(e) = self.exposed.get_mut(s as usize) {
            *e = None;
        }
        self.pool.put(s);
    }

    /// Read `dst.len()` bytes at `offset` of a peer's region into `dst`. `peer_slots`: the
    /// owner's copy slots as mapped here. Ok(Pending): a help request was queued in
    /// `self.out`.
    pub fn get(
        &mut self,
        peer: Gpid,
        peer_slots: Option<coop::CoopSlots>,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        let len = dst.len();
        let d = RegionDesc::decode(region)?;
        if len == 0 {
            return Ok(Copied::Done);
        }
        let src = d
            .addr
            .checked_add(offset as u64)
            .ok_or(CopyError::BadRegion)?;
        let chunk = d.chunk as usize;
        let chunks = if chunk > 0 { len.div_ceil(chunk) } else { 0 };
        if let (Some(slots), Some(cslot)) = (peer_slots, d.slot_index()) {
            if cslot < slots.len() && chunks <= u32::MAX as usize {
                self.jobs.push(Job::Read {
                    token,
                    slots,
                    cslot,
                    chunks: chunks as u32,
                    chunk,
                    pid: d.pid,
                    src,
                    dst: dst.ptr(),
                    len,
                });
                let help = Help {
                    slot: d.slot,
                    chunks: chunks as u32,
                    chunk: d.chunk,
                    pid: self.pid,
                    dst: dst.ptr() as u64,
                    offset: offset as u64,
                    len: len as u64,
                };
                self.out.push_back((peer, help.encode()));
                return Ok(Copied::Pending);
            }
        }
        // SAFETY: `dst` is writable and ours alone until the copy ends (Span's contract), and
        // this copy ends here.
        let dst = unsafe { dst.as_mut_slice() };
        cma::read_from(d.pid, src, dst)
            .map(|()| Copied::Done)
            .map_err(|e| CopyError::Refused(e.to_string()))
    }

    /// Write `src` into a peer's region at `offset`.
    pub fn put(&mut self, region: &Region, offset: usize, src: Span) -> Result<Copied, CopyError> {
        let d = RegionDesc::decode(region)?;
        if src.is_empty() {
            return Ok(Copied::Done);
        }
        let dst = d
            .addr
            .checked_add(offset as u64)
            .ok_or(CopyError::BadRegion)?;
        // SAFETY: `src` is readable until the copy ends (Span's contract): here.
        let src = unsafe { src.as_slice() };
        cma::write_to(d.pid, dst, src)
            .map(|()| Copied::Done)
            .map_err(|e| CopyError::Refused(e.to_string()))
    }

    /// A help request from `from` arrived.
    pub fn on_help(&mut self, from: Gpid, payload: &[u8]) {
        let Some(h) = Help::decode(payload) else {
            self.bad_requests += 1;
            return;
        };
        let s = (h.slot & 0xffff).wrapping_sub(1) as usize;
        let ok = match self.exposed.get(s).copied().flatten() {
            Some(e) => {
                e.word == h.slot
                    && e.peer == from
                    && h.offset
                        .checked_add(h.len)
                        .is_some_and(|end| end <= e.len as u64)
            }
            None => false,
        };
        if !ok {
            self.bad_requests += 1;
            return;
        }
        let e = self.exposed[s].expect("checked");
        self.jobs.push(Job::Help {
            cslot: s as u32,
            chunks: h.chunks,
            chunk: h.chunk as usize,
            pid: h.pid,
            // SAFETY: offset + len <= the exposed length (checked above).
            src: unsafe { e.buf.add(h.offset as usize) },
            dst: h.dst,
            len: h.len as usize,
        });
    }

    /// Do the copying of the jobs in progress; report the reads that ended.
    pub fn run<S: FrameSink>(&mut self, sink: &mut S) {
        let mut i = 0;
        while i < self.jobs.len() {
            let finished = match self.jobs[i] {
                Job::Read { .. } => self.read(self.jobs[i], sink),
                Job::Help { .. } => self.help(self.jobs[i]),
            };
            if finished {
                self.jobs.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Our side of a cooperative read. True when the copy is complete (and reported).
    fn read<S: FrameSink>(&mut self, job: Job, sink: &mut S) -> bool {
        let Job::Read {
            token,
            slots,
            cslot,
            chunks,
            chunk,
            pid,
            src,
            dst,
            len,
        } = job
        else {
            return true;
        };
        let mut failed = None;
        let mut copy = |k: u32| {
            let (at, n) = chunk_range(k, chunk, len);
            // SAFETY: at + n <= len, inside the destination the caller gave `get`.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.add(at), n) };
            if let Err(e) = cma::read_from(pid, src + at as u64, d) {
                failed = Some(e);
            }
        };
        while let Some(k) = slots.claim(cslot, chunks) {
            copy(k);
            slots.finish(cslot);
        }
        if slots.done(cslot) < chunks {
            return false; // the owner is still copying its chunks
        }
        if let Some(k) = slots.take_back(cslot) {
            copy(k);
        }
        sink.on_got(
            token,
            match failed {
                None => Ok(()),
                Some(e) => Err(e.to_string()),
            },
        );
        true
    }

    /// Our side as the owner: copy chunks while any is left. Always finishes.
    fn help(&mut self, job: Job) -> bool {
        let Job::Help {
            cslot,
            chunks,
            chunk,
            pid,
            src,
            dst,
            len,
        } = job
        else {
            return true;
        };
        let Some(own) = self.own else {
            return true;
        };
        while let Some(k) = own.claim(cslot, chunks) {
            let (at, n) = chunk_range(k, chunk, len);
            // SAFETY: at + n <= len <= what is exposed past `src` (checked in on_help); the
            // memory stays valid until the region is retracted, which drops this job.
            let s = unsafe { std::slice::from_raw_parts(src.add(at), n) };
            if cma::write_to(pid, dst + at as u64, s).is_err() {
                // The reader copies this chunk itself; stop helping.
                own.give_back(cslot, k);
                own.finish(cslot);
                break;
            }
            own.finish(cslot);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_help_requests_roundtrip_and_reject_garbage() {
        let d = RegionDesc {
            pid: 7,
            addr: 0x1000,
            slot: 5 << 16 | 3,
            chunk: 4096,
        };
        assert_eq!(d.slot_index(), Some(2));
        assert_eq!(RegionDesc::decode(&d.encode()), Ok(d));
        assert_eq!(RegionDesc::decode(&Region::NONE), Err(CopyError::BadRegion));
        let no_chunk = RegionDesc { chunk: 0, ..d }.encode();
        assert_eq!(RegionDesc::decode(&no_chunk), Err(CopyError::BadRegion));
        let no_slot = RegionDesc { slot: 5 << 16, ..d }.encode();
        assert_eq!(RegionDesc::decode(&no_slot), Err(CopyError::BadRegion));
        let h = Help {
            slot: 1,
            chunks: 3,
            chunk: 10,
            pid: 9,
            dst: 0x2000,
            offset: 5,
            len: 25,
        };
        assert_eq!(Help::decode(&h.encode()), Some(h));
        assert_eq!(Help::decode(&h.encode()[..39]), None);
        // A chunk count that does not cover the length exactly is refused.
        assert_eq!(Help::decode(&Help { chunks: 4, ..h }.encode()), None);
        assert_eq!(Help::decode(&Help { chunk: 0, ..h }.encode()), None);
    }
}
