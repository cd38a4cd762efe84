//! `records replay` end to end: the real CLI materializes record #1's tree, builds its trainer
//! with cargo, trains a few lab-scale steps on the default corpus and writes results. `--head`
//! (the newest trainer with #1's recipe) must give exactly the same losses as #1's own tree.
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The losses of every `step:` line of the one run under `results/01/`.
fn replay(results: &Path, extra: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_records"))
        .args(["replay", "1", "--steps", "3", "--results"])
        .arg(results)
        .args(extra)
        .env("RECORDS_ROOT", repo())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "replay failed:\n{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Verdict: NOT REACHED (target val loss 2.5284 within 3 steps)"), "{stdout}");
    assert!(stdout.contains("step:3/3 val_loss:"), "val lines are printed: {stdout}");
    let runs: Vec<_> = std::fs::read_dir(results.join("01")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "one finished run folder, no temp folder left: {runs:?}");
    let run = &runs[0];
    assert!(run.join("verdict.json").is_file());
    for f in ["train.log", "metrics.jsonl", "summary.json", "recipe.toml"] {
        assert!(run.join("run-1").join(f).is_file(), "{f} missing");
    }
    let log = std::fs::read_to_string(run.join("run-1/train.log")).unwrap();
    log.lines().filter(|l| l.starts_with("step:")).map(|l| l.split(" train_time").next().unwrap().to_string()).collect()
}

#[test]
fn lab_replay_of_record_1_tree_and_head_agree() {
    let tree = tempfile::tempdir().unwrap();
    let head = tempfile::tempdir().unwrap();
    let a = replay(tree.path(), &[]);
    let b = replay(head.path(), &["--head"]);
    assert_eq!(a.len(), 5, "val at 0, 3 train steps, val at 3: {a:?}");
    assert_eq!(a, b, "record #1's tree and the newest trainer disagree");
}
