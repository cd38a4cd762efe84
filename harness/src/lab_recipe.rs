//! The recipe a record's trainer actually runs: the manifest's `[recipe]` resolved by the
//! trainer itself (`train --print-recipe`: lab-scale shrinking, schedules mapped onto the
//! budget, patterns resampled), so `records show N --lab` cannot drift from what `replay` runs.
use crate::catalog::Manifest;
use crate::{replay, series};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// The flag of `train` that prints its resolved recipe as TOML and exits.
pub const PRINT_RECIPE: &str = "--print-recipe";

/// Builds record `m`'s own trainer (or reuses its build) and asks it for its recipe at `scale`
/// (`lab` or `full`).
pub fn resolved(root: &Path, m: &Manifest, scale: &str) -> Result<String> {
    let n = m.record.number;
    let dir = series::materialize(root, n)?;
    tracing::info!("records: building the trainer of #{n} in {} ...", dir.display());
    let bin = replay::build_trainer(root, &dir, false, false)?;
    print_recipe(&bin, &m.path, scale)
}

/// `bin --manifest <manifest> --scale <scale> --print-recipe`; an error when that trainer has
/// no such flag.
pub fn print_recipe(bin: &Path, manifest: &Path, scale: &str) -> Result<String> {
    let help = Command::new(bin)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", bin.display()))?;
    if !String::from_utf8_lossy(&help.stdout).contains(PRINT_RECIPE) {
        bail!(
            "{} cannot print its resolved recipe: it has no `{PRINT_RECIPE}` flag \
             (`train --manifest M --scale lab {PRINT_RECIPE}`)",
            bin.display()
        );
    }
    let out = Command::new(bin)
        .arg("--manifest")
        .arg(manifest)
        .args(["--scale", scale, PRINT_RECIPE])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --manifest {} --scale {scale} {PRINT_RECIPE}` failed ({}): {}",
            bin.display(),
            manifest.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("the trainer printed a recipe that is not UTF-8")
}
