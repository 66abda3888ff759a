//! `spawn_blocking`: runs a blocking call (disk I/O, DNS, `waitpid`) on a helper thread of the
//! runtime's pool (`pool.rs`) and parks the calling fiber until it returns.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use crate::join::{JoinError, JoinInner};
use crate::sched;
use crate::task;

/// Runs `f` on the runtime's blocking pool and parks the calling fiber until it returns; a
/// panic in `f` is resumed in the caller. Outside a fiber it simply calls `f` (a plain thread
/// may block), so the same handler code runs in every model.
///
/// ```
/// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
/// let n = rt.block_on(|| weft_fiber::spawn_blocking(|| std::fs::read_dir(".").unwrap().count()));
/// assert!(n > 0);
/// ```
pub fn spawn_blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let sched = match sched::current() {
        Some(s) if task::in_fiber() => s,
        _ => return f(),
    };
    let cell = Arc::new(JoinInner::new());
    let done = cell.clone();
    sched.shared.blocking.submit(Box::new(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panic);
        done.complete(r);
    }));
    match cell.wait(None).expect("no deadline") {
        Ok(v) => v,
        Err(JoinError::Panic(p)) => panic::resume_unwind(p),
        Err(JoinError::Cancelled) => unreachable!("blocking jobs are never cancelled"),
    }
}
