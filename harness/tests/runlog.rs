//! Run-log parsing on excerpts written from the documented formats of every era, and the verdict
//! built from them.
use records::text::table::Format;
use records::verdict::runlog::{self, RunLog};
use records::verdict::Verdict;

const LLMC: &str = "\
Running pytorch 2.4.0
s:0 trl:11.0091 lr:0.000001 norm:15.37
s:1 trl:10.8140
s:9536 tel:3.275959
s:19560 tel:3.2722
";

/// Oct 2024 – Jan 2025: source code first (with `step:` inside code), then the step lines.
const OCT_2024: &str = r#"import os
def log(step, val_loss):
    print0(f"step:{step}/{args.num_iterations} val_loss:{val_loss:.4f} train_time:{training_time_ms:.0f}ms")
step:0/6200 is a comment-looking line in the code
====================================================================================================
Running PyTorch 2.5.0 compiled for CUDA 12.4
| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |
====================================================================================================
step:0/6200 val_loss:10.8258 train_time:0ms step_avg:nanms
step:1/6200 train_loss:10.8258 train_time:79013ms step_avg:nanms
step:2/6200 train_loss:8.6834 train_time:75965ms step_avg:nanms
step:11/6200 train_loss:7.1 train_time:2310ms step_avg:231.00ms
step:6200/6200 val_loss:3.2785 train_time:1339067ms step_avg:216.33ms
peak memory consumption: 37620 MiB
"#;

const CURRENT: &str = "\
import torch
    if step % 250 == 0: print0(f'step:{step}/{train_steps} val_loss:{val_loss:.4f}', console=True)
step:0/1920 val_loss:10.8367 train_time:0ms step_avg:0.03ms
step:1/1920 train_time:69ms step_avg:69.18ms
step:250/1920 val_loss:4.6043 train_time:8677ms step_avg:34.71ms
step:1000/1920 val_loss:3.4001 train_time:60002ms step_avg:60.00ms
step:1919/1920 train_time:119540ms step_avg:62.29ms
step:1920/1920 train_time:119602ms step_avg:62.29ms
step:1920/1920 val_loss:3.2783 train_time:119694ms step_avg:62.34ms
peak memory allocated: 29863 MiB reserved: 44438 MiB
";

const OURS: &str = "\
# record: 1
# recipe: {\"steps\": 20, \"lr\": 0.0036}
# tree: 3f2a9c1
# device: cpu

step:0/20 val_loss:10.9000 train_time:0ms step_avg:0.00ms
step:1/20 train_time:510ms step_avg:510.00ms train_loss:10.8800
step:10/20 val_loss:6.2500 train_time:5200ms step_avg:520.00ms
step:20/20 train_time:10400ms step_avg:520.00ms train_loss:5.1000
step:20/20 val_loss:5.0500 train_time:10450ms step_avg:522.50ms
# not a header: this comes after the step lines
";

// Track 3 (optimization): times in seconds. Real lines of upstream's logs (KellerJordan/
// modded-nanogpt at f411b3d3, records/track_3_optimization/results/): 20260430_adamh/
// 6b19a86b-ddfe-476c-9983-2a967bd99ca9.txt lines 395-399 and its last two step lines.
const TRACK_3: &str = "\
====================================================================================================
Running PyTorch 2.11.0+cu128 compiled for CUDA 12.8 on NVIDIA H100 80GB HBM3 with world_size 8
step:0/4875 val_loss:10.82584 train_time:0.000s step_avg:0.21ms
step:1/4875 train_time:5.418s step_avg:5418.26ms
step:2/4875 train_time:5.562s step_avg:2781.13ms
step:4875/4875 train_time:739.634s step_avg:151.72ms
step:4875/4875 val_loss:3.27637 train_time:739.639s step_avg:151.72ms
";

// Track 3 submissions print fields of their own after (or among) the known ones. Real lines:
// 20260619_cwd_rowfloor_tailema/A40_seed0_5c87fa44-7ca7-4d54-971d-d952f9b15792.txt line 1807,
// 20260520_rre_extrapolation_pr300_2925/1786243c-db47-49ff-bff8-3faf814bf763.txt line 1897,
// 20260525_aurora_ema_ref/15223178-b211-42d7-a6ba-b969c3148973.txt line 893.
const TRACK_3_EXTRA_FIELDS: [&str; 3] = [
    "step:2900/2900 val_loss:3.27090 val_avg_loss:3.27090 val_ema_loss:3.27134 train_time:10678.894s step_avg:3682.38ms",
    "step:2925/3020 val_loss:3.27793 train_time:4488.664s step_avg:1534.59ms extrap_count:21 extrap_rel:6.708e-04 handoff:keep",
    "step:2860/2900 val_loss:3.27837 train_time:2145.235s step_avg:750.08ms ema_beta:0 ref_gamma:-0.075 ref_step:2375",
];

#[test]
fn track_3_times_in_seconds() {
    let log = runlog::parse(TRACK_3);
    assert_eq!(log.train.len(), 3);
    assert_eq!(log.train[0].train_time_ms, Some(5418.0));
    assert_eq!(log.train[2].step_avg_ms, Some(151.72));
    assert_eq!(log.val.len(), 2);
    assert_eq!(log.val[0].train_time_ms, Some(0.0));
    let last = log.final_val().unwrap();
    assert_eq!((last.step, last.total_steps, last.val_loss), (4875, Some(4875), 3.27637));
    assert_eq!(last.train_time_ms, Some(739639.0));
    assert!(log.unread.is_empty(), "{:?}", log.unread);
    let v = Verdict::of_logs(&[log], 3.28, None).unwrap();
    assert!(v.reached, "{}", v.reason);
    assert!((v.times_s[0] - 739.639).abs() < 1e-9);
}

#[test]
fn track_3_fields_of_a_submission_s_own_are_skipped() {
    let expected =
        [(2900, 3.2709, 10678894.0), (2925, 3.27793, 4488664.0), (2860, 3.27837, 2145235.0)];
    for (line, (step, loss, ms)) in TRACK_3_EXTRA_FIELDS.iter().zip(expected) {
        let log = runlog::parse(&format!("{line}\n"));
        let v = log.final_val().unwrap_or_else(|| panic!("not read: {line}"));
        assert_eq!((v.step, v.val_loss, v.train_time_ms), (step, loss, Some(ms)), "{line}");
    }
}

#[test]
fn unreadable_step_lines_are_kept_and_a_log_without_val_lines_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.txt");
    let text = "print0(f'step:{step}')\nstep:10/10 val_loss:3.2 train_time:12min step_avg:1ms\n";
    std::fs::write(&path, text).unwrap();
    let log = runlog::parse(text);
    assert_eq!(log.unread, [(2, text.lines().nth(1).unwrap().to_string())]);
    let err = format!("{:#}", runlog::parse_for_verdict(&path).unwrap_err());
    assert!(err.contains("future.txt: no validation line found"), "{err}");
    assert!(
        err.contains("line 2 is not understood: `step:10/10 val_loss:3.2 train_time:12min"),
        "{err}"
    );
    assert!(runlog::parse_for_verdict(&dir.path().join("none.txt")).is_err());
}

#[test]
fn llmc_era() {
    let log = runlog::parse(LLMC);
    assert_eq!(log.train.len(), 2);
    let first = &log.train[0];
    assert_eq!(first.step, 0);
    assert_eq!(first.total_steps, None);
    assert_eq!(first.loss, Some(11.0091));
    assert_eq!(first.lr, Some(0.000001));
    assert_eq!(first.norm, Some(15.37));
    assert_eq!((log.train[1].lr, log.train[1].norm), (None, None));
    assert_eq!(log.val.len(), 2);
    let last = log.final_val().unwrap();
    assert_eq!((last.step, last.val_loss), (19560, 3.2722));
    assert_eq!(last.train_time_ms, None);
    assert!(log.header.is_empty());
}

#[test]
fn oct_2024_era_skips_code_and_reads_nan() {
    let log = runlog::parse(OCT_2024);
    assert_eq!(log.train.len(), 3, "{:?}", log.train);
    let two = &log.train[1];
    assert_eq!((two.step, two.total_steps, two.loss), (2, Some(6200), Some(8.6834)));
    assert_eq!(two.train_time_ms, Some(75965.0));
    assert_eq!(two.step_avg_ms, None, "nanms is no number");
    assert_eq!(log.train[2].step_avg_ms, Some(231.0));
    assert_eq!(log.val.len(), 2);
    let last = log.final_val().unwrap();
    assert_eq!(last.val_loss, 3.2785);
    assert_eq!(last.train_time_ms, Some(1339067.0));
    assert_eq!(last.step_avg_ms, Some(216.33));
    assert_eq!(log.peak_mem_allocated_mib, Some(37620));
    assert_eq!(log.peak_mem_reserved_mib, None);
    // The header block never starts after code.
    assert!(log.header.is_empty());
}

#[test]
fn current_era() {
    let log = runlog::parse(CURRENT);
    assert_eq!(log.train.len(), 3);
    assert!(log.train.iter().all(|p| p.loss.is_none()));
    assert_eq!(log.train[2].train_time_ms, Some(119602.0));
    assert_eq!(log.val.len(), 4);
    let last = log.final_val().unwrap();
    assert_eq!((last.step, last.total_steps, last.val_loss), (1920, Some(1920), 3.2783));
    assert_eq!(last.train_time_ms, Some(119694.0));
    assert_eq!(log.peak_mem_allocated_mib, Some(29863));
    assert_eq!(log.peak_mem_reserved_mib, Some(44438));
    assert_eq!(log.first_val_at_or_below(3.28).unwrap().step, 1920);
    assert_eq!(log.first_val_at_or_below(3.5).unwrap().step, 1000);
    assert!(log.first_val_at_or_below(3.0).is_none());
}

#[test]
fn ours_with_header_and_train_loss() {
    let log = runlog::parse(OURS);
    assert_eq!(
        log.header,
        [
            ("record".to_string(), "1".to_string()),
            ("recipe".to_string(), "{\"steps\": 20, \"lr\": 0.0036}".to_string()),
            ("tree".to_string(), "3f2a9c1".to_string()),
            ("device".to_string(), "cpu".to_string()),
        ]
    );
    assert_eq!(log.header_value("tree"), Some("3f2a9c1"));
    assert_eq!(log.train.len(), 2);
    assert_eq!(log.train[1].loss, Some(5.1));
    assert_eq!(log.final_val().unwrap().val_loss, 5.05);
}

#[test]
fn diverged_val_loss_is_kept_as_nan() {
    let log = runlog::parse("step:10/10 val_loss:nan train_time:100ms step_avg:10.00ms\n");
    assert!(log.final_val().unwrap().val_loss.is_nan());
    let v = Verdict::new(&[log], 3.28, 100.0, 10).unwrap();
    assert!(!v.reached);
    assert_eq!(v.reason, "a run ended with a val loss of nan");
    assert_eq!(v.runs[0].final_val_loss, None);
}

#[test]
fn parse_file_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.log");
    std::fs::write(&path, CURRENT).unwrap();
    assert_eq!(runlog::parse_file(&path).unwrap(), runlog::parse(CURRENT));
    let err = runlog::parse_file(&dir.path().join("missing.log")).unwrap_err();
    assert!(format!("{err:#}").contains("missing.log"), "{err:#}");
}

/// A current-format log that ends at `loss` after `ms` milliseconds.
fn run(loss: f64, ms: f64, steps: u64) -> RunLog {
    runlog::parse(&format!(
        "step:{s}/{s} val_loss:{loss} train_time:{ms}ms step_avg:1.00ms\n",
        s = steps
    ))
}

// Upstream's 2026-07-17_FP8DownProjection statistics.md: losses, times and its printed figures.
const PR_LOSSES: [f64; 13] = [
    3.2791, 3.2773, 3.2783, 3.2775, 3.2781, 3.2775, 3.2793, 3.2772, 3.2769, 3.2775, 3.2806, 3.2779,
    3.2816,
];
const PR_TIMES: [f64; 13] = [
    79.536, 79.740, 79.814, 79.658, 79.593, 79.629, 80.231, 79.653, 79.641, 79.532, 79.539, 79.682,
    79.656,
];
const BASE_LOSSES: [f64; 13] = [
    3.2817, 3.2796, 3.2778, 3.2802, 3.2775, 3.2767, 3.2758, 3.2821, 3.2780, 3.2768, 3.2769, 3.2775,
    3.2766,
];
const BASE_TIMES: [f64; 13] = [
    80.610, 80.710, 80.678, 80.720, 80.747, 80.693, 80.659, 80.694, 80.763, 80.795, 80.818, 80.840,
    80.745,
];

fn runs(losses: &[f64], times: &[f64]) -> Vec<RunLog> {
    losses.iter().zip(times).map(|(&l, &t)| run(l, t * 1000.0, 1390)).collect()
}

#[test]
fn verdict_reproduces_upstream_statistics_md() {
    let v = Verdict::new(&runs(&PR_LOSSES, &PR_TIMES), 3.28, 79.7, 1390).unwrap();
    let loss = v.loss.as_ref().unwrap();
    assert!((loss.mean - 3.2783692308).abs() < 1e-9);
    assert!((loss.std.unwrap() - 0.0014156180).abs() < 1e-9);
    let p = v.loss_test.unwrap().p;
    assert!((p - 0.0006690604).abs() < 1e-9, "p = {p}");
    let time = v.time_s.as_ref().unwrap();
    assert!((time.mean - 79.684923).abs() < 1e-6);
    assert!((time.std.unwrap() - 0.182767).abs() < 1e-6);
    assert_eq!((time.median, time.min, time.max), (79.653, 79.532, 80.231));
    assert!(v.reached, "{}", v.reason);

    let base = Verdict::new(&runs(&BASE_LOSSES, &BASE_TIMES), 3.28, 79.7, 1390).unwrap();
    let p = base.loss_test.unwrap().p;
    assert!((p - 0.0042976481).abs() < 1e-9, "baseline p = {p}");

    let v = v.with_baseline(&runs(&BASE_LOSSES, &BASE_TIMES));
    let b = v.baseline.as_ref().unwrap();
    let time = b.time.unwrap();
    assert!((time.delta_mean - -1.043692).abs() < 1e-6);
    // Upstream prints t = 19.394 (baseline minus candidate) and the two-sided p = 4.9e-12.
    assert!((time.t - -19.394).abs() < 5e-4, "t = {}", time.t);
    let p2 = time.p_two_sided;
    assert!((p2 - 4.9e-12).abs() < 0.05e-12, "p = {p2}");
    assert!((time.p_less - p2 / 2.0).abs() < 1e-15);
    let loss = b.loss_delta.unwrap();
    assert!((loss.p_two_sided - 0.8587465).abs() < 1e-7, "{}", loss.p_two_sided);

    let text = v.render(Format::Text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Verdict: REACHED (target val loss 3.28 within 1390 steps)");
    assert_eq!(
        lines[1],
        "  mean val loss 3.2784 ≤ 3.28; one-sided t-test of mean < 3.28: p = 0.0007 \
         (t = −4.15, df = 12), below 0.01"
    );
    // Label left, figure right-aligned: losses to 4 decimals, times to 0.1 s.
    let row = |label: &str| {
        let line = lines[2..].iter().find(|l| l.trim_start().starts_with(label)).unwrap();
        let cells: Vec<&str> = line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        (cells, line.chars().count())
    };
    let (runs, width) = row("runs");
    assert_eq!(runs, ["runs", "13"]);
    for (label, figure) in [
        ("mean val loss", "3.2784"),
        ("val loss sample std", "0.0014"),
        ("one-sided t-test of mean < 3.28", "p = 0.0007 (t = −4.15, df = 12)"),
        ("mean train time", "79.7 s"),
        ("train time range", "79.5 s – 80.2 s"),
    ] {
        assert_eq!(row(label), (vec![label, figure], width), "{text}");
    }
    assert!(!text.contains('|'), "markdown only with --format md: {text}");
    for needle in [
        "Official (upstream 8×H100): record time 79.7 s; ours/official mean time = 1.00×",
        " 11     1390/1390           3.2806       79.5 s   never\n",
        "- train time: −1.0 s (−1.3%), speedup 1.013×",
        "- Welch's t-test of candidate time < baseline time: p = 2.5e−12 (t = −19.39, df = 15.0); \
         two-sided p = 4.9e−12",
        "- Welch's two-sided t-test of candidate val loss = baseline val loss: p = 0.8587",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let md = v.render(Format::Markdown);
    let loss = md.lines().find(|l| l.starts_with("| mean val loss ")).expect(&md);
    assert!(loss.ends_with(" 3.2784 |"), "{md}");
    assert!(md.lines().any(|l| l.starts_with("|---") && l.ends_with(":|")), "{md}");
}

#[test]
fn verdict_needs_significance_and_finished_runs() {
    // Mean below target but too noisy for p < 0.01.
    let v = Verdict::new(&[run(3.270, 1000.0, 20), run(3.289, 1000.0, 20)], 3.28, 1.0, 20).unwrap();
    assert!(!v.reached);
    assert!(v.reason.contains("not below 0.01"), "{}", v.reason);

    // One run below target counts without a p-value.
    let v = Verdict::new(&[run(3.27, 1000.0, 20)], 3.28, 1.0, 20).unwrap();
    assert!(v.reached && v.loss_test.is_none());
    assert_eq!(v.runs[0].first_at_target.as_ref().unwrap().step, 20);

    // A run that stopped early fails the verdict.
    let v = Verdict::new(&[run(3.27, 1000.0, 20), run(3.27, 500.0, 10)], 3.28, 1.0, 20).unwrap();
    assert!(!v.reached);
    assert!(v.reason.contains("1 of 2 runs"), "{}", v.reason);
    assert!(v.render(Format::Text).contains("10/20 (unfinished)"));

    // Same-seed repeats: identical losses, no t-test.
    let v = Verdict::new(&[run(3.27, 1000.0, 20), run(3.27, 1001.0, 20)], 3.28, 1.0, 20).unwrap();
    assert!(v.reached && v.loss_test.is_none());
    assert!(v.reason.contains("same seed"), "{}", v.reason);

    assert!(Verdict::new(&[], 3.28, 1.0, 20).is_err());
}

#[test]
fn verdict_round_trips_through_json() {
    let v = Verdict::new(&runs(&PR_LOSSES, &PR_TIMES), 3.28, 79.7, 1390)
        .unwrap()
        .with_baseline(&runs(&BASE_LOSSES, &BASE_TIMES));
    let json = serde_json::to_string(&v).unwrap();
    let back: Verdict = serde_json::from_str(&json).unwrap();
    assert_eq!(back, v);
}

/// What `records verdict` makes of `bytes` as a log file: its verdict, or its error.
fn judge_file(dir: &std::path::Path, bytes: &[u8]) -> Result<String, String> {
    let path = dir.join("run.log");
    std::fs::write(&path, bytes).unwrap();
    let log = runlog::parse_for_verdict(&path).map_err(|e| format!("{e:#}"))?;
    let v = Verdict::of_logs(&[log], 3.28, None).map_err(|e| e.to_string())?;
    Ok(v.render(Format::Text))
}

/// A log cut at any byte (a copy that stopped early, a full disk) is judged exactly as its
/// prefix of whole lines, or refused naming the cut line: a figure cut short (`val_loss:3.2`
/// of `val_loss:3.2783`) never counts.
#[test]
fn a_log_cut_at_any_byte_is_judged_as_its_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    // A multi-byte character, so some cuts fall inside one.
    let banner = format!("# ─── train_gpt.py ─── (×8)\n{CURRENT}");
    for text in [LLMC, OCT_2024, CURRENT, OURS, TRACK_3, banner.as_str()] {
        let bytes = text.as_bytes();
        for k in 0..=bytes.len() {
            let cut = &bytes[..k];
            let whole = &cut[..cut.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)];
            let at = || format!("cut after byte {k} of\n{text}");
            match (judge_file(dir.path(), cut), judge_file(dir.path(), whole)) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{}", at()),
                (Err(got), Err(want)) => {
                    assert!(
                        got == want || got.contains(" ends without a newline"),
                        "{got}: {}",
                        at()
                    )
                }
                (got, want) => panic!("{got:?} but its whole lines give {want:?}: {}", at()),
            }
        }
    }
}

#[test]
fn a_cut_last_line_is_kept_aside_with_its_number() {
    let text = "step:1750/1920 val_loss:3.3090 train_time:108500ms step_avg:62.00ms\n\
                step:1920/1920 train_time:119602ms step_avg:62.29ms\n\
                step:1920/1920 val_loss:3.2";
    let log = runlog::parse(text);
    assert_eq!(log.cut, Some((3, "step:1920/1920 val_loss:3.2".to_string())));
    assert_eq!(log.final_val().unwrap().step, 1750);
    assert_eq!(log.stated_steps(), Some(1920));
    assert_eq!(runlog::parse(&format!("{text}\n")).final_val().unwrap().val_loss, 3.2);
}
