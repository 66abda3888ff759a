//! `[fiber]`: the fiber model's runtime.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, de_size, ser_duration};

/// The fiber model's runtime.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FiberConfig {
    /// Usable stack bytes per connection fiber (pages are touched lazily). The built-in
    /// handlers need far less than the default (see BENCHMARKS.md); handlers that recurse
    /// deeply or keep large buffers on the stack need more. An overflow aborts the process
    /// with a message naming the fiber, never corrupts memory.
    #[serde(deserialize_with = "de_size")]
    pub stack_size: usize,
    /// Between requests, hold a keep-alive connection in the reactor as its socket and a few
    /// hundred bytes, without a fiber or buffers; it gets a pooled fiber when bytes arrive.
    /// `false`: the connection's fiber stays parked in its read.
    pub park_idle: bool,
    /// With `park_idle`: how long a connection's fiber waits for the next request before
    /// the connection is parked without it (at most half the keep-alive timeout). A busy
    /// connection keeps its fiber and buffers from one request to the next; one quiet for
    /// this long gives them back. `"0s"` parks at once.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub linger: Duration,
    /// Most fibers lingering at once per worker; an idle connection beyond them is parked
    /// without a fiber at once. A lingering fiber keeps its stack, which its connection's next
    /// request finds warm only while few connections share the core; with many busy ones a
    /// woken connection runs on the one warm stack the previous gave back instead (fewer
    /// cache misses per request: BENCHMARKS.md, "How many fibers linger").
    pub linger_max: usize,
    /// How connections reach the workers.
    pub accept: AcceptMode,
}

impl Default for FiberConfig {
    fn default() -> Self {
        FiberConfig {
            stack_size: weft_fiber::DEFAULT_STACK_SIZE,
            park_idle: true,
            linger: Duration::from_millis(100),
            linger_max: 64,
            accept: AcceptMode::Reuseport,
        }
    }
}

/// How the fiber model accepts (both measured in BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AcceptMode {
    /// Each worker accepts on its own `SO_REUSEPORT` socket; the kernel spreads connections
    /// and a connection stays on the worker that accepted it.
    Reuseport,
    /// One acceptor fiber on worker 0 hands connections to the workers in turn.
    Dispatch,
}
