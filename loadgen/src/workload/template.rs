//! Templates: paths, JSON and multipart bodies with `{field}` placeholders, compiled once.
//!
//! A template is parsed when the scenario is loaded — an unknown field is an error then, not
//! at request time — into pieces that reference fields by index. Rendering only concatenates
//! strings and serialises JSON. Generated binary parts (a 25 KB "image") are drawn once per
//! template and shared, so large bodies cost no per-request randomness; a rendered body
//! ([`BodyBytes`]) refers to them instead of copying them, so a 64 MB image costs 64 MB once,
//! not per request in flight.

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::{Fields, Value};

/// A string with `{field}` placeholders; `{{` and `}}` are literal braces. `{field|str}` is
/// the same value, marked as text: in a JSON template `"{year|str}"` is the JSON string
/// `"1977"` where `"{year}"` would be the number `1977`.
///
/// In a request target ([`Text::parse_target`]) a value is data, never syntax: it is
/// percent-encoded as one path segment before the first `?` and as one query component after
/// it, so a response that returns `a/../../admin?x=1#f` cannot choose the next request's path
/// or query. `{field|raw}` inserts the value as it is, for the rare scenario that extracts a
/// whole path; it trusts the server under test. Bodies take values as text (JSON is escaped
/// by serde), whatever the modifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pieces: Vec<Piece>,
    /// Some placeholder says `|str`: the text is a string even if it is one integer field.
    as_string: bool,
    /// The template as written, for labels and messages.
    source: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Field(usize, Escape),
}

/// How a value is written where its placeholder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// As it is: body text, and `{field|raw}` in a request target.
    AsIs,
    /// Percent-encoded as one path segment (RFC 3986 `pchar`).
    PathSegment,
    /// Percent-encoded as one query component: `&`, `=`, `+`, `;` and `#` too.
    QueryComponent,
}

impl Text {
    /// Parses `text`, resolving field names against `fields`. The error names the field and
    /// the fields that exist.
    pub fn parse(text: &str, fields: &Fields) -> Result<Text, String> {
        Text::parse_in(text, fields, false)
    }

    /// Parses a request target (path and query): each value is percent-encoded for where it
    /// stands, unless its placeholder says `|raw` (see [`Text`]).
    pub fn parse_target(text: &str, fields: &Fields) -> Result<Text, String> {
        Text::parse_in(text, fields, true)
    }

    fn parse_in(text: &str, fields: &Fields, target: bool) -> Result<Text, String> {
        let mut pieces = Vec::new();
        let mut in_query = false;
        let mut literal = String::new();
        let mut as_string = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    let (name, modifier) = match inner.split_once('|') {
                        Some((name, modifier)) => (name, Some(modifier.trim())),
                        None => (inner.as_str(), None),
                    };
                    let mut escape = match (target, in_query) {
                        (false, _) => Escape::AsIs,
                        (true, false) => Escape::PathSegment,
                        (true, true) => Escape::QueryComponent,
                    };
                    match modifier {
                        None => {}
                        Some("str") => as_string = true,
                        Some("raw") => escape = Escape::AsIs,
                        Some(other) => {
                            return Err(format!(
                                "'{{{inner}}}': unknown modifier '{other}' (the modifiers are str, as in {{{0}|str}}, which sends a number as a JSON string, and raw, as in {{{0}|raw}}, which puts a value in a path unencoded)",
                                name.trim()
                            ))
                        }
                    }
                    let index = fields.index(name.trim()).ok_or_else(|| {
                        let known = if fields.is_empty() {
                            "none are declared under [fields]".to_string()
                        } else {
                            format!("declared fields: {}", fields.names().join(", "))
                        };
                        format!("'{{{name}}}' refers to an undefined field ({known})")
                    })?;
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Field(index, escape));
                }
                c => {
                    in_query |= c == '?';
                    literal.push(c);
                }
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Text {
            pieces,
            as_string,
            source: text.to_string(),
        })
    }

    /// A text with no placeholders: braces in it are literal.
    pub fn literal(text: &str) -> Text {
        Text {
            pieces: vec![Piece::Literal(text.to_string())],
            as_string: false,
            source: text.to_string(),
        }
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the text has no placeholders.
    pub fn is_static(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Literal(_)))
    }

    /// The field index when the text is exactly one placeholder (`"{id}"`, not `"{id|str}"`).
    fn sole_field(&self) -> Option<usize> {
        match self.pieces.as_slice() {
            [Piece::Field(i, _)] if !self.as_string => Some(*i),
            _ => None,
        }
    }

    /// Adds the indexes of the fields it refers to to `out`.
    pub fn fields_used(&self, out: &mut Vec<usize>) {
        for piece in &self.pieces {
            if let Piece::Field(i, _) = piece {
                out.push(*i);
            }
        }
    }

    pub fn render_into(&self, values: &[Value], out: &mut String) {
        for piece in &self.pieces {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Field(i, Escape::AsIs) => values[*i].write_to(out),
                Piece::Field(i, escape) => {
                    let mut value = String::new();
                    values[*i].write_to(&mut value);
                    percent_encode(&value, *escape, out);
                }
            }
        }
    }

    pub fn render(&self, values: &[Value]) -> String {
        let mut out = String::new();
        self.render_into(values, &mut out);
        out
    }
}

/// Appends `value` to `out` percent-encoded for `escape`: RFC 3986's unreserved characters
/// stay, and of its sub-delimiters those that mean nothing where the value stands; everything
/// else, `/ ? # %`, space, controls and non-ASCII bytes included, becomes `%XX`. A value that
/// is all dots is encoded too, so it cannot be a `.` or `..` path segment.
fn percent_encode(value: &str, escape: Escape, out: &mut String) {
    use std::fmt::Write;
    let dots_only = !value.is_empty() && value.bytes().all(|b| b == b'.');
    for b in value.bytes() {
        let keep = match b {
            b'.' => !dots_only,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => true,
            b'!' | b'$' | b'\'' | b'(' | b')' | b'*' | b',' | b':' | b'@' => true,
            b'&' | b'=' | b'+' | b';' => escape == Escape::PathSegment,
            _ => false,
        };
        if keep {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// A JSON document with placeholders. A string that is exactly `"{field}"` takes the field's
/// type (an integer field becomes a JSON number); other strings, and `"{field|str}"`, are
/// rendered as JSON strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Field(usize),
    Text(Text),
    Literal(serde_json::Value),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Compiles a TOML value (a scenario's `json = { … }`) into a template.
    pub fn from_toml(value: &toml::Value, fields: &Fields) -> Result<Json, String> {
        Ok(match value {
            toml::Value::String(s) => {
                let text = Text::parse(s, fields)?;
                match text.sole_field() {
                    Some(i) => Json::Field(i),
                    None => Json::Text(text),
                }
            }
            toml::Value::Integer(n) => Json::Literal((*n).into()),
            toml::Value::Float(f) => Json::Literal(
                serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, Into::into),
            ),
            toml::Value::Boolean(b) => Json::Literal((*b).into()),
            toml::Value::Datetime(d) => Json::Literal(d.to_string().into()),
            toml::Value::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|v| Json::from_toml(v, fields))
                    .collect::<Result<_, _>>()?,
            ),
            toml::Value::Table(table) => Json::Object(
                table
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), Json::from_toml(v, fields)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }

    fn fields_used(&self, out: &mut Vec<usize>) {
        match self {
            Json::Field(i) => out.push(*i),
            Json::Text(text) => text.fields_used(out),
            Json::Literal(_) => {}
            Json::Array(items) => items.iter().for_each(|j| j.fields_used(out)),
            Json::Object(entries) => entries.iter().for_each(|(_, j)| j.fields_used(out)),
        }
    }

    fn value(&self, values: &[Value]) -> serde_json::Value {
        match self {
            Json::Field(i) => match &values[*i] {
                Value::Int(n) => (*n).into(),
                Value::Str(s) => s.clone().into(),
            },
            Json::Text(text) => text.render(values).into(),
            Json::Literal(v) => v.clone(),
            Json::Array(items) => items.iter().map(|j| j.value(values)).collect(),
            Json::Object(entries) => entries
                .iter()
                .map(|(k, j)| (k.clone(), j.value(values)))
                .collect::<serde_json::Map<_, _>>()
                .into(),
        }
    }

    pub fn render(&self, values: &[Value]) -> Vec<u8> {
        serde_json::to_vec(&self.value(values)).expect("JSON values always serialise")
    }
}

/// One part of a multipart/form-data body.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: String,
    pub content: PartContent,
}

#[derive(Debug, Clone)]
pub enum PartContent {
    Json(Json),
    Text(Text),
    /// Generated once per template: the size is what matters, not the bytes.
    Blob(Bytes),
}

/// A rendered request body: chunks sent one after another. A generated part is its own chunk,
/// shared with the template (a reference count, not a copy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyBytes {
    chunks: Vec<Bytes>,
    len: usize,
}

impl BodyBytes {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    /// The body as one buffer: the chunk itself when there is one, else a copy.
    pub fn concat(&self) -> Bytes {
        match self.chunks.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => many.concat().into(),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.len += chunk.len();
            self.chunks.push(chunk);
        }
    }
}

impl From<Bytes> for BodyBytes {
    fn from(bytes: Bytes) -> Self {
        let mut body = BodyBytes::default();
        body.push(bytes);
        body
    }
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    Empty,
    Static(Bytes),
    Text(Text),
    Json(Json),
    Multipart { boundary: String, parts: Vec<Part> },
}

impl Body {
    /// The Content-Type this body implies, if any.
    pub fn content_type(&self) -> Option<String> {
        match self {
            Body::Json(_) => Some("application/json".to_string()),
            Body::Multipart { boundary, .. } => {
                Some(format!("multipart/form-data; boundary={boundary}"))
            }
            _ => None,
        }
    }

    pub fn render(&self, values: &[Value]) -> BodyBytes {
        match self {
            Body::Empty => BodyBytes::default(),
            Body::Static(bytes) => bytes.clone().into(),
            Body::Text(text) => Bytes::from(text.render(values)).into(),
            Body::Json(json) => Bytes::from(json.render(values)).into(),
            Body::Multipart { boundary, parts } => {
                let mut body = BodyBytes::default();
                let mut out = BytesMut::new();
                for part in parts {
                    out.put_slice(b"--");
                    out.put_slice(boundary.as_bytes());
                    out.put_slice(b"\r\nContent-Disposition: form-data; name=\"");
                    out.put_slice(part.name.as_bytes());
                    if let Some(filename) = &part.filename {
                        out.put_slice(b"\"; filename=\"");
                        out.put_slice(filename.as_bytes());
                    }
                    out.put_slice(b"\"\r\nContent-Type: ");
                    out.put_slice(part.content_type.as_bytes());
                    out.put_slice(b"\r\n\r\n");
                    match &part.content {
                        PartContent::Json(json) => out.put_slice(&json.render(values)),
                        PartContent::Text(text) => out.put_slice(text.render(values).as_bytes()),
                        PartContent::Blob(blob) => {
                            // Shared, not copied: the text so far, then the blob itself.
                            body.push(out.split().freeze());
                            body.push(blob.clone());
                        }
                    }
                    out.put_slice(b"\r\n");
                }
                out.put_slice(b"--");
                out.put_slice(boundary.as_bytes());
                out.put_slice(b"--\r\n");
                body.push(out.freeze());
                body
            }
        }
    }

    /// Adds the indexes of the fields it refers to to `out`.
    pub fn fields_used(&self, out: &mut Vec<usize>) {
        match self {
            Body::Empty | Body::Static(_) => {}
            Body::Text(text) => text.fields_used(out),
            Body::Json(json) => json.fields_used(out),
            Body::Multipart { parts, .. } => {
                for part in parts {
                    match &part.content {
                        PartContent::Json(json) => json.fields_used(out),
                        PartContent::Text(text) => text.fields_used(out),
                        PartContent::Blob(_) => {}
                    }
                }
            }
        }
    }

    /// True when every render gives the same bytes.
    pub fn is_static(&self) -> bool {
        match self {
            Body::Empty | Body::Static(_) => true,
            Body::Text(t) => t.is_static(),
            Body::Json(_) | Body::Multipart { .. } => false,
        }
    }
}

/// `size` random bytes (a generated file part).
pub fn blob(size: usize, rng: &mut fastrand::Rng) -> Bytes {
    let mut data = vec![0u8; size];
    rng.fill(&mut data);
    Bytes::from(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fields::Generator;

    fn fields() -> Fields {
        let mut f = Fields::default();
        f.push("id", Generator::Literal(Value::Int(42)));
        f.push("dir", Generator::Literal(Value::Str("left".into())));
        f
    }

    #[test]
    fn text_placeholders_and_escapes() {
        let f = fields();
        let values = f.draw(&mut fastrand::Rng::new());
        let t = Text::parse("/swipe/{dir}/{id}?x={{y}}", &f).unwrap();
        assert_eq!(t.render(&values), "/swipe/left/42?x={y}");
        assert!(!t.is_static());
        assert!(Text::parse("/plain", &f).unwrap().is_static());
        let err = Text::parse("/albums/{album}", &f).unwrap_err();
        assert!(err.contains("{album}") && err.contains("id, dir"), "{err}");
    }

    #[test]
    fn json_fields_keep_their_type() {
        let f = fields();
        let values = f.draw(&mut fastrand::Rng::new());
        let toml: toml::Value = toml::from_str(
            r#"doc = { liftID = "{id}", label = "lift {id}", dir = "{dir}", n = 3, ok = true, year = "{id|str}", y = "{ id | str }" }"#,
        )
        .unwrap();
        let json = Json::from_toml(&toml["doc"], &f).unwrap();
        let rendered: serde_json::Value = serde_json::from_slice(&json.render(&values)).unwrap();
        assert_eq!(
            rendered,
            serde_json::json!({"liftID": 42, "label": "lift 42", "dir": "left", "n": 3, "ok": true, "year": "42", "y": "42"})
        );
        let err = Text::parse("{id|num}", &f).unwrap_err();
        assert!(
            err.contains("unknown modifier 'num'") && err.contains("{id|str}"),
            "{err}"
        );
    }

    #[test]
    fn multipart_body_is_well_formed() {
        let f = fields();
        let values = f.draw(&mut fastrand::Rng::new());
        let body = Body::Multipart {
            boundary: "b0undary".into(),
            parts: vec![
                Part {
                    name: "profile".into(),
                    filename: None,
                    content_type: "application/json".into(),
                    content: PartContent::Text(Text::parse("{{\"id\":{id}}}", &f).unwrap()),
                },
                Part {
                    name: "image".into(),
                    filename: Some("cover.png".into()),
                    content_type: "image/png".into(),
                    content: PartContent::Blob(blob(2048, &mut fastrand::Rng::new())),
                },
            ],
        };
        let bytes = body.render(&values).concat();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("--b0undary\r\nContent-Disposition: form-data; name=\"profile\"\r\n")
        );
        assert!(text.contains("{\"id\":42}"));
        assert!(text
            .contains("name=\"image\"; filename=\"cover.png\"\r\nContent-Type: image/png\r\n\r\n"));
        assert!(text.ends_with("\r\n--b0undary--\r\n"));
        assert!(bytes.len() > 2048);
    }

    /// Issue 27: an extracted `{"id": "a/../../admin?delete=1 x"}` in `path = "/items/{id}"`
    /// made loadgen send `GET /items/a/../../admin?delete=1%20x`, and `abc#frag` cut the rest
    /// of the path and query. A value is one path segment or one query component; in bodies it
    /// is text; `|raw` is the opt-out.
    #[test]
    fn regression_hostile_values_stay_data_in_every_position() {
        let mut f = Fields::default();
        let hostile = "a/../../admin?delete=1&x=2 y#frag%2F\r\n\u{e9}";
        f.push("id", Generator::Literal(Value::Str(hostile.into())));
        f.push("dots", Generator::Literal(Value::Str("..".into())));
        let values = f.draw(&mut fastrand::Rng::new());
        let target = Text::parse_target("/items/{id}/x/{dots}?q={id}&n=1", &f).unwrap();
        let rendered = target.render(&values);
        assert_eq!(
            rendered,
            "/items/a%2F..%2F..%2Fadmin%3Fdelete=1&x=2%20y%23frag%252F%0D%0A%C3%A9/x/%2E%2E\
             ?q=a%2F..%2F..%2Fadmin%3Fdelete%3D1%26x%3D2%20y%23frag%252F%0D%0A%C3%A9&n=1"
        );
        let uri: hyper::Uri = rendered.parse().unwrap();
        assert_eq!(uri.path().matches('/').count(), 4, "{uri}");
        assert_eq!(uri.query().unwrap().matches('&').count(), 1, "{uri}");
        // The opt-out trusts the server: the value is the path.
        let raw = Text::parse_target("{id|raw}", &f).unwrap();
        assert_eq!(raw.render(&values), hostile);
        // Bodies: text as it is, JSON escaped by serde, multipart text as it is.
        let text = Text::parse("id={id}", &f).unwrap();
        assert_eq!(text.render(&values), format!("id={hostile}"));
        let toml: toml::Value = toml::from_str(r#"doc = { id = "{id}", s = "<{id}>" }"#).unwrap();
        let json = Json::from_toml(&toml["doc"], &f).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&json.render(&values)).unwrap();
        assert_eq!(parsed["id"], hostile);
        assert_eq!(parsed["s"], format!("<{hostile}>"));
        let body = Body::Multipart {
            boundary: "b".into(),
            parts: vec![Part {
                name: "note".into(),
                filename: None,
                content_type: "text/plain".into(),
                content: PartContent::Text(Text::parse("{id}", &f).unwrap()),
            }],
        };
        let bytes = body.render(&values).concat();
        assert!(String::from_utf8_lossy(&bytes).contains(&format!("\r\n\r\n{hostile}\r\n--b--")));
        let err = Text::parse_target("{id|unsafe}", &f).unwrap_err();
        assert!(err.contains("{id|raw}"), "{err}");
    }
}
