//! HTTP/1.1 over one keep-alive connection per worker, using hyper's `client::conn`.
//!
//! No pool: the worker owns its connection, opens a new one only when the previous one closed
//! or failed (or after every request with `--no-keepalive`), and reports the time that took as
//! `connect_ns`. After any failure the connection is dropped, because its state is unknown.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::HeaderValue;
use hyper::Request;
use hyper_util::rt::TokioIo;

use super::connect::{connect, Origin};
use super::io::Meter;
use super::{classify_hyper, location, Exchange, Hop, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;

struct Open {
    sender: SendRequest<Full<Bytes>>,
    meter: Arc<Meter>,
}

/// A worker's HTTP/1.1 connection (opened on first use).
pub struct Http1Connection {
    config: Arc<TransportConfig>,
    open: Option<Open>,
    /// The meter of the hop in progress and its totals when it began, so the bytes of a hop
    /// cut off by the request timeout are still counted ([`Hop::settle`]).
    pending: Option<(Arc<Meter>, (u64, u64))>,
}

impl Http1Connection {
    pub fn new(config: Arc<TransportConfig>) -> Self {
        Http1Connection {
            config,
            open: None,
            pending: None,
        }
    }

    /// The open connection, or a new one; adds the time a new one took to `out`.
    async fn ready(
        &mut self,
        origin: &Origin,
        out: &mut Exchange,
    ) -> Result<&mut Open, ErrorClass> {
        // A connection the server closed while idle (keep-alive timeout, `Connection: close`)
        // is not a failed request: open a new one, and the row shows it in `connect_ns`.
        if let Some(open) = &mut self.open {
            if open.sender.ready().await.is_err() {
                self.open = None;
            }
        }
        if self.open.is_none() {
            let before = Instant::now();
            let connected = connect(origin, self.config.connect_timeout)
                .await
                .map_err(|f| f.class)?;
            let (sender, connection) = http1::handshake(TokioIo::new(connected.io))
                .await
                .map_err(|e| classify_hyper(&e))?;
            // The connection task ends by itself when the sender is dropped or the peer closes.
            tokio::spawn(connection);
            out.add_connect(nanos(before.elapsed()));
            self.open = Some(Open {
                sender,
                meter: connected.meter,
            });
        }
        Ok(self.open.as_mut().expect("opened above"))
    }
}

impl Hop for Http1Connection {
    async fn hop(
        &mut self,
        origin: &Origin,
        mut request: Request<Full<Bytes>>,
        started: Instant,
        out: &mut Exchange,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        let keepalive = self.config.keepalive;
        if !keepalive {
            request
                .headers_mut()
                .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        }
        let open = self.ready(origin, out).await?;
        let meter = open.meter.clone();
        self.pending = Some((meter.clone(), meter.totals()));
        let open = self.open.as_mut().expect("opened above");
        let result = async {
            open.sender.ready().await.map_err(|e| classify_hyper(&e))?;
            meter.arm();
            let response = open
                .sender
                .send_request(request)
                .await
                .map_err(|e| classify_hyper(&e))?;
            out.status = response.status().as_u16();
            let first_byte = meter.first_read().unwrap_or_else(Instant::now);
            out.ttfb_ns = Some(nanos(first_byte.saturating_duration_since(started)));
            let redirect = location(response.status(), response.headers());
            let mut body = response.into_body();
            while let Some(frame) = body.frame().await {
                if let Err(e) = frame {
                    return Err(match classify_hyper(&e) {
                        ErrorClass::Timeout => ErrorClass::Timeout,
                        _ => ErrorClass::Body,
                    });
                }
            }
            Ok(redirect)
        }
        .await;
        self.settle(out);
        if !keepalive {
            self.open = None;
        }
        result
    }

    fn settle(&mut self, out: &mut Exchange) {
        // Bytes count even when the exchange failed half-way: they crossed the wire.
        if let Some((meter, (sent0, received0))) = self.pending.take() {
            let (sent, received) = meter.totals();
            out.bytes_sent += sent - sent0;
            out.bytes_received += received - received0;
        }
    }

    fn discard(&mut self) {
        self.open = None;
    }
}
