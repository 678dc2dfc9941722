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
