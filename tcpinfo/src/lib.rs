//! The kernel's `TCP_INFO` for one socket (Linux `getsockopt(IPPROTO_TCP, TCP_INFO)`, see
//! `man 7 tcp`): its smoothed round-trip time, the lowest it saw, retransmits and delivery
//! rate — the network's own evidence, as the kernel measured it on the client's side.
//!
//! This crate exists to keep `unsafe` out of loadgen (whose lints forbid it): no crate in the
//! tree offers `TCP_INFO` (socket2 and rustix do not), so the one `getsockopt` call lives here,
//! behind [`read`], which takes a borrowed descriptor and returns plain numbers. It does not
//! decide when to read (loadgen reads once per connection, as it closes) nor what the numbers
//! mean. On other systems [`read`] returns `None`.
//!
//! For the same reason it holds the one `setsockopt` no crate in the tree offers either:
//! [`bind_address_no_port`] (`IP_BIND_ADDRESS_NO_PORT`).

#![deny(unsafe_code)]

use std::os::fd::BorrowedFd;

/// What loadgen reads of a socket's `struct tcp_info`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed round-trip time (`tcpi_rtt`), µs.
    pub rtt_us: u32,
    /// Its variation (`tcpi_rttvar`), µs.
    pub rttvar_us: u32,
    /// The lowest round-trip time seen (`tcpi_min_rtt`, Linux 4.6+; 0 when not known), µs.
    pub min_rtt_us: u32,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Segments sent (`tcpi_segs_out`), retransmits included.
    pub segs_out: u32,
    /// Segments received (`tcpi_segs_in`).
    pub segs_in: u32,
    /// The latest delivery rate estimate (`tcpi_delivery_rate`, Linux 4.9+), bytes/s.
    pub delivery_rate_bps: u64,
    /// Bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
}

/// The socket's `TCP_INFO`; `None` when the kernel refuses (not a TCP socket, not Linux).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn read(fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    use std::os::fd::AsRawFd;
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `fd` is a live descriptor for the borrow's length; `info` is a zeroed buffer of
    // `len` bytes, properly aligned for `tcp_info`, and the kernel writes at most `len` bytes
    // into it (an older kernel writes fewer and leaves the rest zero).
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: zeroed is a valid `tcp_info` (plain integers), and the kernel filled a prefix.
    let info = unsafe { info.assume_init() };
    Some(TcpInfo {
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        min_rtt_us: info.tcpi_min_rtt,
        total_retrans: info.tcpi_total_retrans,
        segs_out: info.tcpi_segs_out,
        segs_in: info.tcpi_segs_in,
        delivery_rate_bps: info.tcpi_delivery_rate,
        bytes_received: info.tcpi_bytes_received,
    })
}

#[cfg(not(target_os = "linux"))]
pub fn read(_fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    None
}

/// Lets the kernel choose the local port of a socket bound to a source address when it
/// connects, not when it binds (`IP_BIND_ADDRESS_NO_PORT`, Linux 4.2+; `man 7 ip`). A port
/// chosen at `bind` must be free on that address for every destination, and once half the
/// ephemeral range is taken each `bind` searches the rest, ever slower (at ~14,000
/// connections per address here); chosen at `connect`, it need only be free for that
/// destination, from the whole range. False when refused (other systems: always).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn bind_address_no_port(fd: BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: `fd` is a live descriptor for the borrow's length; the option's value is a
    // `c_int` the kernel only reads, `size_of::<c_int>()` bytes of it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
pub fn bind_address_no_port(_fd: BorrowedFd<'_>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    /// A loopback connection that carried a request and its answer: the kernel saw segments
    /// both ways and a round-trip time, and a UDP socket is refused.
    #[test]
    fn a_tcp_connection_has_info_and_a_udp_socket_none() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).unwrap();
        server.write_all(b"pong").unwrap();
        client.read_exact(&mut buf).unwrap();
        let info = super::read(client.as_fd()).unwrap();
        assert!(info.segs_out >= 2 && info.segs_in >= 2, "{info:?}");
        assert!(info.rtt_us > 0, "{info:?}");
        assert_eq!(info.bytes_received, 4, "{info:?}");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(super::read(udp.as_fd()), None);
    }

    /// With the option, binding to an address leaves the port to `connect`: the bound
    /// socket has none yet, and the connection gets one.
    #[test]
    fn a_socket_bound_with_no_port_gets_its_port_when_it_connects() {
        use socket2::{Domain, Socket, Type};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        assert!(super::bind_address_no_port(socket.as_fd()));
        let source: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket.bind(&source.into()).unwrap();
        let bound = socket.local_addr().unwrap().as_socket().unwrap();
        assert_eq!(bound.port(), 0, "the port is not chosen at bind");
        socket
            .connect(&listener.local_addr().unwrap().into())
            .unwrap();
        let connected = socket.local_addr().unwrap().as_socket().unwrap();
        assert_ne!(connected.port(), 0);
        assert_eq!(connected.ip(), source.ip());
    }
}
