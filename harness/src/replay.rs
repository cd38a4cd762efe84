//! Replaying a record: the data it needs, building its trainer, running the ranks, results.
use crate::paths;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the `train` binary of the tree at `tree` (release, shared target dir, so a second
/// build of the same tree does nothing). Cargo's own progress goes to stderr.
pub fn build_trainer(root: &Path, tree: &Path, target_dir: &Path, cuda: bool) -> Result<PathBuf> {
    if !paths::venv_dir(root).join("libtorch").exists() && std::env::var_os("LIBTORCH").is_none() {
        bail!(
            "libtorch is not set up ({} is missing): run scripts/setup.sh",
            paths::venv_dir(root).join("libtorch").display()
        );
    }
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--release",
        "--quiet",
        "-p",
        "trainer",
        "--bin",
        "train",
        "--manifest-path",
    ])
    .arg(tree.join("Cargo.toml"))
    .env("CARGO_TARGET_DIR", target_dir)
    .current_dir(tree);
    if cuda {
        cmd.args(["--features", "cuda"]);
    }
    let status = cmd.status().context("running cargo (is Rust installed?)")?;
    if !status.success() {
        bail!(
            "building the trainer in {} failed (cargo's errors are above)",
            tree.display()
        );
    }
    Ok(target_dir.join("release").join("train"))
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
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let id = format!(
            "{}-{}-{label}",
            crate::series::date::compact_utc(secs as i64),
            std::process::id()
        );
        let dir = results.join(format!("{record:02}"));
        let tmp = dir.join(format!(".tmp-{id}"));
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(PendingResults {
            tmp,
            dest: dir.join(id),
        })
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
