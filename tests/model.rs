//! The GPT of record #1: shapes, parameter count, loss at init, causality.
mod common;

use common::build;

use tch::{Device, Kind, Tensor};
use trainer::model::Ctx;
use trainer::recipe::{Recipe, Scale};

/// GPT-2 small as llm.c counts it: 124,475,904 parameters with the vocabulary padded to 50,304.
#[test]
fn full_scale_parameter_count_matches_llmc() {
    let r = Recipe::from_manifest(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")),
        Scale::Full,
        None,
    )
    .unwrap();
    let (_, params, _) = build(&r);
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 124_475_904);
    // Weight decay on 2-D tensors only: wte, wpe and 4 matrices per layer.
    assert_eq!(params.iter().filter(|p| p.group.decay).count(), 2 + 4 * 12);
}

#[test]
fn logits_have_the_padded_vocab_and_init_loss_is_uniform() {
    let r = common::lab_recipe("");
    let (gpt, _, _) = build(&r);
    let idx = Tensor::randint(r.vocab_size as i64, [2, 64], (Kind::Int64, Device::Cpu));
    let logits = gpt.forward(&idx, &Ctx::default()).unwrap();
    assert_eq!(logits.size(), [2, 64, r.padded_vocab_size as i64]);
    // Small init: predictions are near uniform over the real vocabulary. Logits are LN(x)·wte
    // with wte ~ N(0, std), so each has variance C·std², which adds about half of it to ln V.
    let targets = Tensor::randint(r.vocab_size as i64, [2, 64], (Kind::Int64, Device::Cpu));
    let loss = gpt.loss(&idx, &targets, &Ctx::default()).unwrap().double_value(&[]);
    let uniform = (r.vocab_size as f64).ln() + 0.5 * r.n_embd as f64 * r.init_std.powi(2);
    assert!((loss - uniform).abs() < 0.1, "init loss {loss} vs ln(V) + C·std²/2 = {uniform}");
}

#[test]
fn padded_embedding_rows_start_at_zero() {
    let r = common::lab_recipe("");
    let (_, params, _) = build(&r);
    let wte = &params.iter().find(|p| p.name == "embed").unwrap().tensor;
    let pad = wte.narrow(0, r.vocab_size as i64, (r.padded_vocab_size - r.vocab_size) as i64);
    assert_eq!(pad.abs().sum(Kind::Float).double_value(&[]), 0.0);
    let std = wte.narrow(0, 0, r.vocab_size as i64).std(true).double_value(&[]);
    assert!((std - 0.02).abs() < 0.002, "wte std {std}");
}

/// Changing token t+1 must leave the logits at positions <= t unchanged.
#[test]
fn attention_is_causal() {
    let r = common::lab_recipe("");
    let (gpt, _, _) = build(&r);
    let idx = Tensor::randint(r.vocab_size as i64, [1, 32], (Kind::Int64, Device::Cpu));
    let changed = idx.copy();
    let _ = changed.narrow(1, 17, 1).fill_(3);
    let _ = changed.narrow(1, 17, 1).g_add_scalar_(1); // differs from whatever was there unless it was 4
    let _ = changed.narrow(1, 17, 1).remainder_(r.vocab_size as i64);
    let (a, b) = tch::no_grad(|| {
        (
            gpt.forward(&idx, &Ctx::default()).unwrap(),
            gpt.forward(&changed, &Ctx::default()).unwrap(),
        )
    });
    let before = (a.narrow(1, 0, 17) - b.narrow(1, 0, 17)).abs().max().double_value(&[]);
    assert_eq!(before, 0.0, "positions before the change moved");
    if idx.int64_value(&[0, 17]) != changed.int64_value(&[0, 17]) {
        let after = (a.narrow(1, 17, 15) - b.narrow(1, 17, 15)).abs().max().double_value(&[]);
        assert!(after > 0.0, "positions after the change did not move");
    }
}
