//! A file view's map (MPI-4.0 section 14.3): which bytes of the file the stream of a process's
//! data lands on. The view is a displacement and a filetype tiled from it, one copy per
//! filetype extent; the data a process reads or writes is the concatenation of the filetype's
//! blocks, copy after copy. Offsets and positions here are bytes of that stream; the caller
//! turns etypes into bytes.
//!
//! Pure: no file is touched, so the unit tests below drive it by hand.

use crate::err;
use crate::error::Result;
use crate::mpi::datatype::layout::for_each_block;
use crate::mpi::datatype::Datatype;

/// The map of one view.
#[derive(Debug, Clone)]
pub struct Map {
    /// Bytes from the start of the file to the first copy of the filetype.
    disp: u64,
    /// One copy's blocks: (offset from the copy's start, length), in type-map order, adjacent
    /// ones merged.
    blocks: Vec<(u64, u64)>,
    /// `prefix[i]`: stream bytes in the blocks before block i (one entry more than blocks).
    prefix: Vec<u64>,
    /// Data bytes in one copy (the filetype's size), and the distance between copies.
    size: u64,
    extent: u64,
}

/// The blocks of one element of an etype or filetype (`what`), adjacent ones merged, after
/// MPI-4.0 section 14.3's rule: displacements non-negative and non-decreasing. Overlapping
/// blocks are refused too unless `overlap` (a file opened read-only: reading a byte twice is
/// harmless, writing it twice is not). The class is MPI_ERR_IO, as MPICH's ROMIO reports
/// these.
pub fn check_layout(t: &Datatype, what: &str, overlap: bool) -> Result<Vec<(u64, u64)>> {
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    let mut bad: Option<String> = None;
    let (mut start, mut end) = (0i64, 0i64);
    for_each_block(&t.ops, 0, &mut |off, len| {
        if len == 0 || bad.is_some() {
            return;
        }
        let off = off as i64;
        if off < 0 {
            bad = Some(format!(
                "a block at displacement {off}: displacements must not be negative"
            ));
            return;
        }
        if off < start {
            bad = Some(format!(
                "a block at displacement {off} after one at {start}: displacements must not decrease"
            ));
            return;
        }
        if off < end && !overlap {
            bad = Some(format!(
                "a block at displacement {off} before the end of the previous one ({end}): blocks must not overlap in a file opened for writing"
            ));
            return;
        }
        start = off;
        end = end.max(off + len as i64);
        let (off, len) = (off as u64, len as u64);
        match blocks.last_mut() {
            Some((o, l)) if *o + *l == off => *l += len,
            _ => blocks.push((off, len)),
        }
    });
    if let Some(why) = bad {
        return err!(Io, "the {what} ({}) has {why}", t.describe());
    }
    Ok(blocks)
}

impl Map {
    /// The map of displacement `disp` and filetype `ft`. The filetype must hold data, have a
    /// positive extent, and pass [`check_layout`].
    pub fn new(disp: u64, ft: &Datatype, overlap: bool) -> Result<Map> {
        if ft.size == 0 {
            return err!(Type, "the filetype holds no data ({})", ft.describe());
        }
        if ft.extent() <= 0 {
            return err!(
                Type,
                "the filetype's extent is {} ({}): copies of it would not advance through the file",
                ft.extent(),
                ft.describe()
            );
        }
        let blocks = check_layout(ft, "filetype", overlap)?;
        let mut prefix = Vec::with_capacity(blocks.len() + 1);
        let mut sum = 0;
        prefix.push(0);
        for &(_, l) in &blocks {
            sum += l;
            prefix.push(sum);
        }
        Ok(Map {
            disp,
            blocks,
            prefix,
            size: ft.size as u64,
            extent: ft.extent() as u64,
        })
    }

    /// One copy is one run of data from its start and the copies touch: the stream is the
    /// file from `disp` on.
    pub fn contiguous(&self) -> bool {
        matches!(*self.blocks, [(0, l)] if l == self.extent)
    }

    /// The file extents of stream bytes `[pos, pos + n)`, in stream order, adjacent ones
    /// merged: `f(file offset, length)`.
    pub fn segments(&self, pos: u64, n: u64, f: &mut impl FnMut(u64, u64)) {
        if n == 0 {
            return;
        }
        if self.contiguous() {
            f(self.disp + pos, n);
            return;
        }
        let mut copy = pos / self.size;
        let mut within = pos % self.size;
        let mut left = n;
        // The block holding stream byte `within` of a copy.
        let mut b = self.prefix.partition_point(|&p| p <= within) - 1;
        let mut pending: Option<(u64, u64)> = None;
        while left > 0 {
            let (boff, blen) = self.blocks[b];
            let skip = within - self.prefix[b];
            let take = (blen - skip).min(left);
            let at = self.disp + copy * self.extent + boff + skip;
            pending = match pending {
                Some((o, l)) if o + l == at => Some((o, l + take)),
                Some(p) => {
                    f(p.0, p.1);
                    Some((at, take))
                }
                None => Some((at, take)),
            };
            left -= take;
            within += take;
            b += 1;
            if b == self.blocks.len() {
                b = 0;
                within = 0;
                copy += 1;
            }
        }
        if let Some((o, l)) = pending {
            f(o, l);
        }
    }

    /// The file offset of stream byte `pos` (MPI_File_get_byte_offset).
    pub fn byte_offset(&self, pos: u64) -> u64 {
        let mut at = None;
        self.segments(pos, 1, &mut |o, _| {
            at.get_or_insert(o);
        });
        at.unwrap_or(self.disp)
    }

    /// Stream bytes that lie before file offset `eof` (where MPI_SEEK_END puts a pointer: the
    /// first stream byte at or past the end of the file).
    pub fn bytes_before(&self, eof: u64) -> u64 {
        if eof <= self.disp {
            return 0;
        }
        let rel = eof - self.disp;
        let (copies, rest) = (rel / self.extent, rel % self.extent);
        let mut n = copies * self.size;
        for &(o, l) in &self.blocks {
            if o >= rest {
                break;
            }
            n += l.min(rest - o);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::DtypeId;
    use crate::mpi::datatype::predefined;
    use std::sync::Arc;

    fn int() -> Arc<Datatype> {
        Arc::new(predefined()[crate::mpi::datatype::predefined_index("MPI_INT").unwrap()].clone())
    }

    fn segs(m: &Map, pos: u64, n: u64) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        m.segments(pos, n, &mut |o, l| v.push((o, l)));
        v
    }

    #[test]
    fn contiguous_view_is_the_file_from_disp() {
        let m = Map::new(10, &int(), false).unwrap();
        assert!(m.contiguous());
        assert_eq!(segs(&m, 0, 100), vec![(10, 100)]);
        assert_eq!(segs(&m, 7, 3), vec![(17, 3)]);
        assert_eq!(m.byte_offset(5), 15);
        assert_eq!(m.bytes_before(4), 0);
        assert_eq!(m.bytes_before(30), 20);
    }

    #[test]
    fn vector_view_tiles_its_blocks() {
        // 3 ints every 2 ints: blocks at 0, 8, 16 (4 bytes each), extent 20.
        let v = Datatype::vector(3, 1, 2, false, &int(), DtypeId::new(2)).unwrap();
        let m = Map::new(100, &v, false).unwrap();
        assert!(!m.contiguous());
        assert_eq!(
            segs(&m, 0, 24),
            // The first copy's last block ends where the second copy's first begins.
            vec![(100, 4), (108, 4), (116, 8), (128, 4), (136, 4)]
        );
        // From the middle of a block, across the end of a copy: the copy's last block and
        // the next copy's first are adjacent (117..120, 120..122) and merge.
        assert_eq!(segs(&m, 9, 5), vec![(117, 5)]);
        assert_eq!(m.byte_offset(12), 120);
        assert_eq!(m.byte_offset(5), 109);
        // EOF at 130: the first copy (12 bytes) and, of the second (from 120), blocks 120..124
        // and 128..130.
        assert_eq!(m.bytes_before(130), 12 + 4 + 2);
        assert_eq!(m.bytes_before(100), 0);
    }

    #[test]
    fn resized_holes_and_negative_blocks() {
        // One int resized to extent 12: 4 data bytes then an 8-byte hole per copy.
        let r = Datatype::resized(&int(), 0, 12, DtypeId::new(2)).unwrap();
        let m = Map::new(0, &r, false).unwrap();
        assert_eq!(segs(&m, 2, 8), vec![(2, 2), (12, 4), (24, 2)]);
        for (lens, disps) in [([1, 1], [-8, 0]), ([1, 1], [8, 0]), ([3, 1], [0, 4])] {
            let t = Datatype::indexed(&lens, &disps, true, &int(), DtypeId::new(2)).unwrap();
            let e = Map::new(0, &t, false).unwrap_err();
            assert_eq!(
                e.class,
                crate::error::ErrorClass::Io,
                "{disps:?}: {}",
                e.msg
            );
            // Overlap is fine for reading only; going back or below 0 never is.
            assert_eq!(Map::new(0, &t, true).is_ok(), disps == [0, 4]);
        }
    }
}
