//! The `weft` command.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use weft::config::{AccessLogTarget, Config, Listen};
use weft::{fileset, Server};

#[derive(Parser)]
#[command(
    name = "weft",
    version,
    about = "A web server with fiber, thread, process and pipeline models"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// `weft check`: the options of `serve`, and a request to route.
#[derive(clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Also say which site and location would answer this target (a path, with its query if
    /// any), and why (as nginx's location rules choose).
    #[arg(long = "match", value_name = "URL")]
    target: Option<String>,
    /// The host of the `--match` request (default: none, the default site's).
    #[arg(long, value_name = "HOST", requires = "target")]
    host: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a document root (default: www/ on http://127.0.0.1:8080).
    Serve(ServeArgs),
    /// Check a configuration as `serve` would take it (root, CGI directory, proxy upstreams,
    /// ports free), print the effective configuration as TOML, exit 0 if it would start, 1 if
    /// not (as `nginx -t`).
    Check(CheckArgs),
    /// Write the papers' generated test files (changes.html, files/*.bin) under DIR.
    Fileset {
        /// Document root to fill.
        dir: PathBuf,
    },
    /// Fit the pipeline's utilization constants c1 and c2 (U = c1*W + c2*R) from saturating
    /// loads over several file sizes, served and generated in this process.
    Calibrate(CalibrateArgs),
    /// Automatic HTTPS (`[acme]`): list the names managed, or ask the running server to renew.
    Acme(AcmeArgs),
}

#[derive(clap::Args)]
struct AcmeArgs {
    #[command(subcommand)]
    cmd: AcmeCmd,
    /// The server's TOML configuration file.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum AcmeCmd {
    /// Each managed name, its stored certificate's expiry and when it renews.
    List,
    /// Renew NAME (every managed name without one) at the running server's next look (within
    /// 5 s, or when a failed try's backoff ends), whatever its expiry.
    Renew {
        /// Names to renew.
        names: Vec<String>,
    },
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// Serve with this configuration; with --write, the file the constants are written to.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The model that serves the load.
    #[arg(long, default_value = "pipeline")]
    model: weft::Model,
    /// File sizes, one saturating run each.
    #[arg(long, value_delimiter = ',', default_value = "1k,16k,128k,1m", value_parser = weft::calibrate::parse_size)]
    sizes: Vec<u64>,
    /// Concurrent keep-alive clients.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Measured time per size.
    #[arg(long, default_value = "3s", value_parser = weft::config::parse_duration)]
    duration: std::time::Duration,
    /// Write c1 and c2 into the --config file (its comments are not kept).
    #[arg(long, requires = "config")]
    write: bool,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file; the options below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Document root.
    #[arg(long)]
    root: Option<PathBuf>,
    /// ADDR or ADDR=MODEL (fiber, thread, process, pipeline); may repeat, one model per port.
    #[arg(long = "listen", value_name = "ADDR[=MODEL]")]
    listen: Vec<Listen>,
    /// An HTTPS listener: ADDR or ADDR=MODEL, as --listen; may repeat (config `[[listen]]
    /// tls = true`). Needs --tls-cert and --tls-key (or `[tls]` in the config).
    #[arg(long = "https", value_name = "ADDR[=MODEL]")]
    https: Vec<Listen>,
    /// Plain listeners also take HTTP/2 with prior knowledge (h2c; config `[[listen]] h2c`).
    #[arg(long)]
    h2c: bool,
    /// PEM certificate chain of the HTTPS listeners (config `[tls] cert`; nginx
    /// `ssl_certificate`).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key, PKCS#8, RSA or EC (config `[tls] key`; nginx `ssl_certificate_key`).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Worker threads for models with a fixed pool (default: one per core; at least 1).
    #[arg(long, value_name = "N", value_parser = threads_arg)]
    threads: Option<u16>,
    /// Access log: a file path, "stdout", or "off".
    #[arg(long, value_name = "PATH|off")]
    access_log: Option<AccessLogTarget>,
    /// Mount /_weft/status, /_weft/status.json and /_weft/metrics (loopback only by default).
    #[arg(long)]
    status: bool,
    /// The response cache of static files (config `[cache] enabled`, default on).
    #[arg(long, value_name = "on|off")]
    cache: Option<OnOff>,
    /// Time every request's phases: histograms in the status JSON and metrics, and a
    /// Server-Timing header on each response (config `[timing]`).
    #[arg(long)]
    timing: bool,
    /// Run the executable files of DIR as CGI/1.1 scripts under /cgi-bin/ (config `[cgi] dir`).
    #[arg(long, value_name = "DIR")]
    cgi: Option<PathBuf>,
    /// The pipeline model's thread controller (config `[pipeline] controller`, default on);
    /// off keeps the initial allocation.
    #[arg(long, value_name = "on|off")]
    pipeline_controller: Option<OnOff>,
    /// Forward requests under /PREFIX to an upstream HTTP/1.1 server (`*=URL`: everything
    /// that is not a file); may repeat (config `[[proxy]]`).
    #[arg(long = "proxy", value_name = "/PREFIX=http://HOST:PORT")]
    proxy: Vec<weft::config::ProxyConfig>,
    /// Pass requests under /PREFIX to a FastCGI application such as php-fpm, with PHP's
    /// defaults (index.php, PATH_INFO, a front controller, .php never served as source); may
    /// repeat (config `[[fastcgi]]`).
    #[arg(long = "fastcgi", value_name = "/PREFIX=unix:/PATH|HOST:PORT")]
    fastcgi: Vec<weft::config::FastcgiConfig>,
    /// Mount the echo function at PATH, or "off" (config `[echo] path`; by default mounted at
    /// /echo on the sample site www/ only).
    #[arg(long, value_name = "PATH|off")]
    echo: Option<String>,
    /// Mount the health check at PATH: 200 ok while serving, 503 once a drain has begun
    /// (config `[health] path`).
    #[arg(long, value_name = "PATH")]
    health: Option<String>,
    /// Every listener expects a PROXY protocol (v1/v2) header on each connection (config
    /// `[[listen]] proxy_protocol`).
    #[arg(long)]
    proxy_protocol: bool,
    /// Every listener's connections use this TCP congestion control, e.g. reno (config
    /// `[[listen]] congestion`; not given: the system's default).
    #[arg(long, value_name = "NAME")]
    congestion: Option<String>,
    /// Trust X-Forwarded-For from these proxies (config `real_ip_from`); may repeat or list.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    real_ip_from: Vec<weft::config::Cidr>,
    /// Started as root: serve as this user once the listeners are bound (config `user`,
    /// nginx `user`).
    #[arg(long, value_name = "NAME[:GROUP]")]
    user: Option<String>,
    /// Started as root without --user: serve as root (config `allow_root`).
    #[arg(long)]
    allow_root: bool,
    /// Open connections per client address; 503 past it (config `limits.conn_per_ip`).
    #[arg(long, value_name = "N", value_parser = count_arg::<usize>)]
    conn_per_ip: Option<usize>,
    /// Requests per client address, e.g. 100r/s or 30r/m; 429 past it (config
    /// `[rate_limit] rate`).
    #[arg(long, value_name = "RATE")]
    rate_limit: Option<weft::config::Rate>,
    /// Requests over --rate-limit let through at once (config `[rate_limit] burst`).
    #[arg(long, value_name = "N", value_parser = count_arg::<u32>)]
    rate_burst: Option<u32>,
    /// Requests one connection carries before its response says `Connection: close`; 0: no
    /// bound (config `limits.keepalive_requests`, nginx `keepalive_requests`).
    #[arg(long, value_name = "N", value_parser = count_arg::<u32>)]
    keepalive_requests: Option<u32>,
}

/// A whole number for an option, in the user's terms ("expected a whole number like 4, got
/// `many`") rather than the parser's ("invalid digit found in string").
fn count_arg<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number like 4, got `{s}`"))?;
    T::try_from(n).map_err(|_| format!("{n} is too large"))
}

/// `--threads`: 1 to 65535.
fn threads_arg(s: &str) -> Result<u16, String> {
    match count_arg::<u16>(s) {
        Ok(0) => Err("expected a number of worker threads >= 1, got 0".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "expected a number of worker threads >= 1 (at most 65535), got `{s}`"
        )),
    }
}

/// `on` or `off`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

fn main() -> ExitCode {
    weft::log::init_error_log();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and version are not errors. `weft check` exits 1 for any configuration it
            // refuses, from the command line as from the file (as `nginx -t`); elsewhere a
            // command-line error is a usage error, 2.
            let code = if !e.use_stderr() {
                0
            } else if std::env::args().nth(1).as_deref() == Some("check") {
                1
            } else {
                2
            };
            return ExitCode::from(code);
        }
    };
    let result = match cli.cmd {
        // Sockets handed over are taken first, while the process has one thread (taking them
        // changes the environment).
        Cmd::Serve(args) => weft::activation::Activation::from_env()
            .map_err(|e| e.to_string())
            .and_then(|a| serve(args, a)),
        Cmd::Check(args) => check(args),
        Cmd::Fileset { dir } => fileset::ensure(&dir)
            .map(|n| println!("wrote {n} files under {}", dir.display()))
            .map_err(|e| format!("fileset: {e}")),
        Cmd::Calibrate(args) => calibrate(args),
        Cmd::Acme(args) => acme(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e}");
            ExitCode::FAILURE
        }
    }
}

fn acme(args: AcmeArgs) -> Result<(), String> {
    let cfg = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if !cfg.acme.enabled {
        return Err("[acme] is not enabled in this configuration".into());
    }
    match args.cmd {
        AcmeCmd::List => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let days = |t: Option<i64>| {
                t.map_or_else(
                    || "-".to_string(),
                    |t| format!("{:.1}", (t - now) as f64 / 86_400.0),
                )
            };
            println!(
                "{:<40} {:>16} {:>16} renew asked",
                "name", "expires in (d)", "renews in (d)"
            );
            for n in weft::keeper::managed(&cfg)? {
                println!(
                    "{:<40} {:>16} {:>16} {}",
                    n.name,
                    days(n.not_after),
                    days(n.renew_at),
                    if n.renewal_requested { "yes" } else { "no" }
                );
            }
            Ok(())
        }
        AcmeCmd::Renew { names } => {
            for n in weft::keeper::request_renewal(&cfg, &names)? {
                println!(
                    "{n}: renewal asked; the running server renews it at its next look (within \
                     5 s, or when a failed try's backoff ends)"
                );
            }
            Ok(())
        }
    }
}

fn calibrate(args: CalibrateArgs) -> Result<(), String> {
    use weft::calibrate;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let opts = calibrate::Options {
        config,
        model: args.model,
        sizes: args.sizes,
        connections: args.connections,
        duration: args.duration,
    };
    println!(
        "saturating the {} model with {} clients, {:?} per size",
        opts.model, opts.connections, opts.duration
    );
    let points = calibrate::measure(&opts).map_err(|e| format!("calibrate: {e}"))?;
    println!("{:>10} {:>12} {:>14}", "size", "W (req/s)", "R (bytes/s)");
    for p in &points {
        println!("{:>10} {:>12.0} {:>14.0}", p.size, p.w, p.r);
    }
    let fit = calibrate::fit(&points)
        .ok_or("calibrate: the points do not give a capacity line (try more distinct sizes)")?;
    println!("c1 = {:e}\nc2 = {:e}\nR^2 = {:.4}", fit.c1, fit.c2, fit.r2);
    if args.write {
        let path = args.config.expect("clap requires --config with --write");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let out = calibrate::write_config(&text, &fit)?;
        std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote [pipeline] c1 and c2 to {}", path.display());
    } else {
        println!("[pipeline]\nc1 = {:e}\nc2 = {:e}", fit.c1, fit.c2);
    }
    Ok(())
}

/// The configuration: the file (if any) with the command line's options over it. Called
/// again on SIGHUP, so a reload re-reads the file and keeps the options.
fn load_config(args: &ServeArgs) -> Result<Config, String> {
    let mut cfg = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(root) = &args.root {
        cfg.root = root.clone();
    }
    if !args.listen.is_empty() || !args.https.is_empty() {
        cfg.listen = args.listen.clone();
        cfg.listen.extend(args.https.iter().cloned().map(|mut l| {
            l.tls = true;
            l
        }));
    }
    if args.h2c {
        cfg.listen = cfg.listeners();
        for l in &mut cfg.listen {
            l.h2c = !l.tls;
        }
    }
    if (args.tls_cert.is_some() || args.tls_key.is_some()) && !cfg.listeners().iter().any(|l| l.tls)
    {
        return Err(format!(
            "{} given, but no listener serves HTTPS: add --https ADDR (or a [[listen]] with \
             tls = true in the configuration)",
            if args.tls_cert.is_some() {
                "--tls-cert"
            } else {
                "--tls-key"
            }
        ));
    }
    if let Some(cert) = &args.tls_cert {
        cfg.tls.cert = Some(cert.clone());
    }
    if let Some(key) = &args.tls_key {
        cfg.tls.key = Some(key.clone());
    }
    if let Some(n) = args.threads {
        cfg.threads = Some(usize::from(n));
    }
    if let Some(a) = &args.access_log {
        cfg.access_log = a.clone();
    }
    if args.timing {
        cfg.timing.phases = true;
        cfg.timing.server_timing = true;
    }
    if args.status {
        cfg.status.enabled = true;
    }
    if let Some(c) = args.cache {
        cfg.cache.enabled = matches!(c, OnOff::On);
    }
    if let Some(dir) = &args.cgi {
        cfg.cgi.dir = Some(dir.clone());
        cfg.cgi.prefix = weft::config::CgiConfig::default().prefix;
    }
    if let Some(c) = args.pipeline_controller {
        cfg.pipeline.controller = matches!(c, OnOff::On);
    }
    cfg.proxy.extend(args.proxy.iter().cloned());
    cfg.fastcgi.extend(args.fastcgi.iter().cloned());
    if let Some(path) = &args.health {
        cfg.health.path = path.clone();
    }
    if let Some(path) = &args.echo {
        cfg.echo.path = Some(if path == "off" { "" } else { path }.to_string());
    }
    if args.proxy_protocol {
        cfg.listen = cfg.listeners();
        for l in &mut cfg.listen {
            l.proxy_protocol = true;
        }
    }
    if let Some(cc) = &args.congestion {
        cfg.listen = cfg.listeners();
        for l in &mut cfg.listen {
            l.congestion = Some(cc.clone());
        }
    }
    cfg.real_ip_from.extend(args.real_ip_from.iter().copied());
    if let Some(u) = &args.user {
        cfg.user = Some(u.clone());
    }
    if args.allow_root {
        cfg.allow_root = true;
    }
    if let Some(n) = args.conn_per_ip {
        cfg.limits.conn_per_ip = n;
    }
    if let Some(r) = args.rate_limit {
        cfg.rate_limit.rate = Some(r);
    }
    if let Some(b) = args.rate_burst {
        cfg.rate_limit.burst = b;
    }
    if let Some(n) = args.keepalive_requests {
        cfg.limits.keepalive_requests = n;
    }
    Ok(cfg)
}

/// Settings that name a file or directory, by their last key: a problem that names the path
/// one of them holds is about that setting.
const PATH_KEYS: [&str; 12] = [
    "cert",
    "key",
    "client_ca",
    "ocsp",
    "root",
    "dir",
    "access_log",
    "users",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "ticket_key_file",
];

/// `problem` with the file, line and key of the setting it is about, where it names a path
/// that a setting of `config` holds (a certificate that cannot be read is reported as
/// `weft.toml: line 7: tls.cert: TLS certificate ...`, as a value of the wrong type is).
fn locate(problem: &str, config: Option<&std::path::Path>) -> String {
    let Some(path) = config else {
        return problem.to_string();
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return problem.to_string();
    };
    let Ok(doc) = toml_edit::ImDocument::parse(text.as_str()) else {
        return problem.to_string();
    };
    let mut found = None;
    walk_strings(
        doc.as_table(),
        &mut String::new(),
        &mut |key, value, span| {
            let last = key.rsplit('.').next().unwrap_or(key);
            let last = last.split('[').next().unwrap_or(last);
            if found.is_none()
                && PATH_KEYS.contains(&last)
                && !value.is_empty()
                && problem.contains(&format!("{value}:"))
            {
                found = Some((key.to_string(), span));
            }
        },
    );
    match found {
        Some((key, Some(at))) => {
            let line = text[..at.min(text.len())].matches('\n').count() + 1;
            format!("{}: line {line}: {key}: {problem}", path.display())
        }
        Some((key, None)) => format!("{}: {key}: {problem}", path.display()),
        None => problem.to_string(),
    }
}

/// Calls `f` with the dotted key, value and span of every string setting under `table`.
fn walk_strings(
    table: &dyn toml_edit::TableLike,
    prefix: &mut String,
    f: &mut dyn FnMut(&str, &str, Option<usize>),
) {
    for (k, item) in table.iter() {
        let len = prefix.len();
        if !prefix.is_empty() {
            prefix.push('.');
        }
        prefix.push_str(k);
        match item {
            toml_edit::Item::Table(t) => walk_strings(t, prefix, f),
            toml_edit::Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    let l = prefix.len();
                    prefix.push_str(&format!("[{i}]"));
                    walk_strings(t, prefix, f);
                    prefix.truncate(l);
                }
            }
            toml_edit::Item::Value(toml_edit::Value::String(v)) => {
                f(prefix, v.value(), v.span().map(|s| s.start))
            }
            toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => walk_strings(t, prefix, f),
            _ => {}
        }
        prefix.truncate(len);
    }
}

/// Refuses a document root that is missing or not a directory, saying which.
fn check_root(root: &std::path::Path) -> Result<(), String> {
    let what = match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => "is not a directory".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist".to_string(),
        Err(e) => format!("cannot be read: {e}"),
    };
    Err(format!(
        "document root {} {what} (run from the repository, or pass --root DIR)",
        root.display()
    ))
}

fn check(args: CheckArgs) -> Result<(), String> {
    let CheckArgs {
        serve: args,
        target,
        host,
    } = args;
    let cfg = load_config(&args)?;
    if let Some(target) = target {
        let url = target
            .split_once("://")
            .map_or(target.as_str(), |(_, rest)| {
                rest.find('/').map_or("/", |i| &rest[i..])
            })
            .to_string();
        let host = host.unwrap_or_else(|| {
            target
                .split_once("://")
                .map(|(_, rest)| rest.split('/').next().unwrap_or("").to_string())
                .unwrap_or_default()
        });
        if cfg.site.is_empty() {
            println!("no [[site]]: the top-level settings answer {url}");
        } else {
            let router = weft::sites::Router::new(&cfg.site).map_err(|e| e.to_string())?;
            println!("{}", router.explain(&host, &url));
        }
        return Ok(());
    }
    let text = weft::check::effective(&cfg).to_toml()?;
    print!("{text}");
    let _ = std::io::stdout().flush();
    let problems = weft::check::problems(&cfg);
    for p in &problems {
        eprintln!("weft: {}", locate(p, args.config.as_deref()));
    }
    match problems.len() {
        0 => {
            eprintln!("weft: the configuration is ok");
            Ok(())
        }
        n => Err(format!("the configuration has {n} problem(s)")),
    }
}

fn serve(args: ServeArgs, activation: weft::activation::Activation) -> Result<(), String> {
    let cfg = load_config(&args)?;
    weft::privdrop::root_policy(&cfg)?;
    if cfg.static_files.enabled {
        check_root(&cfg.root)?;
    }
    if fileset::is_sample_site(&cfg.root) {
        // The sample site's large files are generated, not committed; only there (its marker
        // file), never into a user's directory (`weft fileset DIR` does that on request).
        let n =
            fileset::ensure(&cfg.root).map_err(|e| format!("generating the sample files: {e}"))?;
        if n > 0 {
            log::info!("generated {n} sample files under {}", cfg.root.display());
        }
    }
    match weft::raise_nofile_limit() {
        Ok(n) => log::debug!("open-file limit {n}"),
        Err(e) => log::warn!("cannot raise the open-file limit: {e}"),
    }
    let root = cfg.root.clone();
    let config_file = args.config.clone();
    let server = Server::builder()
        .config(cfg)
        .reload_with(move || load_config(&args))
        .activation(activation)
        .build()
        .map_err(|e| locate(&e.to_string(), config_file.as_deref()))?;
    weft::server::shutdown_on_signals(server.shutdown_handle()).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for (addr, model) in server.local_addrs() {
        let scheme = if server.is_tls(addr) { "https" } else { "http" };
        let _ = writeln!(
            out,
            "weft: serving {} on {scheme}://{addr}/ (model: {model})",
            root.display()
        );
    }
    let _ = out.flush();
    drop(out);
    server.run().map_err(|e| e.to_string())?;
    log::info!("stopped");
    Ok(())
}
