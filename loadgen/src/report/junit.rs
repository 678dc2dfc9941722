//! JUnit XML for thresholds (`--junit FILE`): the format CI systems display (GitHub Actions
//! through a test-report action, GitLab's `artifacts:reports:junit`, Jenkins, Buildkite), so
//! a crossed threshold shows up as a failed test named after it.
//!
//! One `<testsuite>` per judged run (a run, each level of a sweep, a calibration) and one
//! `<testcase>` per threshold; a crossed threshold is a `<failure>` saying what was observed.
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

/// The document for `suites` — (suite name, its judged thresholds) — with no suite left out,
/// so a run with no thresholds is an empty suite rather than a missing file.
pub fn document(suites: &[(String, &[ThresholdResult])]) -> String {
    let cases: Vec<(String, Vec<Case>)> = suites
        .iter()
        .map(|(name, results)| (name.clone(), results.iter().map(Case::of).collect()))
        .collect();
    document_of_cases(&cases)
}

/// The document for suites of ready-made [`Case`]s (`loadgen capacity`: one per SLO).
pub fn document_of_cases(suites: &[(String, Vec<Case>)]) -> String {
    let tests: usize = suites.iter().map(|(_, c)| c.len()).sum();
    let failed = |cases: &[Case]| cases.iter().filter(|c| c.failure.is_some()).count();
    let failures: usize = suites.iter().map(|(_, c)| failed(c)).sum();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"loadgen thresholds\" tests=\"{tests}\" failures=\"{failures}\">\n"
    );
    for (name, cases) in suites {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\">",
            escape(name),
            cases.len(),
            failed(cases)
        );
        for case in cases {
            xml += &testcase(name, case);
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

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes [`document`] to `path` (its folder must exist).
pub fn write(path: &Path, suites: &[(String, &[ThresholdResult])]) -> std::io::Result<()> {
    std::fs::write(path, document(suites))
}

/// Writes [`document_of_cases`] to `path` (its folder must exist).
pub fn write_cases(path: &Path, suites: &[(String, Vec<Case>)]) -> std::io::Result<()> {
    std::fs::write(path, document_of_cases(suites))
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
        let xml = document(&[("run-1".to_string(), &results[..])]);
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(xml.contains("name=\"p99&lt;50ms\""), "{xml}");
        assert!(xml.contains("<failure message=\"p99&lt;50ms crossed: observed 61.2"));
        assert!(
            xml.contains("<system-out>observed 0.20%</system-out>"),
            "{xml}"
        );
    }
}
