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

#[derive(Subcommand)]
enum Cmd {
    /// Serve a document root (default: www/ on http://127.0.0.1:8080).
    Serve(ServeArgs),
    /// Write the papers' generated test files (changes.html, files/*.bin) under DIR.
    Fileset {
        /// Document root to fill.
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file; the options below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Document root.
    #[arg(long)]
    root: Option<PathBuf>,
    /// ADDR or ADDR=MODEL (fiber, thread, process); may repeat, one model per port.
    #[arg(long = "listen", value_name = "ADDR[=MODEL]")]
    listen: Vec<Listen>,
    /// Worker threads for models with a fixed pool (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Access log: a file path, "stdout", or "off".
    #[arg(long, value_name = "PATH|off")]
    access_log: Option<AccessLogTarget>,
    /// Mount /_weft/status, /_weft/status.json and /_weft/metrics (loopback only by default).
    #[arg(long)]
    status: bool,
    /// The response cache of static files (config `[cache] enabled`, default on).
    #[arg(long, value_name = "on|off")]
    cache: Option<OnOff>,
}

/// `on` or `off`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

fn main() -> ExitCode {
    weft::log::init_error_log();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Serve(args) => serve(args),
        Cmd::Fileset { dir } => fileset::ensure(&dir)
            .map(|n| println!("wrote {n} files under {}", dir.display()))
            .map_err(|e| format!("fileset: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let mut cfg = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let default_root = args.root.is_none() && args.config.is_none();
    if let Some(root) = args.root {
        cfg.root = root;
    }
    if !args.listen.is_empty() {
        cfg.listen = args.listen;
    }
    if args.threads.is_some() {
        cfg.threads = args.threads;
    }
    if let Some(a) = args.access_log {
        cfg.access_log = a;
    }
    if args.status {
        cfg.status.enabled = true;
    }
    if let Some(c) = args.cache {
        cfg.cache.enabled = matches!(c, OnOff::On);
    }
    if cfg.static_files.enabled && !cfg.root.is_dir() {
        return Err(format!(
            "document root {} is not a directory (run from the repository, or pass --root DIR)",
            cfg.root.display()
        ));
    }
    if default_root {
        // The sample site's large files are generated, not committed.
        let n =
            fileset::ensure(&cfg.root).map_err(|e| format!("generating the sample files: {e}"))?;
        if n > 0 {
            log::info!("generated {n} sample files under {}", cfg.root.display());
        }
    }
    match weft::sys::raise_nofile_limit() {
        Ok(n) => log::debug!("open-file limit {n}"),
        Err(e) => log::warn!("cannot raise the open-file limit: {e}"),
    }
    let root = cfg.root.clone();
    let server = Server::builder()
        .config(cfg)
        .build()
        .map_err(|e| e.to_string())?;
    weft::server::shutdown_on_signals(server.shutdown_handle()).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for (addr, model) in server.local_addrs() {
        let _ = writeln!(
            out,
            "weft: serving {} on http://{addr}/ (model: {model})",
            root.display()
        );
    }
    let _ = out.flush();
    drop(out);
    server.run().map_err(|e| e.to_string())?;
    log::info!("stopped");
    Ok(())
}
