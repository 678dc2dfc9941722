//! Where the rows go: the writer thread that turns record batches into Parquet segments (and
//! the run's exact aggregates on the way), and the S3 mirror for `--out s3://`.
//!
//! It sits above [`record`](crate::record) (the row and its schema) and
//! [`stats`](crate::stats) (the aggregates), which know nothing of files or threads, and below
//! the worker loop, which only hands it batches.

pub mod s3;
pub mod writer;

use std::path::{Path, PathBuf};

/// The file name of a run's `index`-th segment in `requests/`.
pub fn segment_name(index: usize) -> String {
    format!("part-{index:05}.parquet")
}

/// Whether `name` is a complete segment (a segment being written is a hidden `.partial`
/// file).
pub fn is_segment(name: &str) -> bool {
    name.starts_with("part-") && name.ends_with(".parquet")
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
