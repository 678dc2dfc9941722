//! `ServerConfig`: every knob of a reference server, as plain data, and its validation.
//!
//! The binary fills it from flags and tests fill it in code; both go through
//! [`ServerConfig::validate`] (called by [`crate::start`]). This module does not parse flags
//! and does not apply the knobs; the server module does (the TLS files are checked here, by
//! building the rustls config once, so a bad certificate is a config error and not a
//! failure on the first connection).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::error::ConfigError;
use crate::fault::Fault;
use crate::service_time::ServiceTime;
use crate::tls::TlsConfig;

/// Rates are fractions chosen by people, so `0.1 + 0.2 + 0.7` must count as 1, not as
/// 1.0000000000000002.
const RATE_SUM_TOLERANCE: f64 = 1e-9;

/// What to listen on and how the server should behave under load.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address to bind; loopback by default so a test server is never exposed.
    pub bind: IpAddr,
    /// Port to bind; 0 asks the OS for a free one (read it back with `local_addr`).
    pub port: u16,
    /// Delay applied to every API request (not `/metrics`).
    pub service_time: ServiceTime,
    /// CPU burnt on the server's thread by every API request (a busy loop), after the service
    /// time; `None`: none.
    pub cpu_time: Option<std::time::Duration>,
    /// At most this many API requests in service at once; the rest queue in arrival order.
    /// `None` is unlimited.
    pub workers: Option<usize>,
    /// Fraction of API requests (0..=1) answered `500` instead of being handled.
    ///
    /// This and the three fault rates below are shares of the same requests, drawn once per
    /// request after its service time: each is exactly the fraction of API requests that get
    /// that treatment, so they must add up to at most 1.
    pub error_rate: f64,
    /// Fraction of API requests (0..=1) answered with a TCP reset instead of a response
    /// ([`Fault::Reset`]).
    pub reset_rate: f64,
    /// Fraction of API requests (0..=1) whose response stops half-way through the body
    /// ([`Fault::CloseMidBody`]).
    pub close_mid_body_rate: f64,
    /// Fraction of API requests (0..=1) answered with bytes that are not HTTP
    /// ([`Fault::Garbage`]).
    pub garbage_rate: f64,
    /// Send every API response body in two halves, the second this long after the first;
    /// headers go out at once. `None` sends bodies whole.
    pub slow_body: Option<Duration>,
    /// At most this many client connections open at once; one accepted beyond that is reset
    /// at once. `None` is unlimited.
    pub max_connections: Option<usize>,
    /// At most this many API requests per second are served; faster ones are answered `503`
    /// at once (an API gateway's or nginx's `limit_req`). `None` is unlimited.
    pub rate_limit: Option<f64>,
    /// Periodic stalls: the whole server stops answering API requests for a while.
    pub stall: Option<Stall>,
    /// Serve HTTPS (HTTP/1.1 and HTTP/2, chosen by ALPN) instead of cleartext HTTP.
    pub tls: Option<TlsConfig>,
    /// HTTP/2: at most this many streams open at once on a connection
    /// (SETTINGS_MAX_CONCURRENT_STREAMS); `None` leaves hyper's default (200).
    pub h2_max_streams: Option<u32>,
    /// Serve HTTP/3 too, over QUIC on the UDP port of the same number as the TCP one (needs
    /// `tls`: QUIC is always encrypted). `h2_max_streams` limits its streams as well
    /// (QUIC's MAX_STREAMS for requests).
    pub http3: bool,
    /// Accept a number where the course API has a string (`"year": 1977`, `"swiper": 12`).
    /// Off by default: the server decodes bodies into the API's types like the course
    /// servers do, so a client sending the wrong types fails here as it would there.
    pub lenient: bool,
}

/// For `duration` out of every `every`, API requests are held until the stall ends — what a
/// GC pause or a blocked dependency looks like from outside. The stall is the last
/// `duration` of each period counted from server start, so a server starts healthy. Tests
/// use it to show coordinated omission: a closed-loop client sees one slow request per
/// connection, an open-loop client sees every send that fell inside the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub every: std::time::Duration,
    pub duration: std::time::Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            service_time: ServiceTime::Zero,
            cpu_time: None,
            workers: None,
            error_rate: 0.0,
            reset_rate: 0.0,
            close_mid_body_rate: 0.0,
            garbage_rate: 0.0,
            slow_body: None,
            max_connections: None,
            rate_limit: None,
            stall: None,
            tls: None,
            h2_max_streams: None,
            http3: false,
            lenient: false,
        }
    }
}

impl ServerConfig {
    /// Checks the knobs that have a valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // `contains` is false for NaN, so NaN is rejected too.
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(ConfigError::ErrorRate(self.error_rate));
        }
        for (fault, rate) in self.fault_rates() {
            if !(0.0..=1.0).contains(&rate) {
                return Err(ConfigError::FaultRate { fault, rate });
            }
        }
        let rates_sum = self.error_rate + self.fault_rates().map(|(_, rate)| rate).sum::<f64>();
        if rates_sum > 1.0 + RATE_SUM_TOLERANCE {
            return Err(ConfigError::RatesOverOne(rates_sum));
        }
        if let Some(stall) = self.stall {
            // A zero period is caught here too: no duration is both > 0 and < 0.
            if stall.duration.is_zero() || stall.duration >= stall.every {
                return Err(ConfigError::Stall {
                    every: stall.every,
                    duration: stall.duration,
                });
            }
        }
        if let Some(rate) = self.rate_limit.filter(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(ConfigError::RateLimit(rate));
        }
        if self.workers == Some(0) {
            // Zero permits would make every request wait forever.
            return Err(ConfigError::ZeroWorkers);
        }
        if self.slow_body == Some(Duration::ZERO) {
            return Err(ConfigError::ZeroSlowBody);
        }
        if self.max_connections == Some(0) {
            // Every connection would be reset, which is a broken server, not a limit.
            return Err(ConfigError::ZeroMaxConnections);
        }
        match &self.tls {
            Some(tls) => drop(tls.rustls_config()?),
            None if self.http3 => return Err(ConfigError::Http3WithoutTls),
            None => {}
        }
        Ok(())
    }

    /// Each fault with its rate, in the order the per-request draw checks them.
    pub(crate) fn fault_rates(&self) -> impl Iterator<Item = (Fault, f64)> {
        [
            (Fault::Reset, self.reset_rate),
            (Fault::CloseMidBody, self.close_mid_body_rate),
            (Fault::Garbage, self.garbage_rate),
        ]
        .into_iter()
    }
}
