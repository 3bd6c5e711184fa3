//! One direction of the forwarder: reads packets from one TUN device, runs them through the
//! [`Link`] model and writes them to the other device when they are due.
//!
//! One thread per direction. It sleeps in `ppoll` on its source until a packet arrives or the
//! earliest deadline comes, then delivers what is due, then reads what is there (up to a batch)
//! before it looks at the clock again. Packet buffers come from a pool that grows to the peak
//! number of packets in flight and is reused from then on: nothing is allocated per packet. A
//! packet due at once, with nothing due before it, is written straight from the read buffer.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::packet::{inspect, VNET_HDR_LEN};
use crate::sched::{DelayQueue, Link, Nanos, Verdict};

/// Largest packet a TUN device hands over (a 64 KiB segmentation-offload packet and the virtio
/// header), with room to see truncation.
pub const BIG: usize = 65_536 + VNET_HDR_LEN + 64;
/// Packets up to this size are copied into a small buffer while they wait (acknowledgements).
pub const SMALL: usize = 2048;
/// Packets read before due packets are written again.
const BATCH: usize = 64;
/// Longest sleep, so that a stop is seen.
const MAX_SLEEP: Nanos = 100_000_000;

/// Counters of one direction, shared with the main thread.
#[derive(Default)]
pub struct Stats {
    pub rx_pkts: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_pkts: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Dropped by random loss.
    pub lost: AtomicU64,
    /// Dropped by the bottleneck's full queue.
    pub overflow: AtomicU64,
    /// Dropped because the buffer pool reached its memory limit.
    pub nomem: AtomicU64,
    /// Failed writes (and truncated reads).
    pub errors: AtomicU64,
    /// Packets waiting in the delay queue.
    pub in_flight: AtomicU64,
    /// Packets on the wire waiting in the bottleneck's queue.
    pub queued: AtomicU64,
}

impl Stats {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

/// Reusable packet buffers of two sizes, with a limit on the memory they take.
struct Pool {
    big: Vec<Box<[u8]>>,
    small: Vec<Box<[u8]>>,
    allocated: usize,
    limit: usize,
}

impl Pool {
    fn take(&mut self, size: usize) -> Option<Box<[u8]>> {
        let free = if size == BIG {
            &mut self.big
        } else {
            &mut self.small
        };
        if let Some(b) = free.pop() {
            return Some(b);
        }
        if self.allocated + size > self.limit {
            return None;
        }
        self.allocated += size;
        Some(vec![0u8; size].into_boxed_slice())
    }

    fn give(&mut self, b: Box<[u8]>) {
        if b.len() == BIG {
            self.big.push(b)
        } else {
            self.small.push(b)
        }
    }
}

struct Held {
    buf: Box<[u8]>,
    len: usize,
}

/// Monotonic nanoseconds since `start`.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Nanos {
        self.0.elapsed().as_nanos() as Nanos
    }
}

pub struct Direction<'a> {
    pub name: &'static str,
    pub src: RawFd,
    pub dst: RawFd,
    pub link: Link,
    pub stats: &'a Stats,
    pub stop: &'a AtomicBool,
    /// Memory limit of this direction's buffers, bytes.
    pub memory: usize,
}

fn write_packet(fd: RawFd, buf: &[u8], stats: &Stats) {
    loop {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            Stats::add(&stats.tx_pkts, 1);
            Stats::add(&stats.tx_bytes, (buf.len() - VNET_HDR_LEN) as u64);
            return;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            Stats::add(&stats.errors, 1);
            return;
        }
    }
}

/// Sleeps until `fd` is readable or `timeout` has passed.
fn wait_readable(fd: RawFd, timeout: Nanos) -> Result<(), String> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(format!("ppoll: {e}"));
        }
    } else if r > 0 && pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
        return Err("the device went away".into());
    }
    Ok(())
}

impl Direction<'_> {
    /// Forwards until `stop` is set or the source fails; returns why it failed.
    pub fn run(mut self, start: Instant) -> Result<(), String> {
        // Deadlines are kept to about a microsecond rather than the default 50 us of timer slack.
        // SAFETY: prctl on this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let clock = Clock(start);
        let mut pool = Pool {
            big: Vec::with_capacity(1024),
            small: Vec::with_capacity(4096),
            allocated: 0,
            limit: self.memory,
        };
        let mut queue: DelayQueue<Held> = DelayQueue::with_capacity(4096);
        let mut rbuf = pool
            .take(BIG)
            .ok_or("the memory limit does not hold one packet buffer")?;
        let stats = self.stats;
        let result = loop {
            if self.stop.load(Relaxed) {
                break Ok(());
            }
            let mut now = clock.now();
            while let Some(h) = queue.pop_due(now) {
                write_packet(self.dst, &h.buf[..h.len], stats);
                pool.give(h.buf);
            }
            stats.in_flight.store(queue.len() as u64, Relaxed);
            stats.queued.store(self.link.queued(), Relaxed);
            let sleep = match queue.next_deadline() {
                Some(t) => t.saturating_sub(now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            if sleep > 0 {
                if let Err(e) = wait_readable(self.src, sleep) {
                    break Err(e);
                }
            }
            let mut failed = None;
            for _ in 0..BATCH {
                // SAFETY: reading into a buffer we own.
                let n = unsafe { libc::read(self.src, rbuf.as_mut_ptr().cast(), rbuf.len()) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EAGAIN) => {}
                        Some(libc::EINTR) => continue,
                        _ => failed = Some(format!("read: {e}")),
                    }
                    break;
                }
                let n = n as usize;
                if n <= VNET_HDR_LEN {
                    continue;
                }
                Stats::add(&stats.rx_pkts, 1);
                Stats::add(&stats.rx_bytes, (n - VNET_HDR_LEN) as u64);
                if n >= BIG {
                    Stats::add(&stats.errors, 1);
                    continue;
                }
                now = clock.now();
                let at = match self.link.arrive(now, &inspect(&rbuf[..n])) {
                    Verdict::Lost => {
                        Stats::add(&stats.lost, 1);
                        continue;
                    }
                    Verdict::Overflow => {
                        Stats::add(&stats.overflow, 1);
                        continue;
                    }
                    Verdict::At(t) => t,
                };
                let nothing_before = match queue.next_deadline() {
                    None => true,
                    Some(d) => d > at,
                };
                if at <= now && nothing_before {
                    write_packet(self.dst, &rbuf[..n], stats);
                } else if n <= SMALL {
                    let Some(mut b) = pool.take(SMALL) else {
                        Stats::add(&stats.nomem, 1);
                        continue;
                    };
                    b[..n].copy_from_slice(&rbuf[..n]);
                    queue.push(at, Held { buf: b, len: n });
                } else {
                    let Some(fresh) = pool.take(BIG) else {
                        Stats::add(&stats.nomem, 1);
                        continue;
                    };
                    let full = std::mem::replace(&mut rbuf, fresh);
                    queue.push(at, Held { buf: full, len: n });
                }
            }
            if let Some(e) = failed {
                break Err(e);
            }
        };
        stats.in_flight.store(0, Relaxed);
        let dropped = queue.drain().count();
        if dropped > 0 {
            eprintln!(
                "protean-wan: {}: {dropped} packets in flight dropped at exit",
                self.name
            );
        }
        result
    }
}
