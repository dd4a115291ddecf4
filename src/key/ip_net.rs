//! Address ranges and grouping: which peers are trusted proxies, and how much of an address
//! names one client.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::{IpNet, Ipv4Net};

use super::Key;
use crate::error::ConfigError;

/// Address ranges: trusted proxies ([`ClientIp`](super::ClientIp)), or peers a layer lets
/// through unlimited ([`RateLimitBuilder::allow_ips`](crate::layer::RateLimitBuilder::allow_ips)).
/// IPv4-mapped IPv6 ranges are stored as IPv4 ranges, and addresses are looked up in canonical
/// form, so `::ffff:10.0.0.1` is in `10.0.0.0/8` and the other way round. Cheap to clone.
///
/// ```
/// use redlimit::key::IpRanges;
/// let ranges = IpRanges::parse(["10.0.0.0/8", "::1"])?;
/// assert!(IpRanges::parse(["10.0.0.0/33"]).is_err());
/// assert!(IpRanges::parse(["0.0.0.0/0"]).is_err(), "/0 would trust everyone");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct IpRanges(Arc<[IpNet]>);

impl IpRanges {
    /// Parses addresses (`10.0.0.1`, `::1`) and CIDRs (`10.0.0.0/8`, `2001:db8::/32`); a range
    /// that is neither, or that would hold every address (`/0`), is a
    /// [`ConfigError::InvalidRange`].
    ///
    /// ```
    /// let ranges = redlimit::key::IpRanges::parse(["192.168.0.0/16", "2001:db8::/32"])?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parse<I>(ranges: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let nets = ranges
            .into_iter()
            .map(|r| parse_range(r.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(IpRanges(nets.into()))
    }

    /// Whether `ip` (canonical: IPv4-mapped addresses already turned into IPv4) is trusted.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }
}

fn parse_range(text: &str) -> Result<IpNet, ConfigError> {
    let invalid = |reason| ConfigError::InvalidRange {
        range: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let net = if trimmed.contains('/') {
        trimmed.parse::<IpNet>().ok()
    } else {
        trimmed.parse::<IpAddr>().ok().map(IpNet::from)
    };
    let net = canonical(
        net.ok_or_else(|| invalid("expected an address or a CIDR such as 10.0.0.0/8 or ::1/128"))?
            .trunc(),
    );
    if net.prefix_len() == 0 {
        // Trusting every address lets any client name itself by sending a forwarded header.
        return Err(invalid("a /0 range would trust clients to name themselves"));
    }
    Ok(net)
}

fn canonical(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => v6
            .addr()
            .to_ipv4_mapped()
            .and_then(|v4| Ipv4Net::new(v4, v6.prefix_len() - 96).ok())
            .map_or(net, IpNet::V4),
        _ => net,
    }
}

/// How many leading bits of an address name one client: 32 and 64 by default, since whoever
/// holds one IPv6 address usually holds its whole /64 and could rotate through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grouping {
    pub(crate) v4: u8,
    pub(crate) v6: u8,
}

impl Grouping {
    pub(crate) const DEFAULT: Grouping = Grouping { v4: 32, v6: 64 };

    /// The key of a client address: `ip:203.0.113.7`, `ip:2001:db8:1:2::/64`. IPv4-mapped
    /// IPv6 addresses count as IPv4.
    pub(crate) fn key(self, ip: IpAddr) -> Key {
        use std::io::Write;
        let mut text = smallvec::SmallVec::<[u8; 64]>::new();
        // Writing to a vector cannot fail.
        let _ = match ip.to_canonical() {
            IpAddr::V4(a) if self.v4 >= 32 => write!(text, "{a}"),
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.v4)).unwrap_or(0);
                write!(text, "{}/{}", Ipv4Addr::from(u32::from(a) & mask), self.v4)
            }
            IpAddr::V6(a) if self.v6 >= 128 => write!(text, "{a}"),
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.v6)).unwrap_or(0);
                write!(text, "{}/{}", Ipv6Addr::from(u128::from(a) & mask), self.v6)
            }
        };
        Key::in_namespace("ip", &text)
    }

    /// Checks a prefix length for IP `version` 4 or 6.
    pub(crate) fn check(version: u8, len: u8) -> Result<u8, ConfigError> {
        let max = if version == 4 { 32 } else { 128 };
        if (1..=max).contains(&len) {
            Ok(len)
        } else {
            Err(ConfigError::InvalidPrefixLength { version, len })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_match_canonical_addresses() {
        let r = IpRanges::parse(["10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8::1"]).unwrap();
        assert!(r.contains(ip("10.1.2.3")));
        assert!(r.contains(ip("192.168.7.7")));
        assert!(r.contains(ip("2001:db8::1")));
        assert!(!r.contains(ip("2001:db8::2")));
        assert!(!r.contains(ip("11.0.0.1")));
    }

    #[test]
    fn bad_ranges_are_errors() {
        for bad in [
            "",
            "10.0.0.0/33",
            "999.0.0.0/8",
            "0.0.0.0/0",
            "::/0",
            "x",
            "10.0.0.0/8/8",
        ] {
            assert!(IpRanges::parse([bad]).is_err(), "{bad}");
        }
        // Host bits are dropped rather than refused.
        assert!(
            IpRanges::parse(["10.1.2.3/8"])
                .unwrap()
                .contains(ip("10.200.0.1"))
        );
    }

    #[test]
    fn grouping() {
        let g = Grouping::DEFAULT;
        assert_eq!(g.key(ip("203.0.113.7")).as_str(), "ip:203.0.113.7");
        assert_eq!(g.key(ip("::ffff:1.2.3.4")).as_str(), "ip:1.2.3.4");
        assert_eq!(
            g.key(ip("2001:db8:1:2:aaaa::1")).as_str(),
            "ip:2001:db8:1:2::/64"
        );
        let g = Grouping { v4: 24, v6: 128 };
        assert_eq!(g.key(ip("203.0.113.7")).as_str(), "ip:203.0.113.0/24");
        assert_eq!(g.key(ip("2001:db8::1")).as_str(), "ip:2001:db8::1");
        let g = Grouping { v4: 1, v6: 1 };
        assert_eq!(g.key(ip("203.0.113.7")).as_str(), "ip:128.0.0.0/1");
        assert_eq!(g.key(ip("2001:db8::1")).as_str(), "ip:::/1");
        assert!(Grouping::check(4, 0).is_err());
        assert!(Grouping::check(4, 33).is_err());
        assert!(Grouping::check(6, 129).is_err());
        assert_eq!(Grouping::check(6, 128), Ok(128));
    }
}
