//! HTTP/1.1 over one keep-alive TCP connection per worker, using hyper's `client::conn`.
//!
//! No pool: the worker owns its connection, opens a new one only when the previous one closed
//! or failed, and reports the time that took as `connect_ns`. After any failure the connection
//! is dropped, because its state is unknown. Redirects are not followed.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::io::{Meter, MeteredIo};
use super::{classify_io, Exchange, Transport, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;
use crate::workload::{Prepared, RequestTemplate};

struct Connection {
    sender: SendRequest<Full<Bytes>>,
    meter: Arc<Meter>,
}

/// A worker's HTTP/1.1 connection.
pub struct Http1Transport {
    config: Arc<TransportConfig>,
    connection: Option<Connection>,
}

impl Http1Transport {
    pub fn new(config: Arc<TransportConfig>) -> Self {
        Http1Transport {
            config,
            connection: None,
        }
    }

    async fn connect(&mut self) -> Result<&mut Connection, ErrorClass> {
        let config = &self.config;
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(config.addr))
            .await
            .map_err(|_| ErrorClass::ConnectTimeout)?
            .map_err(|e| classify_io(&e, true))?;
        // Requests are small and latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let meter = Meter::new();
        let io = TokioIo::new(MeteredIo::new(stream, meter.clone()));
        let (sender, connection) = http1::handshake(io).await.map_err(|e| classify_hyper(&e))?;
        // The connection task ends by itself when the sender is dropped or the peer closes.
        tokio::spawn(connection);
        Ok(self.connection.insert(Connection { sender, meter }))
    }

    /// The exchange proper; fills `out` as it goes so a timeout still reports what happened.
    async fn exchange(
        &mut self,
        template: &RequestTemplate,
        prepared: Prepared,
        started: Instant,
        out: &mut Exchange,
        meter_slot: &mut Option<(Arc<Meter>, (u64, u64))>,
    ) -> Result<(), ErrorClass> {
        let host = self.config.host.clone();
        // A connection the server closed while idle (keep-alive timeout, `Connection: close`)
        // is not a failed request: open a new one, and the row shows it in `connect_ns`.
        if let Some(connection) = &mut self.connection {
            if connection.sender.ready().await.is_err() {
                self.connection = None;
            }
        }
        let connection = match self.connection {
            Some(ref mut connection) => connection,
            None => {
                let connection = self.connect().await?;
                out.connect_ns = Some(nanos(started.elapsed()));
                connection
            }
        };
        *meter_slot = Some((connection.meter.clone(), connection.meter.totals()));
        connection
            .sender
            .ready()
            .await
            .map_err(|e| classify_hyper(&e))?;

        let mut request = Request::new(Full::new(prepared.body));
        *request.method_mut() = template.method.clone();
        *request.uri_mut() = prepared.uri;
        *request.headers_mut() = template.headers.clone();
        if !request.headers().contains_key(hyper::header::HOST) {
            request.headers_mut().insert(hyper::header::HOST, host);
        }

        connection.meter.arm();
        let response = connection
            .sender
            .send_request(request)
            .await
            .map_err(|e| classify_hyper(&e))?;
        out.status = response.status().as_u16();
        let first_byte = connection.meter.first_read().unwrap_or_else(Instant::now);
        out.ttfb_ns = Some(nanos(first_byte.saturating_duration_since(started)));

        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            if let Err(e) = frame {
                return Err(match classify_hyper(&e) {
                    ErrorClass::Timeout => ErrorClass::Timeout,
                    _ => ErrorClass::Body,
                });
            }
        }
        Ok(())
    }
}

impl Transport for Http1Transport {
    async fn send(
        &mut self,
        template: &RequestTemplate,
        prepared: Prepared,
        started: Instant,
    ) -> Exchange {
        let mut out = Exchange::default();
        let mut meter_slot = None;
        let timeout = self.config.request_timeout;
        let result = tokio::time::timeout(
            timeout,
            self.exchange(template, prepared, started, &mut out, &mut meter_slot),
        )
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(class)) => out.error = Some(class),
            Err(_) => out.error = Some(ErrorClass::Timeout),
        }
        if out.error.is_some() {
            // Whatever state the connection is in, it is not one to send the next request on.
            self.connection = None;
        }
        if let Some((meter, (sent0, received0))) = meter_slot {
            let (sent, received) = meter.totals();
            out.bytes_sent = sent - sent0;
            out.bytes_received = received - received0;
        }
        out
    }
}

/// Maps hyper's error to a class, looking through to the I/O error where there is one.
fn classify_hyper(error: &hyper::Error) -> ErrorClass {
    if error.is_parse() || error.is_parse_status() || error.is_parse_too_large() {
        return ErrorClass::Protocol;
    }
    if error.is_timeout() {
        return ErrorClass::Timeout;
    }
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return classify_io(io, false);
        }
        source = inner.source();
    }
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return ErrorClass::Reset;
    }
    ErrorClass::Other
}
