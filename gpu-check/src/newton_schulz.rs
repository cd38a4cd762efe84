//! Muon's Newton–Schulz on record #29's matrix shapes: time per call and the singular values it
//! leaves.
use crate::model::{recipe, RECORD_29};
use crate::table::{Row, Status};
use crate::util::Ctx;
use anyhow::{Context, Result};
use tch::{Kind, Tensor};
use trainer::optim::newton_schulz::orthogonalize;
use trainer::recipe::Scale;

pub fn check(ctx: &Ctx) -> Result<Vec<Row>> {
    let r = recipe(RECORD_29, Scale::Full)?;
    let ns_steps = r.muon.as_ref().context("records/29.toml has no muon")?.ns_steps;
    let c = r.n_embd as i64;
    // c_fc and c_proj of every layer; qkvo_w of every layer with attention.
    let attn = r.attn_layers.as_deref().unwrap_or("").chars().filter(|&l| l != '-').count();
    let shapes = [(vec![c, 4 * c], 2 * r.n_layer), (vec![4, c, c], attn)];
    let mut rows = Vec::new();
    for (shape, count) in shapes {
        tch::manual_seed(3);
        let u = Tensor::randn(shape.as_slice(), (Kind::Float, ctx.dev)); // Muon's fp32 update
        let ms = ctx.time_ms(|| {
            let _ = orthogonalize(&u, ns_steps, Kind::BFloat16);
            Ok(())
        })?;
        let o = orthogonalize(&u, ns_steps, Kind::BFloat16);
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let (_, sv, _) = o.reshape([-1, m, n]).get(0).to_kind(Kind::Float).f_svd(true, false)?;
        let [lo, hi, med] = [sv.min(), sv.max(), sv.median()].map(|t| t.double_value(&[]));
        // The quintic maps [0, 1] into [0, 1.2024] (its maximum, at 0.5545), so σ stay
        // below that plus bf16 rounding; most land near 1, a few that start near 0 stay low.
        let status = Status::judge(hi <= 1.25 && (0.6..=1.25).contains(&med));
        rows.push(Row::judged(
            format!("Muon Newton–Schulz (bf16), {count} × {shape:?}"),
            format!(
                "{ms:.3} ms/call ({:.2} ms for {count}); σ ∈ [{lo:.3}, {hi:.3}], median \
                 {med:.3}, max |σ−1| {:.3}",
                ms * count as f64,
                (1.0 - lo).max(hi - 1.0)
            ),
            status,
            format!(
                "{ns_steps} NS5 steps (src/optim/newton_schulz.rs, baddbmm) on a Gaussian \
                 fp32 matrix, one call per param as Muon makes at world 1 (upstream: Triton, \
                 the params split over 8 ranks); σ of slice 0 in fp32 (svdvals); NS5 is not \
                 exact: its quintic peaks at 1.2024 and σ that start near 0 stay small \
                 (square Gaussians have some); ok: σ max ≤ 1.25, median in [0.6, 1.25]"
            ),
        ));
    }
    Ok(rows)
}
