//! The run's own HTTP endpoints (`--dashboard`, `--metrics-addr`) share one accept loop
//! (`report::serve`). Out of file descriptors (EMFILE) it waited and accepted again; before
//! issue 58 the loop ended at the first failed accept, and the page stopped listening for the
//! rest of the run. Alone in its test binary: it lowers this process's open-files limit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Open file descriptors of this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

#[test]
fn the_accept_loop_outlives_running_out_of_files() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Six connections wait in the listen queue before the loop starts; it may accept two.
    let waiting: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let (soft, hard) = rlimit::Resource::NOFILE.get().unwrap();
    rlimit::Resource::NOFILE.set(open_fds() + 2, hard).unwrap();
    runtime.spawn(async move {
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        loadgen::report::serve::serve(listener, |_request| {
            hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(b"ok")))
        })
        .await
    });
    // Its accepts fail (EMFILE) for a while …
    std::thread::sleep(Duration::from_millis(400));
    drop(waiting);
    rlimit::Resource::NOFILE.set(soft, hard).unwrap();
    // … and once files are free again, it answers.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}
