//! Record batches per runtime thread, not per worker: the rows of every worker running on a
//! thread go into that thread's batch, which is handed to the writer when it holds
//! [`BATCH_ROWS`] rows or its oldest row is [`BATCH_MAX_AGE`] old.
//!
//! A batch per worker cost each connection its batch's capacity (256 rows, ~38 KB, refilled
//! after every hand-over) and, with many workers each sending a few requests a second, held
//! up to a second of every worker's rows in as many half-empty vectors; with one batch per
//! thread, 100,000 idle workers hold no rows at all. Each slot has a lock that, in practice,
//! only its own thread takes: the flusher takes it a few times a second, and a worker the
//! runtime moved to another thread takes its previous thread's while its last row is still
//! there — so that each worker's rows reach the writer in the order it sent them, as the
//! analysis' one-pass gaps rely on. Batches leave a slot under its lock, so a slot's batches
//! reach the writer in order too.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::nanos;
use crate::record::RequestRecord;
use crate::stats::LiveCounters;
use crate::store::writer::RecordSender;

/// Rows a batch holds before it is handed to the writer.
pub(crate) const BATCH_ROWS: usize = 256;
/// Oldest a batch may get before it is handed over anyway, so a killed run loses little.
pub(crate) const BATCH_MAX_AGE: Duration = Duration::from_secs(1);
/// How often the flusher looks for batches that have grown old with no worker to hand them
/// over (every worker on the thread waiting: think time, the schedule).
const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// One thread's batch.
struct Slot {
    rows: Vec<RequestRecord>,
    /// When its first row was added.
    started: Instant,
    /// Batches handed over from this slot so far.
    generation: u64,
}

/// Where a worker's previous row went, so its next one follows it while it is still there.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LastSlot {
    slot: Option<(usize, u64)>,
}

/// The writer is gone: results that cannot be kept are not results.
#[derive(Debug)]
pub(crate) struct WriterGone;

/// The run's batches, one slot per runtime thread, and the channel to the writer.
pub(crate) struct Batches {
    slots: Box<[Mutex<Slot>]>,
    records: RecordSender,
    live: Arc<LiveCounters>,
    /// A batch this old goes to the writer: [`BATCH_MAX_AGE`], or less when a judge watches
    /// the run (`--abort-on-fail`).
    max_age: Duration,
}

thread_local! {
    /// This thread's number, given on its first push.
    static THREAD: Cell<Option<usize>> = const { Cell::new(None) };
}
static THREADS: AtomicUsize = AtomicUsize::new(0);

impl Batches {
    /// Batches with one slot per core (the runtime's worker threads).
    pub(crate) fn new(
        records: RecordSender,
        live: Arc<LiveCounters>,
        max_age: Duration,
    ) -> Arc<Self> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let slot = || {
            Mutex::new(Slot {
                rows: Vec::new(),
                started: Instant::now(),
                generation: 0,
            })
        };
        Arc::new(Batches {
            slots: (0..threads).map(|_| slot()).collect(),
            records,
            live,
            max_age,
        })
    }

    fn lock(&self, index: usize) -> MutexGuard<'_, Slot> {
        // A worker that panicked holding the lock left whole rows: keep them.
        self.slots[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds `row` to this thread's batch (or, while the worker's previous row waits in another
    /// thread's batch, to that one) and hands the batch over when it is full or old.
    pub(crate) fn push(
        &self,
        row: RequestRecord,
        now: Instant,
        last: &mut LastSlot,
    ) -> Result<(), WriterGone> {
        let here = THREAD.with(|t| {
            let number = t.get().unwrap_or_else(|| {
                let number = THREADS.fetch_add(1, Ordering::Relaxed);
                t.set(Some(number));
                number
            });
            number % self.slots.len()
        });
        let index = match last.slot {
            Some((index, generation)) if index != here => {
                // Still pending there if that slot has not handed a batch over since.
                let still_there = self.lock(index).generation == generation;
                if still_there {
                    index
                } else {
                    here
                }
            }
            _ => here,
        };
        let mut slot = self.lock(index);
        if slot.rows.is_empty() {
            slot.started = now;
            slot.rows.reserve_exact(BATCH_ROWS);
        }
        slot.rows.push(row);
        last.slot = Some((index, slot.generation));
        if slot.rows.len() >= BATCH_ROWS || now - slot.started >= self.max_age {
            self.hand_over(&mut slot)?;
        }
        Ok(())
    }

    /// Sends the slot's batch to the writer, under the slot's lock so that its batches keep
    /// their order; a full channel blocks this thread, and the time is counted.
    fn hand_over(&self, slot: &mut Slot) -> Result<(), WriterGone> {
        if slot.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut slot.rows);
        slot.generation += 1;
        match self.records.try_send(rows) {
            Ok(()) => Ok(()),
            Err(flume::TrySendError::Full(rows)) => {
                let blocked = Instant::now();
                let sent = self.records.send(rows);
                self.live
                    .handoff_blocked_ns
                    .fetch_add(nanos(blocked.elapsed()) as u64, Ordering::Relaxed);
                sent.map_err(|_| WriterGone)
            }
            Err(flume::TrySendError::Disconnected(_)) => Err(WriterGone),
        }
    }

    /// Hands over every batch at least `age` old (all of them with `Duration::ZERO`).
    pub(crate) fn flush_older_than(&self, age: Duration) -> Result<(), WriterGone> {
        let now = Instant::now();
        for index in 0..self.slots.len() {
            let mut slot = self.lock(index);
            if !slot.rows.is_empty() && now - slot.started >= age {
                self.hand_over(&mut slot)?;
            }
        }
        Ok(())
    }

    /// Runs until the writer is gone or the task is aborted: hands over batches that grew
    /// old while every worker of their thread waited.
    pub(crate) async fn flusher(self: Arc<Self>) -> Result<(), WriterGone> {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.flush_older_than(self.max_age)?;
        }
    }

    /// Rows waiting in batches (for tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        (0..self.slots.len()).map(|i| self.lock(i).rows.len()).sum()
    }
}

impl Drop for Batches {
    /// The rows still waiting go to the writer when the last worker (and the pool) let go.
    fn drop(&mut self) {
        let _ = self.flush_older_than(Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(worker: u32, start_ns: i64) -> RequestRecord {
        RequestRecord {
            start_ns,
            intended_ns: None,
            latency_ns: 1,
            connect_ns: None,
            send_ns: None,
            ttfb_ns: None,
            queue_wait_ns: None,
            buffer_wait_ns: None,
            op: 0,
            status: 200,
            error: None,
            bytes_sent: 0,
            bytes_received: 0,
            worker,
            phase: 0,
            attempt: 1,
            check: None,
            trace_id: None,
            grpc_status: None,
            grpc_message: None,
            retry_after_s: None,
        }
    }

    #[test]
    fn full_batches_go_out_whole_and_in_order_and_a_flush_sends_the_rest() {
        let (tx, rx) = flume::bounded(1024);
        let batches = Batches::new(tx, Arc::new(LiveCounters::for_ops(1)), BATCH_MAX_AGE);
        let mut last = LastSlot::default();
        let now = Instant::now();
        for i in 0..(BATCH_ROWS as i64 * 2 + 10) {
            batches.push(row(7, i), now, &mut last).unwrap();
        }
        assert_eq!(rx.len(), 2);
        assert_eq!(batches.waiting(), 10);
        batches.flush_older_than(Duration::ZERO).unwrap();
        let starts: Vec<i64> = rx.drain().flatten().map(|r| r.start_ns).collect();
        assert_eq!(
            starts,
            (0..(BATCH_ROWS as i64 * 2 + 10)).collect::<Vec<_>>()
        );
        assert_eq!(batches.waiting(), 0);
    }

    #[test]
    fn a_row_follows_its_workers_previous_row_while_that_is_still_waiting() {
        let (tx, rx) = flume::bounded(1024);
        let batches = Arc::new(Batches {
            slots: (0..2)
                .map(|_| {
                    Mutex::new(Slot {
                        rows: Vec::new(),
                        started: Instant::now(),
                        generation: 0,
                    })
                })
                .collect(),
            records: tx,
            live: Arc::new(LiveCounters::for_ops(1)),
            max_age: BATCH_MAX_AGE,
        });
        // The worker's first row waits in the other thread's slot.
        let here = {
            let mut last = LastSlot::default();
            batches.push(row(1, 0), Instant::now(), &mut last).unwrap();
            last.slot.unwrap().0
        };
        let there = 1 - here;
        batches.lock(here).rows.clear();
        batches.lock(there).rows.push(row(1, 0));
        let mut last = LastSlot {
            slot: Some((there, 0)),
        };
        batches.push(row(1, 1), Instant::now(), &mut last).unwrap();
        assert_eq!(last.slot.map(|(index, _)| index), Some(there));
        assert_eq!(
            batches.lock(there).rows.len(),
            2,
            "followed its previous row"
        );
        // Once that batch is handed over, the next row goes to this thread's slot.
        batches.flush_older_than(Duration::ZERO).unwrap();
        batches.push(row(1, 2), Instant::now(), &mut last).unwrap();
        assert_eq!(batches.lock(here).rows.len(), 1);
        let starts: Vec<i64> = rx.drain().flatten().map(|r| r.start_ns).collect();
        assert_eq!(starts, vec![0, 1]);
    }
}
