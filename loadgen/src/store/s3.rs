//! Run directories in S3 (`--out s3://bucket/prefix`), for shards on machines that share no disk.
//!
//! The run is written to a local staging directory exactly as any run is; this module mirrors
//! it into `s3://bucket/prefix/<run-id>/` as files close: a first `run.json` (marked
//! `"exit_reason": "running"`) before any request, each Parquet segment as soon as the writer
//! closes it, and `client-metrics.parquet` and the final `run.json` at the end. A lost machine
//! therefore loses at most its open segment. The S3 client is `object_store`'s, configured the
//! AWS way: credentials from the environment, a web-identity token (EKS IRSA), EKS Pod
//! Identity, the ECS task role or the EC2 instance profile; region from `AWS_REGION` /
//! `AWS_DEFAULT_REGION`; `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`) for S3-compatible
//! stores. Nothing here knows about rows or requests: it moves files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Attempts and time one upload may take before it counts as failed (object_store retries
/// with backoff in between). Short enough that a dead store does not hold a finished run for
/// minutes, long enough to ride out a throttled or briefly unreachable endpoint.
const MAX_RETRIES: usize = 5;
const RETRY_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// `s3://bucket/prefix`: where runs go. Each run becomes `prefix/<run-id>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Without leading or trailing slashes; may be empty.
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://bucket[/prefix…]`; `None` when `text` is not an `s3://` URL at all.
    pub fn parse(text: &str) -> Option<Result<Self, String>> {
        let rest = text.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(format!(
                "--out {text} names no bucket; write s3://BUCKET/PREFIX"
            )));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..") {
            return Some(Err(format!(
                "--out {text}: '.' and '..' are not allowed in an S3 prefix"
            )));
        }
        Some(Ok(S3Location {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        }))
    }

    /// The key prefix of run `run_id`, ending without a slash.
    fn run_key(&self, run_id: &str) -> String {
        match self.prefix.is_empty() {
            true => run_id.to_string(),
            false => format!("{}/{run_id}", self.prefix),
        }
    }

    /// `s3://bucket/prefix/<run-id>/`, as shown to users.
    pub fn run_url(&self, run_id: &str) -> String {
        format!("s3://{}/{}/", self.bucket, self.run_key(run_id))
    }
}

impl std::fmt::Display for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// Why results could not be stored in S3.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error(
        "cannot use {location}: {cause}; check the AWS credentials (environment, instance \
         profile or pod role), the bucket name and region, and AWS_ENDPOINT_URL for an \
         S3-compatible store"
    )]
    Unusable {
        location: String,
        cause: String,
        #[source]
        source: object_store::Error,
    },
    #[error("cannot read {path} to upload it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot upload {key}: {source}")]
    Upload {
        key: String,
        #[source]
        source: object_store::Error,
    },
}

/// A connection to one bucket, checked for access before the run starts.
#[derive(Debug, Clone)]
pub struct S3Store {
    store: Arc<AmazonS3>,
    location: S3Location,
}

impl S3Store {
    /// Builds the client from the standard AWS configuration and lists the prefix once, so a
    /// wrong bucket, region, endpoint or missing credentials fail before any load is sent.
    pub async fn connect(location: &S3Location) -> Result<Self, S3Error> {
        // object_store's HTTP client uses rustls with the process-wide crypto provider; loadgen
        // uses ring everywhere. Installing it twice is harmless, hence the ignored result.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let unusable = |source: object_store::Error| S3Error::Unusable {
            location: location.to_string(),
            cause: cause(&source),
            source,
        };
        // Client options first: they carry allow_http, which the endpoint check below sets.
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&location.bucket)
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: MAX_RETRIES,
                retry_timeout: RETRY_TIMEOUT,
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(CONNECT_TIMEOUT)
                    .with_timeout(REQUEST_TIMEOUT),
            );
        // A plain-HTTP endpoint (MinIO, a test server) is what the user asked for by naming it.
        let plain_http = [AmazonS3ConfigKey::S3Endpoint, AmazonS3ConfigKey::Endpoint]
            .iter()
            .filter_map(|key| builder.get_config_value(key))
            .any(|endpoint| endpoint.starts_with("http://"));
        if plain_http {
            builder = builder.with_allow_http(true);
        }
        let store = builder.build().map_err(unusable)?;
        let prefix = ObjectPath::from(location.prefix.as_str());
        store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(unusable)?;
        Ok(S3Store {
            store: Arc::new(store),
            location: location.clone(),
        })
    }

    /// Uploads `bytes` as `relative` (e.g. `run.json`) inside run `run_id`'s directory.
    pub async fn put(&self, run_id: &str, relative: &str, bytes: Vec<u8>) -> Result<(), S3Error> {
        let key = format!("{}/{relative}", self.location.run_key(run_id));
        self.store
            .put(&ObjectPath::from(key.as_str()), bytes.into())
            .await
            .map(|_| ())
            .map_err(|source| S3Error::Upload { key, source })
    }

    /// Uploads the file at `staging/relative` as `relative` inside run `run_id`'s directory.
    pub async fn put_file(
        &self,
        run_id: &str,
        staging: &Path,
        relative: &str,
    ) -> Result<u64, S3Error> {
        let path = staging.join(relative);
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|source| S3Error::Read { path, source })?;
        let len = bytes.len() as u64;
        self.put(run_id, relative, bytes).await?;
        Ok(len)
    }

    /// Starts mirroring the segments the writer closes (absolute paths under `staging`).
    pub fn mirror(&self, run_id: &str, staging: &Path) -> (SegmentSender, Mirror) {
        let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
        let store = self.clone();
        let run_id = run_id.to_string();
        let staging = staging.to_path_buf();
        let task = tokio::spawn(async move {
            let mut report = UploadReport::default();
            while let Some(path) = rx.recv().await {
                let relative = relative_name(&staging, &path);
                report.record(
                    &relative,
                    store.put_file(&run_id, &staging, &relative).await,
                );
            }
            report
        });
        (tx, Mirror { task })
    }
}

/// Where the writer announces each segment it has closed.
pub type SegmentSender = mpsc::UnboundedSender<PathBuf>;

/// The task uploading closed segments; it ends when every [`SegmentSender`] is gone.
#[derive(Debug)]
pub struct Mirror {
    task: JoinHandle<UploadReport>,
}

impl Mirror {
    /// Waits for the segments announced so far to be uploaded (or to fail).
    pub async fn finish(self) -> UploadReport {
        self.task.await.unwrap_or_else(|e| UploadReport {
            failed: vec![format!("the upload task ended abnormally: {e}")],
            ..UploadReport::default()
        })
    }
}

/// What reached the bucket, and what did not (with why).
#[derive(Debug, Default, Clone)]
pub struct UploadReport {
    pub files: usize,
    pub bytes: u64,
    pub failed: Vec<String>,
}

impl UploadReport {
    /// Adds the outcome of uploading `relative`.
    pub fn record(&mut self, relative: &str, outcome: Result<u64, S3Error>) {
        match outcome {
            Ok(len) => {
                self.files += 1;
                self.bytes += len;
            }
            Err(e) => self.failed.push(format!("{relative}: {e}")),
        }
    }
}

/// The gist of an S3 failure: the service's error code and message when it answered (its
/// XML body otherwise buries them), else what object_store says.
fn cause(error: &object_store::Error) -> String {
    let text = error.to_string();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find("</")? + start;
        Some(text[start..end].to_string())
    };
    match (tag("Code"), tag("Message")) {
        (Some(code), Some(message)) => format!("{code} ({message})"),
        (Some(code), None) => code,
        _ => text,
    }
}

/// `requests/part-00000.parquet` for a path under `staging` (S3 keys use `/` everywhere).
fn relative_name(staging: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(staging).unwrap_or(path);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_name_run_directories() {
        let at = S3Location::parse("s3://results/team/exp-1/")
            .unwrap()
            .unwrap();
        assert_eq!(at.bucket, "results");
        assert_eq!(at.prefix, "team/exp-1");
        assert_eq!(at.run_url("r1"), "s3://results/team/exp-1/r1/");
        let bare = S3Location::parse("s3://results").unwrap().unwrap();
        assert_eq!(bare.run_url("r1"), "s3://results/r1/");
        assert!(S3Location::parse("runs/x").is_none());
        let err = S3Location::parse("s3:///x").unwrap().unwrap_err();
        assert!(err.contains("names no bucket"), "{err}");
        assert!(S3Location::parse("s3://b/a/../c").unwrap().is_err());
    }

    #[test]
    fn service_errors_are_reduced_to_code_and_message() {
        let answered = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 404 Not Found: <?xml version=\"1.0\"?>\
                     <Error><Code>NoSuchBucket</Code><Message>The specified bucket does not \
                     exist</Message><RequestId>X</RequestId></Error>"
                .into(),
        };
        assert_eq!(
            cause(&answered),
            "NoSuchBucket (The specified bucket does not exist)"
        );
        let silent = object_store::Error::Generic {
            store: "S3",
            source: "error sending request".into(),
        };
        assert!(cause(&silent).contains("error sending request"));
    }

    #[test]
    fn staged_files_keep_their_relative_names() {
        let staging = Path::new("/tmp/loadgen-x");
        assert_eq!(
            relative_name(
                staging,
                &staging.join("requests").join("part-00001.parquet")
            ),
            "requests/part-00001.parquet"
        );
    }
}
