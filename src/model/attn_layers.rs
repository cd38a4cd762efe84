//! The attention of each layer, one letter per layer: 'L' a long window, 'S' a short one, 'P' a
//! short one with paired heads (upstream #58; paired_heads.rs), '-' none (upstream #17, #20;
//! #29's layer 7 has none). With the key on, every attention is the windowed one
//! (windowed_attention.rs, its windows from windows.rs); without it, record #1's dense attention
//! (attention.rs). A layer with neither attention nor MLP (mlp_layers.rs) is skipped whole.
use crate::recipe::registry::{technique, Lab, Technique};

/// `attn_layers = "SSSLSSSLSSSL"`: a per-layer pattern, resampled to the lab's layers.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Layers,
    ..technique("attn_layers", &[17, 20, 58], &["rotary", "windows", "loader"])
};
