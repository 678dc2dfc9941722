//! Single values from the command line, checked: the target URL ([`TargetUrl`], [`Target`]),
//! `--out` ([`Output`]), `--start-at`, `--stages` and `-H` headers. Each function turns one
//! flag's text into a value or a [`ConfigError`] naming the flag, the value and the fix; none
//! knows about scenarios or models.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;

use super::ConfigError;
use crate::report::thresholds::Threshold;
use crate::scenario::schema::{Dur, RampStageSpec, StageSpec};
use crate::store::s3::S3Location;
use crate::workload::Workload;

/// A parsed `http://` or `https://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// As the user gave it (or as built for the embedded server), with a user name and
    /// password and secret query values replaced by `<redacted>` (`workload::secret`): what
    /// the console, run.json and the page show. The requests send the query as given.
    pub url: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    pub host: String,
    pub port: u16,
    /// `host:port` as sent in the Host header (port omitted when it is 80).
    pub authority: String,
    /// Path and query.
    pub path: Uri,
    /// `Authorization: Basic …` of a user name and password in the URL
    /// (`http://user:pass@host/`), sent with every request as curl sends it, unless a `-H
    /// Authorization` is given; never in the Host header.
    pub basic_auth: Option<Box<HeaderValue>>,
}

impl TargetUrl {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl {
            url: crate::workload::secret::redact_url(url),
            reason: reason.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => "http",
            Some(s) if s.eq_ignore_ascii_case("https") => "https",
            Some(other) => {
                return Err(ConfigError::Scheme {
                    url: crate::workload::secret::redact_url(url),
                    scheme: other.to_string(),
                })
            }
            None => return Err(bad("it has no scheme")),
        };
        let authority = uri.authority().ok_or_else(|| bad("it has no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        let port = authority
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority.as_str()),
        };
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        Ok(TargetUrl {
            url: crate::workload::secret::redact_url(url),
            scheme,
            host: host.to_string(),
            port,
            authority: host_port.to_string(),
            basic_auth: userinfo
                .map(basic_auth)
                .transpose()
                .map_err(bad)?
                .map(Box::new),
            path: path
                .parse()
                .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?,
        })
    }
}

/// `Basic base64(user:password)` of a URL's `user:password` (percent-decoded, as curl does).
fn basic_auth(userinfo: &str) -> Result<HeaderValue, &'static str> {
    use base64::Engine as _;
    let decode = |part: &str| percent_encoding::percent_decode_str(part).collect::<Vec<u8>>();
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let credentials = [decode(user), b":".to_vec(), decode(password)].concat();
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    HeaderValue::from_str(&format!("Basic {encoded}"))
        .map_err(|_| "its user name and password cannot be a header")
}

/// What to test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The reference server, started in-process on 127.0.0.1:0.
    Embedded,
    Url(TargetUrl),
}

impl Target {
    /// The path scenario request paths are relative to, without a trailing `/`.
    pub fn base_path(&self) -> &str {
        match self {
            Target::Url(url) => url.path.path().trim_end_matches('/'),
            Target::Embedded => "",
        }
    }
}

/// Where the run directory goes (`--out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `runs/<run-id>`.
    Default,
    /// `--out DIR`: exactly this directory.
    Dir(PathBuf),
    /// `--out s3://BUCKET/PREFIX`: staged locally, uploaded to `PREFIX/<run-id>/`.
    S3(S3Location),
}

impl Output {
    /// Reads `--out` (absent, a directory, or an `s3://` URL).
    pub fn from_arg(out: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(out) = out else {
            return Ok(Output::Default);
        };
        match S3Location::parse(&out.to_string_lossy()) {
            None => Ok(Output::Dir(out.to_path_buf())),
            Some(parsed) => parsed.map(Output::S3).map_err(ConfigError::Out),
        }
    }
}

/// How far in the past `--start-at` may be (clock skew, a slow pod start) before it is
/// refused as a mistake.
const START_AT_PAST_TOLERANCE: Duration = Duration::from_secs(5);

/// `--start-at`: RFC 3339 or Unix milliseconds → Unix nanoseconds; refused when it is more
/// than a few seconds in the past.
/// The `--server-metrics` URLs (a scenario's first), each an http:// or https:// URL with a
/// host, a URL given twice kept once.
pub(super) fn server_metrics<'a>(
    urls: impl Iterator<Item = &'a String>,
) -> Result<Vec<String>, ConfigError> {
    let mut sources: Vec<String> = Vec::new();
    for url in urls {
        let bad = |reason: &str| ConfigError::ServerMetrics {
            url: url.clone(),
            reason: reason.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&format!("is not a URL ({e})")))?;
        match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {}
            _ => return Err(bad("is not an http:// or https:// URL")),
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("has no host"));
        }
        if !sources.contains(url) {
            sources.push(url.clone());
        }
    }
    Ok(sources)
}

pub(super) fn parse_start_at(text: &str) -> Result<i64, ConfigError> {
    let bad = |reason: String| ConfigError::StartAt {
        value: text.to_string(),
        reason,
    };
    let unix_ns = match text.trim().parse::<i64>() {
        Ok(ms) => ms.checked_mul(1_000_000).ok_or_else(|| bad("is too large".into()))?,
        Err(_) => chrono::DateTime::parse_from_rfc3339(text.trim())
            .map_err(|e| bad(format!("is not a time ({e}); use RFC 3339 such as 2026-11-22T10:15:00Z, or Unix milliseconds")))?
            .timestamp_nanos_opt()
            .ok_or_else(|| bad("is out of range".into()))?,
    };
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let late = Duration::from_nanos(now_ns.saturating_sub(unix_ns).max(0) as u64);
    if late > START_AT_PAST_TOLERANCE {
        return Err(bad(format!(
            "was {} ago; give a time in the future (e.g. a minute from now) so every shard can wait for it",
            humantime::format_duration(Duration::from_secs(late.as_secs()))
        )));
    }
    Ok(unix_ns)
}

/// `30s:100,60s:1000` → stages (duration, target rate).
pub(super) fn parse_stages(text: &str) -> Result<Vec<StageSpec>, ConfigError> {
    text.split(',')
        .map(|part| {
            let bad = || ConfigError::Stages(text.to_string());
            let (duration, rate) = part.trim().split_once(':').ok_or_else(bad)?;
            Ok(StageSpec {
                duration: Dur(crate::units::parse_duration(duration).map_err(|_| bad())?),
                rate: rate.trim().parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

/// `30s:10,1m:50,30s:0` → a ramp's stages (duration, workers to reach).
pub(super) fn parse_ramp(text: &str) -> Result<Vec<RampStageSpec>, ConfigError> {
    text.split(',')
        .map(|part| {
            let bad = || {
                ConfigError::ModelFlag(format!(
                    "--ramp '{text}' is not a ramp of workers; write DURATION:WORKERS stages, \
                     e.g. 30s:10,1m:50,30s:0"
                ))
            };
            let (duration, workers) = part.trim().split_once(':').ok_or_else(bad)?;
            Ok(RampStageSpec {
                duration: Dur(crate::units::parse_duration(duration).map_err(|_| bad())?),
                workers: workers.trim().parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

pub(super) fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let bad = || ConfigError::Header(text.to_string());
    let (name, value) = text.split_once(':').ok_or_else(bad)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// Parses thresholds (`--threshold`, `--slo`, a scenario's) and resolves the op each names —
/// by its label or its request's name in the scenario — to the label the rows carry; one that
/// names no op of `workload` is refused with the ops it could name, so a typo is an error, not
/// a threshold that can never be judged.
pub(super) fn thresholds<'a>(
    texts: impl Iterator<Item = &'a String>,
    workload: &Workload,
) -> Result<Vec<Threshold>, ConfigError> {
    texts
        .map(|text| {
            let mut threshold: Threshold = text.parse().map_err(ConfigError::Threshold)?;
            if let Some(op) = &threshold.op {
                let label = workload.op_label(op).ok_or_else(|| {
                    ConfigError::Threshold(format!(
                        "'{}' names op '{op}', which this run does not send; its ops (by label, \
                         and by request name in parentheses) are: {}",
                        text.trim(),
                        workload.op_names().join(", ")
                    ))
                })?;
                threshold.op = Some(label.to_string());
            }
            Ok(threshold)
        })
        .collect()
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
        assert_eq!(
            (t.host.as_str(), t.port, t.path.to_string().as_str()),
            ("::1", 80, "/")
        );
    }

    #[test]
    fn url_errors_name_the_fix() {
        for (url, needle) in [
            ("ftp://x/", "only http://"),
            ("localhost:8080", "scheme"),
            ("http://", "not a valid URL"),
        ] {
            let err = TargetUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
            assert!(err.contains(url), "{url}: {err}");
        }
    }
}
