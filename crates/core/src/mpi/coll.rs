//! Collective operations built on point-to-point messages in each communicator's collective
//! context (`ctx + 1`), so they never match user messages.
//!
//! This is the minimal set the point-to-point foundation needs (programs synchronise with
//! MPI_Barrier and distribute parameters with MPI_Bcast); the full collective chapter with
//! algorithm selection lives in its own issue.

use crate::error::Result;
use crate::mpi::datatype::predefined_index;
use crate::mpi::p2p;
use crate::mpi::request::Mode;
use crate::runtime::global::with;

const COLL: u32 = 1;
const TAG_BARRIER: i32 = 1;
const TAG_BCAST: i32 = 2;

fn byte_type() -> u32 {
    predefined_index("MPI_BYTE").expect("MPI_BYTE is predefined") as u32
}

/// MPI_Barrier: dissemination (ceil(log2 n) rounds of zero-byte messages; round k talks to
/// the processes 2^k away).
pub fn barrier(comm: u32) -> Result<()> {
    let (rank, size) = with(|e| e.comm(comm).map(|c| (c.rank, c.size() as i32)))??;
    let byte = byte_type();
    let mut dist = 1;
    let mut round = 0;
    while dist < size {
        let to = (rank + dist) % size;
        let from = (rank - dist).rem_euclid(size);
        let tag = TAG_BARRIER + 64 * round;
        // SAFETY: zero-length messages never touch their (null) buffers.
        let (s, r) = with(|e| -> Result<(u32, u32)> {
            let r = unsafe { e.irecv_on(std::ptr::null_mut(), 0, byte, from, tag, comm, COLL)? };
            let s = unsafe {
                e.isend_on(
                    std::ptr::null(),
                    0,
                    byte,
                    to,
                    tag,
                    comm,
                    Mode::Standard,
                    COLL,
                )?
            };
            Ok((s, r))
        })??;
        p2p::wait(s)?;
        p2p::wait(r)?;
        dist *= 2;
        round += 1;
    }
    Ok(())
}

/// MPI_Bcast: binomial tree rooted at `root`.
///
/// # Safety
/// `buf` holds `count` elements of the datatype.
pub unsafe fn bcast(buf: *mut u8, count: i64, dt: u32, root: i32, comm: u32) -> Result<()> {
    let (rank, size) = with(|e| e.comm(comm).map(|c| (c.rank, c.size() as i32)))??;
    if root < 0 || root >= size {
        return crate::err!(
            Root,
            "root {root} is out of range for a communicator of size {size}"
        );
    }
    let vrank = (rank - root).rem_euclid(size);
    // Receive from the parent (the rank that differs in our lowest set bit).
    let mut mask = 1;
    while mask < size {
        if vrank & mask != 0 {
            let parent = ((vrank - mask) + root) % size;
            let st = with(|e| e.irecv_on(buf, count, dt, parent, TAG_BCAST, comm, COLL))??;
            let st = p2p::wait(st)?;
            if let Some(err) = st.error {
                return Err(*err);
            }
            break;
        }
        mask <<= 1;
    }
    // Send to the children below that bit.
    mask >>= 1;
    let mut reqs = Vec::new();
    while mask > 0 {
        if vrank + mask < size {
            let child = (vrank + mask + root) % size;
            reqs.push(with(|e| {
                e.isend_on(buf, count, dt, child, TAG_BCAST, comm, Mode::Standard, COLL)
            })??);
        }
        mask >>= 1;
    }
    for r in reqs {
        p2p::wait(r)?;
    }
    Ok(())
}
