//! The module map as a test: dependencies between loadgen's top-level modules point one way,
//! top to bottom, and every module has a place in the map.
//!
//! A module may use (`crate::name`) only modules of the layers below its own; one that reaches
//! up or sideways fails here with the file and line. The table is also written for people, in
//! docs/architecture.md ("loadgen") and in lib.rs's crate doc; a new module gets a row in all
//! three, and `the_docs_name_the_same_layers_in_the_same_order` holds them to each other. Submodules count for their
//! top-level module (`model/open.rs` is `model`); a parent and its children may use each other.
//! The scanning and the checks are `common/layers.rs`, shared with the servers crate's test.

#[path = "common/layers.rs"]
mod layers;

/// Top to bottom. A module uses only modules of later rows.
const LAYERS: layers::Layers = &[
    &["workflow"],                      // calibrate, sweep, capacity: several runs
    &["runner"],                        // one run, end to end
    &["config"],                        // flags and scenario → validated RunConfig
    &["cli", "scenario", "verdict"],    // clap types; scenario TOML; the verdict of a run
    &["report", "servermon", "sysmon"], // summary, run.json; the server's metrics; the client's
    &["model"],                         // client models: when which worker sends what
    &["worker"],                        // the one request loop and the pool that starts workers
    &["store", "transport"],            // Parquet segments + S3; HTTP/1.1 and HTTP/2 connections
    &["stats", "workload"],             // exact aggregates; request templates and payload fields
    &["record"],                        // the row, its schema, the Parquet-file helper
    &[
        "background",
        "clock",
        "output_guard",
        "shard",
        "stop",
        "units",
    ], // leaves
];

const MAP: layers::Map = layers::Map {
    layers: LAYERS,
    manifest_dir: env!("CARGO_MANIFEST_DIR"),
    docs_heading: "loadgen",
};

#[test]
fn every_module_has_a_place_in_the_map() {
    MAP.every_module_has_a_place();
}

#[test]
fn dependencies_point_down() {
    MAP.dependencies_point_down();
}

#[test]
fn the_docs_name_the_same_layers_in_the_same_order() {
    MAP.docs_name_the_same_layers();
}

/// The check itself: a use that points up or sideways is seen (so the test above can fail).
#[test]
fn an_upward_use_is_seen() {
    let text =
        "use crate::worker::Work;\nuse crate::{runner::run, stats};\nuse crate::report::x;\n";
    assert_eq!(
        layers::upward_in(LAYERS, "model", text, &Default::default()),
        [(2, "runner".to_string()), (3, "report".to_string())]
    );
}

/// The files of `folder` (its `mod.rs` left out: a parent may use its children) and, for each,
/// the sibling files its code names as `super::NAME` (tests left out).
fn siblings_used(folder: &str) -> Vec<(String, Vec<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(folder);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().path().file_stem()?.to_str().map(String::from))
        .filter(|name| name != "mod")
        .collect();
    names.sort();
    let uses = |name: &String| {
        let text = std::fs::read_to_string(dir.join(format!("{name}.rs"))).unwrap();
        let code = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .to_string();
        // `super::{a, b::C}` names `a` and `b` too.
        let grouped: Vec<&str> = (code.split("super::{").skip(1))
            .flat_map(|group| group.split('}').next().unwrap_or_default().split(','))
            .map(|item| item.trim().split("::").next().unwrap_or_default())
            .collect();
        let used = names.iter().filter(|other| *other != name);
        let named = |other: &&String| {
            code.contains(&format!("super::{other}::")) || grouped.contains(&other.as_str())
        };
        used.filter(named).cloned().collect()
    };
    names
        .iter()
        .map(|name| (name.clone(), uses(name)))
        .collect()
}

/// A circle among `graph`'s files, if there is one.
fn circle(graph: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    fn visit(at: &str, graph: &[(String, Vec<String>)], path: &mut Vec<String>) -> bool {
        if let Some(start) = path.iter().position(|p| p == at) {
            path.drain(..start);
            return true;
        }
        path.push(at.to_string());
        let next = graph
            .iter()
            .find(|(name, _)| name == at)
            .map(|(_, used)| used);
        if next.into_iter().flatten().any(|n| visit(n, graph, path)) {
            return true;
        }
        path.pop();
        false
    }
    graph.iter().find_map(|(name, _)| {
        let mut path = Vec::new();
        visit(name, graph, &mut path).then_some(path)
    })
}

/// Issue 57: inside `runner/` (a run's stages) and `verdict/` (findings, rules, words, the
/// judge) the files use each other one way too — two circles had come back there
/// (`drive → live_page → finish → drive`, `checks ↔ words`).
#[test]
fn the_stages_of_a_run_and_the_verdicts_layers_have_no_circle() {
    for folder in ["runner", "verdict"] {
        let graph = siblings_used(folder);
        assert!(graph.len() > 8, "{folder}: {graph:?}");
        assert_eq!(circle(&graph), None, "a circle among {folder}/'s files");
    }
    let drawn = [("a", vec!["b".to_string()]), ("b", vec!["a".to_string()])];
    let drawn: Vec<(String, Vec<String>)> =
        drawn.into_iter().map(|(n, u)| (n.to_string(), u)).collect();
    assert_eq!(circle(&drawn), Some(vec!["a".to_string(), "b".to_string()]));
}
