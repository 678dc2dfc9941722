//! The client's side of a run: one summary of the samples ([`ClientSummary`], run.json's
//! `client` object) and the console's `Client` line. Whether the client was saturated is the
//! verdict's rule (`verdict::client`, by `contract/verdict.json`'s `client_*` thresholds),
//! which sets `saturated` and `saturation`; this module measures and words, and says when the
//! server shares the client's cores (the embedded demo server, or a target on a loopback
//! address): then a saturated client is also a starved server.

use serde::Serialize;

use super::cgroup::CgroupVersion;

/// What limited a saturated client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Saturation {
    /// Its cores were busy.
    Cpu,
    /// Its cgroup CPU quota: busy up to the quota, or throttled.
    CpuQuota,
}

/// The client's side of the story: run.json's `client` object, whose keys and meanings are
/// `contract/files.json`'s (`files.run_json`, the `client.*` fields).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClientSummary {
    /// Rows in client-metrics.parquet.
    pub samples: u64,
    /// Cores the process may run on (same as `cpuset_cores`; kept from run.json's first
    /// version).
    pub cores: usize,
    /// The tightest cgroup CPU quota, in cores; `None`: no quota.
    pub cpu_quota_cores: Option<f64>,
    pub cpu_quota_source: Option<CgroupVersion>,
    /// Cores in the process's affinity ∩ cpuset.
    pub cpuset_cores: usize,
    /// min(cpuset_cores, cpu_quota_cores): what utilisation is measured against.
    pub cpu_limit_cores: f64,
    /// Highest `cpu_utilisation` of any sample.
    pub peak_cpu_utilisation: f64,
    /// Process CPU time / sampled wall time / cpu_limit_cores (time-weighted).
    pub mean_cpu_utilisation: f64,
    pub peak_rss_bytes: u64,
    /// Wall time the samples cover.
    pub sampled_ns: u64,
    /// Over the sampled time, from the cgroup's `cpu.stat`; `None` without a CPU controller.
    pub throttled_ns: Option<u64>,
    pub nr_periods: Option<u64>,
    pub nr_throttled: Option<u64>,
    /// nr_throttled / nr_periods; `None` without a controller or without a period.
    pub throttled_share: Option<f64>,
    /// The verdict (see the module's rule).
    pub saturated: bool,
    /// What saturated it; `None` when not saturated.
    pub saturation: Option<Saturation>,
    /// The embedded server, or a target on a loopback address: the server ran on these cores.
    pub server_shares_cores: bool,
    /// The interface carrying the target's traffic (its route); `None` when unknown.
    pub target_interface: Option<String>,
    /// The link's capacity in bits/s: `--link-capacity`, else the interface's speed.
    pub link_capacity_bps: Option<u64>,
    /// `flag` or `interface`; `None` when unknown.
    pub link_capacity_source: Option<&'static str>,
    /// What the kernel measured on the client's sockets (`TCP_INFO`, read as each connection
    /// closed): round-trip time and retransmits; `None` when no connection was read.
    pub tcp: Option<crate::stats::tcp::TcpSummary>,
    /// Who shares the cores, for the console ("the embedded server").
    #[serde(skip)]
    pub shared_with: Option<&'static str>,
    /// The host's cores (/proc/stat's `cpuN` lines), every one, not only the client's.
    pub host_cores: Option<usize>,
    /// How many of the host's cores were busy on average over the sampled time, every
    /// process's: this one's (the client's, an embedded server's) and other work's.
    pub host_busy_cores: Option<f64>,
    /// How many of the host's cores other work kept busy on average over the sampled time:
    /// every process but this one (a server on this host among them), whose own CPU — the
    /// client's and an embedded server's — is left out.
    pub host_other_cores: Option<f64>,
}

/// A fraction as the whole percent the console prints; the verdict compares this number.
pub fn percent(fraction: f64) -> i64 {
    (fraction * 100.0).round() as i64
}

/// `2` for 2.0, `0.25` for 0.25: cores as a person writes them.
fn cores_text(cores: f64) -> String {
    let text = format!("{cores:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    let unit = if text == "1" { "core" } else { "cores" };
    format!("{text} {unit}")
}

impl ClientSummary {
    /// Names who runs on the client's cores besides it (`None`: nobody known).
    pub fn set_shared_with(&mut self, who: Option<&'static str>) {
        self.shared_with = who;
        self.server_shares_cores = who.is_some();
    }

    /// The value of the console's `Client` line (the label is the caller's).
    pub fn console_line(&self) -> String {
        if self.samples == 0 {
            return "not sampled: the run ended before the first sample".to_string();
        }
        let of = match self.cpu_quota_cores {
            Some(quota) if quota < self.cpuset_cores as f64 => format!(
                "{} (CPU quota; {} in its cpuset)",
                cores_text(quota),
                cores_text(self.cpuset_cores as f64)
            ),
            _ => cores_text(self.cpuset_cores as f64),
        };
        let mut line = format!(
            "peak CPU {} % of {of} (mean {} %), RSS {}",
            percent(self.peak_cpu_utilisation),
            percent(self.mean_cpu_utilisation),
            crate::units::bytes(self.peak_rss_bytes),
        );
        if let (Some(periods), Some(throttled), Some(ns)) =
            (self.nr_periods, self.nr_throttled, self.throttled_ns)
        {
            if throttled > 0 {
                line += &format!(
                    "; throttled in {throttled} of {periods} periods ({:.2} s)",
                    ns as f64 / 1e9
                );
            }
        }
        line += match self.saturation {
            Some(Saturation::Cpu) => {
                " — saturated: these numbers describe the client, not the server; give it more \
                 cores or fewer workers"
            }
            Some(Saturation::CpuQuota) => {
                " — saturated (CPU quota): these numbers describe the client, not the server; \
                 raise its CPU limit or use fewer workers"
            }
            None => " — not saturated",
        };
        if let Some(sharing) = self.sharing() {
            line += &format!(" — {sharing}");
        }
        line
    }

    /// Who shares the client's cores, as the `Client` line says it ("the embedded server
    /// shares these 2 cores"); `None` when the server is elsewhere.
    pub fn sharing(&self) -> Option<String> {
        if !self.server_shares_cores {
            return None;
        }
        let who = self.shared_with.unwrap_or("the server");
        let these = if self.cpuset_cores == 1 {
            "this"
        } else {
            "these"
        };
        Some(format!(
            "{who} shares {these} {}",
            cores_text(self.cpuset_cores as f64)
        ))
    }

    /// The verdict's finding when the client was saturated ("the client was saturated (peak
    /// CPU 92 % of its 2 cores): …"); `None` when it was not.
    pub fn saturated_finding(&self) -> Option<String> {
        let (what, advice) = match self.saturation? {
            Saturation::Cpu => (
                format!(
                    "peak CPU {} % of its {}",
                    percent(self.peak_cpu_utilisation),
                    cores_text(self.cpu_limit_cores)
                ),
                "give it more cores or fewer workers",
            ),
            Saturation::CpuQuota => (
                format!(
                    "CPU quota of {}: peak {} %, throttled in {} of {} periods",
                    cores_text(self.cpu_limit_cores),
                    percent(self.peak_cpu_utilisation),
                    self.nr_throttled.unwrap_or(0),
                    self.nr_periods.unwrap_or(0)
                ),
                "raise its CPU limit or use fewer workers",
            ),
        };
        Some(format!(
            "the client was saturated ({what}): throughput and latency describe the client, \
             not the server; {advice}"
        ))
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A sampled client on 2 cores, 97 % at its peak (not yet judged).
    pub fn summary() -> ClientSummary {
        ClientSummary {
            samples: 10,
            cores: 2,
            cpu_quota_cores: None,
            cpu_quota_source: None,
            cpuset_cores: 2,
            cpu_limit_cores: 2.0,
            peak_cpu_utilisation: 0.97,
            mean_cpu_utilisation: 0.8,
            peak_rss_bytes: 43_200_000,
            sampled_ns: 4_000_000_000,
            throttled_ns: Some(0),
            nr_periods: Some(0),
            nr_throttled: Some(0),
            throttled_share: None,
            saturated: false,
            saturation: None,
            server_shares_cores: false,
            target_interface: None,
            link_capacity_bps: None,
            host_cores: None,
            host_busy_cores: None,
            host_other_cores: None,
            link_capacity_source: None,
            tcp: None,
            shared_with: None,
        }
    }

    #[test]
    fn the_line_says_not_sampled_before_the_first_sample() {
        let mut s = summary();
        s.samples = 0;
        assert_eq!(
            s.console_line(),
            "not sampled: the run ended before the first sample"
        );
    }
}
