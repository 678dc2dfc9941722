//! A cgroup with a CPU quota for tests that put the real `loadgen` binary under one: a
//! quota makes a starved client certain however busy the machine is.

use std::path::PathBuf;
use std::process::{Command, Output};

use loadgen::sysmon::cgroup::{Cgroup, CgroupVersion};

/// A cgroup of this test process's making with a CPU quota; removed on drop.
pub struct QuotaCgroup {
    dir: PathBuf,
}

impl QuotaCgroup {
    /// A new cgroup limited to `quota_us` per 100 ms period, or why there cannot be one.
    pub fn create(name: &str, quota_us: u32) -> Result<QuotaCgroup, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("not root: cannot create a cgroup".into());
        }
        let Some((version, mount, _)) = Cgroup::discover().cpu else {
            return Err("no cgroup CPU controller on this machine".into());
        };
        let dir = mount.join(format!("loadgen-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let cgroup = QuotaCgroup { dir };
        let write = |file: &str, text: String| {
            std::fs::write(cgroup.dir.join(file), text)
                .map_err(|e| format!("cannot write {file} in {}: {e}", cgroup.dir.display()))
        };
        match version {
            CgroupVersion::V1 => {
                write("cpu.cfs_period_us", "100000".into())?;
                write("cpu.cfs_quota_us", quota_us.to_string())?;
            }
            CgroupVersion::V2 => write("cpu.max", format!("{quota_us} 100000"))?,
        }
        Ok(cgroup)
    }

    /// The loadgen binary as a command that runs inside the cgroup (`sh` writes its own pid
    /// into `cgroup.procs`, then execs loadgen with the command's arguments).
    pub fn loadgen(&self) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(env!("CARGO_BIN_EXE_loadgen"));
        command
    }

    /// Runs the loadgen binary with `args` inside the cgroup.
    pub fn run_loadgen(&self, args: &[&str]) -> Output {
        self.loadgen().args(args).output().expect("sh runs")
    }
}

impl Drop for QuotaCgroup {
    fn drop(&mut self) {
        // Empty once loadgen has exited; a cgroup directory is removed with rmdir.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}
