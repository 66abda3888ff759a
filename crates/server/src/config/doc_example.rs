//! The annotated configuration examples — the `config` module's doc (`config/mod.rs`),
//! docs/configuration.md's whole file and docs/sites.md's example — name every setting weft
//! reads, and show its default.
//!
//! Two checks per example, each reporting by key so that a drift names itself:
//! - **every key is there**: the fields of each section are asked of serde itself (a probe key
//!   in the section is refused with the list of the fields the section takes), so a field added
//!   to a config struct and left out of the example fails here, optional ones included. A
//!   commented-out line (`# user = "www-data"`, `# [[site]]`) documents its key without being
//!   parsed: for settings that have no default value to show.
//! - **every value is the default**: the example is parsed by [`Config::from_toml`],
//!   serialised, and compared key by key with the serialised [`Config::default`]; entries of a
//!   repeated section (`[[proxy]]`, ...) with that section's own default. The values an
//!   example sets on purpose (a path to show where a certificate goes, a proxy's upstream) are
//!   listed below, each with the value the example must have and why.

use std::collections::{BTreeMap, BTreeSet};

use toml::{Table, Value};

use super::*;

/// The fenced ```toml block that follows `heading` (the first one after it).
fn toml_block_after(text: &str, heading: &str) -> String {
    let at = text
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let start = at + text[at..].find("```toml\n").expect("a ```toml block") + "```toml\n".len();
    let len = text[start..].find("```").expect("the block's end");
    text[start..start + len].to_string()
}

/// The ```toml block of the `config` module's `//!` doc.
fn module_doc_example() -> String {
    let doc: String = include_str!("mod.rs")
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    toml_block_after(&doc, "")
}

const CONFIGURATION: &str = include_str!("../../../../docs/configuration.md");
const SITES: &str = include_str!("../../../../docs/sites.md");

/// docs/configuration.md's ```toml block under "## The configuration file".
fn docs_example() -> String {
    toml_block_after(CONFIGURATION, "\n## The configuration file\n")
}

/// docs/sites.md's ```toml block (its first).
fn docs_sites_example() -> String {
    toml_block_after(SITES, "")
}

/// The fields serde takes in the section opened by `headers` (`[timeouts]`, `[[site]]\n
/// [[site.location]]`, or "" for the top level), or `None` for a free-form table (a map).
fn fields(headers: &str) -> Option<BTreeSet<String>> {
    let probe = format!("{headers}\nweft_probe_key = \"x\"\n");
    // A map takes the key (or refuses its value for another reason).
    let err = Config::from_toml(&probe).err()?.to_string();
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

/// Keys written on commented-out lines (`# key = ...`, `# [a.b]`, `# [[a.b]]`), by the
/// dotted path of their section without indices ("" for the top level, `tls.sni`).
fn commented_keys(example: &str) -> BTreeSet<(String, String)> {
    let is_key = |k: &str| {
        !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    };
    let header = |l: &str| {
        // `[a.b]` or `[[a.b]]`, and whatever follows (a comment).
        let l = l.trim_start();
        let inner = l.strip_prefix("[[").and_then(|l| l.split_once("]]"));
        let inner = inner.or_else(|| l.strip_prefix('[').and_then(|l| l.split_once(']')));
        inner
            .map(|(h, _)| h.trim())
            .filter(|s| is_key(s))
            .map(String::from)
    };
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in example.lines() {
        let line = line.trim();
        if let Some(h) = header(line) {
            section = h;
        } else if let Some(c) = line.strip_prefix('#') {
            let c = c.trim();
            if let Some(h) = header(c) {
                let (parent, key) = h.rsplit_once('.').unwrap_or(("", &h));
                keys.insert((parent.to_string(), key.to_string()));
            } else if let Some((k, _)) = c.split_once('=') {
                if is_key(k.trim()) {
                    keys.insert((section.clone(), k.trim().to_string()));
                }
            }
        }
    }
    keys
}

/// How the completeness walk treats some keys.
struct Walk<'a> {
    commented: BTreeSet<(String, String)>,
    /// Keys (dotted, without indices) that must be present but whose contents are documented
    /// elsewhere, with where.
    elsewhere: &'a [(&'a str, &'a str)],
    missing: Vec<String>,
}

impl Walk<'_> {
    /// Checks that `tables` (one section, or every entry of a repeated one) name every field of
    /// the section opened by `headers`, then walks into their sub-sections.
    fn section(&mut self, headers: &str, path: &str, tables: &[&Table]) {
        let Some(fields) = fields(headers) else {
            return;
        };
        for f in &fields {
            let key = if path.is_empty() {
                f.clone()
            } else {
                format!("{path}.{f}")
            };
            let named = tables.iter().any(|t| t.contains_key(f))
                || self.commented.contains(&(path.to_string(), f.clone()));
            if !named {
                self.missing.push(key.clone());
                continue;
            }
            if self.elsewhere.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let subs: Vec<&Value> = tables.iter().filter_map(|t| t.get(f)).collect();
            let mut sub_tables = Vec::new();
            let mut repeated = false;
            for v in subs {
                match v {
                    Value::Table(t) => sub_tables.push(t),
                    Value::Array(a) if a.iter().all(Value::is_table) && !a.is_empty() => {
                        repeated = true;
                        sub_tables.extend(a.iter().filter_map(Value::as_table));
                    }
                    _ => {}
                }
            }
            if sub_tables.is_empty() {
                continue;
            }
            let header = if repeated {
                format!("{headers}\n[[{key}]]")
            } else {
                format!("{headers}\n[{key}]")
            };
            self.section(&header, &key, &sub_tables);
        }
    }
}

/// Every key of weft's configuration that `example` neither sets nor names on a commented line.
fn missing_keys(example: &str, elsewhere: &[(&str, &str)]) -> Vec<String> {
    let table: Table = example.parse().expect("the example is TOML");
    let mut walk = Walk {
        commented: commented_keys(example),
        elsewhere,
        missing: Vec::new(),
    };
    walk.section("", "", &[&table]);
    walk.missing
}

fn to_value<T: Serialize>(v: &T) -> Value {
    Value::try_from(v).expect("serialisable")
}

/// The default of one entry of each repeated section, by its dotted path without indices.
fn entry_defaults() -> BTreeMap<&'static str, Value> {
    let listen: Listen = DEFAULT_LISTEN.parse().expect("valid");
    BTreeMap::from([
        ("listen", to_value(&listen)),
        ("proxy", to_value(&ProxyConfig::default())),
        ("fastcgi", to_value(&super::FastcgiConfig::default())),
        // An example shows the health checks' table, which a group has none of by default:
        // its keys against the table's defaults.
        (
            "upstream",
            to_value(&super::UpstreamConfig {
                health: Some(super::HealthCheck::default()),
                ..super::UpstreamConfig::default()
            }),
        ),
        ("site", to_value(&super::sites::SiteConfig::default())),
        (
            "site.location",
            to_value(&super::sites::LocationConfig::default()),
        ),
        ("site.proxy", to_value(&ProxyConfig::default())),
        ("site.fastcgi", to_value(&super::FastcgiConfig::default())),
        // A certificate has no default: every key of an entry is the example's own.
        ("tls.sni", Value::Table(Table::new())),
    ])
}

/// `(key, example's value, default)` for every key where the serialised `got` differs from
/// `want`; repeated sections' entries are compared with `entries`' default entry.
fn diff(
    path: &str,
    got: Option<&Value>,
    want: Option<&Value>,
    entries: &BTreeMap<&str, Value>,
    out: &mut Vec<(String, Option<Value>, Option<Value>)>,
) {
    let plain: String = path
        .split('.')
        .map(|p| p.split('[').next().unwrap_or(p))
        .collect::<Vec<_>>()
        .join(".");
    match (got, want) {
        (Some(Value::Table(g)), Some(Value::Table(w))) => {
            let keys: BTreeSet<&String> = g.keys().chain(w.keys()).collect();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(&sub, g.get(k), w.get(k), entries, out);
            }
        }
        (Some(Value::Array(g)), w) if entries.contains_key(plain.as_str()) => {
            let entry = &entries[plain.as_str()];
            for (i, e) in g.iter().enumerate() {
                diff(&format!("{path}[{i}]"), Some(e), Some(entry), entries, out);
            }
            // The default of a repeated section is no entry.
            let empty = Value::Array(Vec::new());
            assert!(w.is_none_or(|w| *w == empty), "{path}: default has entries");
        }
        (g, w) if g != w => out.push((path.to_string(), g.cloned(), w.cloned())),
        _ => {}
    }
}

/// Checks that `example` parses to the defaults but for `deliberate`: (key, the TOML value the
/// example gives it, why it is not the default). Returns the complaints.
fn non_defaults(example: &str, deliberate: &[(&str, &str, &str)]) -> Vec<String> {
    let parsed = Config::from_toml(example).unwrap_or_else(|e| panic!("the example: {e}"));
    let got = to_value(&parsed);
    let want = to_value(&Config::default());
    let mut diffs = Vec::new();
    diff("", Some(&got), Some(&want), &entry_defaults(), &mut diffs);
    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    for (key, g, w) in diffs {
        let shown = |v: &Option<Value>| v.as_ref().map_or("(none)".into(), Value::to_string);
        match deliberate.iter().find(|(k, _, _)| *k == key) {
            Some((_, value, _)) => {
                used.insert(key.clone());
                let parsed: Table = format!("v = {value}").parse().expect("a TOML value");
                if g.as_ref() != parsed.get("v") {
                    wrong.push(format!("{key}: the example has {}, not {value}", shown(&g)));
                }
            }
            None => wrong.push(format!(
                "{key}: the example has {}, the default is {}",
                shown(&g),
                shown(&w)
            )),
        }
    }
    for (key, _, _) in deliberate {
        if !used.contains(*key) {
            wrong.push(format!(
                "{key}: listed as set on purpose, but it is the default"
            ));
        }
    }
    wrong
}

/// Keys whose contents the configuration examples leave to docs/sites.md.
const SITES_ELSEWHERE: &[(&str, &str)] = &[("site", "docs/sites.md")];

/// Settings both configuration examples give on purpose: there is no default to show, or the
/// default is "none" and the example shows what a value looks like.
const SHOWN_ON_PURPOSE: &[(&str, &str, &str)] = &[
    (
        "threads",
        "2",
        "default: one per core, which a file cannot write",
    ),
    (
        "echo.path",
        "\"/echo\"",
        "default: /echo on the sample site only",
    ),
    ("cgi.dir", "\"cgi-bin\"", "default: none (CGI off)"),
    (
        "proxy[0].prefix",
        "\"/api/\"",
        "a [[proxy]] entry has no default prefix",
    ),
    (
        "proxy[0].upstream",
        "\"http://127.0.0.1:9000\"",
        "a [[proxy]] entry has no default upstream",
    ),
    (
        "fastcgi[0].server",
        "\"unix:/run/php/php-fpm.sock\"",
        "a [[fastcgi]] entry has no default server",
    ),
    ("upstream[0].name", "\"app\"", "a group has no default name"),
    (
        "upstream[0].servers",
        "[\"127.0.0.1:9001 weight=2\", \"127.0.0.1:9002\", \"unix:/run/app.sock backup\"]",
        "a group has no default servers",
    ),
    (
        "tls.sni[0].names",
        "[\"example.org\", \"*.example.org\"]",
        "a certificate's names have no default",
    ),
];

fn assert_none(what: &str, list: Vec<String>) {
    assert!(list.is_empty(), "{what}:\n{}", list.join("\n"));
}

#[test]
fn the_module_doc_example_names_every_setting_with_its_default() {
    let example = module_doc_example();
    assert_none(
        "keys the module doc's example leaves out",
        missing_keys(&example, SITES_ELSEWHERE),
    );
    let mut deliberate = SHOWN_ON_PURPOSE.to_vec();
    deliberate.extend([
        ("tls.cert", "\"cert.pem\"", "default: none"),
        ("tls.key", "\"key.pem\"", "default: none"),
        ("tls.sni[0].cert", "\"org.pem\"", "no default"),
        ("tls.sni[0].key", "\"org.key\"", "no default"),
    ]);
    assert_none(
        "the module doc's example against the defaults",
        non_defaults(&example, &deliberate),
    );
}

#[test]
fn the_docs_configuration_file_names_every_setting_with_its_default() {
    let example = docs_example();
    assert_none(
        "keys docs/configuration.md's example leaves out",
        missing_keys(&example, SITES_ELSEWHERE),
    );
    let mut deliberate = SHOWN_ON_PURPOSE.to_vec();
    deliberate.extend([
        (
            "listen[0].name",
            "\"http\"",
            "optional: the name of a socket systemd hands over",
        ),
        ("tls.cert", "\"/etc/weft/cert.pem\"", "default: none"),
        ("tls.key", "\"/etc/weft/key.pem\"", "default: none"),
        ("tls.sni[0].cert", "\"/etc/weft/org.pem\"", "no default"),
        ("tls.sni[0].key", "\"/etc/weft/org.key\"", "no default"),
    ]);
    assert_none(
        "docs/configuration.md's example against the defaults",
        non_defaults(&example, &deliberate),
    );
}

#[test]
fn the_docs_sites_example_names_every_site_and_location_setting() {
    // A site's static_files, cgi and proxy take the top-level sections' settings, which the
    // configuration examples check.
    let elsewhere = [
        ("site.static_files", "[static_files]"),
        ("site.cgi", "[cgi]"),
        ("site.proxy", "[[proxy]]"),
        ("site.fastcgi", "[[fastcgi]]"),
    ];
    let missing: Vec<String> = missing_keys(&docs_sites_example(), &elsewhere)
        .into_iter()
        .filter(|k| k.starts_with("site"))
        .collect();
    assert_none("keys docs/sites.md's example leaves out", missing);
}

#[test]
fn the_checks_see_a_missing_key_a_changed_default_and_a_commented_line() {
    // The probe reads serde's list of fields (a change of its wording fails here, not
    // silently everywhere).
    assert!(fields("").is_some_and(|f| f.contains("root") && f.contains("timeouts")));
    assert!(fields("[timeouts]").is_some_and(|f| f.contains("keepalive")));
    assert!(fields("[[site]]\n[[site.location]]").is_some_and(|f| f.contains("try_files")));
    assert!(fields("[[site]]\n[site.errors]").is_none());
    // The walk finds what an example leaves out, by name, in sections and repeated entries.
    let missing = missing_keys(
        "[timeouts]\nheader_read = \"60s\"\n[[proxy]]\nprefix = \"/a/\"\n",
        &[],
    );
    for key in ["timeouts.keepalive", "limits", "proxy.upstream", "root"] {
        assert!(missing.iter().any(|m| m == key), "{key} in {missing:?}");
    }
    assert!(!missing.iter().any(|m| m == "timeouts.header_read"));
    // A commented line names its key; a commented header its section.
    let missing = missing_keys(
        "# user = \"x\"\n[tls]\n# [[tls.sni]]\n# ocsp = \"o\"\n",
        &[],
    );
    assert!(!missing
        .iter()
        .any(|m| m == "user" || m == "tls.sni" || m == "tls.ocsp"));
    assert!(missing.iter().any(|m| m == "tls.hsts"), "{missing:?}");
    // A value other than the default is reported with both values; an entry with its own.
    let wrong = non_defaults(
        "[timeouts]\nkeepalive = \"5s\"\n\
         [[proxy]]\nprefix = \"/a/\"\nupstream = \"http://h\"\nmax_idle = 3\n",
        &[
            ("proxy[0].prefix", "\"/a/\"", ""),
            ("proxy[0].upstream", "\"http://h\"", ""),
        ],
    );
    assert_eq!(
        wrong,
        [
            "proxy[0].max_idle: the example has 3, the default is 32",
            "timeouts.keepalive: the example has \"5s\", the default is \"75s\"",
        ]
    );
    // A value listed as deliberate must be the one given, and must differ from the default.
    let wrong = non_defaults(
        "threads = 3\n",
        &[("threads", "2", ""), ("user", "\"u\"", "")],
    );
    assert_eq!(
        wrong,
        [
            "threads: the example has 3, not 2",
            "user: listed as set on purpose, but it is the default"
        ]
    );
}
