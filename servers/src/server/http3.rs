//! HTTP/3 for the reference server (`--http3`): QUIC on the UDP port of the same number as the
//! TCP listener, with the same certificate (ALPN `h3`), and every API request through the
//! same knobs as over TCP (`serve_api`: workers, service time, stalls, errors, faults).
//!
//! Each QUIC connection is one task that accepts request streams; each request is a task that
//! reads the request body whole (the course payloads are small), lets the shared handler
//! answer it and writes the response. Faults take their HTTP/3 form: `reset` resets the
//! request's stream, close-mid-body sends half the body and then resets the stream, garbage
//! closes the QUIC connection with an HTTP/3 protocol error (what a client sees of a peer
//! that spoke nonsense). This module does not bind TCP or decide any knob.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h3::error::Code;
use h3::server::RequestStream;
use hyper::{Request, Response};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{serve_api, stop_requested, Shared};
use crate::reply::RequestBody;
use crate::router::{self, Route};
use crate::Fault;

/// Concurrent request streams a client may open on one connection when `--h2-max-streams`
/// is not given (hyper's HTTP/2 default, so both protocols start alike).
const DEFAULT_MAX_STREAMS: u32 = 200;

/// The largest request body read: the course payloads are a few hundred bytes, an album's
/// image a few kilobytes.
const BODY_LIMIT_BYTES: usize = 16 * 1024 * 1024;

type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// The QUIC endpoint serving HTTP/3 on `addr` (UDP), its task started.
pub(super) fn start(
    addr: SocketAddr,
    tls: &rustls::ServerConfig,
    max_streams: Option<u32>,
    shared: Arc<Shared>,
    stop: watch::Receiver<Option<Duration>>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|e| invalid(format!("TLS settings for QUIC: {e}")))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(max_streams.unwrap_or(DEFAULT_MAX_STREAMS).into());
    config.transport_config(Arc::new(transport));
    let endpoint = quinn::Endpoint::server(config, addr)?;
    let local = endpoint.local_addr()?;
    Ok((local, tokio::spawn(accept_loop(endpoint, shared, stop))))
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Option<Duration>>,
) {
    let mut connections = JoinSet::new();
    let grace = loop {
        tokio::select! {
            grace = stop_requested(&mut stop) => break grace,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    connections.spawn(serve_connection(incoming, Arc::clone(&shared)));
                }
                None => break Duration::ZERO,
            },
        }
    };
    // Requests in service get the grace period, as over TCP; then every connection closes.
    let _ = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    endpoint.close(
        Code::H3_NO_ERROR.value().try_into().unwrap_or_default(),
        b"shutdown",
    );
    connections.abort_all();
    endpoint.wait_idle().await;
}

/// Serves one QUIC connection's requests until it closes.
async fn serve_connection(incoming: quinn::Incoming, shared: Arc<Shared>) {
    let _open = shared.app.metrics.connection_opened();
    let Ok(connection) = incoming.await else {
        // A client that cannot agree on TLS (or QUIC) gets no HTTP, as over TCP.
        shared.app.metrics.tls_handshake_failed();
        return;
    };
    let quic = connection.clone();
    let Ok(mut h3) =
        h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(connection)).await
    else {
        return;
    };
    let mut requests = JoinSet::new();
    // Ends when the client closes the connection (or it fails): nothing to report.
    while let Ok(Some(resolver)) = h3.accept().await {
        let (shared, quic) = (Arc::clone(&shared), quic.clone());
        requests.spawn(async move {
            if let Ok((request, stream)) = resolver.resolve_request().await {
                serve_request(request, stream, &shared, &quic).await;
            }
        });
        while requests.try_join_next().is_some() {}
    }
    while requests.join_next().await.is_some() {}
}

/// Reads one request's body, answers it through the shared knobs and writes the response
/// (or carries out its fault).
async fn serve_request(
    request: Request<()>,
    mut stream: Stream,
    shared: &Shared,
    quic: &quinn::Connection,
) {
    let Some(body) = read_body(&mut stream).await else {
        return;
    };
    let (parts, ()) = request.into_parts();
    let matched = router::resolve(parts.uri.path());
    let route = matched.route();
    let body = RequestBody::Whole(Some(body));
    let (response, fault) = match route {
        Route::Metrics => {
            let response = crate::api::handle(matched, &parts, body, &shared.app).await;
            (response, None)
        }
        _ => serve_api(matched, &parts, body, shared).await,
    };
    let Some(fault) = fault else {
        shared.app.metrics.count(route, response.status().as_u16());
        // Scrapes are not API work: no slow body.
        let slow_body = shared.slow_body.filter(|_| route != Route::Metrics);
        let _ = respond(&mut stream, response, slow_body, false).await;
        return;
    };
    shared.app.metrics.count_fault(route, fault);
    match fault {
        Fault::Reset => stream.stop_stream(Code::H3_REQUEST_REJECTED),
        Fault::CloseMidBody => {
            let _ = respond(&mut stream, response, None, true).await;
        }
        Fault::Garbage => quic.close(
            Code::H3_GENERAL_PROTOCOL_ERROR
                .value()
                .try_into()
                .unwrap_or_default(),
            b"garbage",
        ),
    }
}

/// The request body, whole; `None` when the stream broke or the body is over the limit (the
/// stream is then refused).
async fn read_body(stream: &mut Stream) -> Option<Bytes> {
    let mut body = BytesMut::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut data)) => {
                if body.len() + data.remaining() > BODY_LIMIT_BYTES {
                    stream.stop_stream(Code::H3_REQUEST_REJECTED);
                    return None;
                }
                while data.has_remaining() {
                    let chunk = data.chunk();
                    body.extend_from_slice(chunk);
                    let n = chunk.len();
                    data.advance(n);
                }
            }
            Ok(None) => return Some(body.freeze()),
            Err(_) => return None,
        }
    }
}

/// Writes `response`: whole, in two halves `slow_body` apart, or (`cut`) its first half and
/// then a reset stream.
async fn respond(
    stream: &mut Stream,
    response: Response<Bytes>,
    slow_body: Option<Duration>,
    cut: bool,
) -> Result<(), h3::error::StreamError> {
    let (parts, mut body) = response.into_parts();
    let mut head = Response::from_parts(parts, ());
    head.headers_mut()
        .insert(hyper::header::CONTENT_LENGTH, body.len().into());
    stream.send_response(head).await?;
    if cut || slow_body.is_some() {
        let first = body.split_to(body.len() / 2);
        if !first.is_empty() {
            stream.send_data(first).await?;
        }
        if cut {
            // Lets the first half go out before the reset that discards what is unsent.
            tokio::time::sleep(Duration::from_millis(20)).await;
            stream.stop_stream(Code::H3_INTERNAL_ERROR);
            return Ok(());
        }
        if let Some(delay) = slow_body {
            tokio::time::sleep(delay).await;
        }
    }
    if !body.is_empty() {
        stream.send_data(body).await?;
    }
    stream.finish().await
}
