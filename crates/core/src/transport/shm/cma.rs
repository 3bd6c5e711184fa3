//! Single-copy transfers between processes with Linux cross-memory attach.
//!
//! `process_vm_readv` copies straight from another process's address space into ours; the
//! kernel checks the same permission as ptrace attach (same user, and Yama's ptrace_scope may
//! restrict it to descendants — see [`allow_peers`]). When it is refused the caller falls back
//! to pipelining the data through shared memory.

use std::io;

use crate::mem::{short_distance_slow, slow_distance};

/// Ask the kernel to let any process of ours read this one (Yama ptrace_scope=1). A no-op
/// where Yama is absent.
pub fn allow_peers() {
    // SAFETY: prctl with PR_SET_PTRACER only changes this process's ptracer policy.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// Read `dst.len()` bytes at `addr` in process `pid` into `dst`.
pub fn read_from(pid: u32, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    transfer(pid, addr, dst.as_mut_ptr(), dst.len(), false)
}

/// Write `src` at `addr` in process `pid`.
pub fn write_to(pid: u32, addr: u64, src: &[u8]) -> io::Result<()> {
    transfer(pid, addr, src.as_ptr() as *mut u8, src.len(), true)
}

/// Move `len` bytes between our `local` memory and `addr` in process `pid`: through a buffer
/// of our own when the kernel's copy would be slow ([`slow_distance`] on a processor where
/// [`short_distance_slow`]: see below), else directly, in
/// steps of at most 1 GiB so one call never pins an unbounded amount of memory.
fn transfer(pid: u32, addr: u64, local: *mut u8, len: usize, write: bool) -> io::Result<()> {
    let (src, dst) = if write {
        (local as usize, addr as usize)
    } else {
        (addr as usize, local as usize)
    };
    if len >= BOUNCE_MIN && slow_distance(src, dst) && short_distance_slow() {
        return BOUNCE.with(|b| bounced(&mut b.borrow_mut(), pid, addr, local, len, write));
    }
    direct(pid, addr, local, len, write)
}

/// Copies of at least this many bytes go through the bounce buffer when their distance is slow.
const BOUNCE_MIN: usize = 2048;
/// Bytes moved through the bounce buffer per call (it stays in the core's L2 cache).
const BOUNCE_STEP: usize = 128 << 10;

// The kernel copies with `rep movsb`, which on some x86-64 processors (this project's AMD
// EPYC VMs, kernel 6.18) runs about 5x slower at every size when the destination lies 1-63
// bytes past the source modulo 4096 (`mem::slow_distance`; 4K aliasing: loads wait on stores
// just made to the same page offset). Measured reading our own memory, page-aligned source,
// destination 16 bytes past a page: 64 KiB 43.6 us against 8.1 us at distance 0, 1 MiB 664
// against 131, 4 MiB 2497 against 538. A page-aligned buffer (MPI_Alloc_mem, posix_memalign,
// a window) and a `malloc`ed one (page + 16) meet exactly that in one direction.

thread_local! {
    /// The bounce buffer of this thread (allocated on first use, `BOUNCE_STEP` bytes plus a
    /// page so any page offset fits).
    static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `transfer` in steps through `buf`, placed at the remote side's page offset so that the
/// kernel copies at distance 0; our own copy between `buf` and `local` goes backwards when
/// its distance is slow ([`crate::mem::copy`]). Measured as for the kernel's copy above (own
/// memory, destination page + 16): 64 KiB 11.2 us, 1 MiB 146, 4 MiB 1068.
fn bounced(
    buf: &mut Vec<u8>,
    pid: u32,
    addr: u64,
    local: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<()> {
    if buf.is_empty() {
        buf.resize(BOUNCE_STEP + 4096, 0);
    }
    let base = buf.as_mut_ptr();
    let mut done = 0usize;
    while done < len {
        let at = addr as usize + done;
        let step = (len - done).min(BOUNCE_STEP);
        // `tmp` has the remote address's page offset.
        let skew = at.wrapping_sub(base as usize) & 4095;
        // SAFETY: `skew < 4096` and `step <= BOUNCE_STEP`, so `tmp` and the `step` bytes after
        // it lie in `buf`; `local` covers `len` bytes (the caller's) apart from `buf`.
        let tmp = unsafe { base.add(skew) };
        // SAFETY: as above.
        unsafe {
            if write {
                crate::mem::copy(local.add(done), tmp, step);
                direct(pid, at as u64, tmp, step, true)?;
            } else {
                direct(pid, at as u64, tmp, step, false)?;
                crate::mem::copy(tmp, local.add(done), step);
            }
        }
        done += step;
    }
    Ok(())
}

/// `transfer` without the bounce buffer.
fn direct(pid: u32, addr: u64, local: *mut u8, len: usize, write: bool) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let chunk = (len - done).min(1 << 30);
        // SAFETY: `local` covers `len` bytes of our memory (the caller's slice: written only when
        // reading from the peer); the kernel validates the remote range and returns an error
        // rather than faulting.
        let liov = libc::iovec {
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: chunk,
        };
        let riov = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: chunk,
        };
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid as libc::pid_t, &liov, 1, &riov, 1, 0)
            } else {
                libc::process_vm_readv(pid as libc::pid_t, &liov, 1, &riov, 1, 0)
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "cross-memory transfer moved nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory() {
        let src: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut dst = vec![0u8; src.len()];
        match read_from(std::process::id(), src.as_ptr() as u64, &mut dst) {
            Ok(()) => assert_eq!(src, dst),
            // Some sandboxes forbid cross-memory attach entirely; the engine falls back then.
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)),
                "{e}"
            ),
        }
    }

    #[test]
    fn writes_own_memory() {
        let src: Vec<u8> = (0..70_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        match write_to(std::process::id(), dst.as_mut_ptr() as u64, &src) {
            Ok(()) => assert_eq!(src, dst),
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)),
                "{e}"
            ),
        }
    }

    #[test]
    fn slow_distances_go_through_the_bounce_buffer_intact() {
        let n = 3 * BOUNCE_STEP + 4096;
        let src: Vec<u8> = (0..n + 8192).map(|i| (i * 13 + i / 4099) as u8).collect();
        let mut dst = vec![0u8; n + 8192];
        let page = |p: *const u8| 4096 - (p as usize & 4095);
        let (s0, d0) = (page(src.as_ptr()), page(dst.as_ptr()));
        for len in [
            BOUNCE_MIN - 1,
            BOUNCE_MIN,
            5000,
            BOUNCE_STEP,
            BOUNCE_STEP + 1,
            n,
        ] {
            for (so, dist) in [(0usize, 16usize), (40, 1), (8, 63), (0, 64), (100, 0)] {
                let s = &src[s0 + so..s0 + so + len];
                let at = d0 + so + dist;
                assert!(
                    slow_distance(s.as_ptr() as usize, dst[at..].as_ptr() as usize)
                        == (1..64).contains(&dist)
                );
                dst.fill(0);
                let r = read_from(
                    std::process::id(),
                    s.as_ptr() as u64,
                    &mut dst[at..at + len],
                );
                if r.is_err() {
                    return; // cross-memory attach refused here (see reads_own_memory)
                }
                assert!(&dst[at..at + len] == s, "read {len} at distance {dist}");
                assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0));
                dst.fill(0);
                write_to(std::process::id(), dst[at..].as_ptr() as u64, s).unwrap();
                assert!(&dst[at..at + len] == s, "write {len} at distance {dist}");
                assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0));
                // The bounce buffer itself, which a processor without the slow distance
                // never takes (`short_distance_slow`).
                for write in [false, true] {
                    dst.fill(0);
                    let (local, addr) = if write {
                        (s.as_ptr() as *mut u8, dst[at..].as_ptr() as u64)
                    } else {
                        (dst[at..].as_mut_ptr(), s.as_ptr() as u64)
                    };
                    BOUNCE
                        .with(|b| {
                            bounced(
                                &mut b.borrow_mut(),
                                std::process::id(),
                                addr,
                                local,
                                len,
                                write,
                            )
                        })
                        .unwrap();
                    assert!(&dst[at..at + len] == s, "bounced {len} at {dist}, {write}");
                    assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0));
                }
            }
        }
    }

    #[test]
    fn bad_address_is_an_error() {
        let mut dst = [0u8; 16];
        assert!(read_from(std::process::id(), 8, &mut dst).is_err());
    }
}
