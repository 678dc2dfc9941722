//! Test helpers: start a real server on 127.0.0.1:0 and talk to it over real sockets with
//! hyper's low-level client (one owned connection, no pool, so each test controls exactly
//! which requests share a connection).

#![allow(dead_code)] // each test binary uses a different subset

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::{http1, http2};
use hyper::header::{HeaderMap, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::{TokioExecutor, TokioIo};
use servers::{RunningServer, ServerConfig};
use tokio::net::TcpStream;

pub async fn server(config: ServerConfig) -> RunningServer {
    servers::start(config).await.expect("server starts")
}

pub async fn default_server() -> RunningServer {
    server(ServerConfig::default()).await
}

/// A response, fully read.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("utf-8 body")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// The `message` of an error response, which every error must have.
    pub fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {:?}", self.text()))
            .to_owned()
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(CONTENT_TYPE)
            .map_or("", |v| v.to_str().unwrap())
    }
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One keep-alive connection to the server.
pub struct Client {
    sender: Sender,
    host: String,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        Client {
            sender: Sender::H1(sender),
            host: addr.to_string(),
        }
    }

    /// HTTP/2 over cleartext with prior knowledge (h2c), no upgrade dance.
    pub async fn connect_h2(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
        tokio::spawn(connection);
        Client {
            sender: Sender::H2(sender),
            host: addr.to_string(),
        }
    }

    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if matches!(self.sender, Sender::H1(_)) {
            request = request.header(HOST, &self.host);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).expect("valid request");
        let response = match &mut self.sender {
            Sender::H1(sender) => {
                sender.ready().await.expect("connection ready");
                sender.send_request(request).await
            }
            Sender::H2(sender) => {
                sender.ready().await.expect("connection ready");
                sender.send_request(request).await
            }
        }
        .expect("response");
        let (parts, body) = response.into_parts();
        Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: body.collect().await.expect("body").to_bytes(),
        }
    }

    pub async fn get(&mut self, path: &str) -> Reply {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn post_json(&mut self, path: &str, json: &str) -> Reply {
        self.send(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            json.to_owned(),
        )
        .await
    }
}

/// One request on a fresh connection.
pub async fn get(server: &RunningServer, path: &str) -> Reply {
    Client::connect(server.local_addr()).await.get(path).await
}

pub const BOUNDARY: &str = "----loadgen-test-boundary-7MA4YWxkTrZu0gW";

/// A multipart/form-data body from (name, filename, bytes) parts.
pub fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match filename {
            Some(filename) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

pub fn multipart_content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}
