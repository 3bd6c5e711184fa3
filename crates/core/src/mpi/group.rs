//! Process groups (MPI-4.0 section 7.3): ordered lists of global process ids.
//!
//! Groups are local objects: every operation here is a computation on lists, no
//! communication. The engine keeps them in a table ([`Engine::groups`]) whose slot 0 is
//! MPI_GROUP_EMPTY (never freed). A group of a communicator is a copy of its member list, so
//! freeing either never affects the other.

use crate::err;
use crate::error::Result;
use crate::mpi::engine::Engine;
use crate::mpi::request::PROC_NULL;
use crate::transport::Gpid;

/// MPI_UNDEFINED (the MPICH ABI value): "not a member", "no color".
pub const UNDEFINED: i32 = -32766;

/// Engine id of MPI_GROUP_EMPTY.
pub const GROUP_EMPTY: u32 = 0;

/// Results of MPI_Group_compare / MPI_Comm_compare.
pub const IDENT: i32 = 0;
pub const CONGRUENT: i32 = 1;
pub const SIMILAR: i32 = 2;
pub const UNEQUAL: i32 = 3;

/// Position of each gpid in `g` (index by gpid; -1: absent).
fn positions(g: &[Gpid], other: &[Gpid]) -> Vec<i32> {
    let max = g
        .iter()
        .chain(other)
        .copied()
        .max()
        .map_or(0, |m| m.idx() + 1);
    let mut pos = vec![-1i32; max];
    for (i, &p) in g.iter().enumerate() {
        pos[p.idx()] = i as i32;
    }
    pos
}

fn member(pos: &[i32], p: Gpid) -> bool {
    pos.get(p.idx()).is_some_and(|&i| i >= 0)
}

/// MPI_Group_union: the members of `a`, then those of `b` not in `a`.
pub fn union(a: &[Gpid], b: &[Gpid]) -> Vec<Gpid> {
    let pos = positions(a, b);
    let mut v = a.to_vec();
    v.extend(b.iter().filter(|&&p| !member(&pos, p)));
    v
}

/// MPI_Group_intersection: the members of `a` that are in `b`, in `a`'s order.
pub fn intersection(a: &[Gpid], b: &[Gpid]) -> Vec<Gpid> {
    let pos = positions(b, a);
    a.iter().copied().filter(|&p| member(&pos, p)).collect()
}

/// MPI_Group_difference: the members of `a` that are not in `b`, in `a`'s order.
pub fn difference(a: &[Gpid], b: &[Gpid]) -> Vec<Gpid> {
    let pos = positions(b, a);
    a.iter().copied().filter(|&p| !member(&pos, p)).collect()
}

/// Check that `ranks` are distinct valid ranks of a group of `n`.
fn check_ranks(n: usize, ranks: &[i32], what: &str) -> Result<()> {
    let mut seen = vec![false; n];
    for (i, &r) in ranks.iter().enumerate() {
        if r < 0 || r as usize >= n {
            return err!(
                Rank,
                "{what}: ranks[{i}] = {r} is out of range for a group of size {n}"
            );
        }
        if std::mem::replace(&mut seen[r as usize], true) {
            return err!(Rank, "{what}: rank {r} appears more than once");
        }
    }
    Ok(())
}

/// MPI_Group_incl.
pub fn incl(g: &[Gpid], ranks: &[i32]) -> Result<Vec<Gpid>> {
    check_ranks(g.len(), ranks, "MPI_Group_incl")?;
    Ok(ranks.iter().map(|&r| g[r as usize]).collect())
}

/// MPI_Group_excl.
pub fn excl(g: &[Gpid], ranks: &[i32]) -> Result<Vec<Gpid>> {
    check_ranks(g.len(), ranks, "MPI_Group_excl")?;
    let mut drop = vec![false; g.len()];
    for &r in ranks {
        drop[r as usize] = true;
    }
    Ok(g.iter()
        .zip(drop)
        .filter(|(_, d)| !d)
        .map(|(p, _)| *p)
        .collect())
}

/// The ranks named by (first, last, stride) triplets, checked (MPI-4.0 7.3.2).
fn expand_ranges(n: usize, ranges: &[[i32; 3]], what: &str) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    for (i, &[first, last, stride]) in ranges.iter().enumerate() {
        if stride == 0 {
            return err!(Arg, "{what}: range {i} has stride 0");
        }
        for (name, v) in [("first", first), ("last", last)] {
            if v < 0 || v as usize >= n {
                return err!(
                    Rank,
                    "{what}: range {i}: {name} rank {v} is out of range for a group of size {n}"
                );
            }
        }
        let count = if (stride > 0 && first > last) || (stride < 0 && first < last) {
            0
        } else {
            (last as i64 - first as i64) / stride as i64 + 1
        };
        for k in 0..count {
            out.push((first as i64 + k * stride as i64) as i32);
        }
    }
    Ok(out)
}

/// MPI_Group_range_incl.
pub fn range_incl(g: &[Gpid], ranges: &[[i32; 3]]) -> Result<Vec<Gpid>> {
    let ranks = expand_ranges(g.len(), ranges, "MPI_Group_range_incl")?;
    check_ranks(g.len(), &ranks, "MPI_Group_range_incl")?;
    Ok(ranks.iter().map(|&r| g[r as usize]).collect())
}

/// MPI_Group_range_excl.
pub fn range_excl(g: &[Gpid], ranges: &[[i32; 3]]) -> Result<Vec<Gpid>> {
    let ranks = expand_ranges(g.len(), ranges, "MPI_Group_range_excl")?;
    check_ranks(g.len(), &ranks, "MPI_Group_range_excl")?;
    excl(g, &ranks)
}

/// MPI_Group_translate_ranks: the rank in `b` of each listed rank of `a` (MPI_UNDEFINED when
/// absent; MPI_PROC_NULL stays MPI_PROC_NULL).
pub fn translate(a: &[Gpid], ranks: &[i32], b: &[Gpid]) -> Result<Vec<i32>> {
    let pos = positions(b, a);
    ranks
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            if r == PROC_NULL {
                return Ok(PROC_NULL);
            }
            if r < 0 || r as usize >= a.len() {
                return err!(
                    Rank,
                    "ranks[{i}] = {r} is out of range for a group of size {}",
                    a.len()
                );
            }
            let p = a[r as usize];
            Ok(match pos.get(p.idx()) {
                Some(&j) if j >= 0 => j,
                _ => UNDEFINED,
            })
        })
        .collect()
}

/// MPI_Group_compare: IDENT (same members, same order), SIMILAR (same members), UNEQUAL.
pub fn compare(a: &[Gpid], b: &[Gpid]) -> i32 {
    if a == b {
        return IDENT;
    }
    if a.len() != b.len() {
        return UNEQUAL;
    }
    let pos = positions(b, a);
    if a.iter().all(|&p| member(&pos, p)) {
        SIMILAR
    } else {
        UNEQUAL
    }
}

/// Rank of process `me` in `g`.
pub fn rank_of(g: &[Gpid], me: Gpid) -> Option<usize> {
    g.iter().position(|&p| p == me)
}

impl Engine {
    /// The member list of group `id`.
    pub fn group(&self, id: u32) -> Result<&[Gpid]> {
        match self.groups.get(id as usize) {
            Some(Some(g)) => Ok(g),
            _ => err!(Group, "invalid group (MPI_GROUP_NULL or already freed)"),
        }
    }

    /// Store a group; its id. An empty list is MPI_GROUP_EMPTY.
    pub fn add_group(&mut self, g: Vec<Gpid>) -> u32 {
        if g.is_empty() {
            return GROUP_EMPTY;
        }
        match self.groups.iter().skip(1).position(|x| x.is_none()) {
            Some(i) => {
                self.groups[i + 1] = Some(g);
                (i + 1) as u32
            }
            None => {
                self.groups.push(Some(g));
                (self.groups.len() - 1) as u32
            }
        }
    }

    /// MPI_Group_free (MPI_GROUP_EMPTY stays).
    pub fn free_group(&mut self, id: u32) -> Result<()> {
        self.group(id)?;
        if id != GROUP_EMPTY {
            self.groups[id as usize] = None;
        }
        Ok(())
    }

    /// This process's rank in group `id`, or MPI_UNDEFINED.
    pub fn group_rank(&self, id: u32) -> Result<i32> {
        let me = self.me;
        Ok(rank_of(self.group(id)?, me).map_or(UNDEFINED, |r| r as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::gpids;

    #[test]
    fn set_operations_keep_order() {
        let a = gpids(&[5, 1, 3]);
        let b = gpids(&[3, 7, 5, 9]);
        assert_eq!(union(&a, &b), vec![5, 1, 3, 7, 9]);
        assert_eq!(intersection(&a, &b), vec![5, 3]);
        assert_eq!(difference(&a, &b), vec![1]);
        assert_eq!(union(&[], &b), b.to_vec());
        assert!(intersection(&a, &[]).is_empty());
        assert_eq!(difference(&a, &[]), a.to_vec());
    }

    #[test]
    fn incl_excl_and_ranges() {
        let g = gpids(&[10, 11, 12, 13, 14, 15]);
        assert_eq!(incl(&g, &[4, 0]).unwrap(), vec![14, 10]);
        assert!(incl(&g, &[0, 0]).is_err());
        assert!(incl(&g, &[6]).is_err());
        assert_eq!(excl(&g, &[1, 5]).unwrap(), vec![10, 12, 13, 14]);
        assert_eq!(
            range_incl(&g, &[[0, 4, 2], [5, 3, -2]]).unwrap(),
            vec![10, 12, 14, 15, 13]
        );
        assert_eq!(range_incl(&g, &[[3, 3, 1]]).unwrap(), vec![13]);
        assert!(range_incl(&g, &[[4, 1, 1]]).unwrap().is_empty());
        assert!(range_incl(&g, &[[0, 2, 0]]).is_err());
        assert!(range_incl(&g, &[[0, 6, 1]]).is_err());
        assert!(range_incl(&g, &[[0, 2, 1], [2, 3, 1]]).is_err());
        assert_eq!(range_excl(&g, &[[1, 5, 2]]).unwrap(), vec![10, 12, 14]);
    }

    #[test]
    fn translate_and_compare() {
        let a = gpids(&[4, 2, 0]);
        let b = gpids(&[0, 1, 2]);
        assert_eq!(
            translate(&a, &[0, 1, 2, PROC_NULL], &b).unwrap(),
            vec![UNDEFINED, 2, 0, PROC_NULL]
        );
        assert!(translate(&a, &[3], &b).is_err());
        assert_eq!(compare(&a, &a), IDENT);
        assert_eq!(
            compare(&[Gpid::new(1), Gpid::new(2)], &[Gpid::new(2), Gpid::new(1)]),
            SIMILAR
        );
        assert_eq!(
            compare(&[Gpid::new(1), Gpid::new(2)], &[Gpid::new(2), Gpid::new(3)]),
            UNEQUAL
        );
        assert_eq!(
            compare(&[Gpid::new(1)], &[Gpid::new(1), Gpid::new(2)]),
            UNEQUAL
        );
        assert_eq!(compare(&[], &[]), IDENT);
    }
}
