//! Per-tensor learning-rate multipliers (upstream #24): each kind of parameter steps at its own
//! multiple of its optimizer's lr (the embeddings 75x in Adam, the scalars 5x), and from upstream
//! #42 the MLP's matrices in Muon too (c_fc 2x, moved to c_proj by #48). The groups that take
//! them are in src/model/params.rs.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};

/// `[recipe.lr_mul]`: Adam's multipliers, and Muon's for the MLP's matrices.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub embed: f64,
    pub head: f64,
    pub scalars: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c_fc: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c_proj: Option<f64>,
    /// The smear gate's, in Adam (upstream #52: 0.01); absent, the gate is Muon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smear_gate: Option<f64>,
    /// The skip's x0 gate's, in Adam (upstream #55: 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_gate: Option<f64>,
}

pub const TECHNIQUE: Technique = technique("lr_mul", &[24, 42, 48, 52, 55], &["muon"]);
