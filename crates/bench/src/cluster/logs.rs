//! Parsing the logs the report reads: HAProxy's (a request and the server that answered it,
//! with its retries, or a server marked up or down) and weft's access logs (the client each
//! line names).

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

/// Parses one line of HAProxy's log as configured by [`haproxy_config`].
pub(crate) fn parse_log_line(line: &str) -> LogLine {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("Server ") {
        let Some((name, state)) = rest.split_once(" is ") else {
            return LogLine::Other;
        };
        let Some((backend, server)) = name.split_once('/') else {
            return LogLine::Other;
        };
        let up = if state.starts_with("UP") {
            true
        } else if state.starts_with("DOWN") {
            false
        } else {
            return LogLine::Other;
        };
        return LogLine::State {
            backend: backend.into(),
            server: server.into(),
            up,
        };
    }
    let mut f = line.split_ascii_whitespace();
    let (Some(bs), Some(st)) = (f.next(), f.next()) else {
        return LogLine::Other;
    };
    let Some((_, server)) = bs.split_once('/') else {
        return LogLine::Other;
    };
    // `%Ta %tsc %rc`; HAProxy writes `+N` for retries that were redispatched.
    let retries = f
        .nth(2)
        .and_then(|rc| rc.trim_start_matches('+').parse().ok())
        .unwrap_or(0);
    match st.parse::<i32>() {
        Ok(status) => LogLine::Request {
            server: server.into(),
            status,
            retries,
        },
        Err(_) => LogLine::Other,
    }
}

/// The client address of a Combined Log Format line (its first field).
pub(crate) fn access_log_client(line: &str) -> Option<&str> {
    line.split_ascii_whitespace().next()
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
}
