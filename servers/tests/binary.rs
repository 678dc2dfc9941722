//! The `loadgen-server` binary as scripts use it: start with `--port 0`, read the address
//! from the "listening on" line, send a request, stop it with SIGTERM; and bad flags exit 2.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn server_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loadgen-server"))
}

/// Kills the child if a test fails half-way, so no server outlives the test run.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the first stdout line, giving up after a while instead of hanging the test run.
fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the server printed its address")
}

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn prints_its_address_serves_and_stops_on_sigterm() {
    let child = server_command()
        .args(["--port", "0", "--threads", "1", "--service-time", "exp:1ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let line = first_line(&mut server.0);
    let url = line
        .trim_end()
        .strip_prefix("loadgen-server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let addr = url.strip_prefix("http://127.0.0.1:").map(|port| {
        assert!(port.parse::<u16>().unwrap() > 0);
        format!("127.0.0.1:{port}")
    });
    let addr = addr.unwrap_or_else(|| panic!("unexpected url {url:?}"));

    let response = http_get(&addr, "/");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\nhello, world\n"), "{response}");
    let metrics = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("loadgen_server_requests_total{route=\"root\",status=\"200\"} 1\n"),
        "{metrics}"
    );

    let killed = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_with_timeout(&mut server.0, Duration::from_secs(10))
        .expect("the server stops on SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[test]
fn bad_flags_exit_2_with_a_message_naming_the_flag() {
    for (args, mentions) in [
        (&["--error-rate", "1.5"][..], "--error-rate"),
        (&["--error-rate", "often"][..], "between 0 and 1"),
        (&["--service-time", "soon"][..], "uniform:2ms..8ms"),
        (&["--workers", "0"][..], "--workers"),
        (&["--threads", "0"][..], "--threads"),
        (&["--port", "70000"][..], "--port"),
        (&["--bind", "localhost:80"][..], "--bind"),
        (&["--frobnicate"][..], "--frobnicate"),
        (&["--reset-rate", "2"][..], "--reset-rate"),
        (&["--close-mid-body-rate", "half"][..], "between 0 and 1"),
        (
            &["--error-rate", "0.6", "--garbage-rate", "0.6"][..],
            "must add up to at most 1",
        ),
        (&["--slow-body", "soon"][..], "--slow-body"),
        (
            &["--slow-body", "0s"][..],
            "slow body delay must be longer than 0",
        ),
        (&["--max-connections", "0"][..], "--max-connections"),
        (&["--tls-cert", "cert.pem"][..], "--tls-key"),
        (&["--http3"][..], "--tls-cert"),
        (
            &[
                "--tls-cert",
                "/nonexistent/loadgen-cert.pem",
                "--tls-key",
                "/nonexistent/loadgen-key.pem",
            ][..],
            "could not read the TLS certificate file /nonexistent/loadgen-cert.pem",
        ),
    ] {
        let output = server_command().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(mentions), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_port_in_use_is_an_error_not_a_hang() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let child = server_command()
        .args(["--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let status = wait_with_timeout(&mut server.0, Duration::from_secs(10)).expect("exits");
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains(&format!("could not listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn help_lists_every_fault_matrix_flag() {
    let output = server_command().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in [
        "--reset-rate <P>",
        "--close-mid-body-rate <P>",
        "--garbage-rate <P>",
        "--slow-body <DURATION>",
        "--max-connections <N>",
        "--tls-cert <FILE>",
        "--tls-key <FILE>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

/// A directory of its own under the system temp dir, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn tls_files_make_it_listen_on_https_and_bad_pem_names_the_file() {
    let dir = TempDir::new("loadgen-server-tls");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.0.join("cert.pem");
    let key = dir.0.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();

    let child = server_command()
        .args(["--port", "0", "--threads", "1", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let line = first_line(&mut server.0);
    assert!(
        line.starts_with("loadgen-server listening on https://127.0.0.1:"),
        "{line:?}"
    );
    drop(server);

    // The key file given as the certificate: readable, but no certificate in it.
    let output = server_command()
        .arg("--tls-cert")
        .arg(&key)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "the TLS certificate in {} is not usable",
            key.display()
        )),
        "{stderr}"
    );
}
