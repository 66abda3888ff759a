//! Per-client limits: open connections per client address (`limits.conn_per_ip`, nginx
//! `limit_conn`) and a request rate per client address (`[rate_limit]`, nginx `limit_req`),
//! counted in one fixed-size table shared by every model and every process.
//!
//! **Keys.** A connection counts against the address that opened it: the socket's peer, or the
//! address a PROXY protocol header gave (`[[listen]] proxy_protocol`), taken once that header
//! has been read and before the first request. A request counts against the request's client
//! address, which is the connection's after `real_ip_from` and `X-Forwarded-For` (trusted
//! proxies): the forwarded address is only known once a head has been read, so it keys the
//! rate, not the connection count. IPv4 addresses and IPv6 ones (whole, as nginx's
//! `$binary_remote_addr`) are keys; an IPv4-mapped IPv6 address is its IPv4 address.
//!
//! **Memory.** The table is `limits.client_zone` slots in one anonymous shared mapping made
//! before the `process` model forks (so its master and children see one table), grouped in
//! sets of `WAYS`; a key lives in the set its keyed hash picks (the hash key is random per
//! start, so a client cannot aim many addresses at one set). However many addresses appear,
//! the table never grows: a new address takes the slot in its set that loses least — an empty
//! one, or one whose bucket has drained and has no connection open (forgetting it changes
//! nothing), else the one whose bucket drains first. A slot with open connections is never
//! taken (its count must stay until they close): an address arriving at a set whose slots all
//! hold connections is let through uncounted (`weft_limit_untracked_total`).
//!
//! **Rate.** A leaky bucket as nginx's `limit_req ... burst=B nodelay`, computed as GCRA: each
//! slot keeps the time at which its bucket is empty again (`tat`). A request at `now` passes if
//! `tat - now <= burst * T` (T = 1/rate) and moves `tat` to `max(tat, now) + T`; otherwise it
//! is answered 429 with `Retry-After` (the whole seconds until one would pass). So at most
//! `burst + 1` requests pass at once and `rate` per second after that. nginx without `nodelay`
//! delays the excess instead; weft always answers at once (the delay would hold a thread of the
//! thread, process and pipeline models).
//!
//! **Concurrency.** Every field is an atomic in shared memory (`AtomicsOnly`); a connection
//! count changes only by compare-and-swap of the word that also holds the slot's key, so a
//! slot cannot change hands while it has connections. Two racing requests of one address may
//! both read the bucket before either writes; the compare-and-swap retries, so none is lost.
//! A slot taken over between a lookup and the bucket's update can misplace one request's
//! count: the limits are exact for one address, approximate only in that race.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use crate::config::rate_limit::{Rate, RateLimitConfig};
use crate::config::Config;
use weft_sys::shm::{AtomicsOnly, Shared, SharedSlice};

/// Slots per set: a lookup reads at most this many (one or two cache lines' worth).
pub(crate) const WAYS: usize = 8;
/// Tries at taking a slot before an address is let through uncounted (another thread took
/// each slot this one chose in the meantime).
const CLAIM_TRIES: usize = 4;

/// One slot: `word` is the key's 32-bit fingerprint (high half, 0: empty) and the address's
/// open connections (low half); `tat` the time its bucket is empty again (ns since the table's
/// epoch, 0: empty).
#[derive(Debug)]
pub(crate) struct Slot {
    word: AtomicU64,
    tat: AtomicU64,
}

// SAFETY: two AtomicU64s; all-zero is an empty slot.
unsafe impl AtomicsOnly for Slot {}

/// Rejections and table events, in shared memory (every process adds to them).
#[derive(Debug)]
pub(crate) struct LimitCounters {
    /// Connections refused by `limits.conn_per_ip`.
    pub conn_rejected: AtomicU64,
    /// Requests answered 429 by `[rate_limit]`.
    pub req_rejected: AtomicU64,
    /// Addresses let through uncounted: every slot of their set held open connections.
    pub untracked: AtomicU64,
    /// Slots taken from an address whose bucket had not drained.
    pub evicted: AtomicU64,
}

// SAFETY: four AtomicU64s; all-zero is every counter at 0.
unsafe impl AtomicsOnly for LimitCounters {}

/// The per-client table (see the module doc).
pub(crate) struct ClientTable {
    slots: SharedSlice<Slot>,
    /// `slots.len() / WAYS - 1`: sets are a power of two.
    set_mask: usize,
    hasher: std::collections::hash_map::RandomState,
    /// Time 0 of `tat`; an `Instant` is `CLOCK_MONOTONIC`, the same in every process.
    epoch: Instant,
    counters: Shared<LimitCounters>,
}

impl std::fmt::Debug for ClientTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTable")
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// Why a connection or request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `limits.conn_per_ip` connections of this address are open.
    Connections,
    /// Over the rate: one request would pass after this long.
    Rate(Duration),
}

/// A connection's place in the table (`ConnInfo`): released when dropped.
#[derive(Debug)]
pub(crate) enum ConnSlot {
    /// Not counted: the limit is off, the address could not get a slot, or another process
    /// holds the count (the `process` model's master for its connection processes).
    Untracked,
    /// Counted in this slot until dropped.
    Tracked(Arc<ClientTable>, usize),
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        if let ConnSlot::Tracked(table, i) = self {
            table.release(*i);
        }
    }
}

fn key_of(ip: IpAddr) -> u128 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl ClientTable {
    /// A table of `slots` slots (rounded up to whole sets, a power of two of them).
    pub fn new(slots: usize) -> ClientTable {
        let sets = slots.div_ceil(WAYS).max(1).next_power_of_two();
        ClientTable {
            slots: SharedSlice::new(sets * WAYS),
            set_mask: sets - 1,
            hasher: std::collections::hash_map::RandomState::new(),
            epoch: Instant::now(),
            counters: Shared::new(),
        }
    }

    /// Slots in the table (fixed for its life).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Slots that hold an address now (the tests check the table never overfills).
    #[cfg(test)]
    pub fn occupied(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.word.load(Relaxed) != 0)
            .count()
    }

    /// The counters (`/_weft/metrics`).
    pub fn counters(&self) -> &LimitCounters {
        &self.counters
    }

    /// Nanoseconds since the table's epoch (at least 1: 0 means an empty bucket).
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX) + 1
    }

    /// The set and fingerprint of `ip` in `zone` (0: the server's own counts; a site with a
    /// rate of its own counts its clients in a zone of its own, so apart).
    fn place(&self, ip: IpAddr, zone: u32) -> (usize, u64) {
        let h = self.hasher.hash_one((key_of(ip), zone));
        let set = (h as usize) & self.set_mask;
        let fp = (h >> 32).max(1);
        (set * WAYS, fp)
    }

    /// The slot of `ip`'s key, taking one in its set if it has none (see the module doc for
    /// which); `None` if none can be taken. `clock` (ns since the epoch) is read only to
    /// choose a slot to take: a key that has its slot costs no clock read.
    fn slot(&self, ip: IpAddr, zone: u32, clock: impl Fn() -> u64) -> Option<usize> {
        let (base, fp) = self.place(ip, zone);
        let mut now = None;
        for _ in 0..CLAIM_TRIES {
            if let Some(i) =
                (base..base + WAYS).find(|&i| self.slots[i].word.load(Acquire) >> 32 == fp)
            {
                return Some(i);
            }
            let now = *now.get_or_insert_with(&clock);
            // The victim so far: (rank, bucket time, index, word). Rank 0: empty; 1: drained
            // with no connection (nothing lost); 2: a bucket not yet drained.
            let mut victim: Option<(u8, u64, usize, u64)> = None;
            for i in base..base + WAYS {
                let w = self.slots[i].word.load(Acquire);
                if w >> 32 == fp {
                    return Some(i);
                }
                if w & 0xffff_ffff != 0 {
                    continue;
                }
                let tat = self.slots[i].tat.load(Relaxed);
                let rank = match (w, tat <= now) {
                    (0, _) => 0,
                    (_, true) => 1,
                    (_, false) => 2,
                };
                if victim.is_none_or(|(r, t, _, _)| (rank, tat) < (r, t)) {
                    victim = Some((rank, tat, i, w));
                }
            }
            let (rank, _, i, w) = victim?;
            if self.slots[i]
                .word
                .compare_exchange(w, fp << 32, AcqRel, Acquire)
                .is_ok()
            {
                self.slots[i].tat.store(0, Relaxed);
                if rank == 2 {
                    self.counters.evicted.fetch_add(1, Relaxed);
                }
                return Some(i);
            }
        }
        None
    }

    /// Counts a new connection of `ip` against `limit` open ones (in the server's zone).
    #[cfg(test)]
    pub fn acquire(self: &Arc<Self>, ip: IpAddr, limit: u32) -> Result<ConnSlot, Refused> {
        self.acquire_at(ip, 0, limit, self.now_ns())
    }

    /// [`ClientTable::acquire`] counted in `zone` (a listener with a `conn_per_ip` of its own).
    pub fn acquire_in(
        self: &Arc<Self>,
        ip: IpAddr,
        zone: u32,
        limit: u32,
    ) -> Result<ConnSlot, Refused> {
        self.acquire_at(ip, zone, limit, self.now_ns())
    }

    fn acquire_at(
        self: &Arc<Self>,
        ip: IpAddr,
        zone: u32,
        limit: u32,
        now: u64,
    ) -> Result<ConnSlot, Refused> {
        let (_, fp) = self.place(ip, zone);
        for _ in 0..CLAIM_TRIES {
            let Some(i) = self.slot(ip, zone, || now) else {
                break;
            };
            let word = &self.slots[i].word;
            let mut w = word.load(Acquire);
            // The slot stays this key's while the swap keeps finding the key in it.
            while w >> 32 == fp {
                if (w & 0xffff_ffff) >= u64::from(limit) {
                    self.counters.conn_rejected.fetch_add(1, Relaxed);
                    return Err(Refused::Connections);
                }
                match word.compare_exchange_weak(w, w + 1, AcqRel, Acquire) {
                    Ok(_) => return Ok(ConnSlot::Tracked(self.clone(), i)),
                    Err(now_w) => w = now_w,
                }
            }
        }
        self.counters.untracked.fetch_add(1, Relaxed);
        Ok(ConnSlot::Untracked)
    }

    /// Ends a connection counted in slot `i` (its count is above 0, so the slot is still its
    /// key's).
    pub(crate) fn release(&self, i: usize) {
        let before = self.slots[i].word.fetch_sub(1, AcqRel);
        debug_assert!(
            before & 0xffff_ffff != 0,
            "released a slot with no connection"
        );
    }

    /// One request of `ip` against `rate` with `burst`, counted in `zone` (0: the server's
    /// `[rate_limit]`; a site with its own, its own zone).
    pub fn request(&self, ip: IpAddr, zone: u32, rate: Rate, burst: u32) -> Result<(), Refused> {
        self.request_with(ip, zone, rate, burst, || self.now_ns())
    }

    /// [`ClientTable::request`] at time `now` (ns since the epoch; tests pass their own clock).
    #[cfg(test)]
    pub fn request_at(&self, ip: IpAddr, rate: Rate, burst: u32, now: u64) -> Result<(), Refused> {
        self.request_with(ip, 0, rate, burst, || now)
    }

    /// [`ClientTable::request`] reading the time from `clock` (ns since the epoch).
    fn request_with(
        &self,
        ip: IpAddr,
        zone: u32,
        rate: Rate,
        burst: u32,
        clock: impl Fn() -> u64,
    ) -> Result<(), Refused> {
        let Some(i) = self.slot(ip, zone, &clock) else {
            self.counters.untracked.fetch_add(1, Relaxed);
            return Ok(());
        };
        let t = rate.interval_ns();
        let tau = t.saturating_mul(u64::from(burst));
        let cell = &self.slots[i].tat;
        let mut tat = cell.load(Acquire);
        loop {
            // The clock is read after the bucket, and again after a lost race: a thread or
            // process paused between reading the clock and its turn at the bucket must not
            // take what others let through meanwhile, at later times, as debt of its own (a
            // false 429 whenever the pause outlasts the burst's time).
            let now = clock();
            let base = tat.max(now);
            if base - now > tau {
                self.counters.req_rejected.fetch_add(1, Relaxed);
                return Err(Refused::Rate(Duration::from_nanos(base - now - tau)));
            }
            match cell.compare_exchange_weak(tat, base + t, AcqRel, Acquire) {
                Ok(_) => return Ok(()),
                Err(v) => tat = v,
            }
        }
    }
}

/// Admits a new connection of `ip` under `cfg`'s `limits.conn_per_ip` (0: no limit).
pub(crate) fn admit(
    table: &Arc<ClientTable>,
    cfg: &Config,
    listener: &crate::metrics::ListenerMetrics,
    ip: IpAddr,
) -> Result<ConnSlot, Refused> {
    let (limit, zone) = listener.conn_per_ip(cfg.limits.conn_per_ip);
    match u32::try_from(limit) {
        Ok(0) => Ok(ConnSlot::Untracked),
        Ok(limit) => table.acquire_in(ip, zone, limit),
        Err(_) => Ok(ConnSlot::Untracked),
    }
}

/// The limit a refused connection was over, for its log line: `limits.conn_per_ip = N`, or
/// `[[listen]] conn_per_ip = N` where the listener has its own.
pub(crate) fn conn_limit(cfg: &Config, listener: &crate::metrics::ListenerMetrics) -> String {
    match listener.conn_per_ip(cfg.limits.conn_per_ip) {
        (n, 0) => format!("limits.conn_per_ip = {n}"),
        (n, _) => format!("[[listen]] conn_per_ip = {n}"),
    }
}

/// The 429 answer to a request over `[rate_limit]`, or `None` to serve it. The health check
/// (`[health] path`) is never limited: a balancer's probe must not be taken for a flood.
/// `site` is the zone and settings of the request's site when it has `[site.rate_limit]`
/// (else the top-level `[rate_limit]` applies, in zone 0).
#[inline]
pub(crate) fn check_request(
    table: &ClientTable,
    cfg: &Config,
    site: Option<(u32, &RateLimitConfig)>,
    req: &crate::Request,
) -> Option<crate::Response> {
    let (zone, limit) = site.unwrap_or((0, &cfg.rate_limit));
    // Without a rate nothing is counted: decided here, in a function meant to be inlined so
    // that the default costs no call.
    let rate = limit.rate?;
    check_rate(table, cfg, zone, limit, rate, req)
}

/// [`check_request`] for a configured rate.
fn check_rate(
    table: &ClientTable,
    cfg: &Config,
    zone: u32,
    limit: &RateLimitConfig,
    rate: Rate,
    req: &crate::Request,
) -> Option<crate::Response> {
    if cfg.health.is(req.path()) {
        return None;
    }
    let ip = req.peer_addr().ip();
    match table.request(ip, zone, rate, limit.burst) {
        Ok(()) => None,
        Err(Refused::Rate(wait)) => {
            let whose = if zone == 0 {
                "rate_limit"
            } else {
                "its site's rate_limit"
            };
            log::info!("{ip}: 429 over {whose} {rate} (burst {})", limit.burst);
            Some(too_many(wait))
        }
        Err(Refused::Connections) => None,
    }
}

/// Counts `n` more requests of `req`'s client against the rate that applies to it (`site`, as
/// [`check_request`] takes it): what a failed password attempt costs beyond itself, so that
/// guessing meets 429 long before the rate would stop ordinary use. Nothing without a rate.
pub(crate) fn charge(
    table: &ClientTable,
    cfg: &Config,
    site: Option<(u32, &RateLimitConfig)>,
    req: &crate::Request,
    n: u32,
) {
    let (zone, limit) = site.unwrap_or((0, &cfg.rate_limit));
    let Some(rate) = limit.rate else {
        return;
    };
    let ip = req.peer_addr().ip();
    for _ in 0..n {
        if table.request(ip, zone, rate, limit.burst).is_err() {
            return;
        }
    }
}

/// 429 with `Retry-After` in whole seconds, rounded up (RFC 9110 §10.2.3; RFC 6585 §4).
pub(crate) fn too_many(wait: Duration) -> crate::Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    crate::Response::error(429).header("Retry-After", secs.max(1).to_string())
}

/// Appends the counters to the Prometheus text (`/_weft/metrics`).
impl crate::metrics::Exposed for ClientTable {
    fn prometheus(&self, out: &mut String) {
        prometheus(out, self);
    }

    fn refusals(&self) -> (u64, u64) {
        let c = self.counters();
        (c.conn_rejected.load(Relaxed), c.req_rejected.load(Relaxed))
    }
}

fn prometheus(out: &mut String, table: &ClientTable) {
    use std::fmt::Write;
    let c = table.counters();
    for (name, kind, help, v) in [
        (
            "weft_limit_conn_rejected_total",
            "counter",
            "Connections refused with 503 by limits.conn_per_ip (nginx limit_conn).",
            c.conn_rejected.load(Relaxed),
        ),
        (
            "weft_limit_req_rejected_total",
            "counter",
            "Requests answered 429 by [rate_limit] (nginx limit_req).",
            c.req_rejected.load(Relaxed),
        ),
        (
            "weft_limit_untracked_total",
            "counter",
            "Client addresses let through uncounted: their set of the table was all open connections.",
            c.untracked.load(Relaxed),
        ),
        (
            "weft_limit_evicted_total",
            "counter",
            "Table slots taken from an address whose bucket had not drained (limits.client_zone too small for the clients).",
            c.evicted.load(Relaxed),
        ),
        (
            "weft_limit_zone_slots",
            "gauge",
            "Slots of the per-client table (limits.client_zone).",
            table.capacity() as u64,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LISTENER_ZONES;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const MS: u64 = 1_000_000;

    fn rate(s: &str) -> Rate {
        s.parse().unwrap()
    }

    #[test]
    fn rates_parse_as_nginx_writes_them() {
        assert_eq!(rate("100r/s").interval_ns(), 10 * MS);
        assert_eq!(rate("30r/m").interval_ns(), 2_000 * MS);
        assert_eq!(rate(" 1r/s ").to_string(), "1r/s");
        for bad in ["", "100", "100r/h", "r/s", "0r/s", "-1r/s", "1.5r/s"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad:?}");
        }
        let cfg: RateLimitConfig = toml::from_str("rate = \"5r/s\"\nburst = 3").unwrap();
        assert_eq!(cfg.rate, Some(rate("5r/s")));
        assert_eq!(cfg.burst, 3);
        let off: RateLimitConfig = toml::from_str("rate = \"off\"").unwrap();
        assert_eq!(off, RateLimitConfig::default());
        let back: RateLimitConfig = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
    }

    /// A site with a rate of its own counts an address apart from the server's zone and from
    /// every other site's, in the same table; a connection's count is in zone 0 only.
    #[test]
    fn zones_count_one_address_apart() {
        let t = Arc::new(ClientTable::new(64));
        let ip: IpAddr = Ipv4Addr::new(192, 0, 2, 7).into();
        let r = rate("1r/s");
        let now = 5_000 * MS;
        for zone in [0, 1, 2] {
            assert_eq!(
                t.request_with(ip, zone, r, 0, || now),
                Ok(()),
                "zone {zone}"
            );
        }
        for zone in [0, 1, 2] {
            assert!(
                t.request_with(ip, zone, r, 0, || now).is_err(),
                "zone {zone}"
            );
        }
        assert_eq!(t.occupied(), 3);
        let conn = t.acquire_at(ip, 0, 1, now).unwrap();
        assert!(matches!(conn, ConnSlot::Tracked(..)));
        assert_eq!(t.occupied(), 3, "the connection shares zone 0's slot");
        assert_eq!(
            t.acquire_at(ip, 0, 1, now).unwrap_err(),
            Refused::Connections
        );
        // A listener with its own limit counts apart.
        let own = t.acquire_at(ip, LISTENER_ZONES, 1, now).unwrap();
        assert!(matches!(own, ConnSlot::Tracked(..)));
        assert_eq!(
            t.acquire_at(ip, LISTENER_ZONES, 1, now).unwrap_err(),
            Refused::Connections
        );
        drop(conn);
        assert!(
            t.acquire_at(ip, 0, 1, now).is_ok(),
            "zone 0 freed by its own close"
        );
    }

    /// nginx's arithmetic: `burst + 1` at once, then one per interval; a refusal says how long
    /// until the next would pass and costs nothing.
    #[test]
    fn bucket_lets_burst_plus_one_then_the_rate() {
        let t = ClientTable::new(64);
        let ip: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
        let r = rate("10r/s"); // T = 100 ms
        let start = 1_000 * MS;
        for _ in 0..3 {
            assert_eq!(t.request_at(ip, r, 2, start), Ok(()));
        }
        // tat = start + 300 ms; a request passes once tat - now <= 200 ms.
        assert_eq!(
            t.request_at(ip, r, 2, start),
            Err(Refused::Rate(Duration::from_millis(100)))
        );
        assert_eq!(
            t.request_at(ip, r, 2, start + 40 * MS),
            Err(Refused::Rate(Duration::from_millis(60)))
        );
        assert_eq!(t.request_at(ip, r, 2, start + 100 * MS), Ok(()));
        assert!(t.request_at(ip, r, 2, start + 100 * MS).is_err());
        // Quiet for a second: the bucket drained, a whole burst again.
        let later = start + 1_400 * MS;
        for _ in 0..3 {
            assert_eq!(t.request_at(ip, r, 2, later), Ok(()));
        }
        assert!(t.request_at(ip, r, 2, later).is_err());
        // Another address has its own bucket; burst 0 is one at a time.
        let other: IpAddr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into();
        assert_eq!(t.request_at(other, r, 0, later), Ok(()));
        assert_eq!(
            t.request_at(other, r, 0, later + 30 * MS),
            Err(Refused::Rate(Duration::from_millis(70)))
        );
        assert_eq!(t.counters().req_rejected.load(Relaxed), 5);
        assert_eq!(
            too_many(Duration::from_millis(70)).get_header("Retry-After"),
            Some(&b"1"[..])
        );
        assert_eq!(
            too_many(Duration::from_millis(2_001)).get_header("Retry-After"),
            Some(&b"3"[..])
        );
    }

    #[test]
    fn a_request_paused_before_its_turn_is_not_charged_for_the_others() {
        // Another process lets a request through at 5 ms while this one is paused between
        // looking at the bucket and reading the clock; with the clock read before the bucket
        // this one would be judged at 1 us, 5 ms behind the bucket's time: 429.
        let t = ClientTable::new(64);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let r = rate("1000r/s"); // T = 1 ms, burst 2: 2 ms of debt allowed
        let calls = std::cell::Cell::new(0);
        let clock = || {
            calls.set(calls.get() + 1);
            match calls.get() {
                1 => 1_000,
                2 => {
                    assert_eq!(t.request_at(ip, r, 2, 5 * MS), Ok(()));
                    5 * MS + 1
                }
                _ => 5 * MS + 2,
            }
        };
        assert_eq!(t.request_with(ip, 0, r, 2, clock), Ok(()));
        assert!(calls.get() >= 3, "the lost race read the clock again");
        assert_eq!(t.counters().req_rejected.load(Relaxed), 0);
        // The bucket holds both requests: two more fit in the burst at 5 ms, the third not.
        assert_eq!(t.request_at(ip, r, 2, 5 * MS + 2), Ok(()));
        assert!(t.request_at(ip, r, 2, 5 * MS + 2).is_err());
    }

    #[test]
    fn an_ipv4_mapped_address_is_its_ipv4_address() {
        let t = ClientTable::new(64);
        let r = rate("1r/s");
        let v4: IpAddr = Ipv4Addr::new(198, 51, 100, 7).into();
        let mapped: IpAddr = Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped().into();
        assert_eq!(t.request_at(v4, r, 0, MS), Ok(()));
        assert!(t.request_at(mapped, r, 0, MS).is_err());
    }

    #[test]
    fn connections_count_up_to_the_limit_and_down_on_drop() {
        let t = Arc::new(ClientTable::new(64));
        let ip: IpAddr = Ipv4Addr::new(203, 0, 113, 5).into();
        let a = t.acquire(ip, 2).unwrap();
        let b = t.acquire(ip, 2).unwrap();
        assert!(matches!(a, ConnSlot::Tracked(..)));
        assert_eq!(t.acquire(ip, 2).unwrap_err(), Refused::Connections);
        drop(a);
        let c = t.acquire(ip, 2).unwrap();
        assert_eq!(t.acquire(ip, 2).unwrap_err(), Refused::Connections);
        drop((b, c));
        // All closed: the slot holds no connection (and is free to be taken).
        let _d = t.acquire(ip, 1).unwrap();
        assert_eq!(t.acquire(ip, 1).unwrap_err(), Refused::Connections);
        assert_eq!(t.counters().conn_rejected.load(Relaxed), 3);
    }

    /// A million distinct addresses go through a table of 8,192 slots while one address stays
    /// ten times over its rate and another holds its connections: the table never grows, the
    /// hot address gets no more than its rate and burst, and the connection counts survive.
    #[test]
    fn a_million_addresses_neither_grow_the_table_nor_free_the_hot_one() {
        let t = Arc::new(ClientTable::new(8_192));
        let cap = t.capacity();
        assert_eq!(cap, 8_192);
        let hot: IpAddr = Ipv4Addr::new(10, 9, 9, 9).into();
        let holder: IpAddr = Ipv4Addr::new(10, 8, 8, 8).into();
        let held: Vec<ConnSlot> = (0..3).map(|_| t.acquire(holder, 3).unwrap()).collect();
        let r = rate("100r/s"); // T = 10 ms
        let burst = 5;
        let mut now = 1_000 * MS;
        let start = now;
        let mut hot_ok = 0u64;
        let mut hot_sent = 0u64;
        for n in 0..1_000_000u32 {
            // One cold address a microsecond: a million addresses a second.
            now += 1_000;
            let cold = IpAddr::V6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(n)));
            assert_eq!(t.request_at(cold, r, burst, now), Ok(()));
            // The hot address asks every 10 us: 100,000 r/s, a thousand times its rate.
            if n % 10 == 0 {
                hot_sent += 1;
                if t.request_at(hot, r, burst, now).is_ok() {
                    hot_ok += 1;
                }
            }
        }
        assert_eq!(t.capacity(), cap, "the table never grows");
        assert!(t.occupied() <= cap);
        let elapsed_ms = (now - start) / MS;
        // rate × time + burst + 1 at most; and it was served at its rate, not starved.
        let allowed = elapsed_ms / 10 + u64::from(burst) + 1;
        assert!(
            hot_ok <= allowed,
            "hot got {hot_ok} of {hot_sent}, at most {allowed}"
        );
        assert!(
            hot_ok >= elapsed_ms / 10,
            "hot got {hot_ok}, its rate gives {}",
            elapsed_ms / 10
        );
        // The holder's three connections are still counted: a fourth is refused.
        assert_eq!(t.acquire(holder, 3).unwrap_err(), Refused::Connections);
        drop(held);
        assert!(matches!(
            t.acquire(holder, 3).unwrap(),
            ConnSlot::Tracked(..)
        ));
        assert_eq!(t.counters().untracked.load(Relaxed), 0);
    }

    /// Slots with open connections are never taken: addresses that find their whole set held
    /// pass uncounted (and are counted as such), and the holders keep their counts.
    #[test]
    fn a_set_full_of_connections_lets_newcomers_through_uncounted() {
        let t = Arc::new(ClientTable::new(WAYS)); // one set
        let mut held = Vec::new();
        for i in 0..WAYS as u8 {
            held.push(t.acquire(Ipv4Addr::new(10, 0, 0, i).into(), 1).unwrap());
        }
        let newcomer: IpAddr = Ipv4Addr::new(10, 0, 1, 1).into();
        assert!(matches!(
            t.acquire(newcomer, 1).unwrap(),
            ConnSlot::Untracked
        ));
        assert_eq!(t.request_at(newcomer, rate("1r/s"), 0, MS), Ok(()));
        assert_eq!(t.counters().untracked.load(Relaxed), 2);
        for i in 0..WAYS as u8 {
            let ip: IpAddr = Ipv4Addr::new(10, 0, 0, i).into();
            assert_eq!(t.acquire(ip, 1).unwrap_err(), Refused::Connections);
        }
    }

    /// Threads racing on one address never let more than the limit in at once.
    #[test]
    fn racing_connections_respect_the_limit() {
        let t = Arc::new(ClientTable::new(64));
        let ip: IpAddr = Ipv4Addr::new(192, 0, 2, 50).into();
        let peak = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (t, peak, open) = (t.clone(), peak.clone(), open.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Ok(slot) = t.acquire(ip, 3) {
                            let n = open.fetch_add(1, AcqRel) + 1;
                            peak.fetch_max(n, AcqRel);
                            open.fetch_sub(1, AcqRel);
                            drop(slot);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert!(peak.load(Acquire) <= 3);
        // Every count went back: three connections fit again.
        let _all: Vec<_> = (0..3).map(|_| t.acquire(ip, 3).unwrap()).collect();
        assert_eq!(t.acquire(ip, 3).unwrap_err(), Refused::Connections);
    }
}
