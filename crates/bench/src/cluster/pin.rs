//! Where the experiment's processes run ([`Layout`]): the cores this process may use, split
//! between the instances, HAProxy and the client where there are enough, and the pinning of a
//! thread or a child process to its part.

use std::io;
use std::process::Command;

use super::INSTANCES;

/// From this many cores up, each part of the experiment gets cores of its own ([`Layout`]).
pub(crate) const ROOMY_CORES: usize = 8;

/// Where the experiment's processes run. On a machine where this process may use at least
/// [`ROOMY_CORES`] cores, each instance has one of them to itself (the first three;
/// `threads = 1`), HAProxy the next three fifths of the rest (as many threads), and the client
/// what is left (as many load threads): the closed loop then measures the instances, not the
/// cores they share with their balancer and client. HAProxy gets the larger share because,
/// even balancing connections, it spends about twice an instance's CPU per request and the
/// client about as much as an instance (the 16-core run, three instances: 21, 11 and 10 us
/// per request, the veth and bridge path included). On a smaller machine nothing is pinned:
/// everything shares every core, HAProxy and the client one thread each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Instance `i` runs on core `instances[i]` (empty: nothing is pinned).
    pub instances: Vec<usize>,
    /// HAProxy's cores and the client's (empty: unpinned).
    pub haproxy: Vec<usize>,
    pub client: Vec<usize>,
    pub haproxy_threads: usize,
    pub client_threads: usize,
    /// Connections of each closed-loop scaling run.
    pub connections: usize,
}

impl Layout {
    /// The layout over `cpus`, the cores this process may run on ([`allowed_cpus`]), in
    /// order: in a cpuset such as 8-23 the parts go to those, not to 0..16.
    pub fn for_cpus(cpus: &[usize]) -> Layout {
        if cpus.len() < ROOMY_CORES {
            return Layout {
                instances: Vec::new(),
                haproxy: Vec::new(),
                client: Vec::new(),
                haproxy_threads: 1,
                client_threads: 1,
                connections: 32,
            };
        }
        let rest = cpus.len() - INSTANCES;
        let h = (rest * 3).div_ceil(5);
        let (instances, others) = cpus.split_at(INSTANCES);
        let (haproxy, client) = others.split_at(h);
        Layout {
            instances: instances.to_vec(),
            haproxy_threads: haproxy.len(),
            client_threads: client.len(),
            // Enough requests in flight that no instance waits on a round trip through
            // HAProxy: 64 per client thread.
            connections: 64 * client.len(),
            haproxy: haproxy.to_vec(),
            client: client.to_vec(),
        }
    }

    /// Whether each part has cores of its own.
    pub fn pinned(&self) -> bool {
        !self.instances.is_empty()
    }

    /// Instance `i`'s core, where pinned.
    pub(crate) fn instance_core(&self, i: usize) -> Option<usize> {
        self.instances.get(i).copied()
    }

    /// One line for the report.
    pub fn describe(&self, cores: usize) -> String {
        if !self.pinned() {
            return format!(
                "Machine: {cores} cores, shared by the client, HAProxy and the three \
                 instances (none pinned; HAProxy and the client one thread each)."
            );
        }
        format!(
            "Machine: {cores} cores, each part on its own: instance w1, w2, w3 on core {}; \
             HAProxy on cores {} (`nbthread {}`); the client on cores {} ({} load threads, \
             the timeline's one as well).",
            self.instances
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            cpu_list(&self.haproxy),
            self.haproxy_threads,
            cpu_list(&self.client),
            self.client_threads
        )
    }
}

/// `3-10` for 3, 4, ..., 10; `1,3-4` for 1, 3, 4 (the notation of `taskset -c`).
pub(crate) fn cpu_list(cores: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in cores {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == c => *last = c,
            _ => runs.push((c, c)),
        }
    }
    if runs.is_empty() {
        return "none".into();
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The cores this process may run on (its affinity), in order; `0..available_parallelism`
/// where the affinity cannot be read.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match weft_sys::resource::affinity() {
        Ok(v) if !v.is_empty() => v,
        _ => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// The calling thread's affinity: `cores` (threads it starts afterwards inherit it); none
/// (a [`Layout`] part that is not pinned) leaves it as it is.
pub(crate) fn pin_self(cores: &[usize]) -> io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    weft_sys::resource::set_affinity(cores)
}

/// The child `cmd` starts runs on `cores` (set between fork and exec); none leaves it on
/// this process's.
pub(crate) fn pin_child(cmd: &mut Command, cores: Vec<usize>) {
    weft_sys::process::pin_command(cmd, cores);
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::process::Stdio;

    use super::*;

    #[test]
    fn the_layout_gives_each_part_its_own_cores_where_there_are_enough() {
        for n in [1, 2, ROOMY_CORES - 1] {
            let l = Layout::for_cpus(&(0..n).collect::<Vec<_>>());
            assert!(
                !l.pinned() && l.haproxy.is_empty() && l.client.is_empty(),
                "{l:?}"
            );
            assert_eq!((l.haproxy_threads, l.client_threads), (1, 1));
            assert_eq!(l.instance_core(0), None);
        }
        // From 0, and from 8 (a cpuset such as 8-23), and with a hole in the set.
        for cpus in [
            (0..ROOMY_CORES).collect::<Vec<_>>(),
            (0..12).collect(),
            (0..16).collect(),
            (0..64).collect(),
            (8..24).collect(),
            (0..20).filter(|c| c % 5 != 4).collect(),
        ] {
            let l = Layout::for_cpus(&cpus);
            assert!(l.pinned());
            // Instances on the first three; HAProxy and the client after them, disjoint,
            // together every other core, each at least one, HAProxy the larger share.
            let inst: Vec<usize> = (0..INSTANCES).filter_map(|i| l.instance_core(i)).collect();
            assert_eq!(inst, cpus[..INSTANCES].to_vec());
            let mut all = inst.clone();
            all.extend(&l.haproxy);
            all.extend(&l.client);
            assert_eq!(all, cpus, "{l:?}");
            assert!(
                !l.client.is_empty() && l.haproxy.len() >= l.client.len(),
                "{l:?}"
            );
            assert_eq!(l.haproxy_threads, l.haproxy.len());
            assert_eq!(l.client_threads, l.client.len());
            assert_eq!(l.connections, 64 * l.client.len());
        }
        let l = Layout::for_cpus(&(0..16).collect::<Vec<_>>());
        assert_eq!(
            (cpu_list(&l.haproxy), cpu_list(&l.client)),
            ("3-10".into(), "11-15".into())
        );
        let d = l.describe(16);
        assert!(d.contains("core 0, 1, 2;"), "{d}");
        assert!(d.contains("HAProxy on cores 3-10 (`nbthread 8`)"), "{d}");
        let l = Layout::for_cpus(&(8..24).collect::<Vec<_>>());
        assert!(
            l.describe(16).contains("core 8, 9, 10;"),
            "{}",
            l.describe(16)
        );
        assert_eq!(cpu_list(&[1, 3, 4, 7]), "1,3-4,7");
        assert_eq!(cpu_list(&[]), "none");
        // This process's own cores: some, each listed once, in order.
        let mine = allowed_cpus();
        assert!(
            !mine.is_empty() && mine.windows(2).all(|w| w[0] < w[1]),
            "{mine:?}"
        );
    }

    #[test]
    fn a_pinned_child_and_a_pinned_thread_run_on_the_cores_named() {
        // The last core this process may use (in a cpuset it need not be 0).
        let cpus = allowed_cpus();
        let core = *cpus.last().unwrap();
        let want = format!("Cpus_allowed_list:\t{core}\n");
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/status").stdout(Stdio::piped());
        pin_child(&mut cmd, vec![core]);
        let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        assert!(out.contains(&want), "{out}");
        // A thread's own affinity, and what a thread it starts inherits.
        let seen = std::thread::spawn(move || {
            pin_self(&[core]).unwrap();
            std::thread::spawn(|| fs::read_to_string("/proc/thread-self/status").unwrap())
                .join()
                .unwrap()
        })
        .join()
        .unwrap();
        assert!(seen.contains(&want), "{seen}");
        // No cores: the affinity stays as it was.
        let kept = std::thread::spawn(|| {
            let before = fs::read_to_string("/proc/thread-self/status").unwrap();
            pin_self(&[]).unwrap();
            let after = fs::read_to_string("/proc/thread-self/status").unwrap();
            let list = |st: &str| {
                st.lines()
                    .find(|l| l.starts_with("Cpus_allowed_list:"))
                    .map(str::to_owned)
            };
            (list(&before), list(&after))
        })
        .join()
        .unwrap();
        assert_eq!(kept.0, kept.1);
        // This thread was not touched.
        let here = fs::read_to_string("/proc/thread-self/status").unwrap();
        if cpus.len() > 1 {
            assert!(!here.contains(&want), "{here}");
        }
    }
}
