//! A counting HTTP/1.1 server for tests that need to see exactly what reached the server:
//! every request's method, `Host` and `Authorization`, in order. It answers `200` to the first
//! `ok_for` requests, then what its [`After`] says — a `503`, or nothing at all (a server that
//! hangs) — so a test can tell the run's requests from the probe's that follow them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// What the server does once it has answered `ok_for` requests `200`.
#[derive(Debug, Clone)]
pub enum After {
    /// `503 Service Unavailable`, at once.
    Unavailable,
    /// Nothing: the connection is held open and never answered.
    Hang,
    /// `302 Found` to this URL.
    Redirect(String),
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub host: Option<String>,
    pub authorization: Option<String>,
}

/// The server: its address and what it has seen so far.
pub struct Counting {
    pub addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Counting {
    /// Serves on 127.0.0.1 (a thread per connection) for the rest of the test process.
    pub fn start(ok_for: usize, after: After) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, after) = (log.clone(), after.clone());
                std::thread::spawn(move || serve(stream, ok_for, &after, &log));
            }
        });
        Counting { addr, seen }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn serve(stream: TcpStream, ok_for: usize, after: &After, log: &Mutex<Vec<Seen>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    while let Some((seen, body_len)) = read_head(&mut reader) {
        let mut body = vec![0u8; body_len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = {
            let mut log = log.lock().unwrap();
            log.push(seen);
            log.len()
        };
        let reply: Vec<u8> = match (n <= ok_for, after) {
            (true, _) => b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
            (false, After::Unavailable) => {
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".to_vec()
            }
            (false, After::Redirect(to)) => {
                format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n")
                    .into_bytes()
            }
            (false, After::Hang) => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                return;
            }
        };
        if writer.write_all(&reply).is_err() {
            return;
        }
    }
}

/// A request's head and the length of its body; `None` at the end of the connection.
fn read_head(reader: &mut BufReader<TcpStream>) -> Option<(Seen, usize)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|&n| n > 0)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut seen = Seen {
        method,
        target,
        host: None,
        authorization: None,
    };
    let mut body_len = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|&n| n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            return Some((seen, body_len));
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim().to_string();
        match name.to_ascii_lowercase().as_str() {
            "host" => seen.host = Some(value),
            "authorization" => seen.authorization = Some(value),
            "content-length" => body_len = value.parse().ok()?,
            _ => {}
        }
    }
}
