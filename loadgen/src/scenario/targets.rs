//! `--targets FILE`: vegeta's targets format turned into a scenario, so one flag tests many
//! URLs. A target is a `METHOD URL` line, then optional `Header: value` lines and an
//! `@path` line naming a file whose bytes are the body; blank lines separate targets and
//! `#` starts a comment line. Every URL must share one origin (scheme, host, port): a run has
//! one target, and the requests are its paths.
//!
//! This module parses and checks the file (every error names the file and the line) and
//! builds the literal request templates and the sequence an iteration sends: each target
//! once in file order (round-robin), or each as often as its `--targets-weights` weight. It
//! does not choose the model or the connection options; the quick-run path in
//! `config::flags` does, as for `--url`.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};

use super::schema::{Defaults, ModelSpec, RequestSpec, Scenario};
use super::ScenarioError;
use crate::workload::template::{Body, Text};
use crate::workload::{RequestTemplate, StatusSet};

/// The most requests one iteration may hold (the sum of the weights).
const MAX_SEQUENCE: u32 = 10_000;

/// One target of the file: where it starts, its request and its body file.
#[derive(Debug, Clone)]
struct Target {
    line: usize,
    method: Method,
    /// Path and query.
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Option<(String, Bytes)>,
}

/// What a targets file amounts to: the origin every URL shares (`http://host:port`), the
/// scenario as recorded in run.json, and its requests compiled as literals with the sequence
/// of one iteration (op indices).
#[derive(Debug)]
pub struct TargetsScenario {
    pub origin_url: String,
    pub scenario: Scenario,
    pub templates: Vec<RequestTemplate>,
    pub sequence: Vec<u16>,
}

/// Parses the targets file `name` (its `text`) into a scenario with `model`; `headers`
/// (`-H`) go to every request, under each target's own; `weights` are `--targets-weights`
/// (empty: each target once).
pub fn scenario(
    name: &str,
    text: &str,
    weights: &[u32],
    headers: &[(HeaderName, HeaderValue)],
    model: ModelSpec,
) -> Result<TargetsScenario, ScenarioError> {
    let error = |line: Option<usize>, message: String| ScenarioError {
        origin: name.to_string(),
        line,
        path: String::new(),
        message,
    };
    let (origin_url, targets) = parse(text).map_err(|(line, m)| error(Some(line), m))?;
    let sequence = sequence(targets.len(), weights).map_err(|m| error(None, m))?;
    let templates = templates(&targets, headers).map_err(|(line, m)| error(Some(line), m))?;
    let requests: BTreeMap<String, RequestSpec> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (request_name(i), recorded(t, &templates[i].label)))
        .collect();
    let scenario = Scenario {
        name: None,
        description: Some(format!("from the targets file {name}")),
        thresholds: Vec::new(),
        server_metrics: Vec::new(),
        server_saturation: None,
        target: Some(origin_url.clone()),
        defaults: Defaults::with_headers(headers),
        fields: Default::default(),
        requests,
        sequence: sequence
            .iter()
            .map(|&op| request_name(usize::from(op)))
            .collect(),
        model,
    };
    Ok(TargetsScenario {
        origin_url,
        scenario,
        templates,
        sequence,
    })
}

/// `target1`, `target2`…: the request names of the recorded scenario, in file order.
fn request_name(index: usize) -> String {
    format!("target{}", index + 1)
}

/// The origin and the targets of the file, or the line that is wrong and why.
fn parse(text: &str) -> Result<(String, Vec<Target>), (usize, String)> {
    let mut targets: Vec<Target> = Vec::new();
    let mut origin: Option<(String, usize)> = None;
    let mut in_target = false;
    // A file saved with a UTF-8 byte order mark (as some editors and tools write) starts with it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, raw) in text.lines().enumerate() {
        let (line, trimmed) = (index + 1, raw.trim());
        if trimmed.is_empty() {
            in_target = false;
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        if let Some((method, url)) = request_line(trimmed) {
            let (target_origin, target) = target(line, method, url)?;
            match &origin {
                None => origin = Some((target_origin, line)),
                Some((first, first_line)) if *first != target_origin => {
                    return Err((line, format!(
                        "{url} is on {target_origin}, but line {first_line}'s target is on {first}; \
                         one run has one origin (scheme, host and port): give each origin its own targets file"
                    )))
                }
                Some(_) => {}
            }
            targets.push(target);
            in_target = true;
            continue;
        }
        let Some(current) = targets.last_mut().filter(|_| in_target) else {
            return Err((line, format!(
                "'{trimmed}' is not a target: a target starts with METHOD URL, e.g. GET http://127.0.0.1:8080/path (its headers and @body follow it, with no blank line between)"
            )));
        };
        other_line(current, line, trimmed)?;
    }
    match origin {
        Some((origin, _)) => Ok((origin, targets)),
        None => Err((
            1,
            "the file has no targets; write one per paragraph: METHOD URL, then Header: value \
             lines and an optional @body-file line"
                .to_string(),
        )),
    }
}

/// `GET http://…`: a method token followed by an http(s) URL. A method is an HTTP token,
/// which never holds `:`, so `Referer: http://…` is a header whose value is a URL.
fn request_line(line: &str) -> Option<(&str, &str)> {
    let (method, url) = line.split_once(char::is_whitespace)?;
    if method.contains(':') {
        return None;
    }
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")).then_some((method, url))
}

/// The target a `METHOD URL` line starts, with the URL's origin.
fn target(line: usize, method: &str, url: &str) -> Result<(String, Target), (usize, String)> {
    let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| {
        (
            line,
            format!("'{method}' is not an HTTP method; use e.g. GET, POST, PUT or DELETE"),
        )
    })?;
    let uri: Uri = url
        .parse()
        .map_err(|e| (line, format!("'{url}' is not a valid URL ({e})")))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err((
            line,
            format!("'{url}' has no host; use e.g. http://127.0.0.1:8080/path"),
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    let port = authority
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    // Host names are case-insensitive: LOCALHOST and localhost are one origin.
    let origin = format!(
        "{scheme}://{}:{port}",
        authority.host().to_ascii_lowercase()
    );
    let path = uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    let target = Target {
        line,
        method,
        path,
        headers: Vec::new(),
        body: None,
    };
    Ok((origin, target))
}

/// A line under a target: `@path` (the body) or `Header: value`.
fn other_line(target: &mut Target, line: usize, text: &str) -> Result<(), (usize, String)> {
    if let Some(path) = text.strip_prefix('@') {
        if target.body.is_some() {
            return Err((
                line,
                "a second @body line for one target; give one body file".into(),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| {
            (
                line,
                format!("cannot read the body file '{path}' ({e}); paths are relative to the current directory"),
            )
        })?;
        target.body = Some((path.to_string(), Bytes::from(bytes)));
        return Ok(());
    }
    if target.body.is_some() {
        return Err((
            line,
            format!("'{text}' follows the @body line; put a target's headers before its body"),
        ));
    }
    let header = text.split_once(':').and_then(|(name, value)| {
        Some((
            HeaderName::from_bytes(name.trim().as_bytes()).ok()?,
            HeaderValue::from_str(value.trim()).ok()?,
        ))
    });
    match header {
        Some(header) => {
            target.headers.push(header);
            Ok(())
        }
        None => Err((line, format!(
            "'{text}' is neither a header (Name: value) nor a body (@file) nor a new target (METHOD URL)"
        ))),
    }
}

/// One iteration's op indices: each target once, or as often as its weight, in file order.
fn sequence(targets: usize, weights: &[u32]) -> Result<Vec<u16>, String> {
    if weights.is_empty() {
        return Ok((0..targets as u16).collect());
    }
    if weights.len() != targets {
        return Err(format!(
            "--targets-weights gives {} weights for {targets} targets; give one per target, in file order, e.g. {}",
            weights.len(),
            vec!["1"; targets].join(",")
        ));
    }
    // Summed in u64: weights near u32::MAX would wrap a u32 sum past the limit.
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if weights.contains(&0) || total > u64::from(MAX_SEQUENCE) {
        return Err(format!(
            "--targets-weights must be whole numbers of at least 1 that add up to at most {MAX_SEQUENCE}"
        ));
    }
    Ok(weights
        .iter()
        .enumerate()
        .flat_map(|(op, &w)| std::iter::repeat_n(op as u16, w as usize))
        .collect())
}

/// Each target as a literal request (its path and body are never templates); `-H` headers
/// first, so a target's own header wins. Two targets with the same method and path get `#2`…
/// on their labels, so each is its own op.
fn templates(
    targets: &[Target],
    headers: &[(HeaderName, HeaderValue)],
) -> Result<Vec<RequestTemplate>, (usize, String)> {
    if targets.len() > usize::from(u16::MAX) {
        return Err((
            1,
            format!(
                "{} targets; at most {} fit one run",
                targets.len(),
                u16::MAX
            ),
        ));
    }
    let mut seen = HashSet::new();
    targets
        .iter()
        .map(|t| {
            let mut label = format!("{} {}", t.method, t.path);
            let mut n = 1;
            while !seen.insert(label.clone()) {
                n += 1;
                label = format!("{} {} #{n}", t.method, t.path);
            }
            let all: Vec<_> = headers.iter().chain(&t.headers).cloned().collect();
            let body = match &t.body {
                Some((_, bytes)) => Body::Static(bytes.clone()),
                None => Body::Empty,
            };
            let path = Text::literal(&t.path);
            RequestTemplate::new(
                Some(label),
                t.method.clone(),
                path,
                &all,
                body,
                StatusSet::default(),
            )
            .map_err(|e| (t.line, e.to_string()))
        })
        .collect()
}

/// The target as run.json records it: the body only by its size and file.
fn recorded(target: &Target, label: &str) -> RequestSpec {
    RequestSpec {
        method: target.method.to_string(),
        path: target.path.clone(),
        label: Some(label.to_string()),
        headers: target
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("<binary>").to_string()))
            .collect(),
        body: target
            .body
            .as_ref()
            .map(|(path, bytes)| format!("<{} bytes from {path}>", bytes.len())),
        json: None,
        multipart: None,
        expect: None,
        check: Vec::new(),
        extract: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Vec<Target>, (usize, String)> {
        parse(text).map(|(_, t)| t)
    }

    #[test]
    fn targets_with_headers_and_comments_parse_in_order() {
        let text = "# two targets\nGET http://h:8080/a?x=1\nX-A: 1\nAccept: text/plain\n\n\nDELETE http://h:8080/b\n";
        let (origin, targets) = parse(text).unwrap();
        assert_eq!(origin, "http://h:8080");
        assert_eq!(targets.len(), 2);
        assert_eq!(
            (targets[0].path.as_str(), targets[0].headers.len()),
            ("/a?x=1", 2)
        );
        assert_eq!((targets[1].method.as_str(), targets[1].line), ("DELETE", 7));
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        for (text, line, needle) in [
            ("GET http://h/a\nnot a header\n", 2, "neither a header"),
            ("X-A: 1\nGET http://h/a\n", 1, "not a target"),
            ("GET http://h/a\n\nX-A: 1\n", 3, "not a target"),
            ("GET http://h/a\nGET http://other/b\n", 2, "one origin"),
            (
                "GET http://h/a\n@/nonexistent/body\n",
                2,
                "cannot read the body file",
            ),
            ("# nothing\n", 1, "no targets"),
        ] {
            let (got, message) = parsed(text).unwrap_err();
            assert_eq!(got, line, "{text:?}: {message}");
            assert!(message.contains(needle), "{text:?}: {message}");
        }
    }

    #[test]
    fn weights_repeat_each_target_in_file_order() {
        assert_eq!(sequence(3, &[]).unwrap(), vec![0, 1, 2]);
        assert_eq!(sequence(3, &[1, 2, 1]).unwrap(), vec![0, 1, 1, 2]);
        assert!(sequence(3, &[1, 2])
            .unwrap_err()
            .contains("2 weights for 3 targets"));
        assert!(sequence(2, &[1, 0]).is_err());
    }

    #[test]
    fn weights_whose_sum_wraps_a_u32_are_refused() {
        // 4294967295 + 1 wrapped to 0 in a u32 sum, passing the limit; then the sequence
        // asked for 8 GB.
        let message = sequence(2, &[u32::MAX, 1]).unwrap_err();
        assert!(message.contains("at most 10000"), "{message}");
        assert!(sequence(2, &[u32::MAX / 2 + 1, u32::MAX / 2 + 1]).is_err());
    }

    #[test]
    fn files_real_tools_write_parse() {
        // A header whose value is a URL, after a byte order mark; the host's case differs.
        let text = "\u{feff}GET http://LOCALHOST:8080/a\nReferer: http://example.com/x\n\
                    Origin: https://example.com\n\nPOST http://localhost:8080/b\n";
        let (origin, targets) = parse(text).unwrap();
        assert_eq!(origin, "http://localhost:8080");
        assert_eq!(targets.len(), 2);
        let names: Vec<_> = targets[0].headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["referer", "origin"]);
        assert_eq!(targets[0].headers[0].1, "http://example.com/x");
        assert_eq!(targets[0].method, Method::GET);
    }
}
