//! HTTP Basic authentication (RFC 7617) per site or location, against an htpasswd file as
//! Apache's `htpasswd` writes it and nginx's `auth_basic_user_file` reads it.
//!
//! - **Hashes**: bcrypt (`$2y$`, `$2a$`, `$2b$`; `htpasswd -B`), Apache's MD5 crypt (`$apr1$`;
//!   `htpasswd -m`, its default) and SHA-1 (`{SHA}`; `htpasswd -s`). A line with anything
//!   else (a plain-text password, DES crypt) refuses the whole file with its line number, so a
//!   password is never compared as text. Blank lines and `#` comments are skipped.
//! - **Answers**: no credentials, another scheme, an unknown user or a wrong password: 401 with
//!   `WWW-Authenticate: Basic realm="REALM", charset="UTF-8"` (and a log line naming the user
//!   and the client, never the password or the field). Over plain HTTP, unless
//!   `allow_plain`: 403 and a log line, since the password would cross the network readable.
//! - **Timing**: the comparison of digests runs over every byte; an unknown user is checked
//!   against a fixed bcrypt hash of the same cost as the file's first, so the time does not
//!   tell which users exist.
//! - **Cost**: a bcrypt check takes milliseconds on purpose; a credential that passed is
//!   remembered for a minute (a keyed SipHash of the field value, never the password itself, at
//!   most 1,024 of them), so a browser's every request does not pay it again. Failed attempts
//!   are not remembered; each counts as five requests against the client's `[rate_limit]`
//!   (the site's, where it has one), so guessing meets 429 long before ordinary use would.
//! - **Reload**: the file is read when the configuration is (start, SIGHUP).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::AuthConfig;
use crate::response::Response;
use crate::Request;

/// Requests a failed attempt counts as against `[rate_limit]`, besides itself.
pub(crate) const FAILURE_COST: u32 = 4;

/// How long a credential that passed is taken as passing.
const REMEMBER: Duration = Duration::from_secs(60);
/// Credentials remembered at most; past it the memory starts again.
const REMEMBER_MAX: usize = 1024;

/// What a request's credentials come to ([`BasicAuth::verdict`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A user of the file with the right password.
    Pass,
    /// Over plain HTTP without `allow_plain`: 403.
    Plain,
    /// No `Authorization`: 401.
    Missing,
    /// Another scheme, or not Basic credentials: 401.
    NotBasic,
    /// This user is not in the file or gave another password: 401.
    Wrong(Vec<u8>),
}

/// One `auth` setting: its realm, its users and what passed recently. Public for the
/// benchmark (`benches/auth.rs`); not library API.
#[doc(hidden)]
#[derive(Debug)]
pub struct BasicAuth {
    realm: String,
    file: PathBuf,
    users: HashMap<Vec<u8>, Hash>,
    /// Checked against for an unknown user.
    decoy: Hash,
    allow_plain: bool,
    /// Keyed digests of `Authorization` values that passed, and when.
    passed: Mutex<HashMap<u64, Instant>>,
    /// The key of those digests: SipHash with a random key per process, a pseudo-random
    /// function, so a value that was never sent cannot be made to match one that passed.
    key: std::collections::hash_map::RandomState,
}

/// A password hash from an htpasswd line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hash {
    Bcrypt(String),
    /// `$apr1$SALT$HASH`, kept whole.
    Apr1 {
        salt: Vec<u8>,
        full: Vec<u8>,
    },
    Sha1([u8; 20]),
}

impl BasicAuth {
    /// Reads `cfg.users`; an error names the file and the line.
    pub fn load(cfg: &AuthConfig) -> std::io::Result<BasicAuth> {
        let text = std::fs::read(&cfg.users).map_err(|e| {
            std::io::Error::new(e.kind(), format!("auth.users {}: {e}", cfg.users.display()))
        })?;
        let users = parse_htpasswd(&text).map_err(|(line, why)| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("auth.users {} line {line}: {why}", cfg.users.display()),
            )
        })?;
        let cost = users
            .values()
            .find_map(|h| match h {
                Hash::Bcrypt(s) => s.get(4..6).and_then(|c| c.parse::<u32>().ok()),
                _ => None,
            })
            .unwrap_or(bcrypt::DEFAULT_COST)
            .clamp(4, 31);
        let decoy = Hash::Bcrypt(
            bcrypt::hash("weft decoy password", cost)
                .map_err(|e| std::io::Error::other(format!("auth: {e}")))?,
        );
        Ok(BasicAuth {
            realm: cfg.realm.clone(),
            file: cfg.users.clone(),
            users,
            decoy,
            allow_plain: cfg.allow_plain,
            passed: Mutex::new(HashMap::new()),
            key: std::collections::hash_map::RandomState::new(),
        })
    }

    /// `None` if `req` may go on; else the answer (401, or 403 over plain HTTP).
    pub(crate) fn check(&self, req: &Request) -> Option<Response> {
        let why = match self.verdict(req.header("Authorization"), req.is_https()) {
            Verdict::Pass => return None,
            Verdict::Plain => {
                log::warn!(
                    "{}: {} needs a password and came over plain HTTP (auth.allow_plain is \
                     off); answering 403",
                    req.peer_addr(),
                    req.path()
                );
                return Some(Response::error(403));
            }
            Verdict::Missing => return Some(self.challenge()),
            Verdict::NotBasic => "credentials that are not Basic ones".to_string(),
            Verdict::Wrong(user) => format!(
                "wrong password or unknown user {:?} (auth.users {})",
                String::from_utf8_lossy(&user),
                self.file.display()
            ),
        };
        log::warn!("{}: {}: {why}; answering 401", req.peer_addr(), req.path());
        Some(self.challenge())
    }

    /// What `authorization` (the field's value, if sent) on a connection that is `https` or
    /// not comes to. Public for the benchmark (`benches/auth.rs`); not library API.
    #[doc(hidden)]
    pub fn verdict(&self, authorization: Option<&[u8]>, https: bool) -> Verdict {
        if !https && !self.allow_plain {
            return Verdict::Plain;
        }
        let Some(value) = authorization else {
            return Verdict::Missing;
        };
        let digest = self.digest(value);
        let now = Instant::now();
        {
            let passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
            if passed
                .get(&digest)
                .is_some_and(|&at| now.saturating_duration_since(at) < REMEMBER)
            {
                return Verdict::Pass;
            }
        }
        let Some(c) = weft_http::auth::basic(value) else {
            return Verdict::NotBasic;
        };
        let ok = match self.users.get(&c.user) {
            Some(h) => verify(h, &c.password),
            None => {
                verify(&self.decoy, &c.password);
                false
            }
        };
        if !ok {
            return Verdict::Wrong(c.user);
        }
        let mut passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
        if passed.len() >= REMEMBER_MAX {
            passed.clear();
        }
        passed.insert(digest, now);
        Verdict::Pass
    }

    fn challenge(&self) -> Response {
        Response::error(401).header(
            "WWW-Authenticate",
            format!(
                "Basic realm=\"{}\", charset=\"UTF-8\"",
                self.realm.replace(['"', '\\'], "")
            ),
        )
    }

    /// A keyed digest of an `Authorization` value: never the credential itself, so the table
    /// tells nothing to whoever reads the process's memory for passwords.
    fn digest(&self, value: &[u8]) -> u64 {
        std::hash::BuildHasher::hash_one(&self.key, value)
    }
}

/// Whether `password` matches `hash`.
fn verify(hash: &Hash, password: &[u8]) -> bool {
    match hash {
        Hash::Bcrypt(h) => {
            let (h, pw) = (h.clone(), password.to_vec());
            // On the blocking pool inside a fiber (bcrypt takes milliseconds by design), in
            // place on a thread.
            weft_fiber::spawn_blocking(move || bcrypt::verify(pw, &h).unwrap_or(false))
        }
        Hash::Apr1 { salt, full } => same(&apr1(password, salt), full),
        Hash::Sha1(d) => {
            let got = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, password);
            same(got.as_ref(), d)
        }
    }
}

/// Equal bytes, compared over every byte whatever differs first.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The users of an htpasswd file; an error is (line number, why).
fn parse_htpasswd(text: &[u8]) -> Result<HashMap<Vec<u8>, Hash>, (usize, String)> {
    let mut users = HashMap::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) || line.starts_with(b"#") {
            continue;
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or((n, "expected USER:HASH".to_string()))?;
        let (user, hash) = (&line[..colon], &line[colon + 1..]);
        if user.is_empty() {
            return Err((n, "no user name".into()));
        }
        let hash = parse_hash(hash).map_err(|why| (n, why))?;
        if users.insert(user.to_vec(), hash).is_some() {
            return Err((
                n,
                format!("user {:?} is there twice", String::from_utf8_lossy(user)),
            ));
        }
    }
    Ok(users)
}

fn parse_hash(h: &[u8]) -> Result<Hash, String> {
    let text = std::str::from_utf8(h).map_err(|_| "a hash that is not text".to_string())?;
    if ["$2y$", "$2a$", "$2b$"].iter().any(|p| text.starts_with(p)) {
        if text.len() != 60 {
            return Err("a bcrypt hash is 60 characters".into());
        }
        return Ok(Hash::Bcrypt(text.to_string()));
    }
    if let Some(rest) = text.strip_prefix("$apr1$") {
        let (salt, digest) = rest
            .split_once('$')
            .ok_or("an $apr1$ hash is $apr1$SALT$HASH".to_string())?;
        if salt.is_empty() || salt.len() > 8 || digest.len() != 22 {
            return Err("an $apr1$ hash is $apr1$SALT$HASH (8 and 22 characters)".into());
        }
        return Ok(Hash::Apr1 {
            salt: salt.as_bytes().to_vec(),
            full: h.to_vec(),
        });
    }
    if let Some(b64) = text.strip_prefix("{SHA}") {
        let d = weft_http::auth::base64_decode(b64.as_bytes())
            .filter(|d| d.len() == 20)
            .ok_or("a {SHA} hash is the base64 of 20 bytes".to_string())?;
        let mut out = [0u8; 20];
        out.copy_from_slice(&d);
        return Ok(Hash::Sha1(out));
    }
    Err(
        "not a bcrypt ($2y$), $apr1$ or {SHA} hash (plain-text and crypt passwords are \
         refused: htpasswd -B makes bcrypt)"
            .into(),
    )
}

/// Apache's MD5 crypt (`$apr1$`, the md5crypt algorithm with Apache's magic string): the
/// whole `$apr1$SALT$HASH` for `password` and `salt`.
fn apr1(password: &[u8], salt: &[u8]) -> Vec<u8> {
    use md5::{Digest, Md5};
    const MAGIC: &[u8] = b"$apr1$";
    let md5 = |parts: &[&[u8]]| -> [u8; 16] {
        let mut h = Md5::new();
        for p in parts {
            h.update(p);
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize());
        out
    };
    let alt = md5(&[password, salt, password]);
    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(MAGIC);
    ctx.update(salt);
    let mut left = password.len();
    while left > 0 {
        ctx.update(&alt[..left.min(16)]);
        left = left.saturating_sub(16);
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin = [0u8; 16];
    fin.copy_from_slice(&ctx.finalize());
    for round in 0..1000 {
        let mut c = Md5::new();
        if round & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if round % 3 != 0 {
            c.update(salt);
        }
        if round % 7 != 0 {
            c.update(password);
        }
        if round & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin.copy_from_slice(&c.finalize());
    }
    const ITOA: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::with_capacity(MAGIC.len() + salt.len() + 23);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(salt);
    out.push(b'$');
    let mut put = |v: u32, n: usize| {
        let mut v = v;
        for _ in 0..n {
            out.push(ITOA[(v & 63) as usize]);
            v >>= 6;
        }
    };
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        put(
            u32::from(fin[a]) << 16 | u32::from(fin[b]) << 8 | u32::from(fin[c]),
            4,
        );
    }
    put(u32::from(fin[11]), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines written by `htpasswd -nbm`, `-nbB -C 5` and `-nbs` (apache2-utils 2.4).
    const FILE: &str = "# users\n\
        alice:$apr1$eseoq7.K$/R8ebXT1g.cdxguF6C3DI.\n\
        bob:$2y$05$aY5IS5QAeTuIMKHDMxSMG.d5ejFSdDcYcENNvP1uMChqU7e2psQ56\n\
        \n\
        carol:{SHA}1kzdDlY3j+M4WdOmI2I50pZfKJ0=\r\n\
        dave:$apr1$ciOf4Em3$KtCcl/1sPDN91.wx3Qwxg.\n";

    #[test]
    fn htpasswd_hashes_as_apache_writes_them() {
        let users = parse_htpasswd(FILE.as_bytes()).unwrap();
        let check = |u: &str, pw: &str| verify(&users[u.as_bytes()], pw.as_bytes());
        assert!(check("alice", "secret"));
        assert!(!check("alice", "Secret"));
        assert!(check("bob", "secret two"));
        assert!(!check("bob", "secret"));
        assert!(check("carol", "sécret3"));
        assert!(!check("carol", "secret3"));
        assert!(check("dave", ""), "an empty password");
        assert!(!check("dave", " "));
    }

    #[test]
    fn plain_text_and_unknown_hashes_refuse_the_file() {
        for (bad, line) in [
            ("erin:plain\n", 1),
            (
                "alice:$apr1$eseoq7.K$/R8ebXT1g.cdxguF6C3DI.\nfrank:xyZ12abcdefgh\n",
                2,
            ),
            ("no colon here\n", 1),
            (":$apr1$eseoq7.K$/R8ebXT1g.cdxguF6C3DI.\n", 1),
            ("carol:{SHA}notbase64\n", 1),
            ("bob:$2y$05$short\n", 1),
            (
                "a:{SHA}1kzdDlY3j+M4WdOmI2I50pZfKJ0=\na:{SHA}1kzdDlY3j+M4WdOmI2I50pZfKJ0=\n",
                2,
            ),
        ] {
            let e = parse_htpasswd(bad.as_bytes()).unwrap_err();
            assert_eq!(e.0, line, "{bad:?}: {}", e.1);
        }
    }

    #[test]
    fn equal_means_every_byte() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
