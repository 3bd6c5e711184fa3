//! Datatype queries (MPI-4.0 chapter 5) that predefined types need; constructors and packing
//! come with the datatype chapter.

use std::ffi::{c_char, c_int};

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::dtype_id;
use crate::util::{copy_cstr, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::datatype::Datatype;
use protean_core::runtime::global::with;

/// Run `f` on the datatype behind `h`, or raise on MPI_COMM_WORLD.
fn with_type<R>(h: MPI_Datatype, func: &str, f: impl FnOnce(&Datatype) -> R) -> Result<R, c_int> {
    let Some(id) = dtype_id(h) else {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "invalid datatype"),
            func,
        ));
    };
    match with(|e| e.dtype(id).map(|d| f(d))) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) | Err(e) => Err(raise(MPI_COMM_WORLD, e, func)),
    }
}

fn too_large(v: usize, func: &str) -> c_int {
    raise(
        MPI_COMM_WORLD,
        MpiError::new(
            ErrorClass::ValueTooLarge,
            format!("{v} does not fit in an int (use the _c or _x form)"),
        ),
        func,
    )
}

/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    match with_type(datatype, "MPI_Type_size", |d| d.size) {
        Ok(s) if s <= c_int::MAX as usize => {
            out(size, s as c_int);
            MPI_SUCCESS
        }
        Ok(s) => too_large(s, "MPI_Type_size"),
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
        Ok(s) => {
            out(size, s as MPI_Count);
            MPI_SUCCESS
        }
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
    protean_MPI_Type_size_x(datatype, size)
}

/// # Safety
/// `lb` and `extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    match with_type(datatype, "MPI_Type_get_extent", |d| (d.lb, d.extent())) {
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
pub unsafe extern "C" fn protean_MPI_Type_get_extent_x(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    match with_type(datatype, "MPI_Type_get_extent_x", |d| (d.lb, d.extent())) {
        Ok((l, x)) => {
            out(lb, l as MPI_Count);
            out(extent, x as MPI_Count);
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

/// # Safety
/// `true_lb` and `true_extent` are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    match with_type(datatype, "MPI_Type_get_true_extent", |d| {
        (d.true_lb, d.true_extent())
    }) {
        Ok((l, x)) => {
            out(true_lb, l as MPI_Aint);
            out(true_extent, x as MPI_Aint);
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
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
    if incount < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Count, format!("negative count {incount}")),
            "MPI_Pack_size",
        );
    }
    match with_type(datatype, "MPI_Pack_size", |d| {
        d.packed_size(incount as usize)
    }) {
        Ok(Some(s)) if s <= c_int::MAX as usize => {
            out(size, s as c_int);
            MPI_SUCCESS
        }
        Ok(Some(s)) => too_large(s, "MPI_Pack_size"),
        Ok(None) => too_large(usize::MAX, "MPI_Pack_size"),
        Err(rc) => rc,
    }
}

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
    match with_type(datatype, "MPI_Type_get_name", |d| d.name.clone()) {
        Ok(n) => {
            let len = copy_cstr(&n, type_name, MPI_MAX_OBJECT_NAME as usize);
            out(resultlen, len as c_int);
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}
