//! Record #29's optimizers: Newton–Schulz against a float64 reference, Muon and DistAdam
//! against hand-computed steps, and the sharded steps over 1, 2, 4 and 8 TCP ranks (threads).
mod common;

use common::ranks;
use corpus::synthetic::SplitMix64;
use tch::{Device, Kind, Tensor};
use trainer::dist::{single::Single, Collectives};
use trainer::model::params::{Group, Opt, Param};
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::optim::muon::{Muon, Section, Storage};
use trainer::optim::newton_schulz::{orthogonalize, NS5};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// Uniform [-1, 1) fp32 values, the same on every thread for the same seed.
fn data(shape: &[i64], seed: u64) -> Tensor {
    let mut rng = SplitMix64(seed);
    let n = shape.iter().product::<i64>() as usize;
    let v: Vec<f32> =
        (0..n).map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32) - 1.0).collect();
    Tensor::from_slice(&v).reshape(shape)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a.to_kind(Kind::Double) - b.to_kind(Kind::Double)).abs().max().double_value(&[])
}

/// A param holding `values`, with a gradient buffer (set by `set_grad`).
fn param(name: &str, values: Tensor, lr_mul: f64) -> Param {
    let tensor = values.set_requires_grad(true);
    (&tensor * 0.0).sum(Kind::Float).backward();
    Param { name: name.into(), tensor, group: Group::new(Opt::Adam, lr_mul) }
}

/// Adam at lr 0.01, betas (0.8, 0.95), with plain weight decay.
fn adam_cfg(eps: f64, weight_decay: f64) -> AdamConfig {
    AdamConfig { lr: 0.01, beta1: 0.8, beta2: 0.95, eps, weight_decay, cautious: None, state: None }
}

fn set_grad(p: &Param, g: &Tensor) {
    tch::no_grad(|| p.tensor.grad().copy_(g));
}

/// NS5 written out in float64 on one matrix, with plain matmuls.
fn ns_reference(g: &Tensor, steps: usize) -> Tensor {
    let (a, b, c) = NS5;
    let tall = g.size()[0] > g.size()[1];
    let mut x = g.to_kind(Kind::Double);
    if tall {
        x = x.tr();
    }
    x = &x / (x.square().sum(Kind::Double).sqrt() + 1e-7);
    for _ in 0..steps {
        let gram = x.mm(&x.tr());
        x = &x * a + (&gram * b + gram.mm(&gram) * c).mm(&x);
    }
    if tall {
        x.tr()
    } else {
        x
    }
}

#[test]
fn newton_schulz_matches_float64_and_is_nearly_orthogonal() {
    for (i, shape) in [[6i64, 10], [16, 32], [12, 12]].iter().enumerate() {
        let g = data(shape, i as u64);
        let out = orthogonalize(&g, 5, Kind::Float);
        assert_eq!((out.size(), out.kind()), (shape.to_vec(), Kind::Float));
        assert!(max_diff(&out, &ns_reference(&g, 5)) < 1e-4, "{shape:?}");
        // The input's singular values are spread; NS5's land in about [0.68, 1.13].
        let (_, s, _) = out.to_kind(Kind::Double).svd(true, false);
        let (lo, hi) = (s.min().double_value(&[]), s.max().double_value(&[]));
        assert!(lo > 0.5 && hi < 1.3, "{shape:?}: singular values in [{lo}, {hi}]");
    }
    // No steps: only the Frobenius normalization.
    let norm = orthogonalize(&data(&[5, 7], 9), 0, Kind::Float).square().sum(Kind::Double);
    assert!((norm.double_value(&[]) - 1.0).abs() < 1e-5);
}

#[test]
fn newton_schulz_batches_per_matrix_and_transposes_tall_ones() {
    let g = data(&[4, 6, 10], 3) * Tensor::from_slice(&[1.0f32, 10.0, 0.1, 3.0]).view([4, 1, 1]);
    let batched = orthogonalize(&g, 5, Kind::Float);
    for k in 0..4 {
        let one = orthogonalize(&g.get(k), 5, Kind::Float);
        assert!(max_diff(&batched.get(k), &one) < 1e-6, "slice {k}: each has its own norm");
    }
    let tall = data(&[10, 6], 4);
    let out = orthogonalize(&tall, 5, Kind::Float);
    assert_eq!(out.size(), [10, 6]);
    assert!(max_diff(&out, &ns_reference(&tall, 5)) < 1e-4);
    assert!(max_diff(&out, &orthogonalize(&tall.tr(), 5, Kind::Float).tr()) < 1e-6);
    let bf16 = orthogonalize(&tall, 5, Kind::BFloat16);
    assert_eq!(bf16.kind(), Kind::BFloat16);
    assert!(max_diff(&bf16, &out) < 0.05, "bf16 runs the same iteration");
}

/// Muon's storage in these tests: fp32 parameters, fp32 arithmetic.
const FP32: Storage = Storage { mantissa: false, kind: Kind::Float };

#[test]
fn muon_two_steps_match_hand_computation() {
    let (lr, wd, mus, lrf) = (0.05, 0.1, [0.85, 0.9], [1.0, 0.5]);
    let shapes = [[4i64, 8], [8, 4]];
    let p0: Vec<Tensor> = shapes.iter().enumerate().map(|(i, s)| data(s, 10 + i as u64)).collect();
    let params = (0..2).map(|i| param(&format!("w{i}"), p0[i].copy(), 1.0 + i as f64)).collect();
    let mut opt = Muon::new(params, &Section::plain(lr, wd), FP32).unwrap();
    let mut want: Vec<Tensor> = p0.iter().map(|p| p.to_kind(Kind::Double)).collect();
    let mut bufs: Vec<Tensor> =
        shapes.iter().map(|s| Tensor::zeros(s, (Kind::Double, Device::Cpu))).collect();
    for step in 0..2 {
        let mu = mus[step];
        for (i, s) in shapes.iter().enumerate() {
            let g = data(s, 20 + 2 * step as u64 + i as u64);
            set_grad(&opt.params()[i], &g);
            let g = g.to_kind(Kind::Double);
            bufs[i] = &bufs[i] * mu + &g * (1.0 - mu);
            let u = &g * (1.0 - mu) + &bufs[i] * mu;
            // (4,8): factor 1; (8,4): max(1, 8/4)^½ = √2. lr_mul is 1 and 2.
            let factor = [1.0, 2f64.sqrt()][i] * (1.0 + i as f64);
            want[i] = &want[i] * (1.0 - lr * lrf[step] * wd)
                - ns_reference(&u, 5) * (lr * lrf[step] * factor);
        }
        opt.step(&mut Single, lrf[step], mu).unwrap();
        for (i, w) in want.iter().enumerate() {
            let d = max_diff(&opt.params()[i].tensor, w);
            assert!(d < 1e-5, "step {step} param {i}: off by {d}");
        }
    }
}

#[test]
fn dist_adam_two_steps_match_hand_computation() {
    let cfg = adam_cfg(1e-3, 0.2);
    let (p0, lr_mul, lrf) = ([0.5f64, -1.0, 2.0], 3.0, [1.0, 0.5]);
    let grads = [[1e-3f64, -2e-3, 5e-2], [-3e-3, 1e-3, 4e-2]];
    let p32: Vec<f32> = p0.iter().map(|&x| x as f32).collect();
    let mut opt =
        DistAdam::new(vec![param("scalars", Tensor::from_slice(&p32), lr_mul)], cfg).unwrap();
    let (mut p, mut m, mut v) = (p0, [0.0f64; 3], [0.0f64; 3]);
    for t in 1..=2 {
        let g32: Vec<f32> = grads[t - 1].iter().map(|&x| x as f32).collect();
        set_grad(&opt.params()[0], &Tensor::from_slice(&g32));
        opt.step(&mut Single, lrf[t - 1]).unwrap();
        let lr = 0.01 * lrf[t - 1] * lr_mul;
        let bias = (1.0 - 0.95f64.powi(t as i32)).sqrt() / (1.0 - 0.8f64.powi(t as i32));
        let mut torch_style = 0.0f64;
        for k in 0..3 {
            let g = g32[k] as f64;
            m[k] = 0.8 * m[k] + 0.2 * g;
            v[k] = 0.95 * v[k] + 0.05 * g * g;
            let decayed = p[k] * (1.0 - lr * 0.2);
            torch_style = decayed
                - lr * (m[k] / (1.0 - 0.8f64.powi(t as i32)))
                    / ((v[k] / (1.0 - 0.95f64.powi(t as i32))).sqrt() + 1e-3);
            p[k] = decayed - lr * bias * m[k] / (v[k].sqrt() + 1e-3);
        }
        let got = Vec::<f32>::try_from(&opt.params()[0].tensor).unwrap();
        for k in 0..3 {
            assert!((got[k] as f64 - p[k]).abs() < 1e-6, "t={t} [{k}]: {} vs {}", got[k], p[k]);
        }
        assert!((torch_style - p[2]).abs() > 1e-4, "the test must tell the eps placements apart");
    }
    // State lives in the param's dtype.
    let bf = param("embed", data(&[4, 2], 1).to_kind(Kind::BFloat16), 1.0);
    set_grad(&bf, &data(&[4, 2], 2));
    let mut opt = DistAdam::new(vec![bf], AdamConfig { eps: 1e-10, ..cfg }).unwrap();
    opt.step(&mut Single, 1.0).unwrap();
    assert!(opt.save()[1..].iter().all(|s| s.kind() == Kind::BFloat16));
    assert_eq!(opt.params()[0].tensor.kind(), Kind::BFloat16);
}

/// A bf16 param's moments and update are computed in fp32 and rounded once into bf16, as
/// upstream's compiled step does (rounding g·(1−β1) and g²·(1−β2) to bf16 first loses bits).
#[test]
fn dist_adam_rounds_bf16_state_once() {
    let cfg = adam_cfg(1e-10, 0.0);
    let p0 = data(&[64, 4], 3).to_kind(Kind::BFloat16);
    let (g1, g2) = (data(&[64, 4], 4), data(&[64, 4], 5));
    let mut opt = DistAdam::new(vec![param("embed", p0.copy(), 1.0)], cfg).unwrap();
    // float64 reference of "fp32 arithmetic, one rounding to bf16 per state, param and step".
    let round = |x: &Tensor| x.to_kind(Kind::BFloat16).to_kind(Kind::Double);
    let (mut m, mut v) = (Tensor::zeros([64, 4], F64), Tensor::zeros([64, 4], F64));
    let mut p = p0.to_kind(Kind::Double);
    let mut naive_m = Tensor::zeros([64, 4], (Kind::BFloat16, Device::Cpu));
    for (t, g) in [(1, &g1), (2, &g2)] {
        let gb = g.to_kind(Kind::BFloat16);
        set_grad(&opt.params()[0], &gb);
        opt.step(&mut Single, 1.0).unwrap();
        let g = gb.to_kind(Kind::Double);
        // The update reads the new moments before they are stored (rounded) as state.
        let (m_new, v_new) = (&m * 0.8 + &g * 0.2, &v * 0.95 + &g * &g * 0.05);
        let bias = (1.0 - 0.95f64.powi(t)).sqrt() / (1.0 - 0.8f64.powi(t));
        p = round(&(&p - &m_new / (v_new.sqrt() + 1e-10) * (0.01 * bias)));
        (m, v) = (round(&m_new), round(&v_new));
        naive_m = &naive_m * 0.8 + &gb * 0.2; // bf16 all the way: two extra roundings
    }
    let state = opt.save();
    let ulp = |x: &Tensor| x.abs().to_kind(Kind::Double) / 128.0 + 1e-30;
    let within = |a: &Tensor, b: &Tensor| {
        let d = (a.to_kind(Kind::Double) - b).abs();
        d.le_tensor(&ulp(b)).all().int64_value(&[]) == 1
    };
    assert!(within(&state[1], &m), "m rounded once");
    assert!(within(&state[2], &v), "v rounded once");
    assert!(within(&opt.params()[0].tensor, &p), "param rounded once");
    let exact = |a: &Tensor, b: &Tensor| {
        a.to_kind(Kind::Double)
            .eq_tensor(b)
            .to_kind(Kind::Double)
            .mean(Kind::Double)
            .double_value(&[])
    };
    let (ours, naive) = (exact(&state[1], &m), exact(&naive_m, &m));
    assert!(ours > 0.95 && naive < ours, "exact m: ours {ours}, bf16 arithmetic {naive}");
}

/// Muon groups: (4,8)×3 and (8,4)×2 (not multiples of 2 or 4: padded chunks) and (2,3,5)×1.
const MUON_SHAPES: [&[i64]; 6] = [&[4, 8], &[8, 4], &[4, 8], &[2, 3, 5], &[4, 8], &[8, 4]];
/// Adam shards dim 0 over the ranks: 8 rows split over 1, 2, 4 or 8 (upstream pads its scalars to
/// a multiple of 8 for this).
const ADAM_SHAPES: [&[i64]; 3] = [&[8, 3], &[8], &[8, 16]];

/// Params `{prefix}{i}` of `shapes`, seeded from `seed`, lr_mul 1, 1.5, 2, ...
fn params(prefix: &str, shapes: &[&[i64]], seed: u64) -> Vec<Param> {
    let p = |(i, s): (usize, &&[i64])| {
        param(&format!("{prefix}{i}"), data(s, seed + i as u64), 1.0 + 0.5 * i as f64)
    };
    shapes.iter().enumerate().map(p).collect()
}

fn optimizers() -> (Muon, DistAdam) {
    let adam = adam_cfg(1e-10, 0.05);
    let muon = Muon::new(params("m", &MUON_SHAPES, 100), &Section::plain(0.02, 0.1), FP32).unwrap();
    (muon, DistAdam::new(params("a", &ADAM_SHAPES, 200), adam).unwrap())
}

/// One step of both optimizers in upstream's order; rank `rank` of `world` holds the shared
/// grad plus an offset that averages out over the ranks.
fn step(
    opts: &mut (Muon, DistAdam),
    coll: &mut dyn Collectives,
    seed: u64,
    rank: usize,
    world: usize,
) {
    let off = rank as f64 - (world - 1) as f64 / 2.0;
    let ps = opts.1.params().iter().chain(opts.0.params());
    for (i, p) in ps.enumerate() {
        let (s, k) = (p.tensor.size(), seed * 100 + i as u64);
        set_grad(p, &(data(&s, k) + data(&s, k + 50) * off));
    }
    opts.1.step(coll, [1.0, 0.5][seed as usize % 2]).unwrap();
    opts.0.step(coll, [1.0, 0.5][seed as usize % 2], [0.85, 0.9][seed as usize % 2]).unwrap();
}

fn values(opts: &(Muon, DistAdam)) -> Vec<Tensor> {
    opts.1.params().iter().chain(opts.0.params()).map(|p| p.tensor.copy()).collect()
}

#[test]
fn one_two_four_and_eight_ranks_reach_the_same_parameters() {
    let run = |world| {
        ranks(world, 60, |rank, mut coll| {
            let mut opts = optimizers();
            for s in 0..2 {
                step(&mut opts, &mut *coll, s, rank, world);
            }
            let owned = opts.0.save().iter().filter(|b| b.numel() > 0).count();
            (values(&opts), owned)
        })
    };
    let (one, initial) = (run(1), values(&optimizers()));
    assert_eq!(one[0].1, 6, "one rank owns every momentum buffer");
    for (a, b) in one[0].0.iter().zip(&initial) {
        assert!(max_diff(a, b) > 1e-3, "the steps must move every param");
    }
    for (world, owned) in
        [(2, vec![4, 2]), (4, vec![3, 2, 1, 0]), (8, vec![3, 2, 1, 0, 0, 0, 0, 0])]
    {
        let got = run(world);
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), owned, "world {world}");
        for (rank, (vals, _)) in got.iter().enumerate() {
            for (i, (v, w)) in vals.iter().zip(&one[0].0).enumerate() {
                assert!(v.equal(&got[0].0[i]), "world {world}: ranks 0 and {rank} differ on {i}");
                let d = max_diff(v, w);
                assert!(d < 1e-6, "world {world} rank {rank} param {i}: off by {d}");
            }
        }
    }
}

#[test]
fn bad_shapes_are_refused_by_name() {
    let errs = ranks(2, 60, |_, mut coll| {
        // 1,200 entries: sharded by rows (tensors under 1,024 are all-reduced whole, #52).
        let p = param("lm_head.weight", data(&[3, 400], 1), 1.0);
        set_grad(&p, &data(&[3, 400], 2));
        let cfg = adam_cfg(1e-10, 0.0);
        let mut opt = DistAdam::new(vec![p], cfg).unwrap();
        opt.step(&mut *coll, 1.0).unwrap_err().to_string()
    });
    for e in errs {
        assert!(e.contains("lm_head.weight") && e.contains("not divisible by the 2 ranks"), "{e}");
    }
    let err =
        Muon::new(vec![param("scalars", data(&[64], 0), 1.0)], &Section::plain(0.05, 0.0), FP32);
    assert!(err.err().unwrap().to_string().contains("scalars"));
    let err = DistAdam::new(vec![param("lambda", Tensor::from(1.0f32), 1.0)], adam_cfg(1e-10, 0.0));
    assert!(err.err().unwrap().to_string().contains("lambda"));
}

#[test]
fn restoring_state_undoes_warmup_steps() {
    let mut straight = optimizers();
    for s in 0..2 {
        step(&mut straight, &mut Single, s, 0, 1);
    }
    let mut warmed = optimizers();
    // Upstream: save, run untimed warmup steps, restore; here once before step 0, once mid-run.
    for s in 0..2 {
        let (params, muon, adam) = (values(&warmed), warmed.0.save(), warmed.1.save());
        for junk in 0..3 {
            step(&mut warmed, &mut Single, 7 + junk, 0, 1);
        }
        let ps = warmed.1.params().iter().chain(warmed.0.params());
        tch::no_grad(|| ps.zip(&params).for_each(|(p, v)| p.tensor.shallow_clone().copy_(v)));
        warmed.0.restore(&muon).unwrap();
        warmed.1.restore(&adam).unwrap();
        step(&mut warmed, &mut Single, s, 0, 1);
    }
    for (a, b) in values(&warmed).iter().zip(&values(&straight)) {
        assert!(a.equal(b), "restore must give back the exact state");
    }
    assert!(warmed.0.restore(&[]).is_err() && warmed.1.restore(&[]).is_err());
}

/// #52: a tensor under 1,024 entries is all-reduced and updated whole on every rank, so its rows
/// need not divide by the ranks: two ranks with different gradients end where one rank with
/// their mean does.
#[test]
fn small_tensors_are_all_reduced_whole() {
    let cfg = adam_cfg(1e-10, 0.0);
    // Rank r's gradient, or (mean) the mean of the two ranks' gradients.
    let grad = |rank: usize, mean: bool| match mean {
        true => (data(&[3, 2], 2) + data(&[3, 2], 3)) / 2.0,
        false => data(&[3, 2], 2 + rank as u64),
    };
    let run = |world, mean| {
        ranks(world, 60, move |rank, mut coll| {
            let p = param("smear_gate", data(&[3, 2], 1), 1.0);
            let mut opt = DistAdam::new(vec![p], cfg).unwrap();
            for _ in 0..2 {
                set_grad(&opt.params()[0], &grad(rank, mean));
                opt.step(&mut *coll, 1.0).unwrap();
            }
            opt.params()[0].tensor.detach().copy()
        })
    };
    let (two, one) = (run(2, false), run(1, true));
    for p in &two {
        assert!(p.equal(&two[0]), "the ranks agree");
        assert!(max_diff(p, &one[0]) < 1e-6, "the mean gradient's step");
    }
}
