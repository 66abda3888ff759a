//! The documents name only what exists, and the configuration reference names what weft reads.
//!
//! - README.md, BENCHMARKS.md and docs/*.md name only `weft` subcommands and flags (checked
//!   against the binary's own help), scripts (present, executable, reading the variables the
//!   command sets), and the examples and benchmarks `cargo` is asked to run. weft-bench's
//!   commands are checked in crates/bench/tests/docs.rs; scripts/checks/readme_commands.sh
//!   runs the commands of README.md and docs/*.md.
//! - docs/configuration.md's reference has a row for every key of every section weft's
//!   configuration takes (asked of serde itself, so that a field added to a config struct and
//!   left out fails here), none for a key weft does not take, and each row's default is the
//!   code's.
//! - Every relative link of those files, of bench/notebook/*.md and of results/*/report.md
//!   leads to a file of the repository, and a `#fragment` to a heading of the Markdown file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use toml::{Table, Value};
use weft::Config;

mod common;
#[path = "common/doc_commands.rs"]
mod doc_commands;

use common::launch::RUN_LIMIT;
use common::Launch;
use doc_commands::{commands, invocation, repo_root, words, DocCommand};

/// The Markdown files directly under `dir` (relative to the repository's root), sorted, as
/// paths from the root.
fn markdown_in(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(repo_root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    out.sort();
    out
}

/// The commands of one Markdown file, read as `doc_commands::commands` reads README.md and
/// BENCHMARKS.md: every line of a shell or plain code block, and every inline code span.
fn commands_in(file: &'static str) -> Vec<DocCommand> {
    let text = std::fs::read_to_string(repo_root().join(file)).expect(file);
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    // The prose, and for each of its lines (end in `prose`, line number in the file).
    let mut prose = String::new();
    let mut prose_lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(rest.trim().to_string()),
            };
            continue;
        }
        match fence.as_deref() {
            Some("" | "sh" | "bash" | "console") => out.push(DocCommand {
                file,
                line: i + 1,
                words: words(line),
            }),
            Some(_) => {}
            None => {
                prose.push_str(line);
                prose.push('\n');
                prose_lines.push((prose.len(), i + 1));
            }
        }
    }
    let mut at = 0;
    while let Some(start) = prose[at..].find('`').map(|s| at + s) {
        let Some(len) = prose[start + 1..].find('`') else {
            break;
        };
        let line = prose_lines
            .iter()
            .find(|&&(end, _)| end > start)
            .map_or(0, |&(_, line)| line);
        let span = &prose[start + 1..start + 1 + len];
        out.push(DocCommand {
            file,
            line,
            words: words(&span.replace('\n', " ")),
        });
        at = start + len + 2;
    }
    out.retain(|c| !c.words.is_empty());
    out
}

/// Every command a reader is shown: README.md's and BENCHMARKS.md's (`doc_commands`), and
/// docs/*.md's.
fn all_commands() -> Vec<DocCommand> {
    let mut out = commands();
    for file in markdown_in("docs") {
        out.extend(commands_in(Box::leak(file.into_boxed_str())));
    }
    out
}

/// `weft ARGS --help`, or `None` if weft refuses it (no such subcommand).
fn help(args: &[&str]) -> Option<String> {
    let out = Launch::new().args(args).arg("--help").run(RUN_LIMIT);
    out.success().then_some(out.stdout)
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
    for c in all_commands() {
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
    for c in all_commands() {
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
    for c in all_commands() {
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

const CONFIGURATION: &str = "docs/configuration.md";

fn configuration_md() -> String {
    std::fs::read_to_string(repo_root().join(CONFIGURATION)).expect(CONFIGURATION)
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((i + 1, line))
    })
}

/// A heading's text (`## Text` -> `Text`), or `None` for any other line.
fn heading(line: &str) -> Option<&str> {
    let text = line.trim_start_matches('#');
    (text.len() < line.len() && text.starts_with(' ')).then(|| text.trim())
}

#[test]
fn the_configuration_example_is_a_valid_config_with_the_defaults() {
    let text = configuration_md();
    let at = text
        .find("\n## The configuration file\n")
        .expect("docs/configuration.md: \"The configuration file\"");
    let start = at + text[at..].find("```toml\n").expect("its TOML block") + "```toml\n".len();
    let len = text[start..].find("```").unwrap();
    let cfg = Config::from_toml(&text[start..start + len])
        .unwrap_or_else(|e| panic!("docs/configuration.md's example: {e}"));
    // It shows the defaults (a few it writes out differently: a root, two fiber workers, CGI
    // and proxy entries).
    let d = Config::default();
    assert_eq!(cfg.timeouts, d.timeouts);
    assert_eq!(cfg.limits, d.limits);
    assert_eq!(cfg.fiber, d.fiber);
    assert_eq!(cfg.cache, d.cache);
    assert_eq!(cfg.pipeline, d.pipeline);
    assert_eq!(cfg.status, d.status);
    assert_eq!(cfg.rate_limit, d.rate_limit);
    assert_eq!((cfg.user.as_deref(), cfg.allow_root), (None, false));
}

/// A default as the reference writes it.
#[derive(Debug, Clone, PartialEq)]
enum Documented {
    /// A TOML value in backticks: the code's default.
    Value(String),
    /// "none ..." or "not set ...": the key has no value unless one is given.
    Unset,
}

/// One row of the reference: `| `key` | default | nginx | what |`.
#[derive(Debug, Clone)]
struct Row {
    line: usize,
    /// The dotted section without indices: "" for the top level, `tls.sni`, `site.location`.
    section: String,
    key: String,
    default: Result<Documented, String>,
}

/// The reference's rows. A section starts at a heading whose first code span is its TOML
/// header (`[timeouts]`, `[[site.location]]`), or at the heading "Top-level keys"; any other
/// heading ends it. A row is a table line whose first cell is a key in backticks.
fn reference_rows(text: &str) -> Vec<Row> {
    let mut section: Option<String> = None;
    let mut rows = Vec::new();
    for (line, l) in prose_lines(text) {
        if let Some(h) = heading(l) {
            section = if h == "Top-level keys" {
                Some(String::new())
            } else {
                h.split('`')
                    .nth(1)
                    .filter(|s| s.starts_with('['))
                    .map(|s| s.trim_matches(|c| c == '[' || c == ']').to_string())
            };
            continue;
        }
        let Some(section) = &section else {
            continue;
        };
        if !l.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        let key = cells[1].trim_matches('`').to_string();
        let cell = cells.get(2).copied().unwrap_or("");
        let default = if cell.len() > 1
            && cell.starts_with('`')
            && cell.ends_with('`')
            && cell.matches('`').count() == 2
        {
            Ok(Documented::Value(cell.trim_matches('`').to_string()))
        } else if cell.starts_with("none") || cell.starts_with("not set") {
            Ok(Documented::Unset)
        } else {
            Err(format!(
                "the default {cell:?} is neither a TOML value in backticks nor \"none\" or \
                 \"not set\""
            ))
        };
        rows.push(Row {
            line,
            section: section.clone(),
            key,
            default,
        });
    }
    rows
}

/// The message of `Config::from_toml`'s refusal of `text`, if it refuses it.
fn refusal(text: &str) -> Option<String> {
    Config::from_toml(text).err().map(|e| e.to_string())
}

/// The fields serde takes in the section that `headers` opens (`""` for the top level,
/// `[timeouts]`, `[[site]]\n[[site.location]]`), or `None` if it is not a section of named
/// fields (a value, a list of values, or a free-form table such as `[site.errors]`): a probe
/// key there is refused with the list of the fields the section takes.
fn fields(headers: &str) -> Option<BTreeSet<String>> {
    let err = refusal(&format!("{headers}\nweft_probe_key = \"x\"\n"))?;
    let list = err
        .split_once("unknown field `weft_probe_key`, expected")?
        .1;
    // "one of `a`, `b`", "`a` or `b`", "`a`": every name is between backquotes.
    Some(
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect(),
    )
}

/// One section of the configuration as serde takes it.
#[derive(Debug, Default)]
struct Section {
    /// Keys that hold a value (a number, a string, a list, a free-form table).
    keys: BTreeSet<String>,
    /// Keys that open a section of their own (`[a.b]` or `[[a.b]]`).
    sections: BTreeSet<String>,
}

/// Every section of the configuration, by dotted path ("" for the top level), found by asking
/// serde of each key whether it opens a table or an array of tables.
fn config_sections() -> BTreeMap<String, Section> {
    fn walk(headers: &str, path: &str, out: &mut BTreeMap<String, Section>) {
        let names = fields(headers).unwrap_or_else(|| {
            panic!(
                "no field list for {path:?}: {:?}",
                refusal(&format!("{headers}\nweft_probe_key = 1\n"))
            )
        });
        let mut section = Section::default();
        for f in names {
            let sub = if path.is_empty() {
                f.clone()
            } else {
                format!("{path}.{f}")
            };
            let table = format!("{headers}\n[{sub}]");
            let array = format!("{headers}\n[[{sub}]]");
            if fields(&table).is_some() {
                walk(&table, &sub, out);
                section.sections.insert(f);
            } else if fields(&array).is_some() {
                walk(&array, &sub, out);
                section.sections.insert(f);
            } else {
                section.keys.insert(f);
            }
        }
        out.insert(path.to_string(), section);
    }
    let mut out = BTreeMap::new();
    walk("", "", &mut out);
    out
}

/// Sections a site takes with the keys of a top-level one: the reference gives them a row in
/// `[[site]]` that points to the other (their keys must stay the same).
const SAME_KEYS_AS: &[(&str, &str)] = &[
    ("site.static_files", "static_files"),
    ("site.cgi", "cgi"),
    ("site.proxy", "proxy"),
    ("site.fastcgi", "fastcgi"),
    ("site.rate_limit", "rate_limit"),
];

/// What a section needs to parse before a key of it can be set: the keys an entry of a
/// repeated section must have (each documented without a default).
fn prelude(section: &str) -> String {
    const ENTRIES: &[(&str, &str)] = &[
        ("listen", "[[listen]]\naddr = \"127.0.0.1:8080\"\n"),
        (
            "proxy",
            "[[proxy]]\nprefix = \"/p/\"\nupstream = \"http://127.0.0.1:9\"\n",
        ),
        (
            "fastcgi",
            "[[fastcgi]]\nserver = \"127.0.0.1:9\"\n",
        ),
        (
            "upstream",
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n",
        ),
        (
            "upstream.health",
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n[upstream.health]\n",
        ),
        (
            "tls.sni",
            "[[tls.sni]]\nnames = [\"a.test\"]\ncert = \"a.pem\"\nkey = \"a.key\"\n",
        ),
        ("site", "[[site]]\nhosts = [\"a.test\"]\n"),
        (
            "site.auth",
            "[[site]]\nhosts = [\"a.test\"]\n[site.auth]\nusers = \"/etc/weft/htpasswd\"\n",
        ),
        (
            "site.location.auth",
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\n\
             [site.location.auth]\nusers = \"/etc/weft/htpasswd\"\n",
        ),
        (
            "site.location",
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\n",
        ),
    ];
    match ENTRIES.iter().find(|(s, _)| *s == section) {
        Some((_, p)) => p.to_string(),
        None if section.is_empty() => String::new(),
        None => format!("[{section}]\n"),
    }
}

/// `text` parsed, then written back as `weft check` prints it (every default filled in).
fn effective(text: &str) -> Result<String, String> {
    let cfg = Config::from_toml(text).map_err(|e| e.to_string())?;
    cfg.to_toml().map_err(|e| e.to_string())
}

/// The value of `section.key` in an effective configuration (an array's first entry).
fn lookup(effective: &str, section: &str, key: &str) -> Option<Value> {
    let table: Table = effective.parse().expect("weft writes TOML");
    let mut at = Value::Table(table);
    for part in section.split('.').filter(|p| !p.is_empty()).chain([key]) {
        at = match at {
            Value::Table(mut t) => t.remove(part)?,
            Value::Array(mut a) if !a.is_empty() => match a.swap_remove(0) {
                Value::Table(mut t) => t.remove(part)?,
                _ => return None,
            },
            _ => return None,
        };
        if let Value::Array(a) = &at {
            if a.first().is_some_and(Value::is_table) {
                at = a[0].clone();
            }
        }
    }
    Some(at)
}

/// Everything wrong with the reference in `text`, one line each.
fn reference_problems(text: &str) -> Vec<String> {
    let sections = config_sections();
    let rows = reference_rows(text);
    let mut wrong = Vec::new();
    let dotted = |s: &str, k: &str| {
        if s.is_empty() {
            k.to_string()
        } else {
            format!("{s}.{k}")
        }
    };
    // Every key documented, and nothing else.
    let mut documented: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in &rows {
        if !documented
            .entry(r.section.as_str())
            .or_default()
            .insert(r.key.as_str())
        {
            wrong.push(format!(
                "line {}: {} has two rows",
                r.line,
                dotted(&r.section, &r.key)
            ));
        }
    }
    for (path, section) in &sections {
        if let Some((_, like)) = SAME_KEYS_AS.iter().find(|(s, _)| s == path) {
            let of = |p: &str| {
                let s = &sections[p];
                s.keys.union(&s.sections).cloned().collect::<BTreeSet<_>>()
            };
            if of(path) != of(like) {
                wrong.push(format!(
                    "{path}: its keys are no longer those of [{like}], as the reference says"
                ));
            }
            continue;
        }
        let Some(rows) = documented.get(path.as_str()) else {
            wrong.push(format!(
                "[{path}]: no section of the reference (a heading with `[{path}]`)"
            ));
            continue;
        };
        let expected: BTreeSet<String> = section
            .keys
            .iter()
            .cloned()
            .chain(
                section
                    .sections
                    .iter()
                    .filter(|s| SAME_KEYS_AS.iter().any(|(p, _)| *p == dotted(path, s)))
                    .cloned(),
            )
            .collect();
        for k in &expected {
            if !rows.contains(k.as_str()) {
                wrong.push(format!("{}: missing from the reference", dotted(path, k)));
            }
        }
        for k in rows {
            if !expected.contains(*k) {
                wrong.push(format!(
                    "{}: in the reference, but weft takes no such key",
                    dotted(path, k)
                ));
            }
        }
    }
    for path in documented.keys() {
        if !sections.contains_key(*path) {
            wrong.push(format!(
                "[{path}]: a section of the reference, but weft has none"
            ));
        }
    }
    // Every default the code's.
    for r in &rows {
        let key = dotted(&r.section, &r.key);
        let prelude = prelude(&r.section);
        let base = match effective(&prelude) {
            Ok(b) => b,
            Err(e) => {
                wrong.push(format!("{key}: its section does not parse alone: {e}"));
                continue;
            }
        };
        let code = lookup(&base, &r.section, &r.key);
        let shown = |v: &Option<Value>| v.as_ref().map_or("none".into(), Value::to_string);
        match &r.default {
            Err(e) => wrong.push(format!("line {}: {key}: {e}", r.line)),
            Ok(Documented::Unset) => {
                let required = prelude
                    .lines()
                    .any(|l| l.starts_with(&format!("{} =", r.key)));
                if code.is_some() && !required {
                    wrong.push(format!(
                        "line {}: {key}: the reference says none, the default is {}",
                        r.line,
                        shown(&code)
                    ));
                }
            }
            Ok(Documented::Value(v)) => match effective(&format!("{prelude}{} = {v}\n", r.key)) {
                Ok(with) if with == base => {}
                Ok(_) => wrong.push(format!(
                    "line {}: {key}: the reference says {v}, the default is {}",
                    r.line,
                    shown(&code)
                )),
                Err(e) => wrong.push(format!(
                    "line {}: {key}: the reference's default {v} is refused: {e}",
                    r.line
                )),
            },
        }
    }
    wrong
}

#[test]
fn the_configuration_reference_has_every_key_with_its_default() {
    let wrong = reference_problems(&configuration_md());
    assert!(
        wrong.is_empty(),
        "{CONFIGURATION}, against the code:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reference_check_sees_a_missing_key_a_changed_default_and_a_stale_row() {
    let text = configuration_md();
    let rows = reference_rows(&text);
    // Every section, repeated ones and those of a site included, has its rows.
    for s in ["", "listen", "timeouts", "tls.sni", "site", "site.location"] {
        assert!(rows.iter().any(|r| r.section == s), "no rows for {s:?}");
    }
    // The probe reads serde's list of fields (a change of its wording fails here, not
    // silently everywhere).
    assert!(fields("").is_some_and(|f| f.contains("root") && f.contains("timeouts")));
    assert!(fields("[[site]]\n[[site.location]]").is_some_and(|f| f.contains("try_files")));
    assert!(fields("[[site]]\n[site.errors]").is_none());
    let edit = |from: &str, to: &str| {
        assert_eq!(text.matches(from).count(), 1, "{from:?}");
        reference_problems(&text.replacen(from, to, 1))
    };
    let keepalive = "| `keepalive` | `\"75s\"` |";
    // A key left out.
    let wrong = edit(keepalive, "| keepalive | `\"75s\"` |");
    assert!(
        wrong
            .iter()
            .any(|w| w == "timeouts.keepalive: missing from the reference"),
        "{wrong:?}"
    );
    // A default that is not the code's, a value and a "none".
    let wrong = edit(keepalive, "| `keepalive` | `\"60s\"` |");
    assert!(
        wrong.iter().any(|w| w
            .ends_with("timeouts.keepalive: the reference says \"60s\", the default is \"75s\"")),
        "{wrong:?}"
    );
    let wrong = edit("| `backlog` | `4096` |", "| `backlog` | none |");
    assert!(
        wrong
            .iter()
            .any(|w| w.ends_with("listen.backlog: the reference says none, the default is 4096")),
        "{wrong:?}"
    );
    // A size written another way is the same default.
    assert!(edit("| `max_body` | `1048576` |", "| `max_body` | `\"1m\"` |").is_empty());
    // A key weft does not take.
    let wrong = edit(keepalive, "| `keepalive_max` | `\"75s\"` |");
    assert!(
        wrong
            .iter()
            .any(|w| w == "timeouts.keepalive_max: in the reference, but weft takes no such key"),
        "{wrong:?}"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as
/// `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    prose_lines(&text)
        .filter_map(|(_, l)| heading(l))
        .map(anchor)
        .collect()
}

/// `(line, target)` of every inline link and image of `text` outside code blocks and spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line, l) in prose_lines(text) {
        // Code spans hold examples, not links.
        let l: String = l
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = l.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            out.push((line, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn the_docs_links_lead_to_files_of_the_repository() {
    let root = repo_root().canonicalize().unwrap();
    let mut files = vec!["README.md".to_string(), "BENCHMARKS.md".to_string()];
    files.extend(markdown_in("docs"));
    files.extend(markdown_in("bench/notebook"));
    let mut reports: Vec<String> = std::fs::read_dir(root.join("results"))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let report = format!("results/{name}/report.md");
            root.join(&report).is_file().then_some(report)
        })
        .collect();
    reports.sort();
    assert!(reports.len() >= 7, "only {reports:?}");
    files.extend(reports);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (to, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let dest: PathBuf = if to.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(to)
            };
            let inside = dest
                .canonicalize()
                .is_ok_and(|d| d.starts_with(&root) && d.exists());
            if !inside {
                wrong.push(format!(
                    "{file}:{line}: {target}: no such file in the repository"
                ));
            } else if !fragment.is_empty()
                && dest.extension().is_some_and(|e| e == "md")
                && !anchors(&dest).contains(fragment)
            {
                wrong.push(format!(
                    "{file}:{line}: {target}: no heading #{fragment} there"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 50, "only {checked} links found");
}

/// docs/from-nginx.md's weft configuration is one weft reads (its files are the reader's).
#[test]
fn the_nginx_translation_is_a_valid_config() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/from-nginx.md"),
    )
    .expect("docs/from-nginx.md");
    let start = text.find("```toml\n").expect("its TOML block") + "```toml\n".len();
    let len = text[start..].find("```").expect("the block's end");
    let cfg = Config::from_toml(&text[start..start + len])
        .unwrap_or_else(|e| panic!("docs/from-nginx.md's configuration: {e}"));
    assert_eq!(cfg.limits.keepalive_requests, 1000);
    assert_eq!(cfg.site.len(), 1);
    assert_eq!(cfg.site[0].location.len(), 5);
}
