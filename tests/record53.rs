//! The techniques of upstream #47-#53 (record #53's span), each against hand-derived or float64
//! values, on record #53's recipe.
mod common;

use common::build;
use tch::{Device, Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::attend::Docs;
use trainer::model::params::{Group, Opt, Param, Role};
use trainer::model::{key_offset, mtp, sa_lambdas, scalars::ScalarBank, Ctx};
use trainer::optim::cautious_adam::CautiousMask;
use trainer::optim::dist_adam::{AdamConfig, DistAdam};
use trainer::optim::schedule::{self, Schedule};
use trainer::optim::{cautious_adam, normuon};
use trainer::recipe::Scale;

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).flatten(0, -1)).unwrap()
}

fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(a, b)| (a - b).abs() <= tol)
}

/// #53: spec §2.9's weights at x = step/1880: [1, 0.5, 0.25(1-3x)] below 1/3, then
/// [1, 0.5(1-(3x-1))], then [1] (plain: the head takes the weighted loss only with two or
/// more) from step 1254 through the extension.
#[test]
fn multi_token_weights_fade_by_thirds() {
    let s = Schedule::new(&common::record(53, Scale::Full));
    let x = |step: u64| step as f64 / 1880.0;
    let cases: [(u64, Vec<f64>); 7] = [
        (0, vec![1.0, 0.5, 0.25]),
        (626, vec![1.0, 0.5, 0.25 * (1.0 - 3.0 * x(626))]),
        (627, vec![1.0, 0.5 * (1.0 - (3.0 * x(627) - 1.0))]),
        (1253, vec![1.0, 0.5 * (1.0 - (3.0 * x(1253) - 1.0))]),
        (1254, vec![1.0]),
        (1880, vec![1.0]),
        (1919, vec![1.0]),
    ];
    for (step, want) in cases {
        assert_eq!(s.at(step).mtp_weights(), want.as_slice(), "step {step}");
    }
    assert!((s.at(626).mtp_weights()[2] - 0.00027).abs() < 5e-6, "spec: 0.00027 at 626");
    assert_eq!(
        schedule::mtp_weights(&[1.0, 0.5, 0.25], 2.0 / 3.0),
        [1.0],
        "x = 2/3 is the last stage"
    );
}

/// #53: Σ_t Σ_k w_k (logsumexp(z_t) - z_t[y_{t+k}]) with the offsets past the buffer's end left
/// out, against float64 loops; with the extra weights at 0 it is the summed cross-entropy.
#[test]
fn multi_token_loss_matches_a_float64_reference() {
    let (n, v) = (5i64, 7i64);
    let logits =
        (Tensor::arange(n * v, (Kind::Double, Device::Cpu)) * 0.61).sin().view([n, v]) * 3.0;
    let targets = Tensor::from_slice(&[3i64, 0, 6, 2, 5]);
    let w = [1.0, 0.5, 0.25];
    let z = values(&logits);
    let y = [3usize, 0, 6, 2, 5];
    let mut want = 0.0;
    for t in 0..n as usize {
        let row = &z[t * v as usize..(t + 1) * v as usize];
        let lse = row.iter().map(|a| a.exp()).sum::<f64>().ln();
        for (k, wk) in w.iter().enumerate().filter(|(k, _)| t + k < n as usize) {
            want += wk * (lse - row[y[t + k]]);
        }
    }
    let got = mtp::loss(&logits.to_kind(Kind::Float), &targets, &w).double_value(&[]);
    assert!((got - want).abs() < 1e-4 * want.abs(), "{got} vs {want}");

    let plain = logits.cross_entropy_loss::<Tensor>(&targets, None, tch::Reduction::Sum, -100, 0.0);
    let first = mtp::loss(&logits.to_kind(Kind::Float), &targets, &[1.0, 0.0]);
    assert!((first.double_value(&[]) - plain.double_value(&[])).abs() < 1e-4);
}

/// The weights reach the loss by fills on the device, not by a copy per micro-batch: at every
/// step of #53's schedule that uses them (two stages, each fading its last weight), the weights
/// and the loss equal, to the bit, the fp32 copy of the host's weights and the loss over it.
#[test]
fn multi_token_weights_on_the_device_are_the_copied_ones_bit_for_bit() {
    let s = Schedule::new(&common::record(53, Scale::Full));
    let (n, v) = (9i64, 11i64);
    let logits =
        (Tensor::arange(n * v, (Kind::Float, Device::Cpu)) * 0.37).sin().view([n, v]) * 4.0;
    let targets = Tensor::from_slice(&[3i64, 0, 6, 2, 5, 10, 1, 7, 4]);
    let bits = |t: &Tensor| -> Vec<u32> {
        Vec::<f32>::try_from(t.flatten(0, -1)).unwrap().iter().map(|x| x.to_bits()).collect()
    };
    let mut lengths = std::collections::BTreeSet::new();
    for step in 0..1254 {
        let plan = s.at(step);
        let w = plan.mtp_weights();
        lengths.insert(w.len());
        let copied = Tensor::from_slice(w).to_kind(Kind::Float);
        assert_eq!(bits(&mtp::on_device(w, Device::Cpu)), bits(&copied), "step {step}: {w:?}");
        // the loss as computed with the copied weights
        let k = w.len() as i64;
        let idx = targets.constant_pad_nd([0, k - 1]).unfold(0, k, 1);
        let ce = logits.logsumexp([-1], true) - logits.gather(1, &idx, false);
        let t = Tensor::arange(n, (Kind::Int64, Device::Cpu)).unsqueeze(1);
        let keep = (t + Tensor::arange(k, (Kind::Int64, Device::Cpu))).lt(n).to_kind(Kind::Float);
        let want = (ce * keep * copied).sum(Kind::Float);
        assert_eq!(bits(&mtp::loss(&logits, &targets, w)), bits(&want), "step {step}: {w:?}");
    }
    assert_eq!(lengths.into_iter().collect::<Vec<_>>(), [2, 3], "both weighted stages");
}

/// #52: the scalars' Adam pauses for 40 steps from each change of windows or batch: 627-666,
/// 1254-1293, 1880-1919 (spec §3.6); never in the untimed warmup. The lab maps 40 to 6.
#[test]
fn scalars_pause_forty_steps_from_each_stage_change() {
    let s = Schedule::new(&common::record(53, Scale::Full));
    let paused: Vec<u64> = (0..1920).filter(|&t| s.at(t).freeze_scalars).collect();
    let want: Vec<u64> = (627..667).chain(1254..1294).chain(1880..1920).collect();
    assert_eq!(paused, want);
    assert!((0..40).all(|i| !s.warmup(i).freeze_scalars));
    assert_eq!(common::record(53, Scale::Lab).scalar_adam.unwrap().freeze, Some(6));
}

fn param(name: &str, role: Role, values: Tensor) -> Param {
    let group = Group { role, ..Group::new(Opt::Adam, 1.0) };
    Param { name: name.into(), tensor: values.set_requires_grad(true), group }
}

fn set_grad(p: &Param, g: &Tensor) {
    let mut grad = p.tensor.grad();
    if !grad.defined() {
        (p.tensor.shallow_clone() * 0.0).sum(Kind::Float).backward();
        grad = p.tensor.grad();
    }
    tch::no_grad(|| grad.copy_(g));
}

/// #53: the embedding reads the head's table until step 1254 and its own after; the copy runs
/// after step 1253. Before it Adam leaves the untied table alone (no gradient); the copy takes
/// weight and moments, so from then on the same gradient moves both tables alike.
#[test]
fn the_untie_copies_the_head_and_its_adam_state() {
    let s = Schedule::new(&common::record(53, Scale::Full));
    let untie: Vec<u64> = (0..1920).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [1253]);
    assert_eq!((s.at(1253).split_embed, s.at(1254).split_embed), (false, true));

    let pattern =
        |seed: f64| (Tensor::arange(12, (Kind::Float, Device::Cpu)) + seed).sin().view([4, 3]);
    let head = param("lm_head", Role::Head, pattern(0.0));
    let embed = param("embed", Role::LateEmbed, pattern(5.0));
    let before = embed.tensor.detach().copy();
    let cfg = AdamConfig {
        lr: 0.01,
        beta1: 0.65,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.005,
        cautious: Some(CautiousMask::AboveZero),
        state: None,
    };
    let (h, e) = (head.tensor.shallow_clone(), embed.tensor.shallow_clone());
    let mut adam = DistAdam::new(vec![head, embed], cfg).unwrap();
    for seed in [1.0, 2.0] {
        set_grad(&adam.params()[0], &(pattern(seed) * 0.1));
        adam.step(&mut Single, 1.0).unwrap();
    }
    assert!(e.equal(&before), "no gradient: the untied table waits");
    adam.untie().unwrap();
    assert!(e.equal(&h));
    for seed in [3.0, 4.0] {
        let g = pattern(seed) * 0.1;
        set_grad(&adam.params()[0], &g);
        set_grad(&adam.params()[1], &g);
        adam.step(&mut Single, 1.0).unwrap();
    }
    assert!(e.equal(&h), "copied moments: the same steps");
}

/// #53 in the model: with the untied table different from the head the loss depends on which
/// one the embedding reads; once the head is copied into it, it does not.
#[test]
fn the_embedding_reads_its_own_table_after_the_split() {
    let (gpt, params, _vs) = build(&common::record(53, Scale::Lab));
    let by = |name: &str| params.iter().find(|p| p.name == name).unwrap().tensor.shallow_clone();
    let idx = (Tensor::arange(64, (Kind::Int64, Device::Cpu)) * 7).remainder(257).view([1, 64]);
    let docs = Docs::from_lengths(&[40, 24], Device::Cpu).unwrap();
    let loss = |split_embed| {
        let ctx =
            Ctx { docs: Some(docs.clone()), windows: (32, 16), split_embed, ..Default::default() };
        gpt.loss(&idx, &idx, &ctx).unwrap().double_value(&[])
    };
    assert_ne!(loss(false), loss(true));
    tch::no_grad(|| by("embed").copy_(&by("lm_head")));
    assert_eq!(loss(false), loss(true));
}

/// #50, #53: Adam's cautious decay at rate lr·wd·lr where update and weight agree in sign;
/// ">=" also decays where the update is 0, ">" does not.
#[test]
fn cautious_adam_decays_where_update_and_weight_agree() {
    let p = Tensor::from_slice(&[1.0f32, -1.0, 2.0, 3.0]);
    let u = Tensor::from_slice(&[0.1f32, 0.1, -0.1, 0.0]);
    let ge = values(&cautious_adam::step(&p, &u, 0.5, CautiousMask::AtLeastZero));
    let gt = values(&cautious_adam::step(&p, &u, 0.5, CautiousMask::AboveZero));
    assert!(close(&ge, &[1.0 - 0.1 - 0.5, -1.1, 2.1, 1.5], 1e-6), "{ge:?}");
    assert!(close(&gt, &[1.0 - 0.1 - 0.5, -1.1, 2.1, 3.0], 1e-6), "{gt:?}");
}

/// #49: the unrotated quarters of each key (dims D/4..D/2 and 3D/4..D) come from the previous
/// position, position 0 keeps its own; the rotated quarters do not move.
#[test]
fn key_offset_shifts_the_unrotated_quarters() {
    let k = Tensor::arange(24, (Kind::Float, Device::Cpu)).view([1, 3, 1, 8]);
    let got = values(&key_offset::shift_stationary(&k));
    let want: Vec<f64> = (0..3)
        .flat_map(|t| {
            (0..8).map(move |d| {
                let from =
                    if (2..4).contains(&d) || (6..8).contains(&d) { t.max(1) - 1 } else { t };
                (from * 8 + d) as f64
            })
        })
        .collect();
    assert_eq!(got, want);
}

/// #47, #48: where (sa0, sa1) act. Values: v·sa0 + ve·sa1. QKV: the weight times sa0, v + ve·sa1.
/// QKV-O: the weight times sa0, v + ve, W_O times sa1 (init 1 instead of 0.5).
#[test]
fn attention_lambdas_act_where_each_record_put_them() {
    let (v, ve, w) = (
        Tensor::from_slice(&[2.0f32]),
        Tensor::from_slice(&[3.0f32]),
        Tensor::from_slice(&[5.0f32]),
    );
    let at = |place| {
        let mut bank = ScalarBank::default();
        let l = sa_lambdas::reserve(&mut bank, 1, place)[0];
        let init: Vec<f64> = bank.layout()[0].init.iter().map(|&x| x as f64).collect();
        let b = Tensor::from_slice(&[0.25f32, 4.0]);
        let f = |t: Tensor| t.double_value(&[0]);
        (init, f(l.qkv_weight(&w, &b)), f(l.values(&v, Some(&ve), &b)), f(l.out_weight(&w, &b)))
    };
    assert_eq!(at(sa_lambdas::Place::Values), (vec![0.5, 0.5], 5.0, 0.5 + 12.0, 5.0));
    assert_eq!(at(sa_lambdas::Place::Qkv), (vec![0.5, 0.5], 1.25, 2.0 + 12.0, 5.0));
    assert_eq!(at(sa_lambdas::Place::QkvO), (vec![0.5, 1.0], 1.25, 5.0, 20.0));
}

/// #48: NorMuon's moments per row for tall matrices and (with the fix) gates; the stacked
/// [4, C, C] QKVO of #36-#47 stands for the wide layout: per column.
#[test]
fn normuon_orientation_follows_the_parameter() {
    assert_eq!(normuon::reduced_dim(&[3072, 768], false), -1);
    assert_eq!(normuon::reduced_dim(&[768, 3072], false), -2);
    assert_eq!(normuon::reduced_dim(&[4, 768, 768], false), -2);
    assert_eq!(normuon::reduced_dim(&[6, 12], false), -2);
    assert_eq!(normuon::reduced_dim(&[6, 12], true), -1, "#48: one moment per head");
}

/// #53 in full: spec §2.1's 268,665,615 parameters (the untied embedding exists from the
/// start), tall QKVO and MLP matrices, §4's 508,428,288 tokens, and the lab's 287 steps.
#[test]
fn record_53_builds_with_the_spec_parameter_count() {
    let r = common::record(53, Scale::Full);
    let (gpt, params, _vs) = build(&r);
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 268_665_615);
    let bank: usize = gpt.scalar_layout().iter().map(|e| e.init.len()).sum();
    assert_eq!(bank, 40, "spec §2.4: 36 scalars padded to 40");
    let shape = |name: &str| params.iter().find(|p| p.name == name).unwrap().tensor.size();
    assert_eq!(shape("blocks.0.attn.qkvo_w"), [3072, 768]);
    assert_eq!(shape("blocks.0.mlp.c_fc"), [3072, 768]);
    assert_eq!(shape("x0_lambdas"), [11]);
    assert!(params.iter().all(|p| p.name != "blocks.6.attn.qkvo_w"), "layer 6 has no attention");

    let s = Schedule::new(&r);
    let total: usize = (0..1920).map(|t| s.micro_tokens(24 * 2048, &s.at(t)) * 8).sum();
    assert_eq!(total, 508_428_288);
    let lab = common::record(53, Scale::Lab);
    assert_eq!(
        (
            lab.steps,
            lab.iteration_extension,
            lab.backout.map(|b| b.layer),
            lab.single_skip.map(|s| s.layers)
        ),
        (287, 6, Some(2), Some([1, 2]))
    );
}
