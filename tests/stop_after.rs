//! `train --stop-after N`: the run ends after step N of its budget with its schedule unchanged,
//! which is how `records bench` and `records profile` time a stage of a record's real schedule.
mod common;

use trainer::device::Target;
use trainer::dist::RankEnv;
use trainer::recipe::Scale;
use trainer::train::{run, run_until, RunConfig};

/// (step, lr, loss) of every train line of a run's metrics.jsonl.
fn train_lines(dir: &std::path::Path) -> Vec<(u64, f64, f64)> {
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "train")
        .map(|v| {
            (v["step"].as_u64().unwrap(), v["lr"].as_f64().unwrap(), v["loss"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn a_stopped_run_is_the_whole_runs_first_steps() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: Vec<u16> = (0..20_000u32).map(|i| (i * 7 % 251) as u16).collect();
    let (val, train) = (dir.path().join("x_val_000000.bin"), dir.path().join("x_train_000001.bin"));
    corpus::shard::write_shard(&val, &tokens[..5_000]).unwrap();
    corpus::shard::write_shard(&train, &tokens[5_000..]).unwrap();
    let small = "n_layer = 1\nn_embd = 32\nn_head = 2\nseq_len = 16\nmax_seq_len = 16\n\
                 batch_rows = 4\nbatch_tokens = 64\nval_every = 100\nval_tokens = 64\n\
                 warmup_steps = 2";
    let config = |steps: u64, out: &str| RunConfig {
        recipe: common::lab_recipe(&format!("{small}\nsteps = {steps}")),
        scale: Scale::Lab,
        record: None,
        train_files: vec![train.clone()],
        val_files: vec![val.clone()],
        out: Some(dir.path().join(out)),
        target: Target::cpu(),
        ranks: RankEnv::single(),
        header: vec![],
    };
    run(&config(20, "whole")).unwrap();
    run_until(&config(20, "stopped"), Some(5)).unwrap();
    run(&config(5, "shortened")).unwrap();
    let whole = train_lines(&dir.path().join("whole"));
    let stopped = train_lines(&dir.path().join("stopped"));
    assert_eq!(whole.len(), 20);
    assert_eq!(stopped, whole[..5], "the same steps, lr and losses as the whole run's first five");
    // A budget of 5 (what `--steps 5` does) maps the schedule onto it: not the same run.
    let shortened = train_lines(&dir.path().join("shortened"));
    assert_ne!(shortened, stopped, "a shorter budget has another lr schedule");
    let log = std::fs::read_to_string(dir.path().join("stopped/train.log")).unwrap();
    assert!(log.lines().last().unwrap().starts_with("step:5/20 train_loss:"), "{log}");
}

#[test]
fn a_stop_past_the_budget_is_refused_naming_the_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--manifest", concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml")])
        .args(["--scale", "lab", "--data", "/nonexistent", "--cpu", "--stop-after", "251"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--stop-after 251: must be 1 to 250, the run's steps"), "{err}");
}
