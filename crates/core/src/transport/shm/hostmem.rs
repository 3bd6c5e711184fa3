//! Memory shared by the processes of one host: the segments behind one-sided windows that live
//! in shared memory (MPI_Win_allocate, MPI_Win_allocate_shared) and the control blocks of every
//! window with several processes on a host (see `transport::HostMem` in the contract).
//!
//! One process creates a segment, `/dev/shm/protean-<jobid>-<gpid>-w<serial>`, of a given
//! length (zero-filled by the kernel); the others map it from its description, a
//! [`Region`] holding `gpid: u32, serial: u32, len: u64` (little endian, the rest zero).
//! The creator unlinks the name once every process that needs it has mapped it (the caller
//! knows when: after a barrier), so nothing is left in /dev/shm even if the job is killed;
//! mpirun also removes `protean-<jobid>-*`. The memory stays mapped until the [`HostMem`]
//! drops.

use std::ffi::CString;
use std::io;

use crate::transport::{Gpid, Region, Span, REGION_LEN};

fn name(jobid: &str, gpid: Gpid, serial: u32) -> CString {
    CString::new(format!("/protean-{jobid}-{gpid}-w{serial}")).expect("job id without NUL")
}

/// What a host-memory description says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostMemDesc {
    pub gpid: Gpid,
    pub serial: u32,
    pub len: u64,
}

impl HostMemDesc {
    pub fn encode(&self) -> Region {
        let mut b = [0u8; REGION_LEN];
        b[0..4].copy_from_slice(&self.gpid.get().to_le_bytes());
        b[4..8].copy_from_slice(&self.serial.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        Region(b)
    }

    pub fn decode(r: &Region) -> Option<HostMemDesc> {
        let b = &r.0;
        let d = HostMemDesc {
            gpid: Gpid::new(u32::from_le_bytes(b[0..4].try_into().expect("4"))),
            serial: u32::from_le_bytes(b[4..8].try_into().expect("4")),
            len: u64::from_le_bytes(b[8..16].try_into().expect("8")),
        };
        (d.len > 0 && b[16..].iter().all(|&x| x == 0)).then_some(d)
    }
}

/// A mapped host-memory segment.
pub struct HostMem {
    base: *mut u8,
    len: usize,
    desc: HostMemDesc,
    /// The name still exists in /dev/shm and we created it.
    linked: Option<CString>,
}

// SAFETY: the mapping is plain shared memory; the engine that owns a HostMem is used by one
// thread at a time (runtime::global), and the memory itself is shared by design.
unsafe impl Send for HostMem {}

fn map(fd: libc::c_int, len: usize) -> io::Result<*mut u8> {
    // SAFETY: mapping a shared-memory object we just opened; the result is checked.
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
    Ok(p.cast())
}

impl HostMem {
    /// Create a segment of `len` bytes (> 0) for the processes of this host.
    pub fn create(jobid: &str, me: Gpid, serial: u32, len: usize) -> io::Result<HostMem> {
        let n = name(jobid, me, serial);
        let len = len.max(1);
        // SAFETY: plain shm_open/ftruncate/close on a name we own; results are checked.
        let fd = unsafe {
            libc::shm_open(
                n.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("shm_open {}: {e}", n.to_string_lossy()),
            ));
        }
        // SAFETY: fd is valid.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing and unlinking what we just made.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(n.as_ptr());
            }
            return Err(io::Error::new(
                e.kind(),
                format!("cannot size a {len}-byte shared-memory segment for a window: {e}"),
            ));
        }
        let m = map(fd, len);
        // SAFETY: fd is valid; the mapping (if any) keeps the memory.
        unsafe { libc::close(fd) };
        let base = m.inspect_err(|_| unsafe {
            libc::shm_unlink(n.as_ptr());
        })?;
        Ok(HostMem {
            base,
            len,
            desc: HostMemDesc {
                gpid: me,
                serial,
                len: len as u64,
            },
            linked: Some(n),
        })
    }

    /// Map a segment another process of this host created (before it unlinked the name).
    pub fn open(jobid: &str, desc: &Region) -> io::Result<HostMem> {
        let d = HostMemDesc::decode(desc).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed description of a window's shared memory",
            )
        })?;
        let n = name(jobid, d.gpid, d.serial);
        // SAFETY: opening an existing segment read-write; checked.
        let fd = unsafe { libc::shm_open(n.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("shm_open {}: {e}", n.to_string_lossy()),
            ));
        }
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd valid, st is a properly sized out-parameter.
        if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_size as u64) < d.len {
            unsafe { libc::close(fd) };
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a window's shared-memory segment is shorter than described",
            ));
        }
        let m = map(fd, d.len as usize);
        unsafe { libc::close(fd) };
        Ok(HostMem {
            base: m?,
            len: d.len as usize,
            desc: d,
            linked: None,
        })
    }

    /// The description other processes map it by.
    pub fn desc(&self) -> Region {
        self.desc.encode()
    }

    /// The whole mapping.
    pub fn span(&self) -> Span {
        // SAFETY: the mapping stays valid until self drops, and the owner of the HostMem
        // keeps it as long as anything uses the span.
        unsafe { Span::new(self.base, self.len) }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Remove the name (creator only; every process that needs it has mapped it).
    pub fn unlink(&mut self) {
        if let Some(n) = self.linked.take() {
            // SAFETY: unlinking a name we created; failure (already gone) is harmless.
            unsafe { libc::shm_unlink(n.as_ptr()) };
        }
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        self.unlink();
        // SAFETY: base/len came from a successful mmap; the owner drops the HostMem only when
        // nothing uses the memory any more.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_segments_are_mapped_twice_and_unlinked() {
        let job = format!("t{}", std::process::id());
        let mut a = HostMem::create(&job, Gpid::new(3), 7, 10000).unwrap();
        let b = HostMem::open(&job, &a.desc()).unwrap();
        assert_eq!(b.len(), 10000);
        // SAFETY: both mappings are 10000 bytes of the same shared memory.
        unsafe {
            *a.base().add(9999) = 42;
            assert_eq!(*b.base().add(9999), 42);
            assert_eq!(*b.base(), 0, "zero-filled");
        }
        a.unlink();
        assert!(HostMem::open(&job, &a.desc()).is_err(), "name removed");
        assert_eq!(HostMemDesc::decode(&a.desc()).unwrap().serial, 7);
        assert!(HostMemDesc::decode(&Region::NONE).is_none());
    }
}
