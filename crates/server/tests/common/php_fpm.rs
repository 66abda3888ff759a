//! Debian's php-fpm as a test's FastCGI application: started from a configuration written into
//! the test's directory (a Unix socket there, two static workers, PHP's errors sent to the web
//! server on FastCGI's STDERR), stopped on drop.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A php-fpm binary: `php-fpm` on the PATH, or Debian's `/usr/sbin/php-fpmX.Y`.
pub fn php_fpm() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir("/usr/sbin")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("php-fpm"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// A php-fpm master and its workers, stopped on drop.
pub struct PhpFpm {
    child: Child,
    pub sock: PathBuf,
}

impl PhpFpm {
    /// Starts php-fpm listening on `dir/php.sock` (an existing socket file is replaced).
    pub fn start(bin: &Path, dir: &Path) -> PhpFpm {
        let sock = dir.join("php.sock");
        let log = dir.join("php-fpm.log");
        let conf = dir.join("php-fpm.conf");
        fs::write(
            &conf,
            format!(
                "[global]\nerror_log = {log}\ndaemonize = no\n\
                 [app]\nlisten = {sock}\npm = static\npm.max_children = 2\n\
                 request_terminate_timeout = 4s\ncatch_workers_output = no\n\
                 php_admin_flag[display_errors] = off\nphp_admin_flag[log_errors] = on\n\
                 php_admin_value[upload_max_filesize] = 8M\nphp_admin_value[post_max_size] = 16M\n\
                 php_admin_value[output_buffering] = 0\n",
                log = log.display(),
                sock = sock.display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("-n").arg("-y").arg(&conf).arg("-F");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("-R");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start php-fpm");
        let end = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!(
                    "php-fpm exited ({status}): {err}{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "php-fpm did not create {sock:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Its stderr is drained so it never blocks on it.
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || for _ in BufReader::new(err).lines() {});
        PhpFpm { child, sock }
    }

    /// Kills the master and its workers at once: the workers are listed first and the master
    /// killed before them, so that it cannot start a new one meanwhile.
    pub fn kill(&mut self) {
        let pid = self.child.id();
        let workers: Vec<u32> = super::processes()
            .into_iter()
            .filter(|&(_, parent, _)| parent == pid)
            .map(|(p, _, _)| p)
            .collect();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for &p in &workers {
            // SAFETY: kill takes no pointers; `p` was a worker of the php-fpm we started.
            unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
        }
        // Until every worker is gone one of them may still hold the listening socket.
        let end = Instant::now() + Duration::from_secs(5);
        while super::processes()
            .iter()
            .any(|&(p, _, state)| workers.contains(&p) && state != 'Z')
            && Instant::now() < end
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        self.kill();
    }
}
