//! Single copy through the transport: a matched rendezvous receive reads the sender's
//! exposed region ([`Transport::get`]) at the next flush, completes when the transport says
//! the read ended, and tells the sender (`Fin`); the sender retracts its region once the
//! receiver is done with it.

use super::*;
use crate::ids::ReqId;

/// A single-copy read waiting for its turn in [`Pml::flush`]: the receive in `slot` reads
/// the message from `from` through the transport.
#[derive(Debug, Clone, Copy)]
pub(super) struct GetJob {
    pub(super) slot: ReqId,
    pub(super) from: Gpid,
    pub(super) sreq: u32,
    pub(super) region: Region,
    /// Bytes already in the receive buffer (the eager prefix), and bytes to take in all.
    pub(super) prefix: usize,
    pub(super) take: usize,
}

impl Pml {
    /// Start the single-copy reads that matched receives queued.
    pub(super) fn start_gets<I: Transport>(&mut self, io: &mut I) {
        for job in std::mem::take(&mut self.gets) {
            let wire = self.reqs.wire_id(job.slot);
            let Some(r) = self.reqs.get_mut(job.slot) else {
                continue;
            };
            if r.recv.state() != RecvState::Receiving {
                continue; // cancelled or failed meanwhile
            }
            // SAFETY: `prefix <= take <= r.len`: inside the receive buffer, which stays valid
            // and untouched until the receive completes, after the read.
            let dst = unsafe { Span::new(r.buf.add(job.prefix), job.take - job.prefix) };
            match io.get(job.from, &job.region, 0, dst, Token(wire)) {
                Ok(Copied::Done) => self.got(job, Ok(())),
                Ok(Copied::Pending) => self.getting.push(job),
                Err(e) => {
                    if self.verbose {
                        eprintln!(
                            "Protean[{}]: single copy from process {} refused ({e}); pipelining instead",
                            self.me, job.from
                        );
                    }
                    if matches!(e, CopyError::Refused(_)) {
                        self.single_copy = false;
                    }
                    // Ask for the data as frames instead.
                    self.outbox.push_back(Ctrl::new(
                        job.from,
                        Frame::Cts {
                            sreq: job.sreq,
                            rreq: wire,
                        },
                    ));
                }
            }
        }
    }

    /// A single-copy read ended: complete the receive and tell the sender.
    pub(super) fn got(&mut self, job: GetJob, result: Result<(), String>) {
        let Some(r) = self.reqs.get_mut(job.slot) else {
            return;
        };
        if let Ok(RecvAction::Complete(o)) = r.recv.fetched() {
            r.status.bytes = o.bytes as u64;
            if o.truncated {
                r.status.error = Some(truncated(r.msg_len, r.len));
            }
        }
        if let Err(e) = result {
            r.status.error = Some(Box::new(MpiError::new(
                ErrorClass::Other,
                format!("single-copy read from process {} failed: {e}", job.from),
            )));
        }
        self.counters.on(self.route(job.from)).single_copy += 1;
        self.outbox
            .push_back(Ctrl::new(job.from, Frame::Fin { sreq: job.sreq }));
        self.finish(job.slot);
    }

    /// A send is done with its exposed region (its receiver finished, or the send ended):
    /// the region is retracted at the next flush, before the transport may reuse what it held
    /// for it.
    pub(super) fn release_region(&mut self, slot: ReqId) {
        let Some(r) = self.reqs.get_mut(slot) else {
            return;
        };
        if !r.exposed {
            return;
        }
        r.exposed = false;
        if let Some(i) = self.exposed.iter().position(|e| e.0 == slot) {
            let (_, peer, region) = self.exposed.swap_remove(i);
            self.retracts.push((peer, region));
        }
    }
}
