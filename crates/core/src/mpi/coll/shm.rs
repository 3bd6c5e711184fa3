//! Shared-memory collectives: barrier, bcast, reduce, allreduce, allgather(v), alltoall,
//! gather(v) and scatter(v) for communicators whose members all share one host, through the
//! communicator's per-node collective region (`transport::NodeRegion`: flags and words by
//! generation, a ring of `coll_shm_depth` areas per member and of result areas; its module doc gives
//! the memory ordering).
//!
//! The region is mapped lazily, at the first shared-memory collective on a communicator: its
//! rank 0 makes it and every member maps it (two personalised exchanges in the management
//! context, the second also telling everyone whether all members mapped it, so all take the
//! same path afterwards). It lives in the communicator's collective state and goes with it; a
//! duplicate maps its own. If the region cannot be made or mapped anywhere, the communicator
//! keeps the point-to-point algorithms.
//!
//! Algorithms, one generation per step (a large call is cut into chunks of one area, each a
//! generation, so the ring of areas pipelines them: up to `coll_shm_depth` chunks in flight):
//! - barrier: publish, wait for every member's publication;
//! - bcast: the root copies (packs, for a non-contiguous type) a chunk into its area and
//!   publishes it; the others copy (unpack) it out;
//! - reduce, allreduce: every member copies its input into its area; small chunks: the root
//!   (reduce) or everyone (allreduce) reduces every member's area in rank order straight into
//!   the receive buffer; larger chunks: member k reduces the k-th part of the chunk over every
//!   member's area into the result area, and the root (reduce) or everyone (allreduce) copies
//!   the result out. The operands are always combined in rank order (a op b with a the lower
//!   rank; user functions as `inout = in op inout` from the highest rank down), so
//!   non-commutative operations get the order MPI asks for; from `coll_shm_reduce_direct`
//!   bytes per member, no areas: member k reduces part k reading the other members' inputs
//!   and writing the receivers' buffers directly (see [`reduce_direct`]);
//! - allgather, alltoall (one count and datatype per side): every member packs its block (its
//!   n blocks, a slice of each per chunk) into its area and unpacks the block meant for it from
//!   every member's area; allgatherv the same with blocks of their own lengths;
//! - gather(v), scatter(v): see [`rooted`] (the root decides the number of generations and
//!   says so in the first one's result area; a scatter's root writes every member's area, or
//!   its own for small blocks, or the members read large blocks from its buffer directly).
//!
//! Only blocking calls take these paths (nonblocking and persistent ones need progress without
//! the caller, and keep their schedules): the decision (`Engine::coll_choose_shm`) may name
//! `shm` for any call, and the schedule builders then take what would be chosen without it.
//! A call comes here only where some rule or override could name `shm` for its collective
//! at the communicator's size (`Engine::coll_shm_route`, asked before the arguments are
//! read; at two processes the built-in table names it only for alltoall from 16 KiB and
//! bcast of 64-128 KiB).
//! Reductions need a contiguous datatype (the same at every member, so all decide alike);
//! broadcasts pack any datatype, since only the type signatures agree across members.
//! Waiting members poll their peers' flags, then drive the engine's progress (nonblocking
//! operations of the caller continue meanwhile) and yield the processor when ranks outnumber
//! cores.
//!
//! Arguments that disagree between members (an erroneous program) end in an error rather
//! than a wait without end: each call's first generation carries a signature (collective and
//! bytes, [`Sig`]) that the members waiting for each other compare, and a waiting member
//! watches for point-to-point messages of its own call ([`Watch`]), the mark of a member that
//! took another path for it (`docs/collectives.md`, "Arguments that disagree").

use crate::ids::{CommId, DtypeId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::decide::Coll;
use super::gather::Blk;
use super::op::{Builtin, Op, Reducer};
use super::{
    avg_bytes, blocks, check_buf, check_root, count_of, in_place, no_alias, no_alias_own, own_blk,
    Args, Counts, Rooted, Types,
};
use crate::err;
use crate::error::Result;
use crate::mpi::datatype::Datatype;
use crate::mpi::global::{self, with};
use crate::transport::{Gpid, NodeRegion, Region, RegionFlag as Flag, REGION_LEN};

/// Bytes of one area of a collective region (a chunk of a large call).
pub const AREA: usize = 32 * 1024;

/// Chunks of a reduction from this size on are reduced in parts by all members.
const PARTS_FROM: usize = 2048;

/// A communicator's shared-memory collective state (in `CommColl`): None until the first
/// shared-memory collective. A clone (a duplicated communicator) starts without one.
#[derive(Default)]
pub struct ShmCell(Option<Arc<ShmComm>>);

impl Clone for ShmCell {
    fn clone(&self) -> ShmCell {
        ShmCell(None)
    }
}

impl std::fmt::Debug for ShmCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("ShmCell(unset)"),
            Some(s) => write!(f, "ShmCell({:?})", s.region),
        }
    }
}

/// The region of one communicator, or the agreed fact that there is none.
pub struct ShmComm {
    region: Option<NodeRegion>,
    /// The last generation used (counted identically by every member of the region).
    gen: AtomicU64,
    /// Our index among the region's members (this host's members of the communicator, in
    /// rank order).
    me: usize,
    /// The members' ranks in the communicator.
    ranks: Vec<usize>,
    /// Every member agreed that members may read each other's buffers directly
    /// (`shm_single_copy` on, and the probe at mapping time worked: see [`region`]).
    direct: bool,
}

impl ShmComm {
    fn next(&self) -> u64 {
        self.gen.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Begin a call at generation `sig.g`, its first: say what it is ([`Sig`]) in our
    /// signature of that generation, once its ring position is free (after `wait_free`, or after a
    /// flag of `g` set by a member that waited for it) and before we publish in `g`. The
    /// barrier, which writes no area, does not wait for that: a member still reading our
    /// signature of `g - depth` then finds another generation there and skips the check, so
    /// an early write can only miss a disagreement, never report one.
    fn announce(&self, sig: Sig) -> Sig {
        self.region
            .as_ref()
            .expect("checked")
            .set_sig(self.me, sig.g, sig.word);
        sig
    }

    /// Check that member `j`, whose flag of our call's first generation we have seen, is in
    /// the same call: the same collective over the same bytes. A signature of another
    /// generation is one `j` left earlier (a call that announces nothing, such as a gather):
    /// no check.
    fn agree(&self, j: usize, mine: Sig) -> Result<()> {
        let theirs = self.sig_of(j, mine.g);
        if theirs == mine || !theirs.current() {
            return Ok(());
        }
        self.intact(j, mine.g)?;
        let rank = self.rank_of(j);
        if theirs.coll() != mine.coll() {
            return err!(
                Other,
                "rank {rank} of the communicator calls {} at the same point: every rank must \
                 call the communicator's collectives in the same order",
                mpi_name(theirs.coll())
            );
        }
        if theirs.op_name() != mine.op_name() {
            return err!(
                Op,
                "rank {rank} of the communicator reduces with {} and this rank with {}: every \
                 rank must pass the same operation",
                theirs.op_name(),
                mine.op_name()
            );
        }
        err!(
            Truncate,
            "rank {rank} of the communicator passes {} bytes and this rank {}: the counts \
             (and type signatures) must agree",
            theirs.bytes(),
            mine.bytes()
        )
    }

    /// [`ShmComm::agree`] with every other member.
    fn agree_all(&self, mine: Sig) -> Result<()> {
        let n = self.ranks.len();
        (1..n).try_for_each(|t| self.agree((self.me + t) % n, mine))
    }

    /// Check that member `j`, whose flag of generation `g` (its call's first) we have seen,
    /// did not give the call up ([`ShmComm::serve`]): for the calls that announce no
    /// signature (gathers, scatters, v forms), whose members read each other's areas without
    /// comparing signatures.
    fn intact(&self, j: usize, g: u64) -> Result<()> {
        if self.sig_of(j, g) == Sig::gave_up(g) {
            return err!(
                Other,
                "rank {} of the communicator gave this call up with an error (its own \
                 message says why): the call cannot complete",
                self.rank_of(j)
            );
        }
        Ok(())
    }

    /// Member `j`'s signature of generation `g` (whatever an earlier generation left there
    /// where `j` announced none at `g`).
    fn sig_of(&self, j: usize, g: u64) -> Sig {
        Sig {
            g,
            word: self.region.as_ref().expect("checked").sig(j, g),
        }
    }

    /// Member `j`'s rank in the communicator.
    fn rank_of(&self, j: usize) -> usize {
        self.ranks.get(j).copied().unwrap_or(j)
    }

    /// Serve one call with `f`, which takes the call's generations. Where it fails before
    /// its part is done (the arguments disagree, or a member took another path), the call
    /// leaves the region as a finished call would: its flags of every generation it took are set, so no member waits
    /// for this one in a later call, and the members that still wait in this one see our
    /// flag and, with it, a signature saying the call was given up where we had announced
    /// none (then they fail too: [`ShmComm::agree`], [`ShmComm::intact`]). Where the members
    /// took the same number of generations, which is the case whenever the first generation
    /// showed the disagreement, the region stays usable for the calls that follow.
    fn serve(&self, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let before = self.gen.load(Ordering::Relaxed);
        let res = f();
        if res.is_err() {
            self.abandon(before + 1, self.gen.load(Ordering::Relaxed));
        }
        res
    }

    /// Leave generations `first..=last`, which a failed call took ([`ShmComm::serve`]).
    fn abandon(&self, first: u64, last: u64) {
        let Some(r) = self.region.as_ref() else {
            return;
        };
        // Nothing to leave where the call took no generation, or finished its part of every
        // one before it reported its error (a block longer than its buffer, say).
        if last < first || r.reached(self.me, Flag::Done, last) {
            return;
        }
        // The signature's ring position may still be read for `first - depth`: such a reader
        // finds another generation and skips the check (see `announce`).
        if !self.sig_of(self.me, first).current() {
            r.set_sig(self.me, first, Sig::gave_up(first).word);
        }
        for f in [Flag::Published, Flag::Reduced, Flag::Done] {
            r.set(self.me, f, last);
        }
    }
}

/// What a call is, in the region (`NodeRegion::set_sig`): the low 16 bits of its first
/// generation, the collective (4 bits), a reduction's operation (5 bits) and the bytes every
/// member passes alike (39 bits; the v forms and rooted calls, whose counts differ by rank,
/// announce nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sig {
    /// The generation (whole).
    g: u64,
    /// The signature as the region holds it.
    word: u64,
}

const SIG_BYTES: u64 = (1 << 39) - 1;
const SIG_OP: u32 = 39;
/// The operation's code for a user-defined one: its handle is local to each process, so
/// user operations all compare equal.
const USER_OP: u64 = 0x1f;
// Code 0xf of the collective's 4 bits is `Sig::gave_up`'s; the operations' codes are their
// index plus one (0: none).
const _: () = assert!(Coll::ALL.len() < 0xf && Builtin::ALL.len() < USER_OP as usize);

impl Sig {
    fn new(g: u64, coll: Coll, bytes: usize) -> Sig {
        let word = (g & 0xffff) << 48 | (coll as u64 & 0xf) << 44 | (bytes as u64).min(SIG_BYTES);
        Sig { g, word }
    }

    /// A reduction's signature: [`Sig::new`] and the operation.
    fn reduction(g: u64, coll: Coll, bytes: usize, op: &Op) -> Sig {
        let code = match op {
            Op::Builtin(b) => *b as u64 + 1,
            Op::User { .. } => USER_OP,
        };
        let s = Sig::new(g, coll, bytes);
        Sig {
            g,
            word: s.word | code << SIG_OP,
        }
    }

    /// The operation's name (for a reduction's signature).
    fn op_name(self) -> &'static str {
        match self.word >> SIG_OP & 0x1f {
            0 => "no operation",
            USER_OP => "a user-defined operation",
            c => Builtin::ALL.get(c as usize - 1).map_or("?", |b| b.name()),
        }
    }

    /// The signature of a member that gave up the call beginning at generation `g`
    /// ([`ShmComm::serve`]): a collective code no call has.
    fn gave_up(g: u64) -> Sig {
        Sig {
            g,
            word: (g & 0xffff) << 48 | 0xf << 44,
        }
    }

    /// The generation's low 16 bits, as the word holds them.
    fn gen(self) -> u64 {
        self.word >> 48
    }

    /// The word is one of generation `g` (not one an earlier generation left there).
    fn current(self) -> bool {
        self.gen() == self.g & 0xffff
    }

    fn coll(self) -> Coll {
        Coll::ALL
            .get((self.word >> 44 & 0xf) as usize)
            .copied()
            .unwrap_or(Coll::Barrier)
    }

    fn bytes(self) -> u64 {
        self.word & SIG_BYTES
    }
}

/// The MPI name of a collective: "MPI_Allreduce".
fn mpi_name(c: Coll) -> String {
    let n = c.name();
    format!("MPI_{}{}", n[..1].to_uppercase(), &n[1..])
}

/// What a waiting member of a shared-memory call watches for besides its peers' flags:
/// point-to-point messages of this very call (the collective context, the call's tag). Every
/// blocking collective takes the next tag of the communicator's sequence, whichever path
/// serves it (so a member that has gone on to a later call sends later tags), and a call
/// served here sends none: such a message comes from a member that took a point-to-point
/// algorithm for this call, because its arguments chose differently (a count that differs,
/// say). Without the watch both would wait for each other forever.
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    ctx: crate::ids::ContextId,
    tag: i32,
}

impl Watch {
    /// Take the next collective tag of `comm` for a call served here.
    fn take(e: &mut crate::mpi::engine::Engine, comm: CommId) -> Result<Watch> {
        let ctx = e.comm(comm)?.coll_ctx();
        Ok(Watch {
            ctx,
            tag: e.coll_tag(comm),
        })
    }

    /// While the region is mapped at this call, `got` what the exchange has received (None:
    /// awaited): [`Watch::check`], and has an awaited member gone on to a later call (it left
    /// this one on another path, which failed)?
    fn check_mapping(&self, e: &crate::mpi::engine::Engine, got: &[Option<Vec<u8>>]) -> Result<()> {
        self.check(e)?;
        for (j, _) in got.iter().enumerate().filter(|(_, g)| g.is_none()) {
            if super::gone_on(e, self.ctx, j as i32, self.tag) {
                return err!(
                    Other,
                    "rank {j} of the communicator has gone on to a later collective without \
                     taking part in this one's shared-memory call: the ranks' arguments differ \
                     (counts or type signatures?) or they call the communicator's collectives \
                     in different orders"
                );
            }
        }
        Ok(())
    }

    /// Has a member sent this call point-to-point messages?
    fn check(&self, e: &crate::mpi::engine::Engine) -> Result<()> {
        let spec = crate::proto::frame::Envelope {
            ctx: self.ctx,
            src: crate::mpi::request::ANY_SOURCE,
            tag: self.tag,
        };
        match e.pml.probe(&spec) {
            None => Ok(()),
            Some(st) => err!(
                Other,
                "rank {} of the communicator serves this call with point-to-point messages \
                 and this rank from shared memory: the ranks' arguments differ (counts or type \
                 signatures?) or they call the communicator's collectives in different orders",
                st.source
            ),
        }
    }
}

/// The region of intracommunicator `comm`'s members on this host (all of them for a
/// communicator within one host; the members of this host for the hierarchical algorithms of
/// `hier.rs`), made and mapped at the first call. Collective over the whole communicator:
/// every member calls it at the same collective, the lowest member of each host makes its
/// host's region, and all agree whether every member mapped one (else none is used).
fn region(comm: CommId, watch: Option<Watch>) -> Result<Option<Arc<ShmComm>>> {
    let (cached, n, local, me, jobid, gpid, serial, (depth, single)) = with(|e| -> Result<_> {
        let settings = (e.cfg.coll_shm_depth as usize, e.cfg.shm_single_copy);
        if let Some(s) = &e.live_comm(comm)?.coll.shm.0 {
            return Ok((
                Some(s.clone()),
                0,
                Vec::new(),
                0,
                String::new(),
                Gpid::NONE,
                0,
                settings,
            ));
        }
        let views = e.coll_views(comm)?;
        let c = e.live_comm(comm)?;
        let (n, me) = (c.size(), c.rank as usize);
        let local = views.nodes.members[views.nodes.my_node].clone();
        e.coll.shm_serial = e.coll.shm_serial.wrapping_add(1);
        Ok((
            None,
            n,
            local,
            me,
            e.jobid.clone(),
            Gpid::new(e.rank),
            e.coll.shm_serial,
            settings,
        ))
    })??;
    if let Some(s) = cached {
        return Ok(s.region.is_some().then_some(s));
    }
    let nl = local.len();
    let lead = local[0];
    let mut region = None;
    let mut msgs = vec![Vec::new(); n];
    let mine = local.iter().position(|&m| m == me).unwrap_or(0);
    if me == lead {
        if let Ok(r) = NodeRegion::create(&jobid, gpid, serial, nl, AREA, depth) {
            r.enroll(0);
            // The description, then the depth (the maker's choice is its host's).
            let mut d = r.desc().unwrap_or(Region::NONE).0.to_vec();
            d.push(depth as u8);
            for &m in &local[1..] {
                msgs[m].clone_from(&d);
            }
            region = Some(r);
        }
    }
    // At a call of its own (not within hier.rs's), the exchanges carry the call's tag: a
    // member that waits point to point for this call recognises them (`super::passed_over`).
    let at = |round| watch.map(|w| (w.ctx, super::setup_tag(w.tag, round)));
    let check = |e: &mut crate::mpi::engine::Engine, got: &[Option<Vec<u8>>]| {
        watch.as_ref().map_or(Ok(()), |w| w.check_mapping(e, got))
    };
    let got = crate::mpi::cm::exchange_all_watching(comm, at(0), msgs, check)?;
    if me != lead {
        if let Some((&depth, d)) = got[lead].split_last() {
            if let Ok(d) = <[u8; REGION_LEN]>::try_from(d) {
                region = NodeRegion::open(&jobid, &Region(d), nl, AREA, depth as usize).ok();
            }
        }
        if let Some(r) = &region {
            r.enroll(mine);
        }
    }
    // Direct copies between members: each member but the lead tries to read the lead's
    // memory (the kernel's permission is the same for every pair of the job's processes).
    let direct = single
        && region
            .as_ref()
            .is_some_and(|r| me == lead || r.probe_direct(0));
    // Everyone says whether it mapped its region and could read directly; this is also the
    // point after which the name may go.
    let ok = vec![vec![region.is_some() as u8, direct as u8]; n];
    let said = crate::mpi::cm::exchange_all_watching(comm, at(1), ok, check)?;
    let all = said.iter().all(|v| v.first() == Some(&1));
    let direct = all && said.iter().all(|v| v.get(1) == Some(&1));
    if let Some(r) = region.as_mut() {
        r.unlink();
    }
    let s = Arc::new(ShmComm {
        region: if all { region } else { None },
        gen: AtomicU64::new(0),
        me: mine,
        ranks: local,
        direct,
    });
    with(|e| {
        if let Some(Some(c)) = e.comms.get_mut(comm.idx()) {
            c.coll.shm = ShmCell(Some(s.clone()));
        }
    })?;
    Ok(s.region.is_some().then_some(s))
}

/// What waiting members do between polls: drive the engine (every pass when ranks
/// outnumber cores, else every 16th), check the `watch` then, and yield or pause.
fn idler(watch: Option<Watch>) -> Result<impl FnMut() -> Result<()>> {
    let yield_mode = with(|e| e.yield_wait)?;
    let mut k = 0u32;
    Ok(move || {
        k = k.wrapping_add(1);
        if yield_mode || k.is_multiple_of(16) {
            with(|e| {
                e.progress();
                watch.as_ref().map_or(Ok(()), |w| w.check(e))
            })??;
            super::run_deferred();
        }
        global::idle_pass(k);
        Ok(())
    })
}

/// The error of a gather's or scatter's block of `sent` bytes from rank `from` where the
/// receiver's arguments make `expected`: a truncation where it is longer, the arguments'
/// disagreement where it is shorter (as `super::short_message` for the other paths).
fn block_mismatch(from: usize, sent: usize, expected: usize) -> crate::error::MpiError {
    if sent > expected {
        return crate::mpi_error!(
            Truncate,
            "rank {from} of the communicator sent {sent} bytes to a block of {expected} bytes"
        );
    }
    super::short_error(from, sent, expected)
}

/// The communicator's size, our rank, and whether a shared-memory algorithm may serve a call
/// on it: an intracommunicator of more than one member, all on this host.
fn eligible(e: &mut crate::mpi::engine::Engine, comm: CommId) -> Option<(usize, usize)> {
    // Only where the job uses shared memory at all: a job told to use other transports
    // (PROTEAN_TRANSPORTS=tcp, say) keeps its collectives on them too.
    if !e.net.has(crate::transport::Route::Shm) {
        return None;
    }
    let c = e.comm(comm).ok()?;
    if c.is_inter() || c.size() < 2 {
        return None;
    }
    let (n, me) = (c.size(), c.rank as usize);
    let views = e.coll_views(comm).ok()?;
    (views.nodes.count() == 1).then_some((n, me))
}

/// Run `a` with a shared-memory algorithm when the decision names one for it; None
/// otherwise.
///
/// # Safety
/// As for [`super::blocking`].
pub unsafe fn try_blocking(comm: CommId, a: &Args) -> Option<Result<()>> {
    if let Some(r) = a.rooted() {
        return rooted(comm, r.own, r.many, r.root, r.v, r.gather);
    }
    match a {
        Args::Barrier => barrier(comm),
        Args::Bcast {
            buf,
            count,
            dt,
            root,
        } => bcast(comm, *buf, *count, *dt, *root),
        Args::Reduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
            root,
        } => reduce(comm, *sbuf, *rbuf, *count, *dt, *op, Some(*root)),
        Args::Allreduce {
            sbuf,
            rbuf,
            count,
            dt,
            op,
        } => reduce(comm, *sbuf, *rbuf, *count, *dt, *op, None),
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts: Counts::Uniform(rcount),
            rdt,
        } => exchange(comm, *sbuf, (*scount, *sdt), *rbuf, (*rcount, *rdt), false),
        Args::Allgather {
            sbuf,
            scount,
            sdt,
            rbuf,
            rcounts: rcounts @ Counts::Varied { .. },
            rdt,
        } => allgatherv(comm, *sbuf, (*scount, *sdt), *rbuf, rcounts, *rdt),
        Args::Alltoall {
            sbuf,
            scounts: Counts::Uniform(scount),
            sdt: Types::One(sdt),
            rbuf,
            rcounts: Counts::Uniform(rcount),
            rdt: Types::One(rdt),
        } => exchange(comm, *sbuf, (*scount, *sdt), *rbuf, (*rcount, *rdt), true),
        _ => None,
    }
}

/// Turn the preparation's answer into the call's: Ok(None) declines (another algorithm
/// serves the call), errors are the call's.
macro_rules! prepared {
    ($prep:expr) => {
        match $prep {
            Ok(Some(x)) => x,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        }
    };
}

/// The region, or decline the call.
macro_rules! region_or_decline {
    ($comm:expr, $watch:expr) => {
        match region($comm, Some($watch)) {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        }
    };
}

pub mod hier;

unsafe fn barrier(comm: CommId) -> Option<Result<()>> {
    let (me, w) = prepared!(with(|e| -> Result<Option<_>> {
        let Some((n, me)) = eligible(e, comm) else {
            return Ok(None);
        };
        if !e.coll_choose_shm(Coll::Barrier, n, 0) {
            return Ok(None);
        }
        Ok(Some((me, Watch::take(e, comm)?)))
    })
    .and_then(|x| x));
    let s = region_or_decline!(comm, w);
    Some(s.serve(|| {
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(Some(w))?;
        let g = s.next();
        let sig = s.announce(Sig::new(g, Coll::Barrier, 0));
        r.set(me, Flag::Published, g);
        r.wait_all(Flag::Published, g, &mut idle)?;
        s.agree_all(sig)?;
        r.set(me, Flag::Done, g);
        Ok(())
    }))
}

unsafe fn bcast(
    comm: CommId,
    buf: *mut u8,
    count: i64,
    dt: DtypeId,
    root: i32,
) -> Option<Result<()>> {
    let (me, root, count, d, w) = prepared!(with(|e| -> Result<Option<_>> {
        let Some((n, me)) = eligible(e, comm) else {
            return Ok(None);
        };
        let count = count_of(count, "count")?;
        let d = e.coll_dtype(dt)?;
        let root = check_root(root, n)?;
        check_buf(buf, count, &d, "buffer")?;
        let bytes = count * d.size;
        if bytes == 0 || !e.coll_choose_shm(Coll::Bcast, n, bytes) {
            return Ok(None);
        }
        Ok(Some((me, root, count, d, Watch::take(e, comm)?)))
    })
    .and_then(|x| x));
    let s = region_or_decline!(comm, w);
    Some(s.serve(|| {
        let mut idle = idler(Some(w))?;
        bcast_chunks(&s, me, root, buf, count, &d, &mut idle)
    }))
}

/// Broadcast `count` elements of `d` at `buf` from region member `root` to the region's
/// other members, an area per generation (packed for a non-contiguous type). A member whose
/// length differs from the root's (its signature says) takes the root's generations without
/// reading them and reports the difference after, so that a failed broadcast leaves the
/// region in step.
///
/// # Safety
/// `buf` holds `count` elements of `d` at every member.
unsafe fn bcast_chunks(
    s: &ShmComm,
    me: usize,
    root: usize,
    buf: *mut u8,
    count: usize,
    d: &Datatype,
    idle: &mut impl FnMut() -> Result<()>,
) -> Result<()> {
    let r = s.region.as_ref().expect("checked");
    let mut total = count * d.size;
    let mut off = 0;
    let mut failure = None;
    while off < total {
        let len = AREA.min(total - off);
        let g = s.next();
        let area = r.area(root, g);
        if me == root {
            r.wait_free(g, idle)?;
            if off == 0 {
                s.announce(Sig::new(g, Coll::Bcast, total));
            }
            pack_part(d, buf, count, off, area, len);
            r.set(me, Flag::Published, g);
        } else {
            r.wait(|r| r.reached(root, Flag::Published, g), idle)?;
            if off == 0 {
                // After the root's flag: it waited until the ring position was free.
                let mine = s.announce(Sig::new(g, Coll::Bcast, total));
                if let Err(e) = s.agree(root, mine) {
                    // A broadcast of another length: follow the root's generations without
                    // reading them (so that the region stays in step) and fail after.
                    let theirs = s.sig_of(root, g);
                    if theirs == Sig::gave_up(g) || theirs.coll() != Coll::Bcast {
                        return Err(e);
                    }
                    total = theirs.bytes() as usize;
                    failure = Some(e);
                }
            }
            if failure.is_none() {
                unpack_part(d, buf, count, off, area, len);
            }
        }
        r.set(me, Flag::Done, g);
        off += AREA.min(total - off);
    }
    failure.map_or(Ok(()), Err)
}

/// `dst = a[0] op a[1] op ... op a[n-1]` over `count` elements, in rank order.
///
/// # Safety
/// Every pointer holds `count` elements of the reducer's (contiguous) datatype; `dst`
/// overlaps none of the operands.
unsafe fn reduce_all(
    red: &Reducer,
    a: impl Fn(usize) -> *const u8,
    n: usize,
    dst: *mut u8,
    count: usize,
) {
    if red.is_user() {
        // The user's function computes inout = in op inout: from the highest rank down.
        crate::mem::copy(a(n - 1), dst, count * red.dt.size);
        for i in (0..n - 1).rev() {
            red.call_user(a(i), dst, count);
        }
    } else {
        red.apply(a(0), a(1), dst, count);
        for i in 2..n {
            red.apply(dst, a(i), dst, count);
        }
    }
}

/// Check the arguments of MPI_Reduce (`root` Some) or MPI_Allreduce (None) at member `me` of
/// `n`: the root, the count, the reducer, and where the input is (the receive buffer under
/// MPI_IN_PLACE).
#[allow(clippy::too_many_arguments)]
fn reduce_args(
    e: &mut crate::mpi::engine::Engine,
    n: usize,
    me: usize,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    root: Option<i32>,
) -> Result<(Option<usize>, usize, Reducer, *const u8)> {
    let count = count_of(count, "count")?;
    let red = e.coll_reducer(op, dt)?;
    let d = red.dt.clone();
    let root = match root {
        Some(r) => Some(check_root(r, n)?),
        None => None,
    };
    // The receive buffer matters at the root of a reduce and everywhere in an allreduce.
    let receives = root.is_none_or(|r| r == me);
    let input = if in_place(sbuf) {
        if !receives {
            return err!(Buffer, "MPI_IN_PLACE is only valid at the root");
        }
        rbuf as *const u8
    } else {
        if receives {
            no_alias(sbuf, rbuf, count * d.size)?;
        }
        sbuf
    };
    check_buf(input, count, &d, "send buffer")?;
    if receives {
        check_buf(rbuf, count, &d, "receive buffer")?;
    }
    Ok((root, count, red, input))
}

/// Can a region reduce `count` elements with `red`: some bytes, of a contiguous datatype (the
/// same at every member, so all decide alike) whose element fits an area?
fn reducible(red: &Reducer, count: usize) -> bool {
    count > 0 && contiguous_from_zero(&red.dt, count) && red.dt.size <= AREA && red.dt.size > 0
}

/// MPI_Reduce (`root` Some) and MPI_Allreduce (None).
#[allow(clippy::too_many_arguments)]
unsafe fn reduce(
    comm: CommId,
    sbuf: *const u8,
    rbuf: *mut u8,
    count: i64,
    dt: DtypeId,
    op: u32,
    root: Option<i32>,
) -> Option<Result<()>> {
    let coll = reduction(root);
    let (n, me, root, count, red, input, direct_from, w) =
        prepared!(with(|e| -> Result<Option<_>> {
            let Some((n, me)) = eligible(e, comm) else {
                return Ok(None);
            };
            let (root, count, red, input) = reduce_args(e, n, me, sbuf, rbuf, count, dt, op, root)?;
            if !reducible(&red, count) || !e.coll_choose_shm(coll, n, count * red.dt.size) {
                return Ok(None);
            }
            let direct_from = e.cfg.coll_shm_reduce_direct as usize;
            let w = Watch::take(e, comm)?;
            Ok(Some((n, me, root, count, red, input, direct_from, w)))
        })
        .and_then(|x| x));
    let s = region_or_decline!(comm, w);
    Some(s.serve(|| {
        let mut idle = idler(Some(w))?;
        let job = LocalReduce {
            n,
            me,
            root,
            input,
            rbuf,
            count,
        };
        reduce_local(&s, job, &red, &mut idle, direct_from)
    }))
}

/// One member's part in a reduction over a region's `n` members: `count` elements at `input`,
/// the result into `rbuf` at member `root` (Some) or at every member (None).
#[derive(Debug, Clone, Copy)]
pub(super) struct LocalReduce {
    pub n: usize,
    pub me: usize,
    pub root: Option<usize>,
    pub input: *const u8,
    pub rbuf: *mut u8,
    pub count: usize,
}

/// [`reduce_direct`] where the region allows it and each member's part has at least
/// `direct_from` bytes (`coll_shm_reduce_direct`, 0: never), else [`reduce_chunks`].
///
/// # Safety
/// As for [`reduce_chunks`].
pub(super) unsafe fn reduce_local(
    s: &ShmComm,
    job: LocalReduce,
    red: &Reducer,
    idle: &mut impl FnMut() -> Result<()>,
    direct_from: usize,
) -> Result<()> {
    if s.direct && direct_from > 0 && job.count * red.dt.size / job.n >= direct_from {
        reduce_direct(s, job, red, idle)
    } else {
        reduce_chunks(s, job, red, idle)
    }
}

/// Reduce `count` elements at `input` of the region's `n` members, in rank order, into
/// `rbuf` at member `root` (Some) or at every member (None), a chunk of one area per
/// generation. `rbuf` may be `input` (MPI_IN_PLACE): a chunk's input is copied into the
/// member's area before any of its result is written.
///
/// # Safety
/// `input` holds `count` elements of the reducer's contiguous datatype, and so does `rbuf`
/// where it receives.
unsafe fn reduce_chunks(
    s: &ShmComm,
    LocalReduce {
        n,
        me,
        root,
        input,
        rbuf,
        count,
    }: LocalReduce,
    red: &Reducer,
    idle: &mut impl FnMut() -> Result<()>,
) -> Result<()> {
    let r = s.region.as_ref().expect("checked");
    let ext = red.dt.size;
    let per = AREA / ext;
    let receives = root.is_none_or(|x| x == me);
    let coll = reduction(root);
    let mut e0 = 0;
    while e0 < count {
        let c = per.min(count - e0);
        let bytes = c * ext;
        let g = s.next();
        let out = rbuf.wrapping_add(e0 * ext);
        r.wait_free(g, idle)?;
        let sig = (e0 == 0).then(|| s.announce(Sig::reduction(g, coll, count * ext, &red.op)));
        crate::mem::copy(input.add(e0 * ext), r.area(me, g), bytes);
        r.set(me, Flag::Published, g);
        if bytes >= PARTS_FROM && c >= n {
            // Member k reduces part k of the chunk into the result area.
            let (lo, hi) = (c * me / n, c * (me + 1) / n);
            r.wait_all(Flag::Published, g, idle)?;
            if let Some(sig) = sig {
                s.agree_all(sig)?;
            }
            if hi > lo {
                let at = |i: usize| r.area(i, g).add(lo * ext) as *const u8;
                reduce_all(red, at, n, r.result(g).add(lo * ext), hi - lo);
            }
            r.set(me, Flag::Reduced, g);
            if receives {
                r.wait_all(Flag::Reduced, g, idle)?;
                crate::mem::copy(r.result(g), out, bytes);
            }
        } else if receives {
            r.wait_all(Flag::Published, g, idle)?;
            if let Some(sig) = sig {
                s.agree_all(sig)?;
            }
            reduce_all(red, |i| r.area(i, g) as *const u8, n, out, c);
        }
        r.set(me, Flag::Done, g);
        e0 += c;
    }
    Ok(())
}

/// Elements of each operand (and of the result) a member of [`reduce_direct`] holds at once:
/// about 1 MiB over all members, at most 128 KiB and at least 16 KiB or one element each, so a
/// step's operands stay in the core's L2 cache while each system call moves as much as it can.
/// At two members, 1 MiB of doubles: 112-131 us with steps of 128 KiB, 141-162 with 64 KiB,
/// 160-187 with 32 KiB.
fn direct_step(n: usize, ext: usize) -> usize {
    ((1 << 20) / n).clamp(16 << 10, 128 << 10).max(ext) / ext
}

/// Member `k`'s part of `count` elements in [`reduce_direct`]: `[lo, hi)`. A reduce's root
/// takes a share twice the others' (its result needs no copy to another member: at two
/// members, 1 MiB of doubles, 112-131 us against 137-146 with equal parts).
fn direct_part(n: usize, k: usize, root: Option<usize>, count: usize) -> (usize, usize) {
    let weight = |j: usize| if root == Some(j) { 2 } else { 1 };
    let total = n + root.is_some() as usize;
    let before: usize = (0..k).map(weight).sum();
    let lo = count * before / total;
    let hi = count * (before + weight(k)) / total;
    (lo, hi)
}

thread_local! {
    /// The operands and result of [`reduce_direct`]'s steps, kept between calls (taken out
    /// while one runs).
    static DIRECT_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The reduction of [`reduce_chunks`] where each member's part of the buffer has at least
/// `coll_shm_reduce_direct` bytes (each copy below moves at most a part, so the system calls'
/// cost is spread over that many bytes at least), in one generation and without the areas'
/// copies: every member says in its area where its input and (where it receives) its receive
/// buffer are; member k reduces part k of the elements ([`direct_part`]), reading that part of
/// every other member's input straight from its memory (cross-memory attach,
/// `ShmComm::direct`) a step of [`direct_step`] elements at a time into buffers that stay in
/// its cache, combining them in rank order (as [`reduce_all`]), and writing each step's result
/// into the receive buffer of the root (reduce) or of every member (allreduce) the same way.
/// Only member k reads or writes part k of anyone's buffers, so a receive buffer that is also
/// the input (MPI_IN_PLACE) is overwritten only after its step was read. Every member then
/// says whether its copies worked and waits until all have said so: nobody reads or writes
/// its buffers afterwards, and a member that receives fails the call when any part of its
/// result could not be made.
///
/// # Safety
/// As for [`reduce_chunks`]; `s.direct`.
unsafe fn reduce_direct(
    s: &ShmComm,
    LocalReduce {
        n,
        me,
        root,
        input,
        rbuf,
        count,
    }: LocalReduce,
    red: &Reducer,
    idle: &mut impl FnMut() -> Result<()>,
) -> Result<()> {
    let r = s.region.as_ref().expect("checked");
    let ext = red.dt.size;
    let receives = |k: usize| root.is_none_or(|x| x == k);
    let g = s.next();
    r.wait_free(g, idle)?;
    let sig = s.announce(Sig::reduction(g, reduction(root), count * ext, &red.op));
    let words = r.area(me, g) as *mut u64;
    words.write(input as u64);
    words
        .add(1)
        .write(if receives(me) { rbuf as u64 } else { 0 });
    r.set(me, Flag::Published, g);
    r.wait_all(Flag::Published, g, idle)?;
    // Before any member's buffer is read with our count.
    s.agree_all(sig)?;
    let addr = |j: usize, w: usize| (r.area(j, g) as *const u64).add(w).read();

    // Slot j of the scratch holds member j's operand of a step (ours: the step's result),
    // placed at the page offset of the memory it is copied from or to, so the kernel's copy
    // runs at distance 0 (`crate::mem::slow_distance`).
    let per = direct_step(n, ext);
    let slot = per * ext + 4096;
    let mut scratch = DIRECT_SCRATCH.with(|c| c.take());
    if scratch.len() < n * slot {
        scratch = vec![0u8; n * slot];
    }
    let at = |j: usize, other: u64| -> *mut u8 {
        let base = scratch.as_ptr().add(j * slot) as *mut u8;
        base.add((other as usize).wrapping_sub(base as usize) & 4095)
    };
    let in_place = receives(me) && std::ptr::eq(input, rbuf);
    let (lo, hi) = direct_part(n, me, root, count);
    let mut failure: Option<std::io::Error> = None;
    // A receiver other than us: where the step's result goes when our buffer cannot take it,
    // our slot matches its page offset.
    let peer = (0..n).find(|&j| j != me && receives(j));
    let mut ops = [std::ptr::null::<u8>(); 64];
    let mut heap = Vec::new();
    let ops: &mut [*const u8] = if n <= ops.len() {
        &mut ops[..n]
    } else {
        heap.resize(n, std::ptr::null());
        &mut heap
    };
    let mut e0 = lo;
    while e0 < hi && failure.is_none() {
        let c = per.min(hi - e0);
        let (off, bytes) = (e0 * ext, c * ext);
        for (j, op) in ops.iter_mut().enumerate() {
            if j == me {
                *op = input.add(off);
                continue;
            }
            let src = addr(j, 0) + off as u64;
            let tmp = at(j, src);
            if let Err(e) = r.read_direct(j, src, tmp, bytes) {
                failure = Some(e);
                break;
            }
            *op = tmp;
        }
        if failure.is_some() {
            break;
        }
        // The step's result: straight into our receive buffer where it is not an operand,
        // else into our slot; then into every other receiver's buffer.
        let out = if receives(me) && !in_place {
            rbuf.add(off)
        } else {
            at(me, peer.map_or(0, |j| addr(j, 1) + off as u64))
        };
        reduce_all(red, |i| ops[i], n, out, c);
        if in_place {
            crate::mem::copy(out, rbuf.add(off), bytes);
        }
        for t in 1..n {
            let j = (me + t) % n;
            if receives(j) {
                if let Err(e) = r.write_direct(j, addr(j, 1) + off as u64, out, bytes) {
                    failure = Some(e);
                    break;
                }
            }
        }
        e0 += c;
    }
    DIRECT_SCRATCH.with(|c| c.set(scratch));
    r.set_word(me, g, failure.is_some() as u64);
    r.set(me, Flag::Reduced, g);
    r.wait_all(Flag::Reduced, g, idle)?;
    let failed = (0..n).find(|&j| r.word(j, g) != 0);
    r.set(me, Flag::Done, g);
    if let Some(e) = failure {
        return Err(crate::mpi_error!(
            Other,
            "reducing part {me} of the buffers of the communicator's members directly: {e}"
        ));
    }
    match failed {
        Some(j) if receives(me) => Err(crate::mpi_error!(
            Other,
            "member {j} of the communicator's host could not reduce its part directly"
        )),
        _ => Ok(()),
    }
}

/// The collective of a reduction to `root` (Some) or to every member (None).
fn reduction<T>(root: Option<T>) -> Coll {
    if root.is_some() {
        Coll::Reduce
    } else {
        Coll::Allreduce
    }
}

/// The collective of an exchange ([`exchange`]): alltoall or allgather.
fn exchanged(alltoall: bool) -> Coll {
    if alltoall {
        Coll::Alltoall
    } else {
        Coll::Allgather
    }
}

/// `count` elements of `d` are `count * size` bytes from the buffer's address itself.
fn contiguous_from_zero(d: &Datatype, count: usize) -> bool {
    d.contig && d.contiguous_span(count) == Some(0)
}

/// Copy bytes `[off, off + len)` of the packed form of `count` elements of `d` at `buf` to
/// `out`.
///
/// # Safety
/// `buf` holds `count` elements of `d`; `out` has room for `len` bytes; the window lies
/// inside the packed form.
unsafe fn pack_part(
    d: &Datatype,
    buf: *const u8,
    count: usize,
    off: usize,
    out: *mut u8,
    len: usize,
) {
    match d.contiguous_span(count) {
        Some(o) => crate::mem::copy(buf.offset(o).add(off), out, len),
        None => {
            d.pack_window(buf, count, off, std::slice::from_raw_parts_mut(out, len));
        }
    }
}

/// The converse of [`pack_part`]: bytes `[off, off + len)` of the packed form, at `src`, into
/// `count` elements of `d` at `buf`.
///
/// # Safety
/// As for [`pack_part`], with `buf` writable.
unsafe fn unpack_part(
    d: &Datatype,
    buf: *mut u8,
    count: usize,
    off: usize,
    src: *const u8,
    len: usize,
) {
    match d.contiguous_span(count) {
        Some(o) => crate::mem::copy(src, buf.offset(o).add(off), len),
        None => {
            d.unpack_window(std::slice::from_raw_parts(src, len), off, buf, count);
        }
    }
}

/// MPI_Allgather (`alltoall` false) and MPI_Alltoall with one count and datatype per side:
/// every member packs its block (allgather) or its n blocks (alltoall) into its area, chunk
/// by chunk of each block, and unpacks the block meant for it from every member's area.
/// MPI_IN_PLACE works because a member has copied all of a chunk's data into its area before
/// it writes that chunk's bytes of the receive buffer.
unsafe fn exchange(
    comm: CommId,
    sbuf: *const u8,
    (scount, sdt): (i64, DtypeId),
    rbuf: *mut u8,
    (rcount, rdt): (i64, DtypeId),
    alltoall: bool,
) -> Option<Result<()>> {
    let coll = exchanged(alltoall);
    let (n, me, blk, send, rcount, rd, direct_from, w, bad) =
        prepared!(with(|e| -> Result<Option<_>> {
            let Some((n, me)) = eligible(e, comm) else {
                return Ok(None);
            };
            let rcount = count_of(rcount, "recvcount")?;
            let rd = e.coll_dtype(rdt)?;
            let blk = rcount * rd.size;
            let rext = rd.extent();
            // The whole receive buffer: n blocks.
            check_buf(rbuf, rcount * n, &rd, "receive buffer")?;
            // Where the data we send is: (buffer, count, datatype, distance between blocks).
            let mut bad = None;
            let send = if in_place(sbuf) {
                (
                    rbuf as *const u8,
                    rcount,
                    rd.clone(),
                    rcount as isize * rext,
                )
            } else {
                let scount = count_of(scount, "sendcount")?;
                let sd = e.coll_dtype(sdt)?;
                check_buf(sbuf, scount, &sd, "send buffer")?;
                no_alias(sbuf, rbuf, scount * sd.size)?;
                if !alltoall {
                    let own = rbuf.wrapping_offset(me as isize * rcount as isize * rext);
                    no_alias_own(sbuf, own, scount * sd.size)?;
                }
                if scount * sd.size != blk {
                    // The receive side decides the path, alike at every member: this one
                    // takes it too and gives the call up there (below), so that the others
                    // fail with it rather than wait, and all count the same generations.
                    bad = Some(crate::mpi_error!(
                        Truncate,
                        "{} sends {} bytes per block and receives {blk}: the type signatures \
                         differ",
                        coll.name(),
                        scount * sd.size
                    ));
                }
                let step = scount as isize * sd.extent();
                (sbuf, scount, sd, step)
            };
            if blk == 0 || (alltoall && n > AREA) || !e.coll_choose_shm(coll, n, blk) {
                return bad.map_or(Ok(None), Err);
            }
            let direct_from = if alltoall {
                e.cfg.coll_shm_alltoall_direct as usize
            } else if n <= ALLGATHER_DIRECT_MEMBERS {
                e.cfg.coll_shm_allgather_direct as usize
            } else {
                0
            };
            let w = Watch::take(e, comm)?;
            Ok(Some((n, me, blk, send, rcount, rd, direct_from, w, bad)))
        })
        .and_then(|x| x));
    let s = match region(comm, Some(w)) {
        Ok(Some(s)) => s,
        Ok(None) => return bad.map(Err),
        Err(e) => return Some(Err(e)),
    };
    if let Some(err) = bad {
        return Some(s.serve(|| {
            s.next();
            Err(err)
        }));
    }
    if s.direct && direct_from > 0 && blk >= direct_from {
        let args = Exchange {
            send,
            rbuf,
            rcount,
            rd,
            in_place: in_place(sbuf),
            alltoall,
        };
        return Some(s.serve(|| exchange_direct(&s, n, me, blk, &args, w)));
    }
    Some(s.serve(|| {
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(Some(w))?;
        let (sp, sc, sd, sstep) = send;
        let rstep = rcount as isize * rd.extent();
        let in_place_gather = !alltoall && in_place(sbuf);
        let nb = if alltoall { n } else { 1 };
        let per = AREA / nb;
        let mut off = 0;
        while off < blk {
            let len = per.min(blk - off);
            let g = s.next();
            r.wait_free(g, &mut idle)?;
            let sig = (off == 0).then(|| s.announce(Sig::new(g, coll, blk)));
            let mine = r.area(me, g);
            if alltoall {
                for k in 0..n {
                    pack_part(
                        &sd,
                        sp.offset(k as isize * sstep),
                        sc,
                        off,
                        mine.add(k * len),
                        len,
                    );
                }
            } else {
                let own = if in_place(sbuf) {
                    sp.offset(me as isize * sstep)
                } else {
                    sp
                };
                pack_part(&sd, own, sc, off, mine, len);
            }
            r.set(me, Flag::Published, g);
            // Start with our own block and go round, so members do not all read one area.
            for t in 0..n {
                let j = (me + t) % n;
                if j == me && in_place_gather {
                    continue;
                }
                r.wait(|r| r.reached(j, Flag::Published, g), &mut idle)?;
                if let (Some(sig), true) = (sig, j != me) {
                    s.agree(j, sig)?;
                }
                let src = r.area(j, g).add(if alltoall { me * len } else { 0 });
                unpack_part(&rd, rbuf.offset(j as isize * rstep), rcount, off, src, len);
            }
            r.set(me, Flag::Done, g);
            off += len;
        }
        Ok(())
    }))
}

/// The arguments of an alltoall ([`exchange`]): the send side as (buffer, count, datatype,
/// distance between blocks), for MPI_IN_PLACE the receive buffer.
struct Exchange {
    send: (*const u8, usize, Arc<Datatype>, isize),
    rbuf: *mut u8,
    rcount: usize,
    rd: Arc<Datatype>,
    in_place: bool,
    alltoall: bool,
}

/// Regions of at most this many members read allgather blocks of at least
/// `coll_shm_allgather_direct` bytes straight from their senders ([`exchange_direct`]). Direct
/// reads save a member only its own copy into the areas, 1/n of its copying: at two members,
/// 64 KiB, they win (session 49, the 2-core machine: see `bench/README.md`), at 16 ranks they
/// lost (16-core machine, 2026-11-27, 1 MiB: 4471-4632 against 3408-3416 us).
const ALLGATHER_DIRECT_MEMBERS: usize = 4;

/// The allgather or alltoall of [`exchange`] for blocks of at least
/// `coll_shm_allgather_direct` or `coll_shm_alltoall_direct` bytes (`blk` each), in one
/// generation and without the areas' copies: every member says in its area where its blocks
/// are and reads the block meant for it straight from every other member's memory
/// (cross-memory attach, `ShmComm::direct`), starting with its next member so that readers
/// spread over the members. An alltoall member publishes its send buffer (n blocks a step
/// apart), or a packed copy of it when a block is not contiguous or MPI_IN_PLACE will
/// overwrite them; an allgather member its one block (step 0), from its send buffer, from its
/// own block of the receive buffer under MPI_IN_PLACE (nobody writes that one), or packed. It
/// returns once every member is done, since they read its memory. Alltoall measured on the
/// 16-core machine (2026-11-27, 16 ranks): 52-55 us at 16 KiB against 78-82 through the
/// point-to-point exchanges and MPICH.
///
/// # Safety
/// As for [`exchange`].
unsafe fn exchange_direct(
    s: &ShmComm,
    n: usize,
    me: usize,
    blk: usize,
    x: &Exchange,
    w: Watch,
) -> Result<()> {
    let r = s.region.as_ref().expect("checked");
    let mut idle = idler(Some(w))?;
    let (sp, sc, ref sd, sstep) = x.send;
    let rstep = x.rcount as isize * x.rd.extent();
    // The blocks we send: the first one and the distance between them (alltoall), or our one
    // block (allgather: under MPI_IN_PLACE, ours in the receive buffer).
    let (first, blocks, step) = match (x.alltoall, x.in_place) {
        (true, _) => (sp, n, sstep),
        (false, true) => (sp.offset(me as isize * sstep), 1, 0),
        (false, false) => (sp, 1, 0),
    };
    let span = if x.alltoall && x.in_place {
        None
    } else {
        sd.contiguous_span(sc)
    };
    let mut packed = Vec::new();
    let (addr, step) = match span {
        Some(o) => (first.offset(o) as u64, step as i64),
        None => {
            packed.reserve_exact(blocks * blk);
            for k in 0..blocks {
                sd.pack(first.offset(k as isize * step), sc, &mut packed);
            }
            (
                packed.as_ptr() as u64,
                if x.alltoall { blk as i64 } else { 0 },
            )
        }
    };
    let g = s.next();
    r.wait_free(g, &mut idle)?;
    let sig = s.announce(Sig::new(g, exchanged(x.alltoall), blk));
    let words = r.area(me, g) as *mut u64;
    words.write(addr);
    words.add(1).write(step as u64);
    r.set(me, Flag::Published, g);
    let mut failure = None;
    // Our own block: in place already, or a local copy.
    if !x.in_place {
        let own = if x.alltoall {
            sp.offset(me as isize * sstep)
        } else {
            sp
        };
        if let Err(e) = super::sched::copy_between(
            own,
            sc,
            sd,
            x.rbuf.offset(me as isize * rstep),
            x.rcount,
            &x.rd,
        ) {
            failure = Some(e);
        }
    }
    let what = if x.alltoall {
        "an alltoall"
    } else {
        "an allgather"
    };
    for t in 1..n {
        let j = (me + t) % n;
        r.wait(|q| q.reached(j, Flag::Published, g), &mut idle)?;
        // Before its memory is read with our block size.
        s.agree(j, sig)?;
        let w = r.area(j, g) as *const u64;
        let (addr, step) = (w.read(), w.add(1).read() as i64);
        let at = addr.wrapping_add((me as i64).wrapping_mul(step) as u64);
        let b = Blk::new(x.rbuf.offset(j as isize * rstep), x.rcount, &x.rd);
        if let Err(e) = read_direct(r, j, at, &b, blk) {
            failure.get_or_insert(crate::mpi_error!(
                Other,
                "reading {what} block from member {j} of the communicator's host directly: {e}"
            ));
        }
    }
    r.set(me, Flag::Done, g);
    // The others read our memory: it may change (or be freed) only once all are done.
    r.wait_all(Flag::Done, g, &mut idle)?;
    drop(packed);
    failure.map_or(Ok(()), Err)
}

/// The bytes `[off, off + len)` of block `b`'s packed form that lie inside its first `upto`
/// bytes: how many there are (0 past the end).
fn part_len(upto: usize, off: usize) -> usize {
    upto.saturating_sub(off).min(AREA)
}

/// Pack bytes `[off, off + len)` of block `b` into `out`.
///
/// # Safety
/// As for [`pack_part`].
unsafe fn pack_blk(b: &Blk, off: usize, out: *mut u8, len: usize) {
    if len > 0 {
        pack_part(&b.dt, b.ptr, b.count, off, out, len);
    }
}

/// Unpack `len` bytes at `src` as bytes `[off, off + len)` of block `b`.
///
/// # Safety
/// As for [`unpack_part`].
unsafe fn unpack_blk(b: &Blk, off: usize, src: *const u8, len: usize) {
    if len > 0 {
        unpack_part(&b.dt, b.ptr, b.count, off, src, len);
    }
}

/// A scatter (not v) root's word when its blocks lie in its area at j times the block length
/// (the low bits); otherwise its word is 0 and the header says how the blocks go.
const UNIFORM: u64 = 1 << 63;

/// A scatter's header word 0 when the members read their blocks from the root's buffer
/// (then words 1 + 2j and 2 + 2j hold block j's length and address there) ...
const DIRECT: u64 = u64::MAX;
/// ... or from the root's area, where the blocks lie one after another (word 2 + 2j: block
/// j's offset). Otherwise word 0 holds the number of generations and word 1 + j block j's
/// length, and block j lies in member j's areas.
const PACKED: u64 = u64::MAX - 1;

/// A scatter whose largest block has at least this many bytes has its members read their
/// blocks from the root's buffer where they can (`ShmComm::direct`). Measured at 16 ranks on
/// the 16-core machine (2026-11-27), forced shm: 28 against 35 us at 16 KiB, 60 against 145 at
/// 64 KiB, but 14 against 12 at 4 KiB (the root waits for every reader before it returns).
const DIRECT_FROM: usize = 16384;

/// A scatter whose blocks are at most this long and fit one area together puts them all in
/// the root's area (fewer lines for the root to write: 1.55-1.76 against 1.77-1.83 us at 8 B,
/// 16 ranks, with the header; at 1 KiB the members' own areas were 5% faster). The blocks of
/// a scatter (not v) then need no header either ([`UNIFORM`]).
const PACKED_UPTO: usize = 256;

/// Read `len` bytes at `addr` in member `r`'s memory into block `b` (through a buffer of ours
/// when `b` is not contiguous).
///
/// # Safety
/// `b` describes memory of ours that nothing else touches meanwhile.
unsafe fn read_direct(
    reg: &NodeRegion,
    r: usize,
    addr: u64,
    b: &Blk,
    len: usize,
) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    match b.dt.contiguous_span(b.count) {
        Some(o) => reg.read_direct(r, addr, b.ptr.offset(o), len),
        None => {
            let mut tmp = vec![0u8; len];
            reg.read_direct(r, addr, tmp.as_mut_ptr(), len)?;
            unpack_blk(b, 0, tmp.as_ptr(), len);
            Ok(())
        }
    }
}

/// The bytes of a v-form call that the decision table is asked about: a member knows only its
/// own count, and every member must decide alike, so the v forms of gather and scatter ask
/// for 0 bytes (the built-in rules for them start at 0).
pub const V_BYTES: usize = 0;

/// MPI_Gather(v) (`gather` true) and MPI_Scatter(v): `own` is a member's own block (the send
/// side of a gather, the receive side of a scatter), `many` the root's n blocks.
///
/// The root decides how many generations the call takes (its largest block in areas, at least
/// one) and says so in the result area of the first, with the length of every block for a
/// scatter; the others read it there. Gather: every member but the root packs its block,
/// an area per generation, into its own area and publishes its length in its word; the root
/// unpacks each into its block. A member of a gather (not v) whose block fits one area does
/// not wait for the root's word: it takes one generation, and so does the root whenever any
/// member sent that little (the type signatures agree, so then every block fits; if they do
/// not, the root reports the truncation). Scatter: small blocks that fit one area together go
/// into the root's area ([`UNIFORM`], or [`PACKED`] for the v form); large ones the members
/// read from the root's buffer where the region allows direct reads ([`DIRECT`]); otherwise
/// the root packs block j, an area per
/// generation, into member j's area (the root writes the others' areas here: every area of a
/// ring position is free once all are done with the generation that used it last, see
/// `NodeRegion::wait_free`) and each member unpacks its own. The root's own block is copied
/// directly. A block longer than the one it meets is a truncation error at the receiver,
/// after the call has run its course everywhere (so nobody waits for a member that gave up,
/// and every member counts the same generations).
unsafe fn rooted(
    comm: CommId,
    own: (*const u8, i64, DtypeId),
    many: (*const u8, &Counts, DtypeId),
    root: i32,
    v: bool,
    gather: bool,
) -> Option<Result<()>> {
    let coll = if gather { Coll::Gather } else { Coll::Scatter };
    let names = if gather {
        ["send", "recv"]
    } else {
        ["recv", "send"]
    };
    let (n, me, root, r, w) = prepared!(with(|e| -> Result<Option<_>> {
        let Some((n, me)) = eligible(e, comm) else {
            return Ok(None);
        };
        let root = check_root(root, n)?;
        // Decide before the blocks are built and checked where the block's size is known
        // already (two processes, say, decline here at the cost of the decision alone).
        let early = if v {
            None
        } else {
            block_bytes(e, me, root, own, many)
        };
        if let Some(b) = early {
            if b == 0 || !e.coll_choose_shm(coll, n, b) {
                return Ok(None);
            }
        }
        let r = Rooted::check(e, own, many, me, root, n, names)?;
        let bytes = match (v, r.blk) {
            (false, Some(b)) => b,
            (false, None) => return Ok(None),
            (true, _) => V_BYTES,
        };
        // The scatter's header holds 2n + 1 words.
        if (!v && bytes == 0)
            || (2 * n + 1) * 8 > AREA
            || (early != Some(bytes) && !e.coll_choose_shm(coll, n, bytes))
        {
            return Ok(None);
        }
        Ok(Some((n, me, root, r, Watch::take(e, comm)?)))
    })
    .and_then(|x| x));
    let s = region_or_decline!(comm, w);
    Some(s.serve(|| {
        let reg = s.region.as_ref().expect("checked");
        let mut idle = idler(Some(w))?;
        let g0 = s.next();
        // The members of a scatter write no area, word or result (the root writes all of them),
        // so only its root waits until generation g0's ring position is free: the members
        // would otherwise each read every member's flags at every call.
        if gather || me == root {
            reg.wait_free(g0, &mut idle)?;
        }
        let head = reg.result(g0) as *mut u64;
        let mut failure = None;
        // The root's own block first (it takes no area).
        if me == root {
            if let Some(o) = &r.own {
                let m = &r.many[root];
                let copied = if gather {
                    super::sched::copy_between(o.ptr, o.count, &o.dt, m.ptr, m.count, &m.dt)
                } else {
                    super::sched::copy_between(m.ptr, m.count, &m.dt, o.ptr, o.count, &o.dt)
                };
                if let Err(e) = copied {
                    failure = Some(e);
                }
            }
        }
        if me == root {
            let most = r.many.iter().map(Blk::bytes).max().unwrap_or(0);
            let mut gens = most.div_ceil(AREA).max(1);
            // Gather: the length each member sent, read in the first generation.
            let mut sent = vec![0usize; n];
            if gather {
                for t in 1..n {
                    let j = (root + t) % n;
                    reg.wait(|x| x.reached(j, Flag::Published, g0), &mut idle)?;
                    s.intact(j, g0)?;
                    sent[j] = reg.word(j, g0) as usize;
                    let b = &r.many[j];
                    unpack_blk(b, 0, reg.area(j, g0), part_len(sent[j].min(b.bytes()), 0));
                }
                // A gather (not v) whose block fits one area takes one generation at every
                // member without asking the root; if any member sent that little, all do.
                if !v && (0..n).any(|j| j != root && sent[j] <= AREA) {
                    gens = 1;
                }
            }
            // A scatter (not v) of small blocks: all of them in our area at j times the block
            // length, which our word says (the members need neither the header nor their
            // own areas).
            if !gather && !v && most <= PACKED_UPTO && n * most <= AREA {
                let area = reg.area(me, g0);
                for (j, b) in r.many.iter().enumerate() {
                    if j != root {
                        pack_blk(b, 0, area.add(j * most), b.bytes());
                    }
                }
                reg.set_word(me, g0, UNIFORM | most as u64);
                reg.set(me, Flag::Published, g0);
                reg.set(me, Flag::Done, g0);
                return failure.map_or(Ok(()), Err);
            }
            if !gather {
                reg.set_word(me, g0, 0);
            }
            // A scatter's blocks the members read straight from the root's buffer, or, when
            // they all fit one area together, from the root's area.
            let direct = !gather && s.direct && most >= DIRECT_FROM;
            let packed = !gather
                && most <= PACKED_UPTO
                && r.many.iter().map(Blk::bytes).sum::<usize>() <= AREA;
            let layout = if direct {
                r.many
                    .iter()
                    .map(|b| b.dt.contiguous_span(b.count))
                    .collect::<Option<Vec<_>>>()
            } else {
                None
            };
            if let Some(spans) = layout {
                head.write(DIRECT);
                for (j, (b, o)) in r.many.iter().zip(spans).enumerate() {
                    head.add(1 + 2 * j).write(b.bytes() as u64);
                    head.add(2 + 2 * j).write(b.ptr.offset(o) as u64);
                }
                reg.set(me, Flag::Published, g0);
                reg.set(me, Flag::Done, g0);
                // The members read our buffer: it may change only once all are done.
                reg.wait_all(Flag::Done, g0, &mut idle)?;
                return failure.map_or(Ok(()), Err);
            }
            if packed {
                head.write(PACKED);
                let area = reg.area(me, g0);
                let mut at = 0;
                for (j, b) in r.many.iter().enumerate() {
                    head.add(1 + 2 * j).write(b.bytes() as u64);
                    head.add(2 + 2 * j).write(at as u64);
                    if j != root {
                        pack_blk(b, 0, area.add(at), b.bytes());
                        at += b.bytes();
                    }
                }
                reg.set(me, Flag::Published, g0);
                reg.set(me, Flag::Done, g0);
                return failure.map_or(Ok(()), Err);
            }
            head.write(gens as u64);
            if !gather {
                for (j, b) in r.many.iter().enumerate() {
                    head.add(1 + j).write(b.bytes() as u64);
                }
            }
            for k in 0..gens {
                let g = if k == 0 { g0 } else { s.next() };
                if k > 0 {
                    reg.wait_free(g, &mut idle)?;
                }
                let off = k * AREA;
                if gather {
                    reg.set(me, Flag::Published, g);
                    for t in 1..n {
                        let j = (root + t) % n;
                        if k == 0 {
                            continue;
                        }
                        reg.wait(|x| x.reached(j, Flag::Published, g), &mut idle)?;
                        let b = &r.many[j];
                        let len = part_len(sent[j].min(b.bytes()), off);
                        unpack_blk(b, off, reg.area(j, g), len);
                    }
                } else {
                    for t in 1..n {
                        let j = (root + t) % n;
                        let b = &r.many[j];
                        pack_blk(b, off, reg.area(j, g), part_len(b.bytes(), off));
                    }
                    reg.set(me, Flag::Published, g);
                }
                reg.set(me, Flag::Done, g);
            }
            if gather && failure.is_none() {
                let short = gens * AREA;
                if let Some((j, b)) = r.many.iter().enumerate().find(|(j, b)| {
                    *j != root && (sent[*j] != b.bytes() || sent[*j].min(b.bytes()) > short)
                }) {
                    failure = Some(block_mismatch(s.ranks[j], sent[j], b.bytes()));
                }
            }
        } else {
            let o = r.own.as_ref().expect("checked at the members");
            let mine = o.bytes();
            if gather {
                // Publish the first part before looking at the root's header.
                reg.set_word(me, g0, mine as u64);
                pack_blk(o, 0, reg.area(me, g0), part_len(mine, 0));
                reg.set(me, Flag::Published, g0);
            }
            // A gather (not v) of one area's block takes one generation: no need to wait for
            // the root (see the root's side).
            let first = if gather && !v && mine <= AREA {
                1
            } else {
                reg.wait(|x| x.reached(root, Flag::Published, g0), &mut idle)?;
                s.intact(root, g0)?;
                let w = reg.word(root, g0);
                if !gather && w & UNIFORM != 0 {
                    let theirs = (w & !UNIFORM) as usize;
                    if theirs != mine {
                        failure = Some(block_mismatch(s.ranks[root], theirs, mine));
                    }
                    let at = reg.area(root, g0).add(me * theirs);
                    unpack_blk(o, 0, at, theirs.min(mine));
                    reg.set(me, Flag::Done, g0);
                    return failure.map_or(Ok(()), Err);
                }
                head.read()
            };
            let theirs = if gather {
                mine
            } else if first == DIRECT || first == PACKED {
                head.add(1 + 2 * me).read() as usize
            } else {
                head.add(1 + me).read() as usize
            };
            if !gather && theirs != mine {
                failure = Some(block_mismatch(s.ranks[root], theirs, mine));
            }
            let len = theirs.min(mine);
            if first == DIRECT || first == PACKED {
                let at = head.add(2 + 2 * me).read();
                if first == PACKED {
                    unpack_blk(o, 0, reg.area(root, g0).add(at as usize), len);
                } else if let Err(e) = read_direct(reg, root, at, o, len) {
                    failure = Some(crate::mpi_error!(
                        Other,
                        "reading a scatter's block from its root (rank {}) directly: {e}",
                        root
                    ));
                }
                reg.set(me, Flag::Done, g0);
                return failure.map_or(Ok(()), Err);
            }
            let gens = first as usize;
            for k in 0..gens {
                let g = if k == 0 { g0 } else { s.next() };
                let off = k * AREA;
                if gather {
                    if k > 0 {
                        reg.wait_free(g, &mut idle)?;
                        pack_blk(o, off, reg.area(me, g), part_len(mine, off));
                        reg.set(me, Flag::Published, g);
                    }
                } else {
                    if k > 0 {
                        reg.wait(|x| x.reached(root, Flag::Published, g), &mut idle)?;
                    }
                    unpack_blk(o, off, reg.area(me, g), part_len(len, off));
                }
                reg.set(me, Flag::Done, g);
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }))
}

/// The bytes of a block of a gather or scatter (not the v forms) as this process sees them
/// before any check: one of the root's blocks at the root, its own block elsewhere. None
/// where the count or datatype is not valid (the full check then reports it) or the block
/// is MPI_IN_PLACE.
fn block_bytes(
    e: &crate::mpi::engine::Engine,
    me: usize,
    root: usize,
    (obuf, ocount, odt): (*const u8, i64, DtypeId),
    (_, mcounts, mdt): (*const u8, &Counts, DtypeId),
) -> Option<usize> {
    let (count, dt) = if me == root {
        match mcounts {
            Counts::Uniform(c) => (*c, mdt),
            Counts::Varied { .. } => return None,
        }
    } else if in_place(obuf) {
        return None;
    } else {
        (ocount, odt)
    };
    let d = e.dtype(dt).ok()?;
    usize::try_from(count).ok()?.checked_mul(d.size)
}

/// MPI_Allgatherv: as the allgather of [`exchange`], with blocks of their own lengths (every
/// member knows all counts, so all count the same generations: the largest block in areas).
unsafe fn allgatherv(
    comm: CommId,
    sbuf: *const u8,
    (scount, sdt): (i64, DtypeId),
    rbuf: *mut u8,
    rcounts: &Counts,
    rdt: DtypeId,
) -> Option<Result<()>> {
    let (me, recv, own, w) = prepared!(with(|e| -> Result<Option<_>> {
        let Some((n, me)) = eligible(e, comm) else {
            return Ok(None);
        };
        let recv = blocks(e, rbuf, rcounts, &Types::One(rdt), n, "receive buffer")?;
        let own = if in_place(sbuf) {
            None
        } else {
            let o = own_blk(e, sbuf, scount, sdt, "send")?;
            no_alias(sbuf, rbuf, o.bytes())?;
            no_alias_own(sbuf, recv[me].ptr, o.bytes())?;
            if o.bytes() != recv[me].bytes() {
                return err!(
                    Truncate,
                    "this process sends {} bytes and its block receives {}",
                    o.bytes(),
                    recv[me].bytes()
                );
            }
            Some(o)
        };
        let most = recv.iter().map(Blk::bytes).max().unwrap_or(0);
        if most == 0 || !e.coll_choose_shm(Coll::Allgather, n, avg_bytes(&recv)) {
            return Ok(None);
        }
        Ok(Some((me, recv, own, Watch::take(e, comm)?)))
    })
    .and_then(|x| x));
    let s = region_or_decline!(comm, w);
    Some(s.serve(|| {
        let r = s.region.as_ref().expect("checked");
        let mut idle = idler(Some(w))?;
        let n = recv.len();
        let most = recv.iter().map(Blk::bytes).max().unwrap_or(0);
        let src = own.as_ref().unwrap_or(&recv[me]);
        for k in 0..most.div_ceil(AREA) {
            let off = k * AREA;
            let g = s.next();
            r.wait_free(g, &mut idle)?;
            pack_blk(src, off, r.area(me, g), part_len(src.bytes(), off));
            r.set(me, Flag::Published, g);
            for t in 0..n {
                let j = (me + t) % n;
                if j == me && own.is_none() {
                    continue;
                }
                r.wait(|x| x.reached(j, Flag::Published, g), &mut idle)?;
                if k == 0 {
                    s.intact(j, g)?;
                }
                let b = &recv[j];
                unpack_blk(b, off, r.area(j, g), part_len(b.bytes(), off));
            }
            r.set(me, Flag::Done, g);
        }
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_the_generation_the_collective_and_the_bytes() {
        let s = Sig::new(0x1_2345, Coll::Alltoall, 1_600_000);
        assert_eq!(
            (s.g, s.gen(), s.coll(), s.bytes()),
            (0x1_2345, 0x2345, Coll::Alltoall, 1_600_000)
        );
        for c in Coll::ALL {
            assert_eq!(Sig::new(9, c, 8).coll(), c);
        }
        assert_ne!(Sig::new(7, Coll::Bcast, 8), Sig::new(7, Coll::Allreduce, 8));
        assert_ne!(Sig::new(7, Coll::Bcast, 8), Sig::new(7, Coll::Bcast, 16));
        assert_eq!(Sig::new(7, Coll::Bcast, usize::MAX).bytes(), SIG_BYTES);
        assert_eq!(mpi_name(Coll::ReduceScatter), "MPI_Reduce_scatter");
    }

    /// Two members of one region, as two processes would see it.
    fn pair(tag: &str) -> (ShmComm, ShmComm) {
        let job = format!("shmtest{}{tag}", std::process::id());
        let mut a = NodeRegion::create(&job, Gpid::new(1), 1, 2, AREA, 2).unwrap();
        let b = NodeRegion::open(&job, &a.desc().unwrap(), 2, AREA, 2).unwrap();
        a.unlink();
        let member = |r, me| ShmComm {
            region: Some(r),
            gen: AtomicU64::new(0),
            me,
            ranks: vec![0, 1],
            direct: false,
        };
        (member(a, 0), member(b, 1))
    }

    /// A member whose call fails before its part is done leaves every generation the call
    /// took as a finished call would, with a signature saying so where it announced none;
    /// the other, waiting in the same call, then fails too, and the next call meets.
    #[test]
    fn a_call_given_up_leaves_its_generations_and_says_so() {
        let (a, b) = pair("gaveup");
        let ra = a.region.as_ref().unwrap();
        let rb = b.region.as_ref().unwrap();
        // `a` fails before announcing (a member took another path, say).
        let e = a.serve(|| {
            let g = a.next();
            assert_eq!(g, 1);
            err!(Other, "seen a message of this call")
        });
        assert!(e.is_err());
        for f in [Flag::Published, Flag::Reduced, Flag::Done] {
            assert!(rb.reached(0, f, 1), "{f:?}");
        }
        // `b`, in the same call (a bcast whose root `a` is), sees the flag and the signature.
        let e = b
            .serve(|| {
                let g = b.next();
                assert!(rb.reached(0, Flag::Published, g));
                b.agree(0, b.announce(Sig::new(g, Coll::Bcast, 8)))
            })
            .unwrap_err();
        assert!(
            e.msg
                .contains("rank 0 of the communicator gave this call up"),
            "{}",
            e.msg
        );
        assert!(ra.reached(1, Flag::Done, 1), "b left generation 1 too");
        // A gather's member checks the root the same way.
        assert!(b.intact(0, 1).is_err());
        // The next call meets at generation 2 and agrees.
        let (ga, gb) = (a.next(), b.next());
        assert_eq!((ga, gb), (2, 2));
        let (sa, sb) = (
            a.announce(Sig::new(ga, Coll::Barrier, 0)),
            b.announce(Sig::new(gb, Coll::Barrier, 0)),
        );
        assert!(a.agree(1, sa).is_ok() && b.agree(0, sb).is_ok() && b.intact(0, 2).is_ok());
        // A call that finished its part before reporting its error (a block longer than its
        // buffer) leaves its signature alone.
        let e = a.serve(|| {
            let g = a.next();
            a.announce(Sig::new(g, Coll::Scatter, 4));
            ra.set(0, Flag::Published, g);
            ra.set(0, Flag::Done, g);
            err!(Truncate, "a block longer than the buffer")
        });
        assert!(e.is_err());
        assert_eq!(rb.sig(0, 3), Sig::new(3, Coll::Scatter, 4).word);
        assert!(!rb.reached(0, Flag::Reduced, 3), "flags not touched");
    }

    /// A member of a broadcast whose length differs from the root's (over several areas)
    /// takes the root's generations without reading them and fails after; the next call
    /// meets, and a member expecting more than the root sends does the same.
    #[test]
    fn a_broadcast_of_another_length_keeps_the_region_in_step() {
        let (a, b) = pair("follow");
        let d = super::super::byte_type();
        let yield_now = || -> Result<()> {
            std::thread::yield_now();
            Ok(())
        };
        for (root_len, member_len) in [(3 * AREA + 5, AREA + 1), (AREA / 2, 2 * AREA)] {
            let mut src: Vec<u8> = (0..root_len).map(|i| i as u8).collect();
            let mut dst = vec![0u8; member_len];
            let (ra, rb) = std::thread::scope(|t| {
                let root = t.spawn(|| {
                    let mut idle = yield_now;
                    // SAFETY: the buffer holds root_len bytes.
                    a.serve(|| unsafe {
                        bcast_chunks(&a, 0, 0, src.as_mut_ptr(), root_len, &d, &mut idle)
                    })
                });
                let mut idle = yield_now;
                // SAFETY: the buffer holds member_len bytes.
                let rb = b.serve(|| unsafe {
                    bcast_chunks(&b, 1, 0, dst.as_mut_ptr(), member_len, &d, &mut idle)
                });
                (root.join().unwrap(), rb)
            });
            assert!(ra.is_ok());
            let e = rb.unwrap_err();
            let want = format!("passes {root_len} bytes and this rank {member_len}");
            assert!(e.msg.contains(&want), "{}", e.msg);
            assert!(dst.iter().all(|&x| x == 0), "nothing read");
            let gens = root_len.div_ceil(AREA) as u64;
            assert_eq!(a.gen.load(Ordering::Relaxed), b.gen.load(Ordering::Relaxed));
            // The next call meets.
            let (ga, gb) = (a.next(), b.next());
            assert_eq!(ga, gb);
            assert!(ga > gens);
            let (sa, sb) = (
                a.announce(Sig::new(ga, Coll::Barrier, 0)),
                b.announce(Sig::new(gb, Coll::Barrier, 0)),
            );
            assert!(a.agree(1, sa).is_ok() && b.agree(0, sb).is_ok());
            for (s, me) in [(&a, 0), (&b, 1)] {
                let r = s.region.as_ref().unwrap();
                r.set(me, Flag::Published, ga);
                r.set(me, Flag::Done, ga);
            }
        }
    }

    #[test]
    fn a_reduction_signature_holds_the_operation_and_a_given_up_call_its_own_code() {
        let sum = Op::Builtin(Builtin::Sum);
        let user = |func| Op::User {
            func,
            big: false,
            commute: true,
        };
        let s = Sig::reduction(0x1_2345, Coll::Allreduce, 1_600_000, &sum);
        assert_eq!(
            (s.gen(), s.coll(), s.bytes(), s.op_name()),
            (0x2345, Coll::Allreduce, 1_600_000, "MPI_SUM")
        );
        for b in Builtin::ALL {
            let r = Sig::reduction(3, Coll::Reduce, 8, &Op::Builtin(b));
            assert_eq!(
                (r.op_name(), r.bytes(), r.coll()),
                (b.name(), 8, Coll::Reduce)
            );
        }
        assert_ne!(
            s,
            Sig::reduction(
                0x1_2345,
                Coll::Allreduce,
                1_600_000,
                &Op::Builtin(Builtin::Prod)
            )
        );
        // User operations' handles are local to each process: any two agree.
        assert_eq!(
            Sig::reduction(5, Coll::Allreduce, 8, &user(1)),
            Sig::reduction(5, Coll::Allreduce, 8, &user(2))
        );
        assert_eq!(Sig::new(5, Coll::Bcast, 8).op_name(), "no operation");
        // Bytes up to 2^39 - 1 keep clear of the operation's bits.
        assert_eq!(
            Sig::reduction(5, Coll::Reduce, usize::MAX, &sum).op_name(),
            "MPI_SUM"
        );
        let gone = Sig::gave_up(0x1_0007);
        assert_eq!(gone.gen(), 7);
        for c in Coll::ALL {
            assert_ne!(gone, Sig::new(0x1_0007, c, 0));
        }
    }

    #[test]
    fn direct_parts_cover_the_elements_once_and_give_the_root_twice_as_many() {
        for n in 1..=17 {
            for count in [0, 1, 2, 5, 16, 1000, 131_073] {
                for root in std::iter::once(None).chain((0..n).map(Some)) {
                    let mut next = 0;
                    for k in 0..n {
                        let (lo, hi) = direct_part(n, k, root, count);
                        assert_eq!(lo, next, "n={n} count={count} root={root:?} k={k}");
                        assert!(hi >= lo);
                        next = hi;
                    }
                    assert_eq!(next, count);
                }
            }
        }
        assert_eq!(direct_part(2, 0, Some(0), 300), (0, 200));
        assert_eq!(direct_part(2, 1, Some(0), 300), (200, 300));
        assert_eq!(direct_part(3, 1, None, 300), (100, 200));
    }

    #[test]
    fn direct_steps_fit_the_cache_and_hold_an_element() {
        assert_eq!(direct_step(2, 8), (128 << 10) / 8);
        assert_eq!(direct_step(16, 8), (64 << 10) / 8);
        assert_eq!(direct_step(256, 8), (16 << 10) / 8);
        assert_eq!(direct_step(2, 40000), 3);
        assert_eq!(direct_step(2, 200_000), 1);
    }
}
