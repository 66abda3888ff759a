//! `weft check`, as `nginx -t`: everything `weft serve` would refuse at start, found without
//! serving: the configuration parses, the document root and CGI directory exist, proxy
//! upstreams are `http://` URLs that resolve, the pipeline's threads add up, and no other
//! process listens on a configured port.

use crate::app::App;
use crate::config::{Config, Model};

/// The configuration `weft serve` would run with: the default listener written out and the
/// echo function's mount resolved (`""`: not mounted), so the printed file says what is
/// served, not what was left to defaults.
pub fn effective(cfg: &Config) -> Config {
    let mut out = cfg.clone();
    out.listen = cfg.listeners();
    out.echo.path = Some(cfg.echo.mount_path(&cfg.root).unwrap_or("").to_string());
    out
}

/// Every problem found with `cfg`, each a line for the operator; empty when it would start.
pub fn problems(cfg: &Config) -> Vec<String> {
    let mut found = Vec::new();
    let listeners = cfg.listeners();
    if let Err(e) = crate::config::listen_conflicts(&listeners) {
        found.push(e);
    }
    if listeners.iter().any(|l| l.model == Model::Pipeline) {
        if let Err(e) = cfg.pipeline.validate() {
            found.push(e.to_string());
        }
    }
    if cfg.acme.enabled && !listeners.iter().any(|l| l.tls) {
        found.push(
            "[acme] is enabled but no listener has tls = true: nothing would serve the \
             certificates it obtains"
                .into(),
        );
    }
    // Started as root: a `user` that exists, or root allowed (`privdrop`).
    if let Err(e) = crate::privdrop::root_policy(cfg) {
        found.push(e);
    }
    // Builds the application as `serve` does (root, CGI, proxy upstreams, access log, charset)
    // and drops it: nothing listens and no thread starts.
    if let Err(e) = App::new(cfg.clone(), Vec::new()) {
        found.push(e.to_string());
    }
    for l in &listeners {
        if let Some(cc) = &l.congestion {
            if let Err(e) = crate::server::congestion_available(cc) {
                found.push(format!("listener {}: {e}", l.addr));
            }
        }
        if l.addr.port() == 0 {
            continue;
        }
        if let Err(e) = crate::server::probe_port(l.addr) {
            found.push(format!("cannot listen on {}: {e}", l.addr));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_or_a_bad_upstream_is_reported() {
        let mut cfg = Config::from_toml(
            "root = \"/nonexistent/weft-check\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n",
        )
        .unwrap();
        let found = problems(&cfg);
        assert!(
            found.iter().any(|p| p.contains("/nonexistent/weft-check")),
            "{found:?}"
        );
        let eff = effective(&cfg);
        assert_eq!(eff.echo.path.as_deref(), Some(""));
        assert_eq!(eff.listen.len(), 1);

        cfg.root = std::env::temp_dir();
        assert!(problems(&cfg).is_empty());
        cfg.proxy = vec!["/api/=ftp://127.0.0.1:21".parse().unwrap()];
        let found = problems(&cfg);
        assert!(found.iter().any(|p| p.contains("ftp://")), "{found:?}");
    }

    #[test]
    fn acme_for_a_wildcard_site_is_refused_with_the_reason() {
        let cfg = Config::from_toml(&format!(
            "root = \"{}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n\
             [acme]\nenabled = true\n[[site]]\nhosts = [\"*.example.org\"]\n",
            std::env::temp_dir().display()
        ))
        .unwrap();
        let found = problems(&cfg);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("*.example.org") && found[0].contains("dns-01"),
            "{found:?}"
        );
        // TLS without a certificate and without [acme]: what to do about it.
        let cfg = Config::from_toml(&format!(
            "root = \"{}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n",
            std::env::temp_dir().display()
        ))
        .unwrap();
        let found = problems(&cfg);
        assert!(found.iter().any(|p| p.contains("[acme]")), "{found:?}");
        // [acme] without a TLS listener.
        let cfg = Config::from_toml(&format!(
            "root = \"{}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n[acme]\nenabled = true\n",
            std::env::temp_dir().display()
        ))
        .unwrap();
        let found = problems(&cfg);
        assert!(
            found
                .iter()
                .any(|p| p.contains("no listener has tls = true")),
            "{found:?}"
        );
    }

    #[test]
    fn a_congestion_control_the_kernel_lacks_is_reported() {
        let with = |cc: &str| {
            let cfg = Config::from_toml(&format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\ncongestion = \"{cc}\"\n"
            ))
            .unwrap();
            assert_eq!(cfg.listen[0].congestion.as_deref(), Some(cc));
            problems(&cfg)
        };
        let found = with("no-such-algorithm");
        assert!(
            found
                .iter()
                .any(|p| p.contains("congestion = \"no-such-algorithm\": not available")),
            "{found:?}"
        );
        // reno is built into every Linux kernel and allowed to every user.
        let found = with("reno");
        assert!(!found.iter().any(|p| p.contains("congestion")), "{found:?}");
    }

    #[test]
    fn a_port_in_use_is_reported() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let mut cfg = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        cfg.listen = vec![format!("{addr}").parse().unwrap()];
        let found = problems(&cfg);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("address in use"), "{found:?}");
        drop(taken);
        assert!(problems(&cfg).is_empty());
    }
}
