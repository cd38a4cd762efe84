//! Synthetic packed sequences as record #29's loader makes them: random tokens in documents of
//! random lengths, with their cu_seqlens padded as the loader pads them.
use crate::model::batch;
use crate::util::Ctx;
use anyhow::{ensure, Context, Result};
use corpus::synthetic::SplitMix64;
use tch::Tensor;
use trainer::data::packed::padded_doc_slots;
use trainer::model::attend::Docs;
use trainer::recipe::Recipe;

/// Mean document length (exponential; FineWeb's median document is about 400 tokens).
const MEAN_DOC: f64 = 600.0;

/// One packed sequence.
pub struct Packed {
    /// [1, N] random token ids (inputs, targets).
    pub x: Tensor,
    pub y: Tensor,
    pub docs: Docs,
    pub n_docs: usize,
    /// cu_seqlens entries, padding included.
    pub slots: usize,
}

/// `n` random tokens in documents of random lengths clipped at max_doc_len (the recipe's
/// seq_len), the last one cut at `n`; cu_seqlens padded with `n` to padded_doc_slots(n).
pub fn packed(ctx: &Ctx, r: &Recipe, n: usize) -> Result<Packed> {
    let mut rng = SplitMix64(29);
    let (mut cu, mut end) = (vec![0i32], 0);
    while end < n {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let len = ((-(1.0 - u).ln() * MEAN_DOC).ceil() as usize).clamp(1, r.seq_len);
        end = (end + len).min(n);
        cu.push(i32::try_from(end).context("document boundaries overflow int32")?);
    }
    let (n_docs, slots) = (cu.len() - 1, padded_doc_slots(n));
    ensure!(n_docs < slots, "{n_docs} documents do not fit {slots} cu_seqlens entries");
    cu.resize(slots, i32::try_from(n).context("tokens overflow int32")?);
    let docs = Docs::from_offsets(&cu, ctx.dev)?;
    let (x, y) = batch(ctx, r, [1, n as i64]);
    Ok(Packed { x, y, docs, n_docs, slots })
}
