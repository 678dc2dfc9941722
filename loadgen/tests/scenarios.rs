//! The course client models and scenario files, end to end against the reference server:
//! row counts per phase, start rules in time, retries, and validation messages.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{config, read_rows, Row};
use loadgen::stop::StopSignal;
use servers::ServerConfig;

fn write_scenario(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn run_scenario(
    server: &servers::RunningServer,
    scenario: &Path,
    extra: &[&str],
    out: &Path,
) -> loadgen::RunOutcome {
    let url = server.url();
    let mut args = vec![
        scenario.to_str().unwrap(),
        "--url",
        url.as_str(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    loadgen::run(config(&args), StopSignal::new())
        .await
        .unwrap()
}

fn by_phase(rows: &[Row]) -> BTreeMap<String, Vec<&Row>> {
    let mut phases: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for row in rows {
        phases.entry(row.phase.clone()).or_default().push(row);
    }
    phases
}

fn end(row: &Row) -> i64 {
    row.start_ns + row.latency_ns
}

const THREAD_GROUPS: &str = r#"
sequence = ["swipe", "hello"]

[fields]
who = { int = [1, 5000] }

[requests.swipe]
method = "POST"
path = "/swipe/left/"
json = { swiper = "{who|str}", swipee = "7", comment = "hi" }
expect = [201]

[requests.hello]
path = "/"

[model]
kind = "thread-groups"
startup = { workers = 2, iterations = 5 }
groups = 3
group_size = 4
delay = "300ms"
iterations = 10
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_groups_send_exact_counts_and_groups_start_delay_apart() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), THREAD_GROUPS);
    let outcome = run_scenario(&server, &scenario, &[], &dir.path().join("run")).await;

    let rows = read_rows(&dir.path().join("run"));
    // startup 2×5 + 3 groups × 4 workers × 10 iterations, × 2 requests each.
    assert_eq!(rows.len(), (2 * 5 + 3 * 4 * 10) * 2);
    assert_eq!(server.requests_total(), rows.len() as u64);
    assert!(rows.iter().all(|r| r.error.is_none()), "all succeed");
    let phases = by_phase(&rows);
    assert_eq!(phases["startup"].len(), 20);
    let workers = |phase: &str| {
        phases[phase]
            .iter()
            .map(|r| r.worker)
            .collect::<BTreeSet<_>>()
            .len()
    };
    assert_eq!(workers("startup"), 2);
    for k in 1..=3 {
        assert_eq!(phases[&format!("group-{k}")].len(), 80, "group-{k}");
        assert_eq!(workers(&format!("group-{k}")), 4);
    }
    // Each worker alternates POST and GET.
    let ops: BTreeSet<&str> = rows.iter().map(|r| r.op.as_str()).collect();
    assert_eq!(ops, BTreeSet::from(["GET /", "POST /swipe/left/"]));

    let first_start = |phase: &str| phases[phase].iter().map(|r| r.start_ns).min().unwrap();
    let startup_end = phases["startup"].iter().map(|r| end(r)).max().unwrap();
    assert!(
        first_start("group-1") >= startup_end,
        "groups start after the startup group"
    );
    // Group k is released (k-1) × delay after the groups' start, which is after the startup
    // group's last response; a first request can only be later than its release, never
    // earlier, so this lower bound holds however busy the machine is.
    for k in 2..=3 {
        let since_startup_ns = first_start(&format!("group-{k}")) - startup_end;
        assert!(
            since_startup_ns >= (k - 1) * 300_000_000,
            "group-{k} started {since_startup_ns} ns after the startup group ended"
        );
    }

    let summary = &outcome.summary;
    assert_eq!(summary.phases.len(), 4);
    let groups = summary
        .excluding_startup
        .as_ref()
        .expect("groups-only figures");
    assert_eq!(groups.requests, 240);
    assert!(groups.wall_time_ns >= 600_000_000);
    assert!(outcome.console.contains("Groups only 240 requests"));
    server.shutdown().await;
}

fn producer_buffer(total: u64, retries: u32) -> String {
    format!(
        r#"
sequence = ["steps"]

[fields]
user = {{ sequence = 1 }}

[requests.steps]
method = "POST"
path = "/stepcounter/{{user}}/1/0/1"
expect = [201]

[model]
kind = "producer-buffer"
total = {total}
buffer = 50
initial_workers = 3
requests_per_worker = 20
max_workers = 10
retries = {retries}
backoff = "1ms"
"#
    )
}

/// GET a JSON document from the server.
async fn get_json(server: &servers::RunningServer, path: &str) -> serde_json::Value {
    use http_body_util::{BodyExt, Empty};
    let stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<bytes::Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_buffer_sends_every_payload_once_and_grows_after_the_first_consumer() {
    let server = servers::start(ServerConfig {
        service_time: "1ms".parse().unwrap(),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), &producer_buffer(300, 0));
    let outcome = run_scenario(&server, &scenario, &[], &dir.path().join("run")).await;
    let rows = read_rows(&dir.path().join("run"));
    assert_eq!(rows.len(), 300);
    assert_eq!(outcome.summary.failed, 0);
    assert!(rows
        .iter()
        .all(|r| r.queue_wait_ns.is_some() && r.buffer_wait_ns.is_some() && r.attempt == 1));
    // The workers' own clocks (issue 25): 3 initial consumers, the grown ones, and in each
    // phase the time in requests is part of the time alive.
    let workers = &common::run_json(&outcome.run_dir)["summary"]["workers"];
    let phases_run: Vec<&str> = (workers["phases"].as_array().unwrap().iter())
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases_run, ["initial", "grown"], "{workers}");
    assert_eq!(workers["phases"][0]["started"], 3);
    assert_eq!(workers["phases"][0]["sent"], 60);
    for phase in workers["phases"].as_array().unwrap() {
        let (busy, alive) = (
            phase["busy_ns"].as_i64().unwrap(),
            phase["alive_ns"].as_i64().unwrap(),
        );
        assert!(0 < busy && busy <= alive, "{phase}");
    }

    // Every payload (user id 1..=300) reached the server exactly once.
    for user in [1, 2, 150, 299, 300] {
        let doc = get_json(&server, &format!("/stepcounter/single/{user}/1")).await;
        assert_eq!(doc["stepCount"], 1, "user {user}: {doc}");
    }
    let doc = get_json(&server, "/stepcounter/single/301/1").await;
    assert_eq!(doc["stepCount"], 0, "nothing beyond the total is sent");

    let phases = by_phase(&rows);
    let initial: BTreeSet<u32> = phases["initial"].iter().map(|r| r.worker).collect();
    assert_eq!(initial.len(), 3);
    assert_eq!(
        phases["initial"].len(),
        3 * 20,
        "each initial consumer sends its quota"
    );
    // The pool grows only once the first consumer has finished its quota.
    let first_finished = initial
        .iter()
        .map(|w| {
            phases["initial"]
                .iter()
                .filter(|r| r.worker == *w)
                .map(|r| end(r))
                .max()
                .unwrap()
        })
        .min()
        .unwrap();
    let grown = &phases["grown"];
    assert_eq!(grown.len(), 300 - 60);
    assert!(grown.iter().all(|r| r.start_ns >= first_finished));
    // …and never beyond max_workers at once: at most 10 workers overlap.
    let mut events: Vec<(i64, i32)> = rows
        .iter()
        .flat_map(|r| [(r.start_ns, 1), (end(r), -1)])
        .collect();
    events.sort();
    let mut active = 0;
    let peak = events
        .iter()
        .map(|(_, d)| {
            active += d;
            active
        })
        .max()
        .unwrap();
    assert!(peak <= 10, "{peak} requests in flight at once");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_buffer_retries_failures_and_counts_final_ones() {
    let server = servers::start(ServerConfig {
        error_rate: 0.3,
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), &producer_buffer(400, 2));
    let outcome = run_scenario(&server, &scenario, &[], &dir.path().join("run")).await;
    let rows = read_rows(&dir.path().join("run"));
    let first_attempts = rows.iter().filter(|r| r.attempt == 1).count();
    assert_eq!(
        first_attempts, 400,
        "each payload is taken from the buffer once"
    );
    let retries = rows.iter().filter(|r| r.attempt > 1).count() as u64;
    assert!(retries > 50, "with 30 % errors, retries happen ({retries})");
    assert!(rows.iter().all(|r| r.attempt <= 3));
    let final_failures = rows
        .iter()
        .filter(|r| r.attempt == 3 && r.error.is_some())
        .count() as u64;
    assert_eq!(outcome.summary.retries, retries);
    assert_eq!(outcome.summary.failed_final, final_failures);
    assert_eq!(rows.len() as u64, server.requests_total());
    // A retry follows the failure of the same worker's previous attempt.
    for worker in rows.iter().map(|r| r.worker).collect::<BTreeSet<_>>() {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.worker == worker).collect();
        for pair in mine.windows(2) {
            if pair[1].attempt > 1 {
                assert_eq!(pair[1].attempt, pair[0].attempt + 1);
                assert!(pair[0].error.is_some());
            }
        }
    }
    server.shutdown().await;
}

const PHASED: &str = r#"
sequence = ["hello"]

[requests.hello]
path = "/"

[model]
kind = "phased"
max_workers = 8

[[model.phases]]
name = "warmup"
workers = 0.5
requests_per_worker = 10

[[model.phases]]
name = "peak"
workers = 1.0
requests_per_worker = 5
after = "warmup"
when_done = 0.5

[[model.phases]]
name = "late"
workers = 1
requests_per_worker = 3
at = "400ms"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phased_starts_each_phase_when_its_rule_says() {
    // Service times vary so warmup workers finish at different moments.
    let server = servers::start(ServerConfig {
        service_time: "uniform:1ms..9ms".parse().unwrap(),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), PHASED);
    let outcome = run_scenario(&server, &scenario, &[], &dir.path().join("run")).await;
    let rows = read_rows(&dir.path().join("run"));
    let phases = by_phase(&rows);
    assert_eq!(phases["warmup"].len(), 4 * 10);
    assert_eq!(phases["peak"].len(), 8 * 5);
    assert_eq!(phases["late"].len(), 3);

    // peak starts once 2 of the 4 warmup workers (when_done = 0.5) have finished.
    let mut warmup_ends: Vec<i64> = phases["warmup"]
        .iter()
        .map(|r| r.worker)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|w| {
            phases["warmup"]
                .iter()
                .filter(|r| r.worker == w)
                .map(|r| end(r))
                .max()
                .unwrap()
        })
        .collect();
    warmup_ends.sort();
    let peak_start = phases["peak"].iter().map(|r| r.start_ns).min().unwrap();
    assert!(
        peak_start >= warmup_ends[1],
        "peak began before half the warmup workers finished"
    );
    assert!(
        peak_start < warmup_ends[3],
        "phases overlap: peak began before warmup ended"
    );
    // late starts at its fixed offset from the start of the run.
    let late_start = phases["late"].iter().map(|r| r.start_ns).min().unwrap();
    assert!(late_start >= 400_000_000, "late started at {late_start} ns");
    assert_eq!(
        outcome
            .summary
            .phases
            .iter()
            .map(|p| p.phase.as_str())
            .collect::<Vec<_>>(),
        ["warmup", "peak", "late"]
    );
    server.shutdown().await;
}

/// Every built-in scenario runs against the reference server, shrunk to seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_runs_end_to_end_when_shrunk() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let url = server.url();
    let cases: [(&str, &[&str], u64); 4] = [
        (
            "albums",
            &[
                "--set",
                "model.startup.iterations=3",
                "--set",
                "model.groups=2",
                "--set",
                "model.group_size=3",
                "--set",
                "model.iterations=4",
                "--set",
                "model.delay=100ms",
                "--set",
                "requests.new_album.multipart.image.bytes=25KB",
            ],
            (10 * 3 + 2 * 3 * 4) * 2,
        ),
        (
            "skiers",
            &[
                "--set",
                "model.total=500",
                "--set",
                "model.initial_workers=4",
                "--set",
                "model.requests_per_worker=50",
                "--set",
                "model.max_workers=12",
            ],
            500,
        ),
        ("twinder", &["-c", "8", "-n", "400"], 400),
        // workers 1 (8 × 10 % rounds down to 0, and a phase has at least one), 4, 8, 2;
        // 2 iterations per interval (3, 5, 11, 5 intervals) of 5 requests
        (
            "stepcounter",
            &[
                "--set",
                "model.max_workers=8",
                "--set",
                "model.iterations_per_step=2",
            ],
            (3 + 4 * 5 + 8 * 11 + 2 * 5) * 2 * 5,
        ),
    ];
    for (name, extra, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(name);
        let mut args = vec![
            "--scenario",
            name,
            "--url",
            url.as_str(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra.iter());
        let outcome = loadgen::run(config(&args), StopSignal::new())
            .await
            .unwrap();
        let rows = read_rows(&out);
        assert_eq!(rows.len() as u64, expected, "{name}");
        assert_eq!(
            outcome.summary.failed, 0,
            "{name}: {:?}",
            outcome.summary.errors
        );
        if name == "albums" {
            // 25 KB image plus the multipart framing and JSON profile.
            let post = rows.iter().find(|r| r.op == "POST /albums").unwrap();
            assert!(post.bytes_sent > 25_000, "{post:?}");
        }
    }
    server.shutdown().await;
}

fn loadgen_bin(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn invalid_scenarios_name_file_field_and_fix_with_exit_2() {
    let scenario = |sequence: &str, path: &str, model: &str| {
        format!("sequence = {sequence}\n\n[requests.hello]\npath = \"{path}\"\n\n{model}")
    };
    let groups = "[model]\nkind = \"thread-groups\"\ngroups = 3\ngroup_size = 2\ndelay = \"1s\"\niterations = 5\n";
    let phased = "[model]\nkind = \"phased\"\nmax_workers = 4\n[[model.phases]]\nname = \"a\"\nworkers = 1\nrequests_per_worker = 1\n[[model.phases]]\nname = \"b\"\nworkers = 1\nrequests_per_worker = 1\nafter = \"a\"\nwhen_done = 1.5\n";
    let one = "[\"hello\"]";
    let cases: Vec<(String, Vec<&str>)> = vec![
        // An unknown field: its line (issue 13: not its table's), the field, and the fields
        // allowed.
        (
            scenario(
                one,
                "/",
                &groups.replace("groups = 3\n", "groups = 3\ngrups = 3\n"),
            ),
            vec![":9: model.grups: unknown field `grups`, expected one of `startup`, `groups`"],
        ),
        // A wrong type.
        (
            scenario(
                one,
                "/",
                &groups.replace("groups = 3", "groups = \"three\""),
            ),
            vec!["model.groups: invalid type: string \"three\", expected u32"],
        ),
        // Zero workers.
        (
            scenario(one, "/", &groups.replace("groups = 3", "groups = 0")),
            vec!["model.groups: must be at least 1 (got 0)"],
        ),
        // A negative delay.
        (
            scenario(one, "/", &groups.replace("delay = \"1s\"", "delay = -2")),
            vec!["model.delay: -2 is not a duration"],
        ),
        // A phase fraction outside (0, 1].
        (
            scenario(one, "/", phased),
            vec!["model.phases[1].when_done: 1.5 is outside (0, 1]"],
        ),
        // An undefined template in the sequence.
        (
            scenario("[\"hello\", \"missing\"]", "/", groups),
            vec!["sequence[1]: 'missing' is not defined under [requests] (defined: hello)"],
        ),
        // An undefined field in a path.
        (
            scenario(one, "/x/{nobody}", groups),
            vec!["requests.hello.path: '{nobody}' refers to an undefined field"],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (text, needles)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("case{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let never = dir.path().join("never");
        let (code, stderr) = loadgen_bin(&[
            "run",
            file.to_str().unwrap(),
            "--out",
            never.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "case {i}: {stderr}");
        assert!(
            stderr.contains(&format!("case{i}.toml")),
            "case {i} names the file: {stderr}"
        );
        for needle in needles {
            assert!(stderr.contains(needle), "case {i} says {needle}: {stderr}");
        }
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "case {i}: one line: {stderr}"
        );
        assert!(!never.exists(), "case {i} left a run directory");
    }
}

#[test]
fn set_overrides_and_scenario_listing() {
    let (code, stderr) = loadgen_bin(&["run", "--scenario", "albums", "--set", "model.groups=0"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("built-in scenario albums: model.groups: must be at least 1"),
        "{stderr}"
    );
    let (code, stderr) = loadgen_bin(&["run", "--scenario", "nope"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("albums, albums-chained, skiers, twinder, stepcounter"),
        "{stderr}"
    );
    let (code, stderr) = loadgen_bin(&["run", "--scenario", "skiers", "-c", "5"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--set model."), "{stderr}");

    let list = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("scenarios")
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for name in ["albums", "skiers", "twinder", "stepcounter"] {
        assert!(list.lines().any(|l| l.starts_with(name)), "{list}");
    }
    let show = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["scenarios", "show", "skiers"])
        .output()
        .unwrap();
    assert!(show.status.success());
    let text = String::from_utf8_lossy(&show.stdout);
    // What `show` prints is a scenario file that runs as is.
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(dir.path(), &text);
    let (code, stderr) = loadgen_bin(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        "model.total=50",
        "--no-progress",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(read_rows(&dir.path().join("run")).len(), 50);
}

/// The scenario file shown in docs/reference/scenario.md runs as documented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_scenario_example_runs() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/reference/scenario.md"
    ))
    .unwrap();
    let start = page
        .find("A scenario file:\n\n```toml\n")
        .expect("docs/reference/scenario.md shows a scenario file");
    let block = &page[start..];
    let body = &block[block.find("```toml\n").unwrap() + 8..];
    let text = &body[..body.find("```").unwrap()];
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), text);
    let out = dir.path().join("run");
    let outcome = run_scenario(&server, &scenario, &["--set", "model.total=300"], &out).await;
    assert_eq!(read_rows(&out).len(), 300);
    assert_eq!(outcome.summary.failed, 0, "{:?}", outcome.summary.errors);
    server.shutdown().await;
}

fn compile_builtin(name: &str, sets: &[&str]) -> loadgen::scenario::Compiled {
    let text = loadgen::scenario::builtin::get(name).unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let scenario = loadgen::scenario::parse(name, text, &sets).unwrap();
    loadgen::scenario::compile_scenario(name, &scenario, "").unwrap()
}

fn phased_plan(compiled: &loadgen::scenario::Compiled) -> &loadgen::model::phased::PhasedPlan {
    match &compiled.model {
        loadgen::model::ModelPlan::Phased(plan) => plan,
        other => panic!("not phased: {}", other.plan().kind()),
    }
}

/// The course StepCounter client's printed numbers (issue 12): phase threads are max × 10,
/// 50, 100 and 25 % rounded down, 100 iterations per time interval of 5 calls each.
#[test]
fn stepcounter_plan_is_the_course_clients_for_32_64_and_128_threads() {
    use loadgen::model::phased::StartRule;
    let cases = [
        (32, [3, 16, 32, 8], 240_500),
        (64, [6, 32, 64, 16], 481_000),
        (128, [12, 64, 128, 32], 962_000),
    ];
    for (max, workers, total) in cases {
        let set = format!("model.max_workers={max}");
        let compiled = compile_builtin("stepcounter", &[&set]);
        let plan = phased_plan(&compiled);
        let got: Vec<u32> = plan.phases.iter().map(|p| p.workers).collect();
        assert_eq!(got, workers, "max {max}");
        assert_eq!(plan.total_requests(), total, "max {max}");
        let per_worker: Vec<u64> = plan.phases.iter().map(|p| p.requests_per_worker).collect();
        assert_eq!(per_worker, [3 * 500, 5 * 500, 11 * 500, 5 * 500]);
        assert_eq!(plan.sequence.len(), 5, "3 POST + GET current + GET single");
        // One phase after the other: each waits for all of the previous one's workers.
        for (i, phase) in plan.phases.iter().enumerate().skip(1) {
            assert_eq!(
                phase.start,
                StartRule::After {
                    phase: i - 1,
                    finished: workers[i - 1]
                }
            );
        }
    }
    // The overlapping variant is one --set away: the next phase starts when 10 % are done.
    let compiled = compile_builtin("stepcounter", &["model.when_done=0.1"]);
    let starts: Vec<StartRule> = phased_plan(&compiled).phases[1..]
        .iter()
        .map(|p| p.start.clone())
        .collect();
    assert_eq!(
        starts,
        [
            StartRule::After {
                phase: 0,
                finished: 1
            },
            StartRule::After {
                phase: 1,
                finished: 4
            },
            StartRule::After {
                phase: 2,
                finished: 7
            },
        ]
    );
}

/// Rounding is the scenario's choice; down is the default.
#[test]
fn phase_worker_fractions_round_as_the_scenario_says() {
    for (round, expected) in [
        ("down", [6, 32, 64, 16]),
        ("up", [7, 32, 64, 16]),
        ("nearest", [6, 32, 64, 16]),
    ] {
        let set = format!("model.round={round:?}");
        let compiled = compile_builtin("stepcounter", &[&set]);
        let got: Vec<u32> = phased_plan(&compiled)
            .phases
            .iter()
            .map(|p| p.workers)
            .collect();
        assert_eq!(got, expected, "{round}");
    }
    let compiled = compile_builtin(
        "stepcounter",
        &["model.max_workers=30", "model.round=\"nearest\""],
    );
    let got: Vec<u32> = phased_plan(&compiled)
        .phases
        .iter()
        .map(|p| p.workers)
        .collect();
    assert_eq!(got, [3, 15, 30, 8], "7.5 rounds to 8");
}

/// The stepcounter built-in at max 8 workers and `iterations` per time interval against
/// `url`, into `out`; asserts nothing failed.
async fn run_stepcounter_at_max_8(url: &str, out: &Path, iterations: u32) {
    let iterations = format!("model.iterations_per_step={iterations}");
    let args = [
        "--scenario",
        "stepcounter",
        "--url",
        url,
        "--out",
        out.to_str().unwrap(),
        "--set",
        "model.max_workers=8",
        "--set",
        iterations.as_str(),
    ];
    let outcome = loadgen::run(config(&args), StopSignal::new())
        .await
        .unwrap();
    assert_eq!(outcome.summary.failed, 0, "{:?}", outcome.summary.errors);
}

/// A reduced StepCounter run end to end: every phase's workers send their walk's requests,
/// each phase starts after the previous one's last response, nothing fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stepcounter_runs_its_phases_one_after_the_other() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    run_stepcounter_at_max_8(&url, &out, 3).await;
    let rows = read_rows(&out);
    let phases = by_phase(&rows);
    let order = ["warmup", "loading", "peak", "cooldown"];
    let workers = [1u64, 4, 8, 2];
    let intervals = [3u64, 5, 11, 5];
    for (i, name) in order.iter().enumerate() {
        let rows = &phases[*name];
        let per_iteration = workers[i] * intervals[i] * 3;
        let count = |op: &str| rows.iter().filter(|r| r.op == op).count() as u64;
        assert_eq!(
            count("POST /stepcounter/{user}/{day}/{interval}/{steps}"),
            per_iteration * 3,
            "{name}"
        );
        assert_eq!(
            count("GET /stepcounter/current/{user}"),
            per_iteration,
            "{name}"
        );
        assert_eq!(
            count("GET /stepcounter/single/{user}/{day}"),
            per_iteration,
            "{name}"
        );
        if i > 0 {
            let previous_end = phases[order[i - 1]].iter().map(|r| end(r)).max().unwrap();
            let first_start = rows.iter().map(|r| r.start_ns).min().unwrap();
            assert!(
                first_start >= previous_end,
                "{name} started before {} ended",
                order[i - 1]
            );
        }
    }
    server.shutdown().await;
}

/// `-d` caps every model (issue 12): each built-in (thread-groups, producer-buffer, phased,
/// closed) and an open scenario stop sending after the cap, far short of their plans, with
/// exit reason `duration elapsed` (the open model: `completed`, as `-d` is its schedule's
/// duration since issue 26) and the cap in run.json. The server serves at most 2 × 200
/// requests per second, so no plan below can finish within the cap on any machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_caps_every_model() {
    let server = servers::start(ServerConfig {
        service_time: "5ms".parse().unwrap(),
        workers: Some(2),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let open = write_scenario(
        dir.path(),
        "sequence = [\"hello\"]\n[requests.hello]\npath = \"/\"\n[model]\nkind = \"open\"\nrate = 100\nduration = \"60s\"\n",
    );
    let cases: [(&str, &[&str], u64); 5] = [
        ("thread-groups", &["--scenario", "albums"], 202_000),
        ("producer-buffer", &["--scenario", "skiers"], 200_000),
        ("phased", &["--scenario", "stepcounter"], 481_000),
        ("closed", &["--scenario", "twinder"], 500_000),
        ("open", &[open.to_str().unwrap()], 6_000),
    ];
    for (kind, scenario, planned) in cases {
        let out = dir.path().join(kind);
        let mut args = scenario.to_vec();
        args.extend([
            "-d",
            "1s",
            "--grace",
            "5s",
            "--url",
            url.as_str(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let outcome = loadgen::run(config(&args), StopSignal::new())
            .await
            .unwrap();
        assert_eq!(common::run_json(&outcome.run_dir)["config"]["model"], kind);
        // The open model's `-d` is its schedule's duration (issue 26): the run completes it.
        let (reason, reason_text) = match kind {
            "open" => (loadgen::stop::ExitReason::Completed, "completed"),
            _ => (
                loadgen::stop::ExitReason::DurationElapsed,
                "duration_elapsed",
            ),
        };
        assert_eq!(outcome.exit_reason, reason, "{kind}");
        assert_eq!(
            common::run_json(&outcome.run_dir)["exit_reason"],
            reason_text,
            "{kind}"
        );
        let duration = match kind {
            "open" => {
                &common::run_json(&outcome.run_dir)["config"]["definition"]["model"]["duration"]
            }
            _ => &common::run_json(&outcome.run_dir)["config"]["duration"],
        };
        assert_eq!(duration, "1s", "{kind}");
        let rows = read_rows(&out).len() as u64;
        assert!(
            rows > 0 && rows < planned / 10,
            "{kind}: {rows} of {planned}"
        );
    }
    server.shutdown().await;
}

/// An HTTP/1.1 server that answers every request (201 to a POST, 200 otherwise) and keeps
/// each request line's path, so a test sees what went on the wire rather than the rows' op
/// labels (which name the template, not the values filled in).
fn recording_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let paths = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(stream) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    let mut words = line.split_whitespace();
                    let (method, path) = (words.next().unwrap_or("").to_owned(), words.next());
                    seen.lock()
                        .unwrap()
                        .push(format!("{method} {}", path.unwrap_or("")));
                    let mut body_len = 0usize;
                    loop {
                        line.clear();
                        if !matches!(reader.read_line(&mut line), Ok(n) if n > 0) || line == "\r\n"
                        {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            if name.eq_ignore_ascii_case("content-length") {
                                body_len = value.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; body_len];
                    let _ = reader.read_exact(&mut body);
                    let status = if method == "POST" {
                        "201 Created"
                    } else {
                        "200 OK"
                    };
                    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    (url, paths)
}

/// Issue 12: each stepcounter worker walks its phase's window of time intervals, at each
/// `iterations_per_step` iterations of 3 POSTs — checked on the paths the server received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stepcounter_posts_walk_each_phases_interval_window_on_the_wire() {
    let (url, paths) = recording_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    run_stepcounter_at_max_8(&url, &out, 2).await;

    let mut posts_per_interval: BTreeMap<u32, u64> = BTreeMap::new();
    for request in paths.lock().unwrap().iter() {
        // POST /stepcounter/{user}/{day}/{interval}/{steps}
        if let Some(path) = request.strip_prefix("POST /stepcounter/") {
            let interval: u32 = path.split('/').nth(2).unwrap().parse().unwrap();
            *posts_per_interval.entry(interval).or_default() += 1;
        }
    }
    // (window, workers at max 8: 10 % → 1 at least, 50 %, 100 %, 25 %); 2 iterations × 3 POSTs.
    let mut expected = BTreeMap::new();
    for (window, workers) in [(0..=2, 1), (3..=7, 4), (8..=18, 8), (19..=23, 2)] {
        for interval in window {
            expected.insert(interval, workers * 2 * 3);
        }
    }
    assert_eq!(posts_per_interval, expected);
}
