//! What a run records about its configuration: [`ResolvedConfig`] (run.json's `config`, and
//! its `definition` as TOML in every segment's metadata), in the units a person reads, with
//! secret-looking header values replaced by `<redacted>` (`workload::secret` says which).

use std::time::Duration;

use serde::Serialize;

use super::{RunConfig, Target};
use crate::scenario::Scenario;
use crate::workload::secret::{is_secret_name, redact_target, redact_url, REDACTED};

impl RunConfig {
    /// The configuration as stored in run.json, secrets redacted.
    pub fn resolved(&self, target_url: &str) -> ResolvedConfig {
        let text = |d: Duration| humantime::format_duration(d).to_string();
        ResolvedConfig {
            scenario: self.scenario_origin.clone(),
            model: self.model.plan().kind(),
            description: self.model.plan().describe(),
            url: target_url.to_string(),
            embedded_server: self.target == Target::Embedded,
            think_time: text(self.think_time),
            timeout: text(self.timeout),
            connect_timeout: text(self.connect_timeout),
            grace: text(self.grace),
            segment_interval: text(self.output.segment_interval),
            protocol: match (self.connection.grpc.is_some(), self.connection.http2) {
                (true, _) => "gRPC over HTTP/2",
                (false, true) => "HTTP/2",
                (false, false) if self.connection.http3 => "HTTP/3",
                (false, false) => "HTTP/1.1",
            },
            streams_per_connection: self
                .connection
                .multiplexed()
                .then_some(self.connection.streams_per_connection),
            keepalive: self.connection.keepalive,
            follow_redirects: self.connection.redirects,
            duration: self.duration_limit().map(text),
            request_cap: self.request_cap,
            tls_verify: match &self.connection.verify {
                crate::transport::tls::Verify::System => "system roots".to_string(),
                crate::transport::tls::Verify::CaFile(p) => format!("--cacert {}", p.display()),
                crate::transport::tls::Verify::Insecure => "off (--insecure)".to_string(),
            },
            notes: self.notes.clone(),
            server_metrics: self.evidence.server_metrics.sources.clone(),
            trace_sample: self.evidence.trace_sample,
            definition: self.scenario.clone(),
        }
    }
}

/// The run as configured, in the units a person reads; stored in run.json, and its
/// `definition` as `loadgen.scenario` (TOML) in every segment.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedConfig {
    pub scenario: String,
    pub model: &'static str,
    pub description: String,
    pub url: String,
    pub embedded_server: bool,
    pub think_time: String,
    pub timeout: String,
    pub connect_timeout: String,
    pub grace: String,
    pub segment_interval: String,
    pub protocol: &'static str,
    pub streams_per_connection: Option<u32>,
    pub keepalive: bool,
    pub follow_redirects: crate::transport::Redirects,
    /// How long the run may send (`-d`, or a closed scenario's `duration`), whatever the
    /// model; `None` when only the model's own plan ends it.
    pub duration: Option<String>,
    /// `-n` on a thread-groups or phased model: requests for all workers together, rounded
    /// up to whole iterations; absent when the model alone decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_cap: Option<u64>,
    /// How server certificates were checked (https:// targets).
    pub tls_verify: String,
    /// What the model rules changed that the user may not expect: a scenario's model
    /// replaced by `--rate`, `-n` rounded up to whole iterations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The endpoints scraped into server-metrics.parquet (`--server-metrics`, the scenario's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<String>,
    /// `--trace`: the share of `traceparent` headers sampled; absent without `--trace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_sample: Option<f64>,
    /// The scenario as run: overrides applied, secret header values redacted.
    pub definition: Scenario,
}

/// The scenario with secret-looking header values, query values and URL passwords replaced.
pub(super) fn redact(mut scenario: Scenario) -> Scenario {
    let hide = |headers: &mut std::collections::BTreeMap<String, String>| {
        for (name, value) in headers.iter_mut() {
            if is_secret_name(name) {
                *value = REDACTED.to_string();
            }
        }
    };
    hide(&mut scenario.defaults.headers);
    for request in scenario.requests.values_mut() {
        hide(&mut request.headers);
        request.path = redact_target(&request.path);
    }
    scenario.target = scenario.target.as_deref().map(redact_url);
    scenario
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "loadgen",
            "run",
            "-H",
            "Authorization: Bearer abc",
            "-H",
            "X-Api-Key: k",
            "-H",
            "Accept: text/plain",
        ])
        .unwrap();
        let crate::cli::Command::Run(args) = cli.command else {
            panic!()
        };
        let resolved = RunConfig::from_args(&args).unwrap().resolved("http://x/");
        let text = serde_json::to_string(&resolved).unwrap();
        assert!(!text.contains("abc") && !text.contains("\"k\""), "{text}");
        assert!(text.contains("text/plain"), "{text}");
    }
}
