//! The scaling runs' figures: one closed-loop run's throughput and CPU ([`ScaleRun`], with the
//! readings of this process's and the machine's CPU it takes), the same-round ratios of three
//! instances over one, and whether the client, HAProxy or the machine was the limit.

use std::fs;

use super::pin::Layout;

/// CPU time of this process (all its threads, not its children), seconds.
pub(crate) fn self_cpu_s() -> f64 {
    // SAFETY: rusage is plain data, zeroed is valid, and getrusage only writes into it.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (busy, total) jiffies of the whole machine, from `/proc/stat`.
pub(crate) fn machine_ticks() -> (u64, u64) {
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
pub(crate) fn round_ratios(scale: &[(usize, &str, ScaleRun)]) -> Vec<f64> {
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
