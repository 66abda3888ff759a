//! The certificates' keeper: one background thread (`weft-certs`, in the server's own
//! process, never on a serving thread and never in the `process` model's master) that
//! - obtains a certificate for every name `[acme]` manages that has none, and renews one when
//!   it is due (`renew_before`, by default with a third of its lifetime left; at once when
//!   `weft acme renew` asked), one name at a time, under the name's lock in the storage (so
//!   instances sharing it order once between them);
//! - after a failure waits longer each time, with jitter ([`backoff`]), and as long as the CA's
//!   `Retry-After` asks: never more often than Let's Encrypt's limits allow (docs/https.md);
//! - swaps what it (or another instance) stored in: the current configuration is built again
//!   with the new certificates (as SIGHUP would, without reading the file) and the `process`
//!   model's master is told to do the same (SIGUSR2);
//! - logs a certificate (any, files too) expiring within 7 days at error level, every 6 hours.
//!
//! A CA that is down or refuses never touches what is served: the server keeps its
//! certificates (or a name's placeholder) and tries again later.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acme::client::{self, AcmeError, Client, Polling, Solver, SystemClock};
use crate::acme::store::Store;
use crate::app::LiveApp;
use crate::config::{AcmeConfig, Config};
use crate::tls::Source;

/// How often the keeper looks even with nothing due: another instance's certificate, a
/// renewal asked for, a reload that added a name.
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// The first wait after a failure; it doubles with each failure after.
const FIRST_RETRY: Duration = Duration::from_secs(120);
/// The longest wait between tries.
const MAX_RETRY: Duration = Duration::from_secs(6 * 60 * 60);
/// The longest `Retry-After` taken from a CA.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Below this much validity left, a certificate is logged at error level.
const LOUD: i64 = 7 * 24 * 60 * 60;
/// How often that is said again.
const LOUD_EVERY: Duration = Duration::from_secs(6 * 60 * 60);

/// Starts the keeper when the current configuration serves TLS; `master` is the `process`
/// model's master, told to swap certificates in too.
pub(crate) fn start(
    live: Arc<LiveApp>,
    master: Option<weft_sys::process::Pid>,
) -> std::io::Result<()> {
    if live.current().tls.is_none() {
        return Ok(());
    }
    let handle = Handle { live, master };
    std::thread::Builder::new()
        .name("weft-certs".into())
        .spawn(move || Keeper::default().run(&handle))
        .map(drop)
}

/// The running server, as the keeper sees it.
struct Handle {
    live: Arc<LiveApp>,
    master: Option<weft_sys::process::Pid>,
}

impl Handle {
    fn app(&self) -> Arc<crate::app::App> {
        self.live.current()
    }

    /// Builds the running configuration again (not re-read from its file) so new connections
    /// get the certificates in the storage; the `process` model's master does the same (told
    /// by SIGUSR2). Open connections keep theirs.
    fn refresh_certificates(&self) -> Result<(), crate::app::ReloadError> {
        if let Some(pid) = self.master {
            let _ = weft_sys::process::kill(pid, weft_sys::signal::SIGUSR2);
        }
        self.live.refresh()?;
        self.live.current().start_checks();
        Ok(())
    }
}

/// The wait before the next try after `failures` failures in a row (1 or more): doubling from
/// [`FIRST_RETRY`] to [`MAX_RETRY`], plus up to a quarter more (`jitter` in 0..1), and at
/// least what the CA asked (`retry_after`). Five tries in the first hour at most, as Let's
/// Encrypt's "5 failed authorizations per name per hour" allows.
pub fn backoff(failures: u32, jitter: f64, retry_after: Option<Duration>) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let base = doubled.min(MAX_RETRY);
    let wait = base + base.mul_f64(jitter.clamp(0.0, 1.0) / 4.0);
    // A CA's Retry-After is taken up to a week (a larger one is a mistake or an attack).
    wait.max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER))
}

/// When a certificate valid from `not_before` to `not_after` (seconds since the epoch) is
/// due for renewal: `renew_before` ahead of its expiry, by default (0) with a third of its
/// lifetime left; never in the first half of its lifetime (a `renew_before` longer than the
/// lifetime would otherwise renew it over and over).
pub fn renew_at(not_before: i64, not_after: i64, renew_before: Duration) -> i64 {
    let life = (not_after - not_before).max(0);
    let before = if renew_before.is_zero() {
        life / 3
    } else {
        i64::try_from(renew_before.as_secs()).unwrap_or(i64::MAX)
    };
    not_after - before.min(life / 2)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A random fraction in 0..1.
fn jitter() -> f64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 2];
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    f64::from(u16::from_le_bytes(b)) / 65_536.0
}

#[derive(Default)]
struct Keeper {
    /// Per name: failures in a row and when to try again.
    retry: HashMap<String, (u32, Instant)>,
    /// Per name: when its expiry was last logged at error level.
    said: HashMap<String, Instant>,
    /// Per name: the CA's renewal information for its stored certificate.
    ari: HashMap<String, Ari>,
    /// Per name: OCSP fetches failed in a row and when to try again.
    ocsp_retry: HashMap<String, (u32, Instant)>,
}

/// What the CA's renewal information (ARI) said of one certificate.
struct Ari {
    /// The certificate it is about.
    not_after: i64,
    /// The time picked in its window (`None`: no window; the lifetime decides).
    at: Option<i64>,
    /// When to ask again.
    next: Instant,
}

impl Keeper {
    fn run(mut self, handle: &Handle) {
        loop {
            let app = handle.app();
            if app.shutdown.is_set() {
                return;
            }
            let wait = self.look(&app.cfg, app.tls.as_deref(), handle);
            drop(app);
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if handle.app().shutdown.is_set() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(250).min(until - Instant::now()));
            }
        }
    }

    /// One look at every certificate; returns how long to sleep.
    fn look(&mut self, cfg: &Config, tls: Option<&crate::tls::Tls>, handle: &Handle) -> Duration {
        let Some(tls) = tls else {
            return LOOK_EVERY;
        };
        let now = unix_now();
        self.say_expiry(&tls.certificates.0, now);
        if !cfg.acme.enabled {
            return LOOK_EVERY;
        }
        let store = Store::new(&cfg.acme);
        let mut wait = LOOK_EVERY;
        let mut swap = false;
        for served in &tls.certificates.0 {
            if !matches!(served.source, Source::Acme | Source::Placeholder) {
                continue;
            }
            let name = &served.name;
            let stored = match store.certificate(name) {
                Ok(Some(s)) => match crate::tls::loads(&s) {
                    Ok(()) => Some(s),
                    Err(e) => {
                        log::error!(
                            "[acme] {name}: the stored certificate does not load ({e}); \
                             obtaining a new one"
                        );
                        None
                    }
                },
                Ok(None) => None,
                Err(e) => {
                    log::error!("[acme] {name}: {e}; obtaining a new one");
                    None
                }
            };
            // Stored by another instance, or by this one before a reload failed: serve it.
            let newer = stored.as_ref().is_some_and(|s| {
                served.source == Source::Placeholder || served.not_after != Some(s.not_after)
            });
            swap |= newer;
            if let Some(s) = &stored {
                let (changed, next) = self.staple(&store, name, s, served.staple_until, now);
                swap |= changed;
                if let Some(next) = next {
                    wait = wait.min(next);
                }
            }
            let due = match &stored {
                None => true,
                Some(s) => store.renewal_requested(name) || now >= self.due_at(cfg, name, s),
            };
            if !due {
                continue;
            }
            if let Some((_, at)) = self.retry.get(name) {
                let left = at.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    wait = wait.min(left);
                    continue;
                }
            }
            match self.order(cfg, &store, name) {
                Ok(true) => swap = true,
                Ok(false) => {}
                Err(e) => {
                    let failures = self.retry.get(name).map_or(1, |(n, _)| n + 1);
                    let pause = backoff(failures, jitter(), e.retry_after());
                    self.retry
                        .insert(name.clone(), (failures, Instant::now() + pause));
                    log::error!(
                        "[acme] {name}: no certificate obtained ({e}); failure {failures} in a \
                         row, next try in {}s; serving what it has",
                        pause.as_secs()
                    );
                    wait = wait.min(pause);
                }
            }
        }
        if swap {
            match handle.refresh_certificates() {
                Ok(()) => log::info!("[acme] certificates swapped in for new connections"),
                Err(e) => log::error!("[acme] the new certificates are stored but not served: {e}"),
            }
        }
        wait
    }

    /// Keeps `name`'s OCSP response when its certificate `s` names a responder: fetched when
    /// there is none, or half way through its validity; on failure tried again after 10 s,
    /// doubling to an hour, the stored one served while it holds and none after. Returns
    /// whether what should be served differs from what is (`served_until`, the served
    /// staple's `nextUpdate`), and when to look again if sooner than usual.
    fn staple(
        &mut self,
        store: &Store,
        name: &str,
        s: &crate::acme::store::Stored,
        served_until: Option<i64>,
        now: i64,
    ) -> (bool, Option<Duration>) {
        use crate::acme::staple;
        use rustls::pki_types::pem::PemObject;
        let chain: Vec<rustls::pki_types::CertificateDer<'static>> =
            rustls::pki_types::CertificateDer::pem_slice_iter(&s.chain_pem)
                .filter_map(Result::ok)
                .collect();
        if staple::responder(&chain).is_none() || chain.len() < 2 {
            return (served_until.is_some(), None);
        }
        let Ok(issuer) = weft_http::x509::issuer_key(&chain[1]) else {
            return (served_until.is_some(), None);
        };
        let held = store
            .ocsp(name)
            .and_then(|der| staple::check(&der, &chain[0], &issuer, now).ok());
        let mut changed = served_until != held.map(|v| v.next_update);
        if held.is_some_and(|v| now < v.refresh_at()) {
            return (changed, None);
        }
        if let Some((_, at)) = self.ocsp_retry.get(name) {
            let left = at.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                return (changed, Some(left));
            }
        }
        match staple::fetch(&chain, now, Duration::from_secs(10)) {
            Ok((der, v)) => {
                // A responder that hands out responses already half spent is asked again an
                // hour later at the soonest, not at every look.
                let again = (v.refresh_at() - now).max(3_600) as u64;
                self.ocsp_retry.insert(
                    name.to_string(),
                    (0, Instant::now() + Duration::from_secs(again)),
                );
                if store.ocsp(name).as_deref() == Some(der.as_slice()) {
                    return (changed, None);
                }
                match store.save_ocsp(name, Some(&der)) {
                    Ok(()) => {
                        log::info!(
                            "[acme] {name}: OCSP response stapled, good until {:.1} h from now",
                            (v.next_update - now) as f64 / 3_600.0
                        );
                        changed = true;
                    }
                    Err(e) => log::error!("[acme] {name}: cannot store the OCSP response: {e}"),
                }
                (changed, None)
            }
            Err(e) if e.ends_with(staple::REVOKED) => {
                // Never stapled, and replaced at once.
                log::error!("[acme] {name}: {e}; renewing it now");
                let _ = store.save_ocsp(name, None);
                let _ = store.request_renewal(name, None);
                (true, None)
            }
            Err(e) => {
                let failures = self.ocsp_retry.get(name).map_or(1, |(n, _)| n + 1);
                let pause = Duration::from_secs(10)
                    .saturating_mul(1 << (failures - 1).min(9))
                    .min(Duration::from_secs(3_600));
                self.ocsp_retry
                    .insert(name.to_string(), (failures, Instant::now() + pause));
                match held {
                    Some(v) => log::warn!(
                        "[acme] {name}: no new OCSP response ({e}); the one stapled holds \
                         {:.1} h more; next try in {}s",
                        (v.next_update - now) as f64 / 3_600.0,
                        pause.as_secs()
                    ),
                    None => {
                        log::warn!(
                            "[acme] {name}: no OCSP response ({e}); served without a staple; \
                             next try in {}s",
                            pause.as_secs()
                        );
                        let _ = store.save_ocsp(name, None);
                    }
                }
                (changed, Some(pause))
            }
        }
    }

    /// When `s`, `name`'s stored certificate, is due: `renew_before` ahead of its expiry when
    /// set; else a time picked at random in the window the CA's renewal information suggests
    /// (asked again as its `Retry-After` says, 6 h by default), and where the CA offers none,
    /// with a third of its lifetime left.
    fn due_at(&mut self, cfg: &Config, name: &str, s: &crate::acme::store::Stored) -> i64 {
        let by_lifetime = renew_at(s.not_before, s.not_after, cfg.acme.renew_before);
        if !cfg.acme.renew_before.is_zero() {
            return by_lifetime;
        }
        if let Some(a) = self.ari.get(name) {
            if a.not_after == s.not_after && Instant::now() < a.next {
                return a.at.unwrap_or(by_lifetime);
            }
        }
        let (at, wait) = match renewal_window(&cfg.acme, &s.leaf) {
            Ok(Some(w)) => {
                let at = in_window(w.start, w.end, jitter(), s.not_after);
                log::info!(
                    "[acme] {name}: the CA suggests renewing in {:.1} days{}",
                    (at - unix_now()) as f64 / 86_400.0,
                    w.explanation
                        .map(|u| format!(" (see {u})"))
                        .unwrap_or_default()
                );
                let wait = w
                    .retry_after
                    .unwrap_or(ARI_AGAIN)
                    .clamp(Duration::from_secs(60), Duration::from_secs(86_400));
                (Some(at), wait)
            }
            // No renewal information at this CA: asked again a day later.
            Ok(None) => (None, Duration::from_secs(86_400)),
            Err(e) => {
                log::warn!("[acme] {name}: no renewal information ({e}); renewing by its lifetime");
                (None, Duration::from_secs(3_600))
            }
        };
        self.ari.insert(
            name.to_string(),
            Ari {
                not_after: s.not_after,
                at,
                next: Instant::now() + wait,
            },
        );
        at.unwrap_or(by_lifetime)
    }

    /// Orders `name`'s certificate under its lock. `Ok(false)`: another instance holds the
    /// lock, or stored one meanwhile.
    fn order(&mut self, cfg: &Config, store: &Store, name: &str) -> Result<bool, AcmeError> {
        let io = storage_error(store);
        let Some(_lock) = store.lock(name).map_err(io)? else {
            log::info!("[acme] {name}: another instance sharing the storage is ordering it");
            return Ok(false);
        };
        // Under the lock: what another instance stored before it let go counts.
        let stored = store.certificate(name).ok().flatten();
        if let Some(s) = &stored {
            let due = store.renewal_requested(name) || unix_now() >= self.due_at(cfg, name, s);
            if !due {
                return Ok(true);
            }
        }
        let replaces = stored.and_then(|s| crate::acme::client::cert_id(&s.leaf));
        let kinds = kinds(cfg);
        if kinds.is_empty() {
            return Err(AcmeError::Failed(
                "no listener can answer a challenge: tls-alpn-01 needs a TLS listener (the CA \
                 connects to port 443), http-01 a plain one (port 80)"
                    .into(),
            ));
        }
        log::info!(
            "[acme] {name}: ordering a certificate from {}",
            cfg.acme.directory_url()
        );
        obtain(&cfg.acme, store, name, kinds, replaces)?;
        self.ari.remove(name);
        if let Some(s) = store.certificate(name).ok().flatten() {
            let days = (s.not_after - unix_now()) as f64 / 86_400.0;
            log::info!("[acme] {name}: certificate obtained, valid for {days:.1} days");
        }
        self.retry.remove(name);
        Ok(true)
    }

    /// Logs every certificate expiring within [`LOUD`] at error level, every [`LOUD_EVERY`].
    fn say_expiry(&mut self, certs: &[crate::tls::Certificate], now: i64) {
        for c in certs {
            let Some(at) = c.not_after else { continue };
            if at - now >= LOUD || c.source == Source::Placeholder {
                continue;
            }
            if self
                .said
                .get(&c.name)
                .is_some_and(|t| t.elapsed() < LOUD_EVERY)
            {
                continue;
            }
            self.said.insert(c.name.clone(), Instant::now());
            if at <= now {
                log::error!(
                    "TLS certificate for {} EXPIRED {:.1} days ago",
                    c.name,
                    (now - at) as f64 / 86_400.0
                );
            } else {
                log::error!(
                    "TLS certificate for {} expires in {:.1} days ({})",
                    c.name,
                    (at - now) as f64 / 86_400.0,
                    if c.source == Source::Acme {
                        "renewal has not succeeded yet"
                    } else {
                        "renew it"
                    }
                );
            }
        }
    }
}

/// The time picked in an ARI window `start..end` by `fraction` (0..1, random: instances
/// and clients spread over it, RFC 9773 §4.2), never after the certificate's expiry.
pub fn in_window(start: i64, end: i64, fraction: f64, not_after: i64) -> i64 {
    let span = (end - start).max(0) as f64;
    (start + (span * fraction.clamp(0.0, 1.0)) as i64).min(not_after)
}

/// How long renewal information holds when the CA names no `Retry-After` (RFC 9773 §4.3).
const ARI_AGAIN: Duration = Duration::from_secs(6 * 60 * 60);

/// The CA's renewal window for `leaf` (`None`: the CA offers none), asked with the stored
/// account key (a new one, not kept, before there is one: the request is not signed).
fn renewal_window(
    acme: &AcmeConfig,
    leaf: &[u8],
) -> Result<Option<crate::acme::client::RenewalInfo>, AcmeError> {
    let store = Store::new(acme);
    let key = match store.account().ok().flatten() {
        Some((key, _)) => key,
        None => crate::acme::jws::AccountKey::generate().map_err(AcmeError::Key)?,
    };
    connect(acme, key)?.renewal_info(leaf)
}

/// A session with `acme`'s CA for the account `key`: its directory read over HTTPS (checked
/// with `[acme] ca` or the system's bundle), 30 s for each exchange.
fn connect(
    acme: &AcmeConfig,
    key: crate::acme::jws::AccountKey,
) -> Result<Client<crate::acme::transport::Https>, AcmeError> {
    let transport = crate::acme::transport::Https::new(acme.ca.as_deref(), Duration::from_secs(30))
        .map_err(AcmeError::Failed)?;
    Client::new(transport, key, acme.directory_url())
}

/// A storage failure as the keeper reports it.
fn storage_error(store: &Store) -> impl Fn(std::io::Error) -> AcmeError + Copy + '_ {
    move |e| AcmeError::Failed(format!("storage {}: {e}", store.dir().display()))
}

/// The challenge kinds this server can answer, in `[acme] challenges` order: tls-alpn-01 with a
/// TLS listener, http-01 with a plain one.
fn kinds(cfg: &Config) -> Vec<String> {
    let listeners = cfg.listeners();
    cfg.acme
        .challenges
        .iter()
        .filter(|k| match k.as_str() {
            "tls-alpn-01" => listeners.iter().any(|l| l.tls),
            "http-01" => listeners.iter().any(|l| !l.tls),
            _ => false,
        })
        .cloned()
        .collect()
}

/// The whole exchange for `name` with the CA of `acme`: the account (made or found by its
/// stored key), the order, the challenges answered through the storage, and the
/// certificate and its new key stored. Returns the chain.
pub fn obtain(
    acme: &AcmeConfig,
    store: &Store,
    name: &str,
    kinds: Vec<String>,
    replaces: Option<String>,
) -> Result<String, AcmeError> {
    let io = storage_error(store);
    // Two instances starting together make one key between them.
    let key = store
        .with_account_lock(|| match store.account().map_err(io)? {
            Some((key, _)) => Ok(key),
            None => {
                let key = crate::acme::jws::AccountKey::generate().map_err(AcmeError::Key)?;
                store.save_account_key(&key).map_err(io)?;
                Ok(key)
            }
        })
        .map_err(io)??;
    let mut client = connect(acme, key)?;
    client.replacing(replaces);
    let contact: Vec<String> = (!acme.email.is_empty())
        .then(|| format!("mailto:{}", acme.email))
        .into_iter()
        .collect();
    // newAccount with a known key finds its account (RFC 8555 §7.3.1): one request, and an
    // account the CA forgot (a test CA restarted) is made again.
    let url = client.account(&contact)?;
    store.save_account_url(&url).map_err(io)?;
    let names = [name.to_string()];
    let request = crate::acme::certs::request(&names).map_err(AcmeError::Failed)?;
    let mut solver = StoreSolver { store, kinds };
    let chain = client::issue(
        &mut client,
        &names,
        &request.csr_der,
        &mut solver,
        &mut SystemClock,
        Polling::default(),
    )?;
    check_chain(&chain, &request.key_pem, name)?;
    store
        .save_certificate(name, chain.as_bytes(), request.key_pem.as_bytes())
        .map_err(io)?;
    Ok(chain)
}

/// Refuses a chain rustls would not serve with the key, or not valid for `name`.
fn check_chain(chain: &str, key_pem: &str, name: &str) -> Result<(), AcmeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |m: String| AcmeError::Protocol(format!("the certificate for {name}: {m}"));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| bad(format!("not PEM: {e}")))?;
    let leaf = certs
        .first()
        .cloned()
        .ok_or_else(|| bad("no certificate".into()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(certs, key, &provider).map_err(|e| bad(e.to_string()))?;
    let ee = webpki::EndEntityCert::try_from(&leaf).map_err(|e| bad(format!("{e:?}")))?;
    let server = rustls::pki_types::ServerName::try_from(name).map_err(|e| bad(e.to_string()))?;
    ee.verify_is_valid_for_subject_name(&server)
        .map_err(|_| bad("not valid for the name".into()))
}

/// Answers challenges by writing them where every listener (of every process and instance
/// sharing the storage) reads them.
struct StoreSolver<'a> {
    store: &'a Store,
    kinds: Vec<String>,
}

impl Solver for StoreSolver<'_> {
    fn kinds(&self) -> Vec<String> {
        self.kinds.clone()
    }

    fn present(&mut self, kind: &str, name: &str, token: &str, ka: &str) -> Result<(), String> {
        let key = if kind == "http-01" { token } else { name };
        self.store
            .write_answer(kind, key, ka)
            .map_err(|e| format!("{kind} answer for {name}: {e}"))
    }

    fn clean_up(&mut self, kind: &str, name: &str, token: &str) {
        let key = if kind == "http-01" { token } else { name };
        self.store.remove_answer(kind, key);
    }
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
    let store = Store::new(&cfg.acme);
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
                    .map(|s| renew_at(s.not_before, s.not_after, cfg.acme.renew_before)),
                renewal_requested: store.renewal_requested(&c.name),
            }
        })
        .collect())
}

/// Asks the running server to renew `names` (every managed name when empty) at its next look
/// (within 5 s, or when a failed try's backoff ends); returns the names marked.
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
    let store = Store::new(&cfg.acme);
    let owner = crate::acme::serving_owner(cfg).map_err(|e| e.to_string())?;
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
            .request_renewal(name, owner)
            .map_err(|e| format!("{}: {e}", store.dir().display()))?;
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_six_hours_and_honours_retry_after() {
        assert_eq!(backoff(1, 0.0, None), Duration::from_secs(120));
        assert_eq!(backoff(2, 0.0, None), Duration::from_secs(240));
        assert_eq!(backoff(3, 0.999_999, None).as_secs(), 599); // 480 + a quarter
        assert_eq!(backoff(30, 0.0, None), MAX_RETRY);
        assert_eq!(
            backoff(1, 0.0, Some(Duration::from_secs(3_600))),
            Duration::from_secs(3_600)
        );
        // A Retry-After of any size is taken up to a week (no overflow past `Instant`).
        assert_eq!(backoff(1, 0.0, Some(Duration::MAX)), MAX_RETRY_AFTER);
        // The tries of the first hour: at 0, then after each wait; jitter only adds.
        let mut at = Duration::ZERO;
        let mut tries = 1;
        for n in 1.. {
            at += backoff(n, 0.0, None);
            if at > Duration::from_secs(3_600) {
                break;
            }
            tries += 1;
        }
        assert!(tries <= 5, "{tries} tries in the first hour");
    }

    #[test]
    fn renewal_is_due_with_a_third_left_or_as_configured_never_in_the_first_half() {
        let day = 86_400;
        // 90 days: renewed with 30 left.
        assert_eq!(renew_at(0, 90 * day, Duration::ZERO), 60 * day);
        assert_eq!(
            renew_at(0, 90 * day, Duration::from_secs(10 * day as u64)),
            80 * day
        );
        // Longer than the lifetime: at half of it, not at once.
        assert_eq!(
            renew_at(0, 6 * day, Duration::from_secs(30 * day as u64)),
            3 * day
        );
        // A 60-second test certificate: 40 s.
        assert_eq!(renew_at(1_000, 1_060, Duration::ZERO), 1_040);
    }

    #[test]
    fn an_ari_window_is_followed_never_past_expiry() {
        assert_eq!(in_window(1_000, 2_000, 0.0, 10_000), 1_000);
        assert_eq!(in_window(1_000, 2_000, 0.5, 10_000), 1_500);
        assert_eq!(in_window(1_000, 2_000, 1.0, 10_000), 2_000);
        assert_eq!(in_window(1_000, 2_000, 0.9, 1_200), 1_200);
        assert_eq!(
            in_window(2_000, 1_000, 0.5, 10_000),
            2_000,
            "an empty window"
        );
    }

    #[test]
    fn challenges_are_offered_only_where_a_listener_answers_them() {
        let cfg = Config::from_toml(
            "[acme]\nenabled = true\n[[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n",
        )
        .unwrap();
        assert_eq!(kinds(&cfg), ["tls-alpn-01"]);
        let cfg = Config::from_toml(
            "[acme]\nenabled = true\nchallenges = [\"http-01\", \"tls-alpn-01\"]\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n",
        )
        .unwrap();
        assert_eq!(kinds(&cfg), ["http-01", "tls-alpn-01"]);
    }
}
