//! The ACME protocol (RFC 8555) as a client over any [`Transport`]: the directory, nonces
//! (taken from every response, a `badNonce` answered by trying again), the account, an order,
//! its authorizations and challenges, finalization with a CSR, polling (as `Retry-After`
//! asks, through a [`Clock`] so tests do not sleep) and the certificate's download.
//!
//! What a request goes over (HTTPS to the CA, with its roots) and where the answers to
//! challenges are served are the caller's; [`issue`] runs the whole exchange for a set of names.

use std::io;
use std::time::Duration;

use serde_json::Value;

use super::jws::{b64u, json_string, AccountKey, KeyError};

/// An HTTP method the protocol uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The directory.
    Get,
    /// `newNonce`.
    Head,
    /// With a JWS body, `Content-Type: application/jose+json`.
    Post,
}

/// A response as the client reads it.
#[derive(Debug, Clone, Default)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The header fields, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first field named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Result<Value, AcmeError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            AcmeError::Protocol(format!(
                "a {} response whose body is not JSON: {e}",
                self.status
            ))
        })
    }
}

/// Carries one request to the CA.
pub trait Transport {
    /// `body` is the JWS of a POST.
    fn request(
        &mut self,
        method: Method,
        url: &str,
        body: Option<&str>,
    ) -> io::Result<HttpResponse>;
}

/// Waits between polls.
pub trait Clock {
    /// Waits `d`.
    fn sleep(&mut self, d: Duration);
}

/// The real clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// Why an exchange with the CA failed.
#[derive(Debug)]
pub enum AcmeError {
    /// The request did not get a response.
    Transport(io::Error),
    /// The CA answered with an error document (RFC 8555 §6.7, RFC 7807).
    Problem {
        /// The HTTP status.
        status: u16,
        /// The problem's `type` (`urn:ietf:params:acme:error:...`).
        kind: String,
        /// Its `detail`, or the body where it has none.
        detail: String,
        /// The response's `Retry-After` (a `rateLimited` answer says when to come back).
        retry_after: Option<Duration>,
    },
    /// The CA's answer was not what the protocol says.
    Protocol(String),
    /// An authorization or the order ended `invalid`, or polling gave up.
    Failed(String),
    /// The account key could not sign.
    Key(KeyError),
}

impl std::fmt::Display for AcmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AcmeError::Transport(e) => write!(f, "no answer from the ACME server: {e}"),
            AcmeError::Problem {
                status,
                kind,
                detail,
                ..
            } => write!(f, "the ACME server refused ({status} {kind}): {detail}"),
            AcmeError::Protocol(m) => write!(f, "unexpected answer from the ACME server: {m}"),
            AcmeError::Failed(m) => f.write_str(m),
            AcmeError::Key(e) => write!(f, "account key: {e}"),
        }
    }
}

impl std::error::Error for AcmeError {}

impl AcmeError {
    /// The error type's name after `urn:ietf:params:acme:error:` (`rateLimited`,
    /// `badNonce`, ...), for a problem document.
    pub fn acme_type(&self) -> Option<&str> {
        match self {
            AcmeError::Problem { kind, .. } => kind.strip_prefix("urn:ietf:params:acme:error:"),
            _ => None,
        }
    }

    /// When the CA asked to be asked again, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AcmeError::Problem { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The directory's URLs (RFC 8555 §7.1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    /// `newNonce`.
    pub new_nonce: String,
    /// `newAccount`.
    pub new_account: String,
    /// `newOrder`.
    pub new_order: String,
    /// ACME Renewal Information (RFC 9773), where the CA offers it.
    pub renewal_info: Option<String>,
    /// `meta.termsOfService`.
    pub terms_of_service: Option<String>,
}

impl Directory {
    fn parse(v: &Value) -> Result<Directory, AcmeError> {
        let url = |k: &str| {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| AcmeError::Protocol(format!("the directory has no {k}")))
        };
        Ok(Directory {
            new_nonce: url("newNonce")?,
            new_account: url("newAccount")?,
            new_order: url("newOrder")?,
            renewal_info: v["renewalInfo"].as_str().map(str::to_string),
            terms_of_service: v["meta"]["termsOfService"].as_str().map(str::to_string),
        })
    }
}

/// An order (RFC 8555 §7.1.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// Its URL (the `Location` of `newOrder`).
    pub url: String,
    /// `pending`, `ready`, `processing`, `valid` or `invalid`.
    pub status: String,
    /// Its authorizations' URLs.
    pub authorizations: Vec<String>,
    /// Where the CSR goes.
    pub finalize: String,
    /// The certificate's URL, once `valid`.
    pub certificate: Option<String>,
}

impl Order {
    pub(super) fn parse(url: String, v: &Value) -> Result<Order, AcmeError> {
        Ok(Order {
            url,
            status: status_of(v)?,
            authorizations: v["authorizations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            finalize: v["finalize"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| AcmeError::Protocol("an order without finalize".into()))?,
            certificate: v["certificate"].as_str().map(str::to_string),
        })
    }
}

/// A challenge of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `http-01`, `tls-alpn-01`, `dns-01`, ...
    pub kind: String,
    /// Where the client says it is ready.
    pub url: String,
    /// The token its key authorization starts with.
    pub token: String,
    /// `pending`, `processing`, `valid` or `invalid`.
    pub status: String,
}

/// An authorization (RFC 8555 §7.1.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The DNS name it is for.
    pub identifier: String,
    /// `pending`, `valid`, `invalid`, `deactivated`, `expired` or `revoked`.
    pub status: String,
    /// What may prove control of the name.
    pub challenges: Vec<Challenge>,
    /// What the CA said of a failed challenge, where it said anything.
    pub error: Option<String>,
}

impl Authorization {
    pub(super) fn parse(v: &Value) -> Result<Authorization, AcmeError> {
        let challenges: Vec<Challenge> = v["challenges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some(Challenge {
                    kind: c["type"].as_str()?.to_string(),
                    url: c["url"].as_str()?.to_string(),
                    token: c["token"].as_str().unwrap_or("").to_string(),
                    status: c["status"].as_str().unwrap_or("pending").to_string(),
                })
            })
            .collect();
        let error = v["challenges"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|c| c["error"]["detail"].as_str().map(str::to_string));
        Ok(Authorization {
            identifier: v["identifier"]["value"]
                .as_str()
                .ok_or_else(|| AcmeError::Protocol("an authorization without identifier".into()))?
                .to_string(),
            status: status_of(v)?,
            challenges,
            error,
        })
    }
}

fn status_of(v: &Value) -> Result<String, AcmeError> {
    v["status"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| AcmeError::Protocol("an object without status".into()))
}

/// How many times a request is signed again after `badNonce` (RFC 8555 §6.5: the client
/// should retry with the nonce the error carries).
const NONCE_RETRIES: usize = 3;

/// A session with one ACME server, for one account key.
#[derive(Debug)]
pub struct Client<T: Transport> {
    transport: T,
    key: AccountKey,
    directory: Directory,
    nonce: Option<String>,
    /// The account's URL, once known.
    kid: Option<String>,
    /// The certificate the next orders replace (RFC 9773 §5), by its ARI identifier.
    replaces: Option<String>,
}

impl<T: Transport> Client<T> {
    /// Reads the directory at `directory_url`.
    pub fn new(mut transport: T, key: AccountKey, directory_url: &str) -> Result<Self, AcmeError> {
        let r = transport
            .request(Method::Get, directory_url, None)
            .map_err(AcmeError::Transport)?;
        if r.status != 200 {
            return Err(problem(&r));
        }
        let directory = Directory::parse(&r.json()?)?;
        Ok(Client {
            transport,
            key,
            directory,
            nonce: None,
            kid: None,
            replaces: None,
        })
    }

    /// The directory read at the start.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The account key.
    pub fn key(&self) -> &AccountKey {
        &self.key
    }

    fn fresh_nonce(&mut self) -> Result<String, AcmeError> {
        if let Some(n) = self.nonce.take() {
            return Ok(n);
        }
        let url = self.directory.new_nonce.clone();
        let r = self
            .transport
            .request(Method::Head, &url, None)
            .map_err(AcmeError::Transport)?;
        r.header("Replay-Nonce")
            .map(str::to_string)
            .ok_or_else(|| AcmeError::Protocol("newNonce gave no Replay-Nonce".into()))
    }

    /// POSTs `payload` (`None`: POST-as-GET) signed to `url`; an error answer is an
    /// [`AcmeError::Problem`], after `badNonce` retries.
    fn post(&mut self, url: &str, payload: Option<&str>) -> Result<HttpResponse, AcmeError> {
        let mut tries = 0;
        loop {
            let nonce = self.fresh_nonce()?;
            let body = self
                .key
                .sign(url, &nonce, self.kid.as_deref(), payload)
                .map_err(AcmeError::Key)?;
            let r = self
                .transport
                .request(Method::Post, url, Some(&body))
                .map_err(AcmeError::Transport)?;
            self.nonce = r.header("Replay-Nonce").map(str::to_string);
            if r.status < 400 {
                return Ok(r);
            }
            let e = problem(&r);
            tries += 1;
            if e.acme_type() == Some("badNonce") && tries <= NONCE_RETRIES {
                continue;
            }
            return Err(e);
        }
    }

    /// Finds or creates the account for the key (`contact`: `mailto:` URLs), agreeing to the
    /// CA's terms; returns its URL.
    pub fn account(&mut self, contact: &[String]) -> Result<String, AcmeError> {
        let contacts: Vec<String> = contact.iter().map(|c| json_string(c)).collect();
        let payload = format!(
            r#"{{"termsOfServiceAgreed":true,"contact":[{}]}}"#,
            contacts.join(",")
        );
        self.kid = None;
        let url = self.directory.new_account.clone();
        let r = self.post(&url, Some(&payload))?;
        let kid = location(&r, "newAccount")?;
        self.kid = Some(kid.clone());
        Ok(kid)
    }

    /// Uses the account at `kid` (stored from an earlier [`Client::account`]).
    pub fn use_account(&mut self, kid: &str) {
        self.kid = Some(kid.to_string());
    }

    fn need_account(&self) -> Result<(), AcmeError> {
        match self.kid {
            Some(_) => Ok(()),
            None => Err(AcmeError::Protocol("no account yet".into())),
        }
    }

    /// A new order for the DNS names `names`.
    pub fn new_order(&mut self, names: &[String]) -> Result<Order, AcmeError> {
        self.need_account()?;
        let ids: Vec<String> = names
            .iter()
            .map(|n| format!(r#"{{"type":"dns","value":{}}}"#, json_string(n)))
            .collect();
        let replaces = match (&self.replaces, &self.directory.renewal_info) {
            (Some(id), Some(_)) => format!(r#","replaces":{}"#, json_string(id)),
            _ => String::new(),
        };
        let payload = format!(r#"{{"identifiers":[{}]{replaces}}}"#, ids.join(","));
        let url = self.directory.new_order.clone();
        let r = self.post(&url, Some(&payload))?;
        let at = location(&r, "newOrder")?;
        Order::parse(at, &r.json()?)
    }

    /// Says that the next orders renew the certificate whose ARI identifier is `cert_id`
    /// ([`cert_id`]): sent as `replaces` where the CA offers ARI (Let's Encrypt then lets the
    /// renewal past its limits).
    pub fn replacing(&mut self, cert_id: Option<String>) {
        self.replaces = cert_id;
    }

    /// The CA's suggested renewal window for the certificate `leaf` (RFC 9773 §4.2): `None`
    /// where the CA offers no renewal information or the certificate has no authority key
    /// identifier.
    pub fn renewal_info(&mut self, leaf: &[u8]) -> Result<Option<RenewalInfo>, AcmeError> {
        let (Some(base), Some(id)) = (self.directory.renewal_info.clone(), cert_id(leaf)) else {
            return Ok(None);
        };
        let url = format!("{}/{id}", base.trim_end_matches('/'));
        let r = self
            .transport
            .request(Method::Get, &url, None)
            .map_err(AcmeError::Transport)?;
        if r.status != 200 {
            return Err(problem(&r));
        }
        let v = r.json()?;
        let time = |k: &str| {
            v["suggestedWindow"][k]
                .as_str()
                .and_then(weft_http::timestamp::rfc3339)
                .ok_or_else(|| AcmeError::Protocol(format!("renewal info without a {k} time")))
        };
        let (start, end) = (time("start")?, time("end")?);
        if end < start {
            return Err(AcmeError::Protocol(
                "renewal info whose window ends before it starts".into(),
            ));
        }
        Ok(Some(RenewalInfo {
            start,
            end,
            retry_after: retry_after(&r),
            explanation: v["explanationURL"].as_str().map(str::to_string),
        }))
    }

    /// The order at `url` now.
    pub fn order(&mut self, url: &str) -> Result<(Order, Option<Duration>), AcmeError> {
        let r = self.post(url, None)?;
        Ok((Order::parse(url.to_string(), &r.json()?)?, retry_after(&r)))
    }

    /// The authorization at `url` now, and how long the CA asks to wait before asking again.
    pub fn authorization(
        &mut self,
        url: &str,
    ) -> Result<(Authorization, Option<Duration>), AcmeError> {
        let r = self.post(url, None)?;
        Ok((Authorization::parse(&r.json()?)?, retry_after(&r)))
    }

    /// Tells the CA the challenge at `url` is ready to be checked.
    pub fn respond(&mut self, url: &str) -> Result<(), AcmeError> {
        self.post(url, Some("{}")).map(|_| ())
    }

    /// Finalizes `order` with the DER of a CSR for its names.
    pub fn finalize(&mut self, order: &Order, csr_der: &[u8]) -> Result<Order, AcmeError> {
        let payload = format!(r#"{{"csr":"{}"}}"#, b64u(csr_der));
        let r = self.post(&order.finalize, Some(&payload))?;
        Order::parse(order.url.clone(), &r.json()?)
    }

    /// The certificate chain (PEM) at `url`.
    pub fn certificate(&mut self, url: &str) -> Result<String, AcmeError> {
        let r = self.post(url, None)?;
        let pem = String::from_utf8(r.body)
            .map_err(|_| AcmeError::Protocol("a certificate that is not text".into()))?;
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(AcmeError::Protocol(
                "the certificate URL gave no PEM certificate".into(),
            ));
        }
        Ok(pem)
    }
}

/// A CA's suggested renewal window (RFC 9773), in seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewalInfo {
    /// Renew from here...
    pub start: i64,
    /// ...to here (the CA may revoke after).
    pub end: i64,
    /// When to ask again.
    pub retry_after: Option<Duration>,
    /// Where the CA explains a window moved early (a revocation ahead).
    pub explanation: Option<String>,
}

/// A certificate's ARI identifier (RFC 9773 §4.1): its authority key identifier and serial
/// number (the INTEGER's content octets), each base64url, joined by `.`; `None` without an
/// authority key identifier.
pub fn cert_id(leaf: &[u8]) -> Option<String> {
    let (serial, aki) = weft_http::x509::serial_and_authority_key_id(leaf).ok()?;
    Some(format!("{}.{}", b64u(&aki?), b64u(&serial)))
}

/// The `Location` of what `what` created.
fn location(r: &HttpResponse, what: &str) -> Result<String, AcmeError> {
    r.header("Location")
        .map(str::to_string)
        .ok_or_else(|| AcmeError::Protocol(format!("{what} gave no Location")))
}

/// The error a response carries: its problem document, or what there is.
fn problem(r: &HttpResponse) -> AcmeError {
    let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    AcmeError::Problem {
        status: r.status,
        kind: v["type"].as_str().unwrap_or("").to_string(),
        detail: v["detail"].as_str().map_or_else(
            || String::from_utf8_lossy(&r.body).into_owned(),
            str::to_string,
        ),
        retry_after: retry_after(r),
    }
}

/// `Retry-After` in seconds (the HTTP-date form is read as "not said").
fn retry_after(r: &HttpResponse) -> Option<Duration> {
    r.header("Retry-After")?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Makes a challenge's answer reachable where the CA will look, and takes it away after.
pub trait Solver {
    /// The challenge kinds it answers, the preferred first (`tls-alpn-01`, `http-01`).
    fn kinds(&self) -> Vec<String>;
    /// Serves `key_authorization` for `token` on `name` by challenge `kind`.
    fn present(
        &mut self,
        kind: &str,
        name: &str,
        token: &str,
        key_authorization: &str,
    ) -> Result<(), String>;
    /// Stops serving it.
    fn clean_up(&mut self, kind: &str, name: &str, token: &str);
}

/// How long [`issue`] polls: the wait when the CA names none, and the most polls of one
/// object.
#[derive(Debug, Clone, Copy)]
pub struct Polling {
    /// The wait between polls where the CA names none.
    pub interval: Duration,
    /// The most polls of one object.
    pub attempts: usize,
}

impl Default for Polling {
    fn default() -> Self {
        Polling {
            interval: Duration::from_secs(2),
            attempts: 30,
        }
    }
}

/// The longest wait a `Retry-After` is taken for (a CA that asks for an hour is polled again
/// sooner; the attempts still bound the whole).
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Orders a certificate for `names` (the account must be set), answers every pending
/// authorization through `solver` with the first kind both it and the CA offer, finalizes
/// with `csr_der` and returns the certificate chain (PEM).
pub fn issue<T: Transport>(
    client: &mut Client<T>,
    names: &[String],
    csr_der: &[u8],
    solver: &mut dyn Solver,
    clock: &mut dyn Clock,
    polling: Polling,
) -> Result<String, AcmeError> {
    let order = client.new_order(names)?;
    for authz_url in &order.authorizations {
        let (authz, _) = client.authorization(authz_url)?;
        if authz.status == "valid" {
            continue;
        }
        if authz.status != "pending" {
            return Err(AcmeError::Failed(format!(
                "the authorization for {} is {}",
                authz.identifier, authz.status
            )));
        }
        let kinds = solver.kinds();
        let Some(ch) = kinds
            .iter()
            .find_map(|k| authz.challenges.iter().find(|c| &c.kind == k))
            .cloned()
        else {
            return Err(AcmeError::Failed(format!(
                "{}: the CA offers none of the challenges weft answers ({}); it offers {}",
                authz.identifier,
                kinds.join(", "),
                authz
                    .challenges
                    .iter()
                    .map(|c| c.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let ka = client.key().key_authorization(&ch.token);
        solver
            .present(&ch.kind, &authz.identifier, &ch.token, &ka)
            .map_err(AcmeError::Failed)?;
        let done = client.respond(&ch.url).and_then(|()| {
            poll(
                clock,
                polling,
                |c| c.authorization(authz_url),
                client,
                |a| a.status != "pending" && a.status != "processing",
            )
        });
        solver.clean_up(&ch.kind, &authz.identifier, &ch.token);
        let authz = done?;
        if authz.status != "valid" {
            return Err(AcmeError::Failed(format!(
                "the {} challenge for {} failed: {}",
                ch.kind,
                authz.identifier,
                authz.error.as_deref().unwrap_or(&authz.status)
            )));
        }
    }
    let order_url = order.url.clone();
    let (ready, _) = client.order(&order_url)?;
    if ready.status != "ready" && ready.status != "valid" {
        return Err(AcmeError::Failed(format!(
            "the order is {} after its authorizations",
            ready.status
        )));
    }
    let mut order = if ready.status == "ready" {
        client.finalize(&ready, csr_der)?
    } else {
        ready
    };
    if order.status != "valid" {
        order = poll(
            clock,
            polling,
            |c| c.order(&order_url),
            client,
            |o| o.status != "processing" && o.status != "ready" && o.status != "pending",
        )?;
    }
    if order.status != "valid" {
        return Err(AcmeError::Failed(format!(
            "the order is {} after finalizing",
            order.status
        )));
    }
    let cert = order
        .certificate
        .ok_or_else(|| AcmeError::Protocol("a valid order without a certificate URL".into()))?;
    client.certificate(&cert)
}

/// Asks `get` until `done` holds of its answer, waiting as the CA asks (or `interval`), at
/// most `attempts` times.
fn poll<T: Transport, X>(
    clock: &mut dyn Clock,
    polling: Polling,
    mut get: impl FnMut(&mut Client<T>) -> Result<(X, Option<Duration>), AcmeError>,
    client: &mut Client<T>,
    done: impl Fn(&X) -> bool,
) -> Result<X, AcmeError> {
    for _ in 0..polling.attempts.max(1) {
        let (x, wait) = get(client)?;
        if done(&x) {
            return Ok(x);
        }
        clock.sleep(wait.unwrap_or(polling.interval).min(MAX_WAIT));
    }
    Err(AcmeError::Failed(format!(
        "still pending after {} polls",
        polling.attempts.max(1)
    )))
}
