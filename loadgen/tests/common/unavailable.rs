//! What a test does when something it needs is missing: a tool (node_exporter, Prometheus),
//! a cgroup CPU controller, a network namespace or `tc`'s tbf qdisc.
//!
//! It fails, so that a green run says the test ran — unless the test command could not provide
//! the thing: `scripts/test.sh` names what it could not install in `LOADGEN_TEST_UNAVAILABLE`
//! (comma-separated keys), and only then is the test a skip, written with its reason to the
//! file `LOADGEN_TEST_SKIPS` names, which the test command lists in its last lines.

use std::io::Write;

/// The keys `scripts/test.sh` may list in `LOADGEN_TEST_UNAVAILABLE`.
pub const KEYS: &[&str] = &["prometheus", "node_exporter", "cgroup", "netns", "tbf"];

/// Call when `key` is missing for the current test, `why` saying what failed. Returns (the
/// caller returns too) only when the test command declared `key` unavailable; panics
/// otherwise, naming how to provide it.
pub fn missing(key: &str, why: &str) {
    assert!(KEYS.contains(&key), "unknown key {key}");
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let declared = std::env::var("LOADGEN_TEST_UNAVAILABLE").unwrap_or_default();
    if !declared.split(',').any(|k| k.trim() == key) {
        panic!(
            "{test}: {why}. scripts/test.sh installs or sets it up (as root with apt-get); \
             where it cannot be had, run with LOADGEN_TEST_UNAVAILABLE={key} to skip this test"
        );
    }
    let line = format!("loadgen {test}: skipped, {key} unavailable: {why}");
    eprintln!("SKIPPED {line}");
    if let Ok(path) = std::env::var("LOADGEN_TEST_SKIPS") {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }
}
