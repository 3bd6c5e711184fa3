//! Collective buffering for the blocking collective writes (two-phase I/O): when the
//! processes' pieces of the file are many and small (a strided view), writing each with its
//! own `pwrite` costs a system call per piece, however dense the pieces are together. The
//! processes first agree on the span they write together and cut it into one domain per
//! process; every process sends each domain's owner its pieces there (offsets, lengths and
//! data, in one all-to-all), and each owner sorts what it received and writes runs of
//! adjacent pieces with one `pwrite` each. Bytes nobody writes are never written, so no
//! read-modify-write and no lock is needed. Accesses of few or large pieces keep the
//! independent path, decided alike everywhere from what every process tells the others
//! first; so do atomic mode, external32 views, views that are contiguous everywhere (agreed
//! at MPI_File_set_view: then no message at all) and the nonblocking forms (which must not
//! wait for other processes).

use super::{allgather_i64, byte_id, io_error, File};
use crate::err;
use crate::error::Result;
use crate::mpi::coll::{self, Args, Counts, Types};
use std::os::unix::fs::FileExt;

/// Pieces at least this large on average are written one by one: the copies would cost more
/// than the system calls they save.
const LARGE_PIECE: u64 = 64 << 10;
/// A run is written once it holds this much.
const RUN_MAX: usize = 16 << 20;

/// What every process tells the others before a collective write.
#[derive(Clone, Copy)]
struct Plan {
    lo: u64,
    hi: u64,
    pieces: u64,
    bytes: u64,
    failed: bool,
}

/// Write `data` (the packed bytes of this process's access) at its pieces `segs`, together
/// with the other processes of the file. `local` is the outcome of this process's checks so
/// far: every process learns whether any failed, so that all return at the same point.
/// Returns false when the access does not call for collective buffering (nothing was
/// written; every process then writes independently).
pub(super) fn write(
    f: &File,
    segs: &[(u64, u64)],
    data: &[u8],
    local: &Result<()>,
) -> Result<bool> {
    let mine = Plan {
        lo: segs.iter().map(|s| s.0).min().unwrap_or(u64::MAX),
        hi: segs.iter().map(|s| s.0 + s.1).max().unwrap_or(0),
        pieces: segs.len() as u64,
        bytes: data.len() as u64,
        failed: local.is_err(),
    };
    let all = gather_plans(f, mine)?;
    if let Some(r) = all.iter().position(|p| p.failed) {
        local.clone()?;
        return err!(
            Io,
            "the collective write failed at rank {r} of the file's communicator"
        );
    }
    let pieces: u64 = all.iter().map(|p| p.pieces).sum();
    let bytes: u64 = all.iter().map(|p| p.bytes).sum();
    if pieces <= all.len() as u64 || bytes / pieces.max(1) >= LARGE_PIECE {
        return Ok(false);
    }
    let lo = all.iter().map(|p| p.lo).min().unwrap_or(0);
    let hi = all.iter().map(|p| p.hi).max().unwrap_or(0);
    let n = all.len() as u64;
    let dom = (hi - lo).div_ceil(n).max(1);
    // Phase 1: each domain's pieces and data, one message per owner.
    let mut meta: Vec<Vec<u64>> = vec![Vec::new(); n as usize];
    let mut body: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n as usize];
    let mut k = 0usize;
    for &(off, len) in segs {
        let (mut o, mut l) = (off, len);
        while l > 0 {
            let a = ((o - lo) / dom) as usize;
            let end = (lo + (a as u64 + 1) * dom).min(o + l);
            let take = end - o;
            meta[a].extend_from_slice(&[o, take]);
            body[a].push((k, take as usize));
            k += take as usize;
            o += take;
            l -= take;
        }
    }
    let mut send = Vec::with_capacity(data.len() + segs.len() * 16 + n as usize * 8);
    let mut scounts = Vec::with_capacity(n as usize);
    let mut sdispls = Vec::with_capacity(n as usize);
    for a in 0..n as usize {
        let start = send.len();
        send.extend_from_slice(&((meta[a].len() / 2) as u64).to_ne_bytes());
        for v in &meta[a] {
            send.extend_from_slice(&v.to_ne_bytes());
        }
        for &(at, len) in &body[a] {
            send.extend_from_slice(&data[at..at + len]);
        }
        sdispls.push(start as isize);
        scounts.push((send.len() - start) as i64);
    }
    let rcounts = alltoall_counts(f, &scounts)?;
    let mut rdispls = Vec::with_capacity(n as usize);
    let mut total = 0isize;
    for &c in &rcounts {
        rdispls.push(total);
        total += c as isize;
    }
    let mut recv = vec![0u8; total as usize];
    let byte = byte_id();
    // SAFETY: the buffers hold what the counts and displacements say, alive across the call.
    unsafe {
        coll::blocking(
            f.comm,
            &Args::Alltoall {
                sbuf: send.as_ptr(),
                scounts: Counts::Varied {
                    counts: scounts,
                    displs: sdispls,
                },
                sdt: Types::One(byte),
                rbuf: recv.as_mut_ptr(),
                rcounts: Counts::Varied {
                    counts: rcounts.clone(),
                    displs: rdispls.clone(),
                },
                rdt: Types::One(byte),
            },
        )?;
    }
    drop(send);
    // Phase 2: this process's domain, in runs of adjacent pieces.
    let mut got: Vec<(u64, &[u8])> = Vec::new();
    for (src, &c) in rcounts.iter().enumerate() {
        let m = &recv[rdispls[src] as usize..rdispls[src] as usize + c as usize];
        if m.len() < 8 {
            continue;
        }
        let word = |i: usize| u64::from_ne_bytes(m[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let np = word(0) as usize;
        let mut at = 8 + np * 16;
        for i in 0..np {
            let (o, l) = (word(1 + 2 * i), word(2 + 2 * i) as usize);
            got.push((o, &m[at..at + l]));
            at += l;
        }
    }
    got.sort_by_key(|g| g.0);
    let mut errno = 0i64;
    let mut run: Vec<u8> = Vec::new();
    let mut run_at = 0u64;
    let flush = |run: &mut Vec<u8>, at: u64, errno: &mut i64| {
        if !run.is_empty() && *errno == 0 {
            if let Err(e) = f.fd.write_all_at(run, at) {
                *errno = e.raw_os_error().unwrap_or(libc::EIO) as i64;
            }
        }
        run.clear();
    };
    for (o, d) in got {
        if run.is_empty() || o != run_at + run.len() as u64 || run.len() >= RUN_MAX {
            if o < run_at + run.len() as u64 && !run.is_empty() {
                // Overlapping writes of two processes (erroneous in MPI): the later piece
                // wins from its offset on.
                run.truncate((o - run_at) as usize);
            } else {
                flush(&mut run, run_at, &mut errno);
                run_at = o;
            }
        }
        run.extend_from_slice(d);
    }
    flush(&mut run, run_at, &mut errno);
    // Everyone learns whether every domain was written.
    let all = allgather_i64(f.comm, errno)?;
    if let Some(r) = all.iter().position(|&e| e != 0) {
        let e = std::io::Error::from_raw_os_error(all[r] as i32);
        return Err(io_error(
            &e,
            &format!(
                "write to {} (by rank {r}, writing its part of a collective write)",
                f.path.display()
            ),
        ));
    }
    Ok(true)
}

fn gather_plans(f: &File, p: Plan) -> Result<Vec<Plan>> {
    let v = [p.lo, p.hi, p.pieces, p.bytes, p.failed as u64];
    let mut out = Vec::with_capacity(f.size);
    let words = super::allgather_words(f.comm, &v.map(|x| x as i64))?;
    for w in words.chunks(5) {
        out.push(Plan {
            lo: w[0] as u64,
            hi: w[1] as u64,
            pieces: w[2] as u64,
            bytes: w[3] as u64,
            failed: w[4] != 0,
        });
    }
    Ok(out)
}

/// MPI_Alltoall of one count per process.
fn alltoall_counts(f: &File, scounts: &[i64]) -> Result<Vec<i64>> {
    let mut r = vec![0i64; scounts.len()];
    let t = super::int64();
    // SAFETY: one element per process each way, alive across the call.
    unsafe {
        coll::blocking(
            f.comm,
            &Args::Alltoall {
                sbuf: scounts.as_ptr() as *const u8,
                scounts: Counts::Uniform(1),
                sdt: Types::One(t),
                rbuf: r.as_mut_ptr() as *mut u8,
                rcounts: Counts::Uniform(1),
                rdt: Types::One(t),
            },
        )?;
    }
    Ok(r)
}
