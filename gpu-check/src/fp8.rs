//! The FP8 lm_head against a bf16 matmul at one rank's training shape of record #29: forward
//! and both gradients for the same upstream gradient, and the time of each.
use crate::model::{recipe, RECORD_29};
use crate::table::{Row, Status};
use crate::util::Ctx;
use anyhow::{Context, Result};
use tch::{Kind, Reduction, Tensor};
use trainer::model::fp8_head::{fp8_linear, Fp8Scales};
use trainer::model::norm::rms_norm;
use trainer::model::softcap::softcap;
use trainer::recipe::Scale;

/// Std of the random lm_head (upstream's w scale 2^-9 fits |W| < 0.875).
const HEAD_STD: f64 = 0.02;

/// ‖a − b‖ / ‖b‖ in fp32.
fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_kind(Kind::Float), b.to_kind(Kind::Float));
    ((a - &b).norm() / b.norm()).double_value(&[])
}

pub fn check(ctx: &Ctx) -> Result<Vec<Row>> {
    let r = recipe(RECORD_29, Scale::Full)?;
    let f = r.fp8_head.as_ref().context("records/29.toml has no fp8_head")?;
    let cap = r.softcap.as_ref().context("records/29.toml has no softcap")?;
    let s = Fp8Scales::for_width(r.n_embd, f.w_scale, f.grad_scale);
    let n = (r.batch_tokens / r.reference_ranks.max(1)) as i64;
    let (c, v) = (r.n_embd as i64, r.padded_vocab_size as i64);
    let bf16 = Kind::BFloat16;
    tch::manual_seed(29);
    let x = rms_norm(&Tensor::randn([n, c], (bf16, ctx.dev)), r.ln_eps); // [N, C]
    let w = Tensor::randn([v, c], (Kind::Float, ctx.dev)) * HEAD_STD; // [V, C]
    let targets = Tensor::randint(r.vocab_size as i64, [n], (Kind::Int64, ctx.dev));
    // Training's gradient of the logits: the summed CE through the softcap, at bf16 logits.
    let g = {
        let z = x.matmul(&w.to_kind(bf16).tr()).set_requires_grad(true); // [N, V]
        softcap(&z, cap)
            .cross_entropy_loss::<Tensor>(&targets, None, Reduction::Sum, -100, 0.0)
            .f_backward()?;
        z.grad()
    };
    // -> [logits, grad x, grad w]
    let run = |fp8: bool| -> Result<[Tensor; 3]> {
        let (xl, wl) = (x.detach().set_requires_grad(true), w.detach().set_requires_grad(true));
        let out = if fp8 { fp8_linear(&xl, &wl, &s)? } else { xl.matmul(&wl.to_kind(bf16).tr()) };
        (&out * &g).sum(Kind::Float).f_backward()?;
        Ok([out, xl.grad(), wl.grad()])
    };
    let (got, want) = (run(true)?, run(false)?);
    let errs: Vec<f64> = got.iter().zip(&want).map(|(a, b)| rel_err(a, b)).collect();
    let status = Status::judge(errs.iter().all(|&e| e < 0.1));
    drop((got, want));
    let fp8_ms = ctx.time_ms(|| run(true).map(drop))?;
    let bf16_ms = ctx.time_ms(|| run(false).map(drop))?;
    let shape = format!("[{n}, {c}] × [{v}, {c}]");
    Ok(vec![
        Row::judged(
            format!("FP8 head vs bf16: error, {shape}"),
            format!("rel err fwd {:.4}, grad_x {:.4}, grad_w {:.4}", errs[0], errs[1], errs[2]),
            status,
            format!(
                "fp8_linear (e4m3 x and W, e5m2 grad; scales √768/448, 2^-9, 1/448) against \
                 a bf16 matmul's autograd on the same inputs: RMS-normed x, W ~ N(0, \
                 {HEAD_STD}²), the gradient of the summed CE through the softcap over random \
                 targets; rel err = ‖a − b‖/‖b‖; ok below 0.1"
            ),
        ),
        Row::new(
            format!("FP8 head vs bf16: speed, {shape}"),
            format!("fwd+bwd fp8 {fp8_ms:.2} ms, bf16 {bf16_ms:.2} ms ({:.2}×)", bf16_ms / fp8_ms),
            "mean of each after warmup; both include the (out·g).sum() that feeds the gradient",
        ),
    ])
}
