//! The MLP of each layer, one letter per layer: 'M' an MLP, '-' none (upstream #30 drops layer
//! 0's: its attention alone feeds the stream). A layer with neither attention (attn_layers.rs)
//! nor MLP is skipped whole, its lambdas and U-net place too (upstream #35); block.rs builds
//! each layer's MLP by this pattern.
use crate::recipe::registry::{technique, Lab, Technique};

/// `mlp_layers = "-MMMMMMMMMMM"`: a per-layer pattern, resampled to the lab's layers.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Layers, ..technique("mlp_layers", &[30, 35], &[]) };
