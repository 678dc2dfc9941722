//! The module-map check both crates run: a `LAYERS` table (top to bottom), the `crate::` uses
//! in `src/`, and the two places people read the table (the crate doc and
//! docs/architecture.md), compared with it.
//!
//! Included by `loadgen/tests/architecture.rs` and `servers/tests/architecture.rs` with
//! `#[path]`, so the scanning and the checks are written once; each of those files holds its
//! crate's `LAYERS` and calls the checks of [`Map`]. Submodules count for their top-level module (`model/open.rs` is `model`); a
//! name the crate root re-exports (`crate::Fault`, `crate::run`) counts for the module it
//! comes from, so a re-export is no way around the table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top to bottom; a module uses only modules of later rows.
pub type Layers = &'static [&'static [&'static str]];

pub fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&module))
}

/// One crate's module map and the checks on it; each crate's test calls these, one `#[test]`
/// each, so a failure names the check.
pub struct Map {
    pub layers: Layers,
    /// The crate's `CARGO_MANIFEST_DIR`; its sources are `src/`, the docs `../docs/`.
    pub manifest_dir: &'static str,
    /// The crate's section of docs/architecture.md (the first heading containing it).
    pub docs_heading: &'static str,
}

impl Map {
    fn src(&self) -> PathBuf {
        Path::new(self.manifest_dir).join("src")
    }

    pub fn every_module_has_a_place(&self) {
        let wrong = misplaced(self.layers, &self.src());
        assert!(
            wrong.is_empty(),
            "tests/architecture.rs LAYERS and src/ disagree (a new module gets a row there, in \
             docs/architecture.md and in lib.rs's map):\n{}",
            wrong.join("\n")
        );
    }

    pub fn dependencies_point_down(&self) {
        let wrong = upward_uses(self.layers, &self.src());
        assert!(
            wrong.is_empty(),
            "dependencies must point down the module map (tests/architecture.rs LAYERS):\n{}",
            wrong.join("\n")
        );
    }

    /// The table is written for people twice more; both must say what `LAYERS` says.
    pub fn docs_name_the_same_layers(&self) {
        let lib_rs = std::fs::read_to_string(self.src().join("lib.rs")).unwrap();
        assert_eq!(
            doc_layers(&lib_rs),
            owned(self.layers),
            "src/lib.rs's map of layers (left) differs from LAYERS (right)"
        );
        let docs = Path::new(self.manifest_dir).join("../docs/architecture.md");
        let docs = std::fs::read_to_string(docs).unwrap();
        assert_eq!(
            markdown_layers(&docs, self.docs_heading),
            owned(self.layers),
            "docs/architecture.md's {} table (left) differs from LAYERS (right)",
            self.docs_heading
        );
    }
}

/// Every source file of the library under `src`, by top-level module (`lib.rs` and the
/// binary's `main.rs` are not modules).
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules: BTreeMap<String, Vec<_>> = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let first = relative.components().next().unwrap().as_os_str();
            let top = first.to_string_lossy().trim_end_matches(".rs").to_string();
            if top != "lib" && top != "main" {
                modules.entry(top).or_default().push(path);
            }
        }
    }
    modules
}

/// The names `lib.rs` re-exports, each with the module it comes from:
/// `pub use config::{ServerConfig, Stall};` → `ServerConfig` → `config`, `Stall` → `config`.
pub fn reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut statement = String::new();
    for line in lib_rs.lines() {
        if statement.is_empty() && !line.starts_with("pub use ") {
            continue;
        }
        statement.push_str(line.trim());
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let path = statement["pub use ".len()..].trim_end_matches(';');
        if let Some((module, names)) = path.split_once("::") {
            let names = names.trim_start_matches('{').trim_end_matches('}');
            for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let visible = name.rsplit(" as ").next().unwrap_or(name);
                found.insert(visible.to_string(), module.to_string());
            }
        }
        statement.clear();
    }
    found
}

/// `(line number, used module)` for every `crate::name` in `text` outside comments, with
/// re-exported names resolved to their module.
pub fn uses(text: &str, reexports: &BTreeMap<String, String>) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            for name in first_segments(rest) {
                let module = reexports.get(&name).cloned().unwrap_or(name);
                found.push((number + 1, module));
            }
        }
    }
    found
}

/// The names a path after `crate::` starts with: `model::Limit` → `model`;
/// `{model::Limit, stop}` → `model`, `stop` (nested groups belong to their parent).
fn first_segments(path: &str) -> Vec<String> {
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = path.strip_prefix('{') else {
        return vec![ident(path)]
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect();
    };
    let (mut names, mut depth, mut start) = (Vec::new(), 0, true);
    for (i, c) in group.char_indices() {
        if start && depth == 0 {
            names.push(ident(&group[i..]));
            start = false;
        }
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            _ => {}
        }
    }
    names.into_iter().filter(|n| !n.is_empty()).collect()
}

/// Modules of `src` missing from `layers`, then names in `layers` that are no module.
fn misplaced(layers: Layers, src: &Path) -> Vec<String> {
    let modules = modules(src);
    let missing = modules
        .keys()
        .filter(|m| layer_of(layers, m).is_none())
        .map(|m| format!("module '{m}' has no place in LAYERS"));
    let stale = layers
        .iter()
        .flat_map(|layer| layer.iter())
        .filter(|m| !modules.contains_key(**m))
        .map(|m| format!("LAYERS names '{m}', which is not a module of src/ any more"));
    missing.chain(stale).collect()
}

/// Every use in `src` of a module that is not below the user, as `file:line: …`.
fn upward_uses(layers: Layers, src: &Path) -> Vec<String> {
    let reexports = reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut wrong = Vec::new();
    for (module, files) in modules(src) {
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, used) in upward_in(layers, &module, &text, &reexports) {
                wrong.push(format!(
                    "{}:{line}: {module} uses {used}, which is not below it",
                    file.display()
                ));
            }
        }
    }
    wrong
}

/// The uses in `text`, a file of `module`, of modules not below it: `(line, used module)`.
/// A module without a place is left to `misplaced`, and so is a name that is no module.
pub fn upward_in(
    layers: Layers,
    module: &str,
    text: &str,
    reexports: &BTreeMap<String, String>,
) -> Vec<(usize, String)> {
    let Some(own) = layer_of(layers, module) else {
        return Vec::new();
    };
    uses(text, reexports)
        .into_iter()
        .filter(|(_, used)| used != module)
        .filter(|(_, used)| layer_of(layers, used).is_some_and(|theirs| theirs <= own))
        .collect()
}

/// The layers of the Markdown table (`| layer | module | … |`) that follows the first heading
/// containing `heading`: rows with the same layer number form one layer, in the table's order;
/// a module cell may list several modules (`` `a`, `b` ``). Panics naming the layer number
/// when the numbers do not run 1, 2, 3… down the table.
fn markdown_layers(markdown: &str, heading: &str) -> Vec<Vec<String>> {
    let mut lines = markdown
        .lines()
        .skip_while(|line| !(line.starts_with('#') && line.contains(heading)));
    assert!(lines.next().is_some(), "no heading containing {heading:?}");
    let rows = lines
        .skip_while(|line| !line.starts_with("| layer | module |"))
        .skip(2) // the header and the |---| line
        .take_while(|line| line.starts_with('|'));
    let mut layers: Vec<Vec<String>> = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let number: usize = cells[1].parse().unwrap();
        if number == layers.len() + 1 {
            layers.push(Vec::new());
        }
        assert_eq!(
            number,
            layers.len(),
            "layer numbers out of order at {row:?}"
        );
        layers.last_mut().unwrap().extend(
            cells[2]
                .split(',')
                .map(|m| m.trim().trim_matches('`').to_string()),
        );
    }
    layers
}

/// The layers of the crate doc's one-line map: the `//!` paragraph made only of `` `name` ``,
/// `|` (same layer) and `→` (next layer down), e.g. `` `runner` → `cli` | `config` ``.
fn doc_layers(lib_rs: &str) -> Vec<Vec<String>> {
    let doc: Vec<&str> = lib_rs
        .lines()
        .map_while(|line| line.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let is_map = |paragraph: &str| {
        paragraph.contains('→')
            && paragraph.split('`').step_by(2).all(|between| {
                between
                    .chars()
                    .all(|c| c.is_whitespace() || "→|".contains(c))
            })
    };
    let map = doc
        .split(|line| line.is_empty())
        .map(|paragraph| paragraph.join(" "))
        .find(|paragraph| is_map(paragraph))
        .expect("the crate doc has a paragraph of `module` → `module` | `module` …");
    map.split('→')
        .map(|layer| {
            layer
                .split('|')
                .map(|m| m.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect()
}

pub fn owned(layers: Layers) -> Vec<Vec<String>> {
    layers
        .iter()
        .map(|layer| layer.iter().map(|m| m.to_string()).collect())
        .collect()
}

/// The check itself: uses are found outside comments, in groups, and through re-exports.
#[test]
fn uses_are_found_through_groups_and_reexports() {
    let reexports = reexports("mod a;\npub use runner::{run, RunError};\npub use fault::Fault;\n");
    let text =
        "// crate::runner in a comment is not a use\nuse crate::runner::run; // crate::cli\n\
                let a = crate::model::Limit::Requests(1);\nuse crate::{stop::{A, b}, clock};\n\
                use crate::{Fault, run};\n";
    assert_eq!(
        uses(text, &reexports),
        [
            (2, "runner"),
            (3, "model"),
            (4, "stop"),
            (4, "clock"),
            (5, "fault"),
            (5, "runner")
        ]
        .map(|(line, name)| (line, name.to_string()))
    );
}

/// The docs' parsers read what the docs write.
#[test]
fn the_map_is_read_from_markdown_and_the_crate_doc() {
    let markdown = "# x\n| layer | module | what |\n|---|---|---|\n\n## servers\n\ntext\n\n\
                    | layer | module | what it does |\n|---|---|---|\n| 1 | `server` | a |\n\
                    | 2 | `api` | b |\n| 2 | `config` | c |\n| 3 | `fault`, `router` | d |\n\nafter\n";
    let expected = owned(&[&["server"], &["api", "config"], &["fault", "router"]]);
    assert_eq!(markdown_layers(markdown, "servers"), expected);
    let lib_rs = "//! Intro → more, with `code`.\n//!\n//! `server` → `api` | `config` →\n\
                  //! `fault` | `router`\n//!\n//! After.\n\nmod api;\n";
    assert_eq!(doc_layers(lib_rs), expected);
}
