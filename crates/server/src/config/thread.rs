//! `[thread]`: the OS threads that serve connections.

use serde::{Deserialize, Serialize};

use super::de::de_size;

/// The threads that run handlers outside fibers: the thread model's one per connection and
/// the pipeline model's stage threads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThreadConfig {
    /// Stack of each such thread (Apache `ThreadStackSize`). The built-in handlers need far
    /// less (see the fiber stack test); 256k keeps thousands of connection threads affordable
    /// in address space. Handlers that recurse deeply or keep large buffers on the stack need
    /// more.
    #[serde(deserialize_with = "de_size")]
    pub stack_size: usize,
}

impl Default for ThreadConfig {
    fn default() -> Self {
        ThreadConfig {
            stack_size: 256 * 1024,
        }
    }
}
