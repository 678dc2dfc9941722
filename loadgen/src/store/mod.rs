//! Where the rows go: the writer thread that turns record batches into Parquet segments (and
//! the run's exact aggregates on the way), the S3 mirror for `--out s3://`, and the way back
//! (`read_back`: closed segments counted into those aggregates again, for a spread run's
//! process that died before handing them over).
//!
//! It sits above [`record`](crate::record) (the row and its schema) and
//! [`stats`](crate::stats) (the aggregates), which know nothing of files or threads, and below
//! the worker loop, which only hands it batches.

pub mod read_back;
pub mod s3;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// `contract/files.json`: where the segment-file rule both languages use is written.
const FILES_JSON: &str = include_str!("../../../contract/files.json");

/// The contract's `files.requests.segment_files`: a segment's name is `prefix` … `suffix`.
struct SegmentFiles {
    prefix: String,
    suffix: String,
}

static SEGMENT_FILES: LazyLock<SegmentFiles> = LazyLock::new(|| {
    let contract: serde_json::Value =
        serde_json::from_str(FILES_JSON).expect("contract/files.json is valid");
    let rule = &contract["files"]["requests"]["segment_files"];
    let part = |key: &str| {
        rule[key]
            .as_str()
            .expect("contract/files.json names the segment files")
            .to_string()
    };
    SegmentFiles {
        prefix: part("prefix"),
        suffix: part("suffix"),
    }
});

/// The file name of a run's `index`-th segment in `requests/`.
pub fn segment_name(index: usize) -> String {
    let rule = &*SEGMENT_FILES;
    format!("{}{index:05}{}", rule.prefix, rule.suffix)
}

/// Whether `name` is a complete segment, by the contract's rule (a segment being written is
/// a hidden `.partial` file).
pub fn is_segment(name: &str) -> bool {
    let rule = &*SEGMENT_FILES;
    name.starts_with(&rule.prefix) && name.ends_with(&rule.suffix)
}

/// The complete segments in `dir` (a run's `requests/`), in order.
pub fn segments(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_segment))
        .map(|e| e.path())
        .collect();
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_follow_the_contracts_rule() {
        assert_eq!(segment_name(7), "part-00007.parquet");
        assert!(is_segment(&segment_name(12)));
        assert!(!is_segment(".part-00001.parquet.partial"));
        assert!(!is_segment("notes.parquet"));
    }
}
