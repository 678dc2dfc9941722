//! The workflows: compositions of ordinary runs, beside each other — [`mod@calibrate`] (one
//! worker → R(1) and the prediction X(N) = N / R(1)), [`mod@sweep`] (a run per concurrency level
//! or arrival rate, each compared with the prediction) and [`capacity`] (a search over
//! open-model rates for the highest one meeting an SLO), and [`spread`] (one run's workers
//! over several processes of this machine, when one process cannot hold its connections) —
//! with what they share below them, here: where a workflow's directory goes, and reading a
//! calibration a user names.
//!
//! Each reads its command line once into a [`RunInputs`](crate::config::RunInputs) and makes
//! every run from it with its own model and output folder; each run writes a normal run
//! directory through [`crate::run`] and hands back a typed [`RunOutcome`](crate::RunOutcome)
//! — its summary, its verdict and what the verdict saw — so a workflow never edits flags or
//! reads back what a run just wrote. A workflow only chooses the models, reads the outcomes
//! and adds its own table and JSON (`calibration` in run.json, `sweep.json`,
//! `capacity.json`). It never measures anything, nor chooses a cause: the verdict does.

pub mod calibrate;
pub mod capacity;
pub mod spread;
pub mod sweep;

use std::path::{Path, PathBuf};

use crate::config::{ConfigError, Output};
use crate::runner::RunError;

pub use self::calibrate::{calibrate, Calibrated, Calibration, CalibrationRun, CALIBRATION};
pub use self::sweep::{sweep, Level, Sweep};

/// Calibrations and sweeps rewrite and read back their run directories, so they stay local.
pub(crate) fn local_only(command: &str, out: &Output) -> Result<(), ConfigError> {
    match out {
        Output::S3(location) => Err(ConfigError::Out(format!(
            "`loadgen {command}` writes a local directory, not {location}; give --out a \
             directory and upload it afterwards (e.g. aws s3 sync DIR {location}/)"
        ))),
        _ => Ok(()),
    }
}

/// A workflow's directory: `--out DIR`, new or empty; by default `runs/<kind>-<UTC time>`.
pub(crate) fn workflow_dir(out: Option<&Path>, kind: &str) -> Result<PathBuf, RunError> {
    let dir = out.map_or_else(
        || {
            Path::new("runs").join(format!(
                "{kind}-{}",
                chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
            ))
        },
        Path::to_path_buf,
    );
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(RunError::OutExists(dir));
    }
    Ok(dir)
}

/// R(1) of the calibration run in `dir` (`--calibration DIR`: a directory the user names,
/// written by an earlier `loadgen calibrate`).
pub(crate) fn read_calibration(dir: &Path) -> Result<f64, RunError> {
    let bad = |why: String| {
        RunError::Config(crate::config::ConfigError::Template(format!(
            "--calibration {}: {why}; give a run directory written by `loadgen calibrate`",
            dir.display()
        )))
    };
    let text = std::fs::read_to_string(dir.join("run.json")).map_err(|e| bad(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match json["calibration"]["r1_ns"].as_f64() {
        Some(r1_ns) if r1_ns.is_finite() && r1_ns >= 1.0 => Ok(r1_ns),
        Some(r1_ns) => Err(bad(format!(
            "its calibration.r1_ns is {r1_ns}, not a positive duration of at least 1 ns"
        ))),
        None => Err(bad("its run.json has no calibration.r1_ns".to_string())),
    }
}
