//! Q and K orthogonalized per head pair (upstream #80): Muon's update of a QKVO weight
//! ([4C, C]: rows Q, K, V, O) splits Q and K into blocks of 2·head_dim rows, the heads that
//! paired-head attention (#58) reads together, each orthogonalized on its own, and V and O into
//! two C x C matrices. Upstream stores them as banks of their own (qk_bank (.., 128, 768), vo_bank
//! (.., 768, 768)); ours keeps one QKVO weight and cuts its update. NorMuon's reduce dim follows
//! each block's shape, as upstream's does: per column for the wide [2·head_dim, C] pairs, per
//! row for the square V and O; each band keeps its own second moment.
use super::muon::Piece;
use super::normuon;

/// The bands of a QKVO update with `cols` columns whose Q and K go by blocks of `block` rows.
pub(super) fn pieces(cols: i64, block: i64) -> Vec<Piece> {
    vec![
        Piece {
            first: 0,
            rows: 2 * cols,
            view: vec![-1, block, cols],
            dim: normuon::reduced_dim(&[block, cols], false),
        },
        Piece {
            first: 2 * cols,
            rows: 2 * cols,
            view: vec![2, cols, cols],
            dim: normuon::reduced_dim(&[cols, cols], false),
        },
    ]
}
