//! Connections parked without a fiber ([`crate::net::TcpStream::when_readable`] and
//! [`crate::net::TcpStream::park`]): a worker's table of the callbacks to spawn when a
//! connection becomes readable or its timeout passes. Each callback owns its connection's
//! stream (`Local::park_idle` moves it into the closure's box; a `Parked` state holds it
//! already), so the table knows nothing of sockets.
//!
//! An idle keep-alive connection costs a fiber stack page (4 KiB resident) when a fiber parks in
//! its read. Parked here it costs its callback's box (for `when_readable`, allocated at each park:
//! the stream, 40 bytes, plus what the caller's closure captures; for `park`, the caller's own
//! state, which holds the stream), its entry here (24 bytes), its registration in the worker's
//! epoll (the `IoSlot`, 88 bytes) and, with a timeout, 24 bytes in a deadline queue — see the
//! `idle_rss` example for the measured figure. Entries live in a slab (a `Vec` with an intrusive
//! free list, so a freed entry costs no allocation to reuse); a key carries a generation, so a
//! stale key (from an edge that raced with the timeout) never reaches a later occupant.
//!
//! Timeouts wait in a [`DeadlineQueue`] (`deadline.rs`), lazily cancelled as the fibers'
//! timers: an entry taken by an edge leaves a dead deadline item behind, skipped when it
//! reaches the front of its lane and compacted away when dead items outnumber half of all items
//! plus a slack. Items go in the FIFO lane when their deadline is no earlier than the lane's
//! last (one keep-alive timeout after the worker's clock, as every idle connection of a server
//! parks: no heap sift per park), else in the heap. Keep-alive timeouts are long, so dead items
//! of the FIFO lane count toward compaction too ([`Timed::COMPACT_FIFO`]).
//!
//! Only the owning worker thread touches its table.

use std::time::Instant;

use crate::deadline::{DeadlineQueue, Expiry, Lane, Timed};
use crate::readiness::Readiness;

/// The callback of a parked connection, which owns the connection's stream (see
/// `Local::park_idle`): the table holds nothing of the stream's type. Either a boxed closure
/// (`TcpStream::when_readable`) or the caller's own boxed state (`TcpStream::park`, a
/// [`crate::net::Parked`]): no allocation per park.
pub(crate) type IdleFn = Box<dyn IdleCall>;

/// What a parked connection runs when it wakes (readable, or its timeout passed).
pub(crate) trait IdleCall: Send {
    fn call(self: Box<Self>, r: Readiness);
}

/// A closure as an [`IdleCall`] (boxed at each park).
pub(crate) struct FnCall<F>(pub(crate) F);

impl<F: FnOnce(Readiness) + Send> IdleCall for FnCall<F> {
    fn call(self: Box<Self>, r: Readiness) {
        (self.0)(r)
    }
}

/// A woken connection waiting in the run queue for its fiber's first run: the callback and
/// why it runs.
pub(crate) type Unstarted = (IdleFn, Readiness);

/// Names a parked connection: its slab index and the generation of that slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdleKey {
    index: u32,
    gen: u32,
}

/// No free entry.
const NIL: u32 = u32::MAX;

enum Entry {
    Vacant {
        gen: u32,
        next_free: u32,
    },
    Parked {
        gen: u32,
        /// The lane of its deadline item, if it has a timeout.
        lane: Option<Lane>,
        f: IdleFn,
    },
}

/// A timed entry's deadline item, ordered by deadline (then slot, then generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    at: Instant,
    index: u32,
    gen: u32,
}

impl Timed for Item {
    // Keep-alive timeouts are long: a dead item would sit in the FIFO lane for one.
    const COMPACT_FIFO: bool = true;

    fn deadline(&self) -> Instant {
        self.at
    }
}

/// The parked connections' slab.
struct Slab {
    entries: Vec<Entry>,
    free: u32,
    len: usize,
}

/// A worker's parked connections.
pub(crate) struct IdleTable {
    slab: Slab,
    deadlines: DeadlineQueue<Item>,
}

impl Default for IdleTable {
    fn default() -> Self {
        IdleTable {
            slab: Slab {
                entries: Vec::new(),
                free: NIL,
                len: 0,
            },
            deadlines: DeadlineQueue::default(),
        }
    }
}

/// Expiry of the idle table: a due item's connection leaves the slab for `out`.
struct Expire<'a> {
    slab: &'a mut Slab,
    out: &'a mut Vec<IdleFn>,
}

impl Expiry<Item> for Expire<'_> {
    fn live(&self, d: &Item) -> bool {
        self.slab.is_live(d)
    }

    fn due(&mut self, d: Item) -> Option<Item> {
        let key = IdleKey {
            index: d.index,
            gen: d.gen,
        };
        let (f, _) = self.slab.vacate(key).expect("checked live");
        self.out.push(f);
        None
    }
}

impl IdleTable {
    pub(crate) fn len(&self) -> usize {
        self.slab.len
    }

    pub(crate) fn has_timers(&self) -> bool {
        !self.deadlines.is_empty()
    }

    /// Parks a connection's callback, to leave by [`IdleTable::take`] or, at `deadline`, by
    /// [`IdleTable::expire`].
    pub(crate) fn insert(&mut self, f: IdleFn, deadline: Option<Instant>) -> IdleKey {
        let slab = &mut self.slab;
        let (index, gen) = if slab.free != NIL {
            let index = slab.free;
            let e = &mut slab.entries[index as usize];
            let Entry::Vacant { gen, next_free } = *e else {
                unreachable!("the free list holds vacant entries only")
            };
            slab.free = next_free;
            (index, gen)
        } else {
            let index = u32::try_from(slab.entries.len()).expect("fewer than 2^32 connections");
            assert_ne!(index, NIL, "fewer than 2^32 - 1 parked connections");
            slab.entries.push(Entry::Vacant {
                gen: 0,
                next_free: NIL,
            });
            (index, 0)
        };
        let lane = deadline.map(|at| self.deadlines.push(Item { at, index, gen }));
        slab.entries[index as usize] = Entry::Parked { gen, lane, f };
        slab.len += 1;
        IdleKey { index, gen }
    }

    /// Takes the connection `key` names (an edge made it readable), if it is still parked.
    pub(crate) fn take(&mut self, key: IdleKey) -> Option<IdleFn> {
        let (f, lane) = self.slab.vacate(key)?;
        if let Some(lane) = lane {
            let slab = &self.slab;
            self.deadlines.died(lane, |d| slab.is_live(d));
        }
        Some(f)
    }

    /// Moves the callbacks of the connections whose deadline is at or before `now` to `out`;
    /// returns the next deadline.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Vec<IdleFn>) -> Option<Instant> {
        let mut cx = Expire {
            slab: &mut self.slab,
            out,
        };
        self.deadlines.expire(now, &mut cx)
    }

    /// Empties the table (runtime shutdown): the caller drops what it gets, closing the
    /// streams without running the callbacks.
    pub(crate) fn drain(&mut self) -> Vec<IdleFn> {
        let all = std::mem::take(&mut self.slab.entries)
            .into_iter()
            .filter_map(|e| match e {
                Entry::Parked { f, .. } => Some(f),
                Entry::Vacant { .. } => None,
            })
            .collect();
        *self = IdleTable::default();
        all
    }
}

impl Slab {
    fn vacate(&mut self, key: IdleKey) -> Option<(IdleFn, Option<Lane>)> {
        let e = self.entries.get_mut(key.index as usize)?;
        match e {
            Entry::Parked { gen, .. } if *gen == key.gen => {}
            _ => return None,
        }
        let next = Entry::Vacant {
            gen: key.gen.wrapping_add(1),
            next_free: self.free,
        };
        let Entry::Parked { lane, f, .. } = std::mem::replace(e, next) else {
            unreachable!("matched above")
        };
        self.free = key.index;
        self.len -= 1;
        Some((f, lane))
    }

    /// Whether deadline item `d` still belongs to a parked connection.
    fn is_live(&self, d: &Item) -> bool {
        matches!(self.entries.get(d.index as usize), Some(Entry::Parked { gen, .. }) if *gen == d.gen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// An idle connection's user-space state is these plus the closure's box: measured by the
    /// `idle_rss` example at about 160 bytes per connection. Growing them shows up there.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_per_connection_state_stays_small() {
        assert!(size_of::<Entry>() <= 24, "{}", size_of::<Entry>());
        assert!(
            size_of::<crate::reactor::IoSlot>() <= 72,
            "{}",
            size_of::<crate::reactor::IoSlot>()
        );
        assert!(
            size_of::<crate::net::TcpStream>() <= 40,
            "{}",
            size_of::<crate::net::TcpStream>()
        );
        assert!(size_of::<Item>() <= 24, "{}", size_of::<Item>());
    }

    fn noop() -> IdleFn {
        Box::new(FnCall(|_: Readiness| {}))
    }

    thread_local! {
        static RAN: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// A callback that records `tag` when it runs (on this thread).
    fn tagged(tag: u32) -> IdleFn {
        Box::new(FnCall(move |_: Readiness| {
            RAN.with(|r| r.borrow_mut().push(tag))
        }))
    }

    /// Runs the callbacks `expire` handed out; returns their tags in the order they ran.
    fn run(out: &mut Vec<IdleFn>) -> Vec<u32> {
        for f in out.drain(..) {
            f.call(Readiness::TimedOut);
        }
        RAN.with(|r| std::mem::take(&mut *r.borrow_mut()))
    }

    #[test]
    fn keys_are_generational_and_slots_reused() {
        let mut t = IdleTable::default();
        let a = t.insert(noop(), None);
        let b = t.insert(noop(), None);
        assert_eq!(t.len(), 2);
        assert!(t.take(a).is_some());
        assert!(t.take(a).is_none(), "a key works once");
        let c = t.insert(noop(), None);
        assert_eq!(c.index, a.index, "the freed slot is reused");
        assert_ne!(c, a);
        assert!(t.take(a).is_none(), "a stale key misses the new occupant");
        assert!(t.take(c).is_some());
        assert!(t.take(b).is_some());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn expiry_in_deadline_order_skips_entries_taken_by_an_edge() {
        let mut t = IdleTable::default();
        let now = Instant::now();
        let ms = |n| now + std::time::Duration::from_millis(n);
        t.insert(tagged(30), Some(ms(30)));
        t.insert(tagged(10), Some(ms(10)));
        let gone = t.insert(tagged(20), Some(ms(20)));
        let never = t.insert(noop(), None);
        assert!(t.take(gone).is_some());
        let mut out = Vec::new();
        assert_eq!(t.expire(ms(5), &mut out), Some(ms(10)));
        assert!(out.is_empty());
        assert_eq!(
            t.expire(ms(25), &mut out),
            Some(ms(30)),
            "the dead 20 ms item is skipped"
        );
        assert_eq!(run(&mut out), [10]);
        assert_eq!(t.expire(ms(30), &mut out), None);
        assert_eq!(run(&mut out), [30]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.drain().len(), 1);
        assert!(t.take(never).is_none());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn dead_timer_items_are_compacted() {
        let mut t = IdleTable::default();
        let at = Instant::now() + std::time::Duration::from_secs(60);
        for _ in 0..4000 {
            // Parked with a timeout, then taken by an edge: one dead heap item each time.
            let k = t.insert(noop(), Some(at));
            assert!(t.take(k).is_some());
        }
        assert!(
            t.deadlines.len() <= 4000 / 2 + crate::deadline::COMPACT_SLACK,
            "{} deadline items for 0 live entries",
            t.deadlines.len()
        );
        let mut out = Vec::new();
        assert_eq!(t.expire(at, &mut out), None);
        assert!(out.is_empty() && !t.has_timers());
    }

    #[test]
    fn deadlines_armed_in_order_skip_the_heap_and_expire_in_order() {
        let mut t = IdleTable::default();
        let now = Instant::now();
        let ms = |n| now + std::time::Duration::from_millis(n);
        let keys: Vec<IdleKey> = (1..=4)
            .map(|n| t.insert(tagged(10 * n as u32), Some(ms(10 * n))))
            .collect();
        assert_eq!(t.deadlines.lanes(), (4, 0), "all in the FIFO lane");
        // One out of order goes to the heap and still expires in deadline order.
        t.insert(tagged(15), Some(ms(15)));
        assert_eq!(t.deadlines.lanes(), (4, 1));
        // A dead item behind the front is skipped when it reaches it.
        assert!(t.take(keys[1]).is_some());
        let mut out = Vec::new();
        assert_eq!(t.expire(ms(5), &mut out), Some(ms(10)));
        assert_eq!(t.expire(ms(30), &mut out), Some(ms(40)));
        // Every due one leaves (lane by lane, heap first, so not in deadline order across the
        // lanes).
        let mut due = run(&mut out);
        due.sort_unstable();
        assert_eq!(due, [10, 15, 30]);
        assert_eq!(
            t.deadlines.len(),
            1,
            "the dead 20 ms item left with the due ones"
        );
        assert_eq!(t.expire(ms(40), &mut out), None);
        assert_eq!(run(&mut out), [40]);
        assert_eq!(t.len(), 0);
    }
}
