//! Test hosts for experiments: Linux network namespaces joined to this one by veth pairs,
//! with addresses the experiment assigns. The shaped link ([`crate::link`]) puts the client in
//! one; the cluster experiment ([`crate::cluster`]) puts each server and the client in one
//! and joins them on a bridge.
//!
//! Needs root and iproute2 (`ip`); [`available`] says why not (the experiment then skips).
//! Every namespace, veth pair and bridge is removed on drop.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

/// `Err(reason)` where namespaces cannot be made here: not root, or no `ip`.
pub fn available() -> Result<(), String> {
    if weft_sys::user::euid() != 0 {
        return Err("needs root (network namespaces)".into());
    }
    if crate::experiment::find_program("ip").is_none() {
        return Err("needs iproute2 (ip)".into());
    }
    Ok(())
}

/// Runs `ip ARGS`; its stderr becomes the error.
pub fn ip(args: &[&str]) -> io::Result<()> {
    run("ip", args)
}

/// Runs `prog ARGS`; its stderr becomes the error.
pub fn run(prog: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// A network namespace with one veth pair into this namespace; both removed on drop.
#[derive(Debug)]
pub struct Netns {
    /// The namespace's name (`ip netns`), also under `/var/run/netns/`.
    pub name: String,
    /// The pair's end in this namespace.
    pub host_if: String,
    /// The pair's end inside the namespace.
    pub peer_if: String,
}

impl Netns {
    /// Creates namespace `name` and a veth pair `host_if` (here) / `peer_if` (there), both up,
    /// loopback up inside. A failure to create the namespace itself (a container may deny it
    /// even to root) is `Ok(None)` with the reason on stderr; later failures are errors, and
    /// what was made is removed.
    pub fn create(name: &str, host_if: &str, peer_if: &str) -> io::Result<Option<Netns>> {
        if let Err(e) = ip(&["netns", "add", name]) {
            eprintln!("# cannot create a network namespace ({e}); skipped");
            return Ok(None);
        }
        // From here Drop removes what exists.
        let ns = Netns {
            name: name.into(),
            host_if: host_if.into(),
            peer_if: peer_if.into(),
        };
        ip(&[
            "link", "add", host_if, "type", "veth", "peer", "name", peer_if,
        ])?;
        ip(&["link", "set", peer_if, "netns", name])?;
        ip(&["link", "set", host_if, "up"])?;
        ns.ip(&["link", "set", peer_if, "up"])?;
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(Some(ns))
    }

    /// Runs `ip ARGS` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> io::Result<()> {
        let mut v = vec!["netns", "exec", &self.name, "ip"];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// Runs `prog ARGS` inside the namespace.
    pub fn exec(&self, prog: &str, args: &[&str]) -> io::Result<()> {
        let mut v = vec!["netns", "exec", &self.name, prog];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// Gives the namespace's end of the pair `cidr` (e.g. `10.214.0.11/24`).
    pub fn address(&self, cidr: &str) -> io::Result<()> {
        self.ip(&["addr", "add", cidr, "dev", &self.peer_if])
    }

    /// A connection per request leaves a TIME_WAIT per request on the client's side; as on
    /// loopback (tcp_tw_reuse = 2 reuses them there only), let a client in this namespace
    /// reuse them, or it runs out of ports within seconds.
    pub fn client_sysctls(&self) -> io::Result<()> {
        self.exec(
            "sysctl",
            &[
                "-q",
                "-w",
                "net.ipv4.tcp_tw_reuse=1",
                "net.ipv4.ip_local_port_range=1024 65000",
            ],
        )
    }

    /// A command that runs `prog` inside the namespace (`ip netns exec` execs it, so the
    /// child's pid is the program's).
    pub fn command(&self, prog: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(prog);
        c
    }

    /// Moves the calling thread into the namespace: sockets it (and the threads it starts
    /// afterwards) opens are the namespace's. The guard moves it back.
    pub fn enter(&self) -> io::Result<NsGuard> {
        let home = File::open("/proc/thread-self/ns/net")?;
        setns(&File::open(ns_path(&self.name))?)?;
        Ok(NsGuard { home })
    }

    /// Moves the calling thread into namespace `name` for the rest of its life (no guard
    /// moves it back): the threads it starts afterwards are born there. For a thread that
    /// outlives the borrow of its [`Netns`], such as the cluster's open-loop load.
    pub(crate) fn enter_for_good(name: &str) -> io::Result<()> {
        setns(&File::open(ns_path(name))?)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace removes the peer end and so the pair.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.host_if]);
    }
}

/// A bridge in this namespace with an address; removed on drop (after the namespaces whose
/// pairs it joins, which are dropped first when declared after it).
#[derive(Debug)]
pub struct Bridge {
    pub name: String,
}

impl Bridge {
    /// Creates bridge `name` with `cidr` on it, up.
    pub fn create(name: &str, cidr: &str) -> io::Result<Bridge> {
        ip(&["link", "add", name, "type", "bridge"])?;
        let b = Bridge { name: name.into() };
        ip(&["addr", "add", cidr, "dev", name])?;
        ip(&["link", "set", name, "up"])?;
        Ok(b)
    }

    /// Attaches `ns`'s host end of its pair to the bridge.
    pub fn attach(&self, ns: &Netns) -> io::Result<()> {
        ip(&["link", "set", &ns.host_if, "master", &self.name])
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.name]);
    }
}

/// Where `ip netns` keeps namespace `name`.
fn ns_path(name: &str) -> String {
    format!("/var/run/netns/{name}")
}

fn setns(f: &File) -> io::Result<()> {
    weft_sys::process::enter_net_namespace(f.as_fd())
}

/// Returns the thread to the namespace it left on drop.
#[derive(Debug)]
pub struct NsGuard {
    home: File,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.home) {
            eprintln!("# could not leave the namespace: {e}");
        }
    }
}
