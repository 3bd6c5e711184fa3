//! MPI-IO (MPI-4.0 chapter 14): files opened by a group of processes, views, data access
//! with explicit offsets, individual and shared file pointers, collective and split
//! collective forms, consistency and atomicity.
//!
//! A file is a POSIX file descriptor in every process that opened it, over a duplicate of the
//! communicator it was opened on (its collectives never meet the application's). Data moves
//! with `pread`/`pwrite` along the view's map (`view.rs`); noncontiguous reads read the
//! span around neighbouring pieces at once and pick them out (data sieving); writes go piece
//! by piece, so that nothing outside the view is ever written. Atomic mode takes a POSIX
//! byte-range lock over the span of each access. The collective forms (`_all`, split
//! collectives) do the same independent accesses as their independent forms: MPI's
//! consistency rules ask nothing more of them (the application synchronises conflicting
//! accesses with MPI_File_sync and a barrier), and it leaves the nonblocking collective forms
//! free of any wait on other processes. The shared file pointer lives in a one-sided window
//! at rank 0 of the file's communicator, moved by MPI_Fetch_and_op in a passive epoch that a
//! process opens at its first use and holds until close,
//! so that a process reaches it without the others' help on a transport that exposes
//! memory; the ordered forms gather the counts, rank 0 moves the pointer once, and every
//! process accesses its part at once.
//!
//! Files live in a table of their own, not in the engine: a read or write takes the engine
//! only for the collectives and the shared pointer, never across a system call.

pub mod access;
mod buffering;
pub mod view;

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{ErrorClass, MpiError, Result};
use crate::ids::{CommId, DtypeId};
use crate::mpi::coll::{self, Args, Counts};
use crate::mpi::comm::ERRH_RETURN;
use crate::mpi::datatype::{predefined, predefined_index, Datatype};
use crate::mpi::global::with;
use crate::mpi::rma::ops::{Buf, Target, What};
use crate::{err, mpi_error};
use view::Map;

/// Access modes, with the values of the MPICH ABI (mpi.h's MPI_MODE_*).
pub mod mode {
    pub const CREATE: i32 = 1;
    pub const RDONLY: i32 = 2;
    pub const WRONLY: i32 = 4;
    pub const RDWR: i32 = 8;
    pub const DELETE_ON_CLOSE: i32 = 16;
    pub const UNIQUE_OPEN: i32 = 32;
    pub const EXCL: i32 = 64;
    pub const APPEND: i32 = 128;
    pub const SEQUENTIAL: i32 = 256;
    pub const ALL: i32 = 511;
}

/// MPI_SEEK_SET, MPI_SEEK_CUR, MPI_SEEK_END and MPI_DISPLACEMENT_CURRENT (MPICH ABI values).
pub const SEEK_SET: i32 = 600;
pub const SEEK_CUR: i32 = 602;
pub const SEEK_END: i32 = 604;
pub const DISPLACEMENT_CURRENT: i64 = -54278278;

/// Engine ids of the predefined operations the shared pointer uses (MPI_SUM, MPI_REPLACE,
/// MPI_NO_OP; `coll::op::Builtin` order).
const OP_SUM: u32 = 2;
const OP_REPLACE: u32 = 12;
const OP_NO_OP: u32 = 13;

/// A data representation (MPI-4.0 section 14.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rep {
    Native,
    Internal,
    /// external32: supported where every basic value of the view's and the buffers' types
    /// has the same size in both forms (the layout is then the native one; values are
    /// converted as they move).
    External32,
    /// Registered by MPI_Register_datarep without conversion functions: native bytes.
    User(String),
}

impl Rep {
    pub fn name(&self) -> &str {
        match self {
            Rep::Native => "native",
            Rep::Internal => "internal",
            Rep::External32 => "external32",
            Rep::User(n) => n,
        }
    }
}

/// A view: displacement, etype, filetype, representation, and the map they make.
#[derive(Debug, Clone)]
pub struct View {
    pub disp: u64,
    pub etype: (DtypeId, Arc<Datatype>),
    pub ftype: (DtypeId, Arc<Datatype>),
    pub rep: Rep,
    pub map: Map,
    /// Every process's view of the file is contiguous (agreed at MPI_File_set_view): a
    /// collective write then needs no collective buffering, nor a word with the others.
    pub all_contig: bool,
}

impl View {
    /// Bytes of one etype.
    pub fn esize(&self) -> u64 {
        self.etype.1.size as u64
    }
}

/// Which split collective is under way (begun and not yet ended), and its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    ReadAt,
    WriteAt,
    ReadAll,
    WriteAll,
    ReadOrdered,
    WriteOrdered,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::ReadAt => "MPI_File_read_at_all_begin",
            Split::WriteAt => "MPI_File_write_at_all_begin",
            Split::ReadAll => "MPI_File_read_all_begin",
            Split::WriteAll => "MPI_File_write_all_begin",
            Split::ReadOrdered => "MPI_File_read_ordered_begin",
            Split::WriteOrdered => "MPI_File_write_ordered_begin",
        }
    }
}

/// What a file's process may change after opening it.
pub struct State {
    pub view: Arc<View>,
    /// The individual file pointer, in etypes of the view.
    pub pos: u64,
    pub atomic: bool,
    /// Engine id of the file's error handler.
    pub errhandler: u32,
    pub hints: Vec<(String, String)>,
    /// A split collective begun: which, and the bytes it moved.
    pub split: Option<(Split, u64)>,
}

/// Where the shared file pointer (in etypes) is kept.
enum Shared {
    /// A file of one process: here.
    Local(Mutex<u64>),
    /// A window holding one 64-bit integer at rank 0 of the file's communicator, and
    /// whether this process holds its passive epoch (MPI_Win_lock_all, taken at the first use
    /// and kept until the file is closed).
    Win(u32, Mutex<bool>),
}

/// An open file.
pub struct File {
    pub fd: std::fs::File,
    /// The file's own communicator (a duplicate of the one it was opened on).
    pub comm: CommId,
    pub rank: usize,
    pub size: usize,
    pub amode: i32,
    pub path: PathBuf,
    shared: Shared,
    st: Mutex<State>,
}

impl File {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add `n` etypes to the shared pointer; its value before.
    pub fn shared_add(&self, n: u64) -> Result<u64> {
        match &self.shared {
            Shared::Local(m) => {
                let mut v = m.lock().unwrap_or_else(|p| p.into_inner());
                let old = *v;
                *v += n;
                Ok(old)
            }
            Shared::Win(w, l) => self.win_rmw(*w, l, OP_SUM, n as i64).map(|v| v as u64),
        }
    }

    /// The shared pointer's value.
    pub fn shared_get(&self) -> Result<u64> {
        match &self.shared {
            Shared::Local(m) => Ok(*m.lock().unwrap_or_else(|p| p.into_inner())),
            Shared::Win(w, l) => self.win_rmw(*w, l, OP_NO_OP, 0).map(|v| v as u64),
        }
    }

    /// Set the shared pointer (one process does it; the caller synchronises).
    pub fn shared_set(&self, v: u64) -> Result<()> {
        match &self.shared {
            Shared::Local(m) => {
                *m.lock().unwrap_or_else(|p| p.into_inner()) = v;
                Ok(())
            }
            Shared::Win(w, l) => self.win_rmw(*w, l, OP_REPLACE, v as i64).map(|_| ()),
        }
    }

    /// One read-modify-write of the window's integer: an accumulate operation, atomic
    /// against the others on it, in the passive epoch this process opens on the window at
    /// its first use and holds until close (MPI_Win_lock_all), completed by a flush.
    fn win_rmw(&self, win: u32, locked: &Mutex<bool>, op: u32, v: i64) -> Result<i64> {
        use crate::mpi::rma::{ops, sync};
        {
            let mut l = locked.lock().unwrap_or_else(|p| p.into_inner());
            if !*l {
                sync::lock_all(win, 0)?;
                *l = true;
            }
        }
        let dt = int64();
        let origin = v;
        let mut old = 0i64;
        // SAFETY: both buffers are locals that outlive the operation, completed by the flush
        // below.
        let r = unsafe {
            ops::op(
                win,
                What::GetAcc(op),
                Buf {
                    ptr: &origin as *const i64 as *mut u8,
                    count: 1,
                    dt,
                },
                Buf {
                    ptr: &mut old as *mut i64 as *mut u8,
                    count: 1,
                    dt,
                },
                std::ptr::null(),
                Target {
                    rank: 0,
                    disp: 0,
                    count: 1,
                    dt,
                },
                false,
            )
        };
        r?;
        sync::flush(win, Some(0))?;
        Ok(old)
    }
}

static FILES: Mutex<Vec<Option<Arc<File>>>> = Mutex::new(Vec::new());

/// The error handler of MPI_FILE_NULL: what files opened from now on start with, and what
/// handles errors of MPI_File_open and MPI_File_delete (MPI_ERRORS_RETURN at first).
static NULL_ERRHANDLER: AtomicU32 = AtomicU32::new(ERRH_RETURN);

fn files() -> MutexGuard<'static, Vec<Option<Arc<File>>>> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The open file with id `id`.
pub fn get(id: u32) -> Result<Arc<File>> {
    files()
        .get(id as usize)
        .and_then(|f| f.clone())
        .ok_or_else(|| mpi_error!(File, "invalid file handle (MPI_FILE_NULL or closed)"))
}

/// The error handler of file `id`, or of MPI_FILE_NULL (`None`).
pub fn errhandler(id: Option<u32>) -> u32 {
    match id.and_then(|i| get(i).ok()) {
        Some(f) => f.state().errhandler,
        None => NULL_ERRHANDLER.load(Ordering::Acquire),
    }
}

/// Set the error handler of file `id`, or of MPI_FILE_NULL.
pub fn set_errhandler(id: Option<u32>, h: u32) -> Result<()> {
    match id {
        Some(i) => get(i)?.state().errhandler = h,
        None => NULL_ERRHANDLER.store(h, Ordering::Release),
    }
    Ok(())
}

pub(crate) fn byte_id() -> DtypeId {
    DtypeId::new(predefined_index("MPI_BYTE").expect("MPI_BYTE") as u32)
}

pub(crate) fn int64() -> DtypeId {
    DtypeId::new(predefined_index("MPI_INT64_T").expect("MPI_INT64_T") as u32)
}

fn byte_view() -> View {
    let id = byte_id();
    let t = Arc::new(predefined()[id.idx()].clone());
    View {
        disp: 0,
        map: Map::new(0, &t, false).expect("MPI_BYTE maps"),
        etype: (id, t.clone()),
        ftype: (id, t),
        rep: Rep::Native,
        all_contig: true,
    }
}

// ---------------------------------------------------------------------------------------------
// Small collectives over the file's communicator

/// Every process's `v`, in rank order.
pub(crate) fn allgather_i64(comm: CommId, v: i64) -> Result<Vec<i64>> {
    allgather_words(comm, &[v])
}

/// Every process's `v` (the same number of words everywhere), in rank order.
pub(crate) fn allgather_words(comm: CommId, v: &[i64]) -> Result<Vec<i64>> {
    let n = with(|e| e.live_comm(comm).map(|c| c.size()))??;
    let mut out = vec![0i64; n * v.len()];
    let dt = int64();
    // SAFETY: `v.len()` elements in, that many per process out, alive across the call.
    unsafe {
        coll::blocking(
            comm,
            &Args::Allgather {
                sbuf: v.as_ptr() as *const u8,
                scount: v.len() as i64,
                sdt: dt,
                rbuf: out.as_mut_ptr() as *mut u8,
                rcounts: Counts::Uniform(v.len() as i64),
                rdt: dt,
            },
        )?;
    }
    Ok(out)
}

/// Rank 0's `v`, everywhere.
pub(crate) fn bcast_i64(comm: CommId, v: [i64; 2]) -> Result<[i64; 2]> {
    let mut b = v;
    // SAFETY: two elements, alive across the blocking call.
    unsafe { coll::bcast(b.as_mut_ptr() as *mut u8, 2, int64(), 0, comm)? };
    Ok(b)
}

/// The MPI error class of a failed system call on a file.
pub fn io_error(e: &std::io::Error, what: &str) -> MpiError {
    let class = match e.raw_os_error() {
        Some(libc::ENOENT) => ErrorClass::NoSuchFile,
        Some(libc::EEXIST) => ErrorClass::FileExists,
        Some(libc::EACCES) | Some(libc::EPERM) => ErrorClass::Access,
        Some(libc::EROFS) => ErrorClass::ReadOnly,
        Some(libc::ENOSPC) | Some(libc::EFBIG) => ErrorClass::NoSpace,
        Some(libc::EDQUOT) => ErrorClass::Quota,
        Some(libc::EISDIR) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG) | Some(libc::ELOOP) => {
            ErrorClass::BadFile
        }
        Some(libc::ETXTBSY) | Some(libc::EBUSY) => ErrorClass::FileInUse,
        _ => ErrorClass::Io,
    };
    MpiError::new(class, format!("{what}: {e}"))
}

fn errno_error(errno: i64, what: &str) -> MpiError {
    io_error(&std::io::Error::from_raw_os_error(errno as i32), what)
}

/// The path a file name names: ROMIO's file-system prefixes ("ufs:", "nfs:", ...) are
/// accepted and dropped, as MPICH and Open MPI accept them.
fn path_of(name: &str) -> PathBuf {
    const PREFIXES: [&str; 8] = [
        "ufs:", "nfs:", "lustre:", "gpfs:", "pvfs2:", "xfs:", "testfs:", "daos:",
    ];
    for p in PREFIXES {
        if let Some(rest) = name.strip_prefix(p) {
            return PathBuf::from(rest);
        }
    }
    PathBuf::from(name)
}

/// The checks of MPI_File_open's access mode that need no other process.
pub fn check_amode(amode: i32) -> Result<()> {
    use mode::*;
    if amode & !ALL != 0 {
        return err!(
            Amode,
            "access mode {amode:#x} has bits that are not MPI_MODE_* flags"
        );
    }
    let rw = [RDONLY, WRONLY, RDWR]
        .iter()
        .filter(|m| amode & **m != 0)
        .count();
    if rw != 1 {
        return err!(
            Amode,
            "the access mode must have exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR"
        );
    }
    if amode & RDONLY != 0 && amode & (CREATE | EXCL) != 0 {
        return err!(
            Amode,
            "MPI_MODE_CREATE and MPI_MODE_EXCL cannot go with MPI_MODE_RDONLY"
        );
    }
    if amode & RDWR != 0 && amode & SEQUENTIAL != 0 {
        return err!(Amode, "MPI_MODE_SEQUENTIAL cannot go with MPI_MODE_RDWR");
    }
    Ok(())
}

fn open_fd(path: &PathBuf, amode: i32, create: bool) -> std::io::Result<std::fs::File> {
    use mode::*;
    let mut o = OpenOptions::new();
    o.read(amode & (RDONLY | RDWR) != 0)
        .write(amode & (WRONLY | RDWR) != 0)
        .custom_flags(libc::O_CLOEXEC);
    if create && amode & CREATE != 0 {
        if amode & EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    o.open(path)
}

/// MPI_File_open: collective over `comm`. Returns the file's id.
pub fn open(comm: CommId, name: &str, amode: i32, hints: Vec<(String, String)>) -> Result<u32> {
    check_amode(amode)?;
    if name.is_empty() {
        return err!(BadFile, "empty file name");
    }
    let inter = with(|e| e.live_comm(comm).map(|c| c.is_inter()))??;
    if inter {
        return err!(Comm, "files are opened over intracommunicators");
    }
    let fcomm = crate::mpi::cm::run(with(|e| e.op_dup(comm, None))??)?
        .ok_or_else(|| mpi_error!(Intern, "MPI_File_open: no communicator"))?;
    let made = open_on(fcomm, name, amode, hints);
    if made.is_err() {
        let _ = with(|e| e.free_comm(fcomm));
    }
    made
}

fn open_on(fcomm: CommId, name: &str, amode: i32, hints: Vec<(String, String)>) -> Result<u32> {
    let (rank, size) = with(|e| e.live_comm(fcomm).map(|c| (c.rank as usize, c.size())))??;
    let path = path_of(name);
    // Rank 0 first, creating the file if asked (MPI_MODE_EXCL is decided there alone), then
    // the others; everyone learns everyone's outcome and fails alike.
    let mut fd = None;
    let mut errno = 0i64;
    if rank == 0 {
        match open_fd(&path, amode, true) {
            Ok(f) => fd = Some(f),
            Err(e) => errno = e.raw_os_error().unwrap_or(libc::EIO) as i64,
        }
    }
    let [root_errno, root_amode] = bcast_i64(fcomm, [errno, amode as i64])?;
    if root_errno != 0 {
        return Err(errno_error(
            root_errno,
            &format!("cannot open {}", path.display()),
        ));
    }
    let mut mine: Option<MpiError> = None;
    if root_amode != amode as i64 {
        mine = Some(mpi_error!(
            NotSame,
            "access mode {amode:#x} here, {root_amode:#x} at rank 0: every process must open with the same mode"
        ));
    } else if rank != 0 {
        match open_fd(&path, amode, false) {
            Ok(f) => fd = Some(f),
            Err(e) => mine = Some(io_error(&e, &format!("cannot open {}", path.display()))),
        }
    }
    let all = allgather_i64(fcomm, mine.is_some() as i64)?;
    if let Some(e) = mine {
        return Err(e);
    }
    if let Some(r) = all.iter().position(|&x| x != 0) {
        return err!(
            Io,
            "{} could not be opened at rank {r} of the communicator",
            path.display()
        );
    }
    let fd = fd.expect("opened");
    let shared = if size == 1 {
        Shared::Local(Mutex::new(0))
    } else {
        // SAFETY: MPI_Win_allocate-style: the window's memory is its own.
        let (w, _) = unsafe {
            crate::mpi::rma::create(
                crate::mpi::rma::Flavor::Allocate,
                std::ptr::null_mut(),
                if rank == 0 { 8 } else { 0 },
                8,
                Vec::new(),
                fcomm,
            )?
        };
        Shared::Win(w, Mutex::new(false))
    };
    let view = byte_view();
    let mut pos = 0;
    if amode & mode::APPEND != 0 {
        // Both pointers start at the end of the file (the default view counts bytes).
        pos = fd
            .metadata()
            .map_err(|e| io_error(&e, "MPI_MODE_APPEND: the file's size"))?
            .len();
    }
    let f = File {
        fd,
        comm: fcomm,
        rank,
        size,
        amode,
        path,
        shared,
        st: Mutex::new(State {
            view: Arc::new(view),
            pos,
            atomic: false,
            errhandler: NULL_ERRHANDLER.load(Ordering::Acquire),
            hints,
            split: None,
        }),
    };
    if amode & mode::APPEND != 0 {
        // The shared pointer starts at the end too: set before anyone can move it.
        if rank == 0 {
            f.shared_set(pos)?;
        }
        if size > 1 {
            coll::barrier(fcomm)?;
        }
    }
    let mut t = files();
    let f = Some(Arc::new(f));
    let id = match t.iter().position(|x| x.is_none()) {
        Some(i) => {
            t[i] = f;
            i
        }
        None => {
            t.push(f);
            t.len() - 1
        }
    };
    Ok(id as u32)
}

/// MPI_File_close: collective. The file leaves the table first, so that no other thread
/// reaches it while it closes.
pub fn close(id: u32) -> Result<()> {
    let f = {
        let mut t = files();
        t.get_mut(id as usize)
            .and_then(|x| x.take())
            .ok_or_else(|| mpi_error!(File, "invalid file handle (MPI_FILE_NULL or closed)"))?
    };
    let f = match Arc::try_unwrap(f) {
        Ok(f) => f,
        Err(f) => {
            // Put back: the other thread's access goes on, and the file stays open.
            files()[id as usize] = Some(f);
            return err!(
                FileInUse,
                "the file is in use by another thread of this process while it is closed"
            );
        }
    };
    let File {
        fd,
        comm,
        rank,
        amode,
        path,
        shared,
        ..
    } = f;
    if let Shared::Win(w, locked) = shared {
        if locked.into_inner().unwrap_or_else(|p| p.into_inner()) {
            crate::mpi::rma::sync::unlock_all(w)?;
        }
        crate::mpi::rma::free(w)?;
    }
    drop(fd);
    let mut r = Ok(());
    if amode & mode::DELETE_ON_CLOSE != 0 {
        // Everyone has closed it before it goes, and it is gone when anyone returns.
        coll::barrier(comm)?;
        let mut errno = 0;
        if rank == 0 {
            if let Err(e) = std::fs::remove_file(&path) {
                errno = e.raw_os_error().unwrap_or(libc::EIO) as i64;
            }
        }
        let [errno, _] = bcast_i64(comm, [errno, 0])?;
        if errno != 0 {
            r = Err(errno_error(
                errno,
                &format!("MPI_MODE_DELETE_ON_CLOSE: cannot delete {}", path.display()),
            ));
        }
    }
    with(|e| e.free_comm(comm))??;
    r
}

/// MPI_File_delete.
pub fn delete(name: &str) -> Result<()> {
    let path = path_of(name);
    std::fs::remove_file(&path)
        .map_err(|e| io_error(&e, &format!("cannot delete {}", path.display())))
}

/// MPI_File_set_size (`grow`: MPI_File_preallocate, which never shrinks the file):
/// collective; rank 0 changes the file, everyone learns how it went.
pub fn resize(id: u32, size: i64, grow: bool) -> Result<()> {
    let f = get(id)?;
    let func = if grow { "preallocate" } else { "set the size" };
    if size < 0 {
        return err!(Arg, "cannot {func} to a negative size ({size})");
    }
    if f.amode & mode::RDONLY != 0 {
        return err!(ReadOnly, "cannot {func} of a file opened MPI_MODE_RDONLY");
    }
    if f.amode & mode::SEQUENTIAL != 0 && !grow {
        return err!(
            UnsupportedOperation,
            "MPI_File_set_size on a file opened MPI_MODE_SEQUENTIAL"
        );
    }
    // Every process's accesses before the call are done before the size changes (ROMIO does
    // not wait: a read still running elsewhere could see the file cut short).
    if f.size > 1 {
        coll::barrier(f.comm)?;
    }
    let mut errno = 0i64;
    if f.rank == 0 {
        let fd = f.fd.as_raw_fd();
        let r = if grow {
            let now = f.fd.metadata().map(|m| m.len() as i64).unwrap_or(0);
            if size > now {
                // SAFETY: a valid descriptor; posix_fallocate returns the error number.
                let rc = unsafe { libc::posix_fallocate(fd, 0, size) };
                if rc == libc::EOPNOTSUPP || rc == libc::EINVAL {
                    f.fd.set_len(size as u64).err()
                } else if rc != 0 {
                    Some(std::io::Error::from_raw_os_error(rc))
                } else {
                    None
                }
            } else {
                None
            }
        } else {
            f.fd.set_len(size as u64).err()
        };
        if let Some(e) = r {
            errno = e.raw_os_error().unwrap_or(libc::EIO) as i64;
        }
    }
    let [root_errno, root_size] = if f.size > 1 {
        bcast_i64(f.comm, [errno, size])?
    } else {
        [errno, size]
    };
    if root_errno != 0 {
        return Err(errno_error(
            root_errno,
            &format!("cannot {func} of {}", f.path.display()),
        ));
    }
    if root_size != size {
        return err!(
            NotSame,
            "size {size} here, {root_size} at rank 0: every process must pass the same size"
        );
    }
    Ok(())
}

/// MPI_File_get_size.
pub fn size(id: u32) -> Result<u64> {
    let f = get(id)?;
    let m =
        f.fd.metadata()
            .map_err(|e| io_error(&e, "the file's size"))?;
    Ok(m.len())
}

/// MPI_File_sync: the process's writes reach the storage device.
pub fn sync(id: u32) -> Result<()> {
    let f = get(id)?;
    if f.amode & mode::RDONLY != 0 {
        return Ok(());
    }
    f.fd.sync_data()
        .map_err(|e| io_error(&e, &format!("cannot sync {}", f.path.display())))
}

/// Data representations registered by MPI_Register_datarep.
static REPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// MPI_Register_datarep. `converts`: conversion functions were given (not supported yet:
/// such a representation is refused where a view names it).
pub fn register_rep(name: &str, converts: bool) -> Result<()> {
    if name.is_empty() {
        return err!(Arg, "empty data representation name");
    }
    if ["native", "internal", "external32"].contains(&name) {
        return err!(DupDatarep, "\"{name}\" is a predefined data representation");
    }
    let mut r = REPS.lock().unwrap_or_else(|p| p.into_inner());
    let key = format!("{}{name}", if converts { "+" } else { "-" });
    if r.iter().any(|x| x[1..] == *name) {
        return err!(
            DupDatarep,
            "data representation \"{name}\" is already registered"
        );
    }
    r.push(key);
    Ok(())
}

fn rep_of(name: &str) -> Result<Rep> {
    match name {
        "native" => Ok(Rep::Native),
        "internal" => Ok(Rep::Internal),
        "external32" => Ok(Rep::External32),
        _ => {
            let r = REPS.lock().unwrap_or_else(|p| p.into_inner());
            match r.iter().find(|x| x[1..] == *name) {
                Some(x) if x.starts_with('-') => Ok(Rep::User(name.to_string())),
                Some(_) => err!(
                    UnsupportedDatarep,
                    "data representation \"{name}\" has conversion functions, which Protean does not call yet"
                ),
                None => err!(
                    UnsupportedDatarep,
                    "unknown data representation \"{name}\" (native, internal, external32 or one registered with MPI_Register_datarep)"
                ),
            }
        }
    }
}

/// external32 keeps the native layout only where every basic value has the same size in
/// both forms.
pub fn ext32_same_layout(t: &Datatype) -> bool {
    t.ext32_size(1) == Some(t.size)
}

/// MPI_File_set_view: collective. Both file pointers go back to 0.
pub fn set_view(
    id: u32,
    disp: i64,
    etype: (DtypeId, Arc<Datatype>),
    ftype: (DtypeId, Arc<Datatype>),
    rep: &str,
    hints: Vec<(String, String)>,
) -> Result<()> {
    let f = get(id)?;
    let rep = rep_of(rep)?;
    if !ftype.1.committed {
        return err!(
            Type,
            "the filetype has not been committed (call MPI_Type_commit)"
        );
    }
    if etype.1.size == 0 {
        return err!(Type, "the etype holds no data ({})", etype.1.describe());
    }
    let read_only = f.amode & mode::RDONLY != 0;
    view::check_layout(&etype.1, "etype", read_only)?;
    if !ftype.1.size.is_multiple_of(etype.1.size) {
        return err!(
            Type,
            "the filetype ({}) is not made of whole etypes ({})",
            ftype.1.describe(),
            etype.1.describe()
        );
    }
    if rep == Rep::External32 {
        for t in [&etype.1, &ftype.1] {
            if !ext32_same_layout(t) {
                return err!(
                    UnsupportedDatarep,
                    "external32 views of {} (whose values change size in external32) are not supported yet",
                    t.describe()
                );
            }
        }
    }
    let disp = if disp == DISPLACEMENT_CURRENT {
        if f.amode & mode::SEQUENTIAL == 0 {
            return err!(
                Arg,
                "MPI_DISPLACEMENT_CURRENT is for files opened MPI_MODE_SEQUENTIAL"
            );
        }
        // Rank 0 reads the shared pointer before anyone resets it.
        let mut at = 0;
        if f.rank == 0 {
            let st = f.state();
            at = st.view.map.byte_offset(f.shared_get()? * st.view.esize()) as i64;
        }
        if f.size > 1 {
            at = bcast_i64(f.comm, [at, 0])?[0];
        }
        at
    } else {
        disp
    };
    if disp < 0 {
        return err!(Arg, "negative displacement {disp}");
    }
    let map = Map::new(disp as u64, &ftype.1, read_only)?;
    // Every process is done with the old pointer before rank 0 resets it, and nobody uses
    // the new one before (the allgather waits for everyone too).
    if f.size > 1 {
        coll::barrier(f.comm)?;
    }
    if f.rank == 0 {
        f.shared_set(0)?;
    }
    let all_contig = if f.size > 1 {
        allgather_i64(f.comm, map.contiguous() as i64)?
            .iter()
            .all(|&c| c != 0)
    } else {
        map.contiguous()
    };
    let mut st = f.state();
    st.view = Arc::new(View {
        disp: disp as u64,
        etype,
        ftype,
        rep,
        map,
        all_contig,
    });
    st.pos = 0;
    crate::mpi::rma::set_hints(&mut st.hints, &hints);
    Ok(())
}

/// MPI_File_set_info: the hints are kept (none changes what Protean does yet) and reported
/// by MPI_File_get_info.
pub fn set_info(id: u32, hints: &[(String, String)]) -> Result<()> {
    let f = get(id)?;
    crate::mpi::rma::set_hints(&mut f.state().hints, hints);
    Ok(())
}

/// MPI_File_set_atomicity: collective.
pub fn set_atomicity(id: u32, on: bool) -> Result<()> {
    let f = get(id)?;
    f.state().atomic = on;
    if f.size > 1 {
        let all = allgather_i64(f.comm, on as i64)?;
        if all.iter().any(|&x| x != on as i64) {
            return err!(
                NotSame,
                "MPI_File_set_atomicity: the processes asked for different modes"
            );
        }
    }
    Ok(())
}

/// The group of the file's processes.
pub fn group(id: u32) -> Result<Vec<crate::ids::Gpid>> {
    let f = get(id)?;
    with(|e| e.live_comm(f.comm).map(|c| c.group.clone()))?
}
