//! `[process]`: the process model.

use serde::{Deserialize, Serialize};

/// The `process` model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessConfig {
    /// Live connection processes per process listener (Apache `MaxRequestWorkers`, default
    /// 256): children serving a request, or lingering for the next one while fewer than
    /// three quarters of them are live. Idle and half-sent connections are held by the
    /// master and count only against `limits.max_connections`; a whole request head that
    /// finds no child free waits in the master until one exits.
    pub max_children: usize,
    /// Write completion (Apache event MPM's): a child whose client falls behind hands the
    /// rest of its response to the master, which sends it, and is free for the next
    /// connection (on by default). Off: the child sends to the end itself, holding a child
    /// per slow reader (the paper's forked server).
    pub write_completion: bool,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            max_children: 256,
            write_completion: true,
        }
    }
}
