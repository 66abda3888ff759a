//! Per-connection deadlines outside the fiber runtime, one structure for the models that
//! keep connections in a poller of their own: the pipeline's poller (its parked connections)
//! and the process model's master (the connections it holds). A slab of entries, each one
//! connection's from its first wait to its close, each parked one also on the list of a
//! timing wheel slot, so parking, waking and expiring are O(1) whatever the number of
//! connections waiting (5,000 slow clients cost the normal ones nothing per request).
//!
//! A key is a slab index and that entry's generation, so an event for an entry that has been
//! released (and whose index was reused) is recognised as stale. An entry also keeps a
//! `ready` mark: an event that came while its connection was away in a stage.
//!
//! The wheel has `SLOTS` slots of `SLOT` each; an entry sits in the slot of its deadline's
//! tick and fires once that tick has passed (at most one `SLOT` late); an entry more than one
//! turn ahead stays in its slot when the slot is scanned on the way.

use std::time::{Duration, Instant};

/// Time one slot covers.
const SLOT: Duration = Duration::from_millis(10);
/// Slots in one turn of the wheel (10.24 s).
const SLOTS: usize = 1024;
const NIL: u32 = u32::MAX;

struct Entry<T> {
    /// The parked item and its deadline (`None` while away or free).
    item: Option<(T, Instant)>,
    gen: u32,
    prev: u32,
    next: u32,
    slot: u32,
    /// Allocated (by `alloc`, until `release`).
    owned: bool,
    ready: bool,
}

/// Items with a deadline each, by key.
pub(crate) struct Wheel<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    heads: Vec<u32>,
    origin: Instant,
    /// The first tick not yet scanned: every tick before it has been expired.
    cursor: u64,
    len: usize,
}

impl<T> std::fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wheel").field("len", &self.len).finish()
    }
}

impl<T> Wheel<T> {
    pub(crate) fn new(origin: Instant) -> Wheel<T> {
        Wheel {
            entries: Vec::new(),
            free: Vec::new(),
            heads: vec![NIL; SLOTS],
            origin,
            cursor: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn tick_of(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(nanos / SLOT.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The tick whose passing fires a deadline: its own, or the next one to scan if that
    /// tick has already been scanned.
    fn fire_tick(&self, deadline: Instant) -> u64 {
        self.tick_of(deadline).max(self.cursor)
    }

    /// When an item inserted now with `deadline` would fire.
    pub(crate) fn fires_at(&self, deadline: Instant) -> Instant {
        self.instant_of(self.fire_tick(deadline).saturating_add(1))
    }

    fn instant_of(&self, tick: u64) -> Instant {
        let nanos = u128::from(tick) * SLOT.as_nanos();
        let d = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        self.origin.checked_add(d).unwrap_or(self.origin)
    }

    /// A new entry, away (not parked); returns its key.
    pub(crate) fn alloc(&mut self) -> u64 {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.entries.len()).expect("fewer than 2^32 entries");
                assert!(i != NIL, "fewer than 2^32 - 1 entries");
                self.entries.push(Entry {
                    item: None,
                    gen: 0,
                    prev: NIL,
                    next: NIL,
                    slot: 0,
                    owned: false,
                    ready: false,
                });
                i
            }
        };
        let e = &mut self.entries[idx as usize];
        e.owned = true;
        e.ready = false;
        (u64::from(e.gen) << 32) | u64::from(idx)
    }

    /// The owned entry of `key`, if the key is not stale.
    fn entry(&self, key: u64) -> Option<u32> {
        let idx = key as u32;
        let e = self.entries.get(idx as usize)?;
        (e.owned && e.gen == (key >> 32) as u32).then_some(idx)
    }

    /// Parks `item` in the entry of `key` (owned and away), due at `deadline`; gives the item
    /// back for a stale key or an entry already parked.
    pub(crate) fn park(&mut self, key: u64, item: T, deadline: Instant) -> Result<(), T> {
        let Some(idx) = self.entry(key) else {
            return Err(item);
        };
        if self.entries[idx as usize].item.is_some() {
            return Err(item);
        }
        let slot = (self.fire_tick(deadline) % SLOTS as u64) as u32;
        let head = self.heads[slot as usize];
        let e = &mut self.entries[idx as usize];
        e.item = Some((item, deadline));
        e.prev = NIL;
        e.next = head;
        e.slot = slot;
        if head != NIL {
            self.entries[head as usize].prev = idx;
        }
        self.heads[slot as usize] = idx;
        self.len += 1;
        Ok(())
    }

    /// A new entry with `item` parked in it, due at `deadline`; returns its key.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, item: T, deadline: Instant) -> u64 {
        let key = self.alloc();
        assert!(self.park(key, item, deadline).is_ok());
        key
    }

    /// Takes out the item parked under `key`, if any; the entry stays, away.
    pub(crate) fn remove(&mut self, key: u64) -> Option<T> {
        let idx = self.entry(key)?;
        self.entries[idx as usize].item.as_ref()?;
        Some(self.take(idx).0)
    }

    /// The item parked under `key`, if any.
    pub(crate) fn get(&self, key: u64) -> Option<&T> {
        let idx = self.entry(key)?;
        self.entries[idx as usize].item.as_ref().map(|(t, _)| t)
    }

    /// Marks the entry of `key` ready (an event while away); false for a stale key.
    pub(crate) fn set_ready(&mut self, key: u64) -> bool {
        match self.entry(key) {
            Some(idx) => {
                self.entries[idx as usize].ready = true;
                true
            }
            None => false,
        }
    }

    /// Whether the entry of `key` was marked ready, clearing the mark.
    pub(crate) fn take_ready(&mut self, key: u64) -> bool {
        self.entry(key)
            .is_some_and(|idx| std::mem::take(&mut self.entries[idx as usize].ready))
    }

    /// Frees the entry of `key` (its key goes stale), giving back an item still parked in it.
    pub(crate) fn release(&mut self, key: u64) -> Option<T> {
        let idx = self.entry(key)?;
        let item = self.entries[idx as usize]
            .item
            .is_some()
            .then(|| self.take(idx).0);
        let e = &mut self.entries[idx as usize];
        e.owned = false;
        e.ready = false;
        e.gen = e.gen.wrapping_add(1);
        self.free.push(idx);
        item
    }

    /// Unlinks entry `idx` (which holds an item); it stays owned, away.
    fn take(&mut self, idx: u32) -> (T, Instant) {
        let (prev, next, slot) = {
            let e = &self.entries[idx as usize];
            (e.prev, e.next, e.slot)
        };
        if prev == NIL {
            self.heads[slot as usize] = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        let e = &mut self.entries[idx as usize];
        let item = e.item.take().expect("a linked entry holds an item");
        e.prev = NIL;
        e.next = NIL;
        self.len -= 1;
        item
    }

    /// Takes out every item whose deadline is at or before `now`, into `due`, scanning the
    /// ticks that have passed.
    pub(crate) fn expire(&mut self, now: Instant, due: &mut Vec<T>) {
        let now_tick = self.tick_of(now);
        if now_tick <= self.cursor {
            return;
        }
        // Past a full turn, every slot is scanned once.
        let first = self.cursor.max(now_tick.saturating_sub(SLOTS as u64));
        for tick in first..now_tick {
            let mut idx = self.heads[(tick % SLOTS as u64) as usize];
            while idx != NIL {
                let e = &self.entries[idx as usize];
                let next = e.next;
                if e.item.as_ref().is_some_and(|(_, d)| *d <= now) {
                    due.push(self.take(idx).0);
                }
                idx = next;
            }
        }
        self.cursor = now_tick;
    }

    /// When the next non-empty slot's tick passes (`None` when nothing is here). A slot may
    /// hold only items of a later turn: the caller then wakes early and finds nothing due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        (0..SLOTS as u64)
            .map(|i| self.cursor + i)
            .find(|t| self.heads[(t % SLOTS as u64) as usize] != NIL)
            .map(|t| self.instant_of(t + 1))
    }

    /// When the earliest item fires (`None` when nothing is here): unlike [`Wheel::next_due`],
    /// never a slot that holds only items of a later turn, at the cost of walking the entries
    /// of the slots before the first one due this turn (all of them when none is). For a
    /// poller with nothing else to do: an idle keep-alive connection due after more than a
    /// turn (the default 75 s against 10.24 s) would otherwise wake it once a turn.
    pub(crate) fn next_due_exact(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let mut earliest = u64::MAX;
        for t in self.cursor..self.cursor + SLOTS as u64 {
            let mut idx = self.heads[(t % SLOTS as u64) as usize];
            while idx != NIL {
                let e = &self.entries[idx as usize];
                if let Some((_, d)) = &e.item {
                    let fire = self.fire_tick(*d);
                    if fire <= t {
                        // Due this turn, in the first slot that has such an item: every item of
                        // an earlier slot fires a turn or more later than this one.
                        return Some(self.instant_of(t + 1));
                    }
                    earliest = earliest.min(fire);
                }
                idx = e.next;
            }
        }
        Some(self.instant_of(earliest.saturating_add(1)))
    }

    /// Takes out every item and frees every entry (every key goes stale).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len);
        for e in &mut self.entries {
            if let Some((item, _)) = e.item.take() {
                all.push(item);
            }
            if e.owned {
                e.gen = e.gen.wrapping_add(1);
            }
            e.owned = false;
            e.ready = false;
        }
        self.free = (0..self.entries.len() as u32).rev().collect();
        self.heads.iter_mut().for_each(|h| *h = NIL);
        self.len = 0;
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_item_fires_after_its_deadline_and_not_before() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        w.insert("a", t0 + ms(55));
        let mut due = Vec::new();
        w.expire(t0 + ms(50), &mut due);
        assert!(due.is_empty());
        w.expire(t0 + ms(54), &mut due);
        assert!(due.is_empty());
        // Its tick (50..60 ms) has passed.
        w.expire(t0 + ms(60), &mut due);
        assert_eq!(due, vec!["a"]);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn removed_items_never_fire_and_stale_keys_find_nothing() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let a = w.insert(1, t0 + ms(20));
        let b = w.insert(2, t0 + ms(20));
        let c = w.insert(3, t0 + ms(20));
        assert_eq!(w.remove(b), Some(2));
        assert_eq!(w.remove(b), None);
        // Away, the entry keeps its key: it parks again under it.
        assert!(w.park(b, 22, t0 + ms(20)).is_ok());
        assert_eq!(w.park(b, 23, t0 + ms(20)), Err(23));
        assert_eq!(w.release(b), Some(22));
        assert_eq!(w.release(b), None);
        // The freed index is reused with a new generation: the old key stays stale.
        let d = w.insert(4, t0 + ms(500));
        assert_eq!(d as u32, b as u32);
        assert_ne!(d, b);
        assert_eq!(w.remove(b), None);
        assert_eq!(w.park(b, 5, t0), Err(5));
        assert!(!w.set_ready(b));
        let mut due = Vec::new();
        w.expire(t0 + ms(100), &mut due);
        due.sort();
        assert_eq!(due, vec![1, 3]);
        assert_eq!(w.remove(a), None);
        assert_eq!(w.remove(c), None);
        assert_eq!(w.len(), 1);
        assert_eq!(w.get(d), Some(&4));
        assert_eq!(w.remove(d), Some(4));
        assert_eq!(w.get(d), None);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn an_item_a_turn_or_more_ahead_waits_for_its_own_turn() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let turn = SLOT * SLOTS as u32;
        // Same slot as the 5 ms item, one and two turns later.
        w.insert("later", t0 + turn + ms(5));
        w.insert("much later", t0 + turn * 2 + ms(5));
        w.insert("now", t0 + ms(5));
        let mut due = Vec::new();
        w.expire(t0 + ms(20), &mut due);
        assert_eq!(due, vec!["now"]);
        due.clear();
        w.expire(t0 + turn, &mut due);
        assert!(due.is_empty());
        w.expire(t0 + turn + ms(10), &mut due);
        assert_eq!(due, vec!["later"]);
        due.clear();
        // A stall longer than a turn: every slot is scanned once and only what is due fires.
        w.expire(t0 + turn * 3, &mut due);
        assert_eq!(due, vec!["much later"]);
    }

    #[test]
    fn a_deadline_already_past_fires_at_the_next_scan() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let mut due = Vec::new();
        w.expire(t0 + ms(1000), &mut due);
        w.insert("late", t0 + ms(10));
        assert!(w.fires_at(t0 + ms(10)) <= t0 + ms(1010));
        w.expire(t0 + ms(1010), &mut due);
        assert_eq!(due, vec!["late"]);
    }

    #[test]
    fn next_due_is_the_earliest_occupied_slot() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        assert_eq!(w.next_due(), None);
        w.insert(1, t0 + ms(300));
        let k = w.insert(2, t0 + ms(125));
        assert_eq!(w.next_due(), Some(t0 + ms(130)));
        w.remove(k);
        assert_eq!(w.next_due(), Some(t0 + ms(310)));
        assert_eq!(w.fires_at(t0 + ms(300)), t0 + ms(310));
    }

    #[test]
    fn next_due_exact_skips_slots_whose_items_fire_in_a_later_turn() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        assert_eq!(w.next_due_exact(), None);
        // 75 s ahead: slot 7500 % 1024 = 332, seven turns on; next_due names that slot's tick
        // in this turn, next_due_exact the item's own.
        w.insert(1, t0 + ms(75_000));
        assert_eq!(w.next_due(), Some(t0 + ms(3_330)));
        assert_eq!(w.next_due_exact(), Some(t0 + ms(75_010)));
        // An item due this turn in a later slot than the far one's comes first all the same.
        w.insert(2, t0 + ms(5_000));
        assert_eq!(w.next_due(), Some(t0 + ms(3_330)));
        assert_eq!(w.next_due_exact(), Some(t0 + ms(5_010)));
        // One due this turn in the far item's own slot.
        w.insert(3, t0 + ms(3_320));
        assert_eq!(w.next_due_exact(), Some(t0 + ms(3_330)));
        // The earliest of several later-turn items, and what expiring leaves behind.
        let mut w = Wheel::new(t0);
        w.insert(4, t0 + ms(30_000));
        w.insert(5, t0 + ms(20_500));
        assert_eq!(w.next_due_exact(), Some(t0 + ms(20_510)));
        let mut due = Vec::new();
        w.expire(t0 + ms(20_600), &mut due);
        assert_eq!(due, vec![5]);
        assert_eq!(w.next_due_exact(), Some(t0 + ms(30_010)));
    }

    #[test]
    fn a_ready_mark_is_taken_once_and_dies_with_the_entry() {
        let t0 = Instant::now();
        let mut w: Wheel<u8> = Wheel::new(t0);
        let k = w.alloc();
        assert!(!w.take_ready(k));
        assert!(w.set_ready(k));
        assert!(w.take_ready(k));
        assert!(!w.take_ready(k));
        assert!(w.set_ready(k));
        w.release(k);
        let k2 = w.alloc();
        assert_eq!(k2 as u32, k as u32);
        assert!(!w.take_ready(k2));
        assert!(!w.take_ready(k));
    }

    #[test]
    fn drain_takes_everything_and_leaves_an_empty_wheel() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let keys: Vec<u64> = (0..100).map(|i| w.insert(i, t0 + ms(i * 37))).collect();
        for k in keys.iter().step_by(3) {
            w.remove(*k);
        }
        let away = w.alloc();
        let mut all = w.drain();
        all.sort();
        assert_eq!(all, (0..100).filter(|i| i % 3 != 0).collect::<Vec<_>>());
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_due(), None);
        for k in keys {
            assert_eq!(w.remove(k), None);
        }
        assert!(!w.set_ready(away));
        let mut due = Vec::new();
        w.insert(7, t0 + ms(5));
        w.expire(t0 + ms(10_000), &mut due);
        assert_eq!(due, vec![7]);
    }
}
