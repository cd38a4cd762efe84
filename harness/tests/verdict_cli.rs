//! `records verdict LOG...` through the real binary: upstream's track-3 logs (times in seconds,
//! runs that stop before their schedule's end), llm.c's logs without a step total, markdown
//! output, and a log in a format nobody taught the parser.
mod sandbox;

use sandbox::Sandbox;
use std::path::Path;
use std::process::Output;

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

/// `records args` in `dir`, outside any checkout.
fn records(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Sandbox::new().records();
    cmd.env_remove("RECORDS_ROOT").args(args).current_dir(dir).output().unwrap()
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

/// The end of a current-format log of `steps` steps, validating every 250 steps and at the
/// end, with a final val loss of `last`.
fn current_log(steps: u64, last: &str) -> String {
    let mut text = String::from("import torch\n====\n");
    for s in (0..steps).step_by(250) {
        let loss = 10.8 - 7.4 * s as f64 / steps as f64;
        text += &format!(
            "step:{s}/{steps} val_loss:{loss:.4} train_time:{}ms step_avg:62.00ms\n",
            s * 62
        );
    }
    let ms = steps * 62;
    text += &format!("step:{steps}/{steps} train_time:{ms}ms step_avg:62.29ms\n");
    text += &format!(
        "step:{steps}/{steps} val_loss:{last} train_time:{}ms step_avg:62.34ms\n",
        ms + 92
    );
    text + "peak memory allocated: 29863 MiB reserved: 44438 MiB\n"
}

#[test]
fn a_log_cut_inside_its_last_line_is_judged_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let full = current_log(1920, "3.2783");
    // Upstream #53's log cut two characters into its final val loss.
    let end =
        full.find("step:1920/1920 val_loss:3.2").unwrap() + "step:1920/1920 val_loss:3.2".len();
    std::fs::write(dir.path().join("r53.log"), &full[..end]).unwrap();
    let out = records(dir.path(), &["verdict", "r53.log"]);
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{err}");
    assert!(
        text.starts_with("Verdict: NOT REACHED (target val loss 3.28 within 1920 steps)\n"),
        "{text}"
    );
    assert!(text.contains("the run did not validate at step 1920"), "{text}");
    assert!(text.contains("1750/1920 (unfinished)"), "{text}");
    let line = full[..end].lines().count();
    assert!(
        err.contains(&format!("r53.log: line {line} ends without a newline"))
            && err.contains("`step:1920/1920 val_loss:3.2`"),
        "{err}"
    );
    // Cut mid-run: its budget is still its own 1920 steps, not its last validation's.
    let end = full.find("step:1750/1920 val_loss").unwrap() + "step:1750/1920 val_los".len();
    std::fs::write(dir.path().join("r53.log"), &full[..end]).unwrap();
    let out = records(dir.path(), &["verdict", "r53.log"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1500/1920 (unfinished)") && text.contains("NOT REACHED"), "{text}");
}

#[test]
fn each_log_is_judged_by_its_own_budget() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r53.log"), current_log(1920, "3.2783")).unwrap();
    std::fs::write(dir.path().join("r54.log"), current_log(1880, "3.2779")).unwrap();
    let out = records(dir.path(), &["verdict", "r53.log", "r54.log"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Both finished; two runs below 3.28 are not yet p < 0.01.
    assert!(
        text.starts_with(
            "Verdict: NOT REACHED (target val loss 3.28 within each log's own step budget)\n"
        ),
        "{text}"
    );
    assert!(text.contains("mean val loss 3.2781 ≤ 3.28; one-sided t-test"), "{text}");
    assert!(!text.contains("did not validate"), "{text}");
    let row = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_string();
    assert!(row("r53.log").contains("1920/1920") && !row("r53.log").contains("unfinished"));
    assert!(row("r54.log").contains("1880/1880") && !row("r54.log").contains("unfinished"));

    // A budget the log contradicts is refused, naming the log.
    let out = records(dir.path(), &["verdict", "r53.log", "--steps", "99999"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(err.contains("r53.log: the log's own budget is 1920 steps"), "{err}");
    assert!(err.contains("not --steps 99999"), "{err}");
}

#[test]
fn our_lab_logs_are_judged_against_their_record_s_lab_target() {
    let sandbox = Sandbox::new();
    let dir = tempfile::tempdir().unwrap();
    let log = "# record: 1\n# scale: lab\n# device: cpu\n\
               step:0/250 val_loss:5.5646 train_time:0ms step_avg:0.00ms\n\
               step:25/250 val_loss:2.8348 train_time:11027ms step_avg:459.45ms\n\
               step:250/250 val_loss:2.5402 train_time:146000ms step_avg:584.00ms\n";
    for run in ["run-1", "run-2"] {
        std::fs::create_dir_all(dir.path().join(run)).unwrap();
        std::fs::write(
            dir.path().join(run).join("train.log"),
            log.replace("2.5402", if run == "run-1" { "2.5402" } else { "2.5390" }),
        )
        .unwrap();
    }
    let out = sandbox
        .records()
        .args(["verdict", "run-1/train.log", "run-2/train.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.starts_with("Verdict: NOT REACHED (target val loss 2.5284 within 250 steps)\n"),
        "{text}"
    );
    assert!(
        text.contains("target: records/01.toml's [lab_target], measured on another machine")
            && text.contains("the log says `# scale: lab` and `# record: 1`; no verdict.json beside it names a CPU"),
        "{text}"
    );
    assert!(text.contains("mean val loss 2.5396 is above 2.5284"), "{text}");
    // Runs named apart by their folders, not both `train.log`.
    assert!(text.lines().any(|l| l.trim_start().starts_with("run-1/train.log")), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("run-2/train.log")), "{text}");
    // --target still decides when given.
    let out = sandbox
        .records()
        .args(["verdict", "run-1/train.log", "--target", "3.28"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("Verdict: REACHED (target val loss 3.28")
    );
}

/// A log whose step lines contradict each other (two runs in one file, steps going backwards, a
/// repeated validation step, a step past its budget, a negative loss) is refused at the first
/// such line, never judged.
#[test]
fn logs_that_contradict_themselves_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "step:100/100 val_loss:3.30 train_time:9ms\nstep:50/100 val_loss:3.20 train_time:5ms\n",
            "back.log:2: validation step 50 comes after step 100",
        ),
        (
            "step:100/100 val_loss:3.30 train_time:9ms\nstep:50/50 val_loss:3.10 train_time:5ms\n",
            "two.log:2: `step:50/50` counts to 50, but line 1 counted to 100",
        ),
        (
            "step:50/100 val_loss:3.30 train_time:9ms\nstep:50/100 val_loss:3.20 train_time:9ms\n",
            "dup.log:2: a second validation line for step 50",
        ),
        (
            "step:0/100 val_loss:3.30 train_time:0ms\nstep:100/100 val_loss:-1.0 train_time:9ms\n",
            "negative.log:2: val_loss -1 is negative",
        ),
        (
            "step:150/100 val_loss:3.20 train_time:9ms\n",
            "past.log:1: step 150 is past the budget of 100",
        ),
    ];
    let names = ["back.log", "two.log", "dup.log", "negative.log", "past.log"];
    for ((text, want), name) in cases.iter().zip(names) {
        std::fs::write(dir.path().join(name), text).unwrap();
        let out = records(dir.path(), &["verdict", name]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
    }
}

/// Our logs of different records are not pooled into one t-test; a target must be a positive
/// loss; a binary file's bytes are escaped, never echoed.
#[test]
fn mixed_records_a_negative_target_and_binary_logs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for n in ["53", "54"] {
        let log = format!("# record: {n}\nstep:10/10 val_loss:3.0 train_time:9ms\n");
        std::fs::write(dir.path().join(format!("r{n}.log")), log).unwrap();
    }
    let out = records(dir.path(), &["verdict", "r53.log", "r54.log", "--target", "3.28"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("r53.log is a log of record 53 and r54.log of record 54"), "{err}");
    let out = records(dir.path(), &["verdict", "r53.log", "--target=-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--target must be a positive val loss"), "{err}");
    std::fs::write(dir.path().join("bin.log"), b"step:1\x1b[2J\x00\xff val_loss:x\n").unwrap();
    let out = records(dir.path(), &["verdict", "bin.log"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !err.contains('\x1b') && !err.contains('\u{fffd}'), "{err}");
    assert!(err.contains("\\u{1b}[2J\\u{0}\\u{fffd}"), "{err}");
}
