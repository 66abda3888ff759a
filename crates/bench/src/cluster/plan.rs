//! The run's shape: how long and how fast the open loop runs, the closed-loop scaling rounds,
//! and the deployment events on the timeline ([`Action`]).

/// What happens to the instances, and when (seconds from the start of the load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// SIGTERM: weft drains (health 503, idle connections close, open requests finish).
    Drain(usize),
    /// Start the instance again after a drain or a kill.
    Restart(usize),
    /// SIGUSR2 to every instance in turn, each waiting for the new process to be ready.
    Rolling,
    /// SIGKILL: the requests in flight on it are lost.
    Kill(usize),
}

impl Action {
    pub(crate) fn name(&self) -> String {
        match self {
            Action::Drain(i) => format!("drain w{} (SIGTERM)", i + 1),
            Action::Restart(i) => format!("restart w{}", i + 1),
            Action::Rolling => "rolling upgrade (SIGUSR2 each in turn)".into(),
            Action::Kill(i) => format!("kill w{} (SIGKILL)", i + 1),
        }
    }

    /// The key the CSV and the test use.
    pub(crate) fn key(&self) -> &'static str {
        match self {
            Action::Drain(_) => "drain",
            Action::Restart(_) => "restart",
            Action::Rolling => "rolling",
            Action::Kill(_) => "kill",
        }
    }
}

/// A run's shape.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Length of the open-loop load.
    pub secs: f64,
    /// Requests per second of the open loop (half on keep-alive connections, half on a
    /// connection per request).
    pub rate: f64,
    /// Client connections of the open loop (even: keep-alive, odd: one per request).
    pub connections: usize,
    /// Each closed-loop scaling run (one instance, then all).
    pub scale_secs: f64,
    /// Rounds of the two scaling runs (the report takes the median of the rounds' ratios).
    pub scale_rounds: usize,
    /// (seconds from the start, what).
    pub events: Vec<(f64, Action)>,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        // Each event leaves time for HAProxy to notice (FALL x CHECK_INTER = 1 s) and for the
        // drained process to exit (within SHUTDOWN_GRACE, in practice at once) before the next.
        let k = if quick { 0.45 } else { 1.0 };
        Plan {
            secs: if quick { 20.0 } else { 44.0 },
            rate: if quick { 300.0 } else { 600.0 },
            connections: 64,
            scale_secs: if quick { 2.0 } else { 4.0 },
            scale_rounds: if quick { 1 } else { 5 },
            events: vec![
                (5.0 * k, Action::Drain(0)),
                (11.0 * k, Action::Restart(0)),
                (17.0 * k, Action::Rolling),
                (29.0 * k, Action::Kill(1)),
                (36.0 * k, Action::Restart(1)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_keeps_events_inside_the_run_in_order() {
        for quick in [true, false] {
            let p = Plan::new(quick);
            let mut last = 0.0;
            for (t, _) in &p.events {
                assert!(*t > last && *t < p.secs, "{p:?}");
                last = *t;
            }
            // Every instance stopped is started again before the end.
            for (t, a) in &p.events {
                if let Action::Drain(i) | Action::Kill(i) = a {
                    assert!(p
                        .events
                        .iter()
                        .any(|(u, b)| *b == Action::Restart(*i) && u > t));
                }
            }
        }
    }
}
