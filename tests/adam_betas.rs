//! Adam's betas per parameter (upstream #57 on): three of Adam's steps on records #62, #63 and
//! #84 at lab shape, every Adam parameter against a float64 Adam run with the betas upstream's
//! logged code gives its label. One step cannot tell betas apart (the bias correction cancels
//! them); three can, by far more than the fp32 rounding.
mod common;

use tch::{Kind, Tensor};
use trainer::dist::{self, RankEnv};
use trainer::model::params::{Opt, Role};
use trainer::optim::adam_every;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

/// Upstream's (β1, β2) by parameter, from the DistAdam parameter table of the logged
/// train_gpt.py (records/track_1_short/, #57's PR #190 on; see records/62.toml, 63.toml and
/// 84.toml's notes): lm_head and embed (0.5, 0.95), value embeddings and the bigram table
/// (0.75, 0.95), x0_lambdas (0.65, 0.95), every gate and the scalars (0.9, 0.99), #73's
/// per-sublayer lambdas (0.9, 0.95).
fn upstream_betas(record: u32, name: &str) -> [f64; 2] {
    let gate = name.ends_with(".gate") || name.ends_with("ve_gate") || name.ends_with("_gate");
    match name {
        "lm_head" | "embed" => [0.5, 0.95],
        n if n.starts_with("value_embeds") || n == "bigram_embed" => [0.75, 0.95],
        "x0_lambdas" if record < 84 => [0.65, 0.95],
        "resid_lambdas" | "post_lambdas" | "x0_lambdas" | "bigram_lambdas" => [0.9, 0.95],
        "scalars" => [0.9, 0.99],
        _ if gate => [0.9, 0.99],
        other => panic!("record #{record}: no upstream betas written for {other}"),
    }
}

/// A fixed gradient for `name` at `step`.
fn grad(shape: &[i64], step: u64, salt: usize) -> Tensor {
    tch::manual_seed(1000 * step as i64 + salt as i64);
    Tensor::randn(shape, (Kind::Float, tch::Device::Cpu))
}

#[test]
fn three_adam_steps_follow_each_parameters_upstream_betas() {
    for record in [62u32, 63, 84] {
        // No weight decay, so the reference is Adam alone.
        let r = common::record_with(record, "weight_decay = 0.0", Scale::Lab);
        let (_gpt, params, _vs) = common::build(&r);
        let adam_every = adam_every::every(&r);
        let adam: Vec<(String, Tensor, f64)> = params
            .iter()
            .filter(|p| matches!(p.group.opt, Opt::Adam | Opt::ScalarAdam))
            .filter(|p| p.group.role != Role::LateEmbed) // no gradient before the untie
            .map(|p| (p.name.clone(), p.tensor.detach().to_kind(Kind::Double), p.group.lr_mul))
            .collect();
        let tensors: Vec<(Tensor, Opt, Role)> =
            params.iter().map(|p| (p.tensor.shallow_clone(), p.group.opt, p.group.role)).collect();
        let mut opt = Optimizer::new(params, &r, Kind::Float).unwrap();
        let mut coll = dist::init(&RankEnv::single(), tch::Device::Cpu).unwrap();
        let schedule = Schedule::new(&r);
        // float64 Adam per parameter: (m, v, t, param), with the gradients summed over the steps
        // Adam waits (upstream #39).
        let mut reference: Vec<(Tensor, Tensor, Tensor)> =
            adam.iter().map(|(_, p, _)| (p.zeros_like(), p.zeros_like(), p.copy())).collect();
        let mut pending: Vec<Tensor> = adam.iter().map(|(_, p, _)| p.zeros_like()).collect();
        let mut t = 0;
        for step in 0..3 * adam_every {
            let plan = schedule.at(step);
            assert!(!plan.freeze_scalars && !plan.untie_after, "#{record} step {step}");
            // loss = Σ p·G: every gradient is the fixed G (the untied embedding gets none).
            let loss = tensors
                .iter()
                .enumerate()
                .filter(|(_, (_, _, role))| *role != Role::LateEmbed)
                .map(|(i, (p, _, _))| (p * grad(&p.size(), step, i)).sum(Kind::Float))
                .fold(Tensor::zeros([], (Kind::Float, tch::Device::Cpu)), |a, b| a + b);
            loss.backward();
            let mut k = 0;
            for (i, (p, o, role)) in tensors.iter().enumerate() {
                if matches!(o, Opt::Adam | Opt::ScalarAdam) && *role != Role::LateEmbed {
                    pending[k] += grad(&p.size(), step, i).to_kind(Kind::Double);
                    k += 1;
                }
            }
            opt.step(coll.as_mut(), &plan).unwrap();
            if !(step + 1).is_multiple_of(adam_every) {
                continue;
            }
            t += 1;
            for (k, ((name, _, lr_mul), (m, v, p))) in adam.iter().zip(&mut reference).enumerate() {
                let [b1, b2] = upstream_betas(record, name);
                let g = std::mem::replace(&mut pending[k], m.zeros_like());
                *m = &*m * b1 + &g * (1.0 - b1);
                *v = &*v * b2 + &g * &g * (1.0 - b2);
                let bias = (1.0 - b2.powi(t)).sqrt() / (1.0 - b1.powi(t));
                // The scalars' Adam shares the main one's lr (their betas are their own).
                let lr = r.lr * plan.lr_factor * lr_mul;
                *p = &*p - &*m / (v.sqrt() + r.eps) * (lr * bias);
            }
        }
        for (((name, start, _), (_, _, want)), i) in adam.iter().zip(&reference).zip(0..) {
            let got = opt.params().into_iter().find(|p| &p.name == name).unwrap();
            let got = got.tensor.detach().to_kind(Kind::Double);
            let (moved, err) = ((want - start).abs().max(), (&got - want).abs().max());
            let (moved, err) = (moved.double_value(&[]), err.double_value(&[]));
            assert!(moved > 0.0, "#{record} {name} never moved");
            assert!(
                err <= 1e-4 * moved,
                "#{record} {name} (#{i}): off by {err:e} of a {moved:e} move"
            );
        }
    }
}
