//! The access log's target and `[timing]`.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// No access log (`"off"`, the default).
    Off,
    /// Lines to standard output (`"stdout"` or `"-"`).
    Stdout,
    /// Lines appended to this file, reopened on SIGUSR1.
    File(PathBuf),
}

impl FromStr for AccessLogTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "off" | "" => AccessLogTarget::Off,
            "stdout" | "-" => AccessLogTarget::Stdout,
            path => AccessLogTarget::File(path.into()),
        })
    }
}

impl Serialize for AccessLogTarget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AccessLogTarget::Off => s.serialize_str("off"),
            AccessLogTarget::Stdout => s.serialize_str("stdout"),
            AccessLogTarget::File(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AccessLogTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Per-request phase timings (the CGI paper's question: where does a request's time go?).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingConfig {
    /// Histograms of every phase of every request (a few clock reads per request).
    pub phases: bool,
    /// A `Server-Timing` header on each response with its accept, head, body and handler
    /// phases (implies measuring them).
    pub server_timing: bool,
}

impl TimingConfig {
    /// True if requests are timed at all.
    pub fn on(&self) -> bool {
        self.phases || self.server_timing
    }
}
