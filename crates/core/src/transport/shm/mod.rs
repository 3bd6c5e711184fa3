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
//! receiver's segment when it holds one, else the shared queue; both preserve the order of one
//! sender's frames. A receiver offers at most `nfast` channels (`shm_fast_channels`, the
//! `max_fast` of the channel manager). When every local peer fits, each gets one at setup (the
//! static assignment, the channel's `owner` word names it); otherwise, and whenever the
//! channel manager says so, channels are handed over at run time: offered to a peer, taken
//! back through CONNECTED -> QUIESCE -> DISCONNECTED, and reused, with the sender's frames in
//! order across every change (the protocol is described below, before `CTL_GRANT`). A
//! channel's ring pages are touched only once a sender uses it.
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
pub mod hostmem;
pub mod noderegion;
pub mod queue;
pub mod ring;

use crate::events::{self, Event};
use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::sync::atomic::Ordering;

use super::{
    Caps, ChannelCounters, ChannelState, Copied, CopyError, FrameSink, Gpid, Region, SendError,
    Sent, Span, Token, Transport, Usage, CONTROL_KIND, HEADER_LEN,
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
) -> io::Result<(Mapping, std::os::fd::OwnedFd)> {
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
    // SAFETY: fd is valid and ours alone: it stays open (processes of another job open the
    // segment through /proc/<pid>/fd/<fd> once the name is gone; see `Shm::attach_dynamic`).
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
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
                ring::owner(c).store(o.get() + 1, Ordering::Relaxed);
            }
        }
        std::sync::atomic::fence(Ordering::Release);
        (*h).magic = MAGIC;
    }
    Ok((m, fd))
}

/// Map a peer's segment and read its geometry.
fn open_segment(jobid: &str, peer: Gpid) -> io::Result<(Mapping, Geometry, u32)> {
    open_segment_at(&shm_name(jobid, peer), true)
}

/// Map a segment by its name (`shm`) or by a path (`/proc/<pid>/fd/<fd>`) and read its
/// geometry.
fn open_segment_at(name: &CString, shm: bool) -> io::Result<(Mapping, Geometry, u32)> {
    // SAFETY: opening an existing segment read-write; checked.
    let fd = unsafe {
        if shm {
            libc::shm_open(name.as_ptr(), libc::O_RDWR, 0)
        } else {
            libc::open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC)
        }
    };
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

/// A control record of this transport arrived: keep it for `run_cold`.
#[cold]
fn control(
    ctl: &mut Vec<(Gpid, u8, Vec<u8>)>,
    cold: &mut bool,
    from: Gpid,
    h: &[u8; HEADER_LEN],
    p: &[u8],
) {
    ctl.push((from, h[1], p.to_vec()));
    *cold = true;
}

/// Remove this process's segment name (the memory stays mapped).
fn unlink_segment(jobid: &str, me: Gpid) {
    let name = shm_name(jobid, me);
    // SAFETY: unlinking a name; failure (already gone) is harmless.
    unsafe { libc::shm_unlink(name.as_ptr()) };
}

// ---------------------------------------------------------------------------------------------
// Channel changes at run time
//
// A channel in a receiver R's segment belongs to one sender S at a time. R decides (through
// `connect` and `quiesce`, called by the channel manager above the transport); the hand-over
// is four control records, each in the path that keeps S's frames in order:
//
//   R -> S  GRANT slot key pos   (R's own path to S)   S: Shared -> Switching
//   S -> R  SWITCH slot          (R's shared queue)    S: Switching -> Fast; R: Granted -> Connected
//   R -> S  REVOKE slot          (R's own path to S)   S: Fast -> Releasing; R: Connected -> Quiesce
//   S -> R  RELEASE slot         (the channel itself)  S: Releasing -> Shared; R: Quiesce -> Free
//
// Everything S sent by the queue before SWITCH was consumed before R polls the channel (the
// queue is FIFO per producer, and R starts polling when it reads SWITCH). After RELEASE, S
// writes nothing more into the channel; a frame from S that R takes from the queue while the
// channel is in QUIESCE was written after RELEASE, so R first drains the channel up to the
// RELEASE (S wrote those lines before the queue cell, and R's acquire of the cell makes them
// visible): nothing is lost, duplicated or reordered, whatever the frame's kind. S pushes a
// marker when the path has room; until then it keeps using the old path. The frame size S
// may use shrinks to what both paths carry before a change and grows after it
// (`FrameSink::on_caps`). The channel's next sender gets a fresh key and the position where
// the last one stopped, so no line is cleared (see `ring`).

/// Control record: the receiver offers a channel (payload [`ChanMsg`] with key and position).
pub const CTL_GRANT: u8 = 2;
/// Control record, by the shared queue: the sender's frames go by the channel from now on.
pub const CTL_SWITCH: u8 = 3;
/// Control record: the receiver takes the channel back.
pub const CTL_REVOKE: u8 = 4;
/// Control record, the last one in the channel: the sender's frames go by the queue from now on.
pub const CTL_RELEASE: u8 = 5;

/// Payload of the channel records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChanMsg {
    pub slot: u32,
    pub key: u64,
    pub pos: u64,
}

impl ChanMsg {
    pub const LEN: usize = 24;

    pub fn encode(&self) -> [u8; ChanMsg::LEN] {
        let mut b = [0u8; ChanMsg::LEN];
        b[0..4].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.key.to_le_bytes());
        b[16..24].copy_from_slice(&self.pos.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<ChanMsg> {
        if b.len() != ChanMsg::LEN {
            return None;
        }
        Some(ChanMsg {
            slot: u32::from_le_bytes(b[0..4].try_into().ok()?),
            key: u64::from_le_bytes(b[8..16].try_into().ok()?),
            pos: u64::from_le_bytes(b[16..24].try_into().ok()?),
        })
    }

    fn header(op: u8) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = CONTROL_KIND;
        h[1] = op;
        h
    }
}

/// How we send to one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// By its shared queue.
    Shared,
    /// Granted a channel; SWITCH not in its queue yet: frames still go by the queue.
    Switching,
    /// By our channel in its segment.
    Fast,
    /// Asked to give the channel back; RELEASE not in it yet: frames still go by the channel.
    Releasing,
}

/// A channel of ours (in our segment), as its receiver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Offered to the sender (the grant sent or waiting to go); not polled until it switches.
    Granted(Gpid),
    /// The sender writes into it; polled.
    Connected(Gpid),
    /// Taken back; polled until the sender's RELEASE.
    Quiesce(Gpid),
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    state: SlotState,
    key: u64,
    /// Where the next record starts (for a free channel: where the last sender stopped).
    pos: u64,
}

/// A channel we poll (CONNECTED or QUIESCE), with what came through it since it was handed over.
struct Polled {
    from: Gpid,
    slot: u32,
    quiesce: bool,
    rx: ring::Rx,
    frames: u64,
    bytes: u64,
}

struct Peer {
    map: Mapping,
    /// The peer's geometry (its channels are in its segment).
    g: Geometry,
    pid: u32,
    coop: coop::CoopSlots,
    queue: queue::Producer,
    /// Sending: the path in use, our producer in the peer's channel `slot` when we hold one.
    lane: Lane,
    tx: Option<ring::Tx>,
    slot: u32,
    /// Largest payload we accept for this peer: what the protocol layer was last told, or
    /// more once it is told (see the module doc of `transport`).
    max_payload: usize,
    /// Receiving: the channel of ours this peer holds, and what came by the shared path from
    /// it (and through channels it gave back).
    inbound: ChannelState,
    in_slot: u32,
    usage: Usage,
}

impl Peer {
    fn ring_max(&self) -> usize {
        ring::max_payload(self.g.ring_bytes / ring::LINE)
    }
}

/// The shared-memory transport of one process.
pub struct Shm {
    jobid: String,
    me: Gpid,
    own: Mapping,
    /// Our segment, kept open for processes of other jobs (see [`Shm::attach_dynamic`]).
    seg_fd: std::os::fd::OwnedFd,
    geometry: Geometry,
    /// Our channels, and those we poll.
    slots: Vec<Slot>,
    rx_fast: Vec<Polled>,
    rx_queue: queue::Consumer,
    /// Indexed by gpid; None for processes not on this host (and for ourselves).
    peers: Vec<Option<Peer>>,
    unlinked: bool,
    /// Single copy: regions we exposed, copies in progress.
    copier: Copier,
    /// Control records that arrived during a poll, handled after it: (from, op, payload).
    ctl_in: Vec<(Gpid, u8, Vec<u8>)>,
    /// Channel records (GRANT, REVOKE) that found no room yet, in order.
    ctl_out: VecDeque<(Gpid, u8, ChanMsg)>,
    /// Peers whose SWITCH or RELEASE waits for room.
    changing: Vec<Gpid>,
    /// Peers whose caps changed since the protocol layer was last told.
    caps_news: Vec<Gpid>,
    /// Channels in QUIESCE.
    quiescing: usize,
    /// Control records arrived, records or news wait, or copies are in progress: `progress`
    /// has more to do than poll (one load on the path of an idle poll).
    cold: bool,
    counters: ChannelCounters,
    /// Channel records that made no sense (diagnostics; tests).
    bad_records: u64,
    keys: u64,
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

/// Deliver everything in the quiesced channel of `from` (up to its RELEASE) before a frame
/// that `from` sent by the queue after it.
#[cold]
fn drain_quiesced<S: FrameSink>(
    rx_fast: &mut [Polled],
    from: Gpid,
    sink: &mut S,
    ctl: &mut Vec<(Gpid, u8, Vec<u8>)>,
    cold: &mut bool,
) {
    let Some(c) = rx_fast.iter_mut().find(|c| c.from == from && c.quiesce) else {
        return;
    };
    let (mut k, mut bytes) = (0u64, 0usize);
    while c.rx.pop(|h, p| {
        bytes += p.len();
        if h[0] == CONTROL_KIND {
            control(ctl, cold, from, h, p);
        } else {
            sink.on_frame(from, h, p)
        }
    }) {
        k += 1;
    }
    c.frames += k;
    c.bytes += bytes as u64;
}

/// Fault in the pages of `len` bytes at `at` of a shared mapping in one call
/// (`MADV_POPULATE_WRITE`, Linux 5.14; older kernels refuse it and the pages fault one by one
/// as before). It changes no byte. Used for the channels assigned at startup (the static
/// rule): a ring is 256 KiB, 64 pages that each side's mapping would otherwise fault in one at
/// a time while the first messages wait (16 ranks on the 16-core machine, a ring per peer,
/// bench/dynpeers -m 200: 4.2-5.3 against 7.1-7.7 ms). Channels handed out at run time keep
/// faulting page by page: populating a whole ring at each promotion cost more than the pages
/// a short phase touches (-m 50 online: 3.9-4.2 against 2.0-2.2 ms).
fn populate(at: *mut u8, len: usize) {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    let page = *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    });
    let start = at as usize & !(page - 1);
    let end = (at as usize + len).next_multiple_of(page);
    // SAFETY: the range lies in a mapping of ours (the caller's channel, rounded out to whole
    // pages of the same mapping); populating reads and writes nothing.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        );
    }
}

impl Shm {
    /// Phase 1 of setup: create our segment. `local` is every gpid on this host (us included),
    /// ascending. Call [`Shm::attach`] after every local process has created its segment.
    /// Every local peer gets a channel at once when they all fit (`local peers <= nfast`,
    /// the static assignment); otherwise channels are handed out at run time.
    pub fn create(jobid: &str, me: Gpid, local: &[Gpid], g: Geometry) -> io::Result<Shm> {
        let mut owners = vec![None; g.nfast];
        for &s in local {
            if let Some(k) = static_slot(local, me, s, g.nfast) {
                owners[k] = Some(s);
            }
        }
        let (own, seg_fd) = create_segment(jobid, me, &g, &owners)?;
        // SAFETY: the queue and channels were initialised by create_segment in this mapping,
        // which the Shm keeps alive as long as these views.
        let rx_queue =
            unsafe { queue::Consumer::new(own.base.add(g.queue_off()), g.cells, g.cell_bytes) };
        let mut slots = Vec::with_capacity(g.nfast);
        let mut rx_fast = Vec::new();
        for (k, o) in owners.iter().enumerate() {
            // SAFETY: as above; channel k lies inside the mapping by construction of Geometry.
            let rx = unsafe { ring::Rx::new(own.base.add(g.channel_off(k)), g.ring_bytes) };
            if o.is_some() {
                // SAFETY: as above.
                populate(
                    unsafe { own.base.add(g.channel_off(k)) },
                    ring::channel_bytes(g.ring_bytes),
                );
            }
            slots.push(Slot {
                state: o.map_or(SlotState::Free, SlotState::Connected),
                key: rx.key(),
                pos: rx.position(),
            });
            if let Some(s) = *o {
                rx_fast.push(Polled {
                    from: s,
                    slot: k as u32,
                    quiesce: false,
                    rx,
                    frames: 0,
                    bytes: 0,
                });
            }
        }
        cma::allow_peers();
        // SAFETY: our own segment holds the slot array at the end of its geometry, mapped as
        // long as `own` (kept by the Shm with the copier).
        let coop_slots = unsafe { coop::CoopSlots::new(own.base.add(g.coop_off()), g.coop as u32) };
        Ok(Shm {
            jobid: jobid.to_string(),
            me,
            own,
            seg_fd,
            geometry: g,
            slots,
            rx_fast,
            rx_queue,
            peers: Vec::new(),
            unlinked: false,
            copier: Copier::new(Some(coop_slots), 0, 1),
            ctl_in: Vec::new(),
            ctl_out: VecDeque::new(),
            changing: Vec::new(),
            caps_news: Vec::new(),
            quiescing: 0,
            cold: false,
            counters: ChannelCounters::default(),
            bad_records: 0,
            keys: ring::new_key() ^ (u64::from(me.get()) << 20),
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
            let seg = open_segment(&self.jobid, p)?;
            self.add_peer(p, seg, true);
        }
        Ok(())
    }

    /// Where processes of another job on this host open our segment: our pid and the
    /// descriptor (its name is unlinked once the job's own processes mapped it).
    pub fn segment_fd(&self) -> (u32, i32) {
        (
            std::process::id(),
            std::os::fd::AsRawFd::as_raw_fd(&self.seg_fd),
        )
    }

    /// A process of another job on this host (spawned, or connected) joins: map its segment
    /// through `/proc/<pid>/fd/<fd>` (the kernel allows it to processes that may read the
    /// owner's memory, which single copy needs anyway) and send to it by its shared queue.
    pub fn attach_dynamic(
        &mut self,
        peer: Gpid,
        pid: u32,
        fd: i32,
        nprocs: usize,
    ) -> io::Result<()> {
        self.peers
            .resize_with(nprocs.max(self.peers.len()), || None);
        let path = CString::new(format!("/proc/{pid}/fd/{fd}")).expect("no NUL");
        let seg = open_segment_at(&path, false)?;
        if seg.2 != pid {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/proc/{pid}/fd/{fd} is not the segment of process {pid}"),
            ));
        }
        self.add_peer(peer, seg, false);
        Ok(())
    }

    /// A process of another job left (disconnected): unmap its segment, and take back the
    /// channel of ours it held or was offered. Nothing of it is in flight any more
    /// (MPI_Comm_disconnect completed all communication first), and a channel is rekeyed
    /// before it is granted again, so a late record of the old sender cannot be read.
    pub fn detach(&mut self, peer: Gpid) {
        if let Some(p) = self.peers.get_mut(peer.idx()) {
            *p = None;
        }
        // The owner marks of our channels stay: a new process that mpirun gives the peer's
        // number attaches us as another job's process, which takes channels by grants only
        // (`add_peer`'s `marks`), so a stale mark cannot mislead it.
        for k in 0..self.slots.len() {
            let held = match self.slots[k].state {
                SlotState::Granted(q) | SlotState::Connected(q) => q == peer,
                SlotState::Quiesce(q) if q == peer => {
                    self.quiescing -= 1;
                    true
                }
                _ => false,
            };
            if !held {
                continue;
            }
            let mut pos = self.slots[k].pos;
            if let Some(i) = self.rx_fast.iter().position(|c| c.slot == k as u32) {
                let c = self.rx_fast.swap_remove(i);
                pos = c.rx.position();
                self.counters.usage.fast_frames += c.frames;
                self.counters.usage.fast_bytes += c.bytes;
            }
            self.slots[k] = Slot {
                state: SlotState::Free,
                key: self.slots[k].key,
                pos,
            };
            self.counters.demotions += 1;
            events::raise(Event::ChanDemoted, || [peer.get() as i64]);
        }
    }

    /// `marks`: take a channel of the peer's marked as ours at its creation (processes of one
    /// job, channels assigned at startup). A process of another job attaching later gets its
    /// channels by grants only: a mark under its number can be one that an ended process of
    /// that number left (mpirun reuses numbers) in a segment whose owner has not detached it.
    fn add_peer(&mut self, p: Gpid, (m, g, pid): (Mapping, Geometry, u32), marks: bool) {
        // SAFETY: offsets come from the peer's validated geometry and lie in its mapping,
        // which the Peer keeps alive with these views.
        let queue =
            unsafe { queue::Producer::new(m.base.add(g.queue_off()), g.cells, g.cell_bytes) };
        let mut tx = None;
        let mut slot = 0;
        let marked = if marks { g.nfast } else { 0 };
        for k in 0..marked {
            let c = unsafe { m.base.add(g.channel_off(k)) };
            if unsafe { ring::owner(c) }.load(Ordering::Acquire) == self.me.get() + 1 {
                tx = Some(unsafe { ring::Tx::new(c, g.ring_bytes) });
                populate(c, ring::channel_bytes(g.ring_bytes));
                slot = k as u32;
                break;
            }
        }
        let max_payload = tx.as_ref().map_or(queue.max_payload(), |f| f.max_payload());
        // SAFETY: the slot array lies at the end of the peer's validated geometry.
        let coop = unsafe { coop::CoopSlots::new(m.base.add(g.coop_off()), g.coop as u32) };
        let in_slot = self
            .slots
            .iter()
            .position(|s| s.state == SlotState::Connected(p));
        self.peers[p.idx()] = Some(Peer {
            map: m,
            g,
            pid,
            coop,
            queue,
            lane: if tx.is_some() {
                Lane::Fast
            } else {
                Lane::Shared
            },
            tx,
            slot,
            max_payload,
            inbound: if in_slot.is_some() {
                ChannelState::Connected
            } else {
                ChannelState::Shared
            },
            in_slot: in_slot.unwrap_or(0) as u32,
            usage: Usage::default(),
        });
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
        self.peers.get(peer.idx())?.as_ref().map(|p| p.pid)
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

    /// Channel records dropped because they did not fit the channel's state (diagnostics).
    pub fn bad_channel_records(&self) -> u64 {
        self.bad_records
    }

    /// Do we send to `peer` through a channel of its segment (now)?
    pub fn has_fast_channel(&self, peer: Gpid) -> bool {
        matches!(
            self.peers.get(peer.idx()),
            Some(Some(Peer {
                lane: Lane::Fast | Lane::Releasing,
                ..
            }))
        )
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    #[inline]
    pub fn max_payload(&self, peer: Gpid) -> usize {
        self.peers
            .get(peer.idx())
            .and_then(|p| p.as_ref())
            .map_or(0, |p| p.max_payload)
    }

    /// Post a frame; `parts` are concatenated into the payload. False means "not now".
    #[inline]
    fn push(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
        let Some(Some(p)) = self.peers.get_mut(peer.idx()) else {
            return false;
        };
        match (p.lane, &mut p.tx) {
            (Lane::Fast, Some(tx)) => tx.push(hdr, parts),
            (Lane::Shared, _) => p.queue.push(self.me, hdr, parts),
            _ => self.push_changing(peer, hdr, parts),
        }
    }

    /// A frame to a peer whose lane is changing: the marker first when it fits, then the frame
    /// by the path the marker opened; else the frame by the old path.
    #[cold]
    fn push_changing(&mut self, peer: Gpid, hdr: &[u8; HEADER_LEN], parts: &[&[u8]]) -> bool {
        self.advance(peer);
        let Some(Some(p)) = self.peers.get_mut(peer.idx()) else {
            return false;
        };
        match (p.lane, &mut p.tx) {
            (Lane::Fast | Lane::Releasing, Some(tx)) => tx.push(hdr, parts),
            _ => p.queue.push(self.me, hdr, parts),
        }
    }

    /// Push the marker of a lane change to `peer` if it fits, and complete the change.
    fn advance(&mut self, peer: Gpid) {
        let me = self.me;
        let Some(Some(p)) = self.peers.get_mut(peer.idx()) else {
            return;
        };
        let m = ChanMsg {
            slot: p.slot,
            key: 0,
            pos: 0,
        }
        .encode();
        let done = match (p.lane, &mut p.tx) {
            (Lane::Switching, Some(_)) => {
                if p.queue.push(me, &ChanMsg::header(CTL_SWITCH), &[&m]) {
                    p.lane = Lane::Fast;
                    true
                } else {
                    false
                }
            }
            (Lane::Releasing, Some(tx)) => {
                if tx.push(&ChanMsg::header(CTL_RELEASE), &[&m]) {
                    p.lane = Lane::Shared;
                    p.tx = None;
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        if done {
            // The new path's largest frame, told to the protocol layer at the next progress.
            let max = match p.lane {
                Lane::Fast => p.ring_max(),
                _ => p.queue.max_payload(),
            };
            if max != p.max_payload {
                p.max_payload = max;
                self.caps_news.push(peer);
            }
            self.changing.retain(|&g| g != peer);
            self.cold = true;
        } else if !self.changing.contains(&peer) {
            self.changing.push(peer);
            self.cold = true;
        }
    }

    /// Send a channel record to `peer` now, or after the ones waiting.
    fn send_chan(&mut self, peer: Gpid, op: u8, m: ChanMsg) {
        if self.ctl_out.is_empty() && self.push(peer, &ChanMsg::header(op), &[&m.encode()]) {
            return;
        }
        self.ctl_out.push_back((peer, op, m));
        self.cold = true;
    }

    /// A new channel key (48 bits, top bit set; see `ring`).
    fn next_key(&mut self) -> u64 {
        // splitmix64 over a random start
        self.keys = self.keys.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.keys;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z & ((1 << 48) - 1)) | (1 << 47)
    }

    /// The receiver offers us channel `m.slot` of its segment.
    fn on_grant<S: FrameSink>(&mut self, from: Gpid, m: ChanMsg, _sink: &mut S) {
        let Some(Some(p)) = self.peers.get_mut(from.idx()) else {
            self.bad_records += 1;
            return;
        };
        if p.lane != Lane::Shared || m.slot as usize >= p.g.nfast || m.key >> 47 != 1 {
            self.bad_records += 1;
            return;
        }
        // SAFETY: the slot index was checked against the peer's validated geometry, so the
        // channel lies inside its mapping, which the Peer keeps; the receiver made us its only
        // producer by this grant.
        p.tx = Some(unsafe {
            ring::Tx::resume(
                p.map.base.add(p.g.channel_off(m.slot as usize)),
                p.g.ring_bytes,
                m.key,
                m.pos,
            )
        });
        p.slot = m.slot;
        p.lane = Lane::Switching;
        // Frames sent from now on may go by either path until the switch.
        let both = p.ring_max().min(p.queue.max_payload());
        if both < p.max_payload {
            p.max_payload = both;
            self.caps_news.push(from);
        }
        self.advance(from);
    }

    /// The receiver takes its channel back.
    fn on_revoke(&mut self, from: Gpid, m: ChanMsg) {
        let Some(Some(p)) = self.peers.get_mut(from.idx()) else {
            self.bad_records += 1;
            return;
        };
        if p.lane != Lane::Fast || p.slot != m.slot {
            self.bad_records += 1;
            return;
        }
        p.lane = Lane::Releasing;
        let both = p.ring_max().min(p.queue.max_payload());
        if both < p.max_payload {
            p.max_payload = both;
            self.caps_news.push(from);
        }
        self.advance(from);
    }

    /// The sender switched to the channel we offered: poll it from now on.
    fn on_switch(&mut self, from: Gpid, m: ChanMsg) {
        let k = m.slot as usize;
        if self.slots.get(k).map(|s| s.state) != Some(SlotState::Granted(from)) {
            self.bad_records += 1;
            return;
        }
        let s = &mut self.slots[k];
        s.state = SlotState::Connected(from);
        // SAFETY: channel k of our own segment, polled only by us, from the key and position
        // we granted.
        let rx = unsafe {
            ring::Rx::resume(
                self.own.base.add(self.geometry.channel_off(k)),
                self.geometry.ring_bytes,
                s.key,
                s.pos,
            )
        };
        self.rx_fast.push(Polled {
            from,
            slot: m.slot,
            quiesce: false,
            rx,
            frames: 0,
            bytes: 0,
        });
        if let Some(Some(p)) = self.peers.get_mut(from.idx()) {
            p.inbound = ChannelState::Connected;
        }
        self.counters.promotions += 1;
        events::raise(Event::ChanPromoted, || [from.get() as i64]);
    }

    /// The sender's last record in a quiesced channel: it is free again.
    fn on_release(&mut self, from: Gpid, m: ChanMsg) {
        let k = m.slot as usize;
        if self.slots.get(k).map(|s| s.state) != Some(SlotState::Quiesce(from)) {
            self.bad_records += 1;
            return;
        }
        let Some(i) = self.rx_fast.iter().position(|c| c.slot == m.slot) else {
            self.bad_records += 1;
            return;
        };
        let c = self.rx_fast.swap_remove(i);
        self.slots[k] = Slot {
            state: SlotState::Free,
            key: c.rx.key(),
            pos: c.rx.position(),
        };
        if let Some(Some(p)) = self.peers.get_mut(from.idx()) {
            p.inbound = ChannelState::Shared;
            p.usage.fast_frames += c.frames;
            p.usage.fast_bytes += c.bytes;
        }
        self.counters.usage.fast_frames += c.frames;
        self.counters.usage.fast_bytes += c.bytes;
        self.quiescing -= 1;
        self.counters.demotions += 1;
        events::raise(Event::ChanDemoted, || [from.get() as i64]);
    }

    /// How we send to `peer` (diagnostics).
    #[cfg(test)]
    fn lane_debug(&self, peer: Gpid) -> String {
        match self.peers.get(peer.idx()) {
            Some(Some(p)) => format!(
                "lane {:?} slot {} tx {:?} max {} changing {:?} news {:?} cold {}",
                p.lane,
                p.slot,
                p.tx.as_ref().map(|t| t.debug()),
                p.max_payload,
                self.changing,
                self.caps_news,
                self.cold
            ),
            _ => "none".into(),
        }
    }

    /// Are frames waiting? Cheap: one load per channel.
    #[inline]
    pub fn pending(&self) -> bool {
        self.rx_fast.iter().any(|c| c.rx.ready()) || self.rx_queue.ready()
    }

    /// Deliver what arrived: frames to the sink, control records to ourselves (and set
    /// `cold`, so that `progress` handles them).
    #[inline]
    fn poll<S: FrameSink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        let Shm {
            rx_fast,
            rx_queue,
            ctl_in,
            cold,
            peers,
            quiescing,
            counters,
            ..
        } = self;
        for c in rx_fast.iter_mut() {
            let from = c.from;
            let mut k = 0;
            let mut bytes = 0usize;
            while k < 64
                && c.rx.pop(|h, p| {
                    bytes += p.len();
                    if h[0] == CONTROL_KIND {
                        control(ctl_in, cold, from, h, p);
                    } else {
                        sink.on_frame(from, h, p)
                    }
                })
            {
                k += 1;
            }
            c.frames += k as u64;
            c.bytes += bytes as u64;
            n += k;
        }
        let mut k = 0;
        while k < 64
            && rx_queue.pop(|from, h, p| {
                if *quiescing > 0 {
                    drain_quiesced(rx_fast, from, sink, ctl_in, cold);
                }
                if let Some(Some(peer)) = peers.get_mut(from.idx()) {
                    peer.usage.shared_frames += 1;
                    peer.usage.shared_bytes += p.len() as u64;
                }
                counters.usage.shared_bytes += p.len() as u64;
                if h[0] == CONTROL_KIND {
                    control(ctl_in, cold, from, h, p);
                } else {
                    sink.on_frame(from, h, p)
                }
            })
        {
            k += 1;
        }
        counters.usage.shared_frames += k as u64;
        n + k
    }

    /// Handle the control records that arrived, push the records and markers waiting, tell
    /// the protocol layer of changed caps, run the copies.
    #[cold]
    fn run_cold<S: FrameSink>(&mut self, sink: &mut S) {
        for (from, op, p) in std::mem::take(&mut self.ctl_in) {
            match (op, ChanMsg::decode(&p)) {
                (copy::CTL_HELP, _) => self.copier.on_help(from, &p),
                (CTL_GRANT, Some(m)) => self.on_grant(from, m, sink),
                (CTL_REVOKE, Some(m)) => self.on_revoke(from, m),
                (CTL_SWITCH, Some(m)) => self.on_switch(from, m),
                (CTL_RELEASE, Some(m)) => self.on_release(from, m),
                (CTL_GRANT | CTL_REVOKE | CTL_SWITCH | CTL_RELEASE, None) => self.bad_records += 1,
                _ => self.copier.bad_requests += 1,
            }
        }
        for peer in self.changing.clone() {
            self.advance(peer);
        }
        while let Some(&(peer, op, m)) = self.ctl_out.front() {
            if !self.push(peer, &ChanMsg::header(op), &[&m.encode()]) {
                if !self.reaches(peer) {
                    self.ctl_out.pop_front();
                    continue;
                }
                break;
            }
            self.ctl_out.pop_front();
        }
        for peer in std::mem::take(&mut self.caps_news) {
            let caps = self.caps(peer);
            sink.on_caps(peer, caps);
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
        // News made while pushing the records above reach the sink at the next pass.
        self.cold = self.copier.busy()
            || !self.ctl_out.is_empty()
            || !self.changing.is_empty()
            || !self.caps_news.is_empty();
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
        matches!(self.peers.get(peer.idx()), Some(Some(_)))
    }

    fn caps(&self, peer: Gpid) -> Caps {
        match self.peers.get(peer.idx()) {
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
        if self.cold {
            self.run_cold(sink);
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

    /// A window's memory: the process id and address, no copy slot (a reader or writer moves
    /// the bytes alone, with cross-memory attach).
    fn expose_any(&mut self, buf: Span) -> Option<Region> {
        (!buf.ptr().is_null()).then(|| {
            copy::RegionDesc {
                pid: std::process::id(),
                addr: buf.ptr() as u64,
                slot: 0,
                chunk: 0,
            }
            .encode()
        })
    }

    fn get(
        &mut self,
        peer: Gpid,
        region: &Region,
        offset: usize,
        dst: Span,
        token: Token,
    ) -> Result<Copied, CopyError> {
        let slots = match self.peers.get(peer.idx()) {
            Some(Some(p)) => Some(p.coop),
            _ => {
                return Err(CopyError::Refused(format!(
                    "process {peer} is not on this host"
                )))
            }
        };
        let r = self.copier.get(peer, slots, region, offset, dst, token);
        if r == Ok(Copied::Pending) {
            self.cold = true;
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

    fn channel_slots(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn channel(&self, peer: Gpid) -> ChannelState {
        match self.peers.get(peer.idx()) {
            Some(Some(p)) => p.inbound,
            _ => ChannelState::Shared,
        }
    }

    fn connect(&mut self, peer: Gpid) -> bool {
        match self.peers.get(peer.idx()) {
            Some(Some(p)) if p.inbound == ChannelState::Shared => {}
            _ => return false,
        }
        let Some(k) = self.slots.iter().position(|s| s.state == SlotState::Free) else {
            return false;
        };
        let key = self.next_key();
        let pos = self.slots[k].pos;
        let c = unsafe { self.own.base.add(self.geometry.channel_off(k)) };
        // SAFETY: channel k of our own segment is free: no producer writes into it; we are its
        // consumer.
        unsafe {
            ring::rekey(c, key, pos);
            ring::owner(c).store(peer.get() + 1, Ordering::Relaxed);
        }
        self.slots[k] = Slot {
            state: SlotState::Granted(peer),
            key,
            pos,
        };
        if let Some(Some(p)) = self.peers.get_mut(peer.idx()) {
            p.inbound = ChannelState::Connecting;
            p.in_slot = k as u32;
        }
        self.send_chan(
            peer,
            CTL_GRANT,
            ChanMsg {
                slot: k as u32,
                key,
                pos,
            },
        );
        true
    }

    fn quiesce(&mut self, peer: Gpid) -> bool {
        let k = match self.peers.get_mut(peer.idx()) {
            Some(Some(p)) if p.inbound == ChannelState::Connected => {
                p.inbound = ChannelState::Quiesce;
                p.in_slot
            }
            _ => return false,
        };
        self.slots[k as usize].state = SlotState::Quiesce(peer);
        if let Some(c) = self.rx_fast.iter_mut().find(|c| c.slot == k) {
            c.quiesce = true;
        }
        self.quiescing += 1;
        self.send_chan(
            peer,
            CTL_REVOKE,
            ChanMsg {
                slot: k,
                key: 0,
                pos: 0,
            },
        );
        true
    }

    fn usage(&self, peer: Gpid) -> Usage {
        let Some(Some(p)) = self.peers.get(peer.idx()) else {
            return Usage::default();
        };
        let mut u = p.usage;
        if let Some(c) = self.rx_fast.iter().find(|c| c.from == peer) {
            u.fast_frames += c.frames;
            u.fast_bytes += c.bytes;
        }
        u
    }

    #[inline]
    fn shared_arrivals(&self) -> u64 {
        self.counters.usage.shared_frames
    }

    #[inline]
    fn channel_changes(&self) -> u64 {
        self.counters.promotions + self.counters.demotions
    }

    fn channel_counters(&self) -> ChannelCounters {
        let mut c = self.counters;
        for p in &self.rx_fast {
            c.usage.fast_frames += p.frames;
            c.usage.fast_bytes += p.bytes;
        }
        c
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
        let local = crate::ids::gpids(&[0, 2, 5, 7]);
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
            static_slot(&local, Gpid::new(0), Gpid::new(2), 2),
            None,
            "too many peers for the channels"
        );
    }

    #[derive(Default)]
    struct Collect {
        frames: Vec<(Gpid, [u8; HEADER_LEN], Vec<u8>)>,
        got: Vec<(Token, Result<(), String>)>,
        caps: Vec<(Gpid, usize)>,
    }
    impl FrameSink for Collect {
        fn on_frame(&mut self, from: Gpid, hdr: &[u8; HEADER_LEN], payload: &[u8]) {
            self.frames.push((from, *hdr, payload.to_vec()));
        }
        fn on_got(&mut self, token: Token, result: Result<(), String>) {
            self.got.push((token, result));
        }
        fn on_caps(&mut self, peer: Gpid, caps: Caps) {
            self.caps.push((peer, caps.max_payload));
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
        let local = crate::ids::gpids(&[0, 1]);
        let mut a = Shm::create(&jobid, Gpid::new(0), &local, g).unwrap();
        let mut b = Shm::create(&jobid, Gpid::new(1), &local, g).unwrap();
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
            assert_eq!(a.has_fast_channel(Gpid::new(1)), nfast > 0);
            assert!(
                a.reaches(Gpid::new(1)) && !a.reaches(Gpid::new(0)) && !a.reaches(Gpid::new(2))
            );
            assert_eq!(a.caps(Gpid::new(2)), Caps::NONE);
            let big = vec![7u8; a.caps(Gpid::new(1)).max_payload - 2];
            let mut sent = 0;
            loop {
                match a.send(Gpid::new(1), &hdr(sent), b"hi", &big, Token::NONE) {
                    Ok(Sent::Done) => sent += 1,
                    Err(SendError::NotNow) => break,
                    other => panic!("{other:?}"),
                }
            }
            assert!(sent >= 2, "sent {sent}");
            assert!(matches!(
                a.send(Gpid::new(2), &hdr(0), b"", b"", Token::NONE),
                Err(SendError::Failed(_))
            ));
            let mut sink = Collect::default();
            let mut got = 0;
            while got < sent as usize {
                got += b.progress(&mut sink);
            }
            for (i, (from, h, p)) in sink.frames.iter().enumerate() {
                assert_eq!(*from, Gpid::new(0));
                assert_eq!(*h, hdr(i as u32));
                assert_eq!(&p[..2], b"hi");
                assert_eq!(p.len(), 2 + big.len());
            }
            assert!(b.try_send(Gpid::new(0), &hdr(0), b"back"));
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
            .expose(Gpid::new(1), sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        assert!(
            a.expose(Gpid::new(2), sp(data.as_ptr() as *mut u8, 1))
                .is_none(),
            "not on this host"
        );
        let mut buf = vec![0u8; 4000];
        assert_eq!(
            b.get(Gpid::new(0), &r, 1000, sp(buf.as_mut_ptr(), 4000), Token(1)),
            Ok(Copied::Done)
        );
        assert_eq!(&buf[..], &data[1000..]);
        assert_eq!(
            b.get(
                Gpid::new(0),
                &Region::NONE,
                0,
                sp(buf.as_mut_ptr(), 1),
                Token(1)
            ),
            Err(CopyError::BadRegion)
        );
        let mut target = vec![0u8; 16];
        let t = b.expose(Gpid::new(0), sp(target.as_mut_ptr(), 16)).unwrap();
        a.put(
            Gpid::new(1),
            &t,
            4,
            sp(b"abcd".as_ptr() as *mut u8, 4),
            Token::NONE,
        )
        .unwrap();
        assert_eq!(&target[4..8], b"abcd");
        a.retract(Gpid::new(1), &r);
        b.retract(Gpid::new(0), &t);
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
            .expose(Gpid::new(1), sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(
            b.get(
                Gpid::new(0),
                &r,
                0,
                sp(buf.as_mut_ptr(), data.len()),
                Token(9)
            ),
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
        a.retract(Gpid::new(1), &r);
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
            .expose(Gpid::new(1), sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; 4000];
        assert_eq!(
            b.get(Gpid::new(0), &r, 0, sp(buf.as_mut_ptr(), 4000), Token(2)),
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
            .expose(Gpid::new(1), sp(data.as_ptr() as *mut u8, data.len()))
            .unwrap();
        let mut buf = vec![0u8; data.len()];
        b.get(
            Gpid::new(0),
            &r,
            0,
            sp(buf.as_mut_ptr(), data.len()),
            Token(3),
        )
        .unwrap();
        // Deliver the help request by hand with a reader that does not exist.
        let (_, help) = b.copier.out.pop_front().unwrap_or_else(|| {
            // It went out at once: take it back out of the owner's channel.
            let mut sa = Collect::default();
            a.poll(&mut sa);
            let (from, op, p) = a.ctl_in.pop().expect("a help request");
            assert_eq!((from, op), (Gpid::new(1), copy::CTL_HELP));
            (from, p.try_into().unwrap())
        });
        let mut h = copy::Help::decode(&help).unwrap();
        h.pid = i32::MAX as u32; // no such process: the write fails
        a.copier.on_help(Gpid::new(1), &h.encode());
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
            .expose(Gpid::new(1), sp(data_a.as_ptr() as *mut u8, data_a.len()))
            .unwrap();
        let mut buf_a = vec![0u8; data_a.len()];
        b.get(
            Gpid::new(0),
            &ra,
            0,
            sp(buf_a.as_mut_ptr(), data_a.len()),
            Token(4),
        )
        .unwrap();
        let mut sb = Collect::default();
        b.progress(&mut sb);
        assert_eq!(sb.got.len(), 1, "the reader claimed every chunk");
        assert_eq!(buf_a, data_a);
        a.retract(Gpid::new(1), &ra);
        let rb = a
            .expose(Gpid::new(1), sp(data_b.as_ptr() as *mut u8, data_b.len()))
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
        b.get(
            Gpid::new(0),
            &rb,
            0,
            sp(buf_b.as_mut_ptr(), data_b.len()),
            Token(5),
        )
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

    /// `n` "processes" in one: each creates its segment, all attach.
    fn group(tag: &str, n: u32, g: Geometry) -> Vec<Shm> {
        let jobid = format!("unittest{}{tag}", std::process::id());
        let local: Vec<Gpid> = Gpid::new(0).block(n).collect();
        let mut v: Vec<Shm> = local
            .iter()
            .map(|&m| Shm::create(&jobid, m, &local, g).unwrap())
            .collect();
        for s in v.iter_mut() {
            s.attach(&local, n as usize).unwrap();
        }
        for s in v.iter_mut() {
            s.unlink();
        }
        v
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The payload of frame `seq` from `from`: its length and bytes follow from both.
    fn body(from: Gpid, seq: u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32 ^ seq.wrapping_mul(31) ^ from.get()) as u8)
            .collect()
    }

    /// Check what a receiver got: every sender's frames in order, payloads intact; returns
    /// how many came from each.
    fn check_order(frames: &[(Gpid, [u8; HEADER_LEN], Vec<u8>)], next: &mut [u32]) {
        for (from, h, p) in frames {
            let seq = u32::from_le_bytes(h[4..8].try_into().unwrap());
            assert_eq!(
                seq,
                next[from.idx()],
                "frame {seq} from {from} out of order (expected {})",
                next[from.idx()]
            );
            let len = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
            assert_eq!(p, &body(*from, seq, len), "payload of {seq} from {from}");
            next[from.idx()] += 1;
        }
    }

    fn frame_hdr(seq: u32, len: usize) -> [u8; HEADER_LEN] {
        let mut h = hdr(seq);
        h[8..12].copy_from_slice(&(len as u32).to_le_bytes());
        h
    }

    /// Channels change hands at random while three senders stream frames of every size the
    /// caps allow to one receiver (single thread, every interleaving of steps the generator
    /// draws): nothing is lost, duplicated or reordered, the caps a sender is told always fit
    /// the path it uses, and every change completes. Two geometries: the ring carries larger
    /// frames than a queue cell, and smaller.
    #[test]
    fn channels_move_while_frames_flow() {
        for (gi, g) in [
            Geometry::new(1, 8192, 4, 1024, 4),
            Geometry::new(2, 4096, 4, 2048, 4),
        ]
        .into_iter()
        .enumerate()
        {
            for seed in 1..=6u64 {
                let mut v = group(&format!("move{gi}s{seed}"), 4, g);
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                assert_eq!(v[0].channel_slots(), g.nfast);
                assert!(
                    !v[1].has_fast_channel(Gpid::new(0)),
                    "3 peers do not fit {} channels",
                    g.nfast
                );
                let mut told: Vec<usize> = (0..4)
                    .map(|s| v[s].caps(Gpid::new(0)).max_payload)
                    .collect();
                let mut sent = [0u32; 4];
                let mut next = [0u32; 4];
                let mut sinks: Vec<Collect> = (0..4).map(|_| Collect::default()).collect();
                let step = |v: &mut Vec<Shm>,
                            sinks: &mut Vec<Collect>,
                            told: &mut Vec<usize>,
                            i: usize| {
                    v[i].progress(&mut sinks[i]);
                    for (peer, m) in sinks[i].caps.drain(..) {
                        assert_eq!(peer, Gpid::new(0));
                        told[i] = m;
                    }
                };
                for _ in 0..4000 {
                    match rng.below(10) {
                        0..=4 => {
                            let s = 1 + rng.below(3) as usize;
                            for _ in 0..rng.below(6) {
                                let len = match rng.below(4) {
                                    0 => told[s],
                                    1 => 0,
                                    _ => rng.below(told[s] as u64 + 1) as usize,
                                };
                                let b = body(Gpid::from_idx(s), sent[s], len);
                                if !v[s].try_send(Gpid::new(0), &frame_hdr(sent[s], len), &b) {
                                    break;
                                }
                                sent[s] += 1;
                            }
                        }
                        5 | 6 => {
                            let s = 1 + rng.below(3) as usize;
                            step(&mut v, &mut sinks, &mut told, s);
                        }
                        7 => {
                            step(&mut v, &mut sinks, &mut told, 0);
                            check_order(&std::mem::take(&mut sinks[0].frames), &mut next);
                        }
                        _ => {
                            let s = Gpid::new(1 + rng.below(3) as u32);
                            match v[0].channel(s) {
                                ChannelState::Shared => {
                                    v[0].connect(s);
                                }
                                ChannelState::Connected => {
                                    assert!(v[0].quiesce(s));
                                }
                                _ => {}
                            }
                        }
                    }
                }
                // Drain: every frame arrives, every change completes.
                for _ in 0..10_000 {
                    for i in 0..4 {
                        step(&mut v, &mut sinks, &mut told, i);
                    }
                    check_order(&std::mem::take(&mut sinks[0].frames), &mut next);
                    let settled = (1..4).all(|s| {
                        matches!(
                            v[0].channel(Gpid::new(s)),
                            ChannelState::Shared | ChannelState::Connected
                        )
                    });
                    if next == sent && settled {
                        break;
                    }
                }
                assert_eq!(next, sent, "seed {seed}: frames missing");
                let c = v[0].channel_counters();
                assert!(c.promotions >= 3 && c.demotions >= 2, "seed {seed}: {c:?}");
                assert!(c.promotions - c.demotions <= g.nfast as u64);
                let frames: u32 = sent.iter().sum();
                assert_eq!(
                    c.usage.shared_frames + c.usage.fast_frames,
                    frames as u64 + c.promotions + c.demotions,
                    "every frame counted once, with the SWITCH and RELEASE records"
                );
                let per_peer: u64 = (1..4)
                    .map(|s| {
                        let u = v[0].usage(Gpid::new(s));
                        u.shared_frames + u.fast_frames
                    })
                    .sum();
                assert_eq!(per_peer, c.usage.shared_frames + c.usage.fast_frames);
                for (i, x) in v.iter().enumerate() {
                    assert_eq!(x.bad_channel_records(), 0, "process {i}");
                }
                for s in 1..4usize {
                    let held = v[0].channel(Gpid::from_idx(s)) == ChannelState::Connected;
                    assert_eq!(v[s].has_fast_channel(Gpid::new(0)), held);
                    assert_eq!(
                        told[s],
                        if held {
                            ring::max_payload(g.ring_bytes / 64)
                        } else {
                            g.cell_bytes - queue::CELL_HDR
                        },
                        "the sender was told the caps of its path"
                    );
                }
            }
        }
    }

    /// Records that do not fit the channel's state are counted and change nothing.
    #[test]
    fn stray_channel_records_are_dropped() {
        let mut v = group("stray", 3, Geometry::new(1, 8192, 4, 1024, 4));
        let m = ChanMsg {
            slot: 0,
            key: 1 << 47,
            pos: 0,
        };
        let mut sink = Collect::default();
        // A SWITCH for a channel never granted, a RELEASE for one not quiesced, a REVOKE
        // for a channel not held, a GRANT beyond the geometry, a short record.
        assert!(v[1].push(Gpid::new(0), &ChanMsg::header(CTL_SWITCH), &[&m.encode()]));
        assert!(v[1].push(Gpid::new(0), &ChanMsg::header(CTL_RELEASE), &[&m.encode()]));
        v[0].progress(&mut sink);
        assert_eq!(v[0].bad_channel_records(), 2);
        assert!(v[0].push(Gpid::new(1), &ChanMsg::header(CTL_REVOKE), &[&m.encode()]));
        let far = ChanMsg { slot: 7, ..m };
        assert!(v[0].push(Gpid::new(1), &ChanMsg::header(CTL_GRANT), &[&far.encode()]));
        assert!(v[0].push(Gpid::new(1), &ChanMsg::header(CTL_GRANT), &[&[1u8, 2]]));
        v[1].progress(&mut sink);
        assert_eq!(v[1].bad_channel_records(), 3);
        assert!(!v[1].has_fast_channel(Gpid::new(0)));
        assert!(sink.frames.is_empty() && sink.caps.is_empty());
        // The real hand-over still works afterwards.
        assert!(v[0].connect(Gpid::new(1)));
        assert!(!v[0].connect(Gpid::new(2)), "one channel, already offered");
        assert_eq!(v[0].channel(Gpid::new(1)), ChannelState::Connecting);
        assert!(!v[0].quiesce(Gpid::new(1)), "not connected yet");
        v[1].progress(&mut sink);
        assert!(v[1].has_fast_channel(Gpid::new(0)));
        v[0].progress(&mut sink);
        assert_eq!(v[0].channel(Gpid::new(1)), ChannelState::Connected);
    }

    /// A process of another job that held our channel leaves: detaching it frees the channel
    /// at once (no RELEASE will come), and the next peer gets it and sends through it.
    #[test]
    fn detaching_a_peer_frees_its_channel() {
        let mut v = group("detach", 3, Geometry::new(1, 8192, 4, 1024, 4));
        let mut sink = Collect::default();
        assert!(v[0].connect(Gpid::new(1)));
        v[1].progress(&mut sink);
        v[0].progress(&mut sink);
        assert_eq!(v[0].channel(Gpid::new(1)), ChannelState::Connected);
        assert!(!v[0].connect(Gpid::new(2)), "the one channel is held");
        let before = v[0].counters.demotions;
        v[0].detach(Gpid::new(1));
        assert_eq!(v[0].channel(Gpid::new(1)), ChannelState::Shared);
        assert_eq!(v[0].counters.demotions, before + 1);
        assert!(v[0].connect(Gpid::new(2)), "the channel was freed");
        v[2].progress(&mut sink);
        assert!(v[2].has_fast_channel(Gpid::new(0)));
        v[0].progress(&mut sink);
        assert_eq!(v[0].channel(Gpid::new(2)), ChannelState::Connected);
        assert!(v[2].try_send(Gpid::new(0), &hdr(5), b"by the ring"));
        let mut got = Collect::default();
        while got.frames.is_empty() {
            v[0].progress(&mut got);
        }
        assert_eq!(got.frames[0].0, Gpid::new(2));
        assert_eq!(got.frames[0].2, b"by the ring");
        assert_eq!(v[0].usage(Gpid::new(2)).fast_frames, 1);
    }

    /// The same with real concurrency: a receiver thread moving its one channel between two
    /// sender threads at random while they stream; the receiver checks order as it goes.
    #[test]
    fn channels_move_between_threads() {
        struct Own(Shm);
        // SAFETY: each Shm is used by one thread only (moved there whole).
        unsafe impl Send for Own {}
        const N: u32 = 60_000;
        let v = group("threads", 3, Geometry::new(1, 8192, 8, 1024, 4));
        let mut it = v.into_iter();
        let recv = Own(it.next().unwrap());
        let senders: Vec<_> = it
            .enumerate()
            .map(|(i, s)| {
                let mut o = Own(s);
                std::thread::spawn(move || {
                    let from = Gpid::from_idx(i + 1);
                    let s = &mut o.0;
                    let mut sink = Collect::default();
                    let mut told = s.caps(Gpid::new(0)).max_payload;
                    let mut rng = Rng(0x1234_5678 + u64::from(from.get()));
                    let mut seq = 0u32;
                    let mut last = std::time::Instant::now();
                    while seq < N {
                        assert!(
                            last.elapsed().as_secs() < 20,
                            "sender {from} stuck at {seq}: {}",
                            s.lane_debug(Gpid::new(0))
                        );
                        s.progress(&mut sink);
                        if let Some(&(_, m)) = sink.caps.last() {
                            told = m;
                        }
                        sink.caps.clear();
                        let len = if rng.below(8) == 0 {
                            told
                        } else {
                            rng.below(64) as usize
                        };
                        if s.try_send(Gpid::new(0), &frame_hdr(seq, len), &body(from, seq, len)) {
                            seq += 1;
                            last = std::time::Instant::now();
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    // Keep answering the receiver's channel records until it says stop (a
                    // frame of kind 9).
                    let t = std::time::Instant::now();
                    while t.elapsed().as_secs() < 60 && !sink.frames.iter().any(|f| f.1[0] == 9) {
                        s.progress(&mut sink);
                        std::thread::yield_now();
                    }
                    o
                })
            })
            .collect();
        let mut r = recv;
        let mut sink = Collect::default();
        let mut next = [0u32; 3];
        let mut rng = Rng(99);
        let mut t = std::time::Instant::now();
        let mut seen = 0;
        let (mut due, mut moved_at) = (false, 0u32);
        while next[1] < N || next[2] < N {
            if next[1] + next[2] != seen {
                seen = next[1] + next[2];
                t = std::time::Instant::now();
            }
            assert!(
                t.elapsed().as_secs() < 30,
                "stalled at {next:?}: slots {:?}, polled {:?}, out {:?}",
                r.0.slots,
                r.0.rx_fast
                    .iter()
                    .map(|c| (c.from, c.slot, c.quiesce, c.rx.position()))
                    .collect::<Vec<_>>(),
                r.0.ctl_out
            );
            r.0.progress(&mut sink);
            check_order(&std::mem::take(&mut sink.frames), &mut next);
            // Moves come at random between polls, and at least once every 1000 messages
            // (held until the chosen peer's channel is not mid-move): how often the loop
            // spins depends on the scheduler, and a loaded machine must still see many moves.
            due |= (next[1] + next[2]) / 1000 > moved_at;
            if due || rng.below(50) == 0 {
                let s = Gpid::new(1 + rng.below(2) as u32);
                let moved = match r.0.channel(s) {
                    ChannelState::Shared => r.0.connect(s),
                    ChannelState::Connected => r.0.quiesce(s),
                    _ => false,
                };
                if moved && due {
                    due = false;
                    moved_at = (next[1] + next[2]) / 1000;
                }
            }
        }
        // Tell the senders to stop (a frame of kind 9).
        let mut stop = [0u8; HEADER_LEN];
        stop[0] = 9;
        for s in 1..3 {
            while !r.0.try_send(Gpid::new(s), &stop, &[]) {
                r.0.progress(&mut sink);
            }
        }
        for h in senders {
            let o = h.join().unwrap();
            assert_eq!(o.0.bad_channel_records(), 0);
        }
        let c = r.0.channel_counters();
        assert!(c.promotions > 10 && c.demotions > 5, "{c:?}");
        assert_eq!(r.0.bad_channel_records(), 0);
    }
}
