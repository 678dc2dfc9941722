//! HTTP/1.1 on the wire, as pure functions over bytes: a request serialised into the worker's
//! reused buffer, and a response head parsed with `httparse` into what the worker needs
//! (status, how the body ends, whether the connection stays open, a redirect's location).

use hyper::header::{
    HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, RETRY_AFTER, TRANSFER_ENCODING,
};
use hyper::{Method, StatusCode};

use super::super::connect::Origin;
use super::super::Outgoing;
use crate::record::ErrorClass;

/// Most header lines a response may have; more is a `protocol` error (docs/troubleshooting.md).
const MAX_HEADERS: usize = 100;
/// A response head (status line and headers) larger than this is a `protocol` error, however
/// the reads happened to split it (docs/troubleshooting.md).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Request bodies up to this size are copied after the head and go out in one write; larger
/// ones are written from their own chunks, never copied (a 64 MB upload per worker).
pub(super) const INLINE_BODY_BYTES: usize = 64 * 1024;

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// What the worker needs from a response head.
#[derive(Debug)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head (status line and headers) at the start of the read buffer.
    pub len: usize,
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
    pub location: Option<HeaderValue>,
    /// A rejection's (429, 503) `Retry-After`, in seconds ([`super::super::retry_after_s`]).
    pub retry_after_s: Option<u32>,
}

/// Serialises `request` into `out` (cleared first): request line, `Host` unless the request
/// sets one, its headers, `Content-Length` when it has a body, and the body when it is at most
/// `INLINE_BODY_BYTES` (a larger one is written from its own chunks).
pub fn encode(out: &mut Vec<u8>, request: &Outgoing<'_>, origin: &Origin, close: bool) {
    out.clear();
    // One allocation for a usual request's head, not a doubling per header.
    out.reserve(256);
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    let target = request.path.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let headers: &HeaderMap = &request.headers;
    if !headers.contains_key(HOST) {
        header_line(out, HOST.as_str(), origin.authority.as_bytes());
    }
    for (name, value) in headers {
        if close && name == CONNECTION {
            continue;
        }
        header_line(out, name.as_str(), value.as_bytes());
    }
    if let Some(trace) = &request.trace {
        header_line(out, crate::record::trace::TRACEPARENT, trace);
    }
    if close {
        header_line(out, CONNECTION.as_str(), b"close");
    }
    let needs_length = !request.body.is_empty()
        || matches!(request.method, Method::POST | Method::PUT | Method::PATCH);
    if needs_length && !headers.contains_key(CONTENT_LENGTH) {
        use std::io::Write;
        // Writing to a Vec cannot fail.
        let _ = write!(out, "content-length: {}\r\n", request.body.len());
    }
    out.extend_from_slice(b"\r\n");
    if request.body.len() <= INLINE_BODY_BYTES {
        for chunk in request.body.chunks() {
            out.extend_from_slice(chunk);
        }
    }
}

fn header_line(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Parses a response head at the start of `buf`; `None` while it is incomplete.
pub fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ErrorClass> {
    // Uninitialised header slots: zeroing a hundred of them per response costs more than
    // parsing a typical head.
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD_BYTES => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD_BYTES => return Ok(None),
        Ok(_) | Err(_) => return Err(ErrorClass::Protocol),
    };
    let status = response.code.ok_or(ErrorClass::Protocol)?;
    let http10 = response.version == Some(0);
    let (mut length, mut chunked, mut close, mut keep_alive) = (None, false, http10, false);
    let mut location_value = None;
    let mut retry_after = None;
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case(CONTENT_LENGTH.as_str()) {
            let text = std::str::from_utf8(header.value).map_err(|_| ErrorClass::Protocol)?;
            let value: u64 = text.trim().parse().map_err(|_| ErrorClass::Protocol)?;
            if length.is_some_and(|l| l != value) {
                return Err(ErrorClass::Protocol);
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case(TRANSFER_ENCODING.as_str()) {
            chunked = header
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(CONNECTION.as_str()) {
            for token in header.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("location") {
            location_value = HeaderValue::from_bytes(header.value).ok();
        } else if name.eq_ignore_ascii_case(RETRY_AFTER.as_str()) {
            retry_after = Some(header.value);
        }
    }
    if http10 && keep_alive {
        close = false;
    }
    let framing = if head_request
        || (100..200).contains(&status)
        || status == StatusCode::NO_CONTENT.as_u16()
        || status == StatusCode::NOT_MODIFIED.as_u16()
    {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else {
        match length {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    };
    let location = location_value.filter(|_| super::super::is_redirect(status));
    let retry_after_s = retry_after.and_then(|v| super::super::retry_after_s(status, v));
    Ok(Some(Head {
        status,
        len,
        framing,
        close,
        location,
        retry_after_s,
    }))
}

/// The headers of a complete response head (one [`parse_head`] accepted), into `out`; only
/// for ops whose checks or extractions read headers.
pub fn response_headers(head: &[u8], out: &mut HeaderMap) {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    if response.parse(head).is_err() {
        return;
    }
    for header in response.headers.iter() {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(header.name.as_bytes()),
            HeaderValue::from_bytes(header.value),
        ) {
            out.append(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn kept_headers_are_the_heads_headers() {
        let text =
            b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-A: 1\r\nX-A: 2\r\n\r\n";
        let mut out = HeaderMap::new();
        response_headers(text, &mut out);
        assert_eq!(out["content-type"], "application/json");
        assert_eq!(out.get_all("x-a").iter().count(), 2);
    }

    /// A rejection's `Retry-After` is read as seconds (delay-seconds or an HTTP-date ahead);
    /// on any other status, or unreadable, it is not.
    #[test]
    fn a_rejections_retry_after_is_read_in_seconds() {
        let retry = |status: &str, value: &str| {
            let text =
                format!("HTTP/1.1 {status}\r\nRetry-After: {value}\r\nContent-Length: 0\r\n\r\n");
            parse_head(text.as_bytes(), false)
                .unwrap()
                .unwrap()
                .retry_after_s
        };
        assert_eq!(retry("503 Service Unavailable", "1"), Some(1));
        assert_eq!(retry("429 Too Many Requests", " 120 "), Some(120));
        assert_eq!(retry("200 OK", "1"), None);
        assert_eq!(retry("503 Service Unavailable", "soon"), None);
        assert_eq!(
            retry("429 Too Many Requests", "Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(0)
        );
        let ahead = std::time::SystemTime::now() + std::time::Duration::from_secs(90);
        let date = httpdate::fmt_http_date(ahead);
        assert!(retry("429 Too Many Requests", &date).is_some_and(|s| (88..=90).contains(&s)));
    }

    #[test]
    fn heads_give_status_framing_and_reuse() {
        let head = |text: &str, head_request| parse_head(text.as_bytes(), head_request);
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.framing, h.close),
            (200, Framing::Length(12), false)
        );
        let h = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.framing, h.close), (Framing::Chunked, true));
        let h = head("HTTP/1.0 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = head(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert!(!h.close);
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Empty, "HEAD has no body");
        let h = head(
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::Empty);
        let h = head(
            "HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.location.unwrap(), "/next");
        assert!(head("HTTP/1.1 200 OK\r\nContent-Le", false)
            .unwrap()
            .is_none());
        assert_eq!(
            head("garbage\r\n\r\n", false).unwrap_err(),
            ErrorClass::Protocol
        );
        assert_eq!(
            head(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false
            )
            .unwrap_err(),
            ErrorClass::Protocol
        );
    }

    #[test]
    fn requests_carry_host_length_and_close() {
        let origin = Origin {
            scheme: "http",
            addr: "127.0.0.1:8080".parse().unwrap(),
            authority: HeaderValue::from_static("example.test:8080"),
            server_name: rustls::pki_types::ServerName::try_from("example.test").unwrap(),
            tls: None,
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-one", HeaderValue::from_static("1"));
        let request = Outgoing {
            method: Method::POST,
            path: "/swipe/left/?q=1".parse().unwrap(),
            headers: Cow::Owned(headers),
            body: bytes::Bytes::from_static(b"{}").into(),
            trace: None,
            capture: Default::default(),
        };
        let mut out = Vec::new();
        encode(&mut out, &request, &origin, true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /swipe/left/?q=1 HTTP/1.1\r\nhost: example.test:8080\r\nx-one: 1\r\n\
             connection: close\r\ncontent-length: 2\r\n\r\n{}"
        );
    }
}
