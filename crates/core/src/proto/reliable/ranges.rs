//! Sets of sequence numbers kept as sorted, disjoint half-open ranges: the receiver's runs of
//! datagrams held ahead of a gap (what its selective acknowledgements report) and the
//! sender's scoreboard of what was acknowledged selectively. Both hold a few ranges (one per
//! gap), so a lookup is a binary search and an insertion touches only its neighbours.

/// Disjoint, non-adjacent ranges `[lo, hi)`, in increasing order. One pointer until first used
/// and again once empty (no allocation, and a word per link, for a peer that never reorders
/// or loses); never an empty vector behind it, so equal sets compare equal.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ranges {
    // Boxed so that an unused set is one word (see lazy.rs).
    #[allow(clippy::box_collection)]
    r: Option<Box<Vec<(u64, u64)>>>,
}

impl Ranges {
    fn v(&self) -> &[(u64, u64)] {
        self.r.as_deref().map_or(&[], |v| v.as_slice())
    }

    pub fn len(&self) -> usize {
        self.v().len()
    }

    pub fn is_empty(&self) -> bool {
        self.r.is_none()
    }

    pub fn get(&self, i: usize) -> (u64, u64) {
        self.v()[i]
    }

    pub fn last(&self) -> Option<(u64, u64)> {
        self.v().last().copied()
    }

    /// The range holding `x`, if any.
    pub fn containing(&self, x: u64) -> Option<(u64, u64)> {
        let v = self.v();
        let i = v.partition_point(|r| r.1 <= x);
        v.get(i).copied().filter(|r| r.0 <= x)
    }

    /// Index of the first range that ends after `x` (len() if none).
    pub fn first_after(&self, x: u64) -> usize {
        self.v().partition_point(|r| r.1 <= x)
    }

    /// Add `[lo, hi)`; the parts of it that were not in the set go to `new` (in order).
    pub fn insert(&mut self, lo: u64, hi: u64, new: &mut Vec<(u64, u64)>) {
        if lo >= hi {
            return;
        }
        let r = self.r.get_or_insert_with(Default::default);
        // The first range that overlaps or touches [lo, hi).
        let i = r.partition_point(|r| r.1 < lo);
        let (mut cur, mut a, mut b) = (lo, lo, hi);
        let mut j = i;
        while j < r.len() && r[j].0 <= hi {
            let (s, e) = r[j];
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
        r.splice(i..j, [(a, b)]);
    }

    /// Drop everything below `x`.
    pub fn remove_below(&mut self, x: u64) {
        let Some(r) = self.r.as_mut() else {
            return;
        };
        let k = r.partition_point(|r| r.1 <= x);
        if k > 0 {
            r.drain(..k);
        }
        match r.first_mut() {
            Some(f) => f.0 = f.0.max(x),
            None => self.r = None,
        }
    }

    pub fn clear(&mut self) {
        self.r = None;
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
                for w in r.v().windows(2) {
                    prop_assert!(w[0].1 < w[1].0);
                }
                let members: BTreeSet<u64> = r.v().iter().flat_map(|&(a, b)| a..b).collect();
                prop_assert_eq!(&members, &s);
                for x in 0..230 {
                    prop_assert_eq!(r.containing(x).is_some(), s.contains(&x));
                }
            }
        }
    }
}
