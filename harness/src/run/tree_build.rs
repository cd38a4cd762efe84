//! Building materialized trees with cargo, sharing the checkout's dependency build.
//!
//! Every tree's crates have the same names and the same paths relative to their workspace, so
//! cargo would give them (and the checkout's own crates) the same artifact hashes: in one target
//! dir they would overwrite each other, and cargo could call a changed tree fresh. Cargo hashes
//! the path of `RUSTC_WORKSPACE_WRAPPER` into the artifact hashes of workspace members only (so
//! that clippy's artifacts stay apart from rustc's), so each tree builds through a wrapper at a
//! path named for its tree id (a two-line script that runs rustc): its own crates get hashes of
//! their own, and the registry dependencies keep the checkout's. Trees therefore build with the
//! checkout's target dir as cargo's build dir (where tch and torch-sys are compiled once, for the
//! checkout and every tree) and `<target>/records-trees` as the artifact dir, so a tree's
//! `train` never replaces the checkout's `target/release/train`. Tree builds take turns under a
//! lock, and each kept binary is copied to `records-trees/bins/<tree id>/`.
use crate::series::{build_dir, tree::MARKER};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Holds the tree build lock while one tree builds.
pub struct TreeBuild {
    /// `<target>/records-trees`: cargo's artifact dir for trees, the lock, wrappers and bins.
    artifacts: PathBuf,
    /// The checkout's target dir, shared as cargo's build dir.
    shared: PathBuf,
    /// The checkout, whose venv provides libtorch.
    root: PathBuf,
    tree: PathBuf,
    id: String,
    wrapper: PathBuf,
    _lock: File,
    /// A timed run beside this build is told its times are not comparable.
    _mark: super::timing_lock::BuildMark,
}

impl TreeBuild {
    /// Waits for other tree builds, then prepares the build of the tree at `tree`.
    pub fn start(root: &Path, tree: &Path) -> Result<TreeBuild> {
        let artifacts = build_dir(root);
        std::fs::create_dir_all(&artifacts)
            .with_context(|| format!("creating {}", artifacts.display()))?;
        let lock_file = artifacts.join(".records-lock");
        let lock = File::create(&lock_file)
            .with_context(|| format!("creating {}", lock_file.display()))?;
        lock.lock().with_context(|| format!("locking {}", artifacts.display()))?;
        let id = tree_id(tree)?;
        let wrapper = write_wrapper(&artifacts.join("wrappers").join(&id))?;
        let shared = crate::paths::cargo_target_dir(root);
        let (root, tree) = (root.to_path_buf(), tree.to_path_buf());
        let _mark = super::timing_lock::building()?;
        Ok(TreeBuild { artifacts, shared, root, tree, id, wrapper, _lock: lock, _mark })
    }

    /// `cargo <args>` in the tree, with the tree's own wrapper.
    pub fn cargo(&self, args: &[&str]) -> Result<()> {
        let mut cmd = cargo_command(&self.root, &self.artifacts, &self.tree, args);
        cmd.env("CARGO_BUILD_BUILD_DIR", &self.shared)
            .env("RUSTC_WORKSPACE_WRAPPER", &self.wrapper);
        run(cmd, &self.tree, args)
    }

    /// The release binary `name`, copied out of the trees' artifact dir (the next tree's build
    /// replaces it there) to [`kept_binary`].
    pub fn keep_binary(&self, name: &str, cuda: bool) -> Result<PathBuf> {
        let kept = kept_path(&self.artifacts, &self.id, name, cuda);
        let dir = kept.parent().expect("a kept binary sits in a folder");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let built = self.artifacts.join("release").join(name);
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let copied = std::fs::copy(&built, &tmp).and_then(|_| std::fs::rename(&tmp, &kept));
        if copied.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        copied.with_context(|| format!("copying {} to {}", built.display(), kept.display()))?;
        Ok(kept)
    }
}

/// Where the tree `tree`'s release binary `name` is kept once built (`-cuda` builds apart):
/// `<target>/records-trees/bins/<tree id>[-cuda]/<name>`. A tree id names its exact files, so
/// a binary kept there never needs rebuilding.
pub fn kept_binary(root: &Path, tree: &Path, name: &str, cuda: bool) -> Result<PathBuf> {
    Ok(kept_path(&build_dir(root), &tree_id(tree)?, name, cuda))
}

fn kept_path(artifacts: &Path, id: &str, name: &str, cuda: bool) -> PathBuf {
    let dir = if cuda { format!("{id}-cuda") } else { id.to_string() };
    artifacts.join("bins").join(dir).join(name)
}

fn tree_id(tree: &Path) -> Result<String> {
    let id = std::fs::read_to_string(tree.join(MARKER))
        .with_context(|| format!("{} is not a materialized tree", tree.display()))?;
    Ok(id.trim().to_string())
}

/// `<dir>/rustc`: runs the rustc cargo passes it. Only its path matters (see the module docs).
fn write_wrapper(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("rustc");
    const SCRIPT: &str = "#!/bin/sh\n# Runs rustc; its path gives one records tree its own artifact hashes.\nexec \"$@\"\n";
    if std::fs::read_to_string(&path).is_ok_and(|s| s == SCRIPT) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".rustc.tmp-{}", std::process::id()));
    std::fs::write(&tmp, SCRIPT).with_context(|| format!("writing {}", tmp.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", tmp.display()))?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Runs cargo in `dir` of the checkout `root` with `target` as its target dir; the error names
/// the command.
pub fn run_cargo(root: &Path, target: &Path, dir: &Path, args: &[&str]) -> Result<()> {
    run(cargo_command(root, target, dir, args), dir, args)
}

fn cargo_command(root: &Path, target: &Path, dir: &Path, args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // A process group of its own, so a signal to `records` stops rustc and the build scripts
    // with cargo (see `super::signals`).
    let mut cmd = Command::new(cargo);
    cmd.args(args).current_dir(dir).env("CARGO_TARGET_DIR", target).process_group(0);
    cmd.env("LIBTORCH", libtorch(root, std::env::var_os("LIBTORCH")));
    cmd
}

/// The libtorch a build links: an exported `LIBTORCH` wins, else the venv's (`RECORDS_VENV`
/// or `.venv`). Always passed, because the checkout's `.cargo/config.toml` only knows
/// `.venv/libtorch` and a tree under the checkout's target dir would pick that up.
pub fn libtorch(root: &Path, exported: Option<std::ffi::OsString>) -> PathBuf {
    exported.map_or_else(|| crate::paths::venv_dir(root).join("libtorch"), PathBuf::from)
}

fn run(mut cmd: Command, dir: &Path, args: &[&str]) -> Result<()> {
    let status = cmd
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
