//! A machine the time model runs on: `hardware/<name>.toml` at the checkout's root, one GPU's
//! peaks with the source of each number.
use crate::toml_file;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// The file's stem (`h100-sxm`), filled in when it is read.
    #[serde(skip)]
    pub key: String,
    pub name: String,
    /// What a record's `hardware` names this GPU by (`8xH100` → `H100`).
    pub matches: Vec<String>,
    pub bf16_tflops: f64,
    pub fp8_tflops: f64,
    pub memory_tb_s: f64,
    /// Each GPU's link to the others, one direction, GB/s.
    pub link_gb_s: f64,
    pub sources: BTreeMap<String, String>,
}

/// Every machine under `<root>/hardware/`, by file name (`achieved.toml` there is the fit's).
pub fn all(root: &Path) -> Result<Vec<Hardware>> {
    let dir = root.join("hardware");
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let machine =
        |p: &Path| p.extension().is_some_and(|e| e == "toml") && !p.ends_with("achieved.toml");
    for path in paths.into_iter().filter(|p| machine(p)) {
        out.push(read(&path)?);
    }
    Ok(out)
}

fn read(path: &Path) -> Result<Hardware> {
    let mut hw: Hardware = toml_file::read(path)?;
    hw.key = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    for field in ["bf16_tflops", "fp8_tflops", "memory_tb_s", "link_gb_s"] {
        if !hw.sources.contains_key(field) {
            bail!("{}: [sources] gives no source for {field}", path.display());
        }
    }
    Ok(hw)
}

/// The machine named `key` (a file stem, `h200`), or the one a record's `hardware` string
/// names (`8xH100`), with its GPU count.
pub fn find<'a>(machines: &'a [Hardware], key: &str) -> Result<&'a Hardware> {
    let gpu = gpus_and_model(key).1;
    machines
        .iter()
        .find(|h| h.key == key || h.matches.iter().any(|m| m.eq_ignore_ascii_case(gpu)))
        .ok_or_else(|| {
            let known: Vec<_> = machines.iter().map(|h| h.key.as_str()).collect();
            anyhow::anyhow!("no hardware file for `{key}` (hardware/: {})", known.join(", "))
        })
}

/// `8xH100` → (8, "H100"); a plain model is one GPU.
pub fn gpus_and_model(hardware: &str) -> (usize, &str) {
    match hardware.split_once(['x', '×']) {
        Some((n, model)) if n.trim().parse::<usize>().is_ok() => {
            (n.trim().parse().unwrap_or(1), model.trim())
        }
        _ => (1, hardware.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_s_hardware_names_its_gpus_and_model() {
        assert_eq!(gpus_and_model("8xH100"), (8, "H100"));
        assert_eq!(gpus_and_model("2xRTX4090"), (2, "RTX4090"));
        assert_eq!(gpus_and_model("H200"), (1, "H200"));
    }

    #[test]
    fn the_checkout_s_machines_all_read_and_cite_their_numbers() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let machines = all(&root).unwrap();
        let h100 = find(&machines, "8xH100").unwrap();
        assert_eq!((h100.key.as_str(), h100.bf16_tflops), ("h100-sxm", 989.4));
        assert_eq!(find(&machines, "2xRTX4090").unwrap().key, "rtx-4090");
        assert!(find(&machines, "8xB200").is_err());
    }
}
