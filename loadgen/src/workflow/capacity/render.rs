//! The search's console lines: one per level as it goes, and the report of what
//! [`conclude`](super::conclude) decided. Nothing here decides anything.

use super::conclude::{cause_name, Capacity, Ended};
use super::level::{observed_text, Level};

/// One line per level, printed as the search goes.
pub fn level_line(l: &Level) -> String {
    let p99 = l
        .latency
        .iter()
        .find(|p| p.quantile == 0.99)
        .and_then(|p| p.value_ns)
        .map_or("-".to_string(), crate::units::duration);
    // pass / fail / inconclusive → extended: a level whose interval straddled a limit is
    // not a failure; it is run again, twice as long, and that run (`extend`) is the verdict.
    let verdict = if l.passed {
        "pass".to_string()
    } else if l.interrupted {
        "interrupted (not judged)".to_string()
    } else if l.needs_extension() {
        format!("inconclusive → extended ({})", l.reasons.join("; "))
    } else {
        format!("fail ({})", l.reasons.join("; "))
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
        "  Search     {} in {:.0}s, {}\n",
        crate::units::count(c.levels.len() as u64, "level"),
        c.elapsed_s,
        match c.ended {
            Ended::Converged => "converged",
            Ended::NoiseFloor => "stopped at the noise floor (a rate passed once and failed once)",
            Ended::Floor => "every level down to --min-rate failed",
            Ended::ClientLimit => "stopped at this client's limit",
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
