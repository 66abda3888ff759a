//! Automatic HTTPS (ACME, RFC 8555; `[acme]`): certificates obtained and renewed by weft.
//!
//! - [`jws`]: the account key (ECDSA P-256), its JWK and thumbprint, the signed requests.
//! - [`client`]: the directory, nonces, account, orders, authorizations, challenges,
//!   finalization and download over any transport, polling through a clock, and [`client::issue`]
//!   for the whole exchange.
//! - [`transport`]: HTTPS to the CA (rustls, the system's CA bundle or `[acme] ca`).
//! - [`certs`]: the certificate's key and CSR, and the TLS-ALPN-01 challenge certificate.
//! - [`store`]: the storage (account, certificates, keys, challenge answers, locks).
//! - [`serve`]: the names managed, the placeholder served until a certificate arrives, and
//!   the challenges' answers on the listeners (TLS-ALPN-01 in `crate::tls`'s resolver,
//!   HTTP-01 in `conn::policy`, ahead of everything else).
//!
//! The background thread that orders, renews, backs off and swaps in is `crate::keeper`, at
//! the server's layer (it reloads the running server).

pub mod certs;
pub mod client;
pub mod jws;
pub mod serve;
pub mod staple;
pub mod store;
pub mod transport;

#[cfg(test)]
mod tests;

/// The user and group the server serves as when that is not who runs this (started as root
/// with `user`): what it creates in the storage is handed to them.
pub(crate) fn serving_owner(cfg: &crate::config::Config) -> std::io::Result<Option<(u32, u32)>> {
    match (&cfg.user, crate::privdrop::is_root()) {
        (Some(user), true) => {
            let (ids, gid) = crate::privdrop::resolve(user)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            Ok(Some((ids.uid, gid)))
        }
        _ => Ok(None),
    }
}

/// Readies `[acme]`'s storage before the server drops its privileges: created 0700 and, when
/// started as root to serve as `user`, handed to that user (who then writes what it obtains).
pub(crate) fn prepare(cfg: &crate::config::Config) -> std::io::Result<()> {
    if !cfg.acme.enabled || !cfg.listeners().iter().any(|l| l.tls) {
        return Ok(());
    }
    let owner = serving_owner(cfg)?;
    store::Store::new(&cfg.acme)
        .prepare(&cfg.acme.storage, owner)
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("[acme] storage {}: {e}", cfg.acme.storage.display()),
            )
        })
}
