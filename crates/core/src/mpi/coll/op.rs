//! Reduction operations (MPI-4.0 section 6.9).
//!
//! A reduction is resolved once per call into a [`Reducer`]: the operation, the datatype, and
//! how to apply it (a kernel over a flat run of basic values, over each block of a derived
//! type, over MINLOC/MAXLOC pairs, a byte copy for MPI_REPLACE / MPI_NO_OP, or the user's
//! function). Kernels compute `d = a op b` where `a` holds the contributions of lower ranks:
//! the order the standard requires for non-commutative operations ("a op b" is the user
//! function called with invec = a, inoutvec = b).
//!
//! Which operation applies to which type (section 6.9.2): MAX/MIN on integers and floating
//! point; SUM/PROD on integers, floating point and complex; LAND/LOR/LXOR on integers and
//! logicals (C `_Bool`, Fortran LOGICAL); BAND/BOR/BXOR on integers and MPI_BYTE; MINLOC/MAXLOC
//! on the pair types; MPI_REPLACE and MPI_NO_OP on anything. A derived type is accepted when
//! every basic value in it has the same type (as MPICH does). Anything else is MPI_ERR_OP.
//!
//! User functions are C function pointers: they are called only through [`USER_CALL`], which
//! the C layer installs, and never while the engine is borrowed (see `runtime::global`).

use crate::ids::DtypeId;
use std::sync::{Arc, OnceLock};

use crate::error::Result;
use crate::mpi::datatype::layout::for_each_block;
use crate::mpi::datatype::{predefined_index, Basic, Datatype, PREDEFINED_NAMES};
use crate::{err, mpi_error};

/// The predefined operations, in the order of their MPICH handles (MPI_MAX = 0x58000001 is
/// engine id 0, ..., MPI_NO_OP = 0x5800000e is 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
    Minloc,
    Maxloc,
    Replace,
    NoOp,
}

impl Builtin {
    pub const ALL: [Builtin; 14] = [
        Builtin::Max,
        Builtin::Min,
        Builtin::Sum,
        Builtin::Prod,
        Builtin::Land,
        Builtin::Band,
        Builtin::Lor,
        Builtin::Bor,
        Builtin::Lxor,
        Builtin::Bxor,
        Builtin::Minloc,
        Builtin::Maxloc,
        Builtin::Replace,
        Builtin::NoOp,
    ];

    pub fn name(self) -> &'static str {
        use Builtin::*;
        match self {
            Max => "MPI_MAX",
            Min => "MPI_MIN",
            Sum => "MPI_SUM",
            Prod => "MPI_PROD",
            Land => "MPI_LAND",
            Band => "MPI_BAND",
            Lor => "MPI_LOR",
            Bor => "MPI_BOR",
            Lxor => "MPI_LXOR",
            Bxor => "MPI_BXOR",
            Minloc => "MPI_MINLOC",
            Maxloc => "MPI_MAXLOC",
            Replace => "MPI_REPLACE",
            NoOp => "MPI_NO_OP",
        }
    }
}

/// Number of predefined operations (engine ids 0..NPREDEFINED).
pub const NPREDEFINED: u32 = 14;

/// Engine ids of the predefined operations most used inside the library.
pub const OP_MAX: u32 = 0;
pub const OP_MIN: u32 = 1;
pub const OP_SUM: u32 = 2;
pub const OP_BAND: u32 = 5;
pub const OP_BOR: u32 = 7;

/// A reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Builtin(Builtin),
    /// MPI_Op_create: the function's address, whether it takes an MPI_Count length
    /// (MPI_Op_create_c), and whether it is commutative.
    User {
        func: usize,
        big: bool,
        commute: bool,
    },
}

impl Op {
    pub fn commutative(&self) -> bool {
        match self {
            Op::Builtin(b) => !matches!(b, Builtin::Replace | Builtin::NoOp),
            Op::User { commute, .. } => *commute,
        }
    }

    pub fn name(&self) -> String {
        match self {
            Op::Builtin(b) => b.name().to_string(),
            Op::User { .. } => "a user-defined operation".to_string(),
        }
    }
}

/// The predefined operations, at engine ids 0..NPREDEFINED.
pub fn predefined_ops() -> Vec<Option<Op>> {
    Builtin::ALL.iter().map(|b| Some(Op::Builtin(*b))).collect()
}

/// How the C layer calls a user function: `func(invec, inoutvec, &count, &datatype_handle)`.
/// `count` fits the function's length type (the caller splits longer runs).
pub type UserCall =
    unsafe fn(func: usize, big: bool, inv: *mut u8, inout: *mut u8, count: usize, dt: DtypeId);

/// Installed by the C layer when the first user operation is created.
pub static USER_CALL: OnceLock<UserCall> = OnceLock::new();

// ---------------------------------------------------------------------------------------------
// Element kinds

/// What a reduction sees in a datatype: runs of one basic type, or MINLOC/MAXLOC pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    Basic(Basic),
    Pair { val: Basic, idx: Basic },
}

/// Storage classes the kernels are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    LongDouble,
    F16,
    C32,
    C64,
    LongDoubleComplex,
    /// C `_Bool` (1 byte).
    Bool,
    /// Fortran LOGICAL (4 bytes; any nonzero value is true, results are 1 or 0).
    Logical,
    Byte,
    /// No operation but MPI_REPLACE / MPI_NO_OP applies (MPI_PACKED, MPI_CHARACTER).
    Opaque,
}

fn store(b: Basic) -> Store {
    use Basic::*;
    match b {
        // MPI_CHAR takes arithmetic as a signed char does (MPICH allows it too).
        Char | SignedChar | Int8 => Store::I8,
        UnsignedChar | Uint8 => Store::U8,
        Byte => Store::Byte,
        WChar | Int | Int32 => Store::I32,
        Short | Int16 => Store::I16,
        UnsignedShort | Uint16 => Store::U16,
        Unsigned | Uint32 => Store::U32,
        Long | LongLong | Int64 | Aint | Offset | Count => Store::I64,
        UnsignedLong | UnsignedLongLong | Uint64 => Store::U64,
        Float => Store::F32,
        Double => Store::F64,
        LongDouble => Store::LongDouble,
        Float16 => Store::F16,
        FloatComplex => Store::C32,
        DoubleComplex => Store::C64,
        LongDoubleComplex => Store::LongDoubleComplex,
        Bool => Store::Bool,
        Logical => Store::Logical,
        Packed | Character => Store::Opaque,
    }
}

/// The pair types of MINLOC/MAXLOC: name, value type, index type.
const PAIRS: &[(&str, Basic, Basic)] = &[
    ("MPI_FLOAT_INT", Basic::Float, Basic::Int),
    ("MPI_DOUBLE_INT", Basic::Double, Basic::Int),
    ("MPI_LONG_INT", Basic::Long, Basic::Int),
    ("MPI_SHORT_INT", Basic::Short, Basic::Int),
    ("MPI_2INT", Basic::Int, Basic::Int),
    ("MPI_LONG_DOUBLE_INT", Basic::LongDouble, Basic::Int),
    ("MPI_2INTEGER", Basic::Int32, Basic::Int32),
    ("MPI_2REAL", Basic::Float, Basic::Float),
    ("MPI_2DOUBLE_PRECISION", Basic::Double, Basic::Double),
];

/// Element kind of each predefined type, by engine id.
fn predefined_elems() -> &'static [Option<Elem>] {
    static T: OnceLock<Vec<Option<Elem>>> = OnceLock::new();
    T.get_or_init(|| {
        let all = crate::mpi::datatype::predefined();
        let mut v: Vec<Option<Elem>> = all.iter().map(|d| d.basic.map(Elem::Basic)).collect();
        for (name, val, idx) in PAIRS {
            if let Some(i) = predefined_index(name) {
                v[i] = Some(Elem::Pair {
                    val: *val,
                    idx: *idx,
                });
            }
        }
        v
    })
}

/// The element kind of datatype `id`: a predefined type's own, or for a derived type the one
/// basic type all its components share. None when mixed. A derived type's components are
/// followed through the references it holds, so a component the user freed still counts.
pub fn elem_of(dtypes: &[Option<Arc<Datatype>>], id: DtypeId) -> Option<Elem> {
    elem_walk(dtypes, id, false)
}

/// As [`elem_of`], and a derived type made of one MINLOC/MAXLOC pair type (a vector of
/// MPI_DOUBLE_INT, say) is of that pair: what one-sided accumulates allow (MPI-4.1 12.3.4).
/// The reductions of collectives apply a pair kernel at the type's extent, so they keep to
/// [`elem_of`].
pub fn acc_elem_of(dtypes: &[Option<Arc<Datatype>>], id: DtypeId) -> Option<Elem> {
    elem_walk(dtypes, id, true)
}

fn elem_walk(dtypes: &[Option<Arc<Datatype>>], id: DtypeId, pairs: bool) -> Option<Elem> {
    fn walk(id: DtypeId, d: &Datatype, depth: usize, pairs: bool) -> Option<Elem> {
        if id.idx() < PREDEFINED_NAMES.len() {
            return predefined_elems()[id.idx()];
        }
        if d.predefined {
            // Made by MPI_Type_create_f90_*: a predefined type of its base's kind.
            return d.basic.map(Elem::Basic);
        }
        if depth > 64 {
            return None;
        }
        let mut found: Option<Elem> = None;
        for (t, c) in &d.contents.types {
            // The MPI-1 bound markers carry no values.
            if t.idx() < PREDEFINED_NAMES.len()
                && matches!(PREDEFINED_NAMES[t.idx()], "MPI_LB" | "MPI_UB")
            {
                continue;
            }
            let k = walk(*t, c, depth + 1, pairs)?;
            if (!pairs && matches!(k, Elem::Pair { .. })) || found.is_some_and(|f| f != k) {
                return None;
            }
            found = Some(k);
        }
        found
    }
    if id.idx() < PREDEFINED_NAMES.len() {
        return predefined_elems()[id.idx()];
    }
    let d = dtypes.get(id.idx())?.as_ref()?;
    walk(id, d, 0, pairs)
}

// ---------------------------------------------------------------------------------------------
// Kernels

/// `d[i] = a[i] op b[i]` for `n` values (unaligned pointers allowed; `d` may alias `a` or `b`).
pub type Kernel = unsafe fn(*const u8, *const u8, *mut u8, usize);
/// MINLOC/MAXLOC over `n` pairs `stride` bytes apart, the index `off` bytes into each pair.
pub type PairKernel = unsafe fn(*const u8, *const u8, *mut u8, usize, usize, usize);

#[inline(always)]
unsafe fn zip<T: Copy>(a: *const u8, b: *const u8, d: *mut u8, n: usize, f: impl Fn(T, T) -> T) {
    let (a, b, d) = (a as *const T, b as *const T, d as *mut T);
    for i in 0..n {
        d.add(i)
            .write_unaligned(f(a.add(i).read_unaligned(), b.add(i).read_unaligned()));
    }
}

/// Arithmetic the kernels need, per storage type.
trait Num: Copy + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

trait Int: Num {
    const ZERO: Self;
    const ONE: Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
}

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
        impl Int for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)] fn and(self, o: Self) -> Self { self & o }
            #[inline(always)] fn or(self, o: Self) -> Self { self | o }
            #[inline(always)] fn xor(self, o: Self) -> Self { self ^ o }
        }
    )*};
}
ints!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! floats {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
        }
    )*};
}
floats!(f32, f64);

// C semantics: (a > b) ? a : b, so a NaN in b propagates as in MPICH's MPL_MAX.
unsafe fn k_max<T: Num>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| if x > y { x } else { y })
}
unsafe fn k_min<T: Num>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| if x < y { x } else { y })
}
unsafe fn k_sum<T: Num>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| x.add(y))
}
unsafe fn k_prod<T: Num>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| x.mul(y))
}
#[inline(always)]
fn truth<T: Int>(v: bool) -> T {
    if v {
        T::ONE
    } else {
        T::ZERO
    }
}
unsafe fn k_land<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| truth(x != T::ZERO && y != T::ZERO))
}
unsafe fn k_lor<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| truth(x != T::ZERO || y != T::ZERO))
}
unsafe fn k_lxor<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| truth((x != T::ZERO) != (y != T::ZERO)))
}
unsafe fn k_band<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| x.and(y))
}
unsafe fn k_bor<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| x.or(y))
}
unsafe fn k_bxor<T: Int>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<T>(a, b, d, n, |x, y| x.xor(y))
}

/// Complex numbers as (re, im) pairs of `T`.
unsafe fn k_csum<T: Num>(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
    zip::<[T; 2]>(a, b, d, n, |x, y| [x[0].add(y[0]), x[1].add(y[1])])
}
unsafe fn k_cprod<T: Num + std::ops::Sub<Output = T>>(
    a: *const u8,
    b: *const u8,
    d: *mut u8,
    n: usize,
) {
    zip::<[T; 2]>(a, b, d, n, |x, y| {
        [
            x[0].mul(y[0]) - x[1].mul(y[1]),
            x[0].mul(y[1]).add(x[1].mul(y[0])),
        ]
    })
}

unsafe fn k_loc<V: PartialOrd + Copy, I: PartialOrd + Copy, const MAX: bool>(
    a: *const u8,
    b: *const u8,
    d: *mut u8,
    n: usize,
    stride: usize,
    off: usize,
) {
    for i in 0..n {
        let (pa, pb, pd) = (a.add(i * stride), b.add(i * stride), d.add(i * stride));
        let (va, vb) = (
            (pa as *const V).read_unaligned(),
            (pb as *const V).read_unaligned(),
        );
        let (ia, ib) = (
            (pa.add(off) as *const I).read_unaligned(),
            (pb.add(off) as *const I).read_unaligned(),
        );
        let better_b = if MAX { vb > va } else { vb < va };
        let (v, ix) = if better_b {
            (vb, ib)
        } else if va == vb {
            (va, if ib < ia { ib } else { ia })
        } else {
            (va, ia)
        };
        (pd as *mut V).write_unaligned(v);
        (pd.add(off) as *mut I).write_unaligned(ix);
    }
}

extern "C" {
    fn protean_reduce_long_double(op: i32, a: *const u8, b: *const u8, d: *mut u8, n: usize);
    fn protean_reduce_float16(op: i32, a: *const u8, b: *const u8, d: *mut u8, n: usize);
    fn protean_reduce_long_double_complex(
        op: i32,
        a: *const u8,
        b: *const u8,
        d: *mut u8,
        n: usize,
    );
    fn protean_reduce_long_double_loc(
        op: i32,
        a: *const u8,
        b: *const u8,
        d: *mut u8,
        n: usize,
        stride: usize,
        off: usize,
    );
}

// The C kernels number their operations 0 max, 1 min, 2 sum, 3 prod.
macro_rules! c_kernels {
    ($($name:ident = $cfn:ident($op:literal);)*) => {$(
        unsafe fn $name(a: *const u8, b: *const u8, d: *mut u8, n: usize) {
            // SAFETY: the C kernel reads n values from a and b and writes n values to d, as
            // the caller guarantees for every kernel.
            $cfn($op, a, b, d, n)
        }
    )*};
}
c_kernels! {
    ld_max = protean_reduce_long_double(0);
    ld_min = protean_reduce_long_double(1);
    ld_sum = protean_reduce_long_double(2);
    ld_prod = protean_reduce_long_double(3);
    f16_max = protean_reduce_float16(0);
    f16_min = protean_reduce_float16(1);
    f16_sum = protean_reduce_float16(2);
    f16_prod = protean_reduce_float16(3);
    ldc_sum = protean_reduce_long_double_complex(2);
    ldc_prod = protean_reduce_long_double_complex(3);
}
unsafe fn ld_maxloc(a: *const u8, b: *const u8, d: *mut u8, n: usize, s: usize, o: usize) {
    protean_reduce_long_double_loc(0, a, b, d, n, s, o)
}
unsafe fn ld_minloc(a: *const u8, b: *const u8, d: *mut u8, n: usize, s: usize, o: usize) {
    protean_reduce_long_double_loc(1, a, b, d, n, s, o)
}

/// All ten integer operations for one integer type.
fn int_kernel<T: Int>(op: Builtin) -> Option<Kernel> {
    use Builtin::*;
    Some(match op {
        Max => k_max::<T>,
        Min => k_min::<T>,
        Sum => k_sum::<T>,
        Prod => k_prod::<T>,
        Land => k_land::<T>,
        Lor => k_lor::<T>,
        Lxor => k_lxor::<T>,
        Band => k_band::<T>,
        Bor => k_bor::<T>,
        Bxor => k_bxor::<T>,
        _ => return None,
    })
}

fn float_kernel<T: Num>(op: Builtin) -> Option<Kernel> {
    use Builtin::*;
    Some(match op {
        Max => k_max::<T>,
        Min => k_min::<T>,
        Sum => k_sum::<T>,
        Prod => k_prod::<T>,
        _ => return None,
    })
}

fn logical_kernel<T: Int>(op: Builtin) -> Option<Kernel> {
    use Builtin::*;
    Some(match op {
        Land => k_land::<T>,
        Lor => k_lor::<T>,
        Lxor => k_lxor::<T>,
        _ => return None,
    })
}

/// The kernel of a predefined operation on a basic type, if the operation applies to it.
pub fn kernel(op: Builtin, b: Basic) -> Option<Kernel> {
    use Builtin::*;
    match store(b) {
        Store::I8 => int_kernel::<i8>(op),
        Store::I16 => int_kernel::<i16>(op),
        Store::I32 => int_kernel::<i32>(op),
        Store::I64 => int_kernel::<i64>(op),
        Store::U8 => int_kernel::<u8>(op),
        Store::U16 => int_kernel::<u16>(op),
        Store::U32 => int_kernel::<u32>(op),
        Store::U64 => int_kernel::<u64>(op),
        Store::F32 => float_kernel::<f32>(op),
        Store::F64 => float_kernel::<f64>(op),
        Store::LongDouble => match op {
            Max => Some(ld_max),
            Min => Some(ld_min),
            Sum => Some(ld_sum),
            Prod => Some(ld_prod),
            _ => None,
        },
        Store::F16 => match op {
            Max => Some(f16_max),
            Min => Some(f16_min),
            Sum => Some(f16_sum),
            Prod => Some(f16_prod),
            _ => None,
        },
        Store::C32 => match op {
            Sum => Some(k_csum::<f32>),
            Prod => Some(k_cprod::<f32>),
            _ => None,
        },
        Store::C64 => match op {
            Sum => Some(k_csum::<f64>),
            Prod => Some(k_cprod::<f64>),
            _ => None,
        },
        Store::LongDoubleComplex => match op {
            Sum => Some(ldc_sum),
            Prod => Some(ldc_prod),
            _ => None,
        },
        Store::Bool => logical_kernel::<u8>(op),
        Store::Logical => logical_kernel::<i32>(op),
        Store::Byte => match op {
            Band => Some(k_band::<u8>),
            Bor => Some(k_bor::<u8>),
            Bxor => Some(k_bxor::<u8>),
            _ => None,
        },
        Store::Opaque => None,
    }
}

/// MINLOC/MAXLOC kernel for a pair type.
pub(crate) fn pair_kernel(op: Builtin, val: Basic, idx: Basic) -> Option<PairKernel> {
    let max = match op {
        Builtin::Maxloc => true,
        Builtin::Minloc => false,
        _ => return None,
    };
    macro_rules! pick {
        ($v:ty, $i:ty) => {
            if max {
                k_loc::<$v, $i, true> as PairKernel
            } else {
                k_loc::<$v, $i, false> as PairKernel
            }
        };
    }
    Some(match (store(val), store(idx)) {
        (Store::F32, Store::I32) => pick!(f32, i32),
        (Store::F64, Store::I32) => pick!(f64, i32),
        (Store::I64, Store::I32) => pick!(i64, i32),
        (Store::I16, Store::I32) => pick!(i16, i32),
        (Store::I32, Store::I32) => pick!(i32, i32),
        (Store::F32, Store::F32) => pick!(f32, f32),
        (Store::F64, Store::F64) => pick!(f64, f64),
        (Store::LongDouble, Store::I32) => {
            if max {
                ld_maxloc
            } else {
                ld_minloc
            }
        }
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Typed copies

/// Copy `count` elements of `dt` from `src` to `dst`, touching only the bytes the type map
/// covers (a receive buffer's gaps belong to the user).
///
/// # Safety
/// Both buffers hold `count` elements of `dt`; they do not overlap unless they are equal.
pub unsafe fn copy_typed(src: *const u8, dst: *mut u8, count: usize, dt: &Datatype) {
    if std::ptr::eq(src, dst) || count == 0 || dt.size == 0 {
        return;
    }
    if dt.contig {
        crate::mem::copy(src, dst, count * dt.size);
        return;
    }
    let ext = dt.extent();
    for i in 0..count as isize {
        for_each_block(&dt.ops, i * ext, &mut |off, len| {
            crate::mem::copy(src.offset(off), dst.offset(off), len)
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Reducer

#[derive(Debug, Clone, Copy)]
enum How {
    /// One kernel call over the whole contiguous buffer: `count * per` values.
    Flat(Kernel, usize),
    /// A kernel call per block of each element (derived types); the basic size.
    Blocks(Kernel, usize),
    /// MINLOC/MAXLOC over pairs: kernel, index offset.
    Pair(PairKernel, usize),
    Replace,
    NoOp,
    User,
}

/// An operation bound to a datatype, checked and ready to apply.
#[derive(Debug, Clone)]
pub struct Reducer {
    pub op: Op,
    pub dt: Arc<Datatype>,
    pub dt_id: DtypeId,
    how: How,
}

impl Reducer {
    /// Check that `op` applies to datatype `dt_id` and choose how to apply it.
    pub fn new(op: Op, dt_id: DtypeId, dtypes: &[Option<Arc<Datatype>>]) -> Result<Reducer> {
        let dt = match dtypes.get(dt_id.idx()) {
            Some(Some(d)) => d.clone(),
            _ => return err!(Type, "invalid datatype"),
        };
        let b = match op {
            Op::User { .. } => {
                return Ok(Reducer {
                    op,
                    dt,
                    dt_id,
                    how: How::User,
                })
            }
            Op::Builtin(Builtin::Replace) => {
                return Ok(Reducer {
                    op,
                    dt,
                    dt_id,
                    how: How::Replace,
                })
            }
            Op::Builtin(Builtin::NoOp) => {
                return Ok(Reducer {
                    op,
                    dt,
                    dt_id,
                    how: How::NoOp,
                })
            }
            Op::Builtin(b) => b,
        };
        let invalid = || {
            mpi_error!(
                Op,
                "{} is not defined for datatype {}",
                b.name(),
                if dt.name.is_empty() {
                    "(a derived type)"
                } else {
                    &dt.name
                }
            )
        };
        let how = match elem_of(dtypes, dt_id) {
            Some(Elem::Pair { val, idx }) => {
                let k = pair_kernel(b, val, idx).ok_or_else(invalid)?;
                // The index follows the value at its own alignment, as in the C struct
                // (`Datatype::pair`); blocks may have been merged, so compute it.
                let align = idx.size().min(16);
                How::Pair(k, val.size().div_ceil(align) * align)
            }
            Some(Elem::Basic(basic)) => {
                let k = kernel(b, basic).ok_or_else(invalid)?;
                let bs = basic.size();
                if dt.contig {
                    How::Flat(k, dt.size / bs)
                } else {
                    How::Blocks(k, bs)
                }
            }
            None => {
                if dt.size == 0 {
                    // Nothing to combine (e.g. MPI_LB): any operation is a no-op.
                    How::NoOp
                } else {
                    return Err(invalid());
                }
            }
        };
        Ok(Reducer { op, dt, dt_id, how })
    }

    #[inline]
    pub fn is_user(&self) -> bool {
        matches!(self.how, How::User)
    }

    #[inline]
    pub fn commutative(&self) -> bool {
        self.op.commutative()
    }

    /// `d = a op b` over `count` elements with a predefined operation (`d` may be `a` or `b`).
    ///
    /// # Safety
    /// The three buffers hold `count` elements of the datatype.
    #[inline]
    pub unsafe fn apply(&self, a: *const u8, b: *const u8, d: *mut u8, count: usize) {
        match self.how {
            How::Flat(k, per) => k(a, b, d, count * per),
            How::Blocks(k, bs) => {
                let ext = self.dt.extent();
                for i in 0..count as isize {
                    for_each_block(&self.dt.ops, i * ext, &mut |off, len| {
                        k(a.offset(off), b.offset(off), d.offset(off), len / bs)
                    });
                }
            }
            How::Pair(k, off) => k(a, b, d, count, self.dt.extent() as usize, off),
            How::Replace => copy_typed(a, d, count, &self.dt),
            How::NoOp => copy_typed(b, d, count, &self.dt),
            How::User => unreachable!("user operations run through call_user"),
        }
    }

    /// `b = a op b` with the user's function (invec = a, inoutvec = b), in runs that fit its
    /// length argument. Must not be called while the engine is borrowed.
    ///
    /// # Safety
    /// Both buffers hold `count` elements of the datatype.
    pub unsafe fn call_user(&self, a: *const u8, b: *mut u8, count: usize) {
        let Op::User { func, big, .. } = self.op else {
            return self.apply(a, b, b, count);
        };
        let call = *USER_CALL
            .get()
            .expect("user operations exist only after the C layer installed USER_CALL");
        let limit = if big { usize::MAX } else { i32::MAX as usize };
        let ext = self.dt.extent();
        let mut done = 0usize;
        while done < count {
            let n = (count - done).min(limit);
            let off = done as isize * ext;
            call(
                func,
                big,
                a.offset(off) as *mut u8,
                b.offset(off),
                n,
                self.dt_id,
            );
            done += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::datatype::predefined;

    fn dtypes() -> Vec<Option<Arc<Datatype>>> {
        predefined()
            .into_iter()
            .map(|d| Some(Arc::new(d)))
            .collect()
    }

    fn id(name: &str) -> DtypeId {
        DtypeId::from_idx(predefined_index(name).unwrap())
    }

    fn red(op: Builtin, name: &str) -> Result<Reducer> {
        Reducer::new(Op::Builtin(op), id(name), &dtypes())
    }

    #[test]
    fn validity_follows_the_standard() {
        use Builtin::*;
        assert!(red(Sum, "MPI_INT").is_ok());
        assert!(red(Bxor, "MPI_UNSIGNED_LONG").is_ok());
        assert!(red(Lxor, "MPI_C_BOOL").is_ok());
        assert!(red(Land, "MPI_LOGICAL").is_ok());
        assert!(red(Bor, "MPI_BYTE").is_ok());
        assert!(red(Prod, "MPI_C_DOUBLE_COMPLEX").is_ok());
        assert!(red(Minloc, "MPI_DOUBLE_INT").is_ok());
        assert!(red(Max, "MPI_LONG_DOUBLE").is_ok());
        assert!(red(Replace, "MPI_PACKED").is_ok());
        for (op, t) in [
            (Sum, "MPI_BYTE"),
            (Band, "MPI_DOUBLE"),
            (Max, "MPI_C_COMPLEX"),
            (Sum, "MPI_C_BOOL"),
            (Minloc, "MPI_INT"),
            (Sum, "MPI_2INT"),
            (Land, "MPI_FLOAT"),
            (Max, "MPI_PACKED"),
        ] {
            let e = red(op, t).unwrap_err();
            assert_eq!(e.class, crate::error::ErrorClass::Op, "{op:?} {t}");
            assert!(e.msg.contains(t), "{}", e.msg);
        }
    }

    fn run<T: Copy>(r: &Reducer, a: &[T], b: &mut [T]) {
        unsafe {
            r.apply(
                a.as_ptr() as *const u8,
                b.as_ptr() as *const u8,
                b.as_mut_ptr() as *mut u8,
                a.len(),
            )
        };
    }

    #[test]
    fn arithmetic_and_logic() {
        use Builtin::*;
        let mut b = [5i32, -3, 0, 7];
        run(&red(Sum, "MPI_INT").unwrap(), &[1, 2, 3, i32::MAX], &mut b);
        assert_eq!(b, [6, -1, 3, i32::MAX.wrapping_add(7)]);
        let mut b = [0u8, 1, 0, 3];
        run(
            &red(Lxor, "MPI_UNSIGNED_CHAR").unwrap(),
            &[0u8, 0, 2, 4],
            &mut b,
        );
        assert_eq!(b, [0, 1, 1, 0]);
        let mut b = [1.5f64, -2.0];
        run(&red(Max, "MPI_DOUBLE").unwrap(), &[1.0f64, 4.0], &mut b);
        assert_eq!(b, [1.5, 4.0]);
        let mut b = [[1.0f32, 2.0]];
        run(
            &red(Prod, "MPI_C_COMPLEX").unwrap(),
            &[[3.0f32, -1.0]],
            &mut b,
        );
        assert_eq!(b, [[5.0, 5.0]]);
        let mut b = [0xf0u8];
        run(&red(Bxor, "MPI_BYTE").unwrap(), &[0xffu8], &mut b);
        assert_eq!(b, [0x0f]);
        let mut b = [1i32, 0, 5];
        run(&red(Land, "MPI_LOGICAL").unwrap(), &[7i32, 1, 1], &mut b);
        assert_eq!(b, [1, 0, 1]);
    }

    #[test]
    fn long_double_and_half_through_c() {
        let r = red(Builtin::Sum, "MPI_LONG_DOUBLE").unwrap();
        // 1.5 and 2.25 as x87 extended values: compute them with the kernel's own loads.
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        unsafe {
            let one = 1.0f64;
            // long double 1.0: sign 0, exponent 16383, mantissa with the explicit integer bit.
            let enc = |v: u64, e: u16, buf: &mut [u8]| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                buf[8..10].copy_from_slice(&e.to_le_bytes());
            };
            let _ = one;
            enc(0xc000_0000_0000_0000, 16383, &mut a[..16]); // 1.5
            enc(0x9000_0000_0000_0000, 16384, &mut b[..16]); // 2.25
            enc(0x8000_0000_0000_0000, 16383, &mut a[16..]); // 1.0
            enc(0x8000_0000_0000_0000, 16384, &mut b[16..]); // 2.0
            r.apply(a.as_ptr(), b.as_ptr(), b.as_mut_ptr(), 2);
        }
        // 3.75 = 1.111b x 2^1; 3.0 = 1.1b x 2^1.
        assert_eq!(&b[..8], &0xf000_0000_0000_0000u64.to_le_bytes());
        assert_eq!(&b[8..10], &16384u16.to_le_bytes());
        assert_eq!(&b[16..24], &0xc000_0000_0000_0000u64.to_le_bytes());
        let h = red(Builtin::Prod, "MPIX_C_FLOAT16").unwrap();
        // 1.5 = 0x3e00, 2.25 = 0x4080; product 3.375 = 0x42c0.
        let a = [0x3e00u16];
        let mut b = [0x4080u16];
        run(&h, &a, &mut b);
        assert_eq!(b, [0x42c0]);
    }

    #[test]
    fn minloc_maxloc_on_padded_pairs() {
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        struct DI(f64, i32);
        let a = [DI(1.0, 3), DI(5.0, 1), DI(2.0, 9)];
        let mut b = [DI(1.0, 2), DI(4.0, 0), DI(3.0, 4)];
        run(&red(Builtin::Minloc, "MPI_DOUBLE_INT").unwrap(), &a, &mut b);
        assert_eq!(b, [DI(1.0, 2), DI(4.0, 0), DI(2.0, 9)]);
        let mut b = [DI(1.0, 2), DI(4.0, 0), DI(3.0, 4)];
        run(&red(Builtin::Maxloc, "MPI_DOUBLE_INT").unwrap(), &a, &mut b);
        assert_eq!(b, [DI(1.0, 2), DI(5.0, 1), DI(3.0, 4)]);
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        struct SI(i16, i32);
        let mut b = [SI(7, 5)];
        run(
            &red(Builtin::Maxloc, "MPI_SHORT_INT").unwrap(),
            &[SI(7, 1)],
            &mut b,
        );
        assert_eq!(b, [SI(7, 1)]);
    }

    #[test]
    fn derived_types_reduce_per_block_and_keep_gaps() {
        let mut dts = dtypes();
        let int = dts[id("MPI_INT").idx()].clone().unwrap();
        // Every other int: blocks at 0, 8 in an extent of 12 (vector 2 x 1, stride 2).
        let mut v = Datatype::vector(2, 1, 2, false, &int, id("MPI_INT")).unwrap();
        v.committed = true;
        dts.push(Some(Arc::new(v)));
        let vid = DtypeId::from_idx(dts.len() - 1);
        let r = Reducer::new(Op::Builtin(Builtin::Sum), vid, &dts).unwrap();
        let a = [1i32, 100, 2, 0];
        let mut b = [10i32, -1, 20, -1];
        run(&r, &a[..1], &mut b[..1]);
        assert_eq!(b, [11, -1, 22, -1], "the gap is untouched");
        // A struct of int and double has no single basic type.
        let dbl = dts[id("MPI_DOUBLE").idx()].clone().unwrap();
        let mut s = Datatype::structure(
            &[1, 1],
            &[0, 8],
            &[(int.clone(), id("MPI_INT")), (dbl, DtypeId::new(12))],
        )
        .unwrap();
        s.committed = true;
        dts.push(Some(Arc::new(s)));
        let sid = DtypeId::from_idx(dts.len() - 1);
        assert!(Reducer::new(Op::Builtin(Builtin::Sum), sid, &dts).is_err());
        assert!(Reducer::new(Op::Builtin(Builtin::Replace), sid, &dts).is_ok());
    }

    #[test]
    fn f90_types_reduce_as_their_base() {
        use crate::mpi::datatype::Combiner;
        let mut dts = dtypes();
        for (combiner, base, ints) in [
            (Combiner::F90Real, "MPI_REAL8", vec![15, 307]),
            (Combiner::F90Integer, "MPI_INTEGER4", vec![9]),
            (Combiner::F90Complex, "MPI_COMPLEX8", vec![6, 37]),
        ] {
            let b = dts[id(base).idx()].clone().unwrap();
            dts.push(Some(Arc::new(Datatype::f90(combiner, &b, ints))));
        }
        let n = dts.len();
        let (real, int, cplx) = (
            DtypeId::from_idx(n - 3),
            DtypeId::from_idx(n - 2),
            DtypeId::from_idx(n - 1),
        );
        let r = Reducer::new(Op::Builtin(Builtin::Sum), real, &dts).unwrap();
        let mut b = [1.5f64, 2.0];
        run(&r, &[0.25f64, 1.0], &mut b);
        assert_eq!(b, [1.75, 3.0]);
        let r = Reducer::new(Op::Builtin(Builtin::Max), int, &dts).unwrap();
        let mut b = [3i32, -7];
        run(&r, &[5i32, -9], &mut b);
        assert_eq!(b, [5, -7]);
        assert!(Reducer::new(Op::Builtin(Builtin::Band), int, &dts).is_ok());
        assert!(Reducer::new(Op::Builtin(Builtin::Prod), cplx, &dts).is_ok());
        assert!(
            Reducer::new(Op::Builtin(Builtin::Max), cplx, &dts).is_err(),
            "complex has no order"
        );
        assert!(Reducer::new(Op::Builtin(Builtin::Band), real, &dts).is_err());
    }
}
