//! Messages between `mpirun` and a `protean-proxy`, inside the sealed frames of
//! [`crate::channel`]. One message per frame: a tag byte, then fields (integers big-endian,
//! byte strings as a u32 length and the bytes). Decoding checks every length against what is
//! left of the frame and never panics.

use std::io;

/// What a proxy is to run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Launch {
    /// Job size.
    pub size: u32,
    /// The job id ranks see as PROTEAN_JOBID.
    pub jobid: String,
    /// The global ranks this host runs, in order (their local ranks are their positions).
    pub ranks: Vec<u32>,
    /// Program and arguments.
    pub program: Vec<Vec<u8>>,
    /// Variables for every rank, in order.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// Working directory of the ranks (empty: the proxy's).
    pub wdir: Vec<u8>,
    /// Rank 0 is here and reads what mpirun forwards (else every rank reads /dev/null).
    pub stdin: bool,
    /// Pipe every rank's stdout and stderr to the proxy (always: the output goes to mpirun).
    /// 0 none, 1 core, 2 socket.
    pub bind: u8,
    /// Print each rank's binding on stderr.
    pub report_bindings: bool,
    /// The host's name as mpirun knows it (for messages).
    pub host: String,
    /// The global index of the first process of the job these ranks belong to: a rank's
    /// number in its job (`PMI_RANK`) is its global index minus this (0 for the job mpirun
    /// launched; the spawned job's first index for [`ToProxy::Spawn`]).
    pub first: u32,
    /// Started by MPI_Comm_spawn (`PMI_SPAWNED=1`).
    pub spawned: bool,
}

/// mpirun -> proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToProxy {
    Launch(Launch),
    /// Start processes of a spawned job on this host (after the launch): MPI_Comm_spawn
    /// with an info key naming this host.
    Spawn(Launch),
    /// A PMI message for one rank.
    Pmi {
        rank: u32,
        text: Vec<u8>,
    },
    /// Bytes for rank 0's standard input; empty means end of input.
    Stdin(Vec<u8>),
    /// Deliver this signal to every rank (SIGUSR1, SIGUSR2).
    Signal(i32),
    /// End the ranks: SIGTERM now, SIGKILL after the grace time.
    Terminate,
    /// SIGKILL every rank now.
    Kill,
    /// SIGKILL these ranks (the processes of a spawn that failed on another host); each one
    /// this proxy does not run (never started, or gone) is reported exited at once.
    KillRanks(Vec<u32>),
}

/// proxy -> mpirun.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToMpirun {
    /// A rank started with this pid.
    Started { rank: u32, pid: u32 },
    /// A rank could not be started: mpirun's exit status and why.
    StartFailed {
        rank: u32,
        code: i32,
        message: String,
    },
    /// One PMI message (a framing error is sent as text the server will refuse).
    Pmi { rank: u32, text: Vec<u8> },
    /// Output of a rank.
    Output {
        rank: u32,
        stderr: bool,
        bytes: Vec<u8>,
    },
    /// A rank ended: `signal` 0 means it exited with `code`.
    Exited { rank: u32, code: i32, signal: i32 },
    /// A line for mpirun to print (bindings, warnings).
    Note(String),
    /// Every rank is reaped and nothing of the job is left on this host; the proxy exits.
    Done,
}

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.u32(v as u32)
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
}

struct R<'a>(&'a [u8]);

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "truncated message")
}

impl R<'_> {
    fn u8(&mut self) -> io::Result<u8> {
        let (&b, rest) = self.0.split_first().ok_or_else(short)?;
        self.0 = rest;
        Ok(b)
    }
    fn u32(&mut self) -> io::Result<u32> {
        if self.0.len() < 4 {
            return Err(short());
        }
        let (a, rest) = self.0.split_at(4);
        self.0 = rest;
        Ok(u32::from_be_bytes(a.try_into().expect("4 bytes")))
    }
    fn i32(&mut self) -> io::Result<i32> {
        Ok(self.u32()? as i32)
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        if self.0.len() < n {
            return Err(short());
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(a.to_vec())
    }
    fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "text is not UTF-8"))
    }
    fn count(&mut self) -> io::Result<usize> {
        let n = self.u32()? as usize;
        // Every counted item takes at least 4 bytes: a count cannot exceed what is left.
        if n > self.0.len() / 4 + 1 {
            return Err(short());
        }
        Ok(n)
    }
    fn end(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "trailing bytes after a message",
            ))
        }
    }
}

fn put_launch(w: &mut W, l: &Launch) {
    w.u32(l.size).bytes(l.jobid.as_bytes());
    w.u32(l.ranks.len() as u32);
    for r in &l.ranks {
        w.u32(*r);
    }
    w.u32(l.program.len() as u32);
    for a in &l.program {
        w.bytes(a);
    }
    w.u32(l.env.len() as u32);
    for (k, v) in &l.env {
        w.bytes(k).bytes(v);
    }
    w.bytes(&l.wdir)
        .u8(l.stdin as u8)
        .u8(l.bind)
        .u8(l.report_bindings as u8)
        .bytes(l.host.as_bytes())
        .u32(l.first)
        .u8(l.spawned as u8);
}

fn get_launch(r: &mut R) -> io::Result<Launch> {
    let size = r.u32()?;
    let jobid = r.string()?;
    let n = r.count()?;
    let ranks = (0..n).map(|_| r.u32()).collect::<io::Result<_>>()?;
    let n = r.count()?;
    let program = (0..n).map(|_| r.bytes()).collect::<io::Result<_>>()?;
    let n = r.count()?;
    let env = (0..n)
        .map(|_| Ok((r.bytes()?, r.bytes()?)))
        .collect::<io::Result<_>>()?;
    Ok(Launch {
        size,
        jobid,
        ranks,
        program,
        env,
        wdir: r.bytes()?,
        stdin: r.u8()? != 0,
        bind: r.u8()?,
        report_bindings: r.u8()? != 0,
        host: r.string()?,
        first: r.u32()?,
        spawned: r.u8()? != 0,
    })
}

fn bad_tag(t: u8) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unknown message tag {t}"),
    )
}

impl ToProxy {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        match self {
            ToProxy::Launch(l) => put_launch(w.u8(1), l),
            ToProxy::Spawn(l) => put_launch(w.u8(7), l),
            ToProxy::Pmi { rank, text } => {
                w.u8(2).u32(*rank).bytes(text);
            }
            ToProxy::Stdin(b) => {
                w.u8(3).bytes(b);
            }
            ToProxy::Signal(s) => {
                w.u8(4).i32(*s);
            }
            ToProxy::Terminate => {
                w.u8(5);
            }
            ToProxy::Kill => {
                w.u8(6);
            }
            ToProxy::KillRanks(ranks) => {
                w.u8(8).u32(ranks.len() as u32);
                for &r in ranks {
                    w.u32(r);
                }
            }
        }
        w.0
    }

    pub fn decode(b: &[u8]) -> io::Result<ToProxy> {
        let mut r = R(b);
        let m = match r.u8()? {
            1 => ToProxy::Launch(get_launch(&mut r)?),
            7 => ToProxy::Spawn(get_launch(&mut r)?),
            2 => ToProxy::Pmi {
                rank: r.u32()?,
                text: r.bytes()?,
            },
            3 => ToProxy::Stdin(r.bytes()?),
            4 => ToProxy::Signal(r.i32()?),
            5 => ToProxy::Terminate,
            6 => ToProxy::Kill,
            8 => {
                let n = r.u32()? as usize;
                // Each rank takes 4 bytes: a count the message cannot hold is malformed.
                if n > b.len() / 4 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a kill list longer than its message",
                    ));
                }
                ToProxy::KillRanks((0..n).map(|_| r.u32()).collect::<io::Result<_>>()?)
            }
            t => return Err(bad_tag(t)),
        };
        r.end()?;
        Ok(m)
    }
}

impl ToMpirun {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        match self {
            ToMpirun::Started { rank, pid } => {
                w.u8(1).u32(*rank).u32(*pid);
            }
            ToMpirun::StartFailed {
                rank,
                code,
                message,
            } => {
                w.u8(2).u32(*rank).i32(*code).bytes(message.as_bytes());
            }
            ToMpirun::Pmi { rank, text } => {
                w.u8(3).u32(*rank).bytes(text);
            }
            ToMpirun::Output {
                rank,
                stderr,
                bytes,
            } => {
                w.u8(4).u32(*rank).u8(*stderr as u8).bytes(bytes);
            }
            ToMpirun::Exited { rank, code, signal } => {
                w.u8(5).u32(*rank).i32(*code).i32(*signal);
            }
            ToMpirun::Note(s) => {
                w.u8(6).bytes(s.as_bytes());
            }
            ToMpirun::Done => {
                w.u8(7);
            }
        }
        w.0
    }

    pub fn decode(b: &[u8]) -> io::Result<ToMpirun> {
        let mut r = R(b);
        let m = match r.u8()? {
            1 => ToMpirun::Started {
                rank: r.u32()?,
                pid: r.u32()?,
            },
            2 => ToMpirun::StartFailed {
                rank: r.u32()?,
                code: r.i32()?,
                message: r.string()?,
            },
            3 => ToMpirun::Pmi {
                rank: r.u32()?,
                text: r.bytes()?,
            },
            4 => ToMpirun::Output {
                rank: r.u32()?,
                stderr: r.u8()? != 0,
                bytes: r.bytes()?,
            },
            5 => ToMpirun::Exited {
                rank: r.u32()?,
                code: r.i32()?,
                signal: r.i32()?,
            },
            6 => ToMpirun::Note(r.string()?),
            7 => ToMpirun::Done,
            t => return Err(bad_tag(t)),
        };
        r.end()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let l = Launch {
            size: 6,
            jobid: "12x34".into(),
            ranks: vec![1, 3, 5],
            program: vec![b"./a.out".to_vec(), b"-x".to_vec()],
            env: vec![(b"A".to_vec(), b"1".to_vec()), (b"B".to_vec(), Vec::new())],
            wdir: b"/tmp".to_vec(),
            stdin: true,
            bind: 1,
            report_bindings: true,
            host: "h2".into(),
            first: 0,
            spawned: false,
        };
        let s = Launch {
            first: 6,
            spawned: true,
            ranks: vec![7, 8],
            ..l.clone()
        };
        for m in [
            ToProxy::Launch(l),
            ToProxy::Spawn(s),
            ToProxy::Pmi {
                rank: 3,
                text: b"cmd=barrier_out\n".to_vec(),
            },
            ToProxy::Stdin(Vec::new()),
            ToProxy::Signal(10),
            ToProxy::Terminate,
            ToProxy::Kill,
            ToProxy::KillRanks(vec![7, 9]),
            ToProxy::KillRanks(Vec::new()),
        ] {
            assert_eq!(ToProxy::decode(&m.encode()).unwrap(), m);
        }
        for m in [
            ToMpirun::Started { rank: 1, pid: 99 },
            ToMpirun::StartFailed {
                rank: 1,
                code: 127,
                message: "nope".into(),
            },
            ToMpirun::Pmi {
                rank: 5,
                text: b"cmd=init\n".to_vec(),
            },
            ToMpirun::Output {
                rank: 0,
                stderr: true,
                bytes: b"x".to_vec(),
            },
            ToMpirun::Exited {
                rank: 2,
                code: 0,
                signal: 9,
            },
            ToMpirun::Note("n".into()),
            ToMpirun::Done,
        ] {
            assert_eq!(ToMpirun::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn damaged_messages_are_errors() {
        let full = ToMpirun::Output {
            rank: 0,
            stderr: false,
            bytes: b"hello".to_vec(),
        }
        .encode();
        for n in 0..full.len() {
            assert!(ToMpirun::decode(&full[..n]).is_err(), "{n}");
        }
        let mut long = full.clone();
        long.push(0);
        assert!(ToMpirun::decode(&long).is_err());
        assert!(ToProxy::decode(&[99]).is_err());
        // A count far beyond the frame.
        assert!(ToProxy::decode(&[1, 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
