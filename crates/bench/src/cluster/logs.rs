//! Parsing the logs the report reads: HAProxy's (a request and the server that answered it,
//! with its retries, or a server marked up or down), time-stamped as read, and weft's access
//! logs (the client each line names, tallied per instance).

use std::fs;
use std::time::Instant;

use super::hosts::Net;
use super::instance::Instance;

/// A line of HAProxy's log: a request (`backend/server status ...`) or a server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogLine {
    /// A request the server answered (`status` -1 when none did), after `retries` attempts
    /// that met a refused or closed connection elsewhere.
    Request {
        server: String,
        status: i32,
        retries: u32,
    },
    /// `Server BACKEND/NAME is DOWN` (`up` false) or `is UP`.
    State {
        backend: String,
        server: String,
        up: bool,
    },
    Other,
}

/// Parses one line of HAProxy's log as configured by
/// [`haproxy_config`](super::haproxy::haproxy_config).
pub(crate) fn parse_log_line(line: &str) -> LogLine {
    let line = line.trim();
    let parsed = match line.strip_prefix("Server ") {
        Some(rest) => parse_state(rest),
        None => parse_request(line),
    };
    parsed.unwrap_or(LogLine::Other)
}

/// `BACKEND/NAME is UP...` or `is DOWN...` (after `Server `).
fn parse_state(rest: &str) -> Option<LogLine> {
    let (name, state) = rest.split_once(" is ")?;
    let (backend, server) = name.split_once('/')?;
    let up = if state.starts_with("UP") {
        true
    } else if state.starts_with("DOWN") {
        false
    } else {
        return None;
    };
    Some(LogLine::State {
        backend: backend.into(),
        server: server.into(),
        up,
    })
}

/// `BACKEND/SERVER STATUS %Ta %tsc %rc`.
fn parse_request(line: &str) -> Option<LogLine> {
    let mut f = line.split_ascii_whitespace();
    let (bs, st) = (f.next()?, f.next()?);
    let (_, server) = bs.split_once('/')?;
    // `%Ta %tsc %rc`; HAProxy writes `+N` for retries that were redispatched.
    let retries = f
        .nth(2)
        .and_then(|rc| rc.trim_start_matches('+').parse().ok())
        .unwrap_or(0);
    let status = st.parse::<i32>().ok()?;
    Some(LogLine::Request {
        server: server.into(),
        status,
        retries,
    })
}

/// A line of HAProxy's log: when it was read, in seconds from the start of the load
/// (negative before), parsed, and as written.
pub(crate) type Stamped = (f64, LogLine, String);

/// HAProxy's lines as its reader read them, stamped in seconds from `start`.
pub(crate) fn stamped(lines: Vec<(Instant, String)>, start: Instant) -> Vec<Stamped> {
    lines
        .into_iter()
        .map(|(at, l)| {
            let t = if at >= start {
                (at - start).as_secs_f64()
            } else {
                -(start - at).as_secs_f64()
            };
            (t, parse_log_line(&l), l)
        })
        .collect()
}

/// `haproxy.log`: each line after its stamp.
pub(crate) fn haproxy_log_text(hlog: &[Stamped]) -> String {
    hlog.iter()
        .map(|(t, _, l)| format!("{t:.3} {l}\n"))
        .collect()
}

/// The client address of a Combined Log Format line (its first field).
pub(crate) fn access_log_client(line: &str) -> Option<&str> {
    line.split_ascii_whitespace().next()
}

/// What one instance's access log names as the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientTally {
    pub(crate) instance: String,
    pub(crate) lines: u64,
    /// Lines naming the client's address, and HAProxy's (the bridge's).
    pub(crate) real: u64,
    pub(crate) balancer: u64,
    /// The log's last line ("" when it has none).
    pub(crate) last_line: String,
}

impl ClientTally {
    /// The tally of access log `text` of `instance`: its lines naming `real`, and `balancer`.
    pub(crate) fn of(instance: &str, text: &str, real: &str, balancer: &str) -> ClientTally {
        let lines: Vec<&str> = text.lines().collect();
        let naming = |who: &str| {
            lines
                .iter()
                .filter(|l| access_log_client(l) == Some(who))
                .count() as u64
        };
        ClientTally {
            instance: instance.into(),
            lines: lines.len() as u64,
            real: naming(real),
            balancer: naming(balancer),
            last_line: lines.last().copied().unwrap_or("").to_string(),
        }
    }
}

/// Each instance's tally, from its access log (none where it cannot be read).
pub(crate) fn tally_clients(instances: &[Instance], net: Net) -> Vec<ClientTally> {
    let (real, bal) = (net.client().to_string(), net.bridge().to_string());
    instances
        .iter()
        .map(|inst| {
            let text = fs::read_to_string(&inst.access).unwrap_or_default();
            ClientTally::of(&inst.name, &text, &real, &bal)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_log_lines() {
        assert_eq!(
            parse_log_line("weft/w2 200 3 ---- 0"),
            LogLine::Request {
                server: "w2".into(),
                status: 200,
                retries: 0
            }
        );
        assert_eq!(
            parse_log_line("weft/<NOSRV> 503 0 SC-- 0"),
            LogLine::Request {
                server: "<NOSRV>".into(),
                status: 503,
                retries: 0
            }
        );
        assert_eq!(
            parse_log_line("weft/w3 200 2 ---- +1"),
            LogLine::Request {
                server: "w3".into(),
                status: 200,
                retries: 1
            }
        );
        assert_eq!(
            parse_log_line(
                "Server weft/w1 is DOWN, reason: Layer7 wrong status, code: 503, info: \
                 \"Service Unavailable\", check duration: 1ms. 2 active and 0 backup servers left."
            ),
            LogLine::State {
                backend: "weft".into(),
                server: "w1".into(),
                up: false
            }
        );
        assert_eq!(
            parse_log_line("Server one/w1 is UP, reason: Layer7 check passed"),
            LogLine::State {
                backend: "one".into(),
                server: "w1".into(),
                up: true
            }
        );
        for other in [
            "",
            "Proxy all started.",
            "weft/w1 abc",
            "Server weft is going DOWN",
        ] {
            assert_eq!(parse_log_line(other), LogLine::Other, "{other:?}");
        }
    }

    #[test]
    fn access_log_clients() {
        assert_eq!(
            access_log_client("10.214.3.2 - - [25/Nov/2026:07:00:00 +0000] \"GET /echo HTTP/1.1\" 200 4 \"-\" \"-\""),
            Some("10.214.3.2")
        );
        assert_eq!(access_log_client(""), None);
    }

    #[test]
    fn access_logs_are_tallied_by_the_client_they_name() {
        let log = "10.214.3.2 - - [x] \"GET /echo HTTP/1.1\" 200 4\n\
                   10.214.3.1 - - [x] \"GET /healthz HTTP/1.1\" 200 2\n\
                   10.214.3.2 - - [y] \"GET /echo HTTP/1.1\" 200 4\n";
        let t = ClientTally::of("w2", log, "10.214.3.2", "10.214.3.1");
        assert_eq!(
            (t.instance.as_str(), t.lines, t.real, t.balancer),
            ("w2", 3, 2, 1)
        );
        assert!(t.last_line.contains("[y]"), "{t:?}");
        let empty = ClientTally::of("w3", "", "10.214.3.2", "10.214.3.1");
        assert_eq!(
            (empty.lines, empty.real, empty.last_line.as_str()),
            (0, 0, "")
        );
    }

    #[test]
    fn haproxy_lines_are_stamped_from_the_start_of_the_load() {
        let start = Instant::now() + std::time::Duration::from_secs(10);
        let lines = vec![
            (
                start - std::time::Duration::from_millis(500),
                "Proxy all started.".into(),
            ),
            (
                start + std::time::Duration::from_millis(1250),
                "weft/w1 200 3 ---- 0".into(),
            ),
        ];
        let hlog = stamped(lines, start);
        assert!((hlog[0].0 + 0.5).abs() < 1e-9 && (hlog[1].0 - 1.25).abs() < 1e-9);
        assert_eq!(hlog[0].1, LogLine::Other);
        assert!(matches!(&hlog[1].1, LogLine::Request { server, .. } if server == "w1"));
        assert_eq!(
            haproxy_log_text(&hlog),
            "-0.500 Proxy all started.\n1.250 weft/w1 200 3 ---- 0\n"
        );
    }
}
