//! A quick check beside the criterion bench (the fibers paper's Figure 5): the time to create
//! and destroy 1000 fibers (spawned from a fiber, each run to completion through the scheduler
//! and joined) against 1000 OS threads (spawn + join). Prints one line; each figure is the
//! median of 31 rounds after 5 warm-up rounds.
//!
//! `cargo run --release -p weft-fiber --example spawn`

use std::time::{Duration, Instant};

const N: u32 = 1000;
const ROUNDS: usize = 31;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fibers(rt: &weft_fiber::Runtime) -> Duration {
    rt.block_on(|| {
        let t = Instant::now();
        let hs: Vec<_> = (0..N).map(|i| weft_fiber::spawn(move || i)).collect();
        for h in hs {
            std::hint::black_box(h.join().unwrap());
        }
        t.elapsed()
    })
}

fn threads() -> Duration {
    let t = Instant::now();
    let hs: Vec<_> = (0..N).map(|i| std::thread::spawn(move || i)).collect();
    for h in hs {
        std::hint::black_box(h.join().unwrap());
    }
    t.elapsed()
}

fn main() {
    let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
    for _ in 0..5 {
        fibers(&rt);
        threads();
    }
    let f = median((0..ROUNDS).map(|_| fibers(&rt)).collect());
    let t = median((0..ROUNDS).map(|_| threads()).collect());
    let (fu, tu) = (f.as_secs_f64() * 1e6, t.as_secs_f64() * 1e6);
    println!(
        "create+destroy 1000: fibers {fu:.1} us, threads {tu:.1} us, ratio {:.4}",
        fu / tu
    );
}
