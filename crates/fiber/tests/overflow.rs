//! A fiber that overflows its stack ends the process with a clear message; other faults keep
//! their default action. Each case runs in a child process (this test binary re-executed with
//! `WEFT_FIBER_FAULT_CHILD` set), since it ends that process.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

const CHILD_ENV: &str = "WEFT_FIBER_FAULT_CHILD";

fn run_child(case: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fault_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, case)
        .output()
        .unwrap()
}

#[test]
fn stack_overflow_in_a_fiber_aborts_with_a_clear_message() {
    let out = run_child("overflow");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let id = stdout
        .split("overflowing fiber ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("child did not start: {stdout}\n{stderr}"));
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{}\n{stderr}",
        out.status
    );
    let want = format!("weft-fiber: stack overflow in fiber {id} (stack of 32768 bytes");
    assert!(stderr.contains(&want), "stderr: {stderr}");
}

#[test]
fn other_faults_in_a_fiber_keep_the_default_action() {
    let out = run_child("segv");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{}\n{stderr}",
        out.status
    );
    assert!(!stderr.contains("stack overflow"), "stderr: {stderr}");
}

#[test]
fn with_no_previous_handler_other_faults_get_the_default_action() {
    let out = run_child("segv-default");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{stderr}");
    assert!(!stderr.contains("stack overflow"), "stderr: {stderr}");
}

#[test]
fn a_plain_thread_overflow_is_still_reported_by_rust() {
    let out = run_child("thread-overflow");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(
        stderr.contains("has overflowed its stack"),
        "stderr: {stderr}"
    );
    assert!(!stderr.contains("weft-fiber"), "stderr: {stderr}");
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let mut frame = [0u8; 512];
    frame[(n % 512) as usize] = n as u8;
    std::hint::black_box(&mut frame);
    if n == u64::MAX {
        return 0;
    }
    recurse(n + 1) + u64::from(frame[7])
}

/// The child half; does nothing unless started by the tests above.
#[test]
fn fault_child() {
    let Ok(case) = std::env::var(CHILD_ENV) else {
        return;
    };
    if case == "segv-default" {
        // Remove Rust's own handler first, so the runtime's handler chains to SIG_DFL.
        // SAFETY: resetting a signal to its default action has no memory preconditions.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
    }
    let rt = weft_fiber::Runtime::builder()
        .workers(1)
        .stack_size(32 * 1024)
        .build()
        .unwrap();
    match case.as_str() {
        "overflow" => {
            let _ = rt
                .spawn(|| {
                    println!("overflowing fiber {}", weft_fiber::current_id().unwrap());
                    recurse(0)
                })
                .join();
        }
        "segv" | "segv-default" => {
            let _ = rt
                .spawn(|| {
                    let p = std::hint::black_box(16usize) as *mut u8;
                    // SAFETY: deliberately unsound: the test needs a fault outside any guard page.
                    unsafe { p.write_volatile(1) };
                })
                .join();
        }
        "thread-overflow" => {
            let t = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap();
            let _ = t.join();
        }
        other => panic!("unknown case {other}"),
    }
    unreachable!("the child should have died");
}
