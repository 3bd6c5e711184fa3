//! Datatypes (MPI-4.0 chapter 5, and external32 from section 13.5.2): queries, constructors
//! (with their large-count `_c` forms and the removed MPI-1 names still in the ABI), decoding
//! (envelope/contents), names, Pack/Unpack and Pack_external, addresses.
//!
//! Errors not tied to a communicator are raised on MPI_COMM_WORLD, as MPICH does.

use protean_core::ids::DtypeId;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex};

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::{dtype_handle, dtype_id};
use crate::util::{copy_cstr, object_name, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::datatype::{predefined_index, Combiner, Datatype, Distrib};
use protean_core::mpi::engine::Engine;
use protean_core::mpi::global::with;

type Res<T> = Result<T, MpiError>;

fn invalid_type() -> MpiError {
    bad(
        ErrorClass::Type,
        "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
    )
}

/// Run `f` on the datatype behind `h`, or raise on MPI_COMM_WORLD.
fn with_type<R>(h: MPI_Datatype, func: &str, f: impl FnOnce(&Datatype) -> R) -> Result<R, c_int> {
    let Some(id) = dtype_id(h) else {
        return Err(raise(MPI_COMM_WORLD, invalid_type(), func));
    };
    match with(|e| e.dtype(id).map(|d| f(d))) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) | Err(e) => Err(raise(MPI_COMM_WORLD, e, func)),
    }
}

/// The datatype behind `h` (a counted reference: usable outside the engine).
fn get_type(h: MPI_Datatype) -> Res<Arc<Datatype>> {
    let id = dtype_id(h).ok_or_else(invalid_type)?;
    with(|e| e.dtype(id).cloned())?
}

fn too_large(v: impl std::fmt::Display, func: &str) -> c_int {
    raise(
        MPI_COMM_WORLD,
        MpiError::new(
            ErrorClass::ValueTooLarge,
            format!("{v} does not fit in an int (use the _c or _x form)"),
        ),
        func,
    )
}

/// Write a result through an out pointer, or raise the error.
unsafe fn put<T>(r: Res<T>, p: *mut T, func: &str) -> c_int {
    match r {
        Ok(v) => {
            if p.is_null() {
                return raise(
                    MPI_COMM_WORLD,
                    bad(ErrorClass::Arg, "null output pointer"),
                    func,
                );
            }
            p.write(v);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

// -------------------------------------------------------------------------------------------
// Size and bounds

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    match with_type(datatype, "MPI_Type_size", |d| d.size) {
        Ok(s) if s <= c_int::MAX as usize => put(Ok(s as c_int), size, "MPI_Type_size"),
        // MPI-4.0 5.1.5: MPI_UNDEFINED when the size does not fit.
        Ok(_) => put(Ok(MPI_UNDEFINED), size, "MPI_Type_size"),
        Err(rc) => rc,
    }
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_size_x(
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    match with_type(datatype, "MPI_Type_size_x", |d| d.size) {
        Ok(s) => put(Ok(s as MPI_Count), size, "MPI_Type_size_x"),
        Err(rc) => rc,
    }
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_size_c(
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    match with_type(datatype, "MPI_Type_size_c", |d| d.size) {
        Ok(s) => put(Ok(s as MPI_Count), size, "MPI_Type_size_c"),
        Err(rc) => rc,
    }
}

/// Lower bound and extent (or true lower bound and true extent) of a type, for every form of
/// MPI_Type_get_(true_)extent (MPI_Aint and MPI_Count are both `long`).
unsafe fn bounds(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
    true_bounds: bool,
    func: &str,
) -> c_int {
    if lb.is_null() || extent.is_null() {
        let which = if lb.is_null() { "lb" } else { "extent" };
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, format!("null {which} pointer")),
            func,
        );
    }
    let r = with_type(datatype, func, |d| {
        if true_bounds {
            (d.true_lb, d.true_extent())
        } else {
            (d.lb, d.extent())
        }
    });
    match r {
        Ok((l, x)) => {
            out(lb, l as MPI_Aint);
            out(extent, x as MPI_Aint);
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

/// # Safety
/// `lb` and `extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    bounds(datatype, lb, extent, false, "MPI_Type_get_extent")
}

/// # Safety
/// `lb` and `extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_extent_x(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    bounds(datatype, lb, extent, false, "MPI_Type_get_extent_x")
}

/// # Safety
/// `lb` and `extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_extent_c(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    bounds(datatype, lb, extent, false, "MPI_Type_get_extent_c")
}

/// # Safety
/// `true_lb` and `true_extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    bounds(
        datatype,
        true_lb,
        true_extent,
        true,
        "MPI_Type_get_true_extent",
    )
}

/// # Safety
/// `true_lb` and `true_extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_true_extent_x(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    bounds(
        datatype,
        true_lb,
        true_extent,
        true,
        "MPI_Type_get_true_extent_x",
    )
}

/// # Safety
/// `true_lb` and `true_extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_true_extent_c(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    bounds(
        datatype,
        true_lb,
        true_extent,
        true,
        "MPI_Type_get_true_extent_c",
    )
}

/// MPI-1 names removed in MPI-3 but still in the ABI.
///
/// # Safety
/// `extent` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_extent(
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    bounds(
        datatype,
        std::ptr::null_mut(),
        extent,
        false,
        "MPI_Type_extent",
    )
}

/// # Safety
/// `displacement` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_lb(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    match with_type(datatype, "MPI_Type_lb", |d| d.lb as MPI_Aint) {
        Ok(v) => put(Ok(v), displacement, "MPI_Type_lb"),
        Err(rc) => rc,
    }
}

/// # Safety
/// `displacement` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_ub(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    match with_type(datatype, "MPI_Type_ub", |d| d.ub as MPI_Aint) {
        Ok(v) => put(Ok(v), displacement, "MPI_Type_ub"),
        Err(rc) => rc,
    }
}

// -------------------------------------------------------------------------------------------
// Names

/// # Safety
/// `type_name` has room for MPI_MAX_OBJECT_NAME chars; `resultlen` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    if type_name.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null name buffer"),
            "MPI_Type_get_name",
        );
    }
    let name = if datatype == MPI_DATATYPE_NULL {
        Ok("MPI_DATATYPE_NULL".to_string())
    } else {
        with_type(datatype, "MPI_Type_get_name", |d| d.name.clone())
    };
    match name {
        Ok(n) => {
            let len = copy_cstr(&n, type_name, MPI_MAX_OBJECT_NAME as usize);
            out(resultlen, len as c_int);
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

/// # Safety
/// `type_name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_set_name(
    datatype: MPI_Datatype,
    type_name: *const c_char,
) -> c_int {
    const F: &str = "MPI_Type_set_name";
    let name = match object_name(type_name) {
        Ok(n) => n,
        Err(e) => return raise(MPI_COMM_WORLD, e, F),
    };
    let r = with(|e| -> Res<()> {
        let id = dtype_id(datatype).ok_or_else(invalid_type)?;
        let slot = e
            .dtypes
            .get_mut(id.idx())
            .and_then(|d| d.as_mut())
            .ok_or_else(invalid_type)?;
        Arc::make_mut(slot).name = name;
        Ok(())
    });
    crate::errors::ret(r.and_then(|x| x), MPI_COMM_WORLD, F)
}

// -------------------------------------------------------------------------------------------
// Constructors

/// Defines a constructor and its `_c` twin (MPI_Count arguments) from one body. The body sees
/// the arguments under the same names in both functions (integers go to the shared helper
/// with `.into()`, arrays as generic pointers), `large` (false, then true: the arguments are
/// recorded as a `_c` constructor's) and `func` (the MPI name, for errors).
macro_rules! twins {
    ($name:ident, $name_c:ident, ($($a:ident: $t:ty),* $(,)?), ($($ac:ident: $tc:ty),* $(,)?),
     |$large:ident, $func:ident| $body:expr) => {
        /// # Safety
        /// Arguments as the MPI standard requires: arrays hold the entries the counts name,
        /// `newtype` is writable.
        #[no_mangle]
        // The body widens every integer argument with `.into()`; some are wide already.
        #[allow(clippy::useless_conversion)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            let $large = false;
            let $func = &stringify!($name)["protean_".len()..];
            $body
        }

        /// # Safety
        /// As for the function without `_c`.
        #[no_mangle]
        #[allow(clippy::useless_conversion)]
        pub unsafe extern "C" fn $name_c($($ac: $tc),*) -> c_int {
            let $large = true;
            let $func = &stringify!($name_c)["protean_".len()..];
            $body
        }
    };
}

/// Build a type from the engine's types and store it; write its handle to `newtype`. With
/// `large`, the arguments are recorded as a `_c` constructor's.
unsafe fn construct(
    newtype: *mut MPI_Datatype,
    func: &str,
    large: bool,
    build: impl FnOnce(&Engine) -> Res<Datatype>,
) -> c_int {
    if newtype.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null newtype pointer"),
            func,
        );
    }
    let r = with(|e| -> Res<DtypeId> {
        let mut d = build(e)?;
        if large {
            let c = d.combiner;
            d.contents.make_large(c);
        }
        Ok(e.add_dtype(d))
    });
    match r {
        Ok(Ok(id)) => {
            *newtype = dtype_handle(id);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

fn old(e: &Engine, h: MPI_Datatype) -> Res<(Arc<Datatype>, DtypeId)> {
    let id = dtype_id(h).ok_or_else(invalid_type)?;
    Ok((e.dtype(id)?.clone(), id))
}

fn nonneg(v: i64, what: &str) -> Res<usize> {
    usize::try_from(v).map_err(|_| bad(ErrorClass::Count, format!("negative {what} {v}")))
}

fn nonneg_all(v: &[i64], what: &str) -> Res<Vec<usize>> {
    v.iter().map(|x| nonneg(*x, what)).collect()
}

fn aint(v: i64) -> isize {
    v as isize
}

/// Read `n` values from a C array as i64 (null allowed when n is 0).
unsafe fn arr<T: Copy + Into<i64>>(p: *const T, n: usize, what: &str) -> Res<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(bad(ErrorClass::Arg, format!("null {what} array")));
    }
    Ok(std::slice::from_raw_parts(p, n)
        .iter()
        .map(|x| (*x).into())
        .collect())
}

unsafe fn contiguous(
    count: i64,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        Datatype::contiguous(nonneg(count, "count")?, &t, id)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn vector(
    count: i64,
    blocklength: i64,
    stride: i64,
    bytes: bool,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        Datatype::vector(
            nonneg(count, "count")?,
            nonneg(blocklength, "blocklength")?,
            aint(stride),
            bytes,
            &t,
            id,
        )
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn indexed<B: Copy + Into<i64>, D: Copy + Into<i64>>(
    count: i64,
    blocklengths: *const B,
    displacements: *const D,
    bytes: bool,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let bl = nonneg_all(&arr(blocklengths, n, "blocklength")?, "blocklength")?;
        let d: Vec<isize> = arr(displacements, n, "displacement")?
            .into_iter()
            .map(aint)
            .collect();
        Datatype::indexed(&bl, &d, bytes, &t, id)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn indexed_block<D: Copy + Into<i64>>(
    count: i64,
    blocklength: i64,
    displacements: *const D,
    bytes: bool,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let d: Vec<isize> = arr(displacements, n, "displacement")?
            .into_iter()
            .map(aint)
            .collect();
        Datatype::indexed_block(nonneg(blocklength, "blocklength")?, &d, bytes, &t, id)
    })
}

unsafe fn structure<B: Copy + Into<i64>, D: Copy + Into<i64>>(
    count: i64,
    blocklengths: *const B,
    displacements: *const D,
    types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let n = nonneg(count, "count")?;
        let bl = nonneg_all(&arr(blocklengths, n, "blocklength")?, "blocklength")?;
        let d: Vec<isize> = arr(displacements, n, "displacement")?
            .into_iter()
            .map(aint)
            .collect();
        if n > 0 && types.is_null() {
            return Err(bad(ErrorClass::Arg, "null type array"));
        }
        let ts = (0..n)
            .map(|i| old(e, *types.add(i)))
            .collect::<Res<Vec<_>>>()?;
        Datatype::structure(&bl, &d, &ts)
    })
}

twins!(protean_MPI_Type_contiguous, protean_MPI_Type_contiguous_c,
    (count: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| contiguous(count.into(), oldtype, newtype, large, func));

twins!(protean_MPI_Type_vector, protean_MPI_Type_vector_c,
    (count: c_int, blocklength: c_int, stride: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, blocklength: MPI_Count, stride: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| vector(count.into(), blocklength.into(), stride.into(), false, oldtype, newtype, large, func));

twins!(protean_MPI_Type_create_hvector, protean_MPI_Type_create_hvector_c,
    (count: c_int, blocklength: c_int, stride: MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, blocklength: MPI_Count, stride: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| vector(count.into(), blocklength.into(), stride.into(), true, oldtype, newtype, large, func));

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    vector(
        count.into(),
        blocklength.into(),
        stride,
        true,
        oldtype,
        newtype,
        false,
        "MPI_Type_hvector",
    )
}

twins!(protean_MPI_Type_indexed, protean_MPI_Type_indexed_c,
    (count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| indexed(count.into(), array_of_blocklengths, array_of_displacements, false, oldtype, newtype, large, func));

twins!(protean_MPI_Type_create_hindexed, protean_MPI_Type_create_hindexed_c,
    (count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| indexed(count.into(), array_of_blocklengths, array_of_displacements, true, oldtype, newtype, large, func));

/// # Safety
/// The arrays hold `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_hindexed(
    count: c_int,
    array_of_blocklengths: *mut c_int,
    array_of_displacements: *mut MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    indexed(
        count.into(),
        array_of_blocklengths.cast_const(),
        array_of_displacements.cast_const(),
        true,
        oldtype,
        newtype,
        false,
        "MPI_Type_hindexed",
    )
}

twins!(protean_MPI_Type_create_indexed_block, protean_MPI_Type_create_indexed_block_c,
    (count: c_int, blocklength: c_int, array_of_displacements: *const c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, blocklength: MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| indexed_block(count.into(), blocklength.into(), array_of_displacements, false, oldtype, newtype, large, func));

twins!(protean_MPI_Type_create_hindexed_block, protean_MPI_Type_create_hindexed_block_c,
    (count: c_int, blocklength: c_int, array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, blocklength: MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| indexed_block(count.into(), blocklength.into(), array_of_displacements, true, oldtype, newtype, large, func));

twins!(protean_MPI_Type_create_struct, protean_MPI_Type_create_struct_c,
    (count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype),
    (count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| structure(count.into(), array_of_blocklengths, array_of_displacements, array_of_types, newtype, large, func));

/// # Safety
/// The arrays hold `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_struct(
    count: c_int,
    array_of_blocklengths: *mut c_int,
    array_of_displacements: *mut MPI_Aint,
    array_of_types: *mut MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    structure(
        count.into(),
        array_of_blocklengths.cast_const(),
        array_of_displacements.cast_const(),
        array_of_types.cast_const(),
        newtype,
        false,
        "MPI_Type_struct",
    )
}

twins!(protean_MPI_Type_create_resized, protean_MPI_Type_create_resized_c,
(oldtype: MPI_Datatype, lb: MPI_Aint, extent: MPI_Aint, newtype: *mut MPI_Datatype),
(oldtype: MPI_Datatype, lb: MPI_Count, extent: MPI_Count, newtype: *mut MPI_Datatype),
|large, func| construct(newtype, func, large, |e| {
    let (t, id) = old(e, oldtype)?;
    Datatype::resized(&t, lb as isize, extent as isize, id)
}));

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_dup(
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    let rc = construct(newtype, "MPI_Type_dup", false, |e| {
        let (t, id) = old(e, oldtype)?;
        Ok(Datatype::dup(&t, id))
    });
    if rc != MPI_SUCCESS {
        return rc;
    }
    // Attributes follow through their copy callbacks (outside the engine); if one fails the
    // new type is freed again.
    if let Err(code) = crate::attr::type_dup_attrs(oldtype, *newtype) {
        if let Some(id) = dtype_id(*newtype) {
            let _ = with(|e| e.free_dtype(id));
        }
        *newtype = MPI_DATATYPE_NULL;
        return code;
    }
    MPI_SUCCESS
}

fn order(o: c_int) -> Res<bool> {
    match o {
        MPI_ORDER_C => Ok(false),
        MPI_ORDER_FORTRAN => Ok(true),
        _ => Err(bad(
            ErrorClass::Arg,
            format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn subarray<C: Copy + Into<i64>>(
    ndims: c_int,
    sizes: *const C,
    subsizes: *const C,
    starts: *const C,
    ord: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        if ndims <= 0 {
            return Err(bad(
                ErrorClass::Arg,
                format!("ndims {ndims} (must be positive)"),
            ));
        }
        let n = ndims as usize;
        let (sz, sub, st) = (
            arr(sizes, n, "sizes")?,
            arr(subsizes, n, "subsizes")?,
            arr(starts, n, "starts")?,
        );
        let raw: Vec<i64> = std::iter::once(ndims as i64)
            .chain(sz.iter().copied())
            .chain(sub.iter().copied())
            .chain(st.iter().copied())
            .chain(std::iter::once(ord as i64))
            .collect();
        Datatype::subarray(
            &nonneg_all(&sz, "size")?,
            &nonneg_all(&sub, "subsize")?,
            &nonneg_all(&st, "start")?,
            order(ord)?,
            &t,
            id,
            raw,
        )
    })
}

twins!(protean_MPI_Type_create_subarray, protean_MPI_Type_create_subarray_c,
    (ndims: c_int, array_of_sizes: *const c_int, array_of_subsizes: *const c_int, array_of_starts: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (ndims: c_int, array_of_sizes: *const MPI_Count, array_of_subsizes: *const MPI_Count, array_of_starts: *const MPI_Count, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype, large, func));

#[allow(clippy::too_many_arguments)]
unsafe fn darray<G: Copy + Into<i64>>(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const G,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    ord: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    func: &str,
) -> c_int {
    construct(newtype, func, large, |e| {
        let (t, id) = old(e, oldtype)?;
        if ndims <= 0 {
            return Err(bad(
                ErrorClass::Arg,
                format!("ndims {ndims} (must be positive)"),
            ));
        }
        if size <= 0 || rank < 0 {
            return Err(bad(
                ErrorClass::Arg,
                format!("size {size} and rank {rank}: size must be positive, rank not negative"),
            ));
        }
        let n = ndims as usize;
        let g = arr(gsizes, n, "gsizes")?;
        let di = arr(distribs, n, "distribs")?;
        let da = arr(dargs, n, "dargs")?;
        let ps = arr(psizes, n, "psizes")?;
        let mut dist = Vec::with_capacity(n);
        for i in 0..n {
            let darg = match da[i] {
                x if x == MPI_DISTRIBUTE_DFLT_DARG as i64 => None,
                x if x > 0 => Some(x as usize),
                x => {
                    return Err(bad(
                        ErrorClass::Arg,
                        format!("dimension {i}: distribution argument {x} (must be positive or MPI_DISTRIBUTE_DFLT_DARG)"),
                    ))
                }
            };
            dist.push(match di[i] as c_int {
                MPI_DISTRIBUTE_BLOCK => Distrib::Block(darg),
                MPI_DISTRIBUTE_CYCLIC => Distrib::Cyclic(darg),
                MPI_DISTRIBUTE_NONE => Distrib::None,
                x => {
                    return Err(bad(
                        ErrorClass::Arg,
                        format!("dimension {i}: distribution {x} is not MPI_DISTRIBUTE_BLOCK, _CYCLIC or _NONE"),
                    ))
                }
            });
        }
        let raw: Vec<i64> = [size as i64, rank as i64, ndims as i64]
            .into_iter()
            .chain(g.iter().copied())
            .chain(di.iter().copied())
            .chain(da.iter().copied())
            .chain(ps.iter().copied())
            .chain(std::iter::once(ord as i64))
            .collect();
        Datatype::darray(
            size as usize,
            rank as usize,
            &nonneg_all(&g, "gsize")?,
            &dist,
            &nonneg_all(&ps, "psize")?,
            order(ord)?,
            &t,
            id,
            raw,
        )
    })
}

twins!(protean_MPI_Type_create_darray, protean_MPI_Type_create_darray_c,
    (size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const c_int, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    (size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const MPI_Count, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype),
    |large, func| darray(size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes, order, oldtype, newtype, large, func));

// -------------------------------------------------------------------------------------------
// Fortran 90 parameterized types and MPI_Type_match_size

/// The f90 types made so far: (combiner, p, r) -> handle. The standard requires the same
/// handle for the same arguments, and the types are never freed.
static F90: Mutex<Vec<(F90Key, MPI_Datatype)>> = Mutex::new(Vec::new());

/// (combiner, precision, range) of an f90 type.
type F90Key = (Combiner, c_int, c_int);

unsafe fn f90(
    combiner: Combiner,
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
    func: &str,
) -> c_int {
    let undef = |v: c_int| v == MPI_UNDEFINED;
    // The kinds Protean's Fortran types offer: IEEE single and double (no quad precision).
    let base = match combiner {
        Combiner::F90Integer => match r {
            _ if undef(r) => Some("MPI_INTEGER4"),
            0..=2 => Some("MPI_INTEGER1"),
            3..=4 => Some("MPI_INTEGER2"),
            5..=9 => Some("MPI_INTEGER4"),
            10..=18 => Some("MPI_INTEGER8"),
            _ => None,
        },
        _ => {
            let single = (undef(p) || p <= 6) && (undef(r) || r <= 37);
            let double = (undef(p) || p <= 15) && (undef(r) || r <= 307);
            let cplx = combiner == Combiner::F90Complex;
            if (undef(p) && undef(r)) || p < 0 && !undef(p) || r < 0 && !undef(r) {
                None
            } else if single {
                Some(if cplx { "MPI_COMPLEX8" } else { "MPI_REAL4" })
            } else if double {
                Some(if cplx { "MPI_COMPLEX16" } else { "MPI_REAL8" })
            } else {
                None
            }
        }
    };
    let Some(base) = base else {
        let what = if combiner == Combiner::F90Integer {
            format!("range {r}")
        } else {
            format!("precision {p} and range {r}")
        };
        return raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("no Fortran kind with {what} (Protean offers integers up to range 18 and reals up to 15 digits, range 307; at least one of precision and range must be given)"),
            ),
            func,
        );
    };
    if newtype.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null newtype pointer"),
            func,
        );
    }
    let key = (combiner, p, r);
    let mut cache = F90.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, h)) = cache.iter().find(|(k, _)| *k == key) {
        *newtype = *h;
        return MPI_SUCCESS;
    }
    let ints = if combiner == Combiner::F90Integer {
        vec![r as i64]
    } else {
        vec![p as i64, r as i64]
    };
    let bid = DtypeId::from_idx(predefined_index(base).expect("predefined"));
    let r = with(|e| -> Res<DtypeId> {
        let b = e.dtype(bid)?.clone();
        Ok(e.add_dtype(Datatype::f90(combiner, &b, ints)))
    });
    match r {
        Ok(Ok(id)) => {
            let h = dtype_handle(id);
            cache.push((key, h));
            *newtype = h;
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_f90_real(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    f90(Combiner::F90Real, p, r, newtype, "MPI_Type_create_f90_real")
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_f90_complex(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    f90(
        Combiner::F90Complex,
        p,
        r,
        newtype,
        "MPI_Type_create_f90_complex",
    )
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_f90_integer(
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    f90(
        Combiner::F90Integer,
        MPI_UNDEFINED,
        r,
        newtype,
        "MPI_Type_create_f90_integer",
    )
}

/// # Safety
/// `datatype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut MPI_Datatype,
) -> c_int {
    const F: &str = "MPI_Type_match_size";
    // The Fortran types of each class, as MPICH answers.
    let found = match (typeclass, size) {
        (MPI_TYPECLASS_REAL, 4) => Some(MPI_REAL4),
        (MPI_TYPECLASS_REAL, 8) => Some(MPI_REAL8),
        (MPI_TYPECLASS_REAL, 16) => Some(MPI_REAL16),
        (MPI_TYPECLASS_INTEGER, 1) => Some(MPI_INTEGER1),
        (MPI_TYPECLASS_INTEGER, 2) => Some(MPI_INTEGER2),
        (MPI_TYPECLASS_INTEGER, 4) => Some(MPI_INTEGER4),
        (MPI_TYPECLASS_INTEGER, 8) => Some(MPI_INTEGER8),
        (MPI_TYPECLASS_COMPLEX, 8) => Some(MPI_COMPLEX8),
        (MPI_TYPECLASS_COMPLEX, 16) => Some(MPI_COMPLEX16),
        (MPI_TYPECLASS_COMPLEX, 32) => Some(MPI_COMPLEX32),
        (MPI_TYPECLASS_REAL | MPI_TYPECLASS_INTEGER | MPI_TYPECLASS_COMPLEX, _) => None,
        _ => {
            return raise(
                MPI_COMM_WORLD,
                bad(
                    ErrorClass::Arg,
                    format!(
                        "type class {typeclass} is not MPI_TYPECLASS_REAL, _INTEGER or _COMPLEX"
                    ),
                ),
                F,
            )
        }
    };
    match found {
        Some(h) => put(Ok(h), datatype, F),
        None => raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Arg,
                format!("no predefined type of class {typeclass} has {size} bytes"),
            ),
            F,
        ),
    }
}

// -------------------------------------------------------------------------------------------
// Decoding

fn combiner_code(c: Combiner) -> c_int {
    match c {
        Combiner::Named => MPI_COMBINER_NAMED,
        Combiner::Dup => MPI_COMBINER_DUP,
        Combiner::Contiguous => MPI_COMBINER_CONTIGUOUS,
        Combiner::Vector => MPI_COMBINER_VECTOR,
        Combiner::Hvector => MPI_COMBINER_HVECTOR,
        Combiner::Indexed => MPI_COMBINER_INDEXED,
        Combiner::Hindexed => MPI_COMBINER_HINDEXED,
        Combiner::IndexedBlock => MPI_COMBINER_INDEXED_BLOCK,
        Combiner::HindexedBlock => MPI_COMBINER_HINDEXED_BLOCK,
        Combiner::Struct => MPI_COMBINER_STRUCT,
        Combiner::Subarray => MPI_COMBINER_SUBARRAY,
        Combiner::Darray => MPI_COMBINER_DARRAY,
        Combiner::Resized => MPI_COMBINER_RESIZED,
        Combiner::F90Real => MPI_COMBINER_F90_REAL,
        Combiner::F90Complex => MPI_COMBINER_F90_COMPLEX,
        Combiner::F90Integer => MPI_COMBINER_F90_INTEGER,
    }
}

/// (ints, aints, counts, types, combiner, built by a `_c` constructor)
fn envelope(h: MPI_Datatype) -> Res<(usize, usize, usize, usize, c_int, bool)> {
    let d = get_type(h)?;
    let c = &d.contents;
    Ok((
        c.ints.len(),
        c.aints.len(),
        c.counts.len(),
        c.types.len(),
        combiner_code(d.combiner),
        c.large,
    ))
}

/// # Safety
/// The out pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_envelope(
    datatype: MPI_Datatype,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    const F: &str = "MPI_Type_get_envelope";
    match envelope(datatype) {
        Ok((_, _, _, _, _, true)) => raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Type,
                "the type was built by a large-count constructor: use MPI_Type_get_envelope_c",
            ),
            F,
        ),
        Ok((ni, na, _, nd, c, false)) => {
            out(num_integers, ni as c_int);
            out(num_addresses, na as c_int);
            out(num_datatypes, nd as c_int);
            put(Ok(c), combiner, F)
        }
        Err(e) => raise(MPI_COMM_WORLD, e, F),
    }
}

/// # Safety
/// The out pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_envelope_c(
    datatype: MPI_Datatype,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    const F: &str = "MPI_Type_get_envelope_c";
    match envelope(datatype) {
        Ok((ni, na, nc, nd, c, _)) => {
            out(num_integers, ni as MPI_Count);
            out(num_addresses, na as MPI_Count);
            out(num_large_counts, nc as MPI_Count);
            out(num_datatypes, nd as MPI_Count);
            put(Ok(c), combiner, F)
        }
        Err(e) => raise(MPI_COMM_WORLD, e, F),
    }
}

/// Write a type's contents into the caller's arrays; `counts` is None for the non-`_c` form.
#[allow(clippy::too_many_arguments)]
unsafe fn contents(
    datatype: MPI_Datatype,
    max: [i64; 4],
    ints: *mut c_int,
    aints: *mut MPI_Aint,
    counts: Option<*mut MPI_Count>,
    types: *mut MPI_Datatype,
    func: &str,
) -> c_int {
    let r = with(|e| -> Res<()> {
        let id = dtype_id(datatype).ok_or_else(invalid_type)?;
        let d = e.dtype(id)?.clone();
        if d.combiner == Combiner::Named {
            return Err(bad(
                ErrorClass::Arg,
                "a named (predefined) type has no contents (its combiner is MPI_COMBINER_NAMED)",
            ));
        }
        let c = &d.contents;
        if c.large && counts.is_none() {
            return Err(bad(
                ErrorClass::Type,
                "the type was built by a large-count constructor: use MPI_Type_get_contents_c",
            ));
        }
        let need = [c.ints.len(), c.aints.len(), c.counts.len(), c.types.len()];
        let names = ["integers", "addresses", "large counts", "datatypes"];
        for k in 0..4 {
            if (max[k] as i128) < need[k] as i128 {
                return Err(bad(
                    ErrorClass::Arg,
                    format!(
                        "room for {} {} but the type has {} (see MPI_Type_get_envelope)",
                        max[k], names[k], need[k]
                    ),
                ));
            }
        }
        let ptrs_ok = (need[0] == 0 || !ints.is_null())
            && (need[1] == 0 || !aints.is_null())
            && (need[2] == 0 || counts.is_some_and(|p| !p.is_null()))
            && (need[3] == 0 || !types.is_null());
        if !ptrs_ok {
            return Err(bad(ErrorClass::Arg, "null output array"));
        }
        for (i, v) in c.ints.iter().enumerate() {
            *ints.add(i) = *v as c_int;
        }
        for (i, v) in c.aints.iter().enumerate() {
            *aints.add(i) = *v as MPI_Aint;
        }
        if let Some(p) = counts {
            for (i, v) in c.counts.iter().enumerate() {
                *p.add(i) = *v as MPI_Count;
            }
        }
        for (i, (tid, t)) in c.types.iter().enumerate() {
            // Predefined types are returned as themselves; derived ones as new handles the
            // caller frees (MPI-4.0 5.1.13).
            let h = if t.predefined {
                dtype_handle(*tid)
            } else {
                let mut copy = (**t).clone();
                copy.committed = true;
                dtype_handle(e.add_dtype(copy))
            };
            *types.add(i) = h;
        }
        Ok(())
    });
    crate::errors::ret(r.and_then(|x| x), MPI_COMM_WORLD, func)
}

/// # Safety
/// The arrays have room for the given numbers of entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_contents(
    datatype: MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    contents(
        datatype,
        [
            max_integers as i64,
            max_addresses as i64,
            0,
            max_datatypes as i64,
        ],
        array_of_integers,
        array_of_addresses,
        None,
        array_of_datatypes,
        "MPI_Type_get_contents",
    )
}

/// # Safety
/// The arrays have room for the given numbers of entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_contents_c(
    datatype: MPI_Datatype,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    contents(
        datatype,
        [max_integers, max_addresses, max_large_counts, max_datatypes],
        array_of_integers,
        array_of_addresses,
        Some(array_of_large_counts),
        array_of_datatypes,
        "MPI_Type_get_contents_c",
    )
}

// -------------------------------------------------------------------------------------------
// Commit and free

/// # Safety
/// `datatype` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    if datatype.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "null datatype pointer"),
            "MPI_Type_commit",
        );
    }
    let h = *datatype;
    // Delete callbacks of the type's attributes run first (outside the engine); if one fails
    // the type is not freed.
    let user_type = with(|e| {
        dtype_id(h)
            .and_then(|id| e.dtype(id).ok())
            .is_some_and(|d| !d.predefined)
    });
    if user_type.unwrap_or(false) {
        if let Err(code) = crate::attr::type_free_attrs(h) {
            return code;
        }
    }
    let r = with(|e| -> Res<()> {
        let id = dtype_id(h).ok_or_else(invalid_type)?;
        let slot = e
            .dtypes
            .get_mut(id.idx())
            .and_then(|d| d.as_mut())
            .ok_or_else(invalid_type)?;
        if !slot.committed {
            Arc::make_mut(slot).committed = true;
        }
        Ok(())
    });
    crate::errors::ret(r.and_then(|x| x), MPI_COMM_WORLD, "MPI_Type_commit")
}

/// # Safety
/// `datatype` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    if datatype.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "null datatype pointer"),
            "MPI_Type_free",
        );
    }
    let h = *datatype;
    // Delete callbacks of the type's attributes run first (outside the engine); if one fails
    // the type is not freed.
    let user_type = with(|e| {
        dtype_id(h)
            .and_then(|id| e.dtype(id).ok())
            .is_some_and(|d| !d.predefined)
    });
    if user_type.unwrap_or(false) {
        if let Err(code) = crate::attr::type_free_attrs(h) {
            return code;
        }
    }
    let r = with(|e| -> Res<()> {
        let id = dtype_id(h).ok_or_else(invalid_type)?;
        let d = e.dtype(id)?;
        if d.predefined {
            let name = if d.name.is_empty() {
                "a Fortran 90 parameterized type".to_string()
            } else {
                d.name.clone()
            };
            return Err(bad(
                ErrorClass::Type,
                format!("{name} is predefined and cannot be freed"),
            ));
        }
        // Operations in flight and types built from this one keep their own reference.
        e.free_dtype(id)
    });
    match r {
        Ok(Ok(())) => {
            *datatype = MPI_DATATYPE_NULL;
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Type_free"),
    }
}

// -------------------------------------------------------------------------------------------
// Addresses

/// # Safety
/// `address` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_address(
    location: *const c_void,
    address: *mut MPI_Aint,
) -> c_int {
    put(Ok(location as MPI_Aint), address, "MPI_Get_address")
}

/// # Safety
/// `address` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Address(
    location: *mut c_void,
    address: *mut MPI_Aint,
) -> c_int {
    put(Ok(location as MPI_Aint), address, "MPI_Address")
}

#[no_mangle]
pub extern "C" fn protean_MPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(disp)
}

#[no_mangle]
pub extern "C" fn protean_MPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    addr1.wrapping_sub(addr2)
}

// -------------------------------------------------------------------------------------------
// Pack / Unpack

/// The arguments every pack and unpack form shares, checked: count, the packed position and
/// the packed buffer's size. Returns (count, position).
fn check_pack_args(count: i64, size: i64, position: *const MPI_Aint) -> Res<(usize, i64)> {
    if position.is_null() {
        return Err(bad(ErrorClass::Arg, "null position pointer"));
    }
    if count < 0 {
        return Err(bad(ErrorClass::Count, format!("negative count {count}")));
    }
    if size < 0 {
        return Err(bad(ErrorClass::Arg, format!("negative buffer size {size}")));
    }
    // SAFETY: checked non-null; the caller passes a valid position.
    let pos = unsafe { *position };
    if pos < 0 {
        return Err(bad(ErrorClass::Arg, format!("negative position {pos}")));
    }
    Ok((count as usize, pos))
}

/// Shared body of MPI_Pack (native) and MPI_Pack_external (`ext32`).
#[allow(clippy::too_many_arguments)]
unsafe fn pack(
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut MPI_Aint,
    ext32: bool,
    func: &str,
) -> c_int {
    let r = (|| -> Res<()> {
        let (count, pos) = check_pack_args(incount, outsize, position)?;
        let d = get_type(datatype)?;
        if !d.committed {
            return Err(bad(
                ErrorClass::Type,
                "the datatype has not been committed (call MPI_Type_commit)",
            ));
        }
        let n = if ext32 {
            d.ext32_size(count)
        } else {
            d.packed_size(count)
        }
        .ok_or_else(|| bad(ErrorClass::Count, "count overflows the packed size"))?;
        if pos as i128 + n as i128 > outsize as i128 {
            return Err(bad(
                ErrorClass::Truncate,
                format!("{n} packed bytes at position {pos} do not fit in an output buffer of {outsize} bytes"),
            ));
        }
        if n > 0 && outbuf.is_null() {
            return Err(bad(ErrorClass::Buffer, "null output buffer"));
        }
        if n > 0 && inbuf.is_null() && d.predefined {
            return Err(bad(ErrorClass::Buffer, "null input buffer"));
        }
        if n > 0 {
            let dst = (outbuf as *mut u8).add(pos as usize);
            if ext32 {
                d.pack_external(inbuf.cast(), count, std::slice::from_raw_parts_mut(dst, n));
            } else {
                d.pack_to(inbuf.cast(), count, dst);
            }
        }
        *position = pos + n as MPI_Aint;
        Ok(())
    })();
    crate::errors::ret(r, MPI_COMM_WORLD, func)
}

/// Shared body of MPI_Unpack (native) and MPI_Unpack_external (`ext32`).
#[allow(clippy::too_many_arguments)]
unsafe fn unpack(
    inbuf: *const c_void,
    insize: i64,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
    ext32: bool,
    func: &str,
) -> c_int {
    let r = (|| -> Res<()> {
        let (count, pos) = check_pack_args(outcount, insize, position)?;
        let d = get_type(datatype)?;
        if !d.committed {
            return Err(bad(
                ErrorClass::Type,
                "the datatype has not been committed (call MPI_Type_commit)",
            ));
        }
        let n = if ext32 {
            d.ext32_size(count)
        } else {
            d.packed_size(count)
        }
        .ok_or_else(|| bad(ErrorClass::Count, "count overflows the packed size"))?;
        if pos as i128 + n as i128 > insize as i128 {
            return Err(bad(
                ErrorClass::Truncate,
                format!("unpacking {n} bytes at position {pos} reads past the end of a {insize}-byte input buffer"),
            ));
        }
        if n > 0 && inbuf.is_null() {
            return Err(bad(ErrorClass::Buffer, "null input buffer"));
        }
        if n > 0 && outbuf.is_null() && d.predefined {
            return Err(bad(ErrorClass::Buffer, "null output buffer"));
        }
        if n > 0 {
            let data = std::slice::from_raw_parts((inbuf as *const u8).add(pos as usize), n);
            if ext32 {
                d.unpack_external(data, outbuf.cast(), count);
            } else {
                d.unpack(data, outbuf.cast(), count);
            }
        }
        *position = pos + n as MPI_Aint;
        Ok(())
    })();
    crate::errors::ret(r, MPI_COMM_WORLD, func)
}

/// # Safety
/// Buffers as MPI_Pack requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: MPI_Comm,
) -> c_int {
    let _ = comm;
    if position.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null position"),
            "MPI_Pack",
        );
    }
    let mut p = *position as MPI_Aint;
    let rc = pack(
        inbuf,
        incount as i64,
        datatype,
        outbuf,
        outsize as i64,
        &mut p,
        false,
        "MPI_Pack",
    );
    *position = p as c_int;
    rc
}

/// # Safety
/// Buffers as MPI_Pack requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: MPI_Comm,
) -> c_int {
    let _ = comm;
    pack(
        inbuf,
        incount,
        datatype,
        outbuf,
        outsize,
        position as *mut MPI_Aint,
        false,
        "MPI_Pack_c",
    )
}

/// # Safety
/// Buffers as MPI_Unpack requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let _ = comm;
    if position.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null position"),
            "MPI_Unpack",
        );
    }
    let mut p = *position as MPI_Aint;
    let rc = unpack(
        inbuf,
        insize as i64,
        &mut p,
        outbuf,
        outcount as i64,
        datatype,
        false,
        "MPI_Unpack",
    );
    *position = p as c_int;
    rc
}

/// # Safety
/// Buffers as MPI_Unpack requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let _ = comm;
    unpack(
        inbuf,
        insize,
        position as *mut MPI_Aint,
        outbuf,
        outcount,
        datatype,
        false,
        "MPI_Unpack_c",
    )
}

unsafe fn pack_size(incount: i64, datatype: MPI_Datatype, ext32: bool, func: &str) -> Res<usize> {
    if incount < 0 {
        return Err(bad(ErrorClass::Count, format!("negative count {incount}")));
    }
    let d = get_type(datatype)?;
    if ext32 {
        d.ext32_size(incount as usize)
    } else {
        d.packed_size(incount as usize)
    }
    .ok_or_else(|| {
        bad(
            ErrorClass::Count,
            format!("{func}: {incount} elements overflow the packed size"),
        )
    })
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_size(
    incount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut c_int,
) -> c_int {
    let _ = comm;
    match pack_size(incount as i64, datatype, false, "MPI_Pack_size") {
        Ok(s) if s <= c_int::MAX as usize => put(Ok(s as c_int), size, "MPI_Pack_size"),
        Ok(s) => too_large(s, "MPI_Pack_size"),
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Pack_size"),
    }
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut MPI_Count,
) -> c_int {
    let _ = comm;
    let r = pack_size(incount, datatype, false, "MPI_Pack_size_c").map(|s| s as MPI_Count);
    put(r, size, "MPI_Pack_size_c")
}

// -------------------------------------------------------------------------------------------
// external32

/// The data representation argument: only "external32" is defined for Pack_external.
unsafe fn check_datarep(datarep: *const c_char) -> Res<()> {
    if datarep.is_null() {
        return Err(bad(ErrorClass::Arg, "null data representation"));
    }
    let rep = CStr::from_ptr(datarep).to_string_lossy();
    if rep != "external32" {
        return Err(bad(
            ErrorClass::UnsupportedDatarep,
            format!("data representation \"{rep}\" (only \"external32\" is defined for packing)"),
        ));
    }
    Ok(())
}

/// # Safety
/// Buffers as MPI_Pack_external requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    if let Err(e) = check_datarep(datarep) {
        return raise(MPI_COMM_WORLD, e, "MPI_Pack_external");
    }
    pack(
        inbuf,
        incount as i64,
        datatype,
        outbuf,
        outsize,
        position,
        true,
        "MPI_Pack_external",
    )
}

/// # Safety
/// Buffers as MPI_Pack_external requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    if let Err(e) = check_datarep(datarep) {
        return raise(MPI_COMM_WORLD, e, "MPI_Pack_external_c");
    }
    pack(
        inbuf,
        incount,
        datatype,
        outbuf,
        outsize,
        position as *mut MPI_Aint,
        true,
        "MPI_Pack_external_c",
    )
}

/// # Safety
/// Buffers as MPI_Unpack_external requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    if let Err(e) = check_datarep(datarep) {
        return raise(MPI_COMM_WORLD, e, "MPI_Unpack_external");
    }
    unpack(
        inbuf,
        insize,
        position,
        outbuf,
        outcount as i64,
        datatype,
        true,
        "MPI_Unpack_external",
    )
}

/// # Safety
/// Buffers as MPI_Unpack_external requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    if let Err(e) = check_datarep(datarep) {
        return raise(MPI_COMM_WORLD, e, "MPI_Unpack_external_c");
    }
    unpack(
        inbuf,
        insize,
        position as *mut MPI_Aint,
        outbuf,
        outcount,
        datatype,
        true,
        "MPI_Unpack_external_c",
    )
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
) -> c_int {
    const F: &str = "MPI_Pack_external_size";
    let r = check_datarep(datarep)
        .and_then(|()| pack_size(incount as i64, datatype, true, F))
        .map(|s| s as MPI_Aint);
    put(r, size, F)
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    const F: &str = "MPI_Pack_external_size_c";
    let r = check_datarep(datarep)
        .and_then(|()| pack_size(incount, datatype, true, F))
        .map(|s| s as MPI_Count);
    put(r, size, F)
}
