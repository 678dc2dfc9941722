//! The module map as a test: dependencies between the servers crate's top-level modules point
//! one way, top to bottom, and every module has a place in the map.
//!
//! The same check as loadgen's (`loadgen/tests/architecture.rs`; the scanning is shared from
//! there): a module may use (`crate::name`, re-exports included) only modules of the layers
//! below its own. The table is also written in docs/architecture.md ("servers") and in
//! lib.rs's crate doc, and the last test holds them to it.

use std::path::{Path, PathBuf};

#[path = "../../loadgen/tests/common/layers.rs"]
mod layers;

/// Top to bottom. A module uses only modules of later rows.
const LAYERS: layers::Layers = &[
    &["server"],               // listener, connections, the knobs around every API request
    &["api", "config"],        // the course APIs; ServerConfig and its validation
    &["body", "state", "tls"], // body shapes on the wire; what handlers share; PEM → rustls
    &["error", "metrics"],     // ConfigError; counters and /metrics
    &["delay", "fault", "reply", "router", "service_time"], // leaves
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_has_a_place_in_the_map() {
    let wrong = layers::misplaced(LAYERS, &src());
    assert!(
        wrong.is_empty(),
        "tests/architecture.rs LAYERS and src/ disagree (a new module gets a row here, in \
         docs/architecture.md and in lib.rs's map):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn dependencies_point_down() {
    let wrong = layers::upward_uses(LAYERS, &src());
    assert!(
        wrong.is_empty(),
        "dependencies must point down the module map (tests/architecture.rs LAYERS):\n{}",
        wrong.join("\n")
    );
}

/// The table is written for people twice more; both must say what `LAYERS` says.
#[test]
fn the_docs_name_the_same_layers_in_the_same_order() {
    let lib_rs = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert_eq!(
        layers::doc_layers(&lib_rs),
        layers::owned(LAYERS),
        "src/lib.rs's map of layers (left) differs from LAYERS (right)"
    );
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let docs = std::fs::read_to_string(docs).unwrap();
    assert_eq!(
        layers::markdown_layers(&docs, "servers"),
        layers::owned(LAYERS),
        "docs/architecture.md's servers table (left) differs from LAYERS (right)"
    );
}

/// The circle this test was written after: `api` used `server::Shared` while `server` used
/// `api`. Both that and a use through a re-export (`crate::RunningServer`) are seen.
#[test]
fn the_old_server_api_circle_is_seen() {
    let reexports = layers::reexports("pub use server::{start, RunningServer};\n");
    let text =
        "use crate::server::Shared;\nuse crate::state::AppState;\nuse crate::RunningServer;\n";
    assert_eq!(
        layers::upward_in(LAYERS, "api", text, &reexports),
        [(1, "server".to_string()), (3, "server".to_string())]
    );
    let sideways = "use crate::config::ServerConfig;\n";
    assert_eq!(
        layers::upward_in(LAYERS, "api", sideways, &reexports),
        [(1, "config".to_string())]
    );
}
