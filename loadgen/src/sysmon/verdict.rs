//! The verdict on the client: was it the bottleneck of the run? One summary of the samples
//! ([`ClientSummary`], run.json's `client` object) and the console's `Client` line.
//!
//! The rule (run.json `client.saturated`): the client is saturated when
//! - its peak CPU, measured against the CPU it may use (`cpu_limit_cores`: its cores, or its
//!   cgroup quota when that is smaller), rounds to [`SATURATED_PERCENT`] % or more — rounded
//!   the way the console prints it, so "90 %" is never followed by "not saturated"; or
//! - its cgroup throttled it for a material share of the run: in more than
//!   [`THROTTLED_PERIODS_SHARE`] of the CFS periods, or for more than
//!   [`THROTTLED_WALL_SHARE`] of the sampled wall time. A throttled process cannot show high
//!   utilisation in one-second samples (it runs 25 ms of each 100 ms period at full speed,
//!   then waits), so throttling is evidence on its own.
//!
//! It also says when the server shares the client's cores (the embedded demo server, or a
//! target on a loopback address): then a saturated client is also a starved server. This
//! module judges numbers it is given; sampling them is `mod.rs`'s job, reading the cgroup is
//! `cgroup`'s.

use serde::Serialize;

use super::cgroup::CgroupVersion;

/// Peak CPU (percent of the limit, rounded as displayed) from which the client is saturated.
pub const SATURATED_PERCENT: i64 = 90;
/// Throttled in more than this share of the CFS periods: saturated by its quota.
pub const THROTTLED_PERIODS_SHARE: f64 = 0.10;
/// Throttled for more than this share of the sampled wall time: saturated by its quota.
pub const THROTTLED_WALL_SHARE: f64 = 0.05;

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
    /// Who shares the cores, for the console ("the embedded server").
    #[serde(skip)]
    pub shared_with: Option<&'static str>,
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
    /// Sets `throttled_share`, `saturated` and `saturation` from the numbers.
    pub fn judge(&mut self) {
        self.throttled_share = match (self.nr_throttled, self.nr_periods) {
            (Some(throttled), Some(periods)) if periods > 0 => {
                Some(throttled as f64 / periods as f64)
            }
            _ => None,
        };
        let throttled_wall_share = match (self.throttled_ns, self.sampled_ns) {
            (Some(ns), wall) if wall > 0 => ns as f64 / wall as f64,
            _ => 0.0,
        };
        let throttled = self.throttled_share.unwrap_or(0.0) > THROTTLED_PERIODS_SHARE
            || throttled_wall_share > THROTTLED_WALL_SHARE;
        let busy = self.samples > 0 && percent(self.peak_cpu_utilisation) >= SATURATED_PERCENT;
        let quota_binds = self
            .cpu_quota_cores
            .is_some_and(|q| q < self.cpuset_cores as f64);
        self.saturation = match (busy, throttled) {
            (_, true) => Some(Saturation::CpuQuota),
            (true, false) if quota_binds => Some(Saturation::CpuQuota),
            (true, false) => Some(Saturation::Cpu),
            (false, false) => None,
        };
        self.saturated = self.saturation.is_some();
    }

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
        Some(format!(
            "{who} shares these {}",
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
mod tests {
    use super::*;

    fn summary() -> ClientSummary {
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
            link_capacity_source: None,
            shared_with: None,
        }
    }

    #[test]
    fn sysmon_console_line_says_whether_the_client_was_saturated() {
        let mut s = summary();
        s.judge();
        assert_eq!(
            s.console_line(),
            "peak CPU 97 % of 2 cores (mean 80 %), RSS 41.2 MiB — saturated: these numbers \
             describe the client, not the server; give it more cores or fewer workers"
        );
        s.cpuset_cores = 1;
        s.peak_cpu_utilisation = 0.42;
        s.mean_cpu_utilisation = 0.3;
        s.judge();
        assert_eq!(
            s.console_line(),
            "peak CPU 42 % of 1 core (mean 30 %), RSS 41.2 MiB — not saturated"
        );
        s.samples = 0;
        assert_eq!(
            s.console_line(),
            "not sampled: the run ended before the first sample"
        );
    }

    /// Issue 13 item 12: "peak CPU 90 % … not saturated" for a peak of 0.895. The verdict
    /// compares the percentage the line prints, so the two can never disagree.
    #[test]
    fn regression_peak_cpu_90_percent_is_never_called_not_saturated() {
        let mut s = summary();
        for i in 0..=300 {
            s.peak_cpu_utilisation = 0.88 + f64::from(i) * 0.0001;
            s.judge();
            let line = s.console_line();
            let shown: i64 = line["peak CPU ".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(s.saturated, shown >= 90, "{line}");
        }
        s.peak_cpu_utilisation = 0.895;
        s.judge();
        let line = s.console_line();
        assert!(
            !(line.starts_with("peak CPU 90 %") && line.contains("not saturated")),
            "{line}"
        );
    }

    /// The CPU-quota case of issue 11: 0.25 cores on a 2-core machine, throttled in 41 of 41
    /// periods; utilisation low against the cores, but the quota is the limit.
    #[test]
    fn a_throttled_client_is_saturated_by_its_quota() {
        let mut s = summary();
        s.cpu_quota_cores = Some(0.25);
        s.cpu_quota_source = Some(CgroupVersion::V2);
        s.cpu_limit_cores = 0.25;
        s.peak_cpu_utilisation = 0.6;
        s.mean_cpu_utilisation = 0.55;
        s.nr_periods = Some(41);
        s.nr_throttled = Some(41);
        s.throttled_ns = Some(2_450_000_000);
        s.judge();
        assert!(s.saturated);
        assert_eq!(s.saturation, Some(Saturation::CpuQuota));
        assert_eq!(s.throttled_share, Some(1.0));
        assert_eq!(
            s.console_line(),
            "peak CPU 60 % of 0.25 cores (CPU quota; 2 cores in its cpuset) (mean 55 %), RSS \
             41.2 MiB; throttled in 41 of 41 periods (2.45 s) — saturated (CPU quota): these \
             numbers describe the client, not the server; raise its CPU limit or use fewer \
             workers"
        );
        assert!(s
            .saturated_finding()
            .unwrap()
            .contains("CPU quota of 0.25 cores"));

        // Throttled in 2 of 41 periods for 10 ms: not material.
        s.nr_throttled = Some(2);
        s.throttled_ns = Some(10_000_000);
        s.judge();
        assert!(!s.saturated, "{}", s.console_line());
        // Few periods but long: 0.3 s of 4 s is more than 5 % of the wall time.
        s.throttled_ns = Some(300_000_000);
        s.judge();
        assert_eq!(s.saturation, Some(Saturation::CpuQuota));
        // A quota above the cores does not bind: busy cores are plain CPU saturation.
        let mut s = summary();
        s.cpu_quota_cores = Some(4.0);
        s.judge();
        assert_eq!(s.saturation, Some(Saturation::Cpu));
    }

    #[test]
    fn the_line_names_the_server_that_shares_the_cores() {
        let mut s = summary();
        s.set_shared_with(Some("the embedded server"));
        s.judge();
        assert!(
            s.console_line()
                .ends_with("fewer workers — the embedded server shares these 2 cores"),
            "{}",
            s.console_line()
        );
    }
}
