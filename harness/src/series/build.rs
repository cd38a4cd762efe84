//! Building materialized trees with cargo.
//!
//! Every tree's crates have the same names and the same paths relative to their workspace, so
//! cargo gives them the same artifact hashes. Two trees (or a tree and the checkout) sharing a
//! target dir would overwrite each other's artifacts, and cargo could then call a changed tree
//! fresh. So trees build in a target dir of their own, one at a time under a lock, and the
//! tree-local packages are cleaned whenever the tree changes; the dependencies (libtorch's
//! bindings above all) still build once for every record.
use super::{build_dir, tree::MARKER};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages a tree holds; the rest are dependencies from the registry.
const TREE_PACKAGES: [&str; 2] = ["trainer", "corpus"];

/// Holds the tree build lock; the last tree built is recorded beside it.
pub struct TreeBuild {
    target: PathBuf,
    tree: PathBuf,
    _lock: File,
}

impl TreeBuild {
    /// Waits for other tree builds, then makes the target dir ready for the tree at `tree`.
    pub fn start(root: &Path, tree: &Path) -> Result<TreeBuild> {
        let target = build_dir(root);
        std::fs::create_dir_all(&target)
            .with_context(|| format!("creating {}", target.display()))?;
        let lock = File::create(target.join(".records-lock"))?;
        lock.lock().with_context(|| format!("locking {}", target.display()))?;
        let id = std::fs::read_to_string(tree.join(MARKER))
            .with_context(|| format!("{} is not a materialized tree", tree.display()))?;
        let last = target.join(".records-tree");
        if std::fs::read_to_string(&last).ok().as_deref() != Some(id.as_str()) {
            let mut clean = vec!["clean", "--release", "--quiet"];
            for p in TREE_PACKAGES {
                clean.extend(["-p", p]);
            }
            run_cargo(&target, tree, &clean)?;
            std::fs::write(&last, &id)?;
        }
        Ok(TreeBuild { target, tree: tree.to_path_buf(), _lock: lock })
    }

    /// `cargo <args>` in the tree, into the trees' target dir.
    pub fn cargo(&self, args: &[&str]) -> Result<()> {
        run_cargo(&self.target, &self.tree, args)
    }

    /// The release binary `name`, copied out of the shared target dir (the next tree's build
    /// replaces it there) to a path named for the tree.
    pub fn keep_binary(&self, name: &str) -> Result<PathBuf> {
        let id = std::fs::read_to_string(self.tree.join(MARKER))?;
        let dir = self.target.join("bins").join(id.trim());
        std::fs::create_dir_all(&dir)?;
        let (built, kept) = (self.target.join("release").join(name), dir.join(name));
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::copy(&built, &tmp).with_context(|| format!("copying {}", built.display()))?;
        std::fs::rename(&tmp, &kept)?;
        Ok(kept)
    }
}

/// Runs cargo in `dir` with `target` as its target dir; the error names the command.
pub fn run_cargo(target: &Path, dir: &Path, args: &[&str]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // A process group of its own, so a signal to `records` stops rustc and the build scripts
    // with cargo (see `crate::signals`).
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .process_group(0)
        .status()
        .with_context(|| format!("running cargo in {} (is Rust installed?)", dir.display()))?;
    if !status.success() {
        bail!(
            "`cargo {}` failed in {} ({status}); cargo's errors are above",
            args.join(" "),
            dir.display()
        );
    }
    Ok(())
}
