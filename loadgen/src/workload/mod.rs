//! Workloads: what workers send — request templates, payload generators and the statuses each
//! operation expects — compiled once before the run.
//!
//! A [`RequestTemplate`] holds one operation's method, path template, headers and body
//! template; its `label` is the `op` column (e.g. `POST /albums`). [`Workload`] holds all of
//! them plus the fields each phase draws from. This module decides *what* a request looks
//! like; models decide *when* it is sent, transports *how*.

pub mod check;
pub mod fields;
pub mod secret;
pub mod template;

use std::ops::RangeInclusive;

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Uri};

use check::{Capture, Rules, Session};
use fields::{Fields, Value};
use template::{Body, BodyBytes, Text};

/// Statuses an operation counts as success; anything else is recorded as `http_status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet(pub Vec<RangeInclusive<u16>>);

impl Default for StatusSet {
    /// 2xx and 3xx, like every load tool.
    fn default() -> Self {
        StatusSet(vec![200..=399])
    }
}

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|r| r.contains(&status))
    }
}

/// One operation, ready to render.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// Shown in summaries and stored as the `op` dictionary value.
    pub label: String,
    pub method: Method,
    /// Path and query, with `{field}` placeholders.
    pub path: Text,
    /// Headers as sent, except `Host`, which the transport adds.
    pub headers: HeaderMap,
    pub body: Body,
    pub expect: StatusSet,
    /// Checks of the response and values extracted from it (scenario `check`, `extract`).
    pub rules: Rules,
    /// What of the response the transport keeps for `rules` (nothing, without rules).
    pub capture: Capture,
    /// The extracted fields this request uses: without all of them it is skipped.
    pub session_fields: Vec<usize>,
    /// Pre-rendered request when nothing in it varies (the common `--url` case).
    fixed: Option<Prepared>,
}

/// The parts of a request that vary from one send to the next.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub uri: Uri,
    pub body: BodyBytes,
    /// The `traceparent` to send (`--trace`), unless the template sets its own.
    pub trace: Option<crate::record::trace::TraceParent>,
}

/// Why a template could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("path '{path}' is not a valid request target: {reason}")]
    Path { path: String, reason: String },
}

/// Headers that frame the message: written by the transport from the body, never taken from
/// a user (`-H`, a scenario, a targets file). A `Content-Length: 10` on a request without a
/// body made the server wait for ten bytes that never came and put the keep-alive connection
/// out of step.
pub const FRAMING_HEADERS: [HeaderName; 2] = [
    hyper::header::CONTENT_LENGTH,
    hyper::header::TRANSFER_ENCODING,
];

impl RequestTemplate {
    /// Builds a template; `user_headers` come last and win, but for the framing headers
    /// ([`FRAMING_HEADERS`]): the client owns how a message is framed, so a user's
    /// `Content-Length` or `Transfer-Encoding` is dropped and the transport writes the one the
    /// body has. The transport adds `Host` unless the user sets one (a virtual host).
    pub fn new(
        label: Option<String>,
        method: Method,
        path: Text,
        user_headers: &[(HeaderName, HeaderValue)],
        body: Body,
        expect: StatusSet,
    ) -> Result<Self, TemplateError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            hyper::header::USER_AGENT,
            HeaderValue::from_static(concat!("loadgen/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(content_type) = body.content_type() {
            if let Ok(value) = HeaderValue::from_str(&content_type) {
                headers.insert(hyper::header::CONTENT_TYPE, value);
            }
        }
        for (name, value) in user_headers {
            if !FRAMING_HEADERS.contains(name) {
                headers.insert(name.clone(), value.clone());
            }
        }
        let no_values: Vec<Value> = Vec::new();
        let fixed = if path.is_static() && body.is_static() {
            let raw = path.render(&no_values);
            let uri = raw.parse::<Uri>().map_err(|e| TemplateError::Path {
                path: raw.clone(),
                reason: e.to_string(),
            })?;
            Some(Prepared {
                uri,
                body: body.render(&no_values),
                trace: None,
            })
        } else {
            None
        };
        // A query's secret values are sent, never shown: the label is the `op` column.
        let label =
            label.unwrap_or_else(|| format!("{method} {}", secret::redact_target(path.source())));
        Ok(RequestTemplate {
            label,
            method,
            path,
            headers,
            body,
            expect,
            rules: Rules::default(),
            capture: Capture::default(),
            session_fields: Vec::new(),
            fixed,
        })
    }

    /// The same template with response rules; `fields` tells which of the fields it uses are
    /// extracted ones (they come from the worker's session).
    pub fn with_rules(mut self, rules: Rules, fields: &Fields) -> Self {
        let mut used = Vec::new();
        self.path.fields_used(&mut used);
        self.body.fields_used(&mut used);
        used.retain(|&i| fields.is_extracted(i));
        used.sort_unstable();
        used.dedup();
        self.session_fields = used;
        self.capture = rules.capture();
        self.rules = rules;
        self
    }

    /// The field values to render with: `drawn` with the session's extracted values in
    /// place, or `None` when one of them is missing (its extraction failed).
    pub fn fill_session(&self, mut drawn: Vec<Value>, session: &Session) -> Option<Vec<Value>> {
        for &field in &self.session_fields {
            drawn[field] = session.get(field)?.clone();
        }
        Some(drawn)
    }

    /// True when rendering needs field values.
    pub fn needs_values(&self) -> bool {
        self.fixed.is_none()
    }

    /// The request to send, given this request's field values.
    pub fn render(&self, values: &[Value]) -> Prepared {
        if let Some(fixed) = &self.fixed {
            return fixed.clone();
        }
        let raw = self.path.render(values);
        // Field values are free text; a value that makes the path invalid is percent-encoded
        // rather than failing the request.
        let uri = raw.parse::<Uri>().unwrap_or_else(|_| {
            let encoded: String = raw
                .bytes()
                .map(|b| {
                    if b.is_ascii_graphic() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            encoded.parse().unwrap_or_else(|_| Uri::from_static("/"))
        });
        Prepared {
            uri,
            body: self.body.render(values),
            trace: None,
        }
    }
}

/// Everything workers render requests from.
#[derive(Debug, Clone)]
pub struct Workload {
    pub templates: Vec<RequestTemplate>,
    /// Names of every check and extraction, indexed by their ids: the `check` column's
    /// dictionary.
    pub check_names: Vec<String>,
    /// Fields drawn for requests of each phase (phases may narrow payload ranges).
    pub phase_fields: Vec<Fields>,
    /// The scenario's name of each template's request (`get_album`), by op; empty for a
    /// quick run, whose one request is named by its label only.
    pub request_names: Vec<String>,
}

impl Workload {
    /// One fixed request, for `loadgen run --url …`.
    pub fn single(template: RequestTemplate) -> Self {
        Workload {
            templates: vec![template],
            request_names: Vec::new(),
            check_names: Vec::new(),
            phase_fields: vec![Fields::default()],
        }
    }

    pub fn labels(&self) -> Vec<String> {
        self.templates.iter().map(|t| t.label.clone()).collect()
    }

    /// The label of the op a selector names: its label (`GET /albums/{album_id}`), or its
    /// request's name in the scenario (`get_album`); `None` when it names no op.
    pub fn op_label(&self, selector: &str) -> Option<&str> {
        let by_label = self.templates.iter().find(|t| t.label == selector);
        let by_name = || {
            let op = self.request_names.iter().position(|n| n == selector)?;
            self.templates.get(op)
        };
        by_label.or_else(by_name).map(|t| t.label.as_str())
    }

    /// Each request's name in the scenario and the label of its op (run.json `request_ops`),
    /// so a reader of the run resolves a selector by name as the engine does.
    pub fn request_ops(&self) -> std::collections::BTreeMap<String, String> {
        self.request_names
            .iter()
            .zip(&self.templates)
            .map(|(name, template)| (name.clone(), template.label.clone()))
            .collect()
    }

    /// Every op as a selector may name it: `label` or `label (name)`.
    pub fn op_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (op, template) in self.templates.iter().enumerate() {
            let name = match self.request_names.get(op) {
                Some(request) if *request != template.label => {
                    format!("{} ({request})", template.label)
                }
                _ => template.label.clone(),
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}
