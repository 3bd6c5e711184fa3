//! Events: what reconfigured, and when (the events of the MPI tool information interface,
//! MPI-4.0 section 15.3.8).
//!
//! [`EVENTS`] describes every kind: its name, what it means, and its elements (the values an
//! occurrence carries, in order). The layer where a change happens raises it with [`raise`];
//! `capi/mpit.rs` keeps the tools' registrations, turns an occurrence into an
//! `MPI_T_event_instance` and calls their callbacks. A kind nobody registered for costs one
//! relaxed load where it would be raised ([`armed`]); the values are computed only when it is
//! armed.
//!
//! Every event is raised inside an MPI call, by the thread that makes it, with the engine's
//! state held; Protean has no thread of its own. Occurrences of one process are therefore
//! raised one at a time and in the order of their timestamps.
//!
//! Timestamps are nanoseconds on CLOCK_MONOTONIC, the clock of MPI_Wtime: a tool divides by
//! 10^9 and compares with MPI_Wtime.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The kinds of events, numbered as MPI_T numbers them (the index in [`EVENTS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Event {
    ChanGrant = 0,
    ChanTakeBack,
    ChanPromoted,
    ChanDemoted,
    ProtocolLimits,
    Phase,
}

impl Event {
    /// Every kind, in order: `Event::ALL[k]` is the kind numbered `k`.
    pub const ALL: [Event; 6] = [
        Event::ChanGrant,
        Event::ChanTakeBack,
        Event::ChanPromoted,
        Event::ChanDemoted,
        Event::ProtocolLimits,
        Event::Phase,
    ];
}

/// The type of an element: a C `int` or a 64-bit count (MPI_COUNT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    Int,
    Count,
}

impl Elem {
    pub const fn size(self) -> usize {
        match self {
            Elem::Int => 4,
            Elem::Count => 8,
        }
    }
}

/// Where a kind belongs among the MPI_T categories (`capi/mpit.rs` lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Protocol,
    Transport,
}

/// One kind of event.
pub struct EventKind {
    pub name: &'static str,
    pub desc: &'static str,
    pub elements: &'static [Elem],
    pub group: Group,
    /// For tuners at the basic level (else detail: many occurrences, for one who digs).
    pub basic: bool,
}

impl EventKind {
    /// Byte offset of each element in an occurrence's buffer: C struct layout (each element at
    /// a multiple of its size), and the buffer's length.
    pub fn layout(&self) -> (Vec<usize>, usize) {
        let mut off = Vec::with_capacity(self.elements.len());
        let mut at = 0usize;
        for e in self.elements {
            at = at.next_multiple_of(e.size());
            off.push(at);
            at += e.size();
        }
        (off, at.next_multiple_of(8))
    }
}

/// Why the channel manager gave a channel or took one back (the `reason` element).
pub mod reason {
    /// Granted: the busiest peer on the shared path (online rule).
    pub const ONLINE: i64 = 0;
    /// Granted or taken back because the schedule of this phase says so.
    pub const SCHEDULE: i64 = 1;
    /// Taken back: the least recently used channel, idle for a window, for a busier peer.
    pub const IDLE: i64 = 2;
    /// Taken back: more channels in use than `chan_max` allows (lowered at run time).
    pub const OVER_MAX: i64 = 3;
}

/// Every kind, in the order of [`Event`].
pub const EVENTS: &[EventKind] = &[
    EventKind {
        name: "protean_chan_grant",
        desc: "The channel manager gives a dedicated channel of this process (a shared-memory ring; a TCP connection beside datagrams) to a peer (it asks the transport to connect it). Elements: peer (int: its process number, its rank in MPI_COMM_WORLD for a process of this job), reason (int: 0 the busiest peer on the shared path, 1 the schedule of this phase).",
        elements: &[Elem::Int, Elem::Int],
        group: Group::Transport,
        basic: true,
    },
    EventKind {
        name: "protean_chan_take_back",
        desc: "The channel manager takes a dedicated channel back from a peer (QUIESCE; the channel is free once drained). Elements: peer (int), reason (int: 1 the schedule of this phase needs it, 2 idle for a window while a busier peer waits, 3 more channels in use than chan_max).",
        elements: &[Elem::Int, Elem::Int],
        group: Group::Transport,
        basic: true,
    },
    EventKind {
        name: "protean_chan_promoted",
        desc: "A peer's frames now arrive through a dedicated channel of this process (the change completed: CONNECTED). Elements: peer (int).",
        elements: &[Elem::Int],
        group: Group::Transport,
        basic: true,
    },
    EventKind {
        name: "protean_chan_demoted",
        desc: "A dedicated channel of this process was drained and is free again: the peer's frames take the shared path (DISCONNECTED). Elements: peer (int).",
        elements: &[Elem::Int],
        group: Group::Transport,
        basic: true,
    },
    EventKind {
        name: "protean_protocol_limits",
        desc: "The protocol boundaries for messages to a peer changed (the adaptive policy's answer to the peer's reports, a new channel, or a control variable written). Elements: peer (int), eager_max (count: largest eager message, -1 none), lone_eager_max (count: the same for a reply or a request after one, -1 none), split_max (count: largest eager-rendezvous message; larger ones go by rendezvous).",
        elements: &[Elem::Int, Elem::Count, Elem::Count, Elem::Count],
        group: Group::Protocol,
        basic: false,
    },
    EventKind {
        name: "protean_phase",
        desc: "A phase of the program begins (MPI_Pcontrol, or a collective under chan_phases): the channel profiler's and schedule's unit. Elements: phase (int: its number, 0 the first).",
        elements: &[Elem::Int],
        group: Group::Transport,
        basic: true,
    },
];

/// What receives armed occurrences: (kind, timestamp in ns, the element values in order).
pub type Sink = fn(Event, u64, &[i64]);

/// Bit `k` set: kind `k` has a registration (someone listens).
static ARMED: AtomicU32 = AtomicU32::new(0);
static SINK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Where armed occurrences go (set once by the C layer, before it arms anything).
pub fn set_sink(f: Sink) {
    SINK.store(f as *mut (), Ordering::Release);
}

/// Whether occurrences of `e` are raised (from now on).
pub fn arm(e: Event, on: bool) {
    let bit = 1 << e as u32;
    if on {
        ARMED.fetch_or(bit, Ordering::AcqRel);
    } else {
        ARMED.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Whether someone listens to `e`: one relaxed load.
#[inline(always)]
pub fn armed(e: Event) -> bool {
    ARMED.load(Ordering::Relaxed) & (1 << e as u32) != 0
}

/// An occurrence of `e`: `values()` gives its elements in order (computed only when armed).
#[inline(always)]
pub fn raise<const N: usize>(e: Event, values: impl FnOnce() -> [i64; N]) {
    if armed(e) {
        deliver(e, &values());
    }
}

#[cold]
#[inline(never)]
fn deliver(e: Event, values: &[i64]) {
    debug_assert_eq!(values.len(), EVENTS[e as usize].elements.len());
    let p = SINK.load(Ordering::Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: only `set_sink` stores here, and it stores a `Sink`.
    let sink: Sink = unsafe { std::mem::transmute::<*mut (), Sink>(p) };
    sink(e, now_ns(), values);
}

/// Nanoseconds on CLOCK_MONOTONIC (MPI_Wtime's clock).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC cannot fail on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// For unit tests of the layers that raise events: record what this thread raises.
#[cfg(test)]
pub mod testing {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        static SEEN: RefCell<Vec<(Event, u64, Vec<i64>)>> = const { RefCell::new(Vec::new()) };
    }

    fn sink(e: Event, t: u64, v: &[i64]) {
        SEEN.with(|s| s.borrow_mut().push((e, t, v.to_vec())));
    }

    /// Arm `kinds` with the recording sink (each test thread sees only its own occurrences;
    /// kinds armed stay armed for the other tests, which record into their own threads).
    pub fn record(kinds: &[Event]) {
        set_sink(sink);
        for &k in kinds {
            arm(k, true);
        }
    }

    /// What this thread raised since the last call: (kind, timestamp, values).
    pub fn take() -> Vec<(Event, u64, Vec<i64>)> {
        SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_their_numbers_and_lay_out_like_c() {
        assert_eq!(EVENTS.len(), Event::ALL.len());
        for (k, e) in Event::ALL.iter().enumerate() {
            assert_eq!(*e as usize, k);
        }
        assert_eq!(EVENTS[Event::ChanGrant as usize].name, "protean_chan_grant");
        assert_eq!(EVENTS[Event::Phase as usize].name, "protean_phase");
        let (off, len) = EVENTS[Event::ProtocolLimits as usize].layout();
        assert_eq!(off, vec![0, 8, 16, 24]);
        assert_eq!(len, 32);
        let (off, len) = EVENTS[Event::ChanGrant as usize].layout();
        assert_eq!((off, len), (vec![0, 4], 8));
        for k in EVENTS {
            assert!(k.name.starts_with("protean_") && !k.desc.is_empty());
        }
    }

    #[test]
    fn only_armed_kinds_are_raised_and_values_are_computed_only_then() {
        // No unit test arms Phase but this one (it disarms it again).
        raise(Event::Phase, || -> [i64; 1] {
            panic!("computed while unarmed")
        });
        testing::record(&[Event::Phase]);
        let before = now_ns();
        raise(Event::Phase, || [7]);
        arm(Event::Phase, false);
        raise(Event::Phase, || -> [i64; 1] {
            panic!("computed after disarming")
        });
        let seen = testing::take();
        assert_eq!(seen.len(), 1);
        assert_eq!((seen[0].0, &seen[0].2), (Event::Phase, &vec![7]));
        assert!(seen[0].1 >= before && seen[0].1 <= now_ns());
    }
}
