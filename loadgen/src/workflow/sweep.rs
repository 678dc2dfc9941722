//! `loadgen sweep`: a run per concurrency level (closed) or arrival rate (open), each into
//! its own folder, each compared with R(1)'s prediction when a calibration is given; the
//! levels' table and `sweep.json`. Where the sweep as a whole stops is the analysis's.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{local_only, read_calibration, workflow_dir, WorkflowPage};
use crate::cli::SweepArgs;
use crate::config::{ConfigError, ModelChoice, RunConfig, RunInputs, SweepLevel};
use crate::report::thresholds::{self, ThresholdResult};
use crate::report::write_json_atomically;
use crate::runner::{run, RunError, RunOutcome};
use crate::stop::StopSignal;
use crate::units::duration;

/// One level of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// Workers (closed) or requests/s (open).
    pub level: f64,
    pub run_dir: PathBuf,
    pub requests: u64,
    pub failed: u64,
    pub throughput_rps: f64,
    pub mean_latency_ns: f64,
    pub p99_latency_ns: u64,
    /// Effective concurrency X · R̄ (Little's Law): how many requests were really in flight.
    pub n_eff: f64,
    /// N / R(1), for closed-model levels when R(1) is known.
    pub predicted_rps: Option<f64>,
    /// The engine's verdict on this level's run (its run.json `verdict.cause`); where the
    /// sweep as a whole stops is the analysis's (`loadgen-analyze explain`).
    pub verdict: crate::verdict::Cause,
    /// How long the level ran (its JUnit suite's time).
    #[serde(skip)]
    pub wall_time_s: f64,
    /// The thresholds judged on this level's run (absent when none were given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub kind: &'static str,
    pub model: &'static str,
    pub calibration_r1_ns: Option<f64>,
    pub levels: Vec<Level>,
    /// False when a level crossed a threshold (absent when none were given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds_passed: Option<bool>,
}

impl Sweep {
    /// 99 when a level crossed a threshold, else 0 (the caller adds the stop reason's).
    pub fn exit_code(&self) -> i32 {
        match self.thresholds_passed {
            Some(false) => thresholds::EXIT_CODE,
            _ => 0,
        }
    }

    /// The Thresholds block: each level's judgement, and which levels crossed.
    pub fn render_thresholds(&self) -> String {
        thresholds::block(&self.judged())
    }

    /// Each level's name (`N = 8`, `rate = 400`) and its judged thresholds.
    pub fn judged(&self) -> Vec<(String, &[ThresholdResult])> {
        let unit = if self.model == "open" { "rate" } else { "N" };
        self.levels
            .iter()
            .map(|l| (format!("{unit} = {}", l.level), &l.thresholds[..]))
            .collect()
    }

    /// The levels' table and the footer that explains its columns; the predicted columns
    /// only when a level has a prediction (an open sweep has none: N is not set there).
    /// One JUnit suite per level, `NAME: N = 8` (`--junit-name` or `--out`'s folder), else
    /// just `N = 8`.
    pub fn junit_suites(&self, name: Option<&str>) -> Vec<crate::report::junit::Suite> {
        let judged = self.judged();
        let named = |level: String| name.map_or(level.clone(), |name| format!("{name}: {level}"));
        (self.levels.iter().zip(judged))
            .map(|(l, (level, results))| {
                crate::report::junit::Suite::of(named(level), l.wall_time_s, results)
            })
            .collect()
    }

    /// The levels' table and the footer that explains its columns; the predicted columns
    /// only when a level has a prediction (an open sweep has none: N is not set there).
    pub fn render(&self) -> String {
        let unit = if self.model == "open" { "rate" } else { "N" };
        let predicts = self.levels.iter().any(|l| l.predicted_rps.is_some());
        let mut out = format!(
            "  {unit:>8}  {:>10}  {:>9}  {:>9}  {:>8}",
            "X req/s", "mean R", "p99", "N_eff"
        );
        if predicts {
            out += &format!("  {:>11}  {:>8}", "predicted", "X/pred");
        }
        out.push('\n');
        for l in &self.levels {
            out += &format!(
                "  {:>8}  {:>10.1}  {:>9}  {:>9}  {:>8.1}",
                l.level,
                l.throughput_rps,
                duration(l.mean_latency_ns),
                duration(l.p99_latency_ns as f64),
                l.n_eff,
            );
            if predicts {
                let (predicted, ratio) = match l.predicted_rps {
                    Some(p) => (format!("{p:.1}"), format!("{:.2}", l.throughput_rps / p)),
                    None => ("-".to_string(), "-".to_string()),
                };
                out += &format!("  {predicted:>11}  {ratio:>8}");
            }
            out.push('\n');
        }
        out += "\n  N_eff = X · mean R (Little's Law)";
        if predicts {
            out += "; predicted = N / R(1), an upper bound";
        }
        out + ".\n"
    }
}

/// Runs every level of a sweep into `--out DIR/level-…`, then writes `DIR/sweep.json`.
pub async fn sweep(args: &SweepArgs, stop: StopSignal) -> Result<(Sweep, PathBuf), RunError> {
    let inputs = RunInputs::read(args.into())?;
    local_only("sweep", inputs.out())?;
    let dir = workflow_dir(args.output.out.as_deref(), "sweep")?;
    let (page, inputs) = WorkflowPage::start(&args.dashboard, "sweep", title(args), inputs)?;
    let mut calibration_r1_ns = match &args.calibration {
        Some(path) => Some(read_calibration(path)?),
        None => None,
    };
    let open = !args.rate_levels.is_empty();
    let levels: Vec<SweepLevel> = if open {
        args.rate_levels
            .iter()
            .map(|&r| SweepLevel::Rate(r))
            .collect()
    } else {
        args.levels
            .iter()
            .map(|&n| SweepLevel::Workers(n))
            .collect()
    };
    let configs = level_configs(&inputs, &dir, &levels)?;
    let mut results = Vec::new();
    let mut last_metrics = None;
    for (level, (name, config)) in levels.into_iter().zip(configs) {
        if !config.output.json {
            eprintln!("\n== sweep {name} ==");
        }
        // The previous level's endpoint goes first: this level binds the same address.
        drop(last_metrics.take());
        let outcome = run(config, stop.child()).await?;
        last_metrics = outcome.metrics.clone();
        let value = level_value(level);
        let mut level_result = summarize(value, &outcome);
        level_result.thresholds = outcome.thresholds;
        if level == SweepLevel::Workers(1) && calibration_r1_ns.is_none() {
            calibration_r1_ns = Some(level_result.mean_latency_ns);
        }
        if let Some(page) = &page {
            page.point(&level_result);
        }
        results.push(level_result);
        if stop.is_draining() {
            break;
        }
    }
    for level in &mut results {
        level.predicted_rps = match (open, calibration_r1_ns) {
            (false, Some(r1)) => Some(level.level * 1e9 / r1),
            _ => None,
        };
    }
    let judged = results.iter().any(|l| !l.thresholds.is_empty());
    let sweep = Sweep {
        kind: "sweep",
        model: if open { "open" } else { "closed" },
        calibration_r1_ns,
        thresholds_passed: judged
            .then(|| results.iter().all(|l| !thresholds::crossed(&l.thresholds))),
        levels: results,
    };
    let path = dir.join("sweep.json");
    write_json_atomically(&path, &sweep).map_err(|source| RunError::Write { path, source })?;
    let page = async {
        if let Some(page) = page {
            page.finish(&sweep, &stop).await;
        }
    };
    let metrics = async {
        if let Some(metrics) = last_metrics {
            metrics.linger(&stop).await;
        }
    };
    tokio::join!(page, metrics);
    Ok((sweep, dir))
}

/// The page's title: the levels swept.
fn title(args: &SweepArgs) -> String {
    let list = |levels: Vec<String>| levels.join(", ");
    match args.rate_levels.is_empty() {
        true => format!(
            "sweep of N = {} (closed model)",
            list(args.levels.iter().map(u32::to_string).collect())
        ),
        false => format!(
            "sweep of rates {} req/s (open model)",
            list(args.rate_levels.iter().map(f64::to_string).collect())
        ),
    }
}

/// A level's value as sweep.json records it: workers, or requests/s.
fn level_value(level: SweepLevel) -> f64 {
    match level {
        SweepLevel::Workers(n) => f64::from(n),
        SweepLevel::Rate(rate) => rate,
    }
}

/// A level's folder under the sweep's directory.
fn level_name(level: SweepLevel) -> String {
    match level {
        SweepLevel::Workers(n) => format!("level-{n:04}"),
        SweepLevel::Rate(rate) => format!("rate-{rate}"),
    }
}

/// Every level's name and config, made from `inputs` and checked before the first level
/// runs, so a bad or repeated level is refused up front instead of after the levels before
/// it (with no sweep.json).
fn level_configs(
    inputs: &RunInputs,
    dir: &Path,
    levels: &[SweepLevel],
) -> Result<Vec<(String, RunConfig)>, RunError> {
    let mut configs: Vec<(String, RunConfig)> = Vec::new();
    for &level in levels {
        let name = level_name(level);
        if configs.iter().any(|(seen, _)| *seen == name) {
            let (flag, value) = match level {
                SweepLevel::Workers(n) => ("--levels", n.to_string()),
                SweepLevel::Rate(rate) => ("--rate-levels", rate.to_string()),
            };
            return Err(ConfigError::SweepLevels(format!(
                "{flag} lists {value} twice; give each level once, e.g. {flag} 1,2,4"
            ))
            .into());
        }
        let mut config = inputs.config(ModelChoice::Level(level), Some(&dir.join(&name)))?;
        if !configs.is_empty() {
            // Later levels start when the one before ends, not at --start-at: their lateness
            // after it is not skew and is not recorded.
            config.sharding.waits_for_start_at = false;
            // The gauges were held to the scrape before the first level.
            config.evidence.server_metrics.check_before_run = false;
        }
        configs.push((name, config));
    }
    // Live metrics linger once, after the last level.
    let last = configs.len().saturating_sub(1);
    for (_, config) in &mut configs[..last] {
        config.output.metrics.linger = std::time::Duration::ZERO;
    }
    Ok(configs)
}

/// A level's line of the sweep: its summary, and its run's verdict.
fn summarize(level: f64, outcome: &RunOutcome) -> Level {
    let (run_dir, summary) = (&outcome.run_dir, &outcome.summary);
    // One phase (`main`) covers every op of a closed or open run.
    let latency = summary.phases.first().and_then(|p| p.latency);
    let mean = latency.map_or(0.0, |l| l.mean_ns);
    Level {
        level,
        wall_time_s: summary.wall_time_ns as f64 / 1e9,
        run_dir: run_dir.to_path_buf(),
        requests: summary.requests,
        failed: summary.failed,
        throughput_rps: summary.throughput_rps,
        mean_latency_ns: mean,
        p99_latency_ns: latency.map_or(0, |l| l.p99_ns),
        n_eff: summary.throughput_rps * mean / 1e9,
        predicted_rps: None,
        verdict: outcome.verdict.cause,
        thresholds: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_args(flags: &[&str]) -> SweepArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["loadgen", "sweep"].iter().chain(flags))
            .expect("valid flags");
        let crate::cli::Command::Sweep(args) = cli.command else {
            panic!("not a sweep")
        };
        *args
    }

    /// Issue 27: every level of a sweep with `--start-at` recorded how late it started after
    /// it — seconds for the later levels, which start when the one before ends — as if the
    /// shards were that far apart; and live metrics are to linger once, after the last level.
    #[test]
    fn regression_later_levels_record_no_start_skew_and_metrics_linger_after_the_last() {
        let in_a_minute = (chrono::Utc::now().timestamp_millis() + 60_000).to_string();
        let args = sweep_args(&[
            "--levels",
            "1,2,4",
            "--start-at",
            &in_a_minute,
            "--metrics-addr",
            "127.0.0.1:0",
        ]);
        let inputs = RunInputs::read((&args).into()).unwrap();
        let levels = [1, 2, 4].map(SweepLevel::Workers);
        let configs = level_configs(&inputs, Path::new("unused"), &levels).unwrap();
        let waits: Vec<bool> = configs
            .iter()
            .map(|(_, c)| c.sharding.waits_for_start_at)
            .collect();
        assert_eq!(waits, [true, false, false]);
        assert!(configs
            .iter()
            .all(|(_, c)| c.sharding.start_at_unix_ns.is_some()));
        let lingers: Vec<u64> = configs
            .iter()
            .map(|(_, c)| c.output.metrics.linger.as_secs())
            .collect();
        assert_eq!(lingers, [0, 0, 15]);
    }
}
