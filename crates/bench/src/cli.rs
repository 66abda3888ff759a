//! The command line: `weft-bench load` and `weft-bench groups`.

use std::fs;
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::groups::{self, GroupsConfig};
use crate::load::{self, LoadConfig, Stop};
use crate::plot;
use crate::procstat::{self, ServerCpu};
use crate::report::{GroupsReport, LoadReport};
use crate::specweb::{self, SpecwebConfig};
use crate::target::{check_header, BadInput, RequestSpec, Target};

/// Duration of a load run when neither `-n` nor `-d` is given (wrk's default).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// weft's load generator.
#[derive(Debug, Parser)]
#[command(name = "weft-bench", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// HTTP load on one or more URLs: closed loop like wrk (default), or open loop at a fixed
    /// rate like wrk2 (--rate).
    Load(LoadArgs),
    /// The threads-vs-processes paper's client: CLIENTS clients run GROUPS sequential groups
    /// of CONCURRENCY concurrent GETs, each on a fresh connection.
    Groups(GroupsArgs),
    /// SPECweb99-like static load on a file set written by `fileset-specweb`: paced
    /// keep-alive connections of 5 requests; mean response time, weighted bandwidth,
    /// conforming connections. `--step` varies the clients over time.
    Specweb(SpecwebArgs),
    /// Writes the SPECweb99-like file set for N connections under DIR.
    FilesetSpecweb(FilesetSpecwebArgs),
    /// An emulated application server for the dynamic share (`specweb --dynamic`): answers
    /// every request after --delay with a body sized like the SPECweb99 file its path names.
    Backend(BackendArgs),
    /// Runs one of the papers' experiments against weft's models and the installed peers.
    Experiment(crate::experiment::ExperimentArgs),
    /// Draws columns of a CSV file against one of its columns as a line chart (OUT.svg and
    /// OUT.png): time series such as the pipeline controller's threads per stage.
    Plot(PlotArgs),
    /// Draws an experiment's bar charts again from every run in its rows.csv (threads-cache,
    /// fibers, cgi, specweb, h2), under the same file names, so results written before the
    /// charts had whiskers and a legend get them without being measured again.
    Replot(ReplotArgs),
    /// Plain TCP in, TLS out: forwards every connection on --listen to the HTTPS server at
    /// --connect, so that a tool speaking plain HTTP can probe it.
    TlsShim(TlsShimArgs),
}

#[derive(Debug, Args)]
pub struct ReplotArgs {
    /// An experiment's results folder (e.g. results/fibers): its report.md names the
    /// experiment, its rows.csv holds the runs.
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct TlsShimArgs {
    /// Address to listen on for plain TCP.
    #[arg(long, default_value = "127.0.0.1:8079")]
    pub listen: String,
    /// The TLS server, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// The name sent in SNI and checked against the certificate (default: HOST).
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Close a connection whose client or server has sent nothing for this long.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Longest wait for the TCP connection to the server.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    #[command(flatten)]
    pub tls: TlsArgs,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A CSV file with a header line.
    pub csv: PathBuf,
    /// The column on the x axis.
    #[arg(long, default_value = "t")]
    pub x: String,
    /// The columns drawn, one line each (with --series: one column, a line per series).
    #[arg(long, value_delimiter = ',', required = true)]
    pub y: Vec<String>,
    /// A line per value of this column (rows in long form, e.g. `server`): each point the
    /// median of the rows at its x, a whisker from the smallest to the largest.
    #[arg(long)]
    pub series: Option<String>,
    /// The x axis on a log scale.
    #[arg(long)]
    pub log_x: bool,
    /// Writes OUT.svg and OUT.png.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value = "")]
    pub title: String,
    /// The x axis' title (default: the x column's name).
    #[arg(long)]
    pub x_label: Option<String>,
    #[arg(long, default_value = "")]
    pub y_label: String,
}

/// Reads the series of `plot`: the `x` column against each `y` column; a cell that is not a
/// number is a gap in its line.
pub fn plot_series(csv: &str, x: &str, ys: &[String]) -> Result<Vec<plot::Series>, String> {
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .ok_or("the CSV file is empty")?
        .split(',')
        .map(str::trim)
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no column {name:?} (columns: {})", header.join(", ")))
    };
    let xi = col(x)?;
    let yi: Vec<usize> = ys.iter().map(|y| col(y)).collect::<Result<_, _>>()?;
    let mut series: Vec<plot::Series> = ys.iter().map(|y| (y.clone(), Vec::new())).collect();
    for (n, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |i: usize| cells.get(i).and_then(|c| c.parse::<f64>().ok());
        let xv = num(xi).ok_or_else(|| format!("line {}: no number in column {x:?}", n + 2))?;
        for (s, &i) in series.iter_mut().zip(&yi) {
            s.1.push((xv, num(i).unwrap_or(f64::NAN)));
        }
    }
    Ok(series)
}

/// `plot --series COL`: column `ys[0]` against `x`, a line per value of `col`, each point the
/// median of the rows at that x with a whisker over them.
pub fn plot_by_series(csv: &str, x: &str, ys: &[String], col: &str) -> Result<plot::Kind, String> {
    let [y] = ys else {
        return Err(format!("--series draws one --y column, not {}", ys.len()));
    };
    let rows = crate::experiment::charts::Rows::parse(csv).map_err(|e| e.0)?;
    let mut series = Vec::new();
    for s in rows.distinct(col).map_err(|e| e.0)? {
        let pairs = rows.pairs(&[(col, &s)], x, y).map_err(|e| e.0)?;
        let mut xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let pts = xs
            .into_iter()
            .filter_map(|xv| {
                let at: Vec<f64> = pairs.iter().filter(|p| p.0 == xv).map(|p| p.1).collect();
                plot::Value::of_runs(&at).map(|v| (xv, v))
            })
            .collect();
        series.push((s, pts));
    }
    Ok(plot::Kind::Lines { series })
}

#[derive(Debug, Args)]
pub struct SpecwebArgs {
    /// URL of the file set's root (e.g. http://127.0.0.1:8080/specweb/).
    pub url: String,
    /// Simultaneous clients (each one paced connection at a time); sets the directories.
    #[arg(short, long, default_value_t = 10)]
    pub connections: usize,
    /// Length of the run (of each step with --step).
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Clients in each step, e.g. 50,300,50 (the directories follow the largest).
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    pub step: Vec<usize>,
    /// Length of each step (default: --duration).
    #[arg(long, value_parser = parse_duration)]
    pub step_duration: Option<Duration>,
    /// Directories of the file set (default: the SPECweb99 formula for the clients).
    #[arg(long)]
    pub dirs: Option<usize>,
    /// Seed of the request sequence.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pace of each connection in kbit/s (SPECweb99: 400); 0 sends each request as soon as
    /// the previous response is in, to find the server's saturated throughput.
    #[arg(long, default_value_t = 400.0)]
    pub pace_kbit: f64,
    /// Print the per-second timeline (CSV) after the summary (always with --step).
    #[arg(long)]
    pub timeline: bool,
    /// Percent of operations that are dynamic (SPECweb99: 30): a GET of the file's path under
    /// --dynamic-prefix instead of the file set's root.
    #[arg(long, default_value_t = 0.0, value_name = "PCT")]
    pub dynamic: f64,
    /// Path prefix of dynamic operations on the same server (e.g. one it proxies to
    /// `weft-bench backend`).
    #[arg(long, default_value = "/dyn/", value_name = "PATH")]
    pub dynamic_prefix: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct BackendArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: String,
    /// Wait before each response (the application's work: a query, a disk read).
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    pub delay: Duration,
}

#[derive(Debug, Args)]
pub struct FilesetSpecwebArgs {
    /// Directory to write into (created if missing).
    pub dir: PathBuf,
    /// Simultaneous connections the set is sized for.
    #[arg(short, long, default_value_t = 10)]
    pub connections: usize,
}

#[derive(Debug, Args)]
pub struct Common {
    /// Worker threads of the client's fiber runtime.
    #[arg(short, long, default_value_t = 1)]
    pub threads: usize,
    /// Longest wait for a connect, a write or a response (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Measure the CPU time of this process and its descendants over the run.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// How `https://` URLs are verified (curl's names).
#[derive(Debug, Args, Clone, Default)]
pub struct TlsArgs {
    /// https://: accept any server certificate (the handshake is otherwise the same).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// https://: trust the PEM certificates in FILE instead of the system's CAs (a
    /// self-signed certificate is its own CA).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// https://: resume TLS sessions on new connections (default: a full handshake on every
    /// new connection, to measure its cost).
    #[arg(long)]
    pub tls_resume: bool,
}

impl TlsArgs {
    pub fn options(&self) -> crate::tls::TlsOptions {
        crate::tls::TlsOptions {
            insecure: self.insecure,
            cacert: self.cacert.clone(),
            resume: self.tls_resume,
        }
    }
}

/// The targets of `urls`; for https:// ones, one client configuration from `tls`, and a
/// handshake checked before the run so that an untrusted certificate is one clear error.
pub fn targets(
    urls: &[String],
    spec: &RequestSpec,
    tls: &TlsArgs,
    timeout: Duration,
) -> Result<Vec<Target>, Box<dyn std::error::Error>> {
    let opts = tls.options();
    let config = if urls.iter().any(|u| u.starts_with("https://")) {
        Some(crate::tls::client_config(&opts)?)
    } else {
        None
    };
    let targets = urls
        .iter()
        .map(|u| Target::with_tls(u, spec, config.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut checked = Vec::new();
    for t in targets.iter().filter(|t| t.tls.is_some()) {
        if checked.contains(&t.addr) {
            continue;
        }
        checked.push(t.addr);
        crate::client::check_handshake(t, timeout).map_err(|e| {
            BadInput(format!(
                "{}: TLS handshake failed: {e}{}",
                t.url,
                crate::tls::advice(&e, &opts)
            ))
        })?;
    }
    Ok(targets)
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// URLs to request (http:// or https://); requests are spread over them round-robin.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Connections, each a fiber with one request in flight.
    #[arg(short, long, default_value_t = 10)]
    pub connections: usize,
    /// Total requests (completed or failed), then stop.
    #[arg(short = 'n', long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Run for this long (e.g. 5s, 1m); the default is 10s.
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Open loop: this many requests per second over all connections; latency is measured
    /// from each request's intended send time (coordinated omission corrected).
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
    /// A new connection for every request (sent with `Connection: close`).
    #[arg(long)]
    pub no_keepalive: bool,
    /// Request method.
    #[arg(short, long, default_value = "GET")]
    pub method: String,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Send this file as the request body.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// The URL every request asks for.
    pub url: String,
    /// Clients running at the same time.
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    /// Sequential groups per client.
    #[arg(long, default_value_t = 20)]
    pub groups: usize,
    /// Concurrent requests per group.
    #[arg(long, default_value_t = 12)]
    pub concurrency: usize,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub common: Common,
}

/// `5s`, `250ms`, `100us`, `2m`, `1h`, or plain seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit (5s, 250ms, 2m)"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use us, ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Runs a parsed command line, printing its report.
pub fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Load(a) => run_load(a),
        Command::Groups(a) => run_groups(a),
        Command::Specweb(a) => run_specweb(a),
        Command::FilesetSpecweb(a) => {
            let n = specweb::write_fileset(&a.dir, a.connections)?;
            println!(
                "{}: {n} directories of 36 files ({} connections)",
                a.dir.display(),
                a.connections
            );
            Ok(())
        }
        Command::Experiment(a) => crate::experiment::run(a),
        Command::Plot(a) => {
            let text = std::fs::read_to_string(&a.csv)
                .map_err(|e| BadInput(format!("{}: {e}", a.csv.display())))?;
            let series = plot_series(&text, &a.x, &a.y)
                .map_err(|e| BadInput(format!("{}: {e}", a.csv.display())))?;
            let x_label = a.x_label.as_deref().unwrap_or(&a.x);
            let svg = a.out.with_extension("svg");
            let png = a.out.with_extension("png");
            let mut fig = plot::Figure::lines(&a.title, x_label, &a.y_label, &series);
            fig.panels[0].log_x = a.log_x;
            if let Some(col) = &a.series {
                fig.panels[0].kind = plot_by_series(&text, &a.x, &a.y, col)
                    .map_err(|e| BadInput(format!("{}: {e}", a.csv.display())))?;
                if series.iter().all(|s| s.1.is_empty()) {
                    return Err(BadInput(format!("{}: no rows", a.csv.display())).into());
                }
            }
            std::fs::write(&svg, fig.svg()?)?;
            fig.png(&png)?;
            println!("wrote {} and {}", svg.display(), png.display());
            Ok(())
        }
        Command::Replot(a) => {
            for f in crate::experiment::charts::replot(&a.dir)? {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
        Command::TlsShim(a) => {
            let tls = crate::tls::client_config(&a.tls.options())?;
            let mut cfg = crate::shim::ShimConfig::new(&a.connect, a.server_name.as_deref(), tls)?;
            cfg.idle_timeout = a.idle_timeout;
            cfg.connect_timeout = a.connect_timeout;
            let l = std::net::TcpListener::bind(&a.listen)
                .map_err(|e| BadInput(format!("--listen {}: {e}", a.listen)))?;
            println!(
                "weft-bench tls-shim: plain tcp://{} -> TLS {} ({})",
                l.local_addr()?,
                a.connect,
                if a.tls.insecure {
                    "certificate not checked"
                } else {
                    "certificate checked"
                }
            );
            crate::shim::serve(l, cfg)?;
            Ok(())
        }
        Command::Backend(a) => {
            let l = std::net::TcpListener::bind(&a.listen)
                .map_err(|e| BadInput(format!("--listen {}: {e}", a.listen)))?;
            println!(
                "weft-bench backend on http://{} (delay {:?})",
                l.local_addr()?,
                a.delay
            );
            let cfg = crate::backend::BackendConfig {
                delay: a.delay,
                ..Default::default()
            };
            crate::backend::serve(l, cfg)?;
            Ok(())
        }
    }
}

fn run_specweb(a: SpecwebArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = SpecwebConfig::new(&a.url, a.connections, a.duration)?;
    if !a.step.is_empty() {
        if a.step.iter().all(|&n| n == 0) {
            return Err(BadInput("--step needs at least one client somewhere".into()).into());
        }
        cfg.steps = a.step.clone();
        cfg.step_duration = a.step_duration.unwrap_or(a.duration);
        cfg.dirs = specweb::directories(a.step.iter().copied().max().unwrap_or(1));
    }
    if let Some(d) = a.dirs {
        cfg.dirs = d.max(1);
    }
    cfg.threads = a.common.threads.max(1);
    cfg.timeout = a.common.timeout;
    cfg.seed = a.seed;
    cfg.pace_bps = specweb::pace_bps(a.pace_kbit)?;
    if !(0.0..=100.0).contains(&a.dynamic) {
        return Err(BadInput(format!(
            "--dynamic {}: needs a percent from 0 to 100",
            a.dynamic
        ))
        .into());
    }
    cfg.dynamic = a.dynamic / 100.0;
    if !a.dynamic_prefix.starts_with('/') {
        return Err(BadInput(format!(
            "--dynamic-prefix {}: needs a path starting with /",
            a.dynamic_prefix
        ))
        .into());
    }
    cfg.dynamic_prefix = a.dynamic_prefix.clone();
    if !cfg.dynamic_prefix.ends_with('/') {
        cfg.dynamic_prefix.push('/');
    }
    let before = a.common.server_pid.map(procstat::sample).transpose()?;
    let r = specweb::run(&cfg)?;
    let server = server_cpu(a.common.server_pid, before, r.requests)?;
    if a.common.json {
        let mut v = serde_json::to_value(&r)?;
        v["server"] = serde_json::to_value(server)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print!("{}", r.human());
    if let Some(s) = server {
        println!(
            "  server CPU {:.2} s, {:.1} us/request, {:.1}%",
            s.cpu_s, s.cpu_us_per_request, s.utilization_pct
        );
    }
    if a.timeline || !a.step.is_empty() {
        print!("{}", r.timeline_csv());
    }
    Ok(())
}

fn run_load(a: LoadArgs) -> Result<(), Box<dyn std::error::Error>> {
    for h in &a.headers {
        check_header(h)?;
    }
    if a.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(BadInput("--rate must be a positive number".into()).into());
    }
    let body = match &a.body_file {
        Some(f) => Some(fs::read(f).map_err(|e| io::Error::new(e.kind(), format!("{f}: {e}")))?),
        None => None,
    };
    let spec = RequestSpec {
        method: a.method.clone(),
        headers: a.headers.clone(),
        body,
        close: a.no_keepalive,
    };
    let targets = targets(&a.urls, &spec, &a.tls, a.common.timeout)?;
    let stop = match (a.requests, a.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, d) => Stop::Duration(d.unwrap_or(DEFAULT_DURATION)),
    };
    let cfg = LoadConfig {
        targets,
        connections: a.connections.max(1),
        threads: a.common.threads.max(1),
        stop,
        rate: a.rate,
        keepalive: !a.no_keepalive,
        timeout: a.common.timeout,
        progress: io::stderr().is_terminal(),
    };
    let before = a.common.server_pid.map(procstat::sample).transpose()?;
    let r = load::run(&cfg)?;
    let mut report = LoadReport::new(
        a.urls.clone(),
        a.rate,
        cfg.connections,
        cfg.threads,
        cfg.keepalive,
        &r.recorder,
        r.elapsed.as_secs_f64(),
        r.connects,
    );
    report.scheduled = r.scheduled;
    report.server = server_cpu(a.common.server_pid, before, r.recorder.requests)?;
    print(&report, a.common.json, LoadReport::human)
}

fn run_groups(a: GroupsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let spec = RequestSpec {
        close: true,
        ..RequestSpec::default()
    };
    let cfg = GroupsConfig {
        target: targets(
            std::slice::from_ref(&a.url),
            &spec,
            &a.tls,
            a.common.timeout,
        )?
        .remove(0),
        clients: a.clients.max(1),
        groups: a.groups,
        concurrency: a.concurrency.max(1),
        threads: a.common.threads.max(1),
        timeout: a.common.timeout,
    };
    let before = a.common.server_pid.map(procstat::sample).transpose()?;
    let r = groups::run(&cfg)?;
    let mut report = GroupsReport::new(
        a.url.clone(),
        cfg.clients,
        cfg.groups,
        cfg.concurrency,
        &r.recorder,
        r.elapsed.as_secs_f64(),
    );
    report.server = server_cpu(a.common.server_pid, before, r.recorder.requests)?;
    print(&report, a.common.json, GroupsReport::human)
}

fn server_cpu(
    pid: Option<u32>,
    before: Option<procstat::Sample>,
    requests: u64,
) -> io::Result<Option<ServerCpu>> {
    let (Some(pid), Some(before)) = (pid, before) else {
        return Ok(None);
    };
    let after = procstat::sample(pid)?;
    let hz = procstat::ticks_per_second();
    Ok(Some(ServerCpu::between(pid, before, after, requests, hz)))
}

fn print<R: serde::Serialize>(
    report: &R,
    json: bool,
    human: fn(&R) -> String,
) -> Result<(), Box<dyn std::error::Error>> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", human(report));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn plot_reads_columns_and_leaves_gaps_for_cells_that_are_not_numbers() {
        let csv = "t,clients,threads_send,u\n0.25,20,4,0.1\n0.5,20,,0.2\n0.75,600,6,x\n";
        let s = plot_series(csv, "t", &["threads_send".into(), "u".into()]).unwrap();
        assert_eq!(s[0].0, "threads_send");
        assert_eq!(s[0].1[0], (0.25, 4.0));
        assert!(s[0].1[1].1.is_nan() && s[1].1[2].1.is_nan());
        assert_eq!(s[1].1[1], (0.5, 0.2));
        let e = plot_series(csv, "t", &["nope".into()]).unwrap_err();
        assert!(
            e.contains("no column \"nope\"") && e.contains("threads_send"),
            "{e}"
        );
        assert!(plot_series("a,b\nx,1\n", "a", &["b".into()]).is_err());
    }

    #[test]
    fn plot_by_series_draws_a_line_per_value_with_the_median_of_the_runs() {
        let csv = "server,n,run,cpu\nfiber,100,1,7\nnginx,100,1,8\nfiber,100,2,9\n\
                   fiber,100,3,8\nfiber,1000,1,x\nnginx,1000,1,10\n";
        let plot::Kind::Lines { series } =
            plot_by_series(csv, "n", &["cpu".into()], "server").unwrap()
        else {
            panic!("lines")
        };
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].0, "fiber");
        // fiber at 1000 is not a number: no point there.
        assert_eq!(series[0].1.len(), 1);
        assert_eq!(series[0].1[0].0, 100.0);
        assert_eq!(
            series[0].1[0].1,
            plot::Value {
                mid: 8.0,
                range: Some((7.0, 9.0))
            }
        );
        assert_eq!(series[1].1.len(), 2);
        assert!(plot_by_series(csv, "n", &["cpu".into(), "run".into()], "server").is_err());
        assert!(plot_by_series(csv, "n", &["cpu".into()], "nope").is_err());
    }

    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn command_line() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "weft-bench",
            "load",
            "-c50",
            "-d3s",
            "-H",
            "X-A: 1",
            "-H",
            "X-B: 2",
            "--no-keepalive",
            "--rate",
            "1000",
            "http://a/",
            "http://b/",
        ])
        .unwrap();
        let Command::Load(a) = cli.command else {
            panic!("load expected")
        };
        assert_eq!(a.connections, 50);
        assert_eq!(a.duration, Some(Duration::from_secs(3)));
        assert_eq!(a.headers, ["X-A: 1", "X-B: 2"]);
        assert_eq!(a.urls.len(), 2);
        assert!(a.no_keepalive);
        assert_eq!(a.rate, Some(1000.0));
        assert_eq!(a.common.threads, 1);
        assert!(Cli::try_parse_from(["weft-bench", "load", "-n5", "-d1s", "http://a/"]).is_err());
        let cli = Cli::try_parse_from([
            "weft-bench",
            "load",
            "--cacert",
            "ca.pem",
            "--tls-resume",
            "https://a/",
        ])
        .unwrap();
        let Command::Load(a) = cli.command else {
            panic!("load expected")
        };
        let o = a.tls.options();
        assert_eq!(o.cacert.as_deref(), Some(std::path::Path::new("ca.pem")));
        assert!(o.resume && !o.insecure);
        let cli = Cli::try_parse_from(["weft-bench", "load", "-k", "https://a/"]).unwrap();
        let Command::Load(a) = cli.command else {
            panic!("load expected")
        };
        assert!(a.tls.insecure && !a.tls.tls_resume);
        let cli = Cli::try_parse_from(["weft-bench", "groups", "http://a/"]).unwrap();
        let Command::Groups(g) = cli.command else {
            panic!("groups expected")
        };
        assert_eq!((g.clients, g.groups, g.concurrency), (2, 20, 12));
        let cli = Cli::try_parse_from([
            "weft-bench",
            "specweb",
            "http://a/specweb/",
            "--step",
            "50,300,50",
            "--step-duration",
            "10s",
        ])
        .unwrap();
        let Command::Specweb(s) = cli.command else {
            panic!("specweb expected")
        };
        assert_eq!(s.step, [50, 300, 50]);
        assert_eq!(s.step_duration, Some(Duration::from_secs(10)));
        assert_eq!(s.connections, 10);
        let cli = Cli::try_parse_from([
            "weft-bench",
            "experiment",
            "fibers",
            "--quick",
            "--servers",
            "fiber,nginx",
        ])
        .unwrap();
        let Command::Experiment(e) = cli.command else {
            panic!("experiment expected")
        };
        assert!(e.quick);
        assert_eq!(e.servers, ["fiber", "nginx"]);
        // No --out: the quick run's own folder (experiment::out_dir).
        assert_eq!(e.out, None);
        assert_eq!(
            crate::experiment::out_dir(&e),
            std::path::Path::new("results/quick/fibers")
        );
    }
}
