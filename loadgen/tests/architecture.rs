//! The module map as a test: dependencies between loadgen's top-level modules point one way,
//! top to bottom, and every module has a place in the map.
//!
//! A module may use (`crate::name`) only modules of the layers below its own; one that reaches
//! up or sideways fails here with the file and line. The table is the README's module map
//! ("Development"); a new module gets a row there and a place here. Submodules count for their
//! top-level module (`model/open.rs` is `model`); a parent and its children may use each other.

use std::collections::BTreeMap;
use std::path::Path;

/// Top to bottom. A module uses only modules of later rows.
const LAYERS: &[&[&str]] = &[
    &["workflow"],                                      // calibrate and sweep: several runs
    &["runner"],                                        // one run, end to end
    &["config"],                                        // flags and scenario → validated RunConfig
    &["cli", "scenario"],    // clap types; scenario TOML → workload + model plan
    &["report", "sysmon"],   // summary, console, run.json; client CPU/memory/network
    &["model"],              // client models: when which worker sends what
    &["worker"],             // the one request loop and the pool that starts workers
    &["store", "transport"], // Parquet segments + S3; HTTP/1.1 and HTTP/2 connections
    &["stats", "workload"],  // exact aggregates; request templates and payload fields
    &["record"],             // the row, its schema, the Parquet-file helper
    &["background", "clock", "shard", "stop", "units"], // leaves
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// `(file, line number, used module)` for every `crate::name` outside comments.
fn uses(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            for name in first_segments(rest) {
                found.push((number + 1, name));
            }
        }
    }
    found
}

/// The module names a path after `crate::` starts with: `model::Limit` → `model`;
/// `{model::Limit, stop}` → `model`, `stop` (nested groups belong to their parent).
fn first_segments(path: &str) -> Vec<String> {
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let Some(group) = path.strip_prefix('{') else {
        return vec![ident(path)]
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect();
    };
    let (mut names, mut depth, mut start) = (Vec::new(), 0, true);
    for (i, c) in group.char_indices() {
        if start && depth == 0 {
            names.push(ident(&group[i..]));
            start = false;
        }
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            _ => {}
        }
    }
    names.into_iter().filter(|n| !n.is_empty()).collect()
}

/// Every source file of the library, by top-level module.
fn modules() -> BTreeMap<String, Vec<std::path::PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<String, Vec<_>> = BTreeMap::new();
    let mut pending = vec![src.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap();
            let first = relative.components().next().unwrap().as_os_str();
            let top = first.to_string_lossy().trim_end_matches(".rs").to_string();
            if top != "lib" && top != "main" {
                modules.entry(top).or_default().push(path);
            }
        }
    }
    modules
}

#[test]
fn every_module_has_a_place_in_the_map() {
    let missing: Vec<String> = modules()
        .into_keys()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "modules not in tests/architecture.rs LAYERS (and the README's module map): {missing:?}"
    );
    for layer in LAYERS {
        for module in *layer {
            assert!(
                modules().contains_key(*module),
                "LAYERS names '{module}', which is not a module of src/ any more"
            );
        }
    }
}

#[test]
fn dependencies_point_down() {
    let mut wrong = Vec::new();
    for (module, files) in modules() {
        let Some(own) = layer_of(&module) else {
            continue; // reported by every_module_has_a_place_in_the_map
        };
        for file in files {
            for (line, used) in uses(&file) {
                if used == module {
                    continue;
                }
                match layer_of(&used) {
                    Some(theirs) if theirs > own => {}
                    Some(_) => wrong.push(format!(
                        "{}:{line}: {module} uses {used}, which is not below it",
                        file.display()
                    )),
                    None => {} // not a module (e.g. a macro path); the other test names modules
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies must point down the module map (tests/architecture.rs LAYERS):\n{}",
        wrong.join("\n")
    );
}

/// The check itself: a use that points up is found (so the test above can fail).
#[test]
fn an_upward_use_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.rs");
    std::fs::write(
        &file,
        "// crate::runner in a comment is not a use\nuse crate::runner::run; // crate::cli\nlet a = crate::model::Limit::Requests(1);\nuse crate::{stop::{A, b}, clock};\n",
    )
    .unwrap();
    assert_eq!(
        uses(&file),
        [(2, "runner"), (3, "model"), (4, "stop"), (4, "clock")]
            .map(|(line, name)| (line, name.to_string()))
    );
    assert!(layer_of("runner") < layer_of("model"));
}
