//! Opening a connection: TCP connect, then the TLS handshake for `https://` origins, both
//! inside `--connect-timeout`, so `connect_ns` covers everything before the first request byte.
//!
//! The byte meter sits between TCP and TLS, so `bytes_sent`/`bytes_received` are what crossed
//! the wire (TLS records included) and the first response byte is seen when it arrives, not
//! when it is decrypted. This module knows nothing about HTTP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::classify_io;
use super::io::{Meter, MeteredIo};
use crate::record::ErrorClass;

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

/// Connects to `origin` (and completes the TLS handshake) within `timeout`.
pub async fn connect(origin: &Origin, timeout: Duration) -> Result<Connected, ConnectFailure> {
    match tokio::time::timeout(timeout, connect_inner(origin)).await {
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

async fn connect_inner(origin: &Origin) -> Result<Connected, ConnectFailure> {
    let tcp = TcpStream::connect(origin.addr)
        .await
        .map_err(|e| ConnectFailure {
            class: classify_io(&e, true),
            detail: e.to_string(),
        })?;
    // Requests are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    let meter = Meter::new();
    let metered = MeteredIo::new(tcp, meter.clone());
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
