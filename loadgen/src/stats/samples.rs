//! What a run's judgement needs of each request — latency from its intended send time, its
//! op, whether it failed, when it ended — kept compactly by the writer thread as it writes
//! the rows ([`SampleLog`]) and handed on in memory: the run's finish judges an open run's
//! schedule from it, and a capacity level's watcher and SLOs read it, so nothing a run just
//! wrote is read back from disk. Split into the `warmup` stretch and the judged rest.

use crate::record::{ErrorClass, RequestRecord};

/// One request as the judgement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When the schedule wanted it sent (ns from the run's anchor).
    pub intended_ns: i64,
    /// End of the response (or of the failure) minus the intended send time: latency that a
    /// server falling behind cannot hide.
    pub from_intended_ns: i64,
    /// When it ended (ns from the run's anchor).
    pub end_ns: i64,
    /// How long after its intended time the send started: the client's own delay (the open
    /// model hands a send off at its time whatever the server does).
    pub send_lag_ns: i64,
    /// Index into [`LevelRows::ops`].
    pub op: u16,
    pub failed: bool,
    /// It failed to connect or lost its connection (`connect_refused`, `connect_timeout`,
    /// `reset`): what a target that is down for a moment does, unlike a limiter's answers.
    pub connection_failed: bool,
    /// A response arrived (`status` > 0); only those have a latency that counts.
    pub responded: bool,
}

/// Every row of a level.
#[derive(Debug, Clone, Default)]
pub struct LevelRows {
    pub ops: Vec<String>,
    /// Rows after the warm-up, by intended send time.
    pub judged: Vec<Sample>,
    /// Rows of the warm-up (they still end inside the judged window, and count there).
    pub warmup: Vec<Sample>,
}

impl LevelRows {
    /// The rows of `samples` by intended send time, the warm-up's apart; `ops`: the run's op
    /// names (each sample's `op` indexes them).
    pub fn new(ops: Vec<String>, mut samples: Vec<Sample>, warmup: Vec<Sample>) -> Self {
        let mut warmup = warmup;
        samples.sort_by_key(|s| s.intended_ns);
        warmup.sort_by_key(|s| s.intended_ns);
        LevelRows {
            ops,
            judged: samples,
            warmup,
        }
    }

    /// These rows with the warm-up judged when nothing came after it (a level stopped early,
    /// in its warm-up): what it measured is then all it has to show.
    pub fn or_warmup(mut self) -> Self {
        if self.judged.is_empty() {
            self.judged = std::mem::take(&mut self.warmup);
        }
        self
    }

    /// Mean latency of the judged rows that succeeded (a calibration's R(1): an error answered
    /// fast says nothing of how long a request takes), and how many judged rows failed.
    pub fn successful_mean_ns(&self) -> (f64, u64) {
        let ok: Vec<i64> = self
            .judged
            .iter()
            .filter(|s| !s.failed)
            .map(|s| s.from_intended_ns)
            .collect();
        let failed = (self.judged.len() - ok.len()) as u64;
        let mean = ok.iter().sum::<i64>() as f64 / ok.len() as f64;
        (if ok.is_empty() { f64::NAN } else { mean }, failed)
    }

    /// Median latency of the judged rows that succeeded (the probe's R(1): a failure answered
    /// fast, or cut off, says nothing of how long a request takes); `None` when none did.
    pub fn successful_median_ns(&self) -> Option<f64> {
        let mut ok: Vec<i64> = self
            .judged
            .iter()
            .filter(|s| !s.failed)
            .map(|s| s.from_intended_ns)
            .collect();
        ok.sort_unstable();
        let n = ok.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(ok[n / 2] as f64),
            _ => Some((ok[n / 2 - 1] + ok[n / 2]) as f64 / 2.0),
        }
    }

    /// The judged window: from the first judged send's intended time to the last one's.
    pub fn window_ns(&self) -> Option<(i64, i64)> {
        let first = self.judged.first()?.intended_ns;
        let last = self.judged.last()?.intended_ns;
        (last > first).then_some((first, last))
    }

    /// The index of `op`, if any row has it.
    pub fn op_index(&self, op: &str) -> Option<u16> {
        self.ops
            .iter()
            .position(|o| o == op)
            .and_then(|i| u16::try_from(i).ok())
    }
}

impl Sample {
    /// What the judgement needs of `record`.
    pub fn of(record: &RequestRecord) -> Self {
        let end_ns = record.start_ns + record.latency_ns;
        let intended_ns = record.intended_ns.unwrap_or(record.start_ns);
        Sample {
            intended_ns,
            from_intended_ns: end_ns - intended_ns,
            end_ns,
            send_lag_ns: (record.start_ns - intended_ns).max(0),
            op: record.op,
            failed: record.error.is_some(),
            connection_failed: matches!(
                record.error,
                Some(ErrorClass::ConnectRefused | ErrorClass::ConnectTimeout | ErrorClass::Reset)
            ),
            responded: record.status > 0,
        }
    }
}

/// The writer's log of samples: every row's [`Sample`], the warm-up's apart, and the ones not
/// yet handed to a watcher (`--abort` of a capacity level) over its channel.
#[derive(Debug, Default)]
pub struct SampleLog {
    judged: Vec<Sample>,
    warmup: Vec<Sample>,
    warmup_phase: Option<u16>,
    /// Samples since the last hand-over, and where they go.
    fresh: Vec<(Sample, bool)>,
    watcher: Option<flume::Sender<Vec<(Sample, bool)>>>,
    handed_at: Option<std::time::Instant>,
}

/// How often new samples are handed to a watcher: it judges them about this often.
pub const HAND_OVER_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The receiving end of a watcher: batches of (sample, in the warm-up).
pub type SampleReceiver = flume::Receiver<Vec<(Sample, bool)>>;

impl SampleLog {
    pub fn new(
        warmup_phase: Option<u16>,
        watcher: Option<flume::Sender<Vec<(Sample, bool)>>>,
    ) -> Self {
        SampleLog {
            warmup_phase,
            watcher,
            ..Default::default()
        }
    }

    pub fn push(&mut self, record: &RequestRecord) {
        let sample = Sample::of(record);
        let warmup = self.warmup_phase == Some(record.phase);
        match warmup {
            true => self.warmup.push(sample),
            false => self.judged.push(sample),
        }
        if self.watcher.is_some() {
            self.fresh.push((sample, warmup));
        }
    }

    /// Hands the samples since the last hand-over to the watcher, at most every
    /// [`HAND_OVER_EVERY`] (a watcher gone is ignored).
    pub fn hand_over(&mut self) {
        let due = self
            .handed_at
            .is_none_or(|t| t.elapsed() >= HAND_OVER_EVERY);
        if due {
            self.hand_over_now();
        }
    }

    fn hand_over_now(&mut self) {
        if let (Some(watcher), false) = (&self.watcher, self.fresh.is_empty()) {
            let _ = watcher.send(std::mem::take(&mut self.fresh));
            self.handed_at = Some(std::time::Instant::now());
        }
    }

    /// Every sample, as the run's rows.
    pub fn finish(mut self, ops: Vec<String>) -> LevelRows {
        self.hand_over_now();
        LevelRows::new(ops, self.judged, self.warmup)
    }
}

impl LevelRows {
    /// Adds a watcher's batch.
    pub fn extend(&mut self, batch: Vec<(Sample, bool)>) {
        for (sample, warmup) in batch {
            match warmup {
                true => self.warmup.push(sample),
                false => self.judged.push(sample),
            }
        }
    }
}
