//! A Parquet file that appears whole or not at all, the lifecycle every file loadgen writes in
//! Parquet shares (request segments, client-metrics.parquet).
//!
//! The file is written under a hidden `.NAME.partial` name beside its final path and renamed
//! to NAME only when it is closed complete; a file that cannot be completed is removed. A
//! reader listing the directory, or a run killed mid-write, never leaves a half file under a
//! real name. Errors say which file and, when a Parquet error is an I/O error underneath (a
//! full disk, a file-size limit), give the I/O error itself.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

/// Why a Parquet file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode {path}: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: ParquetError,
    },
}

impl FileError {
    /// The I/O error itself when that is what the Parquet error was, so the message reads
    /// "File too large", not "External: …".
    fn parquet(path: &Path, source: ParquetError) -> Self {
        let path = path.to_path_buf();
        match source {
            ParquetError::External(e) => match e.downcast::<std::io::Error>() {
                Ok(io) => FileError::Io { path, source: *io },
                Err(e) => FileError::Parquet {
                    path,
                    source: ParquetError::External(e),
                },
            },
            source => FileError::Parquet { path, source },
        }
    }
}

/// A Parquet file being written under its `.partial` name.
pub struct ParquetFile {
    writer: ArrowWriter<File>,
    partial_path: PathBuf,
    final_path: PathBuf,
}

impl ParquetFile {
    /// Starts `path` with `schema` and `metadata` as its key-value metadata, ZSTD-compressed:
    /// the side files a run samples into (client-metrics, server-metrics).
    ///
    /// Without dictionaries: a side file gets a row a second, and each of its columns'
    /// dictionary encoders held a hash table from the first row on — 2.1 MB of the client's
    /// heap at its peak for client-metrics' columns (heaptrack, issue 60).
    pub fn create_with_metadata(
        path: &Path,
        schema: SchemaRef,
        metadata: impl IntoIterator<Item = (&'static str, String)>,
    ) -> Result<Self, FileError> {
        use parquet::basic::{Compression, ZstdLevel};
        use parquet::file::metadata::KeyValue;
        let metadata = metadata
            .into_iter()
            .map(|(k, v)| KeyValue::new(k.to_string(), v))
            .collect();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(3).expect("valid level"),
            ))
            .set_key_value_metadata(Some(metadata))
            .set_dictionary_enabled(false)
            .build();
        Self::create(path, schema, props)
    }

    /// Starts `path` (as `.NAME.partial` in the same directory) with `schema` and `props`.
    pub fn create(
        path: &Path,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<Self, FileError> {
        let name = path
            .file_name()
            .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
        let partial_path = path.with_file_name(format!(".{name}.partial"));
        let file = File::create(&partial_path).map_err(|source| FileError::Io {
            path: partial_path.clone(),
            source,
        })?;
        match ArrowWriter::try_new(file, schema, Some(props)) {
            Ok(writer) => Ok(ParquetFile {
                writer,
                partial_path,
                final_path: path.to_path_buf(),
            }),
            Err(source) => {
                let _ = std::fs::remove_file(&partial_path);
                Err(FileError::parquet(&partial_path, source))
            }
        }
    }

    /// Encodes `batch` (it reaches the disk when a row group fills, or at [`Self::sync`]).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), FileError> {
        self.writer
            .write(batch)
            .map_err(|source| FileError::parquet(&self.partial_path, source))
    }

    /// Closes the current row group and pushes it to the disk now, so the file shows
    /// progress (and survives a kill up to here) rather than waiting in the writer's buffer.
    pub fn sync(&mut self) -> Result<(), FileError> {
        self.writer
            .flush()
            .map_err(|source| FileError::parquet(&self.partial_path, source))?;
        self.writer.sync().map_err(|source| FileError::Io {
            path: self.partial_path.clone(),
            source,
        })
    }

    /// Writes the footer and renames the file to its final name; returns that path. A file
    /// that cannot be completed is removed.
    pub fn close(self) -> Result<PathBuf, FileError> {
        if let Err(source) = self.writer.close() {
            let _ = std::fs::remove_file(&self.partial_path);
            return Err(FileError::parquet(&self.partial_path, source));
        }
        std::fs::rename(&self.partial_path, &self.final_path).map_err(|source| FileError::Io {
            path: self.final_path.clone(),
            source,
        })?;
        Ok(self.final_path)
    }

    /// Gives up on the file: nothing of it stays on disk.
    pub fn discard(self) {
        drop(self.writer);
        let _ = std::fs::remove_file(&self.partial_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch() -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let column = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        (schema, batch)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_hidden_until_closed_then_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.parquet");
        let (schema, batch) = batch();
        let mut file = ParquetFile::create(&path, schema, WriterProperties::default()).unwrap();
        file.write(&batch).unwrap();
        file.sync().unwrap();
        assert_eq!(names(dir.path()), [".x.parquet.partial"]);
        assert_eq!(file.close().unwrap(), path);
        assert_eq!(names(dir.path()), ["x.parquet"]);
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(&path).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 3);
    }

    #[test]
    fn a_discarded_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (schema, batch) = batch();
        let mut file = ParquetFile::create(
            &dir.path().join("x.parquet"),
            schema,
            WriterProperties::default(),
        )
        .unwrap();
        file.write(&batch).unwrap();
        file.discard();
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("x.parquet");
        let (schema, _) = batch();
        let error = ParquetFile::create(&path, schema, WriterProperties::default())
            .err()
            .unwrap();
        assert!(matches!(error, FileError::Io { .. }), "{error}");
        assert!(error.to_string().contains(".x.parquet.partial"), "{error}");
    }
}
