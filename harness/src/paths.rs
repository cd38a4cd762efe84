//! Where things live: the repo root and the folders under it.
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The repo root: `RECORDS_ROOT` if set, else the nearest ancestor of the current directory that
/// holds both `records/` and `Cargo.toml`.
pub fn repo_root() -> Result<PathBuf> {
    if let Some(root) = std::env::var_os("RECORDS_ROOT") {
        return Ok(PathBuf::from(root));
    }
    let cwd = std::env::current_dir()?;
    for dir in cwd.ancestors() {
        if is_root(dir) {
            return Ok(dir.to_path_buf());
        }
    }
    bail!(
        "not inside a records checkout ({} has no ancestor with records/ and Cargo.toml); cd into the repo or set RECORDS_ROOT",
        cwd.display()
    )
}

fn is_root(dir: &Path) -> bool {
    dir.join("records").is_dir() && dir.join("Cargo.toml").is_file()
}

/// Where runs keep what they make (`results/`, `data/`, the materialized trees and their
/// binaries): `RECORDS_STATE` if set, else the checkout. Tests give every CLI run a state of its
/// own, so nothing a user's runs leave in the checkout is read or changed by them.
fn state_dir() -> Option<PathBuf> {
    std::env::var_os("RECORDS_STATE").map(PathBuf::from)
}

/// Shard folders: `<state>/data/`, git-ignored in the checkout.
pub fn data_dir(root: &Path) -> PathBuf {
    state_dir().unwrap_or_else(|| root.to_path_buf()).join("data")
}

/// Replay results: `<state>/results/<NN>/<run id>/`.
pub fn results_dir(root: &Path) -> PathBuf {
    state_dir().unwrap_or_else(|| root.to_path_buf()).join("results")
}

/// What the CLI derives from the checkout (trees, upstream records' manifests):
/// `<state>/target/records/`.
pub fn derived_dir(root: &Path) -> PathBuf {
    state_dir().unwrap_or_else(|| root.to_path_buf()).join("target").join("records")
}

/// Where materialized trees are built and their binaries kept: `<state>/records-trees` with
/// `RECORDS_STATE`, else `records-trees` in cargo's target dir (see `run::tree_build`).
pub fn tree_builds_dir(root: &Path) -> PathBuf {
    state_dir().map_or_else(|| cargo_target_dir(root), |s| s.to_path_buf()).join("records-trees")
}

/// The Python environment scripts/setup.sh made: `RECORDS_VENV`, else `<root>/.venv`.
pub fn venv_dir(root: &Path) -> PathBuf {
    std::env::var_os("RECORDS_VENV").map_or_else(|| root.join(".venv"), PathBuf::from)
}

/// Cargo's target dir: `CARGO_TARGET_DIR` if set, else `<root>/target`.
pub fn cargo_target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}
