//! Record #29 end to end over real processes: two `train` ranks, each packing one micro-batch,
//! match one rank that packs both as two accumulation steps, with Adam and Muon sharded over TCP.
mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A lab manifest of #29 whose step is two packed micro-batches of 2,048 tokens (as upstream's
/// 8 x 49,152 on fewer GPUs).
fn manifest(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml"))
        .unwrap()
        .replace(
            "batch_tokens = 2048\nreference_ranks = 1",
            "batch_tokens = 4096\nreference_ranks = 2",
        );
    assert!(text.contains("reference_ranks = 2\nsteps = 250"), "the [lab] table changed");
    let path = dir.join("29.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Byte documents of 40-600 tokens, each after a BOS (256), as train and val shards.
fn corpus(dir: &Path) {
    let mut rng = corpus::synthetic::SplitMix64(11);
    let mut tokens = Vec::new();
    while tokens.len() < 80_000 {
        tokens.push(256u16);
        let len = 40 + rng.below(560);
        tokens.extend((0..len).map(|_| rng.below(256) as u16));
    }
    corpus::shard::write_shard(&dir.join("x_val_000000.bin"), &tokens[..20_000]).unwrap();
    corpus::shard::write_shard(&dir.join("x_train_000001.bin"), &tokens[20_000..]).unwrap();
}

fn train(dir: &Path, env: &[(&str, String)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--scale", "lab", "--steps", "3", "--cpu", "--manifest"])
        .arg(dir.join("29.toml"))
        .arg("--data")
        .arg(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("OMP_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The loss of every `step:` line of rank 0's output.
fn losses(child: Child) -> Vec<f64> {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    text.lines()
        .filter(|l| l.starts_with("step:"))
        .map(|l| {
            let w = l.split_whitespace().find_map(|w| w.split_once("loss:")).unwrap().1;
            w.parse().unwrap()
        })
        .collect()
}

#[test]
fn two_ranks_match_one_rank_with_two_micro_batches() {
    let dir = tempfile::tempdir().unwrap();
    manifest(dir.path());
    corpus(dir.path());
    let one = losses(train(dir.path(), &[]));
    assert_eq!(one.len(), 5, "val at 0, 3 train steps, val at 3: {one:?}");
    let port = common::free_port().to_string();
    let rank = |r: usize| {
        let env = [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("LOCAL_RANK", r.to_string()),
            ("LOCAL_WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.clone()),
        ];
        train(dir.path(), &env)
    };
    let (r0, r1) = (rank(0), rank(1));
    let two = losses(r0);
    assert!(r1.wait_with_output().unwrap().status.success());
    assert_eq!(one.len(), two.len());
    for (a, b) in one.iter().zip(&two) {
        assert!((a - b).abs() <= 2e-4, "1 rank x 2 micro-batches: {one:?}\n2 ranks: {two:?}");
    }
    assert!(one[4] < one[0] - 0.1, "it learns the byte frequencies: {one:?}");
}
