//! Partial key offset (upstream #49): on the long-window layers, the key dims rotary leaves
//! unrotated (with upstream #17's truncated rotary, the second quarter of each half: dims
//! D/4..D/2 and 3D/4..D) are taken from the previous position. Query t then matches, in those
//! dims, what token t-1's neighbour carried: a cheap bigram-like path inside attention. Position
//! 0 keeps its own; the shift uses the original keys (no cascade) and crosses document
//! boundaries in the packed stream, as upstream's.
use tch::Tensor;

/// k: [B, T, H, D] after rotary -> k with its stationary quarters shifted one position forward.
pub fn shift_stationary(k: &Tensor) -> Tensor {
    let (t, d) = (k.size()[1], k.size()[3]);
    let quarters = k.split(d / 4, 3); // rotated, stationary, rotated, stationary
    let shift = |q: &Tensor| Tensor::cat(&[q.narrow(1, 0, 1), q.narrow(1, 0, t - 1)], 1);
    Tensor::cat(&[&quarters[0], &shift(&quarters[1]), &quarters[2], &shift(&quarters[3])], 3)
}
