//! The layering of docs/architecture.md, checked on the source: a module may name only the
//! modules of its own layer and the layers below it.
//!
//! From the floor up: `config`, `error`, `events`, `ids`, `mem` (values and hooks every layer
//! uses); `runtime`
//! (bootstrap, the process-wide cell); `transport` (the contract, the dispatcher and the
//! transports); `proto` (frames, protocol machines, policy); `profile` (MPI_T counters);
//! `mpi` (the engine and the MPI objects). Test code inside a file counts like the rest.

use std::path::{Path, PathBuf};

/// The layers, lowest first; modules in one entry are one layer.
const LAYERS: &[&[&str]] = &[
    &["config", "error", "events", "ids", "mem"],
    &["runtime"],
    &["transport"],
    &["proto"],
    &["profile"],
    &["mpi"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source directory") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules a file names as `crate::X` (in `use` lines and in paths), with the
/// line of each.
fn named_modules(text: &str) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                v.push((i + 1, name));
            }
            rest = after;
        }
        // `use crate::{a, b}` names several.
        if let Some(at) = code.find("crate::{") {
            let list = &code[at + "crate::{".len()..];
            for part in list.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    v.push((i + 1, name));
                }
            }
        }
    }
    v
}

#[test]
fn imports_only_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_string())
            .expect("a name");
        let Some(mine) = layer_of(&top) else {
            // lib.rs declares the modules.
            assert_eq!(top, "lib", "{} belongs to no layer", rel.display());
            continue;
        };
        let text = std::fs::read_to_string(f).expect("readable source");
        for (line, name) in named_modules(&text) {
            match layer_of(&name) {
                Some(l) if l > mine => bad.push(format!(
                    "{}:{line}: {top} (layer {mine}) names crate::{name} (layer {l})",
                    rel.display()
                )),
                Some(_) => checked += 1,
                // Macros and re-exports at the root (crate::err!, crate::Result).
                None => {}
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} imports found: is the scan broken?"
    );
    assert!(bad.is_empty(), "imports that point up:\n{}", bad.join("\n"));
}

#[test]
fn the_scan_sees_grouped_and_inline_paths() {
    let v =
        named_modules("use crate::{mpi::x, transport};\nlet a = crate::proto::f(); // crate::mpi");
    let names: Vec<&str> = v.iter().map(|x| x.1.as_str()).collect();
    assert!(names.contains(&"mpi") && names.contains(&"transport") && names.contains(&"proto"));
    assert_eq!(names.iter().filter(|n| **n == "mpi").count(), 1);
}
