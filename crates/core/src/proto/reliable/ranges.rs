//! Sets of sequence numbers kept as sorted, disjoint half-open ranges: the receiver's runs of
//! datagrams held ahead of a gap (what its selective acknowledgements report) and the
//! sender's scoreboard of what was acknowledged selectively. Both hold a few ranges (one per
//! gap), so a lookup is a binary search and an insertion touches only its neighbours.

/// Disjoint, non-adjacent ranges `[lo, hi)`, in increasing order. Empty until first used
/// (no allocation for a peer that never reorders or loses).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ranges {
    r: Vec<(u64, u64)>,
}

impl Ranges {
    pub fn len(&self) -> usize {
        self.r.len()
    }

    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    pub fn get(&self, i: usize) -> (u64, u64) {
        self.r[i]
    }

    pub fn last(&self) -> Option<(u64, u64)> {
        self.r.last().copied()
    }

    /// The range holding `x`, if any.
    pub fn containing(&self, x: u64) -> Option<(u64, u64)> {
        let i = self.r.partition_point(|r| r.1 <= x);
        self.r.get(i).copied().filter(|r| r.0 <= x)
    }

    /// Index of the first range that ends after `x` (len() if none).
    pub fn first_after(&self, x: u64) -> usize {
        self.r.partition_point(|r| r.1 <= x)
    }

    /// Add `[lo, hi)`; the parts of it that were not in the set go to `new` (in order).
    pub fn insert(&mut self, lo: u64, hi: u64, new: &mut Vec<(u64, u64)>) {
        if lo >= hi {
            return;
        }
        // The first range that overlaps or touches [lo, hi).
        let i = self.r.partition_point(|r| r.1 < lo);
        let (mut cur, mut a, mut b) = (lo, lo, hi);
        let mut j = i;
        while j < self.r.len() && self.r[j].0 <= hi {
            let (s, e) = self.r[j];
            if s > cur {
                new.push((cur, s));
            }
            cur = cur.max(e);
            a = a.min(s);
            b = b.max(e);
            j += 1;
        }
        if cur < hi {
            new.push((cur, hi));
        }
        self.r.splice(i..j, [(a, b)]);
    }

    /// Drop everything below `x`.
    pub fn remove_below(&mut self, x: u64) {
        let k = self.r.partition_point(|r| r.1 <= x);
        if k > 0 {
            self.r.drain(..k);
        }
        if let Some(f) = self.r.first_mut() {
            f.0 = f.0.max(x);
        }
        if self.r.is_empty() && self.r.capacity() > 16 {
            self.r = Vec::new();
        }
    }

    pub fn clear(&mut self) {
        self.r = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn ranges_behave_as_a_set(ops in proptest::collection::vec((0u64..200, 1u64..20, any::<bool>()), 0..80)) {
            let mut r = Ranges::default();
            let mut s = BTreeSet::new();
            for (lo, len, trim) in ops {
                if trim {
                    r.remove_below(lo);
                    s.retain(|&x| x >= lo);
                    continue;
                }
                let mut new = Vec::new();
                r.insert(lo, lo + len, &mut new);
                let mut expect = Vec::new();
                for x in lo..lo + len {
                    if s.insert(x) {
                        expect.push(x);
                    }
                }
                let got: Vec<u64> = new.iter().flat_map(|&(a, b)| a..b).collect();
                prop_assert_eq!(got, expect);
                // Disjoint, sorted, not touching, and the same members.
                for w in r.r.windows(2) {
                    prop_assert!(w[0].1 < w[1].0);
                }
                let members: BTreeSet<u64> = r.r.iter().flat_map(|&(a, b)| a..b).collect();
                prop_assert_eq!(&members, &s);
                for x in 0..230 {
                    prop_assert_eq!(r.containing(x).is_some(), s.contains(&x));
                }
            }
        }
    }
}
