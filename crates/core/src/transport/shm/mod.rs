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
//! Large messages move by single copy ([`cma`]) when the kernel permits; otherwise the
//! protocol pipelines them through these channels.
//!
//! Segments are unlinked as soon as every local peer has mapped them, so nothing is left in
//! /dev/shm even if the job is killed; mpirun also removes `protean-<jobid>-*` as a safety net.

pub mod cma;
pub mod coop;
pub mod queue;
pub mod ring;

use std::ffi::CString;
use std::io;
use std::sync::atomic::Ordering;

use super::{Caps, FrameSink, Gpid, NotNow, Sent, Token, Transport};
use crate::proto::frame::HEADER_LEN;

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
        Ok(Shm {
            jobid: jobid.to_string(),
            me,
            own,
            geometry: g,
            rx_fast,
            rx_queue,
            peers: Vec::new(),
            unlinked: false,
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

    pub fn reaches(&self, peer: Gpid) -> bool {
        matches!(self.peers.get(peer as usize), Some(Some(_)))
    }

    pub fn peer_pid(&self, peer: Gpid) -> Option<u32> {
        self.peers.get(peer as usize)?.as_ref().map(|p| p.pid)
    }

    /// Cooperative-copy slots of `gpid` (our own when `gpid` is us) as mapped here.
    pub fn coop_slots(&self, gpid: Gpid) -> Option<coop::CoopSlots> {
        if gpid == self.me {
            // SAFETY: our own segment holds the slot array at the end of its geometry.
            return Some(unsafe {
                coop::CoopSlots::new(
                    self.own.base.add(self.geometry.coop_off()),
                    self.geometry.coop as u32,
                )
            });
        }
        self.peers.get(gpid as usize)?.as_ref().map(|p| p.coop)
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
    pub fn push(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
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

    #[inline]
    pub fn poll<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        for (from, rx) in self.rx_fast.iter_mut() {
            let from = *from;
            let mut k = 0;
            while k < 64 && rx.pop(|h, p| sink.on_frame(from, h, p)) {
                k += 1;
            }
            n += k;
        }
        let mut k = 0;
        while k < 64 && self.rx_queue.pop(|from, h, p| sink.on_frame(from, h, p)) {
            k += 1;
        }
        n + k
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

    fn caps(&self, peer: Gpid) -> Caps {
        Caps {
            reliable: true,
            ordered: true,
            max_payload: self.max_payload(peer),
            single_copy: true,
        }
    }

    fn send(
        &mut self,
        peer: Gpid,
        hdr: &[u8; HEADER_LEN],
        small: &[u8],
        body: &[u8],
        _token: Token,
    ) -> Result<Sent, NotNow> {
        if self.push(peer, hdr, &[small, body]) {
            Ok(Sent::Done)
        } else {
            Err(NotNow)
        }
    }

    fn progress<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        self.poll(sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::frame::{Envelope, Frame};

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

    struct Collect(Vec<(Gpid, Frame, Vec<u8>)>);
    impl FrameSink for Collect {
        fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            self.0
                .push((from, Frame::decode(hdr).unwrap(), payload.to_vec()));
        }
    }

    fn eager(seq: u32) -> [u8; HEADER_LEN] {
        Frame::Eager {
            env: Envelope {
                ctx: 0,
                src: 0,
                tag: 1,
            },
            seq,
            sreq: 0,
            sync: false,
        }
        .encode()
    }

    /// Two "processes" in one: each creates its segment, both attach, frames flow both ways
    /// over fast channels, and over the shared queue when channels are disabled.
    #[test]
    fn segments_carry_frames() {
        for nfast in [2usize, 0] {
            let jobid = format!("unittest{}x{}", std::process::id(), nfast);
            let g = Geometry::new(nfast, 8192, 4, 1024, 4);
            let local = [0u32, 1];
            let mut a = Shm::create(&jobid, 0, &local, g).unwrap();
            let mut b = Shm::create(&jobid, 1, &local, g).unwrap();
            a.attach(&local, 2).unwrap();
            b.attach(&local, 2).unwrap();
            a.unlink();
            b.unlink();
            assert!(!std::path::Path::new(&format!("/dev/shm/protean-{jobid}-0")).exists());
            assert_eq!(a.has_fast_channel(1), nfast > 0);
            let big = vec![7u8; a.max_payload(1) - 2];
            let mut sent = 0;
            while a.push(1, &eager(sent), &[b"hi", &big]) {
                sent += 1;
            }
            assert!(sent >= 2, "sent {sent}");
            let mut sink = Collect(vec![]);
            let mut got = 0;
            while got < sent as usize {
                got += b.poll(&mut sink);
            }
            for (i, (from, f, p)) in sink.0.iter().enumerate() {
                assert_eq!(*from, 0);
                assert_eq!(*f, Frame::decode(&eager(i as u32)).unwrap());
                assert_eq!(&p[..2], b"hi");
                assert_eq!(p.len(), 2 + big.len());
            }
            assert!(b.push(0, &eager(0), &[b"back"]));
            let mut sink = Collect(vec![]);
            assert_eq!(a.poll(&mut sink), 1);
            assert_eq!(sink.0[0].2, b"back");
        }
    }
}
