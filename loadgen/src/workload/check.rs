//! Checks and extraction: what an op's response must contain, and the values a worker carries
//! from one response into the later requests of the same iteration.
//!
//! A scenario's `check = [...]` and `extract = {...}` compile into an op's [`Rules`]. The
//! transport keeps only what the rules read ([`Capture`]): the headers, and the body up to
//! [`MAX_CAPTURED_BODY_BYTES`]; ops without rules keep nothing, so the fast path reads and
//! drops bytes as before. After a response with an expected status the worker applies the
//! rules: the first check or extraction that fails names the row's `check` (its error class is
//! `check`); values extracted go into the worker's [`Session`], where later templates find
//! them as `{name}`. Every check and extraction has a run-wide id, the index of its name in the
//! `check` column's dictionary. This module knows responses and values, not when anything is
//! sent.

use std::borrow::Cow;

use hyper::header::{HeaderMap, HeaderName};
use regex::bytes::Regex;

use super::fields::Value;

/// The most of a body kept for JSON, regex and body checks and extractions unless
/// `--max-body-kept` says otherwise; a longer body is cut here (its size is still known), so
/// a JSON check on it fails rather than using memory without bound.
pub const MAX_CAPTURED_BODY_BYTES: usize = 1 << 20;

/// The longest value an extraction takes: a longer one fails the request that extracted it
/// (as a `check` error), so a response cannot make every later request of the worker carry
/// megabytes in its path or body.
pub const MAX_EXTRACTED_BYTES: usize = 8 << 10;

/// What of a response the transport keeps for an op.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capture {
    pub headers: bool,
    /// Count the body's bytes as it streams past (size checks need no more).
    pub body: bool,
    /// Of those, keep at most this many for JSON, regex and body checks and extractions; 0
    /// when only sizes or statuses are checked, so such a check costs no memory per worker.
    pub keep_body_bytes: usize,
}

impl Capture {
    pub fn any(self) -> bool {
        self.headers || self.body
    }
}

/// The kept part of the last response; one per worker, reused from request to request.
#[derive(Debug, Default)]
pub struct Captured {
    pub headers: HeaderMap,
    /// The body's first [`Capture::keep_body_bytes`].
    pub body: Vec<u8>,
    /// The whole (decoded) body's length, including what was not kept.
    pub body_bytes: u64,
    /// How much of this response's body to keep (set by [`Captured::start`]).
    keep_body_bytes: usize,
}

impl Captured {
    /// Forgets the previous response and takes how much of the next body to keep (called at
    /// the start of every hop).
    pub fn start(&mut self, capture: Capture) {
        self.headers.clear();
        self.body.clear();
        self.body_bytes = 0;
        self.keep_body_bytes = capture.keep_body_bytes;
        // A worker that once kept a large body gives the memory back when this op keeps less.
        if self.body.capacity() > capture.keep_body_bytes.max(64 << 10) {
            self.body = Vec::new();
        }
    }

    /// Adds a piece of the body as it arrives.
    pub fn push_body(&mut self, chunk: &[u8]) {
        self.body_bytes += chunk.len() as u64;
        let room = self.keep_body_bytes.saturating_sub(self.body.len());
        self.body.extend_from_slice(&chunk[..room.min(chunk.len())]);
    }
}

/// What a check looks at.
#[derive(Debug, Clone)]
pub enum Subject {
    Header(HeaderName),
    /// A JSON Pointer (RFC 6901) into the body.
    Json(String),
    Body,
    BodyBytes,
}

/// What a check wants of its subject.
#[derive(Debug, Clone)]
pub enum Predicate {
    /// The header is there, the pointer resolves.
    Present,
    /// Equal as text (a JSON string's content, any other JSON value as written).
    Equals(String),
    Matches(Regex),
    /// The body's size in bytes is within the bounds (inclusive).
    Within {
        min_bytes: Option<u64>,
        max_bytes: Option<u64>,
    },
}

/// One check of a response.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    /// Index of `name` in the run's check names.
    pub id: u16,
    pub subject: Subject,
    pub predicate: Predicate,
}

/// Where an extracted value comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A JSON Pointer: a string is taken as it is, an integer stays an integer.
    Json(String),
    Header(HeaderName),
    /// The first capture group of a regex on the body (the whole match without a group).
    Regex(Regex),
}

/// One value taken from a response into the worker's session.
#[derive(Debug, Clone)]
pub struct Extract {
    /// Its check name (`extract album_id`), which a failed extraction puts in the row.
    pub name: String,
    pub id: u16,
    /// The field index templates refer to it by.
    pub field: usize,
    pub source: Source,
}

/// An op's checks and extractions.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub checks: Vec<Check>,
    pub extracts: Vec<Extract>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty() && self.extracts.is_empty()
    }

    /// What the transport must keep for these rules.
    pub fn capture(&self) -> Capture {
        let mut capture = Capture::default();
        for check in &self.checks {
            match check.subject {
                Subject::Header(_) => capture.headers = true,
                Subject::Json(_) | Subject::Body => keep(&mut capture),
                // The size is counted as the body streams past; no bytes are kept.
                Subject::BodyBytes => capture.body = true,
            }
        }
        for extract in &self.extracts {
            match extract.source {
                Source::Header(_) => capture.headers = true,
                Source::Json(_) | Source::Regex(_) => keep(&mut capture),
            }
        }
        capture
    }

    /// Keeps at most `bytes` of a body for these rules (`--max-body-kept`); rules that keep
    /// none still keep none.
    pub fn limit_kept(capture: &mut Capture, bytes: usize) {
        capture.keep_body_bytes = capture.keep_body_bytes.min(bytes);
    }

    /// Applies the checks, then the extractions, to `response`; the id of the first that
    /// fails, if one does. Extracted values go into `session`.
    pub fn apply(&self, response: &Captured, session: &mut Session) -> Result<(), u16> {
        let mut json = LazyJson::default();
        for check in &self.checks {
            if !check.passes(response, &mut json) {
                return Err(check.id);
            }
        }
        for extract in &self.extracts {
            let value = extract
                .take(response, &mut json)
                .filter(|value| !value.is_longer_than(MAX_EXTRACTED_BYTES))
                .ok_or(extract.id)?;
            session.set(extract.field, value);
        }
        Ok(())
    }

    /// Before the request is sent: the values it is about to extract are forgotten, so a later
    /// request never uses one from an earlier iteration when this extraction fails.
    pub fn forget_extracted(&self, session: &mut Session) {
        for extract in &self.extracts {
            session.forget(extract.field);
        }
    }
}

/// Counts the body and keeps up to the default cap of it.
fn keep(capture: &mut Capture) {
    capture.body = true;
    capture.keep_body_bytes = MAX_CAPTURED_BODY_BYTES;
}

impl Check {
    fn passes(&self, response: &Captured, json: &mut LazyJson) -> bool {
        if let Predicate::Within {
            min_bytes,
            max_bytes,
        } = &self.predicate
        {
            let size = response.body_bytes;
            return min_bytes.is_none_or(|min| size >= min)
                && max_bytes.is_none_or(|max| size <= max);
        }
        let text: Cow<[u8]> = match &self.subject {
            Subject::Header(name) => match response.headers.get(name) {
                Some(value) => Cow::Borrowed(value.as_bytes()),
                None => return false,
            },
            Subject::Json(pointer) => {
                match json.get(&response.body).and_then(|j| j.pointer(pointer)) {
                    Some(value) => Cow::Owned(json_text(value).into_owned().into_bytes()),
                    None => return false,
                }
            }
            Subject::Body | Subject::BodyBytes => Cow::Borrowed(&response.body[..]),
        };
        match &self.predicate {
            Predicate::Present => true,
            Predicate::Equals(want) => *text == *want.as_bytes(),
            Predicate::Matches(regex) => regex.is_match(&text),
            Predicate::Within { .. } => unreachable!("handled above"),
        }
    }
}

impl Extract {
    fn take(&self, response: &Captured, json: &mut LazyJson) -> Option<Value> {
        match &self.source {
            Source::Json(pointer) => match json.get(&response.body)?.pointer(pointer)? {
                serde_json::Value::Null => None,
                serde_json::Value::Number(n) if n.is_i64() => n.as_i64().map(Value::Int),
                other => Some(Value::Str(json_text(other).into_owned())),
            },
            Source::Header(name) => {
                let value = response.headers.get(name)?.to_str().ok()?;
                Some(Value::Str(value.to_string()))
            }
            Source::Regex(regex) => {
                let found = regex.captures(&response.body)?;
                let hit = found.get(1).or_else(|| found.get(0))?;
                Some(Value::Str(
                    std::str::from_utf8(hit.as_bytes()).ok()?.to_string(),
                ))
            }
        }
    }
}

/// A JSON value as text: a string's content, anything else as JSON.
fn json_text(value: &serde_json::Value) -> Cow<'_, str> {
    match value {
        serde_json::Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// The body parsed as JSON once, on first use, whatever number of rules read it.
#[derive(Default)]
struct LazyJson(Option<Option<serde_json::Value>>);

impl LazyJson {
    fn get(&mut self, body: &[u8]) -> Option<&serde_json::Value> {
        self.0
            .get_or_insert_with(|| serde_json::from_slice(body).ok())
            .as_ref()
    }
}

/// The values a worker has extracted, by field index; empty until extracted.
#[derive(Debug, Default)]
pub struct Session {
    values: Vec<Option<Value>>,
}

impl Session {
    pub fn set(&mut self, field: usize, value: Value) {
        if self.values.len() <= field {
            self.values.resize(field + 1, None);
        }
        self.values[field] = Some(value);
    }

    pub fn forget(&mut self, field: usize) {
        if let Some(slot) = self.values.get_mut(field) {
            *slot = None;
        }
    }

    pub fn get(&self, field: usize) -> Option<&Value> {
        self.values.get(field)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn response(body: &str, headers: &[(&'static str, &'static str)]) -> Captured {
        let mut captured = Captured::default();
        captured.start(Capture {
            keep_body_bytes: MAX_CAPTURED_BODY_BYTES,
            ..Capture::default()
        });
        for (name, value) in headers {
            captured
                .headers
                .insert(*name, HeaderValue::from_static(value));
        }
        captured.push_body(body.as_bytes());
        captured
    }

    fn check(id: u16, subject: Subject, predicate: Predicate) -> Check {
        Check {
            name: format!("check {id}"),
            id,
            subject,
            predicate,
        }
    }

    #[test]
    fn checks_pass_and_fail_on_json_headers_and_size() {
        let album = response(
            r#"{"albumID":"17","imageSize":"2000","n":3}"#,
            &[("content-type", "application/json")],
        );
        let json = |pointer: &str| Subject::Json(pointer.to_string());
        let passing = Rules {
            checks: vec![
                check(0, json("/imageSize"), Predicate::Equals("2000".into())),
                check(1, json("/n"), Predicate::Equals("3".into())),
                check(2, json("/albumID"), Predicate::Present),
                check(
                    3,
                    Subject::Header(hyper::header::CONTENT_TYPE),
                    Predicate::Matches(Regex::new("json").unwrap()),
                ),
                check(
                    4,
                    Subject::BodyBytes,
                    Predicate::Within {
                        min_bytes: Some(10),
                        max_bytes: Some(100),
                    },
                ),
                check(
                    5,
                    Subject::Body,
                    Predicate::Matches(Regex::new(r#""n":\d"#).unwrap()),
                ),
            ],
            extracts: Vec::new(),
        };
        assert_eq!(passing.apply(&album, &mut Session::default()), Ok(()));
        let failing = [
            check(7, json("/imageSize"), Predicate::Equals("2048".into())),
            check(8, json("/missing"), Predicate::Present),
            check(
                9,
                Subject::Header(HeaderName::from_static("x-id")),
                Predicate::Present,
            ),
            check(
                10,
                Subject::BodyBytes,
                Predicate::Within {
                    min_bytes: None,
                    max_bytes: Some(5),
                },
            ),
        ];
        for failing in failing {
            let id = failing.id;
            let mut rules = passing.clone();
            rules.checks.insert(2, failing);
            assert_eq!(rules.apply(&album, &mut Session::default()), Err(id));
        }
        // Not JSON at all: a JSON check fails, it does not panic.
        let text = response("<html>", &[]);
        let rules = Rules {
            checks: vec![check(3, json("/a"), Predicate::Present)],
            extracts: Vec::new(),
        };
        assert_eq!(rules.apply(&text, &mut Session::default()), Err(3));
    }

    #[test]
    fn extraction_fills_the_session_and_a_miss_names_itself() {
        let album = response(r#"{"albumID":"17","n":42}"#, &[("location", "/albums/17")]);
        let extract = |id: u16, field: usize, source: Source| Extract {
            name: format!("extract {field}"),
            id,
            field,
            source,
        };
        let rules = Rules {
            checks: Vec::new(),
            extracts: vec![
                extract(0, 0, Source::Json("/albumID".into())),
                extract(1, 1, Source::Json("/n".into())),
                extract(2, 2, Source::Header(hyper::header::LOCATION)),
                extract(3, 3, Source::Regex(Regex::new(r#""n":(\d+)"#).unwrap())),
            ],
        };
        let mut session = Session::default();
        assert_eq!(rules.apply(&album, &mut session), Ok(()));
        assert_eq!(session.get(0), Some(&Value::Str("17".into())));
        assert_eq!(session.get(1), Some(&Value::Int(42)));
        assert_eq!(session.get(2), Some(&Value::Str("/albums/17".into())));
        assert_eq!(session.get(3), Some(&Value::Str("42".into())));
        rules.forget_extracted(&mut session);
        assert_eq!(session.get(0), None);
        let missing = Rules {
            checks: Vec::new(),
            extracts: vec![extract(5, 0, Source::Json("/nope".into()))],
        };
        assert_eq!(missing.apply(&album, &mut session), Err(5));
        assert_eq!(session.get(0), None);
    }

    #[test]
    fn a_long_body_is_cut_but_its_size_is_kept() {
        let mut captured = Captured::default();
        captured.start(Capture {
            keep_body_bytes: MAX_CAPTURED_BODY_BYTES,
            ..Capture::default()
        });
        let chunk = vec![b'x'; MAX_CAPTURED_BODY_BYTES / 2 + 1];
        captured.push_body(&chunk);
        captured.push_body(&chunk);
        assert_eq!(captured.body.len(), MAX_CAPTURED_BODY_BYTES);
        assert_eq!(captured.body_bytes, 2 * chunk.len() as u64);
    }

    /// Issue 27: an extracted value had no size limit, so one response could make every later
    /// request of the worker carry megabytes. Over 8 KiB fails the extracting request.
    #[test]
    fn regression_an_extracted_value_over_8_kib_fails_the_request() {
        let rules = Rules {
            checks: Vec::new(),
            extracts: vec![Extract {
                name: "extract id".into(),
                id: 4,
                field: 0,
                source: Source::Json("/id".into()),
            }],
        };
        let body = |len: usize| format!(r#"{{"id":"{}"}}"#, "x".repeat(len));
        let mut session = Session::default();
        let fits = response(&body(MAX_EXTRACTED_BYTES), &[]);
        assert_eq!(rules.apply(&fits, &mut session), Ok(()));
        let too_long = response(&body(MAX_EXTRACTED_BYTES + 1), &[]);
        rules.forget_extracted(&mut session);
        assert_eq!(rules.apply(&too_long, &mut session), Err(4));
        assert_eq!(session.get(0), None);
    }

    /// Issue 27: a size-only check kept up to 1 MiB of every body per worker. Sizes and
    /// statuses keep nothing; JSON, regex and body checks keep at most `--max-body-kept`.
    #[test]
    fn regression_size_checks_keep_no_body_and_the_cap_is_configurable() {
        let size = Rules {
            checks: vec![check(
                0,
                Subject::BodyBytes,
                Predicate::Within {
                    min_bytes: Some(1),
                    max_bytes: None,
                },
            )],
            extracts: Vec::new(),
        };
        let capture = size.capture();
        assert!(capture.body);
        assert_eq!(capture.keep_body_bytes, 0);
        let mut captured = Captured::default();
        captured.start(capture);
        captured.push_body(&[b'x'; 4096]);
        assert_eq!((captured.body.len(), captured.body_bytes), (0, 4096));
        assert_eq!(size.apply(&captured, &mut Session::default()), Ok(()));

        let json = Rules {
            checks: vec![check(1, Subject::Json("/a".into()), Predicate::Present)],
            extracts: Vec::new(),
        };
        let mut capture = json.capture();
        assert_eq!(capture.keep_body_bytes, MAX_CAPTURED_BODY_BYTES);
        Rules::limit_kept(&mut capture, 10);
        captured.start(capture);
        captured.push_body(br#"{"a": "more than ten bytes"}"#);
        assert_eq!(captured.body.len(), 10);
    }
}
