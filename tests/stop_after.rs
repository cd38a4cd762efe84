//! `train --stop-after N`: the run ends after step N of its budget with its schedule unchanged,
//! which is how `records bench` and `records profile` time a stage of a record's real schedule.
mod common;

use trainer::train::{run, run_until};

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
    let config = |steps: u64, out: &str| {
        let small = format!("{}\nwarmup_steps = 2\nsteps = {steps}", common::TINY);
        common::tiny_run(common::lab_recipe(&small), dir.path(), Some(dir.path().join(out)))
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
