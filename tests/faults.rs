//! A diverging run stops with an error that names the step, instead of training on NaN.
mod common;

use trainer::train::run;

#[test]
fn nan_loss_stops_the_run_naming_the_step() {
    let dir = tempfile::tempdir().unwrap();
    // An absurd learning rate: the first update sends the weights to infinity.
    let recipe =
        common::lab_recipe(&format!("{}\nsteps = 20\nlr = 1e30\ngrad_clip = 0.0", common::TINY));
    let cfg = common::tiny_run(recipe, dir.path(), None);
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
