//! The module map as a test: dependencies between the servers crate's top-level modules point
//! one way, top to bottom, and every module has a place in the map.
//!
//! The same checks as loadgen's (`loadgen/tests/architecture.rs`; the scanning and the checks
//! are shared from there): a module may use (`crate::name`, re-exports included) only modules
//! of the layers below its own. The table is also written in docs/architecture.md ("servers")
//! and in lib.rs's crate doc, and `the_docs_name_the_same_layers_in_the_same_order` holds them
//! to it.

#[path = "../../loadgen/tests/common/layers.rs"]
mod layers;

/// Top to bottom. A module uses only modules of later rows.
const LAYERS: layers::Layers = &[
    &["server"],               // listener, connections, the knobs around every API request
    &["api", "config"],        // the course APIs; ServerConfig and its validation
    &["body", "state", "tls"], // body shapes on the wire; what handlers share; PEM → rustls
    &["error", "metrics"],     // ConfigError; counters and /metrics
    &[
        "delay",
        "fault",
        "rate_limit",
        "reply",
        "router",
        "service_time",
    ], // leaves
];

const MAP: layers::Map = layers::Map {
    layers: LAYERS,
    manifest_dir: env!("CARGO_MANIFEST_DIR"),
    docs_heading: "servers",
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
