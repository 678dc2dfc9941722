//! The client-saturation warning. Its own test binary: the check pins loadgen to one core, and
//! no other test may share that core meanwhile.

mod common;

use std::process::Command;

use common::run_json;

/// Pinned to one core with the embedded server beside it, loadgen saturates that core and says
/// so, instead of presenting the figures as the server's.
#[test]
fn a_saturated_client_is_called_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_loadgen"),
            "run",
            "-c",
            "64",
            "-d",
            "3s",
        ])
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .expect("taskset (util-linux) runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("of 1 core"), "{stdout}");
    assert!(
        stdout.contains("saturated: these numbers describe the client"),
        "{stdout}"
    );
    assert_eq!(run_json(&out)["client"]["saturated"], true);
}
