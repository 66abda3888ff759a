//! Upstream groups (`[[upstream]]`, nginx's `upstream` block): the servers a mount balances
//! over, which of them are up, and the choice of one per request.
//!
//! - **Choice** ([`Group::pick`]): weighted round robin, least requests in flight per weight,
//!   or a consistent hash of the client's address or a request variable (a ring of 160 points
//!   per unit of weight, so adding a server moves about 1/N of the keys, and a server that is
//!   down sends its keys to the next points only). Backup servers take requests only while no
//!   other server is up; with none up at all, the first try goes to the servers anyway (as
//!   nginx does when every server has failed), so a group never refuses on stale marks alone.
//! - **Passive health** (nginx's `max_fails`/`fail_timeout`): a failure (see
//!   [`Group::failed`]) within `fail_timeout` of the first of a run counts; `max_fails` of them
//!   mark the server down for `fail_timeout`; a success clears the count.
//! - **Active health** (`[upstream.health]`): a thread of the process that built the group
//!   asks every server for `path` each `interval`; `fall` failed checks in a row mark it down,
//!   `rise` passed ones bring it back. It ends when the group is dropped (a reload builds new
//!   groups).
//! - The state of each server lives in shared memory, so the `process` model's connection
//!   processes and its master see one another's marks and counts.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

use weft_sys::shm::{AtomicsOnly, Shared, SharedSlice};

use super::pool::Pool;
use crate::config::{HashKey, HealthCheck, Policy, ServerLine, UpstreamConfig};
use crate::handlers::sock::Addr;
use crate::Request;

/// Points on the hash ring per unit of weight (ketama's 160).
const POINTS_PER_WEIGHT: u32 = 160;

/// One server of a group.
pub(crate) struct Server {
    /// As configured (`10.0.0.1:8000`, `unix:/run/app.sock`): the name in logs and metrics.
    pub(crate) name: String,
    /// Its address as resolved at start ([`Group::addr`] gives the current one).
    addr: Addr,
    /// The host name and port to resolve again (`resolve_every`); `None` for an address
    /// literal or a Unix socket.
    pub(super) host: Option<(String, u16)>,
    weight: u32,
    max_fails: u32,
    fail_timeout: Duration,
    backup: bool,
    /// Its idle keep-alive connections.
    pub(super) pool: Arc<Pool>,
}

/// What every process knows of a server (in shared memory).
#[derive(Debug)]
#[repr(C)]
struct ServerState {
    /// Failures in the current run, and when the run began (coarse ms).
    fails: AtomicU64,
    run_began_ms: AtomicU64,
    /// Down until then (coarse ms), after `max_fails`.
    down_until_ms: AtomicU64,
    /// Marked down by the health checks (1), and the checks' current run (+ passes, - fails
    /// as a count of one kind).
    checked_down: AtomicU64,
    check_streak: AtomicU64,
    /// Requests in flight (`least_conn`).
    active: AtomicU64,
    /// Requests sent, and failures counted.
    requests: AtomicU64,
    failures: AtomicU64,
    /// Tunnels open (upgraded connections relayed to it), and all it took.
    tunnels: AtomicU64,
    tunnels_total: AtomicU64,
    /// Its response times: from the request going out to the response head read.
    response: crate::metrics::PhaseHistogram,
    /// The address resolved last (`resolve_every`), under a sequence lock: `addr_seq` is odd
    /// while it is written, and 0 until a resolution changed the address from the start's.
    addr_seq: AtomicU64,
    addr_hi: AtomicU64,
    addr_lo: AtomicU64,
    /// Port, and 4 or 6 in bits 16 and up.
    addr_meta: AtomicU64,
}

// SAFETY: only AtomicU64 fields; all-zero is every counter at 0 and every mark clear.
unsafe impl AtomicsOnly for ServerState {}

/// What sends a request on to the next server (`retry_on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RetryOn {
    pub(crate) error: bool,
    pub(crate) timeout: bool,
    /// 502, 503, 504.
    pub(crate) statuses: [bool; 3],
}

impl RetryOn {
    fn parse(words: &[String], group: &str) -> Result<RetryOn, String> {
        let mut r = RetryOn::default();
        for w in words {
            match w.as_str() {
                "error" => r.error = true,
                "timeout" => r.timeout = true,
                "http_502" => r.statuses[0] = true,
                "http_503" => r.statuses[1] = true,
                "http_504" => r.statuses[2] = true,
                "off" => {}
                _ => {
                    return Err(format!(
                        "upstream `{group}`: retry_on `{w}`: expected error, timeout, http_502, \
                         http_503, http_504 or off"
                    ))
                }
            }
        }
        Ok(r)
    }

    /// Whether a response with `status` is tried again elsewhere.
    pub(crate) fn status(&self, status: u16) -> bool {
        match status {
            502 => self.statuses[0],
            503 => self.statuses[1],
            504 => self.statuses[2],
            _ => false,
        }
    }
}

/// A group of upstream servers.
pub(crate) struct Group {
    /// The group's name (`upstream:NAME`), or the URL of a mount's single server.
    pub(crate) name: String,
    pub(crate) servers: Vec<Server>,
    policy: Policy,
    /// Sorted (point, server) pairs of the hash policies.
    ring: Vec<(u32, usize)>,
    /// The round-robin turn, shared with the `process` model's connection processes (each
    /// would otherwise start from the master's count and pick the same server).
    cursor: Arc<Shared<AtomicU64>>,
    /// One per server; kept across a reload that keeps the group's servers (as the marks of
    /// the process that built the first generation are what the `process` model's processes
    /// share).
    state: Arc<SharedSlice<ServerState>>,
    /// `[upstream.health]`, and whether its thread runs.
    health: Option<HealthCheck>,
    /// How often host names are resolved again (zero: never).
    resolve_every: Duration,
    /// `tls = true`: the TLS client every server is spoken to with.
    pub(super) tls: Option<super::tls::UpstreamTls>,
    checking: std::sync::atomic::AtomicBool,
    pub(crate) retry: RetryOn,
    /// Servers one request may try (at least 1).
    pub(crate) tries: usize,
    /// How long it may go on trying (zero: no bound).
    pub(crate) try_timeout: Duration,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("name", &self.name)
            .field("servers", &self.servers.len())
            .finish()
    }
}

/// A stable 32-bit hash (FNV-1a, then a 64-bit finaliser): the same in every process and run.
fn hash32(bytes: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 32) as u32
}

fn now_ms() -> u64 {
    weft_sys::clock::coarse_monotonic_ms()
}

impl Group {
    /// The group `cfg` describes; its servers resolved now. A `previous` group of the same
    /// servers hands its state on.
    pub(crate) fn new(
        cfg: &UpstreamConfig,
        previous: Option<&Group>,
    ) -> Result<Arc<Group>, String> {
        if cfg.name.is_empty()
            || !cfg
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(format!(
                "upstream name `{}`: letters, digits, `-`, `_` and `.` only",
                cfg.name
            ));
        }
        if cfg.servers.is_empty() {
            return Err(format!("upstream `{}` lists no servers", cfg.name));
        }
        let mut servers = Vec::new();
        for s in &cfg.servers {
            let line: ServerLine = s.parse()?;
            let addr = Addr::parse(&line.addr, &format!("upstream `{}` server", cfg.name))?;
            let host = host_of(&line.addr);
            servers.push(Server {
                name: line.addr,
                addr,
                host,
                weight: line.weight,
                max_fails: line.max_fails.unwrap_or(cfg.max_fails),
                fail_timeout: line.fail_timeout.unwrap_or(cfg.fail_timeout),
                backup: line.backup,
                pool: Pool::new(cfg.max_idle, cfg.idle_timeout),
            });
        }
        if servers.iter().all(|s| s.backup) {
            return Err(format!("upstream `{}`: every server is a backup", cfg.name));
        }
        if matches!(cfg.policy, Policy::IpHash | Policy::Hash(_))
            && servers.iter().any(|s| s.backup)
        {
            return Err(format!(
                "upstream `{}`: backup servers do not go with a hash policy (as in nginx)",
                cfg.name
            ));
        }
        let mut group = Group::assemble(
            cfg.name.clone(),
            servers,
            cfg.policy.clone(),
            RetryOn::parse(&cfg.retry_on, &cfg.name)?,
            cfg.tries,
            cfg.try_timeout,
        );
        if let Some(hc) = &cfg.health {
            if !hc.path.starts_with('/') || hc.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(format!(
                    "upstream `{}`: health.path `{}` is not a path",
                    cfg.name, hc.path
                ));
            }
            if hc.interval.is_zero() || hc.fall == 0 || hc.rise == 0 {
                return Err(format!(
                    "upstream `{}`: health needs an interval, fall and rise above zero",
                    cfg.name
                ));
            }
            group.health = Some(hc.clone());
        }
        group.resolve_every = cfg.resolve_every;
        if cfg.tls {
            if group
                .servers
                .iter()
                .any(|s| matches!(s.addr, Addr::Unix(_)))
            {
                return Err(format!(
                    "upstream `{}`: tls = true takes HOST:PORT servers only",
                    cfg.name
                ));
            }
            // One name for the group: `tls_name`, else the first server's host (its address
            // for an IP literal).
            let first = &group.servers[0];
            let host = match (&first.host, &first.addr) {
                (Some((h, _)), _) => h.clone(),
                (None, Addr::Tcp(a)) => a.ip().to_string(),
                (None, Addr::Unix(_)) => unreachable!("refused above"),
            };
            let keys = super::tls::TlsKeys::of_group(cfg);
            group.tls = Some(
                super::tls::UpstreamTls::new(keys, &host)
                    .map_err(|e| format!("upstream `{}`: {e}", cfg.name))?,
            );
        }
        // The same servers as the previous generation's group: its marks and counts go on.
        if let Some(p) = previous.filter(|p| {
            p.servers.len() == group.servers.len()
                && p.servers
                    .iter()
                    .zip(&group.servers)
                    .all(|(a, b)| a.name == b.name)
        }) {
            group.state = p.state.clone();
            group.cursor = p.cursor.clone();
        }
        Ok(Arc::new(group))
    }

    /// Starts the health checks, if the group has them and they are not running (in the
    /// process that serves: a thread would keep the `process` model's master from forking).
    pub(crate) fn start_checks(self: &Arc<Self>) {
        if self.checking.swap(true, Relaxed) {
            return;
        }
        if let Some(hc) = &self.health {
            spawn_checks(self, hc.clone());
        }
        if !self.resolve_every.is_zero() && self.servers.iter().any(|s| s.host.is_some()) {
            spawn_resolver(self);
        }
    }

    /// Server `i`'s address now: the last resolution's, else the start's.
    pub(crate) fn addr(&self, i: usize) -> Addr {
        let s = &self.servers[i];
        if s.host.is_some() {
            if let Some(a) = self.resolved(i) {
                return Addr::Tcp(a);
            }
        }
        s.addr.clone()
    }

    /// The address a resolution stored for server `i`, read under its sequence lock.
    fn resolved(&self, i: usize) -> Option<std::net::SocketAddr> {
        let st = self.st(i);
        loop {
            let seq = st.addr_seq.load(std::sync::atomic::Ordering::Acquire);
            if seq == 0 {
                return None;
            }
            if seq % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let (hi, lo, meta) = (
                st.addr_hi.load(std::sync::atomic::Ordering::Acquire),
                st.addr_lo.load(std::sync::atomic::Ordering::Acquire),
                st.addr_meta.load(std::sync::atomic::Ordering::Acquire),
            );
            if st.addr_seq.load(std::sync::atomic::Ordering::Acquire) != seq {
                continue;
            }
            let port = (meta & 0xffff) as u16;
            let ip: std::net::IpAddr = if meta >> 16 == 6 {
                std::net::Ipv6Addr::from((u128::from(hi) << 64) | u128::from(lo)).into()
            } else {
                std::net::Ipv4Addr::from(lo as u32).into()
            };
            return Some(std::net::SocketAddr::new(ip, port));
        }
    }

    /// Stores `a` as server `i`'s address (one writer: the group's resolver thread).
    fn store_resolved(&self, i: usize, a: std::net::SocketAddr) {
        use std::sync::atomic::Ordering::Release;
        let st = self.st(i);
        let seq = st.addr_seq.load(Relaxed);
        st.addr_seq.store(seq | 1, Release);
        std::sync::atomic::fence(Release);
        let (hi, lo, family) = match a.ip() {
            std::net::IpAddr::V4(v4) => (0, u64::from(u32::from(v4)), 4u64),
            std::net::IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                ((bits >> 64) as u64, bits as u64, 6u64)
            }
        };
        st.addr_hi.store(hi, Release);
        st.addr_lo.store(lo, Release);
        st.addr_meta
            .store(u64::from(a.port()) | (family << 16), Release);
        st.addr_seq.store((seq | 1) + 1, Release);
    }

    /// Resolves every named server again with `resolve`: while the address in use is still
    /// among the answers it stays (a name with several records does not flap between them),
    /// else the first answer takes over (logged); a failed resolution keeps the last one
    /// (logged).
    pub(crate) fn refresh(
        &self,
        resolve: &dyn Fn(&str, u16) -> std::io::Result<Vec<std::net::SocketAddr>>,
    ) {
        for (i, s) in self.servers.iter().enumerate() {
            let Some((host, port)) = &s.host else {
                continue;
            };
            let now = self.addr(i);
            match resolve(host, *port) {
                Ok(all) if all.iter().any(|a| Addr::Tcp(*a) == now) => {}
                Ok(all) if !all.is_empty() => {
                    let a = all[0];
                    log::info!(
                        "upstream {} server {}: address now {a} (was {now})",
                        self.name,
                        s.name
                    );
                    self.store_resolved(i, a);
                }
                Ok(_) => log::warn!(
                    "upstream {} server {}: {host} resolved to nothing; still {now}",
                    self.name,
                    s.name
                ),
                Err(e) => log::warn!(
                    "upstream {} server {}: cannot resolve {host} ({e}); still {now}",
                    self.name,
                    s.name
                ),
            }
        }
    }

    /// A group of the one server at `addr` (a mount's `http://HOST:PORT`): retried on errors
    /// as before groups existed (a dead pooled connection), never marked down.
    pub(crate) fn single(
        name: &str,
        addr: Addr,
        host: Option<(String, u16)>,
        resolve_every: Duration,
        max_idle: usize,
        idle: Duration,
    ) -> Arc<Group> {
        let server = Server {
            name: name.to_string(),
            addr,
            host,
            weight: 1,
            max_fails: 0,
            fail_timeout: Duration::ZERO,
            backup: false,
            pool: Pool::new(max_idle, idle),
        };
        let mut g = Group::assemble(
            name.to_string(),
            vec![server],
            Policy::RoundRobin,
            RetryOn::default(),
            1,
            Duration::ZERO,
        );
        g.resolve_every = resolve_every;
        Arc::new(g)
    }

    fn assemble(
        name: String,
        servers: Vec<Server>,
        policy: Policy,
        retry: RetryOn,
        tries: usize,
        try_timeout: Duration,
    ) -> Group {
        let mut ring = Vec::new();
        if matches!(policy, Policy::IpHash | Policy::Hash(_)) {
            for (i, s) in servers.iter().enumerate() {
                for k in 0..s.weight * POINTS_PER_WEIGHT {
                    ring.push((hash32(format!("{}#{k}", s.name).as_bytes()), i));
                }
            }
            ring.sort_unstable();
        }
        let n = servers.len();
        Group {
            name,
            state: Arc::new(SharedSlice::new(n)),
            servers,
            policy,
            ring,
            cursor: Arc::new(Shared::new()),
            health: None,
            resolve_every: Duration::ZERO,
            tls: None,
            checking: std::sync::atomic::AtomicBool::new(false),
            retry,
            tries: if tries == 0 { n } else { tries.min(n) }.max(1),
            try_timeout,
        }
    }

    fn st(&self, i: usize) -> &ServerState {
        &self.state[i]
    }

    /// Whether server `i` takes requests now.
    pub(crate) fn is_up(&self, i: usize) -> bool {
        let st = self.st(i);
        st.checked_down.load(Relaxed) == 0 && st.down_until_ms.load(Relaxed) <= now_ms()
    }

    /// The server for `req`'s next try, not one of `tried`; `None` when none is left.
    pub(crate) fn pick(&self, req: &Request, tried: &[usize]) -> Option<usize> {
        let fresh = |i: &usize| !tried.contains(i);
        let up: Vec<usize> = (0..self.servers.len())
            .filter(fresh)
            .filter(|&i| self.is_up(i))
            .collect();
        let primary: Vec<usize> = up
            .iter()
            .copied()
            .filter(|&i| !self.servers[i].backup)
            .collect();
        let mut candidates = if primary.is_empty() { up } else { primary };
        if candidates.is_empty() && tried.is_empty() {
            // Every server is marked down: try them anyway rather than refuse.
            candidates = (0..self.servers.len())
                .filter(|&i| !self.servers[i].backup)
                .collect();
        }
        if candidates.is_empty() {
            return None;
        }
        Some(match &self.policy {
            Policy::RoundRobin => self.weighted_turn(&candidates),
            Policy::LeastConn => self.least_conn(&candidates),
            Policy::IpHash => {
                self.on_ring(req.peer_addr().ip().to_string().as_bytes(), &candidates)
            }
            Policy::Hash(key) => {
                let k = hash_key(key, req);
                self.on_ring(&k, &candidates)
            }
        })
    }

    fn weighted_turn(&self, candidates: &[usize]) -> usize {
        let total: u64 = candidates
            .iter()
            .map(|&i| u64::from(self.servers[i].weight))
            .sum();
        let mut k = self.cursor.fetch_add(1, Relaxed) % total.max(1);
        for &i in candidates {
            let w = u64::from(self.servers[i].weight);
            if k < w {
                return i;
            }
            k -= w;
        }
        candidates[0]
    }

    fn least_conn(&self, candidates: &[usize]) -> usize {
        // Fewest in flight per weight: a/wa < b/wb as a*wb < b*wa; ties go round in turn.
        let start = self.cursor.fetch_add(1, Relaxed) as usize;
        let n = candidates.len();
        let mut best = candidates[start % n];
        for j in 1..n {
            let i = candidates[(start + j) % n];
            let (a, wa) = (
                self.st(i).active.load(Relaxed),
                u64::from(self.servers[i].weight),
            );
            let (b, wb) = (
                self.st(best).active.load(Relaxed),
                u64::from(self.servers[best].weight),
            );
            if a * wb < b * wa {
                best = i;
            }
        }
        best
    }

    /// The first server clockwise from `key`'s point that is a candidate.
    fn on_ring(&self, key: &[u8], candidates: &[usize]) -> usize {
        let h = hash32(key);
        let start = self.ring.partition_point(|&(p, _)| p < h);
        let n = self.ring.len();
        (0..n)
            .map(|j| self.ring[(start + j) % n].1)
            .find(|i| candidates.contains(i))
            .unwrap_or(candidates[0])
    }

    /// A request to server `i` begins (`least_conn`, metrics); the guard ends it.
    pub(crate) fn begin(self: &Arc<Self>, i: usize) -> InFlight {
        let st = self.st(i);
        st.active.fetch_add(1, Relaxed);
        st.requests.fetch_add(1, Relaxed);
        InFlight {
            group: self.clone(),
            server: i,
        }
    }

    /// Server `i` failed a request (refused, reset, timed out, or an answer `retry_on`
    /// names): counted, and past `max_fails` in `fail_timeout` marked down for `fail_timeout`.
    pub(crate) fn failed(&self, i: usize, why: &dyn std::fmt::Display) {
        let s = &self.servers[i];
        let st = self.st(i);
        st.failures.fetch_add(1, Relaxed);
        if s.max_fails == 0 {
            return;
        }
        let now = now_ms();
        let window = u64::try_from(s.fail_timeout.as_millis()).unwrap_or(u64::MAX);
        let began = st.run_began_ms.load(Relaxed);
        let fails = if now.saturating_sub(began) > window || st.fails.load(Relaxed) == 0 {
            st.run_began_ms.store(now, Relaxed);
            st.fails.store(1, Relaxed);
            1
        } else {
            st.fails.fetch_add(1, Relaxed) + 1
        };
        if fails >= u64::from(s.max_fails) {
            st.fails.store(0, Relaxed);
            st.down_until_ms.store(now.saturating_add(window), Relaxed);
            log::warn!(
                "upstream {} server {}: {fails} failure(s) within {:?} ({why}); not used for {:?}",
                self.name,
                s.name,
                s.fail_timeout,
                s.fail_timeout
            );
        }
    }

    /// Server `i` answered a try with a response head `took` after the request went out.
    pub(crate) fn responded(&self, i: usize, took: Duration) {
        self.st(i).response.record(took);
    }

    /// Server `i` answered: its run of failures ends.
    pub(crate) fn succeeded(&self, i: usize) {
        let st = self.st(i);
        if st.fails.load(Relaxed) != 0 {
            st.fails.store(0, Relaxed);
        }
    }

    /// Per server: its state and counts, for the metrics and status.
    pub(crate) fn report(&self) -> Vec<Report<'_>> {
        (0..self.servers.len())
            .map(|i| {
                let st = self.st(i);
                Report {
                    server: self.servers[i].name.as_str(),
                    up: self.is_up(i),
                    requests: st.requests.load(Relaxed),
                    failures: st.failures.load(Relaxed),
                    active: st.active.load(Relaxed),
                    tunnels: st.tunnels.load(Relaxed),
                    tunnels_total: st.tunnels_total.load(Relaxed),
                    response: st.response.stats(crate::metrics::Phase::Head),
                }
            })
            .collect()
    }

    /// A tunnel to server `i` opens; it counts as open until the guard drops.
    pub(crate) fn tunnel(self: &Arc<Self>, i: usize) -> TunnelOpen {
        let st = self.st(i);
        st.tunnels.fetch_add(1, Relaxed);
        st.tunnels_total.fetch_add(1, Relaxed);
        TunnelOpen {
            group: self.clone(),
            server: i,
        }
    }

    /// Records one active check of server `i`; returns a change of its state to log.
    fn checked(&self, i: usize, passed: bool, hc: &HealthCheck) -> Option<bool> {
        let st = self.st(i);
        let down = st.checked_down.load(Relaxed) != 0;
        // The streak counts checks that disagree with the current state.
        if passed != down {
            st.check_streak.store(0, Relaxed);
            return None;
        }
        let streak = st.check_streak.fetch_add(1, Relaxed) + 1;
        let flip = if down {
            streak >= u64::from(hc.rise)
        } else {
            streak >= u64::from(hc.fall)
        };
        if !flip {
            return None;
        }
        st.check_streak.store(0, Relaxed);
        st.checked_down.store(u64::from(!down), Relaxed);
        if passed {
            // Back: what passive marks it had are stale.
            st.down_until_ms.store(0, Relaxed);
            st.fails.store(0, Relaxed);
        }
        Some(passed)
    }
}

/// The `[[upstream]]` groups of one configuration, by name.
#[derive(Debug, Default, Clone)]
pub(crate) struct Groups(
    std::collections::HashMap<String, Arc<Group>>,
    /// The one-server groups of mounts with a URL, whose names are resolved again too.
    Arc<std::sync::Mutex<Vec<Arc<Group>>>>,
    /// The server's shutdown, which ends the proxy's tunnels after the drain's idle window.
    Arc<crate::shutdown::Shutdown>,
);

impl Groups {
    /// Builds every group; a bad or repeated one refuses them all. A group of `previous` (the
    /// running generation's) with the same name and servers hands its state on.
    pub(crate) fn new(
        cfgs: &[UpstreamConfig],
        previous: Option<&Groups>,
        shutdown: Arc<crate::shutdown::Shutdown>,
    ) -> std::io::Result<Groups> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let mut map = std::collections::HashMap::new();
        for cfg in cfgs {
            let prev = previous.and_then(|p| p.get(&cfg.name)).map(|g| &**g);
            let g = Group::new(cfg, prev).map_err(invalid)?;
            if map.insert(cfg.name.clone(), g).is_some() {
                return Err(invalid(format!(
                    "two [[upstream]]s are named `{}`",
                    cfg.name
                )));
            }
        }
        Ok(Groups(map, Arc::default(), shutdown))
    }

    /// Takes in a mount's one-server group, so [`Groups::start_checks`] starts its resolver.
    pub(crate) fn adopt(&self, g: Arc<Group>) {
        self.1.lock().unwrap_or_else(|e| e.into_inner()).push(g);
    }

    /// The server's shutdown state.
    pub(crate) fn shutdown(&self) -> &Arc<crate::shutdown::Shutdown> {
        &self.2
    }

    /// The group named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Group>> {
        self.0.get(name)
    }

    /// Starts every group's health checks not yet running (see [`Group::start_checks`]).
    pub(crate) fn start_checks(&self) {
        for g in self.0.values() {
            g.start_checks();
        }
        for g in self.1.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            g.start_checks();
        }
    }

    /// Every group, by name.
    pub(crate) fn sorted(&self) -> Vec<Arc<Group>> {
        let mut v: Vec<Arc<Group>> = self.0.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        // Then the mounts' own, named by their URLs, in the order of the configuration.
        v.extend(
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        v
    }
}

/// `weft_upstream_up`, `weft_upstream_requests_total`, `weft_upstream_failures_total` and
/// `weft_upstream_in_flight` per group and server; and the same in the status JSON.
impl crate::metrics::Exposed for Groups {
    fn prometheus(&self, out: &mut String) {
        use std::fmt::Write;
        let groups = self.sorted();
        if groups.is_empty() {
            return;
        }
        let families: [(&str, &str, &str); 6] = [
            (
                "weft_upstream_up",
                "gauge",
                "1 while the server takes requests (not marked down by failures or health checks).",
            ),
            (
                "weft_upstream_requests_total",
                "counter",
                "Requests sent to the server (each try).",
            ),
            (
                "weft_upstream_failures_total",
                "counter",
                "Tries that failed: refused, reset, timed out, or an answer retry_on names.",
            ),
            (
                "weft_upstream_in_flight",
                "gauge",
                "Requests whose response is being read from the server.",
            ),
            (
                "weft_upstream_tunnels",
                "gauge",
                "Tunnels open to the server (WebSockets and other upgrades answered 101).",
            ),
            (
                "weft_upstream_tunnels_total",
                "counter",
                "Tunnels the server took.",
            ),
        ];
        for (k, (name, kind, help)) in families.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for g in &groups {
                for r in g.report() {
                    let v = [
                        u64::from(r.up),
                        r.requests,
                        r.failures,
                        r.active,
                        r.tunnels,
                        r.tunnels_total,
                    ][k];
                    let _ = writeln!(
                        out,
                        "{name}{{upstream=\"{}\",server=\"{}\"}} {v}",
                        label(&g.name),
                        label(r.server)
                    );
                }
            }
        }
        let name = "weft_upstream_response_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a request sent to the server to its response head.\n\
             # TYPE {name} histogram"
        );
        for g in &groups {
            for r in g.report() {
                let labels = format!(
                    "upstream=\"{}\",server=\"{}\"",
                    label(&g.name),
                    label(r.server)
                );
                let mut cumulative = 0;
                for (i, n) in r.response.buckets.iter().enumerate() {
                    cumulative += n;
                    let le = match crate::metrics::bucket_upper_us(i) {
                        Some(us) => format!("{}", us as f64 / 1e6),
                        None => "+Inf".into(),
                    };
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
                }
                let sum = r.response.mean_us * r.response.count as f64 / 1e6;
                let _ = writeln!(
                    out,
                    "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {}",
                    r.response.count
                );
            }
        }
    }

    fn json(&self) -> serde_json::Value {
        let groups = self.sorted();
        if groups.is_empty() {
            return serde_json::Value::Null;
        }
        groups
            .iter()
            .map(|g| {
                let servers: Vec<serde_json::Value> = g
                    .report()
                    .into_iter()
                    .map(|r| {
                        serde_json::json!({
                            "server": r.server,
                            "up": r.up,
                            "requests": r.requests,
                            "failures": r.failures,
                            "in_flight": r.active,
                            "tunnels": r.tunnels,
                            "tunnels_total": r.tunnels_total,
                            // Upper bounds of the buckets holding them: within 2x below.
                            "response_ms": {
                                "count": r.response.count,
                                "p50": r.response.quantile_us(0.5).map(|us| us as f64 / 1e3),
                                "p99": r.response.quantile_us(0.99).map(|us| us as f64 / 1e3),
                            },
                        })
                    })
                    .collect();
                serde_json::json!({ "name": g.name, "servers": servers })
            })
            .collect::<Vec<_>>()
            .into()
    }
}

/// A Prometheus label value: `\`, `"` and line ends escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A request in flight to a server; its end is counted when this drops.
pub(crate) struct InFlight {
    group: Arc<Group>,
    server: usize,
}

/// One server's figures for metrics and the status page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report<'a> {
    pub(crate) server: &'a str,
    pub(crate) up: bool,
    pub(crate) requests: u64,
    pub(crate) failures: u64,
    pub(crate) active: u64,
    pub(crate) tunnels: u64,
    pub(crate) tunnels_total: u64,
    /// Response times (its `phase` field means nothing here).
    pub(crate) response: crate::metrics::PhaseStats,
}

/// A tunnel open to a server ([`Group::tunnel`]).
pub(crate) struct TunnelOpen {
    group: Arc<Group>,
    server: usize,
}

impl Drop for TunnelOpen {
    fn drop(&mut self) {
        self.group.st(self.server).tunnels.fetch_sub(1, Relaxed);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.group.st(self.server).active.fetch_sub(1, Relaxed);
    }
}

/// The bytes `hash $VAR` hashes for `req` (empty when the variable is).
fn hash_key(key: &HashKey, req: &Request) -> Vec<u8> {
    match key {
        HashKey::Uri => req.path().as_bytes().to_vec(),
        HashKey::RequestUri => req.target().as_bytes().to_vec(),
        HashKey::RemoteAddr => req.peer_addr().ip().to_string().into_bytes(),
        HashKey::Args => req.query().unwrap_or("").as_bytes().to_vec(),
        HashKey::Header(h) => req.header(h).unwrap_or_default().to_vec(),
    }
}

/// The host name and port of `HOST:PORT` to resolve again, `None` for an IP literal or a
/// Unix socket.
pub(crate) fn host_of(addr: &str) -> Option<(String, u16)> {
    if addr.starts_with("unix:") || addr.parse::<std::net::SocketAddr>().is_ok() {
        return None;
    }
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some((host.to_string(), port.parse().ok()?))
}

/// The system resolver's addresses for `host:port` (blocking: the resolver thread's).
fn resolve_system(host: &str, port: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
    use std::net::ToSocketAddrs;
    Ok((host, port).to_socket_addrs()?.collect())
}

/// Starts the re-resolution of `group`'s names: one thread, ending when the group is dropped.
fn spawn_resolver(group: &Arc<Group>) {
    let weak: Weak<Group> = Arc::downgrade(group);
    let every = group.resolve_every;
    let name = format!("weft-resolve-{}", group.name);
    let started = std::thread::Builder::new().name(name).spawn(move || loop {
        std::thread::sleep(every);
        let Some(g) = weak.upgrade() else {
            return;
        };
        g.refresh(&resolve_system);
    });
    if let Err(e) = started {
        log::error!("upstream {}: no resolver thread: {e}", group.name);
    }
}

/// Starts the health checks of `group`: one thread, ending when the group is dropped.
fn spawn_checks(group: &Arc<Group>, hc: HealthCheck) {
    let weak: Weak<Group> = Arc::downgrade(group);
    let name = format!("weft-health-{}", group.name);
    let started = std::thread::Builder::new().name(name).spawn(move || loop {
        std::thread::sleep(hc.interval);
        let Some(g) = weak.upgrade() else {
            return;
        };
        for (i, s) in g.servers.iter().enumerate() {
            let outcome = check(&g.addr(i), &g.name, &hc, g.tls.as_ref());
            if let Some(up) = g.checked(i, outcome.is_ok(), &hc) {
                match (&outcome, up) {
                    (_, true) => log::warn!(
                        "upstream {} server {}: health checks pass again; in use",
                        g.name,
                        s.name
                    ),
                    (Err(why), false) => log::warn!(
                        "upstream {} server {}: {} health checks failed ({why}); not used",
                        g.name,
                        s.name,
                        hc.fall
                    ),
                    (Ok(()), false) => {}
                }
            }
        }
    });
    if let Err(e) = started {
        log::error!("upstream {}: no health-check thread: {e}", group.name);
    }
}

/// One check: `GET path` with `Connection: close`; a 2xx or 3xx status passes.
fn check(
    addr: &Addr,
    host: &str,
    hc: &HealthCheck,
    tls: Option<&super::tls::UpstreamTls>,
) -> Result<(), String> {
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: weft-health-check\r\nConnection: close\r\n\r\n",
        hc.path
    );
    let mut buf = [0u8; 64];
    let ask = |mut s: Box<dyn ReadWrite>, buf: &mut [u8; 64]| {
        s.write_all(req.as_bytes())
            .map_err(|e| format!("writing: {e}"))?;
        read_status_line(&mut s, buf)
    };
    let connecting = |e: std::io::Error| format!("connecting: {e}");
    let n = match addr {
        Addr::Tcp(a) => {
            let s = std::net::TcpStream::connect_timeout(a, hc.timeout).map_err(connecting)?;
            s.set_read_timeout(Some(hc.timeout))
                .and_then(|()| s.set_write_timeout(Some(hc.timeout)))
                .map_err(|e| e.to_string())?;
            match tls {
                // Over TLS as the requests go (checked as they are).
                Some(t) => {
                    let conn = rustls::ClientConnection::new(t.config.clone(), t.name.clone())
                        .map_err(|e| format!("TLS: {e}"))?;
                    ask(Box::new(rustls::StreamOwned::new(conn, s)), &mut buf)?
                }
                None => ask(Box::new(s), &mut buf)?,
            }
        }
        Addr::Unix(p) => {
            let s = std::os::unix::net::UnixStream::connect(p).map_err(connecting)?;
            s.set_read_timeout(Some(hc.timeout))
                .and_then(|()| s.set_write_timeout(Some(hc.timeout)))
                .map_err(|e| e.to_string())?;
            ask(Box::new(s), &mut buf)?
        }
    };
    let status = std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|l| l.strip_prefix("HTTP/1."))
        .and_then(|l| l.get(2..5))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("not an HTTP response")?;
    if (200..400).contains(&status) {
        Ok(())
    } else {
        Err(format!("status {status}"))
    }
}

/// A health check's connection, TCP or Unix.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Reads at least a status line's first 12 bytes (`HTTP/1.1 200`).
fn read_status_line(s: &mut impl Read, buf: &mut [u8; 64]) -> Result<usize, String> {
    let mut n = 0;
    while n < 12 {
        match s.read(&mut buf[n..]) {
            Ok(0) => return Err("closed before a status line".into()),
            Ok(k) => n += k,
            Err(e) => return Err(format!("reading: {e}")),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(policy: &str, servers: &[&str]) -> Arc<Group> {
        let cfg = UpstreamConfig {
            name: "app".into(),
            servers: servers.iter().map(|s| s.to_string()).collect(),
            policy: policy.parse().unwrap(),
            ..UpstreamConfig::default()
        };
        Group::new(&cfg, None).unwrap()
    }

    fn request(target: &str, peer: &str) -> Request {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: t\r\nX-User: {target}\r\n\r\n");
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        p.parse(raw.as_bytes()).unwrap().expect("a head");
        let peer = peer.parse().unwrap();
        Request::new(raw.into_bytes(), p.take_head(), peer, peer)
    }

    #[test]
    fn round_robin_follows_the_weights_and_skips_a_server_marked_down() {
        let g = group(
            "round_robin",
            &["127.0.0.1:1 weight=2", "127.0.0.1:2", "127.0.0.1:3 backup"],
        );
        let req = request("/", "10.0.0.1:5");
        let picks: Vec<usize> = (0..6).map(|_| g.pick(&req, &[]).unwrap()).collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 4, "{picks:?}");
        assert_eq!(picks.iter().filter(|&&i| i == 1).count(), 2, "{picks:?}");
        // max_fails = 1: one failure marks the first down; the second takes everything.
        g.failed(0, &"refused");
        assert!(!g.is_up(0));
        assert!((0..4).all(|_| g.pick(&req, &[]) == Some(1)));
        // Tried already: the backup is next, and then nothing.
        assert_eq!(g.pick(&req, &[1]), Some(2));
        assert_eq!(g.pick(&req, &[1, 2]), None);
        // Both primaries down: the backup takes them.
        g.failed(1, &"refused");
        assert_eq!(g.pick(&req, &[]), Some(2));
        let rows = g.report();
        assert_eq!((rows[0].up, rows[1].up, rows[2].up), (false, false, true));
        assert_eq!(rows[0].failures, 1);
    }

    #[test]
    fn every_server_down_is_tried_anyway_once() {
        let g = group("round_robin", &["127.0.0.1:1", "127.0.0.1:2"]);
        let req = request("/", "10.0.0.1:5");
        g.failed(0, &"x");
        g.failed(1, &"x");
        assert!(g.pick(&req, &[]).is_some());
        assert_eq!(g.pick(&req, &[0, 1]), None);
    }

    #[test]
    fn least_conn_takes_the_least_busy_per_weight() {
        let g = group("least_conn", &["127.0.0.1:1", "127.0.0.1:2 weight=2"]);
        let req = request("/", "10.0.0.1:5");
        let a = g.begin(0);
        let b = g.begin(1);
        // One each: the second, of weight 2, has room for twice as many.
        assert_eq!(g.pick(&req, &[]), Some(1));
        let c = g.begin(1);
        let d = g.begin(1);
        assert_eq!(g.pick(&req, &[]), Some(0));
        drop((a, b, c, d));
        assert_eq!(g.report().iter().map(|r| r.active).sum::<u64>(), 0);
    }

    #[test]
    fn a_consistent_hash_moves_few_keys_when_a_server_is_added() {
        let three = group(
            "hash $http_x_user",
            &["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"],
        );
        let four = group(
            "hash $http_x_user",
            &["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"],
        );
        let keys: Vec<Request> = (0..10_000)
            .map(|k| request(&format!("/u{k}"), "10.9.9.9:1"))
            .collect();
        let mut moved = 0;
        let mut per = [0usize; 4];
        for r in &keys {
            let a = three.pick(r, &[]).unwrap();
            let b = four.pick(r, &[]).unwrap();
            per[b] += 1;
            if a != b {
                moved += 1;
                assert_eq!(b, 3, "a key moved between two old servers");
            }
        }
        // Ideal: 1/4 of the keys; the bound: 1.5/N.
        eprintln!("3 -> 4 servers: {moved} of 10,000 keys moved; per server {per:?}");
        assert!(moved <= 10_000 * 3 / 8, "{moved} keys moved");
        assert!(per.iter().all(|&n| n > 1_500), "{per:?}");
        // The same key, the same server, every time; a server down sends its keys on.
        let r = &keys[7];
        let home = four.pick(r, &[]).unwrap();
        assert!((0..5).all(|_| four.pick(r, &[]) == Some(home)));
        four.failed(home, &"x");
        let next = four.pick(r, &[]).unwrap();
        assert_ne!(next, home);
        let others_stay = keys
            .iter()
            .filter(|k| three.pick(k, &[]) != Some(home) && home < 3)
            .take(100)
            .all(|k| four.pick(k, &[]) != Some(home));
        assert!(others_stay);
    }

    #[test]
    fn names_are_resolved_again_and_a_change_is_followed() {
        let g = group("round_robin", &["localhost:8000", "127.0.0.1:9000"]);
        assert_eq!(host_of("localhost:8000"), Some(("localhost".into(), 8000)));
        assert_eq!(host_of("127.0.0.1:9000"), None);
        assert_eq!(host_of("[::1]:80"), None);
        assert_eq!(host_of("unix:/run/a.sock"), None);
        let start = g.addr(0);
        // The name moves: the next connection goes to its new address.
        let moved: std::net::SocketAddr = "10.1.2.3:8000".parse().unwrap();
        g.refresh(&|h, p| {
            assert_eq!((h, p), ("localhost", 8000));
            Ok(vec![moved])
        });
        assert_eq!(g.addr(0), Addr::Tcp(moved));
        // Still among several answers: kept, whatever their order.
        let other: std::net::SocketAddr = "10.9.9.9:8000".parse().unwrap();
        g.refresh(&|_, _| Ok(vec![other, moved]));
        assert_eq!(g.addr(0), Addr::Tcp(moved));
        let v6: std::net::SocketAddr = "[2001:db8::7]:8000".parse().unwrap();
        g.refresh(&|_, _| Ok(vec![v6]));
        assert_eq!(g.addr(0), Addr::Tcp(v6));
        g.refresh(&|_, _| Ok(vec![]));
        assert_eq!(g.addr(0), Addr::Tcp(v6));
        // A failure keeps the last address; a literal is never asked about.
        g.refresh(&|_, _| Err(std::io::ErrorKind::NotFound.into()));
        assert_eq!(g.addr(0), Addr::Tcp(v6));
        assert_eq!(g.addr(1), Addr::Tcp("127.0.0.1:9000".parse().unwrap()));
        assert_ne!(start, g.addr(0));
    }

    #[test]
    fn health_checks_flip_after_fall_and_rise() {
        let g = group("round_robin", &["127.0.0.1:1", "127.0.0.1:2"]);
        let hc = HealthCheck {
            fall: 3,
            rise: 2,
            ..HealthCheck::default()
        };
        assert_eq!(g.checked(0, false, &hc), None);
        assert_eq!(g.checked(0, false, &hc), None);
        assert_eq!(g.checked(0, true, &hc), None, "a pass breaks the run");
        assert_eq!(g.checked(0, false, &hc), None);
        assert_eq!(g.checked(0, false, &hc), None);
        assert_eq!(g.checked(0, false, &hc), Some(false));
        assert!(!g.is_up(0));
        assert_eq!(g.checked(0, true, &hc), None);
        assert_eq!(g.checked(0, true, &hc), Some(true));
        assert!(g.is_up(0));
    }

    #[test]
    fn configurations_refused_with_the_reason() {
        let bad = |cfg: UpstreamConfig| Group::new(&cfg, None).unwrap_err();
        let base = UpstreamConfig {
            name: "app".into(),
            servers: vec!["127.0.0.1:1".into()],
            ..UpstreamConfig::default()
        };
        assert!(bad(UpstreamConfig {
            name: "a b".into(),
            ..base.clone()
        })
        .contains("letters"));
        assert!(bad(UpstreamConfig {
            servers: vec![],
            ..base.clone()
        })
        .contains("no servers"));
        assert!(bad(UpstreamConfig {
            servers: vec!["127.0.0.1:1 backup".into()],
            ..base.clone()
        })
        .contains("backup"));
        assert!(bad(UpstreamConfig {
            retry_on: vec!["sometimes".into()],
            ..base.clone()
        })
        .contains("retry_on"));
        assert!(bad(UpstreamConfig {
            policy: "ip_hash".parse().unwrap(),
            servers: vec!["127.0.0.1:1".into(), "127.0.0.1:2 backup".into()],
            ..base
        })
        .contains("hash"));
    }
}
