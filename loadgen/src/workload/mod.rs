//! Request templates: what a worker sends, prepared once before the run.
//!
//! A [`RequestTemplate`] holds the method, target path, headers and body of one operation,
//! already parsed and validated, so the hot path only clones cheap handles. Its `label` is the
//! `op` column of the records (e.g. `GET /albums`). Payload generators for scenario files will
//! live here too; the closed model sends one fixed template.

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Uri};

/// One operation, ready to send.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// Shown in summaries and stored as the `op` dictionary value.
    pub label: String,
    pub method: Method,
    /// Path and query, e.g. `/albums/1?x=y`.
    pub path: Uri,
    /// Headers as sent, `Host` included.
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RequestTemplate {
    /// Builds a template; `headers` are the user's, `host` the `Host` header value.
    pub fn new(
        method: Method,
        path: Uri,
        host: &str,
        user_headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Self {
        let mut headers = HeaderMap::new();
        if let Ok(host) = HeaderValue::from_str(host) {
            headers.insert(hyper::header::HOST, host);
        }
        headers.insert(
            hyper::header::USER_AGENT,
            HeaderValue::from_static(concat!("loadgen/", env!("CARGO_PKG_VERSION"))),
        );
        if !body.is_empty() || method == Method::POST || method == Method::PUT {
            headers.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        for (name, value) in user_headers {
            headers.insert(name.clone(), value.clone());
        }
        let route = path.path().to_string();
        RequestTemplate {
            label: format!("{method} {route}"),
            method,
            path,
            headers,
            body,
        }
    }
}
