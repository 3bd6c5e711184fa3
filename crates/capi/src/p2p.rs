//! Point-to-point communication (MPI-4.0 chapter 3), including the large-count `_c` forms.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errors::{bad, class_code, code_for, raise, raise_code};
use crate::handles::*;
use crate::util::*;
use protean_core::error::{ErrorClass, MpiError};
use protean_core::ids::{CommId, ReqId};
use protean_core::mpi::global::{try_with, with};
use protean_core::mpi::p2p as core;
use protean_core::mpi::request::{Mode, Status};

/// The datatype of a point-to-point buffer of `count` elements. A buffer of no elements may
/// name MPI_DATATYPE_NULL, as MPICH accepts (it checks the datatype only when count > 0):
/// it stands for an empty message of bytes.
fn buffer_dtype(dt: MPI_Datatype, count: i64) -> Option<protean_core::ids::DtypeId> {
    match dtype_id(dt) {
        None if count == 0 && dt == MPI_DATATYPE_NULL => dtype_id(MPI_BYTE),
        d => d,
    }
}

/// Resolve the communicator and datatype handles of a call (the datatype of a buffer of
/// `count` elements, see [`buffer_dtype`]), or raise.
macro_rules! resolve {
    ($comm:expr, $dt:expr, $count:expr, $func:expr) => {{
        let Some(c) = comm_id($comm) else {
            return raise(
                $comm,
                bad(
                    ErrorClass::Comm,
                    "invalid communicator (MPI_COMM_NULL or not a communicator)",
                ),
                $func,
            );
        };
        let Some(d) = buffer_dtype($dt, $count) else {
            return raise(
                $comm,
                bad(
                    ErrorClass::Type,
                    "invalid datatype (MPI_DATATYPE_NULL or not a datatype)",
                ),
                $func,
            );
        };
        (c, d)
    }};
}

#[inline(always)]
unsafe fn blocking_send(
    buf: *const c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: Mode,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    match core::send(buf.cast(), count, d, dest, tag, c, mode) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, e, func),
    }
}

/// Report a completed operation's status; raise its error, if any, on `comm`.
#[inline(always)]
unsafe fn finish_status(st: Status, status: *mut MPI_Status, comm: MPI_Comm, func: &str) -> c_int {
    write_status(status, &st);
    match st.error {
        None => MPI_SUCCESS,
        Some(e) => {
            let code = code_for(class_code(e.class), format!("{func}: {}", e.msg));
            raise_code(comm, code, func, &format!("{func}: {}", e.msg))
        }
    }
}

#[inline(always)]
unsafe fn blocking_recv(
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    match core::recv(buf.cast(), count, d, src, tag, c) {
        Ok(st) => finish_status(st, status, comm, func),
        Err(e) => raise(comm, e, func),
    }
}

#[inline(always)]
unsafe fn start_send(
    buf: *const c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    mode: Mode,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Request, "null request pointer"), func);
    }
    match with(|e| e.isend_nb(buf.cast(), count, d, dest, tag, c, mode)) {
        Ok(Ok(slot)) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}

#[inline(always)]
unsafe fn start_recv(
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Request, "null request pointer"), func);
    }
    match with(|e| e.irecv(buf.cast(), count, d, src, tag, c)) {
        Ok(Ok(slot)) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn make_persistent(
    buf: *const c_void,
    count: i64,
    dt: MPI_Datatype,
    rank: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    mode: Mode,
    is_send: bool,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Request, "null request pointer"), func);
    }
    match with(|e| e.persistent(buf as *mut u8, count, d, rank, tag, c, mode, is_send)) {
        Ok(Ok(slot)) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}

/// Generate the int-count and MPI_Count forms of a function from one body.
macro_rules! both_counts {
    ($name:ident, $name_c:ident, |$($arg:ident : $ty:ty),*| $count:ident => $body:expr) => {
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let $count = $count as i64;
            $body
        }
        both_counts!(@c $name_c, |$($arg : $ty),*| $count => $body);
    };
    (@c $name_c:ident, |$($arg:ident : $ty:ty),*| $count:ident => $body:expr) => {
        paste_c! { $name_c, |$($arg : $ty),*| $count => $body }
    };
}

/// The `_c` form: identical body, MPI_Count count.
macro_rules! paste_c {
    ($name_c:ident, |$($arg:ident : $ty:ty),*| $count:ident => $body:expr) => {
        /// # Safety
        /// Arguments as the MPI standard requires for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name_c($($arg: c_count!($arg, $ty)),*) -> c_int {
            let $count = $count as i64;
            $body
        }
    };
}

/// In `_c` functions the argument named `count` is an MPI_Count.
macro_rules! c_count {
    (count, $ty:ty) => {
        MPI_Count
    };
    ($other:ident, $ty:ty) => {
        $ty
    };
}

both_counts!(protean_MPI_Send, protean_MPI_Send_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm| count =>
    blocking_send(buf, count, datatype, dest, tag, comm, Mode::Standard, "MPI_Send"));
both_counts!(protean_MPI_Ssend, protean_MPI_Ssend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm| count =>
    blocking_send(buf, count, datatype, dest, tag, comm, Mode::Sync, "MPI_Ssend"));
both_counts!(protean_MPI_Rsend, protean_MPI_Rsend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm| count =>
    blocking_send(buf, count, datatype, dest, tag, comm, Mode::Ready, "MPI_Rsend"));
both_counts!(protean_MPI_Bsend, protean_MPI_Bsend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm| count =>
    blocking_send(buf, count, datatype, dest, tag, comm, Mode::Buffered, "MPI_Bsend"));
both_counts!(protean_MPI_Recv, protean_MPI_Recv_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status| count =>
    blocking_recv(buf, count, datatype, source, tag, comm, status, "MPI_Recv"));
both_counts!(protean_MPI_Isend, protean_MPI_Isend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    start_send(buf, count, datatype, dest, tag, comm, request, Mode::Standard, "MPI_Isend"));
both_counts!(protean_MPI_Issend, protean_MPI_Issend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    start_send(buf, count, datatype, dest, tag, comm, request, Mode::Sync, "MPI_Issend"));
both_counts!(protean_MPI_Irsend, protean_MPI_Irsend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    start_send(buf, count, datatype, dest, tag, comm, request, Mode::Ready, "MPI_Irsend"));
both_counts!(protean_MPI_Ibsend, protean_MPI_Ibsend_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    start_send(buf, count, datatype, dest, tag, comm, request, Mode::Buffered, "MPI_Ibsend"));
both_counts!(protean_MPI_Irecv, protean_MPI_Irecv_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    start_recv(buf, count, datatype, source, tag, comm, request, "MPI_Irecv"));
both_counts!(protean_MPI_Send_init, protean_MPI_Send_init_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    make_persistent(buf, count, datatype, dest, tag, comm, request, Mode::Standard, true, "MPI_Send_init"));
both_counts!(protean_MPI_Ssend_init, protean_MPI_Ssend_init_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    make_persistent(buf, count, datatype, dest, tag, comm, request, Mode::Sync, true, "MPI_Ssend_init"));
both_counts!(protean_MPI_Rsend_init, protean_MPI_Rsend_init_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    make_persistent(buf, count, datatype, dest, tag, comm, request, Mode::Ready, true, "MPI_Rsend_init"));
both_counts!(protean_MPI_Bsend_init, protean_MPI_Bsend_init_c, |buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    make_persistent(buf, count, datatype, dest, tag, comm, request, Mode::Buffered, true, "MPI_Bsend_init"));
both_counts!(protean_MPI_Recv_init, protean_MPI_Recv_init_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    make_persistent(buf, count, datatype, source, tag, comm, request, Mode::Standard, false, "MPI_Recv_init"));

#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    func: &str,
) -> c_int {
    let (c, sd) = resolve!(comm, sendtype, sendcount, func);
    let (_, rd) = resolve!(comm, recvtype, recvcount, func);
    match core::sendrecv(
        sendbuf.cast(),
        sendcount,
        sd,
        dest,
        sendtag,
        recvbuf.cast(),
        recvcount,
        rd,
        source,
        recvtag,
        c,
    ) {
        Ok(st) => finish_status(st, status, comm, func),
        Err(e) => raise(comm, e, func),
    }
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv(
        sendbuf,
        sendcount as i64,
        sendtype,
        dest,
        sendtag,
        recvbuf,
        recvcount as i64,
        recvtype,
        source,
        recvtag,
        comm,
        status,
        "MPI_Sendrecv",
    )
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Sendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv(
        sendbuf,
        sendcount,
        sendtype,
        dest,
        sendtag,
        recvbuf,
        recvcount,
        recvtype,
        source,
        recvtag,
        comm,
        status,
        "MPI_Sendrecv_c",
    )
}

#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_replace(
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    match core::sendrecv_replace(buf.cast(), count, d, dest, sendtag, source, recvtag, c) {
        Ok(st) => finish_status(st, status, comm, func),
        Err(e) => raise(comm, e, func),
    }
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv_replace(
        buf,
        count as i64,
        datatype,
        dest,
        sendtag,
        source,
        recvtag,
        comm,
        status,
        "MPI_Sendrecv_replace",
    )
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv_replace(
        buf,
        count,
        datatype,
        dest,
        sendtag,
        source,
        recvtag,
        comm,
        status,
        "MPI_Sendrecv_replace_c",
    )
}

// -------------------------------------------------------------------------------------------
// Completion

/// The communicator handle and persistence of a live request.
fn req_info(slot: ReqId) -> Option<(MPI_Comm, bool)> {
    with(|e| e.request_info(slot).map(|(c, p)| (comm_handle(c), p)))
        .ok()
        .flatten()
}

fn bad_request_code(func: &str) -> c_int {
    raise(
        MPI_COMM_WORLD,
        bad(ErrorClass::Request, "invalid request handle"),
        func,
    )
}

/// # Safety
/// `request` points to a request handle; `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Wait(
    request: *mut MPI_Request,
    status: *mut MPI_Status,
) -> c_int {
    if request.is_null() {
        return bad_request_code("MPI_Wait");
    }
    if *request == MPI_REQUEST_NULL {
        write_empty(status);
        return MPI_SUCCESS;
    }
    let Some(slot) = request_slot(*request) else {
        return bad_request_code("MPI_Wait");
    };
    let Some((comm, persistent)) = req_info(slot) else {
        return bad_request_code("MPI_Wait");
    };
    crate::grequest::block(&[Some(slot)], true);
    match core::wait(slot) {
        Ok(st) => {
            let st = crate::grequest::finished(slot, st, true);
            if !persistent {
                *request = MPI_REQUEST_NULL;
            }
            finish_status(st, status, comm, "MPI_Wait")
        }
        Err(e) => raise(comm, e, "MPI_Wait"),
    }
}

/// # Safety
/// As for MPI_Wait; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    if request.is_null() || flag.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null argument"),
            "MPI_Test",
        );
    }
    if *request == MPI_REQUEST_NULL {
        *flag = 1;
        write_empty(status);
        return MPI_SUCCESS;
    }
    let Some(slot) = request_slot(*request) else {
        return bad_request_code("MPI_Test");
    };
    let Some((comm, persistent)) = req_info(slot) else {
        return bad_request_code("MPI_Test");
    };
    match core::test(slot) {
        Ok(Some(st)) => {
            let st = crate::grequest::finished(slot, st, true);
            *flag = 1;
            if !persistent {
                *request = MPI_REQUEST_NULL;
            }
            finish_status(st, status, comm, "MPI_Test")
        }
        Ok(None) => {
            *flag = 0;
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, "MPI_Test"),
    }
}

/// Slots of a request array: None for MPI_REQUEST_NULL; Err(i) for an invalid handle at i.
unsafe fn slots(count: c_int, reqs: *const MPI_Request) -> Result<Vec<Option<ReqId>>, usize> {
    let n = count.max(0) as usize;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let h = *reqs.add(i);
        if h == MPI_REQUEST_NULL {
            v.push(None);
        } else {
            match request_slot(h) {
                Some(s) => v.push(Some(s)),
                None => return Err(i),
            }
        }
    }
    Ok(v)
}

/// Collect request `i` of an array: write its status slot and null its handle unless persistent.
unsafe fn collect_one(
    i: usize,
    slot: ReqId,
    reqs: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> Result<(Status, MPI_Comm), MpiError> {
    // Most requests are plain sends and receives: one lookup, no generalized request to ask.
    if let Some(Some((comm, st))) = try_with(|e| e.pml.take_plain(slot)) {
        *reqs.add(i) = MPI_REQUEST_NULL;
        if !ignored(statuses) {
            write_status(statuses.add(i), &st);
        }
        return Ok((st, comm_handle(comm)));
    }
    // One visit to the engine: the request's communicator and kind, then its status.
    let (comm, persistent, st) = with(|e| {
        let (comm, persistent) = e
            .request_info(slot)
            .ok_or_else(|| bad(ErrorClass::Request, "invalid request handle"))?;
        Ok::<_, MpiError>((comm_handle(comm), persistent, e.collect(slot)?))
    })??;
    let st = crate::grequest::finished(slot, st.expect("complete request"), true);
    if !persistent {
        *reqs.add(i) = MPI_REQUEST_NULL;
    }
    if !ignored(statuses) {
        write_status(statuses.add(i), &st);
    }
    Ok((st, comm))
}

/// The requests of an array argument as slots (None for MPI_REQUEST_NULL), or the error code
/// of a raised error for a bad count or handle.
unsafe fn request_array(
    count: c_int,
    reqs: *const MPI_Request,
    func: &str,
) -> Result<Vec<Option<ReqId>>, c_int> {
    check_array(count, reqs, func)?;
    slots(count, reqs).map_err(|i| {
        raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Request,
                format!("invalid request handle at index {i}"),
            ),
            func,
        )
    })
}

fn check_array(count: c_int, reqs: *const MPI_Request, func: &str) -> Result<(), c_int> {
    if count < 0 {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Count, format!("negative count {count}")),
            func,
        ));
    }
    if count > 0 && reqs.is_null() {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Request, "null request array"),
            func,
        ));
    }
    Ok(())
}

/// Raise MPI_ERR_IN_STATUS after a multiple completion with errors (`errs`: request index,
/// the error). That return value is the only case where a completion call writes the
/// MPI_ERROR fields (MPI-4.1 3.2.5): every status of the output array gets one, MPI_SUCCESS
/// for the requests that completed without error (`at`: the index of request `i`'s status,
/// `n`: the statuses written).
unsafe fn in_status(
    errs: &[(usize, Box<MpiError>)],
    statuses: *mut MPI_Status,
    n: usize,
    at: impl Fn(usize) -> usize,
    comm: MPI_Comm,
    func: &str,
) -> c_int {
    if !ignored(statuses) {
        for k in 0..n {
            write_error(statuses.add(k), MPI_SUCCESS);
        }
        for (i, e) in errs {
            let code = code_for(class_code(e.class), format!("{func}: {}", e.msg));
            write_error(statuses.add(at(*i)), code);
        }
    }
    let (i, e) = &errs[0];
    raise(
        comm,
        bad(
            ErrorClass::InStatus,
            format!("request {i} failed: {}", e.msg),
        ),
        func,
    )
}

/// # Safety
/// `array_of_requests` holds `count` handles; `array_of_statuses` is MPI_STATUSES_IGNORE or
/// has `count` entries.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let s = match request_array(count, array_of_requests, "MPI_Waitall") {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    crate::grequest::block(&s, true);
    if let Err(e) = core::wait_all(&s) {
        return raise(MPI_COMM_WORLD, e, "MPI_Waitall");
    }
    collect_all(&s, array_of_requests, array_of_statuses, "MPI_Waitall")
}

/// Collect every request of a completed array (MPI_Waitall, MPI_Testall): statuses written,
/// handles nulled unless persistent, MPI_ERR_IN_STATUS when any failed.
unsafe fn collect_all(
    s: &[Option<ReqId>],
    reqs: *mut MPI_Request,
    statuses: *mut MPI_Status,
    func: &str,
) -> c_int {
    let mut errs = Vec::new();
    let mut comm = MPI_COMM_WORLD;
    for (i, x) in s.iter().enumerate() {
        match x {
            None => {
                if !ignored(statuses) {
                    write_empty(statuses.add(i));
                }
            }
            Some(slot) => match collect_one(i, *slot, reqs, statuses) {
                Ok((st, c)) => {
                    if let Some(e) = st.error {
                        comm = c;
                        errs.push((i, e));
                    }
                }
                Err(e) => errs.push((i, Box::new(e))),
            },
        }
    }
    if errs.is_empty() {
        MPI_SUCCESS
    } else {
        in_status(&errs, statuses, s.len(), |i| i, comm, func)
    }
}

/// # Safety
/// As for MPI_Waitall; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let s = match request_array(count, array_of_requests, "MPI_Testall") {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    match core::test_all(&s) {
        Ok(false) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Ok(true) => {
            out(flag, 1);
            collect_all(&s, array_of_requests, array_of_statuses, "MPI_Testall")
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Testall"),
    }
}

/// Active (non-null, not inactive persistent) entries of a request array.
fn active(s: &[Option<ReqId>]) -> Vec<Option<ReqId>> {
    core::active(s).unwrap_or_default()
}

/// # Safety
/// As for MPI_Waitall; `index` is writable; `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let s = match request_array(count, array_of_requests, "MPI_Waitany") {
        Ok(s) => active(&s),
        Err(rc) => return rc,
    };
    let comms: Vec<Option<(MPI_Comm, bool)>> = s.iter().map(|x| x.and_then(req_info)).collect();
    crate::grequest::block(&s, false);
    match core::wait_any(&s) {
        Ok(None) => {
            out(index, MPI_UNDEFINED);
            write_empty(status);
            MPI_SUCCESS
        }
        Ok(Some((i, st))) => {
            let st = crate::grequest::finished(s[i].expect("active"), st, true);
            let (comm, persistent) = comms[i].unwrap_or((MPI_COMM_WORLD, false));
            if !persistent {
                *array_of_requests.add(i) = MPI_REQUEST_NULL;
            }
            out(index, i as c_int);
            finish_status(st, status, comm, "MPI_Waitany")
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Waitany"),
    }
}

/// # Safety
/// As for MPI_Waitany; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Testany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let s = match request_array(count, array_of_requests, "MPI_Testany") {
        Ok(s) => active(&s),
        Err(rc) => return rc,
    };
    if s.iter().all(|x| x.is_none()) {
        out(flag, 1);
        out(index, MPI_UNDEFINED);
        write_empty(status);
        return MPI_SUCCESS;
    }
    let found = core::test_any(&s);
    match found {
        Ok(Some(i)) => {
            let slot = s[i].expect("active");
            match collect_one(i, slot, array_of_requests, std::ptr::null_mut()) {
                Ok((st, comm)) => {
                    out(flag, 1);
                    out(index, i as c_int);
                    finish_status(st, status, comm, "MPI_Testany")
                }
                Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Testany"),
            }
        }
        Ok(None) => {
            out(flag, 0);
            out(index, MPI_UNDEFINED);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Testany"),
    }
}

/// Collect the complete requests `done` (indices into `s`) into the `some` outputs.
unsafe fn collect_some(
    s: &[Option<ReqId>],
    done: &[usize],
    reqs: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    func: &str,
) -> c_int {
    let mut errs = Vec::new();
    let mut comm = MPI_COMM_WORLD;
    for (k, &i) in done.iter().enumerate() {
        let slot = s[i].expect("active");
        out(indices.add(k), i as c_int);
        let st_ptr = if ignored(statuses) {
            statuses
        } else {
            statuses.add(k)
        };
        match collect_one(i, slot, reqs, std::ptr::null_mut()) {
            Ok((st, c)) => {
                write_status(st_ptr, &st);
                if let Some(e) = st.error {
                    comm = c;
                    errs.push((i, e));
                }
            }
            Err(e) => errs.push((i, Box::new(e))),
        }
    }
    out(outcount, done.len() as c_int);
    if errs.is_empty() {
        MPI_SUCCESS
    } else {
        let at = |i| done.iter().position(|&d| d == i).expect("completed");
        in_status(&errs, statuses, done.len(), at, comm, func)
    }
}

/// # Safety
/// As for MPI_Waitall; `outcount` and `array_of_indices` (count entries) are writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Waitsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    some(
        incount,
        array_of_requests,
        outcount,
        array_of_indices,
        array_of_statuses,
        core::wait_some,
        "MPI_Waitsome",
    )
}

/// How MPI_Waitsome and MPI_Testsome find the complete entries of a request array.
type FindSome = fn(&[Option<ReqId>]) -> Result<Vec<usize>, MpiError>;

/// MPI_Waitsome and MPI_Testsome: `how` finds the complete entries of the active requests.
unsafe fn some(
    incount: c_int,
    reqs: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    how: FindSome,
    func: &str,
) -> c_int {
    let s = match request_array(incount, reqs, func) {
        Ok(s) => active(&s),
        Err(rc) => return rc,
    };
    if s.iter().all(|x| x.is_none()) {
        out(outcount, MPI_UNDEFINED);
        return MPI_SUCCESS;
    }
    if func == "MPI_Waitsome" {
        crate::grequest::block(&s, false);
    }
    match how(&s) {
        Ok(done) => collect_some(&s, &done, reqs, outcount, indices, statuses, func),
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// As for MPI_Waitsome.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Testsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    some(
        incount,
        array_of_requests,
        outcount,
        array_of_indices,
        array_of_statuses,
        core::test_some,
        "MPI_Testsome",
    )
}

/// # Safety
/// `request` points to a handle; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    if request == MPI_REQUEST_NULL {
        out(flag, 1);
        write_empty(status);
        return MPI_SUCCESS;
    }
    let Some(slot) = request_slot(request) else {
        return bad_request_code("MPI_Request_get_status");
    };
    match core::test_status(slot) {
        Ok(Some(st)) => {
            let st = crate::grequest::finished(slot, st, false);
            out(flag, 1);
            write_status(status, &st);
            match st.error {
                None => MPI_SUCCESS,
                Some(e) => raise(MPI_COMM_WORLD, *e, "MPI_Request_get_status"),
            }
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Request_get_status"),
    }
}

/// # Safety
/// `request` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Request_free(request: *mut MPI_Request) -> c_int {
    if request.is_null() || *request == MPI_REQUEST_NULL {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Request, "MPI_REQUEST_NULL cannot be freed"),
            "MPI_Request_free",
        );
    }
    let Some(slot) = request_slot(*request) else {
        return bad_request_code("MPI_Request_free");
    };
    if let Some(rc) = crate::grequest::free(slot) {
        *request = MPI_REQUEST_NULL;
        return rc;
    }
    match with(|e| e.request_free(slot)) {
        Ok(Ok(())) => {
            *request = MPI_REQUEST_NULL;
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Request_free"),
    }
}

/// # Safety
/// `request` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Cancel(request: *mut MPI_Request) -> c_int {
    if request.is_null() || *request == MPI_REQUEST_NULL {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Request, "MPI_REQUEST_NULL cannot be cancelled"),
            "MPI_Cancel",
        );
    }
    let Some(slot) = request_slot(*request) else {
        return bad_request_code("MPI_Cancel");
    };
    if let Some(rc) = crate::grequest::cancel(slot) {
        return rc;
    }
    match with(|e| e.cancel(slot)) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Cancel"),
    }
}

/// # Safety
/// `status` is a valid status; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Test_cancelled(
    status: *const MPI_Status,
    flag: *mut c_int,
) -> c_int {
    if ignored(status) || flag.is_null() {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null or ignored status"),
            "MPI_Test_cancelled",
        );
    }
    *flag = status_cancelled(&*status) as c_int;
    MPI_SUCCESS
}

/// # Safety
/// `status` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_set_cancelled(
    status: *mut MPI_Status,
    flag: c_int,
) -> c_int {
    if ignored(status) {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null or ignored status"),
            "MPI_Status_set_cancelled",
        );
    }
    let s = &mut *status;
    s.count_hi_and_cancelled = (s.count_hi_and_cancelled & !1) | (flag != 0) as c_int;
    MPI_SUCCESS
}

// -------------------------------------------------------------------------------------------
// Start

/// # Safety
/// `request` points to a persistent request handle.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Start(request: *mut MPI_Request) -> c_int {
    if request.is_null() {
        return bad_request_code("MPI_Start");
    }
    let Some(slot) = request_slot(*request) else {
        return bad_request_code("MPI_Start");
    };
    let comm = req_info(slot).map_or(MPI_COMM_WORLD, |x| x.0);
    match with(|e| e.start(slot)) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) | Err(e) => raise(comm, e, "MPI_Start"),
    }
}

/// # Safety
/// `array_of_requests` holds `count` persistent request handles.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Startall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
) -> c_int {
    if let Err(c) = check_array(count, array_of_requests, "MPI_Startall") {
        return c;
    }
    for i in 0..count as usize {
        let rc = protean_MPI_Start(array_of_requests.add(i));
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    MPI_SUCCESS
}

// -------------------------------------------------------------------------------------------
// Probe

unsafe fn check_comm(comm: MPI_Comm, func: &str) -> Result<CommId, c_int> {
    comm_id(comm).ok_or_else(|| raise(comm, bad(ErrorClass::Comm, "invalid communicator"), func))
}

/// # Safety
/// `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let c = match check_comm(comm, "MPI_Probe") {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match core::probe(source, tag, c) {
        Ok(st) => {
            write_status(status, &st);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, "MPI_Probe"),
    }
}

/// # Safety
/// `flag` is writable; `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let c = match check_comm(comm, "MPI_Iprobe") {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match core::iprobe(source, tag, c) {
        Ok(Some(st)) => {
            out(flag, 1);
            write_status(status, &st);
            MPI_SUCCESS
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, "MPI_Iprobe"),
    }
}

/// # Safety
/// `message` is writable; `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let c = match check_comm(comm, "MPI_Mprobe") {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match core::mprobe(source, tag, c) {
        Ok((m, st)) => {
            out(message, message_handle(m));
            write_status(status, &st);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, "MPI_Mprobe"),
    }
}

/// # Safety
/// `flag` and `message` are writable; `status` is MPI_STATUS_IGNORE or writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let c = match check_comm(comm, "MPI_Improbe") {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match core::improbe(source, tag, c) {
        Ok(Some((m, st))) => {
            out(flag, 1);
            out(message, message_handle(m));
            write_status(status, &st);
            MPI_SUCCESS
        }
        Ok(None) => {
            out(flag, 0);
            MPI_SUCCESS
        }
        Err(e) => raise(comm, e, "MPI_Improbe"),
    }
}

unsafe fn take_message(message: *mut MPI_Message, func: &str) -> Result<Option<u32>, c_int> {
    if message.is_null() {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Request, "null message pointer"),
            func,
        ));
    }
    message_id(*message).map_err(|_| {
        raise(
            MPI_COMM_WORLD,
            bad(
                ErrorClass::Request,
                "invalid message handle (MPI_MESSAGE_NULL?)",
            ),
            func,
        )
    })
}

unsafe fn mrecv(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
    func: &str,
) -> c_int {
    let m = match take_message(message, func) {
        Ok(m) => m,
        Err(rc) => return rc,
    };
    let Some(d) = buffer_dtype(datatype, count) else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "invalid datatype"),
            func,
        );
    };
    let slot = match with(|e| e.imrecv(buf.cast(), count, d, m)) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) | Err(e) => return raise(MPI_COMM_WORLD, e, func),
    };
    *message = MPI_MESSAGE_NULL;
    match core::wait(slot) {
        Ok(st) => finish_status(st, status, MPI_COMM_WORLD, func),
        Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

unsafe fn imrecv(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let m = match take_message(message, func) {
        Ok(m) => m,
        Err(rc) => return rc,
    };
    let Some(d) = buffer_dtype(datatype, count) else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "invalid datatype"),
            func,
        );
    };
    match with(|e| e.imrecv(buf.cast(), count, d, m)) {
        Ok(Ok(s)) => {
            *message = MPI_MESSAGE_NULL;
            out(request, request_handle(s));
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

both_counts!(protean_MPI_Mrecv, protean_MPI_Mrecv_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message, status: *mut MPI_Status| count =>
    mrecv(buf, count, datatype, message, status, "MPI_Mrecv"));
both_counts!(protean_MPI_Imrecv, protean_MPI_Imrecv_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message, request: *mut MPI_Request| count =>
    imrecv(buf, count, datatype, message, request, "MPI_Imrecv"));

// -------------------------------------------------------------------------------------------
// Status queries

unsafe fn status_query(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    func: &str,
    elements: bool,
) -> Result<Option<u64>, c_int> {
    if ignored(status) {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null or ignored status"),
            func,
        ));
    }
    let Some(d) = dtype_id(datatype) else {
        return Err(raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "invalid datatype"),
            func,
        ));
    };
    let bytes = status_bytes(&*status);
    let r = with(|e| -> Result<Option<u64>, MpiError> {
        let t = e.dtype(d)?;
        if elements {
            return Ok(t.elements_in(bytes as usize));
        }
        Ok(match t.size {
            0 => Some(0),
            s if bytes.is_multiple_of(s as u64) => Some(bytes / s as u64),
            _ => None,
        })
    });
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) | Err(e) => Err(raise(MPI_COMM_WORLD, e, func)),
    }
}

unsafe fn int_result(r: Result<Option<u64>, c_int>, outp: *mut c_int) -> c_int {
    match r {
        Ok(v) => {
            out(
                outp,
                v.filter(|v| *v <= c_int::MAX as u64)
                    .map_or(MPI_UNDEFINED, |v| v as c_int),
            );
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

unsafe fn count_result(r: Result<Option<u64>, c_int>, outp: *mut MPI_Count) -> c_int {
    match r {
        Ok(v) => {
            out(
                outp,
                v.map_or(MPI_UNDEFINED as MPI_Count, |v| v as MPI_Count),
            );
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

/// # Safety
/// `status` is valid; `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    int_result(
        status_query(status, datatype, "MPI_Get_count", false),
        count,
    )
}

/// # Safety
/// As for MPI_Get_count.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_count_c(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    count_result(
        status_query(status, datatype, "MPI_Get_count_c", false),
        count,
    )
}

/// # Safety
/// As for MPI_Get_count.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_elements(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    int_result(
        status_query(status, datatype, "MPI_Get_elements", true),
        count,
    )
}

/// # Safety
/// As for MPI_Get_count.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_elements_x(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    count_result(
        status_query(status, datatype, "MPI_Get_elements_x", true),
        count,
    )
}

/// # Safety
/// As for MPI_Get_count.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Get_elements_c(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    count_result(
        status_query(status, datatype, "MPI_Get_elements_c", true),
        count,
    )
}

unsafe fn set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: i64,
    func: &str,
) -> c_int {
    if ignored(status) {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Arg, "null or ignored status"),
            func,
        );
    }
    if count < 0 {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Count, format!("negative count {count}")),
            func,
        );
    }
    let Some(d) = dtype_id(datatype) else {
        return raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "invalid datatype"),
            func,
        );
    };
    match with(|e| e.dtype(d).map(|t| t.bytes_for_elements(count as u64))) {
        Ok(Ok(Some(bytes))) => {
            let s = &mut *status;
            let c = status_cancelled(s);
            write_raw(s, s.MPI_SOURCE, s.MPI_TAG, bytes, c);
            MPI_SUCCESS
        }
        Ok(Ok(None)) => raise(
            MPI_COMM_WORLD,
            bad(ErrorClass::Type, "the datatype holds no elements"),
            func,
        ),
        Ok(Err(e)) | Err(e) => raise(MPI_COMM_WORLD, e, func),
    }
}

/// # Safety
/// `status` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: c_int,
) -> c_int {
    set_elements(status, datatype, count as i64, "MPI_Status_set_elements")
}

/// # Safety
/// `status` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Status_set_elements_x(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    set_elements(status, datatype, count, "MPI_Status_set_elements_x")
}

// -------------------------------------------------------------------------------------------
// Buffered-send buffer

/// # Safety
/// `buffer` holds `size` bytes until it is detached.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    crate::errors::ret(
        with(|e| e.buffer_attach(buffer.cast(), size as i64)).and_then(|r| r),
        MPI_COMM_WORLD,
        "MPI_Buffer_attach",
    )
}

/// # Safety
/// As for MPI_Buffer_attach.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Buffer_attach_c(
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    crate::errors::ret(
        with(|e| e.buffer_attach(buffer.cast(), size)).and_then(|r| r),
        MPI_COMM_WORLD,
        "MPI_Buffer_attach_c",
    )
}

/// # Safety
/// `buffer_addr` receives the buffer address (it is a `void **` in disguise); `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Buffer_detach(
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    match core::buffer_detach() {
        Ok((p, n)) => {
            out(buffer_addr as *mut *mut c_void, p.cast());
            out(size, n as c_int);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Buffer_detach"),
    }
}

/// # Safety
/// As for MPI_Buffer_detach.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Buffer_detach_c(
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    match core::buffer_detach() {
        Ok((p, n)) => {
            out(buffer_addr as *mut *mut c_void, p.cast());
            out(size, n as MPI_Count);
            MPI_SUCCESS
        }
        Err(e) => raise(MPI_COMM_WORLD, e, "MPI_Buffer_detach_c"),
    }
}

// -------------------------------------------------------------------------------------------
// MPI_Isendrecv, MPI_Isendrecv_replace (MPI-4.0 3.10)

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let (c, sd) = resolve!(comm, sendtype, sendcount, func);
    let (_, rd) = resolve!(comm, recvtype, recvcount, func);
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Request, "null request pointer"), func);
    }
    let r = with(|e| {
        e.isendrecv(
            sendbuf.cast(),
            sendcount,
            sd,
            dest,
            sendtag,
            recvbuf.cast(),
            recvcount,
            rd,
            source,
            recvtag,
            c,
        )
    });
    match r {
        Ok(Ok(slot)) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isendrecv(
        sendbuf,
        sendcount as i64,
        sendtype,
        dest,
        sendtag,
        recvbuf,
        recvcount as i64,
        recvtype,
        source,
        recvtag,
        comm,
        request,
        "MPI_Isendrecv",
    )
}

/// # Safety
/// Arguments as the MPI standard requires.
#[no_mangle]
pub unsafe extern "C" fn protean_MPI_Isendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isendrecv(
        sendbuf,
        sendcount,
        sendtype,
        dest,
        sendtag,
        recvbuf,
        recvcount,
        recvtype,
        source,
        recvtag,
        comm,
        request,
        "MPI_Isendrecv_c",
    )
}

both_counts!(protean_MPI_Isendrecv_replace, protean_MPI_Isendrecv_replace_c, |buf: *mut c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: MPI_Comm, request: *mut MPI_Request| count =>
    isendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, request, "MPI_Isendrecv_replace"));

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_replace(
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    func: &str,
) -> c_int {
    let (c, d) = resolve!(comm, dt, count, func);
    if request.is_null() {
        return raise(comm, bad(ErrorClass::Request, "null request pointer"), func);
    }
    match with(|e| e.isendrecv_replace(buf.cast(), count, d, dest, sendtag, source, recvtag, c)) {
        Ok(Ok(slot)) => {
            *request = request_handle(slot);
            MPI_SUCCESS
        }
        Ok(Err(e)) | Err(e) => raise(comm, e, func),
    }
}
