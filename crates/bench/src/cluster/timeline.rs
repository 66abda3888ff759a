//! The timeline: the open loop through every instance on the client's cores and namespace,
//! and the plan's events done to the instances while it runs, each with a note of what
//! happened (exit statuses, how long a drain or an upgrade took).

use std::error::Error;
use std::io;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::hosts::Hosts;
use super::instance::{describe_status, signal, Instance};
use super::openloop::{open_loop, Sample};
use super::pin::pin_self;
use super::plan::{Action, Plan};
use super::{Setup, FRONT_ALL, SHUTDOWN_GRACE};
use crate::netns::Netns;
use crate::target::Target;
use weft_sys::signal::{SIGKILL, SIGTERM};

/// An event done: seconds from the start of the load, what, and what happened.
pub(crate) type Done = (f64, Action, String);

/// What the timeline gave.
pub(crate) struct Timeline {
    /// When the load's clock started.
    pub(crate) start: Instant,
    pub(crate) done: Vec<Done>,
    /// Every request of the open loop.
    pub(crate) samples: Vec<Sample>,
}

/// The open loop through every instance, with the plan's events on its timeline.
pub(crate) fn run(setup: &Setup, hosts: &mut Hosts) -> Result<Timeline, Box<dyn Error>> {
    let plan = &setup.plan;
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
    let targets = [
        setup.target(FRONT_ALL, false)?,
        setup.target(FRONT_ALL, true)?,
    ];
    // The load's clock starts a little ahead, so that its connections exist before it.
    let start = Instant::now() + Duration::from_millis(200);
    let load = start_load(plan, &setup.layout.client, &hosts.client, targets, start);
    let mut done: Vec<Done> = Vec::new();
    for &(at, action) in &plan.events {
        let when = start + Duration::from_secs_f64(at);
        weft_fiber::sleep_until(when);
        let t = start.elapsed().as_secs_f64();
        let note = perform(action, &mut hosts.instances, setup, start, t)?;
        eprintln!("  {t:6.2} s {}: {note}", action.name());
        done.push((t, action, note));
    }
    let samples = load
        .join()
        .map_err(|_| io::Error::other("the load thread panicked"))??;
    Ok(Timeline {
        start,
        done,
        samples,
    })
}

/// The open loop on a thread of its own, pinned to the client's `cores` and in its
/// namespace for good (the loop's runtime workers are born there).
fn start_load(
    plan: &Plan,
    cores: &[usize],
    client: &Netns,
    targets: [Target; 2],
    start: Instant,
) -> JoinHandle<io::Result<Vec<Sample>>> {
    let plan = plan.clone();
    let ns_name = client.name.clone();
    let cores = cores.to_vec();
    std::thread::spawn(move || -> io::Result<Vec<Sample>> {
        pin_self(&cores)?;
        Netns::enter_for_good(&ns_name)?;
        open_loop(targets, start, &plan)
    })
}

/// Does `action`, `t` seconds after `start`; what happened.
fn perform(
    action: Action,
    instances: &mut [Instance],
    setup: &Setup,
    start: Instant,
    t: f64,
) -> Result<String, Box<dyn Error>> {
    Ok(match action {
        Action::Drain(i) => {
            let inst = &mut instances[i];
            let pid = inst.pid.take().ok_or("drain: not running")?;
            signal(pid, SIGTERM);
            let st = inst.reap_one(pid, SHUTDOWN_GRACE + Duration::from_secs(2));
            let t_exit = start.elapsed().as_secs_f64() - t;
            format!("{}; exited after {t_exit:.3} s", describe_status(st))
        }
        Action::Kill(i) => {
            let inst = &mut instances[i];
            let pid = inst.pid.take().ok_or("kill: not running")?;
            signal(pid, SIGKILL);
            describe_status(inst.reap_one(pid, Duration::from_secs(2)))
        }
        Action::Restart(i) => {
            instances[i].start(&setup.weft)?;
            format!("ready after {:.3} s", start.elapsed().as_secs_f64() - t)
        }
        Action::Rolling => rolling(instances, start)?,
    })
}

/// Upgrades each instance in turn (SIGUSR2), the next once this one's old process has
/// drained and exited; what happened to each.
fn rolling(instances: &mut [Instance], start: Instant) -> Result<String, Box<dyn Error>> {
    let mut parts = Vec::new();
    for inst in instances.iter_mut() {
        let old = inst.pid.ok_or("upgrade: not running")?;
        let t0 = start.elapsed().as_secs_f64();
        let new = inst.upgrade()?;
        let ready = start.elapsed().as_secs_f64() - t0;
        let st = inst.reap_one(old, SHUTDOWN_GRACE + Duration::from_secs(2));
        parts.push(format!(
            "{} {old} -> {new} ready after {ready:.3} s, old {} after {:.3} s",
            inst.name,
            describe_status(st),
            start.elapsed().as_secs_f64() - t0
        ));
    }
    Ok(parts.join("; "))
}
