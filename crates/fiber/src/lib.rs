//! weft's fiber runtime: stackful fibers scheduled M:N onto one thread per core, with an
//! epoll reactor, timers, and fiber-aware sockets, pipes and synchronisation. It knows nothing
//! of HTTP.
//!
//! This is the runtime of Keller and Monien, "Improving Http-Server Performance by Adapted
//! Multithreading" (the fibers paper; ARCHITECTURE.md): fibers are far cheaper to
//! create, destroy and switch than OS threads, each worker runs its fibers first-in first-out,
//! and an I/O call switches to another fiber exactly when it would block. Every blocking type
//! here also works on a plain thread (it then blocks the thread), so handler code runs
//! unchanged in a thread-per-connection model.
//!
//! ```
//! use std::io::{Read, Write};
//! use weft_fiber::net::{TcpListener, TcpStream};
//!
//! let rt = weft_fiber::Runtime::builder().workers(2).build().unwrap();
//! let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//! let addr = listener.local_addr().unwrap();
//! // An echo server: one fiber per connection.
//! rt.spawn(move || loop {
//!     let (mut conn, _) = listener.accept().unwrap();
//!     weft_fiber::spawn(move || {
//!         let mut buf = [0; 1024];
//!         while let Ok(n @ 1..) = conn.read(&mut buf) {
//!             conn.write_all(&buf[..n]).unwrap();
//!         }
//!     });
//! });
//! // The same stream type from a plain thread blocks the thread.
//! let mut c = TcpStream::connect(addr).unwrap();
//! c.write_all(b"hi").unwrap();
//! let mut b = [0; 2];
//! c.read_exact(&mut b).unwrap();
//! assert_eq!(&b, b"hi");
//! ```
//!
//! Linux only (epoll, eventfd, sendfile, `MADV_GUARD_INSTALL` with an `mprotect` fallback).
//! Every system call goes through the `weft-sys` crate, which holds the `unsafe` blocks that
//! make them; the `unsafe` here is the runtime's own (stacks, the running fiber's context,
//! the registrations epoll carries, the overflow handler).
//!
//! # Layers
//!
//! The modules form layers; each uses only modules of the layers before it (checked by
//! `tests/layers.rs`, which reads `src/`), so none imports another in a circle. Below them
//! all is the `weft-sys` crate (every raw system call).
//!
//! 1. `protocol` (the lock-free handshakes, loom-checked), `sync::lock` (the internal short
//!    lock), `readiness` (the vocabulary of a wait: direction, deadline, why an idle
//!    connection is handed back), `pool` (the blocking pool's threads), `deadline` (the
//!    generic deadline queue: FIFO lane, heap, lazy cancellation): leaves.
//! 2. `stack` (the stack pool), `guard` (stack-overflow report), `state` (what the workers
//!    share, and their counters, generic over the message type), `idle` (the idle table).
//! 3. `task`: a fiber's shared half, the running fiber's context, the workers' message type.
//! 4. `timer`: the fibers' timers.
//! 5. `sched`: the narrow interface between fibers and their worker (run queue, timers, round
//!    clock; park, unpark, the waker). Nothing below the worker sees more of it.
//! 6. `interrupt`: a wake-up that ends blocked waits (a server's shutdown for its accept loops).
//! 7. `reactor` (fd registrations, readiness, `Source`), `join` (join cells, fiber bodies),
//!    `sync` (fiber-aware `Mutex`, channels, `WaitGroup`), `time` (sleeping).
//! 8. `worker` (the scheduler loop, fiber table, epoll batch, idle table), `io` (pipes),
//!    `blocking` (`spawn_blocking`).
//! 9. `net`: TCP sockets; parks idle connections in the worker.
//! 10. `runtime`: builder, handle and runtime, which start the workers.

/// `AsRawFd`, `AsFd` and `IntoRawFd` for a type whose `src` field is a reactor `Source`
/// (sockets in `net`, pipes in `io`).
macro_rules! fd_traits {
    ($t:ty) => {
        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                self.src.raw()
            }
        }

        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(self.src.owned())
            }
        }

        impl std::os::fd::IntoRawFd for $t {
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                std::os::fd::IntoRawFd::into_raw_fd(self.src.into_fd())
            }
        }
    };
}

mod blocking;
mod deadline;
mod guard;
mod idle;
mod interrupt;
pub mod io;
mod join;
pub mod net;
mod pool;
mod protocol;
mod reactor;
mod readiness;
mod runtime;
mod sched;
mod stack;
mod state;
pub mod sync;
mod task;
mod time;
mod timer;
mod worker;

pub use blocking::spawn_blocking;
pub use join::{JoinError, JoinHandle};
pub use runtime::{
    current_id, spawn, Builder, Handle, IoCounters, Runtime, SpawnPolicy, Stats,
    DEFAULT_BLOCKING_THREADS, DEFAULT_MAX_LINGERING, DEFAULT_STACK_SIZE, DEFAULT_WARM_STACKS,
};
pub use task::{in_fiber, yield_now};
pub use time::{sleep, sleep_until};

/// Process measurements used by the tests, benchmarks and a status page.
pub mod proc {
    pub use crate::stack::guard_pages;
    pub use weft_sys::resource::{open_fds, resident_bytes};
}
