//! The techniques of upstream #30-#38 (record #38's span), each against hand-derived or float64
//! values, on record #29's recipe with the one key added.
mod common;

use common::{build, record_with};
use tch::{nn, Device, Kind, Tensor};
use trainer::model::params::{Group, Opt, ParamSet};
use trainer::model::rotary::Rotary;
use trainer::model::scalars::ScalarBank;
use trainer::model::smear::Smear;
use trainer::model::softcap::{softcap, softcap_in};
use trainer::model::unet::UNetSkips;
use trainer::model::yarn::{grow, Yarn};
use trainer::optim::schedule::Schedule;
use trainer::optim::{newton_schulz, polar_express};
use trainer::recipe::{Recipe, Scale};

fn names(r: &Recipe) -> Vec<String> {
    build(r).1.iter().map(|p| p.name.clone()).collect()
}

/// #30: a layer without an MLP has no MLP parameters, and the others keep theirs.
#[test]
fn mlp_layers_drop_the_mlp_of_layer_0() {
    let r = record_with(29, r#"mlp_layers = "-MMMMMMMMMMM""#, Scale::Full);
    let n = names(&r);
    assert!(!n.iter().any(|n| n.starts_with("blocks.0.mlp")), "{n:?}");
    assert!(n.iter().any(|n| n.starts_with("blocks.1.mlp")));
    assert!(n.iter().any(|n| n.starts_with("blocks.0.attn")), "#30 keeps layer 0's attention");
    let lab = record_with(29, r#"mlp_layers = "-MMMMMMMMMMM""#, Scale::Lab);
    assert_eq!(lab.mlp_layers.as_deref(), Some("MMMM"), "the lab takes layers 1, 4, 7, 10");
}

/// Upstream's `(1/1024) ** torch.linspace(0, 1, 32)`, evaluated by libtorch in fp32 as upstream's
/// is, then 32 zeros. The f64 power rounded to fp32 that ours used before misses it by up to
/// a few ulps (6e-8: one bf16 ulp of the angle at position ~1,000, 0.03 rad at 262,143).
#[test]
fn truncated_rotary_frequencies_are_upstreams_fp32_powers() {
    let rot = record_with(29, "", Scale::Full).rotary.expect("#29 has rotary");
    let got = Rotary::freqs(&rot, 128);
    let steps = Tensor::linspace(0.0, 1.0, 32, (Kind::Float, Device::Cpu));
    let upstream = Vec::<f32>::try_from(&Tensor::pow_scalar(1.0 / 1024.0, &steps)).unwrap();
    assert_eq!(&got[..32], upstream.as_slice());
    assert!(got[32..].iter().all(|&f| f == 0.0), "the other 32 pairs do not turn");
    assert_eq!((got[0], got[31]), (1.0, 1.0 / 1024.0), "the ends are exact");
    let f64_rounded: Vec<f32> = (0..32).map(|j| 1024f64.powf(-(j as f64) / 31.0) as f32).collect();
    let ulps: Vec<i64> = got
        .iter()
        .zip(&f64_rounded)
        .map(|(a, b)| (a.to_bits() as i64 - b.to_bits() as i64).abs())
        .collect();
    assert!(ulps.iter().all(|&u| u <= 4), "near the exact powers: {ulps:?}");
    assert!(ulps.iter().any(|&u| u > 0), "and not the f64 powers rounded: {ulps:?}");
}

/// #31: YaRN at full scale (head dim 128, block 128) after the growths 3 -> 7 -> 11 -> 13: the
/// frequency multipliers and softmax scales of the spec (§2.3, §2.5; float64 recomputation).
#[test]
fn yarn_matches_the_spec_after_each_window_growth() {
    let rot = trainer::recipe::Rotary { base: 1024.0, truncated: true, interleaved: false };
    let cfg = trainer::model::yarn::Section { alpha: 1.0, beta: 32.0, scale_growth: 0.2 };
    let base = Rotary::freqs(&rot, 128);
    let yarn = Yarn::new(&cfg, base.clone(), (384, 0.1), (16, Device::Cpu, Kind::Float));
    let scales: Vec<f64> = [384, 896, 1408, 1664].iter().map(|&w| yarn.at(w).1).collect();
    let want = [0.1, 0.11694595720774409, 0.12751752379570258, 0.1317779884389435];
    for (got, want) in scales.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "scale {got} vs {want}");
    }
    let mult: Vec<f64> = yarn.freqs().iter().zip(&base).map(|(f, b)| (f / b) as f64).collect();
    for (j, want) in [(0, 1.0), (5, 0.7785), (10, 0.3384), (15, 0.2495), (19, 3.0 / 13.0)] {
        assert!((mult[j] - want).abs() < 1e-4, "pair {j}: {} vs {want}", mult[j]);
    }
    assert!(mult[19..32].iter().all(|m| (m - 3.0 / 13.0).abs() < 1e-6), "{mult:?}");
    assert!(yarn.freqs()[32..].iter().all(|&f| f == 0.0), "the truncated pairs stay still");
    // A smaller window resets to the base (the untimed warmup's cycle), then grows again.
    assert_eq!(yarn.at(384).1, 0.1);
    assert_eq!(yarn.freqs(), base);
    let (tables, _) = yarn.at(896);
    let x = Tensor::ones([1, 3, 1, 128], (Kind::Float, Device::Cpu));
    let y = tables.apply(&x).unwrap();
    let f1 = grow(&base, 384, 896, (1.0, 32.0))[1] as f64;
    let got = y.double_value(&[0, 2, 0, 1]);
    assert!((got - ((2.0 * f1).cos() + (2.0 * f1).sin())).abs() < 1e-5, "position 2, pair 1");
}

/// #31: the final validation runs at final_ws (13) with YaRN extended to it; training steps
/// keep the schedule.
#[test]
fn the_final_validation_extends_the_windows() {
    let r = record_with(
        29,
        "windows = { block = 128, schedule = [3, 7, 11], final_ws = 13 }",
        Scale::Full,
    );
    let s = Schedule::new(&r);
    assert_eq!((s.at(1669).windows, s.at(1669).yarn_window), ((1408, 640), 1408));
    assert_eq!((s.at(1670).windows, s.at(1670).yarn_window), ((1664, 768), 1664));
    let lab = record_with(
        29,
        "windows = { block = 128, schedule = [3, 7, 11], final_ws = 13 }",
        Scale::Lab,
    );
    assert_eq!(Schedule::new(&lab).at(250).windows, (13 * 16, 6 * 16));
}

/// #32: a gated skip adds σ(w)·skip, from the raw init -1.5 (0.1824 at the start).
#[test]
fn sigmoid_gated_skips_add_a_bounded_share() {
    let mut bank = ScalarBank::default();
    let unet = UNetSkips::new(&mut bank, (4, 4), Some(-1.5));
    let init: Vec<f32> = bank.layout()[0].init.clone();
    assert_eq!(init, [-1.5; 4]);
    let weights = Tensor::from_slice(&[-1.5f64, 0.0, 0.0, 0.0]);
    let skip = Tensor::from_slice(&[2.0f64]);
    let mut stack = Vec::new();
    unet.leave(1, &skip, &mut stack);
    let x = unet.enter(2, Tensor::from_slice(&[1.0f64]), &mut stack, &weights).unwrap();
    let want = 1.0 + 2.0 / (1.0 + 1.5f64.exp());
    assert!((x.double_value(&[0]) - want).abs() < 1e-12, "{x}");
    let r = record_with(29, "skip_gate = -1.5", Scale::Full);
    let (gpt, _, _) = build(&r);
    assert_eq!(gpt.scalar_layout()[0].init, [-1.5; 12]);
}

/// #33: the long layers see 20 blocks at the final validation while YaRN stays tuned for 13.
#[test]
fn the_final_validation_widens_the_long_windows() {
    let w = "windows = { block = 128, schedule = [3, 7, 11], final_ws = 13, final_long = 20 }";
    let s = Schedule::new(&record_with(29, w, Scale::Full));
    assert_eq!((s.at(1670).windows, s.at(1670).yarn_window), ((2560, 768), 1664));
    assert_eq!(s.at(1669).windows, (1408, 640), "training keeps the schedule");
}

/// #34: e'_t = e_t + λ·σ(e_t[:n]·W_sᵀ)·e_{t−1}, a no-op at init (λ = 0), across documents.
#[test]
fn smear_adds_a_gated_share_of_the_previous_token() {
    let vs = nn::VarStore::new(Device::Cpu);
    let mut ps = ParamSet::new(vs.root());
    let mut bank = ScalarBank::default();
    let g = Group::new(Opt::Muon, 1.0);
    let smear = Smear::new(&mut ps, &mut bank, 2, 3, g);
    assert_eq!(bank.layout()[0].init, [0.0; 3], "one scalar per layer, the first used");
    let e = Tensor::from_slice(&[1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0, 2.0, 0.0, -2.0]).view([1, 3, 3]);
    let zero = Tensor::zeros([3], (Kind::Float, Device::Cpu));
    assert!(smear.forward(&e, &zero).equal(&e), "λ = 0: exactly the embedding");
    let mut params = ps.into_params(Kind::Float);
    tch::no_grad(|| params[0].tensor.copy_(&Tensor::from_slice(&[0.5f32, -1.0]).view([1, 2])));
    let lambda = Tensor::from_slice(&[0.8f32, 0.0, 0.0]);
    let got: Vec<f32> = Vec::try_from(smear.forward(&e, &lambda).reshape([-1])).unwrap();
    let ev: Vec<f64> = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 2.0, 0.0, -2.0].to_vec();
    let sig = |z: f64| 1.0 / (1.0 + (-z).exp());
    let mut want = ev[..3].to_vec();
    for t in 1..3 {
        let gate = 0.8 * sig(0.5 * ev[3 * t] - ev[3 * t + 1]);
        want.extend((0..3).map(|c| ev[3 * t + c] + gate * ev[3 * (t - 1) + c]));
    }
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
}

/// #35: layer 0 without attention and MLP is skipped whole; the 11 layers that run pair 5 skips
/// (1->10 ... 5->6) and the last has none.
#[test]
fn an_empty_layer_is_skipped_and_the_unet_pairs_the_rest() {
    let r = record_with(
        29,
        "attn_layers = \"-SSSLSS-SSSL\"\nmlp_layers = \"-MMMMMMMMMMM\"\nskip_gate = -1.5",
        Scale::Full,
    );
    assert!(r.skips_layer(0) && !r.skips_layer(7), "layer 7 keeps its MLP");
    let mut bank = ScalarBank::default();
    let unet = UNetSkips::new(&mut bank, (12, 11), None);
    let ones = Tensor::ones([12], (Kind::Double, Device::Cpu));
    let mut stack = Vec::new();
    for k in 0..5 {
        unet.leave(k, &Tensor::from_slice(&[10f64.powi(k as i32)]), &mut stack);
    }
    unet.leave(5, &Tensor::from_slice(&[-1.0f64]), &mut stack);
    assert_eq!(stack.len(), 5, "the first five layers that run push");
    let adds: Vec<f64> = (5..11)
        .map(|k| unet.enter(k, Tensor::from_slice(&[0.0f64]), &mut stack, &ones).unwrap())
        .map(|x| x.double_value(&[0]))
        .collect();
    assert_eq!(adds, [10000.0, 1000.0, 100.0, 10.0, 1.0, 0.0], "mirrored; the last gets none");
}

/// #35: 40 extension steps at the final lr (0.10018) and windows; the clock is the 1,630
/// scheduled steps (x capped at 0.9999).
#[test]
fn the_iteration_extension_holds_the_final_lr_and_windows() {
    let r = record_with(
        29,
        "iteration_extension = 40\nlr_schedule = { kind = \"stable_decay\", cooldown_frac = 0.5 }",
        Scale::Full,
    );
    let s = Schedule::new(&r);
    let lr = |step| s.at(step).lr_factor;
    assert_eq!(lr(815), 1.0);
    assert!((lr(1629) - (0.1 + 0.9 * 2.0 / 1630.0)).abs() < 1e-12, "{}", lr(1629));
    for step in [1630, 1650, 1669] {
        assert!((lr(step) - 0.10018).abs() < 1e-12, "{step}: {}", lr(step));
    }
    assert_eq!((s.at(543).windows.0, s.at(544).windows.0), (384, 896), "x = step/1631");
    assert_eq!((s.at(1087).windows.0, s.at(1088).windows.0), (896, 1408));
    assert_eq!(s.at(1669).windows.0, 1408);
    assert_eq!(record_with(29, "iteration_extension = 40", Scale::Lab).iteration_extension, 6);
}

/// #37: training's softcap (and so its cross-entropy) stays in the logits' kind; evaluation
/// and the default cast to fp32.
#[test]
fn the_low_precision_loss_keeps_the_logits_kind_in_training_only() {
    let cap = trainer::recipe::Softcap { cap: 30.0, temperature: 7.5, shift: 0.0 };
    let z = Tensor::from_slice(&[-20.0f32, 0.0, 7.5, 50.0]).to_kind(Kind::BFloat16);
    let y = softcap_in(&z, &cap);
    assert_eq!(y.kind(), Kind::BFloat16);
    let want = [30.0 / (1.0 + (20.0f64 / 7.5).exp()), 15.0, 30.0 / (1.0 + (-1f64).exp()), 30.0];
    for (i, w) in want.iter().enumerate() {
        assert!((y.double_value(&[i as i64]) - w).abs() < 0.25, "{i}: bf16 within its rounding");
    }
    assert_eq!(softcap(&z, &cap).kind(), Kind::Float);
}

/// #38: Polar Express on a matrix with known singular values maps each through the five
/// quintics after the 1.02-cushioned Frobenius normalisation (scalar float64 arithmetic), and
/// ends closer to orthogonal than Newton–Schulz's five steps.
#[test]
fn polar_express_maps_singular_values_through_its_five_quintics() {
    let sigma = [3.0f64, 1.0, 0.2];
    let g = Tensor::zeros([3, 5], (Kind::Double, Device::Cpu));
    for (i, s) in sigma.iter().enumerate() {
        let _ = g.get(i as i64).get(i as i64).fill_(*s);
    }
    let out = polar_express::orthogonalize(&g, Kind::Double, false);
    let norm = sigma.iter().map(|s| s * s).sum::<f64>().sqrt();
    for (i, s) in sigma.iter().enumerate() {
        let mut x = s / (norm * 1.02 + 1e-6);
        for (a, b, c) in polar_express::COEFFS {
            x = a * x + b * x.powi(3) + c * x.powi(5);
        }
        let got = out.double_value(&[i as i64, i as i64]);
        assert!((got - x).abs() < 1e-12, "σ = {s}: {got} vs {x}");
    }
    assert_eq!(out.abs().sum(Kind::Double).double_value(&[]), {
        (0..3).map(|i| out.double_value(&[i, i]).abs()).sum::<f64>()
    });
    // A random [64, 256] in fp32: singular values of the result against NS5's.
    tch::manual_seed(1);
    let g = Tensor::randn([64, 256], (Kind::Float, Device::Cpu));
    let spread = |o: &Tensor| {
        let o = o.to_kind(Kind::Double);
        let s2 = Tensor::linalg_eigvalsh(&o.matmul(&o.tr()), "L"); // σ², ascending
        (s2.min().double_value(&[]).sqrt(), s2.max().double_value(&[]).sqrt())
    };
    let (lo, hi) = spread(&polar_express::orthogonalize(&g, Kind::Float, false));
    let (ns_lo, ns_hi) = spread(&newton_schulz::orthogonalize(&g, 5, Kind::Float));
    assert!(lo > 0.8 && hi < 1.2, "polar express: [{lo}, {hi}]");
    // Measured: [0.861, 1.141] against NS5's [0.682, 1.133]: the small singular values,
    // which NS5 leaves behind, come up.
    assert!(lo > ns_lo + 0.1 && hi - lo < ns_hi - ns_lo, "NS5: [{ns_lo}, {ns_hi}]");
}

/// Record #38's manifest at full scale: the spec's 268,665,636 parameters (§2.1) and 72
/// scalars; at lab scale the common rule's shapes and 6 extension steps.
#[test]
fn record_38_builds_with_the_spec_parameter_count() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/records/38.toml");
    let full = Recipe::from_manifest(std::path::Path::new(path), Scale::Full, None).unwrap();
    let (gpt, params, _) = build(&full);
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 268_665_636);
    let layout: Vec<(&str, usize)> =
        gpt.scalar_layout().iter().map(|e| (e.name.as_str(), e.init.len())).collect();
    assert_eq!(layout, [("skip", 12), ("block_lambdas", 24), ("value_lambdas", 24), ("smear", 12)]);
    assert!(!params.iter().any(|p| p.name.starts_with("blocks.0.")), "layer 0 is empty");
    let lab = Recipe::from_manifest(std::path::Path::new(path), Scale::Lab, None).unwrap();
    assert_eq!((lab.steps, lab.iteration_extension, lab.n_layer), (250, 6, 4));
    assert_eq!(lab.mlp_layers.as_deref(), Some("MMMM"));
}
