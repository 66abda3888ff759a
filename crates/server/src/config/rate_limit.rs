//! `[rate_limit]` and the size of the per-client table (`limits.client_zone`): the settings
//! of the guards in `crate::limits_ip`, beside the rest of the configuration.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Default of `limits.client_zone`: 65,536 slots of 16 bytes, 1 MiB (nginx's `limit_conn_zone`
/// and `limit_req_zone` take a size in bytes; 1 MiB there holds about 16,000 addresses).
pub const DEFAULT_ZONE: usize = 65_536;

/// A request rate: `N` requests per second or per minute (nginx's `100r/s`, `30r/m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests allowed per period.
    pub count: u32,
    /// The period is a minute (`r/m`); otherwise a second (`r/s`).
    pub per_minute: bool,
}

impl Rate {
    /// Time between two requests at this rate (T), in nanoseconds.
    pub fn interval_ns(self) -> u64 {
        let period: u64 = if self.per_minute {
            60_000_000_000
        } else {
            1_000_000_000
        };
        (period / u64::from(self.count.max(1))).max(1)
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        let bad = || format!("expected a rate like \"100r/s\" or \"30r/m\", got {s:?}");
        let t = s.trim();
        let (num, per_minute) = if let Some(n) = t.strip_suffix("r/s") {
            (n, false)
        } else if let Some(n) = t.strip_suffix("r/m") {
            (n, true)
        } else {
            return Err(bad());
        };
        let count: u32 = num.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(format!("rate {s:?}: must be at least 1 request"));
        }
        Ok(Rate { count, per_minute })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}r/{}",
            self.count,
            if self.per_minute { "m" } else { "s" }
        )
    }
}

fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    let text = String::deserialize(d)?;
    if text.is_empty() || text == "off" {
        return Ok(None);
    }
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

fn ser_rate<S: Serializer>(r: &Option<Rate>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(&r.to_string()),
        None => s.serialize_str("off"),
    }
}

/// `[rate_limit]`: requests per client address (nginx `limit_req_zone ... rate=` and
/// `limit_req ... burst= nodelay`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Requests per second (`"100r/s"`) or minute (`"30r/m"`) per client; `"off"` (default).
    #[serde(deserialize_with = "de_rate", serialize_with = "ser_rate")]
    pub rate: Option<Rate>,
    /// Requests over the rate let through at once (nginx `burst`, default 0).
    pub burst: u32,
}
