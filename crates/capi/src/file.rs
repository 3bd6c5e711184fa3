//! MPI-IO (MPI-4.0 chapter 14): file handles, their error handlers, and the C entry points of
//! `protean_core::mpi::io`.
//!
//! MPI_File is a pointer type in the MPICH ABI; a handle here is the file's Fortran integer
//! (its id + 1) shifted left by 4, never dereferenced, and MPI_FILE_NULL is 0 in both forms.
//! Errors of file calls go to the file's error handler, and those of MPI_File_open,
//! MPI_File_delete and calls on MPI_FILE_NULL to MPI_FILE_NULL's (MPI_ERRORS_RETURN unless
//! set: MPI-4.0 section 9.3).

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::*;
use crate::errors::{bad, code_of, raise_code, run_handler};
use crate::handles::{comm_id, dtype_handle, dtype_id, errh_handle, errh_id};
use crate::util::{copy_cstr, nonnull, write_status};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::ids::DtypeId;
use protean_core::mpi::comm::Errhandler;
use protean_core::mpi::datatype::Datatype;
use protean_core::mpi::global::with;
use protean_core::mpi::io::{self, access, access::Pos, mode, Split};
use protean_core::mpi::request::Status;

type R<T> = Result<T, MpiError>;

// The core takes the ABI's values as they are.
const _: () = assert!(
    MPI_MODE_CREATE == mode::CREATE
        && MPI_MODE_RDONLY == mode::RDONLY
        && MPI_MODE_WRONLY == mode::WRONLY
        && MPI_MODE_RDWR == mode::RDWR
        && MPI_MODE_DELETE_ON_CLOSE == mode::DELETE_ON_CLOSE
        && MPI_MODE_UNIQUE_OPEN == mode::UNIQUE_OPEN
        && MPI_MODE_EXCL == mode::EXCL
        && MPI_MODE_APPEND == mode::APPEND
        && MPI_MODE_SEQUENTIAL == mode::SEQUENTIAL
        && MPI_SEEK_SET == io::SEEK_SET
        && MPI_SEEK_CUR == io::SEEK_CUR
        && MPI_SEEK_END == io::SEEK_END
        && MPI_DISPLACEMENT_CURRENT as i64 == io::DISPLACEMENT_CURRENT
);

/// File handle -> file id (None for MPI_FILE_NULL and values no file handle has).
pub fn file_id(h: MPI_File) -> Option<u32> {
    let v = h as usize;
    (v != 0 && v & 0xf == 0 && v >> 4 <= u32::MAX as usize).then(|| (v >> 4) as u32 - 1)
}

pub fn file_handle(id: u32) -> MPI_File {
    ((id as usize + 1) << 4) as MPI_File
}

fn fid(fh: MPI_File) -> R<u32> {
    file_id(fh).ok_or_else(|| {
        bad(
            ErrorClass::File,
            "invalid file handle (MPI_FILE_NULL or not a file)",
        )
    })
}

/// Report `e`, raised by `func`, on file `fh`'s error handler (MPI_FILE_NULL's when `fh` is
/// not an open file).
#[cold]
pub fn raise_file(fh: MPI_File, e: MpiError, func: &str) -> c_int {
    let (code, text) = code_of(&e, func);
    raise_file_code(fh, code, func, &text)
}

fn raise_file_code(fh: MPI_File, code: c_int, func: &str, text: &str) -> c_int {
    let h = io::errhandler(file_id(fh));
    let Ok(handler) = with(|e| e.errhandlers.get(h as usize).copied().flatten()) else {
        // No engine (before MPI_Init, after MPI_Finalize): the usual report.
        return raise_code(MPI_COMM_WORLD, code, func, text);
    };
    run_handler(
        handler.unwrap_or(Errhandler::Return),
        code,
        func,
        text,
        |f, mut k| {
            // SAFETY: stored by MPI_File_create_errhandler (or another kind's, of the same
            // shape) from a function of this type.
            let f: MPI_File_errhandler_function = unsafe { std::mem::transmute(f) };
            let mut h = fh;
            unsafe { f(&mut h, &mut k) };
        },
    )
}

fn done(r: R<()>, fh: MPI_File, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_file(fh, e, func),
    }
}

/// A query of an open file: `value` of its id, written through `p` (named `what`; checked
/// non-null), or the error raised on the file.
unsafe fn query<T>(
    fh: MPI_File,
    p: *mut T,
    what: &str,
    func: &str,
    value: impl FnOnce(u32) -> R<T>,
) -> c_int {
    let r = (|| -> R<()> {
        nonnull(p, what)?;
        *p = value(fid(fh)?)?;
        Ok(())
    })();
    done(r, fh, func)
}

fn hints(info: MPI_Info) -> R<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    crate::info::with_info(info, |i| i.clone())
}

unsafe fn name_of(p: *const c_char) -> R<String> {
    if p.is_null() {
        return Err(bad(ErrorClass::BadFile, "null file name"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

fn dtype_of(h: MPI_Datatype) -> R<DtypeId> {
    dtype_id(h).ok_or_else(|| bad(ErrorClass::Type, "invalid datatype"))
}

fn type_of(h: MPI_Datatype) -> R<(DtypeId, std::sync::Arc<Datatype>)> {
    let id = dtype_of(h)?;
    let t = with(|e| e.dtype(id).cloned())??;
    Ok((id, t))
}

// ---------------------------------------------------------------------------------------------
// Opening, closing, deleting

/// # Safety
/// `filename` is a C string; `fh` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    let r = (|| -> R<MPI_File> {
        nonnull(fh, "fh")?;
        let c = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
        let name = name_of(filename)?;
        let h = hints(info)?;
        Ok(file_handle(io::open(c, &name, amode, h)?))
    })();
    match r {
        Ok(h) => {
            *fh = h;
            MPI_SUCCESS
        }
        Err(e) => {
            if !fh.is_null() {
                *fh = std::ptr::null_mut();
            }
            raise_file(std::ptr::null_mut(), e, "MPI_File_open")
        }
    }
}

/// # Safety
/// `fh` is readable and writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_close(fh: *mut MPI_File) -> c_int {
    if fh.is_null() {
        return raise_file(
            std::ptr::null_mut(),
            bad(ErrorClass::Arg, "null file handle pointer"),
            "MPI_File_close",
        );
    }
    let h = *fh;
    let r = fid(h).and_then(io::close);
    match r {
        Ok(()) => {
            *fh = std::ptr::null_mut();
            MPI_SUCCESS
        }
        Err(e) => raise_file(h, e, "MPI_File_close"),
    }
}

/// # Safety
/// `filename` is a C string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_delete(filename: *const c_char, info: MPI_Info) -> c_int {
    let r = (|| -> R<()> {
        let name = name_of(filename)?;
        hints(info)?;
        io::delete(&name)
    })();
    done(r, std::ptr::null_mut(), "MPI_File_delete")
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
    done(
        fid(fh).and_then(|id| io::resize(id, size, false)),
        fh,
        "MPI_File_set_size",
    )
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
    done(
        fid(fh).and_then(|id| io::resize(id, size, true)),
        fh,
        "MPI_File_preallocate",
    )
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
    query(fh, size, "size", "MPI_File_get_size", |id| {
        Ok(io::size(id)? as MPI_Offset)
    })
}

/// # Safety
/// `group` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_group(fh: MPI_File, group: *mut MPI_Group) -> c_int {
    query(fh, group, "group", "MPI_File_get_group", |id| {
        crate::group::new_group(io::group(id)?)
    })
}

/// # Safety
/// `amode` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
    query(fh, amode, "amode", "MPI_File_get_amode", |id| {
        Ok(io::get(id)?.amode)
    })
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_set_info(fh: MPI_File, info: MPI_Info) -> c_int {
    let r = (|| -> R<()> {
        let id = fid(fh)?;
        io::set_info(id, &hints(info)?)
    })();
    done(r, fh, "MPI_File_set_info")
}

/// # Safety
/// `info_used` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_info(
    fh: MPI_File,
    info_used: *mut MPI_Info,
) -> c_int {
    query(fh, info_used, "info_used", "MPI_File_get_info", |id| {
        let h = io::get(id)?.state().hints.clone();
        Ok(crate::info::new_info(h))
    })
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
    done(
        fid(fh).and_then(|id| io::set_atomicity(id, flag != 0)),
        fh,
        "MPI_File_set_atomicity",
    )
}

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
    query(fh, flag, "flag", "MPI_File_get_atomicity", |id| {
        Ok(io::get(id)?.state().atomic as c_int)
    })
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_sync(fh: MPI_File) -> c_int {
    done(fid(fh).and_then(io::sync), fh, "MPI_File_sync")
}

// ---------------------------------------------------------------------------------------------
// Views

/// # Safety
/// `datarep` is a C string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_set_view(
    fh: MPI_File,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info: MPI_Info,
) -> c_int {
    let r = (|| -> R<()> {
        let id = fid(fh)?;
        let e = type_of(etype)?;
        let f = type_of(filetype)?;
        let rep = if datarep.is_null() {
            return Err(bad(ErrorClass::Arg, "null data representation"));
        } else {
            CStr::from_ptr(datarep).to_string_lossy().into_owned()
        };
        io::set_view(id, disp, e, f, &rep, hints(info)?)
    })();
    done(r, fh, "MPI_File_set_view")
}

/// The handle MPI_File_get_view returns for a view's type: a predefined type's own, or a
/// new duplicate the caller frees (MPI-4.0 section 14.3).
fn view_type(t: &(DtypeId, std::sync::Arc<Datatype>)) -> R<MPI_Datatype> {
    if t.1.predefined {
        return Ok(dtype_handle(t.0));
    }
    let id = with(|e| e.add_dtype(Datatype::dup(&t.1, t.0)))?;
    Ok(dtype_handle(id))
}

/// # Safety
/// The output arguments are writable; `datarep` has room for MPI_MAX_DATAREP_STRING chars.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_view(
    fh: MPI_File,
    disp: *mut MPI_Offset,
    etype: *mut MPI_Datatype,
    filetype: *mut MPI_Datatype,
    datarep: *mut c_char,
) -> c_int {
    let r = (|| -> R<()> {
        nonnull(disp, "disp")?;
        nonnull(etype, "etype")?;
        nonnull(filetype, "filetype")?;
        nonnull(datarep, "datarep")?;
        let v = access::view(fid(fh)?)?;
        *disp = v.disp as MPI_Offset;
        *etype = view_type(&v.etype)?;
        *filetype = view_type(&v.ftype)?;
        copy_cstr(v.rep.name(), datarep, MPI_MAX_DATAREP_STRING as usize);
        Ok(())
    })();
    done(r, fh, "MPI_File_get_view")
}

/// # Safety
/// `disp` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_byte_offset(
    fh: MPI_File,
    offset: MPI_Offset,
    disp: *mut MPI_Offset,
) -> c_int {
    query(fh, disp, "disp", "MPI_File_get_byte_offset", |id| {
        Ok(access::byte_offset(id, offset)? as MPI_Offset)
    })
}

/// # Safety
/// `extent` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_type_extent(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    query(fh, extent, "extent", "MPI_File_get_type_extent", |id| {
        Ok(access::type_extent(id, dtype_of(datatype)?)? as MPI_Aint)
    })
}

/// # Safety
/// `extent` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_type_extent_c(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Count,
) -> c_int {
    query(fh, extent, "extent", "MPI_File_get_type_extent_c", |id| {
        Ok(access::type_extent(id, dtype_of(datatype)?)? as MPI_Count)
    })
}

// ---------------------------------------------------------------------------------------------
// Positioning

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_seek(
    fh: MPI_File,
    offset: MPI_Offset,
    whence: c_int,
) -> c_int {
    done(
        fid(fh).and_then(|id| access::seek(id, offset, whence)),
        fh,
        "MPI_File_seek",
    )
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_seek_shared(
    fh: MPI_File,
    offset: MPI_Offset,
    whence: c_int,
) -> c_int {
    done(
        fid(fh).and_then(|id| access::seek_shared(id, offset, whence)),
        fh,
        "MPI_File_seek_shared",
    )
}

/// # Safety
/// `offset` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_position(
    fh: MPI_File,
    offset: *mut MPI_Offset,
) -> c_int {
    query(fh, offset, "offset", "MPI_File_get_position", |id| {
        Ok(access::position(id)? as MPI_Offset)
    })
}

/// # Safety
/// `offset` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_position_shared(
    fh: MPI_File,
    offset: *mut MPI_Offset,
) -> c_int {
    query(fh, offset, "offset", "MPI_File_get_position_shared", |id| {
        Ok(access::position_shared(id)? as MPI_Offset)
    })
}

// ---------------------------------------------------------------------------------------------
// Data access

/// Where an access starts and what it returns.
#[derive(Clone, Copy)]
enum How {
    At(MPI_Offset),
    Individual,
    /// The blocking collective forms (`_all`): writes may go by collective buffering.
    AllAt(MPI_Offset),
    All,
    Shared,
    Ordered,
}

/// Where the result goes.
enum Out {
    Status(*mut MPI_Status),
    Request(*mut MPI_Request),
    Begin(Split),
}

/// Every data access call: check, access, and hand back the status, a completed request,
/// or nothing (a split collective's begin call).
#[allow(clippy::too_many_arguments)]
unsafe fn access(
    fh: MPI_File,
    func: &str,
    write: bool,
    how: How,
    buf: *mut u8,
    count: i64,
    datatype: MPI_Datatype,
    to: Out,
) -> c_int {
    let r = (|| -> R<()> {
        if let Out::Request(r) = to {
            nonnull(r, "request")?;
        }
        let id = fid(fh)?;
        let dt = dtype_of(datatype)?;
        let pos = match how {
            How::At(o) | How::AllAt(o) => Pos::At(o),
            How::Individual | How::All => Pos::Individual,
            How::Shared | How::Ordered => Pos::Shared,
        };
        if let Out::Begin(s) = to {
            return access::begin(id, s, pos, buf, count, dt);
        }
        let st = match how {
            How::Ordered => access::ordered(id, write, buf, count, dt)?,
            How::All | How::AllAt(_) if write => access::write_all(id, pos, buf, count, dt)?,
            _ => access::rw(id, pos, write, buf, count, dt)?,
        };
        match to {
            Out::Status(p) => {
                if !crate::util::ignored(p) {
                    write_status(p, &st);
                }
            }
            Out::Request(r) => *r = crate::handles::request_handle(access::done_request(id, st)?),
            Out::Begin(_) => unreachable!(),
        }
        Ok(())
    })();
    done(r, fh, func)
}

/// The end call of a split collective.
unsafe fn end(fh: MPI_File, func: &str, s: Split, status: *mut MPI_Status) -> c_int {
    let r = (|| -> R<()> {
        let st: Status = access::end(fid(fh)?, s)?;
        if !crate::util::ignored(status) {
            write_status(status, &st);
        }
        Ok(())
    })();
    done(r, fh, func)
}

/// Blocking accesses without an explicit offset (int and `_c` counts).
macro_rules! blocking {
    ($f:ident, $fc:ident, $name:literal, $bt:ty, $write:expr, $how:ident) => {
        /// # Safety
        /// MPI's rules for I/O buffers; `status` is writable or MPI_STATUS_IGNORE.
        #[no_mangle]
        pub unsafe extern "C" fn $f(
            fh: MPI_File,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            access(
                fh,
                $name,
                $write,
                How::$how,
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Status(status),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $fc(
            fh: MPI_File,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_c"),
                $write,
                How::$how,
                buf as *mut u8,
                count,
                datatype,
                Out::Status(status),
            )
        }
    };
}

/// Blocking accesses at an explicit offset.
macro_rules! blocking_at {
    ($f:ident, $fc:ident, $name:literal, $bt:ty, $write:expr, $at:ident) => {
        /// # Safety
        /// MPI's rules for I/O buffers; `status` is writable or MPI_STATUS_IGNORE.
        #[no_mangle]
        pub unsafe extern "C" fn $f(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            access(
                fh,
                $name,
                $write,
                How::$at(offset),
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Status(status),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $fc(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_c"),
                $write,
                How::$at(offset),
                buf as *mut u8,
                count,
                datatype,
                Out::Status(status),
            )
        }
    };
}

/// Nonblocking accesses without an explicit offset.
macro_rules! nonblocking {
    ($f:ident, $fc:ident, $name:literal, $bt:ty, $write:expr, $how:ident) => {
        /// # Safety
        /// MPI's rules for I/O buffers; `request` is writable.
        #[no_mangle]
        pub unsafe extern "C" fn $f(
            fh: MPI_File,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            access(
                fh,
                $name,
                $write,
                How::$how,
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Request(request),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $fc(
            fh: MPI_File,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_c"),
                $write,
                How::$how,
                buf as *mut u8,
                count,
                datatype,
                Out::Request(request),
            )
        }
    };
}

/// Nonblocking accesses at an explicit offset.
macro_rules! nonblocking_at {
    ($f:ident, $fc:ident, $name:literal, $bt:ty, $write:expr) => {
        /// # Safety
        /// MPI's rules for I/O buffers; `request` is writable.
        #[no_mangle]
        pub unsafe extern "C" fn $f(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            access(
                fh,
                $name,
                $write,
                How::At(offset),
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Request(request),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $fc(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_c"),
                $write,
                How::At(offset),
                buf as *mut u8,
                count,
                datatype,
                Out::Request(request),
            )
        }
    };
}

/// Split collectives without an explicit offset: begin (int and `_c`) and end.
macro_rules! split {
    ($b:ident, $bc:ident, $e:ident, $name:literal, $bt:ty, $write:expr, $how:ident, $s:ident) => {
        /// # Safety
        /// MPI's rules for I/O buffers (the buffer is in use until the end call).
        #[no_mangle]
        pub unsafe extern "C" fn $b(
            fh: MPI_File,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_begin"),
                $write,
                How::$how,
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Begin(Split::$s),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $bc(
            fh: MPI_File,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_begin_c"),
                $write,
                How::$how,
                buf as *mut u8,
                count,
                datatype,
                Out::Begin(Split::$s),
            )
        }

        /// # Safety
        /// `status` is writable or MPI_STATUS_IGNORE.
        #[no_mangle]
        pub unsafe extern "C" fn $e(fh: MPI_File, buf: $bt, status: *mut MPI_Status) -> c_int {
            let _ = buf;
            end(fh, concat!($name, "_end"), Split::$s, status)
        }
    };
}

/// Split collectives at an explicit offset.
macro_rules! split_at {
    ($b:ident, $bc:ident, $e:ident, $name:literal, $bt:ty, $write:expr, $s:ident) => {
        /// # Safety
        /// MPI's rules for I/O buffers (the buffer is in use until the end call).
        #[no_mangle]
        pub unsafe extern "C" fn $b(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: c_int,
            datatype: MPI_Datatype,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_begin"),
                $write,
                How::At(offset),
                buf as *mut u8,
                count as i64,
                datatype,
                Out::Begin(Split::$s),
            )
        }

        /// # Safety
        /// As the int form.
        #[no_mangle]
        pub unsafe extern "C" fn $bc(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $bt,
            count: MPI_Count,
            datatype: MPI_Datatype,
        ) -> c_int {
            access(
                fh,
                concat!($name, "_begin_c"),
                $write,
                How::At(offset),
                buf as *mut u8,
                count,
                datatype,
                Out::Begin(Split::$s),
            )
        }

        /// # Safety
        /// `status` is writable or MPI_STATUS_IGNORE.
        #[no_mangle]
        pub unsafe extern "C" fn $e(fh: MPI_File, buf: $bt, status: *mut MPI_Status) -> c_int {
            let _ = buf;
            end(fh, concat!($name, "_end"), Split::$s, status)
        }
    };
}

blocking!(
    protean_MPI_File_read,
    protean_MPI_File_read_c,
    "MPI_File_read",
    *mut c_void,
    false,
    Individual
);
blocking!(
    protean_MPI_File_write,
    protean_MPI_File_write_c,
    "MPI_File_write",
    *const c_void,
    true,
    Individual
);
blocking!(
    protean_MPI_File_read_all,
    protean_MPI_File_read_all_c,
    "MPI_File_read_all",
    *mut c_void,
    false,
    All
);
blocking!(
    protean_MPI_File_write_all,
    protean_MPI_File_write_all_c,
    "MPI_File_write_all",
    *const c_void,
    true,
    All
);
blocking!(
    protean_MPI_File_read_shared,
    protean_MPI_File_read_shared_c,
    "MPI_File_read_shared",
    *mut c_void,
    false,
    Shared
);
blocking!(
    protean_MPI_File_write_shared,
    protean_MPI_File_write_shared_c,
    "MPI_File_write_shared",
    *const c_void,
    true,
    Shared
);
blocking!(
    protean_MPI_File_read_ordered,
    protean_MPI_File_read_ordered_c,
    "MPI_File_read_ordered",
    *mut c_void,
    false,
    Ordered
);
blocking!(
    protean_MPI_File_write_ordered,
    protean_MPI_File_write_ordered_c,
    "MPI_File_write_ordered",
    *const c_void,
    true,
    Ordered
);
blocking_at!(
    protean_MPI_File_read_at,
    protean_MPI_File_read_at_c,
    "MPI_File_read_at",
    *mut c_void,
    false,
    At
);
blocking_at!(
    protean_MPI_File_write_at,
    protean_MPI_File_write_at_c,
    "MPI_File_write_at",
    *const c_void,
    true,
    At
);
blocking_at!(
    protean_MPI_File_read_at_all,
    protean_MPI_File_read_at_all_c,
    "MPI_File_read_at_all",
    *mut c_void,
    false,
    AllAt
);
blocking_at!(
    protean_MPI_File_write_at_all,
    protean_MPI_File_write_at_all_c,
    "MPI_File_write_at_all",
    *const c_void,
    true,
    AllAt
);
nonblocking!(
    protean_MPI_File_iread,
    protean_MPI_File_iread_c,
    "MPI_File_iread",
    *mut c_void,
    false,
    Individual
);
nonblocking!(
    protean_MPI_File_iwrite,
    protean_MPI_File_iwrite_c,
    "MPI_File_iwrite",
    *const c_void,
    true,
    Individual
);
nonblocking!(
    protean_MPI_File_iread_all,
    protean_MPI_File_iread_all_c,
    "MPI_File_iread_all",
    *mut c_void,
    false,
    Individual
);
nonblocking!(
    protean_MPI_File_iwrite_all,
    protean_MPI_File_iwrite_all_c,
    "MPI_File_iwrite_all",
    *const c_void,
    true,
    Individual
);
nonblocking!(
    protean_MPI_File_iread_shared,
    protean_MPI_File_iread_shared_c,
    "MPI_File_iread_shared",
    *mut c_void,
    false,
    Shared
);
nonblocking!(
    protean_MPI_File_iwrite_shared,
    protean_MPI_File_iwrite_shared_c,
    "MPI_File_iwrite_shared",
    *const c_void,
    true,
    Shared
);
nonblocking_at!(
    protean_MPI_File_iread_at,
    protean_MPI_File_iread_at_c,
    "MPI_File_iread_at",
    *mut c_void,
    false
);
nonblocking_at!(
    protean_MPI_File_iwrite_at,
    protean_MPI_File_iwrite_at_c,
    "MPI_File_iwrite_at",
    *const c_void,
    true
);
nonblocking_at!(
    protean_MPI_File_iread_at_all,
    protean_MPI_File_iread_at_all_c,
    "MPI_File_iread_at_all",
    *mut c_void,
    false
);
nonblocking_at!(
    protean_MPI_File_iwrite_at_all,
    protean_MPI_File_iwrite_at_all_c,
    "MPI_File_iwrite_at_all",
    *const c_void,
    true
);
split!(
    protean_MPI_File_read_all_begin,
    protean_MPI_File_read_all_begin_c,
    protean_MPI_File_read_all_end,
    "MPI_File_read_all",
    *mut c_void,
    false,
    Individual,
    ReadAll
);
split!(
    protean_MPI_File_write_all_begin,
    protean_MPI_File_write_all_begin_c,
    protean_MPI_File_write_all_end,
    "MPI_File_write_all",
    *const c_void,
    true,
    Individual,
    WriteAll
);
split!(
    protean_MPI_File_read_ordered_begin,
    protean_MPI_File_read_ordered_begin_c,
    protean_MPI_File_read_ordered_end,
    "MPI_File_read_ordered",
    *mut c_void,
    false,
    Ordered,
    ReadOrdered
);
split!(
    protean_MPI_File_write_ordered_begin,
    protean_MPI_File_write_ordered_begin_c,
    protean_MPI_File_write_ordered_end,
    "MPI_File_write_ordered",
    *const c_void,
    true,
    Ordered,
    WriteOrdered
);
split_at!(
    protean_MPI_File_read_at_all_begin,
    protean_MPI_File_read_at_all_begin_c,
    protean_MPI_File_read_at_all_end,
    "MPI_File_read_at_all",
    *mut c_void,
    false,
    ReadAt
);
split_at!(
    protean_MPI_File_write_at_all_begin,
    protean_MPI_File_write_at_all_begin_c,
    protean_MPI_File_write_at_all_end,
    "MPI_File_write_at_all",
    *const c_void,
    true,
    WriteAt
);

// ---------------------------------------------------------------------------------------------
// Error handlers, conversions, data representations

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_create_errhandler(
    file_errhandler_fn: Option<MPI_File_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    crate::errhandler::create_user(
        file_errhandler_fn.map(|f| f as usize),
        errhandler,
        "MPI_File_create_errhandler",
    )
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_set_errhandler(
    fh: MPI_File,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| -> R<()> {
        let id = if fh.is_null() { None } else { Some(fid(fh)?) };
        let h = errh_id(errhandler)
            .filter(|h| crate::errhandler::live_errhandler(*h))
            .ok_or_else(|| bad(ErrorClass::Arg, "invalid error handler"))?;
        io::set_errhandler(id, h)
    })();
    done(r, fh, "MPI_File_set_errhandler")
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_get_errhandler(
    file: MPI_File,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| -> R<()> {
        nonnull(errhandler, "errhandler")?;
        let id = if file.is_null() {
            None
        } else {
            Some(fid(file)?)
        };
        if let Some(i) = id {
            io::get(i)?;
        }
        *errhandler = errh_handle(io::errhandler(id));
        Ok(())
    })();
    done(r, file, "MPI_File_get_errhandler")
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
    if !fh.is_null() {
        if let Err(e) = fid(fh).and_then(io::get) {
            return raise_file(std::ptr::null_mut(), e, "MPI_File_call_errhandler");
        }
    }
    let text =
        crate::errors::text_of_code(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    raise_file_code(fh, errorcode, "MPI_File_call_errhandler", &text);
    MPI_SUCCESS
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_c2f(file: MPI_File) -> MPI_Fint {
    file_id(file).map_or(0, |id| id as MPI_Fint + 1)
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_File_f2c(file: MPI_Fint) -> MPI_File {
    if file <= 0 {
        return std::ptr::null_mut();
    }
    file_handle(file as u32 - 1)
}

unsafe fn register(datarep: *const c_char, converts: bool, func: &str) -> c_int {
    let r = (|| -> R<()> {
        if datarep.is_null() {
            return Err(bad(ErrorClass::Arg, "null data representation name"));
        }
        let name = CStr::from_ptr(datarep).to_string_lossy().into_owned();
        if name.len() >= MPI_MAX_DATAREP_STRING as usize {
            return Err(bad(
                ErrorClass::Arg,
                format!(
                    "data representation name longer than {} characters",
                    MPI_MAX_DATAREP_STRING - 1
                ),
            ));
        }
        io::register_rep(&name, converts)
    })();
    done(r, std::ptr::null_mut(), func)
}

/// # Safety
/// `datarep` is a C string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: Option<MPI_Datarep_conversion_function>,
    write_conversion_fn: Option<MPI_Datarep_conversion_function>,
    dtype_file_extent_fn: Option<MPI_Datarep_extent_function>,
    extra_state: *mut c_void,
) -> c_int {
    let _ = (dtype_file_extent_fn, extra_state);
    register(
        datarep,
        read_conversion_fn.is_some() || write_conversion_fn.is_some(),
        "MPI_Register_datarep",
    )
}

/// # Safety
/// `datarep` is a C string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: Option<MPI_Datarep_conversion_function_c>,
    write_conversion_fn: Option<MPI_Datarep_conversion_function_c>,
    dtype_file_extent_fn: Option<MPI_Datarep_extent_function>,
    extra_state: *mut c_void,
) -> c_int {
    let _ = (dtype_file_extent_fn, extra_state);
    register(
        datarep,
        read_conversion_fn.is_some() || write_conversion_fn.is_some(),
        "MPI_Register_datarep_c",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_null_is_none() {
        assert_eq!(file_id(std::ptr::null_mut()), None);
        for id in [0u32, 1, 7, 100_000] {
            let h = file_handle(id);
            assert!(!h.is_null());
            assert_eq!(file_id(h), Some(id));
            unsafe {
                assert_eq!(protean_MPI_File_c2f(h), id as MPI_Fint + 1);
                assert_eq!(protean_MPI_File_f2c(id as MPI_Fint + 1), h);
            }
        }
        assert_eq!(file_id(3 as MPI_File), None);
        unsafe { assert!(protean_MPI_File_f2c(0).is_null()) };
    }
}
