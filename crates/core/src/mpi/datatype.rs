//! Datatypes: predefined types and the flattened description every type is reduced to.
//!
//! A committed type is described once by its *type map flattened into blocks*: each block is a
//! contiguous byte run at an offset from the start of one element, made of basic values of one
//! size (the size matters for MPI_Get_elements and, later, for reductions). Adjacent blocks are
//! merged when the result is still homogeneous. Sending `count` elements is then a walk over
//! `count x blocks` copies with no per-value work, and a type whose one block covers its whole
//! extent is *contiguous*: its data is sent straight from the user buffer.
//!
//! The pair types of MPI_MINLOC/MAXLOC (MPI_DOUBLE_INT and friends) have padding, so even among
//! predefined types some are not contiguous.

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

/// A contiguous run of bytes inside one element of a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Offset from the element's start (may be negative).
    pub off: isize,
    pub len: usize,
    /// Size of the basic values that make up the run.
    pub basic_size: usize,
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
}

/// The arguments a type was built with, as MPI_Type_get_contents returns them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    pub ints: Vec<i64>,
    pub aints: Vec<isize>,
    /// Engine ids of the component types.
    pub types: Vec<u32>,
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
    pub blocks: Vec<Block>,
    /// One element is `size` bytes at offset 0 and the extent equals the size, so `count`
    /// elements are one contiguous run.
    pub contig: bool,
    pub basic: Option<Basic>,
    pub predefined: bool,
    pub committed: bool,
    pub combiner: Combiner,
    pub contents: Contents,
    /// Alignment of the most demanding basic value (pads the extent of derived types).
    pub align: usize,
    /// Bounds set explicitly (MPI_Type_create_resized, MPI_LB/MPI_UB): no alignment padding.
    pub explicit_bounds: bool,
}

impl Datatype {
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }

    pub fn true_extent(&self) -> isize {
        self.true_ub - self.true_lb
    }

    /// A predefined type of one basic kind.
    pub fn named(name: &str, b: Basic) -> Datatype {
        let s = b.size();
        Self::from_blocks(
            name,
            vec![Block {
                off: 0,
                len: s,
                basic_size: s,
            }],
            0,
            s as isize,
            Some(b),
        )
    }

    /// A predefined pair type `{ a; b }` laid out as the C compiler lays out the struct.
    pub fn pair(name: &str, a: Basic, b: Basic) -> Datatype {
        let (sa, sb) = (a.size(), b.size());
        let align_b = sb.min(16);
        let off_b = sa.div_ceil(align_b) * align_b;
        let align = sa.max(sb).min(16);
        let extent = (off_b + sb).div_ceil(align) * align;
        let blocks = vec![
            Block {
                off: 0,
                len: sa,
                basic_size: sa,
            },
            Block {
                off: off_b as isize,
                len: sb,
                basic_size: sb,
            },
        ];
        Self::from_blocks(name, blocks, 0, extent as isize, None)
    }

    /// Build a type from its blocks and bounds; merges adjacent homogeneous blocks.
    pub fn from_blocks(
        name: &str,
        blocks: Vec<Block>,
        lb: isize,
        ub: isize,
        basic: Option<Basic>,
    ) -> Datatype {
        let mut merged: Vec<Block> = Vec::with_capacity(blocks.len());
        for b in blocks.into_iter().filter(|b| b.len > 0) {
            if let Some(last) = merged.last_mut() {
                if last.off + last.len as isize == b.off && last.basic_size == b.basic_size {
                    last.len += b.len;
                    continue;
                }
            }
            merged.push(b);
        }
        let size = merged.iter().map(|b| b.len).sum();
        let true_lb = merged.iter().map(|b| b.off).min().unwrap_or(0);
        let true_ub = merged
            .iter()
            .map(|b| b.off + b.len as isize)
            .max()
            .unwrap_or(0);
        let mut at = 0isize;
        let covers = merged.iter().all(|b| {
            let ok = b.off == at;
            at += b.len as isize;
            ok
        });
        let contig = covers && lb == 0 && ub == size as isize;
        let align = merged
            .iter()
            .map(|b| b.basic_size.clamp(1, 16))
            .max()
            .unwrap_or(1);
        Datatype {
            name: name.to_string(),
            size,
            lb,
            ub,
            true_lb,
            true_ub,
            blocks: merged,
            contig,
            basic,
            predefined: true,
            committed: true,
            combiner: Combiner::Named,
            contents: Contents::default(),
            align,
            explicit_bounds: false,
        }
    }

    /// Bytes of `count` elements, or None on overflow.
    pub fn packed_size(&self, count: usize) -> Option<usize> {
        self.size.checked_mul(count)
    }

    /// Copy `count` elements at `buf` into `out` (appending), in type-map order.
    ///
    /// # Safety
    /// `buf` must be valid for reads over every block of every element.
    pub unsafe fn pack(&self, buf: *const u8, count: usize, out: &mut Vec<u8>) {
        out.reserve(self.size * count);
        let ext = self.extent();
        for i in 0..count {
            let base = buf.offset(i as isize * ext);
            for b in &self.blocks {
                out.extend_from_slice(std::slice::from_raw_parts(base.offset(b.off), b.len));
            }
        }
    }

    /// Copy packed bytes into `count` elements at `buf`; stops when `data` runs out (a short
    /// message fills a prefix of the elements). Returns the bytes consumed.
    ///
    /// # Safety
    /// `buf` must be valid for writes over every block of every element.
    pub unsafe fn unpack(&self, data: &[u8], buf: *mut u8, count: usize) -> usize {
        let ext = self.extent();
        let mut at = 0usize;
        for i in 0..count {
            let base = buf.offset(i as isize * ext);
            for b in &self.blocks {
                if at >= data.len() {
                    return at;
                }
                let n = b.len.min(data.len() - at);
                std::ptr::copy_nonoverlapping(data.as_ptr().add(at), base.offset(b.off), n);
                at += n;
            }
        }
        at
    }

    /// Packed bytes holding the first `n` basic values of a sequence of elements of this type
    /// (MPI_Status_set_elements), or None when the type holds no basic values.
    pub fn bytes_for_elements(&self, n: u64) -> Option<u64> {
        let per: u64 = self
            .blocks
            .iter()
            .map(|b| (b.len / b.basic_size.max(1)) as u64)
            .sum();
        if per == 0 {
            return (n == 0).then_some(0);
        }
        let mut bytes = (n / per) * self.size as u64;
        let mut rest = n % per;
        for b in &self.blocks {
            if rest == 0 {
                break;
            }
            let k = ((b.len / b.basic_size.max(1)) as u64).min(rest);
            bytes += k * b.basic_size as u64;
            rest -= k;
        }
        Some(bytes)
    }

    /// MPI_Get_elements: basic values in `bytes` of packed data of this type, or None when the
    /// bytes end inside a basic value.
    pub fn elements_in(&self, bytes: usize) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let per: u64 = self
            .blocks
            .iter()
            .map(|b| (b.len / b.basic_size.max(1)) as u64)
            .sum();
        let full = (bytes / self.size) as u64;
        let mut rest = bytes % self.size;
        let mut n = full * per;
        for b in &self.blocks {
            if rest == 0 {
                break;
            }
            let take = rest.min(b.len);
            if take % b.basic_size.max(1) != 0 {
                return None;
            }
            n += (take / b.basic_size.max(1)) as u64;
            rest -= take;
        }
        Some(n)
    }
}

/// Accumulates the flattened blocks of a type under construction, merging as it goes so that
/// e.g. a contiguous run of a million bytes stays one block.
#[derive(Default)]
struct Builder {
    blocks: Vec<Block>,
    lb: Option<isize>,
    ub: Option<isize>,
    align: usize,
    explicit: bool,
}

/// Blocks beyond which a type is refused (its description would not fit in memory).
pub const MAX_BLOCKS: usize = 1 << 24;

impl Builder {
    fn push(&mut self, b: Block) -> Result<(), String> {
        if b.len == 0 {
            return Ok(());
        }
        if let Some(last) = self.blocks.last_mut() {
            if last.off + last.len as isize == b.off && last.basic_size == b.basic_size {
                last.len += b.len;
                return Ok(());
            }
        }
        if self.blocks.len() >= MAX_BLOCKS {
            return Err(format!(
                "the type has more than {MAX_BLOCKS} separate blocks"
            ));
        }
        self.blocks.push(b);
        Ok(())
    }

    /// `count` copies of `t`, the first at byte displacement `disp`, one extent apart.
    fn add(&mut self, disp: isize, count: usize, t: &Datatype) -> Result<(), String> {
        if count == 0 {
            return Ok(());
        }
        let ext = t.extent();
        let last = disp
            .checked_add(
                ext.checked_mul(count as isize - 1)
                    .ok_or("displacement overflow")?,
            )
            .ok_or("displacement overflow")?;
        let (lo, hi) = (disp.min(last), disp.max(last));
        self.lb = Some(self.lb.map_or(lo + t.lb, |l| l.min(lo + t.lb)));
        self.ub = Some(self.ub.map_or(hi + t.ub, |u| u.max(hi + t.ub)));
        self.align = self.align.max(t.align);
        self.explicit |= t.explicit_bounds;
        if t.blocks.len() == 1 && t.blocks[0].off == 0 && t.blocks[0].len as isize == ext {
            // Copies of a gap-free type are one run.
            let b = t.blocks[0];
            return self.push(Block {
                off: disp,
                len: b.len * count,
                basic_size: b.basic_size,
            });
        }
        for k in 0..count as isize {
            let base = disp + k * ext;
            for b in &t.blocks {
                self.push(Block {
                    off: base + b.off,
                    len: b.len,
                    basic_size: b.basic_size,
                })?;
            }
        }
        Ok(())
    }

    fn finish(self, name: &str, combiner: Combiner, contents: Contents) -> Datatype {
        let lb = self.lb.unwrap_or(0);
        let mut ub = self.ub.unwrap_or(0);
        let align = self.align.max(1);
        if !self.explicit {
            let ext = ub - lb;
            let rem = ext.rem_euclid(align as isize);
            if rem != 0 {
                ub += align as isize - rem;
            }
        }
        let mut d = Datatype::from_blocks(name, self.blocks, lb, ub, None);
        d.align = align;
        d.explicit_bounds = self.explicit;
        d.predefined = false;
        d.committed = false;
        d.combiner = combiner;
        d.contents = contents;
        d
    }
}

/// Type constructors (MPI-4.0 section 5.1.2). Each returns an uncommitted type; errors are
/// messages for MPI_ERR_TYPE / MPI_ERR_ARG.
impl Datatype {
    pub fn contiguous(count: usize, t: &Datatype, tid: u32) -> Result<Datatype, String> {
        let mut b = Builder::default();
        b.add(0, count, t)?;
        Ok(b.finish(
            "",
            Combiner::Contiguous,
            Contents {
                ints: vec![count as i64],
                aints: vec![],
                types: vec![tid],
            },
        ))
    }

    /// Vector with the stride in elements (`bytes: false`) or bytes (hvector).
    pub fn vector(
        count: usize,
        blocklen: usize,
        stride: isize,
        bytes: bool,
        t: &Datatype,
        tid: u32,
    ) -> Result<Datatype, String> {
        let mut b = Builder::default();
        let step = if bytes {
            stride
        } else {
            stride.checked_mul(t.extent()).ok_or("stride overflow")?
        };
        for i in 0..count as isize {
            b.add(
                i.checked_mul(step).ok_or("displacement overflow")?,
                blocklen,
                t,
            )?;
        }
        let (combiner, contents) = if bytes {
            (
                Combiner::Hvector,
                Contents {
                    ints: vec![count as i64, blocklen as i64],
                    aints: vec![stride],
                    types: vec![tid],
                },
            )
        } else {
            (
                Combiner::Vector,
                Contents {
                    ints: vec![count as i64, blocklen as i64, stride as i64],
                    aints: vec![],
                    types: vec![tid],
                },
            )
        };
        Ok(b.finish("", combiner, contents))
    }

    /// Indexed with displacements in elements (`bytes: false`) or bytes (hindexed).
    pub fn indexed(
        blocklens: &[usize],
        disps: &[isize],
        bytes: bool,
        t: &Datatype,
        tid: u32,
    ) -> Result<Datatype, String> {
        let mut b = Builder::default();
        for (&bl, &d) in blocklens.iter().zip(disps) {
            let disp = if bytes {
                d
            } else {
                d.checked_mul(t.extent()).ok_or("displacement overflow")?
            };
            b.add(disp, bl, t)?;
        }
        let n = blocklens.len() as i64;
        let contents = if bytes {
            Contents {
                ints: std::iter::once(n)
                    .chain(blocklens.iter().map(|x| *x as i64))
                    .collect(),
                aints: disps.to_vec(),
                types: vec![tid],
            }
        } else {
            Contents {
                ints: std::iter::once(n)
                    .chain(blocklens.iter().map(|x| *x as i64))
                    .chain(disps.iter().map(|x| *x as i64))
                    .collect(),
                aints: vec![],
                types: vec![tid],
            }
        };
        Ok(b.finish(
            "",
            if bytes {
                Combiner::Hindexed
            } else {
                Combiner::Indexed
            },
            contents,
        ))
    }

    /// Indexed with one block length (indexed_block / hindexed_block).
    pub fn indexed_block(
        blocklen: usize,
        disps: &[isize],
        bytes: bool,
        t: &Datatype,
        tid: u32,
    ) -> Result<Datatype, String> {
        let lens = vec![blocklen; disps.len()];
        let mut d = Self::indexed(&lens, disps, bytes, t, tid)?;
        let n = disps.len() as i64;
        if bytes {
            d.combiner = Combiner::HindexedBlock;
            d.contents = Contents {
                ints: vec![n, blocklen as i64],
                aints: disps.to_vec(),
                types: vec![tid],
            };
        } else {
            d.combiner = Combiner::IndexedBlock;
            d.contents = Contents {
                ints: [n, blocklen as i64]
                    .into_iter()
                    .chain(disps.iter().map(|x| *x as i64))
                    .collect(),
                aints: vec![],
                types: vec![tid],
            };
        }
        Ok(d)
    }

    /// Struct: blocks of different types at byte displacements.
    pub fn structure(
        blocklens: &[usize],
        disps: &[isize],
        types: &[(&Datatype, u32)],
    ) -> Result<Datatype, String> {
        let mut b = Builder::default();
        for ((&bl, &d), (t, _)) in blocklens.iter().zip(disps).zip(types) {
            if t.name == "MPI_LB" || t.name == "MPI_UB" {
                // The removed MPI-1 markers: they set a bound explicitly.
                b.explicit = true;
                if t.name == "MPI_LB" {
                    b.lb = Some(b.lb.map_or(d, |l| l.min(d)));
                } else {
                    b.ub = Some(b.ub.map_or(d, |u| u.max(d)));
                }
                continue;
            }
            b.add(d, bl, t)?;
        }
        let n = blocklens.len() as i64;
        Ok(b.finish(
            "",
            Combiner::Struct,
            Contents {
                ints: std::iter::once(n)
                    .chain(blocklens.iter().map(|x| *x as i64))
                    .collect(),
                aints: disps.to_vec(),
                types: types.iter().map(|(_, id)| *id).collect(),
            },
        ))
    }

    /// A copy of `t` with new lower bound and extent.
    pub fn resized(t: &Datatype, lb: isize, extent: isize, tid: u32) -> Datatype {
        let mut d = Datatype::from_blocks("", t.blocks.clone(), lb, lb + extent, None);
        d.align = t.align;
        d.explicit_bounds = true;
        d.predefined = false;
        d.committed = false;
        d.combiner = Combiner::Resized;
        d.contents = Contents {
            ints: vec![],
            aints: vec![lb, extent],
            types: vec![tid],
        };
        d
    }

    /// MPI_Type_dup: the same type map, uncommitted state kept.
    pub fn dup(t: &Datatype, tid: u32) -> Datatype {
        let mut d = t.clone();
        d.name = String::new();
        d.predefined = false;
        d.committed = t.committed;
        d.combiner = Combiner::Dup;
        d.contents = Contents {
            ints: vec![],
            aints: vec![],
            types: vec![tid],
        };
        d
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
        n("MPI_C_FLOAT_COMPLEX", FloatComplex),
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
        Datatype::from_blocks("MPI_LB", vec![], 0, 0, None),
        Datatype::from_blocks("MPI_UB", vec![], 0, 0, None),
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
    "MPI_C_FLOAT_COMPLEX",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_table() {
        let p = predefined();
        assert_eq!(p.len(), PREDEFINED_NAMES.len());
        for (t, n) in p.iter().zip(PREDEFINED_NAMES) {
            assert_eq!(&t.name, n);
        }
    }

    #[test]
    fn pair_layouts_match_c() {
        #[repr(C)]
        struct DI(f64, i32);
        #[repr(C)]
        struct SI(i16, i32);
        #[repr(C)]
        struct FI(f32, i32);
        let p = predefined();
        let di = &p[predefined_index("MPI_DOUBLE_INT").unwrap()];
        assert_eq!(
            (di.size, di.extent() as usize),
            (12, std::mem::size_of::<DI>())
        );
        assert!(!di.contig);
        let si = &p[predefined_index("MPI_SHORT_INT").unwrap()];
        assert_eq!(
            (si.size, si.extent() as usize),
            (6, std::mem::size_of::<SI>())
        );
        assert_eq!(si.blocks[1].off, 4);
        let fi = &p[predefined_index("MPI_FLOAT_INT").unwrap()];
        assert_eq!(fi.extent() as usize, std::mem::size_of::<FI>());
        let ldi = &p[predefined_index("MPI_LONG_DOUBLE_INT").unwrap()];
        assert_eq!((ldi.size, ldi.extent()), (20, 32));
        let two = &p[predefined_index("MPI_2INT").unwrap()];
        assert!(two.contig, "2INT is two ints back to back");
        assert_eq!(two.blocks.len(), 1);
    }

    #[test]
    fn pack_unpack_roundtrip_with_padding() {
        let p = predefined();
        let di = &p[predefined_index("MPI_DOUBLE_INT").unwrap()];
        let mut src = [0u8; 48];
        for (i, b) in src.iter_mut().enumerate() {
            *b = i as u8;
        }
        let mut packed = vec![];
        unsafe { di.pack(src.as_ptr(), 3, &mut packed) };
        assert_eq!(packed.len(), 36);
        assert_eq!(&packed[..12], &src[..12]);
        assert_eq!(&packed[12..24], &src[16..28]);
        let mut dst = vec![0xffu8; 48];
        let used = unsafe { di.unpack(&packed[..30], dst.as_mut_ptr(), 3) };
        assert_eq!(used, 30);
        assert_eq!(&dst[..12], &src[..12]);
        assert_eq!(&dst[12..16], &[0xff; 4], "padding untouched");
        assert_eq!(&dst[32..38], &src[32..38]);
        assert_eq!(&dst[38..], &[0xff; 10]);
    }

    fn t(name: &str) -> Datatype {
        predefined()[predefined_index(name).unwrap()].clone()
    }

    #[test]
    fn constructors_flatten_and_pad_like_c() {
        let int = t("MPI_INT");
        let c = Datatype::contiguous(1_000_000, &t("MPI_BYTE"), 3).unwrap();
        assert_eq!(
            (c.blocks.len(), c.size, c.extent()),
            (1, 1_000_000, 1_000_000)
        );
        assert!(c.contig);
        // A matrix column: 3 ints, stride 4 ints.
        let v = Datatype::vector(3, 1, 4, false, &int, 7).unwrap();
        assert_eq!(v.size, 12);
        assert_eq!((v.lb, v.extent()), (0, 36));
        assert_eq!(
            v.blocks.iter().map(|b| b.off).collect::<Vec<_>>(),
            vec![0, 16, 32]
        );
        assert!(!v.contig);
        // struct { double d; char c; } pads to 16 like the C struct.
        let s = Datatype::structure(
            &[1, 1],
            &[0, 8],
            &[(&t("MPI_DOUBLE"), 12), (&t("MPI_CHAR"), 0)],
        )
        .unwrap();
        assert_eq!((s.size, s.extent()), (9, 16));
        // Resized to 12 bytes: no padding.
        let r = Datatype::resized(&s, 0, 12, 99);
        assert_eq!(r.extent(), 12);
        let r2 = Datatype::contiguous(2, &r, 99).unwrap();
        assert_eq!((r2.size, r2.extent()), (18, 24));
        // Struct of int and double back to back is contiguous even though basic sizes differ.
        let id =
            Datatype::structure(&[1, 1], &[0, 4], &[(&int, 7), (&t("MPI_FLOAT"), 11)]).unwrap();
        assert!(id.contig);
        // Negative displacements.
        let neg = Datatype::indexed(&[1, 1], &[-2, 1], false, &int, 7).unwrap();
        assert_eq!((neg.lb, neg.true_lb, neg.extent()), (-8, -8, 16));
        assert!(Datatype::vector(usize::MAX / 2, 1, isize::MAX, false, &int, 7).is_err());
    }

    #[test]
    fn elements() {
        let p = predefined();
        let di = &p[predefined_index("MPI_DOUBLE_INT").unwrap()];
        assert_eq!(di.elements_in(24), Some(4));
        assert_eq!(di.elements_in(20), Some(3));
        assert_eq!(di.elements_in(14), None);
        let int = &p[predefined_index("MPI_INT").unwrap()];
        assert_eq!(int.elements_in(40), Some(10));
        assert_eq!(int.elements_in(6), None);
        for n in 0..10 {
            assert_eq!(
                di.elements_in(di.bytes_for_elements(n).unwrap() as usize),
                Some(n)
            );
        }
    }
}
