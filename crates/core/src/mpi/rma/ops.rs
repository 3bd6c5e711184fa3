//! The origin's side of every one-sided operation (MPI-4.1 12.3): MPI_Put, MPI_Get,
//! MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op, MPI_Compare_and_swap and their
//! request-based forms.
//!
//! An operation is checked (window, rank, counts, datatypes, the access epoch, the range at
//! the target), its target datatype is flattened into the byte segments it names in the
//! target's window, its origin data packed when it is not contiguous, and then it goes by the
//! target's mechanism (see the module doc of `rma`): copied now (direct, cross-memory attach),
//! or sent as frames (active messages) whose answers, for the operations that read, complete
//! it later.

use crate::ids::{DtypeId, ReqId};
use std::sync::Arc;

use super::acc::{self, Acc};
use super::am::{cut, Piece};
use super::ctl::Lookup;
use super::{Fetching, Flavor, Mech, Peer, State, Waiting, Win};
use crate::err;
use crate::error::Result;
use crate::mpi::coll::op::{acc_elem_of, elem_of, Builtin, Elem, NPREDEFINED};
use crate::mpi::datatype::layout::for_each_block;
use crate::mpi::datatype::{Datatype, PREDEFINED_NAMES};
use crate::mpi::engine::Engine;
use crate::mpi::global::with;
use crate::mpi::request::{Kind, Request, Status};
use crate::proto::frame::{self, RmaHeader, RmaKind};
use crate::transport::{CopyError, Gpid, Span, Token, Transport};

/// A buffer at the origin: address, count, datatype (engine id).
#[derive(Debug, Clone, Copy)]
pub struct Buf {
    pub ptr: *mut u8,
    pub count: i64,
    pub dt: DtypeId,
}

impl Buf {
    pub const NONE: Buf = Buf {
        ptr: std::ptr::null_mut(),
        count: 0,
        dt: DtypeId::new(0),
    };
}

/// Where at the target: rank in the window's group, displacement (in the target's units),
/// count and datatype.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub rank: i32,
    pub disp: i64,
    pub count: i64,
    pub dt: DtypeId,
}

/// Which operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Put,
    Get,
    /// MPI_Accumulate with an operation (engine id).
    Acc(u32),
    /// MPI_Get_accumulate / MPI_Fetch_and_op.
    GetAcc(u32),
    /// MPI_Compare_and_swap (the compare value is passed apart).
    Cas,
}

impl What {
    fn name(self) -> &'static str {
        match self {
            What::Put => "put",
            What::Get => "get",
            What::Acc(_) => "accumulate",
            What::GetAcc(_) => "get-accumulate",
            What::Cas => "compare-and-swap",
        }
    }
}

/// The segments (absolute offset in the target's window, bytes) that `count` elements of
/// `dt` at byte displacement `start` name, adjacent ones merged, in type-map order.
pub(crate) fn segments(dt: &Datatype, count: usize, start: i64) -> Result<Vec<(u64, u64)>> {
    let mut v: Vec<(u64, u64)> = Vec::new();
    let mut bad = None;
    let mut push = |off: isize, len: usize| {
        if len == 0 {
            return;
        }
        let a = start.checked_add(off as i64);
        match a {
            Some(a) if a >= 0 => {
                let a = a as u64;
                match v.last_mut() {
                    Some(l) if l.0 + l.1 == a => l.1 += len as u64,
                    _ => v.push((a, len as u64)),
                }
            }
            _ => bad = Some(off),
        }
    };
    if let Some(off) = dt.contiguous_span(count) {
        push(off, dt.size * count);
    } else {
        let ext = dt.extent();
        for i in 0..count as isize {
            for_each_block(&dt.ops, i * ext, &mut |off, len| push(off, len));
        }
    }
    if bad.is_some() {
        return err!(
            RmaRange,
            "the target datatype reaches before the start of the target's window"
        );
    }
    Ok(v)
}

fn committed<'a>(e: &'a Engine, dt: DtypeId, what: &str) -> Result<&'a Arc<Datatype>> {
    let d = e.dtype(dt)?;
    if !d.committed {
        return err!(
            Type,
            "the {what} datatype {} has not been committed (call MPI_Type_commit)",
            d.describe()
        );
    }
    Ok(d)
}

fn count_of(c: i64, what: &str) -> Result<usize> {
    if c < 0 {
        return err!(Count, "negative {what} count {c}");
    }
    Ok(c as usize)
}

/// A buffer's bytes: the pointer to its contiguous bytes, or a packed copy.
struct Data {
    ptr: *const u8,
    _packed: Option<Vec<u8>>,
}

/// # Safety
/// `buf` holds `count` elements of `d`.
unsafe fn packed(buf: *const u8, count: usize, d: &Datatype) -> Data {
    if let Some(off) = d.contiguous_span(count) {
        return Data {
            ptr: buf.wrapping_offset(off),
            _packed: None,
        };
    }
    let mut v = Vec::with_capacity(d.size * count);
    d.pack(buf, count, &mut v);
    Data {
        ptr: v.as_ptr(),
        _packed: Some(v),
    }
}

/// Where a result goes.
#[derive(Clone)]
pub(crate) struct Sinkhole {
    /// Contiguous: the bytes go straight here.
    pub direct: Option<*mut u8>,
    /// Else unpack into this buffer.
    pub unpack: (*mut u8, usize, Arc<Datatype>),
}

impl Sinkhole {
    fn new(b: *mut u8, count: usize, d: &Arc<Datatype>) -> Sinkhole {
        Sinkhole {
            direct: d.contiguous_span(count).map(|off| b.wrapping_offset(off)),
            unpack: (b, count, d.clone()),
        }
    }

    /// A staging buffer when the result is not contiguous.
    fn stage(&self, len: usize) -> Option<Vec<u8>> {
        self.direct.is_none().then(|| vec![0u8; len])
    }

    /// Where byte 0 of the packed result goes now.
    fn dst(&self, staged: &mut Option<Vec<u8>>) -> *mut u8 {
        match (self.direct, staged) {
            (Some(p), _) => p,
            (None, Some(v)) => v.as_mut_ptr(),
            (None, None) => std::ptr::null_mut(),
        }
    }

    /// Unpack a staged result.
    ///
    /// # Safety
    /// The user's buffer holds the elements.
    pub unsafe fn finish(&self, staged: Option<Vec<u8>>) {
        if let Some(v) = staged {
            let (b, n, d) = &self.unpack;
            d.unpack(&v, *b, *n);
        }
    }
}

/// One operation, checked and resolved: what the mechanisms need.
struct Resolved {
    win: u32,
    target: usize,
    gpid: Gpid,
    mech: Mech,
    segs: Vec<(u64, u64)>,
    bytes: usize,
    /// Accumulate: the bound operation and its element type id.
    acc: Option<(Arc<Acc>, u8, u16)>,
    fetch: bool,
    /// The window's memory takes atomics (allocated in shared memory).
    atomic: bool,
    ctl: *const super::ctl::Ctl,
    own: bool,
}

/// MPI_Put and friends (see [`What`]). `origin` is the data sent (the destination of a Get);
/// `result` receives the target's values of a get-accumulate or compare-and-swap; `compare`
/// is the compare value of a compare-and-swap. Returns a request when `request` is asked (the
/// MPI_R* forms).
///
/// # Safety
/// The buffers hold what their counts and datatypes say and stay valid until the operation
/// completes (MPI's rules for one-sided buffers).
pub unsafe fn op(
    win: u32,
    what: What,
    origin: Buf,
    result: Buf,
    compare: *const u8,
    t: Target,
    request: bool,
) -> Result<Option<ReqId>> {
    with(|e| {
        if e.cfg.rma_fastpath && !request && e.rma_fast(win, what, origin, result, compare, t) {
            return Ok(None);
        }
        // Writes without a request need no answer: a progress pass (syscalls on every TCP
        // connection) before each of them cost more than the write itself in a stream of
        // small puts, so only every POKE_EVERY-th makes one. Every other call on the window
        // still does (`Win::am`).
        if !matches!(what, What::Put | What::Acc(_) | What::Get) || request || e.rma.poke_due() {
            e.rma_poke(win);
        }
        let small = match what {
            What::Put | What::Get if !request => e.rma_am_small(win, what == What::Get, origin, t),
            _ => None,
        };
        if small.is_some() {
            return Ok(None);
        }
        e.rma_op(win, what, origin, result, compare, t, request)
    })?
}

/// The fast path alone (see [`Engine::rma_fast`]), for the C entry points to try before
/// anything else: true when the operation is done; false sends it to [`op`], which checks
/// and reports. A small function whose answer stays in a register: the general path's frame,
/// spills and `Result` are not paid by the operations that the fast path takes.
///
/// # Safety
/// As [`op`].
#[inline]
pub unsafe fn op_fast(
    win: u32,
    what: What,
    origin: Buf,
    result: Buf,
    compare: *const u8,
    t: Target,
) -> bool {
    crate::mpi::global::try_with(|e| {
        e.cfg.rma_fastpath && e.rma_fast(win, what, origin, result, compare, t)
    })
    .unwrap_or(false)
}

/// MPI_Put and MPI_Get (`get`) of `count` elements of `dt` on both sides, on the fast path
/// alone: [`op_fast`] narrowed to the two commonest operations, with every argument a scalar
/// passed in registers to one out-of-line body ([`put_get_body`]). Without it the closure of
/// [`op_fast`] captured its arguments by reference, so each operation spilled them to the
/// stack and read them back (about 230 instructions per 64-byte put; see bench/rma-count).
/// True: done; false: the caller goes to the general path, which checks and reports.
///
/// # Safety
/// As [`op`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_get_fast(
    win: u32,
    get: bool,
    origin: *mut u8,
    rank: i32,
    disp: i64,
    count: i64,
    dt: DtypeId,
) -> bool {
    crate::mpi::global::try_with(|e| put_get_body(e, win, get, origin, rank, disp, count, dt))
        .unwrap_or(false)
}

/// The body of [`put_get_fast`]: the checks of [`Engine::rma_fast`] for a put or get, then
/// the copy.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_get_body(
    e: &mut Engine,
    win: u32,
    get: bool,
    origin: *mut u8,
    rank: i32,
    disp: i64,
    count: i64,
    dt: DtypeId,
) -> bool {
    if !e.cfg.rma_fastpath {
        return false;
    }
    match e.rma_fast_span(win, rank, disp, count, dt) {
        Some((dst, bytes, _)) => {
            if get {
                crate::mem::copy_overlap(dst, origin, bytes)
            } else {
                crate::mem::copy_overlap(origin, dst, bytes)
            }
            true
        }
        None => false,
    }
}

impl Engine {
    /// The fast path: an operation on `count` elements of one contiguous datatype on both
    /// sides (and the result's), at a target whose window memory is mapped here
    /// ([`Mech::Direct`]), in a window without active messages. It does what
    /// [`Engine::rma_op`] and `rma_direct` would, without their allocations, reference
    /// counts and segment lists. True: done; false: not such an operation, or one the general
    /// path must check and report (a bad rank, count, datatype, range or epoch), so it goes
    /// there.
    ///
    /// # Safety
    /// As [`op`].
    #[inline]
    unsafe fn rma_fast(
        &mut self,
        win: u32,
        what: What,
        origin: Buf,
        result: Buf,
        compare: *const u8,
        t: Target,
    ) -> bool {
        self.rma_fast_in(win, what, origin, result, compare, t)
            .is_some()
    }

    /// [`Engine::rma_fast`] with `?` for its many ways out (None: not taken).
    #[inline(always)]
    unsafe fn rma_fast_in(
        &mut self,
        win: u32,
        what: What,
        origin: Buf,
        result: Buf,
        compare: *const u8,
        t: Target,
    ) -> Option<()> {
        if origin.count != t.count || origin.dt != t.dt {
            return None;
        }
        let (dst, bytes, ctl) = self.rma_fast_span(win, t.rank, t.disp, t.count, t.dt)?;
        let n = t.count as usize;
        let st = &mut self.rma;
        match what {
            What::Put => crate::mem::copy_overlap(origin.ptr, dst, bytes),
            What::Get => crate::mem::copy_overlap(dst, origin.ptr, bytes),
            What::Acc(_) | What::GetAcc(_) | What::Cas => {
                let fetch = !matches!(what, What::Acc(_));
                if ctl.is_null() || (fetch && (result.dt != t.dt || result.count != t.count)) {
                    return None;
                }
                let el = if what == What::Cas {
                    acc::predefined_cas_elem(t.dt)?
                } else {
                    acc::predefined_elem(t.dt)?
                };
                let o = match what {
                    What::Acc(o) | What::GetAcc(o) => o,
                    _ => REPLACE,
                };
                if o >= NPREDEFINED {
                    return None;
                }
                let a = st.accs.get_ref(o as u8, el).ok()?;
                if bytes % a.size != 0 {
                    return None;
                }
                let mode = acc::Mode::Atomic(&*ctl);
                match what {
                    What::Cas => {
                        if n != 1 {
                            return None;
                        }
                        acc::compare_and_swap(bytes, origin.ptr, compare, dst, result.ptr, mode)
                    }
                    What::GetAcc(o) => {
                        let src = if o == NO_OP {
                            std::ptr::null()
                        } else {
                            origin.ptr as *const u8
                        };
                        a.apply(src, dst, bytes / a.size, Some(result.ptr), mode)
                    }
                    _ => a.apply(origin.ptr, dst, bytes / a.size, None, mode),
                }
            }
        }
        Some(())
    }

    /// Where `count` elements of `dt` at `disp` of `rank`'s window memory lie: the window,
    /// the target's [`Peer`], the byte offset in its memory and the length. None unless
    /// `takes` accepts the window and the target (asked first: the cheapest refusal), the
    /// window is not dynamic, the datatype is committed and one dense run, the range lies in
    /// the target's window and an access epoch to the target is open. The checks both
    /// shortcuts share ([`Engine::rma_fast_span`], [`Engine::rma_am_small`]); the general
    /// path makes them again and reports.
    #[inline(always)]
    fn rma_dense_span(
        &self,
        win: u32,
        rank: i32,
        disp: i64,
        count: i64,
        dt: DtypeId,
        takes: impl Fn(&Win, &Peer) -> bool,
    ) -> Option<(&Win, &Peer, u64, usize)> {
        let w = self.rma.wins.get(win as usize)?.as_ref()?;
        // A negative rank becomes an index past any window.
        let p = w.peers.get(rank as usize)?;
        if !takes(w, p) || count <= 0 || w.flavor == Flavor::Dynamic {
            return None;
        }
        let n = count as usize;
        let d = self.dtypes.get(dt.idx())?.as_ref()?;
        // `contig` (one dense run whatever the count) answers the common case without a call.
        if !d.committed || d.size == 0 || !(d.contig || d.contiguous_span(n) == Some(0)) {
            return None;
        }
        let bytes = d.size.checked_mul(n)?;
        let start = disp.checked_mul(p.disp_unit as i64)?;
        if start < 0 || (start as u64).checked_add(bytes as u64)? > p.size {
            return None;
        }
        if !w.in_access_epoch(rank as usize) {
            return None;
        }
        Some((w, p, start as u64, bytes))
    }

    /// The target bytes of a fast-path operation: where `count` elements of `dt` at `disp` of
    /// `rank`'s window memory lie here, their length, and the target's accumulate control
    /// block. None unless the window has no active messages, the target is mapped here
    /// ([`Mech::Direct`]) and [`Engine::rma_dense_span`] holds.
    #[inline(always)]
    fn rma_fast_span(
        &self,
        win: u32,
        rank: i32,
        disp: i64,
        count: i64,
        dt: DtypeId,
    ) -> Option<(*mut u8, usize, *const super::ctl::Ctl)> {
        let direct = |w: &Win, p: &Peer| !w.am && w.atomic && matches!(p.mech, Mech::Direct(_));
        let (w, p, start, bytes) = self.rma_dense_span(win, rank, disp, count, dt, direct)?;
        let Mech::Direct(base) = p.mech else {
            return None;
        };
        let ctl = if rank as usize == w.rank {
            w.ctl
        } else {
            p.ctl
        };
        Some((base.wrapping_add(start as usize), bytes, ctl))
    }

    /// A small put or get by active messages without the general path: `count` elements of
    /// one contiguous datatype on both sides, at most [`super::MERGE_MAX`] bytes (a get: at
    /// most [`GET_SMALL_MAX`] and one transport payload), to a target
    /// reached by frames in an open epoch, in range. A put joins the last queued frame
    /// (`State::merge_put`) or queues one, as `rma_am` would; a get queues its frame without
    /// writing it (the next progress pass, one in 16 operations or the call that completes it,
    /// writes a run of them at once) and its answer goes straight into the origin buffer. No
    /// datatype is resolved into segment lists, pieces, packed copies or staging (each an
    /// allocation: in a stream of 8-byte operations across hosts a put took about 1 us, Open
    /// MPI 0.3). None: the general path takes it (and checks and reports).
    ///
    /// # Safety
    /// As [`op`].
    unsafe fn rma_am_small(&mut self, win: u32, get: bool, origin: Buf, t: Target) -> Option<()> {
        if origin.count != t.count || origin.dt != t.dt {
            return None;
        }
        let am = |_: &Win, p: &Peer| matches!(p.mech, Mech::Am);
        let (w, p, start, bytes) = self.rma_dense_span(win, t.rank, t.disp, t.count, t.dt, am)?;
        // A put must fit a merged frame; a get's answer one piece of the general path (at
        // least 4 KiB whatever the transport: `Engine::rma_am`).
        if bytes > super::MERGE_MAX
            && (!get || bytes > GET_SMALL_MAX || bytes > self.net.caps(p.gpid).max_payload)
        {
            return None;
        }
        let target = t.rank as usize;
        let (to, ctx) = (p.gpid, w.ctx);
        let rma = &mut self.rma;
        let mut h = RmaHeader::new(if get { RmaKind::Get } else { RmaKind::Put }, ctx);
        h.disp = start;
        h.len = bytes as u32;
        let framed = if get {
            let op = rma.id();
            h.id = rma.id();
            rma.fetching.insert(
                op,
                Fetching {
                    win,
                    target,
                    dst: origin.ptr,
                    staged: None,
                    unpack: None,
                    left: bytes,
                    request: None,
                    error: None,
                },
            );
            rma.waiting.insert(
                h.id,
                Waiting::Data {
                    op,
                    at: 0,
                    len: bytes,
                },
            );
            rma.send(to, h, Vec::new());
            true
        } else {
            let data = std::slice::from_raw_parts(origin.ptr as *const u8, bytes);
            let merged = rma.merge_put(to, ctx, &[(start, bytes as u64)], data);
            if !merged {
                rma.send_soft(to, h, data.to_vec());
            }
            !merged
        };
        let peer = &mut rma.wins[win as usize].as_mut()?.peers[target];
        if get {
            peer.outstanding += 1;
        } else {
            peer.unflushed = true;
        }
        if framed {
            peer.sent_ops += 1;
        }
        Some(())
    }

    fn rma_done_request(&mut self, win: u32, request: bool) -> Result<Option<ReqId>> {
        if !request {
            return Ok(None);
        }
        let comm = self.rma.win(win)?.comm;
        let mut r = Request::new(Kind::Done, comm);
        r.complete = true;
        r.status = Status::EMPTY;
        Ok(Some(self.pml.reqs.insert(r)))
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn rma_op(
        &mut self,
        win: u32,
        what: What,
        origin: Buf,
        result: Buf,
        compare: *const u8,
        t: Target,
        request: bool,
    ) -> Result<Option<ReqId>> {
        let w = self.rma.win(win)?;
        if t.rank == crate::mpi::request::PROC_NULL {
            return self.rma_done_request(win, request);
        }
        let n = w.peers.len();
        if t.rank < 0 || t.rank as usize >= n {
            return err!(
                Rank,
                "target rank {} is out of range for a window of {n} processes",
                t.rank
            );
        }
        let target = t.rank as usize;
        if !w.in_access_epoch(target) {
            return err!(
                RmaSync,
                "no access epoch to rank {target} is open (call MPI_Win_fence, MPI_Win_start, MPI_Win_lock or MPI_Win_lock_all first)"
            );
        }
        let tcount = count_of(t.count, "target")?;
        let ocount = count_of(origin.count, "origin")?;
        let td = committed(self, t.dt, "target")?.clone();
        let tbytes = td
            .packed_size(tcount)
            .ok_or_else(|| crate::mpi_error!(Count, "target count {tcount} overflows"))?;
        // The operation and its element type, checked before anything moves.
        let (op, uses_origin, fetch) = match what {
            What::Put => (None, true, false),
            What::Get => (None, true, true),
            What::Acc(o) => (Some(o), true, false),
            What::GetAcc(o) => (Some(o), o as usize != builtin_index(Builtin::NoOp), true),
            What::Cas => (None, true, true),
        };
        if let Some(o) = op {
            if o >= NPREDEFINED {
                return err!(
                    Op,
                    "one-sided accumulates take predefined operations only, not user-defined ones"
                );
            }
        }
        let od = if uses_origin {
            Some(committed(self, origin.dt, "origin")?.clone())
        } else {
            None
        };
        let obytes = match &od {
            Some(d) => d
                .packed_size(ocount)
                .ok_or_else(|| crate::mpi_error!(Count, "origin count {ocount} overflows"))?,
            None => tbytes,
        };
        let rd = if matches!(what, What::GetAcc(_) | What::Cas) {
            Some(committed(self, result.dt, "result")?.clone())
        } else {
            None
        };
        if tbytes == 0 && obytes == 0 {
            return self.rma_done_request(win, request);
        }
        if obytes != tbytes {
            return err!(
                Count,
                "the origin ({obytes} bytes) and target ({tbytes} bytes) of a {} differ in size",
                what.name()
            );
        }
        if let Some(d) = &rd {
            let rcount = count_of(result.count, "result")?;
            if d.packed_size(rcount) != Some(tbytes) {
                return err!(
                    Count,
                    "the result buffer ({} bytes) and the target ({tbytes} bytes) differ in size",
                    d.size * rcount
                );
            }
        }
        let acc = match (what, op) {
            (What::Acc(o) | What::GetAcc(o), Some(_)) => {
                let b = Builtin::ALL[o as usize];
                let telem = acc_elem_of(&self.dtypes, t.dt);
                let elem = match (b, telem) {
                    (_, Some(el)) => {
                        if let (Some(_), Some(oe)) = (&od, acc_elem_of(&self.dtypes, origin.dt)) {
                            if oe != el && !matches!(b, Builtin::Replace | Builtin::NoOp) {
                                return err!(
                                    Type,
                                    "the origin and target datatypes of an accumulate are made of different basic types"
                                );
                            }
                        }
                        acc::elem_id(el).ok_or_else(|| {
                            crate::mpi_error!(Type, "no predefined type for the element")
                        })?
                    }
                    (Builtin::Replace | Builtin::NoOp, None) => acc::byte_id(),
                    (_, None) => {
                        return err!(
                            Op,
                            "{} needs a target datatype made of one basic type",
                            b.name()
                        )
                    }
                };
                let a = self.rma.accs.get(o as u8, elem)?;
                Some((a, o as u8, elem))
            }
            (What::Cas, _) => {
                // A predefined type (one of MPI_Type_create_f90_integer's too), not a derived
                // one, of the kinds the standard lists.
                let el = match elem_of(&self.dtypes, t.dt) {
                    Some(e @ Elem::Basic(b))
                        if (t.dt.idx() < PREDEFINED_NAMES.len() || td.predefined)
                            && acc::cas_allowed(b) =>
                    {
                        acc::elem_id(e)
                    }
                    _ => None,
                }
                .ok_or_else(|| {
                    crate::mpi_error!(
                        Type,
                        "MPI_Compare_and_swap takes a predefined integer, logical or byte type, not {}",
                        td.describe()
                    )
                })?;
                // REPLACE on the element: the kernel is never used, only its size.
                let a = self
                    .rma
                    .accs
                    .get(builtin_index(Builtin::Replace) as u8, el)?;
                Some((a, 0, el))
            }
            _ => None,
        };
        let w = self.rma.win(win)?;
        let p = &w.peers[target];
        let start = if w.flavor == Flavor::Dynamic {
            t.disp
        } else {
            t.disp
                .checked_mul(p.disp_unit as i64)
                .ok_or_else(|| crate::mpi_error!(Disp, "displacement {} overflows", t.disp))?
        };
        let segs = segments(&td, tcount, start)?;
        // Segments may split an element (a pair type with a gap between value and index):
        // every mechanism applies the operation across them (`Acc::apply_runs`, `cut`).
        if let Some((a, _, _)) = &acc {
            if tbytes % a.size != 0 {
                return err!(
                    Type,
                    "the target datatype holds no whole number of the accumulate's elements"
                );
            }
        }
        if w.flavor != Flavor::Dynamic {
            if let Some(s) = segs.iter().find(|s| s.0 + s.1 > p.size) {
                return err!(
                    RmaRange,
                    "the {} reaches byte {} of rank {target}'s window of {} bytes",
                    what.name(),
                    s.0 + s.1,
                    p.size
                );
            }
        } else if p.mech == Mech::SelfDyn {
            if let Some(s) = segs.iter().find(|s| !w.holds(s.0, s.1)) {
                return err!(
                    RmaRange,
                    "address {:#x} ({} bytes) is not in memory attached to the window",
                    s.0,
                    s.1
                );
            }
        }
        let r = Resolved {
            win,
            target,
            gpid: p.gpid,
            mech: p.mech,
            segs,
            bytes: tbytes,
            acc,
            fetch,
            atomic: w.atomic,
            ctl: if target == w.rank { w.ctl } else { p.ctl },
            own: target == w.rank,
        };
        // The data sent, and where answers go.
        let data = match (&od, what) {
            (Some(d), What::Put | What::Acc(_) | What::GetAcc(_) | What::Cas) => {
                Some(packed(origin.ptr, ocount, d))
            }
            _ => None,
        };
        let sink = match what {
            What::Get => Some(Sinkhole::new(
                origin.ptr,
                ocount,
                od.as_ref().expect("origin"),
            )),
            What::GetAcc(_) | What::Cas => Some(Sinkhole::new(
                result.ptr,
                result.count as usize,
                rd.as_ref().expect("result"),
            )),
            _ => None,
        };
        let src = data.as_ref().map_or(std::ptr::null(), |d| d.ptr);
        let cmp = if what == What::Cas {
            let d = od.as_ref().expect("origin");
            packed(compare, 1, d).ptr
        } else {
            std::ptr::null()
        };
        // A put from the user's contiguous buffer may be sent from it (`State::send_lent`):
        // without a request the buffer is the user's again only after a call that completes
        // the operation, and those wait for the transport.
        let lend =
            !request && what == What::Put && data.as_ref().is_some_and(|d| d._packed.is_none());
        let done = self.rma_move(&r, what, src, cmp, sink.clone(), request, lend)?;
        match done {
            Some(slot) => Ok(Some(slot)),
            None => self.rma_done_request(win, request),
        }
    }

    /// Move the data by the target's mechanism. Returns the request of an operation that
    /// completes later (active messages that read), None when it is complete (or its request
    /// can be complete now).
    unsafe fn rma_move(
        &mut self,
        r: &Resolved,
        what: What,
        src: *const u8,
        cmp: *const u8,
        sink: Option<Sinkhole>,
        request: bool,
        lend: bool,
    ) -> Result<Option<ReqId>> {
        match r.mech {
            Mech::Direct(base) => {
                self.rma_direct(r, what, src, cmp, sink, |off| {
                    base.wrapping_add(off as usize)
                });
                Ok(None)
            }
            Mech::SelfDyn => {
                self.rma_direct(r, what, src, cmp, sink, |off| off as usize as *mut u8);
                Ok(None)
            }
            Mech::Cma(region) => match self.rma_cma(r, region, what, src, cmp, sink.clone()) {
                Ok(()) => Ok(None),
                Err(Fallback::Range(e)) => Err(e),
                Err(Fallback::Am) => {
                    // The kernel refused (or a dynamic window's table overflowed): the
                    // target handles this operation, and, after a refusal, every later one.
                    self.rma_am(r, what, src, cmp, sink, request, lend)
                }
            },
            Mech::Am => self.rma_am(r, what, src, cmp, sink, request, lend),
        }
    }

    /// Load/store on memory mapped here (`at` maps a window offset to an address).
    unsafe fn rma_direct(
        &mut self,
        r: &Resolved,
        what: What,
        src: *const u8,
        cmp: *const u8,
        sink: Option<Sinkhole>,
        at: impl Fn(u64) -> *mut u8,
    ) {
        let ctl = &*r.ctl;
        let mut staged = sink.as_ref().and_then(|s| s.stage(r.bytes));
        let dst = sink.as_ref().map(|s| s.dst(&mut staged));
        // Our own window of user memory (or a dynamic one): origins on the host accumulate
        // into it under its lock, so do we.
        let locked = r.acc.is_some() && !r.atomic;
        if locked {
            ctl.acc_lock();
        }
        let mode = if r.atomic {
            acc::Mode::Atomic(ctl)
        } else {
            acc::Mode::Locked
        };
        if let (What::Acc(_) | What::GetAcc(_), Some((a, _, _))) = (what, &r.acc) {
            let runs = r.segs.iter().map(|&(off, len)| (at(off), len as usize));
            a.apply_runs(src, runs, dst, mode);
        } else {
            let mut done = 0usize;
            for &(off, len) in &r.segs {
                let p = at(off);
                let len = len as usize;
                match what {
                    What::Put => crate::mem::copy_overlap(src.add(done), p, len),
                    What::Get => crate::mem::copy_overlap(p, dst.expect("sink").add(done), len),
                    What::Cas => {
                        acc::compare_and_swap(len, src, cmp, p, dst.expect("sink"), mode);
                    }
                    What::Acc(_) | What::GetAcc(_) => unreachable!("an accumulate has its kernel"),
                }
                done += len;
            }
        }
        if locked {
            ctl.acc_unlock();
        }
        if let Some(s) = sink {
            s.finish(staged);
        }
        let _ = r.own;
    }

    /// Cross-memory attach through the transport.
    unsafe fn rma_cma(
        &mut self,
        r: &Resolved,
        region: Option<crate::transport::Region>,
        what: What,
        src: *const u8,
        cmp: *const u8,
        sink: Option<Sinkhole>,
    ) -> std::result::Result<(), Fallback> {
        let ctl = &*r.ctl;
        // Where each segment is: (region, offset in it, length). In a dynamic window a
        // segment may run on from one attached region into the next one adjacent to it: a
        // part in each.
        let mut places = Vec::with_capacity(r.segs.len());
        for &(off, len) in &r.segs {
            let Some(reg) = region else {
                let (mut o, mut l) = (off, len);
                while l > 0 {
                    let found = match ctl.lookup(o, l) {
                        Lookup::Missing => ctl.lookup(o, 1),
                        x => x,
                    };
                    match found {
                        Lookup::Found(a) if !a.region.is_none() => {
                            let take = l.min(a.base + a.len - o);
                            places.push((a.region, (o - a.base) as usize, take as usize));
                            o += take;
                            l -= take;
                        }
                        Lookup::Found(_) | Lookup::Unknown => return Err(Fallback::Am),
                        Lookup::Missing => {
                            return Err(Fallback::Range(crate::mpi_error!(
                                RmaRange,
                                "address {o:#x} ({l} bytes) is not in memory attached to rank {}'s window",
                                r.target
                            )))
                        }
                    }
                }
                continue;
            };
            places.push((reg, off as usize, len as usize));
        }
        if what == What::Cas && places.len() != 1 {
            // An element across two regions: the target checks it.
            return Err(Fallback::Am);
        }
        let mut staged = sink.as_ref().and_then(|s| s.stage(r.bytes));
        let dst = sink.as_ref().map(|s| s.dst(&mut staged));
        let locked = r.acc.is_some();
        if locked {
            ctl.acc_lock();
        }
        let mut done = 0usize;
        let mut failed = false;
        let mut tmp: Vec<u8> = Vec::new();
        // An accumulate reads every segment, applies the operation to them together (an
        // element may straddle two: `Acc::apply_runs`), then writes every segment back.
        let nsegs = places.len();
        let gathered = matches!(what, What::Acc(_) | What::GetAcc(_));
        if gathered {
            tmp.resize(r.bytes, 0);
        }
        let steps = if gathered { 2 * nsegs } else { nsegs };
        for step in 0..steps {
            let (reg, at, len) = places[step % nsegs];
            if gathered && step == nsegs {
                let (a, _, _) = r.acc.as_ref().expect("acc");
                a.apply(
                    src,
                    tmp.as_mut_ptr(),
                    r.bytes / a.size,
                    dst,
                    acc::Mode::Locked,
                );
                done = 0;
            }
            let res = match what {
                What::Put => self.net.put(
                    r.gpid,
                    &reg,
                    at,
                    Span::new(src.add(done) as *mut u8, len),
                    Token::NONE,
                ),
                What::Get => self.net.get(
                    r.gpid,
                    &reg,
                    at,
                    Span::new(dst.expect("sink").add(done), len),
                    Token::NONE,
                ),
                What::Acc(_) | What::GetAcc(_) if step < nsegs => self.net.get(
                    r.gpid,
                    &reg,
                    at,
                    Span::new(tmp.as_mut_ptr().add(done), len),
                    Token::NONE,
                ),
                What::Acc(_) | What::GetAcc(_) => self.net.put(
                    r.gpid,
                    &reg,
                    at,
                    Span::new(tmp.as_mut_ptr().add(done), len),
                    Token::NONE,
                ),
                What::Cas => {
                    tmp.resize(len, 0);
                    let got = self.net.get(
                        r.gpid,
                        &reg,
                        at,
                        Span::new(tmp.as_mut_ptr(), len),
                        Token::NONE,
                    );
                    if got.is_ok() {
                        let old = dst.expect("sink");
                        acc::compare_and_swap(
                            len,
                            src,
                            cmp,
                            tmp.as_mut_ptr(),
                            old,
                            acc::Mode::Locked,
                        );
                        self.net.put(
                            r.gpid,
                            &reg,
                            at,
                            Span::new(tmp.as_mut_ptr(), len),
                            Token::NONE,
                        )
                    } else {
                        got
                    }
                }
            };
            match res {
                Ok(_) => {}
                Err(CopyError::Refused(why)) if step == 0 => {
                    if self.cfg.verbose > 0 {
                        eprintln!(
                            "Protean[{}]: cross-memory attach to rank {} refused ({why}); its window operations go through it",
                            self.rank, r.target
                        );
                    }
                    failed = true;
                    break;
                }
                Err(e) => {
                    if locked {
                        ctl.acc_unlock();
                    }
                    return Err(Fallback::Range(crate::mpi_error!(
                        Other,
                        "one-sided {} to rank {}: {e}",
                        what.name(),
                        r.target
                    )));
                }
            }
            done += len;
        }
        if locked {
            ctl.acc_unlock();
        }
        if failed {
            if let Ok(w) = self.rma.win_mut(r.win) {
                w.peers[r.target].mech = Mech::Am;
                w.am = true;
            }
            return Err(Fallback::Am);
        }
        if let Some(s) = sink {
            s.finish(staged);
        }
        Ok(())
    }

    /// Active messages: frames now, answers later. `lend`: `src` is the user's buffer, which
    /// large pieces are sent from.
    #[allow(clippy::too_many_arguments)]
    unsafe fn rma_am(
        &mut self,
        r: &Resolved,
        what: What,
        src: *const u8,
        cmp: *const u8,
        sink: Option<Sinkhole>,
        request: bool,
        lend: bool,
    ) -> Result<Option<ReqId>> {
        let w = self.rma.win(r.win)?;
        let ctx = w.ctx;
        let comm = w.comm;
        let budget = self.net.caps(r.gpid).max_payload.clamp(4096, 1 << 20);
        let elem = r.acc.as_ref().map_or(1, |(a, _, _)| a.size);
        let kind = match what {
            What::Put => RmaKind::Put,
            What::Get => RmaKind::Get,
            What::Acc(_) | What::GetAcc(_) => RmaKind::Acc,
            What::Cas => RmaKind::Cas,
        };
        let pieces: Vec<Piece> = if what == What::Cas {
            vec![Piece {
                segs: r.segs.clone(),
                at: 0,
                len: r.bytes,
            }]
        } else {
            cut(&r.segs, elem, budget)
        };
        // Operations that read are answered piece by piece into one result.
        let mut slot = None;
        let op_id = if r.fetch {
            let id = self.rma.id();
            let s = sink.expect("a reading operation has a sink");
            let mut staged = s.stage(r.bytes);
            let dst = s.dst(&mut staged);
            let req = if request {
                let mut q = Request::new(Kind::Done, comm);
                q.complete = false;
                let sl = self.pml.reqs.insert(q);
                slot = Some(sl);
                Some(sl)
            } else {
                None
            };
            self.rma.fetching.insert(
                id,
                Fetching {
                    win: r.win,
                    target: r.target,
                    dst,
                    staged,
                    unpack: s.direct.is_none().then(|| s.unpack.clone()),
                    left: r.bytes,
                    request: req,
                    error: None,
                },
            );
            id
        } else {
            0
        };
        // A small write waits (`State::send_soft`); anything else goes now: the target may be
        // waiting for exactly this, and a large write is worth overlapping.
        let soft = !r.fetch && r.bytes <= DEFER_MAX;
        let rma = &mut self.rma;
        if soft
            && what == What::Put
            && pieces.len() == 1
            && rma.merge_put(
                r.gpid,
                ctx,
                &pieces[0].segs,
                std::slice::from_raw_parts(src, r.bytes),
            )
        {
            let peer = &mut rma.win_mut(r.win)?.peers[r.target];
            peer.unflushed = true;
            return Ok(None);
        }
        for p in &pieces {
            let mut h = RmaHeader::new(kind, ctx);
            let mut payload = Vec::new();
            if p.segs.len() == 1 {
                h.disp = p.segs[0].0;
            } else {
                h.nsegs = p.segs.len() as u32;
                frame::put_segments(&mut payload, &p.segs);
            }
            h.len = p.len as u32;
            if let Some((_, o, el)) = &r.acc {
                h.op = *o;
                h.elem = *el;
            }
            if lend && what == What::Put && p.segs.len() == 1 && super::lends(p.len) {
                let release = super::Release::Origin {
                    win: r.win,
                    target: r.target,
                };
                rma.send_lent(r.gpid, h, payload, src.add(p.at), p.len, release);
                continue;
            }
            match what {
                What::Put | What::Acc(_) => {
                    payload.extend_from_slice(std::slice::from_raw_parts(src.add(p.at), p.len))
                }
                What::GetAcc(_) if !src.is_null() => {
                    payload.extend_from_slice(std::slice::from_raw_parts(src.add(p.at), p.len))
                }
                What::Cas => {
                    h.op = 0;
                    payload.extend_from_slice(std::slice::from_raw_parts(src, p.len));
                    payload.extend_from_slice(std::slice::from_raw_parts(cmp, p.len));
                }
                _ => {}
            }
            if r.fetch {
                let id = rma.id();
                h.id = id;
                if kind == RmaKind::Acc {
                    h.flags = frame::RMA_FETCH;
                }
                rma.waiting.insert(
                    id,
                    Waiting::Data {
                        op: op_id,
                        at: p.at,
                        len: p.len,
                    },
                );
            }
            if soft {
                rma.send_soft(r.gpid, h, payload);
            } else {
                rma.send(r.gpid, h, payload);
            }
        }
        let w = rma.win_mut(r.win)?;
        let peer = &mut w.peers[r.target];
        peer.sent_ops += pieces.len() as u64;
        if r.fetch {
            peer.outstanding += pieces.len() as u32;
        }
        if matches!(what, What::Put | What::Acc(_) | What::GetAcc(_) | What::Cas) {
            peer.unflushed = true;
        }
        if !soft {
            self.rma_push();
        }
        Ok(slot)
    }
}

/// Gets of at most this many bytes take [`Engine::rma_am_small`] (their frame waits to be
/// written with others; across hosts 64 gets of 8 KiB + flush, each frame written at once by
/// the general path, ran at 0.54-0.68x Open MPI's rate).
const GET_SMALL_MAX: usize = 32 << 10;

/// Writes by active messages of at most this many bytes may wait in the outbox
/// (`State::send_soft`; over TCP a put + flush took 1.4x a get + flush with a Flush frame of
/// its own, and 64 puts cost 64 writes to the socket).
const DEFER_MAX: usize = 16 << 10;

/// Why cross-memory attach did not do an operation.
enum Fallback {
    /// Send it to the target instead.
    Am,
    /// An error for the caller.
    Range(crate::error::MpiError),
}

/// Engine ids of MPI_REPLACE and MPI_NO_OP (checked by a test against [`Builtin::ALL`]).
const REPLACE: u32 = 12;
const NO_OP: u32 = 13;

fn builtin_index(b: Builtin) -> usize {
    Builtin::ALL.iter().position(|x| *x == b).expect("builtin")
}

impl Win {
    /// May this process access `target` now?
    #[inline]
    pub(crate) fn in_access_epoch(&self, target: usize) -> bool {
        self.fence_open
            || self.lock_all
            || self.peers[target].lock.is_some()
            || self.access.as_ref().is_some_and(|g| g.contains(&target))
    }
}

impl State {
    /// The result of a reading operation is complete: unpack it and complete its request.
    pub(crate) fn finish_fetch(&mut self, pml: &mut crate::mpi::pml::Pml, f: Fetching) {
        if let (Some(v), Some((b, n, d))) = (f.staged, f.unpack) {
            // SAFETY: the user's result buffer holds n elements of d until the operation
            // completes, which is now.
            unsafe { d.unpack(&v, b, n) };
        }
        if let Some(slot) = f.request {
            if let Some(r) = pml.reqs.get_mut(slot) {
                r.complete = true;
                if let Some(e) = f.error {
                    r.status.error = Some(Box::new(e));
                }
                if r.user_freed {
                    pml.reqs.remove(slot);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::datatype::{predefined, predefined_index};

    #[test]
    fn fast_path_op_ids_match_the_builtins() {
        assert_eq!(REPLACE as usize, builtin_index(Builtin::Replace));
        assert_eq!(NO_OP as usize, builtin_index(Builtin::NoOp));
    }

    #[test]
    fn segments_of_contiguous_and_strided_types() {
        let all = predefined();
        let int = &all[predefined_index("MPI_INT").unwrap()];
        assert_eq!(segments(int, 5, 8).unwrap(), vec![(8, 20)]);
        assert!(segments(int, 0, 8).unwrap().is_empty());
        assert!(segments(int, 1, -4).is_err());
    }
}
