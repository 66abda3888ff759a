//! A queue of deadlines in two lanes, cancelled lazily, with bounded garbage: the one
//! structure behind a worker's fiber timers (`timer.rs`) and its idle connections' keep-alive
//! timeouts (`idle.rs`).
//!
//! **Two lanes.** Most deadlines a server arms are one fixed period after a clock that only
//! moves forward (a linger period, a keep-alive timeout), so they arrive in deadline order. An
//! item whose deadline is no earlier than the last one in the FIFO lane goes there: a
//! `push_back`, no heap sift, and it leaves from the front. Any other item goes into a binary
//! heap. Items are ordered by deadline, then by the rest of the item (`Ord`; for the timers the
//! arming order, so equal deadlines fire in the order they were armed).
//!
//! **Lazy cancellation.** The queue does not find an item to cancel it: the owner marks it
//! dead where it keeps its own state (a task's armed-timer number, a slab entry's generation)
//! and tells the queue one item in a lane died ([`DeadlineQueue::died`]). A dead item is
//! dropped when it reaches the front of its lane, whatever its deadline, so a lane's front is
//! live when [`DeadlineQueue::expire`] returns. When counted dead items outnumber half the
//! counted items plus [`COMPACT_SLACK`], one `retain` pass drops them all: a connection that
//! arms a 30 s read deadline on every read leaves bounded garbage. Whether dead items of the
//! FIFO lane count is the item type's choice ([`Timed::COMPACT_FIFO`]): a lane of short waits
//! empties itself within one period, a lane of long ones is compacted like the heap.
//!
//! **Items put back.** An owner may keep one item queued for several arms of the same wait,
//! moving only its own record of the deadline: when such an item comes due for an earlier arm,
//! [`Expiry::due`] hands it back with the later deadline and it is queued again (the FIFO lane
//! if that keeps it in order, else the heap; `timer.rs`, "A kept linger timer").
//!
//! Only the owning worker thread touches a queue. Measured for the fibers' timers (2M
//! arm+cancel pairs with 10,000 live timers, release build): this heap 13 ns per pair; an
//! eagerly cancelled `BTreeMap<(Instant, seq), _>` 160–200 ns; a lazy heap without compaction
//! 21 ns but 2,010,000 entries (46 MiB) left behind.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// Dead items tolerated beyond half the counted items before a compaction pass.
pub(crate) const COMPACT_SLACK: usize = 1024;
/// FIFO lane capacity kept however few items it holds ([`DeadlineQueue::shrink`]).
const FIFO_FLOOR: usize = 1024;

/// An item of a [`DeadlineQueue`]. `Ord` must order by [`Timed::deadline`] first.
pub(crate) trait Timed: Ord {
    /// Whether dead items of the FIFO lane count toward compaction (see the module docs).
    const COMPACT_FIFO: bool;

    fn deadline(&self) -> Instant;

    /// Whether this item, dead in `lane`, counts toward compaction: by default as its lane
    /// does (see the module docs). An item type whose items may be put back in the other lane
    /// ([`Expiry::due`]) decides by the item.
    fn counts_dead(&self, lane: Lane) -> bool {
        lane == Lane::Heap || Self::COMPACT_FIFO
    }
}

/// What [`DeadlineQueue::expire`] needs of the owner: which items are still live, and where
/// a due one goes.
pub(crate) trait Expiry<E> {
    fn live(&self, item: &E) -> bool;

    /// Takes a live item whose deadline has passed. An item its owner re-armed for a later
    /// deadline since it was queued (one wait kept queued across several arms) comes back
    /// with that deadline, after the `now` of the expiry, and is queued again.
    fn due(&mut self, item: E) -> Option<E>;

    /// Takes a dead item as it leaves a lane's front in [`DeadlineQueue::expire`]. (Items a
    /// compaction or [`DeadlineQueue::clear`] removes go to the closures those are given.)
    fn dropped(&mut self, _item: E) {}
}

/// Where an item waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    Fifo,
    Heap,
}

/// Deadlines in a FIFO lane and a heap (see the module docs).
pub(crate) struct DeadlineQueue<E> {
    /// Items armed in deadline order, earliest first.
    fifo: VecDeque<E>,
    /// The others.
    heap: BinaryHeap<Reverse<E>>,
    /// Dead items that count toward compaction ([`Timed::counts_dead`]: by default those of
    /// the heap, and of the FIFO lane if `E::COMPACT_FIFO`).
    dead: usize,
}

impl<E: Ord> Default for DeadlineQueue<E> {
    fn default() -> Self {
        DeadlineQueue {
            fifo: VecDeque::new(),
            heap: BinaryHeap::new(),
            dead: 0,
        }
    }
}

impl<E: Timed> DeadlineQueue<E> {
    /// Whether dead items of `lane` count toward compaction.
    fn counts(lane: Lane) -> bool {
        lane == Lane::Heap || E::COMPACT_FIFO
    }

    /// Items held, live or dead, in the lanes that count toward compaction (a few items of
    /// the heap whose deaths are not counted may be among them: the threshold is a bound, not
    /// an exact share).
    fn counted(&self) -> usize {
        if E::COMPACT_FIFO {
            self.len()
        } else {
            self.heap.len()
        }
    }

    /// Items held, live or dead.
    pub(crate) fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.fifo.is_empty()
    }

    /// Whether an item due at `at` may join the FIFO lane (no earlier than its last item).
    pub(crate) fn fits_fifo(&self, at: Instant) -> bool {
        self.fifo.back().is_none_or(|b| b.deadline() <= at)
    }

    /// Queues `item` in the FIFO lane if it keeps the lane in order, else in the heap; returns
    /// the lane, for [`DeadlineQueue::died`].
    pub(crate) fn push(&mut self, item: E) -> Lane {
        if self.fits_fifo(item.deadline()) {
            self.fifo.push_back(item);
            Lane::Fifo
        } else {
            self.heap.push(Reverse(item));
            Lane::Heap
        }
    }

    /// Queues `item` in the FIFO lane; the caller checked [`DeadlineQueue::fits_fifo`].
    pub(crate) fn push_fifo(&mut self, item: E) {
        debug_assert!(self.fits_fifo(item.deadline()));
        self.fifo.push_back(item);
    }

    /// Queues `item` in the heap.
    pub(crate) fn push_heap(&mut self, item: E) {
        self.heap.push(Reverse(item));
    }

    /// Records that an item of `lane` died (its owner cancelled it); when counted dead items
    /// outnumber half the counted items plus [`COMPACT_SLACK`], drops every item `live`
    /// rejects.
    pub(crate) fn died(&mut self, lane: Lane, live: impl Fn(&E) -> bool) {
        if !Self::counts(lane) {
            return;
        }
        self.dead += 1;
        if self.dead > self.counted() / 2 + COMPACT_SLACK {
            self.heap.retain(|Reverse(e)| live(e));
            if E::COMPACT_FIFO {
                self.fifo.retain(|e| live(e));
            }
            self.dead = 0;
        }
    }

    /// Hands every live item whose deadline is at or before `now` to `cx.due` — the heap's
    /// first, in deadline order, then the FIFO lane's, in deadline order — and drops the dead
    /// items it meets on the way; returns the earliest deadline left.
    pub(crate) fn expire(&mut self, now: Instant, cx: &mut impl Expiry<E>) -> Option<Instant> {
        self.expire_lane(Lane::Heap, now, cx);
        self.expire_lane(Lane::Fifo, now, cx);
        // Read after both passes: an item the FIFO lane's pass put back may be in the heap.
        let heap = self.heap.peek().map(|Reverse(e)| e.deadline());
        let fifo = self.fifo.front().map(Timed::deadline);
        match (heap, fifo) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`DeadlineQueue::expire`] on one lane: stops at a live front due after `now`.
    fn expire_lane(&mut self, lane: Lane, now: Instant, cx: &mut impl Expiry<E>) {
        loop {
            let front = match lane {
                Lane::Fifo => self.fifo.front(),
                Lane::Heap => self.heap.peek().map(|Reverse(e)| e),
            };
            let Some(front) = front else { return };
            let live = cx.live(front);
            if live && front.deadline() > now {
                return;
            }
            let item = match lane {
                Lane::Fifo => self.fifo.pop_front(),
                Lane::Heap => self.heap.pop().map(|Reverse(e)| e),
            };
            let item = item.expect("looked at the front");
            if live {
                if let Some(again) = cx.due(item) {
                    debug_assert!(again.deadline() > now, "put back due");
                    self.push(again);
                }
            } else {
                if item.counts_dead(lane) {
                    self.dead = self.dead.saturating_sub(1);
                }
                cx.dropped(item);
            }
        }
    }

    /// Gives back the FIFO lane's memory a burst left (for a worker going idle): a lane
    /// holding under a quarter of its capacity, past a floor, shrinks to twice its length.
    pub(crate) fn shrink(&mut self) {
        let (len, cap) = (self.fifo.len(), self.fifo.capacity());
        if cap > FIFO_FLOOR && cap > 4 * len {
            self.fifo.shrink_to((2 * len).max(FIFO_FLOOR));
        }
    }

    /// Empties the queue, handing each item to `gone`.
    pub(crate) fn clear(&mut self, mut gone: impl FnMut(E)) {
        self.heap.drain().for_each(|Reverse(e)| gone(e));
        self.fifo.drain(..).for_each(&mut gone);
        self.dead = 0;
    }

    /// Items in the FIFO lane and in the heap, for tests.
    #[cfg(test)]
    pub(crate) fn lanes(&self) -> (usize, usize) {
        (self.fifo.len(), self.heap.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An item with an id; ids double as arming order. `C` is its `COMPACT_FIFO`.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Item<const C: bool> {
        at: Instant,
        id: u32,
    }

    impl<const C: bool> Timed for Item<C> {
        const COMPACT_FIFO: bool = C;

        fn deadline(&self) -> Instant {
            self.at
        }
    }

    /// The owner's side: which ids are live, and the ids expired so far, in order.
    #[derive(Default)]
    struct Owner {
        dead: Vec<u32>,
        due: Vec<u32>,
    }

    impl<const C: bool> Expiry<Item<C>> for Owner {
        fn live(&self, item: &Item<C>) -> bool {
            !self.dead.contains(&item.id)
        }

        fn due(&mut self, item: Item<C>) -> Option<Item<C>> {
            self.due.push(item.id);
            None
        }
    }

    type Q<const C: bool> = DeadlineQueue<Item<C>>;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn deadlines_armed_in_order_skip_the_heap() {
        let t = Instant::now();
        let mut q = Q::<false>::default();
        for (id, ms) in [(1, 10), (2, 10), (3, 20), (4, 30)] {
            assert_eq!(q.push(Item { at: at(t, ms), id }), Lane::Fifo, "item {id}");
        }
        assert_eq!(q.lanes(), (4, 0), "in order: no heap item");
        assert!(!q.fits_fifo(at(t, 29)));
        assert_eq!(
            q.push(Item {
                at: at(t, 15),
                id: 5
            }),
            Lane::Heap
        );
        assert_eq!(q.lanes(), (4, 1));
        assert!(
            q.fits_fifo(at(t, 30)),
            "an equal deadline keeps the lane in order"
        );
    }

    #[test]
    fn expiry_goes_by_deadline_within_a_lane_heap_first_and_skips_dead_items() {
        let t = Instant::now();
        let mut q = Q::<false>::default();
        let mut o = Owner::default();
        q.push_fifo(Item {
            at: at(t, 10),
            id: 1,
        });
        q.push_fifo(Item {
            at: at(t, 20),
            id: 2,
        });
        q.push_fifo(Item {
            at: at(t, 40),
            id: 3,
        });
        q.push_heap(Item {
            at: at(t, 30),
            id: 4,
        });
        q.push_heap(Item {
            at: at(t, 15),
            id: 5,
        });
        q.push_heap(Item {
            at: at(t, 15),
            id: 6,
        });
        q.push_heap(Item {
            at: at(t, 5),
            id: 7,
        });
        // Nothing due yet: the next deadline is the earliest of both fronts.
        assert_eq!(q.expire(at(t, 1), &mut o), Some(at(t, 5)));
        assert!(o.due.is_empty());
        // Item 2 (FIFO) and item 7 (heap front) die; neither is ever handed out.
        o.dead.extend([2, 7]);
        q.died(Lane::Fifo, |e| o.live(e));
        q.died(Lane::Heap, |e| o.live(e));
        // The dead front of the heap does not set the next deadline.
        assert_eq!(q.expire(at(t, 1), &mut o), Some(at(t, 10)));
        assert_eq!(q.len(), 6, "the dead heap front left");
        assert_eq!(q.expire(at(t, 30), &mut o), Some(at(t, 40)));
        // Heap first (equal deadlines by arming order), then the FIFO lane; the dead item 2
        // left the FIFO lane on the way.
        assert_eq!(o.due, [5, 6, 4, 1]);
        assert_eq!(q.lanes(), (1, 0));
        assert_eq!(q.expire(at(t, 40), &mut o), None);
        assert_eq!(o.due, [5, 6, 4, 1, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_dead_item_leaves_the_fifo_front_whatever_its_deadline() {
        let t = Instant::now();
        let mut q = Q::<false>::default();
        let mut o = Owner::default();
        q.push_fifo(Item {
            at: at(t, 50),
            id: 1,
        });
        q.push_fifo(Item {
            at: at(t, 60),
            id: 2,
        });
        o.dead.push(1);
        q.died(Lane::Fifo, |e| o.live(e));
        assert_eq!(q.expire(at(t, 0), &mut o), Some(at(t, 60)));
        assert_eq!(q.lanes(), (1, 0), "the dead front went before its deadline");
        assert!(o.due.is_empty());
    }

    /// Arms `n` items in the heap and `n` in the FIFO lane, far in the future, and cancels
    /// them all; returns what is left.
    fn cancel_all<const C: bool>(n: u32) -> (usize, usize) {
        let t = Instant::now();
        let mut q = Q::<C>::default();
        let mut o = Owner::default();
        for id in 0..n {
            q.push_fifo(Item {
                at: at(t, 60_000),
                id,
            });
            // Earlier than the FIFO lane's back: into the heap.
            q.push_heap(Item {
                at: at(t, 1_000),
                id: n + id,
            });
        }
        for id in 0..n {
            o.dead.extend([id, n + id]);
            q.died(Lane::Fifo, |e| o.live(e));
            q.died(Lane::Heap, |e| o.live(e));
        }
        q.lanes()
    }

    #[test]
    fn dead_items_are_compacted() {
        let n = 4000;
        // Dead heap items are dropped once they outnumber half the heap plus the slack.
        let (fifo, heap) = cancel_all::<false>(n);
        assert!(
            heap <= n as usize / 2 + COMPACT_SLACK,
            "{heap} heap items, none live"
        );
        assert_eq!(
            fifo, n as usize,
            "a lane of short waits is left to empty itself"
        );
        // With COMPACT_FIFO the FIFO lane's dead count and are dropped too.
        let (fifo, heap) = cancel_all::<true>(n);
        assert!(
            fifo + heap <= n as usize + COMPACT_SLACK,
            "{fifo} + {heap} items, none live"
        );
        assert!(fifo < n as usize, "the FIFO lane was compacted");
    }

    #[test]
    fn shrink_gives_back_a_burst_and_keeps_a_floor() {
        let t = Instant::now();
        let mut q = Q::<false>::default();
        let mut o = Owner::default();
        for id in 0..10_000 {
            q.push_fifo(Item { at: at(t, 1), id });
        }
        assert_eq!(q.expire(at(t, 1), &mut o), None);
        assert_eq!(o.due.len(), 10_000);
        q.shrink();
        let cap = q.fifo.capacity();
        assert!((FIFO_FLOOR..10_000).contains(&cap), "capacity {cap}");
        q.clear(drop);
        assert!(q.is_empty());
    }
}
