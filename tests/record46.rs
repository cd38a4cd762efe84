//! The techniques of upstream #39-#46 (record #46's span), each against hand-derived or float64
//! values, on record #29's recipe with the keys added.
mod common;

use common::{build, record_with};
use tch::{Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::attend::Docs;
use trainer::model::params::Group;
use trainer::model::params::{Opt, Param};
use trainer::model::{Ctx, Gpt};
use trainer::optim::muon::{Muon, Orthogonalizer, Section, Storage};
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::optim::{cautious_wd, normuon};
use trainer::recipe::Scale;

fn adam_values(opt: &Optimizer) -> Vec<Tensor> {
    let adam = opt.params().into_iter().filter(|p| p.group.opt == Opt::Adam);
    adam.map(|p| p.tensor.detach().copy()).collect()
}

/// A fixed tensor of `shape` that depends on `seed` and draws nothing from the global RNG (the
/// tests of a binary run in parallel threads and share it): scale·sin(0.37·i + seed).
fn pattern(shape: &[i64], seed: f64, scale: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    let i = Tensor::arange(n, (Kind::Float, tch::Device::Cpu));
    ((i * 0.37 + seed).sin() * scale).view(shape)
}

/// Sets every parameter's gradient to (or, `add`, adds) the pattern of `seed`.
fn grads(opt: &Optimizer, seed: f64, add: bool) {
    for p in opt.params() {
        let g = pattern(&p.tensor.size(), seed, 1e-2).to_kind(p.tensor.kind());
        let mut grad = p.tensor.grad();
        if !grad.defined() {
            // A backward defines it.
            (p.tensor.shallow_clone() * 0.0).sum(Kind::Float).backward();
            grad = p.tensor.grad();
        }
        tch::no_grad(|| {
            if add {
                let _ = grad.f_add_(&g).unwrap();
            } else {
                grad.copy_(&g);
            }
        });
    }
}

/// Fills every parameter but the scalar bank with the pattern of `seed` (scale 0.05), so two
/// builds are equal whatever other threads drew.
fn fill(params: &[Param], seed: f64) {
    for (k, p) in params.iter().enumerate().filter(|(_, p)| p.name != "scalars") {
        let v = pattern(&p.tensor.size(), seed + k as f64, 0.05).to_kind(p.tensor.kind());
        tch::no_grad(|| p.tensor.shallow_clone().copy_(&v));
    }
}

/// #39: Adam waits on even steps, keeping its gradients, and on the odd step updates from the
/// sum of both steps' gradients, as one Adam step (t = 1) on that sum would.
#[test]
fn adam_steps_on_odd_steps_from_two_steps_of_gradients() {
    let every_2 = record_with(29, "adam_every = 2", Scale::Lab);
    let every_1 = record_with(29, "", Scale::Lab);
    let (_m, params, _vs) = build(&every_2);
    fill(&params, 0.0);
    let mut opt = Optimizer::new(params, &every_2, Kind::Float).unwrap();
    let (_m1, params1, _vs1) = build(&every_1);
    fill(&params1, 0.0);
    let mut one = Optimizer::new(params1, &every_1, Kind::Float).unwrap();
    let (s2, s1) = (Schedule::new(&every_2), Schedule::new(&every_1));
    let before = adam_values(&opt);
    let mut coll = Single;

    grads(&opt, 1.0, false);
    opt.step(&mut coll, &s2.at(0)).unwrap();
    for (a, b) in adam_values(&opt).iter().zip(&before) {
        assert!(a.equal(b), "Adam must not step on step 0");
    }
    let adam = opt.params().into_iter().find(|p| p.group.opt == Opt::Adam).unwrap();
    assert!(adam.tensor.grad().abs().sum(Kind::Double).double_value(&[]) > 0.0, "grads kept");
    let muon = opt.params().into_iter().find(|p| p.group.opt == Opt::Muon).unwrap();
    assert_eq!(muon.tensor.grad().abs().sum(Kind::Double).double_value(&[]), 0.0);

    grads(&opt, 2.0, true);
    opt.step(&mut coll, &s2.at(1)).unwrap();
    grads(&one, 1.0, false);
    grads(&one, 2.0, true);
    assert_eq!(s1.at(0).lr_factor, s2.at(1).lr_factor);
    one.step(&mut coll, &s1.at(0)).unwrap();
    for (a, b) in adam_values(&opt).iter().zip(&adam_values(&one)) {
        assert!(a.allclose(b, 1e-6, 1e-7, false), "Adam's step on the summed gradients");
    }
}

/// Sets scalar-bank entry `name`'s first value.
fn set_scalar(gpt: &Gpt, params: &[Param], name: &str, v: f64) {
    let at = gpt.scalar_layout().iter().find(|e| e.name == name).unwrap().at;
    let bank = params.iter().find(|p| p.name == "scalars").unwrap();
    let _ = tch::no_grad(|| bank.tensor.shallow_clone().get(at as i64).fill_(v));
}

/// #40: the final hidden state is x − λ·(layer k's output): with λ = 1 and k the last layer
/// nothing is left, so every logit is the softcap of 0, 30·σ(0) = 15; with λ = 0 the model is
/// the one without backout. The bank is upstream's 64: smear's slot, then backout's.
#[test]
fn backout_takes_back_a_share_of_a_layer_output() {
    assert_eq!(
        record_with(29, "backout = { layer = 8 }", Scale::Full).backout.map(|b| b.layer),
        Some(8)
    );
    assert_eq!(
        record_with(29, "backout = { layer = 8 }", Scale::Lab).backout.map(|b| b.layer),
        Some(2),
        "layer 8 of 12 -> 2 of 4"
    );
    let full = build(&record_with(
        29,
        "backout = { layer = 8 }\nsmear = { gate_channels = 12 }",
        Scale::Full,
    ))
    .0;
    let layout: Vec<(&str, usize)> =
        full.scalar_layout().iter().map(|e| (e.name.as_str(), e.init.len())).collect();
    let smear = layout.iter().position(|(n, _)| *n == "smear").unwrap();
    assert_eq!(layout[smear..smear + 2], [("smear", 1), ("backout", 1)]);
    assert_eq!(layout.iter().map(|e| e.1).sum::<usize>(), 64, "upstream #40: 72 -> 64 scalars");

    let idx =
        (Tensor::arange(64, (Kind::Int64, tch::Device::Cpu)) * 7).remainder(257).view([1, 64]);
    let docs = Docs::from_lengths(&[40, 24], tch::Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (32, 16), ..Default::default() };
    let logits = |backout: &str, lambda: Option<f64>| {
        let (gpt, params, _vs) = build(&record_with(29, backout, Scale::Lab));
        fill(&params, 7.0);
        if let Some(v) = lambda {
            set_scalar(&gpt, &params, "backout", v);
        }
        gpt.forward(&idx, &ctx).unwrap()
    };
    let flat = logits("backout = { layer = 11 }", Some(1.0)); // lab layer 3, the last
    assert!(flat.allclose(&flat.full_like(15.0), 0.0, 1e-4, false), "nothing left: 30·σ(0)");
    let plain = logits("", None);
    assert!(logits("backout = { layer = 8 }", Some(0.0)).allclose(&plain, 1e-6, 1e-6, false));
    let half = logits("backout = { layer = 8 }", None);
    assert!(!half.allclose(&plain, 1e-3, 1e-3, false), "λ = 0.5 changes the output");
}

/// #41: two NorMuon steps against a float64 reference written out per column: the second
/// moment is the β2-average of each column's mean square, every column is divided by its root,
/// and the matrix keeps its Frobenius norm. Tall matrices keep one moment per row.
#[test]
fn normuon_normalizes_each_column_by_its_running_second_moment() {
    let (m, r, c) = (2usize, 3usize, 5usize);
    let shape = [m as i64, r as i64, c as i64];
    let (v1, v2) = (pattern(&shape, 0.5, 1.0), pattern(&shape, 2.0, 0.3));
    let dim = normuon::reduced_dim(&shape, false);
    let mut s = normuon::second_moment(&shape, dim);
    assert_eq!(s.size(), [2, 1, 5]);
    let _ = normuon::normalize(&v1, &mut s, 0.95, dim);
    let out = normuon::normalize(&v2, &mut s, 0.95, dim);

    let flat = |t: &Tensor| Vec::<f64>::try_from(t.to_kind(Kind::Double).flatten(0, -1)).unwrap();
    let (a, b, got) = (flat(&v1), flat(&v2), flat(&out));
    let at = |x: &[f64], k: usize, i: usize, j: usize| x[(k * r + i) * c + j];
    for k in 0..m {
        let ms =
            |x: &[f64], j: usize| (0..r).map(|i| at(x, k, i, j).powi(2)).sum::<f64>() / r as f64;
        let second: Vec<f64> =
            (0..c).map(|j| 0.95 * (0.05 * ms(&a, j)) + 0.05 * ms(&b, j)).collect();
        let scaled = |i: usize, j: usize| at(&b, k, i, j) / second[j].sqrt();
        let norm = |f: &dyn Fn(usize, usize) -> f64| {
            (0..r)
                .flat_map(|i| (0..c).map(move |j| (i, j)))
                .map(|(i, j)| f(i, j).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let ratio = norm(&|i, j| at(&b, k, i, j)) / norm(&scaled);
        for i in 0..r {
            for j in 0..c {
                let want = scaled(i, j) * ratio;
                assert!(
                    (at(&got, k, i, j) - want).abs() < 1e-5 * want.abs().max(1.0),
                    "{k} {i} {j}"
                );
            }
        }
    }
    let tall = normuon::reduced_dim(&[4, 2], false);
    assert_eq!(normuon::second_moment(&[4, 2], tall).size(), [4, 1], "tall: one moment per row");
}

/// #42: c_fc steps at twice Muon's lr; the 40 extension steps run at the lr floor and at the
/// final validation's ws 13 (YaRN with it), the final validation still widens the long layers.
#[test]
fn the_extension_runs_at_the_floor_and_the_final_windows() {
    let r = record_with(
        29,
        "lr_mul = { embed = 75.0, head = 1.0, scalars = 5.0, c_fc = 2.0 }
steps = 2160
iteration_extension = 40
extension_final = true
windows = { block = 128, schedule = [3, 7, 11], final_ws = 13, final_long = 20 }
lr_schedule = { kind = \"stable_decay\", cooldown_frac = 0.5 }",
        Scale::Full,
    );
    let params = build(&record_with(
        29,
        "lr_mul = { embed = 75.0, head = 1.0, scalars = 5.0, c_fc = 2.0 }",
        Scale::Lab,
    ))
    .1;
    let mul = |name: &str| params.iter().find(|p| p.name == name).unwrap().group.lr_mul;
    assert_eq!((mul("blocks.1.mlp.c_fc"), mul("blocks.1.mlp.c_proj")), (2.0, 1.0));

    let s = Schedule::new(&r);
    let last = s.at(2119);
    assert_eq!((last.windows, last.yarn_window), ((1408, 640), 1408));
    assert!((last.lr_factor - (0.1 + 0.9 * 2.0 * (1.0 / 2120.0))).abs() < 1e-12);
    for step in [2120, 2140, 2159] {
        let p = s.at(step);
        assert_eq!((p.windows, p.yarn_window, p.lr_factor), ((1664, 768), 1664, 0.1), "{step}");
    }
    let fin = s.at(2160);
    assert_eq!((fin.windows, fin.yarn_window), ((2560, 768), 1664));
}

/// #43: decay only where the update and the weight agree in sign, by hand; in Muon the rate is
/// eff_lr·lr·wd, the square of the schedule: a zero gradient orthogonalizes to a zero update,
/// which agrees with every entry, so the weights shrink by exactly 1 − rate.
#[test]
fn cautious_weight_decay_spares_entries_the_update_grows() {
    let mut p = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0]).view([2, 2]);
    let update = Tensor::from_slice(&[0.5f32, 0.5, -0.5, -0.5]).view([2, 2]);
    cautious_wd::step(&mut p, &update, 0.1).unwrap();
    let want = Tensor::from_slice(&[1.0f32 - 0.5 - 0.1, -2.5, 3.5, -4.0 + 0.5 + 0.4]).view([2, 2]);
    assert!(p.allclose(&want, 1e-6, 1e-7, false), "{p}");

    let group = Group::new(Opt::Muon, 2.0);
    let w = pattern(&[4, 8], 0.3, 1.0);
    let tensor = w.copy().set_requires_grad(true);
    (&tensor * 0.0).sum(Kind::Float).backward(); // a zero gradient
    let param = Param { name: "w".into(), tensor: tensor.shallow_clone(), group };
    let cfg = (
        Section {
            orthogonalizer: Orthogonalizer::PolarExpress,
            beta2: Some(0.95),
            cautious_wd: true,
            ..Section::plain(0.02, 1.2)
        },
        Storage { mantissa: false, kind: Kind::Float },
    );
    let mut muon = Muon::new(vec![param], &cfg.0, cfg.1).unwrap();
    muon.step(&mut Single, 0.5, 0.95).unwrap();
    let (lr, eff_lr) = (0.02 * 0.5, 0.02 * 0.5 * 2.0);
    let want = &w * (1.0 - eff_lr * lr * 1.2);
    let diff = (tensor.detach() - &want).abs().max().double_value(&[]);
    assert!(diff < 1e-6, "{diff}");
}

/// #45: layer 4's output joins layer 7's input through σ(skip[7 − 6]) (lab: 1 -> 2 through
/// skip[0]); with that weight at −30 the model is the one without skips, and the other skip
/// slots do nothing. Block lambdas start at (1.1, 0).
#[test]
fn a_single_gated_skip_replaces_the_unet() {
    let skip =
        "unet = false\nsingle_skip = { layers = [4, 7] }\nskip_gate = -1.5\nblock_lambda_init = 1.1";
    let lab = record_with(29, skip, Scale::Lab);
    assert_eq!(lab.single_skip.map(|s| s.layers), Some([1, 2]));
    let idx =
        (Tensor::arange(64, (Kind::Int64, tch::Device::Cpu)) * 5).remainder(257).view([1, 64]);
    let docs = Docs::from_lengths(&[30, 34], tch::Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (32, 16), ..Default::default() };
    let logits = |lines: &str, slot: Option<(i64, f64)>| {
        let (gpt, params, _vs) = build(&record_with(29, lines, Scale::Lab));
        fill(&params, 11.0);
        let layout = gpt.scalar_layout();
        let lambdas = layout.iter().find(|e| e.name == "block_lambdas").unwrap();
        assert_eq!(lambdas.init[..2], [1.1, 0.0]);
        if let Some((k, v)) = slot {
            let at = layout.iter().find(|e| e.name == "skip").unwrap().at as i64 + k;
            let bank = params.iter().find(|p| p.name == "scalars").unwrap();
            let _ = tch::no_grad(|| bank.tensor.shallow_clone().get(at).fill_(v));
        }
        gpt.forward(&idx, &ctx).unwrap()
    };
    let none = logits("unet = false\nblock_lambda_init = 1.1", None);
    let closed = logits(skip, Some((0, -30.0)));
    assert!(closed.allclose(&none, 1e-5, 1e-5, false), "a closed gate is no skip");
    let open = logits(skip, None);
    assert!(!open.allclose(&none, 1e-3, 1e-3, false), "σ(-1.5) of layer 1's output");
    assert!(logits(skip, Some((1, -30.0))).allclose(&open, 0.0, 0.0, false), "slot 1 is unused");

    let x = Tensor::ones([1, 2, 3], (Kind::Float, tch::Device::Cpu));
    let mut bank = trainer::model::scalars::ScalarBank::default();
    let s = trainer::model::single_skip::SingleSkip::new(&mut bank, 12, (4, 7), -1.5, false);
    let mut w = [0.0f32; 12];
    w[1] = 2.0; // slot 7 - 6
    let got = s.add(&x, &(&x * 3.0), &x, &Tensor::from_slice(&w));
    let want = 1.0 + 3.0 / (1.0 + (-2.0f64).exp());
    assert!((got.double_value(&[0, 1, 2]) - want).abs() < 1e-6);
}

/// #46: the batch grows on the windows' stages (spec §4: 131,072 -> 262,144 -> 393,216 tokens
/// at 707 and 1414, 571,342,848 in all), the lr's stable level with it (1.51 from step 700,
/// 1.93 from 1400, already in the cooldown: 0.97188 -> 1.23002; 0.10157 at 2119), and the
/// momentum cools to 0.852 at step 2159. The lab keeps the shares: 688, 1,360, 2,048 tokens.
#[test]
fn the_batch_and_the_lr_grow_with_the_windows() {
    let r = common::record(46, Scale::Full);
    let s = Schedule::new(&r);
    let micro = |step| s.micro_tokens(24 * 2048, &s.at(step));
    let bounds: Vec<(u64, usize)> =
        [0, 706, 707, 1413, 1414, 2119, 2120, 2159].iter().map(|&t| (t, micro(t))).collect();
    let want = [16384, 16384, 32768, 32768, 49152, 49152, 49152, 49152];
    assert_eq!(bounds.iter().map(|b| b.1).collect::<Vec<_>>(), want, "{bounds:?}");
    let total: usize = (0..2160).map(|t| micro(t) * 8).sum();
    assert_eq!(total, 571_342_848);
    assert_eq!(s.at(707).windows, (896, 384));
    assert_eq!(s.at(1414).windows, (1408, 640));

    let lr = |step| s.at(step).lr_factor;
    assert_eq!((lr(0), lr(699), lr(700), lr(953)), (1.0, 1.0, 1.51, 1.51));
    for (step, want) in [(1399, 0.97188), (1400, 1.23002), (2119, 0.10157)] {
        assert!((lr(step) - want).abs() < 5e-6, "step {step}: {}", lr(step));
    }
    assert_eq!((lr(2120), lr(2159)), (0.1, 0.1));
    assert!((s.at(2159).momentum.unwrap() - 0.852).abs() < 1e-12);

    // The untimed warmup: 10 steps at each (ws, bs), the extension's last.
    let stage = |i| {
        let p = s.warmup(i);
        (p.windows.0, s.micro_tokens(24 * 2048, &p))
    };
    assert_eq!([stage(0), stage(9)], [(384, 16384); 2]);
    assert_eq!([stage(10), stage(20), stage(39)], [(896, 32768), (1408, 49152), (1664, 49152)]);

    let lab = common::record(46, Scale::Lab);
    let ls = Schedule::new(&lab);
    assert_eq!(ls.stage_micro_tokens(2048), [688, 1360, 2048]);
    assert_eq!((lab.steps, lab.untimed_warmup, lab.iteration_extension), (323, 6, 6));
}

/// #46 in full: upstream's parameter count (spec §2.1: 268,665,628, 8 fewer scalars than #38).
#[test]
fn record_46_builds_with_the_spec_parameter_count() {
    let (_gpt, params, _vs) = build(&common::record(46, Scale::Full));
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 268_665_628);
}
