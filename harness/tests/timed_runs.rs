//! `records bench` and `records replay` end to end, as timed runs: the real CLI builds each
//! record's own tree, runs its trainer in interleaved rounds and writes bench.json. Here this test
//! process holds the timing lock, so both run with --no-lock and must say that their times are
//! not comparable (tests/timing_lock.rs covers waiting).
mod sandbox;

use sandbox::Sandbox;
use std::fs::File;
use std::path::Path;

/// `records args` in `sandbox`, whose timing lock this test holds.
fn records(sandbox: &Sandbox, args: &[&str]) -> (String, String) {
    let out = sandbox.run(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "records {args:?} failed:\n{stderr}\n{stdout}");
    (stdout, stderr)
}

/// The only entry of `dir`.
fn only_entry(dir: &Path) -> std::path::PathBuf {
    let entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "one finished folder, no temp folder left: {entries:?}");
    entries[0].clone()
}

#[test]
fn bench_of_1_29_and_46_interleaves_rounds_and_counts_each_stages_true_tokens() {
    let sandbox = Sandbox::new();
    let held = File::create(sandbox.lock()).unwrap();
    held.lock().unwrap();
    let results = sandbox.results();
    let bench = ["bench", "1", "29", "46", "--rounds", "2", "--steps", "2", "--warmup", "1"];
    let (stdout, stderr) = records(&sandbox, &[&bench[..], &["--no-lock"]].concat());
    // Interleaved: round 1 runs #1, #29 then #46, then round 2 does.
    let order: Vec<&str> = stderr.lines().filter(|l| l.starts_with("records: round ")).collect();
    assert_eq!(order.len(), 6, "{stderr}");
    let want = ["1/2: #1 ", "1/2: #29 ", "1/2: #46 ", "2/2: #1 ", "2/2: #29 ", "2/2: #46 "];
    for (line, want) in order.iter().zip(want) {
        assert!(line.contains(want), "{line} should be {want}");
    }
    assert!(
        stdout.contains("Times NOT COMPARABLE: ran with --no-lock while another process held"),
        "{stdout}"
    );
    assert!(stdout.contains("| #29 | ") && stdout.contains("x #1 ("), "{stdout}");

    let run = only_entry(&results.join("bench"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("bench.json")).unwrap()).unwrap();
    assert_eq!(json["scale"], "lab");
    assert!(json["time_not_comparable"].is_string(), "{json}");
    let recs = json["records"].as_array().unwrap();
    assert_eq!(recs.len(), 3);
    // Steps 2-3 of each record's own schedule: #46's first batch stage trains 688 lab tokens a
    // step (its last 2,048), and that is what is counted.
    for (r, (n, tokens)) in recs.iter().zip([(1, 2048.0), (29, 2048.0), (46, 688.0)]) {
        assert_eq!(r["record"], n);
        assert_eq!(r["ms_per_step"]["n"], 4, "2 rounds x 2 timed steps: {r}");
        assert_eq!(r["window"]["skip"], 1, "{r}");
        assert_eq!(r["window"]["stop"], 3, "{r}");
        assert_eq!(r["tokens_per_step"], tokens, "{r}");
        assert!(r["ms_per_step"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["tokens_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mfu"].is_null(), "no MFU on CPU");
    }
    assert_eq!(recs[2]["budget"], 323, "#46's own lab budget, not --steps");
    assert!(recs[0]["ratio_to_first"].is_null());
    assert_eq!(recs[1]["ratio_to_first"]["of"], 1);
    assert_eq!(recs[1]["ratio_to_parent"]["of"], 1);
    assert!(recs[2]["ratio_to_parent"].is_null(), "#46's parent #38 was not benched");
    // Each run's log is kept beside bench.json, and it was the record's own tree that ran.
    let log = std::fs::read_to_string(run.join("round-2-29/train.log")).unwrap();
    assert!(log.contains("# bench: round 2/2") && log.contains("# tree: "), "{log}");
}

#[test]
fn replay_without_the_lock_beside_a_holder_says_not_comparable() {
    let sandbox = Sandbox::new();
    let held = File::create(sandbox.lock()).unwrap();
    held.lock().unwrap();
    let results = sandbox.results();
    let (stdout, _) = records(&sandbox, &["replay", "1", "--steps", "2", "--no-lock"]);
    assert!(stdout.contains("Times NOT COMPARABLE: ran with --no-lock while"), "{stdout}");
    let run = only_entry(&results.join("01"));
    let verdict = std::fs::read_to_string(run.join("verdict.json")).unwrap();
    assert!(verdict.contains("\"time_not_comparable\": \"ran with --no-lock while"), "{verdict}");
}
