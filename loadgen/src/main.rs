//! The `loadgen` binary: parse the command line, build the runtime, call the library, print
//! the result, map errors to exit codes. Everything else lives in the library.

use std::process::ExitCode;

use loadgen::cli::{Cli, Command, ScenariosAction};
use loadgen::config::RunConfig;
use loadgen::report::junit::Suite;
use loadgen::stop::{ExitReason, StopSignal};
use loadgen::workflow::spread;

/// Writes to stdout, ignoring a reader that went away (`loadgen … --json | head`): the run's
/// results are on disk whatever happens to the printout.
fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// [`emit`]s `value` as pretty JSON and a newline.
fn emit_json(value: &impl serde::Serialize) {
    emit(&(serde_json::to_string_pretty(value).unwrap_or_default() + "\n"));
}

fn main() -> ExitCode {
    let matches = loadgen::cli::command()
        .try_get_matches_from(std::env::args_os())
        .unwrap_or_else(|e| e.exit());
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let code = match cli.command {
        Command::Run(args) => run(&args),
        Command::Calibrate(args) => calibrate(&args),
        Command::Sweep(args) => sweep(&args),
        Command::Capacity(args) => capacity(&args),
        Command::Scenarios(args) => scenarios(&args),
        Command::Upload(args) => upload(&args),
    };
    ExitCode::from(code as u8)
}

fn run(args: &loadgen::cli::RunArgs) -> i32 {
    let mut args = args.clone();
    if let Err(e) = spread::as_child(&mut args) {
        eprintln!("error: {e}");
        return 2;
    }
    let args = &args;
    if let Err(code) = outputs_clear(&args.output, None, args.dashboard.dashboard_out.as_deref()) {
        return code;
    }
    let config = match RunConfig::from_args(args) {
        Ok(config) => config,
        Err(e) => return fail(&e.into()),
    };
    let json = config.output.json;
    let output = args.output.clone();
    let owned = spread::OneProcess {
        junit: output.junit.is_some(),
        stdin_targets: args.target.targets.as_deref() == Some(std::path::Path::new("-")),
    };
    with_runtime(|stop| async move {
        if std::env::var_os(spread::CHILD_ENV).is_some() {
            spread::watch_parent(stop.clone());
        }
        match spread::plan(&config, owned).await {
            Ok(Some(plan)) => return run_spread(&plan, &config, &stop).await,
            Ok(None) => {}
            Err(e) => return fail(&e),
        }
        match loadgen::run(config, stop.clone()).await {
            Ok(outcome) => {
                print_outcome(&outcome, json, None);
                let name = suite_name(&output, &outcome.run_id);
                let time_s = outcome.summary.wall_time_ns as f64 / 1e9;
                let suites = [Suite::of(name, time_s, &outcome.thresholds)];
                if let Err(code) = write_junit(output.junit.as_deref(), &suites) {
                    return code;
                }
                outcome.linger_metrics(&stop).await;
                outcome.exit_code()
            }
            Err(e) => fail(&e),
        }
    })
}

/// A run's results on stdout: the console table, or with `--json` its document (a process of
/// a spread run adds what it hands its parent; a spread run adds its processes).
fn print_outcome(outcome: &loadgen::RunOutcome, json: bool, spread: Option<serde_json::Value>) {
    if !json {
        emit(&outcome.console);
        return;
    }
    let mut doc = serde_json::json!({
        "run_dir": outcome.location,
        "run_id": outcome.run_id,
        "exit_reason": outcome.exit_reason,
        "summary": outcome.summary,
        "verdict": outcome.verdict,
        "probe": outcome.probe,
    });
    if std::env::var_os(spread::CHILD_ENV).is_some() {
        doc["handover"] =
            serde_json::to_value(loadgen::runner::Handover::of(outcome)).unwrap_or_default();
    }
    if let Some(spread) = spread {
        doc["spread"] = spread;
    }
    emit_json(&doc);
}

/// `loadgen run` spread over several processes: one summary and verdict out of theirs.
async fn run_spread(plan: &spread::Spread, config: &RunConfig, stop: &StopSignal) -> i32 {
    eprintln!(
        "{} connections need more open files than one process may hold ({}): running {} \
         processes of loadgen, one shard each, into {}",
        plan.connections,
        plan.limit,
        plan.children.len(),
        plan.dir.display()
    );
    match spread::run(plan, stop).await {
        Ok(ends) => match spread::conclude(plan, config, ends) {
            Ok((outcome, code)) => {
                let spread = serde_json::json!({ "processes": plan.children.len() });
                print_outcome(&outcome, config.output.json, Some(spread));
                code
            }
            Err(e) => fail(&e),
        },
        Err(e) => fail(&e),
    }
}

/// Builds the runtime and runs `body` with a stop signal wired to Ctrl-C / SIGTERM.
///
/// `body` runs as a task on the runtime's worker threads, not on this thread in `block_on`:
/// the models' dispatchers then hand work to workers without waking another thread for every
/// request (measured: that cross-thread wake-up was a third of the open model's CPU).
fn with_runtime<F>(body: impl FnOnce(StopSignal) -> F) -> i32
where
    F: std::future::Future<Output = i32> + Send + 'static,
{
    let on_signal =
        "stopping: letting requests in flight finish (press Ctrl-C again to cut them off)";
    with_runtime_saying(on_signal.to_string(), body)
}

/// [`with_runtime`], saying `on_signal` at the first Ctrl-C / SIGTERM.
fn with_runtime_saying<F>(on_signal: String, body: impl FnOnce(StopSignal) -> F) -> i32
where
    F: std::future::Future<Output = i32> + Send + 'static,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async {
        let stop = StopSignal::new();
        tokio::spawn(watch_signals(stop.clone(), on_signal));
        match tokio::spawn(body(stop)).await {
            Ok(code) => code,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => 1,
        }
    })
}

/// `loadgen calibrate`.
fn calibrate(args: &loadgen::cli::CalibrateArgs) -> i32 {
    if let Err(code) = outputs_clear(&args.output, None, None) {
        return code;
    }
    let json = args.output.json;
    let args = args.clone();
    with_runtime(|stop| async move {
        let args = &args;
        match loadgen::workflow::calibrate(args, stop.clone()).await {
            Ok(calibrated) => {
                if json {
                    emit_json(&calibrated);
                } else {
                    emit(&calibrated.render());
                }
                let name = suite_name(&args.output, "calibration");
                let time_s = calibrated.calibration.wall_time_s;
                let suites = [Suite::of(name, time_s, &calibrated.thresholds)];
                if let Err(code) = write_junit(args.output.junit.as_deref(), &suites) {
                    return code;
                }
                workflow_exit_code(&stop, calibrated.exit_code())
            }
            Err(e) => fail(&e),
        }
    })
}

/// `loadgen sweep`.
fn sweep(args: &loadgen::cli::SweepArgs) -> i32 {
    let page = args.dashboard.dashboard_out.as_deref();
    if let Err(code) = outputs_clear(&args.output, args.calibration.as_deref(), page) {
        return code;
    }
    let json = args.output.json;
    let args = args.clone();
    with_runtime(|stop| async move {
        let args = &args;
        match loadgen::workflow::sweep(args, stop.clone()).await {
            Ok((sweep, dir)) => {
                if json {
                    emit_json(&sweep);
                } else {
                    emit(&format!(
                        "\nSweep ({} model) — {}\n",
                        sweep.model,
                        dir.display()
                    ));
                    emit(&sweep.render());
                    emit(&sweep.render_thresholds());
                }
                let named = args.output.junit_name.is_some() || args.output.out.is_some();
                let name = named.then(|| suite_name(&args.output, "sweep"));
                let suites = sweep.junit_suites(name.as_deref());
                if let Err(code) = write_junit(args.output.junit.as_deref(), &suites) {
                    return code;
                }
                workflow_exit_code(&stop, sweep.exit_code())
            }
            Err(e) => fail(&e),
        }
    })
}

/// `loadgen capacity`.
fn capacity(args: &loadgen::cli::CapacityArgs) -> i32 {
    let page = args.dashboard.dashboard_out.as_deref();
    if let Err(code) = outputs_clear(&args.output, args.calibration.as_deref(), page) {
        return code;
    }
    let args = args.clone();
    with_runtime(|stop| async move {
        let args = &args;
        match loadgen::workflow::capacity::capacity(args, stop.clone()).await {
            Ok((capacity, dir)) => {
                if args.output.json {
                    emit_json(&capacity);
                    for warning in &capacity.warnings {
                        eprintln!("warning: {warning}");
                    }
                } else {
                    emit(&loadgen::workflow::capacity::render::render(
                        &capacity, &dir,
                    ));
                }
                let code = capacity.exit_code(args.allow_unconverged);
                if let Err(code) = write_capacity_junit(&args.output, &capacity, code) {
                    return code;
                }
                workflow_exit_code(&stop, code)
            }
            Err(e) => fail(&e),
        }
    })
}

/// `loadgen upload DIR s3://BUCKET/PREFIX`.
fn upload(args: &loadgen::cli::UploadArgs) -> i32 {
    let args = args.clone();
    let on_signal = format!(
        "stopping the upload; {} stays as it is, so it can be uploaded again",
        args.dir.display()
    );
    with_runtime_saying(on_signal, |stop| async move {
        let uploaded =
            loadgen::store::s3::upload_run_dir(&args.dir, &args.to, args.upload_timeout, &stop);
        match uploaded.await {
            Ok((url, uploaded)) => {
                let report = &uploaded.report;
                if report.failed.is_empty() {
                    emit(&format!(
                        "uploaded {} ({}) to {url}\n",
                        loadgen::units::count(report.files as u64, "file"),
                        loadgen::units::count(report.bytes, "byte")
                    ));
                    return 0;
                }
                eprintln!(
                    "error: not every file reached {url}: {}; {dir} is unchanged: retry with \
                     `loadgen upload {dir} {to}`",
                    report.failed.join("; "),
                    dir = args.dir.display(),
                    to = args.to,
                );
                uploaded.stopped_by.map_or(1, ExitReason::exit_code)
            }
            Err(e) => fail(&e.into()),
        }
    })
}

/// Refuses, before anything runs or is written, a `--junit` or a workflow's `--out` that
/// lands on or inside a run directory the command writes (`--out`) or reads
/// (`--calibration`): exit 2, nothing lost.
fn outputs_clear(
    run: &loadgen::cli::OutputArgs,
    calibration: Option<&std::path::Path>,
    dashboard_out: Option<&std::path::Path>,
) -> Result<(), i32> {
    use loadgen::config::Output;
    let local_out = (run.out.as_deref())
        .filter(|out| matches!(Output::from_arg(Some(out)), Ok(Output::Dir(_))));
    let mut outputs = Vec::new();
    let mut runs = Vec::new();
    if let Some(junit) = run.junit.as_deref() {
        outputs.push(("--junit", junit));
    }
    if let Some(page) = dashboard_out {
        outputs.push(("--dashboard-out", page));
    }
    if let Some(out) = local_out {
        outputs.push(("--out", out));
        runs.push(("--out", out));
    }
    if let Some(calibration) = calibration {
        runs.push(("--calibration", calibration));
    }
    let page = dashboard_out.map(|page| ("--dashboard-out", page));
    loadgen::output_guard::check(&outputs, &runs)
        .and_then(|()| page.map_or(Ok(()), loadgen::output_guard::check_writable))
        .map_err(|e| {
            eprintln!("error: {e}");
            2
        })
}

/// A JUnit suite's name: `--junit-name`, else `--out`'s folder, else `fallback`.
fn suite_name(output: &loadgen::cli::OutputArgs, fallback: &str) -> String {
    let name = output.junit_name.as_deref();
    loadgen::report::junit::suite_name(name, output.out.as_deref(), fallback)
}

/// `--junit FILE`: the judged thresholds as JUnit XML. A file that cannot be written is
/// results not written: exit code 1, the run itself is on disk.
fn write_junit(path: Option<&std::path::Path>, suites: &[Suite]) -> Result<(), i32> {
    let Some(path) = path else { return Ok(()) };
    loadgen::report::junit::write(path, suites).map_err(|e| {
        eprintln!("error: cannot write --junit {}: {e}", path.display());
        1
    })
}

/// `capacity --junit FILE`: one test case per SLO, failed when the search found no rate that
/// meets them (exit 99); the answer is each case's message.
fn write_capacity_junit(
    output: &loadgen::cli::OutputArgs,
    capacity: &loadgen::workflow::capacity::Capacity,
    code: i32,
) -> Result<(), i32> {
    use loadgen::report::junit::Case;
    let Some(path) = output.junit.as_deref() else {
        return Ok(());
    };
    let cases = capacity
        .slos
        .iter()
        .map(|slo| Case {
            name: slo.clone(),
            failure: (code != 0).then(|| capacity.answer.clone()),
            output: capacity.answer.clone(),
        })
        .collect();
    let suite = Suite {
        name: suite_name(output, "capacity"),
        time_s: capacity.elapsed_s,
        cases,
    };
    write_junit(Some(path), &[suite])
}

/// A workflow's exit code: the stop reason's (Ctrl-C, SIGTERM) when it was stopped, else its
/// thresholds' (0, or 99 when one was crossed).
fn workflow_exit_code(stop: &StopSignal, thresholds: i32) -> i32 {
    match stop.reason().map_or(0, ExitReason::exit_code) {
        0 => thresholds,
        code => code,
    }
}

/// `loadgen scenarios [show NAME]`.
fn scenarios(args: &loadgen::cli::ScenariosArgs) -> i32 {
    use loadgen::scenario::builtin;
    match &args.action {
        None => {
            let width = builtin::names().iter().map(|n| n.len()).max().unwrap_or(0);
            for (name, text) in builtin::BUILTINS {
                emit(&format!("{name:<width$}  {}\n", builtin::description(text)));
            }
            emit("\nRun one with `loadgen run --scenario NAME`; print it with `loadgen scenarios show NAME`.\n");
            0
        }
        Some(ScenariosAction::Show { name }) => match builtin::get(name) {
            Some(text) => {
                emit(text);
                0
            }
            None => {
                eprintln!(
                    "error: there is no built-in scenario '{name}'; built-ins are: {}",
                    builtin::names().join(", ")
                );
                2
            }
        },
    }
}

/// Prints the error as one sentence. The library's messages already name their cause, so
/// the source chain is not repeated after them.
fn fail(error: &loadgen::RunError) -> i32 {
    eprintln!("error: {error}");
    error.exit_code()
}

/// First Ctrl-C / SIGTERM: say `on_signal` and stop (a run stops sending and lets requests
/// in flight finish). Second: cut them off.
async fn watch_signals(stop: StopSignal, on_signal: String) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    loop {
        let reason = tokio::select! {
            _ = int.recv() => ExitReason::Interrupted,
            _ = term.recv() => ExitReason::Terminated,
        };
        if !stop.is_draining() {
            eprintln!("\n{on_signal}");
        }
        stop.signal(reason);
    }
}
