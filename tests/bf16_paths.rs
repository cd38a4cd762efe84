//! The bf16 paths a GPU run takes, on the CPU with CUDA's storage policy forced (bf16 compute,
//! bf16 parameters where upstream has them): where upstream stores a bf16 tensor (Adam's
//! moments from #32, a bf16 gate's Muon state and weight until #55, Polar Express's split
//! product from #48, the evaluation logits), ours rounds to bf16 at the same place and nowhere
//! else. Each test would fail on the fp32 state or the extra rounding ours had before.
use tch::{Device, Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::head::Head;
use trainer::model::norm::Norm;
use trainer::model::params::{Group, Opt, Param, Role};
use trainer::model::precision::AdamState;
use trainer::model::softcap::{softcap, softcap_in};
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::optim::muon::{Muon, Orthogonalizer, Section, SplitProduct, Storage};
use trainer::optim::{normuon, polar_express};
use trainer::recipe::Softcap;

const BF16: Kind = Kind::BFloat16;

/// Fixed values in (-1, 1) of `shape`, one set per `seed`.
fn data(shape: &[i64], seed: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 0.731 + seed).sin().view(shape)
}

fn param(name: &str, values: Tensor, group: Group) -> Param {
    let tensor = values.set_requires_grad(true);
    (&tensor * 0.0).sum(Kind::Float).backward();
    Param { name: name.into(), tensor, group }
}

fn set_grad(p: &Tensor, g: &Tensor) {
    tch::no_grad(|| p.grad().copy_(&g.to_kind(p.kind())));
}

fn bits_equal(a: &Tensor, b: &Tensor) -> bool {
    a.kind() == b.kind() && a.to_kind(Kind::Float).equal(&b.to_kind(Kind::Float))
}

/// Upstream #32-#55: Adam's moments are bf16 for every parameter, fp32 ones included, each
/// line computed in fp32 and rounded once when stored; the step reads the unrounded line. One
/// step cannot tell (the first update reads the unrounded moments); the third can.
#[test]
fn adam_moments_are_bf16_for_every_parameter_from_32() {
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.8,
        beta2: 0.95,
        eps: 1e-10,
        weight_decay: 0.0,
        cautious: None,
        state: Some(AdamState::Bf16),
    };
    let p0 = data(&[64, 4], 0.3);
    let scalars = param("scalars", p0.copy(), Group::new(Opt::Adam, 1.0));
    let t = scalars.tensor.shallow_clone();
    let mut adam = DistAdam::new(vec![scalars], cfg).unwrap();
    let (mut m, mut v, mut p) = (p0.zeros_like().to_kind(BF16), p0.zeros_like().to_kind(BF16), p0);
    for step in 1..=3 {
        let g = data(&[64, 4], step as f64);
        set_grad(&t, &g);
        adam.step(&mut Single, 1.0).unwrap();
        let m32 = m.to_kind(Kind::Float) * 0.8 + &g * 0.2;
        let v32 = v.to_kind(Kind::Float) * 0.95 + &g * &g * 0.05;
        let bias = (1.0 - 0.95f64.powi(step)).sqrt() / (1.0 - 0.8f64.powi(step));
        p = &p - &m32 / (v32.sqrt() + 1e-10) * (0.01 * bias);
        (m, v) = (m32.to_kind(BF16), v32.to_kind(BF16));
    }
    let saved = adam.save(); // [t, m, v]
    assert!(bits_equal(&saved[1], &m) && bits_equal(&saved[2], &v), "bf16 moments");
    assert!(t.equal(&p), "the fp32 parameter after three steps on bf16 moments");
}

/// NorMuon on bf16 gates by rows (#48) with `beta2`, Polar Express, `split_product`; bf16
/// parameters keep their mantissa when `mantissa`.
fn muon(
    params: Vec<Param>,
    beta2: Option<f64>,
    split: Option<SplitProduct>,
    mantissa: bool,
) -> Muon {
    let section = Section {
        orthogonalizer: Orthogonalizer::PolarExpress,
        beta2,
        gate_rows: true,
        split_product: split,
        ..Section::plain(0.05, 0.0)
    };
    Muon::new(params, &section, Storage { mantissa, kind: BF16 }).unwrap()
}

/// Upstream #32-#55: a bf16 gate in NorMuon keeps its momentum (`zeros_like(grad)`) and, from
/// #42, its second moment in bf16; the bf16 update times the lr reaches the weight in fp32 and
/// is rounded once when stored. Three steps against the same arithmetic written out.
#[test]
fn a_bf16_gates_muon_state_is_bf16_and_its_weight_rounds_once() {
    let (mu, beta2, lr) = (0.9, 0.95, 0.05);
    let w0 = (data(&[6, 12], 0.7) * 0.1).to_kind(BF16);
    let gate = param("gate", w0.copy(), Group { role: Role::Gate, ..Group::new(Opt::Muon, 1.0) });
    let t = gate.tensor.shallow_clone();
    let mut muon = muon(vec![gate], Some(beta2), None, false);
    let (mut buf, mut s, mut w) = (w0.zeros_like(), Tensor::zeros([6, 1], (BF16, Device::Cpu)), w0);
    for step in 1..=3 {
        let g = data(&[6, 12], 10.0 + step as f64).to_kind(BF16);
        set_grad(&t, &g);
        muon.step(&mut Single, 1.0, mu).unwrap();
        buf = buf.lerp(&g, 1.0 - mu);
        let o = polar_express::orthogonalize(&g.lerp(&buf, mu), BF16, false);
        let o = normuon::normalize(&o, &mut s, beta2, -1); // gate rows: one moment per head
        assert_eq!(o.kind(), BF16, "NorMuon keeps Polar Express's bf16");
        // Gates: shape factor 1 (6 x 12 is wide), lr_mul 1.
        w = (w.to_kind(Kind::Float) - o.to_kind(Kind::Float) * lr).to_kind(BF16);
    }
    let saved = muon.save(); // [buf, second, second_vo, mantissa]
    assert!(bits_equal(&saved[0], &buf), "bf16 momentum");
    assert!(bits_equal(&saved[1], &s), "bf16 second moment");
    assert_eq!(saved[3].numel(), 0, "no mantissa without bf16 matrices");
    assert!(bits_equal(&t, &w), "the weight, rounded once per step");
}

/// Upstream #57: with bf16 block matrices, a bf16 weight keeps its mantissa and its momentum
/// and second moment are fp32 (`dtype=torch.float32`).
#[test]
fn bf16_matrices_keep_mantissas_and_fp32_state() {
    let w = param("c_fc", data(&[16, 8], 0.2).to_kind(BF16), Group::new(Opt::Muon, 1.0));
    let t = w.tensor.shallow_clone();
    let mut muon = muon(vec![w], Some(0.95), None, true);
    set_grad(&t, &data(&[16, 8], 3.0));
    muon.step(&mut Single, 1.0, 0.9).unwrap();
    let saved = muon.save();
    assert_eq!((saved[0].kind(), saved[1].kind()), (Kind::Float, Kind::Float));
    assert_eq!(saved[3].kind(), Kind::Int16);
}

/// Polar Express on one matrix, written out: with `split`, B·X is rounded to bf16 before a·X is
/// added in fp32 (upstream #48's bmm + add_); without, one fused a·X + B·X.
fn polar_express_written_out(g: &Tensor, split: bool) -> Tensor {
    let tall = g.size()[0] > g.size()[1];
    let g = if tall { g.tr() } else { g.shallow_clone() };
    let mut x = g.to_kind(BF16).unsqueeze(0); // [1, m, n]: baddbmm's batch
    x = &x / (x.norm_scalaropt_dim(2, [-2, -1], true) * 1.02 + 1e-6);
    for &(a, b, c) in &polar_express::COEFFS {
        let gram = x.matmul(&x.transpose(-2, -1));
        let poly = gram.baddbmm(&gram, &gram, b, c);
        x = match split {
            true => {
                (poly.matmul(&x).to_kind(Kind::Float) + x.to_kind(Kind::Float) * a).to_kind(BF16)
            }
            false => x.baddbmm(&poly, &x, a, 1.0),
        };
    }
    let x = x.squeeze_dim(0);
    if tall {
        x.tr()
    } else {
        x
    }
}

/// Upstream #48's split product rounds B·X to bf16 before adding a·X: a different bf16 result
/// than baddbmm's; in fp32 the same sum, so the CPU lab does not split.
#[test]
fn the_split_product_rounds_bx_before_the_sum() {
    let g = data(&[24, 64], 0.4);
    let split = polar_express::orthogonalize(&g, BF16, true);
    let fused = polar_express::orthogonalize(&g, BF16, false);
    assert!(!split.equal(&fused), "in bf16 the two forms round differently");
    assert!(split.equal(&polar_express_written_out(&g, true)), "split: B·X rounded, then + a·X");
    assert!(fused.equal(&polar_express_written_out(&g, false)), "fused: one rounding");
    let (s32, f32) = (
        polar_express::orthogonalize(&g, Kind::Float, true),
        polar_express::orthogonalize(&g, Kind::Float, false),
    );
    assert!(s32.equal(&f32), "in fp32 one sum: the lab keeps baddbmm's");
}

/// Which matrices split: the MLP's by role (#48), then any of more than 1,024 rows (#61): one
/// bf16 Muon step with momentum 0 and no NorMuon is −lr times Polar Express of the gradient.
#[test]
fn muon_splits_the_mlps_product_then_the_large_matrices() {
    let step = |rows: i64, role: Role, rule: SplitProduct| {
        let g = data(&[rows, 16], 0.9).to_kind(BF16);
        let w = param(
            "w",
            Tensor::zeros([rows, 16], (BF16, Device::Cpu)),
            Group { role, ..Group::new(Opt::Muon, 1.0) },
        );
        let t = w.tensor.shallow_clone();
        let mut muon = muon(vec![w], None, Some(rule), false);
        set_grad(&t, &g);
        muon.step(&mut Single, 1.0, 0.0).unwrap();
        let factor = (rows as f64 / 16.0).max(1.0).sqrt();
        let update = |split| {
            let o = polar_express::orthogonalize(&g, BF16, split).to_kind(Kind::Float);
            (o * (-0.05 * factor)).to_kind(BF16)
        };
        (t.equal(&update(true)), t.equal(&update(false)))
    };
    assert_eq!(step(64, Role::Mlp, SplitProduct::Mlp), (true, false), "#48: the MLP splits");
    assert_eq!(step(64, Role::Plain, SplitProduct::Mlp), (false, true), "#48: others do not");
    assert_eq!(step(1032, Role::Plain, SplitProduct::Large), (true, false), "#61: > 1,024 rows");
    assert_eq!(step(1024, Role::Mlp, SplitProduct::Large), (false, true), "#61: 1,024 rows");
}

/// Evaluation (upstream #37 on): the logits are the bf16 matmul's output, and the softcap's
/// arithmetic on them is fp32: upstream's compiled graph fuses the softcap into the fp32
/// cross-entropy without storing the capped bf16 logits (its `logits.float()` eval path).
#[test]
fn evaluation_softcaps_the_bf16_logits_in_fp32() {
    let s = Softcap { cap: 23.0, temperature: 7.5, shift: 5.0 };
    let w = data(&[40, 16], 0.1) * 4.0;
    let x = data(&[8, 16], 0.6).to_kind(BF16);
    let head =
        Head::new(Norm::Rms { eps: 1e-6 }, w.shallow_clone(), None, BF16).with_softcap(s.clone());
    let got = head.logits(&x, false).unwrap();
    let raw = x.matmul(&w.to_kind(BF16).tr()); // [8, 40] bf16: the matmul's stored output
    assert_eq!(got.kind(), Kind::Float);
    assert!(got.equal(&softcap(&raw, &s)), "fp32 softcap of the bf16 logits");
    assert!(!got.equal(&softcap_in(&raw, &s).to_kind(Kind::Float)), "not rounded per op");
}
