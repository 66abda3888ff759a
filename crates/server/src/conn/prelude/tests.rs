//! The prelude's steps, stage by stage, with the clock given: what each stage asks for, what
//! its deadline means, and how a driver that starts late (a connection process, the blocking
//! driver after `tls::start`) goes on from what its connection's facts settle.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::config::{Config, Model};
use crate::metrics::ListenerMetrics;

fn listener(proxy: bool, tls: bool) -> Arc<ListenerMetrics> {
    let lm = ListenerMetrics::new("127.0.0.1:8080".parse().unwrap(), Model::Fiber);
    lm.set_proxy_protocol(proxy);
    lm.set_tls(tls, false);
    Arc::new(lm)
}

fn cfg() -> Config {
    let mut cfg = Config::default();
    cfg.timeouts.header_read = Duration::from_secs(10);
    cfg.timeouts.tls_handshake = Duration::from_secs(5);
    cfg
}

fn info(lm: &Arc<ListenerMetrics>) -> ConnInfo {
    ConnInfo {
        peer: "192.0.2.7:4000".parse().unwrap(),
        local: "127.0.0.1:8080".parse().unwrap(),
        listener: lm.clone(),
        registration: None,
        accepted: None,
        proxied: Default::default(),
        client_slot: Default::default(),
        h2: Default::default(),
        tls: Default::default(),
        life: crate::conn::Life::now(),
    }
}

const V1: &[u8] = b"PROXY TCP4 203.0.113.1 192.0.2.1 5000 80\r\n";

#[test]
fn a_plain_listener_counts_the_connection_then_opens_http1() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = Prelude::new(&listener(false, false), &cfg.timeouts, t0);
    assert_eq!(p.stage(), Stage::Admit);
    assert_eq!(p.deadline(), None);
    assert!(matches!(p.step(b"", &cfg, t0), Step::Admit));
    p.counted();
    assert!(p.is_open());
    assert!(matches!(
        p.step(b"GET /", &cfg, t0),
        Step::Open(Protocol::Http1)
    ));
}

#[test]
fn a_proxy_header_is_taken_before_the_count_and_its_bytes_after_stay() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = Prelude::new(&listener(true, false), &cfg.timeouts, t0);
    assert_eq!(p.deadline(), Some(t0 + cfg.timeouts.header_read));
    // Part of it: read more, up to room for the longest header, by the header-read deadline.
    match p.step(&V1[..10], &cfg, t0) {
        Step::Read { max, until } => {
            assert_eq!(until, t0 + cfg.timeouts.header_read);
            assert!(max >= 16 + proxy_protocol::V2_MAX_PAYLOAD, "{max}");
        }
        other => panic!("{other:?}"),
    }
    let mut data = V1.to_vec();
    data.extend_from_slice(b"GET / HTTP/1.1\r\n");
    match p.step(&data, &cfg, t0) {
        Step::Proxied { len, client } => {
            assert_eq!(len, V1.len());
            assert_eq!(client, Some("203.0.113.1:5000".parse().unwrap()));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(p.step(&data[V1.len()..], &cfg, t0), Step::Admit));
}

#[test]
fn a_proxy_header_late_or_bad_closes_without_an_answer() {
    let cfg = cfg();
    let t0 = Instant::now();
    let lm = listener(true, false);
    let mut p = Prelude::new(&lm, &cfg.timeouts, t0);
    let late = t0 + cfg.timeouts.header_read;
    match p.step(b"PROXY TCP4", &cfg, late) {
        Step::Close(why) => {
            assert_eq!(why, Reason::ProxyLate(cfg.timeouts.header_read));
            assert!(
                why.to_string().starts_with("no PROXY header within 10s"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    let mut p = Prelude::new(&lm, &cfg.timeouts, t0);
    assert!(matches!(
        p.step(b"GET / HTTP/1.1\r\n\r\n", &cfg, t0),
        Step::Close(Reason::ProxyBad(_))
    ));
    assert_eq!(p.ended(3), Some(Reason::ProxyCut));
}

#[test]
fn a_tls_listener_sniffs_the_first_byte() {
    let cfg = cfg();
    let t0 = Instant::now();
    let lm = listener(false, true);
    let mut p = Prelude::new(&lm, &cfg.timeouts, t0);
    let until = t0 + cfg.timeouts.tls_handshake;
    assert!(matches!(p.step(b"", &cfg, t0), Step::Read { until: u, .. } if u == until));
    assert!(matches!(
        p.step(b"GET / HTTP/1.1", &cfg, t0),
        Step::Answer(400, Reason::PlainHttp)
    ));
    assert!(matches!(
        p.step(b"\x00\x01", &cfg, t0),
        Step::Close(Reason::NotTls)
    ));
    assert!(matches!(
        p.step(b"", &cfg, until),
        Step::Close(Reason::TlsLate(_))
    ));
    // A ClientHello: the handshake, and every later byte goes to it whatever it is (a TLS 1.3
    // client's second flight begins with a ChangeCipherSpec, 0x14).
    assert!(
        matches!(p.step(b"\x16\x03\x01", &cfg, t0), Step::Handshake { until: u } if u == until)
    );
    assert!(matches!(
        p.step(b"\x14\x03\x03", &cfg, t0),
        Step::Handshake { .. }
    ));
    assert!(matches!(p.step(b"", &cfg, t0), Step::Read { .. }));
    assert!(matches!(
        p.step(b"", &cfg, until),
        Step::Close(Reason::TlsLate(_))
    ));
    assert_eq!(p.ended(0), Some(Reason::TlsCut));
    assert_eq!(p.secured(None), Protocol::Http1);
    assert!(matches!(p.step(b"", &cfg, t0), Step::Admit));
}

/// Caught by the property test: a ClientHello whose first byte came at the handshake's
/// deadline was handed to a handshake with no time left; it is late, as an empty buffer is.
#[test]
fn a_client_hello_at_the_deadline_is_late_not_a_handshake() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = Prelude::new(&listener(false, true), &cfg.timeouts, t0);
    let until = t0 + cfg.timeouts.tls_handshake;
    assert!(matches!(
        p.step(b"\x16", &cfg, until),
        Step::Close(Reason::TlsLate(_))
    ));
    assert!(matches!(
        p.step(b"GET /", &cfg, until),
        Step::Close(Reason::TlsLate(_))
    ));
}

#[test]
fn the_handshake_deadline_counts_from_the_end_of_the_proxy_header() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = Prelude::new(&listener(true, true), &cfg.timeouts, t0);
    let t1 = t0 + Duration::from_secs(3);
    assert!(matches!(p.step(V1, &cfg, t1), Step::Proxied { .. }));
    assert_eq!(p.deadline(), Some(t1 + cfg.timeouts.tls_handshake));
}

#[test]
fn a_late_driver_resumes_where_the_connection_facts_leave_it() {
    let cfg = cfg();
    let t0 = Instant::now();
    let lm = listener(true, true);
    let info = info(&lm);
    // The process master read the PROXY header: its child starts with the handshake.
    info.proxied
        .set(Some("203.0.113.1:5000".parse().unwrap()))
        .unwrap();
    let p = Prelude::resume(&info, &cfg.timeouts, t0);
    assert!(matches!(p.stage(), Stage::Tls { .. }));
    // After the handshake (`tls::start`), and counted by the master: open.
    let _ = info.tls.set(Arc::new(crate::tls::TlsInfo {
        sni: None,
        alpn: Some(b"http/1.1".to_vec()),
        version: "TLSv1.3",
        resumed: false,
        client: Default::default(),
    }));
    assert_eq!(
        Prelude::resume(&info, &cfg.timeouts, t0).stage(),
        Stage::Admit
    );
    let _ = info.client_slot.set(crate::limits_ip::ConnSlot::Untracked);
    assert!(Prelude::resume(&info, &cfg.timeouts, t0).is_open());
}

#[test]
fn ends_of_a_connection_that_began_no_request_are_quiet() {
    let cfg = cfg();
    let mut p = Prelude::new(&listener(false, false), &cfg.timeouts, Instant::now());
    p.counted();
    assert_eq!(p.ended(0), None);
    assert_eq!(p.ended(5), Some(Reason::HeadCut));
    assert_eq!(Reason::HeadCut.level(), log::Level::Debug);
}

#[test]
fn the_count_refusal_names_the_setting_and_the_address() {
    let why = Reason::ConnPerIp {
        limit: "limits.conn_per_ip = 2".into(),
        client: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
    };
    assert_eq!(
        why.to_string(),
        "more than limits.conn_per_ip = 2 connections open from 192.0.2.7"
    );
}

#[test]
fn a_small_body_is_awaited_by_its_deadline_and_rate() {
    let mut cfg = cfg();
    cfg.timeouts.body_read = Duration::from_secs(4);
    let mut parser = weft_http::Parser::new(cfg.limits.http());
    let req = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
    assert!(matches!(parser.parse(req), Ok(Some(_))));
    let head = parser.head();
    let t0 = Instant::now();
    let mut due = BodyDue::begin(head, b"abc", &cfg, t0).expect("a small body is awaited");
    assert!(matches!(
        due.step(head, b"abc", &cfg, t0),
        BodyStep::Read { until, late: "request body not received in time" }
            if until <= t0 + Duration::from_secs(4)
    ));
    let t1 = t0 + Duration::from_secs(3);
    due.progressed(&cfg.timeouts, t1);
    assert!(matches!(
        due.step(head, b"abcdef", &cfg, t1),
        BodyStep::Read { .. }
    ));
    assert_eq!(
        due.step(head, b"abcdef", &cfg, t1 + Duration::from_secs(4)),
        BodyStep::Late("request body not received in time")
    );
    assert_eq!(due.step(head, b"abcdefghij", &cfg, t1), BodyStep::Ready);
    // The whole body already here: nothing to await.
    assert!(BodyDue::begin(head, b"abcdefghij", &cfg, t0).is_none());
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// Drives a prelude as a model does over arbitrary bytes arriving in arbitrary pieces at
    /// arbitrary times: every step is one of the answers a driver handles, a PROXY header
    /// never claims more bytes than are buffered, a handshake is asked for only on a TLS
    /// listener, and the machine never loops: each piece ends in a read, an end, or requests.
    fn drive(
        proxy: bool,
        tls: bool,
        h2c: bool,
        pieces: &[(Vec<u8>, u64)],
    ) -> Result<(), TestCaseError> {
        let cfg = cfg();
        let t0 = Instant::now();
        let lm = listener(proxy, tls);
        lm.set_http2(true, h2c);
        let mut p = Prelude::new(&lm, &cfg.timeouts, t0);
        let mut buf: Vec<u8> = Vec::new();
        let mut handshakes = 0;
        for (bytes, at_ms) in pieces {
            buf.extend_from_slice(bytes);
            let now = t0 + Duration::from_millis(*at_ms);
            for _ in 0..8 {
                match p.step(&buf, &cfg, now) {
                    Step::Read { until, .. } => {
                        prop_assert!(until > now, "a read past its deadline");
                        break;
                    }
                    Step::Proxied { len, .. } => {
                        prop_assert!(proxy && len <= buf.len() && len > 0);
                        buf.drain(..len);
                    }
                    Step::Admit => p.counted(),
                    Step::Handshake { until } => {
                        prop_assert!(tls && until > now && !buf.is_empty());
                        // The handshake takes the bytes; every third piece finishes it.
                        buf.clear();
                        handshakes += 1;
                        if handshakes % 3 == 0 {
                            p.secured(Some(b"http/1.1"));
                        } else {
                            break;
                        }
                    }
                    Step::Open(Protocol::Http1) => return Ok(()),
                    Step::Open(Protocol::Http2) => {
                        // Only an h2c listener opens HTTP/2 without ALPN.
                        prop_assert!(h2c && !tls);
                        return Ok(());
                    }
                    Step::Answer(status, _) => {
                        // 408: an h2c listener's first line did not come in time.
                        prop_assert!(matches!(status, 400 | 503) || (status == 408 && h2c));
                        return Ok(());
                    }
                    Step::Close(_) => return Ok(()),
                }
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn any_bytes_at_any_time_end_in_a_step_a_driver_handles(
            proxy in any::<bool>(),
            tls in any::<bool>(),
            h2c in any::<bool>(),
            pieces in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..64), 0u64..20_000),
                0..12,
            ),
        ) {
            drive(proxy, tls, h2c, &pieces)?;
        }

        #[test]
        fn a_real_proxy_header_then_anything_is_taken_whole(
            tls in any::<bool>(),
            rest in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut first = V1.to_vec();
            first.extend_from_slice(&rest);
            drive(true, tls, false, &[(first, 0)])?;
        }
    }
}

fn h2c_listener() -> Arc<ListenerMetrics> {
    let lm = listener(false, false);
    lm.set_http2(true, true);
    lm
}

/// An h2c listener's connection, counted, at its first-bytes stage.
fn sniffing(t0: Instant, cfg: &Config) -> Prelude {
    let mut p = Prelude::new(&h2c_listener(), &cfg.timeouts, t0);
    p.counted();
    assert_eq!(
        p.stage(),
        Stage::Sniff {
            deadline: t0 + cfg.timeouts.header_read
        }
    );
    p
}

#[test]
fn an_h2c_listener_tells_the_preface_from_an_http1_request() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = sniffing(t0, &cfg);
    // Part of the preface: more is needed.
    assert!(matches!(p.step(b"PRI * HT", &cfg, t0), Step::Read { .. }));
    assert!(matches!(
        p.step(weft_http::h2::PREFACE, &cfg, t0),
        Step::Open(Protocol::Http2)
    ));
    assert!(p.is_open());

    let mut p = sniffing(t0, &cfg);
    // An HTTP/1.1 request whose method shares the preface's first letter.
    assert!(matches!(p.step(b"POST / HT", &cfg, t0), Step::Read { .. }));
    assert!(matches!(
        p.step(b"POST / HTTP/1.1\r\nHost: a\r\n", &cfg, t0),
        Step::Open(Protocol::Http1)
    ));
    let mut p = sniffing(t0, &cfg);
    assert!(matches!(
        p.step(b"GET / HTTP/1.0\n", &cfg, t0),
        Step::Open(Protocol::Http1)
    ));
}

#[test]
fn on_an_h2c_listener_a_first_line_that_is_no_http1_request_goes_to_http2() {
    // The HTTP/2 driver then refuses the bad preface with GOAWAY (h2spec 3.5/2).
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = sniffing(t0, &cfg);
    assert!(matches!(
        p.step(b"INVALID CONNECTION PREFACE\r\n\r\n", &cfg, t0),
        Step::Open(Protocol::Http2)
    ));
    // A line longer than the prelude reads is left to the head rules (414 and the like).
    let mut p = sniffing(t0, &cfg);
    let long = vec![b'A'; super::super::READ_BUF];
    assert!(matches!(
        p.step(&long, &cfg, t0),
        Step::Open(Protocol::Http1)
    ));
}

#[test]
fn an_h2c_listener_answers_408_when_no_first_line_comes_in_time() {
    let cfg = cfg();
    let t0 = Instant::now();
    let late = t0 + cfg.timeouts.header_read;
    let mut p = sniffing(t0, &cfg);
    assert!(matches!(p.step(b"", &cfg, t0), Step::Read { .. }));
    assert!(matches!(p.step(b"", &cfg, late), Step::Answer(408, _)));
    let mut p = sniffing(t0, &cfg);
    assert!(matches!(p.step(b"PRI", &cfg, late), Step::Answer(408, _)));
}

#[test]
fn a_tls_listener_opens_the_protocol_alpn_chose() {
    let cfg = cfg();
    let t0 = Instant::now();
    let mut p = Prelude::new(&listener(false, true), &cfg.timeouts, t0);
    assert!(matches!(
        p.step(&[HANDSHAKE_RECORD], &cfg, t0),
        Step::Handshake { .. }
    ));
    assert_eq!(p.secured(Some(b"h2")), Protocol::Http2);
    p.counted();
    assert!(matches!(p.step(b"", &cfg, t0), Step::Open(Protocol::Http2)));
    let mut p = Prelude::new(&listener(false, true), &cfg.timeouts, t0);
    let _ = p.step(&[HANDSHAKE_RECORD], &cfg, t0);
    assert_eq!(p.secured(Some(b"http/1.1")), Protocol::Http1);
    assert_eq!(p.secured(None), Protocol::Http1);
}
