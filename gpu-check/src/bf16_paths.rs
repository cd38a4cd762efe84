//! The bf16 paths of issue 23 as a GPU runs them: Adam's bf16 moments (#32-#55), a bf16 gate's
//! Muon state and weight (#38-#55), Polar Express's split product (#48; its time against the
//! fused form, upstream's reason for it) and the evaluation logits (bf16 matmul, fp32 softcap).
//! tests/bf16_paths.rs holds the same on the CPU; here each is run on the GPU and against the
//! CPU's result.
use crate::table::{Row, Status};
use crate::util::{max_abs, Ctx};
use anyhow::Result;
use tch::{Device, Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::head::Head;
use trainer::model::norm::Norm;
use trainer::model::params::{Group, Opt, Param, Role};
use trainer::model::precision::AdamState;
use trainer::model::softcap::softcap;
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::optim::muon::{Muon, Orthogonalizer, Section, Storage};
use trainer::optim::polar_express;
use trainer::recipe::Softcap;

const BF16: Kind = Kind::BFloat16;

/// Fixed values in (-1, 1), the same on every device.
fn data(shape: &[i64], seed: f64, dev: Device) -> Tensor {
    let n: i64 = shape.iter().product();
    (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 0.731 + seed).sin().view(shape).to_device(dev)
}

fn param(values: Tensor, group: Group) -> Param {
    let tensor = values.set_requires_grad(true);
    (&tensor * 0.0).sum(Kind::Float).backward();
    Param { name: "p".into(), tensor, group }
}

fn set_grad(p: &Tensor, g: &Tensor) {
    tch::no_grad(|| p.grad().copy_(&g.to_kind(p.kind())));
}

/// Three Adam steps of an fp32 [768, 768] parameter with bf16 moments: (moment kinds, param).
fn adam_three_steps(dev: Device) -> Result<(Vec<Kind>, Tensor)> {
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.8,
        beta2: 0.95,
        eps: 1e-10,
        weight_decay: 0.0,
        cautious: None,
        state: Some(AdamState::Bf16),
    };
    let p = param(data(&[768, 768], 0.3, dev), Group::new(Opt::Adam, 1.0));
    let t = p.tensor.shallow_clone();
    let mut adam = DistAdam::new(vec![p], cfg)?;
    for step in 1..=3 {
        set_grad(&t, &data(&[768, 768], step as f64, dev));
        adam.step(&mut Single, 1.0)?;
    }
    let kinds = adam.save()[1..].iter().map(Tensor::kind).collect();
    Ok((kinds, t.detach().to_device(Device::Cpu)))
}

pub fn adam(ctx: &Ctx) -> Result<Vec<Row>> {
    let (kinds, gpu) = adam_three_steps(ctx.dev)?;
    let (_, cpu) = adam_three_steps(Device::Cpu)?;
    let diff = max_abs(&(&gpu - &cpu));
    let ok = kinds.iter().all(|&k| k == BF16) && diff <= 1e-6;
    Ok(vec![Row::judged(
        "Adam's bf16 moments (#32-#55)",
        format!("moments {kinds:?}; fp32 param after 3 steps vs the CPU's: max |Δ| {diff:.2e}"),
        Status::judge(ok),
        "DistAdam with its state in bf16 on an fp32 [768, 768] parameter (tests/bf16_paths.rs on the \
         CPU); ok: bf16 moments, the GPU's param within 1e-6 of the CPU's",
    )])
}

/// Three NorMuon steps of a bf16 [6, 12] gate: (state kinds, has a mantissa, weight).
fn gate_three_steps(dev: Device) -> Result<(Vec<Kind>, bool, Tensor)> {
    let cfg = (
        Section {
            orthogonalizer: Orthogonalizer::PolarExpress,
            beta2: Some(0.95),
            gate_rows: true,
            ..Section::plain(0.05, 0.0)
        },
        Storage { mantissa: false, kind: BF16 },
    );
    let gate = Group { role: Role::Gate, ..Group::new(Opt::Muon, 1.0) };
    let p = param((data(&[6, 12], 0.7, dev) * 0.1).to_kind(BF16), gate);
    let t = p.tensor.shallow_clone();
    let mut muon = Muon::new(vec![p], &cfg.0, cfg.1)?;
    for step in 1..=3 {
        set_grad(&t, &data(&[6, 12], 10.0 + step as f64, dev));
        muon.step(&mut Single, 1.0, 0.9)?;
    }
    let saved = muon.save();
    let kinds = vec![saved[0].kind(), saved[1].kind(), t.kind()];
    Ok((kinds, saved[3].numel() > 0, t.detach().to_device(Device::Cpu).to_kind(Kind::Float)))
}

pub fn gate(ctx: &Ctx) -> Result<Vec<Row>> {
    let (kinds, mantissa, gpu) = gate_three_steps(ctx.dev)?;
    let (_, _, cpu) = gate_three_steps(Device::Cpu)?;
    let diff = max_abs(&(&gpu - &cpu));
    let ok = kinds.iter().all(|&k| k == BF16) && !mantissa && diff <= 2f64.powi(-8);
    Ok(vec![Row::judged(
        "NorMuon on a bf16 gate (#38-#55)",
        format!(
            "momentum, second moment, weight {kinds:?}; mantissa {mantissa}; weight vs the \
             CPU's after 3 steps: max |Δ| {diff:.2e}"
        ),
        Status::judge(ok),
        "a [6, 12] gate, no mantissa before #57; ok: bf16 state and weight, within 2⁻⁸ of the \
         CPU's (bf16 matmuls accumulate in another order)",
    )])
}

pub fn split_product(ctx: &Ctx) -> Result<Vec<Row>> {
    tch::manual_seed(48);
    let u = Tensor::randn([2, 3072, 768], (Kind::Float, ctx.dev)); // two MLP matrices
    let ms = |split| {
        ctx.time_ms(|| {
            let _ = polar_express::orthogonalize(&u, BF16, split);
            Ok(())
        })
    };
    let (split_ms, fused_ms) = (ms(true)?, ms(false)?);
    let (s, f) = (
        polar_express::orthogonalize(&u, BF16, true),
        polar_express::orthogonalize(&u, BF16, false),
    );
    let diff = max_abs(&(s.to_kind(Kind::Float) - f.to_kind(Kind::Float)));
    let (_, sv, _) = s.get(0).to_kind(Kind::Float).f_svd(true, false)?;
    let [lo, hi] = [sv.min(), sv.max()].map(|t| t.double_value(&[]));
    Ok(vec![Row::judged(
        "Polar Express, split product (#48), 2 × [3072, 768]",
        format!(
            "split {split_ms:.3} ms/call, fused {fused_ms:.3} ms/call; max |split − fused| \
             {diff:.2e}; σ ∈ [{lo:.3}, {hi:.3}]"
        ),
        Status::judge(diff > 0.0 && hi <= 1.25),
        "B·X rounded to bf16, then a·X added (upstream's bmm + add_, faster for the MLP by its \
         README); ok: a different bf16 result from baddbmm's, σ ≤ 1.25",
    )])
}

pub fn eval_logits(ctx: &Ctx) -> Result<Vec<Row>> {
    let s = Softcap { cap: 23.0, temperature: 7.5, shift: 5.0 };
    let w = data(&[50304, 768], 0.1, ctx.dev) * 0.05;
    let x = data(&[4096, 768], 0.6, ctx.dev).to_kind(BF16);
    let head =
        Head::new(Norm::Rms { eps: 1e-6 }, w.shallow_clone(), None, BF16).with_softcap(s.clone());
    let got = head.logits(&x, false)?;
    let want = softcap(&x.matmul(&w.to_kind(BF16).tr()), &s);
    let ok = got.kind() == Kind::Float && got.equal(&want);
    Ok(vec![Row::judged(
        "eval logits: bf16 matmul, fp32 softcap (#37 on)",
        format!("{:?} [4096, 50304]; equal to softcap(bf16 x·Wᵀ) in fp32: {ok}", got.kind()),
        Status::judge(ok),
        "upstream's compiled eval fuses the softcap into the fp32 cross-entropy of \
         logits.float(); ok: the head's eval logits are exactly that",
    )])
}
