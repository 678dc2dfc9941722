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
