//! Partial key offset (upstream #49): on the long-window layers, the key dims rotary leaves
//! unrotated (with upstream #17's truncated rotary, the second quarter of each half: dims
//! D/4..D/2 and 3D/4..D) are taken from the previous position. Query t then matches, in those
//! dims, what token t-1's neighbour carried: a cheap bigram-like path inside attention. Position
//! 0 keeps its own; the shift uses the original keys (no cascade) and crosses document
//! boundaries in the packed stream, as upstream's.
use crate::recipe::registry::{technique, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use tch::Tensor;

/// `[recipe.key_offset]`: which dims shift.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// Dims D/2..D, the unrotated half of interleaved rotary (upstream #62), instead of the
    /// second quarter of each half (#49-#61).
    pub half: bool,
}

/// Trees before the section read the switch `key_offset = true` and, from #62,
/// `key_offset_half = true`.
pub const TECHNIQUE: Technique = Technique {
    older: &[("key_offset", Older::On), ("key_offset_half", Older::Field("half"))],
    ..technique("key_offset", &[49, 62], &["attn_layers"])
};

#[cfg(not(recipe_only))]
/// k: [B, T, H, D] after rotary -> k with its stationary quarters shifted one position forward.
pub fn shift_stationary(k: &Tensor) -> Tensor {
    let d = k.size()[3];
    let quarters = k.split(d / 4, 3); // rotated, stationary, rotated, stationary
    let (q1, q3) = (shift(&quarters[1]), shift(&quarters[3]));
    Tensor::cat(&[&quarters[0], &q1, &quarters[2], &q3], 3)
}

#[cfg(not(recipe_only))]
/// Upstream #62: with interleaved rotary (#58) the unrotated dims are the second half, D/2..D;
/// #58-#61 had kept the quarters above, half of which then rotate.
/// k: [B, T, H, D] -> k with dims D/2..D shifted one position forward.
pub fn shift_second_half(k: &Tensor) -> Tensor {
    let d = k.size()[3];
    Tensor::cat(&[k.narrow(3, 0, d / 2), shift(&k.narrow(3, d / 2, d / 2))], 3)
}

#[cfg(not(recipe_only))]
/// x: [B, T, ...] -> position t takes t − 1's values; position 0 keeps its own.
fn shift(x: &Tensor) -> Tensor {
    let t = x.size()[1];
    Tensor::cat(&[x.narrow(1, 0, 1), x.narrow(1, 0, t - 1)], 1)
}
