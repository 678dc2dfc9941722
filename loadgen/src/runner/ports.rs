//! Where a run's HTTP/1.1 connections come from: enough local addresses that no (source,
//! destination) pair runs out of the kernel's ephemeral ports.
//!
//! One local address holds about as many connections to one server address as
//! `ip_local_port_range` has ports (28,232 by Linux's default), but opens them quickly only
//! up to half of that (see `PORT_SHARE_PERCENT`). `--source-addr` gives more
//! addresses; without it, a run against a loopback target that needs more takes 127.0.0.1,
//! 127.0.0.2, … (all local on loopback), and a run against another host that needs more is
//! refused with the flag to use.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::RunError;
use crate::config::RunConfig;

/// Of each address's ports, the share a run plans to use: under half, because Linux's
/// `connect()` takes ports of one parity first (even; `bind()` the odd ones, since 4.6) and,
/// once that half is taken, searches all of it for every new connection — measured here:
/// 2,000 connections a second fell to ~300 past 14,000 per address. The rest is left for
/// connections closing (TIME_WAIT) and for other programs.
const PORT_SHARE_PERCENT: u64 = 45;

/// The kernel's ephemeral port range size; Linux's default when it cannot be read.
fn ephemeral_ports() -> u64 {
    let text =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = text
        .split_whitespace()
        .filter_map(|n| n.parse::<u64>().ok());
    match (bounds.next(), bounds.next()) {
        (Some(low), Some(high)) if high >= low => high - low + 1,
        _ => 60999 - 32768 + 1,
    }
}

/// The connections a run plans to open from one local address to one server address.
pub(crate) fn ports_per_address() -> u64 {
    ephemeral_ports() * PORT_SHARE_PERCENT / 100
}

/// The source addresses the run's workers take in turn (empty: the kernel's choice), or why
/// the ones given cannot hold the run's connections.
pub(super) fn plan_sources(
    config: &RunConfig,
    target: SocketAddr,
) -> Result<Vec<IpAddr>, RunError> {
    let given = &config.connection.source_addrs;
    for &source in given {
        usable_source(source, target)?;
    }
    if config.connection.multiplexed() {
        return Ok(given.clone());
    }
    let connections = u64::from(config.model.plan().max_workers());
    let per_address = ports_per_address();
    let needed = connections.div_ceil(per_address.max(1));
    if !given.is_empty() {
        if (given.len() as u64) < needed {
            return Err(RunError::SourcePorts {
                connections,
                per_address,
                needed,
                given: given.len(),
            });
        }
        return Ok(given.clone());
    }
    if needed <= 1 {
        return Ok(Vec::new());
    }
    match target.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => Ok((1..=needed)
            .map(|i| {
                IpAddr::V4(Ipv4Addr::from(
                    u32::from(Ipv4Addr::new(127, 0, 0, 0)) + i as u32,
                ))
            })
            .collect()),
        _ => Err(RunError::SourcePorts {
            connections,
            per_address,
            needed,
            given: 1,
        }),
    }
}

/// A `--source-addr` address a connection to `target` can start from: of the target's family
/// and this machine's (bindable). Else every request would fail to connect, one row each,
/// for a reason the user could have fixed before the run.
fn usable_source(source: IpAddr, target: SocketAddr) -> Result<(), RunError> {
    let refuse = |reason: String| RunError::SourceAddr {
        addr: source,
        reason,
    };
    if source.is_ipv4() != target.is_ipv4() {
        return Err(refuse(format!(
            "is {} but the target {target} is {}",
            if source.is_ipv4() { "IPv4" } else { "IPv6" },
            if target.is_ipv4() { "IPv4" } else { "IPv6" }
        )));
    }
    std::net::TcpListener::bind(SocketAddr::new(source, 0))
        .map(drop)
        .map_err(|e| refuse(format!("cannot be bound here ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_address_of_another_family_or_machine_is_refused() {
        let target: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(usable_source("127.0.0.2".parse().unwrap(), target).is_ok());
        let why = usable_source("::1".parse().unwrap(), target).unwrap_err();
        assert!(why.to_string().contains("is IPv6 but the target"), "{why}");
        // TEST-NET-1 (RFC 5737): no machine's own address.
        let why = usable_source("192.0.2.1".parse().unwrap(), target).unwrap_err();
        assert!(why.to_string().contains("cannot be bound here"), "{why}");
        assert_eq!(why.exit_code(), 2);
    }
}
