//! Scenarios: TOML files (or built-ins) that describe a whole experiment — target, defaults,
//! payload generators, request templates, the per-iteration sequence and the client model.
//!
//! This module loads a scenario's text, applies `--set key.path=value` overrides, parses it
//! ([`schema`]) and validates it ([`compile`](mod@compile)). Every error names the scenario,
//! the field path and, where the parser knows it, the line. It knows nothing of running.

pub mod builtin;
pub mod compile;
pub mod schema;
pub mod targets;

pub use compile::{compile, Compiled};
pub use schema::Scenario;

/// A scenario that could not be loaded: which one, where in it, and what is allowed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{origin}{}: {}{message}", line.map(|l| format!(":{l}")).unwrap_or_default(), if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct ScenarioError {
    /// The file name, or `built-in scenario NAME`.
    pub origin: String,
    pub line: Option<usize>,
    pub path: String,
    pub message: String,
}

/// Parses `text` (from `origin`) and applies `sets` (`key.path=value`).
pub fn parse(origin: &str, text: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let error = |line: Option<usize>, path: String, message: String| ScenarioError {
        origin: origin.to_string(),
        line,
        path,
        message,
    };
    if sets.is_empty() {
        // Straight from the text, so errors carry line numbers.
        let deserializer = toml::Deserializer::parse(text)
            .map_err(|e| error(line_of(text, &e), String::new(), e.message().to_string()))?;
        return serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let (path, message) = nest(&clean_path(&path), inner.message());
            let line = model_field_line(text, &path, &message).or_else(|| line_of(text, &inner));
            error(line, path, message)
        });
    }
    let mut table: toml::Table = toml::from_str(text).map_err(|e: toml::de::Error| {
        error(line_of(text, &e), String::new(), e.message().to_string())
    })?;
    // A new model kind first: it starts a new model section, which the other sets then fill.
    let (kinds, others): (Vec<&String>, Vec<&String>) =
        sets.iter().partition(|set| is_kind_set(set));
    for set in kinds.into_iter().chain(others) {
        apply_set(&mut table, set).map_err(|m| error(None, String::new(), m))?;
    }
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let path = e.path().to_string();
        let (path, message) = nest(&clean_path(&path), e.into_inner().message());
        error(None, path, message)
    })
}

/// Validates a parsed scenario; request paths are relative to `base_path`.
pub fn compile_scenario(
    origin: &str,
    scenario: &Scenario,
    base_path: &str,
) -> Result<Compiled, ScenarioError> {
    compile(scenario, base_path).map_err(|v| ScenarioError {
        origin: origin.to_string(),
        line: None,
        path: v.path,
        message: v.message,
    })
}

/// Joins a field path that a nested deserializer put at the front of its message
/// (`groups: invalid type…`) onto the outer path (`model`), giving `model.groups`.
fn nest(path: &str, message: &str) -> (String, String) {
    if let Some((inner, rest)) = message.split_once(": ") {
        let is_path = !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'));
        if is_path && !path.is_empty() {
            return (format!("{path}.{inner}"), rest.to_string());
        }
    }
    (path.to_string(), message.to_string())
}

/// `.` is what serde_path_to_error prints for the root.
fn clean_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.to_string()
    }
}

fn line_of(text: &str, error: &toml::de::Error) -> Option<usize> {
    let span = error.span()?;
    Some(text[..span.start.min(text.len())].matches('\n').count() + 1)
}

/// The line of the `[model]` field an error is about. The model is read as a whole before its
/// fields (see `ModelSpec`'s deserializer), so the parser can only point at the `[model]`
/// header; this finds the field's own line (`model.workers`, an unknown field, `kind`).
fn model_field_line(text: &str, path: &str, message: &str) -> Option<usize> {
    let key = match path.strip_prefix("model.") {
        Some(rest) => rest.split(['.', '[']).next()?,
        None if path == "model" => match message.strip_prefix("unknown field `") {
            Some(rest) => rest.split('`').next()?,
            None if message.starts_with("kind") => "kind",
            None => return None,
        },
        None => return None,
    };
    let mut in_model = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            in_model = line.trim_matches(['[', ']']).trim() == "model";
        } else if in_model && line.split('=').next().map(str::trim) == Some(key) {
            return Some(i + 1);
        }
    }
    None
}

/// `--set model.kind=…`.
fn is_kind_set(set: &str) -> bool {
    set.split_once('=').is_some_and(|(path, _)| {
        let keys: Vec<&str> = path.split('.').map(str::trim).collect();
        keys == ["model", "kind"]
    })
}

/// Applies one `--set key.path=value`. `model.kind` set to another kind replaces the model
/// section (the old kind's fields mean nothing to the new one): `--set model.kind=open`
/// then takes the open model's fields, from more `--set`s or from the model flags. The value is read as TOML (`30`, `"2s"`, `[1, 2]`,
/// `true`); anything that does not parse as TOML is taken as a string.
pub fn apply_set(table: &mut toml::Table, set: &str) -> Result<(), String> {
    let (path, raw) = set.split_once('=').ok_or_else(|| {
        format!("--set '{set}' needs the form key.path=value, e.g. --set model.groups=30")
    })?;
    let keys: Vec<&str> = path.trim().split('.').map(str::trim).collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!(
            "--set '{set}': '{path}' is not a key path like model.groups"
        ));
    }
    let value = set_value(set, raw.trim())?;
    if keys == ["model", "kind"] && table.get("model").and_then(|m| m.get("kind")) != Some(&value) {
        table.insert("model".to_string(), toml::Value::Table(toml::Table::new()));
    }
    let (last, parents) = keys.split_last().expect("at least one key");
    let mut current = table;
    for key in parents {
        let entry = current
            .entry(key.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = entry.as_table_mut().ok_or_else(|| {
            format!("--set '{set}': '{key}' is a value, not a table, so it has no field to set")
        })?;
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// A `--set` value: TOML, or a bare word taken as a string (`2s`, `closed`). Text that starts
/// like a TOML array, table or string but does not parse is a mistake, not a string.
fn set_value(set: &str, raw: &str) -> Result<toml::Value, String> {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut table) => Ok(table.remove("v").expect("parsed v")),
        Err(e) if raw.starts_with(['[', '{', '"', '\'']) => Err(format!(
            "--set '{set}': '{raw}' is not valid TOML ({}); write e.g. [1, 2], {{ a = 1 }} or \"text\"",
            e.message().trim()
        )),
        Err(_) => Ok(toml::Value::String(raw.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_reads_toml_values_and_falls_back_to_strings() {
        let mut t: toml::Table = toml::from_str("[model]\ngroups = 3").unwrap();
        apply_set(&mut t, "model.groups=30").unwrap();
        apply_set(&mut t, "model.delay=2s").unwrap();
        apply_set(&mut t, "fields.x.int=[1, 5]").unwrap();
        assert_eq!(t["model"]["groups"].as_integer(), Some(30));
        assert_eq!(t["model"]["delay"].as_str(), Some("2s"));
        assert_eq!(t["fields"]["x"]["int"].as_array().unwrap().len(), 2);
        assert!(apply_set(&mut t, "model.groups.x=1")
            .unwrap_err()
            .contains("not a table"));
        assert!(apply_set(&mut t, "nothing")
            .unwrap_err()
            .contains("key.path=value"));
    }
}
