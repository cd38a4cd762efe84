//! The gates in Adam (upstream #56): the attention gates' and the value-embedding gates' small
//! matrices move from Muon to Adam, at lr multiplier 1 and decaying as Adam's other parameters
//! do. A (6, 12) matrix has little structure for Newton-Schulz to orthogonalise, and Adam's
//! per-entry steps fit it. Read where the parameters' groups are made (src/model/params.rs).
use crate::recipe::registry::{technique, Technique};

/// `gates_in_adam = true`: a switch.
pub const TECHNIQUE: Technique = technique("gates_in_adam", &[56], &["attn_gate", "muon"]);
