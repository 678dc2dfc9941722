//! `ServerConfig`: every knob of a reference server, as plain data, and its validation.
//!
//! The binary fills it from flags and tests fill it in code; both go through
//! [`ServerConfig::validate`] (called by [`crate::start`]). This module does not parse flags
//! and does not apply the knobs; the server module does.

use std::net::{IpAddr, Ipv4Addr};

use crate::ServiceTime;

/// What to listen on and how the server should behave under load.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address to bind; loopback by default so a test server is never exposed.
    pub bind: IpAddr,
    /// Port to bind; 0 asks the OS for a free one (read it back with `local_addr`).
    pub port: u16,
    /// Delay applied to every API request (not `/metrics`).
    pub service_time: ServiceTime,
    /// At most this many API requests in service at once; the rest queue in arrival order.
    /// `None` is unlimited.
    pub workers: Option<usize>,
    /// Fraction of API requests (0..=1) answered `500` instead of being handled.
    pub error_rate: f64,
    /// Periodic stalls: the whole server stops answering API requests for a while.
    pub stall: Option<Stall>,
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
            workers: None,
            error_rate: 0.0,
            stall: None,
        }
    }
}

/// A knob value the server cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("error rate must be a fraction between 0 and 1 (e.g. 0.05 for 5 %), got {0}")]
    ErrorRate(f64),
    #[error("workers must be at least 1 (leave it unset for unlimited), got 0")]
    ZeroWorkers,
    #[error(
        "a stall of {} every {} cannot be served: --stall-for must be longer than 0 and \
         shorter than --stall-every (e.g. --stall-every 2s --stall-for 500ms)",
        humantime::format_duration(*duration),
        humantime::format_duration(*every)
    )]
    Stall {
        every: std::time::Duration,
        duration: std::time::Duration,
    },
}

impl ServerConfig {
    /// Checks the knobs that have a valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // `contains` is false for NaN, so NaN is rejected too.
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(ConfigError::ErrorRate(self.error_rate));
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
        if self.workers == Some(0) {
            // Zero permits would make every request wait forever.
            return Err(ConfigError::ZeroWorkers);
        }
        Ok(())
    }
}
