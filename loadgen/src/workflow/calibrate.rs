//! `loadgen calibrate`: one worker, a warm-up, then the measured requests — R(1), one
//! worker's throughput, and the prediction X(N) = N / R(1) for the levels asked. A run of the
//! command line like any other, whose run.json says `kind: calibration` and carries the result.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::local_only;
use crate::cli::CalibrateArgs;
use crate::config::{ConfigError, ModelChoice, RunInputs};
use crate::record::phase::WARMUP;
use crate::report::thresholds::{self, ThresholdResult};
use crate::report::RunSummary;
use crate::runner::{run_with, RunError, RunJsonExtra};
use crate::scenario::schema::{ModelSpec, PhaseSpec, PhasedSpec, WorkerCount};
use crate::stop::StopSignal;
use crate::units::duration;

/// The measured phase's label in a calibration run (the warm-up's is [`WARMUP`]).
pub const CALIBRATION: &str = "calibration";

/// What `loadgen calibrate` measured and predicts.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Mean response time with one worker, over the measured requests.
    pub r1_ns: f64,
    /// Mean response time per op.
    pub r1_by_op_ns: std::collections::BTreeMap<String, f64>,
    /// Throughput of the one worker.
    pub x1_rps: f64,
    pub requests: u64,
    /// How long the calibration ran, warm-up included (the JUnit suite's time).
    #[serde(skip)]
    pub wall_time_s: f64,
    /// X(N) = N / R(1): an upper bound, reached only if nothing queues.
    pub predictions: Vec<Prediction>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub n: u32,
    pub x_rps: f64,
}

impl Calibration {
    /// The calibration a run's summary holds: R(1) over its measured phase, and predictions
    /// for `levels`.
    fn of(summary: &RunSummary, levels: &[u32]) -> Self {
        let phase = summary.phases.iter().find(|p| p.phase == CALIBRATION);
        let r1_ns = phase
            .and_then(|p| p.latency.map(|l| l.mean_ns))
            .unwrap_or(f64::NAN);
        Calibration {
            r1_ns,
            r1_by_op_ns: phase
                .map(|p| p.op_mean_latency_ns.clone())
                .unwrap_or_default(),
            x1_rps: phase.map_or(0.0, |p| p.throughput_rps),
            requests: phase.map_or(0, |p| p.requests),
            wall_time_s: summary.wall_time_ns as f64 / 1e9,
            predictions: Calibration::predict(r1_ns, levels),
        }
    }

    fn predict(r1_ns: f64, levels: &[u32]) -> Vec<Prediction> {
        levels
            .iter()
            .map(|&n| Prediction {
                n,
                x_rps: f64::from(n) * 1e9 / r1_ns,
            })
            .collect()
    }

    /// The console table.
    pub fn render(&self, run_dir: &Path) -> String {
        let mut out = format!(
            "Calibration: 1 worker, {}\n  R(1)  {} mean response time\n",
            crate::units::count(self.requests, "request"),
            duration(self.r1_ns)
        );
        for (op, r) in &self.r1_by_op_ns {
            out += &format!("        {} {op}\n", duration(*r));
        }
        out += &format!("  X(1)  {:.1} req/s\n\n", self.x1_rps);
        out += "  Little's Law prediction X(N) = N / R(1) — an upper bound, reached only if nothing queues:\n";
        out += &format!("  {:>6}  {:>14}\n", "N", "X(N) req/s");
        for p in &self.predictions {
            out += &format!("  {:>6}  {:>14.1}\n", p.n, p.x_rps);
        }
        out += &format!("\n  Run directory  {}\n", run_dir.display());
        out
    }
}

/// What `loadgen calibrate` did: the calibration, its run directory, and its thresholds.
#[derive(Debug, Clone, Serialize)]
pub struct Calibrated {
    pub run_dir: PathBuf,
    pub calibration: Calibration,
    /// The scenario's `thresholds` and `--threshold`s, judged on the calibration run.
    pub thresholds: Vec<ThresholdResult>,
    /// Mean latency of the measured requests that succeeded, and how many failed: R(1) as a
    /// capacity search starts from it (fast errors say nothing of how long a request takes).
    #[serde(skip)]
    pub successful_r1: (f64, u64),
}

impl Calibrated {
    /// The console text: the calibration table and the Thresholds block.
    pub fn render(&self) -> String {
        let judged = [("calibration".to_string(), &self.thresholds[..])];
        self.calibration.render(&self.run_dir) + &thresholds::block(&judged)
    }

    /// 99 when a threshold was crossed, else 0 (the caller adds the stop reason's).
    pub fn exit_code(&self) -> i32 {
        if thresholds::crossed(&self.thresholds) {
            thresholds::EXIT_CODE
        } else {
            0
        }
    }
}

/// Runs a calibration; its run.json says `kind: calibration` and carries the result.
pub async fn calibrate(args: &CalibrateArgs, stop: StopSignal) -> Result<Calibrated, RunError> {
    let inputs = RunInputs::read(args.into())?;
    local_only("calibrate", inputs.out())?;
    let calibration = CalibrationRun {
        warmup: args.warmup,
        requests: args.requests,
        levels: &args.levels,
        out: None,
    };
    calibration.run(&inputs, stop).await
}

/// One calibration: its warm-up and measured requests, the levels to predict, where it goes
/// (`None`: the command's `--out`).
pub struct CalibrationRun<'a> {
    pub warmup: u64,
    pub requests: u64,
    pub levels: &'a [u32],
    pub out: Option<&'a Path>,
}

impl CalibrationRun<'_> {
    /// Runs it as a run of `inputs` with one worker (warm-up, then the measured requests):
    /// what runs, and what run.json records, is that spec, compiled like any scenario's model.
    pub async fn run(&self, inputs: &RunInputs, stop: StopSignal) -> Result<Calibrated, RunError> {
        if self.requests == 0 {
            return Err(ConfigError::Zero {
                flag: "-n/--requests",
            }
            .into());
        }
        let model = ModelChoice::Spec(calibration_model(self.warmup, self.requests));
        let mut config = inputs.config(model, self.out)?;
        config.judgement.keep_samples = true;
        let levels = self.levels.to_vec();
        let extra: RunJsonExtra = Box::new(move |summary| {
            let calibration = Calibration::of(summary, &levels);
            serde_json::Map::from_iter([
                ("kind".to_string(), "calibration".into()),
                (
                    "calibration".to_string(),
                    serde_json::to_value(&calibration).expect("plain data"),
                ),
            ])
        });
        let outcome = run_with(config, stop.clone(), Some(extra)).await?;
        outcome.linger_metrics(&stop).await;
        let successful_r1 = outcome
            .judged
            .rows
            .as_ref()
            .map_or((f64::NAN, 0), |rows| rows.successful_mean_ns());
        Ok(Calibrated {
            successful_r1,
            calibration: Calibration::of(&outcome.summary, self.levels),
            run_dir: outcome.run_dir,
            thresholds: outcome.thresholds,
        })
    }
}

/// The calibration's model: one worker sending `warmup` requests (if any), then, once they
/// are done, the `requests` that are measured.
fn calibration_model(warmup: u64, requests: u64) -> ModelSpec {
    let phase = |name: &str, requests: u64, after: Option<&str>| PhaseSpec {
        name: name.to_string(),
        workers: WorkerCount::Count(1),
        requests_per_worker: Some(requests),
        walk: None,
        after: after.map(String::from),
        when_done: None,
        at: None,
        fields: Default::default(),
    };
    let mut phases = Vec::new();
    if warmup > 0 {
        phases.push(phase(WARMUP, warmup, None));
    }
    phases.push(phase(CALIBRATION, requests, (warmup > 0).then_some(WARMUP)));
    ModelSpec::Phased(PhasedSpec {
        max_workers: 1,
        phases,
        ..Default::default()
    })
}
