//! Datatype queries (MPI-4.0 chapter 5) that predefined types need; constructors and packing
//! come with the datatype chapter.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use crate::abi::*;
use crate::errors::{bad, raise};
use crate::handles::dtype_id;
use crate::util::{copy_cstr, out};
use protean_core::error::{ErrorClass, MpiError};
use protean_core::mpi::datatype::Datatype;
use protean_core::runtime::global::with;
use protean_core::runtime::Engine;

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

/// Lower bound and extent (or true lower bound and true extent) of a type, for every form of
/// MPI_Type_get_(true_)extent (MPI_Aint and MPI_Count are both `long`).
unsafe fn bounds(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
    true_bounds: bool,
    func: &str,
) -> c_int {
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

// -------------------------------------------------------------------------------------------
// Constructors

/// Build a type from the engine's types and store it; write its handle to `newtype`.
unsafe fn construct(
    newtype: *mut MPI_Datatype,
    func: &str,
    build: impl FnOnce(&Engine) -> Result<Datatype, MpiError>,
) -> c_int {
    if newtype.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null newtype pointer"),
            func,
        );
    }
    let r = with(|e| -> Result<u32, MpiError> {
        let d = build(e)?;
        Ok(e.add_dtype(d))
    });
    match r {
        Ok(Ok(id)) => {
            *newtype = crate::handles::dtype_handle(id);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

fn old(e: &Engine, h: MPI_Datatype) -> Result<(Arc<Datatype>, u32), MpiError> {
    let id = dtype_id(h).ok_or_else(|| {
        bad(
            ErrorClass::Type,
            "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
        )
    })?;
    Ok((e.dtype(id)?.clone(), id))
}

fn nonneg(v: c_int, what: &str) -> Result<usize, MpiError> {
    usize::try_from(v).map_err(|_| bad(ErrorClass::Count, format!("negative {what} {v}")))
}

fn type_err(m: String) -> MpiError {
    bad(ErrorClass::Type, m)
}

/// Read `n` values from a C array (null allowed when n is 0).
unsafe fn arr<T: Copy>(p: *const T, n: usize, what: &str) -> Result<Vec<T>, MpiError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(bad(ErrorClass::Arg, format!("null {what} array")));
    }
    Ok(std::slice::from_raw_parts(p, n).to_vec())
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_contiguous", |e| {
        let (t, id) = old(e, oldtype)?;
        Datatype::contiguous(nonneg(count, "count")?, &t, id).map_err(type_err)
    })
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_vector", |e| {
        let (t, id) = old(e, oldtype)?;
        Datatype::vector(
            nonneg(count, "count")?,
            nonneg(blocklength, "blocklength")?,
            stride as isize,
            false,
            &t,
            id,
        )
        .map_err(type_err)
    })
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_hvector", |e| {
        let (t, id) = old(e, oldtype)?;
        Datatype::vector(
            nonneg(count, "count")?,
            nonneg(blocklength, "blocklength")?,
            stride as isize,
            true,
            &t,
            id,
        )
        .map_err(type_err)
    })
}

/// # Safety
/// The arrays hold `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_indexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_indexed", |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let bl = arr(array_of_blocklengths, n, "blocklength")?
            .into_iter()
            .map(|b| nonneg(b, "blocklength"))
            .collect::<Result<Vec<_>, _>>()?;
        let d: Vec<isize> = arr(array_of_displacements, n, "displacement")?
            .into_iter()
            .map(|x| x as isize)
            .collect();
        Datatype::indexed(&bl, &d, false, &t, id).map_err(type_err)
    })
}

/// # Safety
/// The arrays hold `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_hindexed", |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let bl = arr(array_of_blocklengths, n, "blocklength")?
            .into_iter()
            .map(|b| nonneg(b, "blocklength"))
            .collect::<Result<Vec<_>, _>>()?;
        let d: Vec<isize> = arr(array_of_displacements, n, "displacement")?
            .into_iter()
            .map(|x| x as isize)
            .collect();
        Datatype::indexed(&bl, &d, true, &t, id).map_err(type_err)
    })
}

/// # Safety
/// `array_of_displacements` holds `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_indexed_block", |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let d: Vec<isize> = arr(array_of_displacements, n, "displacement")?
            .into_iter()
            .map(|x| x as isize)
            .collect();
        Datatype::indexed_block(nonneg(blocklength, "blocklength")?, &d, false, &t, id)
            .map_err(type_err)
    })
}

/// # Safety
/// `array_of_displacements` holds `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_hindexed_block", |e| {
        let (t, id) = old(e, oldtype)?;
        let n = nonneg(count, "count")?;
        let d: Vec<isize> = arr(array_of_displacements, n, "displacement")?
            .into_iter()
            .map(|x| x as isize)
            .collect();
        Datatype::indexed_block(nonneg(blocklength, "blocklength")?, &d, true, &t, id)
            .map_err(type_err)
    })
}

/// # Safety
/// The arrays hold `count` entries; `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_struct", |e| {
        let n = nonneg(count, "count")?;
        let bl = arr(array_of_blocklengths, n, "blocklength")?
            .into_iter()
            .map(|b| nonneg(b, "blocklength"))
            .collect::<Result<Vec<_>, _>>()?;
        let d: Vec<isize> = arr(array_of_displacements, n, "displacement")?
            .into_iter()
            .map(|x| x as isize)
            .collect();
        let ts = arr(array_of_types, n, "type")?
            .into_iter()
            .map(|h| old(e, h))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<(&Datatype, u32)> = ts.iter().map(|(t, id)| (&**t, *id)).collect();
        Datatype::structure(&bl, &d, &refs).map_err(type_err)
    })
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_create_resized(
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(newtype, "MPI_Type_create_resized", |e| {
        let (t, id) = old(e, oldtype)?;
        Ok(Datatype::resized(&t, lb as isize, extent as isize, id))
    })
}

/// # Safety
/// `newtype` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Type_dup(
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    let rc = construct(newtype, "MPI_Type_dup", |e| {
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
            let _ = with(|e| e.dtypes[id as usize] = None);
        }
        *newtype = MPI_DATATYPE_NULL;
        return code;
    }
    MPI_SUCCESS
}

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
    let r = with(|e| -> Result<(), MpiError> {
        let id = dtype_id(h).ok_or_else(|| {
            bad(
                ErrorClass::Type,
                "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
            )
        })?;
        let slot = e
            .dtypes
            .get_mut(id as usize)
            .and_then(|d| d.as_mut())
            .ok_or_else(|| bad(ErrorClass::Type, "invalid datatype"))?;
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
    let r = with(|e| -> Result<(), MpiError> {
        let id = dtype_id(h).ok_or_else(|| {
            bad(
                ErrorClass::Type,
                "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
            )
        })?;
        let d = e.dtype(id)?;
        if d.predefined {
            return Err(bad(
                ErrorClass::Type,
                format!("{} is predefined and cannot be freed", d.name),
            ));
        }
        // Operations in flight keep their own reference to the type.
        e.dtypes[id as usize] = None;
        Ok(())
    });
    match r {
        Ok(Ok(())) => {
            *datatype = MPI_DATATYPE_NULL;
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Type_free"),
    }
}

/// # Safety
/// `address` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_address(
    location: *const c_void,
    address: *mut MPI_Aint,
) -> c_int {
    if address.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null address pointer"),
            "MPI_Get_address",
        );
    }
    *address = location as MPI_Aint;
    MPI_SUCCESS
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

#[allow(clippy::too_many_arguments)]
unsafe fn pack(
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut MPI_Aint,
    func: &str,
) -> c_int {
    if position.is_null() || incount < 0 || outsize < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null position, or negative count or size"),
            func,
        );
    }
    let pos = *position;
    let r = with_type(datatype, func, |d| -> Result<usize, MpiError> {
        let n = d
            .packed_size(incount as usize)
            .ok_or_else(|| bad(ErrorClass::Count, "count overflows"))?;
        if pos < 0 || pos + n as i64 > outsize {
            return Err(bad(
                ErrorClass::Truncate,
                format!("{n} packed bytes at position {pos} do not fit in an output buffer of {outsize} bytes"),
            ));
        }
        if n > 0 && (outbuf.is_null() || (inbuf.is_null() && d.true_lb >= 0 && d.predefined)) {
            return Err(bad(ErrorClass::Buffer, "null buffer"));
        }
        let mut v = Vec::with_capacity(n);
        d.pack(inbuf.cast(), incount as usize, &mut v);
        std::ptr::copy_nonoverlapping(v.as_ptr(), (outbuf as *mut u8).add(pos as usize), n);
        Ok(n)
    });
    match r {
        Ok(Ok(n)) => {
            *position = pos + n as MPI_Aint;
            MPI_SUCCESS
        }
        Ok(Err(e)) => raise(MPI_COMM_WORLD, e, func),
        Err(rc) => rc,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn unpack(
    inbuf: *const c_void,
    insize: i64,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
    func: &str,
) -> c_int {
    if position.is_null() || outcount < 0 || insize < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null position, or negative count or size"),
            func,
        );
    }
    let pos = *position;
    let r = with_type(datatype, func, |d| -> Result<usize, MpiError> {
        let n = d
            .packed_size(outcount as usize)
            .ok_or_else(|| bad(ErrorClass::Count, "count overflows"))?;
        if pos < 0 || pos + n as i64 > insize {
            return Err(bad(
                ErrorClass::Truncate,
                format!("unpacking {n} bytes at position {pos} reads past the end of a {insize}-byte input buffer"),
            ));
        }
        if n > 0 && inbuf.is_null() {
            return Err(bad(ErrorClass::Buffer, "null input buffer"));
        }
        let data = if n == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts((inbuf as *const u8).add(pos as usize), n)
        };
        Ok(d.unpack(data, outbuf.cast(), outcount as usize))
    });
    match r {
        Ok(Ok(n)) => {
            *position = pos + n as MPI_Aint;
            MPI_SUCCESS
        }
        Ok(Err(e)) => raise(MPI_COMM_WORLD, e, func),
        Err(rc) => rc,
    }
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
        "MPI_Unpack_c",
    )
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
    if incount < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Count, format!("negative count {incount}")),
            "MPI_Pack_size_c",
        );
    }
    match with_type(datatype, "MPI_Pack_size_c", |d| {
        d.packed_size(incount as usize)
    }) {
        Ok(Some(s)) => {
            out(size, s as MPI_Count);
            MPI_SUCCESS
        }
        Ok(None) => too_large(usize::MAX, "MPI_Pack_size_c"),
        Err(rc) => rc,
    }
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
