//! Opening a connection: TCP connect, then the TLS handshake for `https://` origins, both
//! inside `--connect-timeout`, so `connect_ns` covers everything before the first request byte.
//!
//! The byte meter sits between TCP and TLS, so `bytes_sent`/`bytes_received` are what crossed
//! the wire (TLS records included) and the first response byte is seen when it arrives, not
//! when it is decrypted. This module knows nothing about HTTP.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::classify_io;
use super::io::{Meter, MeteredIo};
use crate::record::ErrorClass;
use crate::stats::tcp::TcpTotals;

/// Anything a connection can run over (plain TCP or TLS), boxed so both share one type.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Where requests go: an address, the name to send and verify, and TLS if `https://`.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: &'static str,
    pub addr: SocketAddr,
    /// `host[:port]`, sent as the Host header (or `:authority`) unless a request sets one.
    pub authority: hyper::header::HeaderValue,
    /// The name the certificate must be valid for.
    pub server_name: ServerName<'static>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Origin {
    /// True when `scheme://authority` names this origin (for same-origin redirects).
    pub fn is(&self, scheme: &str, authority: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
            && self
                .authority
                .to_str()
                .is_ok_and(|a| a.eq_ignore_ascii_case(authority))
    }
}

/// An open connection, with its byte meter.
pub struct Connected {
    pub io: Box<dyn Io>,
    pub meter: Arc<Meter>,
}

/// Why a connection could not be opened: the row's class, and words for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectFailure {
    pub class: ErrorClass,
    pub detail: String,
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for ConnectFailure {}

/// Connects to `origin` (and completes the TLS handshake) within `timeout`, from `source`
/// when given (`--source-addr`; else the kernel's choice of local address).
pub async fn connect(
    origin: &Origin,
    source: Option<IpAddr>,
    timeout: Duration,
    tcp: &Arc<TcpTotals>,
) -> Result<Connected, ConnectFailure> {
    match tokio::time::timeout(timeout, connect_inner(origin, source, tcp)).await {
        Ok(result) => result,
        Err(_) => Err(ConnectFailure {
            class: ErrorClass::ConnectTimeout,
            detail: format!(
                "no answer within the connect timeout of {}",
                humantime::format_duration(timeout)
            ),
        }),
    }
}

/// A connection to a loopback port that no one listens on, itself in the ephemeral range, can
/// be given that same port as its source: TCP's simultaneous open then connects the socket to
/// itself. loadgen would read its own request as the reply, and the socket holds the port, so
/// the server cannot listen on it again (a target restarting on an ephemeral port, retried by
/// every worker, met this in a capacity search). It is what it means: nobody listens — refused,
/// as Go's dialer does.
fn refuse_self_connect(tcp: &TcpStream) -> Result<(), ConnectFailure> {
    match (tcp.local_addr(), tcp.peer_addr()) {
        (Ok(local), Ok(peer)) if local == peer => Err(ConnectFailure {
            class: ErrorClass::ConnectRefused,
            detail: format!("nothing listens on {peer} (the connection reached itself)"),
        }),
        _ => Ok(()),
    }
}

async fn connect_inner(
    origin: &Origin,
    source: Option<IpAddr>,
    tcp_totals: &Arc<TcpTotals>,
) -> Result<Connected, ConnectFailure> {
    let failure = |e: std::io::Error| ConnectFailure {
        class: classify_io(&e, true),
        detail: e.to_string(),
    };
    let tcp = match source {
        None => TcpStream::connect(origin.addr).await.map_err(failure)?,
        Some(source) => {
            let socket = match source {
                IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            }
            .map_err(failure)?;
            // The port is chosen at connect, for this destination, from the whole range: at
            // bind it would have to be free for every destination (slow past ~14,000).
            tcpinfo::bind_address_no_port(std::os::fd::AsFd::as_fd(&socket));
            socket.bind(SocketAddr::new(source, 0)).map_err(failure)?;
            socket.connect(origin.addr).await.map_err(failure)?
        }
    };
    refuse_self_connect(&tcp)?;
    // Requests are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    let meter = Meter::new();
    let metered = MeteredIo::new(tcp, meter.clone(), tcp_totals.clone());
    let io: Box<dyn Io> = match &origin.tls {
        None => Box::new(metered),
        Some(config) => {
            let connector = tokio_rustls::TlsConnector::from(config.clone());
            let stream = connector
                .connect(origin.server_name.clone(), metered)
                .await
                .map_err(|e| classify_handshake(&e))?;
            Box::new(stream)
        }
    };
    Ok(Connected { io, meter })
}

/// A handshake failure is `tls` unless the connection itself broke (reset, EMFILE…).
fn classify_handshake(error: &std::io::Error) -> ConnectFailure {
    let class = match error.kind() {
        std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => ErrorClass::Tls,
        std::io::ErrorKind::UnexpectedEof => ErrorClass::Tls,
        _ => match classify_io(error, true) {
            ErrorClass::Other => ErrorClass::Tls,
            class => class,
        },
    };
    ConnectFailure {
        class,
        detail: format!("TLS handshake failed: {error}"),
    }
}

/// `--connect-rate`: workers open their first connections at most this many a second, one
/// after another at even intervals, so that 100,000 connections do not arrive at the server
/// (and at the kernel's SYN queues) at once. Shared by every worker of a run; lock-free.
#[derive(Debug)]
pub struct ConnectPacer {
    base: Instant,
    interval_ns: u64,
    /// The next free turn, in ns from `base`.
    next_ns: AtomicU64,
}

impl ConnectPacer {
    pub fn new(per_second: f64) -> Self {
        ConnectPacer {
            base: Instant::now(),
            interval_ns: (1e9 / per_second).round().max(1.0) as u64,
            next_ns: AtomicU64::new(0),
        }
    }

    /// Takes the next turn: at once when connections have been slower than the rate, else
    /// when the turn comes.
    pub async fn turn(&self) {
        let now_ns = self.base.elapsed().as_nanos() as u64;
        let mut next = self.next_ns.load(Ordering::Relaxed);
        let mine = loop {
            let mine = next.max(now_ns);
            match self.next_ns.compare_exchange_weak(
                next,
                mine + self.interval_ns,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break mine,
                Err(seen) => next = seen,
            }
        };
        if mine > now_ns {
            tokio::time::sleep_until((self.base + Duration::from_nanos(mine)).into()).await;
        }
    }
}

/// The most source addresses a range may name (a typo like 127.0.0.1-127.9.0.1 is refused).
const MAX_SOURCE_ADDRS: u32 = 4096;

/// `--source-addr`: `A,B,…` and/or `FIRST-LAST` ranges of IPv4 addresses (IPv6 in lists).
pub fn parse_source_addrs(text: &str) -> Result<Vec<IpAddr>, String> {
    let bad = |part: &str| {
        format!(
            "--source-addr '{text}': '{part}' is not an IP address or a range; write e.g. --source-addr 127.0.0.1-127.0.0.4 or --source-addr 10.0.0.5,10.0.0.6"
        )
    };
    let mut addrs = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            None => addrs.push(part.parse::<IpAddr>().map_err(|_| bad(part))?),
            Some((first, last)) => {
                let first: std::net::Ipv4Addr = first.trim().parse().map_err(|_| bad(part))?;
                let last: std::net::Ipv4Addr = last.trim().parse().map_err(|_| bad(part))?;
                let (first, last) = (u32::from(first), u32::from(last));
                if last < first {
                    return Err(format!(
                        "--source-addr '{part}': the range ends before it starts; write the lower address first"
                    ));
                }
                if last - first >= MAX_SOURCE_ADDRS {
                    return Err(format!(
                        "--source-addr '{part}' names {} addresses; at most {MAX_SOURCE_ADDRS} are useful",
                        u64::from(last - first) + 1
                    ));
                }
                addrs.extend((first..=last).map(|a| IpAddr::V4(a.into())));
            }
        }
        // Each range is bounded, and so are all of them together: thousands of ranges in one
        // argument would otherwise hold tens of millions of addresses.
        if addrs.len() > MAX_SOURCE_ADDRS as usize {
            return Err(format!(
                "--source-addr '{}…' names more than {MAX_SOURCE_ADDRS} addresses; at most \
                 {MAX_SOURCE_ADDRS} are useful",
                text.chars().take(40).collect::<String>()
            ));
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket bound to a free loopback port and connected to that same port, with nobody
    /// listening, connects to itself (TCP's simultaneous open): refused, not a connection.
    #[tokio::test]
    async fn a_connection_that_reached_itself_is_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(addr).unwrap();
        let tcp = socket.connect(addr).await.expect("a self-connect on Linux");
        assert_eq!(tcp.local_addr().unwrap(), tcp.peer_addr().unwrap());
        let refused = refuse_self_connect(&tcp).unwrap_err();
        assert_eq!(refused.class, ErrorClass::ConnectRefused);
        assert!(
            refused.detail.contains("reached itself"),
            "{}",
            refused.detail
        );
        // An ordinary connection is left alone.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        assert!(refuse_self_connect(&tcp).is_ok());
    }

    #[test]
    fn source_addresses_are_bounded_in_all_not_only_per_range() {
        let one_range = "10.0.0.0-10.0.15.255";
        assert_eq!(parse_source_addrs(one_range).unwrap().len(), 4096);
        let many = vec![one_range; 2_000].join(",");
        let why = parse_source_addrs(&many).unwrap_err();
        assert!(why.contains("more than 4096 addresses"), "{why}");
        let singles = vec!["127.0.0.1"; 5_000].join(",");
        assert!(parse_source_addrs(&singles).is_err());
    }
}
