//! The PMI-1 wire format: message framing, parsing and formatting.
//!
//! Read first: the PMI-1 text protocol as spoken by MPICH's "simple" PMI client and Hydra.
//!
//! * A message is one line, `cmd=NAME key=value key=value\n`. Tokens are separated by one or more
//!   spaces; a value runs from the first `=` of its token to the next space, so a value may hold
//!   `=` but not a space. A backslash escapes the character after it (MPICH 4.1 and later
//!   unescape; Hydra 4.0.2 does not, which is why [`crate::PmiClient::put`] refuses values that
//!   would need escaping). A token without `=` is a key with an empty value.
//! * `cmd=abort exitcode=N message=TEXT`: MPICH sends the message unescaped, spaces and all, as
//!   the last token, so for `abort` the `message` value runs to the end of the line.
//! * The spawn request uses the multi-line form: `mcmd=spawn\n`, then one `key=value` per line
//!   (a value runs to the end of its line), then `endcmd\n`. One message per command of an
//!   `MPI_Comm_spawn_multiple`; `spawnssofar` counts them up to `totspawns`.
//!
//! Invariants: parsing never panics and never trusts the input. Bytes become a [`Message`]
//! (generic tokens, validated syntax), and a `Message` becomes a [`Request`] or a [`Response`]
//! (validated fields and numbers). Every failure is a [`WireError`] value.

use std::fmt;

/// The longest message [`Framer`] accepts by default. PMI lines are short (Hydra's value limit is
/// 1024 bytes); a spawn request with many arguments is the longest legitimate message.
pub const DEFAULT_MAX_MESSAGE: usize = 256 * 1024;

/// Why bytes from the peer are not a valid PMI-1 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// No message end (newline, or `endcmd` for the multi-line form) within `limit` bytes.
    TooLong { limit: usize },
    /// The message is not UTF-8.
    NotUtf8,
    /// The message does not start with `cmd=` or `mcmd=`, or names no command.
    MissingCmd,
    /// A token whose key is empty or holds a character that keys may not hold.
    BadKey { token: String },
    /// A multi-line message whose text does not end with an `endcmd` line.
    Unterminated,
    /// The command lacks a field it needs.
    MissingField { cmd: String, field: String },
    /// A field that should hold a number does not.
    BadNumber { field: String, value: String },
    /// A command this crate does not know.
    UnknownCommand(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::TooLong { limit } => write!(f, "message longer than {limit} bytes"),
            WireError::NotUtf8 => write!(f, "message is not UTF-8"),
            WireError::MissingCmd => write!(f, "message does not start with cmd= or mcmd="),
            WireError::BadKey { token } => write!(f, "malformed token {token:?}"),
            WireError::Unterminated => write!(f, "multi-line message without endcmd"),
            WireError::MissingField { cmd, field } => {
                write!(f, "command {cmd} lacks field {field}")
            }
            WireError::BadNumber { field, value } => {
                write!(f, "field {field}={value:?} is not a number in range")
            }
            WireError::UnknownCommand(c) => write!(f, "unknown command {c:?}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Splits a byte stream into messages (sans-IO: push bytes in, take messages out).
///
/// A message is a line, or for the multi-line form everything up to and including the `endcmd`
/// line. Bytes past the last complete message stay buffered.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new(DEFAULT_MAX_MESSAGE)
    }
}

impl Framer {
    /// A framer that rejects messages longer than `limit` bytes.
    pub fn new(limit: usize) -> Framer {
        Framer {
            buf: Vec::new(),
            limit: limit.max(1),
        }
    }

    /// Appends bytes received from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered that do not yet form a complete message.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete message, if any. After `Err(TooLong)` the buffer has been discarded:
    /// the stream has lost its framing and the caller should drop the connection.
    pub fn next_message(&mut self) -> Option<Result<String, WireError>> {
        let end = match self.message_end() {
            Some(end) => end,
            None => {
                if self.buf.len() > self.limit {
                    self.buf.clear();
                    return Some(Err(WireError::TooLong { limit: self.limit }));
                }
                return None;
            }
        };
        if end > self.limit {
            self.buf.drain(..end);
            return Some(Err(WireError::TooLong { limit: self.limit }));
        }
        let bytes: Vec<u8> = self.buf.drain(..end).collect();
        Some(String::from_utf8(bytes).map_err(|_| WireError::NotUtf8))
    }

    /// Length of the first complete message in the buffer (including its final newline).
    fn message_end(&self) -> Option<usize> {
        let first_nl = self.buf.iter().position(|&b| b == b'\n')?;
        if !self.buf.starts_with(b"mcmd=") {
            return Some(first_nl + 1);
        }
        let mut start = first_nl + 1;
        while let Some(off) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + off];
            if trim_spaces(line) == b"endcmd" {
                return Some(start + off + 1);
            }
            start += off + 1;
        }
        None
    }
}

fn trim_spaces(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\r' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\r' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A syntactically valid message: a command name and its fields, in order, values unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The command (`init`, `put`, `spawn`, ...).
    pub cmd: String,
    /// True for the multi-line `mcmd=` form.
    pub multiline: bool,
    /// The other fields in order of appearance; a bare key has an empty value.
    pub fields: Vec<(String, String)>,
}

fn key_ok(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'=' && b != b'\\')
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        let c = if c == '\\' {
            chars.next().unwrap_or('\\')
        } else {
            c
        };
        // The wire cannot carry these (they are sent as spaces, see `escape_into`): a value
        // that holds one reads as it would after a round trip.
        out.push(if matches!(c, '\r' | '\0') { ' ' } else { c });
    }
    out
}

/// Escapes a value for the single-line form. A newline cannot be carried by the wire at all, so it
/// is sent as a space (callers that care validate their values first).
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            ' ' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\0' => out.push(' '),
            _ => out.push(c),
        }
    }
}

impl Message {
    /// A message with no fields yet.
    pub fn new(cmd: &str) -> Message {
        Message {
            cmd: cmd.to_string(),
            multiline: false,
            fields: Vec::new(),
        }
    }

    /// Adds a field (builder style).
    pub fn with(mut self, key: &str, value: impl ToString) -> Message {
        self.fields.push((key.to_string(), value.to_string()));
        self
    }

    /// Parses one framed message (with or without its final newline).
    pub fn parse(text: &str) -> Result<Message, WireError> {
        if let Some(rest) = text.strip_prefix("mcmd=") {
            return Message::parse_multiline(rest);
        }
        let rest = text.strip_prefix("cmd=").ok_or(WireError::MissingCmd)?;
        let line = rest.strip_suffix('\n').unwrap_or(rest);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (cmd_raw, mut rest) = split_value(line);
        let cmd = unescape(cmd_raw);
        if !key_ok(&cmd) {
            return Err(WireError::MissingCmd);
        }
        // The abort message is sent unescaped by MPICH, so it runs to the end of the line.
        let tail_key = if cmd == "abort" {
            Some("message")
        } else {
            None
        };
        let mut fields = Vec::new();
        loop {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                break;
            }
            let key_end = rest.find(['=', ' ']).unwrap_or(rest.len());
            let key = &rest[..key_end];
            if !key_ok(key) {
                let token_end = rest.find(' ').unwrap_or(rest.len());
                return Err(WireError::BadKey {
                    token: rest[..token_end].to_string(),
                });
            }
            rest = &rest[key_end..];
            let value = match rest.strip_prefix('=') {
                Some(after) if tail_key == Some(key) => {
                    rest = "";
                    unescape(after)
                }
                Some(after) => {
                    let (v, r) = split_value(after);
                    rest = r;
                    unescape(v)
                }
                None => String::new(),
            };
            fields.push((key.to_string(), value));
        }
        Ok(Message {
            cmd,
            multiline: false,
            fields,
        })
    }

    fn parse_multiline(rest: &str) -> Result<Message, WireError> {
        let mut lines = rest.split('\n');
        let cmd = lines.next().map(str::trim).unwrap_or_default();
        if !key_ok(cmd) {
            return Err(WireError::MissingCmd);
        }
        let mut fields = Vec::new();
        let mut terminated = false;
        for line in lines {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim() == "endcmd" {
                terminated = true;
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim_start(), unescape(v)),
                None => (line.trim(), String::new()),
            };
            if !key_ok(key) {
                return Err(WireError::BadKey {
                    token: line.to_string(),
                });
            }
            fields.push((key.to_string(), value));
        }
        if !terminated {
            return Err(WireError::Unterminated);
        }
        Ok(Message {
            cmd: cmd.to_string(),
            multiline: true,
            fields,
        })
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn require(&self, key: &str) -> Result<&str, WireError> {
        self.get(key).ok_or_else(|| WireError::MissingField {
            cmd: self.cmd.clone(),
            field: key.to_string(),
        })
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, WireError> {
        let v = self.require(key)?;
        v.trim().parse().map_err(|_| WireError::BadNumber {
            field: key.to_string(),
            value: v.to_string(),
        })
    }

    fn number_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, WireError> {
        match self.get(key) {
            None => Ok(default),
            Some(_) => self.number(key),
        }
    }

    /// The wire text, ending with a newline. A value that is empty is sent as a bare key.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if self.multiline {
            out.push_str("mcmd=");
            out.push_str(&self.cmd);
            out.push('\n');
            for (k, v) in &self.fields {
                out.push_str(k);
                out.push('=');
                for c in v.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '\n' | '\r' | '\0' => out.push(' '),
                        _ => out.push(c),
                    }
                }
                out.push('\n');
            }
            out.push_str("endcmd\n");
            return out;
        }
        out.push_str("cmd=");
        out.push_str(&self.cmd);
        for (k, v) in &self.fields {
            out.push(' ');
            out.push_str(k);
            if !v.is_empty() {
                out.push('=');
                escape_into(&mut out, v);
            }
        }
        out.push('\n');
        out
    }
}

/// Splits at the first unescaped space: (value, rest starting at the space).
fn split_value(s: &str) -> (&str, &str) {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' => return (&s[..i], &s[i..]),
            // An escape covers the next character; stepping over a multi-byte character's first
            // byte only is fine because none of its continuation bytes is a space or backslash.
            b'\\' if i + 1 < bytes.len() => i += 2,
            _ => i += 1,
        }
    }
    (s, "")
}

/// One command of a spawn request (`mcmd=spawn`). `MPI_Comm_spawn_multiple` sends several,
/// numbered by `spawnssofar` from 1 to `totspawns`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnCommand {
    /// Processes to start for this command.
    pub nprocs: u32,
    /// The program.
    pub execname: String,
    /// Number of commands in the whole request.
    pub totspawns: u32,
    /// This command's position in the request, from 1.
    pub spawnssofar: u32,
    /// Program arguments (sent as `argcnt` and `arg1`..`argN`).
    pub args: Vec<String>,
    /// Key-value pairs to put into the children's KVS before they start.
    pub preput: Vec<(String, String)>,
    /// MPI_Info hints.
    pub info: Vec<(String, String)>,
}

impl SpawnCommand {
    fn from_message(m: &Message) -> Result<SpawnCommand, WireError> {
        let argcnt: u32 = m.number_or("argcnt", 0)?;
        let mut args = Vec::new();
        for i in 1..=argcnt {
            args.push(m.require(&format!("arg{i}"))?.to_string());
        }
        let pairs = |num: &str, key: &str, val: &str| -> Result<Vec<(String, String)>, WireError> {
            let n: u32 = m.number_or(num, 0)?;
            let mut out = Vec::new();
            for i in 0..n {
                out.push((
                    m.require(&format!("{key}{i}"))?.to_string(),
                    m.require(&format!("{val}{i}"))?.to_string(),
                ));
            }
            Ok(out)
        };
        Ok(SpawnCommand {
            nprocs: m.number("nprocs")?,
            execname: m.require("execname")?.to_string(),
            totspawns: m.number_or("totspawns", 1)?,
            spawnssofar: m.number_or("spawnssofar", 1)?,
            args,
            preput: pairs("preput_num", "preput_key_", "preput_val_")?,
            info: pairs("info_num", "info_key_", "info_val_")?,
        })
    }

    fn to_message(&self) -> Message {
        let mut m = Message::new("spawn")
            .with("nprocs", self.nprocs)
            .with("execname", &self.execname)
            .with("totspawns", self.totspawns)
            .with("spawnssofar", self.spawnssofar)
            .with("argcnt", self.args.len());
        for (i, a) in self.args.iter().enumerate() {
            m = m.with(&format!("arg{}", i + 1), a);
        }
        m = m.with("preput_num", self.preput.len());
        for (i, (k, v)) in self.preput.iter().enumerate() {
            m = m
                .with(&format!("preput_key_{i}"), k)
                .with(&format!("preput_val_{i}"), v);
        }
        m = m.with("info_num", self.info.len());
        for (i, (k, v)) in self.info.iter().enumerate() {
            m = m
                .with(&format!("info_key_{i}"), k)
                .with(&format!("info_val_{i}"), v);
        }
        m.multiline = true;
        m
    }
}

/// A message from a client (an MPI process) to the server (the process manager).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `cmd=initack pmiid=N`: first message on a PMI_PORT connection.
    InitAck { pmiid: i64 },
    /// `cmd=init pmi_version=1 pmi_subversion=1`.
    Init { version: u32, subversion: u32 },
    /// `cmd=get_maxes`.
    GetMaxes,
    /// `cmd=get_appnum`.
    GetAppnum,
    /// `cmd=get_my_kvsname`.
    GetMyKvsname,
    /// `cmd=get_universe_size`.
    GetUniverseSize,
    /// `cmd=barrier_in`.
    BarrierIn,
    /// `cmd=put kvsname= key= value=`.
    Put {
        kvsname: String,
        key: String,
        value: String,
    },
    /// `cmd=get kvsname= key=`.
    Get { kvsname: String, key: String },
    /// `cmd=finalize`.
    Finalize,
    /// `cmd=abort exitcode=N [message=...]`. The server does not answer.
    Abort {
        exitcode: i32,
        message: Option<String>,
    },
    /// One `mcmd=spawn ... endcmd` message.
    Spawn(SpawnCommand),
    /// `cmd=publish_name service= port=` (MPI_Publish_name).
    PublishName { service: String, port: String },
    /// `cmd=unpublish_name service=` (MPI_Unpublish_name).
    UnpublishName { service: String },
    /// `cmd=lookup_name service=` (MPI_Lookup_name).
    LookupName { service: String },
}

impl Request {
    /// Validates a parsed message as a request.
    pub fn from_message(m: &Message) -> Result<Request, WireError> {
        let s = |k: &str| m.require(k).map(str::to_string);
        Ok(match m.cmd.as_str() {
            "initack" => Request::InitAck {
                pmiid: m.number("pmiid")?,
            },
            "init" => Request::Init {
                version: m.number_or("pmi_version", 1)?,
                subversion: m.number_or("pmi_subversion", 1)?,
            },
            "get_maxes" => Request::GetMaxes,
            "get_appnum" => Request::GetAppnum,
            "get_my_kvsname" => Request::GetMyKvsname,
            "get_universe_size" => Request::GetUniverseSize,
            "barrier_in" => Request::BarrierIn,
            "put" => Request::Put {
                kvsname: s("kvsname")?,
                key: s("key")?,
                value: m.get("value").unwrap_or_default().to_string(),
            },
            "get" => Request::Get {
                kvsname: s("kvsname")?,
                key: s("key")?,
            },
            "finalize" => Request::Finalize,
            "abort" => Request::Abort {
                exitcode: m.number_or("exitcode", 1)?,
                message: m.get("message").map(str::to_string),
            },
            "spawn" => Request::Spawn(SpawnCommand::from_message(m)?),
            "publish_name" => Request::PublishName {
                service: s("service")?,
                port: s("port")?,
            },
            "unpublish_name" => Request::UnpublishName {
                service: s("service")?,
            },
            "lookup_name" => Request::LookupName {
                service: s("service")?,
            },
            other => return Err(WireError::UnknownCommand(other.to_string())),
        })
    }

    /// Parses one framed message.
    pub fn parse(text: &str) -> Result<Request, WireError> {
        Request::from_message(&Message::parse(text)?)
    }

    /// The generic form of this request.
    pub fn to_message(&self) -> Message {
        match self {
            Request::InitAck { pmiid } => Message::new("initack").with("pmiid", pmiid),
            Request::Init {
                version,
                subversion,
            } => Message::new("init")
                .with("pmi_version", version)
                .with("pmi_subversion", subversion),
            Request::GetMaxes => Message::new("get_maxes"),
            Request::GetAppnum => Message::new("get_appnum"),
            Request::GetMyKvsname => Message::new("get_my_kvsname"),
            Request::GetUniverseSize => Message::new("get_universe_size"),
            Request::BarrierIn => Message::new("barrier_in"),
            Request::Put {
                kvsname,
                key,
                value,
            } => Message::new("put")
                .with("kvsname", kvsname)
                .with("key", key)
                .with("value", value),
            Request::Get { kvsname, key } => Message::new("get")
                .with("kvsname", kvsname)
                .with("key", key),
            Request::Finalize => Message::new("finalize"),
            Request::Abort { exitcode, message } => {
                let m = Message::new("abort").with("exitcode", exitcode);
                match message {
                    Some(text) => m.with("message", text),
                    None => m,
                }
            }
            Request::Spawn(cmd) => cmd.to_message(),
            Request::PublishName { service, port } => Message::new("publish_name")
                .with("service", service)
                .with("port", port),
            Request::UnpublishName { service } => {
                Message::new("unpublish_name").with("service", service)
            }
            Request::LookupName { service } => Message::new("lookup_name").with("service", service),
        }
    }

    /// The wire text, ending with a newline.
    pub fn encode(&self) -> String {
        self.to_message().encode()
    }
}

/// A message from the server to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `cmd=initack`: first line of the answer to `initack`, followed by three [`Response::Set`].
    InitAck,
    /// `cmd=set NAME=VALUE` (`size`, `rank`, `debug`) after `initack`.
    Set { name: String, value: i64 },
    /// `cmd=response_to_init pmi_version= pmi_subversion= rc=`.
    ResponseToInit {
        version: u32,
        subversion: u32,
        rc: i32,
    },
    /// `cmd=maxes kvsname_max= keylen_max= vallen_max=`.
    Maxes {
        kvsname_max: u32,
        keylen_max: u32,
        vallen_max: u32,
    },
    /// `cmd=appnum appnum=`.
    Appnum { appnum: i32 },
    /// `cmd=my_kvsname kvsname=`.
    MyKvsname { kvsname: String },
    /// `cmd=universe_size size=`.
    UniverseSize { size: i32 },
    /// `cmd=barrier_out`.
    BarrierOut,
    /// `cmd=put_result rc= [msg=]`.
    PutResult { rc: i32, msg: Option<String> },
    /// `cmd=get_result rc= [msg=] [value=]`.
    GetResult {
        rc: i32,
        msg: Option<String>,
        value: Option<String>,
    },
    /// `cmd=finalize_ack`.
    FinalizeAck,
    /// `cmd=spawn_result rc= [msg=]`, after the last command of a spawn request.
    SpawnResult { rc: i32, msg: Option<String> },
    /// `cmd=publish_result rc= [msg=]` (sent with `info=ok` or `info=fail`, as Hydra and MPICH's
    /// simple PMI do; older clients read `info`, newer ones `rc`).
    PublishResult { rc: i32, msg: Option<String> },
    /// `cmd=unpublish_result rc= [msg=]`.
    UnpublishResult { rc: i32, msg: Option<String> },
    /// `cmd=lookup_result rc= [msg=] [port=]`.
    LookupResult {
        rc: i32,
        msg: Option<String>,
        port: Option<String>,
    },
}

impl Response {
    /// Validates a parsed message as a response.
    pub fn from_message(m: &Message) -> Result<Response, WireError> {
        let msg = m.get("msg").map(str::to_string);
        Ok(match m.cmd.as_str() {
            "initack" => Response::InitAck,
            "set" => {
                let (name, _) = m.fields.first().ok_or_else(|| WireError::MissingField {
                    cmd: "set".into(),
                    field: "size|rank|debug".into(),
                })?;
                Response::Set {
                    name: name.clone(),
                    value: m.number(name)?,
                }
            }
            "response_to_init" => Response::ResponseToInit {
                version: m.number_or("pmi_version", 1)?,
                subversion: m.number_or("pmi_subversion", 1)?,
                rc: m.number_or("rc", 0)?,
            },
            "maxes" => Response::Maxes {
                kvsname_max: m.number("kvsname_max")?,
                keylen_max: m.number("keylen_max")?,
                vallen_max: m.number("vallen_max")?,
            },
            "appnum" => Response::Appnum {
                appnum: m.number("appnum")?,
            },
            "my_kvsname" => Response::MyKvsname {
                kvsname: m.require("kvsname")?.to_string(),
            },
            "universe_size" => Response::UniverseSize {
                size: m.number("size")?,
            },
            "barrier_out" => Response::BarrierOut,
            "put_result" => Response::PutResult {
                rc: m.number_or("rc", 0)?,
                msg,
            },
            "get_result" => Response::GetResult {
                rc: m.number_or("rc", 0)?,
                msg,
                value: m.get("value").map(str::to_string),
            },
            "finalize_ack" => Response::FinalizeAck,
            "spawn_result" => Response::SpawnResult {
                rc: m.number_or("rc", 0)?,
                msg,
            },
            "publish_result" => Response::PublishResult {
                rc: name_rc(m)?,
                msg,
            },
            "unpublish_result" => Response::UnpublishResult {
                rc: name_rc(m)?,
                msg,
            },
            "lookup_result" => Response::LookupResult {
                rc: name_rc(m)?,
                msg,
                port: m.get("port").map(str::to_string),
            },
            other => return Err(WireError::UnknownCommand(other.to_string())),
        })
    }

    /// Parses one framed message.
    pub fn parse(text: &str) -> Result<Response, WireError> {
        Response::from_message(&Message::parse(text)?)
    }

    /// The generic form of this response.
    pub fn to_message(&self) -> Message {
        fn with_msg(m: Message, msg: &Option<String>) -> Message {
            match msg {
                Some(t) => m.with("msg", t),
                None => m,
            }
        }
        match self {
            Response::InitAck => Message::new("initack"),
            Response::Set { name, value } => Message::new("set").with(name, value),
            Response::ResponseToInit {
                version,
                subversion,
                rc,
            } => Message::new("response_to_init")
                .with("pmi_version", version)
                .with("pmi_subversion", subversion)
                .with("rc", rc),
            Response::Maxes {
                kvsname_max,
                keylen_max,
                vallen_max,
            } => Message::new("maxes")
                .with("kvsname_max", kvsname_max)
                .with("keylen_max", keylen_max)
                .with("vallen_max", vallen_max),
            Response::Appnum { appnum } => Message::new("appnum").with("appnum", appnum),
            Response::MyKvsname { kvsname } => Message::new("my_kvsname").with("kvsname", kvsname),
            Response::UniverseSize { size } => Message::new("universe_size").with("size", size),
            Response::BarrierOut => Message::new("barrier_out"),
            Response::PutResult { rc, msg } => {
                with_msg(Message::new("put_result").with("rc", rc), msg)
            }
            Response::GetResult { rc, msg, value } => {
                let m = with_msg(Message::new("get_result").with("rc", rc), msg);
                match value {
                    Some(v) => m.with("value", v),
                    None => m,
                }
            }
            Response::FinalizeAck => Message::new("finalize_ack"),
            Response::SpawnResult { rc, msg } => {
                with_msg(Message::new("spawn_result").with("rc", rc), msg)
            }
            Response::PublishResult { rc, msg } => {
                with_msg(name_result("publish_result", *rc), msg)
            }
            Response::UnpublishResult { rc, msg } => {
                with_msg(name_result("unpublish_result", *rc), msg)
            }
            Response::LookupResult { rc, msg, port } => {
                let m = with_msg(name_result("lookup_result", *rc), msg);
                match port {
                    Some(p) => m.with("port", p),
                    None => m,
                }
            }
        }
    }

    /// The wire text, ending with a newline.
    pub fn encode(&self) -> String {
        self.to_message().encode()
    }
}

/// The status of a name-service answer: `rc` where the server sent one, else `info` (`ok` is
/// success; the oldest servers send only `info`).
fn name_rc(m: &Message) -> Result<i32, WireError> {
    match (m.get("rc"), m.get("info")) {
        (Some(_), _) => m.number("rc"),
        (None, Some(info)) => Ok(if info == "ok" { 0 } else { -1 }),
        (None, None) => Ok(0),
    }
}

fn name_result(cmd: &str, rc: i32) -> Message {
    Message::new(cmd)
        .with("rc", rc)
        .with("info", if rc == 0 { "ok" } else { "fail" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_service_round_trips() {
        for r in [
            Request::PublishName {
                service: "ocean".into(),
                port: "protean-port:127.0.0.1:4000:ab".into(),
            },
            Request::UnpublishName {
                service: "ocean".into(),
            },
            Request::LookupName {
                service: "ocean".into(),
            },
        ] {
            assert_eq!(Request::parse(&r.encode()), Ok(r));
        }
        let found = Response::LookupResult {
            rc: 0,
            msg: Some("success".into()),
            port: Some("p:1".into()),
        };
        assert_eq!(Response::parse(&found.encode()), Ok(found));
        // Hydra's answer for an unknown name, and an old server's `info` alone.
        assert_eq!(
            Response::parse("cmd=lookup_result rc=1 msg=service_not_found\n"),
            Ok(Response::LookupResult {
                rc: 1,
                msg: Some("service_not_found".into()),
                port: None
            })
        );
        assert_eq!(
            Response::parse("cmd=publish_result info=ok\n"),
            Ok(Response::PublishResult { rc: 0, msg: None })
        );
        assert!(matches!(
            Response::parse("cmd=unpublish_result info=fail\n"),
            Ok(Response::UnpublishResult { rc: -1, .. })
        ));
    }

    #[test]
    fn characters_the_wire_cannot_carry_read_as_spaces_so_round_trips_hold() {
        // Found by the pmi_wire fuzz target: a NUL in an abort message was kept by the parser
        // but sent as a space, so a message did not read back the same.
        let r = Request::parse("cmd=abort exitcode=1 message=a\0b\rc\\\0d\n").unwrap();
        assert_eq!(
            r,
            Request::Abort {
                exitcode: 1,
                message: Some("a b c d".into())
            }
        );
        assert_eq!(Request::parse(&r.encode()), Ok(r));
        let k = Request::parse("cmd=put kvsname=k key=a\0 value=x\0y\n").unwrap();
        assert_eq!(Request::parse(&k.encode()), Ok(k));
    }
    use proptest::prelude::*;

    #[test]
    fn parses_hydra_lines() {
        let r = Response::parse("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
        assert_eq!(
            r,
            Ok(Response::ResponseToInit {
                version: 1,
                subversion: 1,
                rc: 0
            })
        );
        let r = Response::parse("cmd=get_result rc=-1 msg=key_nokey_not_found value=unknown\n");
        assert_eq!(
            r,
            Ok(Response::GetResult {
                rc: -1,
                msg: Some("key_nokey_not_found".into()),
                value: Some("unknown".into())
            })
        );
        assert_eq!(
            Response::parse("cmd=universe_size size=-1\n"),
            Ok(Response::UniverseSize { size: -1 })
        );
        assert_eq!(
            Response::parse("cmd=set rank=3\n"),
            Ok(Response::Set {
                name: "rank".into(),
                value: 3
            })
        );
    }

    #[test]
    fn values_may_hold_equals_signs_and_escapes() {
        let m = Message::parse("cmd=put kvsname=k key=a value=p=q\\ r  \n").unwrap();
        assert_eq!(m.get("value"), Some("p=q r"));
        let m = Message::parse("cmd=put key=a\\").unwrap();
        assert_eq!(m.get("key"), Some("a\\"));
    }

    #[test]
    fn abort_message_runs_to_end_of_line() {
        let r = Request::parse("cmd=abort exitcode=7 message=rank 2: it broke (x=1)\n");
        assert_eq!(
            r,
            Ok(Request::Abort {
                exitcode: 7,
                message: Some("rank 2: it broke (x=1)".into())
            })
        );
        assert_eq!(
            Request::parse("cmd=abort exitcode=3\n"),
            Ok(Request::Abort {
                exitcode: 3,
                message: None
            })
        );
    }

    #[test]
    fn parses_spawn() {
        let text = "mcmd=spawn\nnprocs=2\nexecname=./child\ntotspawns=1\nspawnssofar=1\n\
                    argcnt=2\narg1=-v\narg2=a b\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\n\
                    preput_val_0=tag#0$port#1$\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\n\
                    endcmd\n";
        let r = Request::parse(text).unwrap();
        let expect = SpawnCommand {
            nprocs: 2,
            execname: "./child".into(),
            totspawns: 1,
            spawnssofar: 1,
            args: vec!["-v".into(), "a b".into()],
            preput: vec![("PARENT_ROOT_PORT_NAME".into(), "tag#0$port#1$".into())],
            info: vec![("wdir".into(), "/tmp".into())],
        };
        assert_eq!(r, Request::Spawn(expect.clone()));
        assert_eq!(Request::parse(&Request::Spawn(expect).encode()), Ok(r));
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert_eq!(Message::parse(""), Err(WireError::MissingCmd));
        assert_eq!(Message::parse("hello\n"), Err(WireError::MissingCmd));
        assert_eq!(Message::parse("cmd=\n"), Err(WireError::MissingCmd));
        assert_eq!(Message::parse("cmd= put\n"), Err(WireError::MissingCmd));
        assert!(matches!(
            Message::parse("cmd=put =x\n"),
            Err(WireError::BadKey { .. })
        ));
        assert!(matches!(
            Message::parse("cmd=put a\u{7}=x\n"),
            Err(WireError::BadKey { .. })
        ));
        assert_eq!(
            Request::parse("cmd=frobnicate\n"),
            Err(WireError::UnknownCommand("frobnicate".into()))
        );
        assert!(matches!(
            Request::parse("cmd=get key=a\n"),
            Err(WireError::MissingField { .. })
        ));
        assert!(matches!(
            Request::parse("cmd=initack pmiid=x1\n"),
            Err(WireError::BadNumber { .. })
        ));
        assert!(matches!(
            Response::parse("cmd=maxes kvsname_max=99999999999 keylen_max=1 vallen_max=1\n"),
            Err(WireError::BadNumber { .. })
        ));
        assert!(matches!(
            Response::parse("cmd=set\n"),
            Err(WireError::MissingField { .. })
        ));
        assert_eq!(
            Message::parse("mcmd=spawn\nnprocs=1\n"),
            Err(WireError::Unterminated)
        );
        assert!(matches!(
            Request::parse("mcmd=spawn\nnprocs=1\nexecname=x\nargcnt=2\narg1=a\nendcmd\n"),
            Err(WireError::MissingField { .. })
        ));
    }

    #[test]
    fn framer_splits_lines_and_multiline_messages() {
        let mut f = Framer::default();
        f.push(b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_ma");
        assert_eq!(
            f.next_message(),
            Some(Ok("cmd=init pmi_version=1 pmi_subversion=1\n".to_string()))
        );
        assert_eq!(f.next_message(), None);
        f.push(b"xes\nmcmd=spawn\nnprocs=1\n");
        assert_eq!(f.next_message(), Some(Ok("cmd=get_maxes\n".to_string())));
        assert_eq!(f.next_message(), None);
        f.push(b"execname=x\nendcmd\ncmd=finalize\n");
        assert_eq!(
            f.next_message(),
            Some(Ok("mcmd=spawn\nnprocs=1\nexecname=x\nendcmd\n".to_string()))
        );
        assert_eq!(f.next_message(), Some(Ok("cmd=finalize\n".to_string())));
        assert_eq!(f.next_message(), None);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn framer_bounds_its_buffer() {
        let mut f = Framer::new(16);
        f.push(&[b'a'; 40]);
        assert_eq!(
            f.next_message(),
            Some(Err(WireError::TooLong { limit: 16 }))
        );
        assert_eq!(f.pending(), 0);
        f.push(b"\xff\xfe\n");
        assert_eq!(f.next_message(), Some(Err(WireError::NotUtf8)));
        let mut long = vec![b'b'; 20];
        long.push(b'\n');
        f.push(&long);
        f.push(b"cmd=x\n");
        assert_eq!(
            f.next_message(),
            Some(Err(WireError::TooLong { limit: 16 }))
        );
        assert_eq!(f.next_message(), Some(Ok("cmd=x\n".to_string())));
    }

    fn word() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_./:#$+-]{1,16}"
    }
    fn text() -> impl Strategy<Value = String> {
        "[ -~]{0,40}"
    }
    fn opt_text() -> impl Strategy<Value = Option<String>> {
        prop::option::of(text())
    }

    fn request() -> impl Strategy<Value = Request> {
        let spawn = (
            (1u32..64, word(), 1u32..4, 1u32..4),
            prop::collection::vec("[ -~]{1,12}", 0..4),
            prop::collection::vec((word(), text()), 0..3),
            prop::collection::vec((word(), text()), 0..3),
        )
            .prop_map(|((nprocs, execname, tot, sofar), args, preput, info)| {
                Request::Spawn(SpawnCommand {
                    nprocs,
                    execname,
                    totspawns: tot,
                    spawnssofar: sofar,
                    args,
                    preput,
                    info,
                })
            });
        prop_oneof![
            any::<i64>().prop_map(|pmiid| Request::InitAck { pmiid }),
            (any::<u32>(), any::<u32>()).prop_map(|(version, subversion)| Request::Init {
                version,
                subversion
            }),
            Just(Request::GetMaxes),
            Just(Request::GetAppnum),
            Just(Request::GetMyKvsname),
            Just(Request::GetUniverseSize),
            Just(Request::BarrierIn),
            (word(), word(), text()).prop_map(|(kvsname, key, value)| Request::Put {
                kvsname,
                key,
                value
            }),
            (word(), word()).prop_map(|(kvsname, key)| Request::Get { kvsname, key }),
            Just(Request::Finalize),
            (any::<i32>(), opt_text())
                .prop_map(|(exitcode, message)| Request::Abort { exitcode, message }),
            spawn,
        ]
    }

    fn response() -> impl Strategy<Value = Response> {
        prop_oneof![
            Just(Response::InitAck),
            (word(), any::<i64>()).prop_map(|(name, value)| Response::Set { name, value }),
            (any::<u32>(), any::<u32>(), any::<i32>()).prop_map(|(version, subversion, rc)| {
                Response::ResponseToInit {
                    version,
                    subversion,
                    rc,
                }
            }),
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(a, b, c)| Response::Maxes {
                kvsname_max: a,
                keylen_max: b,
                vallen_max: c
            }),
            any::<i32>().prop_map(|appnum| Response::Appnum { appnum }),
            word().prop_map(|kvsname| Response::MyKvsname { kvsname }),
            any::<i32>().prop_map(|size| Response::UniverseSize { size }),
            Just(Response::BarrierOut),
            (any::<i32>(), opt_text()).prop_map(|(rc, msg)| Response::PutResult { rc, msg }),
            (any::<i32>(), opt_text(), opt_text())
                .prop_map(|(rc, msg, value)| Response::GetResult { rc, msg, value }),
            Just(Response::FinalizeAck),
            (any::<i32>(), opt_text()).prop_map(|(rc, msg)| Response::SpawnResult { rc, msg }),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trip(r in request()) {
            let text = r.encode();
            let mut f = Framer::default();
            f.push(text.as_bytes());
            let framed = f.next_message().unwrap().unwrap();
            prop_assert_eq!(&framed, &text);
            prop_assert_eq!(f.pending(), 0);
            prop_assert_eq!(Request::parse(&framed), Ok(r));
        }

        #[test]
        fn response_round_trip(r in response()) {
            let text = r.encode();
            prop_assert_eq!(text.matches('\n').count(), 1);
            prop_assert_eq!(Response::parse(&text), Ok(r));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut f = Framer::new(64);
            f.push(&bytes);
            while let Some(m) = f.next_message() {
                if let Ok(text) = m {
                    let _ = Request::parse(&text);
                    let _ = Response::parse(&text);
                }
            }
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = Request::parse(text);
                let _ = Response::parse(text);
            }
        }

        #[test]
        fn line_noise_never_panics(text in "(cmd=|mcmd=)?[ -~\n\\\\=]{0,120}") {
            let _ = Request::parse(&text);
            let _ = Response::parse(&text);
        }
    }
}
