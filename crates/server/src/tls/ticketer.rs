//! Session tickets (stateless resumption): ChaCha20-Poly1305 keys of weft's own, one per
//! period of `[tls] ticket_key_lifetime` (rustls' own ticketer fixes it at 6 h), each
//! derived from one secret and the period's number on the Unix clock ([`Derived`]): tickets
//! are made with the current period's key and accepted with it or the previous one's.
//!
//! Every process that holds the secret derives the same keys without talking to another: the
//! `process` model's connection processes (forked from the master, which made the secret
//! before its first fork) each roll to the next key on their own at the same moment, however
//! long they live, and a server started by `SIGUSR2` gets the secret from the old one (in its
//! environment, `WEFT_TICKET_SECRET`, taken out at start), so tickets made before an upgrade
//! resume after it. A reload (`SIGHUP`) keeps the process and so the secret.

use std::fmt;
use std::sync::Arc;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

/// The environment variable that carries the secret to a server started by an upgrade.
pub(crate) const SECRET_VAR: &str = "WEFT_TICKET_SECRET";

/// Tickets are `period (8 bytes, big-endian) || nonce || ciphertext || tag`, the period
/// authenticated as associated data.
const PERIOD_LEN: usize = 8;

/// Keys derived per period from one secret (see the module docs).
pub(crate) struct Derived {
    secret: hmac::Key,
    /// Seconds per key.
    period: u64,
    /// The Unix time in seconds (a test's clock in the unit tests).
    now: fn() -> u64,
}

impl fmt::Debug for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.debug_struct("Derived")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Derived {
    fn new(secret: &[u8; 32], period_secs: u32, now: fn() -> u64) -> Derived {
        Derived {
            secret: hmac::Key::new(hmac::HMAC_SHA256, secret),
            period: u64::from(period_secs.max(1)),
            now,
        }
    }

    /// The key of period `n`.
    fn key(&self, n: u64) -> Option<LessSafeKey> {
        let mut label = b"weft ticket key ".to_vec();
        label.extend_from_slice(&n.to_be_bytes());
        let tag = hmac::sign(&self.secret, &label);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &tag.as_ref()[..32]).ok()?;
        Some(LessSafeKey::new(key))
    }

    fn current(&self) -> u64 {
        (self.now)() / self.period
    }
}

impl ProducesTickets for Derived {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // A ticket opens during its period and the next: at least one period, at most two.
        u32::try_from(self.period * 2).unwrap_or(u32::MAX)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let n = self.current();
        let key = self.key(n)?;
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let period = n.to_be_bytes();
        let mut out = Vec::with_capacity(PERIOD_LEN + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&period);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&period),
            &mut sealed,
        )
        .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let (period, rest) = cipher.split_at_checked(PERIOD_LEN)?;
        let n = u64::from_be_bytes(period.try_into().ok()?);
        let now = self.current();
        if n != now && n.checked_add(1) != Some(now) {
            return None;
        }
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = self
            .key(n)?
            .open_in_place(nonce, Aad::from(period), &mut buf)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// The ticketer of every TLS listener: keys of `lifetime_secs` each, from `secret`.
pub(crate) fn derived(secret: &[u8; 32], lifetime_secs: u32) -> Arc<dyn ProducesTickets> {
    Arc::new(Derived::new(secret, lifetime_secs, unix_now))
}

/// The process's secret: the one an upgrade handed over in the environment (taken out at
/// start, `crate::activation`), else a new random one.
pub(crate) fn secret(carried: Option<&str>) -> Result<[u8; 32], String> {
    if let Some(hex) = carried {
        if let Some(s) = from_hex(hex) {
            return Ok(s);
        }
        log::warn!("{SECRET_VAR}: not 64 hex digits; session tickets start with a new key");
    }
    let mut s = [0u8; 32];
    SystemRandom::new()
        .fill(&mut s)
        .map_err(|_| "TLS session ticket key: no random bytes".to_string())?;
    Ok(s)
}

/// `secret` as 64 lowercase hex digits (for [`SECRET_VAR`]).
pub(crate) fn to_hex(secret: &[u8; 32]) -> String {
    secret.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    static CLOCK: AtomicU64 = AtomicU64::new(1_000_000);

    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }

    #[test]
    fn two_holders_of_the_secret_open_each_others_tickets_across_a_rotation() {
        let secret = [7u8; 32];
        // Two connection processes (or a server and its successor after an upgrade).
        let a = Derived::new(&secret, 100, clock);
        let b = Derived::new(&secret, 100, clock);
        let other = Derived::new(&[8u8; 32], 100, clock);
        CLOCK.store(1_000_050, Relaxed);
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(b.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        assert_eq!(other.decrypt(&t), None, "another secret opened it");
        // The next period: b rolled on its own, to the key a rolls to, and the previous one
        // still opens.
        CLOCK.store(1_000_120, Relaxed);
        let t2 = b.encrypt(b"later").unwrap();
        assert_eq!(a.decrypt(&t2).as_deref(), Some(&b"later"[..]));
        assert_eq!(a.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        // Two periods on: the first ticket is over, the second still opens; then it is over.
        CLOCK.store(1_000_250, Relaxed);
        assert_eq!(b.decrypt(&t), None, "a ticket two periods old opened");
        assert_eq!(b.decrypt(&t2).as_deref(), Some(&b"later"[..]));
        CLOCK.store(1_000_300, Relaxed);
        assert_eq!(b.decrypt(&t2), None, "a ticket two periods old opened");
        CLOCK.store(1_000_220, Relaxed);
        // Tampering, truncation, a changed period: refused.
        let mut bad = t2.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(a.decrypt(&bad), None);
        let mut moved = t2.clone();
        moved[7] ^= 1;
        assert_eq!(a.decrypt(&moved), None);
        assert_eq!(a.decrypt(&t2[..PERIOD_LEN + NONCE_LEN]), None);
        assert_eq!(a.decrypt(b""), None);
        assert_ne!(a.encrypt(b"x").unwrap(), a.encrypt(b"x").unwrap());
        assert_eq!(a.lifetime(), 200);
    }

    #[test]
    fn the_secret_travels_as_hex_and_a_bad_one_is_replaced() {
        let s = secret(None).unwrap();
        assert_eq!(secret(Some(&to_hex(&s))).unwrap(), s);
        assert_ne!(secret(Some("zz")).unwrap(), s);
        assert_ne!(secret(Some(&"g".repeat(64))).unwrap(), s);
    }
}
