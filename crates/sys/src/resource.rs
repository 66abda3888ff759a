//! What the process may use and has used: the open-file limit, CPU affinity (read, set, and
//! set in a child before exec), this process's CPU time, resident memory and open
//! descriptors, and the unit of `/proc`'s CPU times.

use std::io;
use std::time::Duration;

use crate::cvt;

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit for getrlimit to fill.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit read from the kernel with only the soft limit raised.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of CPU times in `/proc`; 100 if
/// unknown.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(100)
}

/// The CPU time this process has used, user and system together (`getrusage(RUSAGE_SELF)`:
/// every thread, not its children).
pub fn self_cpu_time() -> io::Result<Duration> {
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, exclusively borrowed rusage that getrusage only writes.
    cvt(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) })?;
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok(tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// The resident set size of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> io::Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc/self/statm"))?;
    Ok(pages * crate::mem::page_size() as u64)
}

/// The number of open file descriptors of this process, from `/proc/self/fd`.
pub fn open_fds() -> io::Result<usize> {
    // read_dir itself holds one descriptor while it runs; do not count it.
    Ok(std::fs::read_dir("/proc/self/fd")?
        .count()
        .saturating_sub(1))
}

/// The CPUs the calling thread may run on (its affinity), in increasing order.
pub fn affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data for which all zeroes is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live, writable cpu_set_t of exactly the size passed; pid 0 is the
    // calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    cvt(rc)?;
    // SAFETY: CPU_ISSET reads bit `c` of `set`, and `c` is below the set's size in bits.
    Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>())
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Sets the calling thread's affinity to `cores` (threads it starts afterwards inherit it).
/// Cores past `CPU_SETSIZE` are left out; an empty set is refused by the kernel (`EINVAL`).
pub fn set_affinity(cores: &[usize]) -> io::Result<()> {
    CpuSet::of(cores).apply()
}

/// A set of CPUs made ready before it is applied, so that applying it allocates nothing and
/// may run between fork and exec ([`process::pin_command`](crate::process::pin_command)).
#[derive(Clone, Copy)]
pub(crate) struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of `cores` (those below `CPU_SETSIZE`).
    pub(crate) fn of(cores: &[usize]) -> CpuSet {
        // SAFETY: cpu_set_t is plain data, zeroed is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cores {
            if c < libc::CPU_SETSIZE as usize {
                // SAFETY: CPU_SET writes bit `c` of `set`, a live local, and `c` is below the
                // set's size in bits (checked just above).
                unsafe { libc::CPU_SET(c, &mut set) };
            }
        }
        CpuSet(set)
    }

    /// Makes the set the calling thread's affinity: one system call, no allocation.
    pub(crate) fn apply(&self) -> io::Result<()> {
        // SAFETY: sched_setaffinity reads exactly the set we pass, with its size; pid 0 is the
        // calling thread.
        cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) })
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_limit_is_raised_to_the_hard_one() {
        let soft = raise_nofile_limit().unwrap();
        assert!(soft > 0);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a live rlimit for getrlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!((lim.rlim_cur, lim.rlim_cur), (soft, lim.rlim_max));
    }

    #[test]
    fn this_process_has_cpu_time_ticks_memory_and_descriptors() {
        assert!(clock_ticks_per_second() > 0);
        let t0 = self_cpu_time().unwrap();
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let t1 = self_cpu_time().unwrap();
        assert!(t1 > t0, "{t0:?} {t1:?}");
        assert!(resident_bytes().unwrap() > 0);
        let before = open_fds().unwrap();
        let f = std::fs::File::open("/proc/self/statm").unwrap();
        assert!(open_fds().unwrap() >= before.min(1));
        drop(f);
    }

    #[test]
    fn affinity_lists_the_cpus_this_thread_may_run_on() {
        let cpus = affinity().expect("sched_getaffinity");
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
        // This thread runs on one of them now.
        // SAFETY: sched_getcpu takes no arguments and only returns a number.
        let now = unsafe { libc::sched_getcpu() };
        assert!(now >= 0 && cpus.contains(&(now as usize)), "{now} {cpus:?}");
    }

    #[test]
    fn a_pinned_thread_and_a_pinned_child_run_on_the_cores_named() {
        let cpus = affinity().unwrap();
        let core = *cpus.last().unwrap();
        let (mine, inherited) = std::thread::spawn(move || {
            set_affinity(&[core, usize::MAX]).unwrap();
            let inherited = std::thread::spawn(|| affinity().unwrap()).join().unwrap();
            (affinity().unwrap(), inherited)
        })
        .join()
        .unwrap();
        assert_eq!((mine, inherited), (vec![core], vec![core]));
        assert_eq!(
            set_affinity(&[]).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        let mut cmd = std::process::Command::new("cat");
        cmd.arg("/proc/self/status")
            .stdout(std::process::Stdio::piped());
        crate::process::pin_command(&mut cmd, vec![core]);
        let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        assert!(
            out.contains(&format!("Cpus_allowed_list:\t{core}\n")),
            "{out}"
        );
    }
}
