//! Attention's work under windows and document masks, as a block-sparse kernel (FlashAttention's
//! varlen and windowed forms, FlexAttention's block masks) does it: the score matrix is cut into
//! `BLOCK`×`BLOCK` tiles and a tile is computed whole when any pair in it is visible, skipped
//! when none is.

/// Query and key tile of FlashAttention 2/3 and FlexAttention's block mask (upstream's
/// `BLOCK_SIZE = 128`).
pub const BLOCK: usize = 128;

/// The backward's matmul work over the forward's: FlashAttention's backward runs five tile
/// matmuls (S and dP again, dV, dQ, dK) against the forward's two (Dao 2023, FlashAttention-2,
/// section 3.1), so it is 2.5 forwards.
pub const BACKWARD_OVER_FORWARD: f64 = 2.5;

/// (query, key) pairs a tiled kernel computes for one document of `len` tokens whose queries
/// see the `window` keys up to themselves (0: every key before them), tile by tile.
pub fn pairs_in_document(len: usize, window: usize) -> u64 {
    let tiles = len.div_ceil(BLOCK);
    let mut pairs = 0;
    for i in 0..tiles {
        let (first, last) = (i * BLOCK, ((i + 1) * BLOCK).min(len) - 1);
        // The earliest key any query of this tile sees.
        let lo = match window {
            0 => 0,
            w => first.saturating_sub(w - 1),
        };
        let key_tiles = (last / BLOCK - lo / BLOCK + 1) as u64;
        pairs += key_tiles * (BLOCK * BLOCK) as u64;
    }
    pairs
}

/// Pairs per token over `tokens` tokens packed as documents of `doc_len` (the last one shorter).
pub fn pairs_per_token(tokens: usize, doc_len: usize, window: usize) -> f64 {
    if tokens == 0 {
        return 0.0;
    }
    let doc_len = doc_len.clamp(1, tokens);
    let whole = (tokens / doc_len) as u64;
    let rest = tokens % doc_len;
    let pairs = whole * pairs_in_document(doc_len, window) + pairs_in_document(rest, window);
    pairs as f64 / tokens as f64
}

/// Forward and backward FLOPs of one attention layer for `tokens` tokens: QKᵀ and PV, 2·d
/// each per computed pair and head.
pub fn layer_flops(
    tokens: usize,
    doc_len: usize,
    window: usize,
    heads: usize,
    head_dim: usize,
) -> f64 {
    let pairs = pairs_per_token(tokens, doc_len, window) * tokens as f64;
    let forward = 4.0 * (heads * head_dim) as f64 * pairs;
    forward * (1.0 + BACKWARD_OVER_FORWARD)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A causal document of 4 tiles computes the lower triangle of tiles: 1 + 2 + 3 + 4 = 10.
    #[test]
    fn a_causal_document_computes_the_lower_triangle_of_tiles() {
        assert_eq!(pairs_in_document(4 * BLOCK, 0), 10 * (BLOCK * BLOCK) as u64);
        // A window as long as the document changes nothing.
        assert_eq!(pairs_in_document(4 * BLOCK, 4 * BLOCK), pairs_in_document(4 * BLOCK, 0));
    }

    /// A window of one tile: each query tile reaches back into the tile before it (its first
    /// query sees keys 127 back), so every tile but the first computes 2 key tiles: 1 + 2·15.
    #[test]
    fn a_sliding_window_computes_a_band_of_tiles() {
        assert_eq!(pairs_in_document(16 * BLOCK, BLOCK), 31 * (BLOCK * BLOCK) as u64);
        // Three tiles wide: 1, 2, 3, then 4 key tiles per query tile (the band's edge tile).
        assert_eq!(
            pairs_in_document(8 * BLOCK, 3 * BLOCK),
            (1 + 2 + 3 + 4 * 5) * (BLOCK * BLOCK) as u64
        );
    }

    /// Documents of one tile each compute one tile each, whatever the window: a document mask
    /// leaves out every tile across a boundary.
    #[test]
    fn document_masks_leave_out_the_tiles_across_documents() {
        let t = 8 * BLOCK;
        assert_eq!(pairs_per_token(t, BLOCK, 0), BLOCK as f64);
        assert_eq!(pairs_per_token(t, t, 0), (36 * BLOCK * BLOCK) as f64 / t as f64);
        // Record #1's dense causal attention over 1,024-token rows: 36 tiles of 64 in a row.
        let flops = layer_flops(1024, 1024, 0, 12, 64);
        assert_eq!(flops, 4.0 * 768.0 * (36 * BLOCK * BLOCK) as f64 * 3.5);
    }
}
