//! `weft-bench experiment cluster`: three weft instances behind HAProxy, under open-loop
//! load, through the events of a deployment's life: a drain (SIGTERM), a rolling
//! zero-downtime upgrade (SIGUSR2 of each instance in turn), a crash (SIGKILL) and restarts.
//!
//! Hosts are network namespaces ([`crate::netns`]): one per weft instance and one for the
//! client, each joined by a veth pair to a bridge in this namespace, where HAProxy runs. HAProxy
//! (`haproxy` on the PATH, the Debian package) checks each instance's health path
//! (`option httpchk`), retries idempotent requests that met a closed or refused connection
//! (`retry-on all-retryable-errors`, `option redispatch`) and sends the PROXY protocol v2 to
//! weft, which logs the real client (the client namespace's address, not HAProxy's).
//!
//! The report: requests/s and p99 over time (charts), failed requests per event, the time
//! until HAProxy stops sending to a drained or killed instance (from HAProxy's own log, time
//! stamped as it is read), what weft's access logs name as the client, and the throughput of
//! three instances against one (closed loop), with a verdict on whether the client or the
//! machine was the limit. Needs root and HAProxy; without them it says so and skips (exit 0).
//!
//! The modules, by concern: `plan` (the timeline's shape), `hosts` (namespaces and
//! addresses), `instance` (a weft instance's life), `haproxy` (its configurations and
//! process), `pin` (cores), `scaling` (three instances against one), `timeline` (the open
//! loop and the events), `openloop` (the timeline's client), `logs` (HAProxy's and weft's log
//! lines), `events` (what each event cost), `data` (the CSV files and charts) and `report`
//! (`report.md`). This one holds what a run works with ([`run`]'s checks, the hosts' setup
//! and the order of the parts).

pub(crate) mod data;
mod events;
mod haproxy;
mod hosts;
mod instance;
mod logs;
mod openloop;
mod pin;
mod plan;
mod report;
mod scaling;
mod timeline;

pub(crate) use scaling::SCALE_TARGET;

use std::error::Error;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use self::haproxy::{haproxy_config, Haproxy};
use self::hosts::{Hosts, Net};
pub(crate) use self::pin::pin_self;
use self::pin::{allowed_cpus, Layout};
use self::plan::Plan;
use crate::experiment::{self, ExperimentArgs};
use crate::load::{self, LoadConfig, Stop};
use crate::netns::{self, Netns};
use crate::target::{BadInput, RequestSpec, Target};

/// weft instances behind the balancer.
pub(crate) const INSTANCES: usize = 3;
/// The port each instance listens on, in its own namespace.
pub(crate) const WEFT_PORT: u16 = 8080;
/// HAProxy's frontend over every instance.
pub(crate) const FRONT_ALL: u16 = 8000;
/// HAProxy's frontend over the first instance only (the scaling baseline).
pub(crate) const FRONT_ONE: u16 = 8001;
/// The scaling runs' HAProxy ([`haproxy::scale_haproxy_config`]): its frontend over every
/// instance and over the first only.
pub(crate) const SCALE_ALL: u16 = 8002;
pub(crate) const SCALE_ONE: u16 = 8003;
/// weft's health path, which HAProxy checks.
pub(crate) const HEALTH: &str = "/healthz";
/// HAProxy's check interval (`inter`), and the failed (`fall`) and passed (`rise`) checks
/// that mark a server down and up: a dead instance is out within about `FALL x CHECK_INTER`.
pub(crate) const CHECK_INTER: Duration = Duration::from_millis(500);
pub(crate) const FALL: u32 = 2;
pub(crate) const RISE: u32 = 2;
/// weft's `timeouts.shutdown_grace` in the instances: a drain or an upgrade's old process
/// is gone within it.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Longest wait for an instance to say it is ready (at start, or an upgrade's new process).
pub(crate) const READY_WAIT: Duration = Duration::from_secs(30);
/// A client request's timeout (connect, write, whole response).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a run works with, fixed before its hosts exist.
pub(crate) struct Setup {
    pub(crate) quick: bool,
    /// The weft model of the instances.
    pub(crate) model: String,
    pub(crate) plan: Plan,
    /// The weft and HAProxy binaries.
    pub(crate) weft: PathBuf,
    pub(crate) haproxy: PathBuf,
    pub(crate) net: Net,
    /// Configurations, logs and the site, removed after a run that succeeded.
    pub(crate) work: PathBuf,
    /// Where the results go.
    pub(crate) dir: PathBuf,
    /// The cores this process may use, and their layout.
    pub(crate) ncores: usize,
    pub(crate) layout: Layout,
}

/// Runs the cluster experiment (called by `experiment::run` for the name `cluster`).
pub fn run(a: &ExperimentArgs) -> Result<(), Box<dyn Error>> {
    let dir = experiment::out_dir(a);
    experiment::check_overwrite(&dir, a.quick)?;
    // Bad input is refused before anything else, also where the experiment would skip.
    let (model, plan) = plan_of(a)?;
    let Some(haproxy) = haproxy_here() else {
        return Ok(());
    };
    let weft = experiment::built_weft(a)?;
    let cpus = allowed_cpus();
    let id = std::process::id();
    let setup = Setup {
        quick: a.quick,
        model: model.into(),
        plan,
        weft,
        haproxy,
        net: Net((id % 250) as u8 + 1),
        work: std::env::temp_dir().join(format!("weft-cluster-{id}")),
        dir,
        ncores: cpus.len(),
        layout: Layout::for_cpus(&cpus),
    };
    prepare(&setup.work)?;
    let Some(mut hosts) = Hosts::create(id, &setup)? else {
        return Ok(());
    };
    let result = setup.run_with(&mut hosts);
    hosts.stop();
    drop(hosts);
    if result.is_ok() {
        let _ = fs::remove_dir_all(&setup.work);
    } else {
        eprintln!("# cluster: logs kept in {}", setup.work.display());
    }
    result?;
    experiment::say_wrote(&setup.dir.join("report.md"), a.quick);
    Ok(())
}

/// The instances' model and the run's plan, from the arguments (`--model`, `--rate`,
/// `--runs`, `--quick`); bad ones refused.
fn plan_of(a: &ExperimentArgs) -> Result<(&str, Plan), BadInput> {
    let model = a.model.as_deref().unwrap_or("fiber");
    if !["fiber", "thread", "process", "pipeline"].contains(&model) {
        return Err(BadInput(format!(
            "--model {model}: one of fiber, thread, process, pipeline"
        )));
    }
    let mut plan = Plan::new(a.quick);
    if let Some(r) = a.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(BadInput("--rate must be a positive number".into()));
        }
        plan.rate = r;
    }
    if let Some(n) = a.runs {
        if n == 0 {
            return Err(BadInput("--runs must be at least 1".into()));
        }
        plan.scale_rounds = n;
    }
    Ok((model, plan))
}

/// HAProxy's binary, where the experiment can run here; `None` (said on stderr) where it
/// cannot: no network namespaces, or no HAProxy.
fn haproxy_here() -> Option<PathBuf> {
    if let Err(why) = netns::available() {
        eprintln!("# cluster: skipped: the experiment {why} for its test hosts");
        return None;
    }
    let haproxy = experiment::find_program("haproxy");
    if haproxy.is_none() {
        eprintln!(
            "# cluster: skipped: HAProxy is not installed (apt-get install haproxy, or put \
             haproxy on the PATH)"
        );
    }
    haproxy
}

/// The work folder with the instances' site, and this process a subreaper.
fn prepare(work: &Path) -> io::Result<()> {
    fs::create_dir_all(work.join("site"))?;
    fs::write(work.join("site/index.html"), "<p>cluster</p>\n")?;
    // An upgraded instance is its predecessor's child; once that exits it becomes ours.
    weft_sys::process::become_subreaper()
}

impl Setup {
    /// The experiment on its hosts: the instances and the timeline's HAProxy started, the
    /// scaling rounds, the timeline, then the files.
    fn run_with(&self, hosts: &mut Hosts) -> Result<(), Box<dyn Error>> {
        for inst in hosts.instances.iter_mut() {
            inst.start(&self.weft)?;
        }
        let hcfg = haproxy_config(
            self.net.bridge(),
            &hosts.addrs(),
            self.layout.haproxy_threads,
        );
        let hpath = self.work.join("haproxy.cfg");
        fs::write(&hpath, &hcfg)?;
        let mut hap = Haproxy::start_logged(
            &self.haproxy,
            &hpath,
            &self.work.join("haproxy.err"),
            &self.layout,
        )?;
        self.wait_answering(&hosts.client, &mut hap)?;
        weft_fiber::sleep(CHECK_INTER * (RISE + 1));
        let scale = scaling::rounds(self, hosts)?;
        let timeline = timeline::run(self, hosts)?;
        // Old processes of the rolling upgrade have drained by now; reap them.
        for inst in hosts.instances.iter_mut() {
            inst.reap_old();
        }
        let hlog = logs::stamped(hap.stop(), timeline.start);
        fs::write(
            dir_file(&self.dir, self.quick, "haproxy.log")?,
            logs::haproxy_log_text(&hlog),
        )?;
        let clients = logs::tally_clients(&hosts.instances, self.net);
        report::write(
            self,
            &report::Results {
                hcfg,
                scale,
                done: timeline.done,
                samples: timeline.samples,
                hlog,
                clients,
            },
        )
    }

    /// A request to the client's side of HAProxy's frontend `port` (`GET /echo`), on a
    /// connection of its own when `close`.
    pub(crate) fn target(&self, port: u16, close: bool) -> Result<Target, BadInput> {
        Target::new(
            &format!("http://{}:{port}/echo", self.net.bridge()),
            &RequestSpec {
                close,
                ..RequestSpec::default()
            },
        )
    }

    /// Waits until a request through each of the timeline HAProxy's frontends is answered,
    /// from the client's namespace; an error once HAProxy has exited or after
    /// [`READY_WAIT`].
    fn wait_answering(&self, client: &Netns, hap: &mut Haproxy) -> Result<(), Box<dyn Error>> {
        let _in = client.enter()?;
        let end = Instant::now() + READY_WAIT;
        for port in [FRONT_ALL, FRONT_ONE] {
            while !answers(self.target(port, true)?)? {
                if Instant::now() > end || !hap.running() {
                    return Err(io::Error::other(format!(
                        "HAProxy does not answer on {}:{port}; see {}",
                        self.net.bridge(),
                        self.work.join("haproxy.err").display()
                    ))
                    .into());
                }
                weft_fiber::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

/// Whether one request to `t` is answered with a 2xx.
fn answers(t: Target) -> io::Result<bool> {
    let probe = LoadConfig {
        targets: vec![t],
        connections: 1,
        threads: 1,
        stop: Stop::Requests(1),
        rate: None,
        keepalive: false,
        timeout: Duration::from_secs(1),
        progress: false,
    };
    Ok(load::run(&probe)?.recorder.statuses.c2 == 1)
}

/// `dir/name`, `dir` made and marked with the run's kind first.
fn dir_file(dir: &Path, quick: bool, name: &str) -> io::Result<PathBuf> {
    experiment::mark(dir, quick)?;
    Ok(dir.join(name))
}
