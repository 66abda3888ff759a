//! `weft-bench experiment tls`: what HTTPS costs, weft's models against nginx with OpenSSL.
//!
//! Every server gets the same self-signed P-256 certificate (made here with rcgen) and serves
//! the fibers paper's 10,541-byte page over TLS; nginx is configured as its defaults plus
//! `ssl_session_cache shared`. weft is started with `--https ADDR=MODEL --tls-cert --tls-key`;
//! a weft binary that does not take `--https` yet is named and its rows skipped. The client is
//! weft-bench's own (rustls, ring), verifying the certificate as its CA. Four measurements:
//!
//! * keep-alive: 50 connections reusing their TLS sessions, server CPU per request;
//! * a new connection per request with a full handshake (no resumption): handshakes/s and
//!   server CPU per connection;
//! * the same with session resumption (`--tls-resume`);
//! * resident memory per idle keep-alive TLS connection: N connections that each completed a
//!   request, the server's RSS (process tree) before and after, as
//!   `scripts/idle/idle_rss.py` does for plain HTTP.
//!
//! Output as the other experiments: `rows.csv` (every run of the loads), `idle.csv` (every
//! idle-memory run), `median.csv` (one row per server), charts and `report.md`, with the
//! targets of issue 22 beside the figures.

use std::sync::Arc;

use rustls::ClientConfig;

use super::harness::{self, each_run, med, Env, Setup, BIND, MODELS};
use super::*;
use crate::client::{self, Conn, Deadlines};
use crate::response::{ReadBuf, ResponseParser};
use crate::tls::{self as tls_client, TlsOptions};

/// The page every request asks for (the fibers paper's 10,541 bytes, `weft fileset`).
const PAGE: &str = "/haewelmann.html";

/// Concurrent connections of the loads.
const CONNECTIONS: usize = 50;

/// nginx with TLS: the experiments' usual nginx (one worker, access log off, sendfile) and its
/// TLS defaults (ciphers, session tickets) plus the shared session cache. `ssl_protocols` is
/// the default of nginx 1.23.4 and later: before it (Debian 12 has 1.22.1) the default left
/// TLS 1.3 out, and the comparison would set OpenSSL's TLS 1.2 against rustls' TLS 1.3.
const NGINX_TLS_CONF: &str = "worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 20000; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 1s;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    types { text/html html; application/octet-stream bin; }
    default_type application/octet-stream;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    server {
        listen ADDR:PORT ssl reuseport;
        ssl_certificate CERT;
        ssl_certificate_key KEY;
        root ROOT;
    }
}
";

/// One load of the experiment.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    key: &'static str,
    what: &'static str,
    keepalive: bool,
    resume: bool,
}

const SCENARIOS: [Scenario; 3] = [
    Scenario {
        key: "keepalive",
        what: "keep-alive",
        keepalive: true,
        resume: false,
    },
    Scenario {
        key: "handshake",
        what: "a new connection per request, full handshake",
        keepalive: false,
        resume: false,
    },
    Scenario {
        key: "resumed",
        what: "a new connection per request, resumed session",
        keepalive: false,
        resume: true,
    },
];

/// The experiment's certificate: a self-signed P-256 (ECDSA, SHA-256) certificate for
/// `localhost` and 127.0.0.1, written as PEM into `work`.
pub fn write_certificate(work: &Path) -> Result<(PathBuf, PathBuf), Box<dyn std::error::Error>> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])?;
    let (cert, key) = (work.join("tls-cert.pem"), work.join("tls-key.pem"));
    fs::write(&cert, ck.cert.pem())?;
    fs::write(&key, ck.signing_key.serialize_pem())?;
    Ok((cert, key))
}

/// Resident set of `pid` and its descendants, KiB (`VmRSS` of each).
pub fn tree_rss_kib(pid: u32) -> io::Result<u64> {
    let stats = procstat::all_stats()?;
    let mut pids = vec![pid];
    let mut i = 0;
    while i < pids.len() {
        let parent = pids[i];
        pids.extend(
            stats
                .iter()
                .filter(|s| s.ppid == parent && s.pid != parent)
                .map(|s| s.pid),
        );
        i += 1;
    }
    let mut total = 0;
    for p in pids {
        // A process that exited in between has no status any more: it holds no memory.
        let Ok(text) = fs::read_to_string(format!("/proc/{p}/status")) else {
            continue;
        };
        total += text
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(total)
}

/// Raises this process's open-file limit to its hard limit (the servers started afterwards
/// inherit it): the idle measurement holds thousands of connections.
fn raise_nofile() {
    let _ = weft_sys::resource::raise_nofile_limit();
}

fn is_weft(s: &Server) -> bool {
    MODELS.contains(&s.name.as_str())
}

/// Starts `name` (a weft model, or `nginx`) with TLS on a free port; `Ok(None)` with a line
/// on stderr when it is not installed, does not take `--https`, or does not come up.
fn start_tls(name: &str, weft: &Path, root: &Path, env: &Env) -> io::Result<Option<Server>> {
    let work = env.work;
    let port = free_port()?;
    let (program, args): (PathBuf, Vec<String>) = if name == "nginx" {
        let Some(p) = find_program("nginx") else {
            eprintln!("# nginx: not installed; skipped");
            return Ok(None);
        };
        let conf = work.join("nginx-tls.conf");
        let text = NGINX_TLS_CONF
            .replace("PORT", &port.to_string())
            .replace("ROOT", &root.display().to_string())
            .replace("ADDR", &BIND.to_string())
            .replace("CERT", &env.cert.display().to_string())
            .replace("KEY", &env.key.display().to_string());
        fs::write(&conf, text)?;
        let prefix = work.display().to_string();
        (
            p,
            vec!["-p".into(), prefix, "-c".into(), conf.display().to_string()],
        )
    } else {
        if !weft.is_file() {
            eprintln!("# {name}: no weft binary at {}; skipped", weft.display());
            return Ok(None);
        }
        let conf = work.join(format!("{name}-tls.toml"));
        fs::write(&conf, harness::CONFIG)?;
        let mut args = harness::serve_args(&conf, root);
        args.extend(harness::https_args(name, port, (env.cert, env.key))?);
        (weft.to_path_buf(), args)
    };
    let log_path = work.join(format!("{name}-tls.log"));
    harness::launch(
        name,
        &program,
        &args,
        port,
        &log_path,
        env.pin,
        |status, log| {
            if name != "nginx" && log.contains("--https") {
                eprintln!(
                    "# {name}: this weft binary does not take --https (HTTPS is not in this \
                     build); skipped"
                );
            } else {
                eprintln!(
                    "# {name}: exited ({status}) before listening; see {}; skipped",
                    log_path.display()
                );
            }
        },
    )
}

fn https_url(s: &Server) -> String {
    format!("https://{}:{}{PAGE}", s.host, s.port)
}

/// One connection, one request: what the handshake agreed, or why it failed.
fn negotiated(t: &Target) -> String {
    let t = t.clone();
    let run = || -> io::Result<String> {
        let rt = weft_fiber::Runtime::builder()
            .workers(1)
            .name("weft-bench-tls")
            .build()?;
        let r = rt
            .spawn_on(0, move || {
                let d = Deadlines {
                    timeout: Instant::now() + Duration::from_secs(10),
                    run_end: None,
                };
                match client::open(&t, d) {
                    Ok(Conn::Tls(s)) => s.negotiated(),
                    Ok(Conn::Plain(_)) => "plain".into(),
                    Err(e) => format!("handshake failed: {e:?}"),
                }
            })
            .join()
            .map_err(|e| io::Error::other(format!("{e:?}")));
        rt.shutdown();
        r
    };
    run().unwrap_or_else(|e| e.to_string())
}

/// Opens `n` keep-alive TLS connections to `t` on `rt`, one request each, and returns the
/// server's tree RSS before and after (KiB) and the connections that stayed open with a 200
/// answer. The caller keeps them open through its later runs: connections closed between runs
/// would leave their memory to the allocator for the next run's to reuse, and the later runs
/// would measure almost nothing.
fn idle_rss(
    s: &Server,
    t: &Target,
    n: usize,
    rt: &weft_fiber::Runtime,
) -> io::Result<(u64, u64, Vec<Conn>)> {
    // Let the server settle after the loads (freed buffers, a closing connection's linger).
    weft_fiber::sleep(Duration::from_millis(500));
    let before = tree_rss_kib(s.pid)?;
    let t = Arc::new(t.clone());
    let conns = rt
        .spawn_on(0, move || {
            let fibers: Vec<_> = (0..n)
                .map(|_| {
                    let t = t.clone();
                    weft_fiber::spawn(move || {
                        let d = Deadlines {
                            timeout: Instant::now() + Duration::from_secs(30),
                            run_end: None,
                        };
                        let mut c = client::open(&t, d).ok()?;
                        let mut rb = ReadBuf::new(32 * 1024);
                        let mut parser = ResponseParser::new();
                        let r =
                            client::exchange_on(&mut c, &t.request, false, &mut parser, &mut rb, d)
                                .ok()?;
                        (r.head.status == 200 && !r.head.close).then_some(c)
                    })
                })
                .collect();
            fibers
                .into_iter()
                .filter_map(|f| f.join().ok().flatten())
                .collect::<Vec<Conn>>()
        })
        .join()
        .map_err(|e| io::Error::other(format!("idle connections: {e:?}")))?;
    // As scripts/idle/idle_rss.py: time for the server to park them and free what it frees.
    weft_fiber::sleep(Duration::from_secs(2));
    let after = tree_rss_kib(s.pid)?;
    Ok((before, after, conns))
}

/// Median over runs for `(server, key)`.
type Runs = BTreeMap<(String, &'static str), Vec<f64>>;

fn med_of(m: &Runs, s: &str, k: &'static str) -> f64 {
    med(m, &(s.to_string(), k))
}

/// A ratio for the report, or "n/a" when either side is missing.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
}

/// `met`/`not met` against a target (`<=`), or why it cannot be said.
fn verdict(value: Option<f64>, target: f64, quick: bool) -> &'static str {
    match value {
        None => "not measured",
        Some(_) if quick => "quick run: not a measurement",
        Some(v) if v <= target => "met",
        Some(_) => "not met",
    }
}

/// Runs the experiment (called by [`super::run`] for `tls`).
pub fn run(a: ExperimentArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir(&a);
    check_overwrite(&dir, a.quick)?;
    let weft = weft_binary(&a);
    let root = harness::fileset_root(&a.root, &weft)?;
    if !root.join(PAGE.trim_start_matches('/')).is_file() {
        return Err(BadInput(format!(
            "{}: no {PAGE} (weft fileset writes it; no weft binary at {})",
            root.display(),
            weft.display()
        ))
        .into());
    }
    if a.link.is_some() {
        return Err(BadInput("experiment tls: --link is not supported".into()).into());
    }
    raise_nofile();
    let mut names: Vec<&str> = MODELS.to_vec();
    names.push("nginx");
    if !a.servers.is_empty() {
        for s in &a.servers {
            if !names.contains(&s.as_str()) {
                eprintln!("# {s}: no such server in this experiment; ignored");
            }
        }
        names.retain(|n| a.servers.iter().any(|s| s == n));
    }
    Setup {
        a: &a,
        root: &root,
        names,
        runs: a.runs.unwrap_or(if a.quick { 1 } else { 5 }).max(1),
        client: "client",
    }
    .run(
        |name, env| start_tls(name, &weft, &root, env),
        |list| format!("# tls: servers {list}"),
        |b, env| measure(b, env.cert),
    )
}

fn measure(b: &Bench, cert: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let secs = if b.quick { 1 } else { 5 };
    let idle_n = if b.quick { 200 } else { 2000 };
    let hz = procstat::ticks_per_second();
    let configs: Vec<Arc<ClientConfig>> = SCENARIOS
        .iter()
        .map(|sc| {
            tls_client::client_config(&TlsOptions {
                cacert: Some(cert.to_path_buf()),
                resume: sc.resume,
                ..TlsOptions::default()
            })
        })
        .collect::<Result<_, _>>()?;
    let target = |s: &Server, i: usize, close: bool| {
        let spec = RequestSpec {
            close,
            ..RequestSpec::default()
        };
        Target::with_tls(&https_url(s), &spec, Some(&configs[i]))
    };
    let mut agreed = Vec::new();
    for s in &b.servers {
        let what = negotiated(&target(s, 0, false)?);
        eprintln!("  {}: {what}", s.name);
        agreed.push((s.name.clone(), what));
    }
    let mut rows = Vec::new();
    let mut rps: Runs = BTreeMap::new();
    let mut cpu: Runs = BTreeMap::new();
    let mut util: Runs = BTreeMap::new();
    for (i, sc) in SCENARIOS.iter().enumerate() {
        for (run, s) in each_run(b) {
            let cfg = LoadConfig {
                targets: vec![target(s, i, !sc.keepalive)?],
                connections: CONNECTIONS,
                threads: 1,
                stop: Stop::Duration(Duration::from_secs(secs)),
                rate: None,
                keepalive: sc.keepalive,
                timeout: Duration::from_secs(10),
                progress: false,
            };
            let before = procstat::sample(s.pid)?;
            let r = load::run(&cfg)?;
            let after = procstat::sample(s.pid)?;
            let n = r.recorder.requests;
            let sc_cpu = procstat::ServerCpu::between(s.pid, before, after, n, hz);
            let x = n as f64 / r.elapsed.as_secs_f64().max(1e-9);
            let errors = r.recorder.errors.total();
            rows.push(format!(
                "{},{},{},{x:.1},{:.2},{:.1},{},{errors}",
                s.name,
                sc.key,
                run + 1,
                sc_cpu.cpu_us_per_request,
                sc_cpu.utilization_pct,
                r.connects
            ));
            eprintln!(
                "  {} {} run {}: {x:.0} req/s, {:.1} us CPU/req, {} connections, {errors} errors",
                s.name,
                sc.key,
                run + 1,
                sc_cpu.cpu_us_per_request,
                r.connects
            );
            let k = (s.name.clone(), sc.key);
            rps.entry(k.clone()).or_default().push(x);
            cpu.entry(k.clone())
                .or_default()
                .push(sc_cpu.cpu_us_per_request);
            util.entry(k).or_default().push(sc_cpu.utilization_pct);
        }
    }
    write_rows(
        b,
        "server,scenario,run,rps,cpu_us_per_req,server_cpu_pct,connects,errors",
        &rows,
    )?;
    let mut idle_rows = String::from(
        "server,run,connections,open,rss_before_kib,rss_after_kib,bytes_per_connection\n",
    );
    let mut idle: Runs = BTreeMap::new();
    // Server by server, each run adding `idle_n` connections to those of its earlier runs
    // (see `idle_rss`); all closed before the next server's turn.
    let rt = weft_fiber::Runtime::builder()
        .workers(1)
        .name("weft-bench-idle")
        .build()?;
    for s in &b.servers {
        let mut held: Vec<Conn> = Vec::new();
        for run in 0..b.runs {
            let (before, after, conns) = idle_rss(s, &target(s, 0, false)?, idle_n, &rt)?;
            let open = conns.len();
            held.extend(conns);
            let per = if open == 0 {
                f64::NAN
            } else {
                after.saturating_sub(before) as f64 * 1024.0 / open as f64
            };
            writeln!(
                idle_rows,
                "{},{},{idle_n},{open},{before},{after},{per:.0}",
                s.name,
                run + 1
            )?;
            eprintln!(
                "  {} idle run {}: {open} of {idle_n} open, {before} -> {after} KiB, {per:.0} bytes each",
                s.name,
                run + 1
            );
            idle.entry((s.name.clone(), "idle")).or_default().push(per);
        }
        // Closed on the runtime whose reactor they are registered with.
        let _ = rt.spawn_on(0, move || drop(held)).join();
    }
    rt.shutdown();
    fs::write(b.dir.join("idle.csv"), idle_rows)?;
    report(b, &agreed, &rps, &cpu, &util, &idle, secs, idle_n)
}

#[allow(clippy::too_many_arguments)]
fn report(
    b: &Bench,
    agreed: &[(String, String)],
    rps: &Runs,
    cpu: &Runs,
    util: &Runs,
    idle: &Runs,
    secs: u64,
    idle_n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    let mut csv = String::from(
        "server,keepalive_rps,keepalive_cpu_us_per_req,handshakes_per_s,\
         handshake_cpu_us_per_conn,resumed_per_s,resumed_cpu_us_per_conn,\
         idle_bytes_per_conn\n",
    );
    let nginx_version = find_program("nginx")
        .and_then(|p| Command::new(p).arg("-V").output().ok())
        .map(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .filter(|l| l.starts_with("nginx version") || l.starts_with("built with"))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    let mut md = format!(
        "# tls: HTTPS, weft's models and nginx\n\n{}\
         Every server has the same self-signed P-256 (ECDSA) certificate and serves the \
         10,541-byte `{PAGE}` over TLS; nginx ({nginx_version}) is configured as its defaults \
         plus `ssl_session_cache shared:SSL:10m` and `ssl_protocols TLSv1.2 TLSv1.3` (the \
         default since nginx 1.23.4), one worker; weft runs `--threads 1` with \
         `--https`. The client is weft-bench (rustls, ring provider), verifying the \
         certificate. {CONNECTIONS} connections, {secs} s per run, median of {} run(s). \
         Machine: {}.\n\n\
         Handshakes agreed (one probe connection each):\n\n",
        quick_note(b),
        b.runs,
        b.machine
    );
    for (name, what) in agreed {
        writeln!(md, "- {name}: {what}")?;
    }
    md.push_str("\nLoads (rows.csv's `scenario`):\n\n");
    for sc in SCENARIOS {
        writeln!(md, "- `{}`: {}", sc.key, sc.what)?;
    }
    md.push_str(
        "\n| server | keep-alive req/s (us CPU/req, CPU) | full handshakes/s (us CPU/conn, CPU) \
         | resumed/s (us CPU/conn, CPU) | idle TLS connection, bytes |\n|---|---|---|---|---|\n",
    );
    for s in &names {
        let mut cells = Vec::new();
        let mut nums = Vec::new();
        for sc in SCENARIOS {
            let (x, u, p) = (
                med_of(rps, s, sc.key),
                med_of(cpu, s, sc.key),
                med_of(util, s, sc.key),
            );
            nums.push(format!("{x:.1},{u:.2}"));
            cells.push(format!("{x:.0} ({u:.1}, {p:.0}%)"));
        }
        let m = med_of(idle, s, "idle");
        writeln!(csv, "{s},{},{m:.0}", nums.join(","))?;
        writeln!(md, "| {s} | {} | {m:.0} |", cells.join(" | "))?;
    }
    let nginx = |k| med_of(cpu, "nginx", k);
    let fiber = |k| med_of(cpu, "fiber", k);
    let ka = ratio(fiber("keepalive"), nginx("keepalive"));
    let hs = ratio(fiber("handshake"), nginx("handshake"));
    let idle_fiber = Some(med_of(idle, "fiber", "idle")).filter(|v| v.is_finite());
    let show = |r: Option<f64>, unit: &str| r.map_or("n/a".into(), |v| format!("{v:.2}{unit}"));
    writeln!(
        md,
        "\nIdle memory: {idle_n} keep-alive TLS connections, each after one request, the \
         server's resident set (process tree) before and 2 s after; each run adds its \
         connections to those of the server's earlier runs, which stay open (closed ones \
         would leave memory for the next run to reuse).\n\n\
         ## Targets (issue 22)\n\n\
         | target | measured | verdict |\n|---|---|---|\n\
         | keep-alive {CONNECTIONS} connections, fiber server CPU per request / nginx's <= 1.0 | {} | {} |\n\
         | a new connection per request (full handshake, P-256), fiber CPU per connection / nginx+OpenSSL's <= 0.9 | {} | {} |\n\
         | idle keep-alive TLS connection, fiber resident memory <= 8 KiB | {} | {} |\n",
        show(ka, "x"),
        verdict(ka, 1.0, b.quick),
        show(hs, "x"),
        verdict(hs, 0.9, b.quick),
        idle_fiber.map_or("n/a".into(), |v| format!("{v:.0} bytes")),
        verdict(idle_fiber, 8192.0, b.quick),
    )?;
    if !b.servers.iter().any(is_weft) {
        md.push_str(
            "\nNo weft model ran (a weft binary without `--https`, or none was asked for): \
             the ratios need one.\n",
        );
    }
    md.push('\n');
    for c in charts::charts_of("tls", &b.dir, b.quick)? {
        md.push_str(&chart(b, &c)?);
    }
    harness::write_report(b, &csv, &md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_say_met_only_for_a_full_run_within_the_target() {
        assert_eq!(verdict(Some(0.8), 0.9, false), "met");
        assert_eq!(verdict(Some(0.9), 0.9, false), "met");
        assert_eq!(verdict(Some(1.2), 1.0, false), "not met");
        assert_eq!(
            verdict(Some(0.5), 1.0, true),
            "quick run: not a measurement"
        );
        assert_eq!(verdict(None, 1.0, false), "not measured");
        assert_eq!(ratio(2.0, 4.0), Some(0.5));
        assert_eq!(ratio(f64::NAN, 4.0), None);
        assert_eq!(ratio(1.0, 0.0), None);
    }

    #[test]
    fn this_process_has_a_resident_set() {
        let kib = tree_rss_kib(std::process::id()).unwrap();
        assert!(kib > 0);
    }

    #[test]
    fn the_certificate_is_p256_and_names_localhost_and_the_loopback_address() {
        let dir = std::env::temp_dir().join(format!("weft-bench-tlscert-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (cert, key) = write_certificate(&dir).unwrap();
        let key_pem = fs::read_to_string(&key).unwrap();
        assert!(key_pem.contains("BEGIN PRIVATE KEY"), "{key_pem}");
        let der = tls_client::read_certs(&cert).unwrap().remove(0);
        // id-ecPublicKey and the prime256v1 curve's OIDs, DER-encoded.
        let ec = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
        let p256 = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
        let has = |needle: &[u8]| der.windows(needle.len()).any(|w| w == needle);
        assert!(has(&ec) && has(&p256));
        assert!(has(b"localhost") && has(&[127, 0, 0, 1]));
        fs::remove_dir_all(&dir).unwrap();
    }
}
