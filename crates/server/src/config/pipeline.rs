//! `[pipeline]`: the pipeline model's stages, queues and controller.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, de_fraction, de_seconds_per, ser_duration};

/// The `pipeline` model: its stages' threads, queues and controller.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(from = "PipelineToml")]
pub struct PipelineConfig {
    /// Most threads of all four stages together (the paper's M). Every stage starts this many
    /// threads at once and parks those it is not allotted; none are created later.
    pub threads_total: usize,
    /// Threads the accept stage starts with (and returns to when the load falls).
    pub accept: usize,
    /// Threads the receive stage starts with.
    pub receive: usize,
    /// Threads the process stage starts with.
    pub process: usize,
    /// Threads the send stage starts with.
    pub send: usize,
    /// Capacity of each stage's task queue; a full queue makes the stage before it wait.
    pub queue: usize,
    /// How often the load monitor samples and the controller decides.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub period: Duration,
    /// Move threads between stages; `false` keeps the initial allocation.
    pub controller: bool,
    /// Seconds of server capacity one request costs, independent of its size (U = c1*W + c2*R).
    pub c1: f64,
    /// Seconds of server capacity one response byte costs.
    pub c2: f64,
    /// The controller grows a stage only while at least this fraction of the CPU it may run on
    /// is idle (0 disables the check): with the CPU saturated, more threads only contend.
    pub min_idle_cpu: f64,
}

impl Eq for PipelineConfig {}

impl Default for PipelineConfig {
    fn default() -> Self {
        let threads_total = 16;
        let [accept, receive, process, send] = PipelineConfig::default_initial(threads_total);
        PipelineConfig {
            threads_total,
            accept,
            receive,
            process,
            send,
            queue: 1024,
            period: Duration::from_millis(250),
            controller: true,
            // `weft calibrate` on the 2-core development machine (pipeline model, 1k to 1m
            // files, clients on the same machine; R^2 0.76): about 65,000 small responses/s
            // or 6.5 GB/s of large ones fill it. Run it on yours.
            c1: 1.5e-5,
            c2: 1.5e-10,
            min_idle_cpu: 0.1,
        }
    }
}

/// `[pipeline]` as written: a stage whose threads are not given gets its share of the default
/// initial allocation for the `threads_total` that is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PipelineToml {
    threads_total: usize,
    accept: Option<usize>,
    receive: Option<usize>,
    process: Option<usize>,
    send: Option<usize>,
    queue: usize,
    #[serde(deserialize_with = "de_duration")]
    period: Duration,
    controller: bool,
    #[serde(deserialize_with = "de_seconds_per")]
    c1: f64,
    #[serde(deserialize_with = "de_seconds_per")]
    c2: f64,
    #[serde(deserialize_with = "de_fraction")]
    min_idle_cpu: f64,
}

impl Default for PipelineToml {
    fn default() -> Self {
        let d = PipelineConfig::default();
        PipelineToml {
            threads_total: d.threads_total,
            accept: None,
            receive: None,
            process: None,
            send: None,
            queue: d.queue,
            period: d.period,
            controller: d.controller,
            c1: d.c1,
            c2: d.c2,
            min_idle_cpu: d.min_idle_cpu,
        }
    }
}

impl From<PipelineToml> for PipelineConfig {
    fn from(t: PipelineToml) -> Self {
        let [a, r, p, s] = PipelineConfig::default_initial(t.threads_total);
        PipelineConfig {
            threads_total: t.threads_total,
            accept: t.accept.unwrap_or(a),
            receive: t.receive.unwrap_or(r),
            process: t.process.unwrap_or(p),
            send: t.send.unwrap_or(s),
            queue: t.queue,
            period: t.period,
            controller: t.controller,
            c1: t.c1,
            c2: t.c2,
            min_idle_cpu: t.min_idle_cpu,
        }
    }
}

impl PipelineConfig {
    /// The default initial allocation for `total` threads: one accept and one receive thread,
    /// and process and send a quarter of the total each, at most 4 (1 1 4 4 at M = 16). The
    /// start is what a CPU-bound load keeps (the controller grows no stage without idle CPU),
    /// and under saturating static loads 1 2 2 2, the previous default, served 6-11% less than
    /// this start in all but one series point (BENCHMARKS.md, the pipeline's controller
    /// against fixed allocations);
    /// from it a blocking load still reaches 1 1 13 1 by growing process and borrowing send's
    /// idle threads.
    pub fn default_initial(total: usize) -> [usize; 4] {
        let later = (total.saturating_sub(2) / 2).clamp(1, 4);
        [1, 1, later, later]
    }

    /// The initial allocation in pipeline order: accept, receive, process, send.
    pub fn initial(&self) -> [usize; 4] {
        [self.accept, self.receive, self.process, self.send]
    }

    /// Checks that every stage starts with a thread and that they fit in `threads_total`.
    pub fn validate(&self) -> Result<(), PipelineError> {
        let init = self.initial();
        if init.contains(&0) {
            return Err(PipelineError::StageWithoutThread);
        }
        let sum: usize = init.iter().sum();
        if sum > self.threads_total {
            return Err(PipelineError::TooManyThreads {
                initial: sum,
                total: self.threads_total,
            });
        }
        if self.queue == 0 || self.period.is_zero() {
            return Err(PipelineError::NotPositive);
        }
        if !(self.c1 >= 0.0 && self.c2 >= 0.0 && self.c1.is_finite() && self.c2.is_finite()) {
            return Err(PipelineError::BadCost);
        }
        if !(0.0..=1.0).contains(&self.min_idle_cpu) {
            return Err(PipelineError::BadIdleCpu);
        }
        Ok(())
    }
}

/// Why a `[pipeline]` section cannot run (its message names the section and the keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineError {
    /// A stage starts with no thread.
    StageWithoutThread,
    /// The stages' initial threads together exceed `threads_total`.
    TooManyThreads {
        /// The stages' initial threads, summed.
        initial: usize,
        /// `threads_total`.
        total: usize,
    },
    /// `queue` or `period` is zero.
    NotPositive,
    /// `c1` or `c2` is negative or not finite.
    BadCost,
    /// `min_idle_cpu` is outside 0..=1.
    BadIdleCpu,
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::StageWithoutThread => {
                f.write_str("[pipeline] every stage needs at least one thread")
            }
            PipelineError::TooManyThreads { initial, total } => write!(
                f,
                "[pipeline] the initial threads ({initial}) exceed threads_total ({total})"
            ),
            PipelineError::NotPositive => {
                f.write_str("[pipeline] queue and period must be positive")
            }
            PipelineError::BadCost => {
                f.write_str("[pipeline] c1 and c2 must be finite and non-negative")
            }
            PipelineError::BadIdleCpu => {
                f.write_str("[pipeline] min_idle_cpu must be between 0 and 1")
            }
        }
    }
}

impl std::error::Error for PipelineError {}
