//! The client-CPU rule: was the load generator the bottleneck of the run? It sets
//! [`ClientSummary`]'s `saturated` (run.json `client.saturated`) and `saturation` from the
//! numbers the client monitor measured, by `contract/verdict.json`'s `client_*` thresholds:
//!
//! - its peak CPU, measured against the CPU it may use (`cpu_limit_cores`: its cores, or its
//!   cgroup quota when that is smaller), rounds to `client_cpu_saturated_percent` or more —
//!   rounded the way the console prints it, so "90 %" is never followed by "not saturated"; or
//! - its cgroup throttled it for a material share of the run: in more than
//!   `client_throttled_periods_share` of the CFS periods, or for more than
//!   `client_throttled_wall_share` of the sampled wall time. A throttled process cannot show
//!   high utilisation in one-second samples (it runs 25 ms of each 100 ms period at full
//!   speed, then waits), so throttling is evidence on its own.

use super::rule::T;
use crate::sysmon::{percent, ClientSummary, Saturation};

/// Sets `throttled_share`, `saturated` and `saturation` from the numbers.
pub fn judge(c: &mut ClientSummary) {
    c.throttled_share = match (c.nr_throttled, c.nr_periods) {
        (Some(throttled), Some(periods)) if periods > 0 => Some(throttled as f64 / periods as f64),
        _ => None,
    };
    let throttled_wall_share = match (c.throttled_ns, c.sampled_ns) {
        (Some(ns), wall) if wall > 0 => ns as f64 / wall as f64,
        _ => 0.0,
    };
    c.saturation = saturation(
        (c.samples > 0).then_some(c.peak_cpu_utilisation),
        c.throttled_share,
        throttled_wall_share,
        c.cpu_quota_cores.is_some_and(|q| q < c.cpuset_cores as f64),
    );
    c.saturated = c.saturation.is_some();
}

/// The rule on its numbers: the peak CPU share (`None`: not sampled), the throttled shares,
/// and whether a cgroup quota below the cpuset binds.
pub fn saturation(
    peak_cpu: Option<f64>,
    throttled_periods_share: Option<f64>,
    throttled_wall_share: f64,
    quota_binds: bool,
) -> Option<Saturation> {
    let throttled = throttled_periods_share.unwrap_or(0.0) > T.client_throttled_periods_share
        || throttled_wall_share > T.client_throttled_wall_share;
    let busy = peak_cpu.is_some_and(|p| percent(p) as f64 >= T.client_cpu_saturated_percent);
    match (busy, throttled) {
        (_, true) => Some(Saturation::CpuQuota),
        (true, false) if quota_binds => Some(Saturation::CpuQuota),
        (true, false) => Some(Saturation::Cpu),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysmon::summary::tests::summary;
    use crate::sysmon::CgroupVersion;

    #[test]
    fn the_rule_follows_the_contracts_vectors() {
        let contract: serde_json::Value =
            serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap();
        for v in contract["client_vectors"].as_array().unwrap() {
            let got = saturation(
                v["peak_cpu"].as_f64(),
                v["throttled_periods_share"].as_f64(),
                v["throttled_wall_share"].as_f64().unwrap(),
                v["quota_binds"] == true,
            );
            let name = got.map(|s| match s {
                Saturation::Cpu => "cpu",
                Saturation::CpuQuota => "cpu-quota",
            });
            assert_eq!(name, v["saturation"].as_str(), "{v}");
        }
    }

    #[test]
    fn sysmon_console_line_says_whether_the_client_was_saturated() {
        let mut s = summary();
        judge(&mut s);
        assert_eq!(
            s.console_line(),
            "peak CPU 97 % of 2 cores (mean 80 %), RSS 41.2 MiB — saturated: these numbers \
             describe the client, not the server; give it more cores or fewer workers"
        );
        s.cpuset_cores = 1;
        s.peak_cpu_utilisation = 0.42;
        s.mean_cpu_utilisation = 0.3;
        judge(&mut s);
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
            judge(&mut s);
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
        judge(&mut s);
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
        judge(&mut s);
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
        judge(&mut s);
        assert!(!s.saturated, "{}", s.console_line());
        // Few periods but long: 0.3 s of 4 s is more than 5 % of the wall time.
        s.throttled_ns = Some(300_000_000);
        judge(&mut s);
        assert_eq!(s.saturation, Some(Saturation::CpuQuota));
        // A quota above the cores does not bind: busy cores are plain CPU saturation.
        let mut s = summary();
        s.cpu_quota_cores = Some(4.0);
        judge(&mut s);
        assert_eq!(s.saturation, Some(Saturation::Cpu));
    }

    #[test]
    fn the_line_names_the_server_that_shares_the_cores() {
        let mut s = summary();
        s.set_shared_with(Some("the embedded server"));
        judge(&mut s);
        assert!(
            s.console_line()
                .ends_with("fewer workers — the embedded server shares these 2 cores"),
            "{}",
            s.console_line()
        );
    }
}
