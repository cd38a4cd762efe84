//! What a trainer makes of a manifest, asked of the trainer itself so the CLI cannot drift from
//! what `replay` runs: the recipe a record's own trainer runs (`train --print-recipe`: lab-scale
//! shrinking, schedules mapped onto the budget, patterns resampled; `records show N --lab`), and
//! each parameter as its optimizer treats it (`train --print-params`, the newest trainer's;
//! `records show N --params`).
use super::trainer_cmd::Trainer;
use crate::catalog::Manifest;
use crate::series::Series;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// The flag of `train` that prints its resolved recipe as TOML and exits.
pub const PRINT_RECIPE: &str = "--print-recipe";

/// The flag of `train` that prints each parameter's optimizer settings and exits.
pub const PRINT_PARAMS: &str = "--print-params";

/// Builds record `m`'s own trainer (or reuses its build) and asks it for its recipe at `scale`
/// (`lab` or `full`).
pub fn resolved(root: &Path, m: &Manifest, scale: &str) -> Result<String> {
    let t = Trainer::build(root, m.id(), false, false)?;
    ask(&t, &m.path, scale, PRINT_RECIPE)
}

/// Record `m`'s parameters at full scale as a GPU run holds them, from the newest trainer (it
/// runs every record's recipe; older trees have no such flag): one tab-separated row each.
pub fn params(root: &Path, m: &Manifest) -> Result<String> {
    let newest = Series::load(root)?.newest();
    let t = Trainer::build(root, newest, false, false)?;
    ask(&t, &m.path, "full", PRINT_PARAMS)
}

/// `train --manifest <manifest> --scale <scale> <flag>`'s output from trainer `t`, the manifest
/// as that trainer reads it (`Trainer::manifest`); an error when that trainer has no such flag.
pub fn ask(t: &Trainer, manifest: &Path, scale: &str, flag: &str) -> Result<String> {
    let (bin, manifest) = (&t.bin, t.manifest(manifest)?);
    let help = Command::new(bin)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", bin.display()))?;
    if !String::from_utf8_lossy(&help.stdout).contains(flag) {
        bail!(
            "{} has no `{flag}` flag (`train --manifest M --scale {scale} {flag}`)",
            bin.display()
        );
    }
    let out = Command::new(bin)
        .arg("--manifest")
        .arg(&manifest)
        .args(["--scale", scale, flag])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --manifest {} --scale {scale} {flag}` failed ({}): {}",
            bin.display(),
            manifest.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("the trainer's {flag} is not UTF-8"))
}
