//! The SSRF guard: which addresses a request may reach, and a DNS resolver that hands the HTTP
//! client only addresses that passed, so the checked address is the one connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::WebError;

/// The cloud metadata endpoint of AWS, GCP, Azure and others.
const METADATA_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// AWS's IPv6 metadata endpoint.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Decides whether an address may be reached: public addresses always, internal ones only
/// inside a CIDR of `tools.ssrfWhitelist`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsrfGuard {
    /// The CIDRs whose addresses are allowed even though they are internal.
    whitelist: Vec<IpNet>,
}

impl SsrfGuard {
    /// A guard allowing the internal addresses inside `whitelist`.
    pub fn new(whitelist: Vec<IpNet>) -> SsrfGuard {
        SsrfGuard { whitelist }
    }

    /// Parses `tools.ssrfWhitelist` entries (CIDRs, or bare addresses meaning one host).
    pub fn parse(entries: &[String]) -> Result<SsrfGuard, WebError> {
        let parse_one = |entry: &String| {
            let entry = entry.trim();
            entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| WebError::Config(format!("tools.ssrfWhitelist: '{entry}' is not a CIDR")))
        };
        Ok(SsrfGuard::new(entries.iter().map(parse_one).collect::<Result<_, _>>()?))
    }

    /// Whether a connection to `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        !is_internal(ip) || self.whitelist.iter().any(|net| net.contains(&ip))
    }

    /// `Ok` when `ip` (what `host` names) may be reached, else the refusal.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), WebError> {
        if self.allows(ip) { Ok(()) } else { Err(WebError::Refused { host: host.to_owned(), address: ip }) }
    }

    /// Resolves `host` and keeps the addresses that may be reached; refuses when none may.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, WebError> {
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            self.check(host, ip)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| WebError::Dns { host: host.to_owned(), reason: e.to_string() })?
            .collect();
        let Some(first) = found.first() else {
            return Err(WebError::Dns { host: host.to_owned(), reason: "no addresses".to_owned() });
        };
        let allowed: Vec<SocketAddr> = found.iter().copied().filter(|addr| self.allows(addr.ip())).collect();
        if allowed.is_empty() {
            return Err(WebError::Refused { host: host.to_owned(), address: first.ip() });
        }
        Ok(allowed)
    }

    /// A resolver for the HTTP client that returns only allowed addresses.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver { guard: self.clone() })
    }
}

/// The HTTP client's resolver: every name it connects to is resolved here and filtered by the
/// guard, so a name cannot resolve to one address when checked and another when connected.
#[derive(Debug)]
pub struct GuardedResolver {
    /// The policy applied to every resolved address.
    guard: SsrfGuard,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = guard.resolve(&host, 0).await?;
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// An IPv6 address that stands for an IPv4 one — mapped (`::ffff:10.0.0.1`), compatible
/// (`::10.0.0.1`), NAT64 (`64:ff9b::a00:1`) or 6to4 (`2002:a00:1::`) — as that IPv4 address,
/// so an internal IPv4 address cannot be reached through its IPv6 spelling.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    let s = v6.segments();
    let embedded = |high: u16, low: u16| IpAddr::V4(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    match s {
        [0, 0, 0, 0, 0, 0, high, low] if high != 0 => embedded(high, low),
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => embedded(high, low),
        [0x2002, high, low, ..] => embedded(high, low),
        _ => ip,
    }
}

/// Whether `ip` is an address a web request must not reach unless whitelisted.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4 == METADATA_V4
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || a == 0
                // Carrier-grade NAT, 100.64.0.0/10.
                || (a == 100 && (64..128).contains(&b))
                // Benchmarking and reserved ranges are not on the public internet either.
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6 == METADATA_V6
                || v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local, fc00::/7.
                || (first & 0xfe00) == 0xfc00
                // Link-local, fe80::/10.
                || (first & 0xffc0) == 0xfe80
                // Site-local (deprecated), fec0::/10.
                || (first & 0xffc0) == 0xfec0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_refused_and_public_ones_allowed() {
        let guard = SsrfGuard::default();
        for blocked in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
        ] {
            assert!(!guard.allows(ip(blocked)), "{blocked} must be refused");
        }
        for allowed in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1"] {
            assert!(guard.allows(ip(allowed)), "{allowed} must be allowed");
        }
    }

    #[test]
    fn a_whitelisted_cidr_opens_only_its_own_addresses() {
        let guard = SsrfGuard::parse(&["127.0.0.1/32".to_owned(), "10.1.0.0/16".to_owned()]).unwrap();
        assert!(guard.allows(ip("127.0.0.1")));
        assert!(guard.allows(ip("10.1.2.3")));
        assert!(!guard.allows(ip("127.0.0.2")));
        assert!(!guard.allows(ip("10.0.0.1")));
        assert!(!guard.allows(ip("169.254.169.254")));
    }

    #[test]
    fn a_bare_address_whitelists_one_host_and_garbage_is_a_config_error() {
        let guard = SsrfGuard::parse(&["192.168.0.7".to_owned()]).unwrap();
        assert!(guard.allows(ip("192.168.0.7")));
        assert!(!guard.allows(ip("192.168.0.8")));
        let error = SsrfGuard::parse(&["nonsense".to_owned()]).unwrap_err();
        assert!(error.to_string().contains("tools.ssrfWhitelist"), "{error}");
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused() {
        let error = SsrfGuard::default().resolve("localhost", 80).await.unwrap_err();
        assert!(matches!(error, WebError::Refused { .. }), "{error}");
    }
}
