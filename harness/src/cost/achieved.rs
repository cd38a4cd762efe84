//! What fraction of each peak the work achieves, and a fixed time per step: the model's only
//! fitted numbers (six), fitted on at most six named records by `records cost --fit` and kept in
//! `hardware/achieved.toml`. Every other record is held out (`records cost --validate`).
use crate::toml_file;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The most records a fit may use.
pub const MAX_FIT_RECORDS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Fractions {
    /// Of the bf16 peak: the model's matmuls and the orthogonalisation's.
    pub matmul: f64,
    /// Of the FP8 peak.
    pub fp8: f64,
    /// Of the bf16 peak, for attention's tiles.
    pub attention: f64,
    /// Of the memory bandwidth: the memory-bound ops and the optimizer's updates.
    pub memory: f64,
    /// Of the link: the communication (what overlaps the backward is hidden in it).
    pub comm: f64,
    /// Milliseconds every step pays beyond its work: launches, the host, the data.
    pub overhead_ms: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Achieved {
    /// The records the fractions were fitted on, and nothing else.
    pub fitted_on: Vec<String>,
    pub fractions: Fractions,
}

pub fn read(root: &Path) -> Result<Achieved> {
    let path = root.join("hardware/achieved.toml");
    let a: Achieved = toml_file::read(&path)?;
    anyhow::ensure!(
        a.fitted_on.len() <= MAX_FIT_RECORDS,
        "{}: fitted on {} records; at most {MAX_FIT_RECORDS}",
        path.display(),
        a.fitted_on.len()
    );
    Ok(a)
}
