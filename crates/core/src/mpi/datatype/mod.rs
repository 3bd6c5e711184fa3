//! Datatypes (MPI-4.0 chapter 5): predefined types, constructors, and the two descriptions
//! every type is reduced to once, when it is built.
//!
//! - The **layout** ([`layout`]) says where the bytes of one element are: a short program of
//!   strided runs and loops. Packing walks it with a tight copy loop per run, so a strided
//!   type costs a few instructions per block and a huge vector costs no memory.
//! - The **signature** ([`sig`]) says which basic values the packed bytes hold, run-length
//!   encoded; it answers MPI_Get_elements and drives the external32 conversion.
//!
//! Bounds follow MPICH where the standard leaves room (the ABI we implement): only
//! MPI_Type_create_struct pads the extent to the alignment of its most demanding member (as a C
//! compiler pads a struct), vectors and the rest do not; MPI_LB/MPI_UB markers set a bound
//! exactly and switch the padding off. A type whose one element is a single block at offset 0
//! with extent equal to its size is *contiguous* (`contig`): its data is sent straight from the
//! user's buffer.
//!
//! Addresses are integers: with MPI_BOTTOM the buffer is null and the type's displacements are
//! absolute addresses, so nothing here offsets a pointer (see [`layout`]).

pub mod build;
pub mod layout;
pub mod pool;
pub mod sig;
#[cfg(test)]
mod tests;

use crate::ids::DtypeId;
use std::sync::Arc;

pub use build::Distrib;
use layout::Op;
use sig::Sig;

/// Basic C (and Fortran) value kinds, for reductions and Get_elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basic {
    Char,
    SignedChar,
    UnsignedChar,
    Byte,
    WChar,
    Short,
    UnsignedShort,
    Int,
    Unsigned,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    LongDouble,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Bool,
    FloatComplex,
    DoubleComplex,
    LongDoubleComplex,
    Aint,
    Offset,
    Count,
    Packed,
    /// Fortran LOGICAL (4 bytes).
    Logical,
    /// Fortran CHARACTER (1 byte).
    Character,
    Float16,
}

impl Basic {
    pub fn size(self) -> usize {
        use Basic::*;
        match self {
            Char | SignedChar | UnsignedChar | Byte | Int8 | Uint8 | Bool | Packed | Character => 1,
            Short | UnsignedShort | Int16 | Uint16 | Float16 => 2,
            WChar | Int | Unsigned | Float | Int32 | Uint32 | Logical => 4,
            Long | UnsignedLong | LongLong | UnsignedLongLong | Double | Int64 | Uint64
            | FloatComplex | Aint | Offset | Count => 8,
            LongDouble | DoubleComplex => 16,
            LongDoubleComplex => 32,
        }
    }
}

impl Basic {
    /// Alignment a C compiler gives the type (long double: 16; a complex: its component's).
    pub fn align(self) -> usize {
        use Basic::*;
        match self {
            LongDouble | LongDoubleComplex => 16,
            FloatComplex => 4,
            DoubleComplex => 8,
            b => b.size(),
        }
    }
}

/// How a type was built (MPI_Type_get_envelope / get_contents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combiner {
    Named,
    Dup,
    Contiguous,
    Vector,
    Hvector,
    Indexed,
    Hindexed,
    IndexedBlock,
    HindexedBlock,
    Struct,
    Subarray,
    Darray,
    Resized,
    F90Real,
    F90Complex,
    F90Integer,
}

/// The arguments a type was built with, as MPI_Type_get_contents returns them.
#[derive(Debug, Clone, Default)]
pub struct Contents {
    /// `int` arguments.
    pub ints: Vec<i64>,
    /// `MPI_Aint` arguments.
    pub aints: Vec<isize>,
    /// `MPI_Count` arguments (types built by the large-count `_c` constructors).
    pub counts: Vec<i64>,
    /// The component types: the engine id they had (predefined types keep their handle) and
    /// the type itself (kept alive here even if the user frees it).
    pub types: Vec<(DtypeId, Arc<Datatype>)>,
    /// Built by a `_c` constructor: the counts are in `counts`.
    pub large: bool,
}

impl Contents {
    /// Rearrange the arguments as a large-count (`_c`) constructor takes them: every argument
    /// the `_c` prototype declares MPI_Count moves to `counts` (MPI-4.0 section 5.1.13).
    pub fn make_large(&mut self, combiner: Combiner) {
        use Combiner::*;
        let ints = std::mem::take(&mut self.ints);
        let aints: Vec<i64> = std::mem::take(&mut self.aints)
            .into_iter()
            .map(|a| a as i64)
            .collect();
        match combiner {
            Subarray => {
                // ints: ndims, sizes, subsizes, starts, order.
                let n = ints[0] as usize;
                self.ints = vec![ints[0], ints[3 * n + 1]];
                self.counts = ints[1..3 * n + 1].to_vec();
            }
            Darray => {
                // ints: size, rank, ndims, gsizes, distribs, dargs, psizes, order.
                let n = ints[2] as usize;
                self.ints = ints[..3].to_vec();
                self.ints.extend_from_slice(&ints[3 + n..]);
                self.counts = ints[3..3 + n].to_vec();
            }
            _ => {
                self.counts = ints;
                self.counts.extend(aints);
            }
        }
        self.large = true;
    }
}

/// The removed MPI-1 bound markers MPI_LB and MPI_UB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Lb,
    Ub,
}

#[derive(Debug, Clone)]
pub struct Datatype {
    pub name: String,
    /// Bytes of data in one element.
    pub size: usize,
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    /// Where one element's bytes are.
    pub ops: Arc<[Op]>,
    /// Which basic values one element's packed bytes hold.
    pub sig: Arc<[Sig]>,
    /// Basic values in one element.
    pub elems: u64,
    /// One element is `size` bytes at offset 0 and the extent equals the size, so `count`
    /// elements are one contiguous run.
    pub contig: bool,
    pub basic: Option<Basic>,
    /// Predefined (named, or made by MPI_Type_create_f90_*): cannot be freed.
    pub predefined: bool,
    pub committed: bool,
    pub combiner: Combiner,
    pub contents: Contents,
    /// Alignment of the most demanding basic value (struct padding).
    pub align: usize,
    pub marker: Option<Marker>,
}

impl Datatype {
    /// How error messages name the type: its name if it has one, else its constructor
    /// ("a derived datatype (Vector)").
    pub fn describe(&self) -> String {
        if self.name.is_empty() {
            format!(
                "a derived datatype ({:?}) of {} bytes",
                self.combiner, self.size
            )
        } else {
            format!("datatype {}", self.name)
        }
    }

    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }

    pub fn true_extent(&self) -> isize {
        self.true_ub - self.true_lb
    }

    /// A type from its descriptions and bounds (the constructors' common end).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        ops: Arc<[Op]>,
        sig: Arc<[Sig]>,
        size: usize,
        (lb, ub): (isize, isize),
        (true_lb, true_ub): (isize, isize),
        align: usize,
        combiner: Combiner,
        contents: Contents,
    ) -> Datatype {
        let one_block = match *ops {
            [] => size == 0,
            [Op::Run {
                off, len, count, ..
            }] => off == 0 && count == 1 && len == size,
            _ => false,
        };
        let contig = one_block && lb == 0 && ub == size as isize;
        Datatype {
            name: String::new(),
            size,
            lb,
            ub,
            true_lb,
            true_ub,
            elems: sig::sig_elems(&sig),
            ops,
            sig,
            contig,
            basic: None,
            predefined: false,
            committed: false,
            combiner,
            contents,
            align: align.max(1),
            marker: None,
        }
    }

    /// A predefined type of one basic kind.
    pub fn named(name: &str, b: Basic) -> Datatype {
        let s = b.size();
        let mut d = Self::assemble(
            vec![Op::Run {
                off: 0,
                len: s,
                count: 1,
                stride: 0,
            }]
            .into(),
            vec![Sig::Vals { basic: b, n: 1 }].into(),
            s,
            (0, s as isize),
            (0, s as isize),
            b.align(),
            Combiner::Named,
            Contents::default(),
        );
        d.name = name.to_string();
        d.basic = Some(b);
        d.predefined = true;
        d.committed = true;
        d
    }

    /// A predefined pair type `{ a; b }` laid out as the C compiler lays out the struct.
    pub fn pair(name: &str, a: Basic, b: Basic) -> Datatype {
        let (sa, sb) = (a.size(), b.size());
        let off_b = sa.div_ceil(b.align()) * b.align();
        let align = a.align().max(b.align());
        let extent = (off_b + sb).div_ceil(align) * align;
        let mut prog = layout::Prog::new();
        for (off, len) in [(0, sa), (off_b, sb)] {
            prog.push(Op::Run {
                off: off as isize,
                len,
                count: 1,
                stride: 0,
            })
            .expect("two ops");
        }
        let mut sb_ = sig::SigBuilder::default();
        sb_.push(Sig::Vals { basic: a, n: 1 });
        sb_.push(Sig::Vals { basic: b, n: 1 });
        let mut d = Self::assemble(
            prog.finish(),
            sb_.finish(),
            sa + sb,
            (0, extent as isize),
            (0, (off_b + sb) as isize),
            align,
            Combiner::Named,
            Contents::default(),
        );
        d.name = name.to_string();
        d.predefined = true;
        d.committed = true;
        d
    }

    /// MPI_LB or MPI_UB: no data; in a struct, sets that bound.
    fn marker(name: &str, m: Marker) -> Datatype {
        let mut d = Self::assemble(
            Vec::new().into(),
            Vec::new().into(),
            0,
            (0, 0),
            (0, 0),
            1,
            Combiner::Named,
            Contents::default(),
        );
        d.name = name.to_string();
        d.predefined = true;
        d.committed = true;
        d.marker = Some(m);
        d
    }

    /// Bytes of `count` elements, or None on overflow.
    pub fn packed_size(&self, count: usize) -> Option<usize> {
        self.size.checked_mul(count)
    }

    /// Where `count` elements are one contiguous span of `count * size` bytes: its offset from
    /// the buffer (the true lower bound). True for contiguous types, and also for a single
    /// block elsewhere (a struct of absolute addresses used with MPI_BOTTOM, a resized type),
    /// when one element is sent or the extent equals the size.
    #[inline]
    pub fn contiguous_span(&self, count: usize) -> Option<isize> {
        match *self.ops {
            [] => Some(0),
            [Op::Run {
                off, len, count: 1, ..
            }] if count <= 1 || self.extent() == len as isize => Some(off),
            _ => None,
        }
    }

    /// The one basic kind all values of the type have, if there is one (so a reduction with a
    /// predefined operation can treat `count` elements as `count * elems` values of it).
    pub fn sole_basic(&self) -> Option<Basic> {
        self.basic.or_else(|| sig::sole_basic(&self.sig))
    }

    /// Copy `count` elements at `buf` into `out` (appending), in type-map order.
    ///
    /// # Safety
    /// `buf` must be valid for reads over every byte the type names for `count` elements
    /// (with a null `buf`, the type's displacements are absolute addresses).
    pub unsafe fn pack(&self, buf: *const u8, count: usize, out: &mut Vec<u8>) {
        let n = self.size * count;
        out.reserve(n);
        let start = out.len();
        self.pack_to(buf, count, out.as_mut_ptr().add(start));
        out.set_len(start + n);
    }

    /// Copy `count` elements at `buf` to `out`, which has room for `size * count` bytes.
    ///
    /// # Safety
    /// As for [`Datatype::pack`]; `out` is valid for `size * count` bytes of writes.
    pub unsafe fn pack_to(&self, buf: *const u8, count: usize, out: *mut u8) {
        if self.size == 0 {
            return;
        }
        layout::exec_count::<true>(&self.ops, count, self.extent(), buf as usize, out);
    }

    /// Copy packed bytes into `count` elements at `buf`; stops when `data` runs out (a short
    /// message fills a prefix of the elements, possibly ending inside a block). Returns the
    /// bytes consumed.
    ///
    /// # Safety
    /// `buf` must be valid for writes over every byte the type names for `count` elements.
    pub unsafe fn unpack(&self, data: &[u8], buf: *mut u8, count: usize) -> usize {
        let full = self.size * count;
        if full == 0 {
            return 0;
        }
        if data.len() >= full {
            layout::exec_count::<false>(
                &self.ops,
                count,
                self.extent(),
                buf as usize,
                data.as_ptr() as *mut u8,
            );
            full
        } else {
            self.unpack_window(data, 0, buf, count)
        }
    }

    /// Pack the packed-stream bytes `[skip, skip + out.len())` of `count` elements at `buf`
    /// (for sending a large message in pieces). Returns the bytes written.
    ///
    /// # Safety
    /// As for [`Datatype::pack`], for the bytes of the window.
    pub unsafe fn pack_window(
        &self,
        buf: *const u8,
        count: usize,
        skip: usize,
        out: &mut [u8],
    ) -> usize {
        layout::exec_count_window::<true>(
            &self.ops,
            self.size,
            count,
            self.extent(),
            buf as usize,
            skip,
            out.len(),
            out.as_mut_ptr(),
        )
    }

    /// Unpack `data`, which holds the packed-stream bytes starting at `skip`, into `count`
    /// elements at `buf`. Returns the bytes consumed.
    ///
    /// # Safety
    /// As for [`Datatype::unpack`], for the bytes of the window.
    pub unsafe fn unpack_window(
        &self,
        data: &[u8],
        skip: usize,
        buf: *mut u8,
        count: usize,
    ) -> usize {
        layout::exec_count_window::<false>(
            &self.ops,
            self.size,
            count,
            self.extent(),
            buf as usize,
            skip,
            data.len(),
            data.as_ptr() as *mut u8,
        )
    }

    /// Packed bytes holding the first `n` basic values of a sequence of elements of this type
    /// (MPI_Status_set_elements), or None when the type holds no basic values.
    pub fn bytes_for_elements(&self, n: u64) -> Option<u64> {
        if self.elems == 0 {
            return (n == 0).then_some(0);
        }
        Some((n / self.elems) * self.size as u64 + sig::bytes_for_prefix(&self.sig, n % self.elems))
    }

    /// MPI_Get_elements: basic values in `bytes` of packed data of this type, or None when the
    /// bytes end inside a basic value.
    pub fn elements_in(&self, bytes: usize) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let full = (bytes / self.size) as u64;
        sig::elems_in_prefix(&self.sig, (bytes % self.size) as u64).map(|e| full * self.elems + e)
    }

    /// Bytes of `count` elements in external32, or None on overflow.
    pub fn ext32_size(&self, count: usize) -> Option<usize> {
        usize::try_from(sig::ext32_bytes(&self.sig))
            .ok()?
            .checked_mul(count)
    }

    /// MPI_Pack_external("external32"): `count` elements at `buf` into `out`, which holds
    /// exactly `ext32_size(count)` bytes.
    ///
    /// # Safety
    /// As for [`Datatype::pack`].
    pub unsafe fn pack_external(&self, buf: *const u8, count: usize, out: &mut [u8]) {
        let mut native = Vec::new();
        self.pack(buf, count, &mut native);
        sig::convert(&self.sig, count, &native, out, true);
    }

    /// MPI_Unpack_external("external32"): `data` (exactly `ext32_size(count)` bytes) into
    /// `count` elements at `buf`.
    ///
    /// # Safety
    /// As for [`Datatype::unpack`].
    pub unsafe fn unpack_external(&self, data: &[u8], buf: *mut u8, count: usize) {
        let mut native = vec![0u8; self.size * count];
        sig::convert(&self.sig, count, data, &mut native, false);
        self.unpack(&native, buf, count);
    }
}

/// Predefined datatypes, in a fixed order: a type's index here is its id in the engine.
pub fn predefined() -> Vec<Datatype> {
    use Basic::*;
    let n = Datatype::named;
    vec![
        n("MPI_CHAR", Char),
        n("MPI_SIGNED_CHAR", SignedChar),
        n("MPI_UNSIGNED_CHAR", UnsignedChar),
        n("MPI_BYTE", Byte),
        n("MPI_WCHAR", WChar),
        n("MPI_SHORT", Short),
        n("MPI_UNSIGNED_SHORT", UnsignedShort),
        n("MPI_INT", Int),
        n("MPI_UNSIGNED", Unsigned),
        n("MPI_LONG", Long),
        n("MPI_UNSIGNED_LONG", UnsignedLong),
        n("MPI_FLOAT", Float),
        n("MPI_DOUBLE", Double),
        n("MPI_LONG_DOUBLE", LongDouble),
        n("MPI_LONG_LONG_INT", LongLong),
        n("MPI_UNSIGNED_LONG_LONG", UnsignedLongLong),
        n("MPI_PACKED", Packed),
        Datatype::pair("MPI_FLOAT_INT", Float, Int),
        Datatype::pair("MPI_DOUBLE_INT", Double, Int),
        Datatype::pair("MPI_LONG_INT", Long, Int),
        Datatype::pair("MPI_SHORT_INT", Short, Int),
        Datatype::pair("MPI_2INT", Int, Int),
        Datatype::pair("MPI_LONG_DOUBLE_INT", LongDouble, Int),
        n("MPI_COMPLEX", FloatComplex),
        n("MPI_DOUBLE_COMPLEX", DoubleComplex),
        n("MPI_LOGICAL", Logical),
        n("MPI_REAL", Float),
        n("MPI_DOUBLE_PRECISION", Double),
        n("MPI_INTEGER", Int32),
        Datatype::pair("MPI_2INTEGER", Int32, Int32),
        Datatype::pair("MPI_2REAL", Float, Float),
        Datatype::pair("MPI_2DOUBLE_PRECISION", Double, Double),
        n("MPI_CHARACTER", Character),
        n("MPI_REAL4", Float),
        n("MPI_REAL8", Double),
        n("MPI_REAL16", LongDouble),
        n("MPI_COMPLEX8", FloatComplex),
        n("MPI_COMPLEX16", DoubleComplex),
        n("MPI_COMPLEX32", LongDoubleComplex),
        n("MPI_INTEGER1", Int8),
        n("MPI_INTEGER2", Int16),
        n("MPI_INTEGER4", Int32),
        n("MPI_INTEGER8", Int64),
        n("MPI_INT8_T", Int8),
        n("MPI_INT16_T", Int16),
        n("MPI_INT32_T", Int32),
        n("MPI_INT64_T", Int64),
        n("MPI_UINT8_T", Uint8),
        n("MPI_UINT16_T", Uint16),
        n("MPI_UINT32_T", Uint32),
        n("MPI_UINT64_T", Uint64),
        n("MPI_C_BOOL", Bool),
        // MPI_C_COMPLEX and MPI_C_FLOAT_COMPLEX are one handle; MPICH names it MPI_C_COMPLEX.
        n("MPI_C_COMPLEX", FloatComplex),
        n("MPI_C_DOUBLE_COMPLEX", DoubleComplex),
        n("MPI_C_LONG_DOUBLE_COMPLEX", LongDoubleComplex),
        n("MPI_AINT", Aint),
        n("MPI_OFFSET", Offset),
        n("MPI_COUNT", Count),
        n("MPI_CXX_BOOL", Bool),
        n("MPI_CXX_FLOAT_COMPLEX", FloatComplex),
        n("MPI_CXX_DOUBLE_COMPLEX", DoubleComplex),
        n("MPI_CXX_LONG_DOUBLE_COMPLEX", LongDoubleComplex),
        n("MPIX_C_FLOAT16", Float16),
        // MPI_LB and MPI_UB (removed in MPI-3, still in the ABI): zero-size markers.
        Datatype::marker("MPI_LB", Marker::Lb),
        Datatype::marker("MPI_UB", Marker::Ub),
    ]
}

/// Index of a predefined type by its MPI name.
pub fn predefined_index(name: &str) -> Option<usize> {
    PREDEFINED_NAMES.iter().position(|n| *n == name)
}

/// Names of [`predefined`] in order (kept in sync by a unit test).
pub const PREDEFINED_NAMES: &[&str] = &[
    "MPI_CHAR",
    "MPI_SIGNED_CHAR",
    "MPI_UNSIGNED_CHAR",
    "MPI_BYTE",
    "MPI_WCHAR",
    "MPI_SHORT",
    "MPI_UNSIGNED_SHORT",
    "MPI_INT",
    "MPI_UNSIGNED",
    "MPI_LONG",
    "MPI_UNSIGNED_LONG",
    "MPI_FLOAT",
    "MPI_DOUBLE",
    "MPI_LONG_DOUBLE",
    "MPI_LONG_LONG_INT",
    "MPI_UNSIGNED_LONG_LONG",
    "MPI_PACKED",
    "MPI_FLOAT_INT",
    "MPI_DOUBLE_INT",
    "MPI_LONG_INT",
    "MPI_SHORT_INT",
    "MPI_2INT",
    "MPI_LONG_DOUBLE_INT",
    "MPI_COMPLEX",
    "MPI_DOUBLE_COMPLEX",
    "MPI_LOGICAL",
    "MPI_REAL",
    "MPI_DOUBLE_PRECISION",
    "MPI_INTEGER",
    "MPI_2INTEGER",
    "MPI_2REAL",
    "MPI_2DOUBLE_PRECISION",
    "MPI_CHARACTER",
    "MPI_REAL4",
    "MPI_REAL8",
    "MPI_REAL16",
    "MPI_COMPLEX8",
    "MPI_COMPLEX16",
    "MPI_COMPLEX32",
    "MPI_INTEGER1",
    "MPI_INTEGER2",
    "MPI_INTEGER4",
    "MPI_INTEGER8",
    "MPI_INT8_T",
    "MPI_INT16_T",
    "MPI_INT32_T",
    "MPI_INT64_T",
    "MPI_UINT8_T",
    "MPI_UINT16_T",
    "MPI_UINT32_T",
    "MPI_UINT64_T",
    "MPI_C_BOOL",
    "MPI_C_COMPLEX",
    "MPI_C_DOUBLE_COMPLEX",
    "MPI_C_LONG_DOUBLE_COMPLEX",
    "MPI_AINT",
    "MPI_OFFSET",
    "MPI_COUNT",
    "MPI_CXX_BOOL",
    "MPI_CXX_FLOAT_COMPLEX",
    "MPI_CXX_DOUBLE_COMPLEX",
    "MPI_CXX_LONG_DOUBLE_COMPLEX",
    "MPIX_C_FLOAT16",
    "MPI_LB",
    "MPI_UB",
];

impl crate::mpi::engine::Engine {
    /// MPI_Type_free of derived type `id` (checked by the caller). A type still held by an
    /// operation in flight (a persistent request, a nonblocking collective) or by a type built
    /// from it keeps its slot until those are gone (MPI-4.1 5.1.9: the free takes effect
    /// then), so that its handle, given back by MPI_Type_get_contents or passed to a user
    /// reduction, names it and nothing else meanwhile. Err: freed already.
    pub fn free_dtype(&mut self, id: DtypeId) -> crate::error::Result<()> {
        if self.freed_types.contains(&id) {
            return crate::err!(Type, "the datatype has already been freed");
        }
        if let Some(Some(d)) = self.dtypes.get(id.idx()) {
            if Arc::strong_count(d) > 1 {
                self.freed_types.push(id);
            } else {
                self.dtypes[id.idx()] = None;
            }
        }
        self.sweep_dtypes();
        Ok(())
    }

    /// Release the freed types nothing holds any more.
    pub fn sweep_dtypes(&mut self) {
        let dtypes = &mut self.dtypes;
        self.freed_types.retain(|&id| {
            let held = dtypes
                .get(id.idx())
                .and_then(|d| d.as_ref())
                .is_some_and(|d| Arc::strong_count(d) > 1);
            if !held {
                dtypes[id.idx()] = None;
            }
            held
        });
    }
}
