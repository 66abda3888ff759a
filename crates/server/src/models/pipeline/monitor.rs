//! The load monitor: every period it samples each stage (queue length, busy threads, service
//! time per task) and the listener (W requests/s, R bytes/s), computes U = c1*W + c2*R, asks
//! the controller for an allocation (when it is on) and applies it by changing each stage's
//! permit count. It also keeps the recent history the status page shows.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{fence, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::controller::{self, Sample, Stage, State, STAGES};
use super::Pipeline;
use crate::config::PipelineConfig;
use crate::metrics::ModelReport;

/// Samples kept for the status page (a minute of work at the default period: the monitor
/// takes none while it sleeps through a quiet spell).
const HISTORY: usize = 240;

/// What the status page shows of the pipeline.
#[derive(Debug)]
pub(crate) struct Report {
    pipeline: Weak<Pipeline>,
    controller: bool,
    threads_total: usize,
    period: Duration,
    started: Instant,
    view: Mutex<View>,
}

#[derive(Debug, Default)]
struct View {
    w: f64,
    r: f64,
    u: f64,
    /// Mean service time per task over the last period, per stage (µs).
    service_us: [f64; 4],
    /// Idle fraction of the machine's CPU over the last period.
    cpu_idle: f64,
    /// The monitor sleeps through a quiet spell: the figures above are the last sample's
    /// (W, R and U were zero in it), and no sample is taken until work comes.
    asleep: bool,
    history: VecDeque<Point>,
}

#[derive(Debug, Clone, Copy)]
struct Point {
    t: f64,
    u: f64,
    threads: [usize; 4],
    queue: [usize; 4],
}

impl Report {
    pub(crate) fn new(p: &Arc<Pipeline>, pc: &PipelineConfig) -> Report {
        Report {
            pipeline: Arc::downgrade(p),
            controller: pc.controller,
            threads_total: pc.threads_total,
            period: pc.period,
            started: Instant::now(),
            view: Mutex::new(View::default()),
        }
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections waiting in the poller (idle keep-alive, partial heads, partial writes).
    fn parked(&self) -> usize {
        self.pipeline.upgrade().map_or(0, |p| p.poller.len())
    }

    /// Live threads, queue and busy of each stage.
    fn live(&self) -> Option<[(usize, usize, usize); 4]> {
        let p = self.pipeline.upgrade()?;
        Some(std::array::from_fn(|k| {
            let s = &p.stages[k];
            let queue = if k == Stage::Accept as usize {
                p.accept_backlog()
            } else {
                s.len()
            };
            (s.active(), queue, s.busy())
        }))
    }
}

impl ModelReport for Report {
    fn gauges(&self) -> Vec<u64> {
        // Threads per stage, then queues per stage (`history::model_figures`).
        let live = self.live().unwrap_or_default();
        let threads = live.iter().map(|&(t, _, _)| t as u64);
        threads
            .chain(live.iter().map(|&(_, q, _)| q as u64))
            .collect()
    }

    fn json(&self) -> serde_json::Value {
        let live = self.live().unwrap_or_default();
        let v = self.view();
        let mut stages = serde_json::Map::new();
        for (k, name) in STAGES.iter().enumerate() {
            let (threads, queue, busy) = live[k];
            stages.insert(
                (*name).into(),
                serde_json::json!({
                    "threads": threads,
                    "queue": queue,
                    "busy": busy,
                    "service_us": round(v.service_us[k]),
                }),
            );
        }
        let history: Vec<_> = v
            .history
            .iter()
            .map(|h| serde_json::json!({ "t": round(h.t), "u": round(h.u), "threads": h.threads, "queue": h.queue }))
            .collect();
        serde_json::json!({
            "stages": stages,
            "order": STAGES,
            "threads_total": self.threads_total,
            "controller": self.controller,
            "period_ms": self.period.as_millis() as u64,
            "w": round(v.w),
            "r": round(v.r),
            "u": round(v.u),
            "cpu_idle": round(v.cpu_idle),
            "sampling": !v.asleep,
            "parked": self.parked(),
            "history": history,
        })
    }

    fn html(&self) -> String {
        let live = self.live().unwrap_or_default();
        let v = self.view();
        let mut rows = String::new();
        for (k, name) in STAGES.iter().enumerate() {
            let (threads, queue, busy) = live[k];
            rows.push_str(&format!(
                "<tr><td>{name}</td><td>{threads}</td><td>{queue}</td><td>{busy}</td><td>{:.1}</td></tr>\n",
                v.service_us[k]
            ));
        }
        format!(
            "<p>W {:.1} requests/s &middot; R {:.0} bytes/s &middot; U {:.3} &middot; CPU idle {:.0}%{} &middot; M {} &middot; controller {}</p>\n\
             <table><tr><th>stage</th><th>threads</th><th>queue</th><th>busy</th><th>service µs</th></tr>\n{rows}</table>\n{}",
            v.w,
            v.r,
            v.u,
            v.cpu_idle * 100.0,
            if v.asleep {
                " (last sample; the monitor sleeps until work comes)"
            } else {
                ""
            },
            self.threads_total,
            if self.controller { "on" } else { "off" },
            chart(&v.history, self.threads_total, self.period),
        )
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// An SVG chart of threads per stage and U (scaled to M) over the kept history, against
/// time: a gap of more than two periods between samples (the monitor slept through a quiet
/// spell) breaks every line there.
fn chart(history: &VecDeque<Point>, m: usize, period: Duration) -> String {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    const COLORS: [&str; 4] = ["#888", "#1f77b4", "#2ca02c", "#d62728"];
    let (Some(first), Some(last)) = (history.front(), history.back()) else {
        return String::new();
    };
    if history.len() < 2 {
        return String::new();
    }
    let span = (last.t - first.t).max(1e-9);
    let gap = 2.0 * period.as_secs_f64();
    let m = m.max(1) as f64;
    // An SVG path: a move to the first point and after each gap, a line to every other.
    let line = |f: &dyn Fn(&Point) -> f64| -> String {
        let mut d = String::new();
        let mut prev: Option<f64> = None;
        for h in history {
            let cmd = if prev.is_some_and(|t| h.t - t <= gap) {
                'L'
            } else {
                'M'
            };
            prev = Some(h.t);
            d.push_str(&format!(
                "{cmd}{:.1},{:.1} ",
                (h.t - first.t) / span * W,
                H - (f(h) / m).clamp(0.0, 1.0) * H
            ));
        }
        d.pop();
        d
    };
    let mut svg = format!(
        "<p>threads per stage and U&times;M over the last {} samples, {:.0} s (none is taken while the pipeline is idle: a break in the lines): ",
        history.len(),
        span
    );
    for (k, name) in STAGES.iter().enumerate() {
        svg.push_str(&format!(
            "<span style=\"color:{}\">{name}</span> ",
            COLORS[k]
        ));
    }
    svg.push_str(&format!(
        "<span>U (dashed)</span></p>\n<svg width=\"{W}\" height=\"{H}\" style=\"border:1px solid #ccc\">\n"
    ));
    for (k, color) in COLORS.iter().enumerate() {
        svg.push_str(&format!(
            "<path fill=\"none\" stroke=\"{color}\" d=\"{}\"/>\n",
            line(&|h| h.threads[k] as f64)
        ));
    }
    svg.push_str(&format!(
        "<path fill=\"none\" stroke=\"#000\" stroke-dasharray=\"4\" d=\"{}\"/>\n</svg>\n",
        line(&|h| h.u * m)
    ));
    svg
}

/// Counters at the previous sample, to turn totals into rates.
struct Last {
    at: Instant,
    requests: u64,
    bytes: u64,
    stages: [(u64, Duration); 4],
    cpu: Option<CpuTimes>,
}

/// CPU time, idle and total, in clock ticks, of the CPUs this server may run on (its affinity
/// set, from the `cpuN` lines of /proc/stat), or of the whole machine (the `cpu` line) when
/// the set cannot be read. A server pinned to some cores asks whether *those* have time to
/// spare: another program saturating the other cores is not its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTimes {
    idle: u64,
    total: u64,
}

impl CpuTimes {
    fn read() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTimes::from_stat(&text, weft_sys::resource::affinity().ok().as_deref())
    }

    /// From the text of /proc/stat: the sum of the `cpuN` lines whose N is in `cpus`, or the
    /// aggregate `cpu` line where `cpus` is `None` or names no CPU listed.
    fn from_stat(text: &str, cpus: Option<&[usize]>) -> Option<CpuTimes> {
        if let Some(cpus) = cpus {
            let mut sum: Option<CpuTimes> = None;
            for line in text.lines() {
                let Some(n) = line
                    .split_ascii_whitespace()
                    .next()
                    .and_then(|w| w.strip_prefix("cpu"))
                    .and_then(|n| n.parse::<usize>().ok())
                else {
                    continue;
                };
                if !cpus.contains(&n) {
                    continue;
                }
                if let Some(t) = CpuTimes::parse_fields(line) {
                    let s = sum.get_or_insert(CpuTimes { idle: 0, total: 0 });
                    s.idle += t.idle;
                    s.total += t.total;
                }
            }
            if sum.is_some() {
                return sum;
            }
        }
        CpuTimes::parse(text.lines().next()?)
    }

    /// `cpu  user nice system idle iowait irq softirq steal ...`: idle counts idle and iowait.
    fn parse(line: &str) -> Option<CpuTimes> {
        if line.split_ascii_whitespace().next()? != "cpu" {
            return None;
        }
        CpuTimes::parse_fields(line)
    }

    /// The fields after the line's first word (`cpu` or `cpuN`).
    fn parse_fields(line: &str) -> Option<CpuTimes> {
        let mut f = line.split_ascii_whitespace();
        f.next()?;
        let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        Some(CpuTimes {
            idle,
            total: v.iter().sum(),
        })
    }

    /// Idle fraction between `earlier` and `self` (1.0 when nothing can be told).
    fn idle_since(self, earlier: Option<CpuTimes>) -> f64 {
        let Some(e) = earlier else { return 1.0 };
        let total = self.total.saturating_sub(e.total);
        if total == 0 {
            return 1.0;
        }
        self.idle.saturating_sub(e.idle) as f64 / total as f64
    }
}

/// Runs the monitor (and controller) until shutdown begins: samples every period and applies
/// the controller's allocations; through a quiet spell sleeps (see `Rouse` in `mod.rs`) until
/// work or shutdown (`stop` readable) comes.
pub(crate) fn run(p: &Pipeline, pc: &PipelineConfig, report: &Report, poll: Duration, stop: RawFd) {
    let ccfg = controller::Config {
        min_idle: pc.min_idle_cpu,
        early_s: pc.period.as_secs_f64() / 2.0,
        ..controller::Config::new(pc.threads_total, pc.initial())
    };
    let mut state = State::initial(&ccfg);
    let mut last = Last {
        at: Instant::now(),
        requests: p.lm.requests(),
        bytes: p.lm.bytes_out(),
        stages: std::array::from_fn(|k| p.stages[k].totals()),
        cpu: CpuTimes::read(),
    };
    let mut next_at = Instant::now() + pc.period;
    // Per stage, since when its tasks have waited without a break (as seen at the ticks
    // between samples), and the CPU counters from then or from the last sample, whichever is
    // later: the controller may answer a load in the period it began in, judging the idle
    // CPU from when the tasks began to wait rather than over the whole period.
    let mut pressure: [Option<(Instant, Option<CpuTimes>)>; 4] = [None; 4];
    loop {
        while Instant::now() < next_at {
            if p.app.shutdown.is_set() {
                return;
            }
            // Shutdown (`stop` readable) ends the wait at once: the listener closes without a
            // tick's delay, in which reconnecting clients would queue in its backlog only to
            // be reset.
            let _ = weft_sys::poll::poll_readable_any(
                &[stop],
                poll.min(next_at.saturating_duration_since(Instant::now())),
            );
            // The tick that ends the period is the sample's, which reads the queues itself.
            if pc.controller && Instant::now() < next_at {
                track_pressure(&mut pressure, &queues(p), CpuTimes::read);
            }
        }
        let now = Instant::now();
        // After a stall, sample once and start the next period from now (no catch-up burst).
        next_at = if now > next_at + pc.period {
            now + pc.period
        } else {
            next_at + pc.period
        };
        let dt = now.duration_since(last.at).as_secs_f64().max(1e-3);
        let requests = p.lm.requests();
        let bytes = p.lm.bytes_out();
        let w = requests.saturating_sub(last.requests) as f64 / dt;
        let r = bytes.saturating_sub(last.bytes) as f64 / dt;
        let u = pc.c1 * w + pc.c2 * r;
        let totals: [(u64, Duration); 4] = std::array::from_fn(|k| p.stages[k].totals());
        let service_us: [f64; 4] = std::array::from_fn(|k| {
            let n = totals[k].0.saturating_sub(last.stages[k].0);
            let t = totals[k].1.saturating_sub(last.stages[k].1);
            if n == 0 {
                0.0
            } else {
                t.as_secs_f64() * 1e6 / n as f64
            }
        });
        let cpu = CpuTimes::read();
        let cpu_idle = cpu.map_or(1.0, |c| c.idle_since(last.cpu));
        let queue = queues(p);
        track_pressure(&mut pressure, &queue, || cpu);
        let pressed_s: [f64; 4] = std::array::from_fn(|k| {
            pressure[k].map_or(0.0, |(since, _)| {
                now.saturating_duration_since(since).as_secs_f64()
            })
        });
        let idle_pressed: [f64; 4] = std::array::from_fn(|k| match (pressure[k], cpu) {
            (Some((_, from)), Some(c)) => c.idle_since(from),
            _ => 0.0,
        });
        // Pressure that goes on is judged, next period, on that period's CPU alone.
        for (_, from) in pressure.iter_mut().flatten() {
            *from = cpu;
        }
        let sample = Sample {
            queue,
            busy: std::array::from_fn(|k| p.stages[k].busy()),
            w,
            u,
            cpu_idle,
            pressed_s,
            idle_pressed,
        };
        if pc.controller {
            let alloc = controller::decide(&state, &sample, &ccfg);
            for (k, &n) in alloc.threads.iter().enumerate() {
                p.stages[k].set_active(n);
            }
            if alloc.threads != state.threads {
                log::debug!(
                    "{}: pipeline threads {:?} -> {:?} (queues {:?}, W {w:.0}/s, U {u:.2})",
                    p.lm.addr,
                    state.threads,
                    alloc.threads,
                    sample.queue
                );
            }
            state = alloc.next;
        }
        let threads: [usize; 4] = std::array::from_fn(|k| p.stages[k].active());
        {
            let mut v = report.view();
            v.w = w;
            v.r = r;
            v.u = u;
            v.service_us = service_us;
            v.cpu_idle = cpu_idle;
            if v.history.len() == HISTORY {
                v.history.pop_front();
            }
            v.history.push_back(Point {
                t: now.duration_since(report.started).as_secs_f64(),
                u,
                threads,
                queue: sample.queue,
            });
        }
        last = Last {
            at: now,
            requests,
            bytes,
            stages: totals,
            cpu,
        };
        let at_rest = !pc.controller || state.threads == ccfg.initial;
        if at_rest && quiet(&sample, r) && sleep_while_quiet(p, report, stop, requests) {
            // Awake again: the next sample covers the time from now, not the sleep, and counts
            // from the counters the quiet sample read (the request that woke the monitor may
            // be done already). The controller is left as idle periods would have left it:
            // nothing queued in memory, every stage calm (a queue of hundreds just before a
            // sleep must not read as pressure at the first task after it).
            let now = Instant::now();
            next_at = now + pc.period;
            pressure = [None; 4];
            last.at = now;
            last.cpu = CpuTimes::read();
            state.queue_avg = [0.0; 4];
            state.calm = [ccfg.calm_periods; 4];
        }
    }
}

/// Nothing happened over a period: no request, no bytes sent (`r` per second), nothing
/// queued or running at its end.
fn quiet(s: &Sample, r: f64) -> bool {
    s.w == 0.0 && r == 0.0 && s.queue.iter().all(|&q| q == 0) && s.busy.iter().all(|&b| b == 0)
}

/// Sleeps until work comes (`Rouse::work`) or `stop` turns readable, unless a last look, after
/// the monitor has said it sleeps, finds work queued or running or a request served since the
/// sample (`requests` then). True if it slept.
fn sleep_while_quiet(p: &Pipeline, report: &Report, stop: RawFd, requests: u64) -> bool {
    let rouse = &p.rouse;
    // A wake-up written after the last sleep ended (a hand-off that found the flag set just
    // before the monitor cleared it) would end this one at once.
    rouse.efd.drain();
    rouse.asleep.store(true, Relaxed);
    fence(SeqCst);
    let still = queues(p).iter().all(|&q| q == 0)
        && p.stages.iter().all(|s| s.busy() == 0)
        && p.lm.requests() == requests;
    if still {
        report.view().asleep = true;
        let _ = weft_sys::poll::poll_readable_any(&[rouse.efd.as_raw_fd(), stop], super::SLEEP);
        report.view().asleep = false;
    }
    rouse.asleep.store(false, Relaxed);
    still
}

/// Tasks waiting in each stage's queue (accept: connections in the listen backlog).
fn queues(p: &Pipeline) -> [usize; 4] {
    std::array::from_fn(|k| {
        if k == Stage::Accept as usize {
            p.accept_backlog()
        } else {
            p.stages[k].len()
        }
    })
}

/// Notes where pressure begins (with the CPU counters then, from `read_cpu`, called at most
/// once and only where pressure begins) and forgets it where a queue is empty: pressure
/// counts only while it lasts without a break.
fn track_pressure(
    pressure: &mut [Option<(Instant, Option<CpuTimes>)>; 4],
    queue: &[usize; 4],
    mut read_cpu: impl FnMut() -> Option<CpuTimes>,
) {
    let mut cpu = None;
    for (slot, &q) in pressure.iter_mut().zip(queue) {
        if q == 0 {
            *slot = None;
        } else if slot.is_none() {
            let c = *cpu.get_or_insert_with(&mut read_cpu);
            *slot = Some((Instant::now(), c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_counts_from_when_a_queue_filled_until_it_empties() {
        let mut p = [None; 4];
        track_pressure(&mut p, &[0, 0, 3, 0], CpuTimes::read);
        let (since, _) = p[2].expect("process's queue filled");
        assert!(p[0].is_none() && p[1].is_none() && p[3].is_none(), "{p:?}");
        std::thread::sleep(Duration::from_millis(2));
        // Still waiting: the onset stays where it was, whatever the queue's length now.
        track_pressure(&mut p, &[0, 1, 7, 0], CpuTimes::read);
        assert_eq!(p[2].map(|(t, _)| t), Some(since));
        let (recv_since, _) = p[1].expect("receive's queue filled");
        assert!(recv_since > since);
        // A tick with the queue empty ends it; the next task that waits starts anew.
        track_pressure(&mut p, &[0, 1, 0, 0], CpuTimes::read);
        assert!(p[2].is_none(), "{p:?}");
        assert_eq!(p[1].map(|(t, _)| t), Some(recv_since));
        track_pressure(&mut p, &[0, 1, 2, 0], CpuTimes::read);
        assert!(p[2].expect("filled again").0 > since);
    }

    #[test]
    fn pressure_takes_the_cpu_counters_it_is_given_once_and_only_at_an_onset() {
        let given = CpuTimes::parse("cpu  100 0 50 800 50 0 0 0 0 0");
        let mut reads = 0;
        let mut read = || {
            reads += 1;
            given
        };
        let mut p = [None; 4];
        // Two onsets in one call: one read, both noted with it.
        track_pressure(&mut p, &[0, 2, 3, 0], &mut read);
        assert_eq!(p[1].map(|(_, c)| c), Some(given));
        assert_eq!(p[2].map(|(_, c)| c), Some(given));
        // Pressure that goes on, or none: no read.
        track_pressure(&mut p, &[0, 2, 3, 0], &mut read);
        track_pressure(&mut p, &[0; 4], &mut read);
        assert_eq!(reads, 1);
    }

    #[test]
    fn proc_stat_cpu_line() {
        let a = CpuTimes::parse("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                idle: 850,
                total: 1000
            }
        );
        let b = CpuTimes::parse("cpu  180 0 70 850 50 0 0 0 0 0").unwrap();
        assert_eq!(b.idle_since(Some(a)), 50.0 / 150.0);
        assert_eq!(b.idle_since(None), 1.0);
        assert!(CpuTimes::parse("cpu0 1 2 3 4").is_none());
        assert!(CpuTimes::read().is_some(), "/proc/stat on Linux");
    }

    #[test]
    fn only_the_cpus_the_server_may_use_count() {
        let stat = "cpu  300 0 100 500 100 0 0 0 0 0\n\
                    cpu0 200 0 50 50 0 0 0 0 0 0\n\
                    cpu1 100 0 50 450 100 0 0 0 0 0\n\
                    intr 12345\n";
        // Pinned to CPU 0, which is busy: 50 idle of 300, though the machine is half idle.
        let t = CpuTimes::from_stat(stat, Some(&[0])).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                idle: 50,
                total: 300
            }
        );
        // CPU 1 only: its idle and iowait.
        let t = CpuTimes::from_stat(stat, Some(&[1])).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                idle: 550,
                total: 700
            }
        );
        // Both, no set, or a set naming no listed CPU: the whole machine.
        let all = CpuTimes {
            idle: 600,
            total: 1000,
        };
        assert_eq!(CpuTimes::from_stat(stat, Some(&[0, 1])), Some(all));
        assert_eq!(CpuTimes::from_stat(stat, None), Some(all));
        assert_eq!(CpuTimes::from_stat(stat, Some(&[2])), Some(all));
    }

    fn point(t: f64, threads: usize) -> Point {
        Point {
            t,
            u: 0.5,
            threads: [threads; 4],
            queue: [0; 4],
        }
    }

    /// The `d` of the chart's first line (the accept stage's threads).
    fn first_path(svg: &str) -> &str {
        let at = svg.find(" d=\"").expect("a path") + 4;
        &svg[at..at + svg[at..].find('"').expect("its end")]
    }

    #[test]
    fn the_chart_spaces_samples_by_time_and_breaks_where_the_monitor_slept() {
        let period = Duration::from_millis(250);
        // Four samples a period apart, a sleep of ten seconds, two more.
        let h: VecDeque<Point> = [0.0, 0.25, 0.5, 0.75, 10.75, 11.0]
            .iter()
            .map(|&t| point(t, 2))
            .collect();
        let svg = chart(&h, 4, period);
        let d = first_path(&svg);
        let steps: Vec<&str> = d.split(' ').collect();
        assert_eq!(steps.len(), 6, "{d}");
        // One line before the sleep, one after it.
        assert_eq!(
            steps.iter().filter(|s| s.starts_with('M')).count(),
            2,
            "{d}"
        );
        assert!(steps[4].starts_with('M'), "{d}");
        // x by time over 600 px: 0.75 s of 11 s is 40.9 px, 10.75 s is 586.4 px; y: 2 of 4
        // threads is half the 160 px height.
        assert_eq!(steps[0], "M0.0,80.0");
        assert_eq!(steps[3], "L40.9,80.0");
        assert_eq!(steps[4], "M586.4,80.0");
        assert_eq!(steps[5], "L600.0,80.0");
        assert!(svg.contains("6 samples, 11 s"), "{svg}");
        // Without the sleep, one unbroken line.
        let even: VecDeque<Point> = (0..6).map(|i| point(f64::from(i) * 0.25, 1)).collect();
        let d = first_path(&chart(&even, 4, period)).to_string();
        assert_eq!(d.matches('M').count(), 1, "{d}");
        // Fewer than two samples: no chart.
        assert_eq!(chart(&VecDeque::from([point(0.0, 1)]), 4, period), "");
    }

    #[test]
    fn a_sleeping_monitor_says_its_figures_are_the_last_samples() {
        let report = Report {
            pipeline: Weak::new(),
            controller: true,
            threads_total: 8,
            period: Duration::from_millis(250),
            started: Instant::now(),
            view: Mutex::new(View {
                cpu_idle: 0.4,
                ..View::default()
            }),
        };
        assert_eq!(report.json()["sampling"], true);
        assert!(!report.html().contains("last sample"));
        report.view().asleep = true;
        let j = report.json();
        assert_eq!(j["sampling"], false, "{j}");
        assert_eq!(j["cpu_idle"], 0.4, "{j}");
        let html = report.html();
        assert!(
            html.contains("CPU idle 40% (last sample; the monitor sleeps until work comes)"),
            "{html}"
        );
    }
}
