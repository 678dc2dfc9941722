//! The search's conclusion and its words: the answer as an interval, the cause at the
//! first failing level with its evidence, warnings when the client or the machine (not the
//! service) set the limit, and the console lines.

use std::time::Duration;

use super::level::{observed_text, Cause, Level};
use super::search::Search;
use super::{arrivals_name, CalibrationUsed, Capacity, Settings};
use crate::cli::CapacityArgs;

/// What the network would need, which this command does not judge.
const NETWORK_NOTE: &str = "the network is not judged here: `loadgen-analyze explain DIR` on \
    the first failing level's run directory weighs it (bytes/s against the link)";

/// Puts the levels and the search's bracket together into capacity.json's object.
pub fn conclude(
    args: &CapacityArgs,
    settings: Settings,
    calibration: CalibrationUsed,
    levels: Vec<Level>,
    search: &Search,
    converged: bool,
    elapsed: Duration,
) -> Capacity {
    let capacity_rps = if converged {
        search.confirmed()
    } else {
        search.highest_passing()
    };
    let failing_rps = search.lowest_failing();
    // The last verdict on that rate: an extended level's, not the straddling one before it.
    let first_failing_level = failing_rps.and_then(|hi| {
        levels
            .iter()
            .rposition(|l| !l.passed && l.offered_rps == hi)
    });
    let first_failing = first_failing_level.map(|i| &levels[i]);
    let verdict = first_failing.and_then(|l| l.cause);
    let limited_by = match (verdict, capacity_rps) {
        (Some(cause), _) => Some(cause_name(cause)),
        (None, Some(rps)) if rps >= args.max_rate => Some("max_rate"),
        _ => None,
    };
    let mut evidence: Vec<String> = first_failing.map(|l| l.reasons.clone()).unwrap_or_default();
    if first_failing.is_some() {
        evidence.push(NETWORK_NOTE.to_string());
    }
    let mut capacity = Capacity {
        kind: "capacity",
        slos: args.slos.iter().map(|s| s.trim().to_string()).collect(),
        arrivals: arrivals_name(args.run.arrivals),
        settings,
        calibration,
        capacity_rps,
        interval: capacity_rps.map(|lo| (lo, failing_rps)),
        converged,
        verdict,
        limited_by,
        first_failing_level,
        evidence,
        warnings: warnings(&levels, verdict),
        answer: String::new(),
        elapsed_s: elapsed.as_secs_f64(),
        levels,
    };
    capacity.answer = answer(&capacity);
    capacity
}

fn cause_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Errors => "errors",
        Cause::Client => "client",
        Cause::Server => "server",
    }
}

/// When the client or the machine, not the service, set the limit.
fn warnings(levels: &[Level], verdict: Option<Cause>) -> Vec<String> {
    let mut warnings = Vec::new();
    if verdict == Some(Cause::Client) {
        warnings.push(
            "the client was saturated or fell behind its schedule at the first failing level: \
             this is the limit of this client, not of the service; run loadgen on a larger \
             machine (or a quieter one) or shard it (--shard I/N) to measure the service"
                .to_string(),
        );
    }
    if levels.iter().any(|l| l.server_shares_cores) {
        warnings.push(
            "the server ran on this machine's cores (the embedded server or a loopback \
             target): the answer is this machine's, shared between client and server"
                .to_string(),
        );
    }
    warnings
}

/// "sustains 750 req/s (the limit lies between 750 and 800 req/s) with p99<50ms, uniform
/// arrivals; at 800 req/s p99<50ms crossed: observed …".
fn answer(c: &Capacity) -> String {
    let slos = c.slos.join(" and ");
    let failing = c.first_failing_level.map(|i| &c.levels[i]);
    let why = failing.map_or(String::new(), |l| {
        format!("; at {} req/s {}", l.offered_rps, l.reasons.join("; "))
    });
    match (c.capacity_rps, c.interval) {
        (None, _) => format!(
            "no rate met {slos} ({} arrivals): even the lowest level failed{why}",
            c.arrivals
        ),
        (Some(rps), Some((_, Some(hi)))) => format!(
            "sustains {rps} req/s (the limit lies between {rps} and {hi} req/s) with {slos}, \
             {} arrivals{}{why}",
            c.arrivals,
            if c.converged {
                ""
            } else {
                " — UNCONVERGED: the budget ran out first"
            }
        ),
        (Some(rps), _) => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals: no level up to \
             --max-rate failed{}",
            c.arrivals,
            if c.converged {
                ""
            } else {
                " — UNCONVERGED: the budget ran out first"
            }
        ),
    }
}

/// One line per level, printed as the search goes.
pub fn level_line(l: &Level) -> String {
    let p99 = l
        .latency
        .iter()
        .find(|p| p.quantile == 0.99)
        .and_then(|p| p.value_ns)
        .map_or("-".to_string(), crate::units::duration);
    let verdict = if l.passed {
        "pass".to_string()
    } else {
        format!("FAIL ({})", l.reasons.join("; "))
    };
    format!(
        "  {:<8} {:>9.1} req/s offered  {:>9.1} achieved  p99 {:>9} from intended  {verdict}",
        format!("{:?}", l.step).to_lowercase(),
        l.offered_rps,
        l.achieved_rps,
        p99,
    )
}

/// The console report.
pub fn render(c: &Capacity, dir: &std::path::Path) -> String {
    let mut out = format!(
        "\nCapacity under {} ({} arrivals) — {}\n\n",
        c.slos.join(" and "),
        c.arrivals,
        dir.display()
    );
    for level in &c.levels {
        out += &level_line(level);
        out.push('\n');
        for slo in &level.slos {
            out += &format!("           {:<24} {}\n", slo.slo, observed_text(slo));
        }
    }
    out += &format!("\n  Answer     {}\n", c.answer);
    if let Some(cause) = c.verdict {
        out += &format!(
            "  Stops at   {} — {}\n",
            cause_name(cause),
            c.evidence.join("; ")
        );
    }
    out += &format!(
        "  Search     {} levels in {:.0}s, {}\n",
        c.levels.len(),
        c.elapsed_s,
        if c.converged {
            "converged"
        } else {
            "NOT converged (budget)"
        }
    );
    for warning in &c.warnings {
        out += &format!("  warning: {warning}\n");
    }
    out
}
