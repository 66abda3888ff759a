//! The thread-allocation controller: a pure function from the current allocation, one load
//! sample and the tuning to the next allocation.
//!
//! The paper's rule (§4.2) grows stage k by `a_k * T_k + b_k * ΔW` threads (T_k its waiting
//! tasks, ΔW the change of the request rate), rounded up, in funnel order send, process,
//! receive, accept, within a total M; at M it moves threads from earlier stages to the
//! bottleneck, and at low load it returns to the initial allocation. SEDA's controller added
//! one thread per period while a queue passed a threshold. This one keeps the paper's shape
//! and adds what both lack:
//!
//! - **Hysteresis.** A stage grows only while its smoothed queue (EWMA, α = ½) is at least
//!   `grow_at` *and* tasks wait now *and* the pressure has lasted: it was there in the
//!   previous period too, or the monitor (which looks at the queues every 25 ms between
//!   samples) saw it without a break for `early_s` (half a period); it gives a thread back
//!   only after `calm_periods` consecutive periods with an empty queue and a thread idle at
//!   the sample. Between the two (a queue of one, or empty but every thread busy) it holds.
//!   So a steady load that the allocation copes with produces no moves, and a burst shorter
//!   than half a period none at all.
//! - **Proportional, bounded steps.** Growth is `ceil(a_k * queue + b_k * rise)`, where `rise`
//!   is the relative increase of W (an absolute ΔW would make the gain depend on the load's
//!   scale), capped at `max_step` per period (default 3/4 of M: a saturating step is met in
//!   one move; every thread a period late costs its share of the run).
//! - **Donors are earlier stages that are not under pressure**, taken from the front of the
//!   pipeline first (accept, then receive, ...), never below one thread, so moving threads
//!   "toward later stages" cannot starve a stage that is itself queueing; **then later stages
//!   that have been calm for a whole window**, which lend only the threads idle at the sample.
//!   When a blocking handler makes process the bottleneck, the send stage (which never
//!   blocks: a partial write waits in the poller) needs one thread, not its initial share;
//!   without the loan, process stops a thread short of what the best fixed allocation gives
//!   it (in `scripts/paper-runs/pipeline_alloc.sh` with DYNAMIC=30: 1/1/12/2 served 7,313 ops/s,
//!   1/1/13/1 8,001). A lender gets threads back from the free pool or from an earlier stage
//!   that is not queueing, not from a borrower that still queues.
//! - **No growth without idle CPU.** A queue can form because a stage's threads block (a
//!   handler waiting on a disk or an upstream: more threads help) or because the CPU is
//!   saturated (more threads only add switching and contention: in a quick wrk run on 2
//!   cores, growing a CPU-bound pipeline took it from about 58k to 54k requests/s). So a stage
//!   grows only while at least `min_idle` of the CPU it may run on was idle over the period
//!   (or, for growth in a load's first period, since its tasks began to wait); otherwise the
//!   allocation holds.
//! - **Return to the initial allocation** at once after `calm_periods` of low utilization
//!   (U < `low_u`) with every queue empty, and one thread per calm window otherwise (a stage
//!   above its initial share shrinks; one below it, a donor, grows back while threads are free).

/// A stage of the pipeline. Its value is its position in pipeline order, which indexes every
/// per-stage array (`[T; 4]`, `Stage as usize`): the controller's arithmetic over positions
/// ("earlier", "later" stages) stays plain index arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Accept = 0,
    Receive = 1,
    Process = 2,
    Send = 3,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 4] = [Stage::Accept, Stage::Receive, Stage::Process, Stage::Send];

    /// The stage's name (thread names, status page, logs).
    pub const fn name(self) -> &'static str {
        STAGES[self as usize]
    }
}

/// Stage names in pipeline order.
pub const STAGES: [&str; 4] = ["accept", "receive", "process", "send"];
/// Order in which stages are served when threads are scarce: the funnel's narrow end first.
pub const FUNNEL: [usize; 4] = [
    Stage::Send as usize,
    Stage::Process as usize,
    Stage::Receive as usize,
    Stage::Accept as usize,
];

/// One load-monitor sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    /// Tasks waiting in each stage's queue (accept: connections in the listen backlog).
    pub queue: [usize; 4],
    /// Threads of each stage running a task at the sample.
    pub busy: [usize; 4],
    /// Requests per second over the period.
    pub w: f64,
    /// Utilization U = c1*W + c2*R (1.0: the server's measured capacity).
    pub u: f64,
    /// Fraction of the machine's CPU time that was idle over the period (0.0 to 1.0).
    pub cpu_idle: f64,
    /// Per stage, how long (seconds) tasks have waited without a break up to the sample, as
    /// the monitor saw it between samples (0 when the queue is empty now).
    pub pressed_s: [f64; 4],
    /// Per stage, the idle fraction of the CPU since that pressure began.
    pub idle_pressed: [f64; 4],
}

/// What the controller remembers between periods.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// Threads allotted to each stage.
    pub threads: [usize; 4],
    /// Smoothed queue lengths.
    pub queue_avg: [f64; 4],
    /// Consecutive calm periods per stage (empty queue).
    pub calm: [u32; 4],
    /// Consecutive periods of low load.
    pub low: u32,
    /// W of the previous period.
    pub prev_w: f64,
}

impl State {
    /// The state at start: the initial allocation, nothing remembered.
    pub fn initial(cfg: &Config) -> State {
        State {
            threads: cfg.initial,
            queue_avg: [0.0; 4],
            calm: [0; 4],
            low: 0,
            prev_w: 0.0,
        }
    }
}

/// The controller's tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Most threads of all stages together (M).
    pub total: usize,
    /// The initial allocation, returned to at low load.
    pub initial: [usize; 4],
    /// Smoothed queue length from which a stage grows.
    pub grow_at: f64,
    /// Threads per waiting task, per stage (the paper's a_k).
    pub a: [f64; 4],
    /// Threads per unit of relative increase of W, per stage (the paper's b_k).
    pub b: [f64; 4],
    /// Most threads one stage gains in one period.
    pub max_step: usize,
    /// Calm periods before a stage gives a thread back (and low-load periods before the
    /// return to the initial allocation).
    pub calm_periods: u32,
    /// Utilization below which the load counts as low.
    pub low_u: f64,
    /// Idle CPU fraction below which no stage grows (threads cannot run anyway).
    pub min_idle: f64,
    /// Pressure without a break for this long (seconds) with idle CPU since it began lets a
    /// stage grow in the first period of a load (default: half the 250 ms period).
    pub early_s: f64,
}

impl Config {
    /// Defaults for total `total` and initial allocation `initial`: the later the stage, the
    /// more threads per waiting task (the paper's funnel).
    pub fn new(total: usize, initial: [usize; 4]) -> Config {
        Config {
            total,
            initial,
            grow_at: 2.0,
            a: [0.25, 0.25, 0.5, 0.5],
            b: [0.0, 1.0, 1.0, 2.0],
            // Enough to give the bottleneck, in one period, the threads the funnel holds
            // beyond one per stage (2 -> 13 at M = 16): a saturating load step is answered
            // in one move, not over four; the rule that pressure must last (two periods, or
            // `early_s` without a break), not the step's size, is what keeps a single noisy
            // sample from moving threads.
            max_step: (total * 3 / 4).max(1),
            calm_periods: 4,
            low_u: 0.05,
            min_idle: 0.1,
            early_s: 0.125,
        }
    }
}

/// The controller's decision: the threads per stage from now on, and the state to pass to
/// the next call.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub threads: [usize; 4],
    pub next: State,
}

/// Decides the next allocation. Invariants: every stage keeps at least one thread and the
/// total never exceeds `cfg.total` (given an initial allocation that fits).
pub fn decide(state: &State, s: &Sample, cfg: &Config) -> Allocation {
    let mut next = state.clone();
    for k in 0..4 {
        next.queue_avg[k] = 0.5 * state.queue_avg[k] + 0.5 * s.queue[k] as f64;
    }
    let rise = if state.prev_w > 0.0 {
        ((s.w - state.prev_w) / state.prev_w).max(0.0)
    } else {
        0.0
    };
    next.prev_w = s.w;
    let mut threads = state.threads;

    let idle_queues = s.queue.iter().all(|&q| q == 0);
    next.low = if s.u < cfg.low_u && idle_queues {
        state.low + 1
    } else {
        0
    };
    if next.low >= cfg.calm_periods && threads != cfg.initial {
        next.calm = [0; 4];
        // The smoothed queues still remember the load that has gone (a queue of hundreds
        // takes a second and more to decay below `grow_at`): forget it, or the first task
        // or two waiting at the low load would count as pressure.
        next.queue_avg = [0.0; 4];
        next.threads = cfg.initial;
        return Allocation {
            threads: cfg.initial,
            next,
        };
    }

    let pressed: [bool; 4] =
        std::array::from_fn(|k| next.queue_avg[k] >= cfg.grow_at && s.queue[k] > 0);
    let cap = cfg.total.saturating_sub(3).max(1);
    for k in FUNNEL {
        // Growth needs pressure that lasts, with CPU to spare while it lasted. Either over
        // two periods (this one's idle CPU counted over the whole period), or, in the period
        // a load begins in, for at least `early_s` without a break with idle CPU counted from
        // when it began: that period's own idle fraction includes the time before the load,
        // and growing on it would add threads that a CPU-bound load then keeps (its queues
        // never drain for the calm rule).
        let two_periods =
            pressed[k] && state.queue_avg[k] >= cfg.grow_at && s.cpu_idle >= cfg.min_idle;
        let early =
            pressed[k] && s.pressed_s[k] >= cfg.early_s && s.idle_pressed[k] >= cfg.min_idle;
        if !two_periods && !early {
            continue;
        }
        let raw = cfg.a[k] * next.queue_avg[k] + cfg.b[k] * rise;
        let mut want = (raw.ceil() as usize)
            .clamp(1, cfg.max_step.max(1))
            .min(cap.saturating_sub(threads[k]));
        let free = cfg.total.saturating_sub(threads.iter().sum());
        let take = want.min(free);
        threads[k] += take;
        want -= take;
        for n in 0..k {
            if want == 0 {
                break;
            }
            if pressed[n] {
                continue;
            }
            let give = want.min(threads[n].saturating_sub(1));
            threads[n] -= give;
            threads[k] += give;
            want -= give;
            if give > 0 {
                next.calm[n] = 0;
            }
        }
        // Then later stages that have had nothing waiting for a whole calm window lend the
        // threads they leave idle (keeping those busy now, and at least one).
        for n in (k + 1)..4 {
            if want == 0 {
                break;
            }
            // Calm through this period too (checked before the calm rule below would hand a
            // thread above the initial share back to the free pool instead).
            if pressed[n] || s.queue[n] > 0 || state.calm[n] + 1 < cfg.calm_periods {
                continue;
            }
            let give = want.min(threads[n].saturating_sub(s.busy[n].max(1)));
            threads[n] -= give;
            threads[k] += give;
            want -= give;
            if give > 0 {
                next.calm[n] = 0;
            }
        }
    }

    for k in 0..4 {
        if s.queue[k] > 0 {
            next.calm[k] = 0;
            continue;
        }
        next.calm[k] += 1;
        if next.calm[k] < cfg.calm_periods {
            continue;
        }
        let free = cfg.total.saturating_sub(threads.iter().sum());
        if threads[k] > cfg.initial[k] && s.busy[k] < threads[k] {
            threads[k] -= 1;
            next.calm[k] = 0;
        } else if threads[k] < cfg.initial[k] && free > 0 {
            threads[k] += 1;
            next.calm[k] = 0;
        }
    }
    next.threads = threads;
    Allocation { threads, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCEPT: usize = Stage::Accept as usize;
    const RECEIVE: usize = Stage::Receive as usize;
    const PROCESS: usize = Stage::Process as usize;
    const SEND: usize = Stage::Send as usize;

    #[test]
    fn stages_index_their_arrays_in_pipeline_order() {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["accept", "receive", "process", "send"]);
        for (k, s) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, k, "{s:?}");
        }
        // The funnel's narrow end (send) first.
        assert_eq!(FUNNEL, [3, 2, 1, 0]);
    }

    fn cfg() -> Config {
        Config::new(12, [1, 2, 2, 2])
    }

    /// A sample with half the CPU idle.
    fn sample(queue: [usize; 4], busy: [usize; 4], w: f64, u: f64) -> Sample {
        Sample {
            queue,
            busy,
            w,
            u,
            cpu_idle: 0.5,
            pressed_s: [0.0; 4],
            idle_pressed: [0.0; 4],
        }
    }

    /// Runs the controller over `samples`, returning the allocation after each.
    fn run(cfg: &Config, samples: &[Sample]) -> Vec<[usize; 4]> {
        run_from(cfg, State::initial(cfg), samples)
    }

    /// Runs the controller from `st` over `samples`, returning the allocation after each.
    fn run_from(cfg: &Config, mut st: State, samples: &[Sample]) -> Vec<[usize; 4]> {
        samples
            .iter()
            .map(|s| {
                let a = decide(&st, s, cfg);
                assert_eq!(a.threads, a.next.threads);
                st = a.next;
                a.threads
            })
            .collect()
    }

    fn check_bounds(cfg: &Config, allocs: &[[usize; 4]]) {
        for a in allocs {
            assert!(a.iter().sum::<usize>() <= cfg.total, "over M: {a:?}");
            assert!(
                a.iter().all(|&t| t >= 1),
                "a stage lost its last thread: {a:?}"
            );
        }
    }

    #[test]
    fn grows_the_bottleneck_stage() {
        // Room to grow without reaching M.
        let c = Config::new(32, [1, 2, 2, 2]);
        // The process stage queues (a handler that blocks); the others keep up.
        let s = sample([0, 0, 12, 0], [0, 1, 2, 1], 2000.0, 0.5);
        let allocs = run(&c, &[s.clone(), s.clone(), s]);
        check_bounds(&c, &allocs);
        // One period of pressure is not yet a trend; the second grows the stage.
        assert_eq!(allocs[0], c.initial, "{allocs:?}");
        assert!(allocs[1][PROCESS] > 2, "{allocs:?}");
        assert!(allocs[2][PROCESS] > allocs[1][PROCESS], "{allocs:?}");
        for k in [ACCEPT, RECEIVE, SEND] {
            assert_eq!(allocs[2][k], c.initial[k], "stage {k} moved: {allocs:?}");
        }
    }

    #[test]
    fn a_saturated_cpu_holds_the_allocation_although_tasks_wait() {
        let c = cfg();
        let busy_cpu = Sample {
            cpu_idle: 0.02,
            ..sample([0, 20, 20, 20], [1, 2, 2, 2], 50_000.0, 1.2)
        };
        let mut samples = vec![busy_cpu.clone(); 20];
        let allocs = run(&c, &samples);
        assert!(allocs.iter().all(|a| *a == c.initial), "{allocs:?}");
        // Once threads could run, the bottleneck grows.
        let idle_cpu = Sample {
            cpu_idle: 0.5,
            ..busy_cpu.clone()
        };
        samples.push(idle_cpu.clone());
        let allocs = run(&c, &samples);
        assert!(allocs[20][SEND] > c.initial[SEND], "{allocs:?}");

        // A load that starts within a period: that period still shows the idle CPU from
        // before the load, the next ones a saturated core. Nothing grows.
        let mut samples = vec![sample([0; 4], [0; 4], 0.0, 0.0); 4];
        samples.push(idle_cpu);
        samples.extend(vec![busy_cpu; 20]);
        let allocs = run(&c, &samples);
        assert!(allocs.iter().all(|a| *a == c.initial), "{allocs:?}");
    }

    #[test]
    fn rising_request_rate_grows_a_queueing_stage_faster() {
        let c = cfg();
        let st = State {
            prev_w: 1000.0,
            queue_avg: [0.0, 0.0, 0.0, 4.0],
            ..State::initial(&c)
        };
        let steady = decide(&st, &sample([0, 0, 0, 4], [0; 4], 1000.0, 0.5), &c);
        let rising = decide(&st, &sample([0, 0, 0, 4], [0; 4], 2000.0, 0.5), &c);
        assert!(
            rising.threads[SEND] > steady.threads[SEND],
            "{steady:?} {rising:?}"
        );
    }

    #[test]
    fn never_exceeds_m_and_never_empties_a_stage() {
        let c = cfg();
        // Every stage under heavy pressure, for long: a deterministic pseudo-random mix.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let samples: Vec<Sample> = (0..400)
            .map(|_| {
                let q = std::array::from_fn(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 50) as usize
                });
                sample(q, [3; 4], (x % 10_000) as f64, (x % 200) as f64 / 100.0)
            })
            .collect();
        let allocs = run(&c, &samples);
        check_bounds(&c, &allocs);
        let all = sample([100; 4], [12; 4], 5000.0, 1.5);
        let allocs = run(&c, &vec![all; 50]);
        check_bounds(&c, &allocs);
        assert_eq!(allocs.last().unwrap().iter().sum::<usize>(), c.total);
    }

    #[test]
    fn at_m_moves_threads_from_earlier_stages_to_the_later_bottleneck() {
        let c = cfg();
        // Fill the budget: send grows until M is reached.
        let send_bound = sample([0, 0, 0, 40], [0, 1, 1, 6], 3000.0, 0.9);
        let allocs = run(&c, &vec![send_bound; 20]);
        check_bounds(&c, &allocs);
        let last = *allocs.last().unwrap();
        assert_eq!(last.iter().sum::<usize>(), c.total, "{allocs:?}");
        // Earlier stages, not queueing, gave threads to send, down to one each.
        assert_eq!(last, [1, 1, 1, c.total - 3], "{allocs:?}");
        // A later stage whose threads are all busy gives none to an earlier one: with
        // process queueing and every send thread at work, send keeps its threads.
        let st = State {
            threads: last,
            ..State::initial(&c)
        };
        let s = sample([0, 0, 40, 0], [0, 1, 1, 9], 3000.0, 0.9);
        let threads = *run_from(&c, st, &vec![s; 10]).last().unwrap();
        assert_eq!(threads[SEND], last[SEND], "{threads:?}");
        assert!(threads.iter().sum::<usize>() <= c.total);
    }

    #[test]
    fn a_calm_later_stage_lends_its_idle_threads_to_an_earlier_bottleneck() {
        let c = cfg();
        // At M; process queues behind a blocking handler; send has had nothing waiting and
        // uses one of its four threads.
        let st = State {
            threads: [1, 1, 6, 4],
            ..State::initial(&c)
        };
        let s = sample([0, 0, 40, 0], [0, 1, 6, 1], 2000.0, 0.3);
        let allocs = run_from(&c, st.clone(), &vec![s; 12]);
        check_bounds(&c, &allocs);
        // Not before send has been calm for a whole window (this sample the last of it).
        for a in &allocs[..c.calm_periods as usize - 1] {
            assert_eq!(a[SEND], 4, "{allocs:?}");
        }
        // Then, in the period that completes the window, its idle threads go to process,
        // down to the one it uses.
        assert_eq!(
            allocs[c.calm_periods as usize - 1],
            [1, 1, 9, 1],
            "{allocs:?}"
        );
        assert_eq!(*allocs.last().unwrap(), [1, 1, 9, 1], "{allocs:?}");

        // Two send threads busy: it keeps both and lends the other two.
        let s2 = sample([0, 0, 40, 0], [0, 1, 6, 2], 2000.0, 0.3);
        let allocs = run_from(&c, st.clone(), &vec![s2; 12]);
        assert_eq!(*allocs.last().unwrap(), [1, 1, 8, 2], "{allocs:?}");

        // A send stage with a task waiting now, or every thread busy, lends nothing.
        for s in [
            sample([0, 0, 40, 1], [0, 1, 6, 1], 2000.0, 0.3),
            sample([0, 0, 40, 0], [0, 1, 6, 4], 2000.0, 0.3),
        ] {
            let allocs = run_from(&c, st.clone(), &vec![s.clone(); 12]);
            assert_eq!(*allocs.last().unwrap(), [1, 1, 6, 4], "{s:?}");
        }
    }

    #[test]
    fn a_load_step_gets_the_bottlenecks_allocation_in_one_move() {
        // M = 16 from the start 1 2 2 2; idle, then a load whose dynamic requests block
        // process's threads on an upstream (hundreds waiting; send keeps up with one thread).
        let c = Config::new(16, [1, 2, 2, 2]);
        let mut samples = vec![sample([0; 4], [0; 4], 0.0, 0.0); 6];
        samples.extend(vec![sample([0, 0, 280, 0], [0, 1, 2, 1], 1200.0, 0.2); 6]);
        let allocs = run(&c, &samples);
        check_bounds(&c, &allocs);
        // The first loaded period holds (one period is not a trend); the second moves
        // process to M - 3 at once: the free pool, receive's spare thread, and send's
        // idle one (calm through the idle periods); then nothing moves.
        assert_eq!(allocs[6], c.initial, "{allocs:?}");
        assert_eq!(allocs[7], [1, 1, 13, 1], "{allocs:?}");
        assert!(allocs[7..].iter().all(|a| *a == allocs[7]), "{allocs:?}");
    }

    #[test]
    fn from_the_servers_default_start_a_blocking_load_reaches_the_bottlenecks_allocation() {
        // The server's default start at M = 16 (1 1 4 4: what a CPU-bound load keeps, since
        // nothing grows without idle CPU).
        let c = Config::new(16, crate::config::PipelineConfig::default_initial(16));
        assert_eq!(c.initial, [1, 1, 4, 4]);
        let idle = vec![sample([0; 4], [0; 4], 0.0, 0.0); 6];
        // Send calm through the idle periods and keeping up with one thread: process gets
        // the free pool and send's idle threads in one move.
        let mut samples = idle.clone();
        samples.extend(vec![sample([0, 0, 280, 0], [0, 1, 4, 1], 1200.0, 0.2); 6]);
        let allocs = run(&c, &samples);
        check_bounds(&c, &allocs);
        assert_eq!(allocs[7], [1, 1, 13, 1], "{allocs:?}");
        assert!(allocs[7..].iter().all(|a| *a == allocs[7]), "{allocs:?}");
        // A task waiting in send as the load begins: process takes the free pool at once,
        // and send's idle threads once send has been calm for a whole window.
        let mut samples = idle;
        samples.extend(vec![sample([0, 0, 280, 1], [0, 1, 4, 1], 1200.0, 0.2); 2]);
        samples.extend(vec![sample([0, 0, 280, 0], [0, 1, 10, 1], 1200.0, 0.2); 6]);
        let allocs = run(&c, &samples);
        check_bounds(&c, &allocs);
        assert_eq!(allocs[7], [1, 1, 10, 4], "{allocs:?}");
        assert_eq!(*allocs.last().unwrap(), [1, 1, 13, 1], "{allocs:?}");
    }

    #[test]
    fn a_load_that_blocks_threads_is_answered_in_the_period_it_began_in() {
        let c = Config::new(16, [1, 2, 2, 2]);
        let idle = vec![sample([0; 4], [0; 4], 0.0, 0.0); 6];
        let loaded = |pressed: f64, idle_pressed: f64| {
            let mut s = sample([0, 0, 280, 0], [0, 1, 2, 1], 1200.0, 0.2);
            s.pressed_s[PROCESS] = pressed;
            s.idle_pressed[PROCESS] = idle_pressed;
            s
        };
        // Process's tasks have waited for 150 ms without a break and the CPU was mostly idle
        // meanwhile (its threads block on an upstream): the first sample moves it to M - 3.
        let mut samples = idle.clone();
        samples.push(loaded(0.15, 0.8));
        let allocs = run(&c, &samples);
        assert_eq!(allocs[6], [1, 1, 13, 1], "{allocs:?}");

        // The same queue with the CPU saturated since the load began (the period's own idle
        // fraction, 0.5, is from before it): a CPU-bound load. Nothing grows, then or later.
        let mut samples = idle.clone();
        samples.push(loaded(0.15, 0.02));
        let mut busy = loaded(0.4, 0.02);
        busy.cpu_idle = 0.02;
        samples.extend(vec![busy; 10]);
        let allocs = run(&c, &samples);
        assert!(allocs.iter().all(|a| *a == c.initial), "{allocs:?}");

        // Pressure seen for only 50 ms of the period (a burst, or a load that began late in
        // it): wait for the next period.
        let mut samples = idle;
        samples.push(loaded(0.05, 0.8));
        let allocs = run(&c, &samples);
        assert_eq!(allocs[6], c.initial, "{allocs:?}");
    }

    #[test]
    fn a_queueing_earlier_stage_is_not_a_donor() {
        let c = cfg();
        let st = State {
            threads: [1, 4, 2, 5],
            queue_avg: [0.0, 10.0, 0.0, 10.0],
            ..State::initial(&c)
        };
        let a = decide(&st, &sample([0, 10, 0, 10], [1, 4, 1, 5], 1000.0, 0.8), &c);
        // At M: send takes process's spare thread (calm) but none from receive (queueing),
        // and receive finds no donor (accept is at its minimum).
        assert_eq!(a.threads, [1, 4, 1, 6], "{a:?}");
    }

    #[test]
    fn returns_to_the_initial_allocation_at_low_load() {
        let c = cfg();
        let heavy = sample([2, 10, 30, 30], [1, 2, 4, 6], 5000.0, 0.95);
        let mut samples = vec![heavy; 10];
        let low = sample([0; 4], [0; 4], 5.0, 0.001);
        samples.extend(vec![low; 10]);
        let allocs = run(&c, &samples);
        check_bounds(&c, &allocs);
        assert_ne!(allocs[9], c.initial, "never grew: {allocs:?}");
        assert_eq!(*allocs.last().unwrap(), c.initial, "{allocs:?}");
    }

    #[test]
    fn after_the_return_a_light_load_does_not_grow_on_the_old_loads_queues() {
        let c = Config::new(16, [1, 2, 2, 2]);
        // A heavy load with hundreds waiting at process, then three clients: the queue
        // drains, the load is low for a calm window, and the allocation returns.
        let mut samples = vec![sample([0, 0, 290, 0], [0, 1, 13, 1], 8000.0, 0.15); 8];
        samples.extend(vec![sample([0; 4], [0, 1, 1, 0], 300.0, 0.02); 4]);
        // Then a task or two waits at times, as three clients' requests overlap, for more
        // than half a period without a break.
        let mut light = sample([0, 0, 2, 0], [0, 1, 2, 0], 300.0, 0.02);
        light.pressed_s[PROCESS] = 0.2;
        light.idle_pressed[PROCESS] = 0.9;
        samples.extend(vec![light; 3]);
        let allocs = run(&c, &samples);
        assert_ne!(allocs[7], c.initial, "never grew: {allocs:?}");
        assert_eq!(allocs[11], c.initial, "did not return: {allocs:?}");
        assert!(allocs[11..].iter().all(|a| *a == c.initial), "{allocs:?}");
    }

    #[test]
    fn drifts_back_toward_the_initial_allocation_when_queues_drain() {
        let c = cfg();
        // Load stays high (U) but the queues are gone: one thread back per calm window.
        let st = State {
            threads: [1, 1, 2, 8],
            ..State::initial(&c)
        };
        let calm = sample([0; 4], [0, 1, 1, 1], 4000.0, 0.8);
        let threads = *run_from(&c, st, &vec![calm; 4 * 10]).last().unwrap();
        assert_eq!(threads, c.initial, "{threads:?}");

        // A stage whose threads are all busy keeps them even with an empty queue.
        let st = State {
            threads: [1, 2, 2, 5],
            ..State::initial(&c)
        };
        let saturated = sample([0; 4], [0, 1, 1, 5], 4000.0, 0.8);
        let threads = *run_from(&c, st, &vec![saturated; 20]).last().unwrap();
        assert_eq!(threads[SEND], 5, "{threads:?}");
    }

    #[test]
    fn holds_steady_under_a_constant_load() {
        let c = cfg();
        // A load the allocation copes with: a task or so waiting now and then, some threads
        // busy, a constant request rate.
        let samples: Vec<Sample> = (0..200)
            .map(|i| {
                let q = if i % 3 == 0 { 1 } else { 0 };
                sample([0, q, q, 1 - q], [1, 2, 2, 2], 3000.0, 0.6)
            })
            .collect();
        let allocs = run(&c, &samples);
        assert!(allocs.iter().all(|a| *a == c.initial), "moved: {allocs:?}");

        // After a step to a saturating load the allocation settles and then stops moving.
        let heavy = sample([0, 0, 20, 20], [1, 2, 4, 6], 6000.0, 1.0);
        let allocs = run(&c, &vec![heavy; 60]);
        let settled = allocs[30];
        assert!(allocs[30..].iter().all(|a| *a == settled), "{allocs:?}");
    }
}
