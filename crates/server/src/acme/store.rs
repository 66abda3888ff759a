//! The ACME storage (`[acme] storage`): what weft obtained, kept on disk so a restart, an
//! upgrade, the `process` model's master and another instance sharing the directory all find
//! it. One folder per CA (a staging certificate never stands in for a production one):
//!
//! ```text
//! storage/                              0700, owned by the user weft serves as
//!   acme-v02.api.letsencrypt.org-directory/
//!     account.key                       the account's key (PKCS#8 PEM, 0600)
//!     account.url                       its URL at the CA
//!     certificates/NAME/pair.pem        its key, then the chain, leaf first (0600)
//!     certificates/NAME/ocsp.der        its OCSP response, when its CA runs a responder
//!     certificates/NAME/renew           present: renew at the next look (`weft acme renew`)
//!     challenges/http-01/TOKEN          the key authorization the CA fetches over HTTP
//!     challenges/tls-alpn-01/NAME       the key authorization the acme-tls/1 certificate carries
//!     locks/NAME.lock                   held (flock) by the instance ordering NAME
//! ```
//!
//! Files are written to a temporary name and renamed, so a reader sees the old file or the
//! new one, never half of one; a certificate and its key are one file, so a reader never
//! pairs a certificate with the key of the one before.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::jws::AccountKey;
use crate::config::AcmeConfig;

/// A certificate in the store.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The chain as the CA sent it (PEM, leaf first).
    pub chain_pem: Vec<u8>,
    /// Its key (PEM).
    pub key_pem: Vec<u8>,
    /// The leaf's validity, seconds since the epoch.
    pub not_before: i64,
    /// The leaf's expiry, seconds since the epoch.
    pub not_after: i64,
    /// The leaf (DER).
    pub leaf: CertificateDer<'static>,
}

/// One CA's folder of the storage.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A name weft obtains certificates for, and stores files under: a host name of lower-case
/// letters, digits and hyphens in dot-separated labels (no wildcard, no address).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// A challenge token as RFC 8555 §8.1 makes them (base64url), the only thing looked up on
/// disk for a request.
pub fn valid_token(token: &str) -> bool {
    (1..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The folder of a CA: its directory URL without the scheme, every byte but letters, digits,
/// `.` and `-` as `-` (`acme-v02.api.letsencrypt.org-directory`).
fn ca_folder(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'.' || b == b'-' {
                char::from(b)
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

/// Creates `dir` and the folders above it that are missing, each 0700 (an existing one is left
/// as it is).
fn make_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `data` to `path` through a temporary file in the same folder and a rename, with
/// permissions `mode`.
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    // Unique per writer: instances sharing the storage may have the same pid (containers).
    let tmp = path.with_file_name(format!(
        ".{}.{}.{:016x}.tmp",
        path.file_name()
            .map_or_else(Default::default, |n| n.to_string_lossy()),
        std::process::id(),
        {
            use ring::rand::SecureRandom;
            let mut b = [0u8; 8];
            let _ = ring::rand::SystemRandom::new().fill(&mut b);
            u64::from_le_bytes(b)
        }
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode given to open is masked by the umask; the file is ours, so set it.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// PEM of a PKCS#8 private key.
fn pkcs8_pem(der: &[u8]) -> String {
    let b64 = weft_http::auth::base64_encode(der);
    let mut out = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END PRIVATE KEY-----\n");
    out
}

impl Store {
    /// The folder of `cfg`'s CA under its storage (nothing is touched on disk).
    pub fn new(cfg: &AcmeConfig) -> Store {
        Store {
            dir: cfg.storage.join(ca_folder(cfg.directory_url())),
        }
    }

    /// The CA's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the storage (0700) and this CA's folder; started as root to serve as `owner`,
    /// hands what it created to it, so the serving user can write what it obtains. A storage
    /// directory that exists already keeps its owner and mode (`storage = "/var/lib"` must
    /// not hand `/var/lib` over); this CA's folder is made the owner's either way.
    pub fn prepare(&self, storage: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
        let made_storage = !storage.exists();
        make_dir(&self.dir)?;
        let mut ours = vec![self.dir.clone()];
        if made_storage {
            ours.push(storage.to_path_buf());
        }
        for d in &ours {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(d, Some(uid), Some(gid))?;
            }
        }
        Ok(())
    }

    /// Runs `make` (which creates the account) under the storage's account lock, waiting up to
    /// 30 s for another instance's: two instances starting together make one account.
    pub fn with_account_lock<T>(&self, make: impl FnOnce() -> T) -> io::Result<T> {
        let f = self.lock_file("account")?;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !weft_sys::fs::try_lock(&f)? {
            if std::time::Instant::now() >= end {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "another instance holds the account lock",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Ok(make())
    }

    /// The account's key and URL, if one was stored (the URL is `None` when the key was
    /// stored but the account not yet made).
    pub fn account(&self) -> io::Result<Option<(AccountKey, Option<String>)>> {
        let path = self.dir.join("account.key");
        let pem = match std::fs::read(&path) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let der = match PrivateKeyDer::from_pem_slice(&pem) {
            Ok(PrivateKeyDer::Pkcs8(k)) => k,
            Ok(_) | Err(_) => {
                return Err(bad(format!("{}: not a PKCS#8 private key", path.display())))
            }
        };
        let key = AccountKey::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let url = match std::fs::read_to_string(self.dir.join("account.url")) {
            Ok(u) if !u.trim().is_empty() => Some(u.trim().to_string()),
            Ok(_) => None,
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Some((key, url)))
    }

    /// Stores the account's key (before the account is made with it, so a crash between
    /// the two finds the key and the CA finds the account by it).
    pub fn save_account_key(&self, key: &AccountKey) -> io::Result<()> {
        make_dir(&self.dir)?;
        write_atomic(
            &self.dir.join("account.key"),
            pkcs8_pem(key.pkcs8()).as_bytes(),
            0o600,
        )
    }

    /// Stores the account's URL.
    pub fn save_account_url(&self, url: &str) -> io::Result<()> {
        write_atomic(
            &self.dir.join("account.url"),
            format!("{url}\n").as_bytes(),
            0o644,
        )
    }

    fn cert_dir(&self, name: &str) -> PathBuf {
        self.dir.join("certificates").join(name)
    }

    /// The certificate and key stored for `name`: `Ok(None)` if there is none, `Err` if what
    /// is there does not read (the caller treats it as none, and says so).
    pub fn certificate(&self, name: &str) -> io::Result<Option<Stored>> {
        if !valid_name(name) {
            return Ok(None);
        }
        let path = self.cert_dir(name).join("pair.pem");
        let pair = match std::fs::read(&path) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {why}", path.display()),
            )
        };
        // The key's PEM block first, then the chain's.
        let split = super::transport::find(&pair, b"-----BEGIN CERTIFICATE-----")
            .ok_or_else(|| bad("no CERTIFICATE block"))?;
        let (key_pem, chain_pem) = (pair[..split].to_vec(), pair[split..].to_vec());
        let leaf = CertificateDer::pem_slice_iter(&chain_pem)
            .next()
            .ok_or_else(|| bad("no CERTIFICATE block"))?
            .map_err(|_| bad("not PEM"))?;
        let (not_before, not_after) = weft_http::x509::validity(&leaf).map_err(bad)?;
        Ok(Some(Stored {
            chain_pem,
            key_pem,
            not_before,
            not_after,
            leaf,
        }))
    }

    /// Stores `name`'s new certificate and key (one file, one rename), and clears a renewal
    /// asked for.
    pub fn save_certificate(&self, name: &str, chain_pem: &[u8], key_pem: &[u8]) -> io::Result<()> {
        let dir = self.cert_dir(name);
        make_dir(&dir)?;
        let mut pair = key_pem.to_vec();
        if !pair.ends_with(b"\n") {
            pair.push(b'\n');
        }
        pair.extend_from_slice(chain_pem);
        write_atomic(&dir.join("pair.pem"), &pair, 0o600)?;
        // The old certificate's OCSP response is not the new one's.
        let _ = std::fs::remove_file(dir.join("ocsp.der"));
        self.clear_renewal(name);
        Ok(())
    }

    /// `name`'s stored OCSP response, if any (checked by the caller).
    pub fn ocsp(&self, name: &str) -> Option<Vec<u8>> {
        if !valid_name(name) {
            return None;
        }
        std::fs::read(self.cert_dir(name).join("ocsp.der")).ok()
    }

    /// Stores `name`'s OCSP response (`None`: removes it).
    pub fn save_ocsp(&self, name: &str, der: Option<&[u8]>) -> io::Result<()> {
        let path = self.cert_dir(name).join("ocsp.der");
        match der {
            Some(der) => write_atomic(&path, der, 0o644),
            None => match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
    }

    /// Whether a renewal of `name` was asked for (`weft acme renew`).
    pub fn renewal_requested(&self, name: &str) -> bool {
        self.cert_dir(name).join("renew").exists()
    }

    /// Asks for `name` to be renewed at the running server's next look. Run as root for a
    /// server that serves as `owner`, what it creates is handed to that user (the server must
    /// write there).
    pub fn request_renewal(&self, name: &str, owner: Option<(u32, u32)>) -> io::Result<()> {
        let certs = self.dir.join("certificates");
        let dir = self.cert_dir(name);
        let made: Vec<PathBuf> = [&certs, &dir]
            .into_iter()
            .filter(|d| !d.exists())
            .cloned()
            .collect();
        make_dir(&dir)?;
        write_atomic(&dir.join("renew"), b"", 0o600)?;
        if let Some((uid, gid)) = owner {
            for p in made.iter().chain([&dir.join("renew")]) {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))?;
            }
        }
        Ok(())
    }

    fn clear_renewal(&self, name: &str) {
        let _ = std::fs::remove_file(self.cert_dir(name).join("renew"));
    }

    /// Takes the lock of `name` without waiting: `Some` (held while it lives) when this
    /// process may order it, `None` when another process (an instance sharing the storage)
    /// holds it.
    pub fn lock(&self, name: &str) -> io::Result<Option<File>> {
        let f = self.lock_file(name)?;
        Ok(weft_sys::fs::try_lock(&f)?.then_some(f))
    }

    /// `locks/WHAT.lock`, opened (created 0600 if need be) to be locked.
    fn lock_file(&self, what: &str) -> io::Result<File> {
        let dir = self.dir.join("locks");
        make_dir(&dir)?;
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(format!("{what}.lock")))
    }

    /// Where challenge `kind`'s answers are kept.
    pub fn challenges(&self, kind: &str) -> PathBuf {
        self.dir.join("challenges").join(kind)
    }

    /// Serves `key_authorization` for challenge `kind` under `key` (a token or a name).
    pub fn write_answer(&self, kind: &str, key: &str, key_authorization: &str) -> io::Result<()> {
        if !valid_token(key) && !valid_name(key) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{kind}: {key:?} is not a token or a name"),
            ));
        }
        let dir = self.challenges(kind);
        make_dir(&dir)?;
        write_atomic(&dir.join(key), key_authorization.as_bytes(), 0o644)
    }

    /// Stops serving the answer under `key`.
    pub fn remove_answer(&self, kind: &str, key: &str) {
        if valid_token(key) || valid_name(key) {
            let _ = std::fs::remove_file(self.challenges(kind).join(key));
        }
    }
}

/// The answer stored under `key` in the challenge folder `dir`, if any (what a listener
/// serves; `key` is checked before it touches the disk).
pub fn answer(dir: &Path, key: &str) -> Option<String> {
    if !valid_token(key) && !valid_name(key) {
        return None;
    }
    let text = std::fs::read_to_string(dir.join(key)).ok()?;
    let text = text.trim();
    (!text.is_empty() && text.len() <= 1024).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(tag: &str) -> (PathBuf, Store) {
        let storage =
            std::env::temp_dir().join(format!("weft-acme-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&storage);
        let cfg = AcmeConfig {
            storage: storage.join("acme"),
            directory: "https://127.0.0.1:14000/dir".into(),
            ..AcmeConfig::default()
        };
        (storage, Store::new(&cfg))
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn names_and_tokens_are_checked_before_they_become_paths() {
        for good in [
            "example.org",
            "a-b.example.org",
            "xn--bcher-kva.example",
            "localhost",
        ] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "*.example.org",
            "../etc",
            "a..b",
            "-a.org",
            "a-.org",
            "Example.org",
            "a/b",
            "127.0.0.1",
            "a b",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(valid_token("LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"));
        for bad in ["", "..", "a/b", "a.b", "a=b"] {
            assert!(!valid_token(bad), "{bad}");
        }
        assert_eq!(
            ca_folder("https://acme-v02.api.letsencrypt.org/directory"),
            "acme-v02.api.letsencrypt.org-directory"
        );
        assert_eq!(
            ca_folder("https://127.0.0.1:14000/dir"),
            "127.0.0.1-14000-dir"
        );
    }

    #[test]
    fn the_storage_is_private_and_keys_are_0600() {
        let (storage, s) = store("modes");
        s.prepare(&storage.join("acme"), None).unwrap();
        assert_eq!(mode(&storage.join("acme")), 0o700);
        assert_eq!(mode(s.dir()), 0o700);
        let key = AccountKey::generate().unwrap();
        s.save_account_key(&key).unwrap();
        assert_eq!(mode(&s.dir().join("account.key")), 0o600);
        let (back, url) = s.account().unwrap().unwrap();
        assert_eq!(back.thumbprint(), key.thumbprint());
        assert_eq!(url, None);
        s.save_account_url("https://ca/acct/1").unwrap();
        assert_eq!(
            s.account().unwrap().unwrap().1.as_deref(),
            Some("https://ca/acct/1")
        );
        let _ = std::fs::remove_dir_all(storage);
    }

    /// Started as root to serve as another user, the storage is handed to that user.
    #[test]
    fn the_storage_is_handed_to_the_serving_user() {
        use std::os::unix::fs::MetadataExt;
        if weft_sys::user::euid() != 0 {
            eprintln!("the_storage_is_handed_to_the_serving_user: skipped: not root");
            return;
        }
        let (storage, s) = store("owner");
        s.prepare(&storage.join("acme"), Some((65_534, 65_534)))
            .unwrap();
        for d in [storage.join("acme"), s.dir().to_path_buf()] {
            let m = std::fs::metadata(&d).unwrap();
            assert_eq!((m.uid(), m.gid()), (65_534, 65_534), "{}", d.display());
            assert_eq!(m.mode() & 0o777, 0o700);
        }
        // `weft acme renew` as root: what it makes is the serving user's too.
        s.request_renewal("a.example", Some((65_534, 65_534)))
            .unwrap();
        for p in [
            "certificates",
            "certificates/a.example",
            "certificates/a.example/renew",
        ] {
            let m = std::fs::metadata(s.dir().join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (65_534, 65_534), "{p}");
        }
        let _ = std::fs::remove_dir_all(&storage);
        // An existing storage directory keeps its owner and mode; only the CA's folder is made
        // the user's.
        std::fs::create_dir_all(&storage).unwrap();
        std::fs::set_permissions(&storage, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Store::new(&AcmeConfig {
            storage: storage.clone(),
            ..AcmeConfig::default()
        });
        s.prepare(&storage, Some((65_534, 65_534))).unwrap();
        let m = std::fs::metadata(&storage).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o755));
        assert_eq!(std::fs::metadata(s.dir()).unwrap().uid(), 65_534);
        let _ = std::fs::remove_dir_all(storage);
    }

    #[test]
    fn a_certificate_round_trips_with_its_validity_and_clears_a_renewal() {
        let (storage, s) = store("certs");
        assert!(s.certificate("a.example").unwrap().is_none());
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 12, 1);
        params.not_after = rcgen::date_time_ymd(2027, 3, 1);
        let cert = params.self_signed(&key).unwrap();
        s.request_renewal("a.example", None).unwrap();
        assert!(s.renewal_requested("a.example"));
        s.save_certificate(
            "a.example",
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
        )
        .unwrap();
        assert!(!s.renewal_requested("a.example"));
        let got = s.certificate("a.example").unwrap().unwrap();
        assert_eq!(got.not_before, 1_796_083_200); // 2026-12-01T00:00:00Z
        assert_eq!(got.not_after, 1_803_859_200); // 2027-03-01T00:00:00Z
        assert_eq!(got.leaf.as_ref(), cert.der().as_ref());
        assert_eq!(
            mode(&s.dir().join("certificates/a.example/pair.pem")),
            0o600
        );
        assert!(String::from_utf8(got.key_pem.clone())
            .unwrap()
            .contains("PRIVATE KEY"));
        // Nothing outside the names' shape is looked up.
        assert!(s.certificate("../a.example").unwrap().is_none());
        std::fs::write(s.dir().join("certificates/a.example/pair.pem"), b"junk").unwrap();
        assert!(s.certificate("a.example").is_err());
        let _ = std::fs::remove_dir_all(storage);
    }

    #[test]
    fn one_lock_holder_per_name() {
        let (storage, s) = store("lock");
        let held = s.lock("a.example").unwrap();
        assert!(held.is_some());
        assert!(s.lock("a.example").unwrap().is_none(), "held elsewhere");
        assert!(
            s.lock("b.example").unwrap().is_some(),
            "another name is free"
        );
        drop(held);
        assert!(s.lock("a.example").unwrap().is_some());
        let _ = std::fs::remove_dir_all(storage);
    }

    #[test]
    fn answers_are_served_by_token_and_taken_away() {
        let (storage, s) = store("answers");
        let dir = s.challenges("http-01");
        assert_eq!(answer(&dir, "tok_EN-1"), None);
        s.write_answer("http-01", "tok_EN-1", "tok_EN-1.thumb")
            .unwrap();
        assert_eq!(answer(&dir, "tok_EN-1").as_deref(), Some("tok_EN-1.thumb"));
        assert!(s.write_answer("http-01", "../x", "y").is_err());
        assert_eq!(answer(&dir, "../account.key"), None);
        s.remove_answer("http-01", "tok_EN-1");
        assert_eq!(answer(&dir, "tok_EN-1"), None);
        let _ = std::fs::remove_dir_all(storage);
    }
}
