//! `[echo]`, `[health]` and `[status]`: the built-in handlers' sections.

use serde::{Deserialize, Serialize};

use super::Cidr;

/// The built-in echo function of the fibers paper.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EchoConfig {
    /// Where it is mounted; empty unmounts it. Not set: at [`DEFAULT_ECHO_PATH`] on the
    /// repository's sample site only (a root with the marker file of `fileset::is_sample_site`),
    /// so a user's site does not answer arbitrary bytes from its origin unless asked to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where the echo function is mounted on the sample site.
pub const DEFAULT_ECHO_PATH: &str = "/echo";

impl EchoConfig {
    /// The path echo is mounted at for document root `root`; `None`: not mounted.
    pub fn mount_path(&self, root: &std::path::Path) -> Option<&str> {
        match self.path.as_deref() {
            Some("") => None,
            Some(p) => Some(p),
            None => crate::fileset::is_sample_site(root).then_some(DEFAULT_ECHO_PATH),
        }
    }
}

/// The health check for load balancers and orchestrators (see `handlers/health.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Where it is mounted (e.g. `"/healthz"`); empty (the default): not mounted.
    pub path: String,
    /// Write its requests to the access log (off: probes every few seconds would bury the
    /// requests that matter).
    pub log: bool,
}

impl HealthConfig {
    /// True if the check is mounted and `path` (a request's, still encoded) is its path.
    pub fn is(&self, path: &str) -> bool {
        !self.path.is_empty() && path == self.path
    }
}

/// The status page and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusConfig {
    /// Mount `/_weft/status`, `/_weft/status.json` and `/_weft/metrics`.
    pub enabled: bool,
    /// Client networks allowed to read them.
    pub allow: Vec<Cidr>,
}

impl Default for StatusConfig {
    fn default() -> Self {
        StatusConfig {
            enabled: false,
            allow: vec![
                "127.0.0.0/8".parse().expect("valid"),
                "::1/128".parse().expect("valid"),
            ],
        }
    }
}
