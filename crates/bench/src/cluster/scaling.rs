//! The scaling runs: rounds of closed-loop load through one instance and through all, each
//! through a HAProxy of its own; a run's throughput and CPU ([`ScaleRun`]: the client's, the
//! balancer's, the instances' and the machine's), the same-round ratios of three instances
//! over one, and whether the client, HAProxy or the machine was the limit.

use std::error::Error;
use std::fs;
use std::io;
use std::time::{Duration, Instant};

use super::haproxy::{scale_haproxy_config, Haproxy};
use super::hosts::{passive_opens, Hosts};
use super::pin::{pin_self, Layout};
use super::{
    Setup, CHECK_INTER, INSTANCES, READY_WAIT, REQUEST_TIMEOUT, RISE, SCALE_ALL, SCALE_ONE,
};
use crate::load::{self, LoadConfig, Stop};
use crate::netns::Netns;
use crate::procstat;

/// A scaling run: its round, its backend (`one instance`, `three instances`) and its figures.
pub(crate) type Scaled = (usize, &'static str, ScaleRun);

/// The scaling rounds: in each, the closed loop through the backend of one instance, then
/// through that of all, each run through a HAProxy started afresh.
pub(crate) fn rounds(setup: &Setup, hosts: &Hosts) -> Result<Vec<Scaled>, Box<dyn Error>> {
    let spath = setup.work.join("haproxy-scale.cfg");
    let threads = setup.layout.haproxy_threads;
    fs::write(
        &spath,
        scale_haproxy_config(setup.net.bridge(), &hosts.addrs(), threads),
    )?;
    let mut scale = Vec::new();
    for round in 1..=setup.plan.scale_rounds {
        for (label, port, behind) in [
            ("one instance", SCALE_ONE, 1),
            ("three instances", SCALE_ALL, INSTANCES),
        ] {
            // A fresh HAProxy for each run (see `scale_haproxy_config`).
            let err = setup.work.join("haproxy-scale.err");
            let mut hap = Haproxy::start_quiet(&setup.haproxy, &spath, &err, &setup.layout)?;
            wait_listening(setup, &hosts.client, &mut hap, port)?;
            weft_fiber::sleep(CHECK_INTER * (RISE + 1));
            let run = ScaleRun {
                instances: behind,
                ..measure(setup, hosts, hap, port)?
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
    Ok(scale)
}

/// Waits until `hap`'s frontend `port` takes a connection from the client's namespace (a bare
/// connect, which in TCP mode HAProxy forwards before the run's count of connections begins);
/// an error once HAProxy has exited or after [`READY_WAIT`].
fn wait_listening(setup: &Setup, client: &Netns, hap: &mut Haproxy, port: u16) -> io::Result<()> {
    let _in = client.enter()?;
    let front = setup.net.bridge();
    let end = Instant::now() + READY_WAIT;
    while std::net::TcpStream::connect((front, port)).is_err() {
        if Instant::now() > end || !hap.running() {
            return Err(io::Error::other(format!(
                "the scaling HAProxy does not listen on {front}:{port}; see {}",
                setup.work.join("haproxy-scale.err").display()
            )));
        }
        weft_fiber::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// One closed-loop run through `hap`'s frontend `port`: its throughput, and the CPU of the
/// client, HAProxy, the instances and the machine over its wall time (`instances` left 0).
/// `hap` is stopped once the instances' CPU is read: their closing of its connections is not
/// the run's.
fn measure(
    setup: &Setup,
    hosts: &Hosts,
    mut hap: Haproxy,
    port: u16,
) -> Result<ScaleRun, Box<dyn Error>> {
    let hz = procstat::ticks_per_second();
    let cfg = LoadConfig {
        targets: vec![setup.target(port, false)?],
        connections: setup.layout.connections,
        threads: setup.layout.client_threads,
        stop: Stop::Duration(Duration::from_secs_f64(setup.plan.scale_secs)),
        rate: None,
        keepalive: true,
        timeout: REQUEST_TIMEOUT,
        progress: false,
    };
    let hpid = hap.pid();
    let pids: Vec<u32> = hosts
        .instances
        .iter()
        .filter_map(|i| i.pid)
        .map(|p| p as u32)
        .collect();
    let before_w: Vec<_> = pids.iter().map(|&p| procstat::sample(p)).collect();
    let before_h = procstat::sample(hpid)?;
    let opens0 = accepted(hosts)?;
    let (mb0, c0, t0) = (machine_ticks(), self_cpu_s(), Instant::now());
    let r = client_load(&setup.layout.client, &hosts.client, &cfg)?;
    let wall = t0.elapsed().as_secs_f64().max(1e-9);
    let (mb1, c1) = (machine_ticks(), self_cpu_s());
    let after_h = procstat::sample(hpid)?;
    let server_conns = accepted(hosts)?.saturating_sub(opens0);
    let weft_cpu = cpu_since(&pids, before_w, hz);
    hap.stop();
    let h = procstat::ServerCpu::between(hpid, before_h, after_h, 1, hz);
    Ok(ScaleRun {
        server_conns,
        instances: 0,
        rps: r.recorder.requests as f64 / r.elapsed.as_secs_f64().max(1e-9),
        errors: r.recorder.errors.total(),
        client_cores: (c1 - c0) / wall,
        haproxy_cores: h.cpu_s / wall,
        weft_cores: weft_cpu / wall,
        machine_busy: (mb1.0 - mb0.0) as f64 / ((mb1.1 - mb0.1) as f64).max(1.0),
    })
}

/// `cfg`'s load on a thread of its own, so that its cores and namespace are the client's
/// alone (the load's threads inherit both).
fn client_load(cores: &[usize], client: &Netns, cfg: &LoadConfig) -> io::Result<load::LoadResult> {
    std::thread::scope(|sc| {
        sc.spawn(|| -> io::Result<load::LoadResult> {
            pin_self(cores)?;
            let _in = client.enter()?;
            load::run(cfg)
        })
        .join()
    })
    .map_err(|_| io::Error::other("the scaling load panicked"))?
}

/// TCP connections the instances have accepted so far, all together.
fn accepted(hosts: &Hosts) -> io::Result<u64> {
    hosts.instances.iter().map(|i| passive_opens(&i.ns)).sum()
}

/// CPU seconds of processes `pids` since samples `before` (one each; those whose sample, then
/// or now, failed are left out).
fn cpu_since(pids: &[u32], before: Vec<io::Result<procstat::Sample>>, hz: u64) -> f64 {
    pids.iter()
        .zip(before)
        .filter_map(|(&p, b)| {
            let b = b.ok()?;
            let a = procstat::sample(p).ok()?;
            Some(procstat::ServerCpu::between(p, b, a, 1, hz).cpu_s)
        })
        .sum()
}

/// CPU time of this process (all its threads, not its children), seconds.
fn self_cpu_s() -> f64 {
    weft_sys::resource::self_cpu_time().map_or(0.0, |t| t.as_secs_f64())
}

/// (busy, total) jiffies of the whole machine, from `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// A closed-loop run's figures.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ScaleRun {
    pub rps: f64,
    pub errors: u64,
    /// TCP connections the instances accepted during the run (HAProxy's to them).
    pub server_conns: u64,
    /// Instances behind the run's backend (1 or [`INSTANCES`]).
    pub instances: usize,
    /// The client's CPU over wall time, in cores.
    pub client_cores: f64,
    /// HAProxy's, and the weft instances' together.
    pub haproxy_cores: f64,
    pub weft_cores: f64,
    /// The whole machine's busy share of all its cores, 0..=1.
    pub machine_busy: f64,
}

/// Why the scaling cannot be judged, if it cannot: the client or HAProxy busier, for the
/// cores its threads can use, than the instances were for theirs and near all of them (then
/// it, not the instances, set the throughput), or, where nothing is pinned, the machine 80%
/// busy or more (five busy processes sharing two cores leave some idle time between them: a
/// quiet 2-core run had HAProxy's one thread at 0.79 of a core and the machine 85-89% busy).
/// Instances near all of their cores are what the figure measures.
pub(crate) fn limit(r: &ScaleRun, cores: usize, layout: &Layout) -> Option<String> {
    let (ct, ht) = (layout.client_threads as f64, layout.haproxy_threads as f64);
    let weft_share = r.weft_cores / r.instances.max(1) as f64;
    let (client_share, haproxy_share) = (r.client_cores / ct, r.haproxy_cores / ht);
    if client_share >= 0.8 && client_share >= weft_share {
        Some(format!(
            "the client is the limit (it used {:.2} cores with {ct} load threads)",
            r.client_cores
        ))
    } else if haproxy_share >= 0.8 && haproxy_share >= weft_share {
        Some(format!(
            "HAProxy is the limit (it used {:.2} cores with `nbthread {ht}`)",
            r.haproxy_cores
        ))
    } else if !layout.pinned() && r.machine_busy >= 0.8 {
        let others =
            (r.machine_busy * cores as f64 - r.client_cores - r.haproxy_cores - r.weft_cores)
                .max(0.0);
        Some(format!(
            "the machine is the limit ({:.0}% of its {cores} cores busy: the client {:.2} \
             cores, HAProxy {:.2}, the weft instances {:.2}, other processes {others:.2})",
            r.machine_busy * 100.0,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores
        ))
    } else {
        None
    }
}

/// The same-round ratios of three instances' throughput over one's, in round order.
pub(crate) fn round_ratios(scale: &[Scaled]) -> Vec<f64> {
    let mut rounds: Vec<usize> = scale.iter().map(|x| x.0).collect();
    rounds.dedup();
    rounds
        .into_iter()
        .filter_map(|n| {
            let of = |label: &str| {
                scale
                    .iter()
                    .find(|x| x.0 == n && x.1 == label)
                    .map(|x| x.2.rps)
            };
            Some(of("three instances")? / of("one instance")?.max(1e-9))
        })
        .collect()
}

/// The scaling target: three instances give at least this many times one's throughput.
pub(crate) const SCALE_TARGET: f64 = 2.7;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::median;

    #[test]
    fn the_limit_is_named_when_the_client_haproxy_or_the_machine_is_saturated() {
        let small = Layout::for_cpus(&[0, 1]);
        let free = ScaleRun {
            client_cores: 0.3,
            haproxy_cores: 0.5,
            machine_busy: 0.5,
            ..ScaleRun::default()
        };
        assert_eq!(limit(&free, 8, &small), None);
        let client = ScaleRun {
            client_cores: 0.95,
            ..free
        };
        assert!(limit(&client, 8, &small)
            .unwrap()
            .contains("client is the limit"));
        let haproxy = ScaleRun {
            haproxy_cores: 0.91,
            ..free
        };
        assert!(limit(&haproxy, 8, &small)
            .unwrap()
            .contains("HAProxy is the limit"));
        // With cores of their own, each is judged against its share: 0.95 of the client's
        // five cores, 0.91 of HAProxy's eight, are far from either's limit.
        let roomy = Layout::for_cpus(&(0..16).collect::<Vec<_>>());
        assert_eq!(limit(&client, 16, &roomy), None);
        assert_eq!(limit(&haproxy, 16, &roomy), None);
        // The 16-core run: HAProxy at 0.85 of its cores, the instances at 0.98 of theirs:
        // the instances set the throughput, which is what is measured.
        let instances_bound = ScaleRun {
            client_cores: 3.66,
            haproxy_cores: 6.77,
            weft_cores: 2.93,
            instances: 3,
            ..free
        };
        assert_eq!(limit(&instances_bound, 16, &roomy), None);
        // HTTP mode on the same machine: HAProxy at 0.98 of its cores, the instances at 0.91.
        let haproxy_bound = ScaleRun {
            haproxy_cores: 7.8,
            weft_cores: 2.72,
            ..instances_bound
        };
        assert!(limit(&haproxy_bound, 16, &roomy)
            .unwrap()
            .contains("HAProxy is the limit"));
        let busy_client = ScaleRun {
            client_cores: 4.5,
            ..free
        };
        assert!(limit(&busy_client, 16, &roomy)
            .unwrap()
            .contains("client is the limit"));
        let machine = ScaleRun {
            machine_busy: 1.0,
            haproxy_cores: 0.5,
            weft_cores: 0.4,
            ..free
        };
        let quiet_small = ScaleRun {
            client_cores: 0.46,
            haproxy_cores: 0.79,
            weft_cores: 0.49,
            instances: 1,
            machine_busy: 0.89,
            ..ScaleRun::default()
        };
        assert!(limit(&quiet_small, 2, &small)
            .unwrap()
            .contains("machine is the limit"));
        let why = limit(&machine, 2, &small).unwrap();
        assert!(why.contains("machine is the limit"), "{why}");
        // 2 cores busy, 1.2 of them the experiment's: 0.8 someone else's.
        assert!(why.contains("other processes 0.80"), "{why}");
    }

    #[test]
    fn scaling_rounds_give_same_round_ratios_and_their_median() {
        let r = |rps| ScaleRun {
            rps,
            ..ScaleRun::default()
        };
        let scale = vec![
            (1, "one instance", r(100.0)),
            (1, "three instances", r(280.0)),
            (2, "one instance", r(200.0)),
            (2, "three instances", r(500.0)),
            (3, "one instance", r(100.0)),
            (3, "three instances", r(300.0)),
        ];
        assert_eq!(round_ratios(&scale), vec![2.8, 2.5, 3.0]);
        assert_eq!(median(&round_ratios(&scale)), 2.8);
        // A round missing one of its runs gives no ratio.
        assert_eq!(round_ratios(&scale[..3]), vec![2.8]);
    }
}
