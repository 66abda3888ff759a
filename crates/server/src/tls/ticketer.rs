//! Session tickets (stateless resumption): rustls' `TicketRotator` over a ChaCha20-Poly1305
//! ticket key of weft's own, so that the rotation period is a setting (`[tls]
//! ticket_key_lifetime`; rustls' own ticketer fixes it at 6 h), and [`roll`], which the
//! `process` model's master calls before each fork: a connection process inherits the keys
//! as the master holds them, so all of them encrypt with the same current key and accept
//! the previous one. Without it each process forked after a rotation would roll to a random
//! key of its own at its first ticket, and a ticket made by one would not resume in another.
//! A connection process that lives past a rotation still rolls on its own for the tickets it
//! makes after it (TLS 1.3 sends them just after the handshake, so rarely), and a new process
//! after `SIGUSR2` starts with new keys: carrying the keys across an upgrade is still to do.

use std::fmt;
use std::sync::Arc;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::crypto::GetRandomFailed;
use rustls::server::ProducesTickets;

/// The bytes that name a key at the front of every ticket it made.
const NAME_LEN: usize = 16;

/// One ticket key: tickets are `name || nonce || ciphertext || tag`, the name authenticated.
struct AeadTicketer {
    key: LessSafeKey,
    name: [u8; NAME_LEN],
}

impl fmt::Debug for AeadTicketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("AeadTicketer").finish_non_exhaustive()
    }
}

/// A new random key (rustls' `TicketRotator` calls it at start and at each rotation).
fn new_key() -> Result<Box<dyn ProducesTickets>, GetRandomFailed> {
    let rand = SystemRandom::new();
    let mut key = [0u8; 32];
    let mut name = [0u8; NAME_LEN];
    rand.fill(&mut key).map_err(|_| GetRandomFailed)?;
    rand.fill(&mut name).map_err(|_| GetRandomFailed)?;
    let key = UnboundKey::new(&CHACHA20_POLY1305, &key).map_err(|_| GetRandomFailed)?;
    Ok(Box::new(AeadTicketer {
        key: LessSafeKey::new(key),
        name,
    }))
}

impl ProducesTickets for AeadTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // The rotator's lifetime is the one clients are told.
        0
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&self.name),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let (name, rest) = cipher.split_at_checked(NAME_LEN)?;
        if name != self.name {
            return None;
        }
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&self.name), &mut buf)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// The ticketer of every TLS listener: keys rotated every `lifetime_secs`, tickets accepted
/// for twice that (the current key and the previous one).
pub(crate) fn rotating(lifetime_secs: u32) -> Result<Arc<dyn ProducesTickets>, String> {
    rustls::ticketer::TicketRotator::new(lifetime_secs.max(1), new_key)
        .map(|t| Arc::new(t) as Arc<dyn ProducesTickets>)
        .map_err(|e| format!("TLS session ticket key: {e}"))
}

/// Rotates the keys now if their time has come (the rotator does that as it makes or opens a
/// ticket, and this makes none that is sent): the process model's master calls it before
/// each fork, so the connection process starts with the keys every other one has.
pub(crate) fn roll(ticketer: &dyn ProducesTickets) {
    let _ = ticketer.encrypt(&[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_with_its_key_only_and_not_when_changed() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(a.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        assert_eq!(b.decrypt(&t), None, "another key opened it");
        let mut bad = t.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(a.decrypt(&bad), None, "a changed ticket opened");
        assert_eq!(a.decrypt(&t[..NAME_LEN + NONCE_LEN]), None);
        assert_eq!(a.decrypt(b""), None);
        // A fresh nonce each time: the same state makes two different tickets.
        assert_ne!(a.encrypt(b"x").unwrap(), a.encrypt(b"x").unwrap());
    }

    #[test]
    fn the_rotating_ticketer_opens_what_it_made() {
        let t = rotating(3600).unwrap();
        assert!(t.enabled());
        assert_eq!(t.lifetime(), 7200, "tickets are accepted for two periods");
        let ticket = t.encrypt(b"state").unwrap();
        roll(&*t);
        assert_eq!(t.decrypt(&ticket).as_deref(), Some(&b"state"[..]));
    }
}
