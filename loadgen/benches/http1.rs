//! The HTTP/1.1 request path without the network: writing a request into the reused buffer
//! and parsing a response head, per request. `cargo bench -p loadgen --bench http1`.

use std::borrow::Cow;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::Method;
use loadgen::transport::http1::wire::{encode, parse_head};
use loadgen::transport::{Origin, Outgoing};

fn origin() -> Origin {
    Origin {
        scheme: "http",
        addr: "127.0.0.1:8080".parse().unwrap(),
        authority: HeaderValue::from_static("127.0.0.1:8080"),
        server_name: rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
        tls: None,
    }
}

fn request_path(c: &mut Criterion) {
    let origin = origin();
    let mut headers = HeaderMap::new();
    headers.insert("user-agent", HeaderValue::from_static("loadgen/0.1.0"));
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let get = Outgoing {
        method: Method::GET,
        path: "/albums/42".parse().unwrap(),
        headers: Cow::Borrowed(&headers),
        body: Default::default(),
        trace: None,
        capture: Default::default(),
    };
    let post = Outgoing {
        method: Method::POST,
        path: "/swipe/left/".parse().unwrap(),
        headers: Cow::Borrowed(&headers),
        body: Bytes::from(format!(
            r#"{{"swiper":"12","swipee":"345","comment":"{}"}}"#,
            "x".repeat(256)
        ))
        .into(),
        trace: None,
        capture: Default::default(),
    };
    let mut buf = Vec::with_capacity(1024);
    c.bench_function("encode GET", |b| {
        b.iter(|| {
            encode(&mut buf, &get, &origin, false);
            std::hint::black_box(buf.len())
        })
    });
    c.bench_function("encode POST 300 B JSON", |b| {
        b.iter(|| {
            encode(&mut buf, &post, &origin, false);
            std::hint::black_box(buf.len())
        })
    });
    let nginx =
        b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 19:16:48 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nhello, world\n";
    c.bench_function("parse nginx response head", |b| {
        b.iter(|| {
            parse_head(std::hint::black_box(nginx), false)
                .unwrap()
                .unwrap()
                .len
        })
    });
}

criterion_group!(benches, request_path);
criterion_main!(benches);
