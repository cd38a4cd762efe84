//! Replaying a record: the data it needs, building its trainer, running the ranks, results.
use super::tree_build::{kept_binary, libtorch, run_cargo, TreeBuild};
use crate::paths;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Builds the `train` binary of the materialized tree at `tree` (or, with `head`, of the
/// checkout itself, into its own target dir). A tree whose binary is kept already is not built
/// again: its id names its exact files.
pub fn build_trainer(root: &Path, tree: &Path, head: bool, cuda: bool) -> Result<PathBuf> {
    // An exported LIBTORCH is the user's own: cargo judges it.
    let libtorch = libtorch(root, std::env::var_os("LIBTORCH"));
    if !libtorch.exists() && std::env::var_os("LIBTORCH").is_none() {
        bail!("libtorch is not set up ({} is missing): run scripts/setup.sh", libtorch.display());
    }
    let mut args = vec!["build", "--release", "--quiet", "-p", "trainer", "--bin", "train"];
    if cuda {
        args.extend(["--features", "cuda"]);
    }
    if head {
        let target = paths::cargo_target_dir(root);
        let _mark = crate::run::timing_lock::building()?;
        run_cargo(root, &target, root, &args)?;
        return Ok(target.join("release").join("train"));
    }
    let kept = kept_binary(root, tree, "train", cuda)?;
    if kept.is_file() {
        return Ok(kept);
    }
    let build = TreeBuild::start(root, tree)?;
    if kept.is_file() {
        return Ok(kept); // another replay built it while we waited for the lock
    }
    build.cargo(&args)?;
    build.keep_binary("train", cuda)
}

/// A CUDA build needs the CUDA wheels of `scripts/setup.sh --cuda` (headers and libraries that
/// the trainer's build script compiles the NCCL shim against); without them that build script
/// panics deep in cargo's output. The setup leaves `.records-setup-<torch>.cuda` in the venv.
pub fn check_cuda_setup(root: &Path) -> Result<()> {
    let venv = paths::venv_dir(root);
    let markers: Vec<String> = std::fs::read_dir(&venv)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(".records-setup-"))
        .collect();
    // A libtorch that scripts/setup.sh did not make is the user's own: let cargo judge it.
    if markers.is_empty() || markers.iter().any(|n| n.ends_with(".cuda")) {
        return Ok(());
    }
    bail!(
        "--gpus needs the CUDA wheels, but {} was set up for CPU only; run `scripts/setup.sh --cuda` (about 2.7 GB), then replay again",
        venv.display()
    )
}

/// A results folder written in a temp folder and renamed into place when complete, so
/// `results/<NN>/` only ever holds finished runs. A failed run's folder is removed (also on
/// SIGINT/SIGTERM); a finished run whose final move fails is kept where it is.
pub struct PendingResults {
    tmp: PathBuf,
    dest: PathBuf,
    /// Removes the folder if a signal ends the replay; `None` once the run is finished.
    on_signal: Option<crate::run::signals::TempDirGuard>,
}

/// A finished run: `verdict.json` is the last file written before the move.
const FINISHED: &str = "verdict.json";

impl PendingResults {
    /// `<results>/<NN>/<run id>`, the id being the UTC time of the start (sortable), the
    /// process id and `label`. Temp folders that earlier replays left are swept first.
    pub fn new(
        results: &Path,
        record: crate::catalog::RecordId,
        label: &str,
    ) -> Result<PendingResults> {
        sweep(results);
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let id = format!(
            "{}-{}-{label}",
            crate::series::date::compact_utc(secs as i64),
            std::process::id()
        );
        PendingResults::in_dir(&results.join(record.slug()), &id)
    }

    /// `<dir>/<id>`, written as `<dir>/<TMP_PREFIX><id>` until committed.
    pub fn in_dir(dir: &Path, id: &str) -> Result<PendingResults> {
        let tmp = dir.join(format!("{TMP_PREFIX}{id}"));
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let on_signal = Some(crate::run::signals::remove_on_signal(&tmp));
        Ok(PendingResults { tmp, dest: dir.join(id), on_signal })
    }

    pub fn dir(&self) -> &Path {
        &self.tmp
    }

    /// The run id: the name of its folder under `results/<NN>/`.
    pub fn id(&self) -> &str {
        self.dest.file_name().and_then(|n| n.to_str()).unwrap_or_default()
    }

    /// Moves the finished run into place. If that fails, the run stays in its temp folder (the
    /// next replay finishes the move, see [`sweep`]) and the error says where it is.
    pub fn commit(mut self) -> Result<PathBuf> {
        self.on_signal = None;
        std::fs::rename(&self.tmp, &self.dest).with_context(|| {
            format!(
                "moving results into {}; the finished run is kept in {}",
                self.dest.display(),
                self.tmp.display()
            )
        })?;
        Ok(self.dest.clone())
    }
}

/// A replay that fails before it finishes leaves nothing half-written under results/.
impl Drop for PendingResults {
    fn drop(&mut self) {
        if self.on_signal.is_some() && self.tmp.exists() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

const TMP_PREFIX: &str = ".tmp-";

/// Temp folders of earlier replays whose process is gone (SIGKILL, a crash, a power cut): a
/// finished run is moved into place, an unfinished one is removed; each with a message.
pub fn sweep(results: &Path) {
    let Ok(records) = std::fs::read_dir(results) else {
        return;
    };
    for tmp in records.flatten().filter_map(|r| std::fs::read_dir(r.path()).ok()).flatten() {
        let Ok(tmp) = tmp.map(|e| e.path()) else {
            continue;
        };
        let Some(id) = tmp.file_name().and_then(|n| n.to_str()?.strip_prefix(TMP_PREFIX)) else {
            continue;
        };
        // `<date>-<time>-<pid>-<label>`
        let Some(pid) = id.split('-').nth(2).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if crate::run::signals::process_exists(pid) {
            continue;
        }
        if tmp.join(FINISHED).exists() {
            let dest = tmp.with_file_name(id);
            match std::fs::rename(&tmp, &dest) {
                Ok(()) => tracing::info!(
                    "records: moved a finished run that process {pid} could not move into place to {}",
                    dest.display()
                ),
                Err(e) => tracing::info!(
                    "records: note: {} holds a finished run that cannot be moved to {} ({e}); move it by hand",
                    tmp.display(),
                    dest.display()
                ),
            }
        } else if std::fs::remove_dir_all(&tmp).is_ok() {
            tracing::info!(
                "records: removed {}, left by an interrupted replay (process {pid} is gone)",
                tmp.display()
            );
        }
    }
}
