//! Flash attention (bf16) against an fp32 SDPA reference on the same inputs: forward and
//! backward, dense, windowed and over packed documents.
use crate::table::{Row, Status};
use crate::util::{max_abs, Ctx};
use anyhow::Result;
use tch::{Kind, Tensor};
use trainer::model::attend::{attend_with, Docs, Kernel, Pattern};

/// Record #1's heads over 4 rows of 1,024 tokens.
const DENSE: [i64; 4] = [4, 12, 1024, 64];
/// 4 rows of 256 tokens; documents of 37, 219, 300, 1 and 467 tokens (the third crosses a
/// row boundary, the fourth is one token long).
const PACKED: [i64; 4] = [4, 12, 256, 64];
const DOC_LENGTHS: [i64; 5] = [37, 219, 300, 1, 467];

pub fn dense(ctx: &Ctx) -> Result<Vec<Row>> {
    forward(ctx, DENSE, Pattern::default(), "dense causal, B4 H12 T1024 D64")
}

pub fn window(ctx: &Ctx) -> Result<Vec<Row>> {
    let pattern = Pattern { window: Some(64), ..Pattern::default() };
    forward(ctx, DENSE, pattern, "causal window 64, B4 H12 T1024 D64")
}

pub fn varlen(ctx: &Ctx) -> Result<Vec<Row>> {
    let pattern = Pattern { docs: Some(docs(ctx)?), ..Pattern::default() };
    forward(ctx, PACKED, pattern, "varlen docs [37,219,300,1,467] over B4×T256, causal")
}

pub fn varlen_window(ctx: &Ctx) -> Result<Vec<Row>> {
    let pattern = Pattern { window: Some(64), docs: Some(docs(ctx)?), ..Pattern::default() };
    forward(ctx, PACKED, pattern, "varlen docs + window 64")
}

pub fn backward_dense(ctx: &Ctx) -> Result<Vec<Row>> {
    backward(ctx, DENSE, Pattern::default(), "dense causal (dq, dk, dv)")
}

pub fn backward_varlen(ctx: &Ctx) -> Result<Vec<Row>> {
    let pattern = Pattern { window: Some(64), docs: Some(docs(ctx)?), ..Pattern::default() };
    backward(ctx, PACKED, pattern, "varlen docs + window 64 (dq, dk, dv)")
}

fn docs(ctx: &Ctx) -> Result<Docs> {
    Docs::from_lengths(&DOC_LENGTHS, ctx.dev)
}

/// Whether `err` is within bf16's rounding of values up to `scale` (2^-8 relative per
/// rounding, a few roundings deep, so 2e-2); returns the tolerance too.
fn verdict(err: f64, scale: f64) -> (bool, f64) {
    let tol = 2e-2 * scale.max(1.0);
    (err <= tol, tol)
}

fn bf16_qkv(ctx: &Ctx, shape: [i64; 4]) -> [Tensor; 3] {
    tch::manual_seed(1234);
    [0, 1, 2].map(|_| Tensor::randn(shape, (Kind::BFloat16, ctx.dev)))
}

fn reference_note(pattern: &Pattern) -> &'static str {
    if pattern.window.is_none() && pattern.docs.is_none() {
        "ref: SDPA is_causal in fp32 on the same bf16 inputs"
    } else {
        "ref: SDPA with an explicit mask in fp32 on the same bf16 inputs"
    }
}

/// Flash forward in bf16 against the fp32 reference on the same inputs.
fn forward(ctx: &Ctx, shape: [i64; 4], pattern: Pattern, what: &str) -> Result<Vec<Row>> {
    let [q, k, v] = bf16_qkv(ctx, shape);
    let got = attend_with(&q, &k, &v, &pattern, Kernel::Flash)?;
    let f32 = |x: &Tensor| x.to_kind(Kind::Float);
    let want = attend_with(&f32(&q), &f32(&k), &f32(&v), &pattern, Kernel::Sdpa)?;
    let err = max_abs(&(f32(&got) - &want));
    let (pass, tol) = verdict(err, max_abs(&want));
    Ok(vec![Row::judged(
        format!("flash fwd: {what}"),
        format!("max abs err {err:.4}"),
        Status::judge(pass),
        format!("{}; tol {tol:.3}", reference_note(&pattern)),
    )])
}

/// dq, dk, dv of flash (bf16) against the reference's autograd (fp32), for one upstream
/// gradient.
fn backward(ctx: &Ctx, shape: [i64; 4], pattern: Pattern, what: &str) -> Result<Vec<Row>> {
    let base = bf16_qkv(ctx, shape);
    let upstream = Tensor::randn(shape, (Kind::Float, ctx.dev));
    let grads = |kind: Kind, kernel: Kernel| -> Result<Vec<Tensor>> {
        let leaves: Vec<Tensor> =
            base.iter().map(|x| x.to_kind(kind).detach().set_requires_grad(true)).collect();
        let y = attend_with(&leaves[0], &leaves[1], &leaves[2], &pattern, kernel)?;
        (y.to_kind(Kind::Float) * &upstream).sum(Kind::Float).f_backward()?;
        Ok(leaves.iter().map(|l| l.grad().to_kind(Kind::Float)).collect())
    };
    let got = grads(Kind::BFloat16, Kernel::Flash)?;
    let want = grads(Kind::Float, Kernel::Sdpa)?;
    let mut parts = Vec::new();
    let mut all_pass = true;
    for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
        let err = max_abs(&(&got[i] - &want[i]));
        let (pass, tol) = verdict(err, max_abs(&want[i]));
        all_pass &= pass;
        parts.push(format!("{name} {err:.4} (tol {tol:.3})"));
    }
    Ok(vec![Row::judged(
        format!("flash bwd: {what}"),
        format!("max abs err {}", parts.join(", ")),
        Status::judge(all_pass),
        format!("{}; autograd of each for one random upstream gradient", reference_note(&pattern)),
    )])
}
