//! Reader for `include/mpi.h`.
//!
//! This is not a C parser.  It relies on the layout rules stated at the top of mpi.h: one
//! prototype per line, one `#define` per line, one enumerator per line, typedefs of scalars,
//! pointers and function types on one line, and structures as a `typedef struct ... {` line, one
//! field per line, and a closing `} Name;` line.  Anything the reader does not recognise is an
//! error, so a header edit that breaks the rules fails the build instead of silently dropping
//! a function.

use std::collections::BTreeMap;

/// One parameter of a prototype or function typedef, as written in the header.
#[derive(Clone, Debug)]
pub struct Param {
    /// The full declaration, e.g. `const int dims[]`.
    pub decl: String,
    /// The declared name (`dims`), or None when the header leaves it unnamed.
    pub name: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub ret: String,
    pub name: String,
    pub params: Vec<Param>,
    pub variadic: bool,
}

#[derive(Clone, Debug)]
pub enum Typedef {
    /// `typedef <decl> Name;` for scalars, pointers and aliases: the declaration with the name.
    Plain(String),
    /// `typedef Ret (Name)(params);`
    Function {
        ret: String,
        params: Vec<Param>,
        variadic: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Struct {
    pub name: String,
    /// Field declarations, e.g. `int count_lo`.
    pub fields: Vec<Param>,
}

#[derive(Clone, Debug)]
pub struct Enum {
    pub typedef: Option<String>,
    pub values: Vec<(String, i64)>,
}

/// The value of an object-like macro, when it is one we can represent.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer, with the C type it was cast to (None: plain int).
    Int(i64, Option<String>),
    /// A pointer sentinel such as `((void *)-1)`.
    Pointer(i64),
    Str(String),
}

#[derive(Default, Debug)]
pub struct Header {
    /// Functions in header order; PMPI_/PMPIX_ lines are left out (they are derived).
    pub functions: Vec<Function>,
    pub pmpi_lines: Vec<String>,
    pub typedefs: BTreeMap<String, Typedef>,
    pub typedef_order: Vec<String>,
    pub structs: Vec<Struct>,
    /// Tags declared without a body (`struct MPIR_T_enum_s;`) or used behind a pointer.
    pub opaque_structs: Vec<String>,
    pub enums: Vec<Enum>,
    pub defines: Vec<(String, Value)>,
    /// Macros whose value cannot be a Rust constant (addresses of functions, empty markers...).
    pub skipped_defines: Vec<String>,
    /// Macros that name a type (`#define MPIO_Request MPI_Request`).
    pub type_macros: Vec<(String, String)>,
    /// `extern` objects: (declaration without `extern` and `;`, name).
    pub objects: Vec<(String, String)>,
}

pub const API_PREFIXES: [&str; 3] = ["MPI_", "MPIX_", "QMPI_"];

fn is_api_name(name: &str) -> bool {
    API_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Removes `/* ... */` comments that open and close on the line (leading block comments that
/// span lines are handled by the caller).
fn strip_inline_comments(line: &str) -> String {
    let mut out = line.to_string();
    while let Some(start) = out.find("/*") {
        if start == 0 && !out[2..].contains("*/") {
            break;
        }
        match out[start + 2..].find("*/") {
            Some(end) => out.replace_range(start..start + 2 + end + 2, ""),
            None => break,
        }
    }
    out
}

/// Split at top-level commas (commas inside parentheses belong to function-pointer parameters).
fn split_params(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for ch in text.chars() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(ch);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Words that can end a declaration without being its name.
const TYPE_WORDS: [&str; 12] = [
    "void", "int", "long", "char", "short", "double", "float", "unsigned", "signed", "const",
    "_Bool", "struct",
];

fn identifiers(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !w.chars().next().unwrap().is_ascii_digit())
        .collect()
}

/// The name declared by a parameter, or None if it is unnamed.
pub fn declared_name(decl: &str, type_names: &dyn Fn(&str) -> bool) -> Option<String> {
    if let Some(open) = decl.find("(*") {
        let rest = &decl[open + 1..];
        let close = rest.find(')')?;
        return identifiers(&rest[..close]).last().map(|s| s.to_string());
    }
    let base = match decl.find('[') {
        Some(i) => &decl[..i],
        None => decl,
    };
    let last = *identifiers(base).last()?;
    if TYPE_WORDS.contains(&last) || type_names(last) || identifiers(base).len() == 1 {
        None
    } else {
        Some(last.to_string())
    }
}

fn parse_params(
    text: &str,
    type_names: &dyn Fn(&str) -> bool,
    what: &str,
) -> Result<(Vec<Param>, bool), String> {
    let mut params = Vec::new();
    let mut variadic = false;
    let items = split_params(text);
    if items.len() == 1 && items[0] == "void" {
        return Ok((params, false));
    }
    for item in items {
        if item == "..." {
            variadic = true;
            continue;
        }
        if variadic {
            return Err(format!("{what}: parameter after '...'"));
        }
        let name = declared_name(&item, type_names);
        params.push(Param { decl: item, name });
    }
    Ok((params, variadic))
}

/// Parse `ret name(params);` when name is an API function.
fn parse_prototype(
    line: &str,
    type_names: &dyn Fn(&str) -> bool,
) -> Result<Option<Function>, String> {
    let Some(open) = line.find('(') else {
        return Ok(None);
    };
    let head = line[..open].trim();
    let Some(name) = identifiers(head).last().map(|s| s.to_string()) else {
        return Ok(None);
    };
    if !is_api_name(&name) && !name.starts_with("PMPI") {
        return Ok(None);
    }
    if !line.ends_with(");") {
        return Err(format!(
            "prototype of {name} does not end on its line (mpi.h keeps one prototype per line)"
        ));
    }
    let ret = head[..head.len() - name.len()].trim().to_string();
    let params_text = &line[open + 1..line.len() - 2];
    let (params, variadic) = parse_params(params_text, type_names, &name)?;
    for p in &params {
        if p.name.is_none() {
            return Err(format!("{name}: parameter '{}' has no name", p.decl));
        }
    }
    Ok(Some(Function {
        ret,
        name,
        params,
        variadic,
    }))
}

// ---- constant expressions ---------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Punct(char),
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i] as char).is_ascii_alphanumeric() {
                i += 1;
            }
            let lit = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(hex) = lit.strip_prefix("0x").or_else(|| lit.strip_prefix("0X")) {
                i64::from_str_radix(hex, 16)
            } else {
                lit.parse::<i64>()
            };
            out.push(Tok::Num(v.map_err(|e| format!("bad number '{lit}': {e}"))?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else if "()+-*".contains(c) {
            out.push(Tok::Punct(c));
            i += 1;
        } else {
            return Err(format!("unexpected '{c}'"));
        }
    }
    Ok(out)
}

/// Evaluates the constant expressions mpi.h uses: literals, names of earlier constants, unary
/// minus, + and -, parentheses and casts to known types.
struct Eval<'a> {
    toks: Vec<Tok>,
    pos: usize,
    known: &'a BTreeMap<String, Value>,
    is_type: &'a dyn Fn(&str) -> bool,
    is_pointer_type: &'a dyn Fn(&str) -> bool,
}

impl Eval<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn expr(&mut self) -> Result<Value, String> {
        let mut v = self.unary()?;
        while let Some(Tok::Punct(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.unary()?;
            v = match (v, r) {
                (Value::Int(a, t), Value::Int(b, _)) => {
                    Value::Int(if op == '+' { a + b } else { a - b }, t)
                }
                _ => return Err("arithmetic on a non-integer".into()),
            };
        }
        Ok(v)
    }

    /// If a cast starts here, returns (type name, is pointer) and consumes it.
    fn cast(&mut self) -> Option<(String, bool)> {
        let save = self.pos;
        if self.peek() != Some(&Tok::Punct('(')) {
            return None;
        }
        self.pos += 1;
        let mut words = Vec::new();
        let mut stars = 0;
        loop {
            match self.peek().cloned() {
                Some(Tok::Ident(w)) if stars == 0 => {
                    words.push(w);
                    self.pos += 1;
                }
                Some(Tok::Punct('*')) => {
                    stars += 1;
                    self.pos += 1;
                }
                Some(Tok::Punct(')')) if !words.is_empty() => {
                    self.pos += 1;
                    break;
                }
                _ => {
                    self.pos = save;
                    return None;
                }
            }
        }
        let name = words.join(" ");
        if !(self.is_type)(&name) {
            self.pos = save;
            return None;
        }
        let pointer = stars > 0 || (self.is_pointer_type)(&name);
        Some((name, pointer))
    }

    fn unary(&mut self) -> Result<Value, String> {
        if let Some((ty, pointer)) = self.cast() {
            let v = self.unary()?;
            return match v {
                Value::Int(n, _) | Value::Pointer(n) => {
                    if pointer {
                        Ok(Value::Pointer(n))
                    } else {
                        // Handles are 32-bit: a cast to int wraps 0x8c000000 to a negative int.
                        let n = if ty == "long" {
                            n
                        } else {
                            n as u32 as i32 as i64
                        };
                        Ok(Value::Int(n, Some(ty)))
                    }
                }
                Value::Str(_) => Err("cast of a string".into()),
            };
        }
        match self.peek().cloned() {
            Some(Tok::Punct('-')) => {
                self.pos += 1;
                match self.unary()? {
                    Value::Int(n, t) => Ok(Value::Int(-n, t)),
                    _ => Err("negation of a non-integer".into()),
                }
            }
            Some(Tok::Punct('(')) => {
                self.pos += 1;
                let v = self.expr()?;
                if self.peek() != Some(&Tok::Punct(')')) {
                    return Err("missing ')'".into());
                }
                self.pos += 1;
                Ok(v)
            }
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Value::Int(n, None))
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                self.known
                    .get(&name)
                    .cloned()
                    .ok_or_else(|| format!("'{name}' is not a known constant"))
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

impl Header {
    pub fn is_type(&self, name: &str) -> bool {
        let builtin = [
            "void",
            "int",
            "long",
            "char",
            "double",
            "float",
            "short",
            "unsigned",
            "unsigned int",
            "unsigned long",
            "long long",
            "unsigned long long",
            "signed char",
            "unsigned char",
        ];
        builtin.contains(&name)
            || self.typedefs.contains_key(name)
            || self.type_macros.iter().any(|(n, _)| n == name)
            || name.strip_prefix("struct ").is_some()
            || name.strip_prefix("enum ").is_some()
    }

    /// Resolves typedefs and type macros to find out whether a type name is a pointer.
    pub fn is_pointer_type(&self, name: &str) -> bool {
        if let Some((_, target)) = self.type_macros.iter().find(|(n, _)| n == name) {
            return self.is_pointer_type(target);
        }
        match self.typedefs.get(name) {
            Some(Typedef::Plain(decl)) => decl.contains('*'),
            _ => false,
        }
    }

    pub fn is_function_type(&self, name: &str) -> bool {
        match self.typedefs.get(name) {
            Some(Typedef::Function { .. }) => true,
            Some(Typedef::Plain(decl)) => {
                // `typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;`
                let ids = identifiers(decl);
                ids.len() == 2 && self.is_function_type(ids[0])
            }
            None => false,
        }
    }

    pub fn parse(text: &str) -> Result<Header, String> {
        let mut h = Header::default();
        let mut known: BTreeMap<String, Value> = BTreeMap::new();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        let mut in_comment = false;
        while i < lines.len() {
            let stripped = strip_inline_comments(lines[i]);
            let line = stripped.trim();
            let lineno = i + 1;
            i += 1;
            if in_comment {
                if line.contains("*/") {
                    in_comment = false;
                }
                continue;
            }
            if line.starts_with("/*") {
                in_comment = !line.contains("*/");
                continue;
            }
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            let at = |e: String| format!("include/mpi.h:{lineno}: {e}");
            if let Some(rest) = line.strip_prefix("#define ") {
                h.define(rest, &mut known).map_err(at)?;
                continue;
            }
            if line.starts_with('#') || line == "}" || line.starts_with("extern \"C\"") {
                continue;
            }
            if line.starts_with("typedef struct") && line.ends_with('{') {
                let mut fields = Vec::new();
                loop {
                    let Some(l) = lines.get(i) else {
                        return Err(at("unterminated struct".into()));
                    };
                    let l = strip_inline_comments(l);
                    let l = l.trim();
                    i += 1;
                    if let Some(rest) = l.strip_prefix('}') {
                        let name = rest.trim().trim_end_matches(';').trim().to_string();
                        h.structs.push(Struct {
                            name: name.clone(),
                            fields,
                        });
                        h.typedefs
                            .insert(name.clone(), Typedef::Plain(format!("struct {name}")));
                        h.typedef_order.push(name);
                        break;
                    }
                    let decl = l.trim_end_matches(';').trim().to_string();
                    let name = declared_name(&decl, &|_| false);
                    fields.push(Param { decl, name });
                }
                continue;
            }
            if (line.starts_with("typedef enum") || line.starts_with("enum")) && line.ends_with('{')
            {
                let mut values = Vec::new();
                let mut next = 0i64;
                loop {
                    let Some(l) = lines.get(i) else {
                        return Err(at("unterminated enum".into()));
                    };
                    let l = strip_inline_comments(l);
                    let l = l.trim();
                    i += 1;
                    if l.is_empty() || l.starts_with("/*") {
                        continue;
                    }
                    if let Some(rest) = l.strip_prefix('}') {
                        let name = rest.trim().trim_end_matches(';').trim();
                        let typedef = (!name.is_empty()).then(|| name.to_string());
                        if let Some(t) = &typedef {
                            h.typedefs.insert(t.clone(), Typedef::Plain("int".into()));
                            h.typedef_order.push(t.clone());
                        }
                        h.enums.push(Enum { typedef, values });
                        break;
                    }
                    let item = l.trim_end_matches(',');
                    let (name, value) = match item.split_once('=') {
                        Some((n, e)) => {
                            let v = h.eval(e.trim(), &known).map_err(at)?;
                            match v {
                                Value::Int(v, _) => (n.trim().to_string(), v),
                                _ => return Err(at(format!("enumerator {n} is not an integer"))),
                            }
                        }
                        None => (item.trim().to_string(), next),
                    };
                    next = value + 1;
                    known.insert(name.clone(), Value::Int(value, None));
                    values.push((name, value));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("typedef ") {
                h.typedef(rest.trim_end_matches(';')).map_err(at)?;
                continue;
            }
            if let Some(rest) = line.strip_prefix("struct ") {
                if let Some(tag) = rest.strip_suffix(';') {
                    h.opaque_structs.push(tag.trim().to_string());
                    continue;
                }
            }
            if let Some(rest) = line.strip_prefix("extern ") {
                let decl = rest.trim_end_matches(';').trim();
                let base = decl.split('[').next().unwrap_or(decl);
                let name = identifiers(base)
                    .last()
                    .map(|s| s.to_string())
                    .ok_or_else(|| at("extern without a name".into()))?;
                h.objects.push((decl.to_string(), name));
                continue;
            }
            let is_type = |n: &str| h.is_type(n);
            match parse_prototype(line, &is_type).map_err(at)? {
                Some(f) if f.name.starts_with("PMPI") => h.pmpi_lines.push(f.name),
                Some(f) if is_api_name(&f.name) => h.functions.push(f),
                Some(_) => {}
                None => {
                    // MPIR_Dup_fn and other non-API prototypes are hand-written in crates/capi/c.
                    if !line.contains('(') {
                        return Err(at(format!("unrecognised line: {line}")));
                    }
                }
            }
        }
        h.check_twins()?;
        Ok(h)
    }

    fn eval(&self, expr: &str, known: &BTreeMap<String, Value>) -> Result<Value, String> {
        let toks = tokenize(expr)?;
        let is_type = |n: &str| self.is_type(n);
        let is_ptr = |n: &str| self.is_pointer_type(n);
        let mut e = Eval {
            toks,
            pos: 0,
            known,
            is_type: &is_type,
            is_pointer_type: &is_ptr,
        };
        let v = e.expr()?;
        if e.pos != e.toks.len() {
            return Err(format!("trailing tokens in '{expr}'"));
        }
        Ok(v)
    }

    fn define(&mut self, rest: &str, known: &mut BTreeMap<String, Value>) -> Result<(), String> {
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_string();
        let body = rest[name_end..].trim();
        if rest[name_end..].starts_with('(') {
            return Ok(()); // function-like macro: nothing to export to Rust
        }
        if name == "MPI_INCLUDED" || body.is_empty() {
            return Ok(());
        }
        if let Some(s) = body.strip_prefix('"') {
            let s = s.strip_suffix('"').ok_or("unterminated string")?;
            let v = Value::Str(s.to_string());
            known.insert(name.clone(), v.clone());
            self.defines.push((name, v));
            return Ok(());
        }
        if self.is_type(body) && !known.contains_key(body) {
            self.type_macros.push((name, body.to_string()));
            return Ok(());
        }
        match self.eval(body, known) {
            Ok(v) => {
                known.insert(name.clone(), v.clone());
                self.defines.push((name, v));
            }
            Err(_) => self.skipped_defines.push(name),
        }
        Ok(())
    }

    fn typedef(&mut self, decl: &str) -> Result<(), String> {
        // Function type: `Ret (Name)(params)`
        if let Some(open) = decl.find('(') {
            let close = decl[open..].find(')').ok_or("bad function typedef")? + open;
            let name = decl[open + 1..close].trim().to_string();
            if identifiers(&name).len() != 1 || name.contains('*') {
                return Err(format!(
                    "typedef '{decl}': only function types, not pointers"
                ));
            }
            let ret = decl[..open].trim().to_string();
            let rest = decl[close + 1..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("typedef '{decl}': bad parameter list"))?;
            let is_type = |n: &str| self.is_type(n);
            let (params, variadic) = parse_params(inner, &is_type, &name)?;
            self.typedefs.insert(
                name.clone(),
                Typedef::Function {
                    ret,
                    params,
                    variadic,
                },
            );
            self.typedef_order.push(name);
            return Ok(());
        }
        let name = identifiers(decl)
            .last()
            .map(|s| s.to_string())
            .ok_or("typedef without a name")?;
        let ids = identifiers(decl);
        if ids.first() == Some(&"struct") && ids.len() >= 3 {
            let tag = ids[1].to_string();
            if !self.opaque_structs.contains(&tag) && !self.structs.iter().any(|s| s.name == tag) {
                self.opaque_structs.push(tag);
            }
        }
        self.typedefs
            .insert(name.clone(), Typedef::Plain(decl.to_string()));
        self.typedef_order.push(name);
        Ok(())
    }

    /// Every MPI_/MPIX_ function must have its PMPI_ line and the other way round, so that the
    /// header a program sees declares exactly the symbols the library defines.
    fn check_twins(&self) -> Result<(), String> {
        for f in &self.functions {
            if f.name.starts_with("QMPI_") {
                continue;
            }
            let twin = format!("P{}", f.name);
            if !self.pmpi_lines.contains(&twin) {
                return Err(format!("include/mpi.h declares {} but not {twin}", f.name));
            }
        }
        for p in &self.pmpi_lines {
            if !self.functions.iter().any(|f| f.name == p[1..]) {
                return Err(format!("include/mpi.h declares {p} but not {}", &p[1..]));
            }
        }
        Ok(())
    }
}
