//! Automatic HTTPS (ACME, RFC 8555), issue 52: the protocol's client.
//!
//! - [`jws`]: the account key (ECDSA P-256), its JWK and thumbprint, the signed requests.
//! - [`client`]: the directory, nonces, account, orders, authorizations, challenges,
//!   finalization and download over any transport, polling through a clock, and [`client::issue`]
//!   for the whole exchange.
//! - [`transport`]: HTTPS to the CA (rustls, the system's CA bundle or `[acme] ca`).
//! - [`certs`]: the certificate's key and CSR, and the TLS-ALPN-01 challenge certificate.
//!
//! Still to come (issue 52): the challenges answered by the listeners (HTTP-01 on plain ones,
//! TLS-ALPN-01 on TLS ones), the certificate store, renewal and its schedule, and `[acme]` in
//! the configuration. Nothing here is reached from a configuration yet.

pub mod certs;
pub mod client;
pub mod jws;
pub mod transport;

#[cfg(test)]
mod tests;
