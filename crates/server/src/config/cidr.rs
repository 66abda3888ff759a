//! IP networks, as `[status] allow` and `real_ip_from` take them, and the `access` rules
//! built on them (nginx's `allow` and `deny`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IP network, `ADDR/PREFIX` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// True if `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, p) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a
            .parse()
            .map_err(|e| format!("bad address in `{s}`: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or(format!("bad prefix in `{s}`"))?,
            None => max,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cidr, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One rule of an `access` list (nginx's `allow` and `deny`): `"allow CIDR"`, `"deny CIDR"`,
/// `"allow all"` or `"deny all"`. A list is read in order and the first rule whose network
/// holds the client decides; a client no rule names is allowed (as nginx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRule {
    allow: bool,
    /// `None`: every address (`all`).
    net: Option<Cidr>,
}

impl AccessRule {
    /// Whether `rules` let `ip` in.
    pub fn allows(rules: &[AccessRule], ip: IpAddr) -> bool {
        rules
            .iter()
            .find(|r| r.net.is_none_or(|n| n.contains(ip)))
            .is_none_or(|r| r.allow)
    }
}

impl FromStr for AccessRule {
    type Err = String;
    fn from_str(s: &str) -> Result<AccessRule, String> {
        let (verb, what) = s.trim().split_once(char::is_whitespace).ok_or(format!(
            "`{s}`: expected `allow CIDR`, `deny CIDR`, `allow all` or `deny all`"
        ))?;
        let allow = match verb {
            "allow" => true,
            "deny" => false,
            other => return Err(format!("`{s}`: `{other}` is neither allow nor deny")),
        };
        let what = what.trim();
        let net = if what == "all" {
            None
        } else {
            Some(what.parse::<Cidr>()?)
        };
        Ok(AccessRule { allow, net })
    }
}

impl fmt::Display for AccessRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.allow { "allow" } else { "deny" };
        match self.net {
            Some(n) => write!(f, "{verb} {n}"),
            None => write!(f, "{verb} all"),
        }
    }
}

impl Serialize for AccessRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AccessRule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AccessRule, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> Vec<AccessRule> {
        list.iter().map(|r| r.parse().unwrap()).collect()
    }

    /// nginx's example: `deny 192.168.1.1; allow 192.168.1.0/24; allow 10.1.1.0/16;
    /// allow 2001:0db8::/32; deny all;` read in order, the first match deciding.
    #[test]
    fn access_rules_read_in_order_as_nginx() {
        let r = rules(&[
            "deny 192.168.1.1",
            "allow 192.168.1.0/24",
            "allow 10.1.1.0/16",
            "allow 2001:0db8::/32",
            "deny all",
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(!AccessRule::allows(&r, ip("192.168.1.1")));
        assert!(AccessRule::allows(&r, ip("192.168.1.2")));
        assert!(AccessRule::allows(&r, ip("10.1.200.3")));
        assert!(AccessRule::allows(&r, ip("2001:db8::1")));
        assert!(
            AccessRule::allows(&r, ip("::ffff:10.1.0.1")),
            "IPv4-mapped counts as IPv4"
        );
        assert!(!AccessRule::allows(&r, ip("8.8.8.8")));
        // No rule names the client: allowed.
        assert!(AccessRule::allows(
            &rules(&["deny 10.0.0.0/8"]),
            ip("8.8.8.8")
        ));
        assert!(AccessRule::allows(&[], ip("8.8.8.8")));
        for bad in ["permit all", "allow", "deny 10.0.0.0/33", "allow everyone"] {
            assert!(bad.parse::<AccessRule>().is_err(), "{bad}");
        }
        assert_eq!(r[4].to_string(), "deny all");
        assert_eq!(r[1].to_string(), "allow 192.168.1.0/24");
    }
}
