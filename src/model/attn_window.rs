//! A sliding window on the dense attention: a query sees keys at most this many tokens before
//! it (Act 1's a6: 1,024, so 1,025 keys with itself). dense.rs holds it for attention.rs; at lab
//! scale it keeps its length (see records/a6.toml).
use crate::recipe::registry::{act1, Technique};

/// `attn_window = 1024`: a token length, which the lab keeps.
pub const TECHNIQUE: Technique = act1("attn_window", &[6], &["attn_layers"]);
