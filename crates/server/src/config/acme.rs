//! `[acme]`: certificates obtained and renewed by weft itself (`crate::acme` runs it).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, ser_duration};

/// Let's Encrypt's production directory (`directory = "letsencrypt"`).
pub const LETSENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory (`directory = "letsencrypt-staging"`): untrusted
/// certificates, far higher rate limits; for trying a setup out.
pub const LETSENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// The challenge kinds weft answers, in its order of preference.
pub const CHALLENGES: &[&str] = &["tls-alpn-01", "http-01"];

/// The `[acme]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AcmeConfig {
    /// Obtain and renew certificates for the sites' names (off by default).
    pub enabled: bool,
    /// The CA's directory URL, or a preset: `letsencrypt` (the default) or
    /// `letsencrypt-staging`.
    pub directory: String,
    /// The account's contact address (`mailto:` is added); empty: no contact.
    pub email: String,
    /// Where the account key, the certificates and their keys and the challenges' answers are
    /// kept: created 0700, keys 0600. Several instances may share it (one orders, the others
    /// load what it stored).
    pub storage: PathBuf,
    /// The challenges answered, preferred first: `tls-alpn-01` (on the TLS listeners, port 443
    /// for the CA) and `http-01` (on the plain ones, port 80).
    pub challenges: Vec<String>,
    /// Renew this long before a certificate expires; 0 (the default): when the CA's renewal
    /// information (ARI) suggests, else with a third of its lifetime left.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub renew_before: Duration,
    /// PEM certificates the CA's HTTPS server is checked against (a private ACME server);
    /// default: the system's bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// Names to obtain certificates for besides the `[[site]] hosts` (for a configuration
    /// without sites).
    pub names: Vec<String>,
}

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            enabled: false,
            directory: "letsencrypt".into(),
            email: String::new(),
            storage: PathBuf::from("/var/lib/weft/acme"),
            challenges: CHALLENGES.iter().map(|c| c.to_string()).collect(),
            renew_before: Duration::ZERO,
            ca: None,
            names: Vec::new(),
        }
    }
}

impl AcmeConfig {
    /// The directory URL `directory` names (a preset resolved).
    pub fn directory_url(&self) -> &str {
        match self.directory.as_str() {
            "letsencrypt" => LETSENCRYPT,
            "letsencrypt-staging" => LETSENCRYPT_STAGING,
            url => url,
        }
    }

    /// What is wrong with the section, if anything (checked only when it is enabled).
    pub fn problem(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let url = self.directory_url();
        if !url.starts_with("https://") {
            return Some(format!(
                "[acme] directory {:?}: an https:// URL, or letsencrypt or letsencrypt-staging",
                self.directory
            ));
        }
        if self.challenges.is_empty() {
            return Some("[acme] challenges is empty: name tls-alpn-01, http-01 or both".into());
        }
        if let Some(c) = self
            .challenges
            .iter()
            .find(|c| !CHALLENGES.contains(&c.as_str()))
        {
            return Some(format!(
                "[acme] challenges: {c:?} is not one weft answers (tls-alpn-01, http-01; a \
                 wildcard name needs dns-01, which weft does not answer)"
            ));
        }
        if self.email.contains(['\r', '\n', ' ']) || self.email.starts_with("mailto:") {
            return Some(format!(
                "[acme] email {:?}: an address, as `admin@example.org`",
                self.email
            ));
        }
        if self.storage.as_os_str().is_empty() {
            return Some("[acme] storage is empty: name a directory".into());
        }
        None
    }

    /// Whether challenge `kind` is answered.
    pub fn answers(&self, kind: &str) -> bool {
        self.enabled && self.challenges.iter().any(|c| c == kind)
    }
}
