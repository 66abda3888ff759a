//! Concurrency models: who runs which piece of a request's work, and when. Each model only
//! accepts connections and drives `conn::serve` (or its stages); none re-implements HTTP.

pub mod fiber;
pub mod thread;
