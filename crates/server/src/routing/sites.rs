//! Virtual hosts (`[[site]]`) and their locations (`[[site.location]]`), as nginx's `server`
//! and `location` blocks and Caddy's site blocks.
//!
//! A request's site is chosen once, by the name of its host (`request_host`): an exact name
//! first (a hash map), then the longest matching wildcard (`*.example.test`, one hash lookup
//! per dot of the name), then the `default = true` site; with none of them, the top-level
//! settings answer as they do without sites. Within the site the location is chosen by the
//! normalised path (the same normalisation the static files use, so `/%61dmin/` and
//! `/x/../admin/` meet the `/admin/` location): an exact `path` first, else the longest
//! `prefix`. Neither choice allocates for a path that needs no normalisation.
//!
//! `Router` is that choice alone, pure data, checked when the configuration is read (every
//! refusal names the file's line and column, see `check`); `Sites` adds each site's
//! handlers (its root's static files, CGI, proxies) and answers the request:
//!
//! - a location's action: `deny` (403), `redirect` (`$path` and `$query` substituted),
//!   `proxy`, `cgi`, `try_files` (candidates under the site root; the last one may be a URI,
//!   served by an internal redirect, or `=CODE`), or none (the site's handlers as usual);
//! - then the site's error pages (`[site.errors]`): an error weft generated itself (not an
//!   upstream's or a script's own answer) is answered with the page's body and the original
//!   status, read from the site root through the static handler (and its cache); a missing
//!   page leaves the built-in body, and a page is never routed, so pages cannot loop;
//! - then the location's `headers`, added or replacing, on every answer of the location.
//!
//! Each site's static files share the process's response cache; their keys start with the
//! site's number (`\0N\0`, a byte no request path has), so two roots never share an entry.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use weft_http::path::normalize;
use weft_http::{site_name, Parser, MAX_SITE_NAME};

use crate::app::{App, HandlersRef, Routed};
use crate::auth::BasicAuth;
use crate::body::RequestBody;
use crate::cache::ResponseCache;
use crate::compress::Compression;
pub use crate::config::sites::{LocationConfig, SiteConfig};
use crate::config::AuthConfig;
use crate::config::{AccessRule, CgiConfig, Config, ConfigError, FastcgiConfig, ProxyConfig};
use crate::handlers::cgi::Cgi;
use crate::handlers::fastcgi::FastCgi;
use crate::handlers::proxy::Proxy;
use crate::handlers::static_files::StaticFiles;
use crate::response::{Body, Response};
use crate::Request;

// Reading a configuration is defined here, above `config`: a configuration is whole only once
// its sites pass the router's rules ([`check`]), and those rules are this module's.
impl Config {
    /// Parses a TOML configuration and checks it whole (its `[[site]]` entries included).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let cfg = Config::parse_toml(text)?;
        check(text, &cfg.site)?;
        Ok(cfg)
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(format!("cannot read: {e}")).in_file(path))?;
        Config::from_toml(&text).map_err(|e| e.in_file(path))
    }
}

/// Statuses a `redirect` may have.
pub const REDIRECT_STATUSES: [u16; 5] = [301, 302, 303, 307, 308];

/// Fields a location may not set: the connection driver writes them (`response.rs`), or they
/// are about the connection rather than the response (RFC 9110 §7.6.1).
const DRIVER_FIELDS: [&str; 9] = [
    "content-length",
    "transfer-encoding",
    "date",
    "server",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// A step of the path from the top of the configuration to a setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(&'static str),
    /// A key the user wrote (a header name, a status).
    Name(String),
    Index(usize),
}

/// A refused configuration: where (as a path of keys) and why.
// Public for the router's benchmark (`benches/sites.rs`), which builds a `Router`; embedders
// configure sites through `Config::site`.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    at: Vec<Seg>,
    msg: String,
}

impl Problem {
    fn new(at: Vec<Seg>, msg: impl Into<String>) -> Problem {
        Problem {
            at,
            msg: msg.into(),
        }
    }

    /// The dotted key, as config errors name it (`site[1].hosts[0]`).
    pub fn key(&self) -> String {
        let mut out = String::new();
        for s in &self.at {
            match s {
                Seg::Key(k) => push_key(&mut out, k),
                Seg::Name(k) => push_key(&mut out, k),
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// The refusal as a [`ConfigError`], at the position of its setting in `text`, the
    /// configuration's source.
    pub fn in_file(&self, text: &str) -> ConfigError {
        let err = ConfigError::new(self.msg.clone()).key(self.key());
        match span_of(text, &self.at) {
            Some(at) => err.at(text, at),
            None => err,
        }
    }
}

fn push_key(out: &mut String, k: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(k);
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key(), self.msg)
    }
}

/// The byte offset in `text` of the setting `at` names (its value, else its key), or of the
/// deepest table on the way that has a position.
fn span_of(text: &str, at: &[Seg]) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item = doc.as_item();
    let mut best = None;
    for seg in at {
        let next = match seg {
            Seg::Key(k) => keyed(item, k, &mut best),
            Seg::Name(k) => keyed(item, k, &mut best),
            Seg::Index(i) => item.get(*i),
        };
        match next {
            Some(n) => {
                item = n;
                // A key the user chose (a header name, a status) is itself what is wrong.
                if let (Some(s), false) = (n.span(), matches!(seg, Seg::Name(_))) {
                    best = Some(s.start);
                }
            }
            None => break,
        }
    }
    best
}

fn keyed<'a>(
    item: &'a toml_edit::Item,
    k: &str,
    best: &mut Option<usize>,
) -> Option<&'a toml_edit::Item> {
    let table = item.as_table_like()?;
    if let Some(s) = table.key(k).and_then(|key| key.span()) {
        *best = Some(s.start);
    }
    table.get(k)
}

/// Checks the `[[site]]` entries of a configuration read from `text`: the refusal, if any,
/// as `line L, column C: KEY: MESSAGE`.
pub(crate) fn check(text: &str, sites: &[SiteConfig]) -> Result<(), ConfigError> {
    Router::new(sites).map(drop).map_err(|p| p.in_file(text))
}

/// A part of a `redirect` target or a `try_files` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// `$path`: the request path as sent (percent-encoded, without the query).
    Path,
    /// `$query`: the query without `?`; `?$query` is left out whole when there is none.
    Query,
    /// `$1` to `$9`: a group of a `regex` location's match (empty if it took no part).
    Capture(usize),
}

/// A target with `$path` and `$query` to fill in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template(Vec<Piece>);

impl Template {
    fn parse(s: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            if i > 0 {
                pieces.push(Piece::Text(rest[..i].to_string()));
            }
            let name_len = rest[i + 1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len() - i - 1);
            let name = &rest[i + 1..i + 1 + name_len];
            pieces.push(match name {
                "path" => Piece::Path,
                "query" => Piece::Query,
                n if n.len() == 1 && (b'1'..=b'9').contains(&n.as_bytes()[0]) => {
                    Piece::Capture(usize::from(n.as_bytes()[0] - b'0'))
                }
                other => {
                    return Err(format!(
                        "unknown variable `${other}` (use $path, $query, or $1 to $9 in a regex \
                         location)"
                    ))
                }
            });
            rest = &rest[i + 1 + name_len..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        Ok(Template(pieces))
    }

    /// The target for a request with `path` and `query`.
    #[cfg(test)]
    pub(crate) fn render(&self, path: &str, query: Option<&str>) -> String {
        self.render_with(path, query, &[])
    }

    /// The highest group (`$N`) the template uses; 0 for none.
    fn captures_used(&self) -> usize {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Capture(n) => *n,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// [`Template::render`] with a regex location's groups (`caps[0]` is the whole match).
    pub(crate) fn render_with(&self, path: &str, query: Option<&str>, caps: &[String]) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Capture(n) => out.push_str(caps.get(*n).map_or("", String::as_str)),
                Piece::Path => out.push_str(path),
                Piece::Query => match query {
                    Some(q) if !q.is_empty() => out.push_str(q),
                    _ => {
                        if out.ends_with('?') {
                            out.pop();
                        }
                    }
                },
            }
        }
        out
    }
}

/// What a location does with its requests (besides its headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// The site's handlers answer, as without the location.
    Pass,
    Deny,
    Redirect {
        status: u16,
        target: Template,
    },
    /// Candidates under the root, then the last entry.
    TryFiles {
        files: Vec<Template>,
        last: Last,
    },
    Proxy(String),
    /// A FastCGI application's address (`unix:/PATH` or `HOST:PORT`).
    Fastcgi(String),
    Cgi(PathBuf),
    /// Serve this target instead (an internal redirect).
    Rewrite(Template),
}

/// The last `try_files` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Last {
    /// A file like the others, else 404.
    File(Template),
    /// A URI (starting with `/` once filled in), served by an internal redirect.
    Uri(Template),
    /// `=CODE`.
    Status(u16),
}

/// One location, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// The location as written (`prefix /x/` or `path /y`), for logs.
    name: String,
    headers: Vec<(String, String)>,
    action: Action,
    /// A `regex` location's expression, for its groups.
    regex: Option<regex::bytes::Regex>,
}

/// A site's location matcher, in nginx's order: an exact path (a hash map); else the longest
/// prefix, if it says `skip_regex`; else the first `regex` that matches, in the file's order
/// (all tried at once by one `RegexSet`); else the longest prefix.
#[derive(Debug, Default)]
struct Locations {
    exact: HashMap<Box<[u8]>, usize>,
    /// Longest first; with `skip_regex`.
    prefixes: Vec<(Box<[u8]>, usize, bool)>,
    /// The regex locations' rule numbers, in order, and their expressions as one set.
    regexes: Vec<usize>,
    set: Option<regex::bytes::RegexSet>,
}

impl Locations {
    fn find(&self, path: &[u8]) -> Option<usize> {
        if let Some(&i) = self.exact.get(path) {
            return Some(i);
        }
        let prefix = self.prefixes.iter().find(|(p, _, _)| path.starts_with(p));
        if let Some(&(_, i, true)) = prefix {
            return Some(i);
        }
        if let Some(set) = &self.set {
            if let Some(k) = set.matches(path).iter().next() {
                return Some(self.regexes[k]);
            }
        }
        prefix.map(|&(_, i, _)| i)
    }
}

/// Largest compiled size of one location's regex (the `regex` crate's own default is 10 MiB;
/// a location's expression is a line of configuration).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// One site's routing data.
#[derive(Debug)]
struct SiteRules {
    /// The first host (or `default`), for logs.
    name: String,
    locations: Locations,
    rules: Vec<Rules>,
    errors: Vec<(u16, String)>,
}

/// The host table and every site's location matcher: which site and location a request
/// goes to, without handlers (so it can be built and measured without any file).
// Public for the router's benchmark (`benches/sites.rs`); not library API.
#[doc(hidden)]
#[derive(Debug)]
pub struct Router {
    exact: HashMap<Box<[u8]>, usize>,
    /// Wildcards by their suffix with its dot (`*.example.test` as `.example.test`).
    wildcard: HashMap<Box<[u8]>, usize>,
    default: Option<usize>,
    sites: Vec<SiteRules>,
}

impl Router {
    /// Checks and compiles `sites`.
    pub fn new(sites: &[SiteConfig]) -> Result<Router, Problem> {
        let mut router = Router {
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            default: None,
            sites: Vec::with_capacity(sites.len()),
        };
        // Where each name was first given, to name both in an overlap.
        let mut seen: HashMap<Box<[u8]>, usize> = HashMap::new();
        for (i, site) in sites.iter().enumerate() {
            let at = |rest: &[Seg]| {
                let mut v = vec![Seg::Key("site"), Seg::Index(i)];
                v.extend_from_slice(rest);
                v
            };
            if site.default {
                if let Some(first) = router.default {
                    return Err(Problem::new(
                        at(&[Seg::Key("default")]),
                        format!("site[{first}] is already the default site"),
                    ));
                }
                router.default = Some(i);
            }
            if site.hosts.is_empty() && !site.default {
                return Err(Problem::new(
                    at(&[]),
                    "a site needs `hosts` or `default = true`",
                ));
            }
            for (j, pattern) in site.hosts.iter().enumerate() {
                let here = at(&[Seg::Key("hosts"), Seg::Index(j)]);
                let (key, wild) =
                    host_pattern(pattern).map_err(|m| Problem::new(here.clone(), m))?;
                let mut seen_key = key.clone().into_vec();
                if wild {
                    seen_key.insert(0, b'*');
                }
                if let Some(&first) = seen.get(&seen_key[..]) {
                    return Err(Problem::new(
                        here,
                        format!("overlapping hosts: `{pattern}` is also a host of site[{first}]"),
                    ));
                }
                seen.insert(seen_key.into(), i);
                if wild {
                    router.wildcard.insert(key, i);
                } else {
                    router.exact.insert(key, i);
                }
            }
            router.sites.push(site_rules(site, &at)?);
        }
        Ok(router)
    }

    /// The site for a `Host` value or authority (`None`: the top-level settings).
    pub fn site(&self, host: &[u8]) -> Option<usize> {
        let mut buf = [0u8; MAX_SITE_NAME];
        let Some(name) = site_name(host, &mut buf) else {
            return self.default;
        };
        if let Some(&i) = self.exact.get(name) {
            return Some(i);
        }
        if !self.wildcard.is_empty() {
            // The longest suffix first: from the first dot on.
            let mut at = 0;
            while let Some(dot) = name[at..].iter().position(|&b| b == b'.') {
                let suffix = &name[at + dot..];
                if let Some(&i) = self.wildcard.get(suffix) {
                    return Some(i);
                }
                at += dot + 1;
            }
        }
        self.default
    }

    /// The location of site `site` for a normalised path (see [`normal_path`]).
    pub fn location(&self, site: usize, path: &[u8]) -> Option<usize> {
        self.sites.get(site)?.locations.find(path)
    }

    /// Site and location for a request's host and path (percent-encoded, as sent): what
    /// [`Sites`] decides per request, alone.
    pub fn route(&self, host: &[u8], path: &str) -> Option<(usize, Option<usize>)> {
        let site = self.site(host)?;
        let loc = normal_path(path)
            .ok()
            .and_then(|p| self.location(site, p.as_bytes()));
        Some((site, loc))
    }

    /// Which site and location would answer `target` for `host`, and why, in words (`weft
    /// check --match`).
    pub fn explain(&self, host: &str, target: &str) -> String {
        let path = target.split_once('?').map_or(target, |(p, _)| p);
        let mut buf = [0u8; MAX_SITE_NAME];
        let name = site_name(host.as_bytes(), &mut buf);
        let site = match name {
            Some(n) if self.exact.contains_key(n) => {
                self.exact.get(n).map(|&i| (i, "its exact name"))
            }
            Some(n) => {
                let mut found = None;
                let mut at = 0;
                while let Some(dot) = n[at..].iter().position(|&b| b == b'.') {
                    if let Some(&i) = self.wildcard.get(&n[at + dot..]) {
                        found = Some((i, "a wildcard name"));
                        break;
                    }
                    at += dot + 1;
                }
                found.or(self
                    .default
                    .map(|i| (i, "default = true (no site names it)")))
            }
            None => self.default.map(|i| (i, "default = true (no usable host)")),
        };
        let Some((i, why)) = site else {
            return format!(
                "host {host:?}: no site names it and none is the default: the top-level \
                 settings answer {path}"
            );
        };
        let rules = &self.sites[i];
        let mut out = format!(
            "host {host:?}: site[{i}] ({}), chosen by {why}\n",
            rules.name
        );
        let Ok(normal) = normal_path(path) else {
            out.push_str(&format!(
                "path {path:?}: not a path in normal form once decoded: refused (400 or 404) \
                 before any location"
            ));
            return out;
        };
        let p = normal.as_bytes();
        let locs = &rules.locations;
        let (loc, how) = if let Some(&l) = locs.exact.get(p) {
            (Some(l), "its exact path")
        } else {
            let prefix = locs.prefixes.iter().find(|(pre, _, _)| p.starts_with(pre));
            match prefix {
                Some(&(_, l, true)) => (Some(l), "the longest prefix, which has skip_regex"),
                _ => match locs.set.as_ref().and_then(|s| s.matches(p).iter().next()) {
                    Some(k) => (
                        Some(locs.regexes[k]),
                        "the first regex that matches, in order",
                    ),
                    None => match prefix {
                        Some(&(_, l, _)) => (Some(l), "the longest prefix (no regex matched)"),
                        None => (None, ""),
                    },
                },
            }
        };
        match loc {
            None => out.push_str(&format!(
                "path {normal}: no location: the site's own handlers answer"
            )),
            Some(l) => {
                let r = &rules.rules[l];
                let does = match &r.action {
                    Action::Pass => "the site's handlers answer".to_string(),
                    Action::Deny => "403 (deny)".into(),
                    Action::Redirect { status, .. } => format!("{status} redirect"),
                    Action::TryFiles { .. } => "try_files".into(),
                    Action::Proxy(up) => format!("proxied to {up}"),
                    Action::Fastcgi(s) => format!("FastCGI at {s}"),
                    Action::Cgi(d) => format!("CGI scripts of {}", d.display()),
                    Action::Rewrite(_) => "rewritten (an internal redirect)".into(),
                };
                out.push_str(&format!(
                    "path {normal}: location[{l}] ({}), chosen by {how}: {does}",
                    r.name
                ));
            }
        }
        out
    }

    /// nginx's rule for a TLS connection (RFC 9110 §15.5.20): with an SNI name, a request
    /// whose host selects another site than the SNI name did is misdirected (421): the
    /// certificate the client checked was not that site's. Without SNI nothing is checked.
    pub fn misdirected(&self, sni: Option<&[u8]>, host: &[u8]) -> bool {
        match sni {
            Some(sni) => self.site(sni) != self.site(host),
            None => false,
        }
    }
}

/// A request path in normal form (`/` plus the normalised segments, `/` at the end if the
/// request had one); borrowed when it needs no normalisation (the common case).
pub(crate) fn normal_path(path: &str) -> Result<Cow<'_, str>, weft_http::path::PathError> {
    let n = normalize(path)?;
    Ok(match n.rel {
        // A path without escapes or dot segments is its own normal form.
        Cow::Borrowed(_) => Cow::Borrowed(path),
        Cow::Owned(rel) => {
            let mut p = String::with_capacity(rel.len() + 2);
            p.push('/');
            p.push_str(&String::from_utf8_lossy(&rel));
            if n.trailing_slash && !rel.is_empty() {
                p.push('/');
            }
            Cow::Owned(p)
        }
    })
}

/// A host pattern's key and whether it is a wildcard.
fn host_pattern(p: &str) -> Result<(Box<[u8]>, bool), String> {
    let (name, wild) = match p.strip_prefix("*.") {
        Some(rest) => (rest, true),
        None => (p, false),
    };
    let bad = || {
        format!(
            "`{p}` is not a host name (a name like `example.test`, or `*.example.test`; no port)"
        )
    };
    if name.is_empty() || name.contains('*') || !weft_http::valid_host(name.as_bytes()) {
        return Err(bad());
    }
    if name.starts_with('[') && wild {
        return Err(bad());
    }
    let mut buf = [0u8; MAX_SITE_NAME];
    let key = site_name(name.as_bytes(), &mut buf).ok_or_else(bad)?;
    // A port was given: `site_name` dropped it.
    if !name
        .trim_end_matches('.')
        .eq_ignore_ascii_case(&String::from_utf8_lossy(key))
    {
        return Err(bad());
    }
    let mut k = Vec::with_capacity(key.len() + 1);
    if wild {
        k.push(b'.');
    }
    k.extend_from_slice(key);
    Ok((k.into(), wild))
}

fn site_rules(site: &SiteConfig, at: &dyn Fn(&[Seg]) -> Vec<Seg>) -> Result<SiteRules, Problem> {
    let mut locations = Locations::default();
    let mut rules = Vec::with_capacity(site.location.len());
    let mut prefixes = Vec::new();
    let mut regex_texts: Vec<String> = Vec::new();
    for (k, loc) in site.location.iter().enumerate() {
        let here = |rest: &[Seg]| {
            let mut v = at(&[Seg::Key("location"), Seg::Index(k)]);
            v.extend_from_slice(rest);
            v
        };
        let mut regex = None;
        let (key, exact, name) = match (&loc.prefix, &loc.path, &loc.regex) {
            (Some(p), None, None) => (p, false, format!("prefix {p}")),
            (None, Some(p), None) => (p, true, format!("path {p}")),
            (None, None, Some(r)) => {
                let re = regex::bytes::RegexBuilder::new(r)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| Problem::new(here(&[Seg::Key("regex")]), format!("{e}")))?;
                regex = Some(re);
                (r, false, format!("regex {r}"))
            }
            _ => {
                return Err(Problem::new(
                    here(&[]),
                    "a location needs exactly one of `prefix`, `path` or `regex`",
                ))
            }
        };
        if loc.skip_regex && loc.prefix.is_none() {
            return Err(Problem::new(
                here(&[Seg::Key("skip_regex")]),
                "`skip_regex` is for a `prefix` location (nginx `location ^~`)",
            ));
        }
        let key_seg = Seg::Key(if exact { "path" } else { "prefix" });
        if regex.is_none() && normal_path(key).ok().as_deref() != Some(key.as_str()) {
            return Err(Problem::new(
                here(&[key_seg]),
                format!("`{key}` must be a path in normal form (starting with `/`, no `%`, `.` or `..` segments, no `//`)"),
            ));
        }
        let taken = if regex.is_some() {
            regex_texts.push(key.clone());
            locations.regexes.push(k);
            false
        } else if exact {
            locations.exact.insert(key.as_bytes().into(), k).is_some()
        } else if prefixes
            .iter()
            .any(|(p, _, _): &(Box<[u8]>, usize, bool)| &**p == key.as_bytes())
        {
            true
        } else {
            prefixes.push((key.as_bytes().into(), k, loc.skip_regex));
            false
        };
        if taken {
            return Err(Problem::new(
                here(&[key_seg]),
                format!("another location of this site has {name}"),
            ));
        }
        let mut headers = Vec::with_capacity(loc.headers.len());
        for (h, v) in &loc.headers {
            let at_h = here(&[Seg::Key("headers"), Seg::Name(h.clone())]);
            if !weft_http::response::valid_name(h.as_bytes()) {
                return Err(Problem::new(
                    at_h,
                    format!("`{h}` is not a header field name"),
                ));
            }
            if DRIVER_FIELDS.iter().any(|d| d.eq_ignore_ascii_case(h)) {
                return Err(Problem::new(
                    at_h,
                    format!(
                        "`{h}` is set by the server for each response; a location cannot set it"
                    ),
                ));
            }
            if !weft_http::response::valid_value(v.as_bytes()) {
                return Err(Problem::new(
                    at_h,
                    "a header value cannot hold control characters",
                ));
            }
            headers.push((h.clone(), v.clone()));
        }
        let mut actions = Vec::new();
        if loc.deny {
            actions.push(("deny", Action::Deny));
        }
        if let Some(r) = &loc.redirect {
            let a = redirect(r).map_err(|m| Problem::new(here(&[Seg::Key("redirect")]), m))?;
            actions.push(("redirect", a));
        }
        if !loc.try_files.is_empty() {
            let a = try_files(&loc.try_files)
                .map_err(|(j, m)| Problem::new(here(&[Seg::Key("try_files"), Seg::Index(j)]), m))?;
            actions.push(("try_files", a));
        }
        if let Some(t) = &loc.rewrite {
            if !(t.starts_with('/') || t.starts_with('$')) {
                return Err(Problem::new(
                    here(&[Seg::Key("rewrite")]),
                    format!("`{t}`: a rewrite's target is a path (starting with `/`)"),
                ));
            }
            let t =
                Template::parse(t).map_err(|m| Problem::new(here(&[Seg::Key("rewrite")]), m))?;
            actions.push(("rewrite", Action::Rewrite(t)));
        }
        if let Some(up) = &loc.proxy {
            if !up.starts_with("http://") {
                return Err(Problem::new(
                    here(&[Seg::Key("proxy")]),
                    format!("`{up}`: the upstream must be an http:// URL"),
                ));
            }
            actions.push(("proxy", Action::Proxy(up.clone())));
        }
        if let Some(server) = &loc.fastcgi {
            if server
                .strip_prefix("unix:")
                .is_some_and(|p| !p.starts_with('/'))
                || (!server.starts_with("unix:") && !server.contains(':'))
            {
                return Err(Problem::new(
                    here(&[Seg::Key("fastcgi")]),
                    format!("`{server}`: expected unix:/PATH or HOST:PORT"),
                ));
            }
            if site.root.is_none() {
                return Err(Problem::new(
                    here(&[Seg::Key("fastcgi")]),
                    "a FastCGI location runs scripts under the root: the site needs a `root`",
                ));
            }
            actions.push(("fastcgi", Action::Fastcgi(server.clone())));
        }
        if let Some(dir) = &loc.cgi {
            if exact || !key.ends_with('/') {
                return Err(Problem::new(
                    here(&[Seg::Key("cgi")]),
                    "a CGI directory is mounted at a `prefix` ending in `/`",
                ));
            }
            actions.push(("cgi", Action::Cgi(dir.clone())));
        }
        if actions.len() > 1 {
            let names: Vec<&str> = actions.iter().map(|(n, _)| *n).collect();
            return Err(Problem::new(
                here(&[Seg::Key(actions[1].0)]),
                format!(
                    "a location does one thing; this one has {}",
                    names.join(" and ")
                ),
            ));
        }
        let action = actions.pop().map_or(Action::Pass, |(_, a)| a);
        // `$1`..`$9` need a regex location with that many groups.
        let used = match &action {
            Action::Redirect { target, .. } | Action::Rewrite(target) => target.captures_used(),
            Action::TryFiles { files, last } => files
                .iter()
                .chain(match last {
                    Last::File(t) | Last::Uri(t) => Some(t),
                    Last::Status(_) => None,
                })
                .map(Template::captures_used)
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        let groups = regex.as_ref().map_or(0, |r| r.captures_len() - 1);
        if used > groups {
            return Err(Problem::new(
                here(&[]),
                format!(
                    "`${used}` names a group this location does not have (a `regex` location's \
                     groups are $1 to $9)"
                ),
            ));
        }
        let serves_files = match &action {
            Action::TryFiles { .. } => true,
            Action::Pass => site.proxy.is_empty() && site.cgi.is_none() && site.fastcgi.is_empty(),
            Action::Rewrite(_) => false,
            _ => false,
        };
        if serves_files && site.root.is_none() {
            return Err(Problem::new(
                here(&[key_seg]),
                "this location serves files but its site has no `root`",
            ));
        }
        rules.push(Rules {
            name,
            headers,
            action,
            regex,
        });
    }
    // Longest first, so the first match is the longest (stable: equal lengths cannot both
    // match one path unless equal, refused above).
    prefixes.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.len()));
    locations.prefixes = prefixes;
    if !regex_texts.is_empty() {
        // Each expression compiled alone above, so the set compiles too (its size aside).
        let set = regex::bytes::RegexSetBuilder::new(&regex_texts)
            .size_limit(REGEX_SIZE_LIMIT * regex_texts.len().max(1))
            .build()
            .map_err(|e| Problem::new(at(&[Seg::Key("location")]), format!("{e}")))?;
        locations.set = Some(set);
    }
    let mut errors = Vec::with_capacity(site.errors.len());
    for (status, page) in &site.errors {
        let here = at(&[Seg::Key("errors"), Seg::Name(status.clone())]);
        let code = status
            .parse::<u16>()
            .ok()
            .filter(|c| (400..=599).contains(c))
            .ok_or_else(|| {
                Problem::new(
                    here.clone(),
                    format!("`{status}` is not an error status (400 to 599)"),
                )
            })?;
        if normal_path(page).ok().as_deref() != Some(page.as_str()) || page.ends_with('/') {
            return Err(Problem::new(
                here,
                format!(
                    "`{page}` must be the path of a file under the site root, like \"/404.html\""
                ),
            ));
        }
        if site.root.is_none() {
            return Err(Problem::new(
                here,
                "error pages are files: the site needs a `root`",
            ));
        }
        errors.push((code, page.clone()));
    }
    let name = site
        .hosts
        .first()
        .cloned()
        .unwrap_or_else(|| "default".into());
    Ok(SiteRules {
        name,
        locations,
        rules,
        errors,
    })
}

fn redirect(r: &str) -> Result<Action, String> {
    let usage = "expected \"STATUS TARGET\" like \"301 https://example.test$path\"";
    let (status, target) = r
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(|| usage.to_string())?;
    let target = target.trim();
    let status: u16 = status.parse().map_err(|_| usage.to_string())?;
    if !REDIRECT_STATUSES.contains(&status) {
        return Err(format!(
            "status {status}: a redirect is 301, 302, 303, 307 or 308"
        ));
    }
    if target.is_empty() || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "{usage}; the target has no spaces or control characters"
        ));
    }
    Ok(Action::Redirect {
        status,
        target: Template::parse(target)?,
    })
}

fn try_files(list: &[String]) -> Result<Action, (usize, String)> {
    let (last_text, files_text) = list.split_last().expect("checked non-empty");
    let mut files = Vec::with_capacity(files_text.len());
    let candidate = |j: usize, f: &str| {
        if !(f.starts_with('/') || f.starts_with("$path")) {
            return Err((
                j,
                format!("`{f}` must be a path under the root (starting with `/` or `$path`)"),
            ));
        }
        Template::parse(f).map_err(|m| (j, m))
    };
    for (j, f) in files_text.iter().enumerate() {
        if f.starts_with('=') {
            return Err((j, format!("`{f}`: only the last entry may be `=CODE`")));
        }
        files.push(candidate(j, f)?);
    }
    let j = list.len() - 1;
    let last = if let Some(code) = last_text.strip_prefix('=') {
        let code = code
            .parse::<u16>()
            .ok()
            .filter(|c| (400..=599).contains(c))
            .ok_or((
                j,
                format!("`{last_text}`: expected =CODE with an error status (400 to 599)"),
            ))?;
        Last::Status(code)
    } else if list.len() == 1 {
        // A lone entry is a file to try, else 404 (nginx wants a fallback after the files).
        Last::File(candidate(j, last_text)?)
    } else {
        // As nginx: the last entry is a URI to serve instead.
        Last::Uri(candidate(j, last_text)?)
    };
    Ok(Action::TryFiles { files, last })
}

/// The host a request is for: the authority of an absolute-form target (RFC 9112 §3.2.2: it
/// wins over `Host`), else the `Host` field; empty if neither.
pub(crate) fn request_host(req: &Request) -> &[u8] {
    req.host_bytes()
}

/// The `auth` of a site or location, its users read now; a warning where it will refuse plain
/// HTTP listeners' requests.
fn load_auth(auth: Option<&AuthConfig>, cfg: &Config) -> std::io::Result<Option<Arc<BasicAuth>>> {
    let Some(a) = auth else {
        return Ok(None);
    };
    if !a.allow_plain && cfg.listeners().iter().any(|l| !l.tls) {
        log::warn!(
            "auth (realm {:?}): requests that come over plain HTTP are refused with 403 \
             (the password would cross the network readable); set allow_plain = true to ask \
             for it there too",
            a.realm
        );
    }
    BasicAuth::load(a).map(|b| Some(Arc::new(b)))
}

/// The endings the site's FastCGI mounts run as scripts, its locations' included (they take
/// the settings of the site's first mount): never served as files anywhere in the site.
fn site_script_endings(sc: &SiteConfig) -> Vec<String> {
    let location = sc
        .location
        .iter()
        .any(|l| l.fastcgi.is_some())
        .then(|| sc.fastcgi.first().cloned().unwrap_or_default());
    FastcgiConfig::script_endings(sc.fastcgi.iter().chain(location.as_ref()))
}

/// A site's handlers, as the top-level ones of [`App`].
#[derive(Debug, Default)]
pub(crate) struct Handlers {
    pub(crate) proxy: Option<Proxy>,
    pub(crate) fastcgi: Option<FastCgi>,
    pub(crate) cgi: Option<Cgi>,
    pub(crate) cgi_ext: Option<Cgi>,
    pub(crate) static_files: Option<StaticFiles>,
}

impl Handlers {
    pub(crate) fn as_ref(&self) -> HandlersRef<'_> {
        HandlersRef {
            proxy: self.proxy.as_ref(),
            fastcgi: self.fastcgi.as_ref(),
            cgi: self.cgi.as_ref(),
            cgi_ext: self.cgi_ext.as_ref(),
            static_files: self.static_files.as_ref(),
        }
    }
}

/// A location's own proxy, FastCGI or CGI mount, and its access rules.
#[derive(Debug, Default)]
struct LocationHandlers {
    proxy: Option<Proxy>,
    fastcgi: Option<FastCgi>,
    cgi: Option<Cgi>,
    /// `access`, when the location has rules of its own.
    access: Vec<AccessRule>,
    /// `auth`, when the location has its own.
    auth: Option<Arc<BasicAuth>>,
}

#[derive(Debug)]
struct Site {
    handlers: Handlers,
    locations: Vec<LocationHandlers>,
    /// `[site.rate_limit]`, if the site has its own.
    rate_limit: Option<crate::limits_ip::RateLimitConfig>,
    /// `access`, when the site has rules of its own.
    access: Vec<AccessRule>,
    /// `[site.auth]`.
    auth: Option<Arc<BasicAuth>>,
}

/// Every configured site with its handlers.
#[derive(Debug)]
pub(crate) struct Sites {
    router: Router,
    sites: Vec<Site>,
    /// Some site has `[site.rate_limit]` (else no request looks its site up for it).
    any_rate_limit: bool,
}

impl Sites {
    /// The sites of `cfg` (`None` without `[[site]]`), their static files answering from
    /// `cache` with `compression`, their proxies naming the `[[upstream]]` `groups`.
    pub(crate) fn new(
        cfg: &Config,
        cache: Option<&Arc<ResponseCache>>,
        compression: Option<&Arc<Compression>>,
        groups: &crate::handlers::proxy::Groups,
    ) -> std::io::Result<Option<Sites>> {
        if cfg.site.is_empty() {
            return Ok(None);
        }
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let router = Router::new(&cfg.site).map_err(|p| invalid(p.to_string()))?;
        let mut sites = Vec::with_capacity(cfg.site.len());
        for (i, (sc, rules)) in cfg.site.iter().zip(&router.sites).enumerate() {
            let named = |e: std::io::Error| {
                std::io::Error::new(e.kind(), format!("site[{i}] ({}): {e}", rules.name))
            };
            let static_cfg = sc
                .static_files
                .clone()
                .unwrap_or_else(|| cfg.static_files.clone());
            let static_files = match &sc.root {
                Some(root) if static_cfg.enabled => Some(
                    StaticFiles::with_cache(root, static_cfg, cache.cloned())
                        .map_err(|e| {
                            named(std::io::Error::new(
                                e.kind(),
                                format!("document root {}: {e}", root.display()),
                            ))
                        })?
                        .with_key_prefix(format!("\0{i}\0").into_bytes())
                        .with_compression(compression.cloned())
                        .with_hidden_endings(site_script_endings(sc)),
                ),
                _ => None,
            };
            // CGI's DOCUMENT_ROOT: the site's root, else the top-level one.
            let doc_root = sc.root.as_deref().unwrap_or(&cfg.root);
            let cgi_cfg = sc.cgi.clone().unwrap_or_default();
            if !cgi_cfg.extensions.is_empty() && sc.root.is_none() {
                return Err(named(invalid(
                    "cgi.extensions runs scripts under the root: the site needs a `root`".into(),
                )));
            }
            let handlers = Handlers {
                proxy: Proxy::new(&sc.proxy, groups).map_err(named)?,
                fastcgi: FastCgi::new(&sc.fastcgi, doc_root).map_err(named)?,
                cgi: Cgi::new(&cgi_cfg, doc_root).map_err(named)?,
                cgi_ext: Cgi::by_extension(&cgi_cfg, doc_root).map_err(named)?,
                static_files,
            };
            let mut locations = Vec::with_capacity(rules.rules.len());
            for (lc, r) in sc.location.iter().zip(&rules.rules) {
                let mount = lc
                    .prefix
                    .clone()
                    .or_else(|| lc.path.clone())
                    .unwrap_or_default();
                let lh = match &r.action {
                    Action::Proxy(up) => LocationHandlers {
                        proxy: Proxy::new(
                            &[ProxyConfig {
                                prefix: mount,
                                upstream: up.clone(),
                                ..ProxyConfig::default()
                            }],
                            groups,
                        )
                        .map_err(named)?,
                        ..LocationHandlers::default()
                    },
                    Action::Fastcgi(server) => LocationHandlers {
                        fastcgi: FastCgi::new(
                            &[FastcgiConfig {
                                prefix: mount,
                                server: server.clone(),
                                // The site's first mount's settings, else the defaults.
                                ..sc.fastcgi.first().cloned().unwrap_or_default()
                            }],
                            doc_root,
                        )
                        .map_err(named)?,
                        ..LocationHandlers::default()
                    },
                    Action::Cgi(dir) => LocationHandlers {
                        cgi: Cgi::new(
                            &CgiConfig {
                                dir: Some(dir.clone()),
                                prefix: mount,
                                extensions: Vec::new(),
                                // The site's (or top-level) timeout and output limits.
                                ..sc.cgi.as_ref().unwrap_or(&cfg.cgi).clone()
                            },
                            doc_root,
                        )
                        .map_err(named)?,
                        ..LocationHandlers::default()
                    },
                    _ => LocationHandlers::default(),
                };
                locations.push(LocationHandlers {
                    access: lc.access.clone(),
                    auth: load_auth(lc.auth.as_ref(), cfg).map_err(named)?,
                    ..lh
                });
            }
            sites.push(Site {
                handlers,
                locations,
                rate_limit: sc.rate_limit.clone(),
                access: sc.access.clone(),
                auth: load_auth(sc.auth.as_ref(), cfg).map_err(named)?,
            });
        }
        let any_rate_limit = sites.iter().any(|s| s.rate_limit.is_some());
        Ok(Some(Sites {
            router,
            sites,
            any_rate_limit,
        }))
    }

    /// The request rate that applies to `req` when its site has one of its own: the site's
    /// zone (1 + its index: every site's clients are counted apart) and its settings. `None`:
    /// the top-level `[rate_limit]` applies.
    pub(crate) fn rate_limit(
        &self,
        req: &Request,
    ) -> Option<(u32, &crate::limits_ip::RateLimitConfig)> {
        if !self.any_rate_limit {
            return None;
        }
        let i = self.router.site(request_host(req))?;
        let zone = u32::try_from(i + 1).ok()?;
        Some((zone, self.sites[i].rate_limit.as_ref()?))
    }

    /// Answers `req` if a site takes it (or names the request to serve in its place); `None`:
    /// the top-level settings answer.
    pub(crate) fn handle(
        &self,
        app: &App,
        req: &Request,
        body: &mut RequestBody<'_>,
    ) -> Option<Routed> {
        let host = request_host(req);
        // The connection's TLS server name; plain HTTP (and a client that sent none) has none.
        let sni = req.tls().and_then(|t| t.sni.as_deref()).map(str::as_bytes);
        if self.router.misdirected(sni, host) {
            log::info!(
                "{}: host {:?} is not the site of the TLS server name; answering 421",
                req.peer_addr(),
                String::from_utf8_lossy(host)
            );
            return Some(Routed::Done(Response::error(421)));
        }
        let i = self.router.site(host)?;
        let (site, rules) = (&self.sites[i], &self.router.sites[i]);
        let loc = normal_path(req.path())
            .ok()
            .and_then(|p| rules.locations.find(p.as_bytes()));
        // The innermost rules: the location's, else the site's, else the top-level ones (as
        // nginx's allow/deny are inherited by a block that has none of its own).
        let access = loc
            .map(|l| &site.locations[l].access)
            .filter(|a| !a.is_empty())
            .or(Some(&site.access).filter(|a| !a.is_empty()))
            .unwrap_or(&app.cfg.access);
        let refused = if !AccessRule::allows(access, req.peer_addr().ip()) {
            log::info!(
                "{}: {} refused by the access rules of site {}; answering 403",
                req.peer_addr(),
                req.path(),
                rules.name
            );
            Some(Response::error(403))
        } else {
            // Then the password, the location's or else the site's (nginx's `satisfy all`).
            loc.and_then(|l| site.locations[l].auth.as_ref())
                .or(site.auth.as_ref())
                .and_then(|a| a.check(req))
        };
        // A wrong password costs the client more of its rate (`[rate_limit]`) than a request.
        if refused.as_ref().is_some_and(|r| r.status == 401)
            && req.header("Authorization").is_some()
        {
            crate::limits_ip::charge(
                &app.clients,
                &app.cfg,
                self.rate_limit(req),
                req,
                crate::auth::FAILURE_COST,
            );
        }
        let routed = match (refused, loc) {
            (Some(r), _) => Routed::Done(r),
            (None, None) => app.dispatch(site.handlers.as_ref(), req, body),
            (None, Some(l)) => {
                self.location(app, site, &rules.rules[l], &site.locations[l], req, body)
            }
        };
        // The request served in this one's place gets the pages and headers of wherever it
        // ends up.
        let mut resp = match routed {
            Routed::Done(resp) => resp,
            again => return Some(again),
        };
        if resp.status >= 400 && !rules.errors.is_empty() {
            resp = error_page(site, rules, req, resp);
        }
        if let Some(l) = loc {
            let headers = &rules.rules[l].headers;
            if !headers.is_empty() {
                resp = with_headers(resp, headers);
            }
        }
        Some(Routed::Done(resp))
    }

    /// Whether the handler [`Sites::handle`] would give `req` may wait on another process
    /// (`App::may_block`); `None` when no site takes it.
    pub(crate) fn may_block(&self, req: &Request) -> Option<bool> {
        let host = request_host(req);
        let sni = req.tls().and_then(|t| t.sni.as_deref()).map(str::as_bytes);
        if self.router.misdirected(sni, host) {
            return Some(false);
        }
        let i = self.router.site(host)?;
        let (site, rules) = (&self.sites[i], &self.router.sites[i]);
        let here = site.handlers.as_ref();
        let loc = normal_path(req.path())
            .ok()
            .and_then(|p| rules.locations.find(p.as_bytes()));
        Some(match loc.map(|l| &rules.rules[l].action) {
            None | Some(Action::Pass) => here.may_block(req),
            Some(Action::Deny | Action::Redirect { .. }) => false,
            Some(Action::Proxy(_) | Action::Cgi(_)) => true,
            // An internal redirect may land anywhere: waits wherever the site could.
            Some(Action::Rewrite(_)) => here.any_dynamic(),
            Some(Action::Fastcgi(_)) => {
                let own = &site.locations[loc.expect("a location's action")];
                own.fastcgi
                    .as_ref()
                    .and_then(|f| f.route(req.path()))
                    .is_none_or(|m| m.takes(req))
            }
            // An internal redirect may land anywhere: waits wherever the site could.
            Some(Action::TryFiles { last, .. }) => {
                matches!(last, Last::Uri(_)) && here.any_dynamic()
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn location(
        &self,
        app: &App,
        site: &Site,
        rules: &Rules,
        own: &LocationHandlers,
        req: &Request,
        body: &mut RequestBody<'_>,
    ) -> Routed {
        let here = site.handlers.as_ref();
        // A regex location's groups, for `$1`..`$9` (matched again: only these actions use
        // them, and only here).
        let caps: Vec<String> = match (&rules.regex, &rules.action) {
            (Some(re), Action::Redirect { .. } | Action::TryFiles { .. } | Action::Rewrite(_)) => {
                normal_path(req.path())
                    .ok()
                    .and_then(|p| {
                        re.captures(p.as_bytes()).map(|c| {
                            c.iter()
                                .map(|m| {
                                    m.map_or(String::new(), |m| {
                                        String::from_utf8_lossy(m.as_bytes()).into_owned()
                                    })
                                })
                                .collect()
                        })
                    })
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        match &rules.action {
            Action::Pass => app.dispatch(here, req, body),
            Action::Deny => {
                log::info!(
                    "{}: {} denied by location {}",
                    req.peer_addr(),
                    req.path(),
                    rules.name
                );
                Routed::Done(Response::error(403))
            }
            Action::Redirect { status, target } => Routed::Done(Response::new(*status).header(
                "Location",
                target.render_with(req.path(), req.query(), &caps),
            )),
            Action::Proxy(_) => app.dispatch(
                HandlersRef {
                    proxy: own.proxy.as_ref(),
                    ..here
                },
                req,
                body,
            ),
            Action::Fastcgi(_) => app.dispatch(
                HandlersRef {
                    fastcgi: own.fastcgi.as_ref(),
                    cgi: None,
                    cgi_ext: None,
                    proxy: None,
                    ..here
                },
                req,
                body,
            ),
            Action::Cgi(_) => app.dispatch(
                HandlersRef {
                    cgi: own.cgi.as_ref(),
                    cgi_ext: None,
                    proxy: None,
                    fastcgi: None,
                    ..here
                },
                req,
                body,
            ),
            Action::TryFiles { files, last } => {
                let Some(files_of) = here.static_files else {
                    return Routed::Done(Response::error(404));
                };
                let (path, query) = (req.path(), req.query());
                for f in files {
                    if let Some(r) = try_file(files_of, req, &f.render_with(path, query, &caps)) {
                        return Routed::Done(r);
                    }
                }
                match last {
                    Last::File(f) => Routed::Done(
                        try_file(files_of, req, &f.render_with(path, query, &caps))
                            .unwrap_or_else(|| Response::error(404)),
                    ),
                    Last::Status(code) => Routed::Done(Response::error(*code)),
                    Last::Uri(t) => {
                        let target = t.render_with(path, query, &caps);
                        internal(rules, req, &target, "try_files", app.cfg.limits.http())
                    }
                }
            }
            Action::Rewrite(t) => {
                let target = t.render_with(req.path(), req.query(), &caps);
                internal(rules, req, &target, "rewrite", app.cfg.limits.http())
            }
        }
    }
}

/// The request an internal redirect (location `rules`' `what`) serves in place of `req`
/// ([`App::handle_redirected`] routes it, bounding a loop); 500 for a target that is not a
/// request target.
fn internal(
    rules: &Rules,
    req: &Request,
    target: &str,
    what: &str,
    limits: weft_http::Limits,
) -> Routed {
    match internal_request(req, target, limits) {
        Some(next) => Routed::Again(next),
        None => {
            log::error!(
                "{}: {what} of location {} to {target:?} refused (not a request target); \
                 answering 500",
                req.peer_addr(),
                rules.name,
            );
            Routed::Done(Response::error(500))
        }
    }
}

/// The answer for `path` under the root if it names a file (or, ending in `/`, a directory
/// with an index); `None` if there is nothing there to serve.
fn try_file(files: &StaticFiles, req: &Request, path: &str) -> Option<Response> {
    let resp = files.handle_path(req, path);
    match resp.status {
        404 => None,
        // The redirect of a directory named without its slash: not a file (nginx's `$uri`
        // does not match a directory either).
        301 => None,
        _ => Some(resp),
    }
}

/// `req` with target `target` instead (same method, fields and connection facts): the
/// request an internal redirect serves.
fn internal_request(req: &Request, target: &str, limits: weft_http::Limits) -> Option<Request> {
    let version = match req.version() {
        weft_http::Version::Http10 => "HTTP/1.0",
        weft_http::Version::Http11 | weft_http::Version::Http2 => "HTTP/1.1",
    };
    let mut raw = format!("{} {target} {version}\r\n", req.method_str()).into_bytes();
    for (name, value) in req.headers() {
        raw.extend_from_slice(name.as_bytes());
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(value);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"\r\n");
    parsed(raw, req, limits)
}

/// The request whose whole head is `raw`, from the same client as `like`.
fn parsed(raw: Vec<u8>, like: &Request, limits: weft_http::Limits) -> Option<Request> {
    let mut parser = Parser::new(limits);
    match parser.parse(&raw) {
        Ok(Some(n)) if n == raw.len() => Some(like.derived(Bytes::from(raw), parser.take_head())),
        _ => None,
    }
}

/// The end of every page `Response::error` builds: how an error weft generated is told from
/// an upstream's or a script's own answer with the same status.
const BUILTIN_ERROR_END: &[u8] = b"<hr><center>weft</center>\r\n</body>\r\n</html>\r\n";

fn is_builtin_error(resp: &Response) -> bool {
    matches!(&resp.body, Body::Bytes(b) if b.ends_with(BUILTIN_ERROR_END))
}

/// `resp` with the site's page for its status as body, if it has one that can be read.
fn error_page(site: &Site, rules: &SiteRules, req: &Request, resp: Response) -> Response {
    let Some((_, page)) = rules.errors.iter().find(|(s, _)| *s == resp.status) else {
        return resp;
    };
    let Some(files) = &site.handlers.static_files else {
        return resp;
    };
    if !is_builtin_error(&resp) {
        return resp;
    }
    // A plain GET of the page: none of the request's conditions or ranges apply to it.
    let get = format!("GET {page} HTTP/1.0\r\n\r\n").into_bytes();
    let Some(page_req) = parsed(get, req, weft_http::Limits::default()) else {
        return resp;
    };
    let found = unprepared(files.handle_path(&page_req, page));
    if found.status != 200 {
        log::warn!(
            "error page {page} of site {} answers {}; sending the built-in page",
            rules.name,
            found.status
        );
        return resp;
    }
    let mut out = Response::new(resp.status);
    out.close = resp.close;
    // The original's fields stay (`Allow` of a 405, `Content-Range` of a 416), but those
    // about its body.
    for (n, v) in resp.headers {
        if !n.eq_ignore_ascii_case("content-type") {
            out.headers.push((n, v));
        }
    }
    if let Some(ct) = found.get_header("Content-Type") {
        out.headers
            .push(("Content-Type".into(), ct.to_vec().into()));
    }
    out.body = found.body;
    out
}

/// A cached response as an ordinary one with the same fields and the cached body (shared,
/// not copied), so that fields can be added to it: the driver sends a cached entry's own
/// encoded head (`conn::encode_prepared`), not the response's fields. Every field of the
/// entry's head is kept (a compressed variant's `Content-Encoding` and `Vary` among them)
/// but `Content-Length`, which the driver writes for the body.
fn unprepared(resp: Response) -> Response {
    let Body::Prepared(entry) = &resp.body else {
        return resp;
    };
    let mut out = Response::new(resp.status);
    for (name, value) in entry.header_fields() {
        if name.eq_ignore_ascii_case(b"Content-Length") {
            continue;
        }
        // The cache wrote these fields itself: names are tokens, so ASCII.
        out = out.header(String::from_utf8_lossy(name).into_owned(), value.to_vec());
    }
    out.body(Body::Bytes(entry.body().clone()))
}

/// `resp` with `headers` added, each replacing any field of the same name.
fn with_headers(resp: Response, headers: &[(String, String)]) -> Response {
    let mut resp = unprepared(resp);
    for (name, value) in headers {
        resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        resp.headers.push((
            Cow::Owned(name.clone()),
            Cow::Owned(value.clone().into_bytes()),
        ));
    }
    resp
}

#[cfg(test)]
mod tests;
