//! The techniques of upstream #55-#62 (record #62's span), each against hand-derived or float64
//! values.
mod common;

use tch::{nn, Device, Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::attend::Docs;
use trainer::model::bigram_hash::BigramHash;
use trainer::model::paired_heads;
use trainer::model::params::{Group, Groups, Opt, Param, ParamSet, Role};
use trainer::model::precision::AdamState;
use trainer::model::rotary::Rotary;
use trainer::model::scalars::ScalarBank;
use trainer::model::single_skip::SingleSkip;
use trainer::model::value_gate::ValueGate;
use trainer::model::{key_offset, Ctx};
use trainer::optim::cautious_adam::CautiousMask;
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::optim::mantissa;
use trainer::optim::muon::{Muon, Section, Storage};
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

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
        state: None,
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
    let before = gates("value_gate = { channels = 12 }");
    assert!(before.iter().all(|&o| o == Opt::Muon));
    let after = gates("value_gate = { channels = 12 }\ngates_in_adam = true");
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
        state: Some(AdamState::Fp32),
    };
    let mut adam = DistAdam::new(vec![p], cfg).unwrap();
    adam.step(&mut Single, 1.0).unwrap();
    let saved = adam.save(); // [t, m, v]
    assert_eq!(saved[1].kind(), Kind::Float);
    let want = g.to_kind(Kind::BFloat16).to_kind(Kind::Float) * (1.0 - 0.9); // of the bf16 grad
    assert!(saved[1].equal(&want), "{:?} vs {want:?}", saved[1]);
    assert!(!want.to_kind(Kind::BFloat16).to_kind(Kind::Float).equal(&want), "bf16 would round");
}

/// #57: an fp32 number is its bf16 top half (truncated towards zero, not rounded) and an int16
/// bottom half; joined back it is the same bits, for normal, tiny, negative and large values.
#[test]
fn mantissa_split_and_join_round_trip() {
    let xs = [1.0f32, -1.0, 0.1, -0.3333333, 1e-38, -2.5e-40, 3.0e38, 1.0 + 2f32.powi(-20), 0.0];
    let x = Tensor::from_slice(&xs);
    let (hi, lo) = mantissa::split(&x);
    assert_eq!((hi.kind(), lo.kind()), (Kind::BFloat16, Kind::Int16));
    let hi32 = Vec::<f32>::try_from(hi.to_kind(Kind::Float)).unwrap();
    for (h, x) in hi32.iter().zip(xs) {
        assert_eq!(h.to_bits(), x.to_bits() & 0xFFFF_0000, "{x}: the top 16 bits");
        assert!(h.abs() <= x.abs(), "{x}: truncated towards zero");
    }
    let back = Vec::<f32>::try_from(mantissa::join(&hi, &lo)).unwrap();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back), bits(&xs));
}

/// #57: Muon steps far below a bf16 weight's resolution (lr 1e-4 on weights near 1, whose bf16
/// spacing is 2⁻⁷) still add up through the mantissa: the fp32 value moves as an fp32 weight's
/// would, and the bf16 weight is its truncation.
#[test]
fn muon_keeps_small_updates_of_bf16_weights() {
    let cfg = (Section::plain(1e-4, 0.0), Storage { mantissa: true, kind: Kind::Float });
    let start = (pattern(64, 0.3) * 0.01 + 1.0).view([8, 8]).to_kind(Kind::Float);
    let param = |kind: Kind| Param {
        name: format!("{kind:?}"),
        tensor: start.to_kind(kind).copy().set_requires_grad(true),
        group: Group::new(Opt::Muon, 1.0),
    };
    let (bf, fp) = (param(Kind::BFloat16), param(Kind::Float));
    let start_bf = bf.tensor.detach().copy();
    let (tb, tf) = (bf.tensor.shallow_clone(), fp.tensor.shallow_clone());
    let mut muon_bf = Muon::new(vec![bf], &cfg.0, cfg.1).unwrap();
    let mut muon_fp = Muon::new(vec![fp], &cfg.0, cfg.1).unwrap();
    tch::manual_seed(1);
    let g = Tensor::randn([8, 8], (Kind::Double, Device::Cpu)); // full rank: a stable update
    for _ in 0..20 {
        for (muon, t) in [(&mut muon_bf, &tb), (&mut muon_fp, &tf)] {
            (t.to_kind(Kind::Double) * &g).sum(Kind::Double).backward();
            muon.step(&mut Single, 1.0, 0.9).unwrap();
            let _ = t.grad().zero_();
        }
    }
    let saved = muon_bf.save(); // [buf, second, second (V, O), mantissa]
    let joined = mantissa::join(&tb, &saved[3]);
    let moved = (&joined - start_bf.to_kind(Kind::Float)).abs().max().double_value(&[]);
    assert!(moved > 3e-4, "the fp32 value moved ({moved})");
    // The bf16 start differs from the fp32 one, so compare the distance travelled.
    let (d_bf, d_fp) = (&joined - start_bf.to_kind(Kind::Float), &tf - &start);
    (&d_bf - &d_fp).abs().max().print();
    d_fp.abs().max().print();
    assert!(d_bf.allclose(&d_fp, 0.02, 2e-5, false), "{d_bf:?} vs {d_fp:?}");
    assert!(tb.to_kind(Kind::Float).equal(&mantissa::split(&joined).0.to_kind(Kind::Float)));
}

/// #57: each parameter's own betas: two Adam steps against float64, for two groups.
#[test]
fn adam_uses_each_parameters_betas() {
    let betas = [[0.5, 0.95], [0.9, 0.99]];
    let params: Vec<Param> = betas
        .iter()
        .map(|&b| Param {
            name: format!("{b:?}"),
            tensor: Tensor::zeros([3], (Kind::Float, Device::Cpu)).set_requires_grad(true),
            group: Group { betas: Some(b), ..Group::new(Opt::Adam, 1.0) },
        })
        .collect();
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.65,
        beta2: 0.95,
        eps: 1e-10,
        weight_decay: 0.0,
        cautious: None,
        state: Some(AdamState::Fp32),
    };
    let mut adam = DistAdam::new(params, cfg).unwrap();
    let grads = [[0.3, -0.2, 0.05], [-0.1, 0.4, 0.05]];
    for g in grads {
        for p in adam.params() {
            let g = Tensor::from_slice(&g).to_kind(Kind::Float);
            (&p.tensor * g).sum(Kind::Float).backward();
        }
        adam.step(&mut Single, 1.0).unwrap();
        for p in adam.params() {
            let _ = p.tensor.grad().zero_();
        }
    }
    for (p, [b1, b2]) in adam.params().iter().zip(betas) {
        let (mut m, mut v, mut x) = ([0.0f64; 3], [0.0f64; 3], [0.0f64; 3]);
        for (t, g) in grads.iter().enumerate() {
            let bias =
                (1.0 - f64::powi(b2, t as i32 + 1)).sqrt() / (1.0 - f64::powi(b1, t as i32 + 1));
            for j in 0..3 {
                m[j] = b1 * m[j] + (1.0 - b1) * g[j];
                v[j] = b2 * v[j] + (1.0 - b2) * g[j] * g[j];
                x[j] -= 0.01 * bias * m[j] / (v[j].sqrt() + 1e-10);
            }
        }
        let got = Vec::<f64>::try_from(p.tensor.to_kind(Kind::Double)).unwrap();
        for j in 0..3 {
            assert!((got[j] - x[j]).abs() < 1e-6, "{}: {got:?} vs {x:?}", p.name);
        }
    }
}

fn rotary(interleaved: bool, d: i64, len: i64) -> Rotary {
    let r = trainer::recipe::Rotary { base: 100.0, truncated: false, interleaved };
    Rotary::new(&r, d, len, Device::Cpu)
}

/// #58: adjacent dims pair up: out[2j] = cos·x[2j] + sin·x[2j+1], out[2j+1] = cos·x[2j+1] −
/// sin·x[2j] at θ = t·f_j; the same rotation as the halves' layout after moving dim 2j to j and
/// 2j + 1 to j + D/2.
#[test]
fn interleaved_rotary_pairs_adjacent_dims() {
    let (t, d) = (5i64, 8i64);
    let x = pattern(t * d, 0.2).view([1, t, 1, d]).to_kind(Kind::Float);
    let got = rotary(true, d, t).apply(&x).unwrap();
    let f: Vec<f64> = (0..d / 2).map(|j| 100f64.powf(-2.0 * j as f64 / d as f64)).collect();
    for pos in 0..t {
        for j in 0..d / 2 {
            let th = pos as f64 * f[j as usize];
            let (a, b) =
                (x.double_value(&[0, pos, 0, 2 * j]), x.double_value(&[0, pos, 0, 2 * j + 1]));
            let want = [th.cos() * a + th.sin() * b, th.cos() * b - th.sin() * a];
            for (k, w) in want.iter().enumerate() {
                let g = got.double_value(&[0, pos, 0, 2 * j + k as i64]);
                assert!((g - w).abs() < 1e-5, "t {pos} dim {}: {g} vs {w}", 2 * j + k as i64);
            }
        }
    }
    let to_halves: Vec<i64> =
        (0..d / 2).map(|j| 2 * j).chain((0..d / 2).map(|j| 2 * j + 1)).collect();
    let perm = Tensor::from_slice(&to_halves);
    let halves = rotary(false, d, t).apply(&x.index_select(3, &perm)).unwrap();
    assert!(halves.allclose(&got.index_select(3, &perm), 1e-6, 1e-6, false));
}

/// #58: paired-head attention against explicit float64 loops over the doubled sequence: head h
/// of token t is row 2t + h/(H/2), slot h mod H/2, rotated at position 2t + h mod 2; a query row
/// sees the rows of its document within `window` rows before it.
#[test]
fn paired_heads_match_an_explicit_reference() {
    let (t, h, d) = (5i64, 4i64, 4i64);
    let (window, scale) = (3i64, 0.7);
    let mk = |seed: f64| pattern(t * h * d, seed).view([1, t, h, d]).to_kind(Kind::Float);
    let (q, k, v) = (mk(0.1), mk(1.3), mk(2.9));
    let docs = Docs::from_lengths(&[3, 2], Device::Cpu).unwrap(); // tokens 0-2, 3-4
    let rot = rotary(true, d, 2 * t);
    let got = paired_heads::attention((&q, &k, &v), &rot, &docs, (window, Some(scale))).unwrap();

    let f: Vec<f64> = (0..d / 2).map(|j| 100f64.powf(-2.0 * j as f64 / d as f64)).collect();
    let rope = |x: &Tensor, tok: i64, head: i64| -> Vec<f64> {
        let pos = (2 * tok + head % 2) as f64;
        let mut out = vec![0.0; d as usize];
        for j in 0..(d / 2) as usize {
            let (a, b) = (
                x.double_value(&[0, tok, head, 2 * j as i64]),
                x.double_value(&[0, tok, head, 2 * j as i64 + 1]),
            );
            let th = pos * f[j];
            out[2 * j] = th.cos() * a + th.sin() * b;
            out[2 * j + 1] = th.cos() * b - th.sin() * a;
        }
        out
    };
    let half = h / 2;
    let head_at = |row: i64, slot: i64| (row / 2, (row % 2) * half + slot); // (token, head)
    let doc = |tok: i64| if tok < 3 { 0 } else { 1 };
    for tok in 0..t {
        for head in 0..h {
            let (row, slot) = (2 * tok + head / half, head % half);
            let qr = rope(&q, tok, head);
            let keys: Vec<i64> =
                (0..=row).filter(|&r| r + window >= row && doc(r / 2) == doc(tok)).collect();
            let scores: Vec<f64> = keys
                .iter()
                .map(|&r| {
                    let (kt, kh) = head_at(r, slot);
                    scale * qr.iter().zip(rope(&k, kt, kh)).map(|(a, b)| a * b).sum::<f64>()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            for j in 0..d {
                let want: f64 = keys
                    .iter()
                    .zip(&scores)
                    .map(|(&r, s)| {
                        let (vt, vh) = head_at(r, slot);
                        (s - max).exp() / z * v.double_value(&[0, vt, vh, j])
                    })
                    .sum();
                let g = got.double_value(&[0, tok, head, j]);
                assert!((g - want).abs() < 1e-5, "token {tok} head {head} dim {j}: {g} vs {want}");
            }
        }
    }
}

/// #61: a tall QKVO weight's Muon step is half as long with its lr factor taken from one C x C
/// matrix (1) instead of the [4C, C] (√4 = 2); an MLP matrix of the same shape keeps 2.
#[test]
fn qkvo_takes_its_square_matrices_lr() {
    let cfg = |qkvo_square| {
        (
            Section { qkvo_square, ..Section::plain(0.02, 0.0) },
            Storage { mantissa: false, kind: Kind::Float },
        )
    };
    tch::manual_seed(2);
    let g = Tensor::randn([16, 4], (Kind::Float, Device::Cpu));
    let step = |role: Role, square: bool| {
        let group = Group { role, ..Group::new(Opt::Muon, 1.0) };
        let tensor = Tensor::zeros([16, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let t = tensor.shallow_clone();
        let mut muon = Muon::new(
            vec![Param { name: "w".into(), tensor, group }],
            &cfg(square).0,
            cfg(square).1,
        )
        .unwrap();
        (&t * &g).sum(Kind::Float).backward();
        muon.step(&mut Single, 1.0, 0.95).unwrap();
        t.detach()
    };
    let (before, after) = (step(Role::Qkvo, false), step(Role::Qkvo, true));
    assert!(after.abs().max().double_value(&[]) > 0.0);
    assert!((&before * 0.5).allclose(&after, 1e-6, 1e-7, false));
    assert!(step(Role::Plain, true).equal(&step(Role::Plain, false)), "others keep √4");
}

/// The hash written out with i32 arithmetic: wrapping products, XOR, a remainder ≥ 0.
fn hash_reference(tokens: &[i64], rows: i64) -> Vec<i64> {
    let m = (rows - 1) as i32;
    let mut prev = tokens.iter().map(|&x| x as i32).collect::<Vec<_>>();
    prev[0] = m; // upstream overwrites position 0 before hashing the rest
    (0..tokens.len())
        .map(|t| match t {
            0 => m as i64,
            _ => {
                let a = 36_313i32.wrapping_mul(tokens[t] as i32);
                let b = 27_191i32.wrapping_mul(prev[t - 1]);
                (a ^ b).rem_euclid(m) as i64
            }
        })
        .collect()
}

/// #62: the hash on fixed tokens, at full scale (251,520 rows; 27191·251519 wraps in int32 at
/// position 1) and at lab scale (1,600 rows), each row of the batch its own sequence.
#[test]
fn bigram_hash_values() {
    let full = [50256i64, 13, 50256, 50000, 1, 262];
    let got = Vec::<i64>::try_from(
        BigramHash::hash(&Tensor::from_slice(&full).view([1, 6]), 251_520).flatten(0, -1),
    )
    .unwrap();
    let want = hash_reference(&full, 251_520);
    assert_eq!(got, want);
    assert_eq!(got[0], 251_519, "position 0: the reserved row");
    let a = 36_313i64 * 13;
    let b = (27_191i64 * 251_519) as i32 as i64; // wraps to a negative int32
    assert!(b < 0);
    assert_eq!(got[1], (((a as i32) ^ (b as i32)) as i64).rem_euclid(251_519));
    assert_eq!(got[2], ((36_313 * 50_256i64) ^ (27_191 * 13i64)) % 251_519);
    assert!(got.iter().all(|&h| (0..251_520).contains(&h)));

    let lab = Tensor::from_slice(&[256i64, 104, 101, 256, 7, 7, 7, 104]).view([2, 4]);
    let got = Vec::<i64>::try_from(BigramHash::hash(&lab, 1600).flatten(0, -1)).unwrap();
    let mut want = hash_reference(&[256, 104, 101, 256], 1600);
    want.extend(hash_reference(&[7, 7, 7, 104], 1600));
    assert_eq!(got, want);
    assert_eq!(got[6], ((36_313 * 7) ^ (27_191 * 7)) % 1599, "the same bigram, the same row");
    assert_ne!(got[5], got[6], "position 1 pairs with the reserved row, not with token 0");
}

/// #62 in the model: the table's gradient lands on exactly the hashed rows, and the layers'
/// weights start at 0.1 in the scalar bank, after the attention lambdas.
#[test]
fn bigram_table_learns_the_hashed_rows() {
    let r = common::record(62, Scale::Lab);
    let (gpt, params, _vs) = common::build(&r);
    let names: Vec<&str> = gpt.scalar_layout().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(&names[..4], ["resid_lambdas", "value_lambdas", "bigram_lambdas", "smear"]);
    let lambdas = gpt.scalar_layout().iter().find(|e| e.name == "bigram_lambdas").unwrap();
    assert_eq!(lambdas.init, [0.1f32; 4]);
    let table = params.iter().find(|p| p.name == "bigram_embed").unwrap();
    assert_eq!(table.tensor.size(), [1600, 256]);
    assert_eq!(
        (table.group.lr_mul, table.group.wd_mul, table.group.betas),
        (75.0, 5.0, Some([0.75, 0.95]))
    );

    let idx = (Tensor::arange(64, (Kind::Int64, Device::Cpu)) * 7).remainder(257).view([1, 64]);
    let docs = Docs::from_lengths(&[40, 24], Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (32, 16), training: true, ..Default::default() };
    gpt.loss(&idx, &idx, &ctx).unwrap().backward();
    let touched = table.tensor.grad().abs().sum_dim_intlist(1, false, Kind::Float).gt(0.0);
    let mut want = Tensor::zeros([1600], (Kind::Bool, Device::Cpu));
    let _ = want.index_fill_(0, &BigramHash::hash(&idx, 1600).flatten(0, -1), 1);
    assert!(touched.equal(&want), "the gradient is on the hashed rows only");
}

/// #62: the key offset takes dims D/2..D from the previous position (interleaved rotary's
/// unrotated half); #49-#61 took the quarters D/4..D/2 and 3D/4..D.
#[test]
fn key_offset_shifts_the_unrotated_half() {
    let k = Tensor::arange(3 * 8, (Kind::Float, Device::Cpu)).view([1, 3, 1, 8]);
    let got = key_offset::shift_second_half(&k);
    for t in 0..3i64 {
        for j in 0..8i64 {
            let from = if j >= 4 && t > 0 { t - 1 } else { t };
            assert_eq!(
                got.double_value(&[0, t, 0, j]),
                k.double_value(&[0, from, 0, j]),
                "t {t} dim {j}"
            );
        }
    }
}

/// #62's schedule from its spec: 1560 scheduled steps, stages at 520 and 1040, lr levels 1.52
/// after step 520 and 1.73 after 1040, the cooldown over the last 55% (from step 702), the
/// untie after step 1041; the lab's 240 steps keep the paired layer.
#[test]
fn record_62_schedule_and_lab_shape() {
    let s = Schedule::new(&common::record(62, Scale::Full));
    assert_eq!(s.at(520).lr_factor, 1.0);
    assert!((s.at(521).lr_factor - 1.52).abs() < 1e-12);
    assert!((s.at(701).lr_factor - 1.52).abs() < 1e-12);
    let w = |step: f64| (1.0 - step / 1560.0) / 0.55;
    assert!((s.at(702).lr_factor - (1.52 * w(702.0) + 0.1 * (1.0 - w(702.0)))).abs() < 1e-9);
    assert!((s.at(1041).lr_factor - (1.73 * w(1041.0) + 0.1 * (1.0 - w(1041.0)))).abs() < 1e-9);
    assert_eq!(s.at(1560).lr_factor, 0.1);
    let untie: Vec<u64> = (0..1600).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [1041]);
    let lab = common::record(62, Scale::Lab);
    assert_eq!((lab.steps, lab.attn_layers.as_deref()), (240, Some("SS-P")));
}
