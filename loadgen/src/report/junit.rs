//! JUnit XML for thresholds (`--junit FILE`): the format CI systems display (GitHub Actions
//! through a test-report action, GitLab's `artifacts:reports:junit`, Jenkins, Buildkite), so
//! a crossed threshold shows up as a failed test named after it.
//!
//! One `<testsuite>` per judged run (a run, each level of a sweep, a calibration) named after
//! `--junit-name` or `--out`'s folder, timed with the run's duration, and one `<testcase>`
//! per threshold; a crossed threshold is a `<failure>` saying what was observed.
//! Only formats what was judged; the judging is [`super::thresholds`]'.

use std::fmt::Write as _;
use std::path::Path;

use super::thresholds::ThresholdResult;

/// One test case: a name, and the failure message when it failed, else what was measured.
pub struct Case {
    pub name: String,
    pub failure: Option<String>,
    pub output: String,
}

impl Case {
    fn of(result: &ThresholdResult) -> Case {
        let observed = observed_text(result);
        Case {
            name: result.threshold.clone(),
            failure: (!result.passed)
                .then(|| format!("{} crossed: observed {observed}", result.threshold)),
            output: format!("observed {observed}"),
        }
    }
}

/// One suite: its name, how long the judged run (or search) took, and its cases. A
/// threshold is judged over the whole run, so the time is the suite's, not each case's.
pub struct Suite {
    pub name: String,
    pub time_s: f64,
    pub cases: Vec<Case>,
}

impl Suite {
    /// The suite of a run's judged thresholds.
    pub fn of(name: String, time_s: f64, results: &[ThresholdResult]) -> Suite {
        Suite {
            name,
            time_s,
            cases: results.iter().map(Case::of).collect(),
        }
    }
}

/// The name a suite goes by: `--junit-name`, else the last part of `--out` (a folder, or an
/// `s3://` prefix), so a baseline and a candidate written side by side are told apart; else
/// `fallback` (the run id, `calibration`, `capacity`).
pub fn suite_name(junit_name: Option<&str>, out: Option<&Path>, fallback: &str) -> String {
    let from_out = out.and_then(|out| {
        let text = out.to_string_lossy();
        let last = text.trim_end_matches('/').rsplit('/').next()?.to_string();
        (!last.is_empty() && last != "." && last != "..").then_some(last)
    });
    junit_name
        .map(str::to_string)
        .or(from_out)
        .unwrap_or_else(|| fallback.to_string())
}

/// The document for `suites`, with no suite left out, so a run with no thresholds is an
/// empty suite rather than a missing file.
pub fn document(suites: &[Suite]) -> String {
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failed = |cases: &[Case]| cases.iter().filter(|c| c.failure.is_some()).count();
    let failures: usize = suites.iter().map(|s| failed(&s.cases)).sum();
    let time_s: f64 = suites.iter().map(|s| s.time_s).sum();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"loadgen thresholds\" tests=\"{tests}\" failures=\"{failures}\" \
         time=\"{time_s:.3}\">\n"
    );
    for suite in suites {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">",
            escape(&suite.name),
            suite.cases.len(),
            failed(&suite.cases),
            suite.time_s
        );
        for case in &suite.cases {
            xml += &testcase(&suite.name, case);
        }
        xml += "  </testsuite>\n";
    }
    xml + "</testsuites>\n"
}

fn testcase(suite: &str, case: &Case) -> String {
    let name = escape(&case.name);
    let class = escape(&format!("loadgen.{suite}"));
    match &case.failure {
        None => format!(
            "    <testcase classname=\"{class}\" name=\"{name}\">\
             <system-out>{}</system-out></testcase>\n",
            escape(&case.output)
        ),
        Some(message) => {
            let message = escape(message);
            format!(
                "    <testcase classname=\"{class}\" name=\"{name}\">\
                 <failure message=\"{message}\" type=\"threshold\">{message}</failure></testcase>\n"
            )
        }
    }
}

/// What was observed, in the threshold's unit as the console shows it.
fn observed_text(result: &ThresholdResult) -> String {
    match (result.observed, result.unit) {
        (None, _) => "nothing (no response)".to_string(),
        (Some(ns), "ns") => crate::units::duration(ns),
        (Some(rate), "fraction") => format!("{:.2}%", rate * 100.0),
        (Some(rps), _) => format!("{rps:.1}/s"),
    }
}

/// `text` as XML character data or an attribute's value: markup escaped, and each
/// character XML 1.0 cannot hold even escaped (control characters but tab, LF and CR;
/// U+FFFE, U+FFFF) made U+FFFD, as the analysis's JUnit does — a `--junit-name` or an
/// `--out` folder with `\x01` or an ANSI escape in it must not make the file unreadable.
fn escape(text: &str) -> String {
    let allowed = |c: char| {
        matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')
    };
    text.chars()
        .map(|c| if allowed(c) { c } else { '\u{FFFD}' })
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes [`document`] to `path` (its folder must exist).
pub fn write(path: &Path, suites: &[Suite]) -> std::io::Result<()> {
    std::fs::write(path, document(suites))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(threshold: &str, observed: f64, unit: &'static str, passed: bool) -> ThresholdResult {
        ThresholdResult {
            threshold: threshold.to_string(),
            op: None,
            observed: Some(observed),
            limit: 0.0,
            unit,
            passed,
        }
    }

    #[test]
    fn a_crossed_threshold_is_a_failed_testcase_with_what_was_observed() {
        let results = [
            result("p99<50ms", 61_200_000.0, "ns", false),
            result("error_rate<1%", 0.002, "fraction", true),
        ];
        let xml = document(&[Suite::of("run-1".to_string(), 2.5, &results)]);
        assert!(
            xml.contains("tests=\"2\" failures=\"1\" time=\"2.500\""),
            "{xml}"
        );
        assert!(xml.contains("name=\"p99&lt;50ms\""), "{xml}");
        assert!(xml.contains("<failure message=\"p99&lt;50ms crossed: observed 61.2"));
        assert!(
            xml.contains("<system-out>observed 0.20%</system-out>"),
            "{xml}"
        );
    }

    #[test]
    fn control_characters_become_the_replacement_character_and_the_file_stays_xml() {
        let results = [result("p99<50ms", 61_200_000.0, "ns", false)];
        let name = "run\u{1}\u{1b}[31mred\u{0}\ttab".to_string();
        let xml = document(&[Suite::of(name, 1.0, &results)]);
        // XML 1.0's Char production: what an XML parser (expat, Java's, .NET's) accepts.
        let bad: Vec<char> = xml
            .chars()
            .filter(|&c| c < ' ' && !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        assert!(bad.is_empty(), "{bad:?} in {xml:?}");
        assert!(
            xml.contains("name=\"run\u{FFFD}\u{FFFD}[31mred\u{FFFD}\ttab\""),
            "{xml}"
        );
    }

    #[test]
    fn suites_are_named_by_junit_name_then_out_then_the_fallback() {
        let out = Path::new("runs/baseline/");
        assert_eq!(suite_name(Some("pr-12"), Some(out), "run-1"), "pr-12");
        assert_eq!(suite_name(None, Some(out), "run-1"), "baseline");
        let s3 = Path::new("s3://bucket/ci/candidate");
        assert_eq!(suite_name(None, Some(s3), "run-1"), "candidate");
        assert_eq!(suite_name(None, Some(Path::new(".")), "run-1"), "run-1");
        assert_eq!(suite_name(None, None, "run-1"), "run-1");
    }
}
