//! Choosing a collective algorithm per call.
//!
//! Three sources, first match wins:
//! 1. a per-collective override from the configuration registry (`coll_allreduce=ring`, i.e.
//!    `PROTEAN_COLL_ALLREDUCE=ring` or `mpirun --set coll_allreduce=ring`; `auto` defers);
//! 2. the decision file named by `coll_decision_file` (written by `protean-tune`);
//! 3. the built-in table below.
//!
//! A rule maps (collective, communicator size range, message size range) to an algorithm. The
//! message size is the bytes one process contributes: the whole buffer for bcast, reduce,
//! allreduce and scan; one block for gather, scatter, allgather and alltoall; the whole input
//! for reduce_scatter. An algorithm that cannot serve a particular call (ring allreduce with a
//! non-commutative operation, recursive doubling allgather on a size that is not a power of
//! two, ...) falls back to one that can; see each builder.
//!
//! Decision file format, one rule per line (`#` comments):
//!
//! ```text
//! # collective  ranks  bytes        algorithm
//! allreduce     2-2    0-2048       recursive_doubling
//! allreduce     2-*    2049-*       rabenseifner
//! ```
//!
//! `lo-hi` ranges are inclusive; `*` is unbounded; a single number is an exact value.

use std::fmt::Write as _;

/// Where algorithm `name` is in each collective's list (by the collective's discriminant),
/// found once at compile time: the decision asks at every call.
const fn index_of_each(name: &str) -> [Option<usize>; Coll::ALL.len()] {
    const fn same(a: &[u8], b: &[u8]) -> bool {
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    let mut out = [None; Coll::ALL.len()];
    let mut c = 0;
    while c < Coll::ALL.len() {
        let coll = Coll::ALL[c];
        let algs = coll.algorithms();
        let mut i = 0;
        while i < algs.len() {
            if same(algs[i].as_bytes(), name.as_bytes()) {
                out[coll as usize] = Some(i);
            }
            i += 1;
        }
        c += 1;
    }
    out
}

const SHM_INDEX: [Option<usize>; Coll::ALL.len()] = index_of_each("shm");
const HIER_INDEX: [Option<usize>; Coll::ALL.len()] = index_of_each("two_level_shm");

/// The collectives with a choice of algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coll {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Scatter,
    Allgather,
    Alltoall,
    ReduceScatter,
    Scan,
}

impl Coll {
    pub const ALL: [Coll; 10] = [
        Coll::Barrier,
        Coll::Bcast,
        Coll::Reduce,
        Coll::Allreduce,
        Coll::Gather,
        Coll::Scatter,
        Coll::Allgather,
        Coll::Alltoall,
        Coll::ReduceScatter,
        Coll::Scan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Coll::Barrier => "barrier",
            Coll::Bcast => "bcast",
            Coll::Reduce => "reduce",
            Coll::Allreduce => "allreduce",
            Coll::Gather => "gather",
            Coll::Scatter => "scatter",
            Coll::Allgather => "allgather",
            Coll::Alltoall => "alltoall",
            Coll::ReduceScatter => "reduce_scatter",
            Coll::Scan => "scan",
        }
    }

    pub fn from_name(s: &str) -> Option<Coll> {
        Coll::ALL.iter().copied().find(|c| c.name() == s)
    }

    /// The algorithms of this collective; index 0 is `auto` (the registry's choices).
    pub const fn algorithms(self) -> &'static [&'static str] {
        match self {
            Coll::Barrier => BARRIER_ALGS,
            Coll::Bcast => BCAST_ALGS,
            Coll::Reduce => REDUCE_ALGS,
            Coll::Allreduce => ALLREDUCE_ALGS,
            Coll::Gather => GATHER_ALGS,
            Coll::Scatter => SCATTER_ALGS,
            Coll::Allgather => ALLGATHER_ALGS,
            Coll::Alltoall => ALLTOALL_ALGS,
            Coll::ReduceScatter => REDUCE_SCATTER_ALGS,
            Coll::Scan => SCAN_ALGS,
        }
    }

    /// The index of this collective's shared-memory algorithm (`shm`), if it has one.
    pub fn shm_index(self) -> Option<usize> {
        SHM_INDEX[self as usize]
    }

    /// The index of this collective's hierarchical shared-memory algorithm (`two_level_shm`),
    /// if it has one.
    pub fn hier_index(self) -> Option<usize> {
        HIER_INDEX[self as usize]
    }

    /// The override tunable's current value (index into [`Coll::algorithms`]).
    pub fn configured(self, cfg: &crate::config::Config) -> usize {
        match self {
            Coll::Barrier => cfg.coll_barrier,
            Coll::Bcast => cfg.coll_bcast,
            Coll::Reduce => cfg.coll_reduce,
            Coll::Allreduce => cfg.coll_allreduce,
            Coll::Gather => cfg.coll_gather,
            Coll::Scatter => cfg.coll_scatter,
            Coll::Allgather => cfg.coll_allgather,
            Coll::Alltoall => cfg.coll_alltoall,
            Coll::ReduceScatter => cfg.coll_reduce_scatter,
            Coll::Scan => cfg.coll_scan,
        }
    }

    /// Set the override (tools and tests).
    pub fn set_configured(self, cfg: &mut crate::config::Config, alg: usize) {
        let f = match self {
            Coll::Barrier => &mut cfg.coll_barrier,
            Coll::Bcast => &mut cfg.coll_bcast,
            Coll::Reduce => &mut cfg.coll_reduce,
            Coll::Allreduce => &mut cfg.coll_allreduce,
            Coll::Gather => &mut cfg.coll_gather,
            Coll::Scatter => &mut cfg.coll_scatter,
            Coll::Allgather => &mut cfg.coll_allgather,
            Coll::Alltoall => &mut cfg.coll_alltoall,
            Coll::ReduceScatter => &mut cfg.coll_reduce_scatter,
            Coll::Scan => &mut cfg.coll_scan,
        };
        *f = alg;
    }
}

pub use crate::config::{
    ALLGATHER_ALGS, ALLREDUCE_ALGS, ALLTOALL_ALGS, BARRIER_ALGS, BCAST_ALGS, GATHER_ALGS,
    REDUCE_ALGS, REDUCE_SCATTER_ALGS, SCAN_ALGS, SCATTER_ALGS,
};

/// The algorithms of one collective as a type: variant `i` is the registry's choice `i`
/// (`auto` first), so a tunable's index or a decision rule converts without a string.
pub trait Algorithm: Copy + Eq + std::fmt::Debug {
    /// The collective these are algorithms of.
    const COLL: Coll;
    /// The algorithm with the registry's index `i` (`Auto` if out of range).
    fn from_index(i: usize) -> Self;
}

macro_rules! algorithms {
    ($( $(#[$m:meta])* $ty:ident: $coll:ident = $names:ident { $($var:ident),+ $(,)? } )*) => {
        $(
            $(#[$m])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub enum $ty { $($var),+ }

            impl $ty {
                const ALL: &'static [$ty] = &[$($ty::$var),+];

                /// The name users give it (`coll_*` tunables, decision files).
                pub fn name(self) -> &'static str {
                    $names[self as usize]
                }
            }

            impl Algorithm for $ty {
                const COLL: Coll = Coll::$coll;
                fn from_index(i: usize) -> $ty {
                    Self::ALL.get(i).copied().unwrap_or(Self::ALL[0])
                }
            }
        )*

        /// Every algorithm enum against the registry's names: same count, same order.
        #[cfg(test)]
        fn algorithm_names() -> Vec<(Coll, Vec<String>, &'static [&'static str])> {
            vec![$( (Coll::$coll, vec![$(stringify!($var).to_string()),+], $names) ),*]
        }
    };
}

algorithms! {
    /// MPI_Barrier.
    BarrierAlg: Barrier = BARRIER_ALGS { Auto, Dissemination, TwoLevel, Linear, Shm, TwoLevelShm }
    /// MPI_Bcast.
    BcastAlg: Bcast = BCAST_ALGS {
        Auto, Binomial, ScatterAllgather, Chain, TwoLevel, Linear, Shm, TwoLevelShm,
    }
    /// MPI_Reduce.
    ReduceAlg: Reduce = REDUCE_ALGS { Auto, Binomial, Linear, TwoLevel, Shm, TwoLevelShm }
    /// MPI_Allreduce.
    AllreduceAlg: Allreduce = ALLREDUCE_ALGS {
        Auto, RecursiveDoubling, AllgatherReduce, Rabenseifner, Ring, ReduceBcast, TwoLevel, Shm,
        TwoLevelShm,
    }
    /// MPI_Gather(v).
    GatherAlg: Gather = GATHER_ALGS { Auto, Linear, Binomial, Shm, TwoLevelShm }
    /// MPI_Scatter(v).
    ScatterAlg: Scatter = SCATTER_ALGS { Auto, Linear, Binomial, Shm, TwoLevelShm }
    /// MPI_Allgather(v).
    AllgatherAlg: Allgather = ALLGATHER_ALGS { Auto, Ring, RecursiveDoubling, Bruck, Linear, Shm, TwoLevelShm }
    /// MPI_Alltoall(v,w).
    AlltoallAlg: Alltoall = ALLTOALL_ALGS { Auto, Linear, Pairwise, Bruck, Shm }
    /// MPI_Reduce_scatter(_block).
    ReduceScatterAlg: ReduceScatter = REDUCE_SCATTER_ALGS { Auto, ReduceScatterv, Ring }
    /// MPI_Scan, MPI_Exscan.
    ScanAlg: Scan = SCAN_ALGS { Auto, RecursiveDoubling, Linear }
}

/// An inclusive range; `hi == usize::MAX` is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub lo: usize,
    pub hi: usize,
}

impl Range {
    pub const ANY: Range = Range {
        lo: 0,
        hi: usize::MAX,
    };

    fn contains(&self, v: usize) -> bool {
        self.lo <= v && v <= self.hi
    }

    fn parse(s: &str) -> Option<Range> {
        let num = |t: &str| -> Option<usize> {
            if t == "*" {
                Some(usize::MAX)
            } else {
                crate::config::parse_size(t).and_then(|v| usize::try_from(v).ok())
            }
        };
        if s == "*" {
            return Some(Range::ANY);
        }
        match s.split_once('-') {
            Some((a, b)) => {
                let lo = if a == "*" { 0 } else { num(a)? };
                let hi = num(b)?;
                (lo <= hi).then_some(Range { lo, hi })
            }
            None => {
                let v = num(s)?;
                Some(Range { lo: v, hi: v })
            }
        }
    }

    fn show(&self) -> String {
        let f = |v: usize| {
            if v == usize::MAX {
                "*".to_string()
            } else {
                v.to_string()
            }
        };
        if self.lo == self.hi {
            f(self.lo)
        } else {
            format!("{}-{}", f(self.lo), f(self.hi))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub coll: Coll,
    pub ranks: Range,
    pub bytes: Range,
    /// Index into [`Coll::algorithms`] (never 0, `auto`).
    pub alg: usize,
}

/// An ordered list of rules. Only the order among one collective's rules matters, so they
/// are kept grouped by collective (each group in the order given), and a lookup, made at every
/// call, reads its collective's group alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    rules: Vec<Rule>,
    /// Each collective's group: `rules[group[c].0..group[c].1]`.
    group: [(usize, usize); Coll::ALL.len()],
}

impl Table {
    pub fn new(mut rules: Vec<Rule>) -> Table {
        // A stable sort: every collective's rules keep their order.
        rules.sort_by_key(|r| r.coll as usize);
        let mut group = [(0, 0); Coll::ALL.len()];
        for c in Coll::ALL {
            let lo = rules.partition_point(|r| (r.coll as usize) < c as usize);
            let hi = rules.partition_point(|r| (r.coll as usize) <= c as usize);
            group[c as usize] = (lo, hi);
        }
        Table { rules, group }
    }

    /// The rules, grouped by collective.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    fn of(&self, coll: Coll) -> &[Rule] {
        let (lo, hi) = self.group[coll as usize];
        &self.rules[lo..hi]
    }

    /// The algorithm (index into [`Coll::algorithms`]) of the first rule that applies.
    pub fn lookup(&self, coll: Coll, ranks: usize, bytes: usize) -> Option<usize> {
        self.of(coll)
            .iter()
            .find(|r| r.ranks.contains(ranks) && r.bytes.contains(bytes))
            .map(|r| r.alg)
    }

    /// The fewest bytes for which some rule for `coll` at `ranks` chooses an algorithm `alg`
    /// accepts; None where no rule does at any size.
    pub fn least(&self, coll: Coll, ranks: usize, alg: impl Fn(usize) -> bool) -> Option<usize> {
        self.of(coll)
            .iter()
            .filter(|r| r.ranks.contains(ranks) && alg(r.alg))
            .map(|r| r.bytes.lo)
            .min()
    }

    /// As [`Table::lookup`], passing over rules that choose algorithm `skip`.
    pub fn lookup_except(
        &self,
        coll: Coll,
        ranks: usize,
        bytes: usize,
        skip: Option<usize>,
    ) -> Option<usize> {
        self.of(coll)
            .iter()
            .find(|r| r.ranks.contains(ranks) && r.bytes.contains(bytes) && Some(r.alg) != skip)
            .map(|r| r.alg)
    }

    /// Parse a decision file's text; errors name the line.
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut rules = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let at = |m: String| format!("line {}: {m}", n + 1);
            if f.len() != 4 {
                return Err(at(format!(
                    "expected 'collective ranks bytes algorithm', found '{line}'"
                )));
            }
            let coll = Coll::from_name(f[0]).ok_or_else(|| {
                at(format!(
                    "unknown collective '{}' (known: {})",
                    f[0],
                    Coll::ALL.map(|c| c.name()).join(", ")
                ))
            })?;
            let ranks = Range::parse(f[1])
                .ok_or_else(|| at(format!("bad rank range '{}' (use lo-hi, N or *)", f[1])))?;
            let bytes = Range::parse(f[2])
                .ok_or_else(|| at(format!("bad byte range '{}' (use lo-hi, N or *)", f[2])))?;
            let algs = coll.algorithms();
            let alg = algs
                .iter()
                .skip(1)
                .position(|a| *a == f[3])
                .map(|i| i + 1)
                .ok_or_else(|| {
                    at(format!(
                        "unknown {} algorithm '{}' (known: {})",
                        coll.name(),
                        f[3],
                        algs[1..].join(", ")
                    ))
                })?;
            rules.push(Rule {
                coll,
                ranks,
                bytes,
                alg,
            });
        }
        Ok(Table::new(rules))
    }

    /// The file form of the table.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for r in &self.rules {
            let _ = writeln!(
                s,
                "{:<15} {:<8} {:<18} {}",
                r.coll.name(),
                r.ranks.show(),
                r.bytes.show(),
                r.coll.algorithms()[r.alg]
            );
        }
        s
    }
}

/// The built-in table (the point-to-point rules measured on a 2-core machine, shared memory;
/// see docs/collectives.md). The `shm` rules apply where a communicator's members share one
/// host and the call is blocking; elsewhere the next rule that applies decides (see
/// `Engine::coll_choose_index`). Their size limits come from the 16-core machine at 8 and 16
/// ranks (`bench/shmcoll-device.sh`, 2026-11-26): shm bcast and reduce beat every
/// point-to-point algorithm at every size up to 1 MiB (reduce 1 MiB at 16 ranks: 750 against
/// 2398 us); allreduce and allgather lose to rabenseifner and ring above 64 KiB, alltoall to the
/// point-to-point exchanges above 2 KiB. Gather and scatter were measured again on
/// 2026-11-27, after the gather's members stopped waiting for the root and the scatter's
/// small blocks moved into the root's area (`bench/shmcoll-device.sh`, 8 and 16 ranks): shm
/// gather wins up to 64 KiB (16 ranks: 1.84-1.92 against 2.05-2.19 us at 8 B, 69-71 against
/// 77-83 us at 64 KiB; linear from 256 KiB, 197-287 against 380-393 us), shm scatter up to
/// 1 KiB (linear from 4 KiB: 8.7-8.9 against 11.6-11.9 us at 16 ranks). The v forms of gather
/// and scatter decide as if 0 bytes were sent. Two ranks keep the direct paths of `fast.rs`.
/// Measured again on 2026-11-27 at 8 and 16 ranks (`bench/direct-device.sh`, two rounds):
/// shm allgather beats ring at every size at 16 ranks (1 MiB: 3408-3416 against 4177-4751 us,
/// MPICH 4011-5048; 256 KiB: 752-779 against 991-1135), so it takes all sizes; shm alltoall
/// with direct reads (`coll_shm_alltoall_direct`, from 8 KiB) beats every point-to-point
/// exchange from 16 KiB to 64 KiB (16 ranks, 16 KiB: 52-55 against 78-82 us) and at 8 ranks
/// above (1 MiB: 1129-1229 against 1208-1309), while at 16 ranks linear wins above 64 KiB
/// (256 KiB: 743-757 against pairwise's 807-901 and direct's 851-869; 1 MiB: 5055-5229
/// against 5388-5987 and 5908-5916). `protean-tune` there (`bench/tune-device.sh`, 4, 8 and 16
/// ranks, each rank on its own CPU, best of two launches;
/// `bench/device-logs/2026-11-27/session41-tune/`) moved the rest: shm alltoall through the
/// areas wins at 4 KiB too (16 ranks: 29.8 against linear's 31.3 us; 8 ranks 9.9 against 11.6),
/// and with direct reads at 128 KiB (16 ranks: 396 against pairwise's 441 and linear's 597 us),
/// so it takes every size up to 128 KiB at 16 ranks and every size below; allreduce from
/// 512 KiB at 8 ranks and more goes round a ring (8 ranks, 1 MiB: 412 against rabenseifner's
/// 451 us; 16 ranks 516 against 531). Its other rules were left out: `shm` where the table
/// already chooses it (noise between two launches of the same algorithm), and reduce at 4
/// ranks, where linear beat shm by 7-12% at 4-32 KiB in that one run.
///
/// Two ranks (measured on the 2-core machine, 2026-11-28, session 48; best of 5 launches,
/// two rounds, `bench/run --coll-np 2` with `PROTEAN_COLL_<NAME>=shm` against `auto`): shm
/// alltoall (direct reads from 8 KiB) beats the point-to-point exchange from 16 KiB (16 KiB
/// 5.5-5.6 against 6.1-6.4 us, 32 KiB 7.4-7.5 against 9.3-9.6, 256 KiB 35.4-35.5 against
/// 44.5-46.7, 512 KiB 102 against 116-120; equal at 8 KiB); shm bcast beats the single
/// rendezvous message at 64 and 128 KiB (13.8-15.8 against 21.6-22.3 us; 26.2-26.8 against
/// 31.5-31.7), where the rotating root sends from the buffer it just received into through
/// cross-memory attach (the same message from a buffer not just written: 10 us); it loses
/// at 32 KiB and below (eager) and from 256 KiB (48 against 33 us). Session 49, the same way:
/// shm reduce and allreduce with direct copies of the members' buffers
/// (`coll_shm_reduce_direct`, from 16 KiB per member) beat the point-to-point algorithms from
/// 32 KiB (reduce 32 KiB 8.7-11.6 against 10.2-13.0 us, 1 MiB 112-131 against 184-232;
/// allreduce 32 KiB 9.0-12.8 against 12.4-13.7, 64 KiB 15 against 20-22, 1 MiB 192-205 against
/// 306-310); at 16 KiB neither wins. Shm allgather (direct reads from 16 KiB,
/// `coll_shm_allgather_direct`) beats the point-to-point exchange from 8 KiB (64 KiB 14.5-15.4
/// against 34.7-37.0 us, 256 KiB 43-46 against 102-108, 1 MiB 299-350 against 368-399; 4 and
/// 8 KiB within noise of each other).
pub fn builtin() -> Table {
    let text = "
        bcast           2      65536-131072   shm
        reduce          2      32768-*        shm
        allreduce       2      32768-*        shm
        allgather       2      8192-*         shm
        alltoall        2      16384-*        shm
        barrier         3-*    *              shm
        bcast           3-*    1-*            shm
        reduce          3-*    1-*            shm
        allreduce       3-*    1-65536        shm
        allgather       3-*    1-*            shm
        alltoall        3-15   1-*            shm
        alltoall        16-*   1-131072       shm
        gather          3-*    0-65536        shm
        scatter         3-*    0-2048         shm
        barrier         *      *              dissemination
        bcast           1-3    *              binomial
        bcast           4-*    0-16383        binomial
        bcast           4-*    16384-*        scatter_allgather
        reduce          *      *              binomial
        allreduce       *      0-4096         recursive_doubling
        allreduce       8-*    524289-*       ring
        allreduce       *      4097-*         rabenseifner
        gather          *      *              linear
        scatter         *      *              linear
        allgather       1-7    *              linear
        allgather       8-*    0-1024         bruck
        allgather       8-*    1025-*         ring
        alltoall        1-7    *              linear
        alltoall        8-*    0-256          bruck
        alltoall        8-*    257-32768      linear
        alltoall        16-*   131073-*       linear
        alltoall        8-*    32769-*        pairwise
        reduce_scatter  *      *              ring
        scan            *      *              recursive_doubling
    ";
    Table::parse(text).expect("the built-in decision table parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_enums_match_the_registry() {
        let snake = |v: &str| {
            let mut o = String::new();
            for (i, c) in v.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    o.push('_');
                }
                o.push(c.to_ascii_lowercase());
            }
            o
        };
        for (coll, variants, names) in algorithm_names() {
            let v: Vec<String> = variants.iter().map(|v| snake(v)).collect();
            assert_eq!(v, names, "{coll:?}");
            assert_eq!(coll.algorithms(), names);
        }
        assert_eq!(BcastAlg::from_index(3), BcastAlg::Chain);
        for c in Coll::ALL {
            let at = |name: &str| c.algorithms().iter().position(|a| *a == name);
            assert_eq!(c.shm_index(), at("shm"), "{c:?}");
            assert_eq!(c.hier_index(), at("two_level_shm"), "{c:?}");
        }
        assert_eq!(Coll::Gather.shm_index(), Some(GatherAlg::Shm as usize));
        assert_eq!(Coll::Scan.shm_index(), None);
        assert_eq!(BcastAlg::from_index(99), BcastAlg::Auto);
        assert_eq!(AllreduceAlg::Rabenseifner.name(), "rabenseifner");
    }

    #[test]
    fn builtin_covers_every_collective() {
        let t = builtin();
        for c in Coll::ALL {
            for n in [1, 2, 3, 8, 100] {
                for b in [0, 8, 5000, 1 << 20] {
                    assert!(t.lookup(c, n, b).is_some(), "{c:?} {n} {b}");
                }
            }
        }
    }

    #[test]
    fn rules_of_one_collective_keep_their_order_among_others() {
        let t = Table::parse(
            "bcast 2-8 * chain\nreduce * * linear\nbcast * 0-64 binomial\n\
             gather 3 * binomial\nbcast * * scatter_allgather\nreduce 4 8 binomial\n",
        )
        .unwrap();
        assert_eq!(t.lookup(Coll::Bcast, 4, 8), Some(BcastAlg::Chain as usize));
        assert_eq!(
            t.lookup(Coll::Bcast, 9, 8),
            Some(BcastAlg::Binomial as usize)
        );
        assert_eq!(
            t.lookup(Coll::Bcast, 9, 65),
            Some(BcastAlg::ScatterAllgather as usize)
        );
        assert_eq!(
            t.lookup_except(Coll::Bcast, 4, 8, Some(BcastAlg::Chain as usize)),
            Some(BcastAlg::Binomial as usize)
        );
        // The first reduce rule covers everything, so the later one never decides.
        assert_eq!(
            t.lookup(Coll::Reduce, 4, 8),
            Some(ReduceAlg::Linear as usize)
        );
        assert_eq!(
            t.lookup(Coll::Gather, 3, 1),
            Some(GatherAlg::Binomial as usize)
        );
        assert_eq!(t.lookup(Coll::Gather, 4, 1), None);
        assert_eq!(t.lookup(Coll::Scan, 4, 1), None);
        assert_eq!(t.rules().len(), 6);
        // Some rule at a rank count, any size.
        let chain = |a| a == BcastAlg::Chain as usize;
        assert_eq!(t.least(Coll::Bcast, 8, chain), Some(0));
        assert_eq!(t.least(Coll::Bcast, 9, chain), None);
        let binomial = |a| a == BcastAlg::Binomial as usize || a == ReduceAlg::Binomial as usize;
        assert_eq!(t.least(Coll::Reduce, 4, binomial), Some(8));
        assert_eq!(t.least(Coll::Reduce, 5, binomial), None);
        assert_eq!(
            t.least(Coll::Gather, 4, |a| a == GatherAlg::Binomial as usize),
            None
        );
        assert_eq!(
            t.least(Coll::Gather, 3, |a| a == GatherAlg::Binomial as usize),
            Some(0)
        );
        assert_eq!(t.least(Coll::Scan, 3, |_| true), None);
        assert_eq!(Table::parse(&t.render()).unwrap(), t);
        assert_eq!(Table::default().lookup(Coll::Bcast, 2, 8), None);
    }

    #[test]
    fn parse_render_roundtrip_and_errors() {
        let t = Table::parse("allreduce 2-4 0-8k ring # x\n\nbcast * 100 chain\n").unwrap();
        assert_eq!(
            t.lookup(Coll::Allreduce, 3, 8192),
            Some(AllreduceAlg::Ring as usize)
        );
        assert_eq!(t.lookup(Coll::Allreduce, 5, 8), None);
        assert_eq!(
            t.lookup(Coll::Bcast, 77, 100),
            Some(BcastAlg::Chain as usize)
        );
        assert_eq!(t.lookup(Coll::Bcast, 77, 101), None);
        assert_eq!(Table::parse(&t.render()).unwrap(), t);
        let e = Table::parse("allreduce 2 8 fastest").unwrap_err();
        assert!(e.contains("line 1") && e.contains("fastest"), "{e}");
        assert!(Table::parse("gossip * * x")
            .unwrap_err()
            .contains("unknown collective"));
        assert!(Table::parse("bcast 4-2 * binomial").is_err());
        assert!(Table::parse("bcast *").is_err());
    }
}
