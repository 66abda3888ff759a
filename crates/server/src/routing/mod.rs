//! Routing: from a request to the response that answers it. [`app`] holds one
//! configuration generation's handlers and dispatches a request to them; [`sites`] picks the
//! virtual host and location and applies their rules (redirects, `try_files`, error pages,
//! headers). The two recurse into each other (an internal redirect or error page is
//! dispatched again through the app), so they form one layer; everything they use lies below
//! (handlers, cache, config), and the connection driver above calls in.

pub(crate) mod app;
pub mod sites;
