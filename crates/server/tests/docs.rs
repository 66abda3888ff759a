//! README.md and BENCHMARKS.md name only what exists: `weft` subcommands and flags (checked
//! against the binary's own help), scripts (present, executable, reading the variables the
//! command sets), and the examples and benchmarks `cargo` is asked to run. weft-bench's
//! commands are checked in crates/bench/tests/docs.rs; scripts/readme_commands.sh runs the
//! README's commands.

use std::collections::HashMap;
use std::process::Command;

#[path = "common/doc_commands.rs"]
mod doc_commands;

use doc_commands::{commands, invocation, repo_root};

/// `weft ARGS --help`, or `None` if weft refuses it (no such subcommand).
fn help(args: &[&str]) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run weft");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True if `help` lists `flag` (as a whole word: `--root` is not `--root-dir`).
fn lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        !help[i + flag.len()..]
            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn the_docs_name_only_weft_subcommands_and_flags_that_exist() {
    let mut helps: HashMap<String, Option<String>> = HashMap::new();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for c in commands() {
        let Some(args) = invocation(&c, "weft") else {
            continue;
        };
        // The synopsis writes optional parts in brackets.
        let args: Vec<&str> = args
            .iter()
            .map(|a| a.trim_matches(|c| c == '[' || c == ']'))
            .filter(|a| !a.is_empty() && *a != "...")
            .collect();
        let Some(sub) = args.first() else {
            continue;
        };
        checked += 1;
        let help = helps.entry(sub.to_string()).or_insert_with(|| help(&[sub]));
        let Some(help) = help else {
            wrong.push(format!("{c}: weft has no subcommand {sub:?}"));
            continue;
        };
        for a in &args[1..] {
            if let Some(flag) = a
                .strip_prefix("--")
                .map(|f| f.split('=').next().unwrap_or(f))
            {
                let flag = format!("--{flag}");
                if !lists(help, &flag) {
                    wrong.push(format!("{c}: `weft {sub}` has no {flag}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The extraction found the commands (the synopsis alone has three).
    assert!(checked >= 8, "only {checked} weft commands found");
}

#[test]
fn the_docs_name_only_scripts_that_exist_with_the_variables_they_read() {
    use std::os::unix::fs::PermissionsExt;
    let mut checked = 0;
    let mut wrong = Vec::new();
    for c in commands() {
        for (i, w) in c.words.iter().enumerate() {
            let Some(at) = w.find("scripts/") else {
                continue;
            };
            let rel = w[at..].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            let path = repo_root().join(rel);
            checked += 1;
            let Ok(meta) = std::fs::metadata(&path) else {
                wrong.push(format!("{c}: no {rel}"));
                continue;
            };
            // A script the command runs (not a file it names, like a config) is executable.
            let runs = i == 0
                || c.words[..i]
                    .iter()
                    .all(|x| x.contains('=') || x == "python3" || x == "bash");
            if runs && (rel.ends_with(".sh") || rel.ends_with(".py")) {
                if meta.permissions().mode() & 0o111 == 0 {
                    wrong.push(format!("{c}: {rel} is not executable"));
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for var in c.words[..i].iter().filter_map(|x| x.split_once('=')) {
                    // Read by the C library, not the script.
                    if var.0 == "MALLOC_ARENA_MAX" {
                        continue;
                    }
                    if !lists(&text, var.0) {
                        wrong.push(format!("{c}: {rel} does not read {}", var.0));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} scripts found");
}

#[test]
fn the_docs_name_only_examples_and_benchmarks_that_exist() {
    let dirs = HashMap::from([
        ("weft", "server"),
        ("weft-http", "http"),
        ("weft-fiber", "fiber"),
        ("weft-bench", "bench"),
    ]);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for c in commands() {
        let w = &c.words;
        if w.first().map(String::as_str) != Some("cargo") {
            continue;
        }
        let arg = |name: &str| w.windows(2).find(|p| p[0] == name).map(|p| p[1].as_str());
        let Some(pkg) = arg("-p") else {
            continue;
        };
        let Some(dir) = dirs.get(pkg) else {
            wrong.push(format!("{c}: no package {pkg}"));
            continue;
        };
        for (flag, sub) in [("--example", "examples"), ("--bench", "benches")] {
            if let Some(name) = arg(flag) {
                checked += 1;
                let path = repo_root().join(format!("crates/{dir}/{sub}/{name}.rs"));
                if !path.is_file() {
                    wrong.push(format!("{c}: no {}", path.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 5, "only {checked} examples and benchmarks found");
}

#[test]
fn the_readmes_configuration_is_a_valid_config_with_the_defaults() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("```toml\n").expect("README's TOML block") + "```toml\n".len();
    let len = readme[start..].find("```").unwrap();
    let cfg = weft::Config::from_toml(&readme[start..start + len])
        .unwrap_or_else(|e| panic!("README's configuration: {e}"));
    // It shows the defaults (a few the README writes out differently: a root, two fiber
    // workers, CGI and proxy entries).
    let d = weft::Config::default();
    assert_eq!(cfg.timeouts, d.timeouts);
    assert_eq!(cfg.limits, d.limits);
    assert_eq!(cfg.fiber, d.fiber);
    assert_eq!(cfg.cache, d.cache);
    assert_eq!(cfg.pipeline, d.pipeline);
    assert_eq!(cfg.status, d.status);
    assert_eq!(cfg.rate_limit, d.rate_limit);
    assert_eq!((cfg.user.as_deref(), cfg.allow_root), (None, false));
}
