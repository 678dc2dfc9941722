//! Background OS threads: the Parquet writer and the client-metrics sampler run at a lower
//! scheduling priority than the threads that send requests.
//!
//! Both do bursts of work (encoding and compressing tens of thousands of rows; reading /proc)
//! that, on a client with one core to spare, would otherwise hold the core for milliseconds
//! and make scheduled sends late. At nice +10 they get the time the request path leaves idle.
//! They never block the workers: batches wait in a channel. This module only starts threads;
//! what they do is the caller's.

/// How much nicer than the rest of loadgen a background thread is.
const BACKGROUND_NICENESS: i32 = 10;

/// Spawns a named OS thread that lowers its own priority before running `body`.
pub fn spawn<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lower_priority();
            body()
        })
}

/// On Linux a thread's nice value is its own (setpriority on its thread id). Failing to
/// change it (a sandbox forbids it) costs precision, not correctness, so it is ignored.
fn lower_priority() {
    let tid = rustix::thread::gettid();
    let current = rustix::process::getpriority_process(Some(tid)).unwrap_or(0);
    let _ = rustix::process::setpriority_process(Some(tid), current + BACKGROUND_NICENESS);
}
