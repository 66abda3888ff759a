//! How settings are read and written: durations, sizes, rates, and errors in the user's terms
//! ("expected a duration like ..., got -3").

use std::fmt;
use std::time::Duration;

use serde::{Deserializer, Serializer};

pub(super) fn de_threads<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    const THREADS: &str = "a number of worker threads >= 1";
    match scalar(d, THREADS)? {
        Scalar::Int(n) if n >= 1 => usize::try_from(n).map(Some).map_err(|_| wrong(THREADS, n)),
        other => Err(wrong(THREADS, other)),
    }
}

/// Parses `"60s"`, `"500ms"`, `"2m"`, `"1h"` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration `{s}`"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in `{s}` (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("bad duration `{s}`: {e}"))
}

/// Writes a duration as `parse_duration` reads it back: whole seconds as `"75s"`, else
/// milliseconds (`"250ms"`), else fractional seconds.
pub fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}", d.as_secs_f64())
    }
}

pub(super) fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// A setting's value as written, so that a value of the wrong type or range can be reported
/// in the user's terms ("expected a duration like ..., got -3") instead of serde's.
enum Scalar {
    Int(i128),
    Float(f64),
    Text(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(n) => write!(f, "{n}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// The error for a setting that is not `expected`; `from_toml` adds its key and position.
fn wrong<E: serde::de::Error>(expected: &str, got: impl fmt::Display) -> E {
    E::custom(format!("expected {expected}, got {got}"))
}

/// Reads a number or a string; anything else is refused as not `expected`.
fn scalar<'de, D: Deserializer<'de>>(d: D, expected: &'static str) -> Result<Scalar, D::Error> {
    struct V(&'static str);
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Scalar;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
            Ok(Scalar::Int(v.into()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
            Ok(Scalar::Int(v.into()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
            Ok(Scalar::Float(v))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
            Ok(Scalar::Text(v.to_string()))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
            Err(wrong(self.0, v))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<Scalar, A::Error> {
            Err(wrong(self.0, "an array"))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Scalar, A::Error> {
            Err(wrong(self.0, "a table"))
        }
    }
    d.deserialize_any(V(expected))
}

const DURATION: &str = "a duration like \"75s\" or a number of seconds >= 0";

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match scalar(d, DURATION)? {
        Scalar::Int(n) if n >= 0 => u64::try_from(n)
            .map(Duration::from_secs)
            .map_err(|_| wrong(DURATION, n)),
        Scalar::Float(x) if x >= 0.0 => {
            Duration::try_from_secs_f64(x).map_err(|_| wrong(DURATION, x))
        }
        Scalar::Text(t) => parse_duration(&t).map_err(|_| wrong(DURATION, Scalar::Text(t))),
        other => Err(wrong(DURATION, other)),
    }
}

const SIZE: &str = "a number of bytes >= 0 or a size like \"64k\" or \"1m\"";

/// Parses `"65536"`, `"64k"`, `"1m"` or `"1g"` (KiB, MiB, GiB, as nginx reads sizes).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

pub(crate) fn de_size<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    let v = scalar(d, SIZE)?;
    let bytes = match &v {
        Scalar::Int(n) => u64::try_from(*n).ok(),
        Scalar::Text(t) => parse_size(t),
        Scalar::Float(_) => None,
    };
    bytes
        .and_then(|b| T::try_from(b).ok())
        .ok_or_else(|| wrong(SIZE, v))
}

const SECONDS_PER: &str = "a number of seconds >= 0 like 1.5e-5";

/// A cost in seconds per request or per byte (`[pipeline] c1`, `c2`).
pub(super) fn de_seconds_per<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match scalar(d, SECONDS_PER)? {
        Scalar::Int(n) if n >= 0 => Ok(n as f64),
        Scalar::Float(x) if x.is_finite() && x >= 0.0 => Ok(x),
        other => Err(wrong(SECONDS_PER, other)),
    }
}

const FRACTION: &str = "a fraction from 0 to 1 like 0.1";

pub(super) fn de_fraction<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match scalar(d, FRACTION)? {
        Scalar::Int(n @ 0..=1) => Ok(n as f64),
        Scalar::Float(x) if (0.0..=1.0).contains(&x) => Ok(x),
        other => Err(wrong(FRACTION, other)),
    }
}
