//! The handlers every model shares: static files, the echo function, the status page.

pub mod echo;
pub mod path;
pub mod range;
pub mod static_files;
pub mod status;
