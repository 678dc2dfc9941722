//! Where the rows go: the writer thread that turns record batches into Parquet segments (and
//! the run's exact aggregates on the way), and the S3 mirror for `--out s3://`.
//!
//! It sits above [`record`](crate::record) (the row and its schema) and
//! [`stats`](crate::stats) (the aggregates), which know nothing of files or threads, and below
//! the worker loop, which only hands it batches.

pub mod s3;
pub mod writer;
