//! The server crate's modules form layers (issue 49; ARCHITECTURE.md draws them): a module may
//! use only modules of lower layers, so no two modules import each other, directly or in a
//! circle. This test reads `src/` and fails on an import that goes up or sideways, or on a
//! module missing from the table, so the layering cannot regress silently. Test code (files
//! named `tests.rs`, `#[cfg(test)]` items and modules) may use anything and is not read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "../../fiber/tests/layering/mod.rs"]
mod layering;
use layering::code_only;

/// The layers, lowest first. Below them all are the other crates of the workspace: every
/// system call goes through weft-sys (`weft_sys::`, not a module here).
const LAYERS: &[&[&str]] = &[
    // Leaves: the papers' file set, what a request carries.
    &["fileset", "request"],
    // The configuration with every section's type; sockets; the shutdown registry.
    &["config", "net", "shutdown"],
    // Services over the configuration: the response cache, logs, minimum rates, the client
    // address behind a proxy, privilege drop, socket activation.
    &[
        "cache",
        "log",
        "minrate",
        "realip",
        "privdrop",
        "activation",
        "tunnel",
        "roots",
    ],
    // Request bodies, responses, counters.
    &["body", "response", "metrics"],
    // The ACME client, its storage and the answers to its challenges.
    &["acme"],
    // Per-client guards, passwords, compression, certificates and TLS sessions.
    &["limits_ip", "auth", "compress", "tls"],
    // Static files, CGI, the reverse proxy, echo, status.
    &["handlers"],
    // From a request to its response: the app, sites and locations (`routing/`).
    &["routing"],
    // The connection: its prelude, the HTTP/1.1 driver, connection-level policy.
    &["conn"],
    // Who runs which piece of work when: fiber, thread, process, pipeline.
    &["models"],
    // The certificates' keeper: obtains, renews, swaps them into the running generation.
    &["keeper"],
    // Listeners, reload, upgrade: the server an embedder starts.
    &["server"],
    // The commands beside `serve`.
    &["check", "calibrate", "fuzzing"],
];

/// Names the crate root re-exports, and the module each comes from. What it re-exports from
/// another crate (`blocking`, `sys_process`, `raise_nofile_limit`) is not listed: a module
/// names that crate instead.
const ROOT_NAMES: &[(&str, &str)] = &[
    ("app", "routing"),
    ("sites", "routing"),
    ("App", "routing"),
    ("Handler", "routing"),
    ("BodyError", "body"),
    ("RequestBody", "body"),
    ("Config", "config"),
    ("Model", "config"),
    ("Request", "request"),
    ("Body", "response"),
    ("BodyStream", "response"),
    ("HeaderPair", "response"),
    ("HeaderValue", "response"),
    ("Response", "response"),
    ("Tunnel", "tunnel"),
    ("Server", "server"),
    ("ServerBuilder", "server"),
    ("ShutdownHandle", "server"),
];

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&unit))
}

fn unit_of(name: &str) -> String {
    ROOT_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, m)| m)
        .to_string()
}

/// The crate modules `code` uses: every `crate::name` path, and each name of a
/// `use crate::{a, b::c}` group.
fn uses(unit: &str, code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for part in group.split(',') {
                let name = ident(part.trim());
                if !name.is_empty() && name != "self" {
                    found.insert(unit_of(&name));
                }
            }
            continue;
        }
        found.insert(unit_of(&ident(rest)));
    }
    found.remove(unit);
    found
}

/// The violations in one module's code.
fn violations(unit: &str, code: &str) -> Vec<String> {
    let Some(mine) = layer_of(unit) else {
        return vec![format!("module `{unit}` is in no layer: add it to LAYERS")];
    };
    let mut bad = Vec::new();
    for used in uses(unit, code) {
        match layer_of(&used) {
            None => bad.push(format!(
                "`{unit}` uses `crate::{used}`, which is no module of the table (a root \
                 re-export? add it to ROOT_NAMES)"
            )),
            Some(l) if l >= mine => bad.push(format!(
                "`{unit}` (layer {mine}) uses `{used}` (layer {l}): imports go down only"
            )),
            Some(_) => {}
        }
    }
    bad
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            // A `tests/` folder under a module holds its unit tests.
            if p.file_name().is_some_and(|n| n != "tests") {
                files_under(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// Every module file of the crate but the root's, with its unit (the first component of its
/// path under `src/`; `app` and `sites` are `routing`'s).
fn modules() -> Vec<(String, PathBuf, String)> {
    let mut files = Vec::new();
    files_under(&src_dir(), &mut files);
    let mut out = Vec::new();
    for p in files {
        let rel = p.strip_prefix(src_dir()).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let first = first.strip_suffix(".rs").unwrap_or(first);
        if matches!(first, "lib" | "main") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        out.push((unit_of(first), p, src));
    }
    out
}

#[test]
fn every_module_imports_only_lower_layers() {
    let mut bad = Vec::new();
    for (unit, path, src) in modules() {
        for v in violations(&unit, &code_only(&src)) {
            let rel = path.strip_prefix(src_dir()).unwrap_or(&path);
            bad.push(format!("src/{}: {v}", rel.display()));
        }
    }
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn the_table_names_every_module_and_no_other() {
    let present: BTreeSet<String> = modules().into_iter().map(|(u, _, _)| u).collect();
    let listed: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter().map(|s| s.to_string()))
        .collect();
    assert_eq!(present, listed, "LAYERS and src/ disagree");
}

#[test]
fn the_checker_sees_an_import_that_goes_up() {
    // A handler reaching into the connection driver, in both spellings.
    let bad = violations("handlers", "use crate::conn::ConnInfo;\n");
    assert_eq!(bad.len(), 1, "{bad:?}");
    let bad = violations("cache", "use crate::{config::Config, App};\n");
    assert_eq!(bad.len(), 1, "{bad:?}");
    // Sideways is refused too; test code is not read.
    assert_eq!(violations("body", "crate::metrics::x();\n").len(), 1);
    let code = code_only("#[cfg(test)]\nmod t {\n    use crate::server::Server;\n}\n");
    assert!(violations("cache", &code).is_empty());
}
