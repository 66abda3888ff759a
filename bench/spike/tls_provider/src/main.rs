//! Full TLS handshakes per second over memory with each rustls crypto provider: a P-256
//! ECDSA certificate (the "new TLS connection per request (P-256)" case), the
//! providers' default key exchange (X25519 first; ring has no post-quantum hybrid, aws-lc-rs
//! offers X25519MLKEM768 first, so both are also run with X25519 only), TLS 1.3 and 1.2, no
//! resumption. Client and server run in this one thread, so a figure is both sides' CPU; the
//! server's share is what matters, and the client is the same code for both.
//!
//! `cargo run --release -- [HANDSHAKES_PER_RUN] [RUNS]` (default 2000 and 5): rounds
//! alternate the providers; the median of the runs is printed per case. Besides the rate by
//! the wall clock, each run reports the thread's own CPU time per handshake
//! (`/proc/thread-self/schedstat`), which a machine shared with other work disturbs far less.

use std::sync::Arc;
use std::time::Instant;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

/// A provider's name and constructor.
type MakeProvider = fn() -> CryptoProvider;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(2000, |a| a.parse().expect("handshakes"));
    let runs: usize = args.next().map_or(5, |a| a.parse().expect("runs"));
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_der: CertificateDer<'static> = cert.der().clone();
    let key_der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let providers: [(&str, MakeProvider); 2] = [
        ("ring", rustls::crypto::ring::default_provider),
        ("aws-lc-rs", rustls::crypto::aws_lc_rs::default_provider),
    ];
    let cases: [(&str, &'static rustls::SupportedProtocolVersion, bool); 3] = [
        ("TLS1.3 default kx", &rustls::version::TLS13, false),
        ("TLS1.3 X25519", &rustls::version::TLS13, true),
        ("TLS1.2 X25519", &rustls::version::TLS12, true),
    ];
    println!("provider,case,run,handshakes_per_s,cpu_us_per_handshake");
    for (case, version, x25519) in cases {
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); providers.len()];
        let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); providers.len()];
        for run in 0..runs {
            for (i, (name, make)) in providers.iter().enumerate() {
                let mut p = make();
                if x25519 {
                    p.kx_groups
                        .retain(|g| g.name() == rustls::NamedGroup::X25519);
                }
                let p = Arc::new(p);
                let server = Arc::new(
                    ServerConfig::builder_with_provider(p.clone())
                        .with_protocol_versions(&[version])
                        .unwrap()
                        .with_no_client_auth()
                        .with_single_cert(vec![cert_der.clone()], key_der.clone_key())
                        .unwrap(),
                );
                let mut roots = rustls::RootCertStore::empty();
                roots.add(cert_der.clone()).unwrap();
                let mut client = ClientConfig::builder_with_provider(p)
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                client.resumption = rustls::client::Resumption::disabled();
                let client = Arc::new(client);
                let (t0, c0) = (Instant::now(), thread_cpu_ns());
                for _ in 0..n {
                    handshake(&client, &server);
                }
                let rate = n as f64 / t0.elapsed().as_secs_f64();
                let cpu_us = (thread_cpu_ns() - c0) as f64 / 1e3 / n as f64;
                println!("{name},{case},{run},{rate:.0},{cpu_us:.1}");
                rates[i].push(rate);
                cpus[i].push(cpu_us);
            }
        }
        for (i, (name, _)) in providers.iter().enumerate() {
            let mut r = rates[i].clone();
            r.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let mut c = cpus[i].clone();
            c.sort_by(|a, b| a.partial_cmp(b).unwrap());
            eprintln!(
                "{case:>20} {name:>10}: median {:.0} handshakes/s, {:.1} µs CPU per handshake",
                r[r.len() / 2],
                c[c.len() / 2]
            );
        }
    }
}

/// This thread's time on a CPU so far, in ns (the first field of its schedstat).
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("schedstat's first field")
}

/// One full handshake, client and server talking over in-memory buffers.
fn handshake(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) {
    let mut c =
        ClientConnection::new(client.clone(), ServerName::try_from("localhost").unwrap()).unwrap();
    let mut s = ServerConnection::new(server.clone()).unwrap();
    let mut buf = Vec::new();
    while c.is_handshaking() || s.is_handshaking() {
        buf.clear();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
        }
        s.process_new_packets().unwrap();
        buf.clear();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
        }
        c.process_new_packets().unwrap();
    }
}
