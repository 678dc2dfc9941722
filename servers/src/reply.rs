//! Building responses: the one body type every handler returns, JSON and error helpers; and
//! the one request body type every handler reads (`RequestBody`).
//!
//! Errors are always `{"message": "..."}` with a status, so a client can show the reason. This
//! module does not decide which status a request deserves; handlers do.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde::Serialize;

/// Every response body is complete before it is sent: the payloads are tiny. The server turns
/// it into the body that goes on the wire (`crate::body`), whole or split.
pub(crate) type Reply = Response<Bytes>;

/// A request's body as the handlers read it: hyper's, streamed (HTTP/1.1, HTTP/2), or one
/// already read whole (HTTP/3, whose stream the server reads before routing). An enum rather
/// than a boxed body, so HTTP/1.1 and HTTP/2 requests pay no allocation for it.
pub(crate) enum RequestBody {
    Hyper(Incoming),
    Whole(Option<Bytes>),
}

impl hyper::body::Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            RequestBody::Hyper(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            RequestBody::Whole(bytes) => Poll::Ready(
                bytes
                    .take()
                    .filter(|b| !b.is_empty())
                    .map(|b| Ok(hyper::body::Frame::data(b))),
            ),
        }
    }
}

fn json_type() -> HeaderValue {
    HeaderValue::from_static("application/json")
}

fn text_type() -> HeaderValue {
    HeaderValue::from_static("text/plain; charset=utf-8")
}

/// Request bodies larger than this are refused with 413 rather than buffered without bound.
pub(crate) const JSON_BODY_LIMIT_BYTES: usize = 1024 * 1024;
/// The most a refused or ignored body is read for the sake of keeping its connection open.
const DISCARD_LIMIT_BYTES: usize = 64 * 1024 * 1024;

fn with_body(status: StatusCode, content_type: HeaderValue, body: Bytes) -> Reply {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

pub(crate) fn text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    with_body(status, text_type(), body.into())
}

/// Prometheus wants its own content type to pick the text format version.
pub(crate) fn prometheus(body: String) -> Reply {
    with_body(
        StatusCode::OK,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        body.into(),
    )
}

pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Reply {
    match serde_json::to_vec(value) {
        Ok(body) => with_body(status, json_type(), body.into()),
        // Our response types are plain structs of strings and integers; this cannot happen,
        // but if it did the client should hear about it rather than get a dropped connection.
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

/// A bodyless success, for the POST endpoints whose course APIs return nothing.
pub(crate) fn empty(status: StatusCode) -> Reply {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = status;
    response
}

/// `--rate-limit`'s refusal: 503 with `Retry-After: 1` (the limiter's window is a second),
/// as an API gateway or nginx's `limit_req` with `add_header Retry-After` answers.
pub(crate) fn rejected() -> Reply {
    let mut response = empty(StatusCode::SERVICE_UNAVAILABLE);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[derive(Serialize)]
struct Message<'a> {
    message: &'a str,
}

pub(crate) fn message(status: StatusCode, message: &str) -> Reply {
    json(status, &Message { message })
}

pub(crate) fn not_found(path: &str) -> Reply {
    message(StatusCode::NOT_FOUND, &format!("no route for {path}"))
}

pub(crate) fn method_not_allowed(allowed: &hyper::Method) -> Reply {
    let mut response = message(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("this route only accepts {allowed}"),
    );
    // The one allowed method is a static name, always a valid header value.
    if let Ok(value) = HeaderValue::from_str(allowed.as_str()) {
        response.headers_mut().insert(ALLOW, value);
    }
    response
}

pub(crate) fn injected_error() -> Reply {
    message(
        StatusCode::INTERNAL_SERVER_ERROR,
        "injected failure (--error-rate)",
    )
}

/// Why a request cannot be served: a client error status and a message for the client.
/// Handlers return `Result<Reply, Rejection>` and use `?`; the dispatcher turns the error
/// into the JSON `{"message": ...}` response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Rejection {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: message.into(),
        }
    }
}

impl From<Rejection> for Reply {
    fn from(rejection: Rejection) -> Self {
        message(rejection.status, &rejection.message)
    }
}

/// Reads a whole body up to `limit_bytes`. A larger body is still read to the end (and
/// thrown away) before the 413, so the client gets its answer on a connection that stays
/// usable, instead of a reset while it is still sending.
pub(crate) async fn read_body(
    mut body: RequestBody,
    limit_bytes: usize,
) -> Result<Bytes, Rejection> {
    let mut collected = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Rejection::bad_request(format!("could not read the request body: {e}")))?;
        // Trailers carry no body bytes.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if collected.len() + data.len() > limit_bytes {
            discard_body(body).await;
            return Err(Rejection::too_large(format!(
                "request body is larger than {limit_bytes} bytes"
            )));
        }
        collected.extend_from_slice(&data);
    }
    Ok(collected.into())
}

/// Reads and parses a JSON body; a missing field, a wrong type or broken JSON is a 400 whose
/// message names the field (see [`decode_json`]).
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    body: RequestBody,
) -> Result<T, Rejection> {
    let bytes = read_body(body, JSON_BODY_LIMIT_BYTES).await?;
    decode_json(&bytes, "JSON body")
}

/// Decodes JSON into the API's type, as the course servers do (a Go or Java server decoding
/// into typed fields): a wrong type is a 400 naming the field (`` `year`: invalid type:
/// integer `1977`, expected a string ``), a missing field says `missing field `year``.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, Rejection> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            Rejection::bad_request(format!("invalid {what}: {inner}"))
        } else {
            Rejection::bad_request(format!("invalid {what}: field `{path}`: {inner}"))
        }
    })?;
    // Bytes after the document make it as invalid as a broken one.
    deserializer
        .end()
        .map_err(|e| Rejection::bad_request(format!("invalid {what}: {e}")))?;
    Ok(value)
}

/// Reads and discards a body, so a request answered without using its body (an injected
/// 500, a 413) leaves the keep-alive connection ready for the next request instead of closed.
/// Past `DISCARD_LIMIT_BYTES` it gives up and lets hyper close the connection: reading an
/// endless body to be polite is not worth it.
pub(crate) async fn discard_body(mut body: RequestBody) {
    let mut remaining_bytes = DISCARD_LIMIT_BYTES;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            match remaining_bytes.checked_sub(data.len()) {
                Some(left) => remaining_bytes = left,
                None => return,
            }
        }
    }
}
