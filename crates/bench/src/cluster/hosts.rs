//! The run's hosts and addresses: the `10.214.N.0/24` network ([`Net`]), the bridge where
//! HAProxy listens, and a namespace for the client and for each instance ([`Hosts`]); and
//! what is read from inside an instance's namespace (its TCP stack's accepted connections).

use std::fs;
use std::io;
use std::net::Ipv4Addr;

use super::instance::Instance;
use super::{Setup, INSTANCES};
use crate::netns::{Bridge, Netns};

/// The client's address in its namespace (host part; the network is per run).
const CLIENT_HOST: u8 = 2;
/// The bridge's address, where HAProxy listens and from which it connects to weft.
const BRIDGE_HOST: u8 = 1;

/// The run's addresses: `10.214.N.0/24`, N from the process id so that two runs do not meet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Net(pub(crate) u8);

impl Net {
    pub(crate) fn host(&self, h: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 214, self.0, h)
    }
    pub(crate) fn instance(&self, i: usize) -> Ipv4Addr {
        self.host(11 + i as u8)
    }
    /// The bridge's address: HAProxy's frontends, and where weft sees HAProxy come from.
    pub(crate) fn bridge(&self) -> Ipv4Addr {
        self.host(BRIDGE_HOST)
    }
    /// The client's address in its namespace.
    pub(crate) fn client(&self) -> Ipv4Addr {
        self.host(CLIENT_HOST)
    }
}

/// The run's hosts: the instances' namespaces, the client's and the bridge that joins them,
/// removed on drop in that order (the fields' order: the namespaces before the bridge).
pub(crate) struct Hosts {
    pub(crate) instances: Vec<Instance>,
    pub(crate) client: Netns,
    _bridge: Bridge,
}

impl Hosts {
    /// The bridge, the client's namespace and each instance's, named after this process
    /// (`id`), with the setup's addresses; the instances configured, not started. `None`
    /// where a namespace cannot be made (said on stderr).
    pub(crate) fn create(id: u32, setup: &Setup) -> io::Result<Option<Hosts>> {
        // The bridge first, so that it is removed after the namespaces joined to it.
        let tag = id % 100_000;
        let net = setup.net;
        let bridge = Bridge::create(&format!("wcb{tag}"), &format!("{}/24", net.bridge()))?;
        let Some(client) = Netns::create(
            &format!("weft-cluster-{id}-client"),
            &format!("wch{tag}c"),
            &format!("wcp{tag}c"),
        )?
        else {
            return Ok(None);
        };
        bridge.attach(&client)?;
        client.address(&format!("{}/24", net.client()))?;
        client.client_sysctls()?;
        let mut instances = Vec::new();
        for i in 0..INSTANCES {
            let Some(ns) = Netns::create(
                &format!("weft-cluster-{id}-w{}", i + 1),
                &format!("wch{tag}{i}"),
                &format!("wcp{tag}{i}"),
            )?
            else {
                return Ok(None);
            };
            bridge.attach(&ns)?;
            let addr = net.instance(i);
            ns.address(&format!("{addr}/24"))?;
            instances.push(Instance::new(i, ns, addr, setup)?);
        }
        Ok(Some(Hosts {
            instances,
            client,
            _bridge: bridge,
        }))
    }

    /// The instances' addresses, in order.
    pub(crate) fn addrs(&self) -> Vec<Ipv4Addr> {
        self.instances.iter().map(|i| i.addr).collect()
    }

    /// Stops every process of every instance.
    pub(crate) fn stop(&mut self) {
        for inst in &mut self.instances {
            inst.stop();
        }
    }
}

/// TCP connections the namespace's stack has accepted so far (`PassiveOpens` of its
/// `/proc/net/snmp`), read from a thread that enters it.
pub(crate) fn passive_opens(ns: &Netns) -> io::Result<u64> {
    std::thread::scope(|sc| {
        sc.spawn(|| -> io::Result<u64> {
            let _in = ns.enter()?;
            let text = fs::read_to_string("/proc/thread-self/net/snmp")?;
            parse_passive_opens(&text)
                .ok_or_else(|| io::Error::other("no Tcp PassiveOpens in /proc/net/snmp"))
        })
        .join()
        .map_err(|_| io::Error::other("the snmp reader panicked"))?
    })
}

/// `PassiveOpens` from the text of `/proc/net/snmp` (a `Tcp:` line of names, then one of
/// values).
pub(crate) fn parse_passive_opens(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let i = names.split_whitespace().position(|n| n == "PassiveOpens")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_opens_are_read_from_the_snmp_table() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax \
                    MaxConn ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 120000 -1 37 \
                    45939 2\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_passive_opens(snmp), Some(45939));
        assert_eq!(parse_passive_opens("Tcp: RtoAlgorithm\nTcp: 1\n"), None);
        assert_eq!(parse_passive_opens(""), None);
        // This process's own namespace, as the experiment reads an instance's.
        let text = fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        assert!(parse_passive_opens(&text).is_some(), "{text}");
    }
}
