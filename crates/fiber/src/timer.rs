//! A worker's timers: the fibers' deadlines in a [`DeadlineQueue`] (`deadline.rs`: a FIFO
//! lane and a heap, cancelled lazily, with bounded garbage).
//!
//! A fiber has at most one armed timer (it parks in one place at a time); its task records the
//! sequence number of that timer. Cancelling only clears that number (no queue operation); a
//! popped entry whose number no longer matches is dead and skipped. A wait of one fixed short
//! length armed again and again — a busy connection's fiber lingering between requests
//! (`Source::linger`) — goes in the FIFO lane ([`Timers::add_fifo`]): no heap sift, and its
//! entries leave from the front, dead or due, so the lane never holds more than one wait
//! period of arms and its dead entries need no compaction ([`Timed::COMPACT_FIFO`] is false).
//! Its sequence numbers carry [`FIFO_BIT`], so cancelling one does not count toward the
//! heap's compaction.
//!
//! **A kept linger timer.** A busy connection lingers between every two requests, so its
//! fiber would push an entry (and a task reference, a locked increment) per request and pop a
//! dead one later (a locked decrement). Instead a task keeps its FIFO entry queued after the
//! wait ends ([`crate::task::KeptTimer`]): the next linger only makes that entry live again
//! and records the deadline it now stands for. When the entry comes due, a task that lingered
//! again since is not woken: the entry goes back in the queue for the later deadline (the
//! FIFO lane if that keeps it in order, else the heap), once per period and not once per
//! request. An entry that is dead at a lane's front (its task is not lingering) leaves as any
//! dead entry does, and the task's next linger queues a new one. Waits end at the same times.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::deadline::{DeadlineQueue, Expiry, Lane, Timed};
use crate::task::{KeptTimer, Task};

/// Marks the sequence number of a timer in the FIFO lane.
const FIFO_BIT: u64 = 1 << 63;

struct Entry {
    deadline: Instant,
    seq: u64,
    task: Arc<Task>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        // Equal deadlines fire in the order they were armed.
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

impl Timed for Entry {
    // Short waits: a dead entry leaves the FIFO lane's front within one wait period.
    const COMPACT_FIFO: bool = false;

    fn deadline(&self) -> Instant {
        self.deadline
    }

    // A FIFO-numbered entry put back in the heap (a kept linger timer) is not counted there:
    // nothing counted it when it died (`Timers::cancel` goes by the number's lane).
    fn counts_dead(&self, _in: Lane) -> bool {
        lane(self.seq) == Lane::Heap
    }
}

impl Entry {
    fn live(&self) -> bool {
        self.task.armed_timer.load(Ordering::Relaxed) == self.seq
    }

    /// Whether this is the entry its task keeps queued between lingers.
    fn kept(&self) -> bool {
        self.task.kept.seq.load(Ordering::Relaxed) == self.seq
    }

    /// For an entry leaving the queue: the task keeps it no more.
    fn leaves(&self) {
        if self.kept() {
            self.task.kept.seq.store(0, Ordering::Relaxed);
        }
    }

    /// [`Entry::live`], for a compaction pass: a dead entry it drops leaves the queue.
    fn live_or_leaves(&self) -> bool {
        let live = self.live();
        if !live {
            self.leaves();
        }
        live
    }
}

/// The lane of the timer numbered `seq`.
fn lane(seq: u64) -> Lane {
    if seq & FIFO_BIT == 0 {
        Lane::Heap
    } else {
        Lane::Fifo
    }
}

/// Expiry of the timers: wakes a due task with the scheduler's wake function, or puts back
/// a kept linger timer its task armed again since for a later deadline.
struct Fire<W> {
    wake: W,
    epoch: Instant,
    /// The expiry's `now`, in nanoseconds after `epoch`.
    now: u64,
}

impl<W: FnMut(Arc<Task>)> Expiry<Entry> for Fire<W> {
    fn live(&self, e: &Entry) -> bool {
        e.live()
    }

    fn due(&mut self, mut e: Entry) -> Option<Entry> {
        if e.kept() {
            let kept = &e.task.kept;
            let due = kept.due.load(Ordering::Relaxed);
            if due > self.now {
                e.deadline = self.epoch + Duration::from_nanos(due);
                kept.queued_at.store(due, Ordering::Relaxed);
                return Some(e);
            }
            kept.seq.store(0, Ordering::Relaxed);
        }
        e.task.armed_timer.store(0, Ordering::Relaxed);
        (self.wake)(e.task);
        None
    }

    fn dropped(&mut self, e: Entry) {
        e.leaves();
    }
}

/// The timers of one worker (only its thread touches them).
pub(crate) struct Timers {
    queue: DeadlineQueue<Entry>,
    next_seq: u64,
    /// The origin of the deadlines given in nanoseconds ([`Timers::add_fifo`]).
    epoch: Instant,
}

impl Timers {
    /// Timers whose nanosecond deadlines count from `epoch`.
    pub(crate) fn new(epoch: Instant) -> Timers {
        Timers {
            queue: DeadlineQueue::default(),
            next_seq: 0,
            epoch,
        }
    }

    /// `at` in nanoseconds after the epoch (an instant before it counts as the epoch).
    pub(crate) fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Arms `task`'s timer for `deadline` (replacing an armed one); returns its number.
    pub(crate) fn add(&mut self, deadline: Instant, task: Arc<Task>) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.replace_armed(&task, seq);
        self.queue.push_heap(Entry {
            deadline,
            seq,
            task,
        });
        seq
    }

    /// As [`Timers::add`], for short waits of one fixed length armed many times a second (a
    /// connection lingering between requests), with the deadline `due` in nanoseconds after
    /// the epoch: the task's kept entry made live again when it has one queued for no later
    /// than `due` (integer stores, no queue operation), else a new entry in the FIFO lane when
    /// `due` keeps it in order (kept after the wait), else in the heap.
    pub(crate) fn add_fifo(&mut self, due: u64, task: &Arc<Task>) -> u64 {
        let kept: &KeptTimer = &task.kept;
        let kept_seq = kept.seq.load(Ordering::Relaxed);
        if kept_seq != 0 && kept.queued_at.load(Ordering::Relaxed) <= due {
            kept.due.store(due, Ordering::Relaxed);
            self.replace_armed(task, kept_seq);
            return kept_seq;
        }
        self.add_fifo_entry(due, task)
    }

    /// The rest of [`Timers::add_fifo`]: a new entry.
    #[inline(never)]
    fn add_fifo_entry(&mut self, due: u64, task: &Arc<Task>) -> u64 {
        let deadline = self.epoch + Duration::from_nanos(due);
        if !self.queue.fits_fifo(deadline) {
            task.kept.seq.store(0, Ordering::Relaxed);
            return self.add(deadline, task.clone());
        }
        self.next_seq += 1;
        let seq = self.next_seq | FIFO_BIT;
        self.replace_armed(task, seq);
        let kept = &task.kept;
        kept.seq.store(seq, Ordering::Relaxed);
        kept.queued_at.store(due, Ordering::Relaxed);
        kept.due.store(due, Ordering::Relaxed);
        self.queue.push_fifo(Entry {
            deadline,
            seq,
            task: task.clone(),
        });
        seq
    }

    /// Records `seq` as `task`'s armed timer; one it replaces is dead.
    fn replace_armed(&mut self, task: &Task, seq: u64) {
        // A load and a store, not a `swap` (a locked instruction): only the home worker's
        // timers touch `armed_timer` (fibers never leave their worker), so nothing can come
        // between the two.
        let old = task.armed_timer.load(Ordering::Relaxed);
        task.armed_timer.store(seq, Ordering::Relaxed);
        if old != 0 {
            self.queue.died(lane(old), Entry::live_or_leaves);
        }
    }

    /// Disarms timer `seq` of `task` if it has not fired.
    pub(crate) fn cancel(&mut self, task: &Task, seq: u64) {
        // Load and store for the compare-and-swap, as in `replace_armed`.
        if task.armed_timer.load(Ordering::Relaxed) == seq {
            task.armed_timer.store(0, Ordering::Relaxed);
            self.queue.died(lane(seq), Entry::live_or_leaves);
        }
    }

    /// Unparks (with `wake`: the scheduler's `Task::unpark_owned`) the tasks whose deadline
    /// is at or before `now`; returns the next deadline.
    pub(crate) fn fire(&mut self, now: Instant, wake: impl FnMut(Arc<Task>)) -> Option<Instant> {
        let mut fire = Fire {
            wake,
            epoch: self.epoch,
            now: self.nanos(now),
        };
        self.queue.expire(now, &mut fire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Gives back the FIFO lane's memory a burst left (the worker calls it as it goes idle).
    pub(crate) fn shrink(&mut self) {
        self.queue.shrink();
    }

    pub(crate) fn clear(&mut self) {
        self.queue.clear(|e| e.leaves());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` tasks of finished fibers (held here, so no worker reuses them).
    fn tasks(n: usize) -> Vec<Arc<Task>> {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        (0..n)
            .map(|_| {
                rt.spawn(|| crate::task::with_current(Arc::clone).unwrap())
                    .join()
                    .unwrap()
            })
            .collect()
    }

    fn ms(base: Instant, n: u64) -> Instant {
        base + Duration::from_millis(n)
    }

    /// `n` ms after the epoch, in nanoseconds.
    fn due(n: u64) -> u64 {
        n * 1_000_000
    }

    /// One task and timers whose epoch is the instant returned.
    fn one_task() -> (Arc<Task>, Timers, Instant) {
        let base = Instant::now();
        (tasks(1).remove(0), Timers::new(base), base)
    }

    /// Fires `timers` at `now`; returns the next deadline and the ids of the tasks woken.
    fn fire(timers: &mut Timers, now: Instant) -> (Option<Instant>, Vec<u64>) {
        let mut woke = Vec::new();
        let next = timers.fire(now, |t| woke.push(t.id));
        (next, woke)
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_task_lingering_again_and_again_keeps_one_entry() {
        let (t, mut timers, _) = one_task();
        let first = timers.add_fifo(due(100), &t);
        timers.cancel(&t, first);
        for i in 1..1000 {
            let seq = timers.add_fifo(due(100 + i), &t);
            assert_eq!(seq, first, "arm {i} reuses the kept entry");
            timers.cancel(&t, seq);
        }
        assert_eq!(timers.queue.lanes(), (1, 0));
        assert_eq!(Arc::strong_count(&t), 2, "one reference: the kept entry's");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_kept_entry_wakes_its_task_at_the_last_arms_deadline() {
        let (t, mut timers, base) = one_task();
        let seq = timers.add_fifo(due(10), &t);
        timers.cancel(&t, seq);
        assert_eq!(timers.add_fifo(due(50), &t), seq);
        // The entry comes due at 10 ms: its task lingers again until 50 ms, so it waits on.
        assert_eq!(
            fire(&mut timers, ms(base, 20)),
            (Some(ms(base, 50)), vec![])
        );
        assert_eq!(timers.queue.lanes(), (1, 0), "put back in the FIFO lane");
        assert_eq!(
            fire(&mut timers, ms(base, 49)),
            (Some(ms(base, 50)), vec![])
        );
        assert_eq!(fire(&mut timers, ms(base, 50)), (None, vec![t.id]));
        assert_eq!(t.armed_timer.load(Ordering::Relaxed), 0);
        assert_eq!(t.kept.seq.load(Ordering::Relaxed), 0, "the entry left");
        assert_eq!(Arc::strong_count(&t), 1);
        // The next linger queues a new entry.
        let next = timers.add_fifo(due(60), &t);
        assert_ne!(next, seq);
        assert_eq!(timers.queue.lanes(), (1, 0));
    }

    /// Two tasks `a` and `b` (in that order) and their timers: `a` lingered until 10 ms, then
    /// again until 30 ms, and `b` lingers until 40 ms, so at 10 ms `a`'s kept entry (number
    /// returned) went back into the heap, 30 ms being out of order in the FIFO lane.
    fn a_put_back_in_the_heap() -> (Vec<Arc<Task>>, Timers, Instant, u64) {
        let ts = tasks(2);
        let base = Instant::now();
        let mut timers = Timers::new(base);
        let seq = timers.add_fifo(due(10), &ts[0]);
        timers.cancel(&ts[0], seq);
        assert_eq!(timers.add_fifo(due(30), &ts[0]), seq);
        timers.add_fifo(due(40), &ts[1]);
        assert_eq!(
            fire(&mut timers, ms(base, 10)),
            (Some(ms(base, 30)), vec![])
        );
        assert_eq!(timers.queue.lanes(), (1, 1), "`a`'s entry in the heap");
        (ts, timers, base, seq)
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_kept_entry_goes_back_in_the_heap_behind_later_arms() {
        let (ts, mut timers, base, _) = a_put_back_in_the_heap();
        let (a, b) = (&ts[0], &ts[1]);
        assert_eq!(
            fire(&mut timers, ms(base, 30)),
            (Some(ms(base, 40)), vec![a.id])
        );
        assert_eq!(timers.queue.lanes(), (1, 0));
        // Again, and this time `a`'s wait ends (bytes came) while its entry is in the heap:
        // the dead entry leaves from the heap's top, the task keeps it no more.
        let seq = timers.add_fifo(due(40), a);
        timers.cancel(a, seq);
        timers.add_fifo(due(50), a);
        // `b`'s wait ended too, and it lingers again until 60 ms: at 40 ms its entry goes
        // back to the FIFO lane's end, and `a`'s behind it would be out of order.
        let seq_b = b.armed_timer.load(Ordering::Relaxed);
        timers.cancel(b, seq_b);
        assert_eq!(timers.add_fifo(due(60), b), seq_b);
        assert_eq!(
            fire(&mut timers, ms(base, 40)),
            (Some(ms(base, 50)), vec![])
        );
        assert_eq!(timers.queue.lanes(), (1, 1));
        timers.cancel(a, seq);
        assert_eq!(
            fire(&mut timers, ms(base, 41)),
            (Some(ms(base, 60)), vec![])
        );
        assert_eq!(timers.queue.lanes(), (1, 0), "the dead entry left the heap");
        assert_eq!(a.kept.seq.load(Ordering::Relaxed), 0);
        assert_eq!(Arc::strong_count(a), 1);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_kept_entry_dead_at_the_front_leaves_and_an_earlier_deadline_gets_its_own() {
        let (t, mut timers, base) = one_task();
        let seq = timers.add_fifo(due(10), &t);
        timers.cancel(&t, seq);
        // The task is not lingering: its entry is dead and leaves the front at once.
        assert_eq!(fire(&mut timers, base), (None, vec![]));
        assert_eq!(t.kept.seq.load(Ordering::Relaxed), 0);
        assert_eq!(Arc::strong_count(&t), 1);
        // A kept entry queued for later than a new deadline is not reused.
        let late = timers.add_fifo(due(50), &t);
        timers.cancel(&t, late);
        let early = timers.add_fifo(due(20), &t);
        assert_ne!(early, late);
        assert_eq!(fire(&mut timers, ms(base, 20)), (None, vec![t.id]));
        assert!(
            timers.is_empty(),
            "the dead late entry left behind the due one"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_kept_entry_the_heap_compaction_drops_is_kept_no_more() {
        let (ts, mut timers, base, seq) = a_put_back_in_the_heap();
        let (a, b) = (&ts[0], &ts[1]);
        // Then `a`'s wait ends.
        timers.cancel(a, seq);
        assert_eq!(a.kept.seq.load(Ordering::Relaxed), seq);
        // `b` arms and replaces heap timers until their dead ones are compacted away, and
        // `a`'s dead entry with them.
        let seq_b = b.armed_timer.load(Ordering::Relaxed);
        timers.cancel(b, seq_b);
        for i in 0..4 * crate::deadline::COMPACT_SLACK as u64 {
            timers.add(ms(base, 1_000 + i), b.clone());
            if a.kept.seq.load(Ordering::Relaxed) == 0 {
                break;
            }
        }
        assert_eq!(a.kept.seq.load(Ordering::Relaxed), 0, "compacted: not kept");
        assert_eq!(Arc::strong_count(a), 1, "no entry holds `a`");
        // So `a`'s next linger queues an entry of its own, which fires.
        let next = timers.add_fifo(due(50), a);
        assert_ne!(next, seq);
        assert!(fire(&mut timers, ms(base, 50)).1.contains(&a.id));
    }

    /// Random lingers (mostly of one period, some longer or shorter), ends of waits, heap
    /// timers and clock steps against a model that knows only each task's deadline: every
    /// expiry wakes exactly the tasks whose wait is due, and the next deadline it returns is
    /// never later than the earliest wait still armed (a worker sleeping until then misses
    /// none).
    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn kept_entries_wake_exactly_the_due_waits_against_a_model() {
        const N: usize = 8;
        let ts = tasks(N);
        let base = Instant::now();
        let mut timers = Timers::new(base);
        // Per task: the armed wait's number, its deadline (ns) and whether it is a linger.
        let mut armed: [Option<(u64, u64, bool)>; N] = [None; N];
        let mut clock = 0u64;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut kept_reuses, mut woken) = (0, 0);
        for step in 0..20_000 {
            let i = rand(N as u64) as usize;
            match rand(11) {
                0..=3 if armed[i].is_none() => {
                    let period = [10, 10, 10, 10, 25, 3][rand(6) as usize] * 1_000_000;
                    let before = ts[i].kept.seq.load(Ordering::Relaxed);
                    let seq = timers.add_fifo(clock + period, &ts[i]);
                    kept_reuses += usize::from(seq == before);
                    armed[i] = Some((seq, clock + period, true));
                }
                4 if armed[i].is_none() => {
                    let d = clock + rand(30) * 1_000_000;
                    let seq = timers.add(base + Duration::from_nanos(d), ts[i].clone());
                    armed[i] = Some((seq, d, false));
                }
                5..=6 => {
                    // The wait ends early (bytes came): the fiber cancels its timer.
                    if let Some((seq, _, _)) = armed[i].take() {
                        timers.cancel(&ts[i], seq);
                    }
                }
                7..=8 => {
                    // A busy connection: its linger ends with a request, which is answered
                    // before the next expiry, and it lingers again for the usual period.
                    if let Some((seq, _, true)) = armed[i] {
                        timers.cancel(&ts[i], seq);
                        let again = timers.add_fifo(clock + 10_000_000, &ts[i]);
                        kept_reuses += usize::from(again == seq);
                        armed[i] = Some((again, clock + 10_000_000, true));
                    }
                }
                _ => {
                    clock += rand(5_000_000);
                    let (next, mut woke) = fire(&mut timers, base + Duration::from_nanos(clock));
                    woke.sort_unstable();
                    let mut due: Vec<u64> = (0..N)
                        .filter(|&k| armed[k].is_some_and(|(_, d, _)| d <= clock))
                        .map(|k| ts[k].id)
                        .collect();
                    due.sort_unstable();
                    assert_eq!(woke, due, "step {step}: woken at {clock} ns");
                    for k in 0..N {
                        if let Some((seq, d, _)) = armed[k] {
                            if d <= clock {
                                // The woken fiber runs and cancels its (fired) timer.
                                timers.cancel(&ts[k], seq);
                                armed[k] = None;
                                woken += 1;
                            }
                        }
                    }
                    if let Some(first) = armed.iter().flatten().map(|&(_, d, _)| d).min() {
                        let next = next.expect("a wait is armed");
                        assert!(
                            next <= base + Duration::from_nanos(first),
                            "step {step}: next deadline after the earliest armed wait"
                        );
                    }
                }
            }
        }
        assert!(kept_reuses > 500, "kept entries reused {kept_reuses} times");
        assert!(woken > 100, "{woken} waits came due");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn clearing_the_timers_leaves_no_entry_kept() {
        let (t, mut timers, base) = one_task();
        let seq = timers.add_fifo(due(10), &t);
        timers.cancel(&t, seq);
        timers.clear();
        assert_eq!(t.kept.seq.load(Ordering::Relaxed), 0);
        // So the next linger queues an entry that can fire.
        timers.add_fifo(due(10), &t);
        assert_eq!(fire(&mut timers, ms(base, 10)), (None, vec![t.id]));
    }
}
