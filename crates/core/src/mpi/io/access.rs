//! Data access (MPI-4.0 section 14.4): reads and writes at explicit offsets, at the
//! individual and the shared file pointer, ordered, split collective; positioning.

use std::borrow::Cow;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::{allgather_i64, bcast_i64, get, io_error, mode, File, Rep, Split, View};
use super::{SEEK_CUR, SEEK_END, SEEK_SET};
use crate::err;
use crate::error::Result;
use crate::ids::{DtypeId, ReqId};
use crate::mpi::datatype::{sig, Datatype};
use crate::mpi::global::with;
use crate::mpi::request::Status;

/// Where an access starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pos {
    /// An explicit offset, in etypes of the view.
    At(i64),
    /// The individual file pointer (advanced by the access).
    Individual,
    /// The shared file pointer (advanced by the access, atomically among the processes).
    Shared,
}

/// Noncontiguous reads take the span around pieces at most this far apart in one read...
const SIEVE_GAP: u64 = 64 << 10;
/// ... spans of at most this many bytes.
const SIEVE_SPAN: u64 = 4 << 20;

/// The status of an access that moved `bytes`.
fn status(bytes: u64) -> Status {
    Status {
        bytes,
        ..Status::EMPTY
    }
}

fn dtype(dt: DtypeId) -> Result<Arc<Datatype>> {
    let d = with(|e| e.dtype(dt).cloned())??;
    if !d.committed {
        return err!(
            Type,
            "the datatype has not been committed (call MPI_Type_commit)"
        );
    }
    Ok(d)
}

fn count_of(count: i64) -> Result<usize> {
    usize::try_from(count).map_err(|_| crate::mpi_error!(Count, "negative count {count}"))
}

/// A POSIX byte-range lock over an access's span (atomic mode), released when dropped.
struct RangeLock {
    fd: RawFd,
    start: u64,
    len: u64,
}

impl RangeLock {
    fn take(fd: RawFd, write: bool, start: u64, len: u64) -> Result<RangeLock> {
        let l = RangeLock { fd, start, len };
        let ty = if write { libc::F_WRLCK } else { libc::F_RDLCK };
        loop {
            if l.fcntl(ty as i16) == 0 {
                return Ok(l);
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(io_error(&e, "atomic mode: cannot lock the bytes accessed"));
            }
        }
    }

    fn fcntl(&self, ty: i16) -> i32 {
        // SAFETY: a zeroed flock is valid; the descriptor is the file's.
        unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = ty;
            fl.l_whence = libc::SEEK_SET as i16;
            fl.l_start = self.start as libc::off_t;
            fl.l_len = self.len as libc::off_t;
            libc::fcntl(self.fd, libc::F_SETLKW, &fl)
        }
    }
}

impl Drop for RangeLock {
    fn drop(&mut self) {
        self.fcntl(libc::F_UNLCK as i16);
    }
}

/// Read at `off` until `out` is full or the file ends; the bytes read.
fn read_full(fd: &std::fs::File, out: &mut [u8], off: u64) -> Result<usize> {
    let mut got = 0;
    while got < out.len() {
        match fd.read_at(&mut out[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(&e, "read")),
        }
    }
    Ok(got)
}

/// Read the file extents `segs` into `out` one after the other (data sieving: neighbouring
/// extents are read as one span). Returns the bytes of `out` filled before the end of the
/// file.
fn read_segments(fd: &std::fs::File, segs: &[(u64, u64)], out: &mut [u8]) -> Result<usize> {
    let (mut i, mut k) = (0, 0usize);
    let mut tmp = Vec::new();
    while i < segs.len() {
        let start = segs[i].0;
        let mut end = start + segs[i].1;
        let mut j = i + 1;
        while j < segs.len()
            && segs[j].0 >= end
            && segs[j].0 - end <= SIEVE_GAP
            && segs[j].0 + segs[j].1 - start <= SIEVE_SPAN
        {
            end = segs[j].0 + segs[j].1;
            j += 1;
        }
        if j == i + 1 {
            let l = segs[i].1 as usize;
            let got = read_full(fd, &mut out[k..k + l], start)?;
            k += got;
            if got < l {
                return Ok(k);
            }
        } else {
            tmp.resize((end - start) as usize, 0);
            let got = read_full(fd, &mut tmp, start)? as u64;
            for &(o, l) in &segs[i..j] {
                let have = got.saturating_sub(o - start).min(l) as usize;
                let from = (o - start) as usize;
                out[k..k + have].copy_from_slice(&tmp[from..from + have]);
                k += have;
                if have < l as usize {
                    return Ok(k);
                }
            }
        }
        i = j;
    }
    Ok(k)
}

/// The bytes `count` elements of `dt` at `buf` write: the memory itself where it is one
/// span, else packed by the datatype engine.
///
/// # Safety
/// `buf` holds `count` elements of `dt`, alive as long as the result.
unsafe fn packed<'a>(buf: *const u8, count: usize, dt: &Datatype) -> Cow<'a, [u8]> {
    let n = dt.size * count;
    match dt.contiguous_span(count) {
        Some(off) => Cow::Borrowed(std::slice::from_raw_parts(buf.offset(off), n)),
        None => {
            let mut v = Vec::with_capacity(n);
            dt.pack(buf, count, &mut v);
            Cow::Owned(v)
        }
    }
}

/// Move `count` elements of `dt` at `buf` to or from the view's stream from etype `start`.
/// Returns the bytes moved (a read stops at the end of the file).
///
/// # Safety
/// `buf` holds `count` elements of `dt` (MPI's rule for I/O buffers).
#[allow(clippy::too_many_arguments)]
unsafe fn transfer(
    f: &File,
    view: &View,
    atomic: bool,
    start: u64,
    write: bool,
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
) -> Result<u64> {
    let n = dt
        .packed_size(count)
        .ok_or_else(|| crate::mpi_error!(Count, "count {count} overflows"))?;
    if n == 0 {
        return Ok(0);
    }
    let ext32 = view.rep == Rep::External32;
    if ext32 && !super::ext32_same_layout(dt) {
        return err!(
            UnsupportedDatarep,
            "external32 access with {} (whose values change size in external32) is not supported yet",
            dt.describe()
        );
    }
    let span = dt.contiguous_span(count);
    if buf.is_null() && span == Some(0) {
        return err!(Buffer, "null buffer for {n} bytes");
    }
    let pos = start
        .checked_mul(view.esize())
        .ok_or_else(|| crate::mpi_error!(Arg, "offset {start} overflows"))?;
    let mut segs = Vec::new();
    view.map
        .segments(pos, n as u64, &mut |o, l| segs.push((o, l)));
    let _lock = if atomic {
        let lo = segs.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = segs.iter().map(|s| s.0 + s.1).max().unwrap_or(0);
        Some(RangeLock::take(f.fd.as_raw_fd(), write, lo, hi - lo)?)
    } else {
        None
    };
    if write {
        let mut data = packed(buf, count, dt);
        if ext32 {
            let mut c = vec![0u8; n];
            sig::convert(&dt.sig, count, &data, &mut c, true);
            data = Cow::Owned(c);
        }
        write_pieces(f, &segs, &data)?;
        return Ok(n as u64);
    }
    if let (false, Some(off), [(o, _)]) = (ext32, span, &*segs) {
        let out = std::slice::from_raw_parts_mut(buf.offset(off), n);
        return Ok(read_full(&f.fd, out, *o)? as u64);
    }
    let mut v = vec![0u8; n];
    let got = read_segments(&f.fd, &segs, &mut v)?;
    if ext32 {
        let whole = got / dt.size;
        let mut c = vec![0u8; whole * dt.size];
        sig::convert(&dt.sig, whole, &v[..c.len()], &mut c, false);
        c.extend_from_slice(&v[c.len()..got]);
        v = c;
    } else {
        v.truncate(got);
    }
    dt.unpack(&v, buf, count);
    Ok(got as u64)
}

/// Write the consecutive bytes of `data` at the file extents `segs`, one after the other.
fn write_pieces(f: &File, segs: &[(u64, u64)], data: &[u8]) -> Result<()> {
    let mut k = 0;
    for &(o, l) in segs {
        let l = l as usize;
        f.fd.write_all_at(&data[k..k + l], o)
            .map_err(|e| io_error(&e, &format!("write to {}", f.path.display())))?;
        k += l;
    }
    Ok(())
}

/// Checks every access makes before touching the file.
fn check_access(f: &File, write: bool, pos: Pos) -> Result<()> {
    if write && f.amode & mode::RDONLY != 0 {
        return err!(ReadOnly, "cannot write to a file opened MPI_MODE_RDONLY");
    }
    if !write && f.amode & mode::WRONLY != 0 {
        return err!(Access, "cannot read from a file opened MPI_MODE_WRONLY");
    }
    if f.amode & mode::SEQUENTIAL != 0 && pos != Pos::Shared {
        return err!(
            UnsupportedOperation,
            "a file opened MPI_MODE_SEQUENTIAL is accessed through the shared file pointer only"
        );
    }
    Ok(())
}

/// Etypes in `bytes` of data, rounded up (a read that ends inside an etype still moves the
/// pointer past it).
fn etypes(view: &View, bytes: u64) -> u64 {
    bytes.div_ceil(view.esize())
}

/// The etypes `count` elements of `dt` make in `view`; an error when they are not whole.
fn whole_etypes(view: &View, count: usize, dt: &Datatype) -> Result<u64> {
    let n = (dt.size as u64).saturating_mul(count as u64);
    if !n.is_multiple_of(view.esize()) {
        return err!(
            Type,
            "{count} elements of {} are {n} bytes, not a whole number of etypes ({} bytes each)",
            dt.describe(),
            view.esize()
        );
    }
    Ok(n / view.esize())
}

/// What every access needs first: the file, the count, the datatype, and the access
/// allowed.
fn prepare(
    id: u32,
    write: bool,
    pos: Pos,
    count: i64,
    dt: DtypeId,
) -> Result<(Arc<File>, usize, Arc<Datatype>)> {
    let f = get(id)?;
    let count = count_of(count)?;
    let d = dtype(dt)?;
    check_access(&f, write, pos)?;
    Ok((f, count, d))
}

/// MPI_File_read/write and their `_at`, `_shared`, `_all` forms: the status of the access.
///
/// # Safety
/// `buf` holds `count` elements of `dt` and, for a read, is writable.
pub unsafe fn rw(
    id: u32,
    pos: Pos,
    write: bool,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
) -> Result<Status> {
    let (f, count, d) = prepare(id, write, pos, count, dt)?;
    match pos {
        Pos::At(off) => {
            if off < 0 {
                return err!(Arg, "negative offset {off}");
            }
            let (view, atomic) = {
                let st = f.state();
                (st.view.clone(), st.atomic)
            };
            whole_etypes(&view, count, &d)?;
            let n = transfer(&f, &view, atomic, off as u64, write, buf, count, &d)?;
            Ok(status(n))
        }
        Pos::Individual => {
            // The pointer's owner holds the state across the access: two threads of a
            // process never move it past each other.
            let mut st = f.state();
            let view = st.view.clone();
            whole_etypes(&view, count, &d)?;
            let n = transfer(&f, &view, st.atomic, st.pos, write, buf, count, &d)?;
            st.pos += etypes(&view, n);
            Ok(status(n))
        }
        Pos::Shared => {
            let (view, atomic) = {
                let st = f.state();
                (st.view.clone(), st.atomic)
            };
            let e = whole_etypes(&view, count, &d)?;
            let at = f.shared_add(e)?;
            let n = transfer(&f, &view, atomic, at, write, buf, count, &d)?;
            Ok(status(n))
        }
    }
}

/// MPI_File_write_all and MPI_File_write_at_all (`pos`: the individual pointer or an
/// explicit offset), blocking: with collective buffering where the views call for it
/// (`buffering.rs`), else as the independent forms.
///
/// # Safety
/// As [`rw`].
pub unsafe fn write_all(
    id: u32,
    pos: Pos,
    buf: *const u8,
    count: i64,
    dt: DtypeId,
) -> Result<Status> {
    let f = get(id)?;
    let mut st = f.state();
    let view = st.view.clone();
    if f.size == 1 || view.all_contig || st.atomic || view.rep == Rep::External32 {
        drop(st);
        return rw(id, pos, true, buf as *mut u8, count, dt);
    }
    // Everything this process would check, kept for the word with the others: a process
    // that fails here still takes part, and every process returns an error.
    let local = (|| -> Result<(usize, Arc<Datatype>, u64)> {
        let count = count_of(count)?;
        let d = dtype(dt)?;
        check_access(&f, true, pos)?;
        whole_etypes(&view, count, &d)?;
        let start = match pos {
            Pos::At(off) if off < 0 => return err!(Arg, "negative offset {off}"),
            Pos::At(off) => off as u64,
            _ => st.pos,
        };
        if buf.is_null() && d.contiguous_span(count) == Some(0) && d.size * count > 0 {
            return err!(Buffer, "null buffer for {} bytes", d.size * count);
        }
        Ok((count, d, start))
    })();
    let mut segs = Vec::new();
    let mut data: Cow<[u8]> = Cow::Borrowed(&[]);
    if let Ok((count, d, start)) = &local {
        let n = d.size * count;
        view.map
            .segments(start * view.esize(), n as u64, &mut |o, l| {
                segs.push((o, l))
            });
        data = packed(buf, *count, d);
    }
    let checked = local.as_ref().map(|_| ()).map_err(|e| e.clone());
    if !super::buffering::write(&f, &segs, &data, &checked)? {
        write_pieces(&f, &segs, &data)?;
    }
    let n = data.len() as u64;
    if pos == Pos::Individual {
        st.pos += etypes(&view, n);
    }
    Ok(status(n))
}

/// MPI_File_read_ordered / write_ordered: collective; the processes' data follow each other
/// in rank order from the shared file pointer, which moves past all of it.
///
/// # Safety
/// As [`rw`].
pub unsafe fn ordered(
    id: u32,
    write: bool,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
) -> Result<Status> {
    let (f, count, d) = prepare(id, write, Pos::Shared, count, dt)?;
    let (view, atomic) = {
        let st = f.state();
        (st.view.clone(), st.atomic)
    };
    let mine = whole_etypes(&view, count, &d)?;
    let at = if f.size == 1 {
        f.shared_add(mine)?
    } else {
        let all = allgather_i64(f.comm, mine as i64)?;
        let before: i64 = all[..f.rank].iter().sum();
        let total: i64 = all.iter().sum();
        let mut base = 0;
        if f.rank == 0 {
            base = f.shared_add(total as u64)? as i64;
        }
        bcast_i64(f.comm, [base, 0])?[0] as u64 + before as u64
    };
    let n = transfer(&f, &view, atomic, at, write, buf, count, &d)?;
    Ok(status(n))
}

/// The begin call of a split collective: the access happens here; the end call collects its
/// status.
///
/// # Safety
/// As [`rw`].
pub unsafe fn begin(
    id: u32,
    s: Split,
    pos: Pos,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
) -> Result<()> {
    let f = get(id)?;
    if let Some((on, _)) = f.state().split {
        return err!(
            Other,
            "{} was called and its end call has not been made yet: one split collective at a time per file",
            on.name()
        );
    }
    let write = matches!(s, Split::WriteAt | Split::WriteAll | Split::WriteOrdered);
    let st = match s {
        Split::ReadOrdered | Split::WriteOrdered => ordered(id, write, buf, count, dt)?,
        Split::WriteAll | Split::WriteAt => write_all(id, pos, buf, count, dt)?,
        _ => rw(id, pos, write, buf, count, dt)?,
    };
    f.state().split = Some((s, st.bytes));
    Ok(())
}

/// The end call of split collective `s`: its status.
pub fn end(id: u32, s: Split) -> Result<Status> {
    let f = get(id)?;
    let mut st = f.state();
    match st.split {
        Some((on, bytes)) if on == s => {
            st.split = None;
            Ok(status(bytes))
        }
        Some((on, _)) => err!(
            Other,
            "the split collective under way began with {}, not {}",
            on.name(),
            s.name()
        ),
        None => err!(Other, "no {} was called before this end call", s.name()),
    }
}

/// A completed request for a nonblocking access (the access is done when the call returns).
pub fn done_request(id: u32, st: Status) -> Result<ReqId> {
    let f = get(id)?;
    with(|e| e.done_request(f.comm, st))
}

/// The pointer position `whence` and `off` name, from `cur` (etypes).
fn seek_to(f: &File, view: &View, cur: u64, off: i64, whence: i32) -> Result<u64> {
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => cur as i64,
        SEEK_END => {
            let eof =
                f.fd.metadata()
                    .map_err(|e| io_error(&e, "the file's size"))?
                    .len();
            etypes(view, view.map.bytes_before(eof)) as i64
        }
        _ => {
            return err!(
                Arg,
                "whence {whence} is not MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END"
            )
        }
    };
    let to = base.checked_add(off).unwrap_or(-1);
    if to < 0 {
        return err!(
            Arg,
            "the seek would put the file pointer before the start of the view ({base} + {off})"
        );
    }
    Ok(to as u64)
}

/// MPI_File_seek.
pub fn seek(id: u32, off: i64, whence: i32) -> Result<()> {
    let f = get(id)?;
    if f.amode & mode::SEQUENTIAL != 0 {
        return err!(
            UnsupportedOperation,
            "a file opened MPI_MODE_SEQUENTIAL has no individual file pointer"
        );
    }
    let mut st = f.state();
    let view = st.view.clone();
    st.pos = seek_to(&f, &view, st.pos, off, whence)?;
    Ok(())
}

/// MPI_File_seek_shared: collective; every process passes the same offset and whence.
pub fn seek_shared(id: u32, off: i64, whence: i32) -> Result<()> {
    let f = get(id)?;
    let view = f.state().view.clone();
    let mut to = -1i64;
    let mut why = None;
    // Every process is done with the pointer before rank 0 moves it.
    if f.size > 1 {
        crate::mpi::coll::barrier(f.comm)?;
    }
    if f.rank == 0 {
        let cur = if whence == SEEK_CUR {
            f.shared_get()?
        } else {
            0
        };
        match seek_to(&f, &view, cur, off, whence) {
            Ok(v) => {
                f.shared_set(v)?;
                to = v as i64;
            }
            Err(e) => why = Some(e),
        }
    }
    if f.size > 1 {
        let [root, _] = bcast_i64(f.comm, [to, 0])?;
        to = root;
    }
    if let Some(e) = why {
        return Err(e);
    }
    if to < 0 {
        return err!(
            Arg,
            "the shared file pointer could not be moved (see rank 0's error)"
        );
    }
    Ok(())
}

/// MPI_File_get_position: the individual pointer, in etypes.
pub fn position(id: u32) -> Result<u64> {
    let f = get(id)?;
    let p = f.state().pos;
    Ok(p)
}

/// MPI_File_get_position_shared.
pub fn position_shared(id: u32) -> Result<u64> {
    get(id)?.shared_get()
}

/// MPI_File_get_byte_offset: the file offset of etype `off` of the view.
pub fn byte_offset(id: u32, off: i64) -> Result<u64> {
    if off < 0 {
        return err!(Arg, "negative offset {off}");
    }
    let f = get(id)?;
    let view = f.state().view.clone();
    Ok(view.map.byte_offset(off as u64 * view.esize()))
}

/// MPI_File_get_view's values.
pub fn view(id: u32) -> Result<Arc<View>> {
    Ok(get(id)?.state().view.clone())
}

/// MPI_File_get_type_extent: the extent of `dt` in the file's representation.
pub fn type_extent(id: u32, dt: DtypeId) -> Result<i64> {
    let f = get(id)?;
    let d = with(|e| e.dtype(dt).cloned())??;
    let ext32 = f.state().view.rep == Rep::External32;
    if ext32 && d.contig {
        if let Some(n) = d.ext32_size(1) {
            return Ok(n as i64);
        }
    }
    Ok(d.extent() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile_path::Tmp, std::fs::File) {
        let t = tempfile_path::Tmp::new();
        std::fs::write(&t.0, bytes).unwrap();
        let f = std::fs::File::open(&t.0).unwrap();
        (t, f)
    }

    /// A temporary path removed when dropped.
    mod tempfile_path {
        pub struct Tmp(pub std::path::PathBuf);
        impl Tmp {
            pub fn new() -> Tmp {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                Tmp(std::env::temp_dir().join(format!(
                    "protean-io-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                )))
            }
        }
        impl Drop for Tmp {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn sieved_reads_pick_the_pieces_and_stop_at_eof() {
        let data: Vec<u8> = (0..200u8).collect();
        let (_t, f) = file_with(&data);
        // Close pieces (one span), then one far away, then one past the end.
        let segs = [(2, 3), (10, 2), (13, 1), (150, 4), (198, 5)];
        let mut out = vec![0u8; 15];
        let got = read_segments(&f, &segs, &mut out).unwrap();
        assert_eq!(got, 3 + 2 + 1 + 4 + 2);
        assert_eq!(
            &out[..got],
            &[2, 3, 4, 10, 11, 13, 150, 151, 152, 153, 198, 199]
        );
        // Pieces out of order are read one by one.
        let segs = [(20, 2), (5, 2)];
        let mut out = vec![0u8; 4];
        assert_eq!(read_segments(&f, &segs, &mut out).unwrap(), 4);
        assert_eq!(out, [20, 21, 5, 6]);
    }

    #[test]
    fn range_locks_exclude_other_processes_ranges() {
        let (t, f) = file_with(&[0u8; 64]);
        let w = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&t.0)
            .unwrap();
        let l = RangeLock::take(w.as_raw_fd(), true, 8, 16).unwrap();
        // Another process would block on an overlapping range; this one sees its own lock
        // through F_GETLK as free, so ask a child.
        // SAFETY: fork in a test thread: the child only calls fcntl and _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut fl: libc::flock = unsafe { std::mem::zeroed() };
            fl.l_type = libc::F_WRLCK as i16;
            fl.l_whence = libc::SEEK_SET as i16;
            fl.l_start = 10;
            fl.l_len = 1;
            let blocked = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETLK, &mut fl) } == 0
                && fl.l_type != libc::F_UNLCK as i16;
            fl.l_start = 40;
            fl.l_type = libc::F_WRLCK as i16;
            let free = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETLK, &mut fl) } == 0
                && fl.l_type == libc::F_UNLCK as i16;
            unsafe { libc::_exit(if blocked && free { 0 } else { 1 }) };
        }
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "{st}");
        drop(l);
        drop(f);
    }
}
