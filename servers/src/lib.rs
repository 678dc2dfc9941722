//! Reference servers for the course APIs, with knobs that give them a known capacity.
//!
//! The load generator needs a target whose behaviour is known, so that a measurement can be
//! checked against the truth: this crate serves the albums, skiers, swipe and stepcounter
//! APIs (plus `GET /` → `hello, world`) on one hyper server, and lets the caller set a
//! service time distribution, a finite number of workers, an error rate and periodic stalls
//! ([`Stall`]: for a while, the server answers nothing, which is how tests show coordinated
//! omission). For the fault matrix a load generator is tested against, it can also reset
//! connections, cut responses off mid-body or answer garbage ([`Fault`]), send bodies
//! slowly, cap open connections, and speak HTTPS ([`TlsConfig`]). The same code runs as the
//! `loadgen-server` binary and in-process from tests via [`start`].
//!
//! What it is responsible for: routing, validating requests the way the course servers do
//! (400 for malformed ids and bodies, 404 for unknown paths, 405 for a wrong method),
//! applying the knobs to every API request, and counting answers per route and status for
//! [`RunningServer`] and `GET /metrics` (Prometheus text).
//!
//! What it is not: a faithful database. Albums, lift rides and swipes are validated and then
//! forgotten; only step counts are kept, in a bounded in-memory store. Nothing here is meant
//! to be exposed beyond a test network: TLS is there to measure its cost, not to protect
//! anything, and there is no authentication.
//!
//! Dependencies between the modules point one way, down these layers (`tests/architecture.rs`
//! holds the table and fails on an arrow that points up; docs/architecture.md says what each
//! module does):
//!
//! `server` → `api` | `config` → `body` | `state` | `tls` → `error` | `metrics` → `delay` |
//! `fault` | `rate_limit` | `reply` | `router` | `service_time`
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let server = servers::start(servers::ServerConfig {
//!     service_time: "exp:5ms".parse().unwrap(),
//!     workers: Some(8),
//!     ..Default::default()
//! })
//! .await?;
//! println!("try {}/albums/1", server.url());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod api;
mod body;
mod config;
mod delay;
mod error;
mod fault;
mod metrics;
mod rate_limit;
mod reply;
mod router;
mod server;
mod service_time;
mod state;
mod tls;

/// The start of the name of every thread the server itself starts (its timer), and of an
/// embedding program's threads that run it (loadgen's embedded server): their CPU is the
/// server's, not the embedder's. Linux keeps a thread's first 15 bytes.
pub const THREAD_NAME: &str = "loadgen-server";

pub use config::{ServerConfig, Stall};
pub use error::ConfigError;
pub use fault::Fault;
pub use server::{start, RunningServer, DEFAULT_SHUTDOWN_GRACE};
pub use service_time::{ParseServiceTimeError, ServiceTime};
pub use tls::TlsConfig;
