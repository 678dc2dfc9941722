//! What the API handlers share between requests: the counters, the step store, the next album
//! id and whether bodies are read leniently.
//!
//! It lives below both the server (which creates it and counts into its metrics) and the APIs
//! (which read and update it), so neither has to reach into the other for it. The knobs the
//! server applies around a request (service time, workers, faults) are not here: handlers
//! never see them.

mod steps;

use std::sync::atomic::AtomicU64;

use crate::metrics::Metrics;

pub(crate) use steps::StepStore;

/// One per server, shared by every connection and request.
#[derive(Debug, Default)]
pub(crate) struct AppState {
    pub(crate) metrics: Metrics,
    pub(crate) steps: StepStore,
    /// The last album id handed out; 0 before the first `POST /albums`.
    pub(crate) next_album_id: AtomicU64,
    /// `ServerConfig::lenient`: accept numbers where the API has strings.
    pub(crate) lenient: bool,
}

impl AppState {
    pub(crate) fn new(lenient: bool) -> Self {
        Self {
            lenient,
            ..Self::default()
        }
    }
}
