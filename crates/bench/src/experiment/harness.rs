//! What the `tls` and `h2` experiments share: weft's models and their server config, the
//! document root with weft's file set, weft started with an HTTPS listener, the servers
//! started (and stopped) around the measurement in a work folder of their own, the loop over
//! the runs of a point, and the report's files.

use super::*;

/// weft's models, in the reports' order.
pub const MODELS: [&str; 4] = ["fiber", "thread", "process", "pipeline"];

/// The servers' config: the experiments' cache on, and room for every connection on every
/// listener.
pub const CONFIG: &str = "[cache]\nenabled = true\n[limits]\nmax_connections = 20000\n";

/// The address every server listens on.
pub const BIND: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;

/// `root` made canonical (created when missing) and given weft's file set by `weft fileset`
/// where `weft` is a file.
pub fn fileset_root(root: &Path, weft: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let root = fs::canonicalize(root)
        .or_else(|_| fs::create_dir_all(root).and_then(|()| fs::canonicalize(root)))?;
    if weft.is_file() {
        let status = Command::new(weft).arg("fileset").arg(&root).output()?;
        if !status.status.success() {
            return Err(io::Error::other(format!(
                "weft fileset: {}",
                String::from_utf8_lossy(&status.stderr)
            ))
            .into());
        }
    }
    Ok(root)
}

/// `weft serve` with the config file `conf`, document root `root` and one thread: the start of
/// every weft command line; the listeners follow.
pub fn serve_args(conf: &Path, root: &Path) -> Vec<String> {
    vec![
        "serve".into(),
        "--config".into(),
        conf.display().to_string(),
        "--root".into(),
        root.display().to_string(),
        "--threads".into(),
        "1".into(),
        // Connections unbounded, as the nginx peers' `keepalive_requests 1000000`.
        "--keepalive-requests".into(),
        "1000000".into(),
    ]
}

/// weft's listeners for `model` serving HTTPS on [`BIND`]`:port` with the certificate `cert`
/// and its key.
pub fn https_args(model: &str, port: u16, (cert, key): (&Path, &Path)) -> io::Result<Vec<String>> {
    Ok(vec![
        "--https".into(),
        format!("{BIND}:{port}={model}"),
        // A plain listener of its own too, on another free port: no model falls back to the
        // default listen address, which the four would share.
        "--listen".into(),
        format!("{BIND}:{}={model}", free_port()?),
        "--tls-cert".into(),
        cert.display().to_string(),
        "--tls-key".into(),
        key.display().to_string(),
    ])
}

/// Starts `program ARGS` as the server `name` listening on [`BIND`]`:port`, its output to
/// `log_path` (see [`server_command`] for `pin`), and waits for it to listen. `Ok(None)` with
/// a line on stderr when it cannot be started or does not come up; where it exits first,
/// `exited` says so, given its status and its log.
pub fn launch(
    name: &str,
    program: &Path,
    args: &[String],
    port: u16,
    log_path: &Path,
    pin: bool,
    exited: impl FnOnce(ExitStatus, &str),
) -> io::Result<Option<Server>> {
    let log = fs::File::create(log_path)?;
    let child = match server_command(program, args, log, pin)?.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("# {name}: cannot start {}: {e}; skipped", program.display());
            return Ok(None);
        }
    };
    let mut server = Server {
        name: name.to_string(),
        host: BIND,
        port,
        pid: child.id(),
        child,
    };
    let listening = wait_listening(&mut server, |status| {
        exited(status, &fs::read_to_string(log_path).unwrap_or_default());
    });
    Ok(listening.then_some(server))
}

/// What [`Setup::run`] gives the servers' start and the measurement.
pub struct Env<'a> {
    /// The run's work folder (configs, logs), removed afterwards.
    pub work: &'a Path,
    /// Whether the servers go on core 0 (this process is on core 1).
    pub pin: bool,
    /// The experiment's certificate and key ([`tls::write_certificate`]).
    pub cert: &'a Path,
    pub key: &'a Path,
}

/// An experiment's servers and how it runs them.
pub struct Setup<'a> {
    pub a: &'a ExperimentArgs,
    /// The document root, as [`fileset_root`] returned it.
    pub root: &'a Path,
    /// The servers to start, in the report's order.
    pub names: Vec<&'a str>,
    /// Runs of each point.
    pub runs: usize,
    /// What runs on core 1 beside the servers on core 0, for the report's machine line.
    pub client: &'a str,
}

impl Setup<'_> {
    /// In a fresh work folder `weft-experiment-NAME-PID` (removed afterwards): writes the
    /// certificate, pins this process to core 1 where there are two cores or more, starts
    /// every server of `names` with `start` (those that do not come up are skipped), says
    /// which with `announce`'s line (given their names, comma-separated), marks the results'
    /// folder, runs `measure` and stops the servers; then says where the report went.
    pub fn run(
        self,
        mut start: impl FnMut(&str, &Env) -> io::Result<Option<Server>>,
        announce: impl FnOnce(&str) -> String,
        measure: impl FnOnce(&Bench, &Env) -> Result<(), Box<dyn std::error::Error>>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let a = self.a;
        let work =
            std::env::temp_dir().join(format!("weft-experiment-{}-{}", a.name, std::process::id()));
        fs::create_dir_all(&work)?;
        let r = (|| {
            let (cert, key) = tls::write_certificate(&work)?;
            let ncores = cores();
            let pin = ncores >= 2;
            if pin {
                crate::cluster::pin_self(&[1])?;
            } else {
                eprintln!("# one core: server and client share it (no pinning)");
            }
            let env = Env {
                work: &work,
                pin,
                cert: &cert,
                key: &key,
            };
            let mut servers = Vec::new();
            for name in &self.names {
                if let Some(s) = start(name, &env)? {
                    servers.push(s);
                }
            }
            if servers.is_empty() {
                return Err(io::Error::other("no server could be started").into());
            }
            let list: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
            eprintln!("{}", announce(&list.join(", ")));
            let machine = format!(
                "{ncores} cores{}",
                if pin {
                    format!(", server on core 0, {} on core 1", self.client)
                } else {
                    String::new()
                }
            );
            let dir = out_dir(a);
            mark(&dir, a.quick)?;
            let b = Bench {
                servers,
                app: None,
                upstream: None,
                runs: self.runs,
                quick: a.quick,
                dir,
                root: self.root.to_path_buf(),
                machine,
            };
            let r = measure(&b, &env);
            let report = b.dir.join("report.md");
            // The servers stop here, before the report is named.
            drop(b);
            r?;
            say_wrote(&report, a.quick);
            Ok(())
        })();
        let _ = fs::remove_dir_all(&work);
        r
    }
}

/// Every run of a point: each run's number (from 0) with the servers in that run's order
/// ([`rotation`]).
pub fn each_run(b: &Bench) -> impl Iterator<Item = (usize, &Server)> {
    (0..b.runs).flat_map(move |run| order(b, run).into_iter().map(move |s| (run, s)))
}

/// The median of a point's runs; NaN where no run measured it.
pub fn med<K: Ord>(runs: &BTreeMap<K, Vec<f64>>, key: &K) -> f64 {
    runs.get(key).map_or(f64::NAN, |v| median(v))
}

/// Writes the report's files: `median.csv` and `report.md`.
pub fn write_report(b: &Bench, median_csv: &str, report_md: &str) -> io::Result<()> {
    fs::write(b.dir.join("median.csv"), median_csv)?;
    fs::write(b.dir.join("report.md"), report_md)
}
