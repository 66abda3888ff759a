//! The fibers paper's Figures 4 and 5 on this machine, plus the switch costs of the scheduler.
//!
//! - `create_destroy_1000/{fibers,threads}`: spawn 1000 and join them all (Figure 5: fibers vs
//!   OS threads; fibers are spawned from a fiber onto its own worker, so every one goes through
//!   the scheduler: stack from the pool, run queue, run, result to the handle, stack back).
//! - `yield_round_trip/{one_fiber,two_fibers}`: one `yield_now` through the run queue and back.
//! - `channel_ping_pong`: one message there and one back between two fibers of one worker.
//! - `mutex_handoff`: two fibers alternating on a contended fiber Mutex.
//!
//! Resident bytes per parked fiber: `cargo run --release -p weft-fiber --example parked_rss`.
//! Short runs: `cargo bench -p weft-fiber -- --warm-up-time 1 --measurement-time 3`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use weft_fiber::sync::{channel, Mutex};
use weft_fiber::Runtime;

fn runtime() -> Runtime {
    Runtime::builder().workers(1).build().unwrap()
}

fn create_destroy(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("create_destroy_1000");
    g.throughput(Throughput::Elements(1000));
    g.sample_size(20); // 1000 OS threads take ~40 ms: keep the run short
    g.bench_function(BenchmarkId::from_parameter("fibers"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let mut handles = Vec::with_capacity(1000);
                let t = Instant::now();
                for _ in 0..iters {
                    for i in 0..1000u32 {
                        handles.push(weft_fiber::spawn(move || i));
                    }
                    for h in handles.drain(..) {
                        criterion::black_box(h.join().unwrap());
                    }
                }
                t.elapsed()
            })
        })
    });
    g.bench_function(BenchmarkId::from_parameter("threads"), |b| {
        b.iter_custom(|iters| {
            let mut handles = Vec::with_capacity(1000);
            let t = Instant::now();
            for _ in 0..iters {
                for i in 0..1000u32 {
                    handles.push(std::thread::spawn(move || i));
                }
                for h in handles.drain(..) {
                    criterion::black_box(h.join().unwrap());
                }
            }
            t.elapsed()
        })
    });
    g.finish();
}

/// Figure 4's analogue: the paper compared its fibers with the platform's (Windows fibers);
/// here weft fibers (through the scheduler) against bare corosensei coroutines, on a freshly
/// mapped `DefaultStack` each (what a fiber costs without a stack pool) and on one reused stack.
fn fiber_libraries(c: &mut Criterion) {
    use corosensei::stack::DefaultStack;
    use corosensei::{Coroutine, CoroutineResult};
    let rt = runtime();
    let mut g = c.benchmark_group("figure4_create_destroy_1000");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("weft_fibers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    let hs: Vec<_> = (0..1000u32).map(|i| weft_fiber::spawn(move || i)).collect();
                    for h in hs {
                        criterion::black_box(h.join().unwrap());
                    }
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("corosensei_fresh_stack", |b| {
        b.iter(|| {
            for i in 0..1000u32 {
                let stack = DefaultStack::new(64 * 1024).unwrap();
                let mut co =
                    Coroutine::with_stack(stack, move |_: &corosensei::Yielder<(), ()>, ()| i);
                match co.resume(()) {
                    CoroutineResult::Return(v) => criterion::black_box(v),
                    CoroutineResult::Yield(()) => unreachable!(),
                };
            }
        })
    });
    g.bench_function("corosensei_reused_stack", |b| {
        let mut stack = Some(DefaultStack::new(64 * 1024).unwrap());
        b.iter(|| {
            for i in 0..1000u32 {
                let s = stack.take().unwrap();
                let mut co = Coroutine::with_stack(s, move |_: &corosensei::Yielder<(), ()>, ()| i);
                match co.resume(()) {
                    CoroutineResult::Return(v) => criterion::black_box(v),
                    CoroutineResult::Yield(()) => unreachable!(),
                };
                stack = Some(co.into_stack());
            }
        })
    });
    g.finish();
}

fn yield_round_trip(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("yield_round_trip");
    g.bench_function("one_fiber", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    weft_fiber::yield_now();
                }
                t.elapsed()
            })
        })
    });
    // Two fibers taking turns: each yield switches to the other fiber (per yield).
    g.bench_function("two_fibers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let other = weft_fiber::spawn(move || {
                    for _ in 0..iters {
                        weft_fiber::yield_now();
                    }
                });
                let t = Instant::now();
                for _ in 0..iters {
                    weft_fiber::yield_now();
                }
                let d = t.elapsed();
                other.join().unwrap();
                d
            })
        })
    });
    g.finish();
}

fn channel_ping_pong(c: &mut Criterion) {
    let rt = runtime();
    c.bench_function("channel_ping_pong", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let (ping_tx, ping_rx) = channel::<u64>();
                let (pong_tx, pong_rx) = channel::<u64>();
                let echo = weft_fiber::spawn(move || {
                    while let Ok(v) = ping_rx.recv() {
                        pong_tx.send(v).unwrap();
                    }
                });
                let t = Instant::now();
                for i in 0..iters {
                    ping_tx.send(i).unwrap();
                    criterion::black_box(pong_rx.recv().unwrap());
                }
                let d = t.elapsed();
                drop(ping_tx);
                echo.join().unwrap();
                d
            })
        })
    });
}

/// As `channel_ping_pong` with the two fibers on different workers: every message wakes the
/// other thread (inbox + eventfd when it sleeps).
fn channel_ping_pong_cross_worker(c: &mut Criterion) {
    let rt = Runtime::builder().workers(2).build().unwrap();
    c.bench_function("channel_ping_pong_cross_worker", |b| {
        b.iter_custom(|iters| {
            let (ping_tx, ping_rx) = channel::<u64>();
            let (pong_tx, pong_rx) = channel::<u64>();
            let echo = rt.spawn_on(1, move || {
                while let Ok(v) = ping_rx.recv() {
                    pong_tx.send(v).unwrap();
                }
            });
            let d = rt
                .spawn_on(0, move || {
                    let t = Instant::now();
                    for i in 0..iters {
                        ping_tx.send(i).unwrap();
                        criterion::black_box(pong_rx.recv().unwrap());
                    }
                    t.elapsed()
                })
                .join()
                .unwrap();
            echo.join().unwrap();
            d
        })
    });
}

fn mutex_handoff(c: &mut Criterion) {
    let rt = runtime();
    c.bench_function("mutex_handoff", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let m = Arc::new(Mutex::new(0u64));
                let m2 = m.clone();
                let other = weft_fiber::spawn(move || {
                    for _ in 0..iters {
                        let mut g = m2.lock();
                        *g += 1;
                        weft_fiber::yield_now();
                    }
                });
                let t = Instant::now();
                for _ in 0..iters {
                    let mut g = m.lock();
                    *g += 1;
                    weft_fiber::yield_now();
                }
                let d = t.elapsed();
                other.join().unwrap();
                d
            })
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = create_destroy, fiber_libraries, yield_round_trip, channel_ping_pong, channel_ping_pong_cross_worker, mutex_handoff
}
criterion_main!(benches);
