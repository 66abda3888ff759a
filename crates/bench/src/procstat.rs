//! CPU time of a server's whole process tree, from `/proc`, sampled before and after a run:
//! CPU microseconds per request and utilization.
//!
//! A process's CPU is `utime + stime` (fields 14 and 15 of `/proc/PID/stat`, all its threads)
//! plus `cutime + cstime` (16 and 17: children it has reaped), summed over the process and its
//! live descendants, found by their parent pid. The reaped children's share matters for a
//! server that forks a short-lived child per connection: a child that exits during the run is
//! counted live in the first sample and in its parent's `cutime` in the second, so the
//! difference is exact; one that exited before the run is in both samples and cancels out.
//! The command name (field 2) may contain spaces and `)`, so fields are counted after the
//! *last* `)` (proc(5)).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The fields of `/proc/PID/stat` this module reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    pub ppid: u32,
    /// User time, clock ticks.
    pub utime: u64,
    /// System time, clock ticks.
    pub stime: u64,
    /// User and system time of reaped children, clock ticks.
    pub cutime: u64,
    pub cstime: u64,
}

impl Stat {
    /// All the CPU this process accounts for.
    pub fn ticks(&self) -> u64 {
        self.utime + self.stime + self.cutime + self.cstime
    }
}

/// Parses the contents of `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find(" (")?;
    let pid = text[..open].trim().parse().ok()?;
    let close = text.rfind(')')?;
    // After ") ": state (field 3), ppid (4), ..., utime (14) at index 11.
    let mut f = text.get(close + 1..)?.split_ascii_whitespace();
    let _state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let mut f = f.skip(14 - 5);
    let mut next = || f.next()?.parse::<u64>().ok();
    Some(Stat {
        pid,
        ppid,
        utime: next()?,
        stime: next()?,
        cutime: next()?,
        cstime: next()?,
    })
}

/// Sum of [`Stat::ticks`] over `root` and every descendant, from `stats` (all processes).
pub fn tree_ticks(root: u32, stats: &[Stat]) -> u64 {
    let mut children: HashMap<u32, Vec<&Stat>> = HashMap::new();
    let mut top = None;
    for s in stats {
        children.entry(s.ppid).or_default().push(s);
        if s.pid == root {
            top = Some(s);
        }
    }
    let mut total = 0;
    let mut stack: Vec<&Stat> = top.into_iter().collect();
    while let Some(s) = stack.pop() {
        total += s.ticks();
        if let Some(c) = children.get(&s.pid) {
            stack.extend(c.iter().filter(|c| c.pid != s.pid));
        }
    }
    total
}

/// Every process's stat (processes that exit while being read are skipped).
pub fn all_stats() -> io::Result<Vec<Stat>> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc")? {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Some(s) = fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|t| parse_stat(&t))
        {
            out.push(s);
        }
    }
    Ok(out)
}

/// Clock ticks per second of the `/proc` times.
pub fn ticks_per_second() -> u64 {
    weft_sys::resource::clock_ticks_per_second()
}

/// One sample of a process tree's CPU.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    ticks: u64,
    at: Instant,
}

/// Samples the CPU of `pid`'s tree now; fails if `pid` does not exist.
pub fn sample(pid: u32) -> io::Result<Sample> {
    let stats = all_stats()?;
    if !stats.iter().any(|s| s.pid == pid) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no process {pid}"),
        ));
    }
    Ok(Sample {
        ticks: tree_ticks(pid, &stats),
        at: Instant::now(),
    })
}

/// The server's CPU over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ServerCpu {
    pub pid: u32,
    /// CPU seconds the tree used during the run.
    pub cpu_s: f64,
    /// CPU microseconds per completed request.
    pub cpu_us_per_request: f64,
    /// CPU time over wall time, percent (above 100 with more than one core busy).
    pub utilization_pct: f64,
}

impl ServerCpu {
    /// The figures between two samples for `requests` completed requests.
    pub fn between(pid: u32, before: Sample, after: Sample, requests: u64, hz: u64) -> ServerCpu {
        let cpu =
            Duration::from_secs_f64(after.ticks.saturating_sub(before.ticks) as f64 / hz as f64);
        let wall = after.at.saturating_duration_since(before.at);
        ServerCpu {
            pid,
            cpu_s: cpu.as_secs_f64(),
            cpu_us_per_request: if requests == 0 {
                0.0
            } else {
                cpu.as_secs_f64() * 1e6 / requests as f64
            },
            utilization_pct: if wall.is_zero() {
                0.0
            } else {
                cpu.as_secs_f64() / wall.as_secs_f64() * 100.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line as the kernel writes it, with `comm` and the times given.
    fn line(pid: u32, comm: &str, ppid: u32, times: [u64; 4]) -> String {
        let [u, s, cu, cs] = times;
        format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 1061 0 0 0 {u} {s} {cu} {cs} 20 0 \
             3 0 123456 12345678 456 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        )
    }

    #[test]
    fn parses_a_plain_name() {
        let s = parse_stat(&line(42, "weft", 1, [150, 30, 7, 3])).unwrap();
        assert_eq!(
            s,
            Stat {
                pid: 42,
                ppid: 1,
                utime: 150,
                stime: 30,
                cutime: 7,
                cstime: 3
            }
        );
        assert_eq!(s.ticks(), 190);
    }

    #[test]
    fn name_with_spaces_and_parentheses() {
        // A process may name itself anything up to 15 bytes, ") S 1 2 3" included.
        for comm in ["a b", ") S 9 9 9 9 (", "x) (y", "))", "(", ""] {
            let s = parse_stat(&line(7, comm, 3, [11, 22, 33, 44])).unwrap();
            assert_eq!(
                (s.pid, s.ppid, s.utime, s.stime, s.cutime, s.cstime),
                (7, 3, 11, 22, 33, 44),
                "{comm:?}"
            );
        }
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 0"), None);
    }

    #[test]
    fn sums_the_tree_only() {
        let stats: Vec<Stat> = [
            line(1, "init", 0, [1000, 1000, 0, 0]),
            line(10, "server", 1, [100, 10, 5, 0]),
            line(11, "worker a", 10, [20, 2, 0, 0]),
            line(12, "child) x", 11, [3, 0, 0, 0]),
            line(13, "other", 1, [500, 0, 0, 0]),
        ]
        .iter()
        .map(|l| parse_stat(l).unwrap())
        .collect();
        assert_eq!(tree_ticks(10, &stats), 115 + 22 + 3);
        assert_eq!(tree_ticks(12, &stats), 3);
        assert_eq!(tree_ticks(99, &stats), 0);
    }

    #[test]
    fn this_process_is_found() {
        let me = std::process::id();
        let text = fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let s = parse_stat(&text).unwrap();
        assert_eq!(s.pid, me);
        assert!(sample(me).is_ok());
        assert!(ticks_per_second() > 0);
    }
}
