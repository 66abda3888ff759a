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
//! process), `openloop` (the timeline's client), `logs` (HAProxy's and weft's log lines),
//! `events` (what each event cost), `pin` (cores), `scaling` (three instances against
//! one) and `report` (the files a run writes).

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

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use self::haproxy::{haproxy_command, haproxy_config, scale_haproxy_config, Haproxy};
use self::hosts::{passive_opens, Net, BRIDGE_HOST, CLIENT_HOST};
use self::instance::{describe_status, reap, signal, weft_config, Instance};
use self::logs::{access_log_client, parse_log_line, LogLine};
use self::openloop::{open_loop, Sample};
pub(crate) use self::pin::pin_self;
use self::pin::{allowed_cpus, Layout};
use self::plan::{Action, Plan};
use self::report::report;
use self::scaling::{machine_ticks, self_cpu_s, ScaleRun};
use crate::experiment::{self, ExperimentArgs};
use crate::load::{self, LoadConfig, Stop};
use crate::netns::{self, Bridge, Netns};
use crate::procstat;
use crate::target::{BadInput, RequestSpec, Target};

/// weft instances behind the balancer.
pub(crate) const INSTANCES: usize = 3;
/// The port each instance listens on, in its own namespace.
pub(crate) const WEFT_PORT: u16 = 8080;
/// HAProxy's frontend over every instance.
pub(crate) const FRONT_ALL: u16 = 8000;
/// HAProxy's frontend over the first instance only (the scaling baseline).
pub(crate) const FRONT_ONE: u16 = 8001;
/// The scaling runs' HAProxy ([`scale_haproxy_config`]): its frontend over every instance and
/// over the first only.
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

/// Runs the cluster experiment (called by `experiment::run` for the name `cluster`).
pub fn run(a: &ExperimentArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = experiment::out_dir(a);
    experiment::check_overwrite(&dir, a.quick)?;
    // Bad input is refused before anything else, also where the experiment would skip.
    let model = a.model.as_deref().unwrap_or("fiber");
    if !["fiber", "thread", "process", "pipeline"].contains(&model) {
        return Err(BadInput(format!(
            "--model {model}: one of fiber, thread, process, pipeline"
        ))
        .into());
    }
    let mut plan = Plan::new(a.quick);
    if let Some(r) = a.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(BadInput("--rate must be a positive number".into()).into());
        }
        plan.rate = r;
    }
    if let Some(n) = a.runs {
        if n == 0 {
            return Err(BadInput("--runs must be at least 1".into()).into());
        }
        plan.scale_rounds = n;
    }
    if let Err(why) = netns::available() {
        eprintln!("# cluster: skipped: the experiment {why} for its test hosts");
        return Ok(());
    }
    let Some(haproxy) = experiment::find_program("haproxy") else {
        eprintln!(
            "# cluster: skipped: HAProxy is not installed (apt-get install haproxy, or put \
             haproxy on the PATH)"
        );
        return Ok(());
    };
    let weft = experiment::built_weft(a)?;
    let cpus = allowed_cpus();
    let ncores = cpus.len();
    let layout = Layout::for_cpus(&cpus);
    let id = std::process::id();
    let net = Net((id % 250) as u8 + 1);
    let work = std::env::temp_dir().join(format!("weft-cluster-{id}"));
    fs::create_dir_all(work.join("site"))?;
    fs::write(work.join("site/index.html"), "<p>cluster</p>\n")?;
    // An upgraded instance is its predecessor's child; once that exits it becomes ours.
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers, no pointers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error().into());
    }

    // Hosts: the bridge first, so that it is removed after the namespaces joined to it.
    let tag = id % 100_000;
    let bridge = Bridge::create(
        &format!("wcb{tag}"),
        &format!("{}/24", net.host(BRIDGE_HOST)),
    )?;
    let Some(client_ns) = Netns::create(
        &format!("weft-cluster-{id}-client"),
        &format!("wch{tag}c"),
        &format!("wcp{tag}c"),
    )?
    else {
        return Ok(());
    };
    bridge.attach(&client_ns)?;
    client_ns.address(&format!("{}/24", net.host(CLIENT_HOST)))?;
    client_ns.client_sysctls()?;
    let mut instances = Vec::new();
    for i in 0..INSTANCES {
        let Some(ns) = Netns::create(
            &format!("weft-cluster-{id}-w{}", i + 1),
            &format!("wch{tag}{i}"),
            &format!("wcp{tag}{i}"),
        )?
        else {
            return Ok(());
        };
        bridge.attach(&ns)?;
        let addr = net.instance(i);
        ns.address(&format!("{addr}/24"))?;
        let name = format!("w{}", i + 1);
        let conf = work.join(format!("{name}.toml"));
        let access = work.join(format!("{name}.access.log"));
        fs::write(&conf, weft_config(&work.join("site"), &access, addr, model))?;
        let notify_path = work.join(format!("{name}.notify"));
        let notify = UnixDatagram::bind(&notify_path)?;
        instances.push(Instance {
            log: work.join(format!("{name}.log")),
            name,
            ns,
            addr,
            conf,
            access,
            notify,
            notify_path,
            pid: None,
            pids: Vec::new(),
            core: layout.instance_core(i),
        });
    }
    let result = run_with(
        a,
        &plan,
        &weft,
        &haproxy,
        net,
        &work,
        &client_ns,
        &mut instances,
        &dir,
        ncores,
        &layout,
    );
    for inst in &mut instances {
        inst.stop();
    }
    drop(instances);
    drop(client_ns);
    drop(bridge);
    if result.is_ok() {
        let _ = fs::remove_dir_all(&work);
    } else {
        eprintln!("# cluster: logs kept in {}", work.display());
    }
    result?;
    eprintln!(
        "# wrote {}{}",
        dir.join("report.md").display(),
        if a.quick {
            " (a quick run: a smoke check, not a measurement)"
        } else {
            ""
        }
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_with(
    a: &ExperimentArgs,
    plan: &Plan,
    weft: &Path,
    haproxy_bin: &Path,
    net: Net,
    work: &Path,
    client_ns: &Netns,
    instances: &mut [Instance],
    dir: &Path,
    ncores: usize,
    layout: &Layout,
) -> Result<(), Box<dyn std::error::Error>> {
    for inst in instances.iter_mut() {
        inst.start(weft)?;
    }
    let front = net.host(BRIDGE_HOST);
    let addrs: Vec<Ipv4Addr> = instances.iter().map(|i| i.addr).collect();
    let hcfg = haproxy_config(front, &addrs, layout.haproxy_threads);
    let hpath = work.join("haproxy.cfg");
    fs::write(&hpath, &hcfg)?;
    let mut child = haproxy_command(haproxy_bin, &hpath, &work.join("haproxy.err"), layout)?
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        for line in BufReader::new(out).lines() {
            match line {
                Ok(l) => v.push((Instant::now(), l)),
                Err(_) => break,
            }
        }
        v
    });
    let mut hap = Haproxy {
        child,
        reader: Some(reader),
    };
    let url = |port: u16, close: bool| {
        Target::new(
            &format!("http://{front}:{port}/echo"),
            &RequestSpec {
                close,
                ..RequestSpec::default()
            },
        )
    };
    // Up when a request through each frontend is answered, and HAProxy has had time to see
    // every instance pass RISE checks.
    {
        let _in = client_ns.enter()?;
        let end = Instant::now() + READY_WAIT;
        for port in [FRONT_ALL, FRONT_ONE] {
            loop {
                let t = url(port, true)?;
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
                let r = load::run(&probe)?;
                if r.recorder.statuses.c2 == 1 {
                    break;
                }
                if Instant::now() > end || !matches!(hap.child.try_wait(), Ok(None)) {
                    return Err(io::Error::other(format!(
                        "HAProxy does not answer on {front}:{port}; see {}",
                        work.join("haproxy.err").display()
                    ))
                    .into());
                }
                weft_fiber::sleep(Duration::from_millis(100));
            }
        }
    }
    weft_fiber::sleep(CHECK_INTER * (RISE + 1));

    // Scaling: the closed loop through one instance, then through all, in rounds.
    let spath = work.join("haproxy-scale.cfg");
    fs::write(
        &spath,
        scale_haproxy_config(front, &addrs, layout.haproxy_threads),
    )?;
    let hz = procstat::ticks_per_second();
    let mut scale = Vec::new();
    for round in 1..=plan.scale_rounds {
        for (label, port, behind) in [
            ("one instance", SCALE_ONE, 1),
            ("three instances", SCALE_ALL, INSTANCES),
        ] {
            // A fresh HAProxy for each run (see `scale_haproxy_config`).
            let mut shap = Haproxy {
                child: haproxy_command(
                    haproxy_bin,
                    &spath,
                    &work.join("haproxy-scale.err"),
                    layout,
                )?
                .stdout(Stdio::null())
                .spawn()?,
                reader: None,
            };
            let shpid = shap.child.id();
            // Up once its frontend takes a connection (a bare connect, which in TCP mode
            // HAProxy forwards before this run's count of connections begins) and its checks
            // have run.
            {
                let _in = client_ns.enter()?;
                let end = Instant::now() + READY_WAIT;
                while std::net::TcpStream::connect((front, port)).is_err() {
                    if Instant::now() > end || !matches!(shap.child.try_wait(), Ok(None)) {
                        return Err(io::Error::other(format!(
                            "the scaling HAProxy does not listen on {front}:{port}; see {}",
                            work.join("haproxy-scale.err").display()
                        ))
                        .into());
                    }
                    weft_fiber::sleep(Duration::from_millis(50));
                }
            }
            weft_fiber::sleep(CHECK_INTER * (RISE + 1));
            let cfg = LoadConfig {
                targets: vec![url(port, false)?],
                connections: layout.connections,
                threads: layout.client_threads,
                stop: Stop::Duration(Duration::from_secs_f64(plan.scale_secs)),
                rate: None,
                keepalive: true,
                timeout: REQUEST_TIMEOUT,
                progress: false,
            };
            let pids: Vec<u32> = instances
                .iter()
                .filter_map(|i| i.pid)
                .map(|p| p as u32)
                .collect();
            let before_w: Vec<_> = pids.iter().map(|&p| procstat::sample(p)).collect();
            let before_h = procstat::sample(shpid)?;
            let opens =
                || -> io::Result<u64> { instances.iter().map(|i| passive_opens(&i.ns)).sum() };
            let opens0 = opens()?;
            let (mb0, c0, t0) = (machine_ticks(), self_cpu_s(), Instant::now());
            // On a thread of its own, so that its cores and namespace are the client's
            // alone (the load's threads inherit both).
            let r = std::thread::scope(|sc| {
                sc.spawn(|| -> io::Result<load::LoadResult> {
                    pin_self(&layout.client)?;
                    let _in = client_ns.enter()?;
                    load::run(&cfg)
                })
                .join()
            })
            .map_err(|_| io::Error::other("the scaling load panicked"))??;
            let wall = t0.elapsed().as_secs_f64().max(1e-9);
            let (mb1, c1) = (machine_ticks(), self_cpu_s());
            let after_h = procstat::sample(shpid)?;
            let server_conns = opens()?.saturating_sub(opens0);
            let weft_cpu: f64 = pids
                .iter()
                .zip(before_w)
                .filter_map(|(&p, b)| {
                    let b = b.ok()?;
                    let a = procstat::sample(p).ok()?;
                    Some(procstat::ServerCpu::between(p, b, a, 1, hz).cpu_s)
                })
                .sum();
            // Stopped after the instances' CPU is read: their closing of its connections is
            // not the run's.
            shap.stop();
            let h = procstat::ServerCpu::between(shpid, before_h, after_h, 1, hz);
            let busy = (mb1.0 - mb0.0) as f64 / ((mb1.1 - mb0.1) as f64).max(1.0);
            let run = ScaleRun {
                server_conns,
                instances: behind,
                rps: r.recorder.requests as f64 / r.elapsed.as_secs_f64().max(1e-9),
                errors: r.recorder.errors.total(),
                client_cores: (c1 - c0) / wall,
                haproxy_cores: h.cpu_s / wall,
                weft_cores: weft_cpu / wall,
                machine_busy: busy,
            };
            eprintln!(
                "  round {round}, {label}: {:.0} req/s, client {:.2} cores, HAProxy {:.2}, \
                 weft {:.2}, machine {:.0}% busy, {} connections to weft",
                run.rps,
                run.client_cores,
                run.haproxy_cores,
                run.weft_cores,
                run.machine_busy * 100.0,
                run.server_conns
            );
            scale.push((round, label, run));
        }
    }

    // The open loop, with the events on the timeline.
    eprintln!(
        "# cluster: {:.0} s of open-loop load at {:.0} req/s; events: {}",
        plan.secs,
        plan.rate,
        plan.events
            .iter()
            .map(|(t, e)| format!("{t:.1} s {}", e.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let targets = [url(FRONT_ALL, false)?, url(FRONT_ALL, true)?];
    // The load's clock starts a little ahead, so that its connections exist before it.
    let start = Instant::now() + Duration::from_millis(200);
    let load = {
        let plan = plan.clone();
        let ns_name = client_ns.name.clone();
        let cores = layout.client.clone();
        std::thread::spawn(move || -> io::Result<Vec<Sample>> {
            pin_self(&cores)?;
            // The load's runtime workers are born in the client's namespace.
            Netns::enter_for_good(&ns_name)?;
            open_loop(targets, start, &plan)
        })
    };
    let mut done: Vec<(f64, Action, String)> = Vec::new();
    for &(at, action) in &plan.events {
        let when = start + Duration::from_secs_f64(at);
        weft_fiber::sleep_until(when);
        let t = start.elapsed().as_secs_f64();
        let note = match action {
            Action::Drain(i) => {
                let inst = &mut instances[i];
                let pid = inst.pid.take().ok_or("drain: not running")?;
                signal(pid, libc::SIGTERM);
                let st = reap(pid, SHUTDOWN_GRACE + Duration::from_secs(2));
                let t_exit = start.elapsed().as_secs_f64() - t;
                // One that did not exit stays listed, for the final stop.
                if st.is_some() {
                    inst.pids.retain(|&p| p != pid);
                }
                format!("{}; exited after {t_exit:.3} s", describe_status(st))
            }
            Action::Kill(i) => {
                let inst = &mut instances[i];
                let pid = inst.pid.take().ok_or("kill: not running")?;
                signal(pid, libc::SIGKILL);
                let st = reap(pid, Duration::from_secs(2));
                if st.is_some() {
                    inst.pids.retain(|&p| p != pid);
                }
                describe_status(st)
            }
            Action::Restart(i) => {
                instances[i].start(weft)?;
                format!("ready after {:.3} s", start.elapsed().as_secs_f64() - t)
            }
            Action::Rolling => {
                let mut parts = Vec::new();
                for inst in instances.iter_mut() {
                    let old = inst.pid.ok_or("upgrade: not running")?;
                    let t0 = start.elapsed().as_secs_f64();
                    let new = inst.upgrade()?;
                    let ready = start.elapsed().as_secs_f64() - t0;
                    // In turn: the next instance is upgraded once this one's old process
                    // has drained and exited.
                    let st = reap(old, SHUTDOWN_GRACE + Duration::from_secs(2));
                    if st.is_some() {
                        inst.pids.retain(|&p| p != old);
                    }
                    parts.push(format!(
                        "{} {old} -> {new} ready after {ready:.3} s, old {} after {:.3} s",
                        inst.name,
                        describe_status(st),
                        start.elapsed().as_secs_f64() - t0
                    ));
                }
                parts.join("; ")
            }
        };
        eprintln!("  {t:6.2} s {}: {note}", action.name());
        done.push((t, action, note));
    }
    let model = a.model.as_deref().unwrap_or("fiber");
    let samples = load
        .join()
        .map_err(|_| io::Error::other("the load thread panicked"))??;
    // Old processes of the rolling upgrade have drained by now; reap them.
    for inst in instances.iter_mut() {
        let cur = inst.pid;
        inst.pids
            .retain(|&p| Some(p) == cur || reap(p, Duration::from_millis(10)).is_none());
    }
    let hlog = hap.stop();
    let hlog: Vec<(f64, LogLine, String)> = hlog
        .into_iter()
        .map(|(at, l)| {
            let t = if at >= start {
                (at - start).as_secs_f64()
            } else {
                -(start - at).as_secs_f64()
            };
            (t, parse_log_line(&l), l)
        })
        .collect();
    fs::write(
        dir_file(dir, a.quick, "haproxy.log")?,
        hlog.iter()
            .map(|(t, _, l)| format!("{t:.3} {l}\n"))
            .collect::<String>(),
    )?;
    let clients: Vec<(String, u64, u64, u64, String)> = instances
        .iter()
        .map(|inst| {
            let text = fs::read_to_string(&inst.access).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let real = net.host(CLIENT_HOST).to_string();
            let bal = net.host(BRIDGE_HOST).to_string();
            let n_real = lines
                .iter()
                .filter(|l| access_log_client(l) == Some(real.as_str()))
                .count() as u64;
            let n_bal = lines
                .iter()
                .filter(|l| access_log_client(l) == Some(bal.as_str()))
                .count() as u64;
            (
                inst.name.clone(),
                lines.len() as u64,
                n_real,
                n_bal,
                lines.last().copied().unwrap_or("").to_string(),
            )
        })
        .collect();
    report(
        a, plan, dir, ncores, layout, net, model, &hcfg, &scale, &done, &samples, &hlog, &clients,
    )
}

pub(crate) fn dir_file(dir: &Path, quick: bool, name: &str) -> io::Result<PathBuf> {
    experiment::mark(dir, quick)?;
    Ok(dir.join(name))
}
