//! Record #29's model parts (recipe/techniques.rs and their files under src/model/): the math of
//! each against hand-derived values, the lab rule on #29's recipe, and the assembled model.
mod common;

use common::build;
use std::path::Path;
use tch::{nn, Device, Kind, Tensor};
use trainer::data::packed::padded_doc_slots;
use trainer::model::attend::Docs;
use trainer::model::norm::rms_norm;
use trainer::model::params::{Group, Opt, ParamSet, Storage};
use trainer::model::relu2_mlp::Relu2Mlp;
use trainer::model::rotary::Rotary;
use trainer::model::softcap::softcap;
use trainer::model::Ctx;
use trainer::optim::schedule::Schedule;
use trainer::recipe::{self, lab, Recipe, Scale, Softcap};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// libtorch's generator is global and the tests of one binary run on parallel threads: a test
/// whose numbers depend on its draws holds this while it seeds and draws.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rng() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

fn close(a: &Tensor, b: &Tensor) -> f64 {
    (a.to_kind(Kind::Double) - b.to_kind(Kind::Double)).abs().max().double_value(&[])
}

/// Head dim 8, truncated: frequencies (1, 1/base, 0, 0); pair j is (x[j], x[j + 4]) and turns
/// by -t·f_j (upstream's sign).
#[test]
fn rotary_turns_each_pair_by_hand_computed_angles() {
    let _rng = rng();
    let rot = Rotary::new(
        &recipe::Rotary { base: 1024.0, truncated: true, interleaved: false },
        8,
        16,
        Device::Cpu,
    );
    let x = Tensor::randn([1, 16, 1, 8], (Kind::Float, Device::Cpu));
    let y = rot.apply(&x).unwrap();
    let xv: Vec<f32> = Vec::try_from(x.reshape([-1])).unwrap();
    let yv: Vec<f32> = Vec::try_from(y.reshape([-1])).unwrap();
    let freqs = [1.0, 1.0 / 1024.0, 0.0, 0.0];
    for t in 0..16 {
        for (j, f) in freqs.iter().enumerate() {
            let th = t as f64 * f;
            let (x1, x2) = (xv[t * 8 + j] as f64, xv[t * 8 + j + 4] as f64);
            let want1 = x1 * th.cos() + x2 * th.sin();
            let want2 = -x1 * th.sin() + x2 * th.cos();
            assert!((yv[t * 8 + j] as f64 - want1).abs() < 1e-5, "t {t} pair {j}");
            assert!((yv[t * 8 + j + 4] as f64 - want2).abs() < 1e-5, "t {t} pair {j}");
        }
    }
    // Position 0 and the zero-frequency pairs are untouched; norms are kept.
    assert!(close(&x.narrow(1, 0, 1), &y.narrow(1, 0, 1)) < 1e-7);
    assert!(close(&x.narrow(3, 2, 2), &y.narrow(3, 2, 2)) < 1e-7);
    let long = Tensor::zeros([1, 17, 1, 8], (Kind::Float, Device::Cpu));
    assert!(rot.apply(&long).unwrap_err().to_string().contains("longer than its table (16)"));
    let norms = |t: &Tensor| t.square().sum_dim_intlist([3i64].as_slice(), false, Kind::Float);
    assert!(close(&norms(&x), &norms(&y)) < 1e-4);
}

#[test]
fn standard_rotary_uses_base_to_the_minus_two_j_over_d() {
    let _rng = rng();
    let rot = Rotary::new(
        &recipe::Rotary { base: 100.0, truncated: false, interleaved: false },
        4,
        3,
        Device::Cpu,
    );
    // Pair 1 has f = 100^(-2/4) = 0.1; at t = 2 a unit x[1] becomes (cos 0.2, -sin 0.2).
    let x = Tensor::from_slice(&[0f32, 1.0, 0.0, 0.0]).view([1, 1, 1, 4]).repeat([1, 3, 1, 1]);
    let y = rot.apply(&x).unwrap();
    let got: Vec<f32> = Vec::try_from(y.get(0).get(2).get(0)).unwrap();
    assert!(
        (got[1] as f64 - 0.2f64.cos()).abs() < 1e-6 && (got[3] as f64 + 0.2f64.sin()).abs() < 1e-6
    );
}

#[test]
fn rms_norm_divides_by_the_root_mean_square_in_fp32() {
    let x = Tensor::from_slice(&[3.0f32, -4.0, 0.0, 0.0]).view([1, 4]);
    let y = rms_norm(&x, f32::EPSILON as f64);
    let rms = (25.0f64 / 4.0 + f32::EPSILON as f64).sqrt();
    let want = Tensor::from_slice(&[3.0 / rms, -4.0 / rms, 0.0, 0.0]).view([1, 4]);
    assert!(close(&y, &want) < 1e-6);
    let bf = rms_norm(&x.to_kind(Kind::BFloat16), 1e-6);
    assert_eq!(bf.kind(), Kind::BFloat16, "returned in the input's kind");
}

#[test]
fn relu2_mlp_squares_the_positive_part_and_starts_at_zero_with_zero_proj() {
    let vs = nn::VarStore::new(Device::Cpu);
    let g = Group::new(Opt::Muon, 1.0);
    let mut ps = ParamSet::new(vs.root());
    let mlp = Relu2Mlp::new(&mut ps, "mlp", 4, 0.5, (false, false), (g, g));
    let params = ps.into_params(Kind::Float);
    let (fc, proj) = (&params[0].tensor, &params[1].tensor);
    assert_eq!((fc.size(), proj.size()), (vec![4, 16], vec![4, 16]), "both stored [C, 4C]");
    let x = Tensor::randn([2, 3, 4], (Kind::Float, Device::Cpu));
    let (xd, fd, pd) =
        (x.to_kind(Kind::Double), fc.to_kind(Kind::Double), proj.to_kind(Kind::Double));
    let h = xd.matmul(&fd);
    let want = (&h * h.gt(0.0)).square().matmul(&pd.tr());
    assert!(close(&mlp.forward(&x, true).unwrap(), &want) < 1e-5);
    let mut ps = ParamSet::new(vs.root().sub("z"));
    let zero = Relu2Mlp::new(&mut ps, "mlp", 4, 0.5, (true, false), (g, g));
    assert_eq!(zero.forward(&x, true).unwrap().abs().max().double_value(&[]), 0.0);
}

#[test]
fn softcap_is_a_shifted_tanh_inside_zero_and_cap() {
    let z = Tensor::linspace(-200.0, 200.0, 41, F64);
    let s = softcap(&z, &Softcap { cap: 30.0, temperature: 7.5, shift: 0.0 });
    assert_eq!(s.kind(), Kind::Float);
    let tanh_form = (&z / 15.0).tanh() * 15.0 + 15.0;
    assert!(close(&s, &tanh_form) < 1e-5);
    let (lo, hi) = (s.min().double_value(&[]), s.max().double_value(&[]));
    assert!(lo >= 0.0 && hi <= 30.0 && hi > 29.9 && lo < 0.1);
    let at0 = softcap(
        &Tensor::from_slice(&[0.0f32]),
        &Softcap { cap: 30.0, temperature: 7.5, shift: 0.0 },
    );
    assert_eq!(at0.double_value(&[0]), 15.0);
}

/// Spec §2.6: three equal stages of 1,670 steps, as the schedule gives the windows.
#[test]
fn window_schedule_matches_the_spec_table() {
    let s = Schedule::new(&common::record(29, Scale::Full));
    let (ws3, ws7, ws11) = ((384, 128), (896, 384), (1408, 640));
    for (step, windows) in
        [(0, ws3), (556, ws3), (557, ws7), (1113, ws7), (1114, ws11), (1670, ws11)]
    {
        assert_eq!(s.at(step).windows, windows, "step {step}");
    }
}

#[test]
fn layer_patterns_resample_to_the_centre_of_each_slice() {
    assert_eq!(lab::resample("LSSSLSS-SSSL", 4), "SL-S");
    assert_eq!(lab::resample("012......012", 4), "1..1");
    assert_eq!(lab::resample("LSSSLSS-SSSL", 12), "LSSSLSS-SSSL");
    assert_eq!(lab::resample("LS", 4), "LLSS");
}

#[test]
fn record_29_lab_recipe_follows_the_common_rule() {
    // The registry's rule for every key: step counts, layer patterns, token lengths.
    let full = common::record(29, Scale::Full);
    let lab = common::record(29, Scale::Lab);
    assert_eq!((lab.n_layer, lab.n_embd, lab.seq_len, lab.steps), (4, 256, 256, 250));
    assert_eq!(lab.attn_layers.as_deref(), Some("SL-S"));
    assert_eq!(lab.value_embed.as_ref().map(|v| v.layers.as_str()), Some("1..1"));
    assert_eq!(lab.windows.as_ref().unwrap().block, 16, "128 x 256/2048");
    assert_eq!(lab.val_seq_len, Some(16384), "capped at val_tokens");
    assert_eq!(lab.muon.as_ref().unwrap().momentum_warmup, 45, "300 x 250/1670");
    assert_eq!(lab.untimed_warmup, 4, "30 x 250/1670");
    assert_eq!(full.micro_batch(8).unwrap(), (24, 1), "49,152 tokens per rank");
    assert_eq!(full.micro_batch(1).unwrap(), (24, 8), "one GPU accumulates 8");
    assert_eq!(padded_doc_slots(24 * 2048), 256);
}

#[test]
fn bad_technique_keys_are_named() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"))
        .unwrap()
        .replace("attn_layers = \"LSSSLSS-SSSL\"", "attn_layers = \"LSSSLSS-SSS\"");
    let err = Recipe::from_manifest_str(&text, Scale::Full, None).unwrap_err().to_string();
    assert!(err.contains("attn_layers") && err.contains("12 layers"), "{err}");
}

/// Spec §2.1: 275,743,576 parameters, and the scalars' layout.
#[test]
fn full_scale_parameter_count_and_scalars_match_the_spec() {
    let _rng = rng();
    let (_, params, _) = build(&common::record(29, Scale::Full));
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 275_743_576);
    let get = |name: &str| &params.iter().find(|p| p.name == name).unwrap().tensor;
    let s: Vec<f32> = Vec::try_from(get("scalars")).unwrap();
    assert_eq!(s.len(), 64);
    assert!(s[..12].iter().all(|&x| x == 1.0), "skip weights 1");
    assert_eq!((s[12], s[13], s[34], s[35]), (1.0, 0.0, 1.0, 0.0), "block lambdas (1, 0)");
    assert!(s[36..60].iter().all(|&x| x == 0.5), "value lambdas 0.5");
    assert!(s[60..].iter().all(|&x| x == 1.0), "padding");
    assert_eq!(get("lm_head").abs().max().double_value(&[]), 0.0, "zero head");
    assert_eq!(get("blocks.0.attn.qkvo_w").get(3).abs().max().double_value(&[]), 0.0, "Wo = 0");
    let b = get("blocks.0.attn.qkvo_w").get(0).abs().max().double_value(&[]);
    assert!(b <= 0.03125 && b > 0.03, "U(+-0.03125), max {b}");
    assert!(params.iter().all(|p| !p.name.starts_with("blocks.7.attn")), "no attention in 7");
    let group = |name: &str| params.iter().find(|p| p.name == name).unwrap().group;
    let lr_mul = |name: &str| group(name).lr_mul;
    assert_eq!(
        (lr_mul("embed"), lr_mul("value_embeds.2"), lr_mul("lm_head"), lr_mul("scalars")),
        (75.0, 75.0, 1.0, 5.0)
    );
    // Tagged at creation: Muon takes exactly the matrices inside the blocks.
    for p in &params {
        let hidden = p.name.starts_with("blocks.") && p.tensor.dim() >= 2;
        assert_eq!(p.group.opt == Opt::Muon, hidden, "{}", p.name);
        assert_eq!(p.group.opt == Opt::Adam, !hidden, "{}", p.name);
    }
    assert_eq!(group("value_embeds.0").storage, Storage::Bf16OnCuda);
    assert_eq!(group("lm_head").storage, Storage::Fp32);
}

/// Each technique reserves its slice of the scalar bank; #29's layout is upstream's.
#[test]
fn record_29_scalar_layout_is_reserved_in_build_order() {
    let (gpt, _, _) = build(&common::record(29, Scale::Full));
    let layout: Vec<(&str, usize, usize)> =
        gpt.scalar_layout().iter().map(|e| (e.name.as_str(), e.at, e.init.len())).collect();
    assert_eq!(
        layout,
        [("skip", 0, 12), ("block_lambdas", 12, 24), ("value_lambdas", 36, 24), ("padding", 60, 4)]
    );
    // Without U-net and x0 lambdas only the value lambdas remain, padded to 8.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"))
        .unwrap()
        .replace("unet = true", "unet = false")
        .replace("x0_lambdas = true", "x0_lambdas = false");
    let r = Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap();
    let (gpt, _, _) = build(&r);
    let names: Vec<(&str, usize)> =
        gpt.scalar_layout().iter().map(|e| (e.name.as_str(), e.init.len())).collect();
    assert_eq!(names, [("value_lambdas", 8)]);
}

/// Tokens attend only inside their document and window; changing a token moves nothing before
/// it, nothing in other documents, and nothing more than a window (per layer) after it.
#[test]
fn documents_are_isolated_in_the_assembled_model() {
    let _rng = rng();
    let r = common::record(29, Scale::Lab);
    let (gpt, params, _) = build(&r);
    // Zero-initialised output projections would hide every path: give them values.
    tch::no_grad(|| {
        for p in &params {
            if p.name.ends_with("qkvo_w") || p.name.ends_with("c_proj") || p.name == "lm_head" {
                let _ = p.tensor.shallow_clone().uniform_(-0.05, 0.05);
            }
        }
    });
    let idx = Tensor::randint(256, [1, 64], (Kind::Int64, Device::Cpu));
    let docs = Docs::from_lengths(&[20, 30, 14], Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (8, 4), ..Default::default() };
    let changed = idx.copy();
    let _ = changed.narrow(1, 25, 1).fill_((idx.int64_value(&[0, 25]) + 1) % 256);
    let (a, b) =
        tch::no_grad(|| (gpt.forward(&idx, &ctx).unwrap(), gpt.forward(&changed, &ctx).unwrap()));
    let moved = |s: i64, n: i64| close(&a.narrow(1, s, n), &b.narrow(1, s, n));
    assert_eq!(moved(0, 25), 0.0, "before the change and the first document");
    assert_eq!(moved(50, 14), 0.0, "the third document");
    assert!(moved(25, 1) > 0.0, "the changed token itself");
}

/// Evaluation runs the head in slices past 65,536 tokens: the same mean as all logits at once.
#[test]
fn sliced_evaluation_loss_equals_the_whole() {
    let _rng = rng();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"))
        .unwrap()
        .replace("val_tokens = 16384", "val_tokens = 81920")
        .replace("max_seq_len = 256\nseq_len = 256", "max_seq_len = 2048\nseq_len = 2048");
    let r = Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap();
    assert_eq!(r.val_seq_len, Some(81920), "262,144 capped at val_tokens");
    let (gpt, _, _) = build(&r);
    let n = 72_768; // past one slice of 65,536
    let idx = Tensor::randint(256, [1, n], (Kind::Int64, Device::Cpu));
    let targets = Tensor::randint(256, [1, n], (Kind::Int64, Device::Cpu));
    let docs = Docs::from_lengths(&[30_000, 42_768], Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (48, 16), ..Default::default() };
    let (sliced, whole) = tch::no_grad(|| {
        let logits = gpt.forward(&idx, &ctx).unwrap().view([n, -1]);
        let whole = logits.cross_entropy_for_logits(&targets.view([n]));
        (gpt.loss(&idx, &targets, &ctx).unwrap(), whole)
    });
    assert!(close(&sliced, &whole) < 1e-5, "{sliced:?} vs {whole:?}");
}

/// Upstream's untimed warmup trains on real batches, then puts model, optimizer and loader back:
/// a run with it ends exactly where a run without it does.
#[test]
fn the_untimed_warmup_leaves_no_trace() {
    let _rng = rng();
    use trainer::device::Target;
    use trainer::dist::RankEnv;
    use trainer::train::{run, RunConfig};
    let dir = tempfile::tempdir().unwrap();
    // Byte documents of 40-600 tokens, each after a BOS (256).
    let mut rng = corpus::synthetic::SplitMix64(7);
    let mut tokens = Vec::new();
    while tokens.len() < 60_000 {
        tokens.push(256u16);
        let len = 40 + rng.below(560);
        tokens.extend((0..len).map(|_| rng.below(256) as u16));
    }
    let (val, train) = (dir.path().join("x_val_000000.bin"), dir.path().join("x_train_000001.bin"));
    corpus::shard::write_shard(&val, &tokens[..20_000]).unwrap();
    corpus::shard::write_shard(&train, &tokens[20_000..]).unwrap();
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"));
    let with = Recipe::from_manifest(path, Scale::Lab, Some(3)).unwrap();
    assert_eq!(with.untimed_warmup, 1, "30 of 1,670 steps on a 3-step budget");
    let mut with = with;
    with.untimed_warmup = 3;
    let without = Recipe { untimed_warmup: 0, ..with.clone() };
    let final_val = |recipe: Recipe| {
        run(&RunConfig {
            recipe,
            scale: Scale::Lab,
            record: Some(29),
            train_files: vec![train.clone()],
            val_files: vec![val.clone()],
            out: None,
            target: Target::cpu(),
            ranks: RankEnv::single(),
            header: vec![],
        })
        .unwrap()
    };
    let (a, b) = (final_val(with), final_val(without));
    assert!(a.is_finite() && a < (320f64).ln(), "it trains: {a}");
    assert_eq!(a.to_bits(), b.to_bits(), "with warmup {a}, without {b}");
}

/// The windowed attention always scales v by its learned lambda, so the scalars exist whenever
/// it does, even without value embeddings, U-net or x0 lambdas.
#[test]
fn windowed_attention_alone_has_its_value_lambdas() {
    let _rng = rng();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"))
        .unwrap()
        .replace("[recipe.value_embed]\nlayers = \"012......012\"", "")
        .replace("unet = true", "unet = false")
        .replace("x0_lambdas = true", "x0_lambdas = false");
    let r = Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap();
    assert!(r.value_embed.is_none() && !r.unet && !r.x0_lambdas);
    let (gpt, params, _) = build(&r);
    assert!(params.iter().any(|p| p.name == "scalars"));
    let idx = Tensor::randint(256, [1, 32], (Kind::Int64, Device::Cpu));
    let docs = Docs::from_lengths(&[32], Device::Cpu).unwrap();
    let ctx = Ctx { docs: Some(docs), windows: (8, 4), ..Default::default() };
    assert_eq!(gpt.forward(&idx, &ctx).unwrap().size(), [1, 32, 320]);
}
