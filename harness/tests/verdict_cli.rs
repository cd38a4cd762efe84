//! `records verdict LOG...` through the real binary: upstream's track-3 logs (times in seconds,
//! runs that stop before their schedule's end), llm.c's logs without a step total, markdown
//! output, and a log in a format nobody taught the parser.
use std::path::Path;
use std::process::{Command, Output};

// Real lines of upstream's track-3 MuonH submission (KellerJordan/modded-nanogpt at f411b3d3,
// records/track_3_optimization/results/20260430_muonh/): the first and the last two validation
// lines of 28df77c8-…, 4730828a-… and 4e11deec-….txt (lines 3694 and 3770 for the last two).
const MUONH: [(&str, &str); 3] = [
    (
        "28df77c8.txt",
        "step:0/3325 val_loss:10.82584 train_time:0.000s step_avg:nanms\n\
         step:3250/3325 val_loss:3.28325 train_time:667.073s step_avg:205.25ms\n\
         step:3325/3325 val_loss:3.27906 train_time:678.200s step_avg:203.97ms\n",
    ),
    (
        "4730828a.txt",
        "step:0/3325 val_loss:10.82584 train_time:0.000s step_avg:nanms\n\
         step:3250/3325 val_loss:3.28203 train_time:493.436s step_avg:151.83ms\n\
         step:3325/3325 val_loss:3.27796 train_time:504.537s step_avg:151.74ms\n",
    ),
    (
        "4e11deec.txt",
        "step:0/3325 val_loss:10.82584 train_time:0.000s step_avg:nanms\n\
         step:3250/3325 val_loss:3.28297 train_time:494.010s step_avg:152.00ms\n\
         step:3325/3325 val_loss:3.27882 train_time:505.128s step_avg:151.92ms\n",
    ),
];

fn records(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_records")).args(args).current_dir(dir).output().unwrap()
}

fn write_muonh(dir: &Path) -> Vec<String> {
    MUONH
        .iter()
        .map(|(name, text)| {
            std::fs::write(dir.join(name), text).unwrap();
            name.to_string()
        })
        .collect()
}

#[test]
fn track_3_logs_get_the_replay_s_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["verdict".to_string()];
    args.extend(write_muonh(dir.path()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = records(dir.path(), &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("Verdict: NOT REACHED (target val loss 3.28 within 3325 steps)\n"));
    // Mean 3.27861 over three runs is below 3.28, but not significantly.
    assert!(
        text.contains(
            "mean val loss 3.2786 ≤ 3.28; one-sided t-test of mean < 3.28: p = 0.0267 \
             (t = −4.15, df = 2), not below 0.01"
        ),
        "{text}"
    );
    assert!(text.contains("these logs"), "{text}");
    assert!(!text.contains("Official"), "logs have no official time: {text}");
    let row = text.lines().find(|l| l.contains("4730828a.txt")).expect("a row per log");
    for cell in ["3325/3325", "3.2780", "504.5 s", "step 3325 at 504.5 s"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert!(text.contains("mean train time") && text.contains("562.6 s"), "{text}");
}

#[test]
fn markdown_on_request_only() {
    let dir = tempfile::tempdir().unwrap();
    let names = write_muonh(dir.path());
    let out = records(dir.path(), &["verdict", &names[0], &names[1], "--format", "md"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.starts_with("**Verdict: NOT REACHED"), "{md}");
    assert!(md.contains("| mean val loss "), "{md}");
    assert!(md.lines().any(|l| l.starts_with("|---") && l.ends_with(":|")), "{md}");
    let out = records(dir.path(), &["verdict", &names[0], &names[1]]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('|'), "no markdown on a terminal: {text}");
}

#[test]
fn runs_that_stop_early_are_judged_at_their_last_validation() {
    // llm.c's lines state no total, and track 3's runs stop before their schedule ends: the
    // budget is the last validation of the longest log; a shorter log is unfinished.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.log"), "s:0 tel:10.9\ns:19560 tel:3.2722\n").unwrap();
    std::fs::write(dir.path().join("b.log"), "s:0 tel:10.9\ns:9000 tel:3.5\n").unwrap();
    let out = records(dir.path(), &["verdict", "a.log", "b.log"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Verdict: NOT REACHED (target val loss 3.28 within 19560 steps)\n"));
    assert!(text.contains("1 of 2 runs did not validate at step 19560"), "{text}");
    assert!(text.contains("9000/19560 (unfinished)"), "{text}");
    let out = records(dir.path(), &["verdict", "a.log", "--steps", "1"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("within 1 step)"));
}

#[test]
fn a_log_in_an_unknown_format_fails_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let names = write_muonh(dir.path());
    std::fs::write(
        dir.path().join("new.txt"),
        "code\nstep:3325/3325 val_loss=3.27 train_time:1.0s\n",
    )
    .unwrap();
    let out = records(dir.path(), &["verdict", &names[0], "new.txt"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(err.contains("new.txt: no validation line found"), "{err}");
    assert!(err.contains("line 2 is not understood: `step:3325/3325 val_loss=3.27"), "{err}");
    let out = records(dir.path(), &["verdict"]);
    assert!(!out.status.success(), "at least one log");
}
