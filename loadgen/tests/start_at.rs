//! `--start-at` and `--out` together (issue 27): a second shard given the same `--out`
//! directory was refused only after waiting for the start instant, so a misconfigured launch
//! was found a minute late (or never, by whoever had gone for coffee).

mod common;

use std::time::{Duration, Instant};

use common::loadgen_bin;

#[test]
fn regression_a_second_run_on_one_out_dir_is_refused_before_the_start_at_wait() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    let in_a_minute = (chrono::Utc::now().timestamp_millis() + 60_000).to_string();
    let args = |shard: &str| {
        let mut command = loadgen_bin();
        command
            .args([
                "run",
                "-n",
                "5",
                "--shard",
                shard,
                "--start-at",
                &in_a_minute,
            ])
            .args(["--no-progress", "--out"])
            .arg(&out);
        command
    };
    let first = args("0/2").spawn().unwrap();
    // The first claims the directory at once, then waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.join("requests").is_dir() {
        assert!(
            Instant::now() < deadline,
            "the first run never claimed --out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let second = args("1/2").output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert!(
        took < Duration::from_secs(30),
        "refused only after {took:?}"
    );

    // Stopped while waiting: nothing was run, and the directory it made is gone again.
    let status = std::process::Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = first.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{output:?}");
    assert!(!out.exists(), "the claimed directory was left behind");
}
