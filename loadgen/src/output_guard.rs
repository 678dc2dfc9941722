//! Output paths never land on a run: before a command writes anything, every file or
//! directory it was told to write (`--junit`, `--dashboard-out`, a workflow's `--out`) is
//! compared with the run
//! directories it reads or writes (`--out`, `--calibration`). One that is such a directory or
//! lies inside one would overwrite a segment or run.json, so it is refused; so is one file
//! named for two outputs. Paths are compared as the system will resolve them: relative to the
//! working directory, with symbolic links and `..` followed as far as the path exists. A leaf:
//! it knows paths, not commands; `main.rs` says which flags are which.

use std::path::{Component, Path, PathBuf};

/// A path given on the command line, with the flag that gave it (`--junit`).
pub type Flagged<'a> = (&'a str, &'a Path);

/// Refuses an output that is one of `runs`, lies inside one, or names the same path as
/// another output. An output is not compared with a run directory given by its own flag (a
/// workflow's `--out` is both). The error is one sentence naming both paths and the fix.
pub fn check(outputs: &[Flagged], runs: &[Flagged]) -> Result<(), String> {
    let outputs: Vec<_> = outputs.iter().map(resolved).collect();
    let runs: Vec<_> = runs.iter().map(resolved).collect();
    for (i, (flag, path, real)) in outputs.iter().enumerate() {
        if let Some((other, _, _)) = outputs[..i].iter().find(|(_, _, r)| r == real) {
            return Err(format!(
                "{other} and {flag} both name {}; give each output its own path",
                path.display()
            ));
        }
        let inside = runs
            .iter()
            .find(|(run_flag, _, run)| run_flag != flag && real.starts_with(run));
        if let Some((run_flag, run_path, run_real)) = inside {
            let place = if real == run_real { "is" } else { "is inside" };
            return Err(format!(
                "{flag} {} {place} the run directory {} ({run_flag}), and writing it would \
                 overwrite that run's files; give {flag} a path outside {}",
                path.display(),
                run_path.display(),
                run_path.display()
            ));
        }
    }
    Ok(())
}

/// Refuses a file output that cannot be written where it is named (a folder that does not
/// exist or is not writable, a path that is a directory), before anything runs: found at
/// the end, it would be a run whose page is lost. Tried by creating and removing a sibling.
pub fn check_writable((flag, path): Flagged) -> Result<(), String> {
    let refuse = |why: String| {
        format!(
            "{flag} {} cannot be written ({why}); give a file in a folder that exists and \
             you may write to",
            path.display()
        )
    };
    if path.is_dir() {
        return Err(refuse("it is a directory".into()));
    }
    let mut trial = path.as_os_str().to_owned();
    trial.push(format!(".{}.trial", std::process::id()));
    let trial = PathBuf::from(trial);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&trial)
        .map_err(|e| refuse(e.to_string()))?;
    let _ = std::fs::remove_file(&trial);
    Ok(())
}

fn resolved<'a>(&(flag, path): &Flagged<'a>) -> (&'a str, &'a Path, PathBuf) {
    (flag, path, resolve(path))
}

/// `path` as the system will resolve it: absolute, every existing component's symbolic links
/// followed, `.` dropped and `..` taken as the parent of what came before. The part that does
/// not exist yet cannot hold links, so it is joined as written.
pub fn resolve(path: &Path) -> PathBuf {
    let mut resolved = std::env::current_dir().unwrap_or_default();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => resolved = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                resolved.push(name);
                // Canonical up to here, so `..` above is the real parent, also after a link.
                if let Ok(real) = resolved.canonicalize() {
                    resolved = real;
                }
            }
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_inside_or_on_a_run_is_refused_and_one_beside_it_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        let runs = [("--out", run.as_path())];
        let inside = run.join("requests/part-00000.parquet");
        let err = check(&[("--junit", &inside)], &runs).unwrap_err();
        assert!(err.contains("is inside the run directory"), "{err}");
        let err = check(&[("--junit", &run)], &runs).unwrap_err();
        assert!(err.contains(" is the run directory"), "{err}");
        let beside = tmp.path().join("run.xml");
        assert_eq!(check(&[("--junit", &beside)], &runs), Ok(()));
        // A workflow's --out is an output and a run directory: not compared with itself.
        assert_eq!(check(&[("--out", &run)], &runs), Ok(()));
    }

    #[test]
    fn links_and_dots_are_followed_before_comparing() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        std::fs::create_dir_all(run.join("requests")).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        let runs = [("--calibration", run.as_path())];
        for output in [
            link.join("run.json"),
            tmp.path().join("elsewhere/../run/requests/x"),
            link.join("../run/run.json"),
        ] {
            assert!(
                check(&[("--junit", &output)], &runs).is_err(),
                "{} was let through",
                output.display()
            );
        }
        // `link/..` is the link's target's parent, as the system resolves it.
        assert_eq!(
            resolve(&link.join("..")),
            tmp.path().canonicalize().unwrap()
        );
    }

    #[test]
    fn one_file_for_two_outputs_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("out.xml");
        let b = tmp.path().join("./x/../out.xml");
        let err = check(&[("--junit", &a), ("--html", &b)], &[]).unwrap_err();
        assert!(err.contains("--junit and --html both name"), "{err}");
    }
}
