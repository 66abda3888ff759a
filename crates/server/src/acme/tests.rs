//! The client against a small CA in memory that checks what RFC 8555 asks of each request
//! (a signed JWS for the URL it is posted to, each nonce used once, the key a new account
//! named, the key authorization a challenge must find), and against the RFC's own example
//! objects.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io;
use std::rc::Rc;
use std::time::Duration;

use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
use serde_json::{json, Value};

use super::client::*;
use super::jws::{b64u, b64u_decode, AccountKey};

const DIR: &str = "https://ca.test/dir";
const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// Answers (token -> key authorization) the solver is serving now.
type Served = Rc<RefCell<HashMap<String, String>>>;

#[derive(Default)]
struct Ca {
    next_nonce: u64,
    nonces: HashSet<String>,
    /// The account's public key (uncompressed point) and its JWK thumbprint.
    account: Option<(Vec<u8>, String)>,
    names: Vec<String>,
    authz: HashMap<String, (String, Option<String>)>,
    finalized: bool,
    /// Polls of the order that answer `processing` after finalizing.
    processing: usize,
    retry_after: Option<u64>,
    bad_nonce_once: bool,
    fail_challenges: bool,
    only_dns: bool,
    rate_limited: bool,
    csr: Option<Vec<u8>>,
    /// The last order's `replaces`.
    replaces: Option<String>,
    /// Renewal info answers a window that ends before it starts.
    ari_backwards: bool,
    /// Every request: method and URL.
    log: Vec<(Method, String)>,
    served: Served,
}

impl Ca {
    fn nonce(&mut self) -> String {
        self.next_nonce += 1;
        let n = format!("n{}", self.next_nonce);
        self.nonces.insert(n.clone());
        n
    }

    fn reply(&mut self, status: u16, body: Value, extra: &[(&str, String)]) -> HttpResponse {
        let mut headers = vec![("Replay-Nonce".to_string(), self.nonce())];
        for (k, v) in extra {
            headers.push((k.to_string(), v.clone()));
        }
        HttpResponse {
            status,
            headers,
            body: body.to_string().into_bytes(),
        }
    }

    fn problem(&mut self, status: u16, kind: &str, detail: &str) -> HttpResponse {
        self.reply(
            status,
            json!({"type": format!("urn:ietf:params:acme:error:{kind}"), "detail": detail}),
            &[],
        )
    }

    /// Checks a POST's JWS as a CA must; returns its payload (None: POST-as-GET).
    fn verify(&mut self, url: &str, body: &str) -> Result<Option<Value>, HttpResponse> {
        let v: Value = serde_json::from_str(body).expect("a JWS is JSON");
        let protected = v["protected"].as_str().unwrap();
        let payload = v["payload"].as_str().unwrap();
        let header: Value = serde_json::from_slice(&b64u_decode(protected).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["url"], url, "the JWS names the URL it is posted to");
        let nonce = header["nonce"].as_str().unwrap().to_string();
        if self.bad_nonce_once {
            self.bad_nonce_once = false;
            return Err(self.problem(400, "badNonce", "try again"));
        }
        assert!(
            self.nonces.remove(&nonce),
            "nonce {nonce} issued and unused"
        );
        let public = if url.ends_with("/acct") {
            assert!(
                header.get("kid").is_none(),
                "a new account names its key by jwk"
            );
            let jwk = &header["jwk"];
            let mut p = vec![4u8];
            p.extend(b64u_decode(jwk["x"].as_str().unwrap()).unwrap());
            p.extend(b64u_decode(jwk["y"].as_str().unwrap()).unwrap());
            let thumb = b64u(
                ring::digest::digest(&ring::digest::SHA256, jwk.to_string().as_bytes()).as_ref(),
            );
            self.account = Some((p.clone(), thumb));
            p
        } else {
            assert_eq!(
                header["kid"], "https://ca.test/acct/1",
                "later requests name the account"
            );
            self.account.clone().expect("an account first").0
        };
        let sig = b64u_decode(v["signature"].as_str().unwrap()).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
            .verify(format!("{protected}.{payload}").as_bytes(), &sig)
            .expect("the signature verifies");
        Ok(if payload.is_empty() {
            None
        } else {
            Some(serde_json::from_slice(&b64u_decode(payload).unwrap()).unwrap())
        })
    }

    fn order_json(&self) -> Value {
        let all_valid = self.authz.values().all(|(s, _)| s == "valid");
        let (status, cert) = match (self.finalized, all_valid) {
            (true, _) if self.processing > 0 => ("processing", None),
            (true, _) => ("valid", Some("https://ca.test/cert/1")),
            (false, true) => ("ready", None),
            (false, false) => ("pending", None),
        };
        let mut o = json!({
            "status": status,
            "identifiers": self.names.iter().map(|n| json!({"type": "dns", "value": n})).collect::<Vec<_>>(),
            "authorizations": self.names.iter().map(|n| format!("https://ca.test/authz/{n}")).collect::<Vec<_>>(),
            "finalize": "https://ca.test/order/1/finalize",
        });
        if let Some(c) = cert {
            o["certificate"] = json!(c);
        }
        o
    }

    fn authz_json(&self, name: &str) -> Value {
        let (status, error) = self.authz[name].clone();
        let mut challenges = vec![
            json!({"type": "dns-01", "url": format!("https://ca.test/chall/{name}/dns"), "token": format!("{name}-d"), "status": "pending"}),
        ];
        if !self.only_dns {
            challenges.push(json!({"type": "http-01", "url": format!("https://ca.test/chall/{name}/http"), "token": format!("{name}-h"), "status": "pending"}));
            challenges.push(json!({"type": "tls-alpn-01", "url": format!("https://ca.test/chall/{name}/alpn"), "token": format!("{name}-t"), "status": "pending"}));
        }
        if let Some(e) = error {
            challenges[0]["error"] = json!({"detail": e});
        }
        json!({"status": status, "identifier": {"type": "dns", "value": name}, "challenges": challenges})
    }

    fn handle(&mut self, method: Method, url: &str, body: Option<&str>) -> HttpResponse {
        self.log.push((method, url.to_string()));
        match (method, url) {
            (Method::Get, DIR) => HttpResponse {
                status: 200,
                headers: vec![],
                body: json!({
                    "newNonce": "https://ca.test/nonce",
                    "newAccount": "https://ca.test/acct",
                    "newOrder": "https://ca.test/order",
                    "renewalInfo": "https://ca.test/ari",
                    "meta": {"termsOfService": "https://ca.test/tos"}
                })
                .to_string()
                .into_bytes(),
            },
            (Method::Head, "https://ca.test/nonce") => self.reply(200, Value::Null, &[]),
            (Method::Get, ari) if ari.starts_with("https://ca.test/ari/") => {
                let (start, end) = if self.ari_backwards {
                    ("2025-01-03T04:00:00Z", "2025-01-02T04:00:00Z")
                } else {
                    ("2025-01-02T04:00:00Z", "2025-01-03T04:00:00Z")
                };
                HttpResponse {
                    status: 200,
                    headers: vec![("Retry-After".into(), "21600".into())],
                    body: json!({"suggestedWindow": {"start": start, "end": end}})
                        .to_string()
                        .into_bytes(),
                }
            }
            (Method::Post, _) => {
                let payload = match self.verify(url, body.unwrap()) {
                    Ok(p) => p,
                    Err(r) => return r,
                };
                self.post(url, payload)
            }
            _ => self.problem(404, "malformed", "no such resource"),
        }
    }

    fn post(&mut self, url: &str, payload: Option<Value>) -> HttpResponse {
        let loc = |u: &str| [("Location", u.to_string())];
        let wait: Vec<(&str, String)> = self
            .retry_after
            .map(|s| ("Retry-After", s.to_string()))
            .into_iter()
            .collect();
        if url == "https://ca.test/acct" {
            let p = payload.unwrap();
            assert_eq!(p["termsOfServiceAgreed"], true);
            return self.reply(
                201,
                json!({"status": "valid", "contact": p["contact"]}),
                &loc("https://ca.test/acct/1"),
            );
        }
        if url == "https://ca.test/order" {
            if self.rate_limited {
                return self.problem(429, "rateLimited", "too many certificates for this name");
            }
            let p = payload.unwrap();
            self.replaces = p["replaces"].as_str().map(str::to_string);
            self.names = p["identifiers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["value"].as_str().unwrap().to_string())
                .collect();
            for n in self.names.clone() {
                self.authz.insert(n, ("pending".into(), None));
            }
            let o = self.order_json();
            return self.reply(201, o, &loc("https://ca.test/order/1"));
        }
        if url == "https://ca.test/order/1" {
            assert!(payload.is_none(), "POST-as-GET");
            let o = self.order_json();
            if self.finalized && self.processing > 0 {
                self.processing -= 1;
                return self.reply(200, o, &wait);
            }
            return self.reply(200, o, &[]);
        }
        if url == "https://ca.test/order/1/finalize" {
            let csr = payload.unwrap()["csr"].as_str().unwrap().to_string();
            self.csr = b64u_decode(&csr);
            self.finalized = true;
            let o = self.order_json();
            return self.reply(200, o, &[]);
        }
        if url == "https://ca.test/cert/1" {
            return HttpResponse {
                status: 200,
                headers: vec![("Replay-Nonce".into(), self.nonce())],
                body: PEM.as_bytes().to_vec(),
            };
        }
        if let Some(name) = url.strip_prefix("https://ca.test/authz/") {
            let a = self.authz_json(name);
            return self.reply(200, a, &wait);
        }
        if let Some(rest) = url.strip_prefix("https://ca.test/chall/") {
            assert_eq!(
                payload,
                Some(json!({})),
                "a challenge is answered with {{}}"
            );
            let (name, kind) = rest.split_once('/').unwrap();
            let token = format!("{name}-{}", &kind[..1].replace('a', "t"));
            let thumb = self.account.clone().unwrap().1;
            let served = self.served.borrow().get(&token).cloned();
            let ok = !self.fail_challenges && served == Some(format!("{token}.{thumb}"));
            let entry = if ok {
                ("valid".to_string(), None)
            } else {
                (
                    "invalid".to_string(),
                    Some(format!("{name}: no key authorization at the token's place")),
                )
            };
            self.authz.insert(name.to_string(), entry);
            return self.reply(200, json!({"type": kind, "status": "processing"}), &[]);
        }
        self.problem(404, "malformed", "no such resource")
    }
}

/// The transport: the CA, shared so a test can look at it after.
#[derive(Clone)]
struct Fake(Rc<RefCell<Ca>>);

impl Transport for Fake {
    fn request(&mut self, m: Method, url: &str, body: Option<&str>) -> io::Result<HttpResponse> {
        Ok(self.0.borrow_mut().handle(m, url, body))
    }
}

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fake")
    }
}

struct Solve {
    kinds: Vec<String>,
    served: Served,
    presented: Vec<(String, String)>,
    cleaned: Vec<String>,
}

impl Solver for Solve {
    fn kinds(&self) -> Vec<String> {
        self.kinds.clone()
    }
    fn present(&mut self, kind: &str, name: &str, token: &str, ka: &str) -> Result<(), String> {
        self.presented.push((kind.to_string(), name.to_string()));
        self.served
            .borrow_mut()
            .insert(token.to_string(), ka.to_string());
        Ok(())
    }
    fn clean_up(&mut self, _kind: &str, _name: &str, token: &str) {
        self.served.borrow_mut().remove(token);
        self.cleaned.push(token.to_string());
    }
}

#[derive(Default)]
struct Sleeps(Vec<Duration>);

impl Clock for Sleeps {
    fn sleep(&mut self, d: Duration) {
        self.0.push(d);
    }
}

fn setup(tune: impl FnOnce(&mut Ca)) -> (Fake, Client<Fake>, Solve) {
    let served: Served = Rc::default();
    let mut ca = Ca {
        served: served.clone(),
        ..Ca::default()
    };
    tune(&mut ca);
    let fake = Fake(Rc::new(RefCell::new(ca)));
    let mut client = Client::new(fake.clone(), AccountKey::generate().unwrap(), DIR).unwrap();
    client.account(&["mailto:ops@example.org".into()]).unwrap();
    let solve = Solve {
        kinds: vec!["tls-alpn-01".into(), "http-01".into()],
        served,
        presented: vec![],
        cleaned: vec![],
    };
    (fake, client, solve)
}

/// `issue` with a clock that only records and the default polling.
fn issue_now(
    client: &mut Client<Fake>,
    names: &[String],
    solve: &mut Solve,
) -> Result<String, AcmeError> {
    issue(
        client,
        names,
        b"c",
        solve,
        &mut Sleeps::default(),
        Polling::default(),
    )
}

fn names() -> Vec<String> {
    vec!["a.example".into(), "b.example".into()]
}

#[test]
fn a_certificate_is_ordered_authorized_finalized_and_downloaded() {
    let (fake, mut client, mut solve) = setup(|ca| {
        ca.processing = 2;
        ca.retry_after = Some(3);
    });
    assert_eq!(
        client.directory().renewal_info.as_deref(),
        Some("https://ca.test/ari")
    );
    let mut clock = Sleeps::default();
    let pem = issue(
        &mut client,
        &names(),
        b"csr-der",
        &mut solve,
        &mut clock,
        Polling::default(),
    )
    .unwrap();
    assert_eq!(pem, PEM);
    // The preferred kind, for each name; each answer taken away after.
    assert_eq!(
        solve.presented,
        [
            ("tls-alpn-01".to_string(), "a.example".to_string()),
            ("tls-alpn-01".to_string(), "b.example".to_string())
        ]
    );
    assert_eq!(solve.cleaned, ["a.example-t", "b.example-t"]);
    let ca = fake.0.borrow();
    assert_eq!(ca.csr.as_deref(), Some(&b"csr-der"[..]));
    // One HEAD for the first nonce; every later one came with a response.
    let heads = ca.log.iter().filter(|(m, _)| *m == Method::Head).count();
    assert_eq!(heads, 1, "{:?}", ca.log);
    // The order was polled while processing, as Retry-After asked.
    assert_eq!(clock.0, [Duration::from_secs(3); 2]);
    assert_eq!(ca.log.last().unwrap().1, "https://ca.test/cert/1");
}

#[test]
fn http_01_is_used_where_it_is_the_solvers_only_kind() {
    let (_fake, mut client, mut solve) = setup(|_| {});
    solve.kinds = vec!["http-01".into()];
    issue_now(&mut client, &names()[..1], &mut solve).unwrap();
    assert_eq!(solve.presented[0].0, "http-01");
    assert_eq!(solve.cleaned, ["a.example-h"]);
}

#[test]
fn a_bad_nonce_is_answered_by_signing_again_with_the_new_one() {
    let (fake, mut client, _) = setup(|_| {});
    fake.0.borrow_mut().bad_nonce_once = true;
    let order = client.new_order(&names()).unwrap();
    assert_eq!(order.status, "pending");
    assert_eq!(order.authorizations.len(), 2);
    let posts = fake
        .0
        .borrow()
        .log
        .iter()
        .filter(|(m, u)| *m == Method::Post && u == "https://ca.test/order")
        .count();
    assert_eq!(posts, 2, "refused once, then accepted");
}

#[test]
fn a_failed_challenge_says_what_the_ca_said_and_is_cleaned_up() {
    let (_fake, mut client, mut solve) = setup(|ca| ca.fail_challenges = true);
    let err = issue_now(&mut client, &names(), &mut solve).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("tls-alpn-01 challenge for a.example failed")
            && text.contains("no key authorization"),
        "{text}"
    );
    assert_eq!(solve.cleaned, ["a.example-t"]);
    assert!(solve.served.borrow().is_empty());
}

#[test]
fn a_rate_limit_is_a_problem_with_its_type() {
    let (_fake, mut client, _) = setup(|ca| ca.rate_limited = true);
    let err = client.new_order(&names()).unwrap_err();
    assert_eq!(err.acme_type(), Some("rateLimited"));
    assert!(matches!(err, AcmeError::Problem { status: 429, .. }));
    assert!(err.to_string().contains("too many certificates"), "{err}");
}

#[test]
fn a_ca_without_a_challenge_weft_answers_is_named() {
    let (_fake, mut client, mut solve) = setup(|ca| ca.only_dns = true);
    let err = issue_now(&mut client, &names(), &mut solve)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("none of the challenges") && err.contains("dns-01"),
        "{err}"
    );
    assert!(solve.presented.is_empty());
}

#[test]
fn polling_gives_up_after_its_attempts() {
    let (_fake, mut client, mut solve) = setup(|ca| ca.processing = 100);
    let mut clock = Sleeps::default();
    let err = issue(
        &mut client,
        &names()[..1],
        b"c",
        &mut solve,
        &mut clock,
        Polling {
            interval: Duration::from_millis(10),
            attempts: 4,
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("still pending after 4 polls"),
        "{err}"
    );
    assert_eq!(clock.0, [Duration::from_millis(10); 4]);
}

#[test]
fn requests_before_an_account_are_refused_here() {
    let fake = Fake(Rc::new(RefCell::new(Ca::default())));
    let mut client = Client::new(fake, AccountKey::generate().unwrap(), DIR).unwrap();
    assert!(client.new_order(&names()).is_err());
}

/// RFC 8555's example objects (§7.1.1, §7.1.3, §7.1.4) read as the client reads them.
#[test]
fn the_rfcs_example_objects_parse() {
    struct Once(Option<HttpResponse>);
    impl Transport for Once {
        fn request(&mut self, _: Method, _: &str, _: Option<&str>) -> io::Result<HttpResponse> {
            self.0
                .take()
                .ok_or_else(|| io::Error::other("one response only"))
        }
    }
    let dir = r#"{
     "newNonce": "https://example.com/acme/new-nonce",
     "newAccount": "https://example.com/acme/new-account",
     "newOrder": "https://example.com/acme/new-order",
     "newAuthz": "https://example.com/acme/new-authz",
     "revokeCert": "https://example.com/acme/revoke-cert",
     "keyChange": "https://example.com/acme/key-change",
     "meta": {
       "termsOfService": "https://example.com/acme/terms/2017-5-30",
       "website": "https://www.example.com/",
       "caaIdentities": ["example.com"],
       "externalAccountRequired": false
     }
   }"#;
    let client = Client::new(
        Once(Some(HttpResponse {
            status: 200,
            headers: vec![],
            body: dir.as_bytes().to_vec(),
        })),
        AccountKey::generate().unwrap(),
        "https://example.com/dir",
    )
    .unwrap();
    let d = client.directory();
    assert_eq!(d.new_order, "https://example.com/acme/new-order");
    assert_eq!(d.renewal_info, None);
    assert_eq!(
        d.terms_of_service.as_deref(),
        Some("https://example.com/acme/terms/2017-5-30")
    );
    let order: Value = serde_json::from_str(
        r#"{
     "status": "valid",
     "expires": "2016-01-20T14:09:07.99Z",
     "identifiers": [
       { "type": "dns", "value": "www.example.org" },
       { "type": "dns", "value": "example.org" }
     ],
     "notBefore": "2016-01-01T00:00:00Z",
     "notAfter": "2016-01-08T00:00:00Z",
     "authorizations": [
       "https://example.com/acme/authz/PAniVnsZcis",
       "https://example.com/acme/authz/r4HqLzrSrpI"
     ],
     "finalize": "https://example.com/acme/order/TOlocE8rfgo/finalize",
     "certificate": "https://example.com/acme/cert/mAt3xBGaobw"
   }"#,
    )
    .unwrap();
    let r = HttpResponse {
        status: 200,
        headers: vec![],
        body: order.to_string().into_bytes(),
    };
    let parsed = Order::parse(
        "https://example.com/acme/order/TOlocE8rfgo".into(),
        &serde_json::from_slice(&r.body).unwrap(),
    )
    .unwrap();
    assert_eq!(parsed.status, "valid");
    assert_eq!(parsed.authorizations.len(), 2);
    assert_eq!(
        parsed.certificate.as_deref(),
        Some("https://example.com/acme/cert/mAt3xBGaobw")
    );
    let authz = Authorization::parse(
        &serde_json::from_str::<Value>(
            r#"{
     "status": "valid",
     "expires": "2015-03-01T14:09:07.99Z",
     "identifier": { "type": "dns", "value": "www.example.org" },
     "challenges": [
       {
         "url": "https://example.com/acme/chall/prV_B7yEyA4",
         "type": "http-01",
         "status": "valid",
         "token": "DGyRejmCefe7v4NfDGDKfA",
         "validated": "2014-12-01T12:05:58.16Z"
       }
     ],
     "wildcard": false
   }"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(authz.identifier, "www.example.org");
    assert_eq!(authz.challenges[0].kind, "http-01");
    assert_eq!(authz.challenges[0].token, "DGyRejmCefe7v4NfDGDKfA");
}

/// RFC 9773 §4.1's example: authority key identifier 69:88:5B:..:D4, serial 00:87:65:43:21.
#[test]
fn the_ari_identifier_is_the_rfcs() {
    let mut ca = rcgen::CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_identifier_method = rcgen::KeyIdMethod::PreSpecified(vec![
        0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0, 0xAE,
        0x2C, 0xDE, 0x01, 0xC8, 0xD4,
    ]);
    let issuer =
        rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let mut leaf = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
    leaf.use_authority_key_identifier_extension = true;
    leaf.serial_number = Some(rcgen::SerialNumber::from(vec![
        0x00, 0x87, 0x65, 0x43, 0x21,
    ]));
    let cert = leaf
        .signed_by(&rcgen::KeyPair::generate().unwrap(), &issuer)
        .unwrap();
    assert_eq!(
        cert_id(cert.der()).as_deref(),
        Some("aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE")
    );
    // Without the extension there is no identifier.
    let bare = rcgen::CertificateParams::new(vec!["a.example".to_string()])
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    assert_eq!(cert_id(bare.der()), None);
}

#[test]
fn renewal_info_is_read_and_a_renewal_order_names_what_it_replaces() {
    let (fake, mut client, mut solve) = setup(|_| {});
    let mut leaf = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
    leaf.use_authority_key_identifier_extension = true;
    let issuer = rcgen::CertifiedIssuer::self_signed(
        {
            let mut ca = rcgen::CertificateParams::new(Vec::new()).unwrap();
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca
        },
        rcgen::KeyPair::generate().unwrap(),
    )
    .unwrap();
    let cert = leaf
        .signed_by(&rcgen::KeyPair::generate().unwrap(), &issuer)
        .unwrap();
    let id = cert_id(cert.der()).unwrap();
    let info = client.renewal_info(cert.der()).unwrap().unwrap();
    assert_eq!(
        (info.start, info.end),
        (1_735_790_400, 1_735_876_800),
        "2025-01-02T04:00:00Z to a day later"
    );
    assert_eq!(info.retry_after, Some(Duration::from_secs(21_600)));
    assert_eq!(
        fake.0.borrow().log.last().unwrap(),
        &(Method::Get, format!("https://ca.test/ari/{id}"))
    );
    client.replacing(Some(id.clone()));
    issue_now(&mut client, &names(), &mut solve).unwrap();
    assert_eq!(fake.0.borrow().replaces.as_deref(), Some(id.as_str()));
    // A window that ends before it starts is refused.
    fake.0.borrow_mut().ari_backwards = true;
    assert!(matches!(
        client.renewal_info(cert.der()),
        Err(AcmeError::Protocol(_))
    ));
}
