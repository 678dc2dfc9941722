//! The sampler's view of /proc and the cgroup: a [`Reading`] is every counter and gauge at
//! one instant (the process's CPU time, RSS and open descriptors, every core's ticks, every
//! interface's bytes and packets, the cgroup's throttling), and [`Reading::since`] turns two
//! readings into what happened between them. The `procfs` crate does the parsing; this
//! module knows what the counters mean (which ticks are busy, that iowait can go backwards,
//! that an interface or a CPU can appear mid-run). It writes nothing: rows are `file`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use procfs::process::Process;
use procfs::{CurrentSI, ProcError};

use super::cgroup::{self, CgroupVersion, CpuStat};
use super::SysmonError;

/// Cumulative counters and gauges read at one instant; a field is `None` when its part of
/// /proc could not be read.
pub(super) struct Reading {
    pub(super) at: Instant,
    process: Option<ProcessReading>,
    open_fds: Option<u64>,
    cores: Option<Vec<CoreTicks>>,
    net: Option<BTreeMap<String, NetCounters>>,
    pub(super) cpu_stat: Option<CpuStat>,
}

#[derive(Clone, Copy)]
struct ProcessReading {
    user_ns: u64,
    sys_ns: u64,
    /// Every thread's CPU, the client's and an embedded server's.
    all_threads_ns: u64,
    rss_bytes: u64,
}

#[derive(Clone, Copy)]
struct CoreTicks {
    busy: u64,
    total: u64,
}

/// One interface's counters: cumulative in a [`Reading`], per interval in a [`Change`].
#[derive(Clone, Copy)]
pub(super) struct NetCounters {
    pub(super) rx_bytes: u64,
    pub(super) tx_bytes: u64,
    pub(super) rx_packets: u64,
    pub(super) tx_packets: u64,
}

/// The process's CPU time in one interval.
#[derive(Clone, Copy)]
pub(super) struct CpuTime {
    pub(super) user_ns: u64,
    pub(super) sys_ns: u64,
}

impl CpuTime {
    pub(super) fn total_ns(&self) -> u64 {
        self.user_ns + self.sys_ns
    }
}

/// What happened between two readings, and the gauges at the later one. A field is `None`
/// when either reading lacks it.
pub(super) struct Change<'a> {
    /// The interval's wall time, at least 1 ns.
    pub(super) wall_ns: i64,
    pub(super) cpu: Option<CpuTime>,
    pub(super) throttling: Option<CpuStat>,
    /// Each core's busy share, in /proc/stat's order.
    pub(super) core_utilisation: Option<Vec<f64>>,
    /// The whole process's CPU (every thread, an embedded server's included), ns.
    pub(super) process_all_threads_ns: Option<u64>,
    pub(super) rss_bytes: Option<u64>,
    pub(super) open_fds: Option<u64>,
    /// Each interface's bytes and packets, by name.
    pub(super) network: Option<Vec<(&'a str, NetCounters)>>,
}

/// The sampler's handles on /proc and the cgroup.
pub(super) struct Probe {
    me: Process,
    ns_per_tick: u64,
    /// The cgroup whose `cpu.stat` counts this process's throttling.
    stat_dir: Option<(CgroupVersion, PathBuf)>,
    /// Threads of this process that are not the client's, by the start of their name.
    not_client_threads: Option<&'static str>,
}

impl Probe {
    pub(super) fn new(
        stat_dir: Option<(CgroupVersion, PathBuf)>,
        not_client_threads: Option<&'static str>,
    ) -> Result<Self, SysmonError> {
        let me = Process::myself().map_err(|source| SysmonError::Proc {
            what: "/proc/self",
            source,
        })?;
        // USER_HZ is 100 on every Linux we know of; guard against 0 all the same.
        let ns_per_tick = 1_000_000_000 / procfs::ticks_per_second().max(1);
        Ok(Probe {
            me,
            ns_per_tick,
            stat_dir,
            not_client_threads,
        })
    }

    /// The first reading, where any failure is reported: a sampler that cannot read /proc
    /// at all should say so instead of writing a file of nulls.
    pub(super) fn baseline(&self) -> Result<Reading, SysmonError> {
        let proc = |what| move |source| SysmonError::Proc { what, source };
        Ok(Reading {
            at: Instant::now(),
            process: Some(self.process().map_err(proc("/proc/self/stat"))?),
            open_fds: Some(self.open_fds().map_err(proc("/proc/self/fd"))?),
            cores: Some(cores().map_err(proc("/proc/stat"))?),
            net: Some(net().map_err(proc("/proc/net/dev"))?),
            cpu_stat: self.cpu_stat(),
        })
    }

    /// A reading in which whatever cannot be read is left out.
    pub(super) fn read(&self) -> Reading {
        Reading {
            at: Instant::now(),
            process: self.process().ok(),
            open_fds: self.open_fds().ok(),
            cores: cores().ok(),
            net: net().ok(),
            cpu_stat: self.cpu_stat(),
        }
    }

    fn cpu_stat(&self) -> Option<CpuStat> {
        let (version, dir) = self.stat_dir.as_ref()?;
        cgroup::cpu_stat(*version, dir)
    }

    fn process(&self) -> Result<ProcessReading, ProcError> {
        // /proc/self/stat (not thread-self) sums every thread of the process, those that
        // are not the client's included: their own stat is taken off.
        let stat = self.me.stat()?;
        let (other_user, other_sys) = self.not_client_ticks();
        Ok(ProcessReading {
            all_threads_ns: (stat.utime + stat.stime) * self.ns_per_tick,
            user_ns: stat.utime.saturating_sub(other_user) * self.ns_per_tick,
            sys_ns: stat.stime.saturating_sub(other_sys) * self.ns_per_tick,
            rss_bytes: stat.rss.saturating_mul(procfs::page_size()),
        })
    }

    /// User and system ticks of the threads that are not the client's (0 without any). A
    /// thread that ends between two readings takes its ticks with it: the client's CPU of
    /// that interval is then overstated, never understated.
    fn not_client_ticks(&self) -> (u64, u64) {
        let Some(prefix) = self.not_client_threads else {
            return (0, 0);
        };
        let Ok(tasks) = self.me.tasks() else {
            return (0, 0);
        };
        tasks
            .flatten()
            .filter_map(|task| task.stat().ok())
            .filter(|stat| stat.comm.starts_with(prefix))
            .fold((0, 0), |(u, s), stat| (u + stat.utime, s + stat.stime))
    }

    fn open_fds(&self) -> Result<u64, ProcError> {
        self.me.fd_count().map(|n| n as u64)
    }
}

impl Reading {
    /// What happened from `before` to this reading.
    pub(super) fn since(&self, before: &Reading) -> Change<'_> {
        let cpu = before.process.zip(self.process).map(|(b, n)| CpuTime {
            user_ns: n.user_ns.saturating_sub(b.user_ns),
            sys_ns: n.sys_ns.saturating_sub(b.sys_ns),
        });
        Change {
            wall_ns: crate::clock::nanos(self.at - before.at).max(1),
            cpu,
            throttling: self.cpu_stat.zip(before.cpu_stat).map(|(n, b)| n.since(&b)),
            core_utilisation: before
                .cores
                .as_deref()
                .zip(self.cores.as_deref())
                .map(|(b, n)| core_utilisation(b, n)),
            process_all_threads_ns: before
                .process
                .zip(self.process)
                .map(|(b, n)| n.all_threads_ns.saturating_sub(b.all_threads_ns)),
            rss_bytes: self.process.map(|p| p.rss_bytes),
            open_fds: self.open_fds,
            network: before
                .net
                .as_ref()
                .zip(self.net.as_ref())
                .map(|(b, n)| network(b, n)),
        }
    }
}

/// Each core's busy share between two readings.
fn core_utilisation(before: &[CoreTicks], now: &[CoreTicks]) -> Vec<f64> {
    now.iter()
        .enumerate()
        .map(|(i, core)| {
            // A CPU that came online mid-run counts from zero, i.e. since boot.
            let prior = before
                .get(i)
                .copied()
                .unwrap_or(CoreTicks { busy: 0, total: 0 });
            // iowait can go backwards (see proc(5)), hence saturating.
            let total = core.total.saturating_sub(prior.total);
            let busy = core.busy.saturating_sub(prior.busy).min(total);
            if total == 0 {
                0.0
            } else {
                busy as f64 / total as f64
            }
        })
        .collect()
}

/// Each interface's bytes and packets between two readings; an interface new in `now`
/// counts 0.
fn network<'a>(
    before: &BTreeMap<String, NetCounters>,
    now: &'a BTreeMap<String, NetCounters>,
) -> Vec<(&'a str, NetCounters)> {
    now.iter()
        .map(|(name, counters)| {
            let prior = before.get(name).copied().unwrap_or(*counters);
            let change = NetCounters {
                rx_bytes: counters.rx_bytes.saturating_sub(prior.rx_bytes),
                tx_bytes: counters.tx_bytes.saturating_sub(prior.tx_bytes),
                rx_packets: counters.rx_packets.saturating_sub(prior.rx_packets),
                tx_packets: counters.tx_packets.saturating_sub(prior.tx_packets),
            };
            (name.as_str(), change)
        })
        .collect()
}

fn cores() -> Result<Vec<CoreTicks>, ProcError> {
    Ok(procfs::KernelStats::current()?
        .cpu_time
        .iter()
        .map(|c| {
            // iowait is idle time as far as the CPU is concerned; guest time is already
            // included in user and nice.
            let idle = c.idle + c.iowait.unwrap_or(0);
            let busy = c.user
                + c.nice
                + c.system
                + c.irq.unwrap_or(0)
                + c.softirq.unwrap_or(0)
                + c.steal.unwrap_or(0);
            CoreTicks {
                busy,
                total: busy + idle,
            }
        })
        .collect())
}

fn net() -> Result<BTreeMap<String, NetCounters>, ProcError> {
    Ok(procfs::net::dev_status()?
        .into_iter()
        .map(|(name, d)| {
            let counters = NetCounters {
                rx_bytes: d.recv_bytes,
                tx_bytes: d.sent_bytes,
                rx_packets: d.recv_packets,
                tx_packets: d.sent_packets,
            };
            (name, counters)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// CPU of threads named as not the client's (an embedded server's) is left out of the
    /// client's: two probes read at the same moments differ by that thread's CPU.
    #[test]
    fn threads_that_are_not_the_clients_are_left_out_of_its_cpu() {
        let all = Probe::new(None, None).unwrap();
        let client = Probe::new(None, Some("not-client-burn")).unwrap();
        let (all_before, client_before) = (all.process().unwrap(), client.process().unwrap());
        std::thread::Builder::new()
            .name("not-client-burn".into())
            .spawn(|| {
                let started = std::time::Instant::now();
                let mut x = 0u64;
                while started.elapsed() < Duration::from_millis(400) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                // Still alive while read: a thread's ticks leave the sum when it ends.
                std::thread::sleep(Duration::from_millis(300));
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(450));
        let (all_after, client_after) = (all.process().unwrap(), client.process().unwrap());
        let ns = |r: ProcessReading| r.user_ns + r.sys_ns;
        let all_ns = ns(all_after) - ns(all_before);
        let client_ns = ns(client_after) - ns(client_before);
        assert!(
            all_ns >= client_ns + 10_000_000,
            "all threads {all_ns} ns, client's {client_ns} ns"
        );
    }
}
