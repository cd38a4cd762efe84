//! The techniques of upstream #55-#62 (record #62's span), each against hand-derived or float64
//! values.
mod common;

use tch::{nn, Device, Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::params::{Group, Groups, Opt, Param, ParamSet};
use trainer::model::scalars::ScalarBank;
use trainer::model::single_skip::SingleSkip;
use trainer::model::value_gate::ValueGate;
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::recipe::{CautiousMask, Scale};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn pattern(n: i64, seed: f64) -> Tensor {
    (Tensor::arange(n, (Kind::Double, Device::Cpu)) * 0.37 + seed).sin()
}

/// #55: v's value embedding times 2σ(h[:n]·W_veᵀ) per head and token: 1 at the zero init, and
/// against a float64 loop with a set W.
#[test]
fn value_gate_scales_each_heads_value_embedding() {
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let gate = ValueGate::new(&mut ps, "ve_gate", (2, 3), Group::new(Opt::Adam, 1.0));
    let (t, c, d) = (4i64, 5i64, 2i64);
    let h = pattern(t * c, 0.0).view([1, t, c]).to_kind(Kind::Float);
    let ve = pattern(t * 2 * d, 1.0).view([1, t, 2, d]).to_kind(Kind::Float);
    assert!(gate.apply(&h, &ve).allclose(&ve, 1e-6, 1e-6, false), "zero init: factor 1");

    let w = pattern(6, 2.0);
    let params = ps.into_params(Kind::Float);
    tch::no_grad(|| params[0].tensor.shallow_clone().copy_(&w.view([2, 3])));
    let got = Vec::<f64>::try_from(gate.apply(&h, &ve).to_kind(Kind::Double).flatten(0, -1));
    let (hv, vv, wv) = (
        Vec::<f64>::try_from(h.to_kind(Kind::Double).flatten(0, -1)).unwrap(),
        Vec::<f64>::try_from(ve.to_kind(Kind::Double).flatten(0, -1)).unwrap(),
        Vec::<f64>::try_from(w).unwrap(),
    );
    let got = got.unwrap();
    for tok in 0..t as usize {
        for head in 0..2 {
            let z: f64 = (0..3).map(|j| hv[tok * c as usize + j] * wv[head * 3 + j]).sum();
            for k in 0..d as usize {
                let i = (tok * 2 + head) * d as usize + k;
                assert!(
                    (got[i] - 2.0 * sigmoid(z) * vv[i]).abs() < 1e-6,
                    "token {tok} head {head}"
                );
            }
        }
    }
}

/// #55: the skip adds σ(λ)·2σ(x0[:n]·gᵀ)·kept; the x0 gate starts at zero, so at init the
/// skip is #54's σ(λ)·kept.
#[test]
fn skip_gate_reads_x0() {
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let mut bank = ScalarBank::default();
    let skip = SingleSkip::new(&mut bank, 11, (3, 6), -1.5, true).with_x0_gate(
        &mut ps,
        2,
        Group::new(Opt::Adam, 0.05),
    );
    let lambda = Tensor::from_slice(&[-1.5f32]);
    let x = Tensor::ones([1, 2, 3], (Kind::Float, Device::Cpu));
    let kept = &x * 3.0;
    let x0 = pattern(6, 0.5).view([1, 2, 3]).to_kind(Kind::Float);
    let at_init = skip.add(&x, &kept, &x0, &lambda);
    assert!((at_init.double_value(&[0, 1, 2]) - (1.0 + 3.0 * sigmoid(-1.5))).abs() < 1e-6);

    let params = ps.into_params(Kind::Float);
    tch::no_grad(|| {
        params[0].tensor.shallow_clone().copy_(&Tensor::from_slice(&[0.7f32, -0.4]).view([1, 2]))
    });
    let got = skip.add(&x, &kept, &x0, &lambda);
    for tok in 0..2i64 {
        let z = 0.7 * x0.double_value(&[0, tok, 0]) - 0.4 * x0.double_value(&[0, tok, 1]);
        let want = 1.0 + 3.0 * sigmoid(-1.5) * 2.0 * sigmoid(z);
        assert!((got.double_value(&[0, tok, 1]) - want).abs() < 1e-6, "token {tok}");
    }
}

/// #55: Adam's cautious decay is lr²·wd·wd_mul where update and weight agree: with a zero
/// first step's update sign equal to the weight's, two params differing only in wd_mul end
/// apart by exactly lr²·wd·(150 − 1)·p.
#[test]
fn adam_decay_scales_with_wd_mul() {
    let p0 = Tensor::from_slice(&[0.5f32, -0.25, 1.0, 2.0]);
    let param = |wd_mul: f64| {
        let group = Group { wd_mul, ..Group::new(Opt::Adam, 1.0) };
        Param { name: format!("p{wd_mul}"), tensor: p0.copy().set_requires_grad(true), group }
    };
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.5,
        beta2: 0.95,
        eps: 1e-10,
        weight_decay: 0.005,
        cautious: Some(CautiousMask::AboveZero),
        fp32_state: false,
    };
    let mut adam = DistAdam::new(vec![param(1.0), param(150.0)], cfg).unwrap();
    for p in adam.params() {
        (&p.tensor * &p0).sum(Kind::Float).backward(); // grad = p0: the update shares its sign
    }
    adam.step(&mut Single, 1.0).unwrap();
    let (a, b) = (&adam.params()[0].tensor, &adam.params()[1].tensor);
    let want = &p0 * (0.01 * 0.01 * 0.005 * 149.0);
    assert!((a - b).allclose(&want, 0.0, 4e-7, false), "{:?}", a - b); // fp32 rounding of p
}

/// #56: the attention and value-embedding gates leave Muon for Adam (lr_mul 1, decaying).
#[test]
fn gates_move_to_adam() {
    let gates = |lines: &str| {
        let r = common::record_with(54, lines, Scale::Lab);
        let (_, params, _vs) = common::build(&r);
        let gates: Vec<Opt> = params
            .iter()
            .filter(|p| p.name.ends_with("attn.gate") || p.name.ends_with("ve_gate"))
            .map(|p| p.group.opt)
            .collect();
        assert!(gates.len() >= 4, "{gates:?}");
        gates
    };
    let before = gates("ve_gate = 12");
    assert!(before.iter().all(|&o| o == Opt::Muon));
    let after = gates("ve_gate = 12\ngates_in_adam = true");
    assert!(after.iter().all(|&o| o == Opt::Adam));
    let g = Groups::new(&common::record_with(54, "gates_in_adam = true", Scale::Lab)).gate;
    assert_eq!((g.lr_mul, g.decay, g.wd_mul), (1.0, true, 1.0));
}

/// #56: Adam's moments of a bf16 parameter are fp32: the first step's m is (1 − β1)·g in fp32,
/// which a bf16 m would round.
#[test]
fn adam_moments_are_fp32() {
    let g = Tensor::from_slice(&[0.1234567f32, -0.7654321, 0.333, 1e-3]);
    let tensor = Tensor::zeros([4], (Kind::BFloat16, Device::Cpu)).set_requires_grad(true);
    let p = Param { name: "p".into(), tensor, group: Group::new(Opt::Adam, 1.0) };
    (&p.tensor.to_kind(Kind::Float) * &g).sum(Kind::Float).backward();
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-10,
        weight_decay: 0.0,
        cautious: None,
        fp32_state: true,
    };
    let mut adam = DistAdam::new(vec![p], cfg).unwrap();
    adam.step(&mut Single, 1.0).unwrap();
    let saved = adam.save(); // [t, m, v]
    assert_eq!(saved[1].kind(), Kind::Float);
    let want = g.to_kind(Kind::BFloat16).to_kind(Kind::Float) * (1.0 - 0.9); // of the bf16 grad
    assert!(saved[1].equal(&want), "{:?} vs {want:?}", saved[1]);
    assert!(!want.to_kind(Kind::BFloat16).to_kind(Kind::Float).equal(&want), "bf16 would round");
}
