//! `--dashboard [ADDR]`: a run, a sweep or a capacity search as a live page in the browser,
//! served by loadgen itself, and `--dashboard-out FILE`: the final page saved as one
//! self-contained HTML file.
//!
//! One page per command (`page.rs`): a run makes its own; a workflow makes one before its
//! first run, hands it to each run it makes ([`SharedPage`], in the run's config) and adds
//! each finished level as a point. A run's sampler task reads the live counters once a second
//! (`sample.rs`), adds what the run's own judge says of the rows so far (a hook the runner
//! passes in: the provisional verdict, the server's gauges, the slowest requests) and appends
//! the event to the page's log. Like `--metrics-addr` (hyper, its own listener, bound before
//! the first run so a taken port is bad input) the page costs the workers nothing: a browser
//! only reads the log. After the command the page stays served for `--dashboard-linger`.

mod page;
mod sample;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

pub use self::page::{DashboardListener, FinalDashboard, Page, SharedPage};
use crate::stats::live::LiveMetrics;
use crate::stats::LiveCounters;

/// How often the page gets a new event.
const EVERY: Duration = Duration::from_secs(1);

/// What the run's judge says of the rows so far, once a second, as fields of the event.
pub type SoFar = Box<dyn FnMut() -> Map<String, Value> + Send>;

/// One run's sampler, appending to its own page or to its workflow's.
pub struct Dashboard {
    /// The run's own page; `None` when it appends to its workflow's.
    page: Option<Page>,
    sampler: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("page", &self.page)
            .finish()
    }
}

/// What the dashboard reads and where it goes.
pub struct DashboardSource {
    pub live: Arc<LiveCounters>,
    pub metrics: Arc<LiveMetrics>,
    /// The run's model has a schedule (late and dropped sends are shown).
    pub open: bool,
    /// The page's title: the model and the target.
    pub title: String,
    /// The run's name on a workflow's page (its folder), in each of its events.
    pub run: String,
    /// What the run's judge says so far (the provisional verdict and its facts).
    pub so_far: Option<SoFar>,
    pub out: Option<std::path::PathBuf>,
    pub linger: Duration,
}

impl Dashboard {
    /// Starts sampling onto a page of the run's own, served on `listener` when given.
    pub fn start(
        mut source: DashboardSource,
        listener: Option<DashboardListener>,
    ) -> std::io::Result<Dashboard> {
        let title = std::mem::take(&mut source.title);
        let (out, linger) = (source.out.take(), source.linger);
        let page = Page::start(title, listener, out, linger)?;
        let sampler = sample_onto(page.state().clone(), source, None);
        Ok(Dashboard {
            page: Some(page),
            sampler,
        })
    }

    /// Starts sampling onto a workflow's page; each event names the run.
    pub fn attach(mut source: DashboardSource, page: &SharedPage) -> Dashboard {
        let run = std::mem::take(&mut source.run);
        Dashboard {
            page: None,
            sampler: sample_onto(page.state.clone(), source, Some(run)),
        }
    }

    /// The run is over: stops sampling; on a page of its own, sends `last` (the final
    /// figures, as run.json has them) and saves it (see [`Page::finish`]). A workflow's page
    /// goes on to the next run.
    pub fn finish(mut self, last: &Value, warnings: &mut Vec<String>) -> FinalDashboard {
        self.sampler.abort();
        match self.page.take() {
            Some(page) => page.finish(last, warnings),
            None => FinalDashboard::none(),
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}

/// Samples the run once a second onto the page's log.
fn sample_onto(
    state: Arc<page::State>,
    source: DashboardSource,
    run: Option<String>,
) -> tokio::task::JoinHandle<()> {
    let DashboardSource {
        live,
        metrics,
        mut so_far,
        ..
    } = source;
    let mut sampler = sample::Sampler::new(&live, source.open, state.started);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            let mut event = sampler.sample(&live, &metrics);
            if let Some(run) = &run {
                event["run"] = Value::from(run.as_str());
            }
            if let (Some(so_far), Some(fields)) = (so_far.as_mut(), event.as_object_mut()) {
                fields.extend(so_far());
            }
            state.push(event.to_string());
        }
    })
}
