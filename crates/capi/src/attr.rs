//! Attribute caching (MPI-4.0 section 7.7 and 11.2 for the predefined attributes): keyvals and
//! attributes on communicators and datatypes (windows share the machinery: their keyvals exist
//! here, their objects come with the RMA chapter).
//!
//! The engine stores keyvals and attributes (`protean_core::mpi::attr`); this layer calls the
//! user's copy and delete callbacks, always outside the engine (a callback may call MPI, even
//! free the object it is called for). A callback that returns an error makes the MPI call fail
//! with that code; a failed delete leaves the attribute in place.
//!
//! Predefined communicator attributes (MPI_TAG_UB, MPI_HOST, MPI_IO, MPI_WTIME_IS_GLOBAL,
//! MPI_UNIVERSE_SIZE, MPI_LASTUSEDCODE, MPI_APPNUM) are answered on every communicator, as
//! MPICH does; they cannot be set, deleted or freed.

use protean_core::ids::CommId;
use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, raise, raise_code, text_of_code};
use crate::handles::{comm_handle, comm_id, dtype_id, keyval_handle, keyval_id};
use crate::util::nonnull;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::attr::{AttrCall, ObjKind};
use protean_core::mpi::comm::{COMM_SELF, COMM_WORLD};
use protean_core::mpi::global::with;

type R<T> = Result<T, MpiError>;

/// The C type of every copy callback (the object handle is an `int` for all kinds).
type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// The C type of every delete callback.
type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// Why an attribute operation failed: an engine error, or a callback's error code.
pub enum Failure {
    Mpi(MpiError),
    Callback(c_int),
}

impl From<MpiError> for Failure {
    fn from(e: MpiError) -> Self {
        Failure::Mpi(e)
    }
}

/// Report a failure on `comm`'s error handler.
pub fn report(f: Failure, comm: MPI_Comm, func: &str) -> c_int {
    match f {
        Failure::Mpi(e) => raise(comm, e, func),
        Failure::Callback(code) => {
            let text = text_of_code(code)
                .map(|t| format!("an attribute callback failed: {t}"))
                .unwrap_or_else(|| format!("an attribute callback returned error {code}"));
            raise_code(comm, code, func, &text)
        }
    }
}

/// Call a delete callback (none when `func` is 0).
unsafe fn call_delete(kind: ObjKind, handle: c_int, a: &AttrCall) -> Result<(), Failure> {
    if a.func == 0 {
        return Ok(());
    }
    // SAFETY: the address was given to MPI_*_create_keyval as a delete function of this
    // shape; it is called outside the engine.
    let f: DeleteFn = std::mem::transmute(a.func);
    let rc = f(
        handle,
        keyval_handle(a.keyval, kind),
        a.value as *mut c_void,
        a.extra as *mut c_void,
    );
    if rc != MPI_SUCCESS {
        return Err(Failure::Callback(rc));
    }
    Ok(())
}

/// Copy the attributes of object `old` (handle `old_handle`) to the new object `new`, calling
/// the copy callbacks in the order the attributes were set. On failure the attributes already
/// copied are deleted again (their delete callbacks run) and the callback's code is returned.
///
/// # Safety
/// Callbacks are the user's; they get the handles of live objects.
pub unsafe fn copy_attrs(
    kind: ObjKind,
    old_handle: c_int,
    old: u32,
    new_handle: c_int,
    new: u32,
) -> Result<(), Failure> {
    let list = with(|e| e.attrs.copy_list(kind, old))?;
    for a in list {
        if a.func == 0 {
            continue;
        }
        let mut val: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: the address was given to MPI_*_create_keyval as a copy function of this
        // shape (MPI_*_DUP_FN is MPIR_Dup_fn); called outside the engine.
        let f: CopyFn = std::mem::transmute(a.func);
        let rc = f(
            old_handle,
            keyval_handle(a.keyval, kind),
            a.extra as *mut c_void,
            a.value as *mut c_void,
            (&mut val as *mut *mut c_void).cast(),
            &mut flag,
        );
        if rc != MPI_SUCCESS {
            let _ = delete_attrs(kind, new_handle, new);
            return Err(Failure::Callback(rc));
        }
        if flag != 0 {
            with(|e| e.attrs.store(kind, new, a.keyval, val as usize))??;
        }
    }
    Ok(())
}

/// Delete every attribute of an object in reverse order of setting, calling the delete
/// callbacks. Stops at the first failing callback (that attribute and the ones set before it
/// stay).
///
/// # Safety
/// Callbacks are the user's; `handle` names the object.
pub unsafe fn delete_attrs(kind: ObjKind, handle: c_int, obj: u32) -> Result<(), Failure> {
    let list = with(|e| e.attrs.delete_order(kind, obj))?;
    for a in list {
        call_delete(kind, handle, &a)?;
        with(|e| e.attrs.remove(kind, obj, a.keyval))?;
    }
    Ok(())
}

/// MPI_Finalize begins by deleting the attributes of MPI_COMM_SELF, then those of
/// MPI_COMM_WORLD, each in reverse order of setting (MPI-4.0 11.2.4), while MPI is still fully
/// usable. Errors of callbacks are ignored here.
pub fn finalize_attrs() {
    // SAFETY: the predefined communicators are alive until the end of MPI_Finalize.
    unsafe {
        let _ = delete_attrs(ObjKind::Comm, MPI_COMM_SELF, COMM_SELF.get());
        let _ = delete_attrs(ObjKind::Comm, MPI_COMM_WORLD, COMM_WORLD.get());
    }
}

// ---------------------------------------------------------------------------------------------
// Keyvals

unsafe fn create_keyval(
    kind: ObjKind,
    copy: usize,
    delete: usize,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> R<()> {
    nonnull(keyval, "keyval")?;
    let id = with(|e| e.attrs.create_keyval(kind, copy, delete, extra as usize))?;
    *keyval = keyval_handle(id, kind);
    Ok(())
}

fn predefined_keyval(kind: ObjKind, k: c_int) -> bool {
    match kind {
        ObjKind::Comm => matches!(
            k,
            MPI_TAG_UB
                | MPI_HOST
                | MPI_IO
                | MPI_WTIME_IS_GLOBAL
                | MPI_UNIVERSE_SIZE
                | MPI_LASTUSEDCODE
                | MPI_APPNUM
        ),
        ObjKind::Win => matches!(
            k,
            MPI_WIN_BASE | MPI_WIN_SIZE | MPI_WIN_DISP_UNIT | MPI_WIN_CREATE_FLAVOR | MPI_WIN_MODEL
        ),
        ObjKind::Type => false,
    }
}

fn kid(k: c_int, kind: ObjKind) -> R<u32> {
    if predefined_keyval(kind, k) {
        return Err(bad(
            ErrorClass::Keyval,
            "predefined keyvals cannot be used to set, delete or free attributes",
        ));
    }
    keyval_id(k, kind).ok_or_else(|| {
        bad(
            ErrorClass::Keyval,
            format!(
                "invalid keyval (MPI_KEYVAL_INVALID, or not a {} keyval)",
                kind.name()
            ),
        )
    })
}

unsafe fn free_keyval(kind: ObjKind, keyval: *mut c_int) -> R<()> {
    nonnull(keyval, "keyval")?;
    let id = kid(*keyval, kind)?;
    with(|e| e.attrs.free_keyval(id, kind))??;
    *keyval = MPI_KEYVAL_INVALID;
    Ok(())
}

fn fn_addr<F>(f: Option<F>) -> usize {
    // Function pointers and usize have the same size; None is the null function.
    match f {
        // SAFETY: F is a function pointer type.
        Some(f) => unsafe { std::mem::transmute_copy::<F, usize>(&f) },
        None => 0,
    }
}

/// # Safety
/// `comm_keyval` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_create_keyval(
    comm_copy_attr_fn: Option<MPI_Comm_copy_attr_function>,
    comm_delete_attr_fn: Option<MPI_Comm_delete_attr_function>,
    comm_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let r = create_keyval(
        ObjKind::Comm,
        fn_addr(comm_copy_attr_fn),
        fn_addr(comm_delete_attr_fn),
        comm_keyval,
        extra_state,
    );
    done(r, MPI_COMM_WORLD, "MPI_Comm_create_keyval")
}

/// # Safety
/// `keyval` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Keyval_create(
    copy_fn: Option<MPI_Copy_function>,
    delete_fn: Option<MPI_Delete_function>,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let r = create_keyval(
        ObjKind::Comm,
        fn_addr(copy_fn),
        fn_addr(delete_fn),
        keyval,
        extra_state,
    );
    done(r, MPI_COMM_WORLD, "MPI_Keyval_create")
}

/// # Safety
/// `type_keyval` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_keyval(
    type_copy_attr_fn: Option<MPI_Type_copy_attr_function>,
    type_delete_attr_fn: Option<MPI_Type_delete_attr_function>,
    type_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let r = create_keyval(
        ObjKind::Type,
        fn_addr(type_copy_attr_fn),
        fn_addr(type_delete_attr_fn),
        type_keyval,
        extra_state,
    );
    done(r, MPI_COMM_WORLD, "MPI_Type_create_keyval")
}

/// # Safety
/// `win_keyval` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_create_keyval(
    win_copy_attr_fn: Option<MPI_Win_copy_attr_function>,
    win_delete_attr_fn: Option<MPI_Win_delete_attr_function>,
    win_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let r = create_keyval(
        ObjKind::Win,
        fn_addr(win_copy_attr_fn),
        fn_addr(win_delete_attr_fn),
        win_keyval,
        extra_state,
    );
    done(r, MPI_COMM_WORLD, "MPI_Win_create_keyval")
}

/// # Safety
/// `comm_keyval` points to a keyval.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
    done(
        free_keyval(ObjKind::Comm, comm_keyval),
        MPI_COMM_WORLD,
        "MPI_Comm_free_keyval",
    )
}

/// # Safety
/// `keyval` points to a keyval.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    done(
        free_keyval(ObjKind::Comm, keyval),
        MPI_COMM_WORLD,
        "MPI_Keyval_free",
    )
}

/// # Safety
/// `type_keyval` points to a keyval.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
    done(
        free_keyval(ObjKind::Type, type_keyval),
        MPI_COMM_WORLD,
        "MPI_Type_free_keyval",
    )
}

/// # Safety
/// `win_keyval` points to a keyval.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
    done(
        free_keyval(ObjKind::Win, win_keyval),
        MPI_COMM_WORLD,
        "MPI_Win_free_keyval",
    )
}

fn done(r: R<()>, comm: MPI_Comm, func: &str) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, e, func),
    }
}

// ---------------------------------------------------------------------------------------------
// Setting, getting and deleting

/// Set an attribute: the delete callback runs on a value it replaces; if it fails the old
/// value stays.
unsafe fn set_attr(
    kind: ObjKind,
    handle: c_int,
    obj: u32,
    keyval: c_int,
    value: *mut c_void,
) -> Result<(), Failure> {
    let k = kid(keyval, kind)?;
    if let Some(old) = with(|e| e.attrs.before_set(kind, obj, k))?? {
        call_delete(kind, handle, &old)?;
    }
    with(|e| e.attrs.store(kind, obj, k, value as usize))??;
    Ok(())
}

unsafe fn get_attr(
    kind: ObjKind,
    obj: u32,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> R<()> {
    nonnull(flag, "flag")?;
    let k = kid(keyval, kind)?;
    match with(|e| e.attrs.get(kind, obj, k))?? {
        Some(v) => {
            nonnull(value, "attribute_val")?;
            *(value as *mut usize) = v;
            *flag = 1;
        }
        None => *flag = 0,
    }
    Ok(())
}

unsafe fn delete_attr(
    kind: ObjKind,
    handle: c_int,
    obj: u32,
    keyval: c_int,
) -> Result<(), Failure> {
    let k = kid(keyval, kind)?;
    let a = with(|e| e.attrs.before_delete(kind, obj, k))??;
    call_delete(kind, handle, &a)?;
    with(|e| e.attrs.remove(kind, obj, k))?;
    Ok(())
}

/// A communicator id for attribute calls (MPI_COMM_NULL and freed ones are errors).
fn comm_obj(comm: MPI_Comm) -> R<u32> {
    let id = comm_id(comm).ok_or_else(|| bad(ErrorClass::Comm, "invalid communicator"))?;
    with(|e| e.live_comm(id).map(|_| id.get()))?
}

fn type_obj(t: MPI_Datatype) -> R<u32> {
    let id = dtype_id(t).ok_or_else(|| bad(ErrorClass::Type, "invalid datatype"))?;
    with(|e| e.dtype(id).map(|_| id.get()))?
}

/// Storage for predefined attribute values: the standard returns pointers to them.
static mut ATTR_TAG_UB: c_int = 0;
static mut ATTR_HOST: c_int = 0;
static mut ATTR_IO: c_int = 0;
static mut ATTR_WTIME_IS_GLOBAL: c_int = 0;
static mut ATTR_APPNUM: c_int = 0;
static mut ATTR_UNIVERSE_SIZE: c_int = 0;
static mut ATTR_LASTUSEDCODE: c_int = 0;

/// The value of a predefined communicator attribute: a pointer to an int.
unsafe fn predefined_comm_attr(keyval: c_int) -> R<Option<*mut c_int>> {
    let (universe, appnum) = with(|e| (e.universe, e.appnum))?;
    Ok(Some(match keyval {
        MPI_TAG_UB => {
            ATTR_TAG_UB = protean_core::mpi::p2p::TAG_UB;
            &raw mut ATTR_TAG_UB
        }
        MPI_HOST => {
            ATTR_HOST = MPI_PROC_NULL;
            &raw mut ATTR_HOST
        }
        MPI_IO => {
            // Every process can do I/O.
            ATTR_IO = MPI_ANY_SOURCE;
            &raw mut ATTR_IO
        }
        MPI_WTIME_IS_GLOBAL => {
            ATTR_WTIME_IS_GLOBAL = 0;
            &raw mut ATTR_WTIME_IS_GLOBAL
        }
        MPI_APPNUM => {
            ATTR_APPNUM = appnum;
            &raw mut ATTR_APPNUM
        }
        MPI_UNIVERSE_SIZE => {
            ATTR_UNIVERSE_SIZE = universe;
            &raw mut ATTR_UNIVERSE_SIZE
        }
        MPI_LASTUSEDCODE => {
            ATTR_LASTUSEDCODE = crate::errhandler::last_used_code();
            &raw mut ATTR_LASTUSEDCODE
        }
        _ => return Ok(None),
    }))
}

unsafe fn comm_get(comm: MPI_Comm, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> R<()> {
    let obj = comm_obj(comm)?;
    if let Some(p) = predefined_comm_attr(keyval)? {
        nonnull(flag, "flag")?;
        nonnull(value, "attribute_val")?;
        // A process manager that states no universe size (mpirun -usize INFINITE, Hydra's
        // default): the attribute is not set.
        *flag = (keyval != MPI_UNIVERSE_SIZE || *p >= 0) as c_int;
        if *flag == 1 {
            *(value as *mut *mut c_int) = p;
        }
        return Ok(());
    }
    get_attr(ObjKind::Comm, obj, keyval, value, flag)
}

/// # Safety
/// `attribute_val` receives a pointer; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    done(
        comm_get(comm, comm_keyval, attribute_val, flag),
        comm,
        "MPI_Comm_get_attr",
    )
}

/// # Safety
/// As for MPI_Comm_get_attr.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Attr_get(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    done(
        comm_get(comm, keyval, attribute_val, flag),
        comm,
        "MPI_Attr_get",
    )
}

unsafe fn comm_set(comm: MPI_Comm, keyval: c_int, value: *mut c_void) -> Result<(), Failure> {
    let obj = comm_obj(comm)?;
    set_attr(ObjKind::Comm, comm, obj, keyval, value)
}

/// # Safety
/// `attribute_val` is stored, not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_set_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    match comm_set(comm, comm_keyval, attribute_val) {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, comm, "MPI_Comm_set_attr"),
    }
}

/// # Safety
/// As for MPI_Comm_set_attr.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Attr_put(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    match comm_set(comm, keyval, attribute_val) {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, comm, "MPI_Attr_put"),
    }
}

unsafe fn comm_delete(comm: MPI_Comm, keyval: c_int) -> Result<(), Failure> {
    let obj = comm_obj(comm)?;
    delete_attr(ObjKind::Comm, comm, obj, keyval)
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
    match comm_delete(comm, comm_keyval) {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, comm, "MPI_Comm_delete_attr"),
    }
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    match comm_delete(comm, keyval) {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, comm, "MPI_Attr_delete"),
    }
}

/// # Safety
/// `attribute_val` receives a pointer; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let obj = type_obj(datatype)?;
        get_attr(ObjKind::Type, obj, type_keyval, attribute_val, flag)
    })();
    done(r, MPI_COMM_WORLD, "MPI_Type_get_attr")
}

/// # Safety
/// `attribute_val` is stored, not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_set_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = (|| {
        let obj = type_obj(datatype)?;
        set_attr(ObjKind::Type, datatype, obj, type_keyval, attribute_val)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, MPI_COMM_WORLD, "MPI_Type_set_attr"),
    }
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_delete_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
) -> c_int {
    let r = (|| {
        let obj = type_obj(datatype)?;
        delete_attr(ObjKind::Type, datatype, obj, type_keyval)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(f) => report(f, MPI_COMM_WORLD, "MPI_Type_delete_attr"),
    }
}

/// For MPI_Type_dup (datatype chapter): copy the attributes of `old` onto `new`. Returns the
/// error code to return (already raised) on failure.
///
/// # Safety
/// Both are live datatypes.
pub unsafe fn type_dup_attrs(old: MPI_Datatype, new: MPI_Datatype) -> Result<(), c_int> {
    let (Some(o), Some(n)) = (dtype_id(old), dtype_id(new)) else {
        return Ok(());
    };
    copy_attrs(ObjKind::Type, old, o.get(), new, n.get())
        .map_err(|f| report(f, MPI_COMM_WORLD, "MPI_Type_dup"))
}

/// For MPI_Type_free (datatype chapter): run the delete callbacks of the type's attributes.
/// Returns the error code to return (already raised) on failure; the type must then not be
/// freed.
///
/// # Safety
/// `t` is a live datatype.
pub unsafe fn type_free_attrs(t: MPI_Datatype) -> Result<(), c_int> {
    let Some(id) = dtype_id(t) else { return Ok(()) };
    if !with(|e| e.attrs.has_any(ObjKind::Type, id.get())).unwrap_or(false) {
        return Ok(());
    }
    delete_attrs(ObjKind::Type, t, id.get()).map_err(|f| report(f, MPI_COMM_WORLD, "MPI_Type_free"))
}

/// For MPI_Comm_free: run the delete callbacks of the communicator's attributes.
///
/// # Safety
/// `id` is a live communicator.
pub unsafe fn comm_free_attrs(id: CommId) -> Result<(), Failure> {
    if !with(|e| e.attrs.has_any(ObjKind::Comm, id.get()))? {
        return Ok(());
    }
    delete_attrs(ObjKind::Comm, comm_handle(id), id.get())
}

// ---------------------------------------------------------------------------------------------
// Windows (the predefined window attributes come from the one-sided chapter, `crate::rma`)

/// # Safety
/// `attribute_val` receives a pointer; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_get_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let obj = crate::rma::win_obj(win)?;
        if let Some(p) = crate::rma::predefined_attr(obj, win_keyval)? {
            nonnull(flag, "flag")?;
            nonnull(attribute_val, "attribute_val")?;
            *(attribute_val as *mut *mut c_void) = p;
            *flag = 1;
            return Ok(());
        }
        get_attr(ObjKind::Win, obj, win_keyval, attribute_val, flag)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => crate::rma::raise_win(win, e, "MPI_Win_get_attr"),
    }
}

/// # Safety
/// `attribute_val` is stored, not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_set_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = (|| {
        let obj = crate::rma::win_obj(win)?;
        set_attr(ObjKind::Win, win, obj, win_keyval, attribute_val)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(Failure::Mpi(e)) => crate::rma::raise_win(win, e, "MPI_Win_set_attr"),
        Err(f) => report(f, MPI_COMM_WORLD, "MPI_Win_set_attr"),
    }
}

/// # Safety
/// Plain handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Win_delete_attr(win: MPI_Win, win_keyval: c_int) -> c_int {
    let r = (|| {
        let obj = crate::rma::win_obj(win)?;
        delete_attr(ObjKind::Win, win, obj, win_keyval)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(Failure::Mpi(e)) => crate::rma::raise_win(win, e, "MPI_Win_delete_attr"),
        Err(f) => report(f, MPI_COMM_WORLD, "MPI_Win_delete_attr"),
    }
}
