//! Fiber-aware sync: Mutex, channels, WaitGroup, spawn_blocking — from fibers and threads.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

mod common;

use common::rt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::sync::{
    bounded, channel, Mutex, RecvError, RecvTimeoutError, TryRecvError, TrySendError, WaitGroup,
};

/// Test threads are plain threads: blocking them is fine (the ban is for fiber code).
#[allow(clippy::disallowed_methods)]
fn thread_sleep(d: Duration) {
    std::thread::sleep(d);
}

#[test]
fn mutex_held_across_yields_by_fibers_and_threads() {
    let rt = rt(2);
    let m = Arc::new(Mutex::new((0u64, 0u64)));
    let mut fibers = Vec::new();
    for _ in 0..50 {
        let m = m.clone();
        fibers.push(rt.spawn(move || {
            for _ in 0..20 {
                let mut g = m.lock();
                let before = g.0;
                weft_fiber::yield_now(); // another fiber of this worker runs and must wait
                g.0 = before + 1;
                g.1 += 1;
            }
        }));
    }
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let mut g = m.lock();
                    g.0 += 1;
                    g.1 += 1;
                }
            })
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), (1400, 1400));
    let g = m.lock();
    assert!(m.try_lock().is_none());
    drop(g);
    assert!(m.try_lock().is_some());
    let mut m = Arc::try_unwrap(m).unwrap();
    *m.get_mut() = (1, 2);
    assert_eq!(m.into_inner(), (1, 2));
}

#[test]
fn channels_between_fibers_and_threads() {
    let rt = rt(2);
    let (tx, rx) = channel::<u32>();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn(move || {
                for i in 0..250 {
                    tx.send(p * 1000 + i).unwrap();
                    if i % 10 == 0 {
                        weft_fiber::yield_now();
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut got: Vec<u32> = rx.iter().collect(); // a plain thread receives
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(got.len(), 1000);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 1000);
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));

    // A thread sends, a fiber receives (and times out first).
    let (tx, rx) = channel::<&'static str>();
    let h = rt.spawn(move || {
        let first = rx.recv_timeout(Duration::from_millis(10));
        (first, rx.recv())
    });
    thread_sleep(Duration::from_millis(40));
    tx.send("late").unwrap();
    let (first, second) = h.join().unwrap();
    assert_eq!(first, Err(RecvTimeoutError::Timeout));
    assert_eq!(second, Ok("late"));
    assert!(tx.send("gone").is_err(), "the receiver was dropped");
}

#[test]
fn bounded_channel_parks_senders_until_there_is_room() {
    let rt = rt(1);
    let (tx, rx) = bounded::<usize>(2);
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

    let sent = Arc::new(AtomicUsize::new(0));
    let s = sent.clone();
    let producer = rt.spawn(move || {
        for i in 0..100 {
            tx.send(i).unwrap();
            s.fetch_add(1, Ordering::SeqCst);
        }
    });
    thread_sleep(Duration::from_millis(30));
    assert_eq!(
        sent.load(Ordering::SeqCst),
        2,
        "the third send waits for room"
    );
    let got: Vec<usize> = rx.iter().collect();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    producer.join().unwrap();

    // Dropping the receiver wakes a parked sender with an error.
    let (tx, rx) = bounded::<u8>(1);
    let h = rt.spawn(move || {
        tx.send(1).unwrap();
        tx.send(2) // parks: full
    });
    thread_sleep(Duration::from_millis(20));
    drop(rx);
    assert!(h.join().unwrap().is_err());
}

#[test]
fn wait_group_from_fibers_and_threads() {
    let rt = rt(2);
    let wg = WaitGroup::new();
    let done = Arc::new(AtomicUsize::new(0));
    for i in 0..20 {
        wg.add(1);
        let (wg, done) = (wg.clone(), done.clone());
        rt.spawn(move || {
            weft_fiber::sleep(Duration::from_millis(i % 5));
            done.fetch_add(1, Ordering::SeqCst);
            wg.done();
        });
    }
    let w = wg.clone();
    let in_fiber = rt.spawn(move || {
        w.wait();
        w.count()
    });
    wg.wait();
    assert_eq!(done.load(Ordering::SeqCst), 20);
    assert_eq!(in_fiber.join().unwrap(), 0);
    wg.add(1);
    assert!(!wg.wait_timeout(Duration::from_millis(10)));
    wg.done();
    assert!(wg.wait_timeout(Duration::from_millis(10)));
}

#[test]
fn spawn_blocking_parks_only_the_fiber() {
    let rt = rt(1);
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let ticker = rt.spawn(move || {
        for _ in 0..10 {
            weft_fiber::sleep(Duration::from_millis(2));
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let t = ticks.clone();
    let (name, seen) = rt.block_on(move || {
        weft_fiber::spawn_blocking(move || {
            thread_sleep(Duration::from_millis(100)); // a blocking call, off the worker
            (
                std::thread::current().name().unwrap_or("").to_string(),
                t.load(Ordering::SeqCst),
            )
        })
    });
    ticker.join().unwrap();
    assert!(name.starts_with("weft-fiber-blocking"), "{name}");
    assert!(seen >= 5, "the worker kept running fibers: {seen} ticks");
    // A panic in the blocking call resumes in the fiber.
    let err = rt
        .spawn(|| weft_fiber::spawn_blocking(|| -> u8 { panic!("disk on fire") }))
        .join()
        .unwrap_err();
    assert_eq!(err.panic_message(), Some("disk on fire"));
    // Outside a fiber it simply runs here.
    let here = std::thread::current().id();
    assert_eq!(
        weft_fiber::spawn_blocking(move || std::thread::current().id()),
        here
    );
}

#[test]
fn many_fibers_contend_on_one_channel_and_mutex() {
    let rt = rt(2);
    let (tx, rx) = bounded::<u64>(4);
    let m = Arc::new(Mutex::new(0u64));
    let start = Instant::now();
    let hs: Vec<_> = (0..1000u64)
        .map(|i| {
            let (tx, m) = (tx.clone(), m.clone());
            rt.spawn(move || {
                *m.lock() += i;
                tx.send(i).unwrap();
            })
        })
        .collect();
    drop(tx);
    let sum: u64 = rt.block_on(move || rx.iter().sum());
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(sum, 999 * 1000 / 2);
    assert_eq!(*m.lock(), sum);
    assert!(start.elapsed() < Duration::from_secs(20));
}
