//! A record's trainer as a command: its tree materialized and built (or the checkout's own
//! trainer, `--head`), and the one command line `replay`, `bench` and `profile` give it, each
//! adding only what is its own (a step budget, a stop, a profile, a seed).
use super::replay::build_trainer;
use crate::catalog::{older_shape, Manifest, RecordId};
use crate::logging::step;
use crate::series;
use anyhow::Result;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A built trainer.
pub struct Trainer {
    /// The folder it was built from: the record's materialized tree, or the checkout.
    pub dir: PathBuf,
    /// The git tree id of its files; it goes into every log, so a result names the exact code
    /// that produced it.
    pub tree_id: String,
    pub bin: PathBuf,
    /// Where the manifests it runs are written in its tree's shape (`catalog::older_shape`): a
    /// record's own tree predates the recipe's sections. None for the checkout's trainer, which
    /// reads a manifest as it is.
    pub older_shape: Option<PathBuf>,
}

impl Trainer {
    /// Record `n`'s own trainer, or with `head` the checkout's (the newest trainer).
    pub fn build(root: &Path, n: impl Into<RecordId>, head: bool, cuda: bool) -> Result<Trainer> {
        let n = n.into();
        let (dir, tree_id) = if head {
            let id = series::tree::worktree_tree(&series::apply::scratch_repo()?, root)?;
            (root.to_path_buf(), id.to_string())
        } else {
            let dir = step("materialize", n, || series::materialize(root, n))?;
            let id = std::fs::read_to_string(dir.join(series::tree::MARKER))?.trim().to_string();
            (dir, id)
        };
        tracing::info!("records: building the trainer of {n} in {} ...", dir.display());
        let bin = step("build", n, || build_trainer(root, &dir, head, cuda))?;
        let older_shape =
            (!head).then(|| crate::paths::derived_dir(root).join("tree-manifests").join(&tree_id));
        Ok(Trainer { dir, tree_id, bin, older_shape })
    }

    /// The manifest `m` as this trainer reads it.
    pub fn manifest(&self, m: &Path) -> Result<PathBuf> {
        match &self.older_shape {
            Some(dir) => older_shape::write(m, dir),
            None => Ok(m.to_path_buf()),
        }
    }

    /// The command line every run of this trainer starts from: `m` at `scale` on `data`,
    /// results into `out`, on the CPU unless `cuda`, and a header naming the tree.
    pub fn cmd(
        &self,
        m: &Manifest,
        scale: &str,
        data: &Path,
        out: &Path,
        cuda: bool,
    ) -> Result<TrainerCmd> {
        let mut cmd = TrainerCmd { args: Vec::new() };
        cmd.pair("--manifest", self.manifest(&m.path)?).pair("--scale", scale).pair("--data", data);
        cmd.pair("--out", out);
        if !cuda {
            cmd.args.push("--cpu".into());
        }
        let cmd = cmd.header(format!("tree={} ({})", self.tree_id, self.dir.display()));
        // The trainer names the record by its manifest's file stem read as a number, which an
        // id off the main track (a3) is not: the harness names it.
        Ok(match m.id() {
            id if id.is_main() => cmd,
            id => cmd.header(format!("{RECORD_ID}={}", id.slug())),
        })
    }
}

/// The log header (`# record_id: a3`) that names a record off the main track, whose manifest's
/// file stem the trainer's own `# record:` cannot read as a number; see
/// [`crate::verdict::runlog::RunLog::record`].
pub const RECORD_ID: &str = "record_id";

/// The trainer's arguments (`train --help` has them all).
pub struct TrainerCmd {
    args: Vec<OsString>,
}

impl TrainerCmd {
    fn pair(&mut self, flag: &str, value: impl Into<OsString>) -> &mut Self {
        self.args.extend([flag.into(), value.into()]);
        self
    }

    /// A `# key=value` line at the top of the log.
    pub fn header(mut self, text: impl Into<OsString>) -> Self {
        self.pair("--header", text);
        self
    }

    /// The step budget in place of the manifest's (its schedule squeezed onto it).
    pub fn steps(mut self, steps: u64) -> Self {
        self.pair("--steps", steps.to_string());
        self
    }

    /// End after step `step` of the budget, the schedule unchanged.
    pub fn stop_after(mut self, step: u64) -> Self {
        self.pair("--stop-after", step.to_string());
        self
    }

    /// Trace `steps` steps with the profiler into `dir`.
    pub fn profile(mut self, dir: &Path, steps: u64) -> Self {
        self.pair("--profile", dir).pair("--profile-steps", steps.to_string());
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.pair("--seed", seed.to_string());
        self
    }

    pub fn args(&self) -> &[OsString] {
        &self.args
    }
}
