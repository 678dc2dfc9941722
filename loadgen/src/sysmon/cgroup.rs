//! The CPU the process is allowed: its cgroup's CPU quota (v2 `cpu.max`, v1
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us`), its cpuset and affinity, and the cgroup's
//! throttling counters (`cpu.stat`).
//!
//! A process in a cgroup limited to 0.25 cores (Kubernetes `limits.cpu: 250m`, `docker
//! --cpus 0.25`) may have two cores in its cpuset and still be starved: the kernel lets it
//! run 25 ms of every 100 ms period and stops (throttles) it for the rest. Utilisation
//! measured against the two cores then reads 12 %, while the client is the bottleneck. So the
//! sampler measures utilisation against [`CpuLimit::limit_cores`] = min(cores it may run on,
//! quota) and records the throttling counters of the cgroup that holds the binding quota.
//!
//! [`Cgroup::discover`] finds the process's cgroup directories from `/proc/self/cgroup` and
//! `/proc/self/mountinfo` (through `procfs`); everything else reads files under those
//! directories only, so both cgroup versions are tested on directories the tests write.
//! The quota is the smallest one on the path from the process's cgroup up to the mount's
//! root (a limit set on a Kubernetes pod applies to its containers). This module reads; it
//! does not judge (that is `verdict`).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Which cgroup interface a limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CgroupVersion {
    #[serde(rename = "cgroup-v1")]
    V1,
    #[serde(rename = "cgroup-v2")]
    V2,
}

/// The process's cgroup directories for the CPU and cpuset controllers.
#[derive(Debug, Clone, Default)]
pub struct Cgroup {
    /// CPU controller: its version, the hierarchy's mount point and the process's directory.
    pub cpu: Option<(CgroupVersion, PathBuf, PathBuf)>,
    /// cpuset controller: its version and the process's directory.
    pub cpuset: Option<(CgroupVersion, PathBuf)>,
}

/// The CPU the process may use, read once at the start of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuLimit {
    /// The tightest CFS quota on the cgroup path, in cores (quota / period); `None`: none.
    pub quota_cores: Option<f64>,
    pub quota_source: Option<CgroupVersion>,
    /// Cores the process may run on: its affinity, within its cpuset.
    pub cpuset_cores: usize,
    /// min(cpuset_cores, quota_cores): the denominator of `cpu_utilisation`.
    pub limit_cores: f64,
    /// The cgroup whose `cpu.stat` counts the throttling (the one holding the binding quota,
    /// or the process's own when there is none); `None` without a CPU controller.
    pub stat_dir: Option<(CgroupVersion, PathBuf)>,
}

/// Cumulative throttling counters from `cpu.stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl CpuStat {
    /// What happened between `earlier` and `self` (counters never go back; saturating all
    /// the same, should a cgroup be recreated under us).
    pub fn since(&self, earlier: &CpuStat) -> CpuStat {
        CpuStat {
            nr_periods: self.nr_periods.saturating_sub(earlier.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(earlier.nr_throttled),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
        }
    }
}

impl Cgroup {
    /// The running process's cgroups; empty (no controllers) where /proc cannot tell.
    pub fn discover() -> Cgroup {
        let Ok(me) = procfs::process::Process::myself() else {
            return Cgroup::default();
        };
        let (Ok(groups), Ok(mounts)) = (me.cgroups(), me.mountinfo()) else {
            return Cgroup::default();
        };
        // The directory of `path` (as /proc/self/cgroup names it) under a hierarchy's mount;
        // the mount's root is stripped, as in a container that sees only its own subtree.
        let dir_of = |mount: &procfs::process::MountInfo, path: &str| -> (PathBuf, PathBuf) {
            let relative = path.strip_prefix(mount.root.as_str()).unwrap_or(path);
            let dir = mount.mount_point.join(relative.trim_start_matches('/'));
            (mount.mount_point.clone(), dir)
        };
        let v1_mount = |controller: &str| {
            mounts
                .0
                .iter()
                .find(|m| m.fs_type == "cgroup" && m.super_options.contains_key(controller))
        };
        let v1_path = |controller: &str| {
            groups
                .0
                .iter()
                .find(|g| g.controllers.iter().any(|c| c == controller))
                .map(|g| g.pathname.clone())
        };
        let v2 = groups
            .0
            .iter()
            .find(|g| g.hierarchy == 0)
            .zip(mounts.0.iter().find(|m| m.fs_type == "cgroup2"))
            .map(|(g, m)| dir_of(m, &g.pathname));

        let mut cgroup = Cgroup::default();
        if let (Some(mount), Some(path)) = (v1_mount("cpu"), v1_path("cpu")) {
            let (mount, dir) = dir_of(mount, &path);
            cgroup.cpu = Some((CgroupVersion::V1, mount, dir));
        } else if let Some((mount, dir)) = &v2 {
            // A cgroup2 mount without the cpu controller (a hybrid system) has no cpu.max.
            let controllers = read(&mount.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpu") {
                cgroup.cpu = Some((CgroupVersion::V2, mount.clone(), dir.clone()));
            }
        }
        if let (Some(mount), Some(path)) = (v1_mount("cpuset"), v1_path("cpuset")) {
            cgroup.cpuset = Some((CgroupVersion::V1, dir_of(mount, &path).1));
        } else if let Some((_, dir)) = v2 {
            cgroup.cpuset = Some((CgroupVersion::V2, dir));
        }
        cgroup
    }

    /// Reads the quota and cpuset; `affinity_cores` is what `sched_getaffinity` allows.
    pub fn limit(&self, affinity_cores: usize) -> CpuLimit {
        let cpuset_cores = self
            .cpuset_cores()
            .map_or(affinity_cores, |n| n.min(affinity_cores))
            .max(1);
        let mut limit = CpuLimit {
            quota_cores: None,
            quota_source: None,
            cpuset_cores,
            limit_cores: cpuset_cores as f64,
            stat_dir: None,
        };
        let Some((version, mount, dir)) = &self.cpu else {
            return limit;
        };
        limit.stat_dir = Some((*version, dir.clone()));
        // From the process's cgroup up to the hierarchy's root, the tightest quota binds.
        for level in dir.ancestors().take_while(|d| d.starts_with(mount)) {
            let quota = match version {
                CgroupVersion::V2 => quota_v2(level),
                CgroupVersion::V1 => quota_v1(level),
            };
            if let Some(cores) = quota.filter(|q| limit.quota_cores.is_none_or(|b| *q < b)) {
                limit.quota_cores = Some(cores);
                limit.quota_source = Some(*version);
                limit.stat_dir = Some((*version, level.to_path_buf()));
            }
        }
        if let Some(quota) = limit.quota_cores {
            limit.limit_cores = quota.min(cpuset_cores as f64);
        }
        limit
    }

    /// Cores in the cgroup's cpuset, when it has one.
    fn cpuset_cores(&self) -> Option<usize> {
        let (version, dir) = self.cpuset.as_ref()?;
        let text = match version {
            CgroupVersion::V2 => read(&dir.join("cpuset.cpus.effective")),
            CgroupVersion::V1 => {
                read(&dir.join("cpuset.effective_cpus")).or_else(|| read(&dir.join("cpuset.cpus")))
            }
        }?;
        cpu_list_len(&text)
    }
}

/// The throttling counters of a cgroup directory (`CpuLimit::stat_dir`).
pub fn cpu_stat(version: CgroupVersion, dir: &Path) -> Option<CpuStat> {
    let text = read(&dir.join("cpu.stat"))?;
    let value = |key: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(key)?
                .strip_prefix(' ')?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    let throttled_ns = match version {
        CgroupVersion::V2 => value("throttled_usec")?.saturating_mul(1_000),
        CgroupVersion::V1 => value("throttled_time")?,
    };
    Some(CpuStat {
        nr_periods: value("nr_periods")?,
        nr_throttled: value("nr_throttled")?,
        throttled_ns,
    })
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// v2 `cpu.max`: `QUOTA PERIOD` in µs, or `max PERIOD` for none.
fn quota_v2(dir: &Path) -> Option<f64> {
    let text = read(&dir.join("cpu.max"))?;
    let mut fields = text.split_whitespace();
    let quota = fields.next()?.parse::<f64>().ok()?; // "max" does not parse: no quota
    let period = fields.next()?.parse::<f64>().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// v1 `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`.
fn quota_v1(dir: &Path) -> Option<f64> {
    let quota = read(&dir.join("cpu.cfs_quota_us"))?
        .trim()
        .parse::<f64>()
        .ok()?;
    let period = read(&dir.join("cpu.cfs_period_us"))?
        .trim()
        .parse::<f64>()
        .ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// Number of CPUs in a kernel CPU list such as `0-3,6,8-9`; `None` when malformed or empty.
fn cpu_list_len(text: &str) -> Option<usize> {
    let mut n = 0;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    (n > 0).then_some(n)
}

/// Cores the scheduler lets this process run on (affinity, which the kernel keeps within the
/// cpuset); falls back to `available_parallelism`.
pub fn affinity_cores() -> usize {
    rustix::thread::sched_getaffinity(None)
        .map(|set| set.count() as usize)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_len("0-1\n"), Some(2));
        assert_eq!(cpu_list_len("0-3,6,8-9"), Some(7));
        assert_eq!(cpu_list_len("5"), Some(1));
        assert_eq!(cpu_list_len("\n"), None);
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len("a-b"), None);
    }

    /// cgroup v2: `cpu.max` at the pod level binds tighter than the container's own, and the
    /// counters come from the pod's `cpu.stat`; the cpuset is `cpuset.cpus.effective`.
    #[test]
    fn cgroup_v2_quota_is_the_tightest_on_the_path_and_its_stat_is_read() {
        let root = tempfile::tempdir().unwrap();
        let mount = root.path().to_path_buf();
        let pod = mount.join("kubepods/pod1");
        let container = pod.join("c1");
        write(&mount, "cpu.max", "max 100000\n");
        write(&pod, "cpu.max", "25000 100000\n");
        write(&container, "cpu.max", "50000 100000\n");
        write(&container, "cpuset.cpus.effective", "0-3\n");
        write(
            &pod,
            "cpu.stat",
            "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 41\nnr_throttled 40\n\
             throttled_usec 2450000\n",
        );
        let cgroup = Cgroup {
            cpu: Some((CgroupVersion::V2, mount.clone(), container.clone())),
            cpuset: Some((CgroupVersion::V2, container.clone())),
        };
        let limit = cgroup.limit(8);
        assert_eq!(limit.quota_cores, Some(0.25));
        assert_eq!(limit.quota_source, Some(CgroupVersion::V2));
        assert_eq!(limit.cpuset_cores, 4);
        assert_eq!(limit.limit_cores, 0.25);
        assert_eq!(limit.stat_dir, Some((CgroupVersion::V2, pod.clone())));
        let stat = cpu_stat(CgroupVersion::V2, &pod).unwrap();
        assert_eq!(
            stat,
            CpuStat {
                nr_periods: 41,
                nr_throttled: 40,
                throttled_ns: 2_450_000_000
            }
        );
        // Affinity narrower than the cpuset wins.
        assert_eq!(cgroup.limit(2).cpuset_cores, 2);
    }

    #[test]
    fn cgroup_v2_without_a_quota_is_the_cpuset() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("user.slice");
        write(&dir, "cpu.max", "max 100000\n");
        let cgroup = Cgroup {
            cpu: Some((CgroupVersion::V2, root.path().to_path_buf(), dir.clone())),
            cpuset: None,
        };
        let limit = cgroup.limit(2);
        assert_eq!((limit.quota_cores, limit.quota_source), (None, None));
        assert_eq!((limit.cpuset_cores, limit.limit_cores), (2, 2.0));
        assert_eq!(limit.stat_dir, Some((CgroupVersion::V2, dir)));
    }

    /// cgroup v1: `cpu.cfs_quota_us` -1 is no quota; 150000/100000 is 1.5 cores, capped by a
    /// one-core cpuset; `throttled_time` is already in ns.
    #[test]
    fn cgroup_v1_quota_cpuset_and_stat() {
        let root = tempfile::tempdir().unwrap();
        let cpu_mount = root.path().join("cpu");
        let dir = cpu_mount.join("loadgen");
        write(&cpu_mount, "cpu.cfs_quota_us", "-1\n");
        write(&cpu_mount, "cpu.cfs_period_us", "100000\n");
        write(&dir, "cpu.cfs_quota_us", "150000\n");
        write(&dir, "cpu.cfs_period_us", "100000\n");
        write(
            &dir,
            "cpu.stat",
            "nr_periods 10\nnr_throttled 3\nthrottled_time 120000000\nnr_bursts 0\n",
        );
        let cpuset = root.path().join("cpuset");
        write(&cpuset, "cpuset.effective_cpus", "1\n");
        let cgroup = Cgroup {
            cpu: Some((CgroupVersion::V1, cpu_mount.clone(), dir.clone())),
            cpuset: Some((CgroupVersion::V1, cpuset)),
        };
        let limit = cgroup.limit(2);
        assert_eq!(limit.quota_cores, Some(1.5));
        assert_eq!(limit.quota_source, Some(CgroupVersion::V1));
        assert_eq!((limit.cpuset_cores, limit.limit_cores), (1, 1.0));
        let stat = cpu_stat(CgroupVersion::V1, &dir).unwrap();
        assert_eq!(
            stat.since(&CpuStat {
                nr_periods: 4,
                nr_throttled: 1,
                throttled_ns: 20_000_000
            }),
            CpuStat {
                nr_periods: 6,
                nr_throttled: 2,
                throttled_ns: 100_000_000
            }
        );
        // No controller at all: the affinity, no counters.
        let none = Cgroup::default().limit(2);
        assert_eq!(
            (none.quota_cores, none.limit_cores, none.stat_dir),
            (None, 2.0, None)
        );
        assert_eq!(cpu_stat(CgroupVersion::V1, root.path()), None);
    }

    /// On the machine running the tests: whatever it has, the limit is consistent.
    #[test]
    fn the_running_process_has_a_consistent_limit() {
        let limit = Cgroup::discover().limit(affinity_cores());
        assert!(limit.cpuset_cores >= 1);
        assert!(limit.limit_cores > 0.0 && limit.limit_cores <= limit.cpuset_cores as f64);
        // A cgroup with a quota counts its periods (a v2 root cgroup without one may not).
        if let (Some(_), Some((version, dir))) = (limit.quota_cores, &limit.stat_dir) {
            assert!(cpu_stat(*version, dir).is_some(), "{dir:?}");
        }
    }
}
