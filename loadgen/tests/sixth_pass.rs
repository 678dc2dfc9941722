//! Regression tests of issue 58's findings beside the probe's (`probe_rules.rs`): credentials
//! in a URL, `--dashboard-out` on a run's own files and on a spread run, the live page's
//! accept loop and `Host` check, `--out` that is a file, `--dashboard` given a URL or an
//! exposed address, and gRPC mistakes in a scenario — each against a real server, or refused
//! before anything runs.

mod common;
#[allow(dead_code)]
mod counting;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{loadgen_bin, loadgen_under_sh, read_rows, run_json};
use counting::{After, Counting};

/// Runs `loadgen ARGS --no-progress`.
fn loadgen(args: &[&str]) -> std::process::Output {
    loadgen_bin()
        .arg(args[0])
        .arg("--no-progress")
        .args(&args[1..])
        .output()
        .unwrap()
}

/// A user name and password in the URL go out as Basic auth (never in `Host`), a `-H
/// Authorization` wins over them, and neither they nor a query's `api_key` are shown: not on
/// the console, in run.json, in the op labels of the rows nor on the saved page.
#[test]
fn a_password_in_the_url_is_basic_auth_and_never_shown() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let dir = tempfile::tempdir().unwrap();
    let (out, page) = (dir.path().join("run"), dir.path().join("page.html"));
    let url = format!("http://user:PASSWD1@{}/p?api_key=K3Y1&x=1", server.addr);
    let output = loadgen(&[
        "run",
        "--url",
        &url,
        "-c",
        "1",
        "-n",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--dashboard-out",
        page.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    for seen in server.seen() {
        assert_eq!(seen.host.as_deref(), Some(&*server.addr.to_string()));
        // base64("user:PASSWD1")
        assert_eq!(
            seen.authorization.as_deref(),
            Some("Basic dXNlcjpQQVNTV0Qx")
        );
        assert_eq!(
            seen.target, "/p?api_key=K3Y1&x=1",
            "the query is sent as given"
        );
    }
    let shown = [
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        std::fs::read_to_string(out.join("run.json")).unwrap(),
        std::fs::read_to_string(&page).unwrap(),
        format!(
            "{:?}",
            read_rows(&out).iter().map(|r| &r.op).collect::<Vec<_>>()
        ),
    ];
    for text in &shown {
        assert!(
            !text.contains("PASSWD1") && !text.contains("K3Y1"),
            "{text}"
        );
    }
    let config_url = run_json(&out)["config"]["url"].clone();
    assert_eq!(
        config_url,
        format!("http://<redacted>@{}/p?api_key=<redacted>&x=1", server.addr)
    );

    let given = loadgen(&[
        "run",
        "--url",
        &url,
        "-c",
        "1",
        "-n",
        "1",
        "-H",
        "Authorization: Bearer T",
        "--out",
        dir.path().join("given").to_str().unwrap(),
    ]);
    assert!(given.status.success(), "{given:?}");
    let last = server.seen().pop().unwrap();
    assert_eq!(last.authorization.as_deref(), Some("Bearer T"));
}

/// A redirect to another origin (`--follow-redirects=any`) does not carry the credentials on:
/// the URL's Basic auth reached the first server only (found in this issue's own pass).
#[test]
fn credentials_are_not_sent_on_to_another_origin() {
    let landing = Counting::start(usize::MAX, After::Unavailable);
    let first = Counting::start(0, After::Redirect(landing.url("/landing")));
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://user:PASSWD1@{}/p", first.addr);
    let output = loadgen(&[
        "run",
        "--url",
        &url,
        "-c",
        "1",
        "-n",
        "2",
        "--follow-redirects=any",
        "--no-probe",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(first.count(), 2);
    assert!(first.seen().iter().all(|s| s.authorization.is_some()));
    assert_eq!(landing.count(), 2);
    assert!(
        landing.seen().iter().all(|s| s.authorization.is_none()),
        "{:?}",
        landing.seen()
    );
}

/// `--dashboard-out` naming a file of the run (`run.json`, in `--out`) is refused before the
/// run, as `--junit` is; so is one that cannot be written. Nothing is written, nothing sent.
#[test]
fn a_dashboard_out_on_the_runs_own_files_or_unwritable_is_refused() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dq4");
    let url = server.url("/");
    let refused = |page: &std::path::Path, why: &str| {
        let output = loadgen(&[
            "run",
            "--url",
            &url,
            "-c",
            "2",
            "-n",
            "5",
            "--out",
            out.to_str().unwrap(),
            "--dashboard-out",
            page.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!out.exists());
    };
    refused(&out.join("run.json"), "is inside the run directory");
    refused(&out, "is the run directory");
    refused(
        &dir.path().join("no-such-folder/page.html"),
        "cannot be written",
    );
    refused(dir.path(), "it is a directory");
    assert_eq!(server.count(), 0);
}

/// A spread run's processes would each save their own shard's page to one file: refused,
/// as `--dashboard` is, before anything is sent.
#[test]
fn a_dashboard_out_is_refused_when_the_run_is_spread() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    let url = server.url("/");
    let output = loadgen_under_sh("ulimit -n 1700")
        .args(["run", "--url", &url, "-c", "3000", "-d", "1s"])
        .args(["--dashboard-out", page.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--dashboard-out belongs to one process"),
        "{stderr}"
    );
    assert_eq!(server.count(), 0);
    assert!(!page.exists());
}

/// Starts `loadgen ARGS` (under `sh -c SETUP`) and returns it with its dashboard's address.
fn spawn_with_dashboard(setup: &str, args: &[&str]) -> (Child, String) {
    use std::io::BufRead;
    let mut child = loadgen_under_sh(setup)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no dashboard URL");
        if let Some(url) = line.trim().strip_prefix("dashboard at http://") {
            break url.trim_end_matches('/').to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

/// `GET /` with `host`: the status line.
fn status_of_page(addr: &str, host: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head).into_owned()
}

/// The page on loopback answers a `Host` that is an IP address or localhost, and 421 to any
/// other name (DNS rebinding). Flooded with more connections than the process may hold files,
/// it keeps them waiting rather than taking the files the run needs: the run ends as planned
/// (before, its next segment could not be opened and the run stopped, exit 1), and the page
/// answers once the flood is gone.
#[test]
fn the_live_page_checks_host_and_leaves_the_runs_files_alone() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let url = server.url("/");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (child, addr) = spawn_with_dashboard(
        "ulimit -n 80",
        &[
            "run",
            "--no-progress",
            "--url",
            &url,
            "-c",
            "1",
            "-d",
            "2s",
            "--dashboard",
            "--dashboard-linger",
            "2s",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let port = addr.rsplit_once(':').unwrap().1;
    assert_eq!(status_of_page(&addr, &addr), "HTTP/1.1 200");
    assert_eq!(
        status_of_page(&addr, &format!("localhost:{port}")),
        "HTTP/1.1 200"
    );
    assert_eq!(
        status_of_page(&addr, &format!("evil.example:{port}")),
        "HTTP/1.1 421"
    );
    // More connections than the process has spare files (80 in all, the run needs 65).
    let socket: std::net::SocketAddr = addr.parse().unwrap();
    let held: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect_timeout(&socket, Duration::from_millis(500)).ok())
        .collect();
    assert!(held.len() >= 50, "{}", held.len());
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    assert_eq!(status_of_page(&addr, &addr), "HTTP/1.1 200");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(run_json(&out)["exit_reason"], "duration_elapsed");
}

/// `--out` naming a file or a link to nothing says so, rather than "not empty".
#[test]
fn an_out_that_is_a_file_or_a_dangling_link_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    let server = Counting::start(usize::MAX, After::Unavailable);
    let url = server.url("/");
    for (out, what) in [
        (&file, "is a file"),
        (&link, "is a symbolic link to nothing"),
    ] {
        let output = loadgen(&[
            "run",
            "--url",
            &url,
            "-n",
            "2",
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(what), "{stderr}");
        assert!(!stderr.contains("not empty"), "{stderr}");
    }
}

/// `--dashboard URL` is the target written after the flag: said so; an address other than
/// loopback is served with a note of who can read it.
#[test]
fn dashboard_addresses_a_url_is_not_and_an_exposed_one_is_said() {
    let output = loadgen(&["run", "--dashboard", "http://127.0.0.1:9/x"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is a URL, and --dashboard takes an address"),
        "{stderr}"
    );

    let server = Counting::start(usize::MAX, After::Unavailable);
    let url = server.url("/");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen(&[
        "run",
        "--url",
        &url,
        "-n",
        "2",
        "--dashboard",
        "0.0.0.0:0",
        "--dashboard-linger",
        "1ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: the dashboard listens on 0.0.0.0, not on loopback"),
        "{stderr}"
    );
}

/// A `.proto` with a unary and a server-streaming method, and a scenario calling `path` with
/// `json`, in `dir`; returns the `loadgen run` arguments (nothing needs to answer: every case
/// is refused before the run, or read from the config).
fn grpc_scenario(dir: &std::path::Path, path: &str, json: &str, method: &str) -> Vec<String> {
    let proto = dir.join("echo.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\"; package t; \
         message Req { string name = 1; int32 n = 2; } \
         message Rep { string text = 1; } \
         service Echo { rpc Say (Req) returns (Rep); rpc Many (Req) returns (stream Rep); }",
    )
    .unwrap();
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        format!(
            "target = \"http://127.0.0.1:9\"\nsequence = [\"call\"]\n\
             [fields]\nn = {{ int = [1, 9] }}\n\
             [requests.call]\n{method}path = \"{path}\"\njson = {json}\n\
             [model]\nkind = \"closed\"\nworkers = 1\nrequests = 1\n"
        ),
    )
    .unwrap();
    ["run", scenario.to_str().unwrap()]
        .into_iter()
        .chain(["--proto", proto.to_str().unwrap()])
        .map(String::from)
        .collect()
}

/// A scenario's gRPC mistakes are one sentence and exit 2 before the run: an unknown field,
/// an int where the message has a string, a path that is no method of the file, a streaming
/// method; a call's op label says POST, which it is.
#[test]
fn grpc_mistakes_in_a_scenario_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "/t.Echo/Say",
            "{ nmae = \"x\" }",
            "is not a t.Req message in JSON",
        ),
        (
            "/t.Echo/Say",
            "{ name = \"{n}\" }",
            "is not a t.Req message in JSON",
        ),
        (
            "/t.Echo/Sya",
            "{ name = \"x\" }",
            "t.Echo/Sya is not a method of",
        ),
        ("/t.Echo/Many", "{ name = \"x\" }", "is a streaming method"),
    ];
    for (path, json, why) in cases {
        let args = grpc_scenario(dir.path(), path, json, "");
        let output = loadgen_bin().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{path} {json}: {stderr}");
        assert!(stderr.contains(why), "{path} {json}: {stderr}");
        assert!(stderr.contains("request 'call'"), "{stderr}");
    }
    let args = grpc_scenario(dir.path(), "/t.Echo/Say", "{ name = \"{n|str}\" }", "");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let config = common::config(&args[1..]);
    let call = &config.workload.templates[0];
    assert_eq!(call.label, "POST /t.Echo/Say");
    assert_eq!(call.method, hyper::Method::POST);
}

/// The hint for a `.proto` whose imports are not found names the flag that exists.
#[test]
fn a_proto_that_does_not_compile_names_import_path() {
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("bad.proto");
    std::fs::write(&proto, "syntax = \"proto3\"; import \"missing.proto\";").unwrap();
    let output = loadgen(&[
        "run",
        "--url",
        "http://127.0.0.1:9/",
        "--proto",
        proto.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--import-path DIR"), "{stderr}");
    assert!(!stderr.contains("--proto-path"), "{stderr}");
}
