//! Sigmoid-gated skips (upstream #32): a skip's learned weight w from the scalar bank acts as
//! σ(w), from the raw init `skip_gate` (−1.5, so each skip starts at σ(−1.5) ≈ 0.18 of the
//! early layer's output and can never add more than all of it). The U-net's skips (unet.rs)
//! and from #45 the single skip (single_skip.rs) read it.
use crate::recipe::registry::{technique, Technique};

/// `skip_gate = -1.5`: the raw init, a number.
pub const TECHNIQUE: Technique = technique("skip_gate", &[32], &["unet|single_skip"]);
