//! The file contract (`contract/files.json`, at the repository root) as the Rust tests read
//! it: every file loadgen writes is held to it here, and by `analysis/tests/test_contract.py`
//! on the Python side, so a column renamed in one language fails the other's tests.
//!
//! Parquet files are checked through their footer (the Arrow schema and the `loadgen.*`
//! key-value metadata); JSON files field by field, with the contract's rule that an object
//! is closed — every key it may have is listed — as soon as any of its keys is listed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;

use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

/// The contract file, compiled into the tests.
pub const FILES_JSON: &str = include_str!("../../../contract/files.json");

/// One file's entry (`requests`, `client_metrics`, `run_json`, `sweep_json`).
pub fn file(name: &str) -> Value {
    let contract: Value = serde_json::from_str(FILES_JSON).expect("contract/files.json is JSON");
    contract["files"][name].clone()
}

/// The contract's spelling of an Arrow type.
pub fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Int64 => "int64".into(),
        DataType::Int32 => "int32".into(),
        DataType::UInt8 => "uint8".into(),
        DataType::UInt16 => "uint16".into(),
        DataType::UInt32 => "uint32".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Utf8 => "utf8".into(),
        DataType::Boolean => "bool".into(),
        DataType::Dictionary(key, value) => {
            format!("dictionary<{}, {}>", type_name(key), type_name(value))
        }
        DataType::List(item) => format!("list<{}>", type_name(item.data_type())),
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect();
            format!("struct<{}>", fields.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// Problems between an Arrow schema and the contract's columns of `name` (empty: none).
pub fn schema_problems(name: &str, schema: &Schema) -> Vec<String> {
    let spec = file(name);
    let columns = spec["columns"].as_array().expect("columns");
    let mut problems = Vec::new();
    let expected: Vec<&str> = columns
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let actual: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if expected != actual {
        problems.push(format!(
            "{name}: columns {actual:?}, the contract says {expected:?}"
        ));
    }
    for column in columns {
        let column_name = column["name"].as_str().unwrap();
        let Ok(field) = schema.field_with_name(column_name) else {
            continue;
        };
        let want = column["type"].as_str().unwrap();
        let got = type_name(field.data_type());
        if got != want {
            problems.push(format!("{name}.{column_name}: type {got}, contract {want}"));
        }
        if field.is_nullable() != column["nullable"].as_bool().unwrap() {
            problems.push(format!(
                "{name}.{column_name}: nullable {}, contract {}",
                field.is_nullable(),
                column["nullable"]
            ));
        }
    }
    problems
}

/// Problems between a Parquet file's footer (schema and `loadgen.*` metadata) and the
/// contract's entry `name`.
pub fn parquet_problems(name: &str, path: &Path) -> Vec<String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let mut problems = schema_problems(name, builder.schema());
    let kv: BTreeMap<String, String> = super::metadata(path).into_iter().collect();
    let spec = file(name);
    let keys = spec["metadata"].as_array().expect("metadata");
    let listed: BTreeSet<&str> = keys.iter().map(|k| k["key"].as_str().unwrap()).collect();
    for key in keys {
        let key_name = key["key"].as_str().unwrap();
        if key["required"].as_bool().unwrap() && !kv.contains_key(key_name) {
            problems.push(format!("{name}: metadata {key_name} missing"));
        }
    }
    for key in kv.keys().filter(|k| k.starts_with("loadgen.")) {
        if !listed.contains(key.as_str()) {
            problems.push(format!("{name}: metadata {key} is not in the contract"));
        }
    }
    let version = spec["schema_version"].as_str().unwrap();
    if kv.get("loadgen.schema_version").map(String::as_str) != Some(version) {
        problems.push(format!(
            "{name}: loadgen.schema_version {:?}, contract {version}",
            kv.get("loadgen.schema_version")
        ));
    }
    problems
}

/// Problems between a JSON document and the contract's entry `name` (`run_json`, `sweep_json`).
pub fn json_problems(name: &str, document: &Value) -> Vec<String> {
    let spec = file(name);
    let fields: BTreeMap<String, Value> = spec["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f.clone()))
        .collect();
    let mut problems = Vec::new();
    walk(&fields, "", document, &mut problems);
    problems
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn type_matches(want: &str, value: &Value) -> bool {
    match want {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => false,
    }
}

/// Checks `value` found at `path` (`""`: the document; `a[]`: an element of array `a`).
fn walk(fields: &BTreeMap<String, Value>, path: &str, value: &Value, problems: &mut Vec<String>) {
    let implicit = path.is_empty() || path.ends_with("[]");
    if !implicit {
        let spec = &fields[path];
        if value.is_null() {
            if !spec["nullable"].as_bool().unwrap() {
                problems.push(format!(
                    "{path} is null, the contract says it is not nullable"
                ));
            }
            return;
        }
        let want = spec["type"].as_str().unwrap();
        if !type_matches(want, value) {
            problems.push(format!("{path} is {value}, the contract says {want}"));
            return;
        }
    }
    match value {
        Value::Object(map) => {
            let prefix = child(path, "");
            let children: Vec<&String> = fields
                .keys()
                .filter(|p| {
                    p.strip_prefix(prefix.as_str())
                        .is_some_and(|rest| !rest.is_empty() && !rest.contains(['.', '[']))
                })
                .collect();
            if children.is_empty() {
                return; // an open map
            }
            for key in map.keys() {
                if !fields.contains_key(&child(path, key)) {
                    problems.push(format!("{} is not in the contract", child(path, key)));
                }
            }
            for p in children {
                let key = &p[prefix.len()..];
                match map.get(key) {
                    Some(v) => walk(fields, p, v, problems),
                    None if fields[p]["optional"].as_bool().unwrap() => {}
                    None => problems.push(format!("{p} is missing")),
                }
            }
        }
        Value::Array(items) => {
            let element = format!("{path}[]");
            for item in items {
                walk(fields, &element, item, problems);
            }
        }
        _ => {}
    }
}

/// Asserts a run directory's files (segments, client-metrics.parquet, run.json) and, when
/// given, a sweep.json match the contract.
pub fn assert_run_dir(run_dir: &Path) {
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(run_dir.join("requests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "parquet") {
            problems.extend(parquet_problems("requests", &path));
        }
    }
    problems.extend(parquet_problems(
        "client_metrics",
        &run_dir.join("client-metrics.parquet"),
    ));
    let server_metrics = run_dir.join("server-metrics.parquet");
    if server_metrics.exists() {
        problems.extend(parquet_problems("server_metrics", &server_metrics));
    }
    problems.extend(json_problems(
        "run_json",
        &read_json(&run_dir.join("run.json")),
    ));
    assert!(
        problems.is_empty(),
        "{}:\n{}",
        run_dir.display(),
        problems.join("\n")
    );
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The contract's type and nullability of a test-side Rust type: `Option<T>` is nullable,
/// `String` a dictionary column, `Text` a plain utf8 one.
pub fn rust_type(rust: &str) -> (String, bool) {
    let rust = rust.replace(' ', "");
    let (inner, nullable) = match rust
        .strip_prefix("Option<")
        .and_then(|r| r.strip_suffix('>'))
    {
        Some(inner) => (inner.to_string(), true),
        None => (rust, false),
    };
    let name = match inner.as_str() {
        "i64" => "int64",
        "u8" => "uint8",
        "u16" => "uint16",
        "u32" => "uint32",
        "u64" => "uint64",
        "String" => "dictionary<int32, utf8>",
        "Text" => "utf8",
        other => panic!("no contract type for {other}"),
    };
    (name.to_string(), nullable)
}

/// The docs section (docs/reference/files.md) generated from the contract's entry `name`: the file's path, schema
/// version and meaning, a table of its columns and one of its metadata keys.
pub fn markdown(name: &str) -> String {
    let spec = file(name);
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut out = format!(
        "`{}`, schema version {} (`loadgen.schema_version`). {}\n\n\
         | column | type | unit | meaning |\n|---|---|---|---|\n",
        text(&spec["path"]),
        text(&spec["schema_version"]),
        text(&spec["meaning"])
    );
    for column in spec["columns"].as_array().expect("columns") {
        let nullable = if column["nullable"].as_bool().unwrap() {
            ", nullable"
        } else {
            ""
        };
        out += &format!(
            "| `{}` | `{}`{nullable} | {} | {} |\n",
            text(&column["name"]),
            text(&column["type"]),
            text(&column["unit"]),
            text(&column["meaning"]).replace('|', "\\|")
        );
    }
    out += "\n| metadata key | required | meaning |\n|---|---|---|\n";
    for key in spec["metadata"].as_array().expect("metadata") {
        let required = if key["required"].as_bool().unwrap() {
            "yes"
        } else {
            "no"
        };
        out += &format!(
            "| `{}` | {required} | {} |\n",
            text(&key["key"]),
            text(&key["meaning"]).replace('|', "\\|")
        );
    }
    out
}

/// `document` with the text between `<!-- generated from contract/files.json: NAME -->` and
/// the next `<!-- end -->` replaced by `generated`.
pub fn replace_generated(document: &str, name: &str, generated: &str) -> String {
    let start = format!("<!-- generated from contract/files.json: {name} -->\n");
    let at = document
        .find(&start)
        .unwrap_or_else(|| panic!("no `{}` marker", start.trim_end()))
        + start.len();
    let end = at
        + document[at..]
            .find("<!-- end -->")
            .unwrap_or_else(|| panic!("no `<!-- end -->` after the {name} marker"));
    format!("{}{generated}{}", &document[..at], &document[end..])
}
