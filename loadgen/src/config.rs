//! The validated run configuration, and the checks that produce it from the command line.
//!
//! Everything a user can get wrong is caught here, before any connection is opened or any file
//! written, with one sentence naming the flag, the value and the fix ([`ConfigError`], exit 2).
//! The result, [`RunConfig`], is what the engine runs; its [`ResolvedConfig`] view (secrets
//! redacted) is what run.json and the Parquet metadata store.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};
use serde::Serialize;

use crate::cli::RunArgs;

/// Used when neither `-d` nor `-n` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A problem with the user's input. Each message is one sentence with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--url '{url}' is not a valid URL ({reason}); use e.g. http://127.0.0.1:8080/path")]
    BadUrl { url: String, reason: String },
    #[error("--url '{0}' uses https, which this build does not support yet; use an http:// URL")]
    Https(String),
    #[error("--url '{url}' has scheme '{scheme}'; only http:// URLs are supported")]
    Scheme { url: String, scheme: String },
    #[error("{flag} must be at least 1 (got 0)")]
    Zero { flag: &'static str },
    #[error("{flag} must be longer than 0 (got {value})")]
    ZeroDuration { flag: &'static str, value: String },
    #[error("--method '{0}' is not a valid HTTP method; use e.g. GET, POST, PUT or DELETE")]
    Method(String),
    #[error("-H '{0}' is not a header; write it as 'Name: value'")]
    Header(String),
    #[error("{0}")]
    Template(String),
    #[error("--body @{path}: cannot read the file ({source}); check the path")]
    BodyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// When a closed-model run stops sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Duration(Duration),
    Requests(u64),
}

/// A parsed `http://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// As the user gave it (or as built for the embedded server).
    pub url: String,
    pub host: String,
    pub port: u16,
    /// `host:port` as sent in the Host header (port omitted when it is 80).
    pub authority: String,
    /// Path and query.
    pub path: Uri,
}

impl TargetUrl {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(ConfigError::Https(url.to_string())),
            Some(other) => {
                return Err(ConfigError::Scheme {
                    url: url.to_string(),
                    scheme: other.to_string(),
                })
            }
            None => return Err(bad("it has no scheme")),
        }
        let authority = uri.authority().ok_or_else(|| bad("it has no host"))?;
        let host = authority.host().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        let port = authority.port_u16().unwrap_or(80);
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        Ok(TargetUrl {
            url: url.to_string(),
            host: host.to_string(),
            port,
            authority: authority.as_str().to_string(),
            path: path.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?,
        })
    }
}

/// What to test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The reference server, started in-process on 127.0.0.1:0.
    Embedded,
    Url(TargetUrl),
}

/// A validated closed-model run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: Target,
    pub method: Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// Where the body came from, for run.json: `inline` or the file path.
    pub body_source: Option<String>,
    pub connections: u32,
    pub limit: Limit,
    pub think_time: Duration,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub grace: Duration,
    pub out: Option<PathBuf>,
    pub progress: bool,
    pub json: bool,
    pub segment_interval: Duration,
}

impl RunConfig {
    /// Validates the flags of `loadgen run`.
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let target = match &args.url {
            Some(url) => Target::Url(TargetUrl::parse(url)?),
            None => Target::Embedded,
        };
        if args.connections == 0 {
            return Err(ConfigError::Zero { flag: "-c/--connections" });
        }
        let limit = match (args.duration, args.requests) {
            (_, Some(0)) => return Err(ConfigError::Zero { flag: "-n/--requests" }),
            (_, Some(n)) => Limit::Requests(n),
            (Some(d), None) => Limit::Duration(d),
            (None, None) => Limit::Duration(DEFAULT_DURATION),
        };
        for (flag, value) in [
            ("-d/--duration", args.duration.unwrap_or(DEFAULT_DURATION)),
            ("--timeout", args.timeout),
            ("--connect-timeout", args.connect_timeout),
            ("--segment-interval", args.segment_interval),
        ] {
            if value.is_zero() {
                return Err(ConfigError::ZeroDuration {
                    flag,
                    value: format!("{value:?}"),
                });
            }
        }
        let method = Method::from_bytes(args.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| ConfigError::Method(args.method.clone()))?;
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let (body, body_source) = match args.body.as_deref() {
            None => (Bytes::new(), None),
            Some(text) => match text.strip_prefix('@') {
                Some(path) => {
                    let data = std::fs::read(path).map_err(|source| ConfigError::BodyFile {
                        path: path.to_string(),
                        source,
                    })?;
                    (Bytes::from(data), Some(format!("@{path}")))
                }
                None => (Bytes::from(text.to_string()), Some("inline".to_string())),
            },
        };
        Ok(RunConfig {
            target,
            method,
            headers,
            body,
            body_source,
            connections: args.connections,
            limit,
            think_time: args.think_time,
            timeout: args.timeout,
            connect_timeout: args.connect_timeout,
            grace: args.grace,
            out: args.out.clone(),
            progress: !args.no_progress && !args.json,
            json: args.json,
            segment_interval: args.segment_interval,
        })
    }

    /// The configuration as stored in run.json and Parquet metadata, secrets redacted.
    pub fn resolved(&self, target_url: &str) -> ResolvedConfig {
        let (duration, requests) = match self.limit {
            Limit::Duration(d) => (Some(humantime::format_duration(d).to_string()), None),
            Limit::Requests(n) => (None, Some(n)),
        };
        ResolvedConfig {
            model: "closed",
            url: target_url.to_string(),
            embedded_server: self.target == Target::Embedded,
            method: self.method.to_string(),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| {
                    let shown = if is_secret(name) {
                        "<redacted>".to_string()
                    } else {
                        value.to_str().unwrap_or("<binary>").to_string()
                    };
                    format!("{name}: {shown}")
                })
                .collect(),
            body_bytes: self.body.len(),
            body_source: self.body_source.clone(),
            connections: self.connections,
            duration,
            requests,
            think_time: humantime::format_duration(self.think_time).to_string(),
            timeout: humantime::format_duration(self.timeout).to_string(),
            connect_timeout: humantime::format_duration(self.connect_timeout).to_string(),
            grace: humantime::format_duration(self.grace).to_string(),
            segment_interval: humantime::format_duration(self.segment_interval).to_string(),
        }
    }
}

/// The run as configured, in the units a person reads; stored in run.json and as
/// `loadgen.scenario` (TOML) in every segment.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedConfig {
    pub model: &'static str,
    pub url: String,
    pub embedded_server: bool,
    pub method: String,
    pub headers: Vec<String>,
    pub body_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_source: Option<String>,
    pub connections: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    pub think_time: String,
    pub timeout: String,
    pub connect_timeout: String,
    pub grace: String,
    pub segment_interval: String,
}

fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let bad = || ConfigError::Header(text.to_string());
    let (name, value) = text.split_once(':').ok_or_else(bad)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// Header names whose values must not end up in run.json or Parquet metadata.
fn is_secret(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || ["token", "secret", "api-key", "apikey", "password", "session"]
        .iter()
        .any(|word| name.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts() {
        let t = TargetUrl::parse("http://example.test:8080/albums/1?x=2").unwrap();
        assert_eq!(t.host, "example.test");
        assert_eq!(t.port, 8080);
        assert_eq!(t.authority, "example.test:8080");
        assert_eq!(t.path, "/albums/1?x=2");
        let t = TargetUrl::parse("http://[::1]").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.to_string().as_str()), ("::1", 80, "/"));
    }

    #[test]
    fn url_errors_name_the_fix() {
        for (url, needle) in [
            ("https://x/", "https"),
            ("ftp://x/", "only http://"),
            ("localhost:8080", "scheme"),
            ("http://", "not a valid URL"),
        ] {
            let err = TargetUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
            assert!(err.contains(url), "{url}: {err}");
        }
    }

    #[test]
    fn secrets_are_redacted() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "loadgen", "run", "-H", "Authorization: Bearer abc", "-H", "X-Api-Key: k", "-H",
            "Accept: text/plain",
        ])
        .unwrap();
        let crate::cli::Command::Run(args) = cli.command;
        let resolved = RunConfig::from_args(&args).unwrap().resolved("http://x/");
        let text = serde_json::to_string(&resolved).unwrap();
        assert!(!text.contains("abc") && !text.contains(": k\""), "{text}");
        assert!(text.contains("accept: text/plain"), "{text}");
    }
}
