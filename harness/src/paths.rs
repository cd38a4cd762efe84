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

/// Shard folders; `data/` is git-ignored.
pub fn data_dir(root: &Path) -> PathBuf {
    root.join("data")
}

/// Replay results: `results/<NN>/<run id>/`.
pub fn results_dir(root: &Path) -> PathBuf {
    root.join("results")
}

/// The Python environment scripts/setup.sh made: `RECORDS_VENV`, else `<root>/.venv`.
pub fn venv_dir(root: &Path) -> PathBuf {
    std::env::var_os("RECORDS_VENV").map_or_else(|| root.join(".venv"), PathBuf::from)
}

/// Cargo's target dir: `CARGO_TARGET_DIR` if set, else `<root>/target`.
pub fn cargo_target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}
