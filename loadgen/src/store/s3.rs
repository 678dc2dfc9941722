//! Run directories in S3 (`--out s3://bucket/prefix`), for shards on machines that share no disk.
//!
//! The run is written to a local staging directory exactly as any run is; this module mirrors
//! it into `s3://bucket/prefix/<run-id>/` as files close: a first `run.json` (marked
//! `"exit_reason": "running"`) before any request, each Parquet segment as soon as the writer
//! closes it, and `client-metrics.parquet` and the final `run.json` at the end, the latter only
//! when every file before it arrived (a finished run.json means the rows are all there). A lost machine
//! therefore loses at most its open segment. The S3 client is `object_store`'s, configured the
//! AWS way: credentials from the environment, a web-identity token (EKS IRSA), EKS Pod
//! Identity, the ECS task role or the EC2 instance profile; region from `AWS_REGION` /
//! `AWS_DEFAULT_REGION`; `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`) for S3-compatible
//! stores. Uploads never hold a run: segments upload a few at a time while the load goes on,
//! the end waits a bounded time for the rest (`--upload-timeout`), and a signal stops them at
//! once; what did not arrive stays in the staging directory for `loadgen upload`
//! ([`upload_run_dir`]). Nothing here knows about rows or requests: it moves files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use crate::stop::{ExitReason, StopSignal};

/// Attempts and time one upload may take before it counts as failed (object_store retries
/// with backoff in between). Short enough that a dead store does not hold a finished run for
/// minutes, long enough to ride out a throttled or briefly unreachable endpoint.
const MAX_RETRIES: usize = 5;
const RETRY_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Closed segments uploading at once during the run: a slow or hanging store delays each
/// upload, not the ones queued behind it.
const CONCURRENT_UPLOADS: usize = 4;
/// How long the first run.json (before any request) may take: a store that lists but does
/// not take a file is found out before the load, not after it.
pub const FIRST_UPLOAD_TIMEOUT: Duration = Duration::from_secs(15);

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
    #[error(
        "cannot use {location}: a first upload got no answer within {}s; check that \
         AWS_ENDPOINT_URL (or the region) names a store that is up",
        waited.as_secs()
    )]
    Hanging { location: String, waited: Duration },
    #[error("{0}")]
    Target(String),
    #[error(
        "{} is not a run directory (it has no run.json naming its run_id); give the directory \
         the run printed",
        .0.display()
    )]
    NotARun(PathBuf),
    #[error("cannot read {path} to upload it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot upload {key}: {}", cause(.source))]
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

    /// Where runs go (`s3://bucket/prefix`).
    pub fn location(&self) -> &S3Location {
        &self.location
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

    /// Starts mirroring the segments the writer closes (absolute paths under `staging`), up
    /// to four at once.
    pub fn mirror(&self, run_id: &str, staging: &Path) -> (SegmentSender, Mirror) {
        let (tx, rx) = mpsc::unbounded_channel::<PathBuf>();
        let (finals, finals_rx) = oneshot::channel();
        let files = Files {
            store: self.clone(),
            run_id: run_id.to_string(),
            staging: staging.to_path_buf(),
        };
        let task = tokio::spawn(files.mirror(rx, finals_rx));
        (tx, Mirror { task, finals })
    }
}

/// One run directory's files going to the bucket.
#[derive(Debug, Clone)]
struct Files {
    store: S3Store,
    run_id: String,
    staging: PathBuf,
}

impl Files {
    /// Uploads every segment announced on `segments`, several at once, until the writer is
    /// done; then, once all of them are in, the `finals` in order — run.json last and only
    /// when every file before it arrived, so a finished run.json in the bucket means every
    /// file of the run is there.
    async fn mirror(
        self,
        mut segments: mpsc::UnboundedReceiver<PathBuf>,
        finals: oneshot::Receiver<Vec<String>>,
    ) -> UploadReport {
        let mut report = UploadReport::default();
        let mut uploads = JoinSet::new();
        let slots = Arc::new(Semaphore::new(CONCURRENT_UPLOADS));
        while let Some(path) = segments.recv().await {
            let (files, slots) = (self.clone(), slots.clone());
            let relative = relative_name(&self.staging, &path);
            uploads.spawn(async move {
                let _slot = slots.acquire_owned().await;
                files.put(&relative).await
            });
            while let Some(done) = uploads.try_join_next() {
                report.record_joined(done);
            }
        }
        while let Some(done) = uploads.join_next().await {
            report.record_joined(done);
        }
        for relative in finals.await.unwrap_or_default() {
            if relative == SEAL && !report.failed.is_empty() {
                report.failed.push(format!(
                    "{SEAL} held back, so the bucket shows no finished run without its files"
                ));
                continue;
            }
            let outcome = self.put(&relative).await;
            report.record(outcome);
        }
        report
    }

    async fn put(&self, relative: &str) -> Result<u64, S3Error> {
        self.store
            .put_file(&self.run_id, &self.staging, relative)
            .await
    }
}

/// `loadgen upload DIR s3://BUCKET/PREFIX`: uploads a run directory kept locally to
/// `PREFIX/<run-id>/` (the run id from its run.json), segments first and run.json last, as the
/// run itself would have; waits at most `limit`, and stops at a signal. The local directory
/// is left as it is. Returns where the run went and how the upload went.
pub async fn upload_run_dir(
    dir: &Path,
    to: &str,
    limit: Duration,
    stop: &StopSignal,
) -> Result<(String, Uploaded), S3Error> {
    let location = match S3Location::parse(to) {
        Some(parsed) => parsed.map_err(S3Error::Target)?,
        None => {
            return Err(S3Error::Target(format!(
                "'{to}' is not an S3 location; write s3://BUCKET/PREFIX (the run's --out)"
            )))
        }
    };
    let run_id = run_id_of(dir)?;
    let store = S3Store::connect(&location).await?;
    let (segments, mirror) = store.mirror(&run_id, dir);
    // Complete segments only: an open one is a hidden `.partial` file.
    let parts = super::segments(&dir.join("requests")).unwrap_or_default();
    for part in parts {
        let _ = segments.send(part);
    }
    drop(segments);
    let uploaded = mirror.finish(final_files(dir), limit, stop).await;
    Ok((location.run_url(&run_id), uploaded))
}

/// The file that seals a run in the bucket: uploaded last, and only when every file before
/// it arrived, so a finished run.json there means every row is there too.
const SEAL: &str = "run.json";

/// The files uploaded after every segment, in order, that `dir` has: run.json goes last, so a
/// finished run.json in the bucket means everything before it is there.
pub fn final_files(dir: &Path) -> Vec<String> {
    ["client-metrics.parquet", SEAL]
        .into_iter()
        .filter(|relative| dir.join(relative).exists())
        .map(String::from)
        .collect()
}

/// The run id a run directory's run.json names.
fn run_id_of(dir: &Path) -> Result<String, S3Error> {
    let not_a_run = || S3Error::NotARun(dir.to_path_buf());
    let text = std::fs::read_to_string(dir.join("run.json")).map_err(|_| not_a_run())?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|_| not_a_run())?;
    json["run_id"]
        .as_str()
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .map(String::from)
        .ok_or_else(not_a_run)
}

/// Where the writer announces each segment it has closed.
pub type SegmentSender = mpsc::UnboundedSender<PathBuf>;

/// The task uploading closed segments; it ends when every [`SegmentSender`] is gone and the
/// final files are in.
#[derive(Debug)]
pub struct Mirror {
    task: JoinHandle<UploadReport>,
    finals: oneshot::Sender<Vec<String>>,
}

impl Mirror {
    /// Uploads `finals` (relative names) after the segments announced so far, waiting at most
    /// `limit` for all of it. A signal (Ctrl-C, SIGTERM) meanwhile stops every upload at once.
    pub async fn finish(
        mut self,
        finals: Vec<String>,
        limit: Duration,
        stop: &StopSignal,
    ) -> Uploaded {
        let _ = self.finals.send(finals);
        let cut = |why: String| UploadReport {
            failed: vec![why],
            ..UploadReport::default()
        };
        tokio::select! {
            joined = &mut self.task => Uploaded {
                report: joined.unwrap_or_else(|e| cut(format!("the upload task ended abnormally: {e}"))),
                stopped_by: None,
            },
            () = tokio::time::sleep(limit) => {
                self.task.abort();
                Uploaded {
                    report: cut(format!(
                        "the uploads did not finish within --upload-timeout {}",
                        humantime::format_duration(limit)
                    )),
                    stopped_by: None,
                }
            }
            reason = stop.next_signal() => {
                self.task.abort();
                Uploaded {
                    report: cut("the upload was stopped by a signal".to_string()),
                    stopped_by: Some(reason),
                }
            }
        }
    }
}

/// How the uploads at the end of a run went.
#[derive(Debug, Default)]
pub struct Uploaded {
    pub report: UploadReport,
    /// The signal that stopped them, if one did (the run then exits as a signalled run).
    pub stopped_by: Option<ExitReason>,
}

/// What reached the bucket, and what did not (with why).
#[derive(Debug, Default, Clone)]
pub struct UploadReport {
    pub files: usize,
    pub bytes: u64,
    pub failed: Vec<String>,
}

impl UploadReport {
    /// Adds the outcome of uploading a file (an error names the file).
    pub fn record(&mut self, outcome: Result<u64, S3Error>) {
        match outcome {
            Ok(len) => {
                self.files += 1;
                self.bytes += len;
            }
            Err(e) => self.failed.push(e.to_string()),
        }
    }

    fn record_joined(&mut self, joined: Result<Result<u64, S3Error>, tokio::task::JoinError>) {
        match joined {
            Ok(outcome) => self.record(outcome),
            Err(e) => self.failed.push(format!("an upload ended abnormally: {e}")),
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
