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
//! - [`manager`]: the background thread that orders, renews, backs off and swaps in.

pub mod certs;
pub mod client;
pub mod jws;
pub mod manager;
pub mod serve;
pub mod store;
pub mod transport;

#[cfg(test)]
mod tests;

/// Readies `[acme]`'s storage before the server drops its privileges: created 0700 and, when
/// started as root to serve as `user`, handed to that user (who then writes what it obtains).
pub(crate) fn prepare(cfg: &crate::config::Config) -> std::io::Result<()> {
    if !cfg.acme.enabled || !cfg.listeners().iter().any(|l| l.tls) {
        return Ok(());
    }
    let owner = match (&cfg.user, crate::privdrop::is_root()) {
        (Some(user), true) => {
            let (ids, gid) = crate::privdrop::resolve(user)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            Some((ids.uid, gid))
        }
        _ => None,
    };
    store::Store::new(&cfg.acme)
        .prepare(&cfg.acme.storage, owner)
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("[acme] storage {}: {e}", cfg.acme.storage.display()),
            )
        })
}

/// A managed name as `weft acme list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameState {
    /// The name.
    pub name: String,
    /// Its stored certificate's expiry (seconds since the epoch), if one is stored.
    pub not_after: Option<i64>,
    /// When it is due for renewal (seconds since the epoch), if one is stored.
    pub renew_at: Option<i64>,
    /// `weft acme renew` asked for it.
    pub renewal_requested: bool,
}

/// The names `[acme]` manages under `cfg` (those no configured certificate covers) and what
/// the storage holds for each.
pub fn managed(cfg: &crate::config::Config) -> Result<Vec<NameState>, String> {
    let Some(tls) = crate::tls::Tls::from_config(cfg)? else {
        return Ok(Vec::new());
    };
    let store = store::Store::new(&cfg.acme);
    Ok(tls
        .certificates
        .0
        .iter()
        .filter(|c| {
            matches!(
                c.source,
                crate::tls::Source::Acme | crate::tls::Source::Placeholder
            )
        })
        .map(|c| {
            let stored = store.certificate(&c.name).ok().flatten();
            NameState {
                name: c.name.clone(),
                not_after: stored.as_ref().map(|s| s.not_after),
                renew_at: stored
                    .as_ref()
                    .map(|s| manager::renew_at(s.not_before, s.not_after, cfg.acme.renew_before)),
                renewal_requested: store.renewal_requested(&c.name),
            }
        })
        .collect())
}

/// Asks the running server to renew `names` (every managed name when empty) at its next look
/// (within half a minute); returns the names marked.
pub fn request_renewal(
    cfg: &crate::config::Config,
    names: &[String],
) -> Result<Vec<String>, String> {
    let managed: Vec<String> = managed(cfg)?.into_iter().map(|n| n.name).collect();
    let wanted: Vec<String> = if names.is_empty() {
        managed.clone()
    } else {
        names.iter().map(|n| n.to_ascii_lowercase()).collect()
    };
    let store = store::Store::new(&cfg.acme);
    for name in &wanted {
        if !managed.contains(name) {
            return Err(format!(
                "{name} is not a name [acme] manages here (managed: {})",
                if managed.is_empty() {
                    "none".to_string()
                } else {
                    managed.join(", ")
                }
            ));
        }
        store
            .request_renewal(name)
            .map_err(|e| format!("{}: {e}", store.dir().display()))?;
    }
    Ok(wanted)
}
