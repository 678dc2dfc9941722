//! The flag matrix: every model-related flag × {no scenario, each model kind}, through the
//! real binary against a reference server on 127.0.0.1:0. Each flag is either applied —
//! visible in run.json — or refused with exit code 2, one sentence naming the flag, and
//! nothing written. No flag is silently ignored (issue 26).
//!
//! Runs are tiny (300 ms, or a handful of requests) and the seven kinds run side by side, so
//! the whole matrix takes a few seconds.

mod common;

use std::path::Path;

use common::{loadgen_bin, run_json, ServerOnRuntime};
use serde_json::Value;
use servers::ServerConfig;

/// The model kinds a scenario can have, and a tiny `[model]` of each; `None` is a quick run.
const KINDS: [(&str, Option<&str>); 7] = [
    ("none", None),
    ("closed", Some("kind = \"closed\"\nworkers = 2\nrequests = 10")),
    ("open", Some("kind = \"open\"\nrate = 20\nduration = \"300ms\"")),
    (
        "thread-groups",
        Some("kind = \"thread-groups\"\ngroups = 2\ngroup_size = 1\ndelay = \"50ms\"\niterations = 2"),
    ),
    (
        "producer-buffer",
        Some("kind = \"producer-buffer\"\ntotal = 10\ninitial_workers = 1\nrequests_per_worker = 5\nmax_workers = 2"),
    ),
    (
        "phased",
        Some("kind = \"phased\"\nmax_workers = 2\nphases = [{ name = \"p\", workers = 1.0, requests_per_worker = 4 }]"),
    ),
    (
        "ramp",
        Some("kind = \"ramp\"\nstages = [{ duration = \"300ms\", workers = 2 }]"),
    ),
];

/// Each flag under test, as given.
const FLAGS: [(&str, &[&str]); 13] = [
    ("--rate", &["--rate", "20", "-d", "300ms"]),
    ("--stages", &["--stages", "300ms:20"]),
    ("--arrivals", &["--arrivals", "poisson"]),
    ("--max-in-flight", &["--max-in-flight", "3"]),
    ("--max-lateness", &["--max-lateness", "50ms"]),
    ("--send-window", &["--send-window", "1ms"]),
    ("-c", &["-c", "3"]),
    ("-d", &["-d", "300ms"]),
    ("-n", &["-n", "5"]),
    ("--think-time", &["--think-time", "10ms"]),
    ("--warmup", &["--warmup", "100ms"]),
    ("--ramp", &["--ramp", "300ms:2"]),
    (
        "--streams-per-connection",
        &["--http2", "--streams-per-connection", "2"],
    ),
];

/// What a flag does to a kind: applied (checked on run.json) or refused.
enum Expect {
    Applied(fn(&Value) -> Result<(), String>),
    Refused,
}

fn expect(flag: &str, kind: &str) -> Expect {
    use Expect::{Applied, Refused};
    let open = kind == "open";
    let closed_like = matches!(kind, "none" | "closed");
    match flag {
        "--rate" => Applied(|doc| is(doc, "/config/definition/model/rate", 20.0)),
        "--stages" => Applied(|doc| is(doc, "/config/definition/model/stages/0/rate", 20.0)),
        "--arrivals" if open => {
            Applied(|doc| is(doc, "/config/definition/model/arrivals", "poisson"))
        }
        "--max-in-flight" if open => {
            Applied(|doc| is(doc, "/config/definition/model/max_in_flight", 3))
        }
        "--max-lateness" if open => {
            Applied(|doc| is(doc, "/config/definition/model/max_lateness", "50ms"))
        }
        "--send-window" if open => {
            Applied(|doc| is(doc, "/config/definition/model/send_window", "1ms"))
        }
        "--arrivals" | "--max-in-flight" | "--max-lateness" | "--send-window" => Refused,
        "-c" if closed_like => Applied(|doc| is(doc, "/config/definition/model/workers", 3)),
        "-c" => Refused,
        "-d" if closed_like || open => {
            Applied(|doc| is(doc, "/config/definition/model/duration", "300ms"))
        }
        "-d" => Applied(|doc| is(doc, "/config/duration", "300ms")),
        // A quick run's sequence is one request; the scenarios' is two, so -n 5 is six.
        "-n" if kind == "none" => Applied(|doc| is(doc, "/summary/requests", 5)),
        "-n" if kind == "closed" => Applied(|doc| {
            is(doc, "/config/definition/model/requests", 6)?;
            is(doc, "/summary/requests", 6)?;
            has_note(doc, "rounded up to 6 requests")
        }),
        "-n" if kind == "producer-buffer" => Applied(|doc| {
            is(doc, "/config/definition/model/total", 5)?;
            is(doc, "/summary/requests", 5)
        }),
        "-n" if open => Refused,
        "-n" => Applied(|doc| {
            is(doc, "/config/request_cap", 6)?;
            is(doc, "/summary/requests", 6)
        }),
        "--think-time" if open => Refused,
        "--think-time" => Applied(|doc| is(doc, "/config/think_time", "10ms")),
        "--warmup" if closed_like || open => {
            Applied(|doc| is(doc, "/config/definition/model/warmup", "100ms"))
        }
        "--warmup" => Refused,
        "--ramp" if closed_like || kind == "ramp" => Applied(|doc| {
            is(doc, "/config/definition/model/kind", "ramp")?;
            is(doc, "/config/definition/model/stages/0/workers", 2)
        }),
        "--ramp" => Refused,
        "--streams-per-connection" => Applied(|doc| {
            is(doc, "/config/streams_per_connection", 2)?;
            is(doc, "/config/protocol", "HTTP/2")
        }),
        other => panic!("no expectation for {other}"),
    }
}

fn is(doc: &Value, pointer: &str, want: impl Into<Value>) -> Result<(), String> {
    let want = want.into();
    let got = doc.pointer(pointer).cloned().unwrap_or(Value::Null);
    let same = match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => got == want,
    };
    if same {
        Ok(())
    } else {
        Err(format!("{pointer} is {got}, expected {want}"))
    }
}

fn has_note(doc: &Value, needle: &str) -> Result<(), String> {
    let notes = doc["config"]["notes"].to_string();
    if notes.contains(needle) {
        Ok(())
    } else {
        Err(format!("config.notes {notes} do not say '{needle}'"))
    }
}

/// The scenario file of `model`: two requests per iteration, so whole iterations show.
fn scenario_file(dir: &Path, kind: &str, model: &str) -> String {
    let path = dir.join(format!("{kind}.toml"));
    let text = format!(
        "sequence = [\"a\", \"b\"]\n\
         [requests.a]\npath = \"/\"\nlabel = \"a\"\n\
         [requests.b]\npath = \"/\"\nlabel = \"b\"\n\
         [model]\n{model}\n"
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Runs one cell; `Err` says what went wrong.
fn cell(
    url: &str,
    dir: &Path,
    kind: &str,
    scenario: Option<&str>,
    flag: &str,
) -> Result<(), String> {
    let given = FLAGS.iter().find(|(name, _)| *name == flag).unwrap().1;
    let out = dir.join(format!("{kind}{flag}"));
    let mut command = loadgen_bin();
    command
        .arg("run")
        .args(scenario)
        .args(["--url", url, "--no-progress"]);
    command.args(given).arg("--out").arg(&out);
    // A quick run lasts 10 s unless told otherwise: shorten it where the flag leaves room.
    let shortened = ["-d", "-n", "--stages", "--ramp"]
        .iter()
        .all(|f| !given.contains(f));
    if scenario.is_none() && shortened {
        command.args(["-d", "300ms"]);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output.status.code();
    match expect(flag, kind) {
        Expect::Refused => {
            let error: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
            if code != Some(2) || error.len() != 1 || !error[0].contains(flag) {
                return Err(format!(
                    "expected a refusal naming {flag}, got {code:?}: {stderr}"
                ));
            }
            if out.exists() {
                return Err("a refused run left a directory behind".into());
            }
            Ok(())
        }
        Expect::Applied(check) => {
            if code != Some(0) {
                return Err(format!("expected a run, got {code:?}: {stderr}"));
            }
            check(&run_json(&out))
        }
    }
}

#[test]
fn every_model_flag_is_applied_or_refused_under_every_model() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let url = server.url("/");
    let dir = tempfile::tempdir().unwrap();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = KINDS
            .iter()
            .map(|&(kind, model)| {
                let (url, dir) = (&url, dir.path());
                scope.spawn(move || {
                    let scenario = model.map(|m| scenario_file(dir, kind, m));
                    FLAGS
                        .iter()
                        .filter_map(|(flag, _)| {
                            cell(url, dir, kind, scenario.as_deref(), flag)
                                .err()
                                .map(|e| format!("{flag} × {kind}: {e}"))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The rules that hold whatever the scenario: `-c`, `-n` and `--think-time` with a rate.
#[test]
fn closed_model_flags_with_a_rate_are_refused() {
    for (args, flag) in [
        (&["--rate", "10", "-c", "5"][..], "-c"),
        (&["--rate", "10", "--think-time", "1s"], "--think-time"),
        (&["--stages", "1s:10", "-c", "2"], "-c"),
        (&["--scenario", "twinder", "--rate", "10", "-c", "2"], "-c"),
    ] {
        let output = loadgen_bin().arg("run").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        let named = stderr.contains("--rate") || stderr.contains("--stages");
        assert!(stderr.contains(flag) && named, "{args:?}: {stderr}");
    }
}

/// `--set model.kind=K` starts a new model section for every kind, which its own `--set`s
/// (or the model flags) fill: a course workload runs under any model without editing it.
#[test]
fn set_model_kind_works_for_every_kind() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 5] = [
        ("closed", &["-c", "2", "-n", "6"]),
        ("open", &["--rate", "20", "-d", "300ms"]),
        (
            "thread-groups",
            &[
                "--set",
                "model.groups=1",
                "--set",
                "model.group_size=2",
                "--set",
                "model.delay=0s",
                "--set",
                "model.iterations=2",
            ],
        ),
        (
            "producer-buffer",
            &[
                "--set",
                "model.total=6",
                "--set",
                "model.initial_workers=1",
                "--set",
                "model.requests_per_worker=3",
                "--set",
                "model.max_workers=2",
            ],
        ),
        (
            "phased",
            &[
                "--set",
                "model.max_workers=2",
                "--set",
                "model.phases=[{ name = \"p\", workers = 2, requests_per_worker = 2 }]",
            ],
        ),
    ];
    for (kind, flags) in cases {
        let out = dir.path().join(kind);
        let output = loadgen_bin()
            .args([
                "run",
                "--scenario",
                "albums",
                "--url",
                &server.url(""),
                "--no-progress",
            ])
            .args(["--set", &format!("model.kind={kind}")])
            .args(flags)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{kind}: {stderr}");
        let doc = run_json(&out);
        assert_eq!(doc["config"]["model"], kind, "{kind}");
        assert!(doc["summary"]["requests"].as_u64().unwrap() > 0, "{kind}");
    }
}

/// A sweep's levels follow the run's rules: `--rate-levels` runs a closed scenario's requests
/// under the open model at each rate (and says so), `--levels` on a thread-groups scenario is
/// refused with the hint, like `-c`.
#[test]
fn sweep_levels_follow_the_model_rules() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = loadgen_bin()
        .args([
            "sweep",
            "--scenario",
            "twinder",
            "--url",
            &server.url(""),
            "--no-progress",
        ])
        .args(["--rate-levels", "20,40", "-d", "300ms", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    for (level, rate) in [("rate-20", 20.0), ("rate-40", 40.0)] {
        let doc = run_json(&out.join(level));
        assert_eq!(doc["config"]["model"], "open", "{level}");
        assert_eq!(
            doc["config"]["definition"]["model"]["rate"], rate,
            "{level}"
        );
        has_note(&doc, "instead of its closed model").unwrap();
        // 300 ms at the rate: nothing like the closed model's thousands per second.
        let requests = doc["summary"]["requests"].as_f64().unwrap();
        assert!((requests - rate * 0.3).abs() <= 1.0, "{level}: {requests}");
    }
    let output = loadgen_bin()
        .args([
            "sweep",
            "--scenario",
            "albums",
            "--levels",
            "1,2",
            "--url",
            &server.url(""),
        ])
        .arg("--out")
        .arg(dir.path().join("refused"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--levels") && stderr.contains("--set model.kind=closed"),
        "{stderr}"
    );
}

/// A schedule that sends nothing is refused before the run, not a run of no rows exiting 0.
#[test]
fn a_schedule_that_sends_nothing_is_refused() {
    let output = loadgen_bin()
        .args(["run", "--rate", "0.001", "-d", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sends no request") && stderr.contains("--rate"),
        "{stderr}"
    );
}

/// Issue 26: `requests = 2001` over POST-then-GET stopped workers between the two (1,002
/// POSTs, 998 GETs), leaving orphans. `-n` now counts whole iterations, rounded up, and the
/// console says so.
#[test]
fn a_request_count_never_splits_an_iteration() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "pair", "kind = \"closed\"\nworkers = 7");
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args([
            "run",
            &scenario,
            "--url",
            &server.url(""),
            "--no-progress",
            "-n",
            "2001",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("-n 2001 is rounded up to 2002 requests: 1001 whole iterations"),
        "{stdout}"
    );
    let rows = common::read_rows(&out);
    let count = |op: &str| rows.iter().filter(|r| r.op == op).count();
    assert_eq!((count("a"), count("b")), (1001, 1001));
}

/// Issue 26: a run where every request failed showed only `failed (http_status 34562)`; the
/// status codes are on the console and in run.json.
#[test]
fn failures_are_shown_by_status_code() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args([
            "run",
            "--url",
            &server.url("/no/such/path"),
            "-c",
            "2",
            "-n",
            "20",
        ])
        .args(["--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("20 failed (http_status 20: 404 × 20)"),
        "{stdout}"
    );
    assert_eq!(run_json(&out)["summary"]["failed_statuses"]["404"], 20);
}

/// `-n` as a cap is split over shards by whole iterations: together they send the cap.
#[test]
fn a_request_cap_is_shared_by_the_shards() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let model =
        "kind = \"thread-groups\"\ngroups = 2\ngroup_size = 2\ndelay = \"0s\"\niterations = 100";
    let scenario = scenario_file(dir.path(), "groups", model);
    let mut total = 0;
    for shard in ["0/2", "1/2"] {
        let out = dir.path().join(shard.replace('/', "-"));
        let output = loadgen_bin()
            .args(["run", &scenario, "--url", &server.url(""), "--no-progress"])
            .args(["-n", "101", "--shard", shard, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{shard}");
        total += run_json(&out)["summary"]["requests"].as_u64().unwrap();
    }
    assert_eq!(
        total, 102,
        "51 whole iterations of 2 requests over both shards"
    );
}
