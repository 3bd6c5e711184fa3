//! Generates the C ABI surface of libmpi from `include/mpi.h`.
//!
//! 1. Reads every one-line MPI_/MPIX_/QMPI_ prototype in include/mpi.h (build/header.rs).
//! 2. Finds the functions written in Rust: any `fn protean_MPI_X` (or `protean_MPIX_X`,
//!    `protean_QMPI_X`) in `src/**/*.rs`.  They must be `#[no_mangle] pub unsafe extern "C"`.
//! 3. Writes `$OUT_DIR/shim.c`: for each function a strong `PMPI_X` that tail-calls
//!    `protean_MPI_X`, or reports "not implemented", and `MPI_X` as a weak alias of `PMPI_X`
//!    (QMPI_ functions have no alias).  It is compiled, with `c/objects.c` (the exported objects
//!    and MPIR_Dup_fn), into the static archive.
//! 4. Writes `$OUT_DIR/abi.rs` (included by src/abi.rs): Rust types and constants for everything
//!    in mpi.h, `FUNCTIONS`, `MISSING`, and a compile-time check that each Rust implementation has
//!    exactly the type its C prototype implies.
//!
//! Module paths come from file paths (src/p2p.rs -> crate::p2p, src/coll/mod.rs -> crate::coll),
//! so implementations must live at file level, not in inline `mod x { }` blocks.

#[path = "build/ctype.rs"]
mod ctype;
#[path = "build/emit.rs"]
mod emit;
#[path = "build/header.rs"]
mod header;

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Finds `fn protean_<API name>` definitions; returns API name -> Rust module path.
fn scan_implementations(src: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut found = BTreeMap::new();
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    files.sort();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let module = module_path(rel);
        let text = fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        for (lineno, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            // rustfmt breaks a long macro call after `name!(`: its arguments are on the next
            // lines, one per line.
            let joined;
            let code = if code.ends_with("!(") {
                let mut j = code.to_string();
                for next in lines.iter().skip(lineno + 1).take(8) {
                    let next = next.trim();
                    if next.starts_with(')') {
                        break;
                    }
                    j.push_str(next);
                    j.push(' ');
                }
                joined = j;
                joined.as_str()
            } else {
                code
            };
            for name in defined_names(code) {
                if !header::API_PREFIXES.iter().any(|p| name.starts_with(p)) {
                    continue; // protean_unimplemented and other helpers
                }
                if let Some(prev) = found.insert(name.clone(), module.clone()) {
                    return Err(format!(
                        "{}:{}: protean_{name} is also defined in {prev}",
                        file.display(),
                        lineno + 1
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// Names (without `protean_`) that a line of code defines: `fn protean_X`, or a macro call
/// that starts with a list of `protean_X` names (`both_counts!(protean_MPI_Send,
/// protean_MPI_Send_c, ...)` defines both).
fn defined_names(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(pos) = code.find("fn protean_") {
        if pos == 0 || code[..pos].ends_with(' ') {
            return vec![ident(&code[pos + "fn protean_".len()..])];
        }
        return Vec::new();
    }
    let Some(open) = code.find("!(") else {
        return Vec::new();
    };
    if !code[..open]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Vec::new();
    }
    let mut names = Vec::new();
    for part in code[open + 2..].split(',') {
        // The last name may end the call: `m!(protean_A, protean_A_c);`.
        let part = part.trim().trim_end_matches(';').trim_end_matches(')');
        let Some(rest) = part.strip_prefix("protean_") else {
            break;
        };
        let name = ident(rest);
        if name.len() != rest.len() {
            break;
        }
        names.push(name);
    }
    names
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_path(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    let mut path = String::from("crate");
    for p in parts {
        path.push_str("::");
        path.push_str(&p);
    }
    path
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let include = manifest.join("../../include");
    let mpi_h = include.join("mpi.h");
    let src = manifest.join("src");
    let cdir = manifest.join("c");

    println!("cargo:rerun-if-changed={}", mpi_h.display());
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", cdir.display());
    println!("cargo:rerun-if-changed=build");

    let text = fs::read_to_string(&mpi_h).map_err(|e| format!("{}: {e}", mpi_h.display()))?;
    let h = header::Header::parse(&text)?;
    let implemented = scan_implementations(&src)?;
    for name in implemented.keys() {
        if !h.functions.iter().any(|f| &f.name == name) {
            return Err(format!(
                "protean_{name} is defined in {} but include/mpi.h declares no {name}",
                implemented[name]
            ));
        }
    }

    let shim = out_dir.join("shim.c");
    fs::write(&shim, emit::c_shim(&h, &implemented)).map_err(|e| e.to_string())?;
    fs::write(out_dir.join("abi.rs"), emit::abi_rs(&h, &implemented)?)
        .map_err(|e| e.to_string())?;

    cc::Build::new()
        .file(&shim)
        .file(cdir.join("objects.c"))
        .include(&include)
        .flag("-std=c11")
        // Stubs for unimplemented functions ignore their arguments.
        .flag("-Wno-unused-parameter")
        .compile("protean_capi_c");
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("protean-capi build: {e}");
        std::process::exit(1);
    }
}
