//! [`ConfigError`]: a knob value the server cannot run with, or a TLS file it cannot use, as
//! one sentence that says what to change.
//!
//! A leaf of its own because both `config` (the knobs' ranges) and `tls` (the certificate and
//! key files) produce it, and `config` holds a `TlsConfig`: with the error in either of them,
//! the two would import each other. It checks nothing itself.

use crate::fault::Fault;

/// A knob value the server cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("error rate must be a fraction between 0 and 1 (e.g. 0.05 for 5 %), got {0}")]
    ErrorRate(f64),
    #[error("--rate-limit must be requests per second above 0 (e.g. 300), got {0}")]
    RateLimit(f64),
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
    #[error("{fault} rate must be a fraction between 0 and 1 (e.g. 0.05 for 5 %), got {rate}")]
    FaultRate { fault: Fault, rate: f64 },
    #[error(
        "--error-rate, --reset-rate, --close-mid-body-rate and --garbage-rate are shares of the \
         same requests and must add up to at most 1, but they add up to {0}"
    )]
    RatesOverOne(f64),
    #[error("slow body delay must be longer than 0 (leave it unset to send bodies whole), got 0")]
    ZeroSlowBody,
    #[error("max connections must be at least 1 (leave it unset for unlimited), got 0")]
    ZeroMaxConnections,
    #[error(
        "HTTP/3 runs over QUIC, which is always encrypted: give --tls-cert and --tls-key with \
         --http3"
    )]
    Http3WithoutTls,
    #[error("could not read the TLS {what} file {path}: {reason}")]
    TlsRead {
        what: &'static str,
        path: String,
        reason: String,
    },
    #[error(
        "the TLS certificate in {source_name} is not usable: {reason} (expected PEM with at \
         least one -----BEGIN CERTIFICATE----- block)"
    )]
    TlsCertificate { source_name: String, reason: String },
    #[error(
        "the TLS private key in {source_name} is not usable: {reason} (expected PEM with one \
         PKCS#8, PKCS#1 or SEC1 private key)"
    )]
    TlsKey { source_name: String, reason: String },
    #[error(
        "the TLS certificate in {cert} and the key in {key} cannot be used together: {reason}"
    )]
    TlsPair {
        cert: String,
        key: String,
        reason: String,
    },
}
