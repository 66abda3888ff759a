//! Which upstream a request goes to: the prefix table, tried in configuration order, and the
//! fallback for what is not a file.

use std::io;
use std::sync::Arc;

use super::client::Upstream;
use crate::config::ProxyConfig;
use crate::handlers::under_prefix;

/// Every proxy mount of the application.
#[derive(Debug)]
pub struct Proxy {
    mounts: Vec<(String, Arc<Upstream>)>,
    fallback: Option<Arc<Upstream>>,
}

impl Proxy {
    /// The mounts `cfgs` describe (`None` if there are none); resolves every URL upstream and
    /// finds every `upstream:NAME` in `groups`.
    pub fn new(cfgs: &[ProxyConfig], groups: &super::Groups) -> io::Result<Option<Proxy>> {
        if cfgs.is_empty() {
            return Ok(None);
        }
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        let mut proxy = Proxy {
            mounts: Vec::new(),
            fallback: None,
        };
        for cfg in cfgs {
            let up = Arc::new(Upstream::new(cfg, groups)?);
            if cfg.fallback {
                if proxy.fallback.is_some() {
                    return Err(invalid("more than one proxy has `fallback = true`".into()));
                }
                proxy.fallback = Some(up.clone());
            }
            if !cfg.prefix.is_empty() {
                if !cfg.prefix.starts_with('/') {
                    return Err(invalid(format!(
                        "proxy prefix `{}` must start with `/`",
                        cfg.prefix
                    )));
                }
                proxy.mounts.push((cfg.prefix.clone(), up));
            } else if !cfg.fallback {
                return Err(invalid(format!(
                    "proxy to {} needs a `prefix` or `fallback = true`",
                    cfg.upstream
                )));
            }
        }
        Ok(Some(proxy))
    }

    /// The upstream mounted at a prefix of `path` (still percent-encoded), if any.
    pub fn route(&self, path: &str) -> Option<&Arc<Upstream>> {
        let (_, up) = self
            .mounts
            .iter()
            .find(|(prefix, _)| under_prefix(path, prefix))?;
        Some(up)
    }

    /// The upstream for everything that is not a file, if one is configured.
    pub fn fallback(&self) -> Option<&Arc<Upstream>> {
        self.fallback.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_must_hold_after_normalising() {
        assert!(under_prefix("/api/x", "/api/"));
        assert!(under_prefix("/api/", "/api/"));
        assert!(under_prefix("/api/./x", "/api/"));
        assert!(!under_prefix("/api/../secret", "/api/"));
        assert!(!under_prefix("/api/%2e%2e/secret", "/api/"));
        assert!(!under_prefix("/api", "/api/"));
    }
}
