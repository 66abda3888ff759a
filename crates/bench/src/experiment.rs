//! `weft-bench experiment NAME`: one paper's experiment in one command.
//!
//! * `threads-cache` ("Threaded vs Process-driven HTTP server"): two clients x 20 sequential
//!   groups of 12 concurrent GETs on fresh connections for 1 KB, 484 KB and 2 MB; average
//!   completion time. weft's models with the response cache on and off, and the peers.
//! * `fibers` (Keller and Monien, the fibers paper): ab-like closed loop, a connection per
//!   request, at concurrency 1/10/50 on `/echo` and the 10,541-byte `/haewelmann.html`;
//!   requests/s and server CPU per request.
//! * `cgi` (Edwards, Performance of HTTP and CGI): the paper's POST of 542 bytes (HTTP/1.0, its
//!   nine header lines) one at a time to an echo CGI script (`/cgi-bin/Echo2`, a shell
//!   script), and to weft's in-process `/echo`; mean time per request and server CPU.
//! * `specweb` (Li et al., the open KETA pipeline paper): the SPECweb99-like load
//!   ([`crate::specweb`]); conforming connections, mean response time, ops/s.
//! * `tls` (issue 22, no paper): HTTPS against nginx with OpenSSL; keep-alive and
//!   per-connection handshake cost, and memory per idle TLS connection ([`tls`]).
//! * `h2` (the fibers paper's question asked of HTTP/2): weft's four models under multiplexed
//!   load from h2load, c connections x m concurrent streams; requests/s, server CPU per
//!   request and p99 latency ([`h2`]).
//!
//! The experiment starts every server itself: weft (the `weft` binary next to this one, or
//! `--weft`) once per model, and nginx, lighttpd and apache2 when installed, configured alike
//! (same root, no access log, sendfile, one worker process, nginx with `open_file_cache`).
//! With two cores or more, servers run on core 0 (`taskset`) and the client on core 1
//! (`sched_setaffinity`). Servers alternate run by run (the order rotates), and the report
//! takes the median of the runs. Output: `OUT/NAME/rows.csv` (every run),
//! `OUT/NAME/median.csv`, bar charts (`OUT/NAME/*.png` and `*.svg`) and `OUT/NAME/report.md`,
//! and `OUT/NAME/run-kind.txt` (`full` or `quick`). OUT is `results/`, whose folders hold the
//! measured results that are committed; a `--quick` smoke check goes to `results/quick/`
//! (ignored by git), says so in its report and charts, and refuses a full run's folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use crate::groups::{self, GroupsConfig};
use crate::load::{self, LoadConfig, Stop};
use crate::procstat;
use crate::specweb::{self, SpecwebConfig};
use crate::stats::median;
use crate::target::{BadInput, RequestSpec, Target};

pub mod charts;
pub mod h2;
mod harness;
pub mod tls;

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// threads-cache, fibers, specweb, cgi, tls, h2 or cluster.
    pub name: String,
    /// Only these servers (names as in the report: fiber, thread-cache-off, nginx, ...).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub servers: Vec<String>,
    /// A smoke check: one short run of each point, under 2 minutes.
    #[arg(long)]
    pub quick: bool,
    /// Run nothing: draw the charts of OUT/NAME/ again from its CSVs (as `weft-bench replot`).
    #[arg(long)]
    pub replot: bool,
    /// Runs of each point (default 5, 1 with --quick); the report takes the median.
    #[arg(long)]
    pub runs: Option<usize>,
    /// Results go to OUT/NAME/ (default: results, or results/quick with --quick, which git
    /// ignores: a smoke check never replaces measured results).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The weft binary (default: `weft` next to this executable).
    #[arg(long)]
    pub weft: Option<PathBuf>,
    /// Document root shared by all servers (weft's sample files are generated into it).
    #[arg(long, default_value = "www")]
    pub root: PathBuf,
    /// Put the client behind a link shaped to this rate (tc syntax: 10mbit, the fibers
    /// paper's), in its own network namespace joined by a veth pair; needs root. Results go
    /// to OUT/NAME-RATE/.
    #[arg(long, value_name = "RATE")]
    pub link: Option<String>,
    /// `cluster` only: the weft model of its instances (default fiber).
    #[arg(long)]
    pub model: Option<String>,
    /// `cluster` only: the open loop's requests per second (default 600, 300 with --quick).
    #[arg(long, value_name = "REQ/S")]
    pub rate: Option<f64>,
    /// `h2` only: tls (HTTPS with ALPN h2, the default) or h2c (plain, prior knowledge).
    #[arg(long, value_name = "tls|h2c")]
    pub over: Option<String>,
    /// `h2` only: the path every request asks for (default /echo).
    #[arg(long)]
    pub path: Option<String>,
    /// `h2` only: the measured window of each run (default 5s, 1s with --quick).
    #[arg(long, value_parser = crate::cli::parse_duration)]
    pub duration: Option<Duration>,
    /// `h2` only: h2load's warm-up before each window, connection setup included (default
    /// 1s plus 5ms per connection).
    #[arg(long = "warm-up", value_parser = crate::cli::parse_duration)]
    pub warm_up: Option<Duration>,
    /// `h2` only: weft's models (default fiber,thread,process,pipeline).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub models: Vec<String>,
    /// `h2` only: connection counts (default 10,100,1000).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub conns: Vec<usize>,
    /// `h2` only: concurrent streams per connection (default 1,10,100).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub streams: Vec<usize>,
}

/// A server an experiment can start.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A weft model; `config` is more of its TOML config (after the `[cache]` section).
    Weft {
        model: &'static str,
        cache: bool,
        config: &'static str,
    },
    Nginx,
    Lighttpd,
    Apache,
}

#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub kind: Kind,
}

/// A started server, stopped (killed and reaped) on drop.
#[derive(Debug)]
pub struct Server {
    pub name: String,
    /// The address it listens on (loopback, or the server's end of a shaped link).
    pub host: std::net::Ipv4Addr,
    pub port: u16,
    pub pid: u32,
    child: Child,
}

impl Drop for Server {
    /// Stops the server's whole process group: SIGTERM (nginx and apache2 stop their workers
    /// on it), up to 3 s for the leader to exit, then SIGKILL to whatever is left of the group
    /// (a killed master's workers would otherwise outlive it).
    fn drop(&mut self) {
        // The process group the server was started in (process_group(0) at spawn), its own
        // and its workers' only.
        let group = self.pid as weft_sys::process::Pid;
        let _ = weft_sys::process::kill_group(group, weft_sys::signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            weft_fiber::sleep(Duration::from_millis(20));
        }
        let _ = weft_sys::process::kill_group(group, weft_sys::signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name` on the PATH or in the usual sbin directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(crate) fn weft_binary(a: &ExperimentArgs) -> PathBuf {
    a.weft.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("weft")))
            .unwrap_or_else(|| PathBuf::from("weft"))
    })
}

/// [`weft_binary`], refused where it is not a file.
pub(crate) fn built_weft(a: &ExperimentArgs) -> Result<PathBuf, BadInput> {
    let weft = weft_binary(a);
    if !weft.is_file() {
        return Err(BadInput(format!(
            "{}: no weft binary (build it: cargo build --release -p weft, or pass --weft)",
            weft.display()
        )));
    }
    Ok(weft)
}

/// The servers of an experiment: weft's models (each with the cache on and off when
/// `both_caches`), then the peers that are installed.
pub fn candidates(models: &[&'static str], both_caches: bool) -> Vec<Spec> {
    let mut v = Vec::new();
    for &model in models {
        if both_caches {
            for cache in [true, false] {
                let name = format!("{model}-cache-{}", if cache { "on" } else { "off" });
                v.push(Spec {
                    name,
                    kind: Kind::Weft {
                        model,
                        cache,
                        config: "",
                    },
                });
            }
        } else {
            v.push(Spec {
                name: model.to_string(),
                kind: Kind::Weft {
                    model,
                    cache: true,
                    config: "",
                },
            });
        }
    }
    for (name, kind) in [
        ("nginx", Kind::Nginx),
        ("lighttpd", Kind::Lighttpd),
        ("apache2", Kind::Apache),
    ] {
        v.push(Spec {
            name: name.into(),
            kind,
        });
    }
    v
}

const NGINX_CONF: &str = "worker_processes 1;
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
    server {
        listen ADDR:PORT reuseport;
        root ROOT;
        location = /echo { default_type text/plain; return 200 \"echo\"; }
    }
}
";

const LIGHTTPD_CONF: &str = "server.document-root = \"ROOT\"
server.bind = \"ADDR\"
server.port = PORT
server.errorlog = \"WORK/lighttpd.err\"
server.max-keep-alive-requests = 1000000
server.max-keep-alive-idle = 75
server.network-backend = \"sendfile\"
mimetype.assign = (\".html\" => \"text/html\", \"\" => \"application/octet-stream\")
";

const LIGHTTPD_CGI: &str = "server.modules += (\"mod_cgi\")
$HTTP[\"url\"] =~ \"^/cgi-bin/\" { cgi.assign = (\"\" => \"\") }
";

/// lighttpd's FastCGI to the cgi experiment's php-fpm (`SOCK` substituted).
const LIGHTTPD_FASTCGI: &str = "server.modules += (\"mod_fastcgi\")
fastcgi.server = (\".php\" => ((\"socket\" => \"SOCK\", \"check-local\" => \"enable\")))
";

const APACHE_CONF: &str = "ServerRoot \"WORK\"
ServerName localhost
Listen ADDR:PORT
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
PidFile WORK/apache.pid
DefaultRuntimeDir WORK
Mutex file:WORK default
ErrorLog WORK/apache.err
USER_GROUP
DocumentRoot \"ROOT\"
<Directory \"ROOT\">
    Require all granted
</Directory>
EnableSendfile On
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 75
StartServers 1
ServerLimit 1
ThreadsPerChild 64
ThreadLimit 64
MaxRequestWorkers 64
MinSpareThreads 1
MaxSpareThreads 64
TypesConfig /etc/mime.types
";

/// Starts `spec` on a free port with `root` as its document root; `Ok(None)` (with a line on
/// stderr) when the server is not installed or does not come up.
pub fn start(
    spec: &Spec,
    weft: &Path,
    root: &Path,
    work: &Path,
    pin: bool,
    cgi: bool,
    bind: std::net::Ipv4Addr,
) -> io::Result<Option<Server>> {
    if cgi && matches!(spec.kind, Kind::Nginx | Kind::Apache) {
        eprintln!("# {}: no CGI set up for this peer; skipped", spec.name);
        return Ok(None);
    }
    let port = free_port()?;
    let sub = |t: &str| {
        t.replace("PORT", &port.to_string())
            .replace("ROOT", &root.display().to_string())
            .replace("WORK", &work.display().to_string())
            .replace("ADDR", &bind.to_string())
    };
    let (program, args): (PathBuf, Vec<String>) = match &spec.kind {
        Kind::Weft {
            model,
            cache,
            config,
        } => {
            let conf = work.join(format!("{}.toml", spec.name));
            // The cgi experiment's fourth way, where php-fpm runs (`start_php_fpm`). Every
            // server shares its workers, so none keeps a connection (a php-fpm worker stays
            // with a kept one): a connection per request, nginx's default.
            let sock = work.join(PHP_SOCK);
            let fastcgi = if cgi && sock.exists() {
                format!(
                    "[[fastcgi]]\nprefix = \"/fcgi/\"\nserver = \"unix:{}\"\n",
                    sock.display()
                )
            } else {
                String::new()
            };
            // The cgi experiment's fifth way: weft's reverse proxy to another weft's echo
            // (`start_upstream`).
            let proxy = match fs::read_to_string(work.join(UPSTREAM_PORT)) {
                Ok(port) if cgi => format!(
                    "[[proxy]]\nprefix = \"/proxy/\"\nupstream = \"http://127.0.0.1:{}\"\n",
                    port.trim()
                ),
                _ => String::new(),
            };
            fs::write(
                &conf,
                format!("[cache]\nenabled = {cache}\n{config}{fastcgi}{proxy}"),
            )?;
            let mut args: Vec<String> = vec![
                "serve".into(),
                "--config".into(),
                conf.display().to_string(),
                "--root".into(),
                root.display().to_string(),
                "--threads".into(),
                "1".into(),
                "--listen".into(),
                format!("{bind}:{port}={model}"),
                // Measured on every root, not only the sample site `www/` where it is the
                // default.
                "--echo".into(),
                "/echo".into(),
                // A shaped link's address reaches beyond loopback, and the experiment runs as
                // root to make the link: a lab, where serving as root is the choice.
                "--allow-root".into(),
                // Connections unbounded, as the nginx peer's `keepalive_requests 1000000`.
                "--keepalive-requests".into(),
                "1000000".into(),
            ];
            if cgi {
                args.push("--cgi".into());
                args.push(root.join("cgi-bin").display().to_string());
                // Where a request's time goes: the `[timing]` phases, read from the status
                // JSON around each run (`phase_totals`).
                args.push("--timing".into());
                args.push("--status".into());
            }
            (weft.to_path_buf(), args)
        }
        Kind::Nginx => {
            let Some(p) = find_program("nginx") else {
                return missing(spec);
            };
            let conf = work.join("nginx.conf");
            fs::write(&conf, sub(NGINX_CONF))?;
            let prefix = work.display().to_string();
            (
                p,
                vec!["-p".into(), prefix, "-c".into(), conf.display().to_string()],
            )
        }
        Kind::Lighttpd => {
            let Some(p) = find_program("lighttpd") else {
                return missing(spec);
            };
            let conf = work.join("lighttpd.conf");
            let mut text = sub(LIGHTTPD_CONF);
            if cgi {
                text.push_str(LIGHTTPD_CGI);
                let sock = work.join(PHP_SOCK);
                if sock.exists() {
                    text.push_str(&LIGHTTPD_FASTCGI.replace("SOCK", &sock.display().to_string()));
                }
            }
            fs::write(&conf, text)?;
            (
                p,
                vec!["-D".into(), "-f".into(), conf.display().to_string()],
            )
        }
        Kind::Apache => {
            let Some(p) = find_program("apache2") else {
                return missing(spec);
            };
            let conf = work.join("apache2.conf");
            let root_user = weft_sys::user::euid() == 0;
            let ug = if root_user {
                "User nobody\nGroup nogroup"
            } else {
                ""
            };
            fs::write(&conf, sub(APACHE_CONF).replace("USER_GROUP", ug))?;
            (
                p,
                vec![
                    "-f".into(),
                    conf.display().to_string(),
                    "-DFOREGROUND".into(),
                ],
            )
        }
    };

    let log = fs::File::create(work.join(format!("{}.log", spec.name)))?;
    let child = match server_command(&program, &args, log, pin)?.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "# {}: cannot start {}: {e}; skipped",
                spec.name,
                program.display()
            );
            return Ok(None);
        }
    };
    let mut server = Server {
        name: spec.name.clone(),
        host: bind,
        port,
        pid: child.id(),
        child,
    };
    let listening = wait_listening(&mut server, |status| {
        eprintln!(
            "# {}: exited ({status}) before listening; see {}; skipped",
            spec.name,
            work.join(format!("{}.log", spec.name)).display()
        );
    });
    Ok(listening.then_some(server))
}

/// A command that runs `program ARGS` as a server under test: on core 0 through `taskset`
/// where `pin` (and taskset is installed), in a process group of its own (so that stopping it
/// reaches every worker it forks), its output to `log`.
pub(crate) fn server_command(
    program: &Path,
    args: &[String],
    log: fs::File,
    pin: bool,
) -> io::Result<Command> {
    let mut cmd = match find_program("taskset").filter(|_| pin) {
        Some(t) => {
            let mut c = Command::new(t);
            c.arg("-c").arg("0").arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.process_group(0);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    Ok(cmd)
}

/// Waits up to 10 s for `server` to listen: true once it does. False where it exits first
/// (`exited` says so, with its status) or is not listening by then (said here).
pub(crate) fn wait_listening(server: &mut Server, exited: impl FnOnce(ExitStatus)) -> bool {
    let addr = SocketAddr::from((server.host, server.port));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            exited(status);
            return false;
        }
        if Instant::now() > deadline {
            eprintln!("# {}: not listening after 10 s; skipped", server.name);
            return false;
        }
        weft_fiber::sleep(Duration::from_millis(50));
    }
}

/// Says where the report went, and that a quick run's is a smoke check.
pub(crate) fn say_wrote(report: &Path, quick: bool) {
    eprintln!(
        "# wrote {}{}",
        report.display(),
        if quick {
            " (a quick run: a smoke check, not a measurement)"
        } else {
            ""
        }
    );
}

fn missing(spec: &Spec) -> io::Result<Option<Server>> {
    eprintln!("# {}: not installed; skipped", spec.name);
    Ok(None)
}

/// Servers in the order of run `run`: rotated by one each run, so that no server always
/// comes first (or right after the same neighbour's load).
pub fn rotation<T: Clone>(servers: &[T], run: usize) -> Vec<T> {
    let mut v = servers.to_vec();
    if !v.is_empty() {
        let k = run % v.len();
        v.rotate_left(k);
    }
    v
}

/// Everything an experiment needs once its servers are up.
struct Bench {
    servers: Vec<Server>,
    /// php-fpm, the cgi experiment's FastCGI application, where it is installed.
    app: Option<Server>,
    /// The cgi experiment's upstream behind weft's reverse proxy (`/proxy/echo`).
    upstream: Option<Server>,
    runs: usize,
    quick: bool,
    dir: PathBuf,
    root: PathBuf,
    machine: String,
}

/// Runs the experiment named in `a`.
pub fn run(a: ExperimentArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.replot {
        for f in charts::replot(&out_dir(&a))? {
            println!("wrote {}", f.display());
        }
        return Ok(());
    }
    if a.name == "h2" {
        if a.model.is_some() || a.rate.is_some() {
            return Err(
                BadInput("--model and --rate belong to the cluster experiment".into()).into(),
            );
        }
        return h2::run(a);
    }
    if h2::flags_given(&a) {
        return Err(BadInput(
            "--over, --path, --duration, --warm-up, --models, --conns and --streams belong to \
             the h2 experiment"
                .into(),
        )
        .into());
    }
    if a.name == "cluster" {
        return crate::cluster::run(&a);
    }
    if a.model.is_some() || a.rate.is_some() {
        return Err(BadInput("--model and --rate belong to the cluster experiment".into()).into());
    }
    if a.name == "tls" {
        return tls::run(a);
    }
    let (models, both_caches): (&[&'static str], bool) = match a.name.as_str() {
        "threads-cache" => (&["process", "thread", "fiber", "pipeline"], true),
        "fibers" => (&["fiber", "thread", "process", "pipeline"], false),
        "specweb" => (&["fiber", "thread", "pipeline", "process"], false),
        "cgi" => (&["fiber", "thread", "process", "pipeline"], false),
        other => {
            return Err(BadInput(format!(
                "unknown experiment {other:?} (threads-cache, fibers, specweb, cgi, tls, h2, \
                 cluster)"
            ))
            .into())
        }
    };
    // Before anything is started or written: a quick run never replaces a full one's results.
    let dir = out_dir(&a);
    check_overwrite(&dir, a.quick)?;
    let weft = built_weft(&a)?;
    let root = fs::canonicalize(&a.root)
        .or_else(|_| fs::create_dir_all(&a.root).and_then(|()| fs::canonicalize(&a.root)))?;
    let status = Command::new(&weft).arg("fileset").arg(&root).output()?;
    if !status.status.success() {
        return Err(io::Error::other(format!(
            "weft fileset: {}",
            String::from_utf8_lossy(&status.stderr)
        ))
        .into());
    }
    if a.name == "cgi" {
        write_echo_script(&root)?;
        write_php_echo(&root)?;
    }
    let link = match &a.link {
        Some(rate) => crate::link::Link::shaped(rate)?,
        None => None,
    };
    if a.link.is_some() && link.is_none() {
        return Err(io::Error::other("the shaped link could not be set up (see above)").into());
    }
    let bind = if link.is_some() {
        crate::link::SERVER_ADDR
    } else {
        std::net::Ipv4Addr::LOCALHOST
    };
    let work = std::env::temp_dir().join(format!("weft-experiment-{}", std::process::id()));
    fs::create_dir_all(&work)?;
    // Counted before pinning: afterwards this process sees only its own core.
    let ncores = cores();
    let pin = ncores >= 2;
    if pin {
        crate::cluster::pin_self(&[1])?;
    } else {
        eprintln!("# one core: server and client share it (no pinning)");
    }
    let app = if a.name == "cgi" {
        start_php_fpm(&work, pin)?
    } else {
        None
    };
    let upstream = if a.name == "cgi" {
        start_upstream(&weft, &root, &work, pin)?
    } else {
        None
    };
    let mut specs = candidates(models, both_caches);
    if a.name == "specweb" {
        // The pipeline paper's Table 4: the same pipeline with its controller off.
        let at = specs
            .iter()
            .position(|s| s.name == "pipeline")
            .map_or(0, |i| i + 1);
        specs.insert(
            at,
            Spec {
                name: "pipeline-off".into(),
                kind: Kind::Weft {
                    model: "pipeline",
                    cache: true,
                    config: "[pipeline]\ncontroller = false\n",
                },
            },
        );
        // The controller's allocation over time: the status JSON's history.
        for s in specs.iter_mut().filter(|s| s.name == "pipeline") {
            if let Kind::Weft { config, .. } = &mut s.kind {
                *config = "[status]\nenabled = true\n";
            }
        }
    }
    if a.name == "threads-cache" {
        // The process model as the paper's forked server sent: each child to the end, with
        // no write completion (issue 56), to show what write completion costs or saves.
        let at = specs
            .iter()
            .position(|s| s.name == "process-cache-on")
            .map_or(0, |i| i + 1);
        specs.insert(
            at,
            Spec {
                name: "process-no-completion".into(),
                kind: Kind::Weft {
                    model: "process",
                    cache: true,
                    config: "[process]\nwrite_completion = false\n",
                },
            },
        );
    }
    if !a.servers.is_empty() {
        for s in &a.servers {
            if !specs.iter().any(|c| &c.name == s) {
                eprintln!("# {s}: no such server in this experiment; ignored");
            }
        }
        specs.retain(|c| a.servers.contains(&c.name));
    }
    let mut servers = Vec::new();
    for spec in &specs {
        if let Some(s) = start(spec, &weft, &root, &work, pin, a.name == "cgi", bind)? {
            servers.push(s);
        }
    }
    if servers.is_empty() {
        return Err(io::Error::other("no server could be started").into());
    }
    eprintln!(
        "# {}: servers {}",
        a.name,
        servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let machine = format!(
        "{ncores} cores{}{}",
        if pin {
            ", server on core 0, client on core 1"
        } else {
            ""
        },
        match &link {
            Some(l) => format!(
                ", the client in its own network namespace behind a veth link shaped to {} \
                 Mbit/s both ways (tc tbf)",
                l.bps as f64 / 1e6
            ),
            None => String::new(),
        }
    );
    mark(&dir, a.quick)?;
    let mut b = Bench {
        servers,
        app,
        upstream,
        runs: a.runs.unwrap_or(if a.quick { 1 } else { 5 }).max(1),
        quick: a.quick,
        dir,
        root,
        machine,
    };
    // The client's side of the link: the load threads started from here inherit it.
    let in_link = link.as_ref().map(|l| l.enter()).transpose()?;
    let r = match a.name.as_str() {
        "threads-cache" => threads_cache(&b),
        "fibers" => fibers(&b),
        "cgi" => cgi_experiment(&b),
        _ => specweb_experiment(&b),
    };
    drop(in_link);
    b.servers.clear();
    b.app = None;
    b.upstream = None;
    drop(link);
    let _ = fs::remove_dir_all(&work);
    r?;
    say_wrote(&b.dir.join("report.md"), b.quick);
    Ok(())
}

/// Where quick runs go unless `--out` says otherwise (ignored by git).
pub const QUICK_OUT: &str = "results/quick";

/// The file in a results folder that says which kind of run wrote it: `full` or `quick`.
pub const RUN_KIND_FILE: &str = "run-kind.txt";

/// `OUT/NAME/` (`OUT/NAME-RATE/` over a shaped link), OUT defaulting to `results`, or to
/// [`QUICK_OUT`] for a quick run.
pub fn out_dir(a: &ExperimentArgs) -> PathBuf {
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(if a.quick { QUICK_OUT } else { "results" }));
    match &a.link {
        Some(rate) => out.join(format!("{}-{rate}", a.name)),
        None => out.join(&a.name),
    }
}

/// Which kind of run wrote `dir`: `Some(true)` a quick one, `Some(false)` a full one (or
/// results from before the marker existed, which were all full runs), `None` no run.
pub fn written_by_quick_run(dir: &Path) -> Option<bool> {
    match fs::read_to_string(dir.join(RUN_KIND_FILE)) {
        Ok(text) => Some(text.lines().next().map(str::trim) == Some("quick")),
        Err(_) => ["report.md", "rows.csv", "median.csv"]
            .iter()
            .any(|f| dir.join(f).exists())
            .then_some(false),
    }
}

/// Refuses a quick run where a full run's results are.
pub fn check_overwrite(dir: &Path, quick: bool) -> Result<(), BadInput> {
    if quick && written_by_quick_run(dir) == Some(false) {
        return Err(BadInput(format!(
            "{}: holds a full run's results, which a --quick run never overwrites (leave out \
             --out: quick runs go to {QUICK_OUT}/; or name another folder)",
            dir.display()
        )));
    }
    Ok(())
}

/// Creates `dir` and marks it with the kind of run now writing it.
pub fn mark(dir: &Path, quick: bool) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let kind = if quick {
        "quick\nWritten by a --quick run: one short run per point, a smoke check, not a \
         measurement.\n"
    } else {
        "full\nWritten by a full run (no --quick): the measured results.\n"
    };
    fs::write(dir.join(RUN_KIND_FILE), kind)
}

/// The servers' names, in the experiment's order: the charts' bars follow it.
fn server_names(b: &Bench) -> Vec<String> {
    b.servers.iter().map(|s| s.name.clone()).collect()
}

/// Draws `c` into the experiment's folder; returns the report's line for it.
fn chart(b: &Bench, c: &charts::Chart) -> io::Result<String> {
    charts::draw(&b.dir, c)
}

/// Each `[timing]` phase's count and total microseconds, from weft server `s`'s status JSON.
fn phase_totals(s: &Server) -> io::Result<BTreeMap<String, (f64, f64)>> {
    let v = get_json(s, "/_weft/status.json")?;
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let phases = v["phases"]
        .as_object()
        .ok_or_else(|| bad(format!("{}: status JSON has no phases (--timing)", s.name)))?;
    Ok(phases
        .iter()
        .map(|(k, p)| {
            let n = p["count"].as_f64().unwrap_or(0.0);
            (k.clone(), (n, n * p["mean_us"].as_f64().unwrap_or(0.0)))
        })
        .collect())
}

/// The phases' means over the requests between two readings, as `rows.csv`'s cells
/// `head_us,body_us,handler_us,out_us` (out: the last byte handed to the kernel less the body
/// read and the handler).
fn phase_means(
    before: &BTreeMap<String, (f64, f64)>,
    after: &BTreeMap<String, (f64, f64)>,
) -> String {
    let mean = |k: &str| {
        let (n0, t0) = before.get(k).copied().unwrap_or_default();
        let (n1, t1) = after.get(k).copied().unwrap_or_default();
        if n1 > n0 {
            (t1 - t0) / (n1 - n0)
        } else {
            0.0
        }
    };
    let (head, body, handler) = (
        mean("head").max(0.0),
        mean("body").max(0.0),
        mean("handler").max(0.0),
    );
    let out = (mean("last_byte_out") - body - handler).max(0.0);
    format!("{head:.1},{body:.1},{handler:.1},{out:.1}")
}

fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// GETs `path` from server `s` (HTTP/1.1, `Connection: close`) and reads its body as JSON.
fn get_json(s: &Server, path: &str) -> io::Result<serde_json::Value> {
    use std::io::{Read, Write};
    let mut c = TcpStream::connect((s.host, s.port))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    c.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .ok_or_else(|| bad(format!("{}: {path}: no response head", s.name)))?;
    serde_json::from_str(body).map_err(|e| bad(format!("{}: {path}: {e}", s.name)))
}

/// The pipeline's threads per stage in each second since `start_ms` (Unix ms) of a run of
/// `secs`, from its status JSON history: (seconds into the run, `accept,receive,process,send`).
fn allocation_history(s: &Server, start_ms: f64, secs: u64) -> io::Result<Vec<(f64, String)>> {
    let v = get_json(s, &format!("/_weft/status.json?history={}", secs + 3))?;
    let h = &v["history"];
    let figs = &h["listeners"][0]["model_figures"];
    let mut out = Vec::new();
    for (i, t) in h["t_ms"].as_array().into_iter().flatten().enumerate() {
        let t = t.as_f64().unwrap_or(0.0);
        if t < start_ms || t > start_ms + secs as f64 * 1e3 + 500.0 {
            continue;
        }
        let cells: Vec<String> = charts::STAGES
            .iter()
            .map(|st| {
                figs[format!("{st}_threads")][i]
                    .as_u64()
                    .unwrap_or(0)
                    .to_string()
            })
            .collect();
        out.push(((t - start_ms) / 1e3, cells.join(",")));
    }
    Ok(out)
}

/// How `b`'s charts are labelled.
fn label(b: &Bench) -> charts::Label {
    charts::Label {
        runs: b.runs,
        quick: b.quick,
    }
}

/// The servers in run `run`'s order.
fn order(b: &Bench, run: usize) -> Vec<&Server> {
    let refs: Vec<&Server> = b.servers.iter().collect();
    rotation(&refs, run)
}

fn url(s: &Server, path: &str) -> String {
    format!("http://{}:{}{path}", s.host, s.port)
}

fn quick_note(b: &Bench) -> String {
    if b.quick {
        "**Quick run (`--quick`): one short run per point, a smoke check, not a measurement.**\n\n"
            .into()
    } else {
        String::new()
    }
}

/// Writes `rows.csv` and returns it as read back: the charts are drawn from what it holds.
fn write_rows(b: &Bench, header: &str, rows: &[String]) -> io::Result<charts::Rows> {
    let mut s = String::from(header);
    s.push('\n');
    for r in rows {
        s.push_str(r);
        s.push('\n');
    }
    fs::write(b.dir.join("rows.csv"), &s)?;
    charts::Rows::parse(&s).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))
}

/// threads-cache: groups of concurrent GETs on fresh connections.
fn threads_cache(b: &Bench) -> Result<(), Box<dyn std::error::Error>> {
    let files = ["/files/1k.bin", "/files/484k.bin", "/files/2m.bin"];
    let groups_n = if b.quick { 5 } else { 20 };
    let spec = RequestSpec {
        close: true,
        ..RequestSpec::default()
    };
    // Concurrent GETs per group from each client: the paper's 12, and the curve around it.
    let concs: &[usize] = if b.quick {
        &[3, 12]
    } else {
        &[1, 3, 6, 12, 24]
    };
    let mut rows = Vec::new();
    // (server, file) -> avg_ms of each run at the paper's 12
    let mut avg: BTreeMap<(String, &str), Vec<f64>> = BTreeMap::new();
    for file in files {
        for &conc in concs {
            for run in 0..b.runs {
                for s in order(b, run) {
                    let cfg = GroupsConfig {
                        target: Target::new(&url(s, file), &spec)?,
                        clients: 2,
                        groups: groups_n,
                        concurrency: conc,
                        threads: 1,
                        timeout: Duration::from_secs(30),
                    };
                    let r = groups::run(&cfg)?;
                    let rec = &r.recorder;
                    let lat = rec.latency_us();
                    let avg_ms = lat.mean / 1e3;
                    let errors = rec.errors.total();
                    rows.push(format!(
                        "{},{file},{conc},{},{avg_ms:.3},{:.3},{errors}",
                        s.name,
                        run + 1,
                        lat.p99 / 1e3
                    ));
                    eprintln!(
                        "  {} {file} x{conc} run {}: {avg_ms:.3} ms, {errors} errors",
                        s.name,
                        run + 1
                    );
                    if conc == 12 {
                        avg.entry((s.name.clone(), file)).or_default().push(avg_ms);
                    }
                }
            }
        }
    }
    let table = write_rows(b, "server,file,concurrency,run,avg_ms,p99_ms,errors", &rows)?;
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    let med = |s: &str, f: &str| median(avg.get(&(s.to_string(), f)).map_or(&[][..], |v| v));
    let mut csv = String::from("server,file,median_avg_ms\n");
    let mut md = format!(
        "# threads-cache: threaded vs forked, and the response cache\n\n{}\
         Paper: \"Threaded vs Process-driven HTTP server\" (no author named). Two clients, \
         each {groups_n} sequential \
         groups of 12 concurrent GETs on fresh connections; average completion time of a \
         request (connect to last byte), median of {} run(s). Machine: {}. weft models run \
         with `--threads 1`. The table is the paper's 12; the figures draw each server's curve \
         over {} concurrent GETs per group (`rows.csv`'s `concurrency`).\n\n\
         The paper: the threaded server was slightly faster than the forked one, with the \
         greatest difference for the small (1 KB) file (its figure 1.2 gives no table of \
         numbers); its cached server against the uncached one is figure 2.1.\n\n\
         | server | {} |\n|---|{}\n",
        quick_note(b),
        b.runs,
        b.machine,
        concs
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        files.join(" | "),
        "---|".repeat(files.len())
    );
    for s in &names {
        let cells: Vec<String> = files.iter().map(|f| format!("{:.3}", med(s, f))).collect();
        for (f, c) in files.iter().zip(&cells) {
            writeln!(csv, "{s},{f},{c}")?;
        }
        writeln!(md, "| {s} | {} |", cells.join(" | "))?;
    }
    md.push_str("\nAverage completion time in ms (lower is better).\n\n");
    if names.contains(&"process-cache-on") && names.contains(&"thread-cache-on") {
        md.push_str("Forked over threaded (process / thread, cache on; > 1: threaded faster):\n\n");
        for f in files {
            let r = med("process-cache-on", f) / med("thread-cache-on", f);
            writeln!(md, "- {f}: {r:.2}")?;
        }
        md.push('\n');
    }
    let servers = server_names(b);
    for f in files {
        md.push_str(&chart(
            b,
            &charts::threads_cache(&table, &servers, f, label(b))?,
        )?);
    }
    fs::write(b.dir.join("median.csv"), csv)?;
    fs::write(b.dir.join("report.md"), md)?;
    Ok(())
}

/// fibers: ab-like closed loop, a connection per request.
fn fibers(b: &Bench) -> Result<(), Box<dyn std::error::Error>> {
    let paths = ["/echo", "/haewelmann.html"];
    let concs = [1usize, 10, 50];
    let secs = if b.quick { 1 } else { 5 };
    let spec = RequestSpec {
        close: true,
        ..RequestSpec::default()
    };
    let hz = procstat::ticks_per_second();
    let mut rows = Vec::new();
    let mut rps: BTreeMap<(String, &str, usize), Vec<f64>> = BTreeMap::new();
    let mut cpu: BTreeMap<(String, &str, usize), Vec<f64>> = BTreeMap::new();
    let mut util: BTreeMap<(String, &str, usize), Vec<f64>> = BTreeMap::new();
    let peer_has = |s: &Server, path: &str| {
        // Only nginx among the peers has an echo (configured); the others serve files only.
        path != "/echo" || !(s.name == "lighttpd" || s.name == "apache2")
    };
    for path in paths {
        for &c in &concs {
            for run in 0..b.runs {
                for s in order(b, run) {
                    if !peer_has(s, path) {
                        continue;
                    }
                    let cfg = LoadConfig {
                        targets: vec![Target::new(&url(s, path), &spec)?],
                        connections: c,
                        threads: 1,
                        stop: Stop::Duration(Duration::from_secs(secs)),
                        rate: None,
                        keepalive: false,
                        timeout: Duration::from_secs(10),
                        progress: false,
                    };
                    let before = procstat::sample(s.pid)?;
                    let r = load::run(&cfg)?;
                    let after = procstat::sample(s.pid)?;
                    let n = r.recorder.requests;
                    let sc = procstat::ServerCpu::between(s.pid, before, after, n, hz);
                    let x = n as f64 / r.elapsed.as_secs_f64().max(1e-9);
                    let errors = r.recorder.errors.total();
                    rows.push(format!(
                        "{},{path},{c},{},{x:.1},{:.2},{:.1},{errors}",
                        s.name,
                        run + 1,
                        sc.cpu_us_per_request,
                        sc.utilization_pct
                    ));
                    eprintln!(
                        "  {} {path} c={c} run {}: {x:.0} req/s, {:.1} us CPU/req, {errors} errors",
                        s.name,
                        run + 1,
                        sc.cpu_us_per_request
                    );
                    let k = (s.name.clone(), path, c);
                    rps.entry(k.clone()).or_default().push(x);
                    cpu.entry(k.clone())
                        .or_default()
                        .push(sc.cpu_us_per_request);
                    util.entry(k).or_default().push(sc.utilization_pct);
                }
            }
        }
    }
    let table = write_rows(
        b,
        "server,path,conns,run,rps,cpu_us_per_req,server_cpu_pct,errors",
        &rows,
    )?;
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    let get = |m: &BTreeMap<(String, &str, usize), Vec<f64>>, s: &str, p: &str, c: usize| {
        median(m.get(&(s.to_string(), p, c)).map_or(&[][..], |v| v))
    };
    let mut csv =
        String::from("server,path,conns,median_rps,median_cpu_us_per_req,median_cpu_pct\n");
    let mut md = format!(
        "# fibers: requests/s and server CPU, like the paper's ab runs\n\n{}\
         Paper: Keller and Monien, \"Improving Http-Server Performance by Adapted \
         Multithreading\" (ab, a connection per request). Here \
         weft-bench's closed loop with `Connection: close` on every request, for {secs} s per \
         run, median of {} run(s). Machine: {}. weft models run with `--threads 1`; lighttpd \
         and apache2 have no `/echo` (n/a).\n\n\
         The paper (local client, concurrency at least 5, 100% CPU): its fiber server had 26% \
         more throughput than the thread server on the 10,541-byte page and 50% more on the \
         4-byte echo; over a 10 Mbit/s link, which both saturated, the fiber server used about \
         40% of the CPU and the thread server about 80%. Each cell: requests/s (server CPU \
         microseconds per request, server CPU utilization of one core).\n\n",
        quick_note(b),
        b.runs,
        b.machine
    );
    let (servers, conns) = (
        server_names(b),
        concs.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
    );
    for path in paths {
        writeln!(
            md,
            "## {path}\n\n| server | {} |\n|---|{}",
            concs
                .iter()
                .map(|c| format!("c={c} req/s (us CPU/req, CPU)"))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(concs.len())
        )?;
        for s in &names {
            let cells: Vec<String> = concs
                .iter()
                .map(|&c| {
                    let (x, u) = (get(&rps, s, path, c), get(&cpu, s, path, c));
                    let pct = get(&util, s, path, c);
                    if x.is_nan() {
                        "n/a".into()
                    } else {
                        let _ = writeln!(csv, "{s},{path},{c},{x:.1},{u:.2},{pct:.1}");
                        format!("{x:.0} ({u:.1}, {pct:.0}%)")
                    }
                })
                .collect();
            writeln!(md, "| {s} | {} |", cells.join(" | "))?;
        }
        if names.contains(&"fiber") && names.contains(&"thread") {
            let paper = if path == "/echo" { 50 } else { 26 };
            let gains: Vec<String> = concs
                .iter()
                .map(|&c| {
                    let g = get(&rps, "fiber", path, c) / get(&rps, "thread", path, c) - 1.0;
                    format!("c={c}: {:+.0}%", g * 100.0)
                })
                .collect();
            writeln!(
                md,
                "\nfiber over thread: {} (paper: +{paper}% at concurrency >= 5)\n",
                gains.join(", ")
            )?;
        }
        md.push_str(&chart(
            b,
            &charts::fibers(
                &table,
                &servers,
                path,
                &conns,
                b.machine.contains("shaped to"),
                label(b),
            )?,
        )?);
        md.push('\n');
    }
    fs::write(b.dir.join("median.csv"), csv)?;
    fs::write(b.dir.join("report.md"), md)?;
    Ok(())
}

/// The CGI paper's Echo: its request body back, as a shell script `ROOT/cgi-bin/Echo2`.
fn write_echo_script(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("cgi-bin");
    fs::create_dir_all(&dir)?;
    let p = dir.join("Echo2");
    fs::write(
        &p,
        "#!/bin/sh\n# The CGI paper's Echo: the request body back.\n\
         printf 'Content-Type: application/x-www-form-urlencoded\\r\\n\\r\\n'\n\
         exec head -c \"${CONTENT_LENGTH:-0}\"\n",
    )?;
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755))
}

/// The CGI paper's Echo in PHP, for php-fpm: `ROOT/fcgi/echo.php`.
fn write_php_echo(root: &Path) -> io::Result<()> {
    let dir = root.join("fcgi");
    fs::create_dir_all(&dir)?;
    fs::write(
        dir.join("echo.php"),
        "<?php\n// The CGI paper's Echo: the request body back.\n\
         header('Content-Type: application/x-www-form-urlencoded');\n\
         echo file_get_contents('php://input');\n",
    )
}

/// php-fpm's socket in the experiment's work folder.
const PHP_SOCK: &str = "php.sock";
/// The file in the work folder that holds the cgi experiment's upstream's port.
const UPSTREAM_PORT: &str = "upstream.port";

/// Starts the upstream of the cgi experiment's proxy way: weft, fiber model, one thread, on
/// the servers' core, echoing `/proxy/echo`; writes its port to `WORK/upstream.port` for the
/// weft servers' `[[proxy]]`. `Ok(None)` (said) when it does not come up.
fn start_upstream(weft: &Path, root: &Path, work: &Path, pin: bool) -> io::Result<Option<Server>> {
    let port = free_port()?;
    let args: Vec<String> = [
        "serve",
        "--root",
        &root.display().to_string(),
        "--threads",
        "1",
        "--listen",
        &format!("127.0.0.1:{port}=fiber"),
        "--echo",
        "/proxy/echo",
        "--allow-root",
        "--access-log",
        "off",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let log = fs::File::create(work.join("upstream.log"))?;
    let child = server_command(weft, &args, log, pin)?.spawn()?;
    let mut up = Server {
        name: "upstream".into(),
        host: std::net::Ipv4Addr::LOCALHOST,
        port,
        pid: child.id(),
        child,
    };
    if !wait_listening(&mut up, |status| {
        eprintln!("# the proxy's upstream exited ({status}); the proxy way skipped")
    }) {
        return Ok(None);
    }
    fs::write(work.join(UPSTREAM_PORT), port.to_string())?;
    Ok(Some(up))
}
/// php-fpm's workers (`pm = static`).
const PHP_WORKERS: usize = 2;

/// Starts php-fpm (pinned beside the servers) listening on `WORK/php.sock`, for the cgi
/// experiment's FastCGI way; `Ok(None)`, with a line on stderr, where it is not installed or
/// does not come up.
fn start_php_fpm(work: &Path, pin: bool) -> io::Result<Option<Server>> {
    let mut found: Vec<PathBuf> = fs::read_dir("/usr/sbin")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("php-fpm"))
        })
        .collect();
    found.sort();
    let Some(program) = found.pop() else {
        eprintln!("# php-fpm: not installed (apt-get install php-fpm); the FastCGI way skipped");
        return Ok(None);
    };
    let sock = work.join(PHP_SOCK);
    let conf = work.join("php-fpm.conf");
    fs::write(
        &conf,
        format!(
            "[global]\nerror_log = {}\ndaemonize = no\n[echo]\nlisten = {}\npm = static\n\
             pm.max_children = {PHP_WORKERS}\n",
            work.join("php-fpm.log").display(),
            sock.display()
        ),
    )?;
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-y".into(),
        conf.display().to_string(),
        "-F".into(),
    ];
    if weft_sys::user::euid() == 0 {
        args.push("-R".into());
    }
    let log = fs::File::create(work.join("php-fpm.out"))?;
    let child = server_command(&program, &args, log, pin)?.spawn()?;
    let mut app = Server {
        name: "php-fpm".into(),
        host: std::net::Ipv4Addr::LOCALHOST,
        port: 0,
        pid: child.id(),
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        if matches!(app.child.try_wait(), Ok(Some(_))) || Instant::now() >= deadline {
            eprintln!(
                "# php-fpm did not start (see {}); the FastCGI way skipped",
                work.join("php-fpm.log").display()
            );
            return Ok(None);
        }
        weft_fiber::sleep(Duration::from_millis(20));
    }
    Ok(Some(app))
}

/// The 542-byte urlencoded body of the CGI paper's request (its content is not given: a form
/// of the same size and encoding, as weft's own test of it uses).
pub fn paper_body() -> Vec<u8> {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 500 {
        s.push_str(&format!("field{i}=value+number+{i}%2C+url%2Dencoded&"));
        i += 1;
    }
    s.push_str("pad=");
    while s.len() < 542 {
        s.push('x');
    }
    s.truncate(542);
    s.into_bytes()
}

/// The CGI paper's request (§1.2.3) for `path`: HTTP/1.0, its nine header lines, the body.
pub fn paper_request(path: &str) -> Vec<u8> {
    let body = paper_body();
    let mut r = format!(
        "POST {path} HTTP/1.0\r\n\
         Accept: application/x-corba\r\n\
         Accept: */*; q=0.300\r\n\
         Accept: application/octet-stream; q=0.100\r\n\
         Accept: text/plain\r\n\
         Accept: text/html\r\n\
         From: nje@socrates.ansa.co.uk\r\n\
         User-Agent: Echo client/0 libwww/2.17\r\n\
         Content-length: {}\r\n\
         Content-type: application/x-www-form-urlencoded\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(&body);
    r
}

/// cgi: the paper's POST, one at a time, to the echo script and to weft's in-process echo.
fn cgi_experiment(b: &Bench) -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = if b.quick { 100 } else { 1000 };
    let hz = procstat::ticks_per_second();
    let mut rows = Vec::new();
    let mut mean: BTreeMap<(String, &str), Vec<f64>> = BTreeMap::new();
    let mut cpu: BTreeMap<(String, &str), Vec<f64>> = BTreeMap::new();
    let mut keys: Vec<(String, &str)> = Vec::new();
    for run in 0..b.runs {
        for s in order(b, run) {
            let weft = !(s.name == "lighttpd" || s.name == "nginx" || s.name == "apache2");
            let mut paths = vec!["/cgi-bin/Echo2"];
            if weft {
                paths.push("/echo");
            }
            if b.app.is_some() {
                paths.push("/fcgi/echo.php");
            }
            if weft && b.upstream.is_some() {
                paths.push("/proxy/echo");
            }
            for path in paths {
                let target = Target {
                    url: url(s, path),
                    addr: SocketAddr::from((s.host, s.port)),
                    request: paper_request(path).into(),
                    head: false,
                    tls: None,
                };
                let cfg = LoadConfig {
                    targets: vec![target],
                    connections: 1,
                    threads: 1,
                    stop: Stop::Requests(n),
                    rate: None,
                    keepalive: false,
                    timeout: Duration::from_secs(10),
                    progress: false,
                };
                // FastCGI's CPU is the server's and php-fpm's, the proxy's the server's and its
                // upstream's, as CGI's is the server's and its scripts' (children of the server).
                let app = if path.starts_with("/fcgi/") {
                    b.app.as_ref()
                } else if path.starts_with("/proxy/") {
                    b.upstream.as_ref()
                } else {
                    None
                };
                let before = procstat::sample(s.pid)?;
                let app_before = app.map(|a| procstat::sample(a.pid)).transpose()?;
                let phases_before = weft.then(|| phase_totals(s)).transpose()?;
                let r = load::run(&cfg)?;
                let after = procstat::sample(s.pid)?;
                let phases = match phases_before {
                    Some(pb) => phase_means(&pb, &phase_totals(s)?),
                    None => ",,,".to_string(),
                };
                let rec = &r.recorder;
                let mut sc = procstat::ServerCpu::between(s.pid, before, after, rec.requests, hz);
                if let (Some(a), Some(ab)) = (app, app_before) {
                    let aa = procstat::sample(a.pid)?;
                    let ac = procstat::ServerCpu::between(a.pid, ab, aa, rec.requests, hz);
                    sc.cpu_us_per_request += ac.cpu_us_per_request;
                }
                let lat = rec.latency_us();
                let errors = rec.errors.total();
                // Every answer must be the 542 bytes sent.
                let echoed = rec.body_bytes == rec.requests * paper_body().len() as u64;
                rows.push(format!(
                    "{},{path},{},{:.3},{:.3},{:.1},{:.1},{errors},{echoed},{phases}",
                    s.name,
                    run + 1,
                    lat.mean / 1e3,
                    lat.p99 / 1e3,
                    rec.requests as f64 / r.elapsed.as_secs_f64().max(1e-9),
                    sc.cpu_us_per_request
                ));
                eprintln!(
                    "  {} {path} run {}: {:.3} ms mean, {:.0} us CPU/req, {errors} errors{}",
                    s.name,
                    run + 1,
                    lat.mean / 1e3,
                    sc.cpu_us_per_request,
                    if echoed { "" } else { ", BODY NOT ECHOED" }
                );
                let k = (s.name.clone(), path);
                if !keys.contains(&k) {
                    keys.push(k.clone());
                }
                mean.entry(k.clone()).or_default().push(lat.mean / 1e3);
                cpu.entry(k).or_default().push(sc.cpu_us_per_request);
            }
        }
    }
    let table = write_rows(
        b,
        "server,path,run,mean_ms,p99_ms,rps,cpu_us_per_req,errors,echoed,\
         head_us,body_us,handler_us,out_us",
        &rows,
    )?;
    keys.sort();
    let get = |m: &BTreeMap<(String, &str), Vec<f64>>, k: &(String, &str)| {
        median(m.get(k).map_or(&[][..], |v| v))
    };
    let mut csv = String::from("server,path,median_mean_ms,median_cpu_us_per_req\n");
    let mut md = format!(
        "# cgi: the CGI paper's POST\n\n{}\
         Paper: Nigel Edwards, \"Performance of HTTP and CGI\" (ANSA APM.1506.01, 1995). \
         Its request (HTTP/1.0, nine header lines, \
         542 bytes of form data; sent here in one write, where libwww wrote the head and the \
         body separately) {n} times one after the other, a new connection each, to an echo \
         CGI script (`/cgi-bin/Echo2`: a shell script, `head -c $CONTENT_LENGTH`), on \
         weft to the in-process `/echo` (the paper's alternative: the function inside the \
         server) and, where php-fpm is installed, on weft and lighttpd to the same echo in PHP \
         through FastCGI \
         (`/fcgi/echo.php`: php-fpm, {PHP_WORKERS} static workers on the server's core shared \
         by every server, so a connection per request; its CPU counted with the server's, as \
         the scripts' is for CGI), and on weft to the same in-process echo behind its reverse \
         proxy (`/proxy/echo`: `[[proxy]]` to another weft, fiber model, one thread, on the \
         server's core, over pooled keep-alive connections; its CPU counted with the server's). \
         Median of {} run(s). Machine: {}. nginx has no CGI and apache2's is not set up here: \
         both skipped.\n\n\
         The paper (CERN httpd, HP PA-RISC, 1995): 202 ms per invocation (201 ms with the \
         client on another machine), of which about 10 ms to fork, 122 ms reading the body \
         and about 7 ms in the script.\n\n\
         | server | path | mean ms | server CPU us/request |\n|---|---|---|---|\n",
        quick_note(b),
        b.runs,
        b.machine
    );
    for k in &keys {
        let (m, c) = (get(&mean, k), get(&cpu, k));
        writeln!(csv, "{},{},{m:.3},{c:.1}", k.0, k.1)?;
        writeln!(md, "| {} | {} | {m:.3} | {c:.0} |", k.0, k.1)?;
    }
    md.push('\n');
    let at = |server: &str, path: &str| mean.get(&(server.to_string(), path)).map(|v| median(v));
    if let (Some(c), Some(f), Some(e)) = (
        at("fiber", "/cgi-bin/Echo2"),
        at("fiber", "/fcgi/echo.php"),
        at("fiber", "/echo"),
    ) {
        writeln!(
            md,
            "The fourth way, the one the web adopted: a persistent application process spoken \
             to over a socket (FastCGI). On the fiber model it answers in {f:.3} ms against \
             CGI's {c:.3} ms ({:.1}x faster) and the in-process function's {e:.3} ms: the fork \
             and exec are gone, a socket round trip to another process stays. With it the \
             paper's 202 ms would have lost its fork (about 10 ms) and little else, since \
             122 ms of them went to reading the body (the client wrote it apart from the head) \
             and about 7 ms to the script's work: about 190 ms, a 5% saving on 1995's \
             machine and network, where here, with the body read at once, it is {:.0}% of the \
             time.\n",
            c / f,
            (1.0 - f / c) * 100.0
        )?;
    }
    let figure = charts::cgi(&table, &server_names(b), label(b))?;
    md.push_str(&charts::cgi_breakdown(&figure));
    md.push_str(&chart(b, &figure)?);
    fs::write(b.dir.join("median.csv"), csv)?;
    fs::write(b.dir.join("report.md"), md)?;
    Ok(())
}

/// specweb: the SPECweb99-like load at a few client counts.
fn specweb_experiment(b: &Bench) -> Result<(), Box<dyn std::error::Error>> {
    let (clients, secs): (&[usize], u64) = if b.quick {
        (&[20], 5)
    } else {
        (&[300, 600, 1000], 10)
    };
    let max = clients.iter().copied().max().unwrap_or(1);
    let set = b.root.join("specweb");
    eprintln!(
        "# writing the file set for {max} connections under {}",
        set.display()
    );
    let dirs = specweb::write_fileset(&set, max)?;
    let mut rows = Vec::new();
    let mut alloc = Vec::new();
    let mut conf: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    let mut resp: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    let mut ops: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    let mut wbw: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    for &c in clients {
        for run in 0..b.runs {
            for s in order(b, run) {
                let mut cfg =
                    SpecwebConfig::new(&url(s, "/specweb/"), c, Duration::from_secs(secs))?;
                cfg.dirs = dirs;
                cfg.seed = run as u64 + 1;
                let start_ms = unix_ms();
                let r = specweb::run(&cfg)?;
                if s.name == "pipeline" {
                    for (t, threads) in allocation_history(s, start_ms, secs)? {
                        alloc.push(format!("{c},{},{t:.1},{threads}", run + 1));
                    }
                }
                let errors = r.errors.total();
                rows.push(format!(
                    "{},{c},{},{:.1},{:.3},{:.1},{:.1},{},{}",
                    s.name,
                    run + 1,
                    r.conforming_pct,
                    r.mean_response_ms,
                    r.ops_per_s,
                    r.weighted_kbit_per_s,
                    r.connections,
                    errors
                ));
                eprintln!(
                    "  {} c={c} run {}: {:.1}% conforming, {:.2} ms, {:.0} ops/s, {errors} errors",
                    s.name,
                    run + 1,
                    r.conforming_pct,
                    r.mean_response_ms,
                    r.ops_per_s
                );
                let k = (s.name.clone(), c);
                conf.entry(k.clone()).or_default().push(r.conforming_pct);
                resp.entry(k.clone()).or_default().push(r.mean_response_ms);
                ops.entry(k.clone()).or_default().push(r.ops_per_s);
                wbw.entry(k).or_default().push(r.weighted_kbit_per_s);
            }
        }
    }
    let table = write_rows(
        b,
        "server,clients,run,conforming_pct,mean_response_ms,ops_per_s,weighted_kbit_per_s,connections,errors",
        &rows,
    )?;
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    let get = |m: &BTreeMap<(String, usize), Vec<f64>>, s: &str, c: usize| {
        median(m.get(&(s.to_string(), c)).map_or(&[][..], |v| v))
    };
    let mut csv = String::from(
        "server,clients,conforming_pct,mean_response_ms,ops_per_s,weighted_kbit_per_s\n",
    );
    let mut md = format!(
        "# specweb: SPECweb99-like static load\n\n{}\
         Paper: S.-S. Li et al., open KETA, a pipeline multi-thread kernel web server with \
         dynamic thread allocation (SPECweb99 at 300/600/1000 connections). \
         Here the static part only: {dirs} directories, paced 400 kbit/s connections of 5 \
         requests, {secs} s per run, median of {} run(s). Machine: {}.\n\n\
         The paper (two 2.0 GHz Xeons, 1 Gbit/s; mean response ms / conforming of all / ops/s): \
         at 300 connections Apache (Linux) 382.2 ms, 56 of 300, 765 ops/s; Tux 320.4 ms, 300 \
         of 300, 907; open KETA 307.0 ms, 300 of 300, 954. At 600: Apache 758.2 ms, 0 of 600, \
         769; Tux 456.1, 600, 1296; open KETA 352.4, 600, 1702. At 1000: Apache 1247.2 ms, 0, \
         750; Tux 791.1, 678, 1244; open KETA 437.7, 35, 2285. Its response times include \
         the real network; ours are on loopback, so only conformance and the ranking compare.\n\n\
         | server | clients | conforming % | mean response ms | ops/s | weighted kbit/s |\n\
         |---|---|---|---|---|---|\n",
        quick_note(b),
        b.runs,
        b.machine
    );
    for s in &names {
        for &c in clients {
            let (x, y, z) = (get(&conf, s, c), get(&resp, s, c), get(&ops, s, c));
            let w = get(&wbw, s, c);
            writeln!(csv, "{s},{c},{x:.1},{y:.3},{z:.1},{w:.1}")?;
            writeln!(md, "| {s} | {c} | {x:.1} | {y:.2} | {z:.0} | {w:.0} |")?;
        }
    }
    let servers = server_names(b);
    md.push('\n');
    md.push_str(&chart(b, &charts::specweb(&table, &servers, label(b))?)?);
    if !alloc.is_empty() {
        let mut text = String::from("clients,run,t_s,accept,receive,process,send\n");
        for line in &alloc {
            text.push_str(line);
            text.push('\n');
        }
        fs::write(b.dir.join("allocation.csv"), &text)?;
        let a = charts::Rows::parse(&text).map_err(|e| io::Error::other(e.0))?;
        md.push_str(
            "\nThe controller's allocation (the pipeline, controller on: its threads per stage \
             each second of run 1, from its status JSON history; `allocation.csv` has every \
             run)",
        );
        let distinct: std::collections::BTreeSet<&str> = alloc
            .iter()
            .filter_map(|l| l.splitn(4, ',').nth(3))
            .collect();
        if let [only] = distinct.into_iter().collect::<Vec<_>>()[..] {
            writeln!(
                md,
                ". It kept one allocation throughout, accept, receive, process, send = {only}: \
                 this paced load needs a fraction of the server's core, so no stage's queue \
                 grew for the controller to answer (under a saturating load it moves threads: \
                 `scripts/paper-runs/pipeline_step.py` draws that)."
            )?;
        } else {
            md.push_str(".\n");
        }
        md.push('\n');
        md.push_str(&chart(b, &charts::allocation(&a, label(b))?)?);
    }
    fs::write(b.dir.join("median.csv"), csv)?;
    fs::write(b.dir.join("report.md"), md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> ExperimentArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["weft-bench", "experiment"].iter().chain(line))
            .expect("parses");
        match cli.command {
            crate::cli::Command::Experiment(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quick_runs_go_to_their_own_folder_unless_told() {
        let dir = |line: &[&str]| out_dir(&args(line));
        assert_eq!(dir(&["fibers"]), Path::new("results/fibers"));
        assert_eq!(
            dir(&["fibers", "--quick"]),
            Path::new("results/quick/fibers")
        );
        assert_eq!(
            dir(&["fibers", "--quick", "--link", "10mbit"]),
            Path::new("results/quick/fibers-10mbit")
        );
        assert_eq!(
            dir(&["cgi", "--quick", "--out", "/tmp/x"]),
            Path::new("/tmp/x/cgi")
        );
        // .gitignore keeps quick runs out of git.
        let ignore = include_str!("../../../.gitignore");
        assert!(
            ignore.lines().any(|l| l.trim() == format!("/{QUICK_OUT}/")),
            "{ignore}"
        );
    }

    #[test]
    fn the_committed_results_are_full_runs_a_quick_run_refuses() {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        let mut n = 0;
        for e in fs::read_dir(&results).expect("results/") {
            let dir = e.unwrap().path();
            if dir.file_name() == Some("quick".as_ref()) || !dir.is_dir() {
                continue;
            }
            n += 1;
            assert_eq!(written_by_quick_run(&dir), Some(false), "{}", dir.display());
            let err = check_overwrite(&dir, true).unwrap_err().to_string();
            assert!(err.contains("holds a full run's results"), "{err}");
            check_overwrite(&dir, false).expect("a full run may replace a full run");
        }
        assert!(n >= 4, "{n} result folders");
    }

    #[test]
    fn a_quick_runs_report_and_charts_say_it_is_a_smoke_check() {
        let dir = std::env::temp_dir().join(format!("weft-bench-chart-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut b = Bench {
            app: None,
            upstream: None,
            servers: Vec::new(),
            runs: 1,
            quick: true,
            dir: dir.clone(),
            root: dir.clone(),
            machine: String::new(),
        };
        let rows = charts::Rows::parse(
            "server,path,conns,run,rps,cpu_us_per_req,server_cpu_pct,errors\n\
             fiber,/x,1,1,1,1,1,0\n",
        )
        .unwrap();
        for quick in [true, false] {
            b.quick = quick;
            let c = charts::fibers(
                &rows,
                &["fiber".into()],
                "/x",
                &["1".into()],
                false,
                label(&b),
            )
            .unwrap();
            chart(&b, &c).unwrap();
            let svg = fs::read_to_string(dir.join("x.svg")).unwrap();
            assert_eq!(svg.contains("smoke check"), quick, "{svg}");
            assert_eq!(quick_note(&b).contains("smoke check"), quick);
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_marker_says_which_run_wrote_a_folder() {
        let dir = std::env::temp_dir().join(format!("weft-bench-marker-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // Nothing there yet: either kind may write.
        assert_eq!(written_by_quick_run(&dir), None);
        check_overwrite(&dir, true).unwrap();
        mark(&dir, true).unwrap();
        assert_eq!(written_by_quick_run(&dir), Some(true));
        // A quick run may replace a quick run, and a full run either.
        check_overwrite(&dir, true).unwrap();
        check_overwrite(&dir, false).unwrap();
        mark(&dir, false).unwrap();
        assert_eq!(written_by_quick_run(&dir), Some(false));
        assert!(check_overwrite(&dir, true).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rotations() {
        let v = [1, 2, 3];
        assert_eq!(rotation(&v, 0), [1, 2, 3]);
        assert_eq!(rotation(&v, 1), [2, 3, 1]);
        assert_eq!(rotation(&v, 4), [2, 3, 1]);
        assert!(rotation::<u8>(&[], 3).is_empty());
    }

    #[test]
    fn the_cgi_papers_request() {
        let body = paper_body();
        assert_eq!(body.len(), 542);
        assert!(body.iter().all(|b| b.is_ascii_graphic()));
        let r = paper_request("/cgi-bin/Echo2");
        let text = String::from_utf8(r.clone()).unwrap();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(rest.as_bytes(), &body[..]);
        let lines: Vec<&str> = head.split("\r\n").collect();
        assert_eq!(lines[0], "POST /cgi-bin/Echo2 HTTP/1.0");
        assert_eq!(
            lines.len(),
            10,
            "the request line and the paper's nine header lines"
        );
        assert!(lines.contains(&"Content-length: 542"));
    }

    #[test]
    fn server_lists() {
        let c = candidates(&["thread", "fiber"], true);
        let names: Vec<&str> = c.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "thread-cache-on",
                "thread-cache-off",
                "fiber-cache-on",
                "fiber-cache-off",
                "nginx",
                "lighttpd",
                "apache2"
            ]
        );
        assert_eq!(
            c[3].kind,
            Kind::Weft {
                model: "fiber",
                cache: false,
                config: ""
            }
        );
        assert_eq!(candidates(&["fiber"], false)[0].name, "fiber");
    }
}
