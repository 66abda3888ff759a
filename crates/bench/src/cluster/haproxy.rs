//! HAProxy: the timeline's configuration (HTTP mode, health checks, retries, PROXY protocol
//! v2, a log line per request), the scaling runs' (TCP mode, no log), and the process, started
//! on the layout's cores and stopped on drop, its log lines time-stamped as they are read.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::pin::{pin_child, Layout};
use super::{
    CHECK_INTER, FALL, FRONT_ALL, FRONT_ONE, HEALTH, RISE, SCALE_ALL, SCALE_ONE, WEFT_PORT,
};

/// HAProxy, stopped on drop; its log lines come back time-stamped from the reader thread.
pub(crate) struct Haproxy {
    child: Child,
    reader: Option<std::thread::JoinHandle<Vec<(Instant, String)>>>,
}

impl Haproxy {
    /// The timeline's HAProxy on configuration file `cfg`, its stderr to `err`: a thread
    /// reads its log (stdout), stamping each line with the time it was read.
    pub(crate) fn start_logged(
        bin: &Path,
        cfg: &Path,
        err: &Path,
        layout: &Layout,
    ) -> io::Result<Haproxy> {
        let mut child = haproxy_command(bin, cfg, err, layout)?
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            for line in BufReader::new(out).lines() {
                match line {
                    Ok(l) => v.push((Instant::now(), l)),
                    Err(_) => break,
                }
            }
            v
        });
        Ok(Haproxy {
            child,
            reader: Some(reader),
        })
    }

    /// A scaling run's HAProxy on configuration file `cfg` (which logs nothing), its stderr
    /// to `err`.
    pub(crate) fn start_quiet(
        bin: &Path,
        cfg: &Path,
        err: &Path,
        layout: &Layout,
    ) -> io::Result<Haproxy> {
        let child = haproxy_command(bin, cfg, err, layout)?
            .stdout(Stdio::null())
            .spawn()?;
        Ok(Haproxy {
            child,
            reader: None,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops it; the log lines the reader read (none for a quiet one).
    pub(crate) fn stop(&mut self) -> Vec<(Instant, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy in the foreground on configuration `cfg`, its stderr to `err`, in a process group
/// of its own, on the layout's HAProxy cores.
fn haproxy_command(bin: &Path, cfg: &Path, err: &Path, layout: &Layout) -> io::Result<Command> {
    let mut cmd = Command::new(bin);
    cmd.arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdin(Stdio::null())
        .stderr(fs::File::create(err)?)
        .process_group(0);
    pin_child(&mut cmd, layout.haproxy.clone());
    Ok(cmd)
}

/// HAProxy's configuration for the timeline: `threads` threads (`nbthread`), the backend of
/// every instance and of the first only, each behind its frontend.
pub(crate) fn haproxy_config(front: Ipv4Addr, servers: &[Ipv4Addr], threads: usize) -> String {
    let inter = CHECK_INTER.as_millis();
    let mut s = format!(
        "global
    log stdout format raw local0
    nbthread {threads}
    maxconn 4000

defaults
    mode http
    log global
    # %s: the server that answered (after retries); the reader stamps each line with its time.
    log-format \"%b/%s %ST %Ta %tsc %rc\"
    timeout connect 1s
    timeout client 30s
    timeout server 10s
    timeout http-keep-alive 30s
    # A request that met a refused or closed connection (a drained or killed instance) goes
    # to another server: up to 3 retries, the last ones redispatched.
    retries 3
    option redispatch 1
    retry-on all-retryable-errors

backend weft
    balance roundrobin
    # Only idempotent requests are retried (RFC 9110 section 9.2.2).
    http-request disable-l7-retry if !METH_GET !METH_HEAD
    option httpchk GET {HEALTH}
    http-check expect status 200
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
"
    );
    server_lines(&mut s, servers);
    let _ = write!(
        s,
        "
backend one
    option httpchk GET {HEALTH}
    http-check expect status 200
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
    server w1 {}:{WEFT_PORT}
",
        servers[0]
    );
    frontends(&mut s, front, (FRONT_ALL, "weft"), FRONT_ONE);
    s
}

/// The configuration of the HAProxy each closed-loop scaling run starts afresh: the
/// timeline's health checks and PROXY protocol v2, but balancing connections (`mode tcp`,
/// round robin per client connection), as a Kubernetes Service or an L4 balancer does, with no
/// log line per request. Why not the timeline's HTTP mode: a connection that began with a
/// PROXY header belongs to its client's session, so HAProxy 2.6 balancing each request round
/// robin opened a server connection for almost every request, and once client sessions had
/// closed even a one-server backend did so until HAProxy restarted (seen with nginx behind it
/// as well); and parsing each request costs HAProxy about three times a weft instance's CPU,
/// so on 16 cores HAProxy, not the instances, was the limit. In TCP mode each client
/// connection has one server connection for its life.
pub(crate) fn scale_haproxy_config(
    front: Ipv4Addr,
    servers: &[Ipv4Addr],
    threads: usize,
) -> String {
    let inter = CHECK_INTER.as_millis();
    let mut s = format!(
        "global
    nbthread {threads}
    maxconn 4000

defaults
    mode tcp
    no log
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
    option httpchk GET {HEALTH}

backend all
    balance roundrobin
"
    );
    server_lines(&mut s, servers);
    let _ = write!(
        s,
        "
backend one
    server w1 {}:{WEFT_PORT}
",
        servers[0]
    );
    frontends(&mut s, front, (SCALE_ALL, "all"), SCALE_ONE);
    s
}

/// A `server` line for each instance (`w1` for the first), at weft's port.
fn server_lines(s: &mut String, servers: &[Ipv4Addr]) {
    for (i, a) in servers.iter().enumerate() {
        let _ = writeln!(s, "    server w{} {a}:{WEFT_PORT}", i + 1);
    }
}

/// Frontend `all` on port `all` of `front` to backend `to_all`, and frontend `one` on port
/// `one` to backend `one`.
fn frontends(s: &mut String, front: Ipv4Addr, (all, to_all): (u16, &str), one: u16) {
    let _ = write!(
        s,
        "
frontend all
    bind {front}:{all}
    default_backend {to_all}

frontend one
    bind {front}:{one}
    default_backend one
"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_checks_health_retries_and_sends_proxy_v2() {
        let c = haproxy_config(
            Ipv4Addr::new(10, 214, 9, 1),
            &[Ipv4Addr::new(10, 214, 9, 11), Ipv4Addr::new(10, 214, 9, 12)],
            6,
        );
        assert!(c.contains("nbthread 6"), "{c}");
        assert!(!c.contains("no log"), "{c}");
        // The scaling runs' HAProxy: the same checks and PROXY v2, no log, a client
        // connection kept on one server.
        let sc = scale_haproxy_config(
            Ipv4Addr::new(10, 214, 9, 1),
            &[Ipv4Addr::new(10, 214, 9, 11), Ipv4Addr::new(10, 214, 9, 12)],
            8,
        );
        for want in [
            "nbthread 8",
            "no log",
            "option httpchk GET /healthz",
            "send-proxy-v2 check-send-proxy",
            "inter 500ms fall 2 rise 2",
            "mode tcp",
            "server w2 10.214.9.12:8080",
            "bind 10.214.9.1:8002",
            "bind 10.214.9.1:8003",
        ] {
            assert!(sc.contains(want), "{want}: {sc}");
        }
        assert!(!sc.contains("log stdout"), "{sc}");
        assert!(c.contains("option httpchk GET /healthz"), "{c}");
        assert!(c.contains("retry-on all-retryable-errors"), "{c}");
        assert!(c.contains("option redispatch"), "{c}");
        assert!(c.contains("send-proxy-v2 check-send-proxy"), "{c}");
        assert!(c.contains("server w2 10.214.9.12:8080"), "{c}");
        assert!(c.contains("bind 10.214.9.1:8000"), "{c}");
        assert!(c.contains("inter 500ms fall 2 rise 2"), "{c}");
    }
}
