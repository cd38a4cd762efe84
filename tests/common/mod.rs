//! Shared by the trainer's integration tests: small recipes written as manifests.
#![allow(dead_code)] // each test file uses a subset

use trainer::recipe::{Recipe, Scale};

/// A manifest with record #1's full recipe and the given `[lab]` lines.
pub fn manifest(lab: &str) -> String {
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")).unwrap();
    let start = base.find("[recipe]").unwrap();
    let end = base.find("[lab]").unwrap();
    format!("{}\n[lab]\n{lab}\n", &base[start..end])
}

/// Record #1 at lab scale with `overrides` (TOML lines) applied on top of its [lab] table.
pub fn lab_recipe(overrides: &str) -> Recipe {
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")).unwrap();
    let lab_start = base.find("[lab]\n").unwrap() + "[lab]\n".len();
    let lab_end = base[lab_start..].find("\n[").map_or(base.len(), |i| lab_start + i);
    let mut lab: toml::Table = toml::from_str(&base[lab_start..lab_end]).unwrap();
    let extra: toml::Table = toml::from_str(overrides).unwrap();
    lab.extend(extra);
    Recipe::from_manifest_str(&manifest(&toml::to_string(&lab).unwrap()), Scale::Lab, None).unwrap()
}
