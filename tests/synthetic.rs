//! End-to-end training on a Markov chain with a known entropy rate: the val loss must approach
//! the floor (a broken causal mask, target shift or loss reduction shows up here) and end far
//! below the unigram entropy (what a model that ignores context would reach).
mod common;

use corpus::synthetic::{entropy_rate, generate, unigram_entropy, MarkovSpec};
use trainer::device::Target;
use trainer::recipe::Scale;
use trainer::train::{run, RunConfig};

#[test]
fn short_run_approaches_the_entropy_rate() {
    let spec = MarkovSpec { vocab: 64, successors: 4, alpha: 1.0, seed: 11 };
    let (h, unigram) = (entropy_rate(&spec), unigram_entropy(&spec));
    let dir = tempfile::tempdir().unwrap();
    let tokens = generate(&spec, 300_000);
    let (val, train) = tokens.split_at(40_000);
    let val_file = dir.path().join("syn_val_000000.bin");
    let train_file = dir.path().join("syn_train_000001.bin");
    corpus::shard::write_shard(&val_file, val).unwrap();
    corpus::shard::write_shard(&train_file, train).unwrap();

    let recipe = common::lab_recipe(
        "vocab_size = 64\npadded_vocab_size = 64\nn_layer = 2\nn_head = 2\nn_embd = 64\n\
         seq_len = 32\nmax_seq_len = 32\nbatch_rows = 16\nbatch_tokens = 512\nsteps = 300\n\
         val_every = 100\nval_tokens = 8192\nlr = 3e-3",
    );
    let out = dir.path().join("run");
    let cfg = RunConfig {
        recipe,
        scale: Scale::Lab,
        record: None,
        train_files: vec![train_file],
        val_files: vec![val_file],
        out: Some(out.clone()),
        target: Target::cpu(),
        ranks: trainer::dist::RankEnv::single(),
        header: vec![],
    };
    let loss = run(&cfg).unwrap();
    eprintln!("val loss {loss:.4}, entropy rate {h:.4}, unigram entropy {unigram:.4}");
    assert!(
        loss > h - 0.05,
        "val loss {loss} is below the entropy floor {h}: the model sees the future"
    );
    assert!(loss < h + 0.25, "val loss {loss} is far from the entropy rate {h}");
    assert!(loss < unigram - 1.0, "val loss {loss} is not far below the unigram entropy {unigram}");
    for f in ["train.log", "metrics.jsonl", "summary.json", "recipe.toml"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let log = std::fs::read_to_string(out.join("train.log")).unwrap();
    assert!(log.lines().any(|l| l.starts_with("step:300/300 val_loss:")), "{log}");
}
