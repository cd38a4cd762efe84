//! A diverging run stops with an error that names the step, instead of training on NaN.
mod common;

use trainer::device::Target;
use trainer::dist::RankEnv;
use trainer::recipe::Scale;
use trainer::train::{run, RunConfig};

#[test]
fn nan_loss_stops_the_run_naming_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: Vec<u16> = (0..20_000u32).map(|i| (i * 7 % 251) as u16).collect();
    let (val, train) = (dir.path().join("x_val_000000.bin"), dir.path().join("x_train_000001.bin"));
    corpus::shard::write_shard(&val, &tokens[..5_000]).unwrap();
    corpus::shard::write_shard(&train, &tokens[5_000..]).unwrap();
    // An absurd learning rate: the first update sends the weights to infinity.
    let recipe = common::lab_recipe(
        "n_layer = 1\nn_embd = 32\nn_head = 2\nseq_len = 16\nmax_seq_len = 16\nbatch_rows = 4\n\
         batch_tokens = 64\nsteps = 20\nval_every = 100\nval_tokens = 64\nlr = 1e30\ngrad_clip = 0.0",
    );
    let cfg = RunConfig {
        recipe,
        scale: Scale::Lab,
        record: None,
        train_files: vec![train],
        val_files: vec![val],
        out: None,
        target: Target::cpu(),
        ranks: RankEnv::single(),
        header: vec![],
    };
    let err = format!("{:#}", run(&cfg).unwrap_err());
    assert!(err.starts_with("step "), "{err}");
    assert!(err.contains("loss is NaN") || err.contains("loss is inf"), "{err}");
}

/// A run not told `--cpu` needs CUDA: a build without it stops with one line saying why (before
/// it looks at the data) instead of training on the CPU.
#[cfg(not(feature = "cuda"))]
#[test]
fn a_gpu_run_on_a_build_without_cuda_stops_saying_why() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--manifest", concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")])
        .args(["--scale", "lab", "--data", "/nonexistent"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "train (rank 0): error: this train binary was built without CUDA, so it cannot use a GPU; \
         pass --cpu to train on the CPU, or build with `cargo build --release -p trainer \
         --features cuda`"
    );
}
