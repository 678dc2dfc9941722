//! What else the host did while a capacity level ran, read from /proc at the level's start and
//! end (no sampler: two readings of a few milliseconds each): how long this client's threads
//! waited in the run queue for a core (each thread's `schedstat` `run_delay`), the CPU of the
//! processes that listen on a loopback target's port (the server on this host), and the other
//! processes that used the most CPU — the other work a busy-host answer names.
//!
//! The host's steal is the time its hypervisor gave this machine's cores to other machines
//! (/proc/stat `steal`): on a shared cloud host a tenth of the cores stolen stalls client and
//! server together for the hypervisor's slices, milliseconds at a time, which a p99 sees
//! although no process here used the CPU (issue 59: 15–39 % stolen under load made a quiet-
//! looking 2-core VM fail 8 × 10 ms at 640 req/s). It is other work the guest cannot name
//! otherwise.
//!
//! The client's run-queue delay is the direct measure of a host that kept it off its cores: a
//! client whose sends went out late while its own CPU was low and its threads waited for a
//! core was starved by the host, not limited by itself. Processes this user may not read are
//! left out of the names (their CPU is still in the host's busy cores, `client.host_other_cores`).

use std::collections::HashMap;
use std::time::Instant;

use procfs::process::{all_processes, FDTarget, Process};
use procfs::{CurrentSI, KernelStats};

/// At most this many other processes are named.
const NAMED: usize = 3;
/// Other work is named from this many cores (a process's, or the hypervisor's steal).
pub const NAMED_FROM_CORES: f64 = 0.1;

/// One reading: when, this process's threads' run-queue delay, every readable process's CPU.
#[derive(Debug, Clone)]
pub struct Reading {
    at: Instant,
    run_delay_ns: Option<u64>,
    /// The host's steal over all its cores, in ticks; `None` where /proc/stat cannot be read.
    steal_ticks: Option<u64>,
    /// pid → (command name, utime + stime in ticks).
    cpu_ticks: HashMap<i32, (String, u64)>,
}

/// What the host did between two readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostWork {
    /// Seconds this client's threads together waited for a core, per second of wall time;
    /// `None` where /proc/self/task/*/schedstat cannot be read.
    pub run_delay_share: Option<f64>,
    /// The CPU of the processes listening on the target's port (a loopback target), in cores;
    /// `None` when none was found or the target is not on this host.
    pub server_cpu_cores: Option<f64>,
    /// Cores the hypervisor gave to other machines (/proc/stat `steal`); `None` where it
    /// cannot be read.
    pub steal_cores: Option<f64>,
    /// The other commands that used the most CPU, their processes' cores summed by name (at
    /// most `NAMED`, each at least a tenth of a core), this process and the server's left out.
    pub others: Vec<(String, f64)>,
}

/// Reads the run-queue delay of this process's threads and every readable process's CPU.
pub fn read() -> Reading {
    let cpu_ticks = all_processes()
        .map(|procs| {
            procs
                .flatten()
                .filter_map(|p| {
                    let stat = p.stat().ok()?;
                    Some((stat.pid, (stat.comm, stat.utime + stat.stime)))
                })
                .collect()
        })
        .unwrap_or_default();
    Reading {
        at: Instant::now(),
        run_delay_ns: own_run_delay_ns(),
        steal_ticks: KernelStats::current()
            .ok()
            .and_then(|stats| stats.total.steal),
        cpu_ticks,
    }
}

/// The sum of this process's threads' run-queue delay (ns); threads that ended are not in it.
fn own_run_delay_ns() -> Option<u64> {
    let tasks = Process::myself().ok()?.tasks().ok()?;
    let delays: Vec<u64> = tasks
        .flatten()
        .filter_map(|t| t.schedstat().ok().map(|s| s.run_delay))
        .collect();
    (!delays.is_empty()).then(|| delays.iter().sum())
}

/// The processes holding a listening TCP socket on `port` (a server on this host).
pub fn listeners(port: u16) -> Vec<i32> {
    let listening: Vec<u64> = [procfs::net::tcp(), procfs::net::tcp6()]
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.state == procfs::net::TcpState::Listen && e.local_address.port() == port)
        .map(|e| e.inode)
        .collect();
    if listening.is_empty() {
        return Vec::new();
    }
    let Ok(procs) = all_processes() else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter(|p| {
            p.fd().is_ok_and(|fds| {
                fds.flatten()
                    .any(|fd| matches!(fd.target, FDTarget::Socket(i) if listening.contains(&i)))
            })
        })
        .map(|p| p.pid)
        .collect()
}

/// What the host did from `start` to `end`; `server` are the pids of a server on this host.
pub fn between(start: &Reading, end: &Reading, server: &[i32]) -> HostWork {
    let wall_s = end.at.duration_since(start.at).as_secs_f64();
    if wall_s <= 0.0 {
        return HostWork::default();
    }
    let per_tick_s = 1.0 / procfs::ticks_per_second() as f64;
    let used = |pid: &i32, (_, ticks): &(String, u64)| {
        let before = start.cpu_ticks.get(pid).map_or(0, |(_, t)| *t);
        ticks.saturating_sub(before) as f64 * per_tick_s / wall_s
    };
    let me = std::process::id() as i32;
    let server_cpu_cores = (!server.is_empty()).then(|| {
        server
            .iter()
            .filter_map(|pid| end.cpu_ticks.get_key_value(pid))
            .map(|(pid, v)| used(pid, v))
            .sum()
    });
    // Summed by command name: three `rustc`s are one line, "rustc 0.6 cores".
    let mut by_name: HashMap<&str, f64> = HashMap::new();
    for (pid, v) in end.cpu_ticks.iter() {
        if *pid != me && !server.contains(pid) {
            *by_name.entry(v.0.as_str()).or_default() += used(pid, v);
        }
    }
    let mut others: Vec<(String, f64)> = by_name
        .into_iter()
        .filter(|(_, cores)| *cores >= NAMED_FROM_CORES)
        .map(|(name, cores)| (name.to_string(), cores))
        .collect();
    others.sort_by(|a, b| b.1.total_cmp(&a.1));
    others.truncate(NAMED);
    let run_delay_share = match (start.run_delay_ns, end.run_delay_ns) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9 / wall_s),
        _ => None,
    };
    let steal_cores = match (start.steal_ticks, end.steal_ticks) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * per_tick_s / wall_s),
        _ => None,
    };
    HostWork {
        run_delay_share,
        server_cpu_cores,
        steal_cores,
        others,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores() -> f64 {
        std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
    }

    /// A burner thread beside a busy-waiting one on this process: both readings work, and a
    /// listener on 127.0.0.1 is found as this process.
    #[test]
    fn readings_of_this_process_and_its_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listeners(port), vec![std::process::id() as i32]);
        let start = read();
        assert!(start.run_delay_ns.is_some());
        assert!(start.cpu_ticks.contains_key(&(std::process::id() as i32)));
        let until = Instant::now() + std::time::Duration::from_millis(300);
        while Instant::now() < until {
            std::hint::black_box(0u64);
        }
        let work = between(&start, &read(), &listeners(port));
        assert!(work.run_delay_share.is_some_and(|s| s >= 0.0));
        // At most every core stolen over the 300 ms (none on bare metal).
        assert!(work
            .steal_cores
            .is_some_and(|s| (0.0..=2.0 * cores()).contains(&s)));
        // The spinning thread is this process's: counted as the "server", never as other work.
        assert!(work.server_cpu_cores.is_some_and(|c| c > 0.0), "{work:?}");
        assert!(work.others.iter().all(|(_, c)| *c >= 0.1));
    }
}
