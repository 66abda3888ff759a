//! A shaped network link for experiments: the client runs in its own network namespace,
//! joined to the server's by a veth pair whose both ends are limited by a token-bucket
//! filter (`tc qdisc ... tbf rate 10mbit`, the fibers paper's link).
//!
//! Needs root and iproute2 (`ip`, `tc`); without them [`Link::shaped`] says why and gives
//! `None`, and the experiment runs on loopback only. The namespace and the veth pair
//! ([`crate::netns`]) are removed on drop.

use std::io;
use std::net::Ipv4Addr;

use crate::netns::{self, Netns, NsGuard};

/// The server's end of the link (in the original namespace).
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
/// The client's end (in the link's namespace).
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);

/// Parses a tc rate such as `10mbit`, `512kbit` or `1gbit` into bits per second.
pub fn parse_rate(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = s.strip_suffix("gbit") {
        (n, 1_000_000_000)
    } else if let Some(n) = s.strip_suffix("mbit") {
        (n, 1_000_000)
    } else if let Some(n) = s.strip_suffix("kbit") {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix("bit") {
        (n, 1)
    } else {
        return None;
    };
    let n: f64 = num.parse().ok()?;
    if !n.is_finite() || n <= 0.0 {
        return None;
    }
    Some((n * mult as f64) as u64)
}

/// The token bucket for `bps`: at least one full-size frame and about 4 ms of the rate, as
/// tc needs a burst of at least rate/HZ.
pub fn burst_bytes(bps: u64) -> u64 {
    (bps / 8 / 250).max(16 * 1024)
}

/// A shaped veth link into a client namespace; removed on drop.
#[derive(Debug)]
pub struct Link {
    ns: Netns,
    /// The link's rate, bits per second.
    pub bps: u64,
}

impl Link {
    /// Sets up the link at `rate` (tc syntax, e.g. `10mbit`). `Ok(None)`, with the reason on
    /// stderr, where this process is not root or iproute2 is missing.
    pub fn shaped(rate: &str) -> io::Result<Option<Link>> {
        let bps = parse_rate(rate)
            .ok_or_else(|| io::Error::other(format!("{rate:?}: not a rate like 10mbit")))?;
        if let Err(why) = netns::available() {
            eprintln!("# link shaping {why}; skipped");
            return Ok(None);
        }
        if crate::experiment::find_program("tc").is_none() {
            eprintln!("# link shaping needs iproute2 (ip and tc); skipped");
            return Ok(None);
        }
        let id = std::process::id();
        let Some(ns) = Netns::create(
            &format!("weft-bench-{id}"),
            &format!("wbs{}", id % 1_000_000),
            &format!("wbc{}", id % 1_000_000),
        )?
        else {
            return Ok(None);
        };
        netns::ip(&[
            "addr",
            "add",
            &format!("{SERVER_ADDR}/30"),
            "dev",
            &ns.host_if,
        ])?;
        ns.address(&format!("{CLIENT_ADDR}/30"))?;
        ns.client_sysctls()?;
        let rate_s = format!("{bps}bit");
        let burst = format!("{}b", burst_bytes(bps));
        for (dev, inside) in [(&ns.host_if, false), (&ns.peer_if, true)] {
            let args = [
                "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate_s, "burst", &burst,
                "latency", "50ms",
            ];
            if inside {
                ns.exec("tc", &args)?;
            } else {
                netns::run("tc", &args)?;
            }
        }
        Ok(Some(Link { ns, bps }))
    }

    /// Moves the calling thread into the client's namespace: sockets it (and the threads it
    /// starts afterwards) opens leave through the shaped link. The guard moves it back.
    pub fn enter(&self) -> io::Result<NsGuard> {
        self.ns.enter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Some(10_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Some(1_500_000_000));
        assert_eq!(parse_rate("512kbit"), Some(512_000));
        assert_eq!(parse_rate("10mb"), None);
        assert_eq!(parse_rate("0mbit"), None);
        assert_eq!(parse_rate("mbit"), None);
        assert_eq!(burst_bytes(10_000_000), 16 * 1024);
        assert_eq!(burst_bytes(1_000_000_000), 500_000);
    }

    /// Where this runs as root with iproute2, a shaped link carries bytes at about its rate
    /// (a generous band: the check is that shaping is on, not its precision).
    #[test]
    fn a_shaped_link_carries_bytes_at_its_rate() {
        use std::io::{Read, Write};
        let Some(link) = Link::shaped("8mbit").expect("set up the link") else {
            return;
        };
        let listener = std::net::TcpListener::bind((SERVER_ADDR, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut n = 0;
            let mut buf = [0u8; 65536];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
            }
            n
        });
        let sent = 1_000_000usize;
        let start = std::time::Instant::now();
        {
            let _in = link.enter().unwrap();
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(&vec![b'x'; sent]).unwrap();
        }
        assert_eq!(server.join().unwrap(), sent);
        let secs = start.elapsed().as_secs_f64();
        // 1 MB at 8 Mbit/s is 1 s; unshaped loopback would take milliseconds.
        assert!(secs > 0.6, "1 MB crossed an 8 Mbit/s link in {secs:.3} s");
    }
}
