//! Response rules: each request's `check` list and `extract` table, compiled into the op's
//! [`Rules`] with run-wide ids (the `check` column's dictionary), and the rules a chain must
//! follow — an extracted name is not also a generated field, and a request only uses a value
//! that a request before it in the sequence extracts.

use std::collections::BTreeMap;

use hyper::header::HeaderName;
use regex::bytes::Regex;

use super::{violation, Violation};
use crate::scenario::schema::{CheckSpec, RequestSpec};
use crate::workload::check::{Check, Extract, Predicate, Rules, Source, Subject};
use crate::workload::fields::{Fields, Generator};
use crate::workload::RequestTemplate;

/// The run's check names; a name's index is its id. The same name used twice is one id.
#[derive(Debug, Default)]
pub(super) struct CheckNames(Vec<String>);

impl CheckNames {
    fn id(&mut self, name: &str, path: &str) -> Result<u16, Violation> {
        let index = match self.0.iter().position(|n| n == name) {
            Some(index) => index,
            None => {
                self.0.push(name.to_string());
                self.0.len() - 1
            }
        };
        u16::try_from(index).map_err(|_| violation(path, "more than 65535 checks in one run"))
    }

    pub(super) fn into_names(self) -> Vec<String> {
        self.0
    }
}

/// Declares every name the scenario's requests extract as a field the worker's session fills,
/// so `{album_id}` in a template resolves; a name that is also a generated field is refused.
pub(super) fn declare_extracted(
    requests: &BTreeMap<String, RequestSpec>,
    fields: &mut Fields,
) -> Result<(), Violation> {
    for (request, spec) in requests {
        for name in spec.extract.keys() {
            let here = format!("requests.{request}.extract.{name}");
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(violation(here, "names use letters, digits and _ only"));
            }
            if fields.index(name).is_some() && !fields.is_extracted(fields.index(name).unwrap()) {
                return Err(violation(
                    here,
                    format!(
                        "'{name}' is also declared under [fields]; a value is either generated \
                         or extracted: rename one of them"
                    ),
                ));
            }
            fields.push(name, Generator::Extracted);
        }
    }
    Ok(())
}

/// A request's checks and extractions.
pub(super) fn compile_rules(
    spec: &RequestSpec,
    path: &str,
    fields: &Fields,
    names: &mut CheckNames,
) -> Result<Rules, Violation> {
    let mut rules = Rules::default();
    for (i, check) in spec.check.iter().enumerate() {
        let here = format!("{path}.check[{i}]");
        let (default_name, subject, predicate) = compile_check(check, &here)?;
        let name = check.name.clone().unwrap_or(default_name);
        let id = names.id(&name, &here)?;
        rules.checks.push(Check {
            name,
            id,
            subject,
            predicate,
        });
    }
    for (key, source) in &spec.extract {
        let here = format!("{path}.extract.{key}");
        let name = format!("extract {key}");
        let id = names.id(&name, &here)?;
        rules.extracts.push(Extract {
            name,
            id,
            field: fields.index(key).expect("declared by declare_extracted"),
            source: compile_source(source, &here)?,
        });
    }
    Ok(rules)
}

/// A check's default name (the check as written), subject and predicate.
fn compile_check(spec: &CheckSpec, path: &str) -> Result<(String, Subject, Predicate), Violation> {
    let sized = spec.min_body_bytes.is_some() || spec.max_body_bytes.is_some();
    let subjects = [
        spec.header.is_some(),
        spec.json.is_some(),
        spec.body_matches.is_some(),
        sized,
    ];
    if subjects.iter().filter(|s| **s).count() != 1 {
        return Err(violation(
            path,
            "give exactly one of header, json, body_matches, or min_body_bytes/max_body_bytes",
        ));
    }
    if let Some(pattern) = &spec.body_matches {
        no_operator(spec, path, "body_matches")?;
        let regex = regex(pattern, &format!("{path}.body_matches"))?;
        return Ok((
            format!("body ~ {pattern:?}"),
            Subject::Body,
            Predicate::Matches(regex),
        ));
    }
    if sized {
        no_operator(spec, path, "min_body_bytes/max_body_bytes")?;
        let (min_bytes, max_bytes) = (spec.min_body_bytes, spec.max_body_bytes);
        if let (Some(min), Some(max)) = (min_bytes, max_bytes) {
            if min > max {
                return Err(violation(
                    path,
                    format!("min_body_bytes {min} is above max_body_bytes {max}"),
                ));
            }
        }
        let name = match (min_bytes, max_bytes) {
            (Some(min), Some(max)) => format!("body {min}..{max} bytes"),
            (Some(min), None) => format!("body >= {min} bytes"),
            (None, max) => format!("body <= {} bytes", max.unwrap_or(0)),
        };
        return Ok((
            name,
            Subject::BodyBytes,
            Predicate::Within {
                min_bytes,
                max_bytes,
            },
        ));
    }
    let (subject, written) = match (&spec.header, &spec.json) {
        (Some(header), _) => (
            Subject::Header(header_name(header, &format!("{path}.header"))?),
            format!("header {header}"),
        ),
        (_, Some(pointer)) => (
            Subject::Json(json_pointer(pointer, &format!("{path}.json"))?),
            format!("json {pointer}"),
        ),
        _ => unreachable!("one subject, checked above"),
    };
    let (name, predicate) = match (&spec.equals, &spec.matches) {
        (Some(_), Some(_)) => return Err(violation(path, "give equals or matches, not both")),
        (Some(value), None) => {
            let text = scalar_text(value).ok_or_else(|| {
                violation(
                    format!("{path}.equals"),
                    "compare with a string, a number or a boolean",
                )
            })?;
            (format!("{written} == {text:?}"), Predicate::Equals(text))
        }
        (None, Some(pattern)) => {
            let regex = regex(pattern, &format!("{path}.matches"))?;
            (
                format!("{written} ~ {pattern:?}"),
                Predicate::Matches(regex),
            )
        }
        (None, None) => (format!("{written} present"), Predicate::Present),
    };
    Ok((name, subject, predicate))
}

fn no_operator(spec: &CheckSpec, path: &str, subject: &str) -> Result<(), Violation> {
    if spec.equals.is_some() || spec.matches.is_some() {
        return Err(violation(
            path,
            format!("equals and matches go with header or json, not with {subject}"),
        ));
    }
    Ok(())
}

/// `"/albumID"`, `{ json = "/albumID" }`, `{ header = "location" }` or `{ regex = "…" }`.
fn compile_source(value: &toml::Value, path: &str) -> Result<Source, Violation> {
    const FORMS: &str = "write a JSON Pointer (\"/albumID\"), { header = \"location\" } or { regex = \"id=(\\\\d+)\" }";
    if let toml::Value::String(pointer) = value {
        return Ok(Source::Json(json_pointer(pointer, path)?));
    }
    let Some(table) = value.as_table().filter(|t| t.len() == 1) else {
        return Err(violation(path, FORMS));
    };
    let (kind, text) = table.iter().next().expect("one entry");
    let here = format!("{path}.{kind}");
    let Some(text) = text.as_str() else {
        return Err(violation(here, FORMS));
    };
    match kind.as_str() {
        "json" => Ok(Source::Json(json_pointer(text, &here)?)),
        "header" => Ok(Source::Header(header_name(text, &here)?)),
        "regex" => Ok(Source::Regex(regex(text, &here)?)),
        _ => Err(violation(here, FORMS)),
    }
}

fn json_pointer(pointer: &str, path: &str) -> Result<String, Violation> {
    if !pointer.starts_with('/') {
        return Err(violation(
            path,
            format!("'{pointer}' is not a JSON Pointer; write it from the root, e.g. \"/albumID\" or \"/items/0/id\""),
        ));
    }
    Ok(pointer.to_string())
}

fn header_name(name: &str, path: &str) -> Result<HeaderName, Violation> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| violation(path, format!("'{name}' is not a valid header name")))
}

fn regex(pattern: &str, path: &str) -> Result<Regex, Violation> {
    Regex::new(pattern).map_err(|e| {
        let reason = e.to_string();
        let last = reason.lines().last().unwrap_or("").trim().to_string();
        violation(path, format!("'{pattern}' is not a valid regex ({last})"))
    })
}

fn scalar_text(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Every extracted value a request uses is extracted by a request before it in the sequence
/// (so each iteration extracts it before it is needed).
pub(super) fn check_chain(
    op_names: &[&str],
    sequence: &[u16],
    templates: &[RequestTemplate],
    fields: &Fields,
) -> Result<(), Violation> {
    let mut extracted: Vec<usize> = Vec::new();
    for (position, &op) in sequence.iter().enumerate() {
        let template = &templates[usize::from(op)];
        if let Some(&missing) = template
            .session_fields
            .iter()
            .find(|f| !extracted.contains(f))
        {
            let name = &fields.names()[missing];
            let extractors: Vec<&str> = op_names
                .iter()
                .zip(templates)
                .filter(|(_, t)| t.rules.extracts.iter().any(|e| e.field == missing))
                .map(|(n, _)| *n)
                .collect();
            let fix = if extractors.is_empty() {
                "no request in the sequence extracts it — add the request that does".to_string()
            } else {
                format!(
                    "it is extracted by {} — put that request before it in the sequence",
                    extractors.join(", ")
                )
            };
            return Err(violation(
                format!("sequence[{position}]"),
                format!("'{}' uses {{{name}}}, but {fix}", op_names[usize::from(op)]),
            ));
        }
        extracted.extend(template.rules.extracts.iter().map(|e| e.field));
    }
    Ok(())
}
