//! Type signatures: the sequence of basic values of one element, in packed order, run-length
//! encoded and with repetitions kept as loops (so a vector of a million structs is a few
//! entries). Offsets do not appear here (they are the layout's business); the signature answers
//! MPI_Get_elements, MPI_Status_set_elements and the external32 conversion, which need to know
//! which basic value each packed byte belongs to.

use std::sync::Arc;

use super::Basic;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sig {
    /// `n` consecutive values of one basic kind.
    Vals { basic: Basic, n: u64 },
    /// `count` repetitions of `body`.
    Rep {
        count: u64,
        body: Arc<[Sig]>,
        /// Basic values in one repetition.
        elems: u64,
        /// Packed (native) bytes of one repetition.
        bytes: u64,
    },
}

impl Sig {
    pub fn elems(&self) -> u64 {
        match self {
            Sig::Vals { n, .. } => *n,
            Sig::Rep { count, elems, .. } => count * elems,
        }
    }

    pub fn bytes(&self) -> u64 {
        match self {
            Sig::Vals { basic, n } => n * basic.size() as u64,
            Sig::Rep { count, bytes, .. } => count * bytes,
        }
    }
}

pub fn sig_elems(s: &[Sig]) -> u64 {
    s.iter().map(Sig::elems).sum()
}

pub fn sig_bytes(s: &[Sig]) -> u64 {
    s.iter().map(Sig::bytes).sum()
}

/// A signature under construction; merges adjacent values of one kind and equal repetitions.
#[derive(Debug, Default, Clone)]
pub struct SigBuilder {
    items: Vec<Sig>,
}

impl SigBuilder {
    pub fn push(&mut self, s: Sig) {
        if s.elems() == 0 {
            return;
        }
        if let Some(last) = self.items.last_mut() {
            match (&mut *last, &s) {
                (Sig::Vals { basic: a, n }, Sig::Vals { basic: b, n: m }) if a == b => {
                    *n += m;
                    return;
                }
                (
                    Sig::Rep {
                        count, body: b1, ..
                    },
                    Sig::Rep {
                        count: c2,
                        body: b2,
                        ..
                    },
                ) if Arc::ptr_eq(b1, b2) || (b1.len() <= 8 && b1 == b2) => {
                    *count += c2;
                    return;
                }
                _ => {}
            }
        }
        self.items.push(s);
    }

    /// Append `count` repetitions of `body`.
    pub fn push_repeat(&mut self, body: &Arc<[Sig]>, count: u64) {
        if count == 0 || body.is_empty() {
            return;
        }
        if count == 1 {
            for s in body.iter() {
                self.push(s.clone());
            }
            return;
        }
        if let [Sig::Vals { basic, n }] = **body {
            self.push(Sig::Vals {
                basic,
                n: n * count,
            });
            return;
        }
        self.push(Sig::Rep {
            count,
            body: body.clone(),
            elems: sig_elems(body),
            bytes: sig_bytes(body),
        });
    }

    pub fn finish(self) -> Arc<[Sig]> {
        self.items.into()
    }
}

/// Basic values in the first `bytes` packed bytes of one pass over `s`, or None when the bytes
/// end inside a value. `bytes` must not exceed `sig_bytes(s)`.
pub fn elems_in_prefix(s: &[Sig], mut bytes: u64) -> Option<u64> {
    let mut n = 0;
    for item in s {
        if bytes == 0 {
            break;
        }
        let whole = item.bytes();
        if bytes >= whole {
            n += item.elems();
            bytes -= whole;
            continue;
        }
        return match item {
            Sig::Vals { basic, .. } => {
                let sz = basic.size() as u64;
                bytes.is_multiple_of(sz).then(|| n + bytes / sz)
            }
            Sig::Rep {
                body,
                elems,
                bytes: per,
                ..
            } => {
                let k = bytes / per;
                elems_in_prefix(body, bytes % per).map(|m| n + k * elems + m)
            }
        };
    }
    Some(n)
}

/// Packed bytes holding the first `n` basic values of one pass over `s` (`n` at most
/// `sig_elems(s)`).
pub fn bytes_for_prefix(s: &[Sig], mut n: u64) -> u64 {
    let mut bytes = 0;
    for item in s {
        if n == 0 {
            break;
        }
        let e = item.elems();
        if n >= e {
            bytes += item.bytes();
            n -= e;
            continue;
        }
        return match item {
            Sig::Vals { basic, .. } => bytes + n * basic.size() as u64,
            Sig::Rep {
                body,
                elems,
                bytes: per,
                ..
            } => bytes + (n / elems) * per + bytes_for_prefix(body, n % elems),
        };
    }
    bytes
}

/// Call `f(basic, n)` for each run of values of one pass over `s`, in order.
pub fn for_each_run(s: &[Sig], f: &mut impl FnMut(Basic, u64)) {
    for item in s {
        match item {
            Sig::Vals { basic, n } => f(*basic, *n),
            Sig::Rep { count, body, .. } => {
                for _ in 0..*count {
                    for_each_run(body, f);
                }
            }
        }
    }
}

/// The one basic kind every value of the signature has, if there is one (reductions over
/// derived types made of one kind).
pub fn sole_basic(s: &[Sig]) -> Option<Basic> {
    let mut kind = None;
    fn walk(s: &[Sig], kind: &mut Option<Basic>) -> bool {
        for item in s {
            let ok = match item {
                Sig::Vals { basic, .. } => match kind {
                    None => {
                        *kind = Some(*basic);
                        true
                    }
                    Some(k) => k == basic,
                },
                Sig::Rep { body, .. } => walk(body, kind),
            };
            if !ok {
                return false;
            }
        }
        true
    }
    walk(s, &mut kind).then_some(kind).flatten()
}

// -------------------------------------------------------------------------------------------
// external32 (MPI-4.0 section 13.5.2): big-endian, IEEE formats, the standard's sizes.

impl Basic {
    /// Size of one value in the external32 representation.
    pub fn ext32_size(self) -> usize {
        use Basic::*;
        match self {
            // The standard's table: C long is 4 bytes, wchar_t 2.
            Long | UnsignedLong => 4,
            WChar => 2,
            b => b.size(),
        }
    }
}

/// Bytes of one pass over `s` in external32.
pub fn ext32_bytes(s: &[Sig]) -> u64 {
    s.iter()
        .map(|item| match item {
            Sig::Vals { basic, n } => n * basic.ext32_size() as u64,
            Sig::Rep { count, body, .. } => count * ext32_bytes(body),
        })
        .sum()
}

/// x87 80-bit extended (in the low 10 bytes of a 16-byte long double) to IEEE binary128
/// big-endian. Both formats have a 15-bit exponent with bias 16383; the x87 format stores the
/// integer bit explicitly, binary128 does not.
fn x87_to_quad(src: &[u8]) -> [u8; 16] {
    let mant = u64::from_le_bytes(src[0..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes([src[8], src[9]]);
    let frac = mant & !(1u64 << 63);
    // 63 fraction bits go to the top of binary128's 112.
    let q: u128 = ((se as u128) << 112) | ((frac as u128) << 49);
    q.to_be_bytes()
}

/// IEEE binary128 big-endian to x87 80-bit extended (16 bytes, little-endian, padding zero),
/// rounding the fraction to nearest (ties to even).
fn quad_to_x87(src: &[u8]) -> [u8; 16] {
    let q = u128::from_be_bytes(src[0..16].try_into().expect("16 bytes"));
    let mut se = (q >> 112) as u16;
    let exp = se & 0x7fff;
    let frac112 = q & ((1u128 << 112) - 1);
    let mut frac = (frac112 >> 49) as u64;
    let rest = frac112 & ((1u128 << 49) - 1);
    let half = 1u128 << 48;
    if exp != 0x7fff && (rest > half || (rest == half && frac & 1 == 1)) {
        frac += 1;
        if frac == 1 << 63 {
            // The fraction overflowed into the integer bit: next binade.
            frac = 0;
            se += 1;
        }
    }
    let exp = se & 0x7fff;
    // Normal numbers (and infinities, NaNs) have the integer bit set; zero and subnormals not.
    let int_bit = if exp != 0 { 1u64 << 63 } else { 0 };
    let mant = frac | int_bit;
    let mut out = [0u8; 16];
    out[0..8].copy_from_slice(&mant.to_le_bytes());
    out[8..10].copy_from_slice(&se.to_le_bytes());
    out
}

/// Convert one value from native (`src`, native size) to external32 (`dst`, external size).
fn value_to_ext(b: Basic, src: &[u8], dst: &mut [u8]) {
    use Basic::*;
    match b {
        LongDouble => dst.copy_from_slice(&x87_to_quad(src)),
        LongDoubleComplex => {
            dst[..16].copy_from_slice(&x87_to_quad(&src[..16]));
            dst[16..].copy_from_slice(&x87_to_quad(&src[16..]));
        }
        Long | UnsignedLong | WChar => {
            // Narrowed to the standard's size: the low-order bytes, big-endian.
            let n = dst.len();
            for i in 0..n {
                dst[i] = src[n - 1 - i];
            }
        }
        FloatComplex | DoubleComplex => {
            let h = src.len() / 2;
            for (d, s) in dst.chunks_mut(h).zip(src.chunks(h)) {
                for i in 0..h {
                    d[i] = s[h - 1 - i];
                }
            }
        }
        _ => {
            let n = src.len();
            for i in 0..n {
                dst[i] = src[n - 1 - i];
            }
        }
    }
}

/// Convert one value from external32 (`src`) to native (`dst`).
fn value_from_ext(b: Basic, src: &[u8], dst: &mut [u8]) {
    use Basic::*;
    match b {
        LongDouble => dst.copy_from_slice(&quad_to_x87(src)),
        LongDoubleComplex => {
            dst[..16].copy_from_slice(&quad_to_x87(&src[..16]));
            dst[16..].copy_from_slice(&quad_to_x87(&src[16..]));
        }
        Long | UnsignedLong | WChar => {
            // Widen: sign-extend signed long, zero-extend the others.
            let n = src.len();
            let neg = b == Long && src[0] & 0x80 != 0;
            dst.fill(if neg { 0xff } else { 0 });
            for i in 0..n {
                dst[i] = src[n - 1 - i];
            }
        }
        FloatComplex | DoubleComplex => {
            let h = src.len() / 2;
            for (d, s) in dst.chunks_mut(h).zip(src.chunks(h)) {
                for i in 0..h {
                    d[i] = s[h - 1 - i];
                }
            }
        }
        _ => {
            let n = src.len();
            for i in 0..n {
                dst[i] = src[n - 1 - i];
            }
        }
    }
}

/// Convert `count` passes over `s` between the native packed form and external32
/// (`to_ext`: native -> external). `src` and `dst` hold exactly the bytes of both forms.
pub fn convert(s: &[Sig], count: usize, src: &[u8], dst: &mut [u8], to_ext: bool) {
    let (mut i, mut o) = (0usize, 0usize);
    for _ in 0..count {
        for_each_run(s, &mut |b, n| {
            let (ns, es) = (b.size(), b.ext32_size());
            let (is, os) = if to_ext { (ns, es) } else { (es, ns) };
            if is == 1 && os == 1 {
                let n = n as usize;
                dst[o..o + n].copy_from_slice(&src[i..i + n]);
                i += n;
                o += n;
                return;
            }
            for _ in 0..n {
                let (a, z) = (&src[i..i + is], &mut dst[o..o + os]);
                if to_ext {
                    value_to_ext(b, a, z)
                } else {
                    value_from_ext(b, a, z)
                }
                i += is;
                o += os;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_double_roundtrip_and_format() {
        for v in [
            0.0f64,
            1.5,
            -2.25,
            1e300,
            -1e-300,
            3.0e-310,
            f64::INFINITY,
            f64::MAX,
        ] {
            // Build the x87 form of the double exactly.
            let bits = v.to_bits();
            let sign = (bits >> 63) as u16;
            let e = ((bits >> 52) & 0x7ff) as i32;
            let f = bits & ((1u64 << 52) - 1);
            let (se, mant) = if e == 0 && f == 0 {
                (sign << 15, 0u64)
            } else if e == 0x7ff {
                ((sign << 15) | 0x7fff, (1u64 << 63) | (f << 11))
            } else if e == 0 {
                // Subnormal double f * 2^-1074: normalise the mantissa.
                let lz = f.leading_zeros();
                ((sign << 15) | (15372 - lz) as u16, f << lz)
            } else {
                (
                    (sign << 15) | (e - 1023 + 16383) as u16,
                    (1u64 << 63) | (f << 11),
                )
            };
            let mut x = [0u8; 16];
            x[0..8].copy_from_slice(&mant.to_le_bytes());
            x[8..10].copy_from_slice(&se.to_le_bytes());
            let q = x87_to_quad(&x);
            assert_eq!(quad_to_x87(&q), x, "{v}");
        }
        // 1.5 in binary128 is 3fff 8000 0000 ...
        let mut x = [0u8; 16];
        x[0..8].copy_from_slice(&(3u64 << 62).to_le_bytes());
        x[8..10].copy_from_slice(&0x3fffu16.to_le_bytes());
        let q = x87_to_quad(&x);
        assert_eq!(&q[..3], &[0x3f, 0xff, 0x80]);
        assert!(q[3..].iter().all(|b| *b == 0));
    }

    #[test]
    fn narrowing_and_widening() {
        let s: Arc<[Sig]> = vec![Sig::Vals {
            basic: Basic::Long,
            n: 2,
        }]
        .into();
        let vals = [-5i64, 0x0102_0304];
        let src: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut ext = vec![0u8; 8];
        convert(&s, 1, &src, &mut ext, true);
        assert_eq!(ext, [0xff, 0xff, 0xff, 0xfb, 1, 2, 3, 4]);
        let mut back = vec![0u8; 16];
        convert(&s, 1, &ext, &mut back, false);
        assert_eq!(back, src);
    }

    #[test]
    fn prefixes() {
        let body: Arc<[Sig]> = vec![
            Sig::Vals {
                basic: Basic::Double,
                n: 1,
            },
            Sig::Vals {
                basic: Basic::Int,
                n: 2,
            },
        ]
        .into();
        let mut b = SigBuilder::default();
        b.push_repeat(&body, 3);
        b.push(Sig::Vals {
            basic: Basic::Char,
            n: 5,
        });
        let s = b.finish();
        assert_eq!(sig_elems(&s), 14);
        assert_eq!(sig_bytes(&s), 53);
        assert_eq!(elems_in_prefix(&s, 16), Some(3));
        assert_eq!(elems_in_prefix(&s, 24), Some(4));
        assert_eq!(elems_in_prefix(&s, 20), None);
        assert_eq!(elems_in_prefix(&s, 50), Some(11));
        for n in 0..=14 {
            assert_eq!(elems_in_prefix(&s, bytes_for_prefix(&s, n)), Some(n));
        }
    }
}
