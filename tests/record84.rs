//! The techniques of upstream #64-#84 (record #84's span), each against hand-derived or float64
//! values.
mod common;

use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

/// #64: W_O is drawn with Q, K and V, U(±bound) with bound = √3·0.5/√C (qkv_init_mul 1), not
/// zero; the MLP's c_proj stays zero.
#[test]
fn attention_output_starts_uniform() {
    let r = common::record_with(63, "uniform_attn_out = true\nqkv_init_mul = 1.0", Scale::Lab);
    let (_, params, _vs) = common::build(&r);
    let c = r.n_embd as i64;
    let bound = 3f64.sqrt() * 0.5 / (c as f64).sqrt();
    for p in params.iter().filter(|p| p.name.ends_with("qkvo_w")) {
        let w = p.tensor.view([4 * c, c]);
        for (k, rows) in w.split(c, 0).iter().enumerate() {
            let max = rows.abs().max().double_value(&[]);
            assert!(max <= bound && max > 0.9 * bound, "{} block {k}: max {max}", p.name);
        }
    }
    let zero = |n: &str| {
        params
            .iter()
            .filter(|p| p.name.ends_with(n))
            .all(|p| p.tensor.abs().max().double_value(&[]) == 0.0)
    };
    assert!(zero("c_proj"));
}

fn rounded_1515() -> trainer::recipe::Recipe {
    let lines = "rounded_stages = true\nsteps = 1555\n\
        head_embed = { init_std = 0.005, untie_at = 0.6666666666666666, untie_step = \"odd_at_rounded\" }";
    common::record_with(63, lines, Scale::Full)
}

/// #65's TrainingSchedule at its 1515 scheduled steps (the helper's ends [0, 505, 1010, 1515,
/// 1555]): each stage's level from its first step (#63's x > 1/3 waited one step), the cooldown
/// from int(1515·0.45) = 681 over 834 steps to the floor, the multi-token weights fading within
/// each stage, the windows' stages on the same bounds, the untie after step 1010 | 1 = 1011.
#[test]
fn rounded_stages_follow_upstreams_training_schedule() {
    let s = Schedule::new(&rounded_1515());
    assert_eq!(s.at(504).lr_factor, 1.0);
    assert_eq!(s.at(505).lr_factor, 1.52);
    assert_eq!(s.at(681).lr_factor, 1.52);
    let t = |step: f64| ((step - 681.0) / 834.0).min(1.0);
    let lr = |level: f64, step: f64| level * (1.0 - t(step)) + 0.1 * t(step);
    assert!((s.at(682).lr_factor - lr(1.52, 682.0)).abs() < 1e-12);
    assert!((s.at(1010).lr_factor - lr(1.73, 1010.0)).abs() < 1e-12);
    assert!((s.at(1514).lr_factor - lr(1.73, 1514.0)).abs() < 1e-12);
    assert_eq!(s.at(1515).lr_factor, 0.1);
    assert_ne!(s.at(504).windows, s.at(505).windows);
    assert_ne!(s.at(1009).windows, s.at(1010).windows);
    assert_eq!(s.at(0).mtp_weights(), [1.0, 0.5, 0.25]);
    assert!((s.at(252).mtp_weights()[2] - 0.25 * (1.0 - 252.0 / 505.0)).abs() < 1e-12);
    assert_eq!(s.at(505).mtp_weights(), [1.0, 0.5]);
    assert!((s.at(1009).mtp_weights()[1] - 0.5 * (1.0 - 504.0 / 505.0)).abs() < 1e-12);
    assert_eq!(s.at(1010).mtp_weights(), [1.0]);
    let untie: Vec<u64> = (0..1555).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [1011]);
}

/// #70: the mixed value-embedding gate reads [h[:n/2], ve[:n/2]] (ve's row, not a head's), and
/// gates each head: against a float64 loop.
#[test]
fn mixed_value_gate_reads_the_value_embedding() {
    use tch::{nn, Device, Kind, Tensor};
    use trainer::model::params::{Group, Opt, ParamSet};
    use trainer::model::value_gate::ValueGate;
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let gate = ValueGate::new(&mut ps, "ve_gate", (2, 4), Group::new(Opt::Adam, 1.0)).mixed();
    let params = ps.into_params(Kind::Float);
    let w: Vec<f64> = (0..8).map(|i| (i as f64 * 0.7).sin()).collect();
    tch::no_grad(|| params[0].tensor.shallow_clone().copy_(&Tensor::from_slice(&w).view([2, 4])));
    let (t, c, d) = (3i64, 6i64, 3i64);
    let h = (Tensor::arange(t * c, (Kind::Float, Device::Cpu)) * 0.3).cos().view([1, t, c]);
    let ve =
        (Tensor::arange(t * 2 * d, (Kind::Float, Device::Cpu)) * 0.45).sin().view([1, t, 2, d]);
    let got = gate.apply(&h, &ve);
    for tok in 0..t {
        let input = [
            h.double_value(&[0, tok, 0]),
            h.double_value(&[0, tok, 1]),
            ve.double_value(&[0, tok, 0, 0]),
            ve.double_value(&[0, tok, 0, 1]),
        ];
        for head in 0..2i64 {
            let z: f64 = (0..4).map(|j| input[j] * w[head as usize * 4 + j]).sum();
            let g = 2.0 / (1.0 + (-z).exp());
            for k in 0..d {
                let want = g * ve.double_value(&[0, tok, head, k]);
                assert!((got.double_value(&[0, tok, head, k]) - want).abs() < 1e-6);
            }
        }
    }
}

/// #72: documents at most 896 tokens in the first stage, 2,048 after (and in the extension);
/// the lab scales them with the row: 112 and 256.
#[test]
fn document_length_follows_the_stages() {
    let lines = "rounded_stages = true\nsteps = 1530\ndoc_len_schedule = [896, 2048, 2048]\n\
        head_embed = { init_std = 0.005, untie_at = 0.6666666666666666, untie_step = \"odd_at_rounded\" }";
    let s = Schedule::new(&common::record_with(63, lines, Scale::Full));
    // 1490 scheduled steps: stages from round(1490/3) = 497 and round(2·1490/3) = 993.
    assert_eq!((s.at(496).max_doc_len, s.at(497).max_doc_len), (Some(896), Some(2048)));
    assert_eq!(s.at(1529).max_doc_len, Some(2048));
    let lab = common::record_with(63, lines, Scale::Lab);
    assert_eq!(lab.doc_len_schedule, Some(vec![112, 256, 256]));
}

/// #84: the FP8 up-projection against fp32 within e4m3's error: every product of two e4m3
/// values (3 mantissa bits, relative rounding ≤ 2⁻⁴ each) is off by at most ~13%, so each
/// output is within 0.13·Σ|h||w| of the exact one, and the whole product within a few percent;
/// the backward is the exact product's (straight-through), in the compute kind.
#[test]
fn fp8_up_projection_matches_fp32_within_e4m3_error() {
    use tch::{Device, Kind, Tensor};
    use trainer::model::fp8_mlp::fp8_up_projection;
    tch::manual_seed(3);
    let h = Tensor::randn([64, 32], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w = (Tensor::rand([128, 32], (Kind::Float, Device::Cpu)) * 0.0625 - 0.03125)
        .set_requires_grad(true);
    let got = fp8_up_projection(&h, &w).unwrap(); // [64, 128]
    let exact = h.detach().matmul(&w.detach().tr());
    let bound = h.detach().abs().matmul(&w.detach().abs().tr()) * 0.13;
    assert!((&got - &exact).abs().le_tensor(&bound).all().int64_value(&[]) == 1);
    let rel = (&got - &exact).norm().double_value(&[]) / exact.norm().double_value(&[]);
    assert!(rel > 0.0 && rel < 0.05, "relative error {rel}");

    let g = Tensor::randn([64, 128], (Kind::Float, Device::Cpu));
    (&got * &g).sum(Kind::Float).backward();
    assert!(h.grad().allclose(&g.matmul(&w.detach()), 1e-5, 1e-5, false));
    assert!(w.grad().allclose(&g.tr().matmul(&h.detach()), 1e-5, 1e-5, false));
}

/// #84 in the MLP: FP8 in training only; evaluation is the plain product.
#[test]
fn fp8_mlp_runs_in_training_only() {
    use tch::{nn, Device, Kind, Tensor};
    use trainer::model::params::{Group, Opt, ParamSet};
    use trainer::model::relu2_mlp::Relu2Mlp;
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let g = Group::new(Opt::Muon, 1.0);
    let fp8 = Relu2Mlp::new(&mut ps, "mlp", 16, 0.5, (false, true), (g, g)).with_fp8_up();
    let x = Tensor::randn([1, 8, 16], (Kind::Float, Device::Cpu));
    let (train, eval) = (fp8.forward(&x, true).unwrap(), fp8.forward(&x, false).unwrap());
    let params = ps.into_params(Kind::Float);
    let (fc, proj) = (&params[0].tensor, &params[1].tensor);
    let want = x.linear(fc, None::<Tensor>).relu().square().matmul(proj);
    assert!(eval.allclose(&want, 1e-6, 1e-6, false));
    assert!(!train.equal(&eval));
    assert!(train.allclose(&eval, 0.1, 0.1 * want.abs().max().double_value(&[]), false));
}

/// One Muon step (lr 0.1, momentum 0, no decay) of a zero [4C, C] QKVO weight with Q and K
/// orthogonalized in blocks of `block` rows (#80), NorMuon with `beta2` when given, on a random
/// gradient from `seed`: (the gradient, the weight after the step).
fn qkvo_step(c: i64, block: i64, beta2: Option<f64>, seed: i64) -> (tch::Tensor, tch::Tensor) {
    use tch::{Device, Kind, Tensor};
    use trainer::dist::single::Single;
    use trainer::model::params::{Group, Opt, Param, Role};
    use trainer::optim::muon::Orthogonalizer;
    use trainer::optim::muon::{Muon, Section, Storage};
    let cfg = (
        Section {
            orthogonalizer: Orthogonalizer::PolarExpress,
            beta2,
            qkvo_square: true,
            ..Section::plain(0.1, 0.0)
        },
        Storage { mantissa: false, kind: Kind::Float },
    );
    tch::manual_seed(seed);
    let g = Tensor::randn([4 * c, c], (Kind::Float, Device::Cpu));
    let tensor = Tensor::zeros([4 * c, c], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let t = tensor.shallow_clone();
    let group = Group { role: Role::QkPairs(block), ..Group::new(Opt::Muon, 1.0) };
    let mut muon =
        Muon::new(vec![Param { name: "qkvo".into(), tensor, group }], &cfg.0, cfg.1).unwrap();
    (&t * &g).sum(Kind::Float).backward();
    muon.step(&mut Single, 1.0, 0.0).unwrap();
    (g, t.detach())
}

/// #80: Q and K orthogonalized per head pair (blocks of 2·head_dim rows), V and O as whole
/// matrices: one Muon step (momentum 0, no NorMuon) is −lr times each block's Polar Express.
#[test]
fn qk_head_pairs_are_orthogonalized_apart() {
    use tch::{Kind, Tensor};
    use trainer::optim::polar_express;
    let (c, block) = (8i64, 4i64); // 4 heads of 2: pairs of 4 rows
    let (g, t) = qkvo_step(c, block, None, 4);
    let pe = |x: &Tensor| polar_express::orthogonalize(x, Kind::Float, false);
    let qk = pe(&g.narrow(0, 0, 2 * c).reshape([-1, block, c])).reshape([-1, c]);
    let vo = pe(&g.narrow(0, 2 * c, 2 * c).reshape([2, c, c])).reshape([-1, c]);
    let want = Tensor::cat(&[qk, vo], 0) * -0.1;
    assert!(t.detach().allclose(&want, 1e-5, 1e-6, false));
    let whole = pe(&g.narrow(0, 0, c).reshape([1, c, c])).reshape([-1, c]) * -0.1;
    assert!(!t.detach().narrow(0, 0, c).allclose(&whole, 1e-3, 1e-3, false), "not as one Q");
}

/// #80 with NorMuon: each block's second moment is reduced along the dim its shape picks, as
/// upstream's (`-1` when rows ≥ cols, else `-2`): per column for full size's wide 256 x 768
/// Q/K pairs, per row for a square pair (here heads of 4 at C = 8: 8 x 8) and for V and O. One
/// step from zero moments scales each row (or column) of the orthogonalized block o by
/// 1/√((1−β2)·mean(o²)), then the block back to o's Frobenius norm.
#[test]
fn qk_head_pair_moments_follow_the_blocks_shape() {
    use tch::{Kind, Tensor};
    use trainer::optim::polar_express;
    let (c, block, beta2) = (8i64, 8i64, 0.95);
    let (g, t) = qkvo_step(c, block, Some(beta2), 80);
    let normalized = |x: &Tensor, dim: i64| {
        let o = polar_express::orthogonalize(x, Kind::Float, false).to_kind(Kind::Double);
        let s = o.square().mean_dim(dim, true, Kind::Double) * (1.0 - beta2);
        let scaled = &o / s.clamp_min(1e-10).sqrt();
        let frob = |t: &Tensor| {
            t.square().sum_dim_intlist([-2i64, -1].as_slice(), true, Kind::Double).sqrt()
        };
        (&scaled * (frob(&o) / frob(&scaled))).reshape([-1, c])
    };
    let qk = g.narrow(0, 0, 2 * c).reshape([-1, block, c]);
    let vo = g.narrow(0, 2 * c, 2 * c).reshape([2, c, c]);
    let want = Tensor::cat(&[normalized(&qk, -1), normalized(&vo, -1)], 0) * -0.1;
    let got = t.detach().to_kind(Kind::Double);
    assert!(got.allclose(&want, 1e-4, 1e-6, false), "square Q/K pairs: moments per row");
    let per_column = normalized(&qk, -2) * -0.1;
    assert!(!got.narrow(0, 0, 2 * c).allclose(&per_column, 1e-3, 1e-4, false), "not per column");
}

/// #73: the per-sublayer lambdas are fp32 parameters rounded to the stream's kind before they
/// scale it (upstream's `.bfloat16()`): on a bf16 stream, r_m = √1.1 scales as bf16(√1.1).
#[test]
fn parallel_residual_lambdas_scale_a_bf16_stream_as_bf16() {
    use tch::{nn, Device, Kind, Tensor};
    use trainer::model::parallel_residuals::{Inits, ParallelResiduals};
    use trainer::model::params::{Group, Opt, ParamSet};
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let g = Group::new(Opt::Adam, 1.0);
    let inits = Inits { resid: 1.1f64.sqrt(), bigram: 0.05 };
    let p = ParallelResiduals::new(&mut ps, 2, inits, (g, g));
    tch::manual_seed(73);
    let x = Tensor::randn([4, 64], (Kind::Float, Device::Cpu)).to_kind(Kind::BFloat16);
    let m = Tensor::randn([4, 64], (Kind::Float, Device::Cpu)).to_kind(Kind::BFloat16);
    let got = p.after_mlp(1, &x, &m);
    assert_eq!(got.kind(), Kind::BFloat16);
    // Each product in fp32 and rounded to bf16, then the sum rounded: the CPU's bf16 arithmetic.
    let times = |t: &Tensor, lambda: f64| (t.to_kind(Kind::Float) * lambda).to_kind(Kind::BFloat16);
    let sum = |a: Tensor, b: Tensor| {
        (a.to_kind(Kind::Float) + b.to_kind(Kind::Float)).to_kind(Kind::BFloat16)
    };
    let r32 = 1.1f64.sqrt() as f32; // the fp32 parameter
    let r_bf16 = Tensor::from(r32).to_kind(Kind::BFloat16).double_value(&[]);
    assert!(got.equal(&sum(times(&x, r_bf16), times(&m, 1.0))), "bf16(√1.1)·x + m");
    let unrounded = sum(times(&x, f64::from(r32)), times(&m, 1.0));
    assert!(!got.equal(&unrounded), "the fp32 lambda would round some products differently");
}

/// #84's schedule against its spec (§1, §3): stages from 482 and 963, the cooldown from 578
/// to 1445 with the third stage's level jumping in at 963 (0.9132 at 962, 1.0284 at 963), the
/// floor 0.15 through the extension, 896-token documents in the first stage, the untie after
/// step 963; the lab's 222 steps.
#[test]
fn record_84_schedule() {
    let s = Schedule::new(&common::record(84, Scale::Full));
    assert_eq!((s.at(481).lr_factor, s.at(482).lr_factor), (1.0, 1.52));
    assert_eq!(s.at(578).lr_factor, 1.52);
    assert!((s.at(962).lr_factor - 0.9132).abs() < 5e-5, "{}", s.at(962).lr_factor);
    assert!((s.at(963).lr_factor - 1.0284).abs() < 5e-5, "{}", s.at(963).lr_factor);
    assert_eq!((s.at(1445).lr_factor, s.at(1484).lr_factor), (0.15, 0.15));
    assert_eq!((s.at(481).max_doc_len, s.at(482).max_doc_len), (Some(896), Some(2048)));
    let untie: Vec<u64> = (0..1485).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [963]);
    assert_eq!(common::record(84, Scale::Lab).steps, 222);
}
