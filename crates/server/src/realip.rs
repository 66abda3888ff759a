//! The client's real address behind trusted proxies: `real_ip_from` and `X-Forwarded-For`,
//! with nginx's `real_ip_recursive on` semantics. When the connection comes from a trusted
//! address, the `X-Forwarded-For` entries are read right to left (each proxy appends the
//! address it received from) and the first one that is not trusted is the client; entries a
//! client wrote itself lie further left and are never reached. An entry that is not an address
//! stops the walk at the last trusted one.

use std::net::{IpAddr, SocketAddr};

use crate::config::Cidr;

fn trusted(ip: IpAddr, from: &[Cidr]) -> bool {
    from.iter().any(|c| c.contains(ip))
}

/// The client address of a request from `peer` with these `X-Forwarded-For` field values (in
/// the order received). A forwarded address has no port: the result's port is 0 then.
pub fn real_ip<'a>(
    peer: SocketAddr,
    from: &[Cidr],
    xff: impl Iterator<Item = &'a [u8]>,
) -> SocketAddr {
    if from.is_empty() || !trusted(peer.ip(), from) {
        return peer;
    }
    let mut entries: Vec<&[u8]> = Vec::new();
    for value in xff {
        entries.extend(value.split(|&b| b == b','));
    }
    let mut client = peer;
    for entry in entries.iter().rev() {
        let text = std::str::from_utf8(entry).unwrap_or("").trim();
        let Ok(ip) = text.parse::<IpAddr>() else {
            return client;
        };
        client = SocketAddr::new(ip, 0);
        if !trusted(ip, from) {
            return client;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|c| c.parse().unwrap()).collect()
    }

    fn ip(peer: &str, from: &[&str], xff: &[&str]) -> String {
        let peer: SocketAddr = peer.parse().unwrap();
        real_ip(peer, &cidrs(from), xff.iter().map(|v| v.as_bytes())).to_string()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        assert_eq!(
            ip("203.0.113.9:5000", &["10.0.0.0/8"], &["1.2.3.4"]),
            "203.0.113.9:5000"
        );
        assert_eq!(ip("10.0.0.2:5000", &[], &["1.2.3.4"]), "10.0.0.2:5000");
    }

    #[test]
    fn the_rightmost_untrusted_entry_is_the_client() {
        let from = ["10.0.0.0/8", "192.168.0.0/16"];
        // The client forged 6.6.6.6; 203.0.113.7 is what the first trusted proxy saw.
        assert_eq!(
            ip(
                "10.0.0.2:5000",
                &from,
                &["6.6.6.6, 203.0.113.7, 192.168.1.1"]
            ),
            "203.0.113.7:0"
        );
        // Several fields are one list, in order.
        assert_eq!(
            ip("10.0.0.2:5000", &from, &["6.6.6.6", "203.0.113.7,10.1.1.1"]),
            "203.0.113.7:0"
        );
        assert_eq!(
            ip("10.0.0.2:5000", &from, &["2001:db8::5"]),
            "[2001:db8::5]:0"
        );
    }

    #[test]
    fn all_trusted_gives_the_leftmost_and_garbage_stops_the_walk() {
        let from = ["10.0.0.0/8"];
        assert_eq!(
            ip("10.0.0.2:5000", &from, &["10.9.9.9, 10.1.1.1"]),
            "10.9.9.9:0"
        );
        assert_eq!(
            ip("10.0.0.2:5000", &from, &["203.0.113.7, nonsense, 10.1.1.1"]),
            "10.1.1.1:0"
        );
        assert_eq!(ip("10.0.0.2:5000", &from, &["nonsense"]), "10.0.0.2:5000");
        assert_eq!(ip("10.0.0.2:5000", &from, &[]), "10.0.0.2:5000");
    }
}
