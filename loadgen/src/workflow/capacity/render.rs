//! The search's console lines: one per level as it goes, and the report of what
//! [`conclude`](super::conclude) decided. Nothing here decides anything.

use super::conclude::{Capacity, Ended};
use super::level::Level;

/// The search's one line before its first level: what it looks for, and that Ctrl-C keeps
/// what it measured.
pub fn banner(args: &crate::cli::CapacityArgs, dir: &std::path::Path) -> String {
    let slos: Vec<&str> = args.slos.iter().map(|s| s.trim()).collect();
    format!(
        "capacity: the highest rate with {}, {} arrivals, levels of {} ({} warm-up), into {} — \
         Ctrl-C stops and keeps every completed level",
        slos.join(" and "),
        args.open.arrivals.unwrap_or_default().name(),
        humantime::format_duration(args.level_duration),
        humantime::format_duration(args.warmup),
        dir.display()
    )
}

/// One line per level, printed as the search goes: its rate, what it achieved, its p99 and
/// its result with the first reason (every reason is in capacity.json and `explain`).
pub fn level_line(l: &Level) -> String {
    let p99 = l
        .latency
        .iter()
        .find(|p| p.quantile == 0.99)
        .and_then(|p| p.value_ns)
        .map_or("-".to_string(), crate::units::duration);
    // pass / fail / inconclusive → extended: a level whose interval straddled a limit is
    // not a failure; it is run again, twice as long, and that run (`extend`) is the verdict.
    let why = match l.reasons.as_slice() {
        [] => String::new(),
        [only] => format!(" ({only})"),
        [first, rest @ ..] => format!(" ({first}; {} more)", rest.len()),
    };
    let verdict = if l.passed {
        "pass".to_string()
    } else if l.interrupted {
        "interrupted (not judged)".to_string()
    } else if l.needs_extension() {
        format!("inconclusive → extended{why}")
    } else {
        format!("fail{why}")
    };
    format!(
        "  {:<8} {:>9.1} req/s offered  {:>9.1} achieved  p99 {:>9} from intended  {verdict}",
        format!("{:?}", l.step).to_lowercase(),
        l.offered_rps,
        l.achieved_rps,
        p99,
    )
}

/// The console report: the answer, why the search stopped there and how it went. Each level
/// was its own line as it finished; capacity.json and `loadgen-analyze explain` hold them all.
pub fn render(c: &Capacity, dir: &std::path::Path) -> String {
    let mut out = format!(
        "\nCapacity under {} ({} arrivals) — {}\n\n",
        c.slos.join(" and "),
        c.arrivals,
        dir.display()
    );
    out += &format!("  Answer     {}\n", c.answer);
    if let Some(cause) = c.verdict {
        let evidence = c.evidence.join("; ");
        match c.answer.contains(&evidence) {
            true => out += &format!("  Stops at   {}\n", cause.as_str()),
            false => out += &format!("  Stops at   {} — {evidence}\n", cause.as_str()),
        }
    }
    out += &format!(
        "  Search     {} in {:.0}s, {}\n",
        crate::units::count(c.levels.len() as u64, "level"),
        c.elapsed_s,
        match c.ended {
            Ended::Converged => "converged",
            Ended::NoiseFloor => {
                "stopped at the noise floor (a rate passed once and failed once, or the \
                 failure came on a busy host)"
            }
            Ended::Floor => "every level down to --min-rate failed",
            Ended::ClientLimit => "stopped at this client's limit",
            Ended::HostBusy => "stopped: this host was busy (not converged)",
            Ended::TargetLost => "stopped: the target could no longer be reached",
            Ended::Budget => "NOT converged (budget)",
            Ended::Interrupted => "INTERRUPTED",
        }
    );
    for warning in &c.warnings {
        out += &format!("  warning: {warning}\n");
    }
    out
}
