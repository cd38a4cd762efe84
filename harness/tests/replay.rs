//! `records replay` end to end: the real CLI materializes a record's tree, builds its trainer
//! with cargo, trains a few lab-scale steps on the default corpus and writes results. `--head`
//! (the newest trainer with the record's recipe) must give exactly the same losses as the
//! record's own tree, and two CPU ranks the same losses as one (record #1; #29's packed batches
//! are cut differently for two ranks). A rank killed mid-run ends the job, naming the rank.
mod sandbox;

use sandbox::{checkout, Sandbox};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The losses of every `step:` line of the one run of `record` under `results/NN/`.
/// `[lab_target] val_loss` of records/NN.toml as the verdict prints it.
fn lab_target(record: u32) -> String {
    let text =
        std::fs::read_to_string(checkout().join(format!("records/{record:02}.toml"))).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    format!("{:.4}", table["lab_target"]["val_loss"].as_float().unwrap())
}

fn replay(record: u32, sandbox: &Sandbox, extra: &[&str]) -> Vec<String> {
    let out = sandbox
        .records()
        .args(["replay", &record.to_string(), "--steps", "3"])
        .args(extra)
        .output()
        .unwrap();
    let results = sandbox.results();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "replay failed:\n{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // #1 is judged against its own lab target, the modern records against #29's.
    let target = lab_target(if record == 1 { 1 } else { 29 });
    assert!(
        stdout.contains(&format!("Verdict: NOT REACHED (target val loss {target} within 3 steps)")),
        "{stdout}"
    );
    assert!(stdout.contains("step:3/3 val_loss:"), "val lines are printed: {stdout}");
    let runs: Vec<_> = std::fs::read_dir(results.join(format!("{record:02}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "one finished run folder, no temp folder left: {runs:?}");
    let run = &runs[0];
    assert!(run.join("verdict.json").is_file());
    for f in ["train.log", "metrics.jsonl", "summary.json", "recipe.toml"] {
        assert!(run.join("run-1").join(f).is_file(), "{f} missing");
    }
    let log = std::fs::read_to_string(run.join("run-1/train.log")).unwrap();
    log.lines()
        .filter(|l| l.starts_with("step:"))
        .map(|l| l.split(" train_time").next().unwrap().to_string())
        .collect()
}

/// Replays `record` from its own tree and with `--head`: they must give the same losses, which
/// are returned.
fn tree_and_head_agree(record: u32) -> Vec<String> {
    let a = replay(record, &Sandbox::new(), &[]);
    let b = replay(record, &Sandbox::new(), &["--head"]);
    assert_eq!(a.len(), 5, "val at 0, 3 train steps, val at 3: {a:?}");
    assert_eq!(a, b, "record #{record}'s tree and the newest trainer disagree");
    a
}

/// The losses of `record` on two CPU ranks.
fn two_ranks(record: u32) -> Vec<String> {
    replay(record, &Sandbox::new(), &["--ranks", "2"])
}

#[test]
fn lab_replay_of_record_1_tree_and_head_and_two_ranks_agree() {
    let a = tree_and_head_agree(1);
    // Two ranks average their halves of each batch: the same losses up to fp32 rounding.
    let c = two_ranks(1);
    assert_eq!(a.len(), c.len());
    for (x, y) in a.iter().zip(&c) {
        let (lx, ly) = (loss_of(x), loss_of(y));
        assert!((lx - ly).abs() <= 2e-4, "1 rank: {x}, 2 ranks: {y}");
    }
}

/// Record #29's tree comes from reverse-applying #38's patch; `--head` runs the newest trainer
/// (#38's) with #29's recipe and must give the same losses. Two ranks shard Adam and Muon over TCP; their micro-batches pack 1,024 tokens instead of 2,048, so the
/// losses only stay close.
#[test]
fn lab_replay_of_record_29_tree_and_head_agree_and_two_ranks_train() {
    let a = tree_and_head_agree(29);
    let c = two_ranks(29);
    for (x, y) in a.iter().zip(&c) {
        let (lx, ly) = (loss_of(x), loss_of(y));
        assert!((lx - ly).abs() <= 0.1, "1 rank: {x}, 2 ranks: {y}");
    }
    assert!(loss_of(&c[4]) < loss_of(&c[0]) - 1.0, "two ranks learn: {c:?}");
}

/// Record #38's tree comes from reverse-applying #46's patch (Adam every other step, NorMuon,
/// the batch schedule, ...), all off in #38's recipe: `--head` must give the same losses. #46
/// itself trains on two ranks, through NorMuon's sharded step and its batch stages.
#[test]
fn lab_replay_of_record_38_tree_and_head_agree_and_46_trains_on_two_ranks() {
    tree_and_head_agree(38);
    let c = two_ranks(46);
    assert!(loss_of(&c[4]) < loss_of(&c[0]) - 0.3, "two ranks learn: {c:?}");
}

/// Records #46 and #53: their trees come from reverse-applying the newer patches (#53's seven
/// commits, #54's), whose keys are all off or set otherwise in their recipes: `--head` must give
/// the same losses. #54 trains on two ranks (its small tensors all-reduced whole, the scalars in
/// their own Adam, the multi-token loss).
#[test]
fn lab_replay_of_records_46_and_53_tree_and_head_agree_and_54_trains_on_two_ranks() {
    tree_and_head_agree(46);
    tree_and_head_agree(53);
    let c = two_ranks(54);
    assert!(loss_of(&c[4]) < loss_of(&c[0]) - 0.3, "two ranks learn: {c:?}");
}

/// Records #54 and #62: their trees come from reverse-applying #62's eight commits (gates, bf16
/// matrices, per-parameter betas, paired heads, the bigram table...) and #63's, all off or set
/// otherwise in their recipes: `--head` must give the same losses.
#[test]
fn lab_replay_of_records_54_and_62_tree_and_head_agree() {
    tree_and_head_agree(54);
    tree_and_head_agree(62);
}

/// Record #63's tree comes from reverse-applying #84's eighteen commits (rounded stages, the
/// document-length schedule, residual lambdas per sublayer, Q/K by head pairs, the FP8
/// up-projection...), all off in #63's recipe: `--head` must give the same losses. #84 trains on
/// two ranks (its per-sublayer lambdas all-reduced, the bigram table sharded by rows).
#[test]
fn lab_replay_of_record_63_tree_and_head_agree_and_84_trains_on_two_ranks() {
    tree_and_head_agree(63);
    let c = two_ranks(84);
    assert!(loss_of(&c[4]) < loss_of(&c[0]) - 0.3, "two ranks learn: {c:?}");
}

fn loss_of(line: &str) -> f64 {
    line.split_whitespace().find_map(|w| w.split_once("loss:")).unwrap().1.parse().unwrap()
}

/// Children of `parent` whose environment holds `RANK=<rank>`.
fn rank_pid(parent: u32, rank: usize) -> Option<u32> {
    let want = format!("RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: u32 = stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()?;
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let has = env.split(|&b| b == 0).any(|v| v == want.as_bytes());
        (ppid == parent && has).then_some(pid)
    })
}

#[test]
fn a_killed_rank_ends_the_job_naming_it() {
    let sandbox = Sandbox::new();
    let mut child = sandbox
        .records()
        .args(["replay", "1", "--ranks", "2", "--steps", "500"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the ranks to start (the first build may take a while), then kill rank 1.
    let start = Instant::now();
    let victim = loop {
        if let Some(pid) = rank_pid(child.id(), 1) {
            break pid;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("replay ended ({status}) before rank 1 started: {err}");
        }
        assert!(start.elapsed() < Duration::from_secs(600), "rank 1 never started");
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_secs(2));
    let survivor = rank_pid(child.id(), 0).expect("rank 0 runs");
    let killed = Instant::now();
    Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let waited = killed.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job must fail: {stderr}");
    assert!(waited < Duration::from_secs(20), "took {waited:?} to notice the dead rank");
    assert!(stderr.contains("rank 1") && stderr.contains("SIGKILL"), "{stderr}");
    std::thread::sleep(Duration::from_millis(500)); // let init reap it
    assert!(!Path::new(&format!("/proc/{survivor}")).exists(), "rank 0 was left running");
    assert!(
        std::fs::read_dir(sandbox.results().join("01")).map_or(true, |mut d| d.next().is_none()),
        "a failed replay leaves no results"
    );
}
