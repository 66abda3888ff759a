//! The runtime's modules form layers (issue 27; the `lib.rs` module doc and ARCHITECTURE.md
//! state them): a module may use only modules of lower layers, so no two modules import each
//! other, directly or in a circle. This test reads `src/` and fails on an import that goes up
//! or sideways, or on a module missing from the table, so the layering cannot regress
//! silently. Test code (`#[cfg(test)]` items) may use anything and is not read.
// Reads src/: miri's isolation forbids file access.
#![cfg(not(miri))]

use std::collections::BTreeSet;
use std::path::Path;

mod layering;
use layering::code_only;

/// The layers, lowest first. `sync::lock` (the runtime's internal lock) is a leaf; the rest of
/// `sync` (the fiber-aware `Mutex`, channels, `WaitGroup`) sits above the scheduler. Below
/// every layer is another crate, weft-sys (every raw system call: `weft_sys::`, which is not
/// a `crate::` path and so never an import going up).
const LAYERS: &[&[&str]] = &[
    // Leaves: use nothing of the crate.
    &["protocol", "sync::lock", "readiness", "pool", "deadline"],
    // Building blocks: stacks, the overflow report, the shared state and counters, the idle
    // table.
    &["stack", "guard", "state", "idle"],
    // A fiber's shared half and the workers' message type.
    &["task"],
    // The fibers' timers.
    &["timer"],
    // The narrow interface between fibers and their worker.
    &["sched"],
    // A wake-up that ends blocked waits (a server's shutdown for its accept loops).
    &["interrupt"],
    // What fibers call: readiness waits, join cells, sync types, sleeping.
    &["reactor", "join", "sync", "time"],
    // The worker loop; pipes; the blocking pool's front.
    &["worker", "io", "blocking"],
    // Sockets (they park idle connections in the worker).
    &["net"],
    // The runtime that starts the workers.
    &["runtime"],
];

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&unit))
}

/// The module (layer-table unit) a path segment after `crate::` names.
fn unit_of(first: &str, second: Option<&str>) -> String {
    if first == "sync" && second == Some("lock") {
        "sync::lock".into()
    } else {
        first.into()
    }
}

/// The crate modules `code` (from module `unit`) uses: every `crate::a[::b]` path, and
/// `super::b` inside `sync/`.
fn uses(unit: &str, code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        // `weft_crate::` or similar is not ours.
        if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        let first = ident(rest);
        let after = &rest[first.len()..];
        let second = after.strip_prefix("::").map(ident);
        found.insert(unit_of(&first, second.as_deref()));
    }
    if unit == "sync" || unit == "sync::lock" {
        for (i, _) in code.match_indices("super::") {
            if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let second = ident(&code[i + "super::".len()..]);
            found.insert(unit_of("sync", Some(&second)));
        }
    }
    found.remove(unit);
    found
}

/// The violations in one module's code: imports of a module in the same or a higher layer, or
/// of a name the table does not know.
fn violations(unit: &str, code: &str) -> Vec<String> {
    let Some(mine) = layer_of(unit) else {
        return vec![format!("module `{unit}` is in no layer: add it to LAYERS")];
    };
    let mut bad = Vec::new();
    for used in uses(unit, code) {
        // `crate::sync` from inside `sync` is the module itself.
        if unit == "sync::lock" && used == "sync" {
            bad.push("`sync::lock` uses `sync`: the leaf lock must use nothing".into());
            continue;
        }
        match layer_of(&used) {
            None => bad.push(format!(
                "`{unit}` uses `crate::{used}`, which is no module of the table (a root \
                 re-export? name the module instead)"
            )),
            Some(l) if l >= mine => bad.push(format!(
                "`{unit}` (layer {mine}) uses `{used}` (layer {l}): imports go down only"
            )),
            Some(_) => {}
        }
    }
    bad
}

fn src_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module of the crate but the root, with its source.
fn modules() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (dir, prefix) in [(src_dir(), ""), (src_dir().join("sync"), "sync")] {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        entries.sort();
        for p in entries {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            let unit = match (prefix, stem.as_str()) {
                ("", "lib") => continue,
                ("", s) => s.to_string(),
                ("sync", "lock") => "sync::lock".to_string(),
                ("sync", _) => "sync".to_string(),
                _ => unreachable!(),
            };
            out.push((unit, std::fs::read_to_string(&p).unwrap()));
        }
    }
    out
}

#[test]
fn every_module_imports_only_lower_layers() {
    let mut bad = Vec::new();
    for (unit, src) in modules() {
        bad.extend(violations(&unit, &code_only(&src)));
    }
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn the_table_names_every_module_and_no_other() {
    let found: BTreeSet<String> = modules().into_iter().map(|(u, _)| u).collect();
    let table: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .map(|s| s.to_string())
        .collect();
    assert_eq!(found, table, "src/ and LAYERS disagree");
    // A module listed twice would have two layers.
    assert_eq!(LAYERS.iter().map(|l| l.len()).sum::<usize>(), table.len());
}

#[test]
fn the_crate_doc_states_the_same_layers() {
    // The lib.rs module doc lists the layers lowest first, one numbered item each (`N. ` and
    // continuation lines indented by three spaces), naming each module in backquotes.
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let doc: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let mut items: Vec<String> = Vec::new();
    let mut in_list = false;
    for l in doc {
        let numbered = l
            .split_once(". ")
            .is_some_and(|(n, _)| n.parse::<usize>().is_ok());
        if numbered {
            items.push(l.to_string());
            in_list = true;
        } else if in_list && l.starts_with("   ") {
            let last = items.last_mut().unwrap();
            last.push(' ');
            last.push_str(l.trim());
        } else {
            in_list = false;
        }
    }
    assert_eq!(
        items.len(),
        LAYERS.len(),
        "numbered layers in the lib.rs doc: {items:#?}"
    );
    for (n, (item, layer)) in items.iter().zip(LAYERS).enumerate() {
        assert!(item.starts_with(&format!("{}. ", n + 1)), "{item}");
        let named: BTreeSet<&str> = item
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|m| layer_of(m).is_some())
            .collect();
        let want: BTreeSet<&str> = layer.iter().copied().collect();
        assert_eq!(named, want, "lib.rs doc item {}: {item}", n + 1);
    }
}

/// The checker itself: it must see an upward import, a sideways one, a root re-export, and
/// skip comments and test code.
#[test]
fn the_checker_finds_what_it_should() {
    let up = "use crate::worker::Local;\nfn f() {}\n";
    assert_eq!(violations("task", &code_only(up)).len(), 1);
    let sideways = "use crate::join::JoinInner;\n";
    assert_eq!(violations("reactor", &code_only(sideways)).len(), 1);
    let root = "fn f() -> bool { crate::in_fiber() }\n";
    assert_eq!(violations("reactor", &code_only(root)).len(), 1);
    let grouped =
        "pub(crate) fn g() { crate::sync::lock::Lock::new(()); crate::sync::Mutex::new(()); }\n";
    assert_eq!(
        uses("state", grouped),
        ["sync", "sync::lock"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    let hidden = "// use crate::runtime::Shared;\n/// [`crate::worker::Local`]\n\
                  #[cfg(test)]\nmod tests {\n    use crate::runtime::Runtime;\n    fn f() {\n        \
                  let _ = crate::worker::current_local();\n    }\n}\n\
                  #[cfg(test)]\nfn helper() -> usize { crate::net::X }\n\
                  fn real() { crate::protocol::notify(); weft_sys::mem::page_size(); }\n";
    let code = code_only(hidden);
    assert_eq!(
        uses("stack", &code),
        ["protocol".to_string()].into_iter().collect(),
        "only the non-test, non-comment path counts: {code:?}"
    );
    assert!(violations("stack", &code).is_empty());
    assert_eq!(
        violations("nowhere", "").len(),
        1,
        "an unknown module is reported"
    );
    let inside_sync = "use super::lock::Lock;\nuse super::signal::Signal;\n";
    assert_eq!(
        uses("sync", inside_sync),
        ["sync::lock".to_string()].into_iter().collect()
    );
}
