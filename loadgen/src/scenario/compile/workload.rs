//! The workload half of a scenario: payload fields, headers, expected statuses and request
//! templates (with multipart parts), each checked and compiled. Nothing here knows models.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::{violation, Violation};
use crate::scenario::schema::{FieldSpec, Literal, PartSpec, RequestSpec, StatusSpec};
use crate::workload::fields::{Fields, Generator, Value};
use crate::workload::template::{blob, Body, Json, Part, PartContent, Text};
use crate::workload::{RequestTemplate, StatusSet};

pub(super) fn compile_fields(
    specs: &BTreeMap<String, FieldSpec>,
    path: &str,
    base: &Fields,
) -> Result<Fields, Violation> {
    let mut fields = base.clone();
    for (name, spec) in specs {
        let here = format!("{path}.{name}");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(violation(
                here,
                "field names use letters, digits and _ only",
            ));
        }
        fields.push(name, generator(spec, &here)?);
    }
    Ok(fields)
}

pub(super) fn generator(spec: &FieldSpec, path: &str) -> Result<Generator, Violation> {
    Ok(match spec {
        FieldSpec::Int([min, max]) => {
            if min > max {
                return Err(violation(
                    format!("{path}.int"),
                    format!("[{min}, {max}] is empty; write [min, max] with min <= max"),
                ));
            }
            Generator::Int {
                min: *min,
                max: *max,
            }
        }
        FieldSpec::Choice(options) => {
            if options.is_empty() {
                return Err(violation(
                    format!("{path}.choice"),
                    "needs at least one option",
                ));
            }
            Generator::Choice(options.clone())
        }
        FieldSpec::Sequence(start) => Generator::Sequence(Arc::new(AtomicI64::new(*start))),
        FieldSpec::Literal(Literal::Int(n)) => Generator::Literal(Value::Int(*n)),
        FieldSpec::Literal(Literal::Str(s)) => Generator::Literal(Value::Str(s.clone())),
        FieldSpec::Chars(n) => Generator::Chars(*n),
    })
}

pub(super) fn compile_headers(
    headers: &BTreeMap<String, String>,
    path: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, Violation> {
    headers
        .iter()
        .map(|(name, value)| {
            let here = format!("{path}.{name}");
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| violation(&here, "is not a valid header name"))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| violation(&here, "is not a valid header value"))?;
            Ok((name, value))
        })
        .collect()
}

pub(super) fn compile_statuses(specs: &[StatusSpec], path: &str) -> Result<StatusSet, Violation> {
    let mut ranges = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let bad = || {
            violation(
                format!("{path}[{i}]"),
                "write a status code (201), a range (\"200-299\") or a class (\"2xx\")",
            )
        };
        let range = match spec {
            StatusSpec::Code(code) if (100..=599).contains(code) => *code..=*code,
            StatusSpec::Code(_) => return Err(bad()),
            StatusSpec::Range(text) => {
                let text = text.trim().to_ascii_lowercase();
                if let Some(class) = text.strip_suffix("xx") {
                    let digit: u16 = class.parse().map_err(|_| bad())?;
                    if !(1..=5).contains(&digit) {
                        return Err(bad());
                    }
                    digit * 100..=digit * 100 + 99
                } else {
                    let (lo, hi) = text.split_once('-').ok_or_else(bad)?;
                    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
                    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
                    if lo > hi {
                        return Err(bad());
                    }
                    lo..=hi
                }
            }
        };
        ranges.push(range);
    }
    if ranges.is_empty() {
        return Err(violation(path, "must list at least one status"));
    }
    Ok(StatusSet(ranges))
}

pub(super) fn compile_request(
    spec: &RequestSpec,
    path: &str,
    fields: &Fields,
    default_headers: &[(HeaderName, HeaderValue)],
    default_expect: &StatusSet,
    base_path: &str,
    rng: &mut fastrand::Rng,
) -> Result<RequestTemplate, Violation> {
    let method = Method::from_bytes(spec.method.to_ascii_uppercase().as_bytes()).map_err(|_| {
        violation(
            format!("{path}.method"),
            format!(
                "'{}' is not an HTTP method; use e.g. GET or POST",
                spec.method
            ),
        )
    })?;
    if !spec.path.starts_with('/') {
        return Err(violation(
            format!("{path}.path"),
            format!(
                "'{}' must start with '/' (it is relative to the target)",
                spec.path
            ),
        ));
    }
    let base = base_path.replace('{', "{{").replace('}', "}}");
    let url_path = Text::parse_target(&format!("{base}{}", spec.path), fields)
        .map_err(|m| violation(format!("{path}.path"), m))?;
    let bodies = [
        spec.body.is_some(),
        spec.json.is_some(),
        spec.multipart.is_some(),
    ];
    if bodies.iter().filter(|b| **b).count() > 1 {
        return Err(violation(
            path,
            "give at most one of body, json and multipart",
        ));
    }
    let body = if let Some(text) = &spec.body {
        Body::Text(Text::parse(text, fields).map_err(|m| violation(format!("{path}.body"), m))?)
    } else if let Some(json) = &spec.json {
        Body::Json(Json::from_toml(json, fields).map_err(|m| violation(format!("{path}.json"), m))?)
    } else if let Some(parts) = &spec.multipart {
        let mut compiled = Vec::new();
        for (name, part) in parts {
            compiled.push(compile_part(
                name,
                part,
                &format!("{path}.multipart.{name}"),
                fields,
                rng,
            )?);
        }
        if compiled.is_empty() {
            return Err(violation(
                format!("{path}.multipart"),
                "needs at least one part",
            ));
        }
        Body::Multipart {
            boundary: format!("loadgen-{:016x}", rng.u64(..)),
            parts: compiled,
        }
    } else {
        Body::Empty
    };
    let mut headers = default_headers.to_vec();
    headers.extend(compile_headers(&spec.headers, &format!("{path}.headers"))?);
    let expect = match &spec.expect {
        Some(specs) => compile_statuses(specs, &format!("{path}.expect"))?,
        None => default_expect.clone(),
    };
    RequestTemplate::new(spec.label.clone(), method, url_path, &headers, body, expect)
        .map_err(|e| violation(format!("{path}.path"), e.to_string()))
}

/// Makes every op label unique: the `op` column, the console and Prometheus series are keyed
/// by it, and two series with one label are dropped by Prometheus. Labels derived from method
/// and path that collide get the request's name (`GET /albums/1 (again)`); a collision that
/// involves a `label` the user wrote is refused, naming both requests.
pub(super) fn unique_labels(
    op_names: &[&str],
    scenario: &crate::scenario::schema::Scenario,
    templates: &mut [RequestTemplate],
) -> Result<(), Violation> {
    let derived: Vec<bool> = op_names
        .iter()
        .map(|name| scenario.requests[*name].label.is_none())
        .collect();
    fn clashes(templates: &[RequestTemplate], i: usize) -> impl Iterator<Item = usize> + '_ {
        (0..templates.len()).filter(move |&j| j != i && templates[j].label == templates[i].label)
    }
    let renamed: Vec<Option<String>> = (0..templates.len())
        .map(|i| {
            let mut others = clashes(templates, i).peekable();
            let all_derived = derived[i] && clashes(templates, i).all(|j| derived[j]);
            (others.peek().is_some() && all_derived)
                .then(|| format!("{} ({})", templates[i].label, op_names[i]))
        })
        .collect();
    for (template, label) in templates.iter_mut().zip(renamed) {
        if let Some(label) = label {
            template.label = label;
        }
    }
    for i in 0..templates.len() {
        if let Some(j) = clashes(templates, i).next() {
            let (a, b) = (op_names[i.min(j)], op_names[i.max(j)]);
            return Err(violation(
                format!("requests.{b}.label"),
                format!(
                    "'{}' is also the label of requests.{a}; op labels name the rows, the \
                     console lines and the Prometheus series, so give each request its own label",
                    templates[i].label
                ),
            ));
        }
    }
    Ok(())
}

/// The largest generated multipart part (`bytes = …`); see [`compile_part`].
const MAX_GENERATED_PART_BYTES: usize = 1 << 30;

fn compile_part(
    name: &str,
    spec: &PartSpec,
    path: &str,
    fields: &Fields,
    rng: &mut fastrand::Rng,
) -> Result<Part, Violation> {
    let given = [
        spec.json.is_some(),
        spec.text.is_some(),
        spec.bytes.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(violation(path, "give exactly one of json, text and bytes"));
    }
    let (content, default_type) = if let Some(json) = &spec.json {
        let json =
            Json::from_toml(json, fields).map_err(|m| violation(format!("{path}.json"), m))?;
        (PartContent::Json(json), "application/json")
    } else if let Some(text) = &spec.text {
        let text = Text::parse(text, fields).map_err(|m| violation(format!("{path}.text"), m))?;
        (PartContent::Text(text), "text/plain")
    } else {
        let size = spec.bytes.map_or(0, |b| b.0);
        if size > MAX_GENERATED_PART_BYTES {
            return Err(violation(
                format!("{path}.bytes"),
                format!(
                    "{size} bytes is more than loadgen generates for one part (1GiB): the \
                     part is held in memory, and every request in flight renders its body \
                     around it; use at most \"1GiB\""
                ),
            ));
        }
        (
            PartContent::Blob(blob(size, rng)),
            "application/octet-stream",
        )
    };
    Ok(Part {
        name: name.to_string(),
        filename: spec.filename.clone(),
        content_type: spec
            .content_type
            .clone()
            .unwrap_or_else(|| default_type.to_string()),
        content,
    })
}
