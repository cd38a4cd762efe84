//! Replaying a record: the data it needs, building its trainer, running the ranks, results.
use crate::paths;
use crate::series::build::{run_cargo, TreeBuild};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Builds the `train` binary of the materialized tree at `tree` (or, with `head`, of the
/// checkout itself, into its own target dir). A second build of the same tree does nothing.
pub fn build_trainer(root: &Path, tree: &Path, head: bool, cuda: bool) -> Result<PathBuf> {
    let libtorch = paths::venv_dir(root).join("libtorch");
    if !libtorch.exists() && std::env::var_os("LIBTORCH").is_none() {
        bail!("libtorch is not set up ({} is missing): run scripts/setup.sh", libtorch.display());
    }
    let mut args = vec!["build", "--release", "--quiet", "-p", "trainer", "--bin", "train"];
    if cuda {
        args.extend(["--features", "cuda"]);
    }
    if head {
        let target = paths::cargo_target_dir(root);
        run_cargo(&target, root, &args)?;
        return Ok(target.join("release").join("train"));
    }
    let build = TreeBuild::start(root, tree)?;
    build.cargo(&args)?;
    build.keep_binary("train")
}

/// A results folder written in a temp folder and renamed into place when complete, so
/// `results/<NN>/` only ever holds finished runs.
pub struct PendingResults {
    tmp: PathBuf,
    dest: PathBuf,
}

impl PendingResults {
    /// `<results>/<NN>/<run id>`, the id being the UTC time of the start (sortable), the
    /// process id and `label`.
    pub fn new(results: &Path, record: u32, label: &str) -> Result<PendingResults> {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let id = format!(
            "{}-{}-{label}",
            crate::series::date::compact_utc(secs as i64),
            std::process::id()
        );
        let dir = results.join(format!("{record:02}"));
        let tmp = dir.join(format!(".tmp-{id}"));
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(PendingResults { tmp, dest: dir.join(id) })
    }

    pub fn dir(&self) -> &Path {
        &self.tmp
    }

    pub fn commit(self) -> Result<PathBuf> {
        std::fs::rename(&self.tmp, &self.dest)
            .with_context(|| format!("moving results into {}", self.dest.display()))?;
        Ok(self.dest.clone())
    }
}

/// A replay that fails leaves nothing half-written under results/.
impl Drop for PendingResults {
    fn drop(&mut self) {
        if self.tmp.exists() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
