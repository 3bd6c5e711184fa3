//! One-sided communication (MPI-4.1 chapter 12): the C side of `protean_core::mpi::rma`.
//!
//! Window handles use MPICH's layout for windows (direct kind 0xa0000000 | id; MPI_WIN_NULL is
//! 0x20000000). Errors in a call on a window go to the window's error handler
//! (MPI_ERRORS_ARE_FATAL unless set), as the standard says; errors before a window is known
//! (creation, an invalid handle) go to the communicator's, or MPI_COMM_WORLD's.
//!
//! The predefined window attributes (MPI_WIN_BASE, MPI_WIN_SIZE, MPI_WIN_DISP_UNIT,
//! MPI_WIN_CREATE_FLAVOR, MPI_WIN_MODEL) are answered from values kept here per window, since
//! the standard returns pointers to them.

// MPI_Aint and MPI_Count are i64 here; the casts keep the code right for their C types.
#![allow(clippy::unnecessary_cast)]

use protean_core::ids::DtypeId;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

use crate::abi::*;
use crate::attr::{delete_attrs, report};
use crate::errors::{self, bad, raise};
use crate::handles::{comm_id, dtype_id, errh_handle, errh_id, op_id};
use crate::util::{copy_cstr, nonnull, object_name};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::attr::ObjKind;
use protean_core::mpi::comm::Errhandler;
use protean_core::mpi::global::with;
use protean_core::mpi::rma::{self, ops, sync, Buf, Flavor, LockType, Target, What};

type R<T> = Result<T, MpiError>;

const WIN_DIRECT: u32 = 0xa000_0000;
const ID_MASK: u32 = (1 << 26) - 1;

/// Window handle -> engine id.
pub fn win_id(h: MPI_Win) -> Option<u32> {
    let h = h as u32;
    (h & !ID_MASK == WIN_DIRECT).then_some(h & ID_MASK)
}

pub fn win_handle(id: u32) -> MPI_Win {
    (WIN_DIRECT | id) as MPI_Win
}

/// The values the predefined attributes point to, per window.
struct Vals {
    size: MPI_Aint,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
}

static VALS: Mutex<Vec<Option<Box<Vals>>>> = Mutex::new(Vec::new());

fn vals() -> std::sync::MutexGuard<'static, Vec<Option<Box<Vals>>>> {
    VALS.lock().unwrap_or_else(|p| p.into_inner())
}

/// An engine id for a window handle (MPI_ERR_WIN for MPI_WIN_NULL and garbage).
fn wid(win: MPI_Win) -> R<u32> {
    let id = win_id(win).ok_or_else(|| {
        bad(
            ErrorClass::Win,
            "invalid window (MPI_WIN_NULL or not a window)",
        )
    })?;
    with(|e| e.rma.win(id).map(|_| id))?
}

/// As [`wid`] without asking the engine whether the window is alive: for the calls whose core
/// function checks that itself (operations, flushes), which then take the engine once.
fn wid_handle(win: MPI_Win) -> R<u32> {
    win_id(win).ok_or_else(|| {
        bad(
            ErrorClass::Win,
            "invalid window (MPI_WIN_NULL or not a window)",
        )
    })
}

/// Report `e`, raised by `func`, on the error handler of window `win` (MPI_COMM_WORLD's when
/// the handle is not a live window). Returns the code for the caller when the handler returns.
#[cold]
pub fn raise_win(win: MPI_Win, e: MpiError, func: &str) -> c_int {
    let handler = win_id(win).and_then(|id| {
        with(|eng| {
            let w = eng.rma.win(id).ok()?;
            eng.errhandlers
                .get(w.errhandler as usize)
                .copied()
                .flatten()
        })
        .ok()
        .flatten()
    });
    let Some(handler) = handler else {
        return raise(MPI_COMM_WORLD, e, func);
    };
    let (code, text) = errors::code_of(&e, func);
    call_handler(handler, win, code, func, &text)
}

fn call_handler(h: Errhandler, win: MPI_Win, code: c_int, func: &str, text: &str) -> c_int {
    errors::run_handler(h, code, func, text, |f, mut k| {
        // SAFETY: stored by MPI_Win_create_errhandler (or a communicator's, which has the
        // same shape) from a function of this type.
        let f: MPI_Win_errhandler_function = unsafe { std::mem::transmute(f) };
        let mut w = win;
        unsafe { f(&mut w, &mut k) };
    })
}

fn done(r: R<()>, win: MPI_Win, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_win(win, e, func),
    }
}

fn hints(info: MPI_Info) -> R<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    crate::info::with_info(info, |i| i.clone())
}

// ---------------------------------------------------------------------------------------------
// Creation and freeing

unsafe fn create(
    flavor: Flavor,
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: i64,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> R<()> {
    nonnull(win, "win")?;
    if matches!(flavor, Flavor::Allocate | Flavor::Shared) {
        nonnull(baseptr, "baseptr")?;
    }
    if disp_unit > c_int::MAX as i64 && flavor != Flavor::Dynamic {
        return Err(bad(
            ErrorClass::Disp,
            format!("displacement unit {disp_unit} does not fit an int"),
        ));
    }
    let c = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
    let hints = hints(info)?;
    let (id, mem) = rma::create(flavor, base.cast(), size as i64, disp_unit, hints, c)?;
    let (size, du) = with(|e| e.rma.win(id).map(|w| (w.size, w.disp_unit)))??;
    let mut v = vals();
    if v.len() <= id as usize {
        v.resize_with(id as usize + 1, || None);
    }
    v[id as usize] = Some(Box::new(Vals {
        size: size as MPI_Aint,
        disp_unit: du as c_int,
        flavor: flavor as c_int,
        model: rma::MODEL_UNIFIED,
    }));
    drop(v);
    if matches!(flavor, Flavor::Allocate | Flavor::Shared) {
        *(baseptr as *mut *mut c_void) = mem.cast();
    }
    *win = win_handle(id);
    Ok(())
}

macro_rules! creation {
    ($r:expr, $comm:expr, $func:literal) => {
        match $r {
            Ok(()) => MPI_SUCCESS,
            Err(e) => raise($comm, e, $func),
        }
    };
}

/// # Safety
/// `base` holds `size` bytes until the window is freed; `win` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Create,
        base,
        size,
        disp_unit as i64,
        info,
        comm,
        std::ptr::null_mut(),
        win,
    );
    creation!(r, comm, "MPI_Win_create")
}

/// # Safety
/// As for MPI_Win_create.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Create,
        base,
        size,
        disp_unit as i64,
        info,
        comm,
        std::ptr::null_mut(),
        win,
    );
    creation!(r, comm, "MPI_Win_create_c")
}

/// # Safety
/// `baseptr` is a `void **`; `win` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Allocate,
        std::ptr::null_mut(),
        size,
        disp_unit as i64,
        info,
        comm,
        baseptr,
        win,
    );
    creation!(r, comm, "MPI_Win_allocate")
}

/// # Safety
/// As for MPI_Win_allocate.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Allocate,
        std::ptr::null_mut(),
        size,
        disp_unit as i64,
        info,
        comm,
        baseptr,
        win,
    );
    creation!(r, comm, "MPI_Win_allocate_c")
}

/// # Safety
/// As for MPI_Win_allocate.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Shared,
        std::ptr::null_mut(),
        size,
        disp_unit as i64,
        info,
        comm,
        baseptr,
        win,
    );
    creation!(r, comm, "MPI_Win_allocate_shared")
}

/// # Safety
/// As for MPI_Win_allocate.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Shared,
        std::ptr::null_mut(),
        size,
        disp_unit as i64,
        info,
        comm,
        baseptr,
        win,
    );
    creation!(r, comm, "MPI_Win_allocate_shared_c")
}

/// # Safety
/// `win` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_create_dynamic(
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let r = create(
        Flavor::Dynamic,
        std::ptr::null_mut(),
        0,
        1,
        info,
        comm,
        std::ptr::null_mut(),
        win,
    );
    creation!(r, comm, "MPI_Win_create_dynamic")
}

/// # Safety
/// `win` points to a window handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_free(win: *mut MPI_Win) -> c_int {
    if win.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null window pointer"),
            "MPI_Win_free",
        );
    }
    let h = *win;
    let id = match wid(h) {
        Ok(id) => id,
        Err(e) => return raise_win(h, e, "MPI_Win_free"),
    };
    // The attributes' delete callbacks run first, while the window is usable.
    if with(|e| e.attrs.has_any(ObjKind::Win, id)).unwrap_or(false) {
        if let Err(f) = delete_attrs(ObjKind::Win, h, id) {
            return report(f, MPI_COMM_WORLD, "MPI_Win_free");
        }
    }
    match rma::free(id) {
        Ok(()) => {
            if let Some(v) = vals().get_mut(id as usize) {
                *v = None;
            }
            *win = MPI_WIN_NULL;
            MPI_SUCCESS
        }
        Err(e) => raise_win(h, e, "MPI_Win_free"),
    }
}

/// # Safety
/// `base` holds `size` bytes until detached.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_attach(
    win: MPI_Win,
    base: *mut c_void,
    size: MPI_Aint,
) -> c_int {
    let r = wid(win).and_then(|id| rma::attach(id, base.cast(), size as i64));
    done(r, win, "MPI_Win_attach")
}

/// # Safety
/// Plain arguments.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_detach(win: MPI_Win, base: *const c_void) -> c_int {
    let r = wid(win).and_then(|id| rma::detach(id, base.cast()));
    done(r, win, "MPI_Win_detach")
}

unsafe fn shared_query(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> R<u64> {
    nonnull(size, "size")?;
    nonnull(baseptr, "baseptr")?;
    let id = wid(win)?;
    let (s, du, p) = rma::shared_query(id, rank)?;
    *size = s as MPI_Aint;
    *(baseptr as *mut *mut c_void) = p.cast();
    Ok(du)
}

/// # Safety
/// The out-arguments are writable; `baseptr` is a `void **`.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_shared_query(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    let r = shared_query(win, rank, size, baseptr).and_then(|du| {
        nonnull(disp_unit, "disp_unit")?;
        *disp_unit = du as c_int;
        Ok(())
    });
    done(r, win, "MPI_Win_shared_query")
}

/// # Safety
/// As for MPI_Win_shared_query.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_shared_query_c(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    let r = shared_query(win, rank, size, baseptr).and_then(|du| {
        nonnull(disp_unit, "disp_unit")?;
        *disp_unit = du as MPI_Aint;
        Ok(())
    });
    done(r, win, "MPI_Win_shared_query_c")
}

// ---------------------------------------------------------------------------------------------
// Attributes, names, info, groups, error handlers

/// The value of a predefined window attribute (what MPI_Win_get_attr stores through
/// `attribute_val`), if `keyval` is one.
pub fn predefined_attr(win: u32, keyval: c_int) -> R<Option<*mut c_void>> {
    let base = with(|e| e.rma.win(win).map(|w| w.base))??;
    let mut v = vals();
    let Some(Some(x)) = v.get_mut(win as usize) else {
        return Err(bad(ErrorClass::Win, "invalid window"));
    };
    Ok(Some(match keyval {
        MPI_WIN_BASE => base.cast(),
        MPI_WIN_SIZE => (&mut x.size as *mut MPI_Aint).cast(),
        MPI_WIN_DISP_UNIT => (&mut x.disp_unit as *mut c_int).cast(),
        MPI_WIN_CREATE_FLAVOR => (&mut x.flavor as *mut c_int).cast(),
        MPI_WIN_MODEL => (&mut x.model as *mut c_int).cast(),
        _ => return Ok(None),
    }))
}

/// Engine id of a live window (for the attribute chapter).
pub fn win_obj(win: MPI_Win) -> R<u32> {
    wid(win)
}

/// # Safety
/// `win_name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_set_name(win: MPI_Win, win_name: *const c_char) -> c_int {
    let r = (|| -> R<()> {
        let name = object_name(win_name)?;
        let id = wid(win)?;
        with(|e| -> R<()> {
            e.rma.win_mut(id)?.name = name;
            Ok(())
        })?
    })();
    done(r, win, "MPI_Win_set_name")
}

/// # Safety
/// `win_name` has room for MPI_MAX_OBJECT_NAME chars; `resultlen` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_get_name(
    win: MPI_Win,
    win_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| -> R<()> {
        nonnull(win_name, "win_name")?;
        nonnull(resultlen, "resultlen")?;
        let id = wid(win)?;
        let name = with(|e| e.rma.win(id).map(|w| w.name.clone()))??;
        *resultlen = copy_cstr(&name, win_name, MPI_MAX_OBJECT_NAME as usize) as c_int;
        Ok(())
    })();
    done(r, win, "MPI_Win_get_name")
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_set_info(win: MPI_Win, info: MPI_Info) -> c_int {
    let r = (|| -> R<()> {
        let id = wid(win)?;
        let h = hints(info)?;
        with(|e| -> R<()> {
            let w = e.rma.win_mut(id)?;
            rma::set_hints(&mut w.info, &h);
            Ok(())
        })?
    })();
    done(r, win, "MPI_Win_set_info")
}

/// # Safety
/// `info_used` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_get_info(win: MPI_Win, info_used: *mut MPI_Info) -> c_int {
    let r = (|| -> R<()> {
        nonnull(info_used, "info_used")?;
        let id = wid(win)?;
        let i = with(|e| e.rma.win(id).map(|w| w.info.clone()))??;
        *info_used = crate::info::new_info(i);
        Ok(())
    })();
    done(r, win, "MPI_Win_get_info")
}

/// # Safety
/// `group` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_get_group(win: MPI_Win, group: *mut MPI_Group) -> c_int {
    let r = (|| -> R<()> {
        nonnull(group, "group")?;
        let id = wid(win)?;
        let g = with(|e| e.rma.win(id).map(|w| w.group()))??;
        *group = crate::group::new_group(g)?;
        Ok(())
    })();
    done(r, win, "MPI_Win_get_group")
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_create_errhandler(
    win_errhandler_fn: Option<MPI_Win_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    crate::errhandler::create_user(
        win_errhandler_fn.map(|f| f as usize),
        errhandler,
        "MPI_Win_create_errhandler",
    )
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_set_errhandler(
    win: MPI_Win,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| -> R<()> {
        let id = wid(win)?;
        with(|e| -> R<()> {
            let h = errh_id(errhandler)
                .filter(|h| e.errhandlers.get(*h as usize).is_some_and(|x| x.is_some()))
                .ok_or_else(|| bad(ErrorClass::Arg, "invalid error handler"))?;
            e.rma.win_mut(id)?.errhandler = h;
            Ok(())
        })?
    })();
    done(r, win, "MPI_Win_set_errhandler")
}

/// # Safety
/// `errhandler` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_get_errhandler(
    win: MPI_Win,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| -> R<()> {
        nonnull(errhandler, "errhandler")?;
        let id = wid(win)?;
        let h = with(|e| e.rma.win(id).map(|w| w.errhandler))??;
        *errhandler = errh_handle(h);
        Ok(())
    })();
    done(r, win, "MPI_Win_get_errhandler")
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_call_errhandler(win: MPI_Win, errorcode: c_int) -> c_int {
    let id = match wid(win) {
        Ok(id) => id,
        Err(e) => return raise(MPI_COMM_WORLD, e, "MPI_Win_call_errhandler"),
    };
    let h = with(|e| {
        let w = e.rma.win(id).ok()?;
        e.errhandlers.get(w.errhandler as usize).copied().flatten()
    })
    .ok()
    .flatten()
    .unwrap_or(Errhandler::Fatal);
    let text = errors::text_of_code(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    call_handler(h, win, errorcode, "MPI_Win_call_errhandler", &text);
    MPI_SUCCESS
}

// ---------------------------------------------------------------------------------------------
// Operations

fn dt(h: MPI_Datatype, what: &str) -> R<DtypeId> {
    dtype_id(h).ok_or_else(|| bad(ErrorClass::Type, format!("invalid {what} datatype")))
}

fn opid(h: MPI_Op) -> R<u32> {
    op_id(h).ok_or_else(|| {
        bad(
            ErrorClass::Op,
            "invalid operation (MPI_OP_NULL or not an operation)",
        )
    })
}

/// One operation from its C arguments; `request` receives the request of an MPI_R* call.
unsafe fn run(
    win: MPI_Win,
    what: What,
    origin: Buf,
    result: Buf,
    compare: *const c_void,
    t: Target,
    request: *mut MPI_Request,
) -> R<()> {
    let id = wid_handle(win)?;
    let want = !request.is_null();
    let slot = ops::op(id, what, origin, result, compare.cast(), t, want)?;
    if want {
        *request = match slot {
            Some(s) => crate::handles::request_handle(s),
            None => MPI_REQUEST_NULL,
        };
    }
    Ok(())
}

/// The one-sided fast path, tried first by the operations without a request: true when it did
/// the operation (see `ops::op_fast`); false leaves everything, checks and errors included,
/// to [`run`].
#[inline(always)]
unsafe fn fast(
    win: MPI_Win,
    what: What,
    origin: Buf,
    result: Buf,
    compare: *const c_void,
    t: Target,
) -> bool {
    match win_id(win) {
        Some(id) => ops::op_fast(id, what, origin, result, compare.cast(), t),
        None => false,
    }
}

fn buf(p: *const c_void, count: i64, dt: DtypeId) -> Buf {
    Buf {
        ptr: p as *mut u8,
        count,
        dt,
    }
}

/// MPI_Put / MPI_Get and their MPI_R* forms (`req`), each with its `_c` twin (MPI_Count
/// counts).
macro_rules! put_get {
    // (Each function's name for errors is its Rust name without `protean_`.)
    ($name:ident, $name_c:ident, $what:expr, $origin_ty:ty $(, $req:ident)?) => {
        put_get!(@one $name, &stringify!($name)[8..], $what, $origin_ty, c_int $(, $req)?);
        put_get!(@one $name_c, &stringify!($name_c)[8..], $what, $origin_ty, MPI_Count $(, $req)?);
    };
    (@one $name:ident, $func:expr, $what:expr, $origin_ty:ty, $count:ty $(, $req:ident)?) => {
        /// # Safety
        /// The buffers follow MPI's rules for one-sided operations; `request` (MPI_R* forms)
        /// is writable.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            origin_addr: $origin_ty,
            origin_count: $count,
            origin_datatype: MPI_Datatype,
            target_rank: c_int,
            target_disp: MPI_Aint,
            target_count: $count,
            target_datatype: MPI_Datatype,
            win: MPI_Win,
            $($req: *mut MPI_Request,)?
        ) -> c_int {
            let request: *mut MPI_Request = {
                let _r: *mut MPI_Request = std::ptr::null_mut();
                $(let _r = $req;)?
                _r
            };
            // The fast path takes the same datatype and count on both sides (what it could
            // take before too); anything else, and anything it declines, goes to the general
            // path, which checks and reports.
            if request.is_null() && origin_datatype == target_datatype && origin_count == target_count {
                if let (Some(d), Some(id)) = (dtype_id(target_datatype), win_id(win)) {
                    if ops::put_get_fast(
                        id,
                        matches!($what, What::Get),
                        origin_addr as *mut u8,
                        target_rank,
                        target_disp as i64,
                        target_count as i64,
                        d,
                    ) {
                        return MPI_SUCCESS;
                    }
                }
            }
            let has_request = false $(|| { let _ = $req; true })?;
            put_get_slow(
                has_request,
                $what,
                buf(origin_addr as *const c_void, origin_count as i64, DtypeId::new(0)),
                origin_datatype,
                (target_rank, target_disp, target_count as i64),
                target_datatype,
                win,
                request,
                $func,
            )
        }
    };
}

/// The general path of MPI_Put, MPI_Get and their request forms: out of line, so that their
/// entry points are the fast path's few instructions. `origin.dt` is set here from
/// `origin_datatype`; `target` is rank, displacement and count.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_get_slow(
    has_request: bool,
    what: What,
    mut origin: Buf,
    origin_datatype: MPI_Datatype,
    (rank, disp, count): (c_int, MPI_Aint, i64),
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let r = (|| -> R<()> {
        if has_request {
            nonnull(request, "request")?;
        }
        origin.dt = dt(origin_datatype, "origin")?;
        let t = Target {
            rank,
            disp: disp as i64,
            count,
            dt: dt(target_datatype, "target")?,
        };
        run(win, what, origin, Buf::NONE, std::ptr::null(), t, request)
    })();
    done(r, win, func)
}

put_get!(protean_MPI_Put, protean_MPI_Put_c, What::Put, *const c_void);
put_get!(protean_MPI_Get, protean_MPI_Get_c, What::Get, *mut c_void);
put_get!(
    protean_MPI_Rput,
    protean_MPI_Rput_c,
    What::Put,
    *const c_void,
    request
);
put_get!(
    protean_MPI_Rget,
    protean_MPI_Rget_c,
    What::Get,
    *mut c_void,
    request
);

/// MPI_Accumulate and MPI_Raccumulate (`request`), each with its `_c` twin.
macro_rules! accumulate {
    ($name:ident, $name_c:ident $(, $req:ident)?) => {
        accumulate!(@one $name, &stringify!($name)[8..], c_int $(, $req)?);
        accumulate!(@one $name_c, &stringify!($name_c)[8..], MPI_Count $(, $req)?);
    };
    (@one $name:ident, $func:expr, $count:ty $(, $req:ident)?) => {
        /// # Safety
        /// The buffers follow MPI's rules for one-sided operations.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            origin_addr: *const c_void,
            origin_count: $count,
            origin_datatype: MPI_Datatype,
            target_rank: c_int,
            target_disp: MPI_Aint,
            target_count: $count,
            target_datatype: MPI_Datatype,
            op: MPI_Op,
            win: MPI_Win,
            $($req: *mut MPI_Request,)?
        ) -> c_int {
            let request: *mut MPI_Request = {
                let _r: *mut MPI_Request = std::ptr::null_mut();
                $(let _r = $req;)?
                _r
            };
            if request.is_null() {
                if let (Some(od), Some(td), Some(o)) = (dtype_id(origin_datatype), dtype_id(target_datatype), op_id(op)) {
                    let t = Target { rank: target_rank, disp: target_disp as i64, count: target_count as i64, dt: td };
                    if fast(win, What::Acc(o), buf(origin_addr, origin_count as i64, od), Buf::NONE, std::ptr::null(), t) {
                        return MPI_SUCCESS;
                    }
                }
            }
            let r = (|| -> R<()> {
                $(nonnull($req, "request")?;)?
                let o = buf(origin_addr, origin_count as i64, dt(origin_datatype, "origin")?);
                let t = Target { rank: target_rank, disp: target_disp as i64, count: target_count as i64, dt: dt(target_datatype, "target")? };
                run(win, What::Acc(opid(op)?), o, Buf::NONE, std::ptr::null(), t, request)
            })();
            done(r, win, $func)
        }
    };}

accumulate!(protean_MPI_Accumulate, protean_MPI_Accumulate_c);
accumulate!(protean_MPI_Raccumulate, protean_MPI_Raccumulate_c, request);

/// MPI_Get_accumulate and MPI_Rget_accumulate (`request`), each with its `_c` twin.
macro_rules! get_accumulate {
    ($name:ident, $name_c:ident $(, $req:ident)?) => {
        get_accumulate!(@one $name, &stringify!($name)[8..], c_int $(, $req)?);
        get_accumulate!(@one $name_c, &stringify!($name_c)[8..], MPI_Count $(, $req)?);
    };
    (@one $name:ident, $func:expr, $count:ty $(, $req:ident)?) => {
        /// # Safety
        /// The buffers follow MPI's rules for one-sided operations.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            origin_addr: *const c_void,
            origin_count: $count,
            origin_datatype: MPI_Datatype,
            result_addr: *mut c_void,
            result_count: $count,
            result_datatype: MPI_Datatype,
            target_rank: c_int,
            target_disp: MPI_Aint,
            target_count: $count,
            target_datatype: MPI_Datatype,
            op: MPI_Op,
            win: MPI_Win,
            $($req: *mut MPI_Request,)?
        ) -> c_int {
            let request: *mut MPI_Request = {
                let _r: *mut MPI_Request = std::ptr::null_mut();
                $(let _r = $req;)?
                _r
            };
            if request.is_null() {
                if let (Some(od), Some(rd), Some(td), Some(o)) = (dtype_id(origin_datatype), dtype_id(result_datatype), dtype_id(target_datatype), op_id(op)) {
                    let t = Target { rank: target_rank, disp: target_disp as i64, count: target_count as i64, dt: td };
                    let res = buf(result_addr, result_count as i64, rd);
                    if fast(win, What::GetAcc(o), buf(origin_addr, origin_count as i64, od), res, std::ptr::null(), t) {
                        return MPI_SUCCESS;
                    }
                }
            }
            let r = (|| -> R<()> {
                $(nonnull($req, "request")?;)?
                let op = opid(op)?;
                // The origin is not used with MPI_NO_OP (its datatype may be anything).
                let odt = if op == 13 { dtype_id(origin_datatype).unwrap_or(DtypeId::new(0)) } else { dt(origin_datatype, "origin")? };
                let o = buf(origin_addr, origin_count as i64, odt);
                let res = buf(result_addr, result_count as i64, dt(result_datatype, "result")?);
                let t = Target { rank: target_rank, disp: target_disp as i64, count: target_count as i64, dt: dt(target_datatype, "target")? };
                run(win, What::GetAcc(op), o, res, std::ptr::null(), t, request)
            })();
            done(r, win, $func)
        }
    };}

get_accumulate!(protean_MPI_Get_accumulate, protean_MPI_Get_accumulate_c);
get_accumulate!(
    protean_MPI_Rget_accumulate,
    protean_MPI_Rget_accumulate_c,
    request
);

/// # Safety
/// One element of `datatype` at each buffer.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    if let (Some(d), Some(o)) = (dtype_id(datatype), op_id(op)) {
        let t = Target {
            rank: target_rank,
            disp: target_disp as i64,
            count: 1,
            dt: d,
        };
        let (ob, rb) = (buf(origin_addr, 1, d), buf(result_addr, 1, d));
        if fast(win, What::GetAcc(o), ob, rb, std::ptr::null(), t) {
            return MPI_SUCCESS;
        }
    }
    let r = (|| -> R<()> {
        let d = dt(datatype, "")?;
        let t = Target {
            rank: target_rank,
            disp: target_disp as i64,
            count: 1,
            dt: d,
        };
        run(
            win,
            What::GetAcc(opid(op)?),
            buf(origin_addr, 1, d),
            buf(result_addr, 1, d),
            std::ptr::null(),
            t,
            std::ptr::null_mut(),
        )
    })();
    done(r, win, "MPI_Fetch_and_op")
}

/// # Safety
/// One element of `datatype` at each buffer.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win: MPI_Win,
) -> c_int {
    if let Some(d) = dtype_id(datatype) {
        let t = Target {
            rank: target_rank,
            disp: target_disp as i64,
            count: 1,
            dt: d,
        };
        let (ob, rb) = (buf(origin_addr, 1, d), buf(result_addr, 1, d));
        if fast(win, What::Cas, ob, rb, compare_addr, t) {
            return MPI_SUCCESS;
        }
    }
    let r = (|| -> R<()> {
        let d = dt(datatype, "")?;
        let t = Target {
            rank: target_rank,
            disp: target_disp as i64,
            count: 1,
            dt: d,
        };
        run(
            win,
            What::Cas,
            buf(origin_addr, 1, d),
            buf(result_addr, 1, d),
            compare_addr,
            t,
            std::ptr::null_mut(),
        )
    })();
    done(r, win, "MPI_Compare_and_swap")
}

// ---------------------------------------------------------------------------------------------
// Synchronisation

/// A call on a window whose C arguments are plain values then the window: `$name(args...,
/// win)` runs `$body` with the window's engine id as `$id` (from `$check`: [`wid`], or
/// [`wid_handle`] where the core checks the window itself); errors go to the window's handler
/// under the function's name (`$name` without `protean_`).
macro_rules! win_call {
    ($name:ident, $check:ident, |$id:ident $(, $arg:ident: $ty:ty)*| $body:expr) => {
        /// # Safety
        /// Plain arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty,)* win: MPI_Win) -> c_int {
            let r = (|| -> R<()> {
                let $id = $check(win)?;
                $body
            })();
            done(r, win, &stringify!($name)[8..])
        }
    };
}

fn group_of(g: MPI_Group) -> R<Vec<protean_core::ids::Gpid>> {
    crate::group::members(g)
}

win_call!(protean_MPI_Win_fence, wid, |id, assert: c_int| sync::fence(
    id, assert
));
win_call!(
    protean_MPI_Win_post,
    wid,
    |id, group: MPI_Group, assert: c_int| sync::post(id, &group_of(group)?, assert)
);
win_call!(
    protean_MPI_Win_start,
    wid,
    |id, group: MPI_Group, assert: c_int| sync::start(id, &group_of(group)?, assert)
);
win_call!(protean_MPI_Win_complete, wid, |id| sync::complete(id));
win_call!(protean_MPI_Win_wait, wid, |id| sync::wait_epoch(id));
win_call!(protean_MPI_Win_unlock, wid, |id, rank: c_int| sync::unlock(
    id, rank
));
win_call!(protean_MPI_Win_lock_all, wid, |id, assert: c_int| {
    sync::lock_all(id, assert)
});
win_call!(protean_MPI_Win_unlock_all, wid, |id| sync::unlock_all(id));
win_call!(protean_MPI_Win_flush, wid_handle, |id, rank: c_int| {
    sync::flush(id, Some(rank))
});
win_call!(protean_MPI_Win_flush_all, wid_handle, |id| sync::flush(
    id, None
));
win_call!(
    protean_MPI_Win_flush_local,
    wid_handle,
    |id, rank: c_int| sync::flush_local(id, Some(rank))
);
win_call!(protean_MPI_Win_flush_local_all, wid_handle, |id| {
    sync::flush_local(id, None)
});
win_call!(protean_MPI_Win_sync, wid, |id| sync::sync(id));

/// # Safety
/// `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_test(win: MPI_Win, flag: *mut c_int) -> c_int {
    let r = (|| -> R<()> {
        nonnull(flag, "flag")?;
        let done = sync::test(wid(win)?)?;
        *flag = done as c_int;
        Ok(())
    })();
    done(r, win, "MPI_Win_test")
}

/// # Safety
/// Plain arguments.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_lock(
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win: MPI_Win,
) -> c_int {
    let r = (|| -> R<()> {
        let id = wid(win)?;
        let t = match lock_type {
            MPI_LOCK_SHARED => LockType::Shared,
            MPI_LOCK_EXCLUSIVE => LockType::Exclusive,
            _ => {
                return Err(bad(
                    ErrorClass::Locktype,
                    format!(
                        "lock type {lock_type} is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE"
                    ),
                ))
            }
        };
        sync::lock(id, t, rank, assert)
    })();
    done(r, win, "MPI_Win_lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_handles_roundtrip_and_null_is_none() {
        for id in [0u32, 1, 77, ID_MASK] {
            assert_eq!(win_id(win_handle(id)), Some(id));
        }
        assert_eq!(win_id(MPI_WIN_NULL), None);
        assert_eq!(
            win_id(crate::handles::comm_handle(protean_core::ids::CommId::new(
                3
            ))),
            None
        );
    }
}
