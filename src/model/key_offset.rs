//! Partial key offset (upstream #49): on the long-window layers, the key dims rotary leaves
//! unrotated (with upstream #17's truncated rotary, the second quarter of each half: dims
//! D/4..D/2 and 3D/4..D) are taken from the previous position. Query t then matches, in those
//! dims, what token t-1's neighbour carried: a cheap bigram-like path inside attention. Position
//! 0 keeps its own; the shift uses the original keys (no cascade) and crosses document
//! boundaries in the packed stream, as upstream's.
use tch::Tensor;

/// k: [B, T, H, D] after rotary -> k with its stationary quarters shifted one position forward.
pub fn shift_stationary(k: &Tensor) -> Tensor {
    let d = k.size()[3];
    let quarters = k.split(d / 4, 3); // rotated, stationary, rotated, stationary
    let (q1, q3) = (shift(&quarters[1]), shift(&quarters[3]));
    Tensor::cat(&[&quarters[0], &q1, &quarters[2], &q3], 3)
}

/// Upstream #62: with interleaved rotary (#58) the unrotated dims are the second half, D/2..D;
/// #58-#61 had kept the quarters above, half of which then rotate.
/// k: [B, T, H, D] -> k with dims D/2..D shifted one position forward.
pub fn shift_second_half(k: &Tensor) -> Tensor {
    let d = k.size()[3];
    Tensor::cat(&[k.narrow(3, 0, d / 2), shift(&k.narrow(3, d / 2, d / 2))], 3)
}

/// x: [B, T, ...] -> position t takes t − 1's values; position 0 keeps its own.
fn shift(x: &Tensor) -> Tensor {
    let t = x.size()[1];
    Tensor::cat(&[x.narrow(1, 0, 1), x.narrow(1, 0, t - 1)], 1)
}
