//! Where each worker's time goes: in a request, waiting for its next one, or neither (the
//! client's own work: rendering, recording, handing rows over) — measured by the worker and
//! read by the client-metrics sampler and the summary.
//!
//! This is the fact the verdict needs and the rows cannot give: a row says how long a request
//! took, not how long its worker was alive around it. Busy time over alive time is the share
//! of the workers that were really in use (N_eff against the workers alive, per phase), and
//! waiting time is the pacing the model asked for (think time, the open schedule, the
//! producer's buffer, retry backoff). The analysis reads these numbers; it never re-derives
//! them from the model's configuration.
//!
//! Each worker owns one [`WorkerClock`] and is its only writer: a state change is a handful
//! of relaxed stores inside a sequence counter (a seqlock), so the worker never locks and
//! never waits, and the sampler, which may retry a read, always sees a consistent clock. The
//! registry of clocks ([`Activity`]) is locked only when a worker starts, when its work moves
//! to another phase (a warm-up's end, a ramp's next stage: once per phase, never per request;
//! its time from then on is the new phase's, on a clock that [continues](Activity::moved) it)
//! and when the sampler reads it. Not responsible for writing anything: the sampler
//! (`sysmon`) and the summary (`report`) do.

use std::sync::atomic::{fence, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// What a worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// The client's own work between requests (rendering, recording, handing rows over).
    Own = 0,
    /// Waiting for its next request: think time, the open schedule, the producer's buffer.
    Waiting = 1,
    /// A request in flight.
    Busy = 2,
}

/// One worker's time, as of some instant (cumulative since it started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Workers counted (1 per clock; summed in a phase's totals).
    pub workers: u64,
    /// Of those, still running at the instant.
    pub workers_alive: u64,
    pub alive_ns: i64,
    pub busy_ns: i64,
    pub waiting_ns: i64,
    /// Requests started, those that started later than the open model's `max_lateness`,
    /// and their total lag behind the intended send time.
    pub sent: u64,
    pub late: u64,
    pub send_lag_ns: i64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.workers += other.workers;
        self.workers_alive += other.workers_alive;
        self.alive_ns += other.alive_ns;
        self.busy_ns += other.busy_ns;
        self.waiting_ns += other.waiting_ns;
        self.sent += other.sent;
        self.late += other.late;
        self.send_lag_ns += other.send_lag_ns;
    }

    /// What happened between `earlier` and `self` (the workers alive stay as at `self`).
    pub fn since(&self, earlier: &Totals) -> Totals {
        Totals {
            workers: self.workers.saturating_sub(earlier.workers),
            workers_alive: self.workers_alive,
            alive_ns: self.alive_ns - earlier.alive_ns,
            busy_ns: self.busy_ns - earlier.busy_ns,
            waiting_ns: self.waiting_ns - earlier.waiting_ns,
            sent: self.sent.saturating_sub(earlier.sent),
            late: self.late.saturating_sub(earlier.late),
            send_lag_ns: self.send_lag_ns - earlier.send_lag_ns,
        }
    }
}

/// One worker's clock; times are nanoseconds from the run's anchor.
#[derive(Debug)]
#[repr(align(64))]
pub struct WorkerClock {
    /// Odd while the worker is writing.
    seq: AtomicU64,
    state: AtomicU8,
    since_ns: AtomicI64,
    busy_ns: AtomicI64,
    waiting_ns: AtomicI64,
    sent: AtomicU64,
    late: AtomicU64,
    send_lag_ns: AtomicI64,
    /// `i64::MAX` while the worker runs.
    ended_ns: AtomicI64,
    started_ns: i64,
    phase: u16,
    /// True for the clock of a worker that moved here from another phase: the same worker,
    /// not counted again as started.
    continued: bool,
    max_lateness_ns: i64,
}

impl WorkerClock {
    fn new(phase: u16, started_ns: i64, max_lateness_ns: i64) -> Self {
        WorkerClock {
            seq: AtomicU64::new(0),
            state: AtomicU8::new(State::Own as u8),
            since_ns: AtomicI64::new(started_ns),
            busy_ns: AtomicI64::new(0),
            waiting_ns: AtomicI64::new(0),
            sent: AtomicU64::new(0),
            late: AtomicU64::new(0),
            send_lag_ns: AtomicI64::new(0),
            ended_ns: AtomicI64::new(i64::MAX),
            started_ns,
            phase,
            continued: false,
            max_lateness_ns,
        }
    }

    /// The worker's phase (where it was started).
    pub fn phase(&self) -> u16 {
        self.phase
    }

    /// Writes under the sequence counter. Only the owning worker calls this.
    fn write(&self, update: impl FnOnce()) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        update();
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Closes the current state at `at_ns` (its time is credited) and enters `state`.
    fn switch(&self, state: State, at_ns: i64) {
        let elapsed = (at_ns - self.since_ns.load(Ordering::Relaxed)).max(0);
        match self.state.load(Ordering::Relaxed) {
            s if s == State::Busy as u8 => {
                let total = self.busy_ns.load(Ordering::Relaxed);
                self.busy_ns.store(total + elapsed, Ordering::Relaxed);
            }
            s if s == State::Waiting as u8 => {
                let total = self.waiting_ns.load(Ordering::Relaxed);
                self.waiting_ns.store(total + elapsed, Ordering::Relaxed);
            }
            _ => {}
        }
        self.state.store(state as u8, Ordering::Relaxed);
        self.since_ns.store(
            at_ns.max(self.since_ns.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
    }

    /// The worker enters `state` at `at_ns`.
    pub fn enter(&self, state: State, at_ns: i64) {
        self.write(|| self.switch(state, at_ns));
    }

    /// A request starts at `at_ns`, `lag_ns` after its intended send time (open model).
    pub fn send(&self, at_ns: i64, lag_ns: Option<i64>) {
        self.write(|| {
            self.switch(State::Busy, at_ns);
            self.sent
                .store(self.sent.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            if let Some(lag) = lag_ns {
                let total = self.send_lag_ns.load(Ordering::Relaxed);
                self.send_lag_ns.store(total + lag, Ordering::Relaxed);
                if lag > self.max_lateness_ns {
                    self.late
                        .store(self.late.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                }
            }
        });
    }

    /// The worker has finished at `at_ns`.
    pub fn end(&self, at_ns: i64) {
        self.write(|| {
            self.switch(State::Own, at_ns);
            self.ended_ns.store(at_ns, Ordering::Relaxed);
        });
    }

    /// The clock as of `now_ns`, the current state counted up to then.
    pub fn read(&self, now_ns: i64) -> Totals {
        let mut attempts = 0u32;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq % 2 == 1 {
                // A worker preempted mid-write holds no lock; let it run rather than spin.
                attempts = attempts.saturating_add(1);
                if attempts < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            let totals = self.read_fields(now_ns);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == seq {
                return totals;
            }
        }
    }

    fn read_fields(&self, now_ns: i64) -> Totals {
        let ended_ns = self.ended_ns.load(Ordering::Relaxed);
        let until = now_ns.min(ended_ns);
        let open = (until - self.since_ns.load(Ordering::Relaxed)).max(0);
        let state = self.state.load(Ordering::Relaxed);
        let current = |s: State| if state == s as u8 { open } else { 0 };
        Totals {
            workers: 1,
            workers_alive: u64::from(ended_ns > now_ns),
            alive_ns: (until - self.started_ns).max(0),
            busy_ns: self.busy_ns.load(Ordering::Relaxed) + current(State::Busy),
            waiting_ns: self.waiting_ns.load(Ordering::Relaxed) + current(State::Waiting),
            sent: self.sent.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            send_lag_ns: self.send_lag_ns.load(Ordering::Relaxed),
        }
    }
}

/// Every worker's clock.
#[derive(Debug)]
pub struct Activity {
    clocks: Mutex<Vec<Arc<WorkerClock>>>,
    /// Sends later than this after their intended time are late (open model).
    max_lateness_ns: i64,
}

impl Default for Activity {
    /// No send is ever late (runs without a schedule).
    fn default() -> Self {
        Activity::new(i64::MAX)
    }
}

impl Activity {
    /// A registry for a run whose late sends are those more than `max_lateness_ns` behind.
    pub fn new(max_lateness_ns: i64) -> Self {
        Activity {
            clocks: Mutex::default(),
            max_lateness_ns,
        }
    }

    /// A clock for a worker of `phase` starting at `started_ns`.
    pub fn register(&self, phase: u16, started_ns: i64) -> Arc<WorkerClock> {
        let clock = Arc::new(WorkerClock::new(phase, started_ns, self.max_lateness_ns));
        self.lock().push(clock.clone());
        clock
    }

    /// A worker whose work moved to `phase` at `at_ns`: its clock so far ends there, and a
    /// clock of the new phase continues it (the worker is not counted as started again).
    pub fn moved(&self, from: &WorkerClock, phase: u16, at_ns: i64) -> Arc<WorkerClock> {
        from.end(at_ns);
        let mut clock = WorkerClock::new(phase, at_ns, self.max_lateness_ns);
        clock.continued = true;
        let clock = Arc::new(clock);
        self.lock().push(clock.clone());
        clock
    }

    /// Workers started (a worker that moved between phases counts once).
    pub fn started(&self) -> u64 {
        self.lock().iter().filter(|c| !c.continued).count() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<WorkerClock>>> {
        // A panic elsewhere while holding the lock leaves plain data; keep reading it.
        self.clocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Totals per phase (indexed by phase; phases without a worker are absent at the end) as
    /// of `now_ns`.
    pub fn by_phase(&self, now_ns: i64) -> Vec<Totals> {
        let mut phases: Vec<Totals> = Vec::new();
        for clock in self.lock().iter() {
            let phase = usize::from(clock.phase);
            if phases.len() <= phase {
                phases.resize(phase + 1, Totals::default());
            }
            phases[phase].add(&clock.read(now_ns));
        }
        phases
    }

    /// Every worker's totals summed.
    pub fn total(phases: &[Totals]) -> Totals {
        let mut total = Totals::default();
        for phase in phases {
            total.add(phase);
        }
        total
    }

    /// The earliest start and the latest end of a phase's workers (`None` without any).
    pub fn span(&self, phase: u16) -> Option<(i64, i64)> {
        let clocks = self.lock();
        let of_phase = clocks.iter().filter(|c| c.phase == phase);
        let first = of_phase.clone().map(|c| c.started_ns).min()?;
        let last = of_phase.map(|c| c.ended_ns.load(Ordering::Relaxed)).max()?;
        Some((first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_splits_a_workers_time_into_busy_waiting_and_its_own() {
        let activity = Activity::new(5);
        let clock = activity.register(1, 100);
        clock.enter(State::Waiting, 110);
        clock.enter(State::Own, 140);
        clock.send(150, Some(10));
        // Read mid-request: the request so far counts as busy.
        let mid = clock.read(170);
        assert_eq!((mid.busy_ns, mid.waiting_ns, mid.alive_ns), (20, 30, 70));
        assert_eq!((mid.sent, mid.late, mid.send_lag_ns), (1, 1, 10));
        clock.enter(State::Own, 200);
        clock.send(210, Some(3));
        clock.enter(State::Own, 220);
        clock.end(230);
        let end = clock.read(1_000);
        assert_eq!(end.alive_ns, 130);
        assert_eq!(end.busy_ns, 60);
        assert_eq!(end.waiting_ns, 30);
        assert_eq!((end.sent, end.late, end.send_lag_ns), (2, 1, 13));
        assert_eq!(end.workers_alive, 0);
        let phases = activity.by_phase(1_000);
        assert_eq!(phases.len(), 2);
        assert_eq!(phases[0], Totals::default());
        assert_eq!(phases[1], end);
        assert_eq!(activity.span(1), Some((100, 230)));
        assert_eq!(activity.span(0), None);
        // An interval's share is the difference of two reads.
        let interval = end.since(&mid);
        assert_eq!((interval.busy_ns, interval.sent), (40, 1));
    }

    /// The sampler reads while the worker writes: every read is a consistent clock. Read at
    /// time 0, nothing is open, so the totals are the worker's own counts: each request adds
    /// 2 ns busy and then 1 ns waiting, and a torn read would break that ratio.
    #[test]
    fn reads_racing_writes_stay_consistent() {
        let activity = Arc::new(Activity::new(i64::MAX));
        let clock = activity.register(0, 0);
        let writer = {
            let clock = clock.clone();
            std::thread::spawn(move || {
                for i in 0..200_000i64 {
                    clock.send(4 * i, None);
                    clock.enter(State::Own, 4 * i + 2);
                    clock.enter(State::Waiting, 4 * i + 3);
                }
                clock.end(800_000);
            })
        };
        let mut reads = 0;
        while !writer.is_finished() {
            let now = clock.read(0);
            let sent = now.sent as i64;
            assert!([2 * sent - 2, 2 * sent].contains(&now.busy_ns), "{now:?}");
            assert!([sent - 1, sent].contains(&now.waiting_ns), "{now:?}");
            reads += 1;
        }
        writer.join().unwrap();
        let end = clock.read(i64::MAX / 2);
        assert_eq!(
            (end.busy_ns, end.waiting_ns, end.sent),
            (400_000, 200_000, 200_000)
        );
        assert!(reads > 0);
    }
}
