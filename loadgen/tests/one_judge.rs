//! One judge (issue 43): the cause of a run, a phase, a sweep level and a capacity level is
//! chosen only in `loadgen/src/verdict/`. Outside it, code may read a verdict's cause and
//! compare it, never name one into being — as `Cause::…` or as the string a file writes —
//! and no rule's name is written outside it.

use std::path::{Path, PathBuf};

const CAUSES: [&str; 6] = [
    "Cause::None",
    "Cause::Errors",
    "Cause::Client",
    "Cause::Network",
    "Cause::Server",
    "Cause::Inconclusive",
];

/// The causes as run.json and capacity.json write them: one written as a value outside
/// verdict/ is a cause named into being (issue 57: capacity set `limited_by` to `"errors"`
/// itself when the target was lost).
const CAUSE_WORDS: [&str; 6] = [
    "\"none\"",
    "\"errors\"",
    "\"client\"",
    "\"network\"",
    "\"server\"",
    "\"inconclusive\"",
];

/// Where a cause's word means something else, with what it is there.
const OTHER_MEANINGS: [(&str, &str); 4] = [
    ("sysmon/file.rs", "\"network\""), // client-metrics.parquet's column
    ("sysmon/mod.rs", "\"network\""),  // the same column, read back
    ("transport/grpc.rs", "\"none\""), // a grpc-encoding
    ("runner/live_page.rs", "\"server\""), // the page's key for the server's figures
];

/// A cause's word as a string value on `line` (an object's key, `"errors": …`, is a name).
fn names_cause_string(path: &Path, line: &str) -> bool {
    CAUSE_WORDS.iter().any(|word| {
        let other = OTHER_MEANINGS
            .iter()
            .any(|(file, w)| w == word && path.ends_with(file));
        !other
            && line
                .match_indices(word)
                .any(|(at, _)| !line[at + word.len()..].trim_start().starts_with(':'))
    })
}

/// Rule names as run.json writes them (`verdict.rule`).
const RULE_PREFIXES: [&str; 6] = [
    "\"errors.",
    "\"client.",
    "\"network.",
    "\"server.",
    "\"none.",
    "\"inconclusive.",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file, its tests left out (they build verdicts to check what reads them).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// `Rule::…` as its own word (not `StartRule::…`).
fn names_verdict_rule(line: &str) -> bool {
    line.match_indices("Rule::").any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn no_cause_is_chosen_outside_the_verdict() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let verdict = src.join("verdict");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let outside: Vec<&PathBuf> = files.iter().filter(|p| !p.starts_with(&verdict)).collect();
    assert!(outside.len() > 50, "{} files", outside.len());
    let mut chosen = Vec::new();
    for path in outside {
        for (n, line) in code(path).lines().enumerate() {
            let compares = line.contains("==") || line.contains("!=");
            let names_cause =
                CAUSES.iter().any(|c| line.contains(c)) || names_cause_string(path, line);
            let names_rule =
                names_verdict_rule(line) || RULE_PREFIXES.iter().any(|r| line.contains(r));
            if (names_cause && !compares) || names_rule {
                chosen.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        chosen.is_empty(),
        "a cause or rule chosen outside loadgen/src/verdict/:\n{}",
        chosen.join("\n")
    );
}
