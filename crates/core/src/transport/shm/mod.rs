//! Shared-memory transport between processes on one host.
//!
//! Each process creates one segment, `/dev/shm/protean-<jobid>-<gpid>`, that holds what it
//! *receives*:
//! ```text
//! [0..4096)        segment header (magic, version, pid, geometry)
//! [4096..)         the shared receive queue (any local peer posts here)      queue.rs
//! then             `nfast` dedicated fast channels (one sender each)         ring.rs
//! ```
//! Senders map every local peer's segment. A sender uses its dedicated fast channel in the
//! receiver's segment when it owns one, else the shared queue; both preserve the order of one
//! sender's frames, and the engine's per-peer sequence numbers keep matching order when a peer
//! moves between them. Fast channels are assigned at setup when every local peer fits
//! (`local peers <= shm_fast_channels`); the channel's `owner` word records the sender so the
//! set can be changed at run time by the reconfiguration manager (drain, then reassign).
//!
//! Large messages move by single copy when the kernel permits ([`copy`]: the transport's
//! `expose`/`get`, with cross-memory attach and the cooperative copy); otherwise the protocol
//! pipelines them through these channels.
//!
//! Segments are unlinked as soon as every local peer has mapped them, so nothing is left in
//! /dev/shm even if the job is killed; mpirun also removes `protean-<jobid>-*` as a safety net.

pub mod cma;
pub mod coop;
pub mod copy;
pub mod queue;
pub mod ring;

use std::ffi::CString;
use std::io;
use std::sync::atomic::Ordering;

use super::{
    Caps, Copied, CopyError, FrameSink, Gpid, Region, SendError, Sent, Span, Token, Transport,
    CONTROL_KIND, HEADER_LEN,
};
use copy::Copier;

const MAGIC: u64 = u64::from_le_bytes(*b"PROTEAN1");
const VERSION: u32 = 2;
const SEG_HDR: usize = 4096;

/// Geometry of a segment; every segment records its own in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub nfast: usize,
    pub ring_bytes: usize,
    pub cells: usize,
    pub cell_bytes: usize,
    /// Cooperative-copy slots this process offers as a sender.
    pub coop: usize,
}

impl Geometry {
    /// Round the configured values to what the structures need.
    pub fn new(
        nfast: usize,
        ring_bytes: usize,
        cells: usize,
        cell_bytes: usize,
        coop: usize,
    ) -> Geometry {
        Geometry {
            coop,
            nfast,
            ring_bytes: ring_bytes.next_power_of_two().max(4096),
            cells: cells.max(2),
            cell_bytes: cell_bytes.max(queue::CELL_HDR + 64).div_ceil(64) * 64,
        }
    }

    fn queue_off(&self) -> usize {
        SEG_HDR
    }
    fn channel_off(&self, k: usize) -> usize {
        let q = queue::queue_bytes(self.cells, self.cell_bytes).div_ceil(4096) * 4096;
        SEG_HDR + q + k * ring::channel_bytes(self.ring_bytes)
    }
    fn coop_off(&self) -> usize {
        self.channel_off(self.nfast)
    }
    pub fn total(&self) -> usize {
        self.coop_off() + self.coop * coop::SLOT_BYTES
    }
}

/// A mapped segment.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len came from a successful mmap and nothing uses them after drop (the
        // transport drops its Tx/Rx views together with the mappings).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

fn shm_name(jobid: &str, gpid: Gpid) -> CString {
    CString::new(format!("/protean-{jobid}-{gpid}")).expect("job id without NUL")
}

fn map_fd(fd: libc::c_int, len: usize) -> io::Result<Mapping> {
    // SAFETY: mapping a shared-memory fd we just opened; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping {
        base: p.cast(),
        len,
    })
}

/// Header words at the start of a segment.
#[repr(C)]
struct SegHeader {
    magic: u64,
    version: u32,
    pid: u32,
    nfast: u32,
    ring_bytes: u32,
    cells: u32,
    cell_bytes: u32,
    total: u64,
    coop: u32,
}

/// Create and initialise this process's receive segment.
fn create_segment(
    jobid: &str,
    me: Gpid,
    g: &Geometry,
    owners: &[Option<Gpid>],
) -> io::Result<Mapping> {
    let name = shm_name(jobid, me);
    // SAFETY: plain shm_open/ftruncate/close on a name we own; results are checked.
    let fd = unsafe {
        libc::shm_open(
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
            0o600,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("shm_open {}: {e}", name.to_string_lossy()),
        ));
    }
    let total = g.total();
    // SAFETY: fd is valid.
    if unsafe { libc::ftruncate(fd, total as libc::off_t) } != 0 {
        let e = io::Error::last_os_error();
        unsafe {
            libc::close(fd);
            libc::shm_unlink(name.as_ptr());
        }
        return Err(io::Error::new(
            e.kind(),
            format!("cannot size a {total}-byte shared-memory segment: {e}"),
        ));
    }
    let m = map_fd(fd, total);
    // SAFETY: fd is valid; the mapping (if any) keeps the memory.
    unsafe { libc::close(fd) };
    let m = m.inspect_err(|_| unsafe {
        libc::shm_unlink(name.as_ptr());
    })?;
    // SAFETY: the mapping is fresh, private to us until the setup barrier, and `total` bytes
    // long; every offset below is inside it by construction of Geometry.
    unsafe {
        let h = m.base as *mut SegHeader;
        (*h).version = VERSION;
        (*h).pid = std::process::id();
        (*h).nfast = g.nfast as u32;
        (*h).ring_bytes = g.ring_bytes as u32;
        (*h).cells = g.cells as u32;
        (*h).cell_bytes = g.cell_bytes as u32;
        (*h).total = total as u64;
        (*h).coop = g.coop as u32;
        queue::init_queue(m.base.add(g.queue_off()), g.cells, g.cell_bytes);
        for k in 0..g.nfast {
            let c = m.base.add(g.channel_off(k));
            ring::init_channel(c, g.ring_bytes);
            if let Some(Some(o)) = owners.get(k) {
                ring::owner(c).store(o + 1, Ordering::Relaxed);
            }
        }
        std::sync::atomic::fence(Ordering::Release);
        (*h).magic = MAGIC;
    }
    Ok(m)
}

/// Map a peer's segment and read its geometry.
fn open_segment(jobid: &str, peer: Gpid) -> io::Result<(Mapping, Geometry, u32)> {
    let name = shm_name(jobid, peer);
    // SAFETY: opening an existing segment read-write; checked.
    let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("shm_open {}: {e}", name.to_string_lossy()),
        ));
    }
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd valid, st is a properly sized out-parameter.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_size as usize) < SEG_HDR {
        unsafe { libc::close(fd) };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "peer segment too small",
        ));
    }
    let m = map_fd(fd, st.st_size as usize);
    unsafe { libc::close(fd) };
    let m = m?;
    // SAFETY: the mapping is at least SEG_HDR bytes; the creator wrote the header before the
    // setup barrier that precedes this call.
    let h = unsafe { &*(m.base as *const SegHeader) };
    if h.magic != MAGIC || h.version != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "peer segment has a wrong magic or version",
        ));
    }
    let g = Geometry {
        nfast: h.nfast as usize,
        ring_bytes: h.ring_bytes as usize,
        cells: h.cells as usize,
        cell_bytes: h.cell_bytes as usize,
        coop: h.coop as usize,
    };
    if g.total() as u64 != h.total || h.total as usize > m.len || !g.ring_bytes.is_power_of_two() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "peer segment geometry is inconsistent",
        ));
    }
    Ok((m, g, h.pid))
}

/// A control record of this transport arrived: keep it for `run_copies`.
#[cold]
fn control(
    ctl: &mut Vec<(Gpid, u8, Vec<u8>)>,
    copying: &mut bool,
    from: Gpid,
    h: &[u8; HEADER_LEN],
    p: &[u8],
) {
    ctl.push((from, h[1], p.to_vec()));
    *copying = true;
}

/// Remove this process's segment name (the memory stays mapped).
fn unlink_segment(jobid: &str, me: Gpid) {
    let name = shm_name(jobid, me);
    // SAFETY: unlinking a name; failure (already gone) is harmless.
    unsafe { libc::shm_unlink(name.as_ptr()) };
}

struct Peer {
    _map: Mapping,
    pid: u32,
    coop: coop::CoopSlots,
    queue: queue::Producer,
    fast: Option<ring::Tx>,
    /// Largest payload the channel in use carries.
    max_payload: usize,
}

/// The shared-memory transport of one process.
pub struct Shm {
    jobid: String,
    me: Gpid,
    own: Mapping,
    geometry: Geometry,
    /// Dedicated channels we receive on, with the sender they belong to.
    rx_fast: Vec<(Gpid, ring::Rx)>,
    rx_queue: queue::Consumer,
    /// Indexed by gpid; None for processes not on this host (and for ourselves).
    peers: Vec<Option<Peer>>,
    unlinked: bool,
    /// Single copy: regions we exposed, copies in progress.
    copier: Copier,
    /// Control records that arrived during a poll, handled after it: (from, op, payload).
    ctl_in: Vec<(Gpid, u8, Vec<u8>)>,
    /// Control records arrived or copies are in progress: `progress` has more to do than
    /// poll (one load on the path of an idle poll).
    copying: bool,
}

/// Fast-channel slot that `sender` uses in `receiver`'s segment under the static assignment,
/// where `local` lists the gpids on this host in ascending order.
fn static_slot(local: &[Gpid], receiver: Gpid, sender: Gpid, nfast: usize) -> Option<usize> {
    if local.len().saturating_sub(1) > nfast || receiver == sender {
        return None;
    }
    let mut k = 0;
    for &g in local {
        if g == receiver {
            continue;
        }
        if g == sender {
            return Some(k);
        }
        k += 1;
    }
    None
}

impl Shm {
    /// Phase 1 of setup: create our segment. `local` is every gpid on this host (us included),
    /// ascending. Call [`Shm::attach`] after every local process has created its segment.
    pub fn create(jobid: &str, me: Gpid, local: &[Gpid], g: Geometry) -> io::Result<Shm> {
        let mut owners = vec![None; g.nfast];
        for &s in local {
            if let Some(k) = static_slot(local, me, s, g.nfast) {
                owners[k] = Some(s);
            }
        }
        let own = create_segment(jobid, me, &g, &owners)?;
        // SAFETY: the queue and channels were initialised by create_segment in this mapping,
        // which the Shm keeps alive as long as these views.
        let rx_queue =
            unsafe { queue::Consumer::new(own.base.add(g.queue_off()), g.cells, g.cell_bytes) };
        let rx_fast = owners
            .iter()
            .enumerate()
            .filter_map(|(k, o)| {
                o.map(|s| {
                    (s, unsafe {
                        ring::Rx::new(own.base.add(g.channel_off(k)), g.ring_bytes)
                    })
                })
            })
            .collect();
        cma::allow_peers();
        // SAFETY: our own segment holds the slot array at the end of its geometry, mapped as
        // long as `own` (kept by the Shm with the copier).
        let slots = unsafe { coop::CoopSlots::new(own.base.add(g.coop_off()), g.coop as u32) };
        Ok(Shm {
            jobid: jobid.to_string(),
            me,
            own,
            geometry: g,
            rx_fast,
            rx_queue,
            peers: Vec::new(),
            unlinked: false,
            copier: Copier::new(Some(slots), 0, 1),
            ctl_in: Vec::new(),
            copying: false,
        })
    }

    /// Phase 2: map every local peer's segment. `nprocs` is the size of the process table.
    pub fn attach(&mut self, local: &[Gpid], nprocs: usize) -> io::Result<()> {
        self.peers
            .resize_with(nprocs.max(self.peers.len()), || None);
        for &p in local {
            if p == self.me {
                continue;
            }
            let (m, g, pid) = open_segment(&self.jobid, p)?;
            // SAFETY: offsets come from the peer's validated geometry and lie in its mapping,
            // which the Peer keeps alive with these views.
            let queue =
                unsafe { queue::Producer::new(m.base.add(g.queue_off()), g.cells, g.cell_bytes) };
            let mut fast = None;
            for k in 0..g.nfast {
                let c = unsafe { m.base.add(g.channel_off(k)) };
                if unsafe { ring::owner(c) }.load(Ordering::Acquire) == self.me + 1 {
                    fast = Some(unsafe { ring::Tx::new(c, g.ring_bytes) });
                    break;
                }
            }
            let max_payload = fast
                .as_ref()
                .map_or(queue.max_payload(), |f| f.max_payload());
            // SAFETY: the slot array lies at the end of the peer's validated geometry.
            let coop = unsafe { coop::CoopSlots::new(m.base.add(g.coop_off()), g.coop as u32) };
            self.peers[p as usize] = Some(Peer {
                _map: m,
                pid,
                coop,
                queue,
                fast,
                max_payload,
            });
        }
        Ok(())
    }

    /// Phase 3: every local peer has attached; drop the name so nothing outlives the job.
    pub fn unlink(&mut self) {
        if !self.unlinked {
            unlink_segment(&self.jobid, self.me);
            self.unlinked = true;
        }
    }

    pub fn me(&self) -> Gpid {
        self.me
    }

    pub fn peer_pid(&self, peer: Gpid) -> Option<u32> {
        self.peers.get(peer as usize)?.as_ref().map(|p| p.pid)
    }

    /// Cooperative copy: regions of at least `min` bytes (0: none) are copied by reader and
    /// owner together, in chunks of `chunk` bytes.
    pub fn set_copy(&mut self, min: usize, chunk: usize) {
        self.copier.min = min;
        self.copier.chunk = chunk.max(1);
    }

    /// Help requests dropped because they did not match what we exposed (diagnostics).
    pub fn bad_help_requests(&self) -> u64 {
        self.copier.bad_requests
    }

    pub fn has_fast_channel(&self, peer: Gpid) -> bool {
        matches!(
            self.peers.get(peer as usize),
            Some(Some(Peer { fast: Some(_), .. }))
        )
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    #[inline]
    pub fn max_payload(&self, peer: Gpid) -> usize {
        self.peers
            .get(peer as usize)
            .and_then(|p| p.as_ref())
            .map_or(0, |p| p.max_payload)
    }

    /// Post a frame; `parts` are concatenated into the payload. False means "not now".
    #[inline]
    fn push(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
        let Some(Some(p)) = self.peers.get_mut(peer as usize) else {
            return false;
        };
        match &mut p.fast {
            Some(tx) => tx.push(hdr, parts),
            None => p.queue.push(self.me, hdr, parts),
        }
    }

    /// Are frames waiting? Cheap: one load per channel.
    #[inline]
    pub fn pending(&self) -> bool {
        self.rx_fast.iter().any(|(_, rx)| rx.ready()) || self.rx_queue.ready()
    }

    /// Deliver what arrived: frames to the sink, control records to ourselves (and set
    /// `copying`, so that `progress` handles them).
    #[inline]
    fn poll<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        let ctl = &mut self.ctl_in;
        let copying = &mut self.copying;
        for (from, rx) in self.rx_fast.iter_mut() {
            let from = *from;
            let mut k = 0;
            while k < 64
                && rx.pop(|h, p| {
                    if h[0] == CONTROL_KIND {
                        control(ctl, copying, from, h, p);
                    } else {
                        sink.on_frame(from, h, p)
                    }
                })
            {
                k += 1;
            }
            n += k;
        }
        let mut k = 0;
        while k < 64
            && self.rx_queue.pop(|from, h, p| {
                if h[0] == CONTROL_KIND {
                    control(ctl, copying, from, h, p);
                } else {
                    sink.on_frame(from, h, p)
                }
            })
        {
            k += 1;
        }
        n + k
    }

    /// Handle the control records that arrived, send the ones waiting, run the copies.
    #[cold]
    fn run_copies<S: FrameSink>(&mut self, sink: &mut S) {
        for (from, op, p) in std::mem::take(&mut self.ctl_in) {
            match op {
                copy::CTL_HELP => self.copier.on_help(from, &p),
                _ => self.copier.bad_requests += 1,
            }
        }
        while let Some(&(peer, help)) = self.copier.out.front() {
            if !self.push(peer, &copy::Help::header(), &[&help]) {
                if !self.reaches(peer) {
                    self.copier.out.pop_front();
                    continue;
                }
                break;
            }
            self.copier.out.pop_front();
        }
        self.copier.run(sink);
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.unlink();
        let _ = &self.own;
    }
}

impl Transport for Shm {
    fn name(&self) -> &'static str {
        "shm"
    }

    #[inline]
    fn reaches(&self, peer: Gpid) -> bool {
        matches!(self.peers.get(peer as usize), Some(Some(_)))
    }

    fn caps(&self, peer: Gpid) -> Caps {
        match self.peers.get(peer as usize) {
            Some(Some(p)) => Caps {
                reliable: true,
                ordered: true,
                max_payload: p.max_payload,
                lanes: 1,
                get: true,
                put: true,
                queues: false,
            },
            _ => Caps::NONE,
        }
    }

    #[inline]
    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        _token: Token,
    ) -> Result<Sent, SendError> {
        if self.push(peer, hdr, &[small, body]) {
            Ok(Sent::Done)
        } else if self.reaches(peer) {
            Err(SendError::NotNow)
        } else {
            Err(SendError::Failed(format!(
                "process {peer} is not reached through shared memory"
            )))
        }
    }

    #[inline]
    fn try_send(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], body: &[u8]) -> bool {
        self.push(peer, hdr, &[body])
    }

    #[inline]
    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let n = self.poll(sink);
        if self.copying {
            self.run_copies(sink);
            self.copying = self.copier.busy();
        }
        n
    }

    fn has_work(&self) -> bool {
        self.copier.busy()
    }

    fn expose(&mut self, peer: Gpid, buf: Span) -> Option<Region> {
        (self.reaches(peer) && !buf.ptr().is_null()).then(|| self.copier.expose(peer, buf))
    }

    fn retract(&mut self, _peer: Gpid, region: &Region) {
        self.copier.retract(region);
    }

    fn get(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        let slots = match self.peers.get(peer as usize) {
            Some(Some(p)) => Some(p.coop),
            _ => {
                return Err(CopyError::Refused(format!(
                    "process {peer} is not on this host"
                )))
            }
        };
        let r = self.copier.get(peer, slots, region, offset, dst, token);
        if r == Ok(Copied::Pending) {
            self.copying = true;
            // Ask for help at once rather than at the next pass.
            while let Some(&(p, help)) = self.copier.out.front() {
                if !self.push(p, &copy::Help::header(), &[&help]) {
                    break;
                }
                self.copier.out.pop_front();
            }
        }
        r
    }

    fn put(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        src: Span,
        _token: Token,
    ) -> Result<Copied, CopyError> {
        if !self.reaches(peer) {
            return Err(CopyError::Refused(format!(
                "process {peer} is not on this host"
            )));
        }
        self.copier.put(region, offset, src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A span over memory the test keeps alive and leaves alone while it is lent.
    fn sp(ptr: *mut u8, len: usize) -> Span {
        unsafe { Span::new(ptr, len) }
    }

    #[test]
    fn static_slots_are_dense_and_distinct() {
        let local = [0, 2, 5, 7];
        for &r in &local {
            let mut seen = vec![];
            for &s in &local {
                if let Some(k) = static_slot(&local, r, s, 3) {
                    seen.push(k);
                }
            }
            seen.sort();
            assert_eq!(seen, vec![0, 1, 2]);
        }
        assert_eq!(
            static_slot(&local, 0, 2, 2),
            None,
            "too many peers for the channels"
        );
    }

    #[derive(Default)]
    struct Collect {
        frames: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
        got: Vec<(Token, Result<(), String>)>,
    }
    impl FrameSink for Collect {
        fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            self.frames.push((from, *hdr, payload.to_vec()));
        }
        fn on_got(&mut self, token: Token, result: Result<(), String>) {
            self.got.push((token, result));
        }
    }

    /// A frame header: kind 1 and a sequence number (the transport looks at neither).
    fn hdr(seq: u32) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = 1;
        h[4..8].copy_from_slice(&seq.to_le_bytes());
        h
    }

    /// Two "processes" in one: each creates its segment, both attach.
    fn pair(tag: &str, nfast: usize) -> (Shm, Shm) {
        let jobid = format!("unittest{}{tag}x{nfast}", std::process::id());
        let g = Geometry::new(nfast, 8192, 4, 1024, 4);
        let local = [0u32, 1];
        let mut a = Shm::create(&jobid, 0, &local, g).unwrap();
        let mut b = Shm::create(&jobid, 1, &local, g).unwrap();
        a.attach(&local, 2).unwrap();
        b.attach(&local, 2).unwrap();
        a.unlink();
        b.unlink();
        assert!(!std::path::Path::new(&format!("/dev/shm/protean-{jobid}-0")).exists());
        (a, b)
    }

    /// Frames flow both ways over fast channels, and over the shared queue when channels are
    /// disabled; a full channel is "not now", a process off the host a failure.
    #[test]
    fn segments_carry_frames() {
        for nfast in [2usize, 0] {
            let (mut a, mut b) = pair("frames", nfast);
            assert_eq!(a.has_fast_channel(1), nfast > 0);
            assert!(a.reaches(1) && !a.reaches(0) && !a.reaches(2));
            assert_eq!(a.caps(2), Caps::NONE);
            let big = vec![7u8; a.caps(1).max_payload - 2];
            let mut sent = 0;
            loop {
                match a.send(1, &hdr(sent), b"hi", &big, Token::NONE) {
                    Ok(Sent::Done) => sent += 1,
                    Err(SendError::NotNow) => break,
                    other => panic!("{other:?}"),
                }
            }
            assert!(sent >= 2, "sent {sent}");
            assert!(matches!(
                a.send(2, &hdr(0), b"", b"", Token::NONE),
                Err(SendError::Failed(_))
            ));
            let mut sink = Collect::default();
            let mut got = 0;
            while got < sent as usize {
                got += b.progress(&mut sink);
            }
            for (i, (from, h, p)) in sink.frames.iter().enumerate() {
                assert_eq!(*from, 0);
                assert_eq!(*h, hdr(i as u32));
                assert_eq!(&p[..2], b"hi");
                assert_eq!(p.len(), 2 + big.len());
            }
            assert!(b.try_send(0, &hdr(0), b"back"));
            let mut sink = Collect::default();
            assert_eq!(a.progress(&mut sink), 1);
            assert_eq!(sink.frames[0].2, b"back");
        }
    }

    /// Plain single copy: a region without a copy slot is read at once.
    #[test]
    fn single_copy_reads_and_writes_exposed_memory() {
        let (mut a, mut b) = pair("copy", 2);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 3) as u8).collect();
        let r = a
            .expose(1, sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        assert!(
            a.expose(2, sp(data.as_ptr() as *mut u8, 1)).is_none(),
            "not on this host"
        );
        let mut buf = vec![0u8; 4000];
        assert_eq!(
            b.get(0, &r, 1000, sp(buf.as_mut_ptr(), 4000), Token(1)),
            Ok(Copied::Done)
        );
        assert_eq!(&buf[..], &data[1000..]);
        assert_eq!(
            b.get(0, &Region::NONE, 0, sp(buf.as_mut_ptr(), 1), Token(1)),
            Err(CopyError::BadRegion)
        );
        let mut target = vec![0u8; 16];
        let t = b.expose(0, sp(target.as_mut_ptr(), 16)).unwrap();
        a.put(1, &t, 4, sp(b"abcd".as_ptr() as *mut u8, 4), Token::NONE)
            .unwrap();
        assert_eq!(&target[4..8], b"abcd");
        a.retract(1, &r);
        b.retract(0, &t);
    }

    /// Run both sides until the reader reports its copy.
    fn settle(a: &mut Shm, b: &mut Shm, sa: &mut Collect, sb: &mut Collect) {
        for _ in 0..10_000 {
            a.progress(sa);
            b.progress(sb);
            if !b.has_work() && !a.has_work() {
                return;
            }
        }
        panic!("the copy did not end");
    }

    #[test]
    fn cooperative_copy_owner_helps() {
        let (mut a, mut b) = pair("helps", 2);
        a.set_copy(1, 1000);
        let data: Vec<u8> = (0..10_500u32).map(|i| (i * 13) as u8).collect();
        let r = a
            .expose(1, sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(
            b.get(0, &r, 0, sp(buf.as_mut_ptr(), data.len()), Token(9)),
            Ok(Copied::Pending)
        );
        // The owner gets the help request first and copies every chunk.
        let (mut sa, mut sb) = (Collect::default(), Collect::default());
        a.progress(&mut sa);
        assert!(!a.has_work(), "the owner's help job ran to its end");
        assert!(sa.frames.is_empty(), "control records never reach the sink");
        // The reader finds nothing left to claim and reports the copy.
        b.progress(&mut sb);
        assert_eq!(sb.got, vec![(Token(9), Ok(()))]);
        assert_eq!(buf, data);
        a.retract(1, &r);
        assert_eq!(
            a.copier.pool.take(),
            Some(0),
            "the slot went back to the pool"
        );
    }

    #[test]
    fn cooperative_copy_reader_alone_and_given_back_chunks() {
        // The reader copies alone when the owner never helps.
        let (mut a, mut b) = pair("alone", 2);
        a.set_copy(1, 333);
        let data: Vec<u8> = (0..5000u32).map(|i| (i ^ 0xa5) as u8).collect();
        let r = a
            .expose(1, sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; 4000];
        assert_eq!(
            b.get(0, &r, 0, sp(buf.as_mut_ptr(), 4000), Token(2)),
            Ok(Copied::Pending)
        );
        let mut sb = Collect::default();
        b.progress(&mut sb);
        assert_eq!(
            sb.got,
            vec![(Token(2), Ok(()))],
            "the reader claimed every chunk"
        );
        assert_eq!(&buf[..], &data[..4000]);

        // An owner that cannot write gives its chunk back; the reader copies it.
        let (mut a, mut b) = pair("giveback", 2);
        a.set_copy(1, 1000);
        let r = a
            .expose(1, sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; data.len()];
        b.get(0, &r, 0, sp(buf.as_mut_ptr(), data.len()), Token(3))
            .unwrap();
        // Deliver the help request by hand with a reader that does not exist.
        let (_, help) = b.copier.out.pop_front().unwrap_or_else(|| {
            // It went out at once: take it back out of the owner's channel.
            let mut sa = Collect::default();
            a.poll(&mut sa);
            let (from, op, p) = a.ctl_in.pop().expect("a help request");
            assert_eq!((from, op), (1, copy::CTL_HELP));
            (from, p.try_into().unwrap())
        });
        let mut h = copy::Help::decode(&help).unwrap();
        h.pid = i32::MAX as u32; // no such process: the write fails
        a.copier.on_help(1, &h.encode());
        let (mut sa, mut sb) = (Collect::default(), Collect::default());
        settle(&mut a, &mut b, &mut sa, &mut sb);
        assert_eq!(sb.got, vec![(Token(3), Ok(()))]);
        assert_eq!(buf, data);
    }

    #[test]
    fn a_help_request_after_its_region_went_copies_nothing() {
        // The reader copies every chunk itself and its help request reaches the owner only
        // after the owner retracted the region and exposed the slot again for the next
        // message. The stale request must not copy into the finished buffer nor claim the
        // new message's chunks.
        let (mut a, mut b) = pair("stale", 2);
        a.set_copy(1, 1000);
        let data_a: Vec<u8> = (0..6000u32).map(|i| (i * 7) as u8).collect();
        let data_b: Vec<u8> = (0..6000u32).map(|i| (i * 11 + 3) as u8).collect();
        let ra = a
            .expose(1, sp(data_a.as_ptr() as *mut u8, data_a.len()))
            .unwrap();
        let mut buf_a = vec![0u8; data_a.len()];
        b.get(0, &ra, 0, sp(buf_a.as_mut_ptr(), data_a.len()), Token(4))
            .unwrap();
        let mut sb = Collect::default();
        b.progress(&mut sb);
        assert_eq!(sb.got.len(), 1, "the reader claimed every chunk");
        assert_eq!(buf_a, data_a);
        a.retract(1, &ra);
        let rb = a
            .expose(1, sp(data_b.as_ptr() as *mut u8, data_b.len()))
            .unwrap();
        assert_eq!(
            copy::RegionDesc::decode(&rb).unwrap().slot_index(),
            copy::RegionDesc::decode(&ra).unwrap().slot_index(),
            "the slot is in use again"
        );
        buf_a.fill(0xee);
        let mut sa = Collect::default();
        a.progress(&mut sa); // the stale help request arrives now
        assert_eq!(a.bad_help_requests(), 1);
        let mut buf_b = vec![0u8; data_b.len()];
        b.get(0, &rb, 0, sp(buf_b.as_mut_ptr(), data_b.len()), Token(5))
            .unwrap();
        let mut sb = Collect::default();
        settle(&mut a, &mut b, &mut sa, &mut sb);
        assert_eq!(sb.got, vec![(Token(5), Ok(()))]);
        assert!(
            buf_a.iter().all(|x| *x == 0xee),
            "nothing written after the end"
        );
        assert_eq!(buf_b, data_b);
    }
}
