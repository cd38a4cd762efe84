//! Tall block matrices (upstream #48): the attention's QKVO weight is stored as one [4C, C]
//! matrix instead of [4, C, C], and the MLP's c_fc and c_proj both as [4C, C] (c_fc was
//! [C, 4C]), so the forward multiplies by their transposes where it did not before. Two
//! optimizer effects follow from the shape alone: Muon's √max(1, rows/cols) gives them twice
//! the lr (src/optim/muon.rs), and NorMuon's second moments are per row, one per neuron
//! (src/optim/normuon.rs). The switch is read where each matrix is made
//! (windowed_attention.rs, relu2_mlp.rs); #84's FP8 up-projection needs it.
use crate::recipe::registry::{technique, Technique};

/// `tall_matrices = true`: a switch.
pub const TECHNIQUE: Technique = technique("tall_matrices", &[48], &["muon"]);
