//! The network path to the target: which interface carries its traffic, and how fast that
//! interface's link is — so the analysis can compare the bytes sent with a capacity instead
//! of guessing.
//!
//! The interface is found the way the kernel routes: a UDP socket "connected" to the target
//! (no packet is sent) gets the source address the route would use, and the interface that
//! owns that address (`if-addrs`) is the one. Its speed comes from
//! `/sys/class/net/IF/speed` (Mbit/s), which physical NICs report and virtual ones (veth,
//! loopback, most cloud NICs) report as -1 or not at all; then the capacity is unknown unless
//! `loadgen run --link-capacity` gives it. This module only looks; the verdict is the
//! analysis's.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;

/// The interface whose address the kernel would send to `target` from; `None` when it
/// cannot tell (no route, or no interface owns the source address).
pub fn target_interface(target: SocketAddr) -> Option<String> {
    let bind: SocketAddr = match target {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("valid address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("valid address"),
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    let local = socket.local_addr().ok()?.ip();
    if_addrs::get_if_addrs()
        .ok()?
        .into_iter()
        .find(|interface| interface.ip() == local)
        .map(|interface| interface.name)
}

/// The link speed the kernel reports for `interface`, in bits/s, read under `sys_class_net`
/// (`/sys/class/net` on a real system); `None` for loopback, -1 (unknown) or no file.
pub fn interface_speed_bps(sys_class_net: &Path, interface: &str) -> Option<u64> {
    if interface == "lo" {
        return None;
    }
    let text = std::fs::read_to_string(sys_class_net.join(interface).join("speed")).ok()?;
    let mbit_per_s = text.trim().parse::<i64>().ok().filter(|m| *m > 0)?;
    Some(mbit_per_s as u64 * 1_000_000)
}

/// The capacity to record and where it came from: `--link-capacity` (`flag`), else the
/// speed the kernel reports for the target's interface (`interface`), else unknown.
pub fn link_capacity(
    flag_bps: Option<u64>,
    interface: Option<&str>,
) -> (Option<u64>, Option<&'static str>) {
    let reported = || interface_speed_bps(Path::new("/sys/class/net"), interface?);
    match flag_bps {
        Some(bps) => (Some(bps), Some("flag")),
        None => match reported() {
            Some(bps) => (Some(bps), Some("interface")),
            None => (None, None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_targets_go_through_lo() {
        assert_eq!(
            target_interface("127.0.0.1:9".parse().unwrap()).as_deref(),
            Some("lo")
        );
    }

    #[test]
    fn interface_speed_is_read_in_mbit_and_unknown_speeds_are_none() {
        let dir = tempfile::tempdir().unwrap();
        for (name, speed) in [("eth0", "1000\n"), ("veth0", "-1\n"), ("lo", "10\n")] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("speed"), speed).unwrap();
        }
        assert_eq!(interface_speed_bps(dir.path(), "eth0"), Some(1_000_000_000));
        assert_eq!(interface_speed_bps(dir.path(), "veth0"), None);
        assert_eq!(interface_speed_bps(dir.path(), "lo"), None);
        assert_eq!(interface_speed_bps(dir.path(), "missing"), None);
    }
}
