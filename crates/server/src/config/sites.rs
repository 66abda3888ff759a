//! `[[site]]` and `[[site.location]]`: the virtual hosts and their locations as configured.
//! `crate::sites` checks them (the rules that refuse a configuration) and routes by them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::rate_limit::RateLimitConfig;
use super::AccessRule;

/// `auth`: HTTP Basic authentication for a site or a location (see `crate::auth`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The realm the browser shows (nginx `auth_basic "REALM"`).
    pub realm: String,
    /// The htpasswd file (nginx `auth_basic_user_file`): bcrypt, `$apr1$` or `{SHA}` hashes;
    /// re-read on SIGHUP.
    pub users: PathBuf,
    /// Ask for the password over plain HTTP too; off: such a request is refused with 403.
    pub allow_plain: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            realm: "Restricted".into(),
            users: PathBuf::new(),
            allow_plain: false,
        }
    }
}
use super::{CgiConfig, FastcgiConfig, ProxyConfig, StaticConfig};

/// One `[[site]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// Names this site answers (nginx `server_name`): exact (`example.test`) or a wildcard
    /// (`*.example.test`: any name ending in `.example.test`), compared without case, port or
    /// trailing dot.
    pub hosts: Vec<String>,
    /// Answers requests whose host no site names (nginx `default_server`); at most one site.
    /// Without one, the top-level settings answer them.
    pub default: bool,
    /// The site's document root; none: the site serves no files (only its proxies, CGI and
    /// redirects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// How the site's files are served; not set: as the top-level `[static_files]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub static_files: Option<StaticConfig>,
    /// The site's CGI scripts, as the top-level `[cgi]`; not set: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgi: Option<CgiConfig>,
    /// The site's proxy mounts, as the top-level `[[proxy]]`; not set: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy: Vec<ProxyConfig>,
    /// The site's FastCGI mounts, as the top-level `[[fastcgi]]` (their root: the site's);
    /// not set: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fastcgi: Vec<FastcgiConfig>,
    /// `[[site.location]]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub location: Vec<LocationConfig>,
    /// Custom error pages: status (`"404"`) to a path under the site root (nginx
    /// `error_page 404 /404.html`, Caddy `handle_errors`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
    /// Who may be answered by the site (nginx `allow`/`deny` in a `server` block), read in
    /// order against the real client address; refused: 403. Empty: the top-level `access`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<AccessRule>,
    /// `[site.auth]`: a password for the whole site (nginx `auth_basic` in a `server`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthConfig>,
    /// `[site.rate_limit]`: the site's own request rate per client address, as the top-level
    /// `[rate_limit]` but counted apart from it and from every other site's (nginx: a
    /// `limit_req` in the `server` block with a zone of its own); `rate = "off"` exempts the
    /// site. Not set: the top-level `[rate_limit]` applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitConfig>,
}

/// One `[[site.location]]`: an exact `path` or a `prefix`, and what to do there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocationConfig {
    /// Paths starting with this (nginx `location /x/`); the longest matching prefix wins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// This path only (nginx `location = /y`); beats every prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Paths this regular expression matches (nginx `location ~`; `(?i)` in front for
    /// `location ~*`), tried in order after the longest prefix and winning over it; its
    /// groups are `$1` to `$9` in `redirect`, `try_files` and `rewrite`. Rust's `regex`:
    /// linear time whatever the path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// With `prefix`: when this is the longest matching prefix, no `regex` location is tried
    /// (nginx `location ^~`).
    pub skip_regex: bool,
    /// Response header fields added, or replacing one of the same name, on every answer of
    /// the location (Caddy `header`, nginx `add_header ... always`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `"STATUS TARGET"`, e.g. `"301 https://example.test$path?$query"` (nginx `return`,
    /// Caddy `redir`); STATUS one of 301, 302, 303, 307, 308.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<String>,
    /// Files tried in order under the site root (nginx and Caddy `try_files`); the last entry
    /// may instead be a URI served by an internal redirect, or `=CODE`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub try_files: Vec<String>,
    /// Serve this target instead, routed again (nginx `rewrite ... last`, an internal
    /// redirect): `$path`, `$query` and a `regex` location's `$1` to `$9` are filled in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<String>,
    /// Forward the location's requests to this upstream (`http://HOST:PORT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// Pass the location's requests to this FastCGI application (`unix:/PATH` or
    /// `HOST:PORT`) with PHP's defaults under the site root (the settings of the site's first
    /// `[[site.fastcgi]]`, if it has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fastcgi: Option<String>,
    /// Run the executable files of this directory as CGI scripts under the location's prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgi: Option<PathBuf>,
    /// Refuse the location's requests with 403 (nginx `deny all`).
    pub deny: bool,
    /// Who may be answered here (nginx `allow`/`deny` in a `location`), in place of the site's
    /// rules; empty: the site's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<AccessRule>,
    /// A password for the location (nginx `auth_basic` in a `location`), in place of the
    /// site's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthConfig>,
}
