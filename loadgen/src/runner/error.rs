//! Why a run could not be carried out, and the exit code each reason maps to: 2 for input the
//! user can fix before anything ran, 1 for failures during the run.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::ConfigError;
use crate::stop::ExitReason;
use crate::store::s3::S3Error;
use crate::store::writer::RecordError;
use crate::transport::tls::TlsSetupError;
use crate::transport::ConnectFailure;

impl RunError {
    /// The target could not be reached (resolved, connected to, trusted): a workflow that
    /// already ran against it lost it, rather than was given bad input.
    pub fn is_target_lost(&self) -> bool {
        matches!(
            self,
            RunError::Dns { .. } | RunError::Unreachable { .. } | RunError::Certificate { .. }
        )
    }
}

/// Why a run could not be carried out. [`RunError::exit_code`] maps each to the process exit.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot resolve host '{host}' of --url {url} ({reason}); check the host name")]
    Dns {
        url: String,
        host: String,
        reason: String,
    },
    #[error(
        "cannot connect to {url} ({addr}): {source}; is the server running and is the URL right?"
    )]
    Unreachable {
        url: String,
        addr: SocketAddr,
        #[source]
        source: ConnectFailure,
    },
    #[error("cannot connect securely to {url}: {detail}; if the server uses a private or self-signed certificate, trust its CA with --cacert FILE (or skip verification with --insecure)")]
    Certificate { url: String, detail: String },
    #[error(transparent)]
    TlsSetup(#[from] TlsSetupError),
    #[error("--source-addr {addr} {reason}; give addresses of this machine's interfaces (see `ip addr`), of the target's family")]
    SourceAddr {
        addr: std::net::IpAddr,
        reason: String,
    },
    /// A `--server-saturation` gauge the scrape before the run could not pin to one series.
    #[error("{0}")]
    SaturationGauge(String),
    #[error("stopped while waiting for --start-at; nothing was run")]
    NotStarted(ExitReason),
    #[error("--out {0} already exists and is not empty; choose a new directory or remove it")]
    OutExists(PathBuf),
    #[error("--out {0} {1}, not a directory; give a directory that is new or empty")]
    OutNotDirectory(PathBuf, &'static str),
    #[error(
        "{workers} workers need about {needed} open files but the limit is {limit} and loadgen \
         cannot raise it (it is the hard limit); raise it with `ulimit -n {needed}` (or in \
         /etc/security/limits.conf), use fewer workers, or run the load as {shards} processes \
         started together (`--shard I/{shards} --start-at TIME`, each with its own \
         --source-addr; see bench/connections.sh)",
        shards = needed.div_ceil((*limit).max(1))
    )]
    OpenFiles {
        workers: u32,
        needed: u64,
        limit: u64,
    },
    #[error(
        "{connections} connections need {needed} local addresses (one holds about \
         {per_address} to one server address: the kernel's ephemeral ports) but there are \
         {given}; give more with --source-addr (a range such as 10.0.0.1-10.0.0.{needed} of \
         this machine's addresses) or use fewer connections"
    )]
    SourcePorts {
        connections: u64,
        per_address: u64,
        needed: u64,
        given: usize,
    },
    #[error(
        "cannot create run directory {path}: {source}; choose a writable directory with --out"
    )]
    RunDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot create the staging directory {path} for --out s3:// ({source}); the run is \
         staged under TMPDIR before it is uploaded: set TMPDIR to a writable directory with room \
         for the run"
    )]
    Staging {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the embedded reference server: {0}")]
    EmbeddedServer(#[source] std::io::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(
        "{source}; the run stopped there: the {kept} segment(s) closed before it in {} are \
         complete, later requests were not kept and no run.json was written",
        dir.display()
    )]
    RecordsLost {
        #[source]
        source: RecordError,
        /// The `requests/` directory.
        dir: PathBuf,
        /// Complete segments in it.
        kept: usize,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    S3(#[from] S3Error),
    #[error("cannot serve metrics on --metrics-addr {addr}: {source}; choose a free port (or port 0 for any)")]
    MetricsAddr {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serve the dashboard on --dashboard {addr}: {source}; choose a free port (or port 0 for any)")]
    DashboardAddr {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// 2 for input the user can fix before anything ran; 1 for failures during the run;
    /// 130/143 for a signal while waiting for `--start-at`.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::NotStarted(reason) => reason.exit_code(),
            RunError::Config(_)
            | RunError::Dns { .. }
            | RunError::Unreachable { .. }
            | RunError::Certificate { .. }
            | RunError::TlsSetup(_)
            | RunError::SaturationGauge(_)
            | RunError::OutExists(_)
            | RunError::OutNotDirectory(..)
            | RunError::OpenFiles { .. }
            | RunError::SourcePorts { .. }
            | RunError::SourceAddr { .. }
            | RunError::RunDir { .. }
            | RunError::Staging { .. }
            | RunError::S3(_)
            | RunError::MetricsAddr { .. }
            | RunError::DashboardAddr { .. } => 2,
            RunError::EmbeddedServer(_)
            | RunError::Record(_)
            | RunError::RecordsLost { .. }
            | RunError::Write { .. } => 1,
        }
    }
}
