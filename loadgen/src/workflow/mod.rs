//! The workflows: compositions of ordinary runs, beside each other — [`mod@calibrate`] (one
//! worker → R(1) and the prediction X(N) = N / R(1)), [`mod@sweep`] (a run per concurrency level
//! or arrival rate, each compared with the prediction) and [`capacity`] (a search over
//! open-model rates for the highest one meeting an SLO), and [`spread`] (one run's workers
//! over several processes of this machine, when one process cannot hold its connections) —
//! with what they share below them, here: where a workflow's directory goes, and reading a
//! calibration a user names.
//!
//! Each reads its command line once into a [`RunInputs`] and makes every run from it with
//! its own model and output folder; each run writes a normal run
//! directory through [`crate::run`] and hands back a typed [`RunOutcome`](crate::RunOutcome)
//! — its summary, its verdict and what the verdict saw — so a workflow never edits flags or
//! reads back what a run just wrote. A workflow only chooses the models, reads the outcomes
//! and adds its own table and JSON (`calibration` in run.json, `sweep.json`,
//! `capacity.json`). It never measures anything, nor chooses a cause: the verdict does.
//!
//! With `--dashboard` a workflow has one page (`WorkflowPage`), bound before its first run:
//! each run it makes appends its seconds to it, the workflow adds each finished level as a
//! point (as its JSON file records it), and the final event is that file's content.

pub mod calibrate;
pub mod capacity;
pub mod spread;
pub mod sweep;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::DashboardArgs;
use crate::config::{ConfigError, DashboardSettings, Output, RunInputs};
use crate::report::dashboard::{DashboardListener, Page};
use crate::runner::RunError;
use crate::stop::StopSignal;

pub use self::calibrate::{calibrate, Calibrated, Calibration, CalibrationRun, CALIBRATION};
pub use self::sweep::{sweep, Level, Sweep};

/// A workflow's directory holds its runs beside its own file (a calibration's run.json,
/// sweep.json, capacity.json), which a later command reads by path (a sweep, its
/// calibration): it is local. Its runs are never read back (they hand over typed outcomes).
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

/// A workflow's `--dashboard` / `--dashboard-out` page: one for the whole command.
#[derive(Debug)]
pub struct WorkflowPage {
    page: Page,
    kind: &'static str,
}

impl WorkflowPage {
    /// The page, when asked for, bound before the first run (a taken port is bad input, exit
    /// 2); `inputs` made so that every run appends its seconds to it.
    pub(crate) fn start(
        args: &DashboardArgs,
        kind: &'static str,
        title: String,
        inputs: RunInputs,
    ) -> Result<(Option<WorkflowPage>, RunInputs), RunError> {
        let settings = DashboardSettings::from_args(args);
        if !settings.wanted() {
            return Ok((None, inputs));
        }
        let addr = settings.addr.unwrap_or(([127, 0, 0, 1], 0).into());
        let taken = |source| RunError::DashboardAddr { addr, source };
        let listener = match settings.addr {
            Some(addr) => Some(DashboardListener::bind(addr).map_err(taken)?),
            None => None,
        };
        if let Some(listener) = &listener {
            listener.announce();
        }
        let page = Page::start(title, listener, settings.out, settings.linger).map_err(taken)?;
        let inputs = inputs.with_dashboard_page(page.shared());
        Ok((Some(WorkflowPage { page, kind }), inputs))
    }

    /// A finished level, as the workflow's JSON file records it.
    pub(crate) fn point(&self, level: &impl Serialize) {
        let point = serde_json::json!({ "kind": self.kind, "level": level });
        self.page.point(&point);
    }

    /// The workflow is over: its file's content (`sweep.json`, `capacity.json`) as the final
    /// event, the page saved with `--dashboard-out`, and served for `--dashboard-linger`.
    pub(crate) async fn finish(self, file: &impl Serialize, stop: &StopSignal) {
        let mut last = serde_json::json!({ "kind": self.kind });
        last[self.kind] = serde_json::json!(file);
        let mut warnings = Vec::new();
        let served = self.page.finish(&last, &mut warnings);
        for warning in warnings {
            eprintln!("warning: {warning}");
        }
        served.linger(stop).await;
    }
}
