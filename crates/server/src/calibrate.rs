//! `weft calibrate`: fits the pipeline's utilization constants c1 and c2 (U = c1*W + c2*R)
//! the way the pipeline paper does (§4.2): saturate the server with requests for files of
//! several sizes, record the requests/s (W) and bytes/s (R) reached at full load, each a point
//! where U = 1, and fit the line W = α + β·R through them by least squares; then c1 = 1/α and
//! c2 = −β/α.
//!
//! The server runs in this process on a loopback port, and so does the load: a closed loop of
//! keep-alive clients, each sending its next request as soon as the last response arrived. On
//! one machine the clients take part of the CPU, so the constants describe this server and its
//! clients together; run it with the model and settings you will serve with.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, Model};
use crate::server::Server;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Served with this configuration (its root and listeners are replaced).
    pub config: Config,
    /// The model that serves the load.
    pub model: Model,
    /// File sizes, one saturating run each.
    pub sizes: Vec<u64>,
    /// Concurrent keep-alive clients.
    pub connections: usize,
    /// Measured seconds per size (after a warm-up of a quarter of it).
    pub duration: Duration,
}

/// One saturating run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub size: u64,
    /// Requests per second.
    pub w: f64,
    /// Response bytes per second.
    pub r: f64,
}

/// The fitted constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub c1: f64,
    pub c2: f64,
    /// Coefficient of determination of the line W = α + β·R over the points.
    pub r2: f64,
}

/// Runs one saturating load per size and returns the points.
pub fn measure(opts: &Options) -> io::Result<Vec<Point>> {
    let dir = std::env::temp_dir().join(format!("weft-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure_in(opts, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure_in(opts: &Options, dir: &std::path::Path) -> io::Result<Vec<Point>> {
    for &size in &opts.sizes {
        let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(dir.join(format!("f{size}")), body)?;
    }
    let mut cfg = opts.config.clone();
    cfg.root = PathBuf::from(dir);
    cfg.listen = Vec::new();
    cfg.access_log = crate::config::AccessLogTarget::Off;
    let server = Server::builder()
        .config(cfg)
        .listen("127.0.0.1:0".parse().expect("valid"), opts.model)
        .build()?;
    let addr = server.local_addrs()[0].0;
    let metrics = server.app().metrics().clone();
    let handle = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());
    let mut points = Vec::new();
    for &size in &opts.sizes {
        let path = format!("/f{size}");
        let warm = opts.duration / 4;
        load(addr, &path, opts.connections, warm)?;
        let l = &metrics.listeners()[0];
        let (req0, bytes0) = (l.requests(), l.bytes_out());
        let t0 = Instant::now();
        load(addr, &path, opts.connections, opts.duration)?;
        let dt = t0.elapsed().as_secs_f64();
        let w = (l.requests() - req0) as f64 / dt;
        let r = (l.bytes_out() - bytes0) as f64 / dt;
        points.push(Point { size, w, r });
    }
    handle.shutdown();
    running
        .join()
        .map_err(|_| io::Error::other("the server panicked"))??;
    Ok(points)
}

/// Drives `connections` closed-loop keep-alive clients requesting `path` for `duration`.
fn load(addr: SocketAddr, path: &str, connections: usize, duration: Duration) -> io::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let request = format!("GET {path} HTTP/1.1\r\nHost: calibrate\r\n\r\n").into_bytes();
    let clients: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let stop = stop.clone();
            let request = request.clone();
            std::thread::spawn(move || -> io::Result<()> {
                let connect = || -> io::Result<TcpStream> {
                    let s = TcpStream::connect(addr)?;
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(Duration::from_secs(10)))?;
                    Ok(s)
                };
                let mut s = connect()?;
                let mut buf = vec![0u8; 64 * 1024];
                while !stop.load(Relaxed) {
                    s.write_all(&request)?;
                    // A connection's last response (`limits.keepalive_requests`) says so: the
                    // next request goes on a new one, as a browser's would.
                    if read_response(&mut s, &mut buf)? {
                        s = connect()?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Relaxed);
    for c in clients {
        c.join()
            .map_err(|_| io::Error::other("a load client panicked"))??;
    }
    Ok(())
}

/// Reads one response with a `Content-Length` body (all the static-file handler sends);
/// true when it closes its connection (`Connection: close`).
fn read_response(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut have = 0;
    let head_end = loop {
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
        if let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if have == buf.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]);
    if !head.starts_with("HTTP/1.1 200") {
        let line = head.lines().next().unwrap_or("").to_string();
        return Err(io::Error::other(format!("unexpected response: {line}")));
    }
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Content-Length"))?;
    let closes = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(n, v)| {
            n.eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close")
        })
    });
    let mut left = (head_end + len).saturating_sub(have);
    let cap = buf.len();
    while left > 0 {
        let n = s.read(&mut buf[..left.min(cap)])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        left -= n;
    }
    Ok(closes)
}

/// Fits W = α + β·R through the points; c1 = 1/α, c2 = −β/α (clamped at 0: more bytes can
/// never make the server faster). `None` with fewer than two distinct R or a non-positive α.
pub fn fit(points: &[Point]) -> Option<Fit> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_r = points.iter().map(|p| p.r).sum::<f64>() / n;
    let mean_w = points.iter().map(|p| p.w).sum::<f64>() / n;
    let srr: f64 = points.iter().map(|p| (p.r - mean_r).powi(2)).sum();
    if srr <= 0.0 {
        return None;
    }
    let srw: f64 = points.iter().map(|p| (p.r - mean_r) * (p.w - mean_w)).sum();
    let beta = srw / srr;
    let alpha = mean_w - beta * mean_r;
    if alpha <= 0.0 || !alpha.is_finite() {
        return None;
    }
    let ss_tot: f64 = points.iter().map(|p| (p.w - mean_w).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.w - alpha - beta * p.r).powi(2))
        .sum();
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    let c1 = 1.0 / alpha;
    Some(Fit {
        c1,
        c2: (-beta * c1).max(0.0),
        r2,
    })
}

/// Sets `[pipeline] c1` and `c2` in the TOML text `existing` (other keys kept; comments and
/// layout are not).
pub fn write_config(existing: &str, f: &Fit) -> Result<String, String> {
    let mut table: toml::Table = toml::from_str(existing).map_err(|e| e.to_string())?;
    let pipeline = table
        .entry("pipeline")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(p) = pipeline else {
        return Err("`pipeline` is not a table".into());
    };
    p.insert("c1".into(), toml::Value::Float(f.c1));
    p.insert("c2".into(), toml::Value::Float(f.c2));
    let text = toml::to_string(&table).map_err(|e| e.to_string())?;
    Config::from_toml(&text)?;
    Ok(text)
}

/// Parses `4k`, `100k`, `1m` or a number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.to_ascii_lowercase().chars().last() {
        Some('k') => (&s[..s.len() - 1], 1024),
        Some('m') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("bad size `{s}` (e.g. 512, 4k, 1m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(w: f64, r: f64) -> Point {
        Point { size: 0, w, r }
    }

    #[test]
    fn fits_the_capacity_line() {
        // A server that serves 40,000 requests/s of nothing and loses one request/s per
        // 25,000 bytes/s: c1 = 1/40000, c2 = 1/(40000*25000).
        let pts: Vec<Point> = [0.0, 1e8, 5e8, 9e8]
            .iter()
            .map(|&r| p(40_000.0 - r / 25_000.0, r))
            .collect();
        let f = fit(&pts).unwrap();
        assert!((f.c1 - 2.5e-5).abs() < 1e-12, "{f:?}");
        assert!((f.c2 - 1e-9).abs() < 1e-15, "{f:?}");
        assert!((f.r2 - 1.0).abs() < 1e-9, "{f:?}");
        for q in &pts {
            assert!((f.c1 * q.w + f.c2 * q.r - 1.0).abs() < 1e-9);
        }
        assert!(fit(&pts[..1]).is_none());
        assert!(fit(&[p(1.0, 5.0), p(2.0, 5.0)]).is_none());
    }

    #[test]
    fn writes_the_constants_into_a_config() {
        let f = Fit {
            c1: 3e-5,
            c2: 2e-9,
            r2: 0.9,
        };
        let text = write_config("root = \"www\"\n[pipeline]\nsend = 3\n", &f).unwrap();
        let c = Config::from_toml(&text).unwrap();
        assert_eq!(c.pipeline.c1, 3e-5);
        assert_eq!(c.pipeline.c2, 2e-9);
        assert_eq!(c.pipeline.send, 3);
        assert_eq!(c.root, PathBuf::from("www"));
        let c = Config::from_toml(&write_config("", &f).unwrap()).unwrap();
        assert_eq!(c.pipeline.c1, 3e-5);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert!(parse_size("x").is_err());
    }

    #[test]
    fn measures_a_point_per_size() {
        let opts = Options {
            config: Config::default(),
            model: Model::Pipeline,
            sizes: vec![100, 20_000],
            connections: 2,
            duration: Duration::from_millis(200),
        };
        let pts = measure(&opts).unwrap();
        assert_eq!(pts.len(), 2);
        for q in &pts {
            assert!(q.w > 0.0 && q.r > q.w * q.size as f64 * 0.9, "{q:?}");
        }
    }
}
