//! Datatype engine tests: fixed cases (bounds checked against MPICH 4.0 and the C compiler),
//! and a property test that builds random nested types and compares the engine with a naive
//! reference that expands every type into its full type map.

use crate::ids::DtypeId;
use std::sync::Arc;

use proptest::prelude::*;

use super::layout::Op;
use super::*;

fn t(name: &str) -> Arc<Datatype> {
    Arc::new(predefined()[predefined_index(name).unwrap()].clone())
}

fn id(name: &str) -> DtypeId {
    DtypeId::from_idx(predefined_index(name).unwrap())
}

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
    let di = t("MPI_DOUBLE_INT");
    assert_eq!(
        (di.size, di.extent() as usize),
        (12, std::mem::size_of::<DI>())
    );
    assert!(!di.contig);
    let si = t("MPI_SHORT_INT");
    assert_eq!(
        (si.size, si.extent() as usize),
        (6, std::mem::size_of::<SI>())
    );
    assert!(matches!(si.ops[1], Op::Run { off: 4, .. }));
    assert_eq!(
        t("MPI_FLOAT_INT").extent() as usize,
        std::mem::size_of::<FI>()
    );
    let ldi = t("MPI_LONG_DOUBLE_INT");
    assert_eq!((ldi.size, ldi.extent()), (20, 32));
    let two = t("MPI_2INT");
    assert!(two.contig, "2INT is two ints back to back");
    assert_eq!(two.ops.len(), 1);
    assert_eq!(two.elems, 2);
}

#[test]
fn pack_unpack_roundtrip_with_padding() {
    let di = t("MPI_DOUBLE_INT");
    let src: Vec<u8> = (0..48).collect();
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

/// (size, lb, extent, true_lb, true_extent)
fn shape(d: &Datatype) -> (usize, isize, isize, isize, isize) {
    (d.size, d.lb, d.extent(), d.true_lb, d.true_extent())
}

fn st2(a: &Arc<Datatype>, da: isize, b: &Arc<Datatype>, db: isize) -> Arc<Datatype> {
    Arc::new(
        Datatype::structure(
            &[1, 1],
            &[da, db],
            &[
                (a.clone(), DtypeId::new(900)),
                (b.clone(), DtypeId::new(901)),
            ],
        )
        .unwrap(),
    )
}

#[test]
fn bounds_follow_mpich() {
    let int = t("MPI_INT");
    let dbl = t("MPI_DOUBLE");
    let chr = t("MPI_CHAR");
    // Values printed by MPICH 4.0.2 for the same constructions.
    let hv = Arc::new(Datatype::vector(2, 1, 5, true, &int, DtypeId::new(7)).unwrap());
    assert_eq!(shape(&hv), (8, 0, 9, 0, 9), "vectors are not padded");
    assert_eq!(shape(&st2(&dbl, 0, &chr, 8)), (9, 0, 16, 0, 9));
    assert_eq!(shape(&st2(&int, 0, &chr, 5)), (5, 0, 8, 0, 6));
    assert_eq!(shape(&st2(&int, 0, &hv, 4)), (12, 0, 16, 0, 13));
    assert_eq!(shape(&st2(&chr, -3, &int, 0)), (5, -3, 8, -3, 7));
    assert_eq!(
        shape(&st2(&t("MPI_LONG_DOUBLE"), 0, &chr, 16)),
        (17, 0, 32, 0, 17)
    );
    assert_eq!(
        shape(&st2(&t("MPI_C_DOUBLE_COMPLEX"), 0, &chr, 16)),
        (17, 0, 24, 0, 17)
    );
    assert_eq!(shape(&st2(&t("MPI_2INT"), 0, &chr, 8)), (9, 0, 12, 0, 9));
    let v = Datatype::vector(2, 1, 3, false, &t("MPI_DOUBLE_INT"), DtypeId::new(18)).unwrap();
    assert_eq!(shape(&v), (24, 0, 64, 0, 60));
    let r = Arc::new(Datatype::resized(&int, -2, 10, DtypeId::new(7)).unwrap());
    assert_eq!(shape(&r), (4, -2, 10, 0, 4));
    assert_eq!(shape(&st2(&r, 0, &dbl, 20)), (12, -2, 32, 0, 28));
    assert_eq!(
        shape(&Datatype::contiguous(2, &r, DtypeId::new(99)).unwrap()),
        (8, -2, 20, 0, 14)
    );
    let r9 = Arc::new(Datatype::resized(&dbl, 0, 9, DtypeId::new(12)).unwrap());
    assert_eq!(
        shape(&Datatype::contiguous(2, &r9, DtypeId::new(99)).unwrap()),
        (16, 0, 18, 0, 17)
    );
    assert_eq!(shape(&st2(&r9, 0, &chr, 9)), (9, 0, 16, 0, 10));
    // MPI_LB / MPI_UB set the bound and switch padding off; a member's markers do not.
    let lbm = t("MPI_LB");
    let ubm = t("MPI_UB");
    assert_eq!(shape(&st2(&dbl, 0, &lbm, 12)), (8, 12, -4, 0, 8));
    let ub6 = st2(&int, 0, &ubm, 6);
    assert_eq!(shape(&ub6), (4, 0, 6, 0, 4));
    assert_eq!(shape(&st2(&ub6, 0, &chr, 6)), (5, 0, 8, 0, 7));
    let lb2 = st2(&int, 4, &lbm, 2);
    assert_eq!(shape(&lb2), (4, 2, 6, 4, 4));
    assert_eq!(shape(&st2(&lb2, 0, &lbm, 5)), (4, 5, 3, 4, 4));
    // Empty blocks: vectors still mark positions, indexed and struct skip them.
    assert_eq!(
        shape(&Datatype::vector(3, 0, 2, false, &int, DtypeId::new(7)).unwrap()),
        (0, 0, 16, 0, 16)
    );
    assert_eq!(
        shape(&Datatype::vector(3, 2, -3, false, &int, DtypeId::new(7)).unwrap()),
        (24, -24, 32, -24, 32)
    );
    assert_eq!(
        shape(&Datatype::indexed(&[0, 0], &[3, 5], false, &int, DtypeId::new(7)).unwrap()),
        (0, 0, 0, 0, 0)
    );
    let s = Datatype::structure(
        &[1, 0, 1],
        &[0, 100, 8],
        &[
            (int.clone(), DtypeId::new(7)),
            (dbl.clone(), DtypeId::new(12)),
            (chr.clone(), DtypeId::new(0)),
        ],
    )
    .unwrap();
    assert_eq!(shape(&s), (5, 0, 12, 0, 9));
    assert_eq!(
        shape(&Datatype::contiguous(0, &int, DtypeId::new(7)).unwrap()),
        (0, 0, 0, 0, 0)
    );
}

#[test]
fn subarray_and_darray_follow_mpich() {
    let r = Arc::new(Datatype::resized(&t("MPI_INT"), -2, 10, DtypeId::new(7)).unwrap());
    let s = Datatype::subarray(
        &[4, 5],
        &[2, 3],
        &[1, 1],
        false,
        &r,
        DtypeId::new(99),
        vec![],
    )
    .unwrap();
    assert_eq!(shape(&s), (24, 0, 200, 60, 74));
    let s = Datatype::subarray(
        &[4, 5],
        &[2, 3],
        &[1, 1],
        false,
        &t("MPI_DOUBLE_INT"),
        DtypeId::new(18),
        vec![],
    )
    .unwrap();
    assert_eq!(shape(&s), (72, 0, 320, 96, 124));
    let s = Datatype::subarray(
        &[4, 5],
        &[2, 3],
        &[1, 1],
        true,
        &t("MPI_INT"),
        DtypeId::new(7),
        vec![],
    )
    .unwrap();
    assert_eq!(shape(&s), (24, 0, 80, 20, 40));
    let s = Datatype::subarray(
        &[4, 5],
        &[0, 3],
        &[1, 1],
        true,
        &t("MPI_INT"),
        DtypeId::new(7),
        vec![],
    )
    .unwrap();
    assert_eq!(shape(&s), (0, 0, 80, 0, 0));
    assert!(Datatype::subarray(
        &[4],
        &[3],
        &[2],
        true,
        &t("MPI_INT"),
        DtypeId::new(7),
        vec![]
    )
    .is_err());
    let dist = [Distrib::Block(None), Distrib::Cyclic(Some(2))];
    let want_c = [
        (60, 0, 700, 0, 344),
        (40, 0, 700, 20, 294),
        (40, 0, 700, 40, 294),
        (60, 0, 700, 350, 344),
        (40, 0, 700, 370, 294),
        (40, 0, 700, 390, 294),
    ];
    let want_f = [
        (60, 0, 280, 0, 260),
        (40, 0, 280, 80, 60),
        (40, 0, 280, 160, 60),
        (60, 0, 280, 20, 260),
        (40, 0, 280, 100, 60),
        (40, 0, 280, 180, 60),
    ];
    for rank in 0..6 {
        let d = Datatype::darray(
            6,
            rank,
            &[10, 7],
            &dist,
            &[2, 3],
            false,
            &r,
            DtypeId::new(99),
            vec![],
        )
        .unwrap();
        assert_eq!(shape(&d), want_c[rank], "C rank {rank}");
        let d = Datatype::darray(
            6,
            rank,
            &[10, 7],
            &dist,
            &[2, 3],
            true,
            &t("MPI_INT"),
            DtypeId::new(7),
            vec![],
        )
        .unwrap();
        assert_eq!(shape(&d), want_f[rank], "Fortran rank {rank}");
    }
    assert!(Datatype::darray(
        6,
        4,
        &[10, 7],
        &[Distrib::None, Distrib::Block(None)],
        &[2, 3],
        false,
        &r,
        DtypeId::new(99),
        vec![]
    )
    .is_err());
}

#[test]
fn huge_vectors_are_one_run() {
    let dbl = t("MPI_DOUBLE");
    // A column of a 100000 x 100000 matrix of doubles, and a vector of a billion blocks.
    let col = Datatype::vector(100_000, 1, 100_000, false, &dbl, DtypeId::new(12)).unwrap();
    assert_eq!(
        &*col.ops,
        &[Op::Run {
            off: 0,
            len: 8,
            count: 100_000,
            stride: 800_000
        }]
    );
    let big = Arc::new(
        Datatype::vector(1_000_000_000, 2, 3, false, &t("MPI_CHAR"), DtypeId::new(0)).unwrap(),
    );
    assert_eq!(big.ops.len(), 1);
    assert_eq!(big.size, 2_000_000_000);
    // Nested: a vector of vectors is a loop over a run, not a million entries.
    let nest = Datatype::vector(1000, 1, 2, false, &big, DtypeId::new(99)).unwrap();
    assert!(nest.ops.len() <= 1 && nest.sig.len() <= 1);
    // A column of a matrix of structs: one loop.
    let s = st2(&dbl, 0, &t("MPI_INT"), 8);
    let col = Datatype::vector(100_000, 1, 7, false, &s, DtypeId::new(99)).unwrap();
    assert_eq!(
        &*col.ops,
        &[Op::Run {
            off: 0,
            len: 12,
            count: 100_000,
            stride: 112
        }]
    );
    let s = st2(&dbl, 0, &t("MPI_INT"), 12);
    let col = Datatype::vector(100_000, 1, 7, false, &s, DtypeId::new(99)).unwrap();
    assert!(
        matches!(col.ops[..], [Op::Loop { count: 100_000, .. }]),
        "{:?}",
        col.ops
    );
    assert!(Datatype::vector(
        usize::MAX / 2,
        1,
        isize::MAX,
        false,
        &t("MPI_INT"),
        DtypeId::new(7)
    )
    .is_err());
    // Contiguous of a contiguous type is one block.
    let c = Datatype::contiguous(1_000_000, &t("MPI_BYTE"), DtypeId::new(3)).unwrap();
    assert!(c.contig && c.ops.len() == 1);
}

#[test]
fn elements() {
    let di = t("MPI_DOUBLE_INT");
    assert_eq!(di.elements_in(24), Some(4));
    assert_eq!(di.elements_in(20), Some(3));
    assert_eq!(di.elements_in(14), None);
    let int = t("MPI_INT");
    assert_eq!(int.elements_in(40), Some(10));
    assert_eq!(int.elements_in(6), None);
    for n in 0..10 {
        assert_eq!(
            di.elements_in(di.bytes_for_elements(n).unwrap() as usize),
            Some(n)
        );
    }
}

#[test]
fn external32_of_predefined() {
    let long = t("MPI_LONG");
    assert_eq!(long.ext32_size(3), Some(12));
    assert_eq!(t("MPI_WCHAR").ext32_size(1), Some(2));
    assert_eq!(t("MPI_DOUBLE_INT").ext32_size(1), Some(12));
    assert_eq!(t("MPI_LONG_DOUBLE").ext32_size(1), Some(16));
    let v: [i32; 2] = [1, -2];
    let mut out = [0u8; 8];
    unsafe { t("MPI_INT").pack_external(v.as_ptr().cast(), 2, &mut out) };
    assert_eq!(out, [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe]);
    let mut back = [0i32; 2];
    unsafe { t("MPI_INT").unpack_external(&out, back.as_mut_ptr().cast(), 2) };
    assert_eq!(back, v);
    let d = 1.5f64;
    let mut out = [0u8; 8];
    unsafe { t("MPI_DOUBLE").pack_external((&d as *const f64).cast(), 1, &mut out) };
    assert_eq!(out, 1.5f64.to_be_bytes());
}

#[test]
fn large_contents() {
    let v = Datatype::vector(3, 2, 5, true, &t("MPI_INT"), DtypeId::new(7)).unwrap();
    let mut c = v.contents.clone();
    c.make_large(Combiner::Hvector);
    assert_eq!(
        (c.ints.len(), c.aints.len(), c.counts),
        (0, 0, vec![3, 2, 5])
    );
    let mut c = Contents {
        ints: vec![2, 4, 5, 2, 3, 1, 1, 56],
        ..Contents::default()
    };
    c.make_large(Combiner::Subarray);
    assert_eq!((c.ints, c.counts), (vec![2, 56], vec![4, 5, 2, 3, 1, 1]));
}

// -------------------------------------------------------------------------------------------
// Property test: random nested types against a naive reference.

/// A type as a tree of constructor calls.
#[derive(Debug, Clone)]
enum Spec {
    Named(usize),
    Contig(usize, Box<Spec>),
    Vector(usize, usize, isize, Box<Spec>),
    Hvector(usize, usize, isize, Box<Spec>),
    Indexed(Vec<(usize, isize)>, Box<Spec>),
    Hindexed(Vec<(usize, isize)>, Box<Spec>),
    IndexedBlock(usize, Vec<isize>, Box<Spec>),
    Struct(Vec<(usize, isize, Spec)>),
    Resized(isize, isize, Box<Spec>),
    Subarray(Vec<(usize, usize, usize)>, bool, Box<Spec>),
    Dup(Box<Spec>),
}

const NAMES: &[&str] = &[
    "MPI_CHAR",
    "MPI_SHORT",
    "MPI_INT",
    "MPI_DOUBLE",
    "MPI_FLOAT",
    "MPI_DOUBLE_INT",
    "MPI_SHORT_INT",
    "MPI_LONG",
];

/// A count from 0 to `max - 1`, rarely 0 (empty types are tested, but most should hold data).
fn n(max: usize) -> impl Strategy<Value = usize> + Clone {
    prop_oneof![1 => Just(0usize), 8 => 1..max]
}

fn spec() -> impl Strategy<Value = Spec> {
    let leaf = (0..NAMES.len()).prop_map(Spec::Named);
    leaf.prop_recursive(5, 64, 4, |inner| {
        let b = || inner.clone().prop_map(Box::new);
        prop_oneof![
            (n(5), b()).prop_map(|(n, s)| Spec::Contig(n, s)),
            (n(5), n(4), -4isize..5, b()).prop_map(|(c, l, s, t)| Spec::Vector(c, l, s, t)),
            (n(5), n(4), -40isize..41, b()).prop_map(|(c, l, s, t)| Spec::Hvector(c, l, s, t)),
            (prop::collection::vec((n(4), -6isize..7), 1..5), b())
                .prop_map(|(v, t)| Spec::Indexed(v, t)),
            (prop::collection::vec((n(4), -50isize..51), 1..5), b())
                .prop_map(|(v, t)| Spec::Hindexed(v, t)),
            (n(4), prop::collection::vec(-6isize..7, 1..5), b())
                .prop_map(|(l, v, t)| Spec::IndexedBlock(l, v, t)),
            prop::collection::vec((n(4), -40isize..41, inner.clone()), 1..4).prop_map(Spec::Struct),
            (-8isize..9, 0isize..40, b()).prop_map(|(l, e, t)| Spec::Resized(l, e, t)),
            (
                prop::collection::vec((1usize..5, n(5), 0usize..4), 1..4),
                any::<bool>(),
                b()
            )
                .prop_map(|(d, f, t)| {
                    // (size, subsize, start) made consistent.
                    let dims = d
                        .into_iter()
                        .map(|(s, sub, st)| {
                            let sub = sub.min(s);
                            (s, sub, st.min(s - sub))
                        })
                        .collect();
                    Spec::Subarray(dims, f, t)
                }),
            b().prop_map(Spec::Dup),
        ]
    })
}

/// The reference: the full type map (offset and basic kind of every value, in order) and the
/// bounds, computed by expanding every copy.
#[derive(Debug, Clone)]
struct Naive {
    map: Vec<(isize, Basic)>,
    lb: isize,
    ub: isize,
    align: usize,
}

impl Naive {
    fn true_bounds(&self) -> (isize, isize) {
        if self.map.is_empty() {
            return (0, 0);
        }
        let lo = self.map.iter().map(|(o, _)| *o).min().unwrap();
        let hi = self
            .map
            .iter()
            .map(|(o, b)| *o + b.size() as isize)
            .max()
            .unwrap();
        (lo, hi)
    }

    fn ext(&self) -> isize {
        self.ub - self.lb
    }
}

fn basic_map(name: &str) -> Naive {
    let d = t(name);
    let map = match name {
        "MPI_DOUBLE_INT" => vec![(0, Basic::Double), (8, Basic::Int)],
        "MPI_SHORT_INT" => vec![(0, Basic::Short), (4, Basic::Int)],
        _ => vec![(0, d.basic.unwrap())],
    };
    Naive {
        map,
        lb: d.lb,
        ub: d.ub,
        align: d.align,
    }
}

/// Copies of `n` at the given displacements (each a block of `bl` copies one extent apart).
fn naive_blocks(n: &Naive, blocks: &[(isize, usize)], empty_bound: bool) -> Naive {
    let mut map = vec![];
    let (mut lb, mut ub) = (None::<isize>, None::<isize>);
    for &(d, bl) in blocks {
        if bl == 0 {
            if empty_bound {
                lb = Some(lb.map_or(d + n.lb, |l| l.min(d + n.lb)));
                ub = Some(ub.map_or(d + n.lb, |u| u.max(d + n.lb)));
            }
            continue;
        }
        for j in 0..bl as isize {
            let base = d + j * n.ext();
            map.extend(n.map.iter().map(|(o, b)| (base + o, *b)));
            lb = Some(lb.map_or(base + n.lb, |l| l.min(base + n.lb)));
            ub = Some(ub.map_or(base + n.ub, |u| u.max(base + n.ub)));
        }
    }
    Naive {
        map,
        lb: lb.unwrap_or(0),
        ub: ub.unwrap_or(0),
        // Derived types other than structs align like their old type.
        align: n.align,
    }
}

/// Build the engine type and the reference for a spec.
fn make(s: &Spec) -> (Arc<Datatype>, Naive) {
    match s {
        Spec::Named(i) => (t(NAMES[*i]), basic_map(NAMES[*i])),
        Spec::Contig(c, inner) => {
            let (e, n) = make(inner);
            let d = Datatype::contiguous(*c, &e, DtypeId::new(99)).unwrap();
            (Arc::new(d), naive_blocks(&n, &[(0, *c)], false))
        }
        Spec::Vector(c, l, st, inner) | Spec::Hvector(c, l, st, inner) => {
            let bytes = matches!(s, Spec::Hvector(..));
            let (e, n) = make(inner);
            let d = Datatype::vector(*c, *l, *st, bytes, &e, DtypeId::new(99)).unwrap();
            let step = if bytes { *st } else { st * n.ext() };
            let blocks: Vec<_> = (0..*c as isize).map(|i| (i * step, *l)).collect();
            (Arc::new(d), naive_blocks(&n, &blocks, true))
        }
        Spec::Indexed(v, inner) | Spec::Hindexed(v, inner) => {
            let bytes = matches!(s, Spec::Hindexed(..));
            let (e, n) = make(inner);
            let bl: Vec<usize> = v.iter().map(|x| x.0).collect();
            let ds: Vec<isize> = v.iter().map(|x| x.1).collect();
            let d = Datatype::indexed(&bl, &ds, bytes, &e, DtypeId::new(99)).unwrap();
            let blocks: Vec<_> = v
                .iter()
                .map(|&(l, x)| (if bytes { x } else { x * n.ext() }, l))
                .collect();
            (Arc::new(d), naive_blocks(&n, &blocks, false))
        }
        Spec::IndexedBlock(l, v, inner) => {
            let (e, n) = make(inner);
            let d = Datatype::indexed_block(*l, v, false, &e, DtypeId::new(99)).unwrap();
            let blocks: Vec<_> = v.iter().map(|&x| (x * n.ext(), *l)).collect();
            (Arc::new(d), naive_blocks(&n, &blocks, false))
        }
        Spec::Struct(members) => {
            let parts: Vec<_> = members.iter().map(|(l, x, s)| (*l, *x, make(s))).collect();
            let bl: Vec<usize> = parts.iter().map(|p| p.0).collect();
            let ds: Vec<isize> = parts.iter().map(|p| p.1).collect();
            let ts: Vec<(Arc<Datatype>, DtypeId)> = parts
                .iter()
                .map(|p| (p.2 .0.clone(), DtypeId::new(99)))
                .collect();
            let d = Datatype::structure(&bl, &ds, &ts).unwrap();
            let mut map = vec![];
            let (mut lb, mut ub) = (None::<isize>, None::<isize>);
            let mut align = 1;
            for (l, x, (_, n)) in &parts {
                let one = naive_blocks(n, &[(*x, *l)], false);
                if *l == 0 {
                    continue;
                }
                map.extend(one.map);
                lb = Some(lb.map_or(one.lb, |v| v.min(one.lb)));
                ub = Some(ub.map_or(one.ub, |v| v.max(one.ub)));
                align = align.max(one.align);
            }
            let (lb, mut ub) = (lb.unwrap_or(0), ub.unwrap_or(0));
            while (ub - lb).rem_euclid(align as isize) != 0 {
                ub += 1;
            }
            (Arc::new(d), Naive { map, lb, ub, align })
        }
        Spec::Resized(lb, ext, inner) => {
            let (e, n) = make(inner);
            let d = Datatype::resized(&e, *lb, *ext, DtypeId::new(99)).unwrap();
            let mut n = n;
            n.lb = *lb;
            n.ub = lb + ext;
            (Arc::new(d), n)
        }
        Spec::Subarray(dims, fortran, inner) => {
            let (e, n) = make(inner);
            let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let subs: Vec<usize> = dims.iter().map(|d| d.1).collect();
            let starts: Vec<usize> = dims.iter().map(|d| d.2).collect();
            let d = Datatype::subarray(
                &sizes,
                &subs,
                &starts,
                *fortran,
                &e,
                DtypeId::new(99),
                vec![],
            )
            .unwrap();
            // Every index of the subarray, in memory order of the whole array.
            let nd = dims.len();
            let order: Vec<usize> = if *fortran {
                (0..nd).collect()
            } else {
                (0..nd).rev().collect()
            };
            let mut strides = vec![0isize; nd];
            let mut s = 1isize;
            for &k in &order {
                strides[k] = s;
                s *= sizes[k] as isize;
            }
            let mut map = vec![];
            let total: usize = subs.iter().product();
            for flat in 0..total {
                // Decompose with the fastest dimension first.
                let mut rem = flat;
                let mut off = 0isize;
                for &k in &order {
                    let i = rem % subs[k];
                    rem /= subs[k];
                    off += (starts[k] + i) as isize * strides[k];
                }
                let base = off * n.ext();
                map.push(base);
            }
            // Fastest dimension first means flat order is the packed order.
            let map = map
                .into_iter()
                .flat_map(|b| n.map.iter().map(move |(o, k)| (b + o, *k)))
                .collect();
            let naive = Naive {
                map,
                lb: 0,
                ub: s * n.ext(),
                align: n.align,
            };
            (Arc::new(d), naive)
        }
        Spec::Dup(inner) => {
            let (e, n) = make(inner);
            (Arc::new(Datatype::dup(&e, DtypeId::new(99))), n)
        }
    }
}

/// A buffer covering every byte `count` elements touch, and the address of element 0.
struct Buf {
    mem: Vec<u8>,
    origin: usize,
}

impl Buf {
    fn new(n: &Naive, count: usize, fill: impl Fn(usize) -> u8) -> Buf {
        let (tlo, thi) = n.true_bounds();
        let ext = n.ext();
        let c = count.max(1) as isize - 1;
        let lo = tlo.min(tlo + c * ext).min(0);
        let hi = thi.max(thi + c * ext).max(1);
        let len = (hi - lo) as usize;
        Buf {
            mem: (0..len).map(fill).collect(),
            origin: (-lo) as usize,
        }
    }

    fn ptr(&mut self) -> *mut u8 {
        unsafe { self.mem.as_mut_ptr().add(self.origin) }
    }
}

fn naive_pack(n: &Naive, buf: &Buf, count: usize) -> Vec<u8> {
    let mut out = vec![];
    for i in 0..count as isize {
        for (o, b) in &n.map {
            let at = (buf.origin as isize + i * n.ext() + o) as usize;
            out.extend_from_slice(&buf.mem[at..at + b.size()]);
        }
    }
    out
}

fn naive_unpack(n: &Naive, data: &[u8], buf: &mut Buf, count: usize) {
    let mut k = 0;
    'outer: for i in 0..count as isize {
        for (o, b) in &n.map {
            let at = (buf.origin as isize + i * n.ext() + o) as usize;
            for j in 0..b.size() {
                if k == data.len() {
                    break 'outer;
                }
                buf.mem[at + j] = data[k];
                k += 1;
            }
        }
    }
}

fn naive_elements(n: &Naive, count: usize, bytes: usize) -> Option<u64> {
    let mut left = bytes;
    let mut e = 0;
    for _ in 0..count.max(1) {
        for (_, b) in &n.map {
            if left == 0 {
                return Some(e);
            }
            if left < b.size() {
                return None;
            }
            left -= b.size();
            e += 1;
        }
    }
    Some(e)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("DT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000), ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_naive(s in spec(), count in 0usize..4, cut in 0usize..1000, skip in 0usize..1000) {
        let (d, n) = make(&s);
        prop_assume!(n.map.len() <= 20_000);
        // Size, bounds, true bounds, elements.
        let size: usize = n.map.iter().map(|(_, b)| b.size()).sum();
        prop_assert_eq!(d.size, size);
        prop_assert_eq!((d.lb, d.ub), (n.lb, n.ub), "bounds of {:?}", s);
        let (tlo, thi) = n.true_bounds();
        if size > 0 {
            prop_assert_eq!((d.true_lb, d.true_ub), (tlo, thi), "true bounds of {:?}", s);
        }
        prop_assert_eq!(d.elems, n.map.len() as u64);
        // Pack.
        let mut src = Buf::new(&n, count, |i| (i * 31 + 7) as u8);
        let want = naive_pack(&n, &src, count);
        let mut got = vec![];
        unsafe { d.pack(src.ptr(), count, &mut got) };
        prop_assert_eq!(&got, &want, "pack of {:?}", s);
        // A window of the packed stream.
        if !want.is_empty() {
            let skip = skip % want.len();
            let len = cut % (want.len() - skip + 1);
            let mut part = vec![0u8; len];
            let k = unsafe { d.pack_window(src.ptr(), count, skip, &mut part) };
            prop_assert_eq!(&part[..k], &want[skip..skip + len]);
        }
        // Blocks of one element (reductions over derived types): the type map's bytes, in
        // order.
        let mut blocks = vec![];
        super::layout::for_each_block(&d.ops, 0, &mut |off, len| {
            blocks.extend((0..len as isize).map(|j| off + j))
        });
        let bytes: Vec<isize> = n
            .map
            .iter()
            .flat_map(|(o, b)| (0..b.size() as isize).map(move |j| o + j))
            .collect();
        prop_assert_eq!(&blocks, &bytes, "blocks of {:?}", s);
        // The pipelined path: packed piece by piece, each piece unpacked where it belongs,
        // gives the whole message.
        if !want.is_empty() {
            let piece = 1 + cut % want.len();
            let mut whole = Buf::new(&n, count, |_| 0xee);
            naive_unpack(&n, &want, &mut whole, count);
            let mut pieces = Buf::new(&n, count, |_| 0xee);
            let mut at = 0;
            while at < want.len() {
                let mut part = vec![0u8; piece.min(want.len() - at)];
                let k = unsafe { d.pack_window(src.ptr(), count, at, &mut part) };
                prop_assert_eq!(k, part.len());
                let used = unsafe { d.unpack_window(&part, at, pieces.ptr(), count) };
                prop_assert_eq!(used, k);
                at += k;
            }
            prop_assert!(whole.mem == pieces.mem, "pieces of {} bytes of {:?}", piece, s);
        }
        // Unpack, whole and a prefix (a short message).
        let cut = if want.is_empty() { 0 } else { cut % (want.len() + 1) };
        for take in [want.len(), cut] {
            let mut a = Buf::new(&n, count, |_| 0xee);
            let mut b = Buf::new(&n, count, |_| 0xee);
            naive_unpack(&n, &want[..take], &mut a, count);
            let used = unsafe { d.unpack(&want[..take], b.ptr(), count) };
            prop_assert_eq!(used, take);
            prop_assert!(a.mem == b.mem, "unpack of {} bytes of {:?}", take, s);
        }
        // Get_elements on every prefix length tried.
        prop_assert_eq!(d.elements_in(cut.min(size * count.max(1))), naive_elements(&n, count, cut.min(size * count.max(1))));
        // external32: the standard's sizes; values big-endian.
        let ext_size: usize = n.map.iter().map(|(_, b)| b.ext32_size()).sum::<usize>() * count;
        prop_assert_eq!(d.ext32_size(count), Some(ext_size));
        let mut ext = vec![0u8; ext_size];
        unsafe { d.pack_external(src.ptr(), count, &mut ext) };
        let mut at = 0;
        let mut nat = 0;
        for _ in 0..count {
            for (_, b) in &n.map {
                let (ns, es) = (b.size(), b.ext32_size());
                let mut v = want[nat..nat + ns].to_vec();
                v.truncate(es);
                v.reverse();
                prop_assert_eq!(&ext[at..at + es], &v[..]);
                at += es;
                nat += ns;
            }
        }
        if !n.map.iter().any(|(_, b)| *b == Basic::Long) {
            let mut back = Buf::new(&n, count, |_| 0xee);
            let mut via = Buf::new(&n, count, |_| 0xee);
            unsafe { d.unpack_external(&ext, back.ptr(), count) };
            naive_unpack(&n, &want, &mut via, count);
            prop_assert!(back.mem == via.mem);
        }
    }
}

#[test]
fn description_stays_small_for_regular_types() {
    // An indexed type whose displacements are equally spaced is recognised as a vector.
    let disps: Vec<isize> = (0..100_000).map(|i| i * 3).collect();
    let d = Datatype::indexed_block(2, &disps, false, &t("MPI_INT"), DtypeId::new(7)).unwrap();
    assert_eq!(d.ops.len(), 1);
    // A struct array column.
    let s = st2(&t("MPI_DOUBLE"), 0, &t("MPI_INT"), 8);
    let v = Datatype::vector(1000, 2, 10, false, &s, DtypeId::new(99)).unwrap();
    assert!(v.ops.len() <= 2, "{:?}", v.ops);
    let _ = id("MPI_INT");
}
