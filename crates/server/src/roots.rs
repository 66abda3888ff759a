//! CA certificates to verify a server with: a PEM file the configuration names, else the
//! system's bundle. For the reverse proxy's `https://` upstreams and the ACME client.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// Where the system keeps its CA bundle (Debian and Ubuntu, Fedora and RHEL, Alpine and
/// others), tried in order where no file is named.
pub(crate) const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The CA certificates of `file`, else of the first system bundle there is. `key` names the
/// setting in the errors (`proxy tls_ca`); `none` is the error where there is neither file
/// nor bundle (the bundles tried are added to it).
pub(crate) fn ca_roots(
    file: Option<&Path>,
    key: &str,
    none: &str,
) -> Result<RootCertStore, String> {
    let path: PathBuf = match file {
        Some(p) => p.to_path_buf(),
        None => SYSTEM_BUNDLES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "{none} (no system CA bundle at {})",
                    SYSTEM_BUNDLES.join(", ")
                )
            })?,
    };
    let text =
        std::fs::read(&path).map_err(|e| format!("{key} {}: cannot read: {e}", path.display()))?;
    let mut store = RootCertStore::empty();
    let mut bad = 0;
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.map_err(|e| format!("{key} {}: not PEM: {e}", path.display()))?;
        // A system bundle may hold a certificate rustls cannot use: skipped, as others do.
        if store.add(cert).is_err() {
            bad += 1;
        }
    }
    if store.is_empty() {
        return Err(format!(
            "{key} {}: no usable CA certificate ({bad} refused)",
            path.display()
        ));
    }
    Ok(store)
}
